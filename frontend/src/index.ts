// Entry point TensorBoard loads in the plugin iframe: `render()` builds the page.

import { App } from './app';

let app: App | null = null;

export function render(): void {
  if (app) return;
  document.body.dataset.ready = '0';
  app = new App(document.body);
  app.mount();
}
