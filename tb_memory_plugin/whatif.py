"""Batch-size what-if: a step's peak at another batch size, and the layers that would hold it.

Two predictions (docs/figures.md, "Batch-size what-if"):

- **one step**: the allocation events whose tensors carry the batch dimension
  are scaled by N / (traced batch) and the records replayed in their order;
- **fit**: from steps of the same graph at several batch sizes, each layer's
  bytes at the peak are fitted as fixed + per-sample x N (least squares,
  exact through two points).

With a memory limit (or the allocator's capacity, where the trace reports
one), the largest batch whose predicted peak fits. Plain Python + numpy.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._numeric import scatter_sum
from .analysis import SpaceAnalysis, StepAnalysis
from .figures import ACTIVATIONS, AT_PEAK, INPUTS, OPTIMIZER
from .trace import labels_of

# Ops whose output has a variable's shape: a tensor of that shape is a parameter
# (or its gradient, or a slot), even when its first dimension equals the batch.
_VARIABLE_READS = frozenset({"ReadVariableOp", "_ReadVariablesOp", "VariableV2", "Variable"})
# GPU allocators round a request up (BFC: to 256 bytes): a record this much above an
# output's requested bytes is still that output.
_ROUNDING = 256
# Profiles record the BFC chunk an allocation got: a chunk is split only when it is at least
# twice the rounded request, so it can be up to twice the request (rounded to 256 bytes).
_CHUNK_SOURCES = frozenset({"xplane"})
# `[cpu 0.1MB 0.1MB] name = Op(in_1, in_2:1, ^control)`
_INPUTS_RE = re.compile(r"=\s*[^(]*\((?P<inputs>.*)\)\s*$")
MAX_BATCH_SEARCHED = 1 << 24  # above this a batch "always fits" (nothing grows with the batch)
TOP_LAYERS = 10


class WhatIfError(ValueError):
    """The step cannot answer a what-if (no shapes, no batch in the feeds, one batch size to fit)."""


# -- which bytes carry the batch ----------------------------------------------------------


def layer_of(layer_path: str) -> str:
    """The layer a node belongs to: its layer path's scope, cut before a `*_grad` component.

    `shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput` -> `shared_model/unet_01`;
    an op with no scope (`Mean`) is its own layer.
    """
    parts = layer_path.split("/")
    cut = next((i for i, part in enumerate(parts) if part.endswith("_grad")), len(parts) - 1)
    return "/".join(parts[:cut]) or layer_path


def _label_inputs(label: str) -> list[str]:
    """Node names of a label's data inputs (ports and control inputs dropped)."""
    match = _INPUTS_RE.search(label or "")
    if not match:
        return []
    names = (part.strip() for part in match.group("inputs").split(","))
    return [name.split(":", 1)[0] for name in names if name and not name.startswith("^")]


def _leading_dims(step: StepAnalysis, category: int, min_rank: int, weight) -> collections.Counter:
    """First dimensions of the outputs of the names of one category, over all memory spaces."""
    leading: collections.Counter = collections.Counter()
    for space in step.spaces:
        outputs_of = space.trace.outputs_of
        if outputs_of is None:
            continue
        names = [space.names.raw[i] for i in np.flatnonzero(space.names.category == category).tolist()]
        for outputs in outputs_of(names):
            for shape, _ in outputs:
                if len(shape) >= min_rank and shape[0] > 0:
                    leading[shape[0]] += weight(shape)
    return leading


def traced_batch(step: StepAnalysis) -> int:
    """The batch size the step ran at: the commonest first dimension of the feeds' outputs
    (`_arg_*`, placeholders, iterators) over all memory spaces.

    A profile (XPlane) holds no feed: the input pipeline prefetched the batch before the step
    and the step's function takes it as an argument, allocating nothing. There the batch is the
    commonest first dimension of the forward pass's tensors (activations) of rank 2 or more,
    each counted by its rank: a matmul's `[batch x seq, d]` is the reshaped `[batch, seq, d]`
    of the ops around it.
    """
    leading = _leading_dims(step, INPUTS, 1, lambda shape: 1)
    if not leading and step.trace.source in _CHUNK_SOURCES:
        leading = _leading_dims(step, ACTIVATIONS, 2, len)
    if not leading:
        if not any(space.trace.outputs_of for space in step.spaces):
            raise WhatIfError(f"a {step.trace.source} trace keeps no output shapes here: "
                              "the batch dimension cannot be found")
        if step.trace.source in _CHUNK_SOURCES:
            raise WhatIfError("no input op and no forward-pass tensor with a shape of rank 2 or more: "
                              "cannot tell the traced batch size")
        raise WhatIfError("no feed or input op with a shape: cannot tell the traced batch size")
    return max(leading.items(), key=lambda item: (item[1], item[0]))[0]


