// Model memory: the tensors in memory before the step (parameters, optimizer
// slots, the rest), by category beside the at-peak bytes, and by layer like
// Keras's summary(). From the summary's `resident`; draws only.

import type { DeviceSummary, ResidentLayer } from '../api';
import { clear, el } from '../dom';
import { formatBytes, formatCount, formatExactBytes } from '../format';
import { categoryRows } from '../lib/resident';
import type { Column } from '../lib/table';
import { DataTable } from './data-table';

type Row = ResidentLayer & { order: number };

const bytes = (key: 'param_bytes' | 'slot_bytes', label: string): Column<Row> => ({
  key,
  label,
  value: (r) => r[key],
  text: (r) => formatBytes(r[key]),
  numeric: true,
});

const COLUMNS: Column<Row>[] = [
  { key: 'order', label: '#', value: (r) => r.order, numeric: true },
  { key: 'scope', label: 'layer', value: (r) => r.scope },
  { key: 'param_count', label: 'params', value: (r) => r.param_count, text: (r) => formatCount(r.param_count), numeric: true },
  bytes('param_bytes', 'param bytes'),
  bytes('slot_bytes', 'optimizer slots'),
  { key: 'tensor_count', label: 'tensors', value: (r) => r.tensor_count, numeric: true },
];

export class ResidentView {
  readonly element: HTMLElement;
  private readonly body = el('div', { class: 'panel-body' });
  private readonly table: DataTable<Row>;

  constructor(fileBase: () => string[]) {
    this.table = new DataTable<Row>({
      columns: COLUMNS,
      testId: 'resident-layers',
      // Graph order, as Keras's summary() lists layers; a header click sorts.
      initialSort: { key: 'order', direction: 'asc' },
      fileName: () => [...fileBase(), 'layers'],
      compact: true,
    });
    this.element = el(
      'section',
      { class: 'panel resident-panel', 'data-testid': 'resident', 'aria-label': 'Model memory: resident before the step' },
      el('div', { class: 'panel-toolbar' }, el('h2', {}, 'Model memory, resident before the step'), el('span', { class: 'spacer' }), this.table.exports),
      this.body,
    );
  }

  setDevice(device: DeviceSummary | null): void {
    clear(this.body);
    const resident = device?.resident;
    if (!device || device.has_curve === false) return;
    if (!resident) {
      this.body.append(
        el('div', { class: 'muted', 'data-testid': 'resident-none' }, device.resident === undefined ? 'This server sends no resident memory.' : `No resident memory for this run: ${device.resident_note ?? 'the run has no GraphDef or Keras model config to size its parameters from'}.`),
      );
      this.table.setRows([]);
      return;
    }
    const parts = [
      el('b', { 'data-testid': 'resident-param-count', 'data-count': String(resident.param_count), title: formatExactBytes(resident.param_bytes) }, `${formatCount(resident.param_count)} parameters`),
      ` (${formatBytes(resident.param_bytes)}) · optimizer slots ${formatBytes(resident.slot_bytes)}`,
    ];
    if (resident.start_bytes !== null) {
      const fed = resident.fed_bytes ? ` · inputs ${formatBytes(resident.fed_bytes)}` : '';
      parts.push(`${fed} · other ${formatBytes(resident.other_bytes)} · in use before the step ${formatBytes(resident.start_bytes)}`);
    }
    this.body.append(el('div', { class: 'resident-line' }, ...parts));
    if (resident.note) this.body.append(el('div', { class: 'table-note', 'data-testid': 'resident-note' }, `Note: ${resident.note}.`));
    if (resident.other_note) this.body.append(el('div', { class: 'table-note', 'data-testid': 'resident-other-note' }, `Note: ${resident.other_note}.`));
    if (resident.counted_note) this.body.append(el('div', { class: 'table-note', 'data-testid': 'resident-counted-note' }, `Note: ${resident.counted_note}.`));
    this.body.append(this.categories(device));
    this.table.setRows(resident.layers.map((layer, order) => ({ ...layer, order: order + 1 })));
    this.body.append(
      el('h2', { style: 'margin-top:8px' }, `By layer (${formatCount(resident.layers.length)})`),
      this.table.element,
      el('div', { class: 'table-note' }, 'A layer is the variables’ name scope; optimizer slots count toward their variable’s layer.'),
    );
  }

  /** At peak (the rise), resident (before the step) and both: absolute memory at the peak, per category. */
  private categories(device: DeviceSummary): HTMLElement {
    const table = el('table', { class: 'kv', 'data-testid': 'resident-categories' });
    table.append(
      el('tr', {}, el('th', {}, 'category'), el('th', { class: 'num' }, 'resident'), el('th', { class: 'num' }, '+ at peak'), el('th', { class: 'num' }, '= at the peak in all')),
    );
    for (const row of categoryRows(device.categories)) {
      table.append(
        el(
          'tr',
          { 'data-category': row.name },
          el('td', {}, row.name),
          el('td', { class: 'num', 'data-bytes': String(row.residentBytes ?? ''), title: row.residentBytes === null ? '' : formatExactBytes(row.residentBytes) }, formatBytes(row.residentBytes)),
          el('td', { class: 'num', title: formatExactBytes(row.atPeakBytes) }, formatBytes(row.atPeakBytes)),
          el('td', { class: 'num' }, formatBytes(row.totalBytes)),
        ),
      );
    }
    return el('div', { style: 'margin-top:6px' }, table);
  }
}
