"""Plain helpers shared by the pytest suites (not a conftest, so any test can
import it by name without clashing with tests/e2e/conftest.py)."""

from __future__ import annotations

import collections
import os
import sys
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The suite's real traces use oneDNN's "mklcpu" allocator (the one that reports
# allocator_bytes_in_use). oneDNN is fixed when TensorFlow first loads, and some
# test module may load it before demo_logs/models.py does, so pin it here.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
for path in (str(TESTS), str(REPO / "demo_logs")):
    if path not in sys.path:
        sys.path.insert(0, path)

UNET_BATCH = 2
UNET_SIZE = 16
UNET_STEPS = (1, 2, 3)


@dataclass
class RealTrace:
    run_metadata_bytes: bytes
    graph_def_bytes: bytes
    proto: object  # config_pb2.RunMetadata, parsed straight from the bytes
    onednn: bool

    def analyse(self):
        from tb_memory_plugin import graph, store

        return store.analyse_bytes(self.run_metadata_bytes, graph.RunGraph.from_bytes(self.graph_def_bytes))


def traced_graph_step(graph, init, train, feed, memory_optimization=None) -> bytes:
    """The serialized RunMetadata of one FULL_TRACE run of `train` in `graph` (after its `init` and
    one untraced warm-up run), in the suite's session settings (demo_logs/models.py), with grappler's
    memory optimizer set where `memory_optimization` is given."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    metadata = tf1.RunMetadata()
    with models._session(graph, memory_optimization) as session:
        session.run(init)
        session.run(train, feed)
        session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                    run_metadata=metadata)
    return metadata.SerializeToString()


_FRESH_PROCESS_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import tensorflow as tf
import tracedata
tf1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
    scope = {"tf": tf, "tf1": tf1, "np": np}
    exec(sys.argv[2], scope)
    init = tf1.global_variables_initializer()
metadata = tracedata.traced_graph_step(graph, init, scope["train"], {graph.get_tensor_by_name(k): v for k, v in scope["feed"].items()})
open(sys.argv[3], "wb").write(metadata)
open(sys.argv[4], "wb").write(graph.as_graph_def().SerializeToString())
"""


def traced_in_fresh_process(build: str, directory: Path) -> tuple[bytes, bytes]:
    """(RunMetadata, GraphDef) bytes of one traced step, as `traced_graph_step` traces it, in a process of its
    own: `build` is Python that builds the graph with `tf` and `tf1` and sets `train` (the op run) and
    `feed` (tensor name -> array). For figures that depend on the allocator's history (a BFC allocator's
    regions are the process's: earlier tests in the suite's process leave free regions a tensor may reuse)."""
    import subprocess

    metadata, graph_def = directory / "run_metadata.pb", directory / "graph.pb"
    job = subprocess.run([sys.executable, "-c", _FRESH_PROCESS_SCRIPT, str(TESTS), build, str(metadata), str(graph_def)],
                         capture_output=True, timeout=600)
    assert job.returncode == 0, job.stderr.decode()[-3000:]
    return metadata.read_bytes(), graph_def.read_bytes()


def read_blob_bytes(logdir: Path, run: str, tag: str, plugins=("graph_tagged_run_metadata", "graph_run_metadata")) -> bytes:
    """The exact bytes TensorBoard's data provider hands the plugin for run/tag."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.data import provider as provider_mod

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    ctx = context.RequestContext()
    for plugin in plugins:
        seqs = provider.read_blob_sequences(ctx, experiment_id="", plugin_name=plugin,
                                            run_tag_filter=provider_mod.RunTagFilter([run], [tag]), downsample=1)
        data = seqs.get(run, {}).get(tag)
        if data:
            return provider.read_blob(ctx, blob_key=data[-1].values[0].blob_key)
    raise KeyError((run, tag))


def records_peak(records) -> tuple[int, int | None]:
    """(peak rise, its time) of allocation records (time, bytes, ...) read straight from the protos:
    the events of one microsecond summed, a running total, its first maximum. The tests' own
    oracle for the curve's peak, written apart from curve.py."""
    per_us = collections.defaultdict(int)
    for time, nbytes, *_ in records:
        per_us[time] += nbytes
    running, best, best_time = 0, 0, None
    for time in sorted(per_us):
        running += per_us[time]
        if running > best:
            best, best_time = running, time
    return best, best_time


def start_by_rule(offsets, times) -> int:
    """The bytes in use before a RunMetadata step by figures.md's Baseline rule, from each reading's
    offset (the reading less the records' total then) and time, read apart from analysis.py: the
    earliest reading's offset, but the offset most readings share (two at least; the lower where
    several share it as often) where that is lower, or the first is below nothing. (Its case of
    readings that keep the first's offset until a variable's update is for callers whose steps
    update no variable that way.) (The rule's other
    case, a first reading that tells the shared offset at another moment of its op, is for callers
    whose steps' first ops allocate nothing beside their readings.)"""
    offsets, times = list(map(int, offsets)), list(map(int, times))
    first = offsets[times.index(min(times))]
    counts = collections.Counter(offsets)
    most = max(counts.values())
    if most < 2:
        return first
    mode = min(value for value, count in counts.items() if count == most)
    return mode if first < 0 or mode < first else first


def engine_step(logdir: Path, run: str, tag: str):
    """The engine's analysis of run/tag, from the same bytes and run graph the plugin reads."""
    from tb_memory_plugin import graph, store

    try:
        graph_def = graph.RunGraph.from_bytes(read_blob_bytes(logdir, run, "__run_graph__", ("graphs",)))
    except KeyError:
        graph_def = None
    return store.analyse_bytes(read_blob_bytes(logdir, run, tag), graph_def)


def exec_names(space) -> list[str]:
    """The raw runtime name of every execution of a SpaceTrace, in order."""
    return [space.distinct_names[code] for code in space.name_code.tolist()]


def demo_runs_with_bad_steps(logdir: Path) -> Path:
    """Demo runs (two U-Net batch sizes, a ResNet) beside a corrupt step and a hand-built GPU step."""
    import shutil

    import protos

    for run in ("unet_b2", "unet_b4", "resnet9_b2"):
        shutil.copytree(REPO / "demo_logs" / run, logdir / run)
    protos.write_tagged_run_metadata(logdir / "corrupt", "step_1", b"garbage")
    protos.write_tagged_run_metadata(logdir / "gpu", "step_1", protos.gpu_trace())
    return logdir


def memory_app_client(logdir: Path):
    """A werkzeug client over TensorBoard's WSGI app serving the Memory plugin (as the entry point
    loads it) over a logdir, read by TensorBoard's multiplexer and data provider."""
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_memory_plugin.loader import MemoryPluginLoader

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    plugin = MemoryPluginLoader().load(base_plugin.TBContext(data_provider=provider, logdir=str(logdir)))
    return Client(application.TensorBoardWSGI([plugin], data_provider=provider))


def xplane_stat_values(plane, event) -> dict:
    """An XPlane event's stats by name (TensorFlow's xplane_pb2), refs read as their names."""
    values = {}
    for stat in event.stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind)
        values[plane.stat_metadata[stat.metadata_id].name] = (
            plane.stat_metadata[value].name if kind == "ref_value" else value)
    return values


