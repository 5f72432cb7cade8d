"""`tb-memory summary`: text and JSON over real event files, and its failures."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

from tracedata import REPO, UNET_STEPS, engine_step, read_blob_bytes
from tb_memory_plugin import cli, report


def _run(capsys, *argv):
    code = cli.main(["summary", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code, err):
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("tb-memory: ")
    assert "Traceback" not in err


# -- text -------------------------------------------------------------------------------------


def test_text_output_has_the_peak(capsys, logdir):
    code, out, err = _run(capsys, logdir, "--run", "unet", "--tag", "step_2")
    assert code == 0, err
    space = engine_step(logdir, "unet", "step_2").space(None)
    peak = (space.start_bytes or 0) + space.peak_rise_bytes
    assert "== unet / step_2 (step 2)" in out
    assert f"peak {cli.format_bytes(peak)} at {space.curve.peak_time_us / 1000:.3f} ms" in out
    assert f"rise {cli.format_bytes(space.peak_rise_bytes)}" in out
    assert "top scopes at peak (group=layer):" in out
    assert "shared_model" in out
    assert "categories at peak (heuristic):" in out
    assert out.count("== unet /") == 1


def test_text_top_limits_rows(capsys, logdir):
    """--top 1: one row, then one line for the rest, so that the lines shown add up to the peak rise."""
    code, out, _ = _run(capsys, logdir, "--run", "unet", "--tag", "step_1", "--top", "1", "--group", "scope")
    assert code == 0
    space = engine_step(logdir, "unet", "step_1").space(None)
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    for title, end in (("top scopes at peak (group=scope):", "top op types"), ("top op types at peak:", "categories")):
        # (A scope holding most of the top level gets a line of its own, naming the --scope to look inside:
        # whether one does is the traced step's, which varies from run to run.)
        section = [line.split() for line in out.split(title)[1].split(end)[0].splitlines()
                   if line.strip() and "of what the top level holds" not in line]
        assert len(section) == 2 and section[1][2].startswith("(") and section[1][3] == "more", section
        shown = sum(float(number) * units[unit] for number, unit, *_ in section)
        assert abs(shown - space.peak_rise_bytes) <= 2 * 0.05 * 2**20  # each line rounded to 0.1 MiB


def test_format_bytes():
    assert cli.format_bytes(None) == "n/a"
    assert cli.format_bytes(1023) == "1023 B"
    assert cli.format_bytes(1536) == "1.5 KiB"
    assert cli.format_bytes(3 * 1024 ** 3) == "3.0 GiB"
    assert cli.format_bytes(-2048) == "-2.0 KiB"


# -- JSON ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unet_json(logdir):
    """`--json --run unet` parsed (run once; main() prints to sys.stdout)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["summary", str(logdir), "--run", "unet", "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_json_schema(unet_json):
    steps = unet_json["steps"]
    assert [(s["run"], s["tag"]) for s in steps] == [("unet", f"step_{n}") for n in UNET_STEPS]
    for step in steps:
        assert step["step"] in UNET_STEPS and step["status"] == "ok"
        assert len(step["devices"]) == 1
        for device in step["devices"]:
            assert device["device"] == "/job:localhost/replica:0/task:0/device:CPU:0"
            assert isinstance(device["allocator"], str) and device["allocator"]
            assert device["start_bytes"] is None or isinstance(device["start_bytes"], int)
            for key in ("peak_rise_bytes", "peak_time_us"):
                assert isinstance(device[key], int), key
            assert device["scopes"], "no scopes"
            for scope in device["scopes"]:
                assert isinstance(scope["name"], str) and scope["name"]
                for key in ("at_peak_bytes", "allocated_bytes", "output_bytes", "temp_bytes"):
                    assert isinstance(scope[key], int), key
            for key in ("op_types", "categories"):
                assert device[key]
                for row in device[key]:
                    assert isinstance(row["name"], str) and isinstance(row["at_peak_bytes"], int)
            assert [c["name"] for c in device["categories"]] == [
                "parameters", "inputs", "activations", "gradients", "optimizer", "temporaries", "other"]


def test_json_numbers_equal_the_engine(unet_json, logdir):
    for step in unet_json["steps"]:
        engine = engine_step(logdir, "unet", step["tag"])
        (device,) = step["devices"]
        space = engine.space(device["id"])
        assert device["peak_rise_bytes"] == space.peak_rise_bytes > 0
        assert device["peak_time_us"] == space.curve.peak_time_us
        assert device["start_bytes"] == space.start_bytes
        tree = space.tree("layer")
        scopes = {s["name"]: s for s in device["scopes"]}
        # Every entry of the tree, with its kind: scopes, nodes and `(self)` alike.
        assert {name: s["kind"] for name, s in scopes.items()} == dict(zip(tree.paths[1:], tree.kinds[1:]))
        assert {s["kind"] for s in device["scopes"]} >= {"scope", "node"}
        unet01 = scopes["shared_model/unet_01"]
        row = report.figures_dict(tree.figures[tree.index["shared_model/unet_01"]])
        for key in ("at_peak_bytes", "allocated_bytes", "output_bytes", "temp_bytes"):
            assert unet01[key] == row[key], key
        assert unet01["at_peak_bytes"] > 0
        ops = {name: int(fig[0]) for name, _, fig in space.by_op_type()}
        assert {r["name"]: r["at_peak_bytes"] for r in device["op_types"]} == ops
        assert {r["name"]: r["at_peak_bytes"] for r in device["categories"]} == {
            name: at for name, at, _ in space.by_category()}
        # The identity the user is shown.
        assert sum(r["at_peak_bytes"] for r in device["categories"]) == device["peak_rise_bytes"]
        assert sum(r["at_peak_bytes"] for r in device["op_types"]) == device["peak_rise_bytes"]


def test_json_group_scope(capsys, logdir, unet_json):
    code, out, _ = _run(capsys, logdir, "--run", "unet", "--tag", "step_1", "--json", "--group", "scope")
    assert code == 0
    (step,) = json.loads(out)["steps"]
    names = {s["name"] for s in step["devices"][0]["scopes"]}
    assert "gradients/shared_model/unet_01" in names
    assert "gradients" in names
    layer_names = {s["name"] for s in unet_json["steps"][0]["devices"][0]["scopes"]}
    assert "gradients/shared_model/unet_01" not in layer_names
    scope_unet01 = next(s for s in step["devices"][0]["scopes"] if s["name"] == "shared_model/unet_01")
    layer_unet01 = next(s for s in unet_json["steps"][0]["devices"][0]["scopes"] if s["name"] == "shared_model/unet_01")
    assert scope_unet01["allocated_bytes"] < layer_unet01["allocated_bytes"]


def test_json_device_filter(capsys, logdir):
    code, out, err = _run(capsys, logdir, "--run", "gpu", "--json")
    assert code == 0, err
    ids = [d["id"] for d in json.loads(out)["steps"][0]["devices"]]
    assert sorted(ids) == ["CPU:0/cpu", "GPU:0/GPU_0_bfc", "GPU:0/cuda_host_bfc"]
    for wanted, expected in (("GPU:0/cuda_host_bfc", ["GPU:0/cuda_host_bfc"]), ("GPU_0_bfc", ["GPU:0/GPU_0_bfc"]),
                             ("/job:localhost/replica:0/task:0/device:CPU:0", ["CPU:0/cpu"])):
        code, out, err = _run(capsys, logdir, "--run", "gpu", "--json", "--device", wanted)
        assert code == 0, err
        assert [d["id"] for d in json.loads(out)["steps"][0]["devices"]] == expected
    code, out, _ = _run(capsys, logdir, "--run", "gpu", "--device", "GPU:0/GPU_0_bfc")
    assert code == 0 and "-- GPU:0/GPU_0_bfc" in out and "cuda_host_bfc" not in out
    # A prefix that names a device picks all its memory spaces, in text as in JSON.
    code, out, _ = _run(capsys, logdir, "--run", "gpu", "--device", "GPU:0")
    assert code == 0
    assert "-- GPU:0/GPU_0_bfc" in out and "-- GPU:0/cuda_host_bfc" in out and "CPU:0/cpu" not in out
    code, out, _ = _run(capsys, logdir, "--run", "gpu", "--device", "GPU:0", "--json")
    assert sorted(d["id"] for d in json.loads(out)["steps"][0]["devices"]) == ["GPU:0/GPU_0_bfc",
                                                                               "GPU:0/cuda_host_bfc"]
    code, _, err = _run(capsys, logdir, "--run", "gpu", "--device", "TPU:7")
    _one_line_error(code, err)
    assert "TPU:7" in err and "GPU:0/GPU_0_bfc" in err and "CPU:0/cpu" in err  # what there is instead


def test_run_and_tag_filters(capsys, logdir):
    code, out, _ = _run(capsys, logdir, "--run", "unet", "--tag", "step_3", "--json")
    assert code == 0
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("unet", "step_3")]
    code, out, _ = _run(capsys, logdir, "--tag", "step_3", "--json")
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("unet", "step_3")]
    code, _, err = _run(capsys, logdir, "--run", "nope")
    _one_line_error(code, err)
    assert "no run 'nope' in" in err and "unet" in err  # the runs that are there, named
    # The directory given to Keras' callback, which writes its run below it (`<dir>/train`).
    code, _, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet")
    _one_line_error(code, err)
    assert "no run 'keras_unet' in" in err and "runs below it: keras_unet/train" in err
    # A run as a path, with a trailing slash or from "./", is the run.
    for spelt in ("keras_unet/train/", "./keras_unet/train"):
        code, out, err = _run(capsys, REPO / "demo_logs", "--run", spelt, "--json")
        assert code == 0, err
        assert {s["run"] for s in json.loads(out)["steps"]} == {"keras_unet/train"}
    assert "accumulator" not in err  # TensorBoard's own log lines stay out of it
    code, _, err = _run(capsys, logdir, "--run", "unet", "--tag", "step_99")
    _one_line_error(code, err)
    assert "no tag 'step_99' in unet (tags: step_1, step_2, step_3)" in err
    # Runs that hold only a profile (tf.profiler.experimental writes no event file) are named too.
    code, _, err = _run(capsys, REPO / "tests" / "data" / "jax_gpu", "--run", "nope")
    _one_line_error(code, err)
    assert err.strip().endswith("(runs: jax_mlp, keras_jax)")


