"""The graph view of TF2 / Keras runs: their function graphs or Keras model config (issue 11).

Three runs, each with a real profile:
* `keras/train`: the real Keras 3 `fit` of demo_logs/keras_unet (the callback's `keras` model config and
  an empty `batch_N` record);
* `traced`: a `tf.function` train step of the same model, profiled and `trace_export`ed (function graphs),
  written once per session in a subprocess with the BFC allocator on;
* `profile_only`: a profile and no event file: no graph at all.
Expectations are read from the event files with TensorBoard's own protos and plain loops.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tracedata import REPO, memory_app_client
from tb_memory_plugin import analysis, function_graph
from tb_memory_plugin.figures import AT_PEAK
from tb_memory_plugin.sources import xplane

PREFIX = "/data/plugin/memory/"
KERAS_RUN = REPO / "demo_logs" / "keras_unet" / "train"
MODEL = "small_unet"

_TRACE_EXPORT = r'''
import os, sys
sys.path.insert(0, sys.argv[2])
import numpy as np, tensorflow as tf, keras
import keras_unet

logdir = sys.argv[1]
model = keras_unet.build(16, depth=2, width=4)
optimizer = keras.optimizers.Adam()
x = np.random.default_rng(0).random((2, 16, 16, 3), dtype=np.float32)
y = np.random.default_rng(1).random((2, 16, 16, 2), dtype=np.float32)

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

writer = tf.summary.create_file_writer(logdir)
tf.summary.trace_on(graph=True, profiler=False)  # before the first call: graphs are recorded when traced
train_step(x, y)
tf.profiler.experimental.start(logdir)
for step in range(2):
    with tf.profiler.experimental.Trace("train", step_num=step):
        train_step(x, y)
tf.profiler.experimental.stop()
with writer.as_default():
    tf.summary.trace_export("train_step", step=1)
writer.flush()
'''


def _summaries(run_dir: Path) -> dict[tuple[str, str], bytes]:
    """(plugin, tag) -> the first string value of that summary in the run's event files."""
    from tensorboard.backend.event_processing import event_file_loader

    found = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in event_file_loader.LegacyEventFileLoader(str(path)).Load():
            if event.WhichOneof("what") == "summary":
                for value in event.summary.value:
                    if value.tensor.string_val:
                        found[(value.metadata.plugin_data.plugin_name, value.tag)] = value.tensor.string_val[0]
    return found


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("function_graphs")
    shutil.copytree(KERAS_RUN, root / "keras" / "train")
    script = root / "trace_export.py"
    script.write_text(_TRACE_EXPORT)
    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    subprocess.run([sys.executable, str(script), str(root / "traced"), str(REPO / "demo_logs")],
                   env=dict(os.environ, **keras_unet.BFC_ENV), check=True, timeout=600)
    (profile,) = (root / "keras" / "train").glob("plugins/profile/*/*.xplane.pb")
    only = root / "profile_only" / "plugins" / "profile" / profile.parent.name / "host.xplane.pb"
    only.parent.mkdir(parents=True)
    shutil.copyfile(profile, only)
    return root


@pytest.fixture(scope="module")
def tb(logdir):
    return memory_app_client(logdir)


def _get(tb, route, expect=200, **params):
    response = tb.get(PREFIX + route, query_string=params)
    assert response.status_code == expect, response.get_data(as_text=True)[:500]
    return json.loads(response.get_data(as_text=True))


def _profiled(tb, run: str) -> list[str]:
    runs = {r["run"]: r for r in _get(tb, "runs")["runs"]}
    return [s["tag"] for s in runs[run]["steps"] if s["source"] == "xplane"]


def _engine(logdir: Path, run: str, index: int) -> analysis.SpaceAnalysis:
    (path,) = (logdir / run).glob("plugins/profile/*/*.xplane.pb")
    step = analysis.analyse(xplane.decode(path.read_bytes()).trace(index))
    assert step.status == "ok", step.message
    return step.space(None)


