"""Figures for one traced step: curve, peak, at-peak attribution, scope trees.

Every figure in DESIGN.md has its home here; the CLI, the plugin routes and
the tests all read them from a `StepAnalysis`. Plain Python + numpy.
"""

from __future__ import annotations

import collections
import functools
import itertools
import operator
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import numpy as np

from . import names as names_mod
from ._numeric import scatter_sum
from .trace import SpaceTrace, Trace, empty_trace

# Column order of the figure matrix (one row per execution / tree node).
FIGURES = (
    "at_peak_bytes",
    "allocated_bytes",
    "op_peak_bytes",
    "live_bytes",
    "output_bytes",
    "temp_bytes",
    "persistent_bytes",
)
AT_PEAK, ALLOCATED, OP_PEAK, LIVE, OUTPUT, TEMP, PERSISTENT = range(len(FIGURES))

CATEGORIES = (
    "parameters",
    "inputs",
    "activations",
    "gradients",
    "optimizer",
    "temporaries",
    "other",
)
PARAMETERS, INPUTS, ACTIVATIONS, GRADIENTS, OPTIMIZER, TEMPORARIES, OTHER = range(len(CATEGORIES))

GROUPS = ("layer", "scope")
SELF = "(self)"
UNKNOWN_OP = "(unknown)"

_VARIABLE_OPS = frozenset(
    {"VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "_ReadVariablesOp",
     "VarIsInitializedOp", "Assign", "AssignVariableOp", "ResourceGather"}
)
_INPUT_OPS = frozenset(
    {"_Arg", "Placeholder", "PlaceholderWithDefault", "IteratorGetNext", "IteratorV2",
     "OneShotIterator", "MultiDeviceIteratorGetNextFromShard", "_Recv"}
)
_OTHER_OPS = frozenset(
    {"Const", "HostConst", "Shape", "ShapeN", "Size", "Rank", "NoOp", "_Retval",
     "BroadcastGradientArgs", "_SOURCE", "_SINK"}
)
_OPTIMIZER_NAMES = frozenset(
    {"Adam", "AdamW", "SGD", "Momentum", "RMSProp", "Adagrad", "Adadelta", "Adamax",
     "Nadam", "Ftrl", "GradientDescent", "LAMB", "Lamb", "training", "optimizer"}
)
_SLOT_RE = re.compile(r"^(?:Adam|Momentum|RMSProp|Adagrad|Adadelta|Ftrl|Adamax|Nadam)(?:_\d+)?$")


_GRADIENT_RE = re.compile(r"^(?:gradients|gradient_tape)(?:_\d+)?(?:/|$)|_grad(?:/|$)")


@functools.lru_cache(maxsize=1 << 18)  # the same names recur in every step of a run
def categorise(path: str, op_type: str, kind: str) -> int:
    """Heuristic category of a node from its name, op type and kind.

    Documented in the README ("Categories"). Executions with persistent
    memory become parameters, and bytes freed inside a running op become
    temporaries (see `SpaceAnalysis`): both need per-execution figures.
    """
    if kind == names_mod.FEED or op_type in _INPUT_OPS:
        return INPUTS
    if kind == names_mod.PLUMBING:
        return OTHER
    if op_type.startswith(("Apply", "ResourceApply", "ResourceSparseApply", "SparseApply")):
        return OPTIMIZER
    first, _, rest = path.partition("/")
    if first in _OPTIMIZER_NAMES or first in ("beta1_power", "beta2_power"):
        return OPTIMIZER
    if rest and op_type in _VARIABLE_OPS and _SLOT_RE.match(path.rsplit("/", 1)[-1]):
        return OPTIMIZER
    if ("_grad" in path or path.startswith("gradient")) and _GRADIENT_RE.search(path):  # a cheap test first
        return GRADIENTS
    if op_type in _VARIABLE_OPS:
        return PARAMETERS
    if op_type in _OTHER_OPS:
        return OTHER
    return ACTIVATIONS


