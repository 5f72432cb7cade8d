// Where the graph view starts: a zoom that shows as much of the graph as fits
// while its labels stay readable, and a pan that keeps the graph's biggest box
// in view when the whole graph does not fit. Pure, so it is tested without a DOM.

import type { GraphLayout } from './graph-layout';

export interface Bounds {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export interface Transform {
  k: number;
  tx: number;
  ty: number;
}

/** Box around every node and every edge point (dagre's own width and height leave out edges routed around the side). */
export function layoutBounds(layout: GraphLayout): Bounds | null {
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const n of layout.nodes) {
    x0 = Math.min(x0, n.x - n.width / 2);
    x1 = Math.max(x1, n.x + n.width / 2);
    y0 = Math.min(y0, n.y - n.height / 2);
    y1 = Math.max(y1, n.y + n.height / 2);
  }
  for (const e of layout.edges) {
    for (const p of e.points) {
      if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) continue;
      x0 = Math.min(x0, p.x);
      x1 = Math.max(x1, p.x);
      y0 = Math.min(y0, p.y);
      y1 = Math.max(y1, p.y);
    }
  }
  return Number.isFinite(x0) && Number.isFinite(y0) ? { x0, y0, x1, y1 } : null;
}

export interface FitOptions {
  /** Smallest zoom: the one at which the smallest label is still readable. */
  minScale: number;
  /** Largest zoom a fit uses (a tiny graph is not blown up). */
  maxScale: number;
  /** Pixels kept free around the graph. */
  padding: number;
  /** Layout point kept in view when the graph is larger than the view (e.g. the biggest box's centre). */
  anchor?: { x: number; y: number } | null;
}

/**
 * Scale and translation (screen = layout * k + t) for a view of `width` x `height` pixels.
 * The whole graph when it fits at a readable scale, centred; otherwise the readable
 * scale, centred on the anchor along each axis that does not fit, without leaving
 * empty space beyond the graph's edge on that axis.
 */
export function fitTransform(bounds: Bounds, width: number, height: number, options: FitOptions): Transform {
  const pad = options.padding;
  const bw = Math.max(1, bounds.x1 - bounds.x0);
  const bh = Math.max(1, bounds.y1 - bounds.y0);
  const fitAll = Math.min((width - 2 * pad) / bw, (height - 2 * pad) / bh);
  const k = Math.max(options.minScale, Math.min(options.maxScale, fitAll));
  const anchor = options.anchor ?? { x: (bounds.x0 + bounds.x1) / 2, y: bounds.y0 };
  const axis = (lo: number, hi: number, view: number, at: number): number => {
    const size = (hi - lo) * k;
    if (size + 2 * pad <= view) return (view - size) / 2 - lo * k; // fits: centred
    const centred = view / 2 - at * k;
    // Not past the graph's first edge (t <= pad - lo*k) nor its last (t >= view - pad - hi*k).
    return Math.min(pad - lo * k, Math.max(view - pad - hi * k, centred));
  };
  return { k, tx: axis(bounds.x0, bounds.x1, width, anchor.x), ty: axis(bounds.y0, bounds.y1, height, anchor.y) };
}

/** Zoom at which text of `fontPx` shows at `minPx` on screen. */
export function readableScale(fontPx: number, minPx: number): number {
  return fontPx > 0 ? minPx / fontPx : 1;
}

/**
 * The same zoom, panned so that `box` (layout coordinates) is in view, centred
 * on it; null when it is already wholly in view (then nothing should move).
 */
export function panIntoView(box: Bounds, t: Transform, width: number, height: number, padding = 0): Transform | null {
  const left = box.x0 * t.k + t.tx;
  const right = box.x1 * t.k + t.tx;
  const top = box.y0 * t.k + t.ty;
  const bottom = box.y1 * t.k + t.ty;
  if (left >= padding && right <= width - padding && top >= padding && bottom <= height - padding) return null;
  const cx = (box.x0 + box.x1) / 2;
  const cy = (box.y0 + box.y1) / 2;
  return { k: t.k, tx: width / 2 - cx * t.k, ty: height / 2 - cy * t.k };
}
