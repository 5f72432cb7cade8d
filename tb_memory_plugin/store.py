"""Traced steps and run graphs, read only through a TensorBoard DataProvider.

Works with the multiplexer-backed provider (`--load_fast=false`) and the Rust
data server (`--load_fast=true`); the CLI builds the same provider over a
logdir. Analysed steps are kept in a bounded, thread-safe LRU.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import gc
import os
import posixpath
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from tensorboard.data import provider as provider_mod

from . import analysis, function_graph, graph as graph_mod, trace as trace_mod
from .sources import run_metadata, xplane

TAGGED_RUN_METADATA = "graph_tagged_run_metadata"
RUN_METADATA = "graph_run_metadata"  # TF2 trace_export / Keras; plugin content b"1"
RUN_METADATA_GRAPH = "graph_run_metadata_graph"  # the same, with graph=True (Keras' profile_batch `batch_N`)
GRAPHS = "graphs"
KERAS_MODEL = "graph_keras_model"  # the Keras callback's model config (JSON), tag `keras`
RUN_GRAPH_TAG = "__run_graph__"
PROFILE = "xplane"  # StepRef.plugin of a profiled step: read from a `.xplane.pb`, not the data provider
PROFILE_DIR = ("plugins", "profile")  # <run>/plugins/profile/<session>/<host>.xplane.pb
PROFILE_SUFFIX = ".xplane.pb"
OLD_PROFILE_SUFFIX = ".trace.json.gz"  # what the profiler wrote before TensorFlow 2.5 (no XSpace)
_PROFILE_SCAN_SECONDS = 10.0  # how long one walk of the logdir for profiles is trusted
PROFILE_CACHE_BYTES = 256 << 20  # the decoded profiles kept, by their files' sizes (`StepStore._profiles`)


@dataclass(frozen=True)
class StepRef:
    run: str
    tag: str
    plugin: str
    step: int
    wall_time: float
    path: str = ""  # a profiled step's `.xplane.pb`
    index: int = -1  # its position among the profile's steps; -1: the profile as a whole (no steps)
    function: str | None = None  # an unmarked profiled step's tf.function (xplane.ProfileStep.function)

    @property
    def source(self) -> str:
        return "xplane" if self.plugin == PROFILE else "run_metadata"


class LRUCache:
    """A small thread-safe LRU; values are computed outside the lock, once per key.

    The page asks for a step's summary, scopes, curve and graph at once: the
    first request computes the analysis and the others wait for it instead
    of each decoding the same blob (they would only slow each other down).
    """

    def __init__(self, capacity: int, weigh: Callable[[Hashable], int] | None = None, budget: int = 0) -> None:
        """capacity: how many values at most; weigh, budget: where given, the values' weights (by key)
        are kept within the budget too (the most recent value is kept whatever it weighs)."""
        self._capacity = capacity
        self._weigh = weigh
        self._budget = budget
        self._weight = 0
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
                weigh = self._weigh
                if weigh is not None:
                    self._weight += weigh(key)
                while len(self._items) > self._capacity or (
                        weigh is not None and self._weight > self._budget and len(self._items) > 1):
                    oldest, _ = self._items.popitem(last=False)
                    if weigh is not None:
                        self._weight -= weigh(oldest)
            return value
        finally:
            with self._lock:
                del self._pending[key]
            done.set()

    def __len__(self) -> int:
        return len(self._items)


_FUNCTION_RUN_RE = re.compile(r"^profile/.+/run_\d+(?:_\d+)?$")  # `_step_tags`' unmarked function runs


def is_function_run(tag: str) -> bool:
    """Whether a tag is a profile's unmarked function run (`profile/<session>/run_3`, `_step_tags`),
    not a step the profiler was told of (`step_3`) nor a TF1 tag of the user's own."""
    return bool(_FUNCTION_RUN_RE.match(tag))


def latest_step(refs: list[StepRef], devices_of: Callable[[StepRef], list[str]] | None = None) -> StepRef:
    """A run's latest step as the page picks it: a marked step before a profile's unmarked function
    run (a fit's epoch-end iterator set-up, `run_3`, had been opened before its batches' `step_3`),
    then a profile's step before a record of the run's own; of profile steps the last to run (a fit
    numbers its batches within each epoch: the next epoch's `step_1` ran after `step_4`), of the
    others the highest step; then latest wall time, then last tag. With `devices_of` (the `runs`
    route's devices of a step), first among the steps that hold any. A record without step stats is
    no step to open: the Keras callback's `batch_N` graph record (TensorFlow strips the step stats
    from it) is written after the profiled steps."""
    def newest(pair):
        position, ref = pair
        profiled = ref.plugin == PROFILE
        first, second = (ref.wall_time, ref.step) if profiled else (ref.step, ref.wall_time)
        return not is_function_run(ref.tag), profiled, first, second, position

    newest_first = [ref for _, ref in sorted(enumerate(refs), key=newest, reverse=True)]
    if devices_of is not None:  # asked newest first, so a run's steps are scanned only as far as needed
        return next((ref for ref in newest_first if devices_of(ref)), newest_first[0])
    return newest_first[0]


