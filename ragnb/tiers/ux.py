"""Tier UX — user experience (see docs/metrics.md, Tier UX): cache reuse potential and dialogue continuity.

- ``cache_hit_rate``: share of questions whose nearest score-5 logged question is more similar than τ, and
  ``cache_hit_precision``: share of those hits whose match cites the same page (:mod:`ragnb.tiers.ux_cache`);
- ``context_preservation`` / ``multi_turn_consistency``: mean cosine of consecutive questions, per session,
  then over sessions (the original definition defines both the same way);
- "questions that broke context": consecutive turns less similar than ``break_threshold``; where the turns cite
  pages, the threshold is chosen and validated against "the turn cites another page" and a log where the flags
  cannot beat the majority baseline gets no break rate (:mod:`ragnb.tiers.ux_breaks`); where a human flag says
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
from ragnb.metrics.ux_thresholds import TARGET_PRECISION, check_target_precision, model_defaults
from ragnb.datasets.sessions import SOURCES, SessionLog
from ragnb.tiers.result import TierResult
from ragnb.metrics.ux_tau_split import N_SPLITS
from ragnb.tiers.ux_breaks import break_notes, check_break_threshold, choose_breaks
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
        """Turns flagged as breaking context (their break signal is below the break threshold), least similar to
        the previous turn first; empty where there is no break rate."""
        b = self.per_item[self.per_item["broke_context"].fillna(False).astype(bool)]
        return b.sort_values("break_similarity" if "break_similarity" in b else "similarity", kind="stable")


def _turn_frame(sessions: SessionLog, annotations: pd.DataFrame | None, pairs: pd.DataFrame,
                breaks: dict) -> pd.DataFrame:
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
    if breaks["signal"] != "question":  # the similarity the break flags are cut on, where it is not the above
        turns["break_similarity"] = breaks["similarity"]
    if breaks["page_change"] is not None:  # the oracle: the turn cites another page than the previous turn
        turns["page_change"] = pd.array(breaks["page_change"], dtype="Float64").astype("boolean")
    # NA: a first turn has nothing to break from, and no turn is flagged where the flags say nothing here
    turns["broke_context"] = pd.array(breaks["flags"], dtype="Float64").astype("boolean")
    return turns


def _detection(turns: pd.DataFrame, break_threshold: float | None, n_boot: int, seed: int) -> dict | None:
    """How well 1 − similarity to the previous turn finds the turns a human flagged as needing context."""
    if "needs_context" not in turns:
        return None
    sel = turns[turns["similarity"].notna() & turns["needs_context"].notna()]
    if sel.empty:
        return None
    y = sel["needs_context"].astype(bool).to_numpy()
    scores = 1.0 - sel["similarity"].to_numpy(dtype=float)
    rep = score_report(y, scores, n_boot=n_boot, seed=seed)
    best = dict(rep["best_threshold"])
    best["similarity_threshold"] = 1.0 - best["threshold"] if not math.isnan(best["threshold"]) else math.nan
    at_break = None  # no flags where they say nothing here
    if break_threshold is not None and sel["broke_context"].notna().all():
        at = binary_report(y, sel["broke_context"].astype(bool).to_numpy(), n_boot=n_boot, seed=seed)
        at_break = {"break_threshold": break_threshold, "confusion": at["confusion"],
                    **{k: at["metrics"][k] for k in ("precision", "recall", "f1")}}
    return {
        "roc_auc": rep["roc_auc"], "best_threshold": best, "at_break_threshold": at_break,
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


def _break_rate(flags: pd.Series, breaks: dict, n_boot: int, seed: int) -> dict:
    """The share of flagged pairs; where the flags say nothing here, NaN over every pair, with the reason."""
    if breaks["break_threshold"] is None:
        return {**aggregate(np.full(int(flags.size), np.nan), n_boot=0), "reason": breaks["source"]}
    return aggregate(flags.dropna().astype(float).to_numpy(), n_boot=n_boot, seed=seed)


def _session_part(sessions: SessionLog, annotations, breaks: dict, n_boot, seed):
    by_session = sessions.by_session()
    cp = context_preservation(by_session)
    mtc = multi_turn_consistency(by_session)
    turns = _turn_frame(sessions, annotations, cp.pairs, breaks)
    break_threshold = breaks["break_threshold"]
    first = turns.groupby("session_id", sort=False).first()
    per_session = cp.per_session.rename(columns={"mean_similarity": "context_preservation"})
    per_session.insert(0, "source", first["source"].reindex(per_session.index).to_numpy())
    per_session.insert(1, "language", first["language"].reindex(per_session.index).to_numpy())
    per_session["multi_turn_consistency"] = mtc.per_session["mean_similarity"]
    n_breaks = turns.groupby("session_id", sort=False)["broke_context"].sum().reindex(per_session.index)
    per_session["n_breaks"] = n_breaks.astype("Int64") if break_threshold is not None else pd.NA

    def block(ps: pd.DataFrame, ts: pd.DataFrame) -> dict:
        pairs = ts.loc[ts["similarity"].notna(), "broke_context"]
        rate = _break_rate(pairs, breaks, n_boot, seed)
        out = {
            "context_preservation": continuity(ps["context_preservation"].to_numpy(), n_boot, seed),
            "multi_turn_consistency": continuity(ps["multi_turn_consistency"].to_numpy(), n_boot, seed),
            "context_break_rate": rate,
            "n_sessions": int(len(ps)), "n_turns": int(len(ts)), "n_pairs": int(ps["n_pairs"].sum()),
            "n_one_turn_sessions": int((ps["n_turns"] < 2).sum()),
            "n_breaks": int(pairs.dropna().sum()) if break_threshold is not None else None,
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
    uncalibrated). Breaks (:func:`ragnb.tiers.ux_breaks.choose_breaks`): where the turns cite pages,
    ``break_threshold`` None = the cut that agrees most often with "the turn cites another page than the previous
    turn", and a break rate only where the flags beat the majority baseline and the AUC's CI lies above 0.5 (else
    NaN with the reason); without cited pages, the 90% quantile of the similarities of turns from different
    sessions, reported as uncalibrated and unvalidated. A given value is used as is, and validated where it can be.
    The break signal is the turn's question + answer where ``sessions.context_vectors`` holds them, else the
    question.
    The cache of each question holds only the questions asked before it where both sides carry ``created_at``;
    hits are judged by the same answer where both answers are known (``answer``), else the same page; a calibrated
    τ is validated on ``tau_splits`` seeded user half-splits (``user_id``, else ``session_id``; 0: not validated)
    and the verdict reads that.

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
    breaks: dict = {"break_threshold": break_threshold, "calibrated": False, "validated": False, "signal": None,
                    "source": "not computed", "validation": None}
    if sessions is not None:
        notes.extend(sessions.notes)
        breaks = choose_breaks(break_threshold, sessions, embedding_model, n_boot, seed)
        per_session, per_turn, overall, per_source = _session_part(sessions, annotations, breaks, n_boot, seed)
        notes.extend(_session_notes(overall, per_source))
        notes.extend(break_notes(overall, breaks, embedding_model))
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
        "break_threshold_validated": breaks["validated"],
        "break_signal": breaks["signal"],
        "break_validation": breaks["validation"],
        "break_calibration": {k: v for k, v in breaks.items() if k in ("unrelated_pairs", "consecutive_pairs")},
        "model_defaults": vars(model_defaults(embedding_model)),
        "sessions": {k: v for k, v in overall.items()
                     if k not in ("context_preservation", "multi_turn_consistency", "context_break_rate")},
        "per_source": per_source,
    })
    return UXResult(per_turn, summary, notes, lead={"tier": "tier_ux"}, per_query=per_query, per_session=per_session,
                    tau_curve=curve, tau_splits=splits)


def _session_notes(overall: dict, per_source: dict) -> list[str]:
    notes = []
    if overall["n_one_turn_sessions"]:
        notes.append(f"{overall['n_one_turn_sessions']} session(s) have a single turn: continuity does not apply to "
                     "them (no consecutive pair), so they are counted as not applicable, not as failed.")
    single = [s for s, b in per_source.items() if b["n_sessions"] - b["n_one_turn_sessions"] == 1]
    if single:
        notes.append(f"{', '.join(single)}: one multi-turn session only, so its context preservation has no "
                     "confidence interval across sessions (the per-turn chart shows its spread).")
    return notes
