#!/usr/bin/env python3
"""Write small, real JAX profiles (GPU when there is one) as a TensorBoard logdir.

    python3 scripts/device/capture_gpu_profiles.py LOGDIR [--runs keras_jax,jax_mlp]

Runs (each one's profile lands in LOGDIR/<run>/plugins/profile/<session>/<host>.xplane.pb):

* keras_jax: Keras 3 on the JAX backend, a small named CNN (conv/batchnorm/dense) compiled
  with Adam; `model.fit` on random data for 6 batches of 32, batches 2-4 profiled from a
  callback that does what `keras.callbacks.TensorBoard(profile_batch=(3, 5))` does on JAX
  (Keras' own `start_trace`, a `Profiled batch <n>` annotation per batch, `stop_trace`),
  after batch 0 compiled the step.
* jax_mlp: a plain jitted JAX training step (a small MLP, SGD) under `jax.profiler.trace`,
  one `StepTraceAnnotation` per step, after a warm-up step outside the trace.

JAX runs with its defaults (GPU memory preallocation on), as users have it. No TensorFlow
is needed (keras.callbacks.TensorBoard is not used). Each run is wrapped: one failing does
not stop the other; a watchdog ends the process if it would hang. Exit code 0 when every
run wrote a profile, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
import traceback

# Before anything can import keras: the backend is read once, at import.
os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

RUNS = ("keras_jax", "jax_mlp")


class RunTimeout(Exception):
    pass


def _log(message: str) -> None:
    print(f"[capture {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _watchdog(seconds: float) -> None:
    """End the whole process after `seconds`, whatever it is doing (a hung device call included)."""

    def fire() -> None:
        time.sleep(seconds)
        _log(f"WATCHDOG: still running after {seconds:.0f} s; exiting (code 3)")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)

    threading.Thread(target=fire, name="watchdog", daemon=True).start()


class _Alarm:
    """A per-run time limit (SIGALRM: interrupts Python code, not a call blocked in C)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self):
        if self.seconds > 0 and hasattr(signal, "SIGALRM"):
            def handler(signum, frame):
                raise RunTimeout(f"run took longer than {self.seconds} s")
            self._old = signal.signal(signal.SIGALRM, handler)
            signal.alarm(self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds > 0 and hasattr(signal, "SIGALRM"):
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self._old)
        return False


def _stop_trace_if_active(jax) -> None:
    """A run that failed inside its trace leaves the profiler session open: close it, so the
    next run can start its own (its partial profile is written too)."""
    try:
        from jax._src import profiler as _profiler

        active = _profiler._profile_state.profile_session is not None
    except Exception:  # noqa: BLE001 - private API moved: try stopping anyway
        active = True
    if active:
        try:
            jax.profiler.stop_trace()
            _log("stopped a profiler trace the run left open")
        except Exception:  # noqa: BLE001 - none was running
            pass


def _memory_stats(jax) -> dict | None:
    """The default device's allocator figures (GPU: bytes_in_use, peak_bytes_in_use, bytes_limit, ...)."""
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception as exc:  # noqa: BLE001
        return {"error": repr(exc)}
    if not stats:
        return None
    keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved", "largest_alloc_size",
            "num_allocs", "pool_bytes", "peak_pool_bytes")
    return {k: int(stats[k]) for k in keys if k in stats} or {k: stats[k] for k in list(stats)[:10]}


def _profile_files(directory: str) -> list[tuple[str, int]]:
    found = []
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            path = os.path.join(root, name)
            found.append((path, os.path.getsize(path)))
    return sorted(found)


# -- keras_jax -------------------------------------------------------------------------------


