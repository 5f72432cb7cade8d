"""Output shapes of many nodes in a few merged parses (docs/run_metadata_decoding.md).

`outputs(blobs)` gives, for each serialized NodeExecStats, what
`reference.output_shapes(reference.parse_node(blob))` gives: (shape, requested
bytes) of each output, in order; `[]` where the protos refuse the node (as
`wire.Labels.outputs` says).

Each level's items are joined with a sentinel after each and parsed as ONE
message (merged.py), each item and each sentinel a record of a wrapper whose
one field is that message, singular: the records merge into one message, and
each record's parse ends at its length, so an item cut short fails as the
protos fail rather than reading on into the sentinel:

    nodes   -> outputs, one item each    (a lone 0 byte after each node's)
    outputs -> requested bytes           (INT64_MIN after each output's)
               shapes as packed varints  (INT64_MIN after each output's)

A plain shape (dims holding a size only) comes back as four numbers per dim,
which numpy checks and cuts (`_plain_shapes`). Other shapes are read as
items, level by level (`_item_shapes`): outputs -> shapes -> dims -> sizes.

The schemas are copies of TensorBoard's own compat protos (proto3, so text
is checked as UTF-8 as the protos check it) with only the field read at each
level changed. Every other field keeps its type, so each parse checks what
the protos would, and every item read as bytes is parsed at the next level
(a plain shape's bytes can only be its dims): the parses refuse what the
protos refuse. Items of one byte stand for markers; a real one is no valid
message, so it makes a count come out wrong.

Where a parse fails or a count comes out wrong (bytes the protos refuse, a
real INT64_MIN), the nodes are split in halves and each read again, down to
small groups read one by one through the protos.
"""

from __future__ import annotations

import functools
import contextlib
import gc
import itertools

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorboard.compat.proto import step_stats_pb2

from . import reference
from .merged import ROBUST, Misaligned, segment_counts
from .quick import _varint_size
from ..._protos import REFUSED, encode_varint as _varint

Outputs = list[tuple[tuple[int, ...], int]]

_BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_INT64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL

# Two pools of the compat protos, each with a few fields changed: (message, field, change).
# "items" reads a message field as one bytes item per occurrence; "tokens" as packed
# varints, one number per varint of its bytes; "repeated" keeps each occurrence of a
# number; "merged" parses a repeated message field as one message (the same checks,
# without an object per node).
_ITEMS = [
    ("NodeExecStats", "output", "items"),
    ("NodeExecStats", "memory", "merged"),
    ("NodeExecStats", "referenced_tensor", "merged"),
    ("TensorDescription", "shape", "items"),
    ("AllocationDescription", "requested_bytes", "repeated"),
    ("TensorShapeProto", "dim", "items"),
    ("TensorShapeProto.Dim", "size", "repeated"),
]
_TOKENS = [
    ("TensorDescription", "shape", "tokens"),
    ("AllocationDescription", "requested_bytes", "repeated"),
]
CHUNK_NODES = 8192  # nodes per merged parse, as wire.CHUNK_NODES
_GROUP = 16  # nodes read one by one through the protos once a group this small fails

_MARK = ROBUST.mark_int  # INT64_MIN: no requested bytes or size TensorFlow writes
_MARK_ITEM = b"\x00"  # a lone 0 byte: field 0 is invalid, so no real output, shape or dim is this


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_RECORD_KEY = _varint(1 << 3 | 2)  # a wrapper's one field
_AFTER_NODE = _len_field(7, _MARK_ITEM)  # an output item
_AFTER_OUTPUT = _len_field(3, _len_field(2, _MARK_ITEM) + _len_field(4, b"\x08" + _varint(_MARK)))
_AFTER_OUTPUT_TOKENS = _len_field(3, _len_field(2, _varint(_MARK)) + _len_field(4, b"\x08" + _varint(_MARK)))
_AFTER_SHAPE = _len_field(2, _MARK_ITEM)  # a dim item
_AFTER_DIM = b"\x08" + _varint(_MARK)  # size


def _file_protos() -> list[descriptor_pb2.FileDescriptorProto]:
    """step_stats.proto and the files it imports, dependencies first, as FileDescriptorProtos."""
    protos: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def add(file) -> None:
        for dependency in file.dependencies:
            add(dependency)
        if file.name not in protos:
            protos[file.name] = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(protos[file.name])

    add(step_stats_pb2.DESCRIPTOR)
    return list(protos.values())


