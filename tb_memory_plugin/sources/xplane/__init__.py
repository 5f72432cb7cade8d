"""Profiler XSpace (`plugins/profile/<session>/<host>.xplane.pb`) -> one `Trace` per profiled step.

TF2 eager code, Keras `model.fit` and JAX write no step stats; their memory is
in the profiler's `MemoryAllocation` / `MemoryDeallocation` events (README, "TF2
and Keras"). This importer turns them into the same columns as RunMetadata:

* steps: one per executor step id (`id` on the allocations and on
  `ExecutorState::Process` events); a step's window runs from its first to its
  last such event, and every memory event of the allocator inside it counts
  (the allocator's bytes are the truth, whoever asked for them). Executor
  steps inside one marked step (a `Profiled batch` or `step_num` marker) are
  one step, numbered by it, whose window holds its marker's (the eager work
  around a `tf.function` too); an executor step run across several marked
  steps (eager ops' own) is none of them. Marked steps no executor step ran in (JAX and
  Keras 3 on JAX name no executor step) are steps over their marker's window;
* executions: one per distinct `tf_op` in the window (op events are named
  `<tf_op>:<OpType>`: their op type, start and end); XLA's programs
  (`...Execute (jit_train_step)`; TensorFlow's own, `CpuExecutable::ExecuteAsyncOnStream`,
  as `(XLA program)`) and copies to the device
  (`...BufferFromHostBuffer(f32[32,28,28,1])`) stand for ops, and a tf_op that
  allocated inside a program (a tf.function with jit_compile) is one; an allocation
  without a `tf_op` belongs to the innermost op running on its thread then
  (`(no op)` where none runs; `(input pipeline)` on one of tf.data's threads);
  the ops whose allocations were all made on tf.data's threads are the step's
  input (`SpaceTrace.input_names`);
* events: + `allocation_bytes` on allocation, - on free; a free belongs to the
  execution whose allocation it frees (paired by `addr`), or to the execution
  `(before this step)` when that allocation was made before the window (an
  earlier step, or before the profile);
* snapshots: `bytes_allocated`, the allocator's absolute bytes in use after
  each event, so the curve is absolute; `bytes_reserved` and `fragmentation`
  beside them; capacity = allocated + available + reserved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from ..._numeric import scatter_sum
from ...names import (BEFORE_STEP_OP_TYPE, COPY_TO_DEVICE_OP_TYPE, TF_XLA_PROGRAM, UNATTRIBUTED, UNUSED_SCRATCH,
                      UPDATED_ARGUMENTS, XLA_PROGRAM_OP_TYPE, graph_op_type)
from ...figures import format_bytes
from ...trace import DEVICE_MEMORY, ProgramShapes, SpaceTrace, Trace, TraceDecodeError, readings_thresholds
from . import hlo
from . import names as names_mod
from . import wire

BEFORE_STEP = "(before this step)"  # owns frees of bytes allocated before the step's window
_NO_TF_OP = ("(null)", "")  # TensorFlow up to 2.17 writes an allocation with no op as tf_op "(null)"
_CALL_OP_TYPES = ("StatefulPartitionedCall", "PartitionedCall")  # a function's call, whose ops allocate
INPUT_PIPELINE = names_mod.INPUT_PIPELINE  # what tf.data's threads allocate; their ops' names below it
# tf.data runs its pipeline on threads of its own (`tf_data_private_threadpool`,
# `tf_data_iterator_resource`): what an op allocates there (Keras slicing a batch out of
# the dataset, `(input pipeline)/GatherV2`; a `map` function's ops) is the step's input,
# whatever its op type.
_INPUT_THREAD_PREFIX = "tf_data"
# An op run eagerly (`tf.random.normal` in a step: `RandomStandardNormal`, `Mul`, `AddV2`) allocates
# under its op type's name, at the root, where no kernel event gives its type.
_EAGER_OP_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")

NO_MEMORY_HELP = (
    "This profile holds no memory events. On CPU, TensorFlow records every allocation only with the BFC "
    "allocator: set TF_CPU_ALLOCATOR_USE_BFC=true in the environment before TensorFlow starts (before "
    "`import tensorflow`: setting it later has no effect). oneDNN's allocator (mklcpu, on by default on x86, "
    "or with TF_ENABLE_ONEDNN_OPTS=1) records only allocations of 256 KiB and more, so a small model's step "
    "may have none."
)

JAX_NO_MEMORY_HELP = (
    "This JAX profile holds no memory events: JAX records its allocations where XLA's BFC "
    "allocator makes them, on a GPU; on CPU it allocates without one. Profile the step on a GPU."
)
UNRECORDED_DEVICE_HELP = (
    "{devices} ran work in this profile, but no GPU allocation is in it: only the "
    "BFC allocator records them (the default; not with XLA_PYTHON_CLIENT_ALLOCATOR=platform in JAX, "
    "nor TF_GPU_ALLOCATOR=cuda_malloc_async in TensorFlow)."
)
WHOLE_PROFILE_NOTE = (
    "This profile marks no step, and no function's executor step holds its allocations (eager ops each "
    "run on their own): the step shown is the whole profile. Mark each training step with "
    "`with tf.profiler.experimental.Trace(\"train\", step_num=n):` to see them apart."
)
# oneDNN's CPU allocator (TensorFlow's default on x86 CPUs) records only its large allocations in a
# profile: what it shows is a part of the step.
MKLCPU = "mklcpu"
MKLCPU_NOTE = (  # its larger requests are its BFC allocator's, which writes the profile's memory events
    f"On CPU, oneDNN's allocator (mklcpu) records only allocations of {format_bytes(readings_thresholds(MKLCPU)[0])} "
    "and more in a profile: smaller tensors are missing from these figures. Set TF_CPU_ALLOCATOR_USE_BFC=true "
    "before TensorFlow starts to record every allocation."
)
def steps_per_execution_note(count: int | None = None) -> str:
    """What a step of Keras' steps_per_execution loop is (trial AB: a step of `fit(steps_per_execution=4)`
    allocated 4 steps' worth, unsaid), with the count where the profile's step numbers tell it (trial AF: the
    note had not said it)."""
    if count is None:
        ran, apart = "that many", " (the profile numbers its steps by them: at 4, step_4, step_8)"
        what = "steps_per_execution > 1"
    else:
        ran, apart, what = str(count), "", f"steps_per_execution={count} (the profile's step numbers are {count} apart)"
    return (f"This step is one call of Keras' train function with {what}: it ran {ran} training steps{apart}, so "
            "its allocated figures are theirs together, and its peak the highest of theirs.")


STEPS_PER_EXECUTION_NOTE = steps_per_execution_note()  # a plane's step, before the profile tells the count
_DEVICE_PLANE_RE = re.compile(r"^/device:GPU:\d+$")  # a GPU's own plane (its kernels and copies)
# Events only JAX's runtime (PjRt) writes: a profile without memory events made by JAX.
_JAX_EVENT_RE = re.compile(r"^PjitFunction\(|PjRt")

_ALLOCATION, _DEALLOCATION, _PROCESS, _OP, _OTHER, _SKIPPED, _MARKER, _FUNCTION_RUN, _ITERATOR, _EAGER_EXECUTE = range(10)
_EAGER_EXECUTE_EVENT = "EagerLocalExecute: "  # an eager call of an op or function (`EagerLocalExecute: __inference_f_12`)
# tf.data at work on a thread of its own or its caller's (`MakeIterator::MapAndBatchDataset` filling a
# buffer as an iterator is made; `Iterator::...` producing an element): what is allocated inside is
# the input pipeline's, whatever thread runs it (a `map` without num_parallel_calls runs inline).
_ITERATOR_EVENT = ("MakeIterator::", "Iterator::")
# Keras 3 on JAX marks a profiled batch by name alone (`keras.callbacks.TensorBoard`); on
# TensorFlow it is `Profiled batch` with a step_num stat, as `tf.profiler...Trace` writes.
_BATCH_MARKER_RE = re.compile(r"^Profiled batch (?P<number>\d{1,18})$")
# `<tf_op>:<OpType>`: node names hold no ':' or spaces; `ThreadpoolListener::Record` has two colons.
_OP_EVENT_RE = re.compile(r"^(?P<node>[^:\s]+):(?P<type>[A-Za-z0-9_.]*)$")
# JAX and Keras 3 on JAX: XLA allocates a program's buffers inside its execution
# (`CommonPjRtLoadedExecutable::Execute (jit_train_step)`) and an argument's inside its copy
# to the device (`...::BufferFromHostBuffer(f32[32,28,28,1])`); their allocations carry no
# tf_op. These events stand for ops: the program, named as XLA names it, and the copies,
# under one scope by the shape copied.
_PROGRAM_EVENT_RE = re.compile(r"^(?:\w+::)*Execute \((?P<program>[^()\s]+)\)$")
# TensorFlow's own XLA (`jit_compile=True`, Keras 3 on TensorFlow with jit): the compiled
# program runs in `CpuExecutable::ExecuteAsyncOnStream` (`GpuExecutable::...` on a GPU), which
# names no program; its buffers are allocated there, without a tf_op (Keras' fit) or with the
# function's (`__inference_train_step_2866`, a tf.function called eagerly).
_TF_PROGRAM_EVENT_RE = re.compile(r"^(?:\w+::)*\w*Executable::ExecuteAsyncOnStream$")
# A tf.function's concrete function, the op an eager call of it runs as.
_TF_FUNCTION_RE = re.compile(r"^__inference_\w+_\d+$")
_COPY_EVENT_RE = re.compile(r"^(?:\w+::)*BufferFromHostBuffer\((?P<shape>[^()\s]*)\)$")
COPY_SCOPE = "(copies to device)"  # op type COPY_TO_DEVICE_OP_TYPE: categorised as inputs
# PjRt's own callbacks (`ThenExecuteCallback:GetEventForComputeStreamSyncPoint`) look like
# `<tf_op>:<OpType>` and are none.
_NOT_OPS = ("ThreadpoolListener::", "ThenExecuteCallback:")
_GPU_ALLOCATOR_RE = re.compile(r"^(?:GPU|gpu)_(?P<index>\d+)_bfc$")
_EVENTS_PER_CHUNK = 1 << 15  # events read in lockstep at once (bounds the field tables)

# Stats read from memory events, as (name, kind): "int" (int64/uint64), "double", "string" (str or ref).
_MEMORY_STATS = (
    ("allocator_name", "string"), ("tf_op", "string"), ("region_type", "string"), ("id", "int"),
    ("addr", "int"), ("allocation_bytes", "int"), ("requested_bytes", "int"), ("bytes_allocated", "int"),
    ("bytes_reserved", "int"), ("bytes_available", "int"), ("fragmentation", "double"),
    ("shape", "string"),  # the tensor's shape as text, `[32,28,28,1]` (`[]`: a scalar)
)
# Other names a stat has had: read as the declared one.
_STAT_ALIASES = {"tensor_shape": "shape"}


def _check_bytes(data) -> None:
    """Bytes that cannot be a profile, said for what they are (trial AD: an empty file had been told to set
    TF_CPU_ALLOCATOR_USE_BFC, a gzip or JSON file given a wire type at byte 1)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TraceDecodeError(f"expected bytes, got {type(data).__name__}")
    if not len(data):
        raise TraceDecodeError("the file is empty (0 B): the profiler wrote nothing to it, or is still writing it")
    head = bytes(data[:2])
    if head == b"\x1f\x8b":
        raise TraceDecodeError("the file is gzip-compressed, not the profiler's XSpace as it writes it: decompress it "
                               "(`gunzip`), or profile the step again")
    if head[:1] in (b"{", b"["):
        raise TraceDecodeError("the file is text (JSON, as an old profiler's `*.trace.json.gz` holds), not the "
                               "profiler's binary XSpace: profile the step again with TensorFlow 2.5 or later")


