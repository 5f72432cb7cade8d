import { describe, expect, it } from 'vitest';
import type { CompareScopeRow, CurveResponse } from '../api';
import {
  DIVERGING_COLOURS,
  compareFigure,
  holdsBytes,
  deltaColour,
  divergingExtent,
  largerSide,
  overlayAt,
  overlayCurve,
  ownLengthFractions,
  rankByChange,
  renumberedText,
  startChangeText,
} from './compare';

const row = (name: string, a: number | null, b: number | null, allocated = 0): CompareScopeRow => ({
  name, kind: 'scope', parent: '', status: 'changed',
  a_bytes: a, b_bytes: b, delta_bytes: a === null || b === null ? null : a - b,
  a_allocated_bytes: allocated, b_allocated_bytes: 0, delta_allocated_bytes: allocated,
});

describe('compare figure and sizes', () => {
  it('compares at peak when both steps have a curve, else allocated bytes', () => {
    expect(compareFigure({ has_curve: true }, { has_curve: true })).toBe('bytes');
    expect(compareFigure({ has_curve: true }, { has_curve: false })).toBe('allocated_bytes');
  });
  it('sizes a tile by the larger of the two steps', () => {
    expect(largerSide(row('a', 10, 30), 'bytes')).toBe(30);
    expect(largerSide(row('a', 40, 30), 'bytes')).toBe(40);
    expect(largerSide(row('a', null, null, 7), 'allocated_bytes')).toBe(7);
  });
});

describe('diverging colour', () => {
  it('is symmetric around 0 over the largest absolute difference', () => {
    expect(divergingExtent([row('a', 10, 30), row('b', 50, 45)], 'bytes')).toBe(20);
    expect(divergingExtent([row('a', 5, 5)], 'bytes')).toBe(1);
  });
  it('paints a change small against its scope pale: the extent is at least a tenth of the scope', () => {
    const scope = row('', 40_000, 39_872);
    expect(divergingExtent([row('a', 128, 0)], 'bytes', scope)).toBe(4000);
    expect(divergingExtent([row('a', 19_000, 0)], 'bytes', scope)).toBe(19_000);
  });
  it('is neutral for no change, red for growth, blue for shrinking, clamped past the extent', () => {
    const rgb = (hex: string) => `rgb(${parseInt(hex.slice(1, 3), 16)}, ${parseInt(hex.slice(3, 5), 16)}, ${parseInt(hex.slice(5, 7), 16)})`;
    expect(deltaColour(0, 20)).toBe(rgb(DIVERGING_COLOURS.same));
    expect(deltaColour(20, 20)).toBe(rgb(DIVERGING_COLOURS.grew));
    expect(deltaColour(-20, 20)).toBe(rgb(DIVERGING_COLOURS.shrank));
    expect(deltaColour(-1000, 20)).toBe(rgb(DIVERGING_COLOURS.shrank));
    expect(deltaColour(10, 20)).not.toBe(deltaColour(-10, 20));
  });
});

describe('rankByChange', () => {
  it('puts the largest absolute difference first, decreases included', () => {
    const rows = [row('small', 11, 10), row('shrank', 0, 50), row('grew', 40, 0), row('same', 5, 5)];
    expect(rankByChange(rows, 'bytes').map((r) => r.name)).toEqual(['shrank', 'grew', 'small', 'same']);
  });
  it('breaks ties by allocated difference, then by name', () => {
    const rows = [row('b', 1, 0), row('a', 1, 0), row('c', 1, 0, 9)];
    expect(rankByChange(rows, 'bytes').map((r) => r.name)).toEqual(['c', 'a', 'b']);
  });
  it('does not change its input', () => {
    const rows = [row('a', 1, 0), row('b', 5, 0)];
    rankByChange(rows, 'bytes');
    expect(rows.map((r) => r.name)).toEqual(['a', 'b']);
  });
});