def xplane_without_memory_events(data: bytes) -> bytes:
    """A serialized XSpace with its MemoryAllocation / MemoryDeallocation events taken out."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    for plane in space.planes:
        memory_ids = {k for k, m in plane.event_metadata.items() if m.name.startswith("Memory")}
        for line in plane.lines:
            kept = [e for e in line.events if e.metadata_id not in memory_ids]
            del line.events[:]
            line.events.extend(kept)
    return space.SerializeToString()


def xplane_captured_between(data: bytes, start_ps: int, stop_ps: int) -> bytes:
    """A serialized XSpace as a capture from start_ps to stop_ps would have recorded it (a profiler
    server's client.trace on a running program): the events that began and ended inside it, in the
    decoder's time (a line's timestamp_ns in ps plus the event's offset). A traced scope records its
    event when it ends, and only where the capture was on when it began."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    for plane in space.planes:
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            kept = [e for e in line.events
                    if start_ps <= base + e.offset_ps and base + e.offset_ps + e.duration_ps <= stop_ps]
            del line.events[:]
            line.events.extend(kept)
    return space.SerializeToString()


def decoded_without_hlo(monkeypatch, data: bytes):
    """A profile decoded as if its HloProtos could not be read: XLA programs whole (one node each)."""
    from tb_memory_plugin.sources import xplane
    from tb_memory_plugin.sources.xplane import hlo

    def unreadable(_data):
        raise hlo.HloError("not read")

    with monkeypatch.context() as patch:
        patch.setattr(hlo, "read_module", unreadable)
        return xplane.decode(data)


def figures_by_node(space) -> dict:
    """Each node's allocated, output, live and at-peak bytes, an XLA program's pieces summed into
    the node whose blocks they are of (`SpaceAnalysis.xla_program_of`); zeros left out."""
    from tb_memory_plugin import figures

    out = collections.Counter()
    for e in range(space.trace.exec_count):
        node = space.xla_program_of(e) or space.trace.name(e)
        for figure, column in (("allocated", space.trace.allocated), ("output", space.trace.output),
                               ("live", space.trace.live), ("at_peak", space.exec_columns[figures.AT_PEAK])):
            out[node, figure] += int(column[e])
    return {key: value for key, value in out.items() if value}


# A Keras model's train step compiled with XLA (`step(x, y)`), for the scripts below and
# test_xplane.py's: they import numpy, tensorflow and keras, and define `model` before it.
JIT_TRAIN_STEP = """
optimizer = keras.optimizers.Adam()
loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

@tf.function(jit_compile=True)
def step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss
"""


# One Keras model trained by a tf.function compiled with XLA, profiled at batch 64 and 256 (runs
# `jit_b64`, `jit_b256`), and steps that run a jitted helper (`clip_b512`, `clip_eager_b64`, below). The model's
# variables are the program's arguments too (donated: aliased with its outputs), its batch (x, y)
# the only data.
JIT_SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
import keras

model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(1024, activation="relu", name="h1"),
                          keras.layers.Dense(1024, activation="relu", name="h2"), keras.layers.Dense(10, name="out")],
                         name="mlp")
