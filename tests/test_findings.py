"""Findings (findings.py) on real TensorFlow traces and hand-built GPU fixtures; every amount is
recomputed from the protos (RunMetadata, GraphDef) here, not through the engine."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tensorboard.compat.proto import config_pb2, graph_pb2

import protos
from protos import GPU0, Mem, Node
from tracedata import start_by_rule
from tb_memory_plugin import cli, findings, graph, report, resident, store

MKL_CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
KiB = 1024


def _kinds(found):
    return [f.kind for f in found]


def _records(rm_bytes: bytes, device_part: str, allocator: str):
    """(node name, time, bytes) of every allocation record of one allocator on a real device."""
    proto = config_pb2.RunMetadata.FromString(rm_bytes)
    out = []
    for dev in proto.step_stats.dev_stats:
        if device_part not in dev.device or "stream" in dev.device or "memcpy" in dev.device:
            continue
        for node in dev.node_stats:
            for mem in node.memory:
                if mem.allocator_name == allocator:
                    out += [(node.node_name, r.alloc_micros, r.alloc_bytes) for r in mem.allocation_records]
    return out


# -- conv_scratch: the big filter ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bigconv(tf_models):
    """bigconv without oneDNN (Eigen's Conv2DBackpropFilter reports its im2col scratch as temp)."""
    return tf_models.traced_step_in_subprocess("bigconv", 1, 32, onednn=False)


def test_conv_scratch_on_the_big_filter(bigconv):
    rm_bytes, gd_bytes = bigconv
    step = store.analyse_bytes(rm_bytes, graph.RunGraph.from_bytes(gd_bytes))
    found = findings.step_findings(step, resident.Model.from_bytes(gd_bytes))
    scratch = [f for f in found if f.kind == findings.CONV_SCRATCH]
    assert len(scratch) == 1
    finding = scratch[0]
    proto = config_pb2.RunMetadata.FromString(rm_bytes)
    node = next(n for d in proto.step_stats.dev_stats for n in d.node_stats
                if n.node_name == "gradients/big_conv/Conv2D_grad/Conv2DBackpropFilter")
    assert finding.bytes == node.memory_stats.temp_memory_size > 8 * 31 * 31 * 3 * 8 * 4
    assert finding.nodes == [node.node_name] and finding.scope == "big_conv"
    # im2col from the GraphDef's shapes: images [1, 32, 32, 3], filter 31x31x3x8, SAME, stride 1.
    graph_def = graph_pb2.GraphDef.FromString(gd_bytes)
    nodes = {n.name: n for n in graph_def.node}
    batch, height, width, c_in = [d.size for d in nodes["images"].attr["shape"].shape.dim]
    k_h, k_w, _, _ = [d.size for d in nodes["big_conv/weights"].attr["shape"].shape.dim]
    assert finding.details["im2col"]["im2col_bytes"] == batch * height * width * k_h * k_w * c_in * 4 == \
        1 * 32 * 32 * 31 * 31 * 3 * 4
    # On a CPU the scratch is TensorFlow's shard buffer (Conv2DCustomBackpropFilterOp): im2col for
    # ceil(working set / one image's work) whole images, 3 here, where the batch holds 1.
    image_positions, patch, c_out = height * width, k_h * k_w * c_in, 8
    work = image_positions * patch + image_positions * c_out + patch * c_out
    shard = -(-(findings.CPU_CONV_WORKING_SET_BYTES // 4) // work)
    assert shard == 3 > batch and finding.bytes == shard * image_positions * patch * 4
    assert finding.details["cpu_working_set"] is True
    assert "not to the batch" in finding.message and "smaller batch does not shrink it" in finding.suggestion
    assert "inter_op_parallelism_threads" in finding.suggestion
    # The op holds its scratch at the peak (it makes it: the step's only big allocation).
    assert finding.details["at_peak_bytes"] == finding.bytes and "It holds 33.8 MiB of it at the peak" in finding.message


@pytest.mark.parametrize("device, allocator, on_cpu", [(GPU0, "GPU_0_bfc", False), (MKL_CPU0, "cpu", True)])
def test_conv_scratch_advice_depends_on_the_device(device, allocator, on_cpu):
    """The same convolution gradient's scratch: on a GPU (cuDNN's workspace) the advice is the filter
    and the batch; on a CPU, TensorFlow's fixed shard buffer, which neither would shrink."""
    scratch, output = 24 << 20, 64 << 10
    nodes = [
        Node("conv/Conv2D", 0, 2, op="Conv2D", memory=[Mem(allocator, [(0, output)])], outputs=[(allocator, output)]),
        Node("gradients/conv/Conv2D_grad/Conv2DBackpropFilter", 3, 9, op="Conv2DBackpropFilter",
             memory=[Mem(allocator, [(3, output), (4, scratch), (8, -scratch)])],
             outputs=[(allocator, output)], temp=scratch),
    ]
    step = store.analyse_bytes(protos.serialized({device: nodes}), None)
    found = [f for f in findings.step_findings(step, None) if f.kind == findings.CONV_SCRATCH]
    assert [(f.bytes, f.nodes, f.details["cpu_working_set"]) for f in found] == [
        (scratch, ["gradients/conv/Conv2D_grad/Conv2DBackpropFilter"], on_cpu)]
    advice = found[0].suggestion
    if on_cpu:
        assert "not to the batch" in found[0].message and "smaller batch does not shrink it" in advice
    else:
        assert "not to the batch" not in found[0].message
        assert "smaller filter" in advice and "FFT" in advice and "split the batch" in advice


def test_findings_holding_nothing_at_the_peak_come_last():
    """A convolution's scratch freed before the peak ranks after a smaller finding the peak holds
    (the Keras demo's fourteen 32 MiB scratch cards, twelve of them freed before its peak, had led the
    list); of equal bytes, the one held at the peak first."""
    def finding(kind, size, at_peak=None):
        return findings.Finding(kind, size, "", [], "", "", details={} if at_peak is None else {"at_peak_bytes": at_peak})

    freed, held = finding("conv_scratch", 32, 0), finding("conv_scratch", 32, 32)
    transposes = finding("layout_transpose", 2)
    assert findings.ranked([freed, transposes, held]) == [held, transposes, freed]


def test_conv_scratch_is_for_convolutions_only():
    """An assign that gives a resource variable a new buffer records it as temp: not scratch, and
    no convolution's advice (as an embedding table updated by Adam showed, 48.8 MiB each)."""
    scratch = 24 << 20
    nodes = [
        Node("conv/Conv2D", 0, 2, op="Conv2D", memory=[Mem("cpu", [(0, 64)])], outputs=[("cpu", 64)]),
        Node("Adam/update_table/AssignVariableOp", 3, 9, op="AssignVariableOp",
             memory=[Mem("cpu", [(4, scratch)])], temp=scratch),
    ]
    step = store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}), None)
    assert [f for f in findings.step_findings(step, None) if f.kind == findings.CONV_SCRATCH] == []
    assert findings.is_convolution("_MklNativeConv2DBackpropInput") and not findings.is_convolution("AssignVariableOp")


def test_a_convolution_fused_into_its_bias_is_checked_by_the_kernel_that_ran():
    """Grappler fuses a convolution into its BiasAdd, which keeps its name and graph type: the
    label names the kernel that ran, and oneDNN's kernel is not TensorFlow's shard buffer."""
    scratch = 24 << 20
    label = "conv/BiasAdd = _MklNativeFusedConv2D(x, w, b)"
    nodes = [Node("conv/BiasAdd", 0, 9, label=label, memory=[Mem("cpu", [(1, 64), (2, scratch), (8, -scratch)])],
                  outputs=[("cpu", 64)], temp=scratch)]
    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="conv/BiasAdd", op="BiasAdd")
    step = store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}), graph.RunGraph.from_bytes(graph_def.SerializeToString()))
    assert step.spaces[0].names.op_types == ["BiasAdd"]
    (found,) = [f for f in findings.step_findings(step, None) if f.kind == findings.CONV_SCRATCH]
    assert found.bytes == scratch and "ran as _MklNativeFusedConv2D" in found.message
    assert found.details["cpu_working_set"] is False and "FFT" in found.suggestion


def _new_buffer_step(late_reading: int = 0, dip: int = 0):
    """A step whose resource variable write takes a new 4 MiB buffer and drops its old one in no
    record, the allocator's readings flat at 10 MiB (and `late_reading` bytes more at the end; `dip`
    bytes less after y/op_0)."""
    base, small, table = 10 << 20, 64 << 10, 4 << 20
    nodes = [Node(f"x/op_{i}", 2 * i, 2 * i + 1, op="Mul", outputs=[("cpu", small)],
                  memory=[Mem("cpu", [(2 * i, small), (2 * i + 1, -small)], bytes_in_use=base)]) for i in range(6)]
    nodes.append(Node("Adam/update_table/AssignVariableOp", 20, 22, op="AssignVariableOp",
                      memory=[Mem("cpu", [(21, table)], bytes_in_use=base)]))  # the old buffer went back
    nodes += [Node(f"y/op_{i}", 30 + i, 31 + i, op="Mul", memory=[Mem("cpu", [], bytes_in_use=base - (dip if i == 0 else 0))])
              for i in range(2)]
    if late_reading:
        nodes.append(Node("y/late", 40, 41, op="Mul", memory=[Mem("cpu", [], bytes_in_use=base + late_reading)]))
    return store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}), None), table


