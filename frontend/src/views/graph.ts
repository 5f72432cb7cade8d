// The model's graph collapsed to the focused scope's children: dagre layout
// (once per response), boxes shaded by at-peak bytes, pan and wheel zoom.

import { ARROW_STEP, steppedIndex } from '../lib/roving';
import { select } from 'd3-selection';
import { zoom, zoomIdentity, zoomTransform, type ZoomBehavior } from 'd3-zoom';
import type { GraphNode, GraphResponse } from '../api';
import { el, setLoading, showPanelError } from '../dom';
import { countOf, formatCount } from '../format';
import { byteShade } from '../lib/colors';
import { fitTransform, layoutBounds, panIntoView, readableScale, type Bounds } from '../lib/graph-fit';
import { boxBytes, boxFiguresText, boxSubLabel, layoutGraph, type GraphLayout } from '../lib/graph-layout';
import { graphsDashboardHref } from '../lib/links';
import type { Selection } from '../selection';

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Label sizes (layout pixels) and the smallest size a fit may show them at (screen pixels). */
const NAME_PX = 12;
const SUB_PX = 11;
const MIN_LABEL_PX = 9;
/** A fit never zooms out further than this: the smaller label stays readable. */
export const MIN_FIT_SCALE = readableScale(SUB_PX, MIN_LABEL_PX);
const MAX_FIT_SCALE = 1.25;
const FIT_PADDING = 8;

function svgEl<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

const SOURCE_TEXT: Record<GraphResponse['source'], string> = {
  run_graph: 'edges from the run’s graph (its GraphDef, TF2 function graphs or Keras model)',
  trace: 'no GraphDef: boxes from the trace, no edges',
};

export class GraphView {
  readonly element: HTMLElement;
  private readonly area = el('div', { class: 'graph-area panel-body', 'data-testid': 'graph' });
  private readonly svg = svgEl('svg', { role: 'group', 'aria-label': 'Graph of the focused scope' });
  private readonly viewport = svgEl('g');
  private readonly link = el('a', {
    // Shrinks with an ellipsis: a long run's name had run out of the panel (its title keeps it whole).
    class: 'link shrink',
    'data-testid': 'graphs-dashboard-link',
    target: '_top',
    rel: 'noopener',
    href: '#',
  }, 'Graphs dashboard');
  private readonly info = el('div', { class: 'graph-note' });
  private readonly fitButton = el(
    'button',
    { type: 'button', title: 'Back to the starting view: all of the graph when it fits at a readable size, else its biggest box. Drag to pan, wheel to zoom.' },
    'Reset view',
  );
  private readonly zoomBehavior: ZoomBehavior<SVGSVGElement, unknown>;
  private layout: GraphLayout | null = null;
  private bounds: Bounds | null = null;
  private anchor: { x: number; y: number } | null = null;
  /** Each box's rectangle in layout coordinates, to pan one into view without reading the DOM. */
  private rectById = new Map<string, Bounds>();
  /** The view's size at the last fit (reading it again on a click would force a layout). */
  private view = { width: 500, height: 330 };
  /** True from a pointer press in the graph until its click is done: the box under the pointer must not move then (double click). */
  private pointerActive = false;
  private boxById = new Map<string, SVGGElement>();
  /** False for a trace without allocation records: boxes show allocated bytes, never "at peak 0 B". */
  private hasCurve = true;
  private graph: GraphResponse | null = null;
  /** The box whose click changed the grouping to name scopes (said in the caption until it is by layer again). */
  private switchedFor: string | null = null;

