"""A logdir read for the CLI: TensorBoard's own loader, only the runs asked for,
and no TensorFlow for local paths.

TensorBoard resolves `tensorboard.compat.tf` to TensorFlow whenever it is
installed (seconds to import); for local files its own stub (pure-Python
gfile and record reader) reads the same event files. Remote logdirs
(`gs://`, `s3://`, ...) keep TensorFlow's file systems.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import types

import numpy as np

# Optional backends the stub's gfile imports for remote paths only (boto3 alone takes ~0.5 s).
_REMOTE_BACKENDS = ("boto3", "botocore", "botocore.exceptions", "fsspec")
# The module whose presence makes `tensorboard.compat.tf` resolve to the stub (TensorBoard's no-TF build).
_NO_TF_MARKER = "tensorboard.compat.notf"


def is_remote(path: str) -> bool:
    return "://" in path


def use_tensorflow_stub() -> bool:
    """Make TensorBoard read files through its stub instead of TensorFlow; True when the stub is in use.

    Leaves things as they are once `tensorboard.compat.tf` is resolved or
    TensorFlow is already imported (its cost is paid; others in the process
    may rely on it).
    """
    import tensorboard.compat as compat

    lazy_tf = compat.tf
    if "__version__" in vars(lazy_tf):  # already resolved
        return lazy_tf.__version__ == "stub"
    if "tensorflow" in sys.modules:
        return False
    saved = {name: sys.modules.get(name) for name in (_NO_TF_MARKER, *_REMOTE_BACKENDS) if name in sys.modules}
    sys.modules[_NO_TF_MARKER] = types.ModuleType(_NO_TF_MARKER)
    for name in _REMOTE_BACKENDS:
        sys.modules.setdefault(name, None)  # None makes `import name` fail: the stub skips S3/fsspec
    try:
        stub = lazy_tf.__version__ == "stub"  # resolves the lazy module now, while the marker is there
    finally:
        for name in (_NO_TF_MARKER, *_REMOTE_BACKENDS):
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)
    if stub:
        from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

        # The stub's record reader checks every record with a per-byte Python CRC (~4 MB/s).
        pywrap_tensorflow.masked_crc32c = masked_crc32c
        if not getattr(pywrap_tensorflow.PyRecordReader_New, "skips_damaged_records", False):
            pywrap_tensorflow.PyRecordReader_New = _skipping_reader(pywrap_tensorflow.PyRecordReader_New)
    return stub


# -- damaged records ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Damage:
    """What was wrong with an event file's record, said once."""

    text: str  # "<file>: the record at byte N ..."
    lost: bool  # a record that was written whole and cannot be read (not one still being written)


_DAMAGE: dict[str, Damage] = {}  # "<event file>@<offset of the record>" -> its damage, until taken


def take_damage() -> list[Damage]:
    """What the reading found wrong in event files since the last call: records skipped, or where
    a file's reading stopped. Empty where TensorFlow's reader did the reading (it says nothing:
    a remote logdir, or TensorFlow imported before the command read the files)."""
    notes = list(_DAMAGE.values())
    _DAMAGE.clear()
    return notes


def _skipping_reader(reader_class):
    """TensorBoard's stub record reader, reading on past a record whose frame is whole but whose
    data fails its checksum. TensorBoard's readers (the stub, and its data server) stop the file
    there, so one flipped bit in one traced step hid every step written after it, without a word;
    the command shows them, and says what it skipped and where a file's reading stopped
    (`take_damage`)."""
    import struct

    from tensorboard.compat.tensorflow_stub import errors

    class SkippingRecordReader(reader_class):
        skips_damaged_records = True

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._offset = 0  # of the record being read
            self._stopped_said = False  # that TensorBoard stops the file at its first damaged record

        def GetNext(self) -> None:  # noqa: N802 - TensorBoard's name
            while True:
                try:
                    super().GetNext()
                except errors.DataLossError:
                    frame = bytes(self._buffer)  # the record's bytes read so far (the stub keeps them for a retry)
                    if len(frame) < 12:
                        self._note(f"its last record, at byte {self._offset:,}, is cut short in its header: "
                                   "the writer stopped while writing it, or is still writing", lost=False)
                        raise
                    (length,) = struct.unpack("<Q", frame[:8])
                    if masked_crc32c(frame[:8]) != struct.unpack("<I", frame[8:12])[0]:
                        self._note(f"the record at byte {self._offset:,} is damaged in its length, so nothing "
                                   f"after it can be read{self._rest()}", lost=True)
                        raise
                    if len(frame) < length + 16:
                        self._note(f"its last record, at byte {self._offset:,}, is cut short ({len(frame):,} of "
                                   f"{length + 16:,} B): the writer stopped while writing it, or is still writing",
                                   lost=False)
                        raise
                    stops = ("" if self._stopped_said else "; TensorBoard stops reading the file there, so its "
                             "Memory tab shows nothing written after it")
                    self._stopped_said = True
                    self._note(f"the record at byte {self._offset:,} ({len(frame):,} B) fails its checksum and was "
                               f"skipped (whatever it held, a traced step or another event, is lost){stops}", lost=True)
                    self._offset += len(frame)
                    self._buffer = b""
                    continue
                self._offset += len(self.curr_event) + 16
                return

        def _note(self, what: str, lost: bool) -> None:
            name = os.fsdecode(self.filename)
            _DAMAGE.setdefault(f"{name}@{self._offset}", Damage(f"{name}: {what}", lost))

        def _rest(self) -> str:
            try:
                return f" ({os.path.getsize(self.filename) - self._offset:,} B)"
            except OSError:
                return ""

    return SkippingRecordReader


