"""Real TensorFlow training steps traced with step stats, for demos, tests and benchmarks.

Plain functions, importable as a module (``sys.path.insert(0, "<repo>/demo_logs");
import models``). Everything runs in ``tf.compat.v1`` graph mode inside its own
``tf.Graph`` and ``tf.compat.v1.Session(graph=...)``; nothing here switches
eager execution off globally, so importing this module leaves TensorFlow as it
was.

Keras 3 (TF 2.21's default) makes ``tf.compat.v1.layers.*`` raise, so layers
are written with ``tf.nn`` ops and ``tf.compat.v1.get_variable``.

Models (from the project's source material):

* ``unet``: flow-estimation U-Net. Input: three RGB frames concatenated (9
  channels); conv layers ``shared_model/unet_00`` .. ``shared_model/unet_11``
  (nodes ``shared_model/unet_01/Conv2D``, ``.../BiasAdd``, ``.../LeakyRelu``),
  downsampling by a strided conv and by max pooling, two bilinear up-sampling
  skips (resize + concat), 2-channel flow out, L1 + L2 loss against a target
  flow, Adam.
* ``resnet9``: 9-block residual image network (conv in, two strided
  downsampling convs, ``res_block_0`` .. ``res_block_8`` each
  conv-norm-relu-conv-norm + skip, one resize+conv and one conv2d_transpose
  up-sampling, conv out, tanh), L1 loss, Adam.
* ``bigconv``: one conv2d whose filter is nearly as large as the image (the
  im2col case where the op's scratch dwarfs everything), Adam.

Main entry points::

    build(model, batch, size, seed=0) -> Model
    traced_step(model, batch, size, output_partition_graphs=False) -> (run_metadata_bytes, graph_def_bytes)
    write_traced_run(logdir, model, batch, size, steps=(1, 2, 3), tag_format='step_{}',
                     add_graph=True, output_partition_graphs=False, trace_level=FULL_TRACE) -> [tags]
    write_graph_run_metadata(logdir, run_metadata_bytes=b'', tag='graph_run_metadata', step=1) -> tag

``model`` is a name from ``MODELS`` (``'unet'``, ``'resnet9'``, ``'bigconv'``)
or a builder ``f(batch, size, seed) -> Model``.
"""

import collections
import glob
import os

import numpy as np

# oneDNN decides the CPU allocator TensorFlow reports ("mklcpu" with
# allocator_bytes_in_use, vs "cpu" without). TF turns it on by default only on
# some CPUs; pin it so traces look the same on every machine. No effect if
# TensorFlow was imported before this module, or if the variable is set.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1

# RunOptions.TraceLevel values (ints, so callers need not import TensorFlow).
NO_TRACE = tf1.RunOptions.NO_TRACE  # 0: add_run_metadata gets an empty RunMetadata
SOFTWARE_TRACE = tf1.RunOptions.SOFTWARE_TRACE  # 1
HARDWARE_TRACE = tf1.RunOptions.HARDWARE_TRACE  # 2
FULL_TRACE = tf1.RunOptions.FULL_TRACE  # 3

Model = collections.namedtuple(
    "Model",
    [
        "name",  # str
        "graph",  # tf.Graph
        "init_op",  # variables initializer
        "train_op",  # one Adam step (a NoOp grouping the Adam update and the loss)
        "loss",  # scalar tensor
        "feeds",  # callable(step:int) -> feed_dict (deterministic numpy arrays)
    ],
)


# --------------------------------------------------------------------------
# layers (tf.nn + get_variable; Keras-3 safe)
# --------------------------------------------------------------------------


