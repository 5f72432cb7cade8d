"""`tb-memory`: the same analysis as the Memory tab, in a terminal.

    tb-memory summary LOGDIR [--run R] [--tag T] [--device D]
                             [--group layer|scope] [--top N] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import numpy as np

from . import logdir as logdir_mod, report, trace as trace_mod
from .analysis import GROUPS, SpaceAnalysis, StepAnalysis
from .figures import ALLOCATED, AT_PEAK, FIGURES, OUTPUT


class _Warnings(logging.Handler):
    """Collects TensorBoard's warnings about unreadable event files."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])


def format_bytes(value: int | None) -> str:
    if value is None:
        return "n/a"
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value:.1f} TiB"


AT_PEAK_KEY = FIGURES[AT_PEAK]


def _device_json(device: dict) -> dict:
    flat = dict(device)
    flat["op_types"] = [{"name": row["name"], "count": row["count"], **row["figures"]} for row in device["op_types"]]
    if not device["has_curve"]:  # no allocation records: no peak and no at-peak figure, rather than zeros
        flat.update(peak_rise_bytes=None, peak_time_us=None, figures={**device["figures"], AT_PEAK_KEY: None})
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
                top: int) -> None:
    print(f"== {run} / {tag} (step {step_number})")
    if step.message:
        print(f"   note: {step.message}")
    curve_elsewhere = any(s.has_curve for s in step.spaces)  # else the note above already says "no curve"
    for space in spaces:  # the spaces --device selected (all of them without it)
        pinned = space.trace.device_type != "CPU" and space.trace.memory_kind == trace_mod.HOST_MEMORY
        print(f"-- {space.trace.id} ({'host memory pinned for ' if pinned else ''}{space.trace.device})")
        if space.has_curve:
            _print_space_at_peak(space, group, top)
        else:
            _print_space_without_curve(space, group, top, say_no_curve=curve_elsewhere)


def _print_space_at_peak(space: SpaceAnalysis, group: str, top: int) -> None:
    summary = report.device_summary(space, group)
    start = summary["start_bytes"]
    baseline = (f"start {format_bytes(start)} (allocator_bytes_in_use)" if start is not None
                else "relative to the step's start (this allocator reports no bytes in use)")
    peak = summary["peak_bytes"] if start is not None else summary["peak_rise_bytes"]
    print(f"   peak {format_bytes(peak)} at {summary['peak_time_us'] / 1000:.3f} ms, "
          f"rise {format_bytes(summary['peak_rise_bytes'])}; {baseline}")
    if summary["peak_node"]:
        print(f"   op at peak: {summary['peak_node']['name']} ({summary['peak_node']['op_type']})")
    if summary["largest_at_peak"]:
        largest = summary["largest_at_peak"]
        print(f"   biggest holder at peak: {largest['name']} ({largest['op_type']}), "
              f"{format_bytes(largest['at_peak_bytes'])}")
    tree = space.tree(group)
    print(f"   top scopes at peak (group={group}):")
    for child in tree.children[0][:top]:
        row = report.figures_dict(tree.figures[child])
        print(f"     {format_bytes(row['at_peak_bytes']):>12}  {tree.paths[child]}"
              f"  (allocated {format_bytes(row['allocated_bytes'])})")
    print("   top op types at peak:")
    for row in summary["op_types"][:top]:
        print(f"     {format_bytes(row['figures']['at_peak_bytes']):>12}  {row['name']} x{row['count']}"
              f"  (allocated {format_bytes(row['figures']['allocated_bytes'])})")
    print("   categories at peak (heuristic):")
    for row in summary["categories"]:
        print(f"     {format_bytes(row['at_peak_bytes']):>12}  {row['name']}")


def _print_ranked_by_allocated(rows: list[tuple[str, dict]], top: int) -> None:
    """(label, figures) rows that allocated or produced bytes, most allocated first, then most output."""
    kept = [(label, figures) for label, figures in rows if figures["allocated_bytes"] or figures["output_bytes"]]
    kept.sort(key=lambda row: (-row[1]["allocated_bytes"], -row[1]["output_bytes"], row[0]))
    for label, figures in kept[:top]:
        print(f"     {format_bytes(figures['allocated_bytes']):>12} allocated"
              f"  {format_bytes(figures['output_bytes']):>12} output  {label}")


