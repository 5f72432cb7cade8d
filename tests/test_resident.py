"""Resident memory by layer (resident.py): parameters and optimizer slots from the run's GraphDef,
checked against the GraphDef itself (compat protos), on real TensorFlow graphs and traces."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from tensorboard.compat.proto import graph_pb2

from tb_memory_plugin import cli, graph, report, resident, store
from tb_memory_plugin.figures import AT_PEAK
from test_routes import tb  # noqa: F401 - the Memory plugin in TensorBoard's app, over `logdir`

_ELEMENT_BYTES = {1: 4, 2: 8, 3: 4, 9: 8, 14: 2, 19: 2}  # float32, float64, int32, int64, bfloat16, float16


def _expected_from_graph_def(graph_def_bytes: bytes):
    """Per layer (the scope of the variable): (params, param bytes, slot bytes), straight from the
    VarHandleOp/VariableV2 attrs; a slot is `<var>/Adam` or `<var>/Adam_1`, owned by `<var>`."""
    graph_def = graph_pb2.GraphDef.FromString(graph_def_bytes)
    variables = {n.name: n for n in graph_def.node if n.op in ("VarHandleOp", "VariableV2")}
    layers = defaultdict(lambda: [0, 0, 0])
    for name, node in variables.items():
        dims = [d.size for d in node.attr["shape"].shape.dim]
        count = int(np.prod(dims)) if dims else 1
        nbytes = count * _ELEMENT_BYTES[node.attr["dtype"].type % 100]
        owner, _, leaf = name.rpartition("/")
        if owner in variables and leaf in ("Adam", "Adam_1"):
            layers[owner.rpartition("/")[0]][2] += nbytes
        elif "/" in name:
            layers[name.rpartition("/")[0]][0] += count
            layers[name.rpartition("/")[0]][1] += nbytes
        else:  # beta1_power, beta2_power: the optimizer's own variables, one row of their own
            layers[resident.OPTIMIZER_ROW][2] += nbytes
    return dict(layers)


@pytest.fixture(scope="module")
def unet_resident(unet_trace, unet_step):
    run_graph = graph.RunGraph.from_bytes(unet_trace.graph_def_bytes)
    space = unet_step.space(None)
    return run_graph, space, report.space_resident(unet_step, space, run_graph)


def test_unet_layers_match_the_graph_def(unet_trace, unet_resident):
    _, _, found = unet_resident
    expected = _expected_from_graph_def(unet_trace.graph_def_bytes)
    got = {row["scope"]: [row["param_count"], row["param_bytes"], row["slot_bytes"]] for row in found.layers()}
    assert got == {scope: list(v) for scope, v in expected.items()}
    # By hand: unet_00 is a 3x3 conv from 9 to 32 channels with biases; Adam keeps two slots per variable.
    assert got["shared_model/unet_00"] == [(3 * 3 * 9 + 1) * 32, (3 * 3 * 9 + 1) * 32 * 4, 2 * (3 * 3 * 9 + 1) * 32 * 4]
    assert found.param_count == sum(v[0] for v in expected.values())
    assert found.slot_bytes == 2 * found.param_bytes + 8  # + beta1_power and beta2_power (float32 scalars)


def test_summary_scopes_carry_param_figures(unet_trace, unet_step, unet_resident):
    run_graph, space, found = unet_resident
    expected = _expected_from_graph_def(unet_trace.graph_def_bytes)
    summary = report.device_summary(space, "layer", all_scopes=True, resident=found)
    by_name = {row["name"]: row for row in summary["scopes"]}
    assert all({"param_count", "param_bytes", "slot_bytes"} <= row.keys() for row in summary["scopes"])
    for layer, (count, nbytes, slots) in expected.items():
        if layer in by_name:
            assert (by_name[layer]["param_count"], by_name[layer]["param_bytes"], by_name[layer]["slot_bytes"]) == \
                (count, nbytes, slots)
    shared = [v for k, v in expected.items() if k.startswith("shared_model/")]
    assert by_name["shared_model"]["param_count"] == sum(v[0] for v in shared)
    # A layer's children split its parameters: weights and biases, each a node of the trace's tree.
    weights = by_name.get("shared_model/unet_01/weights")
    if weights is not None:
        assert weights["param_count"] == 3 * 3 * 32 * 32
    assert summary["top_scopes"][0]["param_count"] is not None


def test_categories_show_resident_beside_the_at_peak_identity(unet_step, unet_resident):
    _, space, found = unet_resident
    summary = report.device_summary(space, "layer", resident=found)
    categories = {row["name"]: row for row in summary["categories"]}
    assert categories["parameters"]["resident_bytes"] == found.param_bytes > 0
    assert categories["optimizer"]["resident_bytes"] == found.slot_bytes > 0
    # At peak still adds up to the rise; resident adds up to the bytes in use before the step.
    assert sum(row["at_peak_bytes"] for row in summary["categories"]) == summary["peak_rise_bytes"]
    assert space.exec_columns[AT_PEAK].sum() == summary["peak_rise_bytes"]
    start = summary["start_bytes"]
    # The step's feeds were made before it: in use then, as its input (the fed batch, from its shapes).
    fed = summary["resident"]["fed_bytes"]
    assert categories["inputs"]["resident_bytes"] == fed == found.fed_bytes > 0
    feeds = [name for name in space.names.raw if name.startswith("_arg_")]
    assert fed == sum(size for outputs in space.trace.outputs_of(feeds) for _, size in outputs)
    # mklcpu's start counts its requests of 256 KiB and more: other is read against the tensors of that size.
    least = summary["start_counts_from_bytes"]
    assert least == 256 * 1024 and found.counts_from == least
    fed_sizes = [size for outputs in space.trace.outputs_of(feeds) for _, size in outputs]
    counted = (sum(t.bytes for t in found.tensors if t.kind != resident.SLOT and t.bytes >= least)
               + sum(t.bytes for t in found.tensors if t.kind == resident.SLOT and t.bytes >= least)
               + sum(size for size in fed_sizes if size >= least))
    left_out = found.param_bytes + found.slot_bytes + fed - counted  # the smaller tensors, in no reading
    assert left_out > 0 and summary["resident"]["counted_note"]
    # Said beside the peak, which leaves them out too: the peak with them.
    assert summary["resident"]["uncounted_bytes"] == left_out
    assert summary["resident"]["peak_with_uncounted_bytes"] == summary["peak_bytes"] + left_out
    assert start is not None and summary["resident"]["other_bytes"] == start - counted
    assert summary["resident"]["other_note"] == resident.other_note(found)
    assert (summary["resident"]["other_note"] == resident.OTHER_BELOW_ZERO_NOTE) == (summary["resident"]["other_bytes"] < 0)
    if summary["resident"]["other_bytes"] >= 0:
        assert sum(row["resident_bytes"] for row in summary["categories"]) == start + left_out
        assert sum(row["resident_bytes"] + row["at_peak_bytes"] for row in summary["categories"]) == \
            summary["peak_bytes"] + left_out
    assert summary["resident"]["weight_constants"] is False and summary["resident"]["note"] is None


def test_without_a_graph_the_figures_are_null(unet_step):
    summary = report.device_summary(unet_step.space(None), "layer", all_scopes=True)
    assert summary["resident"] is None
    assert summary["resident_note"] == resident.NO_MODEL_NOTE  # why, for the page to say
    assert all(row["param_count"] is None for row in summary["scopes"][:20])
    assert all(row["resident_bytes"] is None for row in summary["categories"])


def test_the_cli_says_why_a_run_has_no_resident_memory(capsys, logdir):
    """The same trace without its run graph (written the TF2 way): the text says once per step why
    parameters are not counted; with the graph it lists them, and the JSON's note is null."""
    assert cli.main(["summary", str(logdir), "--run", "tf2", "--tag", "traced"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"note: {resident.NO_MODEL_NOTE}") == 1 and "layers by parameters" not in out
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2"]) == 0
    out = capsys.readouterr().out
    assert resident.NO_MODEL_NOTE not in out and "layers by parameters" in out
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"][0]["devices"][0]["resident_note"] is None


def test_cli_json_scopes_carry_param_figures(capsys, logdir, unet_trace):
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    device = body["steps"][0]["devices"][0]
    expected = _expected_from_graph_def(unet_trace.graph_def_bytes)
    assert device["resident"]["param_count"] == sum(v[0] for v in expected.values())
    assert all(row["param_count"] is not None and "slot_bytes" in row for row in device["scopes"])
    by_name = {row["name"]: row for row in device["scopes"]}
    assert by_name["shared_model/unet_05"]["param_count"] == (3 * 3 * 128 + 1) * 128
    assert "findings" in body["steps"][0]


def test_cli_text_lists_layers_by_parameters(capsys, logdir):
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2"]) == 0
    out = capsys.readouterr().out
    assert "resident before the step" in out and "layers by parameters" in out
    assert f"{(3 * 3 * 128 + 1) * 128:,} params" in out  # shared_model/unet_05
    # Beside the peak, the peak with the model's tensors that mklcpu's readings leave out.
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2", "--json"]) == 0
    resident_json = json.loads(capsys.readouterr().out)["steps"][0]["devices"][0]["resident"]
    assert resident_json["uncounted_bytes"] > 0
    assert (f"   with the model's smaller tensors in use before the step "
            f"({cli.format_bytes(resident_json['uncounted_bytes'])}: parameters, slots and feeds the start does not "
            f"count), the peak is {cli.format_bytes(resident_json['peak_with_uncounted_bytes'])}") in out
    assert resident_json["uncounted_noticeable"] is True
    # Cut at --top, the table says what it leaves out, as the other listings do.
    assert cli.main(["summary", str(logdir), "--run", "unet", "--tag", "step_2", "--top", "3"]) == 0
    out = capsys.readouterr().out
    rest = sorted(resident_json["layers"], key=lambda row: -(row["param_bytes"] + row["slot_bytes"]))[3:]
    assert len(rest) > 0
    assert (f"{cli.format_bytes(sum(r['param_bytes'] for r in rest)):>12}  ({len(rest)} more layers)  "
            f"{sum(r['param_count'] for r in rest):,} params  (+{cli.format_bytes(sum(r['slot_bytes'] for r in rest))} "
            "slots)\n") in out


def test_peak_with_smaller_tensors_is_said_only_where_it_moves_the_peak(capsys, logdir, monkeypatch):
    """Beside the peak only where the smaller tensors move it by resident.UNCOUNTED_NOTICEABLE_SHARE or more."""
    args = ["summary", str(logdir), "--run", "unet", "--tag", "step_2"]
    assert cli.main([*args, "--json"]) == 0
    device = json.loads(capsys.readouterr().out)["steps"][0]["devices"][0]
    share = device["resident"]["uncounted_bytes"] / device["peak_bytes"]
    for threshold, said in ((share * 0.99, True), (share * 1.01, False)):
        monkeypatch.setattr(resident, "UNCOUNTED_NOTICEABLE_SHARE", threshold)
        assert cli.main([*args, "--json"]) == 0
        resident_json = json.loads(capsys.readouterr().out)["steps"][0]["devices"][0]["resident"]
        assert resident_json["uncounted_noticeable"] is said
        assert resident_json["peak_with_uncounted_bytes"] == device["resident"]["peak_with_uncounted_bytes"]
        assert cli.main(args) == 0
        assert ("with the model's smaller tensors in use before the step" in capsys.readouterr().out) is said


def test_scopes_and_scope_routes_carry_param_figures(tb, unet_trace):
    """The treemap's tiles and the details panel: every entry's parameters and slots, as the summary's."""
    from test_routes import get_json

    expected = _expected_from_graph_def(unet_trace.graph_def_bytes)

    def under(path):
        rows = [v for layer, v in expected.items() if layer == path or layer.startswith(path + "/")]
        return [sum(v[i] for v in rows) for i in range(3)]

    level = get_json(tb, "scopes", run="unet", tag="step_2", scope="shared_model")
    assert [level["param_count"], level["param_bytes"], level["slot_bytes"]] == under("shared_model")
    children = {c["scope"]: c for c in level["children"]}
    for scope in ("shared_model/unet_00", "shared_model/unet_05"):
        assert [children[scope]["param_count"], children[scope]["param_bytes"], children[scope]["slot_bytes"]] == \
            under(scope)
    assert children["shared_model/unet_05"]["param_count"] == (3 * 3 * 128 + 1) * 128
    summary = get_json(tb, "summary", run="unet", tag="step_2")["devices"][0]
    root = get_json(tb, "scopes", run="unet", tag="step_2")
    for top in summary["top_scopes"]:
        child = next(c for c in root["children"] if c["scope"] == top["scope"])
        assert {k: child[k] for k in ("param_count", "param_bytes", "slot_bytes")} == \
            {k: top[k] for k in ("param_count", "param_bytes", "slot_bytes")}
    details = get_json(tb, "scope", run="unet", tag="step_2", scope="shared_model/unet_05")
    assert [details["param_count"], details["param_bytes"], details["slot_bytes"]] == under("shared_model/unet_05")
    # Without a run graph (the hand-built GPU step): null, as in the summary.
    gpu = get_json(tb, "scopes", run="gpu", tag="step_1")
    assert gpu["param_count"] is None and all(c["param_bytes"] is None for c in gpu["children"])
    assert get_json(tb, "scope", run="gpu", tag="step_1", scope="")["slot_bytes"] is None


# -- slot names and sums by path, on a hand-built GraphDef ----------------------------------------


def _variable(graph_def, name, shape, dtype=1, op="VarHandleOp"):
    node = graph_def.node.add(name=name, op=op)
    node.attr["dtype"].type = dtype
    for size in shape:
        node.attr["shape"].shape.dim.add(size=size)
    return node


def test_slot_names_of_tf1_and_keras_optimizers():
    graph_def = graph_pb2.GraphDef()
    _variable(graph_def, "dense/kernel", [4, 8])
    _variable(graph_def, "dense/bias", [8])
    _variable(graph_def, "dense/kernel/Momentum", [4, 8])
    _variable(graph_def, "training/Adam/dense/bias/m", [8])
    _variable(graph_def, "Adam/dense/kernel/v", [4, 8])
    _variable(graph_def, "training/Adam/iter", [], dtype=9)
    _variable(graph_def, "dense_1/kernel", [8, 2], dtype=19, op="VariableV2")
    _variable(graph_def, "dense/kernel/unknown", [-1, 8])
    model = resident.Model.from_bytes(graph_def.SerializeToString())
    kinds = {t.name: (t.kind, t.owner, t.bytes) for t in model.tensors}
    assert kinds["dense/kernel/Momentum"] == (resident.SLOT, "dense/kernel", 128)
    assert kinds["training/Adam/dense/bias/m"] == (resident.SLOT, "dense/bias", 32)
    assert kinds["Adam/dense/kernel/v"] == (resident.SLOT, "dense/kernel", 128)
    assert kinds["training/Adam/iter"] == (resident.SLOT, None, 8)
    assert kinds["dense_1/kernel"] == (resident.VARIABLE, None, 8 * 2 * 2)
    assert kinds["dense/kernel/unknown"] == (resident.VARIABLE, None, None)  # unknown shape: not counted
    index = model.index("layer")
    sums = dict(zip(["", "dense", "dense/kernel", "dense/kernel/(self)", "dense_1", "dens", "training"],
                    index.sums(["", "dense", "dense/kernel", "dense/kernel/(self)", "dense_1", "dens",
                                "training"]).tolist()))
    assert sums["dense"] == [32 + 8, 160, 128 + 32 + 128]  # Keras slots move under their variable's layer
    assert sums["dense/kernel"] == [32, 128, 128 + 128]
    assert sums["dense/kernel/(self)"] == [32, 128, 0]
    assert sums["dense_1"] == [16, 32, 0]  # a sibling whose name extends "dense" is not under it
    assert sums["dens"] == [0, 0, 0]
    assert sums[""] == [32 + 8 + 16, 160 + 32, 128 + 32 + 128 + 8]
    assert sums["training"] == [0, 0, 8]
    scope_sums = model.index("scope").sums(["training", "dense"]).tolist()
    assert scope_sums == [[0, 0, 32 + 8], [40, 160, 128]]  # grouped by scope, slots stay where they are named


def test_slots_named_under_a_scope_and_accumulated_gradients_by_their_shapes():
    """Edge cases real runs rarely make (the zoo's `scopedadam` and `accumulate` are the real ones): a
    slot named under a scope is its variable's only where its shape is; an accumulator with no apply
    op keeps the owner its name gives; a scalar running sum of a gradient's norm is no accumulator."""
    graph_def = graph_pb2.GraphDef()
    _variable(graph_def, "kernel", [3])
    _variable(graph_def, "towerA/kernel/Momentum", [7])  # another shape: not kernel's slot
    _variable(graph_def, "bert/dense/kernel", [4, 8])
    _variable(graph_def, "bert/dense/kernel/accum", [4, 8])
    _variable(graph_def, "temperature", [])
    _variable(graph_def, "stats/grad_norm_sum", [])
    graph_def.node.add(name="accumulate", op="AssignAddVariableOp",
                       input=["bert/dense/kernel/accum", "gradients/bert/dense/MatMul_grad/MatMul_1"])
    graph_def.node.add(name="norm_sum", op="AssignAddVariableOp",
                       input=["stats/grad_norm_sum", "clip_by_global_norm/global_norm/global_norm"])
    graph_def.node.add(name="train_temperature", op="ResourceApplyGradientDescent",
                       input=["temperature", "lr", "gradients/temperature_grad"])
    model = resident.Model.from_bytes(graph_def.SerializeToString())
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds["towerA/kernel/Momentum"] == (resident.VARIABLE, None)  # not `kernel`'s: another shape
    assert kinds["bert/dense/kernel/accum"] == (resident.SLOT, "bert/dense/kernel")
    assert kinds["stats/grad_norm_sum"] == (resident.VARIABLE, None)
    assert kinds["temperature"] == (resident.VARIABLE, None)


# -- slots by the optimizer's apply ops, whatever its name, on real tf.compat.v1 graphs -----------------


def _trained_graph(tf_models, shapes: dict, optimizer, resource: bool = True) -> bytes:
    """The GraphDef of a tf.compat.v1 graph training a variable per `shapes` entry (name -> shape)
    with `optimizer(tf1)`: resource variables (VarHandleOp, ResourceApply*) or ref ones
    (VariableV2, Apply*)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf1.Variable(tf.ones(shape), name=name, use_resource=resource) for name, shape in shapes.items()]
        loss = tf.add_n([tf.reduce_sum(tf.square(v)) for v in variables])
        optimizer(tf1).minimize(loss, name="train")
    return graph.as_graph_def().SerializeToString()


def _models(gd_bytes):
    """The model from the whole GraphDef, and as the run graph reads it (nodes picked by op type): the same."""
    full = resident.Model.from_bytes(gd_bytes)
    lean = graph.RunGraph.from_bytes(gd_bytes).model
    assert _model_facts(lean) == _model_facts(full)
    return full


def test_slots_of_an_optimizer_with_a_lower_case_name(tf_models):
    """`AdagradOptimizer(name="adagrad")` names its slots `<var>/adagrad`: no optimizer's default
    name, yet slots (the ResourceApplyAdagrad updates them with their variable)."""
    gd_bytes = _trained_graph(tf_models, {"dense/kernel": [16, 32], "dense/bias": [32]},
                              lambda tf1: tf1.train.AdagradOptimizer(0.1, name="adagrad"))
    model = _models(gd_bytes)
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds == {"dense/kernel": (resident.VARIABLE, None), "dense/bias": (resident.VARIABLE, None),
                     "dense/kernel/adagrad": (resident.SLOT, "dense/kernel"),
                     "dense/bias/adagrad": (resident.SLOT, "dense/bias")}
    found = resident.Resident(model.tensors, None, False)
    assert found.param_count == 16 * 32 + 32 and found.param_bytes == (16 * 32 + 32) * 4
    assert found.slot_bytes == found.param_bytes
    assert [(row["scope"], row["param_count"], row["slot_bytes"]) for row in found.layers()] == \
        [("dense", 16 * 32 + 32, (16 * 32 + 32) * 4)]


def test_the_global_step_is_the_optimizers_not_a_parameter(tf_models):
    """`minimize(global_step=tf1.train.get_or_create_global_step())`: the step counter is training
    state, as Keras' `iterations` is, not one of the model's parameters (a trial's model had read
    5,153 parameters for Keras' 5,152)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph_ = tf.Graph()
    with graph_.as_default():
        w = tf1.get_variable("dense/kernel", (8, 64))
        step = tf1.train.get_or_create_global_step()
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.square(w)), global_step=step)
    tensors = _models(graph_.as_graph_def().SerializeToString()).tensors
    kinds = {t.name: t.kind for t in tensors}
    assert kinds == {"dense/kernel": resident.VARIABLE, "global_step": resident.SLOT}
    # In the layers' rows it is the optimizer's, no layer of 0 parameters of its own (trials T and U).
    rows = {row["scope"]: (row["param_count"], row["slot_bytes"]) for row in resident.Resident(tensors, None, False).layers()}
    assert rows == {"dense": (8 * 64, 0), resident.OPTIMIZER_ROW: (0, 8)}


