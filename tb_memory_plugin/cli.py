"""`tb-memory`: the same analysis as the Memory tab, in a terminal.

    tb-memory summary LOGDIR [--run R] [--tag T] [--device D]
                             [--group layer|scope] [--scope PATH] [--top N] [--json]
    tb-memory diff LOGDIR [--run A] [--tag T] --against RUN[:TAG] [--device D]
                          [--against-device D] [--group layer|scope] [--top N] [--json]
    tb-memory whatif LOGDIR [--run R [--run R2 ...]] [--tag T [--tag T2 ...]] --batch N [--limit BYTES]
                            [--traced-batch B [--traced-batch B2 ...]] [--device D] [--json]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import logging
import os
import posixpath
import re
import sys
from typing import Callable

import numpy as np

from . import compare, compare_report, findings as findings_mod, logdir as logdir_mod, report, trace as trace_mod
from .analysis import GROUPS, TF2_PROFILE_HELP, SpaceAnalysis, StepAnalysis
from .figures import ALLOCATED, AT_PEAK, FIGURES, LIMIT_MAX_BYTES, OUTPUT, format_bytes
from .names import UNKNOWN_OP


class _Warnings(logging.Handler):
    """Collects TensorBoard's warnings about unreadable event files, and the damaged records read past."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.damage: list = []  # logdir.Damage: records the reading skipped, or stopped at

    def print_damage(self) -> None:
        for note in self.damage:
            print(f"tb-memory: warning: {note.text}", file=sys.stderr)

    def with_damage(self, what: str) -> str:
        """A one-line error with the damage that may explain it after it."""
        return "; ".join([what, *(note.text for note in self.damage)])

    @property
    def lost(self) -> bool:
        """Whether a record written whole could not be read (not one still being written)."""
        return any(note.lost for note in self.damage)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])


AT_PEAK_KEY = FIGURES[AT_PEAK]


def _device_json(device: dict) -> dict:
    flat = dict(device)
    flat["op_types"] = [{"name": row["name"], "count": row["count"], **row["figures"]} for row in device["op_types"]]
    if not device["has_curve"]:  # no allocation records: no peak and no at-peak figure, rather than zeros
        flat["figures"] = {**device["figures"], AT_PEAK_KEY: None}  # the peak itself is null already
        for listing in ("scopes", "op_types", "categories", "top_scopes"):
            flat[listing] = [_without_at_peak(row) for row in flat.get(listing, ())]
    return flat


def _without_at_peak(row: dict) -> dict:
    row = dict(row)
    if "figures" in row:
        row["figures"] = {**row["figures"], AT_PEAK_KEY: None}
    else:
        row[AT_PEAK_KEY] = None
    return row


def _print_step(run: str, tag: str, step_number: int, step: StepAnalysis, spaces: list, group: str,
                top: int, run_graph=None, scope: str = "", function: str | None = None) -> None:
    print(f"== {run} / {tag} ({_step_label(tag, step_number, function)})")
    if step.message:
        print(f"   note: {step.message}")
    curve_elsewhere = any(s.has_curve for s in step.spaces)  # else the note above already says "no curve"
    for space in spaces:  # the spaces --device selected (all of them without it)
        pinned = space.trace.device_type != "CPU" and space.trace.memory_kind == trace_mod.HOST_MEMORY
        print(f"-- {space.trace.id} ({'host memory pinned for ' if pinned else ''}{space.trace.device})")
        if space.has_curve:
            _print_space_at_peak(space, group, top, report.space_resident(step, space, run_graph), scope)
        else:
            _print_space_without_curve(space, group, top, say_no_curve=curve_elsewhere, scope=scope)


def _op_type_suffix(op_type: str | None, name: str = "") -> str:
    """" (MatMul)" after a name; a made-up op type is in brackets already: " (unknown)"; nothing where the
    name's last component is its op type, or that in brackets (an XLA program's own `(XLA program)`)."""
    leaf = name.rpartition("/")[2]
    if not op_type or (leaf and leaf in (op_type, f"({op_type})")):
        return ""
    return f" {op_type}" if op_type.startswith("(") and op_type.endswith(")") else f" ({op_type})"


def _step_label(tag: str, number: int, function: str | None = None) -> str:
    """What a step's number is, for its heading: a profile's `run_<n>` is the n-th run of a function in
    a profile that marks no step there (not the step `step_<n>` beside it may be), named where the
    profile says which (a fit's, a predict's, an evaluate's)."""
    from .store import is_function_run

    if not is_function_run(tag):
        return f"step {number}"
    return f"function run {number}{f' of {function}' if function else ''}, no step marker"


def _scope_rows(space: SpaceAnalysis, group: str, scope: str) -> list[tuple[str, dict]] | None:
    """(path, figures) of a scope's children, largest at the peak first; None where the step has no
    such scope in the grouping."""
    try:
        children = report.scope_children(space, group, scope, inside=False)["children"]
    except report.NotFound:
        return None
    return [(child["scope"], child["figures"]) for child in children]  # largest at the peak first


def _print_no_scope(space: SpaceAnalysis, group: str, scope: str) -> None:
    tops = [path for path, _ in space.top_level(group)]
    print(f"   no scope {scope!r} in this step (group={group}); its top level: {_few(tops, 8)}")


def _print_dominant_scope(space: SpaceAnalysis, group: str, rows: list[tuple[str, dict]], figure: str,
                          within: str = "") -> None:
    """Where one scope holds nearly all of a listing (a Keras model, one top scope; `within` a scope listed
    by --scope, a loop its scope holds): how to see inside it."""
    found = report.dominant([row[figure] for _, row in rows]) if rows else None
    if found is None:
        return
    path = rows[found[0]][0]
    if space.names.any_leaf_starting_with(group, path + "/"):
        label = "at the peak" if figure == "at_peak_bytes" else "allocated"
        print(f"   {path} holds {found[1]:.0%} of what {within or 'the top level'} holds {label}: "
              f"--scope {path} lists what it holds")