def _at_peak(space: analysis.SpaceAnalysis, path: str) -> int:
    tree = space.tree("scope")
    return int(tree.figures[tree.index[path], AT_PEAK]) if path in tree.index else 0


def _keras_layers_and_edges(config: dict) -> tuple[set[str], set[tuple[str, str]]]:
    """A functional model's layer names and (source layer, target layer) pairs, read from its JSON."""
    layers, edges = set(), set()

    def histories(value):
        if isinstance(value, dict):
            if "keras_history" in value.get("config", {}):
                yield value["config"]["keras_history"][0]
            for item in value.values():
                yield from histories(item)
        elif isinstance(value, list):
            for item in value:
                yield from histories(item)

    for layer in config["config"]["layers"]:
        layers.add(layer["name"])
        for source in histories(layer.get("inbound_nodes", [])):
            edges.add((source, layer["name"]))
    return layers, edges


# -- the Keras callback's model config ---------------------------------------------------------------


def test_keras_fit_graph_shows_the_layers_with_their_edges(tb, logdir):
    config = json.loads(_summaries(logdir / "keras" / "train")[("graph_keras_model", "keras")])
    assert config["config"]["name"] == MODEL
    layers, edges = _keras_layers_and_edges(config)
    assert len(edges) >= len(layers) - 1  # a connected model
    for index, tag in enumerate(_profiled(tb, "keras/train")):
        body = _get(tb, "graph", run="keras/train", tag=tag, scope=MODEL)
        assert body["source"] == "run_graph"
        nodes = {n["id"]: n for n in body["nodes"]}
        assert {f"{MODEL}/{layer}" for layer in layers} <= set(nodes)
        assert {(e["source"], e["target"]) for e in body["edges"]} == {
            (f"{MODEL}/{a}", f"{MODEL}/{b}") for a, b in edges}
        space = _engine(logdir, "keras/train", index)
        tree = space.tree("scope")
        for node_id, node in nodes.items():
            assert node["at_peak_bytes"] == _at_peak(space, node_id), node_id
            if node_id in tree.index and tree.kinds[tree.index[node_id]] == "scope":
                assert node["kind"] == "scope" and node["op_type"] is None  # a layer: open it
        # The trace's own children of the model are all there: the boxes add up to the model's bytes.
        assert {tree.paths[c] for c in tree.children[tree.index[MODEL]]} <= set(nodes)
        assert sum(n["at_peak_bytes"] for n in body["nodes"]) == _at_peak(space, MODEL)
        assert max(nodes.values(), key=lambda n: n["at_peak_bytes"])["at_peak_bytes"] > 0


def test_keras_fit_graph_root_keeps_what_the_model_config_does_not_name(tb, logdir):
    tag = _profiled(tb, "keras/train")[0]
    body = _get(tb, "graph", run="keras/train", tag=tag)
    space = _engine(logdir, "keras/train", 0)
    tree = space.tree("scope")
    ids = {n["id"] for n in body["nodes"]}
    assert MODEL in ids and "gradient_tape" in ids  # the backward pass beside the layer graph
    assert body["omitted_nodes"] == 0
    assert sum(n["at_peak_bytes"] for n in body["nodes"]) == int(tree.figures[0, AT_PEAK]) == space.peak_rise_bytes
    # Which boxes the grouping by layer holds: not gradient_tape, whose ops are in their layers (a click on
    # it had asked for a scope the grouping lacks: 404s, and the page blanked).
    grouped = {n["id"]: n["in_group"] for n in _get(tb, "graph", run="keras/train", tag=tag, group="layer")["nodes"]}
    layers = space.tree("layer").index
    assert grouped == {box: box in layers for box in ids} and grouped[MODEL] and not grouped["gradient_tape"]
    assert all("in_group" not in n for n in body["nodes"])  # asked without a group: nothing said