# -- columns of one plane ----------------------------------------------------------------


@dataclass
class _Stats:
    """The stats of a set of events, one row per stat."""

    event: np.ndarray  # which event (index into the set)
    metadata_id: np.ndarray
    kind: np.ndarray  # the XStat value field that is set (wire.DOUBLE, ...)
    integer: np.ndarray  # int64 of UINT64 / INT64 / REF values
    real: np.ndarray  # DOUBLE values
    text_start: np.ndarray  # STR / BYTES payloads
    text_end: np.ndarray


# An XStat's value field's key byte (its number << 3 | wire type) -> its number, for the fields read.
_STAT_VALUE_KEYS = {(wire.DOUBLE << 3) | wire.FIXED64: wire.DOUBLE, (wire.UINT64 << 3) | wire.VARINT: wire.UINT64,
                    (wire.INT64 << 3) | wire.VARINT: wire.INT64, (wire.REF << 3) | wire.VARINT: wire.REF,
                    (wire.STR << 3) | wire.LEN: wire.STR, (wire.BYTES << 3) | wire.LEN: wire.BYTES}


def _empty_stat_columns(count: int) -> tuple:
    """(metadata id, kind, integer, real, text start, text end) of `count` stats, zero."""
    return (np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64),
            np.zeros(count, dtype=np.float64), np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64))


def _read_stats(buf: np.ndarray, spans: tuple) -> _Stats:
    """The stats in `spans` (event, start, end of each XStat). Nearly every one is its metadata id then one
    value (or none: a zero); those are read at once, the others field by field (`_read_stats_by_field`)."""
    event, starts, ends = spans
    stat_count = starts.size
    columns = _empty_stat_columns(stat_count)
    rows = np.flatnonzero((starts < ends) & (wire._gather(buf, starts) == 0x08))
    ids, id_length = wire.varints(buf, starts[rows] + 1)
    key_at = starts[rows] + 1 + id_length
    bare = key_at == ends[rows]  # the id alone: a zero value
    key = wire._gather(buf, key_at).astype(np.int64)
    number = np.zeros(rows.size, dtype=np.int64)
    for byte, value_field in _STAT_VALUE_KEYS.items():
        number[key == byte] = value_field
    number[bare] = 0
    value_at = key_at + 1
    value, value_length = np.zeros(rows.size, dtype=np.uint64), np.zeros(rows.size, dtype=np.int64)
    varint = np.flatnonzero((number == wire.UINT64) | (number == wire.INT64) | (number == wire.REF)
                            | (number == wire.STR) | (number == wire.BYTES))
    value[varint], value_length[varint] = wire.varints(buf, value_at[varint])
    end = value_at + value_length
    length = (number == wire.STR) | (number == wire.BYTES)
    end[length] += value[length].astype(np.int64)
    end[number == wire.DOUBLE] += 8
    end[bare] = key_at[bare]
    read = (bare | (number > 0)) & (end == ends[rows]) & (ends[rows] > starts[rows])
    if (length & read & (value > np.uint64(1 << 40))).any():
        raise wire.WireError("a field length beyond any file")
    at = rows[read]
    columns[0][at] = wire.as_int64(ids[read])  # the metadata ids
    number, value, value_at, end = number[read], value[read], value_at[read], end[read]
    length = (number == wire.STR) | (number == wire.BYTES)
    payload = np.where(length, end - value.astype(np.int64), value_at)  # a double's or a text's first byte
    _place_stat_values(columns, buf, at, number, value, payload, end)
    others = np.ones(stat_count, dtype=bool)
    others[at] = False
    others = np.flatnonzero(others)
    if others.size:
        for column, read_column in zip(columns, _read_stats_by_field(buf, starts[others], ends[others])):
            column[others] = read_column
    return _Stats(event, *columns)


