"""The XPlane source on a real Keras 3 `model.fit` profile (issue 11).

The profile is written once per session by demo_logs/keras_unet.py in a
subprocess with `TF_CPU_ALLOCATOR_USE_BFC=true` (it must be set before
TensorFlow starts). Expectations are recomputed from TensorFlow's own
`xplane_pb2` parse of the same bytes with plain loops, never through the engine.
"""

from __future__ import annotations

import collections
import contextlib
import io
import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tracedata import REPO, memory_app_client, xplane_stat_values as _stat_values
from tracedata import JIT_TRAIN_STEP, xplane_without_memory_events as _without_memory_events
from tb_memory_plugin import analysis, figures, names, report
from tb_memory_plugin.figures import CATEGORIES
from tb_memory_plugin.sources import xplane
from tb_memory_plugin.sources.xplane import names as xnames
from tb_memory_plugin.sources.xplane import wire
from tb_memory_plugin.trace import TraceDecodeError

PREFIX = "/data/plugin/memory/"
PROFILE_BATCHES = (3, 4)  # Keras numbers them from 1; the profiler's step_num from 0
# The model of demo_logs/keras_unet.py at depth 2: the user's layer names.
LAYERS = {"enc_0", "enc_0_b", "pool_0", "enc_1", "enc_1_b", "pool_1", "mid", "up_1", "skip_1", "dec_1", "up_0",
          "skip_0", "dec_0", "head"}
MODEL = "small_unet"


@pytest.fixture(scope="session")
def keras_logdir(tmp_path_factory) -> Path:
    """A logdir with `keras/train/{events, plugins/profile/<session>/<host>.xplane.pb}` from a real fit."""
    import sys

    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    root = tmp_path_factory.mktemp("keras_logs")
    paths = keras_unet.profile(str(root / "keras"), size=16, batch=2, steps=5, profile_batch=PROFILE_BATCHES,
                               depth=2, width=4)
    assert len(paths) == 1
    return root


@pytest.fixture(scope="session")
def profile_path(keras_logdir) -> Path:
    (path,) = keras_logdir.glob("keras/train/plugins/profile/*/*.xplane.pb")
    return path


@pytest.fixture(scope="session")
def profile(profile_path) -> xplane.Profile:
    return xplane.decode(profile_path.read_bytes())


@pytest.fixture(scope="session")
def steps(profile):
    """(ProfileStep, StepAnalysis) per profiled step."""
    out = []
    for index, step in enumerate(profile.steps):
        analysed = analysis.analyse(profile.trace(index))
        assert analysed.status == "ok", analysed.message
        out.append((step, analysed))
    return out


# -- a plain reference, from TensorFlow's own protos ------------------------------------------


def _space(data: bytes):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return xplane_pb2.XSpace.FromString(data)


@pytest.fixture(scope="session")
def reference(profile_path) -> dict:
    return _read_reference(profile_path.read_bytes())


def _read_reference(data: bytes) -> dict:
    """Memory events (sorted by time), op events and executor runs, read one by one."""
    space = _space(data)
    memory, ops, runs, markers = [], [], collections.defaultdict(list), collections.defaultdict(list)
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                time_ps = line.timestamp_ns * 1000 + event.offset_ps
                if name in ("MemoryAllocation", "MemoryDeallocation"):
                    memory.append({"time_ps": time_ps, "allocation": name == "MemoryAllocation",
                                   **_stat_values(plane, event)})
                elif name == "ExecutorState::Process":
                    runs[_stat_values(plane, event)["id"]] += [time_ps, time_ps + event.duration_ps]
                elif "step_num" in (stats := _stat_values(plane, event)):  # Keras' `Profiled batch` marker
                    markers[stats["step_num"]] += [time_ps, time_ps + event.duration_ps]
                elif name.count(":") == 1 and " " not in name:
                    ops.append((name.split(":")[0], name.split(":")[1]
                                or plane.event_metadata[event.metadata_id].display_name))
    memory.sort(key=lambda e: e["time_ps"])
    return {"memory": memory, "ops": ops, "runs": runs, "markers": markers}


def _window(reference: dict, step) -> tuple[int, int]:
    """The span of a profiled step: its executor steps' own allocations and runs (it may merge
    several), and the marker of its batch (the eager work around them)."""
    times = [e["time_ps"] for e in reference["memory"] if e["allocation"] and e["id"] in step.step_ids]
    for step_id in step.step_ids:
        times += reference["runs"].get(step_id, [])
    times += reference["markers"].get(step.number, [])
    return min(times), max(times)


def _in_window(reference: dict, step) -> list[dict]:
    start, end = _window(reference, step)
    return [e for e in reference["memory"] if start <= e["time_ps"] <= end]


def _layer(raw_tf_op: str) -> str | None:
    """The Keras layer of a raw op name, with plain string work: `.../small_unet_1/enc_1_1/...` -> `enc_1`."""
    parts = raw_tf_op.split("/")
    if MODEL + "_1" not in parts:
        return None
    scope = parts[parts.index(MODEL + "_1") + 1]
    return scope[: -len("_1")] if scope.endswith("_1") else scope


def _model_children(space, group="layer") -> dict[str, int]:
    tree = space.tree(group)
    node = tree.index[MODEL]
    return {tree.paths[c].rsplit("/", 1)[-1]: int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[node]}


# -- steps -----------------------------------------------------------------------------------


def test_profiled_batches_are_the_steps(profile, reference):
    """One step per profiled batch, numbered as the profiler numbered them, split by executor step id."""
    assert [s.number for s in profile.steps] == [b - 1 for b in PROFILE_BATCHES]
    assert profile.memory_event_count == len(reference["memory"])
    for step in profile.steps:
        allocations = [e for e in _in_window(reference, step) if e["allocation"]]
        ids = collections.Counter(e["id"] for e in allocations)
        # The step's own allocations dominate its window (on a loaded machine a batch may run two executor steps,
        # both its own: a CI run's second one allocated the more).
        assert ids.most_common(1)[0][0] in step.step_ids
        assert (step.start_ps, step.end_ps) == _window(reference, step)
        assert step.devices == ["/device:CPU:0"]


def test_an_executor_run_past_its_batch_is_cut_at_the_batch():
    """A profile made on a loaded machine (tests/data/cpu_loaded): batch 3's executor step allocated
    only within its marker, but one of its runs ended after batch 4's marker began. It is still
    batch 3's step, cut at its marker: each step is its executor's, over its own marker, and holds
    exactly the events there (it had been dropped, and batch 3 read as a marker without an executor
    step: the same events, but no step id)."""
    data = (REPO / "tests" / "data" / "cpu_loaded" / "keras_unet_straggler.xplane.pb").read_bytes()
    reference = _read_reference(data)
    profile = xplane.decode(data)
    assert [s.number for s in profile.steps] == [b - 1 for b in PROFILE_BATCHES]
    for index, step in enumerate(profile.steps):
        start, end = reference["markers"][step.number]
        assert (step.start_ps, step.end_ps) == (start, end)
        events = [e for e in reference["memory"] if start <= e["time_ps"] <= end]
        ids = collections.Counter(e["id"] for e in events if e["allocation"])
        assert ids.most_common(1)[0][0] == step.step_id != 0
        (space,) = analysis.analyse(profile.trace(index)).spaces
        assert int(space.trace.allocated.sum()) == sum(e["allocation_bytes"] for e in events if e["allocation"])
        temp = [e for e in events if e["allocation"] and e.get("region_type") == "temp"]
        assert int(space.trace.temp.sum()) == sum(e["allocation_bytes"] for e in temp) > 0
    # The straggler: batch 3's executor ran on into batch 4's marker.
    first = profile.steps[0]
    assert max(reference["runs"][first.step_id]) > reference["markers"][profile.steps[1].number][0]


def test_a_batch_inside_the_input_pipelines_run_is_a_step():
    """A profile made on a loaded machine (tests/data/cpu_loaded): predict's first batch ran inside the
    window of an executor step that only feeds the input. The input's step is no step, and the batch
    is one: six steps, each its executor's window, as an unloaded machine's profile reads (it had read
    five, the batch dropped as nested in the input's step, then that step as input only)."""
    data = (REPO / "tests" / "data" / "cpu_loaded" / "unmarked_iterator_holds_a_batch.xplane.pb").read_bytes()
    reference = _read_reference(data)
    profile = xplane.decode(data)
    assert len(profile.steps) == 6 and not reference["markers"]  # 12 examples in batches of 4, twice
    for step in profile.steps:
        assert (step.start_ps, step.end_ps) == _window(reference, step)
    first = profile.steps[0]
    holder = [step_id for step_id, times in reference["runs"].items() if step_id not in (first.step_id, -1)
              and min(times) < first.start_ps and first.end_ps < max(times)]
    assert holder, "the batch should lie inside another executor step's window"
    for index in range(len(profile.steps)):
        (space,) = analysis.analyse(profile.trace(index)).spaces
        assert space.trace.exec_count > 0 and space.peak_rise_bytes > 0


# A custom loop whose marked steps run eager work around a tf.function (a 1 MiB matmul made
# eagerly, then the train step), then `predict` and `evaluate` each in a marker of its own.
_EAGER_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

logdir = sys.argv[1]
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="h"), keras.layers.Dense(2, name="o")])
model.compile("sgd", "mse")
optimizer = keras.optimizers.SGD()

@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

x, y = np.ones((4, 8), np.float32), np.ones((4, 2), np.float32)
step(x, y)
model.predict(x, verbose=0)
tf.profiler.experimental.start(logdir)
for i in range(2):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        big = tf.matmul(tf.ones((512, 512)), tf.ones((512, 512)))
        float(tf.reduce_sum(big))
        del big
        step(x, y)
with tf.profiler.experimental.Trace("predict", step_num=2, _r=1):
    model.predict(x, verbose=0)
with tf.profiler.experimental.Trace("eval", step_num=3, _r=1):
    model.evaluate(x, y, verbose=0)
tf.profiler.experimental.stop()
"""


def _profiled_by(script: str, root: Path, **env: str) -> Path:
    """`root` after a Python process has run `script` with it as its argument, in the allocator
    settings the profiles here are made with (demo_logs/keras_unet.py's BFC_ENV), and `env`."""
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(REPO / "demo_logs"))
    import keras_unet

    subprocess.run([sys.executable, "-c", script, str(root)], env={**os.environ, **keras_unet.BFC_ENV, **env},
                   check=True, timeout=600)
    return root


_GRU_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

