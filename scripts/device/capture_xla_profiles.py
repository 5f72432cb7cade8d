#!/usr/bin/env python3
"""Real GPU profiles of XLA programs (Flax, Keras 3 on JAX, Equinox, plain JAX) as a TensorBoard logdir.

    python3 scripts/device/capture_xla_profiles.py LOGDIR [--runs flax_lm,flax_lm_scan,...]

Keras comes from the wheels carried in .whl/ (the GPU machine has jax, flax, optax and equinox).
Each run's profile lands in LOGDIR/<run>/plugins/profile/<session>/<host>.xplane.pb: a warm-up
step outside the trace compiles the program, then steps 1-3 each in a
`jax.profiler.StepTraceAnnotation("train", step_num=n)` (keras_jax_spe: batches 3-7, marked by a
callback). What the runs are: tests/data/xla_gpu/README.md. What XLA places in each program's
blocks is read from the HLO the profile keeps (tb_memory_plugin/sources/xplane/hlo.py). Each run
is wrapped: one failing does not stop the others.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback

os.environ["KERAS_BACKEND"] = "jax"


def profile_steps(logdir: str, run: str, step) -> None:
    """Steps 1-3 of `step` (one training step; returns what to wait for), each marked, in one trace."""
    import jax

    jax.profiler.start_trace(os.path.join(logdir, run))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            jax.block_until_ready(step())
    jax.profiler.stop_trace()


def profile_training(logdir: str, run: str, train_step, state: list, *batch) -> None:
    """A warm-up step outside the trace (it compiles), then `profile_steps`, of
    `train_step(*state, *batch) -> (*new state, loss)`."""
    import jax

    def one_step():
        *state[:], loss = train_step(*state, *batch)
        return loss

    jax.block_until_ready(one_step())
    profile_steps(logdir, run, one_step)


# -- Flax language model: blocks unrolled (flax_lm) or under nn.scan(nn.remat(...)) (flax_lm_scan) ----

def build(scan: bool, layers: int = 4, d: int = 256):
    import flax.linen as nn

    class Block(nn.Module):
        d: int
        heads: int

        @nn.compact
        def __call__(self, x):
            h = nn.LayerNorm(name="ln1")(x)
            h = nn.MultiHeadDotProductAttention(num_heads=self.heads, name="attn")(h, h)
            x = x + h
            h = nn.LayerNorm(name="ln2")(x)
            h = nn.Dense(4 * self.d, name="mlp_in")(h)
            h = nn.gelu(h)
            return x + nn.Dense(self.d, name="mlp_out")(h)

    class Scanned(nn.Module):
        d: int
        heads: int

        @nn.compact
        def __call__(self, x, _):
            return Block(self.d, self.heads, name="block")(x), None

    class LM(nn.Module):
        vocab: int = 1000
        d: int = 256
        layers: int = 4

        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(self.vocab, self.d, name="embed")(tokens)
            if scan:
                blocks = nn.scan(nn.remat(Scanned), variable_axes={"params": 0}, split_rngs={"params": True},
                                 length=self.layers)
                x, _ = blocks(self.d, 4, name="blocks")(x, None)
            else:
                for i in range(self.layers):
                    x = Block(self.d, 4, name=f"block_{i}")(x)
            x = nn.LayerNorm(name="ln_f")(x)
            return nn.Dense(self.vocab, name="head")(x)

    return LM(d=d, layers=layers)



def flax_lm(logdir: str, run: str = "flax_lm", scan: bool = False, layers: int = 4, d: int = 256) -> None:
    import jax
    import jax.numpy as jnp
    import optax

    model = build(scan, layers, d)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (16, 129), 0, 1000)
    params = model.init(jax.random.PRNGKey(0), tokens[:, :-1])["params"]
    tx = optax.adamw(1e-3)
    opt_state = tx.init(params)

    def loss_fn(p, batch):
        logits = model.apply({"params": p}, batch[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    def train_step(p, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(p, batch)
        updates, state = tx.update(grads, state, p)
        return optax.apply_updates(p, updates), state, loss

    state = [params, opt_state]
    profile_training(logdir, run, jax.jit(train_step, donate_argnums=(0, 1) if scan else ()), state, tokens)
    print(f"{run}: on {jax.devices()[0]}, params {sum(x.size for x in jax.tree_util.tree_leaves(state[0])):,}",
          flush=True)
    del jnp


def flax_lm_scan(logdir: str) -> None:
    flax_lm(logdir, "flax_lm_scan", scan=True)


def flax_lm_deep(logdir: str) -> None:
    """The language model 32 blocks deep and 512 wide, written out: a big program (every block's
    forward, backward and AdamW update its own instructions) for the reader's speed on real HLO."""
    flax_lm(logdir, "flax_lm_deep", layers=32, d=512)


