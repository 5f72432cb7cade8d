// The batch-size what-if: a batch (and optional limit) input, other runs of the
// same model to fit with, a chart of predicted peak against batch size (the
// limit line, the largest batch that fits), and the layers at the predicted peak.
// Draws what it is handed; the controller (whatif-loads.ts) fetches.

import { scaleLinear } from 'd3-scale';
import { byteAxis } from '../lib/byte-ticks';
import { select } from 'd3-selection';
import { line } from 'd3-shape';
import type { WhatIfLayer, WhatIfResponse } from '../api';
import { clear, el, setLoading, showPanelError } from '../dom';
import { formatBytes, formatBytesDelta, formatCount, formatExactBytes } from '../format';
import type { Column } from '../lib/table';
import { batchTickCount, besideAnchor, edgeAnchor, labelBaseline, maxBatchText, methodText, notes, parseBatch, parseLimit, pointLabelPlace, quotedRun, skippedText, whatIfChart, type PlotArea } from '../lib/whatif';
import { DataTable } from './data-table';
import { stepLabel } from './pickers';
import { onResize } from './resize';

/** The batch asked for first, before the user types one. */
export const DEFAULT_BATCH = 8;
/** Typing settles this long before the route is asked. */
const DEBOUNCE_MS = 300;
const HEIGHT = 170;
const MARGIN = { top: 14, right: 16, bottom: 22, left: 66 };

export interface WhatIfRequest {
  batch: number;
  /** Other steps of the run shown, and other runs, picked to fit with it. */
  tags: string[];
  runs: string[];
  limit: number | null;
  /** The batch the step ran at, where the user gives it (null: read from its shapes). */
  tracedBatch: number | null;
}

const bytesColumn = (key: string, label: string, get: (l: WhatIfLayer) => number | undefined): Column<WhatIfLayer> => ({
  key,
  label,
  value: (l) => get(l) ?? null,
  text: (l) => formatBytes(get(l)),
  numeric: true,
});

const LAYER_COLUMNS: Column<WhatIfLayer>[] = [
  { key: 'layer', label: 'layer', value: (l) => l.layer },
  bytesColumn('at_peak_bytes', 'at predicted peak', (l) => l.at_peak_bytes),
  bytesColumn('traced_at_peak_bytes', 'at traced peak', (l) => l.traced_at_peak_bytes),
  {
    ...bytesColumn('fixed_bytes', 'fixed', (l) => l.fixed_bytes),
    // A fixed part below zero says less than where the layer's line starts: per sample above that batch.
    text: (l) => (l.from_batch != null ? `above batch ${l.from_batch}` : formatBytes(l.fixed_bytes)),
  },
  bytesColumn('per_sample_bytes', 'per sample', (l) => l.per_sample_bytes),
];
const ONE_STEP_ONLY = ['traced_at_peak_bytes'];
const FIT_ONLY = ['fixed_bytes', 'per_sample_bytes'];

/** The most rows the list of steps and runs to fit with shows at once (it scrolls past them). */
const CHOICE_ROWS = 8;

