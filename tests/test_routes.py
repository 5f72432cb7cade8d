"""The plugin's routes through TensorBoard's own WSGI app and data provider,
over event files written by real TensorFlow (docs/http_api.md)."""

from __future__ import annotations

import json
import threading
from typing import NamedTuple

import numpy as np
import pytest
from werkzeug.test import Client

from tracedata import REPO, UNET_STEPS, engine_step, read_blob_bytes
from tb_memory_plugin import findings, graph, report, store
from tb_memory_plugin.figures import ALLOCATED, AT_PEAK, OUTPUT

PREFIX = "/data/plugin/memory/"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


class TensorBoardApp(NamedTuple):
    """TensorBoard's WSGI app with the Memory plugin, over the session logdir."""

    client: Client  # drives the whole app, routes under PREFIX
    plugin: object  # the MemoryPlugin the app serves
    provider: object  # the data provider it reads through


def tensorboard_app(logdir) -> TensorBoardApp:
    """TensorBoard's WSGI app with the Memory plugin over `logdir`, as `tensorboard --logdir` serves it."""
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin

    from tb_memory_plugin.loader import MemoryPluginLoader

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    context = base_plugin.TBContext(data_provider=provider, logdir=str(logdir))
    plugin = MemoryPluginLoader().load(context)
    assert plugin is not None
    app = application.TensorBoardWSGI([plugin], data_provider=provider)
    return TensorBoardApp(Client(app), plugin, provider)


@pytest.fixture(scope="module")
def tb(logdir):
    return tensorboard_app(logdir)


def get(tb, route, **params):
    response = tb.client.get(PREFIX + route, query_string=params)
    return response.status_code, response


def get_json(tb, route, expect=200, **params):
    code, response = get(tb, route, **params)
    assert code == expect, (route, params, response.get_data(as_text=True)[:500])
    assert response.mimetype == "application/json"
    return json.loads(response.get_data(as_text=True))


def _roundtrip(body):
    return json.loads(json.dumps(body))


# -- listing -------------------------------------------------------------------------------


def test_plugins_listing_shows_memory(tb):
    response = tb.client.get("/data/plugins_listing")
    assert response.status_code == 200
    listing = json.loads(response.get_data(as_text=True))
    memory = listing["memory"]
    assert memory["enabled"] is True
    assert memory["tab_name"] == "Memory"
    assert memory["loading_mechanism"] == {"type": "IFRAME", "module_path": "/data/plugin/memory/index.js"}


def test_runs(tb):
    body = get_json(tb, "runs")
    runs = {r["run"]: r for r in body["runs"]}
    assert [r["run"] for r in body["runs"]] == sorted(runs) == ["corrupt", "gpu", "nomem", "notrace", "tf2", "unet"]
    unet = runs["unet"]
    assert unet["has_graph"] is True
    assert [s["tag"] for s in unet["steps"]] == [f"step_{n}" for n in UNET_STEPS]
    assert [s["step"] for s in unet["steps"]] == list(UNET_STEPS)
    assert all(s["devices"] == [CPU0] for s in unet["steps"])
    assert all(isinstance(s["wall_time"], float) for s in unet["steps"])
    assert runs["gpu"]["has_graph"] is False
    assert runs["gpu"]["steps"][0]["devices"] == ["/job:localhost/replica:0/task:0/device:GPU:0", CPU0]
    assert runs["corrupt"]["steps"][0]["devices"] == []
    assert runs["notrace"]["steps"][0]["devices"] == []
    # A run's steps as written: by step, then time (not by name).
    assert [(s["tag"], s["step"]) for s in runs["tf2"]["steps"]] == [("traced", 5), ("keras_profile", 6)]
    assert runs["tf2"]["steps"][0]["devices"] == [CPU0]
    # The step each run opens on (store.latest_step): the highest step, but among those holding step
    # stats: tf2's `keras_profile` (step 6) holds none, so `traced` (step 5).
    assert unet["latest_tag"] == f"step_{max(UNET_STEPS)}" and runs["tf2"]["latest_tag"] == "traced"


def test_tf2_graph_run_metadata_steps(tb, unet_trace):
    """Steps written with the TF2 summary op (plugin graph_run_metadata) are read too."""
    body = get_json(tb, "summary", run="tf2", tag="traced")
    engine = store.analyse_bytes(unet_trace.run_metadata_bytes)  # the run has no graph
    # Its only neighbour (keras_profile) holds no step stats: findings of this step alone.
    found = [finding.as_dict() for finding in findings.step_findings(engine, None, [(5, engine)])]
    assert body == _roundtrip({"run": "tf2", "tag": "traced", "step": 5, **report.step_summary(engine, "layer"),
                               "findings": found})
    assert body["devices"][0]["peak_rise_bytes"] == engine.space(None).peak_rise_bytes > 0
    keras = get_json(tb, "summary", run="tf2", tag="keras_profile")
    assert keras["status"] == "empty" and "FULL_TRACE" in keras["message"]


# -- figures equal the engine's ------------------------------------------------------------------


