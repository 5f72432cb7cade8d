"""Real `tensorboard` subprocesses for the browser tests, the install smoke test
and benchmarks/bench_browser.py: start one, wait until the Memory plugin
answers, find its Rust data server, stop it with its children.

A plain module (no pytest fixtures): pytest imports both tests/conftest.py and
tests/e2e/conftest.py under the name ``conftest``, so shared code lives here
and users import it from tests/ (on sys.path) as ``tbserver``.

Every server runs in its own session (process group), so stopping it also
stops the ``tensorboard_data_server`` that ``--load_fast=true`` starts, and
never touches another process. Its output (stdout and stderr) goes to a log
file; failures quote the log's tail.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from typing import Callable, TypeVar

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What `tensorboard` prints once it listens (with --port 0, the only way to learn the port).
URL_RE = re.compile(r"TensorBoard \S+ at (http://\S+?:\d+)/")

T = TypeVar("T")


class NotReady(Exception):
    """Raised by a TensorBoard.wait_until check: not yet, and why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str, timeout: float = 30) -> tuple[int, str, bytes]:
    """(status, Content-Type, body) of a GET; HTTP errors raise urllib.error.HTTPError."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def get_json(url: str, timeout: float = 30):
    return json.loads(fetch(url, timeout)[2].decode("utf-8"))


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


def checkout_env() -> dict[str, str]:
    """This environment with PYTHONPATH=<repo> first: the working tree's plugin and bundle are
    served, not a stale copy in site-packages (the plugin must still be pip-installed for its
    entry point)."""
    pythonpath = REPO + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=pythonpath)


class TensorBoard:
    """One `tensorboard` subprocess in its own session, its output in `log_path`.

    `url` is known at once when the port is given; with `--port 0` call wait_url().
    """

    def __init__(self, argv: list[str], log_path: str, *, env: dict[str, str] | None = None,
                 cwd: str | None = None, url: str | None = None) -> None:
        self.argv = [str(a) for a in argv]
        self.url = url
        self.log_path = str(log_path)
        os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
        self._log = open(self.log_path, "wb")
        try:
            self.process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                            cwd=cwd, start_new_session=True)
        except BaseException:
            self._log.close()
            raise

    @classmethod
    def from_checkout(cls, logdir: str, *flags: str, log_path: str, port: int | None = None,
                      cwd: str | None = None) -> "TensorBoard":
        """`python -m tensorboard.main --logdir LOGDIR --host 127.0.0.1 --port PORT FLAGS...` with
        this interpreter and checkout_env(); PORT is a free one unless given."""
        port = free_port() if port is None else port
        argv = [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
                "--port", str(port), *flags]
        return cls(argv, log_path, env=checkout_env(), cwd=cwd, url=f"http://127.0.0.1:{port}")

    # -- output ----------------------------------------------------------------

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]

    def _exited(self) -> RuntimeError:
        return RuntimeError(f"{' '.join(self.argv)} exited {self.process.returncode} "
                            f"(log {self.log_path}):\n{self.log_tail()}")

    # -- waiting ---------------------------------------------------------------

    def wait_url(self, timeout_s: float) -> str:
        """The URL the server printed (`TensorBoard X at http://host:port/`)."""
        deadline = time.monotonic() + timeout_s
        while self.url is None:
            match = URL_RE.search(self.log_text())
            if match:
                self.url = match.group(1)
            elif self.process.poll() is not None:
                raise self._exited()
            elif time.monotonic() > deadline:
                raise AssertionError(f"tensorboard printed no URL in {timeout_s}s:\n{self.log_tail()}")
            else:
                time.sleep(0.1)
        return self.url

    def wait_until(self, check: Callable[[], T], timeout_s: float, what: str = "ready") -> T:
        """Calls check() every 0.5 s until it returns; it raises NotReady (or a connection or
        JSON error) while the server is not there yet. Fails at once if the server exits."""
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise self._exited()
            try:
                return check()
            except NotReady as exc:
                last = str(exc)
            except (OSError, ValueError) as exc:  # urllib's errors are OSErrors
                last = repr(exc)
            time.sleep(0.5)
        raise RuntimeError(f"{' '.join(self.argv)} not {what} after {timeout_s}s ({last}); "
                           f"log {self.log_path}:\n{self.log_tail()}")

    def memory_listing(self) -> dict:
        """The Memory plugin's entry of /data/plugins_listing; a RuntimeError if there is none
        (TensorBoard lists its plugins once, at startup)."""
        listing = get_json(self.url + "/data/plugins_listing", timeout=5)
        if "memory" not in listing:
            raise RuntimeError(
                f"TensorBoard runs but has no 'memory' plugin: install this repo (`python3 -m pip install .`) "
                f"into the Python environment of {self.argv[0]} so its entry point is registered.\n"
                f"plugins: {sorted(listing)}\n{self.log_tail()}")
        return listing["memory"]

    def wait_for_runs(self, timeout_s: float, expected_runs=()) -> tuple[dict, list[dict]]:
        """Until the Memory plugin is enabled, lists a traced step and has steps for every
        expected run: (its plugins_listing entry, the runs it lists)."""
        def check():
            memory = self.memory_listing()
            runs = self.api("runs", timeout=30)["runs"]
            steps = {r["run"]: r.get("steps") for r in runs}
            missing = [r for r in expected_runs if not steps.get(r)]
            if missing or not any(steps.values()) or not memory.get("enabled"):
                raise NotReady(f"runs still missing: {missing}; traced runs: {[r for r, s in steps.items() if s]}; "
                               f"memory enabled: {memory.get('enabled')}")
            return memory, runs

        return self.wait_until(check, timeout_s, "serving the Memory plugin's runs")

    # -- the plugin's routes -----------------------------------------------------

    def api_url(self, route: str, **params) -> str:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        return f"{self.url}/data/plugin/memory/{route}" + (f"?{query}" if query else "")

    def api(self, route: str, timeout: float = 30, **params):
        return get_json(self.api_url(route, **params), timeout=timeout)

    # -- processes ---------------------------------------------------------------

    def data_servers(self) -> list[str]:
        return data_server_processes(self.process.pid)

    def check_load_fast(self, load_fast: str) -> None:
        """--load_fast=true must really read through the Rust data server (a child process)."""
        servers = self.data_servers()
        assert bool(servers) == (load_fast == "true"), (
            f"--load_fast={load_fast} but data server processes: {servers}\n{self.log_tail()}")

    def stop(self, grace_s: float = 15) -> None:
        """SIGTERM to the server's own process group (the data server goes with it), SIGKILL
        after `grace_s`."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self._log.close()