def _print_space_at_peak(space: SpaceAnalysis, group: str, top: int, resident=None, scope: str = "") -> None:
    summary = report.device_summary(space, group, resident=resident)
    start = summary["start_bytes"]
    if start is not None:
        baseline = f"start {format_bytes(start)} (allocator_bytes_in_use)"
        if summary["start_counts_from_bytes"]:
            least = format_bytes(summary["start_counts_from_bytes"])
            baseline += (f", counting {space.trace.allocator}'s requests of {least} and more: smaller tensors in use "
                         "before the step are not in it, nor in the peak")
    else:
        baseline = f"relative to the step's start ({summary['no_baseline_reason']})"
    peak = summary["peak_bytes"] if start is not None else summary["peak_rise_bytes"]
    print(f"   peak {format_bytes(peak)} at {summary['peak_time_us'] / 1000:.3f} ms, "
          f"rise {format_bytes(summary['peak_rise_bytes'])}; {baseline}")
    if too_high := summary["snapshots"]["peak_too_high_bytes"]:
        print(f"   the peak may be up to {format_bytes(too_high)} lower: the records count variables' old buffers "
              "the allocator gave back with no record (see its allocator_gap finding)")
    with_small = (summary["resident"] or {}).get("peak_with_uncounted_bytes")
    if with_small is not None and summary["resident"]["uncounted_noticeable"]:
        print(f"   with the model's smaller tensors in use before the step "
              f"({format_bytes(summary['resident']['uncounted_bytes'])}: parameters, slots and feeds the start does "
              f"not count), the peak is {format_bytes(with_small)}")
    if summary["peak_node"]:
        peak_node = summary['peak_node']
        print(f"   op at peak: {peak_node['name']}{_op_type_suffix(peak_node['op_type'], peak_node['name'])}")
    if summary["largest_at_peak"]:
        largest = summary["largest_at_peak"]
        runs = f" over {largest['executions']} executions" if largest["executions"] > 1 else ""
        print(f"   biggest holder at peak: {largest['name']}{_op_type_suffix(largest['op_type'], largest['name'])}, "
              f"{format_bytes(largest['at_peak_bytes'])}{runs}")
    for program in summary["xla_programs"][:top]:  # its node and the pieces its HLO placed
        held = program["at_peak_bytes"]
        parts = [f"{format_bytes(program[key])} {label}" for key, label in
                 (("placed_bytes", "by op"), ("unused_scratch_bytes", "unused scratch"),
                  ("kept_bytes", "its own, placed on no op: the allocator's rounding, blocks of runs the profile's "
                                 "HLO does not match")) if program[key]]
        print(f"   XLA program {program['name']}: {format_bytes(held)} at peak"
              + (f" ({', '.join(parts)})" if parts and held else ""))
    execs, within = _scope_executions(space, group, scope)
    op_type_rows, category_rows = summary["op_types"], summary["categories"]
    if execs is not None:  # the scope's own op types and categories, not the step's
        op_type_rows = report.op_type_rows(space, execs)
        category_rows = report.category_rows(space, execs)
    if scope:
        scopes = _scope_rows(space, group, scope)
        if scopes is None:
            _print_no_scope(space, group, scope)
            scopes = []
        else:
            print(f"   scopes at peak in {scope} (group={group}):")
    else:
        print(f"   top scopes at peak (group={group}):")
        # As the summary's top_scopes (no tree built).
        scopes = [(path, report.figures_dict(figures)) for path, figures in space.top_level(group)]
    # Entries that neither hold nor allocate bytes are left out of the listing, which shows only
    # those two (gradient plumbing, a `NoOp`, and the feeds and variables whose outputs were made
    # before the step: a row of "0 B ... (allocated 0 B)"); --json keeps every entry.
    shown = [(path, row) for path, row in scopes if any(row[k] for k in _SHOWN)]
    listed, rest, below = _listed(shown, top, lambda entry: entry[1]["at_peak_bytes"])

    def scope_line(path: str, row: dict) -> None:
        print(f"     {format_bytes(row['at_peak_bytes']):>12}  {path}  (allocated {format_bytes(row['allocated_bytes'])})")

    for path, row in listed:
        scope_line(path, row)
    _print_the_rest([row for _, row in rest], "scopes")
    for path, row in below:
        scope_line(path, row)
    _print_dominant_scope(space, group, shown, "at_peak_bytes", scope)
    print(f"   top op types at peak{within}:")
    op_types = [r for r in op_type_rows if any(r["figures"][k] for k in _SHOWN)]
    listed, rest, below = _listed(op_types, top, lambda row: row["figures"]["at_peak_bytes"])

    def op_type_line(row: dict) -> None:
        print(f"     {format_bytes(row['figures']['at_peak_bytes']):>12}  {row['name']} x{row['count']}"
              f"  (allocated {format_bytes(row['figures']['allocated_bytes'])})")

    for row in listed:
        op_type_line(row)
    _print_the_rest([row["figures"] for row in rest], "op types")
    for row in below:
        op_type_line(row)
    if summary.get("op_types_note") and any(row["name"] == UNKNOWN_OP for row in listed):
        print(f"   {summary['op_types_note']}")
    print(f"   categories at peak{within} (heuristic):")
    for row in category_rows:
        held = row.get("resident_bytes")
        print(f"     {format_bytes(row['at_peak_bytes']):>12}  {row['name']}"
              + (f"  (+{format_bytes(held)} resident before the step)" if held else ""))


def _scope_executions(space: SpaceAnalysis, group: str, scope: str) -> tuple[np.ndarray | None, str]:
    """(--scope's executions, " in <scope>" for the listings' headings); (None, "") for the whole
    step; where the step has no such scope, the step's listings, said to be the whole step's."""
    if not scope:
        return None, ""
    try:
        return report.scope_executions(space, group, scope), f" in {scope}"
    except report.NotFound:
        return None, " (the whole step)"


def _inside(path: str | None, scope: str) -> bool:
    """Whether `path` is `scope` or lies below it."""
    return f"{path}/".startswith(scope + "/")


def _listed(rows: list, top: int, at_peak: Callable[[object], int]) -> tuple[list, list, list]:
    """(the rows a listing shows first, the rest, then the rows past `top` that hold less than
    nothing at the peak): those (`(before this step)`: frees of bytes from before the step) are
    listed after the "(N more)" line, in order, rather than hidden inside its sum."""
    rest = rows[top:]
    return rows[:top], [row for row in rest if at_peak(row) >= 0], [row for row in rest if at_peak(row) < 0]


def _print_the_rest(rows: list[dict], what: str) -> None:
    """One line for the rows a listing leaves out, so that the lines shown add up to the peak rise."""
    if rows:
        print(f"     {format_bytes(sum(row['at_peak_bytes'] for row in rows)):>12}  ({len(rows)} more {what})"
              f"  (allocated {format_bytes(sum(row['allocated_bytes'] for row in rows))})")