def data_provider(logdir: str, run: str | None = None):
    """TensorBoard's multiplexer and data provider over the logdir's runs (only `run` when given).

    A run is a directory holding event files, named by its path under the
    logdir (`.` for the logdir itself); when the logdir itself is the only
    run, it is named by its directory's name.
    """
    if not is_remote(logdir):
        use_tensorflow_stub()
    from tensorboard.backend.event_processing import data_provider as provider_mod
    from tensorboard.backend.event_processing import plugin_event_multiplexer

    from . import store

    # Every record of the graphs' tags kept (their reservoirs unbounded), then those written again at a
    # step they already hold dropped as `tensorboard`'s Rust data server drops them (_as_tensorboard_serves):
    # a run written twice (a restarted script: two event files, one tag) gives the CLI the graph and the
    # step that the plugin reads inside `tensorboard --logdir`.
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        tensor_size_guidance={store.TAGGED_RUN_METADATA: 0, store.RUN_METADATA: 0})
    runs = run_directories(logdir, run)
    for name, path in runs.items():
        if _readable(path):
            multiplexer.AddRun(path, name)
    multiplexer.Reload()
    _as_tensorboard_serves(multiplexer)
    return provider_mod.MultiplexerDataProvider(multiplexer, logdir)


def _as_tensorboard_serves(multiplexer) -> None:
    """Records written again at a step they already hold (a script run again into its run's
    directory: two event files, one tag at one step) kept as `tensorboard --logdir` keeps them by
    default: its Rust data server lets each record of a tag preempt the run's earlier records of
    that tag at its step or later, so the one written last is served. TensorBoard's in-process
    loader, which the CLI reads with, keeps them all and serves the first: trial N's CLI read
    the older of two writes of `step_2` while the Memory tab showed the newer."""
    for name in multiplexer.Runs():
        for reservoir in multiplexer.GetAccumulator(name).tensors_by_tag.values():
            for key in reservoir.Keys():
                items = reservoir.Items(key)
                kept: list = []
                for item in items:
                    while kept and kept[-1].step >= item.step:
                        kept.pop()
                    kept.append(item)
                if len(kept) < len(items):
                    ids = {id(item) for item in kept}
                    reservoir.FilterItems(lambda item, ids=ids: id(item) in ids, key)


def own_name_of(logdir: str) -> str:
    """The name of a logdir that is itself a run (its directory's name, not `.`)."""
    return os.path.basename(logdir.rstrip("/") if is_remote(logdir) else os.path.abspath(logdir)) or logdir


def run_directories(logdir: str, run: str | None = None) -> dict[str, str]:
    """Run name -> directory: the asked run's directory alone, or every run under the logdir."""
    own_name = own_name_of(logdir)
    if run is not None:
        below = logdir.rstrip("/") + "/" + run
        # The logdir's own run: `.`, or its directory's name where no run below has that name (a
        # sub-directory run of the logdir's own name is that run). Labelled as the listing labels it.
        listed = _listed(logdir) if run in (".", own_name) else {}  # the logdir walked once
        if run == "." or (run == own_name and run not in listed):
            # (A logdir of profiles alone, tf_keras': no run of its own, the `train` run below, if any.)
            own = {root_label(logdir, own_name, listed): logdir} if _holds_event_files(logdir) else {}
            return {**own, **_train_below(logdir, "train")} or {run: below}
        return {run: below, **_train_below(below, f"{run}/train")}
    names = _listed(logdir)
    if list(names) == ["."]:
        return {own_name: logdir}
    return names


def _listed(logdir: str) -> dict[str, str]:
    """Every run under the logdir, named as TensorBoard's EventMultiplexer.AddRunsFromDirectory
    names them (the logdir's own run `.`). A local logdir is walked as the plugin walks it for
    profiles (`store.walk`): a directory that cannot be read is left out, and one reached again
    through a symbolic link is not listed again (trial AD's link to an ancestor had printed 1,560
    steps, and one unreadable directory had stopped the command)."""
    from tensorboard.backend.event_processing import io_wrapper

    from .store import walk

    if is_remote(logdir):
        directories = io_wrapper.GetLogdirSubdirectories(logdir)
    else:
        directories = (directory for directory, _, files in walk(logdir)
                       if any(io_wrapper.IsSummaryEventsFile(os.path.join(directory, name)) for name in files))
    return {os.path.relpath(directory, logdir): directory for directory in directories}


