"""Two traced steps side by side: what grew, scope by scope (issue 13).

Step A is compared with a baseline step B, from any run and either trace source
(both are `StepAnalysis`), one memory space each. For every entry of either
step's scope tree, every op type and every category: A's and B's bytes at their
own peaks, allocated and output, and A - B. Each step's at-peak bytes add up to
its own peak rise, so the differences of the top-level entries, of the op types
and of the categories each add up to the difference of the two peak rises,
exactly. Plain Python + numpy.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .analysis import GROUPS, SpaceAnalysis, StepAnalysis
from .figures import ALLOCATED, AT_PEAK, OUTPUT, TEMP, other_chunks
from .names import renumbering
from .scope_tree import SELF, ScopeTree

# The FIGURES columns compared; categories carry the first two (as everywhere they are shown).
COMPARED = (AT_PEAK, ALLOCATED, OUTPUT)
CATEGORY_COMPARED = (AT_PEAK, ALLOCATED)

ADDED, REMOVED, CHANGED, SAME = "added", "removed", "changed", "same"  # added: in A only; removed: in B only
SAME_MODEL_SHARE = 0.5  # what two steps of one model have in common, at least (of the smaller's): entries here, layers in the what-if
SELF_KIND = "self"  # the kind of a `(self)` entry


class NotComparable(ValueError):
    """A step that was not analysed (corrupt, no memory) or that has no such memory space."""


@dataclass
class Table:
    """Rows found in A, B or both: each side's figures (zeros where a row is absent) and A - B."""

    names: list[str]
    columns: tuple[int, ...]  # the FIGURES index of each column of `a` and `b`
    a: np.ndarray  # (rows, columns)
    b: np.ndarray
    in_a: np.ndarray  # bool per row
    in_b: np.ndarray
    counted: np.ndarray  # bool per column: whether it can differ (at peak needs a curve on both sides)
    a_count: np.ndarray | None = None  # executions per row (op types)
    b_count: np.ndarray | None = None
    a_temp: np.ndarray | None = None  # temp bytes per row (scopes, op types), for `same_requests`
    b_temp: np.ndarray | None = None

    @cached_property
    def delta(self) -> np.ndarray:
        return self.a - self.b

    @cached_property
    def status(self) -> np.ndarray:
        changed = (self.delta[:, self.counted] != 0).any(axis=1)
        both = np.where(changed, CHANGED, SAME)
        return np.where(self.in_a & self.in_b, both, np.where(self.in_a, ADDED, REMOVED))

    def column(self, figure: int) -> int:
        return self.columns.index(figure)

    @cached_property
    def same_requests(self) -> np.ndarray:
        """Per row: in both, its outputs requesting as many bytes on each side, but the allocator
        giving them other chunks (allocated bytes differ): a change of the allocator's, not of the
        model's (a BFC allocator gave one 8 MiB request an 8 MiB chunk in one step, 14.5 MiB in the
        next). Only where the chunks can be all it allocated (a chunk is under twice its request,
        so its outputs request at least half its allocated bytes, on each side: not an allocation
        that requests no output, the eager copy of a batch) and it holds bytes at the peak on
        both sides, changed no more than its chunks did (else the peak's moment moved, not the
        chunks alone: a scope whose update ran after one side's peak). The chunks are what its ops
        allocated less their temp bytes, where the table has them: a buffer an op allocates beside
        its outputs (its scratch, an optimizer's copy of the variable it updates: 3 x 32 MiB of
        Adam's in a first step) is no output's chunk. False where the table has no output or
        allocated column."""
        if OUTPUT not in self.columns or ALLOCATED not in self.columns:
            return np.zeros(len(self.names), dtype=bool)
        output, allocated = self.column(OUTPUT), self.column(ALLOCATED)
        a_chunks, b_chunks = self.a[:, allocated], self.b[:, allocated]
        if self.a_temp is not None and self.b_temp is not None:
            a_chunks, b_chunks = a_chunks - self.a_temp, b_chunks - self.b_temp
        chunks = other_chunks(np.stack([self.a[:, output], self.b[:, output]]), np.stack([a_chunks, b_chunks]))
        held = True
        if AT_PEAK in self.columns and self.counted[self.column(AT_PEAK)]:
            at_peak = self.column(AT_PEAK)
            change, grown = self.delta[:, at_peak], a_chunks - b_chunks
            # ... and the chunks' change is as big as the change at the peak, the same way (signs
            # compared, not multiplied: two changes of a few GiB overflow int64).
            held = ((self.a[:, at_peak] > 0) & (self.b[:, at_peak] > 0) & (np.sign(change) * np.sign(grown) >= 0)
                    & (np.abs(change) <= np.abs(grown)))
        return self.in_a & self.in_b & chunks & held

    def ranked_by_change(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows (all, or those given) by absolute difference: at peak, allocated, output, then name."""
        rows = np.arange(len(self.names)) if rows is None else np.asarray(rows, dtype=np.int64)
        size = np.abs(self.delta[rows])
        return rows[self._order(rows, size)]

    def ranked_by_size(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows by the larger of the two sides, at peak then allocated (what a treemap is sized by)."""
        rows = np.arange(len(self.names)) if rows is None else np.asarray(rows, dtype=np.int64)
        size = np.maximum(self.a[rows], self.b[rows])
        return rows[self._order(rows, size)]

    def _order(self, rows: np.ndarray, size: np.ndarray) -> np.ndarray:
        names = np.array([self.names[i] for i in rows.tolist()], dtype=object)
        keys = [names] + [-size[:, k] for k in reversed(range(size.shape[1])) if self.counted[k]]
        return np.lexsort(keys) if rows.size else rows


_EXPLAINED = 100  # a child whose change is its parent's within 1/_EXPLAINED explains it


@dataclass
class ScopeTable(Table):
    """The union of both scope trees: every entry of A's tree or B's, by path."""

    kinds: np.ndarray | None = None  # "scope", "node", "self"
    parent: np.ndarray | None = None  # row of each row's parent, -1 for the root (row 0, path "")
    entry_a: np.ndarray | None = None  # the entry of A's tree each row stands for, -1 where absent
    entry_b: np.ndarray | None = None
    b_own: dict[int, str] = field(default_factory=dict)  # row -> B's own path, where B numbers it otherwise

    def most_specific(self, rows: np.ndarray, figure: int) -> np.ndarray:
        """`rows` less those that only repeat a change: a scope whose child changed by as much (the
        child's path says where; within 1%: a batch norm's `batchnorm/mul_1` and its scope, a few
        hundred bytes apart in 2.4 MiB), and a `(self)` that changed as much as its scope."""
        column = self.column(figure)
        delta = self.delta[:, column]
        child = np.arange(1, len(self.names))
        parent = self.parent[child]
        same_sign = np.sign(delta[child]) == np.sign(delta[parent])
        close = np.abs(delta[parent] - delta[child]) * _EXPLAINED <= np.abs(delta[parent])
        repeats = child[same_sign & close & (delta[child] != 0)]
        repeats = self._within_chain(repeats, delta)
        is_self = self.kinds[repeats] == SELF_KIND
        hidden = np.zeros(len(self.names), dtype=bool)
        hidden[repeats[is_self]] = True
        hidden[self.parent[repeats[~is_self]]] = True
        return rows[~hidden[rows]]

    def listed_by(self, rows: np.ndarray, figure: int) -> dict[int, int]:
        """Of a listing's `rows`, those whose change another of them lists (`most_specific` leaves them out),
        each with that row: a scope's explaining child (itself listed, or listed by another), a `(self)`'s
        scope. A row whose explaining row is not in the listing (cut at its end) is none of them: its change
        shows by it."""
        rows = np.asarray(rows, dtype=np.int64)
        shown = set(self.most_specific(rows, figure).tolist())
        in_listing = set(rows.tolist())
        delta = self.delta[:, self.column(figure)]
        children: dict[int, list[int]] = {}
        for row in rows.tolist():
            children.setdefault(int(self.parent[row]), []).append(row)

        def depth(row: int) -> int:
            count = 0
            while self.parent[row] >= 0:
                row, count = int(self.parent[row]), count + 1
            return count

        out: dict[int, int] = {}
        for row in sorted(in_listing - shown, key=depth, reverse=True):  # children before their scopes
            if self.kinds[row] == SELF_KIND:
                scope = int(self.parent[row])
                if scope in shown or scope in out:
                    out[row] = scope
                continue
            explaining = [child for child in children.get(row, []) if (child in shown or child in out)
                          and self.kinds[child] != SELF_KIND
                          and abs(int(delta[row]) - int(delta[child])) * _EXPLAINED <= abs(int(delta[row]))]
            if explaining:
                out[row] = min(explaining, key=lambda child: abs(int(delta[row]) - int(delta[child])))
        return out

    def _within_chain(self, repeats: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Of the rows that explain their parent's change, those within 1% of the top of their
        chain too (a chain of scopes each explained by its child lists its last one for them all:
        +1000, +991, +982 would drift 1.8% from the first)."""
        parent = self.parent
        is_self = self.kinds == SELF_KIND

        def depth(row: int) -> int:
            count = 0
            while parent[row] >= 0:
                row, count = int(parent[row]), count + 1
            return count

        # Parents first: a row's chain goes up through the rows kept as explaining theirs (hidden in
        # turn), and starts again below one that is listed.
        explains = np.zeros(len(self.names), dtype=bool)
        for row in sorted(repeats.tolist(), key=depth):
            top = int(parent[row])
            while not is_self[row] and explains[top] and not is_self[top] and parent[top] >= 0:
                top = int(parent[top])
            if abs(int(delta[top]) - int(delta[row])) * _EXPLAINED <= abs(int(delta[top])):
                explains[row] = True
        return np.flatnonzero(explains)


class Comparison:
    """Step A's memory space against baseline step B's, in one grouping."""

    def __init__(self, a: SpaceAnalysis, b: SpaceAnalysis, group: str = "layer", renumber: bool = True) -> None:
        """renumber: match B's names numbered anew to A's (`numbered_as_a`); False for two steps of
        one run, whose names are one graph's: two names there are two ops (a GAN's two train ops)."""
        if group not in GROUPS:
            raise ValueError(f"unknown group {group!r}")
        self.a, self.b, self.group, self.renumber = a, b, group, renumber
        self.has_at_peak = a.has_curve and b.has_curve  # without a curve there is no peak to compare
        self.figure = AT_PEAK if self.has_at_peak else ALLOCATED  # what the listings compare

    @property
    def peak_rise_delta_bytes(self) -> int | None:
        return self.a.peak_rise_bytes - self.b.peak_rise_bytes if self.has_at_peak else None

    @cached_property
    def _b_paths(self) -> tuple[list[str], list[tuple[str, str]]]:
        if not self.renumber:
            return self.b.tree(self.group).paths, []
        return numbered_as_a(self.a.tree(self.group), self.b.tree(self.group))

    @property
    def renumbered(self) -> list[tuple[str, str]]:
        """(B's path, A's) of each entry of B named by another number than A names it (see
        `numbered_as_a`), outermost first; empty when B's names are A's."""
        return self._b_paths[1]

    @cached_property
    def scopes(self) -> ScopeTable:
        return _scope_table(self.a.tree(self.group), self.b.tree(self.group), self.has_at_peak, self._b_paths[0])

    @cached_property
    def shared_share(self) -> float:
        """Of the scopes, nodes and `(self)` entries of the side with fewer, the share the other has too
        (matched by name, B's renumbered as A's): about 1 for two steps of one model, little for two models,
        whose comparison then reads every entry as added or removed."""
        table = self.scopes
        entries = np.array([name != "" for name in table.names])  # the root is every step's: not counted
        in_a, in_b = table.in_a & entries, table.in_b & entries
        fewer = min(int(in_a.sum()), int(in_b.sum()))
        return float((in_a & in_b).sum()) / fewer if fewer else 1.0

    @property
    def models_note(self) -> str | None:
        """Where the steps share under half of their entries (`SAME_MODEL_SHARE`): two models, said once."""
        share = self.shared_share
        if share >= SAME_MODEL_SHARE:
            return None
        shown = math.floor(share * 100)  # "50%" would read as half, which is not under it
        return (f"A and B share {shown}% of their scopes and nodes: two different models? They are matched by "
                "name, so most of each step's read as added or removed")

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return dict(zip(self.scopes.names, range(len(self.scopes.names))))

    def row(self, scope: str) -> int | None:
        """The row of a scope path in either step, or None."""
        return self._row_of.get(scope)

    def children(self, row: int) -> np.ndarray:
        return np.flatnonzero(self.scopes.parent == row)

    def subtree(self, row: int) -> np.ndarray:
        """Every row below `row` (not itself): what either step's tree has under that path."""
        table = self.scopes
        inside = np.zeros(len(table.names), dtype=bool)
        for entries, tree, entry in ((table.entry_a, self.a.tree(self.group), int(table.entry_a[row])),
                                     (table.entry_b, self.b.tree(self.group), int(table.entry_b[row]))):
            if entry >= 0:  # a tree is in preorder: a subtree is the span [entry, entry + size)
                inside |= (entries >= entry) & (entries < entry + int(tree.subtree_size[entry]))
        inside[row] = False
        return np.flatnonzero(inside)

    def op_types(self, row: int = 0) -> Table:
        """Op types under a scope row (the whole step at row 0)."""
        a = _side_op_types(self.a, self.group, int(self.scopes.entry_a[row]))
        b = _side_op_types(self.b, self.group, int(self.scopes.entry_b[row]))
        names, rows_a, rows_b = _union([name for name, _, _ in a], [name for name, _, _ in b])
        table = _table(names, rows_a, rows_b, COMPARED, _stack([f for _, _, f in a], COMPARED),
                       _stack([f for _, _, f in b], COMPARED), self.has_at_peak)
        table.a_count = _place(len(names), rows_a, np.array([c for _, c, _ in a], dtype=np.int64))
        table.b_count = _place(len(names), rows_b, np.array([c for _, c, _ in b], dtype=np.int64))
        table.a_temp = _place(len(names), rows_a, _stack([f for _, _, f in a], (TEMP,))[:, 0])
        table.b_temp = _place(len(names), rows_b, _stack([f for _, _, f in b], (TEMP,))[:, 0])
        return table

    def categories(self, row: int = 0) -> Table:
        """Categories under a scope row, in the fixed category order; present where the scope is."""
        a = _side_categories(self.a, self.group, int(self.scopes.entry_a[row]))
        b = _side_categories(self.b, self.group, int(self.scopes.entry_b[row]))
        names = [name for name, _, _ in a]
        everything = np.arange(len(names))
        table = _table(names, everything, everything, CATEGORY_COMPARED,
                       np.array([r[1:] for r in a], dtype=np.int64).reshape(-1, 2),
                       np.array([r[1:] for r in b], dtype=np.int64).reshape(-1, 2), self.has_at_peak)
        table.in_a[:] = self.scopes.entry_a[row] >= 0
        table.in_b[:] = self.scopes.entry_b[row] >= 0
        return table


@dataclass(frozen=True)
class StartChange:
    """A - B of the bytes in use before the step, which no listing of the peak rise holds (an
    optimizer's slots made before the step: SGD against Adam had read +2 MiB of peak rise while
    the start grew 35 MiB), split by the runs' resident tensors where both runs' graphs give them."""

    delta_bytes: int
    parts: tuple[tuple[str, int], ...] | None  # (what, A - B), the non-zero ones; None: a side has no graph
    # The smallest tensor the parts count, where a start counts only its allocator's larger requests
    # (mklcpu: Resident.in_start); 0: every one.
    counts_from: int = 0


START_PARTS = ("parameters", "optimizer slots", "inputs", "other")


def start_change(comparison: Comparison, a_resident=None, b_resident=None) -> StartChange | None:
    """The change of start between the two sides (None where a side has no start: no curve, or a
    relative one); `a_resident`, `b_resident`: each side's `resident.Resident`, where its run's graph
    gives one."""
    starts = (comparison.a.start_bytes, comparison.b.start_bytes)
    if not comparison.has_at_peak or None in starts:
        return None
    parts = None
    if a_resident is not None and b_resident is not None:  # each start's parts (Resident.in_start) and the rest
        values = zip((*a_resident.in_start(), a_resident.other_bytes or 0),
                     (*b_resident.in_start(), b_resident.other_bytes or 0))
        parts = tuple((name, a - b) for name, (a, b) in zip(START_PARTS, values) if a != b)
        return StartChange(starts[0] - starts[1], parts, max(a_resident.counts_from, b_resident.counts_from))
    return StartChange(starts[0] - starts[1], parts)


def renumbers(a_run: str, b_run: str) -> bool:
    """Whether B's names numbered anew are matched to A's: not for two steps of one run, whose names
    are one graph's, where two names are two ops (a GAN's generator and discriminator steps)."""
    return a_run != b_run


def compare_steps(a: StepAnalysis, b: StepAnalysis, group: str = "layer", a_space: str | None = None,
                  b_space: str | None = None, renumber: bool = True) -> Comparison:
    """Step A against baseline step B: each step's default memory space, or the one named per side
    (`renumber`: as Comparison's, False for two steps of one run)."""
    spaces = []
    for side, step, space_id in (("A", a, a_space), ("B", b, b_space)):
        if step.status != "ok":
            raise NotComparable(f"step {side} cannot be analysed ({step.status}): {step.message}")
        space = step.space(space_id)
        if space is None:
            raise NotComparable(f"step {side} has no memory space {space_id!r}")
        spaces.append(space)
    return Comparison(spaces[0], spaces[1], group, renumber)


# -- one model numbered two ways -------------------------------------------------------------


def numbered_as_a(tree_a: ScopeTree, tree_b: ScopeTree) -> tuple[list[str], list[tuple[str, str]]]:
    """(B's tree paths as A numbers them, (B's path, A's) of each entry whose own name that
    changes, outermost and then largest first): `names.renumbering`, for a model built again
    in one process or graph."""
    renamed = renumbering(tree_a.paths, tree_b.paths, leaves_are_ops=True)
    if not renamed:
        return tree_b.paths, []
    paths = [renamed.get(path, path) for path in tree_b.paths]
    changed = [entry for entry, path in enumerate(tree_b.paths)
               if path in renamed and path.rpartition("/")[2] != paths[entry].rpartition("/")[2]]
    figures = tree_b.figures
    changed.sort(key=lambda entry: (tree_b.paths[entry].count("/"), -int(figures[entry, AT_PEAK]),
                                    -int(figures[entry, ALLOCATED]), tree_b.paths[entry]))
    return paths, [(tree_b.paths[entry], paths[entry]) for entry in changed]


# -- building the tables ---------------------------------------------------------------------


def _union(names_a: list[str], names_b: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A's names (distinct) then those only in B, and the row of each of A's and B's names."""
    position = dict(zip(names_a, range(len(names_a))))
    only_b = [name for name in names_b if name not in position]
    position.update(zip(only_b, range(len(names_a), len(names_a) + len(only_b))))
    rows_b = np.fromiter(map(position.__getitem__, names_b), dtype=np.int64, count=len(names_b))
    return names_a + only_b, np.arange(len(names_a)), rows_b


def _place(count: int, rows: np.ndarray, values: np.ndarray, fill=0) -> np.ndarray:
    out = np.full((count,) + values.shape[1:], fill, dtype=values.dtype)
    out[rows] = values
    return out


def _stack(rows: list[np.ndarray], columns: tuple[int, ...]) -> np.ndarray:
    if not rows:
        return np.zeros((0, len(columns)), dtype=np.int64)
    return np.stack(rows)[:, list(columns)].astype(np.int64)


def _table(names, rows_a, rows_b, columns, figures_a, figures_b, has_at_peak, kind=Table, **extra) -> Table:
    count = len(names)
    counted = np.array([c != AT_PEAK or has_at_peak for c in columns])
    return kind(names, columns, _place(count, rows_a, figures_a), _place(count, rows_b, figures_b),
                _place(count, rows_a, np.ones(rows_a.size, dtype=bool)),
                _place(count, rows_b, np.ones(rows_b.size, dtype=bool)), counted, **extra)


def _with_selves(tree: ScopeTree, tree_paths: list[str], other: ScopeTree, other_paths: list[str]
                 ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The tree's entries (paths, entry numbers, kinds, parents as positions in these lists), plus
    `<path>/(self)` for each node that is a scope in the other tree: there a scope's own node sits in
    its `(self)` child, so the node goes there too and children still add up on both sides. Each
    tree's entries are named by the paths given for it (B's as A numbers them)."""
    kinds = np.asarray(tree.kinds).astype(object)
    other_scopes = set(itertools.compress(other_paths, np.asarray(other.kinds) == "scope"))
    nodes = np.flatnonzero(kinds == "node").tolist()
    moved = np.array([entry for entry in nodes if tree_paths[entry] in other_scopes], dtype=np.int64)
    paths = tree_paths + [f"{tree_paths[entry]}/{SELF}" for entry in moved.tolist()]
    entries = np.concatenate([np.arange(len(tree_paths)), moved])
    kinds = np.concatenate([kinds, np.full(moved.size, SELF_KIND, dtype=object)])
    return paths, entries, kinds, np.concatenate([tree.parent, moved])  # a moved node is its `(self)`'s parent


def _scope_table(tree_a: ScopeTree, tree_b: ScopeTree, has_at_peak: bool,
                 b_paths: list[str] | None = None) -> ScopeTable:
    b_paths = tree_b.paths if b_paths is None else b_paths
    paths_a, entries_a, kinds_a, parents_a = _with_selves(tree_a, tree_a.paths, tree_b, b_paths)
    paths_b, entries_b, kinds_b, parents_b = _with_selves(tree_b, b_paths, tree_a, tree_a.paths)
    names, rows_a, rows_b = _union(paths_a, paths_b)
    count = len(names)
    # A row takes A's kind and parent where A has it, B's elsewhere; a scope on either side is a scope.
    kinds = _place(count, rows_b, kinds_b)
    kinds[rows_a] = kinds_a
    kinds[rows_b[kinds_b == "scope"]] = "scope"
    parent = _place(count, rows_b, np.where(parents_b >= 0, rows_b[parents_b], -1))
    parent[rows_a] = np.where(parents_a >= 0, rows_a[parents_a], -1)
    return _table(names, rows_a, rows_b, COMPARED, tree_a.figures[entries_a][:, list(COMPARED)],
                  tree_b.figures[entries_b][:, list(COMPARED)], has_at_peak, kind=ScopeTable, kinds=kinds,
                  parent=parent, entry_a=_place(count, rows_a, entries_a, fill=-1),
                  entry_b=_place(count, rows_b, entries_b, fill=-1),
                  b_own=_own_paths(tree_b, b_paths, rows_b, entries_b),
                  a_temp=_place(count, rows_a, tree_a.figures[entries_a][:, TEMP]),
                  b_temp=_place(count, rows_b, tree_b.figures[entries_b][:, TEMP]))


def _own_paths(tree_b: ScopeTree, b_paths: list[str], rows_b: np.ndarray, entries_b: np.ndarray) -> dict[int, str]:
    """Row -> B's own path, for the rows whose name is B's path renumbered (rows_b and entries_b
    as `_with_selves` lists them: the tree's entries, then the `(self)` of nodes moved there)."""
    if b_paths is tree_b.paths:
        return {}
    own = {}
    for position, (row, entry) in enumerate(zip(rows_b.tolist(), entries_b.tolist())):
        if b_paths[entry] != tree_b.paths[entry]:
            own[row] = tree_b.paths[entry] + (f"/{SELF}" if position >= len(b_paths) else "")
    return own


def _executions(space: SpaceAnalysis, group: str, entry: int) -> np.ndarray | None:
    """The executions under a tree entry; None for the whole step (the analysis' faster path)."""
    if entry == 0:
        return None
    if entry < 0:
        return np.zeros(0, dtype=np.int64)
    return space.tree(group).executions(entry)


def _side_op_types(space: SpaceAnalysis, group: str, entry: int):
    return space.by_op_type(_executions(space, group, entry))


def _side_categories(space: SpaceAnalysis, group: str, entry: int):
    return space.by_category(_executions(space, group, entry))