@dataclass
class _Outputs:
    """What the outputs of each distinct name of one step say about the batch."""

    batch_bytes: dict[str, set[int]]  # requested bytes of its outputs that carry the batch
    other_bytes: dict[str, set[int]]  # of its other outputs
    uses_batch: dict[str, bool]  # an output or a data input carries the batch


def _outputs(step: StepAnalysis, batch: int) -> _Outputs:
    shapes: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    labels: dict[str, str] = {}
    parameter_shapes: set[tuple[int, ...]] = set()
    for space in step.spaces:
        outputs_of = space.trace.outputs_of
        if outputs_of is None:
            continue
        fresh = [(index, name) for index, name in enumerate(space.names.raw) if name not in shapes]
        wanted = [name for _, name in fresh]
        labels.update(zip(wanted, labels_of(space.trace.label_of, wanted)))
        for (index, name), outputs in zip(fresh, outputs_of(wanted)):
            shapes[name] = outputs
            # Variable reads (graphs) and optimizer updates (profiles, where reads allocate
            # nothing) have parameters' shapes.
            if space.names.op_types[index] in _VARIABLE_READS or space.names.category[index] == OPTIMIZER:
                parameter_shapes.update(shape for shape, _ in shapes[name] if shape)
    batch_bytes, other_bytes, carries = {}, {}, {}
    for name, outputs in shapes.items():
        batched = [shape for shape, _ in outputs if shape and shape[0] == batch and shape not in parameter_shapes]
        # oneDNN's workspaces (batch norm, max pool) are flat: one dimension, a multiple of the
        # batch, longer than a per-channel vector of the op's batch output.
        channels = max((shape[-1] for shape in batched), default=None)
        with_batch = {size for shape, size in outputs if shape in batched or (
            channels is not None and len(shape) == 1 and shape[0] % batch == 0 and shape[0] > channels
            and shape not in parameter_shapes)}
        batch_bytes[name] = with_batch
        other_bytes[name] = {size for _, size in outputs} - with_batch
        carries[name] = bool(with_batch)
    uses = {name: carries[name] or any(carries.get(i, False) for i in _label_inputs(labels[name]))
            for name in shapes}
    return _Outputs(batch_bytes, other_bytes, uses)


