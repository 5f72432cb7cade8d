"""Findings: what to change so a step fits, each with its bytes, the scope and nodes involved,
and the change to try (docs/figures.md, "Findings").

Every finding is computed from an analysed step (and, for graph constants and the im2col
estimate, the run's GraphDef through `resident.Model`); `step_growth` also compares the
step with other traced steps of its run. Thresholds are constants below, each with why.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ._numeric import scatter_sum
from .figures import AT_PEAK, OUTPUT, TEMP, format_bytes, listed
from .names import (BEFORE_STEP_OP_TYPE, KINDS, LAYOUT_TRANSPOSE, UPDATED_ARGUMENTS, VARIABLE_WRITERS, XLA_OFF_ADVICE,
                    label_inputs, op_type_from_label, ran_xla_clusters, scope_of)
from .trace import COUNTS_NONE, labels_of
from .resident import Model

LAYOUT_TRANSPOSE_KIND = "layout_transpose"
CONV_SCRATCH = "conv_scratch"
GRAPH_CONSTANTS = "graph_constants"
STEP_GROWTH = "step_growth"
ALLOCATOR_GAP = "allocator_gap"
UNDONATED_ARGUMENTS = "undonated_arguments"
VARIABLE_COPIES = "variable_copies"
FINDING_KINDS = (LAYOUT_TRANSPOSE_KIND, CONV_SCRATCH, GRAPH_CONSTANTS, STEP_GROWTH, ALLOCATOR_GAP, UNDONATED_ARGUMENTS,
                 VARIABLE_COPIES)

KiB, MiB = 1 << 10, 1 << 20
# Layout transposes: each is a full copy of an activation; 1% of the peak is memory that a
# data-format change gets back for free (64 KiB floor: below it, hand-sized toy steps).
LAYOUT_MIN_SHARE, LAYOUT_MIN_BYTES = 0.01, 64 * KiB
# Conv scratch: temporaries 8x the op's output mean the scratch, not the result, is what
# the op costs; under 1 MiB or 10% of the peak it cannot be what keeps a step from fitting.
SCRATCH_MIN_RATIO, SCRATCH_MIN_BYTES, SCRATCH_MIN_SHARE = 8, MiB, 0.10
# Graph constants: a Const of 64 KiB or more is data, not a shape, scalar or small table;
# 1 MiB of them is data embedded in the graph, found long before protobuf's 2 GiB limit.
CONST_DATA_MIN_BYTES, GRAPH_CONSTANTS_MIN_BYTES = 64 * KiB, MiB
# Any GraphDef past 1/8 of protobuf's limit is flagged, weights or not: it has little room left.
GRAPH_WARN_BYTES, PROTOBUF_LIMIT_BYTES = 256 * MiB, 2 * 1024 * MiB
# Step growth: a step after warm-up should end where it started; under 64 KiB are the
# scalars and shapes the runtime keeps (the demo U-Net leaves 12 B).
STEP_GROWTH_MIN_BYTES = 64 * KiB
STEP_GROWTH_STEPS = 3  # steps of the run compared (this one and its nearest traced neighbours)
_SAME_WORK = 0.10  # steps allocating this much apart do other work (another batch size): starts may differ
# Allocator gap: readings off the records by 5% of the peak rise is memory the trace does not
# explain, more than allocator rounding; the floor keeps toy steps quiet (64 KiB, as for layout
# transposes and growth: a fixed 1 MiB hid a 520 KiB gap in a 1.25 MiB step).
GAP_MIN_SHARE, GAP_MIN_BYTES = 0.05, 64 * KiB
# A reading above the records' absolute peak (`peak_bytes`) by 1% of the peak rise (same floor)
# means the peak shown is too low, whatever the gap's share: flagged too.
PEAK_SHORT_MIN_SHARE = 0.01
# Undonated arguments: a JAX step's new parameters and optimizer state beside the old ones double
# them at the peak; 5% of the peak rise is worth a one-line change (64 KiB floor, as above).
DONATE_MIN_SHARE, DONATE_MIN_BYTES = 0.05, 64 * KiB
# Variable copies: updates that gave a variable a new buffer, held at the peak; 5% of the peak rise is a
# copy of weights worth moving a read for (64 KiB floor, as above).
COPY_MIN_SHARE, COPY_MIN_BYTES = 0.05, 64 * KiB
# Ops that read variables beside a training step when fetched with it: a checkpoint's save (every variable),
# weight histograms. (Scalar summaries are a loss's, nearly always: they are not named.)
_VARIABLE_READERS = frozenset({"SaveV2", "Save", "SaveSlices", "HistogramSummary", "WriteHistogramSummary"})
TOP_NODES = 5  # nodes named per finding

# TensorFlow's CPU kernels for these ops (Conv2DCustomBackpropFilterOp and its kin) stage im2col for a
# shard of whole images in one buffer of ceil(working set / one image's work) images, the working set
# being about 30 MiB (an L3 cache): its size is set there, or by one image where that is larger, and
# not by the batch (a batch smaller than the shard still gets the whole buffer).
CPU_SHARDED_CONV_GRADS = frozenset({"Conv2DBackpropFilter", "Conv2DBackpropInput",
                                    "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2"})
CPU_CONV_WORKING_SET_BYTES = 30 * MiB

_ARGUMENT_NAME_RE = re.compile(r"[A-Za-z_]\w*")  # a JAX argument path's first name: `state` of `state[0].mu[...]`
_LAYOUT_SIDE_RE = re.compile(r"((?:-\d+)+)-[A-Za-z]+?(N[A-Z]+)To(N[A-Z]+)-LayoutOptimizer$")
_GRAD_RE = re.compile(r"^(?:gradients(?:_\d+)?/)?(?P<forward>.+)_grad/[^/]+$")


@dataclass
class Finding:
    kind: str
    bytes: int
    scope: str  # a scope path when grouping by layer ("" for the whole step)
    nodes: list[str]  # graph names, largest first
    message: str
    suggestion: str
    device: str | None = None  # the memory space (None: the run's graph)
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "bytes": int(self.bytes), "scope": self.scope, "nodes": self.nodes,
                "message": self.message, "suggestion": self.suggestion, "device": self.device,
                "details": self.details}


def not_at_peak(finding: Finding) -> bool:
    """Whether the finding says it holds nothing at the step's peak (`details.at_peak_bytes` 0)."""
    return finding.details.get("at_peak_bytes", None) == 0


def step_findings(step, model: Model | None = None, run_steps: Sequence[tuple[int, object]] = ()) -> list[Finding]:
    """Every finding of an analysed step, largest first, those holding nothing at the peak last.

    `run_steps`: (step number, StepAnalysis) of the traced steps compared for growth,
    this step included (see `compared_refs`).
    """
    found: list[Finding] = []
    for space in step.spaces:
        if not space.has_curve:
            continue
        found += layout_transposes(space)
        found += conv_scratch(space, model)
        found += step_growth(space, step, run_steps)
        found += allocator_gap(space)
        found += undonated_arguments(space)
        found += variable_copies(space, step)
    if model is not None:
        found += graph_constants(model)
    return ranked(found)


def ranked(found: list[Finding]) -> list[Finding]:
    """Largest first, but what a finding says it holds nothing of at the peak (a convolution's scratch
    freed before it) after the rest: fourteen 32 MiB scratch cards, most freed before a 66 MiB peak, had
    read as 14 x 32 MiB at the top of the list. Of equal bytes and kind, what is held at the peak first."""
    return sorted(found, key=lambda f: (not_at_peak(f), -f.bytes, f.kind, -f.details.get("at_peak_bytes", 0), f.scope))


