"""Resident memory: the model's own tensors, from the run's GraphDef, split per layer.

The bytes in use before a step (`start_bytes`) are mostly the model: its
variables, the optimizer's slots (`<var>/Adam`, `<var>/Adam_1`, ...) and, in a
frozen inference graph, the weight constants. The trace cannot say which is
which (they were allocated before the step), the GraphDef can: every variable
carries its shape and dtype, and the optimizer's apply ops take each slot with
its variable. Read lazily (a full GraphDef parse) and only when
asked (docs/figures.md, "Resident memory").
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np
from tensorboard.compat.proto import graph_pb2, node_def_pb2

from .figures import ALLOCATED, OUTPUT, format_bytes
from .graph import graph_blobs
from .names import _SLOT_RE, computes_gradient, is_apply_op, label_inputs, layer_path, optimizer_scope, scope_of
from .scope_tree import SELF
from .trace import BFC_REGION_MIN, DEVICE_MEMORY, device_task, labels_of, parse_device, same_device

VARIABLE = "variable"
SLOT = "slot"  # optimizer state: slots of a variable, and the optimizer's own variables (beta1_power)
OPTIMIZER_ROW = "(optimizer)"  # the per-layer row of the optimizer's own variables outside any scope
CONSTANT = "constant"  # a frozen graph's weight, heuristically (see `_weight_constants`)

_VARIABLE_OPS = frozenset({"VariableV2", "Variable", "VarHandleOp", "AutoReloadVariable"})
# Bytes per element by DataType enum value (types.proto); ref types are these + 100.
_DTYPE = {
    1: ("float32", 4), 2: ("float64", 8), 3: ("int32", 4), 4: ("uint8", 1), 5: ("int16", 2), 6: ("int8", 1),
    8: ("complex64", 8), 9: ("int64", 8), 10: ("bool", 1), 11: ("qint8", 1), 12: ("quint8", 1),
    13: ("qint32", 4), 14: ("bfloat16", 2), 15: ("qint16", 2), 16: ("quint16", 2), 17: ("uint16", 2),
    18: ("complex128", 16), 19: ("float16", 2), 22: ("uint32", 4), 23: ("uint64", 8),
}
_FLOATS = frozenset({1, 2, 14, 19})
# Slots that Keras optimizers (v2) name `<optimizer>/<var>/<slot>`.
_KERAS_SLOTS = frozenset({"m", "v", "vhat", "momentum", "rms", "mg", "accumulator", "accumulators",
                          "linear", "delta_accumulator", "velocity", "average_gradient"})
# Ops that pass a tensor through unchanged: a weight reaches its op through them (`weights/read`).
_PASS_THROUGH = frozenset({"Identity", "ReadVariableOp", "Enter", "Switch", "Cast", "Snapshot"})
# Ops whose weight inputs make a float Const a parameter of a frozen graph: input index -> which.
_WEIGHT_INPUTS = {
    "Conv2D": (1,), "Conv3D": (1,), "DepthwiseConv2dNative": (1,), "Conv2DBackpropInput": (1,),
    "Conv3DBackpropInputV2": (1,), "_FusedConv2D": (1, 2), "_FusedDepthwiseConv2dNative": (1, 2),
    "MatMul": (1,), "_FusedMatMul": (1, 2), "BatchMatMul": (1,), "BatchMatMulV2": (1,), "BatchMatMulV3": (1,),
    "BiasAdd": (1,), "BiasAddV1": (1,),
    "FusedBatchNorm": (1, 2, 3, 4), "FusedBatchNormV2": (1, 2, 3, 4), "FusedBatchNormV3": (1, 2, 3, 4),
}
CONV_OPS = frozenset({"Conv2D", "Conv3D", "_FusedConv2D", "DepthwiseConv2dNative"})


def dtype_name(dtype: int) -> str:
    return _DTYPE.get(dtype % 100, (f"dtype_{dtype}", 0))[0]


def dtype_size(dtype: int) -> int:
    """Bytes per element (0 when unknown: strings, resources, variants)."""
    return _DTYPE.get(dtype % 100, ("", 0))[1]


@dataclass(frozen=True)
class ModelTensor:
    """One resident tensor of the model: a variable, an optimizer slot, or a frozen weight."""

    name: str  # its GraphDef node
    kind: str  # VARIABLE, SLOT, CONSTANT
    owner: str | None  # a slot's variable
    dtype: str
    shape: tuple[int, ...] | None  # None: unknown rank or dimension
    count: int | None  # elements (None when the shape is not fully known)
    bytes: int | None
    device: str  # as the GraphDef requests it ("" when unplaced)

    @property
    def layer(self) -> str:
        """The layer it counts toward: the name scope of the variable (a slot's variable's); a variable
        outside any scope is its own row, but for the optimizer's own (`beta1_power`, `global_step`), which
        share one, `(optimizer)`: no layer of the model (two trials read them as layers of 0 parameters)."""
        scope = scope_of(self.owner or self.name)
        if not scope and self.kind == SLOT and self.owner is None:
            return OPTIMIZER_ROW
        return scope or (self.owner or self.name)

    def path(self, group: str) -> str:
        """Where it sits in a scope tree: a slot under its variable when grouping by layer."""
        if group == "layer":
            if self.owner is not None:
                return f"{layer_path(self.owner)}/{self.name.rsplit('/', 1)[-1]}"
            return layer_path(self.name)
        return self.name


@dataclass(frozen=True)
class GraphConstant:
    """A Const node: what it costs the GraphDef and memory."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    tensor_bytes: int  # the tensor it makes (elements x dtype size)
    serialized_bytes: int  # what the NodeDef takes in the GraphDef


