"""A batch-size what-if -> the JSON of `tb-memory whatif --json` and the `whatif` route.

Shapes answers only: every number comes from `whatif` (docs/http_api.md).
"""

from __future__ import annotations

from .whatif import MAX_BATCH_SEARCHED, Traced, WhatIf, series_batches


def _traced_dict(traced: Traced) -> dict:
    space = traced.space
    start = space.start_bytes
    return {"run": traced.run, "tag": traced.tag, "step": traced.step_number, "source": traced.source,
            "device": space.trace.id, "batch": traced.batch, "batch_given": traced.given_batch is not None,
            "peak_rise_bytes": space.peak_rise_bytes,
            "start_bytes": start, "peak_bytes": space.peak_bytes}


def _prediction_dict(question: WhatIf, predictor) -> dict:
    prediction = predictor.predict(question.batch)
    body = {"predicted_peak_rise_bytes": prediction.peak_rise_bytes,
            "predicted_start_bytes": prediction.start_bytes,
            "predicted_peak_bytes": prediction.peak_bytes,
            "max_batch": question.max_batch(predictor),
            "layers": prediction.layers}
    if predictor is question.one_step:
        body.update(from_run=question.base.run, from_tag=question.base.tag, traced_batch=predictor.batch,
                    scaled_share=round(predictor.scaled_share, 4), warning=predictor.warning)
    else:
        body.update(batches=predictor.batches, warning=question.fit_warning, falls=predictor.falls)
    return body


def whatif_dict(question: WhatIf, series: bool = False) -> dict:
    """The lead prediction at the top level (the fit when there is one), every prediction under
    `predictions`; with `series`, predicted peaks over a range of batch sizes for a chart."""
    predictions = {method: _prediction_dict(question, predictor) for method, predictor in question.predictors.items()}
    lead_method = next(iter(predictions))
    lead = predictions[lead_method]
    body = {
        "batch": question.batch,
        "runs": [_traced_dict(traced) for traced in question.steps],
        "method": lead_method,
        "predicted_peak_rise_bytes": lead["predicted_peak_rise_bytes"],
        "predicted_start_bytes": lead["predicted_start_bytes"],
        "predicted_peak_bytes": lead["predicted_peak_bytes"],
        "limit_bytes": question.limit,
        "limit_source": question.limit_source,
        "limit_applies_to": (None if question.limit is None else
                             "peak_bytes" if question.absolute(question.lead) else "peak_rise_bytes"),
        "max_batch": lead["max_batch"],
        "max_batch_searched": MAX_BATCH_SEARCHED,
        "layers": lead["layers"],
        "predictions": {"one_step": predictions.get("one_step"), "fit": predictions.get("fit")},
        "notes": question.notes,
    }
    if series:
        body["series"] = _series(question, lead["max_batch"])
    return body


def _series(question: WhatIf, fits: int | None) -> dict:
    batches = series_batches(question.batch, [t.batch for t in question.steps], fits)
    out: dict = {"batch": batches}
    for method in ("one_step", "fit"):
        predictor = question.predictors.get(method)
        if predictor is None:
            out[method] = None
            continue
        predictor = question.as_answered(predictor)  # as the answer at each batch, and the largest that fits
        rises = [predictor.peak_rise(b) for b in batches]
        starts = [predictor.start_bytes(b) for b in batches]
        out[method] = {"peak_rise_bytes": rises,
                       "peak_bytes": None if None in starts else [s + r for s, r in zip(starts, rises)]}
    return out
