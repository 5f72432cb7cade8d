// What the controller has loaded for the current selection: kept apart from
// the views (which draw what they are handed) and from the selection (what
// the user chose). Plain data; no fetching, no drawing.

import type { CurveResponse, DefaultStepResponse, DeviceSummary, RunInfo, SummaryResponse } from './api';

export class AppState {
  runs: RunInfo[] = [];
  /** The current step's summary, and its entry for the selected device. */
  summary: SummaryResponse | null = null;
  device: DeviceSummary | null = null;
  /** The whole step's curve, and how many points were asked for it (about one per pixel). */
  curve: CurveResponse | null = null;
  requestedPoints = 0;
  /** The zoomed window's curve and the request it answers (its window aside): dropped when that changes. */
  windowCurve: { data: CurveResponse; key: string } | null = null;
  /** Why the page opened on this step (the `default_step` answer); null once the user went elsewhere. */
  opening: DefaultStepResponse | null = null;

  /** The opening reason while the page still shows the step it opened on. */
  openingFor(run: string | null, tag: string | null): DefaultStepResponse | null {
    const o = this.opening;
    return o && o.run === run && o.tag === tag ? o : null;
  }

  deviceById(id: string | null): DeviceSummary | null {
    return this.summary?.devices.find((d) => d.id === id) ?? null;
  }
}
