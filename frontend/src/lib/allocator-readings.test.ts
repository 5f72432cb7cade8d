import { describe, expect, it } from 'vitest';
import { capacityPlacement, readingsAt, reservedSeries, shareOfCapacity } from './allocator-readings';

describe('capacityPlacement', () => {
  it('draws a limit near the curve as a line', () => {
    expect(capacityPlacement(100, 80, true)).toBe('line');
    expect(capacityPlacement(160, 80, true)).toBe('line');
  });
  it('names a limit far above the curve instead of flattening it', () => {
    expect(capacityPlacement(68719476736, 69495808, true)).toBe('above');
  });
  it('has nothing to place without a capacity or on a relative curve', () => {
    expect(capacityPlacement(null, 80, true)).toBeNull();
    expect(capacityPlacement(undefined, 80, true)).toBeNull();
    expect(capacityPlacement(0, 80, true)).toBeNull();
    expect(capacityPlacement(100, 80, false)).toBeNull();
  });
});

describe('reservedSeries', () => {
  it('keeps a series with reserved bytes', () => {
    expect(reservedSeries({ series: { reserved_bytes: [0, 4096] } })).toEqual([0, 4096]);
  });
  it('drops all zeros and absent series', () => {
    expect(reservedSeries({ series: { reserved_bytes: [0, 0] } })).toBeNull();
    expect(reservedSeries({ series: {} })).toBeNull();
    expect(reservedSeries({})).toBeNull();
  });
});

describe('readingsAt', () => {
  const snapshots = { t_us: [10, 20, 30], series: { reserved_bytes: [1, 2, 3], fragmentation: [0.5, 0.25, 0.125] } };
  it('reads the snapshot in force at a time', () => {
    expect(readingsAt(snapshots, 25)).toEqual({ reserved_bytes: 2, fragmentation: 0.25 });
    expect(readingsAt(snapshots, 30)).toEqual({ reserved_bytes: 3, fragmentation: 0.125 });
    expect(readingsAt(snapshots, 0)).toEqual({ reserved_bytes: 1, fragmentation: 0.5 });
  });
  it('gives what exists, null when nothing does', () => {
    expect(readingsAt({ t_us: [1], series: { fragmentation: [0.1] } }, 1)).toEqual({ reserved_bytes: null, fragmentation: 0.1 });
    expect(readingsAt({ t_us: [1], series: {} }, 1)).toBeNull();
    expect(readingsAt({ t_us: [], series: { fragmentation: [] } }, 1)).toBeNull();
  });
});

describe('shareOfCapacity', () => {
  it('is the share of the limit', () => {
    expect(shareOfCapacity(50, 200)).toBe(0.25);
    expect(shareOfCapacity(50, null)).toBeNull();
    expect(shareOfCapacity(null, 200)).toBeNull();
  });
});
