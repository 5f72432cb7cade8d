import { describe, expect, it } from 'vitest';
import { aggregateTiles, moreLabel } from './treemap-tiles';

interface Child {
  scope: string;
  bytes: number;
}
const value = (c: Child) => c.bytes;
const key = (c: Child) => c.scope;

function children(values: number[]): Child[] {
  return values.map((bytes, i) => ({ scope: `s${i}`, bytes }));
}

describe('aggregateTiles', () => {
  it('keeps every child when all are large enough', () => {
    const out = aggregateTiles(children([50, 30, 20]), value, key, { areaPx: 10_000 });
    expect(out.tiles.map((t) => t.key)).toEqual(['s0', 's1', 's2']);
    expect(out.total).toBe(100);
  });

  it('folds children below the minimum area into one "(N more)" tile with their sum', () => {
    // 1000 px² in all: 1 byte in 1000 is 1 px², below the 36 px² default.
    const out = aggregateTiles(children([900, 95, 1, 1, 1, 2]), value, key, { areaPx: 1000 });
    const more = out.tiles.slice(-1)[0]!;
    expect(more.type).toBe('more');
    if (more.type !== 'more') throw new Error('expected a more tile');
    expect(more.count).toBe(4);
    expect(more.value).toBe(5);
    expect(out.tiles.slice(0, -1).map((t) => t.key)).toEqual(['s0', 's1']);
    // Area is conserved: tiles add up to the total.
    expect(out.tiles.reduce((s, t) => s + t.value, 0)).toBe(out.total);
  });

  it('sorts tiles by value, descending, whatever the input order', () => {
    const out = aggregateTiles(children([1, 5, 3]), value, key, { areaPx: 1e6 });
    expect(out.tiles.map((t) => t.value)).toEqual([5, 3, 1]);
  });

  it('sets zero and negative children apart', () => {
    const out = aggregateTiles(children([10, 0, -4, 5]), value, key, { areaPx: 1e6 });
    expect(out.tiles.map((t) => t.key)).toEqual(['s0', 's3']);
    expect(out.nonPositive.map((c) => c.scope)).toEqual(['s1', 's2']);
    expect(out.total).toBe(15);
  });

  it('never draws more than maxTiles tiles for 75,000 children', () => {
    const many = children(Array.from({ length: 75_000 }, (_, i) => 75_000 - i));
    const out = aggregateTiles(many, value, key, { areaPx: 1e12, maxTiles: 300 });
    expect(out.tiles.length).toBe(300);
    const more = out.tiles[299]!;
    expect(more.type).toBe('more');
    if (more.type === 'more') expect(more.count).toBe(75_000 - 299);
    expect(out.tiles.reduce((s, t) => s + t.value, 0)).toBe(out.total);
  });

  it('keeps a tiny "(self)" tile visible when asked to', () => {
    const items = [...children([1000, 1000]), { scope: 'a/(self)', bytes: 1 }];
    const out = aggregateTiles(items, value, key, {
      areaPx: 2000,
      keep: (c) => c.scope.endsWith('/(self)'),
    });
    expect(out.tiles.map((t) => t.key)).toContain('a/(self)');
    expect(out.tiles.some((t) => t.type === 'more')).toBe(false);
  });

  it('keeps kept tiles even when the tile budget is exceeded', () => {
    const items = [...children([10, 9, 8, 7]), { scope: 'x/(self)', bytes: 1 }];
    const out = aggregateTiles(items, value, key, {
      areaPx: 1e9,
      maxTiles: 3,
      keep: (c) => c.scope.endsWith('/(self)'),
    });
    expect(out.tiles.length).toBe(3);
    expect(out.tiles.map((t) => t.key)).toEqual(['s0', 'x/(self)', '(more)']);
    const more = out.tiles[2]!;
    if (more.type === 'more') expect(more.value).toBe(9 + 8 + 7);
  });

  it('folds a level of thousands of equal, tiny children into one tile', () => {
    const equal = children(Array.from({ length: 20_000 }, () => 1));
    const out = aggregateTiles(equal, value, key, { areaPx: 100_000 });
    expect(out.tiles.length).toBe(1);
    const more = out.tiles[0]!;
    expect(more.type === 'more' && more.count).toBe(20_000);
    expect(more.value).toBe(20_000);
  });

  it('labels the folded tile', () => {
    expect(moreLabel(12)).toBe('(12 more)');
  });
});
