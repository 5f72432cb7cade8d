#!/usr/bin/env python3
"""Two more real GPU profiles, from Keras 3 on JAX and Flax, as a TensorBoard logdir.

    KERAS_BACKEND=jax python3 scripts/device/capture_more_profiles.py LOGDIR   (keras from the carried .whl/)

* keras_jax_transformer: Keras 3 on the JAX backend, a functional model (embedding, two
  encoder blocks of MultiHeadAttention, LayerNormalization and a nested Sequential MLP named
  `ffn_<i>`, a pooled head), Adam; `train_on_batch` steps 1-3 each in a
  `jax.profiler.StepTraceAnnotation("train", step_num=n)`, after a warm-up batch.
* flax_cnn_bn: a Flax CNN with BatchNorm (its batch statistics a mutable collection), optax
  SGD with momentum, a jitted train step; steps 1-3 likewise.

Each run is wrapped: one failing does not stop the other.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

os.environ["KERAS_BACKEND"] = "jax"


def keras_transformer(logdir: str) -> None:
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
    jax.profiler.start_trace(os.path.join(logdir, "keras_jax_transformer"))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            loss = model.train_on_batch(x_batch, y_batch)
    jax.profiler.stop_trace()
    print(f"keras_jax_transformer: loss {float(loss):.4f}, {model.count_params():,} parameters", flush=True)


def flax_cnn(logdir: str) -> None:
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

    params, stats, opt_state, loss = train_step(params, stats, opt_state)
    jax.block_until_ready(loss)
    jax.profiler.start_trace(os.path.join(logdir, "flax_cnn_bn"))
    for n in range(1, 4):
        with jax.profiler.StepTraceAnnotation("train", step_num=n):
            params, stats, opt_state, loss = train_step(params, stats, opt_state)
            jax.block_until_ready(loss)
    jax.profiler.stop_trace()
    print(f"flax_cnn_bn: loss {float(loss):.4f}", flush=True)
    del jnp


def main() -> int:
    logdir = sys.argv[1]
    failed = 0
    for run in (keras_transformer, flax_cnn):
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
