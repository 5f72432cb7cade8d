// Compare mode's curves: step A and baseline step B overlaid, each step's time
// scaled to its own length (x: 0..100% of the step), both peaks marked, and the
// selected scope's own bytes in each step; hover reads both at that point.

import { scaleLinear } from 'd3-scale';
import { byteAxis } from '../lib/byte-ticks';
import { select, type Selection as D3Selection } from 'd3-selection';
import { area, curveStepAfter, line } from 'd3-shape';
import type { CompareSide, CurveResponse } from '../api';
import { el, setLoading, showPanelError } from '../dom';
import { formatBytes, formatBytesDelta, formatPercent, formatTime } from '../format';
import { bothAbsolute, overlayAt, overlayCurve, ownLengthFractions, type OverlayCurve } from '../lib/compare';
import type { HighlightSeries } from '../lib/curve-data';
import { CURVE_HEIGHT } from './curve';
import { onResize } from './resize';

const HEIGHT = CURVE_HEIGHT;
const MARGIN = { top: 18, right: 14, bottom: 20, left: 66 };

type Side = 'a' | 'b';

export class CompareCurveView {
  readonly element: HTMLElement;
  private readonly svgNode: SVGSVGElement;
  private readonly svg: D3Selection<SVGSVGElement, unknown, null, undefined>;
  private readonly body: HTMLElement;
  private readonly legend = el('div', { class: 'legend' });
  private readonly caption = el('span', { class: 'muted shrink' });
  private readonly tooltip = el('div', { class: 'curve-tooltip hidden', role: 'status' });
  private sides: { a: CompareSide; b: CompareSide } | null = null;
  private curves: { a: CurveResponse | null; b: CurveResponse | null } = { a: null, b: null };
  private overlays: { a: OverlayCurve | null; b: OverlayCurve | null } = { a: null, b: null };
  private highlights: { a: HighlightSeries | null; b: HighlightSeries | null } = { a: null, b: null };
  private relative = false;
  private x = scaleLinear();
  private y = scaleLinear();

  constructor() {
    this.svgNode = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svgNode.setAttribute('class', 'curve-svg');
    this.svgNode.setAttribute('role', 'img');
    this.svgNode.setAttribute('aria-label', 'Memory of both steps, each over its own length');
    this.svgNode.style.height = `${HEIGHT}px`;
    this.svg = select(this.svgNode);
    this.body = el('div', { class: 'panel-body', 'data-testid': 'compare-curve', style: 'position:relative' }, this.svgNode, this.tooltip);
    this.element = el(
      'section',
      { class: 'panel curve-panel', 'aria-label': 'Memory of both steps' },
      el('div', { class: 'panel-toolbar one-row' }, el('h2', {}, 'Memory over each step'), this.caption),
      this.body,
      this.legend,
    );
    this.svgNode.addEventListener('pointermove', (ev) => this.showHover(ev));
    this.svgNode.addEventListener('pointerleave', () => {
      this.svg.select('g.hover').selectAll('*').remove();
      this.tooltip.classList.add('hidden');
    });
    onResize(this.svgNode, () => this.draw(), true);
  }

  /** Width in pixels of the plot: how many curve points are worth asking for. */
  plotWidth(): number {
    const w = this.svgNode.clientWidth || this.element.clientWidth || 900;
    return Math.max(16, w - MARGIN.left - MARGIN.right);
  }

  setLoading(loading: boolean): void {
    setLoading(this.element, loading);
  }

  setError(message: string | null): void {
    showPanelError(this.element, message);
  }

  /** Both steps' curves (null for a side without one, or not loaded); `sides` names them. */
  setCurves(sides: { a: CompareSide; b: CompareSide } | null, a: CurveResponse | null, b: CurveResponse | null): void {
    this.sides = sides;
    this.curves = { a, b };
    this.relative = !!a && !!b && !bothAbsolute(a, b);
    this.overlays = { a: a ? overlayCurve(a, this.relative) : null, b: b ? overlayCurve(b, this.relative) : null };
    this.highlights = { a: null, b: null };
    this.draw();
  }

  /** The selected scope's own bytes in each step (null where that step has no such scope). */
  setHighlights(a: HighlightSeries | null, b: HighlightSeries | null): void {
    if (a === this.highlights.a && b === this.highlights.b) return;
    this.highlights = { a, b };
    this.draw();
  }

  private offset(side: Side): number {
    const c = this.curves[side];
    return !this.relative && c && c.absolute && c.start_bytes !== null ? c.start_bytes : 0;
  }

