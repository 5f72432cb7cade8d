// The one shared selection every view reads and writes: run, step, device,
// grouping, the focused (drilled-into) scope, the selected scope, the time range,
// and in compare mode the baseline step with compare mode's own focus and
// selection (kept apart, so that leaving compare mode finds the single-step view as it was).

import type { DeviceParams, Group } from './api';
import type { PeakMode } from './lib/resident';

export interface TimeRange {
  start_us: number;
  end_us: number;
}

/** The baseline step compared against (B; the selected run and step are A). */
export interface AgainstStep {
  run: string;
  tag: string;
}

export interface SelectionState {
  run: string | null;
  tag: string | null;
  device: string | null;
  group: Group;
  /** Scope the treemap and graph show the children of; "" is the root. */
  focus: string;
  /** Scope whose details are shown; null selects nothing (the focus is described). */
  selected: string | null;
  /** Zoomed window of the curve; null is the whole step. */
  timeRange: TimeRange | null;
  /** Compare mode's baseline step; null is the single-step view. */
  against: AgainstStep | null;
  /** Compare mode's focused scope (in the union of both steps' trees) and selected scope. */
  compareFocus: string;
  compareSelected: string | null;
  /** The peak and the curve in absolute bytes in use, or as the rise over the step's start (where both are known). */
  peakMode: PeakMode;
}

export type SelectionKey = keyof SelectionState;
export type Listener = (state: Readonly<SelectionState>, changed: ReadonlySet<SelectionKey>) => void;

export const INITIAL_SELECTION: Readonly<SelectionState> = Object.freeze({
  run: null,
  tag: null,
  device: null,
  group: 'layer',
  focus: '',
  selected: null,
  timeRange: null,
  against: null,
  compareFocus: '',
  compareSelected: null,
  peakMode: 'absolute',
});

/** What a change to a key invalidates: scope paths belong to one run/step/device/grouping. */
const COMPARE_SCOPES: SelectionKey[] = ['compareFocus', 'compareSelected'];
const RESETS: Partial<Record<SelectionKey, SelectionKey[]>> = {
  run: ['tag', 'device', 'focus', 'selected', 'timeRange', ...COMPARE_SCOPES],
  tag: ['focus', 'selected', 'timeRange', ...COMPARE_SCOPES],
  device: ['focus', 'selected', 'timeRange', ...COMPARE_SCOPES],
  group: ['focus', 'selected', ...COMPARE_SCOPES],
  against: COMPARE_SCOPES,
};

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    if ('run' in a || 'run' in b) {
      const sa = a as AgainstStep;
      const sb = b as AgainstStep;
      return sa.run === sb.run && sa.tag === sb.tag;
    }
    const ra = a as TimeRange;
    const rb = b as TimeRange;
    return ra.start_us === rb.start_us && ra.end_us === rb.end_us;
  }
  return false;
}

export class Selection {
  private state: SelectionState;
  private readonly listeners = new Set<Listener>();
  private pending = new Set<SelectionKey>();
  private notifying = false;

  constructor(initial: Partial<SelectionState> = {}) {
    this.state = { ...INITIAL_SELECTION, ...initial };
  }

  get(): Readonly<SelectionState> {
    return this.state;
  }

  /**
   * Applies a patch. Keys that depend on a changed key are reset to their
   * initial value unless the patch sets them too. Listeners are told once,
   * with every key that changed; nothing is told when nothing changed.
   */
  set(patch: Partial<SelectionState>): void {
    const next: SelectionState = { ...this.state };
    const changed = new Set<SelectionKey>();
    const patchKeys = Object.keys(patch) as SelectionKey[];
    for (const key of patchKeys) {
      if (sameValue(this.state[key], patch[key])) continue;
      (next as unknown as Record<string, unknown>)[key] = patch[key];
      changed.add(key);
    }
    for (const key of [...changed]) {
      for (const dependent of RESETS[key] ?? []) {
        if (dependent in patch) continue;
        if (sameValue(next[dependent], INITIAL_SELECTION[dependent])) continue;
        (next as unknown as Record<string, unknown>)[dependent] = INITIAL_SELECTION[dependent];
        changed.add(dependent);
      }
    }
    // B is another step than A: showing the step compared against ends the comparison.
    if (next.against && next.against.run === next.run && next.against.tag === next.tag) {
      next.against = null;
      changed.add('against');
      for (const dependent of RESETS.against ?? []) {
        if (sameValue(next[dependent], INITIAL_SELECTION[dependent])) continue;
        (next as unknown as Record<string, unknown>)[dependent] = INITIAL_SELECTION[dependent];
        changed.add(dependent);
      }
    }
    if (changed.size === 0) return;
    this.state = next;
    for (const key of changed) this.pending.add(key);
    // A listener that sets the selection while others are being told queues a
    // second round, so every listener sees every change in order, never a stale state.
    if (this.notifying) return;
    this.notifying = true;
    try {
      while (this.pending.size > 0) {
        const keys = this.pending;
        this.pending = new Set();
        for (const listener of [...this.listeners]) listener(this.state, keys);
      }
    } finally {
      this.notifying = false;
    }
  }

  /** Selects a scope (or clears the selection with null). */
  select(scope: string | null): void {
    this.set({ selected: scope });
  }

  /** Drills into a scope: it becomes the focus and the selection. */
  drill(scope: string): void {
    this.set({ focus: scope, selected: scope === '' ? null : scope });
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** The selected step and memory space as request parameters; null until run, step and device are all chosen. */
export function stepParams(s: Readonly<SelectionState>): DeviceParams | null {
  if (s.run === null || s.tag === null || s.device === null) return null;
  return { run: s.run, tag: s.tag, device: s.device, group: s.group };
}

/** Parent of a scope path: "a/b/c" -> "a/b", "a" -> "", "" -> "". "(self)" tiles belong to their parent. */
export function parentScope(scope: string): string {
  const cut = scope.lastIndexOf('/');
  return cut < 0 ? '' : scope.slice(0, cut);
}

/** The scope a "(self)" tile stands for: "a/b/(self)" -> "a/b". */
export function ownerScope(scope: string): string {
  return scope.endsWith('/(self)') ? scope.slice(0, -'/(self)'.length) : scope === '(self)' ? '' : scope;
}

/** True when `scope` is `ancestor` or lies under it. */
export function isWithin(scope: string, ancestor: string): boolean {
  if (ancestor === '') return true;
  return scope === ancestor || scope.startsWith(ancestor + '/');
}
