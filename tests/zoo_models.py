"""Small real models unlike the suite's U-Net, for tests/test_model_zoo.py.

Each builder makes a ``tf.compat.v1`` graph in its own ``tf.Graph`` and returns
``(models.Model, info)``: the Model is what ``models.write_traced_run`` traces
(it accepts a Model as its ``model``), ``info`` what the tests need to know
about the model from TensorFlow itself (variables, slots, shapes), computed
here rather than read back from the engine. TensorFlow is imported by the
caller (through ``demo_logs/models.py``) before these run.
"""

from __future__ import annotations

import contextlib

import numpy as np

CONVBN_BATCH = 4
LSTM_BATCH, LSTM_STEPS, LSTM_FEATURES, LSTM_UNITS, DECODER_STEPS = 8, 12, 16, 32, 5
MULTI_BATCH, MULTI_IN, MULTI_WIDTH, MULTI_SPLITS, MULTI_UNSTACK = 64, 256, 1024, 32, 16
# A small vocabulary keeps the sparse update's rows (one per distinct id) small, so that the step's
# peak is where the first layer's weight gradient reads the gathered rows: they are held there.
EMB_BATCH, EMB_IDS, EMB_VOCAB, EMB_DIM, EMB_HIDDEN, EMB_OUT = 64, 16, 50, 32, 128, 8


def _tf():
    import models  # noqa: F401 - pins oneDNN before TensorFlow loads
    import tensorflow as tf

    return tf


def _nbytes(tensor_or_variable) -> int:
    shape = tensor_or_variable.shape
    return int(shape.num_elements()) * tensor_or_variable.dtype.base_dtype.size


def build_convbn(batch=CONVBN_BATCH, size=32, seed=0):
    """Three conv blocks (conv, fused BatchNorm with moving-average updates, relu, max pool,
    dropout) and a dense head, softmax cross entropy, MomentumOptimizer."""
    import models

    tf = _tf()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        images = tf1.placeholder(tf.float32, (batch, size, size, 3), name="images")
        labels = tf1.placeholder(tf.int32, (batch,), name="labels")
        h, channels_in = images, 3
        for i, channels in enumerate((16, 32, 32)):
            with tf1.variable_scope("block%d" % (i + 1)):
                kernel = tf1.get_variable("kernel", (3, 3, channels_in, channels))
                h = tf.nn.conv2d(h, kernel, 1, "SAME")
                gamma = tf1.get_variable("gamma", (channels,), initializer=tf1.ones_initializer())
                beta = tf1.get_variable("beta", (channels,), initializer=tf1.zeros_initializer())
                mean = tf1.get_variable("moving_mean", (channels,), initializer=tf1.zeros_initializer(),
                                        trainable=False)
                variance = tf1.get_variable("moving_variance", (channels,), initializer=tf1.ones_initializer(),
                                            trainable=False)
                normed, batch_mean, batch_var = tf1.nn.fused_batch_norm(h, gamma, beta, is_training=True)
                for update in (tf1.assign_sub(mean, 0.01 * (mean - batch_mean)),
                               tf1.assign_sub(variance, 0.01 * (variance - batch_var))):
                    tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, update)
                h = tf.nn.max_pool2d(tf.nn.relu(normed), 2, 2, "VALID")
                h = tf.nn.dropout(h, rate=0.3, seed=seed + i)
                channels_in = channels
        with tf1.variable_scope("head"):
            side = size // 8
            flat = tf.reshape(h, (batch, side * side * channels_in))
            weights = tf1.get_variable("dense_w", (side * side * channels_in, 10))
            bias = tf1.get_variable("dense_b", (10,))
            logits = tf.matmul(flat, weights) + bias
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        optimizer = tf1.train.MomentumOptimizer(0.01, 0.9)
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train_step = optimizer.minimize(loss)
        slots = [optimizer.get_slot(v, "momentum") for v in tf1.trainable_variables()]
        slot_names = {s.op.name for s in slots}
        parameters = [v for v in tf1.global_variables() if v.op.name not in slot_names]
        moving = [v.op.name for v in parameters if v not in tf1.trainable_variables()]

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {images: rng.rand(batch, size, size, 3).astype(np.float32),
                labels: rng.randint(0, 10, batch).astype(np.int32)}

    info = {  # Keras' count: every variable, the BatchNorm's moving statistics included; not the slots
        "param_count": sum(int(v.shape.num_elements()) for v in parameters),
        "param_bytes": sum(_nbytes(v) for v in parameters),
        "slot_bytes": sum(_nbytes(s) for s in slots),
        "moving_stats": sorted(moving),
    }
    return models._finish("convbn", graph, loss, train_step, feeds), info


