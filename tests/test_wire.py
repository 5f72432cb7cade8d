"""wire.NodeColumns (sentinel-merged parsing) against reference.read, a plain walk over the real protos.

Real traces leave many proto3 fields at zero, so absent on the wire (about 3%
of the nodes of a big step have all_end_rel_micros == 0). Randomised steps
here make every field absent somewhere, put several memory entries and
allocators on one node, leave allocator names empty, and add fields the
engine does not read, so a shifted column would show.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from tb_memory_plugin import analysis
from tb_memory_plugin._protos import REFUSED
from tracedata import UNET_BATCH, exec_names
from tb_memory_plugin.sources import run_metadata
from tb_memory_plugin.sources.run_metadata import quick, reference, shapes, wire


def _blobs(nodes) -> list[bytes]:
    return [node.SerializeToString() for node in nodes]


def _assert_same(columns: wire.NodeColumns, blobs: list[bytes], read_by: str = "wire"):
    """The columns the reference reads from the same bytes, allocator codes compared by name."""
    assert columns.read_by == read_by  # else the reference would be checked against itself
    expected = wire.NodeColumns(blobs, reader=reference.read)
    assert columns.distinct_names == expected.distinct_names
    assert columns.name_code.tolist() == expected.name_code.tolist()
    assert columns.label_of == expected.label_of
    for key in ("start", "end", "temp", "persistent"):
        assert getattr(columns, key).tolist() == getattr(expected, key).tolist(), key
    # Allocator codes may be numbered differently: compare by name.
    names = {c: n for n, c in columns.allocator_codes.items()}
    ref_names = {c: n for n, c in expected.allocator_codes.items()}
    for key in ("memory", "records", "outputs"):
        got = [(row[0], names[row[1]], *row[2:]) for row in getattr(columns, key).tolist()]
        want = [(row[0], ref_names[row[1]], *row[2:]) for row in getattr(expected, key).tolist()]
        assert got == want, key


def _random_step(seed: int, nodes: int = 400) -> step_stats_pb2.StepStats:
    rng = random.Random(seed)
    step = step_stats_pb2.StepStats()
    device = step.dev_stats.add(device="/job:localhost/replica:0/task:0/device:GPU:0")
    allocators = ["GPU_0_bfc", "cuda_host_bfc", "", "mklcpu"] if seed % 3 else ["mklcpu"]

    def maybe(value):
        return value if rng.random() < 0.7 else 0

    for i in range(nodes):
        node = device.node_stats.add()
        # Even seeds write every name and start time as TensorFlow does (the compact
        # markers); odd seeds leave some out (the robust fallback).
        if seed % 2 == 0 or rng.random() < 0.97:
            node.node_name = f"scope_{i % 7}/op_{i}"
        start = 1_700_000_000_000_000 + i * 3
        node.all_start_micros = start if seed % 2 == 0 else maybe(start)
        node.all_end_rel_micros = maybe(rng.randrange(0, 50))
        node.op_start_rel_micros = maybe(1)  # not read: must not disturb what is
        node.thread_id = maybe(rng.randrange(1, 9))
        if rng.random() < 0.8:
            node.timeline_label = f"op_{i} = Conv2D(x, w)"
        if rng.random() < 0.5:
            node.memory_stats.temp_memory_size = maybe(rng.randrange(1, 1 << 20))
            node.memory_stats.persistent_memory_size = maybe(rng.randrange(1, 1 << 10))
            node.memory_stats.persistent_tensor_alloc_ids.extend(rng.sample(range(100), rng.randrange(0, 3)))
        for _ in range(rng.choice([0, 0, 1, 1, 1, 2, 3])):
            entry = node.memory.add(allocator_name=rng.choice(allocators))
            entry.total_bytes = maybe(rng.randrange(-(1 << 20), 1 << 30))
            entry.peak_bytes = maybe(rng.randrange(0, 1 << 30))
            entry.live_bytes = maybe(rng.randrange(0, 1 << 30))
            entry.allocator_bytes_in_use = maybe(rng.randrange(0, 1 << 34))
            for _ in range(rng.choice([0, 1, 2, 4])):
                entry.allocation_records.add(alloc_micros=maybe(rng.randrange(1, 1 << 50)),
                                             alloc_bytes=maybe(rng.randrange(-(1 << 30), 1 << 30)))
        for slot in range(rng.choice([0, 1, 1, 2])):
            output = node.output.add(slot=slot)
            description = output.tensor_description
            description.dtype = 1
            description.shape.dim.add(size=rng.randrange(1, 64))
            allocation = description.allocation_description
            allocation.requested_bytes = maybe(rng.randrange(1, 1 << 30))
            allocation.allocated_bytes = maybe(rng.randrange(1, 1 << 30))
            allocation.allocator_name = rng.choice(allocators)
            allocation.ptr = maybe(rng.randrange(1, 1 << 40))
        if rng.random() < 0.1:
            node.referenced_tensor.add(allocator_name="GPU_0_bfc", requested_bytes=8)
    return step


def _columns_of(step: step_stats_pb2.StepStats) -> list[wire.NodeColumns]:
    run = wire.parse_run(config_pb2.RunMetadata(step_stats=step).SerializeToString())
    return [wire.NodeColumns(list(d.node_stats)) for d in run.step_stats.dev_stats]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [wire.CHUNK_NODES, 37])
def test_random_steps_decode_like_the_protos(seed, chunk, monkeypatch):
    monkeypatch.setattr(wire, "CHUNK_NODES", chunk)  # 37: many chunks, marker checks per chunk
    step = _random_step(seed)
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))


def test_real_trace_decodes_like_the_protos(unet_trace):
    devices = [d for d in unet_trace.proto.step_stats.dev_stats if d.node_stats]
    columns = _columns_of(unet_trace.proto.step_stats)
    assert len(columns) == len(devices) >= 1
    for got, device in zip(columns, devices):
        _assert_same(got, _blobs(device.node_stats))
        assert got.named_from is None  # a CPU step: read on one allocator throughout
    # The real trace does leave fields out (zero durations), so the sentinels matter.
    assert any(n.all_end_rel_micros == 0 for d in devices for n in d.node_stats)


def test_output_shapes_of_each_name_are_its_first_nodes(unet_trace, monkeypatch):
    """The what-if's shapes: per distinct name, its first node's outputs, alike from both readers
    and from the protos; the feeds carry the batch."""
    device = next(d for d in unet_trace.proto.step_stats.dev_stats if d.node_stats)
    blobs = _blobs(device.node_stats)
    columns = wire.NodeColumns(blobs)
    expected = wire.NodeColumns(blobs, reader=reference.read)
    first = {}
    for node in device.node_stats:
        first.setdefault(node.node_name, [(tuple(d.size for d in o.tensor_description.shape.dim),
                                           o.tensor_description.allocation_description.requested_bytes)
                                          for o in node.output])
    for name, outputs in first.items():
        assert columns.label_of.outputs(name) == expected.label_of.outputs(name) == outputs, name
    assert columns.label_of.outputs("no such node") == expected.label_of.outputs("no such node") == []
    asked = [*first, "no such node", *first]
    assert columns.label_of.outputs_many(asked) == [*first.values(), [], *first.values()]
    # In bulk (shapes.py), in many chunks, without a node left to the protos.
    monkeypatch.setattr(shapes, "CHUNK_NODES", 37)
    monkeypatch.setattr(shapes, "_one", None)
    assert columns.label_of.outputs_many(list(first)) == list(first.values())
    assert shapes.outputs(blobs) == [reference.output_shapes(node) for node in device.node_stats]
    assert sum(len(shape) > 1 for outputs in first.values() for shape, _ in outputs) > len(first) // 4  # real shapes
    feeds = [name for name in first if name.startswith("_arg_")]
    assert feeds and all(columns.label_of.outputs(name)[0][0][0] == UNET_BATCH for name in feeds)
    (space, *_) = run_metadata.decode(unet_trace.run_metadata_bytes).spaces
    assert space.outputs_of([feeds[0]]) == [first[feeds[0]]]


def test_nodes_with_nothing_set():
    step = step_stats_pb2.StepStats()
    device = step.dev_stats.add(device="/device:CPU:0")
    for _ in range(3):
        device.node_stats.add()
    (columns,) = _columns_of(step)
    assert exec_names(columns) == ["", "", ""] and columns.label_of == {"": ""}
    assert columns.start.tolist() == [0, 0, 0]
    assert columns.memory.shape == (0, 6) and columns.records.shape == (0, 4) and columns.outputs.shape == (0, 3)


def test_explicit_zeros_from_other_writers():
    """proto3 writers never spell out a zero, which is what the compact 2-byte markers
    rely on; bytes that do (hand-written, another serializer) must decode the same."""
    base = step_stats_pb2.NodeExecStats(node_name="a/Conv2D", all_start_micros=10, all_end_rel_micros=3,
                                        timeline_label="a/Conv2D = Conv2D(x)")
    entry = step_stats_pb2.AllocatorMemoryUsed(allocator_name="GPU_0_bfc", total_bytes=64)
    entry.allocation_records.add(alloc_micros=11, alloc_bytes=64)
    zero_entry = entry.SerializeToString() + b"\x10\x00"  # total_bytes = 0, spelled out (last one wins)
    blobs = [
        base.SerializeToString() + b"\x28\x00",  # all_end_rel_micros = 0
        base.SerializeToString() + b"\x32" + bytes([len(zero_entry)]) + zero_entry,
        step_stats_pb2.NodeExecStats(node_name="b/Relu", all_start_micros=20).SerializeToString() + b"\x0a\x00",
    ]
    columns = wire.NodeColumns(blobs)
    _assert_same(columns, blobs)
    assert columns.end.tolist() == [10, 13, 20]
    assert columns.memory[:, 2].tolist() == [0]  # the spelled-out zero won, as protobuf says
    assert exec_names(columns) == ["a/Conv2D", "a/Conv2D", ""]


def _outputs_step(allocator_names: list[list[str]], requested: int = 64) -> step_stats_pb2.StepStats:
    """One node per list, with one output with bytes on each allocator named in it."""
    step = step_stats_pb2.StepStats()
    device = step.dev_stats.add(device="/device:GPU:0")
    for i, names in enumerate(allocator_names):
        node = device.node_stats.add(node_name=f"n{i}", all_start_micros=100 + i, timeline_label=f"n{i} = Op()")
        for slot, name in enumerate(names):
            description = node.output.add(slot=slot).tensor_description
            description.dtype = 1
            description.allocation_description.requested_bytes = requested + i
            description.allocation_description.allocator_name = name
    return step


@pytest.mark.parametrize("chunk", [wire.CHUNK_NODES, 37])
def test_outputs_move_to_a_second_allocator_in_a_later_chunk(chunk, monkeypatch):
    """CPU-like chunks read names as bytes; a chunk with a second allocator reads them as
    strings, and every chunk after it too."""
    monkeypatch.setattr(wire, "CHUNK_NODES", chunk)
    names = [["mklcpu"]] * 60 + [["GPU_0_bfc", "cuda_host_bfc"], ["GPU_0_bfc"]] * 20 + [["mklcpu", "mklcpu"]] * 30
    step = _outputs_step(names)
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert set(columns.allocator_codes) == {"mklcpu", "GPU_0_bfc", "cuda_host_bfc"}


@pytest.mark.parametrize("odd_name", [
    "cpu_\u00e9",  # ends in a UTF-8 continuation byte: no whole varint when read as bytes
    "\u00e9_cpu",  # non-ASCII then ASCII: reads as one big number
    "cpu\x00pool",  # a NUL, which is the end-of-node mark when read as bytes
    "\u0841\u0841\u0841a",  # ten bytes that read as one negative number
    "cpu\x07",  # ASCII, not printable
])
def test_outputs_on_an_allocator_with_an_odd_name(odd_name):
    step = _outputs_step([[odd_name]] * 5 + [[odd_name, odd_name]] * 5)
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert list(columns.allocator_codes) == [odd_name]


def test_one_allocator_with_names_that_do_not_repeat_evenly():
    """Names of different lengths on one node, or a name with no bytes beside it, are not
    taken for copies of the first output's name."""
    step = _outputs_step([["abab"], ["ab", "ab"], ["ab"]])
    zero = step.dev_stats[0].node_stats[2].output.add(slot=1).tensor_description
    zero.dtype = 1
    zero.allocation_description.allocator_name = "ab"  # an empty tensor: a name, no bytes
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert set(columns.allocator_codes) == {"abab", "ab"}


