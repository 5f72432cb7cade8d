// Resident memory in the page: the peak as the rise or as absolute memory,
// categories with their resident bytes beside the at-peak ones, a scope's
// parameters in words. Pure; the views draw.

import type { CategoryTotal, DeviceSummary, ParamFigures } from '../api';
import { CATEGORY_NAMES } from '../api';
import { countOf, formatBytes } from '../format';

export type PeakMode = 'absolute' | 'rise';

/** Absolute memory at the peak can be shown: the allocator gave the bytes in use before the step. */
export function canShowAbsolute(device: DeviceSummary): boolean {
  return device.baseline === 'allocator_bytes_in_use' && device.start_bytes !== null && device.peak_bytes !== null;
}

/** The mode actually shown: absolute falls back to the rise when the step has no baseline. */
export function peakMode(device: DeviceSummary, wanted: PeakMode): PeakMode {
  return wanted === 'absolute' && canShowAbsolute(device) ? 'absolute' : 'rise';
}

export interface CategoryRow {
  name: CategoryTotal['name'];
  atPeakBytes: number;
  /** null without a run graph. */
  residentBytes: number | null;
  /** Memory this category takes at the peak: resident + at peak (null without a graph). */
  totalBytes: number | null;
}

/** Every category with bytes at the peak or resident, in the fixed category order. */
export function categoryRows(categories: readonly CategoryTotal[]): CategoryRow[] {
  const byName = new Map(categories.map((c) => [c.name, c]));
  const rows: CategoryRow[] = [];
  for (const name of CATEGORY_NAMES) {
    const c = byName.get(name);
    if (!c) continue;
    const resident = c.resident_bytes ?? null;
    if (c.at_peak_bytes === 0 && !resident) continue;
    rows.push({ name, atPeakBytes: c.at_peak_bytes, residentBytes: resident, totalBytes: resident === null ? null : resident + c.at_peak_bytes });
  }
  return rows;
}

/** "2,624 params (10.3 KiB) · optimizer slots 20.5 KiB"; null when the scope has none (or no graph is known). */
export function paramsText(p: ParamFigures): string | null {
  const count = p.param_count ?? null;
  if (count === null) return null;
  const slots = p.slot_bytes ?? 0;
  if (count === 0 && !p.param_bytes && slots === 0) return null;
  const parts = [`${countOf(count, 'param')} (${formatBytes(p.param_bytes ?? 0)})`];
  if (slots > 0) parts.push(`optimizer slots ${formatBytes(slots)}`);
  return parts.join(' · ');
}
