// "link": an address of TensorBoard's page that opens this view (run, step,
// device, grouping, scopes, zoom, and in compare mode the step compared
// against) through TensorBoard's `p.memory.*` URL keys.
// A plain link: copy it to share; following it here changes nothing.

import { el } from '../dom';
import { linkHash } from '../lib/saved-selection';
import type { Selection } from '../selection';

export class ViewLinkView {
  readonly element = el(
    'a',
    { class: 'view-link hidden', 'data-testid': 'view-link', target: '_top', title: 'A link to this view: copy it to share it (the run, step, device, grouping and scopes it shows, and the step it is compared with)' },
    'link',
  );

  /** `pageUrl`: TensorBoard's page address without a hash; null hides the link. */
  constructor(selection: Selection, pageUrl: string | null, plugin: string) {
    const update = () => {
      const state = selection.get();
      const shown = pageUrl !== null && state.run !== null && state.tag !== null;
      this.element.classList.toggle('hidden', !shown);
      if (shown) this.element.setAttribute('href', `${pageUrl}${linkHash(state, plugin)}`);
      else this.element.removeAttribute('href');
    };
    selection.subscribe(update);
    update();
  }
}
