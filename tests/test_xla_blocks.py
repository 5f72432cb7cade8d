"""An XLA program's blocks by the ops whose values XLA placed in them (sources/xplane/hlo.py).

On the real JAX GPU profiles in tests/data/jax_gpu (see test_xplane_gpu.py), and on hand-built
HloProtos (TensorFlow's own `hlo_pb2`) for what a real run does not show: a block the allocator
rounded up, bytes that are no HloProto, a run whose blocks are no compiled module's.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tb_memory_plugin import analysis, figures, findings, report
from tb_memory_plugin.figures import CATEGORIES
from tb_memory_plugin.names import UNUSED_SCRATCH as UNUSED, XLA_PROGRAM_OP_TYPE
from tb_memory_plugin.sources import xplane
from tb_memory_plugin.sources.xplane import hlo
from tracedata import decoded_without_hlo, figures_by_node

DATA = Path(__file__).parent / "data" / "jax_gpu"
XLA = Path(__file__).parent / "data" / "xla_gpu"  # Flax and Keras 3 on JAX (its README)
PROGRAM = "jit_train_step"
REAL_RUNS = ["keras_jax", "jax_mlp", "flax_lm", "flax_lm_scan", "flax_cnn_bn", "keras_jax_transformer",
             "jax_remat_policy"]


def _path(run: str) -> Path:
    (path,) = ((DATA if (DATA / run).is_dir() else XLA) / run).glob("plugins/profile/*/*.xplane.pb")
    return path


@pytest.mark.parametrize("op_name, node", [
    ("jit(train_step)/jvp(dense_0)/dot_general", "dense_0/dot_general"),
    ("jit(train_step)/transpose(jvp(dense_0))/transpose", "dense_0/transpose_grad"),
    ("jit(train_step)/jit(main)/transpose(jvp(MLP))/Dense_0/dot_general", "MLP/Dense_0/dot_general_grad"),
    ("jit(train_step)/jvp(relu1)/jit(relu)/max", "relu1/relu/max"),
    ("jit(train_step)/jit(_where)/select_n", "_where/select_n"),  # an inner jit stays, unwrapped
    ("jit(f)/vmap(jvp(enc/block_1))/add", "enc/block_1/add"),  # a slash inside a transformation
    ("jit(train_step)/sub", "sub"),
    # nn.scan(nn.remat(Block)): the scan's loop, Flax's lifting and remat's scopes are JAX's
    ("jit(train_step)/transpose(jvp(LM))/while/body/eval_jaxpr/checkpoint/rematted_computation/blocks/block/"
     "mlp_in/dot_general", "LM/blocks/block/mlp_in/dot_general_grad"),
    ("jit(f)/while/cond/lt", "lt"),
    # jax.checkpoint under jax.named_scope: the backward pass names the scope twice
    ("jit(train_step)/transpose(jvp(block_0))/jvp(block_0)/checkpoint/transpose", "block_0/transpose_grad"),
    ("jit(f)/jvp(block)/block/add", "block/block/add"),  # a scope of the user's inside one of that name stays
    ("jit(f)/block/vmap(block)/add", "block/block/add"),
    ("jit(f)/transpose(jvp(enc))/layer/checkpoint/jvp(layer)/add", "enc/layer/layer/add_grad"),
    ("jit(f)/transpose(jvp(layer))/checkpoint/jvp(layer)/add", "layer/add_grad"),
    ("jit(f)/my_while/body/add", "my_while/body/add"),  # a scope of the user's named so stays
    ("jit(train_step)", ""),
    # a value XLA made from an argument (a weight in another layout) is named by its path
    ("p['conv_1']['kernel']", "(arguments)/p['conv_1']['kernel']"),
    ("", ""),
])
def test_jax_op_names_read_as_node_paths(op_name, node):
    assert hlo.node_name(op_name) == node


@pytest.mark.parametrize("op_name", ["sequential/dense/MatMul", "gradient_tape/sequential/dense/MatMul/MatMul",
                                     "Add_1"])
def test_tensorflow_op_names_stay_as_they_are(op_name):
    assert hlo.node_name(op_name, tensorflow=True) == op_name


def test_tensorflows_bridge_names_arguments_and_the_returned_tuple():
    assert hlo.node_name("XLA_Args", tensorflow=True) == "(arguments)"
    assert hlo.node_name("XLA_Retvals", tensorflow=True) == ""  # the program's own


# -- real JAX profiles ----------------------------------------------------------------------------

def _hlo_protos(data: bytes) -> dict[str, bytes]:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    out = {}
    for plane in xplane_pb2.XSpace.FromString(data).planes:
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for metadata in plane.event_metadata.values():
            for stat in metadata.stats:
                if stat_names.get(stat.metadata_id) == "Hlo Proto":
                    out[metadata.name] = stat.bytes_value
    return out


def _reference_scratch_peak(data: bytes) -> int:
    """The heap simulator's peak of a module's scratch block, by plain loops over TensorFlow's
    own parse of the HloProto: a buffer shared with another holds no bytes of its own, and
    the bytes go when the last buffer sharing them is freed."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto.FromString(data)
    assignment = proto.buffer_assignment
    scratch = [a for a in assignment.buffer_allocations if not (
        a.is_entry_computation_parameter or a.maybe_live_out or a.is_thread_local or a.is_constant) and a.size > 0]
    (block,) = [a for a in scratch if a.size == max(s.size for s in scratch)]
    sizes = {assigned.logical_buffer_id: assigned.size for assigned in block.assigned}
    kinds = hlo_pb2.HeapSimulatorTrace.Event
    best = 0
    for trace in assignment.heap_simulator_traces:
        held = 0
        owner = {}  # buffer -> the buffer whose bytes it holds
        holders = collections.defaultdict(set)  # that buffer -> the buffers holding its bytes
        for event in trace.events:
            if event.buffer_id not in sizes:
                continue
            if event.kind == kinds.ALLOC:
                owner[event.buffer_id] = event.buffer_id
                holders[event.buffer_id] = {event.buffer_id}
                held += sizes[event.buffer_id]
            elif event.kind == kinds.SHARE_WITH and holders.get(owner.get(event.share_with_canonical_id)):
                owner[event.buffer_id] = owner[event.share_with_canonical_id]
                holders[owner[event.buffer_id]].add(event.buffer_id)
            elif event.kind == kinds.FREE and event.buffer_id in owner:
                bytes_of = owner.pop(event.buffer_id)
                holders[bytes_of].discard(event.buffer_id)
                if not holders[bytes_of]:
                    held -= sizes[bytes_of]
            best = max(best, held)
    return best


