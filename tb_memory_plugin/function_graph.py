"""A TF2 / Keras run's graph, for runs without an `add_graph` GraphDef (issue 11).

TF2 and Keras 3 write no `__run_graph__`. What they write instead:

* `tf.summary.trace_on(graph=True)` ... `trace_export` (and the Keras
  TensorBoard callback's `batch_N`, which calls them): a RunMetadata under
  plugin `graph_run_metadata_graph` (`graph_run_metadata` with the profiler
  on) whose `function_graphs[]` hold each function that ran while tracing,
  `pre_optimization_graph` and `post_optimization_graph` (GraphDefs), and no
  step stats. A function traced before `trace_on` is not recorded: Keras'
  `batch_N` is empty, since `fit` traced its train function at batch 1.
* The Keras callback (`write_graph=True`, the default): tag `keras` under
  plugin `graph_keras_model`, the model's JSON config: its layers and which
  layer feeds which.

Profiles name ops as the function body ran them
(`StatefulPartitionedCall/small_unet_1/enc_1_1/Relu`); the function graph
names the same node `small_unet_1/enc_1_1/Relu`. Both are cleaned by the one
rule the XPlane source applies, all of a graph's names at once as a step's are
(`sources/xplane/names.clean_all`), so the graph's scopes are the scope tree's
paths. The post-optimization graph is what ran
(fused ops under the names the profile shows, folded constants gone); the
pre-optimization graph is the fallback when a function has no other.

The Keras config gives one node per layer (`small_unet/enc_1`, its class as
the op), through TensorBoard's own `keras_model_to_graph_def`: the layers and
their edges, nothing inside a layer.
"""

from __future__ import annotations

import json

from tensorboard.compat.proto import config_pb2, graph_pb2

from .graph import RunGraph
from .keras_model import model_from_config
from .sources.xplane.names import clean, clean_all

# A function's own plumbing: its arguments and return values (variables come in as `_Arg` resources).
_PLUMBING_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp"})
# Ops of functions that only create or initialise variables (Keras runs one per variable before training).
_SETUP_OPS = frozenset({"VarHandleOp", "AssignVariableOp", "ReadVariableOp", "Const", "Fill", "Pack", "Identity",
                        "Reshape", "_Arg", "_Retval", "NoOp"})


class FunctionGraph(RunGraph):
    """A RunGraph read from a run's function graphs or Keras config, not from `add_graph`.

    `layers_only`: one node per Keras layer (nothing inside a layer), so its
    op "types" are layer classes and the graph view adds the trace's other
    scopes beside it. Function graphs hold no variable shapes (no resident tensors); a Keras
    config sizes its layers' weights itself (keras_model.py).
    """

    model = None  # resident.Model: from `add_graph` GraphDefs, or a Keras config (from_keras_config)
    layers_only = False
    origin = "function_graphs"


def _input_name(raw: str, cleaned: dict[str, str]) -> str:
    """An input `^name` / `name:port` with its name cleaned (control mark and port kept)."""
    control = raw.startswith("^")
    name, colon, port = raw.lstrip("^").partition(":")
    return ("^" if control else "") + (cleaned.get(name) or clean(name)) + colon + port


def _computes(graph: graph_pb2.GraphDef) -> bool:
    return any(node.op not in _SETUP_OPS for node in graph.node)


def from_run_metadata(data: bytes) -> FunctionGraph | None:
    """The merged function graphs of a serialized RunMetadata, node names cleaned; None when it holds none.

    Every function that computes something is merged (the train step, each
    retrace of it, other functions run per step); functions that only create
    or initialise variables are left out, and so are `_Arg` / `_Retval`
    nodes. A name seen in an earlier function keeps its first node.
    """
    metadata = config_pb2.RunMetadata.FromString(data)
    graphs = [fg.post_optimization_graph if fg.post_optimization_graph.node else fg.pre_optimization_graph
              for fg in metadata.function_graphs]
    graphs = sorted((g for g in graphs if _computes(g)), key=lambda g: -len(g.node))
    raws = list(dict.fromkeys(node.name for graph in graphs for node in graph.node))
    cleaned = dict(zip(raws, (name for name, _ in clean_all(raws))))
    merged = graph_pb2.GraphDef()
    seen: set[str] = set()
    for graph in graphs:
        for node in graph.node:
            name = cleaned[node.name]
            if node.op in _PLUMBING_OPS or name in seen:
                continue
            seen.add(name)
            merged.node.add(name=name, op=node.op, input=[_input_name(i, cleaned) for i in node.input])
    if not merged.node:
        return None
    return FunctionGraph.from_bytes(merged.SerializeToString())


def from_keras_config(data: bytes) -> FunctionGraph | None:
    """One node per layer of a Keras model's JSON config (the callback's `keras` tag); None when it has none."""
    from tensorboard.plugins.graph import keras_util

    config = json.loads(data)
    try:
        graph = keras_util.keras_model_to_graph_def(config)
    except Exception:  # noqa: BLE001 - TensorBoard's reader fails on some configs: the layers, without edges
        graph = _layers_without_edges(config)
    for node in graph.node:
        if not node.op:
            node.op = node.attr["keras_class"].s.decode() if "keras_class" in node.attr else "Layer"
    if not graph.node:
        return None
    result = FunctionGraph.from_bytes(graph.SerializeToString())
    result.layers_only, result.origin = True, "keras_model"
    result.op_types = {}  # type: ignore[assignment]  # layer classes are no op types: the trace's own stand
    try:  # its layers' weights and the optimizer's slots, sized from the config
        result.model = model_from_config(config)
    except (KeyError, TypeError, ValueError):  # a config this reader does not know: no resident figures
        result.model = None
    return result


def _layers_without_edges(config: dict):
    """A GraphDef of the model's own layers (`<model>/<layer>`, op: the layer's class), where
    TensorBoard's `keras_util` cannot read the config (TensorBoard 2.21 raises on a Keras 3 model with
    dict outputs, and on one whose MultiHeadAttention is fed a mask): the graph view then shows the
    layers without their edges, and the model is still sized from the config."""
    from tensorboard.compat.proto import graph_pb2

    graph = graph_pb2.GraphDef()
    model = config.get("config") if isinstance(config.get("config"), dict) else {}
    name = model.get("name") or config.get("name") or "model"
    for layer in model.get("layers") or []:
        if not isinstance(layer, dict):
            continue
        layer_name = layer.get("name") or (layer.get("config") or {}).get("name")
        if layer_name:
            graph.node.add(name=f"{name}/{layer_name}", op=str(layer.get("class_name") or "Layer"))
    return graph
