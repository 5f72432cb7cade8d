"""What an XLA program's buffers hold, by the ops that made them, from the HLO a profile keeps.

XLA allocates a compiled program's memory itself, a few blocks per run that name
no op: each output in a block of its own, and one scratch block (the "temp"
allocation) in which XLA's buffer assignment places every intermediate value at
an offset, reusing bytes once a value is dead. The profiler keeps each program's
`HloProto` in its metadata plane (`/host:metadata`, stat `Hlo Proto`): the
module (instructions and their `OpMetadata.op_name`, the op in the user's code)
and its buffer assignment (allocations, the logical buffers placed in them, and
the heap simulator's trace of when each buffer is live).

`Module.blocks` reads from it what each block the program allocates holds:

* an output block: the value the program returns in it (the buffer a root
  tuple's operand defines), all of the block; where that value is computed from
  an argument of the block's size, the argument it updates (`updated_argument`:
  a parameter's new value beside the old one, the argument not donated);
* the scratch block: the values live at the heap simulator's peak (the most
  bytes live at once), each where its op made it. The bytes no value holds
  then are unused: XLA's layout places values live at other times there
  (fragmentation inside the block; a scan's loop can leave a good part unused).
  XLA's CPU compiler keeps no heap trace: there a value is live from its
  instruction to its last use (through the instructions whose result is its
  bytes) in its computation's schedule, and a loop's body adds what one iteration
  holds at once where the loop runs. Values at the same bytes at once are one
  value's aliases.

A value's op is its instruction's `op_name` (`_OpNames`: an instruction XLA made
names none, and takes its fusion's ops', the argument it copies, or the op that
uses it).

Fields are declared by number (the xla protos do not ship with TensorBoard):

    HloProto            hlo_module = 1, buffer_assignment = 3
    HloModuleProto      computations = 3, entry_computation_id = 6, schedule = 7
                        (HloScheduleProto: sequences = 1, a map of computation id -> instruction_ids = 1),
                        input_output_alias = 8 (entries = 1: parameter_number = 2, parameter_shape_index = 3)
    HloComputationProto instructions = 2, id = 5, root_id = 6
    HloInstructionProto name = 1, opcode = 2, shape = 3, metadata = 7, parameter_number = 9, id = 35,
                        operand_ids = 36, called_computation_ids = 38
    ShapeProto          dimensions = 3, tuple_shapes = 4
    OpMetadata          op_name = 2
    BufferAssignmentProto  logical_buffers = 1, buffer_allocations = 3, heap_simulator_traces = 4
    LogicalBufferProto  id = 1, size = 2, defined_at = 3 (Location: instruction_id = 4, shape_index = 3)
    BufferAllocationProto  index = 1, size = 2, is_thread_local = 3, is_entry_computation_parameter = 5,
                        maybe_live_out = 7, assigned = 9 (logical_buffer_id = 1, offset = 2, size = 3),
                        is_constant = 12
    HeapSimulatorTrace  events = 1 (kind = 1: ALLOC 0, FREE 1, SHARE_WITH 2; buffer_id = 2,
                        share_with_canonical_id = 5)
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import re
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ... import _protos
from ...trace import ProgramShapes

_I, _S, _M, _B = _protos.INT64, _protos.STRING, _protos.MESSAGE, _protos.BYTES
_O, _R = _protos.OPTIONAL, _protos.REPEATED
_SCHEMA = {
    "Hlo": [("module", 1, _M, _O, "Module"), ("assignment", 3, _M, _O, "Assignment")],
    "Module": [("computations", 3, _M, _R, "Computation"),
               ("entry_computation_id", 6, _I, _O, None), ("schedule", 7, _M, _O, "Schedule"),
               ("input_output_alias", 8, _M, _O, "Aliases")],
    "Aliases": [("entries", 1, _M, _R, "Alias")],
    "Alias": [("parameter_number", 2, _I, _O, None), ("parameter_shape_index", 3, _I, _R, None)],
    "Schedule": [("sequences", 1, _M, _R, "SequenceEntry")],
    "SequenceEntry": [("key", 1, _I, _O, None), ("value", 2, _M, _O, "Sequence")],
    "Sequence": [("instruction_ids", 1, _I, _R, None)],
    "Computation": [("instructions", 2, _M, _R, "Instruction"), ("id", 5, _I, _O, None),
                    ("root_id", 6, _I, _O, None)],
    "Instruction": [("name", 1, _S, _O, None), ("opcode", 2, _S, _O, None), ("shape", 3, _M, _O, "Shape"),
                    ("metadata", 7, _M, _O, "OpMetadata"),
                    ("parameter_number", 9, _I, _O, None), ("id", 35, _I, _O, None), ("operand_ids", 36, _I, _R, None),
                    ("called_computation_ids", 38, _I, _R, None)],
    "Shape": [("dimensions", 3, _I, _R, None), ("tuple_shapes", 4, _M, _R, "Shape"),
              ("layout", 5, _B, _O, None), ("is_dynamic_dimension", 6, _B, _O, None)],
    "OpMetadata": [("op_name", 2, _S, _O, None)],
    "Assignment": [("logical_buffers", 1, _M, _R, "LogicalBuffer"), ("allocations", 3, _M, _R, "Allocation"),
                   ("traces", 4, _M, _R, "HeapTrace")],
    "LogicalBuffer": [("id", 1, _I, _O, None), ("size", 2, _I, _O, None), ("defined_at", 3, _M, _O, "Location")],
    "Location": [("instruction_id", 4, _I, _O, None), ("shape_index", 3, _I, _R, None)],
    "Allocation": [("index", 1, _I, _O, None), ("size", 2, _I, _O, None), ("is_thread_local", 3, _I, _O, None),
                   ("is_entry_computation_parameter", 5, _I, _O, None), ("maybe_live_out", 7, _I, _O, None),
                   ("assigned", 9, _M, _R, "Assigned"), ("is_constant", 12, _I, _O, None)],
    "Assigned": [("logical_buffer_id", 1, _I, _O, None), ("offset", 2, _I, _O, None), ("size", 3, _I, _O, None)],
    "HeapTrace": [("events", 1, _M, _R, "HeapEvent")],
    "HeapEvent": [("kind", 1, _I, _O, None), ("buffer_id", 2, _I, _O, None),
                  ("share_with_canonical_id", 5, _I, _O, None)],
}
_ALLOC, _FREE, _SHARE_WITH = 0, 1, 2
_STATE_UPDATED = 2  # arguments a program must return new values of for them to be its state, updated
_CALLS_FOLLOWED = 16  # nested loops and calls followed into
_USERS_SEARCHED = 64  # instructions looked at, breadth first, for a user that names its op
_OPERANDS_FOLLOWED = 4  # copies followed back to the argument they copy
# Instructions that pass a value on, or only lay it out again, without computing.
_FORWARDING = frozenset({"get-tuple-element", "bitcast", "tuple", "copy", "reshape", "transpose", "broadcast"})
# Instructions whose result is their operand's bytes (on CPU as on GPU): a value used through them
# lives until their users are done.
_ALIASING = frozenset({"bitcast", "get-tuple-element", "tuple"})

HLO_PROTO_STAT = "Hlo Proto"  # the metadata plane's stat holding a program's serialized HloProto


@functools.cache
def _hlo_class():
    return _protos.message_classes("tb_memory.hlo", _SCHEMA)["Hlo"]


@dataclass(frozen=True)
class Piece:
    """Bytes of a block that one op's value holds: `op_name` as XLA's metadata spells it."""

    op_name: str
    bytes: int


@dataclass(frozen=True)
class Block:
    """A block a program allocates when it runs: an output, or its scratch."""

    size: int  # bytes XLA asks the allocator for (the profile's `requested_bytes`)
    is_output: bool
    pieces: tuple[Piece, ...]  # what it holds, by op (at most `size` bytes); the rest is the program's own
    # Of a scratch block: the bytes no value holds at its peak (XLA's layout of values that are
    # live at other times leaves them free then: fragmentation inside the block).
    unused: int = 0
    # Of an output block: the argument (its path, `p['dense']['kernel']`) whose new value it holds (a
    # parameter updated), made beside the argument because the caller did not donate it; else "".
    updated_argument: str = ""


@dataclass(frozen=True)
class Module:
    blocks: tuple[Block, ...]  # in allocation order: the order a run allocates them in
    shapes: ProgramShapes = ProgramShapes(())
    # Sizes of what the program may return in an argument's or a constant's bytes: no block of its
    # own, but TensorFlow's runtime may give such an output a buffer of its own as the program runs
    # (JAX's never allocates one: an aliased argument is the caller's).
    passed_through: tuple[int, ...] = ()


class HloError(ValueError):
    pass


def read_module(data: bytes) -> Module:
    """A program's blocks from its serialized HloProto (HloError where the bytes are no HloProto)."""
    try:
        hlo = _hlo_class().FromString(data)
    except (DecodeError, UnicodeDecodeError) as exc:
        raise HloError(f"not an HloProto: {exc}") from None
    instructions, computations, users = {}, {}, collections.defaultdict(list)
    root_operands: set[int] = set()
    # A fusion's computation is read through its fusion (`_OpNames`, `_arguments_of`): its instructions
    # (most of a big program's: 38k of a 32-block model's 49k) define no buffer and use none outside
    # it, so they are not indexed. The module lists callees first: read backwards, a fusion comes
    # before the computation it calls (in another order, a fused computation is indexed: no harm).
    fused: set[int] = set()
    for computation in reversed(hlo.module.computations):
        computations[computation.id] = computation
        if computation.id in fused:
            continue
        for instruction in computation.instructions:
            instructions[instruction.id] = instruction
            for operand in instruction.operand_ids:
                users[operand].append(instruction.id)
            if instruction.opcode == "fusion":
                fused.update(instruction.called_computation_ids)
        if computation.id == hlo.module.entry_computation_id:
            root = instructions.get(computation.root_id)
            if root is not None:  # the values the program returns: the root tuple's operands, or the root
                root_operands.update(root.operand_ids if root.opcode == "tuple" else [root.id])
    op_name = _OpNames(instructions, computations, users, hlo.module.entry_computation_id)
    buffers = {buffer.id: buffer for buffer in hlo.assignment.logical_buffers}

    def defined_by(buffer_id: int) -> int:
        buffer = buffers.get(buffer_id)
        return buffer.defined_at.instruction_id if buffer is not None else -1

    argument_size = {defined_by(a.logical_buffer_id): int(allocation.size)
                     for allocation in hlo.assignment.allocations if allocation.is_entry_computation_parameter
                     for a in allocation.assigned}
    updates: dict[int, set[int]] = {}  # an output block (its index in `blocks`) -> the arguments it may update

    blocks = []
    passed_through = []
    for allocation in sorted(hlo.assignment.allocations, key=lambda a: a.index):
        if (allocation.size <= 0 or allocation.is_entry_computation_parameter or allocation.is_thread_local
                or allocation.is_constant):
            if allocation.size > 0 and allocation.maybe_live_out and not allocation.is_thread_local:
                passed_through.append(int(allocation.size))
            continue  # the caller's arguments, or no block of its own
        assigned = list(allocation.assigned)
        if allocation.maybe_live_out:
            returned = [a for a in assigned if defined_by(a.logical_buffer_id) in root_operands]
            value = max(returned or assigned, key=lambda a: (a.size, a.logical_buffer_id), default=None)
            defined = defined_by(value.logical_buffer_id) if value is not None else -1
            name = op_name(defined) if value is not None else ""
            pieces = (Piece(name, int(allocation.size)),) if name else ()
            if value is not None:
                where = buffers[value.logical_buffer_id].defined_at if value.logical_buffer_id in buffers else None
                updates[len(blocks)] = _arguments_of(instructions.get(defined), where.shape_index if where else [],
                                                     instructions, computations, op_name.argument_of,
                                                     argument_size, int(allocation.size))
            blocks.append(Block(int(allocation.size), True, pieces))
            continue
        sizes = {a.logical_buffer_id: int(a.size) for a in assigned}
        # XLA's heap trace where it kept one for this block's values, else the schedule's liveness;
        # of values at the same bytes (a loop's state: its operand, its body's parameter and
        # result), one, which names an op where one does.
        live = _traced_peak(hlo.assignment, sizes)  # XLA's own: no two live values share bytes
        if not live:
            live = _apart(_scheduled_peak(hlo.module, buffers, users, instructions, sizes),
                          {a.logical_buffer_id: (int(a.offset), int(a.size)) for a in assigned},
                          lambda buffer_id: bool(op_name(defined_by(buffer_id))))
        held: dict[str, int] = collections.Counter()
        for buffer_id in live:
            name = op_name(defined_by(buffer_id))
            if name:
                held[name] += sizes[buffer_id]
        live_bytes = sum(sizes[buffer_id] for buffer_id in live)
        if not live or live_bytes > allocation.size:  # no trace, or one the block cannot hold: nothing placed
            held, live_bytes = {}, int(allocation.size)
        blocks.append(Block(int(allocation.size), False,
                            tuple(Piece(name, size) for name, size in sorted(held.items(), key=lambda kv: -kv[1])),
                            unused=int(allocation.size) - live_bytes))
    updated = _updated_arguments(updates)
    if len(updated) < _STATE_UPDATED:  # one value made from one input (`jit_multiply`, `x + f(x)`): no state
        updated = {}
    for index, argument in updated.items():
        path = instructions[argument].metadata.op_name or instructions[argument].name
        blocks[index] = dataclasses.replace(blocks[index], updated_argument=path)
    shapes = ProgramShapes(_data_arguments(hlo.module, computations, set(updated.values())),
                           functools.partial(_leading_dims, data))
    return Module(tuple(blocks), shapes, tuple(passed_through))


