// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';
import type { CurveResponse, DefaultStepResponse, DeviceSummary, Figures, Finding, GraphResponse, ScopeDetails, ScopesResponse, SummaryResponse, WhatIfResponse } from '../api';
import { el } from '../dom';
import { formatBytes } from '../format';
import { Selection } from '../selection';
import { previewOfChild } from '../lib/scope-preview';
import { DataTable } from './data-table';
import { DetailsView, StepOpTypesView } from './details';
import { FindingsView } from './findings';
import { GraphView, MIN_FIT_SCALE } from './graph';
import { EmptyStateView, SUMMARY_NAME_CHARS, SummaryView, openingText, opSuffix, opTypeSuffix } from './summary';
import { PickersView, deviceLabel, stepLabel } from './pickers';
import { CurveView } from './curve';
import { TreemapView } from './treemap';
import { WhatIfView } from './whatif';
import { ViewLinkView } from './view-link';

const EVIL = '<img src=x onerror=alert(1)>';

const figures = (at_peak_bytes: number): Figures => ({
  at_peak_bytes,
  allocated_bytes: at_peak_bytes * 2,
  op_peak_bytes: at_peak_bytes,
  live_bytes: at_peak_bytes,
  output_bytes: at_peak_bytes + 1,
  temp_bytes: 0,
  persistent_bytes: 0,
});
const cats = { parameters: 0, inputs: 0, activations: 1, gradients: 0, optimizer: 0, temporaries: 0, other: 0 };

const level: ScopesResponse = {
  scope: EVIL,
  name: EVIL,
  path: [
    { name: '(all)', scope: '' },
    { name: EVIL, scope: EVIL },
  ],
  figures: figures(300),
  categories: cats,
  peak_rise_bytes: 300,
  children: [
    { scope: `${EVIL}/a`, name: 'a', kind: 'scope', has_children: true, exec_count: 4, top_op_type: 'Conv2D', figures: figures(200), categories: cats },
    { scope: `${EVIL}/${EVIL}`, name: EVIL, kind: 'node', has_children: false, exec_count: 1, top_op_type: EVIL, figures: figures(99), categories: cats },
    { scope: `${EVIL}/(self)`, name: '(self)', kind: 'self', has_children: false, exec_count: 1, top_op_type: 'Identity', figures: figures(1), categories: cats },
  ],
};

function tileFor(scope: string): HTMLElement | undefined {
  return [...document.querySelectorAll<HTMLElement>('[data-testid=treemap-tile]')].find((t) => t.dataset.scope === scope);
}

function mount(node: HTMLElement): void {
  document.body.replaceChildren(node);
}

describe('TreemapView', () => {
  it('renders hostile names as text and runs nothing', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    view.setData(level);
    expect(document.querySelectorAll('img').length).toBe(0);
    const tiles = [...document.querySelectorAll<HTMLElement>('[data-testid=treemap-tile]')];
    expect(tiles.map((t) => t.dataset.scope)).toContain(`${EVIL}/${EVIL}`);
    expect(document.querySelector('[data-testid=breadcrumbs]')!.textContent).toContain(EVIL);
  });

  it('keeps the (self) tile, selects on click and drills with the button', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(level);
    const self = tileFor(`${EVIL}/(self)`);
    expect(self).toBeDefined();
    const drill = document.querySelector<HTMLButtonElement>('[data-testid=drill-in]')!;
    expect(drill.disabled).toBe(true);
    const a = tileFor(`${EVIL}/a`)!;
    a.click();
    expect(selection.get().selected).toBe(`${EVIL}/a`);
    expect(a.classList.contains('selected')).toBe(true);
    expect(drill.disabled).toBe(false);
    drill.click();
    expect(selection.get().focus).toBe(`${EVIL}/a`);
  });

  it('selects with Enter from the keyboard', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(level);
    const tile = document.querySelector<HTMLElement>('[data-testid=treemap-tile]')!;
    expect(tile.tabIndex).toBe(0);
    tile.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    expect(selection.get().selected).toBe(tile.dataset.scope);
  });

  it('is one Tab stop: arrows, Home and End move between tiles, Escape goes up a level', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(level);
    const stops = () => [...document.querySelectorAll<HTMLElement>('[data-testid=treemap-tile][tabindex="0"]')].map((t) => t.dataset.scope);
    const order = [...document.querySelectorAll<HTMLElement>('[data-testid=treemap-tile]')].map((t) => t.dataset.scope!);
    expect(stops()).toEqual([order[0]]);  // the largest, nothing selected
    const key = (key: string) => document.activeElement!.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true, cancelable: true }));
    tileFor(order[0]!)!.focus();
    key('ArrowRight');
    expect((document.activeElement as HTMLElement).dataset.scope).toBe(order[1]);
    expect(stops()).toEqual([order[1]]);
    key('End');
    expect((document.activeElement as HTMLElement).dataset.scope).toBe(order[order.length - 1]);
    key('Home');
    expect((document.activeElement as HTMLElement).dataset.scope).toBe(order[0]);
    selection.select(order[2]!);  // Tab comes back to the selected tile
    expect(stops()).toEqual([order[2]]);
    // Escape opens the parent scope (the level above this one), and the level drawn next takes the focus.
    key('Escape');
    expect(selection.get().focus).toBe(level.path[level.path.length - 2]!.scope);
    view.setData(level);
    expect(document.activeElement?.getAttribute('data-testid')).toBe('treemap-tile');
  });

  it('going up by keyboard gives the focus to the tile of the level left', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(level);
    tileFor(`${EVIL}/a`)!.focus();
    document.activeElement!.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true }));
    // The root level: the scope just left is its second tile (trial AF's Escape had focused the first).
    const root: ScopesResponse = {
      ...level,
      scope: '',
      name: '(all)',
      path: [{ name: '(all)', scope: '' }],
      children: [
        { ...level.children[0]!, scope: 'big', name: 'big', figures: figures(500) },
        { ...level.children[0]!, scope: EVIL, name: EVIL, figures: figures(300) },
      ],
    };
    view.setData(root);
    expect((document.activeElement as HTMLElement).dataset.scope).toBe(EVIL);
    expect(tileFor(EVIL)!.tabIndex).toBe(0);
  });

  it('drills in with Shift+Enter and gives the level drawn next the focus', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(level);
    const a = tileFor(`${EVIL}/a`)!;
    a.focus();
    a.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', shiftKey: true, bubbles: true }));
    expect(selection.get().focus).toBe(`${EVIL}/a`);
    view.setData(level); // the level the drill asked for, drawn anew: its old tiles are gone
    expect(document.activeElement?.getAttribute('data-testid')).toBe('treemap-tile');
    // A level drawn for another reason leaves the focus where it is.
    const outside = el('button', {}, 'x');
    mount(outside);
    outside.focus();
    view.setData(level);
    expect(document.activeElement).toBe(outside);
  });
});

describe('TreemapView tile bounds', () => {
  it('draws every tile, the "(N more)" one too, inside the treemap with its padding and border', () => {
    const many: ScopesResponse = {
      ...level,
      children: [
        { ...level.children[0]!, scope: 'big', name: 'big', figures: figures(10_000_000) },
        { ...level.children[0]!, scope: 'mid', name: 'mid', figures: figures(2_000_000) },
        ...Array.from({ length: 40 }, (_, i) => ({ ...level.children[1]!, scope: `tiny${i}`, name: `tiny${i}`, figures: figures(40) })),
      ],
    };
    const view = new TreemapView(new Selection());
    mount(view.element);
    view.setData(many);
    // The folded children's share here is too small for a visible tile: a button below the treemap stands for it.
    const more = document.querySelector<HTMLElement>('[data-testid=treemap-more]')!;
    expect(more.tagName).toBe('BUTTON');
    expect(more.classList.contains('hidden')).toBe(false);
    expect(more.closest('.treemap-area')).toBeNull();
    expect(more.textContent).toContain('(40 more)');
    const list = document.querySelector<HTMLElement>('[data-testid=treemap-more-list]')!;
    expect(list.classList.contains('hidden')).toBe(true);
    more.click();
    expect(list.classList.contains('hidden')).toBe(false);
    expect(list.querySelectorAll('[data-testid=treemap-more-item]').length).toBe(40);
    expect(more.getAttribute('aria-expanded')).toBe('true');
    // jsdom lays nothing out: the view takes 600 x 330, and the CSS gives a tile 2px 4px padding and a 1px border.
    for (const tile of document.querySelectorAll<HTMLElement>('.treemap-area > .tile')) {
      const st = tile.style;
      const px = (v: string, fallback: number) => (v === '' ? fallback : parseFloat(v));
      const border = px(st.borderWidth, 1);
      const outerW = Math.max(px(st.width, 0), 2 * (px(st.paddingLeft, 4) + border));
      const outerH = Math.max(px(st.height, 0), 2 * (px(st.paddingTop, 2) + border));
      expect(px(st.left, 0) + outerW, tile.dataset.scope ?? 'more').toBeLessThanOrEqual(600);
      expect(px(st.top, 0) + outerH, tile.dataset.scope ?? 'more').toBeLessThanOrEqual(330);
    }
  });
});

