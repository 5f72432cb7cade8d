"""Comparing two traced steps (issue 13): the engine, the `compare` route and `tb-memory diff`,
on the demo's real TensorFlow traces (U-Net and ResNet at batch 2 and 4)."""

from __future__ import annotations

import contextlib
import functools
import io
import json

import numpy as np
import pytest

from tracedata import REPO, demo_runs_with_bad_steps, engine_step, memory_app_client, read_blob_bytes
from tb_memory_plugin import cli, compare, compare_report, graph, names, report
from tb_memory_plugin.figures import ALLOCATED, AT_PEAK, CATEGORIES, FIGURES, OUTPUT, PARAMETERS
from tb_memory_plugin.scope_tree import build_tree

DEMO = REPO / "demo_logs"
PREFIX = "/data/plugin/memory/"
# (A, baseline B): a bigger batch, another step of the same run, another model.
PAIRS = [(("unet_b4", "step_3"), ("unet_b2", "step_3")),
         (("unet_b2", "step_1"), ("unet_b2", "step_3")),
         (("unet_b2", "step_3"), ("resnet9_b2", "step_3"))]


@functools.lru_cache(maxsize=None)
def demo_step(run: str, tag: str):
    step = engine_step(DEMO, run, tag)
    assert step.status == "ok", step.message
    return step


def demo_comparison(a, b, group="layer") -> compare.Comparison:
    return compare.compare_steps(demo_step(*a), demo_step(*b), group)


def demo_resident(run: str, tag: str):
    """The run graph's resident tensors in the step's default memory space, as the routes read them."""
    step = demo_step(run, tag)
    run_graph = graph.RunGraph.from_bytes(read_blob_bytes(DEMO, run, "__run_graph__", ("graphs",)))
    return report.space_resident(step, step.space(None), run_graph)


def _rows(table, names):
    return {name: i for i, name in enumerate(table.names) if name in names}


# -- the engine ------------------------------------------------------------------------------


def test_batch_4_against_batch_2_activations_grow_and_parameters_do_not():
    comparison = demo_comparison(("unet_b4", "step_3"), ("unet_b2", "step_3"))
    categories = comparison.categories()
    at_peak, allocated = categories.column(AT_PEAK), categories.column(ALLOCATED)
    activations = categories.names.index("activations")
    # Twice the samples, twice the activations held at the peak (and allocated).
    assert categories.a[activations, at_peak] == pytest.approx(2 * categories.b[activations, at_peak], rel=0.05)
    assert categories.delta[activations, allocated] > 0
    parameters = categories.names.index(CATEGORIES[PARAMETERS])
    assert categories.delta[parameters].tolist() == [0, 0]
    scopes = comparison.scopes
    variables = [i for i, name in enumerate(scopes.names) if name.endswith(("/weights", "/biases"))]
    assert len(variables) == 24  # 12 conv layers
    assert set(scopes.status[variables]) == {compare.SAME}
    layers = [i for i, name in enumerate(scopes.names)
              if name.startswith("shared_model/unet_") and name.count("/") == 1]
    assert len(layers) == 12
    assert (scopes.a[layers, 0] > scopes.b[layers, 0]).all() and (scopes.b[layers, 0] > 0).all()
    # One graph at two batch sizes: nothing is added or removed, and the peak grows.
    assert set(scopes.status) <= {compare.CHANGED, compare.SAME}
    assert comparison.peak_rise_delta_bytes > 0


@pytest.mark.parametrize("a, b", PAIRS)
@pytest.mark.parametrize("group", ["layer", "scope"])
def test_differences_add_up_to_the_difference_of_the_peak_rises(a, b, group):
    comparison = demo_comparison(a, b, group)
    rise_delta = demo_step(*a).space(None).peak_rise_bytes - demo_step(*b).space(None).peak_rise_bytes
    assert comparison.peak_rise_delta_bytes == rise_delta
    scopes = comparison.scopes
    top = comparison.children(0)
    assert int(scopes.delta[top, 0].sum()) == rise_delta
    assert int(comparison.op_types().delta[:, 0].sum()) == rise_delta
    assert int(comparison.categories().delta[:, 0].sum()) == rise_delta
    # Each side adds up to its own peak rise, and children to their parent on both sides, every figure.
    assert int(scopes.a[top, 0].sum()) == comparison.a.peak_rise_bytes
    assert int(scopes.b[top, 0].sum()) == comparison.b.peak_rise_bytes
    for row in range(len(scopes.names)):
        children = comparison.children(row)
        if children.size:
            assert (scopes.a[children].sum(axis=0) == scopes.a[row]).all(), scopes.names[row]
            assert (scopes.b[children].sum(axis=0) == scopes.b[row]).all(), scopes.names[row]


@pytest.mark.parametrize("a, b", PAIRS)
def test_each_side_holds_its_own_steps_figures(a, b):
    """Recomputed from each step alone: its scope tree, op types and categories."""
    comparison = demo_comparison(a, b)
    scopes = comparison.scopes
    columns = list(compare.COMPARED)
    for side, values, present in (("a", scopes.a, scopes.in_a), ("b", scopes.b, scopes.in_b)):
        space = getattr(comparison, side)
        tree = space.tree("layer")
        rows = _rows(scopes, set(tree.paths))
        assert len(rows) == len(tree.paths)
        for path, entry in tree.index.items():
            assert values[rows[path]].tolist() == tree.figures[entry, columns].tolist(), path
        assert int(present.sum()) >= len(tree.paths)
        op_types = comparison.op_types()
        side_values = getattr(op_types, side)
        counts = getattr(op_types, f"{side}_count")
        expected = {name: (count, row[columns].tolist()) for name, count, row in space.by_op_type()}
        got = {name: (int(counts[i]), side_values[i].tolist()) for i, name in enumerate(op_types.names)
               if getattr(op_types, f"in_{side}")[i]}
        assert got == expected
        categories = comparison.categories()
        assert [(name, *getattr(categories, side)[i].tolist()) for i, name in enumerate(categories.names)] == \
            space.by_category()


def test_a_step_against_itself_is_all_zeros():
    step = demo_step("unet_b4", "step_2")
    for group in ("layer", "scope"):
        comparison = compare.compare_steps(step, step, group)
        assert comparison.peak_rise_delta_bytes == 0
        for table in (comparison.scopes, comparison.op_types(), comparison.categories()):
            assert not table.delta.any()
            assert set(table.status) == {compare.SAME}
        row = comparison.row("shared_model/unet_01")
        assert not comparison.op_types(row).delta.any() and not comparison.categories(row).delta.any()


