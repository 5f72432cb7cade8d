import { describe, expect, it } from 'vitest';
import { byteAxis } from './byte-ticks';

const MiB = 1024 * 1024;

describe('byteAxis', () => {
  it('steps by a power of two, so binary labels read round', () => {
    // A curve up to 19.1 MiB: d3 gave 4.77, 9.54, 14.3, 19.1 MiB.
    expect(byteAxis(0, 19.1 * MiB, 5)).toEqual({ domain: [0, 20 * MiB], ticks: [0, 4, 8, 12, 16, 20].map((t) => t * MiB) });
    expect(byteAxis(0, 1.5 * MiB, 5).ticks).toEqual([0, 0.5, 1, 1.5].map((t) => t * MiB));
  });

  it('covers a domain below zero (a relative curve) and a flat or tiny one', () => {
    const axis = byteAxis(-3 * MiB, 5 * MiB, 4);
    expect(axis.domain).toEqual([-4 * MiB, 6 * MiB]);
    expect(axis.ticks).toEqual([-4, -2, 0, 2, 4, 6].map((t) => t * MiB));
    expect(byteAxis(0, 0, 5)).toEqual({ domain: [0, 1], ticks: [0] });
    expect(byteAxis(0, 3, 5).ticks).toEqual([0, 1, 2, 3]);
    expect(byteAxis(10, 2, 5).domain).toEqual([2, 10]);
  });
});