@dataclass(frozen=True)
class ConvNode:
    """A convolution's attributes, for the im2col estimate."""

    name: str
    op: str
    filter_shape: tuple[int, ...] | None  # HWIO (DHWIO for Conv3D), from the weight it reads
    dtype_size: int
    positions: int | None  # batch x out_h x out_w (x out_d) when the GraphDef gives the shapes
    fused_into: tuple[str, ...] = ()  # the BiasAdd and activation after it: grappler's remapper runs them
    # as one op under the last one's name, so the trace may show the conv's output there


@dataclass(frozen=True)
class InitialValue:
    """A constant that variables are assigned as their initial value (a slot's zeros or ones, Adagrad's
    initial accumulator, a bias's zeros), once per value: grappler folds a `Fill` into a constant and
    merges equal ones (Adam's two slots of a weight read one), and the Const nodes of the graph are
    constants already. A TF1 session keeps it for its initializer's run, and each variable shares its
    buffer until its first update copies it: from then on both are in use, for the session's life."""

    node: str  # the Const or Fill node (the first, where several are alike)
    variables: tuple[str, ...]
    bytes: int


@dataclass
class Model:
    """What the GraphDef says about the model's resident tensors, constants and convolutions."""

    tensors: list[ModelTensor]
    constants: list[GraphConstant]  # every Const holding at least one element, largest first
    convs: dict[str, ConvNode]
    graph_bytes: int
    weight_constants_used: bool = False  # parameters came from Const nodes (a frozen graph)
    note: str | None = None  # what the tensors may miss, where the source says (keras_model.py)
    initial_values: list[InitialValue] = field(default_factory=list)  # the model's variables' own

    @classmethod
    def from_nodes(cls, graph_nodes: Sequence, graph_bytes: int) -> "Model":
        """From NodeDefs: every variable, Const and placeholder, and, where they matter, the
        ops that read weights, pass them through, or follow a convolution."""
        nodes = {node.name: node for node in graph_nodes}
        variables = [node for node in graph_nodes if node.op in _VARIABLE_OPS]
        by_name = {node.name: node for node in variables}
        applied = _applied_slots(graph_nodes, by_name)
        accumulators = _gradient_accumulators(graph_nodes, by_name, applied[1])
        tensors = [_variable_tensor(node, by_name, applied, accumulators) for node in variables]
        # A graph with variables keeps its weights in them: only a frozen one's are Consts.
        weights = [] if variables else _weight_constants(graph_nodes, nodes)
        tensors += [_constant_tensor(nodes[name]) for name in weights]
        constants = [_graph_constant(node) for node in graph_nodes if node.op == "Const"]
        constants.sort(key=lambda c: (-c.serialized_bytes, c.name))
        consumers: dict[str, list[str]] = {}
        for node in graph_nodes:
            if node.input:
                consumers.setdefault(node.input[0].split(":", 1)[0], []).append(node.name)
        convs = {node.name: _conv_node(node, nodes, consumers) for node in graph_nodes if node.op in CONV_OPS}
        return cls(tensors, constants, convs, graph_bytes, bool(weights),
                   initial_values=_initial_values(graph_nodes, nodes, by_name))

    @classmethod
    def from_bytes(cls, data: bytes, names: Sequence[str] | None = None, ops: Sequence[str] | None = None
                   ) -> "Model":
        """Parses only the nodes `from_nodes` looks at, picked by op type (`names`/`ops`: the
        graph's, when the caller has read them already): a deep model's GraphDef has
        100k+ nodes, most of them gradients it never needs."""
        if ops is None:
            graph_def = graph_pb2.GraphDef.FromString(data)
            return cls.from_nodes(list(graph_def.node), len(data))
        present = set(ops)
        wanted = set(_VARIABLE_OPS) | {"Const", "Placeholder", "PlaceholderWithDefault"} | CONV_OPS
        wanted |= {op for op in present if is_apply_op(op)}  # which variables are slots
        wanted |= _ASSIGN_ADD_OPS & present  # which accumulate gradients
        wanted |= (_ASSIGN_OPS | {"Fill"}) & present  # the variables' initial values
        if not present & set(_VARIABLE_OPS):  # frozen: weights are Consts read by these ops
            wanted |= set(_WEIGHT_INPUTS) | _PASS_THROUGH
        if present & CONV_OPS:  # a conv's filter, and the ops fused after it
            wanted |= _PASS_THROUGH | _FUSED_AFTER_CONV
        blobs = graph_blobs(data)
        wanted_at = itertools.compress(range(len(ops)), map(wanted.__contains__, ops))
        picked = [node_def_pb2.NodeDef.FromString(blobs[i]) for i in wanted_at]
        return cls.from_nodes(picked, len(data))

    @cached_property
    def parameter_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tensors if t.kind != SLOT)

    def index(self, group: str, tensors: Sequence[ModelTensor] | None = None) -> "ResidentIndex":
        return ResidentIndex(self.tensors if tensors is None else tensors, group)


def _shape(proto) -> tuple[int, ...] | None:
    if proto.unknown_rank or any(dim.size < 0 for dim in proto.dim):
        return None
    return tuple(int(dim.size) for dim in proto.dim)


