"""Scale: one step of ~1,000,000 node stats, and a logdir of 200 traced runs, through TensorBoard's WSGI app.

    python benchmarks/make_big_trace.py --shape deep      # once, ~4 minutes: /tmp/tb_memory_deep
    python benchmarks/bench_scale.py [--deep /tmp/tb_memory_deep] [--replicas 13] [--runs 200] [--rounds 3]

The big step is built from the real deep step, not traced: tracing a real
1,000,000-op TensorFlow graph takes far too long here (the 76k-node deep step
took ~3.5 minutes to build and trace, and that grows superlinearly). So the
deep step's RunMetadata (make_big_trace.py --shape deep) is replicated
--replicas times (13: 987,935 node stats, 329 MB of RunMetadata) under
distinct top-level scopes, as if 13 copies of the model ran one after another
in one step:

  * every node name gets the copy's scope: `model/stage_00/...` ->
    `copy_00/model/stage_00/...` (not `replica_00`: a distribution strategy's
    replicas are one model's, folded together by layer); feeds and return values keep their form
    with the scope inside (`_arg_inputs_0_0` -> `_arg_copy_00/inputs_0_0`,
    as TensorFlow names the feed of a placeholder `copy_00/inputs`), other
    `_`-prefixed plumbing gets a suffix (`_SOURCE` -> `_SOURCE_copy_00`);
    the names in each timeline_label (`name = Op(inputs)`) likewise;
  * each copy's times (all_start/scheduled micros and nanos, allocation
    records' alloc_micros) are shifted by its index times the step's span
    plus 1 ms, so the copies run one after another;
  * all copies' node stats go into one DeviceStepStats per device, one
    RunMetadata (concatenated on the wire: a repeated field's encodings add up).

It is written with TensorBoard's `EventFileWriter` as one `FileWriter`-compatible
event file (713 MB): `Event(graph_def=...)` (what add_graph writes), the
GraphDef replicated likewise (1.6 million nodes, 384 MB: node names, inputs and
`loc:@` colocations renamed), and `Event(tagged_run_metadata=
TaggedRunMetadata(tag="step_1", ...), step=1)` (what add_run_metadata writes).
A second logdir (<scale-dir>_nograph) holds the same step without the
GraphDef, to tell the graph's cost from the step's. No TensorFlow is needed;
record checksums use google-crc32c when it is installed (TensorBoard's own
pure-Python crc32c would take many minutes on 713 MB).

Measured, each in a fresh process (so "cold" is cold and peak RSS is that
process's own: VmHWM of /proc/self/status, as getrusage's ru_maxrss would
carry over the parent's peak), the three kinds of process alternating round
by round:

  big step:  TensorBoard's multiplexer loads the logdir (its own reading, not
             ours), then through `TensorBoardWSGI` + `MultiplexerDataProvider`
             (as bench_routes.py): the `runs` route, then the `summary` route
             cold. Targets: summary under 10 s, peak RSS under 4 GB. The same
             on the step without its GraphDef.
  200 runs:  copies of a real small trace (demo_logs/unet_b2's event file) in
             run_000 ... run_199; the `runs` route cold (first call) and warm
             (second call). Target: warm under 1 s.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tb_memory_plugin._protos import encode_varint  # noqa: E402

TARGET_SUMMARY_S = 10.0
TARGET_RSS_BYTES = 4 * 10**9
TARGET_RUNS_WARM_S = 1.0
SMALL_TRACE = os.path.join(REPO, "demo_logs", "unet_b2")
GAP_MICROS = 1000  # between one copy's last event and the next copy's first


# --- the ~1,000,000-node step --------------------------------------------------

def renamer(prefix: str):
    """A function renaming one node name into the copy `prefix` (see the module docstring)."""
    def rename(name: str) -> str:
        for form in ("_arg_", "_retval_"):
            if name.startswith(form):
                return f"{form}{prefix}/{name[len(form):]}"
        if name.startswith("_"):
            return f"{name}_{prefix}"
        return f"{prefix}/{name}"
    return rename


def rename_input(rename, text: str) -> str:
    """`^name`, `name:1` and `name` as inputs are spelled in GraphDefs and timeline labels."""
    control = text.startswith("^")
    name = text[1:] if control else text
    name, colon, port = name.partition(":")
    return ("^" if control else "") + rename(name) + colon + port


_LABEL_RE = re.compile(r"^(?P<name>\S+) = (?P<op>[^(]*)\((?P<inputs>.*)\)$", re.S)


def relabel(rename, label: str) -> str:
    """`name = Op(a, ^b)` with every name renamed; other labels are kept as they are."""
    match = _LABEL_RE.match(label)
    if not match:
        return label
    inputs = match.group("inputs")
    renamed = ", ".join(rename_input(rename, i) for i in inputs.split(", ")) if inputs else ""
    return f"{rename(match.group('name'))} = {match.group('op')}({renamed})"


def step_span(run_metadata) -> tuple[int, int]:
    """First and last microsecond of a step (node starts and ends, allocation records)."""
    first, last = None, None
    for device in run_metadata.step_stats.dev_stats:
        for node in device.node_stats:
            times = [node.all_start_micros, node.all_start_micros + node.all_end_rel_micros]
            times += [r.alloc_micros for m in node.memory for r in m.allocation_records]
            first = min(times) if first is None else min(first, *times)
            last = max(times) if last is None else max(last, *times)
    return first, last


def shift_copy(device, rename, shift_micros: int) -> None:
    """Rename and shift one copy of a device's node stats, in place."""
    for node in device.node_stats:
        node.node_name = rename(node.node_name)
        if node.timeline_label:
            node.timeline_label = relabel(rename, node.timeline_label)
        for field, scale in (("all_start_micros", 1), ("scheduled_micros", 1),
                             ("all_start_nanos", 1000), ("scheduled_nanos", 1000)):
            value = getattr(node, field)
            if value:
                setattr(node, field, value + shift_micros * scale)
        for memory in node.memory:
            for record in memory.allocation_records:
                record.alloc_micros += shift_micros