def _print_resident(step: StepAnalysis, spaces: list, run_graph, group: str, top: int, scope: str = "") -> None:
    """The model's tensors in each space, from the run's GraphDef: parameters and optimizer slots by
    layer (with --scope, the layers inside it)."""
    residents = [report.space_resident(step, space, run_graph) for space in spaces]
    if all(resident is None for resident in residents):  # as the summary's resident_note says
        if any(space.has_curve for space in spaces):
            print(f"   note: {report.resident_mod.NO_MODEL_NOTE}")
        return
    for space, resident in zip(spaces, residents):
        if resident is None or not resident.tensors:
            continue
        other = resident.other_bytes
        print(f"   resident before the step{', the whole model' if scope else ''} ({space.trace.id}): "
              f"{resident.param_count:,} parameters "
              f"{format_bytes(resident.param_bytes)}, optimizer slots {format_bytes(resident.slot_bytes)}"
              + (f", inputs {format_bytes(resident.fed_bytes)}" if resident.fed_bytes else "")
              + (f", other {format_bytes(other)} of start {format_bytes(resident.start_bytes)}" if other is not None
                 else ""))
        if note := report.resident_mod.other_note(resident):
            print(f"   note: {note}")
        if counted := report.resident_mod.counted_note(resident):
            print(f"   note: {counted}")
        if resident.weight_constants_used:
            print(f"   note: {report.resident_mod.WEIGHT_CONSTANTS_NOTE}")
        elif resident.note:  # what the tensors may miss (a Keras config's layer it does not size), as the page says
            print(f"   note: {resident.note}")
        layers = sorted(resident.layers(), key=lambda row: -(row["param_bytes"] + row["slot_bytes"]))
        if scope:
            layers = [row for row in layers if _inside(row["scope"], scope)]
            if not layers:
                continue
        print(f"   layers{' in ' + scope if scope else ''} by parameters (+ optimizer slots):")
        for row in layers[:top]:
            print(f"     {format_bytes(row['param_bytes']):>12}  {row['scope']}  {row['param_count']:,} params"
                  + (f"  (+{format_bytes(row['slot_bytes'])} slots)" if row["slot_bytes"] else ""))
        if rest := layers[top:]:  # as the other listings end: what the lines shown leave out
            slots = sum(row["slot_bytes"] for row in rest)
            print(f"     {format_bytes(sum(row['param_bytes'] for row in rest)):>12}  ({len(rest)} more layers)  "
                  f"{sum(row['param_count'] for row in rest):,} params"
                  + (f"  (+{format_bytes(slots)} slots)" if slots else ""))


def _print_findings(found: list[dict]) -> None:
    if not found:
        return
    print("   findings:")
    # Several findings of one kind often share their advice (a convolution per layer): the advice
    # is said once, and past the first few the rest are named in one line (--json lists them all).
    runs: list[list[dict]] = []
    for finding in found:
        if runs and runs[-1][0]["suggestion"] == finding["suggestion"]:
            runs[-1].append(finding)
        else:
            runs.append([finding])
    for alike in runs:
        for i, finding in enumerate(alike[:_FINDINGS_SPELT_OUT]):
            print(f"   * {finding['kind']}: {format_bytes(finding['bytes'])} in {finding['scope'] or '(top level)'}"
                  + (f" on {finding['device']}" if finding["device"] else ""))
            print(f"     {finding['message']}")
            print(f"     try: {'as above.' if i else finding['suggestion']}")
        rest = alike[_FINDINGS_SPELT_OUT:]
        if rest:
            where = ", ".join(f"{f['nodes'][0].rsplit('/', 1)[-1] + ' in ' if f['nodes'] else ''}"
                              f"{f['scope'] or '(top level)'} ({format_bytes(f['bytes'])})" for f in rest)
            print(f"   * and {len(rest)} more {alike[0]['kind']} finding{'s' if len(rest) > 1 else ''} like these: {where}")


_SHOWN = ("at_peak_bytes", "allocated_bytes")  # a listed row holds or allocates bytes (the figures it shows)
_FINDINGS_SPELT_OUT = 3  # findings sharing their advice printed in full before the rest are named


def _print_ranked_by_allocated(rows: list[tuple[str, dict]], top: int) -> None:
    """(label, figures) rows that allocated or produced bytes, most allocated first, then most output."""
    kept = [(label, figures) for label, figures in rows if figures["allocated_bytes"] or figures["output_bytes"]]
    kept.sort(key=lambda row: (-row[1]["allocated_bytes"], -row[1]["output_bytes"], row[0]))
    for label, figures in kept[:top]:
        print(f"     {format_bytes(figures['allocated_bytes']):>12} allocated"
              f"  {format_bytes(figures['output_bytes']):>12} output  {label}")


def _print_space_without_curve(space: SpaceAnalysis, group: str, top: int, say_no_curve: bool,
                               scope: str = "") -> None:
    """A space without allocation records: no peak, so rank by what was allocated and produced."""
    totals = report.figures_dict(space.totals())
    count = space.trace.exec_count
    print(f"   allocated {format_bytes(totals['allocated_bytes'])}, output {format_bytes(totals['output_bytes'])}"
          f" over {count} op execution{'' if count == 1 else 's'}"
          + (f"; {space.trace.allocator} recorded no allocations, so no curve and no peak of its own: "
             "these bytes are in no other allocator's peak" if say_no_curve else ""))
    largest = _largest_allocation(space, group)
    if largest:
        print(f"   largest node: {largest['name']}{_op_type_suffix(largest['op_type'], largest['name'])}, allocated "
              f"{format_bytes(largest['allocated_bytes'])}, output {format_bytes(largest['output_bytes'])}")
    rows = _scope_rows(space, group, scope)
    if rows is None:
        _print_no_scope(space, group, scope)
    else:
        print(f"   scopes by allocated bytes in {scope} (group={group}):" if scope
              else f"   top scopes by allocated bytes (group={group}):")
        _print_ranked_by_allocated(rows, top)
        if not scope:
            _print_dominant_scope(space, group, rows, "allocated_bytes")
    execs, within = _scope_executions(space, group, scope)
    print(f"   top op types by allocated bytes{within}:")
    _print_ranked_by_allocated([(f"{row['name']} x{row['count']}", row["figures"])
                                for row in report.op_type_rows(space, execs)], top)
    rows = [row for row in report.category_rows(space, execs) if row["allocated_bytes"]]
    if rows:
        print(f"   categories by allocated bytes{within} (heuristic):")
        for row in rows:
            print(f"     {format_bytes(row['allocated_bytes']):>12}  {row['name']}")


