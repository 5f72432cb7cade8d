// How the controller loads a request into a panel: latest-wins guards, one
// helper for "dim, fetch, draw the answer or its error", error texts.

import { ApiError } from './api';
import type { LoadCounter } from './readiness';

/** Latest-wins guard: a response for an older request of the same kind is dropped. */
export class Latest {
  private n = 0;
  next(): () => boolean {
    const mine = ++this.n;
    return () => mine === this.n;
  }
}

/** A panel that shows one request's answer: dimmed while it loads, an error line when it fails. */
export interface Loadable {
  setLoading(loading: boolean): void;
  setError(message: string | null): void;
}

export function message(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  return e instanceof Error ? e.message : String(e);
}

/**
 * Loads one request's answer into a panel: dimmed meanwhile (unless `dim` is
 * false), then `show(data)`, or its error and `show(null)`; an answer is
 * dropped when a newer load guarded by the same `latest` started since.
 * Counts as loading on `readiness` (data-ready "0") until it settles.
 */
export function loadInto<T>(
  readiness: LoadCounter,
  latest: Latest,
  view: Loadable,
  request: (isLatest: () => boolean) => Promise<T>,
  show: (data: T | null) => void | Promise<void>,
  failure: (e: unknown) => string,
  dim = true,
): Promise<void> {
  const isLatest = latest.next();
  if (dim) view.setLoading(true);
  return readiness.track(async () => {
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

/**
 * Resolves after the browser has painted the current changes (next animation
 * frame, then a task), or after 100 ms when no frame comes (a hidden tab).
 */
export function afterPaint(): Promise<void> {
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
