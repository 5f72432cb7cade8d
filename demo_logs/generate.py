"""Regenerate the demo logs committed next to this file.

    python demo_logs/generate.py [--out demo_logs] [--runs unet_b2,bigconv]

Runs real TensorFlow ``tf.compat.v1`` training steps traced with FULL_TRACE
and writes one TensorBoard run per model (graph + traced steps ``step_1`` ..
``step_3``, Adam optimizer), at a small resolution so the logs stay a few MB:

    unet_b2, unet_b4        flow-estimation U-Net (shared_model/unet_00..11), batch 2 / 4
    resnet9_b2, resnet9_b4  9-block residual image network, batch 2 / 4
    bigconv                 one conv2d with a 31x31 filter on a 32x32 image (im2col case)
    constdata               an MLP whose 1.25 MiB training set is a tf.constant in the graph
                            (finding graph_constants)
    growth                  an MLP whose step also enqueues its hidden activations into a FIFOQueue
                            nothing dequeues: 128 KiB left behind every step (finding step_growth)
    keras_unet              a Keras 3 U-Net trained with model.fit and the TensorBoard callback
                            (profile_batch=(3, 4)): the TF2 way, memory in the profile
                            (keras_unet/train/plugins/profile/<session>/<host>.xplane.pb)

Each run is traced in its own python process, because oneDNN is fixed when
TensorFlow loads: the U-Net and ResNet runs use oneDNN (allocator "mklcpu",
which reports allocator_bytes_in_use); bigconv runs without it (allocator
"cpu"), because only Eigen's Conv2DBackpropFilter goes through im2col, whose
scratch (~34 MiB here, against a 92 KiB filter gradient) shows up as the op's
memory_stats.temp_memory_size. oneDNN's kernels use no im2col.

keras_unet runs with TF_CPU_ALLOCATOR_USE_BFC=true (see keras_unet.py): without
the BFC allocator a CPU profile holds no memory events.

Old event files in each run directory are deleted first (keras_unet: the whole
directory). Seeds are fixed;
timings and pointers in the traces still differ from run to run.

Then: tensorboard --logdir demo_logs
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# run name -> (model, batch, size, oneDNN)
RUNS = {
    "unet_b2": ("unet", 2, 64, True),
    "unet_b4": ("unet", 4, 64, True),
    "resnet9_b2": ("resnet9", 2, 64, True),
    "resnet9_b4": ("resnet9", 4, 64, True),
    "bigconv": ("bigconv", 1, 32, False),  # kernel = size - 1 = 31
    "constdata": ("constdata", 32, 2048, True),  # size: rows of the embedded dataset
    "growth": ("growth", 32, 64, True),  # size: input features
}
STEPS = (1, 2, 3)
KERAS_RUNS = ("keras_unet",)  # written by keras_unet.py (model.fit + profiler), not models.py


def write_one(name, out):
    """In this process (TensorFlow not yet loaded, env already set by the parent)."""
    sys.path.insert(0, HERE)
    import models

    model, batch, size, _ = RUNS[name]
    logdir = os.path.join(out, name)
    os.makedirs(logdir, exist_ok=True)
    models.clear_event_files(logdir)
    t0 = time.time()
    tags = models.write_traced_run(logdir, model, batch, size, steps=STEPS, seed=0)
    nbytes = sum(
        os.path.getsize(os.path.join(logdir, f))
        for f in os.listdir(logdir)
        if f.startswith("events.out.tfevents.")
    )
    print(
        "%-11s %-8s batch %d size %dx%d oneDNN %-5s tags %s  %.1f KiB  %.1fs"
        % (name, model, batch, size, size, models.onednn_enabled(), ",".join(tags),
           nbytes / 1024.0, time.time() - t0),
        flush=True,
    )


def write_keras(name, out):
    """A Keras 3 `model.fit` profiled by the TensorBoard callback (in a fresh process, BFC allocator on)."""
    sys.path.insert(0, HERE)
    import keras_unet

    logdir = os.path.join(out, name)
    shutil.rmtree(logdir, ignore_errors=True)
    t0 = time.time()
    paths = keras_unet.profile(logdir)
    print("%-11s keras 3 fit, profile_batch=(3, 4), BFC allocator  %s  %.1f KiB  %.1fs"
          % (name, ", ".join(os.path.relpath(p, out) for p in paths),
             sum(os.path.getsize(p) for p in paths) / 1024.0, time.time() - t0), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="logdir to write runs into (default: next to this file)")
    parser.add_argument("--runs", default=",".join((*RUNS, *KERAS_RUNS)),
                        help="comma-separated subset of: " + ", ".join((*RUNS, *KERAS_RUNS)))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: write this run in-process
    args = parser.parse_args(argv)
    names = [r for r in args.runs.split(",") if r]
    unknown = [r for r in names if r not in RUNS and r not in KERAS_RUNS]
    if unknown:
        parser.error("unknown run(s): %s" % ", ".join(unknown))
    if args.one:
        write_one(args.one, args.out)
        return
    for name in names:
        if name in KERAS_RUNS:
            write_keras(name, args.out)
            continue
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1" if RUNS[name][3] else "0")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--out", args.out, "--one", name],
            env=env,
            check=True,
        )

if __name__ == "__main__":
    main()
