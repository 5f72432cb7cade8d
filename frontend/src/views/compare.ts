// Compare mode: step A against a baseline step B. A treemap of the focused
// scope's children sized by the larger step and coloured by the difference,
// the scopes below it by absolute difference, the selected scope's figures in
// both steps, and the overlaid curves (compare-curve.ts). Draws what the
// controller hands it; writes only compare mode's keys of the selection.

import { hierarchy, treemap, treemapSquarify } from 'd3-hierarchy';
import type { CompareCategoryRow, CompareResponse, CompareScopeRow, CompareSide } from '../api';
import { clear, el, setLoading, showPanelError } from '../dom';
import { countOf, formatBytes, formatBytesDelta, formatCount, formatExactBytes } from '../format';
import {
  DIVERGING_COLOURS,
  compareFigure,
  deltaBytes,
  deltaColour,
  divergingExtent,
  holdsBytes,
  largerSide,
  rankByChange,
  renumberedText,
  startChangeText,
  sideBytes,
  type CompareFigure,
} from '../lib/compare';
import type { Column } from '../lib/table';
import { aggregateTiles, moreLabel, tileBox, tileBoxStyle, type Tile } from '../lib/treemap-tiles';
import { parentScope, type Selection } from '../selection';
import { CompareCurveView } from './compare-curve';
import { DataTable } from './data-table';
import { onResize } from './resize';

/** Scope table rows asked of the route: the largest changes first. */
export const COMPARE_TOP = 200;

const STATUS_TEXT: Record<CompareScopeRow['status'], string> = {
  added: 'only in A',
  removed: 'only in B',
  changed: 'changed',
  same: 'same',
};

/** The same, narrow enough for the table's column (the details and tooltips say it in words). */
const STATUS_MARK: Record<CompareScopeRow['status'], string> = { added: 'A only', removed: 'B only', changed: 'changed', same: 'same' };

function figureLabel(figure: CompareFigure): string {
  return figure === 'bytes' ? 'at peak' : 'allocated';
}

function sideLabel(side: CompareSide): string {
  return `${side.run} · ${side.tag}`;
}

/** A's, B's and the difference of one figure, as table columns (exact bytes exported). */
function figureColumns<T extends CompareScopeRow | CompareCategoryRow>(figure: CompareFigure, label: string): Column<T>[] {
  return [
    { key: `delta_${figure}`, label: `Δ ${label}`, value: (r) => deltaBytes(r, figure), text: (r) => formatBytesDelta(deltaBytes(r, figure)), numeric: true },
    { key: `a_${figure}`, label: `A ${label}`, value: (r) => sideBytes(r, 'a', figure), text: (r) => formatBytes(sideBytes(r, 'a', figure)), numeric: true },
    { key: `b_${figure}`, label: `B ${label}`, value: (r) => sideBytes(r, 'b', figure), text: (r) => formatBytes(sideBytes(r, 'b', figure)), numeric: true },
  ];
}

/** How many of the largest changes keep a tile of their own in the difference treemap. */
const KEPT_CHANGES = 3;
/** The least area such a tile is drawn at, in px² (about 20 x 20). */
const KEPT_CHANGE_AREA_PX = 400;

export class CompareView {
  readonly element: HTMLElement;
  readonly curve = new CompareCurveView();
  private readonly heading = el('div', { class: 'compare-heading', 'data-testid': 'compare-heading' });
  private readonly leaveButton = el('button', { type: 'button', 'data-testid': 'compare-leave', title: 'Back to the single step, as it was' }, 'Leave compare');
  private readonly treemapPanel: HTMLElement;
  private readonly area = el('div', { class: 'treemap-area', role: 'listbox', 'aria-label': 'Scopes compared', 'data-testid': 'compare-treemap' });
  private readonly crumbs = el('nav', { class: 'breadcrumbs shrink', 'data-testid': 'compare-breadcrumbs', 'aria-label': 'Scope path' });
  private readonly upButton = el('button', { type: 'button', title: 'Back to the parent scope' }, 'Up');
  private readonly treemapNote = el('div', { class: 'treemap-note' });
  private readonly legend = el('div', { class: 'legend' });
  private readonly tablePanel: HTMLElement;
  private readonly tableCaption = el('span', { class: 'muted' });
  private table: DataTable<CompareScopeRow>;
  /** The figure the table's columns show: it is rebuilt only when that changes (a sort the user chose stays). */
  private tableFigure: CompareFigure = 'bytes';
  private readonly details = el('section', { class: 'panel details-panel', 'data-testid': 'compare-details', 'aria-label': 'The selected scope in both steps' });
  private data: CompareResponse | null = null;
  private figure: CompareFigure = 'bytes';
  private tileByScope = new Map<string, HTMLElement>();