def onednn_enabled():
    """True when TensorFlow runs with oneDNN (CPU allocator "mklcpu")."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def _conv(x, out_ch, k, stride=1, bias=True, padding="SAME"):
    """Conv2D (+ BiasAdd) in the current variable scope: nodes `<scope>/Conv2D`, `<scope>/BiasAdd`."""
    in_ch = x.shape[-1]
    w = tf1.get_variable(
        "weights",
        [k, k, in_ch, out_ch],
        initializer=tf1.glorot_uniform_initializer(),
    )
    y = tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding, name="Conv2D")
    if bias:
        b = tf1.get_variable("biases", [out_ch], initializer=tf1.zeros_initializer())
        y = tf.nn.bias_add(y, b, name="BiasAdd")
    return y


def _batch_norm(x, eps=1e-5):
    """Training-mode batch norm (what tf.layers.batch_normalization runs): FusedBatchNormV3 + gamma/beta."""
    ch = x.shape[-1]
    gamma = tf1.get_variable("gamma", [ch], initializer=tf1.ones_initializer())
    beta = tf1.get_variable("beta", [ch], initializer=tf1.zeros_initializer())
    y, _, _ = tf1.nn.fused_batch_norm(x, gamma, beta, epsilon=eps, is_training=True, name="FusedBatchNorm")
    return y


def _resize_bilinear(x, hw, name="resize"):
    return tf1.image.resize_bilinear(x, hw, align_corners=False, name=name)


def _adam(loss):
    return tf1.train.AdamOptimizer(learning_rate=1e-4).minimize(loss)


def _finish(name, graph, loss, train_step, feeds):
    with graph.as_default():
        init_op = tf1.global_variables_initializer()
        train_op = tf.group(train_step, loss, name="train_step")
    return Model(name, graph, init_op, train_op, loss, feeds)


def _random_feeds(ranges, seed):
    """feeds(step) -> feed_dict of float32 arrays in each placeholder's shape and
    (low, high) range, deterministic in (seed, step)."""

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {
            ph: rng.uniform(lo, hi, size=ph.shape.as_list()).astype(np.float32)
            for ph, lo, hi in ranges
        }

    return feeds


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------


def build_unet(batch, size, seed=0):
    """Flow-estimation U-Net on three RGB frames (9 channels) -> 2-channel flow.

    size must be a multiple of 4. Layers shared_model/unet_00 .. unet_11:
      00, 01 full res (32 ch) -> skip1
      02 stride-2 conv (64 ch), 03 -> skip2 (1/2 res)
      max pool -> 04, 05 (128 ch, 1/4 res)
      bilinear up x2 + concat skip2 -> 06, 07 (64 ch)
      bilinear up x2 + concat skip1 -> 08, 09 (32 ch), 10 (16 ch), 11 (2 ch flow, linear)
    """
    if size % 4:
        raise ValueError("unet size must be a multiple of 4, got %r" % (size,))
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        frames = tf1.placeholder(tf.float32, [batch, size, size, 9], name="frames")
        target = tf1.placeholder(tf.float32, [batch, size, size, 2], name="target_flow")
        act = lambda t: tf.nn.leaky_relu(t, alpha=0.2, name="LeakyRelu")  # noqa: E731

        def layer(i, x, ch, k=3, stride=1, activation=True):
            with tf1.variable_scope("unet_%02d" % i):
                y = _conv(x, ch, k, stride)
                return act(y) if activation else y

        with tf1.variable_scope("shared_model"):
            x = layer(0, frames, 32)
            skip1 = layer(1, x, 32)
            x = layer(2, skip1, 64, stride=2)
            skip2 = layer(3, x, 64)
            x = tf.nn.max_pool2d(skip2, 2, 2, "SAME", name="pool")
            x = layer(4, x, 128)
            x = layer(5, x, 128)
            x = _resize_bilinear(x, [size // 2, size // 2], name="upsample_1")
            x = tf.concat([x, skip2], axis=3, name="skip_1")
            x = layer(6, x, 64)
            x = layer(7, x, 64)
            x = _resize_bilinear(x, [size, size], name="upsample_2")
            x = tf.concat([x, skip1], axis=3, name="skip_2")
            x = layer(8, x, 32)
            x = layer(9, x, 32)
            x = layer(10, x, 16)
            flow = layer(11, x, 2, activation=False)
        with tf1.name_scope("loss"):
            l1 = tf.reduce_mean(tf.abs(flow - target), name="l1")
            l2 = 1e-4 * tf.add_n(
                [tf.nn.l2_loss(v) for v in tf1.trainable_variables() if "weights" in v.name],
                name="l2",
            )
            loss = tf.add(l1, l2, name="total")
        train_step = _adam(loss)
    feeds = _random_feeds([(frames, 0.0, 1.0), (target, -1.0, 1.0)], seed)
    return _finish("unet", g, loss, train_step, feeds)


def build_resnet9(batch, size, seed=0, base=16):
    """9-block residual image-to-image network (CycleGAN-style generator), L1 loss, Adam.

    size must be a multiple of 4. Scopes: conv_in, down_1, down_2,
    res_block_0 .. res_block_8 (conv_1/norm_1/relu/conv_2/norm_2 + add),
    up_1 (bilinear resize + conv), up_2 (conv2d_transpose), conv_out (+ tanh).
    """
    if size % 4:
        raise ValueError("resnet9 size must be a multiple of 4, got %r" % (size,))
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        images = tf1.placeholder(tf.float32, [batch, size, size, 3], name="images")
        target = tf1.placeholder(tf.float32, [batch, size, size, 3], name="target_images")

        def conv_norm_relu(name, x, ch, k, stride=1, relu=True):
            with tf1.variable_scope(name):
                y = _conv(x, ch, k, stride, bias=False)
                y = _batch_norm(y)
                return tf.nn.relu(y, name="Relu") if relu else y

        with tf1.variable_scope("generator"):
            x = conv_norm_relu("conv_in", images, base, 7)
            x = conv_norm_relu("down_1", x, base * 2, 3, stride=2)
            x = conv_norm_relu("down_2", x, base * 4, 3, stride=2)
            for i in range(9):
                with tf1.variable_scope("res_block_%d" % i):
                    y = conv_norm_relu("conv_1", x, base * 4, 3)
                    y = conv_norm_relu("conv_2", y, base * 4, 3, relu=False)
                    x = tf.add(x, y, name="skip")
            with tf1.variable_scope("up_1"):
                x = _resize_bilinear(x, [size // 2, size // 2], name="resize")
                x = conv_norm_relu("conv", x, base * 2, 3)
            with tf1.variable_scope("up_2"):
                w = tf1.get_variable(
                    "weights", [3, 3, base, base * 2], initializer=tf1.glorot_uniform_initializer()
                )
                x = tf.nn.conv2d_transpose(
                    x, w, [batch, size, size, base], strides=[1, 2, 2, 1], name="conv2d_transpose"
                )
                with tf1.variable_scope("norm"):
                    x = _batch_norm(x)
                x = tf.nn.relu(x, name="Relu")
            with tf1.variable_scope("conv_out"):
                x = _conv(x, 3, 7)
                out = tf.tanh(x, name="Tanh")
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.abs(out - target), name="l1")
        train_step = _adam(loss)
    feeds = _random_feeds([(images, -1.0, 1.0), (target, -1.0, 1.0)], seed)
    return _finish("resnet9", g, loss, train_step, feeds)


def build_bigconv(batch, size, seed=0, kernel=None, in_ch=3, out_ch=8):
    """One conv2d with a filter nearly as large as the image (default kernel = size - 1).

    The im2col case of the source material ("conv2d with a 135x135 filter tries to
    use 60 GB"): the op's scratch grows with kernel^2 * in_ch * H * W.
    """
    kernel = kernel or max(1, size - 1)
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        images = tf1.placeholder(tf.float32, [batch, size, size, in_ch], name="images")
        target = tf1.placeholder(tf.float32, [batch, size, size, out_ch], name="target")
        with tf1.variable_scope("big_conv"):
            y = _conv(images, out_ch, kernel)
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.square(y - target), name="l2")
        train_step = _adam(loss)
    feeds = _random_feeds([(images, -1.0, 1.0), (target, -1.0, 1.0)], seed)
    return _finish("bigconv", g, loss, train_step, feeds)


def build_constdata(batch, size, seed=0, features=160, hidden=64):
    """A small MLP whose training set is embedded in the graph as a `tf.constant` (size rows x
    `features` float32: 1.25 MiB at size 2048), batches gathered by fed indices: the case of
    "GraphDef cannot be larger than 2GB", at a size that keeps the logs small.
    """
    rng = np.random.RandomState(seed)
    data = rng.uniform(-1.0, 1.0, size=(size, features)).astype(np.float32)
    labels = (data[:, :1] * 0.5 + 0.1).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        with tf1.name_scope("dataset"):
            table = tf.constant(data, name="features")
            targets = tf.constant(labels, name="labels")
            index = tf1.placeholder(tf.int32, [batch], name="batch_index")
            x = tf.gather(table, index, name="x")
            y = tf.gather(targets, index, name="y")
        with tf1.variable_scope("mlp"):
            with tf1.variable_scope("hidden"):
                w = tf1.get_variable("weights", [features, hidden], initializer=tf1.glorot_uniform_initializer())
                b = tf1.get_variable("biases", [hidden], initializer=tf1.zeros_initializer())
                h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b), name="Relu")
            with tf1.variable_scope("out"):
                w = tf1.get_variable("weights", [hidden, 1], initializer=tf1.glorot_uniform_initializer())
                b = tf1.get_variable("biases", [1], initializer=tf1.zeros_initializer())
                out = tf.nn.bias_add(tf.matmul(h, w), b)
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.square(out - y), name="l2")
        train_step = _adam(loss)

    def feeds(step=0):
        return {index: np.random.RandomState(seed * 1000 + step).randint(0, size, size=batch).astype(np.int32)}

    return _finish("constdata", g, loss, train_step, feeds)


def build_growth(batch, size, seed=0, hidden=1024):
    """An MLP whose training step also enqueues each batch's hidden activations into a FIFOQueue
    that nothing dequeues (a "cache" that keeps growing): every step leaves batch x hidden x 4 bytes
    behind (128 KiB at batch 32), held by `mlp/hidden/Relu`, the op that produced them."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        x = tf1.placeholder(tf.float32, [batch, size], name="x")
        y = tf1.placeholder(tf.float32, [batch, 1], name="y")
        with tf1.variable_scope("mlp"):
            with tf1.variable_scope("hidden"):
                w = tf1.get_variable("weights", [size, hidden], initializer=tf1.glorot_uniform_initializer())
                b = tf1.get_variable("biases", [hidden], initializer=tf1.zeros_initializer())
                h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b), name="Relu")
            with tf1.variable_scope("out"):
                w = tf1.get_variable("weights", [hidden, 1], initializer=tf1.glorot_uniform_initializer())
                out = tf.matmul(h, w)
        with tf1.name_scope("activation_cache"):
            queue = tf1.FIFOQueue(capacity=1000, dtypes=[tf.float32], shapes=[[batch, hidden]], name="queue")
            enqueue = queue.enqueue([h], name="enqueue")
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.square(out - y), name="l2")
        train_step = tf.group(_adam(loss), enqueue)
    feeds = _random_feeds([(x, -1.0, 1.0), (y, -1.0, 1.0)], seed)
    return _finish("growth", g, loss, train_step, feeds)


