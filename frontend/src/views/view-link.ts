// "link": an address of TensorBoard's page that opens this view (run, step,
// device, grouping, scopes, zoom, and in compare mode the step compared
// against) through TensorBoard's `p.memory.*` URL keys.
// A click copies it (TensorBoard's own address bar does not follow the view); a
// modified click follows it, which here changes nothing.

import { el } from '../dom';
import { linkHash } from '../lib/saved-selection';
import type { Selection } from '../selection';

/** What copies the link: the Clipboard API where the page may write to it (null: it may not). */
export type CopyText = ((text: string) => Promise<void>) | null;

function clipboardWriter(): CopyText {
  const clipboard = typeof navigator !== 'undefined' ? navigator.clipboard : undefined;
  return clipboard && typeof clipboard.writeText === 'function' ? (text) => clipboard.writeText(text) : null;
}

export class ViewLinkView {
  readonly element = el(
    'a',
    {
      class: 'view-link hidden',
      'data-testid': 'view-link',
      target: '_top',
      title: 'Copies a link to this view, to share it (the run, step, device, grouping and scopes it shows, and the step it is compared with). TensorBoard’s address bar does not follow the view: share this link, not the address. Ctrl/Cmd-click opens it.',
    },
    'copy link',
  );

  /** `pageUrl`: TensorBoard's page address without a hash; null hides the link. A plain click copies it (where the
   * page may write to the clipboard) and says so; a modified click, or one where it may not, follows it. */
  constructor(selection: Selection, pageUrl: string | null, plugin: string, copy: CopyText = clipboardWriter()) {
    const update = () => {
      const state = selection.get();
      const shown = pageUrl !== null && state.run !== null && state.tag !== null;
      this.element.classList.toggle('hidden', !shown);
      if (shown) this.element.setAttribute('href', `${pageUrl}${linkHash(state, plugin)}`);
      else this.element.removeAttribute('href');
    };
    selection.subscribe(update);
    update();
    let reset: ReturnType<typeof setTimeout> | null = null;
    this.element.addEventListener('click', (ev) => {
      const href = this.element.getAttribute('href');
      if (!copy || !href || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      void copy(href).then(
        () => {
          this.element.textContent = 'link copied';
          if (reset) clearTimeout(reset);
          reset = setTimeout(() => {
            this.element.textContent = 'copy link';
          }, 2000);
        },
        () => window.open(href, '_top'), // the clipboard refused: follow it, as a plain link would
      );
    });
  }
}
