// What of the selection survives a reload or travels in a link: run, step,
// device, grouping, focused and selected scope, zoomed window; a link also
// carries compare mode (the baseline step, its focus and selection), which a
// reload leaves for the single-step view. Encoded as URL query text
// (`run=unet_b2&tag=step_3&selected=shared_model%2Funet_01`), kept in
// localStorage and read from TensorBoard's `p.memory.*` URL keys.
// The selection (selection.ts) stays the one source of truth: this only
// encodes it, checks a saved one against the runs, and writes it back.

import type { Group, RunInfo } from '../api';
import type { Selection, SelectionState } from '../selection';
import { chooseStep } from './defaults';

export type SavedSelection = Partial<Omit<SelectionState, 'run' | 'tag'>> & { run: string; tag: string | null };

/** The selection's keys in a link, in this order. */
const KEYS = [
  'run', 'tag', 'device', 'group', 'focus', 'selected', 'start_us', 'end_us',
  'against_run', 'against_tag', 'compare_focus', 'compare_selected', 'peak',
] as const;
const GROUPS: readonly Group[] = ['layer', 'scope'];

export const STORAGE_KEY = 'tb-memory.selection';

/**
 * "run=…&tag=…&…": only what is set and differs from the start (no group "layer", no root focus);
 * with `compare`, compare mode's step and scopes too (a link's, not storage's).
 */
export function encodeSelection(s: Readonly<SelectionState>, compare = false): string {
  if (s.run === null) return '';
  const q = new URLSearchParams();
  q.set('run', s.run);
  if (s.tag !== null) q.set('tag', s.tag);
  if (s.device !== null) q.set('device', s.device);
  if (s.group !== 'layer') q.set('group', s.group);
  if (s.focus !== '') q.set('focus', s.focus);
  if (s.selected !== null) q.set('selected', s.selected);
  if (s.timeRange) {
    q.set('start_us', String(s.timeRange.start_us));
    q.set('end_us', String(s.timeRange.end_us));
  }
  if (s.peakMode !== 'absolute') q.set('peak', s.peakMode);
  if (compare && s.against) {
    q.set('against_run', s.against.run);
    q.set('against_tag', s.against.tag);
    if (s.compareFocus !== '') q.set('compare_focus', s.compareFocus);
    if (s.compareSelected !== null) q.set('compare_selected', s.compareSelected);
  }
  return q.toString();
}

/** Reads encoded text or a key/value record (the host's URL data); null without a run. Malformed keys are dropped. */
export function decodeSelection(source: string | Readonly<Record<string, string>>): SavedSelection | null {
  const q = typeof source === 'string' ? new URLSearchParams(source) : new URLSearchParams(pick(source));
  const run = q.get('run');
  if (!run) return null;
  const saved: SavedSelection = { run, tag: q.get('tag') || null };
  const device = q.get('device');
  if (device) saved.device = device;
  const group = q.get('group');
  if (group && (GROUPS as readonly string[]).includes(group)) saved.group = group as Group;
  const focus = q.get('focus');
  if (focus) saved.focus = focus;
  const selected = q.get('selected');
  if (selected !== null) saved.selected = selected;
  const start = integer(q.get('start_us'));
  const end = integer(q.get('end_us'));
  if (start !== null && end !== null && start < end) saved.timeRange = { start_us: start, end_us: end };
  if (q.get('peak') === 'rise') saved.peakMode = 'rise';
  const againstRun = q.get('against_run');
  const againstTag = q.get('against_tag');
  if (againstRun && againstTag) {
    saved.against = { run: againstRun, tag: againstTag };
    const compareFocus = q.get('compare_focus');
    if (compareFocus) saved.compareFocus = compareFocus;
    const compareSelected = q.get('compare_selected');
    if (compareSelected !== null) saved.compareSelected = compareSelected;
  }
  return saved;
}

/** TensorBoard's address hash that opens this selection: `#memory&p.memory.run=…&p.memory.tag=…`. */
export function linkHash(state: Readonly<SelectionState>, plugin: string): string {
  const parts = [encodeURIComponent(plugin)];
  for (const [key, value] of new URLSearchParams(encodeSelection(state, true))) {
    parts.push(`${encodeURIComponent(`p.${plugin}.${key}`)}=${encodeURIComponent(value)}`);
  }
  return `#${parts.join('&')}`;
}

