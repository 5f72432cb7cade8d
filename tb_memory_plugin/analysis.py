"""Figures for one traced step: at-peak attribution, baselines, op types, categories.

Every figure in docs/figures.md is computed here or in the module this one
delegates to (`curve` for the curve and peak, `scope_tree` for sums over
scopes, `names` for what a runtime name stands for); the CLI, the plugin
routes and the tests all read them from a `StepAnalysis`. Plain Python + numpy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
import threading
from functools import cached_property
from typing import Mapping

import numpy as np

from ._numeric import scatter_sum
from .curve import build_curve
from .figures import (ACTIVATIONS, ALLOCATED, AT_PEAK, CATEGORIES, FIGURES, OPTIMIZER, OTHER, OUTPUT,
                      PARAMETERS, TEMPORARIES, format_bytes, listed)
from .names import (UNATTRIBUTED, UNUSED_SCRATCH, UPDATED_ARGUMENTS, VARIABLE_WRITERS, XLA_CLUSTER_OP_TYPES,
                    XLA_OFF_ADVICE, XLA_PROGRAM_OP_TYPE, NameTable, op_type_from_label, ran_xla_clusters,
                    tensorflow_xla_program)
from .scope_tree import SELF, ScopeTree, build_tree, root_children, scope_of_leaf
from .trace import (BFC_REGION_MIN, BFC_ROUNDING, COUNTS_NONE, DEVICE_MEMORY, READS_BLOCKS_RECORDS_REQUESTS,
                    SpaceTrace, Trace, empty_trace, matches_device, readings_thresholds)

GROUPS = ("layer", "scope")
_FEW_READINGS = 64  # readings_count_from reads a few that never move within their ops, one by one
# Ops whose outputs, where they allocate nothing, are buffers made before the step: a variable's.
_HELD_BEFORE_OPS = frozenset({"ReadVariableOp", "VariableV2", "Variable", "VarHandleOp", "Const"})


@dataclass(frozen=True)
class RoundedBlock:
    """A reading's excess over the records that is one request's block (`SpaceAnalysis.rounded_block`)."""

    exec_index: int  # the execution whose request it holds
    request_bytes: int  # what its record counts
    block_bytes: int  # what the allocator's reading counts

    @property
    def rounding_bytes(self) -> int:
        return self.block_bytes - self.request_bytes


def _check_group(group: str) -> None:
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}")


def _mode(values: np.ndarray) -> tuple[int, int]:
    """(the most common of `values`, how many hold it), the lowest where several are as common; (0, 0)
    for none: the start the most readings agree on."""
    if not values.size:
        return 0, 0
    distinct, counts = np.unique(values, return_counts=True)
    at = int(np.argmax(counts))
    return int(distinct[at]), int(counts[at])


def _follows(followed: int, moved: int) -> bool:
    """Whether readings follow a size's requests (`SpaceAnalysis._readings_follow`): twice or more, and a quarter
    of the times the requests moved (trial Z2's capsules 13 of 28, the sparse-Adam steps a third or more; an
    allocator counting none, never); or four times or more, however often they moved otherwise: moving by
    exactly a step's requests, to the byte, four times is no coincidence (trial AA's text model, 5 of 22 moves
    between its sparse updates' unrecorded frees, had been read as counting none, and its allocator gap the
    other way round)."""
    return followed >= 4 or (followed >= 2 and 4 * followed >= moved)


def _leading_run(values: np.ndarray) -> int:
    """How many of `values`, from the first on, equal the first."""
    differ = np.flatnonzero(values != values[0])
    return int(differ[0]) if differ.size else int(values.size)


def _totals_within_op(rise: np.ndarray, first: int, last: int) -> np.ndarray:
    """The records' running totals `rise` over a reading's op window (`SpaceAnalysis._op_windows`): from the
    total just before the op started (none, before the step's first time) to the one at its reading."""
    totals = rise[max(first - 1, 0):last]
    return np.append(totals, 0) if first == 0 else totals


@dataclass(frozen=True)
class XlaProgram:
    """An XLA program's bytes in one space: its node and the pieces its HLO split from its blocks
    (sources/xplane/hlo.py)."""

    name: str
    at_peak_bytes: int
    allocated_bytes: int
    placed_bytes: int  # at the peak, in pieces that are ops' values
    unused_scratch_bytes: int  # at the peak, scratch no value holds at the block's own peak

    @property
    def kept_bytes(self) -> int:
        """At the peak, on the program's own node, placed on no op: the allocator's rounding, and the blocks
        of runs the profile's HLO does not match (trial Y's Keras 3 ConvNeXt: 220.7 MiB of a depthwise
        filter's gradient, one temporary block of an unnamed program's run)."""
        return self.at_peak_bytes - self.placed_bytes - self.unused_scratch_bytes


class SpaceAnalysis:
    """All figures for one memory space (device + allocator) of a step."""

    def __init__(self, space: SpaceTrace, names: NameTable) -> None:
        self.trace = space
        # Executions point (name_code) into the rows of `names`, one per distinct runtime name.
        name_code = self.name_code = space.name_code
        self.names = names
        self.op_type_names = names.op_type_names
        self.name_op_code = names.op_code
        self.exec_op_code = self.name_op_code[name_code] if name_code.size else name_code
        self.curve = build_curve(space)
        self.has_curve = space.has_records
        self._trees: dict[str, ScopeTree] = {}
        self._lock = threading.Lock()
        self._memo: dict = {}

        n = space.exec_count
        at_peak = self._at_peak_by_exec()
        # Per-execution figures, one array per FIGURES entry (no copies of the trace's columns).
        self.exec_columns = (at_peak, space.allocated, space.op_peak, space.live, space.output, space.temp,
                             space.persistent)
        category = names.category[name_code] if n else np.zeros(0, dtype=np.int64)
        kept_across_steps = (space.persistent > 0) & ((category == ACTIVATIONS) | (category == OTHER))
        self.category = np.where(kept_across_steps, PARAMETERS, category)
        # At-peak bytes split: an execution's category, except what it had freed before it ended.
        self.temporaries = self._temporaries_at_peak(at_peak)
        # On a deep model every execution has a name of its own, in order: then a name's
        # figures are its execution's, and sums over names read the execution columns.
        code = self.name_code
        self._one_name_each = len(names.raw) == code.size and bool((code == np.arange(code.size)).all())
        self.baseline, self.start_bytes, self.snapshot_gap = self._baseline()

    def memoized(self, key, compute):
        """Results derived from this (immutable) space, computed once: two threads asking at once
        may both compute, and the first result stays."""
        try:
            return self._memo[key]
        except KeyError:
            return self._memo.setdefault(key, compute())

    @cached_property
    def exec_figures(self) -> np.ndarray:
        """(executions, FIGURES), built on first use (node tables, scope details)."""
        if self.trace.exec_count == 0:
            return np.zeros((0, len(FIGURES)), dtype=np.int64)
        return np.stack(self.exec_columns, axis=1)

    def name_columns(self, width: int) -> np.ndarray | tuple:
        """The first `width` FIGURES per distinct runtime name, for a sum over names
        (`scatter_sum`): the execution columns themselves where each has its own name."""
        if self._one_name_each:
            return self.exec_columns[:width]
        return self.name_figures[:, :width]

    def name_column(self, figure: int) -> np.ndarray:
        """One FIGURES column per distinct runtime name (as `name_figures` holds it), without
        building the table where each execution has its own name."""
        return self.exec_columns[figure] if self._one_name_each else self.name_figures[:, figure]

    @property
    def name_exec_counts(self) -> np.ndarray:
        """Executions per distinct runtime name."""
        if self._one_name_each:
            return np.ones(self.name_code.size, dtype=np.int64)
        return self.name_figures[:, -1]

    @cached_property
    def name_figures(self) -> np.ndarray:
        """Per distinct runtime name: FIGURES, at-peak bytes per category, executions.

        What the scope trees aggregate (one row per name, not per execution),
        column-major: built and summed column by column; built on first use (a
        summary sums names' figures with `name_columns`). Where every execution has
        a name of its own, in order, scatter_sum places the executions' figures.
        """
        code, names = self.name_code, len(self.names.raw)
        width, figure_count = len(CATEGORIES), len(FIGURES)
        out = np.empty((names, figure_count + width + 1), dtype=np.int64, order="F")
        held = self.exec_columns[AT_PEAK] - self.temporaries
        for column, values in enumerate(self.exec_columns):
            out[:, column] = scatter_sum(code, values, names)
        out[:, figure_count:figure_count + width] = scatter_sum(code * width + self.category, held,
                                                                names * width).reshape(names, width)
        out[:, figure_count + TEMPORARIES] += scatter_sum(code, self.temporaries, names)
        out[:, -1] = np.bincount(code, minlength=names)
        return out

    def category_split(self, rows) -> np.ndarray:
        """At-peak bytes per category over some executions (an index array or a slice)."""
        at_peak = self.exec_columns[AT_PEAK][rows] - self.temporaries[rows]
        out = scatter_sum(self.category[rows], at_peak, len(CATEGORIES))
        out[TEMPORARIES] += int(self.temporaries[rows].sum())
        return out

    # -- at-peak attribution ------------------------------------------------

    def _at_peak_by_exec(self) -> np.ndarray:
        """Net bytes each execution holds at the peak; sums to the peak rise exactly."""
        events = self.curve.events_up_to_peak()
        space = self.trace
        return scatter_sum(space.event_exec[events], space.event_bytes[events], space.exec_count)

    def _temporaries_at_peak(self, at_peak: np.ndarray) -> np.ndarray:
        """Bytes held at the peak by a running op and freed before it ended: before the run in
        progress at the peak ended, where an execution is several runs (`SpaceTrace.runs`: a
        loop body's op, whose later iterations free what earlier ones made)."""
        space, curve = self.trace, self.curve
        n = space.exec_count
        if curve.peak_index < 0 or n == 0:
            return np.zeros(n, dtype=np.int64)
        peak = curve.peak_time_us
        start, end = space.start_us, space.end_us
        if space.runs is not None:
            run_exec, run_start, run_end = space.runs
            several = np.bincount(run_exec, minlength=n) > 1
            at = np.flatnonzero(several[run_exec] & (run_start <= peak) & (peak <= run_end))
            end = np.where(several, np.iinfo(np.int64).min, end)  # not running, but in a run at the peak
            np.maximum.at(end, run_exec[at], run_end[at])
            start = np.where(several, np.minimum(start, peak), start)
        after_peak = curve.events_after_peak()
        execs = space.event_exec[after_peak]
        within_op = space.event_time_us[after_peak] <= end[execs]
        net_until_end = scatter_sum(execs[within_op], space.event_bytes[after_peak][within_op], n)
        running = (start <= peak) & (peak <= end)
        # An XLA program's pieces that are ops' values (its HLO places them) run with the program, but
        # a value lives from the op that made it to its last use, not inside one op: it keeps its op's
        # category (a jit_compile fit's forward values, activations; its backward's, gradients). What
        # the program frees of its own, its scratch no value holds and its rounding, is temporaries.
        running &= ~self._xla_values()
        freed = np.where(running, -net_until_end, 0)
        return np.clip(freed, 0, np.maximum(at_peak, 0))

    def _xla_values(self) -> np.ndarray:
        """Per execution: whether it is a piece of an XLA program that is an op's value (not the
        program's own node, nor its `(unused scratch)`)."""
        trace = self.trace
        values = np.zeros(trace.exec_count, dtype=bool)
        if trace.xla_program_exec is None:
            return values
        for i in np.flatnonzero(trace.xla_program_exec >= 0).tolist():
            name = trace.name(i)
            values[i] = (name != trace.xla_program_names[int(trace.xla_program_exec[i])]
                         and not name.endswith("/" + UNUSED_SCRATCH))
        return values

    @cached_property
    def snapshot_offsets(self) -> np.ndarray:
        """Each allocator snapshot minus the curve's rise when it was read: the bytes in use
        before the step, as that reading tells them (the baseline is read from them: `readings_start`)."""
        space, curve = self.trace, self.curve
        if space.snapshot_event is not None:  # a reading after each event: the records' total after it
            place = np.empty(curve.event_order.size, dtype=np.int64)
            place[curve.event_order] = np.arange(curve.event_order.size)
            running = np.cumsum(space.event_bytes[curve.event_order])
            return space.snapshot_bytes - running[place[space.snapshot_event]]
        return self._offsets(self.readings_rise)

    def _offsets(self, rise: np.ndarray) -> np.ndarray:
        """Each reading (a RunMetadata one, at its op's end) minus `rise` (at `curve.time_us`) then."""
        at = np.searchsorted(self.curve.time_us, self.trace.snapshot_time_us, side="right") - 1
        return self.trace.snapshot_bytes - np.where(at >= 0, rise[np.maximum(at, 0)], 0)

    @cached_property
    def readings_rise(self) -> np.ndarray:
        """The curve's rise (at `curve.time_us`) over the records the allocator's readings count: all of
        them, but on an allocator whose readings leave small requests out (oneDNN's `mklcpu`:
        `readings_count_from`), only the others. A step of 5,000 small gradients had read as readings
        74 MiB short of the records, where the readings of the large ones never moved."""
        return self._rise_counting(self.readings_count_from)

    def _rise_counting(self, least: int) -> np.ndarray:
        curve = self.curve
        if not least:
            return curve.rise_bytes
        counted = self.trace.event_bytes[curve.event_order]
        return np.cumsum(np.where(np.abs(counted) >= least, counted, 0))[curve.group_end]

    @property
    def readings_count_from(self) -> int:
        """The smallest request the allocator's readings count (0: every one): `_readings_choice`'s size."""
        return self._readings_choice[0]

    @cached_property
    def _readings_choice(self) -> tuple[int, int | None]:
        """(the smallest request the allocator's readings count, the start read within the readings' ops where
        that is how the size was chosen, else None). Of the sizes its allocator's
        readings may count from (`trace.readings_thresholds`: mklcpu's 256 KiB, 4 KiB before TensorFlow
        2.12) and none, the one under which the most readings agree to the byte on one start (the earlier
        in that order where as many do): on every TensorFlow 2.21 step tried, 256 KiB, with 32-100% of the
        readings exact, more than under any other size. Last, `trace.COUNTS_NONE`: readings that count none
        of the step's requests (every one sent to malloc), which give no start; not where the readings follow
        a size's requests move for move (`_follows`), which such readings never do. A count per size."""
        space, curve = self.trace, self.curve
        candidates = readings_thresholds(space.allocator)
        if not candidates or space.snapshot_event is not None:  # a profile's readings come with its events
            return 0, None
        if space.snapshot_bytes.size == 0 or curve.time_us.size == 0:
            return candidates[0], None
        offsets = {least: self._offsets(self._rise_counting(least)) for least in (*candidates, 0, COUNTS_NONE)}
        # How many readings agree to the byte on one start: the most common one's count. (Counting those equal
        # to the median had let a U-Net step whose 32 readings agreed on one start under 256 KiB, spread around
        # it by oneDNN's own memory, lose to counting none: 7 readings at its median.)
        shares = {least: _mode(offset)[1] for least, offset in offsets.items()}
        best = max(shares, key=shares.__getitem__)  # the first of the most
        if best == COUNTS_NONE:
            # Readings that move, from one to the next, by exactly what a size's requests added or freed between
            # them, twice or more and a quarter of the times those requests moved, count that size's requests,
            # however few of them agree on one start (frees with no record scatter them: a sparse optimizer's
            # replaced slots; trial Z2's capsules, whose readings rose and fell with their einsums' 256 KiB
            # requests 13 times, had read as counting none). Readings an allocator counting none gives never
            # move so.
            following = [least for least in (*candidates, 0) if _follows(*self._readings_follow(offsets[least]))]
            if following:
                best = max(following, key=shares.__getitem__)
        best_share = shares[best]
        if best == COUNTS_NONE and space.snapshot_bytes.size <= _FEW_READINGS and space.snapshot_start_us is not None:
            # A few readings that never move agree with counting none at their ops' ends. Read anywhere in their
            # ops (a reading taken before an input's free: `reading_excess`), they may agree as well under a size
            # that counts: that size, as an allocator counting none is the rarer (trial N's inference step, two
            # readings 2 MiB apart in the records, had been read as counting none, and given no start).
            for least in (*candidates, 0):
                start, share = self._agreeing_within_ops(self._rise_counting(least))
                if share >= best_share:
                    return least, start  # the baseline's start (`_baseline`)
        return best, None

    def _readings_follow(self, offsets: np.ndarray) -> tuple[int, int]:
        """(how many times the allocator's readings, from one to the next in time, move by exactly what the
        records they are read against (their `offsets`: each reading less those records' total) added or
        freed between them, how many times those records moved between two readings)."""
        order = np.argsort(self.trace.snapshot_time_us, kind="stable")
        readings = self.trace.snapshot_bytes[order].astype(np.int64)
        counted = np.diff(readings - offsets[order])
        moved = counted != 0
        return int(np.count_nonzero(moved & (np.diff(readings) == counted))), int(np.count_nonzero(moved))

    def _op_windows(self, rows: np.ndarray | slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """For each reading (of `rows`), where its op's window lies in `curve.time_us`: (the first time at or
        after the op started, one past the last time at or before its reading)."""
        space, curve = self.trace, self.curve
        return (np.searchsorted(curve.time_us, space.snapshot_start_us[rows], side="left"),
                np.searchsorted(curve.time_us, space.snapshot_time_us[rows], side="right"))

    def _agreeing_within_ops(self, rise: np.ndarray) -> tuple[int, int]:
        """(the start the most readings agree with, how many), each reading read at its op's end or at a moment
        of its op when the records' running total `rise` was higher (before a temporary's or an input's free,
        as `reading_excess` allows; not before the op's own allocations, which its reading follows). The
        lower start where two have as many. For a few readings only."""
        low, high = self._op_windows()
        votes: list[int] = []
        for reading, first, last in zip(self.trace.snapshot_bytes.tolist(), low.tolist(), high.tolist()):
            at_end = int(rise[last - 1]) if last > 0 else 0
            totals = {total for total in rise[max(first - 1, 0):last].tolist() if total >= at_end} | {at_end}
            votes.extend(reading - total for total in totals)  # one vote per start a reading may tell
        return _mode(np.array(votes, dtype=np.int64))

    @property
    def readings_partial_from(self) -> int | None:
        """The smallest request the readings count, where they leave smaller ones out (mklcpu's 256 KiB);
        None where they count every request, or none."""
        least = self.readings_count_from
        return least if 0 < least < COUNTS_NONE else None

    @property
    def start_counts_from(self) -> int | None:
        """`readings_partial_from` of the readings the start is read from (None without a start): smaller
        tensors in use before the step are in neither the start nor `peak_bytes`."""
        return self.readings_partial_from if self.start_bytes is not None else None

    def reading_excess(self, start: int, smallest: float) -> np.ndarray:
        """Each allocator reading over `start` plus the records' total when it was read
        (`snapshot_offsets` less `start`). Where the source does not say when in its op a reading
        was taken (RunMetadata keeps it at the op's end), the least such excess over any moment of
        the op, the total just before it started included: a reading taken before the op freed a
        temporary reads that temporary's bytes above the total at its end (a batch norm's
        `moments/variance`, 1-2 MiB on a CPU step), and one taken before its input's free, recorded
        by the input's op inside its window, that input's (a gradient's `Sum`). The total at a moment
        counts every op's records, concurrent ones too: a gap is flagged where no moment of its op
        explains the reading, which may let one through where the total passes its value by chance.
        Only the readings off by `smallest` or more are looked at again (a few: the rest need no
        second look)."""
        space = self.trace
        rise = self.readings_rise
        excess = self.snapshot_offsets - start
        starts = space.snapshot_start_us
        off = np.flatnonzero(np.abs(excess) >= smallest)
        if starts is None or not off.size:
            return excess
        excess = excess.copy()
        low, high = self._op_windows(off)
        for row, first, last in zip(off.tolist(), low.tolist(), high.tolist()):
            totals = _totals_within_op(rise, first, last)
            if not totals.size:
                continue
            reading = int(excess[row]) + (int(rise[last - 1]) if last > 0 else 0)  # over `start`
            candidates = reading - totals
            excess[row] = candidates[np.argmin(np.abs(candidates))]
        return excess

    @property
    def no_curve(self) -> str | None:
        """Why the space has no curve (None: it has one): `no_records`, allocations without their
        records (TensorFlow 1.x before records existed); `nothing_allocated`, a step whose outputs
        are buffers that existed before it (variable reads, constants)."""
        if self.has_curve:
            return None
        return "no_records" if int(self.trace.allocated.sum()) else "nothing_allocated"

    @property
    def peak_bytes(self) -> int | None:
        """The peak in absolute bytes: the baseline plus the rise (None without a baseline)."""
        return None if self.start_bytes is None else self.start_bytes + self.peak_rise_bytes

    def _baseline(self) -> tuple[str, int | None, int | None]:
        """Bytes in use before the step, from the allocator's own snapshots."""
        space, curve = self.trace, self.curve
        if space.snapshot_bytes.size == 0:
            return "none", None, None
        if curve.time_us.size == 0:
            return "allocator_bytes_in_use", int(np.median(space.snapshot_bytes)), None
        start = self.readings_start
        gap = int(np.max(np.abs(self.snapshot_offsets - start)))
        if start < 0 or self.readings_count_from == COUNTS_NONE:  # readings that cannot hold the step's records,
            return "none", None, gap  # or count none of them: no usable baseline
        return "allocator_bytes_in_use", start, gap

    @cached_property
    def readings_start(self) -> int:
        """The bytes in use before the step as the allocator's readings tell them (`snapshot_offsets`: each
        reading less the records' total then), whether or not they make a baseline (negative ones do not).
        A few readings agreeing only when read within their ops give that start (`_readings_choice`).

        A profile reads the allocator after every event, each allocation one of them: its offsets hold
        nothing the events miss, and their median is the start. A RunMetadata step's allocator also holds
        what no record shows, taken during the step (oneDNN's primitives, XLA's clusters), which only adds
        to a reading: the start is the step's first reading's (taken before most of it: a trial's wide &
        deep step read 61.9 MiB there, and again at its end, and 92.5 MiB, its median, through the 30 MiB
        its gather took in between), but the offset the most readings agree on (two at least) where that
        is lower (the first op itself took such memory: a 3-D convolution's 28 MiB), or where the first
        reading agrees with it at some moment of its op (taken before a concurrent op's allocation, as
        `reading_excess` allows), or is below nothing. Not where the step's readings keep the first's offset,
        from the first on, for two readings or more, until one taken after an op that writes a variable (or an
        optimizer's): a variable buffer replaced there, the old one freed with no record (a sparse optimizer's
        slots, copied on read), lowers every reading after it (a trial's ragged embedding: 35 readings from the
        first at 6.9 MiB, 38 after its Adam's updates at 4.4), where memory an op took with no record and gave
        back would have moved them at another op. No two agreeing (readings rounded to a unit): the first."""
        offsets = self.snapshot_offsets
        if self.trace.snapshot_event is not None:
            return int(np.median(offsets))
        rounded = self._rounded_offsets(offsets)
        if rounded is not None:  # each reading a request's block above the records: what is left is the start
            offsets = rounded
        elif (within := self._readings_choice[1]) is not None:
            return int(within)
        row = int(np.argmin(self.trace.snapshot_time_us))  # readings come in the nodes' order
        first = int(offsets[row])
        mode, count = _mode(offsets)
        if count < 2 or first < mode and first >= 0 and not self._agrees_within_op(row, mode):
            return first
        in_order = np.argsort(self.trace.snapshot_time_us, kind="stable")
        kept = _leading_run(offsets[in_order])
        if first > mode and 2 <= kept < in_order.size and self._writes_variable_before(int(in_order[kept])):
            return first  # the step's first readings keep it until a variable's update: memory freed with no record
        return mode

    def rounded_block(self, row: int, excess: int) -> RoundedBlock | None:
        """The request whose block explains reading `row`'s `excess` over the records (and the start), where
        one does, on an allocator whose readings count the blocks its records' requests got
        (`trace.READS_BLOCKS_RECORDS_REQUESTS`: oneDNN's mklcpu; a GPU's BFC records the blocks themselves):
        a request of the records live at some moment of the reading's op, held in a block of a power of two
        (`trace.BFC_REGION_MIN` or more) larger than it but under twice its size, whose rounding the excess
        is, up to the allocator's rounding of the requests live then (never less). A trial's 2.2 MB stack of
        per-example gradients in a 4 MiB block had read as 1.8 MiB in use before the step. None where none
        does."""
        if not self._reads_blocks:
            return None
        return self._block_of(self._live_requests(row), excess)

    @property
    def _reads_blocks(self) -> bool:
        """Whether readings count blocks where the records count requests (a RunMetadata step on mklcpu)."""
        return self.trace.snapshot_event is None and self.trace.allocator in READS_BLOCKS_RECORDS_REQUESTS

    @staticmethod
    def _block_of(live: tuple[list[tuple[int, int]], int], excess: int) -> RoundedBlock | None:
        requests, slop = live
        for owner, request in requests:
            block = 1 << (request - 1).bit_length()
            rounding = block - request
            # A rounding larger than the requests' own (a power of two asked for is its own block: none).
            if block >= BFC_REGION_MIN and rounding > slop and 0 <= excess - rounding <= slop:
                return RoundedBlock(owner, request, block)
        return None

    @cached_property
    def _counted_events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(time, bytes, execution) of the records the readings count (`readings_count_from`)."""
        trace = self.trace
        least = self.readings_partial_from or 1
        rows = np.flatnonzero(np.abs(trace.event_bytes) >= least)
        return trace.event_time_us[rows], trace.event_bytes[rows], trace.event_exec[rows]

    def _live_requests(self, row: int) -> tuple[list[tuple[int, int]], int]:
        """(execution, request) of the requests of more than half `trace.BFC_REGION_MIN` the readings count
        that are live at some moment of reading `row`'s op (made by its reading, not freed before the op
        started), and how far the allocator's rounding of the counted requests live then may lift the
        reading (those live at the reading, and one more)."""
        trace = self.trace
        time, size, owner = self._counted_events
        if not time.size:
            return [], 0
        read = trace.snapshot_time_us[row]
        began = trace.snapshot_start_us[row] if trace.snapshot_start_us is not None else read
        made = (time <= read) & (size > 0)
        big = np.flatnonzero(made & (size > BFC_REGION_MIN // 2))
        if not big.size:
            return [], 0
        kept = made | ((time < began) & (size < 0))
        held = np.bincount(owner[kept], weights=size[kept], minlength=int(owner.max()) + 1)
        live = [(int(owner[e]), int(size[e])) for e in big.tolist()]
        live_at_reading = int(np.count_nonzero(made)) - int(np.count_nonzero((time <= read) & (size < 0)))
        return ([(o, request) for o, request in live if held[o] >= request],
                BFC_ROUNDING * (max(live_at_reading, 0) + 1))

    def _held_before_step(self) -> int:
        """Bytes the step shows were in use before it, of the requests its readings count: tensors its ops
        read or were fed without allocating them (a variable's read, a feed's `_arg_`: outputs of no
        allocation of the step), each name's once. A start read below them is no start."""
        trace, names = self.trace, self.names
        least = self.readings_partial_from or 1
        held = names.of_op_type(_HELD_BEFORE_OPS.__contains__) | names.step_inputs
        rows = np.flatnonzero(held[self.name_code] & (trace.allocated == 0) & (trace.output >= least))
        if not rows.size:
            return 0
        _, first = np.unique(self.name_code[rows], return_index=True)
        return int(trace.output[rows[first]].sum())

    def _rounded_offsets(self, offsets: np.ndarray) -> np.ndarray | None:
        """The readings' offsets less the rounding of a request's block (`rounded_block`), where every reading
        is one's above the records at some moment of its op (a few readings, each taken while one such block
        is held: a step whose only large request is one); else None."""
        if not (self._reads_blocks and 0 < offsets.size <= _FEW_READINGS) or offsets.max() < BFC_ROUNDING:
            return None
        rise, readings = self.readings_rise, self.trace.snapshot_bytes
        low, high = self._op_windows() if self.trace.snapshot_start_us is not None else (None, None)
        out = offsets.copy()
        floor = self._held_before_step()
        for row, offset in enumerate(offsets.tolist()):
            moments = [offset] if low is None else (
                int(readings[row]) - _totals_within_op(rise, int(low[row]), int(high[row]))).tolist()
            live = self._live_requests(row)
            for moment in sorted(set(moments) | {offset}, key=lambda o: abs(o - offset)):
                block = self._block_of(live, moment)
                if block is not None and moment - block.rounding_bytes >= floor:
                    out[row] = moment - block.rounding_bytes
                    break
            else:
                return None
        return out

    def finished_by(self, when: int) -> int | None:
        """The name (its code) of the op that finished last at or before `when` (a reading's time); None if none."""
        trace = self.trace
        finished = np.flatnonzero(trace.end_us <= when)
        if not finished.size:
            return None
        return int(self.name_code[int(finished[np.argmax(trace.end_us[finished])])])

    def _writes_variable_before(self, row: int) -> bool:
        """Whether reading `row` was taken after an op that writes a variable (`names.VARIABLE_WRITERS`) or
        updates it for an optimizer (its category): the op that finished last at or before it."""
        code = self.finished_by(int(self.trace.snapshot_time_us[row]))
        if code is None:
            return False
        return int(self.names.category[code]) == OPTIMIZER or self.names.op_type(code).startswith(VARIABLE_WRITERS)

    def _agrees_within_op(self, row: int, start: int) -> bool:
        """Whether reading `row`, read at some moment of its op (from the total just before it started on),
        tells `start`."""
        if self.trace.snapshot_start_us is None:
            return False
        (low,), (high,) = self._op_windows(np.array([row]))
        totals = _totals_within_op(self.readings_rise, int(low), int(high))
        return bool((int(self.trace.snapshot_bytes[row]) - start == totals).any())

    # -- trees ----------------------------------------------------------------

    def tree(self, group: str) -> ScopeTree:
        _check_group(group)
        with self._lock:
            tree = self._trees.get(group)
            if tree is None:
                paths = self.names.leaf_paths(group)
                tree = self._trees[group] = build_tree(paths, np.arange(len(paths)), self.name_figures,
                                                       self.name_code, len(FIGURES))
            return tree

    def top_level(self, group: str) -> list[tuple[str, np.ndarray]]:
        """The root's children (path, figures), largest first; from the tree when it is built,
        else without it (the summary needs no more)."""
        _check_group(group)
        with self._lock:
            tree = self._trees.get(group)
        if tree is None:
            children = root_children(self.names.leaf_parts(group), self.name_columns(len(FIGURES)))
            if children is not None:
                return children
            tree = self.tree(group)
        return [(tree.paths[c], tree.figures[c]) for c in tree.children[0]]

    def scope_of(self, exec_index: int, group: str) -> str:
        """The scope an execution's name sits in, in a grouping."""
        with self._lock:
            tree = self._trees.get(group)
        if tree is not None:
            leaf = tree.paths[int(tree.leaf_of_exec[exec_index])]
            return leaf[: -len(SELF) - 1] if leaf.endswith("/" + SELF) else leaf[: max(leaf.rfind("/"), 0)]
        _check_group(group)
        names = self.names
        return scope_of_leaf(names.leaf_path(group, int(self.name_code[exec_index])),
                             functools.partial(names.any_leaf_starting_with, group))

    # -- step-level figures -----------------------------------------------------

    @property
    def duration_us(self) -> int:
        """When the space's last execution ended."""
        return int(self.trace.end_us.max()) if self.trace.exec_count else 0

    @property
    def peak_rise_bytes(self) -> int:
        return self.curve.peak_rise_bytes

    def peak_exec(self) -> int | None:
        """The execution whose event made the peak (the op running then)."""
        curve = self.curve
        if curve.peak_index < 0:
            return None
        return int(self.trace.event_exec[curve.last_event(np.array([curve.peak_index]))[0]])

    def largest_at_peak_name(self) -> tuple[int, int, int] | None:
        """(its first execution, its bytes, its executions) of the node name holding the most bytes
        at the peak over all its executions (a loop body's op runs once per iteration, and
        together they may hold the most); None when nothing is held."""
        at_peak = self.name_column(AT_PEAK)
        if at_peak.size == 0 or int(at_peak.max()) <= 0:
            return None
        name = int(np.argmax(at_peak))
        execution = name if self._one_name_each else int(np.argmax(self.name_code == name))
        return execution, int(at_peak[name]), int(self.name_exec_counts[name])

    def totals(self) -> np.ndarray:
        return np.array([int(column.sum()) for column in self.exec_columns], dtype=np.int64)

    def by_op_type(self, execs: np.ndarray | None = None) -> list[tuple[str, int, np.ndarray]]:
        """(op type, executions, figures) sorted by at-peak then allocated."""
        unique = self.op_type_names
        if execs is None:  # the whole step: from the per-name table (a few thousand rows)
            width = len(FIGURES)
            sums = scatter_sum(self.name_op_code, self.name_columns(width), len(unique))
            counts = np.bincount(self.exec_op_code, minlength=len(unique))
        else:
            if execs.size == 0:
                return []
            codes = self.exec_op_code[execs]
            sums = scatter_sum(codes, self.exec_figures[execs], len(unique))
            counts = np.bincount(codes, minlength=len(unique))
        rows = [(unique[i], int(counts[i]), sums[i]) for i in np.flatnonzero(counts)]
        rows.sort(key=lambda r: (-r[2][AT_PEAK], -r[2][ALLOCATED], r[0]))
        return rows

    def by_category(self, execs: np.ndarray | None = None) -> list[tuple[str, int, int]]:
        """(category, at-peak bytes, allocated bytes) in the fixed category order."""
        rows = slice(None) if execs is None else execs  # a slice avoids copying the whole step
        at_peak = self.category_split(rows)
        # Scratch freed inside the op is a temporary, whatever the op's category.
        allocated_column = self.exec_columns[ALLOCATED][rows]
        temp = self._freed_temp[rows]
        allocated = scatter_sum(self.category[rows], allocated_column - temp, len(CATEGORIES))
        allocated[TEMPORARIES] += int(temp.sum())
        return [(CATEGORIES[i], int(at_peak[i]), int(allocated[i])) for i in range(len(CATEGORIES))]

    @cached_property
    def _freed_temp(self) -> np.ndarray:
        """Per execution: its temp bytes (`temp_memory_size`, at most what it allocated), but no
        more than it freed in the step, where the records show. TensorFlow counts as temp whatever
        an op allocated beyond its outputs, a buffer it keeps too (a `ResourceApply*` op's copy of
        the variable it updates, never freed): that stays the op's category, as its at-peak bytes
        do. (Scratch is freed as the op ends, in a profile's timing a moment after it, at times.)"""
        space = self.trace
        temp = np.minimum(space.temp, space.allocated)
        rows = np.flatnonzero(temp > 0)
        if not self.has_curve or not rows.size:
            return temp
        frees = np.flatnonzero(space.event_bytes < 0)
        freed = scatter_sum(space.event_exec[frees], -space.event_bytes[frees], space.exec_count)
        return np.minimum(temp, freed)

    def op_type(self, exec_index: int) -> str:
        return self.names.op_type(int(self.name_code[exec_index]))

    def graph_name(self, exec_index: int) -> str:
        return self.names.graph_names[self.name_code[exec_index]]

    def kind(self, exec_index: int) -> str:
        return self.names.kind(self.name_code[exec_index])

    def kernel_of(self, exec_index: int) -> str | None:
        """The kernel that ran, from the trace's label (fused ops keep one node's name)."""
        return op_type_from_label(self.trace.label_of.get(self.trace.name(exec_index), ""))

    def xla_program_of(self, exec_index: int) -> str | None:
        """The XLA program whose blocks hold this execution's bytes (where its HLO placed them
        there), a program's own node's its own name; None outside XLA programs."""
        trace = self.trace
        if trace.xla_program_exec is not None and trace.xla_program_exec[exec_index] >= 0:
            return trace.xla_program_names[int(trace.xla_program_exec[exec_index])]
        return trace.name(exec_index) if self.op_type(exec_index) == XLA_PROGRAM_OP_TYPE else None

    def xla_programs(self) -> list[XlaProgram]:
        """Each XLA program's figures (its node and the pieces its HLO split from its blocks), the
        most held at the peak first; programs that hold and allocate nothing left out."""
        names = self.names
        if XLA_PROGRAM_OP_TYPE not in names.op_type_names:
            return []
        rows = np.flatnonzero(self.exec_op_code == names.op_type_names.index(XLA_PROGRAM_OP_TYPE))
        sums: dict[str, list[int]] = {}
        at_peak, allocated = self.exec_columns[AT_PEAK], self.trace.allocated
        for i in rows.tolist():
            name, program = self.trace.name(i), self.xla_program_of(i)
            figures = sums.setdefault(program, [0, 0, 0, 0])
            figures[0] += int(at_peak[i])
            figures[1] += int(allocated[i])
            if name.endswith("/" + UNUSED_SCRATCH):
                figures[3] += int(at_peak[i])
            elif program != name:
                figures[2] += int(at_peak[i])
        return sorted((XlaProgram(name, *figures) for name, figures in sums.items() if figures[0] or figures[1]),
                      key=lambda program: (-program.at_peak_bytes, program.name))


class StepAnalysis:
    """A decoded, analysed step: one SpaceAnalysis per memory space."""

    def __init__(self, trace: Trace, spaces: list[SpaceAnalysis], status: str, message: str | None):
        self.trace = trace
        self.spaces = spaces
        self.status = status
        self.message = message
        self._by_id = {s.trace.id: s for s in spaces}
        # An empty record beside its run's profile (Keras' `batch_N`): empty by design, not a failure.
        self.beside_profile = False
        self._memo: dict = {}
        self._memo_lock = threading.Lock()

    def memoized(self, key, compute):
        """Results derived from this (immutable) step, computed once."""
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]

    def space(self, space_id: str | None) -> SpaceAnalysis | None:
        """The memory space of that id, or that a device as users write it names (`trace.matches_device`: the
        `runs` route's `/job:localhost/replica:0/task:0/device:CPU:0`, `/gpu:0`): the step's default space
        where it is among them, else the only one; None where none or several are (the default without one)."""
        if space_id is None:
            return self._by_id.get(self.default_space_id) if self.spaces else None
        exact = self._by_id.get(space_id)
        if exact is not None:
            return exact
        matches = self.matching(space_id)
        default = self.space(None)
        return default if default in matches else matches[0] if len(matches) == 1 else None

    def matching(self, wanted: str) -> list[SpaceAnalysis]:
        """The spaces a device as users write it names (`trace.matches_device`)."""
        return [space for space in self.spaces if matches_device(space.trace, wanted)]

    def why_no_space(self, wanted: str | None, name: str) -> str:
        """Why `space(wanted)` is None, for the step called `name`: no space matches (its ids said), or
        several do and none is the default (theirs said)."""
        if wanted is None:
            return f"{name} has no memory space"
        several = self.matching(wanted)
        if several:
            return f"{wanted!r} matches several memory spaces of {name}: {', '.join(s.trace.id for s in several)}; name one"
        return f"no device of {name} matches {wanted!r} (it has {', '.join(s.trace.id for s in self.spaces) or 'none'})"

    @property
    def default_space_id(self) -> str | None:
        """An accelerator's own memory if any (not its pinned host memory), else the space with the
        highest peak."""
        if not self.spaces:
            return None
        own = [s for s in self.spaces if s.trace.device_type not in ("CPU",) and s.trace.memory_kind == DEVICE_MEMORY]
        pool = own or self.spaces
        best = max(pool, key=lambda s: (s.peak_rise_bytes, int(s.trace.allocated.sum())))
        return best.trace.id


