"""The names of the figures and categories, in the column order every table uses.

What each one means: docs/figures.md.
"""

from decimal import ROUND_HALF_UP, Decimal

import numpy as np

# Per execution, per scope, per op type: one column each, in this order.
FIGURES = (
    "at_peak_bytes",
    "allocated_bytes",
    "op_peak_bytes",
    "live_bytes",
    "output_bytes",
    "temp_bytes",
    "persistent_bytes",
)
AT_PEAK, ALLOCATED, OP_PEAK, LIVE, OUTPUT, TEMP, PERSISTENT = range(len(FIGURES))

# What bytes are for (heuristic, from names, op types and lifetimes: names.categorise).
CATEGORIES = (
    "parameters",
    "inputs",
    "activations",
    "gradients",
    "optimizer",
    "temporaries",
    "other",
)
PARAMETERS, INPUTS, ACTIVATIONS, GRADIENTS, OPTIMIZER, TEMPORARIES, OTHER = range(len(CATEGORIES))


# The largest memory limit a what-if takes (4 EiB): the route's bound on `limit` and the CLI's on `--limit`.
LIMIT_MAX_BYTES = 2**62


def format_bytes(value: int | None) -> str:
    """A byte figure as the CLI, findings and notes write it (`1.5 KiB`, `-2.0 KiB`; `n/a` for None)."""
    if value is None:
        return "n/a"
    sign = "-" if value < 0 else ""
    value = abs(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{_one_decimal(value)} {unit}"
        value /= 1024
    return f"{sign}{_one_decimal(value)} TiB"


def _one_decimal(value: float) -> str:
    """One decimal, a tie rounded up, as JavaScript's toFixed rounds: where the page shows one decimal too (10
    to 100 of a unit: it keeps three digits), they agree (12,845,056 B is 12.25 MiB, 12.3 on both; Python's
    format rounds such a tie to even, 12.2)."""
    return str(Decimal(value).quantize(_TENTH, ROUND_HALF_UP))


_TENTH = Decimal("0.1")


def listed(texts: list[str]) -> str:
    """Texts as a sentence lists them: `a`, `a and b`, `a, b and c`."""
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def other_chunks(requested, allocated):
    """Per row of (sides, rows) arrays: the same requests on every side, other bytes allocated, and
    requests that could be all of it (a BFC chunk is under twice its request, so the requests are at
    least half of what was allocated, on each side): the allocator's chunks changed, not the
    model's tensors (a [784, 512] weight gradient in 1.5 MiB at one batch, 2.9 MiB at the next).
    Where `diff` says "the same requests" and the what-if's fit holds a layer fixed."""
    requested, allocated = np.asarray(requested), np.asarray(allocated)
    return ((requested[0] > 0) & (requested == requested[0]).all(axis=0) & (allocated != allocated[0]).any(axis=0)
            & (2 * requested >= allocated).all(axis=0))