def matching_step(refs: list[StepRef], like: StepRef,
                  devices_of: Callable[[StepRef], list[str]] | None = None) -> StepRef:
    """Another run's step to read beside `like` (a what-if fit): the same tag; else a step of
    the same source with the same step number (the Keras callback names each run's
    profile after its own session); else that source's latest step; else the latest step.
    With `devices_of`, a step that holds none (the Keras callback's empty `batch_N` record) is
    no step of its source to take: a step-stats step fitted with a Keras run had read that
    record, and failed, rather than the run's profiled step."""
    for ref in refs:
        if ref.tag == like.tag:
            return ref
    same_source = [ref for ref in refs if ref.source == like.source]
    for ref in same_source:
        if ref.step == like.step and (devices_of is None or devices_of(ref)):
            return ref
    chosen = latest_step(same_source or refs, devices_of)  # asked lazily, newest first
    if devices_of is not None and same_source and not devices_of(chosen):
        chosen = latest_step(refs, devices_of)
    return chosen


def tag_order(tag: str) -> tuple:
    """A tag's place among its run's: numbers in it by value (`step_8` before `step_12`), compared
    as digits (any length), the tag itself last (`step_8` before `step_08`)."""
    parts = re.split(r"([0-9]+)", tag)
    key: list = []
    for i, part in enumerate(parts):
        if i % 2:
            digits = part.lstrip("0")
            key.append((len(digits), digits))
        else:
            key.append(part)
    return tuple(key), tag


def siblings(refs: list[StepRef], ref: StepRef, limit: int) -> list[StepRef]:
    """The other steps of `ref`'s profile (one `.xplane.pb`, read at once: each step costs little
    more), marked alike (steps, or function runs), or of its TF1 run (its other traced steps, each a
    record of its own to read: the few nearest), nearest to it in the run's order first (at most
    `limit`): what the what-if compares its step's peak with (trial X's run traced with and without a
    checkpoint save beside the train op, 2.2 times apart, had been read from one, unsaid)."""
    if ref.plugin != PROFILE:
        same = [other for other in refs if other.plugin != PROFILE]
    else:
        session, marked = ref.tag.rpartition("/")[0], is_function_run(ref.tag)
        same = [other for other in refs if other.plugin == PROFILE and other.tag.rpartition("/")[0] == session
                and is_function_run(other.tag) == marked]
    at = next((i for i, other in enumerate(same) if other == ref), None)
    if at is None:
        return []
    nearest = sorted((abs(i - at), i) for i, other in enumerate(same) if i != at)
    return [same[i] for _, i in nearest[:limit]]


def record_order(ref: StepRef) -> tuple:
    """A TF1 run's traced step's place among its run's: as written, by the step it was written at, then when,
    then `tag_order` (a train step and an eval step traced at each of steps 2 and 3 list `train_2, eval_2,
    train_3, eval_3`, not `eval_2, eval_3, train_2, train_3`)."""
    return ref.step, ref.wall_time, tag_order(ref.tag)


def step_order(ref: StepRef) -> tuple:
    """A step's place among its run's: a profile's steps first, each profile's by its name, then as they ran
    (a fit profiled across an epoch's end: `step_2`, its validation's `run_4`, then the next
    epoch's `step_0_2`), not by number; then the run's traced steps as written (`record_order`)."""
    if ref.plugin == PROFILE:  # a profile's steps: one profile's name, then its order (-1: the profile whole)
        return 0, tag_order(ref.tag.rpartition("/")[0] if ref.index >= 0 else ref.tag), ref.index
    return 1, record_order(ref)


def list_steps(data_provider, ctx, experiment_id: str) -> dict[str, list[StepRef]]:
    """Runs -> traced steps (tags) in event files, runs by `tag_order`, each run's steps as written
    (`record_order`)."""
    runs: dict[str, dict[str, StepRef]] = {}
    for plugin in (TAGGED_RUN_METADATA, RUN_METADATA, RUN_METADATA_GRAPH):
        mapping = data_provider.list_blob_sequences(ctx, experiment_id=experiment_id, plugin_name=plugin)
        for run, tags in mapping.items():
            for tag, series in tags.items():
                if plugin != TAGGED_RUN_METADATA and series.plugin_content != b"1":
                    continue  # an unknown version of summary-written RunMetadata
                runs.setdefault(run, {}).setdefault(
                    tag, StepRef(run, tag, plugin, int(series.max_step), float(series.max_wall_time)))
    return in_run_order({run: sorted(tags.values(), key=record_order) for run, tags in runs.items()})