def _sized(dtype: int, shape: tuple[int, ...] | None) -> tuple[int | None, int | None]:
    if shape is None:
        return None, None
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    size = dtype_size(dtype)
    return count, (count * size if size else None)


def slot_owner(name: str, variables: set[str] | frozenset[str]) -> str | None:
    """The variable a slot variable belongs to, by the optimizers' naming; None if not a slot.

    `<var>/Adam`, `<var>/Adam_1`, `<var>/Momentum` (tf.compat.v1 optimizers);
    `[training/]Adam/<var>/m` (Keras optimizers); `<var>/ExponentialMovingAverage` (a moving
    average's shadow). Under the scope the optimizer was made in: `_scoped_slot_owner`.
    """
    head, _, leaf = name.rpartition("/")
    if head in variables and _SLOT_RE.match(leaf):
        return head
    if leaf in _KERAS_SLOTS or leaf.rstrip("0123456789_") in _KERAS_SLOTS:
        parts = head.split("/")
        while parts and optimizer_scope(parts[0]):
            parts.pop(0)
            candidate = "/".join(parts)
            if candidate in variables:
                return candidate
    return None


def _applied_slots(graph_nodes, variables: dict) -> tuple[dict[str, str], frozenset[str]]:
    """Slots as the optimizers' apply ops show them, whatever the optimizer's name (TF names a
    slot `<var>/<optimizer name>`: `w/adagrad` for `AdagradOptimizer(name="adagrad")`): the
    op's first input is the variable it trains, any other input that is a variable of the
    same shape and dtype is a slot of it. Returns {slot: variable} and the trained variables,
    parameters whatever their names (`a/Momentum` trained by Adagrad)."""
    slots: dict[str, str] = {}
    trained = set()
    for node in graph_nodes:
        if not is_apply_op(node.op) or not node.input:
            continue
        primary = variables.get(node.input[0].split(":", 1)[0])
        if primary is None:
            continue
        trained.add(primary.name)
        for name in node.input[1:]:  # ref or resource inputs name the variable itself; reads do not
            slot = variables.get(name.split(":", 1)[0])
            if slot is not None and slot is not primary and _same_tensor(slot, primary):
                slots[slot.name] = primary.name
    return slots, frozenset(trained)


_ASSIGN_ADD_OPS = frozenset({"AssignAdd", "AssignAddVariableOp"})


def _scoped_slot_owner(node, variables: dict) -> str | None:
    """The variable of a slot named under the scope the optimizer was made in (`train/<var>/Adam`:
    `minimize` inside `variable_scope("train")`), of that variable's shape and dtype; None if none."""
    head, _, leaf = node.name.rpartition("/")
    if not _SLOT_RE.match(leaf):
        return None
    parts = head.split("/")
    for k in range(1, len(parts)):
        candidate = variables.get("/".join(parts[k:]))
        if candidate is not None and _same_tensor(candidate, node):
            return candidate.name
    return None


def _gradient_accumulators(graph_nodes, variables: dict, trained: frozenset[str]) -> dict[str, str | None]:
    """Variables no apply op trains that an AssignAdd adds a gradient into (gradients accumulated
    over micro-batches, then applied): {accumulator: the trained variable whose gradient it holds,
    where one alone has its shape and dtype, or the gradient's layer tells which; else None}."""
    found: dict[str, str | None] = {}
    by_tensor: dict[tuple, list[str]] = {}  # trained variables by dtype and shape (and scope), made once
    for node in graph_nodes:
        if node.op not in _ASSIGN_ADD_OPS or len(node.input) < 2:
            continue
        target = variables.get(node.input[0].lstrip("^").split(":", 1)[0])
        value = node.input[1].lstrip("^").split(":", 1)[0]
        # Of a known shape with elements (a scalar running sum, a step count, is no gradient's).
        if target is None or target.name in trained or not _tensor_key(target)[1] or not computes_gradient(value):
            continue
        if not by_tensor:
            for name in sorted(trained):
                key = _tensor_key(variables[name])
                by_tensor.setdefault(key, []).append(name)
                by_tensor.setdefault((key, scope_of(name)), []).append(name)
        key = _tensor_key(target)
        alike = by_tensor.get(key, [])
        if len(alike) > 1:  # the one in the layer the gradient was taken in (its scope, or one above it)
            parts = layer_path(value).split("/")
            scoped = (by_tensor.get((key, "/".join(parts[:k])), []) for k in range(len(parts) - 1, 0, -1))
            alike = next((names for names in scoped if names), alike)
        found[target.name] = alike[0] if len(alike) == 1 else None
    return found


def _tensor_key(node) -> tuple:
    """(dtype, shape) as `_same_tensor` compares them; the shape None or () where unknown or scalar."""
    return node.attr["dtype"].type % 100, _shape(node.attr["shape"].shape)


def _same_tensor(a, b) -> bool:
    return _tensor_key(a) == _tensor_key(b)


def _is_optimizer_variable(name: str) -> bool:
    """The optimizer's own variables: `beta1_power` (also under the scope Adam was made in,
    `train/beta1_power`), `Adam/iterations`, `training/Adam/iter`, and the step counter
    `minimize(global_step=...)` counts (`global_step`, as Keras' `iterations`: no parameter)."""
    return optimizer_scope(name.partition("/")[0]) or _OWN_VARIABLE_RE.match(name.rpartition("/")[2]) is not None


