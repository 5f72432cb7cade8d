"""Hand-built RunMetadata protos for what CPU runs cannot produce.

Built with TensorBoard's compat protos (no TensorFlow), so the shapes are
exactly what TensorFlow writes: `RunMetadata.step_stats.dev_stats[].node_stats[]`
with `memory[]` (AllocatorMemoryUsed + allocation_records), `output[]`
(allocation descriptions) and `memory_stats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tensorboard.compat.proto import config_pb2

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0_STREAM_ALL = "/job:localhost/replica:0/task:0/device:GPU:0/stream:all"
GPU0_STREAM_14 = "/job:localhost/replica:0/task:0/device:GPU:0/stream:14"
OLD_GPU0 = "/job:localhost/replica:0/task:0/gpu:0"
OLD_GPU0_MEMCPY = "/gpu:0/memcpy"
OLD_GPU0_STREAM = "/gpu:0/stream:14"

BASE_US = 1_700_000_000_000_000  # absolute micros, as TF writes them


@dataclass
class Mem:
    """One memory[] entry: an allocator's view of one op."""

    allocator: str
    records: list[tuple[int, int]] = field(default_factory=list)  # (time relative to BASE_US, +/- bytes)
    total: int | None = None  # default: sum of positive records
    peak: int = 0
    live: int = 0
    bytes_in_use: int = 0  # allocator_bytes_in_use snapshot (0: not reported)


@dataclass
class Node:
    name: str
    start: int  # relative to BASE_US
    end: int
    op: str | None = None  # for timeline_label "name = Op(...)"
    memory: list[Mem] = field(default_factory=list)
    outputs: list[tuple[str, int]] = field(default_factory=list)  # (allocator, requested bytes)
    temp: int = 0
    persistent: int = 0
    label: str | None = None  # explicit timeline_label


def add_node(dev_stats, node: Node) -> None:
    stats = dev_stats.node_stats.add()
    stats.node_name = node.name
    stats.all_start_micros = BASE_US + node.start
    stats.op_start_rel_micros = 0
    stats.op_end_rel_micros = node.end - node.start
    stats.all_end_rel_micros = node.end - node.start
    if node.label is not None:
        stats.timeline_label = node.label
    elif node.op:
        stats.timeline_label = f"{node.name} = {node.op}()"
    if node.temp or node.persistent:
        stats.memory_stats.temp_memory_size = node.temp
        stats.memory_stats.persistent_memory_size = node.persistent
    for mem in node.memory:
        entry = stats.memory.add()
        entry.allocator_name = mem.allocator
        positive = sum(b for _, b in mem.records if b > 0)
        entry.total_bytes = positive if mem.total is None else mem.total
        entry.peak_bytes = mem.peak
        entry.live_bytes = mem.live
        if mem.bytes_in_use:
            entry.allocator_bytes_in_use = mem.bytes_in_use
        for time, nbytes in mem.records:
            record = entry.allocation_records.add()
            record.alloc_micros = BASE_US + time
            record.alloc_bytes = nbytes
    for slot, (allocator, requested) in enumerate(node.outputs):
        output = stats.output.add()
        output.slot = slot
        description = output.tensor_description.allocation_description
        description.requested_bytes = requested
        description.allocated_bytes = requested
        description.allocator_name = allocator


def run_metadata(devices: dict[str, list[Node]]) -> config_pb2.RunMetadata:
    """A RunMetadata with one dev_stats per device, in the given order."""
    rm = config_pb2.RunMetadata()
    for device, nodes in devices.items():
        dev_stats = rm.step_stats.dev_stats.add()
        dev_stats.device = device
        for node in nodes:
            add_node(dev_stats, node)
    return rm


def serialized(devices: dict[str, list[Node]]) -> bytes:
    return run_metadata(devices).SerializeToString()


# ---------------------------------------------------------------------------
# Ready-made traces
# ---------------------------------------------------------------------------


