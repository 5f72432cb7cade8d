// What the details panel can show about a scope before its `scope` route answers:
// every figure, share of the peak and categories come with the treemap level
// that drew its tile, so a click answers at once and the tables follow.

import { CATEGORY_NAMES, type CategoryName, type ScopeChild, type ScopeDetails, type ScopesResponse } from '../api';
import { shareOf } from '../format';

/** The part of ScopeDetails that a treemap level already holds for each child. */
export type ScopePreview = Pick<
  ScopeDetails,
  'scope' | 'name' | 'kind' | 'figures' | 'share_of_peak' | 'peak_rise_bytes' | 'categories' | 'exec_count' | 'param_count' | 'param_bytes' | 'slot_bytes'
>;

/** Same figures as the `scope` route (share_of_peak is null when the peak did not rise, like the route's). */
export function previewOfChild(child: ScopeChild, peakRiseBytes: number): ScopePreview {
  return {
    scope: child.scope,
    name: child.name,
    kind: child.kind,
    figures: child.figures,
    share_of_peak: shareOf(child.figures.at_peak_bytes, peakRiseBytes),
    peak_rise_bytes: peakRiseBytes,
    categories: CATEGORY_NAMES.map((name: CategoryName) => ({ name, at_peak_bytes: child.categories[name] ?? 0 })),
    exec_count: child.exec_count,
    param_count: child.param_count,
    param_bytes: child.param_bytes,
    slot_bytes: child.slot_bytes,
  };
}

/** True when the response is the whole details, not a preview. */
export function isFullDetails(d: ScopePreview | ScopeDetails): d is ScopeDetails {
  return 'nodes' in d && Array.isArray((d as ScopeDetails).nodes);
}

/**
 * The children of every treemap level loaded for one step, device and grouping,
 * by scope path. Cleared when any of those change: the same path means other
 * bytes in another step or grouping.
 */
export class ScopePreviews {
  private readonly byScope = new Map<string, ScopePreview>();
  private key: string | null = null;

  /** Forgets everything unless `key` (run, tag, device, group) is the one the entries belong to. */
  useKey(key: string): void {
    if (key === this.key) return;
    this.key = key;
    this.byScope.clear();
  }

  addLevel(level: ScopesResponse): void {
    for (const child of level.children) this.byScope.set(child.scope, previewOfChild(child, level.peak_rise_bytes));
  }

  get(scope: string): ScopePreview | null {
    return this.byScope.get(scope) ?? null;
  }

  get size(): number {
    return this.byScope.size;
  }
}
