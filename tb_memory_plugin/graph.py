"""GraphDef -> the model's graph collapsed to one scope's children.

The graph view shows name scopes exactly as the graph names them; edges are
the GraphDef's inputs between nodes that fall in different children.
"""

from __future__ import annotations

import functools
import bisect
import collections
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
from tensorboard.compat.proto import graph_pb2

from ._protos import BYTES, MESSAGE, OPTIONAL, REPEATED, STRING, as_text, message_classes
from .names import CodedOpTypes


# GraphDef read for the fields we use. "Graph" declares `node` singular, so protobuf merges
# every NodeDef into one message whose repeated `name` and `op` list all nodes in order
# (every node has exactly one of each); "Blobs" keeps each node's bytes, for its inputs.
_SCHEMA = {
    "Graph": [("node", 1, MESSAGE, OPTIONAL, "Node"), ("library", 2, BYTES, OPTIONAL, None),
              ("versions", 4, BYTES, OPTIONAL, None)],
    "Node": [("name", 1, STRING, REPEATED, None), ("op", 2, STRING, REPEATED, None),
             ("input", 3, BYTES, OPTIONAL, None), ("device", 4, BYTES, OPTIONAL, None),
             ("attr", 5, BYTES, OPTIONAL, None), ("debug_info", 6, BYTES, OPTIONAL, None),
             ("type", 7, BYTES, OPTIONAL, None)],
    "Blobs": [("node", 1, BYTES, REPEATED, None), ("library", 2, BYTES, OPTIONAL, None),
              ("versions", 4, BYTES, OPTIONAL, None)],
    "Inputs": [("input", 3, STRING, REPEATED, None), ("name", 1, BYTES, OPTIONAL, None),
               ("op", 2, BYTES, OPTIONAL, None), ("device", 4, BYTES, OPTIONAL, None),
               ("attr", 5, BYTES, OPTIONAL, None), ("debug_info", 6, BYTES, OPTIONAL, None),
               ("type", 7, BYTES, OPTIONAL, None)],
}
_END_OF_NODE = "\x00"  # an input name no graph holds: closes each node's inputs
_END_OF_NODE_FIELD = b"\x1a\x01\x00"  # input (3, LEN) = "\x00"
_PORT = re.compile(r":[^\n]*")  # names hold no ":" and no "^"
_COLLAPSED_KEPT = 64  # collapsed scopes kept per graph (the graph view asks each again on every visit)


@functools.cache
def _classes() -> dict:
    return message_classes("tb_memory.graph", _SCHEMA)