def test_slots_of_a_custom_named_adam_on_ref_variables(tf_models):
    """`AdamOptimizer(name="my_adam")` on ref variables: slots `w/my_adam` and `w/my_adam_1`, read off ApplyAdam;
    `beta1_power` and `beta2_power` stay the optimizer's own state."""
    gd_bytes = _trained_graph(tf_models, {"w": [8, 64]}, lambda tf1: tf1.train.AdamOptimizer(0.1, name="my_adam"),
                              resource=False)
    assert {n.op for n in graph_pb2.GraphDef.FromString(gd_bytes).node} >= {"VariableV2", "ApplyAdam"}
    model = _models(gd_bytes)
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds == {"w": (resident.VARIABLE, None), "w/my_adam": (resident.SLOT, "w"),
                     "w/my_adam_1": (resident.SLOT, "w"), "beta1_power": (resident.SLOT, None),
                     "beta2_power": (resident.SLOT, None)}
    found = resident.Resident(model.tensors, None, False)
    assert found.param_count == 8 * 64 and found.param_bytes == 8 * 64 * 4
    assert found.slot_bytes == 2 * 8 * 64 * 4 + 2 * 4  # two slots, and two float32 scalars
    assert model.index("layer").sums(["w"]).tolist() == [[8 * 64, 8 * 64 * 4, 2 * 8 * 64 * 4]]