  constructor(
    private readonly selection: Selection,
    private readonly locationPath: () => string = () => window.location.pathname,
  ) {
    this.svg.append(this.viewport);
    this.area.append(this.svg);
    this.element = el(
      'section',
      { class: 'panel graph-panel', 'data-testid': 'graph-panel', 'aria-label': 'Graph' },
      el('div', { class: 'panel-toolbar one-row' }, el('h2', {}, 'Graph'), el('span', { class: 'spacer' }), this.fitButton, this.link),
      this.area,
      this.info,
    );
    this.zoomBehavior = zoom<SVGSVGElement, unknown>()
      .scaleExtent([MIN_FIT_SCALE, 4])
      // The area's own size: d3's default reads SVG baseVal sizes, which 100%-sized SVGs do not give reliably.
      .extent(() => [
        [0, 0],
        [this.area.clientWidth || 500, this.area.clientHeight || 330],
      ])
      .on('zoom', (ev: { transform: { toString(): string } }) => this.viewport.setAttribute('transform', ev.transform.toString()));
    select(this.svg).call(this.zoomBehavior).on('dblclick.zoom', null);
    this.svg.addEventListener('pointerdown', () => {
      this.pointerActive = true;
    }, true);
    const release = () => setTimeout(() => {
      this.pointerActive = false;
    }, 0);
    this.svg.addEventListener('pointerup', release, true);
    this.svg.addEventListener('pointercancel', release, true);
    this.fitButton.addEventListener('click', () => this.fit());
    selection.subscribe((state, changed) => {
      if (changed.has('selected')) {
        this.updateSelected();
        // Selected elsewhere (treemap, keyboard): show where it sits in the graph.
        if (state.selected !== null && !this.pointerActive) this.reveal(state.selected);
      }
      if (changed.has('run')) this.updateLink(state.run);
    });
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  setError(message: string | null): void {
    showPanelError(this.element, message);
  }

  /** Whether the step has a curve (boxes shaded and labelled by at peak, else by allocated bytes); redraws when it changes. */
  setHasCurve(hasCurve: boolean): void {
    if (hasCurve === this.hasCurve) return;
    this.hasCurve = hasCurve;
    if (this.graph) this.setData(this.graph);
  }

  setData(graph: GraphResponse | null): void {
    this.graph = graph;
    this.viewport.replaceChildren();
    this.boxById.clear();
    this.rectById.clear();
    this.layout = graph ? layoutGraph(graph, this.hasCurve) : null;
    this.bounds = this.layout ? layoutBounds(this.layout) : null;
    // The box holding the most at the peak: the view starts around it when the graph is too big to show whole.
    let biggest: GraphLayout['nodes'][number] | null = null;
    for (const p of this.layout?.nodes ?? []) if (!biggest || boxBytes(p.node, this.hasCurve) > boxBytes(biggest.node, this.hasCurve)) biggest = p;
    this.anchor = biggest ? { x: biggest.x, y: biggest.y } : null;
    this.updateLink(graph?.graphs_dashboard_run ?? this.selection.get().run);
    if (!graph || !this.layout) {
      this.info.textContent = '';
      return;
    }
    const omitted = graph.omitted_nodes > 0 ? ` · ${formatCount(graph.omitted_nodes)} smaller folded into "(other)"` : '';
    // The graph keeps the graph's own name scopes: in the grouping by layer the treemap's figures
    // for a scope (gradients folded in) differ from its box's.
    const group = this.selection.get().group;
    const layers = group === 'layer' ? ' · boxes are the graph’s name scopes (the treemap folds gradients and updates into layers)' : '';
    // Why the grouping changed, where a box's click changed it (trial AM: it had changed unsaid).
    // (Nor once the box is not in the graph shown: another step's, review AK.)
    if (group === 'layer' || !graph.nodes.some((n) => n.id === this.switchedFor)) this.switchedFor = null;
    const switched = this.switchedFor !== null
      ? ` · grouped by name scope to show ${this.switchedFor}, whose ops the grouping by layer folds into their layers`
      : '';
    // A run's graph that joins none of these boxes (a Keras model's config beside a profile's function
    // scopes) draws no edge: said so, not promised.
    const source = graph.source === 'run_graph' && graph.edges.length === 0 && graph.nodes.length > 1
      ? 'the run’s graph joins none of these boxes: no edges'
      : SOURCE_TEXT[graph.source] ?? graph.source;
    this.info.textContent = `${countOf(graph.nodes.length, 'box', 'boxes')} · ${source}${omitted}${layers}${switched}`;
    this.draw(graph, this.layout);
    this.fit();
    this.updateSelected();
  }

  private updateLink(run: string | null): void {
    if (run === null) {
      this.link.setAttribute('href', '#');
      this.link.setAttribute('aria-disabled', 'true');
      return;
    }
    this.link.removeAttribute('aria-disabled');
    this.link.setAttribute('href', graphsDashboardHref(this.locationPath(), run));
    // TensorBoard 2.21's dashboard reads the run from the link but draws its first run: say which to pick.
    this.link.textContent = `Graphs dashboard (run ${run})`;
    this.link.title = `TensorBoard's Graphs dashboard. Where it opens on another run, pick ${run} in its Run menu.`;
  }

  private draw(graph: GraphResponse, layout: GraphLayout): void {
    const hasCurve = this.hasCurve;
    const maxBytes = graph.nodes.reduce((m, n) => Math.max(m, boxBytes(n, hasCurve)), 0);
    const edges = svgEl('g');
    const defs = svgEl('defs');
    const marker = svgEl('marker', { id: 'mem-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' });
    marker.append(svgEl('path', { d: 'M0,0 L10,5 L0,10 z', fill: 'var(--edge)' }));
    defs.append(marker);
    for (const e of layout.edges) {
      if (e.points.length < 2) continue;
      const d = e.points.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join('');
      const path = svgEl('path', { class: 'edge', d, 'marker-end': 'url(#mem-arrow)', 'stroke-width': Math.min(4, 1 + Math.log2(e.edge.count)) });
      const title = svgEl('title');
      title.textContent = `${e.edge.source} → ${e.edge.target} (${countOf(e.edge.count, 'edge')})`;
      path.append(title);
      edges.append(path);
    }
    const boxes = svgEl('g');
    for (const p of layout.nodes) {
      const n = p.node;
      const shade = byteShade(boxBytes(n, hasCurve), maxBytes);
      const g = svgEl('g', {
        class: `box ${n.kind}`,
        transform: `translate(${(p.x - p.width / 2).toFixed(1)},${(p.y - p.height / 2).toFixed(1)})`,
        'data-testid': 'graph-node',
        'data-id': n.id,
        // One Tab stop for the whole graph (the selected box, else the first): arrows move between boxes.
        tabindex: -1,
        role: 'button',
        // Its name for a screen reader: the box's own, and its figures (the <title> tooltip is longer).
        'aria-label': `${n.name}: ${boxFiguresText(n, hasCurve)}`,
      });
      g.append(
        svgEl('rect', { width: p.width, height: p.height, rx: n.kind === 'scope' ? 6 : 2, fill: 'var(--box)' }),
        svgEl('rect', { width: p.width, height: p.height, rx: n.kind === 'scope' ? 6 : 2, fill: 'var(--accent)', 'fill-opacity': (0.08 + 0.8 * shade).toFixed(3), stroke: 'none' }),
      );
      // Dark text on strongly shaded boxes keeps labels readable in both themes.
      const ink: Record<string, string> = shade > 0.55 ? { style: 'fill:#111' } : {};
      const name = svgEl('text', { x: 6, y: 15, ...ink });
      const maxChars = Math.floor((p.width - 10) / (NAME_PX * 0.58));
      name.textContent = n.name.length > maxChars ? `${n.name.slice(0, Math.max(1, maxChars - 1))}…` : n.name;
      const sub = svgEl('text', { x: 6, y: 30, class: 'sub', ...ink });
      const subText = boxSubLabel(n, hasCurve);
      const maxSub = Math.floor((p.width - 10) / (SUB_PX * 0.58));
      sub.textContent = subText.length > maxSub ? `${subText.slice(0, Math.max(1, maxSub - 1))}…` : subText;
      const title = svgEl('title');
      title.textContent = [
        n.id,
        boxFiguresText(n, hasCurve),
        `${countOf(n.node_count, 'node')}${n.op_type ? ` · ${n.op_type}` : ''}`,
        n.in_group === false ? 'no layer of the grouping by layer (its ops are in their layers): a click shows it grouped by name scope' : '',
        n.kind === 'scope' ? 'double click (Shift+Enter) to drill in' : '',
      ]
        .filter(Boolean)
        .join('\n');
      g.append(name, sub, title);
      if (n.kind !== 'other') {
        g.addEventListener('click', () => this.pick(n, false));
        g.addEventListener('dblclick', (ev) => {
          ev.stopPropagation();
          if (n.kind === 'scope') this.pick(n, true);
        });
        // Tabbing to a box out of view pans to it.
        g.addEventListener('focus', () => {
          if (!this.pointerActive) this.reveal(n.id);
        });
        g.addEventListener('keydown', (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            this.pick(n, ev.shiftKey && n.kind === 'scope');
          } else if (ARROW_STEP[ev.key] !== undefined) {
            ev.preventDefault();
            this.moveFocus(n.id, ARROW_STEP[ev.key]!);
          }
        });
        this.boxById.set(n.id, g);
        this.rectById.set(n.id, { x0: p.x - p.width / 2, y0: p.y - p.height / 2, x1: p.x + p.width / 2, y1: p.y + p.height / 2 });
      }
      boxes.append(g);
    }
    this.viewport.append(defs, edges, boxes);
  }

