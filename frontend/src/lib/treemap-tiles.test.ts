import { describe, expect, it } from 'vitest';
import { TILE_BORDER, TILE_PADDING_X, TILE_PADDING_Y, aggregateTiles, moreLabel, tileBox, tileBoxStyle } from './treemap-tiles';

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

describe('tileBox', () => {
  /** The outer width a border-box element takes: never less than its padding and border. */
  const drawnWidth = (b: ReturnType<typeof tileBox>) => Math.max(b.width, 2 * (b.paddingX + b.border));
  const drawnHeight = (b: ReturnType<typeof tileBox>) => Math.max(b.height, 2 * (b.paddingY + b.border));

  it('keeps the CSS padding and border where the tile has room', () => {
    const box = tileBox(10, 20, 110, 80);
    expect(box).toEqual({ left: 10, top: 20, width: 100, height: 60, paddingX: TILE_PADDING_X, paddingY: TILE_PADDING_Y, border: TILE_BORDER });
    expect(tileBoxStyle(box)).toBe('left:10px;top:20px;width:100px;height:60px;');
  });

  it('keeps a thin tile at the right edge inside the treemap (the review’s "(N more)" tile drew 10 px past it)', () => {
    const area = 600;
    for (let w = 0; w <= 12; w++) {
      const box = tileBox(area - w, 0, area, 330);
      expect(box.left + drawnWidth(box), `width ${w}`).toBeLessThanOrEqual(area);
      expect(box.paddingX).toBeGreaterThanOrEqual(0);
    }
    expect(tileBoxStyle(tileBox(598, 0, 600, 330))).toBe('left:598px;top:0px;width:2px;height:330px;padding:2px 0px;');
    expect(tileBoxStyle(tileBox(599, 0, 600, 330))).toBe('left:599px;top:0px;width:1px;height:330px;padding:2px 0px;border-width:0px;');
  });

  it('keeps a flat tile at the bottom inside too', () => {
    for (let h = 0; h <= 6; h++) {
      const box = tileBox(0, 330 - h, 200, 330);
      expect(box.top + drawnHeight(box), `height ${h}`).toBeLessThanOrEqual(330);
    }
  });
});
