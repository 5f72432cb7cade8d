"""GraphDef -> the model's graph collapsed to one scope's children.

The graph view shows name scopes exactly as the graph names them; edges are
the GraphDef's inputs between nodes that fall in different children.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from tensorboard.compat.proto import graph_pb2


@dataclass
class RunGraph:
    """Node names, op types and input edges of a GraphDef."""

    names: list[str]
    ops: list[str]
    inputs: list[list[int]]  # data and control inputs, as node indices

    @cached_property
    def op_types(self) -> dict[str, str]:
        """Graph node name -> op type (built once per graph, read for every step of its run)."""
        return dict(zip(self.names, self.ops))

    @classmethod
    def from_bytes(cls, data: bytes) -> "RunGraph":
        graph_def = graph_pb2.GraphDef()
        graph_def.ParseFromString(data)
        return cls.from_graph_defs([graph_def])

    @classmethod
    def from_graph_defs(cls, graph_defs) -> "RunGraph":
        names: list[str] = []
        ops: list[str] = []
        raw_inputs: list[list[str]] = []
        for graph_def in graph_defs:
            for node in graph_def.node:
                names.append(node.name)
                ops.append(node.op)
                raw_inputs.append(list(node.input))
        index = {name: i for i, name in enumerate(names)}
        inputs = []
        for node_inputs in raw_inputs:
            resolved = []
            for source in node_inputs:
                source = source.lstrip("^").split(":", 1)[0]
                position = index.get(source)
                if position is not None:
                    resolved.append(position)
            inputs.append(resolved)
        return cls(names, ops, inputs)


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
    keys = [child_key(name, scope) for name in graph.names]
    children: Counter = Counter(k for k in keys if k is not None)
    scopes = set()
    child_ops = {}
    for name, key, op in zip(graph.names, keys, graph.ops):
        if key is None:
            continue
        if name == key:
            child_ops[key] = op
        else:
            scopes.add(key)
    edges: Counter = Counter()
    for target, sources in enumerate(graph.inputs):
        target_key = keys[target]
        if target_key is None:
            continue
        for source in sources:
            source_key = keys[source]
            if source_key is not None and source_key != target_key:
                edges[(source_key, target_key)] += 1
    return CollapsedGraph(dict(children), child_ops, scopes, edges)


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