keras.utils.set_random_seed(0)
inputs = keras.Input((100, 8))  # long enough that the executor runs the loops' cheap ops inline, without events
x = keras.layers.GRU(32, return_sequences=True, name="gru_1")(inputs)
x = keras.layers.GRU(16, name="gru_2")(x)
model = keras.Model(inputs, keras.layers.Dense(1, name="out")(x), name="grunet")
model.compile("rmsprop", "mse")
x, y = np.ones((16 * 6, 100, 8), np.float32), np.ones((16 * 6, 1), np.float32)
model.fit(x, y, batch_size=16, verbose=0, callbacks=[keras.callbacks.TensorBoard(sys.argv[1], profile_batch=(3, 4))])
"""


def test_a_loop_bodys_ops_hold_no_temporaries_of_runs_not_in_progress(tmp_path):
    """A Keras GRU's loop body runs each op once per timestep, one execution per node in a profile.
    Bytes a node's earlier runs made, held at the peak and freed by later runs, are no temporaries:
    only a run in progress at the peak has some (the step's at-peak split said 25-49% temporaries on
    two GRUs, where the values were the forward loop's, kept for the backward pass, or the backward
    loop's own from earlier timesteps). An op the profiler traces no event of (an inexpensive one,
    run inline: `split`, `mul`) ran when it allocated: its window ends at its last allocation."""
    (path,) = _profiled_by(_GRU_SCRIPT, tmp_path).glob("train/plugins/profile/*/*.xplane.pb")
    profile = xplane.decode(path.read_bytes())
    checked = 0
    for index in range(len(profile.steps)):
        for space in analysis.analyse(profile.trace(index)).spaces:
            trace, peak = space.trace, space.curve.peak_time_us
            eventless = np.array([space.names.op_types[code] == "(unknown)" for code in space.name_code.tolist()])
            allocations = trace.event_bytes > 0
            last_made = np.full(trace.exec_count, np.iinfo(np.int64).min)
            np.maximum.at(last_made, trace.event_exec[allocations], trace.event_time_us[allocations])
            made = last_made > np.iinfo(np.int64).min
            assert (eventless & made).any()  # the loops' inline ops
            assert (trace.end_us[eventless & made] == last_made[eventless & made]).all()
            held = space.exec_columns[figures.AT_PEAK] > 0
            # Inline ops holding at the peak what they made before it: none of it is a temporary.
            made_before = eventless & made & (last_made < peak) & held
            checked += int(made_before.sum())
            assert not space.temporaries[made_before].any()
            if trace.runs is not None:  # ops run more than once: only a run in progress has temporaries
                run_exec, run_start, run_end = trace.runs
                in_progress = np.zeros(trace.exec_count, dtype=bool)
                in_progress[run_exec[(run_start <= peak) & (peak <= run_end)]] = True
                several = np.bincount(run_exec, minlength=trace.exec_count) > 1
                spanning = several & (trace.start_us <= peak) & (peak <= trace.end_us) & ~in_progress
                checked += int((spanning & held).sum())
                assert not space.temporaries[spanning].any(), [trace.name(int(i)) for i in np.flatnonzero(
                    spanning & (space.temporaries > 0))[:5]]
                ran = in_progress | (~several & (trace.start_us <= peak) & (peak <= trace.end_us))
                assert not space.temporaries[~ran & ~eventless].any()
            assert int(space.exec_columns[figures.AT_PEAK].sum()) == space.peak_rise_bytes
    assert checked  # loop values held at the peak that a run not in progress made
    # The listing says why an op has no type, and how to have one, where one is listed.
    from tb_memory_plugin import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["summary", str(tmp_path), "--top", "1000"]) == 0
    listed = re.findall(r"^ +\S+ \S+  \(unknown\) x\d+", out.getvalue(), re.MULTILINE)
    assert listed and out.getvalue().count("ProfilerOptions(host_tracer_level=3)") == len(listed)
    # The summary says what `(unknown)` is, for the CLI and the page (the page had not: trial AM).
    device = report.step_summary(analysis.analyse(profile.trace(0)), "layer")["devices"][0]
    assert any(row["name"] == "(unknown)" for row in device["op_types"])
    assert device["op_types_note"] == report.UNKNOWN_OP_NOTE and "host_tracer_level=3" in device["op_types_note"]


_LENGTHS_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

model = keras.Sequential([keras.Input((None, 64)), keras.layers.Conv1D(128, 3, padding="same", name="h"),
                          keras.layers.Conv1D(64, 3, padding="same", name="o")])

@tf.function(input_signature=[tf.TensorSpec((16, None, 64), tf.float32)])
def infer(x):
    return tf.reduce_sum(model(x))

infer(np.ones((16, 8, 64), np.float32))
tf.profiler.experimental.start(sys.argv[1])
for number, length in ((1, 256), (2, 32)):  # one function, one batch: sequences of two lengths
    with tf.profiler.experimental.Trace("infer", step_num=number, _r=1):
        float(infer(np.ones((16, length, 64), np.float32)))
tf.profiler.experimental.stop()
"""


def test_a_step_of_the_profile_peaking_well_above_the_one_read_is_said(tmp_path):
    """Steps of one function at one batch can differ (sequences of other lengths, the allocator's
    chunks: a trial's `predict` peaked 12 to 17 MiB over five batches, and the what-if scaled the
    lowest, 34% low). The what-if names the profile's step that ran the same ops at the same batch
    and peaked 10% or more above the one it read (in `notes`); asked of that step, nothing of it."""
    from tb_memory_plugin import cli

    _profiled_by(_LENGTHS_SCRIPT, tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["whatif", str(tmp_path), "--batch", "32", "--json"]) == 0
    body = json.loads(out.getvalue())
    (read,) = body["runs"]
    assert read["tag"].endswith("/step_2") and read["batch"] == 16
    longer = read["tag"].replace("/step_2", "/step_1")
    profile = xplane.decode(next(tmp_path.glob("plugins/profile/*/*.xplane.pb")).read_bytes())
    rises = {step.number: analysis.analyse(profile.trace(i)).space(read["device"]).peak_rise_bytes
             for i, step in enumerate(profile.steps)}
    higher, lower = rises[1], rises[2]
    assert higher >= lower * 1.1 and lower == read["peak_rise_bytes"]
    assert body["notes"][0].startswith(f"{longer} of {read['run']}, at the same batch (16), peaked "
                                       f"{higher / lower - 1:.0%} higher"), body["notes"]
    with contextlib.redirect_stdout(out := io.StringIO()):
        assert cli.main(["whatif", str(tmp_path), "--batch", "32", "--tag", "step_1", "--json"]) == 0
    assert not any(" peaked " in note for note in json.loads(out.getvalue())["notes"])
    # A profile's start is held as traced, and said so where the batch asked is larger.
    start = "is held as traced: a profile does not show what it holds"
    assert sum(start in note for note in body["notes"]) == 1
    with contextlib.redirect_stdout(out := io.StringIO()):
        assert cli.main(["whatif", str(tmp_path), "--batch", "8", "--json"]) == 0
    assert not any(start in note for note in json.loads(out.getvalue())["notes"])


def test_onednn_kernels_are_the_ops_they_ran_for(tmp_path):
    """With oneDNN on (TensorFlow's default on x86), a profile names the kernels that ran:
    `_MklMatMul` for a Dense layer's `MatMul`. Op types group them as a step's labels do
    (names.graph_op_type: a trial's transformer had listed `_MklEinsum`, `_MklMatMul`), and the
    kernel stays each name's own (the convolution findings judge it)."""
    (path,) = _profiled_by(_EAGER_SCRIPT, tmp_path, TF_ENABLE_ONEDNN_OPTS="1").glob("plugins/profile/*/*.xplane.pb")
    kernels = {plane.event_metadata[event.metadata_id].name.rpartition(":")[2]
               for plane in _space(path.read_bytes()).planes for line in plane.lines for event in line.events}
    assert any(kernel.startswith("_Mkl") and "MatMul" in kernel for kernel in kernels), sorted(kernels)
    (step,) = [analysis.analyse(trace) for trace in (xplane.decode(path.read_bytes()).trace(0),)]
    space = step.space(None)
    op_types = set(space.names.op_types)
    assert "MatMul" in op_types and all(names.graph_op_type(op) == op for op in op_types), sorted(op_types)
    ran = {space.names.op_types[i]: space.kernel_of(int(np.flatnonzero(space.name_code == i)[0]))
           for i in range(len(space.names.raw)) if space.names.op_types[i] == "MatMul"}
    assert ran["MatMul"].startswith("_Mkl"), ran


@pytest.fixture(scope="module")
def eager_profile(tmp_path_factory) -> Path:
    (path,) = _profiled_by(_EAGER_SCRIPT, tmp_path_factory.mktemp("eager_logs")).glob("plugins/profile/*/*.xplane.pb")
    return path


def test_a_marked_step_is_all_of_its_marker(eager_profile):
    """A step marked with `Trace(step_num=)` is everything in its marker: eager work around the
    tf.function (the 1 MiB matmul, which holds the peak), and `predict` and `evaluate` each
    their own step, though eager ops' executor runs across both. Each step's peak is the
    allocator's largest reading inside its marker, read from TensorFlow's protos."""
    markers, readings = {}, []
    for plane in _space(eager_profile.read_bytes()).planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                time_ps = line.timestamp_ns * 1000 + event.offset_ps
                stats = _stat_values(plane, event)
                if name in ("MemoryAllocation", "MemoryDeallocation"):
                    readings.append((time_ps, stats["bytes_allocated"]))
                elif name in ("train", "predict", "eval") and "step_num" in stats:
                    markers[stats["step_num"]] = (time_ps, time_ps + event.duration_ps)
    assert sorted(markers) == [0, 1, 2, 3]
    profile = xplane.decode(eager_profile.read_bytes())
    assert [s.number for s in profile.steps] == [0, 1, 2, 3]
    for index, step in enumerate(profile.steps):
        start, end = markers[step.number]
        assert step.start_ps <= start and end <= step.end_ps
        (space,) = analysis.analyse(profile.trace(index)).spaces
        assert space.peak_bytes == max(b for t, b in readings if start <= t <= end)
        if step.number < 2:
            assert space.peak_bytes >= 512 * 512 * 4  # the eager matmul's output


_UNMARKED_SCRIPT = """
import sys
import numpy as np
import keras

logdir = sys.argv[1]
import tensorflow as tf
inputs = keras.Input((16, 16, 3))
hidden = keras.layers.Conv2D(8, 3, activation="relu", name="conv")(inputs)
outputs = keras.layers.Dense(2, name="head")(keras.layers.GlobalAveragePooling2D(name="gap")(hidden))
model = keras.Model(inputs, outputs)
model.compile("adam", "mse")
x, y = np.ones((12, 16, 16, 3), np.float32), np.ones((12, 2), np.float32)
model.predict(x, batch_size=4, verbose=0)
model.evaluate(x, y, batch_size=4, verbose=0)
tf.profiler.experimental.start(logdir)
model.predict(x, batch_size=4, verbose=0)
model.evaluate(x, y, batch_size=4, verbose=0)
tf.profiler.experimental.stop()
"""


@pytest.fixture(scope="module")
def unmarked_profile(tmp_path_factory) -> Path:
    (path,) = _profiled_by(_UNMARKED_SCRIPT, tmp_path_factory.mktemp("unmarked_logs")).glob(
        "plugins/profile/*/*.xplane.pb")
    return path


def test_unmarked_predict_and_evaluate_are_their_batches_not_one_step(unmarked_profile):
    """`predict` then `evaluate` profiled with no step markers: eager work's executor (TensorFlow's
    step id -1) runs between their functions from the profile's start to its end. It had been read
    as one step holding them all (the whole profile as `run_1`); it is none of the steps, and each
    function's executor step is its own, with the window its runs and allocations span in
    TensorFlow's protos."""
    reference = _read_reference(unmarked_profile.read_bytes())
    spans = {step_id: (min(times), max(times)) for step_id, times in reference["runs"].items()}
    # The eager executor (step id -1), in the protos: it runs between the functions, over most of the
    # profile. (Not asked to hold every other span: on a loaded machine a function's last run may end
    # after the executor's last event, as a CI run found.)
    background = -1
    first, last = min(lo for lo, _ in spans.values()), max(hi for _, hi in spans.values())
    assert background in spans and spans[background][1] - spans[background][0] >= 0.5 * (last - first), spans
    profile = xplane.decode(unmarked_profile.read_bytes())
    assert len(profile.steps) == 6 and not reference["markers"]  # 12 examples in batches of 4, twice
    for step in profile.steps:
        assert background not in step.step_ids
        assert (step.start_ps, step.end_ps) == _window(reference, step)
    for a, b in itertools.combinations(profile.steps, 2):
        # None inside another (on a loaded machine a batch's last run may end after the next began:
        # windows may overlap, as the protos' own do).
        assert not (a.start_ps <= b.start_ps and b.end_ps <= a.end_ps)
        assert not (b.start_ps <= a.start_ps and a.end_ps <= b.end_ps)
    for index in range(len(profile.steps)):
        (space,) = analysis.analyse(profile.trace(index)).spaces
        assert space.trace.exec_count > 0 and space.peak_rise_bytes > 0
    # The CLI heads them as function runs, not as steps numbered like a marked step_<n>.
    from tb_memory_plugin import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["summary", str(unmarked_profile.parents[3])]) == 0
    headers = [line for line in out.getvalue().splitlines() if line.startswith("== ")]
    assert len(headers) == 6 and all(re.search(r"/run_(\d+) \(function run \1(?: of \w+)?, no step marker\)$", h) for h in headers)


