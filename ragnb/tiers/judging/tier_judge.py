"""Tier Judge: how far the *benchmark* judge can be trusted.

Every item's faithfulness is judged twice (the second pass with the LLM cache off, so it is a real repeat) per
judge mode (direct / reasoned) → consistency_score (|s₁ − s₂| ≤ δ, δ = 0.5), error_rate, latency,
avg_faithfulness, agreement between judge models, and calibration of the scores against the human labels
(ROC-AUC, best threshold, accuracy / balanced accuracy / precision / recall / F1 / Cohen's κ at
``show_threshold``). See docs/metrics.md, Tier Judge.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragnb.llm import run_sync
from ragnb.metrics import classification as cls
from ragnb.metrics.fallback import OFFLINE_LABEL
from ragnb.tiers.itemlog import ItemLog, fingerprint
from ragnb.tiers.judging.choice import LLM_BACKEND, OFFLINE_BACKEND, parse_list
from ragnb.datasets.judge_items import JudgePipelineItem, check_items, split_by_context
from ragnb.tiers.judging.scoring import (NO_CONTEXT, NOT_SCORED, OFFLINE_MODE, SHOW_LABELS, agg, dataset_meta,
                                         not_scored, outcomes, resolve_show_threshold, score_pass, with_not_scored)
from ragnb.tiers.result import TierResult


@dataclass
class TierJudgeResult(TierResult):
    """``per_item``: one row per (mode, item) — both scores, agreement, status, latency, human label;
    ``summary``: headline metrics of the first mode + ``by_mode`` + ``mode_agreement`` + ``info``."""

    results: dict[str, tuple[list, list]] = field(default_factory=dict, kw_only=True)  # mode → (pass 1, pass 2)


def _calibration(y_true: list[bool], scores: np.ndarray, threshold: float, n_boot: int, seed: int) -> dict:
    """Scores vs. human labels: ROC-AUC + Youden threshold (score_report) and, at the fixed ``threshold``
    (not tuned on these items, so not optimistic), binary_report of ``score ≥ threshold``."""
    pred = np.where(np.isnan(scores), np.nan, (scores >= threshold).astype(float))
    at_threshold = cls.binary_report(y_true, pred, n_boot=n_boot, seed=seed, labels=SHOW_LABELS)
    sr = cls.score_report(y_true, scores, n_boot=n_boot, seed=seed)
    best = sr["at_best_threshold"]
    return {
        "roc_auc": sr["roc_auc"],
        "best_threshold": sr["best_threshold"],
        "at_best_threshold": None if best is None else {"metrics": best["metrics"], "confusion": best["confusion"]},
        "threshold": threshold,
        "at_threshold": at_threshold,
        "note": "at_best_threshold is optimistic: the threshold was chosen on these same items",
    }


def run_tier_judge(
    items: Any,
    client: Any = None,
    models: Sequence[str] = (),
    *,
    aggregate: str = "mean",
    modes: Sequence[str] = ("direct", "reasoned"),
    language: str = "en",
    delta: float = 0.5,
    show_threshold: float | None = None,
    encoder: Any = None,
    concurrency: int = 8,
    n_boot: int = 1000,
    seed: int = 0,
    log_path: str | Path | None = None,
) -> TierJudgeResult:
    """Judge every item's faithfulness twice per mode and report the judge's reliability and calibration.

    ``client`` + ``models``: an :class:`~ragnb.llm.LLMClient` and judge model ids (several → per-model
    scores, ``aggregate`` over them, and inter-model agreement). Pass 1 may be answered from the client's
    disk cache; pass 2 always asks the endpoint again (``cache=False``), so it is a real repeat. Without a
    client the judge is the fallback (see docs/metrics.md, Faithfulness; ``encoder``: embedding similarity; None: word
    overlap), which ignores ``modes`` and is deterministic.

    Per mode
    (see docs/metrics.md, Tier Judge and Judge Pipeline, via :func:`ragnb.judges.reliability.judge_reliability`):
        consistency_score = mean_q 𝟙[|s₁(q) − s₂(q)| ≤ δ]   (an item with a failed pass: NaN, excluded, counted)
        error_rate        = failed judgements / all 2·n judgements
        avg_latency_ms    = mean latency of the judge calls that reached the endpoint (cache hits excluded)
        avg_faithfulness  = mean first-pass score
    plus ``calibration`` of the first-pass scores against ``ground_truth_show`` (ROC-AUC with CI, best
    threshold by Youden's J, accuracy / balanced accuracy / precision / recall / F1 / κ at
    ``show_threshold``) and, with several models, :func:`ragnb.judges.agreement.agreement`.

    The summary's top level holds the first mode's ``consistency_score``, ``error_rate``,
    ``avg_latency_ms``, ``avg_faithfulness``, ``roc_auc``, ``balanced_accuracy`` and ``cohen_kappa``
    (the threshold (see docs/metrics.md, Conventions) applies to consistency_score); ``by_mode`` holds every mode.
    Items without a context are not scored (:func:`ragnb.datasets.judge_items.split_by_context`): one per-item row
    each with outcome "not scored", counted in ``n_not_scored`` / ``not_scored``, left out of every metric (whose
    ``n`` is the scored items); ``info`` has ``n_items`` (all) and ``n_scored``.
    """
    items_in, all_items = items, check_items(items)
    items, without = split_by_context(all_items, "Tier Judge")
    delta = _check_delta(delta)
    models = parse_list(models)
    offline = client is None
    show_threshold = resolve_show_threshold(show_threshold, offline)
    mode_list, notes = _modes(offline, modes, models, encoder)
    log = None
    if log_path is not None:
        log = ItemLog(log_path, fingerprint({
            "tier": "tier_judge", "backend": "llm" if not offline else OFFLINE_BACKEND, "models": models,
            "aggregate": aggregate, "language": language,
            "encoder": getattr(encoder, "name", None) if offline else None}))

    y_true = [it.ground_truth_show for it in items]
    frames, by_mode, results = [], {}, {}
    for mode in mode_list:
        if offline:
            judges = (None, None)
        else:
            judges = tuple(_llm_judge(client, models, aggregate, mode, language, cache) for cache in (True, False))
        first, second = (run_sync(score_pass(items, f"{mode}|{n}", log, concurrency, judge=judge, encoder=encoder))
                         for n, judge in ((1, judges[0]), (2, judges[1])))
        results[mode] = (first, second)
        frame, by_mode[mode] = _mode_block(items, first, second, delta, show_threshold, n_boot, seed,
                                           several_models=len(models) > 1)
        frame.insert(1, "mode", mode)
        frames.append(with_not_scored(frame, all_items, without, mode=mode, predicted_show=None, status_1=NOT_SCORED,
                                      status_2=NOT_SCORED, reason_1=NO_CONTEXT))
        if any(r.method == "word_overlap" for r in first) and offline and encoder is not None:
            notes.append("Some items were scored by word overlap (the last fallback level); see the method column.")

    summary = _summary(by_mode, mode_list, results, delta, n_boot, seed)
    skipped, note = not_scored(all_items, without, "Tier Judge")
    summary.update(skipped)
    if note:
        notes.insert(0, note)
    if log is not None and log.resume_note():
        notes.append(log.resume_note())
    if client is not None and client.failure_note():
        notes.append(client.failure_note())
    for mode, block in by_mode.items():
        e = block["errors"]
        if e.get("n_partial"):
            notes.append(f"{mode}: some judge models failed on {e['n_partial']} item judgement(s) the other models "
                         f"scored (partial juries); error_rate counts every failed model judgement "
                         f"({e['n_failed_judgements']} of {e['n_judgements']}), see errors.by_model.")
    if len(mode_list) > 1:
        notes.append(f"Headline numbers are the first mode's ({mode_list[0]}); every mode is under by_mode.")
    summary["info"] = {
        "n_items": len(all_items), "n_scored": len(items), "n_show": int(sum(y_true)),
        "positive_rate": float(np.mean(y_true)),
        "modes": mode_list, "models": models, "aggregate": aggregate if not offline else None,
        "language": language, "delta": delta, "show_threshold": show_threshold,
        "judge_backend": OFFLINE_BACKEND if offline else "llm",
        "encoder": getattr(encoder, "name", None) if offline else None,
    }
    meta = {"judge_backend": OFFLINE_BACKEND if offline else LLM_BACKEND,
            "judge_model": OFFLINE_BACKEND if offline else ",".join(models),
            "judge_eval_mode": ",".join(mode_list), **dataset_meta(items_in, encoder)}
    _add_verdict(summary, meta, notes)
    return TierJudgeResult(pd.concat(frames, ignore_index=True), summary, notes, lead={"tier": "tier_judge"},
                           meta=meta, results=results)


def _add_verdict(summary: dict, meta: dict, notes: list[str]) -> None:
    """``info["judge_verdict"]``: whether the judge agrees with the labels clearly better than the baseline
    (:func:`ragnb.tiers.judging.verdict.judge_verdict`); when it does not, a first note says so and what follows
    for the rest of the run."""
    from ragnb.tiers.judging.verdict import judge_verdict

    verdict = judge_verdict({**summary, **meta})
    if verdict is None:
        return
    summary["info"]["judge_verdict"] = {"validated": verdict["validated"], "reason": verdict["reason"]}
    if not verdict["validated"]:
        notes.insert(0, f"{verdict['reason']}. In a run with this judge, what it scored in Tier 2/3 and the RAG "
                        "metrics is not graded (run record, executive summary, index page).")


def _check_delta(delta: Any) -> float:
    delta = float(delta) if isinstance(delta, (int, float)) and not isinstance(delta, bool) else delta
    if not isinstance(delta, float) or not math.isfinite(delta) or delta < 0:
        raise ValueError(f"delta = {delta!r}; use a number ≥ 0 (default 0.5)")
    return delta


def _modes(offline: bool, modes: Sequence[str], models: list[str], encoder: Any) -> tuple[list[str], list[str]]:
    """The judge modes to run, and the notes that say why (the fallback has one mode)."""
    from ragnb.judges.judge_config import MODES

    if offline:
        method = OFFLINE_LABEL
        notes = [
            f"No LLM judge: every score comes from the offline fallback ({method}). The fallback is "
            "deterministic, so consistency_score is 1.0 by construction and says nothing about an LLM judge's "
            "repeatability; its latency and its calibration against the human labels are the meaningful numbers here."]
        if list(modes) != [OFFLINE_MODE]:
            notes.append(f"Judge modes {list(modes)} apply to LLM judges only; the fallback has none.")
        return [OFFLINE_MODE], notes
    if not models:
        raise ValueError("models is empty; name at least one judge model, or pass client=None for the "
                         "offline fallback")
    mode_list = parse_list(modes)
    bad = [m for m in mode_list if m not in MODES]
    if bad or not mode_list:
        raise ValueError(f"modes = {list(modes)!r}; use one or more of {MODES}")
    return mode_list, []


def _llm_judge(client: Any, models: list[str], aggregate: str, mode: str, language: str, cache: bool) -> Any:
    from ragnb.judges import JudgeConfig
    from ragnb.judges.scores import Judge

    return Judge(client, JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language, cache=cache))


def _mode_block(items: list[JudgePipelineItem], first: list, second: list, delta: float, show_threshold: float,
                n_boot: int, seed: int, several_models: bool) -> tuple[pd.DataFrame, dict]:
    """One mode's per-item frame and its summary block (reliability, calibration, agreement)."""
    from ragnb.judges.agreement import agreement
    from ragnb.judges.reliability import judge_reliability

    y_true = [it.ground_truth_show for it in items]
    frame, rel = judge_reliability(first, second, delta)
    frame.insert(0, "id", [it.id for it in items])
    scores = frame["score_1"].to_numpy(dtype=float)
    block = {
        "consistency_score": agg(frame["consistent"], n_boot, seed),
        "error_rate": rel["error_rate"],
        "avg_latency_ms": rel["avg_latency_ms"],
        "avg_faithfulness": agg(scores, n_boot, seed),
        "consistency_by_model": rel["consistency_by_model"],
        "errors": rel["errors"],
        "latency": rel["latency"],
        "delta": delta,
        "methods": dict(Counter(r.method for r in first)),
        "calibration": _calibration(y_true, scores, show_threshold, n_boot, seed),
    }
    if several_models:
        block["agreement"] = agreement(first, delta=delta)
    frame["ground_truth_show"] = y_true
    frame["label"] = [it.label for it in items]
    frame["source"] = [it.source for it in items]
    frame["method"] = [r.method for r in first]
    frame["predicted_show"] = [None if math.isnan(s) else bool(s >= show_threshold) for s in scores]
    frame["outcome"] = outcomes(y_true, frame["predicted_show"].tolist())
    frame["explanation_1"] = [r.explanation for r in first]
    frame["reason_1"] = [r.reason for r in first]
    frame["question"] = [it.question for it in items]
    frame["answer"] = [it.answer for it in items]
    return frame.drop(columns=["item"]), block