MODELS = {
    "unet": build_unet,
    "resnet9": build_resnet9,
    "bigconv": build_bigconv,
    "constdata": build_constdata,
    "growth": build_growth,
}


def build(model, batch, size, seed=0):
    """Model by name ('unet', 'resnet9', 'bigconv') or builder f(batch, size, seed)."""
    if isinstance(model, Model):
        return model
    builder = MODELS[model] if isinstance(model, str) else model
    return builder(batch, size, seed)


# --------------------------------------------------------------------------
# tracing
# --------------------------------------------------------------------------


def _session(graph, memory_optimization=None):
    # Fixed thread counts keep traces comparable run to run on small CI boxes. Per session: the
    # process-wide pools are fixed by the first session made, which in a test run may be another
    # (with the machine's core count), so a step's schedule would depend on what ran before it.
    config = tf1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2,
                             use_per_session_threads=True)
    if memory_optimization is not None:  # grappler's memory optimizer (RewriterConfig.MemOptType)
        config.graph_options.rewrite_options.memory_optimization = memory_optimization
    return tf1.Session(graph=graph, config=config)


def _run_options(trace_level, output_partition_graphs):
    return tf1.RunOptions(
        trace_level=trace_level, output_partition_graphs=bool(output_partition_graphs)
    )


def traced_step(model, batch, size, output_partition_graphs=False, trace_level=FULL_TRACE, seed=0):
    """One traced training step, no files written.

    Runs init + one untraced warm-up step, then one traced step.
    Returns (run_metadata_bytes, graph_def_bytes): the serialized RunMetadata of
    the traced step and the serialized GraphDef of the model's graph (what
    ``add_graph`` would write as the run graph).
    """
    m = build(model, batch, size, seed)
    with _session(m.graph) as sess:
        sess.run(m.init_op)
        sess.run(m.train_op, feed_dict=m.feeds(0))
        rm = tf1.RunMetadata()
        sess.run(
            [m.train_op, m.loss],  # fetching the loss, as users do, adds a _retval_* node
            feed_dict=m.feeds(1),
            options=_run_options(trace_level, output_partition_graphs),
            run_metadata=rm,
        )
    return rm.SerializeToString(), m.graph.as_graph_def().SerializeToString()


