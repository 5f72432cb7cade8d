"""Batch-size what-if: a step's peak at another batch size, and the layers that would hold it.

Two predictions (docs/figures.md, "Batch-size what-if"):

- **one step**: the allocation events whose tensors carry the batch dimension
  are scaled by N / (traced batch) and the records replayed in their order;
- **fit**: from steps of the same graph at several batch sizes, each layer's
  bytes at the peak are fitted as fixed + per-sample x N (least squares,
  exact through two points, but for a layer holding the same requests in other chunks,
  fixed at its mean).

With a memory limit (or a device allocator's capacity, where the trace reports
one), the largest batch whose predicted peak fits. Plain Python + numpy.
"""

from __future__ import annotations

import collections
import itertools
import operator
import re
from dataclasses import dataclass
from typing import Callable
from functools import cached_property

import numpy as np

from ._numeric import scatter_sum
from .analysis import (NOTED_PROGRAM_SHARE, SpaceAnalysis, StepAnalysis, unattributed_note, xla_clusters,
                       xla_programs_share)
from .compare import SAME_MODEL_SHARE  # what two steps of one model share, at least
from .figures import (ACTIVATIONS, ALLOCATED, AT_PEAK, CATEGORIES, GRADIENTS, INPUTS, OPTIMIZER, OUTPUT, format_bytes,
                      listed, other_chunks)
from . import resident as resident_mod, store as store_mod
from .findings import allocator_gap, cpu_working_set_scratch, readings_above, variable_copies
from .names import REPLICA_RE, XLA_OFF_ADVICE, XLA_PROGRAM_OP_TYPE, label_inputs, renumbering
from .trace import BFC_ROUNDING, DEVICE_MEMORY, ProgramShapes, labels_of

# Ops whose output has a variable's shape: a tensor of that shape is a parameter
# (or its gradient, or a slot), even when its first dimension equals the batch.
_VARIABLE_READS = frozenset({"ReadVariableOp", "_ReadVariablesOp", "VariableV2", "Variable"})
# Casts: mixed precision casts each weight to float16 in the forward pass (`fc/Cast/Cast`), a
# tensor shaped like the parameter because it is one, not a batch that matches a layer's width.
_CAST_OPS = frozenset({"Cast"})
# A loop's outputs stacked over its iterations (`TensorArray.stack()`, `tf.scan`, a dynamic RNN's
# outputs): `[steps, ...]`, each step a tensor the loop's body made.
_TRANSPOSE_OPS = frozenset({"Transpose", "ConjugateTranspose"})  # not a layout transpose's (oneDNN's as the graph's)
_STACK_OPS = frozenset({"TensorListStack", "TensorArrayGatherV3", "TensorArrayGatherV2", "TensorArrayPack"})
# tf.dynamic_partition splits its input's rows among its outputs by the data (a mixture of experts' router):
# each output holds a share of the batch, whose first dimension no shape says carries it.
_PARTITION_OPS = frozenset({"DynamicPartition"})
_PARTITION_SHARE_MIN = 8  # a share of fewer rows is no length to tell tensors by
# GPU allocators round a request up (BFC: to 256 bytes): a record this much above an
# output's requested bytes is still that output. A BFC allocator's records (a profile's, a GPU's, the
# CPU's with TF_CPU_ALLOCATOR_USE_BFC) are the chunks requests got: a chunk is split only when it is at
# least twice the rounded request, so it can be up to twice the request (`chunking`; trace.BFC_ROUNDING).

XPLANE_SOURCE = "xplane"  # a profile's steps (Trace.source, store.StepRef.source)
# Share of the traced peak rise that carries the batch, below which a one step says so: a ragged model's values
# (as long as its tokens, not its batch) had left 2-3% scaled, its prediction at 4 times the batch 47% low unsaid.
_FEW_SCALED = 0.05
_FED_SHARE_OF_FORWARD = 4  # an input's batch stands where a quarter of the forward pass's votes hold it
# Share of the peak rise XLA programs hold, at least, for a step to be theirs. Between the share its
# note names them at (analysis.NOTED_PROGRAM_SHARE) and this, the programs are too big to leave
# unscaled and the ops too big to ignore: the step's batch is not read, but asked for.
_XLA_STEP_SHARE = 0.5
# Forward-pass votes (tensors of rank 2 or more, each counted by its rank) by which TensorFlow's ops beside
# XLA programs compute a forward pass of their own (`programs_beside_ops`): this many at least for one first
# dimension, and three quarters of them. Trial Y's ConvNeXtTiny had 94% of 850 for its batch, a test's three
# grouped-convolution blocks 86% of 88; a jitted gradient clip beside eager updates 60% of 60 for the
# updates' `[512, 512]`; the steps XLA compiled whole none.
_OPS_FORWARD_VOTES = 32
_OPS_FORWARD_SHARE = 0.75
# The fit and the one step this far apart at the batch asked (of the larger) are said to be: one of them
# is off, and the traced steps alone cannot say which (a TF1 LSTM's fit had read 12% under the one step).
_PREDICTIONS_APART = 0.10
MAX_BATCH_SEARCHED = 1 << 24  # no batch up to this one reaching the limit: any batch fits (max_batch None)
TOP_LAYERS = 10


class WhatIfError(ValueError):
    """The step cannot answer a what-if (no shapes, no batch in the feeds, one batch size to fit)."""


# -- which bytes carry the batch ----------------------------------------------------------


def _rows_of(space: SpaceAnalysis, category: int) -> np.ndarray:
    """The names of one category; of the inputs, the step's own (`NameTable.step_inputs`), but a table fed
    whole to a PlaceholderWithDefault (`NameTable.fed_defaults`), which says nothing of the batch (review AJ:
    a `[2000, 64]` table beside a `[6, 64]` batch had read as batch 2000; trial AG's had been warned of as a
    feed of items)."""
    if category != INPUTS:
        return np.flatnonzero(space.names.category == category)
    rows = np.flatnonzero(space.names.step_inputs)
    fed = space.names.fed_defaults
    return rows[~np.isin(rows, list(fed))] if fed else rows


def _shapes_of(step: StepAnalysis, category: int, skip: Callable[[str], bool] | None = None):
    """The shapes of the outputs of the names of one category (`_rows_of`; but those `skip` says),
    over all memory spaces."""
    return (shape for _, shape in _named_shapes_of(step, category, skip))


def _named_shapes_of(step: StepAnalysis, category: int, skip: Callable[[str], bool] | None = None):
    """(graph name, shape) of each output of the names of one category (`_shapes_of`)."""
    for space in step.spaces:
        outputs_of = space.trace.outputs_of
        if outputs_of is None:
            continue
        rows = [i for i in _rows_of(space, category).tolist() if not (skip and skip(space.names.raw[i]))]
        for row, outputs in zip(rows, outputs_of([space.names.raw[i] for i in rows])):
            for shape, _ in outputs:
                yield space.names.graph_names[row], shape


def _leading_dims(step: StepAnalysis, category: int, min_rank: int, weight,
                  skip: Callable[[str], bool] | None = None) -> collections.Counter:
    """First dimensions of the outputs of the names of one category (`_rows_of`), over all memory spaces."""
    leading: collections.Counter = collections.Counter()
    for shape in _shapes_of(step, category, skip):
        if len(shape) >= min_rank and shape[0] > 0:
            leading[shape[0]] += weight(shape)
    return leading


# A fed SparseTensor's parts (`tf.compat.v1.sparse_placeholder`): its indices and values are as long as
# it has entries, not as the batch (its dense shape holds the batch, as a value no trace keeps).
_SPARSE_FEED_RE = re.compile(r"^_arg_.+/(?:indices|values|shape|dense_shape)_\d+_\d+$")


def traced_batch(step: StepAnalysis) -> int:
    """The batch size the step ran at, each replica's where a distribution strategy runs several
    (`global_batch` is theirs together): the commonest first dimension of the feeds' outputs
    (`_arg_*`, placeholders, iterators) over all memory spaces.

    A profile (XPlane) holds no feed: the input pipeline prefetched the batch before the step
    and the step's function takes it as an argument, allocating nothing (its ops in the step
    work on later batches, a `map` example by example). There the batch is the commonest first
    dimension of the forward pass's tensors (activations) of rank 2 or more, each counted by
    its rank: a matmul's `[batch x seq, d]` is the reshaped `[batch, seq, d]` of the ops
    around it; or the input ops' commonest first dimension (of rank 2 or more: batched
    examples), where a quarter of those votes hold it too. Where feeds tie (as many images as
    boxes fed), the forward pass's tensors decide between them.
    """
    if unattributed_note(step.spaces):
        raise WhatIfError("most of this step's peak is memory TensorFlow named no op for (up to 2.17: a function XLA "
                          "compiled, as a Keras fit with jit_compile=True runs it), which carries no shape to scale: "
                          "profile a step compiled without XLA (jit_compile=False)")
    beside_ops = programs_beside_ops(step)
    if ran_xla(step) and not beside_ops:
        return program_batch(step.trace.program_shapes)
    if (share := xla_programs_share(step.spaces)) >= NOTED_PROGRAM_SHARE and not beside_ops:
        raise WhatIfError(f"XLA programs hold {share:.0%} of this step's peak rise beside TensorFlow's ops: neither "
                          "the programs' data nor the ops' shapes alone tell its batch here; give the batch it ran "
                          "at (traced batch; the CLI's --traced-batch)")
    if clusters := xla_clusters(step.spaces):
        raise WhatIfError(f"this step ran XLA clusters ({clusters[0]}{', ...' if len(clusters) > 1 else ''}), whose "
                          "allocations TensorFlow does not record: the what-if cannot scale memory it does not see "
                          f"({XLA_OFF_ADVICE})")
    if step.trace.source == XPLANE_SOURCE:
        # In a profile the input ops in the step are the input pipeline's threads at work on the
        # next batches: a `map` runs per example (an image's [32, 32, 3] would read as batch 32),
        # so the forward pass decides, and the inputs only where it has no shaped tensor; but an
        # input's first dimension that a good share of the forward pass's tensors have too is the
        # batch (Keras slicing it), where an optimizer's update tensors outvote it (Keras 2.12's
        # `[3, 3, 16, 32]`, under no scope of their own).
        forward = _leading_dims(step, ACTIVATIONS, 2, len)
        fed = _leading_dims(step, INPUTS, 2, lambda shape: 1)  # batched examples (one example: `[20]` tokens)
        batch = _commonest(fed) if fed else None
        if batch is not None and forward[batch] * _FED_SHARE_OF_FORWARD >= sum(forward.values()):
            return batch
        leading = forward or _leading_dims(step, INPUTS, 1, lambda shape: 1)
    else:
        leading = (_leading_dims(step, INPUTS, 1, lambda shape: 1, _SPARSE_FEED_RE.match)
                   or _leading_dims(step, INPUTS, 1, lambda shape: 1))
        most = max(leading.values(), default=0)
        tied = [dim for dim, votes in leading.items() if votes == most]
        if len(tied) > 1:
            # As many feeds of each (images `[6, 16]` and their boxes `[24, 8]`): the forward pass's
            # tensors decide, each counted by its rank, then the larger.
            forward = _leading_dims(step, ACTIVATIONS, 2, len)
            return max(tied, key=lambda dim: (forward[dim], dim))
    if not leading:
        if not any(space.trace.outputs_of for space in step.spaces):
            raise WhatIfError(f"a {step.trace.source} trace keeps no output shapes here: "
                              "the batch dimension cannot be found")
        if step.trace.source == XPLANE_SOURCE:
            raise WhatIfError("no input op and no forward-pass tensor with a shape of rank 2 or more: "
                              "cannot tell the traced batch size")
        raise WhatIfError("no feed or input op with a shape: cannot tell the traced batch size")
    return _commonest(leading)


