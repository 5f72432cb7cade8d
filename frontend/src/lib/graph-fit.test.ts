import { describe, expect, it } from 'vitest';
import { graphNode } from '../test-fixtures/graph';
import type { GraphNode } from '../api';
import { fitTransform, layoutBounds, panIntoView, readableScale } from './graph-fit';
import type { GraphLayout } from './graph-layout';

const node = (id: string): GraphNode => graphNode(id);

const layout = (edgePoints: { x: number; y: number }[] = []): GraphLayout => ({
  nodes: [
    { node: node('a'), x: 100, y: 50, width: 80, height: 30 },
    { node: node('b'), x: 100, y: 150, width: 120, height: 30 },
  ],
  edges: edgePoints.length ? [{ edge: { source: 'a', target: 'b', count: 1 }, points: edgePoints }] : [],
  width: 200,
  height: 200,
});

describe('layoutBounds', () => {
  it('covers every box', () => {
    expect(layoutBounds(layout())).toEqual({ x0: 40, y0: 35, x1: 160, y1: 165 });
  });

  it('covers edges routed outside the boxes (and ignores non-finite points)', () => {
    const b = layoutBounds(layout([{ x: 100, y: 65 }, { x: -30, y: 100 }, { x: NaN, y: 1 }, { x: 100, y: 135 }]));
    expect(b).toEqual({ x0: -30, y0: 35, x1: 160, y1: 165 });
  });

  it('is null for an empty layout', () => {
    expect(layoutBounds({ nodes: [], edges: [], width: 0, height: 0 })).toBeNull();
  });
});

describe('fitTransform', () => {
  const opts = { minScale: readableScale(11, 9), maxScale: 1.2, padding: 8 };

  it('centres a small graph at no more than the largest scale', () => {
    const t = fitTransform({ x0: 0, y0: 0, x1: 100, y1: 50 }, 400, 300, opts);
    expect(t.k).toBe(1.2);
    expect(t.tx).toBeCloseTo((400 - 120) / 2);
    expect(t.ty).toBeCloseTo((300 - 60) / 2);
  });

  it('shrinks a graph that fits at a readable scale so that all of it, edges included, is in view', () => {
    const b = { x0: -20, y0: 10, x1: 420, y1: 310 };
    const t = fitTransform(b, 400, 300, opts);
    expect(t.k).toBeGreaterThanOrEqual(opts.minScale);
    expect(b.x0 * t.k + t.tx).toBeGreaterThanOrEqual(8 - 1e-9);
    expect(b.x1 * t.k + t.tx).toBeLessThanOrEqual(400 - 8 + 1e-9);
    expect(b.y0 * t.k + t.ty).toBeGreaterThanOrEqual(8 - 1e-9);
    expect(b.y1 * t.k + t.ty).toBeLessThanOrEqual(300 - 8 + 1e-9);
  });

  it('never zooms out below the readable scale: a wide graph keeps its anchor in view, edges clamped', () => {
    const b = { x0: 0, y0: 0, x1: 3000, y1: 200 };
    const readable = opts.minScale;
    const t = fitTransform(b, 400, 300, { ...opts, anchor: { x: 1500, y: 100 } });
    expect(t.k).toBeCloseTo(readable);
    expect(1500 * t.k + t.tx).toBeCloseTo(200); // anchor at the view's centre
    // The anchor near the left end: the graph's left edge stays at the padding, no empty space before it.
    const left = fitTransform(b, 400, 300, { ...opts, anchor: { x: 10, y: 100 } });
    expect(b.x0 * left.k + left.tx).toBeCloseTo(8);
    // Near the right end: its right edge stays at the far padding.
    const right = fitTransform(b, 400, 300, { ...opts, anchor: { x: 2990, y: 100 } });
    expect(b.x1 * right.k + right.tx).toBeCloseTo(400 - 8);
  });

  it('starts a tall graph at its top when no anchor is given', () => {
    const b = { x0: 0, y0: 0, x1: 200, y1: 5000 };
    const t = fitTransform(b, 400, 300, opts);
    expect(t.k).toBeCloseTo(opts.minScale);
    expect(b.y0 * t.k + t.ty).toBeCloseTo(8);
    expect(t.tx).toBeCloseTo((400 - 200 * t.k) / 2);
  });
});

describe('readableScale', () => {
  it('is the zoom at which a font shows at the minimum size', () => {
    expect(readableScale(11, 9)).toBeCloseTo(9 / 11);
    expect(readableScale(0, 9)).toBe(1);
  });
});

describe('panIntoView', () => {
  const t = { k: 0.5, tx: 10, ty: 20 };

  it('leaves a box already in view where it is', () => {
    expect(panIntoView({ x0: 0, y0: 0, x1: 100, y1: 40 }, t, 400, 300, 4)).toBeNull();
  });

  it('centres a box out of view, keeping the zoom', () => {
    const moved = panIntoView({ x0: 1000, y0: 2000, x1: 1100, y1: 2040 }, t, 400, 300, 4)!;
    expect(moved.k).toBe(0.5);
    expect(1050 * moved.k + moved.tx).toBeCloseTo(200);
    expect(2020 * moved.k + moved.ty).toBeCloseTo(150);
  });

  it('moves a box cut by the view’s edge', () => {
    expect(panIntoView({ x0: 770, y0: 0, x1: 830, y1: 40 }, t, 400, 300, 4)).not.toBeNull();
  });
});
