"""The quick reading of a chunk on one allocator (a CPU step), from "Nodes".

Outputs' allocator names and whole memory entries come back as packed
varints, one integer per byte or field, which numpy checks and splits into
columns. Anything this reading cannot vouch for returns None, and the chunk
is read in full instead (docs/run_metadata_decoding.md).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .merged import Markers, requested, segment_counts

Codes = Callable[[list], np.ndarray]  # allocator names as bytes -> their allocator codes


def one_allocator(nodes, n: int, mk: Markers, codes: Codes) -> dict | None:
    """Outputs, memory entries and records of nodes read as "Nodes", when all of
    them are on one allocator, with at most one memory entry per node; else None.

    Outputs (exec, allocator code, requested bytes), one per output with bytes:
    the outputs' allocator names come back as one array of bytes, a 0 after
    each node's. The first output's name is cut from them by the counts (a
    node's name bytes over its number of outputs with bytes), and must then
    repeat exactly once per output with bytes, node by node. So names and
    sizes pair in order, as TensorFlow fills them together from a buffer
    (Tensor::FillDescription); an output without a buffer (an empty tensor)
    has neither. Dtypes are not read: sizes count whatever outputs they are
    beside, as the protos count them. (Byte counts stand in for name boundaries: only
    names cut from copies of each other, "a" + "bab" for "ab" + "ab", could
    pass for copies, and allocator names are never like that.) Memory
    entries must name the same allocator: see _entry_tokens.
    """
    description = nodes.output.tensor_description
    requested_bytes, requested_count, requested_exec = requested(description, n, mk)
    names = _spelt(description.allocation_description.allocator_name, n)
    if names is None:
        return None  # a 0 inside a name
    chars, name_bytes = names
    if requested_bytes.size:
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
        return None  # printable ASCII only: one byte, one varint
    entries = _entry_tokens(nodes.memory, n, name)
    if entries is None:
        return None
    memory_rows, record_rows = entries
    if not name.size:  # no output with bytes, no entry: nothing to name
        return {"outputs": np.zeros((0, 3), np.int64), "memory": memory_rows, "records": record_rows}
    code = codes([name.astype(np.uint8).tobytes()])[0]
    memory_rows[:, 1] = code
    record_rows[:, 1] = code
    return {
        "outputs": np.column_stack([requested_exec, np.full(requested_bytes.size, code),
                                    requested_bytes]).reshape(-1, 3),
        "memory": memory_rows,
        "records": record_rows,
    }


def _spelt(tokens, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(name bytes without the markers, count per node) of allocator names read as
    packed varints, a 0 after each node's; None when a name holds a NUL."""
    tokens = np.asarray(tokens, dtype=np.int64)
    is_mark = tokens == 0
    if np.count_nonzero(is_mark) != n:
        return None
    return tokens[~is_mark], segment_counts(is_mark, n)


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
    expected = np.concatenate(([_NAME_KEY, name.size], name))
    alike = _alike_entries(tokens, starts, expected, pair_count, entry_exec)
    if alike is not None:
        return alike
    if not (tokens[starts[:, None] + np.arange(header)] == expected).all():
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


def _alike_entries(tokens: np.ndarray, starts: np.ndarray, header: np.ndarray, pair_count: np.ndarray,
                   entry_exec: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """_entry_tokens's columns where all entries with as many pairs have the same keys in
    the same order (TensorFlow writes every entry of a kind alike): each such group is a
    table, its keys read once; None where a group's keys differ, or are not an entry's,
    or an entry does not start with the `header` tokens (the allocator's name).

    The entries start at `starts`. A record's length is checked entry by entry, as it
    depends on the values.
    """
    k = entry_exec.size
    memory = np.zeros((k, 6), np.int64)
    memory[:, 0] = entry_exec
    record_count = np.zeros(k, np.int64)
    tables = []
    for count in np.flatnonzero(np.bincount(pair_count)).tolist():
        rows = np.flatnonzero(pair_count == count)
        # Each entry's tokens, a row each: rows of a strided view (no index table to build).
        table = np.lib.stride_tricks.sliding_window_view(tokens, header.size + 2 * count)[starts[rows]]
        if not (table[:, :header.size] == header).all():
            return None
        pairs = table[:, header.size:].reshape(rows.size, count, 2)
        keys, values = pairs[:, :, 0], pairs[:, :, 1]
        pattern = keys[0]
        if not (keys == pattern).all():
            return None
        opens = pattern == _RECORD_KEY
        record = np.cumsum(opens) - 1  # each pair's record in its entry; -1: the entry's own numbers
        column = _COLUMN[(record >= 0) * 64 + np.clip(pattern, 0, 63)]
        if (column < 0).any():
            return None
        slot = np.where(record >= 0, 4 + 3 * record, 0) + column
        if np.bincount(slot).max(initial=0) > 1:  # a field twice
            return None
        own = record < 0
        every = rows.size == k  # one kind of entry (a CPU step's): its rows are all, in order
        if every:
            memory[:, 2 + column[own]] = values[:, own]
        else:
            memory[rows[:, None], 2 + column[own]] = values[:, own]
        r = int(opens.sum())
        fields = np.zeros((rows.size, r, 3), np.int64)  # micros, bytes, length
        fields.reshape(rows.size, 3 * r)[:, 3 * record[~own] + column[~own]] = values[:, ~own]
        present = np.zeros((r, 3), np.int64)
        present[record[~own], column[~own]] = 1
        encoded = present[:, :2] * (1 + _varint_size(fields[:, :, :2]))
        if not np.array_equal(encoded[:, :, 0] + encoded[:, :, 1], fields[:, :, 2]):
            return None
        record_count[rows] = r
        tables.append((rows, fields))
    first_record = np.cumsum(record_count) - record_count
    records = np.zeros((int(record_count.sum()), 4), np.int64)
    for rows, fields in tables:
        if rows.size == k:  # one kind of entry: its records are all, in order
            records[:, 0] = np.repeat(entry_exec, fields.shape[1])
            records[:, 2:] = fields[:, :, :2].reshape(-1, 2)
            continue
        at = (first_record[rows, None] + np.arange(fields.shape[1])).reshape(-1)
        records[at, 0] = np.repeat(entry_exec[rows], fields.shape[1])
        records[at, 2:] = fields[:, :, :2].reshape(-1, 2)
    return memory, records
