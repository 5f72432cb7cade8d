// Redraw a view when its box changes size (the only place views watch their size).

/**
 * Calls `redraw` whenever `node`'s size changes; `widthOnly` ignores height changes
 * (curves and charts depend on width only). No-op where ResizeObserver is missing.
 */
export function onResize(node: Element, redraw: () => void, widthOnly = false): void {
  if (typeof ResizeObserver === 'undefined') return;
  let last = widthOnly ? '0' : ''; // a width of 0 (not laid out yet) draws nothing, as before
  new ResizeObserver(() => {
    const size = widthOnly ? `${node.clientWidth}` : `${node.clientWidth}x${node.clientHeight}`;
    if (size !== last) {
      last = size;
      redraw();
    }
  }).observe(node);
}