def three_node_trace(allocator: str = "cpu", device: str = CPU0) -> bytes:
    """Three ops whose peak and at-peak split are known by hand.

    Curve (relative bytes after all events of each microsecond):
      t=10 +100 (a)          -> 100
      t=20 +200 (b, output)  -> 300
      t=21 +50  (b, scratch) -> 350   <- peak, b running (20..26)
      t=25 -50  (b frees it) -> 300
      t=30 +30  (c)          -> 330
      t=40 -30  (c)          -> 300
      t=45 +1000 and -1000 in the same microsecond (c) -> 300 (no peak there)
      t=50 -100 (a's output freed by its consumer, recorded on a) -> 200
      t=60 -200 (b's output freed) -> 0
    At peak: a 100, b 250 (200 output + 50 scratch, a temporary), c 0.
    """
    nodes = [
        Node("layer_a/Conv2D", 10, 12, op="Conv2D",
             memory=[Mem(allocator, [(10, 100), (50, -100)], peak=100, live=100)],
             outputs=[(allocator, 100)]),
        Node("layer_b/MatMul", 20, 26, op="MatMul",
             memory=[Mem(allocator, [(20, 200), (21, 50), (25, -50), (60, -200)], peak=250, live=200)],
             outputs=[(allocator, 200)], temp=50),
        Node("layer_c/Relu", 30, 46, op="Relu",
             memory=[Mem(allocator, [(30, 30), (40, -30), (45, 1000), (45, -1000)], peak=1030, live=0)],
             outputs=[(allocator, 30)]),
    ]
    return serialized({device: nodes})


LAYOUT_NAME = "shared_model/unet_01/BiasAdd-0-1-TransposeNCHWToNHWC-LayoutOptimizer"


def gpu_trace() -> bytes:
    """A GPU step: GPU_0_bfc + cuda_host_bfc on the GPU, a CPU device, and
    stream:all / stream:14 / memcpy pseudo-devices that duplicate the GPU's
    kernels (with memory, so double counting would show)."""
    gpu_nodes = [
        Node("_arg_frames_0_0", 0, 1, op="_Arg", outputs=[("GPU_0_bfc", 4096)],
             memory=[Mem("GPU_0_bfc", [(0, 4096)], peak=4096, live=4096, bytes_in_use=1_004_096)]),
        Node("shared_model/unet_01/Conv2D", 2, 10, op="Conv2D",
             memory=[Mem("GPU_0_bfc", [(2, 8192), (3, 65536), (9, -65536)], peak=73728, live=8192,
                         bytes_in_use=1_012_288)],
             outputs=[("GPU_0_bfc", 8192)], temp=65536),
        Node("shared_model/unet_01/BiasAdd", 11, 13, op="BiasAdd",
             memory=[Mem("GPU_0_bfc", [(11, 8192)], peak=8192, live=8192, bytes_in_use=1_020_480)],
             outputs=[("GPU_0_bfc", 8192)]),
        Node(LAYOUT_NAME, 14, 16, op="Transpose",
             memory=[Mem("GPU_0_bfc", [(14, 8192), (40, -8192)], peak=8192, live=8192, bytes_in_use=1_028_672)],
             outputs=[("GPU_0_bfc", 8192)]),
        Node("ConstantFolding/shared_model/unet_02/Conv2D-folded-1", 17, 18, op="Const",
             memory=[Mem("GPU_0_bfc", [(17, 256)], peak=256, live=256)],
             outputs=[("GPU_0_bfc", 256)]),
        Node("gradients/shared_model/unet_01/Conv2D_grad/Conv2DBackpropInput", 20, 30,
             op="Conv2DBackpropInput",
             memory=[Mem("GPU_0_bfc", [(20, 4096), (35, -4096)], peak=4096, live=4096),
                     Mem("cuda_host_bfc", [(21, 512), (22, -512)], peak=512, live=0)],
             outputs=[("GPU_0_bfc", 4096)]),
        Node("shared_model/unet_01/Relu", 31, 32, label="shared_model/unet_01/Relu = _FusedConv2D(x, w)",
             memory=[Mem("GPU_0_bfc", [(31, 1024)], peak=1024, live=1024)], outputs=[("GPU_0_bfc", 1024)]),
        Node("shared_model/unet_01/Shape", 33, 34, op="Shape"),  # no memory at all
        Node("_retval_loss_0_0", 36, 37, op="_Retval"),
    ]
    # Stream entries duplicate GPU kernels, with `name:Op` suffixes.
    stream_nodes = [
        Node("shared_model/unet_01/Conv2D:Conv2D", 2, 9,
             memory=[Mem("GPU_0_bfc", [(2, 8192), (3, 65536)], peak=73728)], outputs=[("GPU_0_bfc", 8192)]),
        Node("shared_model/unet_01/BiasAdd:BiasAdd", 11, 13,
             memory=[Mem("GPU_0_bfc", [(11, 1 << 30)])]),
    ]
    memcpy_nodes = [Node("MEMCPYHtoD", 0, 1, memory=[Mem("GPU_0_bfc", [(0, 1 << 30)])])]
    cpu_nodes = [
        # More bytes than the GPU: the default device must still be the GPU.
        Node("loss/Mean", 5, 6, op="Mean", memory=[Mem("cpu", [(5, 1 << 20), (7, -(1 << 20))])],
             outputs=[("cpu", 1 << 20)]),
    ]
    return serialized({
        GPU0: gpu_nodes,
        GPU0_STREAM_ALL: stream_nodes,
        GPU0_STREAM_14: stream_nodes,
        OLD_GPU0_MEMCPY: memcpy_nodes,
        CPU0: cpu_nodes,
    })