def _readable(directory: str) -> bool:
    """Whether a run's event files can be opened; where one cannot, said once (as damage, beside the
    figures) and the run left out, not the command (trial AD's unreadable file had ended in a traceback)."""
    if is_remote(directory):
        return True
    from tensorboard.backend.event_processing import io_wrapper

    try:
        names = [name for name in os.listdir(directory) if io_wrapper.IsSummaryEventsFile(os.path.join(directory, name))]
    except FileNotFoundError:  # no such run: the command says so
        return True
    except OSError as exc:
        _DAMAGE.setdefault(directory, Damage(f"{directory}: cannot be read ({exc.strerror or exc}): its run is left out",
                                             lost=True))
        return False
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            _DAMAGE.setdefault(path, Damage(f"{path}: cannot be read ({exc.strerror or exc}): its run is left out",
                                            lost=True))
            return False
    return True


def root_label(logdir: str, own_name: str, listed: dict[str, str] | None = None) -> str:
    """How a listing of the logdir labels its own run: by the directory's name where it is the only
    run, else `.`, as TensorBoard names it beside the others (`listed`: the logdir's runs, where
    the caller has walked it)."""
    return own_name if list(_listed(logdir) if listed is None else listed) == ["."] else "."


def _train_below(directory: str, name: str) -> dict[str, str]:
    """The `train` run below a run's directory, as the listing names it, where it holds event files:
    tf_keras' callback writes its profile in `<log_dir>` and its model config in `<log_dir>/train`,
    so a run asked for alone (`--run`) is sized from it too (store.run_graph)."""
    train = directory.rstrip("/") + "/train"
    return {name: train} if _holds_event_files(train) else {}


def _holds_event_files(directory: str) -> bool:
    from tensorboard.backend.event_processing import io_wrapper
    from tensorboard.compat import tf

    try:
        return any(io_wrapper.IsSummaryEventsFile(name) for name in tf.io.gfile.listdir(directory))
    except Exception:  # noqa: BLE001 - an unreadable directory holds no run
        return False


# -- CRC-32C (Castagnoli), as TFRecord files checksum each record ------------------------------

_POLY = 0x82F63B78  # reflected
_MASK32 = 0xFFFFFFFF
_SMALL = 2048  # below this many bytes the plain per-byte loop is quicker than numpy's set-up


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_BITS = np.arange(32, dtype=np.uint32)


def _apply(operator: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A linear map over GF(2)^32 (given by the images of its 32 basis bits) applied to each value."""
    out = np.zeros_like(values)
    for bit in range(32):
        out ^= ((values >> np.uint32(bit)) & np.uint32(1)) * operator[bit]
    return out


def _zero_bytes_operator(count: int) -> np.ndarray:
    """The register's map through `count` zero bytes."""
    basis = np.uint32(1) << _BITS
    one = _TABLE[basis & 0xFF] ^ (basis >> np.uint32(8))
    result, power = basis, one
    while count:
        if count & 1:
            result = _apply(power, result)
        power = _apply(power, power)
        count >>= 1
    return result


def crc32c(data: bytes) -> int:
    """CRC-32C of `data`, vectorised: lanes of the buffer at once, then combined pairwise.

    The register is linear: crc(A + B) = zeros(len B)(crc(A)) ^ crc(B) with a
    zero start, and a 0xFFFFFFFF start equals flipping the first four bytes.
    """
    n = len(data)
    if n < _SMALL:
        register = _MASK32
        for byte in data:
            register = int(_TABLE[(register ^ byte) & 0xFF]) ^ (register >> 8)
        return register ^ _MASK32
    lanes = 1 << max(6, min(14, math.ceil(math.log2(math.sqrt(n)))))
    lane_bytes = -(-n // lanes)
    buffer = np.zeros(lanes * lane_bytes, dtype=np.uint8)
    first = buffer.size - n  # zeros in front leave a zero register at zero
    buffer[first:] = np.frombuffer(data, dtype=np.uint8)
    buffer[first:first + 4] ^= 0xFF
    columns = np.ascontiguousarray(buffer.reshape(lanes, lane_bytes).T)
    register = np.zeros(lanes, dtype=np.uint32)
    shift = np.uint32(8)
    for column in columns:
        register = _TABLE[(register ^ column) & 0xFF] ^ (register >> shift)
    operator = _zero_bytes_operator(lane_bytes)
    while register.size > 1:
        register = _apply(operator, register[0::2]) ^ register[1::2]
        operator = _apply(operator, operator)
    return int(register[0]) ^ _MASK32


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC (what the stub's reader compares with each record)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & _MASK32