describe('TreemapView inside a big tile', () => {
  const inner = [
    { scope: `${EVIL}/a/${EVIL}`, name: EVIL, kind: 'scope' as const, has_children: true, exec_count: 2, top_op_type: 'MatMul', figures: figures(120), categories: cats },
    { scope: `${EVIL}/a/b`, name: 'b', kind: 'node' as const, has_children: false, exec_count: 1, top_op_type: 'Relu', figures: figures(50), categories: cats },
    { scope: `${EVIL}/a/c`, name: 'c', kind: 'node' as const, has_children: false, exec_count: 1, top_op_type: 'NoOp', figures: figures(0), categories: cats },
  ];
  const withInside: ScopesResponse = { ...level, children: [{ ...level.children[0]!, inside: inner }, ...level.children.slice(1)] };

  it('draws what the scope holds inside its tile, names as text, sized by the figure in use', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    view.setData(withInside);
    const tile = tileFor(`${EVIL}/a`)!;
    const parts = [...tile.querySelectorAll<HTMLElement>('[data-testid=treemap-subtile]')];
    // The parts with bytes at the peak, and one hatched area for what the list leaves out (200 - 170).
    expect(parts.filter((p) => p.dataset.scope).map((p) => p.dataset.scope)).toEqual([`${EVIL}/a/${EVIL}`, `${EVIL}/a/b`]);
    expect(parts.filter((p) => p.classList.contains('rest')).length).toBe(1);
    const area = (p: HTMLElement) => parseFloat(p.style.width) * parseFloat(p.style.height);
    const [big, small, rest] = [parts[0]!, parts[1]!, parts.find((p) => p.classList.contains('rest'))!];
    expect(area(big) / area(small)).toBeCloseTo(120 / 50, 0);
    expect(area(small) / area(rest)).toBeCloseTo(50 / 30, 0);
    expect(document.querySelectorAll('img').length).toBe(0);
    expect(tile.textContent).toContain(EVIL);
    expect(tile.querySelector('.tile-inside')!.getAttribute('aria-hidden')).toBe('true');
    expect(tile.title).toContain(`holds: ${EVIL} `);
    // A part big enough for a second line shows its bytes under its name, as text.
    const named = parts.filter((p) => p.querySelector('.bytes'));
    expect(named.length).toBeGreaterThan(0);
    expect(named.map((p) => p.querySelector('.bytes')!.textContent)).toContain(formatBytes(120));
    // Sized by output bytes, the part without bytes at the peak shows too.
    const picker = document.querySelector<HTMLSelectElement>('[data-testid=size-picker]')!;
    picker.value = 'output_bytes';
    picker.dispatchEvent(new Event('change'));
    const shown = [...tileFor(`${EVIL}/a`)!.querySelectorAll<HTMLElement>('[data-testid=treemap-subtile]')];
    expect(shown.filter((p) => p.dataset.scope).map((p) => p.dataset.scope)).toContain(`${EVIL}/a/c`);
  });

  it('names in its legend every op type a tile or a part inside one is coloured by', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    view.setData(withInside);
    const picker = document.querySelector<HTMLSelectElement>('[data-testid=color-picker]')!;
    picker.value = 'op_type';
    picker.dispatchEvent(new Event('change'));
    const legend = [...view.element.querySelectorAll('.legend > span')].map((s) => s.textContent);
    expect(legend).toEqual(expect.arrayContaining(['MatMul', 'Relu']));  // the parts' inside the big tile
    expect(legend[0]).toBe('Conv2D');  // the tiles' own first, the largest's first (review AK)
    const tiles = [...view.element.querySelectorAll<HTMLElement>('.treemap-area > .tile')].map((t) => t.dataset.scope);
    expect(legend.length).toBeGreaterThanOrEqual(new Set(withInside.children.filter((c) => tiles.includes(c.scope)).map((c) => c.top_op_type)).size);
  });

  it('selects a named part on a click, opens the tile with it selected on a double click; the hatched rest is the tile’s', () => {
    const selection = new Selection();
    const view = new TreemapView(selection);
    mount(view.element);
    view.setData(withInside);
    const tile = tileFor(`${EVIL}/a`)!;
    const rest = tile.querySelector<HTMLElement>('[data-testid=treemap-subtile].rest')!;
    rest.click();
    expect(selection.get()).toMatchObject({ focus: '', selected: `${EVIL}/a` });
    const part = [...tile.querySelectorAll<HTMLElement>('[data-testid=treemap-subtile]')].find((p) => p.dataset.scope === `${EVIL}/a/b`)!;
    expect(part.title).toContain('click to select it');
    part.click();
    expect(selection.get()).toMatchObject({ focus: '', selected: `${EVIL}/a/b` });
    expect(part.classList.contains('selected')).toBe(true);
    part.dispatchEvent(new MouseEvent('dblclick', { bubbles: true }));
    expect(selection.get()).toMatchObject({ focus: `${EVIL}/a`, selected: `${EVIL}/a/b` });
    // The tile itself still opens on a double click.
    selection.set({ focus: '', selected: null });
    view.setData(withInside);
    tileFor(`${EVIL}/a`)!.dispatchEvent(new MouseEvent('dblclick', { bubbles: true }));
    expect(selection.get().focus).toBe(`${EVIL}/a`);
  });

  it('draws nothing inside a tile without a list, or too small for one', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    const tiny: ScopesResponse = {
      ...withInside,
      children: [{ ...withInside.children[0]!, figures: figures(1) }, { ...level.children[1]!, figures: figures(5000) }],
    };
    view.setData(tiny);
    expect(document.querySelectorAll('[data-testid=treemap-subtile]').length).toBe(0);
    view.setData(level);
    expect(document.querySelectorAll('[data-testid=treemap-subtile]').length).toBe(0);
  });
});

describe('TreemapView size', () => {
  it('sizes tiles by allocated bytes for a step without a curve, until one with a curve comes back', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    view.setHasCurve(false);
    expect(view.sizeFigure).toBe('allocated_bytes');
    view.setHasCurve(true);
    expect(view.sizeFigure).toBe('at_peak_bytes');
  });
  it('keeps a size the user picked', () => {
    const view = new TreemapView(new Selection());
    mount(view.element);
    const picker = document.querySelector<HTMLSelectElement>('[data-testid=size-picker]')!;
    picker.value = 'output_bytes';
    picker.dispatchEvent(new Event('change'));
    view.setHasCurve(false);
    expect(view.sizeFigure).toBe('output_bytes');
    view.setHasCurve(true);
    expect(view.sizeFigure).toBe('output_bytes');
  });
});

describe('DetailsView', () => {
  const details: ScopeDetails = {
    scope: `${EVIL}/a`,
    name: 'a',
    kind: 'scope',
    figures: figures(91226112),
    share_of_peak: 0.5,
    peak_rise_bytes: 182452224,
    categories: [{ name: 'activations', at_peak_bytes: 91226112 }],
    op_types: [{ name: 'Conv2D', count: 2, figures: figures(91226112) }],
    exec_count: 3,
    time_span: { start_us: 10, end_us: 20 },
    nodes: [
      { raw_name: `${EVIL}/small`, graph_name: 'g', scope: 's', op_type: 'Relu', kernel: null, xla_program: null, kind: 'op', category: 'activations', start_us: 1, end_us: 2, figures: figures(5) },
      { raw_name: 'big', graph_name: 'g', scope: 's', op_type: 'Conv2D', kernel: null, xla_program: null, kind: 'op', category: 'activations', start_us: 1, end_us: 2, figures: figures(500) },
    ],
  };

  it('shows exact bytes in data-bytes and formatted bytes as text', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    view.setData(details);
    const atPeak = document.querySelector<HTMLElement>('[data-testid=details-at-peak-bytes]')!;
    expect(atPeak.dataset.bytes).toBe('91226112');
    expect(atPeak.textContent).toBe('87.0 MiB');
    expect(document.querySelector<HTMLElement>('[data-testid=details-output-bytes]')!.dataset.bytes).toBe('91226113');
    expect(document.querySelector<HTMLElement>('[data-testid=details-allocated-bytes]')!.dataset.bytes).toBe('182452224');
    expect(document.querySelector('[data-testid=details-scope]')!.textContent).toBe(`${EVIL}/a`);
    expect(document.querySelectorAll('img').length).toBe(0);
  });

  it('says why a scope holds more than the peak rise, only where it does', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    view.setData(details);
    expect(view.element.textContent).not.toContain('more than all of it');
    view.setData({ ...details, scope: 'b', share_of_peak: 1.001 });
    expect(view.element.textContent).toContain('100.1% of the peak rise (174 MiB), more than all of it: others freed bytes held before the step');
  });

  it('says what a negative category is, only where there is one', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    view.setData(details);
    expect(document.querySelector('[data-testid=details-negative-note]')).toBeNull();
    view.setData({ ...details, scope: 'b', categories: [...details.categories, { name: 'other', at_peak_bytes: -45363 }] });
    expect(document.querySelector('[data-testid=details-negative-note]')!.textContent).toContain('in use before the step that it freed');
  });

  it('draws a preview at once, then fills in the tables without redrawing the head', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    const child = level.children[0]!;
    const preview = previewOfChild(child, level.peak_rise_bytes);
    view.setData(preview);
    const head = document.querySelector<HTMLElement>('[data-testid=details-scope]')!;
    expect(head.dataset.scope).toBe(child.scope);
    expect(document.querySelector<HTMLElement>('[data-testid=details-at-peak-bytes]')!.dataset.bytes).toBe(String(child.figures.at_peak_bytes));
    expect(document.querySelector('[data-testid=details-tables-loading]')).not.toBeNull();
    expect(document.querySelector('[data-testid=node-table]')).toBeNull();
    view.setData({ ...details, scope: child.scope, figures: child.figures });
    expect(document.querySelector('[data-testid=details-scope]')).toBe(head);
    expect(document.querySelector('[data-testid=details-tables-loading]')).toBeNull();
    expect(document.querySelector('[data-testid=node-table]')).not.toBeNull();
    expect(document.body.textContent).toContain('10 µs – 20 µs');
    // When its ops ran, said so: not how long what they made is held (trial V: a span ending before the peak).
    expect(document.body.textContent).toContain('while its ops ran');
    expect(document.body.textContent).toContain('what they made may be held after');
    // Another scope's full details redraw everything.
    view.setData(details);
    expect(document.querySelector('[data-testid=details-scope]')).not.toBe(head);
    expect(document.querySelectorAll('[data-testid=details-scope]').length).toBe(1);
  });

  it('leaves out at-peak figures for a trace without a curve, and brings them back', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    view.setData(details);
    view.setHasCurve(false);
    const text = view.element.textContent!;
    expect(document.querySelector('[data-testid=details-at-peak-bytes]')).toBeNull();
    expect(document.querySelector('[data-testid=details-allocated-bytes]')).not.toBeNull();
    expect(text).not.toMatch(/at peak|peak rise/);
    view.setHasCurve(true);
    expect(document.querySelector('[data-testid=details-at-peak-bytes]')).not.toBeNull();
  });

  it('sorts the node table by a clicked column', () => {
    const view = new DetailsView(new Selection());
    mount(view.element);
    view.setData(details);
    const firstName = () => document.querySelector('[data-testid=node-table] tbody tr td')!.textContent;
    expect(firstName()).toBe('big');
    const header = document.querySelector<HTMLButtonElement>('[data-testid=node-table] th button[data-sort-key=at_peak_bytes]')!;
    header.click();
    expect(firstName()).toBe(`${EVIL}/small`);
  });
});

