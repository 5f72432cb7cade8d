"""RunMetadata node stats as columns, read straight from the wire.

`parse_run` keeps each device's node stats as raw bytes; `NodeColumns` reads
them into numpy columns with a few C-level parses of merged schemas
(merged.py), quicker still for a step on one allocator (quick.py). Bytes that
do not split into nodes are read through the compat protos (reference.py).
How and why, and what the reading takes on trust: docs/run_metadata_decoding.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from ..._protos import REFUSED, as_text
from ...trace import JoinedNames
from . import quick, reference
from .merged import COMPACT, ROBUST, Markers, Misaligned, classes, items, requested, with_sentinels

CHUNK_NODES = 8192  # nodes per merged parse: a few MB of blobs, buffers and arenas at a time
_FEW_NAMES = 16  # labels asked for this few names are found without indexing every name


def parse_run(data: bytes):
    """The RunMetadata's devices with raw node blobs (raises protobuf's DecodeError)."""
    return classes()["Run"].FromString(data)


def device_name(dev_stats) -> str:
    """A parsed run's device name as text (U+FFFD where its bytes are not UTF-8, as names are shown)."""
    return dev_stats.device.decode("utf-8", "replace")


@dataclass(init=False, eq=False)
class NodeColumns:
    """One device's node stats as columns (what the importer builds spaces from)."""

    distinct_names: list[str]  # each node name once, in first-seen order
    name_code: np.ndarray  # per execution: index into distinct_names
    label_of: Mapping[str, str]  # timeline_label of the first execution of each distinct name
    start: np.ndarray  # absolute micros per execution
    end: np.ndarray
    temp: np.ndarray  # memory_stats per execution
    persistent: np.ndarray
    memory: np.ndarray  # (k, 6): exec, allocator code, total, peak, live, allocator_bytes_in_use
    records: np.ndarray  # (k, 4): exec, allocator code, alloc_micros, alloc_bytes
    outputs: np.ndarray  # (k, 3): exec, allocator code, requested_bytes
    allocator_codes: dict[str, int]  # allocator name -> code
    named_from: int | None  # the first execution not read by quick.py (None: all were)
    read_by: str  # "wire", or "reference" where the bytes did not split into nodes

    def __init__(self, node_stats, reader: Callable[[Any], dict] | None = None) -> None:
        """node_stats: serialized NodeExecStats, a list or the parsed run's repeated field.

        reader: node stats -> these columns by name; by default the columnar reading,
        and reference.read where that fails. Bytes the protos refuse raise DecodeError.
        """
        columns = (reader or _read)(node_stats)
        vars(self).update({column.name: columns[column.name] for column in fields(self)})

    def rows(self, table: np.ndarray, allocator: str) -> np.ndarray:
        """Rows of a table for one allocator (the table itself where all are on it)."""
        on_it = table[:, 1] == self.allocator_codes.get(allocator, -1)
        return table if on_it.all() else table[on_it]


