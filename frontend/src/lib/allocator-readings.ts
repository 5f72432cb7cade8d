// The allocator's own readings beside the curve, where the trace has them
// (XPlane profiles): its limit (capacity), its reserved bytes and its
// fragmentation at each snapshot. Pure: the curve view and the summary draw them.

import { stepIndexAt } from './curve-data';

/** The capacity drawn as a line only when it is at most this many times the curve's top; above, the curve would flatten. */
export const CAPACITY_LINE_MAX_RATIO = 2;

/**
 * Where the capacity goes on the curve: `line` (the y scale stretched up to
 * it), `above` (far over the curve: named, not drawn), or null (unknown, or a
 * relative curve, whose bytes cannot be set against a limit).
 */
export function capacityPlacement(capacity: number | null | undefined, curveTop: number, absolute: boolean): 'line' | 'above' | null {
  if (capacity === null || capacity === undefined || !(capacity > 0) || !absolute) return null;
  return capacity <= Math.max(1, curveTop) * CAPACITY_LINE_MAX_RATIO ? 'line' : 'above';
}

/** The allocator's reserved bytes when the trace has them and any is non-zero (all zeros draw nothing). */
export function reservedSeries(snapshots: { series?: Record<string, readonly number[]> }): readonly number[] | null {
  const reserved = snapshots.series?.reserved_bytes;
  return reserved && reserved.some((b) => b > 0) ? reserved : null;
}

/** The readings of the snapshot in force at time t (the last taken at or before it; else the first). */
export interface ReadingsAt {
  reserved_bytes: number | null;
  fragmentation: number | null;
}

export function readingsAt(
  snapshots: { t_us: readonly number[]; series?: Record<string, readonly number[]> },
  t: number,
): ReadingsAt | null {
  const series = snapshots.series;
  if (!series || snapshots.t_us.length === 0) return null;
  const i = Math.max(0, stepIndexAt(snapshots.t_us, t));
  const value = (name: string) => series[name]?.[i] ?? null;
  const readings = { reserved_bytes: value('reserved_bytes'), fragmentation: value('fragmentation') };
  return readings.reserved_bytes === null && readings.fragmentation === null ? null : readings;
}

/** Share of the capacity a number of bytes fills, or null without a capacity. */
export function shareOfCapacity(bytes: number | null, capacity: number | null | undefined): number | null {
  if (bytes === null || capacity === null || capacity === undefined || capacity <= 0) return null;
  return bytes / capacity;
}
