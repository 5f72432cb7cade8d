"""Shared fixtures: every real TensorFlow trace is generated ONCE per session.

The real traces are U-Net training steps (demo_logs/models.py) at a small
size, traced with tf.compat.v1 Session FULL_TRACE, so the suite checks the
engine against what TensorFlow actually writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
for path in (str(TESTS), str(REPO / "demo_logs")):
    if path not in sys.path:
        sys.path.insert(0, path)

import protos  # noqa: E402

UNET_BATCH = 2
UNET_SIZE = 16
UNET_STEPS = (1, 2, 3)


@pytest.fixture(scope="session")
def tf_models():
    """demo_logs/models.py (imports TensorFlow; pins oneDNN on)."""
    import models

    return models


@dataclass
class RealTrace:
    run_metadata_bytes: bytes
    graph_def_bytes: bytes
    proto: object  # config_pb2.RunMetadata, parsed straight from the bytes
    onednn: bool

    def analyse(self):
        from tb_memory_plugin import graph, store

        return store.analyse_bytes(self.run_metadata_bytes, graph.RunGraph.from_bytes(self.graph_def_bytes))


@pytest.fixture(scope="session")
def unet_trace(tf_models) -> RealTrace:
    from tensorboard.compat.proto import config_pb2

    rm_bytes, gd_bytes = tf_models.traced_step("unet", UNET_BATCH, UNET_SIZE)
    proto = config_pb2.RunMetadata()
    proto.ParseFromString(rm_bytes)
    return RealTrace(rm_bytes, gd_bytes, proto, bool(tf_models.onednn_enabled()))


@pytest.fixture(scope="session")
def unet_step(unet_trace):
    """The engine's analysis of the real U-Net step (with the run graph)."""
    step = unet_trace.analyse()
    assert step.status == "ok", step.message
    return step


@pytest.fixture(scope="session")
def logdir(tmp_path_factory, tf_models, unet_trace) -> Path:
    """A logdir written by real TensorFlow plus hand-made runs:

    unet     3 FULL_TRACE steps (tags step_1..step_3) + the run graph
    notrace  one add_run_metadata of an empty RunMetadata (NO_TRACE)
    corrupt  one tagged_run_metadata whose bytes are garbage
    nomem    step stats with nodes but no memory (hand-built)
    gpu      the hand-built GPU step (two allocators, stream:all duplicates)
    tf2      the TF2 way (plugin graph_run_metadata, content b"1"): tag "traced" holds the
             session's U-Net trace bytes, tag "keras_profile" an empty RunMetadata (what
             Keras' profile_batch writes)
    """
    import tensorflow as tf

    root = tmp_path_factory.mktemp("logs")
    tf_models.write_traced_run(str(root / "unet"), "unet", UNET_BATCH, UNET_SIZE, steps=UNET_STEPS)
    graph = tf.Graph()
    with graph.as_default():
        writer = tf.compat.v1.summary.FileWriter(str(root / "notrace"))
    writer.add_run_metadata(tf.compat.v1.RunMetadata(), "step_1", global_step=1)
    writer.close()
    protos.write_tagged_run_metadata(root / "corrupt", "step_1", b"garbage")
    protos.write_tagged_run_metadata(root / "nomem", "step_1", protos.no_memory_trace())
    protos.write_tagged_run_metadata(root / "gpu", "step_1", protos.gpu_trace())
    tf_models.write_graph_run_metadata(str(root / "tf2"), unet_trace.run_metadata_bytes, tag="traced", step=5)
    tf_models.write_graph_run_metadata(str(root / "tf2"), b"", tag="keras_profile", step=6)
    return root


def read_blob_bytes(logdir: Path, run: str, tag: str, plugins=("graph_tagged_run_metadata", "graph_run_metadata")) -> bytes:
    """The exact bytes TensorBoard's data provider hands the plugin for run/tag."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.data import provider as provider_mod

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    ctx = context.RequestContext()
    for plugin in plugins:
        seqs = provider.read_blob_sequences(ctx, experiment_id="", plugin_name=plugin,
                                            run_tag_filter=provider_mod.RunTagFilter([run], [tag]), downsample=1)
        data = seqs.get(run, {}).get(tag)
        if data:
            return provider.read_blob(ctx, blob_key=data[-1].values[0].blob_key)
    raise KeyError((run, tag))


def engine_step(logdir: Path, run: str, tag: str):
    """The engine's analysis of run/tag, from the same bytes and run graph the plugin reads."""
    from tb_memory_plugin import graph, store

    try:
        graph_def = graph.RunGraph.from_bytes(read_blob_bytes(logdir, run, "__run_graph__", ("graphs",)))
    except KeyError:
        graph_def = None
    return store.analyse_bytes(read_blob_bytes(logdir, run, tag), graph_def)


@pytest.fixture(scope="session")
def frontend_bundle() -> Path:
    """tb_memory_plugin/static/index.js, built with npm if it is not there yet."""
    bundle = REPO / "tb_memory_plugin" / "static" / "index.js"
    if not bundle.is_file():
        frontend = REPO / "frontend"
        if not (frontend / "node_modules").is_dir():
            subprocess.run(["npm", "--prefix", str(frontend), "ci"], check=True, timeout=600)
        subprocess.run(["npm", "--prefix", str(frontend), "run", "build"], check=True, timeout=600)
    assert bundle.is_file(), "npm run build did not produce tb_memory_plugin/static/index.js"
    return bundle
