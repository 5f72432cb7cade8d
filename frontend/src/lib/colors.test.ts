import { describe, expect, it } from 'vitest';
import { byteShade, colorForName, colorForRank, dominantCategory, hashString } from './colors';

describe('colours', () => {
  it('gives a name the same colour every time and differs across names', () => {
    expect(colorForName('Conv2D')).toBe(colorForName('Conv2D'));
    const colours = new Set(['Conv2D', 'BiasAdd', 'Relu', 'MatMul', 'Transpose (layout)'].map(colorForName));
    expect(colours.size).toBeGreaterThan(2);
    expect(hashString('a')).not.toBe(hashString('b'));
  });
  it('gives ranked series distinct colours', () => {
    const first = Array.from({ length: 10 }, (_, i) => colorForRank(i));
    expect(new Set(first).size).toBe(10);
    expect(colorForRank(-1)).toMatch(/^#/);
  });
  it('picks the dominant category, other when empty', () => {
    expect(dominantCategory({ activations: 5, gradients: 9, parameters: 1 })).toBe('gradients');
    expect(dominantCategory({})).toBe('other');
    expect(dominantCategory({ activations: -5 })).toBe('other');
  });
  it('shades on a square-root scale clamped to 0..1', () => {
    expect(byteShade(25, 100)).toBeCloseTo(0.5);
    expect(byteShade(0, 100)).toBe(0);
    expect(byteShade(200, 100)).toBe(1);
    expect(byteShade(5, 0)).toBe(0);
  });
});