describe('GraphView', () => {
  const graph: GraphResponse = {
    scope: '',
    source: 'run_graph',
    nodes: [
      { id: 'm', name: EVIL, kind: 'scope', op_type: null, node_count: 3, at_peak_bytes: 10, allocated_bytes: 1, output_bytes: 1 },
      { id: 'loss', name: 'loss', kind: 'node', op_type: 'Mean', node_count: 1, at_peak_bytes: 1, allocated_bytes: 1, output_bytes: 1 },
    ],
    edges: [{ source: 'm', target: 'loss', count: 2 }],
    omitted_nodes: 0,
    graphs_dashboard_run: 'run <b>1</b>',
  };

  it('says its boxes are name scopes where the treemap groups by layer', () => {
    const selection = new Selection({ run: 'r' });
    const view = new GraphView(selection, () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData(graph);
    expect(view.element.textContent).toContain('boxes are the graph’s name scopes (the treemap folds gradients and updates into layers)');
    selection.set({ group: 'scope' });
    view.setData(graph);
    expect(view.element.textContent).not.toContain('treemap folds');
  });

  it('promises edges from the run’s graph only where it draws some', () => {
    // Trial V: a Keras profile's boxes in a grid under "edges from the run's graph", and no edge.
    const view = new GraphView(new Selection({ run: 'r', group: 'scope' }), () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData(graph);
    expect(view.element.textContent).toContain('edges from the run’s graph');
    view.setData({ ...graph, edges: [] });
    expect(view.element.textContent).not.toContain('edges from the run’s graph');
    expect(view.element.textContent).toContain('the run’s graph joins none of these boxes: no edges');
  });

  it('is one Tab stop, the selected box or the first, with arrows moving between boxes', () => {
    const selection = new Selection({ run: 'r' });
    const view = new GraphView(selection, () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData(graph);
    const stops = () => [...document.querySelectorAll<SVGGElement>('[data-testid=graph-node][tabindex="0"]')].map((b) => b.dataset.id);
    expect(stops()).toEqual(['m']);
    const first = document.querySelector<SVGGElement>('[data-testid=graph-node][data-id=m]')!;
    // Each box is named for a screen reader by its name and figures (trial AF: the boxes had none).
    // (The box's name is the fixture's markup, kept as text.)
    expect(first.getAttribute('aria-label')).toBe(`${EVIL}: at peak 10 B · allocated 1 B · output 1 B`);
    expect(first.querySelector('img')).toBeNull();
    first.focus();
    first.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
    expect(stops()).toEqual(['loss']);
    expect((document.activeElement as SVGGElement | null)?.dataset.id).toBe('loss');
    selection.select('m');
    expect(stops()).toEqual(['m']);
  });

  it('shows a box the grouping by layer does not hold grouped by name scope, on click and double click', () => {
    const withTape: GraphResponse = {
      ...graph,
      nodes: [
        { ...graph.nodes[0]!, in_group: true },
        { id: 'gradient_tape', name: 'gradient_tape', kind: 'scope', op_type: null, node_count: 9, at_peak_bytes: 20, allocated_bytes: 2, output_bytes: 2, in_group: false },
      ],
    };
    const selection = new Selection({ run: 'r', group: 'layer', focus: '' });
    const view = new GraphView(selection, () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData(withTape);
    const tape = document.querySelector<SVGGElement>('[data-testid=graph-node][data-id=gradient_tape]')!;
    expect(tape.querySelector('title')!.textContent).toContain('a click shows it grouped by name scope');
    tape.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    expect(selection.get()).toMatchObject({ group: 'scope', focus: '', selected: 'gradient_tape' });
    // The change of grouping is said with the graph drawn for it (trial AM: it had changed unsaid), until the
    // grouping is by layer again.
    view.setData(withTape);
    const note = () => view.element.querySelector('.graph-note')!.textContent!;
    expect(note()).toContain('grouped by name scope to show gradient_tape, whose ops the grouping by layer folds into their layers');
    view.setData(graph);  // another step's graph, without that box: nothing said of it
    expect(note()).not.toContain('to show gradient_tape');
    tape.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    view.setData(withTape);
    selection.set({ group: 'layer' });
    view.setData(withTape);
    expect(note()).not.toContain('to show gradient_tape');
    selection.set({ group: 'scope' });
    view.setData(withTape);
    expect(note()).not.toContain('to show gradient_tape');  // chosen by the user: nothing to explain
    selection.set({ group: 'layer' });
    view.setData(withTape);
    document.querySelector('[data-testid=graph-node][data-id=gradient_tape]')!.dispatchEvent(new MouseEvent('dblclick', { bubbles: true }));
    expect(selection.get()).toMatchObject({ group: 'scope', focus: 'gradient_tape', selected: 'gradient_tape' });
    // A box the grouping holds is selected in it.
    selection.set({ group: 'layer' });
    view.setData(withTape);
    document.querySelector('[data-testid=graph-node][data-id=m]')!.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    expect(selection.get()).toMatchObject({ group: 'layer', selected: 'm' });
  });

  it('draws boxes with ids, selects on click, drills on double click and links to the Graphs dashboard', () => {
    const selection = new Selection({ run: 'run <b>1</b>' });
    const view = new GraphView(selection, () => '/tb/data/plugin_entry.html');
    mount(view.element);
    view.setData(graph);
    const boxes = [...document.querySelectorAll<SVGGElement>('[data-testid=graph-node]')];
    expect(boxes.map((b) => b.getAttribute('data-id'))).toEqual(['m', 'loss']);
    expect(document.querySelectorAll('img').length).toBe(0);
    boxes[1]!.dispatchEvent(new MouseEvent('click', { bubbles: true }));
    expect(selection.get().selected).toBe('loss');
    expect(boxes[1]!.classList.contains('selected')).toBe(true);
    boxes[0]!.dispatchEvent(new MouseEvent('dblclick', { bubbles: true }));
    expect(selection.get().focus).toBe('m');
    const link = document.querySelector<HTMLAnchorElement>('[data-testid=graphs-dashboard-link]')!;
    expect(link.getAttribute('href')).toBe('/tb/#graphs&run=run%20%3Cb%3E1%3C%2Fb%3E');
    expect(link.getAttribute('target')).toBe('_top');
    // The run it is for, as text: TensorBoard 2.21's dashboard may open on its first run instead.
    expect(link.textContent).toBe('Graphs dashboard (run run <b>1</b>)');
    expect(link.title).toContain('pick run <b>1</b> in its Run menu');
    // A long run name shrinks with an ellipsis in the one-row toolbar (the title keeps it whole).
    expect(link.classList.contains('shrink') && link.parentElement!.classList.contains('one-row')).toBe(true);
  });

  it('restyles on selection without re-laying out', () => {
    const selection = new Selection();
    const view = new GraphView(selection, () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData(graph);
    const before = document.querySelector('[data-testid=graph-node][data-id=loss]')!;
    const transform = before.getAttribute('transform');
    selection.select('loss');
    const after = document.querySelector('[data-testid=graph-node][data-id=loss]')!;
    expect(after).toBe(before);
    expect(after.getAttribute('transform')).toBe(transform);
  });
});

describe('SummaryView', () => {
  const device: DeviceSummary = {
    id: 'CPU:0/mklcpu',
    device: '/device:CPU:0',
    device_type: 'CPU',
    allocator: 'mklcpu',
    baseline: 'allocator_bytes_in_use',
    start_bytes: 1024,
    peak_bytes: 4 * 1048576,
    peak_rise_bytes: 4 * 1048576 - 1024,
    peak_time_us: 1500,
    peak_node: { name: 'grad/Conv2DBackpropInput', scope: 'grad', op_type: 'Conv2DBackpropInput' },
    largest_at_peak: { name: `${EVIL}/act`, scope: EVIL, op_type: 'Relu', graph_name: `${EVIL}/act`, at_peak_bytes: 3 * 1048576, executions: 1 },
    end_bytes: 2048,
    exec_count: 10,
    event_count: 20,
    figures: figures(4 * 1048576 - 1024),
    snapshots: { count: 0, max_abs_diff_bytes: null },
    categories: [{ name: 'activations', at_peak_bytes: 4 * 1048576 - 1024 }],
    op_types: [{ name: 'Relu', count: 1, figures: figures(4 * 1048576 - 1024) }],
    top_scopes: [],
  };
  const summary: SummaryResponse = {
    run: 'r', tag: 't', step: 1, status: 'ok', message: null, duration_us: 3000, default_device: device.id, devices: [device],
  };

  it('says what the (unknown) op type is under the step\'s op types, as text, where the step has it', () => {
    const view = new StepOpTypesView(new Selection());
    mount(view.element);
    const note = () => view.element.querySelector<HTMLElement>('[data-testid=op-types-note]')!;
    view.setDevice({ ...device, op_types_note: `(unknown): ops whose type the trace does not give ${EVIL}` });
    expect(note().classList.contains('hidden')).toBe(false);
    expect(note().textContent).toBe(`(unknown): ops whose type the trace does not give ${EVIL}`);
    expect(document.querySelectorAll('img').length).toBe(0);
    view.setDevice(device);  // none (an older server's answer, or no unknown op)
    expect(note().classList.contains('hidden')).toBe(true);
  });

  it('names the biggest holder at the peak as text, its scope in the title, and selects the scope on click', () => {
    const selection = new Selection();
    const view = new SummaryView(selection);
    mount(view.element);
    view.setData(summary, device);
    expect(document.querySelectorAll('img').length).toBe(0);
    const item = document.querySelector<HTMLElement>('[data-testid=summary-largest]')!;
    expect(item.textContent).toBe(`biggest at peak: ${EVIL}/act (Relu) 3.00 MiB`);
    expect(item.querySelector('code')!.textContent).toBe(`${EVIL}/act`);
    expect(item.title).toContain(`scope: ${EVIL}`);
    expect(item.dataset.bytes).toBe(String(3 * 1048576));
    // The op at the peak stays beside it.
    expect(view.element.textContent).toContain('op at peak: grad/Conv2DBackpropInput');
    item.click();
    expect(selection.get().selected).toBe(EVIL);
    selection.select(null);
    item.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter' }));
    expect(selection.get().selected).toBe(EVIL);
  });

  it('names the tile of a node whose raw name holds a runtime call, in its title', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const raw = 'router/indexed_case/branch1/_1/Tile';
    view.setData(summary, { ...device, largest_at_peak: { ...device.largest_at_peak!, name: raw, graph_name: raw, path: 'router/indexed_case/Tile' } });
    const item = document.querySelector<HTMLElement>('[data-testid=summary-largest]')!;
    expect(item.querySelector('code')!.textContent).toBe(raw); // the raw name stays visible
    expect(item.title).toContain('in the treemap: router/indexed_case/Tile');
    view.setData(summary, { ...device, largest_at_peak: { ...device.largest_at_peak!, path: device.largest_at_peak!.name } });
    expect(document.querySelector<HTMLElement>('[data-testid=summary-largest]')!.title).not.toContain('in the treemap');
  });

  it('leaves out an op type the name already ends with, keeping it in the title', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData(summary, device);
    const op = [...document.querySelectorAll<HTMLElement>('.summary-name-item')].find((e) => e.textContent!.startsWith('op at peak'))!;
    expect(op.textContent).toBe('op at peak: grad/Conv2DBackpropInput');
    expect(op.title).toContain('(Conv2DBackpropInput)');
  });

  it('shortens long names from their start, keeping the layer and the op’s own name; the full name in a focusable title', () => {
    const view = new SummaryView(null);
    mount(view.element);
    const opName = 'gradients/shared_model/unet_11/Conv2D_grad/Conv2DBackpropInput';
    const bigName = 'gradient_tape/small_unet/dec_1/convolution/Conv2DBackpropFilter';
    view.setData(summary, {
      ...device,
      peak_node: { name: opName, scope: 'shared_model/unet_11/Conv2D_grad', op_type: 'Conv2DBackpropInput' },
      largest_at_peak: { name: bigName, scope: 'small_unet/dec_1/convolution', op_type: 'Conv2DBackpropFilter', graph_name: bigName, at_peak_bytes: 1048576, executions: 1 },
    });
    const op = document.querySelector<HTMLElement>('[data-testid=summary-op]')!;
    expect(op.querySelector('code')!.textContent).toBe('…/unet_11/Conv2D_grad/Conv2DBackpropInput');
    expect(op.querySelector('.name-tail')!.textContent).toBe('Conv2DBackpropInput');
    expect(op.title).toContain(`op at peak: ${opName}`);
    expect(op.getAttribute('tabindex')).toBe('0');
    const big = document.querySelector<HTMLElement>('[data-testid=summary-largest]')!;
    expect(big.querySelector('code')!.textContent).toMatch(/^…\/.*dec_1\/convolution\/Conv2DBackpropFilter$/);
    expect(big.querySelector('code')!.textContent!.length).toBeLessThanOrEqual(SUMMARY_NAME_CHARS);
    expect(big.title).toContain(bigName);
    // Not clickable without a selection, but still a Tab stop for its title.
    expect(big.getAttribute('tabindex')).toBe('0');
    expect(big.getAttribute('role')).toBeNull();
  });

  it('marks a start that counts only the allocator’s larger requests, and says why in its title', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData(summary, device);
    expect(document.querySelector('[data-testid=summary-start-partial]')).toBeNull();
    view.setData(summary, { ...device, allocator: 'mklcpu', start_counts_from_bytes: 256 * 1024 });
    const start = document.querySelector<HTMLElement>('[data-testid=summary-start-partial]')!;
    expect(start.textContent).toMatch(/^start [^*]+\* → rise/);
    expect(start.title).toContain('mklcpu counts only its requests of 256 KiB and more');
    // No run graph: the smaller tensors are not known, and nothing is added.
    expect(document.querySelector('[data-testid=summary-peak-with-small]')).toBeNull();
  });

  /** A run graph's resident figures on mklcpu, whose start counts its requests of 256 KiB and more. */
  const smallTensors = (params: number, uncounted: number, withThem: number, noticeable: boolean) => ({
    ...device, allocator: 'mklcpu', start_counts_from_bytes: 256 * 1024,
    resident: {
      source: 'run_graph' as const, start_bytes: 0, param_count: params / 4, param_bytes: params, slot_bytes: 0,
      fed_bytes: 0, other_bytes: 0, other_note: null, weight_constants: false, note: null, layers: [],
      uncounted_bytes: uncounted, peak_with_uncounted_bytes: withThem, uncounted_noticeable: noticeable,
    },
  });

  it('gives the peak with the model’s smaller tensors beside a start that leaves them out', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const partial = smallTensors(2867852, 8996772, 28313700, true);
    view.setData(summary, partial);
    const withSmall = document.querySelector<HTMLElement>('[data-testid=summary-peak-with-small]')!;
    expect(withSmall.textContent).toBe(`with smaller tensors ${formatBytes(28313700)}`);
    expect(withSmall.dataset.bytes).toBe('28313700');
    expect(withSmall.title).toContain('mklcpu counts them in no reading');
    // Shown as a rise, the peak has nothing to add them to.
    document.querySelector<HTMLButtonElement>('[data-testid=summary-peak-mode]')!.click();
    expect(document.querySelector('[data-testid=summary-peak-with-small]')).toBeNull();
  });

  it('leaves the peak with smaller tensors out where they barely move it', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData(summary, smallTensors(32768, 32768, 272662528, false));
    expect(document.querySelector('[data-testid=summary-start-partial]')).not.toBeNull();
    expect(document.querySelector('[data-testid=summary-peak-with-small]')).toBeNull();
  });

  it('shows no holder when there is none (a curve that never rises)', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData(summary, { ...device, largest_at_peak: null });
    expect(document.querySelector('[data-testid=summary-largest]')).toBeNull();
  });

  it('says once that a trace without allocation records has no curve, and shows allocated and output bytes', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const old = {
      ...device, has_curve: false, baseline: 'none' as const, start_bytes: null, peak_bytes: null, peak_rise_bytes: null,
      peak_time_us: null, peak_node: null, largest_at_peak: null, end_bytes: null, event_count: 0,
      figures: { ...figures(0), allocated_bytes: 5 * 1048576, output_bytes: 2 * 1048576 },
    };
    view.setData(summary, old);
    const text = view.element.textContent!;
    expect(text.match(/curve/gi)).toHaveLength(1);
    expect(text).not.toMatch(/peak 0 B|Peak|0 B|allocation events|At peak/);
    expect(document.querySelector<HTMLElement>('[data-testid=summary-allocated]')!.textContent).toBe('allocated 5.00 MiB');
    expect(document.querySelector<HTMLElement>('[data-testid=summary-output]')!.dataset.bytes).toBe(String(2 * 1048576));
    expect(document.querySelector('[data-testid=identity]')).toBeNull();
  });

  it('gives the allocator_gap finding’s figure for the readings, not their raw disagreement, and nothing where it flags none', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData(summary, { ...device, snapshots: { count: 40, max_abs_diff_bytes: 2 * 1048576, readings_gap_bytes: 1048576 } });
    expect(view.element.textContent).toContain('allocator readings differ from the records by up to 1.00 MiB');
    expect(view.element.textContent).not.toContain('2.00 MiB');
    // First of the notes, which a narrow line cuts from the end.
    expect(view.element.querySelector('.summary-line.secondary .note')!.textContent).toMatch(/^allocator readings differ/);
    view.setData(summary, { ...device, snapshots: { count: 40, max_abs_diff_bytes: 2 * 1048576, readings_gap_bytes: null } });
    expect(view.element.textContent).not.toContain('allocator readings differ');
  });

  it('says beside the peak how much lower it may be, where the readings bound it', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const snapshots = { count: 40, max_abs_diff_bytes: 2 * 1048576, readings_gap_bytes: 1048576 };
    view.setData(summary, { ...device, snapshots: { ...snapshots, peak_too_high_bytes: 31 * 1048576 } });
    const note = document.querySelector('[data-testid=summary-peak-too-high]')!;
    expect(note.textContent).toBe('may be up to 31.0 MiB lower');
    // Right after the peak, before the button that switches it.
    const toggle = document.querySelector('[data-testid=summary-peak-mode]');
    if (toggle) expect(note.compareDocumentPosition(toggle) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    view.setData(summary, { ...device, snapshots: { ...snapshots, peak_too_high_bytes: 0 } });
    expect(document.querySelector('[data-testid=summary-peak-too-high]')).toBeNull();
  });

  it('says why an allocator gives no baseline, as the route words it', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const relative = { ...device, baseline: 'none' as const, start_bytes: null, peak_bytes: null, end_bytes: null };
    const shared = 'mklcpu is shared with CPU:1/mklcpu';
    view.setData(summary, { ...relative, allocator: 'mklcpu', shared_with: ['CPU:1/mklcpu'], no_baseline_reason: shared });
    expect(document.querySelector('[data-testid=summary-no-baseline]')!.textContent).toBe(
      'no allocator baseline (mklcpu is shared with CPU:1/mklcpu): relative to the step’s start',
    );
    const none = 'mklcpu reported no bytes in use in this step: it reads them only on requests of 256.0 KiB or more, and this step made none';
    view.setData(summary, { ...relative, no_baseline_reason: none });
    expect(document.querySelector('[data-testid=summary-no-baseline]')!.textContent).toBe(
      `no allocator baseline (${none}): relative to the step’s start`,
    );
    view.setData(summary, { ...relative, shared_with: [] });
    expect(document.querySelector('[data-testid=summary-no-baseline]')!.textContent).toBe('no allocator baseline: relative to the step’s start');
  });

  it('labels pinned host memory as host memory, from memory_kind or the allocator', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const host = { ...device, id: 'GPU:0/cuda_host_bfc', device_type: 'GPU', allocator: 'cuda_host_bfc' };
    view.setData(summary, host);
    expect(document.querySelector('[data-testid=summary-memory]')!.textContent).toBe('host memory');
    expect(deviceLabel(host)).toMatch(/^GPU:0\/cuda_host_bfc \(host memory\) — peak /);
    view.setData(summary, { ...device, id: 'GPU:0/GPU_0_bfc', device_type: 'GPU', allocator: 'GPU_0_bfc' });
    expect(document.querySelector('[data-testid=summary-memory]')).toBeNull();
    view.setData(summary, { ...device, id: 'GPU:0/x', device_type: 'GPU', allocator: 'x', memory_kind: 'host' });
    expect(document.querySelector('[data-testid=summary-memory]')).not.toBeNull();
    // A CPU's memory is host memory by nature: no label.
    view.setData(summary, { ...device, memory_kind: 'host' });
    expect(document.querySelector('[data-testid=summary-memory]')).toBeNull();
    expect(deviceLabel({ ...device, memory_kind: 'host' })).not.toContain('host memory');
  });

  it('shows a profiled step’s limit and says it is a profiled step', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    view.setData({ ...summary, source: 'xplane' }, { ...device, capacity_bytes: 16 * 1048576 });
    const capacity = document.querySelector<HTMLElement>('[data-testid=summary-capacity]')!;
    expect(capacity.dataset.bytes).toBe(String(16 * 1048576));
    expect(capacity.textContent).toBe('limit 16.0 MiB (peak 25.0%)');
    expect(capacity.closest('.summary-line')!.classList.contains('secondary')).toBe(false);
    expect(document.querySelector('[data-testid=summary-source]')!.textContent).toBe('profiled step (XPlane)');
    // A CPU allocator's limit is a cap it was given, not the machine's memory.
    view.setData({ ...summary, source: 'xplane' }, { ...device, capacity_bytes: 16 * 1048576, memory_kind: 'host' });
    const cap = document.querySelector('[data-testid=summary-capacity]')!;
    expect(cap.textContent).toBe('allocator cap 16.0 MiB (peak 25.0%)');
    // ... on the second line, which leaves the first to the peak and the names of what holds it.
    expect(cap.closest('.summary-line')!.classList.contains('secondary')).toBe(true);
    view.setData(summary, device);
    expect(document.querySelector('[data-testid=summary-capacity]')).toBeNull();
    expect(document.querySelector('[data-testid=summary-source]')).toBeNull();
  });

  it('says what the trace misses, in full on a line of its own, and nothing when it misses nothing', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const text = '/device:GPU:0 ran work in this profile, but none of its allocations are in it: only the BFC allocator records them.';
    view.setData({ ...summary, source: 'xplane', message: text }, device);
    const note = document.querySelector<HTMLElement>('[data-testid=summary-note]')!;
    expect(note.textContent).toBe(text);
    expect(note.closest('.summary-line')).toBeNull();  // not cut to the one row of the figures' lines
    view.setData({ ...summary, message: null }, device);
    expect(document.querySelector('[data-testid=summary-note]')).toBeNull();
    // A step without a curve says so itself (its message is about that): no second note.
    view.setData({ ...summary, message: 'no allocation records' }, { ...device, has_curve: false });
    expect(document.querySelector('[data-testid=summary-note]')).toBeNull();
  });

  it('says why the page opened on this step', () => {
    const view = new SummaryView(new Selection());
    mount(view.element);
    const opening: DefaultStepResponse = {
      run: 'r', tag: 't', device: device.id, reason: 'largest_peak', peak_bytes: device.peak_bytes, absolute: true,
      compared_steps: 5, run_count: 5,
    };
    view.setData(summary, device, opening);
    const reason = document.querySelector<HTMLElement>('[data-testid=summary-reason]')!;
    expect(reason.textContent).toBe('opened here: largest peak of 5 runs');
    expect(reason.title).toContain('largest peak (4.00 MiB on CPU:0/mklcpu)');
    expect(reason.closest('.summary-line')!.classList.contains('secondary')).toBe(true);
    expect(openingText({ ...opening, compared_steps: 32, run_count: 200 })).toBe(
      'opened here: largest peak of the 32 latest of 200 runs',
    );
    view.setData(summary, device);
    expect(document.querySelector('[data-testid=summary-reason]')).toBeNull();
  });

  it('makes the curve follow its “show rise”: values less the start, the peak its rise, no limit, said in the caption', () => {
    const profiled: CurveResponse = {
      window: null, baseline: 'allocator_bytes_in_use', start_bytes: 10, absolute: true,
      peak: { time_us: 50, bytes: 100, rise_bytes: 90, node: null }, duration_us: 100,
      t_us: [0, 50, 100], min_bytes: [10, 10, 20], max_bytes: [10, 100, 20], node_at: [0, 0, 0], node_names: ['a'],
      snapshots: { t_us: [0, 50, 100], bytes: [10, 100, 20] }, capacity_bytes: 150,
      series: [{ scope: null, name: '(other)', bytes: [0, 90, 10] }],
    };
    const selection = new Selection();
    const view = new CurveView(selection);
    const summaryView = new SummaryView(selection);
    mount(el('div', {}, summaryView.element, view.element));
    view.setCurve(profiled);
    const peak = () => document.querySelector('[data-testid=curve-peak] text')!.textContent!;
    expect(peak()).toContain('peak 100 B');
    expect(document.querySelector('[data-testid=curve-capacity]')).not.toBeNull();
    summaryView.setData(summary, device);
    document.querySelector<HTMLButtonElement>('[data-testid=summary-peak-mode]')!.click();
    expect(selection.get().peakMode).toBe('rise');
    expect(peak()).toContain('peak +90 B over step start');
    expect(document.querySelector('[data-testid=curve-capacity]')).toBeNull();
    expect(view.element.querySelector('.panel-toolbar .muted.shrink')!.textContent).toContain('the rise over the step’s start (10 B in use before it');
    selection.set({ peakMode: 'absolute' });
    expect(peak()).toContain('peak 100 B');
  });
});

