// The model's graph collapsed to the focused scope's children: dagre layout
// (once per response), boxes shaded by at-peak bytes, pan and wheel zoom.

import { select } from 'd3-selection';
import { zoom, zoomIdentity, type ZoomBehavior } from 'd3-zoom';
import type { GraphResponse } from '../api';
import { el, setLoading, showPanelError } from '../dom';
import { formatBytes, formatCount } from '../format';
import { byteShade } from '../lib/colors';
import { layoutGraph, type GraphLayout } from '../lib/graph-layout';
import { graphsDashboardHref } from '../lib/links';
import type { Selection } from '../selection';

const SVG_NS = 'http://www.w3.org/2000/svg';

function svgEl<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

const SOURCE_TEXT: Record<GraphResponse['source'], string> = {
  run_graph: 'edges from the run’s GraphDef',
  partition_graphs: 'edges from the step’s partition graphs',
  trace: 'no GraphDef: boxes from the trace, no edges',
};

export class GraphView {
  readonly element: HTMLElement;
  private readonly area = el('div', { class: 'graph-area panel-body', 'data-testid': 'graph' });
  private readonly svg = svgEl('svg', { role: 'group', 'aria-label': 'Graph of the focused scope' });
  private readonly viewport = svgEl('g');
  private readonly link = el('a', {
    class: 'link',
    'data-testid': 'graphs-dashboard-link',
    target: '_top',
    rel: 'noopener',
    href: '#',
  }, 'Open in Graphs dashboard');
  private readonly info = el('span', { class: 'muted' });
  private readonly fitButton = el('button', { type: 'button', title: 'Fit the whole graph in view' }, 'Fit');
  private readonly zoomBehavior: ZoomBehavior<SVGSVGElement, unknown>;
  private layout: GraphLayout | null = null;
  private boxById = new Map<string, SVGGElement>();

