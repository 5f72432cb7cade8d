// Table rows: sorting by a column and export as CSV or JSON.

export type Cell = string | number | null;

export interface Column<T> {
  key: string;
  label: string;
  /** Header shown in a narrow (compact) table; exports always use `label`. */
  shortLabel?: string;
  /** Raw value: sorted on and exported (bytes stay exact integers). */
  value: (row: T) => Cell;
  /** Text shown in the page; defaults to the raw value. */
  text?: (row: T) => string;
  numeric?: boolean;
}

export type SortDirection = 'asc' | 'desc';
export interface SortState {
  key: string;
  direction: SortDirection;
}

function compareCells(a: Cell, b: Cell): number {
  // Missing values sort last whatever the direction is handled by the caller.
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** Sorts a copy of rows by one column; stable, with missing values last in both directions. */
export function sortRows<T>(rows: readonly T[], columns: readonly Column<T>[], sort: SortState): T[] {
  const column = columns.find((c) => c.key === sort.key);
  if (!column) return [...rows];
  const sign = sort.direction === 'asc' ? 1 : -1;
  return rows
    .map((row, index) => ({ row, index, v: column.value(row) }))
    .sort((a, b) => {
      const aMissing = a.v === null || a.v === '';
      const bMissing = b.v === null || b.v === '';
      if (aMissing !== bMissing) return aMissing ? 1 : -1;
      const c = aMissing ? 0 : compareCells(a.v, b.v) * sign;
      return c !== 0 ? c : a.index - b.index;
    })
    .map((x) => x.row);
}

/** The direction a click on a column header asks for: numbers start descending, text ascending. */
export function nextSort<T>(current: SortState | null, column: Column<T>): SortState {
  if (current && current.key === column.key) {
    return { key: column.key, direction: current.direction === 'asc' ? 'desc' : 'asc' };
  }
  return { key: column.key, direction: column.numeric ? 'desc' : 'asc' };
}

function csvField(cell: Cell): string {
  if (cell === null) return '';
  if (typeof cell === 'number') return Number.isFinite(cell) ? String(cell) : '';
  let text = cell;
  // Names come from user files: keep spreadsheets from running them as formulas.
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  if (/[",\r\n]/.test(text)) text = `"${text.replace(/"/g, '""')}"`;
  return text;
}

/** RFC 4180 CSV with a header row, CRLF line ends and raw (unformatted) values. */
export function toCsv<T>(columns: readonly Column<T>[], rows: readonly T[]): string {
  const lines = [columns.map((c) => csvField(c.label)).join(',')];
  for (const row of rows) lines.push(columns.map((c) => csvField(c.value(row))).join(','));
  return lines.join('\r\n') + '\r\n';
}

/** JSON array of objects keyed by column key, raw values. */
export function toJson<T>(columns: readonly Column<T>[], rows: readonly T[]): string {
  const objects = rows.map((row) => {
    const o: Record<string, Cell> = {};
    for (const c of columns) o[c.key] = c.value(row);
    return o;
  });
  return JSON.stringify(objects, null, 2);
}

/** A file name safe on every OS, from parts that may hold any character. */
export function exportFileName(parts: readonly string[], extension: string): string {
  const base = parts
    .filter((p) => p !== '')
    .join('_')
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[._]+|_+$/g, '')
    .slice(0, 120);
  return `${base || 'tb-memory'}.${extension}`;
}
