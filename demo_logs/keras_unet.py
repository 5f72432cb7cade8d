"""A small Keras 3 U-Net trained with `model.fit` and profiled by the TensorBoard callback.

    python demo_logs/keras_unet.py LOGDIR [--size 32] [--batch 4] [--steps 6] [--profile 3,4]

Writes what TF2 users get: `LOGDIR/train/events...v2` (with the `keras` graph
and an empty `batch_N` RunMetadata) and the profile
`LOGDIR/train/plugins/profile/<session>/<host>.xplane.pb`.

The profiler records CPU memory only with the BFC allocator, which TensorFlow
picks when it starts: `TF_CPU_ALLOCATOR_USE_BFC=true` must be in the
environment before TensorFlow is imported. `profile()` therefore runs this
file in a fresh python process with that environment.
"""

import argparse
import os
import subprocess
import sys

BFC_ENV = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}


def build(size, seed=0, depth=2, width=8):
    """U-Net: enc_0..enc_{depth-1} (two convs each, max-pool), mid, dec_* (upsample, concat, conv), head."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((size, size, 3), name="image")
    x = inputs
    skips = []
    for level in range(depth):
        channels = width * 2 ** level
        x = layers.Conv2D(channels, 3, padding="same", activation="relu", name=f"enc_{level}")(x)
        x = layers.Conv2D(channels, 3, padding="same", activation="relu", name=f"enc_{level}_b")(x)
        skips.append(x)
        x = layers.MaxPooling2D(name=f"pool_{level}")(x)
    x = layers.Conv2D(width * 2 ** depth, 3, padding="same", activation="relu", name="mid")(x)
    for level in reversed(range(depth)):
        x = layers.UpSampling2D(name=f"up_{level}")(x)
        x = layers.Concatenate(name=f"skip_{level}")([x, skips[level]])
        x = layers.Conv2D(width * 2 ** level, 3, padding="same", activation="relu", name=f"dec_{level}")(x)
    outputs = layers.Conv2D(2, 1, name="head")(x)
    return keras.Model(inputs, outputs, name="small_unet")


def train(logdir, size=32, batch=4, steps=6, profile=(3, 4), depth=2, width=8, seed=0):
    """`model.fit` with the TensorBoard callback profiling batches `profile` (in this process)."""
    import numpy as np
    import tensorflow as tf

    model = build(size, seed, depth, width)
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch * steps, size, size, 3)).astype("float32")
    y = rng.standard_normal((batch * steps, size, size, 2)).astype("float32")
    callback = tf.keras.callbacks.TensorBoard(logdir, profile_batch=profile)
    model.fit(x, y, batch_size=batch, epochs=1, callbacks=[callback], verbose=0)


def profile(logdir, size=32, batch=4, steps=6, profile_batch=(3, 4), depth=2, width=8, seed=0, timeout=600):
    """Run `train` in a fresh process with the BFC allocator on; returns the .xplane.pb paths."""
    env = dict(os.environ, **BFC_ENV)
    subprocess.run(
        [sys.executable, os.path.abspath(__file__), logdir, "--size", str(size), "--batch", str(batch),
         "--steps", str(steps), "--profile", "%d,%d" % tuple(profile_batch), "--depth", str(depth),
         "--width", str(width), "--seed", str(seed)],
        env=env, check=True, timeout=timeout)
    found = []
    for root, _, files in os.walk(logdir):
        found.extend(os.path.join(root, f) for f in files if f.endswith(".xplane.pb"))
    return sorted(found)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--profile", default="3,4")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "").lower() not in ("1", "true"):
        print("note: TF_CPU_ALLOCATOR_USE_BFC is not set: the CPU profile will hold no memory events",
              file=sys.stderr)
    first, last = (int(v) for v in args.profile.split(","))
    train(args.logdir, args.size, args.batch, args.steps, (first, last), args.depth, args.width, args.seed)


if __name__ == "__main__":
    main()
