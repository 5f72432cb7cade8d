import { describe, expect, it } from 'vitest';
import type { Finding } from '../api';
import { INITIAL_SELECTION } from '../selection';
import { findingLabel, findingSelection, findingTitle, notAtPeak, sortFindings } from './findings';

const finding = (over: Partial<Finding>): Finding => ({
  kind: 'conv_scratch',
  bytes: 1,
  scope: 'big_conv',
  nodes: [],
  message: 'm',
  suggestion: 's',
  device: 'CPU:0/cpu',
  details: {},
  ...over,
});

describe('findings', () => {
  it('sorts by bytes, keeping the route’s order on ties', () => {
    const a = finding({ bytes: 5, message: 'a' });
    const b = finding({ bytes: 9, message: 'b' });
    const c = finding({ bytes: 5, message: 'c' });
    expect(sortFindings([a, b, c]).map((f) => f.message)).toEqual(['b', 'a', 'c']);
  });

  it('puts findings that hold nothing at the peak after the rest, whatever their bytes', () => {
    const freed = finding({ bytes: 32, message: 'freed', details: { at_peak_bytes: 0 } });
    const held = finding({ bytes: 32, message: 'held', details: { at_peak_bytes: 32 } });
    const small = finding({ kind: 'layout_transpose', bytes: 2, message: 'small' });
    expect(sortFindings([freed, small, held]).map((f) => f.message)).toEqual(['held', 'small', 'freed']);
    expect([freed, held, small].map(notAtPeak)).toEqual([true, false, false]);
  });

  it('selects the finding’s layer in the layer grouping, its parent focused, on its device', () => {
    const current = { ...INITIAL_SELECTION, run: 'r', tag: 't', device: 'GPU:0/bfc', group: 'scope' as const };
    expect(findingSelection(finding({ scope: 'shared_model/unet_08' }), current)).toEqual({
      group: 'layer',
      device: 'CPU:0/cpu',
      focus: 'shared_model',
      selected: 'shared_model/unet_08',
    });
    expect(findingSelection(finding({ scope: 'big_conv', device: null }), current)).toMatchObject({ focus: '', device: 'GPU:0/bfc' });
    expect(findingSelection(finding({ scope: null }), current)).toBeNull();
  });

  it('names kinds in words', () => {
    expect(findingLabel('allocator_gap')).toBe('allocator gap');
    expect(findingLabel('undonated_arguments')).toBe('arguments not donated');
    expect(findingLabel('variable_copies')).toBe('variables copied by their updates');
    expect(findingLabel('new_kind')).toBe('new kind');
  });

  it('titles growth between the steps as such, not as memory the step left behind', () => {
    expect(findingTitle(finding({ kind: 'step_growth', details: { left_behind_bytes: 4096 } }))).toBe('memory left behind by the step');
    expect(findingTitle(finding({ kind: 'step_growth', details: { left_behind_bytes: 0, between_steps_bytes: 1 << 21 } }))).toBe(
      'memory that grows between steps',
    );
    expect(findingTitle(finding({ kind: 'allocator_gap' }))).toBe('allocator gap');
  });
});
