// The controller: fetches what the selection needs and hands it to the views.
// Views draw and write the selection; only this file talks to the API.

import { Api, ApiError, type CurveResponse, type CurveWindow, type DeviceSummary, type RunInfo, type SummaryResponse } from './api';
import { el } from './dom';
import { chooseDevice, chooseRun, chooseStep } from './lib/defaults';
import { curvePointsFor } from './lib/curve-data';
import { WINDOW_FETCH_DELAY_MS, needsWindowFetch } from './lib/curve-window';
import { ScopePreviews } from './lib/scope-preview';
import { Selection, type SelectionKey, type SelectionState, parentScope } from './selection';
import { CSS } from './styles';
import { CurveView, type HighlightSeries } from './views/curve';
import { DetailsView, StepOpTypesView } from './views/details';
import { GraphView } from './views/graph';
import { PickersView } from './views/pickers';
import { EmptyStateView, SummaryView, type EmptyStateOptions } from './views/summary';
import { TreemapView } from './views/treemap';

/** Series asked with the curve: the stack shows the top 8, the rest serve the selection's highlight. */
const CURVE_SERIES = 20;
const HIGHLIGHT_SERIES = 20;
const TOP_NODES = 50;
/** Details of this many of a level's largest tiles are fetched ahead, when idle, so clicks on them answer at once. */
const PREFETCH_DETAILS = 12;

/** Graph boxes are name scopes; in the layer grouping some (e.g. "gradients") are folded into layers. */
function scopeHint(e: unknown, group: string): string {
  if (e instanceof ApiError && e.status === 404 && group === 'layer') {
    return ' — this name scope may be folded into its layers in the "layer" grouping; pick Group "name scope" to see it on its own.';
  }
  return '';
}

function message(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  return e instanceof Error ? e.message : String(e);
}

/**
 * Resolves after the browser has painted the current changes (next animation
 * frame, then a task), or after 100 ms when no frame comes (a hidden tab).
 */
function afterPaint(): Promise<void> {
  return new Promise((resolve) => {
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        resolve();
      }
    };
    if (typeof requestAnimationFrame === 'function') requestAnimationFrame(() => setTimeout(finish, 0));
    setTimeout(finish, 100);
  });
}

/** Latest-wins guard: a response for an older request of the same kind is dropped. */
class Latest {
  private n = 0;
  next(): () => boolean {
    const mine = ++this.n;
    return () => mine === this.n;
  }
}