@dataclass
class Curve:
    """The step function of bytes over time (relative to the step's start)."""

    time_us: np.ndarray  # distinct event times, sorted
    rise_bytes: np.ndarray  # bytes over the start after all events at that time
    group_end: np.ndarray  # index (in sorted events) of the last event at each time
    event_order: np.ndarray  # argsort of events by time (stable)
    peak_index: int  # into time_us; -1 when the curve never rises
    peak_time_us: int
    peak_rise_bytes: int


def build_curve(space: SpaceTrace) -> Curve:
    """Running total of allocation records; the peak is its maximum."""
    order = np.argsort(space.event_time_us, kind="stable")
    times = space.event_time_us[order]
    running = np.cumsum(space.event_bytes[order])
    if times.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Curve(empty, empty, empty, order, -1, 0, 0)
    last_of_group = np.flatnonzero(np.diff(times)) if times.size > 1 else np.zeros(0, dtype=np.int64)
    group_end = np.append(last_of_group, times.size - 1)
    time_us = times[group_end]
    rise = running[group_end]
    peak_index = int(np.argmax(rise))
    if rise[peak_index] <= 0:
        return Curve(time_us, rise, group_end, order, -1, 0, 0)
    return Curve(time_us, rise, group_end, order, peak_index, int(time_us[peak_index]), int(rise[peak_index]))


@dataclass
class ScopeTree:
    """Scope tree for one grouping; node 0 is the root ("")."""

    paths: list[str]
    index: dict[str, int]
    parent: np.ndarray
    kinds: list[str]  # "scope", "node", "self"
    children: list[list[int]]
    figures: np.ndarray  # (tree nodes, FIGURES)
    categories: np.ndarray  # (tree nodes, CATEGORIES) at-peak bytes
    exec_count: np.ndarray
    subtree_size: np.ndarray  # tree nodes in each subtree (preorder: node i spans [i, i + size))
    leaf_of_exec: np.ndarray
    top_name: np.ndarray  # per tree node: the distinct name holding most at peak (then allocated), -1 if none

    @cached_property
    def exec_order(self) -> np.ndarray:
        """Executions sorted by their leaf's preorder position (built on first use)."""
        return np.argsort(self.leaf_of_exec, kind="stable")

    @cached_property
    def exec_range(self) -> np.ndarray:
        """(tree nodes, 2): the slice of exec_order inside each subtree."""
        sorted_leaves = self.leaf_of_exec[self.exec_order]
        nodes = np.arange(len(self.paths))
        first = np.searchsorted(sorted_leaves, nodes, side="left")
        last = np.searchsorted(sorted_leaves, nodes + self.subtree_size, side="left")
        return np.stack([first, last], axis=1)

    def executions(self, node: int) -> np.ndarray:
        begin, end = self.exec_range[node]
        return self.exec_order[begin:end]


_SCOPE, _SELF, _NODE = range(3)
_KIND_NAMES = np.array(["scope", "self", "node"])


def _preorder_parents(depth: np.ndarray) -> np.ndarray:
    """Parent of each node of a tree listed in preorder (root first, parent -1): the
    last node before it one level up."""
    parent = np.full(depth.size, -1, dtype=np.int64)
    above = np.flatnonzero(depth == 0)
    for level in range(1, int(depth.max(initial=0)) + 1):
        here = np.flatnonzero(depth == level)
        parent[here] = above[np.searchsorted(above, here) - 1]
        above = here
    return parent


