"""The engine's identities on real models unlike the suite's U-Net (tests/zoo_models.py).

Four small models, each traced with real TensorFlow (tf.compat.v1 graph +
Session, FULL_TRACE, FileWriter.add_run_metadata, the run graph written with
add_graph): a conv net with fused BatchNorm, dropout and Momentum; an LSTM
(dynamic_rnn) and a while_loop writing a TensorArray, RMSProp; many-output ops
(split into 32, unstack, identity_n) and a tf.cond; a model with no name
scopes, an embedding lookup and `AdagradOptimizer(name="adagrad")`.

They are read the way users read them: `tb-memory summary --json` (cli.main)
in both groupings, and `store.analyse_bytes` over the bytes TensorBoard's data
provider hands the plugin. Every expected number comes from TensorFlow (the
model's variables and tensor shapes) or from the RunMetadata protos read here
field by field, never from the engine.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
from dataclasses import dataclass

import pytest

import zoo_models
from tracedata import engine_step, exec_names, read_blob_bytes, records_peak
from tb_memory_plugin import cli, names

# The figures every listing carries (docs/figures.md, "Per-execution figures").
FIGURE_KEYS = ("at_peak_bytes", "allocated_bytes", "op_peak_bytes", "live_bytes", "output_bytes", "temp_bytes",
               "persistent_bytes")
GROUPS = ("layer", "scope")
STEPS = [(run, f"step_{n}") for run, (_, steps) in zoo_models.ZOO.items() for n in steps]


# -- the traces -----------------------------------------------------------------------------------


@dataclass
class Zoo:
    root: object  # pathlib.Path of the logdir, one run per model
    info: dict  # run -> what TensorFlow says about the model (zoo_models), "graph_def" included


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tf_models) -> Zoo:
    root = tmp_path_factory.mktemp("zoo")
    return Zoo(root, zoo_models.write_zoo(root))


@dataclass
class Raw:
    """One traced step read straight from its RunMetadata proto (no engine code)."""

    proto: object
    graph_ops: dict  # GraphDef node name -> op, from the GraphDef TensorFlow wrote

    @property
    def devices(self) -> list:
        """The real devices' step stats (stream:* and memcpy pseudo-devices left out)."""
        return [d for d in self.proto.step_stats.dev_stats
                if "stream:" not in d.device and not d.device.endswith("/memcpy") and d.node_stats]

    @property
    def step_start_us(self) -> int:
        return min(node.all_start_micros for device in self.devices for node in device.node_stats)

    def records(self) -> dict:
        """(device, allocator) -> [(time, bytes, node name)] of every allocation record."""
        out = collections.defaultdict(list)
        for device in self.devices:
            for node in device.node_stats:
                for memory in node.memory:
                    out[(device.device, memory.allocator_name)].extend(
                        (r.alloc_micros, r.alloc_bytes, node.node_name) for r in memory.allocation_records)
        return dict(out)

    def allocated(self, device: str, allocator: str) -> int:
        return sum(m.total_bytes for d in self.devices if d.device == device for n in d.node_stats
                   for m in n.memory if m.allocator_name == allocator and m.total_bytes > 0)


def held_at(records: list, time: int) -> dict[str, int]:
    """Node name -> net bytes of its records up to and including `time`."""
    held = collections.defaultdict(int)
    for t, size, name in records:
        if t <= time:
            held[name] += size
    return dict(held)


def label_op(label: str) -> str | None:
    """The op in a timeline_label `name = Op(inputs)`."""
    if " = " not in label:
        return None
    return label.split(" = ", 1)[1].split("(", 1)[0].strip() or None


def label_op_type(label: str) -> str | None:
    """The op type a label gives a node: its op, oneDNN's kernels named as the graph names their
    op (`_MklMatMul` is `MatMul`: names.graph_op_type)."""
    return names.graph_op_type(label_op(label))