# -- the one-allocator reading ("Nodes": outputs' names and memory entries as varints) --------


def _cpu_step(seed: int, nodes: int = 300, allocator: str = "mklcpu") -> step_stats_pb2.StepStats:
    """A CPU step as TensorFlow writes one: every output and memory entry on one allocator,
    at most one entry per node, numbers left out at random (proto3 zeros)."""
    rng = random.Random(seed)
    step = step_stats_pb2.StepStats()
    device = step.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")

    def maybe(value):
        return value if rng.random() < 0.8 else 0

    for i in range(nodes):
        node = device.node_stats.add(node_name=f"scope_{i % 5}/op_{i}", all_start_micros=1_700_000_000_000_000 + i,
                                     all_end_rel_micros=maybe(rng.randrange(1, 40)), timeline_label=f"op_{i} = Relu(x)")
        if rng.random() < 0.4:
            entry = node.memory.add(allocator_name=allocator, total_bytes=maybe(rng.randrange(1, 1 << 30)),
                                    peak_bytes=maybe(rng.randrange(1, 1 << 30)), live_bytes=maybe(rng.randrange(1, 1 << 30)),
                                    allocator_bytes_in_use=maybe(rng.randrange(1, 1 << 34)))
            for _ in range(rng.choice([0, 1, 2, 2, 4])):
                # One number of a record left out now and then, never both.
                micros, size = rng.randrange(1, 1 << 52), rng.choice([-1, 1]) * rng.randrange(1, 1 << 40)
                drop = rng.random()
                entry.allocation_records.add(alloc_micros=micros if drop > 0.1 else 0, alloc_bytes=size if drop < 0.9 else 0)
        for slot in range(rng.choice([0, 1, 1, 2])):
            description = node.output.add(slot=slot).tensor_description
            description.dtype = 1
            description.shape.dim.add(size=rng.randrange(1, 64))
            if rng.random() < 0.9:  # else no buffer: a dtype, nothing allocated
                description.allocation_description.requested_bytes = rng.randrange(1, 1 << 30)
                description.allocation_description.allocator_name = allocator
                description.allocation_description.ptr = rng.randrange(1, 1 << 40)
    return step


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [wire.CHUNK_NODES, 37])
def test_cpu_steps_are_read_on_one_allocator(seed, chunk, monkeypatch):
    monkeypatch.setattr(wire, "CHUNK_NODES", chunk)
    step = _cpu_step(seed, allocator="cpu" if seed % 2 else "mklcpu")  # odd and even name lengths
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert columns.named_from is None
    assert columns.records.size and columns.memory.size and columns.outputs.size