# tf.compat.v1 Adam's own variables, and the training step counter (tf.compat.v1.train.get_or_create_global_step).
_OWN_VARIABLE_RE = re.compile(r"^(?:beta[12]_power(?:_\d+)?|global_step)$")


def _variable_tensor(node, variables: dict, applied: tuple[dict[str, str], frozenset[str]],
                     accumulators: dict[str, str | None]) -> ModelTensor:
    """A variable, as the apply ops show it (`_applied_slots`), else by its name (`slot_owner`):
    a graph whose apply ops are not in its GraphDef (a function's body) has only names. A
    variable named below another of its known shape and dtype (`<var>/adam_m`, `<var>/adam_v`:
    BERT's AdamWeightDecayOptimizer, which updates them with assigns, no apply op) is its slot
    too."""
    dtype = node.attr["dtype"].type
    shape = _shape(node.attr["shape"].shape)
    count, nbytes = _sized(dtype, shape)
    slots, trained = applied
    if node.name in trained:
        owner, kind = None, VARIABLE
    else:
        head = node.name.rpartition("/")[0]
        # Of a known shape with elements (two of unknown shape, or scalars, tell nothing), and
        # below a variable that is no slot by name itself.
        below = (head if shape and head in variables and _same_tensor(node, variables[head])
                 and slot_owner(head, variables) is None else None)
        # Gradients accumulated for the optimizer are its state, beside their variable where one tells.
        owner = (accumulators.get(node.name) or slots.get(node.name) or slot_owner(node.name, variables)
                 or _scoped_slot_owner(node, variables) or below)
        kind = SLOT if owner is not None or node.name in accumulators or _is_optimizer_variable(node.name) else VARIABLE
    return ModelTensor(node.name, kind, owner, dtype_name(dtype), shape, count, nbytes, node.device)


_ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp"})


def _initial_values(graph_nodes, nodes: dict, variables: dict) -> list[InitialValue]:
    """The constants the model's variables are assigned (`InitialValue`), once per value: a Const's
    dtype, shape and tensor, a Fill's dtype, shape and fill value. Variables of no known size, and
    values from other ops (a random initializer), none."""
    found: dict[tuple, tuple[str, dict, int]] = {}
    for node in graph_nodes:
        if node.op not in _ASSIGN_OPS or len(node.input) < 2:
            continue
        target = node.input[0].lstrip("^").split(":", 1)[0]
        value = nodes.get(node.input[1].lstrip("^").split(":", 1)[0])
        if target not in variables or value is None:
            continue
        keyed = _constant_value(value, nodes)
        if keyed is None or not keyed[1]:
            continue
        # The variables in order, once each (a dict: thousands of biases or slots may share one value).
        found.setdefault(keyed[0], (value.name, {}, keyed[1]))[1][target] = None
    return [InitialValue(name, tuple(targets), nbytes) for name, targets, nbytes in found.values()]


_HASHED_CONTENT = 1 << 20  # a Const's tensor up to this size is told apart by its bytes; a bigger one by its node


def _constant_value(node, nodes: dict) -> tuple[tuple, int] | None:
    """(what tells the value apart, its bytes) of a Const, or of a Fill of a constant shape and value."""
    if node.op == "Const":
        tensor = node.attr["value"].tensor
        shape = _shape(tensor.tensor_shape)
        nbytes = _sized(tensor.dtype, shape)[1]
        if not nbytes:
            return None
        # A splat (Adagrad's 0.1: one value for all) or a small tensor by its bytes; a big one (an embedding
        # given as a numpy array) by its node, rather than copying and hashing it.
        small = tensor.ByteSize() <= _HASHED_CONTENT
        value = tensor.SerializeToString(deterministic=True) if small else node.name
        return ("Const", tensor.dtype, shape, value), nbytes
    if node.op != "Fill" or len(node.input) < 2:
        return None
    shape_node, fill = (nodes.get(name.lstrip("^").split(":", 1)[0]) for name in node.input[:2])
    if shape_node is None or fill is None or shape_node.op != "Const" or fill.op != "Const":
        return None
    dims = _int_values(shape_node.attr["value"].tensor)
    if dims is None or any(d < 0 for d in dims):
        return None
    dtype = node.attr["T"].type
    nbytes = _sized(dtype, tuple(dims))[1]
    fill_value = fill.attr["value"].tensor.SerializeToString(deterministic=True)
    return (("Fill", dtype, tuple(dims), fill_value), nbytes) if nbytes else None


def _int_values(tensor) -> list[int] | None:
    """An int32 or int64 TensorProto's values (a shape), as TensorFlow writes them: in `tensor_content`, or
    one per element in `int_val`/`int64_val` (one for all, where the shape says more)."""
    width = {3: np.int32, 9: np.int64}.get(tensor.dtype)
    if width is None:
        return None
    shape = _shape(tensor.tensor_shape)
    count = int(np.prod(shape)) if shape is not None else None
    if tensor.tensor_content:
        values = np.frombuffer(tensor.tensor_content, dtype=width).tolist()
    else:
        values = list(tensor.int_val if tensor.dtype == 3 else tensor.int64_val)
        if count is not None and len(values) == 1 and count > 1:
            values *= count
    return values if count is None or len(values) == count else None


def _constant_tensor(node) -> ModelTensor:
    tensor = node.attr["value"].tensor
    shape = _shape(tensor.tensor_shape)
    count, nbytes = _sized(tensor.dtype, shape)
    return ModelTensor(node.name, CONSTANT, None, dtype_name(tensor.dtype), shape, count, nbytes, node.device)