NO_MEMORY_HELP = (
    "Trace with memory: run the step with "
    "options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE) "
    "and run_metadata=tf.compat.v1.RunMetadata(), then writer.add_run_metadata(run_metadata, 'step_N')."
)
# TF2 and Keras write no step stats: their memory is in a profile (README, "TF2 and Keras").
TF2_PROFILE_HELP = (
    "TF2 and Keras: profile the step (tf.profiler.experimental.start(logdir) ... stop(), Keras' "
    "TensorBoard(profile_batch=...) for fit's batches (it profiles no predict or evaluate: wrap those in "
    "start and stop), or tf.summary.trace_on(graph=True, profiler=True, profiler_outdir=logdir) before "
    "trace_export)"
)


def analyse(trace: Trace, graph_ops: Mapping[str, str] | None = None) -> StepAnalysis:
    """Analyse a decoded step. `graph_ops` maps graph node names to op types."""
    if trace.node_stat_count == 0:
        return StepAnalysis(trace, [], "empty",
                            "This step has no step stats: it was written without tracing "
                            "(or by TF2 eager/Keras, whose memory is in profiler files). " + NO_MEMORY_HELP
                            + f" {TF2_PROFILE_HELP}.")
    # The run graph's op types first (a fused node's is its graph op's, `Relu`), then the graphs the step ran.
    spaces = [SpaceAnalysis(space, NameTable.build(space.distinct_names, space.label_of, trace.op_types, graph_ops,
                                                   space.input_names, trace.layers, trace.ran_op_types))
              for space in trace.spaces]
    has_bytes = any(int(s.trace.allocated.sum()) or int(s.trace.output.sum()) or s.has_curve for s in spaces)
    clusters = xla_clusters(spaces)
    if not has_bytes:
        if clusters:
            return StepAnalysis(trace, [], "no_memory",
                                f"This step was traced ({trace.node_stat_count} node stats) but no op in it "
                                f"allocated or output any memory that TensorFlow recorded. "
                                + xla_clusters_note(clusters))
        return StepAnalysis(trace, [], "no_memory",
                            f"This step was traced ({trace.node_stat_count} node stats) but no op in it allocated "
                            "or output any memory: either nothing in it does (a step of no-ops), or it was traced "
                            "at a level that records none. " + NO_MEMORY_HELP)
    message = trace.note
    if not any(s.has_curve for s in spaces):
        if any(s.no_curve == "no_records" for s in spaces):
            no_curve = ("This trace has no allocation records (TensorFlow 1.x before records existed): "
                        "allocated and output bytes are shown, but there is no curve and no at-peak figure.")
        elif clusters:
            no_curve = ("No allocation was recorded during this step, so there is no curve and no at-peak figure; "
                        "output bytes are shown.")
        else:
            no_curve = ("Nothing was allocated during this step: its outputs are buffers that existed before it "
                        "(variable reads, constants), so there is no curve and no at-peak figure; output bytes "
                        "are shown.")
        message = no_curve if message is None else f"{no_curve} {message}"
    if clusters:
        message = f"{message} {xla_clusters_note(clusters)}" if message else xla_clusters_note(clusters)
    if programs := xla_programs_note(spaces):
        message = f"{message} {programs}" if message else programs
    if unnamed := unattributed_note(spaces):  # a profile's, where TensorFlow wrote `(null)`
        message = f"{message} {unnamed}" if message else unnamed
    if python := python_outputs_note(spaces):
        message = f"{message} {python}" if message else python
    return StepAnalysis(trace, spaces, "ok", message)


