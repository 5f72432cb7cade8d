"""Shared fixtures: every real TensorFlow trace is generated ONCE per session.

The real traces are U-Net training steps (demo_logs/models.py) at a small
size, traced with tf.compat.v1 Session FULL_TRACE, so the suite checks the
engine against what TensorFlow actually writes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import protos  # noqa: E402
from tracedata import REPO, UNET_BATCH, UNET_SIZE, UNET_STEPS, RealTrace  # noqa: E402


@pytest.fixture(scope="session")


def tf_models():
    """demo_logs/models.py (imports TensorFlow; pins oneDNN on)."""
    import models

    return models


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
