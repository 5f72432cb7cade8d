"""Columnar decoding of RunMetadata node stats, straight from the wire.

Reading ~10 fields per node through Python message objects costs a few
microseconds per node: a 100k-node step spent most of its decode there. This
module gets the same columns from a handful of C-level protobuf parses.

How: protobuf merges a singular message field that occurs several times, and
appends to a repeated field. So if node bodies are concatenated and parsed as
ONE message of a wire-compatible "merged" schema whose fields are all
`repeated`, every field comes back as one flat list over all nodes. Absent
proto3 fields (a zero `all_end_rel_micros`, no `memory_stats`) would shift
those lists, so a sentinel record with a marker value for every field is
appended after each node: the markers split each flat list back into one
segment per node. Memory entries, their allocation records and outputs are
handled the same way one level down.

Strings cost a Python object each. Outputs' allocator names (one per output,
and nearly always the same one) are therefore read as packed varints: a
repeated integer field accepts a length-delimited payload as packed values,
so an ASCII name comes back as one number per byte, and a chunk's names as
one integer array. When they spell one allocator name over and over, node
by node, that is all we need; otherwise they are read again as strings.

The schemas below list only the fields the engine reads, with the field
numbers and wire types of tensorflow/core/framework/step_stats.proto,
tensor_description.proto and allocation_description.proto.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import step_stats_pb2

_INT64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED



def _IGNORED_INTS(*numbers: int) -> list[tuple]:  # noqa: N802 - reads as part of the schema
    """Fields the engine does not read, declared singular so merging just overwrites them.

    Left undeclared they would be kept as unknown fields and copied for every node.
    """
    return [(f"ignored_{n}", n, _INT64, _OPTIONAL, None) for n in numbers]


def _nodes(outputs: str) -> list[tuple]:
    """NodeExecStats, merged over all nodes of a chunk; `outputs` names the outputs' schema."""
    return [
        ("node_name", 1, _STRING, _REPEATED, None),
        ("all_start_micros", 2, _INT64, _REPEATED, None),
        ("all_end_rel_micros", 5, _INT64, _REPEATED, None),
        ("memory", 6, _BYTES, _REPEATED, None),
        ("output", 7, _MESSAGE, _OPTIONAL, outputs),
        ("timeline_label", 8, _BYTES, _OPTIONAL, None),  # read per distinct name, see NodeColumns._decode
        ("memory_stats", 12, _MESSAGE, _OPTIONAL, "MemoryStats"),
        *_IGNORED_INTS(3, 4, 9, 10, 13, 14, 15, 16, 17),
        ("referenced_tensor", 11, _BYTES, _OPTIONAL, None),
    ]


def _outputs(suffix: str, allocator_name_type: int) -> dict[str, list[tuple]]:
    """NodeOutput -> TensorDescription -> AllocationDescription, merged over all outputs of all nodes."""
    return {
        f"Outputs{suffix}": [
            ("tensor_description", 3, _MESSAGE, _OPTIONAL, f"TensorDescription{suffix}"), *_IGNORED_INTS(1)],
        f"TensorDescription{suffix}": [
            ("dtype", 1, _INT64, _REPEATED, None),  # counted: every real output has one
            ("allocation_description", 4, _MESSAGE, _OPTIONAL, f"AllocationDescription{suffix}"),
            ("shape", 2, _BYTES, _OPTIONAL, None),
        ],
        f"AllocationDescription{suffix}": [
            ("requested_bytes", 1, _INT64, _REPEATED, None),
            ("allocator_name", 3, allocator_name_type, _REPEATED, None),
            *_IGNORED_INTS(2, 4, 5, 6),
        ],
    }


