import { describe, expect, it } from 'vitest';
import type { WhatIfResponse } from '../api';
import { batchTickCount, besideAnchor, edgeAnchor, labelBaseline, pointLabelPlace, maxBatchText, methodText, notes, otherRuns, otherTags, quotedRun, parseBatch, parseLimit, skippedText, whatIfChart, whatIfErrorText } from './whatif';

function answer(over: Partial<WhatIfResponse> = {}): WhatIfResponse {
  return {
    batch: 8,
    runs: [
      { run: 'b2', tag: 'step_3', step: 3, source: 'run_metadata', device: 'CPU:0/mklcpu', batch: 2, peak_rise_bytes: 200, start_bytes: 50, peak_bytes: 250 },
      { run: 'b4', tag: 'step_3', step: 3, source: 'run_metadata', device: 'CPU:0/mklcpu', batch: 4, peak_rise_bytes: 400, start_bytes: 60, peak_bytes: 460 },
    ],
    method: 'fit',
    predicted_peak_rise_bytes: 800,
    predicted_start_bytes: 80,
    predicted_peak_bytes: 880,
    max_batch: null,
    max_batch_searched: 16777216,
    limit_bytes: null,
    limit_source: null,
    limit_applies_to: null,
    layers: [],
    predictions: { one_step: null, fit: { predicted_peak_rise_bytes: 800, predicted_start_bytes: 80, predicted_peak_bytes: 880, max_batch: null, layers: [], batches: [2, 4] } },
    series: {
      batch: [1, 2, 4, 8, 16],
      one_step: { peak_rise_bytes: [90, 190, 390, 790, 1590], peak_bytes: [140, 240, 440, 840, 1640] },
      fit: { peak_rise_bytes: [100, 200, 400, 800, 1600], peak_bytes: [150, 250, 460, 880, 1700] },
    },
    ...over,
  };
}

describe('parseBatch', () => {
  it('takes whole numbers in the route’s range only', () => {
    expect(parseBatch(' 8 ')).toBe(8);
    expect(parseBatch('0')).toBeNull();
    expect(parseBatch('2.5')).toBeNull();
    expect(parseBatch('-1')).toBeNull();
    expect(parseBatch('')).toBeNull();
    expect(parseBatch('16777217')).toBeNull();
  });
});

describe('whatIfChart', () => {
  it('draws the lead method’s absolute peaks, the asked batch on them', () => {
    const chart = whatIfChart(answer());
    expect(chart.absolute).toBe(true);
    expect(chart.points.map((p) => p.bytes)).toEqual([150, 250, 460, 880, 1700]);
    expect(chart.asked).toEqual({ batch: 8, bytes: 880 });
    expect(chart.xDomain).toEqual([1, 16]);
    expect(chart.yDomain[0]).toBe(0);
    expect(chart.yDomain[1]).toBeGreaterThan(1700);
    expect(chart.limitBytes).toBeNull();
  });

  it('falls back to the rise without a baseline, with a limit on the rise', () => {
    const nulls = { peak_rise_bytes: [100, 200, 400, 800, 1600], peak_bytes: null };  // as the route sends it
    const chart = whatIfChart(
      answer({
        method: 'one_step',
        series: { batch: [1, 2, 4, 8, 16], one_step: nulls, fit: null },
        predicted_peak_bytes: null,
        limit_bytes: 3000,
        limit_applies_to: 'peak_rise_bytes',
        limit_source: 'limit',
        max_batch: 30,
      }),
    );
    expect(chart.absolute).toBe(false);
    expect(chart.points.map((p) => p.bytes)).toEqual([100, 200, 400, 800, 1600]);
    expect(chart.asked).toEqual({ batch: 8, bytes: 800 });
    expect(chart.limitBytes).toBe(3000);
    expect(chart.maxBatch).toBe(30);
    expect(chart.yDomain[1]).toBeGreaterThanOrEqual(3000);
  });
});

