import { describe, expect, it } from 'vitest';
import type { CurveResponse } from '../api';
import {
  clampWindow,
  covers,
  curveToDraw,
  highlightOn,
  needsWindowFetch,
  sameWindow,
  windowToFetch,
} from './curve-window';

function curve(partial: Partial<CurveResponse>): CurveResponse {
  return {
    window: null,
    baseline: 'allocator_bytes_in_use',
    start_bytes: 100,
    absolute: true,
    peak: { time_us: 50, bytes: 190, rise_bytes: 90, node: null },
    duration_us: 100,
    t_us: [],
    min_bytes: [],
    max_bytes: [],
    node_at: [],
    node_names: [],
    snapshots: { t_us: [], bytes: [] },
    series: [],
    ...partial,
  };
}

// The whole step: four buckets.
const step = curve({
  t_us: [0, 20, 50, 80],
  min_bytes: [100, 100, 120, 110],
  max_bytes: [100, 140, 190, 130],
  node_at: [0, 1, 2, 1],
  node_names: ['_arg', 'conv', 'grad'],
  series: [
    { scope: 'm/a', name: 'a', bytes: [0, 30, 60, 20] },
    { scope: null, name: '(other)', bytes: [0, 10, 30, 10] },
  ],
});

// The window 30..60 bucketed on its own: events at 35, 50, 55.
const zoomed = curve({
  window: { start_us: 30, end_us: 60 },
  t_us: [35, 50, 55],
  min_bytes: [125, 170, 150],
  max_bytes: [170, 190, 150],
  node_at: [0, 1, 0],
  node_names: ['relu', 'grad'],
  series: [
    { scope: 'm/a', name: 'a', bytes: [50, 60, 40] },
    { scope: null, name: '(other)', bytes: [20, 30, 10] },
  ],
});

describe('clampWindow', () => {
  it('cuts a range to the step and rounds outward to whole microseconds', () => {
    expect(clampWindow({ start_us: -12.5, end_us: 40.2 }, 100)).toEqual({ start_us: 0, end_us: 41 });
    expect(clampWindow({ start_us: 10.7, end_us: 250 }, 100)).toEqual({ start_us: 10, end_us: 100 });
  });
  it('keeps the range when the step length is unknown', () => {
    expect(clampWindow({ start_us: 10, end_us: 250 }, null)).toEqual({ start_us: 10, end_us: 250 });
  });
  it('gives null for no range or nothing left', () => {
    expect(clampWindow(null, 100)).toBeNull();
    expect(clampWindow({ start_us: 120, end_us: 130 }, 100)).toBeNull();
    expect(clampWindow({ start_us: 5, end_us: 5 }, 100)).toBeNull();
  });
});

describe('windowToFetch', () => {
  it('asks for a zoomed range', () => {
    expect(windowToFetch({ start_us: 30, end_us: 60 }, 100)).toEqual({ start_us: 30, end_us: 60 });
  });
  it('asks nothing without a zoom or zoomed out to the full extent', () => {
    expect(windowToFetch(null, 100)).toBeNull();
    expect(windowToFetch({ start_us: 0, end_us: 100 }, 100)).toBeNull();
    expect(windowToFetch({ start_us: -5, end_us: 130 }, 100)).toBeNull();
  });
  it('asks for the part inside the step of a range that runs past it', () => {
    expect(windowToFetch({ start_us: 40, end_us: 130 }, 100)).toEqual({ start_us: 40, end_us: 100 });
  });
});

describe('needsWindowFetch', () => {
  it('fetches a window not loaded yet, even inside a wider loaded one (that one is coarser)', () => {
    expect(needsWindowFetch({ start_us: 30, end_us: 60 }, 100, null)).toEqual({ start_us: 30, end_us: 60 });
    expect(needsWindowFetch({ start_us: 40, end_us: 50 }, 100, { start_us: 30, end_us: 60 })).toEqual({ start_us: 40, end_us: 50 });
  });
  it('does not fetch the window already loaded, or when the whole step is drawn', () => {
    expect(needsWindowFetch({ start_us: 30, end_us: 60 }, 100, { start_us: 30, end_us: 60 })).toBeNull();
    expect(needsWindowFetch({ start_us: 29.6, end_us: 59.2 }, 100, { start_us: 29, end_us: 60 })).toBeNull();
    expect(needsWindowFetch(null, 100, { start_us: 30, end_us: 60 })).toBeNull();
    expect(needsWindowFetch({ start_us: 0, end_us: 100 }, 100, null)).toBeNull();
  });
});

describe('covers / sameWindow', () => {
  it('compares windows', () => {
    expect(covers({ start_us: 0, end_us: 10 }, { start_us: 2, end_us: 10 })).toBe(true);
    expect(covers({ start_us: 3, end_us: 10 }, { start_us: 2, end_us: 10 })).toBe(false);
    expect(covers(null, { start_us: 2, end_us: 10 })).toBe(false);
    expect(sameWindow({ start_us: 1, end_us: 2 }, { start_us: 1, end_us: 2 })).toBe(true);
    expect(sameWindow(null, null)).toBe(true);
    expect(sameWindow(null, { start_us: 1, end_us: 2 })).toBe(false);
  });
});