def test_a_resource_variables_new_buffer_is_named_where_the_records_outgrow_the_allocator():
    """An assign that gives a resource variable a new buffer drops its old one in no record: the
    records end the step a variable higher than the allocator. The allocator gap and the step
    growth findings say so, and what the peak shown may be off by."""
    step, table = _new_buffer_step()
    found = {f.kind: f for f in findings.step_findings(step, None)}
    gap = found[findings.ALLOCATOR_GAP]
    assert gap.details["gap_bytes"] == -table and "Adam/update_table/AssignVariableOp" in gap.nodes
    assert "1 resource variable write keeps a new buffer" in gap.message and "4.0 MiB too high" in gap.suggestion
    # What the step left behind is the variable's new buffer: turnover, not growth.
    assert step.spaces[0].curve.end_rise_bytes == table and findings.STEP_GROWTH not in found


def test_a_gap_the_variable_writes_explain_is_headed_by_their_layer():
    """The readings' widest gap falls after an unrelated op (y/op_0, 64 KiB lower still): the finding
    is headed by the writes' layer and what they explain, not by that op (a stranger's partitioned
    embedding's 1.5 MiB update had read "499.5 KiB in MatMul_grad")."""
    step, table = _new_buffer_step(dip=64 << 10)
    (gap,) = [f for f in findings.step_findings(step, None) if f.kind == findings.ALLOCATOR_GAP]
    assert gap.details["gap_bytes"] == -(table + (64 << 10)) and gap.details["time_us"] == 31  # after y/op_0
    assert gap.scope == "table" and gap.bytes == table + (64 << 10)
    assert "Adam/update_table/AssignVariableOp" in gap.nodes


def _copying_update_step(read_after: bool, later_peak: bool = False):
    """(serialized RunMetadata, analysed step) of a real step that updates a 1 MiB resource variable
    while a weight summary's read of it is still to run (`read_after`), or after that read; with
    `later_peak`, a 4 MiB tensor made after the summary (which gives the old buffer back) is its peak."""
    import tensorflow as tf
    from tracedata import traced_graph_step

    tf1 = tf.compat.v1
    graph_ = tf.Graph()
    with graph_.as_default():
        var = tf1.get_variable("w", (512, 512), use_resource=True)
        read = var.read_value()
        summary_input = read if read_after else tf.identity(read) * 2.0
        with tf.control_dependencies([summary_input]):
            update = tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=0.1, delta=tf.ones((512, 512)),
                                                             name="apply")
        with tf.control_dependencies([update]):
            train = tf1.summary.histogram("w", summary_input)
        if later_peak:
            with tf.control_dependencies([train]):
                train = [train, tf.reduce_sum(tf.random.uniform((1024, 1024)) * 2.0 + 1.0)]
        init = tf1.global_variables_initializer()
    data = traced_graph_step(graph_, init, train, {})
    return data, store.analyse_bytes(data)


def test_an_update_that_copies_its_variable_says_what_read_it():
    """A weight summary fetched with the update reads the variable while it is updated: TensorFlow
    copies the variable first, and both buffers are held (a trial's Saver in the traced step held
    its weights twice, shown as the optimizer's bytes with nothing to say why)."""
    data, step = _copying_update_step(read_after=True)
    (copies,) = [f for f in findings.step_findings(step, None) if f.kind == findings.VARIABLE_COPIES]
    kept = sum(b for name, _, b in _records(data, "CPU:0", step.spaces[0].trace.allocator) if name == "apply")
    assert kept == 512 * 512 * 4 == copies.bytes == copies.details["at_peak_bytes"]
    assert copies.nodes == ["apply"] and copies.details["readers"] == ["HistogramSummary"]
    assert "HistogramSummary" in copies.message and "Session.run of its own" in copies.suggestion
    # The peak after the summary gave the old buffer back (in no record: an earlier step's): the records
    # count it still, the allocator's readings do not, and only one copy was held then. Not flagged; the
    # allocator gap says the peak shown is too high by as much.
    data, step = _copying_update_step(read_after=True, later_peak=True)
    found = findings.step_findings(step, None)
    assert findings.VARIABLE_COPIES not in _kinds(found), [f.message for f in found]
    (gap,) = [f for f in found if f.kind == findings.ALLOCATOR_GAP]
    assert "apply" in gap.nodes and "1.0 MiB too high" in gap.suggestion
    # The same update after the read is done: in place, no copy, no finding.
    data, step = _copying_update_step(read_after=False)
    assert not [name for name, _, _ in _records(data, "CPU:0", step.spaces[0].trace.allocator) if name == "apply"]
    assert findings.VARIABLE_COPIES not in _kinds(findings.step_findings(step, None))


def _own_copy_step(reader: str | None):
    """A hand-built step (the timing a real one shows in most runs, not all: an embedding under TF1's
    sparse Adam, whose slots' assigns of `m * beta1` take new buffers): an assign's new 1 MiB buffer
    held at the peak, and a `reader` op beside it, or none."""
    mib = 1 << 20
    nodes = [Node("Adam/update_emb/mul", 1, 2, op="Mul", outputs=[("cpu", mib)],
                  memory=[Mem("cpu", [(1, mib), (5, -mib)])]),
             Node("Adam/update_emb/AssignVariableOp", 3, 4, op="AssignVariableOp", memory=[Mem("cpu", [(3, mib)])]),
             Node("loss/big", 6, 7, op="Mul", outputs=[("cpu", 2 * mib)],
                  memory=[Mem("cpu", [(6, 2 * mib), (8, -2 * mib)])])]
    if reader:
        nodes.append(Node("save/reader", 0, 1, op=reader))
    return store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}), None)


def test_an_updates_own_copies_do_not_send_the_user_after_a_reader():
    """Nothing but the update reads the variable: the finding names no reader and sends the user to
    none (a stranger's seq2seq under sparse Adam had been told to run its readers in a Session.run of
    their own); beside a save, it says to move the save."""
    (found,) = [f for f in findings.step_findings(_own_copy_step(None), None) if f.kind == findings.VARIABLE_COPIES]
    assert found.bytes == 1 << 20 and found.nodes == ["Adam/update_emb/AssignVariableOp"]
    assert found.details["readers"] == [] and "Run what reads the variables" not in found.suggestion
    assert found.suggestion.startswith("No checkpoint save or weight summary ran in this step")
    assert "the new buffers are the updates' own" in found.suggestion
    (saved,) = [f for f in findings.step_findings(_own_copy_step("SaveV2"), None) if f.kind == findings.VARIABLE_COPIES]
    assert saved.details["readers"] == ["SaveV2"] and "Session.run of its own" in saved.suggestion
    assert "the updates' own" not in saved.suggestion


def test_readings_a_little_below_the_peak_take_only_that_much_off_the_copies():
    """Readings below the records' peak say an old buffer went back before it, by that much: the copies
    held at the peak are less by as much, not none (a trial's sparse Adam, 49.2 MiB of copies at a peak
    0.31 MiB above its largest reading, had been told of none)."""
    mib, start = 1 << 20, 10 << 20
    nodes = [Node("Adam/update_emb/mul", 1, 2, op="Mul", outputs=[("cpu", 4 * mib)],
                  memory=[Mem("cpu", [(1, 4 * mib), (5, -4 * mib)], bytes_in_use=start + 4 * mib)]),
             Node("Adam/update_emb/AssignVariableOp", 3, 4, op="AssignVariableOp",
                  memory=[Mem("cpu", [(3, 4 * mib)], bytes_in_use=start + 8 * mib - 300 * 1024)]),
             Node("loss/add", 6, 7, op="AddV2", outputs=[("cpu", 1024)],
                  memory=[Mem("cpu", [(6, 1024)])])]
    step = store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}), None)
    space = step.space(None)
    assert space.start_bytes == start and space.peak_bytes == start + 8 * mib
    (copies,) = [f for f in findings.step_findings(step, None) if f.kind == findings.VARIABLE_COPIES]
    assert copies.bytes == 4 * mib - 300 * 1024 and copies.nodes == ["Adam/update_emb/AssignVariableOp"]
    # The node listed holds the records' 4 MiB: the message says why the headline is less (trial AA had read
    # 26.6 MiB above a list adding up to 57.6 MiB).
    assert ("3.7 MiB held at the peak (46% of the peak rise; the records' 4.0 MiB, less what the allocator's "
            "readings show was given back before the peak: allocator_gap): Adam/update_emb/AssignVariableOp "
            "(4.0 MiB)") in copies.message