  constructor(private readonly selection: Selection) {
    this.table = this.makeTable();
    this.treemapPanel = el(
      'section',
      { class: 'panel treemap-panel', 'aria-label': 'Scopes compared' },
      el('div', { class: 'panel-toolbar one-row' }, el('h2', {}, 'Difference by scope'), this.crumbs, el('span', { class: 'spacer' }), this.upButton),
      el('div', { class: 'panel-body' }, this.area),
      this.treemapNote,
      this.legend,
    );
    this.tablePanel = el(
      'section',
      { class: 'panel', 'aria-label': 'Scopes by absolute difference' },
      el('div', { class: 'panel-toolbar' }, el('h2', {}, 'Scopes by difference'), this.tableCaption, el('span', { class: 'spacer' }), this.table.exports),
      el('div', { class: 'compare-table' }, this.table.element),
    );
    this.element = el(
      'div',
      { class: 'compare hidden', 'data-testid': 'compare' },
      el('div', { class: 'compare-bar' }, this.heading, el('span', { class: 'spacer' }), this.leaveButton),
      el(
        'div',
        { class: 'layout' },
        el('div', { class: 'main-column' }, this.curve.element, el('div', { class: 'two-up compare-two-up' }, this.treemapPanel, this.tablePanel)),
        el('div', { class: 'side-column' }, this.details),
      ),
    );
    this.leaveButton.addEventListener('click', () => this.selection.set({ against: null }));
    this.upButton.addEventListener('click', () => {
      const focus = this.selection.get().compareFocus;
      if (focus !== '') this.selection.set({ compareFocus: parentScope(focus), compareSelected: null });
    });
    selection.subscribe((_state, changed) => {
      if (changed.has('compareSelected')) this.updateSelected();
    });
    onResize(this.area, () => this.renderTreemap());
  }

  show(on: boolean): void {
    this.element.classList.toggle('hidden', !on);
  }

  setLoading(loading: boolean): void {
    setLoading(this.treemapPanel, loading);
    setLoading(this.tablePanel, loading);
  }

  setError(message: string | null): void {
    showPanelError(this.treemapPanel, message);
  }

  setData(data: CompareResponse | null): void {
    this.data = data;
    this.figure = data ? compareFigure(data.a, data.b) : 'bytes';
    if (this.figure !== this.tableFigure) {
      const old = this.table;
      this.table = this.makeTable();
      this.tableFigure = this.figure;
      old.element.replaceWith(this.table.element);
      old.exports.replaceWith(this.table.exports);
    }
    this.renderHeading();
    this.renderTreemap();
    // A change another row lists (a scope's explaining child, a (self)'s scope) is listed once, as `tb-memory diff` lists it.
    const rows = data ? data.scopes.filter((row) => holdsBytes(row) && row.listed_by === undefined) : [];
    this.table.setRows(data ? rankByChange(rows, this.figure) : []);
    const empty = data ? data.scopes.filter((row) => !holdsBytes(row)).length : 0;
    const repeats = data ? data.scopes.filter((row) => holdsBytes(row) && row.listed_by !== undefined).length : 0;
    const left = [
      ...(empty ? [`${formatCount(empty)} holding no bytes in either step`] : []),
      ...(repeats ? [`${formatCount(repeats)} whose change another row lists`] : []),
    ];
    this.tableCaption.textContent = data
      ? `${formatCount(data.scopes.length)} of ${formatCount(data.scope_count)} entries below ${data.scope.name || '(all)'}, by absolute difference ${figureLabel(this.figure)}`
        + (left.length ? ` (left out: ${left.join('; ')})` : '')
      : '';
    this.updateSelected();
  }