def build_tree(leaf_paths: list[str], leaf_of_name: np.ndarray, name_table: np.ndarray,
               name_of_exec: np.ndarray, figure_count: int) -> ScopeTree:
    """Aggregate distinct node names into a scope tree; a scope's own nodes go to `(self)`.

    `name_table` holds, per distinct runtime name, its summed figures, then
    at-peak bytes per category, then its execution count; `leaf_of_name` maps
    each distinct name to its leaf path. Written with list comprehensions and
    numpy: big steps have thousands of distinct names.
    """
    scopes = {""}
    for path in leaf_paths:
        slash = path.rfind("/")
        while slash > 0:
            prefix = path[:slash]
            if prefix in scopes:
                break
            scopes.add(prefix)
            slash = path.rfind("/", 0, slash)
    self_suffix = "/" + SELF
    is_self = np.fromiter(map(scopes.__contains__, leaf_paths), dtype=bool, count=len(leaf_paths))
    leaf_tree_paths = [f"{p}{self_suffix}" if own else p for p, own in zip(leaf_paths, is_self.tolist())]
    # Sorting with "/" as the smallest character gives a preorder: "" first and
    # every subtree contiguous (names never hold NUL).
    keys = sorted([p.replace("/", "\x00") for p in scopes.union(leaf_tree_paths)])
    all_paths = [k.replace("\x00", "/") for k in keys]
    count = len(all_paths)
    index = dict(zip(all_paths, range(count)))
    depth = np.fromiter(map(str.count, keys, itertools.repeat("\x00")), dtype=np.int64, count=count) + 1
    depth[index.get(self_suffix, 0)] = 1  # nodes named "" (not TensorFlow's) sit in the root's "/(self)"
    depth[0] = 0
    parent = _preorder_parents(depth)
    parent_list = parent.tolist()
    leaf_index = np.fromiter(map(index.__getitem__, leaf_tree_paths), dtype=np.int64, count=len(leaf_tree_paths))
    kind = np.full(count, _NODE)
    kind[np.fromiter(map(index.__getitem__, scopes), dtype=np.int64, count=len(scopes))] = _SCOPE
    kind[leaf_index[is_self]] = _SELF
    kinds = _KIND_NAMES[kind].tolist()
    tree_node_of_name = leaf_index[leaf_of_name] if leaf_of_name.size else np.zeros(0, dtype=np.int64)
    # Names -> their leaves, then leaves -> ancestors one level at a time. Figures,
    # categories, execution counts and subtree sizes travel as one matrix.
    table = scatter_sum(tree_node_of_name, name_table, count)
    table = np.concatenate([table, np.ones((count, 1), dtype=np.int64)], axis=1)
    for level in range(int(depth.max()), 0, -1):
        at_level = np.flatnonzero(depth == level)
        table += scatter_sum(parent[at_level], table[at_level], count)
    figures = np.ascontiguousarray(table[:, :figure_count])
    subtree_size = table[:, -1]
    top_name = _top_name(tree_node_of_name, name_table, subtree_size)
    # Children largest first (at peak, then allocated, then name), as every view wants.
    children: list[list[int]] = [[] for _ in range(count)]
    ranked = np.lexsort((np.arange(count), -figures[:, ALLOCATED], -figures[:, AT_PEAK]))
    for node in ranked.tolist():
        if node:
            children[parent_list[node]].append(node)
    return ScopeTree(
        paths=all_paths,
        index=index,
        parent=parent,
        kinds=kinds,
        children=children,
        figures=figures,
        categories=np.ascontiguousarray(table[:, figure_count:-2]),
        exec_count=np.ascontiguousarray(table[:, -2]),
        subtree_size=subtree_size,
        leaf_of_exec=tree_node_of_name[name_of_exec] if name_of_exec.size else name_of_exec,
        top_name=top_name,
    )