def test_steps_the_capture_cut_are_left_out(unmarked_profile):
    """A profile taken from a running program (a profiler server's client.trace) starts inside one
    step and stops inside another. Those steps' function runs are not in it (an event is recorded
    where the capture saw it begin and end), and their windows hold part of their work: a trial's
    first step read as a 71.5 KiB rise of Adam's, its activations in the start, its real peak before
    the capture. The steps the capture cut at either end are left out; the others are as before."""
    from tracedata import xplane_captured_between

    data = unmarked_profile.read_bytes()
    whole = xplane.decode(data)
    first, last = whole.steps[0], whole.steps[-1]
    # Cut each end step at its middle memory event (not its window's middle: on a loaded machine a
    # step's events may all lie in one half of its window, and the cut would hold none of them).
    whole_times = sorted(event["time_ps"] for event in _read_reference(data)["memory"])

    def middle_event(step):
        inside = [t for t in whole_times if step.start_ps < t < step.end_ps]
        assert len(inside) >= 2, (step.start_ps, step.end_ps)
        return inside[len(inside) // 2]

    start, stop = middle_event(first), middle_event(last)
    cut_bytes = xplane_captured_between(data, start, stop)
    reference = _read_reference(cut_bytes)
    times = sorted(event["time_ps"] for event in reference["memory"])
    # The capture holds part of each cut step's memory events: they are there to be read as steps.
    assert any(start <= t <= first.end_ps for t in times) and any(last.start_ps <= t <= stop for t in times)
    cut = xplane.decode(cut_bytes)
    # The functions' steps (the eager executor's work between predict and evaluate, which the whole
    # profile's window for it held every function in, is read as it reads, apart).
    functions = [i for i, s in enumerate(cut.steps) if s.step_id != xplane._NO_STEP_ID]
    assert [(cut.steps[i].start_ps, cut.steps[i].end_ps) for i in functions] == [
        (s.start_ps, s.end_ps) for s in whole.steps[1:-1]]
    for index, whole_index in zip(functions, range(1, len(whole.steps) - 1)):
        (space,) = analysis.analyse(cut.trace(index)).spaces
        (whole_space,) = analysis.analyse(whole.trace(whole_index)).spaces
        assert space.peak_rise_bytes == whole_space.peak_rise_bytes
    assert not any(s.start_ps < whole.steps[1].start_ps or s.end_ps > whole.steps[-2].end_ps for s in cut.steps)
    # A capture inside one step only keeps it: nothing else to show.
    inside = xplane.decode(xplane_captured_between(data, start, first.end_ps))
    assert len(inside.steps) == 1


_EAGER_LOOP_SCRIPT = """
import sys
import numpy as np
import keras
import tensorflow as tf

logdir = sys.argv[1]
model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])
optimizer = keras.optimizers.SGD(0.01)
total = tf.Variable(0.0)

@tf.function
def track(loss):
    total.assign_add(loss)

x, y = np.ones((64, 256), np.float32), np.ones((64, 10), np.float32)

def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    track(loss)

step()
tf.profiler.experimental.start(logdir)
for _ in range(2):
    step()
tf.profiler.experimental.stop()
"""


def test_an_unmarked_eager_loop_is_the_whole_profile_and_says_how_to_mark_it(tmp_path):
    """An eager training loop (a small `tf.function` beside it) profiled with no marker: each eager op
    allocates under a step id of its own that no executor runs, and each had been a step of one op
    (run_1 .. run_55). The whole profile is the step, and its note says how to mark the steps."""
    (path,) = _profiled_by(_EAGER_LOOP_SCRIPT, tmp_path).glob("plugins/profile/*/*.xplane.pb")
    reference = _read_reference(path.read_bytes())
    allocations = [e for e in reference["memory"] if e["allocation"]]
    assert not reference["markers"] and not {e["id"] for e in allocations} & set(reference["runs"])
    profile = xplane.decode(path.read_bytes())
    (step,) = profile.steps
    assert (step.start_ps, step.end_ps) == (reference["memory"][0]["time_ps"], reference["memory"][-1]["time_ps"])
    trace = profile.trace(0)
    assert "the step shown is the whole profile" in trace.note and "Trace(" in trace.note
    (space,) = analysis.analyse(trace).spaces
    assert space.peak_bytes == max(e["bytes_allocated"] for e in reference["memory"])


def test_readings_are_read_against_the_records_event_by_event():
    """A profile reads the allocator after every event: each reading is the one before it plus or
    minus that event's bytes (checked in TensorFlow's protos here), so every reading less the
    records' total after its own event is the start, and the readings show no gap. Read by the
    microsecond (the records' total after all of that microsecond's events), two events in one
    microsecond had made a 32-64 KiB gap on the demo's profile, and a stranger's masked LSTM a
    640 KiB one, flagged as memory no op held."""
    (path,) = (REPO / "demo_logs/keras_unet/train/plugins/profile").glob("*/*.xplane.pb")
    reference = _read_reference(path.read_bytes())
    for before, after in zip(reference["memory"], reference["memory"][1:]):
        if before["allocator_name"] == after["allocator_name"]:
            sign = 1 if after["allocation"] else -1
            assert after["bytes_allocated"] == before["bytes_allocated"] + sign * after["allocation_bytes"]
    profile = xplane.decode(path.read_bytes())
    for index in range(len(profile.steps)):
        for space in analysis.analyse(profile.trace(index)).spaces:
            assert space.snapshot_gap == 0 and (space.snapshot_offsets == space.start_bytes).all()


def test_at_peak_adds_up_exactly(steps):
    for _, step in steps:
        for space in step.spaces:
            rise = space.peak_rise_bytes
            assert rise > 0
            summary = report.device_summary(space, "layer")
            tree = space.tree("layer")
            assert sum(int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[0]) == rise
            assert sum(row["figures"]["at_peak_bytes"] for row in summary["op_types"]) == rise
            assert sum(row["at_peak_bytes"] for row in summary["categories"]) == rise
            assert int(space.exec_columns[figures.AT_PEAK].sum()) == rise


def test_curve_is_the_allocators_bytes_in_use(steps, reference):
    """Absolute: the start is the allocator's bytes in use before the window, the peak one of its readings."""
    for profile_step, step in steps:
        events = _in_window(reference, profile_step)
        readings = [e["bytes_allocated"] for e in events]
        first = events[0]
        before = first["bytes_allocated"] - (first["allocation_bytes"] if first["allocation"] else
                                             -first["allocation_bytes"])
        (space,) = step.spaces
        assert space.start_bytes == before
        peak = space.start_bytes + space.peak_rise_bytes
        assert peak in readings and peak <= max(readings)
        assert space.trace.capacity_bytes == max(e["bytes_allocated"] + e["bytes_available"] + e["bytes_reserved"]
                                                 for e in events)
        assert space.trace.allocator == first["allocator_name"] == "bfc_cpu_allocator_for_gpu"


def test_largest_layer_at_peak_agrees_with_the_allocation_events(steps, reference):
    for profile_step, step in steps:
        (space,) = step.spaces
        events = _in_window(reference, profile_step)
        start = _window(reference, profile_step)[0]  # times count from the step's first event
        # The peak: the highest running total after all events of a microsecond.
        per_us = collections.OrderedDict()
        total = 0
        for e in events:
            total += e["allocation_bytes"] if e["allocation"] else -e["allocation_bytes"]
            per_us[(e["time_ps"] - start) // 10**6] = total
        peak_us = max(per_us, key=lambda t: (per_us[t], -t))
        assert peak_us == space.curve.peak_time_us
        # Bytes held then, by layer: allocations in the window not yet freed.
        live: dict[tuple, dict] = {}
        for e in events:
            if (e["time_ps"] - start) // 10**6 > peak_us:
                break
            key = (e["addr"],)
            if e["allocation"]:
                live[key] = e
            else:
                live.pop(key, None)
        by_layer = collections.Counter()
        unnamed = 0
        for e in live.values():
            if "tf_op" in e:
                layer = _layer(e["tf_op"])
                if layer is not None:
                    by_layer[layer] += e["allocation_bytes"]
            else:
                unnamed += e["allocation_bytes"]
        expected_layer, expected_bytes = by_layer.most_common(1)[0]
        engine = _model_children(space)
        engine_layer = max(engine, key=engine.get)
        assert engine_layer == expected_layer
        # The engine also charges allocations without a tf_op to the op running on their thread.
        assert expected_bytes <= engine[engine_layer] <= expected_bytes + unnamed
        assert set(engine) <= LAYERS | {"(self)"}


def test_frees_are_paired_by_address(steps, reference):
    """Each free is owned by the op whose allocation at that address it frees; frees of earlier
    allocations by `(before this step)`."""
    windows = {s.step_id: _window(reference, s) for s, _ in steps}
    expected = {step_id: collections.Counter() for step_id in windows}
    tf_ops = sorted({e["tf_op"] for e in reference["memory"] if "tf_op" in e} | {op for op, _ in reference["ops"]})
    cleaned = dict(zip(tf_ops, (name for name, _ in xnames.clean_all(tf_ops))))
    allocation_at: dict[int, dict] = {}
    for e in reference["memory"]:
        if e["allocation"]:
            allocation_at[e["addr"]] = e
            continue
        allocation = allocation_at.pop(e["addr"], None)
        for step_id, (start, end) in windows.items():
            if start <= e["time_ps"] <= end:
                if allocation is None or allocation["time_ps"] < start:
                    owner = xplane.BEFORE_STEP
                else:  # an allocation without tf_op: charged to the op running on its thread
                    owner = cleaned[allocation["tf_op"]] if "tf_op" in allocation else "(any)"
                expected[step_id][(owner, e["allocation_bytes"])] += 1
    before_step = 0
    for profile_step, step in steps:
        (space,) = step.spaces
        trace = space.trace
        frees = np.flatnonzero(trace.event_bytes < 0).tolist()
        engine = collections.Counter((trace.name(int(trace.event_exec[i])), -int(trace.event_bytes[i])) for i in frees)
        wanted = expected[profile_step.step_id]
        assert len(frees) == sum(wanted.values()) > 0
        named = collections.Counter({key: n for key, n in wanted.items() if key[0] != "(any)"})
        assert not named - engine
        before_step += engine[next((k for k in engine if k[0] == xplane.BEFORE_STEP), None)] if engine else 0
        before_step += sum(n for (owner, _), n in engine.items() if owner == xplane.BEFORE_STEP)
    assert before_step > 0  # bytes allocated before the profile are freed inside it, and shown as such


def test_names_are_cleaned_and_raw_names_kept(steps):
    (space,) = steps[0][1].spaces
    trace = space.trace
    assert not [n for n in trace.distinct_names if "PartitionedCall" in n or f"{MODEL}_1" in n]
    assert {n.split("/")[1] for n in trace.distinct_names if n.startswith(MODEL + "/")} == LAYERS
    assert set(_model_children(space)) <= LAYERS | {"(self)"}
    layer_grads = [n for n in trace.distinct_names if n.startswith(f"gradient_tape/{MODEL}/")]
    assert layer_grads and {n.split("/")[2] for n in layer_grads} <= LAYERS
    raws = {name: trace.label_of[name] for name in trace.distinct_names if name in trace.label_of}
    assert all(raw.startswith("StatefulPartitionedCall/") for raw in raws.values())
    assert [name for name, _ in xnames.clean_all(list(raws.values()))] == list(raws)
    # By layer, the backward pass is folded into the layer; by scope it stays apart.
    assert "gradient_tape" not in {trace_path.split("/")[0] for trace_path in space.tree("layer").paths[1:]}
    assert "gradient_tape" in {p.split("/")[0] for p in space.tree("scope").paths[1:]}


@pytest.mark.parametrize("raw, cleaned, layer", [
    ("StatefulPartitionedCall/small_unet_1/enc_1_1/Relu", "small_unet/enc_1/Relu", "small_unet/enc_1"),
    # The tape puts a gradient in its forward op's own scope (`convolution`): not a layer.
    ("StatefulPartitionedCall/gradient_tape/small_unet_1/dec_1_1/convolution/Conv2DBackpropFilter",
     "gradient_tape/small_unet/dec_1/convolution/Conv2DBackpropFilter", "small_unet/dec_1"),
    ("StatefulPartitionedCall/adam/Mul_23", "adam/Mul_23", None),
    ("compile_loss/mse/sub", "compile_loss/mse/sub", None),
    ("StatefulPartitionedCall/outer_1/inner_1/conv2d_3_1/Relu", "outer/inner/conv2d_3/Relu", "outer/inner/conv2d_3"),
    ("block_2/conv/Relu", "block_2/conv/Relu", None),  # a user's own scope: one suffixed scope is not Keras'
    ("Mul_1", "Mul_1", None),
    # The input pipeline's ops: read as their own, that scope kept in front.
    ("(input pipeline)/random_flip_left_right/then/_0/random_flip_left_right/ReverseV2",
     "(input pipeline)/random_flip_left_right/ReverseV2", None),
    ("(input pipeline)/GatherV2_1", "(input pipeline)/GatherV2_1", None),
    # A Keras model run in a `map` (augmentation layers): its names cleaned, no layer of the step's.
    ("(input pipeline)/aug_1/resize_1/resize/ResizeBilinear", "(input pipeline)/aug/resize/resize/ResizeBilinear", None),
    # A control-flow function's call (a LossScaleOptimizer's `cond`, a while loop's body): its ops
    # repeat the op's scope after it.
    ("cond/then/_0/cond/adam/Sub_10", "cond/adam/Sub_10", None),
    ("cond/then/_0/cond/cond/else/_95/cond/cond/Add", "cond/cond/Add", None),
    ("StatefulPartitionedCall/model_1/rnn_1/while/body/_1/model_1/rnn_1/while/lstm_cell_1/MatMul",
     "model/rnn/while/lstm_cell_1/MatMul", "model/rnn"),
    ("a/then/_0/b/c", "a/then/_0/b/c", None),  # no repeat: a user's scope named `then`
    # Keras' fit with steps_per_execution > 1 calls its train step from a loop and a branch.
    ("while/body/_1/while/cond/then/_143/while/cond/StatefulPartitionedCall/gradient_tape/cnn_1/conv_1/"
     "convolution/Conv2DBackpropFilter", "gradient_tape/cnn/conv/convolution/Conv2DBackpropFilter", "cnn/conv"),
    ("while/body/_1/while/add", "while/add", None),  # the loop's own ops: no call, they stay
    # A tape's gradients in a loop's body repeat the loop's scope after `gradient_tape`.
    ("while/body/_1/gradient_tape/while/mlp/fc/MatMul", "gradient_tape/while/mlp/fc/MatMul", None),
    ("a/body/_1/gradient_tape/b/MatMul", "a/body/_1/gradient_tape/b/MatMul", None),  # no repeat: no call
    # A branch's own call inside the tape's gradients: its scope repeats right after it.
    ("gradient_tape/cond/then/_23/gradient_tape/cond/mul", "gradient_tape/cond/mul", None),
    # A user's loop calling a function, or a user's scope named `body`, keeps its scope; the nested
    # function's call goes, as a leading one does (its body's ops are named below the call op).
    ("while/body/_1/while/StatefulPartitionedCall/inner/MatMul", "while/inner/MatMul", None),
    ("body/StatefulPartitionedCall/inner/MatMul", "body/inner/MatMul", None),
    ("middle/StatefulPartitionedCall_1/inner/Relu", "middle/inner/Relu", None),
    # A nested call's gradient function names its ops from its own `gradients` scope.
    ("gradients/middle/StatefulPartitionedCall_grad/PartitionedCall/gradients/inner/MatMul_grad/MatMul_1",
     "gradients/middle/inner/MatMul_grad/MatMul_1", None),
    ("middle/StatefulPartitionedCall", "middle/StatefulPartitionedCall", None),  # the call op itself
    # A Keras RNN's backward loop: the tape's gradients in the loop's body name the body's ops again
    # after the tape's scope, and again after a `gradients` scope inside it: one tape, in front (it
    # had been a second top-level `textnet_1` beside `textnet`).
    ("StatefulPartitionedCall/textnet_1/gru_1/while/body/_39/textnet_1/gru_1/while/gradient_tape/textnet_1/gru_1/"
     "while/TensorArrayV2Read/TensorListGetItem_grad/TensorListLength",
     "gradient_tape/textnet/gru/while/TensorArrayV2Read/TensorListGetItem_grad/TensorListLength", "textnet/gru"),
    ("StatefulPartitionedCall/textnet_1/gru_1/while/body/_186/textnet_1/gru_1/while/gradient_tape/textnet_1/gru_1/"
     "while/gradients/textnet_1/gru_1/while/TensorArrayV2Read/TensorListGetItem_grad/TensorListElementShape",
     "gradient_tape/textnet/gru/while/TensorArrayV2Read/TensorListGetItem_grad/TensorListElementShape", "textnet/gru"),
    # A Keras RNN's gradient loop (`while_grad`, named in the tape's function after the scope it was
    # taken in): its body's ops name the forward loop again, after the tape's scope and a `gradients`
    # one; read as the forward loop's gradients (they had been `grunet/gru_2/while/grunet_1/gru_2_1/
    # while_grad/...`, a layer of their own inside the loop).
    ("gradient_tape/grunet/gru_2/while/grunet_1/gru_2_1/while_grad/body/_211/gradient_tape/grunet_1/gru_2_1/while/"
     "gradients/grunet_1/gru_2_1/while/gru_cell_1/strided_slice_grad/StridedSliceGrad",
     "gradient_tape/grunet/gru_2/while/gru_cell_1/strided_slice_grad/StridedSliceGrad", "grunet/gru_2"),
    ("gradient_tape/grunet/gru_2/while/grunet_1/gru_2_1/while_grad/body/_211/gradient_tape/grunet_1/gru_2_1/while/"
     "gradients/AddN", "gradient_tape/grunet/gru_2/while/gradients/AddN", "grunet/gru_2"),
    # A `tf.while_loop` at a train step's root: its gradient loop is named after the loop alone.
    ("gradient_tape/while/while_grad/body/_43/gradient_tape/while/gradients/while/refine/cell_1/MatMul_grad/MatMul",
     "gradient_tape/while/refine/cell_1/MatMul_grad/MatMul", None),
    ("gradient_tape/while/while_grad/body/_43/gradient_tape/other/gradients/x",
     "gradient_tape/while/while_grad/body/_43/gradient_tape/other/gradients/x", None),  # not the loop's: kept
    # A distribution strategy's other replica keeps its number; the model's scopes after it lose theirs.
    ("replica_1/mirrored_cnn_1/conv_1/Conv2D", "replica_1/mirrored_cnn/conv/Conv2D", "mirrored_cnn/conv"),
    ("replica_1/gradient_tape/mirrored_cnn_1/conv_1/Conv2D/Conv2DBackpropInput",
     "replica_1/gradient_tape/mirrored_cnn/conv/Conv2D/Conv2DBackpropInput", "mirrored_cnn/conv"),
    # A user's loop around the model (micro-batches accumulated in `for i in tf.range(n)`) keeps
    # its scope; the model's scopes after it lose their numbers, its gradients' too.
    # (The layer keeps the loop's scope, as the grouping by layer does: findings point at it.)
    ("StatefulPartitionedCall/while/accnet_1/conv_a_1/Relu", "while/accnet/conv_a/Relu", "while/accnet/conv_a"),
    ("while/accnet_1/conv_a_1/convolution/Conv2DBackpropFilter", "while/accnet/conv_a/convolution/Conv2DBackpropFilter",
     "while/accnet/conv_a"),
    ("gradient_tape/while/accnet_1/pool_1/MaxPool2d/MaxPoolGrad", "gradient_tape/while/accnet/pool/MaxPool2d/MaxPoolGrad",
     "while/accnet/pool"),
    ("while/AssignAddVariableOp_2", "while/AssignAddVariableOp_2", None),
    # A tf.switch_case's branch call and its gradient (a Case op named `gradient`), as a cond's (review AE).
    ("router/switch_case/indexed_case/branch0/_0/router/switch_case/indexed_case/MatMul",
     "router/switch_case/indexed_case/MatMul", None),
    ("gradient_tape/router/switch_case/indexed_case/gradient/branch0/_11/gradient_tape/router/switch_case/"
     "indexed_case/gradients/router/switch_case/indexed_case/MatMul_grad/MatMul_1",
     "gradient_tape/router/switch_case/indexed_case/MatMul_grad/MatMul_1", None),
])
def test_clean_keras_names(raw, cleaned, layer):
    assert xnames.clean(raw) == cleaned
    assert xnames.keras_layer(raw) == layer


def test_op_scopes_tensorflow_numbered_stay_apart():
    """`up_0_1/Repeat` and `up_0_1/Repeat_1` are two ops' scopes in one layer (the demo's
    upsampling repeats rows, then columns): Keras' numbering is dropped, TensorFlow's kept."""
    raws = ["StatefulPartitionedCall/small_unet_1/up_0_1/Repeat/Tile",
            "StatefulPartitionedCall/small_unet_1/up_0_1/Repeat_1/Tile",
            "StatefulPartitionedCall/gradient_tape/small_unet_1/up_0_1/Repeat_1/Sum"]
    assert xnames.clean_all(raws) == [
        ("small_unet/up_0/Repeat/Tile", "small_unet/up_0"), ("small_unet/up_0/Repeat_1/Tile", "small_unet/up_0"),
        ("gradient_tape/small_unet/up_0/Repeat_1/Sum", "small_unet/up_0")]
    assert xnames.clean(raws[1]) == "small_unet/up_0/Repeat/Tile"  # alone, nothing tells
    # Keras' own numbering: its second `dense` layer is `dense_1`, traced as `dense_1_1` beside
    # the first's `dense_1`; a model named like another's traced name alike.
    keras = ["sequential_1/dense_1/MatMul", "sequential_1/dense_1_1/MatMul", "sequential_1_1/dense_2_1/MatMul"]
    assert xnames.clean_all(keras) == [("sequential/dense/MatMul", "sequential/dense"),
                                       ("sequential/dense_1/MatMul", "sequential/dense_1"),
                                       ("sequential_1/dense_2/MatMul", "sequential_1/dense_2")]


def test_a_models_own_op_joins_its_model():
    """An op of the model outside its layers (mixed precision's input `Cast`: `mpnet_1/Cast`) has a
    chain of one scope, which alone is a user's own: where the step's other names show `mpnet_1` is
    a model, it is the model's (a stranger's fit had a second top-level `mpnet_1` beside `mpnet`).
    A user's own numbered scope stays."""
    raws = ["StatefulPartitionedCall/mpnet_1/Cast", "StatefulPartitionedCall/mpnet_1/conv_1/Conv2D",
            "StatefulPartitionedCall/gradient_tape/mpnet_1/conv_1/Conv2D/Conv2DBackpropFilter", "block_2/Mul"]
    assert xnames.clean_all(raws) == [
        ("mpnet/Cast", "mpnet"), ("mpnet/conv/Conv2D", "mpnet/conv"),
        ("gradient_tape/mpnet/conv/Conv2D/Conv2DBackpropFilter", "mpnet/conv"), ("block_2/Mul", None)]
    assert xnames.clean(raws[0]) == "mpnet_1/Cast"  # alone, nothing tells
    # An op's scope TensorFlow numbered (`Cast_11`) under a second optimizer (`adam_1`, a model built
    # again in one process) shows no model: `adam_1/Add` stays as it is.
    optimizer = ["StatefulPartitionedCall/adam_1/Cast_11/ReadVariableOp", "StatefulPartitionedCall/adam_1/Add"]
    assert [name for name, _ in xnames.clean_all(optimizer)][1] == "adam_1/Add"


def test_a_model_called_under_a_users_scope_is_cleaned_as_at_the_root():
    """A model called under a name scope of the user's (a WGAN's gradient penalty: `tf.name_scope(
    "gradient_penalty")` around `critic(x_hat)`) is the model the step's other names show: its scopes lose
    Keras' numbers after the user's scope, which stays in front of the layer as a loop's does (trial AB's
    had kept `critic_1/d_conv1_1`, and made its `convolution` a what-if layer of its own). A user's scope
    before scopes of no model of the step's stays as it is."""
    raws = ["StatefulPartitionedCall/critic_1/d_conv1_1/convolution",
            "StatefulPartitionedCall/gradient_penalty/critic_1/d_conv1_1/convolution",
            "StatefulPartitionedCall/gradient_tape/gradient_tape/gradient_penalty/critic_1/d_conv1_1/convolution/Conv2D",
            "StatefulPartitionedCall/gradient_penalty/Mul_2",
            "StatefulPartitionedCall/other/block_1/unit_2/Add"]
    assert xnames.clean_all(raws) == [
        ("critic/d_conv1/convolution", "critic/d_conv1"),
        ("gradient_penalty/critic/d_conv1/convolution", "gradient_penalty/critic/d_conv1"),
        ("gradient_tape/gradient_tape/gradient_penalty/critic/d_conv1/convolution/Conv2D",
         "gradient_penalty/critic/d_conv1"),
        ("gradient_penalty/Mul_2", None),
        ("other/block_1/unit_2/Add", None)]


def test_keras_layers_are_the_layers_of_findings_and_the_whatif(steps):
    """Every op of the model is in one of its Keras layers, its gradients too (whose tape scope
    names the forward op: `gradient_tape/small_unet/dec_1/convolution/...`)."""
    for _, analysed in steps:
        for space in analysed.spaces:
            names = space.names
            distinct, code = names.layers
            for i, raw in enumerate(names.raw):
                if raw.startswith((MODEL + "/", "gradient_tape/" + MODEL + "/")):
                    layer = distinct[code[i]]
                    assert layer == names.layer(i) and layer.split("/")[0] == MODEL, raw
                    assert layer.split("/", 1)[1] in LAYERS, raw


def test_op_types_come_from_op_events(steps, reference):
    expected = {}
    for node, op_type in reference["ops"]:
        expected.setdefault(xnames.clean(node), op_type)
    trace = steps[0][1].trace
    checked = 0
    for name, op_type in trace.op_types.items():
        if name in expected:
            assert op_type == expected[name]
            checked += 1
    assert checked > 50
    assert trace.op_types[f"{MODEL}/enc_0/Relu"] == "_FusedConv2D"  # the fused convolution runs under Relu


DEMO_PROFILE = next((REPO / "demo_logs" / "keras_unet" / "train").glob("plugins/profile/*/*.xplane.pb"))


def _tf_data_ops(data: bytes) -> set[str]:
    """The ops (cleaned tf_op names) whose every allocation was made on a tf.data thread, read
    one event at a time from TensorFlow's protos."""
    threads = collections.defaultdict(set)  # tf_op -> whether each of its allocations was on a tf.data thread
    for plane in _space(data).planes:
        for line in plane.lines:
            for event in line.events:
                if plane.event_metadata[event.metadata_id].name == "MemoryAllocation":
                    tf_op = _stat_values(plane, event).get("tf_op", "")
                    threads[xnames.clean(tf_op) if tf_op else ""].add(line.name.startswith("tf_data"))
    return {op for op, on_data in threads.items() if op and on_data == {True}}


@pytest.mark.parametrize("which", ["demo", "fixture"])
def test_what_tf_data_threads_allocate_is_input(which, profile_path):
    """Keras slices each batch out of the dataset (`GatherV2`) on tf.data's threads (the demo's
    fit at batch 4 shows it): those ops are the step's input, whatever their op type, named below
    `(input pipeline)`, and nothing else is (the model's ops allocate on the executor's threads)."""
    data = (DEMO_PROFILE if which == "demo" else profile_path).read_bytes()
    data_ops = {f"{xplane.INPUT_PIPELINE}/{op}" for op in _tf_data_ops(data)}
    profile = xplane.decode(data)
    seen = set()
    for index in range(len(profile.steps)):
        for space in analysis.analyse(profile.trace(index)).spaces:
            names = space.names
            inputs = {names.raw[i] for i in np.flatnonzero(names.category == CATEGORIES.index("inputs")).tolist()}
            assert inputs - {xplane.INPUT_PIPELINE} <= data_ops
            assert not [raw for raw in names.raw if raw in {op.partition("/")[2] for op in data_ops}]  # not twice
            seen |= inputs & data_ops
            rows = [i for i, raw in enumerate(names.raw) if raw in data_ops]
            allocated = int(space.name_column(figures.ALLOCATED)[rows].sum() - space.name_column(figures.TEMP)[rows].sum())
            assert dict((name, allocated) for name, _, allocated in space.by_category())["inputs"] >= allocated
    if which == "demo":
        assert {"(input pipeline)/GatherV2", "(input pipeline)/GatherV2_1"} <= seen  # the batch's images and targets


_MAP_SCRIPT = """
import os, sys
import numpy as np, tensorflow as tf, keras

def heavy(x, y):
    x = tf.image.resize(tf.reshape(x, (16, 16, 3)), (48, 48))
    x = tf.image.random_flip_left_right(x)  # a branch: `random_flip_left_right/then/_0/...`
    return tf.transpose(x, (1, 0, 2)), y

ds = tf.data.Dataset.from_tensor_slices((np.random.rand(256, 768).astype(np.float32), np.random.randint(0, 5, 256)))
ds = ds.map(heavy, num_parallel_calls=tf.data.AUTOTUNE).batch(16).prefetch(2)
model = keras.Sequential([keras.Input((48, 48, 3)), keras.layers.Conv2D(8, 3, activation="relu", name="c1"),
                          keras.layers.Flatten(name="flat"), keras.layers.Dense(5, name="cls")], name="mapnet")
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=1, callbacks=[keras.callbacks.TensorBoard(sys.argv[1], profile_batch=(3, 4))], verbose=0)
"""


def test_a_map_functions_ops_are_the_input_pipelines(tmp_path):
    """The ops of a dataset's `map` function run on tf.data's threads: each is the input pipeline's,
    below `(input pipeline)` (its branch's call dropped, as for the model's ops), counted as input;
    none is a top-level scope beside the model (a stranger's resize, transpose and strided_slice had
    been, in two categories, and the op at the peak one of them)."""
    (path,) = _profiled_by(_MAP_SCRIPT, tmp_path).glob("train/plugins/profile/*/*.xplane.pb")
    data = path.read_bytes()
    on_data_threads = _tf_data_ops(data)
    assert {"resize/ResizeBilinear", "transpose"} <= on_data_threads, on_data_threads
    profile = xplane.decode(data)
    seen = set()  # the map function's ops in any step: which step's window holds them depends on the machine's load
    for index in range(len(profile.steps)):
        step = analysis.analyse(profile.trace(index))
        space = step.space(None)
        names = space.names
        tops = {path for path, _ in space.top_level("layer")}
        assert not tops & {op.partition("/")[0] for op in on_data_threads}, tops
        pipeline = [i for i, raw in enumerate(names.raw)
                    if raw == xplane.INPUT_PIPELINE or raw.startswith(xplane.INPUT_PIPELINE + "/")]
        seen.update(names.raw[i] for i in pipeline)
        inputs = CATEGORIES.index("inputs")
        temporaries = CATEGORIES.index("temporaries")
        elsewhere = [(names.raw[i], CATEGORIES[names.category[i]]) for i in pipeline
                     if names.category[i] not in (inputs, temporaries)]
        assert not elsewhere, (index, elsewhere)  # which, where a loaded machine's profile differs
        if pipeline:
            rows = dict(space.top_level("layer"))
            assert rows[xplane.INPUT_PIPELINE][figures.ALLOCATED] == int(space.name_column(figures.ALLOCATED)[pipeline].sum())
    assert seen >= {"(input pipeline)/resize/ResizeBilinear", "(input pipeline)/random_flip_left_right/ReverseV2"}, seen


def test_temp_regions_feed_temporaries(steps, reference):
    """Temp regions are the ops' temp figure; those freed in the step are temporaries, whatever the
    op's own category. One never freed there (a variable's copy an update keeps) stays its op's."""
    kept_somewhere = False
    for profile_step, step in steps:
        (space,) = step.spaces
        events = _in_window(reference, profile_step)
        temp = [e for e in events if e["allocation"] and e.get("region_type") == "temp"]
        assert temp
        assert int(space.trace.temp.sum()) == sum(e["allocation_bytes"] for e in temp)
        freed, live, freeing_ops = 0, {}, set()  # temp bytes freed in the step: an allocation, the next free there
        for e in events:
            if e["allocation"]:
                live[e["addr"]] = e
            elif (allocation := live.pop(e["addr"], None)) is not None:
                freeing_ops.add(allocation.get("tf_op"))
                freed += allocation["allocation_bytes"] if allocation.get("region_type") == "temp" else 0
        categories = dict((name, allocated) for name, _, allocated in space.by_category())
        assert freed <= categories["temporaries"] <= sum(e["allocation_bytes"] for e in temp)
        # Temp regions of ops that free nothing in the step (Keras' AssignSubVariableOp keeping the
        # variable's copy) are not temporaries.
        kept = sum(e["allocation_bytes"] for e in temp if e.get("tf_op") not in freeing_ops)
        assert categories["temporaries"] <= sum(e["allocation_bytes"] for e in temp) - kept
        kept_somewhere = kept_somewhere or kept > 0
    assert kept_somewhere, "no op in these steps keeps a temp region"


# -- the wire reader against TensorFlow's parser --------------------------------------------------


def _events_by_wire(data: bytes):
    buf, planes = wire.read_space(data)
    out = []
    for plane in planes:
        for line in plane.lines:
            fields = wire.read_fields(buf, line.body_start, line.body_end)
            columns = {}
            for number in (1, 2, 3):
                column = np.zeros(line.body_start.size, dtype=np.int64)
                owner, value, _ = fields.of(number, wire.VARINT)
                column[owner] = wire.as_int64(value)
                columns[number] = column
            stat_count = np.bincount(fields.of(4, wire.LEN)[0], minlength=line.body_start.size)
            out.append((plane.name, line.name, line.timestamp_ns,
                        list(zip(columns[1].tolist(), columns[2].tolist(), columns[3].tolist(), stat_count.tolist()))))
    return out


def _events_by_tensorflow(space):
    return [(plane.name, line.name, line.timestamp_ns,
             [(e.metadata_id, e.offset_ps, e.duration_ps, len(e.stats)) for e in line.events])
            for plane in space.planes for line in plane.lines]


def test_wire_reads_every_event_as_tensorflow_does(profile_path):
    data = profile_path.read_bytes()
    assert _events_by_wire(data) == _events_by_tensorflow(_space(data))


def test_wire_follows_the_chain_past_odd_events(profile_path):
    """An event at offset 0 (no offset field: not a candidate) and a string stat whose bytes look like
    an event record (a false candidate inside an event) are read as TensorFlow reads them."""
    space = _space(profile_path.read_bytes())
    plane = next(p for p in space.planes if p.lines)
    line = max(plane.lines, key=lambda l: len(l.events))
    line.events[0].offset_ps = 0
    lookalike = bytes([0x22, 6, 0x08, 1, 0x10, 5, 0x18, 7])  # `events` record: metadata 1, offset 5, duration 7
    stat_id = max(plane.stat_metadata) + 1
    plane.stat_metadata[stat_id].id = stat_id
    plane.stat_metadata[stat_id].name = "lookalike"
    for event in list(line.events)[1:50]:
        stat = event.stats.add(metadata_id=stat_id)
        stat.bytes_value = lookalike * 3
    data = space.SerializeToString()
    assert _events_by_wire(data) == _events_by_tensorflow(space)
    decoded = xplane.decode(data)
    assert [s.number for s in decoded.steps] == [b - 1 for b in PROFILE_BATCHES]


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.999])
def test_corrupt_bytes_raise_decode_error(profile_path, cut):
    data = profile_path.read_bytes()
    with pytest.raises(TraceDecodeError, match="not a valid XSpace") as raised:
        xplane.decode(data[: int(len(data) * cut)])
    if cut == 0.5:  # in the middle of the one plane: the file stops inside it
        assert "cut short, or still being written" in str(raised.value)