# -- Keras 3 on JAX ---------------------------------------------------------------------------------

def keras_jax_transformer(logdir: str) -> None:
    import jax
    import numpy as np
    import keras
    from keras import layers

    tokens = keras.Input((64,), dtype="int32", name="tokens")
    x = layers.Embedding(2000, 128, name="embed")(tokens)
    for i in range(2):
        h = layers.LayerNormalization(name=f"ln_{i}a")(x)
        h = layers.MultiHeadAttention(4, 32, name=f"mha_{i}")(h, h)
        x = layers.Add(name=f"res_{i}a")([x, h])
        h = layers.LayerNormalization(name=f"ln_{i}b")(x)
        ffn = keras.Sequential([layers.Dense(512, activation="gelu", name="up"), layers.Dense(128, name="down")],
                               name=f"ffn_{i}")
        x = layers.Add(name=f"res_{i}b")([x, ffn(h)])
    x = layers.GlobalAveragePooling1D(name="pool")(x)
    model = keras.Model(tokens, layers.Dense(10, name="head")(x), name="encoder")
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x_batch = np.random.randint(0, 2000, (32, 64)).astype("int32")
    y_batch = np.random.randint(0, 10, (32,))
    model.train_on_batch(x_batch, y_batch)  # compiled outside the profile
    profile_steps(logdir, "keras_jax_transformer", lambda: model.train_on_batch(x_batch, y_batch))
    print(f"keras_jax_transformer: {model.count_params():,} parameters", flush=True)


