"""The Memory tab in headless Chromium against a real `tensorboard` process.

Every figure the page shows is compared with what the plugin's JSON routes
answer for the same run, step, device and scope, fetched here with urllib.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from urllib.parse import parse_qs, urlparse

import pytest

import e2e_logdata as logdata
from e2e_helpers import SCREENSHOTS, Dashboard, css_string, format_bytes, format_time, tid

UNET = "unet_b2"
UNET_01 = "shared_model/unet_01"


def _latest_tag(run: dict) -> str:
    """The step a run opens on: the `runs` route names it (store.latest_step, pinned by test_default_step)."""
    return run["latest_tag"]


def _is_pinned_host(device: dict) -> bool:
    """Host memory held for an accelerator (cuda_host_bfc): the server's memory_kind when it sends one, else an
    allocator named *host*; a CPU's memory is host memory by nature and not labelled."""
    kind = device.get("memory_kind", "host" if "host" in device["allocator"].lower() else "device")
    return kind == "host" and device["device_type"] != "CPU"


def _figures(body: dict) -> dict[str, int]:
    f = body["figures"]
    return {k: f[k] for k in ("at_peak_bytes", "allocated_bytes", "output_bytes")}


def _select_unet_01(dash) -> tuple[str, str]:
    """Opens the U-Net run, goes into shared_model and selects unet_01; returns (tag, device)."""
    tag, device = _open_run(dash, UNET)
    dash.tile("shared_model").dblclick()
    dash.wait_focus("shared_model")
    dash.click_tile(UNET_01)
    dash.wait_details(UNET_01)
    return tag, device


def _open_run(dash, run: str) -> tuple[str, str]:
    """Picks a run; returns (tag, device) the page chose, after checking them against the routes."""
    if dash.value("run-picker") != run:
        dash.select("run-picker", run)
    runs = {r["run"]: r for r in dash.tb.api("runs")["runs"]}
    tag = dash.value("step-picker")
    assert tag == _latest_tag(runs[run]), "the step picker should default to the run's latest traced step"
    summary = dash.tb.api("summary", run=run, tag=tag)
    device = dash.value("device-picker")
    ids = [d["id"] for d in summary["devices"]]
    options = dash.loc(f'{tid("device-picker")} option').evaluate_all("os => os.map(o => o.value)")
    assert options == ids
    accelerators = [d["id"] for d in summary["devices"] if d["device_type"] in ("GPU", "TPU") and not _is_pinned_host(d)]
    assert device == (accelerators[0] if accelerators else summary["default_device"])
    return tag, device


def _assert_details_match(dash, run, tag, device, scope, group="layer", has_curve=True):
    """The details panel shows the scope route's figures; without a curve, at peak is left out (never "0 B")."""
    dash.wait_details(scope)
    expected = _figures(dash.tb.api("scope", run=run, tag=tag, device=device, group=group, scope=scope))
    shown = expected if has_curve else {k: v for k, v in expected.items() if k != "at_peak_bytes"}
    assert dash.details_bytes() == shown, f"details of {scope!r} differ from the scope route"
    return expected


def _assert_opens_on_the_largest_peak(dash, runs: list[dict]) -> None:
    """Nothing chosen before: the page opens on the default_step route's answer, the largest peak among each
    run's latest step, and says why in the summary."""
    opening = dash.tb.api("default_step")
    assert opening["reason"] == "largest_peak", opening
    picked = (dash.value("run-picker"), dash.value("step-picker"), dash.value("device-picker"))
    assert picked == (opening["run"], opening["tag"], opening["device"]), (picked, opening)
    for run in runs:
        if not run["steps"]:
            continue
        summary = dash.tb.api("summary", run=run["run"], tag=_latest_tag(run))
        if summary["status"] == "ok":
            device = next(d for d in summary["devices"] if d["id"] == summary["default_device"])
            if not device["has_curve"]:  # no peak (null): ranked after every step with one
                continue
            # Like with like: absolute peaks where every step has one, else every step's rise (`absolute` says).
            assert (device["peak_bytes"] if opening["absolute"] else device["peak_rise_bytes"]) <= \
                opening["peak_bytes"], (run["run"], opening)
    reason = dash.loc(tid("summary-reason"))
    assert reason.count() == 1 and "largest peak" in reason.inner_text(), reason.all_inner_texts()


@pytest.mark.parametrize("load_fast", ["false", "true"])
def test_unet_scope_details_equal_backend(dashboard, load_fast):
    """Default picks, then U-Net: click shared_model, drill, click shared_model/unet_01."""
    dash, tb = dashboard, dashboard.tb
    runs = tb.api("runs")["runs"]
    _assert_opens_on_the_largest_peak(dash, runs)
    run_options = dash.loc(f'{tid("run-picker")} option').evaluate_all("os => os.map(o => o.value)")
    assert run_options == [r["run"] for r in runs]
    dash.assert_fits_width()
    dash.screenshot("default")

    tag, device = _open_run(dash, UNET)
    assert device == "CPU:0/mklcpu"
    # Nothing selected: the details describe the whole step (the root).
    _assert_details_match(dash, UNET, tag, device, "")
    root = tb.api("scopes", run=UNET, tag=tag, device=device, group="layer", scope="")
    shown = set(dash.tile_scopes())
    assert "shared_model" in shown
    assert shown <= {c["scope"] for c in root["children"]}
    # The U-Net is most of the step: its tile shows what it holds (the route's `inside`), as pictures
    # that leave clicks to the tile.
    inside = dash.tile("shared_model").locator(tid("treemap-subtile"))
    drawn = {scope for scope in inside.evaluate_all("ps => ps.map(p => p.dataset.scope)") if scope}
    (model,) = [c for c in root["children"] if c["scope"] == "shared_model"]
    assert "shared_model/unet_01" in drawn
    assert drawn <= {c["scope"] for c in model["inside"] if c["figures"]["at_peak_bytes"] > 0}
    dash.screenshot("unet-root")
    # A part is selected by a click on it (it had taken three clicks), its tile by its name.
    inside.and_(dash.loc(f'[data-scope={css_string(UNET_01)}]')).click()
    _assert_details_match(dash, UNET, tag, device, UNET_01)

    dash.click_tile("shared_model")
    _assert_details_match(dash, UNET, tag, device, "shared_model")
    assert dash.tile("shared_model").get_attribute("aria-selected") == "true"
    dash.screenshot("shared_model-selected")

    dash.tile("shared_model").dblclick()
    dash.wait_focus("shared_model")
    assert dash.crumb_scopes() == ["", "shared_model"]
    children = {c["scope"] for c in tb.api("scopes", run=UNET, tag=tag, device=device, group="layer",
                                            scope="shared_model")["children"]}
    assert set(dash.tile_scopes()) <= children
    dash.click_tile(UNET_01)
    expected = _assert_details_match(dash, UNET, tag, device, UNET_01)
    assert expected["at_peak_bytes"] > 0
    assert dash.loc(tid("details-scope")).inner_text().strip() == UNET_01
    # The figure is shown formatted too, with the exact bytes in data-bytes.
    assert format_bytes(expected["at_peak_bytes"]) in dash.loc(tid("details-at-peak-bytes")).inner_text()
    # Node table: the scope's top nodes by raw name, largest first.
    nodes = tb.api("scope", run=UNET, tag=tag, device=device, group="layer", scope=UNET_01)["nodes"]
    table_text = dash.loc(tid("node-table")).inner_text()
    assert nodes and nodes[0]["raw_name"] in table_text
    dash.assert_fits_width()
    dash.screenshot("unet_01-details")