def _summary(by_mode: dict, mode_list: list[str], results: dict, delta: float, n_boot: int, seed: int) -> dict:
    """The first mode's headline numbers, every mode under ``by_mode``, and how far the modes agree."""
    from ragnb.judges.reliability import judge_consistency

    head = by_mode[mode_list[0]]
    cal = head["calibration"]
    summary: dict[str, Any] = {
        "consistency_score": head["consistency_score"],
        "error_rate": head["error_rate"],
        "avg_latency_ms": head["avg_latency_ms"],
        "avg_faithfulness": head["avg_faithfulness"],
        "roc_auc": cal["roc_auc"],
        "balanced_accuracy": cal["at_threshold"]["metrics"]["balanced_accuracy"],
        "cohen_kappa": cal["at_threshold"]["metrics"]["cohen_kappa"],
        "primary_mode": mode_list[0],
        "by_mode": by_mode,
    }
    if len(mode_list) > 1:
        summary["mode_agreement"] = {}
        for i, a in enumerate(mode_list):
            for b in mode_list[i + 1:]:
                within = judge_consistency(results[a][0], results[b][0], delta)
                diff = np.abs(np.array([r.score for r in results[a][0]]) - np.array([r.score for r in results[b][0]]))
                summary["mode_agreement"][f"{a} vs {b}"] = {
                    "share_within_delta": agg(within, n_boot, seed),
                    "mean_abs_diff": float(np.nanmean(diff)) if np.isfinite(diff).any() else math.nan,
                }
    return summary
