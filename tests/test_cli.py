"""`tb-memory summary`: text and JSON over real event files, and its failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tracedata import REPO, UNET_STEPS, engine_step
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
    code, out, _ = _run(capsys, logdir, "--run", "unet", "--tag", "step_1", "--top", "1", "--group", "scope")
    assert code == 0
    section = out.split("top scopes at peak (group=scope):")[1].split("top op types")[0]
    assert len([line for line in section.splitlines() if line.strip()]) == 1


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
        expected = {tree.paths[i] for i in range(1, len(tree.paths)) if tree.kinds[i] == "scope"}
        assert set(scopes) == expected
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
    assert "TPU:7" in err


def test_run_and_tag_filters(capsys, logdir):
    code, out, _ = _run(capsys, logdir, "--run", "unet", "--tag", "step_3", "--json")
    assert code == 0
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("unet", "step_3")]
    code, out, _ = _run(capsys, logdir, "--tag", "step_3", "--json")
    assert [(s["run"], s["tag"]) for s in json.loads(out)["steps"]] == [("unet", "step_3")]
    code, _, err = _run(capsys, logdir, "--run", "nope")
    _one_line_error(code, err)
    assert "no traced step matches --run/--tag" in err
    code, _, err = _run(capsys, logdir, "--run", "unet", "--tag", "step_99")
    _one_line_error(code, err)


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
    assert out == ""


def test_logdir_that_does_not_exist(capsys, tmp_path):
    code, _, err = _run(capsys, tmp_path / "missing")
    _one_line_error(code, err)
    assert "is not a directory" in err


@pytest.mark.parametrize("run, words", [
    ("notrace", ("empty", "FULL_TRACE")),
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


def test_bad_top_is_a_usage_error(capsys, logdir):
    with pytest.raises(SystemExit) as exc:
        cli.main(["summary", str(logdir), "--top", "0"])
    assert exc.value.code == 2
    assert "--top" in capsys.readouterr().err


# -- as a module, in its own process -------------------------------------------------------------


def _module(*argv):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "tb_memory_plugin.cli", "summary", *map(str, argv)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=str(REPO))


def test_python_dash_m(logdir):
    done = _module(logdir, "--run", "unet", "--tag", "step_1", "--json")
    assert done.returncode == 0, done.stderr
    (step,) = json.loads(done.stdout)["steps"]
    space = engine_step(logdir, "unet", "step_1").space(None)
    assert step["devices"][0]["peak_rise_bytes"] == space.peak_rise_bytes

