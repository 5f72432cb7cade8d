"""Serialized RunMetadata -> typed trace of node executions and allocation events.

Plain Python over TensorBoard's compat protos: no TensorFlow, no server.
One `SpaceTrace` per memory space (a real device and one of its allocators),
stored as columns (numpy arrays) so analysis is vectorised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import graph_pb2

from . import wire
from ._numeric import scatter_sum

# `/job:localhost/replica:0/task:0/device:GPU:0` and old `/job:.../gpu:0`.
# `.../stream:14`, `.../stream:all`, `.../memcpy` are pseudo-devices: skipped.
_REAL_DEVICE_RE = re.compile(r"(?:^|/)(?:device:)?(?P<type>[A-Za-z_]+):(?P<index>\d+)$")


class TraceDecodeError(ValueError):
    """The bytes are not a RunMetadata message."""


def parse_device(device: str) -> tuple[str, int] | None:
    """(`GPU`, 0) for a real device name, None for stream/memcpy pseudo-devices."""
    if "stream:" in device or device.endswith("/memcpy") or "/memcpy" in device:
        return None
    match = _REAL_DEVICE_RE.search(device)
    if not match or match.group("type").lower() in ("stream", "task", "replica"):
        return None
    return match.group("type").upper(), int(match.group("index"))


@dataclass
class SpaceTrace:
    """Node executions and allocation events of one allocator on one device.

    Executions are columns indexed 0..n-1; times are microseconds relative to
    the step's start.
    """

    id: str
    device: str
    device_type: str
    allocator: str
    label_of: dict[str, str]  # timeline_label by node name (its first execution's)
    distinct_names: list[str]  # the distinct names among `names`
    name_code: np.ndarray  # per execution: index into distinct_names
    start_us: np.ndarray
    end_us: np.ndarray
    allocated: np.ndarray  # sum of positive memory[].total_bytes
    op_peak: np.ndarray  # memory[].peak_bytes
    live: np.ndarray  # memory[].live_bytes
    output: np.ndarray  # outputs' requested_bytes on this allocator
    temp: np.ndarray  # memory_stats.temp_memory_size (device's main allocator)
    persistent: np.ndarray  # memory_stats.persistent_memory_size (likewise)
    event_time_us: np.ndarray  # allocation_records: time
    event_bytes: np.ndarray  # + on alloc, - on free
    event_exec: np.ndarray  # index of the execution that recorded it
    snapshot_time_us: np.ndarray  # allocator_bytes_in_use readings (op end)
    snapshot_bytes: np.ndarray

    @property
    def exec_count(self) -> int:
        return self.name_code.size

    def name(self, exec_index: int) -> str:
        """The raw runtime name of an execution."""
        return self.distinct_names[self.name_code[exec_index]]

    @cached_property
    def names(self) -> list[str]:
        """The raw name of every execution (built on first use: big steps have 100k)."""
        return [self.distinct_names[code] for code in self.name_code.tolist()]

    @property
    def has_records(self) -> bool:
        return self.event_time_us.size > 0


@dataclass
class Trace:
    """One traced step."""

    spaces: list[SpaceTrace]
    devices: list[str]  # real devices with node stats, in trace order
    step_start_us: int  # absolute wall-clock micros of the first execution
    duration_us: int
    node_stat_count: int
    partition_op_types: dict[str, str] = field(default_factory=dict)


def _check_bytes(data) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TraceDecodeError(f"expected bytes, got {type(data).__name__}")


def _corrupt(data, exc) -> TraceDecodeError:
    return TraceDecodeError(f"the traced step's bytes ({len(data)} B) are not a valid RunMetadata: {exc}")


def decode_run_metadata(data: bytes) -> Trace:
    """Decode serialized RunMetadata bytes into a Trace (columnar, see wire.py)."""
    _check_bytes(data)
    data = bytes(data)
    try:
        run = wire.parse_run(data)
        devices: list[tuple[str, str, int, wire.NodeColumns]] = []
        for dev_stats in run.step_stats.dev_stats:
            parsed = parse_device(dev_stats.device)
            if parsed is None or not dev_stats.node_stats:
                continue
            devices.append((dev_stats.device, parsed[0], parsed[1], wire.NodeColumns(dev_stats.node_stats)))
        partition_op_types = {}
        for graph_bytes in run.partition_graphs:
            graph = graph_pb2.GraphDef.FromString(graph_bytes)
            partition_op_types.update((node.name, node.op) for node in graph.node)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise _corrupt(data, exc) from None
    return _trace(devices, partition_op_types)


def _trace(devices, partition_op_types: dict[str, str]) -> Trace:
    node_stat_count = sum(columns.name_code.size for *_, columns in devices)
    step_start = min((int(c.start.min()) for *_, c in devices), default=0)
    step_end = max((int(c.end.max()) for *_, c in devices), default=0)

    spaces: list[SpaceTrace] = []
    for device, device_type, index, columns in devices:
        spaces.extend(_spaces_of_device(device, device_type, index, columns, step_start))
    return Trace(
        spaces=spaces,
        devices=[d for d, *_ in devices],
        step_start_us=step_start,
        duration_us=step_end - step_start,
        node_stat_count=node_stat_count,
        partition_op_types=partition_op_types,
    )


def _spaces_of_device(
    device: str, device_type: str, index: int, columns: wire.NodeColumns, step_start: int
) -> list[SpaceTrace]:
    """One SpaceTrace per allocator seen on the device; the main one keeps every execution."""
    n = columns.name_code.size
    allocators = sorted(name for name in columns.allocator_codes if name)
    if not allocators:
        return []
    memory = {name: columns.rows(columns.memory, name) for name in allocators}
    records = {name: columns.rows(columns.records, name) for name in allocators}
    outputs = {name: columns.rows(columns.outputs, name) for name in allocators}

    def weight(name: str) -> int:
        return int(memory[name][:, 1].clip(min=0).sum() + outputs[name][:, 1].sum())

    primary = max(allocators, key=weight)
    unnamed = columns.rows(columns.outputs, "")
    if unnamed.size:  # outputs with no allocator name belong to the main one
        outputs[primary] = np.concatenate([outputs[primary], unnamed])

    start = columns.start - step_start
    end = columns.end - step_start
    zeros = np.zeros(n, dtype=np.int64)
    spaces = []
    for name in [primary] + [a for a in allocators if a != primary]:
        mem, rec, out = memory[name], records[name], outputs[name]
        cols = {
            "allocated": scatter_sum(mem[:, 0], mem[:, 1].clip(min=0), n),
            "op_peak": scatter_sum(mem[:, 0], mem[:, 2], n),
            "live": scatter_sum(mem[:, 0], mem[:, 3], n),
            "output": scatter_sum(out[:, 0], out[:, 1], n),
            "temp": columns.temp if name == primary else zeros,
            "persistent": columns.persistent if name == primary else zeros,
            "start_us": start,
            "end_us": end,
        }
        ev_exec = rec[:, 0]
        snapshot_rows = mem[mem[:, 4] > 0]
        snapshot_exec = snapshot_rows[:, 0]
        snapshot_bytes = snapshot_rows[:, 4]
        distinct_names, name_code = columns.distinct_names, columns.name_code
        if name != primary:  # only the executions that touched this allocator
            keep = np.unique(np.concatenate([mem[:, 0], out[:, 0]]))
            remap = np.full(n, -1, dtype=np.int64)
            remap[keep] = np.arange(keep.size)
            cols = {k: v[keep] for k, v in cols.items()}
            ev_exec = remap[ev_exec]
            snapshot_exec = remap[snapshot_exec]
            used, name_code = np.unique(name_code[keep], return_inverse=True)
            distinct_names = [distinct_names[i] for i in used.tolist()]
        spaces.append(
            SpaceTrace(
                id=f"{device_type}:{index}/{name}",
                device=device,
                device_type=device_type,
                allocator=name,
                label_of=columns.label_of,
                distinct_names=distinct_names,
                name_code=name_code.reshape(-1).astype(np.int64),
                event_time_us=rec[:, 1] - step_start,
                event_bytes=rec[:, 2],
                event_exec=ev_exec,
                # The allocator is read when the op finishes.
                snapshot_time_us=cols["end_us"][snapshot_exec],
                snapshot_bytes=snapshot_bytes,
                **cols,
            )
        )
    return spaces


def scan_devices(data: bytes) -> list[str]:
    """Real devices with node stats, without decoding the node stats."""
    try:
        run = wire.parse_run(bytes(data))
    except Exception:  # noqa: BLE001 - corrupt steps list no devices; summary says why
        return []
    return [d.device for d in run.step_stats.dev_stats if d.node_stats and parse_device(d.device)]
