"""Our summary route, cold, against xprof's memory_profile conversion, on one large `.xplane.pb`.

    python benchmarks/bench_xplane.py [PROFILE.xplane.pb] [--rounds 3]

Without a path, writes one first (a long Keras 3 fit of a deep U-Net, ~110 MB;
a few minutes) under /tmp/tb_memory_bench_xplane. Each measurement runs in a
fresh process (so "cold" means cold, and peak RSS is that process's own),
alternating ours and xprof's round by round; prints each round, the medians,
their ratio and peak RSS against the file's size. Needs `pip install xprof`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OURS = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tb_memory_plugin import plugin as plugin_mod
from tensorboard.plugins import base_plugin
logdir = {logdir!r}
mux = plugin_event_multiplexer.EventMultiplexer(); mux.AddRunsFromDirectory(logdir); mux.Reload()
provider = data_provider.MultiplexerDataProvider(mux, logdir)
plugin = plugin_mod.MemoryPlugin(base_plugin.TBContext(data_provider=provider, logdir=logdir))
ctx = context.RequestContext()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # TensorBoard (and TensorFlow) loaded
t0 = time.perf_counter()
runs = plugin.runs_impl(ctx, "")["runs"]
run = runs[0]["run"]; tag = runs[0]["steps"][len(runs[0]["steps"]) // 2]["tag"]
body = plugin.summary_impl(ctx, "", run, tag)
json.dumps(body)
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "base": base, "steps": len(runs[0]["steps"]), "peak": body["devices"][0]["peak_bytes"]}}))
"""

XPROF = r"""
import json, resource, time
from xprof.convert import raw_to_tool_data
t0 = time.perf_counter()
data, _ = raw_to_tool_data.xspace_to_tool_data([{path!r}], "memory_profile", {{"use_saved_result": False}})
seconds = time.perf_counter() - t0
peak = json.loads(data)["memoryProfilePerAllocator"]
print(json.dumps({{"seconds": seconds, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "allocators": sorted(peak)}}))
"""


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _make_profile(directory: str) -> str:
    sys.path.insert(0, os.path.join(REPO, "demo_logs"))
    import keras_unet

    paths = keras_unet.profile(directory, size=64, batch=8, steps=300, profile_batch=(3, 290), depth=4, width=16,
                               timeout=1800)
    return paths[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    path = args.profile or _make_profile(os.path.join(tempfile.gettempdir(), "tb_memory_bench_xplane"))
    size = os.path.getsize(path)
    # Our side reads a logdir: one run whose profile is this file.
    logdir = tempfile.mkdtemp(prefix="bench_xplane_")
    target = os.path.join(logdir, "run", "plugins", "profile", "session", "host.xplane.pb")
    os.makedirs(os.path.dirname(target))
    os.symlink(os.path.abspath(path), target) if hasattr(os, "symlink") else shutil.copy(path, target)
    print(f"profile: {path} ({size / 2**20:.1f} MiB)")
    ours, theirs = [], []
    try:
        for round_index in range(args.rounds):
            a = _run(OURS.format(repo=REPO, logdir=logdir))
            b = _run(XPROF.format(path=path))
            ours.append(a)
            theirs.append(b)
            print(f"round {round_index + 1}: ours {a['seconds']:.2f} s ({a['steps']} steps listed, one summarised), "
                  f"rss {a['rss'] / 2**20:.0f} MiB (+{(a['rss'] - a['base']) / 2**20:.0f} over TensorBoard loaded) | xprof memory_profile {b['seconds']:.2f} s, "
                  f"rss {b['rss'] / 2**20:.0f} MiB", flush=True)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    ours_s = statistics.median(r["seconds"] for r in ours)
    theirs_s = statistics.median(r["seconds"] for r in theirs)
    ours_rss = max(r["rss"] - r["base"] for r in ours)
    theirs_rss = max(r["rss"] for r in theirs)
    print(f"median: ours {ours_s:.2f} s, xprof {theirs_s:.2f} s: {theirs_s / ours_s:.1f}x faster (target 3x)")
    print(f"peak RSS over the loaded server: ours +{ours_rss / 2**20:.0f} MiB = {ours_rss / size:.2f}x the file "
          f"(target <= 3x); "
          f"xprof {theirs_rss / 2**20:.0f} MiB = {theirs_rss / size:.2f}x")


if __name__ == "__main__":
    main()
