// The batch-size what-if: which predicted series the chart draws, its domains,
// the method's words, and the batch the user typed. Pure; views/whatif.ts draws.

import type { Bytes, RunInfo, WhatIfResponse, WhatIfSeries } from '../api';
import { formatCount } from '../format';

/** The largest batch the route takes. */
export const MAX_BATCH = 16_777_216;

export interface WhatIfPoint {
  batch: number;
  bytes: Bytes;
}

export interface WhatIfChart {
  points: WhatIfPoint[];
  /** True: absolute bytes (resident + rise); false: the rise over the step's start (no baseline). */
  absolute: boolean;
  /** The limit drawn as a line, when it is in the chart's own terms (absolute or rise). */
  limitBytes: Bytes | null;
  maxBatch: number | null;
  /** The asked batch and its predicted peak, marked on the line. */
  asked: WhatIfPoint | null;
  xDomain: [number, number];
  yDomain: [number, number];
}

/** About how wide a character of the charts' 10 px axis text is. */
const AXIS_CHAR_PX = 6;

/**
 * How to anchor a label of `text` at x so that it stays within [lo, hi]: centred where it fits,
 * else flush with the edge it would cross (the largest batch searched at the right end of the axis).
 */
export function edgeAnchor(x: number, text: string, lo: number, hi: number): 'start' | 'middle' | 'end' {
  const half = (text.length * AXIS_CHAR_PX) / 2;
  if (x + half > hi) return 'end';
  if (x - half < lo) return 'start';
  return 'middle';
}

/** A label set beside a mark at x: after it ('start') where it fits before `hi`, else before it ('end'). */
export function besideAnchor(x: number, text: string, hi: number): 'start' | 'end' {
  return x + 6 + text.length * AXIS_CHAR_PX > hi ? 'end' : 'start';
}

/** About how wide a character of a point's label is (11 px, bold). */
const LABEL_CHAR_PX = 7;
/** A point label's font size, and the room kept between its baseline and the x axis (descenders, the dots on the axis). */
const LABEL_FONT_PX = 11;
const LABEL_AXIS_GAP_PX = 8;

/** The chart's plot area: inside the axes, in the SVG's pixels (y grows downwards: `bottom` is the x axis). */
export interface PlotArea {
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/**
 * Where the label of a point at (x, y) goes: a little above it, after it where it fits before
 * the right edge, else before it, and always inside the plot area: never below the x axis's
 * line or on it (a point near 0 B had its label across the axis, by the "0 B" tick), never
 * over the y axis's labels. Returns the text's x, its baseline and its anchor.
 */
export function pointLabelPlace(x: number, y: number, text: string, plot: PlotArea): { x: number; y: number; anchor: 'start' | 'end' } {
  const width = text.length * LABEL_CHAR_PX;
  let place: { x: number; anchor: 'start' | 'end' };
  if (x + 6 + width <= plot.right) place = { x: Math.max(x + 6, plot.left), anchor: 'start' };
  else if (x - 6 - width >= plot.left) place = { x: x - 6, anchor: 'end' };
  else place = { x: plot.right, anchor: 'end' }; // wider than either side: flush with the right edge
  return { ...place, y: labelBaseline(y - 8, plot) };
}

/** A label's baseline moved inside the plot area: its top below `top`, its descenders clear above the x axis. */
export function labelBaseline(baseline: number, plot: PlotArea): number {
  return Math.min(Math.max(baseline, plot.top + LABEL_FONT_PX), plot.bottom - LABEL_AXIS_GAP_PX);
}

/** How many batch ticks fit along `px` without their labels touching, the largest batch's label the widest. */
export function batchTickCount(px: number, largest: number): number {
  return Math.max(2, Math.floor(px / (formatCount(largest).length * AXIS_CHAR_PX + 24)));
}

/** A batch size typed by the user: a whole number in 1..MAX_BATCH, else null. */
export function parseBatch(text: string): number | null {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed)) return null;
  const batch = Number(trimmed);
  return batch >= 1 && batch <= MAX_BATCH ? batch : null;
}

