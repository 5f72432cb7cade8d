// The controller: fetches what the selection needs and hands it to the views.
// Views draw and write the selection; only this file talks to the API.
// Loaded data lives in AppState, the layout in PageView, readiness in Readiness.

import { Api, ApiError, type CurveWindow, type DeviceParams, type RunInfo, type SummaryResponse } from './api';
import { AppState } from './app-state';
import { curvePointsFor, highlightOf } from './lib/curve-data';
import { WINDOW_FETCH_DELAY_MS, needsWindowFetch } from './lib/curve-window';
import { chooseDevice, chooseRun, chooseStep } from './lib/defaults';
import { restorable, type SavedSelection } from './lib/saved-selection';
import { ScopePreviews } from './lib/scope-preview';
import type { Readiness } from './readiness';
import { type Selection, type SelectionKey, type SelectionState, parentScope } from './selection';
import type { PageView } from './views/page';
import type { EmptyStateOptions } from './views/summary';

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

/** A panel that shows one request's answer: dimmed while it loads, an error line when it fails. */
interface Loadable {
  setLoading(loading: boolean): void;
  setError(message: string | null): void;
}

/** Tile figures and prefetched details belong to one run, step, device and grouping. */
function stepKey(p: DeviceParams | null): string {
  return JSON.stringify(p && [p.run, p.tag, p.device, p.group]);
}

export class App {
  private readonly state = new AppState();
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
  /** A zoom waiting to settle before its window is fetched; `release` ends its share of data-ready. */
  private windowWait: { timer: ReturnType<typeof setTimeout>; release: () => void } | null = null;

  constructor(
    private readonly selection: Selection,
    private readonly page: PageView,
    private readonly readiness: Readiness,
    private readonly api = new Api(),
  ) {
    selection.subscribe((state, changed) => this.onSelection(state, changed));
    page.curve.onWidthChange = (width) => this.onCurveWidth(width);
  }

  /** Lists the runs, then opens what was chosen before (a link's or the last visit's selection), else the largest peak. */
  start(chosenBefore: Promise<SavedSelection | null>): Promise<void> {
    return this.readiness.track(() => this.loadRuns(chosenBefore));
  }

  /** The selected step and memory space as request parameters; null until both are chosen. */
  private stepParams(): DeviceParams | null {
    const s = this.selection.get();
    if (s.run === null || s.tag === null || s.device === null) return null;
    return { run: s.run, tag: s.tag, device: s.device, group: s.group };
  }

  /** Asks for a curve with about one point per pixel again when the plot grew or shrank by a quarter. */
  private onCurveWidth(width: number): void {
    const have = this.state.curve?.t_us.length ?? 0;
    const want = curvePointsFor(width);
    const asked = this.state.requestedPoints;
    if (!this.state.device || have === 0 || Math.abs(want - asked) < asked / 4) return;
    this.loadCurve();
  }

  /**
   * Loads one request's answer into a panel: dimmed meanwhile (unless `dim` is
   * false), then `show(data)`, or its error and `show(null)`; an answer is
   * dropped when a newer load of the same kind started since.
   */
  private loadInto<T>(
    kind: keyof App['latest'],
    view: Loadable,
    request: (isLatest: () => boolean) => Promise<T>,
    show: (data: T | null) => void | Promise<void>,
    failure: (e: unknown) => string,
    dim = true,
  ): Promise<void> {
    const isLatest = this.latest[kind].next();
    if (dim) view.setLoading(true);
    return this.readiness.track(async () => {
      try {
        const data = await request(isLatest);
        if (!isLatest()) return;
        view.setError(null);
        await show(data);
      } catch (e) {
        if (!isLatest()) return;
        view.setError(failure(e));
        await show(null);
      } finally {
        if (isLatest()) view.setLoading(false);
      }
    });
  }

  // ---- the first step ----