def test_bytes_that_are_no_profile_say_what_they_are(profile_path):
    """An empty file, a gzip-compressed one and a JSON one (an old profiler's trace) are said to be what they
    are (trial AD: the empty one had been told to set TF_CPU_ALLOCATOR_USE_BFC, the others given a wire type at
    byte 1)."""
    import gzip

    for data, said in ((b"", "the file is empty"), (gzip.compress(profile_path.read_bytes()), "gzip-compressed"),
                       (b'{"traceEvents": []}', "text (JSON")):
        with pytest.raises(TraceDecodeError, match=re.escape(said)):
            xplane.decode(data)


def test_garbage_raises_decode_error():
    with pytest.raises(TraceDecodeError):
        xplane.decode(b"\xff" * 64)
    with pytest.raises(TraceDecodeError):
        xplane.decode("not bytes")


def test_profile_without_memory_events_says_what_to_set(profile_path):
    decoded = xplane.decode(_without_memory_events(profile_path.read_bytes()))
    assert decoded.steps == [] and decoded.memory_event_count == 0
    assert "TF_CPU_ALLOCATOR_USE_BFC=true" in decoded.message
    assert "256 KiB" in decoded.message and "before TensorFlow starts" in decoded.message


# -- through TensorBoard ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tb(keras_logdir, profile_path, tmp_path_factory):
    """TensorBoard's WSGI app over: keras (fit: events + profile), profile_only (a profile and no event
    file), corrupt (garbage .xplane.pb), nomem (a profile without memory events)."""
    root = tmp_path_factory.mktemp("mixed")
    shutil.copytree(keras_logdir / "keras", root / "keras")
    session = profile_path.parent.name
    for run, data in (("profile_only", profile_path.read_bytes()), ("corrupt", b"\x0a\xff\xff\xff garbage"),
                      ("nomem", _without_memory_events(profile_path.read_bytes()))):
        target = root / run / "plugins" / "profile" / session / "host.xplane.pb"
        target.parent.mkdir(parents=True)
        target.write_bytes(data)
    return memory_app_client(root), session