def test_inside_a_keras_layer_the_graph_view_is_the_trace(tb, logdir):
    tag = _profiled(tb, "keras/train")[0]
    space = _engine(logdir, "keras/train", 0)
    tree = space.tree("scope")
    layer = max((c for c in tree.children[tree.index[MODEL]] if tree.kinds[c] == "scope"),
                key=lambda c: tree.figures[c, AT_PEAK])
    body = _get(tb, "graph", run="keras/train", tag=tag, scope=tree.paths[layer])
    assert body["source"] == "trace" and body["edges"] == []
    assert {n["id"] for n in body["nodes"]} == {tree.paths[c] for c in tree.children[layer]}
    _get(tb, "graph", expect=404, run="keras/train", tag=tag, scope=f"{MODEL}/no_such_layer")


# -- a trace_export: function graphs -----------------------------------------------------------------


def _function_graph_reference(logdir: Path):
    """The RunMetadata of the `trace_export`, its largest function's post-optimization graph."""
    from tensorboard.compat.proto import config_pb2

    metadata = config_pb2.RunMetadata.FromString(_summaries(logdir / "traced")[("graph_run_metadata_graph",
                                                                                  "train_step")])
    assert not metadata.step_stats.dev_stats and metadata.function_graphs  # graphs, no step stats
    train = max(metadata.function_graphs, key=lambda fg: len(fg.post_optimization_graph.node))
    return metadata, train.post_optimization_graph


def _layer_of(name: str) -> str | None:
    """`small_unet_1/enc_1_1/...` (a function graph's node) -> `enc_1`, with plain string work."""
    parts = name.split("/")
    if len(parts) < 3 or parts[0] != MODEL + "_1":
        return None
    return parts[1][: -len("_1")] if parts[1].endswith("_1") else parts[1]


def test_trace_export_graph_shows_the_layers_with_their_dataflow(tb, logdir):
    _, graph = _function_graph_reference(logdir)
    layers = {_layer_of(n.name) for n in graph.node} - {None}
    edges = set()
    for node in graph.node:
        target = _layer_of(node.name)
        for source in node.input:
            source = _layer_of(source.lstrip("^").split(":")[0])
            if target and source and source != target:
                edges.add((f"{MODEL}/{source}", f"{MODEL}/{target}"))
    assert len(layers) >= 10 and len(edges) >= len(layers) - 1
    tags = _profiled(tb, "traced")
    assert len(tags) == 2
    for index, tag in enumerate(tags):
        body = _get(tb, "graph", run="traced", tag=tag, scope=MODEL)
        assert body["source"] == "run_graph"
        nodes = {n["id"]: n for n in body["nodes"]}
        assert {f"{MODEL}/{layer}" for layer in layers} <= set(nodes)
        assert all(nodes[f"{MODEL}/{layer}"]["kind"] == "scope" for layer in layers)
        assert {(e["source"], e["target"]) for e in body["edges"]} == edges
        space = _engine(logdir, "traced", index)
        for node_id, node in nodes.items():
            assert node["at_peak_bytes"] == _at_peak(space, node_id), node_id
        assert sum(n["at_peak_bytes"] for n in body["nodes"]) == _at_peak(space, MODEL) > 0
        root = _get(tb, "graph", run="traced", tag=tag)
        assert {MODEL, "gradient_tape", "adam"} <= {n["id"] for n in root["nodes"]}
        assert root["edges"]  # between the model, its gradients and the optimizer


