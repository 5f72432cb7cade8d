// Memory over the step: band of min..max per bucket, the max as a step line,
// the peak marked, hover for time/bytes/op, drag to zoom, double click to reset,
// optional stack of the top scopes, the selected scope's share and time span.
// Zoomed in, it draws the window's own curve once the controller has it
// (lib/curve-window decides which data to draw), the whole step's meanwhile.

import { scaleLinear } from 'd3-scale';
import { byteAxis } from '../lib/byte-ticks';
import { select, type Selection as D3Selection } from 'd3-selection';
import { area, curveStepAfter, line } from 'd3-shape';
import type { CurveResponse, TimeSpan } from '../api';
import { el, setLoading, showPanelError } from '../dom';
import { formatBytes, formatBytesDelta, formatPercent, formatTime } from '../format';
import { capacityPlacement, readingsAt, reservedSeries, shareOfCapacity } from '../lib/allocator-readings';
import { colorForRank } from '../lib/colors';
import { asRise, nearestIndex, relativeBytes, stackSeries, withinPlot, zoomRange, type HighlightSeries, type StackedLayer } from '../lib/curve-data';
import { curveToDraw, highlightOn, type DrawnCurve } from '../lib/curve-window';
import type { Selection } from '../selection';
import { onResize } from './resize';

/** Plot height: low enough that the treemap and graph start on the first screen at 1280x800. */
export const CURVE_HEIGHT = 140;
const HEIGHT = CURVE_HEIGHT;
const MARGIN = { top: 18, right: 14, bottom: 20, left: 66 };
const STACK_TOP = 8;

export type { HighlightSeries } from '../lib/curve-data';

type SvgSel = D3Selection<SVGSVGElement, unknown, null, undefined>;

export class CurveView {
  readonly element: HTMLElement;
  private readonly body: HTMLElement;
  private readonly svgNode: SVGSVGElement;
  private readonly svg: SvgSel;
  private readonly tooltip = el('div', { class: 'curve-tooltip hidden', role: 'status' });
  private readonly stackToggle = el('input', { type: 'checkbox', 'data-testid': 'stack-toggle', id: 'mem-stack' });
  private readonly resetButton = el('button', { type: 'button', title: 'Show the whole step (or double click the curve)' }, 'Reset zoom');
  private readonly caption = el('span', { class: 'muted shrink' });
  private readonly note = el('div', { class: 'curve-note muted hidden', 'data-testid': 'curve-note' });
  /** Stacked layers' names; empty (and not shown) unless the curve is stacked. */
  private readonly legend = el('div', { class: 'legend' });
  /** The selected scope's swatch, in the toolbar so that a selection never moves the panels below. */
  private readonly selectionLegend = el('span', { class: 'legend legend-selection shrink' });
  /** Groups redrawn alone when only the selection's highlight or time span changes. */
  private spanLayer: D3Selection<SVGGElement, unknown, null, undefined> | null = null;
  private highlightLayer: D3Selection<SVGGElement, unknown, null, undefined> | null = null;
  /** The step's curve and the zoomed window's as the routes answered them; `curve`/`windowed` as drawn (`shown`). */
  private answered: CurveResponse | null = null;
  private answeredWindow: CurveResponse | null = null;
  /** The whole step's curve: the extent, the peak, the scale, and what is drawn when no window data fits. */
  private curve: (CurveResponse & { rise_from?: number }) | null = null;
  /** The curve of a zoomed window (route asked with start_us/end_us), or null. */
  private windowed: CurveResponse | null = null;
  /** What the last draw drew (the hover and the highlight read it). */
  private drawn: DrawnCurve | null = null;
  private layers: StackedLayer[] = [];
  private highlight: HighlightSeries | null = null;
  private span: TimeSpan | null = null;
  private dragStartPx: number | null = null;
  /** The point the keyboard reads (an index into the drawn points), null until a key moves it. */
  private cursor: number | null = null;
  private x = scaleLinear();
  /** Told the plot's new width after a resize, so the controller can ask for a matching number of points. */
  onWidthChange: ((plotWidth: number) => void) | null = null;
  private y = scaleLinear();