def _top_name(tree_node_of_name: np.ndarray, name_table: np.ndarray, subtree_size: np.ndarray) -> np.ndarray:
    """Per tree node, the distinct name in its subtree that holds most at peak, then allocated.

    Names sorted by their leaf's preorder position make every subtree a
    contiguous run, so this is one range-minimum of ranks per node.
    """
    count = subtree_size.size
    best = np.full(count, -1, dtype=np.int64)
    if tree_node_of_name.size == 0:
        return best
    ranked = np.lexsort((np.arange(len(name_table)), -name_table[:, ALLOCATED], -name_table[:, AT_PEAK]))
    rank = np.empty_like(ranked)
    rank[ranked] = np.arange(ranked.size)
    order = np.argsort(tree_node_of_name, kind="stable")
    positions = tree_node_of_name[order]
    nodes = np.arange(count)
    low = np.searchsorted(positions, nodes, side="left")
    high = np.searchsorted(positions, nodes + subtree_size, side="left")
    filled = np.flatnonzero(high > low)
    if filled.size:
        bounds = np.empty(2 * filled.size, dtype=np.int64)
        bounds[0::2], bounds[1::2] = low[filled], high[filled]
        # reduceat over [low, high) pairs; the odd slots (between ranges) are discarded.
        lowest = np.minimum.reduceat(np.append(rank[order], ranked.size), bounds)[0::2]
        best[filled] = ranked[lowest]
    return best