def test_a_moving_averages_shadows_are_slots_not_parameters():
    """tf.train.ExponentialMovingAverage keeps `<var>/ExponentialMovingAverage` beside each
    variable it averages: training state, as an optimizer's slot is, not a parameter."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        w = tf1.Variable(tf.ones([16, 8]), name="dense/kernel")
        train = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(tf.reduce_sum(tf.square(w)))
        with tf.control_dependencies([train]):
            tf1.train.ExponentialMovingAverage(0.99).apply([w])
    model = _models(g.as_graph_def().SerializeToString())
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds["dense/kernel/ExponentialMovingAverage"] == (resident.SLOT, "dense/kernel")
    assert kinds["dense/kernel/Momentum"] == (resident.SLOT, "dense/kernel")
    found = resident.Resident(model.tensors, None, False)
    assert found.param_count == 16 * 8 and found.slot_bytes == 2 * 16 * 8 * 4


def test_slots_an_optimizer_updates_with_assigns_are_slots(tf_models):
    """BERT's AdamWeightDecayOptimizer keeps `<var>/adam_m` and `<var>/adam_v` (variables of the
    parameter's shape, named below it) and updates all three with assigns, no apply op: slots by
    name and shape, so the parameters are counted once (a sweep's BERT had shown 3x)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        params = [tf1.get_variable("bert/dense/kernel", (16, 8)), tf1.get_variable("bert/dense/bias", (8,))]
        loss = tf.add_n([tf.reduce_sum(tf.square(p)) for p in params])
        updates = []
        for param, grad in zip(params, tf.gradients(loss, params)):
            name = param.op.name
            m = tf1.get_variable(f"{name}/adam_m", param.shape, trainable=False, initializer=tf1.zeros_initializer())
            v = tf1.get_variable(f"{name}/adam_v", param.shape, trainable=False, initializer=tf1.zeros_initializer())
            next_m, next_v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * tf.square(grad)
            updates += [param.assign(param - 0.01 * next_m / (tf.sqrt(next_v) + 1e-6)), m.assign(next_m),
                        v.assign(next_v)]
        tf.group(*updates, name="train")
    gd_bytes = g.as_graph_def().SerializeToString()
    assert not any(node.op.startswith(("Apply", "ResourceApply")) for node in graph_pb2.GraphDef.FromString(gd_bytes).node)
    model = _models(gd_bytes)
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds == {"bert/dense/kernel": (resident.VARIABLE, None), "bert/dense/bias": (resident.VARIABLE, None),
                     **{f"bert/dense/{p}/adam_{s}": (resident.SLOT, f"bert/dense/{p}")
                        for p in ("kernel", "bias") for s in "mv"}}
    found = resident.Resident(model.tensors, None, False)
    assert found.param_count == 16 * 8 + 8 and found.slot_bytes == 2 * (16 * 8 + 8) * 4
    assert [row["scope"] for row in found.layers()] == ["bert/dense"]
    # Below a variable but of another shape, or of no known shape, it stays a parameter.
    g = tf.Graph()
    with g.as_default():
        tf1.get_variable("table", (16, 8))
        tf1.get_variable("table/rows", (16,))
        tf1.Variable(tf.zeros((0, 4)), shape=tf.TensorShape([None, 4]), name="cache")
        tf1.Variable(tf.zeros((0, 4)), shape=tf.TensorShape([None, 4]), name="cache/more")
    kinds = {t.name: t.kind for t in _models(g.as_graph_def().SerializeToString()).tensors}
    assert kinds == {"table": resident.VARIABLE, "table/rows": resident.VARIABLE, "cache": resident.VARIABLE,
                     "cache/more": resident.VARIABLE}


def test_a_trained_variable_named_under_another_stays_a_parameter(tf_models):
    """`a/b` and `a/Momentum` have `a`'s shape and extend its name, but Adagrad trains them too: parameters,
    each with its own slot (the names alone take `a/Momentum` for a Momentum slot of `a`)."""
    shapes = {"a": [4, 4], "a/b": [4, 4], "a/Momentum": [4, 4]}
    gd_bytes = _trained_graph(tf_models, shapes, lambda tf1: tf1.train.AdagradOptimizer(0.1))
    model = _models(gd_bytes)
    assert resident.slot_owner("a/Momentum", set(shapes)) == "a"
    kinds = {t.name: (t.kind, t.owner) for t in model.tensors}
    assert kinds == {"a": (resident.VARIABLE, None), "a/b": (resident.VARIABLE, None),
                     "a/Momentum": (resident.VARIABLE, None), "a/Adagrad": (resident.SLOT, "a"),
                     "a/b/Adagrad": (resident.SLOT, "a/b"), "a/Momentum/Adagrad": (resident.SLOT, "a/Momentum")}
    found = resident.Resident(model.tensors, None, False)
    assert found.param_count == 3 * 16 and found.param_bytes == 3 * 16 * 4 and found.slot_bytes == 3 * 16 * 4


# -- a frozen LeNet: its weights are constants --------------------------------------------------------

LENET_LAYERS = {"conv1": (5 * 5 * 1 + 1) * 32, "conv2": (5 * 5 * 32 + 1) * 64, "fc1": 3136 * 1024 + 1024,
                "fc2": 1024 * 10 + 10}


@pytest.fixture(scope="module")
def frozen_lenet(tf_models):
    """A LeNet frozen with convert_variables_to_constants, loaded with import_graph_def (prefix
    `import/`), one inference step traced with FULL_TRACE: (RunMetadata bytes, GraphDef bytes,
    the frozen GraphDef)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        images = tf1.placeholder(tf.float32, [None, 28, 28, 1], name="images")

        def conv(name, x, k, c_in, c_out):
            with tf1.variable_scope(name):
                w = tf1.get_variable("weights", [k, k, c_in, c_out])
                b = tf1.get_variable("biases", [c_out], initializer=tf1.zeros_initializer())
                y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b))
                return tf.nn.max_pool2d(y, 2, 2, "SAME")

        def dense(name, x, c_in, c_out, relu=True):
            with tf1.variable_scope(name):
                w = tf1.get_variable("weights", [c_in, c_out])
                b = tf1.get_variable("biases", [c_out], initializer=tf1.zeros_initializer())
                y = tf.nn.bias_add(tf.matmul(x, w), b)
                return tf.nn.relu(y) if relu else y

        x = conv("conv2", conv("conv1", images, 5, 1, 32), 5, 32, 64)
        x = dense("fc1", tf.reshape(x, [-1, 7 * 7 * 64]), 3136, 1024)
        tf.identity(dense("fc2", x, 1024, 10, relu=False), name="logits")
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            frozen = tf1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["logits"])
    served = tf.Graph()
    with served.as_default():
        tf1.import_graph_def(frozen)  # names get the `import/` prefix
        with tf1.Session(graph=served) as sess:
            feed = {"import/images:0": np.zeros((4, 28, 28, 1), np.float32)}
            sess.run("import/logits:0", feed)
            run_metadata = tf1.RunMetadata()
            sess.run("import/logits:0", feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                     run_metadata=run_metadata)
    return run_metadata.SerializeToString(), served.as_graph_def(add_shapes=True).SerializeToString(), frozen


def test_frozen_lenet_counts_its_weight_constants(frozen_lenet):
    rm_bytes, gd_bytes, frozen = frozen_lenet
    run_graph = graph.RunGraph.from_bytes(gd_bytes)
    step = store.analyse_bytes(rm_bytes, run_graph)
    assert step.status == "ok", step.message
    space = step.space(None)
    found = report.space_resident(step, space, run_graph)
    assert found.weight_constants_used
    layers = {row["scope"]: row["param_count"] for row in found.layers()}
    # Recomputed from the frozen GraphDef: every float Const of rank >= 1 in a layer's scope.
    by_layer = defaultdict(int)
    for node in frozen.node:
        tensor = node.attr["value"].tensor
        if node.op == "Const" and tensor.dtype == 1 and len(tensor.tensor_shape.dim) >= 1 and \
                node.name.split("/")[0] in LENET_LAYERS:
            by_layer["import/" + node.name.split("/")[0]] += int(np.prod([d.size for d in tensor.tensor_shape.dim]))
    assert layers == dict(by_layer) == {f"import/{k}": v for k, v in LENET_LAYERS.items()}
    assert layers["import/conv1"] == 832 and layers["import/conv2"] == 51_264
    assert layers["import/fc1"] == 3_212_288 and layers["import/fc2"] == 10_250
    assert found.slot_bytes == 0 and found.param_bytes == 4 * sum(LENET_LAYERS.values())
    summary = report.device_summary(space, "layer", all_scopes=True, resident=found)
    assert summary["resident"]["note"] == resident.WEIGHT_CONSTANTS_NOTE
    by_name = {row["name"]: row for row in summary["scopes"]}
    assert by_name["import"]["param_count"] == sum(LENET_LAYERS.values())
    assert by_name["import/conv1"]["param_count"] == 832
    # The shape constant of the reshape is no parameter; nor are the graph's other int Consts.
    assert not any(t.name.endswith("Reshape/shape") for t in found.tensors)


def _model_facts(model):
    return ([(t.name, t.kind, t.owner, t.shape, t.bytes) for t in model.tensors],
            [(c.name, c.shape, c.tensor_bytes, c.serialized_bytes) for c in model.constants],
            sorted((name, conv.filter_shape, conv.positions, conv.fused_into) for name, conv in model.convs.items()),
            model.weight_constants_used)


def test_reading_only_the_nodes_it_needs_gives_the_full_parse(unet_trace):
    """A graph picked by op type (variables, consts, convs and what follows them) reads like the whole of it."""
    data = unet_trace.graph_def_bytes
    run_graph = graph.RunGraph.from_bytes(data)
    lean = resident.Model.from_bytes(data, run_graph.names, run_graph.ops)
    assert lean.convs  # the U-Net has convolutions, and they are followed
    assert _model_facts(lean) == _model_facts(resident.Model.from_bytes(data))


def test_a_frozen_graph_read_by_op_type_finds_its_weights_as_the_full_parse_does(frozen_lenet):
    _, gd_bytes, _ = frozen_lenet
    run_graph = graph.RunGraph.from_bytes(gd_bytes)
    lean = run_graph.model
    assert lean.weight_constants_used
    assert _model_facts(lean) == _model_facts(resident.Model.from_bytes(gd_bytes))


def test_the_cli_explains_a_graph_bigger_than_the_start(capsys, tmp_path, unet_trace):
    """The real U-Net step beside its graph with one more variable, larger than all the bytes in use
    before the step (a hand-made edge: tensors the graph declares that the device did not hold):
    `other` comes out negative, and the CLI says why, as the page does."""
    import time

    from tensorboard.compat.proto import event_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    graph_def = graph_pb2.GraphDef.FromString(unet_trace.graph_def_bytes)
    node = graph_def.node.add(name="shared_model/huge/weights", op="VariableV2")
    node.attr["dtype"].type = types_pb2.DT_FLOAT
    node.attr["shape"].shape.CopyFrom(tensor_shape_pb2.TensorShapeProto(dim=[{"size": 64 * 2**20}]))  # 256 MiB
    writer = EventFileWriter(str(tmp_path / "unet"))
    try:
        writer.add_event(event_pb2.Event(wall_time=time.time(), graph_def=graph_def.SerializeToString()))
        event = event_pb2.Event(wall_time=time.time(), step=1)
        event.tagged_run_metadata.tag = "step_1"
        event.tagged_run_metadata.run_metadata = unet_trace.run_metadata_bytes
        writer.add_event(event)
    finally:
        writer.close()
    assert cli.main(["summary", str(tmp_path), "--run", "unet"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("   resident before the step"))
    assert ", other -" in line
    assert f"   note: {resident.OTHER_BELOW_ZERO_NOTE}" in out
    from tracedata import memory_app_client  # the page reads the same note from the summary route

    served = json.loads(memory_app_client(tmp_path).get("/data/plugin/memory/summary?run=unet&tag=step_1").get_data())
    (device,) = served["devices"]
    assert device["resident"]["other_bytes"] < 0 and device["resident"]["other_note"] == resident.OTHER_BELOW_ZERO_NOTE


@pytest.mark.parametrize("fed", [False, True])
def test_a_placeholder_with_default_feeds_only_when_fed(fed):
    """`tf.compat.v1.placeholder_with_default(default_batch)`: unfed, it hands on its default, a
    constant the graph holds (no input of the step's: a trial's unfed step had read its 256 KiB as
    fed inputs); fed, the feed's `_arg_` holds the batch, once (its default had been counted too)."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph_ = tf.Graph()
    with graph_.as_default():
        default = tf.constant(np.ones((16, 64, 64, 1), np.float32), name="default_batch")
        x = tf1.placeholder_with_default(default, (None, 64, 64, 1), name="x")
        w = tf1.get_variable("conv/kernel", (3, 3, 1, 8))  # a convolution, which grappler does not fold
        loss = tf.reduce_sum(tf.nn.conv2d(x, w, 1, "SAME"))
        train = [tf1.train.GradientDescentOptimizer(0.01).minimize(loss), loss]
        init = tf1.global_variables_initializer()
    feed = {x: np.full((16, 64, 64, 1), 2.0, np.float32)} if fed else None
    with models._session(graph_) as session:
        session.run(init)
        session.run(train, feed_dict=feed)
        metadata = tf1.RunMetadata()
        session.run(train, feed_dict=feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                    run_metadata=metadata)
    step = store.analyse_bytes(metadata.SerializeToString())
    space = step.space(None)
    # Fed, the placeholder still runs beside its `_arg_` (unfed, grappler may fold it into a constant).
    assert not fed or any(op == "PlaceholderWithDefault" for op in space.names.op_types)
    assert resident.fed_before_step(space) == (16 * 64 * 64 * 4 if fed else 0)
    # Its default is the graph's constant whatever batch is fed: the what-if's start grows by the
    # feed alone (it had grown by the default too: 55% high for a trial's start fed at 4x the batch).
    if fed:
        defaults = resident.placeholder_defaults(space)
        assert [space.names.raw[i] for i in np.flatnonzero(defaults)] == ["default_batch"]
        from tb_memory_plugin import whatif

        assert whatif.one_step(step, space).resident_batch_bytes == 16 * 64 * 64 * 4


def test_feeds_in_the_start_are_capped_by_the_tensors_it_counts():
    """On mklcpu the start counts 256 KiB and more: thirty 64 KiB weights are in none of it, so a 512 KiB
    feed is all in a 2 MiB start (the feeds had been capped by every weight, 128 KiB, while the split
    counted 512 KiB); the small feeds, in no reading, stay the user's."""
    kib = 1024
    weights = [resident.ModelTensor(f"w{i}", resident.VARIABLE, None, "float32", (16 * kib,), 16 * kib, 64 * kib, "")
               for i in range(30)]
    found = resident.Resident(weights, 2048 * kib, False, fed=512 * kib + 8 * kib, counts_from=256 * kib,
                              fed_counted=512 * kib)
    assert found.in_start() == (0, 0, 512 * kib)
    assert found.fed_bytes == 512 * kib + 8 * kib  # the 8 KiB feed too: in use, though in no reading
    assert found.other_bytes == 2048 * kib - 512 * kib
    everything = resident.Resident(weights, 2048 * kib, False, fed=512 * kib)  # an allocator counting all
    assert everything.in_start() == (30 * 64 * kib, 0, 128 * kib) and everything.fed_bytes == 128 * kib


def _momentum_step(constant_folding: bool) -> tuple[bytes, bytes]:
    """A 512 x 512 weight (1 MiB: mklcpu's readings count it) trained by TF1's Momentum: its second
    step traced, in a session with constant folding on (TensorFlow's default) or off (grappler's and
    the graph optimizer's, as the note says)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import rewriter_config_pb2

    tf1 = tf.compat.v1
    model = tf.Graph()
    with model.as_default():
        x = tf1.placeholder(tf.float32, (None, 512), name="x")
        with tf1.variable_scope("dense"):
            weight = tf1.get_variable("kernel", (512, 512))
        train = tf1.train.MomentumOptimizer(0.01, 0.9).minimize(tf.reduce_mean(tf.matmul(x, weight)))
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2,
                             use_per_session_threads=True)
    if not constant_folding:  # grappler's, and the session's graph optimizer's (L1 folds under 10 MiB)
        config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
        config.graph_options.optimizer_options.opt_level = tf1.OptimizerOptions.L0
    metadata = tf1.RunMetadata()
    feed = {x: np.ones((64, 512), np.float32)}
    with tf1.Session(graph=model, config=config) as session:
        session.run(init)
        session.run(train, feed)
        session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                    run_metadata=metadata)
    return metadata.SerializeToString(), model.as_graph_def().SerializeToString()


@pytest.mark.parametrize("constant_folding", [True, False])
def test_a_slots_initial_value_the_session_keeps_is_said_where_other_holds_it(constant_folding):
    """Trial N: under TF1's Momentum, 256.5 MiB were in use before every step that no parameter, slot
    or feed explained. The slot's zeros, which grappler folds into a constant, are kept by the session
    for its initializer's run, and the first update copied the slot away from them: both stay. Here a
    1 MiB slot: other is exactly its zeros with constant folding on, and nothing with it off, where
    the note says nothing either."""
    step_bytes, graph_bytes = _momentum_step(constant_folding)
    run_graph = graph.RunGraph.from_bytes(graph_bytes)
    (value,) = [v for v in run_graph.model.initial_values if v.bytes >= 256 * 1024]
    assert value.node == "dense/kernel/Momentum/Initializer/zeros" and value.bytes == 512 * 512 * 4
    assert value.variables == ("dense/kernel/Momentum",)
    step = store.analyse_bytes(step_bytes, run_graph)
    space = step.space(None)
    assert space.trace.allocator == "mklcpu" and space.start_bytes is not None  # oneDNN's readings give the start
    found = report.space_resident(step, space, run_graph)
    summary = report.device_summary(space, "layer", resident=found)["resident"]
    if constant_folding:
        assert summary["other_bytes"] == value.bytes
        assert "dense/kernel/Momentum/Initializer/zeros (1.0 MiB)" in summary["other_note"]
        assert "RewriterConfig(constant_folding=OFF)" in summary["other_note"] and "opt_level=L0" in summary["other_note"]
    else:
        assert abs(summary["other_bytes"]) < 256 * 1024 and summary["other_note"] is None


def test_a_huge_tensors_block_is_said_to_hold_other(tmp_path):
    """A BFC allocator (oneDNN's mklcpu here) gives a tensor larger than the regions before it a fresh region,
    a power of two, and keeps it whole under twice the request: a 70 MiB embedding and the 70 MiB zeros it
    was initialized from sit in 128 MiB blocks each. Other (what no parameter, slot or feed explains) is those
    zeros and the two blocks' room, exactly; both are said (trial AA's 457.8 MiB table in a 512 MiB block had
    left 54.2 MiB of other unexplained). Traced in a process of its own: in the suite's, a free region an
    earlier test left may hold the table."""
    from tracedata import traced_in_fresh_process

    run_metadata, graph_def = traced_in_fresh_process("""
ids = tf1.placeholder(tf.int32, (None,), name="ids")
table = tf1.get_variable("embed/table", (70 * 1024, 256), initializer=tf1.zeros_initializer())
train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.square(tf.nn.embedding_lookup(table, ids))))
feed = {"ids:0": np.arange(64, dtype=np.int32)}
""", tmp_path)
    run_graph = graph.RunGraph.from_bytes(graph_def)
    step = store.analyse_bytes(run_metadata, run_graph)
    space = step.space(None)
    assert space.trace.allocator == "mklcpu"
    held = resident.resident_of_space(run_graph.model, step, space)
    mib = 1 << 20
    assert held.other_bytes == 70 * mib + 2 * (128 - 70) * mib, held.other_bytes / mib
    note = resident.other_note(held)
    assert "embed/table/Initializer/zeros (70.0 MiB)" in note
    assert ("of other, 116.0 MiB may be the allocator's rounding of the model's largest tensors, each in a block of "
            "a power of two: embed/table (70.0 MiB) in 128.0 MiB, embed/table/Initializer/zeros (70.0 MiB) in "
            "128.0 MiB") in note


def test_tensors_that_share_a_layer_path_are_summed_under_it():
    """Grouped by layer, another replica's variables (`replica_1/cnn/kernel`) share replica 0's path: the index
    sums both under it (the 1M-node benchmark's 13 copies of a model had made the summary route a 500)."""
    def variable(name, count):
        return resident.ModelTensor(name, resident.VARIABLE, None, "float32", (count,), count, 4 * count, "")

    tensors = [variable("cnn/kernel", 10), variable("replica_1/cnn/kernel", 10), variable("replica_1/fc/w", 3)]
    layer = resident.ResidentIndex(tensors, "layer")
    assert layer.sums(["cnn", "fc", ""]).tolist() == [[20, 80, 0], [3, 12, 0], [23, 92, 0]]
    scope = resident.ResidentIndex(tensors, "scope")
    assert scope.sums(["cnn", "replica_1/cnn", "replica_1"]).tolist() == [[10, 40, 0], [10, 40, 0], [13, 52, 0]]
