// @vitest-environment jsdom
// The controller's order of requests on opening the tab: the main views first,
// the graph once they are ready, the what-if once the graph is, each secondary
// panel with its own data-ready (a fake fetcher answers each route when told).
import { afterEach, describe, expect, it } from 'vitest';
import { Api } from './api';
import type { CurveResponse, DeviceSummary, Figures, GraphResponse, ScopeDetails, ScopesResponse, SummaryResponse } from './api';
import { App } from './app';
import { Readiness } from './readiness';
import { Selection } from './selection';
import { PageView } from './views/page';

const figures = (at_peak_bytes: number): Figures => ({
  at_peak_bytes,
  allocated_bytes: at_peak_bytes,
  op_peak_bytes: at_peak_bytes,
  live_bytes: at_peak_bytes,
  output_bytes: at_peak_bytes,
  temp_bytes: 0,
  persistent_bytes: 0,
});
const cats = { parameters: 0, inputs: 0, activations: 100, gradients: 0, optimizer: 0, temporaries: 0, other: 0 };
const DEVICE = 'CPU:0/mklcpu';

const device: DeviceSummary = {
  id: DEVICE,
  device: '/device:CPU:0',
  device_type: 'CPU',
  allocator: 'mklcpu',
  baseline: 'none',
  start_bytes: null,
  peak_bytes: null,
  peak_rise_bytes: 100,
  peak_time_us: 5,
  peak_node: null,
  largest_at_peak: null,
  end_bytes: null,
  exec_count: 2,
  event_count: 4,
  figures: figures(100),
  snapshots: { count: 0, max_abs_diff_bytes: null },
  categories: [{ name: 'activations', at_peak_bytes: 100 }],
  op_types: [{ name: 'Relu', count: 2, figures: figures(100) }],
  top_scopes: [],
};
const summary: SummaryResponse = {
  run: 'r', tag: 't', step: 1, status: 'ok', message: null, duration_us: 10, default_device: DEVICE, devices: [device],
};
const level: ScopesResponse = {
  scope: '', name: '(all)', path: [{ name: '(all)', scope: '' }], figures: figures(100), categories: cats, peak_rise_bytes: 100,
  children: [{ scope: 'm', name: 'm', kind: 'scope', has_children: true, exec_count: 2, top_op_type: 'Relu', figures: figures(100), categories: cats }],
};
const details: ScopeDetails = {
  scope: '', name: '(all)', kind: 'scope', figures: figures(100), share_of_peak: 1, peak_rise_bytes: 100,
  categories: [{ name: 'activations', at_peak_bytes: 100 }], op_types: [], exec_count: 2, time_span: null, nodes: [],
};
const curve: CurveResponse = {
  window: null, baseline: 'none', start_bytes: null, absolute: false,
  peak: { time_us: 5, bytes: 100, rise_bytes: 100, node: null }, duration_us: 10,
  t_us: [0, 5, 10], min_bytes: [0, 100, 0], max_bytes: [0, 100, 0], node_at: [0, 0, 0], node_names: ['m/a'],
  snapshots: { t_us: [], bytes: [] }, series: [{ scope: 'm', name: 'm', bytes: [0, 100, 0] }],
};
const graph: GraphResponse = {
  scope: '', source: 'run_graph', omitted_nodes: 0, graphs_dashboard_run: 'r', edges: [],
  nodes: [{ id: 'm', name: 'm', kind: 'scope', op_type: null, node_count: 2, at_peak_bytes: 100, allocated_bytes: 100, output_bytes: 100 }],
};

const ANSWERS: Record<string, unknown> = {
  runs: { runs: [{ run: 'r', has_graph: true, latest_tag: 't', steps: [{ tag: 't', step: 1, wall_time: 1, devices: ['/device:CPU:0'] }] }] },
  default_step: { run: 'r', tag: 't', device: DEVICE, reason: 'largest_peak', peak_bytes: 100, absolute: false, compared_steps: 1, run_count: 1 },
  summary,
  scopes: level,
  scope: details,
  curve,
  graph,
  whatif: { error: 'no feed with a shape' },
};

/** A fetcher whose answers wait until `answer(route)` (or come at once for routes in `immediate`). */
class FakeServer {
  readonly asked: string[] = [];
  private readonly waiting = new Map<string, (() => void)[]>();

  /** `refuse(route, url)`: an error answer (status, message) for a request, else the usual one. */
  constructor(
    private readonly immediate: ReadonlySet<string>,
    private readonly refuse: (route: string, url: string) => [number, string] | null = () => null,
  ) {}

