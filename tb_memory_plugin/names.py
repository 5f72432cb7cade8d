"""Runtime names -> graph name, scope path, layer path, op type, kind and category.

TensorFlow's runtime renames nodes (grappler rewrites, layout transposes,
feeds, stream suffixes). These rules map a raw name from the trace back to
the name scope the user wrote, keeping the raw name for display
(docs/figures.md, "Runtime names"). Each rule is written once for one name
(`classify`, `layer_path`, `categorise`: the reference); `NameTable` applies
them to every distinct name of a step at once, with numpy over the joined
names, and calls the one-name rule only for the names that need it.
"""

from __future__ import annotations

import collections
import collections.abc
import functools
import itertools
import operator
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Iterable, Mapping, NamedTuple

import numpy as np

from .figures import ACTIVATIONS, GRADIENTS, INPUTS, OPTIMIZER, OTHER, PARAMETERS
from .trace import labels_of

# Kinds of runtime name.
OP = "op"
LAYOUT_TRANSPOSE = "layout_transpose"
FEED = "feed"
PLUMBING = "plumbing"
KINDS = (OP, LAYOUT_TRANSPOSE, FEED, PLUMBING)
_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}

LAYOUT_OP_TYPE = "Transpose (layout)"
UNKNOWN_OP = "(unknown)"
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

# Prefixes grappler puts before a whole node name, taken off without touching the node's own
# components: the memory optimizer names the copies of nodes it runs again for the backward pass
# `Recomputed/<node>`, and their NoOp triggers `RecomputeTrigger/<node>` (memory_optimizer.cc);
# constant folding names the Identity it puts on a Switch's output for a control dependency
# `ConstantFoldingCtrl/<switch>_<port>` (constant_folding.cc; a tf.cond's asserts, a RaggedTensor's
# checks: it had made a top-level `ConstantFoldingCtrl` scope 27 levels deep).
_NODE_PREFIXES = ("Recomputed/", "RecomputeTrigger/", "ConstantFoldingCtrl/")


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
# An inlined function call's plumbing (identities at its inputs and outputs): TensorFlow names them
# `Func/<call>/input/_291`, outside the call's scope. They go in it: `<call>/input/_291`.
_INLINED_RE = re.compile(r"^Func/(?P<path>.+/(?:input|output|input_control_node|output_control_node)/_\d+)$")
# Control flow v2 (tf.while_loop, tf.cond, dynamic_rnn in a TF 2.x graph), lowered and inlined at
# run time: a loop's body and condition and a branch run as `<op>/<function>/_<N>/<its node>`
# (`rnn/while/body/_1/gru_cell/MatMul`, `cond/else/_12/...`, a `tf.switch_case`'s
# `indexed_case/branch1/_1/...`). Those two components are the runtime's call, not the user's
# scopes: the path drops them (`rnn/while/gru_cell/MatMul`, as TensorFlow 1's control flow named it).
_CALL_FUNCTIONS = r"(?:body|cond|then|else|branch\d+)"  # the function a lowered loop or branch calls
_CALL_RE = re.compile(rf"/{_CALL_FUNCTIONS}/_\d+(?=/|$)")
CALL_FUNCTION_RE = re.compile(rf"^{_CALL_FUNCTIONS}$")  # one such component (a profile's names: sources/xplane)
# The Case op a switch_case's gradient runs, `<op>_grad/gradient/...` (a profile names it `<op>/gradient/...`).
CASE_GRADIENT_OP = "gradient"
# A function called in a graph (a tf.function, `tf.compat.v1.wrap_function`) and inlined at run time: its
# body's ops are named under the call's node, `fwd1/StatefulPartitionedCall/Relu`. The call is the
# runtime's, not a scope of the user's: an op's path drops it (`fwd1/Relu`), as a profile's names drop it
# (sources/xplane/names.py); a call node's own name, its last component, stays, and so does the scope of
# the call's own plumbing (`Func/StatefulPartitionedCall/output_control_node/_12`).
_FUNCTION_CALL_RE = re.compile(r"(?:^|(?<=/))(?:Stateful)?PartitionedCall(?:_\d+)?/(?=.)")
_FUNCTION_CALL_HEADS = ("StatefulPartitionedCall", "PartitionedCall")
_RUNTIME_COMPONENT_RE = re.compile(r"_\d+")  # the runtime's own nodes of a lowered loop or branch: `merge/_5`
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


# `[cpu 0.1MB 0.1MB] name = Op(in_1, in_2:1, ^control)`
_INPUTS_RE = re.compile(r"=\s*[^(]*\((?P<inputs>.*)\)\s*$")


def label_inputs(timeline_label: str) -> list[str]:
    """Node names of a label's data inputs, in order (ports and control inputs dropped)."""
    match = _INPUTS_RE.search(timeline_label or "")
    if not match:
        return []
    names = (part.strip() for part in match.group("inputs").split(","))
    return [name.split(":", 1)[0] for name in names if name and not name.startswith("^")]


def op_type_from_label(timeline_label: str) -> str | None:
    """`name = Op(inputs)` -> `Op`; None when the label has no such form."""
    match = _LABEL_RE.match(timeline_label)
    return match.group(1) if match else None


# oneDNN's rewrites of TensorFlow's own fused ops, which are `_`-prefixed (`_FusedMatMul`); other
# `_Mkl<Op>` and `_MklNative<Op>` kernels stand for the public `<Op>` (`FusedBatchNormV3` too),
# except those of fusions only oneDNN makes (`_MklLayerNorm`, `_MklConv2DWithBias`) and its own
# layout ops (`_MklToTf`): they have no op of TensorFlow's and keep the kernel's name.
_UNDERSCORED = frozenset({"FusedMatMul", "FusedConv2D", "FusedConv3D", "FusedDepthwiseConv2dNative",
                          "FusedBatchNormEx"})
_ONEDNN_RE = re.compile(r"^_Mkl(?:Native)?(?P<op>[A-Z]\w*)$")
_ONEDNN_OWN = re.compile(r"^(?:ToTf|InputConversion|FusedBatchMatMulV2)$|WithBias|PadWith|LayerNorm|Swish|Mish|"
                         r"InstanceNorm")


def graph_op_type(kernel: str | None) -> str | None:
    """The op a label's kernel ran for, as a graph names it: oneDNN's `_MklMatMul` and
    `_MklNativeFusedMatMul` are `MatMul` and `_FusedMatMul` (op types read from labels then
    group with those read from the graph); see _UNDERSCORED for the kernels that keep their
    name. Findings that need the kernel itself read the label."""
    match = _ONEDNN_RE.match(kernel) if kernel and kernel.startswith("_Mkl") else None
    if match is None:
        return kernel
    op = match.group("op")
    if _ONEDNN_OWN.search(op):
        return kernel
    return f"_{op}" if op in _UNDERSCORED else op


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
    while name.startswith(_NODE_PREFIXES) and name.partition("/")[2]:  # its node's: scope, op type
        name = name.partition("/")[2]
    if name.startswith("_"):
        arg = _ARG_RE.match(name)
        if arg:
            feed = arg.group("feed")
            return NameInfo(feed, f"{FEEDS_SCOPE}/{feed}", FEED, "_Arg")
        # (`_send_<tensor>_<port>`: the sends a function's runtime adds for a tensor, a branch's pivot, a
        # folded constant: `_send_ConstantFolding/gradient_tape/.../ShapeN-matshapes-1_0` had been a layer.)
        if name.startswith(("_retval", "_SOURCE", "_SINK", "_Send", "_Recv", "_HostSend", "_HostRecv", "_send_",
                            "_recv_")):
            return NameInfo(name, f"{PLUMBING_SCOPE}/{name}", PLUMBING, None)
    if name.startswith("Func/"):
        inlined = _INLINED_RE.match(name)
        if inlined:
            return NameInfo(name, _without_calls(inlined.group("path")), PLUMBING, None)
    if name.endswith("-LayoutOptimizer"):
        match = _LAYOUT_RE.match(name)
        if match:
            node = _drop_optimizer_components(match.group("node"))
            # A leaf of its own, beside the node it serves, in that node's scope (as its path has it: an
            # inlined function's call dropped).
            scope = scope_of(_without_function_calls(_without_calls(node)))
            leaf = name.rsplit("/", 1)[-1]
            return NameInfo(node, f"{scope}/{leaf}" if scope else leaf, LAYOUT_TRANSPOSE, LAYOUT_OP_TYPE)
        # Helper constants with no node of their own (`PermConstNHWCToNCHW-LayoutOptimizer`).
        if _OLD_LAYOUT_RE.match(name):
            return NameInfo(name, name, LAYOUT_TRANSPOSE, LAYOUT_OP_TYPE)
    cleaned = _SUFFIX_RE.sub("", name) if ("-" in name or "__cf__" in name) else name
    if not _OPTIMIZER_COMPONENTS.isdisjoint(cleaned.split("/")):  # a path component names a grappler pass
        cleaned = _drop_optimizer_components(cleaned)
    return NameInfo(cleaned, _without_function_calls(_without_calls(cleaned)), OP, None)


def _without_calls(path: str) -> str:
    """A path without the runtime's function-call components (`_CALL_RE`)."""
    return _CALL_RE.sub("", path) if "/_" in path else path


def _without_function_calls(path: str) -> str:
    """An op's path without the calls of the functions it was inlined from (`_FUNCTION_CALL_RE`)."""
    return _FUNCTION_CALL_RE.sub("", path) if "PartitionedCall" in path else path


# --- grouping by layer -----------------------------------------------------

_GRADIENTS_RE = re.compile(r"^(?:gradients|gradient_tape)(?:_\d+)?$")


# A gradients scope the user named (`tf.gradients(..., name="my_grads")`): `grads`, `my_grads`,
# `Grads_1`; not a scope that merely holds the word (`gradient_penalty`, `upgrade_net`).
_NAMED_GRADIENTS_RE = re.compile(r"^(?:\w+_)?grads(?:_\d+)?$", re.IGNORECASE)


def _named_gradients(first: str) -> bool:
    """A first component the user named for gradients: its paths fold into their layers where a
    later component is an op's gradient (`my_grads/dense/MatMul_grad/MatMul`)."""
    return bool(_NAMED_GRADIENTS_RE.match(first))


@functools.lru_cache(maxsize=1 << 18)
def layer_path(graph_name: str) -> str:
    """The graph name with gradient and optimizer-update prefixes folded away.

    `gradients/shared_model/unet_01/Conv2D_grad/X` -> `shared_model/unet_01/Conv2D_grad/X` (a
    gradients scope the user named, `my_grads/...`, too, where an op's `_grad` scope follows;
    and one below the first component, `train/gradients/...`, see `_below_gradients`);
    `Adam/update_shared_model/unet_01/kernel/ResourceApplyAdam`
      -> `shared_model/unet_01/kernel/ResourceApplyAdam`; a LossScaleOptimizer's update,
    applied inside a `cond` (`cond/adam/Sub_10`), is the optimizer's (`adam/Sub_10`).
    Names with nothing after the prefix (`gradients/AddN`) stay where they are. Another replica's
    (`replica_1/cnn/conv1/Conv2D`: MirroredStrategy) is its layer's, as replica 0's is.
    """
    first, sep, rest = graph_name.partition("/")
    if sep and first.startswith("cond") and _COND_RE.match(first) and "/" in rest \
            and optimizer_scope(rest.partition("/")[0]):
        return layer_path(rest)
    below_replica = _replica_rest(graph_name)
    if below_replica is not None:
        return layer_path(below_replica)
    folded = _first_component_rules(graph_name)
    if folded is None:
        below = _below_gradients(graph_name)
        folded = graph_name if below is None else _below_folded(below, graph_name)
    # What a rule folded to may be another replica's (`gradient_tape/replica_1/cnn/...`: its gradients).
    return _without_inner_tape(_past_replica(folded) if folded != graph_name else folded)


# A gradient tape's scope below the first component, with something below it: a tape opened inside a loop or a
# function (gradient accumulation: `while/body/_1/gradient_tape/enc2/MatMul/MatMul_1`), whose gradients name the
# body's ops as the body's forward ops are named, so they fold beside them (`while/enc2/MatMul/MatMul_1`).
_INNER_TAPE_RE = re.compile(r"(?<=.)/gradient_tape(?:_\d+)?(?=/.)")


def _has_inner_tape(path: str) -> bool:
    """Whether a path holds a gradient tape's scope below its first component (`_INNER_TAPE_RE`)."""
    return "/gradient_tape" in path and _INNER_TAPE_RE.search(path) is not None


def _without_inner_tape(path: str) -> str:
    """A layer path without a gradient tape's scope below its first component (`_INNER_TAPE_RE`)."""
    return _INNER_TAPE_RE.sub("", path) if "/gradient_tape" in path else path


def _replica_rest(path: str) -> str | None:
    """What follows a leading replica scope (`replica_1/cnn/...` -> `cnn/...`), where there is one and
    something follows it; else None."""
    first, sep, rest = path.partition("/")
    return rest if sep and rest and first.startswith("replica_") and REPLICA_RE.match(first) else None


