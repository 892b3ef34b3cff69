"""Tier UX's "questions that broke context" (docs/metrics.md, Tier UX, Breaks): the signal, the break threshold
and whether the flags say anything, checked against the pages the turns cite where the log has them.

``context_preservation`` is not touched here: it stays the mean question-to-question cosine. Only the break
verdicts built on consecutive similarity are decided here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ragnb.datasets.sessions import SessionLog
from ragnb.metrics.ux import consecutive_cosines
from ragnb.metrics.ux_breaks import page_change_labels, pair_auc, validate_breaks
from ragnb.metrics.ux_thresholds import (BREAK_QUANTILE, model_defaults, similarity_quantiles,
                                         unrelated_pair_similarities)

SIGNALS = {
    "question": "cosine of the question with the previous question",
    # Measured against the cited pages on a bilingual wiki dialogue log with elliptical follow-ups
    # (tests/helpdesk_log.py, DIALOGUES: 35 labelled pairs, 12 page changes), ROC-AUC for page changes with
    # multilingual-e5-small: questions 0.49, the previous question + answer against the new question 0.62, the
    # session's centroid 0.50, question + answer against question + answer 0.87, answer against answer 0.94
    # (all-MiniLM-L6-v2: 0.62, 0.55, 0.57, 0.77, 0.78). A follow-up names nothing of its topic; its answer does.
    "answer": "cosine of the turn's logged answer with the previous turn's (the question where none was logged)",
}


def check_break_threshold(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise ValueError(f"break_threshold = {value!r} must be a number in [-1, 1], e.g. 0.3")
    if not -1.0 <= float(value) <= 1.0:
        raise ValueError(f"break_threshold = {value} is outside [-1, 1]; cosine similarities lie in [-1, 1] (seed: 0.3)")
    return float(value)


def turn_similarities(vectors: np.ndarray, session_ids) -> np.ndarray:
    """Per turn (in the log's order): cosine with the previous turn of its session; NaN for a first turn."""
    sids = pd.Series([str(s) for s in session_ids])
    out = np.full(len(sids), np.nan)
    for _, idx in sids.groupby(sids, sort=False).groups.items():
        rows = np.asarray(idx)
        out[rows[1:]] = consecutive_cosines(np.asarray(vectors)[rows])
    return out


def _oracle(turns: pd.DataFrame) -> np.ndarray | None:
    """Page-change labels per turn from the turns' cited urls; None where no pair can be judged."""
    from ragnb.urls import page_id

    if "url" not in turns:
        return None
    pages = [page_id(u) if isinstance(u, str) else None for u in turns["url"]]
    labels = page_change_labels(pages, turns["session_id"].tolist())
    return labels if (~np.isnan(labels)).any() else None


def choose_breaks(value: float | None, sessions: SessionLog, model: str, n_boot: int, seed: int) -> dict:
    """The break signal, threshold and flags (``flags``: per turn 1.0 / 0.0 / NaN, NaN everywhere when the
    flags say nothing) with where the threshold came from and, where the turns cite pages, its validation."""
    turns = sessions.turns
    sids = turns["session_id"].tolist()
    candidates = {"question": sessions.vectors}
    if getattr(sessions, "context_vectors", None) is not None:
        candidates["answer"] = sessions.context_vectors
    sims = {name: turn_similarities(vectors, sids) for name, vectors in candidates.items()}
    labels = _oracle(turns)
    aucs = {name: pair_auc(sim, labels, n_boot, seed) for name, sim in sims.items()} if labels is not None else {}
    # The answer signal only where the cited pages show it separates page changes better on this log (a log whose
    # answers are one placeholder text would make every turn "the same topic"); without pages, the question.
    better = "answer" in aucs and aucs["answer"]["mean"] > aucs["question"]["mean"]
    signal = "answer" if better else "question"
    sim = sims[signal]
    unrelated = unrelated_pair_similarities(candidates[signal], sids)
    out = {"signal": signal, "signal_text": SIGNALS[signal], "similarity": sim,
           "unrelated_pairs": similarity_quantiles(unrelated), "consecutive_pairs": similarity_quantiles(sim),
           "validation": None, "validated": False, "calibrated": False}
    if labels is not None:
        out.update(_validated(value, sim, labels, signal, aucs, n_boot, seed))
    else:
        out.update(_unvalidated(value, unrelated, out["unrelated_pairs"], model))
    t = out["break_threshold"]
    flags = np.where(np.isnan(sim), np.nan, (sim < t).astype(float)) if t is not None else np.full(len(sim), np.nan)
    out["flags"] = flags
    out["page_change"] = labels
    return out


def _validated(value, sim, labels, signal: str, aucs: dict, n_boot: int, seed: int) -> dict:
    val = validate_breaks(sim, labels, threshold=value, n_boot=n_boot, seed=seed, roc_auc=aucs[signal])
    # every available signal's separability, so a run shows what the adopted one gains
    report = {**val.report, "signal": signal, "signals": aucs}
    given = value is not None
    if val.separable:
        at = report["at_threshold"]
        how = ("given as a parameter" if given else
               "chosen on the cited pages (the cut that agrees most often with 'the turn cites another page')")
        source = (f"{how}; validated: agreement {at['accuracy']['mean']:.3f} beats the majority baseline "
                  f"{report['majority_baseline']:.3f}, ROC-AUC {report['roc_auc']['mean']:.3f}")
        return {"break_threshold": val.threshold, "calibrated": not given, "validated": True, "source": source,
                "validation": report, "curve": val.curve}
    return {"break_threshold": None, "calibrated": False, "validated": False,
            "source": f"no break rate: {val.reason}", "validation": report, "curve": val.curve}


def _unvalidated(value, unrelated: np.ndarray, baseline: dict, model: str) -> dict:
    """Without cited pages nothing can check a break: the threshold is reported as unvalidated, whatever it is."""
    why = "uncalibrated and unvalidated: the turns cite no pages to check breaks against"
    if value is not None:
        return {"break_threshold": check_break_threshold(value), "source": f"given as a parameter, {why}"}
    if baseline["n"]:
        return {"break_threshold": float(np.quantile(unrelated, BREAK_QUANTILE)),
                "source": f"{BREAK_QUANTILE:.0%} quantile of the cosines of {baseline['n']} pairs of questions from "
                          f"different sessions, {why}"}
    d = model_defaults(model)
    return {"break_threshold": d.break_threshold,
            "source": f"default for the {d.family} model family ({d.basis}), {why} (and fewer than two sessions)"}


def break_notes(overall: dict, breaks: dict, model: str) -> list[str]:
    """What the break numbers mean here: the signal, where the threshold came from, and a constant rate."""
    cons, unrel = breaks["consecutive_pairs"], breaks["unrelated_pairs"]
    notes = []
    scale = (f"with {model or 'this model'} and the {breaks['signal']} signal, consecutive turns have cosine "
             f"{cons['p05']:.3f}–{cons['p95']:.3f} (5th–95th percentile), turns of different sessions "
             f"{unrel['p50']:.3f} (median) and {unrel['p90']:.3f} (90th percentile)")
    t, val = breaks["break_threshold"], breaks["validation"]
    if t is None:
        notes.append(f"context_break_rate says nothing here (NaN, not graded): {breaks['source']} ({scale}).")
    elif breaks["validated"]:
        notes.append(f"break_threshold = {t:.4f}: {breaks['source']} — in-sample, so optimistic for new turns "
                     f"({scale}).")
    else:
        notes.append(f"break_threshold = {t:g} is {breaks['source']}; the number depends on the model: {scale}.")
    if val is not None and "answer" in val.get("signals", {}):
        q, a = val["signals"]["question"], val["signals"]["answer"]
        notes.append(f"Break signal: {breaks['signal_text']} — ROC-AUC for page changes: answers {a['mean']:.3f}, "
                     f"questions {q['mean']:.3f}; the higher one is used.")
    rate = overall["context_break_rate"]
    if t is not None and rate.get("constant") and cons["n"]:
        side = "below" if rate["mean"] == 0 else "above"
        notes.append(f"context_break_rate is {rate['mean']:g} for every pair: break_threshold = {t:.4g} lies {side} "
                     f"every consecutive similarity ({cons['min']:.3f}–{cons['max']:.3f})"
                     + ("." if breaks["validated"] else " — it says nothing about continuity with this model."))
    return notes
