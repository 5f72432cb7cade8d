// Links out of the plugin iframe to the rest of TensorBoard.

/**
 * TensorBoard's root path seen from the plugin iframe. The iframe document is
 * `<root>/data/plugin_entry.html?name=memory` (TensorBoard 2.x) and its
 * resources `<root>/data/plugin/memory/...`; <root> carries --path_prefix and
 * any `/experiment/<id>` part. Returns a path ending in "/".
 */
export function tensorBoardRoot(pathname: string): string {
  const markers = ['/data/plugin/', '/data/plugin_entry.html'];
  let cut = -1;
  for (const marker of markers) {
    const at = pathname.lastIndexOf(marker);
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  const root = cut >= 0 ? pathname.slice(0, cut) : pathname.replace(/\/[^/]*$/, '');
  return root.endsWith('/') ? root : `${root}/`;
}

/** TensorBoard's Graphs dashboard on one run (open with target _top). */
export function graphsDashboardHref(pathname: string, run: string): string {
  return `${tensorBoardRoot(pathname)}#graphs&run=${encodeURIComponent(run)}`;
}