def _read_stats_by_field(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple:
    """The stats in [starts, ends) read field by field: (metadata id, kind, integer, real, text start, text end)."""
    columns = _empty_stat_columns(starts.size)
    fields = wire.read_fields(buf, starts, ends)
    owner, value, _ = fields.of(1, wire.VARINT)
    columns[0][owner] = wire.as_int64(value)  # the metadata ids
    # The value fields (their payload's first byte is `value` for a double's or a text's).
    value_field = np.isin((fields.number << 3) | fields.wire_type, list(_STAT_VALUE_KEYS))
    _place_stat_values(columns, buf, fields.owner[value_field], fields.number[value_field], fields.value[value_field],
                       fields.value[value_field].astype(np.int64), fields.end[value_field])
    return columns


def _place_stat_values(columns: tuple, buf: np.ndarray, owner: np.ndarray, number: np.ndarray, value: np.ndarray,
                       payload: np.ndarray, end: np.ndarray) -> None:
    """Each stat's value into `columns` (`_empty_stat_columns`'): per row its stat (`owner`), its field's number,
    its varint `value`, where its payload starts (a double's, a text's) and ends. Of a stat with several, the
    last field of a kind counts, the kinds in this order."""
    _, kind, integer, real, text_start, text_end = columns
    for field_number in (wire.UINT64, wire.INT64, wire.REF):
        held = number == field_number
        integer[owner[held]] = wire.as_int64(value[held])
        kind[owner[held]] = field_number
    held = number == wire.DOUBLE
    real[owner[held]] = wire.doubles(buf, payload[held])
    kind[owner[held]] = wire.DOUBLE
    for field_number in (wire.STR, wire.BYTES):
        held = number == field_number
        text_start[owner[held]] = payload[held]
        text_end[owner[held]] = end[held]
        kind[owner[held]] = field_number


class _Strings:
    """One code per distinct string of a plane: ref values (stat metadata names) and inline strings."""

    def __init__(self, data, stat_names: dict[int, str]) -> None:
        self._data = data
        self.values: list[str] = []
        self._code: dict[str, int] = {}
        self._ref_ids = np.array(sorted(stat_names), dtype=np.int64)
        self._ref_codes = np.array([self.code(stat_names[i]) for i in self._ref_ids.tolist()], dtype=np.int64)

    def codes_of(self, texts) -> list[int]:
        """The codes of those of `texts` it has."""
        return [self._code[text] for text in texts if text in self._code]

    def code(self, text: str) -> int:
        code = self._code.get(text)
        if code is None:
            code = self._code[text] = len(self.values)
            self.values.append(text)
        return code

    def of_stats(self, stats: _Stats, rows: np.ndarray) -> np.ndarray:
        """String codes of some stats (refs and inline strings); -1 for other kinds."""
        out = np.full(rows.size, -1, dtype=np.int64)
        kind = stats.kind[rows]
        refs = np.flatnonzero(kind == wire.REF)
        if refs.size and self._ref_ids.size:
            ids = stats.integer[rows[refs]]
            at = np.minimum(np.searchsorted(self._ref_ids, ids), self._ref_ids.size - 1)
            known = self._ref_ids[at] == ids
            out[refs[known]] = self._ref_codes[at[known]]
        for i in np.flatnonzero((kind == wire.STR) | (kind == wire.BYTES)).tolist():
            row = rows[i]
            raw = bytes(self._data[stats.text_start[row]:stats.text_end[row]])
            out[i] = self.code(raw.decode("utf-8", "replace"))
        return out


def _stat_columns(stats: _Stats, count: int, wanted, stat_ids: dict[str, list[int]], strings: _Strings) -> dict:
    """Per event, the value of each wanted stat (0 / 0.0 / -1 where absent)."""
    columns = {}
    for name, kind in wanted:
        if kind == "double":
            column = np.zeros(count, dtype=np.float64)
        else:
            column = np.full(count, -1 if kind == "string" else 0, dtype=np.int64)
        rows = np.flatnonzero(np.isin(stats.metadata_id, stat_ids.get(name, [])))
        if rows.size:
            events = stats.event[rows]
            if kind == "double":
                # Doubles written as integers (or the reverse) still read as numbers.
                column[events] = np.where(stats.kind[rows] == wire.DOUBLE, stats.real[rows], stats.integer[rows])
            elif kind == "string":
                column[events] = strings.of_stats(stats, rows)
            else:
                column[events] = np.where(stats.kind[rows] == wire.DOUBLE, stats.real[rows].astype(np.int64),
                                          stats.integer[rows])
        columns[name] = column
    return columns


@dataclass
class _PlaneEvents:
    """The events of one plane that matter, as columns (times in picoseconds)."""

    memory: dict  # time_ps, line, is_allocation and the _MEMORY_STATS columns
    ops: dict  # start_ps, end_ps, line, node (string code), op_type (string code)
    processes: dict  # start_ps, end_ps, step_id
    markers: dict  # start_ps, end_ps, step_num
    function_runs: dict  # start_ps, end_ps, line: functions run by the function runtime (not XLA's)
    eager_executes: dict  # start_ps, end_ps, line, node: eager calls of tf.functions (`EagerLocalExecute: <f>`)
    iterators: dict  # start_ps, end_ps, line: tf.data at work (_ITERATOR_EVENT), on any thread
    strings: _Strings
    input_lines: np.ndarray  # per line of the plane: whether it is one of tf.data's threads


def _event_kinds(event_names: dict[int, tuple[str, str]], strings: _Strings):
    """Sorted metadata ids, their kind, and for op events the (node, op type) codes (for
    markers named by their step number, node is that number)."""
    ids = np.array(sorted(event_names), dtype=np.int64)
    kinds = np.full(ids.size, _OTHER, dtype=np.int64)
    node = np.full(ids.size, -1, dtype=np.int64)
    op_type = np.full(ids.size, -1, dtype=np.int64)
    for i, metadata_id in enumerate(ids.tolist()):
        name, display_name = event_names[metadata_id]
        if name == "MemoryAllocation":
            kinds[i] = _ALLOCATION
        elif name == "MemoryDeallocation":
            kinds[i] = _DEALLOCATION
        elif name == "ExecutorState::Process":
            kinds[i] = _PROCESS
        elif name == "KernelAndDeviceFunc::Run":  # a function run by TensorFlow's function runtime
            kinds[i] = _FUNCTION_RUN
        elif name.startswith(_EAGER_EXECUTE_EVENT) and _TF_FUNCTION_RE.match(name[len(_EAGER_EXECUTE_EVENT):]):
            kinds[i] = _EAGER_EXECUTE
            node[i] = strings.code(name[len(_EAGER_EXECUTE_EVENT):])
        elif name.startswith(_ITERATOR_EVENT):
            kinds[i] = _ITERATOR
        elif name.startswith(_NOT_OPS):
            kinds[i] = _SKIPPED
        elif match := _OP_EVENT_RE.match(name):
            kinds[i] = _OP
            node[i] = strings.code(match.group("node"))
            op_type[i] = strings.code(match.group("type") or display_name or "(unknown)")
        elif match := _BATCH_MARKER_RE.match(name):
            kinds[i] = _MARKER
            node[i] = int(match.group("number"))
        elif match := _PROGRAM_EVENT_RE.match(name):
            kinds[i] = _OP
            node[i] = strings.code(match.group("program"))
            op_type[i] = strings.code(XLA_PROGRAM_OP_TYPE)
        elif _TF_PROGRAM_EVENT_RE.match(name):
            kinds[i] = _OP
            node[i] = strings.code(TF_XLA_PROGRAM)  # its buffers name no op
            op_type[i] = strings.code(XLA_PROGRAM_OP_TYPE)
        elif match := _COPY_EVENT_RE.match(name):
            kinds[i] = _OP
            node[i] = strings.code(f"{COPY_SCOPE}/{match.group('shape') or '(no shape)'}")
            op_type[i] = strings.code(COPY_TO_DEVICE_OP_TYPE)
    return ids, kinds, node, op_type


def _plane_events(data, buf: np.ndarray, plane: wire.Plane) -> _PlaneEvents:
    strings = _Strings(data, plane.stat_names)
    stat_ids: dict[str, list[int]] = {}
    for metadata_id, name in plane.stat_names.items():
        stat_ids.setdefault(_STAT_ALIASES.get(name, name), []).append(metadata_id)
    meta_ids, meta_kinds, meta_node, meta_op_type = _event_kinds(plane.event_names, strings)
    parts: dict[str, list] = {"memory": [], "ops": [], "processes": [], "markers": [], "function_runs": [],
                              "iterators": [], "eager_executes": []}
    for line_index, line in enumerate(plane.lines):
        base_ps = line.timestamp_ns * 1000
        for first in range(0, line.body_start.size, _EVENTS_PER_CHUNK):
            starts = line.body_start[first:first + _EVENTS_PER_CHUNK]
            ends = line.body_end[first:first + _EVENTS_PER_CHUNK]
            metadata_id = _metadata_ids(buf, starts, ends)
            at = np.minimum(np.searchsorted(meta_ids, metadata_id), max(meta_ids.size - 1, 0))
            known = meta_ids[at] == metadata_id if meta_ids.size else np.zeros(starts.size, dtype=bool)
            kind = np.where(known, meta_kinds[at] if meta_ids.size else _OTHER, _SKIPPED)
            keep = np.flatnonzero(kind != _SKIPPED)
            if keep.size == 0:
                continue
            kind, at = kind[keep], at[keep]
            fields = wire.read_fields(buf, starts[keep], ends[keep])
            offset = np.zeros(keep.size, dtype=np.int64)
            duration = np.zeros(keep.size, dtype=np.int64)
            owner, value, _ = fields.of(2, wire.VARINT)
            offset[owner] = wire.as_int64(value)
            owner, value, _ = fields.of(3, wire.VARINT)
            duration[owner] = wire.as_int64(value)
            start_ps = base_ps + offset
            end_ps = start_ps + duration
            line_column = np.full(keep.size, line_index, dtype=np.int64)
            is_op = kind == _OP
            if is_op.any():
                parts["ops"].append({"start_ps": start_ps[is_op], "end_ps": end_ps[is_op], "line": line_column[is_op],
                                     "node": meta_node[at[is_op]], "op_type": meta_op_type[at[is_op]]})
            run = kind == _FUNCTION_RUN
            if run.any():
                parts["function_runs"].append({"start_ps": start_ps[run], "end_ps": end_ps[run], "line": line_column[run]})
            eager = kind == _EAGER_EXECUTE
            if eager.any():
                parts["eager_executes"].append({"start_ps": start_ps[eager], "end_ps": end_ps[eager],
                                                "line": line_column[eager], "node": meta_node[at[eager]]})
            iterating = kind == _ITERATOR
            if iterating.any():
                parts["iterators"].append({"start_ps": start_ps[iterating], "end_ps": end_ps[iterating],
                                           "line": line_column[iterating]})
            named = kind == _MARKER
            if named.any():
                parts["markers"].append({"start_ps": start_ps[named], "end_ps": end_ps[named],
                                         "step_num": meta_node[at[named]]})
            with_stats = np.flatnonzero(~is_op & ~named & ~run & ~iterating & ~eager)
            if with_stats.size == 0:
                continue
            stat_owner, stat_start, stat_end = fields.of(4, wire.LEN)
            wanted = np.isin(stat_owner, with_stats)
            stats = _read_stats(buf, (stat_owner[wanted], stat_start[wanted].astype(np.int64), stat_end[wanted]))
            memory = np.flatnonzero((kind == _ALLOCATION) | (kind == _DEALLOCATION))
            if memory.size:
                columns = _stat_columns(_restrict(stats, memory, keep.size), memory.size, _MEMORY_STATS, stat_ids,
                                        strings)
                # TensorFlow up to 2.17 writes `(null)`: as without a tf_op, the op running on the thread then.
                columns["null_op"] = np.isin(columns["tf_op"], strings.codes_of(_NO_TF_OP))
                columns["tf_op"][columns["null_op"]] = -1
                parts["memory"].append({"time_ps": start_ps[memory], "line": line_column[memory],
                                        "is_allocation": kind[memory] == _ALLOCATION, **columns})
            process = np.flatnonzero(kind == _PROCESS)
            if process.size:
                columns = _stat_columns(_restrict(stats, process, keep.size), process.size, (("id", "int"),),
                                        stat_ids, strings)
                parts["processes"].append({"start_ps": start_ps[process], "end_ps": end_ps[process],
                                           "line": line_column[process], "step_id": columns["id"]})
            other = np.flatnonzero(kind == _OTHER)
            if other.size and "step_num" in stat_ids:
                restricted = _restrict(stats, other, keep.size)
                has_step = np.zeros(other.size, dtype=bool)
                has_step[restricted.event[np.isin(restricted.metadata_id, stat_ids["step_num"])]] = True
                if has_step.any():
                    columns = _stat_columns(restricted, other.size, (("step_num", "int"),), stat_ids, strings)
                    parts["markers"].append({"start_ps": start_ps[other][has_step], "end_ps": end_ps[other][has_step],
                                             "step_num": columns["step_num"][has_step]})
    input_lines = np.array([line.name.startswith(_INPUT_THREAD_PREFIX) for line in plane.lines], dtype=bool)
    return _PlaneEvents(**{name: _concatenate(chunks) for name, chunks in parts.items()}, strings=strings,
                        input_lines=input_lines)


def _metadata_ids(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each event's metadata_id: its first field nearly always; the rest read field by field."""
    metadata_id = np.zeros(starts.size, dtype=np.int64)
    first = (starts < ends) & (wire._gather(buf, starts) == 0x08)
    rows = np.flatnonzero(first)
    value, length = wire.varints(buf, starts[rows] + 1)
    if ((starts[rows] + 1 + length) > ends[rows]).any():
        raise wire.WireError("an event's metadata_id runs past the event")
    metadata_id[rows] = wire.as_int64(value)
    others = np.flatnonzero(~first)
    if others.size:
        owner, value, _ = wire.read_fields(buf, starts[others], ends[others]).of(1, wire.VARINT)
        metadata_id[others[owner]] = wire.as_int64(value)
    return metadata_id


def _restrict(stats: _Stats, events: np.ndarray, event_count: int) -> _Stats:
    """The stats of some events, renumbered 0..len(events)-1."""
    renumber = np.full(event_count, -1, dtype=np.int64)
    renumber[events] = np.arange(events.size)
    new_event = renumber[stats.event]
    rows = np.flatnonzero(new_event >= 0)
    return _Stats(new_event[rows], stats.metadata_id[rows], stats.kind[rows], stats.integer[rows], stats.real[rows],
                  stats.text_start[rows], stats.text_end[rows])


def _concatenate(chunks: list[dict]) -> dict:
    if not chunks:
        return {}
    return {key: np.concatenate([chunk[key] for chunk in chunks]) for key in chunks[0]}


# -- steps --------------------------------------------------------------------------------


_CALLS_BEFORE = 8  # eager calls starting before a step read for its function (`_PlaneSteps._name_functions`)


@dataclass
class ProfileStep:
    """One profiled step: an executor step id and the window its events span."""

    step_id: int
    number: int | None  # the step number the profiler was given (Keras: the batch), if any
    start_ps: int
    end_ps: int
    devices: list[str]
    step_ids: list[int] = field(default_factory=list)  # every executor step merged into it (step_id first)
    marked: int | None = None  # the marked step it ran in (_MarkedSteps), if any
    whole: bool = False  # the whole profile: it marks no step and runs no function's
    # An unmarked step's tf.function, as its eager call names it (`multi_step_on_iterator_1187`, without
    # `__inference_`): a fit's, a predict's and an evaluate's runs look alike otherwise (trial AL).
    function: str | None = None

    def __post_init__(self) -> None:
        self.step_ids = self.step_ids or [self.step_id]


def _device_of(allocator: str) -> tuple[str, str, int]:
    """(device name, type, index) whose memory an allocator hands out."""
    match = _GPU_ALLOCATOR_RE.match(allocator)
    if match:
        index = int(match.group("index"))
        return f"/device:GPU:{index}", "GPU", index
    return "/device:CPU:0", "CPU", 0


@dataclass
class _Rows:
    """A step's memory events as rows: one per profile event, or one per piece of a split XLA
    program block (sources/xplane/hlo.py), the pieces of an event side by side at its time."""

    event: np.ndarray  # index into the plane's memory columns
    node: np.ndarray  # string code of the node owning the row's bytes
    size: np.ndarray  # bytes (allocated; a free's sign comes from its event)
    requested: np.ndarray
    shape: np.ndarray  # string code of the tensor's shape, -1 for none
    program: np.ndarray | None = None  # for a piece: its program's node (the block's own piece: -1)
    reading: np.ndarray | None = None  # the row that carries its event's allocator reading (its last)

    def __post_init__(self) -> None:
        if self.program is None:
            self.program = np.full(self.event.size, -1, dtype=np.int64)
        if self.reading is None:
            self.reading = np.ones(self.event.size, dtype=bool)

    def take(self, at: np.ndarray) -> "_Rows":
        return _Rows(*(getattr(self, f.name)[at] for f in fields(self)))


class _PlaneSteps:
    """The memory events of one plane, sorted by time, paired, and split into steps."""

    def __init__(self, events: _PlaneEvents, profile_start_ns: int, programs: hlo.Programs | None = None) -> None:
        self.strings = events.strings
        self.profile_start_ns = profile_start_ns
        memory = events.memory
        order = np.argsort(memory["time_ps"], kind="stable")
        self.memory = {key: column[order] for key, column in memory.items()}
        lines = self.memory["line"]
        self.on_input_thread = events.input_lines[lines] if lines.size else np.zeros(0, dtype=bool)
        self.ops = events.ops
        self._pair_frees()
        self._fill_step_ids(events.processes, events.input_lines)
        self._name_input_pipeline(events.input_lines, events.iterators)
        self._attribute_unnamed()
        # Functions TensorFlow up to 2.17 ran as XLA programs, in events of their own op type.
        self.function_programs: frozenset[int] = frozenset()
        self.xla_nodes, self.function_programs = self._allocating_in_programs(events.function_runs,
                                                                              events.eager_executes)
        self.jax_pieces: set[int] = set()  # node codes of JAX programs' pieces (named by hlo.node_name)
        # Each program run whose blocks were read: (start, bytes it allocated, its module's shapes).
        self.program_runs: list[tuple[int, int, ProgramShapes]] = []
        self.split = self._split_programs(programs) if programs else {}
        self.steps = self._find_steps(events.processes, events.markers, events.function_runs)
        self._name_functions(events.eager_executes)

    def _name_functions(self, eager_executes: dict) -> None:
        """Each unmarked step's tf.function: the eager call of one (`EagerLocalExecute: __inference_<f>_<n>`)
        that overlaps its window the most, where one does."""
        if not eager_executes or not eager_executes.get("node", np.zeros(0)).size:
            return
        order = np.argsort(eager_executes["start_ps"], kind="stable")
        start, end, node = (eager_executes[key][order] for key in ("start_ps", "end_ps", "node"))
        for step in self.steps:
            if step.number is not None or step.whole:
                continue
            # The calls starting in the step, and the few last before it (one may run several steps:
            # steps_per_execution), not every call of the profile for every step.
            low = max(int(np.searchsorted(start, step.start_ps)) - _CALLS_BEFORE, 0)
            high = int(np.searchsorted(start, step.end_ps))
            overlap = np.minimum(end[low:high], step.end_ps) - np.maximum(start[low:high], step.start_ps)
            if overlap.size and overlap.max() > 0:
                step.function = self.strings.values[int(node[low + int(np.argmax(overlap))])].removeprefix("__inference_")

    def _pair_frees(self) -> None:
        """paired[i]: for a free, the allocation it frees (same allocator and addr, latest before); else -1."""
        memory = self.memory
        count = memory["time_ps"].size
        by_address = np.lexsort((np.arange(count), memory["addr"], memory["allocator_name"]))
        same = np.zeros(count, dtype=bool)
        if count > 1:
            same[1:] = ((memory["addr"][by_address[1:]] == memory["addr"][by_address[:-1]])
                        & (memory["allocator_name"][by_address[1:]] == memory["allocator_name"][by_address[:-1]]))
        previous = np.full(count, -1, dtype=np.int64)
        previous[by_address[1:]] = np.where(same[1:], by_address[:-1], -1)
        is_allocation = memory["is_allocation"]
        paired = np.where(~is_allocation & (previous >= 0), previous, -1)
        paired[paired >= 0] = np.where(is_allocation[paired[paired >= 0]], paired[paired >= 0], -1)
        self.paired = paired

    def _name_input_pipeline(self, input_lines: np.ndarray, iterators: dict) -> None:
        """Ops run by tf.data (a `map` function's, Keras slicing each batch out of the dataset) are the
        input pipeline's, named below `(input pipeline)`: one scope, the step's input, apart from the
        model's ops of the same name (`transpose` in both). They run on tf.data's threads, or inline
        in an iterator's work on its caller's thread (a `map` without num_parallel_calls: the events
        `_ITERATOR_EVENT` names), and what is allocated there without an op is `(input pipeline)`."""
        memory, ops, strings = self.memory, self.ops, self.strings
        on_input = self.on_input_thread.copy()
        if iterators and memory["time_ps"].size:
            on_input |= _innermost_on_lines(iterators, memory["time_ps"], memory["line"]) >= 0
        self.in_input_pipeline = on_input
        named = on_input & (memory["tf_op"] >= 0)
        op_rows = input_lines[ops["line"]] if ops and input_lines.size else np.zeros(0, dtype=bool)
        if iterators and ops and ops["start_ps"].size:
            op_rows = op_rows | (_innermost_on_lines(iterators, ops["start_ps"], ops["line"]) >= 0)
        op_codes = ops["node"][op_rows] if op_rows.size else np.zeros(0, dtype=np.int64)
        codes = np.unique(np.concatenate([memory["tf_op"][named], op_codes]))
        codes = codes[codes >= 0]
        if not codes.size:
            return
        renamed = np.arange(int(codes.max()) + 1, dtype=np.int64)
        renamed[codes] = [strings.code(f"{INPUT_PIPELINE}/{strings.values[code]}") for code in codes.tolist()]
        memory["tf_op"][named] = renamed[memory["tf_op"][named]]
        if op_codes.size:
            valid = op_rows & (ops["node"] >= 0)
            ops["node"][valid] = renamed[ops["node"][valid]]

    def _attribute_unnamed(self) -> None:
        """Allocations without a tf_op: the innermost op running on their thread then (a
        thread's events nest: the op started last may have ended, inside one still running)."""
        memory, ops = self.memory, self.ops
        node = memory["tf_op"].copy()
        unnamed = np.flatnonzero(memory["is_allocation"] & (node < 0))
        if unnamed.size and ops:
            at = _innermost_on_lines(ops, memory["time_ps"][unnamed], memory["line"][unnamed])
            # What TensorFlow up to 2.17 wrote no op for inside a function's call (TF 2.12 runs a Keras
            # fit's jit-compiled function in a `StatefulPartitionedCall` event) is not the call's own.
            calls = self.strings.codes_of(_CALL_OP_TYPES)
            if calls:
                found = np.flatnonzero(at >= 0)
                inside_call = memory["null_op"][unnamed[found]] & np.isin(ops["op_type"][at[found]], calls)
                at[found[inside_call]] = -1
            node[unnamed[at >= 0]] = ops["node"][at[at >= 0]]
        node[memory["is_allocation"] & (node < 0) & self.in_input_pipeline] = self.strings.code(INPUT_PIPELINE)
        self.node = node

    def _fill_step_ids(self, processes: dict, input_lines: np.ndarray) -> None:
        """Allocations without a step id (TensorFlow up to 2.17 gives none to XLA's buffers inside a
        Keras `fit(jit_compile=True)` step): the executor step running on their thread then; else,
        on a thread it runs an asynchronous kernel on, the one executor step of training (not
        tf.data's) whose runs, first to last, span them."""
        memory = self.memory
        missing = np.flatnonzero(memory["is_allocation"] & (memory["id"] == 0))
        if not missing.size or not processes:
            return
        at = _innermost_on_lines(processes, memory["time_ps"][missing], memory["line"][missing])
        memory["id"][missing[at >= 0]] = processes["step_id"][at[at >= 0]]
        missing = missing[at < 0]
        training = ~input_lines[processes["line"]]
        if not missing.size or not training.any():
            return
        ids, step = np.unique(processes["step_id"][training], return_inverse=True)
        first = np.full(ids.size, np.iinfo(np.int64).max)
        last = np.full(ids.size, np.iinfo(np.int64).min)
        np.minimum.at(first, step, processes["start_ps"][training])
        np.maximum.at(last, step, processes["end_ps"][training])
        times = memory["time_ps"][missing]  # in time order, as memory is
        low, high = np.searchsorted(times, first, "left"), np.searchsorted(times, last, "right")
        # Spans that cover each allocation: how many, and (where one) which, by running sums.
        count, total = np.zeros(times.size + 1, np.int64), np.zeros(times.size + 1, np.int64)
        np.add.at(count, low, 1)
        np.add.at(count, high, -1)
        np.add.at(total, low, ids)
        np.add.at(total, high, -ids)
        one = np.cumsum(count)[:-1] == 1
        memory["id"][missing[one]] = np.cumsum(total)[:-1][one]  # one span: the sum is its id

    def _program_runs(self, allocations: np.ndarray):
        """(op row, the allocations of `allocations` made on its thread while it ran) for each run of
        an XLA program (op type `XLA program`; up to TensorFlow 2.17, the op of a function that ran as
        one: `function_programs`)."""
        memory, ops = self.memory, self.ops
        program_type = self.strings._code.get(XLA_PROGRAM_OP_TYPE)
        if not ops or (program_type is None and not self.function_programs):
            return
        programs = np.flatnonzero((ops["op_type"] == program_type) | np.isin(ops["node"], sorted(self.function_programs)))
        for line in np.unique(ops["line"][programs]).tolist():
            on_line = allocations[memory["line"][allocations] == line]  # in time order
            time = memory["time_ps"][on_line]
            for row in programs[ops["line"][programs] == line].tolist():
                low = np.searchsorted(time, ops["start_ps"][row], side="left")
                high = np.searchsorted(time, ops["end_ps"][row], side="right")
                yield row, on_line[low:high]

    def _allocating_in_programs(self, function_runs: dict,
                                eager_executes: dict | None = None) -> tuple[frozenset[int], frozenset[int]]:
        """The nodes (tf_op codes) that allocated inside an XLA program running on their thread:
        a tf.function run with jit_compile holds XLA's buffers, an XLA program, not its own op type.
        TensorFlow up to 2.17 runs the program in no event of its own: there a function that
        allocates under its own name (`__inference_train_step_781`) outside any function run by the
        function runtime is one (run without XLA, a function is: `KernelAndDeviceFunc::Run`, and
        may allocate under its name, its ops run inline). Returns those nodes, and those functions."""
        memory = self.memory
        named = np.flatnonzero(memory["is_allocation"] & (memory["tf_op"] >= 0))
        found: set[int] = set()
        for _, inside in self._program_runs(named):
            found.update(memory["tf_op"][inside].tolist())
        in_programs = set(found)
        values = self.strings.values
        for code in np.unique(memory["tf_op"][named]).tolist():
            if code in found or not _TF_FUNCTION_RE.match(values[code]):
                continue
            rows = named[memory["tf_op"][named] == code]
            if not function_runs or (_innermost_on_lines(function_runs, memory["time_ps"][rows],
                                                         memory["line"][rows]) < 0).all():
                if not _runtime_ran(code, rows, memory, function_runs, eager_executes):
                    found.add(code)
        return frozenset(found), frozenset(found - in_programs)

    def _split_programs(self, programs: hlo.Programs) -> dict[int, list[tuple[int, int, int, int]]]:
        """Each block an XLA program's run allocated, as the ops' values it holds (hlo.py): allocation
        event -> [(node code, allocated bytes, requested bytes, program code)], the program's own
        share last (bytes XLA placed no op's value in, and the allocator's rounding). Runs whose
        allocations are not blocks of one compiled module stay whole."""
        memory, ops = self.memory, self.ops
        split: dict[int, list[tuple[int, int, int, int]]] = {}
        xla_nodes = np.array(sorted(self.xla_nodes), dtype=np.int64)
        for row, inside in self._program_runs(np.flatnonzero(memory["is_allocation"])):
            program = int(ops["node"][row])
            inside = inside[(self.node[inside] == program) | np.isin(self.node[inside], xla_nodes)]
            if inside.size == 0:
                continue
            name = self._text(program)
            tensorflow = name == TF_XLA_PROGRAM or program in self.function_programs
            functions = ([name] if program in self.function_programs
                         else [self._text(code) for code in np.unique(self.node[inside]).tolist() if code != program])
            # TensorFlow's modules are looked up by the function they were compiled from; JAX's by name.
            asked = (None if tensorflow else name, memory["requested_bytes"][inside].tolist(),
                     functions[0] if len(functions) == 1 else None)
            blocks = programs.blocks(*asked)
            if blocks is None:
                continue
            self.program_runs.append((int(ops["start_ps"][row]), int(memory["allocation_bytes"][inside].sum()),
                                      programs.shapes(*asked)))
            for event, block in zip(inside.tolist(), blocks):
                # The block stays its allocation's node's (the program, or the jitted function's op).
                pieces = self._pieces(event, block, int(self.node[event]), tensorflow)
                if pieces:
                    split[event] = pieces
        return split

    def _pieces(self, event: int, block: hlo.Block, program: int, tensorflow: bool
                ) -> list[tuple[int, int, int, int]]:
        """One block's pieces as `_split_programs` gives them; none where they cannot add up to
        the event's bytes (a profile without the allocator's own size)."""
        allocated = int(self.memory["allocation_bytes"][event])
        requested = int(self.memory["requested_bytes"][event])
        if allocated < requested:
            return []
        if block.updated_argument and not tensorflow:  # a JAX argument's new value (TensorFlow's: in place)
            named = [(f"{UPDATED_ARGUMENTS}/{block.updated_argument}", block.size)]
        else:
            named = [(hlo.node_name(piece.op_name, tensorflow), piece.bytes) for piece in block.pieces]
        named = [(name, size) for name, size in named if name]
        if block.unused:  # shown as such, below the program
            named.append((f"{self._text(program)}/{UNUSED_SCRATCH}", block.unused))
        placed = sum(size for _, size in named)
        if not named or placed > requested:
            return []
        pieces = [[self.strings.code(name), size, size, program] for name, size in named]
        if not tensorflow:
            self.jax_pieces.update(piece[0] for piece in pieces)
        if block.is_output and placed == requested:  # the value asked for it all: its rounding too
            pieces[0][1] += allocated - requested
        own = allocated - sum(piece[1] for piece in pieces)
        pieces.append([program, own, requested - placed, program])  # last: the op running at that moment
        return [tuple(piece) for piece in pieces]

    def _find_steps(self, processes: dict, markers: dict, function_runs: dict) -> list[ProfileStep]:
        memory = self.memory
        allocation_step = np.where(memory["is_allocation"], memory["id"], 0)
        ids = np.unique(allocation_step[allocation_step != 0])
        if processes:
            ids = ids[np.isin(ids, processes["step_id"])]
        marked = _MarkedSteps(markers)
        marker_start, marker_end = np.array(marked.start_ps, np.int64), np.array(marked.end_ps, np.int64)
        steps = []
        for step_id in ids.tolist():
            times = memory["time_ps"][allocation_step == step_id]
            start, end = int(times.min()), int(times.max())
            if processes:
                runs = processes["step_id"] == step_id
                if runs.any():
                    start = min(start, int(processes["start_ps"][runs].min()))
                    end = max(end, int(processes["end_ps"][runs].max()))
            crossed = (marker_start < end) & (marker_end > start) & ~((marker_start <= start) & (end <= marker_end))
            if np.count_nonzero(crossed) > 1:
                # Its allocations all in one of the marked steps it runs across, a run of it past
                # that step's end (one of its processes still running on a loaded machine when the
                # next batch began) is cut at that step's bounds: the step is that one's.
                holding = np.flatnonzero(crossed & (marker_start <= times.min()) & (times.max() <= marker_end))
                if holding.size == 0:
                    continue  # across marked steps (eager ops' executor, run by several): none of them, even in an outer one
                inner = holding[np.argmin(marker_end[holding] - marker_start[holding])]
                start, end = max(start, int(marker_start[inner])), min(end, int(marker_end[inner]))
            group = marked.around(start)
            if group is not None:  # the marked step is all of its marker: eager work around a function too
                start, end = min(start, int(marker_start[group])), max(end, int(marker_end[group]))
            steps.append(ProfileStep(step_id, marked.number[group] if group is not None else None, start, end, [],
                                     marked=group))
        # Marked steps no executor step ran in (JAX, Keras 3 on JAX; or beside TensorFlow's).
        steps += self._marked_steps(marked, steps)
        if not steps and memory["time_ps"].size:  # no step ids, no marked step: the whole profile is one step
            steps.append(ProfileStep(0, None, int(memory["time_ps"][0]), int(memory["time_ps"][-1]), [], whole=True))
        steps.sort(key=lambda s: (s.start_ps, -s.end_ps, s.step_id))
        steps = _merge_numbered(steps)
        if processes:
            steps = _without_background(steps, self._input_only, self._allocated_by)
        # An executor step outside any marked step that spans marked ones (tf.data's, run
        # across epochs) is none of them: the marked steps stand.
        marked_spans = [(s.start_ps, s.end_ps) for s in steps if s.marked is not None]
        steps = [s for s in steps if s.marked is not None
                 or not any(s.start_ps <= start and end <= s.end_ps for start, end in marked_spans)]
        # tf.data's executor alone (its functions slicing the next batch between two training steps,
        # as an older Keras fit's profile shows) is no step where there are others; left out before
        # the steps inside others are, as on a loaded machine its window can hold a whole step (a
        # predict's first batch had been lost inside the iterator's run, in a test run under load).
        input_only = [s.marked is None and self._input_only(s) for s in steps]
        if not all(input_only):
            steps = [s for s, only in zip(steps, input_only) if not only]
        # A step run inside another one's window (Keras slicing a batch in a tf.function of its
        # own) is part of that step: its events are in the window already.
        outer_end = np.maximum.accumulate([s.end_ps for s in steps]) if steps else []
        steps = [s for i, s in enumerate(steps) if i == 0 or s.end_ps > outer_end[i - 1]]
        steps = self._uncut(steps, function_runs)
        for step in steps:
            low, high = self._window(step)
            allocators = np.unique(memory["allocator_name"][low:high])
            step.devices = sorted({_device_of(self._text(a))[0] for a in allocators.tolist()})
        return steps

    def _uncut(self, steps: list[ProfileStep], function_runs: dict) -> list[ProfileStep]:
        """The steps less those the capture cut, at its start or its end, where others are whole.

        A profile taken from a running program (a profiler server's client.trace) starts inside one
        step and stops inside another. An event is recorded where the capture saw it begin and end,
        so such a step's function run (`KernelAndDeviceFunc::Run`) is not in the profile, while the
        whole steps' are: the first (or last) unmarked step, where it overlaps no function run and every
        function's step between them overlaps one, is cut (a profile
        that also holds steps of no function, a tf.compat.v1 session's, cuts none). Its window holds part of
        its work: its activations read as the start, its peak may have come before the capture (a
        71.5 KiB rise of Adam's was shown for a step whose peak rise is 83 MiB). Where no whole step
        is left, the steps stay as they are."""
        times = self.memory["time_ps"]
        if len(steps) < 2 or not function_runs or not times.size:
            return steps
        run_start, run_end = function_runs["start_ps"], function_runs["end_ps"]

        def overlaps_a_run(step: ProfileStep) -> bool:
            return bool(((run_start < step.end_ps) & (run_end > step.start_ps)).any())

        first, last = min(steps, key=lambda s: s.start_ps), max(steps, key=lambda s: s.end_ps)
        # The eager executor's work (no step id) between the functions is no function's step: it is not asked to
        # overlap a run (on a loaded machine its window between predict and evaluate held none).
        between = [step for step in steps if step is not first and step is not last and step.step_id != _NO_STEP_ID]
        if not all(map(overlaps_a_run, between)) or not any(map(overlaps_a_run, steps)):
            return steps  # steps of no function beside them (a session's, eager work): nothing to tell by
        # The first and the last step, where no function run overlaps them: the capture began or stopped inside
        # them (not asked to hold its first or last memory event: on a loaded machine the eager executor
        # allocated after the last step's cut window, as a CI run's capture showed).
        cut = {id(step) for step in (first, last) if step.marked is None and not overlaps_a_run(step)}
        kept = [step for step in steps if id(step) not in cut]
        return kept or steps

    def _marked_steps(self, marked: "_MarkedSteps", executor_steps: list[ProfileStep]) -> list[ProfileStep]:
        """Steps the profiler was told of (`jax.profiler.StepTraceAnnotation("train", step_num=n)`,
        Keras' `Profiled batch <n>`) that hold memory events and overlap no executor step:
        without executor step ids (JAX, Keras 3 on JAX) these are the steps."""
        times = self.memory["time_ps"]
        ran = np.array([(s.start_ps, s.end_ps) for s in executor_steps], dtype=np.int64).reshape(-1, 2)
        ran_in = {s.marked for s in executor_steps}
        steps = []
        for group, (number, start, end) in enumerate(zip(marked.number, marked.start_ps, marked.end_ps)):
            if np.searchsorted(times, start, "left") == np.searchsorted(times, end, "right"):
                continue  # no memory event in it
            if group in ran_in or ((ran[:, 0] < end) & (ran[:, 1] > start)).any():
                continue  # an executor step ran in it: that step is it
            steps.append(ProfileStep(0, number, start, end, [], marked=group))
        return steps

    def _allocated_by(self, step_ids: list[int]) -> int:
        """Bytes the executor steps `step_ids` allocated (their own allocation events)."""
        memory = self.memory
        mine = memory["is_allocation"] & np.isin(memory["id"], step_ids)
        return int(memory["allocation_bytes"][mine].sum())

    def _input_only(self, step: ProfileStep) -> bool:
        """Whether every allocation of the step's own executor steps (else, of its window) was tf.data's:
        made on one of its threads, or in its work on the caller's (`in_input_pipeline`). tf.data slicing
        the next batch whose run overlaps a training step's window, ending a little after it, is no step
        of its own (where it ran inside the window it was already part of that step), nor is a run that
        only set up an iterator (13.5 KiB of a dataset's `range`, listed first in a capture). An epoch's
        end, its validation beside the next epoch's iterator, allocates for the model too: it stays."""
        low, high = self._window(step)
        allocating = self.memory["is_allocation"][low:high]
        own = allocating & np.isin(self.memory["id"][low:high], [i for i in step.step_ids if i != 0])
        if own.any():
            allocating = own
        tf_data = self.on_input_thread[low:high] | self.in_input_pipeline[low:high]
        return bool(allocating.any() and tf_data[allocating].all())

    def _window(self, step: ProfileStep) -> tuple[int, int]:
        times = self.memory["time_ps"]
        return int(np.searchsorted(times, step.start_ps, "left")), int(np.searchsorted(times, step.end_ps, "right"))

    def _text(self, code: int) -> str:
        return self.strings.values[code] if code >= 0 else "(unknown)"

    # -- one step -> Trace ---------------------------------------------------------------------

    def trace(self, step: ProfileStep) -> Trace:
        memory, strings = self.memory, self.strings
        low, high = self._window(step)
        window = np.arange(low, high)
        paired = self.paired[window]
        # Who owns each event: its allocation's op (for a free, the allocation it frees).
        owner_event = np.where(memory["is_allocation"][window], window, paired)
        before = owner_event < low  # a free of bytes allocated before the window (or before the profile)
        unattributed = strings.code(UNATTRIBUTED)
        before_code = strings.code(BEFORE_STEP)
        node = np.where(before, before_code, self.node[np.maximum(owner_event, 0)])
        node = np.where(node < 0, unattributed, node)
        main = self._main_allocator(window)  # by the profile's own events, not the pieces split from them
        rows = _Rows(window, node, memory["allocation_bytes"][window], memory["requested_bytes"][window],
                     np.where(memory["is_allocation"][window], memory["shape"][window], -1))
        if self.split:  # a free of bytes from before the window stays `(before this step)`'s
            rows = self._expanded(rows, np.where(before, -1, owner_event))
        ops = self.ops
        in_window = np.zeros(0, dtype=np.int64)
        if ops:
            in_window = np.flatnonzero((ops["start_ps"] >= step.start_ps) & (ops["start_ps"] <= step.end_ps))
        allocators = memory["allocator_name"][rows.event]
        spaces = []
        op_types: dict[str, str] = {}
        layers: dict[str, str] = {}
        devices = []
        looped = False
        for allocator in np.unique(allocators).tolist():
            space, space_op_types, space_layers, space_looped = self._space(
                step, rows.take(np.flatnonzero(allocators == allocator)), in_window, self._text(allocator),
                self._text(main))
            looped |= space_looped
            spaces.append(space)
            op_types.update(space_op_types)
            layers.update(space_layers)
            if space.device not in devices:
                devices.append(space.device)
        start_ns = self.profile_start_ns + step.start_ps // 1000
        return Trace(
            spaces=spaces,
            devices=devices,
            step_start_us=start_ns // 1000,
            duration_us=(step.end_ps - step.start_ps) // 1_000_000,
            node_stat_count=sum(space.exec_count for space in spaces),
            op_types=op_types,
            layers=layers,
            source="xplane",
            program_shapes=self._program_shapes(step),
            note=" ".join(note for note in (
                MKLCPU_NOTE if any(s.allocator == MKLCPU for s in spaces)
                and not any(s.memory_kind == DEVICE_MEMORY for s in spaces) else None,
                STEPS_PER_EXECUTION_NOTE if looped else None) if note) or None,
        )

    def _program_shapes(self, step: ProfileStep) -> ProgramShapes | None:
        """The shapes of the program run in the step that allocated the most (a train step's, not
        its helpers')."""
        runs = [(size, shapes) for start, size, shapes in self.program_runs if step.start_ps <= start <= step.end_ps]
        return max(runs, key=lambda run: run[0])[1] if runs else None

    def _expanded(self, rows: "_Rows", owner_event: np.ndarray) -> "_Rows":
        """The rows with each split program block as its pieces (`_split_programs`): one row per
        piece at the block's time, a free as its allocation's pieces; `owner_event[i]`: the
        allocation row i's bytes are (-1: one from before the window, which stays whole)."""
        split, sizes = self.split, self.memory["allocation_bytes"]
        expand = [i for i, owner in enumerate(owner_event.tolist())
                  if owner in split and sizes[rows.event[i]] == sizes[owner]]
        if not expand:
            return rows
        counts = np.ones(rows.event.size, dtype=np.int64)
        for i in expand:
            counts[i] = len(split[int(owner_event[i])])
        out = rows.take(np.repeat(np.arange(rows.event.size), counts))
        last = np.cumsum(counts) - 1
        for i in expand:
            pieces = split[int(owner_event[i])]
            for k, (code, allocated, asked, program) in enumerate(pieces):
                j = last[i] - len(pieces) + 1 + k
                out.node[j], out.size[j], out.requested[j], out.shape[j] = code, allocated, asked, -1
                out.program[j] = program if code != program else -1
                out.reading[j] = k == len(pieces) - 1  # the event's allocator reading, once
        return out

    def _space(self, step: ProfileStep, rows: "_Rows", ops_in_window: np.ndarray, allocator: str,
               main_allocator: str) -> tuple[SpaceTrace, dict[str, str], dict[str, str], bool]:
        """(the space, op types and layers its source knows, whether Keras' steps_per_execution loop ran in it)."""
        memory, strings, ops = self.memory, self.strings, self.ops
        events, node, size, requested, shape = rows.event, rows.node, rows.size, rows.requested, rows.shape
        # Executions: the distinct ops holding events, then the other ops run in the window.
        op_rows = ops_in_window
        if op_rows.size and allocator != main_allocator:
            op_rows = op_rows[np.isin(ops["node"][op_rows], node)]  # a secondary allocator lists only its own ops
        op_nodes = ops["node"][op_rows] if op_rows.size else np.zeros(0, dtype=np.int64)
        # One execution per node, and per program for a piece: an op's name that two programs' HLO
        # place values of is two executions (each program's bytes stay its own).
        width = len(strings.values) + 1
        keys, exec_of = np.unique(np.concatenate([node.astype(np.int64) * width + rows.program + 1,
                                                  op_nodes.astype(np.int64) * width]), return_inverse=True)
        nodes, exec_program = keys // width, keys % width - 1
        exec_of = exec_of.reshape(-1)
        event_exec, op_exec = exec_of[:node.size], exec_of[node.size:]
        count = nodes.size
        to_us = 1_000_000
        time_us = (memory["time_ps"][events] - step.start_ps) // to_us
        is_allocation = memory["is_allocation"][events]
        event_bytes = np.where(is_allocation, size, -size)
        # Start and end: the op's events (kernel runs) when it has some, else its allocations: an op
        # the profiler traces no event of (an inexpensive one, run inline: a loop body's `split`,
        # `mul`) ran when it allocated; its bytes freed later are freed by the ops that used them
        # (a forward loop's values kept for the backward pass had read as the op's temporaries at
        # a peak in the backward loop). Frees alone (bytes allocated before the step): those.
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        start, end = np.full(count, big, dtype=np.int64), np.full(count, small, dtype=np.int64)
        np.minimum.at(start, op_exec, (ops["start_ps"][op_rows] - step.start_ps) // to_us if op_rows.size else op_rows)
        np.maximum.at(end, op_exec, (ops["end_ps"][op_rows] - step.start_ps) // to_us if op_rows.size else op_rows)
        event_start, event_end = np.full(count, big, dtype=np.int64), np.full(count, small, dtype=np.int64)
        made = np.flatnonzero(is_allocation)
        np.minimum.at(event_start, event_exec[made], time_us[made])
        np.maximum.at(event_end, event_exec[made], time_us[made])
        freed_only = event_start == big
        if freed_only.any():
            np.minimum.at(event_start, event_exec, np.where(freed_only[event_exec], time_us, big))
            np.maximum.at(event_end, event_exec, np.where(freed_only[event_exec], time_us, small))
        has_op = start != big
        start = np.where(has_op, start, event_start)
        end = np.where(has_op, end, event_end)
        # A node run more than once (a loop body's op, once per iteration) is one execution: its runs
        # are kept, so that what is in progress at the peak is one run, not all of them.
        runs = None
        if op_rows.size and np.bincount(op_exec, minlength=count).max() > 1:
            runs = (op_exec.astype(np.int64), (ops["start_ps"][op_rows] - step.start_ps) // to_us,
                    (ops["end_ps"][op_rows] - step.start_ps) // to_us)
        pieces = np.flatnonzero(rows.program >= 0)
        if pieces.size:  # a program's pieces run when it does (what it frees then is its scratch)
            piece_exec = event_exec[pieces]
            # The program's own node: each split event has its own piece's row (0 B too).
            owner_exec = np.searchsorted(keys, rows.program[pieces] * width)
            run_start, run_end = np.full(count, big, dtype=np.int64), np.full(count, small, dtype=np.int64)
            np.minimum.at(run_start, piece_exec, start[owner_exec])
            np.maximum.at(run_end, piece_exec, end[owner_exec])
            ran = run_start != big
            start, end = np.where(ran, run_start, start), np.where(ran, run_end, end)
        region = memory["region_type"][events]
        allocations = np.flatnonzero(is_allocation)
        is_temp = is_allocation & np.isin(region, self._codes_of("temp"))
        is_output = is_allocation & np.isin(region, self._codes_of("output"))
        is_persistent = is_allocation & np.isin(region, self._codes_of("persist", "persistent"))
        live_mask = time_us <= end[event_exec]
        columns = {
            "allocated": scatter_sum(event_exec[allocations], size[allocations], count),
            "op_peak": _own_peaks(event_exec, event_bytes, count),
            "live": scatter_sum(event_exec[live_mask], event_bytes[live_mask], count),
            "output": scatter_sum(event_exec[is_output], requested[is_output], count),
            "temp": scatter_sum(event_exec[is_temp], size[is_temp], count),
            "persistent": scatter_sum(event_exec[is_persistent], size[is_persistent], count),
        }
        raw_names = [strings.values[code] for code in nodes.tolist()]
        # Keras' renumbered TensorFlow scopes are cleaned; a JAX program's pieces are named already
        # (`block_0/...` is the user's own scope, not a second build's).
        verbatim = [code in self.jax_pieces for code in nodes.tolist()]
        cleaned_all = names_mod.clean_all([raw for raw, keep in zip(raw_names, verbatim) if not keep])
        kept = iter(cleaned_all)
        parsed = [(raw, None) if keep else next(kept) for raw, keep in zip(raw_names, verbatim)]
        cleaned = [name for name, _ in parsed]
        layers = {name: layer for name, layer in parsed if layer}
        distinct, name_code = np.unique(np.array(cleaned, dtype=object), return_inverse=True) if cleaned else (
            np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64))
        distinct_names = [str(name) for name in distinct.tolist()]
        label_of: dict[str, str] = {}
        for raw, name in zip(raw_names, cleaned):
            if raw != name:
                label_of.setdefault(name, raw)
        op_types, kernels = self._op_types(nodes, cleaned, op_rows, frozenset(nodes[event_exec[pieces]].tolist()))
        for name, kernel in kernels.items():  # the kernel that ran, as a step's label names it (findings judge it)
            label_of[name] = f"{label_of.get(name, name)} = {kernel}()"
        program_codes, exec_program = np.unique(exec_program, return_inverse=True)
        program_names = [self._text(code) if code >= 0 else "" for code in program_codes.tolist()]
        exec_program = np.where(program_codes[exec_program.reshape(-1)] >= 0, exec_program.reshape(-1), -1)
        # The names whose every allocation was made on tf.data's threads, and those named the input pipeline's
        # (a `map` function's op, whatever thread ran it: a loaded machine runs some inline, and one of them
        # had read as an activation; or one that allocates nothing in this step, only frees): the step's input.
        allocating = name_code.reshape(-1)[event_exec[allocations]]
        on_input = self.in_input_pipeline[events[allocations]]
        made = np.bincount(allocating, minlength=len(distinct_names))
        made_on_input = np.bincount(allocating[on_input], minlength=len(distinct_names))
        named_input = np.fromiter((name == INPUT_PIPELINE or name.startswith(INPUT_PIPELINE + "/") for name in distinct_names),
                                  dtype=bool, count=len(distinct_names))
        input_names = [distinct_names[i] for i in np.flatnonzero(
            ((made_on_input > 0) & (made_on_input == made)) | named_input).tolist()]
        # What a thread allocated running no op (TensorFlow 2.18 on writes no `(null)` op): a tensor made from
        # Python, as an eager step's input converted from numpy (trial AH: a [32, 800, 32] batch had read as
        # 5.2 MiB of activations). Up to 2.17 `(no op)` also holds an XLA program's buffers written `(null)`:
        # those stay as they are, said by the step's note.
        null_op = bool((memory["null_op"][events] & (node == strings.code(UNATTRIBUTED))).any())
        # (Not in pinned host memory: JAX's and TensorFlow's device-to-host readbacks, a loss's 4 bytes, are there.)
        if UNATTRIBUTED in distinct_names and not null_op and "host" not in allocator:
            input_names.append(UNATTRIBUTED)
        device, device_type, index = _device_of(allocator)
        read = events[rows.reading]  # the allocator's readings: one per profile event, not per piece
        series = {
            "reserved_bytes": memory["bytes_reserved"][read],
            "fragmentation": memory["fragmentation"][read],
        }
        capacity = memory["bytes_allocated"][read] + memory["bytes_available"][read] + memory["bytes_reserved"][read]
        space = SpaceTrace(
            id=f"{device_type}:{index}/{allocator}",
            device=device,
            device_type=device_type,
            allocator=allocator,
            label_of=label_of,
            distinct_names=distinct_names,
            name_code=name_code.reshape(-1).astype(np.int64),
            start_us=start,
            end_us=end,
            event_time_us=time_us,
            event_bytes=event_bytes,
            event_exec=event_exec.astype(np.int64),
            snapshot_time_us=time_us[rows.reading],
            snapshot_bytes=memory["bytes_allocated"][read],
            snapshot_event=np.flatnonzero(rows.reading),
            snapshot_series=series,
            capacity_bytes=int(capacity.max()) if capacity.size and int(capacity.max()) > 0 else None,
            outputs_of=_Outputs(strings.values, distinct_names, name_code.reshape(-1), start, event_exec,
                                shape, requested),
            input_names=frozenset(input_names),
            xla_program_names=program_names,
            xla_program_exec=exec_program.astype(np.int64),
            unattributed_null=null_op,
            piece_rows=int(rows.reading.size - np.count_nonzero(rows.reading)),
            runs=runs,
            **columns,
        )
        looped = any(map(names_mod.in_keras_steps_loop, {raw for raw in raw_names if raw.startswith("while")}))
        return space, op_types, layers, looped

    def _main_allocator(self, events: np.ndarray) -> int:
        allocators = self.memory["allocator_name"][events]
        values, counts = np.unique(allocators, return_counts=True)
        return int(values[np.argmax(counts)]) if values.size else -1

    def _codes_of(self, *texts: str) -> list[int]:
        return [self.strings._code[t] for t in texts if t in self.strings._code]

    def _op_types(self, nodes: np.ndarray, cleaned: list[str], ops_in_window: np.ndarray,
                  piece_nodes: frozenset[int]) -> tuple[dict[str, str], dict[str, str]]:
        """(op type by name, as a graph names it; the kernel by name, where it is not that op type:
        oneDNN's `_MklMatMul` is `MatMul`, as for a step's labels, names.graph_op_type)."""
        op_types = {BEFORE_STEP: BEFORE_STEP_OP_TYPE}
        kernels: dict[str, str] = {}
        type_of = dict(zip(self.ops["node"][ops_in_window].tolist(), self.ops["op_type"][ops_in_window].tolist())
                       ) if self.ops and ops_in_window.size else {}
        for code, name in zip(nodes.tolist(), cleaned):
            if code in self.xla_nodes or code in piece_nodes:
                op_types.setdefault(name, XLA_PROGRAM_OP_TYPE)
                continue
            op_type = type_of.get(code)
            if op_type is not None and name not in op_types:
                kernel = self.strings.values[op_type]
                op_types[name] = graph_op_type(kernel)
                if op_types[name] != kernel:
                    kernels[name] = kernel
            elif _EAGER_OP_RE.match(name):  # an eager op, which TensorFlow names by its op type
                op_types.setdefault(name, name)
            elif name in (INPUT_PIPELINE, UNATTRIBUTED):  # allocations in no op: no op's type (a type
                # "(unknown)" would send the reader after host_tracer_level=3, which names no such op)
                op_types.setdefault(name, name)
        return op_types, kernels


_SHAPE_RE = re.compile(r"^\[(?P<dims>\d+(?:,\d+)*)?\]$")


def parse_shape(text: str) -> tuple[int, ...] | None:
    """`[32,28,28,1]` -> (32, 28, 28, 1); `[]` -> () (a scalar); None for anything else (an
    unknown dimension, a shape TensorFlow did not know when it allocated)."""
    match = _SHAPE_RE.match(text.replace(" ", ""))
    if match is None:
        return None
    dims = match.group("dims")
    return tuple(int(d) for d in dims.split(",")) if dims else ()


class _Outputs:
    """`SpaceTrace.outputs_of` of one space: for each runtime name, the (shape, requested bytes) of
    every allocation of its first execution (the earliest to start) that carries a shape, in time
    order. Those are its outputs and also its scratch (`region_type` temp), which profiles shape too:
    the what-if then tells a batch-shaped buffer from a fixed-size one (a convolution's capped
    im2col buffer). Built on the first question, from columns the space already holds."""

    def __init__(self, strings: list[str], distinct_names: list[str], name_code: np.ndarray, start_us: np.ndarray,
                 event_exec: np.ndarray, shape_code: np.ndarray, requested: np.ndarray) -> None:
        self._strings, self._distinct_names = strings, distinct_names
        self._name_code, self._start_us = name_code, start_us
        self._event_exec, self._shape_code, self._requested = event_exec, shape_code, requested
        self._by_name: dict[str, list[tuple[tuple[int, ...], int]]] | None = None

    def __call__(self, names: list[str]) -> list[list[tuple[tuple[int, ...], int]]]:
        if self._by_name is None:
            self._by_name = self._build()
        return [list(self._by_name.get(name, ())) for name in names]

    def _build(self) -> dict[str, list[tuple[tuple[int, ...], int]]]:
        count = self._name_code.size
        is_first = np.zeros(count, dtype=bool)
        if count:
            order = np.lexsort((np.arange(count), self._start_us, self._name_code))
            codes = self._name_code[order]
            is_first[order[np.r_[True, codes[1:] != codes[:-1]]]] = True
        shaped = np.flatnonzero(self._shape_code >= 0)
        shaped = shaped[is_first[self._event_exec[shaped]]]
        parsed: dict[int, tuple[int, ...] | None] = {}
        by_name: dict[str, list[tuple[tuple[int, ...], int]]] = {}
        for execution, code, size in zip(self._event_exec[shaped].tolist(), self._shape_code[shaped].tolist(),
                                         self._requested[shaped].tolist()):
            if code not in parsed:
                parsed[code] = parse_shape(self._strings[code])
            shape = parsed[code]
            if shape is not None:
                by_name.setdefault(self._distinct_names[self._name_code[execution]], []).append((shape, size))
        return by_name


def _own_peaks(event_exec: np.ndarray, event_bytes: np.ndarray, count: int) -> np.ndarray:
    """Per execution, the high-water mark of its own events' running total (time order)."""
    peaks = np.zeros(count, dtype=np.int64)
    if event_exec.size == 0:
        return peaks
    order = np.argsort(event_exec, kind="stable")  # events are in time order already
    grouped = event_exec[order]
    running = np.cumsum(event_bytes[order])
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    before = np.where(starts > 0, running[starts - 1], 0)
    within = running - np.repeat(before, np.diff(np.r_[starts, grouped.size]))
    peaks[grouped[starts]] = np.maximum(np.maximum.reduceat(within, starts), 0)
    return peaks


# The executor step id TensorFlow gives work run outside any function's step: eager ops' executors on
# the calling thread (line 0 in every profile seen with it: Keras 3's `predict` and `evaluate`).
_NO_STEP_ID = -1


def _without_background(steps: list[ProfileStep], input_only: Callable[[ProfileStep], bool],
                        allocated_by: Callable[[list[int]], int]) -> list[ProfileStep]:
    """The steps less the eager work around them (`_NO_STEP_ID`), where its window holds other
    steps that are not tf.data's alone (`input_only`) and they allocate more than it does
    (`allocated_by`): its runs spread from the profile's start to its end between the functions'
    (a profiled `predict` then `evaluate`), so its window held every function's step, and each was
    read as part of it. Eager work that allocates more than the functions it holds (an eager
    training loop calling a small `tf.function`) stays the step it was. Marked steps are left as
    they are (markers place each executor step already). A function's own step that holds another
    (Keras 2 calling a function of its own) has an id of its own, and keeps what it holds.
    """
    background = [s for s in steps if s.step_id == _NO_STEP_ID and s.marked is None]
    if not background:
        return steps
    held_steps = [s for s in steps if s.step_id != _NO_STEP_ID and not input_only(s)]  # asked only here
    dropped = set()
    for eager in background:
        held = [s for s in held_steps if eager.start_ps <= s.start_ps and s.end_ps <= eager.end_ps]
        if held and allocated_by([i for s in held for i in s.step_ids]) >= allocated_by([_NO_STEP_ID]):
            dropped.add(id(eager))
    kept = [s for s in steps if id(s) not in dropped]
    return kept if kept else steps


def _merge_numbered(steps: list[ProfileStep]) -> list[ProfileStep]:
    """Executor steps in one marked step are one profiled step (a busy machine can start
    Keras' small helper functions outside the batch's own executor window); the longest
    one names it. `steps` is sorted by start."""
    merged: list[ProfileStep] = []
    by_marked: dict[int, ProfileStep] = {}
    for step in steps:
        into = by_marked.get(step.marked) if step.marked is not None else None
        if into is None:
            merged.append(step)
            if step.marked is not None:
                by_marked[step.marked] = step
            continue
        if step.end_ps - step.start_ps > into.end_ps - into.start_ps:
            into.step_id = step.step_id
        into.step_ids = sorted({*into.step_ids, step.step_id}, key=lambda i: (i != into.step_id, i))
        into.start_ps, into.end_ps = min(into.start_ps, step.start_ps), max(into.end_ps, step.end_ps)
    return merged


def _runtime_ran(code: int, rows: np.ndarray, memory: dict, function_runs: dict, eager_executes: dict | None) -> bool:
    """Whether TensorFlow's function runtime ran a function in the eager calls of it that its allocations (`rows`)
    were made in: a `KernelAndDeviceFunc::Run` inside such a call. TensorFlow 2.21 instantiates a function on its
    first call, inside that call but before its run, allocating under the function's name (trial AB's first
    `train_on_batch`: 1,174 allocations read as an XLA program of 0 B at the peak); a program XLA compiled (up to
    TensorFlow 2.17) runs in no such run."""
    if not function_runs or not eager_executes or not eager_executes.get("node", np.zeros(0)).size:
        return False
    calls = np.flatnonzero(eager_executes["node"] == code)
    if not calls.size:
        return False
    call = _innermost_on_lines({key: values[calls] for key, values in eager_executes.items()},
                               memory["time_ps"][rows], memory["line"][rows])
    for row in np.unique(call[call >= 0]).tolist():
        index = calls[row]
        line, start, end = (int(eager_executes[key][index]) for key in ("line", "start_ps", "end_ps"))
        if ((function_runs["line"] == line) & (function_runs["start_ps"] >= start)
                & (function_runs["start_ps"] <= end)).any():
            return True
    return False


def _innermost_on_lines(events: dict, times: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """For each time on its line: the innermost of `events` (start_ps, end_ps, line) running on that
    line then, as a row of `events` (-1: none). A thread's events nest: the one started last may
    have ended, inside one still running."""
    out = np.full(times.size, -1, dtype=np.int64)
    for line in np.unique(lines).tolist():
        rows = np.flatnonzero(lines == line)
        on_line = np.flatnonzero(events["line"] == line)
        if not on_line.size:
            continue
        start, end = events["start_ps"][on_line], events["end_ps"][on_line]
        order = np.lexsort((-end, start))  # by start; at one start, the outer first
        on_line, start, end = on_line[order], start[order], end[order]
        time = times[rows]
        at = np.searchsorted(start, time, side="right") - 1  # the event started last by then
        ended = np.flatnonzero(at >= 0)
        ended = ended[end[at[ended]] < time[ended]]
        if ended.size:  # up to the events around it, until one still runs
            at[ended] = _innermost_around(start, end, time[ended])
        found = at >= 0
        out[rows[found]] = on_line[at[found]]
    return out


def _innermost_around(start: np.ndarray, end: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For one thread's events sorted by start (the outer first at one start): the innermost
    event around each time (-1: none). Only events around some time can be it: those are
    kept (a thread may hold a million ops), then each time climbs from the event started
    last by then through the events around that one."""
    ordered = np.sort(times)
    around_some = np.searchsorted(ordered, end, "right") > np.searchsorted(ordered, start, "left")
    kept = np.flatnonzero(around_some)
    out = np.full(times.size, -1, dtype=np.int64)
    if not kept.size:
        return out
    kept_start, kept_end = start[kept], end[kept]
    at = np.searchsorted(kept_start, times, side="right") - 1
    parent = _enclosing(kept_end)
    climbing = np.flatnonzero(at >= 0)
    climbing = climbing[kept_end[at[climbing]] < times[climbing]]
    while climbing.size:
        at[climbing] = parent[at[climbing]]
        climbing = climbing[at[climbing] >= 0]
        climbing = climbing[kept_end[at[climbing]] < times[climbing]]
    found = at >= 0
    out[found] = kept[at[found]]
    return out


def _enclosing(end: np.ndarray) -> np.ndarray:
    """For one thread's events sorted by start (the outer first at one start), ending at `end`:
    the innermost earlier event around each (the nearest earlier one ending no sooner), -1 for
    none. Pointer jumping: each pointer skips what its target skipped, all at once."""
    parent = np.arange(end.size) - 1
    todo = np.arange(1, end.size)
    todo = todo[end[parent[todo]] < end[todo]]
    for _ in range(_JUMP_ROUNDS):
        if not todo.size:
            return parent
        parent[todo] = parent[parent[todo]]
        todo = todo[parent[todo] >= 0]
        todo = todo[end[parent[todo]] < end[todo]]
    if not todo.size:
        return parent
    # Nesting this deep (a long chain of spans inside spans): the plain stack, one pass.
    stack: list[int] = []
    ends = end.tolist()
    out = [-1] * len(ends)
    for i, value in enumerate(ends):
        while stack and ends[stack[-1]] < value:
            stack.pop()
        out[i] = stack[-1] if stack else -1
        stack.append(i)
    return np.array(out, dtype=np.int64)


_JUMP_ROUNDS = 64  # pointer-jumping rounds before _enclosing takes the sequential stack


class _MarkedSteps:
    """The steps the profiler was told of: marker events (Keras' `Profiled batch`,
    `tf.profiler...Trace(step_num=)`, `jax.profiler.StepTraceAnnotation`) with one step number
    whose windows overlap are one marked step. A number can come again later (Keras numbers a
    batch within its epoch; an eval loop counts from 0 again): that is another step."""

    def __init__(self, markers: dict) -> None:
        self.number: list[int] = []
        self.start_ps: list[int] = []
        self.end_ps: list[int] = []
        self._group = np.zeros(0, dtype=np.int64)  # each marker's marked step
        self._markers = markers
        if not markers:
            return
        order = np.lexsort((markers["start_ps"], markers["step_num"]))
        self._group = np.empty(order.size, dtype=np.int64)
        for i in order.tolist():
            number, start, end = (int(markers[key][i]) for key in ("step_num", "start_ps", "end_ps"))
            if self.number and self.number[-1] == number and start <= self.end_ps[-1]:
                self.end_ps[-1] = max(self.end_ps[-1], end)
            else:
                self.number.append(number)
                self.start_ps.append(start)
                self.end_ps.append(end)
            self._group[i] = len(self.number) - 1

    def around(self, time_ps: int) -> int | None:
        """The marked step of the innermost marker around a time, or None."""
        markers = self._markers
        if not markers:
            return None
        around = np.flatnonzero((markers["start_ps"] <= time_ps) & (markers["end_ps"] >= time_ps))
        if around.size == 0:
            return None
        return int(self._group[around[np.argmax(markers["start_ps"][around])]])


# -- the profile -----------------------------------------------------------------------------


@dataclass
class Profile:
    """The profiled steps of one `.xplane.pb`; `trace(i)` builds step i's columns."""

    steps: list[ProfileStep]
    memory_event_count: int
    start_ns: int  # wall-clock start of the profile (0 when the file does not say)
    _planes: list[tuple[_PlaneSteps, list[ProfileStep]]]
    made_by_jax: bool = False  # PjRt's events in it
    # GPUs that ran work (their planes hold events) while no GPU allocation is in the profile
    # (its allocator records none unless it is the BFC one).
    unrecorded_devices: list[str] = field(default_factory=list)

    @property
    def message(self) -> str | None:
        """Why the profile has no steps to show, or None."""
        if self.memory_event_count:
            return None
        return self._unrecorded_note or (JAX_NO_MEMORY_HELP if self.made_by_jax else NO_MEMORY_HELP)

    @property
    def _unrecorded_note(self) -> str | None:
        """What every step misses: GPUs that ran but whose allocations are not in the profile."""
        return UNRECORDED_DEVICE_HELP.format(devices=", ".join(self.unrecorded_devices)) \
            if self.unrecorded_devices else None

    def _numbers_apart(self, step: ProfileStep) -> int | None:
        """How far a step's number is from the nearest other step's of the profile (Keras numbers the calls of
        a steps_per_execution loop by the batches they run: step_4, step_8), or None without two numbers."""
        if step.number is None:
            return None
        apart = [abs(step.number - other.number) for other in self.steps
                 if other is not step and other.number is not None and other.number != step.number]
        return min(apart) if apart else None

    def trace(self, index: int) -> Trace:
        step = self.steps[index]
        for plane, steps in self._planes:
            if any(s is step for s in steps):
                trace = plane.trace(step)
                if trace.note and STEPS_PER_EXECUTION_NOTE in trace.note and (count := self._numbers_apart(step)):
                    trace.note = trace.note.replace(STEPS_PER_EXECUTION_NOTE, steps_per_execution_note(count))
                notes = [note for note in (trace.note, self._unrecorded_note,
                                           WHOLE_PROFILE_NOTE if step.whole and not self.made_by_jax else None) if note]
                trace.note = " ".join(notes) if notes else None
                return trace
        raise IndexError(index)


def decode(data) -> Profile:
    """Decode a serialized XSpace; corrupt bytes raise TraceDecodeError."""
    _check_bytes(data)
    try:
        buf, planes = wire.read_space(data)
        profile_start_ns = 0
        for plane in planes:
            start = plane.stats.get("profile_start_time")
            if isinstance(start, int):
                profile_start_ns = start
        plane_steps = []
        memory_events = 0
        programs = hlo.Programs({name: stats[hlo.HLO_PROTO_STAT] for plane in planes
                                 for name, stats in plane.metadata_bytes.items() if hlo.HLO_PROTO_STAT in stats})
        for plane in planes:
            if "MemoryAllocation" not in {name for name, _ in plane.event_names.values()}:
                continue
            events = _plane_events(data, buf, plane)
            if not events.memory:
                continue
            memory_events += events.memory["time_ps"].size
            steps = _PlaneSteps(events, profile_start_ns, programs)
            plane_steps.append((steps, steps.steps))
    except (wire.WireError, IndexError, ValueError) as exc:
        # A field running past the end of the file itself: the file stops inside it.
        cut = (" (the file ends inside a message: cut short, or still being written)"
               if str(exc).endswith(f" > {len(data)})") else "")
        raise TraceDecodeError(f"the profile's bytes ({len(data)} B) are not a valid XSpace{cut}: {exc}") from None
    all_steps = [step for _, steps in plane_steps for step in steps]
    made_by_jax = not memory_events and any(
        _JAX_EVENT_RE.search(name) for plane in planes for name, _ in plane.event_names.values())
    busy = sorted(plane.name for plane in planes
                  if _DEVICE_PLANE_RE.match(plane.name) and any(line.body_start.size for line in plane.lines))
    recorded_gpu = any(_device_of(steps._text(code))[1] == "GPU" for steps, _ in plane_steps
                       for code in np.unique(steps.memory["allocator_name"]).tolist())
    return Profile(all_steps, memory_events, profile_start_ns, plane_steps, made_by_jax=made_by_jax,
                   unrecorded_devices=[] if recorded_gpu else busy)
