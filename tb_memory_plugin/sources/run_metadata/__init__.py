"""RunMetadata step stats -> `Trace` (the columns every source produces).

Node stats are read column by column straight from the wire (`wire.py`);
this module groups them into memory spaces: one per real device and
allocator, the device's main allocator keeping every execution.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import graph_pb2

from ..._numeric import scatter_sum
from ...trace import DEVICE_MEMORY, SpaceTrace, Trace, TraceDecodeError, device_task, memory_kind, parse_device
from ...names import graph_op_type
from . import wire


def _check_bytes(data) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TraceDecodeError(f"expected bytes, got {type(data).__name__}")


def _corrupt(size: int, exc) -> TraceDecodeError:
    return TraceDecodeError(f"the traced step's bytes ({size} B) are not a valid RunMetadata: {exc}")


def decode(data: bytes | Callable[[], bytes]) -> Trace:
    """Decode serialized RunMetadata bytes into a Trace (columnar, see wire.py).

    `data` may be a function returning the bytes: they are then dropped as soon as
    they are parsed, so that a big step's bytes and their parsed copy (protobuf
    copies them) are not held together.
    """
    if callable(data):
        data = data()
    _check_bytes(data)
    data = bytes(data)
    size = len(data)
    try:
        run = wire.parse_run(data)
        del data
        devices: list[tuple[str, str, int, wire.NodeColumns]] = []
        for dev_stats in run.step_stats.dev_stats:
            device = wire.device_name(dev_stats)
            parsed = parse_device(device)
            if parsed is None or not dev_stats.node_stats:
                continue
            devices.append((device, parsed[0], parsed[1], wire.NodeColumns(dev_stats.node_stats)))
        op_types = {}
        for graph_bytes in run.partition_graphs:
            graph = graph_pb2.GraphDef.FromString(graph_bytes)
            op_types.update((node.name, graph_op_type(node.op)) for node in graph.node)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise _corrupt(size, exc) from None
    return _trace(devices, op_types)


def _trace(devices, op_types: dict[str, str]) -> Trace:
    node_stat_count = sum(columns.name_code.size for *_, columns in devices)
    step_start = min((int(c.start.min()) for *_, c in devices), default=0)
    step_end = max((int(c.end.max()) for *_, c in devices), default=0)

    spaces: list[SpaceTrace] = []
    # Accelerators first, then CPUs, each by index (TensorFlow writes them in no set order).
    for device, device_type, index, columns in sorted(devices, key=lambda d: (d[1] == "CPU", d[1], d[2],
                                                                               device_task(d[0]) or ("", 0))):
        spaces.extend(_spaces_of_device(device, device_type, index, columns, step_start))
    spaces = _ids_told_apart(spaces)
    spaces, note = _shared_allocators(spaces)
    return Trace(
        spaces=spaces,
        devices=[d for d, *_ in devices],
        step_start_us=step_start,
        duration_us=step_end - step_start,
        node_stat_count=node_stat_count,
        ran_op_types=op_types,  # the partition graphs': the run graph's op types come first
        note=note,
    )


def _ids_told_apart(spaces: list[SpaceTrace]) -> list[SpaceTrace]:
    """Spaces of devices in several jobs or tasks (a parameter server and its workers) named with
    theirs where they would share an id (`ps:0/CPU:0/mklcpu`, `worker:0/CPU:0/mklcpu`); ids of a
    one-task step stay `CPU:0/mklcpu`."""
    tasks: dict[str, set] = collections.defaultdict(set)
    for space in spaces:
        task = device_task(space.device)
        if task is not None:  # a block spelt without its task (`/device:CPU:0`) tells no task apart
            tasks[space.id].add(task)
    out = []
    for space in spaces:
        task = device_task(space.device)
        if len(tasks[space.id]) > 1 and task is not None:  # the same id from several tasks
            space = dataclasses.replace(space, id=f"{task[0]}:{task[1]}/{space.id}")
        out.append(space)
    return out


def _shared_allocators(spaces: list[SpaceTrace]) -> tuple[list[SpaceTrace], str | None]:
    """Spaces of one allocator that several devices of a process report (CPUs share `cpu` or
    `mklcpu`, devices share pinned `cuda_host_bfc`), and what to say about them.

    Each device's space keeps its own ops' allocations, but the allocator's readings count
    every device's bytes: they are the baseline of none of them (each is then relative to the
    step's start), rather than one pool's bytes counted once per device.
    """
    by_pool: dict[tuple[str, str], list[int]] = {}
    for i, space in enumerate(spaces):
        process = space.device.rsplit("/", 1)[0]  # `/job:localhost/replica:0/task:0`: one process's
        by_pool.setdefault((process, space.allocator), []).append(i)
    shared = [rows for rows in by_pool.values() if len(rows) > 1]
    if not shared:
        return spaces, None
    spaces = list(spaces)
    said = []
    for rows in shared:
        ids = [spaces[i].id for i in rows]
        for i in rows:
            spaces[i] = dataclasses.replace(spaces[i], snapshot_time_us=np.zeros(0, np.int64),
                                            snapshot_bytes=np.zeros(0, np.int64), snapshot_start_us=np.zeros(0, np.int64),
                                            shared_with=tuple(other for other in ids if other != spaces[i].id))
        said.append(f"{spaces[rows[0]].allocator} is shared by {', '.join(ids)}")
    return spaces, ("; ".join(said) + ": each shows its own ops' allocations, relative to the step's start "
                    "(the allocator's readings count every device's bytes, so they are no one device's baseline).")


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
        return int(memory[name][:, 2].clip(min=0).sum() + outputs[name][:, 2].sum())

    # The device's own memory first (a GPU's BFC, not the pinned host memory that may move more
    # bytes), then the most bytes.
    primary = max(allocators, key=lambda name: (memory_kind(device_type, name) == DEVICE_MEMORY, weight(name)))
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
            "allocated": scatter_sum(mem[:, 0], mem[:, 2].clip(min=0), n),
            "op_peak": scatter_sum(mem[:, 0], mem[:, 3], n),
            "live": scatter_sum(mem[:, 0], mem[:, 4], n),
            "output": scatter_sum(out[:, 0], out[:, 2], n),
            "temp": columns.temp if name == primary else zeros,
            "persistent": columns.persistent if name == primary else zeros,
            "start_us": start,
            "end_us": end,
        }
        ev_exec = rec[:, 0]
        snapshot_rows = mem[mem[:, 5] > 0]
        snapshot_exec = snapshot_rows[:, 0]
        snapshot_bytes = snapshot_rows[:, 5]
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
                outputs_of=getattr(columns.label_of, "outputs_many", None),
                distinct_names=distinct_names,
                name_code=name_code.reshape(-1).astype(np.int64),
                event_time_us=rec[:, 2] - step_start,
                event_bytes=rec[:, 3],
                event_exec=ev_exec,
                # The allocator is read when the op finishes (kept there; it may have been read earlier
                # in the op, before a temporary's free).
                snapshot_time_us=cols["end_us"][snapshot_exec],
                snapshot_start_us=cols["start_us"][snapshot_exec],
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
    names = [wire.device_name(d) for d in run.step_stats.dev_stats if d.node_stats]
    return list(dict.fromkeys(name for name in names if parse_device(name)))  # a device may have several blocks