def test_whole_logdir_reports_bad_steps_but_succeeds(capsys, logdir):
    """Good steps are printed; each bad one gets its own stderr line; exit 0 since some worked."""
    code, out, err = _run(capsys, logdir)
    assert code == 0
    assert "== unet / step_1" in out and "== gpu / step_1" in out
    lines = err.strip().splitlines()
    assert sorted(line.split(":", 2)[1].strip() for line in lines) == [
        "corrupt/step_1", "nomem/step_1", "notrace/step_1", "tf2/keras_profile"]
    assert "== tf2 / traced (step 5)" in out
    assert "Traceback" not in err


# -- failures: one line on stderr, non-zero exit, no traceback ------------------------------------


def test_logdir_without_traces(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path)
    _one_line_error(code, err)
    assert "no traced steps" in err
    # TF2 and Keras users are told how their steps are traced too (a profile), not only TF1's way.
    assert "add_run_metadata" in err and "tf.profiler.experimental.start" in err and "profiler_outdir" in err
    # Keras' callback profiles fit's batches only: predict and evaluate are pointed at start and stop (trial W).
    assert "it profiles no predict or evaluate: wrap those in start and stop" in err
    assert out == ""


def test_logdir_that_does_not_exist(capsys, tmp_path):
    code, _, err = _run(capsys, tmp_path / "missing")
    _one_line_error(code, err)
    assert "is not a directory" in err


@pytest.mark.parametrize("run, words", [
    ("notrace", ("empty", "FULL_TRACE", "profile_batch")),
    ("nomem", ("no_memory", "FULL_TRACE")),
    ("corrupt", ("corrupt", "not a valid RunMetadata")),
])
@pytest.mark.parametrize("as_json", [False, True])
def test_bad_steps_exit_non_zero(capsys, logdir, run, words, as_json):
    code, out, err = _run(capsys, logdir / run, *(["--json"] if as_json else []))
    _one_line_error(code, err)
    for word in words:
        assert word in err
    if as_json:
        (step,) = json.loads(out)["steps"]
        assert step["status"] == words[0] and step["devices"] == []
    else:
        assert out == ""


@pytest.mark.parametrize("command", [["summary", "{logdir}"], ["diff", "{logdir}", "--run", "unet", "--against", ":step_1"]])
@pytest.mark.parametrize("top, words", [("0", "must be at least 1"), ("x", "not an integer: 'x'")])
def test_bad_top_is_a_usage_error(capsys, logdir, command, top, words):
    with pytest.raises(SystemExit) as exc:
        cli.main([arg.format(logdir=logdir) for arg in command] + ["--top", top])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # The subcommand's usage and error, not the top-level one.
    assert f"usage: tb-memory {command[0]}" in err and f"tb-memory {command[0]}: error: argument --top: {words}" in err


# -- as a module, in its own process -------------------------------------------------------------


def _module(*argv, python_flags=()):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *python_flags, "-m", "tb_memory_plugin.cli", "summary", *map(str, argv)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=str(REPO))


def test_python_dash_m(logdir):
    done = _module(logdir, "--run", "unet", "--tag", "step_1", "--json")
    assert done.returncode == 0, done.stderr
    (step,) = json.loads(done.stdout)["steps"]
    space = engine_step(logdir, "unet", "step_1").space(None)
    assert step["devices"][0]["peak_rise_bytes"] == space.peak_rise_bytes



_MAIN_THEN_LIST_MODULES = (
    "import sys\n"
    "from tb_memory_plugin import cli\n"
    "code = cli.main(sys.argv[1:])\n"
    "print('loaded:', ' '.join(sorted(name for name in sys.modules if sys.modules[name] is not None)), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def test_stub_reads_what_tensorflow_reads_and_imports_no_tensorflow(capsys, logdir):
    """A local logdir is read through TensorBoard's stub in its own process: no TensorFlow (nor
    boto3) is imported, and the JSON is the one the TensorFlow-backed reader gives in this process."""
    assert "tensorflow" in sys.modules  # so the in-process run below reads through TensorFlow
    code, out, _ = _run(capsys, logdir, "--json")
    assert code == 0
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", _MAIN_THEN_LIST_MODULES, "summary", str(logdir),
                           "--json"], capture_output=True, text=True, env=env, timeout=300, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    (loaded,) = [line.split()[1:] for line in done.stderr.splitlines() if line.startswith("loaded:")]
    assert "tb_memory_plugin.logdir" in loaded and "tensorboard.compat.tensorflow_stub.io.gfile" in loaded
    assert not [name for name in loaded if name.split(".")[0] in ("tensorflow", "boto3", "botocore", "fsspec")]
    timed = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "tb_memory_plugin.analysis" in timed
    assert not [name for name in timed if name.split(".")[0] == "tensorflow"]
    assert json.loads(done.stdout) == json.loads(out)


