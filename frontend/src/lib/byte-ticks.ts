// A bytes axis at round binary values: its labels are in KiB, MiB, GiB (powers of 1024), so its
// ticks step by a power of two (4 MiB, 512 KiB), not by d3's decimal steps (4.77 MiB, 97.7 KiB).

export interface ByteAxis {
  /** The domain widened to whole steps (as d3's `nice` does with decimal ones). */
  domain: [number, number];
  ticks: number[];
}

/** About `count` ticks over [lo, hi] bytes, a power-of-two step apart (1 byte at the least). */
export function byteAxis(lo: number, hi: number, count: number): ByteAxis {
  const [a, b] = lo <= hi ? [lo, hi] : [hi, lo];
  const rough = (b - a) / Math.max(count, 1);
  const step = rough > 1 ? 2 ** Math.ceil(Math.log2(rough)) : 1;
  const first = Math.floor(a / step) * step;
  const last = Math.ceil(b / step) * step;
  const ticks: number[] = [];
  for (let t = first; t <= last; t += step) ticks.push(t);
  return { domain: [first, last === first ? first + step : last], ticks };
}
