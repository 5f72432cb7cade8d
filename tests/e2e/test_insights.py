"""Browser tests of what to change so a step fits (issue 12): the findings panel, the batch-size what-if
and the model's resident memory, each against the routes' own answers."""

from __future__ import annotations

import e2e_logdata as logdata
from e2e_helpers import format_bytes, tid
from test_dashboard import UNET, _assert_details_match, _open_run


def _whatif_shown(dash) -> dict:
    headline = dash.loc(tid("whatif-predicted"))
    return {"batch": int(headline.get_attribute("data-batch")), "bytes": int(headline.get_attribute("data-bytes")),
            "method": dash.loc(tid("whatif-method")).text_content(),
            "max_batch": dash.loc(tid("whatif-max-batch")).get_attribute("data-max-batch")}


def _type(dash, testid: str, text: str) -> None:
    """Types into an input and waits for the debounced request's answer (the what-if panel's own
    readiness: it is not one of the main views)."""
    dash.wait_panel("whatif")
    dash.watch_ready("whatif")
    dash.loc(tid(testid)).fill(text)
    dash.wait_reloaded()


def test_findings_select_their_layer(dashboard):
    """The U-Net's findings (the allocator gap oneDNN leaves on CPU) are listed as the summary route gives
    them; a gap names no scope (no op holds it) and selects nothing. The growing run's finding names the
    layer that keeps the bytes: a click selects it, and details, treemap and graph follow."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    findings = tb.api("summary", run=UNET, tag=tag)["findings"]
    assert findings, "the demo U-Net should produce a finding (allocator_gap)"
    items = dash.loc(tid("finding"))
    assert items.count() == len(findings)
    first, shown = findings[0], items.first
    assert shown.get_attribute("data-kind") == first["kind"] == "allocator_gap"
    assert int(shown.get_attribute("data-bytes")) == first["bytes"]
    assert first["message"] in shown.text_content() and first["suggestion"] in shown.text_content()
    assert first["scope"] == "" and shown.get_attribute("role") is None  # nothing to select

    run = "growth"
    tag, device = _open_run(dash, run)
    findings = tb.api("summary", run=run, tag=tag)["findings"]
    first = next(f for f in findings if f["scope"])
    shown = dash.loc(f'{tid("finding")}[data-kind="{first["kind"]}"]').first
    shown.click()
    _assert_details_match(dash, run, tag, device, first["scope"])
    parent = first["scope"].rpartition("/")[0]
    dash.wait_focus(parent)
    assert dash.tile(first["scope"]).get_attribute("aria-selected") == "true"
    assert shown.get_attribute("aria-pressed") == "true"
    # The layer's own parameters, from the scope route (the run has its graph).
    scope = tb.api("scope", run=run, tag=tag, device=device, scope=first["scope"])
    if scope["param_count"]:
        assert int(dash.loc(tid("details-params")).get_attribute("data-count")) == scope["param_count"]
    dash.screenshot("finding-selected")


def test_a_jax_step_that_does_not_donate_its_state_shows_and_selects_it(dashboard):
    """The JAX MLP's train step returns its new parameters without donating the old: the finding says
    so, as the summary route gives it, and a click selects `(updated arguments)`, whose details are
    the scope route's."""
    dash, tb = dashboard, dashboard.tb
    run = "jax_mlp"
    tag, _ = _open_run(dash, run)
    (finding,) = [f for f in tb.api("summary", run=run, tag=tag)["findings"] if f["kind"] == "undonated_arguments"]
    assert finding["scope"] == "(updated arguments)" and finding["bytes"] > 0
    shown = dash.loc(f'{tid("finding")}[data-kind="undonated_arguments"]')
    assert shown.count() == 1 and int(shown.get_attribute("data-bytes")) == finding["bytes"]
    assert finding["suggestion"] in shown.text_content()
    shown.click()
    _assert_details_match(dash, run, tag, finding["device"], finding["scope"])
    dash.wait_focus("")
    assert dash.tile(finding["scope"]).get_attribute("aria-selected") == "true"