export class WhatIfView {
  readonly element: HTMLElement;
  /** Called (debounced while typing) when the batch, limit or runs change to something valid. */
  onRequest: (() => void) | null = null;
  /** Whether the user has typed a batch: until then, one at or below the traced batch becomes twice it. */
  private batchTyped = false;
  private readonly batchInput = el('input', { type: 'number', min: 1, step: 1, value: DEFAULT_BATCH, 'data-testid': 'whatif-batch', 'aria-label': 'Batch size', class: 'whatif-batch' });
  private readonly limitInput = el('input', { type: 'text', placeholder: 'e.g. 16 GiB', 'data-testid': 'whatif-limit', 'aria-label': 'Memory limit', class: 'whatif-limit', title: 'The memory the step must fit in, with its unit (binary: 512 MiB, 16 GiB or 16 GB; a bare number is bytes, from 1 MiB); empty: a GPU allocator’s capacity where the trace has one (a host allocator’s is a cap set at start-up, not the machine’s memory: no limit)' });
  private readonly tracedInput = el('input', { type: 'number', min: 1, step: 1, placeholder: 'as read', 'data-testid': 'whatif-traced-batch', 'aria-label': 'Batch the step ran at', class: 'whatif-batch', title: 'The batch this step ran at, where the one read from its shapes is wrong (a time-major or ragged feed); empty: as read' });
  private readonly runsSelect = el('select', { multiple: true, size: 3, 'data-testid': 'whatif-runs', 'aria-label': 'Other steps of this run, and other runs of the same model, fitted with this one', title: 'Other steps of this run, or runs of the same model, at other batch sizes: the peak is then fitted per layer (Ctrl/Cmd-click to pick several)' });
  private readonly inputNote = el('span', { class: 'muted whatif-input-note' });
  /** The answer's notes, one line each. */
  private readonly notesList = el('ul', { class: 'whatif-notes', 'data-testid': 'whatif-notes' });
  private readonly headline = el('div', { class: 'whatif-headline', 'data-testid': 'whatif-predicted' });
  private readonly method = el('span', { 'data-testid': 'whatif-method' });
  private readonly maxBatch = el('span', { 'data-testid': 'whatif-max-batch' });
  /** Why each run picked to fit with was left out, in words (a run of another model, say). */
  private readonly skippedNote = el('div', { class: 'muted whatif-skipped', 'data-testid': 'whatif-skipped' });
  private readonly svgNode: SVGSVGElement;
  private readonly body: HTMLElement;
  private readonly layers: DataTable<WhatIfLayer>;
  private data: WhatIfResponse | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(fileBase: () => string[]) {
    this.svgNode = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svgNode.setAttribute('class', 'curve-svg whatif-svg');
    this.svgNode.setAttribute('role', 'img');
    this.svgNode.setAttribute('aria-label', 'Predicted peak against batch size');
    this.svgNode.style.height = `${HEIGHT}px`;
    this.layers = new DataTable<WhatIfLayer>({
      columns: LAYER_COLUMNS,
      testId: 'whatif-layers',
      initialSort: { key: 'at_peak_bytes', direction: 'desc' },
      fileName: () => [...fileBase(), 'whatif_layers'],
      compact: true,
    });
    this.body = el(
      'div',
      { class: 'panel-body' },
      this.headline,
      el('div', { class: 'whatif-meta' }, this.method, this.maxBatch),
      this.notesList,
      this.skippedNote,
      el('div', { 'data-testid': 'whatif-chart' }, this.svgNode),
      el('div', { class: 'panel-toolbar', style: 'margin-top:4px' }, el('h2', {}, 'Layers at the predicted peak'),
        // As the CLI says it: a layer's row is its own ops, so a scope holding layers (a Keras model) reads less here than its treemap tile.
        el('span', { class: 'muted', 'data-testid': 'whatif-layers-note', title: 'A layer is a scope with its gradients and optimizer updates folded in; its row counts its own ops only, and each layer inside it is a row of its own, so a scope that holds layers (a Keras model) reads less here than its treemap tile, which holds them all.' }, 'each layer’s own ops; a layer inside it is a row of its own'),
        el('span', { class: 'spacer' }), this.layers.exports),
      this.layers.element,
    );
    this.element = el(
      'section',
      { class: 'panel whatif-panel', 'data-testid': 'whatif', 'aria-label': 'Batch-size what-if' },
      el(
        'div',
        { class: 'panel-toolbar' },
        el('h2', {}, 'What if the batch were'),
        this.batchInput,
        el('label', {}, 'limit', this.limitInput),
        el('label', {}, 'traced at', this.tracedInput),
        this.inputNote,
      ),
      el('div', { class: 'whatif-runs' }, el('label', { class: 'muted', title: 'Every traced step and run is listed: pick those of this model at other batch sizes (others are refused with a reason).' }, 'fit with steps or runs (pick this model’s, at other batch sizes)', this.runsSelect)),
      this.body,
    );
    this.batchInput.addEventListener('input', () => {
      this.batchTyped = true;
      this.changed(true);
    });
    this.limitInput.addEventListener('input', () => this.changed(true));
    this.tracedInput.addEventListener('input', () => this.changed(true));
    this.runsSelect.addEventListener('change', () => this.changed(false));
    onResize(this.svgNode, () => this.draw(), true);
  }

