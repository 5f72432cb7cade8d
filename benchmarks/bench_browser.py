"""The Memory tab next to TensorBoard's Graphs dashboard, in a real browser, same step, both shapes in one run.

    python benchmarks/make_big_trace.py                 # once: /tmp/tb_memory_big (loop shape)
    python benchmarks/make_big_trace.py --shape deep    # once, ~4 minutes: /tmp/tb_memory_deep
    python benchmarks/bench_browser.py [--dirs /tmp/tb_memory_big /tmp/tb_memory_deep] [--clicks 5] [--ours-only]

One TensorBoard per step, started together; each one's first load of the
Memory tab is its cold figure, then the warm loads alternate between the
steps, then TensorBoard's Graphs dashboard is timed on each. A directory that
does not hold a step is skipped, with how to generate it.

Measured on 2026-11-23 at commit 3dbcd59 (2-core shared VM, load average ~2.2-2.6), one run:

    loop: /tmp/tb_memory_big, deep: /tmp/tb_memory_deep
    Chromium /usr/bin/chromium, 1280x800; warm: best of 2
                                                                  loop                  deep
    step                                                      ./step_1              ./step_1
    Memory tab (ours)
      tab opened -> interactive, cold                          1088 ms               1898 ms   server caches empty; target <= 1.5 s
        by the page's clock                                    1073 ms               1888 ms   hash change to seen ready, no Playwright return trip
        graph drawn (after the main views)                     1181 ms               3187 ms   its own data-ready
        what-if shown (after the graph)                        1339 ms               3782 ms   its own data-ready
      tab opened -> interactive, warm (best)                    522 ms                434 ms
      page load -> interactive, warm (best)                    2680 ms               2464 ms   TensorBoard's app load included
      click -> details shown, in page (median)                  8.9 ms               13.2 ms   target <= 100 ms
        clicks                                             9, 7, 14 ms          9, 13, 15 ms
      click -> details, through Playwright                    151.7 ms              135.9 ms   its round trips included
    TensorBoard Graphs dashboard
      graph rendered                                           6554 ms              17349 ms
        tag chosen -> run_metadata answered                    2678 ms               2121 ms
      tag chosen -> stats attached, Memory on                  9086 ms              13564 ms
      Memory clicked -> nodes coloured                          179 ms                167 ms
      run_metadata response size                               8.9 MiB               5.4 MiB
      total (graph + tag + memory)                            15820 ms              31080 ms
    TensorBoard total / our cold interactive                     14.5x                 16.4x
    loop: interactive within 1.5 s (cold 1.09 s): met; click within 100 ms (median 9 ms): met
    deep: interactive within 1.5 s (cold 1.90 s): MISSED; click within 100 ms (median 13 ms): met

The same script on commit 4afe655 (before the graph and the what-if left the page's readiness),
run just before: cold 1129 ms (loop), 4825 ms (deep); warm 519 ms, 719 ms.
The cold load's request waterfall (printed after the table) shows where the rest goes.

The clicks were on tiles one level below the top (where the top level at peak
is a single tile, the script drills in with a double click first, untimed).
Choosing the tag switches TensorBoard to the "Profile" graph and re-renders it;
its colouring was checked on the screenshots /tmp/bench_browser_graphs_memory_<shape>.png.

Starts `tensorboard --logdir <dir> --samples_per_plugin graph_tagged_run_metadata=0`
(PYTHONPATH=<repo>, so the working tree's plugin and bundle are served; the
plugin must still be pip-installed for its entry point) and drives Debian's
headless Chromium through Playwright at 1280x800, a fresh browser context
(empty HTTP cache) for every page load. All times are time.perf_counter()
around Playwright calls and waits, so they include Playwright's round trips
(a few ms).

ours, time to interactive: page.goto(/#memory) (or the tab switch) until the
    plugin's iframe has document.body.dataset.ready == "1" and a
    [data-testid=treemap-tile] is visible (a non-empty box, not hidden), both
    checked in one predicate polled every animation frame. "cold" is the first
    load after TensorBoard started (empty caches on the server), "warm" the
    best of the next loads. "by the page's clock": from the hash change to the
    frame the predicate first held, both read with Date.now() in the page.
    The main views (summary, curve, treemap, details) make it ready; the
    graph and the what-if load after them, each with its own data-ready on
    its panel: the cold load also times when each of them was drawn.
ours, request waterfall: every request of the cold (and first warm) load to
    /data/plugin/memory/ with its start and end (ms from the tab opening,
    Playwright's request timing) and the server's own time (the routes'
    Server-Timing header), recorded until 3 s after ready.
ours, click: click a treemap tile, until [data-testid=details-scope] reads
    that tile's data-scope; median over --clicks different tiles.
TensorBoard Graphs:
    graph:    page.goto(/#graphs&run=<run>) until tf-graph-scene's svg shows
              rendered nodes (g.node);
    tag:      choose the traced step in the "Tag" dropdown until the
              run_metadata request has answered and the "Memory" colour option
              is enabled (stats parsed and attached to the graph);
    memory:   click "Memory" until the node shapes' fills changed (the
              colouring is applied);
    total:    graph + tag + memory, the machine's share of getting the graph
              coloured by memory (a person's time between the clicks excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
import urllib.parse

from playwright.sync_api import sync_playwright

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))  # tbserver: the tensorboard process, shared with the tests

from tbserver import TensorBoard, free_port  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from benchlib import DEFAULT_DIRS, present, print_table, shape_of  # noqa: E402

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 300_000
TARGET_TTI_S = 1.5
TARGET_CLICK_S = 0.100

# Every element in the page, shadow roots included (TensorBoard's Polymer elements).
DEEP = """
  const deepAll = (selector) => {
    const out = [];
    const visit = (root) => {
      for (const el of root.querySelectorAll(selector)) out.push(el);
      for (const el of root.querySelectorAll('*')) if (el.shadowRoot) visit(el.shadowRoot);
    };
    visit(document);
    return out;
  };
