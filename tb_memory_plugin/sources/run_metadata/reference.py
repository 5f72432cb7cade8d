"""The plain reading of node stats: field by field through TensorBoard's compat protos.

Slow (a few microseconds per node), and obviously right: it is the oracle the
tests hold the columnar reading to, and the fallback for node stats that the
columnar reading cannot split into nodes (`wire.NodeColumns`).
"""

from __future__ import annotations

import numpy as np
from tensorboard.compat.proto import step_stats_pb2


def read(node_stats) -> dict:
    """The columns of `wire.NodeColumns`, from serialized NodeExecStats.

    Raises protobuf's DecodeError where the protos refuse the bytes (text that
    is not UTF-8 included).
    """
    allocator_codes: dict[str, int] = {}
    name_codes: dict[str, int] = {}
    label_of = FirstNodes()
    name_code, start, end, temp, persistent = [], [], [], [], []
    memory, records, outputs = [], [], []
    for i, blob in enumerate(node_stats):
        node = parse_node(blob)
        if node.node_name not in name_codes:
            name_codes[node.node_name] = len(name_codes)
            label_of[node.node_name] = node.timeline_label  # the first execution's
            label_of.shapes[node.node_name] = output_shapes(node)
        name_code.append(name_codes[node.node_name])
        start.append(node.all_start_micros)
        end.append(node.all_start_micros + node.all_end_rel_micros)
        temp.append(node.memory_stats.temp_memory_size)
        persistent.append(node.memory_stats.persistent_memory_size)
        for entry in node.memory:
            code = allocator_codes.setdefault(entry.allocator_name, len(allocator_codes))
            memory.append((i, code, entry.total_bytes, entry.peak_bytes, entry.live_bytes,
                           entry.allocator_bytes_in_use))
            records.extend((i, code, r.alloc_micros, r.alloc_bytes) for r in entry.allocation_records)
        for allocator, size in requested_outputs(node):
            outputs.append((i, allocator_codes.setdefault(allocator, len(allocator_codes)), size))

    def column(values: list) -> np.ndarray:
        return np.asarray(values, dtype=np.int64).reshape(-1)

    def table(rows: list, width: int) -> np.ndarray:
        return np.asarray(rows, dtype=np.int64).reshape(-1, width)

    return {
        "distinct_names": list(name_codes),
        "name_code": column(name_code),
        "label_of": label_of,
        "start": column(start),
        "end": column(end),
        "temp": column(temp),
        "persistent": column(persistent),
        "memory": table(memory, 6),
        "records": table(records, 4),
        "outputs": table(outputs, 3),
        "allocator_codes": allocator_codes,
        "named_from": 0 if name_code else None,  # every node read in full
        "read_by": "reference",
    }


def parse_node(blob: bytes) -> step_stats_pb2.NodeExecStats:
    """One serialized NodeExecStats (DecodeError where the protos refuse it)."""
    return step_stats_pb2.NodeExecStats.FromString(blob)


def output_shapes(node: step_stats_pb2.NodeExecStats) -> list[tuple[tuple[int, ...], int]]:
    """(shape, requested bytes) of each output, in output order; -1 for a dimension not known."""
    return [(tuple(dim.size for dim in output.tensor_description.shape.dim),
             output.tensor_description.allocation_description.requested_bytes) for output in node.output]


class FirstNodes(dict):
    """timeline_label by name (a plain dict to compare), and each name's first node's output shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: dict[str, list[tuple[tuple[int, ...], int]]] = {}

    def outputs(self, name: str) -> list[tuple[tuple[int, ...], int]]:
        return self.shapes.get(name, [])


def requested_outputs(node: step_stats_pb2.NodeExecStats) -> list[tuple[str, int]]:
    """(allocator name, requested bytes) of each output that requested any bytes:
    a zero-byte output adds nothing anywhere."""
    descriptions = (output.tensor_description.allocation_description for output in node.output)
    return [(d.allocator_name, d.requested_bytes) for d in descriptions if d.requested_bytes]