def keras_jax_spe(logdir: str) -> None:
    import jax
    import numpy as np
    import keras
    from keras import layers

    keras.mixed_precision.set_global_policy("mixed_float16")
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        layers.Conv2D(32, 3, activation="relu", name="conv1"),
        layers.Conv2D(64, 3, activation="relu", name="conv2"),
        layers.MaxPooling2D(name="pool"),
        layers.Flatten(name="flat"),
        layers.Dense(128, activation="relu", name="fc"),
        layers.Dense(10, dtype="float32", name="logits"),
    ], name="spe_cnn")
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=2)

    class Marks(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.stack = contextlib.ExitStack()
            self.tracing = False

        def on_train_batch_begin(self, batch, logs=None):
            if batch == 2:
                jax.profiler.start_trace(os.path.join(logdir, "keras_jax_spe"))
                self.tracing = True
            if self.tracing:
                self.stack.enter_context(jax.profiler.StepTraceAnnotation("train", step_num=batch + 1))

        def on_train_batch_end(self, batch, logs=None):
            if self.tracing:
                self.stack.close()
                if batch >= 6:
                    jax.profiler.stop_trace()
                    self.tracing = False

    x = np.random.rand(32 * 12, 32, 32, 3).astype("float32")
    y = np.random.randint(0, 10, 32 * 12)
    model.fit(x, y, batch_size=32, epochs=1, callbacks=[Marks()], verbose=0)
    keras.mixed_precision.set_global_policy("float32")
    print("keras_jax_spe: done", flush=True)



# -- Flax CNN, Equinox, plain JAX ---------------------------------------------------------------------

def flax_cnn_bn(logdir: str) -> None:
    import jax
    import jax.numpy as jnp
    import flax.linen as nn
    import optax

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            for i, width in enumerate((32, 64)):
                x = nn.Conv(width, (3, 3), name=f"conv_{i}")(x)
                x = nn.BatchNorm(use_running_average=not train, name=f"bn_{i}")(x)
                x = nn.relu(x)
                x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            return nn.Dense(10, name="head")(x)

    model = CNN()
    images = jax.random.normal(jax.random.PRNGKey(1), (64, 32, 32, 3))
    labels = jax.random.randint(jax.random.PRNGKey(2), (64,), 0, 10)
    variables = model.init(jax.random.PRNGKey(0), images, train=False)
    params, stats = variables["params"], variables["batch_stats"]
    tx = optax.sgd(0.01, momentum=0.9)
    opt_state = tx.init(params)

    def loss_fn(p, s):
        logits, updates = model.apply({"params": p, "batch_stats": s}, images, train=True, mutable=["batch_stats"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), updates["batch_stats"]

    @jax.jit
    def train_step(p, s, state):
        (loss, s), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, s)
        updates, state = tx.update(grads, state, p)
        return optax.apply_updates(p, updates), s, state, loss

    profile_training(logdir, "flax_cnn_bn", train_step, [params, stats, opt_state])
    del jnp


def equinox_mlp(logdir: str) -> None:
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    key = jax.random.PRNGKey(0)
    model = eqx.nn.MLP(784, 10, width_size=1024, depth=3, key=key)
    optimizer = optax.adam(1e-3)
    state = optimizer.init(eqx.filter(model, eqx.is_array))
    x = jax.random.normal(jax.random.PRNGKey(1), (128, 784))
    y = jax.random.randint(jax.random.PRNGKey(2), (128,), 0, 10)

    def loss_fn(m, xb, yb):
        logits = jax.vmap(m)(xb)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    @eqx.filter_jit
    def train_step(m, s, xb, yb):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(m, xb, yb)
        updates, s = optimizer.update(grads, s, eqx.filter(m, eqx.is_array))
        return eqx.apply_updates(m, updates), s, loss

    profile_training(logdir, "equinox_mlp", train_step, [model, state], x, y)
    del jnp


def jax_remat_policy(logdir: str) -> None:
    import jax
    import jax.numpy as jnp
    import optax

    width, blocks = 1024, 6
    keys = jax.random.split(jax.random.PRNGKey(0), blocks + 1)
    params = {f"block_{i}": {"w1": jax.random.normal(keys[i], (width, 4 * width)) * 0.02,
                             "w2": jax.random.normal(keys[i], (4 * width, width)) * 0.02} for i in range(blocks)}
    params["head"] = jax.random.normal(keys[-1], (width, 10)) * 0.02

    def block(p, h):
        return h + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def forward(p, x):
        h = x
        for i in range(blocks):
            with jax.named_scope(f"block_{i}"):
                h = jax.checkpoint(block, policy=jax.checkpoint_policies.checkpoint_dots)(p[f"block_{i}"], h)
        return h @ p["head"]

    optimizer = optax.sgd(1e-3)
    state = optimizer.init(params)
    x = jax.random.normal(jax.random.PRNGKey(1), (256, width))
    y = jax.random.randint(jax.random.PRNGKey(2), (256,), 0, 10)

    @jax.jit
    def train_step(p, s, xb, yb):
        loss, grads = jax.value_and_grad(
            lambda q: optax.softmax_cross_entropy_with_integer_labels(forward(q, xb), yb).mean())(p)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    profile_training(logdir, "jax_remat_policy", train_step, [params, state], x, y)
    del jnp


RUNS = {run.__name__: run for run in (flax_lm, flax_lm_scan, flax_lm_deep, keras_jax_transformer, keras_jax_spe,
                                       flax_cnn_bn, equinox_mlp, jax_remat_policy)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated, of: " + ", ".join(RUNS))
    args = parser.parse_args()
    failed = 0
    for name in args.runs.split(","):
        start = time.time()
        try:
            RUNS[name](args.logdir)
        except Exception:  # noqa: BLE001 - report, go on with the next run
            traceback.print_exc()
            failed += 1
            with contextlib.suppress(Exception):  # a run that failed inside its trace leaves it open
                import jax
                jax.profiler.stop_trace()
        print(f"{name}: {time.time() - start:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