"""

GRAPH_RENDERED_JS = "() => {" + DEEP + """
  for (const scene of deepAll('tf-graph-scene')) {
    const root = scene.shadowRoot || scene;
    if (root.querySelector('svg#svg g.node')) return true;
  }
  return false;
}"""

FILLS = DEEP + """
  const fills = [];
  for (const scene of deepAll('tf-graph-scene')) {
    const root = scene.shadowRoot || scene;
    for (const shape of root.querySelectorAll('svg#svg g.node .nodecolortarget')) fills.push(shape.style.fill || '');
  }
  const fillText = fills.join('|');
"""
NODE_FILLS_JS = "() => {" + FILLS + " return fillText; }"
FILLS_CHANGED_JS = "(before) => {" + FILLS + " return fillText !== before; }"

MEMORY_ENABLED_JS = "() => {" + DEEP + """
  const b = deepAll('paper-radio-button#memory-radio-button')[0];
  return !!b && !b.disabled && !b.hasAttribute('disabled');
}"""


# How long a cold load's requests are still recorded after the page is ready (the waterfall).
WATERFALL_AFTER_MS = 3000


def start_tensorboards(logdirs: list[str], timeout_s: float = 300):
    """One checkout TensorBoard per logdir, keeping every traced step, started together (each
    loads its logdir meanwhile): [(server, run, tag)] once each one's Memory plugin lists a step."""
    servers, ports = [], set()
    try:
        for logdir in logdirs:
            port = free_port()
            while port in ports:
                port = free_port()
            ports.add(port)
            servers.append(TensorBoard.from_checkout(
                logdir, "--samples_per_plugin", "graph_tagged_run_metadata=0",
                log_path=os.path.join("/tmp", f"bench_browser_tensorboard_{port}.log"), port=port))
        started = []
        for tb in servers:
            traced = [r for r in tb.wait_for_runs(timeout_s)[1] if r.get("steps")]
            started.append((tb, traced[0]["run"], traced[0]["steps"][-1]["tag"]))
        return started
    except BaseException:
        for tb in servers:
            tb.stop(grace_s=10)
        raise