@pytest.mark.parametrize("group", ["layer", "scope"])
def test_summary_equals_engine(tb, logdir, group):
    body = get_json(tb, "summary", run="unet", tag="step_2", group=group)
    engine = engine_step(logdir, "unet", "step_2")
    run_graph = graph.RunGraph.from_bytes(read_blob_bytes(logdir, "unet", "__run_graph__", ("graphs",)))
    summary = report.step_summary(engine, group, run_graph)  # the run graph adds the resident figures
    assert {key: value for key, value in body.items() if key != "findings"} == \
        _roundtrip({"run": "unet", "tag": "step_2", "step": 2, "source": "run_metadata", **summary})
    assert body["status"] == "ok" and body["message"] is None
    (device,) = body["devices"]
    space = engine.space(None)
    assert body["default_device"] == device["id"] == space.trace.id
    assert device["peak_rise_bytes"] == space.peak_rise_bytes > 0
    assert device["figures"]["at_peak_bytes"] == device["peak_rise_bytes"]
    assert sum(c["at_peak_bytes"] for c in device["categories"]) == device["peak_rise_bytes"]
    assert sum(o["figures"]["at_peak_bytes"] for o in device["op_types"]) == device["peak_rise_bytes"]
    tree = space.tree(group)
    assert [t["scope"] for t in device["top_scopes"]] == [tree.paths[c] for c in tree.children[0][:10]]


class _OverTheWire:
    """A data provider that is not the in-process multiplexer (as TensorBoard's gRPC client to its
    Rust data server is not): delegates everything, and notes which thread read each blob."""

    def __init__(self, provider):
        self._provider = provider
        self.readers: list[str] = []

    def __getattr__(self, name):
        return getattr(self._provider, name)

    def read_blob(self, ctx, blob_key):
        self.readers.append(threading.current_thread().name)
        return self._provider.read_blob(ctx, blob_key=blob_key)


