import { describe, expect, it } from 'vitest';
import type { DeviceSummary, Figures } from '../api';
import { peakIdentity } from './identity';

const figures = (at_peak_bytes: number): Figures => ({
  at_peak_bytes,
  allocated_bytes: 0,
  op_peak_bytes: 0,
  live_bytes: 0,
  output_bytes: 0,
  temp_bytes: 0,
  persistent_bytes: 0,
});

function device(categories: number[], opTypes: number[], figure: number): DeviceSummary {
  return {
    categories: categories.map((b, i) => ({ name: 'other', at_peak_bytes: b, allocated_bytes: i })),
    op_types: opTypes.map((b, i) => ({ name: `Op${i}`, count: 1, figures: figures(b) })),
    figures: figures(figure),
  } as DeviceSummary;
}

describe('peakIdentity', () => {
  it('holds when categories, op types and the figure all equal the rise', () => {
    const id = peakIdentity(device([60, 40], [70, 30], 100), 100);
    expect(id).toEqual({ categoriesBytes: 100, opTypesBytes: 100, figureBytes: 100, peakRiseBytes: 100, holds: true });
  });
  it('fails when one side is off by a byte', () => {
    expect(peakIdentity(device([60, 40], [70, 29], 100), 100).holds).toBe(false);
    expect(peakIdentity(device([60, 40], [70, 30], 100), 101).holds).toBe(false);
  });
  it('counts negative contributions (frees of pre-step memory)', () => {
    expect(peakIdentity(device([120, -20], [100], 100), 100).holds).toBe(true);
  });
});