def test_function_graph_names_are_the_profiles_and_its_op_types_agree(logdir):
    metadata, train = _function_graph_reference(logdir)
    graph = function_graph.from_run_metadata(metadata.SerializeToString())
    assert graph.model is None and "small_unet/enc_1/Relu" in graph.op_types  # cleaned as the profile is
    assert not any(op in ("_Arg", "_Retval") for op in graph.ops)
    assert len(set(graph.names)) == len(graph.names)
    assert "VarHandleOp" not in graph.ops  # the variable-creating functions are left out
    (path,) = (logdir / "traced").glob("plugins/profile/*/*.xplane.pb")
    profile = xplane.decode(path.read_bytes())
    for index in range(len(profile.steps)):
        known = profile.trace(index).op_types  # from the profile's op events
        shared = [name for name in known if name in graph.op_types]
        assert len(shared) >= 0.9 * (len(known) - 1)  # all but `(before this step)`
        # The post-optimization graph is what ran: fused convolutions included.
        assert all(graph.op_types[name] == known[name] for name in shared)
    raw = {n.name: n.op for n in train.node}
    assert raw[f"{MODEL}_1/enc_1_1/Relu"] == graph.op_types[f"{MODEL}/enc_1/Relu"]


# -- neither ---------------------------------------------------------------------------------------------


def test_a_run_without_a_graph_shows_the_trace_scope_tree(tb, logdir):
    tag = _profiled(tb, "profile_only")[0]
    body = _get(tb, "graph", run="profile_only", tag=tag, scope=MODEL)
    assert body["source"] == "trace" and body["edges"] == []
    space = _engine(logdir, "profile_only", 0)
    tree = space.tree("scope")
    node = tree.index[MODEL]
    assert {n["id"]: n["at_peak_bytes"] for n in body["nodes"]} == {
        tree.paths[c]: int(tree.figures[c, AT_PEAK]) for c in tree.children[node]}


# -- a Keras fit's resident weights, sized from its model config --------------------------------------


def test_a_keras_fits_parameters_and_slots_come_from_its_model_config(tb):
    """The callback writes no GraphDef, only the model's config: its layers' weights are sized from
    their settings and built shapes, the compiled Adam's two slots per trainable weight, and the
    summary's resident figures are Keras' own count (the demo U-Net, built again here)."""
    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    model = keras_unet.build(32, 0, 2, 8)  # demo_logs/generate.py's keras_unet: the defaults
    tag = _profiled(tb, "keras/train")[0]
    (device,) = _get(tb, "summary", run="keras/train", tag=tag)["devices"]
    resident = device["resident"]
    assert resident["param_count"] == model.count_params() > 0
    assert resident["param_bytes"] == 4 * model.count_params()
    assert resident["slot_bytes"] == 2 * 4 * sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert "Keras model's config" in resident["note"]
    layers = {row["scope"]: row["param_count"] for row in resident["layers"]}
    assert layers[f"{MODEL}/enc_0"] == 3 * 3 * 3 * 8 + 8  # a 3x3 conv from 3 to 8 channels, with its bias


_CALLBACK_TRACED = r'''
import sys
import tensorflow as tf

writer = tf.summary.create_file_writer(sys.argv[1])

@tf.function
def summarise(total, count):  # what a callback's profile window traces at an epoch's end
    return tf.math.divide_no_nan(total, count)

tf.summary.trace_on(graph=True, profiler=False)
summarise(tf.constant(3.0), tf.constant(2.0))
with writer.as_default():
    tf.summary.trace_export("batch_9", step=9)
writer.flush()
'''


def test_a_keras_fit_whose_profile_traced_other_functions_is_sized_from_its_model_config(tmp_path):
    """A profile window that crosses an epoch's end (a last small batch, a validation) has the
    callback's `batch_N` record hold the functions traced then: the model is still its config's
    (the record had been read instead, and the summary had no parameters at all)."""
    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    run = tmp_path / "keras" / "train"
    shutil.copytree(KERAS_RUN, run)
    script = tmp_path / "callback_traced.py"
    script.write_text(_CALLBACK_TRACED)
    subprocess.run([sys.executable, str(script), str(run)], check=True, timeout=600)
    assert ("graph_run_metadata_graph", "batch_9") in _summaries(run)  # the record is there, with a graph
    client = memory_app_client(tmp_path)
    tag = _profiled(client, "keras/train")[0]
    (device,) = _get(client, "summary", run="keras/train", tag=tag)["devices"]
    assert device["resident"]["param_count"] == keras_unet.build(32, 0, 2, 8).count_params()


