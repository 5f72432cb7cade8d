// TensorBoard's plugin host as iframe plugins reach it (the protocol of
// tensorboard/components/experimental/plugin_lib): a MessagePort handed to the
// parent with "experimental.bootstrap", then JSON messages
// {type, id, payload, error, isReply} over it. Only the read of the host's
// `p.<plugin>.*` URL hash keys is used; the host offers no way to write them.

import { hashPluginData } from './lib/saved-selection';

const GET_URL_DATA = 'experimental.GetURLPluginData';

/**
 * The `p.<pluginName>.*` keys of TensorBoard's address: the host's answer, or,
 * when it has none, the parent page's hash read directly. (TensorBoard 2.21
 * parses its hash before it starts using it, so on a fresh load the host
 * answers {} until the hash next changes.) Null outside TensorBoard.
 */
export async function linkData(pluginName: string): Promise<Record<string, string> | null> {
  const fromHost = await urlPluginData(pluginName);
  if (fromHost && Object.keys(fromHost).length > 0) return fromHost;
  try {
    if (window.parent === window) return fromHost;
    return hashPluginData(window.parent.location.hash, pluginName);
  } catch {
    return fromHost; // a parent of another origin: only the host's answer counts
  }
}

/** TensorBoard's page address without its hash, for links to a view; null when it cannot be known. */
export function hostPageUrl(): string | null {
  try {
    if (window.parent !== window) {
      const top = window.parent.location;
      return `${top.origin}${top.pathname}${top.search}`;
    }
  } catch {
    // Another origin: derive it from this frame's address below.
  }
  const here = window.location.href;
  const cut = here.indexOf('data/plugin_entry.html');
  return cut >= 0 ? here.slice(0, cut) : null;
}

/**
 * The `p.<pluginName>.<key>=value` keys of TensorBoard's address, as {key: value};
 * null outside TensorBoard, when the host does not answer within `timeoutMs`,
 * or when it answers an error.
 */
export function urlPluginData(pluginName: string, timeoutMs = 400): Promise<Record<string, string> | null> {
  if (typeof window === 'undefined' || window.parent === window || typeof MessageChannel === 'undefined') {
    return Promise.resolve(null);
  }
  const channel = new MessageChannel();
  return new Promise((resolve) => {
    const done = (value: Record<string, string> | null) => {
      clearTimeout(timer);
      channel.port1.close();
      resolve(value);
    };
    const timer = setTimeout(() => done(null), timeoutMs);
    channel.port1.onmessage = (event: MessageEvent) => {
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      const m = message as { isReply?: unknown; id?: unknown; error?: unknown; payload?: unknown };
      if (m.isReply !== true || m.id !== 0) return; // the host's own broadcasts (runs changed, reloads)
      done(m.error ? null : stringRecord(m.payload));
    };
    try {
      window.parent.postMessage('experimental.bootstrap', window.location.origin, [channel.port2]);
      channel.port1.postMessage(JSON.stringify({ type: GET_URL_DATA, id: 0, payload: { pluginName }, error: null, isReply: false }));
    } catch {
      done(null);
    }
  });
}

function stringRecord(value: unknown): Record<string, string> | null {
  if (!value || typeof value !== 'object') return null;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}


/**
 * The page's theme as TensorBoard's own: its dark-mode toggle sets `dark-mode` on the host page's
 * body (whatever the system's scheme), which the plugin's frame does not inherit. Followed as it
 * changes; nothing outside TensorBoard or across origins (the system's scheme applies there).
 */
export function followHostTheme(root: HTMLElement = document.documentElement): void {
  let body: HTMLElement | null = null;
  try {
    if (window.parent !== window) body = window.parent.document.body;
  } catch {
    return; // a parent of another origin
  }
  if (!body) return;
  const hostBody = body;
  const apply = () => themeFrom(hostBody, root);
  apply();
  new MutationObserver(apply).observe(hostBody, { attributes: true, attributeFilter: ['class'] });
}

/** Sets `root`'s data-theme from the host body's `dark-mode` class. */
export function themeFrom(hostBody: HTMLElement, root: HTMLElement): void {
  root.dataset.theme = hostBody.classList.contains('dark-mode') ? 'dark' : 'light';
}
