"""Tier UX — user experience (see docs/metrics.md, Tier UX): cache reuse potential and dialogue continuity.

- ``cache_hit_rate``: share of questions whose nearest score-5 logged question is more similar than τ;
- ``context_preservation`` / ``multi_turn_consistency``: mean cosine of consecutive questions, per session,
  then over sessions (the original definition defines both the same way);
- "questions that broke context": consecutive turns less similar than ``break_threshold``; where a human
  flag says which turns needed earlier context (TREC CAsT), how well low similarity finds them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ragnb.rag.encoders.base import encode_queries
from ragnb.metrics.classification import binary_report, score_report
from ragnb.metrics.stats import aggregate
from ragnb.metrics.ux import DEFAULT_TAU, cache_hit_rate, check_tau, context_preservation, multi_turn_consistency
from ragnb.datasets.sessions import SESSION_CHOICES, SOURCES, SessionLog
from ragnb.tiers.result import TierResult

DEFAULT_BREAK_THRESHOLD = 0.3  # see docs/metrics.md, Tier UX
SIMULATED_NOTE = ("The demo question log's user scores are SIMULATED (a fixed random draw, see ragnb.datasets.demo): the "
                  "score-5 cache is a random ~half of the demo questions, so cache_hit_rate here shows how the "
                  "metric works, not how a real cache would perform.")


@dataclass
class UXResult(TierResult):
    """``per_item``: every turn in order — session_id, turn, question, previous_question, similarity,
    broke_context …; ``summary``: aggregates with CIs, per-source breakdown, settings. ``per_query`` (written
    as ``<name>.per_query.csv``) and ``per_session`` are the cache and session views."""

    # index query id: question, max_similarity, best_cache_id, best_cache_question, hit
    per_query: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)
    # index session id: source, language, n_turns, n_pairs, context_preservation, ...
    per_session: pd.DataFrame = field(default_factory=pd.DataFrame, kw_only=True)

    def __post_init__(self) -> None:
        self.tables = {"per_query": self.per_query, **self.tables}

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


def _texts(frame: pd.DataFrame | None, vectors, name: str) -> pd.DataFrame:
    if frame is None:
        raise ValueError(f"{name} is None")
    if "question" not in frame.columns:
        raise ValueError(f"{name} needs a 'question' column (index = ids)")
    if len(frame) != len(vectors):
        raise ValueError(f"{name} has {len(frame)} rows but {len(vectors)} vectors; give one vector per row, in order")
    return frame


def _cache_part(queries, query_vectors, cache, cache_vectors, tau, exclude_same_id, n_boot, seed):
    queries = _texts(queries, query_vectors, "queries")
    cache = _texts(cache, cache_vectors, "cache")
    source_ids = (queries["source_id"].tolist() if "source_id" in queries.columns else None)
    hits = cache_hit_rate(query_vectors, cache_vectors, tau, query_ids=list(queries.index),
                          cache_ids=list(cache.index), exclude_same_id=exclude_same_id, query_source_ids=source_ids,
                          query_texts=queries["question"].tolist(), cache_texts=cache["question"].tolist())
    per_query = hits.per_query.copy()
    per_query.insert(0, "question", queries["question"].to_numpy())
    cache_text = cache["question"].groupby(level=0).first()
    per_query["best_cache_question"] = per_query["best_cache_id"].map(cache_text)
    per_query = per_query[["question", "max_similarity", "best_cache_id", "best_cache_question", "n_compared",
                           "n_excluded", "excluded_by", "hit"]]
    sims = per_query["max_similarity"].dropna()
    excluded = dict(hits.excluded)
    summary = {
        "agg": aggregate(per_query["hit"].to_numpy(), n_boot=n_boot, seed=seed),
        "info": {"n_queries": len(per_query), "n_cache": len(cache), "n_hits": int(np.nansum(per_query["hit"])),
                 "exclude_same_id": exclude_same_id,
                 # queries that had at least one cache entry left out as themselves (kept for older readers)
                 "n_self_in_cache": int(excluded.pop("queries")),
                 "self_matches_excluded": excluded,
                 "max_similarity_p50": float(sims.median()) if len(sims) else math.nan,
                 "max_similarity_p95": float(sims.quantile(0.95)) if len(sims) else math.nan},
    }
    return per_query, summary, hits.note


def _turn_frame(sessions: SessionLog, annotations: pd.DataFrame | None, pairs: pd.DataFrame,
                break_threshold: float) -> pd.DataFrame:
    turns = sessions.turns[["session_id", "turn", "question"]].copy()
    if annotations is not None:
        ann = annotations.reindex(turns.index)
        turns["source"] = ann["source"].fillna("db").to_numpy()
        turns["language"] = ann["language"].to_numpy()
        for col in ("needs_context", "manual_rewrite"):
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
            "context_preservation": aggregate(ps["context_preservation"].to_numpy(), n_boot=n_boot, seed=seed),
            "multi_turn_consistency": aggregate(ps["multi_turn_consistency"].to_numpy(), n_boot=n_boot, seed=seed),
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
        langs = [x for x in pd.unique(ps["language"]) if isinstance(x, str)]
        per_source[str(src)] = {"language": langs[0] if len(langs) == 1 else (langs or None),
                                "label": SOURCES.get(str(src), {}).get("label", "question log"),
                                **block(ps, turns[turns["source"] == src])}
    return per_session, turns, overall, per_source


def run_tier_ux(
    queries: pd.DataFrame | None,
    query_vectors: np.ndarray | None,
    cache: pd.DataFrame | None,
    cache_vectors: np.ndarray | None,
    sessions: SessionLog | None,
    annotations: pd.DataFrame | None = None,
    tau: float = DEFAULT_TAU,
    break_threshold: float = DEFAULT_BREAK_THRESHOLD,
    exclude_same_id: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
) -> UXResult:
    """Tier UX on embeddings that the caller loaded (see :func:`load_inputs`).

    ``queries`` / ``cache``: DataFrames indexed by id with a ``question`` column, and their vectors in row
    order; the cache is the score-5 part of the question log. ``sessions``: turns in order with vectors
    (:class:`ragnb.datasets.sessions.SessionLog`). ``annotations`` (optional, indexed by turn id): ``source``,
    ``language``, and where known ``needs_context`` / ``manual_rewrite`` (the demo's CAsT turns).
    ``queries`` may carry a ``source_id`` column (the log id a dataset item was built from); with
    ``exclude_same_id`` a query never matches itself — by id, source id or normalised text
    (:func:`ragnb.metrics.ux.self_matches`); ``summary["cache"]["self_matches_excluded"]`` counts them.
    Either part may be None (skipped, with a note). CIs: bootstrap over questions (cache hit rate), over
    sessions (context preservation), over consecutive pairs (break rate).
    """
    tau = check_tau(tau)
    break_threshold = check_break_threshold(break_threshold)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ValueError(f"n_boot = {n_boot!r}; use a whole number ≥ 0 of bootstrap resamples (0: no CIs)")
    if queries is None and sessions is None:
        raise ValueError("nothing to evaluate: give questions and a cache, sessions, or both")
    notes: list[str] = []
    nan_agg = aggregate([], n_boot=0)
    per_query = pd.DataFrame(columns=["question", "max_similarity", "best_cache_id", "best_cache_question",
                                      "n_compared", "n_excluded", "excluded_by", "hit"])
    cache_info: dict = {}
    cache_agg = nan_agg
    if queries is not None:
        per_query, cache_summary, note = _cache_part(queries, query_vectors, cache, cache_vectors, tau,
                                                     exclude_same_id, n_boot, seed)
        cache_agg, cache_info = cache_summary["agg"], cache_summary["info"]
        if note:
            notes.append(f"cache_hit_rate: {note}.")
    else:
        notes.append("cache_hit_rate was not computed (no questions given).")

    per_session = pd.DataFrame()
    per_turn = pd.DataFrame()
    overall: dict = {"context_preservation": nan_agg, "multi_turn_consistency": nan_agg, "context_break_rate": nan_agg}
    per_source: dict = {}
    if sessions is not None:
        notes.extend(sessions.notes)
        per_session, per_turn, overall, per_source = _session_part(sessions, annotations, break_threshold, n_boot, seed)
        if overall["n_one_turn_sessions"]:
            notes.append(f"{overall['n_one_turn_sessions']} session(s) have a single turn: their context preservation "
                         "is undefined (NaN) and counted in n_failed, not dropped.")
        single = [s for s, b in per_source.items() if b["n_sessions"] == 1]
        if single:
            notes.append(f"{', '.join(single)}: one session only, so its context preservation has no confidence "
                         "interval across sessions (the per-turn chart shows its spread).")
    else:
        notes.append("context_preservation was not computed (no sessions given).")
    notes.append("multi_turn_consistency is computed exactly like context_preservation (as the metric is defined, see "
                 "docs/metrics.md, Tier UX), so the two values are equal by definition.")

    summary = {
        "cache_hit_rate": cache_agg,
        "context_preservation": overall["context_preservation"],
        "multi_turn_consistency": overall["multi_turn_consistency"],
        "context_break_rate": overall["context_break_rate"],
        "tau": tau,
        "break_threshold": break_threshold,
        "cache": cache_info,
        "sessions": {k: v for k, v in overall.items()
                     if k not in ("context_preservation", "multi_turn_consistency", "context_break_rate")},
        "per_source": per_source,
    }
    return UXResult(per_turn, summary, notes, lead={"tier": "tier_ux"}, per_query=per_query, per_session=per_session)


# --------------------------------------------------------------------------------------------
# Inputs: what the notebook opens
# --------------------------------------------------------------------------------------------


@dataclass
class UXInputs:
    queries: pd.DataFrame | None
    query_vectors: np.ndarray | None
    cache: pd.DataFrame | None
    cache_vectors: np.ndarray | None
    sessions: SessionLog | None
    annotations: pd.DataFrame | None
    info: dict  # for the report header (no secrets)
    notes: list[str]
    embedding_model: str


def load_inputs(
    corpus: str = "demo",
    language: str = "ru",
    sessions: str = "demo",
    embedding_model: str = "",
    dataset_path: str = "",
    max_questions: int = 0,
    max_sessions: int = 0,
    cache_score: int = 5,
) -> UXInputs:
    """Open everything Tier UX reads.

    Cache part — ``corpus="demo"``: the demo dataset questions (or ``dataset_path``) against the score-5
    rows of the demo question log (SIMULATED scores; a question never hits itself); ``"db"``: the questions
    of ``dataset_path``, or (empty path) every embedded logged question, against the configured log's
    score-``cache_score`` rows. Sessions — ``"demo"``: the bundled ruTiE + TREC CAsT sessions in their own
    database; ``"db"``: the configured log's rows that have a session id.
    """
    from ragnb.rag.embeddings import get_encoder

    _check_input_options(corpus, sessions, max_questions, max_sessions, cache_score)
    encoder = get_encoder(embedding_model or None)
    notes: list[str] = []
    info: dict = {"embedding_model": encoder.name}
    log_db, queries, query_vectors, cache, cache_vectors = _cache_inputs(
        corpus, language, encoder, dataset_path, max_questions, cache_score, info, notes)
    session_log, annotations = _session_inputs(sessions, corpus, log_db, encoder, max_sessions, info, notes)
    return UXInputs(queries, query_vectors, cache[["question"]], cache_vectors, session_log, annotations, info, notes,
                    encoder.name)


def _check_input_options(corpus: str, sessions: str, max_questions: int, max_sessions: int, cache_score: int) -> None:
    if corpus not in ("demo", "db"):
        raise ValueError(f"corpus = {corpus!r}; use 'demo' (bundled XQuAD questions and log) or 'db' (the configured database)")
    if sessions not in SESSION_CHOICES:
        raise ValueError(f"sessions = {sessions!r}; use 'demo' (bundled ruTiE + TREC CAsT sessions) or 'db' "
                         "(sessions of the configured question log)")
    for name, value in (("max_questions", max_questions), ("max_sessions", max_sessions)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} = {value!r}; use 0 for all or a positive number")
    if isinstance(cache_score, bool) or not isinstance(cache_score, int) or not 1 <= cache_score <= 5:
        raise ValueError(f"cache_score = {cache_score!r}; user scores are integers 1–5 (seed: 5)")


def _cache_inputs(corpus: str, language: str, encoder: Any, dataset_path: str, max_questions: int, cache_score: int,
                  info: dict, notes: list[str]) -> tuple[Any, pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray]:
    """The question log's database, the questions to check and the score-``cache_score`` cache, with vectors."""
    from ragnb.datasets.schema import load_dataset
    from ragnb.datasets import demo
    from ragnb.datasets.fingerprint import note_corpus, note_dataset
    from ragnb.store.engine import connect
    from ragnb.store.questions import fetch_question_log
    from ragnb.datasets.corpus import stored_model
    from ragnb.store.schema import table_exists, tables
    from ragnb.store.vectors import check_space

    if corpus == "demo":
        log_db, _ = demo.ensure_demo(language, encoder)
        info["corpus"] = f"demo: XQuAD {language} question log (CC BY-SA 4.0), simulated user scores"
        notes.append(SIMULATED_NOTE)
    else:
        log_db = connect()
        info["corpus"] = "database"
    info["question_log"] = log_db.display_url
    note_corpus(log_db)
    model = stored_model(log_db, encoder, "questions") if table_exists(log_db, tables(log_db.schema).question) else None
    cache, cache_vectors = fetch_question_log(log_db, exact_score=cache_score, with_vectors=True, model=model)
    # after the fetch: it names a missing table better
    check_space(log_db, tables(log_db.schema).question, encoder, model=model)
    if dataset_path or corpus == "demo":
        ds = load_dataset(dataset_path) if dataset_path else demo.dataset(language)
        items = ds.items[:max_questions] if max_questions else ds.items
        note_dataset(ds.model_copy(update={"items": items}))  # the run record says which questions were checked
        # source_id: the log row an item was built from (from-real-questions), so it never hits itself
        queries = pd.DataFrame({"question": [it.question for it in items],
                                "source_id": [_source_id(it) for it in items]},
                               index=pd.Index([it.id for it in items]))
        query_vectors = encode_queries(encoder, queries["question"].tolist(), batch_size=64)
        info["questions"] = f"dataset {ds.name}"
    else:
        log, query_vectors = fetch_question_log(log_db, with_vectors=True, limit=max_questions, model=model)
        queries = log[["question"]]
        info["questions"] = "the logged questions (each compared with the cache without itself)"
        if queries.empty:
            raise ValueError(f"{log_db.display_url}: no logged question has an embedding; run `ragnb embed --questions`")
    info["cache"] = f"logged questions with score {cache_score} ({len(cache)})"
    return log_db, queries, query_vectors, cache, cache_vectors


def _source_id(item: Any) -> str | None:
    """The log id a dataset item was built from (``question_answer_id``, an extra field), else None."""
    value = getattr(item, "question_answer_id", None)
    return None if value is None else str(value)


def _session_inputs(sessions: str, corpus: str, log_db: Any, encoder: Any, max_sessions: int, info: dict,
                    notes: list[str]) -> tuple[SessionLog, pd.DataFrame | None]:
    """The dialogue sessions (and, for the demo, the human needs-context flags of their turns)."""
    from ragnb.store.engine import connect
    from ragnb.store.schema import tables
    from ragnb.datasets.sessions import demo_turn_annotations, ensure_demo_sessions, read_sessions
    from ragnb.store.vectors import check_space

    if sessions == "demo":
        s_db, _ = ensure_demo_sessions(encoder)
        annotations = demo_turn_annotations()
        info["sessions"] = "demo: ruTiE (ru, MIT) + TREC CAsT 2019-2020 (en, MIT)"
    else:
        s_db = log_db if corpus == "db" else connect()
        annotations = None
        info["sessions"] = "database"
    check_space(s_db, tables(s_db.schema).question, encoder)
    session_log = read_sessions(s_db, max_sessions=max_sessions, encoder=encoder)
    if sessions == "demo":
        notes.append("Demo sessions: created_at is synthetic (one minute per turn) and only fixes the turn order; "
                     "the all-MiniLM-L6-v2 default model is English-only, so Russian (ruTiE) similarities are "
                     "less meaningful than English (CAsT) ones.")
    return session_log, annotations
