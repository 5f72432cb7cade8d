"""The Memory tab: thin HTTP routes over the engine (docs/http_api.md)."""

from __future__ import annotations

import json
import logging
import os
import time

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from tensorboard import plugin_util
from werkzeug import wrappers

from . import compare, compare_report, findings, report, store, whatif, whatif_report
from .analysis import GROUPS
from .figures import LIMIT_MAX_BYTES

logger = logging.getLogger(__name__)

PLUGIN_NAME = "memory"
_STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
# Only these built files are served; nothing else from disk.
_STATIC_FILES = {"index.js": "text/javascript"}
# `default_step` analyses one step per run, for this many runs at most (the most recently written).
DEFAULT_STEP_MAX_RUNS = 32


class BadRequest(ValueError):
    """A parameter that is missing, malformed or out of range (HTTP 400)."""


class StepNotAnalysable(ValueError):
    """The step's blob is corrupt or carries no memory (HTTP 422)."""


def _json(request, body, code=200, started=None):
    """The JSON response; with `started` (time.perf_counter() when the request came in), a
    `Server-Timing: app;dur=<ms>` header says how long the server worked on it (the browser's
    network panel and benchmarks/bench_browser.py show it beside each request)."""
    headers = None
    if started is not None:
        headers = [("Server-Timing", f"app;dur={(time.perf_counter() - started) * 1e3:.1f}")]
    return http_util.Respond(request, json.dumps(body), "application/json", code=code, headers=headers)


_LISTS = frozenset({"runs", "tags"})  # parameters a route takes as lists (the what-if's steps to fit with)


def _route(handler):
    """GET only; turns our exceptions into JSON errors."""

    @wrappers.Request.application
    def wrapped(self, request):
        started = time.perf_counter()
        if request.method != "GET":
            return _json(request, {"error": "only GET is allowed"}, 405, started)
        # A parameter given twice is asked of one value (`run=a&run=b` had read the first, said nothing), but
        # the lists the what-if takes (`runs`, `tags`).
        twice = sorted(name for name, values in request.args.lists() if len(values) > 1 and name not in _LISTS)
        if twice:
            return _json(request, {"error": f"parameter {twice[0]!r} given {len(request.args.getlist(twice[0]))} "
                                            "times: give it once"}, 400, started)
        try:
            with store.gc_paused():  # a cold request decodes a whole step: see gc_paused
                body = handler(self, request)
            return _json(request, body, started=started)
        except BadRequest as exc:
            return _json(request, {"error": str(exc)}, 400, started)
        except report.NotFound as exc:
            return _json(request, {"error": str(exc)}, 404, started)
        except StepNotAnalysable as exc:
            return _json(request, {"error": str(exc)}, 422, started)
        except Exception as exc:  # noqa: BLE001 - a bug: logged, and still answered in JSON
            logger.exception("tb-memory: %s failed on %s", handler.__name__, request.full_path)
            return _json(request, {"error": f"internal error in {handler.__name__}: {type(exc).__name__}: {exc}"},
                         500, started)

    wrapped.__name__ = handler.__name__
    return wrapped


def _int_arg(request, name, default, low, high):
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"parameter {name!r} must be between {low} and {high}, got {value}")
    return value


def _window(request):
    """(start_us, end_us) from start_us and end_us, both or neither, start < end."""
    start = _int_arg(request, "start_us", None, 0, 2**62)
    end = _int_arg(request, "end_us", None, 0, 2**62)
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise BadRequest("parameters 'start_us' and 'end_us' go together")
    if start >= end:
        raise BadRequest(f"'start_us' ({start}) must be before 'end_us' ({end})")
    return start, end


def _required(request, name):
    value = request.args.get(name)
    if value is None or value == "":
        raise BadRequest(f"parameter {name!r} is required")
    return value


def _group(request):
    group = request.args.get("group") or "layer"
    if group not in GROUPS:
        raise BadRequest(f"parameter 'group' must be one of {', '.join(GROUPS)}, got {group!r}")
    return group


class MemoryPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        self._store = store.StepStore(context.data_provider, logdir=context.logdir,
                                      logdir_spec=getattr(context.flags, "logdir_spec", None) or None)
        self._default_step = None  # (the steps compared, the answer): steps are immutable once written
        self._comparisons = store.LRUCache(4)  # the page asks for one pair again at every scope it opens

    def get_plugin_apps(self):
        return {
            "/runs": self.runs_route,
            "/default_step": self.default_step_route,
            "/summary": self.summary_route,
            "/scopes": self.scopes_route,
            "/scope": self.scope_route,
            "/curve": self.curve_route,
            "/graph": self.graph_route,
            "/compare": self.compare_route,
            "/whatif": self.whatif_route,
            "/index.js": self.static_route,
        }

    def is_active(self):
        # Event files activate us through data_plugin_names; profiles (`.xplane.pb`) are not
        # in the data provider, and `tf.profiler.experimental` writes no event file at all.
        return self._store.has_profiles()

    def data_plugin_names(self):
        return (store.TAGGED_RUN_METADATA, store.RUN_METADATA, store.RUN_METADATA_GRAPH)

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Memory", disable_reload=True)

    # -- impl methods: what tests and routes call ------------------------------

    def runs_impl(self, ctx, experiment):
        with_graph = self._store.runs_with_graph(ctx, experiment)
        runs = []
        listed = self._store.list_steps(ctx, experiment)
        devices = self._store.steps_devices(ctx, experiment, [ref for refs in listed.values() for ref in refs])
        for run, refs in listed.items():
            steps = [{"tag": ref.tag, "step": ref.step, "wall_time": ref.wall_time, "source": ref.source,
                      "devices": devices[ref], "function": ref.function} for ref in refs]
            # The step the page opens the run on, by the rule the CLI and default_step use (one home).
            latest = store.latest_step(refs, devices.__getitem__).tag if refs else None
            runs.append({"run": run, "has_graph": run in with_graph, "latest_tag": latest, "steps": steps})
        return {"runs": runs}

    def _devices_of(self, ctx, experiment):
        """A step's devices as the `runs` route lists them (cached by blob)."""
        return lambda ref: self._store.step_devices(ctx, experiment, ref)

    def default_step_impl(self, ctx, experiment, max_runs=DEFAULT_STEP_MAX_RUNS):
        """The step to open first: the largest peak among the latest steps of the most recent runs.

        `runs` stays cheap (it analyses nothing); this analyses one step per run, for at most
        `max_runs` runs, and compares each step's default memory space by the figures the summary
        shows for it (`peak_bytes` / `peak_rise_bytes`, `has_curve`), read from the analysis without
        building the summary: the page asks for the chosen step's summary next, with its run graph.
        """
        steps = self._store.list_steps(ctx, experiment)
        devices = self._store.steps_devices(ctx, experiment, [ref for refs in steps.values() for ref in refs])
        latest = [store.latest_step(refs, devices.__getitem__) for refs in steps.values() if refs]
        compared = sorted(latest, key=lambda ref: ref.wall_time, reverse=True)[:max_runs]
        key = (experiment, tuple(compared))
        if self._default_step is not None and self._default_step[0] == key:
            return self._default_step[1]
        candidates = []
        for ref in compared:
            step = self._store.analysis(ctx, experiment, ref)
            if step.status != "ok":
                continue
            space = step.space(None)  # the summary's `default_device`
            if space is None:
                continue
            shown = report.peak_fields(space)  # as the summary shows it
            candidates.append((ref, space, shown["peak_bytes"], shown["peak_rise_bytes"]))
        # Like with like: absolute peaks where every step with a curve has one, else every step's rise (a
        # step without a baseline had been ranked by its rise against the others' absolute bytes).
        absolute = all(peak is not None for _, space, peak, _ in candidates if space.has_curve)
        best = None
        for ref, space, peak_bytes, rise_bytes in candidates:
            peak = peak_bytes if absolute else rise_bytes
            rank = (bool(space.has_curve), peak or 0)
            if best is None or rank > best[0]:
                best = (rank, ref, space.trace.id, peak, None if peak is None else absolute)
        body = {"run": None, "tag": None, "device": None, "reason": None, "peak_bytes": None, "absolute": None,
                "compared_steps": len(compared), "run_count": len(latest)}
        if best is not None:
            _, ref, device_id, peak, absolute = best
            body.update(run=ref.run, tag=ref.tag, device=device_id, reason="largest_peak", peak_bytes=peak,
                        absolute=absolute)
        self._default_step = (key, body)
        return body

    def _step(self, ctx, experiment, run, tag):
        steps = self._store.list_steps(ctx, experiment)
        if run not in steps:
            raise report.NotFound(f"unknown run {run!r}")
        ref = next((r for r in steps[run] if r.tag == tag), None)
        if ref is None:
            raise report.NotFound(f"unknown tag {tag!r} in run {run!r}")
        return ref, self._store.analysis(ctx, experiment, ref)

    def summary_impl(self, ctx, experiment, run, tag, group="layer"):
        ref, step = self._step(ctx, experiment, run, tag)
        run_graph = self._store.run_graph(ctx, experiment, run)
        body = {"run": run, "tag": tag, "step": ref.step, **report.step_summary(step, group, run_graph)}
        body["findings"] = findings.findings_of_step(
            step, ref, self._store.list_steps(ctx, experiment).get(run, []),
            lambda other: self._store.analysis(ctx, experiment, other), run_graph)
        return body

    def _step_space(self, ctx, experiment, run, tag, device):
        """(analysed step, its memory space `device`); 404 / 422 as the routes answer them."""
        _, step = self._step(ctx, experiment, run, tag)
        if step.status != "ok":
            raise StepNotAnalysable(step.message or f"step {tag!r} of run {run!r} cannot be analysed")
        space = step.space(device)
        if space is None:
            raise report.NotFound(f"unknown device: {step.why_no_space(device, f'{run!r} {tag!r}')}")
        return step, space

    def _space(self, ctx, experiment, run, tag, device):
        return self._step_space(ctx, experiment, run, tag, device)[1]

    def _space_resident(self, ctx, experiment, run, tag, device):
        """(memory space, the run graph's resident tensors in it or None), as summary_impl has them."""
        step, space = self._step_space(ctx, experiment, run, tag, device)
        return space, report.space_resident(step, space, self._store.run_graph(ctx, experiment, run))

    def scopes_impl(self, ctx, experiment, run, tag, device=None, group="layer", scope=""):
        space, resident = self._space_resident(ctx, experiment, run, tag, device)
        return report.scope_children(space, group, scope, resident)

    def scope_impl(self, ctx, experiment, run, tag, device=None, group="layer", scope="", top=50):
        space, resident = self._space_resident(ctx, experiment, run, tag, device)
        return report.scope_details(space, group, scope, top, resident)

    def curve_impl(self, ctx, experiment, run, tag, device=None, group="layer", points=800, breakdown="", top=8,
                   window=None, split=True):
        return report.curve(self._space(ctx, experiment, run, tag, device), group, points, breakdown, top, window,
                            split)

    def graph_impl(self, ctx, experiment, run, tag, device=None, scope="", max_nodes=200, group=None):
        space = self._space(ctx, experiment, run, tag, device)
        body = report.graph_view(space, self._store.run_graph(ctx, experiment, run), scope, max_nodes, group)
        body["graphs_dashboard_run"] = run
        return body

    def compare_impl(self, ctx, experiment, run, tag, against_run, against_tag, device=None, against_device=None,
                     group="layer", scope="", top=50):
        """Step A (`run`, `tag`) against baseline step B (`against_run`, `against_tag`) under `scope`."""
        a_ref, a_space = self._side(ctx, experiment, run, tag, device)
        b_ref, b_space = self._side(ctx, experiment, against_run, against_tag, against_device)
        # Keyed by the analysed spaces themselves: a cached comparison keeps them alive, so ids are not reused.
        comparison = self._comparisons.get_or_compute(
            (id(a_space), id(b_space), group),
            lambda: compare.Comparison(a_space, b_space, group, renumber=compare.renumbers(run, against_run)))
        residents = [self._space_resident(ctx, experiment, side_run, side_tag, side_device)[1]
                     for side_run, side_tag, side_device in ((run, tag, device), (against_run, against_tag, against_device))]
        return compare_report.comparison_dict(
            comparison, compare_report.side_dict(a_space, run, tag, a_ref.step, a_ref.source),
            compare_report.side_dict(b_space, against_run, against_tag, b_ref.step, b_ref.source), scope, top,
            compare.start_change(comparison, *residents))

    def whatif_impl(self, ctx, experiment, run, tag, batch, runs=(), limit=None, device=None, series=True,
                    traced_batch=None, tags=()):
        """The peak at `batch` from step (`run`, `tag`), fitted with the steps of `run` that `tags` name and
        the matching step (store.matching_step) of each of `runs`, when they hold other batch sizes; the
        largest batch under `limit`. `traced_batch`: the batch step (`run`, `tag`) ran at, where the
        user gives it (else read from its shapes)."""
        steps = self._store.list_steps(ctx, experiment)
        first = self._step(ctx, experiment, run, tag)[0]
        for other in runs:
            if other not in steps:
                raise report.NotFound(f"unknown run {other!r}")
        own = {ref.tag: ref for ref in steps.get(run, [])}
        for other in tags:
            if other not in own:
                raise report.NotFound(f"unknown tag {other!r} in run {run!r}")
        devices_of = self._devices_of(ctx, experiment)
        space = self._side(ctx, experiment, run, tag, device)[1]
        if device is not None:  # a device as the user spelt it: the other steps' space is the one it named here
            device = space.trace.id
        traced = [whatif.Traced(run, tag, first.step, first.source, self._store.analysis(ctx, experiment, first), space,
                                traced_batch)]
        # A run picked to fit with that cannot be read there (unreadable, no such memory space, no
        # batch to read, another model) is left out, and said so: the others still answer.
        skipped = []
        # The run's own other steps picked (a script that traced batches 2, 4 and 8 into one run), then
        # each other run's step matching this one.
        others = ([(run, own[other]) for other in dict.fromkeys(tags) if other != tag]
                  + [(other, store.matching_step(steps[other], first, devices_of))
                     for other in dict.fromkeys(runs) if other != run])
        if others:
            try:
                traced[0].batch  # noqa: B018 - read first: its own error is the answer's, not another run's
            except whatif.WhatIfError as exc:
                raise StepNotAnalysable(str(exc)) from None
        for other, ref in others:
            if traced_batch is not None:  # its batch would be read from its shapes, this one's was given
                skipped.append({"run": other, "tag": ref.tag, "reason": (
                    f"the batch of {run} {tag} was given ({traced_batch}) and {other} {ref.tag}'s would be read from its "
                    "shapes, which misread it here: fit them with the CLI, `tb-memory whatif --run ... "
                    "--traced-batch ...` once per step")})
                continue
            try:
                analysed = self._store.analysis(ctx, experiment, ref)
                if device and analysed.status == "ok" and all(s.trace.id != device for s in analysed.spaces):
                    raise report.NotFound(
                        f"{other} {ref.tag} has no memory space {device} (it has "
                        f"{', '.join(s.trace.id for s in analysed.spaces) or 'none'}): traced on another device or "
                        "allocator")
                space = self._side(ctx, experiment, other, ref.tag, device)[1]
                step = whatif.Traced(other, ref.tag, ref.step, ref.source, analysed, space)
                step.batch  # noqa: B018 - read now: a step whose batch cannot be read is left out
                whatif.check_one_model([traced[0], step])
            except (StepNotAnalysable, report.NotFound, whatif.WhatIfError) as exc:
                skipped.append({"run": other, "tag": ref.tag, "reason": str(exc)})
                continue
            traced.append(step)
        siblings = whatif.siblings_of(traced[0], first, steps[run],
                                      lambda ref: self._store.analysis(ctx, experiment, ref))
        try:
            body = whatif_report.whatif_dict(whatif.WhatIf(traced, batch, limit, siblings), series=series)
        except whatif.WhatIfError as exc:
            left_out = "; ".join(f"{s['run']} {s['tag']} left out: {s['reason']}" for s in skipped)
            raise StepNotAnalysable(f"{exc}" + (f" ({left_out})" if left_out else "")) from None
        body["skipped_runs"] = skipped
        return body

    def _side(self, ctx, experiment, run, tag, device):
        """(step ref, memory space) of one side of a comparison; errors name the step."""
        ref, _ = self._step(ctx, experiment, run, tag)
        try:
            return ref, self._space(ctx, experiment, run, tag, device)
        except StepNotAnalysable as exc:
            raise StepNotAnalysable(f"{run} {tag}: {exc}") from None

    # -- routes: parse, call, respond -----------------------------------------

    @staticmethod
    def _context(request):
        return plugin_util.context(request.environ), plugin_util.experiment_id(request.environ)

    @_route
    def runs_route(self, request):
        return self.runs_impl(*self._context(request))

    @_route
    def default_step_route(self, request):
        return self.default_step_impl(*self._context(request))

    @_route
    def summary_route(self, request):
        return self.summary_impl(*self._context(request), _required(request, "run"), _required(request, "tag"),
                                 _group(request))

    def _space_args(self, request):
        return (*self._context(request), _required(request, "run"), _required(request, "tag"),
                request.args.get("device") or None)

    @_route
    def scopes_route(self, request):
        return self.scopes_impl(*self._space_args(request), _group(request), request.args.get("scope", ""))

    @_route
    def scope_route(self, request):
        return self.scope_impl(*self._space_args(request), _group(request), request.args.get("scope", ""),
                               _int_arg(request, "top", 50, 1, 1000))

    @_route
    def curve_route(self, request):
        return self.curve_impl(*self._space_args(request), _group(request),
                               _int_arg(request, "points", 800, 16, 20000), request.args.get("breakdown", ""),
                               _int_arg(request, "top", 8, 0, 50), _window(request),
                               bool(_int_arg(request, "split", 1, 0, 1)))

    @_route
    def graph_route(self, request):
        return self.graph_impl(*self._space_args(request), request.args.get("scope", ""),
                               _int_arg(request, "max_nodes", 200, 1, 2000),
                               _group(request) if request.args.get("group") else None)

    @_route
    def compare_route(self, request):
        return self.compare_impl(*self._context(request), _required(request, "run"), _required(request, "tag"),
                                 _required(request, "against_run"), _required(request, "against_tag"),
                                 request.args.get("device") or None, request.args.get("against_device") or None,
                                 _group(request), request.args.get("scope", ""), _int_arg(request, "top", 50, 1, 1000))

    @_route
    def whatif_route(self, request):
        _required(request, "batch")
        return self.whatif_impl(*self._context(request), _required(request, "run"), _required(request, "tag"),
                                _int_arg(request, "batch", None, 1, whatif.MAX_BATCH_SEARCHED),
                                [r for r in request.args.getlist("runs") if r], _int_arg(request, "limit", None, 1, LIMIT_MAX_BYTES),
                                request.args.get("device") or None,
                                traced_batch=_int_arg(request, "traced_batch", None, 1, whatif.MAX_BATCH_SEARCHED),
                                tags=[t for t in request.args.getlist("tags") if t])

    @wrappers.Request.application
    def static_route(self, request):
        if request.method != "GET":
            return _json(request, {"error": "only GET is allowed"}, 405)
        # The allow-list is the only way to disk: a user's path is never joined.
        name = request.path.rsplit("/", 1)[-1]
        content_type = _STATIC_FILES.get(name)
        if content_type is None:
            return _json(request, {"error": "not found"}, 404)
        path = os.path.join(_STATIC_DIR, name)
        if not os.path.isfile(path):
            return _json(request, {"error": "the frontend bundle is not built: reinstall with `pip install .`"}, 404)
        with open(path, "rb") as f:
            contents = f.read()
        return http_util.Respond(request, contents, content_type)