def in_run_order(runs: dict) -> dict:
    """Runs ordered as tags are, numbers in their names by value: a sweep's `b4, b8, b16, b32`, not
    `b16, b32, b4, b8`."""
    return dict(sorted(runs.items(), key=lambda item: tag_order(item[0])))


def runs_with_graph(data_provider, ctx, experiment_id: str) -> set[str]:
    """Runs with a graph to show: an `add_graph` GraphDef, or the Keras callback's model config."""
    mapping = data_provider.list_blob_sequences(ctx, experiment_id=experiment_id, plugin_name=GRAPHS)
    keras = data_provider.list_blob_sequences(ctx, experiment_id=experiment_id, plugin_name=KERAS_MODEL)
    return ({run for run, tags in mapping.items() if RUN_GRAPH_TAG in tags}
            | {run for run, tags in keras.items() if any(series.plugin_content == b"1" for series in tags.values())})


def _latest_blob(data_provider, ctx, experiment_id, plugin, run, tag) -> tuple[str, float] | None:
    """(the blob key of the tag's latest record, its wall time), or None. A data provider's blob key names
    the record's place (run, tag, step), not its bytes: a step traced again under the same tag and step
    (a script run again into its run's directory) has the same key, and a later wall time, so caches key
    on both (trial AD's re-traced run had kept showing its first step, and the graph of one read beside
    the edges of the other had failed)."""
    sequences = data_provider.read_blob_sequences(
        ctx, experiment_id=experiment_id, plugin_name=plugin,
        run_tag_filter=provider_mod.RunTagFilter(runs=[run], tags=[tag]), downsample=1)
    data = sequences.get(run, {}).get(tag, ())
    if not data or not data[-1].values:
        return None
    return data[-1].values[0].blob_key, float(data[-1].wall_time)


# -- profiles (.xplane.pb) ----------------------------------------------------------------


def _gfile():
    from tensorboard.compat import tf  # TensorFlow's file systems when installed, else TensorBoard's stub

    return tf.io.gfile


def _read_bytes(path: str) -> bytes:
    """A file's bytes: a local one read directly (TensorFlow's GFile reads a 10 MiB profile 7x slower,
    12 ms against 1.7), a remote one (`gs://`, `s3://`) through TensorFlow's file systems."""
    if "://" not in path:
        with open(path, "rb") as f:
            return f.read()
    with _gfile().GFile(path, "rb") as f:
        return f.read()


def _join(directory: str, name: str) -> str:
    return posixpath.join(directory, name) if "://" in directory else os.path.join(directory, name)


def _relative(path: str, root: str) -> str:
    if "://" not in root:
        return os.path.relpath(path, root)
    return path[len(root):].strip("/") or "."


def find_profiles(logdir: str) -> dict[str, list[str]]:
    """Run -> its `.xplane.pb` files, for every `<run>/plugins/profile/<session>/` under the logdir.

    The run is the directory above `plugins/profile`, named by its path under
    the logdir as TensorBoard names runs (`.` for the logdir itself), whether
    or not it holds event files (`tf.profiler.experimental.start` writes none).
    """
    gfile = _gfile()
    found: dict[str, list[str]] = {}
    if not logdir or not gfile.isdir(logdir):
        return found
    for directory, _, files in walk(logdir):
        # An old profiler's session (TensorFlow 2.2-2.4: `<host>.trace.json.gz`, no XSpace) is listed too, to
        # say what it is rather than nothing (trial AD's had left the page saying no step was traced).
        profiles = (sorted(f for f in files if f.endswith(PROFILE_SUFFIX))
                    or sorted(f for f in files if f.endswith(OLD_PROFILE_SUFFIX))[:1])
        if not profiles:
            continue
        parts = directory.rstrip("/").replace("\\", "/").split("/")
        if len(parts) < 3 or tuple(parts[-3:-1]) != PROFILE_DIR:
            continue
        run_dir = directory.rstrip("/")[: -len("/".join(parts[-3:]))].rstrip("/") or "/"
        run = _relative(run_dir, logdir.rstrip("/") or "/") if len(run_dir) >= len(logdir.rstrip("/")) else "."
        found.setdefault(run, []).extend(_join(directory, f) for f in profiles)
    return found


