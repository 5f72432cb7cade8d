// The what-if panel's loads: the `whatif` route for the shown step and memory
// space, again when the batch, limit or fitted runs change (the view debounces
// typing). Part of the controller: only it, app.ts and the other *-loads fetch.

import type { Api } from './api';
import { whatIfErrorText } from './lib/whatif';
import { Latest, loadInto, message } from './loading';
import type { Readiness } from './readiness';
import type { WhatIfView } from './views/whatif';

export interface WhatIfStep {
  run: string;
  tag: string;
  device: string;
  /** The trace's source (`xplane` steps cannot be scaled yet). */
  source?: string;
}

export class WhatIfLoads {
  private readonly latest = new Latest();
  private step: WhatIfStep | null = null;

  constructor(
    private readonly api: Api,
    private readonly readiness: Readiness,
    private readonly view: WhatIfView,
  ) {
    view.onRequest = () => this.load();
  }

  /** The step shown (null: none), and the other runs the user may fit with it. */
  setStep(step: WhatIfStep | null, otherRuns: readonly string[]): void {
    this.view.setRuns(otherRuns);
    const same = step && this.step && step.run === this.step.run && step.tag === this.step.tag && step.device === this.step.device;
    this.step = step;
    if (same) return;
    if (step) this.load();
    else {
      this.latest.next();
      this.view.setError(null);
      this.view.setData(null);
    }
  }

  private load(): void {
    const step = this.step;
    const request = this.view.request();
    if (!step || !request) return;
    void loadInto(
      this.readiness,
      this.latest,
      this.view,
      () => this.api.whatif({ run: step.run, tag: step.tag, device: step.device, batch: request.batch, runs: request.runs, limit: request.limit }),
      (data) => this.view.setData(data),
      (e) => whatIfErrorText(step, message(e)),
    );
  }
}
