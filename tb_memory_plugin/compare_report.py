"""Comparisons -> JSON-ready dicts: the `compare` route (docs/http_api.md) and `tb-memory diff --json`.

Shapes answers only: every number comes from `compare`.
"""

from __future__ import annotations

from .analysis import SpaceAnalysis
from .compare import Comparison, StartChange, Table
from .figures import ALLOCATED, AT_PEAK, OUTPUT
from .findings import readings_gap
from .report import NotFound, peak_fields

# Key of each compared figure in a row: `a_bytes`, `b_bytes`, `delta_bytes` are at peak.
_KEYS = {AT_PEAK: "bytes", ALLOCATED: "allocated_bytes", OUTPUT: "output_bytes"}


def side_dict(space: SpaceAnalysis, run: str, tag: str, step: int, source: str) -> dict:
    """One side of a comparison: the step and its memory space, named as in `summary.devices[]`."""
    trace = space.trace
    return {
        "run": run, "tag": tag, "step": step, "source": source,
        "id": trace.id, "device": trace.device, "allocator": trace.allocator,
        "baseline": space.baseline, "has_curve": space.has_curve,
        "start_bytes": space.start_bytes,
        "start_counts_from_bytes": space.start_counts_from,
        **peak_fields(space),
        "duration_us": space.duration_us,
        "readings_gap_bytes": readings_gap(space),
    }


def _rows(comparison: Comparison, table: Table, rows, with_tree: bool = False,
          listed_by: dict[int, int] | None = None) -> list[dict]:
    """Rows of a table; at-peak keys are null on a side without a curve (no peak there). `listed_by`: rows
    whose change another row of the listing lists (ScopeTable.listed_by), as `tb-memory diff` lists it."""
    a_curve, b_curve = comparison.a.has_curve, comparison.b.has_curve
    names, status, a, b, delta = table.names, table.status, table.a, table.b, table.delta
    listed_by = listed_by or {}
    out = []
    for i in rows:
        i = int(i)
        row = {"name": names[i], "status": str(status[i])}
        if with_tree:
            parent = int(table.parent[i])
            row.update(kind=str(table.kinds[i]), parent=names[parent] if parent >= 0 else None)
            if i in table.b_own:  # B names it by another number (see compare.numbered_as_a)
                row["b_name"] = table.b_own[i]
        for column, figure in enumerate(table.columns):
            key = _KEYS[figure]
            at_peak = figure == AT_PEAK
            row[f"a_{key}"] = None if at_peak and not a_curve else int(a[i, column])
            row[f"b_{key}"] = None if at_peak and not b_curve else int(b[i, column])
            row[f"delta_{key}"] = None if at_peak and not (a_curve and b_curve) else int(delta[i, column])
        if table.a_count is not None:
            row.update(a_count=int(table.a_count[i]), b_count=int(table.b_count[i]))
        if table.same_requests[i]:  # said only where true: the allocator's chunks, not the model's requests
            row["same_requests"] = True
        if i in listed_by:
            row["listed_by"] = names[listed_by[i]]
        out.append(row)
    return out


def start_change_dict(change: StartChange | None) -> dict | None:
    if change is None:
        return None
    parts = None if change.parts is None else [{"name": name, "delta_bytes": delta} for name, delta in change.parts]
    return {"delta_bytes": change.delta_bytes, "parts": parts, "counts_from_bytes": change.counts_from or None}


def comparison_dict(comparison: Comparison, a_side: dict, b_side: dict, scope: str = "",
                    top: int | None = None, start_change: StartChange | None = None) -> dict:
    """A against B under one scope: the scope, its children (largest first, for a treemap), every
    entry below it by absolute difference (the `top` first), and its op types and categories;
    `start_change`: the change of start (compare.start_change), which no listing holds."""
    row = comparison.row(scope)
    if row is None:
        raise NotFound(f"unknown scope {scope!r} in group {comparison.group!r} of either step")
    scopes = comparison.scopes
    below = comparison.subtree(row)
    ranked = scopes.ranked_by_change(below)
    if top is not None:
        ranked = ranked[:top]
    op_types, categories = comparison.op_types(row), comparison.categories(row)
    return {
        "a": a_side,
        "b": b_side,
        "group": comparison.group,
        "peak_rise_delta_bytes": comparison.peak_rise_delta_bytes,
        "start_change": start_change_dict(start_change),
        "renumbered": [{"b": b_path, "a": a_path} for b_path, a_path in comparison.renumbered],
        "shared_share": round(comparison.shared_share, 4),
        "models_note": comparison.models_note,
        "scope": _rows(comparison, scopes, [row], with_tree=True)[0],
        "children": _rows(comparison, scopes, scopes.ranked_by_size(comparison.children(row)), with_tree=True),
        "scope_count": int(below.size),
        "scopes": _rows(comparison, scopes, ranked, with_tree=True,
                        listed_by=scopes.listed_by(ranked, comparison.figure)),
        "op_types": _rows(comparison, op_types, op_types.ranked_by_change()),
        "categories": _rows(comparison, categories, range(len(categories.names))),
    }
