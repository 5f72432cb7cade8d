"""Decoding: RunMetadata bytes -> one SpaceTrace per (real device, allocator).

Hand-built protos cover what CPU runs cannot produce (GPU allocators,
pseudo-devices, old TF1 names, broken bytes); the real U-Net trace checks
"allocated" against the proto read directly.
"""

import random

import numpy as np
import pytest

import protos
from tracedata import exec_names
from tb_memory_plugin import analysis, compare_report, figures, report, store, trace as trace_mod
from tb_memory_plugin.sources.run_metadata import decode as decode_run_metadata, scan_devices
from tb_memory_plugin.trace import parse_device


def _by_id(step):
    return {s.trace.id: s for s in step.spaces}


def test_two_cpus_share_one_allocator_whose_readings_are_no_ones_baseline():
    """A real step on two CPU devices (one process): both report the process's one CPU allocator,
    whose readings count both devices' bytes. Each device keeps its own ops' allocations, relative
    to the step's start, and says with whom it shares the allocator."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 256), name="x")
        with tf.device("/cpu:0"), tf.compat.v1.variable_scope("tower0"):
            h = tf.nn.relu(tf.matmul(x, tf.compat.v1.get_variable("w", (256, 512))))
        with tf.device("/cpu:1"), tf.compat.v1.variable_scope("tower1"):
            h = tf.matmul(h, tf.compat.v1.get_variable("w", (512, 256)))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h - x)))
        init = tf.compat.v1.global_variables_initializer()
    feed = {x: np.ones((128, 256), np.float32)}
    metadata = tf.compat.v1.RunMetadata()
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        session.run(train, feed)
        session.run(train, feed, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                    run_metadata=metadata)
    raw = metadata.SerializeToString()
    step = store.analyse_bytes(raw)
    assert [space.trace.id.split("/")[0] for space in step.spaces] == ["CPU:0", "CPU:1"]  # by index
    (allocator,) = {space.trace.allocator for space in step.spaces}
    first, second = step.spaces
    assert first.trace.shared_with == (second.trace.id,) and second.trace.shared_with == (first.trace.id,)
    readings = [entry.allocator_bytes_in_use for device in metadata.step_stats.dev_stats
                for node in device.node_stats for entry in node.memory]
    assert max(readings) > 0  # the allocator did report: not used as either's baseline
    for space in step.spaces:
        assert space.baseline == "none" and space.start_bytes is None and space.peak_bytes is None
        assert space.peak_rise_bytes > 0 and space.trace.snapshot_bytes.size == 0
        assert report.device_summary(space, "layer")["shared_with"] == list(space.trace.shared_with)
    assert f"{allocator} is shared by {first.trace.id}, {second.trace.id}" in step.message
    # Each device's ops only: towers stay on their own device.
    assert {path for path, _ in first.top_level("scope")} >= {"tower0"}
    assert "tower0" not in {path for path, _ in second.top_level("scope")}


def test_devices_of_several_tasks_are_told_apart():
    """A parameter server and two workers each have a CPU:0 (an in-process cluster): their spaces
    carry their job and task, so each can be asked for, and `--device` spellings with a task pick
    that task's; a one-task step keeps `CPU:0/cpu`."""
    import protos
    from protos import Mem, Node

    def device(job, task):
        return f"/job:{job}/replica:0/task:{task}/device:CPU:0"

    trace = protos.serialized({
        device(job, task): [Node(f"{job}{task}/op", 0, 2, op="MatMul",
                                 memory=[Mem("mklcpu", [(1, size)], bytes_in_use=size)], outputs=[("mklcpu", size)])]
        for job, task, size in (("ps", 0, 1024), ("worker", 0, 2048), ("worker", 1, 4096))})
    step = store.analyse_bytes(trace)
    assert sorted(_by_id(step)) == ["ps:0/CPU:0/mklcpu", "worker:0/CPU:0/mklcpu", "worker:1/CPU:0/mklcpu"]
    assert {space.trace.id: space.peak_rise_bytes for space in step.spaces} == {
        "ps:0/CPU:0/mklcpu": 1024, "worker:0/CPU:0/mklcpu": 2048, "worker:1/CPU:0/mklcpu": 4096}
    assert trace_mod.same_device("/job:worker/task:1/cpu:0", device("worker", 1))
    assert not trace_mod.same_device("/job:worker/task:1/cpu:0", device("worker", 0))
    assert trace_mod.same_device("/cpu:0", device("ps", 0))  # no task said: any task's CPU:0
    alone = store.analyse_bytes(protos.serialized({device("worker", 0): [Node("op", 0, 2, op="MatMul",
                                                                            memory=[Mem("cpu", [(1, 8)])])]}))
    assert [space.trace.id for space in alone.spaces] == ["CPU:0/cpu"]
    # A variable placed as `replica_device_setter` places it (a task, no device) lives on that task.
    from tb_memory_plugin import resident

    variable = resident.ModelTensor("w", resident.VARIABLE, None, "float32", (4,), 4, 16, "/job:worker/task:1")
    assert resident.home_space(variable, step) == "worker:1/CPU:0/mklcpu"