describe('CurveView allocator readings', () => {
  const profiled: CurveResponse = {
    window: null, baseline: 'allocator_bytes_in_use', start_bytes: 10, absolute: true,
    peak: { time_us: 50, bytes: 100, rise_bytes: 90, node: null }, duration_us: 100,
    t_us: [0, 50, 100], min_bytes: [10, 10, 20], max_bytes: [10, 100, 20], node_at: [0, 0, 0], node_names: ['a'],
    snapshots: { t_us: [0, 50, 100], bytes: [10, 100, 20], series: { reserved_bytes: [0, 8, 8], fragmentation: [0.5, 0.25, 0.125] } },
    capacity_bytes: 150,
    series: [{ scope: null, name: '(other)', bytes: [0, 90, 10] }],
  };

  it('draws a near limit as a line, a far one as a label, and the reserved bytes as a thin line', () => {
    const view = new CurveView(new Selection());
    mount(view.element);
    view.setCurve(profiled);
    const capacity = document.querySelector<SVGGElement>('[data-testid=curve-capacity]')!;
    expect(capacity.dataset.placement).toBe('line');
    expect(capacity.dataset.bytes).toBe('150');
    expect(capacity.querySelector('line')).not.toBeNull();
    expect(document.querySelector('[data-testid=curve-reserved]')).not.toBeNull();
    view.setCurve({ ...profiled, capacity_bytes: 1e12, snapshots: { ...profiled.snapshots, series: { reserved_bytes: [0, 0, 0] } } });
    const far = document.querySelector<SVGGElement>('[data-testid=curve-capacity]')!;
    expect(far.dataset.placement).toBe('above');
    expect(far.querySelector('line')).toBeNull();
    expect(far.textContent).toContain('above the plot');
    expect(far.textContent).toContain('limit ');
    expect(document.querySelector('[data-testid=curve-reserved]')).toBeNull();
    // A CPU allocator's capacity is a cap it was given: said so.
    view.setCurve({ ...profiled, capacity_bytes: 1e12, memory_kind: 'host' });
    expect(document.querySelector('[data-testid=curve-capacity]')!.textContent).toContain('allocator cap ');
    // ... and muted: a cap the step is nowhere near is no warning (a device's limit keeps the peak's colour).
    expect(document.querySelector('[data-testid=curve-capacity]')!.classList.contains('host')).toBe(true);
    expect(far.classList.contains('host')).toBe(false);
    view.setCurve({ ...profiled, capacity_bytes: null });
    expect(document.querySelector('[data-testid=curve-capacity]')).toBeNull();
  });

  it('says in the caption when the readings count only the allocator’s larger requests (mklcpu)', () => {
    const view = new CurveView(new Selection());
    mount(view.element);
    view.setCurve(profiled);
    const caption = () => view.element.querySelector('.panel-toolbar .muted.shrink')!.textContent!;
    expect(caption()).toContain('dotted: the allocator’s own bytes-in-use snapshots');
    expect(caption()).not.toContain('which count only');
    view.setCurve({ ...profiled, snapshots: { ...profiled.snapshots, counts_from_bytes: 256 * 1024 } });
    expect(caption()).toContain('snapshots (which count only its requests of 256 KiB and more)');
  });

  it('draws no readings beside a curve relative to a start the allocator gave no baseline for', () => {
    // Trial V: absolute readings of 137-166 MiB ran off the top of a curve rising to +98 MiB.
    const view = new CurveView(new Selection());
    mount(view.element);
    view.setCurve({ ...profiled, baseline: 'none', start_bytes: null, absolute: false });
    const caption = view.element.querySelector('.panel-toolbar .muted.shrink')!.textContent!;
    expect(view.element.querySelector('path.snapshots')).toBeNull();
    expect(document.querySelector('[data-testid=curve-reserved]')).toBeNull();
    expect(caption).not.toContain('dotted');
    expect(caption).toContain('the allocator’s own snapshots are not drawn: without a baseline they are not on this scale');
    view.setCurve(profiled);
    expect(view.element.querySelector('path.snapshots')).not.toBeNull();
  });
});