@pytest.fixture(scope="module")
def raw(zoo):
    from tensorboard.compat.proto import config_pb2, graph_pb2

    out = {}
    for run, tag in STEPS:
        graph_def = graph_pb2.GraphDef.FromString(zoo.info[run]["graph_def"])
        proto = config_pb2.RunMetadata.FromString(read_blob_bytes(zoo.root, run, tag))
        out[(run, tag)] = Raw(proto, {node.name: node.op for node in graph_def.node})
    return out


@pytest.fixture(scope="module")
def engine(zoo):
    """(run, tag) -> the engine's analysis: store.analyse_bytes over the plugin's bytes and run graph."""
    out = {}
    for run, tag in STEPS:
        step = engine_step(zoo.root, run, tag)
        assert step.status == "ok", (run, tag, step.message)
        out[(run, tag)] = step
    return out


@pytest.fixture(scope="module")
def summary(zoo):
    """group -> (run, tag) -> the step of `tb-memory summary <zoo> --json --group <group>`."""
    out = {}
    for group in GROUPS:
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.main(["summary", str(zoo.root), "--json", "--group", group])
        assert code == 0, stderr.getvalue()
        out[group] = {(step["run"], step["tag"]): step for step in json.loads(stdout.getvalue())["steps"]}
    return out


def _main_device(step: dict, raw_step: Raw, device: str) -> dict:
    """The summary's memory space that holds every execution of `device` (its main allocator)."""
    count = sum(len(d.node_stats) for d in raw_step.devices if d.device == device)
    (main,) = [d for d in step["devices"] if d["device"] == device and d["exec_count"] == count]
    return main


def _main_space(step, raw_step: Raw, device: str):
    count = sum(len(d.node_stats) for d in raw_step.devices if d.device == device)
    (space,) = [s for s in step.spaces if s.trace.device == device and s.trace.exec_count == count]
    return space


# -- every model: the listings add up --------------------------------------------------------------


def test_summary_lists_every_traced_step(summary):
    for group in GROUPS:
        assert sorted(summary[group]) == sorted(STEPS)
        for key, step in summary[group].items():
            assert step["status"] == "ok" and step["source"] == "run_metadata", (group, key, step["message"])
            assert step["devices"], key


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("run, tag", STEPS)
def test_listings_add_up_to_the_figures(summary, run, tag, group):
    step = summary[group][(run, tag)]
    for device in step["devices"]:
        where = (run, tag, group, device["id"])
        figures = device["figures"]
        assert set(figures) == set(FIGURE_KEYS)
        assert device["has_curve"], where
        top = [row for row in device["scopes"] if row["parent"] == ""]
        assert top, where
        for key in FIGURE_KEYS:
            assert sum(row[key] for row in top) == figures[key], (where, "top-level scopes", key)
            assert sum(row[key] for row in device["op_types"]) == figures[key], (where, "op types", key)
        assert sum(row["count"] for row in device["op_types"]) == device["exec_count"], where
        for key in ("at_peak_bytes", "allocated_bytes"):
            assert sum(row[key] for row in device["categories"]) == figures[key], (where, "categories", key)
        assert figures["at_peak_bytes"] == device["peak_rise_bytes"], where
        assert sum(row["at_peak_bytes"] for row in device["categories"]) == device["peak_rise_bytes"], where

        # Every scope's children add up to it; leaves have none; names nest under their parent.
        children = collections.defaultdict(list)
        for row in device["scopes"]:
            children[row["parent"]].append(row)
        by_name = {row["name"]: row for row in device["scopes"]}
        assert len(by_name) == len(device["scopes"]), (where, "an entry listed twice")
        for row in device["scopes"]:
            assert row["parent"] == "" or row["name"].startswith(row["parent"] + "/"), (where, row["name"])
            assert row["parent"] == "" or row["parent"] in by_name, (where, row["name"])
            if row["kind"] == "scope":
                kids = children[row["name"]]
                assert kids, (where, row["name"])
                for key in FIGURE_KEYS:
                    assert sum(kid[key] for kid in kids) == row[key], (where, row["name"], key)
            else:
                assert row["name"] not in children, (where, row["name"])
            assert all(row[key] >= 0 for key in ("allocated_bytes", "output_bytes", "temp_bytes")), where