class SpaceAnalysis:
    """All figures for one memory space (device + allocator) of a step."""

    def __init__(self, space: SpaceTrace, name_infos: list[names_mod.NameInfo],
                 name_op_types: list[str], node_categories: np.ndarray) -> None:
        self.trace = space
        # Executions point (name_code) into tables of the space's distinct runtime names.
        name_code = self.name_code = space.name_code
        self.name_infos = name_infos
        self.name_op_types = name_op_types
        self.op_type_names = sorted(set(name_op_types))
        op_code = {name: i for i, name in enumerate(self.op_type_names)}
        self.name_op_code = np.asarray([op_code[t] for t in name_op_types], dtype=np.int64)
        self.exec_op_code = self.name_op_code[name_code] if name_code.size else name_code
        self.curve = build_curve(space)
        self.has_curve = space.has_records
        self._trees: dict[str, ScopeTree] = {}
        self._lock = threading.Lock()

        n = space.exec_count
        at_peak = self._at_peak_by_exec()
        # Per-execution figures, one array per FIGURES entry (no copies of the trace's columns).
        self.exec_columns = (at_peak, space.allocated, space.op_peak, space.live, space.output, space.temp,
                             space.persistent)
        category = node_categories[name_code] if n else np.zeros(0, dtype=np.int64)
        kept_across_steps = (space.persistent > 0) & np.isin(category, (ACTIVATIONS, OTHER))
        self.category = np.where(kept_across_steps, PARAMETERS, category)
        # At-peak bytes split: an execution's category, except what it had freed before it ended.
        self.temporaries = self._temporaries_at_peak(at_peak)
        self.name_table = self._name_table(len(name_infos))
        self.baseline, self.start_bytes, self.snapshot_gap = self._baseline()

    @cached_property
    def exec_figures(self) -> np.ndarray:
        """(executions, FIGURES), built on first use (node tables, scope details)."""
        if self.trace.exec_count == 0:
            return np.zeros((0, len(FIGURES)), dtype=np.int64)
        return np.stack(self.exec_columns, axis=1)

    def _name_table(self, names: int) -> np.ndarray:
        """Per distinct runtime name: FIGURES, at-peak bytes per category, executions.

        What the scope trees and whole-step op types aggregate (thousands of rows
        instead of every execution); built column by column to keep big
        temporaries out of the way.
        """
        code = self.name_code
        width = len(CATEGORIES)
        by_category = scatter_sum(code * width + self.category, self.exec_columns[AT_PEAK] - self.temporaries,
                                  names * width).reshape(names, width)
        by_category[:, TEMPORARIES] += scatter_sum(code, self.temporaries, names)
        columns = [scatter_sum(code, column, names) for column in self.exec_columns]
        return np.column_stack([*columns, by_category, np.bincount(code, minlength=names)]).astype(np.int64)

    def category_split(self, rows) -> np.ndarray:
        """At-peak bytes per category over some executions (an index array or a slice)."""
        at_peak = self.exec_columns[AT_PEAK][rows] - self.temporaries[rows]
        out = scatter_sum(self.category[rows], at_peak, len(CATEGORIES))
        out[TEMPORARIES] += int(self.temporaries[rows].sum())
        return out

    # -- at-peak attribution ------------------------------------------------

    def _events_up_to_peak(self) -> np.ndarray:
        """Indices of events at or before the peak time (in time order)."""
        curve = self.curve
        if curve.peak_index < 0:
            return np.zeros(0, dtype=np.int64)
        return curve.event_order[: curve.group_end[curve.peak_index] + 1]

    def _at_peak_by_exec(self) -> np.ndarray:
        """Net bytes each execution holds at the peak; sums to the peak rise exactly."""
        events = self._events_up_to_peak()
        space = self.trace
        return scatter_sum(space.event_exec[events], space.event_bytes[events], space.exec_count)

    def _temporaries_at_peak(self, at_peak: np.ndarray) -> np.ndarray:
        """Bytes held at the peak by a running op and freed before it ended."""
        space, curve = self.trace, self.curve
        n = space.exec_count
        if curve.peak_index < 0 or n == 0:
            return np.zeros(n, dtype=np.int64)
        peak = curve.peak_time_us
        after_peak = curve.event_order[curve.group_end[curve.peak_index] + 1:]
        execs = space.event_exec[after_peak]
        within_op = space.event_time_us[after_peak] <= space.end_us[execs]
        net_until_end = scatter_sum(execs[within_op], space.event_bytes[after_peak][within_op], n)
        running = (space.start_us <= peak) & (peak <= space.end_us)
        freed = np.where(running, -net_until_end, 0)
        return np.clip(freed, 0, np.maximum(at_peak, 0))

    def _baseline(self) -> tuple[str, int | None, int | None]:
        """Bytes in use before the step, from the allocator's own snapshots."""
        space, curve = self.trace, self.curve
        if space.snapshot_bytes.size == 0:
            return "none", None, None
        if curve.time_us.size == 0:
            return "allocator_bytes_in_use", int(np.median(space.snapshot_bytes)), None
        at = np.searchsorted(curve.time_us, space.snapshot_time_us, side="right") - 1
        rise_then = np.where(at >= 0, curve.rise_bytes[np.maximum(at, 0)], 0)
        offsets = space.snapshot_bytes - rise_then
        start = int(np.median(offsets))
        gap = int(np.max(np.abs(offsets - start)))
        if start < 0:  # readings that cannot hold the step's own records: no usable baseline
            return "none", None, gap
        return "allocator_bytes_in_use", start, gap

    # -- trees ----------------------------------------------------------------

    def tree(self, group: str) -> ScopeTree:
        if group not in GROUPS:
            raise ValueError(f"unknown group {group!r}")
        with self._lock:
            tree = self._trees.get(group)
            if tree is None:
                paths = map(operator.attrgetter("path"), self.name_infos)
                if group == "layer":
                    paths = map(names_mod.layer_path, paths)
                # Distinct leaf paths in first-seen order; a new one gets the next number.
                position: collections.defaultdict = collections.defaultdict()
                position.default_factory = position.__len__
                leaf_of_node = np.fromiter(map(position.__getitem__, paths), dtype=np.int64, count=len(self.name_infos))
                tree = self._trees[group] = build_tree(list(position), leaf_of_node, self.name_table, self.name_code,
                                                       len(FIGURES))
            return tree

    # -- step-level figures -----------------------------------------------------

    @property
    def peak_rise_bytes(self) -> int:
        return self.curve.peak_rise_bytes

    def peak_exec(self) -> int | None:
        """The execution whose event made the peak (the op running then)."""
        curve = self.curve
        if curve.peak_index < 0:
            return None
        return int(self.trace.event_exec[curve.event_order[curve.group_end[curve.peak_index]]])

    def largest_at_peak_exec(self) -> int | None:
        """The execution holding the most bytes at the peak (None when nothing is held)."""
        at_peak = self.exec_columns[AT_PEAK]
        if at_peak.size == 0 or int(at_peak.max()) <= 0:
            return None
        return int(np.argmax(at_peak))

    def totals(self) -> np.ndarray:
        return np.array([int(column.sum()) for column in self.exec_columns], dtype=np.int64)

    def by_op_type(self, execs: np.ndarray | None = None) -> list[tuple[str, int, np.ndarray]]:
        """(op type, executions, figures) sorted by at-peak then allocated."""
        unique = self.op_type_names
        if execs is None:  # the whole step: from the per-name table (a few thousand rows)
            width = len(FIGURES)
            sums = scatter_sum(self.name_op_code, self.name_table[:, :width], len(unique))
            counts = scatter_sum(self.name_op_code, self.name_table[:, -1], len(unique))
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
        temp = np.minimum(self.exec_columns[TEMP][rows], allocated_column)
        allocated = scatter_sum(self.category[rows], allocated_column - temp, len(CATEGORIES))
        allocated[TEMPORARIES] += int(temp.sum())
        return [(CATEGORIES[i], int(at_peak[i]), int(allocated[i])) for i in range(len(CATEGORIES))]

    def op_type(self, exec_index: int) -> str:
        return self.name_op_types[self.name_code[exec_index]]

    def info(self, exec_index: int) -> names_mod.NameInfo:
        return self.name_infos[self.name_code[exec_index]]

    def kernel_of(self, exec_index: int) -> str | None:
        return names_mod.op_type_from_label(self.trace.label_of.get(self.trace.name(exec_index), ""))