def rename_graph(graph, rename) -> None:
    """Rename one copy of a GraphDef's nodes, inputs and `loc:@` colocations, in place."""
    for node in graph.node:
        node.name = rename(node.name)
        inputs = [rename_input(rename, i) for i in node.input]
        del node.input[:]
        node.input.extend(inputs)
        if "_class" in node.attr:
            values = node.attr["_class"].list.s
            renamed = [b"loc:@" + rename(v[5:].decode()).encode() if v.startswith(b"loc:@") else v for v in values]
            del values[:]
            values.extend(renamed)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload


# Each copy's top-level scope (`copy_00/...`): distinct models, as many names as the copies hold. (Named
# `replica_00` until 2026-11-28, when the layer grouping began to fold a distribution strategy's
# `replica_<N>/` into one model's layers.)
COPY_SCOPE = "copy"


def replicate(run_metadata_bytes: bytes, graph_bytes: bytes, replicas: int) -> tuple[bytes, bytes, int]:
    """(RunMetadata, GraphDef, node stats) of `replicas` copies run one after another."""
    from tensorboard.compat.proto import config_pb2, graph_pb2

    base = config_pb2.RunMetadata.FromString(run_metadata_bytes)
    first, last = step_span(base)
    period = last - first + GAP_MICROS
    devices = [d.device for d in base.step_stats.dev_stats]
    chunks: dict[int, list[bytes]] = {i: [] for i in range(len(devices))}
    graph_chunks = []
    node_stats = 0
    for index in range(replicas):
        rename = renamer(f"{COPY_SCOPE}_{index:02d}")
        copy = config_pb2.RunMetadata.FromString(run_metadata_bytes)
        for i, device in enumerate(copy.step_stats.dev_stats):
            shift_copy(device, rename, index * period)
            node_stats += len(device.node_stats)
            if index:
                device.ClearField("device")  # said once per device: the copies' encodings are concatenated
                device.ClearField("thread_names")
            chunks[i].append(device.SerializeToString())
        graph = graph_pb2.GraphDef.FromString(graph_bytes)
        rename_graph(graph, rename)
        if index:
            graph.ClearField("versions")
            graph.ClearField("library")  # functions once, not once per copy
        graph_chunks.append(graph.SerializeToString())
        print(f"  copy {index + 1}/{replicas}", end="\r", flush=True)
    step_stats = b"".join(_length_delimited(1, b"".join(chunks[i])) for i in range(len(devices)))
    # RunMetadata.step_stats is field 1; the deep step has no other field (cost graph, partition graphs).
    rest = config_pb2.RunMetadata()
    rest.CopyFrom(base)
    rest.ClearField("step_stats")
    return _length_delimited(1, step_stats) + rest.SerializeToString(), b"".join(graph_chunks), node_stats


def fast_record_checksums() -> str:
    """Point TensorBoard's record writer at google-crc32c's C code, when installed (same checksum)."""
    from tensorboard.summary.writer import record_writer

    try:
        import google_crc32c
    except ImportError:
        return "TensorBoard's pure-Python crc32c (slow: pip install google-crc32c)"

    def masked_crc32c(data: bytes) -> int:
        crc = google_crc32c.value(bytes(data))
        return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    record_writer.masked_crc32c = masked_crc32c
    return f"google-crc32c ({google_crc32c.implementation})"