@pytest.mark.parametrize("run", REAL_RUNS)
def test_a_modules_scratch_holds_the_values_live_at_the_heap_simulators_peak(run):
    protos = {key: data for key, data in _hlo_protos(_path(run).read_bytes()).items()
              if key.startswith(PROGRAM + "(")}
    assert protos
    for data in protos.values():
        module = hlo.read_module(data)
        if not any(not block.is_output for block in module.blocks):
            continue  # a module compiled for another shape, with no scratch
        scratch = max((block for block in module.blocks if not block.is_output), key=lambda b: b.size)
        placed = sum(piece.bytes for piece in scratch.pieces)
        live = scratch.size - scratch.unused
        assert placed <= live == _reference_scratch_peak(data) <= scratch.size
        assert placed >= 0.99 * live  # nearly every value names its op (itself, its fusion's, or its user's)
        assert all(piece.op_name for piece in scratch.pieces)


@pytest.mark.parametrize("run", REAL_RUNS)
def test_programs_blocks_split_by_op_keep_every_figure_of_the_step(run, monkeypatch):
    """The split moves bytes between nodes and nothing else: the curve, the peak, the start, the
    allocator's readings and event count, and every node's bytes (a program's node and its pieces
    together; `(before this step)`'s frees of earlier steps' blocks) are what they were whole."""
    data = _path(run).read_bytes()
    split, whole = xplane.decode(data), decoded_without_hlo(monkeypatch, data)
    assert len(split.steps) == len(whole.steps) == 3
    for i in range(3):
        a, b = analysis.analyse(split.trace(i)), analysis.analyse(whole.trace(i))
        for space, before in zip(a.spaces, b.spaces):
            assert space.trace.id == before.trace.id
            assert (space.peak_rise_bytes, space.start_bytes) == (before.peak_rise_bytes, before.start_bytes)
            assert np.array_equal(space.curve.time_us, before.curve.time_us)
            assert np.array_equal(space.curve.rise_bytes, before.curve.rise_bytes)
            assert np.array_equal(space.trace.snapshot_bytes, before.trace.snapshot_bytes)
            assert np.array_equal(space.trace.snapshot_time_us, before.trace.snapshot_time_us)
            summary, whole_summary = report.device_summary(space, "layer"), report.device_summary(before, "layer")
            assert summary["event_count"] == whole_summary["event_count"]
            assert figures_by_node(space) == figures_by_node(before)
            if space.trace.device_type == "GPU":
                assert space.trace.xla_program_of and PROGRAM in set(space.trace.xla_program_of.values())
                assert before.trace.xla_program_of == {}
                # The op running at the peak is still the program.
                assert summary["peak_node"]["name"] == PROGRAM


def test_a_keras_cnn_on_jax_shows_its_layers_inside_the_program():
    """Keras 3 on JAX: the program held the GPU's whole rise as one node; now its layers hold it,
    with the note saying how much XLA's buffer assignment places."""
    profile = xplane.decode(_path("keras_jax").read_bytes())
    step = analysis.analyse(profile.trace(0))
    gpu = step.space("GPU:0/GPU_0_bfc")
    tree = gpu.tree("layer")
    top = {tree.paths[c]: int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[0]}
    assert {"conv1", "conv2", "relu1", "relu2", "bn2", "pool1", "dense1"} <= set(top), top
    rise = gpu.peak_rise_bytes
    assert top[PROGRAM] < 0.01 * rise  # what XLA placed no op's value in: its padding
    assert top["relu1"] == max(top.values())
    assert step.message.startswith(f"XLA programs ran in this step, holding 100% of the peak rise: {PROGRAM}. ")
    assert "That places 100% of the programs' bytes at the peak" in step.message


def test_a_jax_mlps_backward_values_are_its_layers_gradients():
    """The residual MLP's backward values are its blocks' gradients, in its layers; the plain MLP's
    forward values are its layers' activations, and what its fused SGD update returns (named by the
    gradient it fused) the parameters' new values, the optimizer's."""
    for run, forward, backward in (("jax_remat_policy", "block_0/add", "block_0/transpose_grad"),
                                   ("jax_mlp", "dense_0/dot_general", None)):
        gpu = analysis.analyse(xplane.decode(_path(run).read_bytes()).trace(0)).space("GPU:0/GPU_0_bfc")
        rows = {gpu.trace.name(e): e for e in range(gpu.trace.exec_count)}
        assert CATEGORIES[gpu.category[rows[forward]]] == "activations"
        if backward:
            assert CATEGORIES[gpu.category[rows[backward]]] == "gradients"
            assert gpu.names.leaf_path("layer", gpu.name_code[rows[backward]]).startswith("block_0/")
        else:
            assert CATEGORIES[gpu.category[rows["(updated arguments)/params[0]['w']"]]] == "optimizer"
            step = analysis.analyse(xplane.decode(_path(run).read_bytes()).trace(0))
            assert "(a new value of one of a JAX program's own arguments, not donated" in step.message


# -- hand-built -----------------------------------------------------------------------------------

