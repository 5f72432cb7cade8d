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
from typing import NamedTuple

from ...names import CALL_FUNCTION_RE, CASE_GRADIENT_OP, REPLICA_RE

INPUT_PIPELINE = "(input pipeline)"  # what tf.data's threads allocate; their ops' names below it

# Function-call wrappers the runtime puts in front of a function body's op names.
_CALL_RE = re.compile(r"^(?:Stateful)?PartitionedCall(?:_\d+)?$")
_CALL_GRAD_RE = re.compile(r"^(?:Stateful)?PartitionedCall(?:_\d+)?_grad$")  # a call's gradient function's call
# Scopes a Keras train step opens before the model's own: kept, and skipped over.
_STEP_SCOPE_RE = re.compile(r"^gradient_tape(?:_\d+)?$")
# A user's loop around the model in their own train step (`for i in tf.range(n)`: gradient
# accumulation over micro-batches): its ops are `while/<model>_1/<layer>_1/...`, the model's scopes
# made unique inside it as outside. Kept, and skipped over as the tape's scope is.
_LOOP_SCOPE_RE = re.compile(r"^while(?:_\d+)?$")
# A control-flow function's call: `<If op>/then/_0/`, `<While op>/body/_1/`, its body's ops
# named again under the op's own scope (`cond/then/_0/cond/adam/Sub_10`).
_BRANCH_INDEX_RE = re.compile(r"^_\d+$")
# Keras 3's fit with steps_per_execution > 1 calls its train step from a loop's branch: once its
# branch calls are dropped, `while/cond/StatefulPartitionedCall/gradient_tape/...`. The loop and
# the branch are Keras' (a loop of the user's calling a function keeps its scope).
_KERAS_STEPS_LOOP = (re.compile(r"^while(?:_\d+)?$"), re.compile(r"^cond(?:_\d+)?$"))


@functools.lru_cache(maxsize=1 << 16)
def clean(raw: str) -> str:
    """`StatefulPartitionedCall/small_unet_1/enc_1_1/Relu` -> `small_unet/enc_1/Relu`.

    After the call wrappers (and a `gradient_tape` scope), the leading scopes
    that end in `_<n>` are the model's and its layers' (nested models
    included): each loses that suffix. The chain stops at the first scope
    without one (`convolution`, `adam`) and never touches the op's own name
    (`Mul_23`), which TensorFlow numbered, not Keras. A chain of one scope is
    left alone: Keras always opens two (model, layer), and a user's own
    `tf.name_scope("block_2")` is not Keras'. One name alone: `clean_all` also
    keeps apart the op scopes TensorFlow numbered (`Repeat`, `Repeat_1`), and
    takes a chain of one scope for the model's where the step's other names
    show it is a model (its own op outside its layers: `mpnet_1/Cast`).
    """
    return clean_all([raw])[0][0]


def keras_layer(raw: str) -> str | None:
    """The Keras layer a raw op name is in, as `clean` names it (`cnn/c2` for
    `gradient_tape/cnn_1/c2_1/convolution/Conv2DBackpropInput`): the scopes Keras made unique,
    and none of the op's own (TensorFlow opens `convolution`, `MatMul`, `MaxPool2d` for an op,
    and the tape puts its gradients there too). None outside a Keras model."""
    return clean_all([raw])[0][1]


def clean_all(raws: list[str]) -> list[tuple[str, str | None]]:
    """(`clean`, `keras_layer`) of the raw names of one step. A numbered scope whose unnumbered
    sibling is in the step (`up_0_1/Repeat_1` beside `up_0_1/Repeat`: an op's scope used twice)
    is TensorFlow's, not Keras': the chain stops before it, and the two ops stay two."""
    read = [_chain(raw) for raw in raws]
    scopes: set[str] = set()  # where chains may stop, counted from the model's scope
    for chain in read:
        scopes.update(chain.prefixes)

    def kept_of(chain: _Chain) -> int:
        kept = 0
        for sibling, base in zip(chain.siblings, chain.bases):
            # Keras numbers its own names too (a second `dense` is `dense_1`, traced as `dense_1_1`
            # beside `dense_1`): a sibling that is itself numbered is Keras', not TensorFlow's.
            if sibling in scopes and not _NUMBER_RE.search(base):
                break
            kept += 1
        return kept

    kept = [kept_of(chain) for chain in read]
    # A chain of one scope is the model's where other names show it is a model (its layers' chains:
    # a layer's name is Keras' snake case, where an op's scope is TensorFlow's `Cast_11`): an op of
    # the model's own, outside its layers (mixed precision's input `Cast`).
    models = {chain.bases[0] for chain, k in zip(read, kept)
              if k >= 2 and chain.bases[1][:1].islower() and chain.parts[0] != INPUT_PIPELINE}
    named = []
    for raw, chain, k in zip(raws, read, kept):
        scoped = _below_user_scope(chain, models, kept_of) if k == 0 and models else None
        named.append(scoped or _named(raw, k, k == 1 and chain.bases[0] in models))
    return named