""" + JIT_TRAIN_STEP + """
def profiled(run, fn, *args):
    fn(*args)  # compiled before the profile
    tf.profiler.experimental.start(os.path.join(sys.argv[1], run))
    for i in range(2):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            fn(*args)
    tf.profiler.experimental.stop()

for batch in (64, 256):
    profiled(f"jit_b{batch}", step, tf.constant(np.random.rand(batch, 256).astype(np.float32)),
             tf.constant(np.random.randint(0, 10, batch)))

# Run `clip_b512`: a train step TensorFlow runs op by op whose gradients are clipped by a small
# function compiled with XLA: the step is its ops', the program a helper beside them.
clip_model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(1024, activation="relu", name="h1"),
                               keras.layers.Dense(10, name="out")], name="clipped")
clip_optimizer = keras.optimizers.SGD(0.01)

@tf.function(jit_compile=True)
def clip(grads):
    return tf.clip_by_global_norm(grads, 1.0)[0]

@tf.function
def clipped_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(y, clip_model(x, training=True))
    grads = clip(tape.gradient(loss, clip_model.trainable_variables))
    clip_optimizer.apply_gradients(zip(grads, clip_model.trainable_variables))
    return loss

profiled("clip_b512", clipped_step, tf.constant(np.random.rand(512, 256).astype(np.float32)),
         tf.constant(np.random.randint(0, 10, 512)))

# Run `clip_eager_b64`: the same clip beside gradients of a narrower model, applied eagerly by
# Adam (its update ops unscoped, `[512, 512]`): the program holds a good share of the step.
eager_model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(512, activation="relu", name="h1"),
                                keras.layers.Dense(512, activation="relu", name="h2"),
                                keras.layers.Dense(10, name="out")], name="eager")
eager_optimizer = keras.optimizers.Adam()

@tf.function
def eager_grads(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(y, eager_model(x, training=True))
    return tape.gradient(loss, eager_model.trainable_variables)

def eager_step(x, y):
    eager_optimizer.apply_gradients(zip(clip(eager_grads(x, y)), eager_model.trainable_variables))

profiled("clip_eager_b64", eager_step, tf.constant(np.random.rand(64, 256).astype(np.float32)),
         tf.constant(np.random.randint(0, 10, 64)))

# Runs `grouped_b4`, `grouped_b8`: Keras 3 runs a grouped convolution (groups = channels: ConvNeXt's depthwise
# ones) as XLA programs on a CPU, without jit_compile, inside a step of TensorFlow's ops.
def block(x, i):
    y = keras.layers.Conv2D(64, 7, padding="same", groups=64, name=f"dw{i}")(x)
    y = keras.layers.LayerNormalization(name=f"ln{i}")(y)
    y = keras.layers.Dense(128, activation="gelu", name=f"pw{i}a")(y)
    return keras.layers.Add(name=f"add{i}")([x, keras.layers.Dense(64, name=f"pw{i}b")(y)])

grouped_in = keras.Input((16, 16, 64))
grouped_x = grouped_in
for i in range(3):
    grouped_x = block(grouped_x, i)
grouped_model = keras.Model(grouped_in, keras.layers.Dense(10, name="head")(
    keras.layers.GlobalAveragePooling2D(name="gap")(grouped_x)), name="grouped")
grouped_optimizer = keras.optimizers.Adam()

@tf.function
def grouped_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(y, grouped_model(x, training=True))
    grouped_optimizer.apply_gradients(zip(tape.gradient(loss, grouped_model.trainable_variables),
                                          grouped_model.trainable_variables))
    return loss

for batch in (4, 8):
    profiled(f"grouped_b{batch}", grouped_step, tf.constant(np.random.rand(batch, 16, 16, 64).astype(np.float32)),
             tf.constant(np.random.randint(0, 10, batch)))
"""


def profile_jit_runs(root: Path) -> Path:
    """`root` with runs `jit_b64`, `jit_b256`, `clip_b512`, `clip_eager_b64`, `grouped_b4` and `grouped_b8`
    (JIT_SCRIPT), profiled
    in a fresh process in the allocator settings of the other profiles here (keras_unet.BFC_ENV)."""
    import subprocess

    import keras_unet

    subprocess.run([sys.executable, "-c", JIT_SCRIPT, str(root)], env=dict(os.environ, **keras_unet.BFC_ENV),
                   check=True, timeout=600)
    return root