def _interned(names: list[str | bytes]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(each name once, in first-seen order, decoded; each execution's index into them; the
    first execution of each), in C-level passes. Names come as the nodes were read
    (merged.Markers.nodes): str, or bytes where they are not UTF-8 (or all bytes, read
    with text markers); they are told apart by their bytes.

    On a deep model every name is distinct: the names are then decoded first, and
    a set of the strings (whose hashes the run graph's lookups use again) shows it;
    the codes are the executions' own order. Where the set shows a repeat that the
    sample missed, the strings already decoded are interned (decoded as they are, they
    tell names apart as their bytes do). Where a sample shows names repeat (a loop),
    they are interned as they came and only the distinct ones decoded: two names that
    are not UTF-8 may decode alike and stay two.
    """
    sample = names[::max(1, len(names) // 1024)]
    if len(set(sample)) == len(sample):
        texts = _decode_all(names)
        if len(set(texts)) == len(texts):  # a set: cheaper than a dict, and it keeps the hashes too
            code = np.arange(len(texts), dtype=np.int64)
            return texts, code, code.copy()
        if isinstance(texts, JoinedNames):  # decoded as they are (UTF-8): the strings tell them apart
            return _coded(texts, lambda distinct: JoinedNames(distinct, "\n".join(distinct).encode("utf-8")))
    return _coded(names, _decode_all)


def _coded(names: list, decoded: Callable[[list], list[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`_interned` of names (as they came, or strings decoded as they are), the distinct ones
    decoded by `decoded`."""
    index = dict.fromkeys(names)
    distinct = list(index)
    index = dict(zip(distinct, range(len(distinct))))
    code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    return decoded(distinct), code, np.unique(code, return_index=True)[1]  # codes are 0..k-1, all present


def _decode_all(texts: list[str | bytes]) -> list[str]:
    """Each text as a str: str kept, bytes decoded as UTF-8 (U+FFFD where they are not: names
    from other writers are shown rather than refused). Where no text holds a newline and
    none needed U+FFFD, the texts carry their joined bytes on (trace.JoinedNames), made in
    one C-level pass: joined as str (names read as text) or as bytes, then decoded."""
    try:
        joined_text = "\n".join(texts)  # all str: read as text, and UTF-8
    except TypeError:  # bytes among them
        pass
    else:
        joined = joined_text.encode("utf-8")
        # Counted in numpy (a third of str.count's time), and kept: the name table's lines are these.
        newlines = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == ord("\n"))
        if newlines.size == max(len(texts) - 1, 0):
            return JoinedNames(texts, joined, newlines)
        return list(texts)
    try:
        joined = b"\n".join(texts)
    except TypeError:  # text and bytes mixed: bytes only where they are not UTF-8
        return as_text(texts)
    try:
        decoded = joined.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        decoded = []
    if texts and len(decoded) == len(texts):  # more pieces: a text holds a newline
        return JoinedNames(decoded, joined)
    return [text.decode("utf-8", "replace") for text in texts]


class Labels(Mapping):
    """timeline_label by distinct name, each read from its name's first node only when asked.

    Labels serve op types the graphs do not give, and kernels in scope details: a
    few names. Reading all of them would cost a second parse of the whole step
    on deep models, where every node has its own name.
    """

    def __init__(self, distinct_names: list[str], node_stats, first_exec: np.ndarray,
                 mk: Markers | None = None) -> None:
        self._names = distinct_names
        self._node_stats = node_stats  # the serialized nodes
        self._first_exec = first_exec  # the first node of each distinct name, in name order
        self._mk = mk or COMPACT  # the markers the nodes were read with
        self._code: dict[str, int] | None = None

    def _codes(self) -> dict[str, int]:
        if self._code is None:
            self._code = dict(zip(self._names, range(len(self._names))))
        return self._code

    def __getitem__(self, name: str) -> str:
        node = self._node_stats[int(self._first_exec[self._codes()[name]])]
        labels = classes()["Labels"].FromString(node).timeline_label
        return labels[-1].decode("utf-8", "replace") if labels else ""

    def _codes_of(self, names: list[str]) -> Mapping[str, int]:
        """Codes of the asked names that it has: a few are found by scanning the names (the
        op types a run graph lacks, often one name), rather than indexing every name."""
        if self._code is not None or len(names) > _FEW_NAMES:
            return self._codes()
        found = {}
        for name in names:
            try:
                found[name] = self._names.index(name)
            except ValueError:
                pass
        return found

    def many(self, names: list[str]) -> list[str]:
        """The labels of many names (empty for a name it does not have) in one merged parse
        of their first nodes: a step without a run graph asks for every name's."""
        codes = self._codes_of(names)
        known = [codes[name] for name in names if name in codes]
        nodes = [self._node_stats[i] for i in self._first_exec[known].tolist()]
        try:
            merged = classes()["Labels"].FromString(with_sentinels(nodes, self._mk.text_field(8))).timeline_label
            texts = iter(_decode_all(self._mk.text(merged, len(nodes))))
        except (Misaligned, *REFUSED):  # a label equal to a marker: one by one
            texts = iter([self[self._names[code]] for code in known])
        return [next(texts) if name in codes else "" for name in names]

    def outputs(self, name: str) -> list[tuple[tuple[int, ...], int]]:
        """(shape, requested bytes) of each output of the name's first node (the what-if's
        batch dimension), read through the protos when asked: not in the columns."""
        index = self._codes().get(name)
        try:
            if index is None:
                return []
            return reference.output_shapes(reference.parse_node(self._node_stats[int(self._first_exec[index])]))
        except REFUSED:  # text the protos refuse (read by the columns with U+FFFD): no shapes
            return []

    def outputs_many(self, names: list[str]) -> list[list[tuple[tuple[int, ...], int]]]:
        """`outputs` of many names (the what-if reads every name of a step), read in bulk from
        their first nodes (shapes.py). Read the lists, don't change them: a name asked
        twice, or two names it does not have, may share one."""
        from . import shapes

        asked = np.fromiter(map(self._codes().get, names, itertools.repeat(-1)), dtype=np.int64, count=len(names))
        wanted = np.unique(asked[asked >= 0])
        first = self._first_exec[wanted].tolist()
        if first == list(range(len(self._node_stats))):  # every node (a deep model's step): read in chunks
            blobs = self._node_stats
        elif len(first) * 4 >= len(self._node_stats):  # most nodes: one C-level copy, then pick
            blobs = list(map(self._node_stats[:].__getitem__, first))
        else:
            blobs = [self._node_stats[i] for i in first]
        found = shapes.outputs(blobs)
        if wanted.size == asked.size and (asked == wanted).all():  # every name once, in code order
            return found
        found.append([])
        at = np.where(asked >= 0, np.searchsorted(wanted, asked), wanted.size)
        return list(map(found.__getitem__, at.tolist()))

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _read(node_stats) -> dict:
    """The columnar reading; the reference's where the merged lists do not split into nodes."""
    try:
        try:
            return _ColumnarReading(COMPACT).read(node_stats)
        except (Misaligned, UnicodeDecodeError):
            # Explicit zeros in the bytes, or a name that is not UTF-8 where protobuf refuses
            # such text (its pure-Python implementation; upb hands it over as bytes): redo with
            # markers nothing real uses, which read names as bytes.
            return _ColumnarReading(ROBUST).read(node_stats)
    except (Misaligned, *REFUSED):  # a field equal to a marker, or bytes cut short
        return reference.read(node_stats)  # DecodeError again if the protos refuse them too


class _ColumnarReading:
    """One device's node stats read with one set of markers, chunk by chunk: a few MB
    at a time keeps blobs, joined buffers and parser arenas in reused memory."""

    def __init__(self, mk: Markers) -> None:
        self.mk = mk
        self.allocator_codes: dict[str, int] = {}
        self.allocator_bytes: dict[bytes, int] = {}  # the same codes, by the names' bytes
        # Chunks are read by quick.py until one is not all on one allocator, with at most
        # one memory entry per node; from then on (a GPU step, say) as "NodesNamed".
        self.named_from: int | None = None

    def read(self, node_stats) -> dict:
        parts = [self._chunk(node_stats[i:i + CHUNK_NODES], i) for i in range(0, len(node_stats), CHUNK_NODES)]

        def joined(key: str, empty_shape: tuple) -> np.ndarray:
            return np.concatenate([part[key] for part in parts]) if parts else np.zeros(empty_shape, np.int64)

        distinct_names, name_code, first_exec = _interned(
            list(itertools.chain.from_iterable(p.pop("names") for p in parts)))
        return {
            "distinct_names": distinct_names,
            "name_code": name_code,
            **{key: joined(key, (0,)) for key in ("start", "end", "temp", "persistent")},
            **{key: joined(key, (0, width)) for key, width in (("memory", 6), ("records", 4), ("outputs", 3))},
            "label_of": Labels(distinct_names, node_stats, first_exec, self.mk),
            "allocator_codes": self.allocator_codes,
            "named_from": self.named_from,
            "read_by": "wire",
        }

    def _chunk(self, node_blobs: list[bytes], offset: int) -> dict:
        """Columns of consecutive nodes; execution indices start at `offset`."""
        cls, mk = classes(), self.mk
        n = len(node_blobs)
        columns = None
        if self.named_from is None:
            try:
                nodes = cls[mk.nodes(False)].FromString(with_sentinels(node_blobs, mk.node(False)))
                columns = quick.one_allocator(nodes, n, mk, self._codes)
            except REFUSED:  # a non-ASCII allocator name ends in a byte that is no whole varint
                # (or, with protobuf's pure-Python parser, a name that is not UTF-8: read in full
                # below, it fails again, and _read starts over with names as bytes)
                pass
            if columns is None:
                self.named_from = offset
        if columns is None:
            nodes = cls[mk.nodes(True)].FromString(with_sentinels(node_blobs, mk.node(True)))
            columns = {"outputs": self._outputs(nodes.output.tensor_description, node_blobs)}
            columns["memory"], columns["records"] = self._entries(nodes.memory, n)
        for key in ("outputs", "memory", "records"):
            columns[key][:, 0] += offset

        start = mk.dense_scalar(nodes.all_start_micros, n)
        columns.update({
            "names": mk.dense_names(nodes.node_name, n),  # interned once all chunks are read
            "start": start,
            "end": start + mk.scalar(nodes.all_end_rel_micros, n),
            "temp": mk.scalar(nodes.memory_stats.temp_memory_size, n),
            "persistent": mk.scalar(nodes.memory_stats.persistent_memory_size, n),
        })
        return columns

    def _entries(self, entry_items, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Memory (exec, code, total, peak, live, allocator_bytes_in_use) and records
        (exec, code, micros, bytes) from the entries read as items ("NodesNamed")."""
        cls, mk = classes(), self.mk
        entries, entry_exec = items(entry_items, n)
        k = len(entries)
        merged = cls["Entries"].FromString(with_sentinels(entries, mk.entry))
        entry_code = self._codes(mk.text(merged.allocator_name, k))
        memory = np.column_stack([
            entry_exec, entry_code, mk.scalar(merged.total_bytes, k), mk.scalar(merged.peak_bytes, k),
            mk.scalar(merged.live_bytes, k), mk.scalar(merged.allocator_bytes_in_use, k),
        ]).reshape(-1, 6)
        records, record_entry = items(merged.allocation_records, k)
        r = len(records)
        merged_records = cls["Records"].FromString(with_sentinels(records, mk.record))
        return memory, np.column_stack([
            entry_exec[record_entry], entry_code[record_entry],
            mk.scalar(merged_records.alloc_micros, r), mk.scalar(merged_records.alloc_bytes, r),
        ]).reshape(-1, 4)

    def _outputs(self, description, node_blobs: list[bytes]) -> np.ndarray:
        """(exec, allocator code, requested bytes) per output that requested any bytes.

        All outputs of all nodes come back merged: per node, its dtypes, requested
        sizes and allocator names, in order. Every output has a dtype, and
        TensorFlow fills an output's allocation description from its buffer, size
        and allocator together (Tensor::FillDescription), so a node with as many
        sizes and names as dtypes pairs them in order. Any other node with bytes
        is read by the reference.
        """
        n = len(node_blobs)
        requested_bytes, requested_count, requested_exec = requested(description, n, self.mk)
        _, dtype_count = self.mk.segments(description.dtype, n)
        names, name_count = self.mk.text_counts(description.allocation_description.allocator_name, n)
        paired = (requested_count == dtype_count) & (name_count == dtype_count)
        if paired.all():
            return np.column_stack([requested_exec, self._codes(names), requested_bytes]).reshape(-1, 3)
        irregular = np.flatnonzero(~paired & (requested_count > 0))
        name_exec = np.repeat(np.arange(n, dtype=np.int64), name_count)
        keep_requested, keep_names = paired[requested_exec], paired[name_exec]
        rows = [np.column_stack([requested_exec[keep_requested],
                                 self._codes(list(itertools.compress(names, keep_names.tolist()))),
                                 requested_bytes[keep_requested]]).reshape(-1, 3)]
        extra = [(i, self._codes([allocator.encode()])[0], size) for i in irregular.tolist()
                 for allocator, size in reference.requested_outputs(reference.parse_node(node_blobs[i]))]
        rows.append(np.asarray(extra, dtype=np.int64).reshape(-1, 3))
        table = np.concatenate(rows)
        return table[np.argsort(table[:, 0], kind="stable")]

    def _codes(self, names: list[bytes]) -> np.ndarray:
        """Allocator codes of names read as bytes; each is decoded once (U+FFFD for non-UTF-8)."""
        by_bytes = self.allocator_bytes
        for name in dict.fromkeys(names):
            if name not in by_bytes:
                text = name.decode("utf-8", "replace")
                by_bytes[name] = self.allocator_codes.setdefault(text, len(self.allocator_codes))
        return np.fromiter(map(by_bytes.__getitem__, names), dtype=np.int64, count=len(names))
