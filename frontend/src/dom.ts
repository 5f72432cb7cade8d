// DOM helpers that only ever set text, never HTML: names come from user files.

type Attrs = Record<string, string | number | boolean | null | undefined>;

/** Creates an element; attributes via setAttribute, content via textContent. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') node.className = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

export function clear(node: Element): void {
  while (node.firstChild) node.removeChild(node.firstChild);
}

/** Shows an in-panel error (data-testid="error") without touching the rest of the panel. */
export function showPanelError(host: HTMLElement, message: string | null): void {
  let box = host.querySelector<HTMLElement>(':scope > .panel-error');
  if (message === null) {
    box?.remove();
    return;
  }
  if (!box) {
    box = el('div', { class: 'panel-error', 'data-testid': 'error', role: 'alert' });
    host.prepend(box);
  }
  box.textContent = message;
}

export function setLoading(host: HTMLElement, loading: boolean): void {
  host.classList.toggle('is-loading', loading);
  host.setAttribute('aria-busy', loading ? 'true' : 'false');
}

/** Starts a download of text as a file (Blob + temporary link). */
export function downloadText(text: string, fileName: string, mime: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: mime }));
  const link = el('a', { href: url, download: fileName, style: 'display:none' });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A path component this long may also wrap after its `_` (`embedding_lookup_grad`); a shorter one stays whole (`unet_08`). */
const LONG_COMPONENT = 12;

/**
 * A name as text that may wrap after its `/`, and inside a long component after its `_` (a `<wbr>`
 * there, which copying leaves out), rather than anywhere inside a word (`lstm_c` / `ell_1`) or
 * after a short component's `_` (`shared_model/unet_` / `08`).
 */
export function breakableText(text: string): (string | HTMLElement)[] {
  const parts = text
    .split(/(?<=\/)/)
    .flatMap((component) => (component.replace(/\/$/, '').length > LONG_COMPONENT ? component.split(/(?<=_)/) : [component]));
  const out: (string | HTMLElement)[] = [];
  parts.forEach((part, i) => {
    if (i > 0) out.push(document.createElement('wbr'));
    out.push(part);
  });
  return out;
}
