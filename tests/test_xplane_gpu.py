"""The XPlane source on real GPU profiles from JAX: Keras 3 on the JAX backend and plain JAX.

The profiles in tests/data/jax_gpu were captured on an NVIDIA H200 (jax 0.11.2, Keras
3.15.1) by scripts/device/capture_gpu_profiles.py (see tests/data/jax_gpu/README.md). XLA
allocates through the same BFC allocator as TensorFlow (`GPU_0_bfc`, pinned host memory
`xla_gpu_host_bfc`), but its allocations name no op and no executor step: steps come from
the profiler's step markers, and allocations belong to the XLA program being run on their
thread or to the copy of an argument to the device. Expectations are recomputed from
TensorFlow's own `xplane_pb2` parse of the same bytes with plain loops.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tb_memory_plugin import analysis, figures, report
from tracedata import xplane_stat_values
from tb_memory_plugin.figures import CATEGORIES
from tb_memory_plugin.names import XLA_PROGRAM_OP_TYPE
from tb_memory_plugin.sources import xplane

DATA = Path(__file__).parent / "data" / "jax_gpu"
RUNS = {"keras_jax": [2, 3, 4], "jax_mlp": [1, 2, 3]}  # the batches / steps each run profiled
PROGRAM = "jit_train_step"
_PROGRAM_RE = re.compile(r"Execute \((?P<program>[^()]+)\)$")
_COPY_RE = re.compile(r"BufferFromHostBuffer\((?P<shape>[^()]*)\)$")


def _path(run: str) -> Path:
    (path,) = (DATA / run).glob("plugins/profile/*/*.xplane.pb")
    return path


def _reference(data: bytes) -> dict:
    """Memory events (sorted by time) with the program or copy running on their thread, and
    the step markers, read event by event with TensorFlow's protos."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    memory, markers = [], collections.defaultdict(list)
    for plane in space.planes:
        for line in plane.lines:
            spans = []  # (start, end, owner) of the programs and copies on this line
            events = []
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                start = line.timestamp_ns * 1000 + event.offset_ps
                stats = xplane_stat_values(plane, event)
                if name.startswith("Profiled batch "):
                    markers[int(name.split()[-1])].append((start, start + event.duration_ps))
                elif "step_num" in stats:
                    markers[stats["step_num"]].append((start, start + event.duration_ps))
                if match := _PROGRAM_RE.search(name):
                    spans.append((start, start + event.duration_ps, match.group("program")))
                elif match := _COPY_RE.search(name):
                    spans.append((start, start + event.duration_ps, f"{xplane.COPY_SCOPE}/{match.group('shape')}"))
                elif name in ("MemoryAllocation", "MemoryDeallocation"):
                    events.append({"time_ps": start, "allocation": name == "MemoryAllocation", **stats})
            for e in events:
                around = [s for s in spans if s[0] <= e["time_ps"] <= s[1]]
                e["owner"] = max(around)[2] if around else xplane.UNATTRIBUTED  # the innermost: the latest start
            memory += events
    memory.sort(key=lambda e: e["time_ps"])
    return {"memory": memory, "markers": {n: (min(s for s, _ in w), max(e for _, e in w)) for n, w in markers.items()}}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request):
    """(run, decoded profile, reference, [(ProfileStep, StepAnalysis)])."""
    data = _path(request.param).read_bytes()
    profile = xplane.decode(data)
    steps = [(step, analysis.analyse(profile.trace(i))) for i, step in enumerate(profile.steps)]
    return request.param, profile, _reference(data), steps


def _window_events(reference: dict, step, allocator: str) -> list[dict]:
    return [e for e in reference["memory"]
            if step.start_ps <= e["time_ps"] <= step.end_ps and e["allocator_name"] == allocator]


def test_each_marked_step_is_a_step(run):
    """No executor step ids: a step per step number the profiler was given, over its marker."""
    name, profile, reference, steps = run
    assert [step.number for step, _ in steps] == RUNS[name] == sorted(reference["markers"])
    for step, analysed in steps:
        assert (step.start_ps, step.end_ps) == reference["markers"][step.number]
        assert analysed.status == "ok", analysed.message
        assert step.devices == ["/device:CPU:0", "/device:GPU:0"]
    assert profile.memory_event_count == len(reference["memory"])


def test_gpu_memory_and_pinned_host_memory_are_told_apart(run):
    _, _, _, steps = run
    for _, analysed in steps:
        kinds = {(s.trace.allocator, s.trace.device, s.trace.device_type, s.trace.memory_kind) for s in analysed.spaces}
        assert kinds == {("GPU_0_bfc", "/device:GPU:0", "GPU", "device"),
                         ("xla_gpu_host_bfc", "/device:CPU:0", "CPU", "host")}
        assert analysed.default_space_id == "GPU:0/GPU_0_bfc"


def test_curve_is_the_allocators_own_bytes_and_at_peak_adds_up(run):
    _, _, reference, steps = run
    for step, analysed in steps:
        for space in analysed.spaces:
            events = _window_events(reference, step, space.trace.allocator)
            first = events[0]
            before = first["bytes_allocated"] - (first["allocation_bytes"] if first["allocation"]
                                                 else -first["allocation_bytes"])
            assert space.start_bytes == before
            peak = space.start_bytes + space.peak_rise_bytes
            assert peak == max(e["bytes_allocated"] for e in events)
            rise = space.peak_rise_bytes
            tree = space.tree("layer")
            assert sum(int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[0]) == rise
            summary = report.device_summary(space, "layer")
            assert sum(row["figures"]["at_peak_bytes"] for row in summary["op_types"]) == rise
            assert sum(row["at_peak_bytes"] for row in summary["categories"]) == rise


