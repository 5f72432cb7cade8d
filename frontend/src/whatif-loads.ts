// The what-if panel's loads: the `whatif` route for the shown step and memory
// space, again when the batch, limit or fitted runs change (the view debounces
// typing). A secondary panel: its loads start once the main views (and the
// graph) are ready, and count on the panel's own data-ready, never the page's.
// Part of the controller: only it, app.ts and the other *-loads fetch.

import type { Api } from './api';
import { whatIfErrorText } from './lib/whatif';
import { Latest, loadInto, message } from './loading';
import { type LoadCounter, afterReady } from './readiness';
import type { WhatIfView } from './views/whatif';

export interface WhatIfStep {
  run: string;
  tag: string;
  device: string;
}

export class WhatIfLoads {
  private readonly latest = new Latest();
  /** Which deferred load is the newest: one replaced while it waited never asks the route. */
  private readonly wanted = new Latest();
  private step: WhatIfStep | null = null;

  /**
   * `readiness`: the panel's own counter (its data-ready); `after`: what must be
   * ready before the route is asked (the page's main views, the graph).
   */
  constructor(
    private readonly api: Api,
    private readonly readiness: LoadCounter,
    private readonly after: readonly LoadCounter[],
    private readonly view: WhatIfView,
  ) {
    view.onRequest = () => this.load();
  }

  /** The step shown (null: none), and the other steps of its run and other runs the user may fit with it. */
  setStep(step: WhatIfStep | null, otherTags: readonly string[], otherRuns: readonly string[]): void {
    // Steps and runs picked to fit with are the shown run's model's: another run starts with none picked.
    this.view.setChoices(otherTags, otherRuns, step?.run === this.step?.run);
    const same = step && this.step && step.run === this.step.run && step.tag === this.step.tag && step.device === this.step.device;
    this.step = step;
    if (same) return;
    this.view.resetTracedBatch(); // the batch a step ran at is that step's
    if (step) this.load();
    else {
      this.wanted.next();
      this.latest.next();
      this.view.setError(null);
      this.view.setData(null);
    }
  }

  private load(): void {
    const step = this.step;
    const request = this.view.request();
    if (!step || !request) return;
    const stillWanted = this.wanted.next();
    void afterReady(this.readiness, this.after, stillWanted, () =>
      loadInto(
        this.readiness,
        this.latest,
        this.view,
        () =>
          this.api.whatif({
            run: step.run,
            tag: step.tag,
            device: step.device,
            batch: request.batch,
            tags: request.tags,
            runs: request.runs,
            limit: request.limit,
            tracedBatch: request.tracedBatch,
          }),
        (data) => this.view.setData(data),
        (e) => whatIfErrorText(step, message(e)),
      ),
    );
  }
}