def test_a_device_name_that_is_not_utf8_is_shown_with_replacement_characters(capsys, tmp_path, unet_trace):
    """A real step whose device name has a byte that is not UTF-8 is summarised as any other."""
    import protos

    data = unet_trace.run_metadata_bytes.replace(b"localhost", b"loc\xfflhost")
    protos.write_tagged_run_metadata(tmp_path / "run", "step_1", data)
    code, out, err = _run(capsys, tmp_path, "--json")
    assert code == 0, err
    (step,) = json.loads(out)["steps"]
    assert step["status"] == "ok" and step["devices"][0]["device"] == "/job:loc\ufffdlhost/replica:0/task:0/device:CPU:0"


def test_a_corrupt_record_is_refused_by_both_readers(capsys, tmp_path):
    import protos

    protos.write_tagged_run_metadata(tmp_path / "run", "step_1", protos.gpu_trace())
    (event_file,) = (tmp_path / "run").iterdir()
    data = bytearray(event_file.read_bytes())
    data[-10] ^= 0x01  # inside the last record's payload, before its CRC
    event_file.write_bytes(bytes(data))
    code, _, err = _run(capsys, tmp_path)
    _one_line_error(code, err)
    done = _module(tmp_path)
    _one_line_error(done.returncode, done.stderr)
    assert "no traced steps" in err and "no traced steps" in done.stderr
    # The command's own reader (no TensorFlow) says which record it could not read.
    (offset, size), = [(at, len(frame)) for at, frame in _records(event_file) if b"step_1" in frame]
    assert f"{event_file}: the record at byte {offset:,} ({size:,} B) fails its checksum" in done.stderr


def _records(path):
    """(offset, whole frame) of each TFRecord in an event file, read by its lengths alone."""
    import struct

    data, at, out = path.read_bytes(), 0, []
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        out.append((at, data[at:at + length + 16]))
        at += length + 16
    return out


@pytest.fixture
def unet_copy(logdir, tmp_path):
    """The real U-Net run's event file (3 traced steps, then whatever follows), copied to damage."""
    import shutil

    shutil.copytree(logdir / "unet", tmp_path / "unet")
    (event_file,) = (tmp_path / "unet").glob("events.out.tfevents.*")
    return event_file


def _damage(event_file, tag: bytes, where: str) -> int:
    """Flip a byte of the record holding `tag`'s step: in its data, or in its length; its offset."""
    (offset, frame), = [(at, frame) for at, frame in _records(event_file) if tag in frame]
    data = bytearray(event_file.read_bytes())
    data[offset + (len(frame) // 2 if where == "data" else 2)] ^= 0x10
    event_file.write_bytes(bytes(data))
    return offset


def test_a_record_failing_its_checksum_hides_only_its_own_step(unet_copy):
    """One flipped bit in step_2's record: the command reads on past it (TensorBoard's readers stop
    the file there, which hid step_3 too), and says which record it skipped."""
    offset = _damage(unet_copy, b"step_2", "data")
    done = _module(unet_copy.parent.parent, "--run", "unet")
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stdout.splitlines() if line.startswith("== unet /")]
    assert shown == ["== unet / step_1 (step 1)", "== unet / step_3 (step 3)"]
    assert done.stderr.count("tb-memory: warning:") == 1
    assert f"the record at byte {offset:,}" in done.stderr and "fails its checksum and was skipped" in done.stderr


def test_a_record_damaged_in_its_length_ends_the_file_and_says_so(unet_copy):
    """A damaged length loses the records' framing: the steps before it are shown, and the warning
    says that nothing after that byte could be read."""
    offset = _damage(unet_copy, b"step_2", "length")
    done = _module(unet_copy.parent.parent, "--run", "unet")
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stdout.splitlines() if line.startswith("== unet /")]
    assert shown == ["== unet / step_1 (step 1)"]
    rest = unet_copy.stat().st_size - offset
    assert f"the record at byte {offset:,} is damaged in its length, so nothing after it can be read ({rest:,} B)" \
        in done.stderr


def test_a_last_record_cut_short_is_named_where_it_hid_the_step(unet_copy):
    """The file cut inside step_3's record (a writer killed while writing): step_3 is asked for and is
    not there; the one-line error says the last record is cut short, not that none was written."""
    (offset, frame), = [(at, frame) for at, frame in _records(unet_copy) if b"step_3" in frame]
    unet_copy.write_bytes(unet_copy.read_bytes()[:offset + len(frame) - 100])
    done = _module(unet_copy.parent.parent, "--run", "unet", "--tag", "step_3")
    _one_line_error(done.returncode, done.stderr)
    assert "no tag 'step_3'" in done.stderr
    assert f"its last record, at byte {offset:,}, is cut short ({len(frame) - 100:,} of {len(frame):,} B)" in done.stderr


def test_a_damaged_first_step_is_said_in_one_line_by_diff_and_whatif_too(unet_copy):
    """A damaged length in the run's first traced record hides all three steps: diff and whatif say
    so in one line, as summary does, not that no step was ever written."""
    offset = _damage(unet_copy, b"step_1", "length")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for argv in (["diff", str(unet_copy.parent.parent), "--run", "unet", "--against", ":step_1"],
                 ["whatif", str(unet_copy.parent.parent), "--run", "unet", "--batch", "4"]):
        done = subprocess.run([sys.executable, "-m", "tb_memory_plugin.cli", *argv], capture_output=True, text=True,
                              env=env, timeout=300, cwd=str(REPO))
        _one_line_error(done.returncode, done.stderr)
        assert "no traced steps could be read in run 'unet'" in done.stderr
        assert f"the record at byte {offset:,} is damaged in its length" in done.stderr
        assert "add_run_metadata" not in done.stderr


def test_scope_with_no_step_read_says_why_the_steps_failed(capsys, logdir):
    """--scope over a run whose only step is corrupt: the step's failure is the answer, not that the
    scope is in no step."""
    code, out, err = _run(capsys, logdir, "--run", "corrupt", "--scope", "small_unet")
    assert code == 1 and "corrupt" in err and "no scope" not in err


@pytest.mark.parametrize("size", [0, 1, 4, 9, 2047, 2048, 2049, 4099, 65536, 100_003, 600_001])
def test_vectorised_crc32c_equals_tensorboards(size):
    import random

    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

    from tb_memory_plugin import logdir as logdir_mod

    data = random.Random(size).randbytes(size)
    assert logdir_mod.crc32c(data) == pywrap_tensorflow.crc32c(data)
    assert logdir_mod.masked_crc32c(data) == pywrap_tensorflow.masked_crc32c(data)


def test_crc32c_check_value():
    from tb_memory_plugin import logdir as logdir_mod

    assert logdir_mod.crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue's check value
    long = b"123456789" * 1000
    assert logdir_mod.crc32c(long) != logdir_mod.crc32c(long[:-1] + b"8")


# -- which runs are read ------------------------------------------------------------------------


def test_only_the_asked_run_is_read(logdir):
    from tensorboard import context

    from tb_memory_plugin import logdir as logdir_mod

    all_runs = logdir_mod.run_directories(str(logdir))
    assert set(all_runs) == {"unet", "notrace", "corrupt", "nomem", "gpu", "tf2"}
    assert logdir_mod.run_directories(str(logdir), "unet") == {"unet": all_runs["unet"]}
    provider = logdir_mod.data_provider(str(logdir), "gpu")
    assert [run.run_name for run in provider.list_runs(context.RequestContext(), experiment_id="")] == ["gpu"]


@pytest.mark.parametrize("run_flag", [(), ("--run", "."), ("--run", "gpu")])
def test_a_run_given_as_the_logdir_is_named_by_its_directory(capsys, logdir, run_flag):
    code, out, err = _run(capsys, logdir / "gpu", *run_flag, "--json")
    assert code == 0, err
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("gpu", "step_1")]
    code, out, _ = _run(capsys, logdir / "gpu", *run_flag)
    assert out.startswith("== gpu / step_1 (step 1)")


