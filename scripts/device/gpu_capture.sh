#!/usr/bin/env bash
# One run on a GPU machine: capture real JAX GPU profiles (Keras 3 on JAX, plain JAX) into
# /tmp/gpulogs with scripts/device/capture_gpu_profiles.py, then read them back with
# tb_memory_plugin (its XPlane decoder, the analysis, and `tb-memory summary`).
#
#   bash scripts/device/gpu_capture.sh        (from the repo root; carry the wheels in .whl/)
#
# The wheels in .whl/ (keras, namex, optree: what the machine lacks) are installed with
# --no-deps into /tmp/site, which goes first on PYTHONPATH. Everything it prints also goes to
# $OUT/gpu_capture.log; the logdir comes back as $OUT/gpulogs.tar.gz. Without $OUT (a local
# try) it writes to /tmp/gpu_capture_out. Env: GPU_LOGDIR (default /tmp/gpulogs).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gpu_capture_out}
LOGDIR=${GPU_LOGDIR:-/tmp/gpulogs}
SITE=${GPU_SITE:-/tmp/site}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=1

section() { printf '\n######## %s (%s, +%ss)\n' "$1" "$(date +%T)" "$SECONDS"; }

main() {
  section "machine"
  uname -a
  nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 || true
  command -v python3; python3 --version

  section "install carried wheels into $SITE"
  if ls .whl/*.whl >/dev/null 2>&1; then
    ls -l .whl/
    rm -rf "$SITE"
    if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl; then
      echo "installed: $(ls "$SITE" | tr '\n' ' ')"
    else
      echo "WARNING: wheel install failed (keras_jax will likely fail; jax_mlp can still run)"
    fi
  else
    echo "WARNING: no .whl/*.whl here (was .whl carried?)"
  fi
  export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"

  section "versions"
  python3 -m pip list 2>/dev/null | grep -iE '^(jax|jaxlib|jax-cuda[0-9a-z_-]*|numpy|ml.dtypes|tensorboard|protobuf|werkzeug|h5py|rich|absl.py|typing.extensions|optree|namex|keras|tensorflow|torch)[[:space:]]' || true
  timeout -k 5 60 python3 - <<'PY'
import importlib, os, sys
os.environ["KERAS_BACKEND"] = "jax"
for name in ("numpy", "jax", "jaxlib", "ml_dtypes", "optree", "namex", "keras", "tensorboard", "google.protobuf"):
    try:
        module = importlib.import_module(name)
        print(f"{name:>16} {getattr(module, '__version__', '?'):<12} {getattr(module, '__file__', '')}")
    except Exception as exc:  # noqa: BLE001
        print(f"{name:>16} IMPORT FAILED: {type(exc).__name__}: {exc}")
import tb_memory_plugin.cli, tb_memory_plugin.store  # noqa: E401,F401
print("tb_memory_plugin imports; tensorflow imported:", "tensorflow" in sys.modules)
PY

  section "capture -> $LOGDIR"
  rm -rf "$LOGDIR"
  timeout -k 10 180 python3 scripts/device/capture_gpu_profiles.py "$LOGDIR" --run-timeout 80 --watchdog 170 \
    --summary-json "$OUT/capture_summary.json"
  echo "capture exit code: $?"
  find "$LOGDIR" -type f -exec ls -l {} + 2>/dev/null

  section "tb_memory_plugin: raw events and decoder"
  timeout -k 5 60 python3 - "$LOGDIR" <<'PY'
import collections, glob, os, sys, time
import numpy as np
logdir = sys.argv[1]
files = sorted(glob.glob(os.path.join(logdir, "*", "plugins", "profile", "*", "*.xplane.pb")))
print(f"{len(files)} profile(s) under {logdir}")
MEMORY = ("MemoryAllocation", "MemoryDeallocation")

def raw(path):
    """What the file holds, read with JAX's own XSpace reader (independent of our decoder)."""
    from jax.profiler import ProfileData
    data = ProfileData.from_file(path)
    by_allocator = collections.Counter()
    stat_values = collections.defaultdict(collections.Counter)
    samples, steps = [], collections.Counter()
    for plane in data.planes:
        lines = list(plane.lines)
        names, count = collections.Counter(), 0
        for line in lines:
            for event in line.events:
                count += 1
                names[event.name] += 1
                stats = dict(event.stats)
                if "step_num" in stats:
                    steps[(plane.name, event.name, stats["step_num"])] += 1
                if event.name in MEMORY:
                    by_allocator[(plane.name, event.name, str(stats.get("allocator_name")))] += 1
                    for key in ("tf_op", "id", "region_type", "data_type", "shape"):
                        if key in stats:
                            stat_values[key][str(stats[key])[:60]] += 1
                    if len(samples) < 4 and event.name == "MemoryAllocation":
                        samples.append((line.name, event.start_ns, stats))
        print(f"  plane {plane.name!r}: {len(lines)} lines ({', '.join(l.name for l in lines[:6])}), {count} events;"
              f" top: {names.most_common(4)}")
    for (plane, name, allocator), n in sorted(by_allocator.items()):
        print(f"  {name} x{n} allocator {allocator!r} (plane {plane!r})")
    for key, values in stat_values.items():
        print(f"  memory stat {key}: {len(values)} distinct, top {values.most_common(4)}")
    for line, start, stats in samples:
        print(f"  sample MemoryAllocation on line {line!r}: {stats}")
    for (plane, name, number), n in sorted(steps.items())[:10]:
        print(f"  step marker {name!r} step_num={number} x{n} (plane {plane!r})")

def decoded(path):
    from tb_memory_plugin import analysis
    from tb_memory_plugin.sources import xplane
    with open(path, "rb") as f:
        data = f.read()
    t0 = time.perf_counter()
    profile = xplane.decode(data)
    print(f"  decode: {time.perf_counter() - t0:.3f} s; memory_event_count {profile.memory_event_count}; "
          f"steps {len(profile.steps)}" + (f"; message: {profile.message[:100]}..." if profile.message else ""))
    for i, step in enumerate(profile.steps[:8]):
        print(f"  step {i}: id {step.step_id} number {step.number} ids {step.step_ids[:5]} "
              f"{(step.end_ps - step.start_ps) / 1e9:.3f} ms devices {step.devices}")
        trace = profile.trace(i)
        print(f"    trace: devices {trace.devices}, {trace.duration_us} us, {trace.node_stat_count} executions, "
              f"source {trace.source}, {len(trace.op_types)} op types")
        for space in trace.spaces:
            rise = int(np.cumsum(space.event_bytes).max()) if space.event_bytes.size else 0
            peak = int(space.snapshot_bytes.max()) if space.snapshot_bytes.size else 0
            print(f"    space {space.id}: device {space.device} ({space.device_type}, {space.memory_kind}) "
                  f"allocator {space.allocator!r}: {space.exec_count} executions, {space.event_time_us.size} events, "
                  f"peak bytes_allocated {peak:,}, rise {rise:,}, capacity {space.capacity_bytes}")
            top = np.argsort(-space.allocated)[:4]
            print("      most allocated: " + "; ".join(f"{space.name(int(e))!r} {int(space.allocated[e]):,}" for e in top))
        step_analysis = analysis.analyse(trace)
        print(f"    analysis: {step_analysis.status} default space {step_analysis.default_space_id}"
              + (f" ({step_analysis.message[:120]})" if step_analysis.message else ""))
        for space in step_analysis.spaces:
            print(f"      {space.trace.id}: has_curve {space.has_curve}, peak_rise {space.peak_rise_bytes:,}, "
                  f"start {space.start_bytes}")

for path in files:
    print(f"\n== {os.path.relpath(path, logdir)} ({os.path.getsize(path):,} B)")
    for part in (raw, decoded):
        try:
            part(path)
        except Exception as exc:  # noqa: BLE001 - report, go on with the next part
            import traceback
            traceback.print_exc()
            print(f"  {part.__name__} FAILED: {type(exc).__name__}: {exc}")
PY
  echo "decode exit code: $?"

  section "tb-memory summary (python3 -m tb_memory_plugin.cli)"
  timeout -k 5 45 python3 -m tb_memory_plugin.cli summary "$LOGDIR" --top 5
  echo "summary exit code: $?"
  timeout -k 5 45 python3 -m tb_memory_plugin.cli summary "$LOGDIR" --json >"$OUT/tb_memory_summary.json"
  echo "summary --json exit code: $? ($(wc -c <"$OUT/tb_memory_summary.json") bytes)"

  section "pack"
  if [ -d "$LOGDIR" ]; then
    tar -czf "$OUT/gpulogs.tar.gz" -C "$(dirname "$LOGDIR")" "$(basename "$LOGDIR")"
    size=$(stat -c %s "$OUT/gpulogs.tar.gz")
    if [ "$size" -gt 15728640 ]; then  # over 15 MiB: split (16 MiB a file comes back)
      split -b 15M -d "$OUT/gpulogs.tar.gz" "$OUT/gpulogs.tar.gz.part" && rm "$OUT/gpulogs.tar.gz"
    fi
  fi
  ls -l "$OUT"
  section "done"
}

main 2>&1 | tee "$OUT/gpu_capture.log"