/**
 * The traced run the answer is quoted against: the one the one step is scaled from where it leads
 * (the run whose batch is nearest the one asked), else the first (the page's own run).
 */
export function quotedRun(w: WhatIfResponse): WhatIfResponse['runs'][number] | undefined {
  const one = w.predictions.one_step;
  if (w.method === 'one_step' && one) return w.runs.find((r) => r.run === one.from_run && r.tag === one.from_tag) ?? w.runs[0];
  return w.runs[0];
}

/** "from one step (batch 2)" or "fitted over 2 runs (batches 2, 4)", with the lead's warning (the answer's notes apart: `notes`). */
export function methodText(w: WhatIfResponse): string {
  return leadText(w);
}

/** What the answer should be read with, one line each (a margin under a limit, predictions far apart). */
export function notes(w: WhatIfResponse): string[] {
  return w.notes ?? [];
}

function leadText(w: WhatIfResponse): string {
  if (w.method === 'fit') {
    const batches = w.predictions.fit?.batches ?? w.runs.map((r) => r.batch);
    const fitted = `fitted over ${w.runs.length} runs (batches ${batches.join(', ')})`;
    const warning = w.predictions.fit?.warning;
    return warning ? `${fitted} · ${warning}` : fitted;
  }
  const traced = w.predictions.one_step?.traced_batch ?? w.runs[0]?.batch;
  const text = traced === undefined ? 'from one step' : `from one step (batch ${traced})`;
  const fit = w.predictions.fit;
  // A fit the server set aside (its traced peaks do not grow with the batch): say so, and why.
  // Runs picked to fit with, all at the traced batch size: nothing to fit, and the reader should know why.
  const said = fit
    ? `${text} · the fit over batches ${fit.batches.join(', ')} is set aside${fit.warning ? `: ${fit.warning}` : ''}`
    : w.runs.length > 1
      ? `${text}: no fit, the runs picked hold no other batch size`
      : text;
  const warning = w.predictions.one_step?.warning;
  return warning ? `${said} · ${warning}` : said;
}

/** The runs picked to fit with that the server left out ("" when none): their names, and each one's reason. */
export function skippedText(w: WhatIfResponse): { text: string; reasons: string } {
  const skipped = w.skipped_runs ?? [];
  if (skipped.length === 0) return { text: '', reasons: '' };
  return {
    text: `left out: ${skipped.map((s) => s.run).join(', ')}`,
    reasons: skipped.map((s) => `${s.run} ${s.tag}: ${s.reason}`).join('\n'),
  };
}

/** The lead method's series: absolute peaks where every point has one, else the rise. */
function leadSeries(w: WhatIfResponse): { values: (Bytes | null)[]; absolute: boolean } {
  const series: WhatIfSeries | null | undefined = w.series[w.method] ?? w.series.one_step ?? w.series.fit;
  if (!series) return { values: [], absolute: false };
  const absolute = series.peak_bytes !== null && series.peak_bytes.length > 0;
  return { values: series.peak_bytes !== null && absolute ? series.peak_bytes : series.peak_rise_bytes, absolute };
}

/** What the chart of predicted peak against batch size draws, and its domains (y from 0). */
export function whatIfChart(w: WhatIfResponse): WhatIfChart {
  const { values, absolute } = leadSeries(w);
  const points: WhatIfPoint[] = [];
  w.series.batch.forEach((batch, i) => {
    const bytes = values[i];
    if (bytes !== null && bytes !== undefined) points.push({ batch, bytes });
  });
  const limitInTerms =
    w.limit_bytes !== null && (w.limit_applies_to === (absolute ? 'peak_bytes' : 'peak_rise_bytes') || w.limit_applies_to === null);
  const limitBytes = limitInTerms ? w.limit_bytes : null;
  const askedBytes = absolute ? w.predicted_peak_bytes : w.predicted_peak_rise_bytes;
  const asked = askedBytes === null ? null : { batch: w.batch, bytes: askedBytes };
  const batches = points.map((p) => p.batch).concat(asked ? [asked.batch] : []);
  const xMin = batches.length ? Math.min(...batches) : 1;
  const xMax = batches.length ? Math.max(...batches) : 2;
  const yMax = Math.max(1, ...points.map((p) => p.bytes), asked?.bytes ?? 0, limitBytes ?? 0);
  return {
    points,
    absolute,
    limitBytes,
    maxBatch: w.max_batch,
    asked,
    xDomain: [Math.min(xMin, xMax - 1), xMax],
    yDomain: [0, yMax * 1.08],
  };
}

