// Details of the selected scope (every figure explained, share of the peak,
// categories, op types, top nodes) and the op-type table of the whole step.

import { CATEGORY_NAMES, type CategoryTotal, type DeviceSummary, type FigureName, type NodeExecution, type OpTypeTotal, type ScopeDetails } from '../api';
import { clear, el, setLoading, showPanelError } from '../dom';
import { countOf, formatBytes, formatCount, formatExactBytes, formatPercent, formatTime, shareOf } from '../format';
import { CATEGORY_COLORS } from '../lib/colors';
import { PEAK_ONLY_KEYS, existingFigures } from '../lib/peak-figures';
import { categoryRows, paramsText } from '../lib/resident';
import { isFullDetails, type ScopePreview } from '../lib/scope-preview';
import type { Column } from '../lib/table';
import type { Selection } from '../selection';
import { DataTable } from './data-table';

/** Every figure with its one-line meaning (docs/figures.md, "Per-execution figures"), summed over a scope's nodes. */
export const FIGURE_ROWS: { figure: FigureName; label: string; explain: string; testId?: string }[] = [
  { figure: 'at_peak_bytes', label: 'at peak', explain: 'what it holds at the step’s peak (net of its allocation records up to the peak time)', testId: 'details-at-peak-bytes' },
  { figure: 'allocated_bytes', label: 'allocated', explain: 'everything its ops allocated, frees ignored (TensorBoard’s “memory”)', testId: 'details-allocated-bytes' },
  { figure: 'output_bytes', label: 'output', explain: 'tensors its ops produced; one that reuses an input’s buffer (an in-place op, a reshape) or a variable’s allocates nothing, so output can be more than allocated', testId: 'details-output-bytes' },
  { figure: 'temp_bytes', label: 'temp', explain: 'what its ops allocated beside their outputs: scratch freed inside the op (im2col lives here), and a variable’s copy an update keeps' },
  { figure: 'persistent_bytes', label: 'persistent', explain: 'kept across steps' },
  { figure: 'live_bytes', label: 'live after op', explain: 'still held when each op finished' },
  { figure: 'op_peak_bytes', label: 'op peak', explain: 'sum of each op’s own high-water mark (an upper bound: they peak at different times)' },
];

const bytesColumn = <T>(key: string, label: string, get: (row: T) => number): Column<T> => ({
  key,
  label,
  value: get,
  text: (row) => formatBytes(get(row)),
  numeric: true,
});

const NODE_COLUMNS: Column<NodeExecution>[] = [
  { key: 'raw_name', label: 'node (raw name)', value: (n) => n.raw_name },
  { key: 'op_type', label: 'op type', value: (n) => n.op_type },
  { key: 'category', label: 'category', value: (n) => n.category },
  bytesColumn('at_peak_bytes', 'at peak', (n) => n.figures.at_peak_bytes),
  bytesColumn('allocated_bytes', 'allocated', (n) => n.figures.allocated_bytes),
  bytesColumn('output_bytes', 'output', (n) => n.figures.output_bytes),
  bytesColumn('temp_bytes', 'temp', (n) => n.figures.temp_bytes),
  { key: 'start_us', label: 'start', value: (n) => n.start_us, text: (n) => formatTime(n.start_us), numeric: true },
  { key: 'duration_us', label: 'duration', value: (n) => n.end_us - n.start_us, text: (n) => formatTime(n.end_us - n.start_us), numeric: true },
  { key: 'graph_name', label: 'graph name', value: (n) => n.graph_name },
  { key: 'kind', label: 'kind', value: (n) => n.kind },
  { key: 'kernel', label: 'kernel', value: (n) => n.kernel },
  { key: 'xla_program', label: 'XLA program', value: (n) => n.xla_program },
];

function opTypeColumns(peakRise: () => number): Column<OpTypeTotal>[] {
  return [
    { key: 'name', label: 'op type', value: (o) => o.name },
    { key: 'count', label: 'count', value: (o) => o.count, text: (o) => formatCount(o.count), numeric: true },
    bytesColumn('at_peak_bytes', 'at peak', (o) => o.figures.at_peak_bytes),
    {
      key: 'share_of_peak',
      label: 'share of peak',
      shortLabel: 'share',
      value: (o) => shareOf(o.figures.at_peak_bytes, peakRise()),
      text: (o) => formatPercent(shareOf(o.figures.at_peak_bytes, peakRise())),
      numeric: true,
    },
    bytesColumn('allocated_bytes', 'allocated', (o) => o.figures.allocated_bytes),
    bytesColumn('output_bytes', 'output', (o) => o.figures.output_bytes),
    bytesColumn('temp_bytes', 'temp', (o) => o.figures.temp_bytes),
  ];
}