def _assert_unet_01_selected(dash, tag: str, device: str) -> None:
    assert (dash.value("run-picker"), dash.value("step-picker"), dash.value("device-picker")) == (UNET, tag, device)
    dash.wait_focus("shared_model")
    assert dash.crumb_scopes() == ["", "shared_model"]
    _assert_details_match(dash, UNET, tag, device, UNET_01)
    assert dash.tile(UNET_01).get_attribute("aria-selected") == "true"


@contextlib.contextmanager
def _own_context(browser, tb, name: str, link: str | None = None, width: int = 1280, **options):
    """The page (at `link`, else the Memory tab) in a fresh browser context of its own (no storage: what
    the address alone opens), `width` px wide; it must end without uncaught errors."""
    os.makedirs(SCREENSHOTS, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 800}, **options)
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        dash = Dashboard(page, tb, name)
        dash.open(link)  # None: the Memory tab
        yield dash
        assert dash.page_errors == []
    finally:
        context.close()


def _opened_elsewhere(browser, tb, link: str, name: str):
    """The page at `link` in a fresh browser context: what the link alone opens."""
    return _own_context(browser, tb, name, link)


def test_selection_survives_a_reload_and_travels_in_a_link(dashboard, browser):
    """Select shared_model/unet_01 on unet_b2, reload TensorBoard's page: still selected (and the page does not
    claim to have opened on the largest peak). The view's link opens the same selection in a fresh browser."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _select_unet_01(dash)

    dash.reload()
    _assert_unet_01_selected(dash, tag, device)
    assert dash.loc(tid("summary-reason")).count() == 0, "a restored selection was chosen by the user"
    dash.screenshot("reloaded")

    link = dash.loc(tid("view-link")).get_attribute("href")
    assert link and link.startswith(tb.url + "/") and "p.memory.selected=" in link, link
    with _opened_elsewhere(browser, tb, link, "shared-link") as shared:
        _assert_unet_01_selected(shared, tag, device)


def test_graph_drill_moves_treemap_and_breadcrumbs(dashboard):
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    graph = tb.api("graph", run=UNET, tag=tag, device=device, scope="")
    ids = {n["id"] for n in graph["nodes"]}
    assert "shared_model" in ids
    dash.graph_node("shared_model").wait_for()
    shown = {n.get_attribute("data-id") for n in dash.loc(tid("graph-node")).all()}
    assert shown == ids, "the graph view should draw exactly the graph route's boxes"
    href = dash.loc(tid("graphs-dashboard-link")).get_attribute("href")
    assert href.endswith(f"#graphs&run={UNET}"), href

    dash.graph_node("shared_model").dblclick()
    dash.wait_focus("shared_model")
    assert dash.crumb_scopes() == ["", "shared_model"]
    _assert_details_match(dash, UNET, tag, device, "shared_model")
    inner = {n["id"] for n in tb.api("graph", run=UNET, tag=tag, device=device, scope="shared_model")["nodes"]}
    assert UNET_01 in inner
    dash.graph_node(UNET_01).wait_for()
    dash.frame.wait_for_function(
        "(n) => document.querySelectorAll('[data-testid=\"graph-node\"]').length === n", arg=len(inner))
    assert {n.get_attribute("data-id") for n in dash.loc(tid("graph-node")).all()} == inner
    dash.screenshot("graph-drilled-shared_model")

    # At a readable zoom this 17-box level does not fit: focusing a box (as Tab does) pans the graph to it.
    dash.graph_node(UNET_01).focus()
    dash.graph_node(UNET_01).click()
    _assert_details_match(dash, UNET, tag, device, UNET_01)
    dash.graph_node(UNET_01).dblclick()
    dash.wait_focus(UNET_01)
    assert dash.crumb_scopes() == ["", "shared_model", UNET_01]
    _assert_details_match(dash, UNET, tag, device, UNET_01)
    children = {c["scope"] for c in tb.api("scopes", run=UNET, tag=tag, device=device, group="layer",
                                            scope=UNET_01)["children"]}
    assert set(dash.tile_scopes()) <= children
    # A small level fits whole: every box and every edge (routed around the side or not) in view, labels readable.
    dash.frame.wait_for_function(
        "(n) => document.querySelectorAll('[data-testid=\"graph-node\"]').length === n",
        arg=len(tb.api("graph", run=UNET, tag=tag, device=device, scope=UNET_01)["nodes"]))
    g = dash.frame.evaluate(GRAPH_JS)
    assert all(b["inside"] for b in g["boxes"]) and g["edges"] and all(g["edges"]), g
    assert min(g["labels"]) >= MIN_GRAPH_LABEL_PX
    dash.screenshot("graph-drilled-unet_01")

    # Breadcrumbs lead back up, and the graph follows.
    dash.loc(f'{tid("breadcrumbs")} [data-scope=""]').click()
    dash.wait_focus("")
    dash.graph_node("shared_model").wait_for()



def test_a_graph_box_the_layer_grouping_lacks_is_shown_by_name_scope(dashboard):
    """A Keras run's `gradient_tape` box, the graph's hottest: grouped by layer its ops are in their layers,
    so no such scope is there. A click shows it grouped by name scope (it had asked the grouping by
    layer for it: an error in the details, and a double click blanked the page)."""
    dash, tb = dashboard, dashboard.tb
    run = "keras_unet/train"
    tag, device = _open_run(dash, run)
    assert dash.value("group-picker") == "layer"
    boxes = tb.api("graph", run=run, tag=tag, device=device, scope="", group="layer")["nodes"]
    assert [n["id"] for n in boxes if n.get("in_group") is False] == ["gradient_tape"]
    dash.graph_node("gradient_tape").wait_for()
    # The top level's boxes, which no edge joins, fill rows in view (one row had run off the panel).
    dash.wait_graph()
    g = dash.frame.evaluate(GRAPH_JS)
    assert g["boxes"] and all(b["inside"] for b in g["boxes"]), g["boxes"]
    dash.screenshot("keras-graph-top-level")
    dash.watch_ready()
    dash.graph_node("gradient_tape").click()
    dash.wait_reloaded()
    assert dash.value("group-picker") == "scope"
    _assert_details_match(dash, run, tag, device, "gradient_tape", group="scope")
    assert dash.loc('[role=alert], .error').count() == 0


def test_curve_marks_the_peak(dashboard):
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    curve = tb.api("curve", run=UNET, tag=tag, device=device)
    assert curve["absolute"] is True
    peak = dash.loc(tid("curve-peak"))
    peak.wait_for()
    assert peak.count() == 1
    text = peak.text_content()
    assert format_bytes(curve["peak"]["bytes"]) in text, (text, curve["peak"])
    assert format_time(curve["peak"]["time_us"]) in text, (text, curve["peak"])
    box = dash.loc(f'{tid("curve-peak")} circle').bounding_box()
    assert box is not None and box["width"] > 0
    dash.screenshot("curve-peak")

    # Stacking the top scopes keeps the peak marker.
    dash.loc(tid("stack-toggle")).check()
    dash.wait_ready()
    assert dash.loc(tid("curve-peak")).count() == 1
    dash.screenshot("curve-stacked")


# The curve's max line as drawn: every vertex of path.line and the plot's clip box, in SVG units.
CURVE_LINE_JS = """() => {
  const svg = document.querySelector('[data-testid="curve"] svg');
  const clip = svg.querySelector('clipPath rect');
  const d = svg.querySelector('path.line').getAttribute('d') || '';
  const xs = [...d.matchAll(/[ML]\\s*(-?[\\d.]+(?:e-?\\d+)?)\\s*,/g)].map(m => parseFloat(m[1]));
  const left = parseFloat(clip.getAttribute('x'));
  return {xs, left, right: left + parseFloat(clip.getAttribute('width')), viewBoxWidth: svg.viewBox.baseVal.width};
}"""


def test_summary_names_the_biggest_holder_at_peak(dashboard):
    """Beside the op at the peak (which may hold little), the summary names the node execution holding the
    most at the peak, as the summary route says; a click selects its scope."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    entry = next(d for d in tb.api("summary", run=UNET, tag=tag)["devices"] if d["id"] == device)
    largest = entry["largest_at_peak"]
    assert largest is not None and largest["at_peak_bytes"] > 0, entry
    item = dash.loc(tid("summary-largest"))
    assert item.locator("code").text_content() == largest["name"]
    assert format_bytes(largest["at_peak_bytes"]) in item.text_content()
    assert int(item.get_attribute("data-bytes")) == largest["at_peak_bytes"]
    assert f"scope: {largest['scope'] or '(root)'}" in item.get_attribute("title")
    # The op at the peak stays beside it: a long name loses its first components ("…/"), never its
    # layer or its own name; the whole name is in the title of a Tab stop.
    op, name = dash.loc(tid("summary-op")), entry["peak_node"]["name"]
    shown = op.locator("code").text_content()
    assert shown == name or (shown.startswith("…/") and name.endswith(shown[1:])), (shown, name)
    assert shown.endswith("/" + name.rsplit("/", 1)[-1]) and len(shown.split("/")) >= min(4, len(name.split("/")))
    assert f"op at peak: {name}" in op.get_attribute("title")
    assert op.get_attribute("tabindex") == "0" and item.get_attribute("tabindex") == "0"
    box, summary = item.bounding_box(), _page_box(dash, "summary")
    assert box and box["width"] > 0 and box["y"] + box["height"] <= summary["y"] + summary["height"] + 0.5
    dash.screenshot("summary-largest")

    item.click()
    _assert_details_match(dash, UNET, tag, device, largest["scope"])