def _below_user_scope(chain: _Chain, models: set[str], kept_of) -> tuple[str, str | None] | None:
    """(`clean`, `keras_layer`) of a name whose model's scopes follow a scope of the user's (a model called
    under `tf.name_scope("gradient_penalty")`: `gradient_penalty/critic_1/d_conv1_1/convolution` ->
    `gradient_penalty/critic/d_conv1/convolution`, layer `gradient_penalty/critic/d_conv1`, the user's scope
    in front as a loop's is); None where no model of the step's (`models`, as other names show them) follows
    its first scope, numbered with a layer after it. Trial AB's gradient penalty had kept Keras' `_1`s and
    made its convolution a layer of its own."""
    parts = chain.parts
    for i in range(chain.skip + 1, len(parts) - 2):
        base = _NUMBER_RE.sub("", parts[i], count=1)
        if base == parts[i] or base not in models or not _NUMBER_RE.search(parts[i + 1]):
            continue
        inner = _chain("/".join(parts[i:]))
        kept = kept_of(inner)
        if kept < 2:
            return None
        cleaned, layer = _named("/".join(parts[i:]), kept)
        front = "/".join(parts[:i])
        loops = [part for part in parts[:chain.skip] if _LOOP_SCOPE_RE.match(part)]
        return f"{front}/{cleaned}", "/".join((*loops, *parts[chain.skip:i], layer))
    return None


class _Chain(NamedTuple):
    skip: int  # the leading scopes that are no Keras scopes: a `gradient_tape`, a loop, another replica's
    parts: tuple[str, ...]  # the components, call wrappers and control-flow calls dropped
    bases: tuple[str, ...]  # the leading scopes from `skip` on that end in `_<n>`, without it
    prefixes: tuple[str, ...]  # its scopes a chain may stop at, down to the one after `bases`
    siblings: tuple[str, ...]  # per numbered scope, the unnumbered sibling that stops the chain there


# The leading scopes that end in `_<n>` (each followed by a `/`: the op's own name never is one).
_NUMBERED_RE = re.compile(r"(?:[^/]+_\d+/)*")
_NUMBER_RE = re.compile(r"_\d+$")


@functools.lru_cache(maxsize=1 << 16)
def _chain(raw: str) -> _Chain:
    skip, parts = _stripped(raw)
    joined = "/".join(parts[skip:])
    numbered = _NUMBERED_RE.match(joined).end()  # the numbered scopes, each with its "/"
    ends = []  # where each scope of the chain ends, down to the one after the numbered ones
    at = joined.find("/")
    while at >= 0:
        ends.append(at)
        if at >= numbered:
            break
        at = joined.find("/", at + 1)
    count = sum(1 for end in ends if end < numbered)
    starts = [0, *(end + 1 for end in ends[:count])]
    bases = tuple(_NUMBER_RE.sub("", joined[starts[i]:ends[i]], count=1) for i in range(count))
    return _Chain(skip, parts, bases, tuple(joined[:end] for end in ends),
                  tuple(joined[:starts[i]] + bases[i] for i in range(count)))


@functools.lru_cache(maxsize=1 << 16)
def _named(raw: str, kept: int, in_model: bool = False) -> tuple[str, str | None]:
    """(cleaned name, Keras layer) of a raw name whose first `kept` numbered scopes are Keras' (one,
    `in_model`: the model's, whose own op it is)."""
    skip, parts, bases, _, _ = _chain(raw)
    if kept < 2 and not in_model:  # one numbered scope is a user's own (`block_2`), not a model and a layer
        return "/".join(parts), None
    if parts[0] == INPUT_PIPELINE:  # a Keras model run in a dataset's `map` is the input's, no layer of the step's
        return "/".join((*parts[:skip], *bases[:kept], *parts[skip + kept:])), None
    # The layer as the grouping by layer has it: a loop's scope stays in front (the tape's goes).
    loops = tuple(part for part in parts[:skip] if _LOOP_SCOPE_RE.match(part))
    return "/".join((*parts[:skip], *bases[:kept], *parts[skip + kept:])), "/".join((*loops, *bases[:kept]))