def test_summary_over_the_wire_reads_the_graph_while_the_step_is_decoded(tb, logdir):
    """With blobs that come over gRPC (--load_fast), the run graph is read in a thread while the
    step is read and decoded in the request's; the answer is the in-process provider's."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin

    from tb_memory_plugin.loader import MemoryPluginLoader

    provider = _OverTheWire(tb.provider)
    plugin = MemoryPluginLoader().load(base_plugin.TBContext(data_provider=provider, logdir=str(logdir)))
    wire = TensorBoardApp(Client(application.TensorBoardWSGI([plugin], data_provider=provider)), plugin, provider)
    body = get_json(wire, "summary", run="unet", tag="step_2", group="layer")
    assert body == get_json(tb, "summary", run="unet", tag="step_2", group="layer")
    assert body["devices"][0]["resident"] is not None  # the run graph was read and used
    assert any(name.startswith("tb-memory-read") for name in provider.readers)  # the graph
    assert threading.current_thread().name in provider.readers  # the step


def test_summary_of_hand_built_gpu_step(tb):
    body = get_json(tb, "summary", run="gpu", tag="step_1")
    assert body["default_device"] == "GPU:0/GPU_0_bfc"
    devices = {d["id"]: d for d in body["devices"]}
    assert set(devices) == {"GPU:0/GPU_0_bfc", "GPU:0/cuda_host_bfc", "CPU:0/cpu"}
    gpu = devices["GPU:0/GPU_0_bfc"]
    assert gpu["baseline"] == "allocator_bytes_in_use" and gpu["start_bytes"] == 1_000_000
    assert gpu["peak_bytes"] == 1_000_000 + gpu["peak_rise_bytes"]
    assert gpu["peak_node"]["name"] == "shared_model/unet_01/Conv2D"
    assert gpu["peak_node"]["scope"] == "shared_model/unet_01"
    assert devices["GPU:0/cuda_host_bfc"]["baseline"] == "none"
    assert devices["GPU:0/cuda_host_bfc"]["start_bytes"] is None


def _engine_resident(logdir, run, tag):
    """(memory space, its resident tensors): what the scopes and scope routes answer from."""
    step = engine_step(logdir, run, tag)
    run_graph = graph.RunGraph.from_bytes(read_blob_bytes(logdir, run, "__run_graph__", ("graphs",)))
    space = step.space(None)
    return space, report.space_resident(step, space, run_graph)


def test_scopes_equal_engine_and_children_add_up(tb, logdir):
    engine, resident = _engine_resident(logdir, "unet", "step_1")
    for group, scope in (("layer", ""), ("layer", "shared_model"), ("scope", "gradients"),
                         ("layer", "shared_model/unet_01")):
        body = get_json(tb, "scopes", run="unet", tag="step_1", group=group, scope=scope)
        assert body == _roundtrip(report.scope_children(engine, group, scope, resident))
        tree = engine.tree(group)
        assert body["figures"]["at_peak_bytes"] == int(tree.figures[tree.index[scope], AT_PEAK])
        for key in body["figures"]:
            assert sum(c["figures"][key] for c in body["children"]) == body["figures"][key], (scope, key)
        for key in body["categories"]:
            assert sum(c["categories"][key] for c in body["children"]) == body["categories"][key], (scope, key)
    body = get_json(tb, "scopes", run="unet", tag="step_1", scope="shared_model")
    assert [p["scope"] for p in body["path"]] == ["", "shared_model"]
    unet01 = next(c for c in body["children"] if c["scope"] == "shared_model/unet_01")
    assert unet01["figures"]["at_peak_bytes"] > 0 and unet01["figures"]["output_bytes"] > 0
    assert unet01["kind"] == "scope" and unet01["has_children"] is True


def test_a_big_scope_child_lists_what_it_holds(tb):
    """A child holding a fifth or more of its level (at peak, or allocated) with children of its own
    carries `inside`: its children as the scopes route gives them (params aside), largest at the peak
    first; the others carry none."""
    from tb_memory_plugin.report import INSIDE_SHARE

    body = get_json(tb, "scopes", run="unet", tag="step_1", scope="")
    total = {key: sum(max(c["figures"][key], 0) for c in body["children"]) for key in ("at_peak_bytes", "allocated_bytes")}
    big = [c for c in body["children"] if c["has_children"]
           and any(c["figures"][key] >= INSIDE_SHARE * total[key] for key in total)]
    assert [c["scope"] for c in big] and "shared_model" in [c["scope"] for c in big]
    for child in body["children"]:
        if child not in big:
            assert "inside" not in child, child["scope"]
            continue
        level = get_json(tb, "scopes", run="unet", tag="step_1", scope=child["scope"])["children"]
        drop = ("param_count", "param_bytes", "slot_bytes")
        expected = sorted(({k: v for k, v in c.items() if k not in drop and k != "inside"} for c in level),
                          key=lambda c: (-c["figures"]["at_peak_bytes"], -c["figures"]["allocated_bytes"], c["scope"]))
        assert child["inside"] == expected, child["scope"]


def test_scope_details(tb, logdir):
    engine, resident = _engine_resident(logdir, "unet", "step_3")
    body = get_json(tb, "scope", run="unet", tag="step_3", scope="shared_model/unet_01")
    assert body == _roundtrip(report.scope_details(engine, "layer", "shared_model/unet_01", resident=resident))
    tree = engine.tree("layer")
    node = tree.index["shared_model/unet_01"]
    assert body["figures"]["allocated_bytes"] == int(tree.figures[node, ALLOCATED])
    assert body["figures"]["output_bytes"] == int(tree.figures[node, OUTPUT]) > 0
    assert body["exec_count"] == int(tree.exec_count[node]) == len(tree.executions(node))
    assert body["share_of_peak"] == pytest.approx(int(tree.figures[node, AT_PEAK]) / engine.peak_rise_bytes)
    categories = {c["name"]: c["at_peak_bytes"] for c in body["categories"]}
    assert categories["activations"] > 0
    top2 = get_json(tb, "scope", run="unet", tag="step_3", scope="shared_model/unet_01", top="2")
    assert len(top2["nodes"]) == 2 and top2["nodes"] == body["nodes"][:2]
    raw = {n["raw_name"] for n in body["nodes"]}
    assert any(r.startswith("gradients/shared_model/unet_01/") for r in raw)


def test_curve_equals_engine(tb, logdir):
    engine = engine_step(logdir, "unet", "step_1").space(None)
    body = get_json(tb, "curve", run="unet", tag="step_1", points="50", top="4", breakdown="shared_model")
    assert body == _roundtrip(report.curve(engine, "layer", 50, "shared_model", 4))
    assert len(body["t_us"]) <= 50
    assert max(body["max_bytes"]) == body["peak"]["bytes"] == (engine.start_bytes or 0) + engine.peak_rise_bytes
    start = body["start_bytes"] or 0
    assert np.sum([s["bytes"] for s in body["series"]], axis=0).tolist() == [m - start for m in body["max_bytes"]]
    assert len(body["node_at"]) == len(body["t_us"])
    assert max(body["node_at"]) < len(body["node_names"])
    if body["baseline"] == "allocator_bytes_in_use":
        assert body["absolute"] is True and body["snapshots"]["bytes"]
    # mklcpu's readings (the dotted line) count its requests of 256 KiB and more: the caption says so.
    assert body["snapshots"]["counts_from_bytes"] == (256 * 1024 if engine.trace.allocator == "mklcpu" else None)


def test_curve_zoom_window(tb, logdir):
    """A zoomed view asks for a window and gets its own buckets, checked against the
    step function rebuilt from the engine's events."""
    engine = engine_step(logdir, "unet", "step_1").space(None)
    curve = engine.curve
    start = engine.start_bytes or 0
    times, rises = curve.time_us, curve.rise_bytes
    middle = len(times) // 2
    window = (int(times[middle - 40]), int(times[middle + 40]))
    body = get_json(tb, "curve", run="unet", tag="step_1", points="16", top="3",
                    start_us=str(window[0]), end_us=str(window[1]))
    assert body["window"] == {"start_us": window[0], "end_us": window[1]}
    assert 0 < len(body["t_us"]) <= 16
    assert all(window[0] <= t <= window[1] for t in body["t_us"])
    inside = (times >= window[0]) & (times <= window[1])
    assert max(body["max_bytes"]) == start + int(rises[inside].max())
    assert min(body["min_bytes"]) == start + min(int(rises[inside].min()), int(rises[np.flatnonzero(inside)[0] - 1]))
    assert body["peak"]["rise_bytes"] == engine.peak_rise_bytes  # the step's own, not the window's
    assert np.sum([s["bytes"] for s in body["series"]], axis=0).tolist() == [m - start for m in body["max_bytes"]]
    # Windows that open on an event: at most `points` buckets, all inside (the first
    # bucket's time is where it peaks, often after the window's first event).
    span = min(100, len(times) // 3)
    peaked_later = 0
    for k in range(1, len(times) - span, max(1, len(times) // 12)):
        at_event = get_json(tb, "curve", run="unet", tag="step_1", points="16", top="0",
                            start_us=str(int(times[k])), end_us=str(int(times[k + span])))
        assert 0 < len(at_event["t_us"]) <= 16
        assert int(times[k]) <= at_event["t_us"][0] and at_event["t_us"][-1] <= int(times[k + span])
        peaked_later += at_event["t_us"][0] > int(times[k])
    assert peaked_later  # the case where a first bucket peaks after the window's first event was seen
    # Enough points: every event group in the window, exactly.
    every = get_json(tb, "curve", run="unet", tag="step_1", points="20000", start_us=str(window[0]),
                     end_us=str(window[1]))
    assert every["t_us"] == times[inside].tolist()
    assert every["max_bytes"] == (rises[inside] + start).tolist()


def test_curve_window_opening_between_events_starts_with_the_value_carried_in(tb, logdir):
    engine = engine_step(logdir, "unet", "step_1").space(None)
    times, rises = engine.curve.time_us, engine.curve.rise_bytes
    start = engine.start_bytes or 0
    gaps = np.flatnonzero(np.diff(times) > 1)  # a window can open strictly between these events
    k = int(gaps[np.searchsorted(gaps, len(times) // 3)])
    window = (int(times[k]) + 1, int(times[-1]))
    body = get_json(tb, "curve", run="unet", tag="step_1", points="20000", top="2",
                    start_us=str(window[0]), end_us=str(window[1]))
    assert body["t_us"][0] == window[0]
    assert body["min_bytes"][0] == body["max_bytes"][0] == start + int(rises[k])
    assert body["t_us"][1:] == times[k + 1:].tolist()
    # The series carried in add up to the value carried in, like every other point.
    assert sum(s["bytes"][0] for s in body["series"]) == int(rises[k])


@pytest.mark.parametrize("params", [
    {"start_us": "10"}, {"end_us": "10"}, {"start_us": "20", "end_us": "10"}, {"start_us": "5", "end_us": "5"},
    {"start_us": "-1", "end_us": "10"}, {"start_us": "a", "end_us": "10"},
])
def test_curve_window_is_validated(tb, params):
    body = get_json(tb, "curve", expect=400, run="unet", tag="step_1", **params)
    assert "start_us" in body["error"] or "end_us" in body["error"]


def test_graph_with_run_graph(tb, logdir):
    engine = engine_step(logdir, "unet", "step_1").space(None)
    tree = engine.tree("scope")
    body = get_json(tb, "graph", run="unet", tag="step_1", scope="shared_model")
    assert body["source"] == "run_graph" and body["graphs_dashboard_run"] == "unet"
    nodes = {n["id"]: n for n in body["nodes"]}
    unet01 = nodes["shared_model/unet_01"]
    assert unet01["kind"] == "scope"
    node = tree.index["shared_model/unet_01"]
    assert unet01["at_peak_bytes"] == int(tree.figures[node, AT_PEAK])
    assert unet01["allocated_bytes"] == int(tree.figures[node, ALLOCATED]) > 0
    edges = {(e["source"], e["target"]) for e in body["edges"]}
    assert ("shared_model/unet_00", "shared_model/unet_01") in edges
    one = get_json(tb, "graph", run="unet", tag="step_1", scope="shared_model", max_nodes="1")
    assert len(one["nodes"]) == 2 and one["nodes"][1]["id"] == "(other)"
    assert one["omitted_nodes"] == len(body["nodes"]) - 1
    root = get_json(tb, "graph", run="unet", tag="step_1")
    assert {"shared_model", "gradients", "Adam"} <= {n["id"] for n in root["nodes"]}
    # Every box of this TF1 graph the layer grouping holds, or the trace never ran under (a placeholder,
    # `init`): none is said to be missing from it (they had been, sending a click to the scope grouping).
    grouped = get_json(tb, "graph", run="unet", tag="step_1", group="layer")["nodes"]
    never_ran = [n["id"] for n in grouped if n["kind"] != "other" and n["id"] not in tree.index]
    assert never_ran and all(n["in_group"] for n in grouped if n["kind"] != "other")


def test_graph_without_run_graph_uses_the_trace(tb):
    body = get_json(tb, "graph", run="gpu", tag="step_1", scope="shared_model")
    assert body["source"] == "trace" and body["edges"] == []
    assert "shared_model/unet_01" in {n["id"] for n in body["nodes"]}


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route, params", [
    ("summary", {"run": "nope", "tag": "step_1"}),
    ("summary", {"run": "unet", "tag": "nope"}),
    ("scopes", {"run": "unet", "tag": "step_1", "device": "TPU:0/nope"}),
    ("scopes", {"run": "unet", "tag": "step_1", "scope": "no/such/scope"}),
    ("scope", {"run": "unet", "tag": "step_1", "scope": "nope"}),
    ("curve", {"run": "unet", "tag": "step_1", "breakdown": "nope"}),
    ("curve", {"run": "nope", "tag": "step_1"}),
    ("graph", {"run": "unet", "tag": "step_1", "scope": "nope"}),
])
def test_unknown_things_are_404_json(tb, route, params):
    body = get_json(tb, route, expect=404, **params)
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]


@pytest.mark.parametrize("route, params", [
    ("curve", {"points": "abc"}),
    ("curve", {"points": "5"}),
    ("curve", {"points": "20001"}),
    ("curve", {"top": "-1"}),
    ("curve", {"split": "2"}),
    ("curve", {"split": "no"}),
    ("scopes", {"group": "nope"}),
    ("summary", {"group": "nope"}),
    ("scope", {"top": "-1"}),
    ("scope", {"top": "0"}),
    ("graph", {"max_nodes": "x"}),
    ("summary", {"run": ""}),
    ("scopes", {"tag": ""}),
])
def test_bad_parameters_are_400(tb, route, params):
    query = {"run": "unet", "tag": "step_1", **params}
    body = get_json(tb, route, expect=400, **query)
    assert set(body) == {"error"}


def test_a_parameter_given_twice_is_400_but_the_lists_a_route_takes():
    """`run=a&run=b` had read the first and said nothing (trial AD): one value is asked, so two are refused; the
    what-if's lists (`runs`, `tags`) take several."""
    app = tensorboard_app(REPO / "demo_logs")
    response = app.client.get(PREFIX + "summary?run=unet_b2&run=unet_b4&tag=step_3")
    assert response.status_code == 400 and response.get_json() == {"error": "parameter 'run' given 2 times: give it once"}
    response = app.client.get(PREFIX + "whatif?run=unet_b2&tag=step_3&batch=8&runs=unet_b2&runs=unet_b4")
    assert response.status_code == 200, response.get_data()[:300]


@pytest.mark.parametrize("route, params, expect", [
    ("runs", {}, 200),
    ("summary", {"run": "unet", "tag": "step_1"}, 200),
    ("graph", {"run": "unet", "tag": "step_1"}, 200),
    ("scopes", {"run": "unet", "tag": "step_1", "scope": "no/such/scope"}, 404),
    ("curve", {"run": "unet", "tag": "step_1", "points": "5"}, 400),
])
def test_json_answers_say_how_long_the_server_worked(tb, route, params, expect):
    """Every JSON answer, errors included, carries `Server-Timing: app;dur=<ms>` (the browser's network
    panel and bench_browser.py's waterfall show it)."""
    code, response = get(tb, route, **params)
    assert code == expect
    header = response.headers.get("Server-Timing", "")
    name, _, duration = header.partition(";dur=")
    assert name == "app" and float(duration) >= 0, header


@pytest.mark.parametrize("route", ["runs", "summary", "scopes", "curve", "index.js"])
def test_post_is_refused(tb, route):
    response = tb.client.post(PREFIX + route, query_string={"run": "unet", "tag": "step_1"})
    assert response.status_code == 405
    if route != "index.js":  # a JSON answer, timed as every other (docs/http_api.md)
        assert response.headers.get("Server-Timing", "").startswith("app;dur=")


def test_corrupt_step_only_breaks_itself(tb):
    body = get_json(tb, "summary", run="corrupt", tag="step_1")
    assert body["status"] == "corrupt" and body["devices"] == []
    assert "not a valid RunMetadata" in body["message"]
    for route in ("scopes", "scope", "curve", "graph"):
        error = get_json(tb, route, expect=422, run="corrupt", tag="step_1")
        assert "not a valid RunMetadata" in error["error"]
    # Other runs still answer.
    assert get_json(tb, "summary", run="unet", tag="step_1")["status"] == "ok"
    assert get_json(tb, "curve", run="unet", tag="step_1")["t_us"]
    assert get_json(tb, "runs")["runs"]


def test_a_device_name_that_is_not_utf8_breaks_nothing(tmp_path, unet_trace):
    """Names come from user files: a real step whose device name has a byte that is not UTF-8
    lists, and answers, with U+FFFD in the name; the run beside it is untouched."""
    import protos

    data = unet_trace.run_metadata_bytes
    assert data.count(b"localhost") == 1
    protos.write_tagged_run_metadata(tmp_path / "bad", "step_1", data.replace(b"localhost", b"loc\xfflhost"))
    protos.write_tagged_run_metadata(tmp_path / "good", "step_1", data)
    app = tensorboard_app(tmp_path)
    device = CPU0.replace("localhost", "loc\ufffdlhost")
    runs = {r["run"]: r for r in get_json(app, "runs")["runs"]}
    assert runs["bad"]["steps"][0]["devices"] == [device] and runs["good"]["steps"][0]["devices"] == [CPU0]
    bad, good = (get_json(app, "summary", run=run, tag="step_1") for run in ("bad", "good"))
    assert bad["status"] == "ok" and [d["device"] for d in bad["devices"]] == [device]
    assert bad["devices"][0]["figures"] == good["devices"][0]["figures"]
    scopes = get_json(app, "scopes", run="bad", tag="step_1", device=bad["devices"][0]["id"])
    assert sum(child["figures"]["at_peak_bytes"] for child in scopes["children"]) == bad["devices"][0]["peak_rise_bytes"]


def test_steps_are_listed_with_their_numbers_in_order(tmp_path, unet_trace):
    """`step_8` before `step_12` (not as text, where "1" comes before "8"), in the runs route and
    so in the page's step picker."""
    import protos

    for number in (12, 8, 100, 9):
        protos.write_tagged_run_metadata(tmp_path / "run", f"step_{number}", unet_trace.run_metadata_bytes, number)
    (run,) = get_json(tensorboard_app(tmp_path), "runs")["runs"]
    assert [s["tag"] for s in run["steps"]] == ["step_8", "step_9", "step_12", "step_100"]
    # Runs too: a batch-size sweep's `b4, b8, b16, b32`, not `b16, b32, b4, b8` (a trial's picker).
    for name in ("b16", "b4", "b32", "b8"):
        protos.write_tagged_run_metadata(tmp_path / "sweep" / name, "step_1", unet_trace.run_metadata_bytes, 1)
    runs = [r["run"] for r in get_json(tensorboard_app(tmp_path / "sweep"), "runs")["runs"]]
    assert runs == ["b4", "b8", "b16", "b32"]
    # Digits of any length (Python's int() refuses over 4,300), and ties broken by the tag itself.
    odd = ["step_" + "9" * 5000, "step_08", "step_8", "step_", "a10b2", "a10b10", "a9"]
    assert sorted(odd, key=store.tag_order) == ["a9", "a10b2", "a10b10", "step_", "step_08", "step_8", "step_" + "9" * 5000]


def test_a_bug_in_a_route_is_a_json_500_and_breaks_nothing_else(tb, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(type(tb.plugin), "summary_impl", broken)
    error = get_json(tb, "summary", expect=500, run="unet", tag="step_1")
    assert "RuntimeError: boom" in error["error"]
    assert "summary_route failed" in caplog.text and "boom" in caplog.text
    assert get_json(tb, "runs")["runs"] and get_json(tb, "curve", run="unet", tag="step_1")["t_us"]


def test_profiles_are_found_under_logdir_spec(tmp_path):
    """`tensorboard --logdir_spec name:path,...` gives the plugin no logdir: the profiled steps of
    each directory are found all the same, under the runs TensorBoard names there (`<name>/<run>`)."""
    import argparse
    import shutil

    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin

    from tb_memory_plugin.loader import MemoryPluginLoader

    shutil.copytree(REPO / "demo_logs" / "keras_unet", tmp_path / "keras")
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(tmp_path / "keras"), "k")  # as TensorBoard does for `k:<path>`
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, "")
    context = base_plugin.TBContext(data_provider=provider, logdir="",
                                    flags=argparse.Namespace(logdir_spec=f"k:{tmp_path / 'keras'}"))
    app = TensorBoardApp(Client(application.TensorBoardWSGI([MemoryPluginLoader().load(context)],
                                                            data_provider=provider)), None, provider)
    runs = {r["run"]: r for r in get_json(app, "runs")["runs"]}
    profiled = [s for s in runs["k/train"]["steps"] if s["source"] == "xplane"]
    assert profiled and all(s["tag"].startswith("profile/") and s["devices"] for s in profiled)
    body = get_json(app, "summary", run="k/train", tag=profiled[-1]["tag"])
    assert body["status"] == "ok" and body["devices"][0]["peak_rise_bytes"] > 0


def test_an_older_keras_callbacks_record_points_to_the_profile_in_its_parent_run(tmp_path):
    """Keras 2 (and 3.5) write the callback's `batch_N` record in `<log_dir>/train` and the profile
    in `<log_dir>`: the record names the profiled steps of the run above it."""
    import shutil

    import protos
    from tensorboard.compat.proto import config_pb2

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train" / "plugins", tmp_path / "fit" / "plugins")
    (tmp_path / "fit" / "train").mkdir()

    empty = config_pb2.RunMetadata().SerializeToString()
    protos.write_tagged_run_metadata(tmp_path / "fit" / "train", "batch_4", empty, 4)
    app = tensorboard_app(tmp_path)
    runs = {r["run"]: r for r in get_json(app, "runs")["runs"]}
    profiled = [s["tag"] for s in runs["fit"]["steps"] if s["source"] == "xplane"]
    body = get_json(app, "summary", run="fit/train", tag="batch_4")
    assert profiled and body["status"] == "empty"
    assert "profile of the run fit" in body["message"] and all(tag in body["message"] for tag in profiled[:4])


def test_step_without_memory_says_how_to_trace(tb):
    # add_run_metadata(RunMetadata()) of a NO_TRACE run writes no step stats at all: "empty"
    # (docs/http_api.md: "no step stats at all"); nodes without memory: "no_memory".
    for run, status in (("notrace", "empty"), ("nomem", "no_memory")):
        body = get_json(tb, "summary", run=run, tag="step_1")
        assert body["status"] == status
        assert body["devices"] == [] and body["default_device"] is None
        assert "FULL_TRACE" in body["message"]
        assert "add_run_metadata" in body["message"]
        error = get_json(tb, "scopes", expect=422, run=run, tag="step_1")
        assert "FULL_TRACE" in error["error"]


# -- static files --------------------------------------------------------------------------------


def test_index_js_is_served(tb, frontend_bundle):
    code, response = get(tb, "index.js")
    assert code == 200
    assert response.mimetype == "text/javascript"
    assert response.get_data() == frontend_bundle.read_bytes()
    assert b"render" in response.get_data()


@pytest.mark.parametrize("path", [
    "../../etc/passwd",
    "%2e%2e/%2e%2e/setup.py",
    "..%5c..%5csetup.py",
    "static/..%2f..%2fsetup.py",
    "static/index.js/../../setup.py",
    "%2e%2e%2f%2e%2e%2fsetup.py",
    "index.js/..%2f..%2f..%2fsetup.py",
    "setup.py",
    "loader.py",
    "static/index.js",
])
def test_path_traversal_never_serves_files(tb, path):
    secrets = [(REPO / "setup.py").read_text()[:200], (REPO / "tb_memory_plugin" / "loader.py").read_text()[:200]]
    try:
        secrets.append(open("/etc/passwd").read()[:60])
    except OSError:
        pass
    response = tb.client.get(PREFIX + path)
    body = response.get_data(as_text=True)
    assert not any(s and s in body for s in secrets), path
    assert response.status_code != 200, path


def test_static_route_uses_only_the_allow_list(tb):
    """Even when called directly with a crafted path, only allow-listed names reach the disk."""
    from werkzeug.test import EnvironBuilder

    plugin = tb.plugin
    for path in ("/data/plugin/memory/static/../../../setup.py", "/data/plugin/memory/..\\..\\setup.py",
                 "/data/plugin/memory/index.js/../../plugin.py"):
        environ = EnvironBuilder(path=path).get_environ()
        environ["PATH_INFO"] = path  # as a server that does not normalise would pass it
        statuses = []
        response = plugin.static_route(environ, lambda status, headers, *exc: statuses.append(status))
        body = b"".join(response)
        assert statuses == ["404 NOT FOUND"], path
        assert b"setup(" not in body and b"MemoryPlugin" not in body


# -- caching ---------------------------------------------------------------------------------------


def test_summary_is_cached_by_blob(tb):
    from tensorboard import context

    plugin = tb.plugin
    steps = plugin._store._steps
    get_json(tb, "summary", run="unet", tag="step_2")
    ctx = context.RequestContext()
    ref, first = plugin._step(ctx, "", "unet", "step_2")
    size = len(steps)
    get_json(tb, "summary", run="unet", tag="step_2")
    assert plugin._store.analysis(ctx, "", ref) is first
    assert len(steps) == size
    # Cached per tag: another tag is another analysis.
    _, other = plugin._step(ctx, "", "unet", "step_1")
    assert other is not first


def test_step_cache_is_bounded(tb):
    from tensorboard import context

    provider = tb.provider
    small = store.StepStore(provider, step_capacity=2)
    ctx = context.RequestContext()
    refs = small.list_steps(ctx, "")["unet"]
    assert len(refs) == 3
    analyses = [small.analysis(ctx, "", ref) for ref in refs]
    assert len(small._steps) == 2
    assert small.analysis(ctx, "", refs[2]) is analyses[2]  # most recent kept
    assert small.analysis(ctx, "", refs[0]) is not analyses[0]  # oldest evicted, recomputed
    assert len(small._steps) == 2
    # The plugin's own cache has a finite capacity too.
    assert 0 < tb.plugin._store._steps._capacity < 1000


def test_lru_cache_order_and_threads():
    cache = store.LRUCache(3)
    calls = []
    for key in "abcd":
        cache.get_or_compute(key, lambda k=key: calls.append(k) or k.upper())
    assert len(cache) == 3 and calls == list("abcd")
    cache.get_or_compute("b", lambda: calls.append("b!"))  # hit: refreshes b
    cache.get_or_compute("e", lambda: "E")  # evicts c (least recently used)
    assert cache.get_or_compute("b", lambda: "miss") == "B"
    assert cache.get_or_compute("c", lambda: "recomputed") == "recomputed"

    shared = store.LRUCache(8)
    errors = []

    def worker(n):
        try:
            for i in range(200):
                value = shared.get_or_compute(i % 16, lambda i=i: i % 16)
                assert value == i % 16
                assert len(shared) <= 8
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(shared) <= 8


def test_lru_cache_computes_a_key_once_for_concurrent_callers():
    """The page asks for summary, scopes, curve and graph of a cold step at once."""
    cache = store.LRUCache(4)
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow():
        calls.append(1)
        started.set()
        release.wait(10)
        return "step"

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compute("k", slow))) for _ in range(4)]
    threads[0].start()
    assert started.wait(10)
    for t in threads[1:]:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert results == ["step"] * 4 and calls == [1]

    # A failed computation is not cached, and the next caller tries again.
    def boom():
        raise RuntimeError("bad blob")

    with pytest.raises(RuntimeError):
        cache.get_or_compute("bad", boom)
    assert cache.get_or_compute("bad", lambda: "ok") == "ok"