  private draw(): void {
    const svg = this.svg;
    svg.selectAll('*').remove();
    this.legend.replaceChildren();
    this.tooltip.classList.add('hidden');
    const { a, b } = this.overlays;
    const sides = this.sides;
    this.body.dataset.sides = [a ? 'a' : '', b ? 'b' : ''].join('');
    if (!sides || (!a && !b)) {
      this.caption.textContent = sides ? 'neither step has a memory curve (no allocation records)' : '';
      return;
    }
    const width = Math.max(200, this.svgNode.clientWidth || 900);
    svg.attr('viewBox', `0 0 ${width} ${HEIGHT}`);
    let yMin = 0;
    let yMax = 1;
    for (const o of [a, b]) for (const v of o?.y ?? []) (yMin = Math.min(yMin, v)), (yMax = Math.max(yMax, v));
    this.x = scaleLinear().domain([0, 1]).range([MARGIN.left, width - MARGIN.right]);
    const bytes = byteAxis(yMin, yMax * 1.1, 5);
    this.y = scaleLinear().domain(bytes.domain).range([HEIGHT - MARGIN.bottom, MARGIN.top]);
    const { x, y } = this;
    const captionText = [
      'x: each step’s time as a share of its own length',
      this.relative ? 'bytes over each step’s start (a step has no allocator baseline)' : 'absolute bytes in use',
    ].join(' · ');
    this.caption.textContent = captionText;
    this.caption.title = captionText;

    const grid = svg.append('g').attr('class', 'grid');
    const axis = svg.append('g').attr('class', 'axis');
    for (const t of bytes.ticks) {
      grid.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', y(t)).attr('y2', y(t));
      axis.append('text').attr('x', MARGIN.left - 6).attr('y', y(t) + 3).attr('text-anchor', 'end').text(this.relative ? formatBytesDelta(t) : formatBytes(t));
    }
    for (const t of x.ticks(5)) {
      axis.append('text').attr('x', x(t)).attr('y', HEIGHT - 6).attr('text-anchor', 'middle').text(formatPercent(t));
    }

    // B is drawn first, so that A lies over it; the legend reads A, then B.
    const legendItems: Record<'a' | 'b', HTMLElement | null> = { a: null, b: null };
    for (const side of ['b', 'a'] as const) {
      const o = this.overlays[side];
      const info = sides[side];
      const label = `${side.toUpperCase()}: ${info.run} · ${info.tag}`;
      if (!o) {
        legendItems[side] = el('span', { class: 'muted' }, `${label}: no curve`);
        continue;
      }
      const idx = o.x.map((_v, i) => i);
      const h = this.highlights[side];
      if (h && h.bytes.length === h.t_us.length && h.bytes.length > 0) {
        const hx = ownLengthFractions(h.t_us, o.duration_us);
        const offset = this.offset(side);
        const band = area<number>()
          .curve(curveStepAfter)
          .x((i) => x(hx[i]!))
          .y0(() => y(offset))
          .y1((i) => y(offset + h.bytes[i]!));
        svg
          .append('path')
          .attr('class', `highlight highlight-${side}`)
          .attr('data-testid', `compare-highlight-${side}`)
          .attr('d', band(h.t_us.map((_v, i) => i)))
          .append('title')
          .text(`${h.scope} in ${label}`);
      }
      const path = line<number>()
        .curve(curveStepAfter)
        .x((i) => x(o.x[i]!))
        .y((i) => y(o.y[i]!));
      svg
        .append('path')
        .attr('class', `compare-line compare-line-${side}`)
        .attr('data-testid', `compare-curve-${side}`)
        .attr('data-duration-us', String(o.duration_us))
        .attr('d', path(idx));
      if (o.peak) {
        const peak = svg.append('g').attr('class', `compare-peak compare-peak-${side}`);
        peak.append('circle').attr('cx', x(o.peak.x)).attr('cy', y(o.peak.y)).attr('r', 3.5);
        peak.append('title').text(`${label}: peak ${this.relative ? formatBytesDelta(o.peak.y) : formatBytes(o.peak.y)}`);
      }
      legendItems[side] = el(
        'span',
        { 'data-testid': `compare-legend-${side}` },
        el('span', { class: `swatch swatch-${side}` }),
        `${label} (${formatTime(o.duration_us)}${o.peak ? `, peak ${this.relative ? formatBytesDelta(o.peak.y) : formatBytes(o.peak.y)}` : ''})`,
      );
    }
    this.legend.append(...[legendItems.a, legendItems.b].filter((item): item is HTMLElement => item !== null));
    svg.append('g').attr('class', 'hover');
  }

  private showHover(ev: PointerEvent): void {
    const { a, b } = this.overlays;
    if (!this.sides || (!a && !b)) return;
    const rect = this.svgNode.getBoundingClientRect();
    const vb = this.svgNode.viewBox.baseVal;
    const scale = vb && vb.width && rect.width ? vb.width / rect.width : 1;
    const px = (ev.clientX - rect.left) * scale;
    const [left, right] = this.x.range() as [number, number];
    const hover = this.svg.select<SVGGElement>('g.hover');
    hover.selectAll('*').remove();
    if (px < left || px > right) {
      this.tooltip.classList.add('hidden');
      return;
    }
    const f = this.x.invert(px);
    hover.append('line').attr('x1', px).attr('x2', px).attr('y1', MARGIN.top).attr('y2', HEIGHT - MARGIN.bottom);
    const lines: HTMLElement[] = [el('div', {}, el('b', {}, formatPercent(f)), ' of each step')];
    for (const side of ['a', 'b'] as const) {
      const o = this.overlays[side];
      const at = o ? overlayAt(o, f) : null;
      const name = `${side.toUpperCase()} (${this.sides[side].run} · ${this.sides[side].tag})`;
      lines.push(
        el('div', {}, at ? `${name}: ${this.relative ? formatBytesDelta(at.bytes) : formatBytes(at.bytes)} at ${formatTime(at.t_us)}` : `${name}: —`),
      );
    }
    this.tooltip.replaceChildren(...lines);
    this.tooltip.classList.remove('hidden');
    const bodyRect = this.body.getBoundingClientRect();
    const left0 = ev.clientX - bodyRect.left + 14;
    this.tooltip.style.left = `${Math.max(0, left0 > bodyRect.width - 260 ? ev.clientX - bodyRect.left - 270 : left0)}px`;
    this.tooltip.style.top = `${Math.max(0, ev.clientY - bodyRect.top - 10)}px`;
  }
}
