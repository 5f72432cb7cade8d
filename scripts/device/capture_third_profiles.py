#!/usr/bin/env python3
"""Three more real GPU profiles of XLA programs, as a TensorBoard logdir.

    python3 scripts/device/capture_third_profiles.py LOGDIR   (keras from the carried .whl/)

* keras_jax_spe: Keras 3 on JAX, a CNN in mixed precision (`mixed_float16`) fitted with
  `steps_per_execution=2` (Keras runs two train steps in one compiled program, a loop);
  batches 3-5 each in a `StepTraceAnnotation("train", step_num=n)` set by a callback.
* equinox_mlp: an Equinox MLP (modules name no scope in JAX's name stack), optax Adam,
  a jitted (`eqx.filter_jit`) train step; steps 1-3.
* jax_remat_policy: a plain JAX residual MLP of 6 blocks, each under
  `jax.checkpoint(policy=checkpoint_dots)` inside `jax.named_scope("block_<i>")`; steps 1-3.

Each run is wrapped: one failing does not stop the others.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback

os.environ["KERAS_BACKEND"] = "jax"


def keras_spe(logdir: str) -> None:
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

    model, state, loss = train_step(model, state, x, y)
    jax.block_until_ready(loss)
    jax.profiler.start_trace(os.path.join(logdir, "equinox_mlp"))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            model, state, loss = train_step(model, state, x, y)
            jax.block_until_ready(loss)
    jax.profiler.stop_trace()
    print(f"equinox_mlp: loss {float(loss):.4f}", flush=True)
    del jnp


def remat_policy(logdir: str) -> None:
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

    params, state, loss = train_step(params, state, x, y)
    jax.block_until_ready(loss)
    jax.profiler.start_trace(os.path.join(logdir, "jax_remat_policy"))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            params, state, loss = train_step(params, state, x, y)
            jax.block_until_ready(loss)
    jax.profiler.stop_trace()
    print(f"jax_remat_policy: loss {float(loss):.4f}", flush=True)
    del jnp


def main() -> int:
    logdir = sys.argv[1]
    failed = 0
    for run in (keras_spe, equinox_mlp, remat_policy):
        start = time.time()
        try:
            run(logdir)
        except Exception:  # noqa: BLE001 - report, go on with the next run
            traceback.print_exc()
            failed += 1
            try:
                import jax
                jax.profiler.stop_trace()
            except Exception:  # noqa: BLE001 - none was running
                pass
        print(f"{run.__name__}: {time.time() - start:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