  private async loadRuns(chosenBefore: Promise<SavedSelection | null>): Promise<void> {
    let runs: RunInfo[];
    try {
      runs = (await this.api.runs()).runs;
    } catch (e) {
      this.showEmpty('Could not list runs', message(e), 'Could not list runs', { error: true });
      return;
    }
    this.state.runs = runs;
    this.page.pickers.setRuns(runs);
    if (!chooseRun(runs, null)) {
      this.showEmpty('No traced steps yet', 'No run in this log directory has a step traced with run metadata.', 'No traced steps', { howTo: true });
      return;
    }
    const first = restorable(await chosenBefore, runs) ?? (await this.openingSelection(runs));
    if (this.selection.get().run !== null) {
      this.state.opening = null; // the user picked a run meanwhile: theirs wins
      return;
    }
    this.selection.set(first);
  }

  /** Nothing chosen before: the step with the largest peak (`default_step`), else the first run's latest step. */
  private async openingSelection(runs: readonly RunInfo[]): Promise<Partial<SelectionState>> {
    try {
      const opening = await this.api.defaultStep();
      const run = runs.find((r) => r.run === opening.run);
      if (run && run.steps.some((s) => s.tag === opening.tag)) {
        this.state.opening = opening;
        return { run: run.run, tag: opening.tag, device: opening.device };
      }
    } catch {
      // The first run's latest step still opens the page.
    }
    const run = chooseRun(runs, null);
    return { run: run?.run ?? null, tag: run ? (chooseStep(run, null)?.tag ?? null) : null };
  }

  // ---- selection changes ----

  private onSelection(state: Readonly<SelectionState>, changed: ReadonlySet<SelectionKey>): void {
    if (changed.has('run') && state.run !== null && state.tag === null) {
      const run = this.state.runs.find((r) => r.run === state.run);
      const step = run ? chooseStep(run, null) : null;
      if (step) {
        this.selection.set({ tag: step.tag });
        return;
      }
    }
    if (changed.has('run') || changed.has('tag') || changed.has('group')) {
      if (state.run !== null && state.tag !== null) {
        if (!this.state.openingFor(state.run, state.tag)) this.state.opening = null;
        const { run, tag, group } = state;
        void this.readiness.track(() => this.loadSummary(run, tag, group));
      }
      return;
    }
    if (!this.state.device) return;
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
    this.page.showEmpty(title, text, options);
    this.readiness.note(status, options.error ? 'error' : 'empty');
  }

  private async loadSummary(run: string, tag: string, group: SelectionState['group']): Promise<void> {
    const isLatest = this.latest.summary.next();
    const { page, state } = this;
    this.readiness.note('', 'idle');
    state.device = null;
    if (state.summary && (state.summary.run !== run || state.summary.tag !== tag)) page.pickers.setDevices([]);
    const wanted = this.selection.get().device;
    let summary: SummaryResponse;
    try {
      summary = await this.api.summary({ run, tag, group });
    } catch (e) {
      if (!isLatest()) return;
      state.summary = null;
      page.pickers.setDevices([]);
      this.showEmpty(`Could not load step “${tag}”`, message(e), `Step “${tag}”: not loaded`, { error: true });
      return;
    }
    if (!isLatest()) return;
    state.summary = summary;
    if (summary.status !== 'ok' || summary.devices.length === 0) {
      page.pickers.setDevices([]);
      this.showBadStep(summary, tag);
      return;
    }
    page.showDashboard();
    page.pickers.setDevices(summary.devices);
    const deviceId = chooseDevice(summary, wanted);
    state.device = state.deviceById(deviceId);
    if (deviceId !== wanted) {
      // The notification for the device change loads the level and details.
      this.selection.set({ device: deviceId });
    } else {
      this.loadDetails();
      this.loadLevel();
    }
    this.showSummary();
  }