# tf.numpy_function's and tf.py_function's ops: what they return, Python made (a numpy array, an eager tensor).
PYTHON_OP_TYPES = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
_NOTED_PYTHON_OUTPUT_BYTES = 64 << 10  # a few scalars returned from Python are nothing to size a step by


def python_outputs_note(spaces: list[SpaceAnalysis]) -> str | None:
    """Where ops running Python (tf.numpy_function, tf.py_function) return 64 KiB or more that the step's
    records do not hold: those tensors were made by Python, outside the records (a trial's augmentation
    returned 2 x 768 KiB that no figure showed, and nothing said so)."""
    for space in spaces:
        if not space.has_curve:
            continue
        names = space.names
        python = names.of_op_type(PYTHON_OP_TYPES.__contains__)
        if not python.any():
            continue
        output, allocated = space.name_column(OUTPUT), space.name_column(ALLOCATED)
        rows = np.flatnonzero(python & (output > allocated))
        unheld = int((output[rows] - allocated[rows]).sum())
        if unheld < _NOTED_PYTHON_OUTPUT_BYTES:
            continue
        rows = rows[np.argsort(-(output[rows] - allocated[rows]), kind="stable")]
        shown = [f"{names.graph_names[i]} ({format_bytes(int(output[i] - allocated[i]))})" for i in rows[:3].tolist()]
        return (f"{'Ops' if rows.size > 1 else 'An op'} running Python on {space.trace.id} (tf.numpy_function, "
                f"tf.py_function) returned {format_bytes(unheld)} that no record holds: {listed(shown)}"
                f"{f' and {rows.size - 3} more' if rows.size > 3 else ''}. Python made those tensors (a numpy "
                "array, an eager op's result) outside the step's records: they count among its outputs only, in no "
                "allocated or at-peak figure, though they take memory while they live.")
    return None


