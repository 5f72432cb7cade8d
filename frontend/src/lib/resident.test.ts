import { describe, expect, it } from 'vitest';
import type { CategoryTotal, DeviceSummary } from '../api';
import { canShowAbsolute, categoryRows, paramsText, peakMode } from './resident';

describe('resident', () => {
  it('shows absolute memory only with a baseline', () => {
    const withBaseline = { baseline: 'allocator_bytes_in_use', start_bytes: 10, peak_bytes: 30 } as DeviceSummary;
    const without = { baseline: 'none', start_bytes: null, peak_bytes: null } as DeviceSummary;
    expect(canShowAbsolute(withBaseline)).toBe(true);
    expect(peakMode(withBaseline, 'absolute')).toBe('absolute');
    expect(peakMode(without, 'absolute')).toBe('rise');
    expect(peakMode(withBaseline, 'rise')).toBe('rise');
  });

  it('puts resident bytes beside the at-peak ones, in category order', () => {
    const categories: CategoryTotal[] = [
      { name: 'activations', at_peak_bytes: 100, resident_bytes: 0 },
      { name: 'optimizer', at_peak_bytes: 0, resident_bytes: 40 },
      { name: 'parameters', at_peak_bytes: 2, resident_bytes: 20 },
      { name: 'inputs', at_peak_bytes: 0, resident_bytes: 0 },
    ];
    expect(categoryRows(categories)).toEqual([
      { name: 'parameters', atPeakBytes: 2, residentBytes: 20, totalBytes: 22 },
      { name: 'activations', atPeakBytes: 100, residentBytes: 0, totalBytes: 100 },
      { name: 'optimizer', atPeakBytes: 0, residentBytes: 40, totalBytes: 40 },
    ]);
    expect(categoryRows([{ name: 'activations', at_peak_bytes: 5 }])).toEqual([
      { name: 'activations', atPeakBytes: 5, residentBytes: null, totalBytes: null },
    ]);
  });

  it('says a scope’s parameters, or nothing', () => {
    expect(paramsText({ param_count: 2624, param_bytes: 10496, slot_bytes: 20992 })).toBe('2,624 params (10.3 KiB) · optimizer slots 20.5 KiB');
    expect(paramsText({ param_count: 1, param_bytes: 4, slot_bytes: 0 })).toBe('1 param (4 B)');
    expect(paramsText({ param_count: 0, param_bytes: 0, slot_bytes: 0 })).toBeNull();
    expect(paramsText({ param_count: null })).toBeNull();
    expect(paramsText({})).toBeNull();
  });
});
