import { describe, expect, it } from 'vitest';
import { type Column, exportFileName, nextSort, sortRows, toCsv, toJson } from './table';

interface Row {
  name: string;
  bytes: number | null;
}
const columns: Column<Row>[] = [
  { key: 'name', label: 'Name', value: (r) => r.name },
  { key: 'bytes', label: 'At peak (bytes)', value: (r) => r.bytes, numeric: true },
];
const rows: Row[] = [
  { name: 'conv10', bytes: 5 },
  { name: 'conv2', bytes: 100 },
  { name: 'bias', bytes: null },
  { name: 'relu', bytes: 5 },
];

describe('sortRows', () => {
  it('sorts numbers numerically both ways', () => {
    expect(sortRows(rows, columns, { key: 'bytes', direction: 'desc' }).map((r) => r.name)).toEqual([
      'conv2',
      'conv10',
      'relu',
      'bias',
    ]);
    expect(sortRows(rows, columns, { key: 'bytes', direction: 'asc' }).map((r) => r.name)).toEqual([
      'conv10',
      'relu',
      'conv2',
      'bias',
    ]);
  });
  it('sorts text naturally (conv2 before conv10)', () => {
    expect(sortRows(rows, columns, { key: 'name', direction: 'asc' }).map((r) => r.name)).toEqual([
      'bias',
      'conv2',
      'conv10',
      'relu',
    ]);
  });
  it('keeps missing values last and does not mutate its input', () => {
    const before = rows.map((r) => r.name);
    const sorted = sortRows(rows, columns, { key: 'bytes', direction: 'asc' });
    expect(sorted.slice(-1)[0]!.name).toBe('bias');
    expect(rows.map((r) => r.name)).toEqual(before);
  });
  it('is stable for ties', () => {
    const out = sortRows(rows, columns, { key: 'bytes', direction: 'desc' });
    expect(out.indexOf(rows[0]!)).toBeLessThan(out.indexOf(rows[3]!));
  });
  it('ignores an unknown column', () => {
    expect(sortRows(rows, columns, { key: 'nope', direction: 'asc' })).toEqual(rows);
  });
});

describe('nextSort', () => {
  it('starts numeric columns descending and text ascending, then flips', () => {
    expect(nextSort(null, columns[1]!)).toEqual({ key: 'bytes', direction: 'desc' });
    expect(nextSort(null, columns[0]!)).toEqual({ key: 'name', direction: 'asc' });
    expect(nextSort({ key: 'bytes', direction: 'desc' }, columns[1]!)).toEqual({ key: 'bytes', direction: 'asc' });
  });
});

describe('toCsv', () => {
  it('writes a header and raw values', () => {
    expect(toCsv(columns, [{ name: 'a', bytes: 91226112 }])).toBe('Name,At peak (bytes)\r\na,91226112\r\n');
  });
  it('quotes commas, quotes and newlines', () => {
    const csv = toCsv(columns, [{ name: 'a,"b"\nc', bytes: 1 }]);
    expect(csv).toBe('Name,At peak (bytes)\r\n"a,""b""\nc",1\r\n');
  });
  it('leaves missing values empty', () => {
    expect(toCsv(columns, [{ name: 'x', bytes: null }])).toBe('Name,At peak (bytes)\r\nx,\r\n');
  });
  it('defuses names that a spreadsheet would run as formulas', () => {
    const csv = toCsv(columns, [{ name: '=HYPERLINK("x")', bytes: -5 }]);
    expect(csv.split('\r\n')[1]).toBe(`"'=HYPERLINK(""x"")",-5`);
  });
});

describe('toJson', () => {
  it('keys rows by column key with raw values', () => {
    expect(JSON.parse(toJson(columns, rows.slice(0, 2)))).toEqual([
      { name: 'conv10', bytes: 5 },
      { name: 'conv2', bytes: 100 },
    ]);
  });
  it('keeps HTML in names as plain data', () => {
    const evil = '<img src=x onerror=alert(1)>';
    expect(JSON.parse(toJson(columns, [{ name: evil, bytes: 1 }]))[0].name).toBe(evil);
  });
});

describe('exportFileName', () => {
  it('makes a safe file name from run, tag and scope', () => {
    expect(exportFileName(['unet_b2', 'step_2', 'shared_model/unet_01', 'nodes'], 'csv')).toBe(
      'unet_b2_step_2_shared_model_unet_01_nodes.csv',
    );
    expect(exportFileName(['../<evil>'], 'json')).toBe('evil.json');
    expect(exportFileName([], 'csv')).toBe('tb-memory.csv');
  });
});
