import { describe, expect, it } from 'vitest';
import { ARROW_STEP, steppedIndex } from './roving';

describe('roving focus', () => {
  it('steps through items in order, stopping at the ends, Home and End to either end', () => {
    expect(steppedIndex(0, 3, ARROW_STEP.ArrowRight!)).toBe(1);
    expect(steppedIndex(2, 3, ARROW_STEP.ArrowDown!)).toBe(2);
    expect(steppedIndex(0, 3, ARROW_STEP.ArrowLeft!)).toBe(0);
    expect(steppedIndex(1, 3, ARROW_STEP.Home!)).toBe(0);
    expect(steppedIndex(1, 3, ARROW_STEP.End!)).toBe(2);
    expect(steppedIndex(0, 0, 1)).toBe(-1);
    expect(ARROW_STEP.Enter).toBeUndefined();
  });
});