def in_keras_steps_loop(raw: str) -> bool:
    """Whether an op ran in Keras 3's steps_per_execution loop (`while/body/_1/while/cond/then/_143/while/cond/
    StatefulPartitionedCall/...`: the train step called from the loop's branch), as `_stripped` reads it."""
    parts = _without_branch_calls(_without_calls(raw.split("/")))
    loop, branch = _KERAS_STEPS_LOOP
    return len(parts) > 3 and bool(loop.match(parts[0]) and branch.match(parts[1]) and _CALL_RE.match(parts[2]))


@functools.lru_cache(maxsize=1 << 16)
def _stripped(raw: str) -> tuple[int, tuple[str, ...]]:
    """(how many leading scopes are no Keras scopes, a `gradient_tape`, another replica's
    `replica_<N>` and a user's loop `while`, 0 to 3; the name's components without the call
    wrappers, control-flow calls, and Keras' steps_per_execution loop and branch). The scopes
    of the step are counted from `skip` on, so a gradient's scopes meet its forward op's. An op of
    the input pipeline's (`(input pipeline)/<op>`) is read as its op, that scope kept in front."""
    if raw.startswith(INPUT_PIPELINE + "/"):
        skip, parts = _stripped(raw[len(INPUT_PIPELINE) + 1:])
        return skip + 1, (INPUT_PIPELINE, *parts)
    parts = _without_branch_calls(_without_calls(raw.split("/")))
    if in_keras_steps_loop(raw):
        parts = _without_branch_calls(_without_calls(parts[2:]))  # the loop's own ops (`while/add`) stay
    parts = _tape_in_front(_without_inner_calls(parts))
    # A distribution strategy's other replica (`replica_1/...`: MirroredStrategy), the tape's scope
    # and a user's loop around the model are no Keras scopes: the chain starts after them, and they
    # stay as they are.
    skip = 0
    while skip < min(3, len(parts) - 1) and (_STEP_SCOPE_RE.match(parts[skip]) or REPLICA_RE.match(parts[skip])
                                             or _LOOP_SCOPE_RE.match(parts[skip])):
        skip += 1
    return skip, tuple(parts)


