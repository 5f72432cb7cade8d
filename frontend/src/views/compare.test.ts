// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';
import type { CompareResponse, CompareScopeRow, CompareSide, CurveResponse } from '../api';
import { Selection } from '../selection';
import { CompareView } from './compare';
import { CompareCurveView } from './compare-curve';
import { againstOf, againstValue } from './pickers';

const EVIL = '<img src=x onerror=alert(1)>';

const side = (run: string, duration: number): CompareSide => ({
  run, tag: 'step_3', step: 3, source: 'run_metadata', id: 'CPU:0/mklcpu', device: '/device:CPU:0', allocator: 'mklcpu',
  baseline: 'allocator_bytes_in_use', has_curve: true, start_bytes: 0, peak_bytes: 100, peak_rise_bytes: 100,
  peak_time_us: 5, duration_us: duration,
});
const row = (name: string, a: number, b: number, status: CompareScopeRow['status'] = 'changed'): CompareScopeRow => ({
  name, kind: 'scope', parent: '', status, a_bytes: a, b_bytes: b, delta_bytes: a - b,
  a_allocated_bytes: a, b_allocated_bytes: b, delta_allocated_bytes: a - b, a_output_bytes: 0, b_output_bytes: 0, delta_output_bytes: 0,
});
const body: CompareResponse = {
  a: side('big', 200), b: side(EVIL, 100), group: 'layer', peak_rise_delta_bytes: 30, start_change: null, renumbered: [],
  scope: row('', 130, 100),
  children: [row('grew', 100, 40), row(EVIL, 30, 60, 'changed')],
  scope_count: 3,
  scopes: [row('small', 2, 1), row('grew', 100, 40), row(EVIL, 30, 60)],
  op_types: [],
  categories: [],
};

function mount(view: CompareView): void {
  document.body.replaceChildren(view.element);
  view.show(true);
}

/** A comparison of step_3 of `big` against EVIL's, shown with `body`. */
function shownComparison(): { selection: Selection; view: CompareView } {
  const selection = new Selection({ run: 'big', tag: 'step_3', against: { run: EVIL, tag: 'step_3' } });
  const view = new CompareView(selection);
  mount(view);
  view.setData(body);
  return { selection, view };
}

describe('CompareView', () => {
  it('colours tiles by the difference and keeps names as text', () => {
    const view = new CompareView(new Selection());
    mount(view);
    view.setData(body);
    expect(document.querySelector('img')).toBeNull();
    const tiles = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-tile]')];
    expect(tiles.map((t) => t.dataset.scope).sort()).toEqual([EVIL, 'grew'].sort());
    const grew = tiles.find((t) => t.dataset.scope === 'grew')!;
    const shrank = tiles.find((t) => t.dataset.scope === EVIL)!;
    expect(grew.dataset.delta).toBe('60');
    expect(grew.style.background).not.toBe(shrank.style.background);
    expect(document.querySelector('[data-testid=compare-delta]')!.textContent).toContain('+30 B');
  });

  it('keeps a tile for each of the largest changes, however small their bytes beside the others', () => {
    const view = new CompareView(new Selection());
    mount(view);
    // A big scope that barely changed and many small ones; the smallest changed most (trial AM's head/einsum).
    const small = Array.from({ length: 40 }, (_v, i) => row(`s${i}`, 30, 30, 'same'));
    view.setData({ ...body, children: [row('big', 10000000, 9999999), ...small, row('einsum', 1, 90)] });
    const tiles = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-tile]')].map((t) => t.dataset.scope);
    expect(tiles).toContain('big');
    expect(tiles).toContain('einsum');
    // Drawn at a readable size (at its share it had been 0 px wide: review AK).
    const einsum = document.querySelector<HTMLElement>('[data-testid=compare-tile][data-scope=einsum]')!;
    expect(parseFloat(einsum.style.width) * parseFloat(einsum.style.height)).toBeGreaterThanOrEqual(300);
  });

  it('gives each side its rise and start beside its peak: the difference shown is the rises’', () => {
    const view = new CompareView(new Selection());
    mount(view);
    view.setData({ ...body, a: { ...side('a', 200), start_bytes: 900, peak_bytes: 1300, peak_rise_bytes: 400 }, peak_rise_delta_bytes: 300 });
    expect(document.querySelector('[data-testid=compare-a]')!.textContent).toBe('A a · step_3: peak 1.27 KiB (rise 400 B over a start of 900 B)');
    expect(document.querySelector('[data-testid=compare-delta]')!.textContent).toBe('peak rise A − B: +300 B');
  });

  it('gives the colour scale its ends only where some child differs', () => {
    const view = new CompareView(new Selection());
    mount(view);
    view.setData(body);
    const legend = () => [...view.element.querySelectorAll('.legend')].map((l) => l.textContent).join(' ');
    expect(legend()).toContain('A larger by 60 B');
    view.setData({ ...body, children: [row('same', 40, 40, 'same'), row('also', 4, 4, 'changed')] });
    expect(legend()).not.toContain('larger by');
    expect(legend()).toContain('no child differs');
  });

  it('lists scopes by absolute difference; a row selects its scope; the button leaves compare mode', () => {
    const { selection, view } = shownComparison();
    const keys = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-table] tbody tr')].map((r) => r.dataset.key);
    expect(keys).toEqual(['grew', EVIL, 'small']);
    document.querySelector<HTMLElement>(`[data-testid=compare-table] tbody tr[data-key="grew"]`)!.click();
    expect(selection.get().compareSelected).toBe('grew');
    expect(document.querySelector('[data-testid=compare-details-scope]')!.getAttribute('data-scope')).toBe('grew');
    expect(document.querySelector('[data-testid=compare-details-delta-bytes]')!.getAttribute('data-bytes')).toBe('60');
    expect(document.querySelector('[data-testid=compare-tile][data-scope="grew"]')!.getAttribute('aria-selected')).toBe('true');
    document.querySelector<HTMLElement>('[data-testid=compare-leave]')!.click();
    expect(selection.get().against).toBeNull();
  });
});

