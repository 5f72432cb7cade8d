"""Merged schemas and the markers that split them (docs/run_metadata_decoding.md).

Node bodies joined into one buffer, a sentinel record after each, parse as
ONE message of a schema whose fields are all `repeated`: each field comes
back as one flat list over all nodes, and its markers split it into one
segment per node.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..._protos import BYTES as _BYTES, INT64 as _INT64, MESSAGE as _MESSAGE, OPTIONAL as _OPTIONAL
from ..._protos import REPEATED as _REPEATED, STRING as _STRING, encode_varint as _varint, message_classes


def _IGNORED_INTS(*numbers: int) -> list[tuple]:  # noqa: N802 - reads as part of the schema
    """Fields the engine does not read, declared singular so merging just overwrites them.

    Left undeclared they would be kept as unknown fields and copied for every node.
    """
    return [(f"ignored_{n}", n, _INT64, _OPTIONAL, None) for n in numbers]


def _nodes(outputs: str, memory: tuple, name_type: int) -> list[tuple]:
    """NodeExecStats, merged over all nodes of a chunk; `outputs` names the outputs'
    schema, `memory` is how the memory entries are read, `name_type` the node names'."""
    return [
        ("node_name", 1, name_type, _REPEATED, None),
        ("all_start_micros", 2, _INT64, _REPEATED, None),
        ("all_end_rel_micros", 5, _INT64, _REPEATED, None),
        memory,
        ("output", 7, _MESSAGE, _OPTIONAL, outputs),
        ("timeline_label", 8, _BYTES, _OPTIONAL, None),  # read per distinct name, from "Labels"
        ("memory_stats", 12, _MESSAGE, _OPTIONAL, "MemoryStats"),
        *_IGNORED_INTS(3, 4, 9, 10, 13, 14, 15, 16, 17),
        ("referenced_tensor", 11, _BYTES, _OPTIONAL, None),
    ]


def _outputs(suffix: str, allocator_name_type: int, dtype: tuple) -> dict[str, list[tuple]]:
    """NodeOutput -> TensorDescription -> AllocationDescription, merged over all outputs of all nodes;
    `dtype` is how the outputs' dtypes are read (counted to pair names with sizes, or not at all)."""
    return {
        f"Outputs{suffix}": [
            ("tensor_description", 3, _MESSAGE, _OPTIONAL, f"TensorDescription{suffix}"), *_IGNORED_INTS(1)],
        f"TensorDescription{suffix}": [
            dtype,
            ("allocation_description", 4, _MESSAGE, _OPTIONAL, f"AllocationDescription{suffix}"),
            ("shape", 2, _BYTES, _OPTIONAL, None),
        ],
        f"AllocationDescription{suffix}": [
            ("requested_bytes", 1, _INT64, _REPEATED, None),
            ("allocator_name", 3, allocator_name_type, _REPEATED, None),
            *_IGNORED_INTS(2, 4, 5, 6),
        ],
    }


