"""Page helpers for the browser tests: the Memory tab's frame, waits, screenshots.

Only the frontend's stable test hooks (data-testid attributes and
``document.body.dataset.ready``) are used to find things.
"""

from __future__ import annotations

import os
import re
import time
from decimal import ROUND_HALF_UP, Decimal

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCREENSHOTS = os.path.join(REPO, "test-output", "screenshots")

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _to_fixed(value: float, digits: int) -> str:
    """JavaScript's Number.prototype.toFixed (ties away from zero on the exact binary value)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def format_bytes(n: int) -> str:
    """The frontend's formatBytes (frontend/src/format.ts), for expected texts."""
    if abs(n) < 1024:
        return f"{round(n)} B"
    unit, v = 0, abs(n)
    while v >= 1024 and unit < len(_BYTE_UNITS) - 1:
        v /= 1024
        unit += 1
    text = _to_fixed(v, 2 if v < 10 else 1 if v < 100 else 0)
    if float(text) >= 1024 and unit < len(_BYTE_UNITS) - 1:
        v /= 1024
        unit += 1
        text = _to_fixed(v, 2)
    return f"{'-' if n < 0 else ''}{text} {_BYTE_UNITS[unit]}"


def format_time(us: int) -> str:
    """The frontend's formatTime for times within a step (frontend/src/format.ts)."""
    a = abs(us)
    sign = "-" if us < 0 else ""
    if a < 1000:
        return f"{sign}{round(a)} µs"
    if a < 1_000_000:
        ms = a / 1000
        text = _to_fixed(ms, 2 if ms < 10 else 1 if ms < 100 else 0)
        if float(text) < 1000:
            return f"{sign}{text} ms"
    s = a / 1_000_000
    return f"{sign}{_to_fixed(s, 2 if s < 10 else 1 if s < 100 else 0)} s"


def tid(name: str) -> str:
    return f'[data-testid="{name}"]'


def css_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


READY_JS = "() => !!document.body && document.body.dataset.ready === '1'"
# A secondary panel (the graph, the what-if) loads after the page is ready and says so on its own element.
PANEL_READY_JS = """(testid) => {
  const panel = document.querySelector(`[data-testid="${testid}"]`);
  return !!panel && panel.dataset.ready === '1' && document.body.dataset.ready === '1';
}"""

# Records every value data-ready takes on the page (no selector) or on one panel, so a fast 0 -> 1 is not missed.
WATCH_READY_JS = """(selector) => {
  const target = selector ? document.querySelector(selector) : document.body;
  window.__readyLog = [target.dataset.ready];
  window.__readyTarget = selector;
  if (window.__readyObserver) window.__readyObserver.disconnect();
  window.__readyObserver = new MutationObserver(() => window.__readyLog.push(target.dataset.ready));
  window.__readyObserver.observe(target, {attributes: true, attributeFilter: ['data-ready']});
}"""