def _get(tb, route, expect=200, **params):
    response = tb[0].get(PREFIX + route, query_string=params)
    assert response.status_code == expect, response.get_data(as_text=True)[:500]
    return json.loads(response.get_data(as_text=True))


def test_runs_list_profiled_steps(tb):
    client, session = tb
    listing = json.loads(client.get("/data/plugins_listing").get_data(as_text=True))
    assert listing["memory"]["enabled"] is True
    runs = {r["run"]: r for r in _get(tb, "runs")["runs"]}
    assert set(runs) == {"keras/train", "profile_only", "corrupt", "nomem"}
    # The fit's run has a graph to show (the callback's model config); a profile alone has none.
    assert runs["keras/train"]["has_graph"] is True and runs["profile_only"]["has_graph"] is False
    keras = runs["keras/train"]["steps"]
    profiled = [s for s in keras if s["source"] == "xplane"]
    assert [s["tag"] for s in profiled] == [f"profile/{session}/step_{b - 1}" for b in PROFILE_BATCHES]
    assert [s["step"] for s in profiled] == [b - 1 for b in PROFILE_BATCHES]
    assert all(s["devices"] == ["/device:CPU:0"] and s["wall_time"] > 1.5e9 for s in profiled)
    (record,) = [s for s in keras if s["source"] == "run_metadata"]
    assert re.fullmatch(r"batch_\d+", record["tag"])  # what the Keras callback writes, with no step stats
    # The run opens on its last profiled step, not on the later record without step stats.
    assert runs["keras/train"]["latest_tag"] == profiled[-1]["tag"] == runs["profile_only"]["latest_tag"]
    assert [s["tag"] for s in runs["profile_only"]["steps"]] == [s["tag"] for s in profiled]
    assert [s["tag"] for s in runs["corrupt"]["steps"]] == [f"profile/{session}"]