_FUNCTION_GRAPH_EVENT = r'''
import sys
import tensorflow as tf

w = tf.Variable(tf.ones((4, 4)))

@tf.function
def train_step(x):
    return tf.reduce_sum(tf.matmul(x, w))

graph = train_step.get_concrete_function(tf.TensorSpec((None, 4))).graph
with tf.summary.create_file_writer(sys.argv[1]).as_default():
    tf.summary.graph(graph)  # a TF2 function's GraphDef: its variables come in as arguments
'''


def test_a_profile_beside_a_train_run_is_sized_from_that_runs_model_config(tmp_path, capsys):
    """tf_keras' callback writes its profile in `<log_dir>` and its events in `<log_dir>/train`, with the
    model config and a TF2 function's GraphDef (`__run_graph__`), whose variables come in as arguments:
    the profiled run's model is sized from the train run's config (it had said the run has neither a
    GraphDef nor a model config, and advised write_graph=True, which was on; and a GraphDef naming no
    variable had sized it at 0 parameters)."""
    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    from tb_memory_plugin import cli

    root = tmp_path / "tfk"
    (root / "train").mkdir(parents=True)
    for event in KERAS_RUN.glob("events.out.tfevents.*"):
        shutil.copy(event, root / "train")
    shutil.copytree(KERAS_RUN / "plugins", root / "plugins")
    script = tmp_path / "function_graph_event.py"
    script.write_text(_FUNCTION_GRAPH_EVENT)
    subprocess.run([sys.executable, str(script), str(root / "train")], check=True, timeout=600)
    from tensorboard.backend.event_processing import event_file_loader

    assert any(event.WhichOneof("what") == "graph_def" for path in (root / "train").glob("events.out.tfevents.*")
               for event in event_file_loader.LegacyEventFileLoader(str(path)).Load())
    expected = keras_unet.build(32, 0, 2, 8).count_params()
    client = memory_app_client(tmp_path)
    tag = _profiled(client, "tfk")[0]
    (device,) = _get(client, "summary", run="tfk", tag=tag)["devices"]
    assert device["resident"]["param_count"] == expected and device["resident_note"] is None
    for run in ((), ("--run", "."), ("--run", "tfk")):  # the logdir itself, alone or asked for by name
        assert cli.main(["summary", str(root), *run, "--json"]) == 0
        steps = [s for s in json.loads(capsys.readouterr().out)["steps"] if s["status"] == "ok"]
        assert steps and all(s["devices"][0]["resident"]["param_count"] == expected for s in steps), run
    # A run below the logdir, asked for alone, reads the `train` run below it too.
    (tmp_path / "parent").mkdir()
    shutil.move(str(root), str(tmp_path / "parent" / "tfk"))
    assert cli.main(["summary", str(tmp_path / "parent"), "--run", "tfk", "--json"]) == 0
    steps = [s for s in json.loads(capsys.readouterr().out)["steps"] if s["status"] == "ok"]
    assert steps and all(s["devices"][0]["resident"]["param_count"] == expected for s in steps)


