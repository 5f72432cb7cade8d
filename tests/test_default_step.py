"""The `default_step` route: where the page opens when the user chose nothing before
(docs/http_api.md), through TensorBoard's WSGI app over the session logdir."""

from __future__ import annotations

import json

import pytest
from werkzeug.test import Client
from tracedata import REPO

PREFIX = "/data/plugin/memory/"


def _provider(logdir):
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    return data_provider.MultiplexerDataProvider(multiplexer, str(logdir))


def _app(logdir):
    """(werkzeug client, plugin) over `logdir`."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin

    from tb_memory_plugin.loader import MemoryPluginLoader

    provider = _provider(logdir)
    plugin = MemoryPluginLoader().load(base_plugin.TBContext(data_provider=provider, logdir=str(logdir)))
    assert plugin is not None
    return Client(application.TensorBoardWSGI([plugin], data_provider=provider)), plugin


@pytest.fixture(scope="module")
def app(logdir):
    return _app(logdir)


def get_json(client, route, **params):
    response = client.get(PREFIX + route, query_string=params)
    assert response.status_code == 200, (route, params, response.get_data(as_text=True)[:500])
    assert response.mimetype == "application/json"
    return json.loads(response.get_data(as_text=True))


def _latest_tag(run):
    """The page's pick of a run's step: first among those with devices (that hold step stats),
    highest step, then latest wall time, then last in tag order."""
    return max(enumerate(run["steps"]),
               key=lambda p: (bool(p[1]["devices"]), p[1]["step"], p[1]["wall_time"], p[0]))[1]["tag"]


def _peaks(client):
    """{run: (tag, default device, peak)} for each run's latest step that analyses ok, from `summary`."""
    peaks = {}
    for run in get_json(client, "runs")["runs"]:
        if not run["steps"]:
            continue
        tag = _latest_tag(run)
        summary = get_json(client, "summary", run=run["run"], tag=tag)
        if summary["status"] != "ok":
            continue
        device = next(d for d in summary["devices"] if d["id"] == summary["default_device"])
        peaks[run["run"]] = (tag, device["id"], device["peak_bytes"], device["peak_rise_bytes"])
    # Like with like: absolute peaks where every step has one, else every step's rise.
    absolute = all(peak is not None for _, _, peak, rise in peaks.values() if rise is not None)
    return {run: (tag, device, peak if absolute else rise) for run, (tag, device, peak, rise) in peaks.items()}


def test_default_step_is_the_largest_peak(app):
    client, _ = app
    body = get_json(client, "default_step")
    peaks = _peaks(client)
    assert len(peaks) >= 2, peaks  # the choice means something only between several steps
    run = max(peaks, key=lambda r: peaks[r][2])
    tag, device, peak = peaks[run]
    assert (body["run"], body["tag"], body["device"]) == (run, tag, device)
    assert body["reason"] == "largest_peak"
    assert body["peak_bytes"] == peak and body["peak_bytes"] > 0
    traced = [r for r in get_json(client, "runs")["runs"] if r["steps"]]
    assert body["run_count"] == body["compared_steps"] == len(traced)


def test_steps_with_and_without_a_baseline_are_ranked_by_their_rise(tmp_path):
    """One run's step has a baseline (100 MiB in use before it, +1 MiB), the other's none (+8 MiB): their
    rises are compared, not one's absolute bytes with the other's rise (trial V: a step of 214 MiB absolute
    chosen over its twin's +98 MiB rise, as 'the largest peak')."""
    import protos

    mib = 1 << 20

    def step(rise: int, reading: int) -> bytes:
        return protos.serialized({protos.CPU0: [
            protos.Node("a/MatMul", 0, 1, op="MatMul", outputs=[("cpu", rise)],
                        memory=[protos.Mem("cpu", [(0, rise)], bytes_in_use=reading)])]})
    protos.write_tagged_run_metadata(tmp_path / "with_start", "step_1", step(mib, 100 * mib + mib))
    protos.write_tagged_run_metadata(tmp_path / "relative", "step_1", step(8 * mib, 0))
    client, _ = _app(tmp_path)
    summaries = {run: get_json(client, "summary", run=run, tag="step_1")["devices"][0] for run in ("with_start", "relative")}
    assert summaries["with_start"]["peak_bytes"] == 101 * mib and summaries["relative"]["peak_bytes"] is None
    body = get_json(client, "default_step")
    assert (body["run"], body["peak_bytes"], body["absolute"]) == ("relative", 8 * mib, False)