  constructor(private readonly selection: Selection) {
    this.svgNode = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svgNode.setAttribute('class', 'curve-svg');
    this.svgNode.setAttribute('role', 'img');
    this.svgNode.setAttribute('aria-label', 'Memory in use over the step. Arrow keys step through it (with Shift, ten points), Home and End go to its ends, P to its peak, Escape hides the reading.');
    // The keyboard reads the curve point by point, as the pointer does (its reading is the tooltip, a live region).
    this.svgNode.setAttribute('tabindex', '0');
    this.svgNode.style.height = `${HEIGHT}px`;
    this.svg = select(this.svgNode);
    this.body = el('div', { class: 'panel-body', 'data-testid': 'curve', style: 'position:relative' }, this.svgNode, this.tooltip, this.note);
    this.element = el(
      'section',
      { class: 'panel curve-panel', 'aria-label': 'Memory over time' },
      el(
        'div',
        { class: 'panel-toolbar one-row' },
        el('h2', {}, 'Memory over the step'),
        this.caption,
        this.selectionLegend,
        el('span', { class: 'spacer' }),
        el('label', { for: 'mem-stack' }, this.stackToggle, `Stack top ${STACK_TOP} scopes`),
        this.resetButton,
      ),
      this.body,
      this.legend,
    );
    this.stackToggle.addEventListener('change', () => this.draw());
    this.resetButton.addEventListener('click', () => this.selection.set({ timeRange: null }));
    this.installPointer();
    selection.subscribe((_state, changed) => {
      if (changed.has('peakMode')) this.shown();
      if (changed.has('timeRange') || changed.has('peakMode')) this.draw();
    });
    onResize(this.svgNode, () => {
      this.draw();
      this.onWidthChange?.(this.plotWidth());
    }, true);
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

  /** A line shown in place of the plot (a step without a curve says why); null removes it. */
  setNote(text: string | null): void {
    this.note.textContent = text ?? '';
    this.note.classList.toggle('hidden', text === null);
  }

  setCurve(curve: CurveResponse | null): void {
    this.answered = curve;
    this.cursor = null;
    this.shown();
    this.draw();
  }

  /** The curve of a zoomed window: drawn while the visible range lies inside its window; null drops it. */
  setWindowCurve(windowed: CurveResponse | null): void {
    if (windowed === this.answeredWindow) return;
    this.answeredWindow = windowed;
    this.shown();
    this.draw();
  }

  /** The answers as drawn: in absolute bytes as they came, or as the rise over the step's start where the
   * summary shows the rise (`peakMode`). */
  private shown(): void {
    const rise = this.selection.get().peakMode === 'rise';
    this.curve = this.answered && rise ? asRise(this.answered) : this.answered;
    this.windowed = this.answeredWindow && rise ? asRise(this.answeredWindow) : this.answeredWindow;
  }

  setHighlight(series: HighlightSeries | null): void {
    if (series === this.highlight) return;
    this.highlight = series;
    this.drawOverlays();
  }

  setTimeSpan(span: TimeSpan | null): void {
    if (span === this.span || (span && this.span && span.start_us === this.span.start_us && span.end_us === this.span.end_us)) return;
    this.span = span;
    this.drawOverlays();
  }

  private offset(): number {
    const c = this.curve;
    return c && c.absolute && c.start_bytes !== null ? c.start_bytes : 0;
  }

  private draw(): void {
    const svg = this.svg;
    svg.selectAll('*').remove();
    this.spanLayer = null;
    this.highlightLayer = null;
    this.legend.replaceChildren();
    this.tooltip.classList.add('hidden');
    const step = this.curve;
    if (!step) {
      this.drawn = null;
      this.layers = [];
      this.caption.textContent = '';
      this.selectionLegend.replaceChildren();
      delete this.body.dataset.window;
      return;
    }
    const width = Math.max(200, this.svgNode.clientWidth || 900);
    svg.attr('viewBox', `0 0 ${width} ${HEIGHT}`);
    const range = this.selection.get().timeRange;
    const domain: [number, number] = range ? [range.start_us, range.end_us] : [0, Math.max(1, step.duration_us)];
    this.resetButton.disabled = range === null;
    // The points drawn: the zoomed window's own when loaded for this view, else the whole step's.
    const c = curveToDraw(step, this.windowed, range);
    this.drawn = c;
    // Test hook and a note for the curious: "start,end" of the window whose data is drawn, "" for the whole step.
    this.body.dataset.window = c.window ? `${c.window.start_us},${c.window.end_us}` : '';
    this.layers = stackSeries(c.series, STACK_TOP, c.source === 'window' ? step.series : undefined);
    const stacked = this.stackToggle.checked && this.layers.length > 0;
    const offset = this.offset();

    // The scale spans the whole step's values, so the window's data drawing in does not rescale the plot.
    let yMin = 0;
    let yMax = 1;
    for (const d of [step, c]) {
      for (let i = 0; i < d.t_us.length; i++) {
        yMin = Math.min(yMin, d.min_bytes[i]!);
        yMax = Math.max(yMax, d.max_bytes[i]!);
      }
    }
    if (stacked) {
      for (const l of this.layers) for (let i = 0; i < l.y1.length; i++) yMin = Math.min(yMin, offset + l.y1[i]!);
    }
    // The allocator's readings are absolute bytes: drawn where the curve is too (or as the rise over a known
    // start), not beside a curve relative to a start the allocator gave no baseline for (they ran off its top).
    const baselined = step.absolute || step.rise_from !== undefined;
    const readingsDrawn = c.snapshots.t_us.length > 1 && !stacked && baselined;
    // The allocator's reserved bytes (a thin line) and its limit, when near enough to draw without flattening the curve.
    const reserved = stacked || !baselined ? null : reservedSeries(c.snapshots);
    if (reserved) for (const b of reserved) yMax = Math.max(yMax, b);
    const capacity = step.capacity_bytes ?? null;
    const placement = capacityPlacement(capacity, yMax, step.absolute);
    if (placement === 'line') yMax = Math.max(yMax, capacity!);
    this.x = scaleLinear().domain(domain).range([MARGIN.left, width - MARGIN.right]);
    const bytes = byteAxis(yMin, yMax * 1.1, 5);
    this.y = scaleLinear().domain(bytes.domain).range([HEIGHT - MARGIN.bottom, MARGIN.top]);
    const x = this.x;
    const y = this.y;

    const captionText = [
      step.absolute
        ? 'absolute bytes in use (allocator baseline known)'
        : step.rise_from !== undefined
          ? `the rise over the step’s start (${formatBytes(step.rise_from)} in use before it: “show absolute” in the summary adds it back)`
          : 'relative to the start of the step: the allocator gave no baseline',
      readingsDrawn
        ? `dotted: the allocator’s own bytes-in-use snapshots${c.snapshots.counts_from_bytes ? ` (which count only its requests of ${formatBytes(c.snapshots.counts_from_bytes)} and more)` : ''}`
        : c.snapshots.t_us.length > 1 && !stacked
          ? 'the allocator’s own snapshots are not drawn: without a baseline they are not on this scale'
          : null,
      reserved ? 'thin: its reserved bytes' : null,
      placement === 'line' ? 'red line: the allocator’s limit' : null,
    ]
      .filter(Boolean)
      .join(' · ');
    this.caption.textContent = captionText;
    this.caption.title = captionText;

    // Axes and grid, drawn by hand (no d3-axis): a few ticks, bytes on the left, time below.
    const grid = svg.append('g').attr('class', 'grid');
    const yAxis = svg.append('g').attr('class', 'axis');
    for (const t of bytes.ticks) {
      grid.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', y(t)).attr('y2', y(t));
      yAxis
        .append('text')
        .attr('x', MARGIN.left - 6)
        .attr('y', y(t) + 3)
        .attr('text-anchor', 'end')
        .text(step.absolute ? formatBytes(t) : formatBytesDelta(t));
    }
    const xAxis = svg.append('g').attr('class', 'axis');
    xAxis
      .append('line')
      .attr('x1', MARGIN.left)
      .attr('x2', width - MARGIN.right)
      .attr('y1', HEIGHT - MARGIN.bottom)
      .attr('y2', HEIGHT - MARGIN.bottom);
    for (const t of x.ticks(Math.max(2, Math.floor(width / 110)))) {
      xAxis
        .append('text')
        .attr('x', x(t))
        .attr('y', HEIGHT - 6)
        .attr('text-anchor', 'middle')
        .text(formatTime(t));
    }

    const clipId = 'mem-curve-clip';
    svg
      .append('clipPath')
      .attr('id', clipId)
      .append('rect')
      .attr('x', MARGIN.left)
      .attr('y', 0)
      .attr('width', width - MARGIN.left - MARGIN.right)
      .attr('height', HEIGHT - MARGIN.bottom);
    const plot = svg.append('g').attr('clip-path', `url(#${clipId})`);

    this.spanLayer = plot.append('g').attr('class', 'span-layer');

    const idx = c.t_us.map((_t, i) => i);
    const t = (i: number) => x(c.t_us[i]!);
    if (stacked) {
      for (const [rank, layer] of this.layers.entries()) {
        const a = area<number>()
          .curve(curveStepAfter)
          .x(t)
          .y0((i) => y(offset + layer.y0[i]!))
          .y1((i) => y(offset + layer.y1[i]!));
        const colour = layer.scope === null ? '#9c9c9c' : colorForRank(rank);
        const path = plot.append('path').attr('class', 'layer').attr('d', a(idx)).attr('fill', colour);
        if (layer.scope !== null) path.attr('data-scope', layer.scope);
        path.append('title').text(`${layer.scope ?? layer.name}: up to ${formatBytes(layer.max)}`);
        this.legend.append(
          el('span', {}, el('span', { class: 'swatch', style: `background:${colour}` }), layer.name),
        );
      }
    } else {
      const band = area<number>()
        .curve(curveStepAfter)
        .x(t)
        .y0((i) => y(c.min_bytes[i]!))
        .y1((i) => y(c.max_bytes[i]!));
      plot.append('path').attr('class', 'band').attr('d', band(idx));
    }

    this.highlightLayer = plot.append('g').attr('class', 'highlight-layer');

    const maxLine = line<number>()
      .curve(curveStepAfter)
      .x(t)
      .y((i) => y(c.max_bytes[i]!));
    plot.append('path').attr('class', 'line').attr('d', maxLine(idx));

    if (readingsDrawn) {
      const s = c.snapshots;
      const snapLine = line<number>()
        .curve(curveStepAfter)
        .x((i) => x(s.t_us[i]!))
        .y((i) => y(s.bytes[i]!));
      plot.append('path').attr('class', 'snapshots').attr('d', snapLine(s.t_us.map((_v, i) => i)));
    }
    if (reserved && c.snapshots.t_us.length > 0) {
      const s = c.snapshots;
      const reservedLine = line<number>()
        .curve(curveStepAfter)
        .x((i) => x(s.t_us[i]!))
        .y((i) => y(reserved[i] ?? 0));
      plot
        .append('path')
        .attr('class', 'reserved')
        .attr('data-testid', 'curve-reserved')
        .attr('d', reservedLine(s.t_us.map((_v, i) => i)))
        .append('title')
        .text('the allocator’s reserved bytes');
    }
    if (placement !== null && capacity !== null) this.drawCapacity(capacity, placement, width);

    const peakInfo = step.peak;
    if (peakInfo) {
      const px = x(peakInfo.time_us);
      const py = y(peakInfo.bytes);
      const peak = svg.append('g').attr('class', 'peak').attr('data-testid', 'curve-peak');
      const inView = px >= MARGIN.left - 0.5 && px <= width - MARGIN.right + 0.5;
      peak.attr('opacity', inView ? 1 : 0.35);
      peak.append('line').attr('x1', px).attr('x2', px).attr('y1', MARGIN.top - 4).attr('y2', HEIGHT - MARGIN.bottom);
      peak.append('circle').attr('cx', px).attr('cy', py).attr('r', 4);
      const label = step.absolute
        ? `peak ${formatBytes(peakInfo.bytes)} at ${formatTime(peakInfo.time_us)}`
        : `peak ${formatBytesDelta(peakInfo.bytes)} over step start at ${formatTime(peakInfo.time_us)}`;
      const rightSide = px < width * 0.6;
      peak
        .append('text')
        .attr('x', Math.min(Math.max(px + (rightSide ? 6 : -6), MARGIN.left), width - MARGIN.right))
        .attr('y', MARGIN.top - 6)
        .attr('text-anchor', rightSide ? 'start' : 'end')
        .text(label);
      peak.append('title').text(`${label}${peakInfo.node ? ` — ${peakInfo.node.name}` : ''}`);
    }

    svg.append('g').attr('class', 'hover');
    svg.append('rect').attr('class', 'drag hidden');
    this.drawOverlays();
  }

  /**
   * The allocator's limit: a line across the plot when it is near the curve,
   * else a label at the top saying how far above it is. Either way it carries
   * data-bytes (a test hook) and a title with the peak's share of it.
   */
  private drawCapacity(capacity: number, placement: 'line' | 'above', width: number): void {
    const peak = this.curve?.peak?.bytes ?? null;
    const share = shareOfCapacity(peak, capacity);
    const host = this.curve?.memory_kind === 'host';  // a cap the CPU allocator was given, not the machine's memory
    const label = `${host ? 'allocator cap' : 'limit'} ${formatBytes(capacity)}`;
    const title = `${host ? 'The CPU allocator’s cap (not the machine’s memory)' : 'The allocator’s limit'}: ${formatBytes(capacity)}${share === null ? '' : `; the peak fills ${formatPercent(share)} of it`}`;
    const g = this.svg
      .append('g')
      // A host allocator's cap is no limit the step is near (muted); a device's limit is (the peak's colour).
      .attr('class', host ? 'capacity host' : 'capacity')
      .attr('data-testid', 'curve-capacity')
      .attr('data-placement', placement)
      .attr('data-bytes', String(capacity));
    g.append('title').text(title);
    if (placement === 'line') {
      const cy = this.y(capacity);
      g.append('line').attr('x1', MARGIN.left).attr('x2', width - MARGIN.right).attr('y1', cy).attr('y2', cy);
      g.append('text').attr('x', width - MARGIN.right - 4).attr('y', cy - 3).attr('text-anchor', 'end').text(label);
      return;
    }
    // Top left inside the plot: the peak's label owns the strip above it.
    g.append('text')
      .attr('x', MARGIN.left + 4)
      .attr('y', MARGIN.top + 8)
      .attr('text-anchor', 'start')
      .text(`${label} (above the plot${share === null ? '' : `; peak ${formatPercent(share)} of it`})`);
  }

  /** The selected scope's own bytes and its time span, on the current scales. */
  private drawOverlays(): void {
    const x = this.x;
    const y = this.y;
    const spanLayer = this.spanLayer;
    const highlightLayer = this.highlightLayer;
    this.selectionLegend.replaceChildren();
    if (!this.curve || !spanLayer || !highlightLayer) return;
    spanLayer.selectAll('*').remove();
    highlightLayer.selectAll('*').remove();
    if (this.span) {
      const x0 = x(this.span.start_us);
      const x1 = Math.max(x(this.span.end_us), x0 + 1);
      spanLayer
        .append('rect')
        .attr('class', 'span')
        .attr('x', x0)
        .attr('y', MARGIN.top)
        .attr('width', x1 - x0)
        .attr('height', HEIGHT - MARGIN.bottom - MARGIN.top);
      for (const px of [x0, x1]) {
        spanLayer.append('line').attr('class', 'span-edge').attr('x1', px).attr('x2', px).attr('y1', MARGIN.top).attr('y2', HEIGHT - MARGIN.bottom);
      }
    }
    // Zoomed into a window whose data has the selected scope's series, the finer series is drawn.
    const h = highlightOn(this.drawn, this.highlight);
    // Stacked: the selected scope's own layer is outlined in place rather than drawn a second time.
    let outlined = false;
    this.svg.selectAll<SVGPathElement, unknown>('path.layer').each(function () {
      const on = h !== null && this.getAttribute('data-scope') === h.scope;
      this.classList.toggle('layer-selected', on);
      outlined = outlined || on;
    });
    this.selectionLegend.title = h ? `selected: ${h.scope}` : '';
    if (outlined && h) {
      this.selectionLegend.append(el('span', { class: 'swatch', style: 'border:2px solid var(--accent)' }), `selected: ${h.scope}`);
    } else if (h && h.bytes.length === h.t_us.length && h.bytes.length > 0) {
      const offset = this.offset();
      const hi = h.t_us.map((_t, i) => i);
      const a = area<number>()
        .curve(curveStepAfter)
        .x((i) => x(h.t_us[i]!))
        .y0(() => y(offset))
        .y1((i) => y(offset + h.bytes[i]!));
      highlightLayer.append('path').attr('class', 'highlight').attr('d', a(hi)).append('title').text(`${h.scope}: its bytes over the step`);
      this.selectionLegend.append(el('span', { class: 'swatch', style: 'background:var(--accent)' }), `selected: ${h.scope}`);
    }
  }

  private installPointer(): void {
    const svgNode = this.svgNode;
    const localX = (ev: PointerEvent | MouseEvent) => {
      const rect = svgNode.getBoundingClientRect();
      const vb = svgNode.viewBox.baseVal;
      const scale = vb && vb.width && rect.width ? vb.width / rect.width : 1;
      return (ev.clientX - rect.left) * scale;
    };
    svgNode.addEventListener('pointerdown', (ev) => {
      if (!this.curve || ev.button !== 0) return;
      this.dragStartPx = localX(ev);
      svgNode.setPointerCapture?.(ev.pointerId);
    });
    svgNode.addEventListener('pointermove', (ev) => {
      if (!this.curve) return;
      const px = localX(ev);
      if (this.dragStartPx !== null) {
        // Drawn within the plot, as the zoom it makes is (`zoomRange`).
        const plot = this.x.range() as [number, number];
        const x0 = withinPlot(Math.min(this.dragStartPx, px), plot);
        const w = withinPlot(Math.max(this.dragStartPx, px), plot) - x0;
        this.svg
          .select<SVGRectElement>('rect.drag')
          .classed('hidden', w < 2)
          .attr('x', x0)
          .attr('y', MARGIN.top)
          .attr('width', w)
          .attr('height', HEIGHT - MARGIN.top - MARGIN.bottom);
      }
      this.showHover(px, ev);
    });
    const endDrag = (ev: PointerEvent) => {
      if (this.dragStartPx === null) return;
      const start = this.dragStartPx;
      this.dragStartPx = null;
      this.svg.select('rect.drag').classed('hidden', true);
      const range = zoomRange(start, localX(ev), (px) => this.x.invert(px), this.x.range() as [number, number]);
      if (range) this.selection.set({ timeRange: range });
    };
    svgNode.addEventListener('pointerup', endDrag);
    svgNode.addEventListener('pointercancel', () => {
      this.dragStartPx = null;
      this.svg.select('rect.drag').classed('hidden', true);
    });
    svgNode.addEventListener('pointerleave', () => this.hideReading());
    svgNode.addEventListener('dblclick', () => this.selection.set({ timeRange: null }));
    svgNode.addEventListener('keydown', (ev) => this.onKey(ev));
    svgNode.addEventListener('blur', () => this.hideReading());
  }

  /** No reading shown: neither the mark on the curve nor the tooltip. */
  private hideReading(): void {
    this.svg.select('g.hover').selectAll('*').remove();
    this.tooltip.classList.add('hidden');
  }

  /** Arrow keys, Home, End and P move the keyboard's reading along the drawn points; Escape hides it. */
  private onKey(ev: KeyboardEvent): void {
    const c = this.drawn;
    if (!c || c.t_us.length === 0) return;
    const last = c.t_us.length - 1;
    const at = this.cursor === null || this.cursor > last ? null : this.cursor;
    const step = ev.shiftKey ? 10 : 1;
    let next: number | null;
    switch (ev.key) {
      case 'ArrowRight':
        next = at === null ? 0 : Math.min(last, at + step);
        break;
      case 'ArrowLeft':
        next = at === null ? last : Math.max(0, at - step);
        break;
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = last;
        break;
      case 'p':
      case 'P': {
        const peak = this.curve?.peak;
        next = peak ? nearestIndex(c.t_us, peak.time_us) : null;
        break;
      }
      case 'Escape':
        this.cursor = null;
        this.hideReading();
        return;
      default:
        return;
    }
    ev.preventDefault();
    if (next === null) return;
    this.cursor = next;
    this.showPoint(next, null);
  }

  private showHover(px: number, ev: PointerEvent): void {
    const c = this.drawn;
    const [left, right] = this.x.range() as [number, number];
    if (!c || c.t_us.length === 0 || px < left || px > right) {
      this.hideReading();
      return;
    }
    this.showPoint(nearestIndex(c.t_us, this.x.invert(px)), ev);
  }

  /** The reading of drawn point `i`: a mark on the curve and the tooltip, beside the pointer (`ev`) or the point. */
  private showPoint(i: number, ev: PointerEvent | null): void {
    const c = this.drawn;
    const step = this.curve;
    const hover = this.svg.select<SVGGElement>('g.hover');
    hover.selectAll('*').remove();
    if (!c || !step || c.t_us.length === 0) return;
    const t = c.t_us[i]!;
    const max = c.max_bytes[i]!;
    const min = c.min_bytes[i]!;
    const hx = this.x(t);
    hover.append('line').attr('x1', hx).attr('x2', hx).attr('y1', MARGIN.top).attr('y2', HEIGHT - MARGIN.bottom);
    hover.append('circle').attr('cx', hx).attr('cy', this.y(max)).attr('r', 3);

    const op = c.node_names[c.node_at[i] ?? -1] ?? null;
    const rel = relativeBytes([max], step.absolute, step.start_bytes)[0]!;
    const lines: HTMLElement[] = [
      el('div', {}, el('b', {}, formatTime(t)), ` · ${step.absolute ? formatBytes(max) : formatBytesDelta(max)}`),
    ];
    if (step.absolute) lines.push(el('div', { class: 'muted' }, `${formatBytesDelta(rel)} over the step start`));
    if (min !== max) lines.push(el('div', { class: 'muted' }, `bucket range ${formatBytes(min)} – ${formatBytes(max)}`));
    if (op !== null) lines.push(el('div', {}, 'op: ', el('code', {}, op)));
    const readings = readingsAt(c.snapshots, t);
    if (readings) {
      const parts = [
        readings.reserved_bytes !== null ? `reserved ${formatBytes(readings.reserved_bytes)}` : null,
        readings.fragmentation !== null ? `fragmentation ${formatPercent(readings.fragmentation)}` : null,
      ].filter(Boolean);
      lines.push(el('div', { class: 'muted', 'data-testid': 'curve-readings' }, `allocator: ${parts.join(' · ')}`));
    }
    const highlight = highlightOn(c, this.highlight);
    if (highlight) {
      const j = nearestIndex(highlight.t_us, t);
      const b = highlight.bytes[j];
      if (b !== undefined) lines.push(el('div', {}, `${highlight.scope}: ${formatBytes(b)}`));
    }
    this.tooltip.replaceChildren(...lines);
    this.tooltip.classList.remove('hidden');
    this.tooltip.dataset.index = String(i);
    const bodyRect = this.body.getBoundingClientRect();
    let clientX: number;
    let clientY: number;
    if (ev) {
      clientX = ev.clientX;
      clientY = ev.clientY;
    } else {  // beside the point read: its place on the page, from the plot's units
      const rect = this.svgNode.getBoundingClientRect();
      const vb = this.svgNode.viewBox.baseVal;
      const scale = vb && vb.width && rect.width ? rect.width / vb.width : 1;
      clientX = rect.left + hx * scale;
      clientY = rect.top + this.y(max) * scale;
    }
    const left0 = clientX - bodyRect.left + 14;
    const maxLeft = bodyRect.width - 260;
    this.tooltip.style.left = `${Math.max(0, left0 > maxLeft ? clientX - bodyRect.left - 270 : left0)}px`;
    this.tooltip.style.top = `${Math.max(0, clientY - bodyRect.top - 10)}px`;
  }
}
