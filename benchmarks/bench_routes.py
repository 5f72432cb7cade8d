"""Our summary route next to TensorBoard's own graphs/run_metadata route, same step, both shapes in one run.

    python benchmarks/make_big_trace.py                 # once: /tmp/tb_memory_big (loop shape)
    python benchmarks/make_big_trace.py --shape deep    # once, ~4 minutes: /tmp/tb_memory_deep
    python benchmarks/bench_routes.py [--dirs /tmp/tb_memory_big /tmp/tb_memory_deep] [--rounds 5]

Both plugins run inside TensorBoard's WSGI app over the same data provider
(one per logdir, loaded once, as a running TensorBoard holds it). Each round
asks every step's two routes cold, on fresh plugins (empty caches, the
engine's per-name caches emptied too), the steps and the pair's order
alternating; then each route warm. Prints best against best, the median of
the rounds' own ratios, and the bytes each route sends. Targets: cold at
least 3x faster, warm under 20 ms, at least 20x smaller. A directory that
does not hold a step is skipped, with how to generate it.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tensorboard.backend import application  # noqa: E402
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer  # noqa: E402
from tensorboard.plugins import base_plugin  # noqa: E402
from tensorboard.plugins.graph import graphs_plugin  # noqa: E402
from werkzeug import test as werkzeug_test  # noqa: E402

from benchlib import DEFAULT_DIRS, per_name_caches, present, print_table, shape_of  # noqa: E402
from tb_memory_plugin import plugin as memory_plugin  # noqa: E402

TARGET_SPEEDUP = 3.0
TARGET_WARM_S = 0.020
TARGET_SMALLER = 20.0


def timed_get(client, url):
    start = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, (url, response.status_code, response.get_data()[:200])
    return elapsed, len(response.get_data())


class Logdir:
    """One benchmark step's logdir behind TensorBoard's data provider, and the rounds measured on it."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        self.shape = shape_of(logdir)
        multiplexer = plugin_event_multiplexer.EventMultiplexer(
            tensor_size_guidance={"graph_tagged_run_metadata": 0})
        multiplexer.AddRunsFromDirectory(logdir)
        multiplexer.Reload()
        self.provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
        runs = self.client().get("/data/plugin/memory/runs").get_json()["runs"]
        run, tag = runs[0]["run"], runs[0]["steps"][0]["tag"]
        self.step = f"{run}/{tag}"
        self.ours = f"/data/plugin/memory/summary?run={run}&tag={tag}"
        self.theirs = f"/data/plugin/graphs/run_metadata?run={run}&tag={tag}"
        self.ours_cold, self.theirs_cold, self.ratios = [], [], []
        self.warm_client = None

    def client(self):
        """A fresh app: both plugins new, their caches empty."""
        context = base_plugin.TBContext(data_provider=self.provider, logdir=self.logdir)
        plugins = [memory_plugin.MemoryPlugin(context), graphs_plugin.GraphsPlugin(context)]
        return werkzeug_test.Client(application.TensorBoardWSGI(plugins, data_provider=self.provider))

    def cold_round(self, ours_first: bool) -> None:
        fresh = self.client()
        for cache in per_name_caches():
            cache.cache_clear()
        if ours_first:
            ours, self.ours_bytes = timed_get(fresh, self.ours)
            theirs, self.theirs_bytes = timed_get(fresh, self.theirs)
        else:
            theirs, self.theirs_bytes = timed_get(fresh, self.theirs)
            ours, self.ours_bytes = timed_get(fresh, self.ours)
        self.ours_cold.append(ours)
        self.theirs_cold.append(theirs)
        self.ratios.append(theirs / ours)
        self.warm_client = fresh

    def warm(self, repeat: int) -> tuple[float, float]:
        return (min(timed_get(self.warm_client, self.ours)[0] for _ in range(repeat)),
                min(timed_get(self.warm_client, self.theirs)[0] for _ in range(repeat)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dirs", nargs="+", default=DEFAULT_DIRS, help="make_big_trace.py outputs")
    parser.add_argument("--rounds", type=int, default=5, help="alternating cold rounds")
    parser.add_argument("--warm", type=int, default=5)
    args = parser.parse_args()
    logdirs = [Logdir(d) for d in present(args.dirs, "events.out.tfevents.*")]

    for round_index in range(args.rounds):
        for logdir in (logdirs if round_index % 2 == 0 else logdirs[::-1]):
            logdir.cold_round(ours_first=round_index % 2 == 0)
    warm = [logdir.warm(args.warm) for logdir in logdirs]

    def row(label, cell, note=""):
        return (label, *[cell(i, logdir) for i, logdir in enumerate(logdirs)], note)

    rows = [
        row("step", lambda i, d: d.step),
        row("memory/summary (ours), cold, best", lambda i, d: f"{min(d.ours_cold) * 1e3:.0f} ms"),
        row("graphs/run_metadata (TensorBoard), cold, best", lambda i, d: f"{min(d.theirs_cold) * 1e3:.0f} ms"),
        row("  speed-up, best against best", lambda i, d: f"{min(d.theirs_cold) / min(d.ours_cold):.1f}x",
            f"target >= {TARGET_SPEEDUP:.0f}x"),
        row("  speed-up, median of the rounds' own", lambda i, d: f"{statistics.median(d.ratios):.1f}x",
            f"target >= {TARGET_SPEEDUP:.0f}x"),
        row("  rounds' speed-ups, range", lambda i, d: f"{min(d.ratios):.1f}-{max(d.ratios):.1f}x"),
        row("memory/summary (ours), warm, best", lambda i, d: f"{warm[i][0] * 1e3:.1f} ms",
            f"target < {TARGET_WARM_S * 1e3:.0f} ms"),
        row("graphs/run_metadata (TensorBoard), warm, best", lambda i, d: f"{warm[i][1] * 1e3:.0f} ms"),
        row("bytes sent: ours / TensorBoard's", lambda i, d: f"{d.ours_bytes:,} / {d.theirs_bytes / 1e6:.0f} MB"),
        row("  smaller by", lambda i, d: f"{d.theirs_bytes / d.ours_bytes:,.0f}x", f"target >= {TARGET_SMALLER:.0f}x"),
    ]
    print(", ".join(f"{d.shape}: {d.logdir}" for d in logdirs))
    print(f"{args.rounds} alternating cold rounds, warm best of {args.warm}")
    print_table([d.shape for d in logdirs], rows, first_width=46)
    for d in logdirs:
        speedup = min(statistics.median(d.ratios), min(d.theirs_cold) / min(d.ours_cold))
        met = "met" if speedup >= TARGET_SPEEDUP else "MISSED"
        print(f"{d.shape}: cold at least {TARGET_SPEEDUP:.0f}x faster: {met}")


if __name__ == "__main__":
    main()