def _print_space_without_curve(space: SpaceAnalysis, group: str, top: int, say_no_curve: bool) -> None:
    """A space without allocation records: no peak, so rank by what was allocated and produced."""
    totals = report.figures_dict(space.totals())
    count = space.trace.exec_count
    print(f"   allocated {format_bytes(totals['allocated_bytes'])}, output {format_bytes(totals['output_bytes'])}"
          f" over {count} op execution{'' if count == 1 else 's'}"
          + ("; no allocation records, so no curve and no peak" if say_no_curve else ""))
    largest = _largest_allocation(space, group)
    if largest:
        print(f"   largest node: {largest['name']} ({largest['op_type']}), allocated "
              f"{format_bytes(largest['allocated_bytes'])}, output {format_bytes(largest['output_bytes'])}")
    tree = space.tree(group)
    print(f"   top scopes by allocated bytes (group={group}):")
    _print_ranked_by_allocated([(tree.paths[c], report.figures_dict(tree.figures[c])) for c in tree.children[0]], top)
    print("   top op types by allocated bytes:")
    _print_ranked_by_allocated([(f"{row['name']} x{row['count']}", row["figures"]) for row in report.op_type_rows(space)],
                               top)
    rows = [row for row in report.category_rows(space) if row["allocated_bytes"]]
    if rows:
        print("   categories by allocated bytes (heuristic):")
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


def _matches_device(space: SpaceAnalysis, wanted: str) -> bool:
    """--device as users write it: the space id (`GPU:0/GPU_0_bfc`), its allocator, a device type
    (`GPU`), or the device in any spelling (`/gpu:0`, `/device:GPU:0`, `GPU:0`,
    `/job:localhost/replica:0/task:0/gpu:0`)."""
    trace = space.trace
    if wanted.lower() in (trace.id.lower(), trace.device.lower(), trace.allocator.lower(), trace.device_type.lower()):
        return True
    device = trace_mod.parse_device(wanted)
    return device is not None and device == trace_mod.parse_device(trace.device)


def summary_command(args: argparse.Namespace) -> int:
    if not logdir_mod.is_remote(args.logdir) and not os.path.isdir(args.logdir):
        print(f"tb-memory: {args.logdir} is not a directory", file=sys.stderr)
        return 1
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # remote logdirs may import TensorFlow
    catcher = _Warnings()
    tb_logger = logging.getLogger("tensorboard")
    tb_logger.addHandler(catcher)
    tb_logger.propagate = False
    try:
        provider = logdir_mod.data_provider(args.logdir, args.run)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        print(f"tb-memory: cannot read {args.logdir}: {exc}", file=sys.stderr)
        return 1
    from tensorboard import context as tb_context

    from . import store

    ctx = tb_context.RequestContext()
    steps_store = store.StepStore(provider)
    runs = steps_store.list_steps(ctx, "")
    refs = [ref for run_refs in runs.values() for ref in run_refs if args.tag in (None, ref.tag)]
    if not refs:
        what = "no traced steps" if not runs and args.run is None else "no traced step matches --run/--tag"
        hint = "; ".join(catcher.messages[:3])
        print(f"tb-memory: {what} in {args.logdir} (write them with FileWriter.add_run_metadata)"
              + (f"; TensorBoard said: {hint}" if hint else ""), file=sys.stderr)
        return 1
    results = []
    failures = []
    for ref in refs:
        step = steps_store.analysis(ctx, "", ref)
        if step.status != "ok":
            failures.append(f"{ref.run}/{ref.tag}: {step.status}: {step.message}")
        spaces = step.spaces
        if args.device:
            spaces = [s for s in spaces if _matches_device(s, args.device)]
        results.append((ref, step, spaces))
    if args.device and not any(spaces for _, _, spaces in results):
        print(f"tb-memory: no device matches --device {args.device!r}", file=sys.stderr)
        return 1
    if args.json:
        body = {"steps": [{
            "run": ref.run, "tag": ref.tag, "step": ref.step, "status": step.status, "message": step.message,
            "devices": [_device_json(report.device_summary(space, args.group, all_scopes=True)) for space in spaces],
        } for ref, step, spaces in results]}
        json.dump(body, sys.stdout, indent=1)
        print()
    else:
        for ref, step, spaces in results:
            if step.status != "ok":
                continue
            _print_step(ref.run, ref.tag, ref.step, step, spaces, args.group, args.top)
    for failure in failures:
        print(f"tb-memory: {failure}", file=sys.stderr)
    return 1 if failures and len(failures) == len(results) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tb-memory", description="Where a TensorFlow step's memory goes.")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="peak, top scopes, op types and categories of each traced step")
    summary.add_argument("logdir")
    summary.add_argument("--run")
    summary.add_argument("--tag")
    summary.add_argument("--device", help="memory space id (CPU:0/mklcpu), device name or allocator")
    summary.add_argument("--group", choices=GROUPS, default="layer")
    summary.add_argument("--top", type=int, default=10)
    summary.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be at least 1")
    try:
        return summary_command(args)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other commands do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