def walk(top: str):
    """(directory, subdirectories, files) under `top`, as `os.walk`: a directory that cannot be read is
    left out, not the walk (trial AD's one unreadable run had hidden every profiled run), and a local
    symbolic link back to a directory on the way down to it is not followed (a link to an ancestor had
    listed 240 runs `looprun/up/looprun/up/...`; TensorBoard's own reader skips such a loop too). Other
    links to directories are followed, as TensorBoard follows them: an alias of a run (`latest -> run_17`)
    is listed beside it, as TensorBoard lists it."""
    if "://" in top:
        try:
            yield from _gfile().walk(top, onerror=lambda error: None)
        except TypeError:  # TensorBoard's stub of TensorFlow's file systems takes no `onerror`
            yield from _gfile().walk(top)
        return
    top = top.rstrip(os.sep) or os.sep
    real_of: dict[str, str] = {}
    for directory, subdirectories, files in os.walk(top, followlinks=True):
        real_of[directory] = os.path.realpath(directory)
        on_the_way = set()  # the real directories from the top down to this one
        path = directory
        while True:
            on_the_way.add(real_of.get(path) or os.path.realpath(path))
            if path == top or len(path) <= len(top):
                break
            path = os.path.dirname(path)
        subdirectories[:] = [name for name in subdirectories
                             if not (os.path.islink(os.path.join(directory, name))
                                     and os.path.realpath(os.path.join(directory, name)) in on_the_way)]
        yield directory, subdirectories, files


def find_profiles_in_spec(logdir_spec: str) -> dict[str, list[str]]:
    """`find_profiles` over each directory of TensorBoard's `--logdir_spec`
    (`name:path,...`), runs named as TensorBoard names that directory's runs
    (`<name>/<run>`, or the run alone for a path given without a name). Parsed
    by TensorBoard's own parser; none where that is not there."""
    try:
        from tensorboard.backend.event_processing.data_ingester import _parse_event_files_spec
    except ImportError:  # a TensorBoard without it: event files still list
        return {}
    found: dict[str, list[str]] = {}
    for path, name in _parse_event_files_spec(logdir_spec).items():
        for run, files in find_profiles(os.path.expanduser(path)).items():
            found.setdefault(posixpath.join(name, run) if name else run, []).extend(files)
    return found


@dataclass
class _ProfileListing:
    """What the pickers show of one profile file (kept for good: small)."""

    refs: list[StepRef]
    failure: tuple[str, str] | None  # (status, message) when the file gives no steps
    devices: list[list[str]]  # per step
    # Where the file could not be read (its permissions, a network file system): when to try again, as a
    # file's length and path stay the same once it can be (trial AD's had stayed failed until a restart).
    retry_at: float | None = None


def _profile_name(path: str, sessions: dict[str, int]) -> str:
    """`profile/<session>`, with `/<host>` when the session holds several hosts' files."""
    session_dir, file_name = posixpath.split(path.replace("\\", "/"))
    session = posixpath.basename(session_dir)
    host = file_name[: -len(PROFILE_SUFFIX)]
    return f"profile/{session}/{host}" if sessions.get(session_dir, 0) > 1 else f"profile/{session}"


def _step_tags(profile: xplane.Profile) -> list[tuple[str, int]]:
    """(tag suffix, step number) per profiled step: `step_<n>` with the profiler's step number, else
    `run_<k>` by order; repeats get `_2`, `_3`."""
    seen: collections.Counter = collections.Counter()
    tags = []
    for k, step in enumerate(profile.steps, start=1):
        base = f"step_{step.number}" if step.number is not None else f"run_{k}"
        seen[base] += 1
        tags.append((base if seen[base] == 1 else f"{base}_{seen[base]}",
                     step.number if step.number is not None else k))
    return tags