def test_a_chunk_with_allocator_names_and_no_bytes_is_read_in_full(monkeypatch):
    """Outputs that name an allocator and request nothing (empty buffers): no size to pair with."""
    monkeypatch.setattr(wire, "CHUNK_NODES", 37)
    step = _cpu_step(5)
    for node in step.dev_stats[0].node_stats[37:74]:
        for output in node.output:
            output.tensor_description.allocation_description.requested_bytes = 0
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert columns.named_from == 37


def test_a_name_in_both_readings_is_one_name(monkeypatch):
    """Chunks read quickly and chunks read in full both give names as text: a name in one of
    each (a loop body run before and after the step moved to a second allocator) is one name."""
    monkeypatch.setattr(wire, "CHUNK_NODES", 37)
    step = _cpu_step(5)
    nodes = step.dev_stats[0].node_stats
    for node in nodes[37:74]:
        for output in node.output:
            output.tensor_description.allocation_description.requested_bytes = 0
    nodes[80].node_name = nodes[3].node_name
    nodes[81].node_name = "caf\u00e9/op"  # not ASCII, still UTF-8
    nodes[5].node_name = "caf\u00e9/op"
    (columns,) = _columns_of(step)
    assert columns.named_from == 37
    _assert_same(columns, _blobs(nodes))
    assert columns.name_code[80] == columns.name_code[3] and columns.name_code[81] == columns.name_code[5]
    assert len(columns.distinct_names) == len(nodes) - 2
    assert all(isinstance(name, str) for name in columns.distinct_names)


def test_a_chunk_with_entries_and_no_output_takes_the_name_from_its_first_entry(monkeypatch):
    monkeypatch.setattr(wire, "CHUNK_NODES", 37)
    step = _cpu_step(7)
    for node in step.dev_stats[0].node_stats[37:74]:
        del node.output[:]
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert columns.named_from is None