  readonly fetch = (url: string): Promise<Response> => {
    const route = url.replace(/^\.\//, '').split('?')[0]!;
    this.asked.push(route);
    const refused = this.refuse(route, url);
    const body = refused ? { error: refused[1] } : ANSWERS[route];
    const status = refused ? refused[0] : route === 'whatif' ? 422 : 200;
    const respond = () => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
    if (this.immediate.has(route)) return Promise.resolve(respond());
    return new Promise((resolve) => {
      const list = this.waiting.get(route) ?? [];
      list.push(() => resolve(respond()));
      this.waiting.set(route, list);
    });
  };

  answer(route: string): void {
    const list = this.waiting.get(route) ?? [];
    this.waiting.delete(route);
    list.forEach((respond) => respond());
  }
}

/** Lets fetches, promise callbacks and zero-delay timers run. */
const settle = async (rounds = 10) => {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
};

function open(server: FakeServer, selection = new Selection()): PageView {
  const readiness = new Readiness();
  const page = new PageView(selection, readiness.status);
  readiness.mirrorOn(page.root);
  document.body.replaceChildren(page.root);
  void new App(selection, page, readiness, new Api(server.fetch)).start(Promise.resolve(null), true);
  return page;
}

const ready = (testid?: string) =>
  (testid ? document.querySelector<HTMLElement>(`[data-testid="${testid}"]`)!.dataset.ready : document.body.dataset.ready);

afterEach(() => document.body.replaceChildren());

describe('App on opening the tab', () => {
  it('says it is listing the runs while it is, then what it does next', async () => {
    const server = new FakeServer(new Set(['summary', 'scopes', 'curve', 'graph', 'findings', 'whatif']));
    open(server);
    await settle();
    const status = () => document.querySelector<HTMLElement>('[data-testid=status]')!.textContent;
    expect(status()).toBe('Listing the runs… (each profile is read to find its steps)');
    server.answer('runs');
    await settle();
    expect(status()).not.toContain('Listing the runs');
    server.answer('default_step');
    await settle();
    expect(status()).not.toContain('Listing the runs');
  });

  it('asks the graph only once the main views are ready, and the what-if once the graph is', async () => {
    const server = new FakeServer(new Set(['runs', 'default_step', 'summary']));
    open(server);
    await settle();
    // runs and default_step went out together; then the summary; then the main views.
    expect(server.asked.slice(0, 3).sort()).toEqual(['default_step', 'runs', 'summary']);
    expect(new Set(server.asked.slice(3))).toEqual(new Set(['scope', 'scopes', 'curve']));
    expect(ready()).toBe('0');
    expect(ready('graph-panel')).toBe('0'); // due, waiting for the main views
    expect(ready('whatif')).toBe('0');

    server.answer('scopes');
    server.answer('scope');
    await settle();
    expect(server.asked).not.toContain('graph');
    server.answer('curve');
    await settle();
    expect(ready()).toBe('1'); // the page is ready: the secondary panels do not hold it back
    expect(server.asked.filter((r) => r === 'graph')).toEqual(['graph']);
    expect(server.asked).not.toContain('whatif');
    expect(ready('graph-panel')).toBe('0');

    server.answer('graph');
    await settle();
    expect(ready('graph-panel')).toBe('1');
    expect(document.querySelectorAll('[data-testid="graph-node"]').length).toBe(1);
    expect(server.asked.filter((r) => r === 'whatif')).toEqual(['whatif']);
    expect(ready('whatif')).toBe('0');
    server.answer('whatif');
    await settle();
    expect(ready('whatif')).toBe('1');
    expect(ready()).toBe('1');
    // The route's own error is shown in the panel.
    expect(document.querySelector('[data-testid="whatif"] [data-testid="error"]')!.textContent).toBe('No what-if for r t: no feed with a shape');
  });
});

describe('App in the grouping by layer', () => {
  it('says a layer that is no name scope of the graph is one, rather than failing', async () => {
    const all = new Set(['runs', 'default_step', 'summary', 'scopes', 'scope', 'curve', 'graph', 'whatif']);
    const server = new FakeServer(all, (route, url) =>
      route === 'graph' && (url.includes('scope=m') || url.includes('scope=%28feeds%29')) ? [404, 'unknown scope in the graph'] : null,
    );
    const selection = new Selection();
    open(server, selection);
    await settle();
    selection.drill('m');
    await settle(30);
    const error = document.querySelector('[data-testid="graph-panel"] [data-testid="error"]')!.textContent!;
    expect(error).toContain('“m” is a layer of the grouping by layer');
    expect(error).toContain('Group “name scope”');
    expect(error).not.toContain('HTTP 404');
    // `(feeds)` is no layer: the route's own error.
    selection.drill('(feeds)');
    await settle(30);
    expect(document.querySelector('[data-testid="graph-panel"] [data-testid="error"]')!.textContent).toContain('No graph for “(feeds)”');
  });
});

describe('App switching the grouping', () => {
  const all = new Set(['runs', 'default_step', 'summary', 'scopes', 'scope', 'curve', 'graph', 'whatif']);
  /** Opens the tab, drills into and selects `m`, then picks these groupings one after the other at once. */
  const switchFromM = async (server: FakeServer, groups = ['scope']): Promise<Selection> => {
    const selection = new Selection();
    open(server, selection);
    await settle();
    selection.drill('m');
    selection.select('m');
    await settle(30);
    const picker = document.querySelector<HTMLSelectElement>('#mem-group')!;
    for (const group of groups) {
      picker.value = group;
      picker.dispatchEvent(new Event('change'));
    }
    await settle(30);
    return selection;
  };

  it('keeps the scope drilled into and the one selected where the other grouping has them', async () => {
    const server = new FakeServer(all);
    const selection = await switchFromM(server);
    expect(selection.get()).toMatchObject({ group: 'scope', focus: 'm', selected: 'm' });
    // Asked of the new grouping's routes before it was set.
    expect(server.asked.filter((route) => route === 'scopes').length).toBeGreaterThan(1);
  });

  it('applies only the last of two quick switches', async () => {
    const selection = await switchFromM(new FakeServer(all), ['scope', 'layer']);
    expect(selection.get()).toMatchObject({ group: 'layer', focus: 'm', selected: 'm' });
  });

  it('goes back to the top where the other grouping has no such scope', async () => {
    const server = new FakeServer(all, (route, url) =>
      url.includes('group=scope') && url.includes('scope=m') && (route === 'scope' || route === 'scopes')
        ? [404, 'unknown scope']
        : null,
    );
    const selection = await switchFromM(server);
    expect(selection.get()).toMatchObject({ group: 'scope', focus: '', selected: null });
  });
});