  /** The summary line and the step's op types, for the selected device; a step without a curve sizes tiles by allocated bytes. */
  private showSummary(): void {
    const { summary, device } = this.state;
    this.page.summary.setData(summary, device, this.state.openingFor(summary?.run ?? null, summary?.tag ?? null));
    this.page.stepOps.setDevice(device);
    if (device) this.page.treemap.setHasCurve(device.has_curve !== false);
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

  // ---- the focused scope: treemap level, graph, curve ----

  private loadLevel(): void {
    const p = this.stepParams();
    if (!p || !this.state.device) return;
    if (this.state.device.id !== p.device) {
      this.state.device = this.state.deviceById(p.device);
      this.showSummary();
    }
    const { focus, group } = this.selection.get();
    const key = stepKey(p);
    this.previews.useKey(key);
    const { treemap, graph } = this.page;

    void this.loadInto(
      'scopes',
      treemap,
      () => this.api.scopes({ ...p, scope: focus }),
      (data) => {
        if (data) {
          this.previews.useKey(key);
          this.previews.addLevel(data);
        }
        treemap.setData(data);
        if (data) void this.prefetchDetails();
      },
      (e) => `Could not load scope “${focus || '(all)'}”: ${message(e)}${scopeHint(e, group)}`,
    );

    void this.loadInto(
      'graph',
      graph,
      () => this.api.graph({ run: p.run, tag: p.tag, device: p.device, scope: focus }),
      (data) => graph.setData(data),
      (e) => `No graph for “${focus || '(all)'}”: ${message(e)}`,
    );

    this.loadCurve();
  }

  /**
   * Fetches, one at a time and only once nothing else loads (after the first
   * paint), the details of the largest tiles drawn: the API cache then answers
   * a click on them without a round trip. Prefetches never touch data-ready.
   */
  private async prefetchDetails(): Promise<void> {
    const isLatest = this.latest.prefetch.next();
    const p = this.stepParams();
    if (!p) return;
    const targets = this.page.treemap.visibleScopes().slice(0, PREFETCH_DETAILS);
    for (const scope of targets) {
      await this.readiness.idle();
      if (!isLatest() || stepKey(this.stepParams()) !== stepKey(p)) return;
      try {
        await this.api.scope({ ...p, scope, top: TOP_NODES });
      } catch {
        return; // a failing prefetch says nothing the real request will not say
      }
    }
  }

  /** The curve of the step, broken down by the focused scope's children for stacking. */
  private loadCurve(): void {
    const p = this.stepParams();
    if (!p) return;
    const { focus } = this.selection.get();
    const curve = this.page.curve;
    const hasCurve = this.state.device?.has_curve !== false;
    curve.setNote(hasCurve ? null : 'No memory curve: this trace has no allocation records (old TF 1.x dumps). The scopes are sized by allocated bytes.');
    if (!hasCurve) {
      this.latest.curve.next(); // an answer still in flight for another step is not drawn
      this.cancelWindowWait();
      this.state.curve = null;
      curve.setError(null);
      curve.setCurve(null);
      curve.setLoading(false);
      return;
    }
    const points = (this.state.requestedPoints = curvePointsFor(curve.plotWidth()));
    void this.loadInto(
      'curve',
      curve,
      () => this.api.curve({ ...p, points, breakdown: focus, top: CURVE_SERIES }),
      (data) => {
        this.state.curve = data;
        curve.setCurve(data);
        if (data) return this.loadHighlight();
      },
      (e) => `Could not load the curve: ${message(e)}`,
    );
    // A zoomed view asks for its window at once too, with the same breakdown and points.
    this.scheduleWindowCurve(0);
  }

  /** What a window's curve shares with the step's curve request: a window fetched for another one is not drawn. */
  private curveKey(): string {
    const s = this.selection.get();
    return JSON.stringify([s.run, s.tag, s.device, s.group, s.focus, this.state.requestedPoints, CURVE_SERIES]);
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
    const { state } = this;
    if (state.windowCurve && state.windowCurve.key !== key) {
      state.windowCurve = null;
      this.page.curve.setWindowCurve(null);
    }
    const duration = state.curve?.duration_us ?? state.summary?.duration_us ?? null;
    const want = needsWindowFetch(this.selection.get().timeRange, duration, state.windowCurve?.data.window ?? null);
    if (!want || !this.stepParams()) return;
    let release = () => {};
    const waited = new Promise<void>((resolve) => (release = resolve));
    const timer = setTimeout(() => {
      this.windowWait = null;
      this.loadWindowCurve(want, key);
      release();
    }, delay);
    this.windowWait = { timer, release };
    void this.readiness.track(() => waited);
  }

  /** The curve of one window of the step, bucketed on its own; drawn when it is still the one wanted. */
  private loadWindowCurve(window: CurveWindow, key: string): void {
    const p = this.stepParams();
    if (!p || key !== this.curveKey()) return;
    const { focus } = this.selection.get();
    const isLatest = this.latest.windowCurve.next();
    const curve = this.page.curve;
    void this.readiness.track(async () => {
      try {
        const data = await this.api.curve({ ...p, points: this.state.requestedPoints, breakdown: focus, top: CURVE_SERIES, window });
        if (!isLatest() || key !== this.curveKey()) return;
        this.state.windowCurve = { data, key };
        if (this.state.curve) curve.setError(null);
        curve.setWindowCurve(data);
      } catch (e) {
        if (!isLatest()) return;
        // The whole step's curve stays drawn (clipped to the zoom): it is right, only coarser.
        curve.setError(`Could not load the zoomed window (the whole step’s curve is shown): ${message(e)}`);
      }
    });
  }

  // ---- the selected scope: details and the curve's highlight ----

  /**
   * Details of the selected scope (or of the focus when nothing is selected).
   * Runs inside the click: the figures the treemap already holds are drawn at
   * once (no request, no re-layout); the full details follow from the API (its
   * cache when prefetched), and only then the highlight's curve, if the loaded
   * curve lacks the scope's series, so the two requests do not compete.
   */
  private loadDetails(): void {
    const p = this.stepParams();
    if (!p) return;
    const s = this.selection.get();
    const scope = s.selected ?? s.focus;
    const { details, curve } = this.page;
    this.previews.useKey(stepKey(p));
    const preview = this.previews.get(scope);
    if (preview) {
      // Valid figures at once; the panel says its tables are loading (not dimmed: nothing shown is stale).
      details.setError(null);
      details.setLoading(false);
      details.setData(preview);
      curve.setTimeSpan(null);
    }
    const loaded = this.loadInto(
      'details',
      details,
      async (isLatest) => {
        const data = await this.api.scope({ ...p, scope, top: TOP_NODES });
        // Even from the cache, the tables wait for the preview to be painted: the click's frame stays light.
        if (preview && isLatest()) await afterPaint();
        return data;
      },
      (data) => {
        details.setData(data);
        curve.setTimeSpan(data && scope !== '' ? data.time_span : null);
      },
      (e) => `Could not load details of “${scope || '(all)'}”: ${message(e)}${scopeHint(e, s.group)}`,
      !preview,
    );
    if (this.highlightFromLoadedCurve()) return;
    void this.readiness.track(async () => {
      await loaded;
      await this.loadHighlight();
    });
  }

  /** Highlights the selection from the loaded curve's series when it has them (no request); false when it cannot. */
  private highlightFromLoadedCurve(): boolean {
    const selected = this.selection.get().selected;
    const highlight = selected && this.state.curve ? highlightOf(this.state.curve, selected) : null;
    if (selected && !highlight) return false;
    this.latest.highlight.next();
    this.page.curve.setHighlight(highlight);
    return true;
  }

  /** The selected scope's own series, from the loaded curve or one broken down by its parent. */
  private async loadHighlight(): Promise<void> {
    const isLatest = this.latest.highlight.next();
    const p = this.stepParams();
    const curve = this.state.curve;
    const selected = this.selection.get().selected;
    if (!curve || !selected || !p) {
      this.page.curve.setHighlight(null);
      return;
    }
    const own = highlightOf(curve, selected);
    if (own) {
      this.page.curve.setHighlight(own);
      return;
    }
    try {
      const parent = await this.api.curve({
        ...p,
        points: this.state.requestedPoints,
        breakdown: parentScope(selected),
        top: HIGHLIGHT_SERIES,
      });
      if (isLatest()) this.page.curve.setHighlight(highlightOf(parent, selected));
    } catch {
      // The highlight is a nicety: a scope without its own series keeps the plain curve.
      if (isLatest()) this.page.curve.setHighlight(null);
    }
  }
}
