"""Hand-built traced steps for the browser tests, written as real event files.

Uses only TensorBoard's compat protos and its event writer (no TensorFlow), so
the runs are small, exact and fully under the test's control:

- ``twodev``: two traced steps on two devices (a CPU allocator without
  ``allocator_bytes_in_use``, a GPU BFC allocator with it), so the step and
  device pickers have something to switch between and the curve is relative
  on one device and absolute on the other.
- ``XSS_RUN``: a run whose directory name and node names hold HTML that
  would run script if any view rendered names as HTML.
- ``OLD_TF1_RUN``: a TF 1.0-era GPU step without allocation records (no
  curve), with pinned host memory (``cuda_host_bfc``) beside the GPU's own
  (tests/protos.py's ``old_tf1_trace``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tensorboard.compat.proto import (
    allocation_description_pb2,
    config_pb2,
    event_pb2,
    step_stats_pb2,
    tensor_description_pb2,
)
from tensorboard.summary.writer.event_file_writer import EventFileWriter

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"

# Every payload sets window.__xss when it runs; the tests assert it never does.
HTML_SCOPE = "<img src=x onerror=window.__xss=1>"
HTML_SCOPE_2 = 'quote" & <svg onload=window.__xss=2>'
HTML_FEED = "_arg_<img src=x onerror=window.__xss=3>_0_0"
# A directory name cannot hold '/', but '<', '>', '=' and spaces are fine.
XSS_RUN = "xss_<img src=x onerror=window.__xss=4>"
TWODEV_RUN = "twodev"
BROKEN_RUN = "broken"  # one good step, one corrupt, one traced without memory
OLD_TF1_RUN = "old_tf1"
CORRUPT_BYTES = b"\xff\xff\xff\xff not a RunMetadata"


@dataclass
class Node:
    """One node execution: allocates `bytes` at start, frees it at `free_at` (None: kept)."""

    name: str
    op: str
    start: int  # µs from the step start
    duration: int
    bytes: int
    free_at: int | None = None
    temp: int = 0


def _node_stats(node: Node, allocator: str, t0: int, base: int | None, running: list[int]):
    stats = step_stats_pb2.NodeExecStats(
        node_name=node.name,
        timeline_label=f"{node.name} = {node.op}()",
        all_start_micros=t0 + node.start,
        op_start_rel_micros=0,
        op_end_rel_micros=node.duration,
        all_end_rel_micros=node.duration,
    )
    if node.temp:
        stats.memory_stats.temp_memory_size = node.temp
    if node.bytes:
        memory = stats.memory.add(allocator_name=allocator, total_bytes=node.bytes + node.temp,
                                  peak_bytes=node.bytes + node.temp,
                                  live_bytes=0 if node.free_at is not None else node.bytes)
        memory.allocation_records.add(alloc_micros=t0 + node.start, alloc_bytes=node.bytes)
        if node.temp:
            memory.allocation_records.add(alloc_micros=t0 + node.start + 1, alloc_bytes=node.temp)
            memory.allocation_records.add(alloc_micros=t0 + node.start + node.duration - 1,
                                          alloc_bytes=-node.temp)
        if node.free_at is not None:
            memory.allocation_records.add(alloc_micros=t0 + node.free_at, alloc_bytes=-node.bytes)
        running[0] += node.bytes
        if base is not None:
            memory.allocator_bytes_in_use = base + running[0]
        stats.output.add(
            slot=0,
            tensor_description=tensor_description_pb2.TensorDescription(
                allocation_description=allocation_description_pb2.AllocationDescription(
                    requested_bytes=node.bytes, allocated_bytes=node.bytes, allocator_name=allocator)),
        )
    return stats


def run_metadata(devices: list[tuple[str, str, int | None, list[Node]]]) -> bytes:
    """devices: (device name, allocator, bytes in use before the step or None, nodes)."""
    md = config_pb2.RunMetadata()
    t0 = 1_700_000_000_000_000
    for device, allocator, base, nodes in devices:
        dev = md.step_stats.dev_stats.add(device=device)
        running = [0]
        for node in sorted(nodes, key=lambda n: n.start):
            # Frees of earlier nodes before this one's start lower the snapshot.
            running[0] = sum(n.bytes for n in nodes if n.start < node.start
                             and (n.free_at is None or n.free_at > node.start))
            dev.node_stats.append(_node_stats(node, allocator, t0, base, running))
    return md.SerializeToString()


def write_run(logdir: str, steps: list[tuple[str, int, bytes]]) -> None:
    os.makedirs(logdir, exist_ok=True)
    writer = EventFileWriter(logdir)
    writer.add_event(event_pb2.Event(wall_time=1_700_000_000.0, file_version="brain.Event:2"))
    for i, (tag, step, data) in enumerate(steps):
        writer.add_event(event_pb2.Event(
            wall_time=1_700_000_001.0 + i, step=step,
            tagged_run_metadata=event_pb2.TaggedRunMetadata(tag=tag, run_metadata=data)))
    writer.close()


def _model(scale: int, prefix: str = "model") -> list[Node]:
    return [
        Node("_arg_images_0_0", "_Arg", 0, 5, 64 * scale),
        Node(f"{prefix}/dense_0/MatMul", "MatMul", 10, 20, 4096 * scale, free_at=200),
        Node(f"{prefix}/dense_0/Relu", "Relu", 35, 10, 4096 * scale, free_at=150),
        Node(f"{prefix}/dense_1/MatMul", "MatMul", 50, 30, 8192 * scale, free_at=120, temp=1024 * scale),
        Node(f"{prefix}/dense_1/Softmax", "Softmax", 90, 10, 2048 * scale),
        Node(f"gradients/{prefix}/dense_1/MatMul_grad/MatMul", "MatMul", 130, 20, 8192 * scale, free_at=190),
        Node(f"gradients/{prefix}/dense_0/MatMul_grad/MatMul", "MatMul", 160, 20, 4096 * scale, free_at=210),
    ]


def twodev_step(scale: int) -> bytes:
    return run_metadata([
        (CPU, "cpu", None, _model(scale)),
        (GPU, "GPU_0_bfc", 3 * 1024 * 1024, _model(7 * scale)),
    ])


def xss_step() -> bytes:
    nodes = [
        Node(HTML_FEED, "_Arg", 0, 5, 512),
        Node(f"{HTML_SCOPE}/MatMul", "MatMul", 10, 20, 300_000, free_at=200),
        Node(f"{HTML_SCOPE}/{HTML_SCOPE}", "Relu", 40, 10, 200_000, free_at=150),
        Node(f"{HTML_SCOPE_2}/Conv2D", "Conv2D", 60, 20, 150_000, free_at=170),
        Node(f"{HTML_SCOPE_2}/BiasAdd", "BiasAdd", 85, 10, 100_000, free_at=160),
    ]
    return run_metadata([(CPU, "cpu", None, nodes)])


def no_memory_step() -> bytes:
    """Traced without memory (like NO_TRACE timings only): node stats, no memory[]."""
    md = config_pb2.RunMetadata()
    dev = md.step_stats.dev_stats.add(device=CPU)
    for i, name in enumerate(("model/MatMul", "model/Relu")):
        dev.node_stats.add(node_name=name, all_start_micros=1_700_000_000_000_000 + 10 * i, all_end_rel_micros=5)
    return md.SerializeToString()


def write_synthetic_runs(logdir: str) -> dict[str, str]:
    """Writes the hand-built runs under logdir; returns {run name: directory}."""
    import protos  # tests/: the hand-built TF 1.x trace the engine tests use too

    dirs = {name: os.path.join(logdir, name) for name in (TWODEV_RUN, XSS_RUN, BROKEN_RUN, OLD_TF1_RUN)}
    write_run(dirs[BROKEN_RUN], [("good", 1, twodev_step(1)), ("corrupt", 2, CORRUPT_BYTES),
                                 ("no_memory", 3, no_memory_step())])
    write_run(dirs[TWODEV_RUN], [("step_1", 1, twodev_step(1)), ("step_2", 2, twodev_step(3))])
    write_run(dirs[XSS_RUN], [("step_<b>1</b>", 1, xss_step())])
    write_run(dirs[OLD_TF1_RUN], [("step_1", 1, protos.old_tf1_trace())])
    return dirs