# Instructions that make no value of their own (what only passes a value on, names one or holds one).
_NOT_VALUES = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})


def _leading_dims(data: bytes) -> dict[int, int]:
    """How many of the values a program's instructions compute (of rank 2 or more) have each first
    dimension: its HloProto's bytes read again, when the what-if asks (decoding a profile does not
    keep every module's parsed instructions)."""
    leading: collections.Counter = collections.Counter()
    for computation in _hlo_class().FromString(data).module.computations:
        for instruction in computation.instructions:
            if instruction.opcode not in _NOT_VALUES:
                dims = instruction.shape.dimensions
                if len(dims) >= 2:
                    leading[dims[0]] += 1
    return dict(leading)


def _data_arguments(module, computations, updated: set[int]) -> tuple[tuple[int, ...], ...]:
    """The program's data arguments: each array of an entry parameter that is no argument it returns
    a new value of (`updated`) nor one its caller donated (aliased with an output: Keras' and Flax's
    state, TensorFlow's variables), of rank 1 or more. Parameters it only reads (an inference step's,
    TensorFlow's gradients computed apart) are among them: the first dimensions of the values it
    computes (`_leading_dims`) tell the batch from theirs."""
    donated = {(alias.parameter_number, tuple(alias.parameter_shape_index))
               for alias in module.input_output_alias.entries}
    entry = computations.get(module.entry_computation_id)
    inputs = []
    for instruction in entry.instructions if entry is not None else ():
        if instruction.opcode != "parameter" or instruction.id in updated:
            continue
        number = instruction.parameter_number
        for index, dims in _arrays(instruction.shape, ()):
            if dims and (number, ()) not in donated and (number, index) not in donated:
                inputs.append(dims)
    return tuple(inputs)