def _module(name: str = "jit_step", scratch_size: int = 1100) -> bytes:
    """jit(step): x -> a = dense(x) (1000 B, scratch) -> b = its gradient (400 B, returned); XLA
    pads x for it (24 B, scratch, no op name). The heap simulator has a and the pad live together."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_id = name, 1
    entry = module.computations.add(name="main", id=1, root_id=5)
    entry.instructions.add(name="x", opcode="parameter", id=1)
    entry.instructions.add(name="pad", opcode="pad", id=2, operand_ids=[1])
    a = entry.instructions.add(name="a", opcode="fusion", id=3, operand_ids=[2])
    a.metadata.op_name = "jit(step)/jvp(dense)/dot_general"
    b = entry.instructions.add(name="b", opcode="fusion", id=4, operand_ids=[3])
    b.metadata.op_name = "jit(step)/transpose(jvp(dense))/dot_general"
    entry.instructions.add(name="root", opcode="tuple", id=5, operand_ids=[4])
    assignment = proto.buffer_assignment
    for buffer_id, instruction, size in ((1, 1, 64), (2, 2, 24), (3, 3, 1000), (4, 4, 400), (5, 5, 8)):
        buffer = assignment.logical_buffers.add(id=buffer_id, size=size)
        buffer.defined_at.instruction_id = instruction
    parameter = assignment.buffer_allocations.add(index=0, size=64, is_entry_computation_parameter=True)
    parameter.assigned.add(logical_buffer_id=1, size=64)
    returned = assignment.buffer_allocations.add(index=1, size=400, maybe_live_out=True)
    returned.assigned.add(logical_buffer_id=4, size=400)
    scratch = assignment.buffer_allocations.add(index=2, size=scratch_size)
    scratch.assigned.add(logical_buffer_id=2, offset=1000, size=24)
    scratch.assigned.add(logical_buffer_id=3, offset=0, size=1000)
    trace = assignment.heap_simulator_traces.add()
    kinds = hlo_pb2.HeapSimulatorTrace.Event
    for kind, buffer_id in ((kinds.ALLOC, 2), (kinds.ALLOC, 3), (kinds.FREE, 2), (kinds.FREE, 3)):
        trace.events.add(kind=kind, buffer_id=buffer_id)
    return proto.SerializeToString()


def _profile(hlo_bytes: bytes | None, sizes=((512, 400), (1280, 1100)), key: str = "jit_step(7)"):
    """One marked step running `jit_step` once: it allocates each (allocated, requested) block."""
    return analysis.analyse(xplane.decode(_profile_bytes(hlo_bytes, sizes, key)).trace(0)).space("GPU:0/GPU_0_bfc")


def _profile_bytes(hlo_bytes: bytes | None, sizes=((512, 400), (1280, 1100)), key: str = "jit_step(7)") -> bytes:
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.busy_gpu(0, start_us=0)
    space.event(1, "train", 0, 200, step_num=1)
    space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", 10, 100)
    blocks = [space.allocate(1, 20 + i, allocated, requested=requested) for i, (allocated, requested) in enumerate(sizes)]
    for i, addr in enumerate(reversed(blocks)):
        space.free(1, 80 + i, addr)
    if hlo_bytes is not None:
        space.program_hlo(key, hlo_bytes)
    return space.serialized()


def _allocated(space) -> dict[str, int]:
    return {space.trace.name(e): int(space.trace.allocated[e]) for e in range(space.trace.exec_count)}


def test_blocks_split_by_op_with_the_allocators_rounding_kept_whole():
    """The returned block is its op's, rounding and all; the scratch block holds the values live at
    the heap's peak (the pad, named by the op using it, and the dense op's), the bytes no value
    holds then (unused scratch, below the program), and the allocator's rounding (the program's)."""
    space = _profile(_module())
    assert _allocated(space) == {"dense/dot_general_grad": 512, "dense/dot_general": 1024,
                                 "jit_step/(unused scratch)": 1100 - 1024, "jit_step": 1280 - 1100}
    assert space.peak_rise_bytes == 512 + 1280
    assert space.trace.xla_program_of == {"dense/dot_general_grad": "jit_step", "dense/dot_general": "jit_step",
                                          "jit_step/(unused scratch)": "jit_step"}
    assert report.device_summary(space, "layer")["peak_node"]["name"] == "jit_step"


@pytest.mark.parametrize("hlo_bytes, sizes, key", [
    (b"\xff\xff\xff", ((512, 400), (1280, 1100)), "jit_step(7)"),
    (_module(), ((512, 400), (1280, 1000)), "jit_step(7)"),
    (_module(), ((512, 400), (1280, 1100), (256, 8)), "jit_step(7)"),
    (_module(scratch_size=900), ((512, 400), (1280, 900)), "jit_step(7)"),
    (_module(name="jit_other"), ((512, 400), (1280, 1100)), "jit_other(7)"),
], ids=["no HloProto", "a scratch block of another size", "one block more than the module has",
        "live values the block cannot hold", "another program's module"])
def test_programs_stay_whole_where_their_blocks_cannot_be_placed(hlo_bytes, sizes, key):
    """Bytes that are no HloProto, or a run whose blocks are not one module's (another compile of
    the program, another program), leave the program whole: one node, as without its HLO."""
    space = _profile(hlo_bytes, sizes, key)
    allocated = _allocated(space)
    if sizes[1][1] == 900:  # the returned block is still its op's; the scratch cannot be read
        assert allocated == {"dense/dot_general_grad": 512, "jit_step": 1280}
    else:
        assert allocated == {"jit_step": sum(a for a, _ in sizes)}
        assert space.trace.xla_program_of == {}


def test_without_a_heap_trace_values_live_from_their_op_to_their_last_use():
    """XLA's CPU compiler keeps no heap simulator trace: the scratch block holds what the entry
    computation's schedule has live together at its fullest."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto.FromString(_module())
    del proto.buffer_assignment.heap_simulator_traces[:]
    sequence = proto.hlo_module.schedule.sequences[1]
    sequence.instruction_ids.extend([1, 2, 3, 4, 5])  # x, pad, a (uses pad), b (uses a), root
    module = hlo.read_module(proto.SerializeToString())
    scratch = module.blocks[-1]
    # pad lives from 2 to 3 (a uses it), a from 3 to 4: both at 3.
    assert {(p.op_name, p.bytes) for p in scratch.pieces} == {
        ("jit(step)/jvp(dense)/dot_general", 1024)}