def _graph_constant(node) -> GraphConstant:
    tensor = node.attr["value"].tensor
    shape = _shape(tensor.tensor_shape) or ()
    count, nbytes = _sized(tensor.dtype, shape)
    return GraphConstant(node.name, dtype_name(tensor.dtype), shape, nbytes or 0, node.ByteSize())


def _source(name: str, nodes: dict) -> object | None:
    """The node an input comes from, through pass-through ops (`weights/read`, `ReadVariableOp`)."""
    seen = 0
    node = nodes.get(name.lstrip("^").split(":", 1)[0])
    while node is not None and node.op in _PASS_THROUGH and node.input and seen < 16:
        node = nodes.get(node.input[0].lstrip("^").split(":", 1)[0])
        seen += 1
    return node


def _weight_constants(graph_nodes, nodes: dict) -> list[str]:
    """A frozen graph's weights: float Consts of rank >= 1 feeding a weight input of a
    conv, matmul, bias or batch-norm op (directly or through Identity). A heuristic:
    a Const elsewhere (shapes, data) is not a parameter."""
    found: dict[str, None] = {}
    for node in graph_nodes:
        for index in _WEIGHT_INPUTS.get(node.op, ()):
            if index >= len(node.input):
                continue
            source = _source(node.input[index], nodes)
            if source is None or source.op != "Const":
                continue
            tensor = source.attr["value"].tensor
            dims = tensor.tensor_shape.dim
            if tensor.dtype in _FLOATS and len(dims) >= 1 and all(dim.size > 0 for dim in dims):
                found[source.name] = None
    return list(found)


_FUSED_STAGES = (("BiasAdd", "BiasAddV1", "Add", "AddV2"), ("Relu", "Relu6", "Elu", "LeakyRelu", "Selu", "Tanh", "Sigmoid"))
_FUSED_AFTER_CONV = frozenset(op for stage in _FUSED_STAGES for op in stage)


def _conv_node(node, nodes: dict, consumers: dict[str, list[str]]) -> ConvNode:
    source = _source(node.input[1], nodes) if len(node.input) > 1 else None
    shape, size = None, 0
    if source is not None and source.op in _VARIABLE_OPS:
        shape, size = _shape(source.attr["shape"].shape), dtype_size(source.attr["dtype"].type)
    elif source is not None and source.op == "Const":
        tensor = source.attr["value"].tensor
        shape, size = _shape(tensor.tensor_shape), dtype_size(tensor.dtype)
    fused, at = [], node.name
    for expected in _FUSED_STAGES:
        after = [nodes[c] for c in consumers.get(at, ()) if c in nodes and nodes[c].op in expected]
        if len(after) != 1:
            break
        at = after[0].name
        fused.append(at)
    return ConvNode(node.name, node.op, shape, size, _output_positions(node, nodes, shape), tuple(fused))