def test_a_logdirs_own_run_beside_a_run_of_its_name_is_dot(capsys, logdir, tmp_path):
    """A logdir holding an event file itself and a sub-directory run of its own name (`clash/` and
    `clash/clash/`): the listing names them `.` and `clash`; `--run clash` is the sub-directory's
    run (it had been the logdir's, leaving the other unreachable), `--run .` the logdir's, named
    `.` as the listing names it (it had been `clash`), and diff reaches both."""
    import shutil

    root = tmp_path / "clash"
    shutil.copytree(logdir / "gpu", root)
    shutil.copytree(logdir / "unet", root / "clash")
    code, out, err = _run(capsys, root, "--json")
    assert code == 0, err
    listed = {(s["run"], s["tag"]) for s in json.loads(out)["steps"]}
    assert ("." , "step_1") in listed and any(run == "clash" for run, _ in listed)
    code, out, err = _run(capsys, root, "--run", "clash", "--json")
    assert code == 0, err
    assert {(s["run"], s["tag"]) for s in json.loads(out)["steps"]} == {pair for pair in listed if pair[0] == "clash"}
    code, out, err = _run(capsys, root, "--run", ".", "--json")
    assert code == 0, err
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [(".", "step_1")]
    clash_tag = next(tag for run, tag in sorted(listed) if run == "clash")
    assert cli.main(["diff", str(root), "--run", "clash", "--tag", clash_tag, "--against", ".:step_1"]) == 0
    assert capsys.readouterr().out.startswith(f"== clash / {clash_tag}")


def test_a_folder_of_the_logdirs_name_that_holds_no_run_leaves_the_logdir_its_name(capsys, logdir, tmp_path):
    """`exp/` with its event file and a folder `exp/exp/ckpt/` of checkpoints (no event file): the logdir's
    run is `exp`, by name or as `.` (a folder of its name had been taken for a run of its own)."""
    import shutil

    root = tmp_path / "exp"
    shutil.copytree(logdir / "gpu", root)
    (root / "exp" / "ckpt").mkdir(parents=True)
    for run_flag in ((), ("--run", "exp"), ("--run", ".")):
        code, out, err = _run(capsys, root, *run_flag, "--json")
        assert code == 0, (run_flag, err)
        assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("exp", "step_1")], run_flag


def test_the_current_directory_as_the_logdir_is_named_by_its_directory(capsys, logdir, monkeypatch):
    monkeypatch.chdir(logdir / "gpu")
    code, out, err = _run(capsys, ".", "--json")
    assert code == 0, err
    assert [s["run"] for s in json.loads(out)["steps"]] == ["gpu"]


@pytest.mark.parametrize("run_flag", [(), ("--run", "."), ("--run", "train")])
def test_the_current_directory_with_a_profile_names_its_profiled_steps_by_its_directory(capsys, monkeypatch,
                                                                                        tmp_path, run_flag):
    """A Keras run's directory as `.`: its profiled steps belong to the run named by the directory,
    as its event file's records do, not to a run `.`."""
    import shutil

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train", tmp_path / "train")
    monkeypatch.chdir(tmp_path / "train")
    code, out, err = _run(capsys, ".", *run_flag, "--json")
    assert code == 0, err
    steps = json.loads(out)["steps"]
    assert {s["run"] for s in steps} == {"train"} and any(s["tag"].startswith("profile/") for s in steps)


def test_device_spellings_with_a_job_and_task_pick_that_task(capsys, tmp_path):
    """An in-process cluster's step: `--device` with a job and task is that task's device only."""
    import protos
    from protos import Mem, Node

    devices = {f"/job:{job}/replica:0/task:{task}/device:CPU:0": [
        Node(f"{job}{task}/op", 0, 2, op="MatMul", memory=[Mem("mklcpu", [(1, 1024)], bytes_in_use=1024)])]
        for job, task in (("ps", 0), ("worker", 0), ("worker", 1))}
    protos.write_tagged_run_metadata(tmp_path / "cluster", "step_1", protos.serialized(devices))
    for spelling, expected in (("/job:worker/task:1/cpu:0", ["worker:1/CPU:0/mklcpu"]),
                               ("/job:ps/replica:0/task:0/device:CPU:0", ["ps:0/CPU:0/mklcpu"]),
                               ("ps:0/CPU:0/mklcpu", ["ps:0/CPU:0/mklcpu"]),
                               ("CPU:0", ["ps:0/CPU:0/mklcpu", "worker:0/CPU:0/mklcpu", "worker:1/CPU:0/mklcpu"])):
        code, out, err = _run(capsys, tmp_path, "--run", "cluster", "--json", "--device", spelling)
        assert code == 0, err
        assert [d["id"] for d in json.loads(out)["steps"][0]["devices"]] == expected, spelling
    code, out, err = _run(capsys, tmp_path, "--run", "cluster", "--json", "--device", "worker:1/CPU:0")
    assert code == 0 and [d["id"] for d in json.loads(out)["steps"][0]["devices"]] == ["worker:1/CPU:0/mklcpu"]


def test_the_keras_callbacks_empty_record_alone_says_where_the_step_is(capsys):
    """Asked for the Keras callback's `batch_N` record only (empty by design), the command says
    why there is nothing and names the profiled steps, and exits non-zero, as for any step with
    nothing to show; beside the run's profiled steps the record stays quiet."""
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "batch_4")
    _one_line_error(code, err)
    assert not out and "keras_unet/train/batch_4: empty" in err and "Open profile/" in err
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train")
    assert code == 0 and "batch_4" not in err and "== keras_unet/train / profile/" in out


def test_an_older_keras_log_dir_given_as_the_logdir_keeps_its_record_quiet(capsys, tmp_path):
    """Keras 2 (and 3.5) write the profile in `<log_dir>` and the callback's `batch_N` record in
    `<log_dir>/train`: given `<log_dir>` itself, the record stays quiet beside the profiled steps of
    the run above it (the logdir, named by its directory), which are summarised."""
    import shutil

    import protos
    from tensorboard.compat.proto import config_pb2

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train" / "plugins", tmp_path / "fit" / "plugins")
    (tmp_path / "fit" / "train").mkdir()
    protos.write_tagged_run_metadata(tmp_path / "fit" / "train", "batch_4", config_pb2.RunMetadata().SerializeToString(), 4)
    code, out, err = _run(capsys, tmp_path / "fit")
    assert code == 0 and "batch_4" not in err and "== fit / profile/" in out
    # Asked for the record's run alone, it names the profiled steps of the run above it.
    code, out, err = _run(capsys, tmp_path, "--run", "fit/train")
    assert not out and "profile of the run fit. Open profile/" in err


def test_the_text_lists_leave_out_entries_that_hold_nothing(capsys):
    """Gradient plumbing and no-ops (0 B at the peak, nothing allocated) are not listed in the
    text, nor are TF1's feeds and variables, whose outputs were made before the step (`(feeds)`,
    `beta1_power` had been "0 B ... (allocated 0 B)" rows); --json keeps every entry."""
    import re

    for run in ("keras_unet/train", "unet_b2"):
        code, out, err = _run(capsys, REPO / "demo_logs", "--run", run, "--top", "1000")
        assert code == 0, err
        assert not re.search(r"^ +0 B  .*\(allocated 0 B\)$", out, re.MULTILINE), out
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--top", "1000")
    assert "(before this step)" in out  # nothing allocated, but frees held at the peak: listed
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--json")
    (step, *_) = [s for s in json.loads(out)["steps"] if s["devices"]]
    top = [e for e in step["devices"][0]["scopes"] if e["parent"] == ""]
    assert any(not (e["at_peak_bytes"] or e["allocated_bytes"] or e["output_bytes"]) for e in top)


