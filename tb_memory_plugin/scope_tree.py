"""The scope tree of one grouping: distinct names aggregated into name scopes.

Entry 0 is the root (""); entries are numbered in preorder, so every
subtree is a contiguous range. A scope's own nodes go to a `(self)` child,
so children always add up to their parent (docs/figures.md).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._numeric import scatter_sum
from .figures import ALLOCATED, AT_PEAK

SELF = "(self)"


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


def build_tree(leaf_paths: list[str], leaf_of_name: np.ndarray, name_figures: np.ndarray,
               name_of_exec: np.ndarray, figure_count: int) -> ScopeTree:
    """Aggregate distinct node names into a scope tree; a scope's own nodes go to `(self)`.

    `name_figures` holds, per distinct runtime name, its summed figures, then
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
    table = scatter_sum(tree_node_of_name, name_figures, count)
    table = np.concatenate([table, np.ones((count, 1), dtype=np.int64)], axis=1)
    for level in range(int(depth.max()), 0, -1):
        at_level = np.flatnonzero(depth == level)
        table += scatter_sum(parent[at_level], table[at_level], count)
    figures = np.ascontiguousarray(table[:, :figure_count])
    subtree_size = table[:, -1]
    top_name = _top_name(tree_node_of_name, name_figures, subtree_size)
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