class StepStore:
    """Reads and analyses steps for one data provider (and the profiles under its logdir), with caches."""

    def __init__(self, data_provider, step_capacity: int = 16, graph_capacity: int = 8,
                 logdir: str | None = None, profile_capacity: int = 64, only_run: str | None = None,
                 logdir_spec: str | None = None, own_run_name: str | None = None) -> None:
        self._provider = data_provider
        # Blobs from TensorBoard's Rust data server (--load_fast) come over gRPC (~0.15 s for a
        # 26 MB graph): reading the run graph while the step is decoded overlaps the two. The
        # multiplexer's are in this process's memory already: a copy, nothing to overlap, and a
        # big step is better decoded after the graph's bytes are dropped (peak memory).
        self._reads_over_the_wire = not _in_process(data_provider)
        self._only_run = only_run  # the CLI's --run: profiles of other runs are not even read
        # What the CLI calls a run in the logdir itself (its directory's name); TensorBoard: `.`.
        self._own_run_name = own_run_name
        # The logdir TensorBoard was given; the CLI's provider keeps it as `_logdir`.
        self._logdir = logdir if logdir is not None else getattr(data_provider, "_logdir", None)
        self._logdir_spec = logdir_spec if not self._logdir else None  # `--logdir_spec` instead of a logdir
        self._steps = LRUCache(step_capacity)
        self._graphs = LRUCache(graph_capacity)
        self._devices = LRUCache(1 << 16)  # a few names per step: every step of a big logdir (200 runs x 10 steps)
        # Decoded profiles (their memory events as columns, about their file's size), within a budget of
        # their files' bytes: listing the runs decodes every profile, and the page's first question (the
        # default step) analyses the latest step of each run; two kept had decoded 21 runs' profiles twice.
        self._profiles = LRUCache(profile_capacity, weigh=lambda key: max(key[2], 0), budget=PROFILE_CACHE_BYTES)
        self._listings: dict[tuple[str, int], _ProfileListing] = {}
        self._listing_lock = threading.Lock()
        self._scan: tuple[float, dict[str, list[str]]] | None = None

    def list_steps(self, ctx, experiment_id: str) -> dict[str, list[StepRef]]:
        runs = list_steps(self._provider, ctx, experiment_id)
        only = self._only_run
        if only is not None:  # the CLI's --run: its provider may hold the `train` run below, for its graph
            own = {".", self._own_run_name} if only in (".", self._own_run_name) else {only}
            runs = {run: refs for run, refs in runs.items() if run in own}
        profiled = self._profile_steps(set(runs))
        for run, refs in profiled.items():
            runs[run] = sorted(runs.get(run, []) + refs, key=step_order)
        return in_run_order(runs)

    def has_profiles(self) -> bool:
        return bool(self._profile_paths())

    def _profile_paths(self) -> dict[str, list[str]]:
        """Run -> profile files under the logdir, walked at most every few seconds."""
        now = time.monotonic()
        scan = self._scan
        if scan is None or now - scan[0] > _PROFILE_SCAN_SECONDS:
            try:
                found = (find_profiles(self._logdir) if self._logdir
                         else find_profiles_in_spec(self._logdir_spec) if self._logdir_spec else {})
            except Exception:  # noqa: BLE001 - an unreadable logdir has no profiles; event files still list
                found = {}
            scan = self._scan = (now, found)
        return scan[1]

    def _profile_steps(self, event_runs: set[str], only: str | None = None) -> dict[str, list[StepRef]]:
        """Run -> its profiled steps (of `only`, else of the CLI's --run where given, else all runs)."""
        found = self._profile_paths()
        only = self._only_run if only is None else only
        own_name = self._own_run_name
        sessions = collections.Counter(posixpath.dirname(p.replace("\\", "/")) for paths in found.values()
                                       for p in paths)
        out: dict[str, list[StepRef]] = {}
        for run, paths in found.items():
            if run == "." and own_name and "." not in event_runs:
                run = own_name  # the CLI names a logdir that is itself the only run by its directory
            if only is not None and run != only and not (run == own_name and only == "."):
                continue
            for path in paths:
                out.setdefault(run, []).extend(self._listing(run, path, sessions).refs)
        return out

    def _listing(self, run: str, path: str, sessions) -> _ProfileListing:
        try:
            length = int(_gfile().stat(path).length)
        except Exception:  # noqa: BLE001 - vanished or unreadable: listed, and analysis says why
            length = -1
        key = (path, length)
        with self._listing_lock:
            listing = self._listings.get(key)
        if (listing is not None and (not listing.refs or listing.refs[0].run == run)
                and (listing.retry_at is None or time.monotonic() < listing.retry_at)):
            return listing
        name = _profile_name(path, sessions)
        wall_time = 0.0
        retry_at = None
        try:
            if path.endswith(OLD_PROFILE_SUFFIX):
                raise trace_mod.TraceDecodeError(
                    f"{posixpath.basename(path)} is an old profiler's trace (TensorFlow 2.2-2.4), with no memory "
                    "events this tool reads: profile the step again with TensorFlow 2.5 or later, which writes "
                    f"`<host>{PROFILE_SUFFIX}`")
            profile = self._profile(path, length)
        except trace_mod.TraceDecodeError as exc:
            failure = ("corrupt", f"{name}: {exc}")
        except Exception as exc:  # noqa: BLE001 - one unreadable file must not hide the other runs
            failure = ("corrupt", f"{name}: cannot read {path}: {exc}")
            retry_at = time.monotonic() + _PROFILE_SCAN_SECONDS
        else:
            failure = None if profile.steps else ("no_memory", f"{name}: {profile.message or xplane.NO_MEMORY_HELP}")
        if failure is not None:
            listing = _ProfileListing([StepRef(run, name, PROFILE, 0, wall_time, path, -1)], failure, [[]],
                                      retry_at)
        else:
            refs = []
            for index, (suffix, number) in enumerate(_step_tags(profile)):
                step = profile.steps[index]
                wall_time = (profile.start_ns / 1e9 + step.start_ps / 1e12) if profile.start_ns else 0.0
                refs.append(StepRef(run, f"{name}/{suffix}", PROFILE, number, wall_time, path, index, step.function))
            listing = _ProfileListing(refs, None, [list(step.devices) for step in profile.steps])
        with self._listing_lock:
            self._listings[key] = listing
        return listing

    def _profile(self, path: str, length: int) -> xplane.Profile:
        def load():
            data = _read_bytes(path)
            with gc_paused():
                return xplane.decode(data)

        return self._profiles.get_or_compute(("profile", path, length), load)

    def _profile_analysis(self, ref: StepRef, graph_ops=None) -> analysis.StepAnalysis:
        found = self._listing_of(ref)
        if found is None:
            return analysis.failed_step("empty", f"{ref.tag}: the profile {ref.path} is no longer listed", "xplane")
        (path, length), listing = found
        if listing.failure is not None:
            return analysis.failed_step(*listing.failure, "xplane")
        try:
            profile = self._profile(path, length)
            with gc_paused():
                return analysis.analyse(profile.trace(ref.index), graph_ops)
        except Exception as exc:  # noqa: BLE001 - changed or unreadable since it was listed
            return analysis.failed_step("corrupt", f"{ref.tag}: cannot read {ref.path}: {exc}", "xplane")

    def _point_to_profile(self, ctx, experiment_id: str, ref: StepRef,
                          step: analysis.StepAnalysis) -> analysis.StepAnalysis:
        """An empty RunMetadata record (Keras' `batch_N`) in a run with a profile, or whose parent run
        has one (older Keras writes the record in `<log_dir>/train`, the profile in `<log_dir>`): say
        where the memory is."""
        if step.status != "empty":
            return step
        listed = self.list_steps(ctx, experiment_id)
        # The run above (the CLI names a logdir that is itself a run by its directory's name).
        parent = ref.run.rpartition("/")[0] or ("." if "." in listed else self._own_run_name or ".")
        for run in (ref.run, parent):
            refs = listed.get(run)
            if refs is None and self._only_run is not None:  # the CLI's --run: the run above is not listed
                refs = self._profile_steps(set(listed), only=run).get(run)
            profiled = [r.tag for r in refs or () if r.plugin == PROFILE]
            if profiled:
                break
        else:
            return step
        shown = ", ".join(profiled[:4]) + (f" and {len(profiled) - 4} more" if len(profiled) > 4 else "")
        where = "run's profile" if run == ref.run else f"profile of the run {run}"
        pointer = analysis.failed_step(
            "empty", f"This record holds no step stats: TF2 and Keras keep a profiled step's memory in the "
                     f"{where}. Open {shown}.")
        pointer.beside_profile = True
        return pointer

    def runs_with_graph(self, ctx, experiment_id: str) -> set[str]:
        return runs_with_graph(self._provider, ctx, experiment_id)

    def run_graph(self, ctx, experiment_id: str, run: str) -> graph_mod.RunGraph | None:
        """The run's `add_graph` GraphDef; else its function graphs or Keras model config
        (`function_graph_of`); else, for a run whose `train` run below holds one (tf_keras' callback
        writes its profile in `<log_dir>`, its events in `<log_dir>/train`), that run's; or None. A
        corrupt graph counts as none."""
        graph = self._own_run_graph(ctx, experiment_id, run)
        if graph is None:
            below = self._train_run_below(ctx, experiment_id, run)
            if below is not None:
                graph = self._own_run_graph(ctx, experiment_id, below)
        return graph

    def _train_run_below(self, ctx, experiment_id: str, run: str) -> str | None:
        """The `train` run below `run` (`run/train`; `train` where `run` is the logdir itself), where
        one is listed."""
        root = run == "." or (self._own_run_name is not None and run == self._own_run_name)
        names = {r.run_name for r in self._provider.list_runs(ctx, experiment_id=experiment_id)}
        for below in (f"{run}/train", "train" if root else None):
            if below is not None and below in names:
                return below
        return None

    def _own_run_graph(self, ctx, experiment_id: str, run: str) -> graph_mod.RunGraph | None:
        latest = _latest_blob(self._provider, ctx, experiment_id, GRAPHS, run, RUN_GRAPH_TAG)
        if latest is None:
            return self.function_graph_of(ctx, experiment_id, run)
        key = latest[0]

        def load():
            try:
                data = self._provider.read_blob(ctx, blob_key=key)
                with gc_paused():
                    # TensorBoard holds the bytes: read again, not kept, after the model is read.
                    graph = graph_mod.RunGraph.from_bytes(
                        data, reload=lambda: self._provider.read_blob(ctx, blob_key=key))
                    del data
                    graph.model  # noqa: B018 - read now: a big graph's bytes go before a step is decoded
                    return graph
            except Exception:  # noqa: BLE001 - a bad graph must not break the memory view
                return None

        graph = self._graphs.get_or_compute(("graph", experiment_id, run, latest), load)
        if graph is not None and graph.model is not None and not graph.model.tensors:
            # A TF2 function's GraphDef (tf_keras' callback writes one beside its model config) takes
            # its variables as arguments, and names none: the model config sizes them.
            sized = self.function_graph_of(ctx, experiment_id, run)
            if sized is not None and sized.model is not None and sized.model.tensors:
                return sized
        return graph

    def _graph_ops(self, ctx, experiment_id: str, run: str) -> dict[str, str] | None:
        """The run graph's op types, for a profiled step's names whose op events the profile lacks."""
        try:
            graph = self.run_graph(ctx, experiment_id, run)
        except Exception:  # noqa: BLE001 - op types are a nicety: the op events give most
            return None
        return graph.op_types if graph is not None else None

    def function_graph_of(self, ctx, experiment_id: str, run: str) -> function_graph.FunctionGraph | None:
        """A TF2 / Keras run's graph (function_graph.py): the Keras callback's model config, else the
        function graphs of its latest RunMetadata record that holds any (`trace_export`); None
        without. The callback's own `batch_N` records hold whatever functions were traced while it
        profiled (a new epoch's, a validation's, a last small batch's), not the model."""
        candidates = []
        for rank, plugin in enumerate((RUN_METADATA_GRAPH, RUN_METADATA, KERAS_MODEL)):
            mapping = self._provider.list_blob_sequences(
                ctx, experiment_id=experiment_id, plugin_name=plugin,
                run_tag_filter=provider_mod.RunTagFilter(runs=[run]))
            for tag, series in mapping.get(run, {}).items():
                if series.plugin_content == b"1":
                    candidates.append((plugin != KERAS_MODEL, -float(series.max_wall_time), rank, tag, plugin))
        for *_, tag, plugin in sorted(candidates):
            latest = _latest_blob(self._provider, ctx, experiment_id, plugin, run, tag)
            if latest is None:
                continue
            key = latest[0]
            read = function_graph.from_keras_config if plugin == KERAS_MODEL else function_graph.from_run_metadata

            def load(key=key, read=read):
                try:
                    with gc_paused():
                        return read(self._provider.read_blob(ctx, blob_key=key))
                except Exception:  # noqa: BLE001 - a bad record must not break the memory view
                    return None

            found = self._graphs.get_or_compute(("function_graph", experiment_id, run, plugin, tag, latest), load)
            if found is not None:
                return found
        return None

    def step_devices(self, ctx, experiment_id: str, ref: StepRef) -> list[str]:
        return self.steps_devices(ctx, experiment_id, [ref])[ref]

    def steps_devices(self, ctx, experiment_id: str, refs: list[StepRef]) -> dict[StepRef, list[str]]:
        """`step_devices` of many steps (the runs route's every step): their latest records found in one
        read per plugin rather than one per step, and the blobs not yet scanned read a few at a time. Over
        TensorBoard's Rust data server each read is a call: trial AD's 200 runs (600 steps) had taken 27 s
        to list cold, 1,200 calls one after the other."""
        out = {ref: self._profile_devices(ref) for ref in refs if ref.plugin == PROFILE}
        recorded = [ref for ref in refs if ref.plugin != PROFILE]
        latest: dict[StepRef, tuple[str, float] | None] = {}
        for plugin in sorted({ref.plugin for ref in recorded}):
            mine = [ref for ref in recorded if ref.plugin == plugin]
            sequences = self._provider.read_blob_sequences(
                ctx, experiment_id=experiment_id, plugin_name=plugin, downsample=1,
                run_tag_filter=provider_mod.RunTagFilter(runs={ref.run for ref in mine}, tags={ref.tag for ref in mine}))
            for ref in mine:
                data = sequences.get(ref.run, {}).get(ref.tag, ())
                latest[ref] = ((data[-1].values[0].blob_key, float(data[-1].wall_time))
                               if data and data[-1].values else None)

        def devices_of(key: tuple[str, float]) -> list[str]:
            def scan() -> list[str]:
                try:
                    return run_metadata.scan_devices(self._provider.read_blob(ctx, blob_key=key[0]))
                except Exception:  # noqa: BLE001 - one record TensorBoard cannot hand over lists no device, no more
                    return []

            return self._devices.get_or_compute(key, scan)

        keys = sorted({key for key in latest.values() if key is not None})
        # Over the wire a few at a time, in threads of their own (a summary's run graph read in the prefetch
        # threads meanwhile does not wait behind them); in process one at a time: a blob is a copy there,
        # nothing to overlap, and a few big steps' bytes held at once would only raise the peak.
        scan = _pool("scan").map if self._reads_over_the_wire and len(keys) > 1 else map
        found = dict(zip(keys, scan(devices_of, keys)))
        out.update((ref, found[latest[ref]] if latest[ref] is not None else []) for ref in recorded)
        return out

    def _profile_devices(self, ref: StepRef) -> list[str]:
        listing = self._listing_of(ref)
        return list(listing[1].devices[ref.index]) if listing and listing[1].failure is None else []

    def _listing_of(self, ref: StepRef) -> tuple[tuple[str, int], _ProfileListing] | None:
        with self._listing_lock:
            for key, listing in self._listings.items():
                if key[0] == ref.path and ref in listing.refs:
                    return key, listing
        return None

    def analysis(self, ctx, experiment_id: str, ref: StepRef) -> analysis.StepAnalysis:
        """The analysed step (cached by blob); corrupt bytes give a `corrupt` status."""
        if ref.plugin == PROFILE:
            return self._steps.get_or_compute(
                ("profile", ref.path, ref.index, ref.tag),
                lambda: self._profile_analysis(ref, self._graph_ops(ctx, experiment_id, ref.run)))
        latest = _latest_blob(self._provider, ctx, experiment_id, ref.plugin, ref.run, ref.tag)
        cache_key = ("step", experiment_id, ref.run, ref.tag, latest)

        def compute():
            if latest is None:
                return analysis.failed_step("empty", "This tag holds no RunMetadata blob.")
            key = latest[0]

            def read() -> bytes:
                # Read by the decoder itself, which drops the bytes once parsed (a big step's bytes and their
                # parsed copy are not held together). A record TensorBoard cannot hand over is this step's
                # failure alone (trial AF: its Rust data server refuses the blob key of a run named with a `"`).
                try:
                    return self._provider.read_blob(ctx, blob_key=key)
                except Exception as exc:  # noqa: BLE001
                    raise trace_mod.TraceDecodeError(
                        f"TensorBoard could not hand over this step's record ({type(exc).__name__}: {exc})") from None

            if self._reads_over_the_wire:  # the run graph is read in a thread while the step is read and decoded
                return analyse_bytes(read, _pool("read").submit(self.run_graph, ctx, experiment_id, ref.run).result)
            return analyse_bytes(read, self.run_graph(ctx, experiment_id, ref.run))

        step = self._steps.get_or_compute(cache_key, compute)
        return self._point_to_profile(ctx, experiment_id, ref, step)


