"""Tier Judge Pipeline: the *production* show/no-show judge against the human ``ground_truth_show``.

The system under test's own ``judge(question, answer)`` when it has one, else ragnb's baseline judge (show ⇔
faithfulness ≥ ``show_threshold``) → accuracy, precision, recall, F1, TP/FP/FN/TN with bootstrap CIs, and
latency mean/p50/p95.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragnb.io import parse_yes_no, to_jsonable
from ragnb.llm import run_sync
from ragnb.metrics import classification as cls
from ragnb.metrics.fallback import OFFLINE_LABEL
from ragnb.tiers.itemlog import ItemLog, fingerprint, run_items
from ragnb.tiers.judging.choice import LLM_BACKEND, OFFLINE_BACKEND, parse_list
from ragnb.datasets.judge_items import JudgePipelineItem, check_items, split_by_context
from ragnb.tiers.judging.scoring import (OFFLINE_MODE, SHOW_LABELS, dataset_meta, not_scored, outcomes,
                                         resolve_show_threshold, score_pass, with_not_scored)
from ragnb.tiers.result import TierResult


@dataclass
class TierJudgePipelineResult(TierResult):
    """``per_item``: one row per item — human label, verdict, outcome, score (baseline), latency, error;
    ``summary``: the pipeline metrics with CIs, confusion counts, latency; score calibration (baseline)."""


def resolve_judge_system(system: Any) -> tuple[Any | None, str]:
    """``"baseline"``/None → (None, "baseline"); ``"module:attr"``, ``"http:FILE.yaml"`` or an object →
    (object with ``judge(question, answer)``, label). Only ``judge`` is needed here (a production judge
    need not retrieve or answer); an HTTP system needs ``judge_url`` in its file."""
    if system is None or system == "baseline":
        return None, "baseline"
    if isinstance(system, str):
        from ragnb.rag.system import parse_system_spec

        kind, target = parse_system_spec(system)
        if kind == "http":
            from ragnb.rag.system import HttpSystem

            obj = HttpSystem.from_file(target)
            if not obj.judge_url:
                raise ValueError(f"system {system!r}: the file has no judge_url; add it to evaluate the service's "
                                 "show/no-show judge, or use system='baseline'")
        else:  # "python": "baseline" was handled above
            from ragnb.rag.system import load_python_system

            try:
                obj = load_python_system(target, methods=("judge",))
            except ValueError as exc:
                if "lacks" not in str(exc):
                    raise
                raise ValueError(f"system {system!r} has no judge(question, answer) method returning show (True) / "
                                 "no-show (False); add one, or use system='baseline'") from None
        label = system
    else:
        obj, label = system, getattr(system, "name", None) or type(system).__name__
    if not callable(getattr(obj, "judge", None)):
        raise ValueError(f"system {label!r} has no judge(question, answer) method returning show (True) / no-show "
                         "(False); add one, or use system='baseline' for ragnb's faithfulness-threshold judge")
    return obj, str(label)


def _verdict(value: Any) -> bool:
    """A production judge's answer → show (True) / no-show (False); "Yes"/"No" as the original judge replies.
    A float is a score, not a verdict, and is refused."""
    if isinstance(value, str):
        value = value.strip().strip(".!")
    elif isinstance(value, np.integer):
        value = int(value)
    show = None if isinstance(value, float) else parse_yes_no(value)
    if show is None:
        raise ValueError(f"judge returned {value!r:.80}; expected True/False or 'Yes'/'No'")
    return show


def _judge_call(obj: Any, it: JudgePipelineItem) -> tuple[Any, Any]:
    fn = obj.judge
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    kwargs = {}
    for name in ("context", "contexts"):
        if name in params:
            kwargs[name] = it.contexts() if name == "contexts" else "\n\n".join(it.contexts())
    return fn, kwargs


async def _system_verdict(obj: Any, it: JudgePipelineItem) -> dict:
    fn, kwargs = _judge_call(obj, it)

    def timed_sync() -> tuple[Any, float]:
        t0 = time.perf_counter()
        try:
            return fn(it.question, it.answer, **kwargs), (time.perf_counter() - t0) * 1000
        except Exception as exc:  # noqa: BLE001 - one failing call is a failed item, not a failed run
            return exc, (time.perf_counter() - t0) * 1000

    if inspect.iscoroutinefunction(fn):
        t0 = time.perf_counter()
        try:
            value = await fn(it.question, it.answer, **kwargs)
        except Exception as exc:  # noqa: BLE001
            value = exc
        ms = (time.perf_counter() - t0) * 1000
    else:
        value, ms = await asyncio.to_thread(timed_sync)
    if isinstance(value, Exception):
        return {"predicted_show": None, "latency_ms": ms, "error": f"{type(value).__name__}: {value}"[:500]}
    try:
        return {"predicted_show": _verdict(value), "latency_ms": ms, "error": None}
    except ValueError as exc:
        return {"predicted_show": None, "latency_ms": ms, "error": str(exc)}


def _fresh_ms(result: Any) -> float:
    calls = [c for m in result.model_scores for c in m.details.get("calls", []) if not c["cached"]]
    return sum(c["latency_s"] for c in calls) * 1000.0 if calls else math.nan


def run_tier_judge_pipeline(
    items: Any,
    system: Any = "baseline",
    *,
    client: Any = None,
    models: Sequence[str] = (),
    aggregate: str = "mean",
    mode: str = "direct",
    language: str = "en",
    show_threshold: float | None = None,
    encoder: Any = None,
    concurrency: int = 8,
    n_boot: int = 1000,
    seed: int = 0,
    log_path: str | Path | None = None,
) -> TierJudgePipelineResult:
    """The production show/no-show judge against ``ground_truth_show`` (see docs/metrics.md, Tier Judge Pipeline).

    The judge: ``system``'s ``judge(question, answer)`` (``"module:attr"``, ``"http:FILE.yaml"`` or an
    object; it may be async and may take a ``context``/``contexts`` keyword), returning True/False or
    "Yes"/"No" — or, with ``system="baseline"``, ragnb's judge: show ⇔ faithfulness ≥ ``show_threshold``,
    faithfulness from the LLM judge (``client``, ``models``, ``aggregate``, ``mode``) or, without a client,
    the fallback (see docs/metrics.md, Faithfulness; ``encoder``). A call that raises or returns anything else is a
    *failed* item: excluded from the metrics and counted (``n_failed``), never scored as wrong.

    Metrics (:func:`ragnb.metrics.classification.binary_report` / ``judge_pipeline_metrics``):
        accuracy = (TP + TN) / n,  precision = TP / (TP + FP),  recall = TP / (TP + FN),
        f1_score = 2·TP / (2·TP + FP + FN),  plus balanced accuracy and Cohen's κ, each with a bootstrap CI;
        TP/FP/FN/TN; latency avg/p50/p95 per judged item (ms). The threshold (see docs/metrics.md, Conventions) applies
        to accuracy.
    ``majority_class_accuracy`` is what always answering the more common label would score — on skewed
    labels, accuracy alone flatters a judge: ``accuracy["baselines"]`` compares it item by item with the trivial
    baselines (:mod:`ragnb.metrics.baselines`), and accuracy is graded good only if it beats them with its CI
    (:func:`ragnb.spec.grade_of`). The baseline also reports how its scores separate the classes
    (``roc_auc``, ``score_calibration`` with the best threshold by Youden's J). The baseline judges faithfulness to
    the context, so an item without one is *not scored*: a per-item row with outcome "not scored", counted in
    ``n_not_scored`` / ``not_scored`` and left out of every metric (``n`` is the scored items); a system's own judge
    scores every item.
    """
    items_in, all_items = items, check_items(items)
    items, without = all_items, []
    obj, label = resolve_judge_system(system)
    models = parse_list(models)
    automatic = show_threshold is None or show_threshold == 0
    show_threshold = resolve_show_threshold(show_threshold, offline=client is None)
    baseline = obj is None
    notes: list[str] = []
    if baseline:
        items, without = split_by_context(all_items, "the baseline show/no-show judge")
        judge_label = _baseline_label(client, models, mode, encoder, show_threshold, notes)
        if automatic and client is None:
            notes.append(f"The automatic threshold {show_threshold:g} is the fallback's cut tuned on the tuning half "
                         "of BEGIN dev (Youden): on the bundled BEGIN data about half the items are in-sample, so "
                         "the accuracy there is optimistic; the held-out agreement on answer-grounding and "
                         "claim-support data is in docs/metrics.md, Faithfulness.")
    else:
        judge_label = f"system: {label}"
    log = None
    if log_path is not None:
        log = ItemLog(log_path, fingerprint({
            "tier": "tier_judge_pipeline", "judge": "baseline" if baseline else label,
            "backend": None if not baseline else ("llm" if client is not None else OFFLINE_BACKEND),
            "models": models, "aggregate": aggregate, "mode": mode, "language": language,
            "encoder": getattr(encoder, "name", None) if baseline and client is None else None}))

    if baseline:
        judge = None if client is None else _llm_judge(client, models, aggregate, mode, language)
        v = _baseline_verdicts(items, log, concurrency, judge, encoder, show_threshold)
    else:
        v = _system_verdicts(obj, items, log, concurrency)
    y_true = [it.ground_truth_show for it in items]
    summary = _summary(y_true, v, baseline, judge_label, n_boot, seed, notes)
    skipped, note = not_scored(all_items, without, "the baseline show/no-show judge")
    summary.update(skipped)
    if note:
        notes.insert(0, note)
    if log is not None and log.resume_note():
        notes.append(log.resume_note())
    summary["info"] = {
        "n_items": len(all_items), "n_scored": len(items), "n_show": int(sum(y_true)),
        "positive_rate": float(np.mean(y_true)), "system": label,
        "show_threshold": show_threshold if baseline else None, "models": models if baseline else [],
        "mode": mode if baseline and client is not None else None,
        "judge_backend": "system" if not baseline else ("llm" if client is not None else OFFLINE_BACKEND),
        "encoder": getattr(encoder, "name", None) if baseline and client is None else None,
        "latency": "per judged item; baseline LLM: sum of its non-cached calls; offline: batched embedding "
                   "time shared out by sentence count plus scoring",
    }
    per_item = pd.DataFrame({
        "id": [it.id for it in items], "ground_truth_show": y_true, "predicted_show": v["predicted"],
        "outcome": outcomes(y_true, v["predicted"]), "score": v["scores"], "method": v["methods"],
        "latency_ms": v["latency"], "error": v["errors"], "label": [it.label for it in items],
        "source": [it.source for it in items], "question": [it.question for it in items],
        "answer": [it.answer for it in items],
    })
    per_item = with_not_scored(per_item, all_items, without, predicted_show=None, method="none")
    return TierJudgePipelineResult(per_item, summary, notes, lead={"tier": "tier_judge_pipeline"},
                                   meta=_meta(baseline, label, client, models, mode, items_in, encoder))


def _llm_judge(client: Any, models: list[str], aggregate: str, mode: str, language: str) -> Any:
    from ragnb.judges import JudgeConfig
    from ragnb.judges.scores import Judge

    return Judge(client, JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language))


def _baseline_label(client: Any, models: list[str], mode: str, encoder: Any,
                    show_threshold: float, notes: list[str]) -> str:
    """Check the baseline judge can run, and say how it decides (adds a note when offline)."""
    if client is not None and not models:
        raise ValueError("models is empty; name at least one judge model, or pass client=None for the "
                         "offline fallback")
    level = OFFLINE_LABEL
    how = (f"LLM faithfulness ({', '.join(models)}, {mode})" if client is not None else
           f"offline fallback faithfulness ({level})")
    if client is None:
        notes.append("No LLM judge: the baseline show/no-show judge thresholds the offline fallback "
                     "(not an LLM judgement); each item's method says which level scored it.")
    return f"baseline: show if {how} ≥ {show_threshold:g}"


def _baseline_verdicts(items: list[JudgePipelineItem], log: ItemLog | None, concurrency: int, judge: Any,
                       encoder: Any, show_threshold: float) -> dict[str, list]:
    """Faithfulness (LLM judge or fallback) per item, thresholded into show / no-show."""
    results = run_sync(score_pass(items, "pipeline", log, concurrency, judge=judge, encoder=encoder))
    scores = np.array([r.score for r in results], dtype=float)
    return {"scores": scores, "predicted": [None if math.isnan(s) else bool(s >= show_threshold) for s in scores],
            "latency": [_fresh_ms(r) for r in results], "errors": [None if r.ok else (r.reason or r.status)
                                                                    for r in results],
            "methods": [r.method for r in results]}


def _system_verdicts(obj: Any, items: list[JudgePipelineItem], log: ItemLog | None,
                     concurrency: int) -> dict[str, list]:
    """The system's own verdict per item (no score), logged as it comes."""
    keys = [f"pipeline|{it.id}|{it.digest()}" for it in items]
    by_key = dict(zip(keys, items))

    async def score(key: str) -> dict:
        return to_jsonable({"id": by_key[key].id, **await _system_verdict(obj, by_key[key])})

    records = run_sync(run_items(keys, score, log, concurrency=concurrency))
    return {"scores": np.full(len(items), np.nan), "predicted": [records[k]["predicted_show"] for k in keys],
            "latency": [math.nan if records[k]["latency_ms"] is None else records[k]["latency_ms"] for k in keys],
            "errors": [records[k]["error"] for k in keys], "methods": ["system"] * len(items)}


def _summary(y_true: list[bool], v: dict[str, list], baseline: bool, judge_label: str, n_boot: int, seed: int,
             notes: list[str]) -> dict:
    """The pipeline metrics with CIs, counts and latency (+ the baseline's score calibration); adds notes."""
    pred_arr = [math.nan if p is None else float(p) for p in v["predicted"]]
    flat = cls.judge_pipeline_metrics(y_true, pred_arr, latencies_ms=v["latency"], n_boot=n_boot, seed=seed)
    m = cls.binary_report(y_true, pred_arr, n_boot=n_boot, seed=seed, labels=SHOW_LABELS)["metrics"]
    p = float(np.mean(y_true))
    summary: dict[str, Any] = {
        "accuracy": m["accuracy"], "precision": m["precision"], "recall": m["recall"], "f1_score": m["f1"],
        "balanced_accuracy": m["balanced_accuracy"], "cohen_kappa": m["cohen_kappa"],
        "tp": flat["tp"], "fp": flat["fp"], "fn": flat["fn"], "tn": flat["tn"],
        "avg_latency_ms": flat["avg_latency_ms"], "p50_latency_ms": flat["p50_latency_ms"],
        "p95_latency_ms": flat["p95_latency_ms"],
        "n": flat["n"], "n_valid": flat["n_valid"], "n_failed": flat["n_failed"],
        "majority_class_accuracy": max(p, 1 - p),
        "undefined": flat["undefined"],
        "judge": judge_label,
    }
    if baseline:
        sr = cls.score_report(y_true, v["scores"], n_boot=n_boot, seed=seed)
        summary["roc_auc"] = sr["roc_auc"]
        summary["score_calibration"] = {"best_threshold": sr["best_threshold"],
                                        "at_best_threshold": None if sr["at_best_threshold"] is None else
                                        sr["at_best_threshold"]["metrics"],
                                        "note": "optimistic: the threshold was chosen on these same items"}
    if flat["n_failed"]:
        notes.append(f"{flat['n_failed']} of {flat['n']} items got no verdict (see the error column); they are "
                     "excluded from the metrics, not counted as wrong.")
    baselines = summary["accuracy"]["baselines"]
    if baselines["beats"] is not True:
        notes.append(f"Not graded good: {baselines['reason']}; balanced accuracy "
                     f"{summary['balanced_accuracy']['mean']:.3f} and κ {summary['cohen_kappa']['mean']:.3f} "
                     "(0.5 and 0 for any trivial answer) say how far the judge is above chance.")
    return summary


def _meta(baseline: bool, label: str, client: Any, models: list[str], mode: str, items: Any, encoder: Any) -> dict:
    """How the metrics JSON names the judge: the system's own, or the baseline's LLM / offline fallback."""
    if not baseline:
        backend, model, eval_mode = "system", f"system:{label}", "system"
    elif client is not None:
        backend, model, eval_mode = LLM_BACKEND, ",".join(models), mode
    else:
        backend, model, eval_mode = OFFLINE_BACKEND, OFFLINE_BACKEND, OFFLINE_MODE
    return {"judge_backend": backend, "judge_model": model, "judge_eval_mode": eval_mode,
            **dataset_meta(items, encoder)}