@dataclass
class RunGraph:
    """Node names and op types of a GraphDef; input edges read when first needed."""

    names: list[str]
    ops: list[str]
    data: bytes = field(repr=False, default=b"")  # the serialized GraphDef, for inputs
    # Reads the serialized GraphDef again (TensorBoard holds it): with one, the bytes are
    # dropped once the model is read, and read again only if the edges are asked for later.
    reload: Callable[[], bytes] | None = field(repr=False, default=None, compare=False)
    size: int | None = field(repr=False, default=None, compare=False)  # of the bytes first read (`reload`'s check)
    # Collapsed scopes, most recently used last (collapse()); shared by the route's threads.
    _collapsed: collections.OrderedDict = field(default_factory=collections.OrderedDict, init=False, repr=False,
                                                compare=False)
    _collapsed_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @cached_property
    def op_types(self) -> CodedOpTypes:
        """Graph node name -> op type (built once per graph, read for every step of its run)."""
        return CodedOpTypes(self.names, self.ops)

    @cached_property
    def model(self):
        """Variables, optimizer slots, weight constants and convolutions (resident.Model), from a full
        parse on first use; None when the attributes cannot be read."""
        from .resident import Model

        try:
            return Model.from_bytes(self._bytes(), self.names, self.ops)
        except Exception:  # noqa: BLE001 - a graph we cannot read attributes of still names the nodes
            return None
        finally:
            if self.reload is not None:  # a big graph's bytes need not be held twice
                self.data = b""

    def _bytes(self) -> bytes:
        data = self.data
        return data if data or self.reload is None else self.reload()

    @classmethod
    def from_bytes(cls, data: bytes, reload: Callable[[], bytes] | None = None) -> "RunGraph":
        """Raises what protobuf raises on bytes that are not a GraphDef (`_protos.REFUSED`).
        `reload`: reads the same bytes again (then they are not held once the model is read)."""
        merged = _classes()["Graph"].FromString(data).node
        names, ops = as_text(list(merged.name)), list(merged.op)
        if len(names) != len(ops):  # a node without a name or op: read node by node
            graph_def = graph_pb2.GraphDef.FromString(data)
            names, ops = [node.name for node in graph_def.node], [node.op for node in graph_def.node]
        # One str per op type, shared by its nodes (a graph has a few hundred op types): less
        # memory, and a step's op types come back as the same few objects, quick to code.
        shared = dict(zip(distinct := list(dict.fromkeys(ops)), as_text(distinct)))
        return cls(names, list(map(shared.__getitem__, ops)), bytes(data), reload, len(data))

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(source node, target node) of every data and control input inside the graph."""
        data = self._bytes()
        blobs = graph_blobs(data)
        # Read again, the bytes are another graph's (TensorBoard serves a graph written again under its key).
        if len(blobs) != len(self.names) or (self.size is not None and len(data) != self.size):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        merged = _classes()["Inputs"].FromString(_END_OF_NODE_FIELD.join(blobs) + _END_OF_NODE_FIELD).input
        # `^ctrl` and `name:port` -> `name`, all inputs at once; then each to its node index
        # (-1: outside the graph, -2: the end of a node).
        cleaned = _PORT.sub("", "\n".join(merged).replace("^", "")).split("\n") if merged else []
        lookup = dict(zip(self.names, range(len(self.names))))
        lookup[_END_OF_NODE] = -2
        get = lookup.get
        codes = np.array([get(name, -1) for name in cleaned], dtype=np.int64)
        end = codes == -2
        target = np.cumsum(end) - end  # inputs before a node's end belong to it
        inside = codes >= 0
        return codes[inside], target[inside]

    @cached_property
    def _by_name(self) -> tuple[list[int], list[str]]:
        """Node indices in name order, and the names in that order: the nodes under a scope are one range."""
        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        return order, [self.names[i] for i in order]

    def _under(self, scope: str) -> list[int]:
        """Indices (in graph order) of the nodes whose names lie under `scope` (`scope/...`)."""
        order, sorted_names = self._by_name
        # Every name starting "scope/" sorts in ["scope/", "scope0"): "0" follows "/" in code points.
        low = bisect.bisect_left(sorted_names, scope + "/")
        high = bisect.bisect_left(sorted_names, scope + "0", low)
        return sorted(order[low:high])

    def collapsed(self, scope: str) -> "CollapsedGraph":
        """The graph collapsed to `scope`'s children (see collapse); kept per scope, a fresh copy each call."""
        with self._collapsed_lock:
            found = self._collapsed.get(scope)
            if found is not None:
                self._collapsed.move_to_end(scope)
        if found is None:
            found = _collapse(self, scope)
            with self._collapsed_lock:
                self._collapsed[scope] = found
                while len(self._collapsed) > _COLLAPSED_KEPT:
                    self._collapsed.popitem(last=False)
        return CollapsedGraph(dict(found.children), dict(found.child_ops), set(found.scopes), Counter(found.edges))


def graph_blobs(data: bytes):
    """Each node of a serialized GraphDef, as its own bytes (a C-level split, no parsing)."""
    return _classes()["Blobs"].FromString(data).node


