"""Analysed steps -> JSON-ready dicts (docs/http_api.md).

Shapes answers only: every number comes from `analysis`. The plugin routes
and the CLI both call these functions.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import graph as graph_mod
from . import names
from . import curve as curve_mod
from . import resident as resident_mod
from .analysis import SpaceAnalysis, StepAnalysis
from .figures import ALLOCATED, AT_PEAK, CATEGORIES, FIGURES, OUTPUT, format_bytes
from .findings import peak_too_high, readings_gap
from .trace import readings_thresholds

TOP_SCOPES = 10
# A scope holding this share of what its level holds at the peak is looked inside: the CLI points to it, and
# the curve's stack at that level shows its scopes (a Keras model's layers) rather than one band.
DOMINANT_SHARE = 0.9


class NotFound(LookupError):
    """A scope, device, run or tag that does not exist (HTTP 404)."""


def figures_dict(row) -> dict[str, int]:
    return {name: int(value) for name, value in zip(FIGURES, row)}


def _leaf_name(path: str) -> str:
    if not path:
        return "(all)"
    return path.rsplit("/", 1)[-1]


def node_ref(space: SpaceAnalysis, exec_index: int | None, group: str = "layer") -> dict | None:
    if exec_index is None:
        return None
    # `path`: the node as the grouping's tree names it (runtime calls dropped, a gradient in its layer:
    # `router/indexed_case/Tile` for `router/indexed_case/branch1/_1/Tile`), as its tile does; `name` is the raw one.
    return {"name": space.trace.name(exec_index), "scope": space.scope_of(exec_index, group),
            "op_type": space.op_type(exec_index),
            "graph_name": space.graph_name(exec_index),
            "path": space.names.leaf_path(group, int(space.name_code[exec_index]))}


def op_type_rows(space: SpaceAnalysis, execs=None) -> list[dict]:
    return [{"name": name, "count": count, "figures": figures_dict(row)}
            for name, count, row in space.by_op_type(execs)]


def category_rows(space: SpaceAnalysis, execs=None) -> list[dict]:
    return [{"name": name, "at_peak_bytes": at_peak, "allocated_bytes": allocated}
            for name, at_peak, allocated in space.by_category(execs)]


def no_baseline_reason(space: SpaceAnalysis) -> str:
    """Why a space's figures are relative to the step's start, as the CLI and the page say it."""
    trace = space.trace
    if trace.shared_with:
        return f"{trace.allocator} is shared with {', '.join(trace.shared_with)}"
    if trace.snapshot_bytes.size:  # docs/figures.md: readings that imply a negative start, or count none
        return "the allocator's readings give no usable start"
    thresholds = readings_thresholds(trace.allocator)
    if thresholds and not (trace.event_bytes >= thresholds[0]).any():
        # mklcpu reads only as a request of its size is made (trial AA: 3,000 small variables, none of 256 KiB).
        return (f"{trace.allocator} reported no bytes in use in this step: it reads them only on requests of "
                f"{format_bytes(thresholds[0])} or more, and this step made none")
    return "this allocator reports no bytes in use"


def peak_fields(space: SpaceAnalysis) -> dict:
    """The peak as the summary, compare and default_step routes and the CLI give it: null without
    allocation records (no curve, so no peak; the at-peak figures of the listings stay 0)."""
    if not space.has_curve:
        return {"peak_bytes": None, "peak_rise_bytes": None, "peak_time_us": None}
    return {"peak_bytes": space.peak_bytes, "peak_rise_bytes": space.peak_rise_bytes,
            "peak_time_us": space.curve.peak_time_us}


def device_summary(space: SpaceAnalysis, group: str, all_scopes: bool = False,
                   resident: resident_mod.Resident | None = None) -> dict:
    trace = space.trace
    start = space.start_bytes
    summary = {
        "id": trace.id,
        "device": trace.device,
        "device_type": trace.device_type,
        "allocator": trace.allocator,
        "memory_kind": trace.memory_kind,
        "capacity_bytes": trace.capacity_bytes,
        "baseline": space.baseline,
        "shared_with": list(trace.shared_with),
        "has_curve": space.has_curve,
        "no_curve": space.no_curve,
        "start_bytes": start,
        # The smallest request the allocator counts in the readings the start comes from (oneDNN's
        # mklcpu: 256 KiB): smaller tensors in use before the step are not in the start.
        "start_counts_from_bytes": space.start_counts_from,
        "no_baseline_reason": no_baseline_reason(space) if start is None else None,
        **peak_fields(space),
        "peak_node": node_ref(space, space.peak_exec(), group),
        "largest_at_peak": _largest_at_peak(space, group),
        "end_bytes": None if start is None else start + space.curve.end_rise_bytes,
        "exec_count": trace.exec_count,
        "event_count": int(trace.event_time_us.size - trace.piece_rows),
        "figures": figures_dict(space.totals()),
        "snapshots": {"count": int(trace.snapshot_bytes.size), "max_abs_diff_bytes": space.snapshot_gap,
                      "readings_gap_bytes": readings_gap(space), "peak_too_high_bytes": peak_too_high(space)},
        "categories": category_rows(space),
        "op_types": (op_types := op_type_rows(space)),
        "op_types_note": UNKNOWN_OP_NOTE if any(row["name"] == names.UNKNOWN_OP for row in op_types) else None,
        "top_scopes": [{"scope": path, "name": _leaf_name(path), "figures": figures_dict(row)}
                       for path, row in space.top_level(group)[:TOP_SCOPES]],
        "xla_programs": [{**dataclasses.asdict(program), "kept_bytes": program.kept_bytes}
                         for program in space.xla_programs()],
    }
    if all_scopes:
        tree = space.tree(group)
        # Every entry of the tree (scopes, nodes, `(self)`), in preorder; those whose parent is ""
        # add up to the step's totals.
        summary["scopes"] = [
            {"name": tree.paths[i], "kind": tree.kinds[i], "parent": tree.paths[int(tree.parent[i])],
             **figures_dict(tree.figures[i])}
            for i in range(1, len(tree.paths))
        ]
    _add_resident(summary, resident, group)
    return summary


# What the `(unknown)` op type is, said where a step's op types hold it (the CLI and the page).
UNKNOWN_OP_NOTE = (
    f"{names.UNKNOWN_OP}: ops whose type the trace does not give (in a profile, ops it holds no event of: the "
    "inexpensive ops TensorFlow runs inline, a loop body's, which profiling with "
    "tf.profiler.experimental.ProfilerOptions(host_tracer_level=3) names, and a function's own constants and "
    "dataset ops, which it does not)")


def _add_resident(summary: dict, resident: resident_mod.Resident | None, group: str) -> None:
    """The model's resident tensors beside the at-peak figures: per scope its parameters and optimizer
    slots, per category its bytes in use before the step (null without a run graph)."""
    rows = summary["top_scopes"] + summary.get("scopes", [])
    summary["resident_note"] = resident_mod.NO_MODEL_NOTE if resident is None else None
    if resident is None:
        summary["resident"] = None
        for row in rows:
            row.update(param_count=None, param_bytes=None, slot_bytes=None)
        for row in summary["categories"]:
            row["resident_bytes"] = None
        return
    sums = resident.index(group).sums([row.get("scope", row["name"]) for row in rows])
    for row, (count, param_bytes, slot_bytes) in zip(rows, sums.tolist()):
        row.update(param_count=count, param_bytes=param_bytes, slot_bytes=slot_bytes)
    other = resident.other_bytes
    by_category = {"parameters": resident.param_bytes, "optimizer": resident.slot_bytes,
                   "inputs": resident.fed_bytes, "other": max(other, 0) if other is not None else 0}
    for row in summary["categories"]:
        row["resident_bytes"] = by_category.get(row["name"], 0)
    summary["resident"] = {
        "source": "run_graph",
        "start_bytes": resident.start_bytes,
        "param_count": resident.param_count,
        "param_bytes": resident.param_bytes,
        "slot_bytes": resident.slot_bytes,
        "fed_bytes": resident.fed_bytes,
        "other_bytes": other,
        "other_note": resident_mod.other_note(resident),
        "counted_note": resident_mod.counted_note(resident),
        # The model's smaller tensors the start (and so the peak) leaves out, and the peak with them.
        "uncounted_bytes": resident.uncounted_bytes,
        "peak_with_uncounted_bytes": resident.peak_with_uncounted(summary["peak_bytes"]),
        "uncounted_noticeable": resident.uncounted_noticeable(summary["peak_bytes"]),
        "weight_constants": resident.weight_constants_used,
        "note": resident_mod.WEIGHT_CONSTANTS_NOTE if resident.weight_constants_used else resident.note,
        "layers": [{key: row[key] for key in ("scope", "param_count", "param_bytes", "slot_bytes")}
                   | {"tensor_count": len(row["tensors"])} for row in resident.layers()],
    }


def _largest_at_peak(space: SpaceAnalysis, group: str) -> dict | None:
    """The node holding the most bytes at the peak, over all its executions (the op at the peak
    may hold little; a loop body's op runs once per iteration)."""
    found = space.largest_at_peak_name()
    if found is None:
        return None
    execution, held, executions = found
    return {**node_ref(space, execution, group), "at_peak_bytes": held, "executions": executions}


def step_summary(step: StepAnalysis, group: str, run_graph: graph_mod.RunGraph | None = None) -> dict:
    """The step at a glance; computed once per step and group (steps are immutable). With the run's
    graph, each memory space also shows the model's resident tensors (resident.py)."""
    return step.memoized(("summary", group, run_graph is not None),
                         lambda: _step_summary(step, group, run_graph))


def space_resident(step: StepAnalysis, space: SpaceAnalysis,
                   run_graph: graph_mod.RunGraph | None) -> resident_mod.Resident | None:
    """The run graph's resident tensors that live in `space` (None without a graph)."""
    model = run_graph.model if run_graph is not None else None
    return resident_mod.resident_of_space(model, step, space) if model is not None else None


def _step_summary(step: StepAnalysis, group: str, run_graph: graph_mod.RunGraph | None = None) -> dict:
    return {
        "status": step.status,
        "message": step.message,
        "source": step.trace.source,
        "duration_us": step.trace.duration_us,
        "node_stat_count": step.trace.node_stat_count,
        "default_device": step.default_space_id,
        "devices": [device_summary(space, group, resident=space_resident(step, space, run_graph))
                    for space in step.spaces],
    }


def _tree_node(space: SpaceAnalysis, group: str, scope: str):
    tree = space.tree(group)
    node = tree.entry(scope)
    if node is None:
        raise NotFound(f"unknown scope {scope!r} in group {group!r}")
    return tree, node


def scope_executions(space: SpaceAnalysis, group: str, scope: str) -> np.ndarray:
    """The executions under a scope (raises NotFound where the grouping has no such scope): what
    its op types and categories are summed over."""
    tree, node = _tree_node(space, group, scope)
    return tree.executions(node)


def _child_dict(space: SpaceAnalysis, tree, child: int) -> dict:
    return {
        "scope": tree.paths[child],
        "name": _leaf_name(tree.paths[child]),
        "kind": tree.kinds[child],
        "has_children": bool(tree.subtree_size[child] > 1),
        "exec_count": int(tree.exec_count[child]),
        "top_op_type": _top_op_type(space, tree, child),
        "figures": figures_dict(tree.figures[child]),
        "categories": {name: int(v) for name, v in zip(CATEGORIES, tree.categories[child])},
    }


INSIDE_SHARE = 0.2  # a child scope holding this share of its level (at peak, or allocated) shows what it holds
INSIDE_MAX = 60  # its children listed for that, largest at peak (then allocated) first


def _add_inside(space: SpaceAnalysis, tree, nodes, children: list[dict]) -> None:
    """`inside` on the children that hold a large share of their level and have children of their
    own: those children (largest first, at most INSIDE_MAX), so the treemap can show what a big
    tile is made of (a Keras model is one top scope) without a request per tile."""
    for figure in (AT_PEAK, ALLOCATED):
        total = sum(max(int(tree.figures[c][figure]), 0) for c in nodes)
        for c, child in zip(nodes, children):
            if ("inside" in child or not child["has_children"] or total <= 0
                    or tree.figures[c][figure] < INSIDE_SHARE * total):
                continue
            kids = list(tree.children[c])
            kids.sort(key=lambda k: (-int(tree.figures[k][AT_PEAK]), -int(tree.figures[k][ALLOCATED]), tree.paths[k]))
            child["inside"] = [_child_dict(space, tree, k) for k in kids[:INSIDE_MAX]]


def _top_op_type(space: SpaceAnalysis, tree, node: int) -> str | None:
    """Op type of the node (distinct name) holding the most at peak, else the most allocated."""
    top = int(tree.top_name[node])
    return space.names.op_type(top) if top >= 0 else None


def _param_figures(resident: resident_mod.Resident | None, group: str, paths: list[str]) -> list[dict]:
    """param_count, param_bytes and slot_bytes under each path (all null without a run graph)."""
    if resident is None:
        return [dict.fromkeys(("param_count", "param_bytes", "slot_bytes")) for _ in paths]
    return [{"param_count": count, "param_bytes": param_bytes, "slot_bytes": slot_bytes}
            for count, param_bytes, slot_bytes in resident.index(group).sums(paths).tolist()]


def scope_children(space: SpaceAnalysis, group: str, scope: str,
                   resident: resident_mod.Resident | None = None, inside: bool = True) -> dict:
    """One level of the scope tree; with the run's resident tensors, each entry's parameters and slots;
    `inside`: what the big children hold (the treemap draws it; a text listing has no use for it)."""
    tree, node = _tree_node(space, group, scope)
    path = [{"name": "(all)", "scope": ""}]
    if scope:
        parts = scope.split("/")
        path += [{"name": part, "scope": "/".join(parts[: i + 1])} for i, part in enumerate(parts)]
    children = [_child_dict(space, tree, child) for child in tree.children[node]]
    own, *params = _param_figures(resident, group, [scope] + [child["scope"] for child in children])
    for child, figures in zip(children, params):
        child.update(figures)
    if inside:
        _add_inside(space, tree, tree.children[node], children)
    return {
        "scope": scope,
        "name": _leaf_name(scope),
        "kind": tree.kinds[node],
        "path": path,
        "figures": figures_dict(tree.figures[node]),
        "categories": {name: int(v) for name, v in zip(CATEGORIES, tree.categories[node])},
        **own,
        "peak_rise_bytes": space.peak_rise_bytes,
        "children": children,
    }


def scope_details(space: SpaceAnalysis, group: str, scope: str, top: int = 50,
                  resident: resident_mod.Resident | None = None) -> dict:
    tree, node = _tree_node(space, group, scope)
    execs = tree.executions(node)
    figures = space.exec_figures[execs]
    order = np.lexsort((-figures[:, ALLOCATED], -figures[:, AT_PEAK]))[:top] if execs.size else execs
    trace = space.trace
    rise = space.peak_rise_bytes
    nodes = []
    for position in order:
        i = int(execs[position])
        nodes.append({
            "raw_name": trace.name(i),
            "graph_name": space.graph_name(i),
            "scope": space.scope_of(i, group),
            "op_type": space.op_type(i),
            "kernel": space.kernel_of(i),
            "xla_program": space.xla_program_of(i),
            "kind": space.kind(i),
            "category": CATEGORIES[int(space.category[i])],
            "start_us": int(trace.start_us[i]),
            "end_us": int(trace.end_us[i]),
            "figures": figures_dict(space.exec_figures[i]),
        })
    at_peak = int(tree.figures[node, AT_PEAK])
    return {
        "scope": scope,
        "name": _leaf_name(scope),
        "kind": tree.kinds[node],
        "figures": figures_dict(tree.figures[node]),
        "share_of_peak": (at_peak / rise) if rise > 0 else None,
        "peak_rise_bytes": rise,
        "categories": [{"name": name, "at_peak_bytes": int(v)} for name, v in zip(CATEGORIES, tree.categories[node])],
        **_param_figures(resident, group, [scope])[0],
        "op_types": op_type_rows(space, execs),
        "exec_count": int(execs.size),
        "time_span": ({"start_us": int(trace.start_us[execs].min()), "end_us": int(trace.end_us[execs].max())}
                      if execs.size else None),
        "nodes": nodes,
    }


def dominant(values) -> tuple[int, float] | None:
    """(the index of the value that holds `DOMINANT_SHARE` of the positive ones, its share of them); None
    where none does."""
    values = np.asarray(values, dtype=np.float64)
    total = float(np.clip(values, 0, None).sum())
    if total <= 0:
        return None
    largest = int(np.argmax(values))
    share = float(values[largest]) / total
    return (largest, share) if share >= DOMINANT_SHARE else None


def _stacked(tree, node: int, split: bool = True) -> list[int]:
    """The entries a curve's stack splits `node` into, largest at the peak first: its children, but (with
    `split`) one that holds `DOMINANT_SHARE` of them at the peak (`dominant`) and has entries below it, those
    in its place (the UX review's stack at the top level was one band, shared_model's 95%). They add up to
    `node` all the same."""
    children = [int(child) for child in tree.children[node]]
    found = dominant(tree.figures[children, AT_PEAK]) if children and split else None
    largest = children[found[0]] if found is not None else None
    if largest is None or not len(tree.children[largest]):
        return children
    entries = [child for child in children if child != largest] + [int(c) for c in tree.children[largest]]
    return sorted(entries, key=lambda entry: -int(tree.figures[entry, AT_PEAK]))


def _below(path: str, scope: str) -> str:
    """`path` from below `scope` (`adam/mul` below ``; `unet_01/Conv2D` below `shared_model`)."""
    return path[len(scope) + 1:] if scope and path.startswith(scope + "/") else path


def curve(space: SpaceAnalysis, group: str, points: int, breakdown: str = "", top: int = 8,
          window: tuple[int, int] | None = None, split: bool = True) -> dict:
    """The downsampled curve, split by the largest children of `breakdown` (`_stacked`; with `split` False,
    its children as they are: a scope's own series, to highlight it); `window` (start_us, end_us) zooms in
    (curve.sample_window)."""
    tree, node = _tree_node(space, group, breakdown)
    trace, curve_data = space.trace, space.curve
    offset = space.start_bytes or 0
    sampled = curve_mod.sample_window(curve_data, points, window)
    # The execution whose event made each bucket's max: the op running there.
    unique_execs, node_at = np.unique(trace.event_exec[curve_data.last_event(sampled.position)], return_inverse=True)
    series = []
    explained = np.zeros(sampled.position.size, dtype=np.int64)
    for child in _stacked(tree, node, split)[:top]:
        values = curve_mod.held_by(trace, curve_data, tree.executions(child), sampled.position)
        explained += values
        # Named from the scope broken down: a child split into its own children (`_stacked`) keeps its name in
        # front (`adam/UnsortedSegmentSum_1`, trial AF's legend had read `UnsortedSegmentSum_1` alone).
        series.append({"scope": tree.paths[child], "name": _below(tree.paths[child], tree.paths[node]),
                       "bytes": values.tolist()})
    series.append({"scope": None, "name": "(other)", "bytes": (sampled.max_bytes - explained).tolist()})
    snapshots, snapshot_index = curve_mod.sample_snapshots(trace, points, window)
    shown = peak_fields(space)
    peak = None if shown["peak_rise_bytes"] is None else {
        "time_us": shown["peak_time_us"], "rise_bytes": shown["peak_rise_bytes"],
        # Absolute where the allocator gives a start, as the curve's bytes are.
        "bytes": shown["peak_bytes"] if shown["peak_bytes"] is not None else shown["peak_rise_bytes"],
        "node": node_ref(space, space.peak_exec(), group)}
    return {
        "window": None if window is None else {"start_us": window[0], "end_us": window[1]},
        "baseline": space.baseline,
        "start_bytes": space.start_bytes,
        "absolute": space.start_bytes is not None,
        "peak": peak,
        "duration_us": space.duration_us,
        "t_us": sampled.time_us.tolist(),
        "min_bytes": (sampled.min_bytes + offset).tolist(),
        "max_bytes": (sampled.max_bytes + offset).tolist(),
        "node_at": node_at.reshape(-1).tolist(),
        "node_names": [trace.name(int(i)) for i in unique_execs],
        "snapshots": {"t_us": snapshots.time_us.tolist(), "bytes": snapshots.max_bytes.tolist(),
                      # Other readings at the same times where the source has them (XPlane: reserved, fragmentation).
                      "series": {name: values[snapshot_index].tolist() for name, values in trace.snapshot_series.items()},
                      # The smallest request the readings count (mklcpu: 256 KiB), where they leave smaller ones out.
                      "counts_from_bytes": space.readings_partial_from},
        "capacity_bytes": trace.capacity_bytes,
        "memory_kind": trace.memory_kind,  # host: the capacity is a cap the allocator was given
        "series": series,
    }


def _from_function_graph(run_graph) -> bool:
    """A TF2 / Keras run's graph (function_graph.py), not an `add_graph` GraphDef."""
    return getattr(run_graph, "origin", None) is not None


def graph_view(space: SpaceAnalysis, run_graph: graph_mod.RunGraph | None, scope: str,
               max_nodes: int = 200, group: str | None = None) -> dict:
    """The graph's boxes under `scope` (its name scopes); with `group`, each box says whether that
    grouping's tree holds the trace's scope of its path (`in_group`: grouped by layer,
    `gradient_tape` is no entry, its ops being in their layers; true where the trace has no such
    scope), so that a click on it is not a click on nothing."""
    tree = space.tree("scope")
    if run_graph is None:  # no GraphDef: the trace's own scope tree, no edges
        _, node = _tree_node(space, "scope", scope)
        children = {tree.paths[c]: int(tree.exec_count[c]) for c in tree.children[node]}
        scopes = {tree.paths[c] for c in tree.children[node] if tree.kinds[c] == "scope"}
        child_ops = {tree.paths[c]: _top_op_type(space, tree, c) for c in tree.children[node]
                     if tree.kinds[c] != "scope"}
        edges = {}
    else:
        collapsed = graph_mod.collapse(run_graph, scope)
        if not collapsed.children and scope:
            if _from_function_graph(run_graph) and scope in tree.index:
                # Inside what a TF2 / Keras graph names (a Keras layer's own ops): the trace's scope tree.
                return graph_view(space, None, scope, max_nodes)
            raise NotFound(f"unknown scope {scope!r} in the graph")
        children, scopes, child_ops, edges = collapsed.children, collapsed.scopes, collapsed.child_ops, collapsed.edges
        if _from_function_graph(run_graph):
            # A function graph or Keras layer graph names not every scope the trace holds (the optimizer and
            # loss beside a layer graph, `(before this step)`): those come from the trace, with no edges; and
            # a box the trace holds ops under is a scope (a Keras layer node).
            node = tree.index.get(scope)
            for child in tree.children[node] if node is not None else ():
                path = tree.paths[child]
                if path not in children:
                    children[path] = int(tree.exec_count[child])
                    if tree.kinds[child] != "scope":
                        child_ops[path] = _top_op_type(space, tree, child)
                if tree.kinds[child] == "scope":
                    scopes.add(path)

    def bytes_of(child: str) -> tuple[int, int, int]:
        index = tree.index.get(child)
        if index is None:
            return 0, 0, 0
        row = tree.figures[index]
        return int(row[AT_PEAK]), int(row[ALLOCATED]), int(row[OUTPUT])

    rows = []
    for child, count in children.items():
        at_peak, allocated, output = bytes_of(child)
        rows.append({"id": child, "name": _leaf_name(child), "kind": "scope" if child in scopes else "node",
                     "op_type": None if child in scopes else child_ops.get(child), "node_count": count,
                     "at_peak_bytes": at_peak, "allocated_bytes": allocated, "output_bytes": output})
    if group is not None:
        # Not held by the grouping: a scope of the trace's that the grouping folds away. A box the
        # trace never ran under (a placeholder, `init`) is in no tree, and is said to be in none.
        grouped = space.tree(group).index
        for row in rows:
            row["in_group"] = row["id"] in grouped or row["id"] not in tree.index
    rows.sort(key=lambda r: (-r["at_peak_bytes"], -r["allocated_bytes"], r["id"]))
    kept, omitted, folded = graph_mod.fold(rows, edges, max_nodes)
    return {
        "scope": scope,
        "source": "trace" if run_graph is None else "run_graph",
        "nodes": kept,
        "edges": [{"source": s, "target": t, "count": c} for (s, t), c in sorted(folded.items())],
        "omitted_nodes": omitted,
    }