def ran_xla(step: StepAnalysis) -> bool:
    """Whether the step is one of XLA programs (JAX, Keras 3 on JAX, TensorFlow's jit_compile): they
    hold half its peak rise or more, in a few blocks XLA lays out again for each batch size. A
    TensorFlow step whose ops run a jitted helper beside them (a gradient clip) is its ops': its
    batch is read from their shapes, and they are scaled, the helper's bytes kept."""
    return xla_programs_share(step.spaces) >= _XLA_STEP_SHARE


def programs_beside_ops(step: StepAnalysis) -> bool:
    """Whether a profile's XLA programs, holding a share of the peak its note names, ran beside TensorFlow
    ops that compute a forward pass of their own (most of its tensors share a first dimension:
    `_OPS_FORWARD_VOTES`), one the programs take as data: Keras 3 runs a grouped convolution (ConvNeXt's
    depthwise ones) as XLA programs on a CPU, within a step of TensorFlow's ops. The batch is then the ops'
    (the programs' data had read trial Y's ConvNeXtTiny at 4 and 8 as batch 7, its kernels' width), and the
    step is fitted over batches, not scaled alone: the programs' own bytes (a depthwise filter's gradient, laid
    out dense: 220 MiB of that step's 363) need not grow with the batch. A program that is the whole step
    (jit_compile, JAX) leaves at most a few tensors to TensorFlow's ops, none of them a forward pass."""
    if step.trace.source != XPLANE_SOURCE or xla_programs_share(step.spaces) < NOTED_PROGRAM_SHARE:
        return False
    forward = _leading_dims(step, ACTIVATIONS, 2, len)
    if not forward:
        return False
    batch, votes = forward.most_common(1)[0]
    if votes < _OPS_FORWARD_VOTES or votes < _OPS_FORWARD_SHARE * sum(forward.values()):
        return False
    # The programs take the ops' batch as data (a convolution's input): a program over no such data (a jitted
    # gradient clip, an optimizer's update) leaves the step's bytes to its own reading.
    shapes = step.trace.program_shapes
    return shapes is not None and any(dims and dims[0] == batch for dims in shapes.inputs)


def program_batch(shapes: ProgramShapes | None) -> int:
    """An XLA step's batch: of the first dimensions of the data its main program takes (hlo.py:
    arguments that are neither its parameters nor their optimizer state), the one that the most
    of the values it computes have too (an image batch `[32, 28, 28, 1]` and labels `[32]`, not a
    random key `[2]`, nor a weight it only reads, `[784, 512]`); of equal counts, the one more
    arguments have, then the larger. A program that takes no such data (a closure's arrays are its
    constants) has the commonest first dimension of its values of rank 2 or more, as a profile's
    forward pass does. In a program sharded over devices (pmap, SPMD) these are each device's
    shapes: the batch read is each device's share."""
    if shapes is None or not (shapes.inputs or shapes.leading):
        raise WhatIfError("the batch of this step's XLA programs cannot be read: the profile holds no compiled HLO "
                          "that matches their runs (`--traced-batch` in the CLI gives the batch each run ran at)")
    arguments = collections.Counter(dims[0] for dims in shapes.inputs if dims[0] > 0)
    if not shapes.leading:  # no value of rank 2 or more to tell them apart
        return _commonest(arguments)
    # An argument's first dimension that no value the program computes has is no batch (a random key).
    firsts = collections.Counter({dim: count for dim, count in arguments.items() if shapes.leading.get(dim)})
    if not firsts:  # its data a constant of the program (a jitted function's closure): its values' commonest
        return _commonest(collections.Counter(shapes.leading))
    return max(firsts, key=lambda dim: (shapes.leading[dim], firsts[dim], dim))


def _commonest(leading: collections.Counter) -> int:
    """The first dimension with the most votes (of equal votes, the larger)."""
    return max(leading.items(), key=lambda item: (item[1], item[0]))[0]


def flattened_batches(step: StepAnalysis, batch: int) -> set[int]:
    """First dimensions that hold the batch flattened with a feed's positions: a feed `[batch,
    seq]` (token ids) as `[batch x seq, d]`, a feed `[batch, seq, d]` likewise (all but its last
    dimension, the features): a language model's logits, a transformer's dense layers. An image
    feed `[batch, h, w, c]` gives `batch x h x w` (a 1x1 convolution as a matmul), never
    `batch x h`. None at batch 1, where the products are the feeds' own dimensions (a sequence's
    length, which masks and positions have too). Read from the feeds' shapes (RunMetadata); a
    profile holds no feed: there from the forward pass's tensors of rank 3 or more with the batch
    first (`[batch, seq, d]`: trial AH's language model's `[8 x 64, 20000]` logits, 49 MiB, had stayed
    at their traced size, its peak predicted 22% low)."""
    return _flattened(step, batch) if batch > 1 else set()


def time_major_steps(step: StepAnalysis, batch: int) -> set[int]:
    """The time steps of the feeds shaped `[time, batch, ...]` (time-major: a time-major RNN's),
    where the batch is not their first dimension; none where a feed of rank 2 or more has the
    batch first (a batch-major model: a second dimension equal to the batch is a coincidence), but
    where a feed of rank 3 or more is shaped `[time, batch, ...]` and none of that rank has the batch
    first: a time-major sequence beside its labels `[batch, 1]` (trial X's while-loop RNN had kept
    its `[30, batch, 64]` tensors, 23% short at twice the batch)."""
    shapes = [shape for shape in _shapes_of(step, INPUTS) if len(shape) >= 2]
    deep = [shape for shape in shapes if len(shape) >= 3]
    if any(shape[0] == batch for shape in deep) or any(shape[:2] == (batch, batch) for shape in shapes) or (
            not any(shape[1] == batch and shape[0] > 1 for shape in deep)
            and any(shape[0] == batch for shape in shapes)):
        return set()  # a feed [batch, batch, ...] (a sequence as long as the batch) leaves it unsure too
    return {shape[0] for shape in shapes if shape[1] == batch and shape[0] > 1 and shape[0] != batch}


def _flattened(step: StepAnalysis, batch: int) -> set[int]:
    """`flattened_batches`, at batch 1 too: of the feeds' shapes, of a profile's forward pass's of rank 3 or more."""
    category, min_rank = (ACTIVATIONS, 3) if step.trace.source == XPLANE_SOURCE else (INPUTS, 2)
    flat: set[int] = set()
    for shape in _shapes_of(step, category):
        if len(shape) >= min_rank and shape[0] == batch:
            positions = shape[1:] if len(shape) == 2 else shape[1:-1]
            product = batch * int(np.prod(positions, dtype=np.int64))
            if product > batch:
                flat.add(product)
    return flat


def shorter_feeds(step: StepAnalysis, batch: int) -> dict[int, tuple[str, tuple]]:
    """Feeds of examples outvoted by feeds of items: `images [4, 96, 96, 3]` beside `boxes [64, 4]` and
    `box_labels [64]` (trial AK: the batch was read as 64, and a what-if at 16 predicted 79% low, unsaid). A
    feed whose first dimension is shorter than the batch read and divides it, of a higher rank than every
    feed voting for that batch (examples are richer than their items), whose other dimensions do not hold
    the batch (an RNN's state `[layers, 2, batch, units]`), nor is a time-major feed's steps. A feed as rich
    as those (prototypes `[10, 64]` beside examples `[40, 64]`: review AK) says nothing. {first dimension:
    (feed name, shape)}, the first feed of each; none in a profile, which holds no feed."""
    if batch <= 1 or step.trace.source == XPLANE_SOURCE:
        return {}
    feeds = list(_named_shapes_of(step, INPUTS))
    voters = [len(shape) for _, shape in feeds if shape and shape[0] == batch]
    if len(voters) < 2:  # outvoted: two feeds or more say the batch
        return {}
    steps = time_major_steps(step, batch)
    found: dict[int, tuple[str, tuple]] = {}
    for name, shape in feeds:
        if (len(shape) > max(voters) and 1 < shape[0] < batch and batch % shape[0] == 0 and shape[0] not in steps
                and batch not in shape[1:]):
            found.setdefault(shape[0], (name, tuple(shape)))
    return found


def per_item_feeds(step: StepAnalysis, batch: int) -> dict[int, tuple[str, tuple]]:
    """Feeds whose first dimension is longer than the batch, other than the batch flattened with a
    feed's positions or a time-major feed's steps: `boxes` `[4 x batch, 4]` (a detection model's
    boxes), a sparse feed's entries, a ragged feed's flat values (trial AG's `[282, 64]` at batch 16,
    no multiple of it: its branch had stayed at its traced size, 15% low, and nothing said so). Their
    rows are items of the examples, whose count the step cannot tell grows with the batch (or stays:
    a table fed whole), so tensors of that length are not scaled. {first dimension: (feed name,
    shape)}, the first feed of each. None at batch 1, where every dimension is a multiple, and in a
    profile, which holds no feed (its input ops are the pipeline's, example by example)."""
    if batch <= 1 or step.trace.source == XPLANE_SOURCE:
        return {}
    known = flattened_batches(step, batch) | time_major_steps(step, batch)
    found: dict[int, tuple[str, tuple]] = {}
    for name, shape in _named_shapes_of(step, INPUTS):  # named as the user's graph names it (`boxes`)
        if shape and shape[0] > batch and shape[0] not in known:
            found.setdefault(shape[0], (name, tuple(shape)))
    return found


def _stacked_steps(shapes: list[tuple], first_dim: np.ndarray, rank: np.ndarray, from_stacks: np.ndarray,
                   parameter_shapes: set[tuple], batch: int) -> set[int]:
    """The step counts of a loop's outputs stacked over its steps with the batch second: a stack
    `[steps, batch, ...]` whose element, `[batch, ...]`, is a tensor the step made with the batch
    first, and no parameter's shape (a weight stacked each step carries no batch, whatever its
    first dimension). None at batch 1, where any first dimension is one."""
    if batch <= 1:
        return set()
    stacks = [i for i in np.flatnonzero(from_stacks & (rank >= 2) & (first_dim > 1)).tolist() if shapes[i][1] == batch]
    elements = {shapes[i][1:] for i in stacks} - parameter_shapes
    if not elements:
        return set()
    made = {shapes[i] for i in np.flatnonzero((first_dim == batch) & ~from_stacks).tolist()} & elements
    return {shapes[i][0] for i in stacks if shapes[i][1:] in made}


def _transposed_steps(shapes: list[tuple], first_dim: np.ndarray, rank: np.ndarray, from_transposes: np.ndarray,
                      parameter_shapes: set[tuple], batch: int) -> set[int]:
    """The time steps of a batch-major tensor transposed to time-major in the step: a transpose's
    output `[time, batch, ...]` of a tensor the step made shaped `[batch, time, ...]` (no parameter's
    shape): `tf.nn.ctc_loss`'s time-major logits, an RNN's inputs. Their tensors hold the batch second
    as a time-major feed's do (trial AA's CTC loss, whose `[time, batch, classes]` tensors had scaled
    nothing). None at batch 1."""
    if batch <= 1:
        return set()
    swapped = {shapes[i] for i in np.flatnonzero(from_transposes & (rank >= 3) & (first_dim != batch)).tolist()
               if shapes[i][1] == batch}
    if not swapped:
        return set()
    made = {shapes[i] for i in np.flatnonzero((first_dim == batch) & ~from_transposes & (rank >= 3)).tolist()}
    return {shape[0] for shape in swapped if (shape[1], shape[0], *shape[2:]) in made - parameter_shapes}