def _largest_allocation(space: SpaceAnalysis, group: str) -> dict | None:
    """The execution that allocated the most (then produced the most), where there is no peak."""
    allocated, output = space.exec_columns[ALLOCATED], space.exec_columns[OUTPUT]
    if allocated.size == 0 or max(int(allocated.max()), int(output.max())) <= 0:
        return None
    execution = int(np.lexsort((-output, -allocated))[0])
    return {**report.node_ref(space, execution, group), "allocated_bytes": int(allocated[execution]),
            "output_bytes": int(output[execution])}


def _open_store(logdir: str, run: str | None):
    """(step store, request context, TensorBoard's warnings) over the logdir's runs (only `run` when
    given), or None after a one-line error."""
    if not logdir_mod.is_remote(logdir) and not os.path.isdir(logdir):
        print(f"tb-memory: {logdir} is not a directory", file=sys.stderr)
        return None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # remote logdirs may import TensorFlow
    catcher = _Warnings()
    tb_logger = logging.getLogger("tensorboard")
    tb_logger.addHandler(catcher)
    tb_logger.propagate = False
    try:
        provider = logdir_mod.data_provider(logdir, run)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        print(f"tb-memory: cannot read {logdir}: {exc}", file=sys.stderr)
        return None
    from tensorboard import context as tb_context

    from . import store

    catcher.damage = logdir_mod.take_damage()
    return (store.StepStore(provider, only_run=run, own_run_name=logdir_mod.own_name_of(logdir)),
            tb_context.RequestContext(), catcher)


def _print_json(body) -> None:
    """`--json` output, on one line: written by the json module's C encoder, which an indent turns off (an
    81-step profile's summary took 11 s indented, 3.8 s now, against 3 s for its text)."""
    sys.stdout.write(json.dumps(body))
    sys.stdout.write("\n")


def summary_command(args: argparse.Namespace) -> int:
    if args.scope and args.json:
        print("tb-memory: --scope lists scopes in the text; --json lists every scope already (each entry's parent "
              "says where it sits)", file=sys.stderr)
        return 2
    opened = _open_store(args.logdir, args.run)
    if opened is None:
        return 1
    steps_store, ctx, catcher = opened
    runs = steps_store.list_steps(ctx, "")
    refs = [ref for run_refs in runs.values() for ref in _with_tag(run_refs, args.tag)]
    if not refs:
        if runs:  # the runs hold traced steps, none of them this tag
            from .store import tag_order

            tags = sorted({ref.tag for run_refs in runs.values() for ref in run_refs}, key=tag_order)
            what = f"no tag {args.tag!r} in {args.run or args.logdir} (tags: {_few(tags)})"
        elif catcher.lost:  # said below (only the run asked for is read)
            what = f"no traced steps could be read in {args.run or args.logdir}"
        elif args.run is not None:
            what = _missing_run(args.logdir, args.run)
        else:
            hint = "; ".join(catcher.messages[:3])
            what = (f"no traced steps in {args.logdir} (TF1: write them with FileWriter.add_run_metadata; "
                    f"{TF2_PROFILE_HELP})"
                    + (f"; TensorBoard said: {hint}" if hint else ""))
        # One line: where a damaged record hid the step asked for, it says so.
        print(f"tb-memory: {catcher.with_damage(what)}", file=sys.stderr)
        return 1
    catcher.print_damage()
    results = []
    failures = []
    read = 0  # steps that could be read, or failed to: not the Keras callback's empty `batch_N` records
    for ref in refs:
        step = steps_store.analysis(ctx, "", ref)
        # The Keras callback's `batch_N` record beside its profile is empty by design (the README
        # says so): not a failure to report on every summary of the run.
        read += not step.beside_profile
        if step.status != "ok" and not step.beside_profile:
            failures.append(f"{ref.run}/{ref.tag}: {step.status}: {step.message}")
        spaces = step.spaces
        if args.device:
            spaces = [s for s in spaces if trace_mod.matches_device(s.trace, args.device)]
        results.append((ref, step, spaces))
    graphs = {run: steps_store.run_graph(ctx, "", run) for run in {ref.run for ref, _, _ in results}}
    found = {ref: findings_mod.findings_of_step(step, ref, runs.get(ref.run, []),
                                                lambda other: steps_store.analysis(ctx, "", other), graphs[ref.run])
             for ref, step, _ in results}
    if args.device and not any(spaces for _, _, spaces in results):
        there = sorted({space.trace.id for _, step, _ in results for space in step.spaces})
        print(f"tb-memory: no device matches --device {args.device!r}"
              + (f" (memory spaces: {_few(there)})" if there else ""), file=sys.stderr)
        return 1
    shown = [(ref, space) for ref, step, spaces in results if step.status == "ok" for space in spaces]
    if args.scope and shown and not any(_scope_rows(space, args.group, args.scope) is not None for _, space in shown):
        # A scope in none of the steps read (a typo): said in one line, as an unknown --device is. (With
        # no step read, the steps' own failures say why, below.)
        ref, space = shown[0]
        print(f"tb-memory: no scope {args.scope!r} in any step read; the top level of {ref.run}/{ref.tag} "
              f"(group={args.group}): {_few([path for path, _ in space.top_level(args.group)])}", file=sys.stderr)
        return 1
    if args.json:
        body = {"steps": [{
            "run": ref.run, "tag": ref.tag, "step": ref.step, "source": ref.source,
            "status": step.status, "message": step.message,
            "devices": [_device_json(report.device_summary(
                space, args.group, all_scopes=True, resident=report.space_resident(step, space, graphs[ref.run])))
                for space in spaces],
            "findings": [f for f in found[ref] if args.device is None or f["device"] in (None, *ids)],
        } for ref, step, spaces in results for ids in [[space.trace.id for space in spaces]]]}
        _print_json(body)
    else:
        for ref, step, spaces in results:
            if step.status != "ok":
                continue
            _print_step(ref.run, ref.tag, ref.step, step, spaces, args.group, args.top, graphs[ref.run], args.scope,
                        ref.function)
            _print_resident(step, spaces, graphs[ref.run], args.group, args.top, args.scope)
            _print_findings([f for f in found[ref]
                             if (args.device is None or f["device"] in (None, *(s.trace.id for s in spaces)))
                             # A finding's scope is a layer's: --scope filters by it in that grouping.
                             and (not args.scope or args.group != "layer"
                                  or _inside(f["scope"], args.scope))])
    for failure in failures:
        print(f"tb-memory: {failure}", file=sys.stderr)
    if not read:  # only the Keras callback's empty records were asked for: say why, and where to look
        ref, step, _ = results[0]
        print(f"tb-memory: {ref.run}/{ref.tag}: {step.status}: {step.message}", file=sys.stderr)
        return 1
    return 1 if failures and len(failures) == read else 0