def test_whatif_predicts_the_peak_at_batch_8(dashboard):
    """Batch 8 from one traced step, then fitted with the batch-4 run; a limit gives the largest batch that
    fits, marked on the chart; the figures are the whatif route's."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    _type(dash, "whatif-batch", "3")
    _type(dash, "whatif-batch", "8")
    one = tb.api("whatif", run=UNET, tag=tag, device=device, batch=8)
    assert one["predicted_peak_bytes"] is not None
    assert _whatif_shown(dash) == {"batch": 8, "bytes": one["predicted_peak_bytes"],
                                   "method": "from one step (batch 2)", "max_batch": ""}
    assert format_bytes(one["predicted_peak_bytes"]) in dash.loc(tid("whatif-predicted")).text_content()
    assert dash.loc(f'{tid("whatif-chart")} {tid("whatif-asked")}').count() == 1
    assert dash.loc(f'{tid("whatif-layers")} tbody tr').count() == len(one["layers"])

    dash.watch_ready("whatif")
    dash.loc(tid("whatif-runs")).select_option(["unet_b4"])
    dash.wait_reloaded()
    fit = tb.api("whatif", run=UNET, tag=tag, device=device, batch=8, runs="unet_b4")
    shown = _whatif_shown(dash)
    assert shown["bytes"] == fit["predicted_peak_bytes"] and shown["method"].startswith("fitted over 2 runs")

    limit = 64 << 20
    _type(dash, "whatif-limit", "64 MiB")
    limited = tb.api("whatif", run=UNET, tag=tag, device=device, batch=8, runs="unet_b4", limit=limit)
    assert limited["max_batch"] is not None
    assert _whatif_shown(dash)["max_batch"] == str(limited["max_batch"])
    assert dash.loc(tid("whatif-limit-line")).count() == 1
    if limited["max_batch"] > 0:
        assert dash.loc(tid("whatif-max-marker")).count() == 1
    dash.loc(tid("whatif")).scroll_into_view_if_needed()
    dash.screenshot("whatif")


def test_whatif_fits_with_another_step_of_the_run_shown(dashboard):
    """The runs to fit with also list the run's own other steps (a script that traced several batch sizes into
    one run), under their own heading: picking one asks the route for it as a tag of this run, and the answer
    shown is the route's."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    _type(dash, "whatif-batch", "8")
    groups = dash.loc(f'{tid("whatif-runs")} optgroup')
    assert groups.first.get_attribute("label") == "steps of this run"
    other = next(t for t in ("step_1", "step_2", "step_3") if t != tag)
    dash.watch_ready("whatif")
    with dash.page.expect_request(lambda r: "/whatif?" in r.url and f"tags={other}" in r.url):
        dash.loc(tid("whatif-runs")).select_option([other])
    dash.wait_reloaded()
    answer = tb.api("whatif", run=UNET, tag=tag, device=device, batch=8, tags=other)
    assert [(r["run"], r["tag"]) for r in answer["runs"]] == [(UNET, tag), (UNET, other)]
    assert _whatif_shown(dash)["bytes"] == answer["predicted_peak_bytes"]


def test_whatif_without_a_baseline_predicts_the_rise(dashboard):
    """A demo step whose allocator reports no bytes in use (bigconv, oneDNN off: the plain `cpu`): the
    route's series has no absolute peaks (null), and the panel predicts and draws the rise over the
    step's start."""
    dash, tb = dashboard, dashboard.tb
    run = "bigconv"
    tag, device = _open_run(dash, run)
    _type(dash, "whatif-batch", "8")
    answer = tb.api("whatif", run=run, tag=tag, device=device, batch=8)
    assert answer["predicted_peak_bytes"] is None and answer["predicted_peak_rise_bytes"] > 0
    assert dash.loc(f'{tid("whatif")} {tid("error")}').count() == 0
    shown = _whatif_shown(dash)
    assert shown["batch"] == 8 and shown["bytes"] == answer["predicted_peak_rise_bytes"]
    assert "over the step’s start" in dash.loc(tid("whatif-predicted")).text_content()
    assert dash.loc(f'{tid("whatif-chart")} {tid("whatif-asked")}').count() == 1


def test_whatif_says_why_it_cannot_answer(dashboard):
    """A step without feeds (the hand-built two-device run) cannot tell its batch: the panel says so."""
    dash = dashboard
    _open_run(dash, logdata.TWODEV_RUN)
    error = dash.loc(f'{tid("whatif")} {tid("error")}')
    error.wait_for()
    assert "feed" in error.text_content()
    assert dash.loc(tid("whatif-predicted")).text_content() == ""