describe('CompareView columns', () => {
  it('shows the allocated difference beside the at-peak figures, so a row empty at both peaks says what changed', () => {
    const view = new CompareView(new Selection());
    mount(view);
    const grad = { ...row('grad', 0, 0), a_allocated_bytes: 3072, b_allocated_bytes: 1024, delta_allocated_bytes: 2048 };
    view.setData({ ...body, scopes: [...body.scopes, grad] });
    const heads = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-table] thead button')].map((b) => b.dataset.sortKey);
    expect(heads).toEqual(['name', 'status', 'delta_bytes', 'a_bytes', 'b_bytes', 'delta_allocated_bytes']);
    const cells = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-table] tbody tr[data-key="grad"] td')].map((td) => td.textContent);
    expect(cells.slice(2)).toEqual(['0 B', '0 B', '0 B', '+2.00 KiB']);
    // Without a curve on a side, allocated is the compared figure and is not shown twice.
    view.setData({ ...body, a: { ...body.a, has_curve: false }, scopes: [grad] });
    const without = [...document.querySelectorAll<HTMLElement>('[data-testid=compare-table] thead button')].map((b) => b.dataset.sortKey);
    expect(without).toEqual(['name', 'status', 'delta_allocated_bytes', 'a_allocated_bytes', 'b_allocated_bytes']);
  });
});

describe('CompareView with B numbered apart', () => {
  it('says which of B names were matched to A names, as text, and gives a row B own name', () => {
    const { view } = shownComparison();
    expect(document.querySelector('[data-testid=compare-renumbered]')).toBeNull();
    const renamed = { ...row('grew', 100, 40), b_name: `${EVIL}_1` };
    view.setData({ ...body, renumbered: [{ b: `${EVIL}_1`, a: 'grew' }], children: [renamed], scopes: [renamed] });
    const note = document.querySelector<HTMLElement>('[data-testid=compare-renumbered]')!;
    expect(note.dataset.count).toBe('1');
    expect(note.textContent).toContain(`${EVIL}_1 → grew`);
    expect(document.querySelector('img')).toBeNull();
    document.querySelector<HTMLElement>(`[data-testid=compare-table] tbody tr[data-key="grew"]`)!.click();
    expect(document.querySelector('[data-testid=compare-details-b-name]')!.textContent).toBe(`in B: ${EVIL}_1`);
    expect(document.querySelector('[data-testid=compare-details-same-requests]')).toBeNull();
    const chunked = { ...row('grew', 100, 40), same_requests: true };
    view.setData({ ...body, children: [chunked], scopes: [chunked] });
    document.querySelector<HTMLElement>(`[data-testid=compare-table] tbody tr[data-key="grew"]`)!.click();
    expect(document.querySelector('[data-testid=compare-details-same-requests]')!.textContent).toContain('allocator’s chunks');
  });
});

describe('CompareView of two models', () => {
  it('says once that the steps share few scopes, as text, only where the server says so', () => {
    const { view } = shownComparison();
    expect(document.querySelector('[data-testid=compare-models-note]')).toBeNull();
    const said = `A and B share 8% of their scopes and nodes: two different models? ${EVIL}`;
    view.setData({ ...body, shared_share: 0.08, models_note: said });
    const notes = document.querySelectorAll<HTMLElement>('[data-testid=compare-models-note]');
    expect(notes.length).toBe(1);
    expect(notes[0]!.textContent).toBe(`Note: ${said}.`);
    expect(document.querySelector('img')).toBeNull();
  });
});