describe('ViewLinkView', () => {
  it('copies the link to this view on a plain click, and follows it on a modified one', async () => {
    const selection = new Selection({ run: EVIL, tag: 'step_1' });
    const copied: string[] = [];
    const view = new ViewLinkView(selection, 'http://tb/', 'memory', async (text) => {
      copied.push(text);
    });
    mount(view.element);
    const href = view.element.getAttribute('href')!;
    expect(href.startsWith('http://tb/#memory&p.memory.run=')).toBe(true);
    const plain = new MouseEvent('click', { bubbles: true, cancelable: true, button: 0 });
    view.element.dispatchEvent(plain);
    expect(plain.defaultPrevented).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(copied).toEqual([href]);
    expect(view.element.textContent).toBe('link copied');
    const modified = new MouseEvent('click', { bubbles: true, cancelable: true, button: 0, ctrlKey: true });
    view.element.dispatchEvent(modified);
    expect(modified.defaultPrevented).toBe(false);
    // Where the page may not write to the clipboard, a click follows the link as a plain one would.
    const noClipboard = new ViewLinkView(selection, 'http://tb/', 'memory', null);
    mount(noClipboard.element);
    const followed = new MouseEvent('click', { bubbles: true, cancelable: true, button: 0 });
    noClipboard.element.dispatchEvent(followed);
    expect(followed.defaultPrevented).toBe(false);
    expect(noClipboard.element.textContent).toBe('copy link');
  });
});