# `(no op)` holding half the peak rise, and 64 KiB at least (not a toy step's scalar), is no runtime's small change.
_NOTED_UNATTRIBUTED_SHARE, _NOTED_UNATTRIBUTED_MIN_BYTES = 0.5, 64 << 10


def unattributed_note(spaces: list[SpaceAnalysis]) -> str | None:
    """Where a profile's `(no op)`, written so by TensorFlow up to 2.17 (`(null)`), holds half a space's
    peak rise or more (64 KiB at least): what it may be, and what to do."""
    for space in spaces:
        if (not space.trace.unattributed_null or not space.has_curve or space.peak_rise_bytes <= 0
                or UNATTRIBUTED not in space.names.raw):
            continue
        held = int(space.name_column(AT_PEAK)[space.names.raw.index(UNATTRIBUTED)])
        if held >= max(_NOTED_UNATTRIBUTED_SHARE * space.peak_rise_bytes, _NOTED_UNATTRIBUTED_MIN_BYTES):
            return (f"`{UNATTRIBUTED}` holds {held / space.peak_rise_bytes:.0%} of the peak rise on {space.trace.id}: "
                    "allocations TensorFlow wrote with no op (`(null)`), as versions up to 2.17 do for the buffers of "
                    "a function XLA compiled (a Keras `fit` with `jit_compile=True`): profile a step compiled "
                    "without XLA (`jit_compile=False`) to see them by layer.")
    return None