# Only the fields the engine reads, with the numbers and wire types of TensorFlow's
# step_stats.proto, tensor_description.proto and allocation_description.proto.
# (message, [(field name, number, type, label, message type name)])
_SCHEMA = {
    # RunMetadata with node stats kept as raw bytes, one item per node.
    "Run": [("step_stats", 1, _MESSAGE, _OPTIONAL, "Steps"), ("partition_graphs", 3, _BYTES, _REPEATED, None)],
    "Steps": [("dev_stats", 1, _MESSAGE, _REPEATED, "Device")],
    # The device's name as bytes: decoded by wire.device_name, bytes that are not UTF-8 included.
    "Device": [("device", 1, _BYTES, _OPTIONAL, None), ("node_stats", 2, _BYTES, _REPEATED, None)],
    # Two readings of the same nodes. "Nodes" (quick.py) is for a step on one allocator
    # with at most one memory entry per node (a CPU step): outputs' allocator names, and
    # whole memory entries, are read as packed varints. "NodesNamed" reads any step:
    # names as strings, and each memory entry as raw bytes, merged again ("Entries").
    # Node names come as text (upb decodes them, as str, or as bytes where they are not
    # UTF-8: proto2 text is not checked), but where the markers are texts themselves
    # (ROBUST's), as bytes: "...Raw".
    **{f"Nodes{raw}": _nodes("Outputs", ("memory", 6, _INT64, _REPEATED, None), name_type)
       for raw, name_type in (("", _STRING), ("Raw", _BYTES))},
    **{f"NodesNamed{raw}": _nodes("OutputsNamed", ("memory", 6, _BYTES, _REPEATED, None), name_type)
       for raw, name_type in (("", _STRING), ("Raw", _BYTES))},
    # The quick reading pairs each node's sizes and allocator names by their counts alone:
    # dtypes are not read (nor marked: a third of the markers' cost).
    **_outputs("", _INT64, *_IGNORED_INTS(1)),
    **_outputs("Named", _BYTES, ("dtype", 1, _INT64, _REPEATED, None)),  # counted: every real output has one
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


@functools.cache
def classes() -> dict:
    """The merged message classes by schema name, built on first use."""
    return message_classes(_PACKAGE, _SCHEMA, unpacked_ints=True)  # how TF writes them: one varint per field


# -- markers ---------------------------------------------------------------------------


class Misaligned(ValueError):
    """A flat list did not split into the expected number of segments."""


@dataclass(frozen=True)
class Markers:
    """Marker values and the sentinel records built from them.

    TensorFlow's step stats are proto3: a zero number or an empty string is
    never written, so an explicit 0 or "" is a 2-byte marker no real field can
    look like (COMPACT). Bytes from another writer that do spell out zeros
    make a segment count come out wrong; decoding then starts again with
    INT64_MIN and a lone NUL as markers (ROBUST), which nothing real uses.
    """

    mark_int: int
    mark_text: bytes  # text fields are read as bytes and decoded once per distinct value (node names: see `nodes`)
    # Node name and start time are always written by TensorFlow: COMPACT leaves their
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

    def _node_sentinel(self, allocator_name_mark: bytes, memory_mark: bytes, dtype: bool) -> bytes:
        allocation = self.int_field(1) + _len_field(3, allocator_name_mark)
        output = _len_field(3, (self.int_field(1) if dtype else b"") + _len_field(4, allocation))
        dense = self.text_field(1) + self.int_field(2) if self.mark_dense else b""
        return b"".join([
            dense, self.int_field(5), _len_field(6, memory_mark),
            _len_field(7, output), _len_field(12, self.int_field(1) + self.int_field(3)),
        ])

    @cached_property
    def _node_named(self) -> bytes:
        return self._node_sentinel(self.mark_text, MARK_ITEM, dtype=True)

    @cached_property
    def _node_packed(self) -> bytes:
        return self._node_sentinel(TOKEN_MARK, TOKEN_MARK, dtype=False)

    def nodes(self, named: bool) -> str:
        """The schema the nodes are read with (`node` is the record after each): names as text
        where they carry no marker, else as bytes."""
        return ("NodesNamed" if named else "Nodes") + ("Raw" if self.mark_dense else "")

    def dense_names(self, values, n: int) -> list[str | bytes]:
        """The node names of n nodes, as `nodes` reads them: text (str, or bytes where not UTF-8),
        or with text markers all bytes."""
        if self.mark_dense:
            return self.text(values, n)
        if len(values) != n:
            raise Misaligned(f"expected {n} values, found {len(values)}")
        return values[:]

    def dense_scalar(self, values, n: int) -> np.ndarray:
        if self.mark_dense:
            return self.scalar(values, n)
        if len(values) != n:
            raise Misaligned(f"expected {n} values, found {len(values)}")
        return np.asarray(values, dtype=np.int64)

    @cached_property
    def entry(self) -> bytes:
        return b"".join([self.text_field(1), *(self.int_field(k) for k in (2, 3, 4, 5)), _len_field(6, MARK_ITEM)])

    @cached_property
    def record(self) -> bytes:
        return self.int_field(1) + self.int_field(2)

    def segments(self, values, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(values without markers, count per segment) of a marked int list of n segments."""
        flat = np.asarray(values, dtype=np.int64)  # upb containers convert in C (__array__)
        is_mark = flat == self.mark_int
        return flat[~is_mark], segment_counts(is_mark, n)

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
            raise Misaligned(f"expected {n} markers, found {before.size}")
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
        return list(itertools.compress(values, (~is_mark).tolist())), segment_counts(is_mark, n)


def segment_counts(is_mark: np.ndarray, n: int) -> np.ndarray:
    """Values in each of the n segments that the markers close (one marker after each)."""
    marks = np.flatnonzero(is_mark)
    if marks.size != n:
        raise Misaligned(f"expected {n} markers, found {marks.size}")
    counts = marks.copy()
    counts[1:] -= marks[:-1] + 1
    return counts


COMPACT = Markers(0, b"", mark_dense=False)
ROBUST = Markers(-(2**63), b"\x00", mark_dense=True)
MARK_ITEM = b"\x00"  # a lone 0 byte: field 0 is invalid, so no real entry, output or record is this
TOKEN_MARK = b"\x00"  # read as a packed varint: 0, which no name or entry TensorFlow writes holds


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def with_sentinels(items, sentinel: bytes) -> bytes:
    """Every item followed by the sentinel, in one buffer."""
    if not items:
        return b""
    return sentinel.join(itertools.chain(items, (b"",)))  # one copy: "+= sentinel" would copy it all again


def items(values, n: int) -> tuple[list[bytes], np.ndarray]:
    """Items between the n item markers, and the segment each belongs to."""
    values = values[:]
    is_mark = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) == 1
    counts = segment_counts(is_mark, n)
    return list(itertools.compress(values, (~is_mark).tolist())), np.repeat(np.arange(n, dtype=np.int64), counts)


def requested(description, n: int, mk: Markers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Outputs' requested bytes (non-zero ones), their count per node and the node of each,
    from merged outputs."""
    requested_bytes, requested_count = mk.segments(description.allocation_description.requested_bytes, n)
    requested_exec = np.repeat(np.arange(n, dtype=np.int64), requested_count)
    if not requested_bytes.all():  # a spelt-out 0 (robust markers only): no bytes, as the protos say
        keep = requested_bytes != 0
        requested_bytes, requested_exec = requested_bytes[keep], requested_exec[keep]
        requested_count = np.bincount(requested_exec, minlength=n)
    return requested_bytes, requested_count, requested_exec