def test_gc_paused_nests_and_restores():
    import gc

    assert gc.isenabled()
    with store.gc_paused():
        assert not gc.isenabled()
        with store.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with store.gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_a_device_as_the_runs_route_lists_it_names_its_space(tb):
    """The runs route lists a step's devices by their names (`/job:localhost/.../device:GPU:0`); a route given
    that name answers for the device's space, as the CLI's --device does (the step's default space where it
    is the device's, else the device's only one), and a device of no space is a 404 that lists the ids."""
    (step,) = [r for r in get_json(tb, "runs")["runs"] if r["run"] == "gpu"][0]["steps"]
    summary = get_json(tb, "summary", run="gpu", tag=step["tag"])
    ids = [device["id"] for device in summary["devices"]]
    for name in step["devices"]:
        by_name = get_json(tb, "scopes", run="gpu", tag=step["tag"], device=name)
        wanted = [i for i in ids if i.startswith(name.rsplit("device:", 1)[1] + "/")]
        by_id = get_json(tb, "scopes", run="gpu", tag=step["tag"], device=wanted[0])
        assert by_name == by_id, (name, wanted)
    assert get_json(tb, "scopes", run="gpu", tag=step["tag"], device="/gpu:0") == get_json(
        tb, "scopes", run="gpu", tag=step["tag"], device="GPU:0/GPU_0_bfc")
    code, response = get(tb, "scopes", run="gpu", tag=step["tag"], device="/device:GPU:7")
    assert code == 404 and "GPU:0/GPU_0_bfc" in response.get_data(as_text=True)