@pytest.mark.parametrize("group", GROUPS)
def test_routes_answer_the_summarys_numbers(zoo, engine, summary, group):
    """The plugin's summary route (report.step_summary, with the run graph) gives every number the
    CLI's JSON gives, so what adds up there adds up on the page."""
    from tb_memory_plugin import graph, report

    for run, tag in STEPS:
        run_graph = graph.RunGraph.from_bytes(read_blob_bytes(zoo.root, run, "__run_graph__", ("graphs",)))
        routed = json.loads(json.dumps(report.step_summary(engine[(run, tag)], group, run_graph)))
        cli_devices = summary[group][(run, tag)]["devices"]
        assert [d["id"] for d in routed["devices"]] == [d["id"] for d in cli_devices]
        for device, cli_device in zip(routed["devices"], cli_devices):
            assert {key: value for key, value in cli_device.items() if key not in ("scopes", "op_types")} == \
                {key: value for key, value in device.items() if key != "op_types"}, (run, tag)
            assert cli_device["op_types"] == [{"name": row["name"], "count": row["count"], **row["figures"]}
                                              for row in device["op_types"]], (run, tag)


# -- every model: the figures are the raw trace's ---------------------------------------------------


@pytest.mark.parametrize("run, tag", STEPS)
def test_peak_is_the_maximum_of_the_raw_records(summary, raw, run, tag):
    """The peak rise is the running sum's maximum of the proto's allocation records (records at
    one time applied together), at that time from the step's start; allocated bytes are the sum
    of the positive total_bytes."""
    raw_step = raw[(run, tag)]
    records = raw_step.records()
    assert records, (run, tag)
    for group in GROUPS:
        devices = {(d["device"], d["allocator"]): d for d in summary[group][(run, tag)]["devices"]}
        # Every allocator with records is a memory space of the summary.
        assert set(records) <= set(devices), (run, tag)
        for key, device in devices.items():
            peak, peak_time = records_peak(records.get(key, []))
            assert peak > 0, (run, tag, key)
            assert device["peak_rise_bytes"] == peak, (run, tag, key)
            assert device["peak_time_us"] == peak_time - raw_step.step_start_us, (run, tag, key)
            assert device["figures"]["allocated_bytes"] == raw_step.allocated(*key), (run, tag, key)


@pytest.mark.parametrize("run, tag", STEPS)
def test_at_peak_per_node_is_the_net_of_its_raw_records(engine, raw, run, tag):
    """Each runtime name holds at the peak the net of its own records up to the peak time, and
    those add up to the peak rise."""
    from tb_memory_plugin.figures import AT_PEAK

    raw_step = raw[(run, tag)]
    records = raw_step.records()
    for space in engine[(run, tag)].spaces:
        key = (space.trace.device, space.trace.allocator)
        peak, peak_time = records_peak(records[key])
        expected = {name: held for name, held in held_at(records[key], peak_time).items() if held}
        engine_held = collections.defaultdict(int)
        for i, name in enumerate(exec_names(space.trace)):
            engine_held[name] += int(space.exec_columns[AT_PEAK][i])
        assert {name: held for name, held in engine_held.items() if held} == expected, (run, tag, key)
        assert sum(expected.values()) == peak == space.peak_rise_bytes


def _disputed_op_types(raw_step: Raw) -> set[str]:
    """Op types whose count the labels cannot settle: where a graph node's op and its label differ
    (fused and oneDNN kernels), and where a runtime name is not a graph node but one the runtime
    derived from a node (grappler's constant folding `/_<n>__cf__<m>`, `-folded-`, its passes'
    directories): the op of every graph node the name starts with, and the label's."""
    disputed = set()
    for device in raw_step.devices:
        for node in device.node_stats:
            name, label = node.node_name, label_op_type(node.timeline_label)
            graph_op = raw_step.graph_ops.get(name)
            if graph_op is not None:
                if graph_op != label:
                    disputed.update((graph_op, label))
            elif "__cf__" in name or "-" in name or "Optimizer" in name or "ConstantFolding" in name:
                disputed.add(label)
                disputed.update(raw_step.graph_ops[name[:k]] for k in range(1, len(name))
                                if name[:k] in raw_step.graph_ops)
    return disputed