def test_allocations_belong_to_the_program_or_copy_running_on_their_thread(run):
    _, _, reference, steps = run
    for step, analysed in steps:
        for space in analysed.spaces:
            expected = collections.Counter()
            for e in _window_events(reference, step, space.trace.allocator):
                if e["allocation"]:
                    expected[e["owner"]] += e["allocation_bytes"]
            trace = space.trace
            engine = collections.Counter()
            for i in range(trace.exec_count):
                if int(trace.allocated[i]):  # a program's block split by op (test_xla_blocks.py): the program's
                    engine[trace.xla_program_of.get(trace.name(i), trace.name(i))] += int(trace.allocated[i])
            assert engine == expected
        gpu = next(s for s in analysed.spaces if s.trace.device_type == "GPU")
        summary = report.device_summary(gpu, "layer")
        # The XLA program's buffers are what the GPU holds at its peak (its scratch, freed
        # before it ends: temporaries); the copies of the batch are inputs.
        program = {"name": PROGRAM, "op_type": XLA_PROGRAM_OP_TYPE, "graph_name": PROGRAM}
        assert {k: summary["peak_node"][k] for k in program} == program
        # Its scope: its own, where its unused scratch is a node below it (test_xla_blocks.py).
        assert summary["peak_node"]["scope"] in ("", PROGRAM)
        held = sum(row["figures"]["at_peak_bytes"] for row in summary["op_types"]
                   if row["name"] == XLA_PROGRAM_OP_TYPE)
        assert held > 0.9 * summary["peak_rise_bytes"]
        copies = [i for i in range(gpu.trace.exec_count) if gpu.trace.name(i).startswith(xplane.COPY_SCOPE + "/")]
        assert copies and all(CATEGORIES[gpu.category[i]] == "inputs" for i in copies)
        assert all(gpu.names.op_types[gpu.name_code[i]] == "host-to-device copy" for i in copies)


