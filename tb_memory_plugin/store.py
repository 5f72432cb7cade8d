"""Traced steps and run graphs, read only through a TensorBoard DataProvider.

Works with the multiplexer-backed provider (`--load_fast=false`) and the Rust
data server (`--load_fast=true`); the CLI builds the same provider over a
logdir. Analysed steps are kept in a bounded, thread-safe LRU.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import threading
from dataclasses import dataclass
from typing import Callable, Hashable

from tensorboard.data import provider as provider_mod

from . import analysis, graph as graph_mod, trace as trace_mod
from .sources import run_metadata

TAGGED_RUN_METADATA = "graph_tagged_run_metadata"
RUN_METADATA = "graph_run_metadata"  # TF2 trace_export / Keras; plugin content b"1"
GRAPHS = "graphs"
RUN_GRAPH_TAG = "__run_graph__"


@dataclass(frozen=True)
class StepRef:
    run: str
    tag: str
    plugin: str
    step: int
    wall_time: float


class LRUCache:
    """A small thread-safe LRU; values are computed outside the lock, once per key.

    The page asks for a step's summary, scopes, curve and graph at once: the
    first request computes the analysis and the others wait for it instead
    of each decoding the same blob (they would only slow each other down).
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._pending: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], object]):
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
                pending = self._pending.get(key)
                if pending is None:
                    done = self._pending[key] = threading.Event()
                    break
            pending.wait()  # another thread is computing it; then read it (or retry if it failed)
        try:
            value = compute()
            with self._lock:
                self._items[key] = value
                self._items.move_to_end(key)
                while len(self._items) > self._capacity:
                    self._items.popitem(last=False)
            return value
        finally:
            with self._lock:
                del self._pending[key]
            done.set()

    def __len__(self) -> int:
        return len(self._items)


def list_steps(data_provider, ctx, experiment_id: str) -> dict[str, list[StepRef]]:
    """Runs -> traced steps (tags), sorted by run then tag."""
    runs: dict[str, dict[str, StepRef]] = {}
    for plugin in (TAGGED_RUN_METADATA, RUN_METADATA):
        mapping = data_provider.list_blob_sequences(ctx, experiment_id=experiment_id, plugin_name=plugin)
        for run, tags in mapping.items():
            for tag, series in tags.items():
                if plugin == RUN_METADATA and series.plugin_content != b"1":
                    continue  # an unknown version of summary-written RunMetadata
                runs.setdefault(run, {}).setdefault(
                    tag, StepRef(run, tag, plugin, int(series.max_step), float(series.max_wall_time)))
    return {run: [tags[t] for t in sorted(tags)] for run, tags in sorted(runs.items())}


def runs_with_graph(data_provider, ctx, experiment_id: str) -> set[str]:
    mapping = data_provider.list_blob_sequences(ctx, experiment_id=experiment_id, plugin_name=GRAPHS)
    return {run for run, tags in mapping.items() if RUN_GRAPH_TAG in tags}


def _latest_blob_key(data_provider, ctx, experiment_id, plugin, run, tag) -> str | None:
    sequences = data_provider.read_blob_sequences(
        ctx, experiment_id=experiment_id, plugin_name=plugin,
        run_tag_filter=provider_mod.RunTagFilter(runs=[run], tags=[tag]), downsample=1)
    data = sequences.get(run, {}).get(tag, ())
    if not data or not data[-1].values:
        return None
    return data[-1].values[0].blob_key


class StepStore:
    """Reads and analyses steps for one data provider, with caches."""

    def __init__(self, data_provider, step_capacity: int = 16, graph_capacity: int = 8) -> None:
        self._provider = data_provider
        self._steps = LRUCache(step_capacity)
        self._graphs = LRUCache(graph_capacity)
        self._devices = LRUCache(1024)

    def list_steps(self, ctx, experiment_id: str) -> dict[str, list[StepRef]]:
        return list_steps(self._provider, ctx, experiment_id)

    def runs_with_graph(self, ctx, experiment_id: str) -> set[str]:
        return runs_with_graph(self._provider, ctx, experiment_id)

    def find_step(self, ctx, experiment_id: str, run: str, tag: str) -> StepRef | None:
        for ref in self.list_steps(ctx, experiment_id).get(run, ()):
            if ref.tag == tag:
                return ref
        return None

    def run_graph(self, ctx, experiment_id: str, run: str) -> graph_mod.RunGraph | None:
        """The run's `add_graph` GraphDef, or None. A corrupt graph counts as none."""
        key = _latest_blob_key(self._provider, ctx, experiment_id, GRAPHS, run, RUN_GRAPH_TAG)
        if key is None:
            return None

        def load():
            try:
                data = self._provider.read_blob(ctx, blob_key=key)
                with gc_paused():
                    return graph_mod.RunGraph.from_bytes(data)
            except Exception:  # noqa: BLE001 - a bad graph must not break the memory view
                return None

        return self._graphs.get_or_compute(("graph", experiment_id, run, key), load)

    def step_devices(self, ctx, experiment_id: str, ref: StepRef) -> list[str]:
        key = _latest_blob_key(self._provider, ctx, experiment_id, ref.plugin, ref.run, ref.tag)
        if key is None:
            return []
        return self._devices.get_or_compute(
            key, lambda: run_metadata.scan_devices(self._provider.read_blob(ctx, blob_key=key)))

    def analysis(self, ctx, experiment_id: str, ref: StepRef) -> analysis.StepAnalysis:
        """The analysed step (cached by blob); corrupt bytes give a `corrupt` status."""
        key = _latest_blob_key(self._provider, ctx, experiment_id, ref.plugin, ref.run, ref.tag)
        cache_key = ("step", experiment_id, ref.run, ref.tag, key)

        def compute():
            if key is None:
                return analysis.failed_step("empty", "This tag holds no RunMetadata blob.")
            data = self._provider.read_blob(ctx, blob_key=key)
            graph = self.run_graph(ctx, experiment_id, ref.run)
            return analyse_bytes(data, graph)

        return self._steps.get_or_compute(cache_key, compute)


def analyse_bytes(data: bytes, graph: graph_mod.RunGraph | None = None) -> analysis.StepAnalysis:
    """Decode and analyse one serialized RunMetadata (the CLI, routes and tests share this)."""
    with gc_paused():
        try:
            decoded = run_metadata.decode(data)
        except trace_mod.TraceDecodeError as exc:
            return analysis.failed_step("corrupt", str(exc))
        return analysis.analyse(decoded, graph.op_types if graph is not None else None)


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = True


@contextlib.contextmanager
def gc_paused():
    """Hold off Python's cyclic garbage collector while a big step is decoded.

    Decoding makes a burst of short-lived lists and strings, which triggers
    full collections; inside TensorBoard (with TensorFlow imported, hundreds
    of thousands of live objects) each one costs up to ~0.2 s and they added
    half again to a cold request. Nothing made here forms reference cycles.
    Nested and concurrent pauses count, and the collector is back on after
    the last one (if it was on before the first).
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()
