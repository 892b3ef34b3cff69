"""Tier UX — user experience (see docs/metrics.md, Tier UX): cache reuse potential and dialogue continuity.

- ``cache_hit_rate``: share of questions whose nearest score-5 logged question is more similar than τ, and
  ``cache_hit_precision``: share of those hits whose match cites the same page (:mod:`ragnb.tiers.ux_cache`);
- ``context_preservation`` / ``multi_turn_consistency``: mean cosine of consecutive questions, per session,
  then over sessions (the original definition defines both the same way);
- "questions that broke context": consecutive turns less similar than ``break_threshold`` (by default the
  90th percentile of similarities of questions from different sessions: the model's own scale); where a human flag says
  which turns needed earlier context (TREC CAsT), how well low similarity finds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.metrics.classification import binary_report, score_report
from ragnb.metrics.stats import aggregate
from ragnb.metrics.ux import context_preservation, multi_turn_consistency
from ragnb.metrics.ux_thresholds import (BREAK_QUANTILE, TARGET_PRECISION, check_target_precision,
                                         model_defaults, similarity_quantiles, unrelated_pair_similarities)
from ragnb.datasets.sessions import SOURCES, SessionLog
from ragnb.tiers.result import TierResult
from ragnb.metrics.ux_tau_split import N_SPLITS
from ragnb.tiers.ux_cache import PER_QUERY_COLUMNS, cache_part
from ragnb.tiers.ux_inputs import UXInputs, load_inputs  # noqa: F401  (the notebook's entry points)


@dataclass
class UXResult(TierResult):
    """``per_item``: every turn in order — session_id, turn, question, previous_question, similarity,
    broke_context …; ``summary``: aggregates with CIs, per-source breakdown, settings. ``per_query`` (written
    as ``<name>.per_query.csv``) and ``per_session`` are the cache and session views."""

    # index query id: question, max_similarity, best_cache_id, best_cache_question, hit
    per_query: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)
    # index session id: source, language, n_turns, n_pairs, context_preservation, ...
    per_session: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)
    # precision and hit rate against τ (ragnb.metrics.ux_thresholds.calibrate_tau); empty without cited pages
    tau_curve: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)
    # one row per user half-split of the τ validation (ragnb.metrics.ux_tau_split.validate_tau); empty: none
    tau_splits: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)

    def __post_init__(self) -> None:
        curve = {"tau_curve": self.tau_curve} if not self.tau_curve.empty else {}
        curve.update({"tau_splits": self.tau_splits} if not self.tau_splits.empty else {})
        self.tables = {"per_query": self.per_query, **curve, **self.tables}

    @property
    def breaks(self) -> pd.DataFrame:
        """Turns whose similarity to the previous question is below the break threshold, least similar first."""
        b = self.per_item[self.per_item["broke_context"].fillna(False).astype(bool)]
        return b.sort_values("similarity", kind="stable")


def check_break_threshold(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise ValueError(f"break_threshold = {value!r} must be a number in [-1, 1], e.g. 0.3")
    if not -1.0 <= float(value) <= 1.0:
        raise ValueError(f"break_threshold = {value} is outside [-1, 1]; cosine similarities lie in [-1, 1] (seed: 0.3)")
    return float(value)


def choose_break_threshold(value: float | None, sessions: SessionLog, model: str) -> dict:
    """The break threshold and where it came from: ``value`` as given (not calibrated); else (None) the
    :data:`BREAK_QUANTILE` quantile of the cosines of questions from different sessions — a turn breaks context
    when it is no closer to the previous turn than 9 in 10 pairs of questions of different conversations, on
    this model's scale; else (fewer than two sessions) the model family's default, not calibrated."""
    unrelated = unrelated_pair_similarities(sessions.vectors, sessions.turns["session_id"].tolist())
    baseline = similarity_quantiles(unrelated)
    out = {"unrelated_pairs": baseline}
    if value is not None:
        return {"break_threshold": check_break_threshold(value), "calibrated": False,
                "source": "given as a parameter, not calibrated", **out}
    if baseline["n"]:
        return {"break_threshold": float(np.quantile(unrelated, BREAK_QUANTILE)), "calibrated": True,
                "source": f"{BREAK_QUANTILE:.0%} quantile of the cosines of {baseline['n']} pairs of questions from "
                          "different sessions", **out}
    d = model_defaults(model)
    return {"break_threshold": d.break_threshold, "calibrated": False,
            "source": f"default for the {d.family} model family ({d.basis}), uncalibrated: fewer than two "
                      "sessions, so no pairs of unrelated questions to calibrate on", **out}


def _turn_frame(sessions: SessionLog, annotations: pd.DataFrame | None, pairs: pd.DataFrame,
                break_threshold: float) -> pd.DataFrame:
    turns = sessions.turns[["session_id", "turn", "question"]].copy()
    if annotations is not None:
        ann = annotations.reindex(turns.index)
        turns["source"] = ann["source"].fillna("db").to_numpy()
        turns["language"] = ann["language"].to_numpy()
        for col in ("needs_context", "manual_rewrite", "label"):
            if col in ann:
                turns[col] = ann[col].to_numpy()
    else:
        turns["source"], turns["language"] = "db", None
    if "needs_context" in turns:
        turns["needs_context"] = turns["needs_context"].astype("boolean")
    turns["previous_question"] = turns.groupby("session_id", sort=False)["question"].shift(1)
    sim = pd.Series(pairs["similarity"].to_numpy(),
                    index=pd.MultiIndex.from_arrays([pairs["session_id"].astype(str), pairs["turn"].astype(int)]))
    key = pd.MultiIndex.from_arrays([turns["session_id"].astype(str), turns["turn"].astype(int)])
    turns["similarity"] = sim.reindex(key).to_numpy()
    broke = pd.array(turns["similarity"] < break_threshold, dtype="boolean")
    broke[turns["similarity"].isna().to_numpy()] = pd.NA  # a first turn has nothing to break from
    turns["broke_context"] = broke
    return turns


def _detection(turns: pd.DataFrame, break_threshold: float, n_boot: int, seed: int) -> dict | None:
    """How well 1 − similarity to the previous turn finds the turns a human flagged as needing context."""
    if "needs_context" not in turns:
        return None
    sel = turns[turns["similarity"].notna() & turns["needs_context"].notna()]
    if sel.empty:
        return None
    y = sel["needs_context"].astype(bool).to_numpy()
    scores = 1.0 - sel["similarity"].to_numpy(dtype=float)
    rep = score_report(y, scores, n_boot=n_boot, seed=seed)
    at = binary_report(y, sel["broke_context"].astype(bool).to_numpy(), n_boot=n_boot, seed=seed)
    best = dict(rep["best_threshold"])
    best["similarity_threshold"] = 1.0 - best["threshold"] if not math.isnan(best["threshold"]) else math.nan
    return {
        "roc_auc": rep["roc_auc"], "best_threshold": best,
        "at_break_threshold": {"break_threshold": break_threshold, "confusion": at["confusion"],
                               **{k: at["metrics"][k] for k in ("precision", "recall", "f1")}},
        "n_pairs": int(len(sel)), "n_needs_context": int(y.sum()),
        "mean_similarity_needs_context": float(np.mean(1 - scores[y])) if y.any() else math.nan,
        "mean_similarity_self_contained": float(np.mean(1 - scores[~y])) if (~y).any() else math.nan,
    }


def continuity(values: np.ndarray, n_boot: int, seed: int) -> dict:
    """Aggregate of per-session continuity over the sessions it applies to (two turns or more): a one-turn
    session has no consecutive pair, so it is counted in ``n_not_applicable`` — never in n or n_failed."""
    values = np.asarray(values, dtype=float)
    applies = ~np.isnan(values)
    return {**aggregate(values[applies], n_boot=n_boot, seed=seed), "n_not_applicable": int((~applies).sum())}


def _session_part(sessions: SessionLog, annotations, break_threshold, n_boot, seed):
    by_session = sessions.by_session()
    cp = context_preservation(by_session)
    mtc = multi_turn_consistency(by_session)
    turns = _turn_frame(sessions, annotations, cp.pairs, break_threshold)
    first = turns.groupby("session_id", sort=False).first()
    per_session = cp.per_session.rename(columns={"mean_similarity": "context_preservation"})
    per_session.insert(0, "source", first["source"].reindex(per_session.index).to_numpy())
    per_session.insert(1, "language", first["language"].reindex(per_session.index).to_numpy())
    per_session["multi_turn_consistency"] = mtc.per_session["mean_similarity"]
    per_session["n_breaks"] = turns.groupby("session_id", sort=False)["broke_context"].sum().reindex(per_session.index).astype(int)

    def block(ps: pd.DataFrame, ts: pd.DataFrame) -> dict:
        pair_breaks = ts["broke_context"].dropna().astype(float).to_numpy()
        out = {
            "context_preservation": continuity(ps["context_preservation"].to_numpy(), n_boot, seed),
            "multi_turn_consistency": continuity(ps["multi_turn_consistency"].to_numpy(), n_boot, seed),
            "context_break_rate": aggregate(pair_breaks, n_boot=n_boot, seed=seed),
            "n_sessions": int(len(ps)), "n_turns": int(len(ts)), "n_pairs": int(ps["n_pairs"].sum()),
            "n_one_turn_sessions": int((ps["n_turns"] < 2).sum()), "n_breaks": int(pair_breaks.sum()),
        }
        det = _detection(ts, break_threshold, n_boot, seed)
        if det is not None:
            out["needs_context_detection"] = det
        return out

    overall = block(per_session, turns)
    per_source = {}
    for src in pd.unique(per_session["source"]):
        ps = per_session[per_session["source"] == src]
        ts = turns[turns["source"] == src]
        langs = [x for x in pd.unique(ps["language"]) if isinstance(x, str)]
        labels = [x for x in pd.unique(ts["label"]) if isinstance(x, str)] if "label" in ts else []
        label = labels[0] if labels else SOURCES.get(str(src), {}).get("label", "question log")
        per_source[str(src)] = {"language": langs[0] if len(langs) == 1 else (langs or None), "label": label,
                                **block(ps, ts)}
    return per_session, turns, overall, per_source


def run_tier_ux(
    queries: pd.DataFrame | None,
    query_vectors: np.ndarray | None,
    cache: pd.DataFrame | None,
    cache_vectors: np.ndarray | None,
    sessions: SessionLog | None,
    annotations: pd.DataFrame | None = None,
    tau: float | None = None,
    break_threshold: float | None = None,
    exclude_same_id: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    target_precision: float = TARGET_PRECISION,
    embedding_model: str = "",
    tau_splits: int = N_SPLITS,
) -> UXResult:
    """Tier UX on embeddings that the caller loaded (see :func:`load_inputs`).

    ``queries`` / ``cache``: DataFrames indexed by id with a ``question`` column, and their vectors in row
    order; the cache is the score-5 part of the question log. Both may carry ``url`` (the page each question
    cites): then each hit is checked against it (``cache_hit_precision``) and τ can be calibrated.
    ``sessions``: turns in order with vectors (:class:`ragnb.datasets.sessions.SessionLog`). ``annotations``
    (optional, indexed by turn id): ``source``, ``language``, ``label``, and where known ``needs_context`` /
    ``manual_rewrite`` (the demo's CAsT turns). ``queries`` may carry a ``source_id`` column (the log id a
    dataset item was built from); with ``exclude_same_id`` a query never matches itself — by id, source id or
    normalised text (:func:`ragnb.metrics.ux.self_matches`); ``summary["cache"]["self_matches_excluded"]``
    counts them.

    Thresholds (docs/metrics.md, Tier UX, Thresholds): ``tau`` None = the smallest τ whose precision on the
    cited pages reaches ``target_precision``, else the default of ``embedding_model``'s family (reported as
    uncalibrated); ``break_threshold`` None = the 90% quantile of the similarities of questions from different
    sessions. A
    given value is used as is and reported as not calibrated. The cache of each question holds only the
    questions asked before it where both sides carry ``created_at``; hits are judged by the same answer where
    both answers are known (``answer``), else the same page; a calibrated τ is validated on ``tau_splits``
    seeded user half-splits (``user_id``, else ``session_id``; 0: not validated) and the verdict reads that.

    Either part may be None (skipped, with a note). CIs: bootstrap over questions (cache hit rate), over hits
    (precision), over sessions (context preservation), over consecutive pairs (break rate).
    """
    target_precision = check_target_precision(target_precision)
    if break_threshold is not None:
        check_break_threshold(break_threshold)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ValueError(f"n_boot = {n_boot!r}; use a whole number ≥ 0 of bootstrap resamples (0: no CIs)")
    if queries is None and sessions is None:
        raise ValueError("nothing to evaluate: give questions and a cache, sessions, or both")
    notes: list[str] = []
    nan_agg = aggregate([], n_boot=0)
    summary: dict = {"cache_hit_rate": nan_agg, "cache_hit_precision": {**nan_agg, "n_no_page": 0}}
    per_query, curve, splits = pd.DataFrame(columns=PER_QUERY_COLUMNS), pd.DataFrame(), pd.DataFrame()
    if queries is not None:
        part = cache_part(queries, query_vectors, cache, cache_vectors, tau, target_precision, embedding_model,
                          exclude_same_id, n_boot, seed, tau_splits)
        splits = part.tau_splits
        per_query, notes = part.per_query, notes + part.notes
        curve = part.calibration.curve if part.calibration is not None else curve
        summary.update(part.summary)
    else:
        notes.append("cache_hit_rate was not computed (no questions given).")
        summary.update(tau=tau, tau_calibrated=False, tau_source="not computed", target_precision=target_precision,
                       tau_calibration=None, tau_validation=None, tau_verdict=None, cache={})

    per_session, per_turn = pd.DataFrame(), pd.DataFrame()
    overall: dict = {"context_preservation": nan_agg, "multi_turn_consistency": nan_agg, "context_break_rate": nan_agg}
    per_source: dict = {}
    breaks: dict = {"break_threshold": break_threshold, "calibrated": False, "source": "not computed"}
    if sessions is not None:
        notes.extend(sessions.notes)
        breaks = choose_break_threshold(break_threshold, sessions, embedding_model)
        per_session, per_turn, overall, per_source = _session_part(sessions, annotations, breaks["break_threshold"],
                                                                   n_boot, seed)
        breaks["consecutive_pairs"] = similarity_quantiles(per_turn["similarity"])
        notes.extend(_session_notes(overall, per_source, breaks, embedding_model))
    else:
        notes.append("context_preservation was not computed (no sessions given).")
    notes.append("multi_turn_consistency is computed exactly like context_preservation (as the metric is defined, see "
                 "docs/metrics.md, Tier UX), so the two values are equal by definition.")
    summary.update({
        "context_preservation": overall["context_preservation"],
        "multi_turn_consistency": overall["multi_turn_consistency"],
        "context_break_rate": overall["context_break_rate"],
        "break_threshold": breaks["break_threshold"],
        "break_threshold_calibrated": breaks["calibrated"],
        "break_threshold_source": breaks["source"],
        "break_calibration": {k: v for k, v in breaks.items() if k in ("unrelated_pairs", "consecutive_pairs")},
        "model_defaults": vars(model_defaults(embedding_model)),
        "sessions": {k: v for k, v in overall.items()
                     if k not in ("context_preservation", "multi_turn_consistency", "context_break_rate")},
        "per_source": per_source,
    })
    return UXResult(per_turn, summary, notes, lead={"tier": "tier_ux"}, per_query=per_query, per_session=per_session,
                    tau_curve=curve, tau_splits=splits)


def _session_notes(overall: dict, per_source: dict, breaks: dict, model: str) -> list[str]:
    notes = []
    if overall["n_one_turn_sessions"]:
        notes.append(f"{overall['n_one_turn_sessions']} session(s) have a single turn: continuity does not apply to "
                     "them (no consecutive pair), so they are counted as not applicable, not as failed.")
    single = [s for s, b in per_source.items() if b["n_sessions"] - b["n_one_turn_sessions"] == 1]
    if single:
        notes.append(f"{', '.join(single)}: one multi-turn session only, so its context preservation has no "
                     "confidence interval across sessions (the per-turn chart shows its spread).")
    t, cons, unrel = breaks["break_threshold"], breaks["consecutive_pairs"], breaks["unrelated_pairs"]
    scale = (f"with {model or 'this model'}, consecutive questions have cosine {cons['p05']:.3f}–{cons['p95']:.3f} "
             f"(5th–95th percentile), questions of different sessions {unrel['p50']:.3f} (median) and "
             f"{unrel['p90']:.3f} (90th percentile)")
    rate = overall["context_break_rate"]
    if breaks["calibrated"]:
        notes.append(f"break_threshold = {t:.4f}: the {breaks['source']} — a break is a turn no closer to the "
                     f"previous one than 9 in 10 pairs of questions from different conversations ({scale}).")
    else:
        notes.append(f"break_threshold = {t:g} is {breaks['source']}; the number depends on the model: {scale}.")
    if rate.get("constant") and cons["n"]:
        side = "below" if rate["mean"] == 0 else "above"
        head = (f"context_break_rate is {rate['mean']:g} for every pair: break_threshold = {t:.4g} lies {side} every "
                f"consecutive similarity ({cons['min']:.3f}–{cons['max']:.3f})")
        if breaks["calibrated"]:
            notes.append(head + (" — no turn is as unrelated to the previous one as questions of different sessions "
                                 "usually are" if side == "below" else
                                 " — every turn is as unrelated to the previous one as questions of different "
                                 "sessions usually are") + ".")
        else:
            notes.append(head + " — it says nothing about continuity with this model; set break_threshold = 0 to "
                         "calibrate it on the log.")
    return notes
