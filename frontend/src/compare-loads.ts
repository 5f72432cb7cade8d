// Compare mode's loads: the `compare` route for the focused scope, then each
// step's curve (two `curve` calls, each with its own run, tag and memory space
// id), and the selected scope's own bytes in each step. Part of the controller:
// only it, app.ts and curve-loads.ts fetch.

import type { Api, CompareResponse, CurveResponse } from './api';
import { curvePointsFor, highlightOf, type HighlightSeries } from './lib/curve-data';
import { Latest, loadInto, message } from './loading';
import type { Readiness } from './readiness';
import { parentScope, type Selection, type SelectionKey, type SelectionState } from './selection';
import { COMPARE_TOP, type CompareView } from './views/compare';

/** Series asked for the selected scope's highlight (its parent's largest children). */
const HIGHLIGHT_SERIES = 50;
/** Selection keys that change what is compared. */
const COMPARED: readonly SelectionKey[] = ['against', 'run', 'tag', 'device', 'group', 'compareFocus'];

export class CompareLoads {
  private readonly latest = { compare: new Latest(), curves: new Latest(), highlight: new Latest() };
  private data: CompareResponse | null = null;
  private curves: { a: CurveResponse | null; b: CurveResponse | null; points: number } | null = null;

  constructor(
    private readonly api: Api,
    private readonly readiness: Readiness,
    private readonly selection: Selection,
    private readonly view: CompareView,
    /** Shows compare mode, or the single-step view as it was (it is left untouched meanwhile). */
    private readonly showMode: (comparing: boolean) => void,
  ) {
    selection.subscribe((state, changed) => this.onSelection(state, changed));
  }

  private onSelection(state: Readonly<SelectionState>, changed: ReadonlySet<SelectionKey>): void {
    if (changed.has('against')) this.showMode(state.against !== null);
    if (state.against === null) {
      if (changed.has('against')) this.drop();
      return;
    }
    if (COMPARED.some((key) => changed.has(key))) this.load();
    else if (changed.has('compareSelected')) void this.readiness.track(() => this.loadHighlights());
  }

  /** Out of compare mode: answers still in flight are dropped, the views emptied. */
  private drop(): void {
    this.latest.compare.next();
    this.latest.curves.next();
    this.latest.highlight.next();
    this.data = null;
    this.curves = null;
    this.view.setData(null);
    this.view.curve.setCurves(null, null, null);
  }

  private load(): void {
    const s = this.selection.get();
    const against = s.against;
    // A's memory space comes with its summary: until then there is nothing to compare.
    if (!against || s.run === null || s.tag === null || s.device === null) return;
    const params = {
      run: s.run,
      tag: s.tag,
      device: s.device,
      against_run: against.run,
      against_tag: against.tag,
      group: s.group,
      scope: s.compareFocus,
      top: COMPARE_TOP,
    };
    void loadInto(
      this.readiness,
      this.latest.compare,
      this.view,
      () => this.api.compare(params),
      async (data) => {
        this.data = data;
        this.view.setData(data);
        if (data) await this.loadCurves(data);
      },
      (e) => `Could not compare ${s.run} ${s.tag} with ${against.run} ${against.tag}: ${message(e)}`,
    );
  }

  /** Each step's whole curve (no breakdown: either step may lack the other's scopes); the API's cache answers a new focus. */
  private async loadCurves(data: CompareResponse): Promise<void> {
    const { a, b, group } = data;
    const points = curvePointsFor(this.view.curve.plotWidth());
    const isLatest = this.latest.curves.next();
    const curveOf = (side: typeof a) =>
      side.has_curve ? this.api.curve({ run: side.run, tag: side.tag, device: side.id, group, points, top: 0 }) : Promise.resolve(null);
    try {
      const [ca, cb] = await Promise.all([curveOf(a), curveOf(b)]);
      if (!isLatest()) return;
      this.view.curve.setError(null);
      this.curves = { a: ca, b: cb, points };
      this.view.curve.setCurves({ a, b }, ca, cb);
      await this.loadHighlights();
    } catch (e) {
      if (!isLatest()) return;
      this.view.curve.setError(`Could not load the curves: ${message(e)}`);
      this.view.curve.setCurves(null, null, null);
    }
  }

  /** The selected scope's own bytes in each step, from a curve broken down by its parent; a step without the scope shows none. */
  private async loadHighlights(): Promise<void> {
    const isLatest = this.latest.highlight.next();
    const selected = this.selection.get().compareSelected;
    const data = this.data;
    const curves = this.curves;
    if (!selected || !data || !curves) {
      this.view.curve.setHighlights(null, null);
      return;
    }
    const highlight = async (side: typeof data.a): Promise<HighlightSeries | null> => {
      if (!side.has_curve) return null;
      try {
        const parent = await this.api.curve({
          run: side.run,
          tag: side.tag,
          device: side.id,
          group: data.group,
          points: curves.points,
          breakdown: parentScope(selected),
          split: false,
          top: HIGHLIGHT_SERIES,
        });
        return highlightOf(parent, selected);
      } catch {
        return null; // the scope (or its parent) exists in one step only
      }
    };
    const [ha, hb] = await Promise.all([highlight(data.a), highlight(data.b)]);
    if (isLatest()) this.view.curve.setHighlights(ha, hb);
  }
}