def test_a_flax_language_model_shows_its_blocks():
    """Flax names its modules in JAX's name stack: the unrolled blocks are scopes of the model,
    each holding its attention and MLP values; no transformation's or JAX plumbing's name is left."""
    profile = xplane.decode(_path("flax_lm").read_bytes())
    gpu = analysis.analyse(profile.trace(0)).space("GPU:0/GPU_0_bfc")
    placed = set(gpu.trace.xla_program_of)
    assert not any("(" in name.replace(UNUSED, "").replace("(updated arguments)", "") or "jvp" in name
                   or "while/body" in name for name in placed)
    tree = gpu.tree("scope")
    blocks = {tree.paths[c]: int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[tree.entry("LM")]}
    assert {f"LM/block_{i}" for i in range(4)} <= set(blocks), blocks
    assert all(blocks[f"LM/block_{i}"] > 0 for i in range(4))
    inside = {tree.paths[c].rsplit("/", 1)[-1] for c in tree.children[tree.entry("LM/block_0")]}
    assert {"attn", "mlp_in"} <= inside, inside


def test_a_scanned_remat_model_shows_its_scan_and_the_scratch_it_leaves_unused():
    """nn.scan(nn.remat(Block)): the blocks' values are `LM/blocks/block/...` (the scan's loop and
    remat's scopes dropped), backward ones their gradients; XLA's scratch block is much larger than
    the values live in it at once, and that unused part is a node of its own, in the note too."""
    data = _path("flax_lm_scan").read_bytes()
    step = analysis.analyse(xplane.decode(data).trace(0))
    gpu = step.space("GPU:0/GPU_0_bfc")
    placed = set(gpu.trace.xla_program_of)
    assert any(name.startswith("LM/blocks/block/") for name in placed), sorted(placed)[:10]
    assert not any(part in name.split("/") for name in placed for part in ("checkpoint", "eval_jaxpr", "body"))
    assert any(name.startswith("LM/blocks/block/") and name.endswith("_grad") for name in placed)
    (module,) = [hlo.read_module(proto) for key, proto in _hlo_protos(data).items() if key.startswith(PROGRAM + "(")]
    scratch = max((b for b in module.blocks if not b.is_output), key=lambda b: b.size)
    assert scratch.unused > 0.3 * scratch.size  # the loop's carried buffers: XLA's layout leaves much unused
    rows = {gpu.trace.name(e): e for e in range(gpu.trace.exec_count)}
    unused = rows[f"{PROGRAM}/{UNUSED}"]
    assert int(gpu.exec_columns[figures.AT_PEAK][unused]) == int(gpu.trace.allocated[unused]) == scratch.unused
    share = scratch.unused / sum(int(gpu.exec_columns[figures.AT_PEAK][e]) for e in rows.values()
                                 if gpu.names.op_types[gpu.name_code[e]] == XLA_PROGRAM_OP_TYPE)
    assert f"{share:.0%} is scratch that no value holds at the block's own peak (`{PROGRAM}/{UNUSED}`)" \
        in step.message


def test_a_keras_transformer_on_jax_shows_its_attention_and_nested_mlp_layers():
    step = analysis.analyse(xplane.decode(_path("keras_jax_transformer").read_bytes()).trace(0))
    gpu = step.space("GPU:0/GPU_0_bfc")
    tree = gpu.tree("layer")
    top = {tree.paths[c]: int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[0]}
    assert {"mha_0", "mha_1", "ffn_0", "ffn_1", "ln_0a", "ln_1b"} <= set(top), top
    assert sum(top[k] for k in ("mha_0", "mha_1", "ffn_0", "ffn_1")) > 0.7 * gpu.peak_rise_bytes
    inside = {tree.paths[c].rsplit("/", 1)[-1] for ffn in ("ffn_0", "ffn_1") for c in tree.children[tree.entry(ffn)]}
    assert {"up", "down"} <= inside, inside  # the nested Sequential's own layers
    # The note names the unused scratch node that holds the most, one the step has.
    named = step.message.split("no value holds at the block's own peak (`", 1)[1].split("`", 1)[0]
    assert named.endswith(f"/{UNUSED}") and named in gpu.trace.xla_program_of


def test_a_flax_cnns_weight_copies_and_multi_output_fusions_are_named():
    """XLA copies weights into another layout inside the program: those values are named by the
    argument they came from, under `(arguments)`; a multi-output fusion that names no op takes the
    op of the values using its outputs (through `get-tuple-element`), so nearly nothing is left
    on the program's node."""
    gpu = analysis.analyse(xplane.decode(_path("flax_cnn_bn").read_bytes()).trace(0)).space("GPU:0/GPU_0_bfc")
    rows = {gpu.trace.name(e): e for e in range(gpu.trace.exec_count)}
    arguments = [name for name in rows if name.startswith("(arguments)/")]
    assert "(arguments)/p['conv_1']['kernel']" in arguments, sorted(rows)
    own = int(gpu.exec_columns[figures.AT_PEAK][rows[PROGRAM]])
    assert own < 0.01 * gpu.peak_rise_bytes
    tree = gpu.tree("scope")
    cnn = {tree.paths[c] for c in tree.children[tree.entry("CNN")]}
    assert {"CNN/conv_0", "CNN/conv_1", "CNN/bn_1"} <= cnn, cnn