# -- layout transposes ---------------------------------------------------------------------------


def _formats(raw_names: Sequence[str]) -> tuple[str | None, str | None]:
    """(the graph's data format, the one the device wanted), read from the transposes' names:
    `<op>-<port>-TransposeNHWCToNCHW` converts an input (graph -> device), `<op>-<port>-<n>-Transpose
    NCHWToNHWC` an output (device -> graph)."""
    votes: dict[tuple[str, str], int] = {}
    for raw in raw_names:
        match = _LAYOUT_SIDE_RE.search(raw)
        if not match:
            continue
        source, target = match.group(2), match.group(3)
        pair = (source, target) if match.group(1).count("-") == 1 else (target, source)
        votes[pair] = votes.get(pair, 0) + 1
    if not votes:
        return None, None
    return max(votes, key=votes.get)


def layout_transposes(space) -> list[Finding]:
    names = space.names
    layout = np.flatnonzero(names.kind_code == KINDS.index(LAYOUT_TRANSPOSE))
    if layout.size == 0:
        return []
    name_at_peak = space.name_column(AT_PEAK)
    at_peak = name_at_peak[layout]
    by_layer: dict[str, list[int]] = {}
    for i in layout[at_peak > 0].tolist():
        by_layer.setdefault(names.layer(i), []).append(i)
    threshold = max(LAYOUT_MIN_BYTES, LAYOUT_MIN_SHARE * space.peak_rise_bytes)
    found = []
    for layer, rows in by_layer.items():
        held = int(name_at_peak[rows].sum())
        if held < threshold:
            continue
        rows.sort(key=lambda i: -int(name_at_peak[i]))
        raw = [names.raw[i] for i in rows]
        graph_format, device_format = _formats(raw)
        share = held / space.peak_rise_bytes if space.peak_rise_bytes > 0 else None
        converted = (f" ({graph_format} in the graph, {device_format} on the device)"
                     if graph_format and device_format else "")
        keras = "channels_first" if (device_format or "").startswith("NC") else "channels_last"
        fix = (f"Build this layer in {device_format} (data_format='{device_format}' in tf.nn ops, "
               f"'{keras}' in Keras) so grappler inserts no transposes, "
               if device_format else "Build the layer in the data format the device prefers, ")
        found.append(Finding(
            LAYOUT_TRANSPOSE_KIND, held, layer, raw[:TOP_NODES],
            f"{len(rows)} layout transpose{'s' if len(rows) != 1 else ''} inserted by grappler's layout "
            f"optimizer{converted} hold {format_bytes(held)} at the peak in {layer or '(top level)'}"
            + (f" ({share:.0%} of the peak rise)" if share is not None else "") + ".",
            fix + "or turn the layout optimizer off: tf.config.optimizer.set_experimental_options("
            "{'layout_optimizer': False}) (TF1: RewriterConfig(layout_optimizer=RewriterConfig.OFF)).",
            space.trace.id,
            {"transposes": len(rows), "graph_format": graph_format, "device_format": device_format,
             "share_of_peak": share},
        ))
    return found


# -- convolution scratch -----------------------------------------------------------------------


def _forward_conv(graph_name: str, model: Model | None):
    """The forward convolution an op computes or differentiates (`X_grad/Conv2DBackpropFilter` -> X)."""
    if model is None:
        return None
    conv = model.convs.get(graph_name)
    if conv is None:
        match = _GRAD_RE.match(graph_name)
        conv = model.convs.get(match.group("forward")) if match else None
    return conv


