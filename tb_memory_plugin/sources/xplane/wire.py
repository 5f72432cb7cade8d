"""Columns of a profiler `XSpace` (`.xplane.pb`), read straight from the wire.

A profile of 100-200 MB holds millions of events, nearly all of them
thread-pool bookkeeping (`ThreadpoolListener::*`, ~23 bytes each); the
memory events are a few percent. Parsing every event into a message (or one
bytes object per event) costs more time and memory than the whole analysis,
so events are found and read with numpy:

* A line's events are a chain of records `0x22 <length> <XEvent>`. Every byte
  0x22 whose record would start with `metadata_id` then `offset_ps` (the
  layout every event but a rare one at offset 0 has) is a *candidate*. The
  chain is followed exactly, from the line's first field: where the record
  after a true event is the next candidate, that candidate is the next event,
  so a run of consecutive candidates is taken at once; anything else (a
  missed event, another field of the line) is read one field at a time.
  Candidates that lie inside an event (a stat that looks like an event) are
  jumped over by the chain and never read.
* The fields of the events we keep, then the stats of those events, are read
  in lockstep: one numpy pass per field position over all messages at once.

Planes and their metadata maps are small and read with Python and with a
protobuf schema declared here (TensorBoard ships no XPlane protos). Field
numbers are those of tsl/profiler/protobuf/xplane.proto:

    XSpace      planes = 1
    XPlane      id = 1, name = 2, lines = 3, event_metadata = 4 (map), stat_metadata = 5 (map), stats = 6
    XLine       id = 1, name = 2, timestamp_ns = 3, events = 4
    XEvent      metadata_id = 1, offset_ps = 2, duration_ps = 3, stats = 4, num_occurrences = 5
    XStat       metadata_id = 1, double_value = 2, uint64_value = 3, int64_value = 4,
                str_value = 5, bytes_value = 6, ref_value = 7
    XEventMetadata  id = 1, name = 2, display_name = 4, stats = 5 (read on the metadata plane only)
    XStatMetadata   id = 1, name = 2

Bytes that do not follow the wire format raise `WireError`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError

from ... import _protos

# Wire types.
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
# XStat value fields (the oneof), by field number.
DOUBLE, UINT64, INT64, STR, BYTES, REF = 2, 3, 4, 5, 6, 7

_EVENT_KEY = 0x22  # XLine.events (4, LEN); also XEvent.stats, so both look alike
_METADATA_ID_KEY = 0x08  # XEvent.metadata_id (1, VARINT)
_OFFSET_KEY = 0x10  # XEvent.offset_ps (2, VARINT)
_CHUNK = 1 << 22  # bytes of a line searched for candidates at a time
_WINDOW = np.arange(10, dtype=np.int64)
_SHIFTS = np.arange(10, dtype=np.uint64) * np.uint64(7)


class WireError(ValueError):
    """The bytes are not a serialized XSpace."""


# -- scalar reading (planes, line headers, the odd event) -------------------------------


def _varint(data, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError(f"varint cut short or too long at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(data, start: int, end: int):
    """(field number, wire type, value, payload end) of each field of a message in data[start:end].

    `value` is the number for VARINT and the payload's start for the others.
    """
    pos = start
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = _varint(data, pos, end)
            yield number, wire_type, value, pos
            continue
        if wire_type == LEN:
            length, pos = _varint(data, pos, end)
            value, pos = pos, pos + length
        elif wire_type == FIXED64:
            value, pos = pos, pos + 8
        elif wire_type == FIXED32:
            value, pos = pos, pos + 4
        else:
            raise WireError(f"unsupported wire type {wire_type} at byte {pos}")
        if pos > end:
            raise WireError(f"field {number} runs past its message (byte {pos} > {end})")
        yield number, wire_type, value, pos


# -- vectorised reading ---------------------------------------------------------------


def _gather(buf: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """buf[positions], reading past the end as the last byte (a varint that runs off is caught by bounds)."""
    if positions.size and positions.max() >= buf.size:
        positions = np.minimum(positions, buf.size - 1)
    return buf[positions]


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values as uint64, byte lengths) of the varints starting at each position: byte by byte, each
    pass over the varints not ended yet (a 10-byte window per varint had read every varint's ten
    bytes, where most end within four: a third of the reading's time)."""
    first = _gather(buf, pos)
    values = first.astype(np.uint64)
    lengths = np.ones(pos.size, dtype=np.int64)
    rows = np.flatnonzero(first >= 0x80)
    if rows.size:
        at = pos[rows]
        value = values[rows] & np.uint64(0x7F)
        for k in range(1, 10):
            byte = _gather(buf, at + k)
            value |= (byte & 0x7F).astype(np.uint64) << _SHIFTS[k]
            more = byte >= 0x80
            if not more.any():
                values[rows] = value
                lengths[rows] = k + 1
                break
            done = ~more
            values[rows[done]] = value[done]
            lengths[rows[done]] = k + 1
            rows, at, value = rows[more], at[more], value[more]
        else:
            raise WireError("a varint longer than 10 bytes")
    return values, lengths