/** The largest batch that fits, in words: "largest batch that fits: 12", or why there is none. */
export function maxBatchText(w: WhatIfResponse): string {
  if (w.limit_bytes === null) return 'no limit given: type the memory the step must fit in under “limit” to find the largest batch that fits';
  if (w.max_batch === null && w.method === 'fit' && w.predictions.fit?.falls) return 'no largest batch: the fit falls with the batch';
  if (w.max_batch === null) return `any batch fits: none up to ${formatCount(w.max_batch_searched)} reaches the limit`;
  if (w.max_batch === 0) return 'not even batch 1 fits';
  return `largest batch that fits: ${formatCount(w.max_batch)}`;
}

/** The route's error for a step, as the server words it (it says why a step cannot be scaled, XPlane steps included). */
export function whatIfErrorText(step: { run: string; tag: string }, error: string): string {
  // A 422 is the what-if's "cannot answer this step", said in words: its status is no news. The server
  // names the step first where it says why ("r t ran XLA programs"): named once here.
  const said = error.replace(/ \(HTTP 422\)$/, '');
  const named = `${step.run} ${step.tag} `;
  return `No what-if for ${step.run} ${step.tag}: ${said.startsWith(named) ? said.slice(named.length) : said}`;
}

function sharedPrefix(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** The other traced steps of the run shown (those with devices: not the Keras callback's empty `batch_N`
 * records), in the run's order: steps a script traced at other batch sizes into one run, to fit with. */
export function otherTags(runs: readonly RunInfo[], run: string | null, tag: string | null): string[] {
  const steps = runs.find((r) => r.run === run)?.steps ?? [];
  return steps.filter((s) => s.tag !== tag && s.devices.length > 0).map((s) => s.tag);
}

/**
 * The other runs the user may fit with, the current one left out: those named
 * most like it first (unet_b4 beside unet_b2, likely the same model), else in run order.
 */
export function otherRuns(runs: readonly { run: string }[], current: string | null): string[] {
  const others = runs.map((r) => r.run).filter((r) => r !== current);
  if (current === null) return others;
  return others
    .map((run, i) => ({ run, i, shared: sharedPrefix(run, current) }))
    .sort((a, b) => b.shared - a.shared || a.i - b.i)
    .map((x) => x.run);
}

// Binary units, whichever way they are written: "16 GB" is read as 16 GiB, as the CLI's --limit reads it
// (a "16 GB" GPU holds 16 GiB).
const UNIT_BYTES: Record<string, number> = { '': 1, b: 1 };
['k', 'm', 'g', 't'].forEach((prefix, i) => {
  for (const unit of [prefix, `${prefix}b`, `${prefix}i`, `${prefix}ib`]) UNIT_BYTES[unit] = 2 ** (10 * (i + 1));
});

/** A bare number under this is no memory limit anyone means in bytes ("40" for 40 GiB): a unit is asked for. */
const BARE_BYTES_MIN = 2 ** 20;

/**
 * A memory limit typed by the user ("16 GiB", "16GB", "512m", "1073741824"; binary
 * units): whole bytes in 1..2^62, null for empty or unreadable text, and for a bare
 * number under 1 MiB ("40": 40 bytes is no limit; 40 GiB needs its unit).
 */
export function parseLimit(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (!m) return null;
  if (m[2] === '' && Number(m[1]) < BARE_BYTES_MIN) return null;
  const unit = UNIT_BYTES[m[2]!.toLowerCase()];
  if (unit === undefined) return null;
  const bytes = Math.round(Number(m[1]) * unit);
  return bytes >= 1 && bytes <= 2 ** 62 ? bytes : null;
}
