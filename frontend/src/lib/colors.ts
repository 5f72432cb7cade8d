// Colours for categories and op types; the same name always gets the same colour.

import type { CategoryName } from '../api';

export const CATEGORY_COLORS: Record<CategoryName, string> = {
  parameters: '#4e79a7',
  inputs: '#76b7b2',
  activations: '#f28e2b',
  gradients: '#e15759',
  optimizer: '#b07aa1',
  temporaries: '#edc948',
  other: '#9c9c9c',
};

const PALETTE = [
  '#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f',
  '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#8cd17d',
  '#86bcb6', '#f1ce63', '#a0cbe8', '#ffbe7d', '#d4a6c8', '#d37295',
];

/** FNV-1a: a stable small hash so a name keeps its colour across steps and reloads. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export function colorForName(name: string | null): string {
  if (!name) return '#9c9c9c';
  return PALETTE[hashString(name) % PALETTE.length]!;
}

/** Distinct colours for ranked series (the stacked curve): neighbours never share one. */
export function colorForRank(rank: number): string {
  return PALETTE[((rank % PALETTE.length) + PALETTE.length) % PALETTE.length]!;
}

/** The category holding most of a child's at-peak bytes (ties: category order). */
export function dominantCategory(categories: Partial<Record<CategoryName, number>>): CategoryName {
  let best: CategoryName = 'other';
  let bestBytes = 0;
  for (const name of Object.keys(CATEGORY_COLORS) as CategoryName[]) {
    const b = categories[name] ?? 0;
    if (b > bestBytes) {
      best = name;
      bestBytes = b;
    }
  }
  return best;
}

/** Shade 0..1 of a box by its bytes relative to the largest box, on a square-root scale so small boxes stay visible. */
export function byteShade(bytes: number, maxBytes: number): number {
  if (maxBytes <= 0 || bytes <= 0) return 0;
  return Math.min(1, Math.sqrt(bytes / maxBytes));
}