def test_profiles_are_found_once_past_a_link_to_an_ancestor(tmp_path):
    """A symbolic link back up the logdir (`looprun/up -> ..`) is not followed: it had listed 240 runs
    `looprun/up/looprun/up/...` and the CLI had printed 1,560 steps (trial AD). A link to a run kept
    elsewhere is followed, as TensorBoard follows it."""
    from tb_memory_plugin import store as store_mod

    shutil.copytree(REPO / "demo_logs" / "keras_unet", tmp_path / "logs" / "keras")
    shutil.copytree(REPO / "demo_logs" / "keras_unet", tmp_path / "elsewhere")
    (tmp_path / "logs" / "looprun").mkdir()
    (tmp_path / "logs" / "looprun" / "up").symlink_to("..")
    (tmp_path / "logs" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "logs" / "latest").symlink_to(tmp_path / "logs" / "keras")  # an alias: listed beside it
    # Two links that lead to each other's directory: followed once each, not round and round.
    (tmp_path / "logs" / "a").mkdir()
    (tmp_path / "logs" / "b").mkdir()
    (tmp_path / "logs" / "a" / "to_b").symlink_to(tmp_path / "logs" / "b")
    (tmp_path / "logs" / "b" / "to_a").symlink_to(tmp_path / "logs" / "a")
    found = store_mod.find_profiles(str(tmp_path / "logs"))
    assert sorted(found) == ["keras/train", "latest/train", "linked/train"]
    assert all(len(paths) == 1 for paths in found.values())


def test_a_profile_that_could_not_be_read_is_read_again_later(tmp_path, monkeypatch):
    """A profile that cannot be read (its permissions, a network file system) is listed as failed, and read
    again once the logdir is walked again: its path and length stay the same once it can be, and it had
    stayed failed until TensorBoard restarted (trial AD)."""
    from tb_memory_plugin import cli, store as store_mod

    shutil.copytree(REPO / "demo_logs" / "keras_unet", tmp_path / "keras")
    read, clock = store_mod._read_bytes, [1000.0]
    refused = {"now": True}

    def flaky(path):
        if refused["now"]:
            raise PermissionError(13, "Permission denied", path)
        return read(path)

    monkeypatch.setattr(store_mod, "_read_bytes", flaky)
    monkeypatch.setattr(store_mod.time, "monotonic", lambda: clock[0])
    st, ctx, _ = cli._open_store(str(tmp_path / "keras"), None)
    (failed,) = [ref for ref in st.list_steps(ctx, "")["train"] if ref.plugin == store_mod.PROFILE]
    step = st.analysis(ctx, "", failed)
    assert step.status == "corrupt" and "Permission denied" in step.message
    refused["now"] = False
    assert [ref.tag for ref in st.list_steps(ctx, "")["train"] if ref.plugin == store_mod.PROFILE] == [failed.tag]
    clock[0] += 2 * store_mod._PROFILE_SCAN_SECONDS
    profiled = [ref for ref in st.list_steps(ctx, "")["train"] if ref.plugin == store_mod.PROFILE]
    assert len(profiled) > 1 and all(ref.tag.startswith(failed.tag + "/step_") for ref in profiled)
    assert st.analysis(ctx, "", profiled[-1]).status == "ok"


