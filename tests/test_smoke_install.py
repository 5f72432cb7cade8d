"""Smoke test of what a new user does: build the wheel, install it in a fresh
virtual environment (tensorboard and the wheel only: no TensorFlow, nothing
from this checkout on the path), start `tensorboard --logdir demo_logs
--port 0` with both `--load_fast` values (through tests/tbserver.py, which
reads the URL it prints), and use the plugin over HTTP; run the `tb-memory`
CLI from the same environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tbserver import TensorBoard, fetch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEMO_LOGS = REPO / "demo_logs"
TENSORBOARD_SPEC = "tensorboard==2.21.*"


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH, no user site: the venv sees only what was installed into it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def _run(cmd, timeout, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {result.returncode}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, REPO],
         timeout=300, env=_clean_env())
    wheels = list(out.glob("tb_memory-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    root = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", root], timeout=120)
    _run([root / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
          TENSORBOARD_SPEC, wheel], timeout=300, env=_clean_env(), cwd=root)
    return root


def test_wheel_carries_the_bundle_and_no_node_modules(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "tb_memory_plugin/static/index.js" in names
        bundle = zf.read("tb_memory_plugin/static/index.js")
        entry_points = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert len(bundle) > 10_000 and b"render" in bundle, "index.js should be the built ES module"
    assert not [n for n in names if "node_modules" in n]
    assert not [n for n in names if n.startswith("frontend/") or n.endswith(".ts")], "TypeScript sources shipped"
    assert re.search(r"^memory\s*=\s*tb_memory_plugin\.loader:MemoryPluginLoader$", entry_points, re.M), entry_points
    assert re.search(r"^tb-memory\s*=\s*tb_memory_plugin\.cli:main$", entry_points, re.M), entry_points


def test_venv_is_clean(venv):
    """The environment holds tensorboard and the wheel, not TensorFlow or this checkout."""
    probe = ("import importlib.util, json, tb_memory_plugin; "
             "print(json.dumps({'tf': importlib.util.find_spec('tensorflow') is not None, "
             "'plugin': tb_memory_plugin.__file__}))")
    found = json.loads(_run([venv / "bin" / "python", "-c", probe], timeout=60, env=_clean_env(),
                            cwd=venv).stdout)
    assert found["tf"] is False
    assert found["plugin"].startswith(str(venv)), found["plugin"]


@pytest.mark.parametrize("load_fast", ["false", "true"])
def test_tensorboard_serves_the_plugin(venv, load_fast, tmp_path):
    server = TensorBoard([venv / "bin" / "tensorboard", "--logdir", DEMO_LOGS, "--port", "0",
                          f"--load_fast={load_fast}"],
                         tmp_path / f"tensorboard-load_fast-{load_fast}.log", env=_clean_env(), cwd=tmp_path)
    try:
        url = server.wait_url(90)
        memory, runs = server.wait_for_runs(90, expected_runs=["unet_b2"])
        assert memory["enabled"] is True, memory
        assert memory["tab_name"] == "Memory"
        assert memory["loading_mechanism"]["type"] == "IFRAME"
        assert memory["loading_mechanism"]["module_path"] == "/data/plugin/memory/index.js"

        status, content_type, body = fetch(url + "/data/plugin/memory/index.js")
        assert status == 200 and "javascript" in content_type, content_type
        assert len(body) > 10_000 and b"render" in body

        server.check_load_fast(load_fast)

        unet = next(r for r in runs if r["run"] == "unet_b2")
        assert unet["has_graph"] is True
        tag = unet["steps"][-1]["tag"]
        scope = server.api("scope", run="unet_b2", tag=tag, scope="shared_model/unet_01")
        assert scope["scope"] == "shared_model/unet_01"
        assert scope["figures"]["at_peak_bytes"] > 0
        assert scope["nodes"], "the scope's top nodes"

        # An unknown run is a JSON 404, not a crash.
        try:
            fetch(server.api_url("scope", run="nope", tag=tag))
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and "error" in json.loads(exc.read())
        else:
            raise AssertionError("unknown run answered 200")
    finally:
        server.stop()
    log = server.log_text()
    assert "Traceback" not in log, log[-4000:]


def test_cli_summary_json(venv, tmp_path):
    result = _run([venv / "bin" / "tb-memory", "summary", DEMO_LOGS, "--json"], timeout=120,
                  env=_clean_env(), cwd=tmp_path)
    body = json.loads(result.stdout)
    steps = body["steps"]
    runs = {s["run"] for s in steps}
    assert {"unet_b2", "unet_b4", "resnet9_b2", "resnet9_b4", "bigconv"} <= runs, runs
    assert any(s["source"] == "xplane" and s["status"] == "ok" for s in steps)  # the Keras profile's steps
    for step in steps:
        if step["run"] == "keras_unet/train" and step["source"] == "run_metadata":
            # The callback's own batch_N record holds no step stats: it points to the profiled steps.
            assert step["status"] == "empty" and "profile/" in step["message"], step
            continue
        assert step["status"] == "ok", step
        assert step["devices"] and step["devices"][0]["peak_rise_bytes"] > 0, step["tag"]