# -- diff ------------------------------------------------------------------------------------


class _StepNotFound(LookupError):
    """A run, tag or memory space of `diff` that is not there (one line for the user)."""


class _Steps:
    """The traced steps of the runs `diff` names, each run read once and only it."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        self._stores: dict[str, tuple] = {}

    def refs(self, run: str) -> list | None:
        """The run's traced steps (None when the logdir cannot be read: already said). `.` is the
        logdir itself, named as summary names it (by its directory where it is the only run)."""
        if run == ".":
            run = logdir_mod.root_label(self.logdir, logdir_mod.own_name_of(self.logdir))
        if run not in self._stores:
            opened = _open_store(self.logdir, run)
            if opened is None:
                return None
            steps_store, ctx, catcher = opened
            if catcher.damage and not steps_store.list_steps(ctx, "").get(run):
                # One line, as summary says it: the damage is why the run shows no step.
                raise _StepNotFound(catcher.with_damage(
                    f"no traced steps could be read in run {run!r}" if catcher.lost else _missing_run(self.logdir, run)))
            catcher.print_damage()
            self._stores[run] = opened
        steps_store, ctx, _ = self._stores[run]
        return steps_store.list_steps(ctx, "").get(run, [])

    def default_run(self) -> str | None:
        """The run `--run` left out names: the logdir's one run with traced steps (a logdir that is
        itself a run, as summary names it); None when the logdir cannot be read (already said)."""
        opened = _open_store(self.logdir, None)
        if opened is None:
            return None
        steps_store, ctx, catcher = opened
        runs = [run for run, refs in steps_store.list_steps(ctx, "").items() if refs]
        if len(runs) == 1:  # this store serves that run: the logdir is read once
            catcher.print_damage()
            self._stores[runs[0]] = opened
            return runs[0]
        if not runs:
            raise _StepNotFound(catcher.with_damage(f"no traced steps could be read in {self.logdir}"))
        raise _StepNotFound(f"give --run: {self.logdir} holds {len(runs)} runs with traced steps ({_few(runs)})")

    def analysis(self, ref) -> StepAnalysis:
        steps_store, ctx, _ = self._stores[ref.run]
        return steps_store.analysis(ctx, "", ref)

    def run_graph(self, run: str):
        """The run's graph (its resident tensors), as summary reads it; None without one."""
        steps_store, ctx, _ = self._stores[run]
        return steps_store.run_graph(ctx, "", run)

    def devices(self, ref) -> list[str]:
        """The step's devices, as the page's run picker lists them."""
        steps_store, ctx, _ = self._stores[ref.run]
        return steps_store.step_devices(ctx, "", ref)