@dataclass
class Fields:
    """Fields of many messages read in lockstep: one row per field."""

    owner: np.ndarray  # index of the message (into the starts given)
    number: np.ndarray
    wire_type: np.ndarray
    value: np.ndarray  # VARINT: the value (uint64); otherwise the payload's start
    end: np.ndarray  # the payload's end (for VARINT, the varint's end)

    def of(self, number: int, wire_type: int):
        mask = (self.number == number) & (self.wire_type == wire_type)
        return self.owner[mask], self.value[mask], self.end[mask]


def read_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Every field of the messages buf[starts[i]:ends[i]], one numpy pass per field position."""
    owner = np.arange(starts.size, dtype=np.int64)
    cursor = starts.astype(np.int64)
    limit = ends.astype(np.int64)
    parts: list[tuple] = []
    active = cursor < limit
    owner, cursor, limit = owner[active], cursor[active], limit[active]
    while owner.size:
        key, key_length = varints(buf, cursor)
        number = (key >> np.uint64(3)).astype(np.int64)
        wire_type = (key & np.uint64(7)).astype(np.int64)
        at = cursor + key_length
        value = at.astype(np.uint64)
        end = at.copy()
        is_varint = wire_type == VARINT
        is_len = wire_type == LEN
        if (~(is_varint | is_len | (wire_type == FIXED64) | (wire_type == FIXED32))).any():
            raise WireError("unsupported wire type inside an event")
        variable = np.flatnonzero(is_varint | is_len)
        if variable.size:
            number_read, length = varints(buf, at[variable])
            value[variable] = np.where(is_varint[variable], number_read, (at[variable] + length).astype(np.uint64))
            end[variable] = at[variable] + length + np.where(is_len[variable], number_read.astype(np.int64), 0)
            if (is_len[variable] & (number_read > np.uint64(1 << 40))).any():
                raise WireError("a field length beyond any file")
        end[wire_type == FIXED64] += 8
        end[wire_type == FIXED32] += 4
        if (end > limit).any():
            raise WireError("a field runs past its message")
        parts.append((owner, number, wire_type, value, end))
        more = end < limit
        owner, cursor, limit = owner[more], end[more], limit[more]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty, empty.astype(np.uint64), empty)
    return Fields(*(np.concatenate(column) for column in zip(*parts)))


def doubles(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian float64 at each position."""
    if pos.size == 0:
        return np.zeros(0, dtype=np.float64)
    raw = np.ascontiguousarray(_gather(buf, pos[:, None] + _WINDOW[:8]))
    return raw.view("<f8").reshape(-1)


def as_int64(values: np.ndarray) -> np.ndarray:
    """uint64 wire values as int64 (two's complement, as protobuf reads int64 fields)."""
    return values.view(np.int64) if values.dtype == np.uint64 else values.astype(np.int64)


# -- lines: finding the events --------------------------------------------------------


@dataclass
class Line:
    name: str
    timestamp_ns: int
    body_start: np.ndarray  # per event: where its XEvent message starts
    body_end: np.ndarray