class _HandWrittenLSTM:
    """An LSTM cell for dynamic_rnn (Keras 3 has no LSTMCell that tf.compat.v1 can use)."""

    def __init__(self, units):
        self.units = units

    @property
    def state_size(self):
        return (self.units, self.units)

    @property
    def output_size(self):
        return self.units

    def zero_state(self, batch, dtype):
        tf = _tf()
        return tf.zeros((batch, self.units), dtype), tf.zeros((batch, self.units), dtype)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        return self.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        tf = _tf()
        tf1 = tf.compat.v1
        c, h = state
        with tf1.variable_scope("lstm_cell", reuse=tf1.AUTO_REUSE):
            kernel = tf1.get_variable("kernel", (inputs.shape[-1] + self.units, 4 * self.units))
            bias = tf1.get_variable("bias", (4 * self.units,), initializer=tf1.zeros_initializer())
        z = tf.matmul(tf.concat([inputs, h], 1), kernel) + bias
        i, f, g, o = tf.split(z, 4, axis=1)
        c2 = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h2 = tf.sigmoid(o) * tf.tanh(c2)
        return h2, (c2, h2)


def build_lstm(batch=LSTM_BATCH, size=LSTM_STEPS, seed=0):
    """An LSTM encoder (`encoder/rnn/while/...`, tf.compat.v1.nn.dynamic_rnn) and a decoder written
    as a tf.while_loop writing a TensorArray (`decoder/while/...`), squared error, RMSProp."""
    import models

    tf = _tf()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        seq = tf1.placeholder(tf.float32, (batch, size, LSTM_FEATURES), name="seq")
        target = tf1.placeholder(tf.float32, (batch, 1), name="target")
        with tf1.variable_scope("encoder"):
            _, (_, h) = tf1.nn.dynamic_rnn(_HandWrittenLSTM(LSTM_UNITS), seq, dtype=tf.float32)
        with tf1.variable_scope("decoder"):
            w_dec = tf1.get_variable("w_dec", (LSTM_UNITS, LSTM_UNITS))

            def body(i, state, outputs):
                state = tf.tanh(tf.matmul(state, w_dec))
                return i + 1, state, outputs.write(i, state)

            _, final, outputs = tf.while_loop(lambda i, s, a: i < DECODER_STEPS, body,
                                              (tf.constant(0), h, tf.TensorArray(tf.float32, size=DECODER_STEPS)))
            stacked = outputs.stack()
        with tf1.variable_scope("head"):
            w_out = tf1.get_variable("w_out", (LSTM_UNITS, 1))
            prediction = tf.matmul(final + tf.reduce_mean(stacked, 0), w_out)
        loss = tf.reduce_mean(tf.square(prediction - target))
        train_step = tf1.train.RMSPropOptimizer(0.001).minimize(loss)

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {seq: rng.rand(batch, size, LSTM_FEATURES).astype(np.float32),
                target: rng.rand(batch, 1).astype(np.float32)}

    return models._finish("lstm", graph, loss, train_step, feeds), {}


def build_multi(batch=MULTI_BATCH, size=MULTI_IN, seed=0):
    """Many-output ops: a tf.split into 32, tf.identity_n over 8 of them, tf.unstack into 16, and a
    tf.cond whose branch follows the step (odd steps take the true branch); SGD."""
    import models

    tf = _tf()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(seed)
        x = tf1.placeholder(tf.float32, (batch, size), name="x")
        flag = tf1.placeholder(tf.bool, (), name="flag")
        with tf.name_scope("splitter"):
            w_split = tf1.get_variable("w_split", (size, MULTI_WIDTH))
            wide = tf.matmul(x, w_split)
            parts = tf.split(wide, MULTI_SPLITS, axis=1)
            parts = [tf.nn.relu(p) * float(i + 1) for i, p in enumerate(parts)]
            passed = tf.identity_n(parts[:8])
            merged = tf.add_n(list(passed) + parts[8:])
        with tf.name_scope("unstacker"):
            rows = tf.unstack(tf.reshape(merged, (batch, MULTI_UNSTACK, -1)), axis=1)
            stacked = tf.stack([tf.reduce_sum(r, 1) for r in rows], 1)
        with tf.name_scope("brancher"):
            w_branch = tf1.get_variable("w_branch", (MULTI_UNSTACK, 64))
            out = tf.cond(flag, lambda: tf.matmul(stacked, w_branch) * 2.0,
                          lambda: tf.tanh(tf.matmul(stacked, w_branch)))
        loss = tf.reduce_mean(tf.square(out))
        train_step = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {x: rng.rand(batch, size).astype(np.float32), flag: bool(step % 2)}

    many = ("Split", "Unpack", "IdentityN")
    info = {"split_slice_bytes": _nbytes(parts[0]), "identity_n_bytes": sum(_nbytes(p) for p in passed),
            # op type -> (ops in the graph, the bytes of all their outputs), gradients' ops included
            "graph_outputs": {op: (len([o for o in graph.get_operations() if o.type == op]),
                                   sum(_nbytes(t) for o in graph.get_operations() if o.type == op for t in o.outputs))
                              for op in many}}
    return models._finish("multi", graph, loss, train_step, feeds), info