def _len_field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


_RECORD = _len_field(6, b"\x08\x05\x10\x40")  # alloc_micros 5, alloc_bytes 64


def _with_entry(entry: bytes):
    """A mutation: the node's memory entries replaced by raw entry bytes."""
    def mutate(node: step_stats_pb2.NodeExecStats) -> bytes:
        del node.memory[:]
        return node.SerializeToString() + _len_field(6, entry)
    return mutate


def _adding(fill):
    def mutate(node: step_stats_pb2.NodeExecStats) -> bytes:
        fill(node)
        return node.SerializeToString()
    return mutate


_MKLCPU = _len_field(1, b"mklcpu")


def _varint(value: int) -> bytes:
    value &= 2**64 - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))

# Nodes the one-allocator reading must hand over to the full reading.
_NOT_ON_ONE_ALLOCATOR = {
    "two entries": _adding(lambda node: [node.memory.add(allocator_name="mklcpu", total_bytes=8) for _ in range(2)]),
    "an entry on another allocator": _with_entry(_len_field(1, b"cpu") + b"\x10\x08"),
    "an entry on a same-length allocator": _with_entry(_len_field(1, b"mklgpu") + b"\x10\x08"),
    "an entry naming no allocator": _with_entry(b"\x10\x08" + _RECORD),
    "a NUL in an entry's allocator": _with_entry(_len_field(1, b"mkl\x00pu") + b"\x10\x08"),
    "a non-ASCII allocator at the end": _with_entry(_len_field(1, "mklcp\u00e9".encode())),
    "a non-ASCII allocator in the middle": _with_entry(_len_field(1, "mkl\u00e9u".encode()) + b"\x10\x08"),
    "an entry field this reader does not know": _with_entry(_MKLCPU + b"\x38\x01" + _RECORD),
    "an entry number written twice": _with_entry(_MKLCPU + b"\x10\x08\x10\x09" + _RECORD),
    "a record number written twice": _with_entry(_MKLCPU + _len_field(6, b"\x08\x05\x08\x06\x10\x40")),
    "a record with neither number": _with_entry(_MKLCPU + _RECORD + _len_field(6, b"")),
    "a record with a field it does not have": _with_entry(_MKLCPU + _len_field(6, b"\x08\x05\x18\x40")),
    # Out of field order, total_bytes after a record without bytes reads as that
    # record's bytes: only the record's length tells them apart.
    "total bytes after a record without bytes": _with_entry(_MKLCPU + _len_field(6, b"\x08\x05") + b"\x10\x40"),
}


@pytest.mark.parametrize("case", sorted(_NOT_ON_ONE_ALLOCATOR))
@pytest.mark.parametrize("chunk", [wire.CHUNK_NODES, 37])
def test_entries_not_on_one_allocator_are_read_in_full(case, chunk, monkeypatch):
    monkeypatch.setattr(wire, "CHUNK_NODES", chunk)
    nodes = list(_cpu_step(3).dev_stats[0].node_stats)
    blobs = [node.SerializeToString() for node in nodes]
    odd = 150
    blobs[odd] = _NOT_ON_ONE_ALLOCATOR[case](nodes[odd])
    columns = wire.NodeColumns(blobs)
    _assert_same(columns, blobs)
    assert columns.named_from == odd // chunk * chunk  # from the odd node's chunk on


def test_corrupt_entry_bytes_fail_as_the_protos_do():
    """A negative number where a key stands is no protobuf; it must not index a key table
    (-56 would wrap to a record's micros) and pass for an entry."""
    nodes = list(_cpu_step(3).dev_stats[0].node_stats)
    blobs = [node.SerializeToString() for node in nodes]
    blobs[150] = _with_entry(_MKLCPU + _varint(-56) + b"\x05")(nodes[150])
    try:
        step_stats_pb2.NodeExecStats.FromString(blobs[150])
    except DecodeError:  # upb refuses it
        with pytest.raises(DecodeError):
            wire.NodeColumns(blobs)
    else:  # protobuf's pure-Python parser takes it (as unknown fields): so must the columns
        _assert_same(wire.NodeColumns(blobs), blobs)


def test_names_that_are_not_utf8_show_replacement_characters():
    """TensorFlow's names are ASCII; bytes from elsewhere may not even be UTF-8. They are
    shown with U+FFFD, and analysed like any other name, rather than refused."""
    step = _cpu_step(1, nodes=40)
    step.dev_stats[0].node_stats[3].node_name = "bad#/op"
    data = config_pb2.RunMetadata(step_stats=step).SerializeToString().replace(b"bad#/op", b"bad\xff/op")
    decoded = run_metadata.decode(data)
    (space,) = decoded.spaces
    assert exec_names(space)[3] == "bad\ufffd/op" and exec_names(space)[4] == "scope_4/op_4"
    assert "bad\ufffd/op" in analysis.analyse(decoded).space(None).tree("scope").index


