// The one place that turns bytes, times, counts and shares into text.

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

/** Three significant digits, trimmed so that 1023.96 does not read "1024". */
function scaled(value: number, units: readonly string[], base: number): string {
  let unit = 0;
  let v = Math.abs(value);
  while (v >= base && unit < units.length - 1) {
    v /= base;
    unit++;
  }
  let text = v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0);
  if (Number(text) >= base && unit < units.length - 1) {
    v /= base;
    unit++;
    text = v.toFixed(2);
  }
  return `${value < 0 ? '-' : ''}${text} ${units[unit]}`;
}

/** Bytes with binary units: 512 B, 1.50 KiB, 96.0 MiB, 1.25 GiB. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—';
  if (Math.abs(bytes) < 1024) return `${Math.round(bytes)} B`;
  return scaled(bytes, BYTE_UNITS, 1024);
}

/** Signed bytes for deltas: +1.00 MiB, -512 B, 0 B. */
export function formatBytesDelta(bytes: number): string {
  if (bytes > 0) return `+${formatBytes(bytes)}`;
  return formatBytes(bytes);
}

/** Exact byte count with thousands separators, for tooltips and tables. */
export function formatExactBytes(bytes: number): string {
  return `${formatCount(bytes)} B`;
}

/** A duration or a time within the step given in microseconds: 850 µs, 12.5 ms, 1.20 s. */
export function formatTime(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return '—';
  const a = Math.abs(us);
  const sign = us < 0 ? '-' : '';
  if (a < 1000) return `${sign}${Math.round(a)} µs`;
  if (a < 1_000_000) {
    const ms = a / 1000;
    const text = ms.toFixed(ms < 10 ? 2 : ms < 100 ? 1 : 0);
    // 999_999 µs rounds to "1000 ms": say seconds instead.
    if (Number(text) < 1000) return `${sign}${text} ms`;
  }
  const s = a / 1_000_000;
  return `${sign}${s.toFixed(s < 10 ? 2 : s < 100 ? 1 : 0)} s`;
}

/** A share in 0..1 as a percentage: 12.3%, <0.1%, 100%. */
export function formatPercent(share: number | null | undefined): string {
  if (share === null || share === undefined || !Number.isFinite(share)) return '—';
  if (share === 0) return '0%';
  const pct = share * 100;
  if (Math.abs(pct) < 0.1) return share > 0 ? '<0.1%' : '>-0.1%';
  if (Math.abs(pct) >= 99.95 && Math.abs(pct) < 100.05) return share > 0 ? '100%' : '-100%';
  return `${pct.toFixed(Math.abs(pct) < 10 ? 2 : 1)}%`;
}

/** Share of a whole, guarding a zero whole. */
export function shareOf(part: number, whole: number): number | null {
  if (!whole) return null;
  return part / whole;
}

/** A count and its noun, singular for one: `countOf(1, 'execution')` is "1 execution" (plural: noun + s, or given). */
export function countOf(n: number, noun: string, plural = `${noun}s`): string {
  return `${formatCount(n)} ${Math.round(Math.abs(n)) === 1 ? noun : plural}`;
}

/** Integer counts with thousands separators: 75,000. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return '—';
  const sign = n < 0 ? '-' : '';
  return sign + Math.round(Math.abs(n)).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