def _past_replica(path: str) -> str:
    """`layer_path` of what follows a leading replica scope (`replica_1/cnn/...`), else the path."""
    rest = _replica_rest(path)
    return path if rest is None else layer_path(rest)


def _first_component_rules(graph_name: str) -> str | None:
    """`layer_path` by the rules of a first component (a gradients scope, a named one, an
    optimizer's `update_`), where one decides; else None."""
    first, sep, rest = graph_name.partition("/")
    if not sep or "/" not in rest:
        return graph_name
    if first.startswith("gradient") and _GRADIENTS_RE.match(first):
        if rest.startswith("AddN") and _AGGREGATION_RE.match(rest):
            return graph_name  # the gradients' own sum and its helpers: no layer's
        # Nested gradient scopes (`gradient_tape/gradients/model/...`: tf.recompute_grad's
        # gradient, taken inside the tape's) fold away together.
        if rest.startswith("gradient") and _GRADIENTS_RE.match(rest.partition("/")[0]):
            return layer_path(rest)
        # A loop's or a branch's gradient (control flow v2) goes to the op it is the gradient of.
        # (A gradients scope further down stays: in a loop's gradient it is the body's own,
        # `encoder/rnn/while_grad/gradients/...`, whose names start at the body's root.)
        return _without_control_flow_gradients(rest) if "_grad/" in rest else rest
    if _named_gradients(first) and ("_grad/" in rest or rest.endswith("_grad")):
        return rest
    # An optimizer's update of a variable: `Adam/update_<variable>/...`.
    if _updates_variable(rest):
        return rest[len("update_"):]
    # Keras-style `training/Adam/update_...`.
    second, sep2, rest2 = rest.partition("/")
    if sep2 and _updates_variable(rest2) and "/" in rest2:
        return rest2[len("update_"):]
    # tf_keras in graph mode: `training/Adam/Adam/update_<scope>/...` (its optimizer's scope twice).
    third, sep3, rest3 = rest2.partition("/")
    if sep3 and third == second and _updates_variable(rest3) and "/" in rest3 and optimizer_scope(first):
        return rest3[len("update_"):]
    return None


def computes_gradient(graph_name: str) -> bool:
    """Whether a node's name says it computes a gradient: under a gradients scope (first, or second
    below a scope of the user's), or in an op's `_grad` scope, as the gradients category reads it."""
    return _gradient_path(_looked_through(graph_name))


def _gradient_path(path: str) -> bool:
    """`computes_gradient` of a path whose first component is the user's (looked through already); a tape's
    scope below it too (`while/body/_1/gradient_tape/...`: a tape opened in a loop, `_INNER_TAPE_RE`)."""
    return _GRADIENT_RE.search(path) is not None or _GRADIENTS_SECOND_RE.match(path) is not None or _has_inner_tape(path)


def _looked_through(path: str) -> str:
    """A path without a first component that is not the user's scope (`replica_1/`, `cond/`)."""
    first, sep, rest = path.partition("/")
    return rest if sep and rest and _LOOKED_THROUGH_RE.match(first) else path


_INITIALIZER = "/Initializer/"


def _initializer_category(path: str) -> int | None:
    """A tf.compat.v1 variable's initializer, run in the step (`<variable>/Initializer/...`): its
    value becomes the variable's buffer, so its ops' bytes are the variable's, an optimizer slot's
    (`<var>/Adam/Initializer/zeros`) optimizer state; None for any other path."""
    variable, found, _ = path.partition(_INITIALIZER)
    if not found or not variable:
        return None
    return OPTIMIZER if _SLOT_RE.match(variable.rsplit("/", 1)[-1]) else PARAMETERS


def _updated_below_scope(path: str) -> bool:
    """An optimizer's update of a variable under a scope of the user's (`train/Adam/update_<var>/...`:
    tf.compat.v1's `minimize` inside a variable or name scope): the optimizer's, as the same update
    at the root (`Adam/update_<var>/...`) is, and its layer path is the variable's (`layer_path`)."""
    parts = path.split("/", 3)
    return len(parts) == 4 and optimizer_scope(parts[1]) and _updates_variable(parts[2])


def _updates_variable(path: str) -> bool:
    """A path that starts with an optimizer's update of a variable, `update_<variable>` (Keras 3
    numbers its updates instead, `update_0_2`: no variable's name, and they stay)."""
    return path.startswith("update_") and not path[len("update_"):len("update_") + 1].isdigit()


def _below_folded(below: str, path: str) -> str:
    """The layer path of `path`, whose gradients scope below its first component holds `below`:
    as the same gradients scope first would fold (nested scopes, a loop's gradient), or the
    path itself where that one stays (`AddN`)."""
    folded = layer_path(f"gradients/{below}")
    return path if folded.startswith("gradients/") else folded


# TensorFlow sums an op's gradients from several consumers in `gradients/AddN_<N>`, and sparse ones
# (IndexedSlices) with helpers below it (`gradients/AddN_9/strided_slice`): the gradients' own ops.
_AGGREGATION_RE = re.compile(r"^AddN(?:_\d+)?(?:/|$)")

# A gradients scope below the first component: tf.gradients or `minimize` under a name scope
# (`train/gradients/model/...`, Keras' `training/Adam/gradients/...`).
_GRADIENTS_BELOW_RE = re.compile(r"/gradients(?:_\d+)?/")


def _below_gradients(path: str) -> str | None:
    """The path below the first gradients scope that is not its first component, where it holds
    an op's gradient (a `*_grad` component) below a scope: the ops' own graph names, as below a
    first one (`train/gradients/model/dense/MatMul_grad/MatMul` -> `model/dense/MatMul_grad/
    MatMul`); None where there is none."""
    match = _GRADIENTS_BELOW_RE.search(path)
    if match is None:
        return None
    below = path[match.end():]
    if "/" in below and ("_grad/" in below or below.endswith("_grad")):
        return below
    return None


_BRANCH_GRADIENT_OPS = ("StatelessIf", "If", CASE_GRADIENT_OP)  # the op a branch's gradient runs, `<op>_grad/<it>/...`


def _without_control_flow_gradients(path: str) -> str:
    """A gradient path (its gradients scope cut off) with control flow v2's gradient ops folded
    into the ops they are the gradients of, nested ones too:

    - a loop's: `<op>_grad/<op>_grad/...` (`rnn/while_grad/rnn/while_grad/gradients/gru_cell/
      MatMul_grad/MatMul_1` -> `rnn/while/gru_cell/MatMul_grad/MatMul_1`; inside another
      loop's body, `inner_grad/inner_grad/...`);
    - a branch's: `<op>_grad/StatelessIf/...` (or `If`), a `tf.switch_case`'s `<op>_grad/gradient/...`
      (the gradient's own `Case` op, named so).

    Only where the body's own `gradients/` scope follows, or the runtime's plumbing of the
    lowered op (a `_<N>` component: `merge/_5`): a second-order gradient
    (`MatMul_grad/MatMul_grad/MatMul`, the gradient of an op in a first gradient's scope) is
    no control flow and stays as it is.
    """
    parts = path.split("/")
    i = 0
    while i < len(parts) - 1:
        part = parts[i]
        if part.endswith("_grad") and len(part) > len("_grad"):
            after = parts[i + 1]
            if after in _BRANCH_GRADIENT_OPS or after == part:
                dropped = 1
            elif parts[i + 1:2 * i + 2] == parts[:i + 1]:  # the whole path repeated: a top-level loop
                dropped = i + 1
            else:
                dropped = 0
            rest = parts[i + 1 + dropped:]
            if dropped and rest and (rest[0] == "gradients" or any(map(_RUNTIME_COMPONENT_RE.fullmatch, rest))):
                parts = parts[:i] + [part[:-len("_grad")]] + (rest[1:] if rest[0] == "gradients" else rest)
                continue  # a loop or branch inside this one's body folds too
        i += 1
    return "/".join(parts)


def layer_of(layer_path: str) -> str:
    """The layer a node belongs to (what-if layers, findings): its layer path's (`layer_path`)
    scope, cut before a `*_grad` component.

    `shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput` -> `shared_model/unet_01`;
    an op with no scope (`Mean`) is its own layer, and so is the gradient scope of one
    (`Mean_grad/Tile` -> `Mean_grad`), as the grouping by layer shows them. By string searches
    (every distinct name of a deep step asks): the first component ending in `_grad` is the
    first `_grad/`, else a last one; the layer is what precedes that component, or that
    component where it is the first.
    """
    grad = layer_path.find("_grad/")
    if grad < 0:
        if not layer_path.endswith("_grad"):
            return layer_path.rpartition("/")[0] or layer_path
        grad = len(layer_path) - len("_grad")
    slash = layer_path.rfind("/", 0, grad)
    if slash > 0:
        return layer_path[:slash]
    end = layer_path.find("/", grad)
    return layer_path[:end] if slash < 0 and end > 0 else layer_path


# The name scopes TensorFlow's own Python functions open for what is one op to the user (their default
# names, as `tf.name_scope(name, "einsum")` opens them): a layer named so, below another, is that one's, as
# one named as an op type is (`NameTable._named_as_op_type`; trial AG's transformer had listed
# `encoder/layer_0/ffn/Gelu` and `head/einsum` as layers). None is a Keras layer's default name
# (`einsum_dense`, `batch_normalization`, `activation`), which stay layers, nor a name a user would give
# a layer of their own (`batchnorm`, `l2_normalize` are left out: a layer so named would fold into its model;
# `moments` stays, a layer norm's in every TF1 transformer).
OP_SCOPES = frozenset({
    "einsum",  # tf.einsum
    "Tensordot",  # tf.tensordot (TF1 also names its output op so)
    "Gelu",  # tf.nn.gelu
    "moments",  # tf.nn.moments
    "logistic_loss",  # tf.nn.sigmoid_cross_entropy_with_logits
    "clip_by_value",  # tf.clip_by_value
})


# --- categories --------------------------------------------------------------

# Ops whose bytes are a variable's own buffer: the variable, its handle, a read that returns
# its tensor, an assignment into it (an add or subtract into a resource variable whose buffer
# another tensor shares gives it a new one: a gradient accumulator's, kept after the op). Not
# `ResourceGather` (an embedding lookup): its output is a new tensor of the gathered rows,
# sized by the batch, and takes the rules below like any op.
_VARIABLE_OPS = frozenset(
    {"VariableV2", "Variable", "VarHandleOp", "ReadVariableOp", "_ReadVariablesOp",
     "Assign", "AssignVariableOp", "AssignAdd", "AssignSub", "AssignAddVariableOp", "AssignSubVariableOp"}
)
COPY_TO_DEVICE_OP_TYPE = "host-to-device copy"  # JAX's copies of arguments (sources/xplane)
XLA_PROGRAM_OP_TYPE = "XLA program"  # a jitted function's run, holding its buffers (sources/xplane)
TF_XLA_PROGRAM = "(XLA program)"  # the node of a TensorFlow XLA program's buffers that name no op
# Below an XLA program's node (`jit_train_step/(unused scratch)`): the bytes of its scratch block
# that no value holds at the block's own peak (sources/xplane/hlo.py).
UNUSED_SCRATCH = "(unused scratch)"
# A profile's allocations with no op named and none running on their thread (sources/xplane).
UNATTRIBUTED = "(no op)"
# A JAX program's new values of its own arguments (`(updated arguments)/p['dense']['kernel']`: updated
# parameters and optimizer state), in blocks of their own where the caller did not donate them.
UPDATED_ARGUMENTS = "(updated arguments)"


def tensorflow_xla_program(name: str) -> bool:
    """Whether an `XLA program` node is TensorFlow's (jit_compile: `(XLA program)`, or the jitted
    tf.function's own op, `__inference_train_step_2866`), not JAX's (`jit_train_step`)."""
    return name == TF_XLA_PROGRAM or name.startswith("__inference_")


# A TF1 graph's XLA clusters (auto-clustering, jit_scope): ops that run a compiled cluster. What
# XLA allocates inside one is not in the step stats: the records hold none of it.
XLA_CLUSTER_OP_TYPES = frozenset({"_XlaRun", "XlaLaunch", "XlaLaunchV2"})
XLA_OFF_ADVICE = ("trace the step with XLA off (no jit_scope, no TF_XLA_FLAGS=--tf_xla_auto_jit, no "
                  "global_jit_level) to see that memory")
_FUNCTION_ARGUMENT = "_Arg"  # a feed's op too, but a feed's name is its own kind (FEED)
_INPUT_OPS = frozenset(
    {"_Arg", "Placeholder", "PlaceholderWithDefault", "IteratorGetNext", "IteratorGetNextSync", "IteratorV2",
     "OneShotIterator", "MultiDeviceIteratorGetNextFromShard", "_Recv", COPY_TO_DEVICE_OP_TYPE,
     # A TF1 queue's batch (QueueRunner pipelines)
     "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueDequeue", "QueueDequeueMany"}
)
BEFORE_STEP_OP_TYPE = "(allocated earlier)"  # a profile's frees of bytes from before the step (sources/xplane)
# `VarIsInitializedOp` answers a new bool about a variable, as `Shape` does about a tensor.
# A check of the gradients, whose bool masks are shaped like them (a LossScaleOptimizer's
# `tf.math.is_finite` of every gradient, at the root: `IsFinite_4`): the gradients' own work.
_GRADIENT_CHECK_OPS = frozenset({"IsFinite"})
_OTHER_OPS = frozenset(
    {"Const", "HostConst", "Shape", "ShapeN", "Size", "Rank", "NoOp", "_Retval",
     "BroadcastGradientArgs", "VarIsInitializedOp", "_SOURCE", "_SINK", BEFORE_STEP_OP_TYPE}
)
_APPLY_PREFIXES = ("Apply", "ResourceApply", "ResourceSparseApply", "SparseApply")