class StepAnalysis:
    """A decoded, analysed step: one SpaceAnalysis per memory space."""

    def __init__(self, trace: Trace, spaces: list[SpaceAnalysis], status: str, message: str | None):
        self.trace = trace
        self.spaces = spaces
        self.status = status
        self.message = message
        self._by_id = {s.trace.id: s for s in spaces}
        self._memo: dict = {}
        self._memo_lock = threading.Lock()

    def memoized(self, key, compute):
        """Results derived from this (immutable) step, computed once."""
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]

    def space(self, space_id: str | None) -> SpaceAnalysis | None:
        if space_id is None:
            return self._by_id.get(self.default_space_id) if self.spaces else None
        return self._by_id.get(space_id)

    @property
    def default_space_id(self) -> str | None:
        """An accelerator's main allocator if any, else the space with the highest peak."""
        if not self.spaces:
            return None
        accelerators = [s for s in self.spaces if s.trace.device_type not in ("CPU",)]
        pool = accelerators or self.spaces
        best = max(pool, key=lambda s: (s.peak_rise_bytes, int(s.trace.allocated.sum())))
        return best.trace.id


NO_MEMORY_HELP = (
    "Trace with memory: run the step with "
    "options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE) "
    "and run_metadata=tf.compat.v1.RunMetadata(), then writer.add_run_metadata(run_metadata, 'step_N')."
)


def resolve_op_type(raw_name: str, info: names_mod.NameInfo, label: str,
                    source_ops: Mapping[str, str], graph_ops: Mapping[str, str] | None) -> str:
    """Op type: fixed by the name, else the source's own (partition graphs), the run graph, the label."""
    if info.fixed_op_type:
        return info.fixed_op_type
    runtime = names_mod.strip_stream_suffix(raw_name)
    op = source_ops.get(runtime)
    if op:
        return op
    if graph_ops is not None:
        op = graph_ops.get(info.graph_name)
        if op:
            return op
    return names_mod.op_type_from_label(label) or UNKNOWN_OP


