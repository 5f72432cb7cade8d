// A sortable table with CSV and JSON export; rows are rendered as text only.

import { breakableText, el, clear, downloadText } from '../dom';
import { type Column, type SortState, exportFileName, nextSort, sortRows, toCsv, toJson } from '../lib/table';

export interface DataTableOptions<T> {
  columns: Column<T>[];
  testId: string;
  exportTestIds?: { csv: string; json: string };
  initialSort: SortState;
  /** Base name parts of exported files (run, tag, scope, table). */
  fileName: () => string[];
  caption?: string;
  /** Rows shown at most (all rows are exported). */
  maxRows?: number;
  /** Keys of the columns shown, for a narrow panel (every column is exported); default all. */
  shownColumns?: string[];
  /** With shownColumns: a button that shows every column (the table then scrolls sideways in its box). */
  columnToggle?: boolean;
  /** Tighter cell padding, for a narrow panel. */
  compact?: boolean;
  onRowClick?: (row: T) => void;
  /** A row's key (its data-key attribute): markRow() marks the row with that key as selected. */
  rowKey?: (row: T) => string;
}

export class DataTable<T> {
  readonly element: HTMLElement;
  readonly exports: HTMLElement;
  private readonly table = el('table', { class: 'data' });
  private rows: readonly T[] = [];
  private sort: SortState;
  private allColumns = false;
  /** Columns left out (shown and exported): figures the step does not have. */
  private omitted: ReadonlySet<string> = new Set();
  /** The sort was moved off an omitted column (not by the user): it goes back when the column does. */
  private autoSorted = false;
  private marked: string | null = null;

  constructor(private readonly options: DataTableOptions<T>) {
    this.sort = options.initialSort;
    this.table.setAttribute('data-testid', options.testId);
    if (options.compact) this.table.classList.add('compact');
    if (options.caption) this.table.append(el('caption', { class: 'hidden' }, options.caption));
    const ids = options.exportTestIds ?? { csv: `${options.testId}-export-csv`, json: `${options.testId}-export-json` };
    const csv = el('button', { type: 'button', 'data-testid': ids.csv, title: 'Download this table as CSV (exact byte counts)' }, 'CSV');
    const json = el('button', { type: 'button', 'data-testid': ids.json, title: 'Download this table as JSON (exact byte counts)' }, 'JSON');
    csv.addEventListener('click', () =>
      downloadText(toCsv(this.columns(), this.sorted()), exportFileName(options.fileName(), 'csv'), 'text/csv;charset=utf-8'),
    );
    json.addEventListener('click', () =>
      downloadText(toJson(this.columns(), this.sorted()), exportFileName(options.fileName(), 'json'), 'application/json'),
    );
    this.exports = el('span', { class: 'exports' }, el('span', { class: 'muted' }, 'Export'), csv, json);
    if (options.shownColumns && options.columnToggle) {
      const hidden = options.columns.length - options.shownColumns.length;
      const toggle = el('button', { type: 'button', 'data-testid': `${options.testId}-columns`, 'aria-pressed': 'false', title: 'Show every column (the table then scrolls sideways)' }, `+${hidden} columns`);
      toggle.addEventListener('click', () => {
        this.allColumns = !this.allColumns;
        toggle.textContent = this.allColumns ? 'Fewer columns' : `+${hidden} columns`;
        toggle.setAttribute('aria-pressed', String(this.allColumns));
        this.render();
      });
      this.exports.prepend(toggle);
    }
    this.element = el('div', { class: 'table-wrap' }, this.table);
  }

  setRows(rows: readonly T[]): void {
    this.rows = rows;
    this.render();
  }

  /**
   * Leaves out columns of figures the step does not have (at peak, without a
   * curve), from the page and the exports; a sort on one of them moves to
   * `sortInstead` until they come back.
   */
  omitColumns(keys: readonly string[], sortInstead: SortState): void {
    this.omitted = new Set(keys);
    if (this.omitted.has(this.sort.key)) {
      this.sort = sortInstead;
      this.autoSorted = true;
    } else if (this.autoSorted && !this.omitted.has(this.options.initialSort.key)) {
      this.sort = this.options.initialSort;
      this.autoSorted = false;
    }
    this.render();
  }

  /** Marks the row whose key is `key` as selected (aria-selected), without redrawing; null marks none. */
  markRow(key: string | null): void {
    this.marked = key;
    for (const tr of this.table.querySelectorAll<HTMLTableRowElement>('tbody tr[data-key]')) {
      const on = tr.dataset.key === key;
      tr.classList.toggle('selected', on);
      tr.setAttribute('aria-selected', on ? 'true' : 'false');
    }
  }

  /** Rows in the current sort order: what is shown and exported. */
  sorted(): T[] {
    return sortRows(this.rows, this.options.columns, this.sort);
  }

  /** Every column but the omitted ones: what is exported. */
  private columns(): Column<T>[] {
    return this.options.columns.filter((c) => !this.omitted.has(c.key));
  }

  private shown(): Column<T>[] {
    const keys = this.options.shownColumns;
    return keys && !this.allColumns ? this.columns().filter((c) => keys.includes(c.key)) : this.columns();
  }

  private render(): void {
    const keep = this.table.querySelector('caption');
    clear(this.table);
    if (keep) this.table.append(keep);
    const columns = this.shown();
    const head = el('tr');
    for (const column of columns) {
      const active = this.sort.key === column.key;
      const arrow = active ? (this.sort.direction === 'asc' ? ' ▲' : ' ▼') : '';
      const label = this.options.compact ? (column.shortLabel ?? column.label) : column.label;
      const button = el('button', { type: 'button', 'data-sort-key': column.key, title: column.label }, label + arrow);
      button.addEventListener('click', () => {
        this.sort = nextSort(this.sort, column);
        this.autoSorted = false;
        this.render();
      });
      head.append(
        el(
          'th',
          {
            class: column.numeric ? 'num' : null,
            scope: 'col',
            'aria-sort': active ? (this.sort.direction === 'asc' ? 'ascending' : 'descending') : 'none',
          },
          button,
        ),
      );
    }
    const body = el('tbody');
    const rows = this.sorted();
    const shown = this.options.maxRows ? rows.slice(0, this.options.maxRows) : rows;
    for (const row of shown) {
      const tr = el('tr');
      for (const column of columns) {
        const raw = column.value(row);
        const text = column.text ? column.text(row) : raw === null ? '—' : String(raw);
        tr.append(el('td', { class: column.numeric ? 'num' : column.key === 'raw_name' ? 'raw' : null },
          ...(column.numeric ? [text] : breakableText(text))));
      }
      if (this.options.rowKey) {
        const key = this.options.rowKey(row);
        tr.dataset.key = key;
        tr.classList.toggle('selected', key === this.marked);
        tr.setAttribute('aria-selected', key === this.marked ? 'true' : 'false');
      }
      if (this.options.onRowClick) {
        const onClick = this.options.onRowClick;
        tr.style.cursor = 'pointer';
        tr.addEventListener('click', () => onClick(row));
      }
      body.append(tr);
    }
    if (rows.length > shown.length) {
      body.append(
        el('tr', {}, el('td', { colspan: columns.length, class: 'muted' }, `${rows.length - shown.length} more rows in the export`)),
      );
    }
    this.table.append(el('thead', {}, head), body);
  }
}