def _output_positions(node, nodes: dict, filter_shape) -> int | None:
    """batch x out_h x out_w (x out_d): from `_output_shapes` (add_shapes=True), else from a fully known
    input shape (a placeholder's) with the conv's strides, padding and dilations."""
    channels_first = node.attr["data_format"].s.decode("ascii", "replace").startswith("NC")
    listed = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else ()
    if listed and _shape(listed[0]):
        dims = _shape(listed[0])
        return int(np.prod(dims)) // dims[1 if channels_first else -1]
    source = _source(node.input[0], nodes) if node.input else None
    if source is None or filter_shape is None or source.op not in ("Placeholder", "PlaceholderWithDefault"):
        return None
    dims = _shape(source.attr["shape"].shape)
    if dims is None:
        return None
    spatial = dims[2:] if channels_first else dims[1:-1]
    strides = list(node.attr["strides"].list.i) or [1] * len(dims)
    dilations = list(node.attr["dilations"].list.i) or [1] * len(dims)
    strides = strides[2:] if channels_first else strides[1:-1]
    dilations = dilations[2:] if channels_first else dilations[1:-1]
    padding = node.attr["padding"].s.decode("ascii", "replace")
    positions = dims[0]
    for size, kernel, stride, dilation in zip(spatial, filter_shape, strides, dilations):
        span = (kernel - 1) * dilation + 1
        out = -(-size // stride) if padding == "SAME" else -(-(size - span + 1) // stride)
        positions *= max(out, 0)
    return positions


# -- sums over scope paths ----------------------------------------------------------------


_SLASH_KEY = "\x01"  # "/" in sort keys: a scope's paths then sort together, right after it


class ResidentIndex:
    """Parameter count, parameter bytes and slot bytes under any scope path of one grouping.

    Sums by path: a scope counts the tensors whose path is the scope or lies under
    it, whether or not the trace ran their nodes; `<scope>/(self)` counts the one
    named exactly `<scope>`.
    """

    def __init__(self, tensors: Iterable[ModelTensor], group: str) -> None:
        # By key only: tensors may share a path (another replica's variables grouped by layer), and are not ordered.
        rows = sorted(((t.path(group).replace("/", _SLASH_KEY), t) for t in tensors), key=lambda row: row[0])
        self.keys = np.array([key for key, _ in rows], dtype=str) if rows else np.zeros(0, dtype="<U1")
        params = [t for _, t in rows]
        count = np.array([(t.count or 0) if t.kind != SLOT else 0 for t in params], dtype=np.int64)
        param_bytes = np.array([(t.bytes or 0) if t.kind != SLOT else 0 for t in params], dtype=np.int64)
        slot_bytes = np.array([(t.bytes or 0) if t.kind == SLOT else 0 for t in params], dtype=np.int64)
        self._running = np.zeros((len(params) + 1, 3), dtype=np.int64)
        if params:
            np.cumsum(np.stack([count, param_bytes, slot_bytes], axis=1), axis=0, out=self._running[1:])

    def sums(self, paths: Sequence[str]) -> np.ndarray:
        """(len(paths), 3): param_count, param_bytes, slot_bytes under each path ("" is everything)."""
        if not paths:
            return np.zeros((0, 3), dtype=np.int64)
        exact = np.array([p.endswith("/" + SELF) for p in paths])
        keys = np.array([(p[: -len(SELF) - 1] if e else p).replace("/", _SLASH_KEY) for p, e in zip(paths, exact)],
                        dtype=str)
        low = np.searchsorted(self.keys, keys, side="left")
        high = np.where(exact, np.searchsorted(self.keys, keys, side="right"),
                        np.searchsorted(self.keys, np.char.add(keys, "\x02"), side="left"))
        root = keys == ""
        low[root], high[root] = 0, self.keys.size
        return self._running[high] - self._running[low]


# -- one memory space's share ---------------------------------------------------------------


def home_space(tensor: ModelTensor, step) -> str | None:
    """The memory space a tensor lives in: its device's main allocator, else the step's default space."""
    task = device_task(tensor.device) if tensor.device else None
    if tensor.device and parse_device(tensor.device) is not None:
        candidates = [s for s in step.spaces if same_device(tensor.device, s.trace.device)]
    elif task is not None:  # `/job:ps/task:0` (replica_device_setter): that task's devices, its CPU first
        on_task = [s for s in step.spaces if device_task(s.trace.device) == task]
        candidates = [s for s in on_task if s.trace.device_type == "CPU"] or on_task
    else:
        candidates = []
    if candidates:  # the device's own memory rather than its pinned host memory
        own = [s for s in candidates if s.trace.device_type == "CPU" or s.trace.memory_kind == DEVICE_MEMORY] or candidates
        return max(own, key=lambda s: int(s.trace.allocated.sum()) + int(s.trace.output.sum())).trace.id
    return step.default_space_id


NO_MODEL_NOTE = ("parameters and optimizer slots are not counted by layer for this run: they are sized from its "
                 "GraphDef (TF1: FileWriter.add_graph) or from the Keras model config that keras.callbacks.TensorBoard "
                 "writes (write_graph=True, for a functional or Sequential model, not a subclassed one), and the run "
                 "has neither")
OTHER_BELOW_ZERO_NOTE = ("the graph's tensors exceed the bytes in use before the step: some live elsewhere, "
                         "were not allocated yet, or the start (read from the allocator's readings) reads low")


def other_note(resident: "Resident") -> str | None:
    """What to read `other` with: where the graph's tensors exceed the start, that; where the constants
    the variables start from (`InitialValue`) come to most of it, that they may be held (trial N: a TF1
    session's 8192-wide Dense layer under Momentum held 256.5 MiB before every step that no parameter,
    slot or feed explained: its slot's zeros, folded into a constant the session keeps)."""
    other = resident.other_bytes
    if other is None:
        return None
    if other < 0:
        return OTHER_BELOW_ZERO_NOTE
    notes = [note for note in (_constants_note(resident, other), _blocks_note(resident, other)) if note]
    return "; ".join(notes) or None


def _constants_note(resident: "Resident", other: int) -> str | None:
    """The constants the variables start from (`InitialValue`), where they come to most of other."""
    least = resident.counts_from
    values = [value for value in resident.initial_values if value.bytes >= least]
    held = sum(value.bytes for value in values)
    if not held or other < 0.9 * held:
        return None
    values.sort(key=lambda value: -value.bytes)
    shown = ", ".join(f"{value.node} ({format_bytes(value.bytes)})" for value in values[:3])
    more = f" and {len(values) - 3} more" if len(values) > 3 else ""
    return (f"{'other' if other < 1.1 * held else 'of other, ' + format_bytes(held)} may be the constants the "
            f"model's variables were initialized from{f' ({format_bytes(held)})' if other < 1.1 * held else ''}: "
            f"{shown}{more}. A TF1 session keeps each for its initializer's run, and a variable's first update "
            "copies it away from it: both stay in use for the session's life. Grappler folds zeros and ones (an "
            "optimizer slot's, a bias's) into such constants, and so does the session's own graph optimizer "
            "under 10 MiB: with both off (GraphOptions(rewrite_options=RewriterConfig(constant_folding=OFF), "
            "optimizer_options=OptimizerOptions(opt_level=L0)) in the session's ConfigProto) they are freed "
            "once copied; a Const of the graph (Adagrad's initial accumulator) stays")


_HUGE_TENSOR = 64 << 20
# Allocators that grow their pool by doubling regions: oneDNN's mklcpu and the CPU's BFC
# (TF_CPU_ALLOCATOR_USE_BFC). A GPU's BFC takes its memory in one region unless told to grow (allow_growth),
# which the trace does not say: its blocks are not read as powers of two.
_GROWING_BFC = frozenset({"mklcpu", "bfc_cpu_allocator_for_gpu"})
_BFC_MAX_ROOM = 128 << 20  # BFC splits a block whose room would be this or more (kMaxInternalFragmentation)


def _blocks_note(resident: "Resident", other: int) -> str | None:
    """Where the allocator hands out blocks (a BFC allocator's: `Resident.in_blocks`), the model's huge tensors
    (`_HUGE_TENSOR` or more: larger than the regions a pool grew by before them, so each takes a fresh one,
    a power of two) held with room to spare: that room is in use too, and counts as other, where it comes to
    a quarter of it or more (trial AA's 457.8 MiB embedding in a 512 MiB block: 54.2 MiB of other that
    nothing named). A smaller tensor shares a region with others: its room is not known."""
    if not resident.in_blocks or other < BFC_REGION_MIN:
        return None
    rounded = []
    held = [(tensor.name, tensor.bytes or 0) for tensor in resident.tensors]
    held += [(value.node, value.bytes) for value in resident.initial_values]  # held too (_constants_note)
    for name, size in held:
        if size >= _HUGE_TENSOR:
            block = 1 << (size - 1).bit_length()
            # Kept whole only under BFC's split rule: room under the request and under 128 MiB (a 300 MiB
            # tensor's 512 MiB block is split, its 212 MiB of room free again).
            if BFC_REGION_MIN // 2 <= block - size < _BFC_MAX_ROOM:  # room worth a word (a 2 MiB region's half)
                rounded.append((block - size, block, name, size))
    room = sum(extra for extra, *_ in rounded)
    if not rounded or room > 1.1 * other or room < 0.25 * other:
        return None
    rounded.sort(key=lambda item: -item[0])
    shown = ", ".join(f"{name} ({format_bytes(size)}) in {format_bytes(block)}" for _, block, name, size in rounded[:3])
    more = f" and {len(rounded) - 3} more" if len(rounded) > 3 else ""
    return (f"{'other' if room >= 0.9 * other else 'of other, ' + format_bytes(room)} may be the allocator's "
            f"rounding of the model's largest tensors, each in a block of a power of two: {shown}{more} "
            f"({format_bytes(room)} of room in them). A BFC allocator that grows its pool by regions that double "
            "gives a tensor larger than the regions before it a fresh one, and keeps it whole where the room left is "
            "under the request and under 128 MiB: a tensor just over a power of two costs nearly twice its size, "
            "one just under it little")


def counted_note(resident: "Resident") -> str | None:
    """What `other_bytes` is read against where the start leaves small tensors out (None: it counts all)."""
    if not resident.counts_from or resident.start_bytes is None:
        return None
    params, slots, fed = resident.in_start()
    return (f"the start counts only the allocator's requests of {format_bytes(resident.counts_from)} and more, so "
            f"other is read against the model's tensors of that size: parameters {format_bytes(params)}, optimizer "
            f"slots {format_bytes(slots)}, inputs {format_bytes(fed)}")


# The model's smaller tensors that the start leaves out are said beside the peak where they move it by this
# share or more: under it (32 KiB on 260 MiB) the line would say nothing a user sizes a step by.
UNCOUNTED_NOTICEABLE_SHARE = 0.005


@dataclass
class Resident:
    """The model's tensors living in one memory space, against the bytes in use before the step."""

    tensors: list[ModelTensor]
    start_bytes: int | None  # the allocator's bytes in use before the step (None: no baseline)
    weight_constants_used: bool
    _indexes: dict = field(default_factory=dict, repr=False)
    note: str | None = None  # what the tensors may miss (Model.note)
    fed: int = 0  # the step's feeds, made before it (fed_before_step)
    # The smallest tensor the start counts (the allocator's readings: oneDNN's mklcpu counts its requests of
    # 256 KiB and more: SpaceAnalysis.start_counts_from), and the feeds of that size or more; 0 and `fed`: all.
    counts_from: int = 0
    fed_counted: int | None = None
    initial_values: list[InitialValue] = field(default_factory=list)  # the constants its variables start from
    in_blocks: bool = False  # the allocator hands out blocks of its regions (a BFC allocator: `_blocks_note`)

    @property
    def param_count(self) -> int:
        return sum(t.count or 0 for t in self.tensors if t.kind != SLOT)

    @property
    def param_bytes(self) -> int:
        return sum(t.bytes or 0 for t in self.tensors if t.kind != SLOT)

    @property
    def slot_bytes(self) -> int:
        return sum(t.bytes or 0 for t in self.tensors if t.kind == SLOT)

    @property
    def fed_bytes(self) -> int:
        """The step's feeds in use before it, those the start counts at most what the model's tensors it
        counts leave of it where they leave any (the allocator's reading may round a few bytes off it)."""
        counted = self.fed if self.fed_counted is None else self.fed_counted
        return self.fed - counted + self.in_start()[2]

    def in_start(self) -> tuple[int, int, int]:
        """(parameters, optimizer slots, feeds) bytes the start counts: all of them, but where the
        allocator's readings leave small requests out (`counts_from`), the tensors of that size and more;
        the feeds at most what the other two leave of the start, where they leave any."""
        least = self.counts_from
        counted = [t for t in self.tensors if (t.bytes or 0) >= least] if least else self.tensors
        params = sum(t.bytes or 0 for t in counted if t.kind != SLOT)
        slots = sum(t.bytes or 0 for t in counted if t.kind == SLOT)
        fed = self.fed if self.fed_counted is None else self.fed_counted
        left = None if self.start_bytes is None else self.start_bytes - params - slots
        return params, slots, fed if left is None or left < 0 else min(fed, left)

    @property
    def uncounted_bytes(self) -> int | None:
        """The model's tensors and the step's feeds in use before the step that the start does not count:
        those under `counts_from` (oneDNN's mklcpu hands them to malloc, and none of its readings holds
        them), so the peak leaves them out too. None where the start counts every request, or there is
        no start."""
        if not self.counts_from or self.start_bytes is None:
            return None
        return self.param_bytes + self.slot_bytes + self.fed_bytes - sum(self.in_start())

    def peak_with_uncounted(self, peak_bytes: int | None) -> int | None:
        """An absolute peak with `uncounted_bytes` added (None without either)."""
        uncounted = self.uncounted_bytes
        return None if uncounted is None or peak_bytes is None else peak_bytes + uncounted

    def uncounted_noticeable(self, peak_bytes: int | None) -> bool:
        """Whether `uncounted_bytes` move a peak of `peak_bytes` by `UNCOUNTED_NOTICEABLE_SHARE` or more, where the
        CLI and the page say the peak with them."""
        uncounted = self.uncounted_bytes
        return (peak_bytes is not None and bool(uncounted)
                and uncounted >= UNCOUNTED_NOTICEABLE_SHARE * max(peak_bytes, 1))

    @property
    def other_bytes(self) -> int | None:
        """Bytes in use before the step that the model's tensors and the step's feeds do not explain
        (negative when the GraphDef's tensors exceed them: some live elsewhere, or were not yet
        allocated), of those the start counts (`in_start`)."""
        if self.start_bytes is None:
            return None
        return self.start_bytes - sum(self.in_start())

    def index(self, group: str) -> ResidentIndex:
        if group not in self._indexes:
            self._indexes[group] = ResidentIndex(self.tensors, group)
        return self._indexes[group]

    def layers(self) -> list[dict]:
        """Keras `summary()`-like rows, one per layer (the scope holding the variables), in graph order."""
        rows: dict[str, dict] = {}
        for t in self.tensors:
            row = rows.setdefault(t.layer, {"scope": t.layer, "param_count": 0, "param_bytes": 0, "slot_bytes": 0,
                                            "tensors": []})
            if t.kind == SLOT:
                row["slot_bytes"] += t.bytes or 0
            else:
                row["param_count"] += t.count or 0
                row["param_bytes"] += t.bytes or 0
            row["tensors"].append({"name": t.name, "kind": t.kind, "dtype": t.dtype,
                                   "shape": None if t.shape is None else list(t.shape), "count": t.count,
                                   "bytes": t.bytes})
        return list(rows.values())


def resident_of_space(model: Model, step, space) -> Resident:
    """The model's tensors that live in `space` (see `home_space`)."""
    home = {}
    tensors = []
    for tensor in model.tensors:
        key = tensor.device
        if key not in home:
            home[key] = home_space(tensor, step)
        if home[key] == space.trace.id:
            tensors.append(tensor)
    least = space.start_counts_from or 0
    here = {tensor.name for tensor in tensors}
    return Resident(tensors, space.start_bytes, model.weight_constants_used, note=model.note,
                    fed=fed_before_step(space), counts_from=least,
                    fed_counted=fed_before_step(space, least) if least else None,
                    initial_values=[value for value in model.initial_values if here.intersection(value.variables)],
                    in_blocks=space.trace.allocator in _GROWING_BFC)


def fed_before_step(space, at_least: int = 0) -> int:
    """Bytes of the step's feeds made before it (TF1's `_arg_<feed>`: the session copies a fed array
    into a tensor before the step starts, so its output holds bytes the step allocated none of): in
    use before the step, as the step's input, not the model's; `at_least`: only the feeds of that
    many bytes or more."""
    inputs = np.flatnonzero(feeds(space))
    if not inputs.size:
        return 0
    made_before = (space.name_column(OUTPUT)[inputs] - space.name_column(ALLOCATED)[inputs]).clip(min=0)
    return int(made_before[made_before >= max(at_least, 1)].sum()) if at_least else int(made_before.sum())


def feeds(space) -> np.ndarray:
    """Per name, whether it hands the step an input (a feed's `_arg_`, a placeholder, an iterator's
    batch), but for a `PlaceholderWithDefault`: unfed, it hands on its default, a constant the graph
    holds (not the step's input, nor of the batch fed); fed, the feed's `_arg_` holds the bytes."""
    names = space.names
    return names.step_inputs & ~names.of_op_type(_WITH_DEFAULT.__eq__)


def placeholder_defaults(space) -> np.ndarray:
    """Per name, whether it is a `PlaceholderWithDefault`'s default (its data input, from its
    label): a constant of the graph, as big whatever batch is fed."""
    names = space.names
    holders = np.flatnonzero(names.of_op_type(_WITH_DEFAULT.__eq__)).tolist()
    if not holders:
        return np.zeros(len(names.raw), dtype=bool)
    defaults = {name for label in labels_of(space.trace.label_of, [names.raw[i] for i in holders])
                for name in label_inputs(label)}
    return np.fromiter(map(defaults.__contains__, names.raw), dtype=bool, count=len(names.raw))


_WITH_DEFAULT = "PlaceholderWithDefault"


WEIGHT_CONSTANTS_NOTE = ("parameters include Const nodes read as weights (float, rank >= 1, feeding a conv, "
                         "matmul, bias or batch-norm op): a heuristic for frozen graphs")
