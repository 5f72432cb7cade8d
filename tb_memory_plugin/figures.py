"""The names of the figures and categories, in the column order every table uses.

What each one means: docs/figures.md.
"""

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