def _arrays(shape, index: tuple) -> list[tuple[tuple, tuple[int, ...]]]:
    """(shape index, dimensions) of each array in a shape (a tuple's elements, nested)."""
    if shape.tuple_shapes:
        return [found for k, element in enumerate(shape.tuple_shapes) for found in _arrays(element, (*index, k))]
    return [(index, tuple(shape.dimensions))]


def _arguments_of(instruction, shape_index, instructions, computations, argument_of,
                  argument_size: dict[int, int], size: int) -> set[int]:
    """The entry arguments of `size` bytes a returned value is computed from directly (`p - lr * g`
    from `p`): the operands of the instruction that made it, or of a fusion those of the fused
    computation's value it is (a multi-output fusion's element `shape_index`), through the
    instructions that only pass an argument on (`argument_of`, `_OpNames.argument_of`)."""
    if instruction is None:
        return set()
    operands = list(instruction.operand_ids)
    if instruction.opcode == "fusion" and instruction.called_computation_ids:
        fused = computations.get(instruction.called_computation_ids[0])
        used = _fused_parameters(fused, shape_index) if fused is not None else set()
        if used is None:
            used = _fused_parameters_walked(fused, shape_index)
        operands = [operands[k] for k in sorted(used) if k < len(operands)]
    found = set()
    for operand in operands:
        argument = argument_of(instructions[operand]) if operand in instructions else None
        if argument is not None and argument_size.get(argument.id) == size:
            found.add(argument.id)
    return found