def test_steps_that_do_not_analyse_are_never_chosen(app):
    client, _ = app
    body = get_json(client, "default_step")
    assert body["run"] not in ("corrupt", "notrace", "nomem")
    assert get_json(client, "summary", run=body["run"], tag=body["tag"])["status"] == "ok"


def test_compares_only_the_most_recent_runs(app):
    client, plugin = app
    from tensorboard import context

    runs = [r for r in get_json(client, "runs")["runs"] if r["steps"]]
    newest = max(runs, key=lambda r: max(s["wall_time"] for s in r["steps"]))
    body = plugin.default_step_impl(context.RequestContext(), "", max_runs=1)
    assert body["compared_steps"] == 1 and body["run_count"] == len(runs)
    if newest["run"] in _peaks(client):
        assert body["run"] == newest["run"]
    else:
        assert body["run"] is None


def test_answer_is_kept_until_the_steps_change(app, monkeypatch):
    client, plugin = app
    first = get_json(client, "default_step")
    calls = []
    analysis = plugin._store.analysis
    monkeypatch.setattr(plugin._store, "analysis", lambda *a: calls.append(a) or analysis(*a))
    assert get_json(client, "default_step") == first
    assert calls == [], "a second call with the same steps analyses nothing again"


def test_no_traced_steps_answers_nulls(tmp_path):
    client, _ = _app(tmp_path)
    body = get_json(client, "default_step")
    assert {k: body[k] for k in ("run", "tag", "device", "reason", "peak_bytes")} == dict.fromkeys(
        ("run", "tag", "device", "reason", "peak_bytes"))
    assert body["compared_steps"] == body["run_count"] == 0


def test_only_get(app):
    client, _ = app
    assert client.post(PREFIX + "default_step").status_code == 405


def test_a_runs_latest_step_is_a_marked_step_before_a_function_run():
    """The step a run opens on, for the CLI as for the page: a profile's marked `step_3` before its
    unmarked `run_3` (a fit's epoch-end iterator set-up, later in time and numbered alike, had been
    opened: a 3 KiB step whose what-if fails); a profile of function runs alone opens its last."""
    from tb_memory_plugin import store

    def ref(tag, step, wall):
        return store.StepRef("r", tag, store.PROFILE, step, wall)

    profiled = [ref("profile/s/run_3", 3, 30.0), ref("profile/s/step_2", 2, 10.0), ref("profile/s/step_3", 3, 20.0)]
    assert store.latest_step(profiled).tag == "profile/s/step_3"
    assert store.latest_step([ref("profile/s/run_1", 1, 1.0), ref("profile/s/run_2", 2, 2.0)]).tag == "profile/s/run_2"
    tf1 = [store.StepRef("r", "run_3", store.TAGGED_RUN_METADATA, 3, 30.0), store.StepRef("r", "step_2", store.TAGGED_RUN_METADATA, 2, 10.0)]
    assert store.latest_step(tf1).tag == "run_3"  # a TF1 tag is the user's own
    # A fit profiled across an epoch's end: the next epoch's `step_1` ran last, though `step_4` is
    # numbered higher; a TF1 run's steps by number whatever their wall times.
    across = [ref("profile/s/step_3", 3, 10.0), ref("profile/s/step_4", 4, 20.0), ref("profile/s/run_5", 5, 30.0),
              ref("profile/s/step_1", 1, 40.0)]
    assert store.latest_step(across).tag == "profile/s/step_1"
    rewritten = [store.StepRef("r", "step_9", store.TAGGED_RUN_METADATA, 9, 10.0),
                 store.StepRef("r", "step_2", store.TAGGED_RUN_METADATA, 2, 50.0)]
    assert store.latest_step(rewritten).tag == "step_9"


