import { describe, expect, it } from 'vitest';
import {
  countOf,
  formatBytes,
  formatBytesDelta,
  formatCount,
  formatExactBytes,
  formatPercent,
  formatTime,
  shareOf,
} from './format';

describe('formatBytes', () => {
  it('keeps small values in bytes', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1)).toBe('1 B');
    expect(formatBytes(1023)).toBe('1023 B');
  });
  it('uses binary units, not decimal', () => {
    expect(formatBytes(1024)).toBe('1.00 KiB');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(1_000_000)).toBe('977 KiB');
    expect(formatBytes(96_468_992)).toBe('92.0 MiB');
    expect(formatBytes(450 * 1024 * 1024)).toBe('450 MiB');
    expect(formatBytes(60 * 1024 ** 3)).toBe('60.0 GiB');
  });
  it('never prints 1024 of a unit', () => {
    expect(formatBytes(1024 * 1024 - 1)).toBe('1.00 MiB');
    expect(formatBytes(1024 ** 3 - 10)).toBe('1.00 GiB');
  });
  it('keeps the sign of negative values', () => {
    expect(formatBytes(-2048)).toBe('-2.00 KiB');
    expect(formatBytes(-5)).toBe('-5 B');
  });
  it('shows a dash for missing values', () => {
    expect(formatBytes(null)).toBe('—');
    expect(formatBytes(undefined)).toBe('—');
    expect(formatBytes(Number.NaN)).toBe('—');
  });
  it('signs deltas', () => {
    expect(formatBytesDelta(1024)).toBe('+1.00 KiB');
    expect(formatBytesDelta(-1024)).toBe('-1.00 KiB');
    expect(formatBytesDelta(0)).toBe('0 B');
  });
  it('prints exact bytes with separators', () => {
    expect(formatExactBytes(91226112)).toBe('91,226,112 B');
  });
});

describe('formatTime', () => {
  it('picks µs, ms or s', () => {
    expect(formatTime(0)).toBe('0 µs');
    expect(formatTime(850)).toBe('850 µs');
    expect(formatTime(1000)).toBe('1.00 ms');
    expect(formatTime(12_500)).toBe('12.5 ms');
    expect(formatTime(182_000)).toBe('182 ms');
    expect(formatTime(1_200_000)).toBe('1.20 s');
    expect(formatTime(125_000_000)).toBe('125 s');
  });
  it('rolls 999,999 µs over to seconds instead of "1000 ms"', () => {
    expect(formatTime(999_999)).toBe('1.00 s');
  });
  it('shows a dash for missing values', () => {
    expect(formatTime(null)).toBe('—');
  });
});

describe('formatPercent', () => {
  it('formats shares', () => {
    expect(formatPercent(0)).toBe('0%');
    expect(formatPercent(0.12)).toBe('12.0%');
    expect(formatPercent(0.0512)).toBe('5.12%');
    expect(formatPercent(1)).toBe('100%');
    expect(formatPercent(0.99999)).toBe('100%');
  });
  it('does not round tiny shares to zero', () => {
    expect(formatPercent(0.0004)).toBe('<0.1%');
  });
  it('shows a dash for null', () => {
    expect(formatPercent(null)).toBe('—');
  });
  it('guards a zero whole', () => {
    expect(shareOf(5, 0)).toBeNull();
    expect(shareOf(1, 4)).toBe(0.25);
  });
});

describe('formatCount', () => {
  it('groups thousands', () => {
    expect(formatCount(75000)).toBe('75,000');
    expect(formatCount(1048576)).toBe('1,048,576');
    expect(formatCount(999)).toBe('999');
    expect(formatCount(-1234)).toBe('-1,234');
  });
});

describe('countOf', () => {
  it('says one thing in the singular', () => {
    expect(countOf(1, 'execution')).toBe('1 execution');
    expect(countOf(2, 'execution')).toBe('2 executions');
    expect(countOf(1, 'child', 'children')).toBe('1 child');
    expect(countOf(1234, 'box', 'boxes')).toBe('1,234 boxes');
    expect(countOf(0, 'op type')).toBe('0 op types');
  });
});
