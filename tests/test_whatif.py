"""The batch-size what-if (issue 12): the engine, the `whatif` route and `tb-memory whatif`, on the
demo's real TensorFlow traces (U-Net and ResNet at batch 2 and 4) and a real batch-8 trace, and on
real TF2 profiles (XPlane) of a Keras 3 model at batch 4 and 8."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import io
import json
import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tracedata import REPO, demo_runs_with_bad_steps, engine_step, memory_app_client, profile_jit_runs
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_whatif  # noqa: E402  (the Keras profiling script the accuracy benchmark runs too)
from tb_memory_plugin import analysis, cli, findings, graph, store, whatif, whatif_report
from tb_memory_plugin import names as names_mod, trace as trace_mod
from tb_memory_plugin.names import XLA_PROGRAM_OP_TYPE
from tb_memory_plugin.figures import ACTIVATIONS, ALLOCATED, AT_PEAK, INPUTS, OPTIMIZER, OUTPUT, format_bytes
from tb_memory_plugin.sources import xplane

DEMO = REPO / "demo_logs"
PREFIX = "/data/plugin/memory/"
RUNS = ("unet_b2", "unet_b4", "resnet9_b2", "resnet9_b4")
TAGS = ("step_1", "step_2", "step_3")


@functools.lru_cache(maxsize=None)
def demo_step(run: str, tag: str = "step_3"):
    step = engine_step(DEMO, run, tag)
    assert step.status == "ok", step.message
    return step


def predictor(run: str, tag: str = "step_3") -> whatif.OneStep:
    step = demo_step(run, tag)
    return whatif.one_step(step, step.space(None))


def fitted(model: str) -> whatif.Fitted:
    return whatif.Fitted([(batch, demo_step(f"{model}_b{batch}").space(None)) for batch in (2, 4)])


def traced(run: str, tag: str = "step_3") -> whatif.Traced:
    step = demo_step(run, tag)
    return whatif.Traced(run, tag, int(tag.split("_")[1]), "run_metadata", step, step.space(None))


# -- the engine ------------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS)
def test_the_batch_is_read_from_the_feeds(run):
    assert whatif.traced_batch(demo_step(run)) == int(run[-1])


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("tag", TAGS)
def test_one_step_at_the_traced_batch_is_the_traced_step(run, tag):
    space = demo_step(run, tag).space(None)
    prediction = predictor(run, tag).predict(int(run[-1]), top=10**6)
    assert prediction.peak_rise_bytes == space.peak_rise_bytes > 0
    assert prediction.start_bytes == space.start_bytes
    # Every layer holds what it held at the traced peak, and the layers add up to the peak.
    assert all(layer["at_peak_bytes"] == layer["traced_at_peak_bytes"] for layer in prediction.layers)
    assert sum(layer["at_peak_bytes"] for layer in prediction.layers) == space.peak_rise_bytes


def test_what_carries_the_batch_scales_and_parameters_do_not():
    one = predictor("unet_b2")
    trace = one.space.trace
    scaled = {}
    for name, scales in zip((trace.name(int(e)) for e in trace.event_exec), one.scales.tolist()):
        scaled.setdefault(name, set()).add(scales)
    assert scaled["shared_model/unet_01/LeakyRelu"] == {True}  # activations
    assert scaled["gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput"] == {True}
    # A filter's gradient has the filter's shape; Adam's updates and the L2 loss have no batch.
    assert scaled["gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropFilter"] == {False}
    assert scaled["gradients/loss/L2Loss_1_grad/mul"] == {False}
    assert scaled["loss/L2Loss_1"] == {False}
    # Max pooling's output scales; so does its flat workspace (a multiple of the batch).
    assert scaled["shared_model/pool"] == {True}
    assert 0.85 < one.scaled_share < 1
    # Feeds grow the bytes in use before the step: the images ([2, 64, 64, 9] float32) and the targets.
    image = 2 * 64 * 64 * 9 * 4
    assert one.resident_batch_bytes >= image + 2 * 64 * 64 * 2 * 4
    # mklcpu's start counts only its requests of 256 KiB and more: the images at batch 2 already, the rest
    # from where it grows that large (by batch 16 all of it).
    assert one.space.start_counts_from == 256 * 1024 and image >= 256 * 1024 > one.resident_batch_bytes - image
    assert one.start_bytes(4) - one.start_bytes(2) == image
    assert one.start_bytes(16) - one.start_bytes(2) == 8 * one.resident_batch_bytes - image
    # So read, batch 4's start is the one the demo's batch-4 run measured, within the readings' 32 KiB steps.
    assert abs(one.start_bytes(4) - demo_step("unet_b4").space(None).start_bytes) <= 32 * 1024


@pytest.mark.parametrize("model", ["unet", "resnet9"])
def test_one_step_predicts_the_other_demo_batch(model):
    for source, target in ((2, 4), (4, 2)):
        measured = demo_step(f"{model}_b{target}").space(None).peak_rise_bytes
        assert predictor(f"{model}_b{source}").peak_rise(target) == pytest.approx(measured, rel=0.01)


@pytest.mark.parametrize("model", ["unet", "resnet9"])
def test_the_fit_through_two_runs_reproduces_both(model):
    fit = fitted(model)
    for batch in (2, 4):
        space = demo_step(f"{model}_b{batch}").space(None)
        prediction = fit.predict(batch, top=10**6)
        assert prediction.peak_rise_bytes == space.peak_rise_bytes
        assert prediction.start_bytes == space.start_bytes
        # Layer by layer, too: each holds at the traced peak what the run's own step held.
        names, of_name = whatif._layers(space)
        held = dict(zip(names, np.bincount(of_name[space.trace.name_code], space.exec_columns[AT_PEAK],
                                           len(names)).astype(np.int64).tolist()))
        assert {layer["layer"]: layer["at_peak_bytes"] for layer in prediction.layers} == \
            {name: value for name, value in held.items() if value > 0}
    layer = next(layer for layer in fit.predict(8).layers if layer["layer"].endswith("/conv_in")
                 or layer["layer"].endswith("/unet_00"))
    assert layer["per_sample_bytes"] > 0 and layer["at_peak_bytes"] == pytest.approx(
        layer["fixed_bytes"] + 8 * layer["per_sample_bytes"], abs=8)
    # Where a layer's fixed part is below zero, its line is its per-sample bytes above `from_batch`.
    for layer in fit.predict(8, top=10**6).layers:
        if layer["from_batch"] is None:
            assert layer["fixed_bytes"] >= -layer["per_sample_bytes"] * 0.05 or layer["per_sample_bytes"] <= 0
        else:
            assert type(layer["from_batch"]) is float and layer["fixed_bytes"] < 0
            assert layer["per_sample_bytes"] * (8 - layer["from_batch"]) == pytest.approx(
                layer["at_peak_bytes"], abs=layer["per_sample_bytes"] * 0.05 + 8)


def test_a_fixed_part_below_zero_reads_as_where_the_line_starts():
    """A layer the peak moved into between the traced batches (a GAN's discriminator: 0 B at batch
    16's peak, 1.8 MiB at 64's) fits a fixed part below zero; it reads as per-sample bytes above the
    batch where its line starts, which the CLI and the page show rather than a negative fixed cost."""
    assert whatif.from_batch(-559104.0, 36992.0) == 15.1
    assert whatif.line_text(-559104.0, 36992.0) == "36,992 B per sample above batch 15.1"
    assert 36992 * (64 - 15.1) == pytest.approx(-559104 + 36992 * 64, rel=1e-3)
    # A fixed part at or above zero, a few bytes below it, or a line that falls: said as fitted.
    assert whatif.from_batch(0.0, 1024.0) is whatif.from_batch(-1e-9, 1024.0) is None
    assert whatif.from_batch(-3.0, 2441216.0) is None
    assert whatif.from_batch(-100.0, -5.0) is None
    assert whatif.line_text(1648277.4, 2519.2) == "1,648,277 B fixed + 2,519 B per sample"
    assert [whatif.batch_text(b) for b in (15.1, 2.0, 2097152.0, 123456.7)] == ["15.1", "2", "2,097,152", "123,456.7"]


def test_a_fit_needs_two_batch_sizes():
    with pytest.raises(whatif.WhatIfError, match="two batch sizes"):
        whatif.Fitted([(2, demo_step("unet_b2").space(None)), (2, demo_step("unet_b2", "step_1").space(None))])


def test_a_fit_reads_one_model():
    """Steps of two different models are not one model at two batch sizes: no fit through them."""
    with pytest.raises(whatif.WhatIfError, match="share .* of their layers"):
        whatif.WhatIf([traced("unet_b2"), traced("resnet9_b4")], 8)
    assert whatif.WhatIf([traced("unet_b2"), traced("unet_b4")], 8).fitted is not None


_KERAS_TWICE = """
import os, sys
os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
import numpy as np, keras
for batch in (16, 48):  # one process: the second model's layers are `sequential_1/dense_3`, its optimizer `adam_1`
    model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(300, activation="relu"),
                              keras.layers.Dense(200, activation="relu"), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.random.rand(batch * 8, 100).astype(np.float32), np.random.randint(0, 10, batch * 8)
    board = keras.callbacks.TensorBoard(os.path.join(sys.argv[1], f"mlp_b{batch}"), profile_batch=(3, 4))
    model.fit(x, y, batch_size=batch, epochs=1, callbacks=[board], verbose=0)
"""


def test_one_keras_model_built_twice_in_one_process_is_fitted(tmp_path):
    """Keras numbers a model built again (`sequential_1/dense_3`, `adam_1`): still one model, fitted
    through both batch sizes, each read at its own batch (the numbered optimizer's ops are the
    optimizer's, not forward-pass tensors)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _KERAS_TWICE, str(tmp_path)], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    steps = []
    for batch in (16, 48):
        (path,) = tmp_path.glob(f"mlp_b{batch}/train/plugins/profile/*/*.xplane.pb")
        decoded = xplane.decode(path.read_bytes())
        step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
        steps.append(whatif.Traced(f"mlp_b{batch}", "step", 0, "xplane", step, step.space(None)))
    assert [traced.batch for traced in steps] == [16, 48]
    assert any(name.startswith("adam_1/") for name in steps[1].space.names.raw)
    question = whatif.WhatIf(steps, 64)
    assert question.fitted is not None and question.fitted.batches == [16, 48]
    # Each layer is fitted through both steps, by the first step's names (names.renumbering).
    layers = question.fitted.layer_names
    assert {"sequential/dense", "sequential/dense_1", "sequential/dense_2"} <= set(layers)
    assert not any(layer.startswith("sequential_1/") for layer in layers)
    # Exact through both points: each step's own layers, the second's by the first's names; but a layer
    # holding the same requests in other chunks at both peaks (the allocator's, at random between runs)
    # goes through their mean.
    # (or a name in it) goes through their mean: the fit's moves, which add up to zero over the steps.
    fitted = question.fitted
    _assert_moves_cancel(fitted)
    for moved, (traced_step, renamed) in zip(fitted.moved, (
            (steps[0], {}), (steps[1], {"sequential_1/dense_3": "sequential/dense",
                                        "sequential_1/dense_4": "sequential/dense_1",
                                        "sequential_1/dense_5": "sequential/dense_2"}))):
        space = traced_step.space
        names, of_name = whatif._layers(space)
        held = np.bincount(of_name[space.trace.name_code], space.exec_columns[AT_PEAK], len(names)).astype(np.int64)
        rows = {row["layer"]: row["at_peak_bytes"] for row in fitted.predict(traced_step.batch, top=10**6).layers}
        for name, value in zip(names, held.tolist()):
            if value > 0 and name.startswith("sequential"):
                name = renamed.get(name, name)
                assert rows[name] == pytest.approx(value + moved.get(name, 0), abs=8), name


def _assert_moves_cancel(fitted) -> None:
    """The fit leaves traced peaks only in its chunk layers, each by moves to its mean: they add up to
    zero over the steps (as many bytes above as below)."""
    moved_layers = {layer for moved in fitted.moved for layer in moved}
    assert moved_layers == fitted.chunk_layers
    for layer in moved_layers:
        assert sum(moved.get(layer, 0) for moved in fitted.moved) == pytest.approx(0, abs=8), layer


def _traced_real(name: str, build, feed, one_thread: bool = False) -> whatif.Traced:
    """A real FULL_TRACE training step (after a warm-up) of the graph `build` makes, with `feed`
    (`one_thread`: its ops one at a time, so that two runs peak at the same point of the step)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        placeholders, train = build(tf)
        init = tf.compat.v1.global_variables_initializer()
    metadata = tf.compat.v1.RunMetadata()
    feed_dict = dict(zip(placeholders, feed))
    # Its own pool: sessions otherwise share the process's first session's pool, whatever they ask.
    config = (tf.compat.v1.ConfigProto(inter_op_parallelism_threads=1, use_per_session_threads=True)
              if one_thread else None)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        session.run(train, feed_dict)
        session.run(train, feed_dict, run_metadata=metadata,
                    options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE))
    step = store.analyse_bytes(metadata.SerializeToString())
    return whatif.Traced(name, "step_1", 1, "run_metadata", step, step.space(None))


def _mlp(batch: int, hidden: int, inputs: int = 32) -> whatif.Traced:
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, inputs), name="x")
        h = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("w0", (inputs, hidden))))
        h = tf.nn.relu(tf.matmul(h, tf.compat.v1.get_variable("w1", (hidden, 16))))
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
    return _traced_real(f"mlp_b{batch}", build, [np.ones((batch, inputs), np.float32)])


def test_a_what_if_on_an_allocator_two_devices_share_says_so():
    """Two CPU devices of one session share one allocator (`mklcpu`): a device's what-if predicts its own
    ops' bytes, and the allocator holds the other's too. The answer says so (a stranger's 'largest batch
    that fits' had been 542 where the allocator's records, both devices', passed the limit at 512)."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None, 64), name="x")
        with tf.device("/cpu:0"):
            h = tf.nn.relu(tf.matmul(x, tf1.get_variable("a/w", (64, 256))))
        with tf.device("/cpu:1"):
            out = tf.nn.relu(tf.matmul(h, tf1.get_variable("b/w", (256, 256))))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(out)))
        init = tf1.global_variables_initializer()
    metadata = tf1.RunMetadata()
    config = tf1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=False)
    with tf1.Session(graph=graph, config=config) as session:
        session.run(init)
        feed = {x: np.ones((32, 64), np.float32)}
        session.run(train, feed)
        session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
    step = store.analyse_bytes(metadata.SerializeToString())
    shared = [space for space in step.spaces if space.trace.shared_with]
    assert len(shared) == 2, [space.trace.id for space in step.spaces]
    for space in shared:
        answer = whatif.WhatIf([whatif.Traced("two_cpus", "step_1", 1, "run_metadata", step, space)], 64)
        (note,) = [n for n in answer.notes if "is shared with" in n]
        assert note.startswith(f"{space.trace.allocator} is shared with {space.trace.shared_with[0]}")
    alone = whatif.WhatIf([_mlp(32, 48)], 64)
    assert not any("is shared with" in n for n in alone.notes)


def test_a_queues_batch_is_the_traced_batch_and_in_the_rise():
    """A TF1 queue pipeline: the dequeued batch tells the traced batch; it is allocated in the step,
    so it scales in the rise, not again as bytes held before the step."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        queue = tf1.FIFOQueue(128, [tf.float32], shapes=[[64]])
        enqueue = queue.enqueue_many([tf.ones([32, 64])])
        batch = queue.dequeue_many(32, name="batch")
        h = tf.nn.relu(tf.matmul(batch, tf1.get_variable("w", (64, 48))))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        init = tf1.global_variables_initializer()
    metadata = tf1.RunMetadata()
    with tf1.Session(graph=graph) as session:
        session.run(init)
        for _ in range(2):
            session.run(enqueue)
        session.run(train)
        session.run(train, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
    step = store.analyse_bytes(metadata.SerializeToString())
    predictor = whatif.one_step(step, step.space(None))
    assert predictor.batch == 32 and predictor.scales.any()
    space = step.space(None)
    dequeue = space.names.raw.index("batch")
    assert space.names.category[dequeue] == INPUTS and space.name_column(ALLOCATED)[dequeue] == 32 * 64 * 4
    # Held before the step and grown with the batch: only what grappler folded into a [32, 48]
    # constant kept across steps (where it did), not the dequeued batch, which the rise holds.
    kept = space.trace.persistent
    assert predictor.resident_batch_bytes == int(kept[kept == 32 * 48 * 4].sum())


def test_forward_tensors_shaped_like_parameters_are_warned_of():
    """At a batch equal to a layer's input width, its activations are shaped like its weights: fed the
    batch (x @ w0, x a feed), they carry it and scale (they had not: a stranger's model traced at batch
    512 into layers 512 wide had scaled nothing); the backward pass's look-alikes cannot be told from
    the weights' gradients, so the one-step prediction says it may be off; at another batch it says
    nothing."""
    traced = _mlp(64, 48, inputs=64)
    warned = whatif.WhatIf([traced], 128)  # x @ w0: [64, 48], shaped like w0
    assert warned.one_step.batch == 64 and "shaped like the model's parameters" in warned.one_step.warning
    assert 0 < warned.one_step.scales.sum() < warned.one_step.scales.size
    trace = traced.space.trace
    forward = [i for i, name in enumerate(trace.distinct_names)
               if traced.space.names.op_types[i] == "MatMul" and not name.startswith("gradients/")]
    fed = [e for e in range(trace.event_exec.size) if trace.name_code[trace.event_exec[e]] in forward
           and abs(int(trace.event_bytes[e])) == 64 * 48 * 4]
    assert fed and all(warned.one_step.scales[fed])  # x @ w0's [64, 48], fed the batch, scales
    body = whatif_report.whatif_dict(warned)
    assert body["predictions"]["one_step"]["warning"] == warned.one_step.warning
    clean = whatif.WhatIf([_mlp(40, 48, inputs=64)], 80)
    assert clean.one_step.batch == 40 and clean.one_step.warning is None
    assert whatif_report.whatif_dict(clean)["predictions"]["one_step"]["warning"] is None


def _boxes_model(batch: int, boxes_per_image: int = 4) -> whatif.Traced:
    """A real step of a two-input model: images' features `x` `[batch, 16]` and their boxes fed as
    rows of their own, `[boxes_per_image x batch, 8]` (a detection head's boxes)."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 16), name="x")
        boxes = tf.compat.v1.placeholder(tf.float32, (None, 8), name="boxes")
        per_box = tf.nn.relu(tf.matmul(boxes, tf.compat.v1.get_variable("box/w", (8, 1000))))
        pooled = tf.reshape(per_box, (-1, boxes_per_image * 1000))
        h = tf.concat([pooled, tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("img/w", (16, 500))))], 1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, tf.compat.v1.get_variable("out/w", (boxes_per_image * 1000 + 500, 1)))))
        return [x, boxes], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(0)
    return _traced_real(f"boxes_b{batch}", build, [rng.random((batch, 16), np.float32),
                                                   rng.random((boxes_per_image * batch, 8), np.float32)])


def test_a_feed_of_items_several_per_example_is_warned_of():
    """Boxes fed as rows of their own (`[4 x batch, 8]`) make tensors as long as the boxes, which
    the one step does not scale (the trace cannot tell they grow with the batch): it says so,
    naming the feed as the graph names it, and how much the step's outputs of that length weigh."""
    traced = _boxes_model(6)
    assert whatif.traced_batch(traced.step) == 6
    assert whatif.per_item_feeds(traced.step, 6) == {24: ("boxes", (24, 8))}
    predictor = whatif.one_step(traced.step, traced.space)
    feeds, held = predictor.per_item
    assert held >= 24 * 1000 * 4  # the per-box activations, at least
    assert predictor.warning.startswith("the feed boxes [24, 8] is 4 times the batch (6) long")
    # The real step at twice the batch peaks higher than the prediction, as it warns.
    assert whatif.predicted_bytes(predictor, 12, absolute=False) < _boxes_model(12).space.peak_rise_bytes
    # One box an image: the boxes are the batch, scaled, and nothing is said.
    one = whatif.one_step(*(lambda t: (t.step, t.space))(_boxes_model(6, boxes_per_image=1)))
    assert one.per_item is None and one.warning is None


