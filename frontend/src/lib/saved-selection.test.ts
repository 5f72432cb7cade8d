import { describe, expect, it } from 'vitest';
import type { RunInfo } from '../api';
import { INITIAL_SELECTION, Selection, type SelectionState } from '../selection';
import {
  STORAGE_KEY,
  decodeSelection,
  encodeSelection,
  hashPluginData,
  keepInStorage,
  linkHash,
  restorable,
  savedSelection,
} from './saved-selection';

const state = (patch: Partial<SelectionState>): SelectionState => ({ ...INITIAL_SELECTION, ...patch });

class MemoryStorage {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
}

const runs: RunInfo[] = [
  { run: 'bigconv', has_graph: true, latest_tag: 'step_3', steps: [{ tag: 'step_3', step: 3, wall_time: 1, devices: [] }] },
  {
    run: 'unet_b2',
    has_graph: true,
    latest_tag: 'step_3',
    steps: [
      { tag: 'step_2', step: 2, wall_time: 1, devices: [] },
      { tag: 'step_3', step: 3, wall_time: 2, devices: [] },
    ],
  },
  { run: 'empty', has_graph: false, latest_tag: null, steps: [] },
];

const full = state({
  run: 'unet_b2',
  tag: 'step_2',
  device: 'CPU:0/mklcpu',
  group: 'scope',
  focus: 'shared_model',
  selected: 'shared_model/unet_01',
  timeRange: { start_us: 10, end_us: 2000 },
  peakMode: 'rise',
});
/** What storage carries: everything but compare mode, which a reload leaves (the single-step view comes back). */
const { against: _against, compareFocus: _compareFocus, compareSelected: _compareSelected, ...carried } = full;
/** In compare mode against bigconv's step: a link carries that too. */
const comparing = state({
  ...carried,
  against: { run: 'bigconv', tag: 'step_3' },
  compareFocus: 'shared_model',
  compareSelected: 'shared_model/unet_01',
});

describe('encodeSelection / decodeSelection', () => {
  it('round-trips every key a link carries', () => {
    const text = encodeSelection(full);
    expect(text).toBe(
      'run=unet_b2&tag=step_2&device=CPU%3A0%2Fmklcpu&group=scope&focus=shared_model&selected=shared_model%2Funet_01&start_us=10&end_us=2000&peak=rise',
    );
    const { run, tag, ...rest } = carried;
    expect(decodeSelection(text)).toEqual({ run, tag, ...rest });
  });
  it('leaves out what is at its start value', () => {
    expect(encodeSelection(state({ run: 'r', tag: 't' }))).toBe('run=r&tag=t');
    expect(encodeSelection(INITIAL_SELECTION)).toBe('');
    expect(decodeSelection('run=r&tag=t')).toEqual({ run: 'r', tag: 't' });
  });
  it('keeps names as they are: HTML, ampersands and slashes are just text', () => {
    const odd = state({ run: 'xss_<img src=x onerror=1>', tag: 'a&b=c', selected: 'q" & <svg>/(self)' });
    expect(decodeSelection(encodeSelection(odd))).toEqual({ run: odd.run, tag: odd.tag, selected: odd.selected });
  });
  it('drops what is malformed and needs a run', () => {
    expect(decodeSelection('tag=t')).toBeNull();
    expect(decodeSelection('run=r&group=nope&start_us=5&end_us=5')).toEqual({ run: 'r', tag: null });
    expect(decodeSelection('run=r&start_us=-1&end_us=9')).toEqual({ run: 'r', tag: null });
  });
  it('carries compare mode in a link only, and only with its baseline step whole', () => {
    expect(encodeSelection(comparing)).toBe(encodeSelection(full));
    const text = encodeSelection(comparing, true);
    expect(text).toBe(
      `${encodeSelection(full)}&against_run=bigconv&against_tag=step_3&compare_focus=shared_model&compare_selected=shared_model%2Funet_01`,
    );
    const { run, tag, ...rest } = comparing;
    expect(decodeSelection(text)).toEqual({ run, tag, ...rest });
    expect(encodeSelection(state({ run: 'r', tag: 't', against: { run: 'r', tag: 's' } }), true)).toBe('run=r&tag=t&against_run=r&against_tag=s');
    // A baseline without its step, or scopes without a baseline, are dropped.
    expect(decodeSelection('run=r&tag=t&against_run=b&compare_focus=x')).toEqual({ run: 'r', tag: 't' });
  });
  it('reads the host’s key/value record, ignoring keys it does not know', () => {
    expect(decodeSelection({ run: 'unet_b2', tag: 'step_3', other: 'x' })).toEqual({ run: 'unet_b2', tag: 'step_3' });
  });
});