def clear_event_files(logdir):
    """Delete tfevents files directly in logdir (not in sub-directories)."""
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        os.remove(path)


def write_traced_run(
    logdir,
    model,
    batch,
    size,
    steps=(1, 2, 3),
    tag_format="step_{}",
    add_graph=True,
    output_partition_graphs=False,
    trace_level=FULL_TRACE,
    seed=0,
):
    """Write a run whose event file holds traced training steps; returns the tags written.

    Creates ``tf.compat.v1.summary.FileWriter(logdir)``, optionally writes the
    graph with ``writer.add_graph`` (a ``graph_def`` event: plugin ``graphs``,
    tag ``__run_graph__`` to TensorBoard; no MetaGraphDef), runs one untraced warm-up step, then for each step in
    ``steps`` runs a step with ``RunOptions(trace_level, output_partition_graphs)``
    and calls ``writer.add_run_metadata(run_metadata, tag_format.format(step),
    global_step=step)``. With ``trace_level=NO_TRACE`` the RunMetadata written is
    empty (what TF1 scripts that forget to trace produce).
    """
    m = build(model, batch, size, seed)
    os.makedirs(logdir, exist_ok=True)
    tags = []
    with m.graph.as_default():  # FileWriter refuses to be created in eager mode
        writer = tf1.summary.FileWriter(logdir)
    try:
        if add_graph:
            # add_graph writes the GraphDef only; FileWriter(graph=...) would also
            # write a MetaGraphDef (as big again) that the plugin does not read.
            writer.add_graph(m.graph)
        with _session(m.graph) as sess:
            sess.run(m.init_op)
            sess.run(m.train_op, feed_dict=m.feeds(0))
            for step in steps:
                rm = tf1.RunMetadata()
                sess.run(
                    [m.train_op, m.loss],
                    feed_dict=m.feeds(step),
                    options=_run_options(trace_level, output_partition_graphs),
                    run_metadata=rm,
                )
                tag = tag_format.format(step)
                writer.add_run_metadata(rm, tag, global_step=step)
                tags.append(tag)
    finally:
        writer.close()
    return tags