def test_entries_below_nothing_at_the_peak_are_listed_past_the_top(capsys):
    """`(before this step)` (frees of bytes allocated before the step) holds less than nothing at the
    peak: past --top it is still listed by name, after the "(N more)" line, not hidden inside that
    line's sum; the lines still add up to the peak rise."""
    import re

    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--top", "1")
    assert code == 0, err
    section = out.split("top scopes at peak", 1)[1].split("top op types", 1)[0]
    lines = re.findall(r"^ +(-?[\d.]+ (?:B|KiB|MiB)) +(.+?)  \(allocated", section, re.MULTILINE)
    names = [name for _, name in lines]
    assert names[0] != "(before this step)" and re.fullmatch(r"\(\d+ more scopes\)", names[1]), names
    assert names[2:] == ["(before this step)"] and lines[2][0].startswith("-")
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--json")
    (step, *_) = [s for s in json.loads(out)["steps"] if s["devices"]]
    top = {e["name"]: e["at_peak_bytes"] for e in step["devices"][0]["scopes"] if e["parent"] == ""}
    assert top["(before this step)"] < 0


def test_scope_lists_what_a_scope_holds(capsys):
    """A Keras model is one top scope: the text says so and how to look inside; --scope lists the
    scope's children (as the page's drill in), which add up to the scope's own figures."""
    import re

    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "profile/2026_11_23_15_32_10/step_2")
    assert code == 0, err
    assert re.search(r"^   small_unet holds \d+% of what the top level holds at the peak: --scope small_unet lists "
                     r"what it holds$", out, re.MULTILINE)
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "profile/2026_11_23_15_32_10/step_2",
                          "--scope", "small_unet", "--top", "1000")
    assert code == 0, err
    section = _section(out, "   scopes at peak in small_unet (group=layer):")
    listed = [re.match(r" +(-?[\d.]+ (?:B|KiB|MiB)) +(\S+)", line).groups() for line in section]
    assert listed and all(name.startswith("small_unet/") for _, name in listed)
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "profile/2026_11_23_15_32_10/step_2", "--json")
    (step,) = [s for s in json.loads(out)["steps"] if s["devices"]]
    scopes = {e["name"]: e for e in step["devices"][0]["scopes"]}
    children = [e for e in scopes.values() if e["parent"] == "small_unet"]
    shown = {e["name"] for e in children if e["at_peak_bytes"] or e["allocated_bytes"] or e["output_bytes"]}
    assert {name for _, name in listed} == shown
    assert sum(e["at_peak_bytes"] for e in children) == scopes["small_unet"]["at_peak_bytes"]
    # Its op types, categories, layers and findings are the scope's, not the step's: the op types'
    # executions are those of the scope's nodes that hold, allocate or output bytes (each runs once
    # in this step).
    layer = "small_unet/dec_1"
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "profile/2026_11_23_15_32_10/step_2",
                          "--scope", layer, "--top", "1000")
    assert code == 0, err
    counts = [int(re.search(r" x(\d+)  \(allocated", line).group(1))
              for line in _section(out, f"   top op types at peak in {layer}:")]
    nodes = [e for e in scopes.values() if e["kind"] == "node" and e["name"].startswith(layer + "/")
             and (e["at_peak_bytes"] or e["allocated_bytes"] or e["output_bytes"])]
    assert sum(counts) == len(nodes) > 0
    assert len(_section(out, f"   categories at peak in {layer} (heuristic):")) == 7
    assert [line.split()[2] for line in _section(out, f"   layers in {layer} by parameters (+ optimizer slots):")] == [layer]
    found = [line for line in out.splitlines() if line.startswith("   * ") and " in " in line]
    assert found and all(f" in {layer} " in line for line in found if not line.startswith("   * and "))
    # A path no step read has (a typo) is an error in one line, with the step's top level, as an
    # unknown --device is; it had printed the whole step and exited 0.
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--tag", "profile/2026_11_23_15_32_10/step_2", "--scope", "nope/")
    _one_line_error(code, err)
    assert not out and "no scope 'nope' in any step read; the top level of keras_unet/train/" in err
    assert "(group=layer): small_unet" in err
    # The JSON lists every scope already: --scope is the text's, and said so.
    code, out, err = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--scope", "small_unet", "--json")
    assert code == 2 and not out and "--scope lists scopes in the text" in err


def test_a_keras_run_whose_profile_is_corrupt_fails(capsys, tmp_path):
    """Its empty `batch_N` record is passed over, not counted as a step read: nothing could be read."""
    import shutil

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train", tmp_path / "train")
    (profile,) = (tmp_path / "train").glob("plugins/profile/*/*.xplane.pb")
    profile.write_bytes(bytes(range(100)))
    code, out, err = _run(capsys, tmp_path, "--run", "train")
    assert code == 1 and "corrupt" in err


def test_findings_that_share_their_advice_are_said_once(capsys):
    """The Keras demo's convolution gradients each hold a CPU shard buffer: the advice is given
    once ('as above'), the first three in full, the rest named in one line; --json lists all."""
    profile = "profile/" + next((REPO / "demo_logs/keras_unet/train/plugins/profile").iterdir()).name
    args = (REPO / "demo_logs", "--run", "keras_unet/train", "--tag", f"{profile}/step_2")
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    scratch = [f for f in json.loads(out)["steps"][0]["findings"] if f["kind"] == "conv_scratch"]
    assert len(scratch) > 3 and len({f["suggestion"] for f in scratch}) == 1
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    assert out.count("   * conv_scratch: ") == 3 and out.count("try: as above.") == 2
    # Of equal bytes, the scratch held at the peak first.
    first = out[out.index("   * conv_scratch: "):]
    assert "It holds 32.0 MiB of it at the peak" in first[:first.index("try:")]
    assert f"and {len(scratch) - 3} more conv_scratch findings like these: " in out
    assert err == ""  # the callback's empty batch_N record beside the profile is no failure


def test_a_root_run_beside_other_runs_keeps_its_profile_under_one_name(capsys, tmp_path):
    """A logdir holding a run itself (events and a profile) and another run below it: the root run
    is `.`, for its records and its profile alike, as TensorBoard names it."""
    import shutil

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train", tmp_path / "logs")
    shutil.copytree(REPO / "demo_logs" / "unet_b2", tmp_path / "logs" / "other")
    code, out, err = _run(capsys, tmp_path / "logs", "--json")
    assert code == 0, err
    runs = {(s["run"], s["tag"].startswith("profile/")) for s in json.loads(out)["steps"]}
    assert (".", True) in runs and ("other", False) in runs and {run for run, _ in runs} == {".", "other"}


@pytest.mark.parametrize("run_flag", [(), ("--run", "profiled"), ("--run", ".")])
def test_a_logdir_with_only_a_profile_is_named_by_its_directory(capsys, tmp_path, run_flag):
    """`tf.profiler.experimental.start(logdir)` writes a profile and no event file: the logdir is
    still the run named by its directory, and `--run` takes that name."""
    import shutil

    shutil.copytree(REPO / "demo_logs" / "keras_unet" / "train" / "plugins", tmp_path / "profiled" / "plugins")
    code, out, err = _run(capsys, tmp_path / "profiled", *run_flag, "--json")
    assert code == 0, err
    steps = json.loads(out)["steps"]
    assert steps and {s["run"] for s in steps} == {"profiled"} and all(s["tag"].startswith("profile/") for s in steps)