def test_a_feed_of_examples_outvoted_by_feeds_of_items_is_warned_of():
    """Images `[6, 4, 4]` fed beside their boxes `[24, 8]` and the boxes' labels `[24, 1]`: two feeds of items
    outvote the images, and the batch is read as 24. The one step says the images hold 6 examples and how to
    give that batch (trial AK: a detection model's what-if at 4 times the batch had predicted 79% low, unsaid);
    given it, nothing of it is said. A feed as rich as the batch's (prototypes `[10, 64]` beside examples
    `[40, 64]`) or holding the batch further in (an RNN's state `[2, 2, 20, 64]`) is no outvoted one (review AK)."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 4, 4), name="images")
        boxes = tf.compat.v1.placeholder(tf.float32, (None, 8), name="boxes")
        labels = tf.compat.v1.placeholder(tf.float32, (None, 1), name="box_labels")
        per_box = tf.nn.relu(tf.matmul(boxes, tf.compat.v1.get_variable("box/w", (8, 1000))))
        box_loss = tf.reduce_mean(tf.square(tf.matmul(per_box, tf.compat.v1.get_variable("cls/w", (1000, 1))) - labels))
        image = tf.reshape(x, (-1, 16))
        image_loss = tf.reduce_mean(tf.nn.relu(tf.matmul(image, tf.compat.v1.get_variable("img/w", (16, 500)))))
        return [x, boxes, labels], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(box_loss + image_loss)
    rng = np.random.default_rng(0)
    traced = _traced_real("images_and_boxes_b6", build, [rng.random((6, 4, 4), np.float32),
                                                          rng.random((24, 8), np.float32), rng.random((24, 1), np.float32)])
    assert whatif.traced_batch(traced.step) == 24
    assert whatif.shorter_feeds(traced.step, 24) == {6: ("images", (6, 4, 4))}
    predictor = whatif.one_step(traced.step, traced.space)
    assert ("the feed images [6, 4, 4] holds 6 examples, 4 times fewer than the batch read from the most feeds' "
            "first dimension (24)") in predictor.warning
    assert "--traced-batch 6" in predictor.warning
    given = whatif.one_step(traced.step, traced.space, 6)
    assert "holds 6 examples" not in (given.warning or "")

    def prototypes(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 64), name="x")
        table = tf.compat.v1.placeholder(tf.float32, (10, 64), name="prototypes")
        h = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("w", (64, 64))))
        return [x, table], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_mean(tf.square(tf.matmul(h, table, transpose_b=True))))

    def rnn_state(tf):
        x = tf.compat.v1.placeholder(tf.float32, (20, 35, 64), name="inputs")
        y = tf.compat.v1.placeholder(tf.float32, (20, 64), name="targets")
        state = tf.compat.v1.placeholder(tf.float32, (2, 2, 20, 64), name="init_state")
        h = tf.nn.relu(tf.matmul(tf.reduce_sum(state, axis=[0, 1]) + tf.reduce_mean(x, axis=1),
                                 tf.compat.v1.get_variable("w", (64, 64))))
        return [x, y, state], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h - y)))

    for name, model, feed in (("prototypes", prototypes, [rng.random((40, 64), np.float32), rng.random((10, 64), np.float32)]),
                              ("rnn_state", rnn_state, [rng.random((20, 35, 64), np.float32), rng.random((20, 64), np.float32),
                                                        rng.random((2, 2, 20, 64), np.float32)])):
        other = _traced_real(name, model, feed)
        batch = whatif.traced_batch(other.step)
        assert batch in (40, 20) and whatif.shorter_feeds(other.step, batch) == {}, name
        assert "examples," not in (whatif.one_step(other.step, other.space).warning or ""), name


def _ragged_model(batch: int, values: int) -> whatif.Traced:
    """A real step of a model fed a ragged batch as its flat values `[values, 8]` and each example's count
    of them (`row_lengths`, `[batch]`), pooled per example: the values' count is no multiple of the batch."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 16), name="x")
        flat = tf.compat.v1.placeholder(tf.float32, (None, 8), name="ragged_values")
        lengths = tf.compat.v1.placeholder(tf.int32, (None,), name="row_lengths")
        per_value = tf.nn.relu(tf.matmul(flat, tf.compat.v1.get_variable("value/w", (8, 1000))))
        pooled = tf.reduce_sum(tf.RaggedTensor.from_row_lengths(per_value, lengths), axis=1)
        h = tf.concat([pooled, tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("img/w", (16, 500))))], 1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, tf.compat.v1.get_variable("out/w", (1500, 1)))))
        return [x, flat, lengths], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(0)
    lengths = np.bincount(rng.integers(0, batch, values), minlength=batch).astype(np.int32)
    return _traced_real(f"ragged_b{batch}", build, [rng.random((batch, 16), np.float32), rng.random((values, 8), np.float32),
                                                    lengths])


def test_a_ragged_feeds_values_no_multiple_of_the_batch_are_warned_of():
    """A ragged feed's flat values, 17 at batch 6 (no multiple of it), make tensors as long as they are, which
    the one step does not scale: it says so (trial AG: a ragged branch had stayed at its traced size, 15% low,
    and nothing was said), and the real step at twice the batch peaks higher than predicted."""
    traced = _ragged_model(6, 17)
    assert whatif.traced_batch(traced.step) == 6
    assert whatif.per_item_feeds(traced.step, 6) == {17: ("ragged_values", (17, 8))}
    predictor = whatif.one_step(traced.step, traced.space)
    assert predictor.warning.startswith("the feed ragged_values [17, 8] is 17 long, more than the batch (6): tensors of its "
                                        "length")
    assert whatif.predicted_bytes(predictor, 12, absolute=False) < _ragged_model(12, 35).space.peak_rise_bytes


def test_a_table_fed_whole_to_a_placeholder_with_default_is_no_feed_of_items():
    """A PlaceholderWithDefault of a fixed `[2000, 64]` table, fed whole (review AI: trial AG's `bias_table` was
    warned of as a feed of items, its length no multiple of the batch): the run graph names its node so, and
    nothing is said; without the graph the step cannot tell, and says it."""
    import tensorflow as tf

    graph_ = tf.Graph()
    with graph_.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 64), name="x")
        table = tf.compat.v1.placeholder_with_default(tf.zeros((2000, 64)), (2000, 64), name="table")
        ids = tf.compat.v1.placeholder(tf.int32, (None,), name="ids")
        h = tf.nn.relu(tf.matmul(x + tf.gather(table * 2.0, ids), tf.compat.v1.get_variable("w", (64, 64))))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        init = tf.compat.v1.global_variables_initializer()
    from tracedata import traced_graph_step

    feed = {x: np.ones((6, 64), np.float32), table: np.ones((2000, 64), np.float32), ids: np.arange(6, dtype=np.int32)}
    metadata = traced_graph_step(graph_, init, train, feed)
    run_graph = graph.RunGraph.from_bytes(graph_.as_graph_def().SerializeToString())
    with_graph, without = store.analyse_bytes(metadata, run_graph), store.analyse_bytes(metadata)
    assert whatif.traced_batch(with_graph) == 6
    assert whatif.per_item_feeds(with_graph, 6) == {}
    # Fed whole, it votes for no batch either (review AJ: two such tables had outvoted the batch).
    assert not any(2000 in shape for shape in whatif._shapes_of(with_graph, INPUTS))
    assert whatif.per_item_feeds(without, 6) == {2000: ("table", (2000, 64))}


def _experts_model(batch: int) -> whatif.Traced:
    """A real step of a mixture of experts: tf.dynamic_partition sends each example's row to one of four
    experts (here by a fed id, evenly), tf.dynamic_stitch puts their outputs back in order. Its ops run one
    at a time: run in parallel, the experts' overlap (and so the peak) moves more from run to run."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 48), name="x")
        expert = tf.compat.v1.placeholder(tf.int32, (None,), name="expert")
        parts = tf.dynamic_partition(x, expert, 4)
        rows = tf.dynamic_partition(tf.range(tf.shape(x)[0]), expert, 4)
        outs = []
        for e in range(4):
            with tf.compat.v1.variable_scope(f"expert{e}"):
                h = tf.nn.relu(tf.matmul(parts[e], tf.compat.v1.get_variable("w1", (48, 512))))
                outs.append(tf.matmul(h, tf.compat.v1.get_variable("w2", (512, 48))))
        loss = tf.reduce_mean(tf.square(tf.dynamic_stitch(rows, outs)))
        return [x, expert], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    rng = np.random.default_rng(0)
    return _traced_real(f"experts_b{batch}", build, [rng.random((batch, 48), np.float32),
                                                     (np.arange(batch) % 4).astype(np.int32)], one_thread=True)


def test_a_mixture_of_experts_scales_each_experts_share_of_the_batch():
    """Trial U's mixture of experts: each expert's tensors are as long as its share of the batch, a first
    dimension no shape ties to the batch, so the one step scaled nothing but the router's and predicted the
    traced peak at every batch (24% low at twice it, 57% at 16 times). The partition's outputs add up to the
    batch: their first dimensions carry it."""
    small, large = _experts_model(64), _experts_model(128)
    predictor = whatif.one_step(small.step, small.space)
    space = small.space
    experts = [i for i, name in enumerate(space.names.graph_names) if name.startswith("expert")]
    rows = np.isin(space.trace.name_code[space.trace.event_exec], experts) & (space.trace.event_bytes > 0)
    assert rows.any() and predictor.scales[rows].all()

    def allocated(space, event_bytes):  # each name's allocations
        names = space.names.graph_names
        out = collections.Counter()
        for code, size in zip(space.trace.name_code[space.trace.event_exec].tolist(), event_bytes.tolist()):
            out[names[code]] += max(size, 0)
        return out
    # Each name's allocations at twice the batch are the real step's, exactly. (Its peak also depends on the
    # order the experts ran in, which moves from run to run even on one thread: 490 or 586 KiB.)
    predicted, traced = allocated(space, predictor._events_at(128)), allocated(large.space, large.space.trace.event_bytes)
    assert {name: size for name, size in predicted.items() if name.startswith("expert")} == {
        name: size for name, size in traced.items() if name.startswith("expert")}
    assert abs(predictor.peak_rise(128) - large.space.peak_rise_bytes) <= 0.25 * large.space.peak_rise_bytes


def test_a_partitions_small_share_scales_no_tensor_of_its_length():
    """At batch 8 over four experts each share is 2 rows: a length too common to tell tensors by (a stack of
    two 1024 x 1024 weights, 8 MiB, [2, 1024, 1024], had been scaled by 8 at batch 64). Shares under eight rows
    are not read, and the prediction is the step's as without a partition."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 48), name="x")
        expert = tf.compat.v1.placeholder(tf.int32, (None,), name="expert")
        mix = tf.stack([tf.compat.v1.get_variable("w1", (1024, 1024)), tf.compat.v1.get_variable("w2", (1024, 1024))],
                       name="mix")
        h = tf.matmul(x, tf.reduce_sum(mix, axis=0)[:48, :48])
        parts = tf.dynamic_partition(h, expert, 4)
        h = tf.concat([part * (i + 1.0) for i, part in enumerate(parts)], 0)
        return [x, expert], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))

    def traced(batch):
        return _traced_real(f"mix_b{batch}", build, [np.ones((batch, 48), np.float32),
                                                     (np.arange(batch) % 4).astype(np.int32)], one_thread=True)
    small, large = traced(8), traced(64)
    predictor = whatif.one_step(small.step, small.space)
    space = small.space
    mix = [i for i, name in enumerate(space.names.graph_names) if name == "mix"]
    rows = np.isin(space.trace.name_code[space.trace.event_exec], mix) & (space.trace.event_bytes > 0)
    assert rows.any() and not predictor.scales[rows].any()
    assert predictor.peak_rise(64) <= 1.1 * large.space.peak_rise_bytes


def test_a_fit_apart_from_a_warned_one_step_points_at_the_warning():
    """Fitted over two batches, the boxes grow with the batch and the fit follows them; the one step, which
    warned it does not scale them, predicts less. The note on their distance says the warning is why (trial T's
    GNN edges had been put down to the allocator's chunks and a schedule that moved)."""
    answer = whatif.WhatIf([_boxes_model(6), _boxes_model(12)], 48)
    assert answer.one_step.warning.startswith("the feed boxes [48, 8] is 4 times the batch (12) long")
    (apart,) = [note for note in answer.notes if " apart (" in note]
    assert "the one step's warning says what it may miss" in apart and "allocator's chunks" not in apart
    assert answer.fitted.peak_rise(48) > answer.one_step.peak_rise(48)


def test_weights_cast_to_float16_are_no_batch_shaped_like_a_parameter():
    """Mixed precision casts each weight to float16 in the forward pass: a tensor shaped like the
    parameter because it is one. Where its first dimension is the batch, that is no sign of a
    batch-shaped activation left unscaled: no warning (the weights' casts are not scaled either)."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float16, (None, 40), name="x")
        w0 = tf.compat.v1.get_variable("w0", (64, 40))  # its first dimension is the batch
        w1 = tf.compat.v1.get_variable("w1", (16, 64))
        h = tf.nn.relu(tf.matmul(x, tf.cast(w0, tf.float16), transpose_b=True))  # [64, 64]
        h = tf.matmul(h, tf.cast(w1, tf.float16), transpose_b=True)  # [64, 16]
        loss = tf.reduce_mean(tf.square(tf.cast(h, tf.float32)))
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    traced = _traced_real("cast_b64", build, [np.ones((64, 40), np.float16)])
    space = traced.space
    casts = [i for i, op in enumerate(space.names.op_types) if op == "Cast"]
    assert any(space.name_column(OUTPUT)[i] == 64 * 40 * 2 for i in casts)  # w0's cast is in the step
    answer = whatif.WhatIf([traced], 128)
    assert answer.one_step.batch == 64 and answer.one_step.scales.any()
    assert answer.one_step.warning is None


def test_a_step_where_nothing_carries_the_batch_is_refused():
    """A sparse input's values are its commonest first dimension, and nothing else carries it:
    one step cannot be scaled, and the what-if says so rather than predict the traced peak."""
    rng = np.random.default_rng(0)
    cells = np.unique(np.stack([rng.integers(0, 256, 400), rng.integers(0, 1000, 400)], 1), axis=0)

    def build(tf):
        indices = tf.compat.v1.placeholder(tf.int64, (None, 2), name="sp_indices")
        values = tf.compat.v1.placeholder(tf.float32, (None,), name="sp_values")
        dense = tf.sparse.sparse_dense_matmul(tf.SparseTensor(indices, values, (256, 1000)),
                                              tf.compat.v1.get_variable("w", (1000, 64)))
        return [indices, values], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_mean(tf.square(dense)))

    step = _traced_real("sparse", build, [cells.astype(np.int64), np.ones(len(cells), np.float32)])
    with pytest.raises(whatif.WhatIfError, match=rf"nothing in sparse step_1 was found to carry its batch \({len(cells)}"):
        whatif.WhatIf([step], 64)
    # Beside a fit, the one step is kept, and says it is the traced peak.
    assert "this one-step prediction is the traced peak" in whatif.one_step(step.step, step.space).warning


def test_a_fed_sparse_tensors_entries_are_no_batch():
    """A fed SparseTensor (`sparse_placeholder`) is fed as its indices and values, as long as it has
    entries (here 3 a row: 192), beside two dense feeds at the batch (64): the entries had outvoted
    the batch, as the larger of a tie, and the what-if had scaled from batch 192."""
    rng = np.random.default_rng(0)
    batch = 64
    rows = np.repeat(np.arange(batch), 3)
    indices = np.stack([rows, np.tile(np.arange(3), batch)], 1).astype(np.int64)

    def build(tf):
        ids = tf.compat.v1.sparse_placeholder(tf.int64, name="sp_ids")
        x = tf.compat.v1.placeholder(tf.float32, (None, 5), name="x")
        y = tf.compat.v1.placeholder(tf.float32, (None, 1), name="y")
        table = tf.compat.v1.get_variable("table", (1000, 16))
        h = tf.concat([tf.nn.embedding_lookup_sparse(table, ids, None, combiner="mean"), x], 1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, tf.compat.v1.get_variable("out/kernel", (21, 1))) - y))
        return [ids, x, y], tf.compat.v1.train.AdamOptimizer().minimize(loss)

    import tensorflow as tf

    feed = [tf.compat.v1.SparseTensorValue(indices, rng.integers(0, 1000, len(indices)), (batch, 3)),
            rng.random((batch, 5), np.float32), rng.random((batch, 1), np.float32)]
    traced = _traced_real("sparse_feed", build, feed)
    names = traced.space.names.raw
    assert any(name.startswith("_arg_sp_ids/indices") for name in names), names
    assert whatif.traced_batch(traced.step) == batch


def _language_model(batch: int, seq: int = 32, vocab: int = 4000) -> whatif.Traced:
    """A real step of a small language model: token ids `[batch, seq]` embedded, flattened to
    `[batch x seq, 64]` for its dense layer and its logits `[batch x seq, vocab]`."""
    def build(tf):
        ids = tf.compat.v1.placeholder(tf.int32, (None, seq), name="ids")
        table = tf.compat.v1.get_variable("embedding", (vocab, 64))
        h = tf.reshape(tf.nn.embedding_lookup(table, ids), (-1, 64))
        h = tf.nn.relu(tf.matmul(h, tf.compat.v1.get_variable("dense", (64, 64))))
        logits = tf.matmul(h, tf.compat.v1.get_variable("out", (64, vocab)))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.reshape(ids, (-1,)),
                                                                             logits=logits))
        return [ids], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    rng = np.random.default_rng(batch)
    return _traced_real(f"lm_b{batch}", build, [rng.integers(0, vocab, (batch, seq)).astype(np.int32)], one_thread=True)


def test_tensors_of_the_batch_flattened_with_the_sequence_scale():
    """A language model's logits are `[batch x seq, vocab]`: their first dimension is the batch
    times the feed's sequence, and they scale with the batch (kept at their traced bytes, the
    prediction from batch 4 fell a third short at 16 on a transformer)."""
    small, large = _language_model(4), _language_model(16)
    assert whatif.flattened_batches(small.step, 4) == {4 * 32}
    one = whatif.one_step(small.step, small.space)
    logits = _events_of_shape(small, (4 * 32, 4000))
    assert logits.any() and one.scales[logits & (small.space.trace.event_bytes == 4 * 32 * 4000 * 4)].all()
    assert one.peak_rise(16) == pytest.approx(large.space.peak_rise_bytes, rel=0.20)
    assert one.scaled_share > 0.5 and one.warning is None
    # At batch 1 the logits are [seq, vocab]: the batch flattened, or the sequence's own? Said.
    single = _language_model(1)
    one = whatif.one_step(single.step, single.space)
    assert "traced at batch 1, tensors whose first dimension is an input's sequence" in one.warning


def _time_major(batch: int, steps: int = 24) -> whatif.Traced:
    """A real step of a time-major model: its feed is `[time, batch, 8]`, unstacked into a
    `[batch, 8]` input per time step (as a time-major RNN's)."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (steps, None, 8), name="x")
        w = tf.compat.v1.get_variable("w", (8, 256))
        h = tf.add_n([tf.nn.relu(tf.matmul(xt, w)) for xt in tf.unstack(x, axis=0)])
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))

    return _traced_real(f"time_major_b{batch}", build, [np.ones((steps, batch, 8), np.float32)], one_thread=True)


def _events_of_shape(traced_step: whatif.Traced, shape: tuple) -> np.ndarray:
    """Per allocation event of a traced step: whether its op has an output of `shape`."""
    trace = traced_step.space.trace
    has = {name for name, outputs in zip(trace.distinct_names, trace.outputs_of(trace.distinct_names))
           if any(out == shape for out, _ in outputs)}
    return np.array([trace.name(int(e)) in has for e in trace.event_exec], dtype=bool)


def _flat_weight_cnn(batch: int) -> whatif.Traced:
    """A real step of a CNN fed `[batch, 32, 32, 3]` whose dense weight is kept as one flat vector
    and reshaped to `[256, 2048]`: at batch 8, 256 is batch x height, and the weight's gradient
    `[256, 2048]` has no variable's shape."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 32, 32, 3), name="x")
        h = x
        for i in range(3):
            w = tf.compat.v1.get_variable(f"c{i}", (3, 3, h.shape[-1], 16))
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, w, 1, "SAME")), 2, 2, "VALID")
        flat = tf.compat.v1.get_variable("fc_flat", (256 * 2048,))
        h = tf.nn.relu(tf.matmul(tf.reshape(h, (-1, 256)), tf.reshape(flat, (256, 2048))))
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))

    return _traced_real(f"flat_b{batch}", build, [np.ones((batch, 32, 32, 3), np.float32)], one_thread=True)


def test_an_image_feeds_rows_are_no_flattened_batch():
    """An image feed flattens to batch x height x width, never batch x height: the flat weight's
    gradient ([256, 2048] at batch 8 = 8 x 32) keeps its bytes, and batch 32 is predicted as a
    real run measures it (it was predicted twice too high). At batch 1 nothing is flattened."""
    small, large = _flat_weight_cnn(8), _flat_weight_cnn(32)
    assert whatif.flattened_batches(small.step, 8) == {8 * 32 * 32}
    assert whatif.flattened_batches(small.step, 1) == set()
    one = whatif.one_step(small.step, small.space)
    assert not one.scales[_events_of_shape(small, (256, 2048))].any()
    # Within a real run's spread (its schedule moves the peak by up to a quarter on a loaded machine).
    assert one.peak_rise(32) == pytest.approx(large.space.peak_rise_bytes, rel=0.25)


def test_a_cpu_convolution_gradients_working_set_scratch_does_not_scale():
    """The demo's big convolution (batch 1): TensorFlow's CPU Conv2DBackpropFilter stages im2col in
    a buffer sized to a working set, 33.8 MiB at any batch, as its finding says. The one step
    keeps it: batch 8 is predicted near the traced rise, as a real run at 8 measures it (34.1 MiB
    against 33.9 at batch 1); scaling it predicted 271 MiB."""
    step = demo_step("bigconv")
    space = step.space(None)
    (scratch,) = [f for f in findings.step_findings(step, None) if f.kind == findings.CONV_SCRATCH]
    assert scratch.details["cpu_working_set"]
    one = whatif.one_step(step, space)
    trace = space.trace
    of_op = np.array([trace.name(int(e)) == scratch.nodes[0] for e in trace.event_exec])
    big = of_op & (trace.event_bytes >= scratch.details["temp_bytes"])
    assert big.any() and not one.scales[big].any()
    assert space.peak_rise_bytes < one.peak_rise(8) < 1.1 * space.peak_rise_bytes


def _time_major_dense(batch: int, steps: int = 24) -> whatif.Traced:
    """A real step of a time-major model whose tensors keep the time first: `[time, batch, 256]`."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (steps, None, 8), name="x")
        flat = tf.reshape(x, (-1, 8))  # [time x batch, 8]
        h = tf.nn.relu(tf.matmul(flat, tf.compat.v1.get_variable("w", (8, 256))))
        h = tf.reshape(h, (steps, -1, 256)) * tf.compat.v1.get_variable("gate", (256,))  # [time, batch, 256]
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))

    return _traced_real(f"time_major_dense_b{batch}", build, [np.ones((steps, batch, 8), np.float32)], one_thread=True)