@pytest.mark.parametrize("run, tag", STEPS)
def test_op_type_counts_are_the_labels(summary, engine, raw, run, tag):
    """Where the GraphDef and the trace's label agree on a node's op (or the node is the runtime's
    own and only the label names it), that op is its op type: per execution, and per op type in
    the summary's counts."""
    raw_step = raw[(run, tag)]
    disputed = _disputed_op_types(raw_step)
    for device_stats in raw_step.devices:
        device = device_stats.device
        space = _main_space(engine[(run, tag)], raw_step, device)
        # The main allocator keeps every execution, in the trace's order.
        assert exec_names(space.trace) == [node.node_name for node in device_stats.node_stats]
        labels = [label_op_type(node.timeline_label) for node in device_stats.node_stats]
        checked = 0
        for i, (node, label) in enumerate(zip(device_stats.node_stats, labels)):
            graph_op = raw_step.graph_ops.get(node.node_name)
            if label not in disputed:
                assert space.op_type(i) == label, (run, tag, node.node_name)
                checked += 1
            elif graph_op is not None and graph_op != label:
                # A fused or oneDNN kernel keeps its graph node's op type, the kernel shown beside it.
                assert (space.op_type(i), space.kernel_of(i)) == (graph_op, label_op(node.timeline_label)), \
                    (run, tag, node.node_name)
        assert checked > len(labels) // 2, (run, tag, disputed)
        counts = collections.Counter(label for label in labels if label not in disputed)
        for group in GROUPS:
            rows = {row["name"]: row["count"] for row in _main_device(summary[group][(run, tag)], raw_step,
                                                                       device)["op_types"]}
            assert {name: rows.get(name) for name in counts} == dict(counts), (run, tag, group)
            assert not (set(rows) - set(counts) - disputed), (run, tag, group)


# -- many-output ops ------------------------------------------------------------------------------------


MULTI_STEPS = [key for key in STEPS if key[0] == "multi"]


@pytest.mark.parametrize("run, tag", MULTI_STEPS)
def test_many_output_ops(zoo, summary, raw, run, tag):
    """Split, Unpack and IdentityN are counted once per execution and carry all their outputs:
    the bytes TensorFlow's shapes give, as the trace's output descriptions say."""
    info, raw_step = zoo.info[run], raw[(run, tag)]
    label_counts = collections.Counter()
    output_bytes = collections.Counter()
    for device in raw_step.devices:
        for node in device.node_stats:
            op = label_op_type(node.timeline_label)
            label_counts[op] += 1
            output_bytes[op] += sum(o.tensor_description.allocation_description.requested_bytes for o in node.output)
    assert not {"Split", "Unpack", "IdentityN"} & _disputed_op_types(raw_step)
    # What TensorFlow says: one split into 32 slices, its outputs 32 slices' bytes.
    assert info["graph_outputs"]["Split"] == (1, zoo_models.MULTI_SPLITS * info["split_slice_bytes"])
    assert info["graph_outputs"]["IdentityN"] == (1, info["identity_n_bytes"])
    for group in GROUPS:
        device = _main_device(summary[group][(run, tag)], raw_step, raw_step.devices[0].device)
        rows = {row["name"]: row for row in device["op_types"]}
        for op in ("Split", "Unpack", "IdentityN"):
            count, expected_bytes = info["graph_outputs"][op]
            assert rows[op]["count"] == label_counts[op] == count, (op, group)
            assert rows[op]["output_bytes"] == output_bytes[op] == expected_bytes, (op, group)
        # The cond ran one branch: the other's ops are not in the step.
        ran_tanh = label_counts["TanhGrad"]
        assert ran_tanh == (0 if tag == "step_1" else 1)
        assert rows.get("TanhGrad", {"count": 0})["count"] == ran_tanh


# -- the LSTM: names repeat inside the loops -----------------------------------------------------------


LOOPS = {"encoder/rnn": ("encoder/rnn/while/", "gradients/encoder/rnn/while_grad/"),
         "decoder": ("decoder/while/", "gradients/decoder/while_grad/")}


