// Entry point TensorBoard loads in the plugin iframe: `render()` wires the
// selection, the page's views, the controller and what survives a reload.

import { Api } from './api';
import { App } from './app';
import { el } from './dom';
import { followHostTheme, hostPageUrl, linkData } from './host';
import { defaultStorage, hashPluginData, keepInStorage, savedSelection } from './lib/saved-selection';
import { Readiness } from './readiness';
import { Selection } from './selection';
import { CSS } from './styles';
import { PageView } from './views/page';
import { ViewLinkView } from './views/view-link';

/** The plugin's name in TensorBoard: its `p.memory.*` URL keys carry a link's selection. */
const PLUGIN_NAME = 'memory';

let app: App | null = null;

/**
 * Whether anything may have been chosen before, read at once from storage and
 * TensorBoard's address (the host's answer comes from the same address): when
 * nothing was, the opening step is asked for without waiting for the host.
 */
function mayHaveChosenBefore(storage: Storage | null): boolean {
  let hash = '';
  try {
    if (window.parent !== window) hash = window.parent.location.hash;
  } catch {
    return true; // a parent of another origin: only the host can tell
  }
  return savedSelection(storage, hashPluginData(hash, PLUGIN_NAME)) !== null;
}

export function render(): void {
  if (app) return;
  document.body.dataset.ready = '0';
  const selection = new Selection();
  const readiness = new Readiness();
  const link = new ViewLinkView(selection, hostPageUrl(), PLUGIN_NAME);
  const page = new PageView(selection, readiness.status, link.element);
  readiness.mirrorOn(page.root);
  if (!document.getElementById('tb-memory-style')) document.head.append(el('style', { id: 'tb-memory-style' }, CSS));
  followHostTheme();
  document.body.replaceChildren(page.root);

  // Chosen before: a link's selection (TensorBoard's address, when new to this browser) or the
  // last visit's (storage); from then on every change is kept, so a reload comes back to it.
  const storage = defaultStorage();
  const openingNow = !mayHaveChosenBefore(storage);
  const chosenBefore = linkData(PLUGIN_NAME).then((data) => {
    const found = savedSelection(storage, data);
    keepInStorage(selection, storage, found?.link ?? '');
    return found?.saved ?? null;
  });
  app = new App(selection, page, readiness, new Api());
  void app.start(chosenBefore, openingNow);
}
