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

from . import report
from .analysis import GROUPS, StepAnalysis


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
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value} B"


def _data_provider(logdir: str):
    """TensorBoard's own event loading and data provider over a logdir."""
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    from . import store

    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        tensor_size_guidance={store.TAGGED_RUN_METADATA: 0, store.RUN_METADATA: 0, store.GRAPHS: 1})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    return data_provider.MultiplexerDataProvider(multiplexer, logdir)


def _device_json(device: dict) -> dict:
    flat = dict(device)
    flat["op_types"] = [{"name": row["name"], "count": row["count"], **row["figures"]} for row in device["op_types"]]
    return flat


def _print_step(run: str, tag: str, step_number: int, step: StepAnalysis, spaces: list, group: str,
                top: int) -> None:
    print(f"== {run} / {tag} (step {step_number})")
    if step.message:
        print(f"   note: {step.message}")
    for space in spaces:  # the spaces --device selected (all of them without it)
        summary = report.device_summary(space, group)
        start = summary["start_bytes"]
        baseline = (f"start {format_bytes(start)} (allocator_bytes_in_use)" if start is not None
                    else "relative to the step's start (this allocator reports no bytes in use)")
        peak = summary["peak_bytes"] if start is not None else summary["peak_rise_bytes"]
        print(f"-- {space.trace.id} ({space.trace.device})")
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


def summary_command(args: argparse.Namespace) -> int:
    if "://" not in args.logdir and not os.path.isdir(args.logdir):
        print(f"tb-memory: {args.logdir} is not a directory", file=sys.stderr)
        return 1
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorBoard may import TensorFlow
    from tensorboard import context as tb_context

    from . import store

    catcher = _Warnings()
    tb_logger = logging.getLogger("tensorboard")
    tb_logger.addHandler(catcher)
    tb_logger.propagate = False
    try:
        provider = _data_provider(args.logdir)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        print(f"tb-memory: cannot read {args.logdir}: {exc}", file=sys.stderr)
        return 1
    ctx = tb_context.RequestContext()
    steps_store = store.StepStore(provider)
    runs = steps_store.list_steps(ctx, "")
    refs = [ref for run, run_refs in runs.items() if args.run in (None, run) for ref in run_refs
            if args.tag in (None, ref.tag)]
    if not refs:
        what = "no traced steps" if not runs else "no traced step matches --run/--tag"
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
            spaces = [s for s in spaces if args.device in (s.trace.id, s.trace.device, s.trace.allocator)
                      or s.trace.id.startswith(args.device)]
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
    return summary_command(args)


if __name__ == "__main__":
    sys.exit(main())