def test_a_free_of_an_earlier_steps_block_stays_before_this_step():
    """Step 2 frees step 1's returned block before its own program runs: that free is
    `(before this step)`'s, whole, not the block's op's (which in step 2 holds what it made)."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.busy_gpu(0, start_us=0)
    returned = None
    for number, at in ((1, 0), (2, 300)):
        space.event(1, "train", at, 200, step_num=number)
        if returned is not None:
            space.free(1, at + 5, returned)
        space.event(1, "CommonPjRtLoadedExecutable::Execute (jit_step)", at + 10, 100)
        returned = space.allocate(1, at + 20, 512, requested=400)
        space.free(1, at + 80, space.allocate(1, at + 21, 1280, requested=1100))
    space.program_hlo("jit_step(7)", _module())
    profile = xplane.decode(space.serialized())
    gpu = analysis.analyse(profile.trace(1)).space("GPU:0/GPU_0_bfc")
    rows = {gpu.trace.name(e): e for e in range(gpu.trace.exec_count)}
    assert int(gpu.trace.live[rows["(before this step)"]]) == -512
    assert int(gpu.trace.allocated[rows["dense/dot_general_grad"]]) == 512
    assert int(gpu.exec_columns[figures.AT_PEAK][rows["dense/dot_general_grad"]]) == 512


def test_two_programs_sharing_op_names_each_keep_their_own_run():
    """`jit_step` holds the peak while it runs; `jit_other`, compiled from the same ops, runs later.
    The ops' values are placed in each by its own HLO, run within their own program's run, and named
    as the program holding most of them. At the peak the program's own scratch and rounding are
    temporaries; the op's value it holds keeps its op's category."""
    from protos import XSpaceBuilder

    space = XSpaceBuilder()
    space.busy_gpu(0, start_us=0)
    space.event(1, "train", 0, 400, step_num=1)
    for program, at, scratch in (("jit_step", 10, 1280), ("jit_other", 200, 1280)):
        space.event(1, f"CommonPjRtLoadedExecutable::Execute ({program})", at, 100)
        space.free(1, at + 90, space.allocate(1, at + 10, 512, requested=400))
        space.free(1, at + 80, space.allocate(1, at + 11, scratch, requested=1100))
    space.program_hlo("jit_step(7)", _module())
    space.program_hlo("jit_other(8)", _module(name="jit_other"))
    gpu = analysis.analyse(xplane.decode(space.serialized()).trace(0)).space("GPU:0/GPU_0_bfc")
    assert gpu.peak_rise_bytes == 512 + 1280
    # One execution of `dense/dot_general` in each program: its bytes, its run.
    dense = {gpu.xla_program_of(e): e for e in range(gpu.trace.exec_count) if gpu.trace.name(e) == "dense/dot_general"}
    assert set(dense) == {"jit_step", "jit_other"}
    at_peak = gpu.exec_columns[figures.AT_PEAK]
    assert (int(at_peak[dense["jit_step"]]), int(at_peak[dense["jit_other"]])) == (1024, 0)
    assert (int(gpu.trace.start_us[dense["jit_step"]]), int(gpu.trace.end_us[dense["jit_step"]])) == (10, 110)
    assert (int(gpu.trace.start_us[dense["jit_other"]]), int(gpu.trace.end_us[dense["jit_other"]])) == (200, 300)
    categories = dict((name, held) for name, held, _ in gpu.by_category())
    # Both blocks are freed while the program runs: what of them is no op's value (its scratch unused
    # then, its rounding) is temporaries; dense/dot_general's value (1024 B) is activations and its
    # gradient's (512 B) gradients, as a value lives from its op to its last use.
    assert (categories["activations"], categories["gradients"]) == (1024, 512)
    assert categories["temporaries"] == 1280 + 512 - 1024 - 512
    # Each program's total is its own: jit_step holds the peak, jit_other nothing then.
    totals = {p.name: (p.at_peak_bytes, p.allocated_bytes) for p in gpu.xla_programs()}
    assert totals == {"jit_step": (1792, 1792), "jit_other": (0, 1792)}


def test_a_metadata_stat_that_does_not_parse_leaves_the_programs_whole():
    """What XLA compiled is optional: a profile whose metadata plane has a stat that does not parse
    decodes, its programs whole."""
    space_bytes = _profile_bytes(_module())
    marker = b"Hlo Proto"
    at = space_bytes.index(_module()[:16])  # the HloProto's bytes, inside its stat
    broken = space_bytes[:at - 2] + b"\x7f" + space_bytes[at - 1:]  # the stat's length now overruns it
    assert marker in broken
    gpu = analysis.analyse(xplane.decode(broken).trace(0)).space("GPU:0/GPU_0_bfc")
    assert _allocated(gpu) == {"jit_step": 512 + 1280}


def test_a_value_used_through_a_bitcast_lives_until_that_use():
    """On CPU (no heap trace) a value is live until the last instruction using it, through the ones
    that only pass it on: `a`, used by `c` through a bitcast, is live beside `d`."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_id = "jit_f", 1
    entry = module.computations.add(name="main", id=1, root_id=5)
    for instruction_id, name, opcode, operands in ((1, "a", "fusion", []), (2, "view", "bitcast", [1]),
                                                   (3, "d", "fusion", []), (4, "c", "fusion", [2, 3]),
                                                   (5, "root", "tuple", [4])):
        instruction = entry.instructions.add(name=name, opcode=opcode, id=instruction_id, operand_ids=operands)
        if opcode == "fusion":
            instruction.metadata.op_name = f"jit(f)/{name}"
    module.schedule.sequences[1].instruction_ids.extend([1, 2, 3, 4, 5])
    assignment = proto.buffer_assignment
    for buffer_id, size in ((1, 1000), (3, 500), (4, 8)):
        assignment.logical_buffers.add(id=buffer_id, size=size).defined_at.instruction_id = buffer_id
    scratch = assignment.buffer_allocations.add(index=0, size=1500)
    scratch.assigned.add(logical_buffer_id=1, offset=0, size=1000)
    scratch.assigned.add(logical_buffer_id=3, offset=1000, size=500)
    (block,) = hlo.read_module(proto.SerializeToString()).blocks
    assert {(p.op_name, p.bytes) for p in block.pieces} == {("jit(f)/a", 1000), ("jit(f)/d", 500)}
    assert block.unused == 0


