"""Generate one big traced training step with real TensorFlow, for benchmarks.

    python benchmarks/make_big_trace.py [--out /tmp/tb_memory_big] [--iterations 3000]
    python benchmarks/make_big_trace.py --shape deep [--out /tmp/tb_memory_deep] [--blocks 5400]

Two shapes, because per-name work and per-execution work scale differently:
  loop  (default) a deep MLP plus a while loop: most executions repeat a name;
  deep  a residual network of --blocks blocks in nested scopes
        (model/stage_NN/block_NNNN/...), trained with Adam: nearly every
        execution has a name of its own, as in a big ResNet or transformer.

Writes into --out:
  events.out.tfevents.*  a TensorBoard run: the graph (add_graph) and the traced
                         step (add_run_metadata, tag "step_1", global step 1)
  run_metadata.pb        the same RunMetadata, serialized
  graph.pb               the same GraphDef, serialized

The loop step has well over 75,000 node stats on /device:CPU:0:
  * a deep, wide MLP in nested scopes (model/block_NN/layer_NN/...) trained
    with Adam: thousands of distinct named ops, gradients/..., Adam/...;
  * a tf.while_loop ("recurrence") whose body runs ~15 ops for --iterations
    iterations: every iteration of every op is its own node execution (TF2's
    functional While is lowered to Enter/Merge/Switch/NextIteration/Exit in a
    Session, names like while/body/_1/...).
Tensors are small (tens of KiB), so RAM stays low; the point is node count.
Prints the node-stat count, blob sizes and timings.
"""

import argparse
import glob
import os
import resource
import sys
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # allocator "mklcpu", as in demo_logs
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1

MIN_NODE_STATS = 75000


def build(batch, width, blocks, layers, iterations, seed=0):
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        x = tf1.placeholder(tf.float32, [batch, width], name="inputs")
        y = tf1.placeholder(tf.float32, [batch, width], name="targets")
        h = x
        with tf1.variable_scope("model"):
            for b in range(blocks):
                with tf1.variable_scope("block_%02d" % b):
                    skip = h
                    for l in range(layers):
                        with tf1.variable_scope("layer_%02d" % l):
                            w = tf1.get_variable(
                                "kernel", [width, width],
                                initializer=tf1.glorot_uniform_initializer(),
                            )
                            bias = tf1.get_variable("bias", [width], initializer=tf1.zeros_initializer())
                            h = tf.nn.bias_add(tf.matmul(h, w, name="MatMul"), bias, name="BiasAdd")
                            h = tf.nn.relu(h, name="Relu")
                    with tf1.variable_scope("norm"):
                        h = h + skip
                        mean, var = tf.nn.moments(h, axes=[1], keepdims=True)
                        h = (h - mean) * tf.math.rsqrt(var + 1e-5)
            with tf1.variable_scope("recurrence"):
                u = tf1.get_variable("kernel", [width, width], initializer=tf1.orthogonal_initializer())
                v = tf1.get_variable("gate", [width], initializer=tf1.ones_initializer())

                def cond(i, s, acc):
                    return i < iterations

                def body(i, s, acc):
                    with tf1.name_scope("cell"):
                        z = tf.matmul(s, u, name="MatMul")
                        z = tf.nn.bias_add(z, v, name="BiasAdd")
                        a = tf.tanh(z, name="Tanh")
                        gte = tf.sigmoid(z * 0.5, name="Gate")
                        n = s * (1.0 - gte) + a * gte
                        n = n / (1.0 + tf.reduce_mean(tf.abs(n), axis=1, keepdims=True, name="Scale"))
                        acc = acc + tf.reduce_sum(n, name="Sum")
                    return i + 1, n, acc

                _, state, acc = tf1.while_loop(
                    cond, body, [tf.constant(0), h, tf.constant(0.0)], back_prop=False, name="while"
                )
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.square(h - y)) + 1e-6 * tf.reduce_mean(state) + 0.0 * acc
        train = tf1.train.AdamOptimizer(1e-4).minimize(loss)
        init = tf1.global_variables_initializer()
        train_op = tf.group(train, loss, name="train_step")
    return g, init, train_op, x, y