describe('CurveView from the keyboard', () => {
  it('reads the curve point by point: P to the peak, arrows along it, Home and End, Escape to hide', () => {
    const curve: CurveResponse = {
      window: null, baseline: 'none', start_bytes: null, absolute: false,
      peak: { time_us: 50, bytes: 90, rise_bytes: 90, node: null }, duration_us: 100,
      t_us: [0, 25, 50, 75, 100], min_bytes: [0, 40, 90, 30, 10], max_bytes: [0, 40, 90, 30, 10], node_at: [0, 0, 1, 1, 0],
      node_names: ['a', `${EVIL}/MatMul`], snapshots: { t_us: [], bytes: [] }, series: [],
    };
    const view = new CurveView(new Selection());
    mount(view.element);
    view.setCurve(curve);
    const svg = view.element.querySelector<SVGSVGElement>('svg.curve-svg')!;
    expect(svg.getAttribute('tabindex')).toBe('0');
    const tooltip = view.element.querySelector<HTMLElement>('.curve-tooltip')!;
    const press = (key: string, shiftKey = false) => svg.dispatchEvent(new KeyboardEvent('keydown', { key, shiftKey, bubbles: true }));
    press('p');
    expect(tooltip.classList.contains('hidden')).toBe(false);
    expect(tooltip.dataset.index).toBe('2');
    expect(tooltip.textContent).toContain('+90 B');
    expect(tooltip.querySelector('code')!.textContent).toBe(`${EVIL}/MatMul`); // a name, as text
    press('ArrowRight');
    expect(tooltip.dataset.index).toBe('3');
    press('ArrowLeft', true);
    expect(tooltip.dataset.index).toBe('0');
    press('End');
    expect(tooltip.dataset.index).toBe('4');
    press('Escape');
    expect(tooltip.classList.contains('hidden')).toBe(true);
    expect(document.querySelector('img')).toBeNull();
  });
});

describe('CurveView zoom', () => {
  const base: CurveResponse = {
    window: null, baseline: 'none', start_bytes: null, absolute: false,
    peak: { time_us: 50, bytes: 90, rise_bytes: 90, node: null }, duration_us: 100,
    t_us: [0, 50, 100], min_bytes: [0, 0, 10], max_bytes: [0, 90, 10], node_at: [0, 0, 0], node_names: ['a'],
    snapshots: { t_us: [], bytes: [] }, series: [{ scope: null, name: '(other)', bytes: [0, 90, 10] }],
  };
  const zoomed: CurveResponse = {
    ...base, window: { start_us: 40, end_us: 60 },
    t_us: [45, 50, 55], min_bytes: [0, 30, 60], max_bytes: [30, 90, 60], node_at: [0, 0, 0],
    series: [{ scope: null, name: '(other)', bytes: [30, 90, 60] }],
  };

  it('draws the window data only while the zoom lies inside its window', () => {
    const selection = new Selection();
    const view = new CurveView(selection);
    mount(view.element);
    view.setCurve(base);
    const body = document.querySelector<HTMLElement>('[data-testid=curve]')!;
    expect(body.dataset.window).toBe('');
    view.setWindowCurve(zoomed);
    expect(body.dataset.window).toBe('');
    selection.set({ timeRange: { start_us: 40, end_us: 60 } });
    expect(body.dataset.window).toBe('40,60');
    selection.set({ timeRange: { start_us: 30, end_us: 60 } });
    expect(body.dataset.window).toBe('');
    selection.set({ timeRange: null });
    expect(body.dataset.window).toBe('');
  });
});

describe('DataTable', () => {
  interface Row {
    name: string;
    a: number;
    b: number;
  }
  const rows: Row[] = [
    { name: EVIL, a: 1, b: 2 },
    { name: 'x', a: 3, b: 4 },
  ];

  it('shows the chosen columns of a narrow table, all of them on demand, and keeps names as text', () => {
    const table = new DataTable<Row>({
      columns: [
        { key: 'name', label: 'name', value: (r) => r.name },
        { key: 'a', label: 'a long label', shortLabel: 'a', value: (r) => r.a, numeric: true },
        { key: 'b', label: 'b', value: (r) => r.b, numeric: true },
      ],
      testId: 't',
      initialSort: { key: 'a', direction: 'desc' },
      fileName: () => ['t'],
      shownColumns: ['name', 'a'],
      columnToggle: true,
      compact: true,
    });
    mount(el('div', {}, table.exports, table.element));
    table.setRows(rows);
    const headers = () => [...document.querySelectorAll('[data-testid=t] th button')].map((b) => b.getAttribute('data-sort-key'));
    expect(headers()).toEqual(['name', 'a']);
    expect(document.querySelector('[data-testid=t] th button[data-sort-key=a]')!.textContent).toBe('a ▼');
    document.querySelector<HTMLButtonElement>('[data-testid=t-columns]')!.click();
    expect(headers()).toEqual(['name', 'a', 'b']);
    document.querySelector<HTMLButtonElement>('[data-testid=t-columns]')!.click();
    expect(headers()).toEqual(['name', 'a']);
    expect(document.querySelectorAll('img').length).toBe(0);
    expect(document.querySelector('[data-testid=t] tbody')!.textContent).toContain(EVIL);
  });

  it('lets a name wrap after its slashes, and a long component after its underscores, not inside a word, and copy whole', () => {
    const table = new DataTable<Row>({
      columns: [{ key: 'name', label: 'name', value: (r) => r.name }, { key: 'a', label: 'a', value: (r) => r.a, numeric: true }],
      testId: 'w',
      initialSort: { key: 'a', direction: 'desc' },
      fileName: () => ['w'],
    });
    mount(table.element);
    const name = `textclf/gru/while/gru_cell_1/embedding_lookup_grad/${EVIL}`;
    table.setRows([{ name, a: 1234567, b: 0 }]);
    const [cell, number] = [...document.querySelectorAll<HTMLElement>('[data-testid=w] tbody td')];
    expect(cell!.textContent).toBe(name); // the text is the name, whole
    // After each of its 5 slashes, and the 2 underscores of its long component (`gru_cell_1/` stays whole).
    expect(cell!.querySelectorAll('wbr').length).toBe(7);
    expect(document.querySelectorAll('img').length).toBe(0);
    expect(number!.querySelectorAll('wbr').length).toBe(0);
  });
});

describe('GraphView fit', () => {
  it('starts at a readable zoom on a long chain, with its biggest box in view', () => {
    const n = 30;
    const nodes = Array.from({ length: n }, (_v, i) => ({
      id: `m/n${i}`,
      name: `n${i}`,
      kind: 'scope' as const,
      op_type: null,
      node_count: 1,
      at_peak_bytes: i === 20 ? 1000 : 1,
      allocated_bytes: 1,
      output_bytes: 1,
    }));
    const edges = nodes.slice(1).map((node, i) => ({ source: nodes[i]!.id, target: node.id, count: 1 }));
    const view = new GraphView(new Selection(), () => '/data/plugin_entry.html');
    mount(view.element);
    view.setData({ scope: 'm', source: 'run_graph', nodes, edges, omitted_nodes: 0, graphs_dashboard_run: 'r' });
    const transform = document.querySelector('[data-testid=graph] svg > g')!.getAttribute('transform')!;
    const match = /translate\(([-\d.e]+),([-\d.e]+)\) scale\(([-\d.e]+)\)/.exec(transform);
    expect(match).not.toBeNull();
    const [tx, ty, k] = [Number(match![1]), Number(match![2]), Number(match![3])];
    expect(k).toBeGreaterThanOrEqual(MIN_FIT_SCALE - 1e-9);
    // The biggest box's translate, mapped to the view (jsdom has no layout: the view is 500 x 330).
    const big = document.querySelector('[data-testid=graph-node][data-id="m/n20"]')!.getAttribute('transform')!;
    const [bx, by] = /translate\(([-\d.]+),([-\d.]+)\)/.exec(big)!.slice(1).map(Number) as [number, number];
    expect(bx * k + tx).toBeGreaterThanOrEqual(0);
    expect(bx * k + tx).toBeLessThan(500);
    expect(by * k + ty).toBeGreaterThanOrEqual(0);
    expect(by * k + ty).toBeLessThan(330);
  });
});