describe('words', () => {
  it('names the method and the batches behind it', () => {
    expect(methodText(answer())).toBe('fitted over 2 runs (batches 2, 4)');
    const falling = answer({ predictions: { one_step: null, fit: { ...answer().predictions.fit!, warning: 'the traced peak rises do not grow with the batch' } } });
    expect(methodText(falling)).toBe('fitted over 2 runs (batches 2, 4) · the traced peak rises do not grow with the batch');
    const one = answer({ method: 'one_step', runs: answer().runs.slice(0, 1), predictions: { fit: null, one_step: { predicted_peak_rise_bytes: 1, predicted_start_bytes: null, predicted_peak_bytes: null, max_batch: null, layers: [], from_run: 'b2', from_tag: 'step_3', traced_batch: 2, scaled_share: 0.9 } } });
    expect(methodText(one)).toBe('from one step (batch 2)');
    const warned = { ...one, predictions: { ...one.predictions, one_step: { ...one.predictions.one_step!, warning: 'the traced batch (2) is also a dimension of the model’s parameters' } } };
    expect(methodText(warned)).toBe('from one step (batch 2) · the traced batch (2) is also a dimension of the model’s parameters');
    const same = answer({ ...one, runs: answer().runs.map((r) => ({ ...r, batch: 2 })) });
    expect(methodText(same)).toBe('from one step (batch 2): no fit, the runs picked hold no other batch size');
    // A fit through peaks that do not grow: the one step leads, and the fit is said to be set aside.
    const aside = answer({ ...one, runs: answer().runs, predictions: { one_step: one.predictions.one_step, fit: { ...answer().predictions.fit!, warning: 'the traced peak rises do not grow with the batch' } } });
    expect(methodText(aside)).toBe('from one step (batch 2) · the fit over batches 2, 4 is set aside: the traced peak rises do not grow with the batch');
  });

  it('says why there is no largest batch', () => {
    expect(maxBatchText(answer())).toMatch(/no limit/);
    expect(maxBatchText(answer({ limit_bytes: 10, max_batch: 0 }))).toBe('not even batch 1 fits');
    expect(maxBatchText(answer({ limit_bytes: 10, max_batch: null }))).toBe('any batch fits: none up to 16,777,216 reaches the limit');
    const falling = answer({ limit_bytes: 10, max_batch: null });
    falling.predictions.fit = { ...falling.predictions.fit!, falls: true };
    expect(maxBatchText(falling)).toBe('no largest batch: the fit falls with the batch');
    expect(maxBatchText(answer({ limit_bytes: 10, max_batch: 12 }))).toBe('largest batch that fits: 12');
    expect(maxBatchText(answer({ limit_bytes: 10, max_batch: 7351503 }))).toBe('largest batch that fits: 7,351,503');
  });

  it('says plainly why a step cannot answer', () => {
    expect(whatIfErrorText({ run: 'r', tag: 't' }, 'no feed (HTTP 422)')).toBe('No what-if for r t: no feed');
    // A profiled step is asked like any other: the server's own error is shown, not a refusal made up here.
    const why = 'this profile records no output shapes';
    expect(whatIfErrorText({ run: 'k', tag: 'profile/s/step_3' }, `${why} (HTTP 422)`)).toBe(`No what-if for k profile/s/step_3: ${why}`);
    // The step named once, and another status kept (a server error is news).
    expect(whatIfErrorText({ run: 'x', tag: 'p/step_3' }, 'x p/step_3 ran XLA programs (HTTP 422)')).toBe('No what-if for x p/step_3: ran XLA programs');
    expect(whatIfErrorText({ run: 'r', tag: 't' }, 'boom (HTTP 500)')).toBe('No what-if for r t: boom (HTTP 500)');
  });

  it('offers the other runs', () => {
    expect(otherRuns([{ run: 'a' }, { run: 'b' }, { run: 'c' }], 'b')).toEqual(['a', 'c']);
    expect(otherRuns([{ run: 'bigconv' }, { run: 'resnet9_b2' }, { run: 'unet_b2' }, { run: 'unet_b4' }], 'unet_b2')).toEqual([
      'unet_b4',
      'bigconv',
      'resnet9_b2',
    ]);
    expect(otherRuns([{ run: 'a' }], null)).toEqual(['a']);
  });

  it('offers the run\'s other traced steps, not the one shown nor records without step stats', () => {
    const step = (tag: string, devices = ['/device:CPU:0']) => ({ tag, step: 1, wall_time: 1, devices });
    const runs = [
      { run: 'keras', has_graph: true, latest_tag: 'b8', steps: [step('b2'), step('batch_2', []), step('b4'), step('b8')] },
      { run: 'other', has_graph: false, latest_tag: 'x', steps: [step('x')] },
    ];
    expect(otherTags(runs, 'keras', 'b8')).toEqual(['b2', 'b4']);
    expect(otherTags(runs, 'other', 'x')).toEqual([]);
    expect(otherTags(runs, null, null)).toEqual([]);
  });
});