def _pool(changes: list[tuple[str, str, str]], wrapped: list[str]):
    """(the compat protos' package, a pool of their own with these fields changed, and a
    wrapper for each message named in `wrapped`)."""
    files = _file_protos()
    messages = {}
    for file in files:
        assert file.syntax == "proto3", file.name  # text checked as UTF-8, as the protos check it
        for message in file.message_type:
            messages[message.name] = message
            messages.update((f"{message.name}.{nested.name}", nested) for nested in message.nested_type)
    for message_name, field_name, change in changes:
        field = next(f for f in messages[message_name].field if f.name == field_name)
        if change in ("items", "tokens"):
            field.type = _BYTES if change == "items" else _INT64
            field.ClearField("type_name")
        field.label = _OPTIONAL if change == "merged" else _REPEATED
        field.ClearField("proto3_optional")
    package = files[-1].package
    records = descriptor_pb2.FileDescriptorProto(name="tb_memory_records.proto", package=package, syntax="proto3",
                                                 dependency=[file.name for file in files])
    for name in wrapped:
        records.message_type.add(name=_wrapper(name)).field.add(
            name="item", number=1, type=_MESSAGE, label=_OPTIONAL, type_name=f".{package}.{name}")
    pool = descriptor_pool.DescriptorPool()
    for file in [*files, records]:
        pool.Add(file)
    return package, pool


def _wrapper(name: str) -> str:
    return "Records" + name.replace(".", "")


@functools.cache
def _classes() -> dict:
    """The wrappers of the merged classes by name: each level of the items path, and the
    outputs with shapes as tokens (built on first use)."""
    classes = {}
    for changes, names in ((_ITEMS, {name: name for name in ("NodeExecStats", "NodeOutput", "TensorShapeProto",
                                                              "TensorShapeProto.Dim")}),
                           (_TOKENS, {"NodeOutputTokens": "NodeOutput"})):
        package, pool = _pool(changes, list(names.values()))
        classes.update((key, message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{_wrapper(name)}")))
                       for key, name in names.items())
    return classes


def _merged(key: str, items: list[bytes], sentinel: bytes):
    """items parsed as ONE message of the merged class `key`, the sentinel after each."""
    return _classes()[key].FromString(_records(items, sentinel)).item


class _Prefixes(dict):
    """By an item's length: the bytes before its record, `before` then the record's key and
    length (made once per distinct length of a call)."""

    def __init__(self, before: bytes) -> None:
        self.before = before

    def __missing__(self, length: int) -> bytes:
        self[length] = prefix = self.before + _RECORD_KEY + _varint(length)
        return prefix


def _records(items: list[bytes], sentinel: bytes) -> bytes:
    """Every item as a record, the sentinel's record after each, in one buffer: one join of
    items and the bytes between them, interleaved by C-level slice assignments."""
    if not items:
        return b""
    after = _RECORD_KEY + _varint(len(sentinel)) + sentinel
    parts = [after] * (2 * len(items) + 1)
    parts[0:-1:2] = map(_Prefixes(after).__getitem__, map(len, items))  # the sentinel's record, then the item's prefix
    parts[0] = parts[0][len(after):]
    parts[1::2] = items
    return b"".join(parts)


def outputs(blobs) -> list[Outputs]:
    """(shape, requested bytes) of each output of each node, as the protos read them
    (`reference.output_shapes`); `[]` for a node the protos refuse.

    blobs: serialized NodeExecStats, a list or the parsed run's repeated field (read
    CHUNK_NODES at a time: a few MB of blobs, buffers and arenas in reused memory).
    """
    found: list[Outputs] = []
    for start in range(0, len(blobs), CHUNK_NODES):
        found += _checked(blobs[start:start + CHUNK_NODES])
    return found


def _checked(blobs: list[bytes]) -> list[Outputs]:
    try:
        with _no_gc():  # a few small containers per node: the collector's passes would cost more
            return _bulk(blobs)
    except (*REFUSED, Misaligned):  # bytes the protos refuse, or a value equal to a marker
        if len(blobs) <= _GROUP:
            return [_one(blob) for blob in blobs]
        half = len(blobs) // 2
        return _checked(blobs[:half]) + _checked(blobs[half:])


@contextlib.contextmanager
def _no_gc():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _one(blob: bytes) -> Outputs:
    try:
        return reference.output_shapes(reference.parse_node(blob))
    except REFUSED:  # as Labels.outputs reads a node the protos refuse: no shapes
        return []


def _split(values, n: int) -> tuple[list[bytes], np.ndarray]:
    """Items between the n item markers (one after each segment's), and the count in each."""
    values = values[:]  # one C-level copy into a list
    is_mark = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) == 1
    counts = segment_counts(is_mark, n)
    return list(itertools.compress(values, (~is_mark).tolist())), counts