def _traced_steps(build, count: int = 3) -> list:
    """(step number, analysed step) of `count` FULL_TRACE runs in one session of the graph `build(tf)`
    makes (it returns its train op; fed nothing), after a warm-up run."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph_ = tf.Graph()
    with graph_.as_default():
        train = build(tf)
        init = tf1.global_variables_initializer()
    steps = []
    with models._session(graph_) as session:
        session.run(init)
        session.run(train)
        for number in range(1, count + 1):
            metadata = tf1.RunMetadata()
            session.run(train, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
            steps.append((number, store.analyse_bytes(metadata.SerializeToString())))
    return steps


def test_values_assigned_to_variables_are_turnover_not_growth():
    """An optimizer written with assigns, as BERT's is (`m.assign(0.9 * m + 0.1 * g)`): each
    variable's new buffer is made by a `Mul`, forwarded in place through the ops after it into the
    assign. Every step leaves those buffers behind, as much each time: turnover, no step_growth (a
    sweep's BERT had been told 10.8 MiB grew every step)."""
    def build(tf):
        tf1 = tf.compat.v1
        x = tf.random.stateless_uniform((32, 256), seed=(1, 2))
        params = [tf1.get_variable(f"dense_{i}/kernel", (256, 256), use_resource=True) for i in range(3)]
        h = x
        for param in params:
            h = tf.nn.relu(tf.matmul(h, param))
        loss = tf.reduce_mean(tf.square(h))
        updates = []
        with tf.name_scope("adam_wd"):
            for param, grad in zip(params, tf.gradients(loss, params)):
                m = tf1.get_variable(f"{param.op.name}/adam_m", param.shape, trainable=False, use_resource=True,
                                     initializer=tf1.zeros_initializer())
                next_m = 0.9 * m + 0.1 * grad
                update = next_m / (tf.sqrt(tf.abs(next_m)) + 1e-6) + 0.01 * param
                updates += [param.assign(param - 1e-3 * update), m.assign(next_m)]
        return tf.group(*updates)

    steps = _traced_steps(build)
    for _, step in steps:
        space = step.space(None)
        left = space.curve.end_rise_bytes
        assert left >= 6 * 256 * 256 * 4  # every variable and slot got a new buffer
        kept = findings._kept_variable_buffers(space, smallest=1)
        assert sum(b for _, b in kept) * 10 >= left * 9
        assert any(space.names.op_types[space.names.graph_names.index(name)] == "Mul" for name, _ in kept)
        assert findings.STEP_GROWTH not in {f.kind for f in findings.step_findings(step, None, steps)}


def test_a_fetched_tensor_is_returned_not_grown():
    """A step that fetches a big tensor (`sess.run([train, big])`) ends with it held: the session hands
    it to Python after the step's last record, and the next step starts where this one did. That is
    no step_growth (a stranger fetching 31 MiB each step had been told it grew every step); the
    tensor is found from `_retval_<name>` through the Identity that forwards it."""
    def build(tf):
        w = tf.compat.v1.get_variable("proj/w", (256, 256), use_resource=True)
        x = tf.random.stateless_uniform((64, 256), seed=(1, 2))
        h = tf.matmul(x, w)
        big = tf.identity(tf.tile(h, [16, 1], name="proj/Tile"), name="proj/big")  # 1 MiB
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        return [train, big]

    steps = _traced_steps(build)
    big = 16 * 64 * 256 * 4
    for _, step in steps:
        space = step.space(None)
        assert space.curve.end_rise_bytes >= big  # held at the step's end
        fetched = [space.names.raw[i] for i in np.flatnonzero(findings._fetched(space))]
        assert "proj/Tile" in fetched and "proj/big" in fetched, fetched
        assert findings._grown(space) == space.curve.end_rise_bytes - int(findings.left_behind(space)[
            space.names.raw.index("proj/Tile")]) < findings.STEP_GROWTH_MIN_BYTES
        assert findings.STEP_GROWTH not in {f.kind for f in findings.step_findings(step, None, steps)}


@pytest.mark.parametrize("queued", [False, True])
def test_a_fetched_in_place_result_is_returned_unless_a_queue_keeps_it(queued):
    """`h = relu(x @ w)` fetched: the Relu wrote into the MatMul's buffer (it allocated nothing), so
    the fetch returns the MatMul's bytes: no growth. Also enqueued into a queue nothing dequeues,
    the same bytes stay in the queue: growth every step (a stranger's leak, fetched too, had been
    read as returned)."""
    def build(tf):
        w = tf.compat.v1.get_variable("net/w", (256, 256), use_resource=True)
        x = tf.random.stateless_uniform((1024, 256), seed=(1, 2))
        h = tf.nn.relu(tf.matmul(x, w, name="net/MatMul"), name="net/h")  # 1 MiB
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        if not queued:
            return [train, h]
        queue = tf.queue.FIFOQueue(100, [tf.float32], shapes=[(1024, 256)], name="leakq")
        return [train, h, queue.enqueue([h], name="enq")]

    steps = _traced_steps(build)
    for _, step in steps:
        space = step.space(None)
        held = findings.left_behind(space)[space.names.raw.index("net/MatMul")]
        assert held >= 1024 * 256 * 4
        fetched = {space.names.raw[i] for i in np.flatnonzero(findings._fetched(space))}
        assert ("net/MatMul" in fetched) == (not queued), fetched
        growth = findings.STEP_GROWTH in {f.kind for f in findings.step_findings(step, None, steps)}
        assert growth == queued


def test_a_fetched_assign_is_no_fetch_of_the_value_the_variable_keeps():
    """`sess.run(tf1.assign(v, tf.concat([v, x], 0), validate_shape=False))` fetches the assign's
    result, the ref variable: its new buffer (the concat's) is the variable's, kept and growing every
    step. The walk from `_retval_` goes through ops that hand their input on (an Identity's), not
    through an assign, which allocates nothing too: still growth (a review caught it reading none)."""
    def build(tf):
        tf1 = tf.compat.v1
        v = tf1.Variable(tf.zeros((0, 256)), use_resource=False, validate_shape=False, name="cache")
        return tf1.assign(v, tf.concat([v, tf.ones((64, 256)) * 2.0], 0), validate_shape=False)

    steps = _traced_steps(build)
    for _, step in steps:
        space = step.space(None)
        fetched = {space.names.raw[i] for i in np.flatnonzero(findings._fetched(space))}
        assert "Assign" in fetched and "concat" not in fetched, fetched
        assert findings._grown(space) == space.curve.end_rise_bytes
        assert findings.STEP_GROWTH in {f.kind for f in findings.step_findings(step, None, steps)}


def test_a_variable_grown_by_assigning_it_a_bigger_value_is_growth():
    """`cache.assign(tf.concat([cache, x], 0))` gives the variable a new, bigger buffer each step: a
    variable write, but one that leaves more behind every step. That is growth, and said so."""
    def build(tf):
        cache = tf.compat.v1.Variable(tf.zeros((0, 256)), use_resource=True, shape=tf.TensorShape([None, 256]),
                                      name="cache")
        return cache.assign(tf.concat([cache.read_value(), tf.ones((64, 256)) * 2.0], 0))

    steps = _traced_steps(build)
    lefts = [step.space(None).curve.end_rise_bytes for _, step in steps]
    assert lefts[0] < lefts[1] < lefts[2]
    for _, step in steps:
        (growth,) = [f for f in findings.step_findings(step, None, steps) if f.kind == findings.STEP_GROWTH]
        assert growth.bytes == step.space(None).curve.end_rise_bytes


def test_the_peak_shown_is_too_high_by_no_more_than_its_excess_over_the_largest_reading():
    """The real peak is at least the allocator's largest reading: where that reading comes within
    1 MiB of the peak shown, the peak is at most 1 MiB too high, not the 4 MiB given back (as an
    embedding table's sparse Adam step read "up to 22.0 MiB too high" of a peak 1.3 MiB above its
    largest reading); where a reading reaches the peak, it is not said to be too high at all."""
    step, table = _new_buffer_step(late_reading=3 << 20)
    space = step.spaces[0]
    (gap,) = [f for f in findings.step_findings(step, None) if f.kind == findings.ALLOCATOR_GAP]
    over = space.peak_bytes - gap.details["max_reading_bytes"]
    assert 0 < over < table and f"{findings.format_bytes(over)} too high" in gap.suggestion, (over, gap.suggestion)
    # The summary says it beside the peak, the one figure (trial AF had read the headline above the finding).
    assert findings.peak_too_high(space) == gap.details["peak_too_high_bytes"] == over
    assert report.device_summary(space, "layer")["snapshots"]["peak_too_high_bytes"] == over
    step, _ = _new_buffer_step(late_reading=table + (1 << 20))
    gaps = [f for f in findings.step_findings(step, None) if f.kind == findings.ALLOCATOR_GAP]
    assert gaps and all("peak shown may be" not in f.suggestion for f in gaps)
    assert findings.peak_too_high(step.spaces[0]) == 0


# -- graph_constants: a dataset embedded with tf.constant ----------------------------------------------


@pytest.fixture(scope="module")
def run_logdir(tmp_path_factory, tf_models):
    """Real runs: constdata (1.25 MiB of training data as a Const) and growth (a FIFOQueue that
    keeps every step's activations), three traced steps each."""
    root = tmp_path_factory.mktemp("finding_logs")
    tf_models.write_traced_run(str(root / "constdata"), "constdata", 32, 2048, steps=(1, 2))
    tf_models.write_traced_run(str(root / "growth"), "growth", 32, 64, steps=(1, 2, 3))
    return root


def _cli_json(capsys, *argv):
    assert cli.main(["summary", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_graph_constants_names_the_embedded_dataset(capsys, run_logdir):
    from tracedata import read_blob_bytes

    gd_bytes = read_blob_bytes(run_logdir, "constdata", "__run_graph__", ("graphs",))
    graph_def = graph_pb2.GraphDef.FromString(gd_bytes)
    data = next(n for n in graph_def.node if n.name == "dataset/features")
    body = _cli_json(capsys, run_logdir, "--run", "constdata", "--tag", "step_2")
    found = [f for f in body["steps"][0]["findings"] if f["kind"] == "graph_constants"]
    assert len(found) == 1
    finding = found[0]
    assert finding["nodes"] == ["dataset/features"] and finding["scope"] == "dataset"
    assert finding["bytes"] == data.ByteSize() > 2048 * 160 * 4
    assert finding["details"]["graph_bytes"] == len(gd_bytes)
    assert finding["details"]["constants"][0]["tensor_bytes"] == 2048 * 160 * 4
    assert "tf.data" in finding["suggestion"] and "placeholder" in finding["suggestion"]


def test_a_dataset_sliced_from_an_array_is_told_how_to_stop_embedding_it():
    """Dataset.from_tensor_slices puts its array in the graph as a constant: a tf.data user (trial U's
    MonitoredTrainingSession, 1.5 MiB of images) is told that, and how to build the dataset without it, not
    to use tf.data."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        labels = tf.data.Dataset.from_tensor_slices(np.zeros(512, np.int32))  # small: its name scope is taken first
        images = np.zeros((512, 28, 28, 1), np.float32)
        data = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(images), labels)).batch(64)
        batch = tf.compat.v1.data.make_one_shot_iterator(data).get_next()
        tf.identity(batch[0], name="x")
    graph_def = graph.as_graph_def()
    (finding,) = findings.graph_constants(resident.Model.from_nodes(graph_def.node, graph_def.ByteSize()))
    (name,) = finding.nodes
    assert name.endswith("component_0") and finding.bytes >= images.nbytes
    assert name.endswith("_1/component_0")  # the second dataset's scope
    assert finding.suggestion.startswith(f"Dataset.from_tensor_slices (or from_tensors) embeds the arrays it is given "
                                         f"in the graph ({name})")
    assert "make_initializable_iterator" in finding.suggestion


def test_no_graph_constants_in_a_model_without_embedded_data(unet_trace):
    assert findings.graph_constants(resident.Model.from_bytes(unet_trace.graph_def_bytes)) == []


def test_a_huge_graph_without_constants_is_flagged_without_naming_one():
    """A GraphDef near protobuf's limit with no Const node (its size in attributes or a function
    library) is still flagged, by its size alone."""
    from tensorboard.compat.proto import graph_pb2

    graph = graph_pb2.GraphDef()
    graph.node.add(name="x", op="Placeholder")
    graph.node.add(name="y", op="Identity", input=["x"])
    model = resident.Model.from_nodes(graph.node, findings.GRAPH_WARN_BYTES)
    (finding,) = findings.graph_constants(model)
    assert finding.kind == "graph_constants" and finding.bytes == findings.GRAPH_WARN_BYTES
    assert finding.details["constants"] == [] and "no Const node" in finding.message
    assert findings.graph_constants(resident.Model.from_nodes(graph.node, findings.GRAPH_WARN_BYTES - 1)) == []


# -- step_growth: a queue nothing dequeues --------------------------------------------------------------


def test_step_growth_names_the_node_that_keeps_the_bytes(capsys, run_logdir):
    from tracedata import read_blob_bytes

    body = _cli_json(capsys, run_logdir, "--run", "growth")
    assert [s["tag"] for s in body["steps"]] == ["step_1", "step_2", "step_3"]
    for step in body["steps"]:
        records = _records(read_blob_bytes(run_logdir, "growth", step["tag"]), "CPU:0", "mklcpu")
        left = sum(b for _, _, b in records)  # the step's end over its start, from the records
        held = sum(b for name, _, b in records if name == "mlp/hidden/Relu")
        returned = sum(b for name, _, b in records if name == "loss/l2")  # the fetched loss: no growth
        growth = [f for f in step["findings"] if f["kind"] == "step_growth"]
        assert len(growth) == 1, step["findings"]
        finding = growth[0]
        assert finding["bytes"] == left - returned and held == 32 * 1024 * 4 and returned == 4  # batch x hidden x float32
        assert finding["nodes"][0] == "mlp/hidden/Relu" and finding["scope"] == "mlp/hidden"
        assert "besides" not in finding["message"], finding["message"]  # the 4 B loss it returns is no news
        assert finding["details"]["holders"][0] == {"name": "mlp/hidden/Relu", "bytes": held}
        assert [s["step"] for s in finding["details"]["steps"]] == [1, 2, 3]
        assert "queue" in finding["suggestion"]
        # 128 KiB a step is under mklcpu's 256 KiB: the starts do not grow, and the finding says why.
        starts = [s["start_bytes"] for s in finding["details"]["steps"]]
        assert len(set(starts)) == 1, starts
        assert ("the bytes in use before them do not show it, as mklcpu's readings count only its requests of "
                "256.0 KiB and more, and these are smaller.") in finding["message"]


def test_no_step_growth_when_steps_end_where_they_start(capsys, logdir):
    body = _cli_json(capsys, logdir, "--run", "unet")
    assert not any(f["kind"] == "step_growth" for s in body["steps"] for f in s["findings"])


def _queue_between_steps(logdir, batches) -> None:
    """A real TF1 run: a small model's training step traced once at each of `batches`, and before each
    trace another Session.run that enqueues 1 MiB (a new tensor each time) into a queue nothing dequeues."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None, 64), name="x")
        w = tf1.get_variable("w", (64, 512))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.matmul(x, w))))
        queue = tf1.FIFOQueue(100, tf.float32, shapes=[(256, 1024)])
        enqueue = queue.enqueue(tf.random.uniform((256, 1024)))
        init = tf1.global_variables_initializer()
        writer = tf1.summary.FileWriter(str(logdir), graph)
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE)
    with tf1.Session(graph=graph, config=tf1.ConfigProto(inter_op_parallelism_threads=2)) as session:
        session.run(init)
        session.run(train, {x: np.ones((batches[0], 64), np.float32)})
        for step, batch in enumerate(batches, start=1):
            session.run(enqueue)
            metadata = tf1.RunMetadata()
            session.run(train, {x: np.ones((batch, 64), np.float32)}, options=options, run_metadata=metadata)
            writer.add_run_metadata(metadata, f"step_{step}", global_step=step)
    writer.close()


