"""Fixtures for the browser tests: a logdir, real TensorBoard servers, Chromium.

- ``logdir``: a copy of the repo's demo_logs/ plus the hand-built runs of
  ``logdata`` (two devices; HTML in run, tag and node names).
- ``tensorboard_servers``: ``python -m tensorboard.main --logdir ... --host
  127.0.0.1 --port <free>`` subprocesses, one per ``--load_fast`` value,
  started on first use and killed at the end of the session. They run with
  PYTHONPATH=<repo> so the plugin code and the bundle under test are the
  working tree's, not a stale copy in site-packages; the plugin must still be
  installed (``pip install .``) so TensorBoard finds its entry point.
- ``browser``: Debian's Chromium through Playwright (never a downloaded one).
- ``dashboard``: a page at 1280x800 with the Memory tab open and loaded.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import json

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import e2e_logdata as logdata  # noqa: E402
from e2e_helpers import SCREENSHOTS, Dashboard, data_server_processes  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEMO_LOGS = os.path.join(REPO, "demo_logs")
BUNDLE = os.path.join(REPO, "tb_memory_plugin", "static", "index.js")
OUTPUT = os.path.join(REPO, "test-output")

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
STARTUP_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 30):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode("utf-8"))


class TensorBoardServer:
    """One `tensorboard` subprocess over the test logdir."""

    def __init__(self, logdir: str, load_fast: str, expected_runs: list[str]) -> None:
        self.load_fast = load_fast
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        os.makedirs(OUTPUT, exist_ok=True)
        self.log_path = os.path.join(OUTPUT, f"tensorboard-load_fast-{load_fast}.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONPATH=REPO + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
             "--port", str(self.port), f"--load_fast={load_fast}"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=OUTPUT, start_new_session=True)
        try:
            self._wait_until_ready(expected_runs)
        except BaseException:
            self.stop()
            raise

    def _log_tail(self) -> str:
        self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def _wait_until_ready(self, expected_runs: list[str]) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tensorboard --load_fast={self.load_fast} exited "
                                   f"{self.process.returncode}:\n{self._log_tail()}")
            try:
                listing = get_json(self.url + "/data/plugins_listing", timeout=5)
                if "memory" not in listing:
                    raise RuntimeError(
                        "TensorBoard runs but has no 'memory' plugin: install this repo into "
                        f"{sys.executable} (`python3 -m pip install .`) so its entry point is registered.\n"
                        f"plugins: {sorted(listing)}\n{self._log_tail()}")
                runs = {r["run"]: r for r in get_json(self.api_url("runs"), timeout=10)["runs"]}
                missing = [r for r in expected_runs if not runs.get(r, {}).get("steps")]
                if not missing and listing["memory"].get("enabled"):
                    # --load_fast=true must really read through the Rust data server.
                    servers = data_server_processes(self.process.pid)
                    assert bool(servers) == (self.load_fast == "true"), (
                        f"--load_fast={self.load_fast} but data server processes: {servers}")
                    return
                last = f"runs still missing: {missing}; memory enabled: {listing['memory'].get('enabled')}"
            except (urllib.error.URLError, ConnectionError, OSError, ValueError) as exc:
                last = repr(exc)
            time.sleep(0.5)
        raise RuntimeError(f"tensorboard --load_fast={self.load_fast} not ready after "
                           f"{STARTUP_TIMEOUT_S}s ({last}):\n{self._log_tail()}")

    def api_url(self, route: str, **params) -> str:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        return f"{self.url}/data/plugin/memory/{route}" + (f"?{query}" if query else "")

    def api(self, route: str, **params):
        return get_json(self.api_url(route, **params))

    def stop(self) -> None:
        if self.process.poll() is None:
            # Only our own process group (start_new_session): the Rust data server goes with it.
            try:
                os.killpg(self.process.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=15)
        self._log.close()


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("logdir"))
    for name in sorted(os.listdir(DEMO_LOGS)):
        src = os.path.join(DEMO_LOGS, name)
        if os.path.isdir(src) and any(f.startswith("events.out.tfevents.") for f in os.listdir(src)):
            shutil.copytree(src, os.path.join(root, name))
    logdata.write_synthetic_runs(root)
    return root


@pytest.fixture(scope="session")
def expected_runs(logdir) -> list[str]:
    return sorted(os.listdir(logdir))


@pytest.fixture(scope="session")
def tensorboard_servers(logdir, expected_runs):
    """load_fast value ("false"/"true") -> a running TensorBoardServer, started on demand."""
    if not os.path.isfile(BUNDLE):
        pytest.fail(f"the frontend bundle {BUNDLE} is missing: run `python3 -m pip install .` "
                    "(or `cd frontend && npm run build`) first")
    servers: dict[str, TensorBoardServer] = {}

    class Servers:
        def get(self, load_fast: str) -> TensorBoardServer:
            if load_fast not in servers:
                servers[load_fast] = TensorBoardServer(logdir, load_fast, expected_runs)
            return servers[load_fast]

    yield Servers()
    for server in servers.values():
        server.stop()


@pytest.fixture
def load_fast() -> str:
    """Overridden by tests parametrised over both values."""
    return "false"


@pytest.fixture
def tb(tensorboard_servers, load_fast) -> TensorBoardServer:
    return tensorboard_servers.get(load_fast)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(executable):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium); "
                    "these tests never download a browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def dashboard(browser, tb, request):
    """The Memory tab open at 1280x800; uncaught page errors fail the test."""
    os.makedirs(SCREENSHOTS, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    dash = Dashboard(page, tb, request.node.name)
    try:
        dash.open()
        yield dash
        assert dash.page_errors == [], f"uncaught errors in the page: {dash.page_errors}"
        assert dash.dialogs == [], f"the page opened dialogs (script ran?): {dash.dialogs}"
    finally:
        context.close()