  private makeTable(): DataTable<CompareScopeRow> {
    const figure = this.figure;
    const label = figureLabel(figure);
    const columns: Column<CompareScopeRow>[] = [
      { key: 'name', label: 'scope', value: (r) => r.name },
      { key: 'status', label: 'status', value: (r) => r.status, text: (r) => STATUS_MARK[r.status] },
      ...figureColumns<CompareScopeRow>(figure, label),
      ...(figure === 'bytes' ? figureColumns<CompareScopeRow>('allocated_bytes', 'allocated') : []),
      { key: 'kind', label: 'kind', value: (r) => r.kind },
    ];
    return new DataTable<CompareScopeRow>({
      columns,
      testId: 'compare-table',
      // No such column: rows keep lib/compare's order (absolute difference) until a header is clicked.
      initialSort: { key: 'change', direction: 'desc' },
      fileName: () => {
        const s = this.selection.get();
        return [s.run ?? '', s.tag ?? '', 'vs', s.against?.run ?? '', s.against?.tag ?? '', 'scopes'];
      },
      maxRows: 60,
      // At peak, most rows below the top few hold nothing then in either step and changed only in what
      // they allocated: the allocated difference is shown beside, so such a row does not read 0 / 0 / 0.
      shownColumns: ['name', 'status', `delta_${figure}`, `a_${figure}`, `b_${figure}`, ...(figure === 'bytes' ? ['delta_allocated_bytes'] : [])],
      compact: true,
      rowKey: (r) => r.name,
      onRowClick: (r) => this.selection.set({ compareSelected: r.name }),
    });
  }

  private renderHeading(): void {
    clear(this.heading);
    const d = this.data;
    if (!d) return;
    // The rise beside an absolute peak: the difference shown is the rises' (the starts may differ).
    const peak = (s: CompareSide) =>
      s.has_curve
        ? s.peak_bytes !== null
          ? `${formatBytes(s.peak_bytes)} (rise ${formatBytes(s.peak_rise_bytes ?? 0)} over a start of ${formatBytes(s.start_bytes ?? 0)}${s.start_counts_from_bytes ? `, of its requests of ${formatBytes(s.start_counts_from_bytes)} and more` : ''})`
          : `${formatBytesDelta(s.peak_rise_bytes ?? 0)} (relative)`
        : 'no curve';
    const delta = d.peak_rise_delta_bytes;
    this.heading.append(
      el('span', { 'data-testid': 'compare-a', title: `${d.a.run} ${d.a.tag} on ${d.a.id}` }, el('b', {}, 'A '), `${sideLabel(d.a)}: peak ${peak(d.a)}`),
      el('span', { 'data-testid': 'compare-b', title: `${d.b.run} ${d.b.tag} on ${d.b.id}` }, el('b', {}, 'B '), `${sideLabel(d.b)}: peak ${peak(d.b)}`),
      el(
        'span',
        { 'data-testid': 'compare-delta', 'data-bytes': delta === null ? '' : String(delta), title: delta === null ? '' : formatExactBytes(delta) },
        delta === null ? 'no peak to compare (a step has no curve)' : `peak rise A − B: ${formatBytesDelta(delta)}`,
      ),
    );
    const start = startChangeText(d.start_change);
    if (start !== null && d.start_change !== null) {
      const exact = (d.start_change.parts ?? []).map((p) => `${p.name}: ${formatExactBytes(p.delta_bytes)}`);
      this.heading.append(
        el(
          'span',
          {
            class: 'muted',
            'data-testid': 'compare-start',
            'data-bytes': String(d.start_change.delta_bytes),
            title: [
              `In use before each step, A − B: ${formatExactBytes(d.start_change.delta_bytes)}`,
              ...exact,
              ...(d.start_change.counts_from_bytes ? [`The parts count the tensors of ${formatBytes(d.start_change.counts_from_bytes)} and more, which the starts count (${d.a.allocator}).`] : []),
              'No listing below holds it: they add up to the peak rises.',
            ].join('\n'),
          },
          start,
        ),
      );
    }
    if (d.models_note) {
      this.heading.append(el('span', { class: 'muted compare-warning', 'data-testid': 'compare-models-note', title: d.models_note }, `Note: ${d.models_note}.`));
    }
    const renumbered = renumberedText(d.renumbered);
    if (renumbered !== null) {
      this.heading.append(
        el(
          'span',
          {
            class: 'muted',
            'data-testid': 'compare-renumbered',
            'data-count': String(d.renumbered.length),
            title: `B's names matched to A's by their numbers (the same model built again in one process or graph):\n${d.renumbered.map((p) => `${p.b} → ${p.a}`).join('\n')}`,
          },
          `B's names numbered as A's: ${renumbered}`,
        ),
      );
    }
    // Each side whose allocator readings disagree with its records (its allocator_gap finding), in one line.
    const gaps: [string, number][] = [];
    if (typeof d.a.readings_gap_bytes === 'number') gaps.push(['A', d.a.readings_gap_bytes]);
    if (typeof d.b.readings_gap_bytes === 'number') gaps.push(['B', d.b.readings_gap_bytes]);
    if (gaps.length > 0) {
      const why = gaps.map(([label, gap]) => `${label}'s allocator readings and its records disagree by up to ${formatExactBytes(gap)} (its allocator_gap finding)`);
      this.heading.append(
        el(
          'span',
          {
            class: 'muted',
            'data-testid': 'compare-gap',
            'data-sides': gaps.map(([label]) => label).join(''),
            title: [...why, 'A peak, and so the change in peak, may be off by that much: open the step alone to see why.'].join('\n'),
          },
          `peak may be off by up to ${gaps.map(([label, gap]) => `${formatBytes(gap)} (${label})`).join(', ')}: allocator gap`,
        ),
      );
    }
  }