describe('curves scaled to their own length', () => {
  const curve = (duration: number, start: number | null): CurveResponse => ({
    window: null, baseline: start === null ? 'none' : 'allocator_bytes_in_use', start_bytes: start, absolute: start !== null,
    peak: { time_us: duration / 2, bytes: 100, rise_bytes: 100 - (start ?? 0), node: null }, duration_us: duration,
    t_us: [0, duration / 2, duration], min_bytes: [0, 0, 0], max_bytes: [start ?? 0, 100, start ?? 0],
    node_at: [0, 0, 0], node_names: [], snapshots: { t_us: [], bytes: [] }, series: [],
  });

  it('maps each step onto 0..1 of its own length', () => {
    expect(ownLengthFractions([0, 50, 100], 100)).toEqual([0, 0.5, 1]);
    expect(ownLengthFractions([0, 150, 300], 300)).toEqual([0, 0.5, 1]);
    expect(ownLengthFractions([5], 0)).toEqual([1]);
    const long = overlayCurve(curve(300, 20), false);
    const short = overlayCurve(curve(100, 20), false);
    expect(long.x).toEqual(short.x);
    expect(long.peak).toEqual({ x: 0.5, y: 100 });
  });

  it('draws rises over each start when asked (a side without a baseline)', () => {
    const c = overlayCurve(curve(100, 20), true);
    expect(c.y).toEqual([0, 80, 0]);
    expect(c.peak!.y).toBe(80);
    expect(overlayCurve(curve(100, null), true).y).toEqual([0, 100, 0]);
  });

  it('reads the value and the step time at a fraction', () => {
    const c = overlayCurve(curve(300, 20), false);
    expect(overlayAt(c, 0.6)).toEqual({ t_us: 180, bytes: 100 });
    expect(overlayAt(c, 0)).toEqual({ t_us: 0, bytes: 20 });
  });
});

describe('renumbered names', () => {
  it('lists the first few renames and counts the rest', () => {
    expect(renumberedText([])).toBeNull();
    expect(renumberedText([{ b: 'model_1', a: 'model' }])).toBe('model_1 → model');
    const pairs = ['dense_2', 'dense_3', 'dense_4', 'dense_5'].map((b, i) => ({ b, a: i ? `dense_${i}` : 'dense' }));
    expect(renumberedText(pairs)).toBe('dense_2 → dense, dense_3 → dense_1, dense_4 → dense_2 and 1 more');
    expect(renumberedText(pairs, 4)).toBe('dense_2 → dense, dense_3 → dense_1, dense_4 → dense_2, dense_5 → dense_3');
  });
});


describe('start change', () => {
  it('says the change of start with its split, nothing when the starts are equal or unknown', () => {
    expect(startChangeText(null)).toBeNull();
    expect(startChangeText({ delta_bytes: 0, parts: [] })).toBeNull();
    const mib = 1024 * 1024;
    expect(startChangeText({ delta_bytes: 2 * mib + 8, parts: [{ name: 'optimizer slots', delta_bytes: 2 * mib + 8 }] }))
      .toBe('start A − B: +2.00 MiB (optimizer slots +2.00 MiB)');
    expect(startChangeText({ delta_bytes: -3 * mib, parts: [{ name: 'inputs', delta_bytes: -mib }, { name: 'other', delta_bytes: -2 * mib }] }))
      .toBe('start A − B: -3.00 MiB (inputs -1.00 MiB, other -2.00 MiB)');
    expect(startChangeText({ delta_bytes: 512, parts: null })).toBe('start A − B: +512 B (no graph to split it)');
  });
});

describe('rows to compare', () => {
  it('leaves out a row that holds no bytes in either step', () => {
    const zero = { a_bytes: 0, b_bytes: null, delta_bytes: null, a_allocated_bytes: 0, b_allocated_bytes: 0, delta_allocated_bytes: 0, a_output_bytes: 0, b_output_bytes: 0, delta_output_bytes: 0 };
    expect(holdsBytes(zero)).toBe(false);
    expect(holdsBytes({ ...zero, b_output_bytes: 8 })).toBe(true);
    expect(holdsBytes({ ...zero, a_bytes: -4 })).toBe(true);  // a negative at peak is bytes too
  });
});
