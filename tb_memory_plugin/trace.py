"""The trace model: what every trace source produces for one step.

This is the boundary between formats and analysis (docs/architecture.md).
A source (`sources/run_metadata`, one per trace format) turns its bytes into
a `Trace`: one `SpaceTrace` per memory space (a real device and one of its
allocators), stored as columns (numpy arrays). Everything after it (curve,
peak, attribution, scope trees, reports) reads only these columns.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

# `/job:localhost/replica:0/task:0/device:GPU:0` and old `/job:.../gpu:0`.
# `.../stream:14`, `.../stream:all`, `.../memcpy` are pseudo-devices: skipped.
_REAL_DEVICE_RE = re.compile(r"(?:^|/)(?:device:)?(?P<type>[A-Za-z_]+):(?P<index>\d+)$")

DEVICE_MEMORY = "device"
HOST_MEMORY = "host"  # pinned host memory of an accelerator (`cuda_host_bfc`), or a CPU's


class TraceDecodeError(ValueError):
    """The bytes are not a valid trace of their format."""


def parse_device(device: str) -> tuple[str, int] | None:
    """(`GPU`, 0) for a real device name, None for stream/memcpy pseudo-devices."""
    if "stream:" in device or device.endswith("/memcpy") or "/memcpy" in device:
        return None
    match = _REAL_DEVICE_RE.search(device)
    if not match or match.group("type").lower() in ("stream", "task", "replica"):
        return None
    return match.group("type").upper(), int(match.group("index"))


_TASK_RE = re.compile(r"/job:(?P<job>[^/]+)(?:/replica:\d+)?/task:(?P<task>\d+)")


def device_task(device: str) -> tuple[str, int] | None:
    """(`worker`, 1) for `/job:worker/replica:0/task:1/device:CPU:0`; None where the name has no task."""
    match = _TASK_RE.search(device)
    return (match.group("job").lower(), int(match.group("task"))) if match else None


def same_device(a: str, b: str) -> bool:
    """Whether two device names, in any spelling, are one device: the same type and index, and the
    same job and task where both names say (`/cpu:0` is any task's first CPU)."""
    parsed = parse_device(a)
    if parsed is None or parsed != parse_device(b):
        return False
    task_a, task_b = device_task(a), device_task(b)
    return task_a is None or task_b is None or task_a == task_b


def matches_device(space: "SpaceTrace", wanted: str) -> bool:
    """Whether a memory space is the one a device, as users write it, names: its id (`GPU:0/GPU_0_bfc`), its
    allocator, a device type (`GPU`), or the device in any spelling (`/gpu:0`, `/device:GPU:0`, `GPU:0`,
    `/job:localhost/replica:0/task:0/gpu:0`: the `runs` route lists them so). The CLI's --device and the
    routes' `device` read it alike."""
    wanted = wanted.lower()
    if wanted in (space.id.lower(), space.device.lower(), space.allocator.lower(), space.device_type.lower()):
        return True
    if space.id.lower().startswith(wanted.rstrip("/") + "/"):  # an id without its allocator (`worker:1/CPU:0`)
        return True
    if _TASK_ID_RE.match(wanted):  # another task's id: not a device spelling
        return False
    return same_device(wanted, space.device)


_TASK_ID_RE = re.compile(r"^[^/:]+:\d+/[a-z_]+:\d+")  # `worker:1/cpu:0...`: an id that names its task


def memory_kind(device_type: str, allocator: str) -> str:
    """Whether an allocator's bytes live in the device's own memory or in host memory."""
    if device_type == "CPU" or "host" in allocator.lower():
        return HOST_MEMORY
    return DEVICE_MEMORY


# Allocators whose own bytes in use (their readings) may count only requests of some size or more, and
# the sizes, the likeliest first. oneDNN's `mklcpu` (TensorFlow's CPU allocator on x86, oneDNN on by
# default) sends a smaller request to malloc and, with its default settings, counts it in no reading
# (mkl_cpu_allocator.h: kSmallAllocationsThreshold, mkl_small_allocator_collect_stats false): 256 KiB
# since TensorFlow 2.12, 4 KiB before. TensorFlow's step stats still record every request, so the
# readings are compared with the records of the requests they count (SpaceAnalysis.readings_count_from
# reads which size a step's readings agree with).
READINGS_COUNT_FROM = {"mklcpu": (256 * 1024, 4 * 1024)}
# Readings that count none of a step's requests: oneDNN's allocator with TF_ONEDNN_USE_SYSTEM_ALLOCATOR
# sends every one to malloc, and its readings (its unused BFC's) tell nothing of the step's start.
COUNTS_NONE = 1 << 62


# A BFC allocator (a GPU's, TensorFlow's allow_growth pools, oneDNN's mklcpu for its larger requests) rounds
# every request up to 256 bytes, and gives a request a whole free block where the block is under twice the
# (rounded) request; its pool grows by regions of 2 MiB doubled, so a fresh region's block is a power of two,
# 2 MiB or more. A GPU's step stats record the block; mklcpu's record the request while its readings count
# the block (SpaceAnalysis.rounded_block reads the difference as the block's rounding).
BFC_ROUNDING = 256
BFC_REGION_MIN = 2 << 20
READS_BLOCKS_RECORDS_REQUESTS = frozenset({"mklcpu"})


def readings_thresholds(allocator: str) -> tuple[int, ...]:
    """The sizes an allocator's readings may count requests from, the likeliest first (empty: all)."""
    return READINGS_COUNT_FROM.get(allocator, ())


class JoinedNames(list):
    """Distinct names (a list of str) that also carry their UTF-8 bytes joined by newlines,
    where a source made those on the way (names.py then reads them without joining and
    encoding the names again). Only for names without a newline."""

    __slots__ = ("joined", "newlines")

    def __init__(self, names: list[str], joined: bytes, newlines=None) -> None:
        """newlines: where the newlines of `joined` are (a numpy array), where the source found them."""
        super().__init__(names)
        self.joined = joined
        self.newlines = newlines


@dataclass
class SpaceTrace:
    """Executions and allocation events of one allocator on one device.

    Executions (one per op run) are rows 0..n-1; an execution's runtime name
    is `distinct_names[name_code[i]]`. Times are microseconds from the step's
    start. Per-execution figures a source cannot know are zeros.
    """

    id: str  # `GPU:0/GPU_0_bfc`
    device: str
    device_type: str
    allocator: str
    label_of: Mapping[str, str]  # free-text label by runtime name (`name = Op(inputs)`), where the source has one
    distinct_names: list[str]  # each runtime name once
    name_code: np.ndarray  # per execution: index into distinct_names
    start_us: np.ndarray
    end_us: np.ndarray
    allocated: np.ndarray  # bytes the op allocated
    op_peak: np.ndarray  # the op's own high-water mark
    live: np.ndarray  # bytes still held when the op finished
    output: np.ndarray  # bytes of the tensors it produced on this allocator
    temp: np.ndarray  # scratch freed inside the op
    persistent: np.ndarray  # bytes kept across steps
    event_time_us: np.ndarray  # allocation events: time
    event_bytes: np.ndarray  # + on alloc, - on free
    event_exec: np.ndarray  # the execution that owns the bytes
    snapshot_time_us: np.ndarray  # the allocator's own bytes-in-use readings
    snapshot_bytes: np.ndarray
    # More allocator readings at the snapshot times, where the source has them (XPlane:
    # "reserved_bytes", "fragmentation"), and the allocator's limit (allocated + available
    # + reserved): what a step must fit in. RunMetadata has neither.
    snapshot_series: Mapping[str, np.ndarray] = field(default_factory=dict)
    capacity_bytes: int | None = None
    # The event each reading was taken after, where the source reads the allocator at each event
    # (XPlane), rather than when an op finished (RunMetadata: None): two events in one microsecond
    # then each have their own reading.
    snapshot_event: np.ndarray | None = None
    # Where each reading's op started, where the source reads the allocator once per op at a moment
    # it does not record (RunMetadata: the reading is kept at the op's end, but may have been taken
    # before a temporary the op freed); None where each reading has its own event.
    snapshot_start_us: np.ndarray | None = None
    # Runtime names -> for each, (shape, requested bytes) of every output of its first
    # execution (XPlane: of every shaped allocation, scratch included), read in one go on
    # demand where the source keeps them (the batch-size what-if asks for every name of a
    # step); None where the source cannot.
    outputs_of: Callable[[list[str]], list[list[tuple[tuple[int, ...], int]]]] | None = None
    # The other spaces of the same allocator, where devices of one process share it (CPUs'
    # `mklcpu`, pinned `cuda_host_bfc`): its readings count all of theirs, so the source
    # leaves them out (no baseline) and this says why.
    shared_with: tuple[str, ...] = ()
    # Runtime names the source saw feed the step on this allocator (a profile's ops that allocated
    # here only on tf.data's threads): categorised as inputs, whatever their op type.
    input_names: frozenset[str] = frozenset()
    # Per execution: the XLA program whose blocks hold its bytes, as the program's HLO places the
    # ops' values in them (sources/xplane/hlo.py), an index into xla_program_names (-1: none); a
    # name two programs' HLO place values of has an execution in each.
    xla_program_names: list[str] = field(default_factory=list)
    xla_program_exec: np.ndarray | None = None
    # Events that are pieces of one profile event beyond its first (a split XLA block's).
    piece_rows: int = 0
    # Whether `(no op)` holds allocations TensorFlow wrote with the op `(null)` (up to 2.17).
    unattributed_null: bool = False
    # (execution, start, end) of each run of an op, where the source keeps one execution for
    # several runs (a profile's loop body op: one per node, run once per iteration; its start and
    # end span them all); None where each execution is one run (RunMetadata).
    runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def xla_program_of(self) -> dict[str, str]:
        """Runtime names that hold part of an XLA program's blocks -> that program (of several, the
        one whose blocks the name allocated most in)."""
        if self.xla_program_exec is None:
            return {}
        best: dict[str, tuple[int, str]] = {}
        for i in np.flatnonzero(self.xla_program_exec >= 0).tolist():
            name, size = self.name(i), int(self.allocated[i])
            if name not in best or size > best[name][0]:
                best[name] = (size, self.xla_program_names[int(self.xla_program_exec[i])])
        return {name: program for name, (_, program) in best.items()}

    @property
    def exec_count(self) -> int:
        return self.name_code.size

    @property
    def memory_kind(self) -> str:
        return memory_kind(self.device_type, self.allocator)

    def name(self, exec_index: int) -> str:
        """The raw runtime name of an execution."""
        return self.distinct_names[self.name_code[exec_index]]

    @property
    def has_records(self) -> bool:
        return self.event_time_us.size > 0


@dataclass(frozen=True)
class ProgramShapes:
    """What an XLA program's batch is read from (sources/xplane/hlo.py): the shapes of the arguments
    it takes as data (neither state it returns new values of, nor bytes its caller donated: not
    parameters nor optimizer slots), and how many of its values of rank 2 or more have each first
    dimension (its activations, mostly, against the few a parameter's shape gives)."""

    inputs: tuple[tuple[int, ...], ...]
    # Counts `leading` when first asked (only the what-if does): a pass over every instruction.
    count_leading: Callable[[], Mapping[int, int]] = field(default=dict, repr=False, compare=False)

    @functools.cached_property
    def leading(self) -> Mapping[int, int]:
        return self.count_leading()


@dataclass
class Trace:
    """One traced step, as a source produced it."""

    spaces: list[SpaceTrace]
    devices: list[str]  # real devices with executions, in trace order
    step_start_us: int  # absolute wall-clock micros of the first execution
    duration_us: int
    node_stat_count: int  # executions over all devices, as the source counted them
    op_types: Mapping[str, str] = field(default_factory=dict)  # runtime name -> op type the source knows for sure
    source: str = "run_metadata"  # or "xplane"
    # What the source knows the step misses (a device that ran work but whose allocations
    # are not in the trace), said beside the figures; None when nothing is.
    note: str | None = None
    # Runtime name -> the layer the source knows it is in (a profile's Keras 3 layer scopes:
    # `cnn/c2` for `gradient_tape/cnn/c2/convolution/Conv2DBackpropInput`); others by their path.
    layers: Mapping[str, str] = field(default_factory=dict)
    # Of the XLA program that allocated the most in the step, where its compiled HLO was read.
    program_shapes: ProgramShapes | None = None
    # Runtime name -> op type of the graphs the step ran (RunMetadata's partition graphs, after grappler: a fused
    # node's kernel), as a graph names it: where the run graph lacks the name, before its label.
    ran_op_types: Mapping[str, str] = field(default_factory=dict)


def labels_of(label_of: Mapping[str, str], names: list[str]) -> list[str]:
    """The label of each name ("" where none): in one read where the source offers `many`
    (RunMetadata labels cost a parse each)."""
    many = getattr(label_of, "many", None)
    return many(names) if many is not None else [label_of.get(name, "") for name in names]


def empty_trace() -> Trace:
    return Trace([], [], 0, 0, 0)