def _fused_parameters(fused, shape_index) -> set[int] | None:
    """The parameters (their numbers) of a fused computation that its value reads (of a multi-output
    fusion, the value at `shape_index`), in one backward pass over its instructions, which XLA lists
    operands first. None where they are not in that order (or an operand is not among them)."""
    root_id = fused.root_id
    needed, used, visited = {root_id}, set(), 0
    for inner in reversed(fused.instructions):
        inner_id = inner.id
        if inner_id not in needed:
            continue
        visited += 1
        opcode = inner.opcode
        if inner_id == root_id and opcode == "tuple" and shape_index:
            elements = inner.operand_ids
            if shape_index[0] >= len(elements):
                return set()
            needed.add(elements[shape_index[0]])
        elif opcode == "parameter":
            used.add(inner.parameter_number)
        else:
            needed.update(inner.operand_ids)
    return used if visited == len(needed) else None


def _fused_parameters_walked(fused, shape_index) -> set[int]:
    """`_fused_parameters` in any order of the instructions: a walk from the value through an index of them."""
    inner = {i.id: i for i in fused.instructions}
    root = inner.get(fused.root_id)
    if root is not None and root.opcode == "tuple" and shape_index:
        root = inner.get(root.operand_ids[shape_index[0]]) if shape_index[0] < len(root.operand_ids) else None
    used, queue, seen = set(), [root] if root is not None else [], set()
    while queue:  # the fusion's parameters its value reads
        found = queue.pop()
        if found.id in seen:
            continue
        seen.add(found.id)
        if found.opcode == "parameter":
            used.add(found.parameter_number)
        queue += [inner[o] for o in found.operand_ids if o in inner]
    return used