def test_step_1_against_step_3_of_one_run():
    """The same graph traced twice: same scopes and op types, the same peak rise at batch 2."""
    comparison = demo_comparison(("unet_b2", "step_1"), ("unet_b2", "step_3"))
    scopes = comparison.scopes
    assert set(scopes.status) <= {compare.CHANGED, compare.SAME}
    assert scopes.in_a.all() and scopes.in_b.all()
    assert comparison.op_types().in_a.all() and comparison.op_types().in_b.all()
    a, b = comparison.a, comparison.b
    assert comparison.peak_rise_delta_bytes == a.peak_rise_bytes - b.peak_rise_bytes
    # The steps were run separately: their timing differs even where their bytes do not.
    assert a.curve.peak_time_us != b.curve.peak_time_us


def test_another_model_adds_and_removes_scopes():
    comparison = demo_comparison(("unet_b2", "step_3"), ("resnet9_b2", "step_3"))
    scopes = comparison.scopes
    status = dict(zip(scopes.names, scopes.status))
    assert status["shared_model/unet_01"] == compare.ADDED
    removed = [name for name, s in status.items() if s == compare.REMOVED]
    assert removed
    for name in removed:
        row = scopes.names.index(name)
        assert not scopes.a[row].any() and scopes.entry_a[row] == -1 and scopes.entry_b[row] >= 0
    # Below a scope found in one step only, only that step has bytes.
    row = comparison.row("shared_model/unet_01")
    assert comparison.op_types(row).b.sum() == 0 and comparison.op_types(row).a.sum() > 0
    assert not comparison.categories(row).in_b.any()
    assert set(comparison.categories(row).status) == {compare.ADDED}
    # Said once: two models share few entries (the UX review compared them without a word).
    # Counted from the two trees' own paths (no renumbering between these two models), the root left out.
    a_paths = set(demo_step("unet_b2", "step_3").space(None).tree("layer").paths) - {""}
    b_paths = set(demo_step("resnet9_b2", "step_3").space(None).tree("layer").paths) - {""}
    shared = len(a_paths & b_paths) / min(len(a_paths), len(b_paths))
    assert comparison.shared_share == pytest.approx(shared) and shared < compare.SAME_MODEL_SHARE
    assert comparison.models_note.startswith(f"A and B share {int(shared * 100)}% of their scopes and nodes: two "
                                             "different models?")
    for same in (demo_comparison(("unet_b4", "step_3"), ("unet_b2", "step_3")),
                 demo_comparison(("unet_b2", "step_1"), ("unet_b2", "step_3"))):
        assert same.shared_share > 0.9 and same.models_note is None


def test_subtree_is_every_path_below_in_either_step():
    comparison = demo_comparison(("unet_b2", "step_3"), ("resnet9_b2", "step_3"))
    names = comparison.scopes.names
    for scope in ("", "shared_model", "shared_model/unet_01"):
        row = comparison.row(scope)
        below = {names[i] for i in comparison.subtree(row)}
        assert below == {name for name in names if name != scope and (not scope or name.startswith(scope + "/"))}


class _Space:
    """What a Comparison reads of a SpaceAnalysis, over a hand-built tree."""

    def __init__(self, paths: list[str], at_peak: list[int]) -> None:
        width = len(FIGURES) + len(CATEGORIES) + 1
        figures = np.zeros((len(paths), width), dtype=np.int64)
        figures[:, AT_PEAK] = at_peak
        figures[:, ALLOCATED] = at_peak
        figures[:, -1] = 1
        self._tree = build_tree(paths, np.arange(len(paths)), figures, np.arange(len(paths)), len(FIGURES))
        self.has_curve = True
        self.peak_rise_bytes = sum(at_peak)

    def tree(self, group):
        return self._tree


def test_a_node_that_is_a_scope_in_the_other_step_goes_to_its_self():
    """`x` is one node in A, a scope in B (node `x` and its child `x/z`): A's node sits beside B's
    `x/(self)`, so children still add up on both sides."""
    comparison = compare.Comparison(_Space(["x", "y"], [5, 1]), _Space(["x", "x/z", "y"], [2, 3, 1]))
    scopes = comparison.scopes
    row = {name: i for i, name in enumerate(scopes.names)}
    assert set(row) == {"", "x", "x/(self)", "x/z", "y"}
    assert scopes.kinds[row["x"]] == "scope" and scopes.kinds[row["x/(self)"]] == "self"
    assert scopes.a[row["x/(self)"], 0] == 5 and scopes.b[row["x/(self)"], 0] == 2
    assert scopes.status[row["x/(self)"]] == compare.CHANGED and scopes.status[row["x/z"]] == compare.REMOVED
    assert {scopes.names[i] for i in comparison.children(row["x"])} == {"x/(self)", "x/z"}
    assert scopes.a[comparison.children(row["x"]), 0].sum() == scopes.a[row["x"], 0] == 5
    assert scopes.b[comparison.children(row["x"]), 0].sum() == scopes.b[row["x"], 0] == 5
    assert scopes.delta[comparison.children(0), 0].sum() == comparison.peak_rise_delta_bytes == 0


def test_a_change_one_child_explains_is_listed_once():
    """By the child (`y/w`, not `y`), except a `(self)` that repeats its scope (`s`, not `s/(self)`)."""
    comparison = compare.Comparison(_Space(["x", "y/w", "s", "s/t"], [5, 4, 4, 1]),
                                    _Space(["x", "x/z", "y/w", "s", "s/t"], [2, 3, 1, 1, 1]))
    scopes = comparison.scopes
    ranked = scopes.ranked_by_change(comparison.subtree(0))
    assert [scopes.names[i] for i in ranked] == ["s", "s/(self)", "x/(self)", "x/z", "y", "y/w", "s/t", "x"]
    assert [scopes.names[i] for i in scopes.most_specific(ranked, AT_PEAK)] == [
        "s", "x/(self)", "x/z", "y/w", "s/t", "x"]