@contextlib.contextmanager
def _seeded_graph(seed: int):
    """(tf, tf.compat.v1, the graph) of a model being built, seeded."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        yield tf, tf.compat.v1, graph


@contextlib.contextmanager
def _embedding_graph(batch: int, size: int, seed: int):
    """(tf, tf.compat.v1, the graph, ids, targets) of an embedding model being built, seeded."""
    with _seeded_graph(seed) as (tf, tf1, graph):
        ids = tf1.placeholder(tf.int32, (batch, size), name="ids")
        y = tf1.placeholder(tf.float32, (batch, EMB_OUT), name="y")
        yield tf, tf1, graph, ids, y


def _id_feeds(ids, y, vocab: int, seed: int):
    """Feeds of an embedding model: random ids below `vocab`, random targets, new ones each step."""
    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {ids: rng.randint(0, vocab, ids.shape.as_list()).astype(np.int32),
                y: rng.rand(*y.shape.as_list()).astype(np.float32)}
    return feeds


def _trained_info(trainable, slots) -> dict:
    """What TensorFlow says of a model's trainable variables and their optimizer slots."""
    slots = [s for s in slots if s is not None]
    return {
        "param_count": sum(int(v.shape.num_elements()) for v in trainable),
        "param_bytes": sum(_nbytes(v) for v in trainable),
        "variables": sorted(v.op.name for v in trainable),
        "slot_names": sorted(s.op.name for s in slots),
        "slot_bytes": sum(_nbytes(s) for s in slots),
        "per_variable": {v.op.name: (int(v.shape.num_elements()), _nbytes(v)) for v in trainable},
    }


def build_noscope(batch=EMB_BATCH, size=EMB_IDS, seed=0):
    """No name scopes: the variables and the model's ops sit at the graph's root. An embedding
    lookup on a resource variable (ResourceGather, a sparse gradient), a dense layer, and
    `AdagradOptimizer(0.1, name="adagrad")` (lower case, so its slots are `<var>/adagrad`)."""
    import models

    with _embedding_graph(batch, size, seed) as (tf, tf1, graph, ids, y):
        embedding = tf1.get_variable("embedding", (EMB_VOCAB, EMB_DIM), use_resource=True)
        w1 = tf1.get_variable("w1", (size * EMB_DIM, EMB_HIDDEN), use_resource=True)
        b1 = tf1.get_variable("b1", (EMB_HIDDEN,), initializer=tf1.zeros_initializer(), use_resource=True)
        w2 = tf1.get_variable("w2", (EMB_HIDDEN, EMB_OUT), use_resource=True)
        rows = tf.nn.embedding_lookup(embedding, ids)
        flat = tf.reshape(rows, (batch, size * EMB_DIM), name="flat")
        hidden = tf.nn.relu(tf1.nn.xw_plus_b(flat, w1, b1, name="hidden"), name="act")
        prediction = tf.matmul(hidden, w2, name="pred")
        loss = tf.reduce_mean(tf.square(prediction - y, name="sq"), name="loss")
        optimizer = tf1.train.AdagradOptimizer(0.1, name="adagrad")
        train_step = optimizer.minimize(loss)
        trainable = tf1.trainable_variables()
        slots = [optimizer.get_slot(v, name) for v in trainable for name in optimizer.get_slot_names()]

    info = {**_trained_info(trainable, slots), "lookup_bytes": _nbytes(rows)}
    return models._finish("noscope", graph, loss, train_step, _id_feeds(ids, y, EMB_VOCAB, seed)), info