def _updated_arguments(candidates: dict[int, set[int]]) -> dict[int, int]:
    """Which argument each output updates, of those it is computed from: an output from one argument
    is that one's new value, which the others are then not (Adam's new `p` reads `p`, `mu` and `nu`;
    its new `mu` reads only `mu`); of several left, the first in the program's order."""
    left = {index: set(found) for index, found in candidates.items() if found}
    chosen: dict[int, int] = {}
    while left:
        sure = {index: next(iter(found)) for index, found in left.items() if len(found) == 1}
        if not sure:  # no output from one argument alone: the first output takes its first
            index = min(left)
            sure = {index: min(left[index])}
        chosen.update(sure)
        taken = set(sure.values())
        left = {index: found - taken for index, found in left.items() if index not in sure}
        left = {index: found for index, found in left.items() if found}
    return chosen


def _apart(live: set[int], placed: dict[int, tuple[int, int]], named) -> set[int]:
    """Of values live at once, those at bytes no other kept one holds (the largest first, then one
    that names its op): values XLA gave the same bytes are one value's, aliases of it."""
    starts: list[int] = []  # the kept values' byte ranges, disjoint, by start
    ends: list[int] = []
    out = set()
    for buffer_id in sorted(live, key=lambda b: (-placed[b][1], not named(b), b)):
        start, size = placed[buffer_id]
        at = bisect.bisect_right(starts, start)
        if size and (at == 0 or ends[at - 1] <= start) and (at == len(starts) or start + size <= starts[at]):
            starts.insert(at, start)
            ends.insert(at, start + size)
            out.add(buffer_id)
    return out


def _traced_peak(assignment, sizes: dict[int, int]) -> set[int]:
    """Of one block's logical buffers (id -> bytes in it), those live when the heap simulator's
    traces have the most of them live. A buffer shared with another (an in-place update, a loop's
    carried value) holds the other's bytes: they are freed when the last buffer sharing them is.
    Two passes: the first finds that moment, the second stops there (no copy of the live set at
    every new high: a forward pass rises for thousands of events)."""
    best_bytes, best_trace, best_event = 0, -1, -1
    for index, trace in enumerate(assignment.traces):
        _, peak_bytes, peak_event = _replay(trace.events, sizes, stop=None)
        if peak_bytes > best_bytes:
            best_bytes, best_trace, best_event = peak_bytes, index, peak_event
    if best_trace < 0:
        return set()
    live, _, _ = _replay(assignment.traces[best_trace].events, sizes, stop=best_event)
    return live


def _replay(events, sizes: dict[int, int], stop: int | None) -> tuple[set[int], int, int]:
    """(the buffers live after event `stop`, or at the end; the most bytes live at once; the
    event after which they first were) of one heap trace, counting this block's buffers."""
    live: set[int] = set()
    canonical: dict[int, int] = {}  # buffer -> the buffer whose bytes it holds
    sharing: dict[int, int] = {}  # canonical buffer -> buffers holding its bytes
    held, best_bytes, best_event = 0, 0, -1
    for index, event in enumerate(events):
        buffer_id = event.buffer_id
        if event.kind == _ALLOC and buffer_id in sizes:
            canonical[buffer_id] = buffer_id
            sharing[buffer_id] = 1
            live.add(buffer_id)
            held += sizes[buffer_id]
            if held > best_bytes:
                best_bytes, best_event = held, index
        elif event.kind == _SHARE_WITH:
            owner = canonical.get(event.share_with_canonical_id)
            if owner is not None and owner in live:
                canonical[buffer_id] = owner
                sharing[owner] += 1
        elif event.kind == _FREE and buffer_id in canonical:
            owner = canonical.pop(buffer_id)
            sharing[owner] -= 1
            if sharing[owner] <= 0 and owner in live:
                live.discard(owner)
                held -= sizes[owner]
        if index == stop:
            break
    return live, best_bytes, best_event