  private renderTreemap(): void {
    clear(this.area);
    clear(this.crumbs);
    clear(this.legend);
    this.tileByScope.clear();
    this.treemapNote.textContent = '';
    const d = this.data;
    const focus = this.selection.get().compareFocus;
    this.upButton.disabled = focus === '';
    this.renderCrumbs(focus);
    if (!d) return;
    const figure = this.figure;
    const extent = divergingExtent(d.children, figure, d.scope);
    const width = this.area.clientWidth || 500;
    const height = this.area.clientHeight || 330;
    // The largest changes keep tiles of their own, however small their bytes (trial AM: a scope's -912 KiB,
    // the step's largest change, had been folded into "(5 more)" beside a large scope's +512 B).
    const largest = new Set(
      [...d.children]
        .filter((r) => deltaBytes(r, figure) !== 0)
        .sort((a, b) => Math.abs(deltaBytes(b, figure)) - Math.abs(deltaBytes(a, figure)))
        .slice(0, KEPT_CHANGES)
        .map((r) => r.name),
    );
    const agg = aggregateTiles(d.children, (r) => largerSide(r, figure), (r) => r.name, {
      areaPx: width * height,
      keep: (r) => r.kind === 'self' || largest.has(r.name),
    });
    // Such a tile is drawn at a readable size however small its bytes (at its share it had been 0 px wide:
    // review AK); its title and colour say its bytes and change.
    const floor = (agg.total * KEPT_CHANGE_AREA_PX) / (width * height);
    for (const tile of agg.tiles) if (tile.type === 'item' && largest.has(tile.item.name)) tile.value = Math.max(tile.value, floor);
    if (agg.tiles.length === 0) {
      this.area.append(el('div', { class: 'muted', style: 'padding:12px' }, `No child of this scope holds bytes ${figureLabel(figure)} in either step.`));
    } else {
      const root = hierarchy<{ children?: Tile<CompareScopeRow>[] } | Tile<CompareScopeRow>>({ children: agg.tiles }, (n) => ('children' in n ? n.children : undefined)).sum((n) =>
        'type' in n ? n.value : 0,
      );
      const layout = treemap<{ children?: Tile<CompareScopeRow>[] } | Tile<CompareScopeRow>>().tile(treemapSquarify).size([width, height]).round(true)(root);
      const fragment = document.createDocumentFragment();
      for (const n of layout.children ?? []) fragment.append(this.tileElement(n.data as Tile<CompareScopeRow>, n.x0, n.y0, n.x1 - n.x0, n.y1 - n.y0, extent));
      this.area.append(fragment);
    }
    this.treemapNote.textContent = `${countOf(d.children.length, 'child', 'children')} · sized by the larger step ${figureLabel(figure)}, coloured by A − B`;
    // The scale's ends only where some child differs (its extent is at least 1 B, to divide by).
    const differs = d.children.some((r) => deltaBytes(r, figure) !== 0);
    const legend = differs
      ? ([
          [DIVERGING_COLOURS.shrank, `B larger by ${formatBytes(extent)}`],
          [DIVERGING_COLOURS.same, 'same'],
          [DIVERGING_COLOURS.grew, `A larger by ${formatBytes(extent)}`],
        ] as const)
      : ([[DIVERGING_COLOURS.same, `no child differs ${figureLabel(figure)}`]] as const);
    for (const [colour, text] of legend) {
      this.legend.append(el('span', {}, el('span', { class: 'swatch', style: `background:${colour};border:1px solid var(--border)` }), text));
    }
    this.updateSelected();
  }