describe('WhatIfView', () => {
  const answer: WhatIfResponse = {
    batch: 8, runs: [{ run: 'b2', tag: 't', step: 1, source: 'run_metadata', device: 'CPU:0/mklcpu', batch: 2, peak_rise_bytes: 200, start_bytes: null, peak_bytes: null }],
    method: 'one_step', predicted_peak_rise_bytes: 800, predicted_start_bytes: null, predicted_peak_bytes: null, max_batch: null, max_batch_searched: 16777216,
    limit_bytes: null, limit_source: null, limit_applies_to: null, layers: [],
    predictions: { fit: null, one_step: { predicted_peak_rise_bytes: 800, predicted_start_bytes: null, predicted_peak_bytes: null, max_batch: null, layers: [], from_run: 'b2', from_tag: 't', traced_batch: 2, scaled_share: 0.9 } },
    series: { batch: [1, 2, 8], one_step: { peak_rise_bytes: [100, 200, 800], peak_bytes: null }, fit: null },
  };
  const type = (view: WhatIfView, testid: string, text: string) => {
    const input = view.element.querySelector<HTMLInputElement>(`[data-testid=${testid}]`)!;
    input.value = text;
    input.dispatchEvent(new Event('input'));
    return input;
  };

  it('asks twice the traced batch where the default is not above it, until a batch is typed', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    const asked: (number | undefined)[] = [];
    view.onRequest = () => asked.push(view.request()?.batch);
    const batch = view.element.querySelector<HTMLInputElement>('[data-testid=whatif-batch]')!;
    expect(batch.value).toBe('8');
    view.setData(answer);  // traced at 2: batch 8 is larger, kept
    expect(batch.value).toBe('8');
    expect(asked).toEqual([]);
    const at16 = { ...answer, runs: [{ ...answer.runs[0]!, batch: 16 }] };
    view.setData(at16);
    expect(batch.value).toBe('32');
    expect(asked).toEqual([32]);
    view.setData({ ...at16, batch: 32 });  // its answer: nothing more asked
    expect(asked).toEqual([32]);
    view.resetTracedBatch();  // another step: the default again, not the step before's choice (review AK)
    expect(batch.value).toBe('8');
    type(view, 'whatif-batch', '4');  // typed: kept, whatever the step
    view.setData({ ...at16, batch: 4 });
    expect(batch.value).toBe('4');
    view.resetTracedBatch();
    expect(batch.value).toBe('4');
  });

  it('marks what it cannot read, and the answer shown as the last values read', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    view.setData(answer);
    // No baseline: the prediction and the traced peak both read as rises.
    expect(view.element.querySelector('[data-testid=whatif-predicted]')!.textContent).toContain('over the step’s start · traced at batch 2: +200 B');
    const limit = type(view, 'whatif-limit', '8 parsecs');
    expect(limit.getAttribute('aria-invalid')).toBe('true');
    expect(view.element.hasAttribute('data-stale')).toBe(true);
    expect(view.element.textContent).toContain('not read: whole batches from 1, a limit such as 16 GiB (the answer shown is for the last values read)');
    view.setData(answer); // an answer asked before the bad input lands: still stale
    expect(view.element.hasAttribute('data-stale')).toBe(true);
    type(view, 'whatif-limit', '8GB');  // read, as 8 GiB
    expect(limit.getAttribute('aria-invalid')).toBe('false');
    expect(view.element.hasAttribute('data-stale')).toBe(false);
    expect(view.request()).toEqual({ batch: expect.any(Number), tags: [], runs: [], limit: 8 * 2 ** 30, tracedBatch: null });
  });

  it('keeps the asked batch’s label inside the plot, above the x axis, when the limit dwarfs it', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    // The review's case: batch 32 asked, the series up to 3,300, a 16 GiB limit: the point sits on the axis.
    const big = 16 * 2 ** 30;
    view.setData({
      ...answer, batch: 32, limit_bytes: big, limit_source: 'limit', limit_applies_to: 'peak_rise_bytes', max_batch: 1668, max_batch_searched: 3300,
      series: { batch: [1, 32, 1668, 3300], one_step: { peak_rise_bytes: [10 * 2 ** 20, 324 * 2 ** 20, big, 2 * big], peak_bytes: null }, fit: null },
    });
    const label = view.element.querySelector<SVGTextElement>('[data-testid=whatif-asked] text')!;
    const circle = view.element.querySelector<SVGCircleElement>('[data-testid=whatif-asked] circle')!;
    const axisY = Math.max(...[...view.element.querySelectorAll<SVGLineElement>('.axis line')].map((l) => Number(l.getAttribute('y1'))));
    expect(Number(circle.getAttribute('cy'))).toBeGreaterThan(axisY - 5); // the point is on the axis
    expect(Number(label.getAttribute('y'))).toBeLessThanOrEqual(axisY - 8);
    expect(label.getAttribute('text-anchor')).toBe('start');
    expect(Number(label.getAttribute('x'))).toBeGreaterThanOrEqual(66);
  });

  it('says in words why a run picked to fit with was left out, names as text', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    view.setData({ ...answer, skipped_runs: [{ run: EVIL, tag: 'step_1', reason: `another model: ${EVIL}` }] });
    const note = view.element.querySelector('[data-testid=whatif-skipped]')!;
    expect(note.textContent).toBe(`${EVIL} step_1: another model: ${EVIL}`);
    expect(document.querySelectorAll('img').length).toBe(0);
    view.setData(answer);
    expect(note.textContent).toBe('');
  });

  it('keeps the runs picked to fit with while they are listed, and drops them when told to', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    view.setChoices([], ['b16', 'b32', 'other']);
    const select = view.element.querySelector<HTMLSelectElement>('[data-testid=whatif-runs]')!;
    select.options[1]!.selected = true;
    expect(view.request()?.runs).toEqual(['b32']);
    view.setChoices([], ['b32', 'other']);  // another step of the same run
    expect(view.request()?.runs).toEqual(['b32']);
    view.setChoices([], ['b16', 'b32'], false);  // another run
    expect(view.request()?.runs).toEqual([]);
  });

  it('offers the run\'s other steps beside other runs, and asks for each kind by its own name', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    // A run whose step is also a run's name: each is asked as what it is.
    view.setChoices(['b2', 'b8'], ['b8', EVIL]);
    const select = view.element.querySelector<HTMLSelectElement>('[data-testid=whatif-runs]')!;
    expect([...select.querySelectorAll('optgroup')].map((g) => g.label)).toEqual(['steps of this run', 'other runs']);
    expect([...select.options].map((o) => o.textContent)).toEqual(['b2', 'b8', 'b8', EVIL]);
    expect(select.size).toBe(6);  // every row, both group labels too (3 rows had cut the first label)
    view.setChoices([], Array.from({ length: 20 }, (_v, i) => `r${i}`));
    expect(select.size).toBe(8);  // a long list scrolls
    view.setChoices(['b2', 'b8'], ['b8', EVIL]);
    select.options[1]!.selected = true;
    select.options[3]!.selected = true;
    expect(view.request()).toMatchObject({ tags: ['b8'], runs: [EVIL] });
    expect(document.querySelectorAll('img').length).toBe(0);
    // Another step of the same run shown: still listed, still picked; the run's steps alone: no heading left empty.
    view.setChoices(['b8'], []);
    expect(view.request()).toMatchObject({ tags: ['b8'], runs: [] });
    expect(select.querySelectorAll('optgroup').length).toBe(1);
    // A profile's steps by their own names first, whole in their titles; asked by their tags.
    const session = 'profile/2026_11_28_19_05_19';
    view.setChoices([`${session}/step_0`, `${session}/step_1`], []);
    expect([...select.options].map((o) => o.textContent)).toEqual([`step_0 · ${session}`, `step_1 · ${session}`]);
    expect([...select.options].map((o) => o.title)).toEqual([`${session}/step_0`, `${session}/step_1`]);
    select.options[1]!.selected = true;
    expect(view.request()).toMatchObject({ tags: [`${session}/step_1`] });
  });

  it('shows the answer\'s notes one per line, as text', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    view.setData({ ...answer, notes: ['keep a margin below the limit', `at batch 8 the fit and the one step are 40% apart ${EVIL}`] });
    const items = [...view.element.querySelectorAll('[data-testid=whatif-notes] li')].map((li) => li.textContent);
    expect(items).toEqual(['keep a margin below the limit', `at batch 8 the fit and the one step are 40% apart ${EVIL}`]);
    expect(document.querySelector('img')).toBeNull();
    view.setData(null);
    expect(view.element.querySelectorAll('[data-testid=whatif-notes] li').length).toBe(0);
  });

  it('reads a fit\'s fixed part below zero as where the layer\'s line starts', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    const fit = { ...answer.predictions.one_step!, batches: [16, 64], layers: [] };
    view.setData({
      ...answer, method: 'fit', predictions: { ...answer.predictions, fit },
      layers: [
        { layer: 'disc_1/fc1', at_peak_bytes: 8910848, fixed_bytes: -559104, per_sample_bytes: 36992, from_batch: 15.1 },
        { layer: 'gen/out', at_peak_bytes: 2293056, fixed_bytes: 1648277, per_sample_bytes: 2519, from_batch: null },
      ],
    });
    const rows = [...view.element.querySelectorAll('[data-testid=whatif-layers] tbody tr')].map((tr) =>
      [...tr.querySelectorAll('td')].map((td) => td.textContent));
    expect(rows[0]).toEqual(['disc_1/fc1', '8.50 MiB', 'above batch 15.1', '36.1 KiB']);
    expect(rows[1]).toEqual(['gen/out', '2.19 MiB', '1.57 MiB', '2.46 KiB']);
    // What a row counts, said beside the table (the treemap's tile of a scope holds its layers too).
    expect(view.element.querySelector('[data-testid=whatif-layers-note]')!.textContent).toBe('each layer’s own ops; a layer inside it is a row of its own');
  });

  it('asks with the batch the step ran at where the user gives one, until another step is shown', () => {
    const view = new WhatIfView(() => ['x']);
    document.body.replaceChildren(view.element);
    const traced = type(view, 'whatif-traced-batch', '0');
    expect(traced.getAttribute('aria-invalid')).toBe('true');
    expect(view.request()).toBeNull();
    type(view, 'whatif-traced-batch', '128');
    expect(traced.getAttribute('aria-invalid')).toBe('false');
    expect(view.request()?.tracedBatch).toBe(128);
    view.setData({ ...answer, runs: [{ ...answer.runs[0]!, batch: 128, batch_given: true }] });
    expect(view.element.querySelector('[data-testid=whatif-predicted]')!.textContent).toContain('traced at batch 128 (as given)');
    view.resetTracedBatch();
    expect(traced.value).toBe('');
    expect(view.request()?.tracedBatch).toBeNull();
  });
});