@pytest.mark.parametrize("spelling", ["/gpu:0", "/device:GPU:0", "GPU:0", "gpu:0", "GPU",
                                      "/job:localhost/replica:0/task:0/gpu:0",
                                      "/job:localhost/replica:0/task:0/device:GPU:0"])
def test_device_spellings_users_see_in_their_dumps(capsys, logdir, spelling):
    code, out, err = _run(capsys, logdir, "--run", "gpu", "--json", "--device", spelling)
    assert code == 0, err
    assert sorted(d["id"] for d in json.loads(out)["steps"][0]["devices"]) == ["GPU:0/GPU_0_bfc",
                                                                               "GPU:0/cuda_host_bfc"]


@pytest.mark.parametrize("spelling, expected", [("GPU:0/GPU_0_bfc", "GPU:0/GPU_0_bfc"), ("gpu_0_bfc", "GPU:0/GPU_0_bfc"),
                                                ("cuda_host_bfc", "GPU:0/cuda_host_bfc"), ("/cpu:0", "CPU:0/cpu"),
                                                ("/device:CPU:0", "CPU:0/cpu")])
def test_device_by_space_or_allocator(capsys, logdir, spelling, expected):
    code, out, err = _run(capsys, logdir, "--run", "gpu", "--json", "--device", spelling)
    assert code == 0, err
    assert [d["id"] for d in json.loads(out)["steps"][0]["devices"]] == [expected]


def test_pinned_host_memory_is_labelled_as_host_memory(capsys, logdir):
    code, out, _ = _run(capsys, logdir, "--run", "gpu")
    assert code == 0
    headers = [line for line in out.splitlines() if line.startswith("-- ")]
    assert "-- GPU:0/cuda_host_bfc (host memory pinned for /job:localhost/replica:0/task:0/device:GPU:0)" in headers
    assert "-- GPU:0/GPU_0_bfc (/job:localhost/replica:0/task:0/device:GPU:0)" in headers


# -- traces without allocation records (TF 1.x) -----------------------------------------------------


@pytest.fixture(scope="module")
def old_logdir(tmp_path_factory):
    """`old`: the hand-built TF 1.0-era GPU step (no allocation records); `mixed`: one allocator with
    records and one without."""
    import protos
    from protos import GPU0, Mem, Node

    root = tmp_path_factory.mktemp("old_logs")
    protos.write_tagged_run_metadata(root / "old", "step_1", protos.old_tf1_trace())
    mixed = protos.serialized({GPU0: [
        Node("a/Conv2D", 0, 5, op="Conv2D", memory=[Mem("GPU_0_bfc", [(0, 4096), (3, 1024)]), Mem("cuda_host_bfc", total=512)],
             outputs=[("GPU_0_bfc", 4096), ("cuda_host_bfc", 512)]),
    ]})
    protos.write_tagged_run_metadata(root / "mixed", "step_1", mixed)
    return root


def _proto_bytes_by_node(payload: bytes, allocator: str) -> dict[str, list[int]]:
    """Node name -> [allocated, output] bytes on one allocator of the step's real devices, from the proto."""
    from tensorboard.compat.proto import config_pb2

    proto = config_pb2.RunMetadata.FromString(payload)
    by_node: dict[str, list[int]] = {}
    for device in proto.step_stats.dev_stats:
        if "stream:" in device.device or device.device.endswith("/memcpy"):
            continue
        for node in device.node_stats:
            allocated = sum(m.total_bytes for m in node.memory if m.allocator_name == allocator and m.total_bytes > 0)
            output = sum(o.tensor_description.allocation_description.requested_bytes for o in node.output
                         if o.tensor_description.allocation_description.allocator_name == allocator)
            row = by_node.setdefault(node.node_name, [0, 0])
            row[0] += allocated
            row[1] += output
    return by_node


def _section(out: str, header: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("     ")), len(lines))
    return lines[start:end]


def test_no_curve_text_ranks_by_allocated_then_output(capsys, old_logdir):
    import protos

    code, out, err = _run(capsys, old_logdir, "--run", "old", "--group", "scope", "--device", "gpu_bfc")
    assert code == 0, err
    by_node = _proto_bytes_by_node(protos.old_tf1_trace(), "gpu_bfc")
    by_scope: dict[str, list[int]] = {}
    for name, (allocated, output) in by_node.items():
        row = by_scope.setdefault(name.split("/")[0], [0, 0])
        row[0] += allocated
        row[1] += output
    ranked = sorted(((a, o, name) for name, (a, o) in by_scope.items() if a or o), key=lambda r: (-r[0], -r[1], r[2]))
    f = cli.format_bytes
    assert _section(out, "   top scopes by allocated bytes (group=scope):") == [
        f"     {f(a):>12} allocated  {f(o):>12} output  {name}" for a, o, name in ranked]
    # A node that allocated nothing itself but produced bytes (conv1/Relu) still counts.
    assert any(a == 0 and o > 0 for a, o in by_node.values())
    total_allocated = sum(a for a, _ in by_node.values())
    total_output = sum(o for _, o in by_node.values())
    assert f"   allocated {f(total_allocated)}, output {f(total_output)} over " in out
    name, (allocated, output) = min(by_node.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    # (its op type after it, but where the name's last component says it already: `conv1/Conv2D`)
    assert f"   largest node: {name}, allocated {f(allocated)}, output {f(output)}" in out or (
        f"   largest node: {name} (" in out and f"allocated {f(allocated)}, output {f(output)}" in out)
    # Said once (the step's note), and none of the figures a trace without records cannot have.
    assert out.count("no curve") == 1 and out.lstrip().startswith("== old / step_1")
    assert "0.000 ms" not in out and "at peak" not in out
    assert not [line for line in out.splitlines() if line.strip().startswith(("peak ", "0 B  "))]
    categories = _section(out, "   categories by allocated bytes (heuristic):")
    assert categories and all(not line.strip().startswith("0 B") for line in categories)


def test_no_curve_is_said_per_allocator_when_another_has_one(capsys, old_logdir):
    code, out, err = _run(capsys, old_logdir, "--run", "mixed")
    assert code == 0, err
    from tb_memory_plugin.resident import NO_MODEL_NOTE

    # No step-wide note of a missing curve (the run has no graph either, which is said apart).
    assert "note:" not in out.replace(f"note: {NO_MODEL_NOTE}", "") and out.count("no curve") == 1
    host = out.split("-- GPU:0/cuda_host_bfc")[1]
    # A feed's buffer on an allocator without records (a TF1 CPU step's mklcpu) reads as outside the peak
    # above, not as a broken trace.
    assert "cuda_host_bfc recorded no allocations, so no curve and no peak of its own" in host
    assert "these bytes are in no other allocator's peak" in host
    assert "peak " not in host.replace("no peak", "").replace("allocator's peak", "")
    device = out.split("-- GPU:0/cuda_host_bfc")[0]
    assert f"rise {cli.format_bytes(4096 + 1024)}" in device


def test_no_curve_json_leaves_at_peak_out(capsys, old_logdir):
    import protos

    code, out, err = _run(capsys, old_logdir, "--run", "old", "--json")
    assert code == 0, err
    (step,) = json.loads(out)["steps"]
    assert step["message"] and "no curve" in step["message"]
    for device in step["devices"]:
        by_node = _proto_bytes_by_node(protos.old_tf1_trace(), device["allocator"])
        assert device["has_curve"] is False
        assert device["peak_rise_bytes"] is None and device["peak_time_us"] is None and device["peak_node"] is None
        assert device["figures"]["allocated_bytes"] == sum(a for a, _ in by_node.values()) > 0
        assert device["figures"]["output_bytes"] == sum(o for _, o in by_node.values()) > 0
        assert device["figures"]["at_peak_bytes"] is None
        for listing in ("scopes", "op_types", "categories"):
            assert device[listing] and all(row["at_peak_bytes"] is None for row in device[listing])
        _assert_top_level_adds_up(device)


# -- the JSON adds up, on a real TensorFlow step with ops at the root --------------------------------


def _build_root_ops(batch, size, seed=0):
    """A tiny regression whose loss ops (`sub`, `Square`, `Mean`) sit at the graph's root."""
    import models
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [batch, size], name="x")
        y = tf1.placeholder(tf.float32, [batch, 1], name="y")
        with tf1.variable_scope("dense"):
            w = tf1.get_variable("w", [size, 1], initializer=tf1.random_normal_initializer(seed=seed))
            prediction = tf.matmul(tf.nn.relu(x), w)
        loss = tf.reduce_mean(tf.square(prediction - y))
        train_step = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)
    return models._finish("root_ops", graph, loss, train_step,
                          models._random_feeds([(x, -1.0, 1.0), (y, -1.0, 1.0)], seed))