def write_graph_run_metadata(logdir, run_metadata_bytes=b"", tag="graph_run_metadata", step=1):
    """Write a RunMetadata the TF2 way: plugin ``graph_run_metadata``, content ``b"1"``.

    This is what ``tf.summary.trace_export(..., profiler=True)`` and Keras'
    ``TensorBoard(profile_batch=...)`` write. With the default empty payload it
    mimics TF2 eager, whose RunMetadata has no step stats; pass the bytes of
    ``traced_step(...)[0]`` to get a TF2-style summary with real step stats.
    Returns the tag.
    """
    from tensorflow.python.ops import summary_ops_v2  # not in the public tf.summary API

    rm = tf1.RunMetadata()
    rm.ParseFromString(run_metadata_bytes)
    os.makedirs(logdir, exist_ok=True)
    writer = tf.summary.create_file_writer(logdir)  # eager (TF2 default)
    try:
        with writer.as_default():
            summary_ops_v2.run_metadata(tag, rm, step=step)
    finally:
        writer.close()
    return tag


def traced_step_in_subprocess(
    model, batch, size, onednn, output_partition_graphs=False, trace_level=FULL_TRACE, seed=0, timeout=600
):
    """traced_step(...) in a fresh python with TF_ENABLE_ONEDNN_OPTS=1 or 0.

    oneDNN is fixed when TensorFlow loads, so a process gets one or the other.
    With onednn=False the CPU allocator is "cpu" (no allocator_bytes_in_use) and
    Eigen's Conv2DBackpropFilter reports its im2col scratch as
    memory_stats.temp_memory_size; with oneDNN it is "mklcpu". ``model`` must be
    a name from MODELS. Returns (run_metadata_bytes, graph_def_bytes).
    """
    import subprocess
    import sys
    import tempfile

    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1" if onednn else "0", TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, os.path.abspath(__file__), "traced-step", model, str(batch), str(size), tmp,
            "--trace-level", str(int(trace_level)), "--seed", str(seed),
        ]
        if output_partition_graphs:
            cmd.append("--partition-graphs")
        subprocess.run(cmd, env=env, check=True, timeout=timeout, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "run_metadata.pb"), "rb") as f:
            rm = f.read()
        with open(os.path.join(tmp, "graph.pb"), "rb") as f:
            gd = f.read()
    return rm, gd


def count_node_stats(run_metadata_bytes, real_devices_only=True):
    """Number of node executions in a serialized RunMetadata (real /device:TYPE:N devices by default)."""
    rm = tf1.RunMetadata()
    rm.ParseFromString(run_metadata_bytes)
    n = 0
    for dev in rm.step_stats.dev_stats:
        if real_devices_only and ("stream:" in dev.device or "memcpy" in dev.device):
            continue
        n += len(dev.node_stats)
    return n


def _main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description="Write one traced step as run_metadata.pb + graph.pb.")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("traced-step")
    t.add_argument("model", choices=sorted(MODELS))
    t.add_argument("batch", type=int)
    t.add_argument("size", type=int)
    t.add_argument("outdir")
    t.add_argument("--partition-graphs", action="store_true")
    t.add_argument("--trace-level", type=int, default=FULL_TRACE)
    t.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rm, gd = traced_step(a.model, a.batch, a.size, a.partition_graphs, a.trace_level, a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "run_metadata.pb"), "wb") as f:
        f.write(rm)
    with open(os.path.join(a.outdir, "graph.pb"), "wb") as f:
        f.write(gd)
    print("%s node stats, oneDNN %s" % (count_node_stats(rm), onednn_enabled()))


if __name__ == "__main__":
    _main()
