"""Tier Judge: how reliable the judge is — consistency of two judgements of the same items, error rate,
latency (see docs/metrics.md, Tier Judge). For a consistency run, evaluate the same items a second time with
``JudgeConfig(cache=False)``; with the cache on, the second pass would replay the first."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ragnb.judges.agreement import EPS, check_delta, check_results
from ragnb.llm.replies import ChatResult
from ragnb.llm.result import EvaluationResult
from ragnb.metrics.stats import latency_summary


def _scores(values: Any, name: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of scores (floats or EvaluationResult)")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, EvaluationResult):
            out.append(v.score if v.ok else math.nan)
        elif v is None:
            out.append(math.nan)
        elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise ValueError(f"{name}[{i}]={v!r} must be a number, None/NaN (failed) or an EvaluationResult")
    return np.asarray(out, dtype=float)


def judge_consistency(first: Sequence[float], second: Sequence[float], delta: float = 0.5) -> np.ndarray:
    """Per-item consistency of two judgements of the same items (see docs/metrics.md, Tier Judge):

        c_q = 𝟙[|s_1(q) − s_2(q)| ≤ δ],   consistency_score = mean_q c_q,   δ = 0.5 by default

    NaN where either score is NaN/None/failed (undefined, excluded from the mean and counted). Items may be
    floats or EvaluationResults. A 1e-9 tolerance absorbs floating-point error (0.8 − 0.3 ≤ 0.5 holds).
    """
    delta = check_delta(delta)
    s1, s2 = _scores(first, "first"), _scores(second, "second")
    if s1.size != s2.size:
        raise ValueError(f"first has {s1.size} items and second has {s2.size}; pass the same items in the same order")
    out = (np.abs(s1 - s2) <= delta + EPS).astype(float)
    out[np.isnan(s1) | np.isnan(s2)] = np.nan
    return out


def error_rate(results: Sequence[EvaluationResult]) -> dict[str, Any]:
    """Share of failed judgements (``error_rate``), with the counts behind it.

    A judgement is one judge model's verdict on one item, so a model failing on an item the other models
    saved (status ``partial``) counts too:

        error_rate = Σ_items n_models_failed / Σ_items (n_models_ok + n_models_failed)

    (with one judge model: failed items / judged items). ``item_error_rate`` = items on which every model failed
    (status ``failed``) / n. ``undefined`` items (blank input, no call made) are counted apart and are not
    errors. Per model: ``by_model[m]`` = failed verdicts of m / verdicts asked of m. ``n_reasked`` = items where
    some model needed a re-ask to give a valid verdict.
    """
    results = check_results(results, "results")
    n = len(results)
    n_failed = sum(r.status == "failed" for r in results)
    n_undefined = sum(r.status == "undefined" for r in results)
    by_model: dict[str, dict[str, Any]] = {}
    for r in results:
        for m in r.model_scores:
            b = by_model.setdefault(m.model, {"n": 0, "n_failed": 0})
            b["n"] += 1
            b["n_failed"] += m.status == "failed"
    for b in by_model.values():
        b["error_rate"] = b["n_failed"] / b["n"] if b["n"] else math.nan
    # A result without per-model verdicts (the offline fallback) is one judgement.
    asked = sum((r.n_models_ok + r.n_models_failed) or (r.status != "undefined") for r in results)
    failed_judgements = sum(r.n_models_failed or (r.status == "failed") for r in results)
    return {
        "error_rate": failed_judgements / asked if asked else math.nan,
        "item_error_rate": n_failed / n if n else math.nan,
        "n": n,
        "n_judgements": asked,
        "n_failed_judgements": failed_judgements,
        "n_ok": sum(r.status == "ok" for r in results),
        "n_partial": sum(r.status == "partial" for r in results),
        "n_failed": n_failed,
        "n_undefined": n_undefined,
        "n_reasked": sum(any(m.details.get("reasks", 0) > 0 for m in r.model_scores) for r in results),
        "by_model": by_model,
    }


def _latency_stats(ms: list[float]) -> dict[str, Any]:
    s = latency_summary(ms)  # named as the Tier Judge block has always named them
    return {"mean_ms": s["mean"], "p50_ms": s["p50"], "p95_ms": s["p95"], "n_calls": s["n"]}


def judge_latency(items: Iterable[EvaluationResult | ChatResult]) -> dict[str, Any]:
    """Latency of the judge's chat calls in ms: mean, p50, p95 (numpy's linear-interpolation percentiles).

    Input: EvaluationResults (their ``ModelScore.details["calls"]``) and/or ChatResults. Latency = duration of
    the successful HTTP request (backoff waits excluded). Cache hits are excluded — they measure the disk,
    not the judge — and counted in ``n_cached_excluded``. All NaN when no call reached the endpoint.
    """
    if isinstance(items, (EvaluationResult, ChatResult)) or not isinstance(items, Iterable):
        raise ValueError("items must be a list of EvaluationResult and/or ChatResult")
    calls: list[tuple[str, float, bool]] = []
    for i, item in enumerate(items):
        if isinstance(item, ChatResult):
            calls.append((item.model, item.latency_s, item.cached))
        elif isinstance(item, EvaluationResult):
            for m in item.model_scores:
                for c in m.details.get("calls", []):
                    calls.append((m.model, float(c["latency_s"]), bool(c["cached"])))
        else:
            raise ValueError(f"items[{i}] must be an EvaluationResult or a ChatResult, got {type(item).__name__}")
    timed = [(model, s * 1000.0) for model, s, cached in calls if not cached]
    out = _latency_stats([ms for _, ms in timed])
    out["n_cached_excluded"] = sum(cached for _, _, cached in calls)
    out["by_model"] = {model: _latency_stats([ms for m2, ms in timed if m2 == model])
                       for model in dict.fromkeys(m for m, _ in timed)}
    out["note"] = "per chat call; cache hits excluded"
    return out


def _fresh_latency_ms(r: EvaluationResult) -> float:
    calls = [c for m in r.model_scores for c in m.details.get("calls", []) if not c["cached"]]
    return sum(c["latency_s"] for c in calls) * 1000.0 if calls else math.nan


def judge_reliability(first: list[EvaluationResult], second: list[EvaluationResult],
                      delta: float = 0.5) -> tuple[Any, dict[str, Any]]:
    """Tier Judge over two judgements of the same items (same order): per-item DataFrame + summary.

    Per item: score_1, score_2, abs_diff, consistent (:func:`judge_consistency`), status_1/2, latency_ms_1/2
    (sum of the item's non-cached call latencies; NaN when all were cache hits) and ``consistent[<model>]``
    per judge model. Summary: ``consistency_score`` and ``avg_<metric>`` (first pass) as
    :func:`ragnb.metrics.stats.aggregate` dicts (mean, ci95, n, n_valid, n_failed); ``consistency_by_model``;
    ``error_rate`` (float) with ``errors`` (counts, :func:`error_rate`) and ``avg_latency_ms`` (float) with
    ``latency`` (:func:`judge_latency`), both over all 2·n judgements.
    """
    import pandas as pd

    from ragnb.metrics.stats import aggregate

    first, second = check_results(first, "first"), check_results(second, "second")
    if len(first) != len(second):
        raise ValueError(f"first has {len(first)} items and second has {len(second)}; judge the same items twice")
    if first and second and first[0].metric != second[0].metric:
        raise ValueError(f"first is {first[0].metric!r} and second is {second[0].metric!r}; compare one metric")
    metric = first[0].metric if first else "score"
    consistent = judge_consistency(first, second, delta)
    frame = pd.DataFrame({
        "item": range(len(first)),
        "score_1": [r.score for r in first],
        "score_2": [r.score for r in second],
    })
    frame["abs_diff"] = (frame["score_1"] - frame["score_2"]).abs()
    frame["consistent"] = consistent
    frame["status_1"] = [r.status for r in first]
    frame["status_2"] = [r.status for r in second]
    frame["latency_ms_1"] = [_fresh_latency_ms(r) for r in first]
    frame["latency_ms_2"] = [_fresh_latency_ms(r) for r in second]
    models = list(dict.fromkeys(m.model for r in first + second for m in r.model_scores))
    by_model = {}
    for model in models:
        def pick(r: EvaluationResult) -> float:
            m = next((m for m in r.model_scores if m.model == model), None)
            return m.score if m is not None and m.status == "ok" else math.nan

        col = judge_consistency([pick(r) for r in first], [pick(r) for r in second], delta)
        frame[f"consistent[{model}]"] = col
        by_model[model] = aggregate(col)
    errors = error_rate(list(first) + list(second))
    latency = judge_latency(list(first) + list(second))
    summary = {
        "consistency_score": aggregate(consistent),
        f"avg_{metric}": aggregate(frame["score_1"].to_numpy(dtype=float)),
        "error_rate": errors["error_rate"],
        "avg_latency_ms": latency["mean_ms"],
        "consistency_by_model": by_model,
        "errors": errors,
        "latency": latency,
        "delta": check_delta(delta),
    }
    return frame, summary
