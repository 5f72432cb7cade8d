"""Smoke test of what a new user does: build the wheel, install it in a fresh
virtual environment (tensorboard and the wheel only: no TensorFlow, nothing
from this checkout on the path), start `tensorboard --logdir demo_logs
--port 0` with both `--load_fast` values, and use the plugin over HTTP; run
the `tb-memory` CLI from the same environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO_LOGS = REPO / "demo_logs"
TENSORBOARD_SPEC = "tensorboard==2.21.*"
URL_RE = re.compile(r"TensorBoard \S+ at (http://\S+?:\d+)/")


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


def data_server_processes(pgid: int) -> list[str]:
    """Command lines of tensorboard-data-server processes in a process group (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and "tensorboard_data_server" in cmdline:
            found.append(cmdline)
    return found


def _get(url: str, timeout: float = 30):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def _get_json(url: str):
    return json.loads(_get(url)[2])


class _Server:
    """`<venv>/bin/tensorboard ... --port 0`; the URL is read from what it prints."""

    def __init__(self, venv: Path, load_fast: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [str(venv / "bin" / "tensorboard"), "--logdir", str(DEMO_LOGS), "--port", "0",
             f"--load_fast={load_fast}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_clean_env(), cwd=cwd,
            start_new_session=True)
        self.lines: list[str] = []
        self.url: str | None = None
        self._found = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            match = URL_RE.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                self._found.set()

    def wait_url(self, timeout: float) -> str:
        if not self._found.wait(timeout):
            raise AssertionError(f"tensorboard printed no URL in {timeout}s:\n{self.output()}")
        return self.url

    def output(self) -> str:
        return "".join(self.lines)[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=15)


@pytest.mark.parametrize("load_fast", ["false", "true"])
def test_tensorboard_serves_the_plugin(venv, load_fast, tmp_path):
    server = _Server(venv, load_fast, tmp_path)
    try:
        url = server.wait_url(90)
        deadline = time.monotonic() + 90
        listing, runs = {}, []
        while time.monotonic() < deadline:
            assert server.process.poll() is None, f"tensorboard exited:\n{server.output()}"
            try:
                listing = _get_json(url + "/data/plugins_listing")
                runs = _get_json(url + "/data/plugin/memory/runs")["runs"]
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if listing.get("memory", {}).get("enabled") and any(r["run"] == "unet_b2" and r["steps"] for r in runs):
                break
            time.sleep(0.5)
        assert "memory" in listing, f"no memory plugin in {sorted(listing)}:\n{server.output()}"
        assert listing["memory"]["enabled"] is True, listing["memory"]
        assert listing["memory"]["tab_name"] == "Memory"
        assert listing["memory"]["loading_mechanism"]["type"] == "IFRAME"
        assert listing["memory"]["loading_mechanism"]["module_path"] == "/data/plugin/memory/index.js"

        status, content_type, body = _get(url + "/data/plugin/memory/index.js")
        assert status == 200 and "javascript" in content_type, content_type
        assert len(body) > 10_000 and b"render" in body

        # --load_fast=true must really read through the Rust data server (a child process).
        assert bool(data_server_processes(server.process.pid)) == (load_fast == "true"), server.output()

        unet = next(r for r in runs if r["run"] == "unet_b2")
        assert unet["has_graph"] is True
        tag = unet["steps"][-1]["tag"]
        query = urllib.parse.urlencode({"run": "unet_b2", "tag": tag, "scope": "shared_model/unet_01"})
        scope = _get_json(url + "/data/plugin/memory/scope?" + query)
        assert scope["scope"] == "shared_model/unet_01"
        assert scope["figures"]["at_peak_bytes"] > 0
        assert scope["nodes"], "the scope's top nodes"

        # An unknown run is a JSON 404, not a crash.
        try:
            _get(url + "/data/plugin/memory/scope?" + urllib.parse.urlencode({"run": "nope", "tag": tag}))
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and "error" in json.loads(exc.read())
        else:
            raise AssertionError("unknown run answered 200")
    finally:
        server.stop()
    assert "Traceback" not in server.output(), server.output()


def test_cli_summary_json(venv, tmp_path):
    result = _run([venv / "bin" / "tb-memory", "summary", DEMO_LOGS, "--json"], timeout=120,
                  env=_clean_env(), cwd=tmp_path)
    body = json.loads(result.stdout)
    steps = body["steps"]
    runs = {s["run"] for s in steps}
    assert {"unet_b2", "unet_b4", "resnet9_b2", "resnet9_b4", "bigconv"} <= runs, runs
    for step in steps:
        assert step["status"] == "ok", step
        assert step["devices"] and step["devices"][0]["peak_rise_bytes"] > 0, step["tag"]
