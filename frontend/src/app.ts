// The controller: fetches what the selection needs and hands it to the views.
// Views draw and write the selection; only the controller (this file and
// the *-loads.ts) talks to the API.
// Loaded data lives in AppState, the layout in PageView, readiness in Readiness,
// the curve's loads in CurveLoads; loading.ts holds the one load-into-a-panel helper.
// The main views (summary, curve, treemap, details) make the page ready; the
// graph and the what-if are secondary panels with their own readiness, asked
// for only once the main views are ready, so that they never hold them back.

import { Api, ApiError, type DefaultStepResponse, type DeviceParams, type Group, type RunInfo, type SummaryResponse } from './api';
import { AppState } from './app-state';
import { CompareLoads } from './compare-loads';
import { CurveLoads } from './curve-loads';
import { WhatIfLoads } from './whatif-loads';
import { chooseDevice, chooseRun, chooseStep } from './lib/defaults';
import { curvePointsFor } from './lib/curve-data';
import { restorable, type SavedSelection } from './lib/saved-selection';
import { otherRuns, otherTags } from './lib/whatif';
import { ScopePreviews } from './lib/scope-preview';
import { Latest, afterPaint, loadInto, message } from './loading';
import { LoadCounter, type Readiness, afterReady, allIdle } from './readiness';
import { type Selection, type SelectionKey, type SelectionState, stepParams } from './selection';
import type { PageView } from './views/page';
import type { EmptyStateOptions } from './views/summary';
import { stepLabel } from './views/pickers';

/**
 * Boxes the graph view asks for (the rest one "(N more)" box): dagre lays 200 boxes with their edges out in
 * 3-6 s on the main thread, which froze trial AF's page after a run of 600 scopes opened; 60 take 0.4 s, and
 * are as many as a panel shows readably.
 */