def test_an_old_profilers_session_is_listed_and_says_what_it_is(tmp_path):
    """A session of the profiler before TensorFlow 2.5 (`<host>.trace.json.gz`, no `.xplane.pb`) is listed,
    saying what it is and what to do, not left out: trial AD's page had said no step was traced at all."""
    import gzip

    from tb_memory_plugin import cli

    session = tmp_path / "old" / "plugins" / "profile" / "2020_05_05_00_00_00"
    session.mkdir(parents=True)
    (session / "host.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    (session / "host.memory_profile.json.gz").write_bytes(gzip.compress(b"{}"))
    st, ctx, _ = cli._open_store(str(tmp_path), None)
    (ref,) = st.list_steps(ctx, "")["old"]
    step = st.analysis(ctx, "", ref)
    assert ref.tag == "profile/2020_05_05_00_00_00" and step.status == "corrupt"
    assert "old profiler's trace" in step.message and "TensorFlow 2.5 or later" in step.message


def test_summary_of_a_profiled_step(tb, steps, keras_logdir):
    from tracedata import read_blob_bytes

    from tb_memory_plugin import function_graph

    _, session = tb
    body = _get(tb, "summary", run="keras/train", tag=f"profile/{session}/step_{PROFILE_BATCHES[0] - 1}")
    assert body["source"] == "xplane" and body["status"] == "ok"
    engine = steps[0][1]
    # The run's graph is the callback's model config (its resident weights sized from it).
    config = read_blob_bytes(keras_logdir, "keras/train", "keras", ("graph_keras_model",))
    run_graph = function_graph.from_keras_config(config)
    assert body["devices"] == json.loads(json.dumps(report.step_summary(engine, "layer", run_graph)["devices"]))
    (device,) = body["devices"]
    assert device["baseline"] == "allocator_bytes_in_use" and device["start_bytes"] > 0
    assert device["figures"]["at_peak_bytes"] == device["peak_rise_bytes"] > 0
    scopes = _get(tb, "scopes", run="keras/train", tag=f"profile/{session}/step_{PROFILE_BATCHES[0] - 1}",
                  scope=MODEL)
    assert {c["name"] for c in scopes["children"]} <= LAYERS | {"(self)"}


def test_keras_record_points_to_the_profile(tb):
    _, session = tb
    runs = {r["run"]: r for r in _get(tb, "runs")["runs"]}
    (record,) = [s for s in runs["keras/train"]["steps"] if s["source"] == "run_metadata"]
    body = _get(tb, "summary", run="keras/train", tag=record["tag"])
    assert body["status"] == "empty"
    assert f"profile/{session}/step_{PROFILE_BATCHES[0] - 1}" in body["message"]


def test_corrupt_and_memoryless_profiles_say_why_in_one_line(tb):
    _, session = tb
    corrupt = _get(tb, "summary", run="corrupt", tag=f"profile/{session}")
    assert corrupt["status"] == "corrupt" and "\n" not in corrupt["message"]
    assert "not a valid XSpace" in corrupt["message"]
    nomem = _get(tb, "summary", run="nomem", tag=f"profile/{session}")
    assert nomem["status"] == "no_memory" and "TF_CPU_ALLOCATOR_USE_BFC=true" in nomem["message"]
    _get(tb, "curve", expect=422, run="corrupt", tag=f"profile/{session}")
    # The other runs are unaffected.
    good = _get(tb, "summary", run="profile_only", tag=f"profile/{session}/step_{PROFILE_BATCHES[1] - 1}")
    assert good["status"] == "ok"


def test_cli_lists_profiled_steps(keras_logdir, profile_path, capsys):
    from tb_memory_plugin import cli

    assert cli.main(["summary", str(keras_logdir), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    tags = [(s["run"], s["tag"], s["status"]) for s in body["steps"]]
    session = profile_path.parent.name
    for batch in PROFILE_BATCHES:
        assert ("keras/train", f"profile/{session}/step_{batch - 1}", "ok") in tags
    # The text says what the resident tensors are sized from, as the JSON and the page do.
    notes = {device["resident"]["note"] for step in body["steps"] for device in step["devices"] if device["resident"]}
    assert notes and all("sized from the Keras model's config" in note for note in notes)
    assert cli.main(["summary", str(keras_logdir)]) == 0
    text = capsys.readouterr().out
    assert all(f"note: {note}" in text for note in notes)


def test_curve_route_shows_reserved_bytes_fragmentation_and_capacity(tb, steps, reference):
    """The allocator's other readings ride along with its bytes in use, at the same times."""
    _, session = tb
    profile_step, engine = steps[0]
    tag = f"profile/{session}/step_{PROFILE_BATCHES[0] - 1}"
    (device,) = _get(tb, "summary", run="keras/train", tag=tag)["devices"]
    assert device["capacity_bytes"] == engine.spaces[0].trace.capacity_bytes > device["peak_bytes"]
    assert device["memory_kind"] == "host"
    assert len(_in_window(reference, profile_step)) <= 20000
    curve = _get(tb, "curve", run="keras/train", tag=tag, points=20000)
    snapshots = curve["snapshots"]
    assert curve["capacity_bytes"] == device["capacity_bytes"]
    # Every reading kept (points above the event count): compare them with the events one by one.
    by_time = {}
    start_ps = _window(reference, profile_step)[0]
    for event in _in_window(reference, profile_step):
        by_time.setdefault((event["time_ps"] - start_ps) // 1_000_000, []).append(event)
    assert set(snapshots["series"]) == {"reserved_bytes", "fragmentation"}
    for t, total, reserved in zip(snapshots["t_us"], snapshots["bytes"], snapshots["series"]["reserved_bytes"]):
        assert (total, reserved) in {(e["bytes_allocated"], e["bytes_reserved"]) for e in by_time[t]}


def test_keras_optimizer_updates_are_optimizer_bytes(steps):
    """Keras 3 names its optimizer's ops `adam/...`: they count as optimizer state and updates."""
    seen = 0
    for _, step in steps:
        (space,) = step.spaces
        for row, path in enumerate(space.names.paths):
            if path.startswith("adam/"):
                seen += 1
                assert CATEGORIES[space.names.category[row]] == "optimizer", path
    assert seen > 0


# -- output shapes (the batch-size what-if) ------------------------------------------------------


@pytest.mark.parametrize("text, shape", [("[32,28,28,1]", (32, 28, 28, 1)), ("[]", ()), ("[7]", (7,)),
                                         ("[ 2, 3 ]", (2, 3)), ("[?,3]", None), ("[-1,3]", None), ("", None)])
def test_parse_shape(text, shape):
    assert xplane.parse_shape(text) == shape


def test_output_shapes_are_the_allocations_shapes(steps, reference):
    """Per name, the (shape, requested bytes) of its allocations in the step, in time order, as
    TensorFlow's own parse of the memory events says (names made by one raw op only)."""
    for profile_step, step in steps:
        (space,) = step.spaces
        trace = space.trace
        expected: dict[str, list] = collections.defaultdict(list)
        raw_of: dict[str, set] = collections.defaultdict(set)
        for e in _in_window(reference, profile_step):
            if e["allocation"] and "tf_op" in e:
                raw_of[xnames.clean(e["tf_op"])].add(e["tf_op"])
                if "shape" in e:
                    dims = e["shape"].strip("[]")
                    expected[xnames.clean(e["tf_op"])].append(
                        (tuple(int(d) for d in dims.split(",")) if dims else (), e["requested_bytes"]))
        names = [n for n in trace.distinct_names if len(raw_of.get(n, ())) == 1]
        assert len(names) > 50
        assert dict(zip(names, trace.outputs_of(names))) == {n: expected.get(n, []) for n in names}
        assert trace.outputs_of(["no such op", xplane.BEFORE_STEP]) == [[], []]


def test_the_batch_of_a_keras_fit_profile_is_read_from_the_forward_pass(steps):
    """The callback's fit prefetches its input before each step: no input op allocates in it."""
    from tb_memory_plugin import whatif

    for _, step in steps:
        assert whatif.traced_batch(step) == 2


# -- Keras 3's fit with steps_per_execution ------------------------------------------------------

# The same model fitted one batch per call and four per call (`steps_per_execution=4`): Keras then
# runs its train step in a loop, its ops named `while/cond/StatefulPartitionedCall/...`.
_STEPS_PER_EXECUTION_SCRIPT = """
import os, sys
import numpy as np
import keras

root = sys.argv[1]
for per_call in (1, 4):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(16, 3, activation="relu", name="conv"),
                              keras.layers.GlobalAveragePooling2D(name="gap"), keras.layers.Dense(10, name="logits")],
                             name="spe_cnn")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=per_call)
    board = keras.callbacks.TensorBoard(os.path.join(root, f"spe{per_call}"), profile_batch=(3, 4))
    model.fit(np.random.rand(16 * 16, 8, 8, 3).astype(np.float32), np.random.randint(0, 10, 16 * 16), batch_size=16,
              epochs=1, callbacks=[board], verbose=0)
"""


@pytest.fixture(scope="module")
def steps_per_execution(tmp_path_factory) -> dict[int, analysis.StepAnalysis]:
    """The last profiled step of each fit, by batches per call."""
    root = _profiled_by(_STEPS_PER_EXECUTION_SCRIPT, tmp_path_factory.mktemp("spe_logs"))
    out = {}
    for per_call in (1, 4):
        (path,) = (root / f"spe{per_call}" / "train").glob("plugins/profile/*/*.xplane.pb")
        decoded = xplane.decode(path.read_bytes())
        out[per_call] = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
        assert out[per_call].status == "ok", out[per_call].message
    return out


def test_a_train_step_run_in_keras_loop_is_named_as_one_run_alone(steps_per_execution):
    """With steps_per_execution=4 the model's ops are named as with 1 (`spe_cnn/conv/...`,
    `gradient_tape/spe_cnn/conv/...`, `adam/...`), not under the loop and call that run them: by
    layer, the same layers hold the bytes, gradients and optimizer are theirs, and the batch is read."""
    from tb_memory_plugin import whatif

    layers, categories = {}, {}
    for per_call, step in steps_per_execution.items():
        space = step.space(None)
        names = space.trace.distinct_names
        assert not [n for n in names if "PartitionedCall" in n or "spe_cnn_1" in n], names
        raw = [space.trace.label_of.get(n, "") for n in names if n.startswith("gradient_tape/spe_cnn/conv/")]
        # The raw names keep the loop: `while/body/_1/while/cond/then/_143/while/cond/StatefulPartitionedCall/...`.
        assert raw and all(r.startswith("while/body/") == (per_call == 4) for r in raw), raw
        # The layers holding 1% of the step's bytes or more (the optimizer's root holds under 0.1%, near 64 KiB with
        # 4 steps: a fixed 64 KiB line had let a loaded machine's schedule decide); the optimizer's ops are its own
        # (`adam`, or `adam_1` for the process's second optimizer), not the loop's.
        rows = space.top_level("layer")
        total = sum(row[figures.ALLOCATED] for _, row in rows)
        layers[per_call] = {path for path, row in rows if row[figures.ALLOCATED] >= 0.01 * total}
        assert [path for path, _ in rows if re.fullmatch(r"adam(_\d+)?", path)], rows
        categories[per_call] = {name: allocated for name, _, allocated in space.by_category()}
        assert whatif.traced_batch(step) == 16
        # One step of 4 is 4 training steps: said, with the number the profile's step numbers tell (trial AB's
        # allocated figures were 4 steps' worth, unsaid; trial AF's note had not said how many).
        said = "with steps_per_execution=4 (the profile's step numbers are 4 apart): it ran 4 training steps"
        assert (said in (step.trace.note or "")) == (per_call == 4), step.trace.note
    assert "spe_cnn" in layers[4] and layers[4] == layers[1], layers
    for per_call in (1, 4):
        assert categories[per_call]["gradients"] > 0 and categories[per_call]["optimizer"] > 0, categories


# -- gradients taken in a loop's body ------------------------------------------------------------

# A tf.function that accumulates gradients over micro-batches in a tf.while_loop, the tape inside
# the body: its gradients are `while/body/_1/gradient_tape/while/mlp/fc/...`.
_MICRO_BATCH_SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf

root = sys.argv[1]
w1 = tf.Variable(tf.random.normal((64, 256)) * 0.05, name="fc/kernel")
w2 = tf.Variable(tf.random.normal((256, 10)) * 0.05, name="out/kernel")
acc = [tf.Variable(tf.zeros_like(w), trainable=False) for w in (w1, w2)]

@tf.function
def step(x, y):
    xs, ys = tf.reshape(x, [2, -1, 64]), tf.reshape(y, [2, -1])
    def body(i, total):
        with tf.GradientTape() as tape:
            with tf.name_scope("mlp"):
                with tf.name_scope("fc"):
                    h = tf.nn.relu(xs[i] @ w1)
                with tf.name_scope("out"):
                    logits = h @ w2
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(ys[i], logits))
        for a, g in zip(acc, tape.gradient(loss, [w1, w2])):
            a.assign_add(g)
        return i + 1, total + loss
    return tf.while_loop(lambda i, t: i < 2, body, (tf.constant(0), tf.constant(0.0)))[1]

x, y = tf.random.normal((64, 64)), tf.random.uniform((64,), 0, 10, tf.int32)
step(x, y)
tf.profiler.experimental.start(root)
with tf.profiler.experimental.Trace("train", step_num=1, _r=1):
    step(x, y)
tf.profiler.experimental.stop()
"""


def test_gradients_taken_in_a_loops_body_are_the_layers_gradients(tmp_path_factory):
    """The tape's gradients in a loop's body (`while/body/_1/gradient_tape/while/mlp/fc/...`) fold
    into the layer (`while/mlp/fc`), as gradients: they had been a scope of their own, activations."""
    root = _profiled_by(_MICRO_BATCH_SCRIPT, tmp_path_factory.mktemp("micro_logs"))
    (path,) = root.glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    space = analysis.analyse(decoded.trace(len(decoded.steps) - 1)).space(None)
    names = space.names
    tape = [i for i, raw in enumerate(names.raw) if space.trace.label_of.get(raw, "").startswith(
        "while/body/_1/gradient_tape/while/mlp/fc/")]
    assert tape, [space.trace.label_of.get(raw) for raw in names.raw][:20]
    for i in tape:
        assert names.raw[i].startswith("gradient_tape/while/mlp/fc/")
        assert names.leaf_path("layer", i).startswith("while/mlp/fc/")
        assert CATEGORIES[int(names.category[i])] == "gradients"


# -- TensorFlow's own XLA (jit_compile) -----------------------------------------------------------

# A tf.function compiled with XLA, profiled around calls made eagerly (`jit_function`), and a
# Keras fit compiled with XLA under the TensorBoard callback (`jit_fit`). XLA allocates the
# program's buffers inside `CpuExecutable::ExecuteAsyncOnStream`.
_JIT_SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
import keras

root = sys.argv[1]
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="h"),
                          keras.layers.Dense(10, name="o")])
""" + JIT_TRAIN_STEP + """
x, y = tf.constant(np.random.rand(32, 64).astype(np.float32)), tf.constant(np.random.randint(0, 10, 32))
step(x, y)  # tensors made before the profile: the steps convert no input
tf.profiler.experimental.start(os.path.join(root, "jit_function"))
for i in range(2):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        step(x, y)
tf.profiler.experimental.stop()

# Gradients accumulated over micro-batches in a tf.while_loop inside the compiled program: the
# loop body's values live in the program's scratch while the loop runs.
MICRO = 4

@tf.function(jit_compile=True)
def accumulate(x, y):
    xs, ys = tf.reshape(x, [MICRO, -1, 64]), tf.reshape(y, [MICRO, -1])
    sums = [tf.zeros_like(v) for v in model.trainable_variables]
    def body(i, sums):
        with tf.GradientTape() as tape:
            loss = loss_of(ys[i], model(xs[i], training=True))
        return i + 1, [s + g for s, g in zip(sums, tape.gradient(loss, model.trainable_variables))]
    _, sums = tf.while_loop(lambda i, _: i < MICRO, body, [tf.constant(0), sums])
    optimizer.apply_gradients(zip([s / MICRO for s in sums], model.trainable_variables))
    return tf.constant(0.0)

big_x, big_y = tf.constant(np.random.rand(128, 64).astype(np.float32)), tf.constant(np.random.randint(0, 10, 128))
accumulate(big_x, big_y)
tf.profiler.experimental.start(os.path.join(root, "jit_loop"))
for i in range(2):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        accumulate(big_x, big_y)
tf.profiler.experimental.stop()

# Keras' train_on_batch compiled with XLA: its program passes some outputs through from its arguments,
# and TensorFlow's runtime allocates each a buffer as the program runs (no block of the program's).
# (Of another width than the fit's model below: two programs of one shape that name no function
# could not be told apart, and would stay whole.)
batch_model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
batch_model.compile("adam", loss_of, jit_compile=True)
batch_model.train_on_batch(x, y)
tf.profiler.experimental.start(os.path.join(root, "jit_on_batch"))
for i in range(2):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        batch_model.train_on_batch(x, y)
tf.profiler.experimental.stop()

fit_model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
fit_model.compile("adam", loss_of, jit_compile=True)
board = keras.callbacks.TensorBoard(os.path.join(root, "jit_fit"), profile_batch=(3, 4))
fit_model.fit(np.random.rand(32 * 6, 64).astype(np.float32), np.random.randint(0, 10, 32 * 6), batch_size=32,
              epochs=1, callbacks=[board], verbose=0)
"""


@pytest.fixture(scope="module")
def jit_logdir(tmp_path_factory) -> Path:
    return _profiled_by(_JIT_SCRIPT, tmp_path_factory.mktemp("jit_logs"))


@pytest.mark.parametrize("run", ["jit_function", "jit_fit/train", "jit_on_batch"])
def test_tensorflows_xla_programs_hold_their_buffers_by_layer(jit_logdir, run):
    """What XLA allocates while a compiled program runs is the program's (op type `XLA program`),
    not `(no op)` nor an op typed by the function's name; its scratch block is split by the
    TensorFlow ops whose values XLA placed in it (the program's HLO in the profile, with no heap
    trace on CPU: by its schedule), so the model's layers hold it; the what-if reads the batch
    from the program's data argument and asks for a fit, as one step cannot be scaled."""
    from tb_memory_plugin import whatif

    (path,) = (jit_logdir / run).glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())

    def programs_share(step) -> float:
        space = step.space(None)
        held = sum(row[figures.AT_PEAK] for name, _, row in space.by_op_type() if name == "XLA program")
        return held / max(space.peak_rise_bytes, 1)

    # Of the profiled steps, the one whose peak the programs hold most of: on a loaded machine tf.data's
    # next batch (a `GatherV2`, 15 KiB of a 100 KiB rise) can fall inside one step's window.
    steps = [analysis.analyse(decoded.trace(i)) for i in range(len(decoded.steps))]
    step = max(steps, key=programs_share)
    space = step.space(None)
    by_type = {name: row[figures.AT_PEAK] for name, _, row in space.by_op_type()}
    assert by_type.get("XLA program", 0) >= 0.9 * space.peak_rise_bytes > 0, by_type
    assert not any(name.startswith("__inference_") for name in by_type)  # no op type named by its function
    peak_node = report.node_ref(space, space.peak_exec())
    placed = set(space.trace.xla_program_of)
    assert peak_node["op_type"] == "XLA program" and peak_node["name"] not in placed | {"(no op)"}
    # The model's layers hold most of the programs' bytes at the peak: the forward matmuls and
    # their gradients (folded into their layer), Keras' names cleaned as for any op.
    assert any(name.startswith("gradient_tape/") for name in placed), placed
    tree = space.tree("layer")
    model = next(c for c in tree.children[0] if tree.paths[c].startswith("sequential"))
    # Of the values XLA placed (not its unused scratch, nor the allocator's rounding of the block,
    # which TensorFlow's BFC allocator sometimes makes large: 175,616 B for 109,892 B asked).
    at_peak = space.exec_columns[figures.AT_PEAK]
    values = sum(int(at_peak[e]) for e in range(space.trace.exec_count)
                 if space.trace.name(e) in placed and not space.trace.name(e).endswith("/(unused scratch)"))
    assert int(tree.figures[model, figures.AT_PEAK]) >= 0.5 * values > 0
    gradients = [i for i in range(space.trace.exec_count) if space.trace.name(i).startswith("gradient_tape/")
                 and space.trace.name(i) in placed]
    assert gradients and all(CATEGORIES[int(space.category[i])] == "gradients" for i in gradients)
    # The step's note names the programs (not their pieces), with the share they hold.
    held = min(by_type["XLA program"] / space.peak_rise_bytes, 1.0)  # more, where others free earlier bytes
    assert f"XLA programs ran in this step, holding {held:.0%} of the peak rise: " in step.message
    named = step.message.split("peak rise: ", 1)[1].split(". ", 1)[0]
    assert peak_node["name"] in named and not any(name in named for name in placed)
    assert "read from the program's compiled HLO in the profile" in step.message
    assert "JAX" not in step.message  # a TensorFlow program's (trial AL: its note had spoken of a JAX program's)
    # The batch is the program's data argument's (x: [32, 64]), not a parameter's; one step of XLA
    # programs cannot be scaled (XLA lays them out again per batch size): a fit is asked for.
    assert whatif.traced_batch(step) == 32
    assert (32, 64) in step.trace.program_shapes.inputs and (64, 256) not in step.trace.program_shapes.inputs
    with pytest.raises(whatif.WhatIfError, match="jit_compile.*another batch size besides 32 and fit"):
        whatif.WhatIf([whatif.Traced(run, "step", 0, "xplane", step, space)], 64)


@pytest.mark.parametrize("run", ["jit_function", "jit_fit/train", "jit_loop", "jit_on_batch"])
def test_splitting_tensorflows_xla_blocks_keeps_every_figure(jit_logdir, run, monkeypatch):
    """The curve, the peak and each node's bytes summed with the pieces split from its blocks are
    what they are with the programs whole (their HLO unread): a jitted function's op keeps its own
    blocks' remainder, `(XLA program)` its."""
    from tracedata import decoded_without_hlo, figures_by_node

    (path,) = (jit_logdir / run).glob("plugins/profile/*/*.xplane.pb")
    data = path.read_bytes()
    split, whole = xplane.decode(data), decoded_without_hlo(monkeypatch, data)
    for i in range(len(split.steps)):
        a, b = analysis.analyse(split.trace(i)).space(None), analysis.analyse(whole.trace(i)).space(None)
        assert (a.peak_rise_bytes, a.start_bytes) == (b.peak_rise_bytes, b.start_bytes)
        assert np.array_equal(a.curve.rise_bytes, b.curve.rise_bytes)
        assert figures_by_node(a) == figures_by_node(b)
        assert b.trace.xla_program_of == {}
    assert any(analysis.analyse(split.trace(i)).space(None).trace.xla_program_of for i in range(len(split.steps)))


def test_a_loop_inside_an_xla_program_holds_its_bodys_values(jit_logdir):
    """XLA's CPU compiler keeps no heap trace: the loop body's values (one micro-batch's forward
    pass and gradients) are live where the loop runs, by the body's own schedule, and fold into
    the model's layers; the loop's carried sums are one value, not counted once per alias."""
    (path,) = (jit_logdir / "jit_loop").glob("plugins/profile/*/*.xplane.pb")
    decoded = xplane.decode(path.read_bytes())
    step = analysis.analyse(decoded.trace(len(decoded.steps) - 1))
    space = step.space(None)
    placed = space.trace.xla_program_of
    in_loop = [name for name in placed if name.startswith(("while/", "gradient_tape/while/"))]
    assert in_loop, sorted(placed)
    at_peak = space.exec_columns[figures.AT_PEAK]
    rows = {space.trace.name(e): e for e in range(space.trace.exec_count)}
    held = sum(int(at_peak[rows[name]]) for name in in_loop)
    assert held >= 0.25 * space.peak_rise_bytes, (held, space.peak_rise_bytes)
    share = int(step.message.split("That places ", 1)[1].split("%", 1)[0])
    assert share >= 50, step.message


# -- fit, then predict, in one profile ------------------------------------------------------------

# The profiler API around a fit at batch 16 and a predict at batch 32: four unmarked function runs, two of
# the training function and two of the inference one, of one model at two batches.
_FIT_THEN_PREDICT_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
import keras

root = sys.argv[1]
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="fc1"),
                          keras.layers.Dense(10, name="fc2")], name="mlp")
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = np.random.rand(64, 64).astype(np.float32), np.random.randint(0, 10, 64)
model.fit(x[:32], y[:32], batch_size=16, verbose=0)
model.predict(x, batch_size=32, verbose=0)
tf.profiler.experimental.start(root)
model.fit(x[:32], y[:32], batch_size=16, verbose=0)
model.predict(x, batch_size=32, verbose=0)
tf.profiler.experimental.stop()
"""


def test_a_predict_step_is_not_offered_a_fit_with_the_training_steps(tmp_path):
    """A training step and an inference step of one model at two batches share the model's layers but few
    ops: the what-if from either does not offer a fit over the other (trial AL: an evaluate batch at 128 had
    been offered the training steps at 64, and that fit predicted 40% low at twice the batch)."""
    from tb_memory_plugin import cli

    root = _profiled_by(_FIT_THEN_PREDICT_SCRIPT, tmp_path / "fp")
    steps = {}
    for tag in ("run_1", "run_2", "run_3", "run_4"):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["whatif", str(root), "--tag", tag, "--batch", "64", "--json"])
        if code == 0:
            body = json.loads(out.getvalue())
            steps[tag] = (body["runs"][0]["batch"], body["notes"])
    batches = {batch for batch, _ in steps.values()}
    assert batches == {16, 32}, steps  # the training runs at 16, the inference ones at 32
    for tag, (batch, notes) in steps.items():
        assert not [n for n in notes if "also holds the same model's" in n], (tag, notes)
    # Each unmarked run is named by its tf.function, in the runs route and the CLI's headings: the fit's two
    # runs one function, the predict's another (they had looked alike: trial AL).
    listed = json.loads(memory_app_client(root).get("/data/plugin/memory/runs").get_data(as_text=True))["runs"]
    functions = [step["function"] for run in listed for step in run["steps"]]
    assert len(functions) == 4 and all(functions), functions
    assert functions[0] == functions[1] != functions[2] == functions[3], functions
    assert not any(f.startswith("__inference_") for f in functions)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["summary", str(root), "--top", "1"]) == 0
    assert f"(function run 3 of {functions[2]}, no step marker)" in out.getvalue()


# -- stats read at once ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_stats_are_read_at_once_as_field_by_field_and_as_the_protos_say(seed):
    """XStats (a metadata id, then one value of any kind, none for a zero, or several fields where another
    writer put them) serialised by TensorFlow's own protos: `_read_stats` reads most of them at once, the rest
    field by field; both read each stat's id and value as the protos do."""
    import random

    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    from tb_memory_plugin.sources.xplane import _read_stats, _read_stats_by_field

    rng = random.Random(seed)
    blobs, expected = [], []
    for _ in range(400):
        stat = xplane_pb2.XStat(metadata_id=rng.choice([0, 1, 127, 128, 300, 2**20]))
        kind = rng.choice(["none", "double", "uint64", "int64", "str", "bytes", "ref"])
        value = None
        if kind == "double":
            value = stat.double_value = rng.choice([0.0, 1.5, -2.25, 1e300])
        elif kind in ("uint64", "ref"):
            value = rng.choice([0, 1, 200, 2**40, 2**64 - 1])
            setattr(stat, f"{kind}_value", value)
            value = value - 2**64 if value >= 2**63 else value  # read as int64
        elif kind == "int64":
            value = stat.int64_value = rng.choice([0, -1, 5, -(2**62)])
        elif kind in ("str", "bytes"):
            value = "é" * rng.randint(0, 200)
            setattr(stat, f"{kind}_value", value if kind == "str" else value.encode())
        blob = stat.SerializeToString()
        if rng.random() < 0.1:  # another writer: the metadata id again, after the value (the last one counts)
            blob += xplane_pb2.XStat(metadata_id=7).SerializeToString()
            stat.metadata_id = 7
        blobs.append(blob)
        expected.append((stat.metadata_id, kind, value))
    data = b"".join(blobs)
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.cumsum([len(b) for b in blobs]).astype(np.int64)
    starts = ends - np.array([len(b) for b in blobs], dtype=np.int64)
    stats = _read_stats(buf, (np.arange(len(blobs)), starts, ends))
    by_field = _read_stats_by_field(buf, starts, ends)
    for column, other in zip((stats.metadata_id, stats.kind, stats.integer, stats.real, stats.text_start,
                              stats.text_end), by_field):
        assert np.array_equal(column, other)
    for i, (metadata_id, kind, value) in enumerate(expected):
        assert stats.metadata_id[i] == metadata_id
        if kind == "double" and value != 0.0:
            assert stats.real[i] == value
        elif kind in ("uint64", "int64", "ref") and value != 0:
            assert stats.integer[i] == value
        elif kind in ("str", "bytes") and value:
            assert data[stats.text_start[i]:stats.text_end[i]].decode() == value