def test_two_stats_blocks_of_one_device_keep_its_plain_id():
    """One task's CPU:0 written as two blocks (one spelt `/device:CPU:0`): nothing to tell apart,
    the ids stay as a one-task step's."""
    import protos
    from protos import Mem, Node

    nodes = [Node("op", 0, 2, op="MatMul", memory=[Mem("cpu", [(1, 8)])])]
    run = protos.run_metadata({"/job:localhost/replica:0/task:0/device:CPU:0": nodes})
    run.step_stats.dev_stats.add().CopyFrom(run.step_stats.dev_stats[0])
    run.step_stats.dev_stats[1].device = "/device:CPU:0"
    step = store.analyse_bytes(run.SerializeToString())
    assert {space.trace.id for space in step.spaces} == {"CPU:0/cpu"}
    assert scan_devices(run.SerializeToString()) == ["/job:localhost/replica:0/task:0/device:CPU:0", "/device:CPU:0"]


def test_steps_that_allocate_nothing_say_so():
    """Real FULL_TRACE steps that allocate nothing: a no-op has no memory at all, and a variable
    read outputs a buffer that existed before the step, with no allocation record. Neither is
    blamed on the trace level or on TensorFlow 1.x."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        variable = tf.compat.v1.get_variable("v", (64, 64))
        fetches = {"no_op": tf.no_op(name="nothing"), "read": variable.read_value()}
        init = tf.compat.v1.global_variables_initializer()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    steps = {}
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        for name, fetch in fetches.items():
            metadata = tf.compat.v1.RunMetadata()
            session.run(fetch, options=options, run_metadata=metadata)
            steps[name] = store.analyse_bytes(metadata.SerializeToString())
    assert steps["no_op"].status == "no_memory"
    assert "nothing in it does" in steps["no_op"].message and "FULL_TRACE" in steps["no_op"].message
    read = steps["read"]
    assert read.status == "ok" and not any(space.has_curve for space in read.spaces)
    assert all(int(space.trace.allocated.sum()) == 0 for space in read.spaces)
    assert {report.device_summary(space, "layer")["no_curve"] for space in read.spaces} == {"nothing_allocated"}
    assert "Nothing was allocated" in read.message and "1.x" not in read.message


# -- real trace ------------------------------------------------------------------


def test_real_allocated_equals_sum_of_positive_total_bytes(unet_trace):
    """Every execution's "allocated" is the sum of its positive memory[].total_bytes,
    read here straight from the parsed RunMetadata, per allocator."""
    decoded = decode_run_metadata(unet_trace.run_metadata_bytes)
    checked = 0
    for dev in unet_trace.proto.step_stats.dev_stats:
        if "stream:" in dev.device or "memcpy" in dev.device or not dev.node_stats:
            continue
        spaces = [s for s in decoded.spaces if s.device == dev.device]
        assert spaces, dev.device
        allocators = {m.allocator_name for n in dev.node_stats for m in n.memory}
        assert {s.allocator for s in spaces} == allocators
        for space in spaces:
            expected = {}
            for node in dev.node_stats:
                total = sum(m.total_bytes for m in node.memory
                            if m.allocator_name == space.allocator and m.total_bytes > 0)
                if any(m.allocator_name == space.allocator for m in node.memory):
                    expected.setdefault(node.node_name, []).append(total)
            got = {}
            for name, value in zip(exec_names(space), space.allocated.tolist()):
                if name in expected:
                    got.setdefault(name, []).append(value)
            assert got == expected
            if space is spaces[0]:  # the main allocator keeps every execution, in trace order
                assert exec_names(space) == [n.node_name for n in dev.node_stats]
                assert space.allocated.tolist() == [
                    sum(m.total_bytes for m in n.memory if m.allocator_name == space.allocator and m.total_bytes > 0)
                    for n in dev.node_stats]
            checked += int(space.allocated.sum() > 0)
    assert checked >= 1


def test_real_devices_scanned_without_full_decode(unet_trace):
    real = [d.device for d in unet_trace.proto.step_stats.dev_stats
            if d.node_stats and "stream:" not in d.device and "memcpy" not in d.device]
    assert scan_devices(unet_trace.run_metadata_bytes) == real
    assert real == ["/job:localhost/replica:0/task:0/device:CPU:0"]


def test_real_cpu_allocator_name(unet_trace):
    decoded = decode_run_metadata(unet_trace.run_metadata_bytes)
    assert [s.allocator for s in decoded.spaces] == (["mklcpu"] if unet_trace.onednn else ["cpu"])


# -- GPU, pseudo-devices, several allocators ----------------------------------------


def test_gpu_two_spaces_default_is_gpu_and_pseudo_devices_ignored():
    step = store.analyse_bytes(protos.gpu_trace())
    assert step.status == "ok"
    spaces = _by_id(step)
    assert set(spaces) == {"GPU:0/GPU_0_bfc", "GPU:0/cuda_host_bfc", "CPU:0/cpu"}
    # The CPU space rises by 1 MiB, the GPU far less: the accelerator is still the default.
    assert spaces["CPU:0/cpu"].peak_rise_bytes > spaces["GPU:0/GPU_0_bfc"].peak_rise_bytes
    assert step.default_space_id == "GPU:0/GPU_0_bfc"
    assert step.space(None) is spaces["GPU:0/GPU_0_bfc"]
    assert step.trace.devices == [protos.GPU0, protos.CPU0]
    assert scan_devices(protos.gpu_trace()) == [protos.GPU0, protos.CPU0]

    gpu = spaces["GPU:0/GPU_0_bfc"]
    # stream:all / stream:14 / memcpy entries (1 GiB each) are not counted.
    assert gpu.trace.exec_count == 9
    assert int(gpu.trace.allocated.sum()) == 4096 + 8192 + 65536 + 8192 + 8192 + 256 + 4096 + 1024
    assert int(gpu.trace.event_bytes[gpu.trace.event_bytes > 0].sum()) == int(gpu.trace.allocated.sum())
    # Curve by hand: 4096, +8192, +65536 (t=3) -> 77824, -65536 at t=9, +8192 +8192 +256 +4096
    # -> 28 672 at t=20, +1024 at t=31 -> 29 696 (the peak is the conv's scratch at t=3..8).
    assert gpu.peak_rise_bytes == 4096 + 8192 + 65536
    assert gpu.curve.peak_time_us == 3
    assert gpu.baseline == "allocator_bytes_in_use"
    assert gpu.start_bytes == 1_000_000
    assert gpu.snapshot_gap == 0

    host = spaces["GPU:0/cuda_host_bfc"]
    assert host.trace.device == protos.GPU0
    assert exec_names(host.trace) == ["gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput"]
    assert host.peak_rise_bytes == 512
    assert host.baseline == "none" and host.start_bytes is None
    # Temp/persistent belong to the device's main allocator only.
    assert int(host.trace.temp.sum()) == 0
    assert int(gpu.trace.temp.sum()) == 65536


def test_gpu_node_names_are_mapped():
    gpu = _by_id(store.analyse_bytes(protos.gpu_trace()))["GPU:0/GPU_0_bfc"]
    names = exec_names(gpu.trace)
    layout = names.index(protos.LAYOUT_NAME)
    assert gpu.op_type(layout) == "Transpose (layout)"
    assert gpu.kind(layout) == "layout_transpose"
    assert gpu.kernel_of(layout) == "Transpose"

    scope_tree = gpu.tree("scope")
    unet01 = scope_tree.index["shared_model/unet_01"]
    raw_in_unet01 = {names[i] for i in scope_tree.executions(unet01)}
    assert protos.LAYOUT_NAME in raw_in_unet01
    assert "shared_model/unet_01/Conv2D" in raw_in_unet01
    # The layout transpose's bytes are the scope's: 8192 held at the peak? No: it runs
    # after the peak (t=14), so its at-peak is 0 but its allocated is there.
    assert int(gpu.exec_figures[layout, figures.ALLOCATED]) == 8192
    # ConstantFolding/ prefix stripped: charged to shared_model/unet_02.
    folded = names.index("ConstantFolding/shared_model/unet_02/Conv2D-folded-1")
    assert scope_tree.paths[scope_tree.leaf_of_exec[folded]] == "shared_model/unet_02/Conv2D"
    # Feed.
    arg = names.index("_arg_frames_0_0")
    assert gpu.op_type(arg) == "_Arg"
    assert figures.CATEGORIES[gpu.category[arg]] == "inputs"
    assert scope_tree.paths[scope_tree.leaf_of_exec[arg]] == "(feeds)/frames"
    # Fused op: op type from the timeline label when there is no graph.
    relu = names.index("shared_model/unet_01/Relu")
    assert gpu.op_type(relu) == "_FusedConv2D"
    # A node with no memory is kept with zero figures.
    shape = names.index("shared_model/unet_01/Shape")
    assert gpu.exec_figures[shape].tolist() == [0] * len(figures.FIGURES)
    # The peak's op is the conv (its scratch makes the peak).
    assert names[gpu.peak_exec()] == "shared_model/unet_01/Conv2D"


def test_gpu_at_peak_split_and_temporaries():
    gpu = _by_id(store.analyse_bytes(protos.gpu_trace()))["GPU:0/GPU_0_bfc"]
    names = exec_names(gpu.trace)
    at_peak = dict(zip(names, gpu.exec_figures[:, figures.AT_PEAK].tolist()))
    assert at_peak["_arg_frames_0_0"] == 4096
    assert at_peak["shared_model/unet_01/Conv2D"] == 8192 + 65536
    assert sum(at_peak.values()) == gpu.peak_rise_bytes
    conv = names.index("shared_model/unet_01/Conv2D")
    assert gpu.category_split([conv])[figures.TEMPORARIES] == 65536  # freed inside the op
    assert gpu.category_split([conv])[figures.ACTIVATIONS] == 8192


def test_stream_suffix_on_real_device_names():
    step = store.analyse_bytes(protos.stream_name_trace())
    space = step.space(None)
    tree = space.tree("scope")
    leaves = {tree.paths[tree.leaf_of_exec[i]] for i in range(space.trace.exec_count)}
    assert leaves == {"shared_model/unet_03/Conv2D", "shared_model/unet_03/BiasAdd"}
    assert space.peak_rise_bytes == 4096
    # The graph's op types are found under the cut name.
    graph_ops = {"shared_model/unet_03/Conv2D": "Conv2D", "shared_model/unet_03/BiasAdd": "BiasAdd"}
    with_graph = analysis.analyse(decode_run_metadata(protos.stream_name_trace()), graph_ops).space(None)
    assert [with_graph.op_type(i) for i in range(2)] == ["Conv2D", "BiasAdd"]


# -- old TF1 logs -------------------------------------------------------------------


def test_pinned_host_memory_is_never_a_gpus_main_allocator():
    """A GPU step whose pinned host memory (an input batch in cuda_host_bfc) moves more bytes than
    the GPU's own allocator: the GPU's allocator still keeps every execution and the device's
    temp bytes, and is the step's default space."""
    nodes = [
        protos.Node("model/conv/Conv2D", 0, 10, op="Conv2D", temp=4 << 20,
                    memory=[protos.Mem("GPU_0_bfc", [(1, 1 << 20), (9, -(1 << 20))])], outputs=[("GPU_0_bfc", 1 << 20)]),
        protos.Node("IteratorGetNext", 0, 2, op="IteratorGetNext",
                    memory=[protos.Mem("cuda_host_bfc", [(0, 8 << 20), (12, -(8 << 20))])],
                    outputs=[("cuda_host_bfc", 8 << 20)]),
    ]
    step = store.analyse_bytes(protos.serialized({protos.GPU0: nodes}))
    spaces = _by_id(step)
    gpu, host = spaces["GPU:0/GPU_0_bfc"], spaces["GPU:0/cuda_host_bfc"]
    assert (gpu.trace.memory_kind, host.trace.memory_kind) == ("device", "host")
    assert host.peak_rise_bytes > gpu.peak_rise_bytes
    assert step.default_space_id == "GPU:0/GPU_0_bfc"
    assert gpu.trace.exec_count == 2 and int(gpu.trace.temp.sum()) == 4 << 20
    assert host.trace.exec_count == 1 and int(host.trace.temp.sum()) == 0