/** The `p.<plugin>.*` keys of a TensorBoard address hash, read as TensorBoard reads them (`&`-separated `key=value`). */
export function hashPluginData(hash: string, plugin: string): Record<string, string> {
  const prefix = `p.${plugin}.`;
  const out: Record<string, string> = {};
  for (const part of hash.replace(/^#/, '').split('&')) {
    const pair = part.split('=');
    if (pair.length !== 2) continue;
    try {
      const key = decodeURIComponent(pair[0] as string);
      if (key.startsWith(prefix)) out[key.slice(prefix.length)] = decodeURIComponent(pair[1] as string);
    } catch {
      // A malformed escape: that key is left out.
    }
  }
  return out;
}

function pick(record: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of KEYS) if (typeof record[key] === 'string') out[key] = record[key] as string;
  return out;
}

function integer(text: string | null): number | null {
  if (text === null || !/^\d{1,15}$/.test(text)) return null;
  return Number(text);
}

/**
 * The selection to restore over these runs, or null when the saved run is gone
 * (or has no traced step). A tag that is gone falls back to the run's latest
 * step, and then nothing inside the old step (device, scopes, zoom) is kept.
 */
export function restorable(saved: SavedSelection | null, runs: readonly RunInfo[]): Partial<SelectionState> | null {
  if (!saved) return null;
  const run = runs.find((r) => r.run === saved.run && r.steps.length > 0);
  if (!run) return null;
  const sameStep = saved.tag !== null && run.steps.some((s) => s.tag === saved.tag);
  const tag = sameStep ? saved.tag : (chooseStep(run, null)?.tag ?? null);
  const { run: _run, tag: _tag, against, compareFocus, compareSelected, ...inside } = saved;
  if (!sameStep) {
    return { run: run.run, tag, ...(saved.group ? { group: saved.group } : {}), ...(saved.peakMode ? { peakMode: saved.peakMode } : {}) };
  }
  // Compare mode comes back where its baseline step is still there; its scopes only with it.
  const baseline = against && runs.some((r) => r.run === against.run && r.steps.some((s) => s.tag === against.tag));
  const compare = baseline
    ? { against, ...(compareFocus !== undefined ? { compareFocus } : {}), ...(compareSelected !== undefined ? { compareSelected } : {}) }
    : {};
  return { run: run.run, tag, ...inside, ...compare };
}

/** What is kept in storage: the selection, and the link it last took over from (so a stale link does not win twice). */
interface Stored {
  selection: string;
  link: string;
}

/** localStorage, or null where it cannot be used (blocked, sandboxed). */
export function defaultStorage(): Storage | null {
  try {
    return typeof localStorage === 'undefined' ? null : localStorage;
  } catch {
    return null;
  }
}

function readStored(storage: Pick<Storage, 'getItem'> | null): Stored | null {
  try {
    const raw = storage?.getItem(STORAGE_KEY);
    if (!raw) return null;
    const parsed: unknown = JSON.parse(raw);
    if (!parsed || typeof parsed !== 'object') return null;
    const { selection, link } = parsed as Partial<Stored>;
    return { selection: typeof selection === 'string' ? selection : '', link: typeof link === 'string' ? link : '' };
  } catch {
    return null;
  }
}

/**
 * The selection chosen before: a link's (TensorBoard's `p.memory.*` URL keys)
 * when it is new to this browser, else the one kept in storage from the last
 * visit. Null when there is neither.
 */
export function savedSelection(
  storage: Pick<Storage, 'getItem'> | null,
  link: Readonly<Record<string, string>> | null,
): { saved: SavedSelection; from: 'link' | 'storage'; link: string } | null {
  const stored = readStored(storage);
  const fromLink = link ? decodeSelection(link) : null;
  const linkText = fromLink ? new URLSearchParams(pick(link ?? {})).toString() : '';
  if (fromLink && linkText !== stored?.link) return { saved: fromLink, from: 'link', link: linkText };
  const fromStorage = stored ? decodeSelection(stored.selection) : null;
  if (fromStorage) return { saved: fromStorage, from: 'storage', link: linkText };
  return null;
}

/** Writes the selection to storage whenever it changes (once it names a step); returns the unsubscribe. */
export function keepInStorage(selection: Selection, storage: Pick<Storage, 'setItem'> | null, link = ''): () => void {
  const write = (state: Readonly<SelectionState>) => {
    if (state.run === null || state.tag === null) return;
    try {
      storage?.setItem(STORAGE_KEY, JSON.stringify({ selection: encodeSelection(state), link } satisfies Stored));
    } catch {
      // Storage full or blocked: the page works on, a reload just starts afresh.
    }
  };
  write(selection.get());
  return selection.subscribe((state) => write(state));
}