def _few(names: list[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def _missing_run(logdir: str, run: str) -> str:
    """Why a run named on the command line has no traced steps: it is not in the logdir (the
    runs that are, named), or it holds none."""
    from . import store

    try:  # runs with event files, and runs with only a profile (tf.profiler.experimental writes no events)
        profiled = {logdir_mod.own_name_of(logdir) if run == "." else run for run in store.find_profiles(logdir)}
        names = sorted(set(logdir_mod.run_directories(logdir)) | profiled)
    except Exception:  # noqa: BLE001 - an unreadable logdir: say only what is missing
        names = []
    if run in names:
        return (f"run {run!r} in {logdir} has no traced steps (TF1: write them with FileWriter.add_run_metadata; "
                f"{TF2_PROFILE_HELP})")
    # The directory given to a writer that adds its own (Keras' TensorBoard callback: `<dir>/train`).
    below = [name for name in names if name.startswith(run + "/")]
    if below:
        return f"no run {run!r} in {logdir}; runs below it: {_few(below)}"
    return f"no run {run!r} in {logdir}" + (f" (runs: {_few(names)})" if names else "")


def _with_tag(refs: list, tag: str | None) -> list:
    """The steps --tag names: all without one; the tag itself; else the tags it ends (after a "/"),
    so that `step_1` names a profile's `profile/<session>/step_1`, whose session differs per run."""
    if tag is None:
        return refs
    exact = [ref for ref in refs if ref.tag == tag]
    return exact or [ref for ref in refs if ref.tag.endswith("/" + tag.lstrip("/"))]


def _pick_step(steps: _Steps, refs: list, run: str, tag: str | None, preferred_tag: str | None = None):
    """`tag` of the run; without one, `preferred_tag` when the run has it, else its latest step
    that holds step stats (store.latest_step), as the page opens it."""
    from . import store

    if not refs:
        raise _StepNotFound(_missing_run(steps.logdir, run))
    wanted = tag or preferred_tag
    for ref in refs:
        if ref.tag == wanted:
            return ref
    if tag is not None:
        ending = _with_tag(refs, tag)
        if len(ending) == 1:
            return ending[0]
        if ending:
            raise _StepNotFound(f"tag {tag!r} ends several tags of run {run!r} ({_few([r.tag for r in ending], 6)}): "
                                "give one whole")
        raise _StepNotFound(f"no tag {tag!r} in run {run!r} (it has {_few([r.tag for r in refs], 6)})")
    return store.latest_step(refs, steps.devices)


def _against(steps: _Steps, against: str, run: str, a_tag: str):
    """The baseline step of `--against RUN[:TAG]`: an empty RUN is A's run; without TAG, A's tag
    when that run has it, else its latest step. A run whose name holds ':' is found whole too."""
    readings = []
    if ":" in against:
        head, _, tail = against.rpartition(":")
        readings.append((head or run, tail or None))
    readings.append((against, None))
    for baseline_run, tag in readings:
        refs = steps.refs(baseline_run)
        if refs is None:
            return None
        if refs:
            return _pick_step(steps, refs, baseline_run, tag, preferred_tag=a_tag)
    raise _StepNotFound(_missing_run(steps.logdir, readings[0][0]))


def _pick_space(step: StepAnalysis, wanted: str | None, name: str) -> SpaceAnalysis:
    """The memory space --device names (the step's default one without it, or among several matches)."""
    if wanted is None:
        return step.space(None)
    found = step.space(wanted)
    if found is None:
        raise _StepNotFound(step.why_no_space(wanted, name))
    return found


def _signed(value: int) -> str:
    return ("+" if value > 0 else "") + format_bytes(value)


def _peak_text(space: SpaceAnalysis) -> str:
    if not space.has_curve:
        return "no allocation records: no curve, no peak"
    peak, rise = space.peak_bytes, space.peak_rise_bytes
    return (f"peak {format_bytes(rise if peak is None else peak)} at "
            f"{space.curve.peak_time_us / 1000:.3f} ms, rise {format_bytes(rise)}"
            + (" (relative to the step's start)" if peak is None else ""))


def _print_changes(title: str, table: compare.Table, ranked, figure: int, top: int) -> None:
    """The largest increases, then the largest decreases, of one figure (`ranked` by change)."""
    column = table.column(figure)
    deltas = table.delta[ranked, column]
    for heading, rows in (("increases", ranked[deltas > 0]), ("decreases", ranked[deltas < 0])):
        print(f"   {title}, largest {heading}:")
        if rows.size == 0:
            print("     (none)")
        for row in rows[:top].tolist():
            status = table.status[row]
            mark = f" ({status})" if status in (compare.ADDED, compare.REMOVED) else ""
            chunks = ", the same requests: the allocator's chunks" if table.same_requests[row] else ""
            print(f"     {_signed(int(table.delta[row, column])):>12}  {table.names[row]}{mark}"
                  f"  ({format_bytes(int(table.b[row, column]))} -> {format_bytes(int(table.a[row, column]))}{chunks})")


_RENUMBERED_SHOWN = 3  # B -> A renames the text diff names, as the page does; --json lists them all


def _start_change_text(change: compare.StartChange) -> str:
    """What changed in the bytes in use before the step, A - B, by the runs' resident tensors where both
    runs' graphs give them (compare.start_change)."""
    if change.parts is None:
        return "the bytes in use before the step, in no listing below (`summary` on each splits them by the run's graph)"
    counted = (f" (of the tensors of {format_bytes(change.counts_from)} and more, which the starts count)"
               if change.counts_from else "")
    return "the bytes in use before the step, in no listing below: " + ", ".join(
        f"{name} {_signed(delta)}" for name, delta in change.parts) + counted


def _print_diff(comparison: compare.Comparison, a_name: str, b_name: str, top: int,
                start_change: compare.StartChange | None = None) -> None:
    print(f"== {a_name} against {b_name}")
    for side, space in (("A", comparison.a), ("B", comparison.b)):
        print(f"   {side} {space.trace.id}: {_peak_text(space)}")
    if comparison.models_note:
        print(f"   note: {comparison.models_note}")
    renumbered = comparison.renumbered
    if renumbered:
        shown = ", ".join(f"{b_path} -> {a_path}" for b_path, a_path in renumbered[:_RENUMBERED_SHOWN])
        more = len(renumbered) - _RENUMBERED_SHOWN
        print(f"   B's names numbered as A's (a model built again in one process or graph): {shown}"
              + (f" and {more} more" if more > 0 else ""))
    figure = comparison.figure
    if comparison.has_at_peak:
        what = "at peak"
        absolute = "" if start_change is None else \
            f"peak {_signed(start_change.delta_bytes + comparison.peak_rise_delta_bytes)}, "
        print(f"   {absolute}peak rise {_signed(comparison.peak_rise_delta_bytes)} (A - B): top-level scopes, op types "
              "and categories each add up to the peak rise's change")
        if start_change is not None and start_change.delta_bytes:
            print(f"   start {_signed(start_change.delta_bytes)}: {_start_change_text(start_change)}")
        for side, space in (("A", comparison.a), ("B", comparison.b)):
            gap = findings_mod.readings_gap(space)
            if gap is not None:
                print(f"   note: {side}'s allocator readings and its records disagree by up to {format_bytes(gap)} "
                      f"(allocator_gap): its peak, and so the change, may be off by that much; `summary` on {side} "
                      "says why")
    else:
        what = "allocated"
        print("   no peak to compare (a step without allocation records): allocated bytes are compared")
    scopes = comparison.scopes
    ranked = scopes.most_specific(scopes.ranked_by_change(comparison.subtree(0)), figure)
    _print_changes(f"scopes {what} (group={comparison.group})", scopes, ranked, figure, top)
    op_types = comparison.op_types()
    _print_changes(f"op types {what}", op_types, op_types.ranked_by_change(), figure, top)
    categories = comparison.categories()
    column = categories.column(figure)
    print(f"   categories {what} (heuristic):")
    for row, name in enumerate(categories.names):
        print(f"     {_signed(int(categories.delta[row, column])):>12}  {name}"
              f"  ({format_bytes(int(categories.b[row, column]))} -> {format_bytes(int(categories.a[row, column]))})")


def diff_command(args: argparse.Namespace) -> int:
    steps = _Steps(args.logdir)
    try:
        if args.run is None:
            args.run = steps.default_run()
            if args.run is None:
                return 1
        refs = steps.refs(args.run)
        if refs is None:
            return 1
        a_ref = _pick_step(steps, refs, args.run, args.tag)
        b_ref = _against(steps, args.against, args.run, a_ref.tag)
        if b_ref is None:
            return 1
        sides = []
        for ref, wanted, name in ((a_ref, args.device, "A"), (b_ref, args.against_device or args.device, "B")):
            step = steps.analysis(ref)
            if step.status != "ok":
                raise _StepNotFound(f"{ref.run}/{ref.tag}: {step.status}: {step.message}")
            sides.append((ref, _pick_space(step, wanted, f"{ref.run}/{ref.tag}")))
    except _StepNotFound as exc:
        print(f"tb-memory: {exc}", file=sys.stderr)
        return 1
    (a_ref, a_space), (b_ref, b_space) = sides
    comparison = compare.Comparison(a_space, b_space, args.group, renumber=compare.renumbers(a_ref.run, b_ref.run))
    start_change = compare.start_change(comparison, *(
        report.space_resident(steps.analysis(ref), space, steps.run_graph(ref.run)) for ref, space in sides))
    if args.json:
        body = compare_report.comparison_dict(
            comparison, compare_report.side_dict(a_space, a_ref.run, a_ref.tag, a_ref.step, a_ref.source),
            compare_report.side_dict(b_space, b_ref.run, b_ref.tag, b_ref.step, b_ref.source),
            start_change=start_change)
        _print_json(body)
    else:
        _print_diff(comparison, f"{a_ref.run} / {a_ref.tag} ({_step_label(a_ref.tag, a_ref.step, a_ref.function)})",
                    f"{b_ref.run} / {b_ref.tag} ({_step_label(b_ref.tag, b_ref.step, b_ref.function)})", args.top,
                    start_change)
    return 0


# -- whatif ----------------------------------------------------------------------------------


_BYTE_COUNT_RE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>(?:[KMGT]i?)?B?)\s*$", re.IGNORECASE)
_BARE_BYTES_MIN = 1 << 20  # a bare number under this is no limit anyone means in bytes (the page's rule too)


def byte_count(text: str) -> int:
    """`--limit`: bytes (1 MiB or more, bare), or a number with a binary unit (`16GiB`, `512M`:
    powers of 1024; `40B` for bytes under 1 MiB). A bare `40` is refused, as the page refuses it:
    40 bytes is no limit, and 40 GiB needs its unit."""
    match = _BYTE_COUNT_RE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (bytes, or 16GiB, 512MiB)")
    if match.group("unit") == "" and float(match.group("number")) < _BARE_BYTES_MIN:
        raise argparse.ArgumentTypeError(f"{text!r} bytes is no limit: give its unit (16GiB, 512MiB; 40B for bytes)")
    unit = match.group("unit").upper()[:1]
    value = int(float(match.group("number")) * 1024 ** (" KMGT".index(unit) if unit not in ("", "B") else 0))
    if value < 1:
        raise argparse.ArgumentTypeError(f"a limit must be at least 1 byte, got {text!r}")
    if value > LIMIT_MAX_BYTES:
        raise argparse.ArgumentTypeError(f"{text!r} is past any memory (at most 4 EiB, as the page takes)")
    return value


def _whatif_steps(args: argparse.Namespace) -> tuple[list, list] | None:
    """(the traced steps `whatif` reads (`_whatif_pairs`): each --tag's step (else the first run's latest
    step), and of each other run without a tag of its own the step matching the first
    (store.matching_step); the first run's other steps (store.siblings), which its step's peak is
    compared with), each in the memory space --device names (a sibling without it, or that cannot be
    read, is left out)."""
    from . import store, whatif

    steps = _Steps(args.logdir)
    picked = []
    first = None
    runs = args.run or []
    if not runs:
        run = steps.default_run()
        if run is None:
            return None
        runs = [run]
    wanted = _whatif_pairs(runs, args.tag or [])
    given = args.traced_batch or []
    if given and len(given) != len(wanted):
        raise _StepNotFound(f"--traced-batch given {len(given)} times for {len(wanted)} steps: give it once per step "
                            "(per --run, or per --tag of one run), in the same order")
    seen = set()
    for (run, tag), batch in itertools.zip_longest(wanted, given):
        refs = steps.refs(run)
        if refs is None:
            return None
        # The first step's --tag (else its run's latest step); another run's without a tag, the step matching it.
        ref = (_pick_step(steps, refs, run, tag) if first is None or tag is not None
               else store.matching_step(refs, first, steps.devices))
        if (ref.run, ref.tag) in seen:
            raise _StepNotFound(f"{ref.run}/{ref.tag} is given twice: each step once")
        seen.add((ref.run, ref.tag))
        first = first or ref
        step = steps.analysis(ref)
        if step.status != "ok":
            raise _StepNotFound(f"{ref.run}/{ref.tag}: {step.status}: {step.message}")
        space = _pick_space(step, args.device, f"{ref.run}/{ref.tag}")
        picked.append(whatif.Traced(ref.run, ref.tag, ref.step, ref.source, step, space, batch))
    return picked, whatif.siblings_of(picked[0], first, steps.refs(first.run) or [], steps.analysis)


def _whatif_pairs(runs: list[str], tags: list[str]) -> list[tuple[str, str | None]]:
    """The (run, tag) of each step `whatif` reads, from its --run and --tag: one tag (or none) for the
    first run, the others' steps matching it; several tags of one run (a script that traced batches 2, 4
    and 8 into one run); or one tag per run, in order."""
    if len(tags) <= 1:
        repeated = [run for run, count in collections.Counter(runs).items() if count > 1]
        if repeated:
            raise _StepNotFound(f"--run {repeated[0]} is given twice: to fit steps of one run traced at several "
                                f"batch sizes, give --tag once per step (--run {repeated[0]} --tag A --tag B)")
        return [(runs[0], tags[0] if tags else None)] + [(run, None) for run in runs[1:]]
    if len(runs) == 1:
        return [(runs[0], tag) for tag in tags]
    if len(runs) == len(tags):
        return list(zip(runs, tags))
    raise _StepNotFound(f"--tag given {len(tags)} times for {len(runs)} runs: give it once (the first run's step; "
                        "the others' matching it), once per --run in the same order, or several times with one --run")


def _print_whatif(body: dict) -> None:
    from .whatif import MAX_BATCH_SEARCHED, batch_text
    runs = ", ".join(f"{r['run']} / {r['tag']} (batch {r['batch']})" for r in body["runs"])
    print(f"== what-if at batch {body['batch']}, from {runs} on {body['runs'][0]['device']}")
    if body["predictions"]["fit"] is None and len(body["runs"]) > 1:
        print(f"   no fit: every step read holds batch {body['runs'][0]['batch']} (a fit needs steps of the model "
              "traced at other batch sizes)")
    names = {"fit": "fit (fixed + per-sample bytes per layer through batches {batches})",
             "one_step": "one step ({from_run} / {from_tag} at batch {traced_batch}, batch-carrying bytes scaled)"}
    limit = body["limit_bytes"]
    for method in dict.fromkeys((body["method"], *body["predictions"])):  # the lead prediction first
        prediction = body["predictions"][method]
        if prediction is None:
            continue
        peak = prediction["predicted_peak_bytes"]
        name = names[method].format(**{**prediction, "batches": ", ".join(map(str, prediction.get("batches", ())))})
        print(f"   {name}:")
        start = prediction["predicted_start_bytes"]
        print(f"     predicted peak {format_bytes(peak) if peak is not None else 'n/a (no baseline)'}, "
              f"rise {format_bytes(prediction['predicted_peak_rise_bytes'])}"
              + (f" (over a start of {format_bytes(start)})" if start is not None else ""))
        if prediction.get("warning"):
            print(f"     warning: {prediction['warning']}")
        if limit is not None:
            fits = prediction["max_batch"]
            what = "peak" if body["limit_applies_to"] == "peak_bytes" else "peak rise"
            print(f"     largest batch whose {what} fits in {format_bytes(limit)} ({body['limit_source']}): "
                  + ("none read from a line that falls with the batch" if prediction.get("falls")
                     else f"any: no batch up to {MAX_BATCH_SEARCHED:,} reaches it" if fits is None
                     else "none: not even batch 1 fits" if fits == 0 else str(fits)))
    for note in body["notes"]:
        print(f"   note: {note}")
    print(f"   top layers at the predicted peak ({body['method'].replace('_', ' ')}; each layer's own ops, "
          "a layer inside it a row of its own):")
    for layer in body["layers"]:
        if "per_sample_bytes" not in layer:
            how = f"  (traced {format_bytes(layer['traced_at_peak_bytes'])})"
        elif layer["from_batch"] is not None:  # grew faster than the batch: a negative fixed part says less
            how = f"  ({format_bytes(layer['per_sample_bytes'])} per sample above batch {batch_text(layer['from_batch'])})"
        else:
            how = f"  (fixed {format_bytes(layer['fixed_bytes'])} + {format_bytes(layer['per_sample_bytes'])} per sample)"
        print(f"     {format_bytes(layer['at_peak_bytes']):>12}  {layer['layer'] or '(top level)'}{how}")


def whatif_command(args: argparse.Namespace) -> int:
    from . import whatif, whatif_report

    try:
        steps = _whatif_steps(args)
        if steps is None:
            return 1
        steps, siblings = steps
        body = whatif_report.whatif_dict(whatif.WhatIf(steps, args.batch, args.limit, siblings))
    except (_StepNotFound, whatif.WhatIfError) as exc:
        print(f"tb-memory: {exc}", file=sys.stderr)
        return 1
    if args.json:
        _print_json(body)
    else:
        _print_whatif(body)
    return 0


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _top(text: str) -> int:
    """--top: rows to list, at least 1 (its subcommand's usage says so otherwise)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _run_name(text: str) -> str:
    """--run: a run as TensorBoard names it, a path below the logdir (`keras_unet/train/` and
    `./keras_unet/train` are `keras_unet/train`)."""
    return posixpath.normpath(text) if text else text


def _scope_path(text: str) -> str:
    """--scope: a scope path as the listings print it (`small_unet/dec_1`), without slashes around it."""
    return text.strip("/")


def _batch(text: str) -> int:
    """--batch: as the whatif route bounds it."""
    from .whatif import MAX_BATCH_SEARCHED

    value = _integer(text)
    if not 1 <= value <= MAX_BATCH_SEARCHED:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_BATCH_SEARCHED:,}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tb-memory", description="Where a TensorFlow step's memory goes.")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="peak, top scopes, op types and categories of each traced step")
    summary.add_argument("logdir")
    summary.add_argument("--run", type=_run_name)
    summary.add_argument("--tag", help="the steps of this tag; or of the tags it ends after a '/' (`step_1` for a "
                                       "profile's `profile/<session>/step_1`)")
    summary.add_argument("--device", help="memory space id (CPU:0/mklcpu), device name or allocator")
    summary.add_argument("--group", choices=GROUPS, default="layer")
    summary.add_argument("--scope", default="", type=_scope_path, metavar="PATH",
                         help="list the scopes inside PATH (as the page's drill in) rather than the top level; "
                              "--json lists every scope")
    summary.add_argument("--top", type=_top, default=10)
    summary.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    diff = commands.add_parser("diff", help="what grew: one traced step against a baseline step, scope by scope")
    diff.add_argument("logdir")
    diff.add_argument("--run", type=_run_name, help="the run of step A (default: the logdir's one run)")
    diff.add_argument("--tag", help="step A's tag (default: the run's latest step)")
    diff.add_argument("--against", required=True, metavar="RUN[:TAG]",
                      help="the baseline step B (RUN empty: A's run; TAG left out: A's tag, else the latest step)")
    diff.add_argument("--device", help="A's memory space (default: the step's main one)")
    diff.add_argument("--against-device", help="B's memory space (default: as --device)")
    diff.add_argument("--group", choices=GROUPS, default="layer")
    diff.add_argument("--top", type=_top, default=10)
    diff.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    what = commands.add_parser("whatif", help="the peak at another batch size, the layers holding it, the "
                                              "largest batch that fits")
    what.add_argument("logdir")
    what.add_argument("--run", action="append", type=_run_name,
                      help="a run to predict from; several runs of the same graph at other batch sizes are fitted "
                           "(default: the logdir's one run)")
    what.add_argument("--tag", action="append",
                      help="the step to predict from (default: the run's latest step; other runs' steps match it); "
                           "several with one --run fit that run's steps, or once per --run in order")
    what.add_argument("--batch", required=True, type=_batch,
                      help="the batch size to predict (the global batch, where a distribution strategy runs replicas)")
    what.add_argument("--traced-batch", type=_batch, action="append",
                      help="the batch each step ran at (global, as --batch), once per step (per --run, or per --tag "
                           "of one run) in order, where the one read from its shapes is wrong (a time-major or "
                           "ragged feed)")
    what.add_argument("--limit", type=byte_count, help="memory limit: 16GiB, or bytes from 1 MiB (units are powers of "
                                                       "1024, 16GB and 16G too, as memory sizes are quoted): the largest "
                                                       "batch that fits (default: a GPU allocator's capacity, where "
                                                       "traced; none on a CPU)")
    what.add_argument("--device", help="the memory space (default: the step's main one)")
    what.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    args = parser.parse_args(argv)
    commands_by_name = {"diff": diff_command, "summary": summary_command, "whatif": whatif_command}
    try:
        return commands_by_name[args.command](args)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other commands do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