describe('curveToDraw', () => {
  it('draws the whole step without a zoom, or while no window data covers the range', () => {
    expect(curveToDraw(step, null, null).source).toBe('step');
    expect(curveToDraw(step, zoomed, null).source).toBe('step');
    expect(curveToDraw(step, null, { start_us: 30, end_us: 60 }).t_us).toEqual(step.t_us);
    // Zoomed out past the loaded window: its data does not cover the view.
    expect(curveToDraw(step, zoomed, { start_us: 20, end_us: 60 }).source).toBe('step');
    // Zoomed out to the full extent.
    expect(curveToDraw(step, zoomed, { start_us: 0, end_us: 100 }).source).toBe('step');
  });

  it('draws the window data padded to the window edges, every point inside it', () => {
    const d = curveToDraw(step, zoomed, { start_us: 30, end_us: 60 });
    expect(d.source).toBe('window');
    expect(d.window).toEqual({ start_us: 30, end_us: 60 });
    expect(d.t_us).toEqual([30, 35, 50, 55, 60]);
    // At 30 the step's curve holds its bucket at 20 (max 140, range 100..140); at 60 the last value holds on.
    expect(d.max_bytes).toEqual([140, 170, 190, 150, 150]);
    expect(d.min_bytes).toEqual([100, 125, 170, 150, 150]);
    expect(d.series.map((s) => s.bytes)).toEqual([
      [30, 50, 60, 40, 40],
      [10, 20, 30, 10, 10],
    ]);
    // The carried-in point names the step's op there ("conv"), added to the window's names.
    expect(d.node_names[d.node_at[0]!]).toBe('conv');
    expect(d.node_at.slice(1).map((i) => d.node_names[i])).toEqual(['relu', 'grad', 'relu', 'relu']);
    for (const t of d.t_us) expect(t >= 30 && t <= 60).toBe(true);
    for (const s of d.series) expect(s.bytes.length).toBe(d.t_us.length);
    // The responses are not changed.
    expect(zoomed.t_us).toEqual([35, 50, 55]);
    expect(zoomed.series[0]!.bytes).toEqual([50, 60, 40]);
  });

  it('keeps a wider window data while a finer one loads (zooming further in)', () => {
    const d = curveToDraw(step, zoomed, { start_us: 40, end_us: 52 });
    expect(d.source).toBe('window');
    expect(d.window).toEqual({ start_us: 30, end_us: 60 });
  });

  it('needs no padding when events sit on the edges', () => {
    const exact = curve({ ...zoomed, t_us: [30, 50, 60] });
    expect(curveToDraw(step, exact, { start_us: 30, end_us: 60 }).t_us).toEqual([30, 50, 60]);
  });

  it('draws a window without events as the value carried in, flat across it', () => {
    const empty = curve({ window: { start_us: 60, end_us: 70 }, series: [{ scope: 'm/a', name: 'a', bytes: [] }] });
    const d = curveToDraw(step, empty, { start_us: 60, end_us: 70 });
    expect(d.t_us).toEqual([60, 70]);
    expect(d.max_bytes).toEqual([190, 190]);
    expect(d.series[0]!.bytes).toEqual([60, 60]);
  });

  it('carries in the start of the step before the first bucket (relative curves start at 0)', () => {
    const late = curve({ ...step, t_us: [10, 20, 50, 80] });
    const w = curve({ window: { start_us: 2, end_us: 8 }, t_us: [4], min_bytes: [100], max_bytes: [105], node_at: [0], node_names: ['x'] });
    expect(curveToDraw(late, w, { start_us: 2, end_us: 8 }).max_bytes).toEqual([100, 105, 105]);
    const relative = curve({ ...late, absolute: false, start_bytes: null, baseline: 'none' });
    const d = curveToDraw(relative, w, { start_us: 2, end_us: 8 });
    expect(d.max_bytes[0]).toBe(0);
    expect(d.node_at[0]).toBe(-1);
  });
});

describe('highlightOn', () => {
  const highlight = { scope: 'm/a', name: 'a', t_us: step.t_us, bytes: step.series[0]!.bytes };
  it('uses the window series of the selected scope when the window is drawn', () => {
    const d = curveToDraw(step, zoomed, { start_us: 30, end_us: 60 });
    const h = highlightOn(d, highlight)!;
    expect(h.t_us).toEqual(d.t_us);
    expect(h.bytes).toEqual([30, 50, 60, 40, 40]);
  });
  it('keeps the given highlight for the whole step, or a scope the window has no series for', () => {
    expect(highlightOn(curveToDraw(step, null, null), highlight)).toBe(highlight);
    const other = { ...highlight, scope: 'm/b' };
    expect(highlightOn(curveToDraw(step, zoomed, { start_us: 30, end_us: 60 }), other)).toBe(other);
    expect(highlightOn(null, null)).toBeNull();
  });
});