def stream_name_trace() -> bytes:
    """A GPU device whose own entries carry `name:Op` suffixes."""
    nodes = [
        Node("shared_model/unet_03/Conv2D:Conv2D", 0, 4,
             memory=[Mem("GPU_0_bfc", [(0, 2048), (8, -2048)])], outputs=[("GPU_0_bfc", 2048)]),
        Node("shared_model/unet_03/BiasAdd:BiasAdd", 5, 6,
             memory=[Mem("GPU_0_bfc", [(5, 2048)])], outputs=[("GPU_0_bfc", 2048)]),
    ]
    return serialized({GPU0: nodes})


def old_tf1_trace() -> bytes:
    """TF 1.0-era GPU step: `/gpu:0` device names, `gpu_bfc`, no allocation_records;
    some memory[] entries hold only an allocator name, bytes in output[]."""
    nodes = [
        Node("conv1/Conv2D", 0, 5, op="Conv2D", memory=[Mem("gpu_bfc", total=4096, peak=4096, live=4096)],
             outputs=[("gpu_bfc", 4096)]),
        Node("conv1/Relu", 6, 7, op="Relu", memory=[Mem("gpu_bfc", total=0)], outputs=[("gpu_bfc", 4096)]),
        Node("conv2/Conv2D", 8, 12, op="Conv2D", memory=[Mem("gpu_bfc", total=2048, peak=2048, live=2048)],
             outputs=[("gpu_bfc", 2048)]),
    ]
    host = [Node("input/data", 0, 1, op="Const", memory=[Mem("cuda_host_bfc", total=512)],
                 outputs=[("cuda_host_bfc", 512)])]
    return serialized({
        OLD_GPU0: nodes + host,
        OLD_GPU0_STREAM: [Node("conv1/Conv2D", 0, 5, memory=[Mem("gpu_bfc", total=1 << 30)])],
        OLD_GPU0_MEMCPY: [Node("MEMCPYHtoD", 0, 1, memory=[Mem("gpu_bfc", total=1 << 30)])],
    })


def no_memory_trace() -> bytes:
    """Step stats with nodes (as SOFTWARE_TRACE writes) but no memory at all."""
    return serialized({CPU0: [Node("a/MatMul", 0, 3, op="MatMul"), Node("b/Relu", 4, 5, op="Relu")]})


