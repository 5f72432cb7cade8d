"""What the bench_*.py scripts share: the two benchmark steps, the engine's per-name caches, a side-by-side table."""

from __future__ import annotations

import glob
import inspect
import os
import resource
import sys

# make_big_trace.py's default output of each shape: the loop step repeats names, the deep one hardly ever does.
SHAPES = {"/tmp/tb_memory_big": "loop", "/tmp/tb_memory_deep": "deep"}
DEFAULT_DIRS = list(SHAPES)
MINUTES_TO_MAKE = {"deep": " (~4 minutes)"}


def shape_of(directory: str) -> str:
    """`loop` or `deep` for make_big_trace.py's default directories, else the directory's name."""
    path = os.path.normpath(os.path.abspath(directory))
    return SHAPES.get(path, os.path.basename(path))


def present(dirs: list[str], needed: str) -> list[str]:
    """The directories holding `needed` (a glob); for each other one, says how to generate it."""
    found = []
    for directory in dirs:
        if glob.glob(os.path.join(directory, needed)):
            found.append(directory)
            continue
        shape = SHAPES.get(os.path.normpath(os.path.abspath(directory)))
        how = f"python benchmarks/make_big_trace.py --shape {shape or 'loop|deep'} --out {directory}"
        print(f"skipping {directory}: no {needed} there; generate it with `{how}`{MINUTES_TO_MAKE.get(shape, '')}",
              flush=True)
    if not found:
        sys.exit("nothing to measure")
    return found


def peak_rss_bytes() -> int:
    """This process's peak resident memory.

    VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child
    started by a big parent would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def per_name_caches() -> list:
    """The engine's functools caches keyed by an argument (names, paths): what a new step has not seen.

    Caches of functions without arguments (built schemas, tables) are the process's, kept warm.
    """
    caches = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("tb_memory_plugin"):
            continue
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)) and inspect.signature(value).parameters:
                caches[id(value)] = value
    return list(caches.values())


def print_table(columns: list[str], rows: list[tuple], first_width: int = 44) -> None:
    """Rows of (label, one cell per column[, note]) with the columns side by side."""
    cells = [cell for _, *row in rows for cell in row[:len(columns)]]
    width = 2 + max([20] + [len(c) for c in columns] + [len(cell) for cell in cells])
    print(f"{'':{first_width}s}" + "".join(f"{c:>{width}s}" for c in columns))
    for label, *cells in rows:
        note = cells[len(columns)] if len(cells) > len(columns) else ""
        print(f"{label:{first_width}s}" + "".join(f"{c:>{width}s}" for c in cells[:len(columns)])
              + (f"   {note}" if note else ""))
