"""Runtime node names -> graph name, scope, op type and kind.

TensorFlow's runtime renames nodes (grappler rewrites, layout transposes,
feeds, stream suffixes). These functions map a raw name from the trace back
to the name scope the user wrote, keeping the raw name for display.
See DESIGN.md, "Runtime names are not graph names".
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

# Kinds of node execution.
OP = "op"
LAYOUT_TRANSPOSE = "layout_transpose"
FEED = "feed"
PLUMBING = "plumbing"

LAYOUT_OP_TYPE = "Transpose (layout)"
FEEDS_SCOPE = "(feeds)"
PLUMBING_SCOPE = "(plumbing)"

# Grappler optimizers that prefix (or insert a path component into) names.
_OPTIMIZER_COMPONENTS = frozenset(
    {
        "ConstantFolding",
        "ArithmeticOptimizer",
        "LayoutOptimizer",
        "DependencyOptimizer",
        "LoopOptimizer",
        "MemoryOptimizer",
        "Remapper",
        "AutoMixedPrecision",
        "ScopedAllocator",
        "ShapeOptimizer",
        "PinToHostOptimizer",
        "ImplementationSelector",
        "CommonSubgraphElimination",
    }
)


# `<node>-<port>[-<port>...]-TransposeNHWCToNCHW-LayoutOptimizer` and the
# other layout helpers (DataFormatVecPermute, DimMap, ...) grappler inserts.
_LAYOUT_RE = re.compile(
    r"^(?P<node>.+?)(?:-[^-/]+)*?-(?P<helper>Transpose|DataFormatVecPermute|"
    r"DataFormatDimMap|DimMap|VecPermute|PermConst|Reshape)"
    r"(?P<fmt>N[A-Z]+To[A-Z]+)-LayoutOptimizer$"
)
# Old grappler: `LayoutOptimizerTransposeNCHWToNHWC-<node>-...`.
_OLD_LAYOUT_RE = re.compile(r"^(?P<helper>[A-Za-z]+?)(?P<fmt>N[A-Z]+To[A-Z]+)-LayoutOptimizer$")
# Constant-folding and other grappler suffixes on the last component.
_SUFFIX_RE = re.compile(r"(?:/_\d+__cf__\d+|-(?:folded|bcastargs|matshapes)-\d+)$")
# `[cpu 0.1MB 0.1MB] name = Op(inputs)` (the bracket part is optional).
_LABEL_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?\S+\s=\s([A-Za-z0-9_.>]+)\(")
_ARG_RE = re.compile(r"^_arg_(?P<feed>.+?)_\d+_\d+$")
_OPTIMIZER_STAGE_RE = re.compile(r"^[A-Z][A-Za-z]*_")


class NameInfo(NamedTuple):
    """What a raw runtime name stands for."""

    graph_name: str  # the GraphDef node it belongs to (best effort)
    path: str  # leaf path in the scope tree, grouped by name scope
    kind: str  # OP, LAYOUT_TRANSPOSE, FEED, PLUMBING
    fixed_op_type: str | None  # op type implied by the name itself


def strip_stream_suffix(raw_name: str) -> str:
    """`name:Op` on GPU stream entries -> `name` (':' never occurs in node names)."""
    colon = raw_name.find(":")
    return raw_name if colon < 0 else raw_name[:colon]


def op_type_from_label(timeline_label: str) -> str | None:
    """`name = Op(inputs)` -> `Op`; None when the label has no such form."""
    match = _LABEL_RE.match(timeline_label)
    return match.group(1) if match else None


def scope_of(path: str) -> str:
    """Parent scope of a path (\"\" at the root)."""
    slash = path.rfind("/")
    return "" if slash < 0 else path[:slash]


def _drop_optimizer_components(name: str) -> str:
    parts = name.split("/")
    kept = []
    skip_stage = False
    for part in parts:
        if part in _OPTIMIZER_COMPONENTS:
            skip_stage = True
            continue
        if skip_stage:
            # `ArithmeticOptimizer/AddOpsRewrite_Add` -> `Add`
            part = _OPTIMIZER_STAGE_RE.sub("", part, count=1) or part
            skip_stage = False
        kept.append(part)
    return "/".join(kept) if kept else name


@functools.lru_cache(maxsize=1 << 18)
def classify(raw_name: str) -> NameInfo:
    """Map a raw node name from step stats to its graph node and scope."""
    name = strip_stream_suffix(raw_name)
    if name.startswith("_"):
        arg = _ARG_RE.match(name)
        if arg:
            feed = arg.group("feed")
            return NameInfo(feed, f"{FEEDS_SCOPE}/{feed}", FEED, "_Arg")
        if name.startswith(("_retval", "_SOURCE", "_SINK", "_Send", "_Recv", "_HostSend", "_HostRecv")):
            return NameInfo(name, f"{PLUMBING_SCOPE}/{name}", PLUMBING, None)
    if name.endswith("-LayoutOptimizer"):
        match = _LAYOUT_RE.match(name)
        if match:
            node = _drop_optimizer_components(match.group("node"))
            # A leaf of its own, beside the node it serves, in that node's scope.
            scope = scope_of(node)
            leaf = name.rsplit("/", 1)[-1]
            return NameInfo(node, f"{scope}/{leaf}" if scope else leaf, LAYOUT_TRANSPOSE, LAYOUT_OP_TYPE)
        # Helper constants with no node of their own (`PermConstNHWCToNCHW-LayoutOptimizer`).
        if _OLD_LAYOUT_RE.match(name):
            return NameInfo(name, name, LAYOUT_TRANSPOSE, LAYOUT_OP_TYPE)
    cleaned = _SUFFIX_RE.sub("", name) if ("-" in name or "__cf__" in name) else name
    if not _OPTIMIZER_COMPONENTS.isdisjoint(cleaned.split("/")):  # a path component names a grappler pass
        cleaned = _drop_optimizer_components(cleaned)
    return NameInfo(cleaned, cleaned, OP, None)


# --- grouping by layer -----------------------------------------------------

_GRADIENTS_RE = re.compile(r"^(?:gradients|gradient_tape)(?:_\d+)?$")


@functools.lru_cache(maxsize=1 << 18)
def layer_path(graph_name: str) -> str:
    """The graph name with gradient and optimizer-update prefixes folded away.

    `gradients/shared_model/unet_01/Conv2D_grad/X` -> `shared_model/unet_01/Conv2D_grad/X`;
    `Adam/update_shared_model/unet_01/kernel/ResourceApplyAdam`
      -> `shared_model/unet_01/kernel/ResourceApplyAdam`.
    Names with nothing after the prefix (`gradients/AddN`) stay where they are.
    """
    first, sep, rest = graph_name.partition("/")
    if not sep or "/" not in rest:
        return graph_name
    if first.startswith("gradient") and _GRADIENTS_RE.match(first):
        return rest
    if rest.startswith("update_"):
        return rest[len("update_"):]
    # Keras-style `training/Adam/update_...`.
    _, sep2, rest2 = rest.partition("/")
    if sep2 and rest2.startswith("update_") and "/" in rest2:
        return rest2[len("update_"):]
    return graph_name
