import { describe, expect, it, vi } from 'vitest';
import { Api, ApiError, routeUrl } from './api';

function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

describe('routeUrl', () => {
  it('builds relative URLs with encoded parameters', () => {
    expect(routeUrl('runs')).toBe('./runs');
    expect(routeUrl('scopes', { run: 'a b/&c', scope: '', tag: 'step_1', skipped: undefined })).toBe(
      './scopes?run=a+b%2F%26c&scope=&tag=step_1',
    );
  });

  it('repeats a parameter given a list (the what-if’s runs=)', async () => {
    expect(routeUrl('whatif', { run: 'a', runs: ['b', 'c d'], limit: null })).toBe('./whatif?run=a&runs=b&runs=c+d');
    const fetcher = vi.fn(async (_url: string) => jsonResponse({}));
    await new Api(fetcher).whatif({ run: 'r', tag: 't', batch: 8, runs: ['r4'], limit: 1024, device: 'CPU:0/mklcpu' });
    expect(fetcher).toHaveBeenCalledWith('./whatif?run=r&tag=t&batch=8&runs=r4&limit=1024&device=CPU%3A0%2Fmklcpu');
    await new Api(fetcher).whatif({ run: 'r', tag: 't', batch: 8, tracedBatch: 128 });
    expect(fetcher).toHaveBeenLastCalledWith('./whatif?run=r&tag=t&batch=8&traced_batch=128');
  });
});

describe('Api', () => {
  const base = { run: 'r', tag: 't', device: 'GPU:0/GPU_0_bfc', group: 'layer' as const };

  it('caches responses per URL and shares a request in flight', async () => {
    const fetcher = vi.fn(async () => jsonResponse({ scope: '', children: [] }));
    const api = new Api(fetcher);
    const [a, b] = await Promise.all([api.scopes({ ...base, scope: '' }), api.scopes({ ...base, scope: '' })]);
    await api.scopes({ ...base, scope: '' });
    expect(a).toBe(b);
    expect(fetcher).toHaveBeenCalledTimes(1);
    await api.scopes({ ...base, scope: 'x' });
    expect(fetcher).toHaveBeenCalledTimes(2);
  });

  it('never caches the run list (new runs appear while TensorBoard runs)', async () => {
    const fetcher = vi.fn(async () => jsonResponse({ runs: [] }));
    const api = new Api(fetcher);
    await api.runs();
    await api.runs();
    expect(fetcher).toHaveBeenCalledTimes(2);
  });

  it('turns an {error} body into an ApiError with its message and status', async () => {
    const api = new Api(async () => jsonResponse({ error: "unknown run 'nope'" }, 404));
    const err = await api.summary({ run: 'nope', tag: 't', group: 'layer' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).message).toBe("unknown run 'nope'");
    expect((err as ApiError).status).toBe(404);
  });

  it('reports a non-JSON error page by its status', async () => {
    const api = new Api(async () => new Response('<html>oops</html>', { status: 500, statusText: 'Internal Server Error' }));
    await expect(api.runs()).rejects.toThrow('HTTP 500 Internal Server Error');
  });

  it('does not cache failures, so a retry can succeed', async () => {
    let calls = 0;
    const api = new Api(async () => (++calls === 1 ? jsonResponse({ error: 'busy' }, 422) : jsonResponse({ ok: 1 })));
    await expect(api.graph({ ...base, scope: '' })).rejects.toThrow('busy');
    await expect(api.graph({ ...base, scope: '' })).resolves.toEqual({ ok: 1 });
    expect(calls).toBe(2);
  });

  it('wraps network failures', async () => {
    const api = new Api(async () => {
      throw new TypeError('Failed to fetch');
    });
    await expect(api.runs()).rejects.toThrow('network error: Failed to fetch');
  });

  it('sends the curve parameters the contract names', async () => {
    const fetcher = vi.fn(async (_url: string) => jsonResponse({}));
    const api = new Api(fetcher);
    await api.curve({ ...base, points: 750, breakdown: 'm/a', top: 10 });
    const url = new URL(fetcher.mock.calls[0]![0], 'http://x/data/plugin/memory/');
    expect(url.pathname).toBe('/data/plugin/memory/curve');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      run: 'r',
      tag: 't',
      device: 'GPU:0/GPU_0_bfc',
      group: 'layer',
      points: '750',
      breakdown: 'm/a',
      top: '10',
    });
    // A scope's own series, to highlight it: its parent's children as they are (split=0); stacked is the default.
    await api.curve({ ...base, points: 750, breakdown: 'm', top: 10, split: false });
    expect(new URL(fetcher.mock.calls[1]![0], 'http://x/').searchParams.get('split')).toBe('0');
  });

  it('sends a zoomed window as start_us and end_us, and caches each window apart', async () => {
    const fetcher = vi.fn(async (_url: string) => jsonResponse({}));
    const api = new Api(fetcher);
    const zoomed = { ...base, points: 750, breakdown: '', top: 10, window: { start_us: 1200, end_us: 5400 } };
    await api.curve(zoomed);
    await api.curve(zoomed);
    await api.curve({ ...zoomed, window: { start_us: 1200, end_us: 5401 } });
    await api.curve({ ...zoomed, window: null });
    expect(fetcher).toHaveBeenCalledTimes(3);
    const params = fetcher.mock.calls.map((c) => Object.fromEntries(new URL(c[0], 'http://x/').searchParams));
    expect([params[0]!.start_us, params[0]!.end_us]).toEqual(['1200', '5400']);
    expect([params[1]!.start_us, params[1]!.end_us]).toEqual(['1200', '5401']);
    expect('start_us' in params[2]! || 'end_us' in params[2]!).toBe(false);
  });
});