def test_growth_between_traced_steps_is_said(capsys, tmp_path):
    """Memory held by what runs between the traced steps (here another Session.run that enqueues 1 MiB each
    time; trial AB's Keras callback made a variable every batch): each traced step ends where it started,
    but their starts rise by 1 MiB a step, which the steps themselves did not leave. Said on each step,
    naming no holder (the steps' records hold none). A run's steps at several batch sizes, which allocate
    more with the batch, are other work: their starts may differ, and nothing is said."""
    _queue_between_steps(tmp_path / "same", [256, 256, 256])
    _queue_between_steps(tmp_path / "batches", [64, 256, 1024])
    mib = 1 << 20
    body = _cli_json(capsys, tmp_path / "same")
    assert len(body["steps"]) == 3
    for step in body["steps"]:
        (growth,) = [f for f in step["findings"] if f["kind"] == "step_growth"]
        starts = [s["start_bytes"] for s in growth["details"]["steps"]]
        assert [b - a for a, b in zip(starts, starts[1:])] == [mib, mib], starts
        assert growth["bytes"] == growth["details"]["between_steps_bytes"] == 2 * mib
        assert growth["nodes"] == [] and "between them holds more every time" in growth["message"]
    body = _cli_json(capsys, tmp_path / "batches")
    assert len(body["steps"]) == 3
    starts = [step["devices"][0]["start_bytes"] for step in body["steps"]]
    assert starts[0] < starts[1] < starts[2], starts  # the queue grew here too
    assert not [f for step in body["steps"] for f in step["findings"] if f["kind"] == "step_growth"]


def test_one_step_alone_is_compared_with_its_neighbours():
    from tb_memory_plugin import store as store_mod
    from tb_memory_plugin.store import StepRef

    refs = [StepRef("r", f"step_{k}", "graph_tagged_run_metadata", k, float(k)) for k in (1, 2, 3, 4, 5)]
    other_run = StepRef("s", "step_1", "graph_tagged_run_metadata", 1, 0.0)
    assert [r.step for r in findings.compared_refs(refs + [other_run], refs[4])] == [3, 4, 5]
    assert [r.step for r in findings.compared_refs(refs, refs[0])] == [1, 2, 3]
    assert findings.compared_refs(refs[:1], refs[0]) == [refs[0]]
    # A profile's steps are compared within their file: another session is another process (review AE).
    profiled = [StepRef("p", f"profile/{session}/step_{k}", store_mod.PROFILE, k, float(k), f"/{session}.xplane.pb", k)
                for session in ("s1", "s2") for k in (1, 2, 3)]
    assert [r.tag for r in findings.compared_refs(profiled, profiled[4])] == [f"profile/s2/step_{k}" for k in (1, 2, 3)]


# -- layout_transpose: a hand-built GPU step ------------------------------------------------------------