def test_old_tf1_gpu_names_without_records():
    step = store.analyse_bytes(protos.old_tf1_trace())
    assert step.status == "ok"
    assert "no curve" in step.message
    spaces = _by_id(step)
    assert set(spaces) == {"GPU:0/gpu_bfc", "GPU:0/cuda_host_bfc"}
    assert step.default_space_id == "GPU:0/gpu_bfc"
    gpu = spaces["GPU:0/gpu_bfc"]
    assert gpu.trace.device == protos.OLD_GPU0
    assert not gpu.has_curve
    assert gpu.peak_rise_bytes == 0
    assert gpu.baseline == "none"
    # Stream and memcpy duplicates (1 GiB each) ignored; the bytes in output[] shown.
    assert int(gpu.trace.allocated.sum()) == 4096 + 2048
    assert int(gpu.trace.output.sum()) == 4096 + 4096 + 2048
    summary = report.device_summary(gpu, "scope")
    assert summary["has_curve"] is False and summary["no_curve"] == "no_records"
    assert summary["figures"]["allocated_bytes"] == 6144
    assert summary["figures"]["output_bytes"] == 10240
    assert summary["figures"]["at_peak_bytes"] == 0
    # No curve, no peak: null, in the summary, the curve and a comparison alike.
    assert summary["peak_bytes"] is summary["peak_rise_bytes"] is summary["peak_time_us"] is None
    assert report.curve(gpu, "scope", 100)["peak"] is None
    side = compare_report.side_dict(gpu, "run", "step_1", 1, "run_metadata")
    assert side["peak_bytes"] is side["peak_rise_bytes"] is side["peak_time_us"] is None
    assert spaces["GPU:0/cuda_host_bfc"].trace.output.tolist() == [512]