def _bulk(blobs: list[bytes]) -> list[Outputs]:
    """The outputs of each node: one parse for the nodes, one for their outputs with
    shapes as varints; the items path (`_item_shapes`) for the shapes that are not plain."""
    n = len(blobs)
    nodes = _merged("NodeExecStats", blobs, _AFTER_NODE)
    output_items, output_count = _split(nodes.output, n)
    m = len(output_items)
    try:
        description = _merged("NodeOutputTokens", output_items, _AFTER_OUTPUT_TOKENS)
    except REFUSED:  # a shape whose bytes are no varints (text in it): read them as items
        description = None
    if description is not None:
        description = description.tensor_description
        plain, sizes, rank = _plain_shapes(np.asarray(description.shape, dtype=np.int64), m)
    else:
        description = _merged("NodeOutput", output_items, _AFTER_OUTPUT).tensor_description
        plain, sizes, rank = np.zeros(m, dtype=bool), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # The last requested bytes of each output win, as protobuf merges; 0 where absent.
    requested = ROBUST.scalar(description.allocation_description.requested_bytes, m)
    shapes = _tuples(sizes, rank)
    if not plain.all():
        odd = _tuples(*_item_shapes(list(itertools.compress(output_items, (~plain).tolist()))))
        shapes = _in_order(shapes + odd, np.concatenate([np.flatnonzero(plain), np.flatnonzero(~plain)]))
    return _grouped(list(zip(shapes, requested.tolist())), output_count)


_DIM_KEY = 2 << 3 | 2  # TensorShapeProto.dim
_SIZE_KEY = 1 << 3  # TensorShapeProto.Dim.size


def _plain_shapes(tokens: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(plain, sizes, rank) of m outputs whose shapes came back as varints, INT64_MIN after each
    output's: whether each output's shape is plain, the dims of the plain ones in order, and
    each plain one's rank.

    A plain shape is dims holding a size only, each dim four numbers: its key, its
    length, the size's key and the size, the length being that of the size's key and
    size in their shortest forms. Those bytes can only be such dims, as the protos
    read them; any other shape (an empty dim, a name, unknown_rank, a size written
    twice, varints longer than they need be) is not plain.
    """
    is_mark = tokens == _MARK
    count = segment_counts(is_mark, m)
    whole = count % 4 == 0  # the others are not plain; without them, dims line up in fours
    dims = tokens[~is_mark] if whole.all() else tokens[~is_mark & np.repeat(whole, count + 1)]
    dims = dims.reshape(-1, 4)  # (key, length, the size's key, size) where plain
    rank = count // 4 * whole
    odd_dims = (dims[:, 0] != _DIM_KEY) | (dims[:, 2] != _SIZE_KEY) | (dims[:, 1] != 1 + _varint_size(dims[:, 3]))
    plain = whole.copy()
    if odd_dims.any():
        plain[np.repeat(np.arange(m), rank)[odd_dims]] = False
        dims = dims[np.repeat(plain, rank)]
    return plain, dims[:, 3].copy(), rank[plain]


def _item_shapes(output_items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, rank) of outputs read as items, level by level: any shape the protos read."""
    m = len(output_items)
    description = _merged("NodeOutput", output_items, _AFTER_OUTPUT).tensor_description
    shape_items, shape_count = _split(description.shape, m)
    # A shape written twice merges: its dims follow on. Dims are in output order throughout.
    shape_dims = _merged("TensorShapeProto", shape_items, _AFTER_SHAPE).dim
    dim_items, dim_count = _split(shape_dims, len(shape_items))
    d = len(dim_items)
    sizes = ROBUST.scalar(_merged("TensorShapeProto.Dim", dim_items, _AFTER_DIM).size, d)
    rank = np.bincount(np.repeat(np.arange(m), shape_count), weights=dim_count, minlength=m).astype(np.int64)
    return sizes, rank


def _in_order(grouped: list, order: np.ndarray) -> list:
    """Values listed in `order` (grouped[j] belongs at order[j]) put back in place."""
    place = np.empty_like(order)
    place[order] = np.arange(order.size)
    return list(map(grouped.__getitem__, place.tolist()))


def _tuples(sizes: np.ndarray, rank: np.ndarray) -> list[tuple[int, ...]]:
    """sizes cut into one tuple per output of the given ranks, in order: one numpy
    gather and tolist per distinct rank."""
    first = np.cumsum(rank) - rank
    ranks = np.unique(rank).tolist()
    if len(ranks) == 1:  # all alike
        r = ranks[0]
        return list(map(tuple, sizes.reshape(-1, r).tolist())) if r else [()] * rank.size
    grouped: list[tuple[int, ...]] = []
    for r in ranks:
        at = first[rank == r]
        grouped += map(tuple, sizes[at[:, None] + np.arange(r)].tolist()) if r else [()] * at.size
    return _in_order(grouped, np.argsort(rank, kind="stable"))


def _grouped(pairs: list, count: np.ndarray) -> list[list]:
    """pairs cut into one list per node of the given counts, in order: C-level zips per
    distinct count."""
    counts = np.unique(count).tolist()
    if counts == [1]:  # one output each: the usual case
        return list(map(list, zip(pairs)))
    order = np.argsort(count, kind="stable")
    by_count = list(map(pairs.__getitem__, np.argsort(np.repeat(count, count), kind="stable").tolist()))
    grouped: list[list] = []
    done = 0
    for c in counts:
        k = int(np.count_nonzero(count == c))
        if c:
            grouped += map(list, zip(*[iter(by_count[done:done + k * c])] * c))
        else:
            grouped += [[] for _ in range(k)]
        done += k * c
    return _in_order(grouped, order)