LAYOUT_IN = "shared_model/unet_01/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer"
LAYOUT_OUT = "shared_model/unet_01/BiasAdd-0-1-TransposeNCHWToNHWC-LayoutOptimizer"
MiB = 1 << 20


def _layout_step_nodes():
    """unet_01 on a GPU with NHWC in the graph: grappler transposes its input to NCHW and the
    output back; both copies are alive at the peak (t=30, the backward conv's allocation)."""
    return [
        Node("_arg_frames_0_0", 0, 1, op="_Arg", memory=[Mem("GPU_0_bfc", [(0, 4 * MiB)], bytes_in_use=104 * MiB)],
             outputs=[("GPU_0_bfc", 4 * MiB)]),
        Node(LAYOUT_IN, 2, 3, op="Transpose", memory=[Mem("GPU_0_bfc", [(2, 4 * MiB), (40, -4 * MiB)])],
             outputs=[("GPU_0_bfc", 4 * MiB)]),
        Node("shared_model/unet_01/Conv2D", 4, 8, op="Conv2D",
             memory=[Mem("GPU_0_bfc", [(4, 16 * MiB), (45, -16 * MiB)])], outputs=[("GPU_0_bfc", 16 * MiB)]),
        Node("shared_model/unet_01/BiasAdd", 9, 10, op="BiasAdd",
             memory=[Mem("GPU_0_bfc", [(9, 16 * MiB), (20, -16 * MiB)])], outputs=[("GPU_0_bfc", 16 * MiB)]),
        Node(LAYOUT_OUT, 11, 12, op="Transpose", memory=[Mem("GPU_0_bfc", [(11, 16 * MiB), (50, -16 * MiB)])],
             outputs=[("GPU_0_bfc", 16 * MiB)]),
        Node("shared_model/unet_02/Conv2D", 13, 15, op="Conv2D",
             memory=[Mem("GPU_0_bfc", [(13, 300 * 1024)])], outputs=[("GPU_0_bfc", 300 * 1024)]),
        Node("gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput", 30, 35, op="Conv2DBackpropInput",
             memory=[Mem("GPU_0_bfc", [(30, 8 * MiB), (60, -8 * MiB)])], outputs=[("GPU_0_bfc", 8 * MiB)]),
    ]


def _at_peak_by_hand(nodes):
    """Net bytes per node up to the peak of the running total (recomputed without the engine)."""
    events = sorted((t, b, n.name) for n in nodes for m in n.memory for t, b in m.records)
    times = sorted({t for t, _, _ in events})
    totals = np.cumsum([sum(b for t2, b, _ in events if t2 == t) for t in times])
    peak_time = times[int(np.argmax(totals))]
    held = {}
    for t, b, name in events:
        if t <= peak_time:
            held[name] = held.get(name, 0) + b
    return held, int(totals.max())


def test_layout_transposes_per_layer_with_the_format_to_use():
    nodes = _layout_step_nodes()
    step = store.analyse_bytes(protos.serialized({GPU0: nodes}))
    found = [f for f in findings.step_findings(step) if f.kind == findings.LAYOUT_TRANSPOSE_KIND]
    assert len(found) == 1
    finding = found[0]
    held, rise = _at_peak_by_hand(nodes)
    assert finding.bytes == held[LAYOUT_IN] + held[LAYOUT_OUT] == 20 * MiB
    assert finding.scope == "shared_model/unet_01" and finding.device == "GPU:0/GPU_0_bfc"
    assert finding.nodes == [LAYOUT_OUT, LAYOUT_IN]  # largest first
    assert finding.details["graph_format"] == "NHWC" and finding.details["device_format"] == "NCHW"
    assert finding.details["share_of_peak"] == pytest.approx(20 * MiB / rise)
    assert "NCHW" in finding.suggestion and "channels_first" in finding.suggestion
    assert "layout_optimizer" in finding.suggestion


def test_small_layout_transposes_are_not_findings():
    # protos.gpu_trace: one 8 KiB transpose, below the 64 KiB floor.
    step = store.analyse_bytes(protos.gpu_trace())
    assert findings.LAYOUT_TRANSPOSE_KIND not in _kinds(findings.step_findings(step))


# -- allocator_gap ----------------------------------------------------------------------------------------------


def _gap_step(b_in_use: int):
    """Three ops; the allocator reads 100 MiB before the step, and `b_in_use` after b/Conv2D,
    where the records' running total is 16 MiB."""
    nodes = [
        Node("a/Conv2D", 0, 2, op="Conv2D", memory=[Mem("GPU_0_bfc", [(0, 8 * MiB)], bytes_in_use=108 * MiB)],
             outputs=[("GPU_0_bfc", 8 * MiB)]),
        Node("b/Conv2D", 3, 5, op="Conv2D", memory=[Mem("GPU_0_bfc", [(3, 8 * MiB)], bytes_in_use=b_in_use)],
             outputs=[("GPU_0_bfc", 8 * MiB)]),
        Node("c/Relu", 6, 7, op="Relu", memory=[Mem("GPU_0_bfc", [(6, 4 * MiB), (9, -20 * MiB)],
                                                    bytes_in_use=120 * MiB)], outputs=[("GPU_0_bfc", 4 * MiB)]),
    ]
    return store.analyse_bytes(protos.serialized({GPU0: nodes}))


def test_allocator_gap_states_the_amount():
    # After the conv the allocator reads 3 MiB more than the records say.
    step = _gap_step(119 * MiB)
    found = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert len(found) == 1
    # By hand: readings minus the records' running total: 100, 103, 100 MiB; the baseline is the median.
    offsets = [108 * MiB - 8 * MiB, 119 * MiB - 16 * MiB, 120 * MiB - 20 * MiB]
    assert found[0].bytes == max(offsets) - sorted(offsets)[1] == 3 * MiB
    assert found[0].nodes == ["b/Conv2D"] and found[0].details["above_bytes"] == 3 * MiB
    assert step.space(None).snapshot_gap == 3 * MiB
    assert found[0].suggestion.startswith("Look for memory allocated outside the traced ops")


