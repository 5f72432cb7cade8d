// Figures that exist only where the step has a curve: a trace without
// allocation records (old TF 1.x dumps, or a step that allocated nothing) has
// no peak, so no at-peak bytes and no share of the peak. Those are left out,
// never shown as "0 B".

import type { DeviceSummary } from '../api';

/** Keys of figures and table columns measured at the peak. */
export const PEAK_ONLY_KEYS: readonly string[] = ['at_peak_bytes', 'share_of_peak'];

/** The figure that sizes and ranks things: at peak with a curve, allocated without. */
export function rankingFigure(hasCurve: boolean): 'at_peak_bytes' | 'allocated_bytes' {
  return hasCurve ? 'at_peak_bytes' : 'allocated_bytes';
}

/** The rows (figure rows, columns) that exist for the step: without a curve, the peak's go. */
export function existingFigures<T>(rows: readonly T[], key: (row: T) => string, hasCurve: boolean): T[] {
  return hasCurve ? [...rows] : rows.filter((row) => !PEAK_ONLY_KEYS.includes(key(row)));
}

/** Why a device has no curve, in a few words, as the server tells it (`no_curve`): a dump without
 * allocation records (old TF 1.x), or a step that allocated nothing (its outputs are buffers that
 * existed before it). */
export function noCurveReason(device: Pick<DeviceSummary, 'no_curve'>): string {
  return device.no_curve === 'nothing_allocated'
    ? 'nothing was allocated during this step (it only read buffers that existed before it)'
    : 'this trace has no allocation records (old TF 1.x dumps)';
}