@pytest.fixture(scope="module")
def root_ops_run(tmp_path_factory, tf_models):
    root = tmp_path_factory.mktemp("root_ops")
    tf_models.write_traced_run(str(root / "root_ops"), _build_root_ops, 32, 512, steps=(1,))
    return root


def _assert_top_level_adds_up(device: dict) -> None:
    figures = device["figures"]
    top_level = [row for row in device["scopes"] if row["parent"] == ""]
    for key, total in figures.items():
        if total is None:
            continue
        assert sum(row[key] for row in top_level) == total, ("scopes", key)
        assert sum(row[key] for row in device["op_types"]) == total, ("op_types", key)
    for key in ("at_peak_bytes", "allocated_bytes"):
        if figures[key] is not None:
            assert sum(row[key] for row in device["categories"]) == figures[key], ("categories", key)
    if device["has_curve"]:
        assert figures["at_peak_bytes"] == device["peak_rise_bytes"]


@pytest.mark.parametrize("group", ["layer", "scope"])
def test_json_top_level_entries_add_up_with_ops_at_the_root(capsys, root_ops_run, group):
    from tensorboard.compat.proto import config_pb2

    code, out, err = _run(capsys, root_ops_run, "--json", "--group", group)
    assert code == 0, err
    (step,) = json.loads(out)["steps"]
    assert step["run"] == "root_ops" and step["status"] == "ok"
    payload = read_blob_bytes(root_ops_run, "root_ops", step["tag"])
    proto = config_pb2.RunMetadata.FromString(payload)
    for device in step["devices"]:
        by_node = _proto_bytes_by_node(payload, device["allocator"])
        assert device["figures"]["allocated_bytes"] == sum(a for a, _ in by_node.values())
        assert device["figures"]["output_bytes"] == sum(o for _, o in by_node.values())
        _assert_top_level_adds_up(device)
    main = max(step["devices"], key=lambda d: d["figures"]["allocated_bytes"])
    # Ops with no name scope are top-level entries of kind "node", and they hold bytes.
    root_nodes = {row["name"]: row for row in main["scopes"] if row["parent"] == "" and row["kind"] == "node"}
    traced_at_root = {node.node_name for device in proto.step_stats.dev_stats for node in device.node_stats
                      if "/" not in node.node_name and any(m.total_bytes > 0 for m in node.memory)}
    assert traced_at_root and traced_at_root <= set(root_nodes)
    assert sum(root_nodes[name]["allocated_bytes"] for name in traced_at_root) > 0
    assert {"dense", "gradients" if group == "scope" else "dense"} <= {row["name"] for row in main["scopes"]}


def test_run_filter_leaves_out_other_runs_profiles(capsys):
    """demo_logs holds a Keras profile (keras_unet/train): --run unet_b2 neither lists nor reads it."""
    code, out, _ = _run(capsys, REPO / "demo_logs", "--run", "unet_b2", "--json")
    assert code == 0
    runs = {step["run"] for step in json.loads(out)["steps"]}
    assert runs == {"unet_b2"}
    code, out, _ = _run(capsys, REPO / "demo_logs", "--run", "keras_unet/train", "--json")
    steps = json.loads(out)["steps"]
    assert {step["run"] for step in steps} == {"keras_unet/train"}
    assert any(step["source"] == "xplane" and step["status"] == "ok" for step in steps)


@pytest.mark.parametrize("in_use, words", [
    (0, "relative to the step's start (this allocator reports no bytes in use)"),
    (5, "relative to the step's start (the allocator's readings give no usable start)"),  # 5 B in use after +100 B
])
def test_text_says_why_the_peak_is_relative(capsys, in_use, words):
    """No reading at all, or readings that would put the start below zero (docs/figures.md)."""
    import protos
    from tb_memory_plugin import store

    nodes = [protos.Node("layer_a/Conv2D", 10, 12, op="Conv2D", outputs=[("cpu", 100)],
                         memory=[protos.Mem("cpu", [(10, 100)], peak=100, live=100, bytes_in_use=in_use)])]
    (space,) = store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).spaces
    assert space.baseline == "none" and (space.snapshot_gap is None) == (in_use == 0)
    cli._print_space_at_peak(space, "layer", 3)
    assert words in capsys.readouterr().out
    # oneDNN's mklcpu reads only on requests of 256 KiB or more: a step that made none has no reading, said so.
    nodes[0] = protos.Node("layer_a/Conv2D", 10, 12, op="Conv2D", outputs=[("mklcpu", 100)],
                           memory=[protos.Mem("mklcpu", [(10, 100)], peak=100, live=100, bytes_in_use=0)])
    (space,) = store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).spaces
    cli._print_space_at_peak(space, "layer", 3)
    if not in_use:
        assert ("(mklcpu reported no bytes in use in this step: it reads them only on requests of 256.0 KiB or more, "
                "and this step made none)") in capsys.readouterr().out
        # A request of that size made, and still no reading (oneDNN sending every request to malloc): not said so.
        nodes[0] = protos.Node("layer_a/Conv2D", 10, 12, op="Conv2D", outputs=[("mklcpu", 512 << 10)],
                               memory=[protos.Mem("mklcpu", [(10, 512 << 10)], peak=512 << 10, live=512 << 10,
                                                  bytes_in_use=0)])
        (space,) = store.analyse_bytes(protos.serialized({protos.CPU0: nodes})).spaces
        cli._print_space_at_peak(space, "layer", 3)
        assert "relative to the step's start (this allocator reports no bytes in use)" in capsys.readouterr().out


def _write_restarted_run(run_dir) -> None:
    """A run written twice, as a restarted script writes it: two event files in one directory,
    each with its graph and `step_1`, of a 256- then a 4096-wide MLP."""
    import time

    import numpy as np
    import tensorflow as tf

    tf1 = tf.compat.v1
    for width in (256, 4096):
        graph = tf.Graph()
        with graph.as_default():
            x = tf1.placeholder(tf.float32, (None, 64), name="x")
            with tf1.variable_scope("mlp"):
                h = tf.nn.relu(tf.matmul(x, tf1.get_variable("fc1/w", (64, width))))
                y = tf.matmul(h, tf1.get_variable("fc2/w", (width, 1)))
            train = tf1.train.AdamOptimizer().minimize(tf.reduce_mean(tf.square(y)))
            init = tf1.global_variables_initializer()
            writer = tf1.summary.FileWriter(str(run_dir))
        with tf1.Session(graph=graph) as session:
            session.run(init)
            feed = {x: np.ones((64, 64), np.float32)}
            session.run(train, feed)
            metadata = tf1.RunMetadata()
            session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
        writer.add_graph(graph)
        writer.add_run_metadata(metadata, "step_1", global_step=1)
        writer.close()
        time.sleep(1.1)  # the next event file's name (its time in seconds) sorts after this one's