def test_the_routes_listing_marks_the_changes_a_child_repeats():
    """The compare route's listing (the page's table) marks the rows `tb-memory diff` leaves out, a scope
    whose change its child's explains: trial Z1's page had listed a GELU's scope, its `mul` and the `mul`'s
    (self) at one -2.00 MiB each. The unmarked rows are diff's."""
    from tb_memory_plugin import compare_report

    comparison = compare.Comparison(demo_step("unet_b4", "step_3").space(None),
                                    demo_step("unet_b2", "step_3").space(None))
    listing = compare_report.comparison_dict(comparison, {}, {})["scopes"]
    scopes = comparison.scopes
    listed = [scopes.names[i] for i in scopes.most_specific(scopes.ranked_by_change(comparison.subtree(0)), AT_PEAK)]
    by = {row["name"]: row["listed_by"] for row in listing if "listed_by" in row}
    assert by and not set(by) & set(listed)
    assert [row["name"] for row in listing if "listed_by" not in row] == listed
    names = [row["name"] for row in listing]
    for name, lister in by.items():  # a (self) by its scope, a scope by its child
        assert lister in names and (lister == name.rsplit("/", 1)[0] if name.endswith("/(self)")
                                    else lister.rsplit("/", 1)[0] == name), (name, lister)
    # Cut between a scope and the child that explains it (the review's `top` 44 of this comparison), the
    # scope is not said to be listed by a row the listing does not hold: its change shows by it.
    for top in range(1, len(listing)):
        cut = compare_report.comparison_dict(comparison, {}, {}, top=top)["scopes"]
        held = {row["name"] for row in cut}
        assert all(row["listed_by"] in held for row in cut if "listed_by" in row)


def test_a_change_one_child_nearly_all_explains_is_listed_once():
    """A batch norm's scope and its `mul_1`, +2,562,560 and +2,562,304 B: the child explains its
    scope's change (within 1%), listed once, by the child (a stranger's diff listed the same +2.4 MiB
    three times). A child with half its scope's change explains nothing: both are listed."""
    a = _Space(["bn/batchnorm/mul_1", "bn/batchnorm/add", "half/p", "half/q"], [2_562_304 + 1000, 256 + 10, 600, 600])
    b = _Space(["bn/batchnorm/mul_1", "bn/batchnorm/add", "half/p", "half/q"], [1000, 10, 100, 100])
    comparison = compare.Comparison(a, b)
    scopes = comparison.scopes
    ranked = scopes.ranked_by_change(comparison.subtree(0))
    listed = [scopes.names[i] for i in scopes.most_specific(ranked, AT_PEAK)]
    assert "bn/batchnorm/mul_1" in listed and "bn" not in listed and "bn/batchnorm" not in listed
    assert {"half", "half/p", "half/q"} <= set(listed)
    # Down a chain the 1% is the chain's top's: +1000, +991, +982 lists +991 for the top, and +982.
    a = _Space(["g/p/c", "g/p/s", "g/x"], [1082, 9, 59])
    b = _Space(["g/p/c", "g/p/s", "g/x"], [100, 0, 50])
    comparison = compare.Comparison(a, b)
    scopes = comparison.scopes
    ranked = scopes.ranked_by_change(comparison.subtree(0))
    assert [int(scopes.delta[i, 0]) for i in ranked[:3]] == [1000, 991, 982]
    assert [scopes.names[i] for i in scopes.most_specific(ranked, AT_PEAK)] == ["g/p", "g/p/c", "g/p/s", "g/x"]
    # One more below: +973 is within 1% of +982, listed, so it stands for that one (two rows, not three).
    a = _Space(["g/p/c/d", "g/p/c/e", "g/p/s", "g/x"], [1073, 9, 9, 59])
    b = _Space(["g/p/c/d", "g/p/c/e", "g/p/s", "g/x"], [100, 0, 0, 50])
    comparison = compare.Comparison(a, b)
    scopes = comparison.scopes
    ranked = scopes.ranked_by_change(comparison.subtree(0))
    assert [int(scopes.delta[i, 0]) for i in ranked[:4]] == [1000, 991, 982, 973]
    listed = [scopes.names[i] for i in scopes.most_specific(ranked, AT_PEAK)]
    assert listed[:2] == ["g/p", "g/p/c/d"] and "g/p/c" not in listed and "g" not in listed


def test_steps_that_cannot_be_compared():
    step = demo_step("unet_b2", "step_3")
    with pytest.raises(compare.NotComparable, match="no memory space"):
        compare.compare_steps(step, step, b_space="GPU:0/GPU_0_bfc")
    from tb_memory_plugin import analysis

    with pytest.raises(compare.NotComparable, match="step B cannot be analysed"):
        compare.compare_steps(step, analysis.failed_step("corrupt", "bad bytes"))


# -- the route -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    """A werkzeug client over TensorBoard's WSGI app: the demo runs, a corrupt step, a GPU step."""
    return memory_app_client(demo_runs_with_bad_steps(tmp_path_factory.mktemp("compare_logs")))


def get_json(tb, expect=200, **params):
    response = tb.get(PREFIX + "compare", query_string=params)
    assert response.status_code == expect, (params, response.get_data(as_text=True)[:500])
    assert response.mimetype == "application/json"
    return json.loads(response.get_data(as_text=True))


def _expected(a, b, group="layer", scope="", top=50):
    comparison = demo_comparison(a, b, group)
    sides = [compare_report.side_dict(step.space(None), run, tag, int(tag.split("_")[1]), "run_metadata")
             for (run, tag), step in ((a, demo_step(*a)), (b, demo_step(*b)))]
    start_change = compare.start_change(comparison, demo_resident(*a), demo_resident(*b))
    return json.loads(json.dumps(compare_report.comparison_dict(comparison, *sides, scope, top, start_change)))


@pytest.mark.parametrize("group", ["layer", "scope"])
def test_route_equals_the_engine(tb, group):
    body = get_json(tb, run="unet_b4", tag="step_3", against_run="unet_b2", against_tag="step_3", group=group)
    assert body == _expected(("unet_b4", "step_3"), ("unet_b2", "step_3"), group)
    assert body["a"]["run"] == "unet_b4" and body["b"]["run"] == "unet_b2"
    assert body["a"]["id"] == body["b"]["id"] == "CPU:0/mklcpu"
    delta = body["peak_rise_delta_bytes"]
    assert delta == body["a"]["peak_rise_bytes"] - body["b"]["peak_rise_bytes"] > 0
    assert body["scope"]["name"] == "" and body["scope"]["delta_bytes"] == delta
    assert sum(c["delta_bytes"] for c in body["children"]) == delta
    assert sum(o["delta_bytes"] for o in body["op_types"]) == delta
    assert sum(c["delta_bytes"] for c in body["categories"]) == delta
    assert [c["name"] for c in body["categories"]] == list(CATEGORIES)
    assert len(body["scopes"]) == 50 < body["scope_count"]
    changes = [abs(s["delta_bytes"]) for s in body["scopes"]]
    assert changes == sorted(changes, reverse=True)