def test_whatif_fits_xla_steps_at_two_batch_sizes(dashboard):
    """A step of XLA programs alone cannot be scaled: the panel says to fit it with another batch size
    (the route's answer); picking the run at batch 256 fits both, the fit alone, as the route gives it."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, "jit_b64")
    error = dash.loc(f'{tid("whatif")} {tid("error")}')
    error.wait_for()
    assert "fit over both" in error.text_content() and "besides 64" in error.text_content()
    dash.watch_ready("whatif")
    dash.loc(tid("whatif-runs")).select_option(["jit_b256"])
    dash.wait_reloaded()
    shown = _whatif_shown(dash)
    fit = tb.api("whatif", run="jit_b64", tag=tag, device=device, batch=shown["batch"], runs="jit_b256")
    assert fit["method"] == "fit" and fit["predictions"]["one_step"] is None
    assert [run["batch"] for run in fit["runs"]] == [64, 256]
    assert shown["bytes"] == (fit["predicted_peak_bytes"] or fit["predicted_peak_rise_bytes"])
    assert shown["method"].startswith("fitted over 2 runs")
    assert dash.loc(f'{tid("whatif")} {tid("error")}').count() == 0
    assert dash.loc(f'{tid("whatif-chart")} {tid("whatif-asked")}').count() == 1


def test_resident_memory_and_the_peak_as_absolute_or_rise(dashboard):
    """The U-Net's parameter count and layers as the summary's `resident` gives them; categories show their
    resident bytes; the summary switches between absolute memory at the peak and the rise."""
    dash, tb = dashboard, dashboard.tb
    tag, device = _open_run(dash, UNET)
    entry = next(d for d in tb.api("summary", run=UNET, tag=tag)["devices"] if d["id"] == device)
    resident = entry["resident"]
    count = dash.loc(tid("resident-param-count"))
    assert int(count.get_attribute("data-count")) == resident["param_count"] > 0
    assert f"{resident['param_count']:,} parameters" in count.text_content()
    assert dash.loc(f'{tid("resident-layers")} tbody tr').count() == len(resident["layers"])
    parameters = dash.loc(f'{tid("resident-categories")} tr[data-category="parameters"] td[data-bytes]')
    assert int(parameters.get_attribute("data-bytes")) == resident["param_bytes"] > 0
    # The whole step's details (nothing selected) name them beside its at-peak categories.
    assert f"parameters {format_bytes(resident['param_bytes'])}" in dash.loc(tid("details-resident")).text_content()
    # mklcpu's start counts its requests of 256 KiB and more: said beside the start and under the resident line.
    assert entry["start_counts_from_bytes"] == 256 * 1024 and resident["counted_note"]
    assert dash.loc(tid("resident-counted-note")).text_content() == f"Note: {resident['counted_note']}."
    assert "counts only its requests of 256 KiB" in dash.loc(tid("summary-start-partial")).get_attribute("title")

    # Beside that start, the peak with the model's smaller tensors, which no reading counts.
    assert resident["uncounted_bytes"] > 0
    assert int(dash.loc(tid("summary-peak-with-small")).get_attribute("data-bytes")) == \
        resident["peak_with_uncounted_bytes"] == entry["peak_bytes"] + resident["uncounted_bytes"]

    peak = dash.loc(tid("summary-peak"))
    curve_peak = dash.loc(f'{tid("curve-peak")} text')
    assert peak.get_attribute("data-mode") == "absolute"
    assert peak.text_content() == format_bytes(entry["peak_bytes"])
    assert curve_peak.text_content().startswith(f"peak {format_bytes(entry['peak_bytes'])} at ")
    dash.loc(tid("summary-peak-mode")).click()
    assert peak.get_attribute("data-mode") == "rise"
    assert peak.text_content() == "+" + format_bytes(entry["peak_rise_bytes"])
    # The curve follows: its peak is the rise over the step's start.
    assert curve_peak.text_content().startswith(f"peak +{format_bytes(entry['peak_rise_bytes'])} over step start")
    dash.loc(tid("summary-peak-mode")).click()
    assert peak.text_content() == format_bytes(entry["peak_bytes"])
    dash.loc(tid("resident")).scroll_into_view_if_needed()
    dash.screenshot("resident")