def _scheduled_peak(module, buffers, users, instructions, sizes: dict[int, int]) -> set[int]:
    """Of one block's logical buffers (id -> bytes in it), those live together when the most bytes
    are, by the schedule: each from its instruction to the last in its computation that uses it;
    a loop's or a call's computation adds, at the instruction that runs it, what is live at its
    own fullest (a `while`'s body: what one iteration holds at once)."""
    sequences = {item.key: list(item.value.instruction_ids) for item in module.schedule.sequences}
    defined_in = collections.defaultdict(list)  # the sequence's computation -> its buffers in the block
    computation_of = {instruction: key for key, sequence in sequences.items() for instruction in sequence}
    for buffer_id in sizes:
        defined = buffers[buffer_id].defined_at.instruction_id if buffer_id in buffers else -1
        if defined in computation_of:
            defined_in[computation_of[defined]].append((buffer_id, defined))
    fullest: dict[int, tuple[int, frozenset]] = {}

    def peak(computation: int, depth: int) -> tuple[int, frozenset]:
        if computation in fullest or depth > _CALLS_FOLLOWED:
            return fullest.get(computation, (0, frozenset()))
        fullest[computation] = (0, frozenset())  # a computation calling itself adds nothing
        sequence = sequences.get(computation, [])
        position = {instruction: i for i, instruction in enumerate(sequence)}
        spans = []  # (first, last, bytes, buffers)
        for buffer_id, defined in defined_in.get(computation, ()):
            first = position[defined]
            last = max((position[user] for user in _uses(defined, users, instructions) if user in position),
                       default=first)
            spans.append((first, last, sizes[buffer_id], frozenset((buffer_id,))))
        for at, instruction_id in enumerate(sequence):
            instruction = instructions.get(instruction_id)
            if instruction is not None and instruction.opcode != "fusion" and instruction.called_computation_ids:
                inner = max((peak(called, depth + 1) for called in instruction.called_computation_ids),
                            key=lambda found: found[0])
                if inner[0]:
                    spans.append((at, at, inner[0], inner[1]))
        change = collections.defaultdict(int)
        for first, last, size, _ in spans:
            change[first] += size
            change[last + 1] -= size
        held, best_bytes, best_at = 0, 0, -1
        for at in sorted(change):
            held += change[at]
            if held > best_bytes:  # the first moment it holds the most
                best_bytes, best_at = held, at
        live = frozenset().union(*(found for first, last, _, found in spans if first <= best_at <= last))
        fullest[computation] = (best_bytes, live)
        return fullest[computation]

    return set(peak(module.entry_computation_id, 0)[1])


def _uses(instruction_id: int, users, instructions) -> list[int]:
    """The instructions that use a value: all its users, and through those whose result is its
    bytes (a bitcast, a get-tuple-element) theirs: the value lives until the last of them."""
    out = list(users.get(instruction_id, ()))
    queue = [user for user in out if user in instructions and instructions[user].opcode in _ALIASING]
    seen = {instruction_id, *out}
    while queue and len(seen) < _USERS_SEARCHED * 4:
        for user in users.get(queue.pop(), ()):
            if user not in seen:
                seen.add(user)
                out.append(user)
                if user in instructions and instructions[user].opcode in _ALIASING:
                    queue.append(user)
    return out


class _OpNames:
    """An instruction's op in the user's code: its own `op_name`, else its fused computation's
    (the first of its instructions that names one); else, for a copy of one of the program's
    arguments in another layout (a weight transposed for a matrix multiply), that argument's
    (the parameter's `op_name`: JAX's path to it, TensorFlow's `XLA_Args`); else that of the
    nearest instruction using it that names one (a pad XLA put in front of a matrix multiply is
    the multiply's; XLA's lowering of one op, a max pool's gradient, chains instructions that name
    none; a multi-output fusion's values reach their users through `get-tuple-element`)."""

    def __init__(self, instructions, computations, users, entry: int) -> None:
        self.instructions, self.computations, self.users = instructions, computations, users
        self._found: dict[int, str] = {}  # asked for twice for each value live at the peak
        entry_computation = computations.get(entry)
        self.arguments = frozenset(i.id for i in entry_computation.instructions if i.opcode == "parameter") \
            if entry_computation is not None else frozenset()

    def __call__(self, instruction_id: int) -> str:
        if instruction_id not in self._found:
            self._found[instruction_id] = self._find(instruction_id)
        return self._found[instruction_id]

    def _find(self, instruction_id: int) -> str:
        instruction = self.instructions.get(instruction_id)
        if instruction is None:
            return ""
        name = self._own(instruction) or self._argument(instruction)
        queue, seen = collections.deque(self.users.get(instruction_id, ())), {instruction_id}
        while not name and queue and len(seen) < _USERS_SEARCHED:
            user = queue.popleft()
            if user in seen or user not in self.instructions:
                continue
            seen.add(user)
            name = self._own(self.instructions[user])
            queue.extend(self.users.get(user, ()))
        return name

    def _argument(self, instruction) -> str:
        """The argument an instruction only copies or lays out again ("" where it computes)."""
        argument = self.argument_of(instruction)
        return (argument.metadata.op_name or argument.name) if argument is not None else ""

    def argument_of(self, instruction):
        """The program's argument (its `parameter` instruction) that an instruction is, or only copies
        or lays out again; None where it computes."""
        for _ in range(_OPERANDS_FOLLOWED):
            if instruction.opcode == "parameter":  # the program's, not a loop body's or a fusion's
                return instruction if instruction.id in self.arguments else None
            if not (instruction.opcode in _FORWARDING or self._only_forwards(instruction)):
                return None
            operand = instruction.operand_ids[0] if instruction.operand_ids else None
            instruction = self.instructions.get(operand)
            if instruction is None:
                return None
        return None

    def _only_forwards(self, instruction) -> bool:
        """A fusion of one operand whose instructions only pass it on (`wrapped_transpose`)."""
        if instruction.opcode != "fusion" or len(instruction.operand_ids) != 1:
            return False
        for called in instruction.called_computation_ids:
            computation = self.computations.get(called)
            if computation is None or any(inner.opcode not in _FORWARDING and inner.opcode != "parameter"
                                          for inner in computation.instructions):
                return False
        return bool(instruction.called_computation_ids)

    def _own(self, instruction) -> str:
        if instruction.metadata.op_name:
            return instruction.metadata.op_name
        for called in instruction.called_computation_ids:
            computation = self.computations.get(called)
            if computation is not None:
                for inner in computation.instructions:
                    if inner.metadata.op_name:
                        return inner.metadata.op_name
        return ""