def test_jax_scopes_numbered_by_the_user_stay_apart():
    """`jax.named_scope("block_<i>")` around `jax.checkpoint`: each block is its own layer (the
    Keras renumbering TensorFlow's names are cleaned of is not JAX's), and the backward pass's
    repeated scope is one (`block_0/transpose_grad`, not `block_0/block_0/...`)."""
    gpu = analysis.analyse(xplane.decode(_path("jax_remat_policy").read_bytes()).trace(0)).space("GPU:0/GPU_0_bfc")
    tree = gpu.tree("layer")
    top = {tree.paths[c]: int(tree.figures[c, figures.AT_PEAK]) for c in tree.children[0]}
    blocks = [f"block_{i}" for i in range(6)]
    assert set(blocks) <= set(top), top
    assert sum(top[b] for b in blocks) > 0.9 * (gpu.peak_rise_bytes - top["(updated arguments)"])  # SGD's new weights
    assert not any(name.startswith(f"{b}/{b}/") for name in gpu.trace.xla_program_of for b in blocks)


@pytest.mark.parametrize("run", REAL_RUNS)
def test_each_programs_total_is_its_node_and_its_pieces(run, monkeypatch):
    """The summary's `xla_programs`: per program, its node and pieces together, what the program
    held whole; what is placed, unused and kept adds up to it; the CLI prints it."""
    data = _path(run).read_bytes()
    split, whole = xplane.decode(data), decoded_without_hlo(monkeypatch, data)
    for i in range(len(split.steps)):
        for space, before in zip(analysis.analyse(split.trace(i)).spaces, analysis.analyse(whole.trace(i)).spaces):
            programs = report.device_summary(space, "layer")["xla_programs"]
            whole_programs = report.device_summary(before, "layer")["xla_programs"]
            assert {(p["name"], p["at_peak_bytes"], p["allocated_bytes"]) for p in programs} == \
                {(p["name"], p["at_peak_bytes"], p["allocated_bytes"]) for p in whole_programs}
            for program in programs:
                assert program["placed_bytes"] + program["unused_scratch_bytes"] + program["kept_bytes"] \
                    == program["at_peak_bytes"]
                assert program["kept_bytes"] >= 0
            assert all(p["placed_bytes"] == p["unused_scratch_bytes"] == 0 for p in whole_programs)
            if space.trace.device_type == "GPU":
                assert programs[0]["name"] == PROGRAM and programs[0]["placed_bytes"] > 0


def test_the_cli_prints_each_programs_bytes(capsys):
    from tb_memory_plugin import cli

    assert cli.main(["summary", str(XLA / "flax_lm_scan")]) == 0
    out = capsys.readouterr().out
    assert (f"   XLA program {PROGRAM}: 78.1 MiB at peak (43.0 MiB by op, 35.1 MiB unused scratch, 1008 B its own, "
            "placed on no op: the allocator's rounding, blocks of runs the profile's HLO does not match)") in out


# -- arguments not donated ---------------------------------------------------------------------