def build_deep(batch, width, blocks, stage_size=100, seed=0):
    """A residual network of `blocks` gated blocks, `stage_size` blocks per stage.

    Each stage shares one kernel (variables are slow to build in TensorFlow),
    so nearly every op, and every gradient op, has a distinct name.
    """
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        x = tf1.placeholder(tf.float32, [batch, width], name="inputs")
        y = tf1.placeholder(tf.float32, [batch, width], name="targets")
        h = x
        with tf1.variable_scope("model"):
            for stage in range((blocks + stage_size - 1) // stage_size):
                with tf1.variable_scope("stage_%02d" % stage):
                    w = tf1.get_variable("kernel", [width, width],
                                         initializer=tf1.random_normal_initializer(stddev=0.01))
                    for b in range(stage * stage_size, min(blocks, (stage + 1) * stage_size)):
                        with tf1.name_scope("block_%04d" % b):
                            z = tf.matmul(h, w, name="MatMul")
                            h = h + tf.nn.relu(z, name="Relu") * tf.sigmoid(z, name="Gate")
        with tf1.name_scope("loss"):
            loss = tf.reduce_mean(tf.square(h - y))
        train = tf1.train.AdamOptimizer(1e-4).minimize(loss)
        init = tf1.global_variables_initializer()
        train_op = tf.group(train, loss, name="train_step")
    return g, init, train_op, x, y


def count_node_stats(rm):
    return sum(
        len(d.node_stats)
        for d in rm.step_stats.dev_stats
        if "stream:" not in d.device and "memcpy" not in d.device
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("loop", "deep"), default="loop")
    p.add_argument("--out", help="default /tmp/tb_memory_big (loop) or /tmp/tb_memory_deep (deep)")
    p.add_argument("--iterations", type=int, default=3000, help="while-loop iterations")
    p.add_argument("--blocks", type=int, help="default 24 (loop) or 5400 (deep)")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args(argv)
    deep = a.shape == "deep"
    a.out = a.out or ("/tmp/tb_memory_deep" if deep else "/tmp/tb_memory_big")

    t0 = time.time()
    if deep:
        g, init, train_op, x, y = build_deep(a.batch, a.width, a.blocks or 5400)
    else:
        g, init, train_op, x, y = build(a.batch, a.width, a.blocks or 24, a.layers, a.iterations)
    t_build = time.time() - t0
    rng = np.random.RandomState(0)
    feeds = {
        x: rng.standard_normal((a.batch, a.width)).astype(np.float32),
        y: rng.standard_normal((a.batch, a.width)).astype(np.float32),
    }
    config = tf1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    with tf1.Session(graph=g, config=config) as sess:
        sess.run(init)
        t1 = time.time()
        sess.run(train_op, feeds)  # warm-up, untraced
        t_plain = time.time() - t1
        rm = tf1.RunMetadata()
        t1 = time.time()
        sess.run(train_op, feeds, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=rm)
        t_traced = time.time() - t1

    n = count_node_stats(rm)
    rm_bytes = rm.SerializeToString()
    gd_bytes = g.as_graph_def().SerializeToString()

    os.makedirs(a.out, exist_ok=True)
    for old in glob.glob(os.path.join(a.out, "events.out.tfevents.*")):
        os.remove(old)
    with open(os.path.join(a.out, "run_metadata.pb"), "wb") as f:
        f.write(rm_bytes)
    with open(os.path.join(a.out, "graph.pb"), "wb") as f:
        f.write(gd_bytes)
    with g.as_default():
        writer = tf1.summary.FileWriter(a.out)
    writer.add_graph(g)
    writer.add_run_metadata(rm, "step_1", global_step=1)
    writer.close()

    print("out            %s" % a.out)
    print("graph nodes    %d  (GraphDef %.1f MiB)" % (len(g.as_graph_def().node), len(gd_bytes) / 2**20))
    names = [s.node_name for d in rm.step_stats.dev_stats for s in d.node_stats]
    print("node stats     %d  (real devices: %s)" % (n, ", ".join(d.device for d in rm.step_stats.dev_stats)))
    print("distinct names %d  (%.0f%% of node stats)" % (len(set(names)), 100.0 * len(set(names)) / max(len(names), 1)))
    print("RunMetadata    %.1f MiB" % (len(rm_bytes) / 2**20))
    print("time           build %.1fs, untraced step %.2fs, traced step %.2fs, total %.1fs"
          % (t_build, t_plain, t_traced, time.time() - t0))
    print("peak RSS       %.0f MiB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0))
    if n < MIN_NODE_STATS:
        print("error: only %d node stats (< %d); raise --iterations" % (n, MIN_NODE_STATS), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
