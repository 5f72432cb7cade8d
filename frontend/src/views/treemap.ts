// One level of the scope tree as a treemap of HTML tiles: the focused scope's
// children sized by a chosen figure, small ones folded into "(N more)".

import { ARROW_STEP, steppedIndex } from '../lib/roving';
import { hierarchy, treemap, treemapSquarify } from 'd3-hierarchy';
import { CATEGORY_NAMES, type FigureName, type ScopeChild, type ScopesResponse } from '../api';
import { clear, el, setLoading, showPanelError } from '../dom';
import { countOf, formatBytes, formatCount, formatPercent, shareOf } from '../format';
import { CATEGORY_COLORS, colorForName, dominantCategory } from '../lib/colors';
import { paramsText } from '../lib/resident';
import { aggregateTiles, moreLabel, tileBox, tileBoxStyle, type Tile } from '../lib/treemap-tiles';
import type { Selection } from '../selection';
import { onResize } from './resize';
import { placeholderText } from '../lib/placeholders';

export const SIZE_FIGURES: { figure: FigureName; label: string }[] = [
  { figure: 'at_peak_bytes', label: 'at peak' },
  { figure: 'allocated_bytes', label: 'allocated' },
  { figure: 'output_bytes', label: 'output' },
  { figure: 'temp_bytes', label: 'temp' },
];
/** When folded children hold more than this share of the level, their list opens by itself. */
const OPEN_LIST_SHARE = 0.5;
/** Folded children listed when the "(N more)" tile is opened. */
const MORE_LIST_MAX = 300;
/** A scope tile at least this big shows what it holds (its `inside`) below its name. */
const INSIDE_MIN_WIDTH = 90;
const INSIDE_MIN_HEIGHT = 64;
/** Room kept at the top of such a tile for its name and bytes. */
const INSIDE_HEADER = 30;
/** A "(N more)" tile thinner than this is not drawn: the button below the treemap stands for it. */
const MORE_MIN_PX = 8;
/** Names of what a tile holds given in its tooltip. */
const INSIDE_TITLE_NAMES = 5;