describe('FindingsView', () => {
  const finding = (scope: string, bytes: number, suggestion: string): Finding => ({
    kind: 'conv_scratch', bytes, scope, nodes: [`${scope}/op`], message: `${EVIL} in ${scope}`, suggestion,
    device: 'CPU:0/cpu', details: {},
  });

  it('says shared advice once, largest first, and renders names as text', () => {
    const view = new FindingsView(new Selection());
    mount(view.element);
    view.setData([finding('b', 10, 'Fix A.'), finding('a', 30, 'Fix A.'), finding('c', 5, `Fix ${EVIL}.`)], null);
    const items = [...document.querySelectorAll<HTMLElement>('[data-testid=finding]')];
    expect(items.map((i) => i.dataset.scope)).toEqual(['a', 'b', 'c']);
    const advice = items.map((i) => i.querySelector('.finding-suggestion')!.textContent);
    expect(advice).toEqual(['Try: Fix A.', 'Try: as above.', `Try: Fix ${EVIL}.`]);
    expect(items[1]?.querySelector('.finding-suggestion')?.getAttribute('title')).toBe('Fix A.');
    expect(items[0]?.querySelector('.finding-message')?.textContent).toBe(`${EVIL} in a`);
    expect(document.querySelector('img')).toBeNull();
  });
});

describe('FindingsView hint', () => {
  const finding = (scope: string | null, bytes: number): Finding => ({
    kind: scope ? 'conv_scratch' : 'allocator_gap', bytes, scope, nodes: [], message: 'm', suggestion: 's', device: null, details: {},
  });
  const hint = () => document.querySelector<HTMLElement>('[data-testid=findings-hint]')!;

  it('says a click selects a layer only when some finding has one to select', () => {
    const view = new FindingsView(new Selection());
    mount(view.element);
    view.setData([finding(null, 10)], null);
    expect(document.querySelector('.finding.clickable')).toBeNull();
    expect(hint().classList.contains('hidden')).toBe(true);
    view.setData([finding(null, 10), finding('model/conv', 5)], null);
    expect(document.querySelectorAll('.finding.clickable').length).toBe(1);
    expect(hint().classList.contains('hidden')).toBe(false);
    expect(hint().textContent).toBe('click one to select its layer');
    view.setData([], null);
    expect(hint().classList.contains('hidden')).toBe(true);
    view.setData(undefined, null);
    expect(hint().classList.contains('hidden')).toBe(true);
  });

  it('keeps its caption and hint out of a one-row toolbar that would cut them', () => {
    const view = new FindingsView(new Selection());
    mount(view.element);
    view.setData([finding('a/b', 10), finding('a/c', 5)], null);
    const toolbar = hint().closest('.panel-toolbar')!;
    expect(toolbar.classList.contains('one-row')).toBe(false);
    expect(toolbar.querySelector('.shrink')).toBeNull();
  });
});

describe('FindingsView with many alike', () => {
  it('spells out the first few of a run sharing their advice and folds the rest into one line that opens on them', () => {
    const selection = new Selection();
    const view = new FindingsView(selection);
    mount(view.element);
    const finding = (i: number): Finding => ({
      kind: 'conv_scratch', bytes: 32 * 2 ** 20 - i, scope: `net/conv_${i}`, nodes: [`net/conv_${i}/Conv2D`],
      message: `${EVIL} in net/conv_${i}/Conv2D`, suggestion: 'Fix A.', device: 'CPU:0/cpu', details: {},
    });
    view.setData([...Array.from({ length: 8 }, (_v, i) => finding(i)), { ...finding(9), kind: 'graph_constants', suggestion: 'Fix B.' }], null);
    const list = document.querySelector('[data-testid=findings]')!;
    const shown = [...list.children].filter((c) => c.matches('[data-testid=finding]'));
    expect(shown.map((c) => (c as HTMLElement).dataset.scope)).toEqual(['net/conv_0', 'net/conv_1', 'net/conv_2', 'net/conv_9']);
    const more = list.querySelector<HTMLDetailsElement>('[data-testid=findings-more]')!;
    expect(more.dataset.count).toBe('5');
    expect(more.querySelector('summary')!.textContent).toBe(`and 5 more convolution scratch findings like these, ${formatBytes(5 * 32 * 2 ** 20 - (3 + 4 + 5 + 6 + 7))} in all`);
    const folded = [...more.querySelectorAll<HTMLElement>('[data-testid=finding]')];
    expect(folded.map((c) => c.dataset.scope)).toEqual(['net/conv_3', 'net/conv_4', 'net/conv_5', 'net/conv_6', 'net/conv_7']);
    // Paths in the text wrap after their '/' (a <wbr>, no text), not inside a word.
    const message = folded[0]!.querySelector('.finding-message')!;
    expect(message.textContent).toBe(`${EVIL} in net/conv_3/Conv2D`);
    expect(message.querySelectorAll('wbr').length).toBe(2);
    // Still a card each: a click selects its layer.
    folded[0]!.click();
    expect(selection.get().selected).toBe('net/conv_3');
    expect(document.querySelector('img')).toBeNull();
  });
});

describe('PickersView compare', () => {
  it('offers every traced step but the one shown, which it names as this step', () => {
    const selection = new Selection();
    const view = new PickersView(selection);
    mount(view.element);
    const step = (tag: string, devices = ['/device:CPU:0']) => ({ tag, step: 1, wall_time: 1, devices });
    view.setRuns([
      { run: EVIL, has_graph: false, latest_tag: 'b', steps: [step('a'), step('b')] },
      { run: 'r2', has_graph: false, latest_tag: 'a', steps: [step('a'), step('batch_3', [])] },
    ]);
    selection.set({ run: EVIL, tag: 'a' });
    const options = () =>
      [...document.querySelectorAll<HTMLOptionElement>('[data-testid=compare-picker] option')].map((o) => [o.textContent, o.disabled]);
    // A record without step stats (the Keras callback's `batch_N`: no device) has nothing to compare.
    expect(options()).toEqual([['—', false], [`${EVIL} · a (this step)`, true], [`${EVIL} · b`, false], ['r2 · a', false], ['r2 · batch_3 (no memory to compare)', true]]);
    selection.set({ tag: 'b' });
    expect(options()).toEqual([['—', false], [`${EVIL} · a`, false], [`${EVIL} · b (this step)`, true], ['r2 · a', false], ['r2 · batch_3 (no memory to compare)', true]]);
    expect(document.querySelectorAll('img').length).toBe(0);
    // The step picker lists such a record too (opened, it says where the step is), marked as holding none.
    selection.set({ run: 'r2', tag: 'a' });
    const steps = [...document.querySelectorAll<HTMLOptionElement>('[data-testid=step-picker] option')].map((o) => o.textContent);
    expect(steps).toEqual([expect.not.stringContaining('no memory'), expect.stringContaining('(no memory)')]);
  });

  it('gives each picker and option its whole label as a title, which a narrow select cuts', () => {
    const selection = new Selection();
    const view = new PickersView(selection);
    mount(view.element);
    const long = 'experiments/unet_batch_size_4_learning_rate_0.001_with_a_long_name';
    view.setRuns([{ run: long, has_graph: false, latest_tag: 'step_3', steps: [{ tag: 'step_3', step: 3, wall_time: 1, devices: ['/device:CPU:0'] }] }]);
    selection.set({ run: long, tag: 'step_3' });
    const run = document.querySelector<HTMLSelectElement>('[data-testid=run-picker]')!;
    expect(run.title).toBe(long);
    expect(run.options[0]!.title).toBe(long);
    expect(document.querySelector<HTMLSelectElement>('[data-testid=step-picker]')!.title).toBe('step_3');
  });
});

describe('stepLabel', () => {
  it('puts a profiled step first, and a step number the tag lacks after it', () => {
    expect(stepLabel('profile/2026_11_23_15_32_10/step_2', 2)).toBe('step_2 · profile/2026_11_23_15_32_10');
    expect(stepLabel('profile/s/vm/run_3', 3)).toBe('run_3 · profile/s/vm');
    // An unmarked run's function beside its name (a fit's, a predict's, an evaluate's), as text.
    expect(stepLabel('profile/s/run_5', 5, 'one_step_on_data_distributed_1351')).toBe('run_5 (one_step_on_data_distributed_1351) · profile/s');
    expect(stepLabel('profile/s/run_5', 5, null)).toBe('run_5 · profile/s');
    expect(stepLabel('step_7', 7)).toBe('step_7');
    expect(stepLabel('train', 4)).toBe('train (step 4)');
    expect(stepLabel('a/b', null)).toBe('a/b');
    expect(stepLabel('b32', 3)).toBe('b32 (step 3)'); // a digit of another number is not the step's
    expect(stepLabel('b8_3', 3)).toBe('b8_3');
    expect(stepLabel('profile/2020_05_05_00_00_00', 0)).toBe('profile/2020_05_05_00_00_00'); // a whole profile, as it is
  });
});

describe('opSuffix', () => {
  it('brackets an op type once', () => {
    expect(opSuffix('a/b', 'MatMul')).toBe(' (MatMul)');
    expect(opSuffix('a/MatMul', 'MatMul')).toBe('');
    expect(opSuffix('AddV2', '(unknown)')).toBe(' (unknown)');
    expect(opSuffix('x', null)).toBe('');
    expect(opSuffix('(XLA program)', 'XLA program')).toBe('');  // not "(XLA program) (XLA program)"
    expect(opTypeSuffix('(unknown)')).toBe(' (unknown)'); // hover titles: no `((unknown))`
    expect(opTypeSuffix('Relu')).toBe(' (Relu)');
  });
});

describe('EmptyStateView', () => {
  it('offers the steps to open instead, as buttons, and no how-to beside them', () => {
    const view = new EmptyStateView();
    mount(view.element);
    const opened: string[] = [];
    view.show('This step has no step stats', 'This record holds no step stats.', {
      open: [{ label: `Open ${EVIL}`, onOpen: () => opened.push('a') }, { label: 'Open step_2', onOpen: () => opened.push('b') }],
    });
    const buttons = [...document.querySelectorAll<HTMLButtonElement>('[data-testid=empty-state-open]')];
    expect(buttons.map((b) => b.textContent)).toEqual([`Open ${EVIL}`, 'Open step_2']);
    expect(document.querySelectorAll('img').length).toBe(0); // a name is text, never markup
    buttons[1]!.click();
    expect(opened).toEqual(['b']);
    expect(document.querySelector('[data-testid=trace-howto]')).toBeNull();
    view.show('No traced steps yet', null, { howTo: true });
    expect(document.querySelector('[data-testid=empty-state-open]')).toBeNull();
    expect(document.querySelector('[data-testid=trace-howto]')).not.toBeNull();
  });
});