def test_route_says_what_the_start_gained(tb):
    """The start's change, which no listing of the peak rise holds, split by the runs' graphs as the
    summary's resident figures split each start; null where a side has no start (no baseline)."""
    body = get_json(tb, run="unet_b4", tag="step_3", against_run="unet_b2", against_tag="step_3")
    change = body["start_change"]
    assert change["delta_bytes"] == body["a"]["start_bytes"] - body["b"]["start_bytes"] != 0
    assert sum(part["delta_bytes"] for part in change["parts"]) == change["delta_bytes"]
    a_res, b_res = demo_resident("unet_b4", "step_3"), demo_resident("unet_b2", "step_3")
    inputs = {part["name"]: part["delta_bytes"] for part in change["parts"]}["inputs"]
    assert inputs == a_res.in_start()[2] - b_res.in_start()[2] > 0  # twice the batch fed
    assert "parameters" not in {part["name"] for part in change["parts"]}  # one model: the same weights
    assert change["counts_from_bytes"] == 256 * 1024  # mklcpu's starts: the parts count what they count
    assert body["a"]["start_counts_from_bytes"] == body["b"]["start_counts_from_bytes"] == 256 * 1024
    other = get_json(tb, run="unet_b2", tag="step_3", against_run="gpu", against_tag="step_1",
                     against_device="CPU:0/cpu")
    assert other["b"]["start_bytes"] is None and other["start_change"] is None


def test_a_start_of_mklcpus_larger_blocks_is_split_by_the_tensors_it_counts():
    """mklcpu's start counts its requests of 256 KiB and more: the resident split reads it against the
    model's tensors of that size (the U-Net's small biases and kernels are in no reading), and says so."""
    resident = demo_resident("unet_b2", "step_3")
    least = 256 * 1024
    assert resident.counts_from == least
    params, slots, fed = resident.in_start()
    tensors = resident.tensors
    assert params == sum(t.bytes for t in tensors if t.kind != "slot" and t.bytes >= least) < resident.param_bytes
    assert slots == sum(t.bytes for t in tensors if t.kind == "slot" and t.bytes >= least) < resident.slot_bytes
    assert 0 < fed <= resident.fed_bytes
    assert resident.other_bytes == resident.start_bytes - params - slots - fed
    step = demo_step("unet_b2", "step_3")
    summary = report.device_summary(step.space(None), "layer", resident=resident)
    assert summary["resident"]["other_bytes"] == resident.other_bytes
    assert "requests of 256.0 KiB and more" in summary["resident"]["counted_note"]


def test_route_under_a_scope(tb):
    params = dict(run="unet_b4", tag="step_3", against_run="unet_b2", against_tag="step_3")
    body = get_json(tb, scope="shared_model/unet_01", top="5", **params)
    assert body == _expected(("unet_b4", "step_3"), ("unet_b2", "step_3"), scope="shared_model/unet_01", top=5)
    scope = body["scope"]
    assert scope["kind"] == "scope" and scope["parent"] == "shared_model" and scope["status"] == "changed"
    for key in ("a_bytes", "b_bytes", "delta_bytes", "a_allocated_bytes", "delta_output_bytes"):
        assert sum(c[key] for c in body["children"]) == scope[key], key
    assert all(c["parent"] == "shared_model/unet_01" for c in body["children"])
    assert len(body["scopes"]) == 5 and all(s["name"].startswith("shared_model/unet_01/") for s in body["scopes"])
    # Op types and categories under the scope add up to it.
    assert sum(o["delta_bytes"] for o in body["op_types"]) == scope["delta_bytes"]
    assert sum(c["a_allocated_bytes"] for c in body["categories"]) == scope["a_allocated_bytes"]


def test_route_across_models_and_devices(tb):
    body = get_json(tb, run="unet_b2", tag="step_3", against_run="resnet9_b2", against_tag="step_3")
    status = {c["name"]: c["status"] for c in body["children"]}
    assert status["shared_model"] == "added" and status["generator"] == "removed"
    assert sum(c["delta_bytes"] for c in body["children"]) == body["peak_rise_delta_bytes"]
    plain = get_json(tb, run="unet_b2", tag="step_3", against_run="gpu", against_tag="step_1",
                     against_device="CPU:0/cpu")
    assert plain["b"]["baseline"] == "none" and plain["b"]["peak_bytes"] is None  # `cpu`: no readings
    gpu = get_json(tb, run="gpu", tag="step_1", against_run="unet_b2", against_tag="step_3",
                   device="GPU:0/cuda_host_bfc")
    assert gpu["a"]["id"] == "GPU:0/cuda_host_bfc" and gpu["b"]["id"] == "CPU:0/mklcpu"
    assert gpu["a"]["baseline"] == "none" and gpu["a"]["peak_bytes"] is None
    default = get_json(tb, run="unet_b2", tag="step_3", against_run="gpu", against_tag="step_1")
    assert default["b"]["id"] == "GPU:0/GPU_0_bfc"
    named = get_json(tb, run="unet_b2", tag="step_3", against_run="gpu", against_tag="step_1",
                     against_device="CPU:0/cpu")
    assert named["b"]["id"] == "CPU:0/cpu"


@pytest.mark.parametrize("params, code, words", [
    ({"against_tag": None}, 400, "against_tag"),
    ({"against_run": ""}, 400, "against_run"),
    ({"group": "nope"}, 400, "group"),
    ({"top": "0"}, 400, "top"),
    ({"top": "x"}, 400, "integer"),
    ({"against_run": "nope"}, 404, "unknown run 'nope'"),
    ({"against_tag": "step_9"}, 404, "unknown tag 'step_9'"),
    ({"device": "GPU:0/GPU_0_bfc"}, 404, "unknown device"),
    ({"against_device": "nope"}, 404, "unknown device"),
    ({"scope": "shared_model/nope"}, 404, "unknown scope"),
    ({"against_run": "corrupt", "against_tag": "step_1"}, 422, "corrupt step_1"),
])
def test_route_errors(tb, params, code, words):
    query = {"run": "unet_b4", "tag": "step_3", "against_run": "unet_b2", "against_tag": "step_3", **params}
    body = get_json(tb, expect=code, **{k: v for k, v in query.items() if v is not None})
    assert words in body["error"]


# -- tb-memory diff ----------------------------------------------------------------------------


def _diff(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["diff", str(DEMO), *argv])
    return code, out.getvalue(), err.getvalue()