def _update_module(donated: bool, returned_size: int = 400, updates: int = 2) -> bytes:
    """jit(step): p, q (400 B each), lr (4 B) -> p - lr, q - lr (`updates` of them), returned. Donated,
    XLA writes each into its argument's own block; else into an output block of its own, beside it."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_id = "jit_step", 1
    entry = module.computations.add(name="main", id=1, root_id=9)
    assignment = proto.buffer_assignment
    lr = entry.instructions.add(name="lr", opcode="parameter", id=3)
    lr.metadata.op_name = "lr"
    assignment.logical_buffers.add(id=3, size=4).defined_at.instruction_id = 3
    assignment.buffer_allocations.add(index=3, size=4, is_entry_computation_parameter=True).assigned.add(
        logical_buffer_id=3, size=4)
    for k, name in enumerate("pq"[:updates]):
        argument, value = 1 + k, 4 + k
        entry.instructions.add(name=name, opcode="parameter", id=argument).metadata.op_name = name
        entry.instructions.add(name=f"sub.{k}", opcode="subtract", id=value,
                               operand_ids=[argument, 3]).metadata.op_name = "jit(step)/sub"
        assignment.logical_buffers.add(id=argument, size=400).defined_at.instruction_id = argument
        assignment.logical_buffers.add(id=value, size=returned_size).defined_at.instruction_id = value
        block = assignment.buffer_allocations.add(index=k, size=400, is_entry_computation_parameter=True,
                                                  maybe_live_out=donated)
        block.assigned.add(logical_buffer_id=argument, size=400)
        if donated:
            block.assigned.add(logical_buffer_id=value, size=400)
        else:
            assignment.buffer_allocations.add(index=4 + k, size=returned_size, maybe_live_out=True).assigned.add(
                logical_buffer_id=value, size=returned_size)
    entry.instructions.add(name="root", opcode="tuple", id=9, operand_ids=[4 + k for k in range(updates)])
    return proto.SerializeToString()


def test_output_blocks_computed_from_arguments_of_their_size_are_the_arguments_new_values():
    """`p - lr` and `q - lr` returned in blocks of their own are new values of the arguments p and q,
    made beside them: the program's state, updated. Donated, they are in the arguments' own blocks
    (none of the program's); of another size, they are values of their own; one value made from
    one argument (an eager `jit_multiply`, an inference `x + f(x)`) is no state."""
    assert [block.updated_argument for block in hlo.read_module(_update_module(donated=False)).blocks] == ["p", "q"]
    assert hlo.read_module(_update_module(donated=True)).blocks == ()
    assert not any(b.updated_argument for b in hlo.read_module(_update_module(False, returned_size=800)).blocks)
    assert not any(b.updated_argument for b in hlo.read_module(_update_module(False, updates=1)).blocks)
    assert not any(block.updated_argument for block in hlo.read_module(_module()).blocks)


def test_an_output_computed_from_several_arguments_updates_the_one_no_other_output_updates():
    """Adam's new `p` reads `p`, `mu` and `nu`; its new `mu` reads `mu`, its new `nu` `nu`: each is its
    own argument's. Where nothing tells them apart, outputs take the arguments in the program's order."""
    assert hlo._updated_arguments({0: {1, 2, 3}, 1: {2}, 2: {3}, 3: set()}) == {0: 1, 1: 2, 2: 3}
    assert hlo._updated_arguments({0: {1, 2}, 1: {1, 2}}) == {0: 1, 1: 2}


# The captured models' parameters (float32), from their definitions (tests/data/xla_gpu/README.md
# and scripts/device/capture_xla_profiles.py): (arrays, values).
FLAX_LM_PARAMETERS = (1 + 4 * 16 + 2 + 2, 3_672_552)  # embedding; per block 2 norms, q/k/v/out, 2 dense; norm; head
REMAT_PARAMETERS = (13, 6 * 2 * 1024 * 4096 + 1024 * 10)  # six blocks of 1024 -> 4096 -> 1024, a head of 10


def _updated_arguments(space) -> dict[str, tuple[int, str]]:
    """(at-peak bytes, category) of each `(updated arguments)/...` name."""
    at_peak = space.name_column(figures.AT_PEAK)
    return {name: (int(at_peak[i]), CATEGORIES[space.names.category[i]])
            for i, name in enumerate(space.names.raw) if name.startswith("(updated arguments)/")}


@pytest.mark.parametrize("run, kinds, requested", [
    # AdamW: the parameters, their two moments and its int32 count
    ("flax_lm", {"p": FLAX_LM_PARAMETERS[0], "state[0].mu": FLAX_LM_PARAMETERS[0], "state[0].nu": FLAX_LM_PARAMETERS[0],
                 "state[0].count": 1}, 3 * 4 * FLAX_LM_PARAMETERS[1] + 4),
    ("jax_remat_policy", {"p": REMAT_PARAMETERS[0]}, 4 * REMAT_PARAMETERS[1]),  # SGD: the parameters alone
])
def test_a_jax_step_that_does_not_donate_its_state_is_told_to(run, kinds, requested):
    """A jitted train step without donate_argnums returns its new parameters and optimizer state beside
    the old: each is `(updated arguments)/<its argument's path>`, counted as the optimizer's, and the
    finding names the program and what they hold at the peak, every step."""
    data = _path(run).read_bytes()
    # The profile keeps every train step compiled in its process: the largest update is this model's.
    copies = max(([block for block in hlo.read_module(proto).blocks if block.updated_argument]
                  for key, proto in _hlo_protos(data).items() if key.startswith(PROGRAM)),
                 key=lambda blocks: sum(block.size for block in blocks))
    arguments = sum(kinds.values())
    assert (len(copies), sum(block.size for block in copies)) == (arguments, requested)
    profile = xplane.decode(data)
    for i in range(len(profile.steps)):
        step = analysis.analyse(profile.trace(i))
        gpu = step.space("GPU:0/GPU_0_bfc")
        updated = _updated_arguments(gpu)
        # Each argument's new value once: Adam's new parameter reads its moments too, and is still its own.
        assert collections.Counter(name.split("/", 1)[1].split("['")[0] for name in updated) == kinds
        held = sum(at_peak for at_peak, _ in updated.values())
        assert requested <= held <= 2 * requested  # BFC's chunks: up to twice the request
        assert {category for _, category in updated.values()} == {"optimizer"}
        found = [f for f in findings.step_findings(step) if f.kind == findings.UNDONATED_ARGUMENTS]
        assert [(f.bytes, f.scope, f.nodes, f.device) for f in found] == [
            (held, "(updated arguments)", [PROGRAM], "GPU:0/GPU_0_bfc")]
        assert found[0].details["arguments"] == arguments
        argument_names = sorted({kind.split("[")[0] for kind in kinds})  # `p`, `state`: the step's own names
        assert f"donate_argnames=({', '.join(repr(name) for name in argument_names)}" in found[0].suggestion


@pytest.mark.parametrize("run", ["flax_lm_scan", "keras_jax_transformer", "flax_cnn_bn"])
def test_a_jax_step_that_donates_its_state_or_copies_little_is_not_told_to(run):
    """flax_lm_scan donates its state and Keras 3 donates its own: nothing is an updated argument but
    scalars (a step count, Keras' seed). The Flax CNN's new weights and momentum are 1% of its peak
    rise: under the line."""
    profile = xplane.decode(_path(run).read_bytes())
    for i in range(len(profile.steps)):
        step = analysis.analyse(profile.trace(i))
        assert not [f for f in findings.step_findings(step) if f.kind == findings.UNDONATED_ARGUMENTS]
        gpu = step.space("GPU:0/GPU_0_bfc")
        held = sum(at_peak for at_peak, _ in _updated_arguments(gpu).values())
        if run == "flax_cnn_bn":
            assert 0 < held < findings.DONATE_MIN_SHARE * gpu.peak_rise_bytes
        else:
            assert held <= 1024


@pytest.mark.parametrize("run, batch", [("keras_jax", 32), ("jax_mlp", 64), ("flax_lm", 16), ("flax_lm_scan", 16),
                                        ("flax_cnn_bn", 64), ("keras_jax_transformer", 32),
                                        ("jax_remat_policy", 256)])
def test_a_jax_steps_batch_is_read_from_its_programs_data(run, batch):
    """The what-if reads a JAX step's batch from its train step's arguments that are data: not its
    parameters and optimizer state, donated (Keras', flax_lm_scan's) or returned anew (jax_mlp's,
    flax_lm's), nor a random key; Flax's CNN closes over its images (constants of the program, no
    argument), whose batch its values' commonest first dimension gives. Each step alone asks for a
    second batch size to fit with (XLA lays its values out again for each)."""
    from tb_memory_plugin import whatif

    decoded = xplane.decode(_path(run).read_bytes())
    for index in range(len(decoded.steps)):
        step = analysis.analyse(decoded.trace(index))
        assert whatif.traced_batch(step) == batch
        shapes = step.trace.program_shapes
        assert all(dims[0] == batch for dims in shapes.inputs), shapes.inputs  # no parameter's, no state's
        assert bool(shapes.inputs) == (run != "flax_cnn_bn")
        with pytest.raises(whatif.WhatIfError, match=f"besides {batch} and fit over both"):
            whatif.WhatIf([whatif.Traced(run, "step", index, "xplane", step, step.space(None))], 2 * batch)


def test_an_output_passed_through_matches_only_for_tensorflows_runtime():
    """A module that returns an argument's bytes has no block for it; TensorFlow's runtime gives
    such an output a buffer of its own as the program runs (Keras' train_on_batch with XLA), JAX's
    never: the extra allocation matches as a block of no op only where asked (TensorFlow's programs)."""
    from tensorflow.compiler.xla.service import hlo_pb2

    proto = hlo_pb2.HloProto.FromString(_module())
    proto.buffer_assignment.buffer_allocations[0].maybe_live_out = True  # x, returned as it came
    module = hlo.read_module(proto.SerializeToString())
    assert module.passed_through == (64,)
    assert hlo.match_blocks(module, [400, 1100, 64]) is None
    blocks = hlo.match_blocks(module, [400, 1100, 64], passed_through=True)
    assert [(b.size, b.is_output, b.pieces) for b in blocks[2:]] == [(64, True, ())]
    assert hlo.match_blocks(module, [400, 1100, 64, 64], passed_through=True) is None  # one such output


def test_a_function_tensorflow_ran_as_an_xla_program_is_split_by_its_module():
    """TensorFlow up to 2.17 runs a `tf.function(jit_compile=True)` as an op of the function's own
    name and type (`__inference_train_step_781`), its blocks allocated under that name: the
    module compiled from it (`a_inference_train_step_781__...`) splits them by TensorFlow's ops, and
    the what-if reads the step's batch from it."""
    from tensorflow.compiler.xla.service import hlo_pb2
    from protos import XSpaceBuilder
    from tb_memory_plugin import whatif

    proto = hlo_pb2.HloProto.FromString(_module(name="a_inference_train_step_781__XlaMustCompile_true_.9"))
    for instruction in proto.hlo_module.computations[0].instructions:
        if instruction.metadata.op_name:  # TensorFlow's own op names
            instruction.metadata.op_name = instruction.metadata.op_name.replace("jit(step)/", "").replace(
                "transpose(jvp(dense))/", "gradient_tape/dense/").replace("jvp(dense)/", "dense/")
        if instruction.opcode == "parameter":
            instruction.shape.dimensions[:] = [16, 4]
    proto.hlo_module.computations[0].instructions[2].shape.dimensions[:] = [16, 8]  # a: dense's output
    space = XSpaceBuilder()
    space.event(1, "train", 0, 500, step_num=1)
    space.event(1, "EagerLocalExecute: __inference_train_step_781", 10, 400)
    space.event(1, "__inference_train_step_781:__inference_train_step_781", 15, 380)  # as TF 2.15 writes it
    blocks = [space.allocate(1, 20 + i, allocated, allocator="cpu_bfc", requested=requested,
                             tf_op="__inference_train_step_781")
              for i, (allocated, requested) in enumerate(((512, 400), (1280, 1100)))]
    for i, addr in enumerate(reversed(blocks)):
        space.free(1, 300 + i, addr)
    space.program_hlo("a_inference_train_step_781__XlaMustCompile_true_.9(7)", proto.SerializeToString())
    step = analysis.analyse(xplane.decode(space.serialized()).trace(0))
    cpu = step.space("CPU:0/cpu_bfc")
    assert _allocated(cpu) == {"gradient_tape/dense/dot_general": 512, "dense/dot_general": 1024,
                               "__inference_train_step_781/(unused scratch)": 1100 - 1024,
                               "__inference_train_step_781": 1280 - 1100}
    assert set(cpu.trace.xla_program_of.values()) == {"__inference_train_step_781"}
    assert step.trace.program_shapes.inputs == ((16, 4),) and whatif.traced_batch(step) == 16


def _fused_computation(order: list[int], operands: dict[int, list[int]], parameters: dict[int, int], root: int,
                       root_is_tuple: bool):
    """A hand-built fused computation: instructions `order` (ids), each using `operands`, the ones in
    `parameters` fused parameters (id -> number); its root `root` (a tuple of its operands where asked)."""
    computation = hlo._hlo_class()().module.computations.add()
    computation.root_id = root
    for instruction_id in order:
        instruction = computation.instructions.add()
        instruction.id = instruction_id
        if instruction_id in parameters:
            instruction.opcode, instruction.parameter_number = "parameter", parameters[instruction_id]
        else:
            instruction.opcode = "tuple" if instruction_id == root and root_is_tuple else "add"
            instruction.operand_ids.extend(operands.get(instruction_id, []))
    return computation


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_a_fusions_parameters_read_backwards_are_those_a_walk_finds(data):
    """The fused parameters a value reads, found in one backward pass where XLA lists a fused
    computation's operands first (every real profile's), are those a walk from the value finds; in any
    other order the pass declines (None) rather than miss one, and the walk answers."""
    count = data.draw(st.integers(2, 12))
    # A DAG over ids 0..count-1: each instruction uses some of the ones before it; the first few are parameters.
    params = data.draw(st.integers(1, count - 1))
    operands = {i: sorted(data.draw(st.sets(st.integers(0, i - 1), min_size=1, max_size=3)))
                for i in range(params, count)}
    parameters = {i: i for i in range(params)}
    root, tuple_root = count - 1, data.draw(st.booleans())
    element = [data.draw(st.integers(0, len(operands[root])))] if tuple_root else []  # one past the end too
    ordered = _fused_computation(list(range(count)), operands, parameters, root, tuple_root)
    walked = hlo._fused_parameters_walked(ordered, element)
    assert hlo._fused_parameters(ordered, element) == walked
    shuffled = _fused_computation(data.draw(st.permutations(range(count))), operands, parameters, root, tuple_root)
    assert hlo._fused_parameters(shuffled, element) in (None, walked)
    assert hlo._fused_parameters_walked(shuffled, element) == walked