def test_a_record_written_again_under_its_key_is_read_again(tmp_path):
    """TensorBoard's Rust data server serves a step traced again under its tag and step (a script run again
    into its run's directory) under the same blob key, with a later wall time: the routes read it again
    (trial AD's had kept showing the first step). TensorBoard's in-process multiplexer keeps the first
    record, so the later one is served here as the Rust server serves it, through its provider."""
    import shutil

    from tensorboard.data import provider
    from tracedata import read_blob_bytes

    shutil.copytree(REPO / "demo_logs" / "growth", tmp_path / "rerun")
    app = tensorboard_app(tmp_path)
    again = {"now": False}
    unet_step = read_blob_bytes(REPO / "demo_logs", "unet_b2", "step_2")

    class Rewritten:
        def __init__(self, provider):
            self._provider = provider
            self._keys = set()

        def __getattr__(self, name):
            return getattr(self._provider, name)

        def read_blob_sequences(self, ctx, **kwargs):
            sequences = self._provider.read_blob_sequences(ctx, **kwargs)
            if not again["now"] or "step_2" not in sequences.get("rerun", {}):
                return sequences
            data = list(sequences["rerun"]["step_2"])
            data[-1] = provider.BlobSequenceDatum(step=data[-1].step, wall_time=data[-1].wall_time + 60,
                                                  values=data[-1].values)
            self._keys.add(data[-1].values[0].blob_key)
            return {**sequences, "rerun": {**sequences["rerun"], "step_2": data}}

        def read_blob(self, ctx, blob_key):
            return unet_step if again["now"] and blob_key in self._keys else self._provider.read_blob(ctx, blob_key=blob_key)

    app.plugin._store._provider = Rewritten(app.plugin._store._provider)
    first = get_json(app, "summary", run="rerun", tag="step_2")
    again["now"] = True
    second = get_json(app, "summary", run="rerun", tag="step_2")
    unet = get_json(tensorboard_app(REPO / "demo_logs"), "summary", run="unet_b2", tag="step_2")
    assert first["node_stat_count"] != unet["node_stat_count"] == second["node_stat_count"]
    assert second["devices"][0]["peak_rise_bytes"] == unet["devices"][0]["peak_rise_bytes"]