  constructor(
    private readonly selection: Selection,
    private readonly locationPath: () => string = () => window.location.pathname,
  ) {
    this.svg.append(this.viewport);
    this.area.append(this.svg);
    this.element = el(
      'section',
      { class: 'panel graph-panel', 'aria-label': 'Graph' },
      el('div', { class: 'panel-toolbar' }, el('h2', {}, 'Graph'), this.info, el('span', { class: 'spacer' }), this.fitButton, this.link),
      this.area,
    );
    this.zoomBehavior = zoom<SVGSVGElement, unknown>()
      .scaleExtent([0.05, 4])
      // The area's own size: d3's default reads SVG baseVal sizes, which 100%-sized SVGs do not give reliably.
      .extent(() => [
        [0, 0],
        [this.area.clientWidth || 500, this.area.clientHeight || 330],
      ])
      .on('zoom', (ev: { transform: { toString(): string } }) => this.viewport.setAttribute('transform', ev.transform.toString()));
    select(this.svg).call(this.zoomBehavior).on('dblclick.zoom', null);
    this.fitButton.addEventListener('click', () => this.fit());
    selection.subscribe((state, changed) => {
      if (changed.has('selected')) this.updateSelected();
      if (changed.has('run')) this.updateLink(state.run);
    });
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  setError(message: string | null): void {
    showPanelError(this.element, message);
  }

  setData(graph: GraphResponse | null): void {
    this.viewport.replaceChildren();
    this.boxById.clear();
    this.layout = graph ? layoutGraph(graph) : null;
    this.updateLink(graph?.graphs_dashboard_run ?? this.selection.get().run);
    if (!graph || !this.layout) {
      this.info.textContent = '';
      return;
    }
    const omitted = graph.omitted_nodes > 0 ? ` · ${formatCount(graph.omitted_nodes)} smaller folded into "(other)"` : '';
    this.info.textContent = `${formatCount(graph.nodes.length)} boxes · ${SOURCE_TEXT[graph.source] ?? graph.source}${omitted}`;
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
  }

  private draw(graph: GraphResponse, layout: GraphLayout): void {
    const maxBytes = graph.nodes.reduce((m, n) => Math.max(m, n.at_peak_bytes), 0);
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
      title.textContent = `${e.edge.source} → ${e.edge.target} (${formatCount(e.edge.count)} edge${e.edge.count === 1 ? '' : 's'})`;
      path.append(title);
      edges.append(path);
    }
    const boxes = svgEl('g');
    for (const p of layout.nodes) {
      const n = p.node;
      const shade = byteShade(n.at_peak_bytes, maxBytes);
      const g = svgEl('g', {
        class: `box ${n.kind}`,
        transform: `translate(${(p.x - p.width / 2).toFixed(1)},${(p.y - p.height / 2).toFixed(1)})`,
        'data-testid': 'graph-node',
        'data-id': n.id,
        tabindex: n.kind === 'other' ? -1 : 0,
        role: 'button',
      });
      g.append(
        svgEl('rect', { width: p.width, height: p.height, rx: n.kind === 'scope' ? 6 : 2, fill: 'var(--box)' }),
        svgEl('rect', { width: p.width, height: p.height, rx: n.kind === 'scope' ? 6 : 2, fill: 'var(--accent)', 'fill-opacity': (0.08 + 0.8 * shade).toFixed(3), stroke: 'none' }),
      );
      // Dark text on strongly shaded boxes keeps labels readable in both themes.
      const ink: Record<string, string> = shade > 0.55 ? { style: 'fill:#111' } : {};
      const name = svgEl('text', { x: 6, y: 14, ...ink });
      const maxChars = Math.floor((p.width - 10) / 6.3);
      name.textContent = n.name.length > maxChars ? `${n.name.slice(0, Math.max(1, maxChars - 1))}…` : n.name;
      const sub = svgEl('text', { x: 6, y: 27, class: 'sub', ...ink });
      sub.textContent = `${formatBytes(n.at_peak_bytes)}${n.op_type ? ` · ${n.op_type}` : ''}`;
      const title = svgEl('title');
      title.textContent = [
        n.id,
        `at peak ${formatBytes(n.at_peak_bytes)} · allocated ${formatBytes(n.allocated_bytes)} · output ${formatBytes(n.output_bytes)}`,
        `${formatCount(n.node_count)} node${n.node_count === 1 ? '' : 's'}${n.op_type ? ` · ${n.op_type}` : ''}`,
        n.kind === 'scope' ? 'double click to drill in' : '',
      ]
        .filter(Boolean)
        .join('\n');
      g.append(name, sub, title);
      if (n.kind !== 'other') {
        g.addEventListener('click', () => this.selection.select(n.id));
        g.addEventListener('dblclick', (ev) => {
          ev.stopPropagation();
          if (n.kind === 'scope') this.selection.drill(n.id);
        });
        g.addEventListener('keydown', (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            if (ev.shiftKey && n.kind === 'scope') this.selection.drill(n.id);
            else this.selection.select(n.id);
          }
        });
        this.boxById.set(n.id, g);
      }
      boxes.append(g);
    }
    this.viewport.append(defs, edges, boxes);
  }

  private fit(): void {
    const layout = this.layout;
    if (!layout || layout.width === 0) return;
    const w = this.area.clientWidth || 500;
    const h = this.area.clientHeight || 330;
    // Fit the whole graph, but never below a readable scale: a long chain then
    // fills the width and starts at the top, and the rest is a pan away.
    const fitAll = Math.min(w / layout.width, h / layout.height) * 0.95;
    const k = Math.min(1.2, Math.max(fitAll, Math.min(0.6, (w / layout.width) * 0.95)));
    const tx = (w - layout.width * k) / 2;
    const ty = layout.height * k <= h ? (h - layout.height * k) / 2 : 4;
    select(this.svg).call(this.zoomBehavior.transform, zoomIdentity.translate(tx, ty).scale(k));
  }

  /** Restyles boxes for a selection change; the layout is untouched. */
  private updateSelected(): void {
    const selected = this.selection.get().selected;
    for (const [id, g] of this.boxById) {
      const on = id === selected;
      g.classList.toggle('selected', on);
      g.setAttribute('aria-pressed', on ? 'true' : 'false');
    }
  }
}