def test_curve_zoom_fetches_the_window(dashboard):
    """Dragging over the curve zooms in; once the zoom settles the page asks the curve route for that window
    (start_us/end_us) and draws its points, all inside the window; a double click goes back to the step."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    dash.loc(tid("curve-peak")).wait_for()
    assert dash.loc(tid("curve")).get_attribute("data-window") == ""
    curve_urls: list[str] = []
    dash.page.on("request", lambda r: curve_urls.append(r.url) if "/data/plugin/memory/curve" in r.url else None)

    # Drag over a span around the peak (where memory moves: the window holds events).
    step_curve = tb.api("curve", run=UNET, tag=tag, device=device)
    duration, peak_us = step_curve["duration_us"], step_curve["peak"]["time_us"]
    plot = dash.frame.evaluate(CURVE_LINE_JS)
    svg = dash.loc(f'{tid("curve")} svg').bounding_box()
    scale = svg["width"] / plot["viewBoxWidth"]

    def page_x(t_us):
        return svg["x"] + (plot["left"] + (plot["right"] - plot["left"]) * t_us / duration) * scale

    y = svg["y"] + svg["height"] / 2
    x0, x1 = page_x(max(0, peak_us - duration * 0.06)), page_x(min(duration, peak_us + duration * 0.06))
    dash.watch_ready()
    dash.page.mouse.move(x0, y)
    dash.page.mouse.down()
    dash.page.mouse.move((x0 + x1) / 2, y, steps=3)
    dash.page.mouse.move(x1, y, steps=3)
    dash.page.mouse.up()
    dash.wait_reloaded()
    dash.frame.wait_for_function(
        "() => !!document.querySelector('[data-testid=\"curve\"]').dataset.window && document.body.dataset.ready === '1'",
        timeout=10_000)

    start, end = map(int, dash.loc(tid("curve")).get_attribute("data-window").split(","))
    assert 0 <= start < peak_us < end <= duration and end - start < duration / 4, (start, peak_us, end, duration)
    asked = [parse_qs(urlparse(u).query) for u in curve_urls]
    windowed = [q for q in asked if "start_us" in q or "end_us" in q]
    assert windowed and windowed[-1]["start_us"] == [str(start)] and windowed[-1]["end_us"] == [str(end)], curve_urls
    body = tb.api("curve", **{k: v[0] for k, v in windowed[-1].items()})
    assert body["window"] == {"start_us": start, "end_us": end}
    assert body["t_us"] and all(start <= t <= end for t in body["t_us"])
    assert body["peak"] == step_curve["peak"], "the peak stays the whole step's"

    # Drawn: the window's points padded to its edges, so the line spans the plot and no vertex lies
    # outside it (the step's curve, clipped to the zoom, would have vertices on both sides).
    line = dash.frame.evaluate(CURVE_LINE_JS)
    assert line["xs"], line
    assert all(line["left"] - 0.5 <= x <= line["right"] + 0.5 for x in line["xs"]), line
    assert abs(min(line["xs"]) - line["left"]) < 0.5 and abs(max(line["xs"]) - line["right"]) < 0.5, line
    assert len(set(line["xs"])) >= min(len(body["t_us"]), 3), (len(set(line["xs"])), len(body["t_us"]))
    dash.screenshot("curve-zoomed")

    # Stacking keeps working on the window's data.
    dash.loc(tid("stack-toggle")).check()
    assert dash.loc(f'{tid("curve")} path.layer').count() > 0
    assert dash.loc(tid("curve")).get_attribute("data-window") == f"{start},{end}"
    dash.loc(tid("stack-toggle")).uncheck()

    # A double click shows the whole step again, from the data at hand.
    count = len(curve_urls)
    dash.loc(f'{tid("curve")} svg').dblclick()
    dash.wait_ready()
    assert dash.loc(tid("curve")).get_attribute("data-window") == ""
    assert not any("start_us" in u for u in curve_urls[count:]), curve_urls[count:]


def test_step_and_device_switch_reload(dashboard):
    dash, tb = dashboard, dashboard.tb
    run = logdata.TWODEV_RUN
    tag, device = _open_run(dash, run)
    assert (tag, device) == ("step_2", "GPU:0/GPU_0_bfc"), "latest step and the accelerator by default"

    def check(tag, device):
        assert dash.value("step-picker") == tag and dash.value("device-picker") == device
        curve = tb.api("curve", run=run, tag=tag, device=device)
        peak = curve["peak"]["bytes"]
        want = format_bytes(peak) if curve["absolute"] else "+" + format_bytes(peak)
        dash.frame.wait_for_function(
            "(want) => { const p = document.querySelector('[data-testid=\"curve-peak\"]');"
            " return !!p && p.textContent.includes(want); }", arg=want, timeout=10_000)
        return _assert_details_match(dash, run, tag, device, "")

    gpu_step2 = check("step_2", "GPU:0/GPU_0_bfc")
    dash.screenshot("twodev-gpu-step_2")

    dash.select("device-picker", "CPU:0/cpu")
    cpu_step2 = check("step_2", "CPU:0/cpu")
    assert cpu_step2 != gpu_step2
    dash.screenshot("twodev-cpu-step_2")

    dash.select("step-picker", "step_1")
    cpu_step1 = check("step_1", "CPU:0/cpu")  # the chosen device is kept across steps
    assert cpu_step1["at_peak_bytes"] * 3 == cpu_step2["at_peak_bytes"]
    dash.screenshot("twodev-cpu-step_1")

    # A selection inside one step is reset by a step switch, and follows the data.
    dash.click_tile("model")
    _assert_details_match(dash, run, "step_1", "CPU:0/cpu", "model")
    dash.select("step-picker", "step_2")
    check("step_2", "CPU:0/cpu")

    # Back on the U-Net: a step switch there changes the peak the curve shows.
    dash.select("run-picker", UNET)
    dash.select("step-picker", "step_1")
    curve = tb.api("curve", run=UNET, tag="step_1", device="CPU:0/mklcpu")
    assert format_bytes(curve["peak"]["bytes"]) in dash.loc(tid("curve-peak")).text_content()
    _assert_details_match(dash, UNET, "step_1", "CPU:0/mklcpu", "")
    dash.screenshot("unet-step_1")


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])


def test_compare_mode_and_back(dashboard, browser):
    """U-Net batch 4 against batch 2: the treemap coloured by the difference, both curves each over its own length,
    the scopes by absolute difference; a row selects its scope in both; the view's link opens the same comparison
    in a fresh browser; leaving finds the single step as it was."""
    dash, tb = dashboard, dashboard.tb
    run_a, run_b = "unet_b4", UNET
    tag, device = _open_run(dash, run_a)
    dash.click_tile("shared_model")
    _assert_details_match(dash, run_a, tag, device, "shared_model")
    before = {"tiles": dash.tile_scopes(), "details": dash.details_scope(),
              "peak": dash.loc(tid("curve-peak")).text_content()}

    dash.select("compare-picker", json.dumps([run_b, tag], separators=(",", ":")))
    assert dash.loc(tid("compare")).is_visible() and not dash.loc(tid("single-step")).is_visible()
    body = tb.api("compare", run=run_a, tag=tag, device=device, against_run=run_b, against_tag=tag,
                  group="layer", scope="", top=200)
    assert body["peak_rise_delta_bytes"] > 0
    assert dash.loc(tid("compare-delta")).get_attribute("data-bytes") == str(body["peak_rise_delta_bytes"])
    # The batch fed before the step is part of the start's change, which no listing holds: said beside the peaks.
    start = dash.loc(tid("compare-start"))
    assert start.get_attribute("data-bytes") == str(body["start_change"]["delta_bytes"]) != "0"
    assert "inputs +" in start.text_content()

    # Tiles: the root's children, coloured on a diverging scale (A larger: red, B larger: blue).
    children = {c["name"]: c for c in body["children"]}
    tiles = dash.loc(tid("compare-tile")).all()
    assert tiles and {t.get_attribute("data-scope") for t in tiles} <= set(children)
    for t in tiles:
        row = children[t.get_attribute("data-scope")]
        assert int(t.get_attribute("data-delta")) == row["delta_bytes"]
        r, _g, b = _rgb(t.evaluate("e => getComputedStyle(e).backgroundColor"))
        if row["delta_bytes"] > 0:
            assert r > b, (row, r, b)
        elif row["delta_bytes"] < 0:
            assert b > r, (row, r, b)

    # Both curves, each step's time scaled to its own length: the same width on the plot.
    widths = {}
    for side in ("a", "b"):
        path = dash.loc(tid(f"compare-curve-{side}"))
        assert int(path.get_attribute("data-duration-us")) == body[side]["duration_us"]
        widths[side] = path.evaluate("p => p.getBBox().width")
    assert body["a"]["duration_us"] != body["b"]["duration_us"]
    assert abs(widths["a"] - widths["b"]) <= 2, widths

    # The table: every entry below the root by absolute difference, but those whose change another row lists
    # (a scope's explaining child, a (self)'s scope: as `tb-memory diff` lists them).
    keys = dash.loc(f'{tid("compare-table")} tbody tr[data-key]').evaluate_all("rs => rs.map(r => r.dataset.key)")
    ranked = sorted(body["scopes"], key=lambda r: (-abs(r["delta_bytes"]), -abs(r["delta_allocated_bytes"]),
                                                    -abs(r["delta_output_bytes"]), r["name"]))
    assert any("listed_by" in r for r in ranked)
    assert keys == [r["name"] for r in ranked if "listed_by" not in r][:len(keys)] and len(keys) > 10
    dash.screenshot("compare")

    # A row selects its scope in both steps: the details, the row, and each curve's own bytes of it.
    top = ranked[0]
    dash.watch_ready()
    dash.loc(f'{tid("compare-table")} tbody tr[data-key={json.dumps(top["name"])}]').click()
    dash.wait_reloaded()
    assert dash.loc(tid("compare-details-scope")).get_attribute("data-scope") == top["name"]
    assert dash.loc(tid("compare-details-delta-bytes")).get_attribute("data-bytes") == str(top["delta_bytes"])
    row = dash.loc(f'{tid("compare-table")} tbody tr[aria-selected="true"]')
    assert row.count() == 1 and row.get_attribute("data-key") == top["name"]
    in_both = top["status"] in ("changed", "same")
    for side in ("a", "b"):
        assert dash.loc(tid(f"compare-highlight-{side}")).count() == (1 if in_both else 0), (side, top)
    dash.screenshot("compare-row-selected")

    # The link carries compare mode: a fresh browser opens the same comparison, the same row selected.
    link = dash.loc(tid("view-link")).get_attribute("href")
    assert "p.memory.against_run=" in link and "p.memory.compare_selected=" in link, link
    with _opened_elsewhere(browser, tb, link, "shared-compare-link") as shared:
        shared.loc(tid("compare")).wait_for(state="visible")
        assert shared.value("compare-picker") == json.dumps([run_b, tag], separators=(",", ":"))
        shared.frame.wait_for_function(
            f"(s) => document.querySelector('{tid('compare-details-scope')}')?.dataset.scope === s",
            arg=top["name"])
        assert shared.loc(tid("compare-delta")).get_attribute("data-bytes") == str(body["peak_rise_delta_bytes"])

    # Leaving: the single step exactly as it was (same tiles, same selection, same curve), nothing compared.
    dash.loc(tid("compare-leave")).click()
    dash.loc(tid("single-step")).wait_for(state="visible")
    assert not dash.loc(tid("compare")).is_visible()
    assert dash.value("compare-picker") == ""
    after = {"tiles": dash.tile_scopes(), "details": dash.details_scope(),
             "peak": dash.loc(tid("curve-peak")).text_content()}
    assert after == before
    assert dash.tile("shared_model").get_attribute("aria-selected") == "true"
    dash.assert_fits_width()


def test_trace_without_curve_says_so_and_labels_host_memory(dashboard):
    """A TF 1.x GPU dump has no allocation records: the summary says once that there is no curve and shows
    allocated and output bytes (no "peak 0 B"); pinned host memory is labelled as such, not as GPU memory."""
    dash, tb = dashboard, dashboard.tb
    run = logdata.OLD_TF1_RUN
    tag, device = _open_run(dash, run)
    summary = tb.api("summary", run=run, tag=tag)
    entry = next(d for d in summary["devices"] if d["id"] == device)
    assert entry["has_curve"] is False and not _is_pinned_host(entry)
    text = dash.loc(tid("summary")).inner_text()
    assert dash.loc(tid("summary-no-curve")).count() == 1 and text.lower().count("curve") == 1, text
    assert "Peak" not in text and "peak 0 B" not in text and dash.loc(tid("identity")).count() == 0, text
    for figure in ("allocated", "output"):
        item = dash.loc(tid(f"summary-{figure}"))
        assert int(item.get_attribute("data-bytes")) == entry["figures"][f"{figure}_bytes"]
        assert format_bytes(entry["figures"][f"{figure}_bytes"]) in item.inner_text()
    # No curve is drawn (nor a peak marked); the tiles are sized by allocated bytes, so they show.
    assert dash.loc(tid("curve-note")).is_visible() and dash.loc(tid("curve-peak")).count() == 0
    assert dash.value("size-picker") == "allocated_bytes"
    assert dash.loc(tid("treemap-tile")).count() > 0
    # The details panel and the graph show allocated and output bytes, and no at-peak figure.
    _assert_details_match(dash, run, tag, device, "", has_curve=False)
    details = dash.loc(tid("details")).inner_text()
    assert "at peak" not in details and "peak rise" not in details and "no curve" in details, details
    dash.wait_graph()
    graph = dash.loc(tid("graph")).text_content()
    assert dash.loc(tid("graph-node")).count() > 0 and "allocated" in graph and "at peak" not in graph, graph
    dash.screenshot("no-curve")

    options = dict(dash.loc(f'{tid("device-picker")} option').evaluate_all("os => os.map(o => [o.value, o.textContent])"))
    hosts = [d["id"] for d in summary["devices"] if _is_pinned_host(d)]
    assert hosts, summary["devices"]
    for d in summary["devices"]:
        assert ("(host memory)" in options[d["id"]]) == (d["id"] in hosts), options
    dash.select("device-picker", hosts[0])
    assert dash.loc(tid("summary-memory")).inner_text().strip() == "host memory"
    _assert_details_match(dash, run, tag, hosts[0], "", has_curve=False)
    dash.screenshot("host-memory")

    # Back on a step with a curve: at-peak sizes, the curve and its peak.
    _open_run(dash, UNET)
    dash.loc(tid("curve-peak")).wait_for()
    assert dash.value("size-picker") == "at_peak_bytes" and not dash.loc(tid("curve-note")).is_visible()


def test_jax_gpu_profile_opens_on_the_gpu_and_shows_the_xla_programs_layers(dashboard):
    """A real Keras 3 (JAX backend) GPU profile: one step per profiled batch, the GPU's allocator first,
    the XLA program's buffers by the Keras layers XLA placed in them (a click on one shows its bytes);
    pinned host memory is a space of its own."""
    dash, tb = dashboard, dashboard.tb
    run = "keras_jax"
    tag, device = _open_run(dash, run)
    assert device == "GPU:0/GPU_0_bfc"
    steps = dash.loc(f'{tid("step-picker")} option').evaluate_all("os => os.map(o => o.value)")
    assert [t.rsplit("/", 1)[-1] for t in steps] == ["step_2", "step_3", "step_4"]
    entry = next(d for d in tb.api("summary", run=run, tag=tag)["devices"] if d["id"] == device)
    largest = entry["largest_at_peak"]
    assert largest["op_type"] == "XLA program" and largest["name"] != "jit_train_step"
    item = dash.loc(tid("summary-largest"))
    assert item.locator("code").text_content() == largest["name"]
    assert int(item.get_attribute("data-bytes")) == largest["at_peak_bytes"]
    assert "XLA program" in dash.loc(tid("summary")).inner_text()
    # The GPU's allocations are all there: the one note is the XLA program's (its buffers by op).
    note = dash.loc(tid("summary-note")).text_content()
    assert note.startswith("XLA programs ran in this step") and "ran work in this profile" not in note, note
    assert "compiled HLO" in note
    _assert_details_match(dash, run, tag, device, "")
    layer = largest["name"].split("/")[0]  # the Keras layer holding the most (`relu1`): a tile of its own
    dash.click_tile(layer)
    _assert_details_match(dash, run, tag, device, layer)
    dash.screenshot("jax-gpu")

    dash.select("device-picker", "CPU:0/xla_gpu_host_bfc")
    host = next(d for d in tb.api("summary", run=run, tag=tag)["devices"] if d["id"] == "CPU:0/xla_gpu_host_bfc")
    assert host["memory_kind"] == "host"
    assert dash.loc(tid("summary-largest")).locator("code").text_content() == host["largest_at_peak"]["name"]
    assert host["largest_at_peak"]["name"].startswith("(copies to device)/")
    _assert_details_match(dash, run, tag, "CPU:0/xla_gpu_host_bfc", "")


def test_html_in_names_is_text_and_runs_no_script(dashboard):
    dash = dashboard
    run = logdata.XSS_RUN
    option_texts = dash.loc(f'{tid("run-picker")} option').all_inner_texts()
    assert any(logdata.XSS_RUN in t for t in option_texts), option_texts
    tag, device = _open_run(dash, run)
    assert tag == "step_<b>1</b>"
    assert "step_<b>1</b>" in dash.loc(f'{tid("step-picker")} option').all_inner_texts()[0]

    tile = dash.tile(logdata.HTML_SCOPE)
    tile.wait_for()
    assert logdata.HTML_SCOPE in tile.inner_text(), "the tile should show the name as text"
    assert dash.tile(logdata.HTML_SCOPE_2).count() == 1
    dash.click_tile(logdata.HTML_SCOPE)
    _assert_details_match(dash, run, tag, device, logdata.HTML_SCOPE)
    assert dash.loc(tid("details-scope")).inner_text().strip() == logdata.HTML_SCOPE
    assert f"{logdata.HTML_SCOPE}/{logdata.HTML_SCOPE}" in dash.loc(tid("node-table")).inner_text()
    # The graph (boxes from the trace, no GraphDef) shows the names as text too.
    dash.wait_graph()
    assert dash.graph_node(logdata.HTML_SCOPE).count() == 1
    assert "<img" in dash.graph_node(logdata.HTML_SCOPE).text_content()
    dash.tile(logdata.HTML_SCOPE).dblclick()
    dash.wait_focus(logdata.HTML_SCOPE)
    dash.page.wait_for_timeout(300)  # give any injected onerror/onload handler time to fire
    dash.screenshot("xss-run")

    for where, target in (("plugin frame", dash.frame), ("TensorBoard page", dash.page)):
        assert target.evaluate("() => typeof window.__xss") == "undefined", f"script ran in the {where}"
        assert target.evaluate("() => document.querySelectorAll('img[src=\"x\"], svg[onload]').length") == 0, where
        assert target.evaluate("() => document.querySelectorAll('[onerror], [onload]').length") == 0, where
    assert dash.dialogs == []


def test_node_table_exports_exact_bytes(dashboard):
    dash, tb = dashboard, dashboard.tb
    tag, device = _select_unet_01(dash)
    nodes = tb.api("scope", run=UNET, tag=tag, device=device, group="layer", scope=UNET_01)["nodes"]
    with dash.page.expect_download() as info:
        dash.loc(tid("export-csv")).click()
    rows = list(csv.reader(io.StringIO(open(info.value.path(), encoding="utf-8", newline="").read())))
    assert len(rows) == 1 + len(nodes), "a header row and one row per node of the scope route"
    for row, node in zip(rows[1:], nodes):
        assert row[0] == node["raw_name"]
        assert str(node["figures"]["at_peak_bytes"]) in row, "exact integer bytes in the CSV"
    with dash.page.expect_download() as info:
        dash.loc(tid("export-json")).click()
    exported = json.loads(open(info.value.path(), encoding="utf-8").read())
    assert [r["raw_name"] for r in exported] == [n["raw_name"] for n in nodes]
    assert [r["allocated_bytes"] for r in exported] == [n["figures"]["allocated_bytes"] for n in nodes]
    # The whole step's op-type table lists the summary's op types.
    summary = tb.api("summary", run=UNET, tag=tag)
    op_types = next(d for d in summary["devices"] if d["id"] == device)["op_types"]
    table = dash.loc(tid("op-type-table")).inner_text()
    for row in op_types[:5]:
        assert row["name"] in table


def test_bad_steps_explain_themselves_and_never_blank_the_page(dashboard):
    """A step without memory and a corrupt step show why (and how to trace); a good one still works."""
    dash, tb = dashboard, dashboard.tb
    run = logdata.BROKEN_RUN
    dash.select("run-picker", run)
    assert dash.value("step-picker") == "no_memory"  # the latest step
    summary = tb.api("summary", run=run, tag="no_memory")
    assert summary["status"] == "no_memory"
    empty = dash.loc(tid("empty-state"))
    empty.wait_for(state="visible")
    assert "FULL_TRACE" in empty.inner_text(), "the empty state should say how to trace with memory"
    # ... and how a TF2 or Keras user records it (the profiler): it had said only that they write no step stats.
    assert "tf.profiler.experimental.start" in dash.loc(tid("profile-howto")).inner_text()
    status = dash.loc(tid("status")).inner_text().strip()
    assert status, "the status line should say what happened"
    if summary["message"]:
        assert summary["message"] not in status, "the status line should not repeat the empty state's message"
    assert dash.loc(tid("step-picker")).is_enabled() and dash.loc(tid("run-picker")).is_enabled()
    dash.screenshot("no_memory")

    dash.select("step-picker", "corrupt")
    corrupt = tb.api("summary", run=run, tag="corrupt")
    assert corrupt["status"] == "corrupt" and corrupt["message"]
    dash.frame.wait_for_function(
        "() => { const e = document.querySelector('[data-testid=\"empty-state\"]');"
        " return !!e && /not a valid RunMetadata|cannot be read/.test(e.textContent); }")
    text = empty.inner_text()
    # Tracing with FULL_TRACE does not fix a corrupt record: no how-to, the decode error once.
    assert "FULL_TRACE" not in text and dash.loc(tid("trace-howto")).count() == 0, text
    page_text = dash.frame.evaluate("() => document.body.innerText")
    assert page_text.count(corrupt["message"]) == 1, "the decode error should be shown exactly once"
    status = dash.loc(tid("status")).inner_text().strip()
    assert status and corrupt["message"] not in status, f"the status line repeats the message: {status!r}"
    dash.screenshot("corrupt")

    dash.select("step-picker", "good")
    dash.loc(tid("empty-state")).wait_for(state="hidden")
    device = dash.value("device-picker")
    assert device == "GPU:0/GPU_0_bfc"
    _assert_details_match(dash, run, "good", device, "")
    assert dash.loc(tid("treemap-tile")).count() > 0
    dash.loc(tid("curve-peak")).wait_for()
    dash.screenshot("good-after-bad")


# ---- the first screen at 1280x800 ----

# The treemap's and graph's tops, in page pixels: in the upper half of the 800 px screen, with room
# for a summary of three lines (its first line wraps rather than cut the names of the op at the peak
# and the biggest holder, which puts the U-Net's treemap at about y=405).
FIRST_SCREEN_TOP_PX = 420
# Label sizes in the graph view: a fit never shows them smaller than this (screen pixels).
MIN_GRAPH_LABEL_PX = 8.9

BOXES_JS = """(sel) => [...document.querySelectorAll(sel)].map(e => {
  const r = e.getBoundingClientRect();
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height,
          scrollWidth: e.scrollWidth, clientWidth: e.clientWidth, overflowX: getComputedStyle(e).overflowX,
          id: e.dataset.testid || e.firstElementChild?.dataset.testid || ''};
})"""

GRAPH_JS = """() => {
  const area = document.querySelector('[data-testid="graph"]').getBoundingClientRect();
  const inside = (r) => r.left >= area.left - 1 && r.right <= area.right + 1 && r.top >= area.top - 1 && r.bottom <= area.bottom + 1;
  const labels = [...document.querySelectorAll('[data-testid="graph-node"] text')]
    .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  const boxes = [...document.querySelectorAll('[data-testid="graph-node"]')].map(g => ({id: g.dataset.id, inside: inside(g.getBoundingClientRect())}));
  const edges = [...document.querySelectorAll('[data-testid="graph"] path.edge')].map(p => inside(p.getBoundingClientRect()));
  return {labels, boxes, edges};
}"""


def _page_box(dash, testid):
    box = dash.loc(tid(testid)).first.bounding_box()  # main-page coordinates: the iframe's offset included
    assert box is not None, f"{testid} is not visible"
    return box


def test_first_screen_at_1280x800(dashboard):
    """Pickers, a summary of at most three lines, the curve and the tops of the treemap and graph without
    scrolling; no table wider than the page; readable graph labels; the layout does not move on a click."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    dash.wait_graph()
    dash.graph_node("shared_model").wait_for()
    assert dash.frame.evaluate("() => window.scrollY") == 0

    summary = _page_box(dash, "summary")
    line = dash.frame.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('[data-testid=\"summary\"] .summary-line')).lineHeight)")
    # Its first line wraps rather than cut the names of the op at the peak and the biggest holder.
    assert summary["height"] <= 3 * line + 12, f"the summary should take at most three lines: {summary}"
    curve = _page_box(dash, "curve")
    treemap = _page_box(dash, "treemap")
    graph = _page_box(dash, "graph")
    assert summary["y"] < curve["y"] < treemap["y"]
    for name, box in (("treemap", treemap), ("graph", graph)):
        assert box["y"] < FIRST_SCREEN_TOP_PX, f"the {name} starts at y={box['y']:.0f}, below the first screen"
    assert curve["y"] + curve["height"] <= treemap["y"]
    dash.screenshot("first-screen")

    # Graph: labels readable at the starting zoom; the biggest box in view; all boxes and edges in view
    # whenever the starting zoom is above the readable minimum (the graph was shrunk to fit).
    g = dash.frame.evaluate(GRAPH_JS)
    assert g["labels"] and min(g["labels"]) >= MIN_GRAPH_LABEL_PX, f"graph labels too small: {min(g['labels']):.1f}px"
    graph_nodes = tb.api("graph", run=UNET, tag=tag, device=device, scope="")["nodes"]
    biggest = max(graph_nodes, key=lambda n: n["at_peak_bytes"])["id"]
    assert next(b for b in g["boxes"] if b["id"] == biggest)["inside"], f"the biggest box {biggest} is out of view"
    if min(g["labels"]) > 9.5:
        assert all(b["inside"] for b in g["boxes"]) and all(g["edges"]), "a fitted graph should show every box and edge"

    def check_tables():
        dash.assert_fits_width()
        for w in dash.frame.evaluate(BOXES_JS, ".table-wrap"):
            assert w["right"] <= 1280 + 0.5, f"table {w['id']} runs past the page's right edge: {w}"
            # What does not fit scrolls inside its box; the op-type tables fit whole.
            assert w["overflowX"] in ("auto", "scroll") or w["scrollWidth"] <= w["clientWidth"], w
            if w["id"] in ("op-type-table", "scope-op-type-table"):
                assert w["scrollWidth"] <= w["clientWidth"] + 1, f"{w['id']} is clipped: {w}"

    check_tables()
    # A click restyles and fills the details: nothing above or beside moves.
    before = {k: _page_box(dash, k)["y"] for k in ("curve", "treemap", "graph")}
    dash.click_tile("shared_model")
    _assert_details_match(dash, UNET, tag, device, "shared_model")
    after = {k: _page_box(dash, k)["y"] for k in ("curve", "treemap", "graph")}
    assert after == before, f"the layout moved on a click: {before} -> {after}"
    check_tables()

    # Keyboard: a focused tile selects with Enter, a focused graph box too.
    other = next(s for s in dash.tile_scopes() if s != "shared_model")
    dash.tile(other).focus()
    dash.page.keyboard.press("Enter")
    _assert_details_match(dash, UNET, tag, device, other)
    dash.graph_node("shared_model").focus()
    dash.page.keyboard.press("Enter")
    _assert_details_match(dash, UNET, tag, device, "shared_model")