def match_blocks(module: Module, requested: list[int], passed_through: bool = False) -> list[Block] | None:
    """Each allocation a run of the program made (their requested bytes, in order) as the block it
    is: the module's blocks of that size, in their order; else, with `passed_through` (TensorFlow's
    programs), an output the program passes through from an argument or a constant (TensorFlow's
    runtime allocates one: Keras' `train_on_batch` compiled with XLA), which holds no op's value.
    None where some allocation is no block of the module (another program's run, or one XLA
    compiled again)."""
    by_size: dict[int, collections.deque] = collections.defaultdict(collections.deque)
    for block in module.blocks:
        by_size[block.size].append(block)
    passed = collections.Counter(module.passed_through if passed_through else ())
    found: list[Block] = []
    for size in requested:
        if by_size.get(size):
            found.append(by_size[size].popleft())
        elif passed[size]:  # an output the runtime copied out of an argument or a constant
            passed[size] -= 1
            found.append(Block(size, True, ()))
        else:
            return None
    return found


# -- names ---------------------------------------------------------------------------------------

# A JAX transformation around a name-stack component: `jvp(dense_0)`, `transpose(jvp(dense_0))`,
# `jit(relu)`, `vmap(block)`, `remat(layer)`, `checkpoint(...)`.
_WRAPPED_RE = re.compile(r"^(?P<transform>[A-Za-z_][\w.]*)\((?P<inner>.*)\)$")
_PROGRAM_RE = re.compile(r"^(?:p?jit|x?pmap|xla_pmap)\((?P<name>[^()]*)\)$")
# Scopes JAX's transformations open that are none of the user's: a lax.scan's loop
# (`while/body`, `while/cond`), Flax's lifted calls (`eval_jaxpr`), jax.checkpoint's
# (`checkpoint`, and `rematted_computation` where the backward pass recomputes).
_PLUMBING = frozenset({"eval_jaxpr", "checkpoint", "rematted_computation"})
_LOOP_PARTS = frozenset({"body", "cond"})