export class DetailsView {
  readonly element: HTMLElement;
  private readonly body = el('div', { class: 'panel-body' });
  private readonly nodeTable: DataTable<NodeExecution>;
  private readonly scopeOpTable: DataTable<OpTypeTotal>;
  private details: ScopeDetails | null = null;
  /** Scope drawn now, and whether only its preview is (the tables still loading). */
  private shownScope: string | null = null;
  private shownIsPreview = false;
  /** Time span line and the tables below the head: what the full details add to a preview. */
  private spanLine: HTMLElement = el('div');
  private rest: HTMLElement = el('div');
  /** False for a trace without allocation records: at-peak figures do not exist and are left out. */
  private hasCurve = true;
  private shown: ScopeDetails | ScopePreview | null = null;
  /** The step's categories with their resident bytes (from the summary): shown beside the whole step's at-peak ones. */
  private stepCategories: readonly CategoryTotal[] = [];

  constructor(private readonly selection: Selection) {
    const fileBase = (table: string) => () => {
      const s = this.selection.get();
      return [s.run ?? '', s.tag ?? '', this.details?.scope || 'all', table];
    };
    this.nodeTable = new DataTable<NodeExecution>({
      columns: NODE_COLUMNS,
      testId: 'node-table',
      exportTestIds: { csv: 'export-csv', json: 'export-json' },
      initialSort: { key: 'at_peak_bytes', direction: 'desc' },
      fileName: fileBase('nodes'),
      caption: 'Largest node executions of the selected scope',
      // Fits the side panel (and lays out fast on a click); the button or the export gives every column.
      shownColumns: ['raw_name', 'op_type', 'at_peak_bytes', 'allocated_bytes'],
      columnToggle: true,
      compact: true,
    });
    this.scopeOpTable = new DataTable<OpTypeTotal>({
      columns: opTypeColumns(() => this.details?.peak_rise_bytes ?? 0),
      testId: 'scope-op-type-table',
      initialSort: { key: 'at_peak_bytes', direction: 'desc' },
      fileName: fileBase('op_types'),
      maxRows: 30,
      // The side panel is narrow: these columns fit without scrolling; output and temp are in the export.
      shownColumns: ['name', 'count', 'at_peak_bytes', 'share_of_peak', 'allocated_bytes'],
      compact: true,
    });
    this.element = el('section', { class: 'panel details-panel', 'data-testid': 'details', 'aria-label': 'Details of the selection' }, this.body);
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  setError(message: string | null): void {
    showPanelError(this.element, message);
  }

  /** Whether the step has a curve; without one, at peak and the share of the peak are left out (redrawn at once). */
  /** The step's categories from the summary; their resident bytes go beside the root's at-peak ones. */
  setStepCategories(categories: readonly CategoryTotal[]): void {
    this.stepCategories = categories;
  }

  setHasCurve(hasCurve: boolean): void {
    if (hasCurve === this.hasCurve) return;
    this.hasCurve = hasCurve;
    const omit = hasCurve ? [] : PEAK_ONLY_KEYS;
    this.nodeTable.omitColumns(omit, { key: 'allocated_bytes', direction: 'desc' });
    this.scopeOpTable.omitColumns(omit, { key: 'allocated_bytes', direction: 'desc' });
    const shown = this.shown;
    this.shownScope = null;
    this.setData(shown);
  }

  /**
   * Shows a scope's details. A preview (the figures a treemap level already
   * holds) is drawn at once, with the tables marked as loading; the full
   * details of the same scope then only add the time span and the tables.
   */
  setData(details: ScopeDetails | ScopePreview | null): void {
    const previous = this.shownScope;
    const wasPreview = this.shownIsPreview;
    this.shown = details;
    this.details = details && isFullDetails(details) ? details : null;
    this.shownScope = details ? details.scope : null;
    this.shownIsPreview = details !== null && !isFullDetails(details);
    if (!details) {
      clear(this.body);
      return;
    }
    if (isFullDetails(details) && wasPreview && previous === details.scope && this.rest.isConnected) {
      // Same scope, same figures: keep the head, fill in the rest.
      this.renderRest(details);
      return;
    }
    clear(this.body);
    this.renderHead(details);
    this.rest = el('div');
    this.body.append(this.rest);
    this.renderRest(details);
  }

  private renderHead(d: ScopePreview): void {
    const scopeText = d.scope === '' ? '(all)' : d.scope;
    const executions = `${d.kind} · ${countOf(d.exec_count, 'execution')}`;
    this.body.append(
      el('h2', {}, 'Selection'),
      el('div', { class: 'details-title', 'data-testid': 'details-scope', 'data-scope': d.scope }, scopeText),
      el(
        'div',
        { class: 'muted' },
        this.hasCurve
          ? `${executions} · ${formatPercent(d.share_of_peak)} of the peak rise (${formatBytes(d.peak_rise_bytes)})${
              // More than the rise: bytes held before the step that others freed count against it (trial AM's 100.1%).
              (d.share_of_peak ?? 0) > 1 ? ', more than all of it: others freed bytes held before the step' : ''}`
          : `${executions} · no curve in this trace: no at-peak figures`,
      ),
    );

    const params = paramsText(d);
    if (params) {
      this.body.append(
        el(
          'div',
          { 'data-testid': 'details-params', 'data-count': String(d.param_count), title: 'The model’s own tensors under this scope (from the run’s graph): in memory before the step, so not in its at-peak bytes' },
          el('b', {}, 'Parameters: '),
          params,
        ),
      );
    }
    const figures = el('table', { class: 'kv' });
    for (const row of existingFigures(FIGURE_ROWS, (r) => r.figure, this.hasCurve)) {
      const bytes = d.figures[row.figure];
      const value = el('td', { class: 'num', title: formatExactBytes(bytes) }, formatBytes(bytes));
      if (row.testId) {
        value.setAttribute('data-testid', row.testId);
        value.setAttribute('data-bytes', String(bytes));
      }
      const share = row.figure === 'at_peak_bytes' ? formatPercent(d.share_of_peak) : '';
      figures.append(
        el('tr', {}, el('th', {}, row.label), value, el('td', { class: 'num muted' }, share), el('td', { class: 'explain' }, row.explain)),
      );
    }
    this.body.append(figures);
    this.spanLine = el('div', { style: 'margin-top:6px' });
    this.body.append(this.spanLine);
    if (this.hasCurve) this.body.append(this.categoriesBlock(d));
    if (this.hasCurve && d.scope === '') this.body.append(this.residentLine());
  }

  /** The time span and the tables: from the full details, or "loading" for a preview. */
  private renderRest(d: ScopeDetails | ScopePreview): void {
    clear(this.rest);
    if (!isFullDetails(d)) {
      this.spanLine.replaceChildren(el('b', {}, 'Time span: '), el('span', { class: 'muted' }, 'loading…'));
      this.rest.append(el('div', { class: 'muted', style: 'margin-top:8px', 'data-testid': 'details-tables-loading' }, 'Loading its op types and largest nodes…'));
      return;
    }
    // When its ops ran, not how long what they made is held (a node holding bytes at a peak after its op ended
    // had read as a span that ended before the peak): said so.
    this.spanLine.replaceChildren(
      el('b', {}, 'Time span: '),
      d.time_span
        ? `${formatTime(d.time_span.start_us)} – ${formatTime(d.time_span.end_us)} (${formatTime(d.time_span.end_us - d.time_span.start_us)}), while its ops ran${d.scope === '' ? '' : ', shaded on the curve'}; what they made may be held after`
        : 'no node execution on this device',
    );

    this.scopeOpTable.setRows(d.op_types);
    this.rest.append(
      el('div', { class: 'panel-toolbar', style: 'margin-top:8px' }, el('h2', {}, 'Op types inside'), el('span', { class: 'spacer' }), this.scopeOpTable.exports),
      this.scopeOpTable.element,
      el('div', { class: 'table-note' }, 'Output and temp bytes of each op type are in the export.'),
    );

    this.nodeTable.setRows(d.nodes);
    this.rest.append(
      el(
        'div',
        { class: 'panel-toolbar', style: 'margin-top:8px' },
        el('h2', {}, `Largest executions (${formatCount(d.nodes.length)} of ${formatCount(d.exec_count)})`),
        el('span', { class: 'spacer' }),
        this.nodeTable.exports,
      ),
      this.nodeTable.element,
      el('div', { class: 'table-note' }, 'Raw names as the runtime logged them; click a column to sort.'),
    );
  }

  /** "Resident before the step: parameters 1.82 MiB · optimizer 3.65 MiB · other 749 KiB": what at peak (a rise) leaves out. */
  private residentLine(): HTMLElement | string {
    const resident = categoryRows(this.stepCategories).filter((r) => r.residentBytes);
    if (resident.length === 0) return '';
    return el(
      'div',
      { class: 'muted', style: 'font-size:12px;margin-top:4px', 'data-testid': 'details-resident', title: 'In memory before the step (from the run’s graph): add it to the at-peak bytes for absolute memory at the peak' },
      `Resident before the step: ${resident.map((r) => `${r.name} ${formatBytes(r.residentBytes)}`).join(' · ')}`,
    );
  }

  private categoriesBlock(d: ScopePreview): HTMLElement {
    const byName = new Map(d.categories.map((c) => [c.name, c.at_peak_bytes]));
    const total = d.figures.at_peak_bytes;
    const bar = el('div', { class: 'stack-bar', 'aria-hidden': 'true' });
    const rows = el('div');
    for (const name of CATEGORY_NAMES) {
      const bytes = byName.get(name) ?? 0;
      if (bytes === 0) continue;
      const share = total > 0 ? Math.max(0, bytes / total) : 0;
      bar.append(el('span', { style: `width:${(share * 100).toFixed(2)}%;background:${CATEGORY_COLORS[name]}`, title: `${name}: ${formatBytes(bytes)}` }));
      rows.append(
        el(
          'div',
          { class: 'cat-row' },
          el('span', {}, el('span', { class: 'swatch', style: `display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;background:${CATEGORY_COLORS[name]}` }), name),
          el('span', {}, el('span', { class: 'bar', style: `width:${(share * 100).toFixed(1)}%;background:${CATEGORY_COLORS[name]}` })),
          el('span', { class: 'num', style: 'text-align:right' }, formatBytes(bytes)),
        ),
      );
    }
    if (!rows.firstChild) rows.append(el('div', { class: 'muted' }, 'nothing held at the peak'));
    // A negative figure had stood unexplained: bytes the step freed that were there before it.
    const negative = CATEGORY_NAMES.some((name) => (byName.get(name) ?? 0) < 0);
    return el(
      'div',
      { style: 'margin-top:8px' },
      el('h2', {}, 'At peak by category'),
      el('div', { class: 'muted', style: 'font-size:11px' }, 'Categories are heuristic: guessed from names, op types and lifetimes.'),
      bar,
      rows,
      negative
        ? el('div', { class: 'muted', style: 'font-size:11px', 'data-testid': 'details-negative-note' },
            'A negative figure is bytes in use before the step that it freed by the peak: they count against its rise.')
        : null,
    );
  }
}

/** The op-type table of the whole step (from the summary). */
export class StepOpTypesView {
  readonly element: HTMLElement;
  private readonly table: DataTable<OpTypeTotal>;
  private readonly caption = el('span', { class: 'muted' });
  /** What `(unknown)` is, where the step has it (the CLI says it too): a row named so had gone unexplained. */
  private readonly note = el('div', { class: 'muted hidden', style: 'font-size:11px', 'data-testid': 'op-types-note' });
  private device: DeviceSummary | null = null;