class _SizeSets:
    """A set of sizes per row, as (row, size) pairs sorted once, asked many (row, size) questions
    at once (numpy: the last pair at or below each, then the rule)."""

    def __init__(self, rows: np.ndarray, sizes: np.ndarray) -> None:
        order = np.lexsort((sizes, rows))
        rows, sizes = rows[order], sizes[order]
        distinct = np.ones(rows.size, dtype=bool)
        distinct[1:] = (rows[1:] != rows[:-1]) | (sizes[1:] != sizes[:-1])
        self.rows, self.sizes = rows[distinct], sizes[distinct]

    def _at_or_below(self, rows: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, size): per question, the row's largest size at or below the asked size."""
        if self.rows.size == 0 or rows.size == 0:
            return np.zeros(rows.size, dtype=bool), np.zeros(rows.size, dtype=np.int64)
        # (row, size) pairs ordered as one int64 key: sizes by their rank among all sizes here.
        values = np.unique(np.concatenate([self.sizes, sizes]))
        width = values.size
        keys = self.rows * width + np.searchsorted(values, self.sizes)
        asked = rows * width + np.searchsorted(values, sizes)
        at = np.searchsorted(keys, asked, side="right") - 1
        found = (at >= 0) & (rows >= 0)
        at = np.maximum(at, 0)
        found &= self.rows[at] == rows
        return found, np.where(found, self.sizes[at], 0)

    def best(self, rows: np.ndarray, sizes: np.ndarray, chunks: bool) -> np.ndarray:
        """Per question, the largest of the row's sizes an allocation of `size` bytes can hold (0:
        none, or row -1): within the allocator's 256-byte rounding, or for a BFC chunk (`chunks`)
        below twice the rounded request."""
        found, below = self._at_or_below(rows, sizes)
        # `fits` holds for a prefix of the sizes up to the asked one (its upper bound never falls
        # as the size grows): the largest at or below it is the best match, or none is.
        upper = 2 * -(-below // BFC_ROUNDING) * BFC_ROUNDING if chunks else below + BFC_ROUNDING
        return np.where(found & (below > 0) & (sizes < upper), below, 0)

    def holds(self, rows: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Per question, whether the row's sizes hold the size."""
        found, below = self._at_or_below(rows, sizes)
        return found & (below == sizes)

    def sums(self, count: int) -> np.ndarray:
        """Per row, the sum of its sizes."""
        return scatter_sum(self.rows, self.sizes, count)


class _Outputs:
    """What the outputs of each distinct name of one step say about the batch: one row per name,
    read from the first memory space holding it (with output shapes)."""

    def __init__(self, step: StepAnalysis, batch: int) -> None:
        self.names: list[str] = []  # per row
        self.label_of: list = []  # per row: the label source of its space
        self._rows: dict[str, np.ndarray] = {}  # per space id: each of its names' row (-1: none)
        self._row_of: dict[str, int] = {}
        self._partitions: list[list[tuple]] = []  # each dynamic partition's output shapes
        per_space = []
        for space in step.spaces:
            outputs_of = space.trace.outputs_of
            if outputs_of is None:
                continue
            raw = space.names.raw
            first = len(self.names)
            if self._row_of:
                rows = np.fromiter(map(self._row_of.get, raw, itertools.repeat(-1)), dtype=np.int64, count=len(raw))
                fresh = np.flatnonzero(rows < 0)
                wanted = [raw[i] for i in fresh.tolist()]
            else:
                rows, fresh, wanted = np.full(len(raw), -1, dtype=np.int64), np.arange(len(raw)), raw
            rows[fresh] = np.arange(first, first + fresh.size)
            self._rows[space.trace.id] = rows
            self._row_of.update(zip(wanted, range(first, first + fresh.size)))
            self.names.extend(wanted)
            self.label_of.extend(itertools.repeat(space.trace.label_of, fresh.size))
            outputs = outputs_of(wanted)
            counts = np.fromiter(map(len, outputs), dtype=np.int64, count=len(outputs))
            # Variable reads (graphs) and optimizer updates (profiles, where reads allocate
            # nothing) have parameters' shapes. (A graph's sparse updates do not: an embedding's
            # gradient rows are [batch x seq, d].)
            names = space.names
            reads = names.of_op_type(_VARIABLE_READS.__contains__)
            if step.trace.source == XPLANE_SOURCE:
                reads |= names.category == OPTIMIZER
            stacks = names.of_op_type(_STACK_OPS.__contains__)
            transposes = names.of_op_type(_TRANSPOSE_OPS.__contains__)
            casts = names.of_op_type(_CAST_OPS.__contains__)
            partitions = names.of_op_type(_PARTITION_OPS.__contains__)
            for i in np.flatnonzero(partitions[fresh]).tolist():
                self._partitions.append([shape for shape, _ in outputs[i]])
            data = (names.category == ACTIVATIONS) | names.step_inputs  # the forward pass, its feeds
            per_space.append((np.repeat(rows[fresh], counts), np.repeat(reads[fresh], counts),
                              list(itertools.chain.from_iterable(outputs)), np.repeat(stacks[fresh], counts),
                              np.repeat(casts[fresh], counts), np.repeat(data[fresh], counts),
                              np.repeat(names.step_inputs[fresh], counts), np.repeat(transposes[fresh], counts)))
        self.count = len(self.names)
        out_row = np.concatenate([p[0] for p in per_space]) if per_space else np.zeros(0, np.int64)
        from_reads = np.concatenate([p[1] for p in per_space]) if per_space else np.zeros(0, bool)
        from_stacks = np.concatenate([p[3] for p in per_space]) if per_space else np.zeros(0, bool)
        from_casts = np.concatenate([p[4] for p in per_space]) if per_space else np.zeros(0, bool)
        from_data = np.concatenate([p[5] for p in per_space]) if per_space else np.zeros(0, bool)
        from_feeds = np.concatenate([p[6] for p in per_space]) if per_space else np.zeros(0, bool)
        from_transposes = np.concatenate([p[7] for p in per_space]) if per_space else np.zeros(0, bool)
        flat = [output for _, _, outputs, *_ in per_space for output in outputs]
        shapes = [shape for shape, _ in flat]
        sizes = np.fromiter((size for _, size in flat), dtype=np.int64, count=len(flat))
        parameter_shapes = {shape for shape in itertools.compress(shapes, from_reads.tolist()) if shape}
        rank = np.fromiter(map(len, shapes), dtype=np.int64, count=len(shapes))
        shaped = np.flatnonzero(rank > 0)
        first_dim = np.zeros(len(shapes), dtype=np.int64)
        first_dim[shaped] = np.fromiter(map(operator.itemgetter(0), map(shapes.__getitem__, shaped.tolist())),
                                        dtype=np.int64, count=shaped.size)
        # The batch as a first dimension, or flattened with the feeds' next dimensions ([batch x seq, d]), or
        # a dynamic partition's share of it (its outputs' first dimensions, where they add up to the batch:
        # a mixture of experts' tensors, each expert's rows, had scaled nothing).
        batches = flattened_batches(step, batch) | {batch}
        # A share is read only where it is no small number and no parameter's first dimension: any tensor of
        # its length is taken to carry it (a stack of two weights at batch 8 over four experts had scaled).
        widths = {shape[0] for shape in parameter_shapes}
        shares = {shape[0] for shapes in self._partitions if shapes and all(shapes)
                  and sum(shape[0] for shape in shapes) in batches for shape in shapes
                  if shape[0] >= _PARTITION_SHARE_MIN and shape[0] not in widths}
        leads = np.isin(first_dim, sorted(batches | shares))
        # A time-major feed ([time, batch, ...]: the batch given, as the shapes misread it), a
        # loop's outputs stacked over its steps ([steps, batch, d]: a TensorArray, a dynamic RNN,
        # in a batch-major model too), or a tensor transposed to time-major: their tensors hold the
        # batch second ([time, batch, d]), or flattened with the time steps.
        times = (time_major_steps(step, batch)
                 | _stacked_steps(shapes, first_dim, rank, from_stacks, parameter_shapes, batch)
                 | _transposed_steps(shapes, first_dim, rank, from_transposes, parameter_shapes, batch))
        if times:
            wide = np.flatnonzero(rank >= 2)
            second_dim = np.zeros(len(shapes), dtype=np.int64)
            second_dim[wide] = np.fromiter((shapes[i][1] for i in wide.tolist()), dtype=np.int64, count=wide.size)
            leads |= ((rank >= 2) & (second_dim == batch) & np.isin(first_dim, sorted(times))) | np.isin(
                first_dim, [t * batch for t in sorted(times)])
        # Only shapes that could carry the batch are looked up among the parameters'.
        maybe = np.flatnonzero((rank > 0) & (leads | ((rank == 1) & (first_dim % batch == 0))))
        parameter = np.zeros(len(shapes), dtype=bool)
        if parameter_shapes:
            parameter[maybe] = np.fromiter(map(parameter_shapes.__contains__, map(shapes.__getitem__, maybe.tolist())),
                                           dtype=bool, count=maybe.size)
        batched = (rank > 0) & leads & ~parameter
        # Outputs that would carry the batch but for their parameter's shape (reads of parameters
        # and their casts aside), as (row, requested bytes): where they are forward-pass tensors,
        # the batch is also a layer's width.
        look_alike = (rank > 0) & leads & parameter & ~from_reads & ~from_casts
        # ... but a feed is data, never a parameter, and a forward-pass op fed the batch makes the
        # batch: their look-alikes carry it (a model traced at batch 512 into layers 512 wide had
        # scaled nothing). Found in the order the ops first ran, so a chain of such layers follows.
        # (Said all the same: the backward pass's look-alikes, a gradient of the batch beside a weight's
        # gradient, cannot be told apart, and are not scaled.)
        self.parameter_shaped = (out_row[look_alike], sizes[look_alike])
        promoted = self._fed_the_batch(out_row, look_alike & from_data, from_feeds, batched)
        if promoted.size:
            batched |= look_alike & np.isin(out_row, promoted)
        # At batch 1 a first dimension that is a feed's sequence (`[seq, d]`) may be the batch
        # flattened with it, or the sequence's own (positions, masks): not scaled, and weighed.
        unsure = np.zeros(len(shapes), dtype=bool) if batch > 1 else np.isin(first_dim, sorted(_flattened(step, 1)))
        self.unsure_flattened_bytes = int(sizes[unsure & (rank > 1) & ~parameter & ~from_reads].sum())
        # Outputs as long as a feed of items (`[4 x batch, 4]` boxes) that nothing else scales.
        self.per_item_feeds = per_item_feeds(step, batch)
        self.shorter_feeds = shorter_feeds(step, batch)
        per_item = np.isin(first_dim, sorted(self.per_item_feeds)) & (rank > 0) & ~batched & ~parameter & ~from_reads
        self.per_item_bytes = int(sizes[per_item].sum())
        # oneDNN's workspaces (batch norm, max pool) are flat: one dimension, a multiple of the
        # batch, longer than a per-channel vector of the op's batch output.
        with_channels = np.zeros(self.count, dtype=bool)
        with_channels[out_row[batched]] = True
        channels = np.zeros(self.count, dtype=np.int64)
        at = np.flatnonzero(batched)
        if at.size:
            last_dim = np.fromiter(map(operator.itemgetter(-1), map(shapes.__getitem__, at.tolist())),
                                   dtype=np.int64, count=at.size)
            channels[:] = last_dim.min()
            np.maximum.at(channels, out_row[at], last_dim)
        workspace = ((rank == 1) & with_channels[out_row] & (first_dim % batch == 0)
                     & (first_dim > channels[out_row]) & ~parameter)
        with_batch = batched | workspace
        # Requested bytes of the outputs that carry the batch, and of the other outputs (a size
        # that is both is a batch size).
        self.batch_sizes = _SizeSets(out_row[with_batch], sizes[with_batch])
        other = ~with_batch
        other_rows, other_sizes = out_row[other], sizes[other]
        also_batch = self.batch_sizes.holds(other_rows, other_sizes)
        self.other_sizes = _SizeSets(other_rows[~also_batch], other_sizes[~also_batch])
        # Per row, and False last (for row -1: a name no space with shapes holds).
        self.carries = np.zeros(self.count + 1, dtype=bool)
        self.carries[self.batch_sizes.rows] = True

    def _fed_the_batch(self, out_row: np.ndarray, candidates: np.ndarray, from_feeds: np.ndarray,
                       batched: np.ndarray) -> np.ndarray:
        """Rows among the `candidates`' (outputs shaped like a parameter whose first dimension is the
        batch, of the forward pass or a feed) that carry the batch after all: a feed's, and an op's
        with a data input (its label's) that carries it, in the order the rows first ran."""
        rows = np.unique(out_row[candidates])
        if not rows.size:
            return rows
        carrying = set(itertools.compress(self.names, np.bincount(out_row[batched], minlength=self.count).tolist()))
        feeds = set(np.unique(out_row[candidates & from_feeds]).tolist())
        asked = [row for row in rows.tolist() if row not in feeds]
        inputs = dict(zip(asked, self._data_inputs(asked)))
        promoted = []
        for row in rows.tolist():
            if row in feeds or any(name in carrying for name in inputs.get(row, ())):
                promoted.append(row)
                carrying.add(self.names[row])
        return np.asarray(promoted, dtype=np.int64)

    def rows(self, space: SpaceAnalysis) -> np.ndarray:
        """The row of each distinct name of a space (-1: no space with shapes holds it)."""
        rows = self._rows.get(space.trace.id)
        if rows is None:
            rows = np.fromiter(map(self._row_of.get, space.names.raw, itertools.repeat(-1)),
                               dtype=np.int64, count=len(space.names.raw))
        return rows

    def uses_batch(self, rows: np.ndarray) -> np.ndarray:
        """Per row: an output or a data input (from its label) carries the batch."""
        uses = self.carries[rows]
        ask = np.flatnonzero(~uses).tolist()
        if not ask:
            return uses
        carrying = set(itertools.compress(self.names, self.carries.tolist()))
        rows = rows.tolist()
        for i, inputs in zip(ask, self._data_inputs([rows[i] for i in ask])):
            uses[i] = any(name in carrying for name in inputs)
        return uses

    def _data_inputs(self, rows: list[int]) -> list[list[str]]:
        """The data inputs of each row's name, from its label, read by the space whose labels it has
        (one read per space)."""
        by_source: dict[int, tuple] = {}
        for position, row in enumerate(rows):
            by_source.setdefault(id(self.label_of[row]), (self.label_of[row], []))[1].append(position)
        out: list[list[str]] = [[] for _ in rows]
        for label_of, positions in by_source.values():
            for position, label in zip(positions, labels_of(label_of, [self.names[rows[p]] for p in positions])):
                out[position] = label_inputs(label)
        return out


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

    def __init__(self, step: StepAnalysis, space: SpaceAnalysis, batch: int | None = None) -> None:
        """batch: the batch the step ran at, where the user gives it (else read from its shapes)."""
        self.space = space
        self._peaks: dict[int, tuple[int, int, int]] = {}  # `_peak_at`'s, by batch
        self.replicas = replica_count(step)
        self.batch = batch or global_batch(step)
        # Each replica's share of it, as the step's shapes hold it.
        self.replica_batch = max(1, self.batch // self.replicas)
        outputs = _Outputs(step, self.replica_batch)
        trace = space.trace
        rows = outputs.rows(space)
        event_row = rows[trace.name_code[trace.event_exec]] if trace.event_exec.size else np.zeros(0, np.int64)
        sizes = np.abs(trace.event_bytes).astype(np.int64)
        # A BFC allocator's record is the chunk a request got, up to twice it (a TF1 MLP's [1024, 1024]
        # weight gradient, 4 MiB asked, 5.9 MiB recorded, had read as a batch op's temporary and been
        # scaled 8x from batch 8 to 64: +779%), in a profile as in a trace.
        chunks = chunking(step.trace.source, trace.allocator)
        # The tensor an event holds: the closest-fitting of its op's sizes (none: a temporary).
        # A non-batch tensor of a batch op (a max-pool's indices, a profiled convolution's
        # fixed-size scratch) fits one of the op's other sizes better than its batch sizes.
        as_batch = outputs.batch_sizes.best(event_row, sizes, chunks)
        keep = ~(outputs.other_sizes.best(event_row, sizes, chunks) > as_batch)
        known = event_row >= 0
        # Does the event's op use the batch? Its labels are read only where that decides an event:
        # an op whose outputs carry no batch, with an event that would scale if it did.
        uses = outputs.carries.copy()  # per row, False last (row -1)
        asked = np.unique(event_row[known & keep & ~outputs.carries[event_row]])
        uses[asked] = outputs.uses_batch(asked)
        self.scales = keep & uses[event_row]
        # Per event, the batch-carrying output's request it holds (0: a temporary, or no output's):
        # what a worst case of the allocator's chunks doubles (`worst_chunks`).
        self._requested = np.where(self.scales, as_batch, 0).astype(np.int64)
        # TensorFlow's CPU convolution gradients size their scratch to a working set, not to the
        # batch (findings.CPU_SHARDED_CONV_GRADS): what fits none of their batch outputs stays.
        fixed = cpu_working_set_scratch(space)
        if fixed.any():
            self.scales &= ~(fixed[trace.name_code[trace.event_exec]] & (as_batch == 0))
        # Forward-pass tensors shaped like a parameter (a [64, 64] activation beside a 64x64
        # weight at batch 64): they cannot be told from the parameter's gradients, and are not
        # scaled.
        forward = rows[(space.names.category == ACTIVATIONS) & (rows >= 0)]
        shaped_rows, shaped_bytes = outputs.parameter_shaped
        unscaled = int(shaped_bytes[np.isin(shaped_rows, forward)].sum())
        # Said where those tensors weigh: 1% of the peak rise (a per-example loss beside a bias does not).
        self.batch_in_parameter_shape = unscaled > 0 and unscaled * 100 >= space.peak_rise_bytes
        self.unsure_flattened = (outputs.unsure_flattened_bytes > 0
                                 and outputs.unsure_flattened_bytes * 100 >= space.peak_rise_bytes)
        # Said where the step's outputs of a per-item length weigh 1% of the peak rise.
        self.per_item = (outputs.per_item_feeds, outputs.per_item_bytes) if (
            outputs.per_item_bytes > 0 and outputs.per_item_bytes * 100 >= space.peak_rise_bytes) else None
        self.shorter_feeds = outputs.shorter_feeds
        # Bytes held before the step that grow with the batch: feeds, batch-shaped constants. An
        # input op that allocates in the step (a queue's dequeue) is in the rise, scaled there.
        allocated = space.name_column(ALLOCATED) > 0
        feeds = rows[resident_mod.feeds(space) & (rows >= 0) & ~allocated]
        sizes = outputs.batch_sizes
        fed = sizes.sizes[np.isin(sizes.rows, feeds)].astype(np.int64)  # each fed tensor's bytes
        persistent = np.flatnonzero(trace.persistent > 0)
        kept = trace.persistent[persistent].astype(np.int64)
        batch_shaped = outputs.batch_sizes.holds(rows[trace.name_code[persistent]], kept)
        # A `PlaceholderWithDefault`'s default is the graph's, whatever batch is fed.
        batch_shaped &= ~resident_mod.placeholder_defaults(space)[trace.name_code[persistent]]
        self._resident_tensors = np.concatenate([fed, kept[batch_shaped]])  # each one's bytes at the traced batch
        self.resident_batch_bytes = int(self._resident_tensors.sum())
        self._layer_names, self._layer_of_name = _layers(space)

    @property
    def may_miss(self) -> bool:
        """Whether `warning` says the step holds bytes this prediction does not scale (not only how to read
        the batch: a distribution strategy's replicas)."""
        return any(misses for misses, _ in self._warnings)

    @property
    def warning(self) -> str | None:
        """What may make this prediction wrong, where the step shows it (None: nothing)."""
        return "; ".join(text for _, text in self._warnings) or None

    @cached_property
    def _warnings(self) -> list[tuple[bool, str]]:
        """(whether it says bytes go unscaled, what it says), for `warning`."""
        said = []
        if not self.scales.any():  # beside a fit (alone, WhatIf refuses it)
            said.append((True, f"nothing in this step was found to carry its batch ({self.batch}): this one-step "
                        "prediction is the traced peak"))
        elif self.unsure_flattened:
            said.append((True, "traced at batch 1, tensors whose first dimension is an input's sequence ([seq, d]) may be the "
                        "batch flattened with it or the sequence's own (positions, masks), and are not scaled, so "
                        "this may predict too little; trace at batch 2 or more, or fit over two batch sizes"))
        elif self._most_scaled_share < _FEW_SCALED:
            said.append((True, f"under {_FEW_SCALED:.0%} of the traced peak rise was found to carry the batch "
                        f"({self.batch}) at any moment of the step: this one-step prediction moves with the batch "
                        "by that share only, staying near the traced peak unless the batch grows many times over; "
                        f"where the step's batch is not {self.batch}, or its peak does grow with the batch, fit "
                        "over steps at two batch sizes"))
        # The batch the shapes hold, in words: each replica's where there are several.
        shaped = f"each replica's batch ({self.replica_batch})" if self.replicas > 1 else f"the batch ({self.batch})"
        if self.scales.any() and self.batch_in_parameter_shape:  # beside a small share too
            said.append((True, f"at {shaped.replace('the batch', 'the traced batch')} some tensors are shaped like "
                        "the model's parameters: "
                        "the forward pass's are scaled where they are fed the batch, but the backward pass's cannot "
                        "be told from the weights' gradients and are not, so this may be off; trace at a batch size "
                        "that is no layer's width, or fit over two batch sizes"))
        if self.per_item is not None and self.scales.any():
            feeds, held = self.per_item
            dim, (name, shape) = min(feeds.items())
            more = f" (and {len(feeds) - 1} more)" if len(feeds) > 1 else ""
            each = self.replica_batch
            long = f"{dim // each} times {shaped} long" if dim % each == 0 else f"{dim} long, more than {shaped}"
            said.append((True, f"the feed {name} {list(shape)}{more} is {long}: "
                        f"tensors of its length ({format_bytes(held)} of the step's outputs) are not scaled, so "
                        "where they grow with the batch (an example's boxes, tokens or entries, a ragged feed's "
                        "values) this predicts too little; fit over two batch sizes"))
        if self.shorter_feeds and self.replicas == 1:
            dim, (name, shape) = max(self.shorter_feeds.items())
            said.append((True, f"the feed {name} {list(shape)} holds {dim} examples, {self.batch // dim} times fewer "
                        f"than the batch read from the most feeds' first dimension ({self.batch}): where the step's "
                        f"batch is {dim} (the others' rows an example's items: boxes, nodes, tokens), this predicts "
                        f"far off; give the batch it ran at (traced batch; the CLI's --traced-batch {dim})"))
        if self.replicas > 1:
            said.append((False, f"the step runs {self.replicas} replicas (a distribution strategy): its batch "
                        f"({self.batch}) is the global batch, {self.replica_batch} per replica, and so is the batch "
                        "asked for"))
        return said

    @cached_property
    def scaled_share(self) -> float:
        """Share of the traced peak rise held by batch-carrying events (for the page's note)."""
        peak = self.space.curve.events_up_to_peak()
        rise = self.space.peak_rise_bytes
        if rise <= 0:
            return 0.0
        return float(self.space.trace.event_bytes[peak][self.scales[peak]].sum()) / rise

    @cached_property
    def _most_scaled_share(self) -> float:
        """The batch-carrying bytes live at their own most, at any moment of the step, over the traced
        peak rise: what decides whether the prediction can move. A step whose traced peak holds
        nothing of the batch (an optimizer's update of a large embedding) may still have its peak
        moved by the batch elsewhere, and the replay finds it."""
        curve, rise = self.space.curve, self.space.peak_rise_bytes
        if rise <= 0 or curve.group_end.size == 0:
            return 0.0
        scaled = np.where(self.scales, self.space.trace.event_bytes, 0)
        return max(float(np.cumsum(scaled[curve.event_order])[curve.group_end].max()), 0.0) / rise

    def _events_at(self, batch: int) -> np.ndarray:
        factor = batch / self.batch
        event_bytes = self.space.trace.event_bytes
        # rint is symmetric, so an allocation and its free scale to the same bytes.
        return np.where(self.scales, np.rint(event_bytes * factor), event_bytes).astype(np.int64)

    def _replay(self, batch: int, events: np.ndarray | None = None) -> tuple[np.ndarray, int, int]:
        """(scaled events, index into sorted events of the peak's last event or -1, peak rise); `events`:
        the events to replay, where not those scaled to `batch` (`_WorstChunks`)."""
        curve = self.space.curve
        events = self._events_at(batch) if events is None else events
        if curve.group_end.size == 0:
            return events, -1, 0
        rise = np.cumsum(events[curve.event_order])[curve.group_end]
        peak = int(np.argmax(rise))
        if rise[peak] <= 0:
            return events, -1, 0
        return events, int(curve.group_end[peak]), int(rise[peak])

    def peak_rise(self, batch: int) -> int:
        return self._peak_at(batch)[1]

    def _peak_at(self, batch: int) -> tuple[int, int, int]:
        """(the replay's peak's last event as `_replay` gives it, its rise, the replay's bytes at the traced
        peak's moment) at `batch`, once per batch: the largest batch under a limit and the chart ask the
        same batches of `peak_rise` and `moved_peak` many times, and a replay passes over every event."""
        cache = self._peaks
        if batch not in cache:
            curve = self.space.curve
            events, last, rise = self._replay(batch)
            traced_last = int(curve.group_end[curve.peak_index]) if curve.peak_index >= 0 else -1
            at_traced = int(np.cumsum(events[curve.event_order])[traced_last]) if last >= 0 <= traced_last else 0
            if len(cache) >= 512:  # a bound: a long-lived step answers many questions
                cache.clear()
            cache[batch] = (last, rise, at_traced)
        return cache[batch]

    def worst_chunks(self) -> "_WorstChunks":
        """The same replay, every scaled output given a chunk twice its request (`chunking`'s bound)."""
        return _WorstChunks(self)

    def moved_peak(self, batch: int) -> str | None:
        """Where the replay at `batch` finds the peak, when that is another moment of the step than
        the traced peak and higher there by 5% or more (a larger batch moving the peak from a
        backward pass to a forward one): the op that ends it; else None. A fit through the traced
        peaks follows their moment and cannot see it."""
        curve = self.space.curve
        # The traced batch's own replay is the curve itself: its peak.
        traced_last = int(curve.group_end[curve.peak_index]) if curve.peak_index >= 0 else -1
        last, rise, at_traced_moment = self._peak_at(batch)
        if last < 0 or traced_last < 0 or last == traced_last:
            return None
        if rise < 1.05 * at_traced_moment:
            return None
        trace = self.space.trace
        return trace.distinct_names[int(trace.name_code[trace.event_exec[curve.event_order[last]]])]

    def start_bytes(self, batch: int) -> int | None:
        """The start at `batch`: the traced start, its tensors that carry the batch scaled. Where the start
        counts only the allocator's larger requests (mklcpu's 256 KiB and more), each such tensor counts
        at a batch where it is that large (a trial's 128 KiB feed, in no reading, had been taken out of a
        start that never held it, which read as a negative start at a smaller batch)."""
        start = self.space.start_bytes
        if start is None:
            return None
        tensors = self._resident_tensors
        least = self.space.start_counts_from or 0
        scaled = np.round(tensors * (batch / self.batch)).astype(np.int64)
        return start - int(tensors[tensors >= least].sum()) + int(scaled[scaled >= least].sum())

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
    return space.names.layers


def global_batch(step: StepAnalysis) -> int:
    """The batch as the user counts it (`fit(batch_size=...)`, `--traced-batch`): the traced batch, each
    replica's (`traced_batch`: the shapes hold a replica's share), times the replicas (trial AH's
    MirroredStrategy run at 64 had been read as batch 32, and a what-if asked at 64 predicted twice
    the real rise)."""
    return traced_batch(step) * replica_count(step)


def replica_count(step: StepAnalysis) -> int:
    """Replicas the step runs: the `replica_<N>` scopes of its names (N from 1, with names below them: a node
    named so is no scope; MirroredStrategy names no `replica_0` nor `replica_01`), and replica 0's own."""
    scopes = set()
    for space in step.spaces:
        parts = space.names.path_parts
        scopes.update(parts.distinct[code] for code in np.unique(parts.code[parts.where(REPLICA_RE.match) & parts.has_rest]))
    return len(scopes) + 1


def one_step(step: StepAnalysis, space: SpaceAnalysis, batch: int | None = None) -> OneStep:
    """The one-step predictor of a space, built once per analysed step (and batch given, if any)."""
    return step.memoized(("whatif", space.trace.id, batch), lambda: OneStep(step, space, batch))


# -- several batch sizes --------------------------------------------------------------------

_INSTANCE_SUFFIX = re.compile(r"_\d+(?=/|$)")  # Keras numbers a model built again: `dense_3`, `sequential_1`


def _model_layers(space: SpaceAnalysis) -> set[str]:
    """A step's layers as one model's, whichever instance: Keras's `_<N>` suffixes dropped, and the
    placeholders a profile adds (`(before this step)`, `(no op)`, `(input pipeline)`) left out.

    A likeness, looser than the names the fit matches by `names.renumbering`: Keras 3 numbers
    each optimizer update op (`adam/Add_10`), and a model built again adds `adam_1` beside the
    first `adam`, whose counts then differ; renumbering leaves those apart, which would make one
    model look like two. Layers of nothing but gradients and optimizer updates (TF1's `gradients`,
    `Adam`, `beta1_power`: every model trained so has them) are left out where others remain: they
    had made half of a small U-Net's layers look like a ResNet's."""
    layers, code = _layers(space)
    own = np.zeros(len(layers), dtype=bool)
    own[code[~np.isin(space.names.category, (GRADIENTS, OPTIMIZER))]] = True
    kept = [layer for layer, mine in zip(layers, own.tolist()) if mine and not layer.startswith("(")]
    return {_INSTANCE_SUFFIX.sub("", layer) for layer in kept or layers if not layer.startswith("(")}


def _as_first_names(first: list[str], layers: list[str]) -> list[str]:
    """Another step's layers named as the first step names them: a model built again in one
    process is numbered anew (`sequential_1/dense_3` for `sequential/dense_1`; names.renumbering)."""
    renamed = renumbering(first, layers)
    return [renamed.get(layer, layer) for layer in layers]


def check_one_model(steps: list[Traced]) -> None:
    """A fit reads one model at several batch sizes: each step must share at least half of its
    layers (or the first's, where it has fewer) with the first. Steps of other models would fit
    nonsense."""
    first = _model_layers(steps[0].space)
    for other in steps[1:]:
        layers = _model_layers(other.space)
        share = len(first & layers) / max(min(len(first), len(layers)), 1)
        if share < SAME_MODEL_SHARE:
            raise WhatIfError(
                f"{other.run} {other.tag} and {steps[0].run} {steps[0].tag} share {share:.0%} of their layers: "
                "not one model at two batch sizes, so they cannot be fitted together (pick runs of the same model)")


@dataclass
class _Point:
    batch: int
    space: SpaceAnalysis


def _chunk_names(points: list[tuple[int, SpaceAnalysis]]) -> list[dict[int, float]]:
    """Per point, {row of a runtime name: bytes to add to its bytes at the peak}, for the names that
    held the same requests in other chunks at every traced peak (figures.other_chunks): their mean.

    A layer's line reads the allocator's chunks as growth where one of its tensors got another chunk
    at each batch: an LSTM's weight gradient (the same request at every batch) held 3.4 MB at batch 16
    and 2.6 MB at 32, beside the loop's batch-sized stacks, and the layer's slope came out 17% low.
    Names are matched as the runs name them (a model built again, renumbered, matches none)."""
    per_point = []
    for _, space in points:
        holding = space.exec_columns[AT_PEAK] > 0
        code = space.trace.name_code[holding]
        count = len(space.names.raw)
        held = scatter_sum(code, space.exec_columns[AT_PEAK][holding], count)
        requested = scatter_sum(code, space.exec_columns[OUTPUT][holding], count)
        rows = np.flatnonzero(held > 0).tolist()
        raw = space.names.raw
        per_point.append({raw[i]: (i, int(held[i]), int(requested[i])) for i in rows})
    common = sorted(set.intersection(*map(set, per_point))) if per_point else []
    if not common:
        return [{} for _ in points]
    held = np.array([[point[name][1] for name in common] for point in per_point], dtype=np.float64)
    requested = np.array([[point[name][2] for name in common] for point in per_point], dtype=np.float64)
    chunks = np.flatnonzero(other_chunks(requested, held)).tolist()
    mean = held[:, chunks].mean(axis=0) if chunks else np.zeros(0)
    return [{point[common[i]][0]: float(mean[k] - held[p, i]) for k, i in enumerate(chunks)}
            for p, point in enumerate(per_point)]


def from_batch(fixed: float, per_sample: float) -> float | None:
    """Where a layer's fitted line starts from zero, when its fixed part is below zero: it grew faster
    than the batch between the traced batches (the peak moved into it), and fixed + per-sample x batch
    is better read as per-sample x (batch - this). None where the fixed part is not below zero."""
    if round(fixed) >= 0 or round(per_sample) <= 0:  # as the answer gives them: whole bytes
        return None
    return round(float(-fixed / per_sample), 1) or None  # a few bytes below zero: none to speak of


def batch_text(batch: float) -> str:
    """A batch `from_batch` gives, in words: one decimal, none where it is whole (15.1, 2, 2,097,152)."""
    text = f"{batch:,.1f}"
    return text[:-2] if text.endswith(".0") else text


def line_text(fixed: float, per_sample: float) -> str:
    """A layer's fitted line in words, as the CLI and the warnings give it (bytes exact)."""
    start = from_batch(fixed, per_sample)
    if start is not None:
        return f"{int(round(per_sample)):,} B per sample above batch {batch_text(start)}"
    return f"{int(round(fixed)):,} B fixed + {int(round(per_sample)):,} B per sample"


class Fitted:
    """Per layer, bytes at the peak = fixed + per-sample x batch, fitted over traced steps."""

    method = "fit"

    def __init__(self, points: list[tuple[int, SpaceAnalysis]], one_step_beside: bool = True) -> None:
        """one_step_beside: whether a one-step prediction is made beside the fit (none for XLA's steps)."""
        self._one_step_beside = one_step_beside
        batches = sorted({batch for batch, _ in points})
        if len(batches) < 2:
            raise WhatIfError("a fit needs steps at two batch sizes at least (got "
                              f"{', '.join(map(str, batches)) or 'none'})")
        per_run, requested_runs = [], []
        # What each traced peak was made in: the category and the layer of the op running then (a
        # peak in the backward pass at one batch and in the optimizer's update at another is two
        # phases; a BatchNorm's backward pass peaking in one layer at 32 and another at 64, two layers).
        phases, peak_layers, program_rows = set(), set(), set()
        chunk_moves = _chunk_names(points)
        moved_runs: list[dict[str, float]] = []  # per point: bytes the chunk rules moved, per layer
        for (batch, space), moves in zip(points, chunk_moves):
            names, of_name = _layers(space)
            program_rows.update(names[i] for i in np.unique(of_name[space.names.of_op_type(XLA_PROGRAM_OP_TYPE.__eq__)]))
            layer_of_exec = of_name[space.trace.name_code]
            held = scatter_sum(layer_of_exec, space.exec_columns[AT_PEAK], len(names)).astype(np.float64)
            # The bytes the outputs of the ops holding bytes at the peak requested, per layer.
            holding = space.exec_columns[AT_PEAK] > 0
            requested = scatter_sum(layer_of_exec[holding], space.exec_columns[OUTPUT][holding], len(names))
            if per_run:  # each layer by the first step's name for it (a model built again is renumbered)
                names = _as_first_names(list(per_run[0]), names)
            # A name holding the same requests in other chunks at every traced peak, at its mean there.
            moved_runs.append({})
            for row, move in moves.items():
                held[of_name[row]] += move
                layer = names[int(of_name[row])]
                moved_runs[-1][layer] = moved_runs[-1].get(layer, 0.0) + move
            per_run.append(dict(zip(names, held.tolist())))
            requested_runs.append(dict(zip(names, requested.tolist())))
            at = space.peak_exec()
            phases.add((batch, None if at is None else CATEGORIES[int(space.category[at])]))
            peak_layers.add((batch, None if at is None else names[int(of_name[space.name_code[at]])]))
        self.layer_names = sorted(set().union(*per_run))
        held = np.array([[run.get(name, 0) for name in self.layer_names] for run in per_run], dtype=np.float64)
        design = np.column_stack([np.ones(len(points)), [batch for batch, _ in points]])
        self._coef = np.linalg.lstsq(design, held.reshape(len(points), -1), rcond=None)[0]  # (2, layers)
        self._rise_slope = float(self._coef[1].sum())  # the traced peaks' own: their layers' lines as fitted
        # A layer whose ops holding bytes at each traced peak requested as many bytes at every batch holds
        # the same tensors: what changed is the allocator's chunks (a profile's BFC gave a [784, 512]
        # weight gradient 1.5 MiB at one batch and 2.9 MiB at the next), not the batch. It is fixed, at
        # its mean: a line through the chunks had read a stranger's 1.4 MiB of chunk as 22 KiB per
        # sample, 59% over the real peak at twice the larger batch.
        requested = np.array([[run.get(name, 0) for name in self.layer_names] for run in requested_runs],
                             dtype=np.float64).reshape(len(points), -1)
        chunks_only = other_chunks(requested, held)  # not scratch held mid-op: that may grow
        mean = held[:, chunks_only].mean(axis=0)
        self._coef[:, chunks_only] = np.stack([mean, np.zeros(int(chunks_only.sum()))])
        for moved, row in zip(moved_runs, mean - held[:, chunks_only]):
            for i, move in zip(np.flatnonzero(chunks_only).tolist(), row.tolist()):
                moved[self.layer_names[i]] = moved.get(self.layer_names[i], 0.0) + move
        # Per traced step, the bytes by which the fit leaves its peak, per layer: where a layer or a name
        # in it holds the same requests in other chunks, the fit goes through their mean, not through
        # each traced peak (the moves of a layer add up to zero over the steps).
        self.moved = [{layer: move for layer, move in moved.items() if move} for moved in moved_runs]
        # Those layers, by name.
        self.chunk_layers = {layer for moved in self.moved for layer in moved}
        # An XLA program's own row (its bytes placed on no op: the allocator's rounding, values of no
        # op) stops at zero where it never held less at a traced peak: shrinking between the traced
        # batches (31.9 then 3.0 MiB) it would go on to take 56 MiB off the layers' at a batch beyond
        # them. Layers' lines are not stopped: at-peak bytes that move between layers as the
        # schedule changes cancel out in their sum.
        self._floor = np.full(len(self.layer_names), -np.inf)
        programs = [i for i, name in enumerate(self.layer_names) if name in program_rows]
        self._floor[programs] = np.minimum(held[:, programs].min(axis=0), 0)
        starts = [space.start_bytes for _, space in points]
        self._start = (None if None in starts
                       else np.linalg.lstsq(design, np.array(starts, dtype=np.float64), rcond=None)[0])
        if self._start is not None and self._start[1] < 0:
            # What a step starts with does not shrink as the batch grows: readings that fell are noise,
            # and their mean is the start at any batch.
            self._start = np.array([float(np.mean(starts)), 0.0])
        self.batches = [batch for batch, _ in points]
        by_batch: dict[int, list[int]] = {}
        for batch, start in zip(self.batches, starts):
            by_batch.setdefault(batch, []).append(start)
        # Each batch's start (their mean where several steps ran at it), for anchor_start.
        self._starts = None if None in starts else [(b, float(np.mean(v))) for b, v in sorted(by_batch.items())]
        self._start_of: Callable[[int], int | None] | None = None  # see anchor_start
        self._traced = sorted({(batch, space.peak_rise_bytes) for batch, space in points})
        self._phases = sorted(phases, key=lambda p: (p[0], p[1] or ""))
        self._peak_layers = sorted(peak_layers, key=lambda p: (p[0], p[1] or ""))

    @property
    def falls(self) -> bool:
        """Whether the traced peaks do not grow with the batch: a line through them cannot be trusted
        beyond them (a peak that moved to another phase of the step, allocator rounding)."""
        return self._rise_slope <= 0

    def _distinct(self, at_peak: list[tuple[int, str | None]]) -> list[str]:
        """Each phase or layer the traced peaks fall in, once, in batch order."""
        return list(dict.fromkeys(where for _, where in at_peak if where is not None))

    @property
    def moves(self) -> bool:
        """Whether the traced peaks fall in different phases of the step or in different layers: the
        peak moves as the batch changes, and a line through the traced ones may miss where it goes."""
        return len(self._distinct(self._phases)) > 1 or len(self._distinct(self._peak_layers)) > 1

    @property
    def warning(self) -> str | None:
        if self.falls:
            traced = ", ".join(f"{rise:,} B at batch {batch}" for batch, rise in self._traced)
            return (f"the traced peak rises do not grow with the batch ({traced}): the fitted line may be far off "
                    "beyond them; trace more batch sizes, or "
                    + ("read the one-step prediction" if self._one_step_beside
                       else "trace a batch size nearer the one asked"))
        if len(self._distinct(self._phases)) > 1:
            at = ", ".join(f"{phase} at batch {batch}" for batch, phase in self._phases if phase is not None)
            return (f"the traced peaks fall in different phases of the step ({at}): a line through them may miss "
                    "where the peak falls at another batch; trace a batch size nearer the one asked")
        if len(self._distinct(self._peak_layers)) > 1:
            batches_of: dict[str, list[int]] = {}
            for batch, layer in self._peak_layers:
                if layer is not None:
                    batches_of.setdefault(layer, []).append(batch)
            at = ", ".join(f"{layer} at batch{'es' if len(batches) > 1 else ''} {listed([str(b) for b in batches])}"
                           for layer, batches in batches_of.items())
            return (f"the ops at the traced peaks are in different layers ({at}): the peak moves between layers as the batch "
                    "changes, and a line through them may miss it; "
                    + ("compare with the one-step prediction, or " if self._one_step_beside else "")
                    + "trace a batch size nearer the one asked")
        faster = self._faster_than_batch()
        if faster:
            return (f"the traced peak rises grow faster than the batch ({faster}): some of the step's memory grows "
                    "with the batch's square or more (per-example gradients, a jacobian, every pair of examples: a "
                    "contrastive loss's distances), which a line through them misses: this predicts too little "
                    "beyond them; trace the batch asked")
        bent = self._bent_layers()
        if bent:
            return (f"some layers' bytes at the traced peaks do not grow in proportion to the batch ({bent}): what "
                    "changed between the traced batches may be the allocator's chunks or the schedule, not the "
                    "batch, and a line through them may be off beyond them; "
                    + ("compare with the one-step prediction, or " if self._one_step_beside else "")
                    + "trace a batch size nearer the one asked")
        return None

    def _faster_than_batch(self) -> str:
        """The traced rises, where three or more batches each rise more than in proportion to the batch (by a
        fifth: a line with a fixed part of zero or more rises in proportion at most, whatever the allocator's
        chunks; trial AK's per-example gradients rose 3.0, 4.5 and 4.0 times per doubling, and the fit was 43%
        low at the next, said to be the chunks); "" where they do not."""
        # One rise per batch size (their mean: a fit may hold two steps at one batch), three sizes or more.
        by_batch: dict[int, list[int]] = {}
        for batch, rise in self._traced:
            by_batch.setdefault(batch, []).append(rise)
        traced = [(batch, sum(rises) / len(rises)) for batch, rises in sorted(by_batch.items())]
        if len(traced) < 3 or any(rise <= 0 for _, rise in traced):
            return ""
        pairs = list(zip(traced, traced[1:]))
        if not all(r2 * b1 >= _FASTER_THAN_BATCH * r1 * b2 for (b1, r1), (b2, r2) in pairs):
            return ""
        return ", ".join(f"{format_bytes(round(rise))} at batch {batch}" for batch, rise in traced)

    def _bent_layers(self, most: int = 3) -> str:
        """The layers whose line goes below zero at batch 0 (they grew faster than the batch between
        the traced ones) or falls as the batch grows, where their fixed part's, or their fall over the
        traced batches', bytes come to a tenth of the largest traced peak rise; "" where they do not."""
        fixed, per_sample = self._coef
        off = np.where(fixed < 0, -fixed, 0.0) + np.where(per_sample < 0, -per_sample * max(self.batches), 0.0)
        bent = np.flatnonzero(off > 0)
        if off[bent].sum() < 0.1 * max(rise for _, rise in self._traced):
            return ""
        shown = bent[np.argsort(-off[bent], kind="stable")][:most]
        return ", ".join(f"{self.layer_names[i] or '(top level)'}: {line_text(fixed[i], per_sample[i])}"
                         for i in shown.tolist())

    def _layer_bytes(self, batch: int) -> np.ndarray:
        return np.maximum(np.rint(self._coef[0] + self._coef[1] * batch), self._floor).astype(np.int64)

    def peak_rise(self, batch: int) -> int:
        return max(int(self._layer_bytes(batch).sum()), 0)

    def anchor_start(self, start_of: Callable[[int], int | None]) -> None:
        """Predict the bytes in use before the step from the traced step nearest the batch asked, plus
        what `start_of` (the one-step prediction's start: its feeds scaled, as the start counts them)
        adds from that step's batch to the one asked, rather than from a line through the traced
        starts: two starts a few MB apart by chance (what the allocator held on to) would be
        extrapolated tenfold."""
        self._start_of = start_of

    def start_bytes(self, batch: int) -> int | None:
        if self._start is None:
            return None
        # No allocator held less than nothing before a step: a line through the traced starts read far
        # below them (a batch misread as a graph's node count, 512 and 2048, asked at 64) stops at none.
        if self._start_of is not None:
            near, start = min(self._starts, key=lambda point: (abs(point[0] - batch), -point[0]))
            return max(int(round(start + self._start_of(batch) - self._start_of(near))), 0)
        return max(int(round(self._start[0] + self._start[1] * batch)), 0)

    def predict(self, batch: int, top: int = TOP_LAYERS) -> Prediction:
        held = self._layer_bytes(batch)
        order = np.lexsort((np.arange(held.size), -held))[:top]
        layers = [{"layer": self.layer_names[i], "at_peak_bytes": int(held[i]),
                   "fixed_bytes": int(round(self._coef[0, i])), "per_sample_bytes": int(round(self._coef[1, i])),
                   "from_batch": from_batch(self._coef[0, i], self._coef[1, i])}
                  for i in order.tolist() if held[i] > 0]
        return Prediction(batch, self.peak_rise(batch), self.start_bytes(batch), layers)


# -- the largest batch that fits --------------------------------------------------------------


class _WithMargin:
    """A prediction with `per_sample` bytes more per sample in its peak: the memory the allocator held
    beyond the traced step's records, scaled as the batch (the what-if's note on it)."""

    def __init__(self, predictor, per_sample: float) -> None:
        self.predictor, self.per_sample = predictor, per_sample

    def peak_rise(self, batch: int) -> int:
        return self.predictor.peak_rise(batch) + int(round(self.per_sample * batch))

    def start_bytes(self, batch: int) -> int | None:
        return self.predictor.start_bytes(batch)


class _FitWhereSeen:
    """The fit, but at a batch where the one-step replay (from the traced step nearest that batch, as the
    answer asked there is made) finds the peak at another moment of the step (`OneStep.moved_peak`),
    which a line through the traced peaks cannot see, the higher of the two: what the answer there
    leads with, never under the fit's line, so that the largest batch under a limit, found by doubling
    and bisecting, reads a peak that does not fall as the batch grows (the fit's line and the one step's
    replay each grow with it). On the fit's line alone, a stranger's 8192-wide Dense layer traced at
    64 and 256 was said to fit 2 GiB up to batch 12,243, where the peak moves into the backward pass and
    the step took 2.28 GB (the one step read 2,281,449,856 B there, and 10,881 as the largest)."""

    def __init__(self, fitted: "Fitted", one_at: Callable[[int], "OneStep"]) -> None:
        self.fitted, self.one_at = fitted, one_at

    def _moved(self, batch: int) -> "OneStep | None":
        one = self.one_at(batch)
        return one if one.moved_peak(batch) else None

    def peak_rise(self, batch: int) -> int:
        one = self._moved(batch)
        fit = self.fitted.peak_rise(batch)
        return fit if one is None else max(fit, one.peak_rise(batch))

    def start_bytes(self, batch: int) -> int | None:
        one = self._moved(batch)
        if one is None or one.peak_rise(batch) <= self.fitted.peak_rise(batch):
            return self.fitted.start_bytes(batch)
        return one.start_bytes(batch)


class _WorstChunks:
    """A one step's replay where each scaled event that holds a batch-carrying output is a chunk twice
    that output's request at the new batch (rounded to 256 bytes), the most a BFC allocator gives one;
    temporaries and everything unscaled as traced. A bound for the largest batch under a limit: the
    replay scales the traced chunks, which at another batch may be bigger (a CNN's 25 MiB requests
    got 32-46 MiB chunks at batches 72-100, and the largest batch said to fit was 20% over)."""

    def __init__(self, one: "OneStep") -> None:
        self.one = one

    def peak_rise(self, batch: int) -> int:
        one = self.one
        events = one._events_at(batch)
        requested = one._requested
        doubled = 2 * -(-np.rint(requested * (batch / one.batch)).astype(np.int64) // BFC_ROUNDING) * BFC_ROUNDING
        return one._replay(batch, np.where(requested > 0, np.sign(events) * doubled, events))[2]

    def start_bytes(self, batch: int) -> int | None:
        return self.one.start_bytes(batch)


def predicted_bytes(predictor, batch: int, absolute: bool) -> int:
    """The predicted peak (absolute bytes in use, or the rise over the step's start)."""
    rise = predictor.peak_rise(batch)
    if not absolute:
        return rise
    return predictor.start_bytes(batch) + rise


def max_batch(predictor, limit: int, absolute: bool) -> int | None:
    """The largest batch whose predicted peak is at most `limit` (0: not even 1); None when no batch up
    to MAX_BATCH_SEARCHED reaches it (nothing grows with the batch, or a limit that far off)."""
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
    given_batch: int | None = None  # the batch it ran at, where the user says (a time-major or ragged feed)

    @cached_property
    def batch(self) -> int:
        return self.given_batch or global_batch(self.step)


def nearest_traced(steps: list[Traced], batch: int) -> Traced:
    """The traced step (with a curve) a one step to `batch` scales: the one whose batch is nearest it, the
    larger where two are as near, the first given among equals (from batch 8 and 16 to 32, batch 8's step
    had predicted a CNN's peak 16% low)."""
    return min((s for s in steps if s.space.has_curve), key=lambda s: (abs(s.batch - batch), -s.batch))


STEP_SPREAD = 0.10  # another step of the first's run at its batch peaking this much higher is said
MAX_SIBLINGS = 4  # the other steps of the first's profile read for that, nearest first (store.siblings)
MAX_RECORD_SIBLINGS = 2  # of a TF1 run's, each a record decoded and analysed of its own (a big step's seconds)
_SIBLINGS_LOOKED_AT = 4  # times as many steps read, at most, to find them (a step without the space is passed over)


def higher_sibling(first: Traced, siblings: list[Traced]) -> str | None:
    """A note where another traced step of `first`'s profile or TF1 run ran the same ops (nearly every op's
    name alike, `_same_function`: not a training step beside an inference one) at its batch, in the same
    memory space, and peaked STEP_SPREAD or more above it: steps of one model at one batch can
    differ (the allocator's chunks, sequences of other lengths; a trial's `predict` peaked 12, 17,
    17, 17 and 10.5 MiB in five batches, and the what-if had scaled the last, 34% low). None where
    none did. Peaks are compared first, names and batches only of the steps that peaked higher."""
    rise = first.space.peak_rise_bytes
    if rise <= 0:
        return None
    higher, ops = [], None
    for other in siblings:
        space = other.space
        if not (space.has_curve and space.trace.id == first.space.trace.id
                and space.peak_rise_bytes >= rise * (1 + STEP_SPREAD)):
            continue
        ops = _ops_of(first.space) if ops is None else ops
        try:
            if _same_function(_ops_of(space), ops) and other.batch == first.batch:
                higher.append(other)
        except WhatIfError:
            continue
    if not higher:
        return None
    top = max(higher, key=lambda other: other.space.peak_rise_bytes)
    return (f"{top.tag} of {first.run}, at the same batch ({first.batch}), peaked "
            f"{top.space.peak_rise_bytes / rise - 1:.0%} higher than {first.tag} (a rise of "
            f"{format_bytes(top.space.peak_rise_bytes)} against {format_bytes(rise)}): steps of one model differ "
            f"(the allocator's chunks, what else ran); predict from the highest with --tag {top.tag} (the page: "
            "pick that step)")


def siblings_of(first: Traced, ref, refs: list, analysis: Callable) -> list[Traced]:
    """The other steps of `first`'s profile or TF1 run (`ref`, among its run's `refs`), as `higher_sibling`
    reads them (store.siblings, nearest first: MAX_SIBLINGS of a profile's, MAX_RECORD_SIBLINGS of a TF1
    run's), each in `first`'s memory space (one without it, or that cannot be read, is passed over);
    none where `first`'s batch was given (that says nothing of theirs). `analysis`: a ref -> its
    StepAnalysis (the CLI's and the route's caches)."""
    if first.given_batch is not None:
        return []
    space_id = first.space.trace.id
    limit = MAX_SIBLINGS if ref.source == XPLANE_SOURCE else MAX_RECORD_SIBLINGS
    out = []
    # The nearest that hold the space (past a Keras callback's empty `batch_N` records), a few looked at.
    for other in store_mod.siblings(refs, ref, _SIBLINGS_LOOKED_AT * limit):
        step = analysis(other)
        space = step.space(space_id) if step.status == "ok" else None
        if space is not None:
            out.append(Traced(first.run, other.tag, other.step, other.source, step, space))
            if len(out) == limit:
                break
    return out


def other_batches(first: Traced, siblings: list[Traced]) -> str | None:
    """A note where other traced steps of `first`'s run ran the same model (as a fit reads it:
    `check_one_model`; a function traced again for another shape names a few ops anew) at other batch
    sizes (a script that traced batches 32 and 64 into one profile): a fit over them is one --tag
    away. None where none did."""
    others, ops = [], None
    for other in siblings:  # nearest first: one step per other batch size
        if other.space.trace.id != first.space.trace.id or not other.space.has_curve:
            continue
        try:
            if other.batch != first.batch and all(other.batch != o.batch for o in others):
                check_one_model([first, other])
                # The same function, retraced (not a `predict` or `evaluate` step beside a training one: trial
                # AL's evaluate batch had been offered a fit with the training steps, 40% low at twice the batch).
                ops = _ops_of(first.space) if ops is None else ops
                if _same_function(_ops_of(other.space), ops, _RETRACED_SHARE):
                    others.append(other)
        except WhatIfError:
            continue
    if not others:
        return None
    at = listed([f"{other.tag} at batch {other.batch}" for other in sorted(others, key=lambda o: o.batch)])
    tags = " ".join(f"--tag {other.tag}" for other in others)
    return (f"{first.run} also holds the same model's {at} ({first.tag}: {first.batch}): a fit over steps at "
            f"several batch sizes reads what each layer holds per sample (the page: pick it among the steps to fit "
            f"with; the CLI: --run {first.run} --tag {first.tag} {tags})")


_FASTER_THAN_BATCH = 1.2  # each traced rise over the last, against the batch's growth: memory beyond the batch's
_SAME_FUNCTION_SHARE = 0.95  # of two steps' op names together, the share both ran: one function's steps
# ... where the function may have been traced again for another batch (a few ops named anew); a training
# step and an inference step of one model share far fewer (trial AL: fit against predict 4%, evaluate 12%).
_RETRACED_SHARE = 0.5


def _same_function(a: set[str], b: set[str], share: float = _SAME_FUNCTION_SHARE) -> bool:
    """Whether two steps ran one function: nearly every op name in either ran in both (a step's loop may
    run an op the other's did not: trial W's LSTM steps, one `TensorListSetItem` apart, had been told
    apart, and a step 34% higher went unsaid), where a training step and an inference step share far fewer."""
    union = len(a | b)
    return union > 0 and len(a & b) >= share * union


def _ops_of(space: SpaceAnalysis) -> set[str]:
    """The ops a step ran, by graph name (not the names a source makes up: `(no op)`, `(before this step)`)."""
    return {name for name in space.names.graph_names if not name.startswith("(")}


def chunking(source: str, allocator: str) -> bool:
    """Whether an allocator's records are chunks up to twice their requests (a BFC allocator: a GPU's,
    the CPU's with TF_CPU_ALLOCATOR_USE_BFC, oneDNN's `mklcpu`), as a profile's always are: the plain
    `cpu` allocator's records are the requests themselves."""
    return source == XPLANE_SOURCE or "bfc" in allocator.lower() or allocator == "mklcpu"


class WhatIf:
    """The predictions for one batch size: one step from the traced step whose batch is nearest the
    one asked, a fit when the steps hold two batch sizes or more; the largest batch under a limit (a
    device allocator's capacity where the trace has one and no limit is given; a host allocator's is
    a cap, no limit). `siblings`: other steps of the first step's run, for `notes`."""

    def __init__(self, steps: list[Traced], batch: int, limit: int | None = None,
                 siblings: list[Traced] = ()) -> None:
        if not steps:
            raise WhatIfError("no traced step to predict from")
        self.steps, self.batch = steps, batch
        self._steps_note = higher_sibling(steps[0], list(siblings)) if siblings else None
        self._batches_note = other_batches(steps[0], list(siblings)) if siblings and len(steps) == 1 else None
        first = steps[0]
        if not first.space.has_curve:
            raise WhatIfError(f"{first.run} {first.tag} has no allocation records: no peak to scale")
        self.base = base = nearest_traced(steps, batch)
        # XLA lays a program's values out again for each batch size: there is nothing to scale in one
        # step, only steps at several batch sizes to fit.
        self.one_step = None if ran_xla(base.step) or programs_beside_ops(base.step) else self.one_step_at(batch)
        batches = {s.batch for s in steps}
        if len(steps) > 1:  # at one batch too: another model's run is refused, not passed over as "no fit"
            check_one_model(steps)
        self.fitted = (Fitted([(s.batch, s.space) for s in steps], self.one_step is not None)
                       if len(batches) > 1 else None)
        if self.fitted is not None and self.one_step is not None:
            # The start as the one step reads it: the nearest traced step's, its feeds scaled, so the
            # fit's start may jump by what two traced starts differ in beyond their feeds (32 KiB on the
            # demo U-Net) as the batch asked crosses the middle between two traced batches.
            self.fitted.anchor_start(self.one_step.start_bytes)
        elif self.fitted is not None:
            # XLA's steps (no one step): the start held as the nearest traced step's, as the note on it says,
            # not a line through the traced starts (trial W's CNN: 2.5 and 12.1 MB at 32 and 64 drawn out to
            # 31.3 MB at 128, where it held 6.9).
            self.fitted.anchor_start(lambda _batch: 0)
        if self.fitted is None and self.one_step is None and len(steps) > 1:
            raise WhatIfError(
                f"every step read holds batch {first.batch}, as read from "
                + ("its ops' shapes" if programs_beside_ops(first.step) else "its XLA program's data")
                + ": pick runs at "
                "other batch sizes, or, where that is not the batch they ran at, give each run's (the CLI's "
                "--traced-batch, once per step)")
        if self.fitted is None and self.one_step is None:
            ran = ("ran XLA programs beside its ops (Keras 3 runs a grouped convolution so on a CPU), whose own bytes "
                   "may or may not grow with the batch" if programs_beside_ops(first.step) else
                   "ran XLA programs (JAX, Keras 3 on JAX, TensorFlow's jit_compile), which lay their values out again "
                   "for each batch size")
            raise WhatIfError(
                f"{first.run} {first.tag} {ran}, so one step cannot be scaled: trace the model at "
                f"another batch size besides {first.batch} and fit over both (the page's runs to fit with; the "
                "CLI's --run once per run, or --tag once per step of one run)")
        if self.fitted is None and not self.one_step.scales.any():
            why = ("; its forward-pass tensors of that batch are shaped like the model's parameters, which are "
                   "never scaled" if self.one_step.batch_in_parameter_shape else "")
            raise WhatIfError(
                f"nothing in {base.run} {base.tag} was found to carry its batch ({self.one_step.batch}, "
                + ("as given: is that the batch it ran at?" if base.given_batch else "as read from its shapes")
                + f"){why}: one step cannot be scaled. Trace the model at two batch sizes and fit over both (runs).")
        # A device's capacity is what its steps must fit in; a host allocator's is a cap it was
        # given (the CPU BFC allocator's 64 GiB, whatever the machine holds): no limit by itself.
        capacity = first.space.trace.capacity_bytes if first.space.trace.memory_kind == DEVICE_MEMORY else None
        self.limit, self.limit_source = ((limit, "limit") if limit is not None
                                         else (capacity, "capacity") if capacity else (None, None))

    @property
    def notes(self) -> list[str]:
        """What the answer should be read with: a step of the first's profile that peaked well above
        it (`higher_sibling`), a profile's start held as traced where the batch asked is larger, the
        largest batch under a limit on a chunking allocator (its chunks may grow more than the batch),
        a fit and a one step far apart, and an allocator several devices share (its peak is not this
        device's alone)."""
        notes = [note for note in (self._steps_note, self._batches_note) if note]
        base = self.base
        start = base.space.start_bytes
        carried = self.one_step.resident_batch_bytes if self.one_step is not None else 0
        if (base.source == XPLANE_SOURCE and start is not None and not carried
                and self.batch > max(step.batch for step in self.steps)):
            notes.append(
                f"the start ({format_bytes(start)} in use before {base.tag}) is held as traced: a profile does not "
                "show what it holds (the batch given to the step as an argument, made before it: a SavedModel's "
                "or a tf.function's input; tf.data's prefetched batches, Keras' input buffers), which may grow with "
                "the batch, and the peak by as much (a Keras fit's start can grow by several MiB from one batch size "
                "to the next; a served model's, by its input): read the predicted rise, or trace the batch asked")
        trace = base.space.trace
        if self.limit is not None and chunking(base.source, trace.allocator):
            safe = (max_batch(self.one_step.worst_chunks(), self.limit, self.absolute(self.one_step))
                    if self.one_step is not None and self.one_step.scales.any() else None)
            bound = (f": were every batch-sized request given a chunk twice its size, batch {safe:,} would still fit"
                     if safe else "")
            notes.append(
                "the largest batch that fits scales the traced allocator chunks; at another batch the allocator "
                "may give a request a chunk up to twice its size (a request of 194 MiB may take a chunk of 256 MiB), so keep "
                f"a margin below the limit{bound}, or trace the batch found")
        if self.fitted is not None and self.one_step is not None and self.one_step.scales.any():
            fit, one = self.fitted.peak_rise(self.batch), self.one_step.peak_rise(self.batch)
            if abs(fit - one) > _PREDICTIONS_APART * max(fit, one, 1):
                apart = (f"at batch {self.batch} the fit and the one step are {abs(fit - one) / max(fit, one):.0%} "
                         f"apart (peak rise {format_bytes(fit)} against {format_bytes(one)}): ")
                if self.one_step.may_miss:  # the one step says what it does not scale (a GNN's edges had been
                    # put down to the allocator's chunks, the fit exact)
                    notes.append(apart + "the one step's warning says what it may miss, which the fit's line over "
                                 f"the traced batches carries; trace batch {self.batch} to settle it")
                else:
                    notes.append(
                        apart + "what the traced steps hold that does not follow the batch changed between them (the "
                        "allocator's chunks, a schedule that moved), which the fit's line carries on and the one step, "
                        f"from {base.run} {base.tag} alone, does not; trace batch {self.batch} to settle it")
        held = readings_above(base.space)
        rounding = allocator_gap(base.space)[0].details.get("rounding") if held else None
        if held:
            # A request's block: at another batch the request may fill it, or take a block up to twice its size
            # (its rounding is no memory that grows, nor oneDNN's): up to the request is the margin.
            margin = rounding["request_bytes"] if rounding else held
            grown = (f" (at batch {self.batch}, scaled as the batch, {format_bytes(margin * self.batch // base.batch)})"
                     if self.batch > base.batch else "")
            with_margin = self.max_batch(self.lead, margin / base.batch)
            fits = f": with it added, {'' if rounding else 'scaled as the batch, '}batch {with_margin:,} would fit" \
                if with_margin else ""
            said = f"{trace.allocator} held up to {format_bytes(held)} in {base.run} {base.tag} beyond what its records show"
        if rounding:
            notes.append(
                f"{said}, its rounding: the {format_bytes(rounding['block_bytes'])} block it gave {rounding['node']}'s "
                f"request of {format_bytes(margin)} (see its allocator_gap finding), which no prediction counts. At "
                "another batch that request may fill its block, or take one up to twice its size: "
                + (f"keep up to the request's size{grown} as a margin below the limit{fits}, or trace the batch found"
                   if self.limit is not None else
                   f"add up to the request's size{grown} to the predicted peak, or trace the batch asked"))
        elif held:
            whose = ("oneDNN's workspaces and reordered weights" if trace.allocator == "mklcpu"
                     else "a library's workspaces, XLA's clusters")
            notes.append(
                f"{said} (memory taken with no record: {whose}; see its allocator_gap finding), which no prediction "
                f"counts: it may grow with the batch{grown}, and faster (oneDNN picks other kernels at other "
                "sizes), "
                + (f"so keep it as a margin below the limit{fits}, or trace the batch found" if self.limit is not None
                   else "so add it to the predicted peak, or trace the batch asked"))
        copied = [(step, found[0]) for step in self.steps
                  for found in [variable_copies(step.space, step.step)] if found]
        if copied:
            at = listed([f"{format_bytes(f.bytes)} in {step.run} {step.tag}" for step, f in copied])
            notes.append(
                f"variables' updates copied them in the traced steps ({at} at the peak; see the variable_copies "
                "finding): whether an update copies its variable depends on what else reads it as it runs, the "
                "schedule's doing, not the batch's, so a step at another batch may make more copies or none: the "
                "one-step prediction keeps them as traced, and a fit through steps that copied differently reads "
                "the difference as growth")
        least = base.space.start_counts_from
        if self.limit is not None and least and self.absolute(self.lead):
            notes.append(
                f"the start counts only {trace.allocator}'s requests of {format_bytes(least)} and more, as its "
                "readings do: smaller tensors in use before the step (a model's biases and small "
                "kernels) are in no predicted peak, so keep them as a margin below the limit")
        if trace.shared_with:
            notes.append(
                f"{trace.allocator} is shared with {', '.join(trace.shared_with)}: this predicts the bytes of "
                f"{trace.id}'s own ops; the allocator holds the other devices' too, so its peak at that batch "
                "is higher, and a limit on it is reached sooner (ask for each device, or trace one device)")
        return notes

    @property
    def predictors(self) -> dict:
        """The predictions made, the one the answer leads with first: the fit when there is one,
        unless its traced peaks do not grow with the batch or move between phases or layers (its
        warnings), or the one step finds the peak moved at the batch asked (`fit_warning`), and the
        one step scales."""
        made = {"one_step": self.one_step} if self.one_step is not None else {}
        if self.fitted is None:
            return made
        if made and (self.fitted.falls or self.fitted.moves or self._moved_peak) and self.one_step.scales.any():
            return {**made, "fit": self.fitted}
        return {"fit": self.fitted, **made}

    @cached_property
    def _moved_peak(self) -> str | None:
        return self.one_step.moved_peak(self.batch) if self.one_step is not None and self.fitted is not None else None

    @property
    def fit_warning(self) -> str | None:
        """The fit's own warning, and where the one step finds the peak moved at the batch asked."""
        said = [self.fitted.warning] if self.fitted is not None and self.fitted.warning else []
        if self._moved_peak:
            said.append(f"at batch {self.batch} the one-step replay finds the peak at another moment of the step "
                        f"(ending at {self._moved_peak}) than the traced peaks the fit goes through, so the fit "
                        "cannot see it: read the one-step prediction")
        return "; ".join(said) or None

    @property
    def lead(self):
        return next(iter(self.predictors.values()))

    def absolute(self, predictor) -> bool:
        """Whether the limit applies to absolute bytes (a baseline is known) or to the rise."""
        return predictor.start_bytes(self.batch) is not None

    def max_batch(self, predictor, per_sample: float = 0) -> int | None:
        """The largest batch under the limit (`max_batch`), with `per_sample` bytes more per sample in the
        peak (`_WithMargin`) where given; None without a limit, and for a fit whose traced peaks fall with
        the batch: the search reads a peak that never falls as the batch grows, and such a line had said
        "not even batch 1 fits" beside a prediction under the limit. Searched `as_answered`."""
        if self.limit is None or getattr(predictor, "falls", False):
            return None
        answered = self.as_answered(predictor)
        return max_batch(_WithMargin(answered, per_sample) if per_sample else answered, self.limit,
                         self.absolute(predictor))

    def as_answered(self, predictor):
        """A prediction as the answer at each batch reads it, for the largest batch under a limit and
        the chart: a fit, where a one step scales, as `_FitWhereSeen`."""
        if predictor is self.fitted and self.one_step is not None and self.one_step.scales.any():
            return _FitWhereSeen(self.fitted, self.one_step_at)
        return predictor

    def one_step_at(self, batch: int) -> "OneStep":
        """The one step an answer asked at `batch` makes: from the traced step nearest it (`nearest_traced`)."""
        near = nearest_traced(self.steps, batch)
        return one_step(near.step, near.space, near.given_batch)