def run_keras_jax(run_dir: str, batch_size: int = 32, batches: int = 6, first: int = 2, last: int = 4) -> dict:
    import jax
    import numpy as np

    import keras
    from keras import layers

    _log(f"keras {keras.__version__}, backend {keras.backend.backend()}")
    if keras.backend.backend() != "jax":
        raise RuntimeError(f"Keras picked backend {keras.backend.backend()!r}, not jax (KERAS_BACKEND read too late?)")

    from keras.src.backend.jax import tensorboard as keras_profiler  # what keras.callbacks.TensorBoard calls

    class ProfileBatches(keras.callbacks.Callback):
        """keras.callbacks.TensorBoard(profile_batch=(first + 1, last + 1))'s profiling, step for
        step (that callback also needs TensorFlow, for its summary writer): the trace starts
        at the first profiled batch (counted from 1), each profiled batch is a
        `Profiled batch <n>` annotation (n counted from 0), and the trace stops after the last."""

        def __init__(self, log_dir: str, first: int, last: int) -> None:
            super().__init__()
            self.log_dir, self.first, self.last = log_dir, first, last
            self.tracing = False
            self.context = None
            self.global_batch = 0
            self.profiled: list[int] = []
            self.step_seconds: list[float] = []
            self._t0 = 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.global_batch += 1
            if self.global_batch == self.first + 1 and not self.tracing:
                keras_profiler.start_trace(self.log_dir)
                self.tracing = True
            if self.tracing:
                self.context = keras_profiler.start_batch_trace(batch)
                self._t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if not self.tracing:
                return
            self.step_seconds.append(time.perf_counter() - self._t0)
            if self.context is not None:
                keras_profiler.stop_batch_trace(self.context)
                self.context = None
            self.profiled.append(batch)
            if self.global_batch >= self.last + 1:
                self._stop()

        def on_train_end(self, logs=None):
            self._stop()

        def _stop(self) -> None:
            if self.context is not None:
                keras_profiler.stop_batch_trace(self.context)
                self.context = None
            if self.tracing:
                self.tracing = False
                keras_profiler.stop_trace(True)

    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(28, 28, 1), name="image")
    x = layers.Conv2D(16, 3, padding="same", name="conv1")(inputs)
    x = layers.BatchNormalization(name="bn1")(x)
    x = layers.ReLU(name="relu1")(x)
    x = layers.MaxPooling2D(name="pool1")(x)
    x = layers.Conv2D(32, 3, padding="same", name="conv2")(x)
    x = layers.BatchNormalization(name="bn2")(x)
    x = layers.ReLU(name="relu2")(x)
    x = layers.MaxPooling2D(name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(64, activation="relu", name="dense1")(x)
    outputs = layers.Dense(10, name="logits")(x)
    model = keras.Model(inputs, outputs, name="small_cnn")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    _log(f"small_cnn: {model.count_params():,} parameters, layers "
         + ", ".join(layer.name for layer in model.layers))

    rng = np.random.default_rng(0)
    count = batch_size * batches
    images = rng.standard_normal((count, 28, 28, 1), dtype=np.float32)
    labels = rng.integers(0, 10, size=(count,)).astype(np.int32)
    profiler = ProfileBatches(run_dir, first, last)
    started = time.perf_counter()
    history = model.fit(images, labels, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
                        callbacks=[profiler])
    seconds = time.perf_counter() - started
    loss = history.history.get("loss", [None])[-1]
    if not profiler.profiled:
        raise RuntimeError(f"no batch was profiled (fit ran {batches} batches; profile {first}..{last})")
    return {"profiled_batches": profiler.profiled, "batch_size": batch_size, "batches": batches,
            "profiled_step_ms": [round(s * 1000, 3) for s in profiler.step_seconds],
            "fit_seconds": round(seconds, 2), "loss": None if loss is None else float(loss),
            "params": int(model.count_params())}


# -- jax_mlp ---------------------------------------------------------------------------------


def run_jax_mlp(run_dir: str, batch_size: int = 64, steps: int = 3) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    sizes = (784, 512, 256, 10)
    key = jax.random.key(0)
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (fan_in, fan_out), jnp.float32) * (2.0 / fan_in) ** 0.5,
                       "b": jnp.zeros((fan_out,), jnp.float32)})

    def forward(params, x):
        for i, layer in enumerate(params):
            with jax.named_scope(f"dense_{i}"):
                x = x @ layer["w"] + layer["b"]
                if i < len(params) - 1:
                    x = jax.nn.relu(x)
        return x

    def loss_fn(params, x, y):
        logits = forward(params, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
        return params, loss

    rng = np.random.default_rng(0)

    def batch():
        return (rng.standard_normal((batch_size, sizes[0]), dtype=np.float32),
                rng.integers(0, sizes[-1], size=(batch_size,)).astype(np.int32))

    params, loss = train_step(params, *batch())  # compile outside the trace
    jax.block_until_ready((params, loss))
    losses, step_ms = [], []
    with jax.profiler.trace(run_dir):
        for step in range(1, steps + 1):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                t0 = time.perf_counter()
                x, y = batch()  # host numpy batches, moved to the device inside the step, as users feed them
                params, loss = train_step(params, x, y)
                jax.block_until_ready((params, loss))
                step_ms.append(round((time.perf_counter() - t0) * 1000, 3))
            losses.append(float(loss))
    n_params = sum(int(np.prod(p.shape)) for layer in params for p in layer.values())
    return {"profiled_steps": list(range(1, steps + 1)), "batch_size": batch_size, "sizes": list(sizes),
            "step_ms": step_ms, "losses": losses, "params": n_params}


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", help="TensorBoard logdir to write the runs into")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}")
    parser.add_argument("--run-timeout", type=int, default=120, help="seconds per run (SIGALRM)")
    parser.add_argument("--watchdog", type=float, default=300, help="seconds before the process ends itself")
    parser.add_argument("--summary-json", help="also write the summary here")
    args = parser.parse_args(argv)
    _watchdog(args.watchdog)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        parser.error(f"unknown run(s) {unknown}; known: {RUNS}")
    logdir = os.path.abspath(args.logdir)
    os.makedirs(logdir, exist_ok=True)

    _log(f"python {platform.python_version()} on {platform.machine()}, logdir {logdir}")
    for name in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
                 "XLA_FLAGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "KERAS_BACKEND"):
        if name in os.environ:
            _log(f"env {name}={os.environ[name]}")
    summary: dict = {"logdir": logdir, "runs": {}}
    try:
        import jax
        import jaxlib

        devices = jax.devices()
        summary.update(jax=jax.__version__, jaxlib=jaxlib.__version__, backend=jax.default_backend(),
                       devices=[str(d) for d in devices],
                       device_kinds=sorted({getattr(d, "device_kind", "?") for d in devices}))
        _log(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, default backend {jax.default_backend()}")
        _log(f"jax.devices(): {devices}")
        _log(f"device kinds: {summary['device_kinds']}")
        summary["memory_stats_start"] = _memory_stats(jax)
        _log(f"memory_stats at start: {summary['memory_stats_start']}")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        _log("FAILED to initialise JAX: no run can go")
        print("SUMMARY_JSON " + json.dumps(summary), flush=True)
        return 1

    functions = {"keras_jax": run_keras_jax, "jax_mlp": run_jax_mlp}
    for run in runs:
        run_dir = os.path.join(logdir, run)
        _log(f"=== run {run} -> {run_dir}")
        record: dict = {"status": "failed"}
        started = time.perf_counter()
        try:
            with _Alarm(args.run_timeout):
                record.update(functions[run](run_dir))
            record["status"] = "ok"
        except BaseException as exc:  # noqa: BLE001 - one run failing must not stop the next
            if isinstance(exc, KeyboardInterrupt):
                raise
            traceback.print_exc()
            record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            _stop_trace_if_active(jax)
        record["seconds"] = round(time.perf_counter() - started, 2)
        record["memory_stats_after"] = _memory_stats(jax)
        files = _profile_files(run_dir) if os.path.isdir(run_dir) else []
        record["files"] = [{"path": os.path.relpath(p, logdir), "bytes": b} for p, b in files]
        if record["status"] == "ok" and not any(p.endswith(".xplane.pb") for p, _ in files):
            record["status"] = "failed"
            record["error"] = "no .xplane.pb written"
        summary["runs"][run] = record
        _log(f"run {run}: {record['status']} in {record['seconds']} s"
             + (f" ({record['error']})" if "error" in record else ""))
        for p, b in files:
            _log(f"  {b:>10,} B  {os.path.relpath(p, logdir)}")
        _log(f"  memory_stats after: {record['memory_stats_after']}")

    print("\n==== capture summary ====", flush=True)
    print(f"jax {summary.get('jax')} / jaxlib {summary.get('jaxlib')}, backend {summary.get('backend')}, "
          f"devices {summary.get('devices')}")
    for run, record in summary["runs"].items():
        sizes = ", ".join(f"{f['path']} {f['bytes'] / 1e6:.2f} MB" for f in record["files"]) or "no files"
        print(f"{run:>10}: {record['status'].upper()}  {record['seconds']} s  {sizes}"
              + (f"\n            error: {record['error']}" if "error" in record else ""))
    print("SUMMARY_JSON " + json.dumps(summary), flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump(summary, f, indent=1)
    ok = all(record["status"] == "ok" for record in summary["runs"].values())
    return 0 if ok and summary["runs"] else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown (a GPU client's shutdown can be slow); everything is written.
    os._exit(code)