  /**
   * Selects (or drills into) a box's scope. A box the current grouping does not hold (grouped by
   * layer, `gradient_tape`: its ops are in their layers) is shown grouped by name scope, the
   * graph's own, rather than asked of a grouping that has no such scope.
   */
  private pick(n: GraphNode, drill: boolean): void {
    if (n.in_group === false) {
      this.switchedFor = n.id;
      const focus = drill ? n.id : this.selection.get().focus;
      this.selection.set({ group: 'scope', focus, selected: n.id });
    } else if (drill) {
      this.selection.drill(n.id);
    } else {
      this.selection.select(n.id);
    }
  }

  private fit(): void {
    const bounds = this.bounds;
    if (!bounds) return;
    const w = this.area.clientWidth || 500;
    const h = this.area.clientHeight || 330;
    this.view = { width: w, height: h };
    // The whole graph (edges included) when it fits with labels of at least MIN_LABEL_PX;
    // otherwise that readable zoom around the biggest box, and the rest is a drag away.
    const t = fitTransform(bounds, w, h, { minScale: MIN_FIT_SCALE, maxScale: MAX_FIT_SCALE, padding: FIT_PADDING, anchor: this.anchor });
    // Wheel zoom may go out to the whole graph (an overview), never further.
    const overview = Math.min((w - 2 * FIT_PADDING) / Math.max(1, bounds.x1 - bounds.x0), (h - 2 * FIT_PADDING) / Math.max(1, bounds.y1 - bounds.y0));
    this.zoomBehavior.scaleExtent([Math.min(MIN_FIT_SCALE, Math.max(0.05, overview)), 4]);
    select(this.svg).call(this.zoomBehavior.transform, zoomIdentity.translate(t.tx, t.ty).scale(t.k));
  }