def _best_match(size: int, sizes: set[int], chunks: bool) -> int:
    """The largest requested size an allocation of `size` bytes can hold (0: none): within the
    allocator's 256-byte rounding, or for a BFC chunk (`chunks`) below twice the rounded request."""
    def fits(s: int) -> bool:
        return s > 0 and s <= size < (2 * -(-s // _ROUNDING) * _ROUNDING if chunks else s + _ROUNDING)
    return max((s for s in sizes if fits(s)), default=0)


# -- one traced step ------------------------------------------------------------------------


@dataclass
class Prediction:
    """A predicted peak at one batch size."""

    batch: int
    peak_rise_bytes: int
    start_bytes: int | None  # predicted bytes in use before the step; None without a baseline
    layers: list[dict]  # largest first: {"layer", "at_peak_bytes", ...}

    @property
    def peak_bytes(self) -> int | None:
        return None if self.start_bytes is None else self.start_bytes + self.peak_rise_bytes


class OneStep:
    """Predicts from one traced step: batch-carrying events scaled, the records replayed."""

    method = "one_step"

    def __init__(self, step: StepAnalysis, space: SpaceAnalysis) -> None:
        self.space = space
        self.batch = traced_batch(step)
        outputs = _outputs(step, self.batch)
        trace = space.trace
        names = [trace.distinct_names[code] for code in range(len(trace.distinct_names))]
        empty: set[int] = set()
        # Per event: does it scale? Per distinct name first, then per event by its size.
        uses = np.array([outputs.uses_batch.get(n, False) for n in names], dtype=bool)
        event_name = trace.name_code[trace.event_exec] if trace.event_exec.size else trace.event_exec
        sizes = np.abs(trace.event_bytes)
        scales = uses[event_name] if event_name.size else np.zeros(0, dtype=bool)
        chunks = step.trace.source in _CHUNK_SOURCES
        for position in np.flatnonzero(uses[event_name] if event_name.size else scales).tolist():
            name = names[int(event_name[position])]
            size = int(sizes[position])
            # The tensor it holds: the closest-fitting of the op's sizes (none: a temporary).
            batch = _best_match(size, outputs.batch_bytes.get(name, empty), chunks)
            other = _best_match(size, outputs.other_bytes.get(name, empty), chunks)
            if other > batch:
                # A non-batch tensor of a batch op: a max-pool's indices, a profiled convolution's
                # fixed-size scratch.
                scales[position] = False
        self.scales = scales
        # Bytes held before the step that grow with the batch: feeds, batch-shaped constants.
        resident = 0
        for code, name in enumerate(names):
            if space.names.category[code] == INPUTS:
                resident += sum(outputs.batch_bytes.get(name, empty))
        persistent = np.flatnonzero(trace.persistent > 0)
        for execution in persistent.tolist():
            kept = int(trace.persistent[execution])
            if kept in outputs.batch_bytes.get(trace.name(execution), empty):
                resident += kept
        self.resident_batch_bytes = resident
        self._layer_names, self._layer_of_name = _layers(space)

    @cached_property
    def scaled_share(self) -> float:
        """Share of the traced peak rise held by batch-carrying events (for the page's note)."""
        peak = self.space.curve.events_up_to_peak()
        rise = self.space.peak_rise_bytes
        if rise <= 0:
            return 0.0
        return float(self.space.trace.event_bytes[peak][self.scales[peak]].sum()) / rise

    def _events_at(self, batch: int) -> np.ndarray:
        factor = batch / self.batch
        event_bytes = self.space.trace.event_bytes
        # rint is symmetric, so an allocation and its free scale to the same bytes.
        return np.where(self.scales, np.rint(event_bytes * factor), event_bytes).astype(np.int64)

    def _replay(self, batch: int) -> tuple[np.ndarray, int, int]:
        """(scaled events, index into sorted events of the peak's last event or -1, peak rise)."""
        curve = self.space.curve
        events = self._events_at(batch)
        if curve.group_end.size == 0:
            return events, -1, 0
        rise = np.cumsum(events[curve.event_order])[curve.group_end]
        peak = int(np.argmax(rise))
        if rise[peak] <= 0:
            return events, -1, 0
        return events, int(curve.group_end[peak]), int(rise[peak])

    def peak_rise(self, batch: int) -> int:
        return self._replay(batch)[2]

    def start_bytes(self, batch: int) -> int | None:
        start = self.space.start_bytes
        if start is None:
            return None
        return start + int(round(self.resident_batch_bytes * (batch / self.batch - 1)))

    def predict(self, batch: int, top: int = TOP_LAYERS) -> Prediction:
        events, last, rise = self._replay(batch)
        trace = self.space.trace
        held = np.zeros(len(self._layer_names), dtype=np.int64)
        if last >= 0:
            upto = self.space.curve.event_order[: last + 1]
            by_exec = scatter_sum(trace.event_exec[upto], events[upto], trace.exec_count)
            held = scatter_sum(self._layer_of_name[trace.name_code], by_exec, len(self._layer_names))
        traced = scatter_sum(self._layer_of_name[trace.name_code], self.space.exec_columns[AT_PEAK],
                             len(self._layer_names))
        order = np.lexsort((np.arange(held.size), -held))[:top]
        layers = [{"layer": self._layer_names[i], "at_peak_bytes": int(held[i]),
                   "traced_at_peak_bytes": int(traced[i])} for i in order.tolist() if held[i] > 0]
        return Prediction(batch, rise, self.start_bytes(batch), layers)


def _layers(space: SpaceAnalysis) -> tuple[list[str], np.ndarray]:
    """Layer names, and the layer of each distinct name (grouped by layer: gradients and
    optimizer updates folded into their layer)."""
    of_name = [layer_of(path) for path in space.names.layer_paths]
    layer_names = sorted(set(of_name))
    code = {name: i for i, name in enumerate(layer_names)}
    return layer_names, np.fromiter((code[n] for n in of_name), dtype=np.int64, count=len(of_name))


def one_step(step: StepAnalysis, space: SpaceAnalysis) -> OneStep:
    """The one-step predictor of a space, built once per analysed step."""
    return step.memoized(("whatif", space.trace.id), lambda: OneStep(step, space))


# -- several batch sizes --------------------------------------------------------------------


@dataclass
class _Point:
    batch: int
    space: SpaceAnalysis


class Fitted:
    """Per layer, bytes at the peak = fixed + per-sample x batch, fitted over traced steps."""

    method = "fit"

    def __init__(self, points: list[tuple[int, SpaceAnalysis]]) -> None:
        batches = sorted({batch for batch, _ in points})
        if len(batches) < 2:
            raise WhatIfError("a fit needs steps at two batch sizes at least (got "
                              f"{', '.join(map(str, batches)) or 'none'})")
        per_run = []
        for batch, space in points:
            names, of_name = _layers(space)
            held = scatter_sum(of_name[space.trace.name_code], space.exec_columns[AT_PEAK], len(names))
            per_run.append(dict(zip(names, held.tolist())))
        self.layer_names = sorted(set().union(*per_run))
        held = np.array([[run.get(name, 0) for name in self.layer_names] for run in per_run], dtype=np.float64)
        design = np.column_stack([np.ones(len(points)), [batch for batch, _ in points]])
        self._coef = np.linalg.lstsq(design, held.reshape(len(points), -1), rcond=None)[0]  # (2, layers)
        starts = [space.start_bytes for _, space in points]
        self._start = (None if None in starts
                       else np.linalg.lstsq(design, np.array(starts, dtype=np.float64), rcond=None)[0])
        self.batches = [batch for batch, _ in points]

    def _layer_bytes(self, batch: int) -> np.ndarray:
        return np.rint(self._coef[0] + self._coef[1] * batch).astype(np.int64)

    def peak_rise(self, batch: int) -> int:
        return max(int(self._layer_bytes(batch).sum()), 0)

    def start_bytes(self, batch: int) -> int | None:
        return None if self._start is None else int(round(self._start[0] + self._start[1] * batch))

    def predict(self, batch: int, top: int = TOP_LAYERS) -> Prediction:
        held = self._layer_bytes(batch)
        order = np.lexsort((np.arange(held.size), -held))[:top]
        layers = [{"layer": self.layer_names[i], "at_peak_bytes": int(held[i]),
                   "fixed_bytes": int(round(self._coef[0, i])), "per_sample_bytes": int(round(self._coef[1, i]))}
                  for i in order.tolist() if held[i] > 0]
        return Prediction(batch, self.peak_rise(batch), self.start_bytes(batch), layers)


# -- the largest batch that fits --------------------------------------------------------------


def predicted_bytes(predictor, batch: int, absolute: bool) -> int:
    """The predicted peak (absolute bytes in use, or the rise over the step's start)."""
    rise = predictor.peak_rise(batch)
    if not absolute:
        return rise
    return predictor.start_bytes(batch) + rise


def max_batch(predictor, limit: int, absolute: bool) -> int | None:
    """The largest batch whose predicted peak is at most `limit` (0: not even 1);
    None when nothing grows with the batch (every batch fits)."""
    if predicted_bytes(predictor, 1, absolute) > limit:
        return 0
    low, high = 1, 2
    while predicted_bytes(predictor, high, absolute) <= limit:
        low, high = high, high * 2
        if high > MAX_BATCH_SEARCHED:
            return None
    while high - low > 1:  # predicted(low) fits, predicted(high) does not
        middle = (low + high) // 2
        if predicted_bytes(predictor, middle, absolute) <= limit:
            low = middle
        else:
            high = middle
    return low


def series_batches(batch: int, traced: list[int], fits: int | None, points: int = 48) -> list[int]:
    """Batch sizes for a chart of predicted peak against batch: 1 up to past the largest of
    interest, at most `points` of them, the ones of interest always included."""
    top = max([batch, *traced, *([fits + 1] if fits else [])]) * 2
    step = max(1, -(-top // points))
    return sorted({*range(1, top + 1, step), batch, *traced, *([fits, fits + 1] if fits else []), top})


# -- one question: a batch, the traced steps, a limit ------------------------------------------


@dataclass
class Traced:
    """One traced step the what-if reads: where it comes from and its memory space."""

    run: str
    tag: str
    step_number: int
    source: str
    step: StepAnalysis
    space: SpaceAnalysis

    @cached_property
    def batch(self) -> int:
        return traced_batch(self.step)


class WhatIf:
    """The predictions for one batch size: one step from the first traced step, a fit when the
    steps hold two batch sizes or more; the largest batch under a limit (the allocator's
    capacity where the trace has one and no limit is given)."""

    def __init__(self, steps: list[Traced], batch: int, limit: int | None = None) -> None:
        if not steps:
            raise WhatIfError("no traced step to predict from")
        self.steps, self.batch = steps, batch
        first = steps[0]
        if not first.space.has_curve:
            raise WhatIfError(f"{first.run} {first.tag} has no allocation records: no peak to scale")
        self.one_step = one_step(first.step, first.space)
        batches = {s.batch for s in steps}
        self.fitted = Fitted([(s.batch, s.space) for s in steps]) if len(batches) > 1 else None
        capacity = first.space.trace.capacity_bytes
        self.limit, self.limit_source = ((limit, "limit") if limit is not None
                                         else (capacity, "capacity") if capacity else (None, None))

    @property
    def predictors(self) -> dict:
        """The predictions made, the one the answer leads with first (the fit when there is one)."""
        made = {"one_step": self.one_step}
        return {"fit": self.fitted, **made} if self.fitted is not None else made

    @property
    def lead(self):
        return next(iter(self.predictors.values()))

    def absolute(self, predictor) -> bool:
        """Whether the limit applies to absolute bytes (a baseline is known) or to the rise."""
        return predictor.start_bytes(self.batch) is not None

    def max_batch(self, predictor) -> int | None:
        if self.limit is None:
            return None
        return max_batch(predictor, self.limit, self.absolute(predictor))