# -- statuses ---------------------------------------------------------------------------


def test_empty_run_metadata_is_empty():
    for payload in (b"", protos.run_metadata({}).SerializeToString()):
        step = store.analyse_bytes(payload)
        assert step.status == "empty"
        assert step.spaces == []
        assert "FULL_TRACE" in step.message


def test_bytes_read_by_the_decoder_give_the_same_step(unet_trace):
    """The routes hand the decoder a function that reads the blob, so that it can drop the bytes
    once parsed: the step is the same as from the bytes themselves."""
    data = unet_trace.run_metadata_bytes
    reads = []
    from_bytes = report.step_summary(store.analyse_bytes(data), "layer")
    from_reader = report.step_summary(store.analyse_bytes(lambda: reads.append(1) or data), "layer")
    assert reads == [1]
    assert from_reader == from_bytes and from_bytes["devices"]


def test_nodes_without_memory_are_no_memory():
    step = store.analyse_bytes(protos.no_memory_trace())
    assert step.status == "no_memory"
    assert step.spaces == []
    assert "FULL_TRACE" in step.message
    assert "2 node stats" in step.message


@pytest.mark.parametrize("which", ["half", "garbage", "random"])
def test_corrupt_bytes_are_reported_not_raised(unet_trace, which):
    if which == "half":
        data = unet_trace.run_metadata_bytes[: len(unet_trace.run_metadata_bytes) // 2]
    elif which == "garbage":
        data = b"garbage"
    else:
        data = random.Random(1234).randbytes(4096)
    for step in (store.analyse_bytes(data), store.analyse_bytes(lambda: data)):  # bytes, or read by the decoder
        assert step.status == "corrupt"
        assert step.spaces == []
        assert "not a valid RunMetadata" in step.message
        assert f"({len(data)} B)" in step.message
    if which != "half":  # a blob cut in half may still name its device before the cut
        assert scan_devices(data) == []
    assert report.step_summary(step, "layer")["devices"] == []


def test_only_pseudo_devices_is_empty():
    payload = protos.serialized({protos.GPU0_STREAM_ALL: [protos.Node("x:Conv2D", 0, 1, memory=[
        protos.Mem("GPU_0_bfc", [(0, 64)])])]})
    step = store.analyse_bytes(payload)
    assert step.status == "empty"
    assert parse_device(protos.GPU0_STREAM_ALL) is None


def test_node_stats_sizes_are_columns():
    decoded = decode_run_metadata(protos.three_node_trace())
    (space,) = decoded.spaces
    assert exec_names(space) == ["layer_a/Conv2D", "layer_b/MatMul", "layer_c/Relu"]
    # Times are relative to the step's first start (BASE_US + 10).
    assert space.start_us.tolist() == [0, 10, 20]
    assert space.end_us.tolist() == [2, 16, 36]
    assert space.event_time_us.tolist() == [0, 40, 10, 11, 15, 50, 20, 30, 35, 35]
    assert decoded.step_start_us == protos.BASE_US + 10
    assert decoded.duration_us == 46 - 10
    assert space.output.tolist() == [100, 200, 30]
    assert space.temp.tolist() == [50 if i == 1 else 0 for i in range(3)]
    assert np.array_equal(space.event_exec, [0, 0, 1, 1, 1, 1, 2, 2, 2, 2])


def test_repeated_node_and_unnamed_outputs():
    """A node run twice (a loop) is one leaf with two executions; outputs whose
    allocation description names no allocator count for the device's main one."""
    payload = protos.serialized({protos.CPU0: [
        protos.Node("loop/body/MatMul", 0, 2, op="MatMul", memory=[protos.Mem("cpu", [(0, 64), (5, -64)])],
                    outputs=[("", 64)]),
        protos.Node("loop/body/MatMul", 3, 4, op="MatMul", memory=[protos.Mem("cpu", [(3, 32)])],
                    outputs=[("cpu", 32)]),
    ]})
    space = store.analyse_bytes(payload).space(None)
    assert space.trace.output.tolist() == [64, 32]
    assert space.peak_rise_bytes == 96
    tree = space.tree("scope")
    leaf = tree.index["loop/body/MatMul"]
    assert tree.kinds[leaf] == "node" and int(tree.exec_count[leaf]) == 2
    assert int(tree.figures[leaf, figures.AT_PEAK]) == 96
    details = report.scope_details(space, "scope", "loop/body/MatMul")
    assert details["exec_count"] == 2
    assert [n["figures"]["at_peak_bytes"] for n in details["nodes"]] == [64, 32]
    assert details["time_span"] == {"start_us": 0, "end_us": 4}
    assert report.scope_children(space, "scope", "loop/body")["children"][0]["exec_count"] == 2