def _components(op_name: str) -> list[str]:
    """`jit(f)/transpose(jvp(a/b))/dot` -> [`jit(f)`, `transpose(jvp(a/b))`, `dot`]: split at the
    slashes outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(op_name):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "/" and depth == 0:
            parts.append(op_name[start:i])
            start = i + 1
    parts.append(op_name[start:])
    return [part for part in parts if part]


@functools.lru_cache(maxsize=1 << 14)
def jax_node_name(op_name: str) -> str:
    """A JAX op's name stack as a node path: `jit(train_step)/transpose(jvp(dense_0))/dot_general`
    -> `dense_0/dot_general_grad`.

    The program's own `jit(...)` in front (and `jit(main)`) goes; transformations around a
    component are unwrapped (`jvp(dense_0)` -> `dense_0`, an inner `jit(relu)` -> `relu`), and
    the scopes of JAX's own plumbing dropped (a scan's `while/body`, `checkpoint`); a
    value of a transposed (backward) component is its op's gradient, named `<op>_grad` as
    TensorFlow names an op's gradient scope, so that it folds into its layer as gradients.
    """
    parts = _components(op_name)
    if parts and _PROGRAM_RE.match(parts[0]):
        parts = parts[1:]
        if parts and parts[0] == "jit(main)":
            parts = parts[1:]
    backward = False
    path: list[str] = []
    last_wrapped: list[str] = []  # the last component a transformation wrapped, unwrapped
    for part in parts:
        wrapped = False
        while (match := _WRAPPED_RE.match(part)) is not None:
            backward = backward or match.group("transform") == "transpose"
            part, wrapped = match.group("inner"), True
        inner = [p for p in part.split("/") if p]
        if wrapped and inner and inner == last_wrapped:
            continue  # a transformation's scope again (remat: `transpose(jvp(block_0))/jvp(block_0)`)
        if wrapped:
            last_wrapped = inner
        elif not all(p in _PLUMBING for p in inner):
            last_wrapped = []  # a scope of the user's between them: `block/vmap(block)` is two
        path.extend(inner)
    path = [p for i, p in enumerate(path) if p not in _PLUMBING and not (
        p == "while" and i + 1 < len(path) and path[i + 1] in _LOOP_PARTS) and not (
        p in _LOOP_PARTS and i > 0 and path[i - 1] == "while")]
    if not path:
        return ""
    if backward:
        path[-1] += "_grad"
    return "/".join(path)


ARGUMENTS = "(arguments)"  # the scope of a JAX program's values named by an argument's path
_TF_ARGUMENTS, _TF_RETURNED = "XLA_Args", "XLA_Retvals"


def node_name(op_name: str, tensorflow: bool = False) -> str:
    """The node a value's op is shown as: a TensorFlow op's name (XLA compiled a tf.function) as
    it is, its arguments' copies as `(arguments)`; a JAX name stack as `jax_node_name` reads it,
    and a JAX value named by the argument it was made from (a weight's copy in another layout:
    `p['conv_1']['kernel']`) in the scope `(arguments)`."""
    if tensorflow:  # the bridge names the program's arguments `XLA_Args`, its returned tuple `XLA_Retvals`
        return ARGUMENTS if op_name.startswith(_TF_ARGUMENTS) else "" if op_name == _TF_RETURNED else op_name
    if _PROGRAM_RE.match(op_name.split("/", 1)[0]):
        return jax_node_name(op_name)
    return f"{ARGUMENTS}/{op_name}" if op_name else ""


class Programs:
    """The compiled programs a profile's metadata plane holds, read when a run asks for them."""

    def __init__(self, hlo_protos: dict[str, bytes]) -> None:
        # `jit_train_step(191835)`: the module's name, then its program id.
        self._protos = hlo_protos
        self._modules: dict[str, Module | None] = {}
        self._found: dict[tuple, tuple[str, list[Block]] | None] = {}  # a program runs every step: matched once

    def __bool__(self) -> bool:
        return bool(self._protos)

    def _module(self, key: str) -> Module | None:
        if key not in self._modules:
            try:
                self._modules[key] = read_module(self._protos[key])
            except HloError:
                self._modules[key] = None
        return self._modules[key]

    def blocks(self, name: str | None, requested: list[int], function: str | None = None) -> list[Block] | None:
        """The blocks of the module one run of a program allocated (requested bytes in order): a
        module of the run's name (JAX's `jit_train_step`), or for TensorFlow's, which name none,
        of any name; of those whose blocks they all are, the one compiled from the tf.function the
        run's allocations name (`__inference_step_263` -> `a_inference_step_263__...`). Several that
        fit and differ, with nothing to tell them apart (two models of one shape), are none: the
        program then stays whole rather than named by another's ops."""
        found = self._matched(name, requested, function)
        return found[1] if found is not None else None

    def shapes(self, name: str | None, requested: list[int], function: str | None = None) -> ProgramShapes | None:
        """The shapes of the module `blocks` finds for the run (None where it finds none)."""
        found = self._matched(name, requested, function)
        return self._module(found[0]).shapes if found is not None else None

    def _matched(self, name: str | None, requested: list[int], function: str | None):
        asked = (name, tuple(requested), function)
        if asked not in self._found:
            self._found[asked] = self._find(name, requested, function)
        return self._found[asked]

    def _find(self, name: str | None, requested: list[int], function: str | None) -> tuple[str, list[Block]] | None:
        fitting = []
        for key in self._protos:
            if name is not None and key.rpartition("(")[0] != name and key != name:
                continue
            module = self._module(key)
            found = match_blocks(module, requested, passed_through=name is None) if module is not None else None
            if found is not None:
                fitting.append((key, found))
        if function:
            stem = function.lstrip("_") + "_"  # `inference_step_263_`: not `inference_step_2630`
            named = [entry for entry in fitting if stem in entry[0]]
            fitting = named or fitting
        if not fitting or any(found != fitting[0][1] for _, found in fitting[1:]):
            return None
        return fitting[0]