def xla_clusters(spaces: list[SpaceAnalysis]) -> list[str]:
    """The XLA clusters a step ran (the names of its `_XlaRun` / `XlaLaunch` executions), once each."""
    found: dict[str, None] = {}
    for space in spaces:
        names = space.names
        if not ran_xla_clusters(names):
            continue
        for code, op_type in enumerate(names.op_type_names):
            if op_type in XLA_CLUSTER_OP_TYPES:  # by graph name: a GPU stream's entry is its node's
                found.update(dict.fromkeys(names.graph_names[i] for i in np.flatnonzero(names.op_code == code).tolist()))
    return list(found)


def xla_clusters_note(clusters: list[str]) -> str:
    """What a step's note says of the XLA clusters it ran."""
    shown = ", ".join(clusters[:3]) + (f" and {len(clusters) - 3} more" if len(clusters) > 3 else "")
    return (f"XLA ran {len(clusters)} compiled cluster{'s' if len(clusters) != 1 else ''} in this step ({shown}): "
            "TensorFlow does not record what XLA allocates inside a cluster, so that memory is missing from these "
            f"figures (the allocator's own readings, where the trace has them, include it): {XLA_OFF_ADVICE}.")


NOTED_PROGRAM_SHARE = 0.1  # XLA programs holding less of the peak rise than this go without a note


