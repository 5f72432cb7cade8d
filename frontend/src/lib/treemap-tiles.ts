// Which children get their own treemap tile and which fold into one "(N more)" tile.

export interface AggregateOptions<T> {
  /** Area the treemap covers, in square pixels. */
  areaPx: number;
  /** Children whose share of the area is below this fold into "(N more)". */
  minTileAreaPx?: number;
  /** Upper bound on tiles drawn, the "(N more)" tile included. */
  maxTiles?: number;
  /** Children that keep their own tile however small (the "(self)" tile). */
  keep?: (item: T) => boolean;
}

export interface ItemTile<T> {
  type: 'item';
  key: string;
  value: number;
  item: T;
}
export interface MoreTile<T> {
  type: 'more';
  key: string;
  value: number;
  /** How many children the tile stands for. */
  count: number;
  items: T[];
}
export type Tile<T> = ItemTile<T> | MoreTile<T>;

export interface Aggregated<T> {
  tiles: Tile<T>[];
  /** Sum of the positive values: what the tiles' areas add up to. */
  total: number;
  /** Children with a zero or negative value, which no area can show. */
  nonPositive: T[];
}

export const MORE_KEY = '(more)';
export const DEFAULT_MIN_TILE_AREA_PX = 36; // about 6 x 6 px: smaller is unreadable and unclickable
export const DEFAULT_MAX_TILES = 300;

/**
 * Keeps the largest children as tiles, in descending order, and folds the
 * ones too small to see (or beyond maxTiles) into a single "(N more)" tile.
 * Zero and negative values cannot be drawn as areas and are returned apart.
 */
export function aggregateTiles<T>(
  items: readonly T[],
  value: (item: T) => number,
  key: (item: T) => string,
  options: AggregateOptions<T>,
): Aggregated<T> {
  const minArea = options.minTileAreaPx ?? DEFAULT_MIN_TILE_AREA_PX;
  const maxTiles = Math.max(1, options.maxTiles ?? DEFAULT_MAX_TILES);
  const keep = options.keep ?? (() => false);

  const positive: { item: T; v: number }[] = [];
  const nonPositive: T[] = [];
  for (const item of items) {
    const v = value(item);
    if (v > 0 && Number.isFinite(v)) positive.push({ item, v });
    else nonPositive.push(item);
  }
  // Stable sort: equal values keep the server's order.
  positive.sort((a, b) => b.v - a.v);
  const total = positive.reduce((sum, p) => sum + p.v, 0);

  const own: ItemTile<T>[] = [];
  const folded: { item: T; v: number }[] = [];
  for (const p of positive) {
    const area = total > 0 ? (p.v / total) * options.areaPx : 0;
    if (area >= minArea || keep(p.item)) own.push({ type: 'item', key: key(p.item), value: p.v, item: p.item });
    else folded.push(p);
  }
  // Past the tile budget, the smallest own tiles fold too (kept ones last).
  const budget = folded.length > 0 ? maxTiles - 1 : maxTiles;
  if (own.length > budget) {
    const byPriority = own
      .map((tile, index) => ({ tile, index }))
      .sort((a, b) => Number(keep(b.tile.item)) - Number(keep(a.tile.item)) || b.tile.value - a.tile.value);
    const kept = new Set(byPriority.slice(0, maxTiles - 1).map((x) => x.index));
    const stay: ItemTile<T>[] = [];
    own.forEach((tile, index) => {
      if (kept.has(index)) stay.push(tile);
      else folded.push({ item: tile.item, v: tile.value });
    });
    own.length = 0;
    own.push(...stay);
  }

  const tiles: Tile<T>[] = [...own];
  if (folded.length > 0) {
    folded.sort((a, b) => b.v - a.v);
    tiles.push({
      type: 'more',
      key: MORE_KEY,
      value: folded.reduce((sum, p) => sum + p.v, 0),
      count: folded.length,
      items: folded.map((p) => p.item),
    });
  }
  return { tiles, total, nonPositive };
}

export function moreLabel(count: number): string {
  return `(${count} more)`;
}

/** A tile's padding (x, y) and border, as the page's CSS gives a tile with room for them. */
export const TILE_PADDING_X = 4;
export const TILE_PADDING_Y = 2;
export const TILE_BORDER = 1;

export interface TileBox {
  left: number;
  top: number;
  width: number;
  height: number;
  /** Padding and border for this tile: less than the CSS's where the tile is too small for them. */
  paddingX: number;
  paddingY: number;
  border: number;
}

/**
 * Where a tile laid out at [x0, x1] x [y0, y1] is drawn. Tiles are border-box, but a box
 * cannot be narrower than its padding and border: a 2 px "(N more)" tile with the CSS's 4 px
 * padding was drawn 10 px wide and spilled past the treemap's right edge (and a click, which
 * focuses it, scrolled the treemap sideways). A small tile gets less padding and border, so it
 * stays inside its rectangle.
 */
export function tileBox(x0: number, y0: number, x1: number, y1: number): TileBox {
  const width = Math.max(0, x1 - x0);
  const height = Math.max(0, y1 - y0);
  const border = Math.min(TILE_BORDER, Math.floor(width / 2), Math.floor(height / 2));
  return {
    left: x0,
    top: y0,
    width,
    height,
    paddingX: Math.min(TILE_PADDING_X, Math.floor((width - 2 * border) / 2)),
    paddingY: Math.min(TILE_PADDING_Y, Math.floor((height - 2 * border) / 2)),
    border,
  };
}

/** The inline style of a tile's box: its place and size, and its padding and border where the CSS's do not fit. */
export function tileBoxStyle(box: TileBox): string {
  let style = `left:${box.left}px;top:${box.top}px;width:${box.width}px;height:${box.height}px;`;
  if (box.paddingX < TILE_PADDING_X || box.paddingY < TILE_PADDING_Y) style += `padding:${box.paddingY}px ${box.paddingX}px;`;
  if (box.border < TILE_BORDER) style += `border-width:${box.border}px;`;
  return style;
}
