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

Strings and byte items cost a Python object each. Outputs' allocator names
(one per output, and nearly always the same one) are therefore read as packed
varints: a repeated integer field accepts a length-delimited payload as packed
values, so an ASCII name comes back as one number per byte, and a chunk's
names as one integer array. Memory entries are read the same way, whole: an
entry whose strings are ASCII comes back as its keys, numbers, lengths and
name bytes, one integer each, which numpy checks and splits into columns.
When a chunk is all on one allocator with at most one entry per node (a CPU
step), that is all we need; otherwise it is read again with strings and items.

The schemas below list only the fields the engine reads, with the field
numbers and wire types of tensorflow/core/framework/step_stats.proto,
tensor_description.proto and allocation_description.proto. Text fields are
read as bytes and decoded once per distinct value; text that is not UTF-8
(which the protos refuse) is shown with U+FFFD.

Taken on trust, as every protobuf writer and TensorFlow behave; bytes that
break these are read differently from the protos, never with a crash:
  * each field in the wire type its .proto gives it, and a singular field
    written once per message (merging cannot tell two writes from two values);
  * varints in their shortest form (a record's length is checked against
    its numbers' shortest encodings);
  * allocator names without NUL bytes (a NUL can end a run of non-ASCII bytes
    that then reads as one printable number), and an allocation description
    filled with both its size and its allocator, or neither.
Bytes that break the segmenting itself (a field cut short, a value equal to
a robust marker) raise DecodeError, as a corrupt step.
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


def _nodes(outputs: str, memory: tuple) -> list[tuple]:
    """NodeExecStats, merged over all nodes of a chunk; `outputs` names the outputs'
    schema, `memory` is how the memory entries are read."""
    return [
        ("node_name", 1, _BYTES, _REPEATED, None),  # bytes: decoded once per distinct name
        ("all_start_micros", 2, _INT64, _REPEATED, None),
        ("all_end_rel_micros", 5, _INT64, _REPEATED, None),
        memory,
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
    # Two readings of the same nodes. "Nodes" is for a step on one allocator with at
    # most one memory entry per node (a CPU step): outputs' allocator names, and
    # whole memory entries, are read as packed varints (see _one_allocator). "NodesNamed"
    # reads any step: names as strings, and each memory entry as raw bytes, merged
    # again in a second parse ("Entries").
    "Nodes": _nodes("Outputs", ("memory", 6, _INT64, _REPEATED, None)),
    "NodesNamed": _nodes("OutputsNamed", ("memory", 6, _BYTES, _REPEATED, None)),
    **_outputs("", _INT64),
    **_outputs("Named", _BYTES),
    "MemoryStats": [
        ("temp_memory_size", 1, _INT64, _REPEATED, None),
        ("persistent_memory_size", 3, _INT64, _REPEATED, None),
        *_IGNORED_INTS(2, 4),
        ("persistent_tensor_alloc_ids", 5, _BYTES, _OPTIONAL, None),
        ("device_persistent_tensor_alloc_ids", 6, _BYTES, _OPTIONAL, None),
    ],
    # Just the labels of some nodes, merged.
    "Labels": [("timeline_label", 8, _BYTES, _REPEATED, None)],
    # AllocatorMemoryUsed, merged over all memory entries.
    "Entries": [
        ("allocator_name", 1, _BYTES, _REPEATED, None),
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
    mark_text: bytes  # text fields are all read as bytes, and decoded once per distinct value
    # Node name and start time are always written by TensorFlow: "compact" leaves their
    # markers out and checks that there are exactly as many as nodes.
    mark_dense: bool

    def int_field(self, number: int) -> bytes:
        return _key(number, 0) + _varint(self.mark_int)

    def text_field(self, number: int) -> bytes:
        return _len_field(number, self.mark_text)

    def node(self, named: bool) -> bytes:
        """The record after each node: a marker for every field read per node.

        Fields read as packed varints ("Nodes": outputs' allocator names, memory
        entries) are marked with a lone 0 byte: one 0, where an empty payload
        would add nothing. Read as an item ("NodesNamed"), the memory entry's
        marker is an item of its own.
        """
        return self._node_named if named else self._node_packed

    def _node_sentinel(self, allocator_name_mark: bytes, memory_mark: bytes) -> bytes:
        allocation = self.int_field(1) + _len_field(3, allocator_name_mark)
        output = _len_field(3, self.int_field(1) + _len_field(4, allocation))
        dense = self.text_field(1) + self.int_field(2) if self.mark_dense else b""
        return b"".join([
            dense, self.int_field(5), _len_field(6, memory_mark),
            _len_field(7, output), _len_field(12, self.int_field(1) + self.int_field(3)),
        ])

    @cached_property
    def _node_named(self) -> bytes:
        return self._node_sentinel(self.mark_text, _MARK_ITEM)

    @cached_property
    def _node_packed(self) -> bytes:
        return self._node_sentinel(_TOKEN_MARK, _TOKEN_MARK)

    def dense_bytes(self, values, n: int) -> list[bytes]:
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
        """The value each of n segments holds: 0 when absent, the last when repeated (as
        protobuf merges): the value just before each segment's marker, unless that is a marker."""
        out = np.zeros(n, dtype=np.int64)
        if len(values) == n:  # markers only: absent everywhere
            return out
        flat = np.asarray(values, dtype=np.int64)
        is_mark = flat == self.mark_int
        before = np.flatnonzero(is_mark) - 1
        if before.size != n:
            raise _Misaligned(f"expected {n} markers, found {before.size}")
        present = ~is_mark[before]  # at -1 (the first segment empty) is_mark[-1] is the last marker
        out[present] = flat[before[present]]
        return out

    def text(self, values, n: int) -> list[bytes]:
        """The text each of n segments holds: empty when absent, the last when repeated."""
        values = values[:]  # one C-level copy into a list
        mark = self.mark_text
        if len(values) == 2 * n and values[1::2].count(mark) == n and mark not in values[0::2]:
            return values[0::2]  # one value per segment: the usual case
        texts, counts = self.text_counts(values, n)
        out = [b""] * n
        present = np.flatnonzero(counts > 0)
        for segment, last in zip(present.tolist(), (np.cumsum(counts)[present] - 1).tolist()):
            out[segment] = texts[last]  # the last one wins, as protobuf merges
        return out

    def text_counts(self, values, n: int) -> tuple[list[bytes], np.ndarray]:
        """(texts without markers, count per segment)."""
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


CHUNK_NODES = 8192

_COMPACT = _Markers(0, b"", mark_dense=False)
_ROBUST = _Markers(-(2**63), b"\x00", mark_dense=True)
_MARK_ITEM = b"\x00"  # a lone 0 byte: field 0 is invalid, so no real entry, output or record is this
_TOKEN_MARK = b"\x00"  # read as a packed varint: 0, which no name or entry TensorFlow writes holds


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

    distinct_names         the distinct names, in first-seen order
    name_code              per execution: index into distinct_names
    label_of               timeline_label of the first execution of each distinct name
    start, end             absolute micros per execution
    temp, persistent       memory_stats per execution
    memory   (k, 6)        exec, allocator code, total, peak, live, allocator_bytes_in_use
    records  (k, 4)        exec, allocator code, alloc_micros, alloc_bytes
    outputs  (k, 3)        exec, allocator code, requested_bytes
    allocator_codes        allocator name -> code
    named_from             the first execution read as "NodesNamed" (None: all on one
                           allocator, read as "Nodes"; see _one_allocator)
    """

    def __init__(self, node_stats) -> None:
        """node_stats: the serialized NodeExecStats, a list or the parsed run's repeated field."""
        try:
            self._decode(node_stats, _COMPACT)
        except _Misaligned:  # explicit zeros in the bytes: redo with markers nothing real uses
            try:
                self._decode(node_stats, _ROBUST)
            except _Misaligned as exc:  # a node that reads past its end, or that uses the markers
                raise DecodeError(f"node stats do not split into nodes: {exc}") from None

    def _decode(self, node_stats, mk: _Markers) -> None:
        """Decode in chunks, sliced from node_stats as they are needed: a few MB at a
        time keeps blobs, joined buffers and parser arenas in reused memory."""
        self.allocator_codes: dict[str, int] = {}
        self._allocator_bytes: dict[bytes, int] = {}  # the same codes, by the names' bytes
        # Chunks are read as "Nodes" until one is not all on one allocator, with at most
        # one memory entry per node; from then on (a GPU step, say) as "NodesNamed".
        self.named_from: int | None = None
        # Distinct names -> code in first-seen order; a missing name gets the next code.
        index: collections.defaultdict = collections.defaultdict()
        index.default_factory = index.__len__
        label_blobs: list[bytes] = []  # the first execution of each distinct name, in code order
        parts = [self._decode_chunk(node_stats[i:i + CHUNK_NODES], i, mk, index, label_blobs)
                 for i in range(0, len(node_stats), CHUNK_NODES)]
        # Names from other writers may not be UTF-8: shown with U+FFFD rather than refused.
        self.distinct_names = [name.decode("utf-8", "replace") for name in index]
        for key in ("name_code", "start", "end", "temp", "persistent"):
            setattr(self, key, np.concatenate([part[key] for part in parts]) if parts else np.zeros(0, np.int64))
        for key, width in (("memory", 6), ("records", 4), ("outputs", 3)):
            setattr(self, key, np.concatenate([part[key] for part in parts]) if parts else np.zeros((0, width), np.int64))
        # Labels serve op types and kernels, which are per node: only the first execution
        # of each name is read again for its label (a few thousand of 100k executions).
        labels = classes()["Labels"].FromString(_with_sentinels(label_blobs, mk.text_field(8))).timeline_label
        self.label_of = {name: label.decode("utf-8", "replace")
                         for name, label in zip(self.distinct_names, mk.text(labels, len(label_blobs)))}

    def _decode_chunk(self, node_blobs: list[bytes], offset: int, mk: _Markers,
                      index: collections.defaultdict, label_blobs: list[bytes]) -> dict:
        """Columns of consecutive nodes; execution indices start at `offset`."""
        cls = classes()
        n = len(node_blobs)
        columns = None
        if self.named_from is None:
            try:
                nodes = cls["Nodes"].FromString(_with_sentinels(node_blobs, mk.node(False)))
                columns = self._one_allocator(nodes, n, mk)
            except DecodeError:  # a non-ASCII allocator name ends in a byte that is no whole varint
                pass
            if columns is None:
                self.named_from = offset
        if columns is None:
            nodes = cls["NodesNamed"].FromString(_with_sentinels(node_blobs, mk.node(True)))
            columns = {"outputs": self._outputs(nodes.output.tensor_description, node_blobs, mk)}
            columns["memory"], columns["records"] = self._entries(nodes.memory, n, mk)
        for key in ("outputs", "memory", "records"):
            columns[key][:, 0] += offset

        names = mk.dense_bytes(nodes.node_name, n)
        before = len(index)
        name_code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=n)
        if len(index) > before:  # names first seen in this chunk: keep their first node for its label
            fresh = np.flatnonzero(name_code >= before)
            _, first = np.unique(name_code[fresh], return_index=True)
            label_blobs.extend(node_blobs[i] for i in fresh[first].tolist())
        start = mk.dense_scalar(nodes.all_start_micros, n)
        columns.update({
            "name_code": name_code,
            "start": start,
            "end": start + mk.scalar(nodes.all_end_rel_micros, n),
            "temp": mk.scalar(nodes.memory_stats.temp_memory_size, n),
            "persistent": mk.scalar(nodes.memory_stats.persistent_memory_size, n),
        })
        return columns

    def _one_allocator(self, nodes, n: int, mk: _Markers) -> dict | None:
        """Outputs, memory entries and records of nodes read as "Nodes", when all of
        them are on one allocator, with at most one memory entry per node (a CPU
        step); else None.

        Outputs (exec, allocator code, requested bytes), one per output with bytes:
        the outputs' allocator names come back as one array of bytes, a 0 after
        each node's. The first output's name is cut from them by the counts (a
        node's name bytes over its number of outputs with bytes), and must then
        repeat exactly once per output with bytes, node by node. So names and
        sizes pair in order, as TensorFlow fills them together from a buffer
        (Tensor::FillDescription); an output without a buffer (an empty tensor)
        has a dtype and neither. (Byte counts stand in for name boundaries: only
        names cut from copies of each other, "a" + "bab" for "ab" + "ab", could
        pass for copies, and allocator names are never like that.) Memory
        entries must name the same allocator: see _entry_tokens.
        """
        description = nodes.output.tensor_description
        requested, requested_count, requested_exec, dtype_count = _requested(description, n, mk)
        names = _spelt(description.allocation_description.allocator_name, n)
        if names is None or (requested_count > dtype_count).any():
            return None  # a 0 inside a name; sizes beside no output
        chars, name_bytes = names
        if requested.size:
            first = int(np.argmax(requested_count > 0))
            size, rest = divmod(int(name_bytes[first]), int(requested_count[first]))
            if not size or rest or not np.array_equal(name_bytes, requested_count * size):
                return None
            name = chars[int(name_bytes[:first].sum()):][:size]
        elif chars.size:  # names beside no bytes
            return None
        else:  # no output with bytes: the first entry names the allocator, if any
            tokens = np.asarray(nodes.memory, dtype=np.int64)
            start = int(np.argmax(tokens != 0))  # a 0 ends each node's entries
            name = tokens[start + 2:][:max(int(tokens[start + 1]), 0)] if tokens.size > start + 1 else tokens[:0]
        if name.size and (name.min() < 0x20 or name.max() > 0x7E or not (chars.reshape(-1, name.size) == name).all()):
            return None  # printable ASCII only: one byte, one varint (see the module's notes)
        entries = _entry_tokens(nodes.memory, n, name)
        if entries is None:
            return None
        memory_rows, record_rows = entries
        if not name.size:  # no output with bytes, no entry: nothing to name
            return {"outputs": np.zeros((0, 3), np.int64), "memory": memory_rows, "records": record_rows}
        code = self._codes([name.astype(np.uint8).tobytes()])[0]
        memory_rows[:, 1] = code
        record_rows[:, 1] = code
        return {
            "outputs": np.column_stack([requested_exec, np.full(requested.size, code), requested]).reshape(-1, 3),
            "memory": memory_rows,
            "records": record_rows,
        }

    def _entries(self, items, n: int, mk: _Markers) -> tuple[np.ndarray, np.ndarray]:
        """Memory (exec, code, total, peak, live, allocator_bytes_in_use) and records
        (exec, code, micros, bytes) from the entries read as items ("NodesNamed")."""
        cls = classes()
        entries, entry_exec = _items(items, n)
        k = len(entries)
        merged = cls["Entries"].FromString(_with_sentinels(entries, mk.entry))
        entry_code = self._codes(mk.text(merged.allocator_name, k))
        memory = np.column_stack([
            entry_exec, entry_code, mk.scalar(merged.total_bytes, k), mk.scalar(merged.peak_bytes, k),
            mk.scalar(merged.live_bytes, k), mk.scalar(merged.allocator_bytes_in_use, k),
        ]).reshape(-1, 6)
        records, record_entry = _items(merged.allocation_records, k)
        r = len(records)
        merged_records = cls["Records"].FromString(_with_sentinels(records, mk.record))
        return memory, np.column_stack([
            entry_exec[record_entry], entry_code[record_entry],
            mk.scalar(merged_records.alloc_micros, r), mk.scalar(merged_records.alloc_bytes, r),
        ]).reshape(-1, 4)

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
        allocation = description.allocation_description
        requested, requested_count, requested_exec, dtype_count = _requested(description, n, mk)
        names, name_count = mk.text_counts(allocation.allocator_name, n)
        paired = (requested_count == dtype_count) & (name_count == dtype_count)
        if paired.all():
            return np.column_stack([requested_exec, self._codes(names), requested]).reshape(-1, 3)
        irregular = np.flatnonzero(~paired & (requested_count > 0))
        name_exec = np.repeat(np.arange(n, dtype=np.int64), name_count)
        keep_requested, keep_names = paired[requested_exec], paired[name_exec]
        rows = [np.column_stack([requested_exec[keep_requested],
                                 self._codes(list(itertools.compress(names, keep_names.tolist()))),
                                 requested[keep_requested]]).reshape(-1, 3)]
        extra = []
        for i in irregular.tolist():
            for output in step_stats_pb2.NodeExecStats.FromString(node_blobs[i]).output:
                allocation = output.tensor_description.allocation_description
                if allocation.requested_bytes:
                    extra.append((i, self._codes([allocation.allocator_name.encode()])[0], allocation.requested_bytes))
        rows.append(np.asarray(extra, dtype=np.int64).reshape(-1, 3))
        table = np.concatenate(rows)
        return table[np.argsort(table[:, 0], kind="stable")]

    def _codes(self, names: list[bytes]) -> np.ndarray:
        """Allocator codes of names read as bytes; each is decoded once (U+FFFD for non-UTF-8)."""
        by_bytes = self._allocator_bytes
        for name in dict.fromkeys(names):
            if name not in by_bytes:
                text = name.decode("utf-8", "replace")
                by_bytes[name] = self.allocator_codes.setdefault(text, len(self.allocator_codes))
        return np.fromiter(map(by_bytes.__getitem__, names), dtype=np.int64, count=len(names))

    @property
    def names(self) -> list[str]:
        """The name of each execution (a list as long as the step: for tests and tools)."""
        return [self.distinct_names[code] for code in self.name_code.tolist()]

    def rows(self, table: np.ndarray, allocator: str) -> np.ndarray:
        """Rows of a table for one allocator, without the allocator column."""
        code = self.allocator_codes.get(allocator, -1)
        others = [0] + list(range(2, table.shape[1]))
        on_it = table[:, 1] == code
        return table[:, others] if on_it.all() else table[on_it][:, others]


def _spelt(tokens, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(name bytes without the markers, count per node) of allocator names read as
    packed varints, a 0 after each node's; None when a name holds a NUL."""
    tokens = np.asarray(tokens, dtype=np.int64)
    is_mark = tokens == 0
    if np.count_nonzero(is_mark) != n:
        return None
    return tokens[~is_mark], _segment_counts(is_mark, n)


# Memory entries read as packed varints (AllocatorMemoryUsed, as TensorFlow writes it:
# allocator name first, and always set). A key is (field << 3) | wire type; a pair's
# key maps to the column its value fills, by where the pair stands: -1 is no column.
_NAME_KEY = 1 << 3 | 2  # allocator_name
_RECORD_KEY = 6 << 3 | 2  # allocation_records: a record's key and length
_COLUMN = np.full((2, 64), -1)  # [in a record?][key]
_COLUMN[0, [2 << 3, 3 << 3, 4 << 3, 5 << 3]] = [0, 1, 2, 3]  # total, peak, live, allocator_bytes_in_use
_COLUMN[1, [1 << 3, 2 << 3, _RECORD_KEY]] = [0, 1, 2]  # alloc_micros, alloc_bytes; the record's length
_COLUMN = _COLUMN.reshape(-1)
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _varint_size(values: np.ndarray) -> np.ndarray:
    """Bytes of each int64 as a varint (10 for negatives)."""
    return np.searchsorted(_VARINT_LIMITS, values.astype(np.uint64), side="right") + 1


def _entry_tokens(tokens, n: int, name: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Memory (exec, 0, total, peak, live, allocator_bytes_in_use) and records
    (exec, 0, micros, bytes) from memory entries read as packed varints, a 0
    after each node's; None unless every node holds at most one entry, on the
    allocator `name`.

    Read as varints, an entry whose strings are ASCII splits exactly at its
    fields: key, value (or length), one token per name byte. So a node's tokens
    must be the name's key, its length and its bytes, then (key, value) pairs:
    the entry's numbers (each at most once), then for each record its key and
    length, followed by its own pairs (micros and bytes, each at most once)
    whose encoded size is that length. A second entry would put a name key
    where a pair's key stands, which no pair has.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    ends = np.flatnonzero(tokens == 0)
    if ends.size != n:  # a 0 inside an entry: not TensorFlow's
        return None
    starts = np.concatenate(([0], ends[:-1] + 1))
    entry_exec = np.flatnonzero(ends > starts)
    k = entry_exec.size
    if not k:
        return np.zeros((0, 6), np.int64), np.zeros((0, 4), np.int64)
    starts, header = starts[entry_exec], 2 + name.size
    pair_count, odd = np.divmod(ends[entry_exec] - starts - header, 2)
    if (pair_count < 0).any() or odd.any():
        return None
    if not (tokens[starts[:, None] + np.arange(header)] == np.concatenate(([_NAME_KEY, name.size], name))).all():
        return None
    # Pair p of entry e: its key at starts[e] + header + 2 * (p - first pair of e).
    first_pair = np.cumsum(pair_count) - pair_count
    entry_of_pair = np.repeat(np.arange(k), pair_count)
    key_at = 2 * np.arange(entry_of_pair.size) + (starts + header - 2 * first_pair)[entry_of_pair]
    keys, values = tokens[key_at], tokens[key_at + 1]

    opens_record = keys == _RECORD_KEY
    records_so_far = np.cumsum(opens_record)  # record keys up to and including each pair
    r = int(records_so_far[-1]) if records_so_far.size else 0
    before_entry = np.concatenate(([0], records_so_far))[first_pair]
    record_of_pair = records_so_far - 1
    in_record = record_of_pair >= before_entry[entry_of_pair]
    column = _COLUMN[in_record * 64 + np.clip(keys, 0, 63)]  # 0: no key
    if (column < 0).any():
        return None
    # One slot per value: the entries' four numbers, then each record's micros, bytes, length.
    slot = np.where(in_record, 4 * k + 3 * record_of_pair, 4 * entry_of_pair) + column
    present = np.bincount(slot, minlength=4 * k + 3 * r)
    if present.max() > 1:  # a field twice
        return None
    numbers = np.zeros(4 * k + 3 * r, np.int64)
    numbers[slot] = values
    fields = numbers[4 * k:].reshape(r, 3)
    encoded = present[4 * k:].reshape(r, 3)[:, :2] * (1 + _varint_size(fields[:, :2]))
    if not np.array_equal(encoded.sum(axis=1), fields[:, 2]):
        return None
    memory = np.zeros((k, 6), np.int64)
    memory[:, 0] = entry_exec
    memory[:, 2:] = numbers[:4 * k].reshape(k, 4)
    records = np.zeros((r, 4), np.int64)
    records[:, 0] = entry_exec[entry_of_pair[opens_record]]
    records[:, 2:] = fields[:, :2]
    return memory, records


def _requested(description, n: int, mk: _Markers) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Outputs' requested bytes (non-zero ones), their count per node, the node of each,
    and each node's count of dtypes (one per real output), from merged outputs."""
    _, dtype_count = mk.segments(description.dtype, n)
    requested, requested_count = mk.segments(description.allocation_description.requested_bytes, n)
    requested_exec = np.repeat(np.arange(n, dtype=np.int64), requested_count)
    if not requested.all():  # a spelt-out 0 (robust markers only): no bytes, as the protos say
        keep = requested != 0
        requested, requested_exec = requested[keep], requested_exec[keep]
        requested_count = np.bincount(requested_exec, minlength=n)
    return requested, requested_count, requested_exec, dtype_count


def parse_run(data: bytes):
    """The RunMetadata's devices with raw node blobs (raises protobuf's DecodeError)."""
    return classes()["Run"].FromString(data)