class Dashboard:
    """TensorBoard's page with the Memory tab; `frame` is the plugin's iframe."""

    def __init__(self, page, tb, test_name: str) -> None:
        self.page = page
        self.tb = tb
        self.test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)
        self.frame = None
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        self._shots = 0
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

        def on_dialog(dialog):
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)

    def open(self, url: str | None = None) -> None:
        """Opens TensorBoard's page at `url` (default: the Memory tab) and waits for the tab to be ready."""
        self.page.goto(url or f"{self.tb.url}/#memory")
        self._find_frame()

    def reload(self) -> None:
        """Reloads TensorBoard's whole page (the plugin's iframe too) and waits for the tab to be ready."""
        self.page.reload()
        self._find_frame()

    def _find_frame(self) -> None:
        self.frame = None
        deadline = time.monotonic() + 30
        while self.frame is None:
            for frame in self.page.frames:
                if "name=memory" in frame.url or "/data/plugin/memory" in frame.url:
                    self.frame = frame
                    break
            else:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no Memory plugin iframe; frames: {[f.url for f in self.page.frames]}")
                self.page.wait_for_timeout(100)
        self.wait_ready()

    def wait_ready(self, timeout_ms: int = 30_000) -> None:
        try:
            self.frame.wait_for_function(READY_JS, timeout=timeout_ms)
        except Exception as exc:  # add what the page says to the failure
            errors = self.frame.locator(tid("error")).all_inner_texts() if self.frame else []
            status = self.frame.locator(tid("status")).all_inner_texts() if self.frame else []
            raise AssertionError(f"Memory tab not ready (body.dataset.ready != '1'): {exc}; "
                                 f"errors={errors} status={status} page errors={self.page_errors}") from None

    def wait_panel(self, testid: str, timeout_ms: int = 30_000) -> None:
        """Waits until the page and a secondary panel (`graph-panel`, `whatif`) are both ready: such a
        panel asks for its data only once the main views are drawn."""
        self.frame.wait_for_function(PANEL_READY_JS, arg=testid, timeout=timeout_ms)

    def wait_graph(self) -> None:
        self.wait_panel("graph-panel")

    def watch_ready(self, panel: str | None = None) -> None:
        """Starts recording data-ready: the page's, or with `panel` (a data-testid) that panel's own."""
        self.frame.evaluate(WATCH_READY_JS, tid(panel) if panel else None)

    def wait_reloaded(self) -> list[str]:
        """After watch_ready() and an action: waits for the watched ready to go 0 then 1 (and the page
        to be ready); returns the log."""
        self.frame.wait_for_function(
            "() => { const l = window.__readyLog || []; const i = l.indexOf('0');"
            " const sel = window.__readyTarget; const target = sel ? document.querySelector(sel) : document.body;"
            " return i >= 0 && l.indexOf('1', i) > i && target.dataset.ready === '1'"
            " && document.body.dataset.ready === '1'; }",
            timeout=30_000)
        return self.frame.evaluate("() => window.__readyLog")

    def loc(self, selector: str):
        return self.frame.locator(selector)

    def select(self, picker: str, value: str) -> None:
        """Picks an option of a native select and waits for the data to reload."""
        self.watch_ready()
        self.loc(tid(picker)).select_option(value=value)
        self.wait_reloaded()

    def value(self, picker: str) -> str:
        return self.loc(tid(picker)).input_value()

    def tile(self, scope: str):
        return self.loc(f'{tid("treemap-tile")}[data-scope={css_string(scope)}]')

    def click_tile(self, scope: str) -> None:
        """Clicks a tile by its name, top left: a big tile's body holds its parts, each selected by a click."""
        self.tile(scope).click(position={"x": 6, "y": 6})

    def graph_node(self, node_id: str):
        return self.loc(f'{tid("graph-node")}[data-id={css_string(node_id)}]')

    def details_scope(self) -> str | None:
        return self.loc(tid("details-scope")).get_attribute("data-scope")

    def wait_details(self, scope: str) -> None:
        self.frame.wait_for_function(
            "(scope) => { const d = document.querySelector('[data-testid=\"details-scope\"]');"
            " return !!d && d.dataset.scope === scope && document.body.dataset.ready === '1'; }",
            arg=scope, timeout=20_000)

    def details_bytes(self) -> dict[str, int]:
        """The figures the details panel shows; at peak is left out for a trace without a curve."""
        out = {}
        for figure in ("at_peak", "allocated", "output"):
            hook = f"details-{figure.replace('_', '-')}-bytes"
            if figure == "at_peak" and self.loc(tid(hook)).count() == 0:
                continue
            raw = self.loc(tid(hook)).get_attribute("data-bytes")
            assert raw is not None and re.fullmatch(r"-?\d+", raw), f"{hook} data-bytes={raw!r}"
            out[f"{figure}_bytes"] = int(raw)
        return out

    def tile_scopes(self) -> list[str]:
        return [t.get_attribute("data-scope") for t in self.loc(tid("treemap-tile")).all()]

    def crumb_scopes(self) -> list[str | None]:
        return [b.get_attribute("data-scope") for b in self.loc(f'{tid("breadcrumbs")} [data-scope]').all()]

    def wait_focus(self, scope: str) -> None:
        """Waits until the breadcrumbs end at `scope` and every tile lies under it."""
        self.frame.wait_for_function(
            """(scope) => {
                 const crumbs = [...document.querySelectorAll('[data-testid="breadcrumbs"] [data-scope]')];
                 const tiles = [...document.querySelectorAll('[data-testid="treemap-tile"]')];
                 return crumbs.length > 0 && crumbs[crumbs.length - 1].dataset.scope === scope
                   && tiles.length > 0 && tiles.every(t => scope === '' || t.dataset.scope.startsWith(scope + '/'))
                   && document.body.dataset.ready === '1';
               }""",
            arg=scope, timeout=20_000)

    def assert_fits_width(self) -> None:
        """Readable at 1280x800: the plugin page never scrolls sideways."""
        overflow = self.frame.evaluate(
            "() => ({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth})")
        assert overflow["scroll"] <= overflow["client"], f"horizontal overflow in the Memory tab: {overflow}"

    def screenshot(self, state: str) -> str:
        self._shots += 1
        path = os.path.join(SCREENSHOTS, f"{self.test_name}-{self._shots:02d}-{state}.png")
        self.page.screenshot(path=path)
        return path