def test_lstm_names_repeat_and_the_loops_sit_in_their_layer(summary, engine, raw):
    key = ("lstm", "step_1")
    raw_step = raw[key]
    (device_stats,) = raw_step.devices
    names = [node.node_name for node in device_stats.node_stats]
    assert len(set(names)) < len(names)
    space = _main_space(engine[key], raw_step, device_stats.device)
    assert space.trace.exec_count == len(names)
    assert sorted(space.trace.distinct_names) == sorted(set(names))
    for group in GROUPS:
        assert _main_device(summary[group][key], raw_step, device_stats.device)["exec_count"] == len(names)

    for layer, (forward, backward) in LOOPS.items():
        in_loop = [i for i, name in enumerate(names) if name.startswith((forward, backward))]
        loop_names = [names[i] for i in in_loop]
        # The loop bodies ran many times (the encoder once per time step, the decoder 5 times).
        assert len(set(loop_names)) < len(loop_names), layer
        assert max(collections.Counter(loop_names).values()) >= (
            zoo_models.LSTM_STEPS if layer == "encoder/rnn" else zoo_models.DECODER_STEPS), layer
        for i in in_loop:
            # Grouped by layer, the backward loop joins its forward loop inside the RNN's layer ...
            assert (space.scope_of(i, "layer") + "/").startswith(layer + "/"), names[i]
            # ... grouped by scope it stays where the graph has it.
            assert (space.scope_of(i, "scope") + "/").startswith(names[i].split("/")[0] + "/"), names[i]
        assert any(names[i].startswith(backward) for i in in_loop), layer

    # The layer's figures are those of its nodes, its backward pass's (`gradients/<layer>/...`) and
    # its updates' (`RMSProp/update_<layer>/...`): in the raw trace, allocated bytes and the net of
    # the records up to the peak.
    records = raw_step.records()[(space.trace.device, space.trace.allocator)]
    held = held_at(records, records_peak(records)[1])
    allocated = collections.Counter()
    for node in device_stats.node_stats:
        allocated[node.node_name] += sum(m.total_bytes for m in node.memory
                                         if m.allocator_name == space.trace.allocator and m.total_bytes > 0)
    for group, prefixes in (("layer", ("{}/", "gradients/{}/", "RMSProp/update_{}/")), ("scope", ("{}/",)),
                            ("scope", ("gradients/{}/",))):
        rows = {row["name"]: row for row in _main_device(summary[group][key], raw_step, device_stats.device)["scopes"]}
        for layer in LOOPS:
            starts = tuple(prefix.format(layer) for prefix in prefixes)
            entry = rows[starts[0][:-1]]
            mine = set(name for name in names if name.startswith(starts))
            assert entry["allocated_bytes"] == sum(allocated[name] for name in mine) > 0, (group, starts)
            assert entry["at_peak_bytes"] == sum(held.get(name, 0) for name in mine), (group, starts)


# -- no name scopes, an embedding, Adagrad named "adagrad" --------------------------------------------------


def test_noscope_resident_parameters_and_slots(zoo, summary, raw):
    """Parameters are the model's trainable variables (TensorFlow's count and bytes); the slots
    are Adagrad's accumulators (`<var>/adagrad`, a lower-case optimizer name) with their bytes;
    each variable is a top-level layer of its own."""
    info = zoo.info["noscope"]
    key = ("noscope", "step_1")
    assert info["slot_names"] == sorted(f"{v}/adagrad" for v in info["variables"])
    for group in GROUPS:
        device = _main_device(summary[group][key], raw[key], raw[key].devices[0].device)
        resident = device["resident"]
        assert resident["param_count"] == info["param_count"]
        assert resident["param_bytes"] == info["param_bytes"]
        assert resident["slot_bytes"] == info["slot_bytes"]
        by_scope = {row["scope"]: row for row in resident["layers"]}
        assert set(by_scope) == set(info["variables"])
        top = {row["name"]: row for row in device["scopes"] if row["parent"] == ""}
        for variable, (count, nbytes) in info["per_variable"].items():
            assert (by_scope[variable]["param_count"], by_scope[variable]["param_bytes"]) == (count, nbytes)
            assert by_scope[variable]["slot_bytes"] == nbytes  # one accumulator, the variable's shape
            assert (top[variable]["param_count"], top[variable]["slot_bytes"]) == (count, nbytes), group
        categories = {row["name"]: row for row in device["categories"]}
        assert categories["parameters"]["resident_bytes"] == info["param_bytes"]
        assert categories["optimizer"]["resident_bytes"] == info["slot_bytes"]