def ran_xla_clusters(table: "NameTable") -> bool:
    """Whether a space's names ran an XLA cluster (see XLA_CLUSTER_OP_TYPES)."""
    return any(op_type in XLA_CLUSTER_OP_TYPES for op_type in table.op_type_names)


# Ops that write a resource variable, giving it a new buffer where its old one is shared.
VARIABLE_WRITERS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceApply",
                    "ResourceSparseApply", "ResourceScatter")


def is_apply_op(op_type: str) -> bool:
    """An optimizer's update op (`ApplyAdam`, `ResourceApplyAdagrad`, `ResourceSparseApplyFtrl`, ...)."""
    return op_type.startswith(_APPLY_PREFIXES)


_OPTIMIZER_NAMES = frozenset(
    {"Adam", "AdamW", "SGD", "Momentum", "RMSProp", "Adagrad", "Adadelta", "Adamax",
     "Nadam", "Ftrl", "GradientDescent", "LAMB", "Lamb", "training", "optimizer",
     "RMSprop", "Lion", "Adafactor",  # Keras 2's class names (`while/RMSprop/mul_8`)
     "beta1_power", "beta2_power", UPDATED_ARGUMENTS,
     # Keras 3 scopes an optimizer's update ops under its class name in snake case (`AdamW` ->
     # `adam_w`, `RMSprop` -> `rm_sprop`).
     "adam", "adamw", "adam_w", "sgd", "rmsprop", "rm_sprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl",
     "lion", "lamb", "adafactor", "muon", "loss_scale_optimizer",
     # tf.compat.v1's ExponentialMovingAverage of the weights: its updates of the shadows it keeps
     # (counted as slots of the variables, resident.py) after the optimizer's step.
     "ExponentialMovingAverage"}
)
_NUMBERED = re.compile(r"_\d+$")
# Words that make a snake-case scope an optimizer's: Keras 3 scopes an optimizer's ops under the
# name it is given (two optimizers of a GAN: `g_adam`, `disc_optimizer`). Not `momentum` (MoCo's
# `momentum_encoder` is a model) nor the shorter class names a layer might be named with.
_OPTIMIZER_WORDS = frozenset({"adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl",
                              "adafactor", "optimizer"})


def optimizer_scope(first: str) -> bool:
    """Whether a first path component is an optimizer's scope: its name, or its name numbered as
    TensorFlow and Keras number a second one (`Adam_1`, `adam_1` for a model built again), or a
    snake-case name that ends in an optimizer's word (`g_adam`: an optimizer named by the user)."""
    base = _NUMBERED.sub("", first)
    if first in _OPTIMIZER_NAMES or base in _OPTIMIZER_NAMES:
        return True
    # The word last, as an optimizer is named for what it trains (`g_adam`), not a model for how it
    # was trained (`adam_lstm`, `sgd_baseline`).
    return base.islower() and "_" in base and base.rpartition("_")[2] in _OPTIMIZER_WORDS


# Slots of tf.compat.v1 optimizers (`<var>/Adam`), and a moving average's shadow of a variable
# (`<var>/ExponentialMovingAverage`): training state beside the variable, not a parameter.
_SLOT_NAMES = ("Adam", "Momentum", "RMSProp", "Adagrad", "Adadelta", "Ftrl", "Adamax", "Nadam",
               "ExponentialMovingAverage")
_SLOT_RE = re.compile(rf"^(?:{'|'.join(_SLOT_NAMES)})(?:_\d+)?$")
# A distribution strategy's other replica's scope (MirroredStrategy: `replica_1/...`).
_REPLICA = r"replica_[1-9]\d*"  # replica 0's names have no such scope
REPLICA_RE = re.compile(rf"^{_REPLICA}$")
# A control-flow branch's scope at the root (a LossScaleOptimizer applies its update in one).
_COND = r"cond(?:_\d+)?"
_COND_RE = re.compile(rf"^{_COND}$")
# A first component that is not the user's scope, whose next one is read as the first: another
# replica's, or a control-flow scope (a LossScaleOptimizer applies its update inside a `cond`:
# `cond/adam/Sub_10`; Keras 2's steps_per_execution loop, `while/RMSprop/mul_8`).
_LOOKED_THROUGH_RE = re.compile(rf"^(?:{_REPLICA}|{_COND}|while(?:_\d+)?)$")
# First components whose ops hold gradients (categories only, not the layer grouping): the
# gradient scopes, and `tf.clip_by_global_norm`'s, whose outputs are the clipped gradients.
_GRADIENT_FIRST = r"(?:gradients|gradient_tape|clip_by_global_norm)(?:_\d+)?"
_GRADIENT_FIRST_RE = re.compile(rf"^{_GRADIENT_FIRST}$")
_GRADIENT_RE = re.compile(rf"^{_GRADIENT_FIRST}(?:/|$)|_grad(?:/|$)")  # such a first component, or an op's `_grad`
# A gradients scope as the second component (`train/gradients/AddN_3`: `minimize` under a scope of the
# user's): its ops compute gradients, as below a first one, the gradients' sums with no `_grad` included.
_GRADIENTS_SECOND_RE = re.compile(r"^[^/]+/gradients(?:_\d+)?/")


# A distribution strategy's all-reduce, applied by the optimizer (Keras 3 under MirroredStrategy): every
# gradient packed into one tensor (`adam/concat`, as long as the model's parameters), the reduced one
# split back (`adam/split`), the collective ops themselves, at the optimizer scope's root; and the
# collective's own scratch (`CollectiveAdapterImpl::TempChunk`). Gradients, not optimizer state (trial
# AH: 29 of a step's 32.7 MiB read as the optimizer's, as if another optimizer would save them).
_GRADIENT_PACKING_OPS = frozenset({"ConcatV2", "Concat", "SplitV", "Split", "CollectiveReduceV2", "CollectiveReduceV3",
                                   "CollectiveReduce", "NcclAllReduce"})
_COLLECTIVE_SCRATCH = "CollectiveAdapterImpl"


def _packed_gradients(own: str, op_type: str) -> bool:
    """Whether an op at the optimizer scope's root (`adam/concat_1`) packs or all-reduces gradients."""
    return op_type in _GRADIENT_PACKING_OPS and own.count("/") == 1


@functools.lru_cache(maxsize=1 << 16)
def categorise(path: str, op_type: str, kind: str) -> int:
    """Heuristic category of a runtime name from its path, op type and kind.

    Documented in docs/figures.md ("Categories"). Executions with persistent
    memory become parameters, and bytes freed inside a running op become
    temporaries (see `SpaceAnalysis`): both need per-execution figures.
    """
    if kind == FEED or op_type in _INPUT_OPS:
        return INPUTS
    if kind == PLUMBING:
        return OTHER
    if is_apply_op(op_type):
        return OPTIMIZER
    # A distribution strategy's other replica names its ops as replica 0's, under `replica_<N>/`
    # (and a control-flow scope comes before the user's): the path from the user's first component.
    own = _looked_through(path)
    if optimizer_scope(own.partition("/")[0]):
        # Gradients taken under the optimizer's scope (tf_keras' `training/Adam/gradients/...`,
        # `minimize` under `optimizer/`) are gradients, as their layer path says; so are the gradients
        # packed for a distribution strategy's all-reduce (`_packed_gradients`).
        if _packed_gradients(own, op_type):
            return GRADIENTS
        return GRADIENTS if "/gradients" in path and _below_gradients(path) is not None else OPTIMIZER
    if own.startswith(_COLLECTIVE_SCRATCH):
        return GRADIENTS
    if _updated_below_scope(own):
        return OPTIMIZER
    initialized = _initializer_category(own)
    if initialized is not None:
        return initialized
    if "/" in path and op_type in _VARIABLE_OPS and _SLOT_RE.match(path.rsplit("/", 1)[-1]):
        return OPTIMIZER
    if _gradient_path(own) or op_type in _GRADIENT_CHECK_OPS:
        return GRADIENTS
    if op_type in _VARIABLE_OPS:
        return PARAMETERS
    if op_type in _OTHER_OPS:
        return OTHER
    return ACTIVATIONS


# --- every distinct name of a step at once -------------------------------------