def test_a_profiles_steps_are_listed_as_they_ran():
    """A fit profiled across an epoch's end numbers its batches within each epoch: its steps are
    listed in the order they ran (`step_1`, `step_2`, the epoch-end `run_3`, then `step_0_2`), not by
    number, which had put the next epoch's `step_0_2` before this one's `step_1` and the function
    run first. Profiles stay apart by name, and a TF1 run's own tags by `tag_order`."""
    from tb_memory_plugin import store

    def profiled(session, tag, index):
        return store.StepRef("r", f"profile/{session}/{tag}", store.PROFILE, 0, 0.0, "p", index)

    def tagged(tag):
        return store.StepRef("r", tag, store.TAGGED_RUN_METADATA, 0, 0.0)

    refs = [profiled("s2", "step_1", 0), tagged("step_10"), profiled("s1", "step_0_2", 3),
            profiled("s1", "run_3", 2), tagged("step_9"), profiled("s1", "step_2", 1), profiled("s1", "step_1", 0)]
    assert [ref.tag for ref in sorted(refs, key=store.step_order)] == [
        "profile/s1/step_1", "profile/s1/step_2", "profile/s1/run_3", "profile/s1/step_0_2",
        "profile/s2/step_1", "step_9", "step_10"]
    # A profile that failed to read is one entry (index -1), placed by its name.
    failed = store.StepRef("r", "profile/s0", store.PROFILE, 0, 0.0, "p", -1)
    assert sorted(refs + [failed], key=store.step_order)[0] is failed


def test_the_runs_profiles_are_decoded_once_for_the_first_open(tmp_path, monkeypatch):
    """Listing the runs decodes every profile; the default step then analyses each run's latest step from
    the profiles kept (two kept had decoded trial AM's 21 profiled runs twice: 18 s before the page showed)."""
    import shutil

    from tb_memory_plugin import store
    from tb_memory_plugin.sources import xplane

    source = next((REPO / "demo_logs" / "keras_unet").glob("**/*.xplane.pb"))
    for k in range(5):
        session = tmp_path / f"fit_{k}" / "plugins" / "profile" / f"2026_11_28_10_00_0{k}"
        session.mkdir(parents=True)
        shutil.copy(source, session / source.name)
    decoded = []
    real = xplane.decode
    monkeypatch.setattr(xplane, "decode", lambda data: decoded.append(len(data)) or real(data))
    client, plugin = _app(tmp_path)
    runs = get_json(client, "runs")["runs"]
    assert len(runs) == 5 and len(decoded) == 5
    body = get_json(client, "default_step")
    assert body["run"] in {run["run"] for run in runs} and body["compared_steps"] == 5
    assert len(decoded) == 5, "the default step decoded the profiles again"
    # Within a budget of their files' bytes: beyond it the oldest go (the latest is kept whatever it weighs).
    assert plugin._store._profiles._budget == store.PROFILE_CACHE_BYTES


def test_lru_cache_keeps_its_values_within_a_budget():
    from tb_memory_plugin import store

    cache = store.LRUCache(10, weigh=lambda key: key[1], budget=100)
    for name, weight in (("a", 40), ("b", 40), ("c", 40)):
        cache.get_or_compute((name, weight), lambda name=name: name)
    assert len(cache) == 2 and cache.get_or_compute(("a", 40), lambda: "again") == "again"  # a went first
    cache.get_or_compute(("huge", 500), lambda: "huge")  # over the budget alone: kept, the rest go
    assert len(cache) == 1 and cache.get_or_compute(("huge", 500), lambda: "miss") == "huge"
    cache.get_or_compute(("d", 10), lambda: "d")
    assert len(cache) == 1 and cache.get_or_compute(("d", 10), lambda: "miss") == "d"