  /** What to ask the route for; null while the batch or limit typed is not valid. */
  request(): WhatIfRequest | null {
    const batch = parseBatch(this.batchInput.value);
    const limitText = this.limitInput.value.trim();
    const limit = limitText === '' ? null : parseLimit(limitText);
    const tracedText = this.tracedInput.value.trim();
    const tracedBatch = tracedText === '' ? null : parseBatch(tracedText);
    if (batch === null || (limitText !== '' && limit === null) || (tracedText !== '' && tracedBatch === null)) return null;
    const picked = [...this.runsSelect.selectedOptions];
    const tags = picked.filter((o) => o.dataset.kind === 'tag').map((o) => o.value);
    const runs = picked.filter((o) => o.dataset.kind === 'run').map((o) => o.value);
    return { batch, tags, runs, limit, tracedBatch };
  }

  /** A new step: the batch it ran at is read from its shapes until the user gives one. */
  resetTracedBatch(): void {
    this.tracedInput.value = '';
    this.tracedInput.removeAttribute('aria-invalid');
    // The batch chosen for the step before (twice its traced batch) is not this one's, until the user types one.
    if (!this.batchTyped) this.batchInput.value = String(DEFAULT_BATCH);
  }

  /** What the user may fit with: other steps of the run shown (`tags`: a script that traced batches 2, 4
   * and 8 into one run) and other runs, each group under its heading; those still listed stay picked,
   * unless `keepPicked` is false (another run shown: what was picked was to fit with the one before). */
  setChoices(tags: readonly string[], runs: readonly string[], keepPicked = true): void {
    const key = (o: HTMLOptionElement) => `${o.dataset.kind}\n${o.value}`;
    const picked = new Set(keepPicked ? [...this.runsSelect.selectedOptions].map(key) : []);
    clear(this.runsSelect);
    const group = (label: string, kind: 'tag' | 'run', values: readonly string[]) => {
      if (values.length === 0) return;
      this.runsSelect.append(el('optgroup', { label },
        ...values.map((value) => el('option', { value, 'data-kind': kind, selected: picked.has(`${kind}\n${value}`), title: value },
          // A profile's step by its own name first (`step_2 · profile/<session>`): cut, the list had shown
          // `profile/2026_11_28_19_05_19/` three times over (trial AM).
          kind === 'tag' ? stepLabel(value, null) : value))));
    };
    group('steps of this run', 'tag', tags);
    group('other runs', 'run', runs);
    this.runsSelect.disabled = tags.length + runs.length === 0;
    // Tall enough for its group labels and a few picks (3 rows had cut the first label and hidden the picks).
    const rows = tags.length + runs.length + (tags.length > 0 ? 1 : 0) + (runs.length > 0 ? 1 : 0);
    this.runsSelect.size = Math.max(3, Math.min(rows, CHOICE_ROWS));
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  /** An error answer (one step of XLA programs, no feed with a shape, two runs at one batch size) says so in place of the chart. */
  setError(message: string | null): void {
    showPanelError(this.element, message);
    this.body.classList.toggle('hidden', message !== null);
  }

  setData(data: WhatIfResponse | null): void {
    this.data = data;
    // Stale still if the inputs changed to something unreadable while this answer was on its way.
    this.element.toggleAttribute('data-stale', data !== null && this.request() === null);
    clear(this.headline);
    this.method.textContent = '';
    clear(this.notesList);
    this.maxBatch.textContent = '';
    this.skippedNote.textContent = '';
    if (!data) {
      this.layers.setRows([]);
      this.draw();
      return;
    }
    const absolute = data.predicted_peak_bytes !== null;
    const peak = absolute ? data.predicted_peak_bytes! : data.predicted_peak_rise_bytes;
    this.headline.setAttribute('data-bytes', String(peak));
    this.headline.setAttribute('data-batch', String(data.batch));
    this.headline.append(
      `Batch ${formatCount(data.batch)}: predicted peak `,
      el('b', { title: formatExactBytes(peak) }, absolute ? formatBytes(peak) : `${formatBytesDelta(peak)} over the step’s start`),
    );
    if (absolute) {
      this.headline.append(el('span', { class: 'muted' }, ` (start ${formatBytes(data.predicted_start_bytes)} + rise ${formatBytes(data.predicted_peak_rise_bytes)})`));
    }
    const first = quotedRun(data);
    if (first) {
      // As the prediction is put: absolute where a baseline is known, else a rise.
      const traced = absolute && first.peak_bytes !== null ? formatBytes(first.peak_bytes) : formatBytesDelta(first.peak_rise_bytes);
      const given = first.batch_given ? ' (as given)' : '';
      this.headline.append(el('span', { class: 'muted' }, ` · traced at batch ${formatCount(first.batch)}${given}: ${traced}`));
    }
    const skipped = skippedText(data);
    this.method.textContent = skipped.text ? `${methodText(data)} · ${skipped.text}` : methodText(data);
    for (const note of notes(data)) this.notesList.append(el('li', {}, note));
    if (skipped.reasons) this.method.title = skipped.reasons;
    else this.method.removeAttribute('title');
    this.skippedNote.textContent = skipped.reasons;
    this.maxBatch.textContent =
      data.limit_bytes === null ? maxBatchText(data) : `${maxBatchText(data)} (limit ${formatBytes(data.limit_bytes)}${data.limit_source === 'capacity' ? ', the allocator’s capacity' : ''})`;
    this.maxBatch.setAttribute('data-max-batch', data.max_batch === null ? '' : String(data.max_batch));
    this.layers.omitColumns(data.method === 'fit' ? ONE_STEP_ONLY : FIT_ONLY, { key: 'at_peak_bytes', direction: 'desc' });
    this.layers.setRows(data.layers);
    this.draw();
    // The default batch (8) at or below the batch the step ran at (16) asks what a smaller batch needs: until the
    // user types one, twice the traced batch is asked instead (trial AM).
    if (!this.batchTyped && first && data.batch <= first.batch && String(data.batch) === this.batchInput.value) {
      this.batchInput.value = String(first.batch * 2);
      this.changed(false);
    }
  }

  private changed(typing: boolean): void {
    if (this.timer !== null) clearTimeout(this.timer);
    const valid = this.request() !== null;
    // What was not read, marked on its input; the answer shown stays that of the last values read.
    const limitText = this.limitInput.value.trim();
    this.batchInput.setAttribute('aria-invalid', String(parseBatch(this.batchInput.value) === null));
    this.limitInput.setAttribute('aria-invalid', String(limitText !== '' && parseLimit(limitText) === null));
    const tracedText = this.tracedInput.value.trim();
    this.tracedInput.setAttribute('aria-invalid', String(tracedText !== '' && parseBatch(tracedText) === null));
    this.element.toggleAttribute('data-stale', !valid && this.data !== null);
    this.inputNote.textContent = valid
      ? ''
      : `not read: whole batches from 1, a limit such as 16 GiB${this.data ? ' (the answer shown is for the last values read)' : ''}`;
    if (!valid) return;
    const fire = () => {
      this.timer = null;
      this.onRequest?.();
    };
    if (typing) this.timer = setTimeout(fire, DEBOUNCE_MS);
    else fire();
  }

  private draw(): void {
    const svg = select(this.svgNode);
    svg.selectAll('*').remove();
    const data = this.data;
    if (!data) return;
    const chart = whatIfChart(data);
    const width = Math.max(240, this.svgNode.clientWidth || 480);
    svg.attr('viewBox', `0 0 ${width} ${HEIGHT}`);
    const x = scaleLinear().domain(chart.xDomain).range([MARGIN.left, width - MARGIN.right]);
    const bytes = byteAxis(chart.yDomain[0], chart.yDomain[1], 4);
    const y = scaleLinear().domain(bytes.domain).range([HEIGHT - MARGIN.bottom, MARGIN.top]);
    const label = (b: number) => (chart.absolute ? formatBytes(b) : formatBytesDelta(b));
    const plot: PlotArea = { left: MARGIN.left, right: width - MARGIN.right, top: MARGIN.top, bottom: HEIGHT - MARGIN.bottom };

    const grid = svg.append('g').attr('class', 'grid');
    const axis = svg.append('g').attr('class', 'axis');
    for (const t of bytes.ticks) {
      grid.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', y(t)).attr('y2', y(t));
      axis.append('text').attr('x', MARGIN.left - 6).attr('y', y(t) + 3).attr('text-anchor', 'end').text(label(t));
    }
    axis.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', HEIGHT - MARGIN.bottom).attr('y2', HEIGHT - MARGIN.bottom);
    for (const t of x.ticks(batchTickCount(width - MARGIN.left - MARGIN.right, chart.xDomain[1])).filter(Number.isInteger)) {
      const text = formatCount(t);
      axis.append('text').attr('x', x(t)).attr('y', HEIGHT - 8).attr('text-anchor', edgeAnchor(x(t), text, 0, width)).text(text);
    }
    axis.append('text').attr('x', width - MARGIN.right).attr('y', HEIGHT - 8 - 10).attr('text-anchor', 'end').text('batch size');

    if (chart.limitBytes !== null) {
      const g = svg.append('g').attr('class', 'capacity').attr('data-testid', 'whatif-limit-line');
      g.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', y(chart.limitBytes)).attr('y2', y(chart.limitBytes));
      g.append('text').attr('x', width - MARGIN.right - 2).attr('y', labelBaseline(y(chart.limitBytes) - 3, plot)).attr('text-anchor', 'end').text(`limit ${formatBytes(chart.limitBytes)}`);
    }
    if (chart.maxBatch !== null && chart.maxBatch > 0) {
      const g = svg.append('g').attr('class', 'whatif-max').attr('data-testid', 'whatif-max-marker');
      g.append('line').attr('x1', x(chart.maxBatch)).attr('x2', x(chart.maxBatch)).attr('y1', MARGIN.top).attr('y2', HEIGHT - MARGIN.bottom);
      const text = `max ${formatCount(chart.maxBatch)}`;
      const anchor = besideAnchor(x(chart.maxBatch), text, width);
      g.append('text')
        .attr('x', x(chart.maxBatch) + (anchor === 'end' ? -3 : 3))
        .attr('y', MARGIN.top + 8)
        .attr('text-anchor', anchor)
        .text(text);
    }
    const path = line<{ batch: number; bytes: number }>()
      .x((p) => x(p.batch))
      .y((p) => y(p.bytes));
    svg.append('path').attr('class', 'line').attr('d', path(chart.points) ?? '');
    const dots = svg.append('g').attr('class', 'whatif-points');
    for (const p of chart.points) {
      dots.append('circle').attr('cx', x(p.batch)).attr('cy', y(p.bytes)).attr('r', 2).append('title').text(`batch ${formatCount(p.batch)}: ${label(p.bytes)}`);
    }
    for (const run of data.runs) {
      const traced = chart.absolute ? run.peak_bytes : run.peak_rise_bytes;
      if (traced === null) continue;
      const g = svg.append('g').attr('class', 'whatif-traced');
      g.append('rect').attr('x', x(run.batch) - 3.5).attr('y', y(traced) - 3.5).attr('width', 7).attr('height', 7);
      g.append('title').text(`traced: ${run.run} ${run.tag} at batch ${formatCount(run.batch)}: ${label(traced)}`);
    }
    if (chart.asked) {
      const g = svg.append('g').attr('class', 'peak').attr('data-testid', 'whatif-asked');
      g.append('circle').attr('cx', x(chart.asked.batch)).attr('cy', y(chart.asked.bytes)).attr('r', 4);
      const text = `batch ${formatCount(chart.asked.batch)}: ${label(chart.asked.bytes)}`;
      const place = pointLabelPlace(x(chart.asked.batch), y(chart.asked.bytes), text, plot);
      g.append('text').attr('x', place.x).attr('y', place.y).attr('text-anchor', place.anchor).text(text);
    }
  }
}
