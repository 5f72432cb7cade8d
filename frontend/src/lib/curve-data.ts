// Pure transforms behind the memory curve: relative bytes, stacking, lookups.

import type { CurveResponse } from '../api';

export interface SeriesInput {
  scope: string | null;
  name: string;
  bytes: readonly number[];
}

export interface StackedLayer {
  scope: string | null;
  name: string;
  /** Lower and upper edge of the layer at each point. */
  y0: number[];
  y1: number[];
  /** Largest absolute value the series reaches: how layers are ranked. */
  max: number;
}

export const OTHER_SERIES = '(other)';

/** One scope's series drawn over the curve: the selection's highlight. */
export interface HighlightSeries {
  scope: string;
  name: string;
  t_us: readonly number[];
  /** Bytes the scope holds at each time, relative to the step's start. */
  bytes: readonly number[];
}

/** The scope's own series in a curve answer as a highlight, or null when the answer has none for it. */
export function highlightOf(
  curve: { t_us: readonly number[]; series: readonly SeriesInput[] },
  scope: string,
): HighlightSeries | null {
  const series = curve.series.find((s) => s.scope === scope);
  return series ? { scope, name: series.name, t_us: curve.t_us, bytes: series.bytes } : null;
}

/** Bytes relative to the step's start: what the series add up to. */
export function relativeBytes(maxBytes: readonly number[], absolute: boolean, startBytes: number | null): number[] {
  const offset = absolute && startBytes !== null ? startBytes : 0;
  return maxBytes.map((b) => b - offset);
}

function largestAbs(values: readonly number[]): number {
  let m = 0;
  for (const v of values) if (Math.abs(v) > m) m = Math.abs(v);
  return m;
}

/**
 * Stacks series into layers: the `top` largest named series each get a layer,
 * everything else (the server's "(other)" included) sums into one "(other)"
 * layer drawn last. Positive bytes stack upward from 0, negative bytes (frees
 * of memory held before the step) downward, so layers never overlap and the
 * top edge of the positive stack plus the negative one equals the sum.
 * A series missing from `rankBy` is ranked by its own bytes.
 */
export function stackSeries(series: readonly SeriesInput[], top: number, rankBy?: readonly SeriesInput[]): StackedLayer[] {
  const length = series.reduce((n, s) => Math.max(n, s.bytes.length), 0);
  // Ranked by `rankBy` (the whole step's series) when given, so that a zoomed
  // window keeps each scope's layer, colour and place in the stack.
  const rankOf = new Map((rankBy ?? []).filter((s) => s.scope !== null).map((s) => [s.scope, largestAbs(s.bytes)]));
  const named = series
    .filter((s) => s.scope !== null)
    .map((s) => ({ s, max: rankOf.get(s.scope) ?? largestAbs(s.bytes) }))
    .sort((a, b) => b.max - a.max);
  const kept = named.slice(0, Math.max(0, top));
  const rest = [...named.slice(Math.max(0, top)).map((x) => x.s), ...series.filter((s) => s.scope === null)];

  const inputs: SeriesInput[] = kept.map((x) => x.s);
  if (rest.length > 0) {
    const other = new Array<number>(length).fill(0);
    for (const s of rest) s.bytes.forEach((b, i) => (other[i] = (other[i] ?? 0) + b));
    inputs.push({ scope: null, name: OTHER_SERIES, bytes: other });
  }

  const up = new Array<number>(length).fill(0);
  const down = new Array<number>(length).fill(0);
  return inputs.map((s) => {
    const y0: number[] = [];
    const y1: number[] = [];
    for (let i = 0; i < length; i++) {
      const b = s.bytes[i] ?? 0;
      if (b >= 0) {
        y0.push(up[i]!);
        up[i] = up[i]! + b;
        y1.push(up[i]!);
      } else {
        y0.push(down[i]!);
        down[i] = down[i]! + b;
        y1.push(down[i]!);
      }
    }
    return { scope: s.scope, name: s.name, y0, y1, max: largestAbs(s.bytes) };
  });
}

/** Index of the point whose time is nearest to t (times sorted ascending); -1 for no points. */
export function nearestIndex(times: readonly number[], t: number): number {
  if (times.length === 0) return -1;
  let lo = 0;
  let hi = times.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(times[lo - 1]! - t) <= Math.abs(times[lo]! - t)) return lo - 1;
  return lo;
}

/** Index of the last point at or before t: the value a step function holds at t; -1 before the first. */
export function stepIndexAt(times: readonly number[], t: number): number {
  let lo = 0;
  let hi = times.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid]! <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** Number of curve buckets to ask for: about one per pixel, within the route's 16..20000. */
export function curvePointsFor(widthPx: number): number {
  const points = Math.round(widthPx);
  if (!Number.isFinite(points)) return 800;
  return Math.min(20000, Math.max(16, points));
}

/** A drag of fewer pixels than this is a click, not a zoom. */
export const MIN_ZOOM_PX = 4;

/** A pixel clamped to the plot's pixels (`plot`, either way round), or as it is without them. */
export function withinPlot(px: number, plot?: readonly [number, number]): number {
  return plot ? Math.min(Math.max(px, Math.min(...plot)), Math.max(...plot)) : px;
}

/** Turns a dragged pixel span into a time range, or null when it is too small to mean a zoom. The span is
 * kept within `plot` (the plot's pixels, where given): a drag begun in the axis' margin had zoomed to a
 * window starting before the step (-10 ms, trial AM). */
export function zoomRange(
  x0: number,
  x1: number,
  invert: (px: number) => number,
  plot?: readonly [number, number],
): { start_us: number; end_us: number } | null {
  const lo = withinPlot(Math.min(x0, x1), plot);
  const hi = withinPlot(Math.max(x0, x1), plot);
  if (hi - lo < MIN_ZOOM_PX) return null;
  const start = Math.round(invert(lo));
  const end = Math.round(invert(hi));
  if (end <= start) return null;
  return { start_us: start, end_us: end };
}

/** A curve answer shown as the rise over the step's start, where it came in absolute bytes (the summary's
 * "show rise"): every value less the start, the peak its rise, no allocator limit (a limit on absolute
 * bytes has no place on that axis); `rise_from` keeps the start, for the caption. Relative answers as they are. */
export function asRise(c: CurveResponse): CurveResponse & { rise_from?: number } {
  const start = c.start_bytes;
  if (!c.absolute || start === null) return c;
  const less = (values: readonly number[]) => values.map((v) => v - start);
  const series = c.snapshots.series;
  return {
    ...c,
    absolute: false,
    start_bytes: null,
    rise_from: start,
    min_bytes: less(c.min_bytes),
    max_bytes: less(c.max_bytes),
    snapshots: {
      ...c.snapshots,
      bytes: less(c.snapshots.bytes),
      ...(series ? { series: Object.fromEntries(Object.entries(series).map(([k, v]) => [k, k === 'reserved_bytes' ? less(v) : v])) } : {}),
    },
    peak: c.peak ? { ...c.peak, bytes: c.peak.rise_bytes } : null,
    capacity_bytes: null,
  };
}