def test_an_earlier_step_of_a_tf1_run_peaking_well_above_the_one_read_is_said(tmp_path):
    """A TF1 run's traced steps are compared as a profile's are: its steps at one batch can differ (what
    else ran beside the train op, sequences of other lengths; trial X's run traced with and without a
    checkpoint save peaked 2.2 times apart). Read from its latest step, the what-if names the earlier one
    that peaked 10% or more above it; the record of each is read (the nearest few)."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        ids = tf1.placeholder(tf.int32, [None, None], name="ids")
        h = tf.nn.embedding_lookup(tf1.get_variable("emb", [100, 64]), ids)  # [batch, length, 64]
        for i in range(3):
            h = tf.nn.relu(tf.einsum("btd,de->bte", h, tf1.get_variable(f"w{i}", [64, 64])))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        init = tf1.global_variables_initializer()
    rng = np.random.RandomState(0)
    with models._session(graph) as session:
        session.run(init)
        writer = tf1.summary.FileWriter(str(tmp_path / "lengths"), graph)
        for number, length in ((1, 256), (2, 32)):  # the same ops and batch, sequences 8 times as long first
            feed = {ids: rng.randint(0, 100, (8, length))}
            session.run(train, feed_dict=feed)
            metadata = tf1.RunMetadata()
            session.run(train, feed_dict=feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
            writer.add_run_metadata(metadata, f"step_{number}", global_step=number)
        writer.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["whatif", str(tmp_path), "--batch", "16", "--json"]) == 0
    body = json.loads(out.getvalue())
    (read,) = body["runs"]
    assert read["tag"] == "step_2" and read["batch"] == 8
    assert any(note.startswith("step_1 of lengths, at the same batch (8), peaked ") for note in body["notes"]), \
        body["notes"]
    with contextlib.redirect_stdout(out := io.StringIO()):  # read from the higher: nothing of the lower
        assert cli.main(["whatif", str(tmp_path), "--batch", "16", "--tag", "step_1", "--json"]) == 0
    assert not any(" peaked " in note for note in json.loads(out.getvalue())["notes"])


def test_a_time_major_models_tensors_scale_with_the_batch_given():
    """Given the batch of a time-major step, its `[time, batch, d]` tensors (and `[time x batch, d]`)
    carry it: batch 16 is predicted as a real run measures it (they kept their bytes, 45% short)."""
    small, large = _time_major_dense(4), _time_major_dense(16)
    given = dataclasses.replace(small, given_batch=4)
    assert whatif.time_major_steps(small.step, 4) == {24} and whatif.time_major_steps(large.step, 16) == {24}
    one = whatif.WhatIf([given], 16).one_step
    # A batch-major model whose other feed's second dimension happens to be the batch: no time.
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 16), name="x")
        y = tf.compat.v1.placeholder(tf.float32, (5, None), name="y")
        w = tf.compat.v1.get_variable("w", (16, 5))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - tf.transpose(y)))
        return [x, y], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    batch_major = _traced_real("batch_major", build, [np.ones((8, 16), np.float32), np.ones((5, 8), np.float32)])
    assert whatif.traced_batch(batch_major.step) == 8 and whatif.time_major_steps(batch_major.step, 8) == set()
    # A time-major sequence fed beside its labels `[batch, 1]` (trial X's while-loop RNN): its time, as alone.
    def labelled(tf):
        x = tf.compat.v1.placeholder(tf.float32, (24, None, 8), name="x")
        y = tf.compat.v1.placeholder(tf.float32, (None, 1), name="y")
        w = tf.compat.v1.get_variable("w", (8, 1))
        loss = tf.reduce_mean(tf.square(tf.add_n([tf.matmul(xt, w) for xt in tf.unstack(x, axis=0)]) - y))
        return [x, y], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    with_labels = _traced_real("time_major_labelled", labelled, [np.ones((24, 8, 8), np.float32),
                                                                  np.ones((8, 1), np.float32)])
    assert whatif.traced_batch(with_labels.step) == 8 and whatif.time_major_steps(with_labels.step, 8) == {24}
    trace = small.space.trace
    time_major = _events_of_shape(small, (24, 4, 256)) | _events_of_shape(small, (96, 256))
    allocations = time_major & (trace.event_bytes == 24 * 4 * 256 * 4)
    assert allocations.any() and one.scales[allocations].all()
    # A real run at 16: the same, but where its schedule keeps one more [24, 16, 256] tensor at the
    # peak (a third more, on a loaded machine), which no replay of the traced order predicts.
    measured = large.space.peak_rise_bytes
    assert 0.7 * measured <= one.peak_rise(16) <= 1.1 * measured, (one.peak_rise(16), measured)


def _ctc(batch: int, steps: int = 40) -> whatif.Traced:
    """A real step of a batch-major model (feed `[batch, steps, 8]`) whose logits are transposed to
    time-major for `tf.nn.ctc_loss` (its default), with sparse labels: the loss runs as a function whose
    arguments (`logits_0`, `[steps, batch, 12]`) are `_Arg` ops in the step."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, steps, 8), name="audio")
        labels = tf.compat.v1.placeholder(tf.int32, (None, 5), name="labels")
        w = tf.compat.v1.get_variable("w", (8, 12))
        logits = tf.transpose(tf.einsum("btf,fk->btk", x, w), [1, 0, 2])
        lengths = tf.fill([tf.shape(x)[0]], steps)
        loss = tf.reduce_mean(tf.nn.ctc_loss(tf.sparse.from_dense(labels), logits, None, lengths, blank_index=-1))
        return [x, labels], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    # Its ops one at a time: run in parallel on a loaded machine, batch 4 peaked at another point of the step
    # (a CI run predicted batch 8 12% low from it).
    return _traced_real(f"ctc_b{batch}", build, [np.ones((batch, steps, 8), np.float32),
                                                 np.tile(np.arange(1, 6, dtype=np.int32), (batch, 1))], one_thread=True)


def test_a_functions_arguments_are_no_feeds_and_a_transposed_tensor_is_time_major():
    """A function's arguments in the step (`_Arg` ops named after them) are its caller's tensors, not the
    step's feeds: trial AA's CTC loss, whose time-major logits `[59, batch, 30]` are such arguments, had
    read as batch 59. And its tensors transposed to time-major (`[steps, batch, ...]`) carry the batch:
    they had scaled nothing (batch 8 predicted as the traced rise at 4)."""
    small, large = _ctc(4), _ctc(8)
    names = small.space.names
    arguments = [names.raw[i] for i in np.flatnonzero(names.category == INPUTS).tolist()
                 if names.op_type(i) == "_Arg" and not names.raw[i].startswith("_arg_")]
    assert arguments  # the trace has them: the test could fail
    assert whatif.traced_batch(small.step) == 4 and whatif.traced_batch(large.step) == 8
    # The step's own feeds, one home for every reader of them (the resident split's inputs among them).
    assert not names.step_inputs[[names.raw.index(name) for name in arguments]].any()
    from tb_memory_plugin import resident
    assert resident.fed_before_step(small.space) == 4 * 40 * 8 * 4 + 4 * 5 * 4  # audio and labels, as fed
    one = whatif.WhatIf([small], 8).one_step
    measured = large.space.peak_rise_bytes
    assert measured > 1.5 * small.space.peak_rise_bytes
    assert 0.9 * measured <= one.peak_rise(8) <= 1.1 * measured, (one.peak_rise(8), measured)


def _stacked_loop(batch: int, steps: int = 24) -> whatif.Traced:
    """A real step of a batch-major model (feed `[batch, 8]`) whose loop writes its state to a
    TensorArray each step: stacked, `[steps, batch, 256]`, as a dynamic RNN's outputs are."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 8), name="x")
        w = tf.compat.v1.get_variable("w", (8, 256))
        u = tf.compat.v1.get_variable("u", (256, 256))

        def body(t, h, outputs):
            h = tf.tanh(tf.matmul(x, w) + tf.matmul(h, u))
            return t + 1, h, outputs.write(t, h)

        start = (tf.constant(0), tf.zeros([tf.shape(x)[0], 256]), tf.TensorArray(tf.float32, size=steps))
        _, _, outputs = tf.compat.v1.while_loop(lambda t, h, outputs: t < steps, body, start, name="rnn")
        stacked = outputs.stack(name="stacked")  # [steps, batch, 256]
        loss = tf.reduce_mean(tf.square(stacked * tf.compat.v1.get_variable("gate", (256,))))
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    return _traced_real(f"stacked_loop_b{batch}", build, [np.ones((batch, 8), np.float32)], one_thread=True)


def test_a_loops_stacked_outputs_scale_with_the_batch_in_a_batch_major_model():
    """A loop's outputs stacked over its steps hold the batch second (`[steps, batch, d]`), and so do
    the tensors made from them: they scale, where the feed (batch first) says nothing of time. They
    had kept their bytes: a sweep's TensorArray model was predicted 47% short at 4x (now within 1-6%
    of its real runs)."""
    small, large = _stacked_loop(4), _stacked_loop(16)
    assert whatif.traced_batch(small.step) == 4 and whatif.time_major_steps(small.step, 4) == set()
    one = whatif.WhatIf([small], 16).one_step
    # The stack, and what is made of it (`stacked * gate`, its square, their gradients), at 4 ...
    trace = small.space.trace
    allocations = _events_of_shape(small, (24, 4, 256)) & (trace.event_bytes == 24 * 4 * 256 * 4)
    assert allocations.any() and one.scales[allocations].all()
    # ... and a real run at 16 allocates them at 16: they carry the batch. (Its peak is not compared:
    # the loop's schedule, and so which of them the peak holds, varies from run to run.)
    large_allocations = _events_of_shape(large, (24, 16, 256)) & (large.space.trace.event_bytes == 24 * 16 * 256 * 4)
    assert np.count_nonzero(large_allocations) > 0
    # A weight's gradient ([256, 256]) keeps its bytes.
    weights = _events_of_shape(small, (256, 256)) & (trace.event_bytes == 256 * 256 * 4)
    assert weights.any() and not one.scales[weights].any()


def test_a_loop_stacking_a_weight_each_step_carries_no_batch():
    """A loop that stacks a tensor made from a weight each step, `[steps, 16, 512]` at batch 16: its
    second dimension is the batch by chance, and its element has the weight's shape. Nothing of it
    scales, and the prediction at 64 is about the traced peak, as a real run's is (it had been 3x)."""
    def fixed_loop(batch: int, steps: int = 24) -> whatif.Traced:
        def build(tf):
            x = tf.compat.v1.placeholder(tf.float32, (None, 8), name="x")
            h = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("w", (8, 64))))
            m = tf.compat.v1.get_variable("m", (16, 512))

            def body(t, outputs):
                return t + 1, outputs.write(t, tf.tanh(m * tf.cast(t, tf.float32)))

            start = (tf.constant(0), tf.TensorArray(tf.float32, size=steps))
            _, outputs = tf.compat.v1.while_loop(lambda t, outputs: t < steps, body, start, name="loop")
            loss = tf.reduce_mean(tf.square(h)) + tf.reduce_mean(tf.square(outputs.stack(name="stacked")))
            return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

        return _traced_real(f"fixed_loop_b{batch}", build, [np.ones((batch, 8), np.float32)], one_thread=True)

    small = fixed_loop(16)
    one = whatif.WhatIf([small], 64).one_step
    stacked = _events_of_shape(small, (24, 16, 512)) & (small.space.trace.event_bytes == 24 * 16 * 512 * 4)
    assert stacked.any() and not one.scales[stacked].any()
    # Only the small [batch, 8] and [batch, 64] tensors scale: about the traced peak (a real run at
    # 64 measures the same; not compared here, as a loop's schedule varies from run to run).
    assert one.peak_rise(64) <= 1.2 * small.space.peak_rise_bytes


def test_a_batch_the_user_gives_is_the_batch_scaled():
    """A time-major feed's first dimension is its time steps: read from the shapes, the batch is
    24, and nothing of the real batch scales. Given (`Traced.given_batch`, the CLI's
    --traced-batch, the route's traced_batch), the batch is 4 and the prediction at 16 is a real
    run's."""
    small, large = _time_major(4), _time_major(16)
    assert whatif.traced_batch(small.step) == 24
    with pytest.raises(whatif.WhatIfError, match=r"carry its batch \(24, as read from its shapes\)"):
        whatif.WhatIf([small], 16)
    given = whatif.WhatIf([dataclasses.replace(small, given_batch=4)], 16)
    assert given.one_step.batch == 4
    assert given.one_step.peak_rise(16) == pytest.approx(large.space.peak_rise_bytes, rel=0.20)
    body = whatif_report.whatif_dict(given)
    assert body["runs"][0]["batch"] == 4 and body["runs"][0]["batch_given"] is True
    assert whatif_report.whatif_dict(whatif.WhatIf([_mlp(8, 64)], 4))["runs"][0]["batch_given"] is False


def test_a_step_whose_peak_holds_little_of_the_batch_says_so():
    """Batch-carrying tensors found, but under 5% of the peak rise (a big tensor of no batch holds
    the peak; a ragged model's values, as long as its tokens: trial Z1's 2-3%, 47% low at four times
    the batch): the one step says its prediction stays near the traced peak, rather than predict
    that peak at any batch in silence; a step whose peak is its batch's says nothing."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 8), name="x")
        small = tf.matmul(x, tf.compat.v1.get_variable("w", (8, 8)))
        big = tf.square(tf.compat.v1.get_variable("table", (1024, 512)))  # 2 MiB, no batch
        loss = tf.reduce_mean(tf.square(small)) + tf.reduce_mean(big)
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

    traced_step = _traced_real("big_table", build, [np.ones((4, 8), np.float32)])
    one = whatif.one_step(traced_step.step, traced_step.space)
    assert one.batch == 4 and one.scales.any() and one.scaled_share < 0.01
    assert "under 5% of the traced peak rise was found to carry the batch (4) at any moment of the step" in one.warning
    assert whatif_report.whatif_dict(whatif.WhatIf([traced_step], 64))["predictions"]["one_step"]["warning"] == \
        one.warning
    clean = whatif.one_step(_mlp(64, 512).step, _mlp(64, 512).space)
    assert clean.scaled_share > 0.2 and clean.warning is None


def _wide_relus(tf, width: int):
    """(feed, train op): the feed [batch, width] scaled and relu'd three times, and gradient descent
    on their squares: [batch, width] activations in the forward and backward passes."""
    x = tf.compat.v1.placeholder(tf.float32, (None, width), name="x")
    h = x
    for k in range(3):
        h = tf.nn.relu(h * tf.compat.v1.get_variable(f"s{k}", (width,)))
    return x, tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))


def test_a_peak_of_no_batch_whose_batch_grows_elsewhere_gives_no_such_warning():
    """The traced peak is a big tensor of no batch, after the update (an optimizer's step over a large
    embedding); the forward pass held [batch, 4096] activations earlier, a tenth of that rise. At a
    larger batch they make the peak, which the replay finds: the one step does not say that its
    prediction stays near the traced peak at any batch, because it does not."""
    def build(tf):
        x, train = _wide_relus(tf, 4096)
        with tf.control_dependencies([train]):  # after the update: 2 MiB, no batch
            big = tf.reduce_sum(tf.square(tf.compat.v1.get_variable("table", (1024, 512))))
        return [x], big

    traced_step = _traced_real("peak_after_update", build, [np.ones((4, 4096), np.float32)], one_thread=True)
    one = whatif.one_step(traced_step.step, traced_step.space)
    assert one.batch == 4 and one.scaled_share < 0.01  # the traced peak holds none of the batch
    assert one.peak_rise(64) > 1.5 * traced_step.space.peak_rise_bytes  # it moves: [64, 4096] x several
    assert one.warning is None


def test_a_fit_through_peaks_that_do_not_grow_says_so():
    """Traced peaks that fall as the batch grows (here the demos' two steps swapped): the line
    through them cannot be trusted beyond them, and the fit says so; a growing one says nothing."""
    falling = whatif.Fitted([(2, demo_step("unet_b4").space(None)), (4, demo_step("unet_b2").space(None))])
    assert "do not grow with the batch" in falling.warning
    assert fitted("unet").warning is None
    body = whatif_report.whatif_dict(whatif.WhatIf([traced("unet_b2"), traced("unet_b4")], 8))
    assert body["predictions"]["fit"]["warning"] is None and body["method"] == "fit"
    # The two predictions agree (within 10%): nothing said of them.
    fit, one = body["predictions"]["fit"], body["predictions"]["one_step"]
    assert abs(fit["predicted_peak_rise_bytes"] - one["predicted_peak_rise_bytes"]) <= 0.1 * one["predicted_peak_rise_bytes"]
    assert not any("apart" in note for note in body["notes"])
    # Such a fit is kept beside the one-step prediction, which leads.
    small, large = traced("unet_b4"), traced("unet_b2")
    small.__dict__["batch"], large.__dict__["batch"] = 2, 4  # the demos swapped, as above
    body = whatif_report.whatif_dict(whatif.WhatIf([small, large], 8))
    assert body["method"] == "one_step" and "do not grow" in body["predictions"]["fit"]["warning"]
    assert body["predicted_peak_rise_bytes"] == body["predictions"]["one_step"]["predicted_peak_rise_bytes"]
    # Predictions this far apart are said to be, with both figures (a TF1 LSTM's fit had read 12% under its
    # one step, the measured peak with the one step, and nothing said so).
    fit, one = body["predictions"]["fit"], body["predictions"]["one_step"]
    (apart,) = [note for note in body["notes"] if "apart" in note]
    # Under a limit, no largest batch is read from a line that falls (it had said "not even batch 1 fits"
    # beside a prediction under the limit); the one step's is.
    limited = whatif_report.whatif_dict(whatif.WhatIf([small, large], 8, limit=1 << 30))
    assert limited["predictions"]["fit"]["falls"] is True and limited["predictions"]["fit"]["max_batch"] is None
    assert limited["predictions"]["one_step"]["max_batch"] and "falls" not in limited["predictions"]["one_step"]
    assert whatif_report.whatif_dict(whatif.WhatIf([traced("unet_b2"), traced("unet_b4")], 8))["predictions"][
        "fit"]["falls"] is False
    assert "at batch 8 the fit and the one step are" in apart and "trace batch 8" in apart
    assert all(whatif.format_bytes(p["predicted_peak_rise_bytes"]) in apart for p in (fit, one))


def test_a_fitted_start_is_the_nearest_steps_not_a_line_through_chance():
    """Beside a one-step prediction, the fit's start at a batch is the nearest traced step's, plus the
    feeds' bytes per sample the one step finds (a researcher's MLP: starts 2 MB apart by chance at
    batch 8 and 16 made 47.7 MB at 64 on a line, against 33.6 MB measured)."""
    import copy

    small, large = traced("unet_b2"), traced("unet_b4")
    noisy = copy.copy(large.space)
    noisy.start_bytes = large.space.start_bytes + (2 << 20)  # what the allocator held on to, by chance
    large = whatif.Traced(large.run, large.tag, large.step_number, large.source, large.step, noisy)
    question = whatif.WhatIf([small, large], 64)
    one = question.one_step
    assert one.resident_batch_bytes > 0  # the frames and flows fed, held before the step
    fit = question.fitted
    assert fit.start_bytes(2) == small.space.start_bytes and fit.start_bytes(4) == noisy.start_bytes
    # From the nearest traced start, what the one step's start adds: at batch 64 the frames and flows are
    # 256 KiB and more, which mklcpu's start counts (a few hundred bytes of small feeds are not); at batch 4
    # only the frames ([4, 64, 64, 9] float32) were.
    added = one.start_bytes(64) - one.start_bytes(4)
    full = one.resident_batch_bytes * 16 - 4 * 64 * 64 * 9 * 4
    assert full - 16 * 1024 < added <= full
    assert fit.start_bytes(64) == noisy.start_bytes + added
    line = whatif.Fitted([(2, small.space), (4, noisy)])  # a line through the two, as without a one step
    assert line.start_bytes(64) - fit.start_bytes(64) > 25 * (2 << 20)
    body = whatif_report.whatif_dict(question)
    assert body["predictions"]["fit"]["predicted_start_bytes"] == fit.start_bytes(64)


def test_a_fit_through_peaks_of_different_phases_says_so():
    """The demo U-Net's step_2 at batch 4 peaks in the forward pass's loss (activations), its steps at
    batch 2 in the backward pass: the fit warns, and the one-step prediction leads, the fit beside it
    (two users' models: fits through peaks that moved were 14% short and 3x over, one step within 24%)."""
    mixed = whatif.Fitted([(2, demo_step("unet_b2").space(None)), (4, demo_step("unet_b4", "step_2").space(None))])
    assert not mixed.falls and mixed.moves
    assert "different phases of the step (gradients at batch 2, activations at batch 4)" in mixed.warning
    assert fitted("unet").warning is None and not fitted("unet").moves  # both at step_3: the backward pass
    body = whatif_report.whatif_dict(whatif.WhatIf([traced("unet_b2"), traced("unet_b4", "step_2")], 8))
    assert body["method"] == "one_step" and "different phases" in body["predictions"]["fit"]["warning"]
    assert body["predicted_peak_rise_bytes"] == body["predictions"]["one_step"]["predicted_peak_rise_bytes"]
    body = whatif_report.whatif_dict(whatif.WhatIf([traced("unet_b2"), traced("unet_b4")], 8))
    assert body["method"] == "fit"  # peaks in one phase and layer: the fit leads


def test_a_fit_through_peaks_in_different_layers_says_so():
    """Both peaks in the backward pass, but in one layer at batch 8 and in another at 16 (a sweep's
    BatchNorm CNN: bn1 at 32, bn2 at 64, and the fit 38% short at 128): the fit warns. Hand-built
    steps, as a real run's schedule moves such a peak from run to run."""
    import protos

    def step(act: int, wide: int):
        nodes = [protos.Node(f"gradients/{layer}/MatMul_grad/MatMul", start, start + 2, op="MatMul",
                             memory=[protos.Mem("cpu", [(start, size), (start + 5, -size)])], outputs=[("cpu", size)])
                 for layer, start, size in (("act", 10, act), ("wide", 20, wide))]
        return store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).space(None)

    moving = whatif.Fitted([(8, step(1000, 800)), (16, step(1200, 1600))])
    assert not moving.falls
    assert "the ops at the traced peaks are in different layers (act at batch 8, wide at batch 16)" in moving.warning
    # A layer at several traced batches is named once, with its batches (trial V: "expert3 at batch 256,
    # expert3 at batch 512, expert0 at batch 4096").
    three = whatif.Fitted([(8, step(1000, 800)), (12, step(1100, 900)), (16, step(1200, 1600))])
    assert "different layers (act at batches 8 and 12, wide at batch 16)" in three.warning
    assert whatif.Fitted([(8, step(1000, 800)), (16, step(2000, 1600))]).warning is None  # act at both
    # The same model built again (Keras renumbers it: `sequential_1/dense_2` for `sequential/dense`):
    # one layer, as the fit maps it.
    def keras_step(model: str, layers: tuple, sizes: tuple):
        nodes = [protos.Node(f"gradients/{model}/{layer}/MatMul_grad/MatMul", start, start + 2, op="MatMul",
                             memory=[protos.Mem("cpu", [(start, size), (start + 5, -size)])], outputs=[("cpu", size)])
                 for layer, start, size in zip(layers, (10, 20), sizes)]
        return store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).space(None)

    renumbered = whatif.Fitted([(8, keras_step("sequential", ("dense", "dense_1"), (1000, 800))),
                                (16, keras_step("sequential_1", ("dense_2", "dense_3"), (2000, 1600)))])
    assert renumbered.warning is None