def write_run(directory: str, graph_bytes: bytes | None, run_metadata_bytes: bytes) -> str:
    """One FileWriter-compatible event file: add_graph (unless None) and add_run_metadata(tag "step_1", step 1)."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer import event_file_writer

    os.makedirs(directory, exist_ok=True)
    for old in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        os.remove(old)
    writer = event_file_writer.EventFileWriter(directory)
    now = time.time()
    if graph_bytes is not None:
        writer.add_event(event_pb2.Event(wall_time=now, graph_def=graph_bytes))
    writer.add_event(event_pb2.Event(wall_time=now, step=1, tagged_run_metadata=event_pb2.TaggedRunMetadata(
        tag="step_1", run_metadata=run_metadata_bytes)))
    writer.close()
    return writer.get_logdir()


def without_graph(out: str) -> str:
    return out.rstrip("/") + "_nograph"


def make_scale_step(deep: str, out: str, replicas: int) -> dict:
    """Build (or reuse) the big step's logdir, and the same step without its GraphDef; returns what they hold."""
    sources = [os.path.join(deep, name) for name in ("run_metadata.pb", "graph.pb")]
    missing = [p for p in sources if not os.path.exists(p)]
    if missing:
        sys.exit(f"{missing[0]} is missing: generate the deep step first with "
                 f"`python benchmarks/make_big_trace.py --shape deep --out {deep}` (~4 minutes)")
    stamp = {"replicas": replicas, "scope": COPY_SCOPE, "sources": [[p, os.path.getsize(p), os.path.getmtime(p)] for p in sources]}
    stamp_path = os.path.join(out, "scale.json")
    if os.path.exists(stamp_path) and all(glob.glob(os.path.join(d, "events.out.tfevents.*"))
                                          for d in (out, without_graph(out))):
        with open(stamp_path) as f:
            made = json.load(f)
        if made["stamp"] == stamp:
            return made
    print(f"building the scale step: {replicas} copies of {deep} into {out} and {without_graph(out)}", flush=True)
    start = time.perf_counter()
    run_metadata_bytes = open(sources[0], "rb").read()
    graph_bytes = open(sources[1], "rb").read()
    big_run_metadata, big_graph, node_stats = replicate(run_metadata_bytes, graph_bytes, replicas)
    del graph_bytes
    checksums = fast_record_checksums()
    write_run(out, big_graph, big_run_metadata)
    write_run(without_graph(out), None, big_run_metadata)
    made = {"stamp": stamp, "node_stats": node_stats, "run_metadata_bytes": len(big_run_metadata),
            "graph_bytes": len(big_graph), "checksums": checksums,
            "event_file_bytes": sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "events.out.tfevents.*"))),
            "build_s": time.perf_counter() - start}
    with open(stamp_path, "w") as f:
        json.dump(made, f)
    return made


def make_many_runs(source: str, out: str, runs: int) -> int:
    """`runs` run directories, each a copy of `source`'s event file; returns the bytes of one copy."""
    events = sorted(glob.glob(os.path.join(source, "events.out.tfevents.*")))
    if not events:
        sys.exit(f"no event file under {source}")
    for index in range(runs):
        run = os.path.join(out, f"run_{index:03d}")
        target = os.path.join(run, os.path.basename(events[0]))
        if not os.path.exists(target):
            os.makedirs(run, exist_ok=True)
            shutil.copyfile(events[0], target)
    for extra in sorted(glob.glob(os.path.join(out, "run_*")))[runs:]:
        shutil.rmtree(extra)
    return os.path.getsize(events[0])


# --- measured in a fresh process ------------------------------------------------