def build_scopedadam(batch=EMB_BATCH, size=EMB_IDS, seed=0):
    """`minimize` inside a variable scope of the user's (`train`), with Adam: its slots are
    `train/<var>/Adam` and `train/<var>/Adam_1`, its own variables `train/beta1_power` and
    `train/beta2_power`, its updates `train/Adam/update_<var>/...`. The embedding's gradient is
    sparse, so Adam updates it with assigns and a scatter (no apply op names its slots)."""
    import models

    with _embedding_graph(batch, size, seed) as (tf, tf1, graph, ids, y):
        with tf1.variable_scope("embedding"):
            table = tf1.get_variable("table", (EMB_VOCAB * 40, EMB_DIM), use_resource=True)
        with tf1.variable_scope("dense"):
            kernel = tf1.get_variable("kernel", (EMB_DIM, EMB_OUT), use_resource=True)
        pooled = tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1, name="pooled")
        loss = tf.reduce_mean(tf.square(tf.matmul(pooled, kernel) - y), name="loss")
        with tf1.variable_scope("train"):
            optimizer = tf1.train.AdamOptimizer(0.01)
            train_step = optimizer.minimize(loss)
        trainable = tf1.trainable_variables()
        slots = [optimizer.get_slot(v, name) for v in trainable for name in optimizer.get_slot_names()]
        own = list(optimizer._get_beta_accumulators())  # beta1_power, beta2_power

    info = _trained_info(trainable, slots)
    info["own_names"] = sorted(v.op.name for v in own)
    info["slot_bytes"] += sum(_nbytes(v) for v in own)  # optimizer state: the slots and Adam's own variables
    return models._finish("scopedadam", graph, loss, train_step, _id_feeds(ids, y, EMB_VOCAB * 40, seed)), info


def build_accumulate(batch=MULTI_BATCH, size=MULTI_IN, seed=0):
    """Gradients accumulated into non-trainable variables (`tf.Variable(zeros, trainable=False)`,
    named `Variable`, `Variable_1`, ...) by `assign_add`, then applied by Adam from them: the step
    runs the accumulation and the update together."""
    import models

    with _seeded_graph(seed) as (tf, tf1, graph):
        x = tf1.placeholder(tf.float32, (batch, size), name="x")
        y = tf1.placeholder(tf.float32, (batch, 10), name="y")
        with tf1.variable_scope("net"):
            h = tf.nn.relu(tf.matmul(x, tf1.get_variable("dense1/kernel", (size, 64), use_resource=True)), name="relu")
            logits = tf.matmul(h, tf1.get_variable("dense2/kernel", (64, 10), use_resource=True), name="logits")
        loss = tf.reduce_mean(tf.square(logits - y), name="loss")
        optimizer = tf1.train.AdamOptimizer(0.01)
        trainable = tf1.trainable_variables()
        accumulators = [tf.Variable(tf.zeros(v.shape), trainable=False) for v in trainable]
        pairs = optimizer.compute_gradients(loss, trainable)
        added = [acc.assign_add(grad) for acc, (grad, _) in zip(accumulators, pairs)]
        with tf.control_dependencies(added):
            train_step = optimizer.apply_gradients([(acc / 2.0, v) for acc, (_, v) in zip(accumulators, pairs)])
        slots = [optimizer.get_slot(v, name) for v in trainable for name in optimizer.get_slot_names()]
        own = list(optimizer._get_beta_accumulators())

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {x: rng.rand(batch, size).astype(np.float32), y: rng.rand(batch, 10).astype(np.float32)}

    info = _trained_info(trainable, slots)
    info["accumulators"] = sorted(a.op.name for a in accumulators)
    # Optimizer state: the slots, Adam's own variables and the accumulated gradients.
    info["slot_bytes"] += sum(_nbytes(v) for v in own) + sum(_nbytes(a) for a in accumulators)
    return models._finish("accumulate", graph, loss, train_step, feeds), info


# name -> (builder, traced steps); every run also gets the run graph (add_graph).
ZOO = {
    "convbn": (build_convbn, (1,)),
    "lstm": (build_lstm, (1,)),
    "multi": (build_multi, (1, 2)),
    "noscope": (build_noscope, (1,)),
    "scopedadam": (build_scopedadam, (1,)),
    "accumulate": (build_accumulate, (1,)),
}


def write_zoo(root) -> dict:
    """Trace every model of ZOO into root/<name> (one untraced warm-up step first); returns
    name -> info, with the GraphDef's bytes under "graph_def"."""
    import models

    infos = {}
    for name, (builder, steps) in ZOO.items():
        model, info = builder()
        models.write_traced_run(str(root / name), model, None, None, steps=steps)
        info["graph_def"] = model.graph.as_graph_def().SerializeToString()
        info["steps"] = steps
        infos[name] = info
    return infos