def _skip_varint(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Where the varint at each position ends, for varints of one or two bytes; -1 for longer ones."""
    first = _gather(buf, pos) >= 0x80
    after = pos + 1 + first
    long = first & (_gather(buf, pos + 1) >= 0x80)
    after[long] = -1
    return after


def _candidates(buf: np.ndarray, start: int, stop: int, line_end: int):
    """Positions in [start, stop) that look like an event record, and where each record starts and ends.

    Cheap byte tests first (`0x22`, a length, `0x08`, a metadata id, `0x10`): they drop the
    stats, whose value key follows the metadata id. An event longer than 16 KiB or with a
    metadata id above 16383 is missed here and read field by field instead.
    """
    pos = np.flatnonzero(buf[start:stop] == _EVENT_KEY)
    pos += start
    body = _skip_varint(buf, pos + 1)
    keep = (body > 0) & (body < line_end)
    pos, body = pos[keep], body[keep]
    keep = buf[body] == _METADATA_ID_KEY
    pos, body = pos[keep], body[keep]
    offset_key = _skip_varint(buf, body + 1)
    keep = (offset_key > 0) & (_gather(buf, np.maximum(offset_key, 0)) == _OFFSET_KEY)
    pos, body = pos[keep], body[keep]
    length, _ = varints(buf, pos + 1)
    body_end = body + length.astype(np.int64)
    keep = body_end <= line_end
    return pos[keep], body[keep], body_end[keep]


def read_line(data, buf: np.ndarray, start: int, end: int) -> Line:
    """The line data[start:end]: its name, timestamp and the spans of its events."""
    name, timestamp_ns = b"", 0
    found_starts: list[np.ndarray] = []
    found_ends: list[np.ndarray] = []
    single_starts: list[int] = []
    single_ends: list[int] = []
    pos = start
    searched_to = start  # candidates are known for [searched_from, searched_to)
    cand = cand_body = cand_end = breaks = None
    while pos < end:
        if pos >= searched_to:
            searched_to = min(end, pos + _CHUNK)
            cand, cand_body, cand_end = _candidates(buf, pos, searched_to, end)
            # A run of true events continues while each record ends where the next candidate starts.
            breaks = np.append(np.flatnonzero(cand_end[:-1] != cand[1:]), cand.size - 1)
        i = int(np.searchsorted(cand, pos))
        if i < cand.size and cand[i] == pos:
            last = int(breaks[np.searchsorted(breaks, i)])
            found_starts.append(cand_body[i:last + 1])
            found_ends.append(cand_end[i:last + 1])
            pos = int(cand_end[last])
            continue
        # Not a candidate: read this one field of the line in Python.
        key, after = _varint(data, pos, end)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = _varint(data, after, end)
            if number == 3:
                timestamp_ns = _signed(value)
            continue
        if wire_type != LEN:
            step = {FIXED64: 8, FIXED32: 4}.get(wire_type)
            if step is None:
                raise WireError(f"unsupported wire type {wire_type} in a line")
            pos = after + step
            continue
        length, body = _varint(data, after, end)
        pos = body + length
        if pos > end:
            raise WireError("a line field runs past the line")
        if number == 4:
            single_starts.append(body)
            single_ends.append(pos)
        elif number == 2:
            name = bytes(data[body:pos])
    if pos != end:
        raise WireError("the last event of a line runs past the line")
    body_start = np.concatenate(found_starts + [np.asarray(single_starts, dtype=np.int64)])
    body_end = np.concatenate(found_ends + [np.asarray(single_ends, dtype=np.int64)])
    if single_starts:  # back into file order
        order = np.argsort(body_start, kind="stable")
        body_start, body_end = body_start[order], body_end[order]
    return Line(name.decode("utf-8", "replace"), timestamp_ns, body_start, body_end)


# -- planes -----------------------------------------------------------------------------

_INT64, _BYTES_TYPE, _MESSAGE = _protos.INT64, _protos.BYTES, _protos.MESSAGE
_OPTIONAL, _REPEATED = _protos.OPTIONAL, _protos.REPEATED

# A plane's metadata maps (map entries are messages with key = 1, value = 2).
_SCHEMA = {
    "Metadata": [("event_metadata", 4, _MESSAGE, _REPEATED, "EventMetadataEntry"),
                 ("stat_metadata", 5, _MESSAGE, _REPEATED, "StatMetadataEntry")],
    "EventMetadataEntry": [("key", 1, _INT64, _OPTIONAL, None), ("value", 2, _MESSAGE, _OPTIONAL, "EventMetadata")],
    "EventMetadata": [("id", 1, _INT64, _OPTIONAL, None), ("name", 2, _BYTES_TYPE, _OPTIONAL, None),
                      ("display_name", 4, _BYTES_TYPE, _OPTIONAL, None)],
    "StatMetadataEntry": [("key", 1, _INT64, _OPTIONAL, None), ("value", 2, _MESSAGE, _OPTIONAL, "StatMetadata")],
    "StatMetadata": [("id", 1, _INT64, _OPTIONAL, None), ("name", 2, _BYTES_TYPE, _OPTIONAL, None)],
}
# The metadata plane's event metadata keep their stats too: each compiled XLA program's HloProto.
_WITH_STATS = {
    **_SCHEMA,
    "EventMetadata": _SCHEMA["EventMetadata"] + [("stats", 5, _MESSAGE, _REPEATED, "Stat")],
    "Stat": [("metadata_id", 1, _INT64, _OPTIONAL, None), ("bytes_value", 6, _BYTES_TYPE, _OPTIONAL, None)],
}
_PACKAGE = "tb_memory.xplane"
METADATA_PLANE = "/host:metadata"  # where the profiler keeps what XLA compiled


@functools.cache
def _metadata_class(with_stats: bool = False):
    return _protos.message_classes(_PACKAGE + (".stats" if with_stats else ""),
                                   _WITH_STATS if with_stats else _SCHEMA)["Metadata"]


@dataclass
class Plane:
    name: str
    lines: list[Line]
    event_names: dict[int, tuple[str, str]]  # event metadata id -> (name, display name)
    stat_names: dict[int, str]  # stat metadata id -> name (ref_value strings live here too)
    stats: dict[str, object] = field(default_factory=dict)  # the plane's own stats, by name
    # The metadata plane's: event metadata name (`jit_train_step(191835)`) -> its bytes stats by name.
    metadata_bytes: dict[str, dict[str, bytes]] = field(default_factory=dict)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _plane_stats(data, spans, stat_names) -> dict[str, object]:
    stats = {}
    for start, end in spans:
        metadata_id, value = 0, None
        for number, wire_type, raw, stop in _fields(data, start, end):
            if number == 1 and wire_type == VARINT:
                metadata_id = raw
            elif number == DOUBLE and wire_type == FIXED64:
                value = float(np.frombuffer(bytes(data[raw:stop]), dtype="<f8")[0])
            elif number in (UINT64, REF) and wire_type == VARINT:
                value = raw
            elif number == INT64 and wire_type == VARINT:
                value = _signed(raw)
            elif number in (STR, BYTES) and wire_type == LEN:
                value = bytes(data[raw:stop])
        stats[stat_names.get(metadata_id, str(metadata_id))] = value
    return stats


def read_plane(data, buf: np.ndarray, start: int, end: int) -> Plane:
    name = b""
    line_spans, metadata_spans, stat_spans = [], [], []
    for number, wire_type, value, stop in _fields(data, start, end):
        if wire_type != LEN:
            continue
        if number == 2:
            name = bytes(data[value:stop])
        elif number == 3:
            line_spans.append((value, stop))
        elif number in (4, 5):
            metadata_spans.append((number, value, stop))
        elif number == 6:
            stat_spans.append((value, stop))
    # The map entries, re-framed as one `Metadata` message and parsed by protobuf.
    framed = bytearray()
    for number, value, stop in metadata_spans:
        framed += bytes([number << 3 | LEN]) + _protos.encode_varint(stop - value) + data[value:stop]
    with_stats = _text(name) == METADATA_PLANE
    try:
        metadata = _metadata_class(with_stats).FromString(bytes(framed))
    except DecodeError as exc:
        if not with_stats:
            raise WireError(f"plane metadata: {exc}") from None
        with_stats = False  # what XLA compiled is optional: a stat that does not parse loses it alone
        try:
            metadata = _metadata_class().FromString(bytes(framed))
        except DecodeError as exc:
            raise WireError(f"plane metadata: {exc}") from None
    event_names = {entry.key: (_text(entry.value.name), _text(entry.value.display_name))
                   for entry in metadata.event_metadata}
    stat_names = {entry.key: _text(entry.value.name) for entry in metadata.stat_metadata}
    metadata_bytes = {}
    if with_stats:
        for entry in metadata.event_metadata:
            stats = {stat_names.get(stat.metadata_id, ""): stat.bytes_value for stat in entry.value.stats
                     if stat.bytes_value}
            if stats:
                metadata_bytes[_text(entry.value.name)] = stats
    lines = [read_line(data, buf, a, b) for a, b in line_spans]
    return Plane(_text(name), lines, event_names, stat_names, _plane_stats(data, stat_spans, stat_names),
                 metadata_bytes)


def read_space(data: bytes) -> tuple[np.ndarray, list[Plane]]:
    """(the bytes as a uint8 array, the planes) of a serialized XSpace."""
    buf = np.frombuffer(data, dtype=np.uint8)
    planes = []
    for number, wire_type, value, stop in _fields(data, 0, len(data)):
        if number == 1:
            if wire_type != LEN:
                raise WireError("XSpace.planes is not a message")
            planes.append(read_plane(data, buf, value, stop))
    return buf, planes