def test_text_that_is_not_utf8_decodes_with_protobufs_pure_python_parser(tmp_path):
    """Users set PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python to get past protobuf version
    clashes. That parser refuses text that is not UTF-8 with UnicodeDecodeError (upb hands
    a name over as bytes, and refuses a label with DecodeError): the step still decodes,
    names with U+FFFD, and the what-if's shapes read what they can."""
    import json
    import os
    import subprocess
    import sys

    from tracedata import REPO

    step = _cpu_step(1, nodes=40)
    nodes = step.dev_stats[0].node_stats
    nodes[3].node_name = "bad#/op"
    nodes[5].timeline_label = "lab#el"
    data = (config_pb2.RunMetadata(step_stats=step).SerializeToString()
            .replace(b"bad#/op", b"bad\xff/op").replace(b"lab#el", b"lab\xffel"))
    path = tmp_path / "step.pb"
    path.write_bytes(data)
    code = (
        "import json, sys\n"
        "from google.protobuf.internal import api_implementation\n"
        "assert api_implementation.Type() == 'python', api_implementation.Type()\n"
        "from tb_memory_plugin.sources import run_metadata\n"
        "(space,) = run_metadata.decode(open(sys.argv[1], 'rb').read()).spaces\n"
        "names = [space.distinct_names[c] for c in space.name_code.tolist()]\n"
        "shapes = space.outputs_of(space.distinct_names)\n"
        "print(json.dumps([names, [len(s) for s in shapes]]))\n"
    )
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    names, shape_counts = json.loads(done.stdout)
    written = [node.node_name for node in nodes]
    assert names == written[:3] + ["bad\ufffd/op"] + written[4:]
    assert shape_counts[5] == 0 and sum(shape_counts) > 0  # the node the protos refuse has none; the others theirs


@pytest.mark.parametrize("repeats", [False, True])
def test_names_told_apart_by_their_bytes_stay_apart_when_shown_alike(repeats):
    """Two names that are not UTF-8 and decode to the same text remain two names, whether
    the step's other names repeat (read as bytes) or not (decoded first)."""
    step = _cpu_step(1, nodes=40)
    nodes = step.dev_stats[0].node_stats
    nodes[3].node_name, nodes[7].node_name = "bad#/op", "bad%/op"
    if repeats:
        nodes[9].node_name = nodes[8].node_name
    data = (config_pb2.RunMetadata(step_stats=step).SerializeToString()
            .replace(b"bad#/op", b"bad\xff/op").replace(b"bad%/op", b"bad\xfe/op"))
    (space,) = run_metadata.decode(data).spaces
    assert len(space.distinct_names) == 40 - repeats
    assert exec_names(space)[3] == exec_names(space)[7] == "bad\ufffd/op"
    assert space.name_code[3] != space.name_code[7]




def test_a_repeat_the_sample_misses_is_interned_from_the_decoded_names():
    """A deep step with one repeated name (a small loop) that the sample of names passes over:
    the strings decoded for the all-distinct case are interned, as the protos read them."""
    step = _cpu_step(2, nodes=2100)  # names sampled every 2nd: odd nodes are not in the sample
    nodes = step.dev_stats[0].node_stats
    nodes[1001].node_name = nodes[3].node_name
    blobs = _blobs(nodes)
    columns = wire.NodeColumns(blobs)
    _assert_same(columns, blobs)
    assert len(columns.distinct_names) == 2099 and columns.name_code[1001] == columns.name_code[3]
    assert columns.distinct_names.joined == "\n".join(columns.distinct_names).encode()

# -- bytes no TensorFlow writes, read as the protos read them (or refused as they are) -----


def _check(blobs: list[bytes]) -> wire.NodeColumns | None:
    """NodeColumns gives the protos' columns, or raises DecodeError where they do."""
    try:
        for blob in blobs:
            step_stats_pb2.NodeExecStats.FromString(blob)
    except DecodeError:
        with pytest.raises(DecodeError):
            wire.NodeColumns(blobs)
        return None
    columns = wire.NodeColumns(blobs)
    _assert_same(columns, blobs)
    return columns


def _plain(i: int) -> bytes:
    return step_stats_pb2.NodeExecStats(node_name=f"n{i}", all_start_micros=100 + i,
                                        timeline_label=f"n{i} = Op()").SerializeToString()


def test_an_entry_whose_name_bytes_merge_into_fewer_numbers():
    """C2 80 00 (U+0080, NUL) reads as one varint, 0x42: cut by its byte length, the name
    would take the entry's next numbers too. Not printable: read in full."""
    blob = _plain(0) + _len_field(6, _len_field(1, "\u0080\x00".encode()) + b"\x10\x40")
    columns = _check([blob])
    assert columns.named_from == 0


def test_spelt_out_zero_bytes_make_no_output():
    """A spelt-out 0 is read with the robust markers, where it is a value, not a marker."""
    zero = step_stats_pb2.NodeExecStats(node_name="z", all_start_micros=5).SerializeToString()
    zero += _len_field(7, _len_field(3, b"\x08\x01" + _len_field(4, b"\x08\x00" + _len_field(3, b"cpu"))))
    columns = _check([_plain(0), zero, _plain(2)])
    assert columns.outputs.shape == (0, 3)


def test_a_label_spelt_out_empty_after_a_label():
    """Written twice, the empty label wins; the next node has none."""
    relabelled = _plain(0) + _len_field(8, b"")
    unlabelled = step_stats_pb2.NodeExecStats(node_name="b", all_start_micros=101).SerializeToString()
    columns = _check([relabelled, unlabelled])
    assert columns.label_of == {"n0": "", "b": ""}


@pytest.mark.parametrize("odd", [
    _len_field(6, b"\x10"),  # a memory entry of one byte: a key without its value
    _len_field(6, _MKLCPU + _len_field(6, b"\x08")),  # a record of one byte
    b"\x42\x1eab",  # a label promising 30 bytes, with 2
], ids=["an entry of one byte", "a record of one byte", "a label cut short"])
def test_cut_off_fields_are_refused(odd):
    assert _check([_plain(0), _plain(1) + odd, _plain(2)]) is None


_INT64_MIN = -(2**63)