def _in_process(provider) -> bool:
    """Whether the provider is TensorBoard's multiplexer (blobs in this process's memory). Its module
    is not imported here: a provider made by it has imported it already (the CLI avoids the import
    where it can, for start-up time)."""
    module = sys.modules.get("tensorboard.backend.event_processing.data_provider")
    return module is not None and isinstance(provider, module.MultiplexerDataProvider)


_POOLS: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(name: str) -> concurrent.futures.ThreadPoolExecutor:
    """Four threads of their own per use, made on first use: `read` reads run graphs while steps are decoded
    (the page asks for a few steps at once); `scan` reads steps' blobs for their devices over the wire
    (`steps_devices`), so a summary's graph read does not wait behind a cold runs listing."""
    with _POOLS_LOCK:
        if name not in _POOLS:
            _POOLS[name] = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"tb-memory-{name}")
        return _POOLS[name]


def analyse_bytes(data: bytes | Callable[[], bytes],
                  graph: graph_mod.RunGraph | None | Callable[[], graph_mod.RunGraph | None] = None
                  ) -> analysis.StepAnalysis:
    """Decode and analyse one serialized RunMetadata (the CLI, routes and tests share this);
    `data` may be a function that reads the bytes (see run_metadata.decode), `graph` one
    that returns the run graph once the step is decoded (a graph still being read)."""
    with gc_paused():
        try:
            decoded = run_metadata.decode(data)
        except trace_mod.TraceDecodeError as exc:
            return analysis.failed_step("corrupt", str(exc))
        if callable(graph):
            graph = graph()
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