def test_allocator_gap_names_the_ops_after_which_the_readings_climb():
    """Readings that climb above the records twice (after b/Conv3D by 6 MiB, after d/Conv3D by 10 MiB more),
    and back: the finding names both ops, largest climbs first in time order, not only the reading where
    the excess was widest."""
    def node(name, start, allocs, reading):
        return Node(name, start, start + 1, op=name.split("/")[1],
                    memory=[Mem("GPU_0_bfc", allocs, bytes_in_use=reading)])

    nodes = [
        node("a/MatMul", 0, [(0, 4 * MiB)], 104 * MiB),  # records 4 MiB: at the start of 100 MiB
        node("b/Conv3D", 2, [(2, 4 * MiB)], 114 * MiB),  # records 8: 6 MiB above
        node("c/Relu", 4, [(4, 1 * MiB)], 115 * MiB),  # records 9: still 6 above
        node("d/Conv3D", 6, [(6, 1 * MiB)], 126 * MiB),  # records 10: 16 above
        node("e/Relu", 8, [(8, -6 * MiB)], 104 * MiB),  # records 4: at the start again
        node("f/Relu", 10, [(10, 1 * MiB)], 105 * MiB),
        node("g/Relu", 12, [(12, 1 * MiB)], 106 * MiB),
    ]
    # Stored as written, and with the nodes out of time order (a step's nodes come as their threads wrote
    # them): the climbs are read in time.
    for stored in (nodes, [nodes[i] for i in (2, 0, 4, 3, 1, 6, 5)]):
        step = store.analyse_bytes(protos.serialized({GPU0: stored}))
        (found,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
        assert step.space(None).start_bytes == 100 * MiB and found.details["gap_bytes"] == 16 * MiB
        assert [(c["node"], c["bytes"]) for c in found.details["climbs"]] == \
            [("b/Conv3D", 6 * MiB), ("d/Conv3D", 10 * MiB)]
        assert "climb above the records most after b/Conv3D (+6.0 MiB at 0.003 ms) and d/Conv3D (+10.0 MiB" \
            in found.message
        assert found.nodes[:2] == ["d/Conv3D", "b/Conv3D"]  # the widest first, as before


def test_allocator_gap_below_the_records_says_what_that_means():
    """Readings 3 MiB under the records at one point: not memory the trace misses, so not its advice."""
    step = _gap_step(113 * MiB)
    (found,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert found.details["gap_bytes"] == -3 * MiB and found.nodes == ["b/Conv2D"]
    assert "fall short of the allocation records by up to 3.0 MiB" in found.message
    assert found.suggestion.startswith("Read the step's peak as a rise over its start")


def test_a_reading_taken_before_its_op_freed_a_temporary_is_no_gap():
    """RunMetadata keeps an op's reading at its end, but TensorFlow may read the allocator before the
    op freed its temporary: `moments/variance` reads its 2 MiB temporary above the records' total at
    its end. At some moment of the op the records held exactly that: no gap (CPU steps had been
    flagged for it, 1-3 MiB). A reading no moment of its op explains is still one."""
    def nodes(extra):
        return [
            Node("a/MatMul", 0, 2, op="MatMul", memory=[Mem("GPU_0_bfc", [(0, 4 * MiB)], bytes_in_use=104 * MiB)]),
            Node("bn/moments/variance", 3, 6, op="Mean", memory=[Mem(
                "GPU_0_bfc", [(3, 2 * MiB), (4, 1 * MiB), (5, -2 * MiB)], bytes_in_use=107 * MiB + extra)]),
            Node("c/Relu", 7, 8, op="Relu", memory=[Mem("GPU_0_bfc", [(7, 1 * MiB)], bytes_in_use=106 * MiB)]),
        ]

    step = store.analyse_bytes(protos.serialized({GPU0: nodes(0)}))
    space = step.space(None)
    assert space.start_bytes == 100 * MiB and space.snapshot_gap == 2 * MiB  # at the op's end: 107 against 105
    assert findings.ALLOCATOR_GAP not in _kinds(findings.step_findings(step))
    assert list(space.reading_excess(space.start_bytes, 1)) == [0, 0, 0]
    # 3 MiB above: 1 MiB more than the op ever held, whatever moment it was read at.
    step = store.analyse_bytes(protos.serialized({GPU0: nodes(MiB)}))
    (found,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert found.details["gap_bytes"] == MiB and found.nodes == ["bn/moments/variance"]


def test_allocator_gap_below_the_old_1_mib_floor():
    """A 512 KiB gap in a 1.25 MiB rise (40%): flagged by its share of the step; the same step at
    1/32 of the size (a 16 KiB gap) is under the 64 KiB floor."""
    def nodes(unit):
        return [
            Node("a/MatMul", 0, 2, op="MatMul", memory=[Mem("GPU_0_bfc", [(0, 4 * unit), (6, -4 * unit)],
                                                            bytes_in_use=44 * unit)]),
            Node("b/MatMul", 3, 5, op="MatMul", memory=[Mem("GPU_0_bfc", [(3, unit), (6, -unit)],
                                                            bytes_in_use=45 * unit)]),
            Node("c/Relu", 7, 8, op="Relu", memory=[Mem("GPU_0_bfc", [(7, unit // 4)],
                                                        bytes_in_use=40 * unit + unit // 4 + 2 * unit)]),
            Node("d/Relu", 9, 10, op="Relu", memory=[Mem("GPU_0_bfc", [], bytes_in_use=40 * unit + unit // 4)]),
        ]

    unit = 256 * 1024  # rise 5 units (1.25 MiB) over 40 (10 MiB); after c/Relu the readings are 2 units over
    step = store.analyse_bytes(protos.serialized({GPU0: nodes(unit)}))
    (found,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert step.space(None).start_bytes == 40 * unit and step.space(None).peak_rise_bytes == 5 * unit
    assert found.bytes == found.details["gap_bytes"] == 2 * unit == 512 * 1024 < MiB
    assert found.nodes == ["c/Relu"] and found.details["above_peak_bytes"] == 0
    assert found.scope == ""  # the op that had just finished says when, not where: no scope holds a gap
    assert "exceed the allocation records by up to 512.0 KiB (40% of the peak rise)" in found.message
    small = store.analyse_bytes(protos.serialized({GPU0: nodes(unit // 32)}))
    assert findings.ALLOCATOR_GAP not in _kinds(findings.step_findings(small))


def _rounded_readings_step(unit: int, quiet_ops: int = 6):
    """a/MatMul +768 KiB, b/MatMul +256 KiB with 256 KiB the records miss, c/Relu -1 MiB, then ops
    that allocate nothing, over a start of 1 MiB and 768 B: the allocator's readings rounded (half up)
    to `unit` (1: exact)."""
    def reading(exact):
        exact += 768  # a start off any round number, as a BFC allocator's bytes in use are
        return (exact + unit // 2) // unit * unit
    nodes = [
        Node("a/MatMul", 0, 2, op="MatMul", memory=[Mem("mklcpu", [(0, 768 * KiB)], bytes_in_use=reading(1792 * KiB))]),
        Node("b/MatMul", 3, 5, op="MatMul", memory=[Mem("mklcpu", [(3, 256 * KiB)],
                                                        bytes_in_use=reading(2048 * KiB + 256 * KiB))]),
        Node("c/Relu", 6, 7, op="Relu", memory=[Mem("mklcpu", [(6, -1024 * KiB)], bytes_in_use=reading(1024 * KiB))]),
    ] + [Node(f"d/Identity_{i}", 8 + 2 * i, 9 + 2 * i, op="Identity",
              memory=[Mem("mklcpu", [], bytes_in_use=reading(1024 * KiB))]) for i in range(quiet_ops)]
    return store.analyse_bytes(protos.serialized({MKL_CPU0: nodes}))


@pytest.mark.parametrize("unit", [512 * KiB, 1])
def test_no_gap_finer_than_the_readings_step(unit):
    """oneDNN's mklcpu on a small step reads 1.5 or 2 MiB after every op while the records move by
    a few hundred KiB: its readings step by 512 KiB and cannot show a 256 KiB gap (a finding on
    every small CPU step). The same gap read by an allocator that counts bytes is one."""
    step = _rounded_readings_step(unit)
    found = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    readings = sorted({int(b) for b in step.space(None).trace.snapshot_bytes})
    if unit > 1:
        assert readings == [1024 * KiB, 2048 * KiB, 2560 * KiB] and findings.reading_unit(readings * 3) == unit
        assert found == []
    else:
        (gap,) = found
        assert gap.details["gap_bytes"] == 256 * KiB and gap.nodes == ["b/MatMul"]


def test_a_few_aligned_readings_are_no_unit():
    """Three readings that happen to fall on 4 MiB boundaries (12, 16, 8 MiB) tell nothing of the
    allocator: the gap they show is flagged (it had been hidden behind a 4 MiB 'unit')."""
    assert findings.reading_unit(np.array([12, 16, 8]) << 20) == 0
    step = _rounded_readings_step(512 * KiB, quiet_ops=0)  # three readings
    assert [f.details["gap_bytes"] for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP] \
        == [512 * KiB - 256 * KiB]


@pytest.mark.parametrize("extra_at", ["peak", "end"])
def test_a_reading_above_the_absolute_peak_is_flagged(extra_at):
    """The allocator reads 512 KiB (2.5% of the 20 MiB rise, under the gap's 5%) more than the
    records say once: at the peak that reading is above `peak_bytes`, flagged; at the end it is not."""
    extra = 512 * 1024
    nodes = [
        Node("a/Conv2D", 0, 2, op="Conv2D", memory=[Mem("GPU_0_bfc", [(0, 8 * MiB), (9, -8 * MiB)],
                                                        bytes_in_use=108 * MiB)]),
        Node("b/Conv2D", 3, 5, op="Conv2D", memory=[Mem("GPU_0_bfc", [(3, 8 * MiB), (9, -8 * MiB)],
                                                        bytes_in_use=116 * MiB)]),
        Node("c/Relu", 6, 7, op="Relu", memory=[Mem("GPU_0_bfc", [(6, 4 * MiB), (9, -4 * MiB)],
                                                    bytes_in_use=120 * MiB + (extra if extra_at == "peak" else 0))]),
        Node("d/Add", 10, 11, op="Add", memory=[Mem("GPU_0_bfc", [(10, MiB)],
                                                    bytes_in_use=101 * MiB + (extra if extra_at == "end" else 0))]),
    ]
    step = store.analyse_bytes(protos.serialized({GPU0: nodes}))
    space = step.space(None)
    assert (space.start_bytes, space.peak_rise_bytes) == (100 * MiB, 20 * MiB)  # the median offset; 8 + 8 + 4
    found = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    if extra_at == "end":
        assert found == []
        return
    (finding,) = found
    assert finding.bytes == extra and finding.nodes == ["c/Relu"]
    assert finding.details["max_reading_bytes"] == 120 * MiB + extra
    assert finding.details["above_peak_bytes"] == 120 * MiB + extra - (100 * MiB + 20 * MiB) == extra
    assert "the allocator saw 512.0 KiB more than the records account for" in finding.message
    assert "120.0 MiB (100.0 MiB before the step + a rise of 20.0 MiB)" in finding.message
    assert "largest reading" in finding.suggestion


def _readings_against_records(rm_bytes: bytes):
    """From the protos: (readings as (time, bytes), each reading minus the records' running total
    then, the peak rise) of mklcpu on the CPU, as figures.md's baseline defines them: against the
    records of the requests mklcpu counts in its readings, 256 KiB or more (TensorFlow's
    mkl_cpu_allocator.h sends smaller ones to malloc, counted in no reading)."""
    every = sorted((t, b) for _, t, b in _records(rm_bytes, "CPU:0", "mklcpu"))
    records = [(t, b) for t, b in every if abs(b) >= 256 * 1024]
    times = np.array(sorted({t for t, _ in every}))
    running = np.cumsum([sum(b for t2, b in records if t2 == t) for t in times])  # same-time events together
    full = np.cumsum([sum(b for t2, b in every if t2 == t) for t in times])
    proto = config_pb2.RunMetadata.FromString(rm_bytes)
    readings = [(n.all_start_micros + n.all_end_rel_micros, m.allocator_bytes_in_use, n.all_start_micros)
                for d in proto.step_stats.dev_stats if d.device == MKL_CPU0 for n in d.node_stats
                for m in n.memory if m.allocator_name == "mklcpu" and m.allocator_bytes_in_use]
    offsets = []
    for when, reading, _ in readings:
        at = np.searchsorted(times, when, side="right") - 1
        offsets.append(reading - (int(running[at]) if at >= 0 else 0))
    return readings, np.array(offsets), max(int(full.max()), 0), times, running


def _least_excess(reading: int, start_bytes: int, began: int, ended: int, times, running) -> int:
    """A reading's excess over the records' total at the moment of its op (from its start to its end,
    the total just before it started included) nearest to none: when in the op it was read is not
    recorded."""
    first, last = np.searchsorted(times, began, side="left"), np.searchsorted(times, ended, side="right")
    totals = [int(running[first - 1]) if first > 0 else 0] + [int(t) for t in running[first:last]]
    candidates = [reading - start_bytes - total for total in totals]
    return min(candidates, key=abs)


def _expected_gap(rm_bytes: bytes):
    """(flagged?, gap, reading above peak_bytes) by figures.md's rule, from the protos."""
    readings, offsets, rise, times, running = _readings_against_records(rm_bytes)
    start = start_by_rule(offsets, [ended for ended, _, _ in readings])
    excess = np.array([_least_excess(reading, start, began, ended, times, running)
                       for ended, reading, began in readings])
    gap = int(excess[np.argmax(np.abs(excess))])
    above_peak = max(max(r for _, r, _ in readings) - (start + rise), 0) if start >= 0 else 0
    values = sorted({r for _, r, _ in readings})
    bits = int(np.bitwise_or.reduce(values))
    # The readings' own step (the power of two they move by), over 8 readings or more.
    unit = bits & -bits if len(values) > 1 and len(readings) >= 8 else 0
    flagged = ((abs(gap) >= max(findings.GAP_MIN_BYTES, findings.GAP_MIN_SHARE * rise) and abs(gap) > unit)
               or (above_peak >= max(findings.GAP_MIN_BYTES, findings.PEAK_SHORT_MIN_SHARE * rise)
                   and above_peak > unit))
    return flagged, gap, above_peak


def test_allocator_gap_on_the_real_mklcpu_step(unet_trace, unet_step):
    """oneDNN allocates through mklcpu without records: the readings exceed them, by an amount read
    here from allocator_bytes_in_use and the records themselves."""
    if not _readings_against_records(unet_trace.run_metadata_bytes)[0]:
        pytest.skip("this TensorFlow reports no allocator_bytes_in_use on mklcpu")
    flagged, gap, above_peak = _expected_gap(unet_trace.run_metadata_bytes)
    found = [f for f in findings.step_findings(unet_step) if f.kind == findings.ALLOCATOR_GAP]
    if not flagged:
        assert found == []
    else:
        assert len(found) == 1 and found[0].bytes == abs(gap) and found[0].details["gap_bytes"] == gap
        assert found[0].details["above_peak_bytes"] == above_peak


def test_a_start_read_before_onednn_takes_memory_no_record_shows():
    """A real U-Net step (tests/data/cpu_onednn) whose oneDNN primitives took 1-11 MiB through mklcpu with
    no record: its readings agree on a start at the step's first reading and its last, and spread above it
    in between. The start is that (figures.md, Baseline), read against the 256 KiB requests; the memory
    shows above the records, where the allocator_gap names the ops after which it was taken."""
    from tracedata import REPO

    data = (REPO / "tests" / "data" / "cpu_onednn" / "unet_shared_encoder_b4.run_metadata.pb").read_bytes()
    readings, offsets, rise, times, running = _readings_against_records(data)
    ends = [ended for ended, _, _ in readings]
    first = int(offsets[ends.index(min(ends))])
    assert first == int(offsets[ends.index(max(ends))])  # the step ends where it began
    assert np.median(offsets) >= first + MiB  # the median had put oneDNN's memory before the step
    space = store.analyse_bytes(data).space(None)
    assert space.readings_count_from == 256 * KiB  # it had read as counting no request, and given no start
    assert space.start_bytes == start_by_rule(offsets, ends) == first
    flagged, gap, above_peak = _expected_gap(data)
    (found,) = [f for f in findings.step_findings(store.analyse_bytes(data)) if f.kind == findings.ALLOCATOR_GAP]
    assert flagged and gap > 0 and found.details["gap_bytes"] == gap and found.details["above_peak_bytes"] == above_peak
    assert found.details["climbs"] and all(c["bytes"] > 0 for c in found.details["climbs"])
    assert "exceed the allocation records" in found.message


def _build_split(batch, size, seed=0, hidden=1024, parts=32):
    """x @ w (a 1 MiB weight), split into 32 parts, each relu'd and scaled, summed, a tf.cond, SGD: on
    mklcpu the allocator's readings run above the records' peak (the sweep's `multi` model)."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(seed)
        x = tf1.placeholder(tf.float32, [batch, size], name="x")
        flag = tf1.placeholder(tf.bool, [], name="flag")
        with tf1.variable_scope("splitter"):
            h = tf.matmul(x, tf1.get_variable("weights", [size, hidden]))
            merged = tf.add_n([tf.nn.relu(p) * float(i + 1) for i, p in enumerate(tf.split(h, parts, axis=1))])
        with tf1.variable_scope("brancher"):
            w = tf1.get_variable("weights", [hidden // parts, 64])
            out = tf.cond(flag, lambda: tf.matmul(merged, w) * 2.0, lambda: tf.tanh(tf.matmul(merged, w)))
        loss = tf.reduce_mean(tf.square(out), name="loss")
        train_step = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)

    def feeds(step=0):
        rng = np.random.RandomState(seed * 1000 + step)
        return {x: rng.uniform(size=(batch, size)).astype(np.float32), flag: bool(step % 2)}

    return models._finish("split", g, loss, train_step, feeds)


def test_mklcpus_readings_are_read_against_the_requests_they_count(tf_models):
    """oneDNN's mklcpu sends requests under 256 KiB to malloc and counts them in no reading, while the
    step stats record them all. A 1 MiB weight and a hundred small requests: against every record the
    readings spread by half a MiB and had read as a start below the weight and a peak under the
    allocator's largest reading (an allocator_gap); against the large requests they are the weight
    and what the large requests hold, to the op (one reading is off by one 256 KiB block)."""
    rm_bytes, gd_bytes = tf_models.traced_step(_build_split, 64, 256)
    if not _readings_against_records(rm_bytes)[0]:
        pytest.skip("this TensorFlow reports no allocator_bytes_in_use on mklcpu")
    records = [b for _, _, b in _records(rm_bytes, "CPU:0", "mklcpu")]
    assert sum(1 for b in records if 0 < b < 256 * 1024) >= 50  # the premise: many small requests
    flagged, _, above_peak = _expected_gap(rm_bytes)
    step = store.analyse_bytes(rm_bytes, graph.RunGraph.from_bytes(gd_bytes))
    space = step.space(None)
    assert space.start_bytes == 256 * 1024 * 4  # `splitter/weights`, [256, 1024] float32: all that was in use
    assert space.snapshot_gap <= 256 * 1024
    assert not flagged and above_peak == 0
    assert [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP] == []


def test_a_real_peak_below_the_allocators_reading_is_flagged():
    """The demo's U-Net (oneDNN's primitives allocate through mklcpu without records): the allocator's
    largest reading is above the absolute peak, which the finding says, by the protos' own figures."""
    from tracedata import REPO, read_blob_bytes

    rm_bytes = read_blob_bytes(REPO / "demo_logs", "unet_b2", "step_3")
    flagged, gap, above_peak = _expected_gap(rm_bytes)
    assert flagged and above_peak > 0
    step = store.analyse_bytes(rm_bytes)
    space = step.space(None)
    (found,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert found.bytes == abs(gap) <= space.snapshot_gap  # the latter at each op's end alone
    assert found.details["above_peak_bytes"] == above_peak == \
        found.details["max_reading_bytes"] - (space.start_bytes + space.peak_rise_bytes)
    assert f"the allocator saw {findings.format_bytes(above_peak)} more than the records account for" in \
        found.message


# -- the summary route carries findings and resident figures ---------------------------------------------------


def test_summary_route_has_findings_and_resident(run_logdir):
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_memory_plugin.loader import MemoryPluginLoader

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(run_logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(run_logdir))
    plugin = MemoryPluginLoader().load(base_plugin.TBContext(data_provider=provider, logdir=str(run_logdir)))
    client = Client(application.TensorBoardWSGI([plugin], data_provider=provider))
    response = client.get("/data/plugin/memory/summary", query_string={"run": "growth", "tag": "step_2"})
    assert response.status_code == 200
    body = json.loads(response.get_data(as_text=True))
    assert [f["kind"] for f in body["findings"]].count("step_growth") == 1
    assert all(set(f) >= {"kind", "bytes", "scope", "nodes", "message", "suggestion"} for f in body["findings"])
    device = body["devices"][0]
    assert device["resident"]["param_count"] == 64 * 1024 + 1024 + 1024  # hidden weights + biases, out weights
    assert {row["name"]: row["resident_bytes"] for row in device["categories"]}["parameters"] == \
        4 * (64 * 1024 + 1024 + 1024)
    assert device["top_scopes"][0]["param_count"] is not None


def test_a_comparison_says_which_sides_peak_an_allocator_gap_puts_in_doubt(capsys, tmp_path):
    """`diff` and the `compare` route carry each side's allocator_gap figure (`readings_gap_bytes`):
    a change in peak is off by as much as a side's peak is (a trial's gradient checkpointing read
    +14 MiB where the allocator's readings moved 6 MiB, with no word of it)."""
    from tb_memory_plugin import compare, compare_report

    def nodes(gap):
        unit = 256 * 1024
        return [Node("a/MatMul", 0, 2, op="MatMul", memory=[Mem("GPU_0_bfc", [(0, 4 * unit), (6, -4 * unit)],
                                                                bytes_in_use=44 * unit)]),
                Node("b/MatMul", 3, 5, op="MatMul", memory=[Mem("GPU_0_bfc", [(3, unit), (6, -unit)],
                                                                bytes_in_use=45 * unit + gap * unit)]),
                Node("c/Relu", 7, 8, op="Relu", memory=[Mem("GPU_0_bfc", [], bytes_in_use=40 * unit)])]

    flagged, clean = (store.analyse_bytes(protos.serialized({GPU0: nodes(gap)})) for gap in (2, 0))
    (finding,) = [f for f in findings.step_findings(flagged) if f.kind == findings.ALLOCATOR_GAP]
    assert findings.ALLOCATOR_GAP not in _kinds(findings.step_findings(clean))
    comparison = compare.compare_steps(flagged, clean)
    body = compare_report.comparison_dict(comparison, compare_report.side_dict(comparison.a, "a", "t", 1, "run_metadata"),
                                          compare_report.side_dict(comparison.b, "b", "t", 1, "run_metadata"))
    assert body["a"]["readings_gap_bytes"] == finding.bytes > 0 and body["b"]["readings_gap_bytes"] is None
    for run, data in (("gapped", protos.serialized({GPU0: nodes(2)})), ("plain", protos.serialized({GPU0: nodes(0)}))):
        protos.write_tagged_run_metadata(tmp_path / run, "step_1", data, 1)
    assert cli.main(["diff", str(tmp_path), "--run", "gapped", "--against", "plain"]) == 0
    out = capsys.readouterr().out
    assert "note: A's allocator readings and its records disagree by up to 512.0 KiB (allocator_gap)" in out, out
    assert "note: B's" not in out


def test_readings_below_the_records_throughout_are_no_memory_the_records_miss():
    """Readings 3, 2 and 1 MiB below the records' running total even before each op ran imply a
    negative start (no usable baseline). Against their median (-6 MiB, with the op's own records'
    window) the last had read as 1 MiB the records miss ("exceed the allocation records"); no
    allocator holds less than nothing, so they are read against none: the records count up to 3 MiB
    the allocator did not hold."""
    nodes = [
        Node("a/MatMul", 0, 2, op="MatMul", memory=[Mem("GPU_0_bfc", [(0, 4 * MiB)])]),  # no reading
        Node("b/MatMul", 3, 5, op="MatMul", memory=[Mem("GPU_0_bfc", [(3, 4 * MiB)], bytes_in_use=1 * MiB)]),
        Node("c/MatMul", 6, 8, op="MatMul", memory=[Mem("GPU_0_bfc", [(6, 4 * MiB)], bytes_in_use=6 * MiB)]),
        Node("d/Relu", 9, 11, op="Relu", memory=[Mem("GPU_0_bfc", [(9, 4 * MiB)], bytes_in_use=11 * MiB)]),
    ]
    step = store.analyse_bytes(protos.serialized({GPU0: nodes}))
    assert step.space(None).start_bytes is None  # the readings imply a negative start
    (gap,) = [f for f in findings.step_findings(step) if f.kind == findings.ALLOCATOR_GAP]
    assert gap.details["gap_bytes"] == -3 * MiB and "fall short of the allocation records by up to 3.0 MiB" in gap.message
    assert "exceed" not in gap.message


def test_variable_writes_the_starts_do_not_show_are_turnover_not_growth():
    """A hand-written optimizer's assigns give its slots new buffers, the values computed for them, kept past the
    step (the old ones go back in no record): 10 MiB left behind in one step, 9 MiB in the next (one write
    fewer: whether a buffer was shared varies), while the start moves by 64 KiB. That is turnover (a trial's LAMB had been told 13.3 MiB
    grew every step); where the start grows by what the steps leave, it is growth."""
    def step(start, writes):
        nodes = [Node("loss/Mean", 0, 1, op="Mean", memory=[Mem("GPU_0_bfc", [(0, MiB), (1, -MiB)],
                                                                 bytes_in_use=start + MiB)])]
        for i, size in enumerate(writes):  # a value computed for each assign, which keeps its buffer
            nodes.append(Node(f"lamb/mul_{i}", 2 + 3 * i, 3 + 3 * i, op="Mul",
                              memory=[Mem("GPU_0_bfc", [(2 + 3 * i, size)], bytes_in_use=start + sum(writes[:i + 1]))]))
            assign = f"lamb/m{i}/AssignVariableOp"  # `m.assign(0.9 * m + ...)`: the value is m's buffer now
            nodes.append(Node(assign, 4 + 3 * i, 4 + 3 * i, label=f"{assign} = AssignVariableOp(m{i}, lamb/mul_{i})"))
        return store.analyse_bytes(protos.serialized({GPU0: nodes}))

    writes = [3 * MiB, 3 * MiB, 3 * MiB]
    for second_start, grows in ((100 * MiB + 64 * KiB, False), (110 * MiB, True)):
        steps = [(1, step(100 * MiB, writes + [MiB])), (2, step(second_start, writes))]
        assert [s.space(None).curve.end_rise_bytes for _, s in steps] == [10 * MiB, 9 * MiB]
        for _, one in steps:
            kinds = {f.kind for f in findings.step_findings(one, None, steps)}
            assert (findings.STEP_GROWTH in kinds) is grows


def test_a_profiles_variable_buffers_replaced_in_the_step_are_no_turnover_that_hides_growth():
    """A profile records the frees of the buffers a variable's update replaced (made before the step: the
    source's `(before this step)`), so a step's new variable buffers add nothing to what it leaves behind.
    Trial Y's ViT fit, whose cached dataset grew the start by a batch a step, had its growth called AdamW's
    turnover on 67 of its 80 steps (450 KiB of new buffers a step against ~400 KiB left). The growth is the
    cache's, and the variables' writes are not named for it."""
    from protos import XSpaceBuilder
    from tb_memory_plugin import analysis
    from tb_memory_plugin.sources import xplane

    space = XSpaceBuilder("/host:CPU")
    variable = space.allocate(1, 0, 600 * KiB, allocator="mklcpu", tf_op="adam/m/Initializer")
    for k, step_id in enumerate((100, 200, 300)):
        start = 1000 * (k + 1)
        space.event(1, "ExecutorState::Process", start, 500, id=step_id)
        space.event(1, "data/cache:CacheDatasetV2", start + 10, 20)
        space.allocate(1, start + 15, 512 * KiB, allocator="mklcpu", tf_op="data/cache", id=step_id)  # kept
        space.event(1, "dense/MatMul:MatMul", start + 40, 20)
        space.free(1, start + 80, space.allocate(1, start + 45, MiB, allocator="mklcpu", tf_op="dense/MatMul",
                                                 id=step_id))
        space.event(1, "adam/AssignSubVariableOp:AssignSubVariableOp", start + 100, 20)
        replaced, variable = variable, space.allocate(1, start + 105, 600 * KiB, allocator="mklcpu",
                                                      tf_op="adam/AssignSubVariableOp", id=step_id)
        space.free(1, start + 110, replaced)
    profile = xplane.decode(space.serialized())
    steps = [(i + 1, analysis.analyse(profile.trace(i))) for i in range(len(profile.steps))]
    assert len(steps) == 3
    last = steps[-1][1]
    assert last.space(None).curve.end_rise_bytes == 512 * KiB
    (growth,) = [f for f in findings.step_findings(last, None, steps) if f.kind == findings.STEP_GROWTH]
    assert growth.nodes == ["data/cache"] and "adam" not in growth.message


def test_the_allocator_gap_names_what_in_the_step_allocates_outside_the_records():
    """The climbs' explanation names what the step ran: oneDNN's convolutions, XLA clusters, else library
    kernels in general (trial AG's transformer, with neither, read that its convolutions did)."""
    from types import SimpleNamespace

    def said(*op_types, device="CPU"):
        return findings._unrecorded_by(SimpleNamespace(op_type_names=sorted(op_types)), device)

    assert said("MatMul", "Conv2DBackpropFilter") == "oneDNN's convolutions allocate outside the records"
    assert said("_XlaRun", "MatMul") == "XLA clusters allocate outside the records"
    assert said("_FusedConv2D", "_XlaRun") == "oneDNN's convolutions and XLA clusters allocate outside the records"
    assert said("MatMul", "Einsum") == "library kernels such as oneDNN's keep workspaces and caches outside the records"
    # On a GPU, NVIDIA's libraries (review AI: a GPU step's convolutions had read as oneDNN's).
    assert said("Conv2D", device="GPU") == "cuDNN's convolutions allocate outside the records"
    assert said("MatMul", device="GPU") == ("library kernels such as cuDNN's and cuBLAS' keep workspaces and caches "
                                            "outside the records")
