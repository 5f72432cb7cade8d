// Readiness: `data-ready` is "0" while anything for the current selection
// loads. The page's own (`Readiness`: document.body and the page's root, with
// the status line that says "Loading…" meanwhile, then a short note) counts the
// main views: summary, curve, treemap, details. A secondary panel (the graph,
// the what-if) has its own `LoadCounter` on its element, loads after the main
// views are ready (`afterReady`), and never holds the page's readiness back.

import { el } from './dom';

export type NoteKind = 'empty' | 'error' | 'idle';

/** Counts loads in flight and mirrors "none in flight" as `data-ready` ("1"/"0") on its targets. */
export class LoadCounter {
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** Elements that carry `data-ready`. */
  private readonly targets: HTMLElement[] = [];

  constructor(...targets: HTMLElement[]) {
    for (const target of targets) this.mirrorOn(target);
  }

  get loading(): boolean {
    return this.inFlight > 0;
  }

  mirrorOn(target: HTMLElement): void {
    this.targets.push(target);
    target.dataset.ready = this.inFlight === 0 ? '1' : '0';
  }

  /** Counts `load` as loading until it settles. */
  async track(load: () => Promise<void>): Promise<void> {
    this.inFlight++;
    this.update();
    try {
      await load();
    } finally {
      this.inFlight--;
      this.update();
    }
  }

  /** Resolves once nothing counted here is loading (checked again after the current task). */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  protected update(): void {
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      // After the current task, so that a load started right after this one counts first:
      // a waiter whose counter is busy again by then keeps waiting.
      setTimeout(() => {
        if (this.inFlight > 0) return;
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        waiters.forEach((w) => w());
      }, 0);
    }
    const ready = this.inFlight === 0 ? '1' : '0';
    for (const target of this.targets) target.dataset.ready = ready;
  }
}

/** Resolves once every counter is idle at the same moment. */
export async function allIdle(...counters: LoadCounter[]): Promise<void> {
  for (;;) {
    const busy = counters.find((c) => c.loading);
    if (!busy) return;
    await busy.idle();
  }
}

/**
 * A secondary panel's load: counted by the panel's own `panel` counter from
 * now, started only once every counter in `after` is idle (the main views
 * first), and skipped when `stillWanted()` says a newer load replaced it meanwhile.
 */
export function afterReady(
  panel: LoadCounter,
  after: readonly LoadCounter[],
  stillWanted: () => boolean,
  load: () => Promise<void>,
): Promise<void> {
  return panel.track(async () => {
    await allIdle(...after);
    if (stillWanted()) await load();
  });
}

/** The page's readiness (document.body and the mirrored roots) and its status line. */
export class Readiness extends LoadCounter {
  readonly status = el('div', { class: 'status', 'data-testid': 'status', role: 'status', 'aria-live': 'polite' });
  /** What the status line says when nothing loads: short, never the message the page shows below. */
  private statusNote: { text: string; kind: NoteKind } = { text: '', kind: 'idle' };

  /** What the status line says while loads run (a long one says what it waits for). */
  private loadingText = 'Loading…';

  /** The status line's text once loads end (it says "Loading…" meanwhile). */
  note(text: string, kind: NoteKind): void {
    this.statusNote = { text, kind };
    this.update();
  }

  /** What the status line says while loads run, until `loadingAs(null)` ("Loading…"). */
  loadingAs(text: string | null): void {
    this.loadingText = text ?? 'Loading…';
    this.update();
  }

  protected override update(): void {
    super.update();
    document.body.dataset.ready = this.loading ? '0' : '1';
    if (this.loading) this.setStatus(this.loadingText, 'loading');
    else this.setStatus(this.statusNote.text, this.statusNote.kind);
  }

  private setStatus(text: string, kind: NoteKind | 'loading'): void {
    if (this.status.textContent !== text) this.status.textContent = text;
    this.status.title = text;
    this.status.dataset.kind = kind;
  }
}