describe('CompareView with an allocator gap on a side', () => {
  it("says which side's peak may be off, and by how much, only where the server says so", () => {
    const selection = new Selection({ run: 'big', tag: 'step_3', against: { run: 'small', tag: 'step_3' } });
    const view = new CompareView(selection);
    mount(view);
    view.setData(body);
    expect(document.querySelector('[data-testid=compare-gap]')).toBeNull();
    view.setData({ ...body, a: { ...body.a, readings_gap_bytes: 24 * 1024 * 1024 }, b: { ...body.b, readings_gap_bytes: null } });
    let note = document.querySelector<HTMLElement>('[data-testid=compare-gap]')!;
    expect(note.dataset.sides).toBe('A');
    expect(note.textContent).toBe('peak may be off by up to 24.0 MiB (A): allocator gap');
    view.setData({ ...body, a: { ...body.a, readings_gap_bytes: 2048 }, b: { ...body.b, readings_gap_bytes: 1024 } });
    note = document.querySelector<HTMLElement>('[data-testid=compare-gap]')!;
    expect(note.textContent).toBe('peak may be off by up to 2.00 KiB (A), 1.00 KiB (B): allocator gap');
    expect(document.querySelectorAll('[data-testid=compare-gap]').length).toBe(1);
  });
});

describe('CompareView with the starts apart', () => {
  it('says the change of start beside the peaks, split as the server splits it, once', () => {
    const selection = new Selection({ run: 'big', tag: 'step_3', against: { run: 'small', tag: 'step_3' } });
    const view = new CompareView(selection);
    mount(view);
    view.setData(body);
    expect(document.querySelector('[data-testid=compare-start]')).toBeNull();
    view.setData({ ...body, start_change: { delta_bytes: 0, parts: [] } });
    expect(document.querySelector('[data-testid=compare-start]')).toBeNull();
    const slots = 35 * 1024 * 1024;
    view.setData({ ...body, start_change: { delta_bytes: slots, parts: [{ name: 'optimizer slots', delta_bytes: slots }] } });
    const note = document.querySelector<HTMLElement>('[data-testid=compare-start]')!;
    expect(note.dataset.bytes).toBe(String(slots));
    expect(note.textContent).toBe('start A − B: +35.0 MiB (optimizer slots +35.0 MiB)');
    expect(note.title).toContain('optimizer slots: 36,700,160 B');
    expect(note.title).not.toContain('which the starts count');
    view.setData({ ...body, start_change: { delta_bytes: slots, parts: [{ name: 'optimizer slots', delta_bytes: slots }], counts_from_bytes: 256 * 1024 } });
    expect(document.querySelector<HTMLElement>('[data-testid=compare-start]')!.title).toContain('tensors of 256 KiB and more, which the starts count (mklcpu)');
    expect(document.querySelectorAll('[data-testid=compare-start]').length).toBe(1);
    expect(document.querySelector('[data-testid=compare-a]')!.textContent).not.toContain('of its requests');
    view.setData({ ...body, a: { ...body.a, start_counts_from_bytes: 256 * 1024 } });
    expect(document.querySelector('[data-testid=compare-a]')!.textContent).toContain('over a start of 0 B, of its requests of 256 KiB and more)');
  });
});

describe('compare picker values', () => {
  it('round-trips any run and step name, and reads anything else as none', () => {
    expect(againstOf(againstValue(EVIL, 'a"b'))).toEqual({ run: EVIL, tag: 'a"b' });
    expect(againstOf('')).toBeNull();
    expect(againstOf('["a"]')).toBeNull();
    expect(againstOf('{')).toBeNull();
  });
});

describe('CompareCurveView legend', () => {
  it('names A before B, though B is drawn first (under A), and names as text', () => {
    const view = new CompareCurveView();
    document.body.replaceChildren(view.element);
    const curve = (peak: number): CurveResponse => ({
      window: null, baseline: 'none', start_bytes: null, absolute: false,
      peak: { time_us: 5, bytes: peak, rise_bytes: peak, node: null }, duration_us: 10,
      t_us: [0, 5, 10], min_bytes: [0, peak, 0], max_bytes: [0, peak, 0], node_at: [0, 0, 0], node_names: ['a'],
      snapshots: { t_us: [], bytes: [] }, series: [],
    });
    view.setCurves({ a: side('big', 10), b: side(EVIL, 10) }, curve(200), curve(100));
    const legend = [...view.element.querySelectorAll<HTMLElement>('[data-testid^=compare-legend-]')];
    expect(legend.map((item) => item.dataset.testid)).toEqual(['compare-legend-a', 'compare-legend-b']);
    expect(legend[1]!.textContent).toContain(`B: ${EVIL} · step_3`);
    expect(document.querySelector('img')).toBeNull();
  });
});