def test_a_restarted_run_reads_the_graph_and_step_tensorboard_serves(capsys, tmp_path):
    """Two event files writing one run's graph and tag at one step: the CLI reads the graph and step
    that `tensorboard --logdir` serves by default (its Rust data server, --load_fast=true), the ones
    written last, so the resident parameters are the traced model's. TensorBoard's in-process loader
    (--load_fast=false) serves the first write of the step instead: a real server of each is asked."""
    import tbserver

    _write_restarted_run(tmp_path / "restart")
    code, out, err = _run(capsys, tmp_path, "--run", "restart", "--json")
    assert code == 0, err
    (step,) = json.loads(out)["steps"]
    (cli_device,) = step["devices"]
    # The traced step's own model's: the width its first matmul ran at is the graph's, the last written.
    assert cli_device["resident"]["param_count"] == 64 * 4096 + 4096
    matmul = next(row for row in cli_device["scopes"] if row["name"] == "mlp/MatMul")
    assert matmul["allocated_bytes"] == 64 * 4096 * 4  # its output, 64 x 4096 float32
    served = {}
    for load_fast in ("true", "false"):
        server = tbserver.TensorBoard.from_checkout(str(tmp_path), f"--load_fast={load_fast}", cwd=str(tmp_path),
                                                    log_path=str(tmp_path / f"tb-{load_fast}.log"))
        try:
            server.wait_for_runs(120, ["restart"])
            server.check_load_fast(load_fast)
            (served[load_fast],) = server.api("summary", run="restart", tag="step_1")["devices"]
        finally:
            server.stop()
    assert cli_device["figures"] == served["true"]["figures"]
    assert cli_device["resident"]["param_count"] == served["true"]["resident"]["param_count"]
    assert served["false"]["figures"]["allocated_bytes"] < served["true"]["figures"]["allocated_bytes"]


def test_a_tag_may_be_named_by_its_last_part(capsys):
    """A profile's tags hold their session (`profile/2026_11_23_15_32_10/step_2`), which differs per
    run: `--tag step_2` names it, in every command."""
    code, out, err = _run(capsys, REPO / "demo_logs", "--tag", "step_2")
    assert code == 0, err
    headers = [line for line in out.splitlines() if line.startswith("== ")]
    assert "== keras_unet/train / profile/2026_11_23_15_32_10/step_2 (step 2)" in headers
    assert "== unet_b2 / step_2 (step 2)" in headers  # a tag that is the whole name is still itself
    assert not any("step_3" in line for line in headers)
    code = cli.main(["diff", str(REPO / "demo_logs"), "--run", "keras_unet/train", "--tag", "step_3", "--against", ":step_2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "keras_unet/train / profile/2026_11_23_15_32_10/step_3 (step 3)" in out
    assert "keras_unet/train / profile/2026_11_23_15_32_10/step_2 (step 2)" in out
    code = cli.main(["diff", str(REPO / "demo_logs"), "--run", "keras_unet/train", "--tag", "step_9", "--against", ":step_2"])
    out, err = capsys.readouterr()
    _one_line_error(code, err)
    assert "no tag 'step_9' in run 'keras_unet/train'" in err


def test_a_made_up_op_type_is_not_bracketed_twice():
    """`op at peak: .../MatMul_1 (unknown)`, not `((unknown))` (a loop body's op with no op event in a profile)."""
    assert cli._op_type_suffix("(unknown)") == " (unknown)"
    assert cli._op_type_suffix("MatMul") == " (MatMul)"
    assert cli._op_type_suffix(None) == ""


def test_an_op_type_follows_a_name_unless_the_name_says_it():
    """As the page writes it: ` (MatMul)` after a name, nothing where its last component is the op type or
    that in brackets (an XLA program's own `(XLA program)` had read "(XLA program) (XLA program)")."""
    assert cli._op_type_suffix("MatMul", "dense/kernel_grad") == " (MatMul)"
    assert cli._op_type_suffix("(unknown)", "dense/x") == " (unknown)"
    assert cli._op_type_suffix("Conv2D", "conv1/Conv2D") == ""
    assert cli._op_type_suffix("XLA program", "(XLA program)") == ""
    assert cli._op_type_suffix(None, "x") == "" and cli._op_type_suffix("Relu") == " (Relu)"


def test_a_scope_that_one_scope_fills_says_how_to_look_inside_it(capsys, tmp_path):
    """--scope on a scope whose bytes one child scope holds (trial Z2's `accumulate`, all of it in its
    `accumulate/while`) says so and how to look inside, as the top level does for a Keras model."""
    import re

    import numpy as np
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None, 64), name="x")
        with tf1.variable_scope("outer"), tf1.variable_scope("inner"):
            h = tf.nn.relu(tf.matmul(x, tf1.get_variable("w", (64, 512))))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        init = tf1.global_variables_initializer()
    with tf1.Session(graph=graph) as session:
        session.run(init)
        feed = {x: np.ones((256, 64), np.float32)}
        session.run(train, feed)
        metadata = tf1.RunMetadata()
        session.run(train, feed, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
    with graph.as_default():
        writer = tf1.summary.FileWriter(str(tmp_path / "nested"))
    writer.add_run_metadata(metadata, "step_1", global_step=1)
    writer.close()
    code, out, err = _run(capsys, tmp_path, "--scope", "outer")
    assert code == 0, err
    assert re.search(r"^   outer/inner holds \d+% of what outer holds at the peak: --scope outer/inner lists what it "
                     r"holds$", out, re.MULTILINE), out


def test_a_runs_traced_steps_are_listed_as_written(tmp_path):
    """A train step and an eval step traced at each step are listed as written, by step then time (trial X's
    had read `eval_2, eval_3, ..., train_2, train_3`, by name)."""
    import numpy as np
    import tensorflow as tf

    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, (None, 8), name="x")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, tf1.get_variable("w", (8, 8)))))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf1.global_variables_initializer()
        writer = tf1.summary.FileWriter(str(tmp_path / "run"))
    with tf1.Session(graph=graph) as session:
        session.run(init)
        for step in (2, 3):
            for tag, fetch in ((f"train_{step}", train), (f"eval_{step}", loss)):
                metadata = tf1.RunMetadata()
                session.run(fetch, {x: np.ones((4, 8), np.float32)}, run_metadata=metadata,
                            options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE))
                writer.add_run_metadata(metadata, tag, global_step=step)
    writer.close()
    store, ctx, _ = cli._open_store(str(tmp_path), None)
    (refs,) = store.list_steps(ctx, "").values()
    assert [ref.tag for ref in refs] == ["train_2", "eval_2", "train_3", "eval_3"]


def test_a_run_whose_event_file_cannot_be_opened_is_named_and_the_others_print(tmp_path, capsys):
    """An event file that cannot be opened (unreadable to the user, here a link to nothing, which root cannot
    open either) leaves its run out with a one-line warning naming it; the other runs still print (trial AD's
    unreadable file had ended the command in a traceback, an unreadable directory in a one-line error and
    nothing else), and a link back up the logdir lists nothing twice."""
    import shutil

    shutil.copytree(REPO / "demo_logs" / "growth", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "events.out.tfevents.1795449388.vm").symlink_to(tmp_path / "nowhere")
    (tmp_path / "good" / "up").symlink_to("..")
    assert cli.main(["summary", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert re.findall(r"^== (\S+) / (\S+)", out, re.M) == [("good", "step_1"), ("good", "step_2"), ("good", "step_3")]
    assert "bad/events.out.tfevents.1795449388.vm: cannot be read" in err and "its run is left out" in err
