// The memory curve's loads: the whole step's curve (broken down by the focused
// scope's children), the zoomed window's own curve once a zoom settles, and
// the selected scope's highlight. Part of the controller: only it fetches.

import type { Api, CurveWindow } from './api';
import type { AppState } from './app-state';
import { curvePointsFor, highlightOf } from './lib/curve-data';
import { WINDOW_FETCH_DELAY_MS, needsWindowFetch } from './lib/curve-window';
import { noCurveReason } from './lib/peak-figures';
import { Latest, loadInto, message } from './loading';
import type { Readiness } from './readiness';
import { type Selection, parentScope, stepParams } from './selection';
import type { CurveView } from './views/curve';

/** Series asked with the curve: the stack shows the top 8, the rest serve the selection's highlight. */
const CURVE_SERIES = 20;
const HIGHLIGHT_SERIES = 20;

export class CurveLoads {
  private readonly latest = { curve: new Latest(), windowCurve: new Latest(), highlight: new Latest() };
  /** A zoom waiting to settle before its window is fetched; `release` ends its share of data-ready. */
  private windowWait: { timer: ReturnType<typeof setTimeout>; release: () => void } | null = null;

  constructor(
    private readonly api: Api,
    private readonly readiness: Readiness,
    private readonly selection: Selection,
    private readonly state: AppState,
    private readonly view: CurveView,
  ) {}

  /** The curve of the step, broken down by the focused scope's children for stacking. */
  load(): void {
    const s = this.selection.get();
    const p = stepParams(s);
    if (!p) return;
    const { focus } = s;
    const curve = this.view;
    const hasCurve = this.state.device?.has_curve !== false;
    const device = this.state.device;
    curve.setNote(hasCurve || !device ? null : `No memory curve: ${noCurveReason(device)}. The scopes are sized by allocated bytes.`);
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
    void loadInto(
      this.readiness,
      this.latest.curve,
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
    this.scheduleWindow(0);
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
  scheduleWindow(delay = WINDOW_FETCH_DELAY_MS): void {
    this.cancelWindowWait();
    this.latest.windowCurve.next();
    const key = this.curveKey();
    const { state } = this;
    if (state.windowCurve && state.windowCurve.key !== key) {
      state.windowCurve = null;
      this.view.setWindowCurve(null);
    }
    const duration = state.curve?.duration_us ?? state.summary?.duration_us ?? null;
    const want = needsWindowFetch(this.selection.get().timeRange, duration, state.windowCurve?.data.window ?? null);
    if (!want || !stepParams(this.selection.get())) return;
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
    const p = stepParams(this.selection.get());
    if (!p || key !== this.curveKey()) return;
    const { focus } = this.selection.get();
    const isLatest = this.latest.windowCurve.next();
    const curve = this.view;
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

  /** Highlights the selection from the loaded curve's series when it has them (no request); false when it cannot. */
  highlightFromLoaded(): boolean {
    const selected = this.selection.get().selected;
    const highlight = selected && this.state.curve ? highlightOf(this.state.curve, selected) : null;
    if (selected && !highlight) return false;
    this.latest.highlight.next();
    this.view.setHighlight(highlight);
    return true;
  }

  /** The selected scope's own series, from the loaded curve or one broken down by its parent. */
  async loadHighlight(): Promise<void> {
    const isLatest = this.latest.highlight.next();
    const p = stepParams(this.selection.get());
    const curve = this.state.curve;
    const selected = this.selection.get().selected;
    if (!curve || !selected || !p) {
      this.view.setHighlight(null);
      return;
    }
    const own = highlightOf(curve, selected);
    if (own) {
      this.view.setHighlight(own);
      return;
    }
    try {
      const parent = await this.api.curve({
        ...p,
        points: this.state.requestedPoints,
        breakdown: parentScope(selected),
        split: false,
        top: HIGHLIGHT_SERIES,
      });
      if (isLatest()) this.view.setHighlight(highlightOf(parent, selected));
    } catch {
      // The highlight is a nicety: a scope without its own series keeps the plain curve.
      if (isLatest()) this.view.setHighlight(null);
    }
  }
}
