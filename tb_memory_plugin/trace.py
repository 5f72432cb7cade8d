"""Serialized RunMetadata -> typed trace of node executions and allocation events.

Plain Python over TensorBoard's compat protos: no TensorFlow, no server.
One `SpaceTrace` per memory space (a real device and one of its allocators),
stored as columns (numpy arrays) so analysis is vectorised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import config_pb2

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
    names: list[str]
    labels: list[str]
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
        return len(self.names)

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


class _DeviceColumns:
    """One device's node stats, gathered in a single tight pass (the hot loop).

    Rows are flattened into int lists (allocators as small integer codes) and
    turned into numpy arrays once: far cheaper than per-row Python objects.
    """

    def __init__(self, node_stats) -> None:
        names: list[str] = []
        labels: list[str] = []
        times: list[int] = []  # start, end per execution
        stats_sizes: list[int] = []  # temp, persistent per execution
        memory: list[int] = []  # exec, allocator, total, peak, live, bytes in use
        records: list[int] = []  # exec, allocator, time, bytes
        outputs: list[int] = []  # exec, allocator, requested bytes
        codes: dict[str, int] = {}
        names_append, labels_append = names.append, labels.append
        times_extend, sizes_extend = times.extend, stats_sizes.extend
        memory_extend, records_extend, outputs_extend = memory.extend, records.extend, outputs.extend
        for i, stats in enumerate(node_stats):
            names_append(stats.node_name)
            labels_append(stats.timeline_label)
            begin = stats.all_start_micros
            times_extend((begin, begin + stats.all_end_rel_micros))
            memory_stats = stats.memory_stats
            sizes_extend((memory_stats.temp_memory_size, memory_stats.persistent_memory_size))
            entries = stats.memory
            if entries:
                for entry in entries:
                    allocator = entry.allocator_name
                    code = codes.get(allocator)
                    if code is None:
                        code = codes[allocator] = len(codes)
                    memory_extend((i, code, entry.total_bytes, entry.peak_bytes,
                                   entry.live_bytes, entry.allocator_bytes_in_use))
                    for record in entry.allocation_records:
                        records_extend((i, code, record.alloc_micros, record.alloc_bytes))
            node_outputs = stats.output
            if node_outputs:
                for output in node_outputs:
                    description = output.tensor_description.allocation_description
                    allocator = description.allocator_name
                    code = codes.get(allocator)
                    if code is None:
                        code = codes[allocator] = len(codes)
                    outputs_extend((i, code, description.requested_bytes))
        self.names, self.labels = names, labels
        self.allocator_codes = codes
        times_array = np.asarray(times, dtype=np.int64).reshape(-1, 2)
        self.start, self.end = times_array[:, 0], times_array[:, 1]
        sizes_array = np.asarray(stats_sizes, dtype=np.int64).reshape(-1, 2)
        self.temp, self.persistent = sizes_array[:, 0], sizes_array[:, 1]
        self.memory = np.asarray(memory, dtype=np.int64).reshape(-1, 6)
        self.records = np.asarray(records, dtype=np.int64).reshape(-1, 4)
        self.outputs = np.asarray(outputs, dtype=np.int64).reshape(-1, 3)

    def rows(self, table: np.ndarray, allocator: str) -> np.ndarray:
        """Rows of a table for one allocator, without the allocator column."""
        code = self.allocator_codes.get(allocator, -1)
        selected = table[table[:, 1] == code]
        return np.delete(selected, 1, axis=1)


def parse_run_metadata(data: bytes) -> config_pb2.RunMetadata:
    """Parse bytes into a RunMetadata, with a clear error for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TraceDecodeError(f"expected bytes, got {type(data).__name__}")
    run_metadata = config_pb2.RunMetadata()
    try:
        run_metadata.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise TraceDecodeError(
            f"the traced step's bytes ({len(data)} B) are not a valid RunMetadata: {exc}"
        ) from None
    return run_metadata


def decode_run_metadata(data: bytes) -> Trace:
    """Decode serialized RunMetadata bytes into a Trace."""
    return trace_from_proto(parse_run_metadata(data))


