// Readiness and the status line: `data-ready` is "0" while anything for the
// current selection loads; the status line says "Loading…" meanwhile, then a short note.

import { el } from './dom';

export type NoteKind = 'empty' | 'error' | 'idle';

export class Readiness {
  readonly status = el('div', { class: 'status', 'data-testid': 'status', role: 'status', 'aria-live': 'polite' });
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  /** What the status line says when nothing loads: short, never the message the page shows below. */
  private statusNote: { text: string; kind: NoteKind } = { text: '', kind: 'idle' };

  /** Elements that carry `data-ready` besides document.body (the page's root). */
  private readonly targets: HTMLElement[] = [];

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

  /** Resolves once nothing for the current selection is loading. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The status line's text once loads end (it says "Loading…" meanwhile). */
  note(text: string, kind: NoteKind): void {
    this.statusNote = { text, kind };
    this.update();
  }

  private update(): void {
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      // After the current task, so that a load started right after this one counts first.
      setTimeout(() => waiters.forEach((w) => w()), 0);
    }
    const ready = this.inFlight === 0 ? '1' : '0';
    document.body.dataset.ready = ready;
    for (const target of this.targets) target.dataset.ready = ready;
    if (this.inFlight > 0) this.setStatus('Loading…', 'loading');
    else this.setStatus(this.statusNote.text, this.statusNote.kind);
  }

  private setStatus(text: string, kind: NoteKind | 'loading'): void {
    if (this.status.textContent !== text) this.status.textContent = text;
    this.status.title = text;
    this.status.dataset.kind = kind;
  }
}
