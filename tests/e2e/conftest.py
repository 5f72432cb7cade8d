"""Fixtures for the browser tests: a logdir, real TensorBoard servers, Chromium.

- ``logdir``: a copy of the repo's demo_logs/ plus the hand-built runs of
  ``logdata`` (two devices; HTML in run, tag and node names) and the real JAX
  GPU profiles of tests/data/jax_gpu.
- ``tensorboard_servers``: ``python -m tensorboard.main --logdir ... --host
  127.0.0.1 --port <free>`` subprocesses, one per ``--load_fast`` value,
  started on first use and killed at the end of the session. They run with
  PYTHONPATH=<repo> so the plugin code and the bundle under test are the
  working tree's, not a stale copy in site-packages; the plugin must still be
  installed (``pip install .``) so TensorBoard finds its entry point. The
  process handling is tests/tbserver.py's, shared with the smoke test and
  benchmarks/bench_browser.py.
- ``browser``: Debian's Chromium through Playwright (never a downloaded one).
- ``dashboard``: a page at 1280x800 with the Memory tab open and loaded.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/: tbserver

import e2e_logdata as logdata  # noqa: E402
import tracedata  # noqa: E402
from e2e_helpers import SCREENSHOTS, Dashboard  # noqa: E402
from tbserver import TensorBoard  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEMO_LOGS = os.path.join(REPO, "demo_logs")
JAX_GPU = os.path.join(REPO, "tests", "data", "jax_gpu")
BUNDLE = os.path.join(REPO, "tb_memory_plugin", "static", "index.js")
OUTPUT = os.path.join(REPO, "test-output")

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
STARTUP_TIMEOUT_S = 120


def start_tensorboard(logdir: str, load_fast: str, expected_runs: list[str]) -> TensorBoard:
    """A checkout `tensorboard` over the test logdir, once it serves every expected run."""
    tb = TensorBoard.from_checkout(logdir, f"--load_fast={load_fast}", cwd=OUTPUT,
                                   log_path=os.path.join(OUTPUT, f"tensorboard-load_fast-{load_fast}.log"))
    try:
        tb.wait_for_runs(STARTUP_TIMEOUT_S, expected_runs)
        tb.check_load_fast(load_fast)
    except BaseException:
        tb.stop()
        raise
    return tb


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("logdir"))
    for name in sorted(os.listdir(DEMO_LOGS)):
        src = os.path.join(DEMO_LOGS, name)
        if os.path.isdir(src) and any(f.startswith("events.out.tfevents.") for f in os.listdir(src)):
            shutil.copytree(src, os.path.join(root, name))
    # The Keras demo's profiled run (its events and profile under train/): a TF2 graph whose hottest
    # box, `gradient_tape`, no layer of the grouping by layer holds.
    shutil.copytree(os.path.join(DEMO_LOGS, "keras_unet"), os.path.join(root, "keras_unet"))
    logdata.write_synthetic_runs(root)
    for name in sorted(os.listdir(JAX_GPU)):  # real JAX / Keras 3 GPU profiles (tests/data/jax_gpu)
        if os.path.isdir(os.path.join(JAX_GPU, name)):
            shutil.copytree(os.path.join(JAX_GPU, name), os.path.join(root, name))
    tracedata.profile_jit_runs(Path(root))  # a model compiled with XLA at two batch sizes: jit_b64, jit_b256
    return root


@pytest.fixture(scope="session")
def expected_runs(logdir) -> list[str]:
    return sorted(name if name != "keras_unet" else "keras_unet/train" for name in os.listdir(logdir))


@pytest.fixture(scope="session")
def tensorboard_servers(logdir, expected_runs):
    """load_fast value ("false"/"true") -> a running tbserver.TensorBoard, started on demand."""
    if not os.path.isfile(BUNDLE):
        pytest.fail(f"the frontend bundle {BUNDLE} is missing: run `python3 -m pip install .` "
                    "(or `cd frontend && npm run build`) first")
    servers: dict[str, TensorBoard] = {}

    class Servers:
        def get(self, load_fast: str) -> TensorBoard:
            if load_fast not in servers:
                servers[load_fast] = start_tensorboard(logdir, load_fast, expected_runs)
            return servers[load_fast]

    yield Servers()
    for server in servers.values():
        server.stop()


@pytest.fixture
def load_fast() -> str:
    """Overridden by tests parametrised over both values."""
    return "false"


@pytest.fixture
def tb(tensorboard_servers, load_fast) -> TensorBoard:
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