def test_noscope_updates_sit_with_their_variable(zoo, engine, raw):
    """`adagrad/update_<var>/...` (the optimizer's own lower-case name) is folded into the variable it
    trains when grouped by layer, and its apply op (the variable is its first input) is optimizer."""
    from tensorboard.compat.proto import graph_pb2

    from tb_memory_plugin.figures import CATEGORIES

    key = ("noscope", "step_1")
    raw_step = raw[key]
    trained = {node.name: node.input[0] for node in graph_pb2.GraphDef.FromString(zoo.info["noscope"]["graph_def"]).node
               if node.op.startswith(("ResourceApply", "ResourceSparseApply"))}
    assert sorted(trained.values()) == zoo.info["noscope"]["variables"]
    # The embedding's gradient is sparse (IndexedSlices): its update is a sparse apply.
    assert [name for name, variable in trained.items() if variable == "embedding"] == \
        ["adagrad/update_embedding/ResourceSparseApplyAdagrad"]
    space = _main_space(engine[key], raw_step, raw_step.devices[0].device)
    seen = set()
    for i, name in enumerate(exec_names(space.trace)):
        if name in trained:
            assert space.scope_of(i, "layer") == trained[name], name
            assert space.scope_of(i, "scope") == name.rsplit("/", 1)[0], name
            assert CATEGORIES[int(space.category[i])] == "optimizer", name
            seen.add(name)
    assert seen == set(trained)


def test_noscope_embedding_lookup_is_not_a_parameter(zoo, engine, raw):
    """The lookup's ResourceGather outputs the gathered rows (batch x ids x dim): allocated, and
    held at the peak when the schedule puts the peak before the first layer's weight gradient
    has read them, but never as parameters."""
    import numpy as np

    from tb_memory_plugin.figures import ALLOCATED, AT_PEAK, OUTPUT

    info = zoo.info["noscope"]
    key = ("noscope", "step_1")
    raw_step = raw[key]
    space = _main_space(engine[key], raw_step, raw_step.devices[0].device)
    gathers = [node for node in raw_step.devices[0].node_stats if label_op(node.timeline_label) == "ResourceGather"]
    assert len(gathers) == 1 and raw_step.graph_ops[gathers[0].node_name] == "ResourceGather"
    records = raw_step.records()[(space.trace.device, space.trace.allocator)]
    held = held_at(records, records_peak(records)[1]).get(gathers[0].node_name, 0)
    # The executor's schedule moves the peak from run to run (a CI machine once had it after the
    # rows were freed): they are all held at it or none are, and the figures follow the records.
    assert held in (0, info["lookup_bytes"])

    execs = np.array([i for i, name in enumerate(exec_names(space.trace)) if name == gathers[0].node_name])
    assert int(space.exec_figures[execs, OUTPUT].sum()) == info["lookup_bytes"]
    assert int(space.exec_figures[execs, AT_PEAK].sum()) == held
    categories = {name: (at_peak, allocated) for name, at_peak, allocated in space.by_category(execs)}
    assert categories["parameters"] == (0, 0)
    assert sum(at_peak for at_peak, _ in categories.values()) == held
    assert sum(allocated for _, allocated in categories.values()) == int(space.exec_figures[execs, ALLOCATED].sum()) > 0


# -- Adam made inside a variable scope of the user's --------------------------------------------------------


