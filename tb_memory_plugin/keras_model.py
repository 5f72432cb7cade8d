"""A Keras model's resident tensors from its JSON config (the TensorBoard callback's `keras` tag).

A Keras `fit` run writes no GraphDef, so `resident.Model.from_nodes` has nothing to read. Its
model config still says, for each layer, its class, its settings and (Keras 3) the shape it was
built for: enough to size the weights of the common layers (Dense, convolutions, normalisations,
Embedding, recurrent cells), and the compile config names the optimizer, so its slots. A layer
of another class is counted as holding nothing, and the model says which (`unsized`).

Plain Python; names are `<model>/<layer>/<weight>`, as the trace's cleaned names scope them.
"""

from __future__ import annotations

import math
from typing import Any

from .resident import SLOT, VARIABLE, Model, ModelTensor

# Slots per trainable weight, by optimizer class (Keras 3 names), where its config does not change it
# (Adafactor's factored slots are not sized here).
_SLOTS = {"Adam": ("m", "v"), "AdamW": ("m", "v"), "Adamax": ("m", "u"), "Nadam": ("m", "v"), "Adadelta": ("accumulated_grad", "accumulated_delta_var"),
          "Adagrad": ("accumulator",), "Ftrl": ("accumulator", "linear"), "Lion": ("momentum",)}
# An optimizer given by its string name (`compile("sgd")`), by its class name.
_OPTIMIZER_CLASSES = {name.lower(): name for name in (*_SLOTS, "SGD", "RMSprop")}
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_CONTAINERS = ("Functional", "Sequential", "Model")


def model_from_config(config: dict) -> Model | None:
    """The model's weights and optimizer slots (None when the config holds no sized layer)."""
    weights: list[tuple[ModelTensor, bool]] = []  # (weight, trainable)
    unsized: list[str] = []
    _walk(config, "", weights, unsized)
    if not weights:
        return None
    # Keras 2 (tf_keras) writes no compile config: its optimizer is not known, not absent (trial AL's Adam
    # slots had been sized as none, and counted in "other").
    keras2 = "compile_config" not in config and str(config.get("keras_version", "")).startswith("2.")
    slots = None if keras2 else _slot_names(config.get("compile_config") or {})
    tensors = [tensor for tensor, _ in weights]
    tensors += [ModelTensor(f"{t.name}/{slot}", SLOT, t.name, t.dtype, t.shape, t.count, t.bytes, "")
                for t, trainable in weights if trainable for slot in slots or ()]
    notes = []
    if unsized:
        notes.append(f"{len(unsized)} layer{'s' if len(unsized) > 1 else ''} of a class the config does not size "
                     f"({', '.join(unsized[:5])}{', ...' if len(unsized) > 5 else ''}): any weights "
                     f"{'they hold are' if len(unsized) > 1 else 'it holds are'} not counted")
    if slots is None:
        notes.append("the optimizer's slots are not counted (" + (
            "a Keras 2 model's config does not name its optimizer" if keras2 else "its class is not one sized here")
            + ")")
    notes.append("sized from the Keras model's config (the callback's `keras` tag), not from a GraphDef")
    return Model(tensors, [], {}, 0, note="; ".join(notes))


def _walk(layer: dict, scope: str, weights: list, unsized: list) -> None:
    """Every leaf layer of a (nested) model, its weights added under `scope`."""
    config = layer.get("config") or {}
    name = config.get("name") or layer.get("name") or ""
    path = f"{scope}/{name}" if scope else name
    children = config.get("layers")
    if layer.get("class_name") in _CONTAINERS or isinstance(children, list):
        for child in children or []:
            _walk(child, path, weights, unsized)
        return
    if str(layer.get("module") or "").startswith(_OPS_MODULE):
        return  # an op called on a model's tensors (`keras.ops.not_equal` for a mask): no weights
    sized = _weights(layer.get("class_name", ""), config, layer.get("build_config") or {})
    if sized is None:
        unsized.append(path)
        return
    dtype = _variable_dtype(config)
    size = _DTYPE_BYTES.get(dtype, 4)
    for weight, shape, trainable in sized:
        count = math.prod(shape)
        weights.append((ModelTensor(f"{path}/{weight}", VARIABLE, None, dtype if dtype in _DTYPE_BYTES else "float32",
                                    tuple(shape), count, count * size, ""), trainable))


def _variable_dtype(config: dict) -> str:
    """The dtype a layer's weights are kept in: a mixed policy keeps them in float32."""
    policy = config.get("dtype")
    if isinstance(policy, dict):
        policy = (policy.get("config") or {}).get("name")
    if not isinstance(policy, str) or policy.startswith("mixed_"):
        return "float32"
    return policy


