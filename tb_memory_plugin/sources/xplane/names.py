"""Keras 3 / tf.function op names -> the names the user wrote.

Profiles name ops as the function body ran them:
`StatefulPartitionedCall/small_unet_1/enc_1_1/Relu`. The call wrapper is not
the user's, and TensorFlow made the model's and the layers' name scopes
unique when Keras traced the step (`small_unet` -> `small_unet_1`, layer
`enc_1` -> `enc_1_1`). Cleaned: `small_unet/enc_1/Relu`; gradient and
optimizer prefixes stay (`gradient_tape/small_unet/dec_1/...`) for the
grouping by layer to fold.

Pure functions; the raw name stays with the trace (`SpaceTrace.label_of`).
"""

from __future__ import annotations

import functools
import re

# Function-call wrappers the runtime puts in front of a function body's op names.
_CALL_RE = re.compile(r"^(?:Stateful)?PartitionedCall(?:_\d+)?$")
# Scopes a Keras train step opens before the model's own: kept, and skipped over.
_STEP_SCOPE_RE = re.compile(r"^gradient_tape(?:_\d+)?$")
_UNIQUE_SUFFIX_RE = re.compile(r"^(?P<base>.+?)_\d+$")


@functools.lru_cache(maxsize=1 << 16)
def clean(raw: str) -> str:
    """`StatefulPartitionedCall/small_unet_1/enc_1_1/Relu` -> `small_unet/enc_1/Relu`.

    After the call wrappers (and a `gradient_tape` scope), the leading scopes
    that end in `_<n>` are the model's and its layers' (nested models
    included): each loses that suffix. The chain stops at the first scope
    without one (`convolution`, `adam`) and never touches the op's own name
    (`Mul_23`), which TensorFlow numbered, not Keras. A chain of one scope is
    left alone: Keras always opens two (model, layer), and a user's own
    `tf.name_scope("block_2")` is not Keras'.
    """
    parts = raw.split("/")
    first = 0
    while first < len(parts) - 1 and _CALL_RE.match(parts[first]):
        first += 1
    parts = parts[first:]
    scope = 1 if len(parts) > 1 and _STEP_SCOPE_RE.match(parts[0]) else 0
    bases = []
    while scope + len(bases) < len(parts) - 1:
        match = _UNIQUE_SUFFIX_RE.match(parts[scope + len(bases)])
        if match is None:
            break
        bases.append(match.group("base"))
    if len(bases) >= 2:
        parts[scope:scope + len(bases)] = bases
    return "/".join(parts)
