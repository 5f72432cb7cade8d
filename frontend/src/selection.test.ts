import { describe, expect, it, vi } from 'vitest';
import { INITIAL_SELECTION, Selection, isWithin, ownerScope, parentScope, stepParams } from './selection';

describe('Selection', () => {
  it('starts from the initial selection plus overrides', () => {
    const s = new Selection({ run: 'a' });
    expect(s.get()).toEqual({ ...INITIAL_SELECTION, run: 'a' });
  });

  it('notifies once per set with every changed key', () => {
    const s = new Selection();
    const listener = vi.fn();
    s.subscribe(listener);
    s.set({ run: 'r', tag: 't', device: 'GPU:0/GPU_0_bfc' });
    expect(listener).toHaveBeenCalledTimes(1);
    const changed = listener.mock.calls[0]![1] as Set<string>;
    expect([...changed].sort()).toEqual(['device', 'run', 'tag']);
  });

  it('does not notify when nothing changed', () => {
    const s = new Selection({ run: 'r' });
    const listener = vi.fn();
    s.subscribe(listener);
    s.set({ run: 'r' });
    s.set({ timeRange: null });
    expect(listener).not.toHaveBeenCalled();
  });

  it('treats equal time ranges as unchanged', () => {
    const s = new Selection({ timeRange: { start_us: 1, end_us: 2 } });
    const listener = vi.fn();
    s.subscribe(listener);
    s.set({ timeRange: { start_us: 1, end_us: 2 } });
    expect(listener).not.toHaveBeenCalled();
    s.set({ timeRange: { start_us: 1, end_us: 3 } });
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('changing the run resets step, device, focus, selection and zoom', () => {
    const s = new Selection({
      run: 'a',
      tag: 't',
      device: 'd',
      focus: 'x',
      selected: 'x/y',
      timeRange: { start_us: 0, end_us: 5 },
    });
    const listener = vi.fn();
    s.subscribe(listener);
    s.set({ run: 'b' });
    expect(s.get()).toEqual({ ...INITIAL_SELECTION, run: 'b' });
    const changed = listener.mock.calls[0]![1] as Set<string>;
    expect(changed.has('focus')).toBe(true);
    expect(changed.has('group')).toBe(false);
  });

  it('keeps dependent keys that the same patch sets', () => {
    const s = new Selection({ run: 'a', tag: 't' });
    s.set({ run: 'b', tag: 'u', device: 'GPU:0/bfc' });
    expect(s.get().tag).toBe('u');
    expect(s.get().device).toBe('GPU:0/bfc');
  });

  it('changing the device or step resets scopes but keeps the grouping', () => {
    const s = new Selection({ run: 'a', tag: 't', device: 'd', group: 'scope', focus: 'x', selected: 'x/y' });
    s.set({ device: 'e' });
    expect(s.get()).toMatchObject({ run: 'a', tag: 't', device: 'e', group: 'scope', focus: '', selected: null });
    s.set({ focus: 'x' });
    s.set({ tag: 'u' });
    expect(s.get().focus).toBe('');
    expect(s.get().device).toBe('e');
  });

  it('changing the grouping resets focus and selection but keeps the zoom', () => {
    const range = { start_us: 3, end_us: 9 };
    const s = new Selection({ focus: 'x', selected: 'x/y', timeRange: range });
    s.set({ group: 'scope' });
    expect(s.get().focus).toBe('');
    expect(s.get().selected).toBeNull();
    expect(s.get().timeRange).toEqual(range);
  });

  it('drill focuses and selects; drilling to the root clears the selection', () => {
    const s = new Selection();
    s.drill('shared_model/unet_01');
    expect(s.get().focus).toBe('shared_model/unet_01');
    expect(s.get().selected).toBe('shared_model/unet_01');
    s.drill('');
    expect(s.get().focus).toBe('');
    expect(s.get().selected).toBeNull();
  });

  it('unsubscribe stops notifications', () => {
    const s = new Selection();
    const listener = vi.fn();
    const off = s.subscribe(listener);
    off();
    s.select('a');
    expect(listener).not.toHaveBeenCalled();
  });

  it('queues a change made by a listener until every listener has seen the first', () => {
    const s = new Selection();
    const calls: string[] = [];
    s.subscribe((state, changed) => {
      calls.push(`A:${[...changed].sort().join(',')}:${state.tag}`);
      if (changed.has('run') && state.tag === null) s.set({ tag: 'latest' });
    });
    s.subscribe((state, changed) => {
      calls.push(`B:${[...changed].sort().join(',')}:${state.tag}`);
    });
    s.set({ run: 'r' });
    expect(calls).toEqual(['A:run:null', 'B:run:latest', 'A:tag:latest', 'B:tag:latest']);
  });

  it('listeners see the new state', () => {
    const s = new Selection();
    let seen: string | null = 'unset';
    s.subscribe((state) => {
      seen = state.selected;
    });
    s.select('a/b');
    expect(seen).toBe('a/b');
  });
});

describe('scope paths', () => {
  it('finds parents', () => {
    expect(parentScope('a/b/c')).toBe('a/b');
    expect(parentScope('a')).toBe('');
    expect(parentScope('')).toBe('');
    expect(parentScope('a/b/(self)')).toBe('a/b');
  });
  it('maps (self) tiles to their owner', () => {
    expect(ownerScope('a/b/(self)')).toBe('a/b');
    expect(ownerScope('(self)')).toBe('');
    expect(ownerScope('a/b')).toBe('a/b');
  });
  it('tests ancestry on path segments, not string prefixes', () => {
    expect(isWithin('a/b', 'a')).toBe(true);
    expect(isWithin('a', 'a')).toBe(true);
    expect(isWithin('ab', 'a')).toBe(false);
    expect(isWithin('x', '')).toBe(true);
  });
});

describe('stepParams', () => {
  it('is null until run, step and device are chosen', () => {
    expect(stepParams(INITIAL_SELECTION)).toBeNull();
    expect(stepParams({ ...INITIAL_SELECTION, run: 'r', tag: 't' })).toBeNull();
    expect(stepParams({ ...INITIAL_SELECTION, run: 'r', device: 'd' })).toBeNull();
  });
  it('carries run, step, device and grouping, nothing else', () => {
    const s = { ...INITIAL_SELECTION, run: 'r', tag: 't', device: 'd', group: 'scope' as const, focus: 'a', selected: 'a/b' };
    expect(stepParams(s)).toEqual({ run: 'r', tag: 't', device: 'd', group: 'scope' });
  });
});

describe('compare mode in the selection', () => {
  it('keeps the single-step focus, selection and zoom while comparing and after leaving', () => {
    const s = new Selection({ run: 'a', tag: 't', device: 'd', focus: 'm', selected: 'm/x', timeRange: { start_us: 1, end_us: 9 } });
    s.set({ against: { run: 'b', tag: 't' } });
    s.set({ compareFocus: 'm', compareSelected: 'm/y' });
    expect(s.get()).toMatchObject({ focus: 'm', selected: 'm/x', timeRange: { start_us: 1, end_us: 9 } });
    s.set({ against: null });
    expect(s.get()).toMatchObject({ focus: 'm', selected: 'm/x', timeRange: { start_us: 1, end_us: 9 }, compareFocus: '', compareSelected: null });
  });

  it('tells listeners only when the baseline step really changes', () => {
    const s = new Selection({ run: 'a', tag: 't' });
    const seen: string[][] = [];
    s.subscribe((_state, changed) => seen.push([...changed].sort()));
    s.set({ against: { run: 'b', tag: 't' } });
    s.set({ against: { run: 'b', tag: 't' } });
    s.set({ against: { run: 'b', tag: 'u' } });
    expect(seen).toEqual([['against'], ['against']]);
  });

  it('ends the comparison when the step compared against becomes the step shown', () => {
    const s = new Selection({ run: 'a', tag: 't', against: { run: 'b', tag: 'u' }, compareFocus: 'm' });
    const seen: string[][] = [];
    s.subscribe((_state, changed) => seen.push([...changed].sort()));
    s.set({ run: 'b', tag: 'u' });
    expect(s.get()).toMatchObject({ run: 'b', tag: 'u', against: null, compareFocus: '' });
    expect(seen.at(-1)).toContain('against');
    s.set({ against: { run: 'b', tag: 'u' } }); // itself: no comparison
    expect(s.get().against).toBeNull();
  });

  it('resets compare mode scopes when the baseline, the step or the grouping changes', () => {
    const s = new Selection({ run: 'a', tag: 't', against: { run: 'b', tag: 't' }, compareFocus: 'm', compareSelected: 'm/y' });
    s.set({ group: 'scope' });
    expect(s.get()).toMatchObject({ compareFocus: '', compareSelected: null, against: { run: 'b', tag: 't' } });
  });
});