def _holds_updated_arguments(spaces) -> bool:
    """Whether a JAX program's new values of its own arguments are among the spaces' names (a TensorFlow
    program's profile has none: its note had spoken of JAX, trial AL)."""
    prefix = UPDATED_ARGUMENTS + "/"
    return any(space.names.any_leaf_starting_with("scope", prefix) for space in spaces)


def _programs_held(spaces: list[SpaceAnalysis]) -> tuple | None:
    """What XLA programs hold in the space `xla_programs_note` reads (the device memory's where they
    hold some, else the host's; the space with the largest rise): (device memory, rise, their share
    of the peak rise, the share of their bytes placed by op, of unused scratch, the most unused
    scratch's name, the programs' names); None where no program holds or allocates anything."""
    held = []
    for space in spaces:
        programs = space.xla_programs()
        if not programs or not space.has_curve or space.peak_rise_bytes <= 0:
            continue
        total = sum(p.at_peak_bytes for p in programs)
        share = min(total / space.peak_rise_bytes, 1.0)
        placed, unused = sum(p.placed_bytes for p in programs), sum(p.unused_scratch_bytes for p in programs)
        placed_share, unused_share = (placed / total, unused / total) if total > 0 else (0.0, 0.0)
        most_unused = max(programs, key=lambda p: p.unused_scratch_bytes)
        held.append((space.trace.memory_kind == DEVICE_MEMORY, space.peak_rise_bytes, share, placed_share,
                     unused_share, f"{most_unused.name}/{UNUSED_SCRATCH}", [p.name for p in programs[:16]]))
    return max(held, key=lambda entry: entry[:2]) if held else None