def trace_from_proto(run_metadata: config_pb2.RunMetadata) -> Trace:
    devices: list[tuple[str, str, int, _DeviceColumns]] = []
    node_stat_count = 0
    for dev_stats in run_metadata.step_stats.dev_stats:
        parsed = parse_device(dev_stats.device)
        if parsed is None or not dev_stats.node_stats:
            continue
        columns = _DeviceColumns(dev_stats.node_stats)
        node_stat_count += len(columns.names)
        devices.append((dev_stats.device, parsed[0], parsed[1], columns))

    step_start = min((int(c.start.min()) for *_, c in devices), default=0)
    step_end = max((int(c.end.max()) for *_, c in devices), default=0)

    spaces: list[SpaceTrace] = []
    for device, device_type, index, columns in devices:
        spaces.extend(_spaces_of_device(device, device_type, index, columns, step_start))

    partition_op_types = {
        node.name: node.op
        for graph in run_metadata.partition_graphs
        for node in graph.node
    }
    return Trace(
        spaces=spaces,
        devices=[d for d, *_ in devices],
        step_start_us=step_start,
        duration_us=step_end - step_start,
        node_stat_count=node_stat_count,
        partition_op_types=partition_op_types,
    )


def _sum_by_exec(n: int, execs: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, execs, values)
    return out


def _spaces_of_device(
    device: str, device_type: str, index: int, columns: _DeviceColumns, step_start: int
) -> list[SpaceTrace]:
    """One SpaceTrace per allocator seen on the device; the main one keeps every execution."""
    n = len(columns.names)
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
            "allocated": _sum_by_exec(n, mem[:, 0], mem[:, 1].clip(min=0)),
            "op_peak": _sum_by_exec(n, mem[:, 0], mem[:, 2]),
            "live": _sum_by_exec(n, mem[:, 0], mem[:, 3]),
            "output": _sum_by_exec(n, out[:, 0], out[:, 1]),
            "temp": columns.temp if name == primary else zeros,
            "persistent": columns.persistent if name == primary else zeros,
            "start_us": start,
            "end_us": end,
        }
        ev_exec = rec[:, 0]
        snapshot_rows = mem[mem[:, 4] > 0]
        snapshot_exec = snapshot_rows[:, 0]
        snapshot_bytes = snapshot_rows[:, 4]
        names, labels = columns.names, columns.labels
        if name != primary:  # only the executions that touched this allocator
            keep = np.unique(np.concatenate([mem[:, 0], out[:, 0]]))
            remap = np.full(n, -1, dtype=np.int64)
            remap[keep] = np.arange(keep.size)
            cols = {k: v[keep] for k, v in cols.items()}
            ev_exec = remap[ev_exec]
            snapshot_exec = remap[snapshot_exec]
            names = [names[i] for i in keep]
            labels = [labels[i] for i in keep]
        spaces.append(
            SpaceTrace(
                id=f"{device_type}:{index}/{name}",
                device=device,
                device_type=device_type,
                allocator=name,
                names=names,
                labels=labels,
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


def _devices_only_class():
    """A wire-compatible RunMetadata that keeps only device names (fast to parse)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file_proto = descriptor_pb2.FileDescriptorProto(name="tb_memory_devices_only.proto", package="tb_memory")
    run = file_proto.message_type.add(name="RunMetadataDevices")
    run.field.add(name="step_stats", number=1, type=11, label=1, type_name=".tb_memory.StepStatsDevices")
    step = file_proto.message_type.add(name="StepStatsDevices")
    step.field.add(name="dev_stats", number=1, type=11, label=3, type_name=".tb_memory.DeviceDevices")
    device = file_proto.message_type.add(name="DeviceDevices")
    device.field.add(name="device", number=1, type=9, label=1)
    device.field.add(name="node_stats", number=2, type=12, label=3)  # raw bytes: not parsed
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tb_memory.RunMetadataDevices"))


_DEVICES_ONLY = None


def scan_devices(data: bytes) -> list[str]:
    """Real devices with node stats, without decoding the node stats."""
    global _DEVICES_ONLY
    if _DEVICES_ONLY is None:
        _DEVICES_ONLY = _devices_only_class()
    message = _DEVICES_ONLY()
    try:
        message.ParseFromString(bytes(data))
    except Exception:  # noqa: BLE001 - corrupt steps list no devices; summary says why
        return []
    return [d.device for d in message.step_stats.dev_stats if d.node_stats and parse_device(d.device)]
