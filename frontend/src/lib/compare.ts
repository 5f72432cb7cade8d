// Compare mode's pure logic: which figure to compare, the diverging colour of
// a difference, the order of the scope table, and the two curves scaled each
// to its own length so that a short step and a long one overlay.

import { scaleLinear } from 'd3-scale';
import type { CompareFigures, CompareSide, CurveResponse, Renumbered, StartChange } from '../api';
import { formatBytesDelta } from '../format';
import { stepIndexAt } from './curve-data';

/** Compared at each step's own peak when both have a curve; else by allocated bytes (a side without records has no peak). */
export type CompareFigure = 'bytes' | 'allocated_bytes';

export function compareFigure(a: Pick<CompareSide, 'has_curve'>, b: Pick<CompareSide, 'has_curve'>): CompareFigure {
  return a.has_curve && b.has_curve ? 'bytes' : 'allocated_bytes';
}

export function sideBytes(row: CompareFigures, side: 'a' | 'b', figure: CompareFigure): number {
  return row[`${side}_${figure}`] ?? 0;
}

export function deltaBytes(row: CompareFigures, figure: CompareFigure): number {
  return row[`delta_${figure}`] ?? 0;
}

/** A tile's size: the larger of the two steps, so what shrank stays as visible as what grew. */
export function largerSide(row: CompareFigures, figure: CompareFigure): number {
  return Math.max(sideBytes(row, 'a', figure), sideBytes(row, 'b', figure));
}

/** The share of the scope's bytes below which a change is never painted full strength. */
export const DIVERGING_FLOOR_SHARE = 0.1;

/**
 * The diverging scale's half-width: the largest absolute difference among the rows, but at least a
 * tenth of the scope's bytes (the larger step's) and 1 byte, so 0 sits in the middle and a change of
 * 128 KiB in a 40 MiB scope is pale, not the red of a change of 19 MiB.
 */
export function divergingExtent(rows: readonly CompareFigures[], figure: CompareFigure, scope?: CompareFigures): number {
  let extent = Math.max(1, scope ? DIVERGING_FLOOR_SHARE * largerSide(scope, figure) : 0);
  for (const row of rows) extent = Math.max(extent, Math.abs(deltaBytes(row, figure)));
  return extent;
}

/** Shrank (B held more): blue; the same: light grey; grew (A holds more): red. ColorBrewer RdBu's ends and middle. */
export const DIVERGING_COLOURS = { shrank: '#2166ac', same: '#f7f7f7', grew: '#b2182b' } as const;

/** The colour of a difference on a diverging scale over [-extent, +extent] (d3-scale's colour interpolation, clamped). */
export function deltaColour(delta: number, extent: number): string {
  const e = Math.max(1, Math.abs(extent));
  return scaleLinear<string>()
    .domain([-e, 0, e])
    .range([DIVERGING_COLOURS.shrank, DIVERGING_COLOURS.same, DIVERGING_COLOURS.grew])
    .clamp(true)(delta);
}

/** Rows by absolute difference (the compared figure, then allocated, then output), largest first; ties by name. */
export function rankByChange<T extends CompareFigures & { name: string }>(rows: readonly T[], figure: CompareFigure): T[] {
  const key = (row: T): number[] => [
    Math.abs(deltaBytes(row, figure)),
    Math.abs(row.delta_allocated_bytes ?? 0),
    Math.abs(row.delta_output_bytes ?? 0),
  ];
  return rows
    .map((row) => ({ row, k: key(row) }))
    .sort((x, y) => y.k[0]! - x.k[0]! || y.k[1]! - x.k[1]! || y.k[2]! - x.k[2]! || (x.row.name < y.row.name ? -1 : x.row.name > y.row.name ? 1 : 0))
    .map((x) => x.row);
}

/** Whether a row holds any bytes in either step (at peak, allocated or output): a variable's read that
 * allocates nothing in either, listed "A only" at 0 B, has nothing to compare. */
export function holdsBytes(row: CompareFigures): boolean {
  return [row.a_bytes, row.b_bytes, row.a_allocated_bytes, row.b_allocated_bytes, row.a_output_bytes, row.b_output_bytes]
    .some((v) => (v ?? 0) !== 0);
}

/** One step's curve on the overlay: x in 0..1 of its own length, y in bytes (absolute, or over the step's start). */
export interface OverlayCurve {
  x: number[];
  y: number[];
  duration_us: number;
  /** The peak on the same axes, or null when the curve never rises. */
  peak: { x: number; y: number } | null;
}

/** Times as fractions of the step's own length (a zero-length step sits at 0). */
export function ownLengthFractions(t_us: readonly number[], duration_us: number): number[] {
  const d = duration_us > 0 ? duration_us : 1;
  return t_us.map((t) => Math.min(1, Math.max(0, t / d)));
}

/**
 * A curve for the overlay. `relative`: both drawn as the rise over their own
 * start (when either step has no baseline, absolute bytes cannot be set side by side).
 */
export function overlayCurve(curve: CurveResponse, relative: boolean): OverlayCurve {
  const offset = relative && curve.absolute && curve.start_bytes !== null ? curve.start_bytes : 0;
  const x = ownLengthFractions(curve.t_us, curve.duration_us);
  const y = curve.max_bytes.map((b) => b - offset);
  const peak = curve.peak
    ? { x: ownLengthFractions([curve.peak.time_us], curve.duration_us)[0]!, y: curve.peak.bytes - offset }
    : null;
  return { x, y, duration_us: curve.duration_us, peak };
}

/** True when both curves can be drawn in absolute bytes. */
export function bothAbsolute(a: Pick<CurveResponse, 'absolute'>, b: Pick<CurveResponse, 'absolute'>): boolean {
  return a.absolute && b.absolute;
}

/** The value an overlay curve holds at fraction f of its step, and that moment's time; null before its first point. */
export function overlayAt(curve: OverlayCurve, f: number): { t_us: number; bytes: number } | null {
  const i = stepIndexAt(curve.x, f);
  if (i < 0) return null;
  return { t_us: Math.round(f * curve.duration_us), bytes: curve.y[i]! };
}

/** The first `shown` of B's renumbered paths as `b → a`, and how many more there are (null when none is). */
export function renumberedText(pairs: readonly Renumbered[], shown = 3): string | null {
  if (pairs.length === 0) return null;
  const listed = pairs.slice(0, shown).map((p) => `${p.b} → ${p.a}`).join(', ');
  return pairs.length > shown ? `${listed} and ${pairs.length - shown} more` : listed;
}

/** The change of start as the heading says it (null when the starts are equal or a side has none):
 * the bytes in use before each step, in no listing, split by the runs' graphs where both have one. */
export function startChangeText(change: StartChange | null): string | null {
  if (change === null || change.delta_bytes === 0) return null;
  const split = change.parts === null
    ? 'no graph to split it'
    : change.parts.map((p) => `${p.name} ${formatBytesDelta(p.delta_bytes)}`).join(', ');
  return `start A − B: ${formatBytesDelta(change.delta_bytes)} (${split})`;
}