def analyse(trace: Trace, graph_ops: Mapping[str, str] | None = None) -> StepAnalysis:
    """Analyse a decoded step. `graph_ops` maps graph node names to op types."""
    if trace.node_stat_count == 0:
        return StepAnalysis(trace, [], "empty",
                            "This step has no step stats: it was written without tracing "
                            "(or by TF2 eager/Keras, whose memory is in profiler files). " + NO_MEMORY_HELP)
    spaces = []
    for space in trace.spaces:
        # Names repeat (loops, several steps): classify each distinct name once.
        distinct = space.distinct_names
        infos = list(map(names_mod.classify, distinct))
        labels = space.label_of
        op_types = [resolve_op_type(name, info, labels.get(name, ""), trace.op_types, graph_ops)
                    for name, info in zip(distinct, infos)]
        get = operator.attrgetter
        categories = np.fromiter(map(categorise, map(get("path"), infos), op_types, map(get("kind"), infos)),
                                 dtype=np.int64, count=len(infos))
        spaces.append(SpaceAnalysis(space, infos, op_types, categories))
    has_bytes = any(int(s.trace.allocated.sum()) or int(s.trace.output.sum()) or s.has_curve for s in spaces)
    if not has_bytes:
        return StepAnalysis(trace, [], "no_memory",
                            f"This step was traced ({trace.node_stat_count} node stats) but carries no memory "
                            "figures (traced below FULL_TRACE?). " + NO_MEMORY_HELP)
    message = None
    if not any(s.has_curve for s in spaces):
        message = ("This trace has no allocation records (TensorFlow 1.x before records existed): "
                   "allocated and output bytes are shown, but there is no curve and no at-peak figure.")
    return StepAnalysis(trace, spaces, "ok", message)


# -- downsampled curves ---------------------------------------------------------


@dataclass
class SampledCurve:
    """At most N buckets of a step function, keeping each bucket's min and max."""

    time_us: np.ndarray  # time at which each bucket reaches its max
    min_bytes: np.ndarray
    max_bytes: np.ndarray
    position: np.ndarray  # index into the input points of each bucket's max


def downsample(time_us: np.ndarray, values: np.ndarray, points: int, start_value: int = 0) -> SampledCurve:
    """Min/max per time bucket; the global maximum is always one of the points.

    `values[i]` holds from `time_us[i]` until the next time; before the first
    time the function is `start_value` (it counts towards the first bucket's min).
    """
    n = time_us.size
    if n <= points:
        index = np.arange(n)
        return SampledCurve(time_us.copy(), values.copy(), values.copy(), index)
    span = int(time_us[-1] - time_us[0]) + 1
    bucket = ((time_us - time_us[0]) * points) // span
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    maxima = np.maximum.reduceat(values, starts)
    minima = np.minimum.reduceat(values, starts)
    # The value carried into a bucket from the one before is part of its range.
    carried = np.r_[start_value, values[starts[1:] - 1]]
    minima = np.minimum(minima, carried)
    bucket_of_point = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
    is_max = values == maxima[bucket_of_point]
    first_max = np.flatnonzero(is_max)
    _, first_in_bucket = np.unique(bucket_of_point[first_max], return_index=True)
    position = first_max[first_in_bucket]
    return SampledCurve(time_us[position], minima, maxima, position)


def series_at(analysis: "SpaceAnalysis", execs: np.ndarray, group_positions: np.ndarray) -> np.ndarray:
    """What a set of executions holds (relative bytes) after each given event group."""
    space, curve = analysis.trace, analysis.curve
    member = np.zeros(space.exec_count, dtype=bool)
    member[execs] = True
    ordered = curve.event_order
    contributions = np.where(member[space.event_exec[ordered]], space.event_bytes[ordered], 0)
    running = np.cumsum(contributions)
    if group_positions.size == 0:
        return np.zeros(0, dtype=np.int64)
    return running[curve.group_end[group_positions]]


def failed_step(status: str, message: str) -> StepAnalysis:
    """A step that could not be analysed (corrupt bytes, no blob)."""
    return StepAnalysis(empty_trace(), [], status, message)