def child(kind: str, logdir: str) -> dict:
    """Runs inside the fresh process: TensorBoard loads `logdir`, then the routes are timed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, REPO)
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test

    from benchlib import peak_rss_bytes as rss
    from tb_memory_plugin import plugin as memory_plugin

    def get(client, url):
        start = time.perf_counter()
        response = client.get(url)
        elapsed = time.perf_counter() - start
        assert response.status_code == 200, (url, response.status_code, response.get_data()[:300])
        return elapsed, response

    result = {"imports_rss": rss()}
    start = time.perf_counter()
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"graph_tagged_run_metadata": 0})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    result["load_s"], result["loaded_rss"] = time.perf_counter() - start, rss()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    context = base_plugin.TBContext(data_provider=provider, logdir=logdir)
    client = werkzeug_test.Client(application.TensorBoardWSGI([memory_plugin.MemoryPlugin(context)],
                                                              data_provider=provider))
    result["runs_cold_s"], response = get(client, "/data/plugin/memory/runs")
    runs = response.get_json()["runs"]
    result["runs"] = len(runs)
    if kind == "runs":
        result["runs_warm_s"] = get(client, "/data/plugin/memory/runs")[0]  # the second call
        result["runs_warm_more_s"] = [get(client, "/data/plugin/memory/runs")[0] for _ in range(3)]
    else:
        run, tag = runs[0]["run"], runs[0]["steps"][0]["tag"]
        cpu = time.process_time()
        result["summary_cold_s"], response = get(client, f"/data/plugin/memory/summary?run={run}&tag={tag}")
        result["summary_cold_cpu_s"] = time.process_time() - cpu
        body = response.get_json()
        result["summary_bytes"] = len(response.get_data())
        result["status"] = body.get("status")
        result["peak_rise_bytes"] = body["devices"][0]["peak_rise_bytes"] if body.get("devices") else None
        result["summary_warm_s"] = get(client, f"/data/plugin/memory/summary?run={run}&tag={tag}")[0]
    result["peak_rss"] = rss()
    return result


def real_server_runs(logdir: str, expected: int) -> dict:
    """The `runs` route of a real `tensorboard --load_fast=true` (its Rust data server, TensorBoard's
    default where installed): each blob the route reads is a call to that server, which the in-process
    figures above do not pay (trial AD's 200 runs took 27 s to list cold, when every step's record was
    looked up and read one call at a time). Timed once TensorBoard itself lists every run; the plugin must
    be pip-installed for its entry point (tests/tbserver.py serves this checkout's code)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from tbserver import NotReady, TensorBoard, get_json as fetch_json

    server = TensorBoard.from_checkout(logdir, "--load_fast=true",
                                       log_path=os.path.join("/tmp", "bench_scale_tensorboard.log"))
    try:
        server.wait_url(120)
        server.wait_until(server.memory_listing, 120, "listing its plugins")

        def listed():
            if len(fetch_json(server.url + "/data/runs", timeout=30)) < expected:
                raise NotReady("TensorBoard has not listed every run yet")

        server.wait_until(listed, 300, "listing every run")
        result = {}
        for key in ("runs_cold_s", "runs_warm_s"):
            start = time.perf_counter()
            runs = server.api("runs", timeout=300)["runs"]
            result[key] = time.perf_counter() - start
        result["runs"] = len(runs)
        start = time.perf_counter()
        server.api("default_step", timeout=300)
        result["default_step_s"] = time.perf_counter() - start
        return result
    finally:
        server.stop()


def in_fresh_process(kind: str, logdir: str) -> dict:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, logdir],
                          capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if done.returncode != 0:
        sys.exit(f"the {kind} process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deep", default="/tmp/tb_memory_deep", help="make_big_trace.py --shape deep output")
    parser.add_argument("--replicas", type=int, default=13)
    parser.add_argument("--scale-dir", default="/tmp/tb_memory_scale")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--runs-dir", default="/tmp/tb_memory_runs200")
    parser.add_argument("--small-trace", default=SMALL_TRACE, help="the run copied --runs times")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "LOGDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return

    made = make_scale_step(args.deep, args.scale_dir, args.replicas)
    print(f"big step  {args.scale_dir}: {made['node_stats']:,} node stats ({args.replicas} copies of {args.deep}), "
          f"RunMetadata {made['run_metadata_bytes'] / 1e6:.0f} MB, GraphDef {made['graph_bytes'] / 1e6:.0f} MB, "
          f"event file {made['event_file_bytes'] / 1e6:.0f} MB (built in {made['build_s']:.0f} s, "
          f"checksums by {made['checksums']}); {without_graph(args.scale_dir)}: the same without the GraphDef")
    one_run = make_many_runs(args.small_trace, args.runs_dir, args.runs)
    print(f"{args.runs} runs  {args.runs_dir}: {args.runs} copies of {args.small_trace} ({one_run / 1e3:.0f} kB each)")

    kinds = {"big": ("summary", args.scale_dir), "big without graph": ("summary", without_graph(args.scale_dir)),
             "runs": ("runs", args.runs_dir)}
    results = {name: [] for name in kinds}
    for round_index in range(args.rounds):
        # Alternate the order, so every kind sees the same minutes of a shared machine.
        for name in (list(kinds) if round_index % 2 == 0 else list(kinds)[::-1]):
            results[name].append(in_fresh_process(*kinds[name]))
        line = []
        for name in ("big", "big without graph"):
            r = results[name][-1]
            line.append(f"{name}: load {r['load_s']:.1f} s, runs {r['runs_cold_s']:.2f} s, summary cold "
                        f"{r['summary_cold_s']:.2f} s (CPU {r['summary_cold_cpu_s']:.2f} s), "
                        f"peak RSS {r['peak_rss'] / 1e9:.2f} GB ({r['loaded_rss'] / 1e9:.2f} GB once loaded)")
        r = results["runs"][-1]
        line.append(f"{r['runs']} runs: load {r['load_s']:.1f} s, runs cold {r['runs_cold_s']:.2f} s, "
                    f"warm {r['runs_warm_s']:.3f} s")
        print(f"round {round_index + 1}: " + " | ".join(line), flush=True)

    served = []
    for round_index in range(args.rounds):
        served.append(real_server_runs(args.runs_dir, args.runs))
        r = served[-1]
        print(f"real tensorboard --load_fast=true, {r['runs']} runs: runs cold {r['runs_cold_s']:.2f} s, warm "
              f"{r['runs_warm_s']:.3f} s, then default_step {r['default_step_s']:.2f} s", flush=True)
    results["served"] = served

    for name in ("big", "big without graph"):
        if results[name][0]["status"] not in (None, "ok"):
            print(f"warning: {name}: the step's status is {results[name][0]['status']!r}")

    def figure(name, key, unit="s", scale=1.0, digits=2):
        values = [r[key] * scale for r in results[name]]
        return f"{statistics.median(values):.{digits}f} {unit}; {min(values):.{digits}f} {unit}"

    def against(name, key, target):
        value = statistics.median(r[key] for r in results[name])
        return "met" if value < target else "MISSED"

    gb = 1e-9
    rows = [
        ("big step: summary route, cold", figure("big", "summary_cold_s"),
         f"< {TARGET_SUMMARY_S:.0f} s: {against('big', 'summary_cold_s', TARGET_SUMMARY_S)}"),
        ("  its CPU time (the process's, all threads)", figure("big", "summary_cold_cpu_s"), ""),
        ("big step: peak RSS of the process", figure("big", "peak_rss", "GB", gb),
         f"< {TARGET_RSS_BYTES * gb:.0f} GB: {against('big', 'peak_rss', TARGET_RSS_BYTES)}"),
        ("  of which: after imports", figure("big", "imports_rss", "GB", gb), ""),
        ("  of which: once TensorBoard loaded the logdir", figure("big", "loaded_rss", "GB", gb), ""),
        ("big step: TensorBoard loading the logdir", figure("big", "load_s", digits=1), "TensorBoard's, not ours"),
        ("big step: runs route, cold", figure("big", "runs_cold_s"), ""),
        ("big step: summary route, warm", figure("big", "summary_warm_s", "ms", 1e3, 1), ""),
        ("same step without its GraphDef: summary, cold", figure("big without graph", "summary_cold_s"), ""),
        ("  its CPU time", figure("big without graph", "summary_cold_cpu_s"), ""),
        ("  peak RSS of the process", figure("big without graph", "peak_rss", "GB", gb), ""),
        ("  once TensorBoard loaded the logdir", figure("big without graph", "loaded_rss", "GB", gb), ""),
        (f"{args.runs} runs: runs route, warm (second call)", figure("runs", "runs_warm_s", digits=3),
         f"< {TARGET_RUNS_WARM_S:.0f} s: {against('runs', 'runs_warm_s', TARGET_RUNS_WARM_S)}"),
        (f"{args.runs} runs: runs route, cold (first call)", figure("runs", "runs_cold_s", digits=3), ""),
        (f"{args.runs} runs: TensorBoard loading the logdir", figure("runs", "load_s", digits=1),
         "TensorBoard's, not ours"),
        (f"{args.runs} runs, real tensorboard (Rust data server): runs, cold", figure("served", "runs_cold_s"), ""),
        ("  runs, warm (second call)", figure("served", "runs_warm_s", digits=3),
         f"< {TARGET_RUNS_WARM_S:.0f} s: {against('served', 'runs_warm_s', TARGET_RUNS_WARM_S)}"),
        ("  then default_step (analyses the latest steps)", figure("served", "default_step_s"), ""),
    ]
    print(f"\n{'median of ' + str(args.rounds) + ' fresh processes; best':50s} {'measured':>20s}  target")
    for label, measured, target in rows:
        print(f"{label:50s} {measured:>20s}  {target}")


if __name__ == "__main__":
    main()