def xla_programs_share(spaces: list[SpaceAnalysis]) -> float:
    """The share of the step's peak rise its XLA programs hold, as its note says it (0 where none)."""
    held = _programs_held(spaces)
    return held[2] if held is not None else 0.0


def xla_programs_note(spaces: list[SpaceAnalysis]) -> str | None:
    """What a step's note says where XLA programs (a profile's `XLA program` nodes: TensorFlow's
    jit_compile, Keras 3's default on a GPU, JAX) hold much of the peak: their buffers are a few
    blocks per program, shown by the ops XLA placed in them where the profile keeps the program's
    HLO (sources/xplane/hlo.py), else as the program. Their share is the device memory's where
    they hold some (else the host's), the space with the largest rise; None where they hold under
    a tenth of it."""
    held = _programs_held(spaces)
    if held is None:
        return None
    _, _, share, placed_share, unused_share, most_unused, programs = held
    if share < NOTED_PROGRAM_SHARE:
        return None
    shown = ", ".join(programs[:3]) + (" and more" if len(programs) > 3 else "")
    note = f"XLA programs ran in this step, holding {share:.0%} of the peak rise: {shown}. "
    if placed_share > 0:
        note += (
            "XLA allocates a program's buffers itself, a few blocks per run that name no op. They are shown by the "
            "ops whose values XLA placed in them (op type `XLA program`), read from the program's compiled HLO in "
            "the profile: an output block by the op that made it" + (
                f" (a new value of one of a JAX program's own arguments, not donated, by that argument: "
                f"`{UPDATED_ARGUMENTS}/...`)" if _holds_updated_arguments(spaces) else "")
            + ", the scratch block by the values live at its own peak. That places "
            f"{placed_share:.0%} of the programs' bytes at the peak")
        if unused_share >= 0.005:
            note += (f"; {unused_share:.0%} is scratch that no value holds at the block's own peak "
                     f"(`{most_unused}`): XLA's layout keeps it for values live at other times")
        rest = 1.0 - placed_share - unused_share
        if rest >= 0.005:
            note += (f"; the rest, {rest:.0%}, stays the program's node: the allocator's rounding, and the blocks of "
                     "runs the profile's HLO does not match")
        return note + ". The Profile tab's Memory Viewer shows the same buffers one by one."
    note += ("XLA allocates a program's buffers itself, in blocks that name no op, so they show as the program's node "
             "(op type `XLA program`), not by op or layer.")
    if any(map(tensorflow_xla_program, programs)):
        note += (" To see them by layer, profile a step compiled without XLA (`jit_compile=False`; Keras 3 "
                 "compiles with XLA by default where there is a GPU).")
    return note + " The Profile tab's Memory Viewer shows what XLA placed in a program's buffers."


def failed_step(status: str, message: str, source: str = "run_metadata") -> StepAnalysis:
    """A step that could not be analysed (corrupt bytes, no blob)."""
    trace = empty_trace()
    trace.source = source
    return StepAnalysis(trace, [], status, message)