def write_tagged_run_metadata(logdir, tag: str, payload: bytes, step: int = 1) -> None:
    """An event file whose `tagged_run_metadata` holds `payload` as is (garbage included),
    written with TensorBoard's own EventFileWriter."""
    import os
    import time

    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    os.makedirs(logdir, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    try:
        event = event_pb2.Event(wall_time=time.time(), step=step)
        event.tagged_run_metadata.tag = tag
        event.tagged_run_metadata.run_metadata = payload
        writer.add_event(event)
    finally:
        writer.close()


class XSpaceBuilder:
    """A profiler XSpace built event by event (TensorFlow's own xplane_pb2), for what real
    profiles do not show together: repeated step numbers, TensorFlow beside JAX, nested
    op-like events. Times in microseconds; one plane, lines by thread id."""

    def __init__(self, plane: str = "/host:CPU") -> None:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        self.space = xplane_pb2.XSpace()
        self.plane = self.space.planes.add()
        self.plane.name, self.plane.id = plane, 1
        self._event_ids: dict[str, int] = {}
        self._stat_ids: dict[str, int] = {}
        self._lines: dict[int, object] = {}
        self._bytes_in_use: dict[str, int] = {}
        self._live: dict[int, tuple[str, int]] = {}
        self._next_addr = 0x1000

    def _id(self, table: dict, metadata, name: str) -> int:
        if name not in table:
            table[name] = len(table) + 1
            entry = metadata[table[name]]
            entry.id, entry.name = table[name], name
        return table[name]

    def event(self, thread: int, name: str, start_us: float, duration_us: float = 0, **stats) -> None:
        if thread not in self._lines:
            line = self._lines[thread] = self.plane.lines.add()
            line.id = thread
        event = self._lines[thread].events.add()
        event.metadata_id = self._id(self._event_ids, self.plane.event_metadata, name)
        event.offset_ps, event.duration_ps = int(start_us * 1e6), int(duration_us * 1e6)
        for key, value in stats.items():
            stat = event.stats.add()
            stat.metadata_id = self._id(self._stat_ids, self.plane.stat_metadata, key)
            if isinstance(value, str):
                stat.str_value = value
            else:
                stat.int64_value = value

    def allocate(self, thread: int, time_us: float, size: int, allocator: str = "GPU_0_bfc",
                 requested: int | None = None, **stats) -> int:
        """A MemoryAllocation with the allocator's bytes in use after it (`requested`: the bytes asked
        for, where the allocator rounded them up to `size`); returns its address."""
        self._next_addr += 0x1000
        self._bytes_in_use[allocator] = self._bytes_in_use.get(allocator, 0) + size
        self._live[self._next_addr] = (allocator, size)
        self.event(thread, "MemoryAllocation", time_us, allocator_name=allocator, addr=self._next_addr,
                   allocation_bytes=size, requested_bytes=size if requested is None else requested,
                   bytes_allocated=self._bytes_in_use[allocator], bytes_available=1 << 30, **stats)
        return self._next_addr

    def free(self, thread: int, time_us: float, addr: int) -> None:
        allocator, size = self._live.pop(addr)
        self._bytes_in_use[allocator] -= size
        self.event(thread, "MemoryDeallocation", time_us, allocator_name=allocator, addr=addr, allocation_bytes=size,
                   bytes_allocated=self._bytes_in_use[allocator], bytes_available=1 << 30)

    def busy_gpu(self, index: int = 0, start_us: float = 0) -> None:
        """A `/device:GPU:<index>` plane with one kernel on it (a GPU that ran work)."""
        plane = self.space.planes.add()
        plane.name, plane.id = f"/device:GPU:{index}", len(self.space.planes)
        plane.event_metadata[1].id, plane.event_metadata[1].name = 1, "loop_fusion"
        event = plane.lines.add().events.add()
        event.metadata_id, event.offset_ps, event.duration_ps = 1, int(start_us * 1e6), 1_000_000

    def program_hlo(self, key: str, hlo: bytes) -> None:
        """A compiled program's HloProto in the metadata plane, as the profiler keeps it (`key`:
        `<module name>(<program id>)`)."""
        plane = next((p for p in self.space.planes if p.name == "/host:metadata"), None)
        if plane is None:
            plane = self.space.planes.add()
            plane.name, plane.id = "/host:metadata", len(self.space.planes)
            plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "Hlo Proto"
        entry = plane.event_metadata[len(plane.event_metadata) + 1]
        entry.id, entry.name = len(plane.event_metadata), key
        stat = entry.stats.add()
        stat.metadata_id, stat.bytes_value = 1, hlo

    def serialized(self) -> bytes:
        return self.space.SerializeToString()