def im2col_estimate(space, conv) -> dict | None:
    """batch x out_h x out_w x (k_h x k_w x c_in) x dtype size. batch x out_h x out_w comes from the
    GraphDef's shapes where it has them, else from the forward convolution's output bytes in the trace
    (output / (c_out x dtype size); a fused conv's output is on its BiasAdd or activation)."""
    if conv is None or not conv.filter_shape or not conv.dtype_size or conv.op.startswith("Depthwise"):
        return None
    channels_out = conv.filter_shape[-1]
    positions, source = conv.positions, "graph"
    if positions is None:
        names = space.names
        outputs, counts = space.name_column(OUTPUT), space.name_exec_counts
        for name in (conv.name, *conv.fused_into):
            rows = [i for i, graph_name in enumerate(names.graph_names) if graph_name == name]
            output = max((int(outputs[i]) // max(1, int(counts[i])) for i in rows), default=0)
            if output > 0:
                positions, source = output // (channels_out * conv.dtype_size), "trace"
                break
    if not positions:
        return None
    patch = int(np.prod(conv.filter_shape[:-1]))
    return {"forward": conv.name, "filter_shape": list(conv.filter_shape), "positions": positions,
            "positions_from": source, "patch_size": patch, "dtype_size": conv.dtype_size,
            "im2col_bytes": positions * patch * conv.dtype_size}


def is_convolution(op_type: str) -> bool:
    """A convolution or its gradient, fused or not (`Conv2D`, `Conv2DBackpropFilter`, `Conv3D`,
    `DepthwiseConv2dNative`, `_FusedConv2D`, oneDNN's `_MklNativeConv2DBackpropInput`)."""
    return "Conv" in op_type


def kernels(space, rows: list[int]) -> list[str]:
    """The kernel each name of `rows` ran: its label's (a convolution the graph optimizer fused
    into its bias keeps that node's name and type: `BiasAdd` ran `_MklNativeFusedConv2D`), else
    its op type."""
    names = space.names
    labels = labels_of(space.trace.label_of, [names.raw[i] for i in rows])
    return [op_type_from_label(label) or names.op_type(i) for i, label in zip(rows, labels)]


def cpu_working_set_scratch(space) -> np.ndarray:
    """Per name: a CPU convolution gradient of TensorFlow's own kernels, whose scratch is sized to
    a working set, not to the batch (CPU_SHARDED_CONV_GRADS): the what-if keeps it, the
    convolution-scratch finding says so."""
    names = space.names
    out = np.zeros(len(names.raw), dtype=bool)
    if space.trace.device_type != "CPU":
        return out
    rows = np.flatnonzero(names.of_op_type(is_convolution)).tolist()
    out[[i for i, kernel in zip(rows, kernels(space, rows)) if kernel in CPU_SHARDED_CONV_GRADS]] = True
    return out


def conv_scratch(space, model: Model | None) -> list[Finding]:
    """Convolutions whose scratch dwarfs their output. Other ops' temp bytes are not scratch to
    shrink (an assign that gives a resource variable a new buffer records it as temp)."""
    temp = space.name_column(TEMP)
    output = space.name_column(OUTPUT)
    counts = np.maximum(space.name_exec_counts, 1)
    per_exec_temp, per_exec_output = temp // counts, output // counts
    threshold = max(SCRATCH_MIN_BYTES, SCRATCH_MIN_SHARE * space.peak_rise_bytes)
    names = space.names
    candidates = np.flatnonzero((per_exec_temp >= threshold) & (per_exec_temp >= SCRATCH_MIN_RATIO * per_exec_output))
    # Scratch held at the peak, per name (what a running op had allocated and freed before it ended).
    held = scatter_sum(space.name_code, space.temporaries, len(names.raw)) if candidates.size else candidates
    working_set = cpu_working_set_scratch(space) if candidates.size else None
    found = []
    for i, kernel in zip(candidates.tolist(), kernels(space, candidates.tolist())):
        op_type = names.op_types[i]
        if not (is_convolution(op_type) or is_convolution(kernel)):
            continue
        graph_name, scratch, out = names.graph_names[i], int(per_exec_temp[i]), int(per_exec_output[i])
        layer = names.layer(i)
        estimate = im2col_estimate(space, _forward_conv(graph_name, model))
        ratio = f"{scratch / out:,.0f}x its output" if out else "with no output"
        ran = op_type if kernel == op_type else f"{op_type}, ran as {kernel}"
        text = f"{graph_name} ({ran}) uses {format_bytes(scratch)} of scratch, {ratio} ({format_bytes(out)})."
        at_peak = int(held[i])
        text += (f" It holds {format_bytes(at_peak)} of it at the peak." if at_peak > 0
                 else " It does not hold it at the peak (it runs before or after).")
        if estimate is not None:
            k = "x".join(map(str, estimate["filter_shape"][:-1]))
            text += (f" im2col from the shapes: {estimate['positions']:,} output positions (batch x out_h x out_w)"
                     f" x {estimate['patch_size']:,} ({k}) x {estimate['dtype_size']} B = "
                     f"{format_bytes(estimate['im2col_bytes'])}"
                     f" (the op's scratch is {scratch / estimate['im2col_bytes']:.1f}x that).")
        # TensorFlow's own CPU kernels (oneDNN's `_MklNative...` ones keep their scratch apart).
        cpu_working_set = bool(working_set[i])
        if cpu_working_set:
            text += (" On a CPU, TensorFlow's convolution gradients stage im2col for a shard of whole images in "
                     f"one buffer sized to a working set of about {format_bytes(CPU_CONV_WORKING_SET_BYTES)} (or to "
                     "one image, where that is larger), not to the batch: it keeps this size at any batch.")
        found.append(Finding(
            CONV_SCRATCH, scratch, layer, [graph_name], text, _CPU_SCRATCH_FIX if cpu_working_set else _SCRATCH_FIX,
            space.trace.id,
            {"temp_bytes": scratch, "output_bytes": out, "op_type": op_type, "im2col": estimate,
             "cpu_working_set": cpu_working_set, "at_peak_bytes": at_peak},
        ))
    return found


_SCRATCH_FIX = ("Use a smaller filter (or stack small ones: two 3x3 see as far as one 5x5), an FFT or separable "
                "form (tf.nn.separable_conv2d, or a k x 1 then 1 x k pair), or split the batch into smaller steps "
                "(the scratch grows with batch x out_h x out_w).")
_CPU_SCRATCH_FIX = ("Each convolution gradient running at once holds one such buffer: run them one at a time with "
                    "tf.config.threading.set_inter_op_parallelism_threads(1) (TF1: ConfigProto("
                    "inter_op_parallelism_threads=1)). A smaller batch does not shrink it; a smaller filter or "
                    "fewer input channels do only where one image's im2col is above the working set. On a GPU, "
                    "cuDNN sizes its own workspace instead: profile there to see what a GPU step needs.")


# -- constants in the graph ---------------------------------------------------------------------


# The constants Dataset.from_tensor_slices and from_tensors make of the arrays they are given (TF 2.x:
# `normalize_element/component_0`, `normalize_element_1/...` for the next dataset; earlier, `tensors/component_0`).
_SLICED_ARRAY_RE = re.compile(r"(?:^|/)(?:normalize_element|tensors)(?:_\d+)?/component_\d+$")


def graph_constants(model: Model) -> list[Finding]:
    params = model.parameter_names
    data = [c for c in model.constants if c.serialized_bytes >= CONST_DATA_MIN_BYTES and c.name not in params]
    data_bytes = sum(c.serialized_bytes for c in data)
    large_graph = model.graph_bytes >= GRAPH_WARN_BYTES
    if data_bytes < GRAPH_CONSTANTS_MIN_BYTES and not large_graph:
        return []
    listed = data if data_bytes >= GRAPH_CONSTANTS_MIN_BYTES else model.constants
    flagged_bytes = data_bytes if listed is data else sum(c.serialized_bytes for c in listed)
    text = (f"The GraphDef is {format_bytes(model.graph_bytes)} ({model.graph_bytes / PROTOBUF_LIMIT_BYTES:.2%} of "
            "protobuf's 2 GiB limit)")
    if not listed:  # a big graph without constants: its nodes' attributes or its function library
        return [Finding(
            GRAPH_CONSTANTS, model.graph_bytes, "", [],
            text + "; no Const node holds any of it: its nodes' attributes or its function library make it that large.",
            "Look for data held in attributes (string or tensor attributes of other ops) or in a large function "
            "library, and feed it instead, so the graph stays far below the 2 GiB limit.",
            None,
            {"graph_bytes": model.graph_bytes, "limit_bytes": PROTOBUF_LIMIT_BYTES, "constant_bytes": 0, "constants": []},
        )]
    largest = listed[0]
    shape = "x".join(map(str, largest.shape)) or "scalar"
    text += (f"; {len(listed)} Const node{'s hold' if len(listed) != 1 else ' holds'} "
             f"{format_bytes(flagged_bytes)} of it, the largest {largest.name} ({largest.dtype} {shape}, "
             f"{format_bytes(largest.serialized_bytes)}).")
    if listed is not data:
        text += " Most of it is weights (a frozen graph)."
    advice = ("Feed the data instead of embedding it: a tf.data pipeline (from files or from_generator), a placeholder "
              "fed each step, or a variable initialised from a placeholder (initializer fed once), so the graph holds "
              "no copy of it and stays far below the 2 GiB limit.")
    sliced = [c.name for c in listed if _SLICED_ARRAY_RE.search(c.name)]
    if sliced:  # a tf.data user told to use tf.data (trial U): the dataset's own constant is the copy
        advice = (f"Dataset.from_tensor_slices (or from_tensors) embeds the arrays it is given in the graph ({sliced[0]}): build the "
                  "dataset from files (TFRecordDataset) or from_generator, or from a placeholder fed once "
                  "(tf.compat.v1.data.make_initializable_iterator, the array fed to its initializer), so the graph "
                  "holds no copy of it and stays far below the 2 GiB limit.")
    return [Finding(
        GRAPH_CONSTANTS, flagged_bytes, scope_of(largest.name), [c.name for c in listed[:TOP_NODES]], text,
        advice,
        None,
        {"graph_bytes": model.graph_bytes, "limit_bytes": PROTOBUF_LIMIT_BYTES, "constant_bytes": flagged_bytes,
         "constants": [{"name": c.name, "dtype": c.dtype, "shape": list(c.shape), "serialized_bytes": c.serialized_bytes,
                        "tensor_bytes": c.tensor_bytes} for c in listed[:TOP_NODES]]},
    )]


# -- growth from step to step -----------------------------------------------------------------------


def compared_refs(refs: Sequence, ref, limit: int = STEP_GROWTH_STEPS) -> list:
    """`ref` and its nearest traced steps of the same source in its run (earlier ones first), in step order;
    of a profile, of the same profile file (another session is another process, whose steps' numbers and
    memory say nothing of these)."""
    same = sorted((r for r in refs if r.run == ref.run and r.source == ref.source and r.path == ref.path),
                  key=lambda r: (r.step, r.wall_time, r.tag))
    if ref not in same:
        return [ref]
    at = same.index(ref)
    start = max(0, min(at - (limit - 1), len(same) - limit))
    return same[start:start + limit]


def _left_by_exec(space) -> np.ndarray:
    """Per execution: the net of all its allocation events (what it still held when the step ended)."""
    trace = space.trace
    return scatter_sum(trace.event_exec, trace.event_bytes, trace.exec_count)


def left_behind(space) -> np.ndarray:
    """Per distinct name: what its executions still held when the step ended (`_left_by_exec`)."""
    return scatter_sum(space.name_code, _left_by_exec(space), len(space.names.raw))


def _held_and_returned(space) -> tuple[np.ndarray | None, int]:
    """(per distinct name, what it still held when the step ended but for the tensors the step
    returns, `_fetched`; those tensors' bytes); (None, 0) where the step ended under
    `STEP_GROWTH_MIN_BYTES` above its start (nothing to look at)."""
    if space.curve.end_rise_bytes < STEP_GROWTH_MIN_BYTES:
        return None, 0
    held, fetched = left_behind(space), _fetched(space)
    returned = int(held[fetched].clip(min=0).sum())
    held[fetched] = 0
    return held, returned


def _replaced_freed(space, held: np.ndarray, history: list[tuple[int, int, int | None]]) -> int:
    """Bytes of buffers made before a profile's step that it freed (`BEFORE_STEP_OP_TYPE`: the old buffers
    its variables' updates replaced, given back), where the starts of the run's steps show the growth: three
    steps or more, each start above the one before by half what that step left at least (the allocator's own
    bytes in use, which every event of a profile moves). Else 0: a RunMetadata step records no such free,
    and where the starts do not show it the variables' new buffers count whole (a profile's SGD momentum,
    whose values the update assigns through other ops, had read as growth of 17 MiB a step its starts did
    not take). Trial Y's ViT fit, whose cached dataset grew the start by a batch a step, had its growth
    called AdamW's turnover on 67 of its 80 steps: 450 KiB of new buffers a step, whose old ones it freed."""
    starts = [h[2] for h in history]
    if len(history) < 3 or None in starts or any(
            b - a < h[1] // 2 for (a, b), h in zip(zip(starts, starts[1:]), history)):
        return 0
    return max(-int(held[space.names.of_op_type(BEFORE_STEP_OP_TYPE.__eq__)].sum()), 0)


def _grown(space) -> int:
    """What a step left behind when it ended, but for the tensors it returns."""
    return space.curve.end_rise_bytes - _held_and_returned(space)[1]


def step_growth(space, step, run_steps: Sequence[tuple[int, object]]) -> list[Finding]:
    held, returned = _held_and_returned(space)
    left = space.curve.end_rise_bytes - returned
    history = []  # (step, bytes left behind, bytes in use before it) of the same space
    spaces = []
    for number, other in run_steps:
        other_space = other.space(space.trace.id) if other is not step else space
        if other_space is None or not other_space.has_curve:
            continue
        history.append((number, left if other_space is space else _grown(other_space), other_space.start_bytes))
        spaces.append(other_space)
    if held is None or left < STEP_GROWTH_MIN_BYTES or any(h[1] < STEP_GROWTH_MIN_BYTES for h in history):
        # This step, or another traced step of the run, ended where it started: no steady growth in the steps;
        # outside them, said alike on every step compared.
        return _growth_between_steps(space, history, spaces, left)
    freed = _replaced_freed(space, held, history)
    if (sum(b for _, b in _kept_variable_buffers(space, smallest=1, values=False)) - freed) * 10 >= left * 9:
        # Nearly all of it is resource variables' new buffers (an assign or an optimizer's update,
        # where the old buffer was shared): a variable holds one buffer whatever it is given, so this
        # is turnover, not growth (the old ones went back in no record, or after the step).
        return []
    if len(history) > 1 and _assigned_values_turn_over(space, left, history, freed):
        return []
    names = space.names
    if freed:
        # The variables' new buffers replaced old ones the profile saw freed: they hold what those held, and
        # the growth is the rest's, where the rest holds some.
        held = held.copy()
        held[np.isin(names.graph_names, [name for name, _ in _kept_variable_buffers(space, 1)])] = 0  # values too
        if int(held.clip(min=0).sum()) < STEP_GROWTH_MIN_BYTES:
            return []
    order = np.argsort(-held, kind="stable")
    keepers = [i for i in order[:TOP_NODES].tolist() if held[i] >= max(1, left // 100)]  # not the 4 B scalars
    by_graph_name: dict[str, int] = {}
    for i in keepers:
        by_graph_name[names.graph_names[i]] = by_graph_name.get(names.graph_names[i], 0) + int(held[i])
    nodes = list(by_graph_name)
    top = keepers[0] if keepers else None
    scope = names.layer(top) if top is not None else ""
    holders = ", ".join(f"{name} ({format_bytes(b)})" for name, b in by_graph_name.items())
    if len(history) > 1:
        steps = ", ".join(str(h[0]) for h in history)
        lefts = ", ".join(format_bytes(h[1]) for h in history)
        across = f" Steps {steps} each left bytes behind ({lefts})"
        starts = [h[2] for h in history]
        least = space.start_counts_from
        if None not in starts and all(a < b for a, b in zip(starts, starts[1:])):  # coarse readings may not show it
            across += f"; bytes in use before them: {', '.join(format_bytes(s) for s in starts)}"
        elif least and None not in starts and by_graph_name and max(by_graph_name.values()) < least:
            # The UX review read the demo's flat starts (1.00 MiB at every step) against "each left bytes behind".
            across += (f"; the bytes in use before them do not show it, as {space.trace.allocator}'s readings count "
                       f"only its requests of {format_bytes(least)} and more, and these are smaller")
        across += "."
    else:
        across = " Only this step of the run is traced: trace a few more to see it grow."
    return [Finding(
        STEP_GROWTH, left, scope, nodes,
        f"This step ended {format_bytes(left)} above where it started"
        # The tensors it returns, where they are worth a word (not a 4 B loss).
        + (f" (besides {format_bytes(returned)} of tensors it returns)" if returned >= STEP_GROWTH_MIN_BYTES else "")
        + f", held by {holders}.{across}",
        "Memory that grows every step runs out in the end: look at what these nodes feed (a queue enqueued more "
        "than dequeued, a variable or list that accumulates with tf.concat, a cache never cleared) and keep it "
        "bounded, or release it each step.",
        space.trace.id,
        {"left_behind_bytes": left, "steps": [{"step": h[0], "left_behind_bytes": h[1], "start_bytes": h[2]}
                                              for h in history],
         "holders": [{"name": name, "bytes": b} for name, b in by_graph_name.items()]},
    )]


def _growth_between_steps(space, history: list[tuple[int, int, int | None]], spaces: list,
                          left: int) -> list[Finding]:
    """Growth outside the traced steps: where each of three traced steps or more of one work (each
    allocating within `_SAME_WORK` of the others: not a run's steps at several batch sizes, whose starts
    rise with the batch) starts higher than the one before by more than that one left behind
    (`STEP_GROWTH_MIN_BYTES` or more each time), something that ran between them holds more every time.
    Trial AB's Keras callback made a 1 MiB variable every batch: each profiled step ended where it
    started, their starts rose 1 MiB a step, and nothing was said. The steps' records cannot name it."""
    if len(history) < STEP_GROWTH_STEPS or any(h[2] is None for h in history):
        return []
    allocated = [int(other.trace.allocated.sum()) for other in spaces]
    if min(allocated) <= 0 or max(allocated) > min(allocated) * (1 + _SAME_WORK):
        return []
    between = [b[2] - a[2] - max(a[1], 0) for a, b in zip(history, history[1:])]
    if min(between) < STEP_GROWTH_MIN_BYTES:
        return []
    steps = ", ".join(str(h[0]) for h in history)
    starts = ", ".join(format_bytes(h[2]) for h in history)
    grown = sum(between)
    return [Finding(
        STEP_GROWTH, grown, "", [],
        f"The bytes in use before steps {steps} rise ({starts}), {format_bytes(grown)} more than the steps "
        f"themselves left behind: something that runs between them holds more every time, outside the traced "
        f"steps, so their records do not name it.",
        "Look at what runs between the steps (a callback, Python code keeping tensors or variables made each "
        "step, another Session.run, an input pipeline's cache filling), and release it each step; memory that "
        "grows every step runs out in the end. A profile that spans the time between steps shows its "
        "allocations in the trace viewer.",
        space.trace.id,
        {"left_behind_bytes": max(left, 0),
         "between_steps_bytes": grown,
         "steps": [{"step": h[0], "left_behind_bytes": h[1], "start_bytes": h[2]} for h in history],
         "holders": []},
    )]


# -- allocator readings the records do not explain ------------------------------------------------------


def _finished_by(space, when: int) -> tuple[str | None, str]:
    """(graph name, layer) of the op that finished last at or before `when` (None, "" if none)."""
    code = space.finished_by(when)
    return (None, "") if code is None else (space.names.graph_names[code], space.names.layer(code))


# Readings a step needs before their common power of two is read as the allocator's unit: three
# readings that happen to fall on 4 MiB boundaries (12, 16, 8 MiB) show nothing of the allocator.
UNIT_MIN_READINGS = 8


def reading_unit(readings: np.ndarray) -> int:
    """The step an allocator's readings move by, where they show one: the largest power of two that
    divides them all, among two values or more over `UNIT_MIN_READINGS` readings at least (0 where
    they never move, or are too few to tell). An allocator that reports its bytes in coarse units
    (oneDNN's mklcpu on a small step read 1.5 or 2 MiB after each of its 11 ops while the records
    moved by 229 KiB) cannot show a gap finer than that; a BFC allocator's readings, one per op,
    come to a few hundred bytes at most."""
    readings = np.asarray(readings, dtype=np.int64)
    if readings.size < UNIT_MIN_READINGS or readings.min() == readings.max():
        return 0
    bits = int(np.bitwise_or.reduce(readings))
    return bits & -bits


def readings_gap(space) -> int | None:
    """How far the allocator's own readings and the step's records disagree, where the
    `allocator_gap` finding flags it (its figure; None where it does not): the step's peak, and so
    a change in peak, may be off by up to that much. The one figure the summary, the finding and
    a comparison give."""
    found = allocator_gap(space) if space.has_curve else []
    return found[0].bytes if found else None


def peak_too_high(space) -> int:
    """How much the step's peak shown may be above the allocator's real one, where its `allocator_gap` says so
    (variable writes whose old buffers went back in no record: the allocator's largest reading bounds the
    peak); 0 where it does not. The summary says it beside the peak (trial AF: a headline of 233 MiB above a
    finding bounding it by 201.5 MiB)."""
    found = allocator_gap(space) if space.has_curve else []
    return found[0].details["peak_too_high_bytes"] if found else 0


def readings_above(space) -> int:
    """How far the allocator's readings went above the step's records where its `allocator_gap` says they
    did (a gap above them, or a largest reading above the peak): memory taken with no record, which the
    what-if keeps as a margin (0 where they did not)."""
    found = allocator_gap(space) if space.has_curve else []
    if not found:
        return 0
    details = found[0].details
    return max(details["above_bytes"] if details["gap_bytes"] > 0 else 0, details["above_peak_bytes"])


def allocator_gap(space) -> list[Finding]:
    """The finding, once per space: the findings pass, the summary and each side of a comparison ask."""
    return list(space.memoized(ALLOCATOR_GAP, lambda: tuple(_allocator_gap(space))))


def _allocator_gap(space) -> list[Finding]:
    trace, curve = space.trace, space.curve
    if trace.snapshot_bytes.size == 0 or curve.time_us.size == 0:
        return []
    rise = space.peak_rise_bytes
    # Without a usable baseline, the start the readings tell (`readings_start`); but no allocator held less
    # than nothing before the step: where the readings imply a negative start, they are read against none
    # (a loop's many small records above every reading had read as 2.2 MiB the records missed, against a
    # negative start: the readings were below the records throughout).
    start = space.start_bytes if space.start_bytes is not None else max(space.readings_start, 0)
    unit = reading_unit(trace.snapshot_bytes)
    excess = space.reading_excess(start, max(GAP_MIN_BYTES, GAP_MIN_SHARE * rise, unit))
    worst = int(np.argmax(np.abs(excess)))
    gap = int(excess[worst])
    # The largest reading against the absolute peak, where the baseline makes the peak absolute.
    top = int(np.argmax(trace.snapshot_bytes))
    peak_bytes = space.peak_bytes
    above_peak = max(int(trace.snapshot_bytes[top]) - peak_bytes, 0) if peak_bytes is not None else 0
    # Rounded readings, and the baseline read from them, are each off by up to half a unit: a gap of
    # one unit or less is their rounding.
    peak_short = above_peak >= max(GAP_MIN_BYTES, PEAK_SHORT_MIN_SHARE * rise) and above_peak > unit
    if not (abs(gap) >= max(GAP_MIN_BYTES, GAP_MIN_SHARE * rise) and abs(gap) > unit) and not peak_short:
        return []
    when = int(trace.snapshot_time_us[worst])
    # The op that had just finished says when, not where: no scope holds a gap (the headline named
    # the op's layer, "516.6 KiB in generator", for bytes the message says no op holds).
    node_name, scope = _finished_by(space, when)[0], ""
    above = int(excess.max())
    below = int(-excess.min())
    direction = (f"exceed the allocation records by up to {format_bytes(above)}" if gap > 0 else
                 f"fall short of the allocation records by up to {format_bytes(below)}")
    share = f" ({abs(gap) / rise:.0%} of the peak rise)" if rise > 0 else ""
    baseline = "" if space.start_bytes is not None else (
        " (no usable baseline: the readings agree best with counting none of the step's requests, as if each went "
        "to malloc, so they tell nothing of its start, and this gap is how far they move on their own)"
        if space.readings_count_from == COUNTS_NONE
        else " (no usable baseline: the readings imply a negative start)")
    # A request held in a whole block (mklcpu reads the block, its records the request): rounding, not memory
    # outside the records (a trial's 2.2 MB stack in a 4 MiB block had been put down to oneDNN's workspaces).
    block = space.rounded_block(worst, gap) if gap > 0 else None
    blocked = space.trace.name(block.exec_index) if block is not None else None
    meaning = ("memory the trace does not attribute to any op" if gap > 0 else
               "bytes the records count that the allocator did not hold then"
               + ("" if space.start_bytes is None and start == 0 else
                  ", or a baseline above the step's real start"))
    if block is not None:
        meaning = (f"the {format_bytes(block.block_bytes)} block the allocator gave {blocked}'s request of "
                   f"{format_bytes(block.request_bytes)}, whose readings count the block where the records count "
                   "the request (a BFC allocator does not split a block under twice a request, and its pool grows "
                   "by blocks of 2 MiB doubled)")
    message = (f"The allocator's own bytes in use ({trace.allocator}) {direction}{share}{baseline}, "
               f"at {when / 1000:.3f} ms" + (f", after {node_name}" if node_name else "") + f": {meaning}.")
    nodes = [node_name] if node_name else []
    nodes += [blocked] if blocked and blocked not in nodes else []
    suggestion = ("Look for memory allocated outside the traced ops: library workspaces (oneDNN scratchpads and "
                  "caches, cuDNN workspaces), another session or thread on the same device, or allocations "
                  "TensorFlow does not record per op; the at-peak figures cover only the records." if gap > 0 else
                  "Read the step's peak as a rise over its start rather than as absolute bytes: the start (read "
                  "from the readings) may be set too high, or the records count bytes the allocator had already "
                  "given back.")
    if block is not None:
        suggestion = (f"Count {format_bytes(block.rounding_bytes)} more for {blocked} than its request: the "
                      "allocator holds that much beside it while it lives (at another size the request may fit "
                      "its block, or take a block twice its size). The at-peak figures count the requests.")
    if (gap > 0 or peak_short) and ran_xla_clusters(space.names):
        suggestion = ("This step ran XLA clusters: TensorFlow does not record what XLA allocates inside them, "
                      "which the allocator's readings count and the records do not (the step's note says which): "
                      f"{XLA_OFF_ADVICE}. " + suggestion)
    headline = abs(gap)
    too_high = 0  # how much the peak shown may be above the allocator's real one (variable writes, below)
    replaced_rows = _kept_variable_rows(space) if gap < 0 else []
    replaced = [(space.names.graph_names[code], kept) for code, kept in replaced_rows]
    if replaced:
        kept = sum(b for _, b in replaced)
        message += (f" {len(replaced)} resource variable write{'s keep' if len(replaced) > 1 else ' keeps'} a new buffer "
                    f"through the step ({', '.join(f'{n} ({format_bytes(b)})' for n, b in replaced[:TOP_NODES])}): "
                    "a resource variable given a new buffer drops its old one, allocated in an earlier step, in "
                    f"no record, so the records count up to {format_bytes(kept)} that the allocator gave back.")
        nodes += [n for n, _ in replaced[:TOP_NODES] if n not in nodes]
        # The real peak is at least the allocator's largest reading: the peak shown is too high by
        # no more than the bytes given back, nor than its excess over that reading.
        reading = int(trace.snapshot_bytes[top])
        too_high = kept if peak_bytes is None else min(kept, peak_bytes - reading)
        if too_high > 0:
            suggestion += (f" Here the peak shown may be up to {format_bytes(too_high)} too high: the allocator's "
                           f"largest reading, {format_bytes(reading)}, bounds it.")
        # Headed by what the writes explain, where they are: not the op that had just finished when the
        # gap against the readings' median was widest (a 1.5 MiB embedding update read "499.5 KiB in
        # MatMul_grad").
        layers = [space.names.layer(code).split("/") for code, _ in replaced_rows]
        # The writes' common layer (a partitioned variable's), else the largest one's.
        scope = "/".join(os.path.commonprefix(layers)) or "/".join(layers[0])
        headline = max(abs(gap), too_high)
    if peak_short:
        top_when, top_bytes = int(trace.snapshot_time_us[top]), int(trace.snapshot_bytes[top])
        top_node, _ = _finished_by(space, top_when)
        message += (f" Its largest reading, {format_bytes(top_bytes)} at {top_when / 1000:.3f} ms"
                    + (f" (after {top_node})" if top_node else "") + ", is above the step's peak from the records, "
                    f"{format_bytes(peak_bytes)} ({format_bytes(start)} before the step + a rise of "
                    f"{format_bytes(rise)}): the allocator saw {format_bytes(above_peak)} more than the records "
                    "account for, so the real peak is at least that much higher.")
        nodes += [top_node] if top_node and top_node not in nodes else []
        suggestion += " Size the step by the allocator's largest reading, not by the peak shown."
    # Where the readings climb above the records: after which ops (oneDNN's 3-D convolutions took 28 MiB
    # no record shows, read only as a gap "after gradients/sub_grad/Shape_1" and a largest reading).
    climbs = _climbs(space, excess, max(GAP_MIN_BYTES, GAP_MIN_SHARE * rise, unit)) if gap > 0 or peak_short else []
    if climbs and not (len(climbs) == 1 and climbs[0][0] in nodes):
        named = [f"{node} (+{format_bytes(grew)} at {at / 1000:.3f} ms)" if node else
                 f"a reading at {at / 1000:.3f} ms (+{format_bytes(grew)})" for node, grew, at in climbs]
        message += (" The readings climb above the records most after " + listed(named) + ": what ran just "
                    "before those readings took memory that no record shows (" + _unrecorded_by(space.names, space.trace.device_type)
                    + (", and a request's block holds more than the request" if block is not None else "") + ").")
        nodes += [node for node, _, _ in climbs if node and node not in nodes]
    return [Finding(
        ALLOCATOR_GAP, headline, scope, nodes, message, suggestion, trace.id,
        {"gap_bytes": gap, "above_bytes": max(above, 0), "below_bytes": max(below, 0), "time_us": when,
         "snapshot_count": int(trace.snapshot_bytes.size), "max_reading_bytes": int(trace.snapshot_bytes[top]),
         "max_reading_time_us": int(trace.snapshot_time_us[top]), "above_peak_bytes": above_peak,
         "peak_too_high_bytes": max(too_high, 0),
         "rounding": None if block is None else {"node": blocked, "request_bytes": block.request_bytes,
                                                 "block_bytes": block.block_bytes},
         "climbs": [{"node": node, "bytes": grew, "time_us": at} for node, grew, at in climbs]},
    )]


CLIMBS_NAMED = 3  # the largest climbs of the readings over the records an allocator_gap names


def _unrecorded_by(names, device_type: str) -> str:
    """What in this step allocates outside the records, by its op types and device: convolutions (oneDNN's on
    a CPU, cuDNN's on a GPU), XLA clusters, else library kernels in general (trial AG's transformer, which
    had neither, read that its convolutions and XLA clusters did)."""
    library = "cuDNN's and cuBLAS'" if device_type.upper() == "GPU" else "oneDNN's"
    sources = []
    if any("Conv" in op_type for op_type in names.op_type_names):
        sources.append(f"{library.split(' and ')[0]} convolutions")
    if ran_xla_clusters(names):
        sources.append("XLA clusters")
    if not sources:
        return f"library kernels such as {library} keep workspaces and caches outside the records"
    return listed(sources) + " allocate outside the records"


def _climbs(space, excess: np.ndarray, at_least: int) -> list[tuple[str | None, int, int]]:
    """(the op a reading follows, how much the readings' excess over the records grew since the
    reading before, the reading's time) of the `CLIMBS_NAMED` readings where it grew most, by
    `at_least` or more, in time order: where memory no record shows was taken."""
    times = space.trace.snapshot_time_us
    order = np.argsort(times, kind="stable")  # readings come in the nodes' order, not always in time's
    ordered = excess[order]
    grew = np.diff(ordered, prepend=ordered[:1] if ordered.size and ordered[0] < 0 else 0)
    rows = np.flatnonzero(grew >= at_least)
    rows = np.sort(rows[np.argsort(-grew[rows], kind="stable")[:CLIMBS_NAMED]])
    return [(_finished_by(space, int(times[order[i]]))[0], int(grew[i]), int(times[order[i]])) for i in rows.tolist()]


# -- undonated arguments ---------------------------------------------------------------------


def undonated_arguments(space) -> list[Finding]:
    """The JAX program running at the peak returns new values of its own arguments (its updated
    parameters and optimizer state, `(updated arguments)/<path>`) in blocks of their own, beside the
    arguments it was not allowed to overwrite: both are held, and donating the arguments frees one set."""
    peak = space.peak_exec()
    program = space.xla_program_of(peak) if peak is not None else None
    if program is None:
        return []
    trace, prefix = space.trace, UPDATED_ARGUMENTS + "/"
    at_peak = space.exec_columns[AT_PEAK]
    rows = [i for i in np.flatnonzero(at_peak > 0).tolist()
            if trace.name(i).startswith(prefix) and space.xla_program_of(i) == program]
    held = int(at_peak[rows].sum())
    if held < max(DONATE_MIN_BYTES, DONATE_MIN_SHARE * space.peak_rise_bytes):
        return []
    message = (f"`{program}`, running at the peak, returns new values of {len(rows)} of its own arguments, "
               f"{format_bytes(held)} ({held / space.peak_rise_bytes:.0%} of the peak rise): its updated parameters "
               f"and optimizer state (`{UPDATED_ARGUMENTS}`), in blocks of their own, because its caller did not "
               "donate the arguments they replace. Until it returns, the old values and the new are both held.")
    # The step's own argument names, from the values' paths (`p['dense']['kernel']` -> `p`).
    arguments = dict.fromkeys(match.group() for i in rows
                              if (match := _ARGUMENT_NAME_RE.match(trace.name(i)[len(prefix):])))
    named = ", ".join(f"'{name}'" for name in arguments)
    names = f"({named},)" if len(arguments) == 1 else f"({named})"
    suggestion = (f"Donate the arguments the step replaces ({named}): `jax.jit(train_step, donate_argnames={names})`, "
                  "or `donate_argnums` with their positions (`nnx.jit` takes either), and use only the values it "
                  "returns afterwards: XLA then writes the new values over the old ones, up to "
                  f"{format_bytes(held)} less at the peak. (Keras 3 on JAX donates its state itself.)")
    return [Finding(UNDONATED_ARGUMENTS, held, UPDATED_ARGUMENTS, [program], message, suggestion, trace.id,
                    {"program": program, "arguments": len(rows)})]


def variable_copies(space, step) -> list[Finding]:
    """Optimizer updates and assigns that gave their variable a new buffer, held at the peak: TensorFlow
    updates a resource variable in place unless its buffer is shared when the update runs, and then
    copies it first. A Saver's SaveV2 or a weight summary fetched with the train op reads the weights
    while they are updated: a trial's step held both weight matrices twice (32 MiB against 14 MiB
    without the save), shown as the optimizer's bytes with nothing to say why."""
    at_peak = space.name_column(AT_PEAK)
    codes = dict.fromkeys(code for code, _ in _kept_variable_rows(space, COPY_MIN_BYTES, values=False))
    rows = [(code, int(at_peak[code])) for code in codes if at_peak[code] > 0]
    held = _confirmed_at_peak(space, sum(bytes_at_peak for _, bytes_at_peak in rows))
    if not rows or held < max(COPY_MIN_BYTES, COPY_MIN_SHARE * space.peak_rise_bytes):
        return []
    rows.sort(key=lambda row: -row[1])
    names = space.names
    nodes = [names.graph_names[code] for code, _ in rows]
    readers = sorted({op for other in step.spaces for op in other.names.op_type_names if op in _VARIABLE_READERS})
    listed = ", ".join(f"{names.graph_names[code]} ({format_bytes(b)})" for code, b in rows[:TOP_NODES])
    recorded = sum(b for _, b in rows)
    # Where the readings contradict part of what the records hold (_confirmed_at_peak), the list adds up to more:
    # said, or it reads as an error (trial AA: 26.6 MiB above 24.4 + 24.4 + 2.9 x 3 MiB).
    net = (f"; the records' {format_bytes(recorded)}, less what the allocator's readings show was given back "
           "before the peak: allocator_gap" if recorded > held else "")
    message = (f"{len(rows)} variable update{'s' if len(rows) > 1 else ''} gave {'their variables' if len(rows) > 1 else 'its variable'} "
               f"a new buffer, {format_bytes(held)} held at the peak ({held / space.peak_rise_bytes:.0%} of the "
               f"peak rise{net}): {listed}. TensorFlow updates a variable in place unless its buffer is shared when the update "
               "runs (read by an op still using it, or shared with another variable since initialization), and "
               "then copies it: the old buffer and the new are both held."
               + (f" This step also ran {', '.join(readers)}, which may read the variables."
                  if readers else ""))
    where = ("outside the training step's function, after it returns" if step.trace.source == "xplane"
             else "in a Session.run of its own rather than beside the train op")
    if readers:
        suggestion = (f"Run what reads the variables (a checkpoint's save, weight summaries, fetching the weights) "
                      f"{where}, or make those reads wait for the updates (a control dependency): up to "
                      f"{format_bytes(held)} less at the peak.")
    else:  # no save or summary to move (a trial's embedding under TF1's sparse Adam had been told to move one)
        suggestion = ("No checkpoint save or weight summary ran in this step. Where it fetches none of these "
                      "variables either, the new buffers are the updates' own, an assign that could neither take "
                      "over its value's buffer nor write into the variable's (TF1's Adam on a sparse gradient, an "
                      "embedding's, assigns `m * beta1` to each slot before adding the rows' gradients): count them "
                      f"in the step's memory ({format_bytes(held)} at the peak). Where it fetches them, fetch them "
                      f"{where}, or after the updates (a control dependency). Where an op of the step still reads a "
                      "variable while its update runs (a second optimizer's or loss's gradients, nothing ordering "
                      "them), the update copies it: compute every gradient before any update (a control dependency, "
                      "or one minimize over the summed losses).")
    suggestion += (" A copy in the first step after initialization (a variable still sharing the constant it was "
                   "initialized from: a slot's zeros, which grappler folds into one) is not made again, but the "
                   "constant, which a TF1 session keeps for its initializer's run, stays in use beside the copy: "
                   "later steps start with it (their resident split's other says so).")
    layers = [names.layer(code).split("/") for code, _ in rows]
    scope = "/".join(os.path.commonprefix(layers)) or "/".join(layers[0])
    return [Finding(VARIABLE_COPIES, held, scope, nodes[:TOP_NODES], message, suggestion, space.trace.id,
                    {"at_peak_bytes": held, "updates": len(rows), "readers": readers,
                     "copies": [{"name": names.graph_names[code], "bytes": b} for code, b in rows[:TOP_NODES]]})]


def _confirmed_at_peak(space, held: int) -> int:
    """`held`, the bytes the records put at the peak in variables' new buffers, less what the allocator's
    readings contradict. A copy's old buffer goes back in no record (an earlier step's), so where the
    reader gave it back before the peak the records count it still, the peak shown is above the
    allocator's largest reading (`allocator_gap` says by how much), and the old and new buffers were not
    both held then: a reader done before the peak costs nothing there. The readings contradict no more
    than that much (a trial's sparse Adam held 49.2 MiB of copies at a peak 0.31 MiB above its largest
    reading, and had been told of none, where its twin at another batch, without a baseline, was told)."""
    trace = space.trace
    peak_bytes = space.peak_bytes
    if trace.snapshot_bytes.size == 0 or peak_bytes is None:
        return held
    over = peak_bytes - int(trace.snapshot_bytes.max())
    if over < max(GAP_MIN_BYTES, reading_unit(trace.snapshot_bytes)):  # the readings' rounding
        return held
    return max(held - over, 0)


# Ops that give a resource variable the value computed by another (their second input), whose
# buffer it then keeps: `v.assign(0.9 * v + 0.1 * g)`, as BERT's hand-written optimizer does. (A
# ref variable's `Assign` copies into its own buffer where the size is the same.)
_VALUE_ASSIGNS = frozenset({"AssignVariableOp"})


def _assigned_values_turn_over(space, left: int, history: list[tuple[int, int, int | None]], freed: int = 0) -> bool:
    """Whether nearly all (90%) of what a step left behind is variables' new buffers, values computed for
    their assigns included (BERT's optimizer), and that is turnover, not growth: every traced step of
    the run (`history`: step, bytes left behind, start) leaves as much behind, or their starts do not show
    it (from each step to the next they grow by under a twentieth of it; read only where the starts count
    such buffers: mklcpu's readings leave out those under 256 KiB). A variable given a bigger value each
    step (`tf.concat`) leaves more each step, and grows the start by what it adds. A trial's hand-written
    LAMB left 13.3 and 10.7 MiB of new buffers behind (one write more in the first step) while its start
    moved by 160 KiB."""
    writes = _kept_variable_buffers(space, smallest=1)
    if (sum(b for _, b in writes) - freed) * 10 < left * 9:  # `freed`: old buffers a profile saw given back
        return False
    lefts = [h[1] for h in history]
    if max(lefts) - min(lefts) <= max(lefts) // 20:
        return True
    starts = [h[2] for h in history]
    least = space.start_counts_from or 0
    if None in starts or any(b < least for _, b in writes if b * 10 >= left):
        return False
    return max(b - a for a, b in zip(starts, starts[1:])) * 20 < left


def _kept_variable_buffers(space, smallest: int = STEP_GROWTH_MIN_BYTES, values: bool = True) -> list[tuple[str, int]]:
    """(graph name, bytes) of the variable writes whose allocations outlive the step (`smallest`, 64
    KiB, and more each), largest first: new buffers whose old ones were freed in no record. A value an
    assign gives a variable (from its label's inputs) counts as the write's: its buffer is the
    variable's now."""
    names = space.names.graph_names
    return [(names[code], kept) for code, kept in _kept_variable_rows(space, smallest, values)]


def _kept_variable_rows(space, smallest: int = STEP_GROWTH_MIN_BYTES, values: bool = True) -> list[tuple[int, int]]:
    """`_kept_variable_buffers` by name code."""
    trace, names = space.trace, space.names
    op_types = names.op_type_names
    writer = names.of_op_type(lambda op: op.startswith(VARIABLE_WRITERS))  # the value assigns among them
    if not writer.any():
        return []
    kept = _left_by_exec(space)
    codes = [code for code, op in enumerate(op_types) if op in _VALUE_ASSIGNS] if values else []
    if codes:
        assigns = np.flatnonzero(np.isin(names.op_code, codes)).tolist()
        writer |= _assigned_values(space, [names.raw[i] for i in assigns])
    rows = np.flatnonzero(writer[trace.name_code] & (kept >= smallest))
    rows = rows[np.argsort(-kept[rows], kind="stable")]
    return [(int(trace.name_code[i]), int(kept[i])) for i in rows.tolist()]


_FORWARDS = 8  # ops a value may pass through in place (`0.9 * m` forwarded by `+ 0.1 * g`) before an assign


def _assigned_values(space, assigns: list[str]) -> np.ndarray:
    """Per distinct name: whether it made a value an assign gave a variable (the assign's second
    input, from its label), or a buffer such a value took over in place (`_made_from`)."""
    asked = [inputs[1] for inputs in map(label_inputs, labels_of(space.trace.label_of, assigns)) if len(inputs) > 1]
    return _made_from(space, asked)


def _fetched(space) -> np.ndarray:
    """Per distinct name: whether it made a tensor the step returns (TF1: `_retval_<node>_<port>_<n>`
    reads it, through ops that wrote it in their input's buffer, an Identity's or an in-place Relu's:
    `_made_from`). The session holds such a tensor after the step's last record, until Python takes
    it: it is left behind, not grown. An assign's result is the variable's, which keeps its buffer,
    and a tensor also put in a queue stays there: neither is the fetch's alone."""
    raw = space.names.raw
    retvals = [name for name in raw if name.startswith("_retval_")] if raw else []
    if not retvals:
        return np.zeros(len(raw), dtype=bool)
    fetched = _made_from(space, [name for inputs in map(label_inputs, labels_of(space.trace.label_of, retvals))
                                 for name in inputs], stop=_WRITES_A_VARIABLE)
    # A tensor fetched and also put in a queue or stack is kept there past the fetch: not returned alone.
    keepers = np.flatnonzero(space.names.of_op_type(lambda op: op.startswith(_KEEPING_OPS)) & ~fetched).tolist()
    if keepers and fetched.any():
        kept = [name for inputs in map(label_inputs, labels_of(space.trace.label_of, [raw[i] for i in keepers]))
                for name in inputs]
        fetched &= ~_made_from(space, kept)
    return fetched


# Ops that keep what they are given past the step (a queue's enqueue, a stack's push).
_KEEPING_OPS = ("QueueEnqueue", "StackPush", "TensorArrayWrite", "TensorArrayScatter", "TensorListPushBack")


# Ops whose output is a variable (a ref variable's assign, an optimizer's apply): what they write stays.
_WRITES_A_VARIABLE = ("Assign", "Apply", "ResourceApply", "SparseApply", "ResourceSparseApply", "Scatter",
                      "ResourceScatter")


def _made_from(space, asked: list[str], stop: tuple[str, ...] = ()) -> np.ndarray:
    """Per distinct name: whether it is one of the names `asked`, or an input of one that allocated
    nothing itself (it forwarded or wrote into an input's buffer: an Identity, an in-place Relu; not
    through op types starting with one of `stop`), up to `_FORWARDS` ops back."""
    names = space.names
    allocated = scatter_sum(space.name_code, space.trace.allocated, len(names.raw))
    row_of = {name: i for i, name in enumerate(names.raw)}
    found = np.zeros(len(names.raw), dtype=bool)
    for _ in range(_FORWARDS):
        rows = [row_of[name] for name in dict.fromkeys(asked) if name in row_of and not found[row_of[name]]]
        if not rows:
            break
        found[rows] = True
        in_place = [names.raw[i] for i in rows if allocated[i] == 0 and not names.op_type(i).startswith(stop)]
        asked = [name for inputs in map(label_inputs, labels_of(space.trace.label_of, in_place)) for name in inputs]
    return found


def findings_of_step(step, ref, run_refs: Sequence, analyse, run_graph=None) -> list[dict]:
    """The findings of the step `ref` names, as JSON-ready dicts; `analyse(ref)` analyses another
    step of its run (`run_refs`) for growth. Computed once per step and set of compared steps."""
    compared = tuple(compared_refs(run_refs, ref))

    def compute() -> list[dict]:
        run_steps = [(r.step, step if r == ref else analyse(r)) for r in compared]
        model = run_graph.model if run_graph is not None else None
        ok = [(number, other) for number, other in run_steps if other.status == "ok"]
        return [finding.as_dict() for finding in step_findings(step, model, ok)]

    return step.memoized(("findings", compared, run_graph is not None), compute)