@pytest.mark.parametrize("odd", [
    b"\x28" + _varint(_INT64_MIN),  # all_end_rel_micros
    _len_field(1, b"\x00"),  # the node's name, written again
    _len_field(12, b"\x08" + _varint(_INT64_MIN)),  # temp_memory_size
], ids=["a duration", "a name", "a temp size"])
def test_values_equal_to_a_robust_marker_are_read_by_the_reference(odd):
    """A spelt-out zero sends the reading to the robust markers, where a value equal to
    one of them (INT64_MIN, a lone NUL) leaves the merged lists unsplittable. The protos
    read such bytes, so the reference reads them, rather than the step being corrupt."""
    blobs = [_plain(0) + b"\x28\x00", _plain(1) + odd, _plain(2)]
    _assert_same(wire.NodeColumns(blobs), blobs, read_by="reference")
    device = _long_field(1, b"/device:CPU:0") + b"".join(_long_field(2, blob) for blob in blobs)
    data = _long_field(1, _long_field(1, device))  # RunMetadata.step_stats.dev_stats, as raw bytes
    assert run_metadata.decode(data).node_stat_count == 3


def _long_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


@pytest.mark.parametrize("where", ["label", "output", "entry"])
def test_text_that_is_not_utf8_shows_replacement_characters(where):
    """The protos refuse it; shown with U+FFFD instead, like node names."""
    node = _plain(0)
    if where == "label":
        node += _len_field(8, b"bad\xff")
    elif where == "output":
        node += _len_field(7, _len_field(3, b"\x08\x01" + _len_field(4, b"\x08\x40" + _len_field(3, b"bad\xff"))))
    else:
        node += _len_field(6, _len_field(1, b"bad\xff") + b"\x10\x40")
    columns = wire.NodeColumns([node, _plain(1)])
    if where == "label":
        assert columns.label_of["n0"] == "bad\ufffd"
    else:
        assert list(columns.allocator_codes) == ["bad\ufffd"]
        table = columns.outputs if where == "output" else columns.memory
        assert table.tolist()[0][:3] == [0, 0, 64]


def test_labels_read_together_equal_labels_read_one_by_one(unet_trace):
    """A step without a run graph asks for every name's label at once (`many`): the same text."""
    columns = _columns_of(unet_trace.proto.step_stats)
    for column in columns:
        names = column.distinct_names + ["not/a/node"]
        one_by_one = [column.label_of.get(name, "") for name in names]
        assert column.label_of.many(names) == one_by_one
        assert sum(1 for label in one_by_one if " = " in label) > len(names) // 2  # real labels, not empties
    # A few names (the op types a run graph lacks) are found without indexing every name; the same
    # text, for names it has, names it does not, repeats, and before or after the index exists.
    for column in _columns_of(unet_trace.proto.step_stats):
        labels = column.label_of
        few = [column.distinct_names[-1], "not/a/node", column.distinct_names[0], column.distinct_names[-1]]
        fresh = wire.Labels(column.distinct_names, labels._node_stats, labels._first_exec, labels._mk)
        assert fresh.many(few) == [labels.get(name, "") for name in few] and fresh._code is None
        assert fresh.many(few[:1]) != [""]


# -- output shapes in bulk (shapes.py) against the protos, node by node ----------------------


def _protos_outputs(blob: bytes):
    """What Labels.outputs gives: the protos' outputs, or [] where they refuse the node."""
    try:
        return reference.output_shapes(reference.parse_node(blob))
    except REFUSED:  # DecodeError, or (protobuf's pure-Python parser) UnicodeDecodeError
        return []


def _labels(blobs: list[bytes]) -> wire.Labels:
    return wire.Labels([f"n{i}" for i in range(len(blobs))], blobs, np.arange(len(blobs)))


def _num(number: int, value: int, spell: bool = False) -> bytes:
    """A varint field; a zero is left out, as proto3 writers do, unless spelt out."""
    return _varint(number << 3) + _varint(value) if value or spell else b""


def _output(dims=None, requested=None, spell=False, allocator=b"mklcpu", extra_shape=b"", dtype=1, slot=0):
    """NodeOutput bytes: dims None for no shape, [] for a scalar; each dim a size or (size, name)."""
    shape = None
    if dims is not None:
        shape = b"".join(_long_field(2, _num(1, d, spell) if isinstance(d, int) else
                                     _num(1, d[0], spell) + _long_field(2, d[1])) for d in dims) + extra_shape
    allocation = b"" if requested is None else _num(1, requested, spell) + _long_field(3, allocator)
    description = _num(1, dtype, spell) + (b"" if shape is None else _long_field(2, shape))
    description += _long_field(4, allocation) if requested is not None else b""
    return _num(1, slot, spell) + _long_field(3, description)


def _node(i: int, outputs: list[bytes], tail: bytes = b"") -> bytes:
    return _plain(i) + b"".join(_long_field(7, output) for output in outputs) + tail