def test_cli_summarises_every_marked_step(capsys):
    from tb_memory_plugin import cli

    assert cli.main(["summary", str(DATA), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    tags = {(s["run"], s["tag"].rsplit("/", 1)[-1], s["status"]) for s in body["steps"]}
    assert tags == {(run, f"step_{n}", "ok") for run, numbers in RUNS.items() for n in numbers}
    assert cli.main(["summary", str(DATA / "keras_jax"), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert f"op at peak: {PROGRAM} ({XLA_PROGRAM_OP_TYPE})" in text


def test_routes_serve_the_gpu_steps():
    """Through TensorBoard's own WSGI app and data provider: the run picker lists each marked
    step on both devices, and the summary's default device is the GPU."""
    from tracedata import memory_app_client

    client = memory_app_client(DATA)

    def get(route, **params):
        response = client.get("/data/plugin/memory/" + route, query_string=params)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
        return json.loads(response.get_data(as_text=True))

    runs = {r["run"]: r["steps"] for r in get("runs")["runs"]}
    assert set(runs) == set(RUNS)
    for run, numbers in RUNS.items():
        assert [s["step"] for s in runs[run]] == numbers
        assert all(s["source"] == "xplane" and s["devices"] == ["/device:CPU:0", "/device:GPU:0"] for s in runs[run])
        body = get("summary", run=run, tag=runs[run][0]["tag"])
        assert body["status"] == "ok"
        gpu = next(d for d in body["devices"] if d["device_type"] == "GPU")
        assert gpu["peak_node"]["name"] == PROGRAM  # the program runs at the peak; its ops' values hold it
        assert gpu["largest_at_peak"]["op_type"] == XLA_PROGRAM_OP_TYPE
        assert gpu["largest_at_peak"]["name"] != PROGRAM
        assert gpu["figures"]["at_peak_bytes"] == gpu["peak_rise_bytes"] > 0
        # The scope route names the program whose blocks hold a layer's nodes.
        layer = gpu["largest_at_peak"]["scope"] or gpu["largest_at_peak"]["name"]
        scope = get("scope", run=run, tag=runs[run][0]["tag"], device=gpu["id"], group="layer", scope=layer)
        assert scope["nodes"] and {n["xla_program"] for n in scope["nodes"]} == {PROGRAM}
        copies = get("scope", run=run, tag=runs[run][0]["tag"], device=gpu["id"], group="layer",
                     scope=xplane.COPY_SCOPE)
        assert {n["xla_program"] for n in copies["nodes"]} == {None}
        # XLA lays its buffers out again for each batch size: one step alone is not scaled, and the
        # what-if says to fit it with a run at another batch size, as a 422.
        response = client.get("/data/plugin/memory/whatif", query_string={"run": run, "tag": runs[run][0]["tag"],
                                                                           "batch": "64"})
        assert response.status_code == 422 and "and fit over both" in response.get_data(as_text=True)


# -- what the two captures do not show: hand-built profiles ------------------------------------


def _steps(space) -> list[tuple]:
    """(number, start us, {space id: [(execution, allocated bytes)]}) per decoded step."""
    profile = xplane.decode(space.serialized())
    out = []
    for i, step in enumerate(profile.steps):
        analysed = analysis.analyse(profile.trace(i))
        assert analysed.status == "ok", analysed.message
        spaces = {s.trace.id: sorted((s.trace.name(e), int(s.trace.allocated[e])) for e in range(s.trace.exec_count))
                  for s in analysed.spaces}
        out.append((step.number, step.start_ps // 10**6, spaces))
    return out


def _jax_step(space, start_us: float, number: int, program: str, size: int, marker: str = "train") -> None:
    """A marked step that runs an XLA program allocating and freeing `size` bytes."""
    if marker == "train":
        space.event(1, "train", start_us, 200, step_num=number)
    else:
        space.event(1, f"{marker} {number}", start_us, 200)
    space.event(1, f"CommonPjRtLoadedExecutable::Execute ({program})", start_us + 10, 100)
    space.free(1, start_us + 90, space.allocate(1, start_us + 20, size))


def test_step_numbers_that_come_again_are_other_steps():
    """Keras numbers a batch within its epoch, and an eval loop counts from 0 again: each marked
    step is its own, in time order."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    for k, (number, program, size) in enumerate([(0, "jit_train", 1000), (1, "jit_train", 2000),
                                                  (0, "jit_eval", 300), (1, "jit_eval", 400)]):
        _jax_step(space, 1000 * k, number, program, size, marker="Profiled batch" if k < 2 else "train")
    assert [(n, start, spaces["GPU:0/GPU_0_bfc"]) for n, start, spaces in _steps(space)] == [
        (0, 0, [("jit_train", 1000)]), (1, 1000, [("jit_train", 2000)]),
        (0, 2000, [("jit_eval", 300)]), (1, 3000, [("jit_eval", 400)])]


def test_tensorflow_executor_steps_beside_jax_steps_are_all_steps():
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(2, "ExecutorState::Process", 0, 100, id=7)
    space.event(2, "dense/MatMul:MatMul", 10, 20)
    space.free(2, 40, space.allocate(2, 15, 100, tf_op="dense/MatMul", id=7))
    for number in (1, 2):
        _jax_step(space, 1000 * number, number, "jit_step", 10_000)
    steps = _steps(space)
    assert [(n, spaces["GPU:0/GPU_0_bfc"]) for n, _, spaces in steps] == [
        (None, [("dense/MatMul", 100)]), (1, [("jit_step", 10_000)]), (2, [("jit_step", 10_000)])]


def test_a_function_run_that_only_set_up_an_iterator_is_no_step():
    """A function run whose every allocation is tf.data's work on its caller's thread (an iterator's
    `range`, 13.5 KiB listed first in a profiler server's capture) is no step where training steps are;
    a run that allocates for the model beside its iterator (an epoch's end, its validation) stays."""
    from protos import XSpaceBuilder

    def profile(model_bytes_in_first: int):
        space = XSpaceBuilder()
        space.event(1, "KernelAndDeviceFunc::Run", 0, 50)
        space.event(1, "ExecutorState::Process", 1, 48, id=100)
        space.event(1, "Iterator::Range", 2, 10)
        space.free(1, 45, space.allocate(1, 5, 13_824, tf_op="range", id=100))
        if model_bytes_in_first:
            space.event(1, "head/MatMul:MatMul", 20, 10)
            space.free(1, 40, space.allocate(1, 25, model_bytes_in_first, tf_op="head/MatMul", id=100))
        for k, step_id in enumerate((200, 300)):
            start = 100 + 200 * k
            space.event(1, "KernelAndDeviceFunc::Run", start, 150)
            space.event(1, "ExecutorState::Process", start + 1, 148, id=step_id)
            space.event(1, "dense/MatMul:MatMul", start + 10, 20)
            space.free(1, start + 100, space.allocate(1, start + 15, 1 << 20, tf_op="dense/MatMul", id=step_id))
        return _steps(space)

    steps = profile(0)
    assert [spaces["GPU:0/GPU_0_bfc"] for _, _, spaces in steps] == [[("dense/MatMul", 1 << 20)]] * 2
    steps = profile(4096)
    assert len(steps) == 3 and ("head/MatMul", 4096) in steps[0][2]["GPU:0/GPU_0_bfc"]


def test_steps_of_no_function_are_not_taken_for_steps_a_capture_cut():
    """A step at the profile's either end that no function run overlaps is cut by the capture only where
    every step between them is a function's: a tf.compat.v1 session's steps beside one tf.function in
    one profile are all whole."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    for k, step_id in enumerate((100, 200, 300, 400)):
        start = 200 * k
        if step_id == 200:
            space.event(1, "KernelAndDeviceFunc::Run", start, 150)
        space.event(1, "ExecutorState::Process", start + 1, 148, id=step_id)
        space.event(1, "dense/MatMul:MatMul", start + 10, 20)
        space.free(1, start + 100, space.allocate(1, start + 15, 1024 * (k + 1), tf_op="dense/MatMul", id=step_id))
    assert [spaces["GPU:0/GPU_0_bfc"] for _, _, spaces in _steps(space)] == [
        [("dense/MatMul", 1024 * (k + 1))] for k in range(4)]


def test_a_repeated_keras_batch_number_in_tensorflow_is_another_step():
    """TF executor steps merge under one marked step, not under one number."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    for k, step_id in enumerate((11, 12, 13)):
        start = 1000 * k
        space.event(1, "Profiled batch", start, 300, step_num=k % 2)
        for offset, size in ((0, 100 * (k + 1)), (150, 1)):  # the batch, and a helper run beside it
            space.event(2, "ExecutorState::Process", start + offset, 100, id=step_id * 10 + offset)
            space.event(2, "dense/MatMul:MatMul", start + offset + 10, 20)
            space.free(2, start + offset + 40, space.allocate(2, start + offset + 15, size, tf_op="dense/MatMul",
                                                               id=step_id * 10 + offset))
    steps = _steps(space)
    assert [(n, start, spaces["GPU:0/GPU_0_bfc"]) for n, start, spaces in steps] == [
        (0, 0, [("dense/MatMul", 101)]), (1, 1000, [("dense/MatMul", 201)]), (0, 2000, [("dense/MatMul", 301)])]


def test_an_allocation_belongs_to_the_innermost_op_still_running():
    """An op-like event inside the program that ended before the allocation does not take it."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 10, 300)
    space.event(1, "SomeCallback:Run", 20, 5)  # `<tf_op>:<OpType>`-like, ended
    space.event(1, "Inner:Run", 30, 10)  # another, nested in nothing still running at 50
    space.free(1, 90, space.allocate(1, 50, 10_000))
    space.free(1, 400, space.allocate(1, 350, 7))  # after the program: no op
    ((number, _, spaces),) = _steps(space)
    assert number == 1
    assert spaces["GPU:0/GPU_0_bfc"] == [(xplane.UNATTRIBUTED, 7), ("Inner", 0), ("SomeCallback", 0), ("jit_step", 10_000)]


def test_an_allocation_whose_tf_op_is_null_belongs_to_the_op_running():
    """TensorFlow up to 2.17 writes `tf_op "(null)"` where an allocation has no op: it is the op
    running on its thread's (here the program's), or `(no op)`, never a node named `(null)`."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 10, 300)
    space.free(1, 90, space.allocate(1, 50, 10_000, tf_op="(null)"))
    space.free(1, 400, space.allocate(1, 350, 7, tf_op="(null)"))  # after the program: no op
    space.free(1, 450, space.allocate(1, 420, 5, tf_op=""))
    ((_, _, spaces),) = _steps(space)
    assert spaces["GPU:0/GPU_0_bfc"] == [(xplane.UNATTRIBUTED, 12), ("jit_step", 10_000)]


def test_an_executor_step_holds_the_allocations_its_threads_made_without_a_step_id():
    """TensorFlow up to 2.17 gives XLA's buffers in a Keras `fit(jit_compile=True)` step no step id
    and no op: they are the step's whose executor runs on their thread, not outside every step
    (where the input pipeline's own executor steps, the only ones with ids, were all there was)."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(3, "ExecutorState::Process", 0, 50, id=9)  # tf.data slicing the batch
    space.event(3, "GatherV2:GatherV2", 10, 20)
    space.free(3, 400, space.allocate(3, 15, 512, allocator="cpu_bfc", tf_op="GatherV2", id=9))
    space.event(2, "ExecutorState::Process", 100, 300, id=7)  # the train function, compiled
    space.free(2, 350, space.allocate(2, 150, 6_000_000, allocator="cpu_bfc", tf_op="(null)", id=0))
    steps = _steps(space)
    held = {name: size for _, _, spaces in steps for name, size in spaces["CPU:0/cpu_bfc"]}
    assert held[xplane.UNATTRIBUTED] == 6_000_000 and held["GatherV2"] == 512
    # The next batch's executor runs its kernel on another thread, in no Process event there: the
    # buffer it allocates there is that step's, whose runs span it, not outside every step.
    space.event(2, "ExecutorState::Process", 1000, 10, id=8)
    space.event(2, "ExecutorState::Process", 1900, 10, id=8)
    space.free(4, 1800, space.allocate(4, 1100, 5_000_000, allocator="cpu_bfc", tf_op="(null)", id=0))
    steps = _steps(space)
    assert sorted(size for _, _, spaces in steps for name, size in spaces["CPU:0/cpu_bfc"]
                  if name == xplane.UNATTRIBUTED) == [5_000_000, 6_000_000]
    # Holding most of the peak, `(no op)` is explained, with what to do, and the what-if says it cannot scale it.
    from tb_memory_plugin import whatif

    profile = xplane.decode(space.serialized())
    analysed = [analysis.analyse(profile.trace(i)) for i in range(len(profile.steps))]
    noted = [step for step in analysed if "`(no op)` holds" in (step.message or "")]
    assert noted and all("jit_compile=False" in step.message for step in noted)
    # Its op type is its own, not "(unknown)" (whose note sends the reader to host_tracer_level=3, which
    # names no op for such an allocation).
    names = noted[0].spaces[0].names
    assert names.op_types[names.raw.index(xplane.UNATTRIBUTED)] == xplane.UNATTRIBUTED
    with pytest.raises(whatif.WhatIfError, match="no op"):
        whatif.traced_batch(noted[0])


@pytest.mark.parametrize("tf_op, around, noted", [
    ("(null)", "StatefulPartitionedCall:StatefulPartitionedCall", True),  # TF 2.12: inside the function's call
    (None, None, False),  # no tf_op at all (TensorFlow 2.21, JAX): what `(no op)` is is not said
])
def test_no_op_written_as_null_inside_a_functions_call_is_no_op(tf_op, around, noted):
    """TensorFlow 2.12 runs a Keras fit's jit-compiled function inside a `StatefulPartitionedCall` event
    and writes its buffers' op as `(null)`: they are `(no op)`, not the call's, and the note says what
    they may be; allocations with no op written at all get no such note."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(2, "ExecutorState::Process", 0, 300, id=7)
    if around:
        space.event(2, around, 10, 280)
    stats = {"tf_op": tf_op} if tf_op is not None else {}
    space.free(2, 250, space.allocate(2, 50, 6_000_000, allocator="cpu_bfc", id=7, **stats))
    step = analysis.analyse(xplane.decode(space.serialized()).trace(0))
    cpu = step.space("CPU:0/cpu_bfc")
    assert {cpu.trace.name(e) for e in range(cpu.trace.exec_count) if cpu.trace.allocated[e]} == {xplane.UNATTRIBUTED}
    assert ("`(no op)` holds" in (step.message or "")) == noted
    # With no op written at all (TensorFlow 2.18 on), what a thread allocated running no op is a tensor made from
    # Python: an input (trial AH: an eager step's numpy batch had read as activations); written `(null)`, an XLA
    # program's buffers may be among them: left as they are.
    category = CATEGORIES[cpu.names.category[cpu.names.raw.index(xplane.UNATTRIBUTED)]]
    assert category == ("activations" if noted else "inputs")


def test_tf_datas_executor_alone_is_no_step_beside_training_steps():
    """An older Keras fit's profile runs tf.data's functions (slicing the next batch) in executor
    steps of their own between training steps: those are no steps where training steps exist, and
    the only steps where none does."""
    from protos import XSpaceBuilder

    def profile(training: bool) -> list[tuple]:
        space = XSpaceBuilder()
        if training:
            space.event(2, "ExecutorState::Process", 0, 100, id=7)
            space.event(2, "dense/MatMul:MatMul", 10, 20)
            space.free(2, 40, space.allocate(2, 15, 4096, allocator="cpu_bfc", tf_op="dense/MatMul", id=7))
        space.event(3, "ExecutorState::Process", 200, 50, id=9)
        space._lines[3].name = "tf_data_private_threadpool/1"
        space.event(3, "GatherV2:GatherV2", 210, 20)
        space.free(3, 240, space.allocate(3, 215, 512, allocator="cpu_bfc", tf_op="GatherV2", id=9))
        return [spaces["CPU:0/cpu_bfc"] for _, _, spaces in _steps(space)]

    assert profile(training=True) == [[("dense/MatMul", 4096)]]
    assert profile(training=False) == [[("(input pipeline)/GatherV2", 512)]]


def test_a_tf_function_allocating_under_its_own_name_is_an_xla_program():
    """TensorFlow up to 2.17 runs a `tf.function(jit_compile=True)` in no event of its own: its
    buffers carry the function's name as their op. That is an XLA program, and the note says so.
    A function the function runtime runs (`KernelAndDeviceFunc::Run`: Keras 3's evaluate loop)
    may allocate under its name too, its ops run inline: no XLA program."""
    from protos import XSpaceBuilder

    def op_types(runtime: bool, instantiated: bool = False):
        space = XSpaceBuilder()
        space.event(1, "train", 0, 500, step_num=1)
        space.event(1, "EagerLocalExecute: __inference_train_step_781", 10, 400)
        if runtime:
            space.event(1, "KernelAndDeviceFunc::Run", 20, 380)
        if instantiated:  # TF 2.21's first call: the function instantiated (allocating under its name), then run
            space.event(1, "KernelAndDeviceFunc::Run", 320, 80)
        space.free(1, 300, space.allocate(1, 50, 6_000_000, allocator="cpu_bfc", tf_op="__inference_train_step_781"))
        space.event(1, "dense/MatMul:MatMul", 420, 20)
        space.free(1, 450, space.allocate(1, 425, 1000, allocator="cpu_bfc", tf_op="dense/MatMul"))
        step = analysis.analyse(xplane.decode(space.serialized()).trace(0))
        cpu = step.space("CPU:0/cpu_bfc")
        return step, {cpu.trace.name(e): cpu.op_type(e) for e in range(cpu.trace.exec_count)}

    step, compiled = op_types(runtime=False)
    assert compiled["__inference_train_step_781"] == XLA_PROGRAM_OP_TYPE and compiled["dense/MatMul"] == "MatMul"
    assert "XLA programs ran in this step" in step.message and "jit_compile=False" in step.message
    step, inline = op_types(runtime=True)
    assert inline["__inference_train_step_781"] != XLA_PROGRAM_OP_TYPE and "XLA" not in (step.message or "")
    # A function the runtime runs in the same call, after allocating under its name while it was instantiated
    # (trial AB: TF 2.21's first train_on_batch had read as an XLA program of 0 B at the peak): no XLA program.
    step, first = op_types(runtime=False, instantiated=True)
    assert first["__inference_train_step_781"] != XLA_PROGRAM_OP_TYPE and "XLA" not in (step.message or "")


def test_marked_steps_without_memory_and_nested_marks():
    """A marked step with no memory event is none; a step marked inside another is part of it."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 100, step_num=1)  # nothing allocated
    space.event(1, "train", 200, 300, step_num=2)
    space.event(1, "Profiled batch 0", 210, 100)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 220, 50)
    space.free(1, 260, space.allocate(1, 230, 10_000))
    assert [(n, start) for n, start, _ in _steps(space)] == [(2, 200)]


def test_a_secondary_allocator_lists_only_its_own_ops():
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 10, 100)
    space.free(1, 90, space.allocate(1, 20, 10_000))
    space.event(1, "PjRtCApiCompiler::BufferFromHostBuffer(f32[8,4])", 200, 50)
    space.free(1, 300, space.allocate(1, 210, 128, allocator="xla_gpu_host_bfc"))
    ((_, _, spaces),) = _steps(space)
    assert spaces["GPU:0/GPU_0_bfc"] == [("(copies to device)/f32[8,4]", 0), ("jit_step", 10_000)]
    assert spaces["CPU:0/xla_gpu_host_bfc"] == [("(copies to device)/f32[8,4]", 128)]


def test_a_jax_profile_without_memory_events_says_to_profile_on_a_gpu(tmp_path, capsys):
    """JAX on CPU records no allocations (its CPU client has no BFC allocator): the real GPU
    profile without its memory events reads as such a profile does."""
    from tb_memory_plugin import cli
    from tracedata import xplane_without_memory_events

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(xplane_without_memory_events(_path("keras_jax").read_bytes()))
    busy_gpu = xplane.decode(space.SerializeToString())  # the GPU ran, and nothing was recorded
    assert busy_gpu.steps == [] and busy_gpu.message == xplane.UNRECORDED_DEVICE_HELP.format(devices="/device:GPU:0")
    kept = [plane for plane in space.planes if not plane.name.startswith("/device:GPU")]  # as on a CPU
    del space.planes[:]
    space.planes.extend(kept)
    data = space.SerializeToString()
    profile = xplane.decode(data)
    assert profile.steps == [] and profile.message == xplane.JAX_NO_MEMORY_HELP
    target = tmp_path / "jax_cpu" / "plugins" / "profile" / "2026_11_26_00_00_00" / "host.xplane.pb"
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    assert cli.main(["summary", str(tmp_path)]) != 0
    assert "profile the step on a gpu" in capsys.readouterr().err.lower()


def test_a_gpu_whose_allocations_are_not_recorded_is_said_to_be_missing(tmp_path, capsys):
    """JAX with XLA_PYTHON_CLIENT_ALLOCATOR=platform records only the pinned host buffers (as seen
    on the H200): the GPU ran the step, so each step says its allocations are missing."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from tb_memory_plugin import cli

    space = xplane_pb2.XSpace.FromString(_path("keras_jax").read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            kept = [e for e in line.events if xplane_stat_values(plane, e).get("allocator_name") != "GPU_0_bfc"]
            del line.events[:]
            line.events.extend(kept)
    profile = xplane.decode(space.SerializeToString())
    assert [s.number for s in profile.steps] == RUNS["keras_jax"]
    for i in range(len(profile.steps)):
        analysed = analysis.analyse(profile.trace(i))
        assert analysed.status == "ok" and [s.trace.allocator for s in analysed.spaces] == ["xla_gpu_host_bfc"]
        assert analysed.message == xplane.UNRECORDED_DEVICE_HELP.format(devices="/device:GPU:0")
    for i in range(len(xplane.decode(_path("keras_jax").read_bytes()).steps)):  # recorded: nothing missing
        message = analysis.analyse(xplane.decode(_path("keras_jax").read_bytes()).trace(i)).message
        # Only what every step of XLA programs says: their buffers, by the ops XLA placed in them.
        assert message.startswith("XLA programs ran in this step, holding ")
        assert "read from the program's compiled HLO in the profile" in message
        assert "jit_compile" not in message  # Keras on JAX: TensorFlow's switch is no advice
        assert "ran work in this profile" not in message
    target = tmp_path / "platform" / "plugins" / "profile" / "2026_11_26_00_00_00" / "host.xplane.pb"
    target.parent.mkdir(parents=True)
    target.write_bytes(space.SerializeToString())
    assert cli.main(["summary", str(tmp_path)]) == 0
    assert "note: /device:GPU:0 ran work in this profile" in capsys.readouterr().out


@settings(max_examples=300, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=40),
       times=st.lists(st.integers(0, 270), min_size=1, max_size=20))
def test_innermost_event_around_a_time_is_what_a_scan_finds(spans, times):
    """A thread's events nest (TraceMe scopes): the innermost one around a time is the one that
    started last among those around it (the outer first at one start)."""
    spans = sorted(((a, a + n) for a, n in spans), key=lambda s: (s[0], -s[1]))
    nested, open_ends = [], []
    for a, b in spans:  # keep the ones that nest in what was kept
        while open_ends and open_ends[-1] < a:
            open_ends.pop()
        if not open_ends or b <= open_ends[-1]:
            nested.append((a, b))
            open_ends.append(b)
    start = np.array([a for a, _ in nested], dtype=np.int64)
    end = np.array([b for _, b in nested], dtype=np.int64)
    got = xplane._innermost_around(start, end, np.array(times, dtype=np.int64)).tolist()
    for t, index in zip(times, got):
        around = [i for i, (a, b) in enumerate(nested) if a <= t <= b]
        assert index == (max(around) if around else -1)


def test_no_note_when_the_gpu_allocated_in_another_step():
    """The note is about the profile: a step that allocated only host memory, while the GPU's
    allocations are recorded in another step, says nothing."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.busy_gpu(0, start_us=20)
    _jax_step(space, 0, 1, "jit_step", 10_000)
    space.event(1, "train", 1000, 200, step_num=2)
    space.free(1, 1090, space.allocate(1, 1020, 64, allocator="xla_gpu_host_bfc"))
    profile = xplane.decode(space.serialized())
    assert [s.number for s in profile.steps] == [1, 2] and profile.unrecorded_devices == []
    messages = [analysis.analyse(profile.trace(i)).message for i in range(2)]
    # Step 1's note is its XLA program's (all its rise); step 2's nothing: no "GPU ran work" note.
    assert messages[0].startswith("XLA programs ran in this step, holding 100% of the peak rise: jit_step.")
    assert messages[1] is None


def test_the_xla_note_gives_the_programs_share_only_where_it_is_large():
    """A JAX step whose program holds all of its rise says so, with no TensorFlow advice (JAX has no
    `jit_compile` switch); one where a copy to the device holds nearly all of it says nothing."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.busy_gpu(0, start_us=0)
    _jax_step(space, 0, 1, "jit_step", 10_000)
    space.event(1, "train", 1000, 200, step_num=2)
    space.event(1, "PjRtStreamExecutorClient::BufferFromHostBuffer(f32[32,8])", 1010, 50)
    copy = space.allocate(1, 1020, 200_000)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 1100, 50)
    space.free(1, 1140, space.allocate(1, 1110, 1_000))
    space.free(1, 1180, copy)
    profile = xplane.decode(space.serialized())
    first, second = (analysis.analyse(profile.trace(i)).message for i in range(2))
    assert first.startswith("XLA programs ran in this step, holding 100% of the peak rise: jit_step.")
    assert "jit_compile" not in first and "Memory Viewer" in first
    assert second is None  # the program holds 1,000 B of a 201,000 B rise


def test_a_marked_step_that_starts_where_an_executor_step_ends_is_a_step():
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(2, "ExecutorState::Process", 0, 100, id=7)
    space.event(2, "dense/MatMul:MatMul", 10, 20)
    space.free(2, 40, space.allocate(2, 15, 100, tf_op="dense/MatMul", id=7))
    _jax_step(space, 100, 1, "jit_step", 10_000)  # its marker starts at the executor step's last ps
    assert [(n, start) for n, start, _ in _steps(space)] == [(None, 0), (1, 100)]


def _marked_batches(space, numbers) -> None:
    """Keras' `Profiled batch <n>` markers 1000 us apart, each around an executor step whose
    MatMul allocates and frees 100 x (k + 1) bytes."""
    for k, number in enumerate(numbers):
        start = 1000 * (k + 1)
        space.event(1, "Profiled batch", start, 300, step_num=number)
        space.event(2, "ExecutorState::Process", start + 10, 100, id=k + 1)
        space.event(2, "dense/MatMul:MatMul", start + 20, 20)
        space.free(2, start + 50, space.allocate(2, start + 25, 100 * (k + 1), tf_op="dense/MatMul", id=k + 1))


def test_a_profile_on_onednns_cpu_allocator_says_what_it_misses():
    """oneDNN's CPU allocator (mklcpu, TensorFlow's default on x86) records only its large
    allocations in a profile: the step says so, and how to record every one."""
    from protos import XSpaceBuilder

    for allocators, noted in ((["mklcpu"], True), (["bfc_cpu_allocator_for_gpu"], False),
                              (["mklcpu", "GPU_0_bfc"], False)):  # a GPU step: its own memory is whole
        space = XSpaceBuilder()
        space.event(2, "ExecutorState::Process", 0, 100, id=7)
        space.event(2, "dense/MatMul:MatMul", 10, 20)
        for allocator in allocators:
            space.free(2, 40, space.allocate(2, 15, 1 << 20, allocator=allocator, tf_op="dense/MatMul", id=7))
        analysed = analysis.analyse(xplane.decode(space.serialized()).trace(0))
        assert analysed.status == "ok"
        assert (analysed.message is not None and "TF_CPU_ALLOCATOR_USE_BFC=true" in analysed.message) == noted


def test_a_what_if_on_a_step_of_several_replicas_reads_the_global_batch():
    """MirroredStrategy runs replica 1's ops under `replica_1/`: the shapes hold a replica's batch, and the
    step's batch is theirs together, the global batch a user passes to `fit` (trial AH: a run at 64 had read
    as 32, and a what-if asked at 64 predicted twice the real rise); the what-if says so."""
    from protos import XSpaceBuilder

    from tb_memory_plugin import whatif

    space = XSpaceBuilder()
    space.event(2, "ExecutorState::Process", 0, 100, id=7)
    for k, prefix in enumerate(("", "replica_1/")):
        space.event(2, f"{prefix}dense/MatMul:MatMul", 10 + 30 * k, 20)
        space.allocate(2, 15 + 30 * k, 16 * 8 * 4, tf_op=f"{prefix}dense/MatMul", id=7, shape="[16,8]")
    step = analysis.analyse(xplane.decode(space.serialized()).trace(0))
    one = whatif.one_step(step, step.spaces[0])
    assert (one.batch, one.replica_batch, one.replicas) == (32, 16, 2)
    assert whatif.global_batch(step) == 32 and whatif.traced_batch(step) == 16
    assert "runs 2 replicas" in one.warning and "its batch (32) is the global batch, 16 per replica" in one.warning
    # Both replicas' [16, 8] tensors scale with the global batch: twice it, twice the bytes.
    assert one.peak_rise(64) == 2 * one.peak_rise(32) == 2 * step.spaces[0].peak_rise_bytes


def test_markers_nested_in_an_outer_marker_are_the_steps():
    """`Trace("epoch", step_num=e)` around Keras' `Profiled batch n`: each executor step is in both
    markers, and is the innermost one's step (not dropped as run across marked steps)."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "epoch", 900, 2500, step_num=7)
    _marked_batches(space, (1, 2))
    steps = _steps(space)
    assert [(n, start) for n, start, _ in steps] == [(1, 1000), (2, 2000)]
    assert [spaces["GPU:0/GPU_0_bfc"][-1] for _, _, spaces in steps] == [("dense/MatMul", 100), ("dense/MatMul", 200)]
    # An executor step across both batches (eager ops') is in the epoch marker, and still no batch's.
    space.event(2, "ExecutorState::Process", 1005, 1290, id=50)
    space.free(2, 1200, space.allocate(2, 1100, 7000, tf_op="eager/Add", id=50))
    space.free(2, 2250, space.allocate(2, 2200, 9000, tf_op="eager/Add", id=50))
    assert [spaces["GPU:0/GPU_0_bfc"] for _, _, spaces in _steps(space)] == [
        [("dense/MatMul", 100), ("eager/Add", 7000)], [("dense/MatMul", 200), ("eager/Add", 9000)]]


def test_an_executor_run_past_its_batch_leaves_it_that_batchs_step():
    """On a loaded machine one of a batch's executor runs may end after the next batch began
    (tests/data/cpu_loaded): its allocations are all in its own batch, so it is that batch's
    step (its executor's, not a marker's without one), cut at its marker; the next batch's events
    stay the next batch's."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    _marked_batches(space, (1, 2))
    space.event(3, "ExecutorState::Process", 1200, 1100, id=1)  # batch 1's, running on to 2300
    profile = xplane.decode(space.serialized())
    assert [(s.step_id, s.start_ps // 10**6, s.end_ps // 10**6) for s in profile.steps] == [(1, 1000, 1300), (2, 2000, 2300)]
    steps = _steps(space)
    assert [(n, start) for n, start, _ in steps] == [(1, 1000), (2, 2000)]
    assert [spaces["GPU:0/GPU_0_bfc"] for _, _, spaces in steps] == [[("dense/MatMul", 100)], [("dense/MatMul", 200)]]


def test_an_executor_step_across_epochs_does_not_swallow_the_marked_steps():
    """tf.data runs its functions under one executor step id across epochs: a step outside any
    marker that spans marked steps is none of them, and a batch number that comes again in the
    next epoch is another step."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(3, "ExecutorState::Process", 0, 5000, id=99)  # tf.data's, spanning both epochs
    space.free(3, 4900, space.allocate(3, 5, 8, tf_op="RangeDataset", id=99))
    _marked_batches(space, (0, 1, 0, 1))
    steps = _steps(space)
    assert [(n, start) for n, start, _ in steps] == [(0, 1000), (1, 2000), (0, 3000), (1, 4000)]  # their markers
    assert [spaces["GPU:0/GPU_0_bfc"][-1] for _, _, spaces in steps] == [
        ("dense/MatMul", 100), ("dense/MatMul", 200), ("dense/MatMul", 300), ("dense/MatMul", 400)]


@settings(max_examples=200, deadline=None)
@given(ends=st.lists(st.integers(0, 50), max_size=60), rounds=st.sampled_from([0, 1, 64]))
def test_enclosing_is_the_nearest_earlier_event_ending_no_sooner(ends, rounds):
    """Pointer jumping, and the sequential stack it falls back to after its rounds, agree with a scan."""
    original = xplane._JUMP_ROUNDS
    xplane._JUMP_ROUNDS = rounds
    try:
        got = xplane._enclosing(np.array(ends, dtype=np.int64)).tolist()
    finally:
        xplane._JUMP_ROUNDS = original
    assert got == [max((j for j in range(i) if ends[j] >= ends[i]), default=-1) for i in range(len(ends))]


def test_an_eager_op_is_of_the_op_type_it_is_named_by():
    """An op run eagerly in a marked step (`tf.random.normal`: `RandomStandardNormal`, `Mul`, `AddV2`)
    allocates under its op type's name, with no kernel event to give its type: its type is its
    name, not `(unknown)`; a name of no such form, and no event, stays unknown."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.free(1, 400, space.allocate(1, 10, 4096, allocator="cpu_bfc", tf_op="AddV2"))
    space.free(1, 400, space.allocate(1, 20, 512, allocator="cpu_bfc", tf_op="scope/thing"))
    profile = xplane.decode(space.serialized())
    (analysed,) = [analysis.analyse(profile.trace(i)) for i in range(len(profile.steps))]
    names = analysed.space(None).names
    types = {names.raw[i]: names.op_type(i) for i in range(len(names.raw))}
    assert types["AddV2"] == "AddV2" and types["scope/thing"] == "(unknown)"


def test_tf_data_at_work_on_its_callers_thread_is_the_input_pipeline():
    """A `map` without num_parallel_calls runs inline, on the thread that asks for the element (the
    iterator being made, `MakeIterator::MapAndBatchDataset`, or `Iterator::...` in a GetNext): what it
    allocates there is the input pipeline's, as on tf.data's own threads; the same op name outside
    such work stays the model's."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.event(1, "MakeIterator::MapAndBatchDataset", 10, 100)
    space.event(1, "resize/ResizeBilinear:ResizeBilinear", 20, 30)
    space.free(1, 400, space.allocate(1, 25, 4096, allocator="cpu_bfc", tf_op="resize/ResizeBilinear"))
    space.free(1, 400, space.allocate(1, 60, 256, allocator="cpu_bfc"))  # no op, inside the iterator's work
    space.event(1, "resize/ResizeBilinear:ResizeBilinear", 200, 30)
    space.free(1, 400, space.allocate(1, 210, 1024, allocator="cpu_bfc", tf_op="resize/ResizeBilinear"))
    ((number, _, spaces),) = _steps(space)
    assert spaces["CPU:0/cpu_bfc"] == [(xplane.INPUT_PIPELINE, 256), ("(input pipeline)/resize/ResizeBilinear", 4096),
                                       ("resize/ResizeBilinear", 1024)]


def test_tf_datas_executor_overlapping_a_training_steps_end_is_no_step():
    """tf.data slicing the next batch in an executor step of its own that began inside a training
    step's window and ended a little after it (a loaded machine's timing): still no step of its own,
    judged by its own allocations, not by the training step's that share its window (an unmarked
    evaluate had read as 7 steps for 6 batches, now and then)."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.event(2, "ExecutorState::Process", 0, 100, id=7)
    space.event(2, "dense/MatMul:MatMul", 10, 80)
    space.free(2, 95, space.allocate(2, 85, 4096, allocator="cpu_bfc", tf_op="dense/MatMul", id=7))
    space.event(3, "ExecutorState::Process", 80, 40, id=9)  # from 80 to 120: past the training step's end
    space._lines[3].name = "tf_data_private_threadpool/1"
    space.event(3, "GatherV2:GatherV2", 82, 10)
    space.free(3, 115, space.allocate(3, 84, 512, allocator="cpu_bfc", tf_op="GatherV2", id=9))
    steps = _steps(space)
    assert len(steps) == 1
    assert steps[0][2]["CPU:0/cpu_bfc"] == [("(input pipeline)/GatherV2", 512), ("dense/MatMul", 4096)]