export class App {
  readonly root: HTMLElement;
  readonly selection = new Selection();
  private readonly status = el('div', { class: 'status', 'data-testid': 'status', role: 'status', 'aria-live': 'polite' });
  private readonly pickers = new PickersView(this.selection);
  private readonly summaryView = new SummaryView(this.selection);
  private readonly emptyState = new EmptyStateView();
  private readonly curve = new CurveView(this.selection);
  private readonly treemap = new TreemapView(this.selection);
  private readonly graph = new GraphView(this.selection);
  private readonly details = new DetailsView(this.selection);
  private readonly stepOps = new StepOpTypesView(this.selection);
  private readonly dashboard: HTMLElement;
  private runs: RunInfo[] = [];
  private summary: SummaryResponse | null = null;
  private device: DeviceSummary | null = null;
  private curveData: CurveResponse | null = null;
  /** The zoomed window's curve and the request it answers (its window aside): dropped when that changes. */
  private windowCurve: { data: CurveResponse; key: string } | null = null;
  /** A zoom waiting to settle before its window is fetched; `release` ends its share of data-ready. */
  private windowWait: { timer: ReturnType<typeof setTimeout>; release: () => void } | null = null;
  private inFlight = 0;
  private requestedPoints = 0;
  /** What the status line says when nothing loads: short, never the message the page shows below. */
  private statusNote: { text: string; kind: 'empty' | 'error' | 'idle' } = { text: '', kind: 'idle' };
  /** Figures of every treemap tile loaded for this step: a click draws its details from them at once. */
  private readonly previews = new ScopePreviews();
  private readonly latest = {
    summary: new Latest(),
    scopes: new Latest(),
    graph: new Latest(),
    curve: new Latest(),
    windowCurve: new Latest(),
    details: new Latest(),
    highlight: new Latest(),
    prefetch: new Latest(),
  };
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly host: HTMLElement,
    private readonly api = new Api(),
  ) {
    this.dashboard = el(
      'div',
      { class: 'dashboard' },
      el(
        'div',
        { class: 'layout' },
        el(
          'div',
          { class: 'main-column' },
          this.curve.element,
          el('div', { class: 'two-up' }, this.treemap.element, this.graph.element),
          this.stepOps.element,
        ),
        el('div', { class: 'side-column' }, this.details.element),
      ),
    );
    this.root = el(
      'div',
      { class: 'mem-root' },
      el('header', { class: 'mem-header' }, el('h1', {}, 'Memory'), this.pickers.element, this.status),
      this.emptyState.element,
      this.summaryView.element,
      this.dashboard,
    );
    this.summaryView.setData(null, null);
    this.dashboard.classList.add('hidden');
    this.selection.subscribe((state, changed) => this.onSelection(state, changed));
    this.curve.onWidthChange = (width) => this.onCurveWidth(width);
  }

  /** Asks for a curve with about one point per pixel again when the plot grew or shrank by a quarter. */
  private onCurveWidth(width: number): void {
    const have = this.curveData?.t_us.length ?? 0;
    const want = curvePointsFor(width);
    if (!this.device || have === 0 || Math.abs(want - this.requestedPoints) < this.requestedPoints / 4) return;
    this.loadCurve();
  }

  mount(): void {
    if (!document.getElementById('tb-memory-style')) {
      document.head.append(el('style', { id: 'tb-memory-style' }, CSS));
    }
    this.host.replaceChildren(this.root);
    void this.track(() => this.loadRuns());
  }

  // ---- readiness: data-ready is "0" while anything for the current selection loads ----

  private async track(load: () => Promise<void>): Promise<void> {
    this.inFlight++;
    this.updateReady();
    try {
      await load();
    } finally {
      this.inFlight--;
      this.updateReady();
    }
  }

  /** Resolves once nothing for the current selection is loading. */
  private idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private updateReady(): void {
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      // After the current task, so that a load started right after this one counts first.
      setTimeout(() => waiters.forEach((w) => w()), 0);
    }
    const ready = this.inFlight === 0 ? '1' : '0';
    document.body.dataset.ready = ready;
    this.root.dataset.ready = ready;
    if (this.inFlight > 0) {
      this.setStatus('Loading…', 'loading');
    } else {
      this.setStatus(this.statusNote.text, this.statusNote.kind);
    }
  }

  private setStatus(text: string, kind: 'loading' | 'error' | 'empty' | 'idle'): void {
    if (this.status.textContent !== text) this.status.textContent = text;
    this.status.title = text;
    this.status.dataset.kind = kind;
  }

  /** The status line's text once loads end (it says "Loading…" meanwhile). */
  private note(text: string, kind: 'empty' | 'error' | 'idle'): void {
    this.statusNote = { text, kind };
    this.updateReady();
  }

  // ---- loads ----

  private async loadRuns(): Promise<void> {
    try {
      const response = await this.api.runs();
      this.runs = response.runs;
    } catch (e) {
      this.showEmpty('Could not list runs', message(e), 'Could not list runs', { error: true });
      this.note('Could not list runs', 'error');
      return;
    }
    this.pickers.setRuns(this.runs);
    const run = chooseRun(this.runs, null);
    if (!run) {
      this.showEmpty('No traced steps yet', 'No run in this log directory has a step traced with run metadata.', 'No traced steps', { howTo: true });
      return;
    }
    const step = chooseStep(run, null);
    this.selection.set({ run: run.run, tag: step?.tag ?? null });
  }

  private onSelection(state: Readonly<SelectionState>, changed: ReadonlySet<SelectionKey>): void {
    if (changed.has('run') && state.run !== null && state.tag === null) {
      const run = this.runs.find((r) => r.run === state.run);
      const step = run ? chooseStep(run, null) : null;
      if (step) {
        this.selection.set({ tag: step.tag });
        return;
      }
    }
    if (changed.has('run') || changed.has('tag') || changed.has('group')) {
      if (state.run !== null && state.tag !== null) void this.track(() => this.loadSummary());
      return;
    }
    if (!this.device) return;
    if (changed.has('device') || changed.has('focus')) {
      // loadLevel reloads the curve, and the zoomed window's with it.
      // Details first: the slowest route on a big step starts first; the level's three follow at once, in parallel.
      this.loadDetails();
      this.loadLevel();
      return;
    }
    if (changed.has('selected')) this.loadDetails();
    if (changed.has('timeRange')) this.scheduleWindowCurve();
  }

  /** Nothing to draw: the empty state says why (once), the status line a short label. */
  private showEmpty(title: string, text: string, status: string, options: EmptyStateOptions = {}): void {
    this.emptyState.show(title, text, options);
    this.note(status, options.error ? 'error' : 'empty');
    this.dashboard.classList.add('hidden');
    this.summaryView.setData(null, null);
  }

  private async loadSummary(): Promise<void> {
    const isLatest = this.latest.summary.next();
    const s = this.selection.get();
    if (s.run === null || s.tag === null) return;
    this.note('', 'idle');
    this.device = null;
    if (this.summary && (this.summary.run !== s.run || this.summary.tag !== s.tag)) this.pickers.setDevices([]);
    let summary: SummaryResponse;
    try {
      summary = await this.api.summary({ run: s.run, tag: s.tag, group: s.group });
    } catch (e) {
      if (!isLatest()) return;
      this.summary = null;
      this.pickers.setDevices([]);
      this.showEmpty(`Could not load step “${s.tag}”`, message(e), `Step “${s.tag}”: not loaded`, { error: true });
      return;
    }
    if (!isLatest()) return;
    this.summary = summary;
    if (summary.status !== 'ok' || summary.devices.length === 0) {
      this.pickers.setDevices([]);
      this.showBadStep(summary, s.tag);
      return;
    }
    this.emptyState.show(null);
    this.dashboard.classList.remove('hidden');
    this.pickers.setDevices(summary.devices);
    const deviceId = chooseDevice(summary, s.device);
    this.device = summary.devices.find((d) => d.id === deviceId) ?? null;
    if (deviceId !== s.device) {
      // The notification for the device change loads the level and details.
      this.selection.set({ device: deviceId });
    } else {
      this.loadDetails();
      this.loadLevel();
    }
    this.summaryView.setData(summary, this.device);
    this.stepOps.setDevice(this.device);
  }

  /**
   * A step with nothing to draw. Only a step traced without memory ("empty",
   * "no_memory") is fixed by tracing with FULL_TRACE, so only it shows how;
   * a corrupt step shows its decode error, once.
   */
  private showBadStep(summary: SummaryResponse, tag: string): void {
    const text = summary.message ?? `status: ${summary.status}`;
    switch (summary.status) {
      case 'no_memory':
        this.showEmpty('This step was traced, but no node carries memory', text, `Step “${tag}”: traced without memory`, { howTo: true });
        return;
      case 'empty':
        this.showEmpty('This step has no step stats', text, `Step “${tag}”: no step stats`, { howTo: true });
        return;
      case 'corrupt':
        this.showEmpty('This step’s run metadata cannot be read', text, `Step “${tag}”: unreadable`, {
          error: true,
          hint: 'The bytes stored for this step do not decode as a RunMetadata (a damaged or truncated event file). Other steps are not affected: pick another step, or trace this one again.',
        });
        return;
      default:
        this.showEmpty('Nothing to show for this step', text, `Step “${tag}”: nothing to show`);
    }
  }

  /** Tile figures belong to one run, step, device and grouping. */
  private previewKey(): string {
    const s = this.selection.get();
    return JSON.stringify([s.run, s.tag, s.device, s.group]);
  }

  /** Everything about the focused scope: treemap level, graph and curve. */
  private loadLevel(): void {
    const s = this.selection.get();
    const device = this.device;
    if (s.run === null || s.tag === null || s.device === null || !device) return;
    if (device.id !== s.device) {
      this.device = this.summary?.devices.find((d) => d.id === s.device) ?? null;
      this.summaryView.setData(this.summary, this.device);
      this.stepOps.setDevice(this.device);
    }
    const base = { run: s.run, tag: s.tag, device: s.device, group: s.group };
    const previewKey = this.previewKey();
    this.previews.useKey(previewKey);

    const scopesLatest = this.latest.scopes.next();
    this.treemap.setLoading(true);
    void this.track(async () => {
      try {
        const data = await this.api.scopes({ ...base, scope: s.focus });
        if (!scopesLatest()) return;
        this.previews.useKey(previewKey);
        this.previews.addLevel(data);
        this.treemap.setError(null);
        this.treemap.setData(data);
        void this.prefetchDetails();
      } catch (e) {
        if (!scopesLatest()) return;
        this.treemap.setError(`Could not load scope “${s.focus || '(all)'}”: ${message(e)}${scopeHint(e, s.group)}`);
        this.treemap.setData(null);
      } finally {
        if (scopesLatest()) this.treemap.setLoading(false);
      }
    });

    const graphLatest = this.latest.graph.next();
    this.graph.setLoading(true);
    void this.track(async () => {
      try {
        const data = await this.api.graph({ run: s.run!, tag: s.tag!, device: s.device!, scope: s.focus });
        if (!graphLatest()) return;
        this.graph.setError(null);
        this.graph.setData(data);
      } catch (e) {
        if (!graphLatest()) return;
        this.graph.setError(`No graph for “${s.focus || '(all)'}”: ${message(e)}`);
        this.graph.setData(null);
      } finally {
        if (graphLatest()) this.graph.setLoading(false);
      }
    });

    this.loadCurve();
  }

  /**
   * Fetches, one at a time and only once nothing else loads (after the first
   * paint), the details of the largest tiles drawn: the API cache then answers
   * a click on them without a round trip. Prefetches never touch data-ready.
   */
  private async prefetchDetails(): Promise<void> {
    const isLatest = this.latest.prefetch.next();
    const s = this.selection.get();
    if (s.run === null || s.tag === null || s.device === null) return;
    const params = { run: s.run, tag: s.tag, device: s.device, group: s.group, top: TOP_NODES };
    const targets = this.treemap.visibleScopes().slice(0, PREFETCH_DETAILS);
    for (const scope of targets) {
      await this.idle();
      if (!isLatest()) return;
      const now = this.selection.get();
      if (now.run !== s.run || now.tag !== s.tag || now.device !== s.device || now.group !== s.group) return;
      try {
        await this.api.scope({ ...params, scope });
      } catch {
        return; // a failing prefetch says nothing the real request will not say
      }
    }
  }

  /** The curve of the step, broken down by the focused scope's children for stacking. */
  private loadCurve(): void {
    const s = this.selection.get();
    if (s.run === null || s.tag === null || s.device === null) return;
    const base = { run: s.run, tag: s.tag, device: s.device, group: s.group };
    const curveLatest = this.latest.curve.next();
    this.requestedPoints = curvePointsFor(this.curve.plotWidth());
    this.curve.setLoading(true);
    // A zoomed view asks for its window at once too, with the same breakdown and points.
    this.scheduleWindowCurve(0);
    void this.track(async () => {
      try {
        const data = await this.api.curve({
          ...base,
          points: this.requestedPoints,
          breakdown: s.focus,
          top: CURVE_SERIES,
        });
        if (!curveLatest()) return;
        this.curveData = data;
        this.curve.setError(null);
        this.curve.setCurve(data);
        await this.loadHighlight();
      } catch (e) {
        if (!curveLatest()) return;
        this.curveData = null;
        this.curve.setError(`Could not load the curve: ${message(e)}`);
        this.curve.setCurve(null);
      } finally {
        if (curveLatest()) this.curve.setLoading(false);
      }
    });
  }

  /** What a window's curve shares with the step's curve request: a window fetched for another one is not drawn. */
  private curveKey(): string {
    const s = this.selection.get();
    return JSON.stringify([s.run, s.tag, s.device, s.group, s.focus, this.requestedPoints, CURVE_SERIES]);
  }

  private cancelWindowWait(): void {
    if (!this.windowWait) return;
    clearTimeout(this.windowWait.timer);
    this.windowWait.release();
    this.windowWait = null;
  }

  /**
   * After a zoom (or a reload of the curve while zoomed): once the range has
   * stayed put for `delay` ms, fetches the visible window's own curve. A newer
   * zoom cancels a waiting one and makes an answer in flight stale. The wait
   * counts as loading (data-ready "0"); the curve meanwhile draws the whole
   * step's data, or a wider window's already loaded.
   */
  private scheduleWindowCurve(delay = WINDOW_FETCH_DELAY_MS): void {
    this.cancelWindowWait();
    this.latest.windowCurve.next();
    const key = this.curveKey();
    if (this.windowCurve && this.windowCurve.key !== key) {
      this.windowCurve = null;
      this.curve.setWindowCurve(null);
    }
    const s = this.selection.get();
    const duration = this.curveData?.duration_us ?? this.summary?.duration_us ?? null;
    const want = needsWindowFetch(s.timeRange, duration, this.windowCurve?.data.window ?? null);
    if (!want || s.run === null || s.tag === null || s.device === null) return;
    let release = () => {};
    const waited = new Promise<void>((resolve) => (release = resolve));
    const timer = setTimeout(() => {
      this.windowWait = null;
      this.loadWindowCurve(want, key);
      release();
    }, delay);
    this.windowWait = { timer, release };
    void this.track(() => waited);
  }

  /** The curve of one window of the step, bucketed on its own; drawn when it is still the one wanted. */
  private loadWindowCurve(window: CurveWindow, key: string): void {
    const s = this.selection.get();
    if (s.run === null || s.tag === null || s.device === null || key !== this.curveKey()) return;
    const isLatest = this.latest.windowCurve.next();
    void this.track(async () => {
      try {
        const data = await this.api.curve({
          run: s.run!,
          tag: s.tag!,
          device: s.device!,
          group: s.group,
          points: this.requestedPoints,
          breakdown: s.focus,
          top: CURVE_SERIES,
          window,
        });
        if (!isLatest() || key !== this.curveKey()) return;
        this.windowCurve = { data, key };
        if (this.curveData) this.curve.setError(null);
        this.curve.setWindowCurve(data);
      } catch (e) {
        if (!isLatest()) return;
        // The whole step's curve stays drawn (clipped to the zoom): it is right, only coarser.
        this.curve.setError(`Could not load the zoomed window (the whole step’s curve is shown): ${message(e)}`);
      }
    });
  }

  /**
   * Details of the selected scope (or of the focus when nothing is selected).
   * Runs inside the click: the figures the treemap already holds are drawn at
   * once (no request, no re-layout); the full details follow from the API (its
   * cache when prefetched), and only then the highlight's curve, if the loaded
   * curve lacks the scope's series, so the two requests do not compete.
   */
  private loadDetails(): void {
    const s = this.selection.get();
    if (s.run === null || s.tag === null || s.device === null) return;
    const scope = s.selected ?? s.focus;
    const detailsLatest = this.latest.details.next();
    this.previews.useKey(this.previewKey());
    const preview = this.previews.get(scope);
    if (preview) {
      // Valid figures at once; the panel says its tables are loading (not dimmed: nothing shown is stale).
      this.details.setError(null);
      this.details.setLoading(false);
      this.details.setData(preview);
      this.curve.setTimeSpan(null);
    } else {
      this.details.setLoading(true);
    }
    const details = this.track(async () => {
      try {
        const data = await this.api.scope({ run: s.run!, tag: s.tag!, device: s.device!, group: s.group, scope, top: TOP_NODES });
        if (!detailsLatest()) return;
        // Even from the cache, the tables wait for the preview to be painted: the click's frame stays light.
        if (preview) await afterPaint();
        if (!detailsLatest()) return;
        this.details.setError(null);
        this.details.setData(data);
        this.curve.setTimeSpan(scope === '' ? null : data.time_span);
      } catch (e) {
        if (!detailsLatest()) return;
        this.details.setError(`Could not load details of “${scope || '(all)'}”: ${message(e)}${scopeHint(e, s.group)}`);
        this.details.setData(null);
        this.curve.setTimeSpan(null);
      } finally {
        if (detailsLatest()) this.details.setLoading(false);
      }
    });
    if (this.highlightFromLoadedCurve()) return;
    void this.track(async () => {
      await details;
      await this.loadHighlight();
    });
  }

  /** Highlights the selection from the loaded curve's series when it has them (no request); false when it cannot. */
  private highlightFromLoadedCurve(): boolean {
    const selected = this.selection.get().selected;
    const curve = this.curveData;
    if (selected === null || selected === '') {
      this.latest.highlight.next();
      this.curve.setHighlight(null);
      return true;
    }
    const series = curve?.series.find((x) => x.scope === selected);
    if (!curve || !series) return false;
    this.latest.highlight.next();
    this.curve.setHighlight({ scope: selected, name: series.name, t_us: curve.t_us, bytes: series.bytes });
    return true;
  }

  /** The selected scope's own series, from the loaded curve or one broken down by its parent. */
  private async loadHighlight(): Promise<void> {
    const isLatest = this.latest.highlight.next();
    const s = this.selection.get();
    const curve = this.curveData;
    const selected = s.selected;
    if (!curve || selected === null || selected === '' || s.run === null || s.tag === null || s.device === null) {
      this.curve.setHighlight(null);
      return;
    }
    const toHighlight = (c: CurveResponse): HighlightSeries | null => {
      const series = c.series.find((x) => x.scope === selected);
      return series ? { scope: selected, name: series.name, t_us: c.t_us, bytes: series.bytes } : null;
    };
    const own = toHighlight(curve);
    if (own) {
      this.curve.setHighlight(own);
      return;
    }
    try {
      const c = await this.api.curve({
        run: s.run,
        tag: s.tag,
        device: s.device,
        group: s.group,
        points: this.requestedPoints,
        breakdown: parentScope(selected),
        top: HIGHLIGHT_SERIES,
      });
      if (isLatest()) this.curve.setHighlight(toHighlight(c));
    } catch {
      // The highlight is a nicety: a scope without its own series keeps the plain curve.
      if (isLatest()) this.curve.setHighlight(null);
    }
  }
}