def test_diff_text_shows_both_peaks_and_what_grew():
    code, out, err = _diff("--run", "unet_b4", "--against", "unet_b2", "--top", "3")
    assert code == 0, err
    a, b = demo_step("unet_b4", "step_3").space(None), demo_step("unet_b2", "step_3").space(None)
    assert out.startswith("== unet_b4 / step_3 (step 3) against unet_b2 / step_3 (step 3)\n")
    for side, space in (("A", a), ("B", b)):
        assert (f"   {side} CPU:0/mklcpu: peak {cli.format_bytes(space.start_bytes + space.peak_rise_bytes)} at "
                f"{space.curve.peak_time_us / 1000:.3f} ms, rise {cli.format_bytes(space.peak_rise_bytes)}") in out
    assert f"peak rise +{cli.format_bytes(a.peak_rise_bytes - b.peak_rise_bytes)} (A - B)" in out
    increases = out.split("scopes at peak (group=layer), largest increases:\n")[1].split("   scopes")[0]
    lines = increases.splitlines()
    assert len(lines) == 3 and "shared_model" in lines[0] and lines[0].strip().startswith("+")
    assert "scopes at peak (group=layer), largest decreases:" in out
    assert "op types at peak, largest increases:" in out and "BiasAdd" in out
    assert "activations" in out.split("categories at peak (heuristic):")[1]


def test_diff_json():
    code, out, err = _diff("--run", "unet_b4", "--tag", "step_3", "--against", "unet_b2:step_3", "--json")
    assert code == 0, err
    body = json.loads(out)
    expected = _expected(("unet_b4", "step_3"), ("unet_b2", "step_3"), top=None)
    assert body == expected
    assert {"a", "b", "peak_rise_delta_bytes", "scopes", "op_types", "categories"} <= set(body)
    assert len(body["scopes"]) == body["scope_count"]  # every entry, not --top
    for row in body["scopes"]:
        assert {"name", "a_bytes", "b_bytes", "delta_bytes", "status"} <= set(row)
        assert row["delta_bytes"] == row["a_bytes"] - row["b_bytes"]
    top_level = [s for s in body["scopes"] if s["parent"] == ""]
    assert sum(s["delta_bytes"] for s in top_level) == body["peak_rise_delta_bytes"]


def test_diff_reads_a_keras_runs_profiled_step_by_default():
    """Without a tag, a run's latest step that holds step stats (not Keras' later `batch_4` graph record)."""
    code, out, err = _diff("--run", "keras_unet/train", "--against", "unet_b2", "--top", "2")
    assert code == 0, err
    assert out.startswith("== keras_unet/train / profile/") and "/step_3 (step 3) against unet_b2 / step_3" in out