# (message, [(field name, number, type, label, message type name)])
_SCHEMA = {
    # RunMetadata with node stats kept as raw bytes, one item per node.
    "Run": [("step_stats", 1, _MESSAGE, _OPTIONAL, "Steps"), ("partition_graphs", 3, _BYTES, _REPEATED, None)],
    "Steps": [("dev_stats", 1, _MESSAGE, _REPEATED, "Device")],
    "Device": [("device", 1, _STRING, _OPTIONAL, None), ("node_stats", 2, _BYTES, _REPEATED, None)],
    # Two readings of the same nodes. "Nodes" reads outputs' allocator names as
    # packed varints: an ASCII name's bytes come back as one number each, so the
    # names of a whole chunk are one integer array (no string objects, see
    # NodeColumns._outputs_on_one_allocator). "NodesNamed" reads them as strings.
    "Nodes": _nodes("Outputs"),
    "NodesNamed": _nodes("OutputsNamed"),
    **_outputs("", _INT64),
    **_outputs("Named", _STRING),
    "MemoryStats": [
        ("temp_memory_size", 1, _INT64, _REPEATED, None),
        ("persistent_memory_size", 3, _INT64, _REPEATED, None),
        *_IGNORED_INTS(2, 4),
        ("persistent_tensor_alloc_ids", 5, _BYTES, _OPTIONAL, None),
        ("device_persistent_tensor_alloc_ids", 6, _BYTES, _OPTIONAL, None),
    ],
    # Just the labels of some nodes, merged.
    "Labels": [("timeline_label", 8, _STRING, _REPEATED, None)],
    # AllocatorMemoryUsed, merged over all memory entries.
    "Entries": [
        ("allocator_name", 1, _STRING, _REPEATED, None),
        ("total_bytes", 2, _INT64, _REPEATED, None),
        ("peak_bytes", 3, _INT64, _REPEATED, None),
        ("live_bytes", 4, _INT64, _REPEATED, None),
        ("allocator_bytes_in_use", 5, _INT64, _REPEATED, None),
        ("allocation_records", 6, _BYTES, _REPEATED, None),
    ],
    # AllocationRecord, merged over all records.
    "Records": [("alloc_micros", 1, _INT64, _REPEATED, None), ("alloc_bytes", 2, _INT64, _REPEATED, None)],
}
_PACKAGE = "tb_memory.wire"


def _message_classes() -> dict:
    file_proto = descriptor_pb2.FileDescriptorProto(name="tb_memory_wire.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _SCHEMA.items():
        message = file_proto.message_type.add(name=name)
        for field_name, number, field_type, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=field_type, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if field_type == _INT64 and label == _REPEATED:
                field.options.packed = False  # how TF writes them: one varint per (singular) field
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _SCHEMA}


_CLASSES: dict | None = None


def classes() -> dict:
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _message_classes()
    return _CLASSES


# -- sentinels -------------------------------------------------------------------------


class _Misaligned(ValueError):
    """A flat list did not split into the expected number of segments."""


