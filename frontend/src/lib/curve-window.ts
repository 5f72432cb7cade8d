// A zoomed curve: when to ask the curve route for the visible window alone
// (start_us/end_us), and which data the curve view draws meanwhile and after.
//
// The whole step's curve has about one bucket per pixel of the full step, so a
// zoomed view of it shows wide steps. The route buckets a window on its own,
// so the view asks for the visible window once a zoom settles and draws that
// when it has it; until then, and when zoomed out to the full extent, it draws
// the whole step's curve (clipped to the visible range).

import type { CurveResponse, CurveSeries, CurveWindow } from '../api';
import { stepIndexAt } from './curve-data';

/** How long a zoom must stay put before the window is fetched (drags and resets in a row cost one request). */
export const WINDOW_FETCH_DELAY_MS = 150;

/**
 * The visible range cut to the step, in whole microseconds (widened, never
 * narrowed, by the rounding); null for no range, or one with nothing left.
 * `durationUs` null: the step's length is not known, only 0 bounds the range.
 */
export function clampWindow(range: CurveWindow | null, durationUs: number | null): CurveWindow | null {
  if (!range) return null;
  const start = Math.max(0, Math.floor(range.start_us));
  const end = durationUs === null ? Math.ceil(range.end_us) : Math.min(Math.ceil(range.end_us), Math.max(0, Math.ceil(durationUs)));
  if (!Number.isFinite(start) || !Number.isFinite(end) || end <= start) return null;
  return { start_us: start, end_us: end };
}

/**
 * The window to ask the curve route for, or null when the whole step's curve
 * is what to draw: no zoom, or a zoom out to the step's full extent.
 */
export function windowToFetch(range: CurveWindow | null, durationUs: number | null): CurveWindow | null {
  const w = clampWindow(range, durationUs);
  if (!w) return null;
  if (durationUs !== null && w.start_us <= 0 && w.end_us >= durationUs) return null;
  return w;
}

/** True when `outer` spans all of `inner`. */
export function covers(outer: CurveWindow | null, inner: CurveWindow | null): boolean {
  return !!outer && !!inner && outer.start_us <= inner.start_us && outer.end_us >= inner.end_us;
}

export function sameWindow(a: CurveWindow | null, b: CurveWindow | null): boolean {
  return a === b || (!!a && !!b && a.start_us === b.start_us && a.end_us === b.end_us);
}

/**
 * True when a window has to be fetched for `range`: the loaded window data
 * (if any) is not for exactly that window. Data for a wider window is drawn
 * meanwhile but is coarser, so it is asked again.
 */
export function needsWindowFetch(
  range: CurveWindow | null,
  durationUs: number | null,
  loaded: CurveWindow | null,
): CurveWindow | null {
  const want = windowToFetch(range, durationUs);
  if (!want || sameWindow(want, loaded)) return null;
  return want;
}

/** The points the curve view draws: the route's shape, plus where they came from. */
export interface DrawnCurve
  extends Pick<CurveResponse, 't_us' | 'min_bytes' | 'max_bytes' | 'node_at' | 'node_names' | 'snapshots' | 'series'> {
  /** "window": the route's data for `window`, padded to its edges; "step": the whole step's. */
  source: 'window' | 'step';
  window: CurveWindow | null;
}

function asDrawn(c: CurveResponse): DrawnCurve {
  return {
    source: 'step',
    window: null,
    t_us: c.t_us,
    min_bytes: c.min_bytes,
    max_bytes: c.max_bytes,
    node_at: c.node_at,
    node_names: c.node_names,
    snapshots: c.snapshots,
    series: c.series,
  };
}

function seriesKey(s: CurveSeries): string {
  return s.scope === null ? `\u0000${s.name}` : s.scope;
}

/**
 * What to draw for the visible `range`: the window's data when it was loaded
 * for a window that covers the range (a zoom further in keeps it until a finer
 * one comes), else the whole step's.
 *
 * The window's buckets start at its first event and end at its last, so the
 * drawn data gets a point at each edge of the window: at its start the value
 * the whole step's curve holds there (the value carried into the window; its
 * bucket's range and series, read from the step's data: nothing finer is
 * known), at its end the window's last value held on. Every drawn point then
 * lies in the window, and the line spans it from edge to edge.
 */
export function curveToDraw(step: CurveResponse, windowed: CurveResponse | null, range: CurveWindow | null): DrawnCurve {
  const visible = clampWindow(range, step.duration_us);
  const w = windowed?.window ?? null;
  if (!windowed || !w || !visible || !covers(w, visible)) return asDrawn(step);

  const t_us = [...windowed.t_us];
  const min_bytes = [...windowed.min_bytes];
  const max_bytes = [...windowed.max_bytes];
  const node_at = [...windowed.node_at];
  const node_names = [...windowed.node_names];
  const series = windowed.series.map((s) => ({ ...s, bytes: [...s.bytes] }));

  if (t_us.length === 0 || t_us[0]! > w.start_us) {
    // The value carried in, from the whole step's curve.
    const j = stepIndexAt(step.t_us, w.start_us);
    const offset = step.absolute && step.start_bytes !== null ? step.start_bytes : 0;
    const stepSeries = new Map(step.series.map((s) => [seriesKey(s), s.bytes]));
    let nodeIndex = -1;
    const name = j >= 0 ? step.node_names[step.node_at[j] ?? -1] : undefined;
    if (name !== undefined) {
      nodeIndex = node_names.indexOf(name);
      if (nodeIndex < 0) nodeIndex = node_names.push(name) - 1;
    }
    t_us.unshift(w.start_us);
    min_bytes.unshift(j >= 0 ? step.min_bytes[j]! : offset);
    max_bytes.unshift(j >= 0 ? step.max_bytes[j]! : offset);
    node_at.unshift(nodeIndex);
    for (const s of series) s.bytes.unshift(j >= 0 ? (stepSeries.get(seriesKey(s))?.[j] ?? 0) : 0);
  }
  const last = t_us.length - 1;
  if (t_us[last]! < w.end_us) {
    t_us.push(w.end_us);
    min_bytes.push(min_bytes[last]!);
    max_bytes.push(max_bytes[last]!);
    node_at.push(node_at[last]!);
    for (const s of series) s.bytes.push(s.bytes[last] ?? 0);
  }
  return { source: 'window', window: w, t_us, min_bytes, max_bytes, node_at, node_names, snapshots: windowed.snapshots, series };
}

export interface HighlightInput {
  scope: string;
  name: string;
  t_us: readonly number[];
  bytes: readonly number[];
}

/**
 * The selected scope's series on the drawn points when the drawn data has it
 * (a window's series are finer than the step's); else the one given.
 */
export function highlightOn<H extends HighlightInput>(drawn: DrawnCurve | null, highlight: H | null): H | null {
  if (!drawn || !highlight || drawn.source !== 'window') return highlight;
  const own = drawn.series.find((s) => s.scope === highlight.scope);
  if (!own || own.bytes.length !== drawn.t_us.length) return highlight;
  return { ...highlight, t_us: drawn.t_us, bytes: own.bytes };
}