describe('parseLimit', () => {
  it('reads bytes with binary units', () => {
    expect(parseLimit('16 GiB')).toBe(16 * 2 ** 30);
    expect(parseLimit('512m')).toBe(512 * 2 ** 20);
    expect(parseLimit('1.5 KiB')).toBe(1536);
    expect(parseLimit('1073741824')).toBe(2 ** 30);
    // GB and MB as the CLI reads them: binary.
    expect(parseLimit('8GB')).toBe(8 * 2 ** 30);
    expect(parseLimit('8 gb')).toBe(8 * 2 ** 30);
    expect(parseLimit('300 MB')).toBe(300 * 2 ** 20);
    expect(parseLimit('2 kb')).toBe(2048);
    expect(parseLimit('16Gi')).toBe(16 * 2 ** 30);
    expect(parseLimit('')).toBeNull();
    expect(parseLimit('lots')).toBeNull();
    expect(parseLimit('0')).toBeNull();
    // A bare number under 1 MiB is no limit anyone means in bytes: a unit is asked for.
    expect(parseLimit('40')).toBeNull();
    expect(parseLimit('40 GiB')).toBe(40 * 2 ** 30);
    expect(parseLimit('40 B')).toBe(40);
    expect(parseLimit('3 parsecs')).toBeNull();
  });
});

describe('runs left out', () => {
  it('names them, with each reason for a tooltip', () => {
    const noted = answer({ notes: ['run_4 of predict peaked 62% higher', 'the start is held'] });
    expect(notes(noted)).toEqual(['run_4 of predict peaked 62% higher', 'the start is held']);
    expect(methodText(noted)).not.toContain('peaked');  // said apart, one line each
    expect(notes(answer({}))).toEqual([]);
    expect(skippedText(answer())).toEqual({ text: '', reasons: '' });
    const w = answer({ skipped_runs: [{ run: 'gan', tag: 'step_1', reason: 'share 8% of their layers' }, { run: 'bad', tag: 'profile/s', reason: 'not a valid XSpace' }] });
    expect(skippedText(w)).toEqual({ text: 'left out: gan, bad', reasons: 'gan step_1: share 8% of their layers\nbad profile/s: not a valid XSpace' });
  });
});

describe('axis labels at the chart edges', () => {
  it('centres a tick label where it fits, else sets it flush with the edge it would cross', () => {
    expect(edgeAnchor(200, '64', 0, 480)).toBe('middle');
    expect(edgeAnchor(464, '16,777,216', 0, 480)).toBe('end');
    expect(edgeAnchor(10, '16,777,216', 0, 480)).toBe('start');
  });

  it('sets a mark label after the mark unless it would run past the right edge', () => {
    expect(besideAnchor(100, 'max 1,024', 480)).toBe('start');
    expect(besideAnchor(440, 'max 1,024', 480)).toBe('end');
  });

  it('keeps a point’s label inside the plot area, above the x axis (the review’s "batch 32: 324 MiB" by "0 B")', () => {
    const plot = { left: 66, right: 464, top: 14, bottom: 148 };
    const text = 'batch 32: 324 MiB';
    // A point on the axis at the left edge: the label goes after it, its baseline clear of the axis.
    const low = pointLabelPlace(67, 147.5, text, plot);
    expect(low.anchor).toBe('start');
    expect(low.x).toBeGreaterThanOrEqual(plot.left);
    expect(low.y).toBeLessThanOrEqual(plot.bottom - 8);
    // A point in the middle: a little above it, unchanged.
    expect(pointLabelPlace(200, 80, text, plot)).toEqual({ x: 206, y: 72, anchor: 'start' });
    // At the right edge it goes before the point; at the top it stays below the plot's top.
    const high = pointLabelPlace(460, 14, text, plot);
    expect(high).toEqual({ x: 454, y: plot.top + 11, anchor: 'end' });
    expect(high.x - text.length * 7).toBeGreaterThanOrEqual(plot.left);
    // Wider than either side: flush with the right edge, never over the y axis's labels.
    expect(pointLabelPlace(200, 80, 'x'.repeat(60), { ...plot, right: 300 })).toEqual({ x: 300, y: 72, anchor: 'end' });
    expect(labelBaseline(200, plot)).toBe(140);
    expect(labelBaseline(0, plot)).toBe(25);
  });

  it('asks for fewer ticks when the batches are long numbers', () => {
    expect(batchTickCount(400, 64)).toBeGreaterThan(batchTickCount(400, 16_777_216));
    expect(batchTickCount(400, 16_777_216) * (10 * 6)).toBeLessThanOrEqual(400);
    expect(batchTickCount(10, 1)).toBe(2);
  });
});

describe('the traced run quoted', () => {
  it('is the one the one step comes from where it leads, else the first', () => {
    const w = answer();
    const b4 = { ...w.runs[0]!, run: 'b4', batch: 4 };
    const runs = [w.runs[0]!, b4];
    const fromB4 = { ...w.predictions.one_step!, from_run: 'b4', from_tag: b4.tag, traced_batch: 4 };
    expect(quotedRun({ ...w, runs, method: 'one_step', predictions: { ...w.predictions, one_step: fromB4 } })?.run).toBe('b4');
    expect(quotedRun({ ...w, runs, method: 'fit', predictions: { ...w.predictions, one_step: fromB4 } })?.run).toBe(w.runs[0]!.run);
  });
});