@dataclass(frozen=True)
class _Markers:
    """Marker values and the sentinel records built from them.

    TensorFlow's step stats are proto3: a zero number or an empty string is
    never written, so an explicit 0 or "" is a 2-byte marker no real field can
    look like ("compact"). Bytes from another writer that do spell out zeros
    make a segment count come out wrong; decoding then starts again with
    INT64_MIN and a lone NUL as markers ("robust"), which nothing real uses.
    """

    mark_int: int
    mark_text: str
    # Node name and start time are always written by TensorFlow: "compact" leaves their
    # markers out and checks that there are exactly as many as nodes.
    mark_dense: bool

    def int_field(self, number: int) -> bytes:
        return _key(number, 0) + _varint(self.mark_int)

    def text_field(self, number: int) -> bytes:
        return _len_field(number, self.mark_text.encode())

    def node(self, named_outputs: bool) -> bytes:
        """The record after each node: a marker for every field read per node.

        The outputs' allocator-name marker is a lone NUL when names are read as
        packed varints ("Nodes"): one 0, where an empty name would add nothing.
        """
        return self._node_named if named_outputs else self._node_packed

    def _node_sentinel(self, allocator_name_mark: bytes) -> bytes:
        allocation = self.int_field(1) + _len_field(3, allocator_name_mark)
        output = _len_field(3, self.int_field(1) + _len_field(4, allocation))
        dense = self.text_field(1) + self.int_field(2) if self.mark_dense else b""
        return b"".join([
            dense, self.int_field(5), _len_field(6, _MARK_ITEM),
            _len_field(7, output), _len_field(12, self.int_field(1) + self.int_field(3)),
        ])

    @cached_property
    def _node_named(self) -> bytes:
        return self._node_sentinel(self.mark_text.encode())

    @cached_property
    def _node_packed(self) -> bytes:
        return self._node_sentinel(_NAME_MARK)

    def dense_text(self, values, n: int) -> list[str]:
        if self.mark_dense:
            return self.text(values, n)
        if len(values) != n:
            raise _Misaligned(f"expected {n} values, found {len(values)}")
        return values[:]

    def dense_scalar(self, values, n: int) -> np.ndarray:
        if self.mark_dense:
            return self.scalar(values, n)
        if len(values) != n:
            raise _Misaligned(f"expected {n} values, found {len(values)}")
        return np.asarray(values, dtype=np.int64)

    @cached_property
    def entry(self) -> bytes:
        return b"".join([self.text_field(1), *(self.int_field(k) for k in (2, 3, 4, 5)), _len_field(6, _MARK_ITEM)])

    @cached_property
    def record(self) -> bytes:
        return self.int_field(1) + self.int_field(2)

    def segments(self, values, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(values without markers, count per segment) of a marked int list of n segments."""
        flat = np.asarray(values, dtype=np.int64)  # upb containers convert in C (__array__)
        is_mark = flat == self.mark_int
        return flat[~is_mark], _segment_counts(is_mark, n)

    def scalar(self, values, n: int) -> np.ndarray:
        """The value each of n segments holds: 0 when absent, the last when repeated (as protobuf merges)."""
        return _last_per_segment(*self.segments(values, n), np.zeros(n, dtype=np.int64))

    def text(self, values, n: int) -> list[str]:
        values = values[:]  # one C-level copy into a list of str
        if len(values) == 2 * n and values[1::2].count(self.mark_text) == n:  # one value per segment: the usual case
            return values[0::2]
        return _last_per_segment(*self.text_counts(values, n), [""] * n)

    def text_counts(self, values, n: int) -> tuple[list[str], np.ndarray]:
        """(strings without markers, count per segment)."""
        values = values[:] if not isinstance(values, list) else values
        is_mark = np.fromiter(map(self.mark_text.__eq__, values), dtype=bool, count=len(values))
        return list(itertools.compress(values, (~is_mark).tolist())), _segment_counts(is_mark, n)


def _segment_counts(is_mark: np.ndarray, n: int) -> np.ndarray:
    """Values in each of the n segments that the markers close (one marker after each)."""
    marks = np.flatnonzero(is_mark)
    if marks.size != n:
        raise _Misaligned(f"expected {n} markers, found {marks.size}")
    counts = marks.copy()
    counts[1:] -= marks[:-1] + 1
    return counts


def _last_per_segment(values, counts: np.ndarray, out):
    """out[k] = the last of segment k's values (as protobuf's last-one-wins); segments without one keep out[k]."""
    present = np.flatnonzero(counts > 0)
    last = np.cumsum(counts)[present] - 1
    if isinstance(out, np.ndarray):
        out[present] = values[last]
    else:
        for segment, index in zip(present.tolist(), last.tolist()):
            out[segment] = values[index]
    return out


CHUNK_NODES = 8192

_COMPACT = _Markers(0, "", mark_dense=False)
_ROBUST = _Markers(-(2**63), "\x00", mark_dense=True)
_MARK_ITEM = b"\x00"  # a lone 0 byte: field 0 is invalid, so no real entry, output or record is this
_NAME_MARK = b"\x00"  # read as a packed varint: 0, a byte no allocator name holds


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _with_sentinels(items, sentinel: bytes) -> bytes:
    """Every item followed by the sentinel, in one buffer."""
    if not items:
        return b""
    joined = sentinel.join(items)
    joined += sentinel
    return joined


def _items(values, n: int) -> tuple[list[bytes], np.ndarray]:
    """Items between the n item markers, and the segment each belongs to."""
    values = values[:]
    is_mark = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) == 1
    counts = _segment_counts(is_mark, n)
    return list(itertools.compress(values, (~is_mark).tolist())), np.repeat(np.arange(n, dtype=np.int64), counts)


# -- public ------------------------------------------------------------------------------


class NodeColumns:
    """One device's node stats as columns (what trace.py builds spaces from).

    names                  per execution
    distinct_names         the distinct names, in first-seen order
    name_code              per execution: index into distinct_names
    label_of               timeline_label of the first execution of each distinct name
    start, end             absolute micros per execution
    temp, persistent       memory_stats per execution
    memory   (k, 6)        exec, allocator code, total, peak, live, allocator_bytes_in_use
    records  (k, 4)        exec, allocator code, alloc_micros, alloc_bytes
    outputs  (k, 3)        exec, allocator code, requested_bytes
    allocator_codes        allocator name -> code
    """

    def __init__(self, node_stats) -> None:
        """node_stats: the serialized NodeExecStats, a list or the parsed run's repeated field."""
        try:
            self._decode(node_stats, _COMPACT)
        except _Misaligned:  # explicit zeros in the bytes: redo with markers nothing real uses
            self._decode(node_stats, _ROBUST)

    def _decode(self, node_stats, mk: _Markers) -> None:
        """Decode in chunks, sliced from node_stats as they are needed: a few MB at a
        time keeps blobs, joined buffers and parser arenas in reused memory."""
        self.allocator_codes: dict[str, int] = {}
        # Outputs' allocator names are read as bytes until a chunk's outputs are not all on
        # one allocator; from then on (a GPU step, say) they are read as strings.
        self._named_outputs = False
        # Distinct names -> code in first-seen order; a missing name gets the next code.
        index: collections.defaultdict = collections.defaultdict()
        index.default_factory = index.__len__
        label_blobs: list[bytes] = []  # the first execution of each distinct name, in code order
        parts = [self._decode_chunk(node_stats[i:i + CHUNK_NODES], i, mk, index, label_blobs)
                 for i in range(0, len(node_stats), CHUNK_NODES)]
        self.names = list(itertools.chain.from_iterable(part["names"] for part in parts))
        self.distinct_names = list(index)
        for key in ("name_code", "start", "end", "temp", "persistent"):
            setattr(self, key, np.concatenate([part[key] for part in parts]) if parts else np.zeros(0, np.int64))
        for key, width in (("memory", 6), ("records", 4), ("outputs", 3)):
            setattr(self, key, np.concatenate([part[key] for part in parts]) if parts else np.zeros((0, width), np.int64))
        # Labels serve op types and kernels, which are per node: only the first execution
        # of each name is read again for its label (a few thousand of 100k executions).
        labels = classes()["Labels"].FromString(_with_sentinels(label_blobs, mk.text_field(8))).timeline_label
        self.label_of = dict(zip(self.distinct_names, mk.text(labels, len(label_blobs))))

    def _decode_chunk(self, node_blobs: list[bytes], offset: int, mk: _Markers,
                      index: collections.defaultdict, label_blobs: list[bytes]) -> dict:
        """Columns of consecutive nodes; execution indices start at `offset`."""
        cls = classes()
        n = len(node_blobs)
        codes = self.allocator_codes
        outputs = None
        if not self._named_outputs:
            try:
                nodes = cls["Nodes"].FromString(_with_sentinels(node_blobs, mk.node(False)))
                outputs = self._outputs_on_one_allocator(nodes.output.tensor_description, n, mk)
            except DecodeError:  # a non-ASCII allocator name ends in a byte that is no whole varint
                pass
            self._named_outputs = outputs is None
        if outputs is None:
            nodes = cls["NodesNamed"].FromString(_with_sentinels(node_blobs, mk.node(True)))
            outputs = self._outputs(nodes.output.tensor_description, node_blobs, mk)
        outputs[:, 0] += offset

        names = mk.dense_text(nodes.node_name, n)
        before = len(index)
        name_code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=n)
        if len(index) > before:  # names first seen in this chunk: keep their first node for its label
            fresh = np.flatnonzero(name_code >= before)
            _, first = np.unique(name_code[fresh], return_index=True)
            label_blobs.extend(node_blobs[i] for i in fresh[first].tolist())
        start = mk.dense_scalar(nodes.all_start_micros, n)
        columns = {
            "names": names,
            "name_code": name_code,
            "start": start,
            "end": start + mk.scalar(nodes.all_end_rel_micros, n),
            "temp": mk.scalar(nodes.memory_stats.temp_memory_size, n),
            "persistent": mk.scalar(nodes.memory_stats.persistent_memory_size, n),
            "outputs": outputs,
        }
        entries, entry_exec = _items(nodes.memory, n)
        entry_exec += offset
        k = len(entries)
        merged = cls["Entries"].FromString(_with_sentinels(entries, mk.entry))
        entry_code = self._codes(mk.text(merged.allocator_name, k), codes)
        columns["memory"] = np.column_stack([
            entry_exec, entry_code, mk.scalar(merged.total_bytes, k), mk.scalar(merged.peak_bytes, k),
            mk.scalar(merged.live_bytes, k), mk.scalar(merged.allocator_bytes_in_use, k),
        ]).reshape(-1, 6)
        records, record_entry = _items(merged.allocation_records, k)
        r = len(records)
        merged_records = cls["Records"].FromString(_with_sentinels(records, mk.record))
        columns["records"] = np.column_stack([
            entry_exec[record_entry], entry_code[record_entry],
            mk.scalar(merged_records.alloc_micros, r), mk.scalar(merged_records.alloc_bytes, r),
        ]).reshape(-1, 4)
        return columns

    def _outputs_on_one_allocator(self, description, n: int, mk: _Markers) -> np.ndarray | None:
        """(exec, allocator code, requested bytes) per output with bytes, when every
        output with bytes names the same allocator (a CPU step); else None.

        The names come back as one array of bytes, a 0 after each node's. The
        first output's name is cut from them by the counts (a node's name bytes
        over its number of outputs with bytes), and must then repeat exactly
        once per output with bytes, node by node. The outputs must also pair by
        counts as in _outputs. (Byte counts stand in for name boundaries: only
        names cut from copies of each other, "a" + "bab" for "ab" + "ab", could
        pass for copies, and allocator names are never like that.)
        """
        requested, requested_count, requested_exec, dtype_count = _requested(description, n, mk)
        tokens = np.asarray(description.allocation_description.allocator_name, dtype=np.int64)
        is_mark = tokens == 0
        if np.count_nonzero(is_mark) != n:  # a NUL in a name
            return None
        name_bytes = _segment_counts(is_mark, n)
        chars = tokens[~is_mark]
        if not requested.size:
            return np.zeros((0, 3), np.int64) if not chars.size else None
        if not np.array_equal(requested_count, dtype_count):
            return None
        first = int(np.argmax(requested_count > 0))
        size, rest = divmod(int(name_bytes[first]), int(requested_count[first]))
        if not size or rest or not np.array_equal(name_bytes, requested_count * size):
            return None
        name = chars[int(name_bytes[:first].sum()):][:size]
        if name.max() > 0x7F or not (chars.reshape(-1, size) == name).all():  # ASCII: one byte, one varint
            return None
        code = self._codes([name.astype(np.uint8).tobytes().decode("ascii")], self.allocator_codes)[0]
        return np.column_stack([requested_exec, np.full(requested.size, code), requested]).reshape(-1, 3)

    def _outputs(self, description, node_blobs: list[bytes], mk: _Markers) -> np.ndarray:
        """(exec, allocator code, requested bytes) per output that requested any bytes.

        All outputs of all nodes come back merged: per node, its dtypes, requested
        sizes and allocator names, in order. Every output has a dtype, and
        TensorFlow fills an output's allocation description from its buffer, size
        and allocator together (Tensor::FillDescription), so a node with as many
        sizes and names as dtypes pairs them in order. Any other node with bytes
        is read through the full proto.
        """
        n = len(node_blobs)
        codes = self.allocator_codes
        allocation = description.allocation_description
        requested, requested_count, requested_exec, dtype_count = _requested(description, n, mk)
        names, name_count = mk.text_counts(allocation.allocator_name, n)
        paired = (requested_count == dtype_count) & (name_count == dtype_count)
        if paired.all():
            return np.column_stack([requested_exec, self._codes(names, codes), requested]).reshape(-1, 3)
        irregular = np.flatnonzero(~paired & (requested_count > 0))
        name_exec = np.repeat(np.arange(n, dtype=np.int64), name_count)
        keep_requested, keep_names = paired[requested_exec], paired[name_exec]
        rows = [np.column_stack([requested_exec[keep_requested],
                                 self._codes(list(itertools.compress(names, keep_names.tolist())), codes),
                                 requested[keep_requested]]).reshape(-1, 3)]
        extra = []
        for i in irregular.tolist():
            for output in step_stats_pb2.NodeExecStats.FromString(node_blobs[i]).output:
                allocation = output.tensor_description.allocation_description
                if allocation.requested_bytes:
                    extra.append((i, self._codes([allocation.allocator_name], codes)[0], allocation.requested_bytes))
        rows.append(np.asarray(extra, dtype=np.int64).reshape(-1, 3))
        table = np.concatenate(rows)
        return table[np.argsort(table[:, 0], kind="stable")]

    @staticmethod
    def _codes(names: list[str], codes: dict[str, int]) -> np.ndarray:
        for name in dict.fromkeys(names):
            codes.setdefault(name, len(codes))
        return np.fromiter(map(codes.__getitem__, names), dtype=np.int64, count=len(names))

    def rows(self, table: np.ndarray, allocator: str) -> np.ndarray:
        """Rows of a table for one allocator, without the allocator column."""
        code = self.allocator_codes.get(allocator, -1)
        others = [0] + list(range(2, table.shape[1]))
        on_it = table[:, 1] == code
        return table[:, others] if on_it.all() else table[on_it][:, others]


def _requested(description, n: int, mk: _Markers) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Outputs' requested bytes (non-zero ones), their count per node, the node of each,
    and each node's count of dtypes (one per real output), from merged outputs."""
    _, dtype_count = mk.segments(description.dtype, n)
    requested, requested_count = mk.segments(description.allocation_description.requested_bytes, n)
    return requested, requested_count, np.repeat(np.arange(n, dtype=np.int64), requested_count), dtype_count


def parse_run(data: bytes):
    """The RunMetadata's devices with raw node blobs (raises protobuf's DecodeError)."""
    return classes()["Run"].FromString(data)