  constructor(selection: Selection) {
    this.table = new DataTable<OpTypeTotal>({
      columns: opTypeColumns(() => this.device?.peak_rise_bytes ?? 0),
      testId: 'op-type-table',
      initialSort: { key: 'at_peak_bytes', direction: 'desc' },
      fileName: () => {
        const s = selection.get();
        return [s.run ?? '', s.tag ?? '', s.device ?? '', 'op_types'];
      },
    });
    this.element = el(
      'section',
      { class: 'panel', 'aria-label': 'Op types of the whole step' },
      el('div', { class: 'panel-toolbar' }, el('h2', {}, 'Op types, whole step'), this.caption, el('span', { class: 'spacer' }), this.table.exports),
      this.table.element,
      this.note,
    );
  }

  setDevice(device: DeviceSummary | null): void {
    this.device = device;
    this.note.textContent = device?.op_types_note ?? '';
    this.note.classList.toggle('hidden', !device?.op_types_note);
    this.table.omitColumns(device?.has_curve === false ? PEAK_ONLY_KEYS : [], { key: 'allocated_bytes', direction: 'desc' });
    this.caption.textContent = device ? `${countOf(device.op_types.length, 'op type')} on ${device.id}` : '';
    this.table.setRows(device?.op_types ?? []);
  }
}
