// @vitest-environment jsdom
import { describe, expect, it } from 'vitest';
import { el } from './dom';
import { LoadCounter, Readiness, afterReady, allIdle } from './readiness';

/** A load that ends when `finish()` is called. */
function pending(): { promise: Promise<void>; finish: () => void } {
  let finish = () => {};
  const promise = new Promise<void>((resolve) => (finish = resolve));
  return { promise, finish };
}

/** Lets promise callbacks and zero-delay timers run. */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

describe('LoadCounter', () => {
  it('mirrors loads in flight as data-ready on its element only', async () => {
    document.body.dataset.ready = '1';
    const panel = el('section');
    const counter = new LoadCounter(panel);
    expect(panel.dataset.ready).toBe('1');
    const load = pending();
    const tracked = counter.track(() => load.promise);
    expect(panel.dataset.ready).toBe('0');
    expect(counter.loading).toBe(true);
    expect(document.body.dataset.ready).toBe('1'); // a panel's counter never touches the page's readiness
    load.finish();
    await tracked;
    expect(panel.dataset.ready).toBe('1');
    expect(counter.loading).toBe(false);
  });

  it('keeps idle() waiting when a load starts right after the last one ended', async () => {
    const counter = new LoadCounter();
    const first = pending();
    const firstTracked = counter.track(() => first.promise);
    let idle = false;
    void counter.idle().then(() => (idle = true));
    const second = pending();
    first.finish();
    await firstTracked;
    void counter.track(() => second.promise); // in the same task: the counter is busy again
    await settle();
    expect(idle).toBe(false);
    second.finish();
    await settle();
    expect(idle).toBe(true);
  });

  it('allIdle waits until every counter is idle at once', async () => {
    const a = new LoadCounter();
    const b = new LoadCounter();
    const loadA = pending();
    const loadB = pending();
    void a.track(() => loadA.promise);
    void b.track(() => loadB.promise);
    let done = false;
    void allIdle(a, b).then(() => (done = true));
    loadA.finish();
    await settle();
    expect(done).toBe(false);
    loadB.finish();
    await settle();
    expect(done).toBe(true);
  });
});

describe('afterReady', () => {
  it('starts a secondary load only once the page is ready, counting it on the panel from the start', async () => {
    const page = new Readiness();
    const panel = el('section');
    const panelCounter = new LoadCounter(panel);
    const main = pending();
    void page.track(() => main.promise);
    expect(document.body.dataset.ready).toBe('0');

    let started = false;
    const secondary = pending();
    const done = afterReady(panelCounter, [page], () => true, () => {
      started = true;
      return secondary.promise;
    });
    expect(panel.dataset.ready).toBe('0');
    await settle();
    expect(started).toBe(false); // the main views first

    main.finish();
    await settle();
    expect(started).toBe(true);
    expect(document.body.dataset.ready).toBe('1'); // the page is ready while the panel still loads
    expect(panel.dataset.ready).toBe('0');
    secondary.finish();
    await done;
    expect(panel.dataset.ready).toBe('1');
  });

  it('says what a long load waits for while it runs, then the note', async () => {
    const page = new Readiness();
    let finish = () => {};
    const done = page.track(() => new Promise<void>((resolve) => (finish = resolve)));
    expect(page.status.textContent).toBe('Loading…');
    page.loadingAs('Finding the run with the largest peak… (or pick a run)');
    expect(page.status.textContent).toBe('Finding the run with the largest peak… (or pick a run)');
    page.loadingAs(null);
    expect(page.status.textContent).toBe('Loading…');
    page.note('ready', 'idle');
    finish();
    await done;
    expect(page.status.textContent).toBe('ready');
  });

  it('skips a load replaced while it waited', async () => {
    const page = new Readiness();
    const panelCounter = new LoadCounter();
    const main = pending();
    void page.track(() => main.promise);
    let wanted = true;
    let started = false;
    const done = afterReady(panelCounter, [page], () => wanted, async () => {
      started = true;
    });
    wanted = false;
    main.finish();
    await done;
    expect(started).toBe(false);
    expect(panelCounter.loading).toBe(false);
  });
});