def _tape_in_front(parts: list[str]) -> list[str]:
    """`P/gradient_tape/P/rest` -> `gradient_tape/P/rest`: a tape's gradients taken inside a loop's
    body (a Keras RNN's backward loop, `textnet_1/gru_1/while/gradient_tape/textnet_1/gru_1/while/...`
    once its body's call is dropped) name the body's ops again after the tape's scope, as the
    step's own gradients name the forward ops after theirs; and again after a `gradients` scope
    inside that (`.../while/gradients/textnet_1/gru_1/while/...`): one tape, in front."""
    head: list[str] = []
    if parts and _STEP_SCOPE_RE.match(parts[0]):
        head, parts = parts[:1], parts[1:]
    found = True
    while found:
        found = False
        for g in range(1, len(parts) // 2):
            if parts[g] == "gradients" or _STEP_SCOPE_RE.match(parts[g]):
                if parts[g + 1:2 * g + 1] == parts[:g] and len(parts) > 2 * g + 1:
                    head = head or [parts[g]]
                    parts = parts[g + 1:]
                    found = True
                break
    return [*head, *parts]


def _without_inner_calls(parts: list[str]) -> list[str]:
    """`middle/StatefulPartitionedCall/inner/MatMul` -> `middle/inner/MatMul`: a nested function's
    call (its body's ops are named below the call op) dropped, as the leading ones are; and a call's
    gradient function (`middle/StatefulPartitionedCall_grad/PartitionedCall/gradients/inner/...`,
    whose ops are named from its own `gradients` scope) -> `middle/inner/...`. The op's own name
    stays (a call op holding bytes)."""
    if len(parts) < 3 or not any("PartitionedCall" in part for part in parts[:-1]):
        return parts
    out: list[str] = []
    i, last = 0, len(parts) - 1
    while i < last:
        part = parts[i]
        if (_CALL_GRAD_RE.match(part) and i + 3 <= last and _CALL_RE.match(parts[i + 1])
                and parts[i + 2] == "gradients"):
            i += 3
        elif _CALL_RE.match(part):
            i += 1
        else:
            out.append(part)
            i += 1
    return [*out, parts[last]]


def _without_calls(parts: list[str]) -> list[str]:
    """The components after the leading call wrappers (the op's own name stays)."""
    first = 0
    while first < len(parts) - 1 and _CALL_RE.match(parts[first]):
        first += 1
    return parts[first:]


def _without_branch_calls(parts: list[str]) -> list[str]:
    """`cond/then/_0/cond/adam/Sub_10` -> `cond/adam/Sub_10`: a control-flow function's call
    (`<op>/<branch>/_<n>/`) dropped where its ops repeat the op's scope after it, as they do; a
    tape's gradients taken in the body repeat it after their `gradient_tape` scope
    (`while/body/_1/gradient_tape/while/mlp/MatMul` -> `gradient_tape/while/mlp/MatMul`)."""
    k = 1
    while k + 2 < len(parts):
        branch = bool(CALL_FUNCTION_RE.match(parts[k]))  # `then`, `else`, `body`, `cond`, a switch_case's `branch1`
        if branch and _BRANCH_INDEX_RE.match(parts[k + 1]) and (case := _case_gradient(parts, k)) is not None:
            parts = case
            k = 1
            continue
        if branch and _BRANCH_INDEX_RE.match(parts[k + 1]) and any(
                parts[k + 2 + tape:k + 2 + tape + k] == parts[:k] or (tape and _loop_gradient_body(parts, k))
                for tape in (0, 1) if not tape or _STEP_SCOPE_RE.match(parts[k + 2])):
            parts = parts[k + 2:]
            k = 1
            continue
        k += 1
    return parts


def _case_gradient(parts: list[str], k: int) -> list[str] | None:
    """A `tf.switch_case`'s gradient taken by a tape: its Case op is named `gradient` in the forward case's
    scope, and its branch's ops after the tape's scope, the case's path, `gradients` and the case's path again
    (`gradient_tape/r/indexed_case/gradient/branch0/_11/gradient_tape/r/indexed_case/gradients/r/indexed_case/
    MatMul_grad/MatMul_1`) -> `gradient_tape/r/indexed_case/MatMul_grad/MatMul_1`, as a cond's gradients
    read. None where `parts[k]` is no such call."""
    if k < 3 or parts[k - 1] != CASE_GRADIENT_OP or not _STEP_SCOPE_RE.match(parts[0]):
        return None
    case = parts[1:k - 1]
    rest = parts[k + 2:]
    n = len(case)
    if (len(rest) > 2 * n + 2 and _STEP_SCOPE_RE.match(rest[0]) and rest[1:1 + n] == case
            and rest[1 + n] == "gradients" and rest[2 + n:2 + 2 * n] == case):
        return [parts[0], *case, *rest[2 + 2 * n:]]
    return None


def _loop_gradient_body(parts: list[str], k: int) -> bool:
    """Whether `parts[k]` (`body`) is the call of a loop's gradient loop whose ops name the forward
    loop again: a Keras RNN's backward loop, `gradient_tape/net/gru/while/net_1/gru_1/while_grad/
    body/_211/gradient_tape/net_1/gru_1/while/gradients/...`: the gradient loop (`while_grad`) is
    named in the tape's function, after the scope it was taken in, and its body's ops after the
    tape's scope (`parts[k + 2]`, which stays in front: these are gradients) by the forward loop's
    own scopes (`net_1/gru_1/while`), two or more of them, or
    the loop's alone where it is at the function's root (`tf.while_loop` in a train step:
    `gradient_tape/while/while_grad/body/_43/gradient_tape/while/gradients/while/cell/...`)."""
    op = parts[k - 1]
    if not op.endswith("_grad") or k < 2:
        return False
    forward = [*parts[:k - 1], op[:-len("_grad")]]
    body = parts[k + 3:]
    scope = parts[:k - 1]  # the scope the gradient was taken in: the tape's, then the forward loop's
    if (len(body) > 1 and _LOOP_SCOPE_RE.match(body[0]) and scope[-1:] == [body[0]] == forward[-1:]
            and (len(scope) == 1 or (len(scope) == 2 and _STEP_SCOPE_RE.match(scope[0])))):
        return True
    return any(body[:j] == forward[-j:] for j in range(min(len(forward), len(body)), 1, -1))