def test_an_xla_programs_own_row_that_shrank_stops_at_zero_and_layers_do_not():
    """An XLA program's own row (its bytes placed on no op: the allocator's rounding) that held less
    at the larger traced batch (a stranger's 31.9 then 3.0 MiB) is fitted by a line going below
    zero beyond them; it stops at zero there, rather than taking its negative bytes off the layers'
    (the stranger's fit read a 64 MiB rise beside layers adding up to 120, the real step rising
    125 MiB). A layer's line is not stopped: at-peak bytes that move between layers as the
    schedule changes cancel out in their sum. (Hand-built: the program's op type from a graph.)"""
    import protos

    mib = 1024 * 1024

    def space(batch, rounding, moved):
        nodes = [
            protos.Node("net/dense/MatMul", 0, 2, op="MatMul", outputs=[("GPU_0_bfc", batch * mib // 8)],
                        memory=[protos.Mem("GPU_0_bfc", [(0, batch * mib // 8), (9, -batch * mib // 8)])]),
            protos.Node("__inference_train_step_1", 3, 4, memory=[protos.Mem("GPU_0_bfc", [(3, rounding), (9, -rounding)])]),
            protos.Node("net/other/Relu", 3, 4, op="Relu", outputs=[("GPU_0_bfc", moved)],
                        memory=[protos.Mem("GPU_0_bfc", [(3, moved), (9, -moved)])]),
        ]
        run_graph = graph.RunGraph(["net/dense/MatMul", "__inference_train_step_1", "net/other/Relu"],
                                   ["MatMul", XLA_PROGRAM_OP_TYPE, "Relu"])
        return store.analyse_bytes(protos.serialized({protos.GPU0: nodes}), run_graph).space(None)

    fitted = whatif.Fitted([(32, space(32, 32 * mib, 8 * mib)), (64, space(64, 3 * mib, 2 * mib))],
                           one_step_beside=False)
    assert fitted.peak_rise(32) == 44 * mib and fitted.peak_rise(64) == 13 * mib  # through both
    # At 128: the dense layer's 16 MiB, and net/other's line at -10 MiB (not stopped); the program's
    # row, whose line is at -55 MiB, at zero.
    assert fitted.peak_rise(128) == 6 * mib
    rows = {row["layer"]: row["at_peak_bytes"] for row in fitted.predict(128).layers}
    assert rows == {"net/dense": 16 * mib}


def _fixed_and_batch_space(fixed_name: str, batch_name: str, batch: int, chunk: int):
    """A hand-built GPU step at `batch`: `fixed_name` requests 1 MiB at any batch, in a `chunk`; then
    `batch_name` 1 MiB per 32 samples; both held until the end."""
    import protos

    mib = 1024 * 1024
    act = batch * mib // 32
    nodes = [
        protos.Node(fixed_name, 0, 2, op="MatMul", outputs=[("GPU_0_bfc", mib)],
                    memory=[protos.Mem("GPU_0_bfc", [(0, chunk), (9, -chunk)])]),
        protos.Node(batch_name, 3, 4, op="Relu", outputs=[("GPU_0_bfc", act)],
                    memory=[protos.Mem("GPU_0_bfc", [(3, act), (9, -act)])]),
    ]
    return store.analyse_bytes(protos.serialized({protos.GPU0: nodes})).space(None)


def test_a_layer_holding_the_same_requests_in_other_chunks_is_fixed():
    """A layer whose ops holding bytes at each traced peak requested as many bytes at both batches holds
    the same tensors in other chunks (a stranger's profiled [784, 512] weight gradient: 1.5 MiB at 64,
    2.9 MiB at 128): it is fixed, at its mean, not fitted as per-sample growth (which had read 59% over
    the real peak at 256). A layer whose requests grow with the batch is fitted as before."""
    mib = 1024 * 1024

    def space(batch, chunk):
        return _fixed_and_batch_space("net/dense/MatMul", "net/act/Relu", batch, chunk)

    fitted = whatif.Fitted([(32, space(32, mib)), (64, space(64, 2 * mib))], one_step_beside=False)
    assert not fitted.falls and fitted.warning is None and fitted.chunk_layers == {"net/dense"}
    assert fitted.peak_rise(128) == 3 * mib // 2 + 4 * mib  # dense at its mean chunk; act 4 MiB
    rows = {row["layer"]: row for row in fitted.predict(128).layers}
    assert rows["net/dense"]["per_sample_bytes"] == 0 and rows["net/act"]["per_sample_bytes"] == mib // 32


def test_a_name_holding_the_same_requests_in_other_chunks_is_fixed_inside_its_layer():
    """The chunk rule by name, inside a layer that also grows: a TF1 LSTM's weight gradient (the same
    request at every batch) held 3.4 MB at batch 16 and 2.6 MB at 32 beside the loop's batch-sized
    stacks, and the layer's line came out 17% under the real peak at 64. The gradient is held at its
    mean, and the layer's slope is its stacks'."""
    mib = 1024 * 1024

    def space(batch, chunk):
        return _fixed_and_batch_space("net/rnn/MatMul_grad", "net/rnn/Relu", batch, chunk)

    fitted = whatif.Fitted([(32, space(32, 3 * mib // 2)), (64, space(64, mib))], one_step_beside=False)
    assert fitted.chunk_layers == {"net/rnn"}
    assert fitted.moved == [{"net/rnn": -mib // 4}, {"net/rnn": mib // 4}]
    # 1.25 MiB of gradient at any batch, and 1 MiB of activations per 32 samples (a line through the
    # layer's traced bytes, 2.5 then 3 MiB, had given 4 MiB at 128).
    assert fitted.peak_rise(128) == 5 * mib // 4 + 4 * mib
    (row,) = fitted.predict(128).layers
    assert row["per_sample_bytes"] == mib // 32


@pytest.mark.parametrize("allocator, chunks", [
    ("cpu", False), ("mklcpu", True), ("bfc_cpu_allocator_for_gpu", True), ("GPU_0_bfc", True), ("cuda_host_bfc", True)])
def test_the_margin_under_a_limit_is_for_allocators_that_hand_out_chunks(allocator, chunks):
    """A BFC allocator may give a request a chunk up to twice its size at another batch: under a limit
    the notes say to keep a margin. The plain `cpu` allocator's records are the requests: no margin."""
    import protos

    step = store.analyse_bytes(protos.three_node_trace(allocator=allocator))
    traced_step = whatif.Traced("run", "step_1", 1, "run_metadata", step, step.space(None))
    assert whatif.chunking(traced_step.source, traced_step.space.trace.allocator) == chunks


def test_a_bfc_chunk_bigger_than_its_request_is_still_that_output():
    """On the CPU's BFC allocator (TF_CPU_ALLOCATOR_USE_BFC, as the README sets it) a record is the chunk
    a request got, up to twice it, in a trace as in a profile: a [1024, 1024] weight gradient (4 MiB
    asked, 6.8 MiB recorded) had matched none of its op's outputs, read as a temporary of an op that
    uses the batch, and been scaled 8x from batch 8 to 64 (a trial's MLP: +779%). It is the gradient,
    which no batch changes (tests/data/cpu_bfc: a real step, as it cannot be made on demand)."""
    data = (REPO / "tests" / "data" / "cpu_bfc" / "mlp_b8_chunks.run_metadata.pb").read_bytes()
    step = store.analyse_bytes(data)
    space = step.space(None)
    trace = space.trace
    assert trace.allocator == "bfc_cpu_allocator_for_gpu"
    grads = [e for e in range(trace.exec_count) if trace.name(e).endswith("MatMul_grad/MatMul_1")
             and int(trace.output[e]) == 1024 * 1024 * 4]
    # The premise: their records are chunks bigger than the 4 MiB they asked for, under twice it.
    assert len(grads) == 2 and all(4 << 20 < int(trace.allocated[e]) < 8 << 20 for e in grads)
    one = whatif.one_step(step, space, 8)
    held = np.isin(trace.event_exec, grads)
    assert held.any() and not one.scales[held].any()
    # So the peak barely moves with the batch: the model's activations are small beside its weights.
    assert one.peak_rise(64) < 1.5 * space.peak_rise_bytes


def test_the_margin_under_a_limit_says_which_batch_fits_whatever_the_chunks():
    """Under a limit on a chunking allocator (the demo's mklcpu), the note bounds the margin: the largest
    batch that still fits were every batch-sized request given a chunk twice its size (a trial's CNN: 100
    said to fit 120 MiB, 80 measured to, 57 by this bound), below the batch found."""
    question = whatif.WhatIf([traced("unet_b2")], 8, limit=200 << 20)
    one = question.one_step
    worst = one.worst_chunks()
    space = traced("unet_b2").space
    # Twice a request is at least the chunk it got (BFC splits at twice): the traced step, and any batch, bound above.
    assert worst.peak_rise(one.batch) >= space.peak_rise_bytes
    assert all(worst.peak_rise(b) >= one.peak_rise(b) for b in (1, 2, 4, 8, 16))
    found = question.max_batch(one)
    safe = whatif.max_batch(worst, question.limit, question.absolute(one))
    assert 0 < safe <= found
    (note,) = [note for note in question.notes if "keep a margin" in note]
    assert f"batch {safe:,} would still fit" in note


def test_a_fitted_start_does_not_fall_as_the_batch_grows():
    """Two readings of what a step starts with that fell by noise as the batch grew: the start is
    fixed memory, their mean at any batch, not a line heading below the model's own size."""
    falling = whatif.Fitted([(2, demo_step("unet_b4").space(None)), (4, demo_step("unet_b2").space(None))])
    starts = [demo_step(run).space(None).start_bytes for run in ("unet_b4", "unet_b2")]
    assert starts[0] > starts[1]  # what the swap gives: a start that falls with the batch
    assert falling.start_bytes(64) == falling.start_bytes(2) == round(sum(starts) / 2)


@pytest.fixture(scope="module")
def batch_8(tf_models):
    """A real U-Net step at batch 8, traced here (same size and oneDNN as the demo)."""
    run_metadata, graph_def = tf_models.traced_step("unet", 8, 64)
    step = store.analyse_bytes(run_metadata, graph.RunGraph.from_bytes(graph_def))
    assert step.status == "ok", step.message
    return step


def test_batch_8_is_predicted_from_the_demos_batch_2_and_4(batch_8):
    assert whatif.traced_batch(batch_8) == 8
    measured = batch_8.space(None).peak_rise_bytes
    for prediction in (predictor("unet_b2").peak_rise(8), predictor("unet_b4").peak_rise(8),
                       fitted("unet").peak_rise(8)):
        assert prediction == pytest.approx(measured, rel=0.02)
    # The layers holding the most at the measured peak are the ones predicted.
    predicted = [layer["layer"] for layer in fitted("unet").predict(8, top=5).layers]
    real = whatif.Fitted([(8, batch_8.space(None)), (9, batch_8.space(None))]).predict(8, top=5).layers
    assert set(predicted[:3]) <= {layer["layer"] for layer in real}


@pytest.mark.parametrize("absolute", [True, False])
def test_max_batch_is_the_largest_whose_prediction_fits(absolute):
    for predict in (predictor("unet_b2"), fitted("unet")):
        at_8 = whatif.predicted_bytes(predict, 8, absolute)
        assert whatif.max_batch(predict, at_8, absolute) == 8
        assert whatif.max_batch(predict, at_8 - 1, absolute) == 7
        limit = 300 << 20
        fits = whatif.max_batch(predict, limit, absolute)
        assert whatif.predicted_bytes(predict, fits, absolute) <= limit < whatif.predicted_bytes(predict, fits + 1,
                                                                                                 absolute)
        assert whatif.max_batch(predict, 1, absolute) == 0


def test_the_allocators_capacity_is_the_limit_without_one():
    """A device allocator's capacity (here the demo's allocator made a GPU's, with 64 MiB) is what
    its steps must fit in; a host allocator's is no limit by itself."""
    step = engine_step(DEMO, "unet_b2", "step_3")  # a fresh analysis: its trace is changed here
    trace = step.space(None).trace
    trace.capacity_bytes = 64 << 20
    host = whatif.WhatIf([whatif.Traced("unet_b2", "step_3", 3, "run_metadata", step, step.space(None))], 8)
    assert (host.limit, host.limit_source) == (None, None)
    trace.device_type, trace.allocator = "GPU", "GPU_0_bfc"
    question = whatif.WhatIf([whatif.Traced("unet_b2", "step_3", 3, "run_metadata", step, step.space(None))], 8)
    assert (question.limit, question.limit_source) == (64 << 20, "capacity")
    body = whatif_report.whatif_dict(question)
    assert body["max_batch"] == whatif.max_batch(question.one_step, 64 << 20, True) > 2
    assert whatif.WhatIf(question.steps, 8, limit=1 << 30).limit_source == "limit"


# -- the vectorised rules against the per-name ones ------------------------------------------------


def _best_match(size: int, sizes: set[int], chunks: bool) -> int:
    """The rule for one allocation (docs/figures.md), the reference `_SizeSets.best` is held to:
    the largest requested size an allocation of `size` bytes can hold (0: none), within the
    allocator's 256-byte rounding, or for a BFC chunk (`chunks`) below twice the rounded request."""
    rounding = trace_mod.BFC_ROUNDING

    def fits(s: int) -> bool:
        return s > 0 and s <= size < (2 * -(-s // rounding) * rounding if chunks else s + rounding)
    return max((s for s in sizes if fits(s)), default=0)


def _reference_one_step(step, space) -> tuple[list[bool], int]:
    """(scales per event, resident batch bytes) by the rules of docs/figures.md applied one name and
    one event at a time (whatif.py before it was vectorised), `_best_match` per event."""
    batch = whatif.traced_batch(step)
    shapes, labels, parameter_shapes, kind = {}, {}, set(), {}
    for other in step.spaces:
        if other.trace.outputs_of is None:
            continue
        fresh = [(index, name) for index, name in enumerate(other.names.raw) if name not in shapes]
        wanted = [name for _, name in fresh]
        labels.update(zip(wanted, trace_mod.labels_of(other.trace.label_of, wanted)))
        for (index, name), outputs in zip(fresh, other.trace.outputs_of(wanted)):
            shapes[name] = outputs
            read = other.names.op_types[index] in whatif._VARIABLE_READS or (
                other.names.category[index] == OPTIMIZER and step.trace.source == "xplane")
            if read:
                parameter_shapes.update(shape for shape, _ in outputs if shape)
            category = other.names.category[index]
            # A feed, or a forward-pass op (not a read nor a cast): its look-alikes may carry the batch.
            kind[name] = ("feed" if category == INPUTS else "forward" if category == ACTIVATIONS and not read
                          and other.names.op_types[index] not in whatif._CAST_OPS else None)
    # The batch as a first dimension, or flattened with a feed's positions (all its dimensions
    # but the batch, or but the batch and the last where it has three or more); in a profile, which
    # has no feeds, with the positions of the forward pass's tensors of rank three or more.
    # (Each space's own outputs of its names.)
    leads = {batch}
    profile = step.trace.source == "xplane"
    for other in step.spaces:
        if other.trace.outputs_of is None or batch <= 1:
            continue
        for index, name in enumerate(other.names.raw):
            category = other.names.category[index]
            if category == ACTIVATIONS if profile else category == INPUTS:
                (outputs,) = other.trace.outputs_of([name])
                leads.update(batch * int(np.prod(shape[1:] if len(shape) == 2 else shape[1:-1])) for shape, _ in
                             outputs if len(shape) >= (3 if profile else 2) and shape[0] == batch)
    # Shaped like a parameter, with the batch first: a feed's carry it, and a forward-pass op's whose data
    # input carries it (in the order the names first ran, so chains follow).
    carrying = {name for name, outputs in shapes.items()
                if any(shape and shape[0] in leads and shape not in parameter_shapes for shape, _ in outputs)}
    promoted = set()
    for name, outputs in shapes.items():
        alike = any(shape and shape[0] in leads and shape in parameter_shapes for shape, _ in outputs)
        if alike and (kind.get(name) == "feed" or (kind.get(name) == "forward" and any(
                i in carrying for i in whatif.label_inputs(labels[name])))):
            promoted.add(name)
            carrying.add(name)
    batch_bytes, other_bytes = {}, {}
    for name, outputs in shapes.items():
        batched = [shape for shape, _ in outputs if shape and shape[0] in leads and (
            shape not in parameter_shapes or name in promoted)]
        channels = max((shape[-1] for shape in batched), default=None)
        batch_bytes[name] = {size for shape, size in outputs if shape in batched or (
            channels is not None and len(shape) == 1 and shape[0] % batch == 0 and shape[0] > channels
            and shape not in parameter_shapes)}
        other_bytes[name] = {size for _, size in outputs} - batch_bytes[name]
    uses = {name: bool(batch_bytes[name]) or any(bool(batch_bytes.get(i)) for i in whatif.label_inputs(labels[name]))
            for name in shapes}
    trace, chunks = space.trace, step.trace.source == "xplane"
    working_set = findings.cpu_working_set_scratch(space)  # a CPU convolution gradient's scratch stays
    scales = []
    for execution, signed in zip(trace.event_exec.tolist(), trace.event_bytes.tolist()):
        name = trace.name(execution)
        held = _best_match(abs(signed), batch_bytes.get(name, set()), chunks)
        other = _best_match(abs(signed), other_bytes.get(name, set()), chunks)
        fixed = bool(working_set[trace.name_code[execution]]) and not held
        scales.append(uses.get(name, False) and not other > held and not fixed)
    resident = sum(sum(batch_bytes.get(name, ())) for code, name in enumerate(trace.distinct_names)
                   if space.names.category[code] == INPUTS)
    resident += sum(int(kept) for execution, kept in enumerate(trace.persistent.tolist())
                    if kept > 0 and kept in batch_bytes.get(trace.name(execution), ()))
    return scales, resident


def _assert_one_step_is_the_reference(step, space):
    one = whatif.OneStep(step, space)
    scales, resident = _reference_one_step(step, space)
    assert one.scales.tolist() == scales
    assert one.resident_batch_bytes == resident
    layer_names, of_name = whatif._layers(space)
    assert whatif._layers(space) is space.names.layers  # built once per name table
    # A layer that is itself an op (TF2's tape names gradients below their op) is the op's layer, and so is
    # one named as an op type below another (`layer1/MatMul`, its op fused away: trial W).
    ops = set(space.names.layer_paths)
    op_types = set(space.names.op_type_names) | names_mod.OP_SCOPES

    def named_as_op_type(layer):
        scope, _, last = layer.rpartition("/")
        return bool(scope) and re.sub(r"_\d+$", "", last) in op_types

    def layer_of(path):
        layer = names_mod.layer_of(path)
        return layer_of(layer) if layer != path and (layer in ops or named_as_op_type(layer)) else layer

    layers = [space.names.source_layers.get(raw) or layer_of(path)
              for raw, path in zip(space.names.raw, space.names.layer_paths)]
    assert layers == [space.names.layer(i) for i in range(len(layers))]  # findings ask one name at a time
    assert layer_names == sorted(set(layers)) and [layer_names[i] for i in of_name.tolist()] == layers
    return one


@pytest.mark.parametrize("run", RUNS)
def test_one_step_is_the_per_name_rules_on_the_demos(run):
    for tag in TAGS:
        one = _assert_one_step_is_the_reference(demo_step(run, tag), demo_step(run, tag).space(None))
        assert one.scales.any() and not one.scales.all() and one.resident_batch_bytes > 0


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(-1, 6), st.sets(st.integers(-300, 5000), max_size=6), max_size=6),
       st.lists(st.tuples(st.integers(-1, 7), st.integers(-10, 6000)), max_size=40), st.booleans())
def test_size_sets_are_best_match_for_every_event(sets, asked, chunks):
    rows = [row for row, sizes in sets.items() if row >= 0 for _ in sizes]
    sizes = [size for row, sizes in sets.items() if row >= 0 for size in sizes]
    # Each size twice: the sets are sets.
    table = whatif._SizeSets(np.array(rows * 2, dtype=np.int64), np.array(sizes * 2, dtype=np.int64))
    asked_rows = np.array([row for row, _ in asked], dtype=np.int64)
    asked_sizes = np.array([size for _, size in asked], dtype=np.int64)
    expected = [_best_match(size, sets.get(row, set()) if row >= 0 else set(), chunks) for row, size in asked]
    assert table.best(asked_rows, asked_sizes, chunks).tolist() == expected
    assert table.holds(asked_rows, asked_sizes).tolist() == [row >= 0 and size in sets.get(row, ())
                                                             for row, size in asked]
    assert table.sums(8).tolist() == [sum(sets.get(row, ())) for row in range(8)]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["a", "b_grad", "_grad", "grad", "c_gradient", "x_grad_grad", ""]), min_size=1,
                max_size=6))
def test_the_layer_of_a_path_by_string_searches_is_layer_of(parts):
    path = "/".join(parts)
    # The rule spelt out on the components: cut before the first one ending in `_grad`, else
    # before the last; an op with no scope is its own layer, and so is the gradient scope of one
    # (`Mean_grad/Tile` is `Mean_grad`).
    components = path.split("/")
    cut = next((i for i, part in enumerate(components) if part.endswith("_grad")), len(components) - 1)
    expected = (components[0] or path) if cut == 0 else ("/".join(components[:cut]) or path)
    assert names_mod.layer_of(path) == expected


BATCH = 4
# Outputs a name can have: batch-carrying, a parameter's shape whose first dimension is the batch,
# oneDNN-like flat workspaces (a multiple of the batch) and per-channel vectors, scalars.
SHAPES = [(BATCH, 3), (BATCH, 8), (BATCH, 2, 5), (8, BATCH), (BATCH * 6,), (BATCH * 2,), (5,), (BATCH,), (),
          (BATCH * 4,)]
SIZES = [0, 4, 96, 100, 255, 256, 300, 512, 700, 1024, 2048]
NAMES = ["_arg_x_0_0", "w/read", "Adam/update_w/ResourceApplyAdam", "l1/conv", "l1/relu", "l2/pool",
         "gradients/l1/conv_grad/Conv2DBackpropFilter", "gradients/l2/pool_grad/MaxPoolGrad", "loss/mul", "tmp"]
OP_TYPES = {"w/read": "ReadVariableOp", "Adam/update_w/ResourceApplyAdam": "ResourceApplyAdam"}


@st.composite
def _synthetic_steps(draw):
    """Two memory spaces sharing some names (a name's outputs and label come from the first space
    with shapes that holds it), random outputs, labels naming inputs in either space or none, and
    allocation events near the outputs' sizes or not."""
    spaces = []
    for index in range(2):
        names = draw(st.lists(st.sampled_from(NAMES[1:]), unique=True, min_size=1, max_size=len(NAMES) - 1))
        names = (["_arg_x_0_0"] if index == 0 else []) + names
        outputs = {name: draw(st.lists(st.tuples(st.sampled_from(SHAPES), st.sampled_from(SIZES)), max_size=3))
                   for name in names}
        outputs["_arg_x_0_0"] = [((BATCH, 3), 48)]
        labels = {}
        for name in names:
            if draw(st.booleans()):
                inputs = draw(st.lists(st.sampled_from(NAMES + ["elsewhere"]), max_size=3))
                ports = [f"{i}:1" if draw(st.booleans()) else i for i in inputs]
                control = ["^l1/relu"] if draw(st.booleans()) else []
                labels[name] = f"[cpu 0.1MB 0.1MB] {name} = Op({', '.join(ports + control)})"
        events = []
        for execution, name in enumerate(names):
            for _ in range(draw(st.integers(0, 3))):
                sizes = [size for _, size in outputs[name]] or [64]
                size = draw(st.sampled_from(sizes)) + draw(st.sampled_from([0, 1, 200, 255, 256, 600]))
                events.append((execution, size))
        if not events:
            events.append((len(names) - 1, 128))
        persistent = [draw(st.sampled_from([0, 0, 48, 96, 256])) for _ in names]
        with_shapes = index == 0 or draw(st.booleans())
        spaces.append(_space(f"CPU:{index}/cpu", names, outputs if with_shapes else None, labels, events, persistent))
    source = draw(st.sampled_from(["run_metadata", "xplane"]))
    step = analysis.analyse(trace_mod.Trace(spaces, ["CPU:0", "CPU:1"], 0, 100, 20, OP_TYPES, source))
    assert step.status == "ok", step.message
    return step


def _space(space_id, names, outputs, labels, events, persistent):
    n = len(names)
    timed = sorted((2 * execution + 1, i) for i, (execution, _) in enumerate(events))
    event_exec = np.array([events[i][0] for _, i in timed] * 2, dtype=np.int64)
    event_bytes = np.array([events[i][1] for _, i in timed] + [-events[i][1] for _, i in timed], dtype=np.int64)
    event_time = np.array([t for t, _ in timed] + [t + 100 for t, _ in timed], dtype=np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    return trace_mod.SpaceTrace(
        space_id, space_id.split("/")[0], "CPU", "cpu", labels, list(names), np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.int64) * 2, np.arange(n, dtype=np.int64) * 2 + 1, zeros, zeros, zeros, zeros, zeros,
        np.array(persistent, dtype=np.int64), event_time, event_bytes, event_exec, np.zeros(0, np.int64),
        np.zeros(0, np.int64), outputs_of=None if outputs is None else lambda asked: [outputs.get(name, [])
                                                                                        for name in asked])


@settings(max_examples=150, deadline=None)
@given(_synthetic_steps())
def test_one_step_is_the_per_name_rules_on_synthetic_steps(step):
    for space in step.spaces:
        _assert_one_step_is_the_reference(step, space)


# -- the JSON, the route, the CLI ----------------------------------------------------------------


def _expected(runs, batch, limit=None, series=False):
    """The engine's answer; with the series, as the route sends it (no run left out)."""
    body = whatif_report.whatif_dict(whatif.WhatIf([traced(run) for run in runs], batch, limit), series)
    return json.loads(json.dumps({**body, "skipped_runs": []} if series else body))


def test_the_answer_leads_with_the_fit_and_keeps_the_one_step():
    body = _expected(["unet_b2", "unet_b4"], 8, limit=100 << 20, series=True)
    assert body["method"] == "fit" and body["batch"] == 8
    assert [(r["run"], r["batch"]) for r in body["runs"]] == [("unet_b2", 2), ("unet_b4", 4)]
    fit, one = body["predictions"]["fit"], body["predictions"]["one_step"]
    assert body["predicted_peak_rise_bytes"] == fit["predicted_peak_rise_bytes"] == fitted("unet").peak_rise(8)
    assert body["predicted_peak_bytes"] == fit["predicted_start_bytes"] + fit["predicted_peak_rise_bytes"]
    # The one step is scaled from the traced batch nearest the one asked: 4, not the first run's 2.
    assert one["predicted_peak_rise_bytes"] == predictor("unet_b4").peak_rise(8)
    assert (one["from_run"], one["traced_batch"], fit["batches"]) == ("unet_b4", 4, [2, 4])
    assert body["limit_applies_to"] == "peak_bytes" and body["max_batch"] == fit["max_batch"]
    # A trace's records are the allocator's chunks too (a TF1 CNN's 8 MiB weight gradient got 13.5 MiB at
    # a larger batch): under a limit, keep a margin.
    assert any("keep a margin below the limit" in note for note in body["notes"])
    assert body["layers"] == fit["layers"] and len(body["layers"]) == whatif.TOP_LAYERS
    sizes = [layer["at_peak_bytes"] for layer in body["layers"]]
    assert sizes == sorted(sizes, reverse=True)
    series = body["series"]
    assert {1, 2, 4, 8, body["max_batch"], body["max_batch"] + 1} <= set(series["batch"])
    assert series["batch"] == sorted(series["batch"]) and len(series["batch"]) <= 60
    peaks = series["fit"]["peak_bytes"]
    assert peaks == sorted(peaks) and peaks[series["batch"].index(8)] == body["predicted_peak_bytes"]
    assert series["one_step"]["peak_rise_bytes"][series["batch"].index(4)] == traced("unet_b4").space.peak_rise_bytes


@pytest.mark.parametrize("order", [("unet_b2", "unet_b4"), ("unet_b4", "unet_b2")])
def test_the_one_step_is_scaled_from_the_nearest_traced_batch(order):
    """Runs at batch 2 and 4: the one step to 8 is batch 4's, to 1 batch 2's, in whichever order the
    runs are given (the first run's had been used: the helper's CNN from batch 8 and 16 to 32 read
    16% low from batch 8, exact from 16)."""
    steps = [traced(run) for run in order]
    to_8, to_1 = whatif.WhatIf(steps, 8), whatif.WhatIf(steps, 1)
    assert (to_8.base.run, to_1.base.run) == ("unet_b4", "unet_b2")
    assert to_8.one_step.peak_rise(8) == predictor("unet_b4").peak_rise(8)
    assert to_1.one_step.peak_rise(1) == predictor("unet_b2").peak_rise(1)
    one = whatif_report.whatif_dict(to_8)["predictions"]["one_step"]
    assert (one["from_run"], one["traced_batch"]) == ("unet_b4", 4)


def _two_phases(batch: int) -> whatif.Traced:
    """[batch, 8192] activations in the forward and backward passes; after the update, 2 MiB of no
    batch joined with a [batch, 256] tensor (the concat holds both, and its output). At batch 4 and
    8 the peak is the concat's, growing a little with the batch; at 64 the activations make it."""
    def build(tf):
        x, train = _wide_relus(tf, 8192)
        with tf.control_dependencies([train]):
            z = tf.square(tf.matmul(x, tf.compat.v1.get_variable("w", (8192, 256))))
            big = tf.square(tf.compat.v1.get_variable("table", (1024, 512)))
            after = tf.reduce_sum(tf.concat([tf.reshape(big, [-1]), tf.reshape(z, [-1])], 0))
        return [x], after

    return _traced_real(f"two_phases_b{batch}", build, [np.ones((batch, 8192), np.float32)], one_thread=True)


def test_a_peak_that_moves_beyond_the_traced_batches_leads_with_the_one_step():
    """Traced at 4 and 8, the peak is after the update, and grows a little with the batch: the fit
    through it predicts little growth. At 64 the one-step replay finds the peak in the backward pass,
    where the activations outgrow it; a real run at 64 agrees. The answer leads with the one step,
    and the fit says why it is not the answer (it had led, 60% low, without a word)."""
    small, large = _two_phases(4), _two_phases(8)
    question = whatif.WhatIf([small, large], 64)
    assert question.fitted is not None and not question.fitted.falls and not question.fitted.moves
    body = whatif_report.whatif_dict(question)
    assert body["method"] == "one_step"
    assert "the one-step replay finds the peak at another moment of the step" in body["predictions"]["fit"]["warning"]
    real = _two_phases(64).space.peak_rise_bytes
    assert body["predicted_peak_rise_bytes"] == pytest.approx(real, rel=0.15)
    assert body["predictions"]["fit"]["predicted_peak_rise_bytes"] < 0.6 * real
    # Asked at a batch where the peak stays where it was traced, the fit leads.
    assert whatif_report.whatif_dict(whatif.WhatIf([small, large], 12))["method"] == "fit"


def test_the_largest_batch_that_fits_is_one_the_answer_at_it_says_fits():
    """The fit leads at batch 12, but past the batch where the peak moves into the backward pass its
    line cannot see the peak: its largest batch under a limit is searched where the answer at each
    batch would lead, so asked at the batch found the answer fits, and at the next it does not (a
    stranger's Dense layer had been said to fit 2 GiB at a batch whose real step took 2.28 GB). The
    chart's fit follows the same answers."""
    small, large = _two_phases(4), _two_phases(8)
    moved = whatif.WhatIf([small, large], 64)
    limit = whatif.predicted_bytes(moved.one_step, 64, moved.absolute(moved.one_step))
    question = whatif.WhatIf([small, large], 12, limit)
    assert question.lead is question.fitted
    fits = question.max_batch(question.fitted)
    assert fits == 64  # the limit is what the one step reads at 64, where the peak has moved
    # On the fit's line alone, well past where the step, replayed, outgrows the limit.
    assert whatif.max_batch(question.fitted, limit, question.absolute(question.fitted)) > 2 * fits
    # What the search reads never falls as the batch grows (it doubles, then bisects), and is never under
    # the fit's line; where the replay finds the peak moved it is the one step's, from the nearest step.
    searched = question.as_answered(question.fitted)
    rises = [searched.peak_rise(batch) for batch in range(1, 3 * fits)]
    assert all(a <= b for a, b in zip(rises, rises[1:]))
    assert all(rise >= question.fitted.peak_rise(batch) for batch, rise in enumerate(rises, start=1))
    assert rises[fits - 1] == question.one_step_at(fits).peak_rise(fits) > question.fitted.peak_rise(fits)
    key = None
    for batch, expected in ((fits, True), (fits + 1, False)):
        body = whatif_report.whatif_dict(whatif.WhatIf([small, large], batch, limit), series=True)
        key = "predicted_peak_bytes" if body["limit_applies_to"] == "peak_bytes" else "predicted_peak_rise_bytes"
        assert (body[key] <= limit) is expected, (batch, body["method"], body[key], limit)
        assert body["max_batch"] == fits
    series = whatif_report.whatif_dict(question, series=True)["series"]
    drawn = series["fit"]["peak_bytes" if key == "predicted_peak_bytes" else "peak_rise_bytes"]
    over = [batch for batch, value in zip(series["batch"], drawn) if value > limit]
    assert over and min(over) == fits + 1


def _similarity(batch: int) -> whatif.Traced:
    """A contrastive loss's [batch, batch] similarity matrix (and its gradient): bytes that grow with
    the square of the batch."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 8), name="x")
        with tf.name_scope("sim"):
            h = tf.matmul(x, tf.compat.v1.get_variable("w", (8, 8)))
            gram = tf.matmul(h, h, transpose_b=True)
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.square(gram)))

    return _traced_real(f"similarity_b{batch}", build, [np.ones((batch, 8), np.float32)], one_thread=True)


def test_a_fit_through_bytes_that_grow_faster_than_the_batch_says_so():
    """A [batch, batch] similarity matrix traced at 512 and 1024: its layer's line through them has a
    negative fixed part (it grew 4x for 2x the batch), and at 2048 the fit is far below a real run.
    The fit says which layers do not grow in proportion to the batch; a fit through layers that do
    (the demo U-Net's) says nothing."""
    question = whatif.WhatIf([_similarity(512), _similarity(1024)], 2048)
    warning = question.fitted.warning
    # Its line, said as where it starts rather than as a negative fixed cost.
    assert warning and re.search(r"do not grow in proportion to the batch \(sim: [\d,]+ B per sample above batch "
                                 r"[1-9]\d*(\.\d)?[,)]", warning)
    real = _similarity(2048).space.peak_rise_bytes
    assert question.fitted.peak_rise(2048) < 0.8 * real  # what the warning is for
    assert whatif.Fitted([(2, traced("unet_b2").space), (4, traced("unet_b4").space)]).warning is None


def test_one_run_without_a_baseline_predicts_the_rise_only():
    # bigconv ran with oneDNN off: TensorFlow's plain `cpu` allocator, which reports no bytes in use.
    body = _expected(["bigconv"], 16, limit=100 << 20)
    assert body["method"] == "one_step" and body["predictions"]["fit"] is None
    assert body["predicted_peak_bytes"] is None and body["limit_applies_to"] == "peak_rise_bytes"
    assert body["max_batch"] == whatif.max_batch(predictor("bigconv"), 100 << 20, False)
    assert body["layers"][0]["traced_at_peak_bytes"] > 0


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    """A werkzeug client over TensorBoard's WSGI app: the demo runs, a corrupt step, a GPU step."""
    return memory_app_client(demo_runs_with_bad_steps(tmp_path_factory.mktemp("whatif_logs")))


def get_json(tb, expect=200, **params):
    response = tb.get(PREFIX + "whatif", query_string=params)
    assert response.status_code == expect, (params, response.get_data(as_text=True)[:500])
    assert response.mimetype == "application/json"
    return json.loads(response.get_data(as_text=True))


def test_route_equals_the_engine(tb):
    body = get_json(tb, run="unet_b2", tag="step_3", batch="8", runs="unet_b4", limit=str(100 << 20))
    assert body == _expected(["unet_b2", "unet_b4"], 8, limit=100 << 20, series=True)
    one = get_json(tb, run="resnet9_b2", tag="step_3", batch="16", device="CPU:0/mklcpu")
    assert one == _expected(["resnet9_b2"], 16, series=True)
    assert one["limit_bytes"] is None and one["max_batch"] is None
    # Another run's step: the same tag when it has it (else its latest).
    other = get_json(tb, run="unet_b2", tag="step_1", batch="8", runs="unet_b4")
    assert [(r["run"], r["tag"]) for r in other["runs"]] == [("unet_b2", "step_1"), ("unet_b4", "step_1")]
    assert tb.post(PREFIX + "whatif", query_string={"run": "unet_b2", "tag": "step_3", "batch": "8"}).status_code == 405
    # A batch the user gives for the step: the one read (2), or another.
    same = get_json(tb, run="unet_b2", tag="step_3", batch="8", traced_batch="2")
    assert same["runs"][0]["batch_given"] is True and same["predicted_peak_bytes"] == \
        _expected(["unet_b2"], 8, series=True)["predicted_peak_bytes"]
    given = get_json(tb, run="unet_b2", tag="step_3", batch="8", traced_batch="4")
    assert given["runs"][0]["batch"] == 4 and given["predicted_peak_bytes"] < same["predicted_peak_bytes"]
    # Fitted with another run, whose batch would be read from its shapes: that run is left out, and said.
    given = get_json(tb, run="unet_b2", tag="step_3", batch="8", traced_batch="2", runs="unet_b4")
    assert given["method"] == "one_step" and [r["run"] for r in given["runs"]] == ["unet_b2"]
    (skipped,) = given["skipped_runs"]
    assert skipped["run"] == "unet_b4" and "--traced-batch" in skipped["reason"]


@pytest.mark.parametrize("device", ["CPU:0/mklcpu", "/job:localhost/replica:0/task:0/device:CPU:0", "mklcpu", "CPU"])
def test_a_device_in_any_spelling_fits_with_the_other_runs(tb, device):
    """A device spelt as the runs route lists it, or as users write it, names the first step's memory space;
    the runs to fit with are read in that same space (the fit, not a one step that left them out as having
    "no memory space /job:localhost/...", which they have)."""
    body = get_json(tb, run="unet_b2", tag="step_3", batch="8", runs="unet_b4", device=device)
    assert body["method"] == "fit" and body["skipped_runs"] == []
    assert body == get_json(tb, run="unet_b2", tag="step_3", batch="8", runs="unet_b4")


def test_runs_that_cannot_be_fitted_are_left_out_and_said(tb):
    """The page offers every run to fit with: one that cannot be read there (corrupt, another
    memory space, another model) is left out with its reason, and the others still answer."""
    response = tb.get(PREFIX + "whatif", query_string=[("run", "unet_b2"), ("tag", "step_3"), ("batch", "8"),
                                                       *[("runs", r) for r in ("corrupt", "unet_b4", "gpu", "resnet9_b2")]])
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = json.loads(response.get_data(as_text=True))
    skipped = {s["run"]: s["reason"] for s in body.pop("skipped_runs")}
    assert body == {key: value for key, value in _expected(["unet_b2", "unet_b4"], 8, series=True).items()
                    if key != "skipped_runs"}
    assert set(skipped) == {"corrupt", "gpu", "resnet9_b2"}
    assert "corrupt" in skipped["corrupt"] and "feed" in skipped["gpu"]
    assert "share" in skipped["resnet9_b2"] and "layers" in skipped["resnet9_b2"]
    # The page names the memory space shown: a run without one like it says so, in words.
    device = body["runs"][0]["device"]
    response = tb.get(PREFIX + "whatif", query_string=[("run", "unet_b2"), ("tag", "step_3"), ("batch", "8"),
                                                       ("device", device), ("runs", "gpu"), ("runs", "unet_b4")])
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    (skipped,) = json.loads(response.get_data(as_text=True))["skipped_runs"]
    assert skipped["run"] == "gpu" and skipped["reason"].startswith(f"gpu step_1 has no memory space {device} (it has ")
    assert "unknown device" not in skipped["reason"]


@pytest.mark.parametrize("params, code, words", [
    ({"batch": None}, 400, "batch"),
    ({"batch": "x"}, 400, "integer"),
    ({"batch": "0"}, 400, "batch"),
    ({"limit": "0"}, 400, "limit"),
    ({"limit": "1GiB"}, 400, "integer"),
    ({"traced_batch": "0"}, 400, "traced_batch"),
    ({"traced_batch": "two"}, 400, "integer"),
    ({"tag": None}, 400, "tag"),
    ({"run": "nope"}, 404, "unknown run 'nope'"),
    ({"runs": "nope"}, 404, "unknown run 'nope'"),
    ({"tag": "step_9"}, 404, "unknown tag 'step_9'"),
    ({"device": "GPU:0/GPU_0_bfc"}, 404, "unknown device"),
    ({"run": "corrupt", "tag": "step_1"}, 422, "corrupt step_1"),
    ({"run": "gpu", "tag": "step_1"}, 422, "feed"),
])
def test_route_errors(tb, params, code, words):
    query = {"run": "unet_b2", "tag": "step_3", "batch": "8", **params}
    body = get_json(tb, expect=code, **{k: v for k, v in query.items() if v is not None})
    assert words in body["error"]


def _whatif(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["whatif", str(DEMO), *argv])
    return code, out.getvalue(), err.getvalue()


def test_cli_json_is_the_routes_answer_without_the_series():
    code, out, err = _whatif("--run", "unet_b2", "--run", "unet_b4", "--batch", "8", "--limit", "100MiB", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body == _expected(["unet_b2", "unet_b4"], 8, limit=100 << 20)
    assert {"batch", "runs", "predicted_peak_rise_bytes", "predicted_peak_bytes", "max_batch", "layers"} <= set(body)


def test_cli_text():
    code, out, err = _whatif("--run", "unet_b2", "--run", "unet_b4", "--tag", "step_3", "--batch", "8",
                             "--limit", str(100 << 20))
    assert code == 0, err
    body = _expected(["unet_b2", "unet_b4"], 8, limit=100 << 20)
    fit = body["predictions"]["fit"]
    assert out.startswith("== what-if at batch 8, from unet_b2 / step_3 (batch 2), unet_b4 / step_3 (batch 4)")
    assert out.index("   fit (fixed + per-sample") < out.index("   one step (unet_b4 / step_3 at batch 4")
    assert (f"predicted peak {cli.format_bytes(fit['predicted_peak_bytes'])}, "
            f"rise {cli.format_bytes(fit['predicted_peak_rise_bytes'])}") in out
    assert f"largest batch whose peak fits in 100.0 MiB (limit): {fit['max_batch']}" in out
    assert "top layers at the predicted peak (fit; each layer's own ops" in out and "shared_model/unet_00  (fixed" in out
    # A layer whose fixed part is below zero (the demo's fall outside the top 10: one set so, with the
    # figures of a GAN's discriminator the peak moved into) is said as where its line starts.
    moved = {"layer": "disc_1/fc1", "at_peak_bytes": 8910848, "fixed_bytes": -559104, "per_sample_bytes": 36992,
             "from_batch": 15.1}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cli._print_whatif({**body, "layers": [moved, *body["layers"]]})
    assert "8.5 MiB  disc_1/fc1  (36.1 KiB per sample above batch 15.1)" in printed.getvalue()
    assert "(fixed -" not in printed.getvalue()
    assert "(over a start of " in out  # the two predictions' peaks differ by their starts: said
    # A limit under the peak at batch 1 is said so, not "largest batch ...: 0" (a stranger read 0 as an answer).
    code, out, err = _whatif("--run", "unet_b2", "--tag", "step_3", "--batch", "8", "--limit", "1KiB")
    assert code == 0, err
    assert "largest batch whose peak fits in 1.0 KiB (limit): none: not even batch 1 fits" in out


@pytest.mark.parametrize("argv, words", [
    (["--run", "nope", "--batch", "8"], "no run 'nope' in"),
    (["--run", "unet_b2", "--tag", "step_9", "--batch", "8"], "no tag 'step_9' in run 'unet_b2'"),
    (["--run", "unet_b2", "--batch", "8", "--device", "GPU"], "no device of unet_b2/step_3 matches 'GPU'"),
])
def test_cli_failures_are_one_line(argv, words):
    profile = "profile/" + next((DEMO / "keras_unet/train/plugins/profile").iterdir()).name
    code, out, err = _whatif(*(arg.format(profile=profile) for arg in argv))
    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tb-memory: ") and words in lines[0], err


@pytest.mark.parametrize("argv", [["--batch", "0"], ["--batch", "8", "--limit", "lots"],
                                  ["--batch", "8", "--limit", "40"],  # 40 bytes: a unit is asked for
                                  ["--batch", "8", "--limit", "5000000TiB"]])  # past the route's 2**62, as it refuses
def test_cli_refuses_bad_arguments(argv):
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stderr(io.StringIO()):
        cli.main(["whatif", str(DEMO), "--run", "unet_b2", *argv])
    assert exited.value.code == 2


def test_no_batch_reaching_a_far_limit_is_said_so_not_that_nothing_grows():
    """A limit no batch up to the search's end reaches: `max_batch` null, and the text says no batch up to
    16,777,216 reaches it (it had said "nothing grows with the batch" of a peak that scales 4x from 2 to 8)."""
    code, out, err = _whatif("--run", "unet_b2", "--tag", "step_3", "--batch", "8", "--limit", "4096TiB")
    assert code == 0, err
    assert "any: no batch up to 16,777,216 reaches it" in out and "nothing grows" not in out
    # The JSON says how far the search read, which the page words the same way (not a number of its own).
    code, out, err = _whatif("--run", "unet_b2", "--tag", "step_3", "--batch", "8", "--limit", "4096TiB", "--json")
    body = json.loads(out)
    assert body["max_batch"] is None and body["max_batch_searched"] == whatif.MAX_BATCH_SEARCHED == 16_777_216


def test_cli_reads_a_keras_runs_profiled_step_by_default():
    """Without --tag, the run's latest step that holds step stats: the profile's last step, not
    the callback's later `batch_4` graph record (which holds none)."""
    profile = "profile/" + next((DEMO / "keras_unet/train/plugins/profile").iterdir()).name
    code, out, err = _whatif("--run", "keras_unet/train", "--batch", "8", "--json")
    assert code == 0, err
    assert json.loads(out)["runs"][0]["tag"] == f"{profile}/step_3"


def test_cli_says_why_there_is_no_fit():
    # Two runs of one model, both read as batch 2 (as given): nothing to fit.
    code, out, err = _whatif("--run", "unet_b2", "--run", "unet_b4", "--traced-batch", "2", "--traced-batch", "2",
                             "--batch", "8")
    assert code == 0, err
    assert "no fit: every step read holds batch 2 (a fit needs steps of the model traced at other batch sizes)" in out
    assert "   fit (" not in out
    # Another model's run at the same batch is refused, as at another batch (it had been passed over as "no fit").
    code, out, err = _whatif("--run", "unet_b2", "--run", "resnet9_b2", "--batch", "8")
    assert code == 1 and "not one model" in err and out == "", err


def test_cli_takes_the_traced_batch_once_per_run():
    code, out, err = _whatif("--run", "unet_b2", "--traced-batch", "4", "--batch", "8", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["runs"][0]["batch"] == 4 and body["runs"][0]["batch_given"] is True
    code, out, err = _whatif("--run", "unet_b2", "--run", "unet_b4", "--traced-batch", "2", "--batch", "8")
    assert code == 1 and not out and err.count("\n") == 1
    assert "--traced-batch given 1 times for 2 steps" in err
    # A batch given that nothing carries: the answer says it was given, not read.
    code, out, err = _whatif("--run", "unet_b2", "--traced-batch", "3", "--batch", "8")
    assert code == 1 and "carry its batch (3, as given: is that the batch it ran at?)" in err


def test_cli_on_the_keras_demo_profile():
    """The demo's Keras fit profile (batch 4, its input prefetched before the step)."""
    profile = "profile/" + next((DEMO / "keras_unet/train/plugins/profile").iterdir()).name
    code, out, err = _whatif("--run", "keras_unet/train", "--tag", f"{profile}/step_3", "--batch", "8", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["runs"][0]["source"] == "xplane" and body["runs"][0]["batch"] == 4
    assert body["predicted_peak_bytes"] == body["predicted_start_bytes"] + body["predicted_peak_rise_bytes"]
    assert body["limit_source"] is None and body["max_batch"] is None  # on a CPU: no limit without --limit


# -- TF2 profiles (XPlane) ------------------------------------------------------------------------

PROFILED_BATCHES = (4, 8)
PROFILE_SIZE = 64  # images 64x64: the batch-carrying bytes are a fair share of the peak beside the
# convolutions' fixed im2col scratch (TensorFlow caps it near 32 MiB whatever the batch)
@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Runs `keras_b4` and `keras_b8`: `<run>/plugins/profile/<session>/<host>.xplane.pb`, a Keras 3
    U-Net's `train_on_batch` profiled with tf.profiler.experimental (steps 0 to 3; no event file),
    made in parallel subprocesses by benchmarks/bench_whatif.py's script (BFC allocator, one
    inter-op thread)."""
    root = tmp_path_factory.mktemp("profiles")
    jobs = [bench_whatif.keras_profile_process(str(root / f"keras_b{batch}"), batch, PROFILE_SIZE)
            for batch in PROFILED_BATCHES]
    for job in jobs:
        _, err = job.communicate(timeout=600)
        assert job.returncode == 0, err.decode()[-2000:]
    return root


def _profile_path(root, batch):
    (path,) = (root / f"keras_b{batch}").glob("plugins/profile/*/*.xplane.pb")
    return path


@pytest.fixture(scope="module")
def profiled(profiles) -> dict:
    """batch -> [Traced] of each profiled step, analysed by the engine."""
    out = {}
    for batch in PROFILED_BATCHES:
        path = _profile_path(profiles, batch)
        decoded = xplane.decode(path.read_bytes())
        assert [s.number for s in decoded.steps] == [0, 1, 2, 3]
        out[batch] = []
        for index, step_info in enumerate(decoded.steps):
            step = analysis.analyse(decoded.trace(index))
            assert step.status == "ok", step.message
            tag = f"profile/{path.parent.name}/step_{step_info.number}"
            out[batch].append(whatif.Traced(f"keras_b{batch}", tag, step_info.number, "xplane", step, step.space(None)))
    return out


def _peak(space) -> int:
    return space.start_bytes + space.peak_rise_bytes


def _clean(profiled, batch) -> whatif.Traced:
    """The run's profiled step with the lowest peak: a busy machine can still start a convolution
    while another one's scratch is held (a schedule no replay predicts)."""
    return min(profiled[batch], key=lambda traced_step: (_peak(traced_step.space), traced_step.step_number))


def test_a_profiles_batch_is_its_inputs_where_the_forward_pass_holds_it_too():
    """Keras 2.12's optimizer updates run under no scope (`sub_26`: `[3, 3, 8, 16]` kernels) and
    outvote the forward pass's first dimensions; the batch Keras sliced from the dataset, which a
    quarter of the forward pass's tensors hold too, is the batch. An input of one example (a `map`
    before batching) the forward pass does not hold stays outvoted."""
    from protos import XSpaceBuilder

    def batch(fed_shape: str) -> int:
        space = XSpaceBuilder()
        space.event(1, "train", 0, 1000, step_num=1)
        space.event(2, "GatherV2:GatherV2", 5, 5)
        space._lines[2].name = "tf_data_private_threadpool/1"
        space.allocate(2, 6, 50_176, allocator="cpu_bfc", tf_op="GatherV2", shape=fed_shape)
        for i, name in enumerate(["model/conv/Conv2D", "model/conv/Relu"]):
            space.event(1, f"{name}:{name.rsplit('/', 1)[1]}", 20 + 10 * i, 5)
            space.allocate(1, 21 + 10 * i, 16 * 26 * 26 * 8 * 4, allocator="cpu_bfc", tf_op=name, shape="[16,26,26,8]")
        for i in range(5):
            space.event(1, f"sub_{i}:Sub", 100 + 10 * i, 5)
            space.allocate(1, 101 + 10 * i, 3 * 3 * 8 * 16 * 4, allocator="cpu_bfc", tf_op=f"sub_{i}", shape="[3,3,8,16]")
        return whatif.traced_batch(analysis.analyse(xplane.decode(space.serialized()).trace(0)))

    assert batch("[16,28,28,1]") == 16
    assert batch("[28,28,1]") == 3


def test_one_examples_tokens_are_no_batch_where_a_time_major_layer_shares_their_length():
    """tf.data maps each example to `[20]` token ids; the forward pass is `[16, 20, ...]` but its LSTM
    works time-major, `[20, 16, ...]`: the input is one example (rank 1), not a batch, and the
    forward pass decides."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 1000, step_num=1)
    space.event(2, "ParseExample:ParseExample", 5, 5)
    space._lines[2].name = "tf_data_private_threadpool/1"
    space.allocate(2, 6, 80, allocator="cpu_bfc", tf_op="ParseExample", shape="[20]")
    shapes = [("model/embedding/Gather", "[16,20,8]"), ("model/lstm/transpose", "[20,16,8]"),
              ("model/lstm/while/MatMul", "[20,16,32]"), ("model/dense/MatMul", "[16,20,10]"),
              ("model/dense/BiasAdd", "[16,20,10]"), ("model/softmax/Softmax", "[16,20,10]"),
              ("model/lstm/out", "[16,20,32]"), ("model/dropout/mul", "[16,20,32]")]
    for i, (name, shape) in enumerate(shapes):
        space.event(1, f"{name}:{name.rsplit('/', 1)[1]}", 20 + 10 * i, 5)
        space.allocate(1, 21 + 10 * i, 4096, allocator="cpu_bfc", tf_op=name, shape=shape)
    assert whatif.traced_batch(analysis.analyse(xplane.decode(space.serialized()).trace(0))) == 16


def test_the_batch_of_a_profiled_step_is_the_real_batch(profiled):
    for batch, steps in profiled.items():
        for traced_step in steps:
            assert whatif.traced_batch(traced_step.step) == traced_step.batch == batch


def test_one_step_on_a_profile_at_its_own_batch_is_the_traced_step(profiled):
    for batch, (*_, last) in profiled.items():
        prediction = whatif.one_step(last.step, last.space).predict(batch, top=10**6)
        assert prediction.peak_bytes == _peak(last.space) and prediction.start_bytes == last.space.start_bytes
        assert all(layer["at_peak_bytes"] == layer["traced_at_peak_bytes"] for layer in prediction.layers)
        # Layers holding bytes add up to the rise, less what the step freed of earlier allocations.
        held = sum(layer["at_peak_bytes"] for layer in prediction.layers)
        assert held >= last.space.peak_rise_bytes > held - (1 << 20)


# Measured: within 1% both ways on a quiet machine, 2.8% on a busy one. But the same batch
# profiled in two processes of a loaded machine peaks up to 5% apart (batch 8: 48.9 to 51.5 MB,
# each process's steps alike), and a prediction missed by 6.5% under load: the issue's 10%.
PROFILE_TOLERANCE = 0.10


def test_one_step_on_a_profile_predicts_the_other_profiled_batch(profiled):
    for source, target in ((4, 8), (8, 4)):
        traced_step = _clean(profiled, source)
        one = whatif.one_step(traced_step.step, traced_step.space)
        measured = _clean(profiled, target).space
        assert one.peak_rise(target) == pytest.approx(measured.peak_rise_bytes, rel=PROFILE_TOLERANCE)
        assert whatif.predicted_bytes(one, target, True) == pytest.approx(_peak(measured), rel=PROFILE_TOLERANCE)
        # Nothing scaled would miss by more than the tolerance (the batch's share).
        unscaled = traced_step.space.peak_rise_bytes
        assert abs(unscaled - measured.peak_rise_bytes) > PROFILE_TOLERANCE * measured.peak_rise_bytes


def test_one_step_is_the_per_name_rules_on_profiles(profiled):
    for steps in profiled.values():
        for traced_step in steps:
            one = _assert_one_step_is_the_reference(traced_step.step, traced_step.space)
            assert one.scales.any() and not one.scales.all()

def test_a_profiled_convolutions_fixed_scratch_does_not_scale(profiled):
    """XPlane shapes every allocation: the im2col buffer of a convolution's gradient has no batch
    dimension (TensorFlow sizes it the same at every batch) and keeps its bytes; its output scales."""
    traced_step = _clean(profiled, 4)
    one = whatif.one_step(traced_step.step, traced_step.space)
    trace = traced_step.space.trace
    shapes = dict(zip(trace.distinct_names, trace.outputs_of(trace.distinct_names)))
    checked = 0
    for name in (n for n in trace.distinct_names if n.endswith("/Conv2DBackpropInput")):
        (output_shape, output_bytes), (scratch_shape, scratch_bytes) = shapes[name]  # the output, then the scratch
        assert output_shape[0] == 4 and scratch_shape[0] != 4
        allocations = [i for i in range(trace.event_bytes.size)
                       if trace.event_bytes[i] > 0 and trace.name(int(trace.event_exec[i])) == name]
        # A BFC chunk holds its request and is less than twice it (256-byte rounding).
        output = [i for i in allocations if output_bytes <= trace.event_bytes[i] < 2 * output_bytes + 512]
        scratch = [i for i in allocations if scratch_bytes <= trace.event_bytes[i] < 2 * scratch_bytes + 512]
        assert len(output) == len(scratch) == 1 and output != scratch
        assert one.scales[output[0]] and not one.scales[scratch[0]]
        checked += 1
    assert checked == 7  # every convolution but the first (no gradient for the image)
    assert 0.05 < one.scaled_share < 0.5


def _layer_held(space) -> dict[str, int]:
    names, of_name = whatif._layers(space)
    return dict(zip(names, np.bincount(of_name[space.trace.name_code], space.exec_columns[AT_PEAK],
                                       len(names)).astype(np.int64).tolist()))


def test_the_fit_through_two_profiled_runs(profiled):
    fit = whatif.Fitted([(batch, _clean(profiled, batch).space) for batch in PROFILED_BATCHES])
    held = {batch: _layer_held(_clean(profiled, batch).space) for batch in PROFILED_BATCHES}
    _assert_moves_cancel(fit)
    for batch, moved in zip(PROFILED_BATCHES, fit.moved):
        prediction = fit.predict(batch)
        # Through each traced peak, but for a layer (or a name in it) holding the same requests in other
        # chunks at both (the allocator's, which vary from run to run): through their mean.
        assert prediction.peak_rise_bytes == pytest.approx(
            _clean(profiled, batch).space.peak_rise_bytes + sum(moved.values()), abs=8 * (1 + len(fit.chunk_layers)))
        assert prediction.start_bytes == _clean(profiled, batch).space.start_bytes
        rows = {row["layer"]: row["at_peak_bytes"] for row in fit.predict(batch, top=10**6).layers}
        for layer, value in held[batch].items():
            if value > 0:  # (a profile's frees of bytes from before the step are no row of the listing)
                assert rows.get(layer, 0) == pytest.approx(value + moved.get(layer, 0), abs=8), layer
    # Beyond the traced batches, the fit and the replay of either step agree: within 15%, as the
    # two-point fit doubles each measured peak's noise at batch 16 (measured: 0% to 8.5%).
    for source in PROFILED_BATCHES:
        one = whatif.one_step(_clean(profiled, source).step, _clean(profiled, source).space)
        assert whatif.predicted_bytes(fit, 16, True) == pytest.approx(whatif.predicted_bytes(one, 16, True), rel=0.15)
    assert fit.peak_rise(16) > fit.peak_rise(8) > fit.peak_rise(4)


def test_max_batch_on_a_profile_under_a_limit(profiled):
    steps = [_clean(profiled, 4), _clean(profiled, 8)]
    one = whatif.one_step(steps[1].step, steps[1].space)  # the one step is batch 8's, the nearer to 16
    limit = (whatif.predicted_bytes(one, 20, True) + whatif.predicted_bytes(one, 21, True)) // 2
    question = whatif.WhatIf(steps, 16, limit=limit)
    assert question.limit_source == "limit"
    for predictor in (question.one_step, question.fitted):
        fits = question.max_batch(predictor)
        assert whatif.predicted_bytes(predictor, fits, True) <= limit < whatif.predicted_bytes(predictor, fits + 1,
                                                                                               True)
    assert question.max_batch(question.one_step) == 20
    # A profile's chunks may grow more than the batch: the answer says to keep a margin (not without a limit).
    assert any("keep a margin below the limit" in note for note in question.notes)
    assert not any("keep a margin" in note for note in whatif.WhatIf(steps, 16).notes)


def test_a_cpu_profiles_allocator_cap_is_no_limit_by_itself(profiled):
    """The CPU BFC allocator reports a capacity (a 64 GiB cap, whatever the machine holds): not what
    a step must fit in, so no largest batch without a limit; with one, as on a GPU."""
    traced_step = _clean(profiled, 8)
    capacity = traced_step.space.trace.capacity_bytes
    assert capacity and capacity > _peak(traced_step.space) and traced_step.space.trace.memory_kind == "host"
    question = whatif.WhatIf([traced_step], 16)
    assert (question.limit, question.limit_source, question.max_batch(question.one_step)) == (None, None, None)
    question = whatif.WhatIf([traced_step], 16, limit=capacity)
    fits = question.max_batch(question.one_step)
    one = question.one_step
    assert whatif.predicted_bytes(one, fits, True) <= capacity < whatif.predicted_bytes(one, fits + 1, True)
    body = whatif_report.whatif_dict(question)
    assert (body["limit_bytes"], body["limit_source"], body["max_batch"]) == (capacity, "limit", fits)
    assert body["limit_applies_to"] == "peak_bytes"


def _profile_expected(profiled, batch, limit=None, series=False):
    steps = [profiled[4][-1], profiled[8][-1]]
    body = whatif_report.whatif_dict(whatif.WhatIf(steps, batch, limit), series)
    return json.loads(json.dumps({**body, "skipped_runs": []} if series else body))


def test_cli_whatif_on_profiles(profiles, profiled):
    """The latest profiled step of each run, fitted; the allocator's capacity as the limit."""
    code, out, err = _whatif_in(profiles, "--run", "keras_b4", "--run", "keras_b8", "--batch", "16", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body == _profile_expected(profiled, 16)
    assert [(r["run"], r["source"], r["batch"]) for r in body["runs"]] == [("keras_b4", "xplane", 4),
                                                                            ("keras_b8", "xplane", 8)]
    # Where the fit warns (its peaks fall in different layers: the profiled schedule varies from run to
    # run), the one-step prediction from batch 4 leads, the fit beside it; else the fit leads.
    assert (body["method"] == "one_step") == bool(body["predictions"]["fit"]["warning"])
    assert body["limit_source"] is None  # a CPU allocator's cap is no limit
    code, out, err = _whatif_in(profiles, "--run", "keras_b4", "--batch", "16", "--limit", "60MiB")
    assert code == 0, err
    assert "one step (keras_b4 / profile/" in out and "fits in 60.0 MiB (limit)" in out


def test_route_whatif_on_profiles(profiles, profiled):
    client = memory_app_client(profiles)
    tag = profiled[4][-1].tag
    response = client.get(PREFIX + "whatif", query_string={"run": "keras_b4", "tag": tag, "batch": "16",
                                                           "runs": "keras_b8", "limit": str(60 << 20)})
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = json.loads(response.get_data(as_text=True))
    assert body == _profile_expected(profiled, 16, limit=60 << 20, series=True)
    assert body["max_batch"] is not None and body["predicted_peak_bytes"] > 0


def _without_shapes(data: bytes) -> bytes:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    for plane in space.planes:
        shape_ids = {k for k, m in plane.stat_metadata.items() if m.name == "shape"}
        for line in plane.lines:
            for event in line.events:
                kept = [stat for stat in event.stats if stat.metadata_id not in shape_ids]
                del event.stats[:]
                event.stats.extend(kept)
    return space.SerializeToString()


def test_a_profile_without_shapes_says_why(profiles):
    decoded = xplane.decode(_without_shapes(_profile_path(profiles, 4).read_bytes()))
    step = analysis.analyse(decoded.trace(0))
    assert step.status == "ok"
    with pytest.raises(whatif.WhatIfError, match="no input op and no forward-pass tensor with a shape"):
        whatif.traced_batch(step)


# A custom training loop's step of `model` (SGD, sparse categorical cross-entropy), for the scripts below.
_TRAIN_STEP_SCRIPT = """
optimizer = keras.optimizers.SGD(0.01)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
"""

MAPPED_PIPELINE_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

logdir, batch = sys.argv[1], int(sys.argv[2])
model = keras.Sequential([keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
                          keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
model.build((None, 32, 32, 3))
""" + _TRAIN_STEP_SCRIPT + """
rng = np.random.default_rng(0)
images = rng.standard_normal((batch * 6, 32, 32, 3)).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((images, rng.integers(0, 10, batch * 6).astype("int32")))
# No prefetch: each step's `next(it)` maps the next batch's examples inside the step's marker (with a
# prefetch, the pipeline's thread could run ahead of the marked steps, and none would show them).
ds = ds.map(lambda x, y: (tf.image.random_flip_left_right(x), y)).batch(batch)
it = iter(ds)
train_step(*next(it))
tf.profiler.experimental.start(logdir)
for step in range(3):
    with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
        train_step(*next(it))
tf.profiler.experimental.stop()
"""


LANGUAGE_MODEL_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

logdir, batch = sys.argv[1], int(sys.argv[2])
model = keras.Sequential([keras.Input((64,), dtype="int32"), keras.layers.Embedding(8000, 32, name="tok_emb"),
                          keras.layers.Dense(64, activation="relu", name="ffn"), keras.layers.Dense(8000, name="lm_head")])
""" + _TRAIN_STEP_SCRIPT + """
rng = np.random.default_rng(0)
x = tf.constant(rng.integers(0, 8000, (batch, 64)).astype("int32"))
train_step(x, x)
tf.profiler.experimental.start(logdir)
for step in range(2):
    with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
        train_step(x, x)
tf.profiler.experimental.stop()
"""


def _language_model_steps(tmp_path, batch: int) -> list:
    import subprocess

    logdir = tmp_path / f"lm_b{batch}"
    job = subprocess.run([sys.executable, "-c", LANGUAGE_MODEL_SCRIPT, str(logdir), str(batch)], capture_output=True,
                         env=dict(__import__("os").environ, **bench_whatif.KERAS_PROFILE_ENV), timeout=600)
    assert job.returncode == 0, job.stderr.decode()[-2000:]
    (path,) = logdir.glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    return [analysis.analyse(decoded.trace(index)) for index in range(len(decoded.steps))]


def test_a_profiles_logits_flattened_with_the_sequence_carry_the_batch(tmp_path):
    """A language model's logits are `[batch x seq, vocab]` (Keras' Dense over `[batch, seq, d]`); a profile has no
    feed to read the sequence from, so its forward pass's `[batch, seq, d]` tensors say it: the logits carry the batch
    and scale (trial AH: a 49 MiB lm_head stayed at its traced size, the peak predicted 22% low)."""
    traced = _language_model_steps(tmp_path, 4)[-1]
    space = traced.space(None)
    assert whatif.traced_batch(traced) == 4
    assert 4 * 64 in whatif.flattened_batches(traced, 4)
    one = whatif.one_step(traced, space)
    # (Each step of the profile at batch 8: their peaks differ by the schedule on a loaded machine.)
    real = [step.space(None).peak_rise_bytes for step in _language_model_steps(tmp_path, 8)]
    predicted = whatif.predicted_bytes(one, 8, absolute=False)
    # The logits unscaled, it had predicted 38% low.
    assert 0.85 * min(real) <= predicted <= 1.15 * max(real), (predicted, real, space.peak_rise_bytes)


def test_the_batch_of_a_profile_whose_pipeline_maps_examples_is_the_forward_passs(tmp_path):
    """A custom training loop fed by `ds.map(flip).batch(8)`: in each profiled step the pipeline
    flips the next batch's images one by one ([32, 32, 3], input ops). The batch is the
    forward pass's 8, not the images' height, and a step predicts the batch's growth (it predicted
    the traced peak at any batch, and a largest batch of 85,116 under 40 MiB)."""
    import subprocess

    job = subprocess.run([sys.executable, "-c", MAPPED_PIPELINE_SCRIPT, str(tmp_path), "8"], capture_output=True,
                         env=dict(__import__("os").environ, **bench_whatif.KERAS_PROFILE_ENV), timeout=600)
    assert job.returncode == 0, job.stderr.decode()[-2000:]
    (path,) = tmp_path.glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    steps = [analysis.analyse(decoded.trace(index)) for index in range(len(decoded.steps))]
    steps = [step for step in steps if step.status == "ok"]
    mapped = 0  # steps in which the pipeline's images would read as the batch
    for step in steps:
        space = step.space(None)
        inputs = whatif._leading_dims(step, INPUTS, 1, lambda shape: 1)
        mapped += bool(inputs) and max(inputs, key=inputs.get) == 32  # the images' height
        assert whatif.traced_batch(step) == 8
        # The pipeline's images ([32, 32, 3], one by one) are no feed of items four per example.
        assert whatif.per_item_feeds(step, 8) == {}
        one = whatif.one_step(step, space)
        assert one.scaled_share > 0.05 and one.peak_rise(32) > 1.2 * space.peak_rise_bytes, (one.scaled_share,)
    assert steps and mapped == len(steps), "a step without the pipeline's per-example ops"


def _whatif_in(logdir, *argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["whatif", str(logdir), *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", ["whatif", "diff"])
def test_a_run_given_as_the_logdir_is_dot_for_whatif_and_diff_too(command):
    """`--run .` names the logdir itself where it is a run, for whatif and diff as for summary (the
    README says so); they had answered "no run '.'"."""
    argv = ["--batch", "8"] if command == "whatif" else ["--against", ":step_1"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([command, str(DEMO / "unet_b2"), "--run", ".", "--tag", "step_3", *argv, "--json"])
    assert code == 0, err.getvalue()
    by_dot = json.loads(out.getvalue())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main([command, str(DEMO), "--run", "unet_b2", "--tag", "step_3", *argv, "--json"]) == 0
    by_name = json.loads(out.getvalue())
    if command == "whatif":
        assert by_dot["runs"][0]["run"] == "unet_b2"
        assert by_dot["predicted_peak_rise_bytes"] == by_name["predicted_peak_rise_bytes"]
    else:
        assert by_dot["a"]["run"] == by_dot["b"]["run"] == "unet_b2"
        assert by_dot["peak_rise_delta_bytes"] == by_name["peak_rise_delta_bytes"]


def test_the_other_runs_step_matches_the_first_runs():
    """A fit reads each other run's step matching the first run's: the same tag; else, for runs the
    Keras callback wrote (each profile named after its own session, beside an empty `batch_N`
    record), the step of the same source and number; else that source's latest step."""
    def ref(tag, plugin, step, wall=0.0):
        return store.StepRef("r", tag, plugin, step, wall)

    keras_run = [ref("batch_3", store.TAGGED_RUN_METADATA, 3, 9.0), ref("host_b#2", store.PROFILE, 2, 1.0),
                 ref("host_b#3", store.PROFILE, 3, 2.0)]
    first = ref("host_a#3", store.PROFILE, 3)
    assert store.matching_step(keras_run, first).tag == "host_b#3"
    assert store.matching_step(keras_run, ref("host_a#7", store.PROFILE, 7)).tag == "host_b#3"  # latest profile
    assert store.matching_step(keras_run, ref("host_b#2", store.PROFILE, 9)).tag == "host_b#2"  # same tag first
    assert store.matching_step(keras_run, ref("step_1", store.TAGGED_RUN_METADATA, 1)).tag == "batch_3"
    assert store.matching_step(keras_run[1:], ref("step_1", store.TAGGED_RUN_METADATA, 1)).tag == "host_b#3"
    # Knowing which steps hold devices, the empty record is none to take: the profiled step is.
    devices = {"batch_3": [], "host_b#2": ["/device:CPU:0"], "host_b#3": ["/device:CPU:0"]}
    assert store.matching_step(keras_run, ref("step_1", store.TAGGED_RUN_METADATA, 1),
                               lambda r: devices[r.tag]).tag == "host_b#3"


# -- XLA programs (TensorFlow's jit_compile here; JAX's in test_xla_blocks.py) -----------------------


@pytest.fixture(scope="module")
def jit_profiles(tmp_path_factory):
    return profile_jit_runs(tmp_path_factory.mktemp("jit_profiles"))


def _jit_traced(root, batch: int) -> whatif.Traced:
    (path,) = (root / f"jit_b{batch}").glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
    return whatif.Traced(f"jit_b{batch}", "step", 1, "xplane", step, step.space(None))


def test_an_xla_steps_batch_is_its_programs_data_argument(jit_profiles):
    """The batch of a step of XLA programs is read from the data its program takes (x: [batch, 256],
    y: [batch]), not from its variables (arguments too, aliased with its outputs: [256, 1024] would
    outvote it) nor its values; one step cannot be scaled, and the answer asks for a second batch size."""
    for batch in (64, 256):
        traced_step = _jit_traced(jit_profiles, batch)
        assert whatif.ran_xla(traced_step.step)
        shapes = traced_step.step.trace.program_shapes
        assert sorted(shapes.inputs) == sorted([(batch, 256), (batch,)])
        assert traced_step.batch == batch
        with pytest.raises(whatif.WhatIfError, match=f"another batch size besides {batch} and fit over both"):
            whatif.WhatIf([traced_step], 128)


def test_xla_steps_at_two_batch_sizes_are_fitted(jit_profiles):
    """Two steps of one XLA-compiled model at batch 64 and 256: the fit leads, alone (no one-step
    prediction, null in the JSON and the chart's series), exact at the traced batches, the model's
    layers growing with the batch."""
    steps = [_jit_traced(jit_profiles, 64), _jit_traced(jit_profiles, 256)]
    question = whatif.WhatIf(steps, 512)
    assert question.one_step is None and list(question.predictors) == ["fit"]
    _assert_moves_cancel(question.fitted)
    for traced_step, moved in zip(steps, question.fitted.moved):  # a line through two points: each traced peak,
        predicted = question.fitted.peak_rise(traced_step.batch)  # to the rounding of each layer
        # (but a layer, or a name in it, holding the same requests in other chunks at both goes through their mean)
        assert abs(predicted - (traced_step.space.peak_rise_bytes + sum(moved.values()))) <= len(
            question.fitted.layer_names)
    body = whatif_report.whatif_dict(question, series=True)
    assert body["method"] == "fit" and body["predictions"]["one_step"] is None
    assert body["series"]["one_step"] is None and len(body["series"]["fit"]["peak_rise_bytes"]) == len(
        body["series"]["batch"])
    assert [run["batch"] for run in body["runs"]] == [64, 256]
    per_sample = {layer["layer"]: layer["per_sample_bytes"] for layer in body["layers"]}
    assert per_sample.get("mlp/h1", 0) > 0 or per_sample.get("mlp/h2", 0) > 0, body["layers"]
    assert body["predicted_peak_rise_bytes"] > steps[1].space.peak_rise_bytes
    # The start is held as the nearest traced step's, as the note on it says, not drawn out along a line
    # through the traced starts (trial W: 2.5 and 12.1 MB at 32 and 64 read as 31.3 MB at 128, which held 6.9).
    assert [question.fitted.start_bytes(b) for b in (32, 64, 160, 512)] == [
        steps[0].space.start_bytes, steps[0].space.start_bytes, steps[1].space.start_bytes, steps[1].space.start_bytes]


def test_route_and_cli_fit_xla_steps(jit_profiles):
    """The whatif route fits the two runs (the other run's latest step), and says what to do with one
    alone (422); the CLI prints the fit alone."""
    client = memory_app_client(jit_profiles)
    runs = {run["run"]: run for run in json.loads(client.get(PREFIX + "runs").get_data(as_text=True))["runs"]}
    tag = runs["jit_b64"]["steps"][-1]["tag"]
    response = client.get(PREFIX + "whatif", query_string={"run": "jit_b64", "tag": tag, "batch": "512",
                                                           "runs": "jit_b256"})
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = json.loads(response.get_data(as_text=True))
    assert body["method"] == "fit" and body["predictions"]["one_step"] is None and body["skipped_runs"] == []
    assert [run["batch"] for run in body["runs"]] == [64, 256]
    alone = client.get(PREFIX + "whatif", query_string={"run": "jit_b64", "tag": tag, "batch": "512"})
    assert alone.status_code == 422 and "fit over both" in alone.get_data(as_text=True)
    # A batch given for the first run leaves the other out (its batch would be read): the 422 says so.
    given = client.get(PREFIX + "whatif", query_string={"run": "jit_b64", "tag": tag, "batch": "512",
                                                        "runs": "jit_b256", "traced_batch": "64"})
    assert given.status_code == 422 and "jit_b256 " in given.get_data(as_text=True)
    assert " left out: the batch of jit_b64" in given.get_data(as_text=True)
    code, out, err = _whatif_in(jit_profiles, "--run", "jit_b64", "--run", "jit_b256", "--batch", "512")
    assert code == 0, err
    assert "fit (fixed + per-sample bytes per layer through batches 64, 256)" in out and "one step" not in out


def test_a_step_that_runs_a_jitted_helper_is_its_ops(jit_profiles):
    """A train step TensorFlow runs op by op, its gradients clipped by a small XLA program: the step
    is its ops' (the program holds under half its peak rise), its batch read from its forward pass
    (512, not the gradients' 256 or 1024 the program takes), and one step scales it."""
    (path,) = (jit_profiles / "clip_b512").glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
    assert any(program.allocated_bytes for space in step.spaces for program in space.xla_programs())
    assert analysis.xla_programs_share(step.spaces) < 0.5
    assert not whatif.ran_xla(step)
    assert whatif.program_batch(step.trace.program_shapes) != 512  # the program's own data: gradients
    assert whatif.traced_batch(step) == 512
    question = whatif.WhatIf([whatif.Traced("clip_b512", "step", 1, "xplane", step, step.space(None))], 1024)
    assert question.one_step is not None and question.one_step.scales.any()


def test_a_step_whose_jitted_helper_holds_a_good_share_asks_for_its_batch(jit_profiles):
    """A jitted gradient clip holding between a tenth and half of the peak rise, beside ops whose
    shapes mislead (Adam's eager updates, `[512, 512]`, unscoped): the batch is asked for, not read
    (512 would be); given, one step scales the step's ops."""
    (path,) = (jit_profiles / "clip_eager_b64").glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
    assert 0.1 <= analysis.xla_programs_share(step.spaces) < 0.5 and not whatif.ran_xla(step)
    with pytest.raises(whatif.WhatIfError, match="beside TensorFlow's ops.*give the batch it ran at"):
        whatif.traced_batch(step)
    assert not whatif.programs_beside_ops(step)  # its ops' shapes are no forward pass of one batch
    question = whatif.WhatIf([whatif.Traced("clip_eager_b64", "step", 1, "xplane", step, step.space(None), 64)], 128)
    assert question.one_step.batch == 64 and question.one_step.scales.any()


def test_the_batch_beside_keras_grouped_convolution_programs_is_the_ops_forward_passes(jit_profiles):
    """Keras 3 runs a grouped convolution (ConvNeXt's depthwise ones) as XLA programs on a CPU, inside a step of
    TensorFlow's ops: the programs' data had read trial Y's ConvNeXtTiny at 4 and 8 as batch 7 (its kernels'
    width), and a tenth to half of the peak in programs had refused the batch. It is the ops' forward pass's;
    the step is fitted over batches, its programs' bytes not scaled from one."""
    traced = []
    for batch in (4, 8):
        (path,) = (jit_profiles / f"grouped_b{batch}").glob("plugins/profile/*/*.xplane.pb")
        decoded = xplane.decode(path.read_bytes())
        step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
        assert analysis.xla_programs_share(step.spaces) >= analysis.NOTED_PROGRAM_SHARE
        assert whatif.programs_beside_ops(step) and whatif.traced_batch(step) == batch
        traced.append(whatif.Traced(f"grouped_b{batch}", "step", 1, "xplane", step, step.space(None)))
    question = whatif.WhatIf(traced, 16)
    assert question.one_step is None and question.fitted is not None
    with pytest.raises(whatif.WhatIfError, match="beside its ops.*besides 8"):
        whatif.WhatIf(traced[1:], 16)


@pytest.mark.parametrize("inputs, leading, batch", [
    (((64, 784), (64,)), {64: 80, 784: 5, 512: 5}, 64),  # data beside a weight's gradient
    (((784, 512), (512,), (64, 784)), {64: 80, 512: 3}, 64),  # weights it only reads (inference)
    (((2,),), {64: 118, 128: 7}, 64),  # a random key; the data a closure's constants
    ((), {64: 118, 1: 20}, 64),  # no argument at all
    (((64,), (64,), (2,)), {}, 64),  # no value of rank 2 or more: the arguments' commonest
    (((32, 128), (32,), (16, 16)), {32: 10, 16: 10}, 32),  # equal values: the dimension more arguments have
], ids=["data", "read-only weights", "key only", "no arguments", "no values", "tie"])
def test_an_xla_programs_batch_is_a_data_arguments_its_values_share(inputs, leading, batch):
    assert whatif.program_batch(trace_mod.ProgramShapes(inputs, lambda: leading)) == batch


def test_an_xla_step_without_its_programs_hlo_says_how_to_give_its_batch(jit_profiles, monkeypatch):
    """Without the HLO (or none matching the runs) the batch cannot be read: the answer says so and
    points to the CLI's --traced-batch; given, two runs fit; one alone asks for another batch size."""
    from tracedata import decoded_without_hlo

    steps = []
    for batch in (64, 256):
        (path,) = (jit_profiles / f"jit_b{batch}").glob("plugins/profile/*/*.xplane.pb")
        decoded = decoded_without_hlo(monkeypatch, path.read_bytes())
        step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
        assert whatif.ran_xla(step) and step.trace.program_shapes is None
        with pytest.raises(whatif.WhatIfError, match="no compiled HLO that matches their runs .*--traced-batch"):
            whatif.traced_batch(step)
        steps.append(whatif.Traced(f"jit_b{batch}", "step", 1, "xplane", step, step.space(None), batch))
    assert whatif.WhatIf(steps, 512).fitted is not None
    with pytest.raises(whatif.WhatIfError, match="besides 64 and fit over both"):
        whatif.WhatIf(steps[:1], 512)
    with pytest.raises(whatif.WhatIfError, match="every step read holds batch 64"):
        whatif.WhatIf([steps[0], dataclasses.replace(steps[1], given_batch=64)], 512)


@pytest.mark.parametrize("command", ["whatif", "diff"])
def test_whatif_and_diff_read_a_logdirs_one_run_without_run(command):
    """Without --run, whatif and diff read the logdir's one run (as summary does; they had asked for
    --run where the logdir is itself a run), and a logdir of several runs is a one-line error that
    names them."""
    argv = ["--batch", "8"] if command == "whatif" else ["--against", ":step_1"]
    outputs = []
    for run_flag in ((), ("--run", ".")):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([command, str(DEMO / "unet_b2"), *run_flag, "--tag", "step_3", *argv, "--json"])
        assert code == 0, err.getvalue()
        outputs.append(json.loads(out.getvalue()))
    assert outputs[0] == outputs[1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([command, str(DEMO), "--tag", "step_3", *argv])
    assert code == 1 and out.getvalue() == ""
    assert err.getvalue().count("\n") == 1 and "give --run" in err.getvalue(), err.getvalue()
    assert "unet_b2" in err.getvalue() and "resnet9_b4" in err.getvalue()



def test_a_limit_on_mklcpu_says_its_start_leaves_small_tensors_out():
    """mklcpu's start counts its requests of 256 KiB and more: under a limit on absolute bytes, the
    notes say the predicted peak leaves the smaller tensors in use before the step out; without a
    limit, or on an allocator that counts every request, they say nothing of it."""
    said = "counts only mklcpu's requests of 256.0 KiB and more"
    limited = _expected(["unet_b2"], 8, limit=100 << 20)
    assert limited["limit_applies_to"] == "peak_bytes" and any(said in note for note in limited["notes"])
    assert not any(said in note for note in _expected(["unet_b2"], 8)["notes"])
    assert not any("requests of" in note for note in _expected(["bigconv"], 8, limit=100 << 20)["notes"])


def test_memory_the_records_miss_is_a_margin_the_answer_names():
    """The demo U-Net's step_3: oneDNN held memory through mklcpu that no record shows (its allocator_gap),
    which no prediction counts. The answer says how much, and that much scaled to the batch asked; a step
    whose readings stay with its records (step_1) says nothing of it."""
    (gap,) = findings.allocator_gap(demo_step("unet_b2", "step_3").space(None))
    held = findings.readings_above(demo_step("unet_b2", "step_3").space(None))
    assert gap.details["gap_bytes"] > 0 and held == max(gap.details["above_bytes"], gap.details["above_peak_bytes"]) > 0
    notes = whatif.WhatIf([traced("unet_b2")], 8, limit=200 << 20).notes
    (said,) = [note for note in notes if "beyond what its records show" in note]
    assert said.startswith(f"mklcpu held up to {format_bytes(held)} in unet_b2 step_3")
    assert f"(at batch 8, scaled as the batch, {format_bytes(held * 4)}), and faster" in said
    # Under a limit: the largest batch that fits with it added, scaled as the batch, below the one found.
    question = whatif.WhatIf([traced("unet_b2")], 8, limit=200 << 20)
    found = question.max_batch(question.lead)
    bound = int(re.search(r"with it added, scaled as the batch, batch ([\d,]+) would fit", said).group(1).replace(",", ""))
    per_sample = held / 2
    assert bound < found
    assert whatif.predicted_bytes(question.lead, bound, True) + per_sample * bound <= 200 << 20
    assert whatif.predicted_bytes(question.lead, bound + 1, True) + per_sample * (bound + 1) > 200 << 20
    # Without a limit, it is added to the peak read.
    (said,) = [note for note in whatif.WhatIf([traced("unet_b2")], 8).notes if "beyond what its records show" in note]
    assert "so add it to the predicted peak" in said
    assert findings.allocator_gap(demo_step("unet_b2", "step_1").space(None)) == []
    assert not any("beyond what its records show" in note
                   for note in whatif.WhatIf([traced("unet_b2", "step_1")], 8, limit=200 << 20).notes)


def test_cli_fits_steps_of_one_run_given_by_tag(tmp_path):
    """A script that traced batches 2 and 4 into one run (tags b2, b4: the demo U-Net's real steps): --tag once
    per step fits them, as two runs are fitted; the same step given twice, or a run twice without tags, is
    refused with what to give (a repeated --tag had been dropped without a word)."""
    import protos
    from tracedata import read_blob_bytes

    for tag, run in (("b2", "unet_b2"), ("b4", "unet_b4")):
        protos.write_tagged_run_metadata(tmp_path / "mixed", tag, read_blob_bytes(DEMO, run, "step_3"))
    code, out, err = _whatif_in(tmp_path, "--run", "mixed", "--tag", "b2", "--tag", "b4", "--batch", "8", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert [(r["run"], r["tag"], r["batch"]) for r in body["runs"]] == [("mixed", "b2", 2), ("mixed", "b4", 4)]
    two_runs = json.loads(_whatif("--run", "unet_b2", "--run", "unet_b4", "--batch", "8", "--json")[1])
    assert body["predictions"]["fit"]["batches"] == [2, 4]
    assert body["predictions"]["fit"]["predicted_peak_rise_bytes"] == two_runs["predictions"]["fit"]["predicted_peak_rise_bytes"]
    code, out, err = _whatif_in(tmp_path, "--run", "mixed", "--tag", "b2", "--tag", "b2", "--batch", "8")
    assert code == 1 and not out and "mixed/b2 is given twice" in err
    code, out, err = _whatif_in(tmp_path, "--run", "mixed", "--run", "mixed", "--batch", "8")
    assert code == 1 and not out and "--run mixed is given twice" in err and "--tag A --tag B" in err
    code, out, err = _whatif("--run", "unet_b2", "--run", "unet_b4", "--run", "unet_b2", "--tag", "step_1",
                             "--tag", "step_2", "--batch", "8")
    assert code == 1 and "--tag given 2 times for 3 runs" in err


def _mlp_profile_logdir(root):
    """A logdir of one run, `mlp`, holding tests/data/cpu_bfc's real profile of steps at batches 32 and 64."""
    session = root / "mlp" / "plugins" / "profile" / "2026_11_28_10_37_49"
    session.mkdir(parents=True)
    (session / "vm.xplane.pb").write_bytes(
        (REPO / "tests" / "data" / "cpu_bfc" / "mlp_steps_at_batch_32_and_64.xplane.pb").read_bytes())
    return root


def test_a_profile_with_steps_at_other_batches_says_a_fit_is_a_tag_away(tmp_path):
    """tests/data/cpu_bfc: one profile of a model's steps at batches 32, 32, 64 and 64. The what-if from the last
    step alone names the steps at batch 32 and how to fit over them; fitted over them, it says nothing of it."""
    code, out, err = _whatif_in(_mlp_profile_logdir(tmp_path), "--batch", "128", "--json")
    assert code == 0, err
    body = json.loads(out)
    tag = body["runs"][0]["tag"]
    assert tag.endswith("/step_3") and body["runs"][0]["batch"] == 64 and body["predictions"]["fit"] is None
    (note,) = [n for n in body["notes"] if "also holds the same model's" in n]
    session_tag = tag.rpartition("/")[0]
    # One step per other batch size, the nearest: step_1 (step_2 is at batch 64 too).
    assert note.startswith(f"mlp also holds the same model's {session_tag}/step_1 at batch 32 ({tag}: 64)")
    assert note.endswith(f"(the page: pick it among the steps to fit with; the CLI: --run mlp --tag {tag} "
                         f"--tag {session_tag}/step_1)")
    code, out, err = _whatif_in(tmp_path, "--run", "mlp", "--tag", tag, "--tag", f"{session_tag}/step_1",
                                "--batch", "128", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["predictions"]["fit"]["batches"] == [64, 32]
    assert not any("also holds the same model's" in n for n in body["notes"])


def test_a_layer_that_is_an_op_is_that_ops_layer(tmp_path):
    """TF2's tape names an op's gradients below the op (`gradient_tape/fc2/matmul/MatMul_1`): the what-if's layer
    is `fc2`, the layer the summary shows, not `fc2/matmul` beside it (tests/data/cpu_bfc's real profile)."""
    code, out, err = _whatif_in(_mlp_profile_logdir(tmp_path), "--batch", "128", "--json")
    assert code == 0, err
    layers = {row["layer"] for row in json.loads(out)["layers"]}
    assert {"fc1", "fc2"} <= layers and not any(layer.endswith("/matmul") for layer in layers), layers


def test_the_route_fits_steps_of_one_run_picked_by_tag(tmp_path):
    """The page's what-if picks other steps of the run shown (`tags`), as the CLI's --tag: a run traced at batches 2
    and 4 (the demo U-Net's real steps, tags b2 and b4) is fitted as two runs are; a tag the run lacks is a 404."""
    import protos
    from tracedata import read_blob_bytes

    for tag, run in (("b2", "unet_b2"), ("b4", "unet_b4")):
        protos.write_tagged_run_metadata(tmp_path / "mixed", tag, read_blob_bytes(DEMO, run, "step_3"))
    client = memory_app_client(tmp_path)
    response = client.get(PREFIX + "whatif", query_string={"run": "mixed", "tag": "b2", "batch": "8", "tags": "b4"})
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    body = json.loads(response.get_data(as_text=True))
    assert [(r["run"], r["tag"], r["batch"]) for r in body["runs"]] == [("mixed", "b2", 2), ("mixed", "b4", 4)]
    two_runs = json.loads(_whatif("--run", "unet_b2", "--run", "unet_b4", "--batch", "8", "--json")[1])
    assert body["predictions"]["fit"]["predicted_peak_rise_bytes"] == two_runs["predictions"]["fit"]["predicted_peak_rise_bytes"]
    missing = client.get(PREFIX + "whatif", query_string={"run": "mixed", "tag": "b2", "batch": "8", "tags": "b16"})
    assert missing.status_code == 404 and "unknown tag 'b16' in run 'mixed'" in missing.get_data(as_text=True)


def test_steps_of_one_function_may_differ_by_an_op_of_a_loop():
    """Two steps of one function whose loop ran one op in one and not the other (trial W's LSTM: a
    `TensorListSetItem` in the backward loop) are one function's, and a 34% higher peak among them was
    unsaid; a training step beside an inference step of the same model shares too few of its ops."""
    ops = {f"model/layer_{i}/MatMul" for i in range(40)}
    assert whatif._same_function(ops | {"model/rnn/while/TensorListSetItem"}, ops)
    backward = {f"gradient_tape/{name}" for name in ops}
    assert not whatif._same_function(ops | backward, ops)
    assert not whatif._same_function(set(), set())


def _layers_of_ops(ops: list[tuple[str, str]]) -> dict[str, str]:
    """Each op's layer (findings, what-if), in a hand-built step of these (name, op type), 1 KiB each."""
    import protos

    kib = 1 << 10
    nodes = [protos.Node(name, 2 * i, 2 * i + 1, op=op, outputs=[("cpu", kib)], memory=[protos.Mem("cpu", [(2 * i, kib)])])
             for i, (name, op) in enumerate(ops)]
    space = store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).space(None)
    return {raw: space.names.layer(i) for i, raw in enumerate(space.names.raw)}


def test_a_layer_named_as_an_op_type_whose_op_was_fused_is_its_scopes():
    """grappler fused `layer1/MatMul` into `layer1/Relu` (a `_FusedMatMul`), but its variable's read and its
    gradient keep its name (`gradient_tape/layer1/MatMul/MatMul`): a layer named as an op type of the step,
    below another, is that one's (trial W's tf.Module had read `layer1/MatMul` beside `layer1`). Keras' layers
    are named in lower case, `conv2d`, and stay layers."""
    layers = _layers_of_ops([("layer1/MatMul/ReadVariableOp", "ReadVariableOp"), ("layer1/Relu", "_FusedMatMul"),
                             ("gradient_tape/layer1/MatMul/MatMul", "MatMul"), ("model/conv2d/Conv2D", "Conv2D"),
                             ("gradient_tape/model/conv2d/Conv2D/Conv2DBackpropInput", "Conv2DBackpropInput")])
    assert layers == {"layer1/MatMul/ReadVariableOp": "layer1", "layer1/Relu": "layer1",
                      "gradient_tape/layer1/MatMul/MatMul": "layer1", "model/conv2d/Conv2D": "model/conv2d",
                      "gradient_tape/model/conv2d/Conv2D/Conv2DBackpropInput": "model/conv2d"}


def test_a_scope_tensorflow_opens_for_one_op_is_its_layers():
    """`tf.einsum` and `tf.nn.gelu` open a scope of their own (`einsum`, `Gelu`) around their ops: below a layer
    it is that layer's (trial AG's transformer had listed `encoder/ffn/Gelu` and `head/einsum` as layers), at the
    top it stays one; a Keras layer's default name (`einsum_dense`) stays a layer."""
    layers = _layers_of_ops([("encoder/ffn/einsum/Einsum", "Einsum"), ("encoder/ffn/Gelu/mul", "Mul"),
                             ("encoder/ffn/Gelu/Erf", "Erf"), ("gradients/encoder/ffn/Gelu/mul_grad/Mul", "Mul"),
                             ("einsum/Einsum", "Einsum"), ("model/einsum_dense/einsum/Einsum", "Einsum")])
    assert layers == {"encoder/ffn/einsum/Einsum": "encoder/ffn", "encoder/ffn/Gelu/mul": "encoder/ffn",
                      "encoder/ffn/Gelu/Erf": "encoder/ffn", "gradients/encoder/ffn/Gelu/mul_grad/Mul": "encoder/ffn",
                      "einsum/Einsum": "einsum", "model/einsum_dense/einsum/Einsum": "model/einsum_dense"}


def test_a_functions_ops_inlined_in_a_graph_group_under_the_calls_scope():
    """A tf.function called in a TF1 graph runs inlined, its ops named under the call's node
    (`fwd/StatefulPartitionedCall/Relu`): the grouping drops the call, as a profile's names do (trial Z2's
    `fwd1/StatefulPartitionedCall/Relu` had stayed a scope of its own), and the raw name is kept."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 64), name="x")
        w = tf.compat.v1.get_variable("w", (64, 256))

        @tf.function
        def dense(h):
            return tf.nn.relu(tf.matmul(h, w))

        with tf.compat.v1.name_scope("fwd"):
            h = dense(x)
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))

    traced_step = _traced_real("inlined", build, [np.ones((16, 64), np.float32)])
    table = traced_step.space.names
    called = [i for i, raw in enumerate(table.raw) if raw.startswith("fwd/StatefulPartitionedCall/")]
    assert called, table.raw
    for i in called:
        assert table.paths[i] == "fwd/" + table.raw[i].split("/", 2)[2]
        assert table.layer(i) == "fwd"


def test_variables_copied_by_their_updates_in_the_traced_steps_are_said():
    """An update that copies its variable (a weight summary still reading it as it runs) holds a second
    buffer at the traced peaks; whether it copies depends on the schedule, not the batch (trial X's
    Adagrad copied a weight at batches 8 and 16 and not at 32: the what-if 70% high). The answer says so."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 256), name="x")
        w = tf.compat.v1.get_variable("w", (256, 1024), use_resource=True)
        loss = tf.reduce_mean(tf.square(tf.nn.relu(tf.matmul(x, w))))
        (grad,) = tf.gradients(loss, [w])
        read = w.read_value()
        with tf.control_dependencies([read]):
            update = tf.raw_ops.ResourceApplyGradientDescent(var=w.handle, alpha=0.1, delta=grad, name="apply")
        with tf.control_dependencies([update]):
            return [x], tf.compat.v1.summary.histogram("w", read)  # reads the old buffer after the update

    steps = [_traced_real(f"copied_b{batch}", build, [np.ones((batch, 256), np.float32)]) for batch in (16, 32)]
    assert all(findings.variable_copies(s.space, s.step) for s in steps)
    notes = whatif.WhatIf(steps, 64).notes
    assert any(note.startswith("variables' updates copied them in the traced steps (1.0 MiB in copied_b16 step_1 "
                               "and 1.0 MiB in copied_b32 step_1 at the peak") for note in notes), notes
    plain = [_mlp(batch, 512) for batch in (16, 32)]
    assert not any("copied them" in note for note in whatif.WhatIf(plain, 64).notes)


def test_only_scopes_named_as_another_replicas_count_as_replicas():
    """MirroredStrategy names replica 1's ops `replica_1/...`, never `replica_0/` nor `replica_01/`; a node named
    `replica_1` with nothing below it is no scope (review AI: an ensemble's `replica_0/` and `replica_1/` had read
    as 3 replicas, and the global batch as three times the shapes')."""
    import protos

    def replicas(names):
        nodes = [protos.Node(name, 2 * i, 2 * i + 1, op="MatMul", outputs=[("cpu", 1024)],
                             memory=[protos.Mem("cpu", [(2 * i, 1024)])]) for i, name in enumerate(names)]
        return whatif.replica_count(store.analyse_bytes(protos.serialized({protos.CPU0: nodes})))

    assert replicas(["dense/MatMul", "replica_1/dense/MatMul", "replica_2/dense/MatMul"]) == 3
    assert replicas(["replica_0/dense/MatMul", "replica_1", "replica_01/dense/MatMul", "dense/MatMul"]) == 1


def _pairwise_model(batch: int) -> whatif.Traced:
    """A real step of a model whose loss compares every pair of examples (a contrastive loss's distances,
    `[batch, batch, 512]`): memory that grows with the batch's square."""
    def build(tf):
        x = tf.compat.v1.placeholder(tf.float32, (None, 64), name="x")
        h = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("embed/w", (64, 512))))
        with tf.name_scope("pairs"):
            distances = tf.reduce_sum(tf.square(tf.expand_dims(h, 0) - tf.expand_dims(h, 1)), axis=-1)
        loss = tf.reduce_mean(tf.exp(-distances))
        return [x], tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return _traced_real(f"pairs_b{batch}", build, [np.random.default_rng(0).random((batch, 64), np.float32)],
                        one_thread=True)


def test_a_fit_through_peaks_that_grow_faster_than_the_batch_says_so():
    """Three traced batches whose peak rises each grow more than in proportion to the batch (every pair of
    examples compared): the line through them predicts too little beyond them, and the fit says why (trial AK's
    per-example gradients: 43% low, blamed on the allocator's chunks). A model growing in proportion says nothing."""
    traced = [_pairwise_model(batch) for batch in (16, 32, 64)]
    rises = [t.space.peak_rise_bytes for t in traced]
    assert rises[2] > 2.4 * rises[1] > 2.4 * 2.4 * rises[0]  # faster than the batch, each time
    warning = whatif.WhatIf(traced, 128).fitted.warning
    assert warning.startswith("the traced peak rises grow faster than the batch (")
    assert "this predicts too little beyond them" in warning
    # Two batches: the layers' lines say what they can.
    assert "faster than the batch" not in (whatif.WhatIf(traced[:2], 128).fitted.warning or "")
    linear = [_mlp(batch, 48) for batch in (16, 32, 64)]
    assert "faster than the batch" not in (whatif.WhatIf(linear, 128).fitted.warning or "")
    # One rise per batch size, their mean where a fit holds two steps at one (review AK: steps were counted).
    fitted = object.__new__(whatif.Fitted)
    fitted._traced = [(16, 100), (32, 300), (32, 301), (64, 900)]
    assert fitted._faster_than_batch() == "100 B at batch 16, 300 B at batch 32, 900 B at batch 64"
    fitted._traced = [(16, 100), (16, 130), (32, 330)]  # two batch sizes: nothing
    assert fitted._faster_than_batch() == ""