_MIN = -(2**63)
_EDGE_NODES = {
    "no outputs": [],
    "an output with nothing": [b""],
    "no tensor description": [_num(1, 3)],
    "no shape": [_output(None, 64)],
    "a scalar": [_output([], 4)],
    "unknown dims": [_output([-1, 3, -1], 12)],
    "a dim of size 0": [_output([0, 5], 0)],
    "dim names": [_output([(2, b"batch"), 7, (0, b"empty")], 56)],
    "no requested bytes": [_output([4, 4], None)],
    "several outputs": [_output([2], 8), b"", _output([], 4), _output([1, 2, 3, 4, 5, 6], 2880)],
    "explicit zeros": [_output([0, 3, 0], 0, spell=True), _output([], 0, spell=True, dtype=0)],
    "unknown rank": [_output([5], 20, extra_shape=_num(3, 1))],
    "a shape written twice": [_output([2, 3], 24) + _long_field(3, _long_field(2, _long_field(2, _num(1, 9))))],
    "bytes written twice": [_output([8], 32) + _long_field(3, _long_field(4, _num(1, 99)))],
    "a size written twice": [_output([], 4, extra_shape=_long_field(2, _num(1, 5) + _num(1, 6)))],
    "long varints": [_output([], 4, extra_shape=_long_field(2, b"\x08\x85\x00"))],  # size 5 in 2 bytes
    # One dim, size 5 and name "\x08\x06", whose bytes read as varints look like two dims.
    "a dim that looks like two": [_output([], 4, extra_shape=b"\x12\x06\x08\x05\x12\x02\x08\x06")],
    "huge sizes": [_output([2**62, -(2**40), 127, 128], 2**62)],
    "a size equal to a marker": [_output([_MIN, 3], 8)],
    "bytes equal to a marker": [_output([3], _MIN)],
    "a dim name that is not UTF-8": [_output([(3, b"bad\xff")], 8)],
    "a dim name that ends in a continuation byte": [_output([(3, "caf\u00e9".encode())], 8)],
    "an allocator that is not UTF-8": [_output([3], 8, allocator=b"bad\xff")],
    "a shape cut short": [_output([], 4, extra_shape=b"\x12\x05\x08")],
    "a lone zero byte for a shape": [_long_field(3, _long_field(2, b"\x00"))],
    "a lone zero byte for an output": [b"\x00"],
    "a lone zero byte for a dim": [_output([], 4, extra_shape=_long_field(2, b"\x00"))],
}
_EDGE_TAILS = {  # outputs of a plain node, after bytes that make the protos refuse the node, or not
    "a label that is not UTF-8": _len_field(8, b"bad\xff"),
    "a memory entry that is not UTF-8": _len_field(6, _len_field(1, b"bad\xff")),
    "spelt-out zeros": b"\x28\x00\x10\x00",
}


def _edge_blobs() -> tuple[list[str], list[bytes]]:
    cases, blobs = [], []
    for case, outputs in _EDGE_NODES.items():
        cases.append(case)
        blobs.append(_node(len(blobs), outputs))
    for case, tail in _EDGE_TAILS.items():
        cases.append(case)
        blobs.append(_node(len(blobs), [_output([7, 1], 28)], tail))
    return cases, blobs


@pytest.mark.parametrize("chunk", [shapes.CHUNK_NODES, 5, 1])
def test_output_shapes_in_bulk_match_the_protos_on_odd_nodes(chunk, monkeypatch):
    monkeypatch.setattr(shapes, "CHUNK_NODES", chunk)
    monkeypatch.setattr(shapes, "_GROUP", 1)  # halves down to single nodes: the protos read only those they refuse
    cases, blobs = _edge_blobs()
    got = shapes.outputs(blobs)
    for case, blob, outputs in zip(cases, blobs, got):
        assert outputs == _protos_outputs(blob), case
    by_case = dict(zip(cases, got))
    # The protos' answers themselves, so the cases test what they say they do.
    assert by_case["no outputs"] == [] and by_case["an output with nothing"] == [((), 0)]
    assert by_case["no tensor description"] == [((), 0)] and by_case["no shape"] == [((), 64)]
    assert by_case["a scalar"] == [((), 4)] and by_case["unknown dims"] == [((-1, 3, -1), 12)]
    assert by_case["a dim of size 0"] == [((0, 5), 0)] and by_case["dim names"] == [((2, 7, 0), 56)]
    assert by_case["no requested bytes"] == [((4, 4), 0)]
    assert by_case["several outputs"] == [((2,), 8), ((), 0), ((), 4), ((1, 2, 3, 4, 5, 6), 2880)]
    assert by_case["explicit zeros"] == [((0, 3, 0), 0), ((), 0)]
    assert by_case["unknown rank"] == [((5,), 20)]
    assert by_case["a shape written twice"] == [((2, 3, 9), 24)]  # merged, as protobuf merges
    assert by_case["bytes written twice"] == [((8,), 99)]  # the last one wins
    assert by_case["a size written twice"] == [((6,), 4)]
    assert by_case["long varints"] == [((5,), 4)]
    assert by_case["a dim that looks like two"] == [((5,), 4)]
    assert by_case["a size equal to a marker"] == [((_MIN, 3), 8)]
    assert by_case["bytes equal to a marker"] == [((3,), _MIN)]
    assert by_case["a dim name that ends in a continuation byte"] == [((3,), 8)]
    assert by_case["spelt-out zeros"] == [((7, 1), 28)]
    refused = ["a dim name that is not UTF-8", "an allocator that is not UTF-8", "a shape cut short",
               "a lone zero byte for a shape", "a lone zero byte for an output", "a lone zero byte for a dim",
               "a label that is not UTF-8", "a memory entry that is not UTF-8"]
    assert all(by_case[case] == [] for case in refused)
    # Through Labels: names it does not have, names asked twice.
    labels = _labels(blobs)
    names = [f"n{i}" for i in range(len(blobs))]
    asked = ["nope", *reversed(names), "n3", "", "n3"]
    assert labels.outputs_many(asked) == [labels.outputs(name) for name in asked]
    assert labels.outputs_many(names) == [labels.outputs(name) for name in names] == got
    assert labels.outputs_many([]) == [] and labels.outputs_many(["nope"]) == [[]]


def test_output_shapes_in_bulk_of_a_few_names_of_a_long_step():
    """A few names of many nodes (read one by one), most of them (picked from one copy)."""
    blobs = [_node(i, [_output([i % 5, 3], i)] * (i % 3)) for i in range(200)]
    labels = _labels(blobs)
    for asked in (["n7", "n150", "n7"], [f"n{i}" for i in range(0, 200, 2)], [f"n{i}" for i in range(199, -1, -1)]):
        assert labels.outputs_many(asked) == [_protos_outputs(blobs[int(name[1:])]) for name in asked]