def test_diff_within_one_run_and_against_itself():
    code, out, err = _diff("--run", "unet_b2", "--tag", "step_1", "--against", ":step_3", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert (body["a"]["tag"], body["b"]["run"], body["b"]["tag"]) == ("step_1", "unet_b2", "step_3")
    code, out, _ = _diff("--run", "unet_b2", "--against", "unet_b2", "--json")
    body = json.loads(out)
    assert body["a"]["tag"] == body["b"]["tag"] == "step_3"  # the latest step on both sides
    assert body["peak_rise_delta_bytes"] == 0
    assert {s["status"] for s in body["scopes"]} == {"same"}
    assert not any(s["delta_bytes"] or s["delta_allocated_bytes"] or s["delta_output_bytes"] for s in body["scopes"])
    code, out, _ = _diff("--run", "unet_b2", "--against", "unet_b2")
    assert out.count("     (none)") == 4


@pytest.mark.parametrize("argv, words", [
    (["--run", "nope", "--against", "unet_b2"], "no run 'nope' in"),
    (["--run", "unet_b2", "--tag", "step_9", "--against", "unet_b4"], "no tag 'step_9' in run 'unet_b2'"),
    (["--run", "unet_b2", "--against", "unet_b4:step_9"], "no tag 'step_9' in run 'unet_b4'"),
    (["--run", "unet_b2", "--against", "nope:step_1"], "no run 'nope' in"),
    (["--run", "unet_b2", "--against", "unet_b4", "--device", "GPU"], "no device of unet_b2/step_3 matches 'GPU'"),
])
def test_diff_failures_are_one_line(argv, words):
    code, out, err = _diff(*argv)
    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tb-memory: ") and words in lines[0], err


# -- one model built twice: B numbered apart from A ------------------------------------------


def _write_model_built_twice(logdir) -> None:
    """One tf.Graph holding the same model built twice, as a script or notebook that builds it
    again does: TensorFlow numbers the second build's scopes anew (`model_1`, `head_2`,
    `gradients_1`, `Adam_1`, root ops `sub_1`). Run `first` traces the first build's training
    step, run `again` the second's, at the same batch; both write the one graph."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    builds = []
    with graph.as_default():
        tf1.set_random_seed(0)
        for _ in range(2):
            x = tf1.placeholder(tf.float32, [16, 32], name="x")
            y = tf1.placeholder(tf.float32, [16, 8], name="y")
            h = x
            with tf1.variable_scope(None, default_name="model"):
                with tf1.variable_scope(None, default_name="dense"):
                    w = tf1.get_variable("kernel", [32, 64])
                    h = tf.nn.relu(tf.matmul(h, w))
            for width in (48, 8):  # at the root, numbered across builds as Keras numbers layers
                with tf1.variable_scope(None, default_name="head"):
                    w = tf1.get_variable("kernel", [h.shape[-1], width])
                    h = tf.nn.relu(tf.matmul(h, w))
            loss = tf.reduce_mean(tf.square(h - y))
            train = tf1.train.AdamOptimizer(1e-3).minimize(loss)
            builds.append((x, y, train, loss))
        init = tf1.global_variables_initializer()
    feeds = {}
    rng = np.random.RandomState(0)
    for x, y, _, _ in builds:
        feeds[x], feeds[y] = rng.rand(16, 32).astype(np.float32), rng.rand(16, 8).astype(np.float32)
    with models._session(graph) as session:
        session.run(init)
        for run, (x, y, train, loss) in zip(("first", "again"), builds):
            session.run(train, feed_dict={x: feeds[x], y: feeds[y]})  # warm-up
            metadata = tf1.RunMetadata()
            session.run([train, loss], feed_dict={x: feeds[x], y: feeds[y]},
                        options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
            with graph.as_default():
                writer = tf1.summary.FileWriter(str(logdir / run))
            writer.add_graph(graph)
            writer.add_run_metadata(metadata, "step_1", global_step=1)
            writer.close()


@pytest.fixture(scope="module")
def built_twice(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("built_twice")
    _write_model_built_twice(logdir)
    return logdir


def test_a_model_built_again_is_matched_by_its_numbers(built_twice):
    again, first = engine_step(built_twice, "again", "step_1"), engine_step(built_twice, "first", "step_1")
    for group in ("layer", "scope"):
        comparison = compare.compare_steps(again, first, group)
        renamed = dict(comparison.renumbered)
        assert renamed["model"] == "model_1" and renamed["head"] == "head_2" and renamed["head_1"] == "head_3"
        if group == "scope":
            assert renamed["gradients"] == "gradients_1" and renamed["Adam"] == "Adam_1"
        scopes = comparison.scopes
        status = dict(zip(scopes.names, scopes.status))
        for layer in ("model_1", "model_1/dense", "head_2", "head_3"):  # in both steps, by A's names
            row = scopes.names.index(layer)
            assert scopes.in_a[row] and scopes.in_b[row], (group, layer, status[layer])
            # The same layer at the same batch allocates the same bytes in both builds.
            assert scopes.delta[row, scopes.column(ALLOCATED)] == 0, (group, layer)
        assert not any(name == "model" or name.startswith(("model/", "head/", "head_1/")) for name in scopes.names)
        # Nothing is in one step only but the runtime's plumbing (`_retval_Mean_0_0`, `_retval_Mean_1_0_0`).
        one_sided = {scopes.names[i] for i in np.flatnonzero(scopes.in_a != scopes.in_b).tolist()}
        assert all(name.startswith("(plumbing)/") for name in one_sided), (group, sorted(one_sided))
        assert scopes.b_own[scopes.names.index("model_1/dense")] == "model/dense"
        top = comparison.children(0)
        assert scopes.delta[top, 0].sum() == comparison.peak_rise_delta_bytes
        assert comparison.a.tree(group).figures[0, ALLOCATED] == scopes.a[top, scopes.column(ALLOCATED)].sum()
        assert comparison.b.tree(group).figures[0, ALLOCATED] == scopes.b[top, scopes.column(ALLOCATED)].sum()


def test_a_diff_of_a_model_built_again_says_how_it_matched_names(built_twice):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["diff", str(built_twice), "--run", "again", "--against", "first", "--group", "scope"])
    assert code == 0, err.getvalue()
    line = next(line for line in out.getvalue().splitlines() if "numbered as A's" in line)
    assert line.endswith(" more")
    assert line.split(": ", 1)[1].startswith(("model -> model_1", "gradients -> gradients_1"))  # the largest
    with contextlib.redirect_stdout(out := io.StringIO()):
        assert cli.main(["diff", str(built_twice), "--run", "again", "--against", "first", "--json"]) == 0
    body = json.loads(out.getvalue())
    assert {"b": "model", "a": "model_1"} in body["renumbered"]
    row = next(row for row in body["scopes"] if row["name"] == "model_1/dense")
    assert row["b_name"] == "model/dense" and row["status"] in ("same", "changed")


def test_steps_named_alike_are_not_renumbered():
    for a, b in PAIRS:
        comparison = demo_comparison(a, b)
        assert comparison.renumbered == [] and comparison.scopes.b_own == {}


@pytest.mark.parametrize("a_names, b_names, renames", [
    (["dense", "dense_1"], ["dense_2", "dense_3"], {"dense_2": "dense", "dense_3": "dense_1"}),
    (["model"], ["model_1"], {"model_1": "model"}),
    (["dense", "dense_1"], ["dense_1", "dense_2"], {}),  # a number in common: the names are the names
    (["dense", "dense_1"], ["dense_2"], {}),  # not as many
    (["unet_01", "unet_02"], ["unet_03", "unet_04"], {}),  # leading zeros: names, not numbers
    (["conv", "pool_1"], ["conv_4", "pool"], {"conv_4": "conv", "pool": "pool_1"}),
    # An op's gradient scope is numbered before its `_grad`.
    (["Square_1_grad", "Square_1"], ["Square_grad", "Square"], {"Square_grad": "Square_1_grad", "Square": "Square_1"}),
    (["dense_grad"], ["dense_grad_1"], {"dense_grad_1": "dense_grad"}),
])
def test_sibling_renumbering(a_names, b_names, renames):
    assert names.sibling_renumbering(a_names, b_names) == renames


def test_renumbering_goes_down_from_the_root_and_needs_no_parents_listed():
    a = ["sequential/dense", "sequential/dense_1", "sequential/dropout", "loss"]
    b = ["sequential_1/dense_2", "sequential_1/dense_3", "sequential_1/dropout_1", "loss"]
    assert names.renumbering(a, b) == {"sequential_1/dense_2": "sequential/dense", "sequential_1/dense_3":
                                       "sequential/dense_1", "sequential_1/dropout_1": "sequential/dropout"}
    assert names.renumbering(a, a) == {} and names.renumbering(a, ["other/dense_9"]) == {}
    # Paths with empty components (a scope tree keeps `/x_1`, `a//b`) are renamed component by component.
    assert names.renumbering(["/x", "a//b"], ["/x_1", "a//b_3", "a//c"]) == {"/x_1": "/x", "a//b_3": "a//b"}


def test_ops_in_a_scope_are_not_renumbered():
    """TensorFlow numbers ops within their scope, alike in a model built again: under a scope,
    `MatMul` and `MatMul_1` are two ops (a GAN's discriminator gradients: its input's in the
    generator's step, its weights' in its own), not one numbered anew. Scopes there still are
    (Keras numbers layers across a process), and so are ops at the root (a loss built again)."""
    def renumbering(a, b):
        return names.renumbering(a, b, leaves_are_ops=True)

    a = ["d/MatMul_grad/MatMul", "d/MatMul_grad/Shape"]
    b = ["d/MatMul_grad/MatMul_1", "d/MatMul_grad/Shape"]
    assert renumbering(a, b) == {}
    assert names.renumbering(a, b) == {"d/MatMul_grad/MatMul_1": "d/MatMul_grad/MatMul"}  # leaves as layers (the fit)
    assert renumbering(["seq/dense/MatMul"], ["seq/dense_2/MatMul"]) == {"seq/dense_2/MatMul": "seq/dense/MatMul"}
    assert renumbering(["Mean", "model/x"], ["Mean_1", "model_1/x"]) == {"Mean_1": "Mean", "model_1/x": "model/x"}
    # Ops a scope of the tree's own groups are root names (`(feeds)/x_1`: a placeholder built again).
    assert renumbering(["(feeds)/x", "m/a"], ["(feeds)/x_1", "m/a"]) == {"(feeds)/x_1": "(feeds)/x"}
    # Below a scope renamed, its ops keep their own names (the same ops, built again).
    assert renumbering(["m/MatMul", "m/MatMul_1"], ["m_1/MatMul_1"]) == {"m_1/MatMul_1": "m/MatMul_1"}


def _write_gan(logdir) -> None:
    """A GAN's two train ops in one graph and one run, traced as `d_step_1` (the discriminator's,
    Adam) and `g_step_1` (the generator's, momentum), after a warm-up of each."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    batch, noise, pixels = 64, 32, 256

    def mlp(x, sizes, name, reuse=False):
        with tf1.variable_scope(name, reuse=reuse):
            for i, n in enumerate(sizes):
                w = tf1.get_variable(f"dense_{i}/kernel", [x.shape[-1], n])
                x = tf.matmul(x, w)
                if i < len(sizes) - 1:
                    x = tf.nn.leaky_relu(x)
        return x

    with graph.as_default():
        z = tf1.placeholder(tf.float32, (batch, noise), name="z")
        real = tf1.placeholder(tf.float32, (batch, pixels), name="real")
        fake = tf.tanh(mlp(z, [128, pixels], "generator"))
        d_real, d_fake = mlp(real, [512, 1], "discriminator"), mlp(fake, [512, 1], "discriminator", reuse=True)
        ce = tf.nn.sigmoid_cross_entropy_with_logits
        d_loss = tf.reduce_mean(ce(labels=tf.ones_like(d_real), logits=d_real)
                                + ce(labels=tf.zeros_like(d_fake), logits=d_fake))
        g_loss = tf.reduce_mean(ce(labels=tf.ones_like(d_fake), logits=d_fake))
        variables = tf1.trainable_variables()
        d_train = tf1.train.AdamOptimizer(1e-4).minimize(d_loss, var_list=[v for v in variables if "disc" in v.name])
        g_train = tf1.train.MomentumOptimizer(1e-3, 0.9).minimize(g_loss, var_list=[v for v in variables if "gen" in v.name])
        init = tf1.global_variables_initializer()
    rng = np.random.RandomState(0)
    feed = {z: rng.randn(batch, noise).astype(np.float32), real: rng.rand(batch, pixels).astype(np.float32)}
    with models._session(graph) as session:
        session.run(init)
        writer = tf1.summary.FileWriter(str(logdir / "gan"), graph)
        for tag, train in (("d_step_1", d_train), ("g_step_1", g_train)):
            session.run(train, feed_dict=feed)  # warm-up
            metadata = tf1.RunMetadata()
            session.run(train, feed_dict=feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
            writer.add_run_metadata(metadata, tag, global_step=1)
        writer.close()


def test_two_train_ops_of_one_run_are_compared_by_their_own_names(tmp_path):
    """The generator's step against the discriminator's, one graph: no name is taken for another.
    The discriminator's weight gradients (`MatMul_1` of each `MatMul_grad`) run in its own step
    only, and are listed as removed with their bytes; its input gradients (`MatMul`) in both (a
    trial's diff had read B's `MatMul_1` as A's `MatMul`: -1.5 MiB on an op that held nothing)."""
    _write_gan(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["diff", str(tmp_path), "--run", "gan", "--tag", "g_step_1", "--against", ":d_step_1",
                         "--group", "scope", "--json"]) == 0
    body = json.loads(out.getvalue())
    assert body["renumbered"] == []
    rows = {row["name"]: row for row in body["scopes"]}
    weight_grads = [name for name in rows if name.endswith("/MatMul_grad/MatMul_1") and "discriminator" in name]
    assert weight_grads, sorted(rows)
    for name in weight_grads:
        if "gradients/discriminator_1/" in name or "gradients/discriminator/" in name:
            row = rows[name]
            assert row["status"] in ("removed", "same"), row  # in the discriminator's step (B) alone, or in neither
            assert row["status"] != "removed" or row["b_allocated_bytes"] > 0
    assert any(rows[name]["status"] == "removed" for name in weight_grads)
    # The same engine renumbers where the names are not one graph's (two runs): still not an op for another.
    d_step, g_step = engine_step(tmp_path, "gan", "d_step_1"), engine_step(tmp_path, "gan", "g_step_1")
    across = compare.compare_steps(g_step, d_step, "scope")
    assert not any(b.rpartition("/")[2].startswith("MatMul") for b, _ in across.renumbered), across.renumbered


def test_a_comparison_with_a_path_under_an_empty_scope():
    comparison = compare.Comparison(_Space(["/x", "y"], [5, 1]), _Space(["/x_1", "y"], [2, 1]))
    assert comparison.renumbered == [("/x_1", "/x")]
    scopes = comparison.scopes
    assert "/x_1" not in scopes.names and scopes.b_own[scopes.names.index("/x")] == "/x_1"
    assert scopes.delta[comparison.children(0), 0].sum() == comparison.peak_rise_delta_bytes == 3


def test_the_same_requests_of_several_gib_are_compared_without_overflow():
    """A 6 GiB request given a 7 GiB chunk in one step and 6.5 GiB in the other: the allocator's, said so
    (the change and the chunks' change had been multiplied, which wraps past int64 at a few GiB each)."""
    gib = 1 << 30
    a = np.array([[7 * gib, 7 * gib, 6 * gib]], dtype=np.int64)  # at peak, allocated, output
    b = np.array([[6 * gib + gib // 2, 6 * gib + gib // 2, 6 * gib]], dtype=np.int64)
    table = compare.Table(["big"], (AT_PEAK, ALLOCATED, OUTPUT), a, b, np.array([True]), np.array([True]),
                          np.array([True, True, True]))
    assert table.same_requests.tolist() == [True]
    big = np.array([[4 * gib, 4 * gib, 3 * gib]], dtype=np.int64)  # -3.5 GiB x -3 GiB would have wrapped
    table = compare.Table(["big"], (AT_PEAK, ALLOCATED, OUTPUT), big, big + np.array([[-3 * gib, -3 * gib, 0]]),
                          np.array([True]), np.array([True]), np.array([True, True, True]))
    assert table.same_requests.tolist() == [True]


def test_the_same_requests_given_other_chunks_are_said_to_be_the_allocators(tmp_path, capsys):
    """A BFC allocator gives one 8 MiB request an 8 MiB chunk in one step and 14.5 MiB in another (a
    trial's `predict`): the row's output is the same on both sides and its allocated bytes differ. The
    diff says so (`same_requests`), rather than showing the change as the model's."""
    import protos

    mib = 1024 * 1024

    def step(chunk, sqrt_chunk, sqrt_at, copied):
        return protos.serialized({protos.GPU0: [
            protos.Node("net/conv/BiasAdd", 0, 2, op="BiasAdd", outputs=[("GPU_0_bfc", 8 * mib)],
                        memory=[protos.Mem("GPU_0_bfc", [(0, chunk), (5, -chunk)])]),
            protos.Node("net/relu/Relu", 3, 4, op="Relu", outputs=[("GPU_0_bfc", mib)],
                        memory=[protos.Mem("GPU_0_bfc", [(3, mib), (6, -mib)])]),
            # Held at B's peak, run after A's: the peak's moment, not the chunks, moved its bytes.
            protos.Node("opt/Sqrt", sqrt_at, sqrt_at + 1, op="Sqrt", outputs=[("GPU_0_bfc", 2 * mib)],
                        memory=[protos.Mem("GPU_0_bfc", [(sqrt_at, sqrt_chunk), (sqrt_at + 2, -sqrt_chunk)])]),
            # A small output beside bytes it requested as no output (an eager copy of the batch).
            protos.Node("net/copy", 3, 4, op="Identity", outputs=[("GPU_0_bfc", 256)],
                        memory=[protos.Mem("GPU_0_bfc", [(3, 256 + copied), (6, -256 - copied)])]),
        ]})

    protos.write_tagged_run_metadata(tmp_path / "a", "step_1", step(29 * mib // 2, 3 * mib, 8, 2 * mib), 1)
    protos.write_tagged_run_metadata(tmp_path / "b", "step_1", step(8 * mib, 2 * mib, 4, mib), 1)
    assert cli.main(["diff", str(tmp_path), "--run", "a", "--against", "b", "--group", "scope", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["scopes"]}
    assert rows["net/conv/BiasAdd"]["same_requests"] is True
    assert rows["net/conv/BiasAdd"]["delta_allocated_bytes"] == 13 * mib // 2
    assert "same_requests" not in rows["net/relu/Relu"]  # the same chunk: nothing to say
    assert rows["opt/Sqrt"]["delta_bytes"] == -2 * mib and "same_requests" not in rows["opt/Sqrt"]
    assert rows["net/copy"]["delta_bytes"] == mib and "same_requests" not in rows["net/copy"]
    assert cli.main(["diff", str(tmp_path), "--run", "a", "--against", "b", "--group", "scope"]) == 0
    assert "net/conv/BiasAdd  (8.0 MiB -> 14.5 MiB, the same requests: the allocator's chunks)" in capsys.readouterr().out


def test_a_buffer_allocated_beside_the_outputs_is_no_chunk_of_theirs(tmp_path, capsys):
    """A scope whose outputs request as much on both sides while one side's optimizer copied a variable
    (an op's temp bytes, no output: Adam's 3 x 32 MiB in a first step) changed by that copy, not by
    the allocator's chunks: the diff had said "the same requests" of a trial's -96.2 MiB."""
    import protos

    mib = 1024 * 1024

    def step(copy):
        nodes = [protos.Node("net/dense/MatMul", 0, 2, op="MatMul", outputs=[("GPU_0_bfc", 8 * mib)],
                             memory=[protos.Mem("GPU_0_bfc", [(0, 8 * mib), (9, -8 * mib)])])]
        if copy:  # the update's copy of its variable, kept (its old buffer goes in no record)
            nodes.append(protos.Node("net/dense/apply", 3, 4, op="ResourceApplyAdam", temp=copy,
                                     memory=[protos.Mem("GPU_0_bfc", [(3, copy)])]))
        return protos.serialized({protos.GPU0: nodes})

    protos.write_tagged_run_metadata(tmp_path / "a", "step_1", step(4 * mib), 1)
    protos.write_tagged_run_metadata(tmp_path / "b", "step_1", step(0), 1)
    assert cli.main(["diff", str(tmp_path), "--run", "a", "--against", "b", "--group", "scope", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["scopes"]}
    dense = rows["net/dense"]
    assert (dense["delta_bytes"], dense["delta_allocated_bytes"]) == (4 * mib, 4 * mib)
    assert "same_requests" not in dense


def test_a_diff_says_what_the_start_gained_by_the_runs_graphs(tmp_path, capsys):
    """SGD against Adam: the peak rise barely moves, while Adam's slots, in memory before the step, add
    to the start, which no listing of the peak rise holds. The diff says so, split by the runs' graphs
    (a trial's "what did Adam cost?" had read +2 MiB of peak rise against a 35 MiB larger start)."""
    import models
    import tensorflow as tf
    from tb_memory_plugin.figures import format_bytes

    tf1 = tf.compat.v1
    kernel_bytes = 256 * 1024 * 4
    for run, optimizer in (("sgd", tf1.train.GradientDescentOptimizer(0.1)), ("adam", None)):
        graph = tf.Graph()
        with graph.as_default():
            x = tf1.placeholder(tf.float32, [16, 256], name="x")
            with tf1.variable_scope("dense"):
                h = tf.nn.relu(tf.matmul(x, tf1.get_variable("kernel", [256, 1024])))
            loss = tf.reduce_mean(tf.square(h))
            train = (optimizer if run == "sgd" else tf1.train.AdamOptimizer(1e-3)).minimize(loss)
            init = tf1.global_variables_initializer()
        feed = {x: np.ones((16, 256), np.float32)}
        with models._session(graph) as session:
            session.run(init)
            session.run(train, feed)
            metadata = tf1.RunMetadata()
            session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
        with graph.as_default():
            writer = tf1.summary.FileWriter(str(tmp_path / run), graph)
        writer.add_run_metadata(metadata, "step_1", global_step=1)
        writer.close()
    a, b = engine_step(tmp_path, "adam", "step_1"), engine_step(tmp_path, "sgd", "step_1")
    grown = a.space(None).start_bytes - b.space(None).start_bytes
    assert grown >= 2 * kernel_bytes  # the premise: Adam's two slots are in memory before its step
    assert cli.main(["diff", str(tmp_path), "--run", "adam", "--against", "sgd"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("   start ")]
    assert line.startswith(f"   start +{format_bytes(grown)}: the bytes in use before the step, in no listing below")
    assert f"optimizer slots +{format_bytes(2 * kernel_bytes)}" in line
    assert line.endswith("(of the tensors of 256.0 KiB and more, which the starts count)")
    # The JSON (as the compare route answers it) carries the same split, every part exact.
    assert cli.main(["diff", str(tmp_path), "--run", "adam", "--against", "sgd", "--json"]) == 0
    change = json.loads(capsys.readouterr().out)["start_change"]
    assert change["delta_bytes"] == grown
    parts = {part["name"]: part["delta_bytes"] for part in change["parts"]}
    # m and v; Adam's two float32 beta powers are under mklcpu's 256 KiB, in none of its readings
    assert parts["optimizer slots"] == 2 * kernel_bytes
    assert sum(parts.values()) == grown