def test_fits_tensorboard_at_800(browser, tb, request):
    """In TensorBoard 800 px wide the tab does not scroll sideways: the details stack under the curve and
    the treemap (before the findings), the summary wraps and keeps the Group picker and the link on screen."""
    with _own_context(browser, tb, request.node.name, width=800) as dash:
        _open_run(dash, UNET)
        dash.assert_fits_width()
        for name in ("summary", "curve", "treemap", "details", "group-picker", "view-link"):
            box = dash.loc(tid(name)).first.bounding_box()  # page coordinates
            assert box is not None and box["width"] > 0, name
            assert box["x"] + box["width"] <= 800 + 0.5, f"{name} runs past the right edge: {box}"
        treemap, details = _page_box(dash, "treemap"), _page_box(dash, "details")
        findings = dash.loc(tid("findings")).bounding_box()
        assert treemap["y"] + treemap["height"] <= details["y"], "the details should be under the treemap"
        assert findings is None or details["y"] < findings["y"], "the details should come before the findings"
        dash.screenshot("tensorboard-800")


@pytest.mark.parametrize("scheme", ["dark"])
def test_first_screen_dark(browser, tb, scheme, request):
    """The same first screen in the dark theme: nothing wider than the page, treemap and graph on it."""
    with _own_context(browser, tb, request.node.name, color_scheme=scheme) as dash:
        _open_run(dash, UNET)
        assert dash.frame.evaluate("() => matchMedia('(prefers-color-scheme: dark)').matches")
        for name in ("treemap", "graph"):
            assert _page_box(dash, name)["y"] < FIRST_SCREEN_TOP_PX
        dash.assert_fits_width()
        dash.screenshot("first-screen-dark")
        # The tab follows TensorBoard's own dark-mode toggle (a class on its page's body), both ways.
        dark = "() => document.documentElement.dataset.theme"
        assert dash.frame.evaluate(dark) == "dark"
        dash.page.evaluate("() => document.body.classList.remove('dark-mode')")
        dash.frame.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
        background = "() => getComputedStyle(document.body).backgroundColor"
        assert dash.frame.evaluate(background) == "rgb(255, 255, 255)"
        dash.page.evaluate("() => document.body.classList.add('dark-mode')")
        dash.frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
        assert dash.frame.evaluate(background) != "rgb(255, 255, 255)"