class _Lines:
    """Names joined into one ASCII buffer, so a question is asked of all of them in numpy.

    `ok` is False when the names are not plain ASCII without newlines; callers
    then apply the one-name rules instead.
    """

    def __init__(self, texts: list[str]) -> None:
        self.count = len(texts)
        joined = getattr(texts, "joined", None)  # trace.JoinedNames: joined by the source
        if joined is not None and self.count:
            self.ok = joined.isascii()
            if self.ok:
                self._hold(joined, newlines=texts.newlines)
            return
        text = "\n".join(texts)
        self.ok = text.isascii() and text.count("\n") == max(self.count - 1, 0)
        if self.ok:
            self._hold(text.encode("ascii"), np.fromiter(map(len, texts), dtype=np.int64, count=self.count))

    def _hold(self, data: bytes, lengths: np.ndarray | None = None, newlines: np.ndarray | None = None) -> None:
        """Take the names joined by newlines (ASCII), with their lengths, or where the newlines
        are, where known."""
        self.data = data
        self.buf = np.frombuffer(data, dtype=np.uint8)
        if lengths is None:
            if newlines is None:
                newlines = np.flatnonzero(self.buf == ord("\n"))
            ends = np.append(newlines, self.buf.size)
            lengths = ends - np.concatenate(([0], ends[:-1] + 1))
        self.lengths = lengths
        self.starts = np.zeros(self.count, dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=self.starts[1:])

    def with_lines(self, texts: list[str], rows: list[int]) -> "_Lines":
        """The lines of `texts`, which are these lines' but for the rows listed (a few names
        that classify changed): spliced in rather than joined and encoded anew."""
        if not rows:
            return self
        changed = [texts[i] for i in rows]
        if not self.ok or len(rows) * 8 > self.count or not all(
                text.isascii() and "\n" not in text for text in changed):
            return _Lines(texts)
        pieces, at = [], 0
        for i, text in zip(rows, changed):
            pieces += [self.data[at:int(self.starts[i])], text.encode("ascii")]
            at = int(self.starts[i] + self.lengths[i])
        pieces.append(self.data[at:])
        lengths = self.lengths.copy()
        lengths[rows] = [len(text) for text in changed]
        lines = _Lines.__new__(_Lines)
        lines.count, lines.ok = self.count, True
        lines._hold(b"".join(pieces), lengths)
        return lines

    def line_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, positions, side="right") - 1

    def _mask(self, positions: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.count, dtype=bool)
        mask[self.line_of(positions)] = True
        return mask

    def containing(self, literal: bytes) -> np.ndarray:
        """Which names contain `literal` (no newline in it)."""
        mask = np.zeros(self.count, dtype=bool)
        mask[self.lines_holding(literal)] = True
        return mask

    def lines_holding(self, literal: bytes) -> np.ndarray:
        """The line of each place `literal` stands (`positions`), each literal's once asked."""
        lines_before = self.__dict__.setdefault("_lines_holding", {})
        if literal not in lines_before:
            lines_before[literal] = self.line_of(self.positions(literal))
        return lines_before[literal]

    def positions(self, literal: bytes) -> np.ndarray:
        """Where `literal` (no newline in it) starts in the joined names, each place once asked
        (the categories and the layer cut both ask for `_grad/`)."""
        found_before = self.__dict__.setdefault("_positions", {})
        if literal in found_before:
            return found_before[literal]
        k = len(literal)
        # No memmem first: the literals asked for start with "_" or "/", common in names, which
        # makes memmem slower (1.7 ms over a deep step's 3 MB) than the pass below (0.8 ms) even
        # when absent.
        buf = self.buf[: max(self.buf.size - k + 1, 0)]  # where the literal can start
        if k == 1:
            found = np.flatnonzero(buf == literal[0])
        else:  # where its first two bytes stand (few places, even where one byte is common), then the rest
            found = np.flatnonzero((buf == literal[0]) & (self.buf[1:buf.size + 1] == literal[1]))
            for offset in range(2, k):
                found = found[self.buf[found + offset] == literal[offset]]
        found_before[literal] = found
        return found

    def with_any_char(self, chars: bytes) -> np.ndarray:
        chars = bytes(char for char in chars if char in self.data)  # one memchr each
        if not chars:
            return np.zeros(self.count, dtype=bool)
        hits = self.buf == chars[0]
        for char in chars[1:]:
            hits |= self.buf == char
        return self._mask(np.flatnonzero(hits))

    def starting_with(self, prefix: bytes, among: np.ndarray | None = None,
                      offset: np.ndarray | None = None) -> np.ndarray:
        """Which names start with `prefix` (only `among` those, if given), or hold it at
        `offset` (per name)."""
        k = len(prefix)
        at = self.starts if offset is None else self.starts + offset
        room = self.lengths if offset is None else self.lengths - offset
        long_enough = room >= k if among is None else among & (room >= k)
        return self._holding(prefix, at, long_enough)

    def ending_with(self, suffix: bytes) -> np.ndarray:
        return self._holding(suffix, self.starts + self.lengths - len(suffix), self.lengths >= len(suffix))

    def _holding(self, text: bytes, at: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Which names hold `text` at `at` (per name), among the candidates (with room for it)."""
        k = len(text)
        rows = np.flatnonzero(candidates)
        if k <= 8:  # one 8-byte word per name
            word = int.from_bytes(text, "little")
            hits = self._word(at[rows], k) == np.uint64(word)
        else:
            hits = (self.buf[at[rows, None] + np.arange(k)] == np.frombuffer(text, dtype=np.uint8)).all(axis=1)
        mask = np.zeros(self.count, dtype=bool)
        mask[rows[hits]] = True
        return mask

    @cached_property
    def _slashes(self) -> np.ndarray:
        """Where every "/" of the joined names is, with the buffer's end after the last."""
        return np.append(np.flatnonzero(self.buf == ord("/")), self.buf.size)

    @cached_property
    def gradients_below(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every `/gradients/` or `/gradients_<...>` in the joined names: (where its "/" is, its
        line, whether the word ends there: `gradients_<N>` does not, and is the one-name rule's to
        read). Found from the slashes (a `g` after one, then the word), not by a scan of the
        names' bytes: absent, as on most steps, it costs a tenth of one."""
        buf = self.buf
        found = self._slashes[:-1][self._after_slash == ord("g")]
        found = found[found + len(b"/gradients") < buf.size]
        found = found[(self._word(found + 1, 8) == _GRADIENT_WORD) & (buf[found + len(b"/gradient")] == ord("s"))]
        after = buf[found + len(b"/gradients")]  # the byte after the word
        ends = after == ord("/")
        keep = ends | (after == ord("_"))
        return found[keep], self.line_of(found[keep]), ends[keep]

    @cached_property
    def _after_slash(self) -> np.ndarray:
        """The byte after each "/" (the first byte of every component but a name's first)."""
        return self.buf[np.minimum(self._slashes[:-1] + 1, self.buf.size - 1)]

    def lines_with_component(self, prefix: bytes) -> np.ndarray:
        """The lines with a component after their first that starts with `prefix` (at most 8
        bytes), a line once for each: found from the slashes, not by a scan of the bytes."""
        slashes = self._slashes[:-1]
        found = slashes[self._after_slash == prefix[0]]
        found = found[found + len(prefix) < self.buf.size]
        found = found[self._word(found + 1, len(prefix)) == np.uint64(int.from_bytes(prefix, "little"))]
        return np.unique(self.line_of(found))

    def slash_from(self, offset: np.ndarray | int = 0) -> np.ndarray:
        """Per name: where its first "/" at or after `offset` is, counted from the name's
        start; -1 where it has none."""
        return self.slash_at(np.searchsorted(self._slashes, self.starts + offset))

    def slash_at(self, index: np.ndarray) -> np.ndarray:
        """Per name: where the `index`-th "/" of the joined names is, counted from the name's
        start; -1 where that one is not in the name (the next name's, or none)."""
        slashes = self._slashes
        at = slashes[np.minimum(index, slashes.size - 1)]
        return np.where(at < self.starts + self.lengths, at - self.starts, -1)

    def with_component_head(self, heads: np.ndarray, k: int) -> np.ndarray:
        """Which names may have a path component whose first k bytes (as an integer) are
        one of `heads`, all of which start with a capital letter: the k bytes
        after each capital that follows a "/", a line start or another byte below "0" are
        compared (a superset: callers check names exactly)."""
        buf = self.buf
        follows = (buf[1:] - np.uint8(ord("A")) < 26) & (buf[:-1] < ord("0"))
        begins = np.flatnonzero(follows) + 1
        if buf.size and ord("A") <= buf[0] <= ord("Z"):
            begins = np.concatenate([[0], begins])
        return self._mask(begins[np.isin(self._word(begins, k), heads)])

    def last_component_head(self, rows: np.ndarray, heads: np.ndarray, k: int) -> np.ndarray:
        """Of the names `rows` (each holding a "/"), which have a last path component whose
        first k bytes are one of `heads`."""
        ends = self.starts[rows] + self.lengths[rows]
        last = self._slashes[np.searchsorted(self._slashes, ends) - 1] + 1
        return np.isin(self._word(last, k), heads)

    def code_slices(self, begin: np.ndarray, length: np.ndarray) -> tuple[list[str], np.ndarray]:
        """`_coded_in_order` of the texts buf[begin:begin + length] (one per name), in numpy:
        texts are grouped by a hash of their words (`slice_words`), each is checked against its
        group's first, and only the distinct ones are decoded. (Should two texts share a hash,
        which the check finds, all are coded as Python strings.)"""
        n = begin.size
        if not n:
            return [], np.zeros(0, dtype=np.int64)
        words = self.slice_words(begin, length)
        first, group = _factorized(_digests(words, length))
        same = first[group]  # the first text with the same hash
        if not (np.array_equal(length[same], length) and _same_words(words, same)):
            return _coded_in_order(self._texts(begin, length))
        return self._texts(begin[first], length[first]), group

    def slice_words(self, begin: np.ndarray, length: np.ndarray) -> list[tuple[np.ndarray | None, np.ndarray]]:
        """(rows, 8-byte words) that together hold every byte of each slice buf[begin:begin +
        length]: its first 8 and its last 8 bytes (all of a slice up to 16 bytes long, as most
        path components are; rows None: every slice), then for longer slices the 8 from each
        8th byte on (rows: those slices)."""
        first = np.minimum(length, 8)
        words = [(None, self._word(begin, first)), (None, self._word(begin + length - first, first))]
        offset, rows = 8, np.flatnonzero(length > 16)
        while rows.size:
            words.append((rows, self._word(begin[rows] + offset, 8)))
            offset += 8
            rows = rows[length[rows] - 8 > offset]
        return words

    @cached_property
    def _windows(self) -> np.ndarray:
        """At each position p <= size - 8 of the buffer, its 8 bytes from p as one little-endian
        integer: a strided view, no copy."""
        if self.buf.size < 8:
            padded = np.zeros(8, dtype=np.uint8)
            padded[:self.buf.size] = self.buf
            return padded.view("<u8")
        windows = np.lib.stride_tricks.as_strided(self.buf, shape=(self.buf.size - 7, 8), strides=(1, 1))
        return windows.view("<u8").reshape(-1)

    def _word(self, begin: np.ndarray, length: np.ndarray | int) -> np.ndarray:
        """The `length` (at most 8; per slice, or one for all) bytes from each begin as one
        integer, zero-filled."""
        windows = self._windows
        last = windows.size - 1
        if begin.size and int(begin.max()) > last:  # near the end: the last window, shifted down
            at = np.minimum(begin, last)
            words = windows[at] >> ((begin - at) * 8).astype(np.uint64)
        else:
            words = windows[begin]
        if isinstance(length, int) and length == 8:
            return words
        words &= _LOW_BYTES[length]
        return words

    def _texts(self, begin: np.ndarray, length: np.ndarray) -> list[str]:
        data = self.data
        return [data[b:b + k].decode("ascii") for b, k in zip(begin.tolist(), length.tolist())]

    def any_starting_with(self, prefix: str, offset: np.ndarray | None = None) -> bool | None:
        """Whether some name starts with `prefix` (no newline in it), or with `offset`, holds it
        at offset[i]: each place the prefix occurs is checked, at most `_MAX_LOOKS` of them
        (None: undecided after those)."""
        if not prefix.isascii():
            return False
        needle = prefix.encode("ascii")
        if offset is None:
            return self.data.startswith(needle) or (b"\n" + needle) in self.data
        at = self.data.find(needle)
        for _ in range(_MAX_LOOKS):
            if at < 0:
                return False
            line = int(np.searchsorted(self.starts, at, side="right")) - 1
            if at == self.starts[line] + offset[line] and len(needle) <= self.lengths[line] - offset[line]:
                return True
            at = self.data.find(needle, at + 1)
        return None


_MAX_LOOKS = 64  # places a prefix occurs that any_starting_with checks one by one


def _factorized(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first index of each distinct key, in first-seen order; each key's index into those).

    Paths have few distinct first components, most of them under one or two: the
    keys common in a sample are peeled off, one pass over the rest each, and only
    what is left is sorted.
    """
    sample = keys[::max(1, keys.size // _PEEL_SAMPLE)]
    values, counts = np.unique(sample, return_counts=True)
    common = values[counts * _PEEL_SHARE >= sample.size]
    if not common.size:  # no key that common (ops at the root, each its own component): one sort
        _, first, code = np.unique(keys, return_index=True, return_inverse=True)
        code = code.reshape(-1)
    else:
        code = np.empty(keys.size, dtype=np.int64)
        firsts: list[int] = []
        rest, rest_keys = np.arange(keys.size), keys
        for key in common:
            hit = rest_keys == key
            code[rest[hit]] = len(firsts)
            firsts.append(int(rest[np.argmax(hit)]))
            rest, rest_keys = rest[~hit], rest_keys[~hit]
        first = np.array(firsts, dtype=np.int64)
        if rest.size:
            _, at, group = np.unique(rest_keys, return_index=True, return_inverse=True)
            code[rest] = first.size + group.reshape(-1)
            first = np.concatenate([first, rest[at]])
    order = np.argsort(first, kind="stable")  # groups in first-seen order
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return first[order], rank[code]


_PEEL_SAMPLE, _PEEL_SHARE = 64, 4  # keys holding a quarter of a sample of 64 are peeled off (4 at most)


def _digests(words: list, length: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each slice from its length and its words (`_Lines.slice_words`)."""
    digest = length.astype(np.uint64) * np.uint64(_HASH_SEED)
    for rows, word in words:
        mixed = (digest if rows is None else digest[rows]) * np.uint64(_HASH_FACTOR) + word
        mixed ^= mixed >> np.uint64(29)
        if rows is None:
            digest = mixed
        else:
            digest[rows] = mixed
    return digest


def _same_words(words: list, same: np.ndarray) -> bool:
    """Whether every slice's words equal those of slice same[i] (of the same length)."""
    for rows, word in words:
        if rows is None:
            if not np.array_equal(word[same], word):
                return False
        elif not np.array_equal(word[np.searchsorted(rows, same[rows])], word):
            return False
    return True


_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)  # a word's first k bytes
_HASH_SEED, _HASH_FACTOR = 0x9E3779B97F4A7C15, 0x100000001B3  # code_slices's hash (FNV's prime)


def _heads(texts, k: int) -> np.ndarray:
    """The first k bytes of each text as one little-endian integer (what `_Lines._word` reads)."""
    return np.array([int.from_bytes(text.encode()[:k], "little") for text in texts], dtype=np.uint64)


# Path components that may make `classify` change a name (a grappler pass's, a prefix of grappler's to a node, a
# function's call), by their first 8 bytes (a superset is fine: classify checks exactly). Each is that long.
_CLASSIFIED_COMPONENTS = [*_OPTIMIZER_COMPONENTS, *_NODE_PREFIXES, *_FUNCTION_CALL_HEADS]
_CLASSIFIED_HEADS = _heads(_CLASSIFIED_COMPONENTS, 8)
assert all(len(name) >= 8 and name[0].isupper() for name in _CLASSIFIED_COMPONENTS)
# Optimizer slot names, by their first 4 bytes (every one is that long).
_SLOT_HEADS = _heads(_SLOT_NAMES, 4)
assert all(len(name) >= 4 for name in _SLOT_NAMES)


@dataclass
class NameTable:
    """What each distinct runtime name of a memory space stands for: one row per name."""

    raw: list[str]  # as the trace has them
    graph_names: list[str]  # the GraphDef node each belongs to (best effort)
    paths: list[str]  # leaf path in the scope tree, grouped by name scope
    kind_code: np.ndarray  # into KINDS
    _op_types: list[str] | None  # per name (None: built from the codes when first asked)
    op_type_names: list[str]  # each op type once, sorted
    op_code: np.ndarray  # per name: index into op_type_names
    category: np.ndarray  # into figures.CATEGORIES
    path_parts: "FirstComponents"  # first components of `paths`
    source_layers: Mapping[str, str] = field(default_factory=dict)  # raw name -> layer, where the source knows
    # The feeds (`_arg_<node>_0_0`) the run graph names a PlaceholderWithDefault: their node's shape and default
    # are the graph's (a table fed whole), by row.
    fed_defaults: frozenset[int] = frozenset()

    @cached_property
    def op_types(self) -> list[str]:
        """Each name's op type."""
        if self._op_types is not None:
            return self._op_types
        return list(map(self.op_type_names.__getitem__, self.op_code.tolist()))

    @cached_property
    def step_inputs(self) -> np.ndarray:
        """Per name: an input of the step's own (a feed's `_arg_`, a placeholder, an iterator's batch): the
        inputs category but for a function body's arguments (`_Arg` ops named after them, `logits_0`), which
        are its caller's tensors, made in the step (trial AA's CTC loss: its `[time, batch, classes]`
        arguments had been read as the step's feeds, its batch 59)."""
        arguments = self.of_op_type(_FUNCTION_ARGUMENT.__eq__) & (self.kind_code != _KIND_CODE[FEED])
        return (self.category == INPUTS) & ~arguments

    def op_type(self, index: int) -> str:
        """One name's op type (without building the per-name list)."""
        return self.op_type_names[int(self.op_code[index])]

    def of_op_type(self, test: Callable[[str], bool]) -> np.ndarray:
        """Per name, whether its op type passes `test` (asked once per distinct op type)."""
        return np.fromiter(map(test, self.op_type_names), dtype=bool, count=len(self.op_type_names))[self.op_code]

    @cached_property
    def _layer_cut(self) -> "LayerCut":
        return layer_cut(self.paths, self.path_parts, self.graph_names)

    @cached_property
    def layers(self) -> tuple[list[str], np.ndarray]:
        """(each layer once, sorted; each name's index into them): each name's `layer` (what-if
        layers), built once per table, as several steps' what-ifs ask."""
        known = self.source_layers
        return coded([known.get(raw) or self._layer_of(path) for raw, path in zip(self.raw, self.layer_paths)])

    def layer(self, index: int) -> str:
        """One name's layer (findings): the source's where it knows it (a profile's Keras 3
        layer: `cnn/c2` for `gradient_tape/cnn/c2/convolution/Conv2DBackpropInput`, whose
        `convolution` is the op's own scope), else `layer_of` its layer path."""
        return self.source_layers.get(self.raw[index]) or self._layer_of(self.leaf_path("layer", index))

    def _layer_of(self, path: str) -> str:
        """`layer_of` a layer path; where that layer is itself an op's layer path, the op's layer, and so on
        up: TF2's tape names an op's gradients below the op (`gradient_tape/fc2/matmul/MatMul_1`, folded to
        `fc2/matmul/MatMul_1`), which had made `fc2/matmul` a layer of its own beside `fc2`; an update's
        read of its variable (`unet_00/weights/ResourceApplyAdam/ReadVariableOp`) is the variable's layer's.
        The ops are this table's (one memory space's): an op that ran elsewhere, or that grappler fused
        away, leaves its name a layer (but for one named as an op type: `_named_as_op_type`)."""
        layer = layer_of(path)
        if layer == path:
            return layer
        folded = self._folded.get(layer)  # many names share a layer: folded once each
        if folded is None:
            folded = self._folded[layer] = self._fold(layer)
        return folded

    def _fold(self, layer: str) -> str:
        path = None
        while layer != path and (layer in self._op_layer_paths or self._named_as_op_type(layer)):
            path, layer = layer, layer_of(layer)
        return layer

    @cached_property
    def _folded(self) -> dict[str, str]:
        return {}

    @cached_property
    def _op_layer_paths(self) -> frozenset[str]:
        return frozenset(self.layer_paths)

    def _named_as_op_type(self, layer: str) -> bool:
        """Whether a layer below another is named as one of the step's op types is (`layer1/MatMul`,
        `MatMul_1`): an op's name, whose op grappler fused away (`layer1/Relu`, a `_FusedMatMul`, ran it)
        while its reads and its gradients (`gradient_tape/layer1/MatMul/MatMul`) keep it. Exactly as the
        op type is spelt: Keras' layers (`conv2d`) are named in lower case. So is a scope TensorFlow's
        own Python opens for one op (`OP_SCOPES`: `ffn/einsum`, `ffn/Gelu`)."""
        slash = layer.rfind("/")
        if slash <= 0:
            return False
        last = layer[slash + 1:]
        if last in self._op_type_set:
            return True
        base, sep, number = last.rpartition("_")  # string methods, not a regex: asked of every name's layer
        return bool(sep) and number.isdigit() and base in self._op_type_set

    @cached_property
    def _op_type_set(self) -> frozenset[str]:
        return frozenset(self.op_type_names) | OP_SCOPES

    @cached_property
    def layer_paths(self) -> list[str]:
        """Leaf paths grouped by layer: gradients and optimizer updates folded in (built on first
        use: the summary needs only their first components, and a few of them)."""
        cut, others, _ = self._layer_cut
        if cut is None:
            return self.paths
        out = [path[start:] if start else path for path, start in zip(self.paths, cut.tolist())]
        for i, text in others.items():
            out[i] = text
        return out

    @cached_property
    def _layer_parts(self) -> "FirstComponents":
        cut, others, slash = self._layer_cut
        if cut is None:
            return self.path_parts
        if others and (len(others) * 4 > len(self.paths) or not self.path_parts.lines.ok):
            return FirstComponents(self.layer_paths, _Lines(self.layer_paths))  # read from the layer paths
        # Each layer path is its path from cut[i] on: found in the paths' own joined lines; the few the
        # one-name rule gives replace theirs (1M names had been joined and read again for 86k of them).
        parts = FirstComponents(lambda: self.layer_paths, self.path_parts.lines, offset=cut, slash=slash,
                                base=self.path_parts)
        return parts.replacing(others) if others else parts

    def leaf_paths(self, group: str) -> list[str]:
        """The leaf paths of a grouping ("layer" or "scope")."""
        return self.layer_paths if group == "layer" else self.paths

    def leaf_parts(self, group: str) -> "FirstComponents":
        """The first components of a grouping's leaf paths (without building the layer paths)."""
        return self._layer_parts if group == "layer" else self.path_parts

    def leaf_path(self, group: str, index: int) -> str:
        """One name's leaf path in a grouping."""
        if group != "layer" or "layer_paths" in self.__dict__:
            return self.leaf_paths(group)[index]
        cut, others, _ = self._layer_cut
        if cut is None:
            return self.paths[index]
        return others[index] if index in others else self.paths[index][int(cut[index]):]

    def any_leaf_starting_with(self, group: str, prefix: str) -> bool:
        """Whether some leaf path of a grouping starts with `prefix`."""
        cut, others, _ = self._layer_cut if group == "layer" else _NO_CUT
        if cut is not None and not others and "layer_paths" not in self.__dict__:
            lines = self.path_parts.lines
            found = lines.any_starting_with(prefix, cut)
            if found is None:  # the prefix stands in too many places: every line asked at its cut
                found = bool(lines.starting_with(prefix.encode("ascii"), offset=cut).any())
            return found
        parts = self.leaf_parts(group)
        if parts.lines.ok:
            return bool(parts.lines.any_starting_with(prefix))
        return any(map(str.startswith, self.leaf_paths(group), itertools.repeat(prefix)))

    def kind(self, index: int) -> str:
        return KINDS[self.kind_code[index]]

    @classmethod
    def build(cls, raw: list[str], label_of: Mapping[str, str], source_ops: Mapping[str, str],
              graph_ops: Mapping[str, str] | None, input_names: frozenset[str] = frozenset(),
              source_layers: Mapping[str, str] | None = None,
              ran_ops: Mapping[str, str] | None = None) -> "NameTable":
        """`input_names`: runtime names the source saw feed the step (categorised as inputs);
        `source_layers`: the layers of the names the source knows them of; `ran_ops`: op types of the
        graphs the step ran (RunMetadata's partition graphs), for the names the run graph lacks."""
        lines = _Lines(raw)
        graph_names, paths, kind_code, fixed, runtime, changed, derived = _classify_all(raw, lines)
        op_types, op_type_names, op_code = _resolve_op_codes(runtime, graph_names, fixed, label_of, source_ops,
                                                             graph_ops, derived, ran_ops)
        parts = FirstComponents(paths, lines.with_lines(paths, changed))
        category = categorise_all(paths, kind_code, op_types, parts, (op_type_names, op_code))
        if input_names:
            category[np.fromiter(map(input_names.__contains__, raw), dtype=bool, count=len(raw))] = INPUTS
        fed_defaults = frozenset()
        if graph_ops is not None:
            feeds = np.flatnonzero(kind_code == _KIND_CODE[FEED]).tolist()
            fed_defaults = frozenset(i for i in feeds if graph_ops.get(graph_names[i]) == "PlaceholderWithDefault")
        return cls(raw, graph_names, paths, kind_code, op_types, op_type_names, op_code, category, parts,
                   source_layers or {}, fed_defaults)


def coded(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(each text once, sorted; the index of each text into that list)."""
    distinct = sorted(dict.fromkeys(texts))
    code = dict(zip(distinct, range(len(distinct))))
    return distinct, np.fromiter(map(code.__getitem__, texts), dtype=np.int64, count=len(texts))


def _coded_in_order(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(each text once, in first-seen order; the index of each text into that list)."""
    code = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    return list(code), np.fromiter(map(code.__getitem__, texts), dtype=np.int64, count=len(texts))


class FirstComponents:
    """The first path component of many paths, coded (a model has few distinct ones)."""

    def __init__(self, paths, lines: "_Lines | None" = None, offset: np.ndarray | None = None,
                 slash: np.ndarray | None = None, base: "FirstComponents | None" = None) -> None:
        """paths: the paths, or a function that makes them (called when `lines` is asked);
        lines: the paths joined (numpy finds the components), or with `offset`, lines whose
        i-th holds path i from offset[i] on; slash: where each path's first "/" is in its
        line (-1: none), where the caller knows; base: with `offset`, the first components
        of the lines themselves (those of the paths at offset 0 are theirs)."""
        self._paths = paths
        self._lines = lines if offset is None else None
        self.slash_index: np.ndarray | None = None  # which "/" of `lines` is each path's first
        if lines is not None and lines.ok:
            start = 0 if offset is None else offset
            self.path_length = lines.lengths - start
            if slash is None and offset is None:  # a path's second "/" is then the next one
                self.slash_index = np.searchsorted(lines._slashes, lines.starts)
                slash = lines.slash_at(self.slash_index)
            elif slash is None:
                slash = lines.slash_from(start)
            self.length = np.where(slash >= 0, slash - start, self.path_length)
            coded = _coded_from_base(lines, base, start, self.length) if base is not None and offset is not None else None
            self.distinct, self.code = coded or lines.code_slices(lines.starts + start, self.length)
            self.has_rest = self.length < self.path_length - 1
            return
        paths = self._paths = paths() if callable(paths) else paths
        n = len(paths)
        firsts = [path.partition("/")[0] for path in paths]
        self.length = np.fromiter(map(len, firsts), dtype=np.int64, count=n)
        self.distinct, self.code = _coded_in_order(firsts)
        self.path_length = np.fromiter(map(len, paths), np.int64, n)
        self.has_rest = self.length < self.path_length - 1

    @property
    def lines(self) -> _Lines:
        if self._lines is None:
            if callable(self._paths):
                self._paths = self._paths()
            self._lines = _Lines(self._paths)
        return self._lines

    def replacing(self, paths: dict[int, str]) -> "FirstComponents":
        """These first components with some paths replaced (by index: the one-name rule's layer paths):
        only those are read, the codes of the others kept (in first-seen order, each text once)."""
        rows = np.fromiter(paths, dtype=np.int64, count=len(paths))
        firsts = [path.partition("/")[0] for path in paths.values()]
        code_of = {text: i for i, text in enumerate(self.distinct)}
        texts = list(self.distinct)
        for text in firsts:
            if code_of.setdefault(text, len(texts)) == len(texts):
                texts.append(text)
        code = self.code.copy()
        code[rows] = np.fromiter(map(code_of.__getitem__, firsts), dtype=np.int64, count=len(firsts))
        present, first_row = np.unique(code, return_index=True)  # a text no path keeps is dropped
        order = present[np.argsort(first_row, kind="stable")]
        remap = np.zeros(len(texts), dtype=np.int64)
        remap[order] = np.arange(order.size)
        out = object.__new__(FirstComponents)
        out._paths, out._lines, out.slash_index = self._paths, None, None
        out.distinct, out.code = [texts[c] for c in order.tolist()], remap[code]
        out.length, out.path_length = self.length.copy(), self.path_length.copy()
        out.length[rows] = np.fromiter(map(len, firsts), dtype=np.int64, count=len(firsts))
        out.path_length[rows] = np.fromiter(map(len, paths.values()), dtype=np.int64, count=len(firsts))
        out.has_rest = out.length < out.path_length - 1
        return out

    def where(self, test) -> np.ndarray:
        """Which paths have a first component that passes `test`."""
        passes = np.fromiter(map(bool, map(test, self.distinct)), dtype=bool, count=len(self.distinct))
        return passes[self.code] if self.code.size else np.zeros(0, dtype=bool)


_FEW_FIRSTS = 64  # first components few enough to merge two codings of them one pass each


def _coded_from_base(lines: _Lines, base: FirstComponents, start: np.ndarray,
                     length: np.ndarray) -> tuple[list[str], np.ndarray] | None:
    """`code_slices` of the slices at `start` (a layer path's first component), where `base`
    has the lines' own first components coded: a path at offset 0 has its line's, so only the
    others are coded (on a deep step, the gradients' and the updates': under half), and the
    two codings merged, in first-seen order. None where that does not pay: few rows at 0, or
    many distinct components (a pass each)."""
    rows = np.flatnonzero(start > 0)
    n = start.size
    if rows.size * 4 > n * 3 or len(base.distinct) > _FEW_FIRSTS:
        return None
    cut_distinct, cut_code = lines.code_slices(lines.starts[rows] + start[rows], length[rows])
    texts = list(base.distinct) + cut_distinct
    if len(texts) > _FEW_FIRSTS:
        return None
    provisional = base.code.copy()
    provisional[rows] = len(base.distinct) + cut_code
    present = np.flatnonzero(np.bincount(provisional, minlength=len(texts)))
    first_row = [int(np.argmax(provisional == c)) for c in present.tolist()]
    code_of_text: dict[str, int] = {}
    remap = np.zeros(len(texts), dtype=np.int64)
    for _, c in sorted(zip(first_row, present.tolist())):  # in first-seen order, a text once
        remap[c] = code_of_text.setdefault(texts[c], len(code_of_text))
    return list(code_of_text), remap[provisional]


def _classify_all(raw: list[str], lines: _Lines):
    """`classify` over many names: (graph names, paths, kind codes, fixed op types, runtime names,
    the rows whose path is not the raw name, the rows of ops a grappler pass made from a graph
    node: their graph name is that node's, not theirs).

    Names with nothing for classify to change are their own graph name and path.
    """
    if lines.ok:
        special = lines.with_any_char(b"-:")  # layout helpers, grappler suffixes, stream suffixes
        special |= lines.starting_with(b"_") | lines.starting_with(b"Func/")  # feeds and plumbing
        special |= lines.containing(b"__cf__")  # constant folding's suffix
        special |= lines.containing(b"/_")  # control flow v2's calls (`while/body/_1/`), its plumbing (`merge/_5`)
        special |= lines.with_component_head(_CLASSIFIED_HEADS, 8)  # a grappler pass's component, a function's call
        rows = np.flatnonzero(special).tolist()
    else:
        rows = range(len(raw))
    fixed: dict[int, str] = {}
    derived: list[int] = []
    kind_code = np.zeros(len(raw), dtype=np.int64)
    graph_names, paths, runtime = {}, {}, {}  # the rows classify changes, by column
    for i in rows:
        info = classify(raw[i])
        name = raw[i]
        if info.graph_name != name:
            graph_names[i] = info.graph_name
        if info.path != name:
            paths[i] = info.path
        if info.fixed_op_type:
            fixed[i] = info.fixed_op_type
        kind_code[i] = _KIND_CODE[info.kind]
        stripped = strip_stream_suffix(name)
        if stripped != name:
            runtime[i] = stripped
        if info.kind == OP and info.graph_name != stripped and not info.fixed_op_type:
            derived.append(i)
    return (_with_rows(raw, graph_names), _with_rows(raw, paths), kind_code, fixed, _with_rows(raw, runtime),
            sorted(paths), derived)


def _with_rows(texts: list[str], rows: dict[int, str]) -> list[str]:
    """`texts` with some rows replaced (a copy only where there are any)."""
    if not rows:
        return texts
    out = list(texts)
    for i, text in rows.items():
        out[i] = text
    return out


class CodedOpTypes(collections.abc.Mapping):
    """Graph node name -> op type, held as codes: one dict of name -> code and each op type
    once (a run graph's op types, which every step of its run looks its names up in). A
    step with thousands of names reads their op types as codes in one pass (`code_of`),
    without making a list of them and coding it again; one dict, as a plain one would be."""

    def __init__(self, names: Iterable[str], ops: Iterable[str]) -> None:
        ops = list(ops)
        self.type_names: list[str] = list(dict.fromkeys(ops))
        code_of_type = dict(zip(self.type_names, range(len(self.type_names))))
        self.code_of: dict[str, int] = dict(zip(names, map(code_of_type.__getitem__, ops)))

    def __getitem__(self, name: str) -> str:
        return self.type_names[self.code_of[name]]

    def get(self, name: str, default=None):
        code = self.code_of.get(name)
        return default if code is None else self.type_names[code]

    def __contains__(self, name) -> bool:
        return name in self.code_of

    def __iter__(self):
        return iter(self.code_of)

    def __len__(self) -> int:
        return len(self.code_of)


def _resolve_op_codes(runtime: list[str], graph_names: list[str], fixed: dict[int, str],
                      label_of: Mapping[str, str], source_ops: Mapping[str, str],
                      graph_ops: Mapping[str, str] | None,
                      derived: list[int], ran_ops: Mapping[str, str] | None = None
                      ) -> tuple[list[str] | None, list[str], np.ndarray]:
    """`_resolve_op_types` coded: (the op types, None where only coded; each op type once,
    sorted; each name's index into those). With a coded run graph (CodedOpTypes) and no
    op types from the source, the graph's codes are read in one pass and only the names
    it lacks, or whose op type is not the graph's, are resolved one by one (from `ran_ops` first, then
    their labels)."""
    if source_ops or not isinstance(graph_ops, CodedOpTypes):
        chained = (collections.ChainMap(graph_ops, ran_ops) if graph_ops else ran_ops) if ran_ops else graph_ops
        op_types = _resolve_op_types(runtime, graph_names, fixed, label_of, source_ops, chained, derived)
        return (op_types, *coded(op_types))
    type_names = graph_ops.type_names
    graph_code = np.fromiter(map(graph_ops.code_of.get, graph_names, itertools.repeat(-1)), dtype=np.int64,
                             count=len(graph_names))
    unknown = graph_code < 0
    if "" in type_names:  # a node without an op type: as if the graph lacked it
        unknown |= graph_code == type_names.index("")
    rows = sorted(set(fixed).union(derived, np.flatnonzero(unknown).tolist()))
    positions = dict(zip(rows, range(len(rows))))
    own = _resolve_op_types([runtime[i] for i in rows], [graph_names[i] for i in rows],
                            {positions[i]: op for i, op in fixed.items()}, label_of, source_ops,
                            collections.ChainMap(graph_ops, ran_ops) if ran_ops else graph_ops,
                            [positions[i] for i in derived])
    normal = np.ones(graph_code.size, dtype=bool)
    normal[rows] = False
    used = np.flatnonzero(np.bincount(graph_code[normal], minlength=len(type_names)))
    names = sorted(set(map(type_names.__getitem__, used.tolist())).union(own))
    code_of_name = dict(zip(names, range(len(names))))
    remap = np.full(len(type_names), -1, dtype=np.int64)
    remap[used] = list(map(code_of_name.__getitem__, map(type_names.__getitem__, used.tolist())))
    op_code = remap[np.maximum(graph_code, 0)] if remap.size else np.zeros(graph_code.size, dtype=np.int64)
    op_code[rows] = list(map(code_of_name.__getitem__, own))
    return None, names, op_code


def _graph_op_types(graph_ops: Mapping[str, str], graph_names: list[str]) -> list[str | None]:
    """The run graph's op type of each name (None where it has none), from a CodedOpTypes's
    codes without a Python call per name."""
    if isinstance(graph_ops, CodedOpTypes):
        type_names = graph_ops.type_names
        return [None if code is None else type_names[code] for code in map(graph_ops.code_of.get, graph_names)]
    return list(map(graph_ops.get, graph_names))


def _resolve_op_types(runtime: list[str], graph_names: list[str], fixed: dict[int, str],
                      label_of: Mapping[str, str], source_ops: Mapping[str, str],
                      graph_ops: Mapping[str, str] | None, derived: list[int] = ()) -> list[str]:
    """Op type: fixed by the name, else the source's own, the run graph's, the label's. An op a
    grappler pass made (`derived`: `ConstantFolding/.../ShapeN-matshapes-1`, `..._1__cf__3`)
    is not in the graphs by its own name: the op that ran is its label's (`Const`), where the
    label names one; the graph node it was made from is the fallback."""
    if source_ops:
        ops: list[str | None] = list(map(source_ops.get, runtime))
        if graph_ops and not all(ops):  # a None or "": the graph's
            ops = [known or graph for known, graph in zip(ops, _graph_op_types(graph_ops, graph_names))]
    else:
        ops = _graph_op_types(graph_ops, graph_names) if graph_ops else [None] * len(runtime)
    for i, op in fixed.items():
        ops[i] = op
    made = [i for i in derived if not (source_ops and source_ops.get(runtime[i]))]
    for i, label in zip(made, labels_of(label_of, [runtime[i] for i in made]) if made else ()):
        ops[i] = graph_op_type(op_type_from_label(label)) or ops[i]
    if not all(ops):  # a None or ""
        missing = list(itertools.compress(range(len(ops)), map(operator.not_, ops)))
        for i, label in zip(missing, labels_of(label_of, [runtime[i] for i in missing])):
            ops[i] = graph_op_type(op_type_from_label(label)) or UNKNOWN_OP
    return ops  # type: ignore[return-value]


class LayerCut(NamedTuple):
    """`layer_path` over many paths (see layer_cut)."""

    cut: np.ndarray | None  # per path, how many characters its layer path drops from its start (None: none)
    others: dict[int, str]  # the layer paths of the few paths the one-name rule gives, by index
    slash: np.ndarray | None  # per path, where its layer path's first "/" is in the path (-1: none)


_NO_CUT = LayerCut(None, {}, None)


def layer_cut(paths: list[str], parts: FirstComponents, graph_names: list[str] | None = None) -> LayerCut:
    """`layer_path` over many paths (`_layer_cut`); another replica's (`replica_1/...`: MirroredStrategy)
    are cut as their paths below that scope are (its own `layer_cut`), as replica 0's are, in numpy (a
    space of one replica's names holds nothing else: 1M names had gone through the one-name rule)."""
    graph_names = paths if graph_names is None else graph_names
    lines = parts.lines
    n = len(paths)
    replica = parts.where(REPLICA_RE.match) & parts.has_rest if lines.ok else None
    if replica is None:
        return _layer_cut(paths, parts, graph_names)
    # A space of one replica's names (a GPU's under MirroredStrategy) has no others to cut.
    outer = LayerCut(None, {}, None) if n and replica.all() else _layer_cut(paths, parts, graph_names)
    # Where another cut lands on a replica's scope (its gradients: `gradient_tape/replica_1/cnn/...`), that
    # scope goes too, and what follows it is cut as a path of its own.
    offset = np.where(replica, parts.length + 1, 0)
    if outer.cut is not None:
        rows, below = _replica_after(lines, outer.cut, outer.others)
        first = replica[rows]  # (a replica's own rows are cut below their scope already)
        offset[rows[~first]] = below[~first]
    rows = np.flatnonzero(offset)
    if not rows.size:
        return outer
    starts = offset[rows].tolist()
    rest = [paths[i][k:] for i, k in zip(rows.tolist(), starts)]
    rest_parts = FirstComponents(rest, _Lines(rest))
    # The graph names below the scope, made only for the rows the one-name rule reads (a few).
    rest_graph = rest if graph_names is paths else _Rows(lambda j: _below_replica(graph_names[rows[j]], rest[j]))
    inner = layer_cut(rest, rest_parts, rest_graph)
    cut = np.zeros(n, dtype=np.int64) if outer.cut is None else outer.cut.copy()
    others = {i: layer for i, layer in outer.others.items() if not offset[i]}
    offset = offset[rows]
    cut[rows] = offset + (0 if inner.cut is None else inner.cut)
    others.update(zip(rows[list(inner.others)].tolist(), inner.others.values()))
    slash = None
    if not others:  # (with others, the layer paths' first components are read from the paths themselves)
        slash = (outer.slash.copy() if outer.slash is not None
                 else np.where(parts.length < parts.path_length, parts.length, -1))
        inner_slash = (inner.slash if inner.slash is not None
                       else np.where(rest_parts.length < rest_parts.path_length, rest_parts.length, -1))
        slash[rows] = np.where(inner_slash >= 0, offset + inner_slash, -1)
    return LayerCut(cut, others, slash)


def _replica_after(lines: "_Lines", cut: np.ndarray, others: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, where their path goes on): the cut rows (not the one-name rule's) whose layer path starts with
    another replica's scope and goes on below it, and the position after that scope's "/". Their cut's first
    byte read first: an "r" is rare (no 8-byte gather of every cut row)."""
    rows = np.flatnonzero(cut > 0)
    rows = rows[lines.buf[np.minimum(lines.starts[rows] + cut[rows], lines.buf.size - 1)] == ord("r")]
    empty = np.zeros(0, dtype=np.int64)
    if not rows.size:
        return empty, empty
    mask = np.zeros(lines.count, dtype=bool)
    mask[rows] = True
    if others:
        mask[list(others)] = False
    rows = np.flatnonzero(lines.starting_with(b"replica_", mask, cut))
    if not rows.size:
        return empty, empty
    end = lines.slash_from(np.where(mask, cut, 0))[rows]  # the scope's "/" (-1: nothing below it)
    below = (end >= 0) & (end + 1 < lines.lengths[rows])  # and something after it
    rows, end = rows[below], end[below]
    distinct, code = lines.code_slices(lines.starts[rows] + cut[rows], end - cut[rows])
    replica = np.fromiter(map(bool, map(REPLICA_RE.match, distinct)), bool, len(distinct))[code]
    return rows[replica], end[replica] + 1


class _Rows:
    """A sequence whose rows are made when read (by index only)."""

    def __init__(self, row: Callable[[int], str]) -> None:
        self._row = row

    def __getitem__(self, index: int) -> str:
        return self._row(int(index))


def _below_replica(graph_name: str, rest: str) -> str:
    """A replica's graph name below its scope (the path's `rest`), where it has that scope too."""
    below = _replica_rest(graph_name)
    return rest if below is None else below


def _layer_cut(paths: list[str], parts: FirstComponents, graph_names: list[str]) -> LayerCut:
    """`layer_path` over many paths, as how much of each path its layer path drops
    (`layer_path_of` where a gradients scope is below the first component, with
    `graph_names`, the names with the runtime's calls, where the caller has them).

    Only paths starting with a gradients scope, with a second or third component
    starting with `update_`, or with a gradients scope below can change. The common forms
    are cut at offsets found with numpy (`gradients/<scope>/...` loses its first component,
    `<optimizer>/update_<scope>/...` that and the `update_`, `<scope>/gradients/<scope>/...`
    all up to the gradients scope's end); the others go through the one-name rule.
    """
    n = len(paths)
    lines = parts.lines
    if not lines.ok:
        others = {i: layer for i, (path, layer) in enumerate(zip(paths, map(layer_path_of, graph_names, paths)))
                  if layer != path}
        return LayerCut(np.zeros(n, dtype=np.int64), others, None) if others else _NO_CUT
    gradients_first = parts.where(_GRADIENTS_RE.match) & parts.has_rest
    named = parts.where(_named_gradients) & parts.has_rest
    if named.any():  # an op's `_grad` scope after the first component (which does not end so)
        gradients_first |= named & (lines.containing(b"_grad/") | lines.ending_with(b"_grad"))
    # A LossScaleOptimizer's update in a branch (`cond/adam/...`): the branch's scope cut off
    # where the optimizer's follows it (asked of the few distinct second components).
    branch = parts.where(_COND_RE.match) & parts.has_rest
    inner_tape = lines.lines_with_component(b"gradient")  # (a tape's scope below the first: the one-name rule's)
    if not (gradients_first.any() or b"update_" in lines.data or lines.gradients_below[0].size or branch.any()
            or inner_tape.size):
        return _NO_CUT
    second = parts.length + 1  # where the second component starts
    # Where the second component ends, for paths that go on below it (-1: they do not): the
    # "/" after the first one.
    second_end = np.where(parts.has_rest, lines.slash_from(second) if parts.slash_index is None
                          else lines.slash_at(parts.slash_index + 1), -1)
    deeper = second_end >= 0
    plain = gradients_first & deeper
    update = ~gradients_first & deeper & lines.starting_with(b"update_", parts.has_rest, second)
    if update.any():  # Keras 3's numbered updates (`adam/update_0_2/...`) name no variable: they stay
        at = np.minimum(lines.starts + second + len("update_"), lines.buf.size - 1)
        update &= (lines.buf[at] - np.uint8(ord("0"))) >= 10
    # Nested gradient scopes (`gradient_tape/gradients/<scope>/...`: tf.recompute_grad's, every
    # backward op of a recomputed model) lose both, cut at the third component; rarer forms
    # (a third gradient scope, a named one) go through the one-name rule.
    nested = plain & lines.starting_with(b"gradient", plain, second)
    plain &= ~nested
    # The gradients' own sums (`gradients/AddN_9/...`) stay: the one-name rule tells `AddN_<N>` apart.
    aggregation = plain & lines.starting_with(b"AddN", plain, second)
    plain &= ~aggregation
    nested |= aggregation
    two_level, third_end = np.zeros(n, dtype=bool), None
    if nested.any():
        rows = np.flatnonzero(nested & parts.where(_GRADIENTS_RE.match))
        distinct, code = lines.code_slices(lines.starts[rows] + second[rows], second_end[rows] - second[rows])
        rows = rows[np.fromiter(map(bool, map(_GRADIENTS_RE.match, distinct)), bool, len(distinct))[code]]
        third_end = lines.slash_from(np.where(nested, second_end + 1, 0))
        candidates = np.zeros(n, dtype=bool)
        candidates[rows[third_end[rows] >= 0]] = True
        two_level = candidates & ~lines.starting_with(b"gradient", candidates, second_end + 1)
        nested &= ~two_level
    if branch.any():
        rows = np.flatnonzero(branch & deeper)
        distinct, code = lines.code_slices(lines.starts[rows] + second[rows], second_end[rows] - second[rows])
        branch[:] = False
        branch[rows[np.fromiter(map(optimizer_scope, distinct), bool, len(distinct))[code]]] = True
    cut = np.zeros(n, dtype=np.int64)
    cut[plain] = second[plain]
    cut[branch] = second[branch]
    cut[update] = second[update] + len("update_")
    cut[two_level] = second_end[two_level] + 1
    # The one-name rule's other form (`training/Adam/update_<scope>/...`): a third component
    # starting with `update_`.
    third_update = (deeper & ~plain & ~update & ~nested & ~two_level
                    & lines.starting_with(b"update_", deeper, second_end + 1))
    # Where the update names a variable (no Keras 3 number) and goes on below it, cut after `update_` as
    # that rule cuts (a deep model trained under a scope of the user's had sent every update through it:
    # a tenth of a transformer's names); a branch's keep the one-name rule (below).
    third_cut, third_cut_slash = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if third_update.any():
        rows = np.flatnonzero(third_update & ~branch)
        start = second_end[rows] + 1 + len("update_")
        variable = (lines.buf[np.minimum(lines.starts[rows] + start, lines.buf.size - 1)] - np.uint8(ord("0"))) >= 10
        rows, start = rows[variable], start[variable]
        at = np.zeros(n, dtype=np.int64)
        at[rows] = start
        found = lines.slash_from(at)[rows]
        third_cut, third_cut_slash, start = rows[found >= 0], found[found >= 0], start[found >= 0]
        cut[third_cut] = start
    # And tf_keras' `training/Adam/Adam/update_<scope>/...`: an `update_` fourth component.
    # (Only under an optimizer's first component, as the one-name rule asks: few rows.)
    rows = np.flatnonzero(deeper & ~third_update & ~plain & ~update & ~nested & ~two_level
                          & parts.where(optimizer_scope))
    if rows.size:
        slashes = lines._slashes
        third_slash = slashes[np.searchsorted(slashes, lines.starts[rows] + second_end[rows] + 1)]
        within = third_slash < lines.starts[rows] + lines.lengths[rows]
        rows, third_slash = rows[within], third_slash[within]
        fourth = np.zeros(n, dtype=bool)
        fourth[rows] = True
        offset = np.zeros(n, dtype=np.int64)
        offset[rows] = third_slash + 1 - lines.starts[rows]
        third_update |= lines.starting_with(b"update_", fourth, offset)
    one_name = third_update | nested
    one_name[third_cut] = False
    others = {i: layer_path_of(graph_names[i], paths[i]) for i in np.flatnonzero(one_name).tolist()}
    if branch.any():  # the optimizer's own forms below the branch (its updates, its gradients): the one-name rule
        for i in np.flatnonzero(branch & (lines.containing(b"update_") | lines.containing(b"gradients"))).tolist():
            others[i] = layer_path_of(graph_names[i], paths[i])
    # A gradients scope below the first component (`train/gradients/<scope>/...`): cut where
    # it ends, or by the one-name rule (`_below_gradients_cut`).
    below, below_cut, below_slash, below_others = _below_gradients_cut(
        lines, deeper & ~gradients_first & ~update & ~third_update, paths, graph_names)
    cut[below] = below_cut
    for i in below_others.tolist():
        others[i] = layer_path_of(graph_names[i], paths[i])
    # Two gradients scopes with the gradients' sums below them: the one-name rule keeps them.
    if two_level.any():
        for i in np.flatnonzero(lines.starting_with(b"AddN", two_level, second_end + 1)).tolist():
            others[i] = layer_path(paths[i])
    others = {i: layer for i, layer in others.items() if layer != paths[i]}
    # A loop's or a branch's gradient (control flow v2: `gradients/rnn/while_grad/rnn/while_grad/...`,
    # `gradients/cond_grad/StatelessIf/...`) goes to its op by the one-name rule: the paths that
    # hold `_grad/` twice, or once before an `If`.
    for i in _control_flow_gradient_rows(lines, plain | two_level).tolist():
        layer = layer_path(paths[i])
        if layer != paths[i][int(cut[i]):]:
            others[i] = layer
    # A tape's gradients taken inside a loop or a function (`while/body/_1/gradient_tape/enc2/MatMul`): the
    # one-name rule drops the tape's scope (`_without_inner_tape`), on the few rows that hold it.
    for i in inner_tape.tolist():
        if i not in others and _has_inner_tape(paths[i]):
            layer = layer_path_of(graph_names[i], paths[i])
            if layer != paths[i][int(cut[i]):]:
                others[i] = layer
    if not (others or cut.any()):
        return _NO_CUT
    # A cut path's layer path starts at its second component (`update_` cut off it), or its
    # third (two gradient scopes cut off): its first "/" ends that component.
    slash = np.where(cut > 0, second_end, np.where(parts.length < parts.path_length, parts.length, -1))
    if two_level.any():
        slash[two_level] = third_end[two_level]
    slash[below] = below_slash
    slash[third_cut] = third_cut_slash
    return LayerCut(cut, others, slash)


def layer_path_of(graph_name: str, path: str) -> str:
    """`layer_path` of one name, from its path and its graph name, which keeps the runtime's
    calls. Where the gradients were taken in a function's body (a loop's, a branch's: control
    flow v2), that is, below the first component and after a call, the ops' names are the
    function's own: those gradients (`acc/while/body/_1/gradients/cnn/Conv2D_grad/...`) name
    the body's ops from the body's root, so they fold below the call (`acc/while/cnn/
    Conv2D_grad/...`, where the forward `acc/while/body/_1/cnn/Conv2D` is `acc/while/cnn/
    Conv2D`). Everywhere else, `layer_path` of the path.
    """
    rest = _replica_rest(path)
    if rest is not None:  # as `layer_path` reads it
        return layer_path_of(_below_replica(graph_name, rest), rest)
    if ("/gradients" in path and graph_name != path and _first_component_rules(path) is None
            and _below_gradients(path) is not None):
        scope = _GRADIENTS_BELOW_RE.search(graph_name)
        call = None
        for call in _CALL_RE.finditer(graph_name, 0, scope.start() if scope else 0):
            pass  # the last call before the gradients scope
        if call is not None and call.end() < len(graph_name):
            inner = graph_name[call.end() + 1:]
            folded = layer_path(inner)
            if folded != inner:
                return _without_inner_tape(f"{_without_calls(graph_name[:call.start()])}/{folded}")
    return layer_path(path)


_GRADIENT_WORD = np.uint64(int.from_bytes(b"gradient", "little"))
_ADDN_WORD = np.uint64(int.from_bytes(b"AddN", "little"))


def _below_gradients_cut(lines: "_Lines", among: np.ndarray, paths: list[str], graph_names: list[str]
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`_below_gradients` over the rows `among`: (rows cut at their first `/gradients/` below the
    first component, each one's cut, where its layer path's first "/" is; rows for the one-name
    rule: a numbered scope (`gradients_1`), below it what a first gradients scope folds by the
    one-name rule (another gradients scope, a loop's gradient, the gradients' sums, a second
    gradients scope further down), a name that ran in a function's body). The first
    `/gradients` of a row decides, as the one-name rule's search."""
    empty = np.zeros(0, dtype=np.int64)
    found, line, ends = lines.gradients_below
    if not found.size:
        return empty, empty, empty, empty
    twice = np.bincount(line, minlength=lines.count) >= 2
    keep = among[line]
    found, line, ends = found[keep], line[keep], ends[keep]
    first = np.ones(line.size, dtype=bool)  # a row's first such scope only
    first[1:] = line[1:] != line[:-1]
    found, line, ends = found[first], line[first], ends[first]
    one_name = line[~ends]  # `gradients_<N>`: the one-name rule reads the number
    found, rows = found[ends], line[ends]
    begin = found + len(b"/gradients/")  # where the path below starts
    cut = begin - lines.starts[rows]
    stop = lines.starts[rows] + lines.lengths[rows]
    # An op's gradient below it: a `_grad/` at or after its start (the last one of the row), or
    # a row ending in `_grad` with a "/" below the scope.
    grads, grad_lines = lines.positions(b"_grad/"), lines.lines_holding(b"_grad/")
    last_grad = np.full(lines.count, -1, dtype=np.int64)
    if grads.size:
        last = np.ones(grad_lines.size, dtype=bool)
        last[:-1] = grad_lines[1:] != grad_lines[:-1]
        last_grad[grad_lines[last]] = grads[last]
    slashes = lines._slashes
    slash = slashes[np.minimum(np.searchsorted(slashes, begin), slashes.size - 1)]
    slash = np.where(slash < stop, slash - lines.starts[rows], -1)
    held = (last_grad[rows] >= begin) | (lines.ending_with(b"_grad")[rows] & (slash >= 0))
    begin, stop, rows, cut, slash = begin[held], stop[held], rows[held], cut[held], slash[held]
    # What a first gradients scope folds by the one-name rule, below this one: another gradients
    # scope (Keras' `training/Adam/gradients/gradients/...`), the gradients' sums, a loop's or a
    # branch's gradient; and a name that ran in a function's body (control flow v2).
    again = (stop - begin >= 8) & (lines._word(begin, 8) == _GRADIENT_WORD)
    again |= (stop - begin >= 4) & (lines._word(begin, 4) == _ADDN_WORD)
    again |= twice[rows]
    at_rows = np.zeros(lines.count, dtype=bool)
    at_rows[rows] = True
    again |= np.isin(rows, _control_flow_gradient_rows(lines, at_rows))
    if graph_names is not paths:
        again |= np.fromiter((graph_names[i] is not paths[i] and _CALL_RE.search(graph_names[i]) is not None
                              for i in rows.tolist()), dtype=bool, count=rows.size)
    return rows[~again], cut[~again], slash[~again], np.concatenate([one_name, rows[again]])


# The first 8 bytes after `_grad/` of a branch's gradient (`_BRANCH_GRADIENT_OPS`: `StatelessIf/`, `If/`, and a
# switch_case's `gradient/`, whose first 8 bytes `gradients/` has too: a superset, asked exactly).
_IF_HEADS = _heads(["StatelessIf/", "If/", "gradient"], 8)


def _control_flow_gradient_rows(lines: _Lines, among: np.ndarray) -> np.ndarray:
    """Of the rows `among`, those that may hold a loop's or a branch's gradient (what
    `_without_control_flow_gradients` folds): `_grad/` at least twice, or once before
    `StatelessIf/`, `If/` or `gradient`."""
    found = lines.positions(b"_grad/")
    if not found.size:
        return found
    line = lines.lines_holding(b"_grad/")
    after = lines._word(np.minimum(found + 6, lines.buf.size - 1), 8)
    branch = ((after == _IF_HEADS[0]) | ((after & _LOW_BYTES[3]) == (_IF_HEADS[1] & _LOW_BYTES[3]))
              | (after == _IF_HEADS[2]))
    rows = (np.bincount(line, minlength=lines.count) >= 2) | np.bincount(line[branch], minlength=lines.count).astype(bool)
    return np.flatnonzero(rows & among)


def categorise_all(paths: list[str], kind_code: np.ndarray, op_types: list[str] | None,
                   parts: FirstComponents | None = None,
                   op_coding: tuple[list[str], np.ndarray] | None = None) -> np.ndarray:
    """`categorise` over many names, with numpy over the joined paths; `op_coding` is the
    op types coded (`coded`), where the caller has them (then `op_types` may be None)."""
    n = len(paths)
    parts = parts or FirstComponents(paths)
    lines = parts.lines
    if not lines.ok:
        if op_types is None:
            op_types = list(map(op_coding[0].__getitem__, op_coding[1].tolist()))
        return np.fromiter(map(categorise, paths, op_types, (KINDS[k] for k in kind_code.tolist())),
                           dtype=np.int64, count=n)
    distinct_ops, op_code = op_coding or coded(op_types)

    def op_flag(test) -> np.ndarray:
        return np.array([bool(test(op)) for op in distinct_ops], dtype=bool)[op_code] if n else np.zeros(0, bool)

    is_input = op_flag(_INPUT_OPS.__contains__) | (kind_code == _KIND_CODE[FEED])
    is_plumbing = kind_code == _KIND_CODE[PLUMBING]
    is_apply = op_flag(is_apply_op)
    is_variable = op_flag(_VARIABLE_OPS.__contains__)
    is_other = op_flag(_OTHER_OPS.__contains__)
    is_check = op_flag(_GRADIENT_CHECK_OPS.__contains__)
    optimizer_first = parts.where(optimizer_scope)
    slot = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(is_variable & parts.has_rest)
    for i in rows[lines.last_component_head(rows, _SLOT_HEADS, 4)].tolist():
        slot[i] = bool(_SLOT_RE.match(paths[i].rsplit("/", 1)[-1]))
    # _GRADIENT_RE: a first component of _GRADIENT_FIRST_RE, or a component ending in `_grad`.
    gradient = parts.where(_GRADIENT_FIRST_RE.match) | lines.containing(b"_grad/") | lines.ending_with(b"_grad")
    scratch = parts.where(lambda first: first.startswith(_COLLECTIVE_SCRATCH))  # (see _COLLECTIVE_SCRATCH)
    rows = np.flatnonzero(parts.where(_LOOKED_THROUGH_RE.match) & parts.has_rest)
    # Each name's first component as `categorise` reads it: where it ends in its name (its "/", if
    # any), and how long it is.
    first_end, first_length = parts.length.copy(), parts.length
    if rows.size:  # the component after `replica_<N>/` is the first, as in `categorise`
        second = parts.length[rows] + 1  # where it starts in its name
        slash = lines.slash_from(parts.length + 1)[rows]
        length = np.where(slash >= 0, slash, lines.lengths[rows]) - second
        first_end[rows] = np.where(slash >= 0, slash, -1)
        first_length = first_length.copy()
        first_length[rows] = length
        distinct, code = lines.code_slices(lines.starts[rows] + second, length)
        optimizer_first[rows] = np.fromiter(map(optimizer_scope, distinct), bool, len(distinct))[code]
        gradient[rows] |= np.fromiter((_GRADIENT_FIRST_RE.match(t) is not None for t in distinct), bool,
                                      len(distinct))[code]
        scratch[rows] = np.fromiter((t.startswith(_COLLECTIVE_SCRATCH) for t in distinct), bool, len(distinct))[code]
    # A gradients scope as the second component (`train/gradients/AddN_3`, `replica_1/train/gradients/...`):
    # gradients. Found from the slashes (lines.gradients_below); the one-name rule decides where the
    # word is numbered (`gradients_1`).
    at, line, ends = lines.gradients_below  # from the slashes, as the layer cut reads them too
    if line.size:
        second = (at == lines.starts[line] + first_end[line]) & (first_length[line] > 0)
        gradient[line[second & ends]] = True
        unsure = np.unique(line[second & ~ends]).tolist()
        gradient[[i for i in unsure if _GRADIENTS_SECOND_RE.match(_looked_through(paths[i]))]] = True
    # A tape's scope below the first component (`_INNER_TAPE_RE`), on the rows found from the slashes.
    for i in lines.lines_with_component(b"gradient").tolist():
        if _has_inner_tape(_looked_through(paths[i])):
            gradient[i] = True
    # An optimizer's updates under a scope of the user's (`train/Adam/update_<var>/...`), by the
    # one-name rule on the rows with an `update_` component whose first is no optimizer's.
    updated_below = np.zeros(n, dtype=bool)
    rows = lines.lines_with_component(b"update_")
    rows = rows[~optimizer_first[rows]].tolist()
    updated_below[[i for i in rows if _updated_below_scope(_looked_through(paths[i]))]] = True
    # Gradients under the optimizer's scope (`training/Adam/gradients/...`): gradients, by the
    # one-name rule on the rows holding `/gradients`.
    is_gradient_below = np.zeros(n, dtype=bool)
    scope_lines = lines.gradients_below[1] if optimizer_first.any() else np.zeros(0, dtype=np.int64)
    if scope_lines.size:
        rows = np.unique(scope_lines[optimizer_first[scope_lines]]).tolist()
        is_gradient_below[[i for i in rows if _below_gradients(paths[i]) is not None]] = True
    # Gradients packed for an all-reduce at the optimizer's root, and a collective's scratch: the one-name
    # rule on the rows of those op types under an optimizer's scope, and on first components.
    packed = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(op_flag(_GRADIENT_PACKING_OPS.__contains__) & optimizer_first).tolist()
    packed[[i for i in rows if _packed_gradients(_looked_through(paths[i]), distinct_ops[op_code[i]])]] = True
    # A variable's initializer run in the step, by the one-name rule on the rows with an `Initiali`
    # component after their first (found from the slashes).
    initialized = np.full(n, -1, dtype=np.int64)
    for i in lines.lines_with_component(_INITIALIZER[1:9].encode()).tolist():
        category = _initializer_category(_looked_through(paths[i]))
        initialized[i] = -1 if category is None else category
    return np.select(
        [is_input, is_plumbing, is_apply, is_gradient_below | packed, optimizer_first, scratch, updated_below,
         initialized >= 0, slot, gradient | is_check, is_variable, is_other],
        [INPUTS, OTHER, OPTIMIZER, GRADIENTS, OPTIMIZER, GRADIENTS, OPTIMIZER, initialized, OPTIMIZER, GRADIENTS,
         PARAMETERS, OTHER],
        default=ACTIVATIONS,
    ).astype(np.int64)


# --- one model numbered two ways ------------------------------------------------------------

# A path component as TensorFlow and Keras number names made again in one graph or process:
# `dense`, `dense_1`, `dense_2` (no leading zeros: `unet_01` is a name, not a number), and the
# gradient scope of such an op, numbered before its `_grad` (`Square_1_grad`).
_NUMBERED_RE = re.compile(r"^(.*?)(?:_([1-9][0-9]*))?(_grad)?$")


def _numbered(component: str) -> tuple[str, int]:
    """(base, number): `dense_2` -> ("dense", 2), `dense` -> ("dense", 0), `Square_1_grad` ->
    ("Square_grad", 1)."""
    match = _NUMBERED_RE.match(component)
    return match.group(1) + (match.group(3) or ""), int(match.group(2) or 0)


def sibling_renumbering(a_names: list[str], b_names: list[str]) -> dict[str, str]:
    """B's names of one scope renamed to A's where the two number the same things apart.

    A model built twice in one process (a notebook cell run again) or one graph is named
    anew: Keras numbers layers across the process (`dense`, `dense_1`, then `dense_2`,
    `dense_3`), TensorFlow scopes in the graph (`model`, then `model_1`). Names of one base
    are matched in the order of their numbers where both steps have as many of them and no
    number in common; any shared number means the names are the names, and stay.
    """
    by_base_a: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    by_base_b: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for names, by_base in ((a_names, by_base_a), (b_names, by_base_b)):
        for name in names:
            base, number = _numbered(name)
            by_base[base].append((number, name))
    renames = {}
    for base, b_side in by_base_b.items():
        a_side = by_base_a.get(base)
        if not a_side or len(a_side) != len(b_side):
            continue
        if {number for number, _ in a_side} & {number for number, _ in b_side}:
            continue
        renames.update((b_name, a_name) for (_, b_name), (_, a_name) in zip(sorted(b_side), sorted(a_side)))
    return renames


def renumbering(a_paths, b_paths, leaves_are_ops: bool = False) -> dict[str, str]:
    """B's paths (scope paths or layers) that A numbers otherwise -> A's (see `sibling_renumbering`).

    Scope by scope from the root: below a scope both have (B's once renamed), B's children
    are matched against A's (with `leaves_are_ops`, a scope tree's paths, only its scopes below
    a scope: ops there are named by the graph); a path's parents need not be listed. Paths are
    split at every "/" (an empty component included: `/x_1` is `x_1` under an unnamed scope).
    Empty where every path of B is one of A's.
    """
    a_set = set(a_paths)
    if a_set.issuperset(b_paths):
        return {}

    def children(paths) -> dict[tuple[str, ...], set[str]]:
        kids: dict[tuple[str, ...], set[str]] = collections.defaultdict(set)
        for path in paths:
            parts = tuple(path.split("/"))
            while parts:
                parent = parts[:-1]
                if parts[-1] in kids[parent]:
                    break  # its parents are in already
                kids[parent].add(parts[-1])
                parts = parent
        return kids

    kids_a, kids_b = children(a_set), children(b_paths)
    new: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}
    for parent in sorted(kids_b, key=len):  # parents first
        names = sorted(kids_b[parent])
        new_parent = new[parent]
        a_names, b_names = sorted(kids_a.get(new_parent, ())), names
        if leaves_are_ops and parent and parent[-1] and not parent[-1].startswith("("):
            # TensorFlow numbers ops within their scope, alike in a model built again: inside a
            # scope an op's name is the graph's own (a GAN's two train ops' `MatMul` and `MatMul_1`
            # are two ops). Only scopes may be numbered anew there (Keras numbers layers across a
            # process). The root's ops may be too (a loss built again), and so may those of an
            # unnamed scope or of one the tree groups root names in (`(feeds)/x_1`).
            b_names = [name for name in names if parent + (name,) in kids_b]
            a_names = [name for name in a_names if new_parent + (name,) in kids_a]
        renames = sibling_renumbering(a_names, b_names)
        for name in names:
            new[parent + (name,)] = new_parent + (renames.get(name, name),)
    renamed = {path: "/".join(new[tuple(path.split("/"))]) for path in b_paths}
    return {path: text for path, text in renamed.items() if text != path}