def memory_frame(page, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for frame in page.frames:
            # TensorBoard loads an ES-module plugin as /data/plugin_entry.html?name=memory.
            if "/data/plugin/memory" in frame.url or "plugin_entry.html?name=memory" in frame.url:
                return frame
        page.wait_for_timeout(5)
    raise RuntimeError("no Memory plugin frame (/data/plugin/memory or plugin_entry.html?name=memory)")


# In the page: click a tile, then poll every animation frame until the details panel names
# its scope; the time from the click to the first frame that shows it (no Playwright round trips).
CLICK_IN_PAGE_JS = """(scope) => new Promise((resolve) => {
  const tile = [...document.querySelectorAll('[data-testid="treemap-tile"]')].find(e => e.dataset.scope === scope);
  const t0 = performance.now();
  tile.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}));
  const check = () => {
    const d = document.querySelector('[data-testid="details-scope"]');
    if (d && d.textContent === scope) resolve(performance.now() - t0); else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})"""


# The graph and the what-if load after the main views, each with its own data-ready on its panel.
SECONDARY_PANELS = ("graph-panel", "whatif")
HAS_PANEL_READY_JS = "(testid) => !!document.querySelector(`[data-testid=\"${testid}\"][data-ready]`)"
PANEL_READY_JS = """(testid) => {
  const panel = document.querySelector(`[data-testid="${testid}"]`);
  return !!panel && panel.dataset.ready === '1';
}"""


# Interactive: the page says ready and a treemap tile is visible (a box and not hidden), checked in one
# predicate (one round trip); it answers the page's clock (Date.now()) when it first held.
READY_JS = """() => {
  if (!document.body || document.body.dataset.ready !== '1') return false;
  const tile = document.querySelector('[data-testid="treemap-tile"]');
  if (!tile) return false;
  const box = tile.getBoundingClientRect();
  return box.width > 0 && box.height > 0 && getComputedStyle(tile).visibility !== 'hidden' ? Date.now() : false;
}"""


def wait_ready(frame) -> float:
    """Waits until interactive; the page's clock (ms) when it was seen."""
    return frame.wait_for_function(READY_JS, polling="raf").json_value()


def request_rows(requests, opened_at_ms: float | None, tti_s: float) -> list[dict]:
    """The plugin's requests of one load as rows: route and query, start and end (ms from the tab
    opening, else from the first request), the server's own time (its Server-Timing header) and
    whether the request ended before the page said it was ready."""
    rows = []
    for request in requests:
        if "/data/plugin/memory/" not in request.url:
            continue
        timing = request.timing
        start = timing["startTime"]
        end = start + max(timing["responseEnd"], 0)
        server_ms = None
        response = request.response()
        if response is not None:
            match = re.search(r"app;dur=([0-9.]+)", response.headers.get("server-timing", ""))
            server_ms = float(match.group(1)) if match else None
        rows.append({"url": request.url.split("/data/plugin/memory/", 1)[1], "start": start, "end": end,
                     "server_ms": server_ms, "status": response.status if response else "failed"})
    origin = opened_at_ms if opened_at_ms is not None else min((r["start"] for r in rows), default=0)
    for row in rows:
        row["start"] -= origin
        row["end"] -= origin
        row["before_ready"] = row["end"] <= tti_s * 1e3
    return sorted(rows, key=lambda r: r["start"])


def print_waterfall(shape: str, rows: list[dict], tti_s: float) -> None:
    print(f"\n{shape} load: the plugin's requests, ms from the tab opening (ready at {tti_s * 1e3:.0f} ms)")
    print(f"  {'start':>6} {'end':>6} {'server':>7}  status  route")
    for row in rows:
        server = f"{row['server_ms']:.0f}" if row["server_ms"] is not None else "-"
        mark = "" if row["before_ready"] else "  (after ready)"
        url = urllib.parse.unquote(row["url"])
        print(f"  {row['start']:6.0f} {row['end']:6.0f} {server:>7}  {row['status']!s:>6}  {url[:90]}{mark}")


def measure_ours(browser, url: str, clicks: int, opened: str = "page", waterfall: list | None = None,
                 page_clock: list | None = None):
    """Time to interactive (s), and click latencies: [(in page s, through Playwright s, scope)].

    opened="page": from page.goto(/#memory), TensorBoard's own app load included.
    opened="tab": TensorBoard already loaded (on an empty dashboard), from switching to
    the Memory tab (location.hash = '#memory') to interactive.
    """
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    finished = []
    page.on("requestfinished", lambda request: finished.append(request))
    page.on("requestfailed", lambda request: finished.append(request))
    if opened == "tab":
        page.goto(url + "/#tb-memory-bench-idle")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        finished.clear()
        start = time.perf_counter()
        opened_at = page.evaluate("() => { const t = Date.now(); location.hash = '#memory'; return t; }")
    else:
        start = time.perf_counter()
        page.goto(url + "/#memory")
        opened_at = None
    frame = memory_frame(page)
    ready_at = wait_ready(frame)
    tti = time.perf_counter() - start
    if page_clock is not None and opened_at is not None:
        page_clock.append((ready_at - opened_at) / 1e3)
    panels = {}
    if waterfall is not None:  # the cold load: when the secondary panels (their own data-ready) were drawn too
        for testid in SECONDARY_PANELS:
            if not frame.evaluate(HAS_PANEL_READY_JS, testid):
                continue  # a build whose panels count in the page's readiness (before they had their own)
            frame.wait_for_function(PANEL_READY_JS, arg=testid, polling="raf")
            panels[testid] = time.perf_counter() - start
        page.wait_for_timeout(WATERFALL_AFTER_MS)  # what the page asks for after it is ready (what-if, prefetches)
        waterfall.extend(request_rows(finished, opened_at, tti))

    latencies = []
    tiles = frame.locator('[data-testid="treemap-tile"]')
    details = frame.locator('[data-testid="details-scope"]')
    clicked = set()
    drills = 0
    while len(latencies) < clicks:
        current = details.first.text_content() if details.count() else None
        scopes = [s for s in dict.fromkeys(tiles.evaluate_all("els => els.map(e => e.dataset.scope)"))
                  if s and s != current and s not in clicked]
        if not scopes:
            # Too few tiles on this level (at peak, the top level of the big step is one "model" tile):
            # drill into the first tile that has children, as a user would, and click on the next level.
            deeper = tiles.evaluate_all(
                "els => els.filter(e => (e.title || '').includes('double click')).map(e => e.dataset.scope)")
            if not deeper or drills >= 5:
                break
            drills += 1
            frame.locator(f'[data-testid="treemap-tile"][data-scope={json.dumps(deeper[0])}]').first.dblclick()
            frame.wait_for_function(
                "p => [...document.querySelectorAll('[data-testid=\"treemap-tile\"]')]"
                ".some(e => (e.dataset.scope || '').startsWith(p))", arg=deeper[0] + "/", polling="raf")
            frame.wait_for_function("() => document.body.dataset.ready === '1'", polling="raf")
            page.wait_for_timeout(500)
            continue
        scope = scopes[0]
        clicked.add(scope)
        if len(clicked) % 2:  # alternate: in-page timing, then through Playwright
            tile = frame.locator(f'[data-testid="treemap-tile"][data-scope={json.dumps(scope)}]').first
            tile.scroll_into_view_if_needed()
            page.wait_for_timeout(400)  # no double click, settled page
            in_page = frame.evaluate(CLICK_IN_PAGE_JS, scope) / 1e3
            latencies.append((in_page, None, scope))
        else:
            tile = frame.locator(f'[data-testid="treemap-tile"][data-scope={json.dumps(scope)}]').first
            tile.scroll_into_view_if_needed()
            page.wait_for_timeout(400)
            t0 = time.perf_counter()
            tile.click()
            frame.wait_for_function(
                "s => { const d = document.querySelector('[data-testid=\"details-scope\"]');"
                " return !!d && d.textContent === s; }", arg=scope, polling="raf")
            latencies.append((None, time.perf_counter() - t0, scope))
        page.wait_for_timeout(300)
    context.close()
    return tti, latencies, panels


def measure_graphs(browser, url: str, run: str, tag: str, shape: str):
    """TensorBoard's Graphs dashboard: (graph, tag, memory) seconds, or a reason per phase."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    result = {}
    try:
        start = time.perf_counter()
        page.goto(url + "/#graphs&run=" + urllib.parse.quote(run, safe=""))
        page.wait_for_function(GRAPH_RENDERED_JS, polling="raf", timeout=TIMEOUT_MS)
        result["graph"] = time.perf_counter() - start
        page.wait_for_timeout(1000)  # let the fit-to-screen animation end

        # The "Tag" dropdown of tf-graph-controls is the paper-dropdown-menu whose items list the tags.
        dropdowns = page.locator("tf-graph-controls paper-dropdown-menu")
        tag_menu = None
        for i in range(dropdowns.count()):
            items = dropdowns.nth(i).locator("paper-item")
            texts = [t.strip() for t in items.all_text_contents()]
            if tag in texts:
                tag_menu = dropdowns.nth(i)
                break
        if tag_menu is None:
            raise RuntimeError(f"no Tag dropdown listing {tag!r}")
        tag_menu.click()
        item = tag_menu.locator("paper-item", has_text=tag).first
        item.wait_for(state="visible")
        t0 = time.perf_counter()
        with page.expect_response(lambda r: "/data/plugin/graphs/run_metadata" in r.url,
                                  timeout=TIMEOUT_MS) as response_info:
            item.click()
        response = response_info.value
        response.finished()
        result["run_metadata_response"] = time.perf_counter() - t0
        result["run_metadata_bytes"] = response.request.sizes()["responseBodySize"]
        page.wait_for_function(MEMORY_ENABLED_JS, polling="raf", timeout=TIMEOUT_MS)
        page.wait_for_function(GRAPH_RENDERED_JS, polling="raf", timeout=TIMEOUT_MS)
        result["tag"] = time.perf_counter() - t0
        page.wait_for_timeout(1000)

        before = page.evaluate(NODE_FILLS_JS)
        memory = page.locator("paper-radio-button#memory-radio-button")
        t0 = time.perf_counter()
        memory.click()
        page.wait_for_function(FILLS_CHANGED_JS, arg=before, polling="raf", timeout=TIMEOUT_MS)
        result["memory"] = time.perf_counter() - t0
        page.wait_for_timeout(500)
        page.screenshot(path=f"/tmp/bench_browser_graphs_memory_{shape}.png")
    except Exception as exc:  # report what was measured and why the rest was not
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        try:
            page.screenshot(path=f"/tmp/bench_browser_graphs_error_{shape}.png")
        except Exception:
            pass
    context.close()
    return result


class Shape:
    """One benchmark step's TensorBoard and what was measured on it."""

    def __init__(self, logdir: str, server) -> None:
        self.logdir, self.shape = logdir, shape_of(logdir)
        self.tb, self.run, self.tag = server
        self.tab_warm, self.page_warm = [], []
        self.waterfall: list[dict] = []  # the plugin's requests of the cold load (request_rows)
        self.waterfall_warm: list[dict] = []  # and of the first warm load
        self.page_clock: list[float] = []  # the cold load's time to interactive by the page's own clock

    def clicks_ms(self, which: int) -> list[float]:
        return [c[which] * 1e3 for c in self.clicks if c[which] is not None]

    def click_median_s(self) -> float:
        in_page = self.clicks_ms(0)
        return statistics.median(in_page) / 1e3 if in_page else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dirs", nargs="+", default=DEFAULT_DIRS, help="make_big_trace.py outputs")
    parser.add_argument("--clicks", type=int, default=5)
    parser.add_argument("--warm", type=int, default=2, help="extra loads of the Memory tab")
    parser.add_argument("--ours-only", action="store_true", help="skip TensorBoard's Graphs dashboard")
    args = parser.parse_args()
    logdirs = present(args.dirs, "events.out.tfevents.*")

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    servers = start_tensorboards(logdirs)
    shapes = [Shape(logdir, server) for logdir, server in zip(logdirs, servers)]
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
            for s in shapes:  # each server's first load: its caches are empty
                s.tab_cold, s.clicks, s.panels_cold = measure_ours(browser, s.tb.url, args.clicks, opened="tab",
                                                                   waterfall=s.waterfall, page_clock=s.page_clock)
            for round_index in range(max(args.warm, 1)):  # then the shapes alternate
                for s in (shapes if round_index % 2 == 0 else shapes[::-1]):
                    s.tab_warm.append(measure_ours(browser, s.tb.url, 0, opened="tab",
                                                   waterfall=None if round_index else s.waterfall_warm)[0])
                    s.page_warm.append(measure_ours(browser, s.tb.url, 0)[0])
            for s in shapes:
                s.graphs = {} if args.ours_only else measure_graphs(browser, s.tb.url, s.run, s.tag, s.shape)
            browser.close()
    finally:
        for s in shapes:
            s.tb.stop(grace_s=10)

    def row(label, cell, note=""):
        return (label, *[cell(s) for s in shapes], note)

    def graphs_ms(key):
        return lambda s: f"{s.graphs[key] * 1e3:.0f} ms" if key in s.graphs else "not measured"

    def total_s(s):
        return sum(s.graphs[k] for k in ("graph", "tag", "memory")) if all(
            k in s.graphs for k in ("graph", "tag", "memory")) else None

    def panel_ms(testid):
        return lambda s: f"{s.panels_cold[testid] * 1e3:.0f} ms" if testid in s.panels_cold else "-"

    def through_playwright(s):
        return f"{statistics.median(s.clicks_ms(1)):.1f} ms" if s.clicks_ms(1) else "-"

    def response_size(s):
        return f"{s.graphs['run_metadata_bytes'] / 2**20:.1f} MiB" if "run_metadata_bytes" in s.graphs else "-"

    rows = [
        row("step", lambda s: f"{s.run}/{s.tag}"),
        row("Memory tab (ours)", lambda s: ""),
        row("  tab opened -> interactive, cold", lambda s: f"{s.tab_cold * 1e3:.0f} ms",
            f"server caches empty; target <= {TARGET_TTI_S:.1f} s"),
        row("    by the page's clock", lambda s: f"{s.page_clock[0] * 1e3:.0f} ms" if s.page_clock else "-",
            "hash change to seen ready, no Playwright return trip"),
        row("    graph drawn (after the main views)", panel_ms("graph-panel"), "its own data-ready"),
        row("    what-if shown (after the graph)", panel_ms("whatif"), "its own data-ready"),
        row("  tab opened -> interactive, warm (best)", lambda s: f"{min(s.tab_warm) * 1e3:.0f} ms"),
        row("  page load -> interactive, warm (best)", lambda s: f"{min(s.page_warm) * 1e3:.0f} ms",
            "TensorBoard's app load included"),
        row("  click -> details shown, in page (median)", lambda s: f"{s.click_median_s() * 1e3:.1f} ms",
            f"target <= {TARGET_CLICK_S * 1e3:.0f} ms"),
        row("    clicks", lambda s: ", ".join(f"{c:.0f}" for c in s.clicks_ms(0)) + " ms"),
        row("  click -> details, through Playwright", through_playwright, "its round trips included"),
        row("TensorBoard Graphs dashboard", lambda s: ""),
        row("  graph rendered", graphs_ms("graph")),
        row("    tag chosen -> run_metadata answered", graphs_ms("run_metadata_response")),
        row("  tag chosen -> stats attached, Memory on", graphs_ms("tag")),
        row("  Memory clicked -> nodes coloured", graphs_ms("memory")),
        row("  run_metadata response size", response_size),
        row("  total (graph + tag + memory)", lambda s: f"{total_s(s) * 1e3:.0f} ms" if total_s(s) else "-"),
        row("TensorBoard total / our cold interactive",
            lambda s: f"{total_s(s) / s.tab_cold:.1f}x" if total_s(s) else "-"),
    ]
    print(", ".join(f"{s.shape}: {s.logdir}" for s in shapes))
    print(f"Chromium {executable}, {VIEWPORT['width']}x{VIEWPORT['height']}; warm: best of {max(args.warm, 1)}")
    print_table([s.shape for s in shapes], rows)
    for s in shapes:
        print_waterfall(f"{s.shape}: cold", s.waterfall, s.tab_cold)
        print_waterfall(f"{s.shape}: warm", s.waterfall_warm, s.tab_warm[0])
    print()
    for s in shapes:
        if "error" in s.graphs:
            print(f"{s.shape}: TensorBoard's Graphs dashboard stopped: {s.graphs['error']}")
        tti, click = s.tab_cold, s.click_median_s()
        print(f"{s.shape}: interactive within {TARGET_TTI_S:.1f} s (cold {tti:.2f} s): "
              f"{'met' if tti <= TARGET_TTI_S else 'MISSED'}; click within {TARGET_CLICK_S * 1e3:.0f} ms "
              f"(median {click * 1e3:.0f} ms): {'met' if click <= TARGET_CLICK_S else 'MISSED'}")


if __name__ == "__main__":
    main()