def _bidirectional_weights(config: dict, build: dict) -> list[tuple[str, list[int], bool]] | None:
    """A Bidirectional layer's weights, each way's below its own name. Keras 3 writes both ways'
    configs as named (`forward_<rnn>`, and `backward_<rnn>` or the backward layer given, whose name
    it keeps); tf_keras writes the wrapped layer's (and the backward one where given) and names each
    copy with `forward_` or `backward_` in front."""
    inner = config["layer"]
    given = config.get("backward_layer")
    named = str((inner.get("config") or {}).get("name") or "").startswith("forward_")  # Keras 3's
    sized = []
    for prefix, layer in (("forward_", inner), ("backward_", given if isinstance(given, dict) else inner)):
        layer_config = layer.get("config") or {}
        one = _weights(layer.get("class_name", ""), layer_config, build)
        if one is None:
            return None
        name = str(layer_config.get("name") or "")
        way = name if (named and layer is not inner) or name.startswith(prefix) else prefix + name
        sized += [(f"{way}/{weight}", shape, trainable) for weight, shape, trainable in one]
    return sized


def _weights(kind: str, config: dict, build: dict) -> list[tuple[str, list[int], bool]] | None:
    """(weight, shape, trainable) of a layer of a common class, from its settings and the shapes
    it was built for (`build`: its build_config); [] for one without weights; None when it cannot
    be sized here."""
    if kind in _NO_WEIGHTS:
        return []
    if kind == "MultiHeadAttention":
        return _attention_weights(config, build.get("shapes_dict") or {})
    if kind == "Bidirectional" and isinstance(config.get("layer"), dict):  # the wrapped RNN, each way
        return _bidirectional_weights(config, build)
    input_shape = build.get("input_shape")
    channels = _last_dim(input_shape)
    bias = bool(config.get("use_bias", True))
    if kind == "Dense" and channels:
        units = int(config["units"])
        return [("kernel", [channels, units], True)] + ([("bias", [units], True)] if bias else [])
    if kind in ("Conv1D", "Conv2D", "Conv3D") and channels:
        kernel = list(config["kernel_size"])
        filters, groups = int(config["filters"]), int(config.get("groups", 1) or 1)
        return [("kernel", kernel + [channels // groups, filters], True)] + ([("bias", [filters], True)] if bias else [])
    if kind in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose") and channels:
        filters = int(config["filters"])
        return [("kernel", list(config["kernel_size"]) + [filters, channels], True)] + (
            [("bias", [filters], True)] if bias else [])
    if kind in ("DepthwiseConv1D", "DepthwiseConv2D") and channels:
        multiplier = int(config.get("depth_multiplier", 1))
        return [("kernel", list(config["kernel_size"]) + [channels, multiplier], True)] + (
            [("bias", [channels * multiplier], True)] if bias else [])
    if kind in ("SeparableConv1D", "SeparableConv2D") and channels:
        multiplier, filters = int(config.get("depth_multiplier", 1)), int(config["filters"])
        kernel = list(config["kernel_size"])
        return [("depthwise_kernel", kernel + [channels, multiplier], True),
                ("pointwise_kernel", [1] * len(kernel) + [channels * multiplier, filters], True)] + (
            [("bias", [filters], True)] if bias else [])
    if kind == "BatchNormalization" and channels:
        return ([("gamma", [channels], True)] if config.get("scale", True) else []) + (
            [("beta", [channels], True)] if config.get("center", True) else []) + [
            ("moving_mean", [channels], False), ("moving_variance", [channels], False)]
    if kind in ("LayerNormalization", "GroupNormalization") and channels:
        return ([("gamma", [channels], True)] if config.get("scale", True) else []) + (
            [("beta", [channels], True)] if config.get("center", True) else [])
    last_axes = (-1, [-1]) + ((len(input_shape) - 1, [len(input_shape) - 1]) if isinstance(input_shape, list) else ())
    if kind == "Normalization" and channels and config.get("axis") in last_axes and config.get("mean") is None:
        # Adapted statistics over the last axis, and how many samples they came from.
        return [("mean", [channels], False), ("variance", [channels], False), ("count", [], False)]
    if kind == "Embedding":
        return [("embeddings", [int(config["input_dim"]), int(config["output_dim"])], True)]
    if kind in ("LSTM", "GRU", "SimpleRNN") and channels:
        units = int(config["units"])
        gates = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}[kind]
        recurrent_bias = [2, gates * units] if kind == "GRU" and config.get("reset_after", True) else [gates * units]
        return [("kernel", [channels, gates * units], True), ("recurrent_kernel", [units, gates * units], True)] + (
            [("bias", recurrent_bias, True)] if bias else [])
    return None


def _attention_weights(config: dict, shapes: dict) -> list[tuple[str, list[int], bool]] | None:
    """MultiHeadAttention's query, key, value and output projections (each with a bias by default)."""
    query, value = _last_dim(shapes.get("query_shape")), _last_dim(shapes.get("value_shape"))
    key = _last_dim(shapes.get("key_shape")) or value
    if not (query and value):
        return None
    heads, key_dim = int(config["num_heads"]), int(config["key_dim"])
    value_dim = int(config.get("value_dim") or key_dim)
    out = config.get("output_shape")
    out = (out[-1] if isinstance(out, list) else out) or query
    bias = bool(config.get("use_bias", True))
    weights = []
    for name, size, dim in (("query", query, key_dim), ("key", key, key_dim), ("value", value, value_dim)):
        weights.append((f"{name}/kernel", [size, heads, dim], True))
        weights += [(f"{name}/bias", [heads, dim], True)] if bias else []
    weights.append(("attention_output/kernel", [heads, value_dim, int(out)], True))
    return weights + ([("attention_output/bias", [int(out)], True)] if bias else [])


# Layers that hold no weights of their own.
_OPS_MODULE = "keras.src.ops"  # Keras 3's ops, as a functional model's config records them: layers without weights
_NO_WEIGHTS = frozenset({
    "InputLayer", "Activation", "ReLU", "LeakyReLU", "Softmax", "ELU", "Dropout", "SpatialDropout1D",
    "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise", "GaussianDropout", "AlphaDropout", "Flatten", "Reshape",
    "Permute", "RepeatVector", "Lambda", "Concatenate", "Add", "Subtract", "Multiply", "Average", "Maximum",
    "Minimum", "Dot", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "UpSampling1D", "UpSampling2D", "UpSampling3D",
    "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D", "Rescaling",
    "Resizing", "CenterCrop", "Identity", "ActivityRegularization", "Masking", "UnitNormalization",
    # Keras 3's augmentation and preprocessing layers: no weights (a seed generator's state is none of them).
    "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast", "RandomCrop",
    "RandomBrightness", "RandomHue", "RandomSaturation", "RandomGrayscale", "RandomErasing", "RandomGaussianBlur",
    "RandomSharpness", "RandomShear", "RandomInvert", "RandomPosterization", "RandomPerspective",
    "RandomColorJitter", "RandomColorDegeneration", "RandomElasticTransform", "RandAugment", "AugMix", "MixUp",
    "CutMix", "Solarization", "AutoContrast", "Equalization", "Discretization", "Hashing", "HashedCrossing",
    "CategoryEncoding",
})


def _last_dim(input_shape: Any) -> int | None:
    """The channels (last dimension) of a layer's input shape, where it has one input and knows it."""
    if isinstance(input_shape, dict) or not isinstance(input_shape, (list, tuple)) or not input_shape:
        return None
    if isinstance(input_shape[0], (list, tuple)):  # several inputs: the first's
        input_shape = input_shape[0]
    last = input_shape[-1]
    return int(last) if isinstance(last, int) and last > 0 else None


def _slot_names(compile_config: dict) -> tuple[str, ...] | None:
    """The slots the compiled optimizer keeps per trainable weight: none when it is not named or
    keeps none (SGD without momentum); None for an optimizer of a class not sized here."""
    optimizer = compile_config.get("optimizer")
    if isinstance(optimizer, str):
        kind, config = _OPTIMIZER_CLASSES.get(optimizer.lower(), optimizer), {}
    elif isinstance(optimizer, dict):
        kind, config = optimizer.get("class_name", ""), optimizer.get("config") or {}
    else:
        return ()
    if kind == "LossScaleOptimizer":  # mixed precision's wrapper: its inner optimizer keeps the slots
        return _slot_names({"optimizer": config.get("inner_optimizer")})
    slots = _own_slot_names(kind, config)
    if slots is None:
        return None
    # Every Keras 3 optimizer's own options: a moving average of each weight (`use_ema`) and an accumulator
    # of its gradients (`gradient_accumulation_steps`), each a copy of the weight (trial W's had been `other`).
    return slots + (("average",) if config.get("use_ema") else ()) + (
        ("gradient_accumulator",) if config.get("gradient_accumulation_steps") else ())


def _own_slot_names(kind: str, config: dict) -> tuple[str, ...] | None:
    """The slots an optimizer class keeps per trainable weight for its own update rule."""
    if kind == "SGD":
        return ("momentum",) if float(config.get("momentum", 0) or 0) > 0 else ()
    if kind == "RMSprop":
        return ("velocity",) + (("momentum",) if float(config.get("momentum", 0) or 0) > 0 else ()) + (
            ("average_gradient",) if config.get("centered") else ())
    slots = _SLOTS.get(kind)
    if slots is None:
        return None
    if kind in ("Adam", "AdamW") and config.get("amsgrad"):
        slots += ("velocity_hat",)
    return slots
