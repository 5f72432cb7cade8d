import { describe, expect, it } from 'vitest';
import type { CurveResponse } from '../api';
import {
  OTHER_SERIES,
  asRise,
  highlightOf,
  curvePointsFor,
  nearestIndex,
  relativeBytes,
  stackSeries,
  stepIndexAt,
  zoomRange,
} from './curve-data';

describe('relativeBytes', () => {
  it('subtracts the start when the curve is absolute', () => {
    expect(relativeBytes([100, 150, 120], true, 100)).toEqual([0, 50, 20]);
  });
  it('leaves a relative curve alone', () => {
    expect(relativeBytes([0, 50, 20], false, null)).toEqual([0, 50, 20]);
  });
});

describe('stackSeries', () => {
  const series = [
    { scope: 'a', name: 'a', bytes: [0, 10, 5] },
    { scope: 'b', name: 'b', bytes: [0, 30, 0] },
    { scope: 'c', name: 'c', bytes: [1, 1, 1] },
    { scope: null, name: '(other)', bytes: [2, 2, 2] },
  ];

  it('ranks named series by their largest value and stacks them in that order', () => {
    const layers = stackSeries(series, 3);
    expect(layers.map((l) => l.name)).toEqual(['b', 'a', 'c', OTHER_SERIES]);
    expect(layers[0]!.y0).toEqual([0, 0, 0]);
    expect(layers[0]!.y1).toEqual([0, 30, 0]);
    expect(layers[1]!.y0).toEqual([0, 30, 0]);
    expect(layers[1]!.y1).toEqual([0, 40, 5]);
  });

  it('tops out at the sum of all series (the relative curve)', () => {
    const layers = stackSeries(series, 3);
    const last = layers.slice(-1)[0]!;
    expect(last.y1).toEqual([3, 43, 8]);
  });

  it('folds series beyond top into "(other)" without losing bytes', () => {
    const layers = stackSeries(series, 1);
    expect(layers.map((l) => l.name)).toEqual(['b', OTHER_SERIES]);
    expect(layers[1]!.y1).toEqual([3, 43, 8]);
    expect(layers[1]!.y1[1]! - layers[1]!.y0[1]!).toBe(10 + 1 + 2);
  });

  it('stacks negative bytes downward so layers never overlap', () => {
    const layers = stackSeries(
      [
        { scope: 'a', name: 'a', bytes: [5, -3] },
        { scope: 'b', name: 'b', bytes: [-2, -4] },
      ],
      5,
    );
    expect(layers[0]!.y0).toEqual([0, 0]);
    expect(layers[0]!.y1).toEqual([5, -3]);
    expect(layers[1]!.y0).toEqual([0, -3]);
    expect(layers[1]!.y1).toEqual([-2, -7]);
  });

  it('ranks by other series when given (a zoomed window keeps the whole step order)', () => {
    const window = [
      { scope: 'a', name: 'a', bytes: [9, 9] },
      { scope: 'b', name: 'b', bytes: [1, 1] },
      { scope: 'new', name: 'new', bytes: [4, 4] },
    ];
    const layers = stackSeries(window, 2, series);
    // b (30 over the step) before a (10); "new" is not in the step's series: ranked by its own 4.
    expect(layers.map((l) => l.name)).toEqual(['b', 'a', OTHER_SERIES]);
    expect(layers[1]!.max).toBe(9);
    expect(layers[2]!.y1).toEqual([14, 14]);
  });

  it('adds no "(other)" layer when there is nothing left over', () => {
    const layers = stackSeries([{ scope: 'a', name: 'a', bytes: [1] }], 8);
    expect(layers.map((l) => l.name)).toEqual(['a']);
  });
});

