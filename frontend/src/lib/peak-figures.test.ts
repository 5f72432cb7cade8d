import { describe, expect, it } from 'vitest';
import { PEAK_ONLY_KEYS, existingFigures, noCurveReason, rankingFigure } from './peak-figures';

describe('peak figures', () => {
  const rows = [{ key: 'at_peak_bytes' }, { key: 'allocated_bytes' }, { key: 'share_of_peak' }, { key: 'output_bytes' }];

  it('keeps every figure of a step with a curve', () => {
    expect(existingFigures(rows, (r) => r.key, true)).toEqual(rows);
  });

  it('leaves out at-peak figures without a curve, in order', () => {
    expect(existingFigures(rows, (r) => r.key, false).map((r) => r.key)).toEqual(['allocated_bytes', 'output_bytes']);
    expect(PEAK_ONLY_KEYS).toContain('at_peak_bytes');
  });

  it('ranks by allocated bytes without a curve', () => {
    expect(rankingFigure(true)).toBe('at_peak_bytes');
    expect(rankingFigure(false)).toBe('allocated_bytes');
  });
});

describe('noCurveReason', () => {
  const device = (allocated: number) => ({ figures: { at_peak_bytes: 0, allocated_bytes: allocated, op_peak_bytes: 0, live_bytes: 0, output_bytes: 64, temp_bytes: 0, persistent_bytes: 0 } });
  it('names an old dump when bytes were allocated without records', () => {
    expect(noCurveReason(device(4096))).toContain('no allocation records');
  });
  it('says nothing was allocated when nothing was', () => {
    expect(noCurveReason(device(0))).toContain('nothing was allocated');
  });
});