def test_scopedadam_resident_parameters_and_slots(zoo, summary, raw):
    """Adam's slots made under the user's scope (`train/<var>/Adam`) are the variable's slots, and
    its own `train/beta1_power` optimizer state: the parameters are TensorFlow's trainable
    variables, whatever the slots' names."""
    info = zoo.info["scopedadam"]
    key = ("scopedadam", "step_1")
    assert info["slot_names"] == sorted(f"train/{v}/Adam{k}" for v in info["variables"] for k in ("", "_1"))
    assert info["own_names"] == ["train/beta1_power", "train/beta2_power"]
    for group in GROUPS:
        device = _main_device(summary[group][key], raw[key], raw[key].devices[0].device)
        resident = device["resident"]
        assert resident["param_count"] == info["param_count"], group
        assert resident["param_bytes"] == info["param_bytes"]
        assert resident["slot_bytes"] == info["slot_bytes"]
        by_scope = {row["scope"]: row for row in resident["layers"]}
        for variable, (count, nbytes) in info["per_variable"].items():
            layer = by_scope[variable.split("/")[0]]
            assert (layer["param_count"], layer["param_bytes"], layer["slot_bytes"]) == (count, nbytes, 2 * nbytes)


def test_scopedadam_updates_are_the_optimizers(zoo, engine, raw):
    """`train/Adam/update_<var>/...` (the sparse update's assigns and scatter included) is optimizer,
    as `Adam/update_<var>/...` is, and sits with its variable's layer."""
    from tb_memory_plugin.figures import ALLOCATED, CATEGORIES

    info = zoo.info["scopedadam"]
    key = ("scopedadam", "step_1")
    space = _main_space(engine[key], raw[key], raw[key].devices[0].device)
    updates = {}
    for i, name in enumerate(exec_names(space.trace)):
        if name.startswith("train/Adam/update_"):
            variable = next(v for v in info["variables"] if name.startswith(f"train/Adam/update_{v}/"))
            updates[i] = variable
            assert CATEGORIES[int(space.category[i])] == "optimizer", name
            assert space.scope_of(i, "layer").split("/")[0] == variable.split("/")[0], name
    assert set(updates.values()) == set(info["variables"])
    # The embedding's sparse update writes new buffers for its slots: bytes the optimizer holds.
    embedding = [i for i, v in updates.items() if v.startswith("embedding/")]
    assert int(space.exec_figures[embedding, ALLOCATED].sum()) > 0


# -- gradients accumulated in variables of their own ------------------------------------------------------


def test_accumulated_gradients_are_optimizer_state_not_parameters(zoo, summary, raw):
    """Non-trainable variables that `assign_add` adds gradients into (`Variable`, `Variable_1`) are the
    optimizer's state, each beside the variable whose gradient it holds: the parameters are
    TensorFlow's trainable variables."""
    info = zoo.info["accumulate"]
    key = ("accumulate", "step_1")
    assert info["accumulators"] == ["Variable", "Variable_1"]
    for group in GROUPS:
        resident = _main_device(summary[group][key], raw[key], raw[key].devices[0].device)["resident"]
        assert resident["param_count"] == info["param_count"], group
        assert resident["param_bytes"] == info["param_bytes"]
        assert resident["slot_bytes"] == info["slot_bytes"]
        by_scope = {row["scope"]: row for row in resident["layers"]}
        assert not set(info["accumulators"]) & set(by_scope)
        for variable, (count, nbytes) in info["per_variable"].items():
            layer = by_scope[variable.rsplit("/", 1)[0]]
            assert (layer["param_count"], layer["slot_bytes"]) == (count, 3 * nbytes)  # Adam's two, and its sum


# -- the conv net: moving averages are parameters, Momentum's slots are slots -------------------------------


def test_convbn_resident_parameters_and_slots(zoo, summary, raw):
    info = zoo.info["convbn"]
    key = ("convbn", "step_1")
    assert info["moving_stats"]  # non-trainable variables the BatchNorm updates
    for group in GROUPS:
        resident = _main_device(summary[group][key], raw[key], raw[key].devices[0].device)["resident"]
        assert resident["param_count"] == info["param_count"]
        assert resident["param_bytes"] == info["param_bytes"]
        assert resident["slot_bytes"] == info["slot_bytes"]