describe('restorable', () => {
  it('restores everything when the run and step still exist', () => {
    const { run, tag, ...rest } = carried;
    expect(restorable(decodeSelection(encodeSelection(full)), runs)).toEqual({ run, tag, ...rest });
  });
  it('falls back to the run’s latest step, keeping only the grouping and the peak’s mode, when the step is gone', () => {
    expect(restorable({ run: 'unet_b2', tag: 'step_9', group: 'scope', selected: 'a' }, runs)).toEqual({
      run: 'unet_b2',
      tag: 'step_3',
      group: 'scope',
    });
    expect(restorable({ run: 'unet_b2', tag: 'step_9', peakMode: 'rise', selected: 'a' }, runs)).toEqual({
      run: 'unet_b2',
      tag: 'step_3',
      peakMode: 'rise',
    });
  });
  it('opens compare mode where its baseline step is still there, and the single-step view where it is gone', () => {
    const { run, tag, ...rest } = comparing;
    expect(restorable(decodeSelection(encodeSelection(comparing, true)), runs)).toEqual({ run, tag, ...rest });
    const gone = decodeSelection(encodeSelection({ ...comparing, against: { run: 'bigconv', tag: 'step_9' } }, true));
    const { run: _r, tag: _t, ...inside } = carried;
    expect(restorable(gone, runs)).toEqual({ run, tag, ...inside });
  });
  it('gives nothing for a run that is gone or has no traced step', () => {
    expect(restorable({ run: 'gone', tag: 'step_1' }, runs)).toBeNull();
    expect(restorable({ run: 'empty', tag: null }, runs)).toBeNull();
    expect(restorable(null, runs)).toBeNull();
  });
});

describe('savedSelection and keepInStorage', () => {
  it('keeps the selection in storage as it changes, once it names a step', () => {
    const storage = new MemoryStorage();
    const selection = new Selection();
    keepInStorage(selection, storage);
    expect(storage.items.size).toBe(0);
    selection.set({ run: 'unet_b2', tag: 'step_3' });
    selection.select('shared_model/unet_01');
    expect(savedSelection(storage, null)).toEqual({
      saved: { run: 'unet_b2', tag: 'step_3', selected: 'shared_model/unet_01' },
      from: 'storage',
      link: '',
    });
  });
  it('lets a new link win over storage, then storage win over the same link', () => {
    const storage = new MemoryStorage();
    const link = { run: 'bigconv', tag: 'step_3' };
    storage.setItem(STORAGE_KEY, JSON.stringify({ selection: 'run=unet_b2&tag=step_2', link: '' }));
    const first = savedSelection(storage, link);
    expect(first).toEqual({ saved: { run: 'bigconv', tag: 'step_3' }, from: 'link', link: 'run=bigconv&tag=step_3' });
    // The user moves on; a reload with the same address keeps where they went.
    const selection = new Selection({ run: 'bigconv', tag: 'step_3' });
    keepInStorage(selection, storage, first!.link);
    selection.set({ run: 'unet_b2', tag: 'step_3' });
    expect(savedSelection(storage, link)?.saved).toEqual({ run: 'unet_b2', tag: 'step_3' });
    expect(savedSelection(storage, link)?.from).toBe('storage');
  });
  it('survives storage that is broken, blocked or holds garbage', () => {
    const throwing = {
      getItem: () => {
        throw new Error('blocked');
      },
      setItem: () => {
        throw new Error('full');
      },
    };
    expect(savedSelection(throwing, null)).toBeNull();
    expect(() => keepInStorage(new Selection({ run: 'r', tag: 't' }), throwing)).not.toThrow();
    const garbage = new MemoryStorage();
    garbage.setItem(STORAGE_KEY, '{not json');
    expect(savedSelection(garbage, null)).toBeNull();
    expect(savedSelection(null, null)).toBeNull();
  });
});

describe('linkHash / hashPluginData', () => {
  it('writes compare mode into the link, and storage leaves it out', () => {
    const { run, tag, ...rest } = comparing;
    expect(decodeSelection(hashPluginData(linkHash(comparing, 'memory'), 'memory'))).toEqual({ run, tag, ...rest });
    const storage = new MemoryStorage();
    keepInStorage(new Selection(comparing), storage);
    expect(savedSelection(storage, null)?.saved.against).toBeUndefined();
  });
  it('writes TensorBoard’s p.memory.* keys and reads them back', () => {
    const hash = linkHash(full, 'memory');
    expect(hash.startsWith('#memory&p.memory.run=unet_b2&p.memory.tag=step_2&')).toBe(true);
    // TensorBoard splits on & and = before decoding: values must not hold them raw.
    for (const part of hash.slice(1).split('&')) expect(part.split('=').length).toBeLessThanOrEqual(2);
    const { run, tag, ...rest } = carried;
    expect(decodeSelection(hashPluginData(hash, 'memory'))).toEqual({ run, tag, ...rest });
  });
  it('keeps odd names intact through the address', () => {
    const odd = state({ run: 'a&b=c #d', tag: '%41/é', selected: 'x/(self)' });
    expect(decodeSelection(hashPluginData(linkHash(odd, 'memory'), 'memory'))).toEqual({ run: odd.run, tag: odd.tag, selected: odd.selected });
  });
  it('reads only its own plugin’s keys and skips malformed ones', () => {
    expect(hashPluginData('#memory&p.memory.run=r&p.graphs.run=g&run=x&p.memory.tag=%E0%A4&p.memory.device', 'memory')).toEqual({ run: 'r' });
    expect(hashPluginData('', 'memory')).toEqual({});
  });
});