def test_a_record_tensorboard_cannot_hand_over_fails_its_step_alone(tmp_path):
    """TensorBoard's Rust data server refuses the blob keys of a run whose name holds a `"` (trial AF: the
    runs and default_step routes had failed with a 500, the whole tab with them). Such a record is its own
    step's failure: the runs list every run, the default step is another's, the step says why."""
    import shutil

    from tensorboard import errors

    for run in ("bad", "good"):
        shutil.copytree(REPO / "demo_logs" / "growth", tmp_path / run)
    app = tensorboard_app(tmp_path)

    class Refusing:
        def __init__(self, provider):
            self._provider = provider

        def __getattr__(self, name):
            return getattr(self._provider, name)

        def read_blob(self, ctx, blob_key):
            if '"bad"' in _decoded(blob_key):  # the multiplexer's blob keys are JSON naming the run, in base64
                raise errors.InvalidArgumentError("failed to parse blob key")
            return self._provider.read_blob(ctx, blob_key=blob_key)

    def _decoded(blob_key):
        import base64
        return base64.urlsafe_b64decode(blob_key + "=" * (-len(blob_key) % 4)).decode("utf-8", "replace")

    app.plugin._store._provider = Refusing(app.plugin._store._provider)
    runs = {r["run"]: r for r in get_json(app, "runs")["runs"]}
    assert set(runs) == {"bad", "good"} and all(s["devices"] == [] for s in runs["bad"]["steps"])
    assert all(s["devices"] for s in runs["good"]["steps"])
    assert get_json(app, "default_step")["run"] == "good"
    bad = get_json(app, "summary", run="bad", tag="step_3")
    assert bad["status"] == "corrupt" and "TensorBoard could not hand over this step's record" in bad["message"]
    assert get_json(app, "summary", run="good", tag="step_3")["status"] == "ok"
