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
  it('names an old dump where the server says the records are missing', () => {
    expect(noCurveReason({ no_curve: 'no_records' })).toContain('no allocation records');
  });
  it('says nothing was allocated where the server says so', () => {
    expect(noCurveReason({ no_curve: 'nothing_allocated' })).toContain('nothing was allocated');
  });
});