  /** Pans (same zoom) so that the box of `id` is in view; nothing moves when it already is. */
  private reveal(id: string): void {
    const rect = this.rectById.get(id);
    if (!rect) return;
    const current = zoomTransform(this.svg);
    const t = panIntoView(rect, { k: current.k, tx: current.x, ty: current.y }, this.view.width, this.view.height, 2);
    if (t) select(this.svg).call(this.zoomBehavior.transform, zoomIdentity.translate(t.tx, t.ty).scale(t.k));
  }

  /** Restyles boxes for a selection change; the layout is untouched. */
  private updateSelected(): void {
    const selected = this.selection.get().selected;
    for (const [id, g] of this.boxById) {
      const on = id === selected;
      g.classList.toggle('selected', on);
      g.setAttribute('aria-pressed', on ? 'true' : 'false');
    }
    this.setTabStop(selected !== null && this.boxById.has(selected) ? selected : this.boxById.keys().next().value ?? null);
  }

  /** The one box Tab reaches (roving tabindex): 60 Tab presses had crossed a 138-box graph. */
  private setTabStop(id: string | null): void {
    for (const [boxId, g] of this.boxById) g.setAttribute('tabindex', boxId === id ? '0' : '-1');
  }

  /** Moves the focus `step` boxes on (largest first, as drawn), or to the first or last. */
  private moveFocus(from: string, step: number): void {
    const ids = [...this.boxById.keys()];
    const id = ids[steppedIndex(ids.indexOf(from), ids.length, step)];
    if (id === undefined) return;
    this.setTabStop(id);
    this.boxById.get(id)!.focus();
  }
}
