"""The scope tree of one grouping: distinct names aggregated into name scopes.

Entry 0 is the root (""); entries are numbered in preorder, so every
subtree is a contiguous range. A scope's own nodes go to a `(self)` child,
so children always add up to their parent (docs/figures.md).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._numeric import scatter_sum
from .figures import ALLOCATED, AT_PEAK
from .names import FirstComponents

SELF = "(self)"


@dataclass
class ScopeTree:
    """Scope tree for one grouping; entry 0 is the root ("")."""

    paths: list[str]
    parent: np.ndarray
    kinds: np.ndarray  # "scope", "node", "self" (strings)
    children: "Children"  # children[entry]: its children, largest first
    figures: np.ndarray  # (entries, FIGURES)
    categories: np.ndarray  # (entries, CATEGORIES) at-peak bytes
    exec_count: np.ndarray
    subtree_size: np.ndarray  # entries in each subtree (preorder: entry i spans [i, i + size))
    leaf_of_exec: np.ndarray
    top_name: np.ndarray  # per entry: the distinct name holding most at peak (then allocated), -1 if none

    @cached_property
    def index(self) -> dict[str, int]:
        """Entry of each path (built on first use: the summary needs none)."""
        return dict(zip(self.paths, range(len(self.paths))))

    def entry(self, path: str) -> int | None:
        """Entry of a path, None if the tree has none; the root's without building the index
        (the page's first questions are about the root)."""
        return 0 if path == "" else self.index.get(path)

    @cached_property
    def exec_order(self) -> np.ndarray:
        """Executions sorted by their leaf's preorder position (built on first use)."""
        return np.argsort(self.leaf_of_exec, kind="stable")

    @cached_property
    def exec_range(self) -> np.ndarray:
        """(entries, 2): the slice of exec_order inside each subtree."""
        sorted_leaves = self.leaf_of_exec[self.exec_order]
        entries = np.arange(len(self.paths))
        first = np.searchsorted(sorted_leaves, entries, side="left")
        last = np.searchsorted(sorted_leaves, entries + self.subtree_size, side="left")
        return np.stack([first, last], axis=1)

    def executions(self, entry: int) -> np.ndarray:
        begin, end = self.exec_range[entry]
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


class Children(Sequence):
    """Each entry's children, largest first (at peak, then allocated, then path order):
    `children[entry]` is a list of entries, found in the entry's preorder span when asked."""

    def __init__(self, depth: np.ndarray, subtree_size: np.ndarray, rank: np.ndarray) -> None:
        self._depth, self._size, self._rank = depth, subtree_size, rank

    def __getitem__(self, entry: int) -> list[int]:  # type: ignore[override]
        if not 0 <= entry < self._size.size:
            raise IndexError(entry)
        span = np.arange(entry + 1, entry + int(self._size[entry]))
        kids = span[self._depth[span] == self._depth[entry] + 1]
        return kids[np.argsort(self._rank[kids], kind="stable")].tolist()

    def __len__(self) -> int:
        return self._size.size


@dataclass
class _Layout:
    """The entries of a tree in preorder, before any figures."""

    paths: list[str]
    depth: np.ndarray  # root 0
    kind: np.ndarray  # _SCOPE, _SELF, _NODE
    leaf_entry: np.ndarray  # per input path: its entry


_SLASH_KEY = b"\x01"  # "/" in sort keys: below every other byte a name can hold


def _layout(leaf_paths: list[str]) -> _Layout:
    """Scopes, `(self)` leaves and preorder of some paths (duplicates allowed).

    Sort keys are the UTF-8 bytes with "/" turned into \x01, sorted by numpy as
    fixed-width byte strings: byte order is code point order, \x01 sorts "/"
    before everything else, so the order is a preorder ("" first, every subtree
    contiguous). Names holding \x00, \x01 or a newline take `_layout_by_strings`.
    """
    joined = "\n".join(leaf_paths)
    data = joined.encode("utf-8", "replace")
    if not leaf_paths or b"\x00" in data or _SLASH_KEY in data or joined.count("\n") != len(leaf_paths) - 1:
        return _layout_by_strings(leaf_paths)
    split = data.replace(b"/", _SLASH_KEY).split(b"\n")
    key_lengths = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    width = -(-int(key_lengths.max()) // 8) * 8 or 8  # whole 8-byte words
    keys = np.array(split, dtype=f"S{width}")
    order = np.argsort(keys, kind="stable")
    rows = keys[order].view(np.uint8).reshape(len(keys), width)
    lcp, repeated = _common_prefixes(rows)  # with the row before; equal rows are one leaf
    first = np.r_[True, ~repeated]
    leaf_of_row = np.cumsum(first) - 1
    leaf_entry_of_path = np.empty(len(keys), dtype=np.int64)
    leaf_entry_of_path[order] = leaf_of_row  # for now: the distinct leaf, made an entry below
    leaves = rows[first]
    lcp = lcp[first]
    lengths = key_lengths[order[first]]
    source = order[first]  # an input path of each distinct leaf
    # A scope ends at a "/" that the leaf before did not reach (its first leaf in order).
    flat = np.flatnonzero(leaves.reshape(-1) == _SLASH_KEY[0])  # row by row, left to right
    leaf_at, slash_at = flat // width, flat % width
    slashes = np.bincount(leaf_at, minlength=leaves.shape[0])
    slash_rank = np.arange(1, flat.size + 1) - (np.cumsum(slashes) - slashes)[leaf_at]  # 1 for a row's first "/"
    new = (slash_at >= lcp[leaf_at]) & (slash_at > 0)
    leaf_at, slash_at, scope_depth = leaf_at[new], slash_at[new], slash_rank[new]
    if joined.isascii():
        scopes = [leaf_paths[i][:k] for i, k in zip(source[leaf_at].tolist(), slash_at.tolist())]
    else:
        scopes = [bytes(leaves[r, :k]).replace(_SLASH_KEY, b"/").decode("utf-8")
                  for r, k in zip(leaf_at.tolist(), slash_at.tolist())]
    # A leaf that is also a scope: the next leaf in order goes on below it.
    distinct = leaves.shape[0]
    is_self = lengths == 0  # a name left empty (not TensorFlow's) sits in the root's "/(self)"
    if distinct > 1:
        follows = np.flatnonzero(lcp[1:] == lengths[:-1])
        below = leaves[follows + 1, np.minimum(lengths[follows], width - 1)] == _SLASH_KEY[0]
        is_self[follows[below]] = True
    leaf_names = _pick(leaf_paths, source)
    for i in np.flatnonzero(is_self).tolist():
        leaf_names[i] += "/" + SELF
    entry_paths = [""] + scopes + leaf_names
    kind = np.concatenate([np.full(1 + len(scopes), _SCOPE), np.where(is_self, _SELF, _NODE)])
    # A "/" at the very start opens no scope of its own (the root is ""): it adds no depth.
    leading = (leaves[:, 0] == _SLASH_KEY[0]).astype(np.int64)
    depth = np.concatenate([[0], scope_depth - leading[leaf_at], slashes + 1 + is_self - leading])
    depth[1 + len(scopes) + np.flatnonzero(lengths == 0)] = 1
    empty_components = b"//" in data or b"/\n" in data or data.endswith(b"/")
    if not empty_components and not ((leaves >= 2) & (leaves <= ord(SELF[0]))).any():
        # No name holds a byte or an empty component that sorts before "(self)": a scope
        # comes just before the first leaf that needs it (shorter scopes first), a `(self)`
        # leaf just after its scope, before the rest of that scope's children.
        leaf_rows = np.arange(distinct)
        self_rows = np.flatnonzero(is_self)
        at_row = np.concatenate([[-1], leaf_at, leaf_rows])
        at_step = np.concatenate([[-1], 2 * slash_at, np.full(distinct, 2 * width + 2)])
        at_row[1 + len(scopes) + self_rows] = self_rows + 1
        at_step[1 + len(scopes) + self_rows] = 2 * lengths[self_rows] + 1
        final = np.lexsort((at_step, at_row))
    else:
        entry_keys = np.array("\n".join(entry_paths).encode("utf-8", "replace").replace(b"/", _SLASH_KEY)
                              .split(b"\n"))
        final = np.argsort(entry_keys, kind="stable")
    position = np.empty_like(final)
    position[final] = np.arange(final.size)
    return _Layout(
        paths=_pick(entry_paths, final),
        depth=depth[final],
        kind=kind[final],
        leaf_entry=position[1 + len(scopes) + leaf_entry_of_path],
    )


def _common_prefixes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes each row shares with the row before, 0 for the first; whether it equals it) for
    rows of whole 8-byte words: words compared at once, then the first differing byte of the
    first differing word, its lowest set bit (the words are little-endian)."""
    n, width = rows.shape
    words = rows.view("<u8")
    differs = words[1:] != words[:-1]
    repeated = ~differs.any(axis=1)
    word = differs.argmax(axis=1)
    at = np.arange(n - 1)
    xor = words[1:][at, word] ^ words[:-1][at, word]
    lowest = xor & (~xor + np.uint64(1))  # the lowest set bit alone: a power of two, exact as a float
    byte = np.log2(np.where(repeated, 1, lowest).astype(np.float64)).astype(np.int64) // 8
    lcp = np.where(repeated, width, 8 * word + byte)
    return np.r_[0, lcp].astype(np.int64), repeated


def _pick(items: list, indices: np.ndarray) -> list:
    """items[i] for each index, in one C-level call."""
    if indices.size == 0:
        return []
    picked = operator.itemgetter(*indices.tolist())(items)
    return list(picked) if indices.size > 1 else [picked]


def _layout_by_strings(leaf_paths: list[str]) -> _Layout:
    """`_layout` with Python strings: any name, slower (the reference in tests)."""
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
    leaf_tree_paths = [f"{p}{self_suffix}" if p in scopes else p for p in leaf_paths]
    keys = sorted([p.replace("/", "\x00") for p in scopes.union(leaf_tree_paths)])
    paths = [k.replace("\x00", "/") for k in keys]
    index = dict(zip(paths, range(len(paths))))
    depth = np.fromiter(map(str.count, keys, itertools.repeat("\x00")), dtype=np.int64, count=len(keys)) + 1
    # A "/" at the very start opens no scope of its own (the root is ""): names left empty
    # (not TensorFlow's) sit in the root's "/(self)".
    depth -= np.fromiter(map(str.startswith, keys, itertools.repeat("\x00")), dtype=np.int64, count=len(keys))
    depth[0] = 0
    kind = np.full(len(paths), _NODE)
    kind[[index[s] for s in scopes]] = _SCOPE
    leaf_entry = np.array([index[p] for p in leaf_tree_paths], dtype=np.int64)
    kind[leaf_entry[[p in scopes for p in leaf_paths]]] = _SELF
    return _Layout(paths, depth, kind, leaf_entry)


def build_tree(leaf_paths: list[str], leaf_of_name: np.ndarray, name_figures: np.ndarray,
               name_of_exec: np.ndarray, figure_count: int) -> ScopeTree:
    """Aggregate distinct runtime names into a scope tree; a scope's own nodes go to `(self)`.

    `name_figures` holds, per distinct runtime name, its summed figures, then
    at-peak bytes per category, then its execution count; `leaf_of_name` maps
    each distinct name to its leaf path. Per-path work is C-level maps and
    numpy: deep models have a distinct path for nearly every execution.
    """
    layout = _layout(leaf_paths)
    count = len(layout.paths)
    depth = layout.depth
    parent = _preorder_parents(depth)
    leaf_index = layout.leaf_entry
    tree_node_of_name = leaf_index[leaf_of_name] if leaf_of_name.size else np.zeros(0, dtype=np.int64)
    subtree_size = _subtree_sizes(depth, parent)
    table = _subtree_sums(tree_node_of_name, name_figures, subtree_size)
    entries = np.arange(count)
    figures = np.ascontiguousarray(table[:, :figure_count])
    top_name = _top_name(tree_node_of_name, name_figures, subtree_size)
    # Children largest first (at peak, then allocated, then path order), as every view wants.
    ranked = np.lexsort((entries, -figures[:, ALLOCATED], -figures[:, AT_PEAK]))
    rank = np.empty_like(ranked)
    rank[ranked] = entries
    return ScopeTree(
        paths=layout.paths,
        parent=parent,
        kinds=_KIND_NAMES[layout.kind],
        children=Children(depth, subtree_size, rank),
        figures=figures,
        categories=np.ascontiguousarray(table[:, figure_count:-1]),
        exec_count=np.ascontiguousarray(table[:, -1]),
        subtree_size=subtree_size,
        leaf_of_exec=tree_node_of_name[name_of_exec] if name_of_exec.size else name_of_exec,
        top_name=top_name,
    )


def _subtree_sums(tree_node_of_name: np.ndarray, name_figures: np.ndarray, subtree_size: np.ndarray) -> np.ndarray:
    """Per tree entry, the sums of `name_figures` over the names in its subtree.

    Preorder makes a subtree the span [i, i + size): its sums are differences of
    running sums, column by column (contiguous), taken only for entries with
    something below them; a leaf's sums are its own names'.
    """
    count, width = subtree_size.size, name_figures.shape[1]
    if tree_node_of_name.size and np.bincount(tree_node_of_name, minlength=count).max() == 1:
        own = np.zeros((width, count), dtype=np.int64)  # one name per leaf: placed, not summed
        own[:, tree_node_of_name] = np.asarray(name_figures, dtype=np.int64).T
    else:
        own = np.ascontiguousarray(scatter_sum(tree_node_of_name, name_figures, count).T)
    running = np.zeros((width, count + 1), dtype=np.int64)
    np.cumsum(own, axis=1, out=running[:, 1:])
    above = np.flatnonzero(subtree_size > 1)
    own[:, above] = running[:, above + subtree_size[above]] - running[:, above]
    return own.T


def _subtree_sizes(depth: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Entries in each subtree (itself included), summed up one level at a time."""
    size = np.ones(depth.size, dtype=np.int64)
    for level in range(int(depth.max(initial=0)), 0, -1):
        at_level = np.flatnonzero(depth == level)
        size += np.bincount(parent[at_level], weights=size[at_level], minlength=depth.size).astype(np.int64)
    return size


def _top_name(tree_node_of_name: np.ndarray, name_figures: np.ndarray, subtree_size: np.ndarray) -> np.ndarray:
    """Per tree node, the distinct name in its subtree that holds most at peak, then allocated.

    Names sorted by their leaf's preorder position make every subtree a
    contiguous run, so this is one range-minimum of ranks per node.
    """
    count = subtree_size.size
    best = np.full(count, -1, dtype=np.int64)
    if tree_node_of_name.size == 0:
        return best
    ranked = np.lexsort((np.arange(len(name_figures)), -name_figures[:, ALLOCATED], -name_figures[:, AT_PEAK]))
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


def root_children(firsts: FirstComponents, name_figures) -> list[tuple[str, np.ndarray]] | None:
    """The root's children and their figures, ranked as `ScopeTree.children[0]` ranks them,
    without building the tree (a step's summary needs only these); None when a path starts
    with "/" (then only the tree knows where it goes).

    A root child is a path's first component (`firsts`: the leaf paths' first components,
    coded), `name_figures` the figures per name (scatter_sum's values); names left empty
    sit in "/(self)".
    """
    distinct, code = firsts.distinct, firsts.code
    if ((firsts.length == 0) & (firsts.path_length > 0)).any():  # a path starting with "/"
        return None
    children = ["/" + SELF if first == "" else first for first in distinct]
    figures = scatter_sum(code, name_figures, len(children))
    # Ties go to preorder, where "/(self)" comes first (its sort key starts with the "/" key).
    ranked = sorted(range(len(children)), key=lambda i: (-int(figures[i, AT_PEAK]), -int(figures[i, ALLOCATED]),
                                                          "" if children[i] == "/" + SELF else "\x02" + children[i]))
    return [(children[i], figures[i]) for i in ranked]


def scope_of_leaf(path: str, any_starting_with) -> str:
    """The scope a leaf path sits in: itself when other paths go on below it (its `(self)`), else its parent.

    `any_starting_with(prefix)`: whether some leaf path starts with it.
    """
    if path and any_starting_with(path + "/"):
        return path
    slash = path.rfind("/")
    return "" if slash < 0 else path[:slash]