  private tileElement(tile: Tile<CompareScopeRow>, x: number, y: number, w: number, h: number, extent: number): HTMLElement {
    const style = tileBoxStyle(tileBox(x, y, x + w, y + h));
    if (tile.type === 'more') {
      return el('div', { class: 'tile more', style, title: `${moreLabel(tile.count)}: ${formatBytes(tile.value)} in all (in the table)` }, el('span', { class: 'name' }, moreLabel(tile.count)));
    }
    const row = tile.item;
    const figure = this.figure;
    const delta = deltaBytes(row, figure);
    const node = el('div', {
      class: `tile ${row.kind}`,
      style: `${style}background:${deltaColour(delta, extent)};`,
      tabindex: 0,
      role: 'option',
      'aria-selected': 'false',
      'data-testid': 'compare-tile',
      'data-scope': row.name,
      'data-delta': String(delta),
      title: [
        row.name,
        `A ${formatBytes(sideBytes(row, 'a', figure))} · B ${formatBytes(sideBytes(row, 'b', figure))} · A − B ${formatBytesDelta(delta)} ${figureLabel(figure)}`,
        STATUS_TEXT[row.status],
        row.kind === 'scope' ? 'double click to open' : '',
      ]
        .filter(Boolean)
        .join('\n'),
    });
    if (w >= 28 && h >= 14) node.append(el('span', { class: 'name' }, row.name.slice(row.name.lastIndexOf('/') + 1)));
    if (w >= 44 && h >= 28) node.append(el('span', { class: 'bytes' }, formatBytesDelta(delta)));
    node.addEventListener('click', () => this.selection.set({ compareSelected: row.name }));
    node.addEventListener('dblclick', () => {
      if (row.kind === 'scope') this.selection.set({ compareFocus: row.name, compareSelected: null });
    });
    node.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Enter' && ev.key !== ' ') return;
      ev.preventDefault();
      if (ev.shiftKey && row.kind === 'scope') this.selection.set({ compareFocus: row.name, compareSelected: null });
      else this.selection.set({ compareSelected: row.name });
    });
    this.tileByScope.set(row.name, node);
    return node;
  }

  private renderCrumbs(focus: string): void {
    const parts = focus === '' ? [] : focus.split('/');
    const crumbs = [{ name: '(all)', scope: '' }, ...parts.map((name, i) => ({ name, scope: parts.slice(0, i + 1).join('/') }))];
    crumbs.forEach((crumb, i) => {
      if (i > 0) this.crumbs.append(el('span', { class: 'sep', 'aria-hidden': 'true' }, '/'));
      const button = el('button', { type: 'button', 'aria-current': i === crumbs.length - 1 ? 'page' : null, 'data-scope': crumb.scope }, crumb.name);
      button.addEventListener('click', () => this.selection.set({ compareFocus: crumb.scope, compareSelected: null }));
      this.crumbs.append(button);
    });
  }

  /** The row of a scope in the loaded answer (the focus, a child, or a ranked entry), if any. */
  private rowOf(scope: string): CompareScopeRow | null {
    const d = this.data;
    if (!d) return null;
    if (d.scope.name === scope) return d.scope;
    return d.children.find((r) => r.name === scope) ?? d.scopes.find((r) => r.name === scope) ?? null;
  }

  private updateSelected(): void {
    const selected = this.selection.get().compareSelected;
    for (const [scope, node] of this.tileByScope) {
      const on = scope === selected;
      node.classList.toggle('selected', on);
      node.setAttribute('aria-selected', on ? 'true' : 'false');
    }
    this.table.markRow(selected);
    this.renderDetails(selected);
  }

  /** The selected scope (else the focus) in both steps: each figure's A, B and difference, then the categories. */
  private renderDetails(selected: string | null): void {
    clear(this.details);
    const d = this.data;
    if (!d) return;
    const scope = selected ?? d.scope.name;
    const row = this.rowOf(scope);
    this.details.append(
      el('h2', {}, 'Selection in both steps'),
      el('div', { class: 'details-title', 'data-testid': 'compare-details-scope', 'data-scope': scope }, scope || '(all)'),
    );
    if (!row) {
      this.details.append(el('div', { class: 'muted' }, 'Not among the entries loaded for this scope.'));
      return;
    }
    this.details.append(el('div', { class: 'muted' }, `${row.kind} · ${STATUS_TEXT[row.status]}`));
    if (row.b_name !== undefined) this.details.append(el('div', { class: 'muted', 'data-testid': 'compare-details-b-name' }, `in B: ${row.b_name}`));
    if (row.same_requests) {
      this.details.append(
        el('div', { class: 'muted', 'data-testid': 'compare-details-same-requests' }, 'the same requests on both sides: the change is the allocator’s chunks'),
      );
    }
    const table = el('table', { class: 'kv' }, el('tr', {}, el('th', {}), el('th', { class: 'num' }, 'A'), el('th', { class: 'num' }, 'B'), el('th', { class: 'num' }, 'A − B')));
    const figures: [CompareFigure | 'output_bytes', string][] = [
      ['bytes', 'at peak'],
      ['allocated_bytes', 'allocated'],
      ['output_bytes', 'output'],
    ];
    for (const [figure, label] of figures) {
      const a = row[`a_${figure}`];
      const b = row[`b_${figure}`];
      const delta = row[`delta_${figure}`];
      if (a === undefined || (a === null && b === null)) continue; // no curve on either side: no at-peak row
      const cell = (v: number | null | undefined, signed = false) =>
        el('td', { class: 'num', title: v === null || v === undefined ? '' : formatExactBytes(v) }, v === null || v === undefined ? '—' : signed ? formatBytesDelta(v) : formatBytes(v));
      const deltaCell = cell(delta, true);
      deltaCell.setAttribute('data-testid', `compare-details-delta-${figure}`);
      deltaCell.setAttribute('data-bytes', delta === null || delta === undefined ? '' : String(delta));
      table.append(el('tr', {}, el('th', {}, label), cell(a), cell(b), deltaCell));
    }
    this.details.append(table);
    if (scope === d.scope.name) this.details.append(this.categoriesBlock(d.categories));
    else this.details.append(el('div', { class: 'muted', style: 'margin-top:6px' }, 'Double click its tile to compare what it is made of.'));
  }

  private categoriesBlock(rows: CompareCategoryRow[]): HTMLElement {
    const figure = this.figure;
    const table = el('table', { class: 'kv' });
    for (const r of rows) {
      const delta = deltaBytes(r, figure);
      if (sideBytes(r, 'a', figure) === 0 && sideBytes(r, 'b', figure) === 0) continue;
      table.append(el('tr', {}, el('th', {}, r.name), el('td', { class: 'num' }, formatBytes(sideBytes(r, 'a', figure))), el('td', { class: 'num' }, formatBytes(sideBytes(r, 'b', figure))), el('td', { class: 'num' }, formatBytesDelta(delta))));
    }
    return el('div', { style: 'margin-top:8px' }, el('h2', {}, `By category, ${figureLabel(figure)} (A, B, A − B)`), table);
  }
}