def test_a_keras_config_tensorboard_cannot_read_still_sizes_the_model():
    """TensorBoard's `keras_util` fails on some Keras 3 configs (attention fed a mask, dict outputs):
    the model is still sized from its config, and its layers are the graph's nodes, without edges."""
    import keras

    from tensorboard.plugins.graph import keras_util

    inp = keras.Input((64,), name="feat")
    hidden = keras.layers.Dense(256, activation="relu", name="trunk")(inp)
    outputs = {"cls_out": keras.layers.Dense(10, name="cls_out")(hidden),
               "reg_out": keras.layers.Dense(1, name="reg_out")(hidden)}
    model = keras.Model(inp, outputs, name="multi")
    model.compile("adam", loss={"cls_out": "mse", "reg_out": "mse"})
    config = json.loads(model.to_json())
    with pytest.raises(Exception):  # noqa: B017 - whatever it raises (a KeyError in TensorBoard 2.21)
        keras_util.keras_model_to_graph_def(config)
    graph = function_graph.from_keras_config(model.to_json().encode())
    assert graph is not None and {"multi/trunk", "multi/cls_out", "multi/reg_out"} <= set(graph.names)
    assert sum(t.count for t in graph.model.tensors if t.kind == "variable") == model.count_params()


def test_keras_configs_of_common_layers_are_sized_as_keras_counts_them():
    import keras

    from tb_memory_plugin import keras_model

    inp = keras.Input((16, 16, 3))
    x = keras.layers.Normalization(name="norm")(inp)  # EfficientNet's first layer
    x = keras.layers.Conv2D(8, 3, padding="same", name="c")(x)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.DepthwiseConv2D(3, depth_multiplier=2, name="dw")(x)
    x = keras.layers.SeparableConv2D(4, 3, use_bias=False, name="sep")(x)
    x = keras.layers.Conv2DTranspose(5, 3, name="tr")(x)
    x = keras.layers.Reshape((-1, 5))(x)
    x = keras.layers.LayerNormalization(name="ln")(x)
    x = keras.layers.LSTM(6, return_sequences=True, name="lstm")(x)
    x = keras.layers.GRU(7, name="gru")(x)
    x = keras.layers.Dense(3, name="d")(x)
    model = keras.Model(inp, x, name="mix")
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    for optimizer, slots in ((keras.optimizers.RMSprop(momentum=0.9), 2), (keras.optimizers.SGD(), 0),
                             (keras.optimizers.Adam(amsgrad=True), 3),
                             # mixed precision's wrapper: its inner Adam's m and v (a trial's read 0 B)
                             (keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam()), 2),
                             # every optimizer's own options, a copy of each weight each (trial W: `other`)
                             (keras.optimizers.Adam(gradient_accumulation_steps=2), 3),
                             (keras.optimizers.SGD(momentum=0.9, use_ema=True), 2)):
        model.compile(optimizer, "mse")
        sized = keras_model.model_from_config(json.loads(model.to_json()))
        assert sum(t.count for t in sized.tensors if t.kind == "variable") == model.count_params()
        assert sum(t.count for t in sized.tensors if t.kind == "slot") == slots * trainable
        assert "slots are not counted" not in sized.note  # SGD keeps none: nothing is missing
    # An optimizer whose slots are not sized here (Adafactor's are factored) is said to be missing.
    model.compile(keras.optimizers.Adafactor(), "mse")
    assert "slots are not counted" in keras_model.model_from_config(json.loads(model.to_json())).note
    model.compile("sgd", "mse")  # by its string name
    assert "slots are not counted" not in keras_model.model_from_config(json.loads(model.to_json())).note
    # Keras 2 (tf_keras) writes its version and no compile config: the optimizer is not known, said so (trial
    # AL's Adam had been sized as keeping no slots). A Keras 3 model never compiled keeps none, unsaid.
    keras2 = {key: value for key, value in json.loads(model.to_json()).items() if key != "compile_config"}
    keras2["keras_version"] = "2.21.0"
    sized = keras_model.model_from_config(keras2)
    assert "the optimizer's slots are not counted (a Keras 2 model's config does not name its optimizer)" in sized.note
    assert not [t for t in sized.tensors if t.kind == "slot"]
    uncompiled = {key: value for key, value in json.loads(model.to_json()).items() if key != "compile_config"}
    assert "slots are not counted" not in keras_model.model_from_config(uncompiled).note
    # A layer of a class not sized here is named, without saying it holds weights (trial Y's ViT `patchify`,
    # a reshape, had been said to hold weights not counted).
    config = json.loads(model.to_json())
    config["config"]["layers"].append({"class_name": "Patchify", "module": "user", "config": {"name": "patchify"}})
    note = keras_model.model_from_config(config).note
    assert "1 layer of a class the config does not size (mix/patchify): any weights it holds are not counted" in note
    # Attention: query, key, value and output projections, from the shapes it was built for.
    query, value = keras.Input((5, 16)), keras.Input((7, 12))
    attention = keras.Model([query, value], keras.layers.MultiHeadAttention(3, 4, name="mha")(query, value), name="att")
    sized = keras_model.model_from_config(json.loads(attention.to_json()))
    assert sum(t.count for t in sized.tensors if t.kind == "variable") == attention.count_params() == 724
    # A Bidirectional RNN: its layer, each way.
    seq = keras.Input((12, 5))
    bidirectional = keras.Model(seq, keras.layers.Bidirectional(keras.layers.LSTM(3), name="bi")(seq), name="birnn")
    sized = keras_model.model_from_config(json.loads(bidirectional.to_json()))
    assert sum(t.count for t in sized.tensors if t.kind == "variable") == bidirectional.count_params() == 2 * 4 * (5 + 3 + 1) * 3
    # ... below the names Keras gives each way's copy, as its variables (and the step's ops) are named.
    ways = {t.name.split("/")[2] for t in sized.tensors if t.kind == "variable"}
    assert ways == {w.path.split("/")[1] for w in bidirectional.weights} == {"forward_lstm", "backward_lstm"}
    # A backward layer given keeps its own name.
    given = keras.Model(seq, keras.layers.Bidirectional(keras.layers.LSTM(3, name="rnn"), backward_layer=keras.layers.LSTM(
        3, go_backwards=True, name="back"), name="bi")(seq), name="birnn2")
    sized = keras_model.model_from_config(json.loads(given.to_json()))
    assert {t.name.split("/")[2] for t in sized.tensors if t.kind == "variable"} == {
        w.path.split("/")[1] for w in given.weights} == {"forward_rnn", "back"}
    # An op called on the model's tensors (a mask's `not_equal`) is a layer of the config without weights.
    tokens = keras.Input((12,), dtype="int32")
    masked = keras.Model(tokens, keras.layers.Dense(2, name="d")(
        keras.ops.cast(keras.ops.not_equal(tokens, 0), "float32")), name="masked")
    sized = keras_model.model_from_config(json.loads(masked.to_json()))
    assert "does not size" not in sized.note and sum(t.count for t in sized.tensors if t.kind == "variable") == 12 * 2 + 2
    # A layer of a class not sized here is named, and counted as nothing.
    prelu = keras.Model(inp, keras.layers.PReLU(name="p")(inp), name="pr")
    sized = keras_model.model_from_config(json.loads(prelu.to_json()))
    assert sized is None  # nothing sized at all
    both = keras.Model(inp, keras.layers.Dense(2, name="d")(keras.layers.PReLU(name="p")(inp)), name="both")
    sized = keras_model.model_from_config(json.loads(both.to_json()))
    assert "both/p" in sized.note and sum(t.count for t in sized.tensors if t.kind == "variable") == 3 * 2 + 2
    # Augmentation layers hold no weights: nothing is said to be missing.
    augmented = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.RandomFlip(name="flip"),
                                  keras.layers.RandomRotation(0.1, name="rot"), keras.layers.RandomZoom(0.1, name="zoom"),
                                  keras.layers.RandomContrast(0.1, name="contrast"), keras.layers.Conv2D(4, 3, name="c")],
                                 name="aug")
    assert not augmented.layers[0].weights
    sized = keras_model.model_from_config(json.loads(augmented.to_json()))
    assert "does not size" not in sized.note
    assert sum(t.count for t in sized.tensors if t.kind == "variable") == augmented.count_params()
