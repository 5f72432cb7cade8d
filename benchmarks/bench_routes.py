"""Our summary route next to TensorBoard's own graphs/run_metadata route, same step.

    python benchmarks/make_big_trace.py --out /tmp/tb_memory_big   # once
    python benchmarks/bench_routes.py [--logdir /tmp/tb_memory_big]

Both plugins run inside TensorBoard's WSGI app over the same data provider.
Prints cold (fresh plugin, empty cache) and warm times and the bytes each
route sends. Targets: cold at least 3x faster, warm under 20 ms, at least
20x smaller.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tensorboard.backend import application  # noqa: E402
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer  # noqa: E402
from tensorboard.plugins import base_plugin  # noqa: E402
from tensorboard.plugins.graph import graphs_plugin  # noqa: E402
from werkzeug import test as werkzeug_test  # noqa: E402

from tb_memory_plugin import plugin as memory_plugin  # noqa: E402


def make_client(provider, logdir):
    context = base_plugin.TBContext(data_provider=provider, logdir=logdir)
    plugins = [memory_plugin.MemoryPlugin(context), graphs_plugin.GraphsPlugin(context)]
    return werkzeug_test.Client(application.TensorBoardWSGI(plugins, data_provider=provider))


def timed_get(client, url):
    start = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, (url, response.status_code, response.get_data()[:200])
    return elapsed, len(response.get_data())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="/tmp/tb_memory_big")
    parser.add_argument("--warm", type=int, default=5)
    args = parser.parse_args()
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"graph_tagged_run_metadata": 0})
    multiplexer.AddRunsFromDirectory(args.logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, args.logdir)
    client = make_client(provider, args.logdir)
    runs = client.get("/data/plugin/memory/runs").get_json()["runs"]
    run, tag = runs[0]["run"], runs[0]["steps"][0]["tag"]
    ours = f"/data/plugin/memory/summary?run={run}&tag={tag}"
    theirs = f"/data/plugin/graphs/run_metadata?run={run}&tag={tag}"

    fresh = make_client(provider, args.logdir)  # empty caches
    ours_cold, ours_bytes = timed_get(fresh, ours)
    theirs_cold, theirs_bytes = timed_get(fresh, theirs)
    ours_warm = min(timed_get(fresh, ours)[0] for _ in range(args.warm))
    theirs_warm = min(timed_get(fresh, theirs)[0] for _ in range(args.warm))

    print(f"step {run}/{tag}")
    print(f"{'route':34s} {'cold ms':>9s} {'warm ms':>9s} {'bytes':>12s}")
    print(f"{'memory/summary (ours)':34s} {ours_cold * 1e3:9.1f} {ours_warm * 1e3:9.1f} {ours_bytes:12d}")
    print(f"{'graphs/run_metadata (TensorBoard)':34s} {theirs_cold * 1e3:9.1f} {theirs_warm * 1e3:9.1f} {theirs_bytes:12d}")
    print(f"cold speed-up {theirs_cold / ours_cold:.1f}x (target >= 3x); warm {ours_warm * 1e3:.1f} ms "
          f"(target < 20 ms); response {theirs_bytes / ours_bytes:.0f}x smaller (target >= 20x)")


if __name__ == "__main__":
    main()