const GRAPH_MAX_NODES = 60;

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
    /** The newest graph load waiting for the main views: one replaced meanwhile never asks the route. */
    graphWanted: new Latest(),
    details: new Latest(),
    prefetch: new Latest(),
  };
  private readonly curves: CurveLoads;
  private readonly compare: CompareLoads;
  private readonly whatif: WhatIfLoads;
  /** Grouping switches asked for (`switchGroup`): only the last one asked is applied. */
  private groupSwitches = 0;
  /** The graph panel's own readiness (data-ready on its element). */
  private readonly graphReadiness: LoadCounter;

  constructor(
    private readonly selection: Selection,
    private readonly page: PageView,
    private readonly readiness: Readiness,
    private readonly api = new Api(),
  ) {
    this.curves = new CurveLoads(api, readiness, selection, this.state, page.curve);
    this.compare = new CompareLoads(api, readiness, selection, page.compare, (comparing) => page.setCompareMode(comparing));
    this.graphReadiness = new LoadCounter(page.graph.element);
    // The what-if is asked after the main views and the graph: its route is the slowest, and it is below the first screen.
    this.whatif = new WhatIfLoads(api, new LoadCounter(page.whatif.element), [readiness, this.graphReadiness], page.whatif);
    selection.subscribe((state, changed) => this.onSelection(state, changed));
    page.curve.onWidthChange = (width) => this.onCurveWidth(width);
    page.pickers.onGroupChange = (group) => void this.switchGroup(group);
  }

  /**
   * Another grouping, keeping the scope drilled into and the one selected where it has them (a layer is
   * often a name scope too: `shared_model/unet_01`), asked of the routes the views then read (cached);
   * where it has not, back to its top, as a new grouping's scopes are other paths.
   */
  private async switchGroup(group: Group): Promise<void> {
    const token = ++this.groupSwitches; // a later switch supersedes this one
    const before = this.selection.get();
    const p = stepParams(before);
    const selected = before.selected;
    if (!p || (before.focus === '' && !selected)) {
      this.selection.set({ group });
      return;
    }
    const has = (ask: () => Promise<unknown>) => ask().then(() => true, () => false);
    const [focusKept, selectedKept] = await Promise.all([
      before.focus === '' || has(() => this.api.scopes({ ...p, group, scope: before.focus })),
      !selected || has(() => this.api.scope({ ...p, group, scope: selected, top: TOP_NODES })),
    ]);
    if (token !== this.groupSwitches) return;
    const now = this.selection.get();
    // Another step, device or scope picked meanwhile: the grouping asked for, over what is shown now.
    const moved = stepKey(stepParams(now)) !== stepKey(p) || now.focus !== before.focus || now.selected !== selected;
    this.selection.set(!moved && focusKept && selectedKept ? { group, focus: before.focus, selected } : { group });
  }

  /**
   * Lists the runs, then opens what was chosen before (a link's or the last visit's selection), else the largest peak.
   * `openingNow`: nothing can have been chosen before, so the largest peak (`default_step`) is asked at once, with the runs.
   */
  start(chosenBefore: Promise<SavedSelection | null>, openingNow = false): Promise<void> {
    const early = openingNow ? this.api.defaultStep() : null;
    early?.catch(() => {}); // openingSelection falls back on its own; unused when a selection turns up after all
    return this.readiness.track(() => this.loadRuns(chosenBefore, early));
  }

  /** Asks for a curve with about one point per pixel again when the plot grew or shrank by a quarter. */
  private onCurveWidth(width: number): void {
    const have = this.state.curve?.t_us.length ?? 0;
    const want = curvePointsFor(width);
    const asked = this.state.requestedPoints;
    if (!this.state.device || have === 0 || Math.abs(want - asked) < asked / 4) return;
    this.curves.load();
  }

  // ---- the first step ----

  private async loadRuns(chosenBefore: Promise<SavedSelection | null>, early: Promise<DefaultStepResponse> | null): Promise<void> {
    const listed = this.api.runs();
    listed.catch(() => {}); // its failure is handled below, once awaited
    // With nothing chosen before, the opening step is asked alongside the runs (at once when that was known at once).
    const before = await chosenBefore;
    const opening = before ? null : (early ?? this.api.defaultStep());
    opening?.catch(() => {}); // openingSelection falls back on its own
    let runs: RunInfo[];
    // Listing reads every profile to find its steps: seconds on a logdir of many (trial AM's 21 profiled runs
    // had shown a blank page behind "Loading…").
    this.readiness.loadingAs('Listing the runs… (each profile is read to find its steps)');
    try {
      runs = (await listed).runs;
    } catch (e) {
      this.readiness.loadingAs(null);
      this.showEmpty('Could not list runs', message(e), 'Could not list runs', { error: true });
      return;
    }
    this.readiness.loadingAs(null);
    this.state.runs = runs;
    this.page.pickers.setRuns(runs);
    if (!chooseRun(runs, null)) {
      this.showEmpty('No traced steps yet', 'No run in this log directory has a traced step: run metadata from a traced Session.run, or a profile (.xplane.pb) with memory events.', 'No traced steps', { howTo: true });
      return;
    }
    const restored = restorable(before, runs);
    // The largest peak is found by analysing each run's latest step (32 runs at most): seconds on a big
    // logdir, said while it runs (the page had stayed blank behind a small "Loading…").
    // (Not counted: the server compares the 32 runs written last at most.)
    if (!restored && runs.filter((r) => r.steps.length > 0).length > 1) {
      this.readiness.loadingAs('Finding the run with the largest peak… (or pick a run)');
    }
    const first = restored ?? (await this.openingSelection(runs, opening ?? this.api.defaultStep()));
    this.readiness.loadingAs(null);
    if (this.selection.get().run !== null) {
      this.state.opening = null; // the user picked a run meanwhile: theirs wins
      return;
    }
    this.selection.set(first);
  }

  /** Nothing chosen before: the step with the largest peak (`default_step`), else the first run's latest step. */
  private async openingSelection(runs: readonly RunInfo[], asked: Promise<DefaultStepResponse>): Promise<Partial<SelectionState>> {
    try {
      const opening = await asked;
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
    if (changed.has('run')) this.readiness.loadingAs(null); // a run is chosen: no longer finding one
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
    if (changed.has('timeRange')) this.curves.scheduleWindow();
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
    this.page.findings.setData(summary?.findings, device);
    this.page.resident.setDevice(device);
    this.page.details.setStepCategories(device?.categories ?? []);
    this.whatif.setStep(
      summary && device ? { run: summary.run, tag: summary.tag, device: device.id } : null,
      otherTags(this.state.runs, summary?.run ?? null, summary?.tag ?? null),
      otherRuns(this.state.runs, summary?.run ?? null),
    );
    if (!device) return;
    const hasCurve = device.has_curve !== false;
    this.page.treemap.setHasCurve(hasCurve);
    this.page.details.setHasCurve(hasCurve);
    this.page.graph.setHasCurve(hasCurve);
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
      case 'empty': {
        // A Keras run's `batch_N` record beside its profiled steps: open those, no TF1 how-to.
        const profiled = (this.state.runs.find((r) => r.run === summary.run)?.steps ?? []).filter((s) => s.source === 'xplane');
        const open = profiled.slice(0, 8).map((s) => ({ label: `Open ${stepLabel(s.tag, s.step, s.function)}`, onOpen: () => this.selection.set({ tag: s.tag }) }));
        this.showEmpty('This step has no step stats', text, `Step “${tag}”: no step stats`, open.length ? { open } : { howTo: true });
        return;
      }
      case 'corrupt': {
        const profile = summary.source === 'xplane';
        // A profile that cannot be read (damaged, cut short, empty, or an old profiler's format: its message says
        // which) is fixed by profiling again: shown how, as for a step without memory.
        this.showEmpty(profile ? 'This step’s profile cannot be read' : 'This step’s run metadata cannot be read', text, `Step “${tag}”: unreadable`, {
          error: true,
          hint: profile
            ? 'Other runs and profiles are not affected: profile this step again.'
            : 'The bytes stored for this step do not decode as a RunMetadata (a damaged or truncated event file). Other steps are not affected: pick another step, or trace this one again.',
          howTo: profile,
        });
        return;
      }
      default:
        this.showEmpty('Nothing to show for this step', text, `Step “${tag}”: nothing to show`);
    }
  }

  // ---- the focused scope: treemap level, graph, curve ----

  private loadLevel(): void {
    const s = this.selection.get();
    const p = stepParams(s);
    if (!p || !this.state.device) return;
    if (this.state.device.id !== p.device) {
      this.state.device = this.state.deviceById(p.device);
      this.showSummary();
    }
    const { focus, group } = s;
    const key = stepKey(p);
    this.previews.useKey(key);
    const { treemap, graph } = this.page;

    void loadInto(
      this.readiness,
      this.latest.scopes,
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

    // The graph is a secondary panel: asked once the level, details and curve are drawn (dimmed meanwhile).
    graph.setLoading(true);
    void afterReady(this.graphReadiness, [this.readiness], this.latest.graphWanted.next(), () =>
      loadInto(
        this.graphReadiness,
        this.latest.graph,
        graph,
        () => this.api.graph({ run: p.run, tag: p.tag, device: p.device, scope: focus, group, max_nodes: GRAPH_MAX_NODES }),
        (data) => graph.setData(data),
        (e) =>
          // A layer (not `(feeds)` or `(plumbing)`, which no graph holds) that is no name scope of the graph.
          e instanceof ApiError && e.status === 404 && group === 'layer' && focus !== '' && !focus.startsWith('(')
            ? `“${focus}” is a layer of the grouping by layer (gradients and updates folded in), not a name scope of the graph, which keeps the graph’s own scopes: pick Group “name scope” to find it there.`
            : `No graph for “${focus || '(all)'}”: ${message(e)}`,
      ),
    );

    this.curves.load();
  }

  /**
   * Fetches, one at a time and only once nothing else loads (after the first
   * paint, and the graph's), the details of the largest tiles drawn: the API
   * cache then answers a click on them without a round trip. Prefetches never
   * touch data-ready.
   */
  private async prefetchDetails(): Promise<void> {
    const isLatest = this.latest.prefetch.next();
    const p = stepParams(this.selection.get());
    if (!p) return;
    const targets = this.page.treemap.visibleScopes().slice(0, PREFETCH_DETAILS);
    for (const scope of targets) {
      await allIdle(this.readiness, this.graphReadiness);
      if (!isLatest() || stepKey(stepParams(this.selection.get())) !== stepKey(p)) return;
      try {
        await this.api.scope({ ...p, scope, top: TOP_NODES });
      } catch {
        return; // a failing prefetch says nothing the real request will not say
      }
    }
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
    const s = this.selection.get();
    const p = stepParams(s);
    if (!p) return;
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
    const loaded = loadInto(
      this.readiness,
      this.latest.details,
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
    if (this.curves.highlightFromLoaded()) return;
    void this.readiness.track(async () => {
      await loaded;
      await this.curves.loadHighlight();
    });
  }
}