_SIZES = st.one_of(st.sampled_from([0, 1, -1, 127, 128, _MIN, 2**63 - 1, 18, 8]), st.integers(-(2**63), 2**63 - 1))
_DIMS = st.lists(st.one_of(_SIZES, st.tuples(_SIZES, st.binary(max_size=4))), max_size=5)
_OUTPUTS = st.lists(st.one_of(
    st.builds(_output, st.none() | _DIMS, st.none() | _SIZES, st.booleans(), st.sampled_from([b"mklcpu", b"", b"\xff"]),
              st.sampled_from([b"", _num(3, 1), _long_field(2, _num(1, 4)), b"\x12\x00", b"\x12\x01"])
              | st.binary(max_size=8)),  # any bytes after the dims
    st.binary(max_size=6),  # any bytes for an output: refused by the protos, mostly
), max_size=4)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_OUTPUTS, st.sampled_from([b"", b"\x28\x00", _len_field(8, b"\xff")])), max_size=12),
       st.sampled_from([1, 3, 64]))
def test_output_shapes_in_bulk_are_the_protos(nodes, chunk):
    blobs = [_node(i, outputs, tail) for i, (outputs, tail) in enumerate(nodes)]
    old = shapes.CHUNK_NODES, shapes._GROUP
    shapes.CHUNK_NODES, shapes._GROUP = chunk, 1
    try:
        got = shapes.outputs(blobs)
    finally:
        shapes.CHUNK_NODES, shapes._GROUP = old
    assert got == [_protos_outputs(blob) for blob in blobs]


# Items that end in a field cut short (the protos refuse their node), and items after them whose
# one-byte item stands in for the marker a merged parse reading on into the sentinel would swallow.
_CUT_SHORT = {
    "an output ending in a fixed64 cut short (found by hypothesis)": [
        _node(0, [_output(None, 0, True), b"\x1a\x05\x08\x01\x12\x01\x00", b"\xe8\x00\x00\xf1\x00\x00"])],
    "an output ending in a fixed64 cut short": [
        _node(0, [_output([2], 8) + b"\x09\x00", _long_field(3, _long_field(2, b"\x00"))])],
    "a shape ending in a fixed64 cut short": [
        _node(0, [_output([], 4, extra_shape=_long_field(2, _num(1, 5)) + b"\x09\x00"), _output([(3, b"x")], 12)])],
    "a dim ending in a key cut short": [
        _node(0, [_output([], 4, extra_shape=_long_field(2, _num(1, 5) + b"\x10\x00\x80"))])],
    "a node ending in a fixed64 cut short": [
        _node(0, [_output([2], 8)], b"\x09\x00"), _node(1, [_output([3], 12), b"\x00"]), _node(2, [_output([4], 16)])],
}


@pytest.mark.parametrize("case", sorted(_CUT_SHORT))
def test_output_shapes_in_bulk_of_items_cut_short_are_the_protos(case, monkeypatch):
    """Each item's parse ends at its own end, as in the protos: a field cut short there does not
    read on into the sentinel after it."""
    monkeypatch.setattr(shapes, "_GROUP", 1)  # halves down to single nodes: the protos read only those they refuse
    blobs = _CUT_SHORT[case]
    assert _protos_outputs(blobs[0]) == []
    assert shapes.outputs(blobs) == [_protos_outputs(blob) for blob in blobs]


def _entries_of_kinds(kinds: list[dict]) -> step_stats_pb2.StepStats:
    """A CPU step whose node i holds one memory entry of kinds[i % len(kinds)]: which of the
    entry's numbers are set, and how many records it has."""
    step = step_stats_pb2.StepStats()
    device = step.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    for i in range(120):
        node = device.node_stats.add(node_name=f"block_{i % 7}/op_{i}", all_start_micros=1_700_000_000_000_000 + i,
                                     all_end_rel_micros=1 + i % 3)
        kind = kinds[i % len(kinds)]
        entry = node.memory.add(allocator_name="mklcpu", **{field: 64 * (i + 1) for field in kind["numbers"]})
        for r in range(kind["records"]):
            entry.allocation_records.add(alloc_micros=1_700_000_000_000_000 + i + r, alloc_bytes=(-1) ** r * 4096 * (i + 1))
        description = node.output.add().tensor_description
        description.dtype = 1
        description.allocation_description.requested_bytes = 4096 * (i + 1)
        description.allocation_description.allocator_name = "mklcpu"
    return step


@pytest.mark.parametrize("kinds, as_tables", [
    # TensorFlow's own: every entry of a kind alike (kinds told apart by their number of pairs).
    ([{"numbers": ["total_bytes", "peak_bytes", "live_bytes"], "records": 2},
      {"numbers": ["total_bytes", "peak_bytes"], "records": 0},
      {"numbers": ["total_bytes", "peak_bytes", "live_bytes", "allocator_bytes_in_use"], "records": 1}], True),
    # As many pairs, other keys: read pair by pair.
    ([{"numbers": ["total_bytes", "peak_bytes"], "records": 1},
      {"numbers": ["total_bytes", "live_bytes"], "records": 1}], False),
])
def test_memory_entries_of_a_kind_are_read_as_tables(kinds, as_tables, monkeypatch):
    """Entries with the same keys in the same order are read as one table per kind; kinds
    with as many pairs but other keys are read pair by pair; both as the protos read them."""
    seen = []
    alike = quick._alike_entries
    monkeypatch.setattr(quick, "_alike_entries", lambda *args: seen.append(alike(*args)) or seen[-1])
    step = _entries_of_kinds(kinds)
    (columns,) = _columns_of(step)
    _assert_same(columns, _blobs(step.dev_stats[0].node_stats))
    assert columns.named_from is None
    assert seen and all((tables is not None) == as_tables for tables in seen)