interface Placed {
  tile: Tile<ScopeChild>;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** The op types the legend names at most (the largest tiles' first). */
const LEGEND_OPS = 14;

export class TreemapView {
  readonly element: HTMLElement;
  private readonly area = el('div', { class: 'treemap-area', role: 'listbox', 'aria-label': 'Scopes: arrow keys move between tiles, Enter selects, Shift+Enter opens, Escape goes up' });
  private readonly crumbs = el('nav', { class: 'breadcrumbs shrink', 'data-testid': 'breadcrumbs', 'aria-label': 'Scope path' });
  private readonly sizeSelect = el('select', { 'aria-label': 'Size tiles by', 'data-testid': 'size-picker' });
  private readonly colorSelect = el('select', { 'aria-label': 'Colour tiles by', 'data-testid': 'color-picker' });
  private readonly drillButton = el('button', { type: 'button', 'data-testid': 'drill-in', title: 'Show the selected scope’s children (or double click its tile)' }, 'Drill in');
  private readonly upButton = el('button', { type: 'button', title: 'Back to the parent scope' }, 'Up');
  private readonly note = el('div', { class: 'treemap-note' });
  private readonly moreList = el('div', { class: 'more-list hidden', 'data-testid': 'treemap-more-list' });
  /** "(N more)" below the treemap, where its tile would be too thin to see or click. */
  private readonly moreButton = el('button', { type: 'button', class: 'more-button hidden', 'data-testid': 'treemap-more', 'aria-controls': 'mem-treemap-more-list' });
  private folded: ScopeChild[] = [];
  private readonly legend = el('div', { class: 'legend' });
  /** The op types the tiles drawn are coloured by, in the order drawn (the legend's). */
  private readonly shownOps = new Set<string>();
  private data: ScopesResponse | null = null;
  private tileByScope = new Map<string, HTMLElement>();
  /** The tiles (and the "(N more)" tile) in drawn order, largest first: one Tab stop, arrows between them. */
  private stops: HTMLElement[] = [];
  /** Scopes of the tiles big enough to carry their name, largest first: the ones worth prefetching. */
  private labelled: string[] = [];
  /** A keyboard drill in: the next level drawn takes the focus (its first tile). */
  private focusOnData = false;
  /** A keyboard step up: the tile of the level left (trial AF's Escape had focused the parent's first tile). */
  private focusScope: string | null = null;
  /** The size was switched to allocated bytes for a step without a curve (not by the user). */
  private autoSized = false;

  constructor(private readonly selection: Selection) {
    for (const s of SIZE_FIGURES) this.sizeSelect.append(el('option', { value: s.figure }, s.label));
    this.colorSelect.append(el('option', { value: 'category' }, 'category'), el('option', { value: 'op_type' }, 'op type'));
    const body = el('div', { class: 'panel-body', 'data-testid': 'treemap' }, this.area);
    this.element = el(
      'section',
      { class: 'panel treemap-panel', 'aria-label': 'Scope treemap' },
      // One toolbar row above the tiles (they start high on a 1280x800 screen); the size and
      // colour pickers sit below them, next to the legend they change.
      el('div', { class: 'panel-toolbar one-row' }, el('h2', {}, 'Scopes'), this.crumbs, el('span', { class: 'spacer' }), this.upButton, this.drillButton),
      body,
      this.moreList,
      el('div', { class: 'panel-toolbar bottom' }, el('label', {}, 'size', this.sizeSelect), el('label', {}, 'colour', this.colorSelect), this.moreButton),
      this.note,
      this.legend,
    );
    this.sizeSelect.addEventListener('change', () => {
      this.autoSized = false;
      this.render();
    });
    this.colorSelect.addEventListener('change', () => this.render());
    this.moreList.id = 'mem-treemap-more-list';
    this.moreButton.addEventListener('click', () => this.toggleMoreList());
    this.drillButton.addEventListener('click', () => {
      const target = this.drillTarget();
      if (target) this.selection.drill(target.scope);
    });
    this.upButton.addEventListener('click', () => this.up(false));
    selection.subscribe((_state, changed) => {
      if (changed.has('selected')) this.updateSelected();
    });
    onResize(this.area, () => this.render());
  }

  /**
   * A step without a curve (no allocation records) holds nothing at the peak:
   * its tiles are sized by allocated bytes instead, until a step with a curve
   * comes back. A size the user picked is kept.
   */
  setHasCurve(hasCurve: boolean): void {
    if (!hasCurve && this.sizeSelect.value === 'at_peak_bytes') {
      this.sizeSelect.value = 'allocated_bytes';
      this.autoSized = true;
      this.render();
    } else if (hasCurve && this.autoSized) {
      this.sizeSelect.value = 'at_peak_bytes';
      this.autoSized = false;
      this.render();
    }
  }

  get sizeFigure(): FigureName {
    return this.sizeSelect.value as FigureName;
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  setError(message: string | null): void {
    if (message) this.focusOnData = false;
    showPanelError(this.element, message);
  }

  setData(data: ScopesResponse | null): void {
    this.data = data;
    this.render();
    if (this.focusOnData) {
      this.focusOnData = false; // asked once: a level that never came (null, an error) takes nothing later
      const left = this.focusScope === null ? undefined : this.tileByScope.get(this.focusScope);
      this.focusScope = null;
      if (left) this.setTabStop(left);
      if (data) (left ?? this.area.querySelector<HTMLElement>('[tabindex="0"]'))?.focus();
    }
  }

  /** Scopes of the tiles drawn with a label, largest first. */
  visibleScopes(): string[] {
    return [...this.labelled];
  }

  /** Opens the parent scope (the Up button; Escape or Backspace on a tile, whose next level takes the focus). */
  private up(keyboard: boolean): boolean {
    const path = this.data?.path ?? [];
    const parent = path[path.length - 2];
    if (!parent) return false;
    if (keyboard) {
      this.focusOnData = true;
      this.focusScope = path[path.length - 1]?.scope ?? null;
    }
    this.selection.drill(parent.scope);
    return true;
  }

  /** Keys every tile shares: arrows, Home and End move between tiles; Escape and Backspace go up a level. */
  private navigate(ev: KeyboardEvent, node: HTMLElement): void {
    const step = ARROW_STEP[ev.key];
    if (step !== undefined) {
      ev.preventDefault();
      const next = this.stops[steppedIndex(this.stops.indexOf(node), this.stops.length, step)];
      if (next) {
        this.setTabStop(next);
        next.focus();
      }
    } else if ((ev.key === 'Escape' || ev.key === 'Backspace') && this.up(true)) {
      ev.preventDefault();
    }
  }

  /** The one tile Tab reaches (roving tabindex): every tile had been a Tab stop of its own. */
  private setTabStop(stop: HTMLElement | null): void {
    for (const node of this.stops) node.tabIndex = node === stop ? 0 : -1;
  }

  /** The child the Drill in button would open: the selected child if it has children. */
  private drillTarget(): ScopeChild | null {
    const selected = this.selection.get().selected;
    const child = this.data?.children.find((c) => c.scope === selected);
    return child && child.has_children ? child : null;
  }

  private render(): void {
    clear(this.area);
    clear(this.crumbs);
    clear(this.legend);
    this.shownOps.clear();
    this.tileByScope.clear();
    this.stops = [];
    this.labelled = [];
    this.note.textContent = '';
    this.moreButton.classList.add('hidden');
    const data = this.data;
    this.upButton.disabled = !data || data.path.length < 2;
    if (!data) {
      this.updateSelected();
      return;
    }
    this.renderCrumbs(data);

    const figure = this.sizeFigure;
    const width = this.area.clientWidth || 600;
    const height = this.area.clientHeight || 330;
    const agg = aggregateTiles(
      data.children,
      (c) => c.figures[figure],
      (c) => c.scope,
      { areaPx: width * height, keep: (c) => c.kind === 'self' },
    );
    const more = agg.tiles.find((t) => t.type === 'more');
    this.folded = more && more.type === 'more' ? more.items : [];
    this.moreList.classList.add('hidden');
    this.moreButton.setAttribute('aria-expanded', 'false');
    // A level of many tiny children (one flat scope of thousands of ops) is mostly the
    // "(N more)" tile: list them at once so each stays one click away.
    if (more && agg.total > 0 && more.value / agg.total > OPEN_LIST_SHARE) this.toggleMoreList();
    const total = agg.total;
    if (agg.tiles.length === 0) {
      this.area.append(el('div', { class: 'muted', style: 'padding:12px' }, `No child of this scope holds bytes ${this.figureLabel()}.`));
    } else {
      const root = hierarchy<{ children?: Tile<ScopeChild>[] } | Tile<ScopeChild>>(
        { children: agg.tiles },
        (d) => ('children' in d ? d.children : undefined),
      ).sum((d) => ('type' in d ? d.value : 0));
      const layout = treemap<{ children?: Tile<ScopeChild>[] } | Tile<ScopeChild>>()
        .tile(treemapSquarify)
        .size([width, height])
        .round(true)(root);
      const placed: Placed[] = (layout.children ?? []).map((n) => ({
        tile: n.data as Tile<ScopeChild>,
        x0: n.x0,
        y0: n.y0,
        x1: n.x1,
        y1: n.y1,
      }));
      const fragment = document.createDocumentFragment();
      for (const p of placed) {
        if (p.tile.type === 'more' && (p.x1 - p.x0 < MORE_MIN_PX || p.y1 - p.y0 < MORE_MIN_PX)) this.showMoreButton(p.tile.count, p.tile.value);
        else fragment.append(this.tileElement(p, total));
      }
      this.area.append(fragment);
    }
    this.renderNotes(agg.nonPositive.length, data);
    this.renderLegend(agg.tiles);
    this.updateSelected();
  }

  private figureLabel(): string {
    return SIZE_FIGURES.find((s) => s.figure === this.sizeFigure)?.label ?? '';
  }

  private tileElement(p: Placed, total: number): HTMLElement {
    const w = p.x1 - p.x0;
    const h = p.y1 - p.y0;
    const style = tileBoxStyle(tileBox(p.x0, p.y0, p.x1, p.y1));
    const tile = p.tile;
    if (tile.type === 'more') {
      const label = moreLabel(tile.count);
      const node = el(
        'div',
        {
          class: 'tile more',
          style,
          tabindex: -1,
          role: 'button',
          'data-testid': 'treemap-more',
          title: `${label}: ${formatCount(tile.count)} smaller children, ${formatBytes(tile.value)} in all. Click to list them.`,
        },
        el('span', { class: 'name' }, label),
        el('span', { class: 'bytes' }, formatBytes(tile.value)),
      );
      node.addEventListener('click', () => this.toggleMoreList());
      node.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          this.toggleMoreList();
        } else this.navigate(ev, node);
      });
      this.stops.push(node);
      return node;
    }
    const child = tile.item;
    const colour = this.colorFor(child);
    const share = formatPercent(shareOf(tile.value, total));
    const node = el(
      'div',
      {
        class: `tile ${child.kind}`,
        style: `${style}background:${colour};`,
        tabindex: -1,
        role: 'option',
        'aria-selected': 'false',
        'data-testid': 'treemap-tile',
        'data-scope': child.scope,
        title: [
          child.scope,
          placeholderText(child.scope) ?? '',
          `${this.figureLabel()}: ${formatBytes(tile.value)} (${share} of this level)`,
          `${countOf(child.exec_count, 'execution')}${child.top_op_type ? `, mostly ${child.top_op_type}` : ''}`,
          paramsText(child) ?? '',
          this.insideTitle(child),
          child.has_children ? 'double click (Shift+Enter) or Drill in to open' : '',
        ]
          .filter(Boolean)
          .join('\n'),
      },
    );
    if (w >= 28 && h >= 14) {
      node.append(el('span', { class: 'name' }, child.name));
      this.labelled.push(child.scope);
    }
    if (w >= 44 && h >= 28) node.append(el('span', { class: 'bytes' }, formatBytes(tile.value)));
    const inside = this.insideElement(child, w, h);
    if (inside) {
      node.append(inside);
      node.classList.add('holds');
    }
    node.addEventListener('click', () => this.selection.select(child.scope));
    node.addEventListener('dblclick', () => {
      if (child.has_children) this.selection.drill(child.scope);
    });
    node.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') {
        ev.preventDefault();
        if (ev.shiftKey && child.has_children) {
          this.focusOnData = true; // the level drawn next takes the focus, not the page's body
          this.selection.drill(child.scope);
        } else this.selection.select(child.scope);
      } else this.navigate(ev, node);
    });
    this.tileByScope.set(child.scope, node);
    this.stops.push(node);
    return node;
  }

  /** The folded children's button below the treemap, in place of a tile too thin to see or click. */
  private showMoreButton(count: number, value: number): void {
    const label = moreLabel(count);
    this.moreButton.textContent = `${label} ${formatBytes(value)}`;
    this.moreButton.title = `${label}: ${formatCount(count)} smaller children, ${formatBytes(value)} in all, too small for a tile. Click to list them.`;
    this.moreButton.classList.remove('hidden');
  }

  /** What a child holds, sized by the figure in use: the parts it lists with bytes, in a treemap of their own. */
  private insideParts(child: ScopeChild): ScopeChild[] {
    const figure = this.sizeFigure;
    return (child.inside ?? []).filter((c) => c.figures[figure] > 0);
  }

  /**
   * A big scope tile's own children, drawn inside it below its name (a Keras model is one top
   * scope: its layers show at once). A click on a part selects it, a double click opens the
   * tile's scope with it selected; elsewhere (the tile's name, the hatched rest) clicks go to the
   * tile itself (keyboard: the tile). What the list leaves out is one hatched area, so the parts
   * keep their share of the tile.
   */
  private insideElement(child: ScopeChild, w: number, h: number): HTMLElement | null {
    const parts = this.insideParts(child);
    if (!parts.length || w < INSIDE_MIN_WIDTH || h < INSIDE_MIN_HEIGHT) return null;
    const figure = this.sizeFigure;
    const width = w - 6;
    const height = h - INSIDE_HEADER - 3;
    type Part = { item: ScopeChild | null; value: number };
    const leaves: Part[] = parts.map((item) => ({ item, value: item.figures[figure] }));
    const listed = leaves.reduce((sum, leaf) => sum + leaf.value, 0);
    const rest = child.figures[figure] - listed;
    if (rest > 0) leaves.push({ item: null, value: rest });
    const root = hierarchy<{ children?: Part[] } | Part>({ children: leaves }, (d) =>
      'children' in d ? d.children : undefined,
    ).sum((d) => ('value' in d ? d.value : 0));
    const layout = treemap<{ children?: Part[] } | Part>().tile(treemapSquarify).size([width, height]).round(true)(root);
    const box = el('div', {
      class: 'tile-inside',
      'aria-hidden': 'true',
      style: `left:2px;top:${INSIDE_HEADER}px;width:${width}px;height:${height}px;`,
    });
    for (const n of layout.children ?? []) {
      const part = n.data as Part;
      const pw = n.x1 - n.x0;
      const ph = n.y1 - n.y0;
      if (pw < 1 || ph < 1) continue;
      const style = `left:${n.x0}px;top:${n.y0}px;width:${pw}px;height:${ph}px;`;
      const item = part.item;
      const sub = el('div', {
        class: item ? 'subtile' : 'subtile rest',
        style: item ? `${style}background:${this.colorFor(item)};` : style,
        'data-testid': 'treemap-subtile',
        'data-scope': item ? item.scope : null,
      });
      if (item && pw >= 34 && ph >= 13) sub.append(el('span', { class: 'name' }, item.name));
      // Its bytes below its name where a second line fits (32 MiB parts had shown their names alone: trial AM).
      if (item && pw >= 40 && ph >= 26) sub.append(el('span', { class: 'bytes' }, formatBytes(item.figures[figure])));
      if (item) {
        // A named part is selected by a click on it (it had taken three: the tile, a double click, then
        // the part's own tile), and a double click opens the tile's scope with it selected.
        sub.classList.add('clickable');
        sub.title = `${item.name}: ${formatBytes(item.figures[figure])} · click to select it, double click to open ${child.name}`;
        sub.addEventListener('click', (ev) => {
          ev.stopPropagation();
          this.selection.select(item.scope);
        });
        sub.addEventListener('dblclick', (ev) => {
          ev.stopPropagation();
          this.selection.set({ focus: child.scope, selected: item.scope });
        });
      }
      box.append(sub);
    }
    return box;
  }

  /** The tooltip's line on what a tile holds: its largest parts. */
  private insideTitle(child: ScopeChild): string {
    const parts = this.insideParts(child);
    if (!parts.length) return '';
    const figure = this.sizeFigure;
    const named = parts.slice(0, INSIDE_TITLE_NAMES).map((c) => `${c.name} ${formatBytes(c.figures[figure])}`);
    return `holds: ${named.join(', ')}${parts.length > INSIDE_TITLE_NAMES ? ', …' : ''}`;
  }

  /** Lists the children folded into "(N more)" so that each can still be selected. */
  private toggleMoreList(): void {
    const list = this.moreList;
    if (!list.classList.contains('hidden')) {
      list.classList.add('hidden');
      this.moreButton.setAttribute('aria-expanded', 'false');
      return;
    }
    clear(list);
    const figure = this.sizeFigure;
    const shown = this.folded.slice(0, MORE_LIST_MAX);
    for (const child of shown) {
      const item = el(
        'button',
        { type: 'button', class: 'more-item', 'data-testid': 'treemap-more-item', 'data-scope': child.scope, title: child.scope },
        el('span', { class: 'name' }, child.name),
        el('span', { class: 'muted' }, formatBytes(child.figures[figure])),
      );
      item.addEventListener('click', () => this.selection.select(child.scope));
      item.addEventListener('dblclick', () => {
        if (child.has_children) this.selection.drill(child.scope);
      });
      list.append(item);
    }
    if (this.folded.length > shown.length) {
      list.append(el('div', { class: 'muted' }, `and ${formatCount(this.folded.length - shown.length)} smaller`));
    }
    list.classList.remove('hidden');
    this.moreButton.setAttribute('aria-expanded', 'true');
    this.updateSelected();
  }

  private colorFor(child: ScopeChild): string {
    if (this.colorSelect.value === 'op_type') {
      if (child.top_op_type) this.shownOps.add(child.top_op_type);
      return colorForName(child.top_op_type);
    }
    return CATEGORY_COLORS[dominantCategory(child.categories)];
  }

  private renderCrumbs(data: ScopesResponse): void {
    data.path.forEach((crumb, i) => {
      if (i > 0) this.crumbs.append(el('span', { class: 'sep', 'aria-hidden': 'true' }, '/'));
      const last = i === data.path.length - 1;
      const button = el('button', { type: 'button', 'aria-current': last ? 'page' : null, 'data-scope': crumb.scope }, crumb.name);
      button.addEventListener('click', () => this.selection.drill(crumb.scope));
      this.crumbs.append(button);
    });
    // A deep path scrolls sideways: show its end, the scope in view.
    this.crumbs.scrollLeft = this.crumbs.scrollWidth;
  }

  private renderNotes(nonPositive: number, data: ScopesResponse): void {
    const parts = [
      `${countOf(data.children.length, 'child', 'children')}, ${formatBytes(data.figures[this.sizeFigure])} ${this.figureLabel()}`,
    ];
    if (nonPositive > 0) parts.push(`${formatCount(nonPositive)} hold nothing ${this.figureLabel()} (not drawn)`);
    parts.push('hatched tiles are "(self)": bytes of the node named like the scope itself');
    this.note.textContent = parts.join(' · ');
  }

  private renderLegend(tiles: Tile<ScopeChild>[]): void {
    if (this.colorSelect.value === 'category') {
      for (const name of CATEGORY_NAMES) {
        this.legend.append(el('span', {}, el('span', { class: 'swatch', style: `background:${CATEGORY_COLORS[name]}` }), name));
      }
      this.legend.append(el('span', { class: 'muted' }, '(dominant category at peak; categories are heuristic)'));
      return;
    }
    // Every op type a tile or a part inside one is coloured by (the tiles' alone had left the parts' colours
    // unnamed: trial AM): the tiles' first, largest first, then their parts' (review AK).
    const ops = new Set<string>();
    for (const t of tiles) if (t.type === 'item' && t.item.top_op_type && this.shownOps.has(t.item.top_op_type)) ops.add(t.item.top_op_type);
    for (const op of this.shownOps) ops.add(op);
    for (const op of [...ops].slice(0, LEGEND_OPS)) {
      this.legend.append(el('span', {}, el('span', { class: 'swatch', style: `background:${colorForName(op)}` }), op));
    }
  }

  /** Restyles the selected tile without re-laying out the treemap. */
  private updateSelected(): void {
    const selected = this.selection.get().selected;
    for (const [scope, node] of this.tileByScope) {
      const on = scope === selected;
      node.classList.toggle('selected', on);
      node.setAttribute('aria-selected', on ? 'true' : 'false');
    }
    // Tab comes back to the selected tile, else to the largest.
    this.setTabStop((selected !== null ? this.tileByScope.get(selected) : undefined) ?? this.stops[0] ?? null);
    for (const part of this.element.querySelectorAll<HTMLElement>('.subtile.clickable')) {
      part.classList.toggle('selected', part.dataset.scope === selected);
    }
    for (const item of this.moreList.querySelectorAll<HTMLElement>('.more-item')) {
      item.setAttribute('aria-pressed', item.dataset.scope === selected ? 'true' : 'false');
    }
    this.drillButton.disabled = this.drillTarget() === null;
  }
}