def child_key(name: str, scope: str) -> str | None:
    """The child of `scope` that contains graph node `name` (None when outside)."""
    if scope:
        if not name.startswith(scope) or len(name) <= len(scope) or name[len(scope)] != "/":
            return None
        rest = name[len(scope) + 1:]
        prefix = scope + "/"
    else:
        rest, prefix = name, ""
    slash = rest.find("/")
    return prefix + (rest if slash < 0 else rest[:slash])


@dataclass
class CollapsedGraph:
    children: dict[str, int]  # child id -> number of graph nodes in it
    child_ops: dict[str, str]  # op type of children that are single nodes
    scopes: set[str]  # children that contain other nodes
    edges: Counter  # (source child, target child) -> count


def collapse(graph: RunGraph, scope: str) -> CollapsedGraph:
    """`graph` collapsed to the children of `scope` (`""`: the root): each child's node count, the
    op of children that are single nodes, which children hold other nodes, and the edges between
    different children with their counts. Each node belongs to the child `child_key` names."""
    return graph.collapsed(scope)


def _collapse(graph: RunGraph, scope: str) -> CollapsedGraph:
    if scope:
        members = graph._under(scope)
        prefix = scope + "/"
        cut = len(prefix)
        rests = [graph.names[i][cut:] for i in members]
        ops = [graph.ops[i] for i in members]
    else:
        members, prefix, rests, ops = None, "", graph.names, graph.ops
    parts = [rest.partition("/") for rest in rests]  # (child's name, "/" when it goes deeper, ...)
    heads = [part[0] for part in parts]
    counts = Counter(heads)  # children in graph order of their first node
    child_ops = {prefix + head: op for (head, deeper, _), op in zip(parts, ops) if not deeper}
    scopes = {prefix + head for head, deeper, _ in parts if deeper}
    names = [prefix + head for head in counts]
    children = dict(zip(names, counts.values()))

    # Edges between different children, counted by (source child, target child).
    code = dict(zip(counts, range(len(counts))))
    head_code = np.array([code[head] for head in heads], dtype=np.int64)
    if members is None:
        key_code = head_code
    else:
        key_code = np.full(len(graph.names), -1, dtype=np.int64)
        key_code[np.array(members, dtype=np.int64)] = head_code
    source, target = graph.edges
    source_key, target_key = key_code[source], key_code[target]
    crossing = (source_key >= 0) & (target_key >= 0) & (source_key != target_key)
    width = max(len(names), 1)
    pairs, pair_counts = np.unique(source_key[crossing] * width + target_key[crossing], return_counts=True)
    edges = Counter({(names[pair // width], names[pair % width]): count
                     for pair, count in zip(pairs.tolist(), pair_counts.tolist())})
    return CollapsedGraph(children, child_ops, scopes, edges)


OTHER_ID = "(other)"
_SUMMED = ("node_count", "at_peak_bytes", "allocated_bytes", "output_bytes")


def fold(rows: list[dict], edges: Counter, max_nodes: int) -> tuple[list[dict], int, dict[tuple[str, str], int]]:
    """Keep the first `max_nodes` rows; the rest become one "(other)" box, and edges
    that touched them are rerouted to it (edges inside it disappear).

    Returns (kept rows, how many were folded, edge counts by (source, target)).
    """
    kept, rest = rows[:max_nodes], rows[max_nodes:]
    kept_ids = {row["id"] for row in kept}
    if rest:
        kept.append({"id": OTHER_ID, "name": f"({len(rest)} more)", "kind": "other", "op_type": None,
                     **{key: sum(row[key] for row in rest) for key in _SUMMED}})
    folded: dict[tuple[str, str], int] = {}
    for (source_id, target_id), count in edges.items():
        source_id = source_id if source_id in kept_ids else OTHER_ID
        target_id = target_id if target_id in kept_ids else OTHER_ID
        if source_id != target_id:
            folded[(source_id, target_id)] = folded.get((source_id, target_id), 0) + count
    return kept, len(rest), folded