describe('lookups', () => {
  const times = [0, 10, 20, 40];
  it('finds the nearest point', () => {
    expect(nearestIndex(times, -5)).toBe(0);
    expect(nearestIndex(times, 14)).toBe(1);
    expect(nearestIndex(times, 16)).toBe(2);
    expect(nearestIndex(times, 31)).toBe(3);
    expect(nearestIndex(times, 99)).toBe(3);
    expect(nearestIndex([], 1)).toBe(-1);
  });
  it('finds the step in force at a time', () => {
    expect(stepIndexAt(times, -1)).toBe(-1);
    expect(stepIndexAt(times, 0)).toBe(0);
    expect(stepIndexAt(times, 19)).toBe(1);
    expect(stepIndexAt(times, 20)).toBe(2);
    expect(stepIndexAt(times, 1000)).toBe(3);
  });
});

describe('curvePointsFor', () => {
  it('asks for about one point per pixel within the route limits', () => {
    expect(curvePointsFor(1000.4)).toBe(1000);
    expect(curvePointsFor(3)).toBe(16);
    expect(curvePointsFor(50_000)).toBe(20000);
    expect(curvePointsFor(Number.NaN)).toBe(800);
  });
});

describe('zoomRange', () => {
  const invert = (px: number) => px * 10;
  it('maps a drag to a time range in either direction', () => {
    expect(zoomRange(10, 50, invert)).toEqual({ start_us: 100, end_us: 500 });
    expect(zoomRange(50, 10, invert)).toEqual({ start_us: 100, end_us: 500 });
  });
  it('treats a tiny drag as a click', () => {
    expect(zoomRange(10, 12, invert)).toBeNull();
  });
  it('keeps the span within the plot: a drag begun in the axis margin starts at the step', () => {
    expect(zoomRange(2, 50, invert, [20, 300])).toEqual({ start_us: 200, end_us: 500 });
    expect(zoomRange(250, 400, invert, [20, 300])).toEqual({ start_us: 2500, end_us: 3000 });
    expect(zoomRange(0, 19, invert, [20, 300])).toBeNull();  // all of it outside: no zoom
  });
});

describe('highlightOf', () => {
  const curve = {
    t_us: [0, 10, 20],
    series: [
      { scope: 'a/b', name: 'b', bytes: [0, 5, 2] },
      { scope: null, name: OTHER_SERIES, bytes: [0, 1, 1] },
    ],
  };
  it('takes the scope’s own series at the curve’s times', () => {
    expect(highlightOf(curve, 'a/b')).toEqual({ scope: 'a/b', name: 'b', t_us: [0, 10, 20], bytes: [0, 5, 2] });
  });
  it('is null when the curve has no series of that scope', () => {
    expect(highlightOf(curve, 'a')).toBeNull();
    expect(highlightOf(curve, OTHER_SERIES)).toBeNull();
  });
});

describe('asRise', () => {
  const absolute: CurveResponse = {
    window: null, baseline: 'allocator_bytes_in_use', start_bytes: 10, absolute: true,
    peak: { time_us: 50, bytes: 100, rise_bytes: 90, node: null }, duration_us: 100,
    t_us: [0, 50], min_bytes: [10, 12], max_bytes: [10, 100], node_at: [0, 0], node_names: ['a'],
    snapshots: { t_us: [0, 50], bytes: [10, 100], series: { reserved_bytes: [16, 128], fragmentation: [0.5, 0.25] } },
    capacity_bytes: 150, series: [{ scope: null, name: '(other)', bytes: [0, 90] }],
  };

  it('takes the start off every value in bytes, and leaves what is no bytes or relative as it is', () => {
    const rise = asRise(absolute);
    expect(rise).toMatchObject({ absolute: false, start_bytes: null, rise_from: 10, capacity_bytes: null });
    expect([rise.min_bytes, rise.max_bytes, rise.snapshots.bytes]).toEqual([[0, 2], [0, 90], [0, 90]]);
    expect(rise.snapshots.series).toEqual({ reserved_bytes: [6, 118], fragmentation: [0.5, 0.25] });
    expect(rise.peak!.bytes).toBe(90);
    expect(rise.series).toBe(absolute.series); // already relative
    const relative = { ...absolute, absolute: false, start_bytes: null };
    expect(asRise(relative)).toBe(relative);
  });
});
