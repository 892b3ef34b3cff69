"""Tier UX metrics (see docs/metrics.md, Tier UX): cache hit rate, context preservation, multi-turn consistency.

All three work on embeddings only; cos(a, b) = a·b / (‖a‖‖b‖), computed in float64 on L2-normalised rows and
clipped to [−1, 1]. A zero vector has no direction, so it is an error, not a score.

Undefined values are NaN and are counted by :func:`ragnb.metrics.stats.aggregate`, never dropped:
an empty cache makes every query's hit undefined (not a miss), and a one-turn session has no consecutive
pair (its context preservation does not apply: NaN, counted as not applicable, not 0 or 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ragnb.metrics.registry import register
from ragnb.metrics.ux_oracle import normalise_question, same_answer_flags
from ragnb.metrics.vector_rows import unit_rows

FAMILY = "ux"
DEFAULT_TAU = 0.85  # see docs/metrics.md, Tier UX
_BLOCK_ELEMS = 1 << 22  # query × cache similarities held at once (~32 MB of float64)


# --------------------------------------------------------------------------- validation


def check_tau(tau: float, name: str = "tau") -> float:
    """τ must be a number in (0, 1]: cosine similarities above 1 do not exist, and τ ≤ 0 makes almost anything a hit."""
    if isinstance(tau, bool) or not isinstance(tau, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} = {tau!r} must be a number in (0, 1], e.g. 0.85 (the default caching threshold)")
    tau = float(tau)
    if not (0.0 < tau <= 1.0):
        raise ValueError(f"{name} = {tau} is outside (0, 1]; use a cosine-similarity threshold such as 0.85")
    return tau


def _ids(ids: Sequence | None, n: int, name: str, unique: bool) -> list | None:
    if ids is None:
        return None
    out = [str(i) for i in ids]
    if len(out) != n:
        raise ValueError(f"{name} has {len(out)} ids for {n} vectors; give one id per row")
    if unique and len(set(out)) != len(out):
        dup = pd.Series(out)[pd.Series(out).duplicated()].iloc[0]
        raise ValueError(f"{name} repeats id {dup!r}; query ids must be unique")
    return out


def cosine(a, b) -> float:
    """cos(a, b) = a·b / (‖a‖‖b‖) for two vectors (clipped to [−1, 1])."""
    u = unit_rows(np.asarray(a)[None, :], "a")[0]
    v = unit_rows(np.asarray(b)[None, :], "b")[0]
    return float(np.clip(u @ v, -1.0, 1.0))


# --------------------------------------------------------------------------- cache hit rate


@dataclass(frozen=True)
class CacheHits:
    """Result of :func:`cache_hit_rate`."""

    rate: float  # hits / |Q valid|; NaN when nothing could be compared (empty cache)
    # index query id: max_similarity, best_cache_id, n_compared, n_excluded, excluded_by, hit (1.0 / 0.0 / NaN)
    per_query: pd.DataFrame
    tau: float
    note: str | None  # why (part of) the result is undefined, else None
    # (query, cache entry) pairs left out as self-matches, per reason (first reason that applies, in
    # SELF_MATCH_REASONS order), plus "queries": how many queries had at least one left out
    excluded: dict = None  # type: ignore[assignment]
    # with query_times/cache_times: the earlier-only rule and its counts (:func:`time_order_counts`), else None
    time_order: dict | None = None

    @property
    def value(self) -> float:
        """The headline number (= ``rate``), as every registered metric result names it."""
        return self.rate


SELF_MATCH_REASONS = ("same_id", "same_source_id", "same_text")


def self_matches(query_ids: Sequence | None, cache_ids: Sequence | None, *, query_source_ids: Sequence | None = None,
                 query_texts: Sequence | None = None, cache_texts: Sequence | None = None
                 ) -> tuple[list[list[int]], list[str], dict]:
    """Cache rows that are the query itself, per query: (row indices, reasons joined by ",", counts).

    A cache entry is the query itself when its id equals the query's id (``same_id``: the checked questions are
    log rows), equals the id of the log row the query was built from (``same_source_id``: a dataset item's
    ``question_answer_id``, e.g. ``rq-42`` built from log row ``42``), or its text equals the query's after
    :func:`normalise_question` (``same_text``: the same question logged again, or a dataset whose ids are
    unrelated to the log's). Each excluded pair is counted under the first reason that applies.
    """
    lists = [x for x in (query_ids, query_source_ids, query_texts) if x is not None]
    n = len(lists[0]) if lists else 0
    by_id: dict[str, list[int]] = {}
    by_text: dict[str, list[int]] = {}
    for j, cid in enumerate(cache_ids or []):
        by_id.setdefault(str(cid), []).append(j)
    for j, ct in enumerate(cache_texts or []):
        key = normalise_question(ct)
        if key:
            by_text.setdefault(key, []).append(j)
    counts = {r: 0 for r in SELF_MATCH_REASONS}
    counts["queries"] = 0
    rows, reasons = [], []
    for i in range(n):
        keys = [
            ("same_id", by_id.get(str(query_ids[i]), []) if query_ids is not None else []),
            ("same_source_id", by_id.get(str(query_source_ids[i]), [])
             if query_source_ids is not None and query_source_ids[i] not in (None, "") else []),
            ("same_text", by_text.get(normalise_question(query_texts[i]), []) if query_texts is not None else []),
        ]
        seen: set[int] = set()
        why = []
        for reason, js in keys:
            new = [j for j in js if j not in seen]
            if new:
                seen.update(new)
                counts[reason] += len(new)
                why.append(reason)
        counts["queries"] += bool(seen)
        rows.append(sorted(seen))
        reasons.append(",".join(why))
    return rows, reasons, counts


EARLIER_RULE = ("a cached question serves a question only if it was asked strictly before it (created_at); one asked "
                "at the same instant is not before it, an undated cached question is never served (its order is "
                "unknown) and an undated question has nothing to compare (hit undefined, counted)")


def time_keys(values: Sequence, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps as comparable int64 nanoseconds since the epoch (UTC; a naive time is read as UTC) and a mask
    of the dated rows (None/NaN/NaT/"" = undated)."""
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries for {n} vectors; give one timestamp (or None) per row")
    raw = pd.Series(list(values), dtype=object).replace("", None)
    try:
        t = pd.to_datetime(raw, utc=True, format="mixed")
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{name}: {exc}; give datetimes or ISO 8601 text such as '2026-03-01T10:00:00Z' "
                         "(None for an undated row)") from None
    ok = t.notna().to_numpy()
    keys = np.zeros(n, dtype=np.int64)
    keys[ok] = t[ok].dt.tz_localize(None).to_numpy().astype("datetime64[ns]").view(np.int64)
    return keys, ok


def _times(query_times: Sequence | None, cache_times: Sequence | None, nq: int, nc: int) -> tuple | None:
    """(query keys, dated, cache keys, dated) for the earlier-only cache, or None without timestamps."""
    if (query_times is None) != (cache_times is None):
        raise ValueError("give both query_times and cache_times (earlier-only cache), or neither")
    if query_times is None:
        return None
    return (*time_keys(query_times, nq, "query_times"), *time_keys(cache_times, nc, "cache_times"))


def _not_earlier(times: tuple, s: int, e: int) -> np.ndarray:
    """(e − s) × |cache| mask: the cache entry was NOT asked strictly before query s…e−1 (or either is undated)."""
    qt, qok, ct, cok = times
    return ~((ct[None, :] < qt[s:e, None]) & cok[None, :] & qok[s:e, None])


def _best_matches(Q: np.ndarray, C: np.ndarray, excluded: list[list[int]] | None,
                  times: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query row: (max cosine over the cache rows, its cache row or −1, number of rows compared), in
    blocks of queries. The cache rows in ``excluded[i]`` (the query itself) are not compared with query i, nor,
    with ``times`` = (query keys, dated, cache keys, dated), the rows not asked before it; a query left with
    nothing to compare gets NaN, −1, 0."""
    nq, nc = Q.shape[0], C.shape[0]
    best_sim, best_idx = np.full(nq, np.nan), np.full(nq, -1)
    n_compared = np.zeros(nq, dtype=np.int64)
    if nc == 0:
        return best_sim, best_idx, n_compared
    step = max(1, _BLOCK_ELEMS // nc)
    for s in range(0, nq, step):
        e = min(nq, s + step)
        sims = np.clip(Q[s:e] @ C.T, -1.0, 1.0)
        compared = np.full(e - s, nc)
        if times is not None:
            later = _not_earlier(times, s, e)
            sims[later] = -np.inf  # not in the cache yet when this question was asked
            compared -= later.sum(axis=1)
        for r in range(e - s):
            same = excluded[s + r] if excluded is not None else None
            if same:
                compared[r] -= int(np.isfinite(sims[r, same]).sum())  # not already left out as later
                sims[r, same] = -np.inf  # never the maximum, never a hit
        arg = np.argmax(sims, axis=1)
        top = sims[np.arange(e - s), arg]
        ok = compared > 0
        best_sim[s:e] = np.where(ok, top, np.nan)
        best_idx[s:e] = np.where(ok, arg, -1)
        n_compared[s:e] = compared
    return best_sim, best_idx, n_compared


@register("cache_hit_rate", FAMILY, kind="vectors", value_range=(0.0, 1.0), higher_is_better=True)
def cache_hit_rate(
    query_vectors,
    cache_vectors,
    tau: float = DEFAULT_TAU,
    *,
    query_ids: Sequence | None = None,
    cache_ids: Sequence | None = None,
    exclude_same_id: bool = True,
    query_source_ids: Sequence | None = None,
    query_texts: Sequence | None = None,
    cache_texts: Sequence | None = None,
    query_pages: Sequence | None = None,
    cache_pages: Sequence | None = None,
    query_times: Sequence | None = None,
    cache_times: Sequence | None = None,
    query_answers: Sequence | None = None,
    cache_answers: Sequence | None = None,
) -> CacheHits:
    """docs/metrics.md, Tier UX: CacheHitRate = (1/|Q|) Σ_{q∈Q} 1[ max_{c∈Cache∖self(q)} cos(e_q, e_c) > τ ].

    τ defaults to 0.85, the original value, chosen for all-MiniLM-L6-v2; similarities are model-specific, so Tier
    UX calibrates τ on the pages the questions cite (:mod:`ragnb.metrics.ux_thresholds`).

    The comparison is strict: a maximum similarity exactly equal to τ is *not* a hit. The cache is the
    set of logged questions users rated 5; each query keeps its best match (``max_similarity``,
    ``best_cache_id``; the first one on ties).

    ``exclude_same_id`` (default): self(q), the cache entries that are the query itself, are left out of that
    query's maximum — a logged question must not "hit" itself. self(q) is found by id (``query_ids`` vs
    ``cache_ids``), by the log id the query was built from (``query_source_ids``, e.g. a dataset item's
    ``question_answer_id``) and by normalised text (``query_texts`` vs ``cache_texts``), see
    :func:`self_matches`; ``excluded`` counts them per reason. ``exclude_same_id=False`` compares everything.

    Undefined cases are NaN, not 0: with an empty cache (or a cache that holds only the query itself) there
    is nothing to compare, so that query's hit is NaN, and the rate is taken over the queries that had
    something to compare (NaN if none); :func:`ragnb.metrics.stats.aggregate` counts them as failed.

    ``query_pages`` / ``cache_pages`` (the page each question cites, as comparable keys; None = no page) add
    the oracle column ``same_page``: 1.0 when the query and its best match cite the same page, 0.0 when they
    cite different pages, NaN when either cites none — whatever τ is (see :func:`cache_hit_precision`).

    ``query_answers`` / ``cache_answers`` (known answer keys, None = unknown:
    :func:`ragnb.metrics.ux_oracle.answer_keys`) add ``same_answer`` the same way.

    ``query_times`` / ``cache_times`` (both, one timestamp or None per row) simulate the cache as it stood when
    each question was asked: Cache(q) = the entries asked strictly before q (:data:`EARLIER_RULE`; ties and
    undated rows are not before). A question with no earlier entry has nothing to compare: NaN, counted in
    ``time_order``. Without them every entry is compared, also ones asked later (an optimistic hit rate).
    """
    tau = check_tau(tau)
    Q = unit_rows(query_vectors, "query_vectors", one_vector_ok=False)
    C = unit_rows(cache_vectors, "cache_vectors", allow_empty=True, one_vector_ok=False)
    qids = _ids(query_ids, Q.shape[0], "query_ids", unique=True)
    cids = _ids(cache_ids, C.shape[0], "cache_ids", unique=False)
    for name, values, n in (("query_source_ids", query_source_ids, Q.shape[0]),
                            ("query_texts", query_texts, Q.shape[0]), ("cache_texts", cache_texts, C.shape[0]),
                            ("query_pages", query_pages, Q.shape[0]), ("cache_pages", cache_pages, C.shape[0]),
                            ("query_answers", query_answers, Q.shape[0]),
                            ("cache_answers", cache_answers, C.shape[0])):
        if values is not None and len(values) != n:
            raise ValueError(f"{name} has {len(values)} entries for {n} vectors; give one per row")
    index = pd.Index(qids if qids is not None else range(Q.shape[0]), name="query_id")
    note = None
    if C.shape[0] == 0:
        note = ("the cache is empty (no logged questions with the cache score and an embedding): "
                "cache_hit_rate is undefined (NaN), not 0")
    elif C.shape[1] != Q.shape[1]:
        raise ValueError(f"query_vectors have dimension {Q.shape[1]} but cache_vectors {C.shape[1]}; "
                         "embed both with the same model")
    if exclude_same_id:
        excluded, reasons, counts = self_matches(
            qids if cids is not None else None, cids, query_source_ids=query_source_ids if cids is not None else None,
            query_texts=query_texts if cache_texts is not None else None, cache_texts=cache_texts)
    else:
        excluded, reasons, counts = None, [""] * Q.shape[0], {**{r: 0 for r in SELF_MATCH_REASONS}, "queries": 0}
    if not reasons:
        reasons = [""] * Q.shape[0]
    times = _times(query_times, cache_times, Q.shape[0], C.shape[0])
    best_sim, best_idx, n_compared = _best_matches(Q, C, excluded or None, times)
    if C.shape[0] and (n_compared == 0).any():
        what = "no cache entry asked before them (other than themselves)" if times else \
            "no cache entry other than themselves"
        note = (f"{int((n_compared == 0).sum())} quer(ies) had {what}: their hit is undefined (NaN) and counted "
                "as failed")
    hit = np.where(np.isnan(best_sim), np.nan, (best_sim > tau).astype(float))
    best_id = [None if i < 0 else (cids[i] if cids is not None else str(i)) for i in best_idx]
    n_excluded = [len(x) for x in excluded] if excluded else [0] * Q.shape[0]
    per_query = pd.DataFrame({"max_similarity": best_sim, "best_cache_id": best_id, "n_compared": n_compared,
                              "n_excluded": n_excluded, "excluded_by": reasons, "hit": hit}, index=index)
    _add_oracle_columns(per_query, best_idx, query_pages, cache_pages, query_answers, cache_answers)
    valid = hit[~np.isnan(hit)]
    rate = float(valid.mean()) if valid.size else math.nan
    order = time_order_counts(times, n_compared) if times is not None else None
    return CacheHits(rate, per_query, tau, note, counts, order)


def _add_oracle_columns(per_query: pd.DataFrame, best_idx, query_pages, cache_pages, query_answers,
                        cache_answers) -> None:
    """``same_page`` / ``same_answer`` of each query and its best match, where both sides were given."""
    if query_pages is not None and cache_pages is not None:
        per_query["same_page"] = same_page_flags(best_idx, query_pages, cache_pages)
    if query_answers is not None and cache_answers is not None:
        per_query["same_answer"] = same_answer_flags(best_idx, query_answers, cache_answers)


def time_order_counts(times: tuple, n_compared: np.ndarray) -> dict:
    """What the earlier-only rule did: undated questions and cache entries, dated questions with no earlier
    entry (cold cache), and the rule in words."""
    qt, qok, ct, cok = times
    return {"applied": True, "rule": EARLIER_RULE, "n_undated_queries": int((~qok).sum()),
            "n_undated_cache": int((~cok).sum()),
            "n_no_earlier": int((qok & (np.asarray(n_compared) == 0)).sum())}


def _page(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def same_page_flags(best_idx: Sequence[int], query_pages: Sequence, cache_pages: Sequence) -> np.ndarray:
    """Per query: 1.0 when it and its best cache match (row ``best_idx[i]``, −1 = none) cite the same page,
    0.0 when both cite a page and the pages differ, NaN when either cites none (None/NaN/blank) or there is
    no match. Pages are compared as given: pass normalised page ids (:func:`ragnb.urls.page_id`)."""
    out = np.full(len(best_idx), np.nan)
    for i, j in enumerate(best_idx):
        if j < 0:
            continue
        q, c = _page(query_pages[i]), _page(cache_pages[j])
        if q is not None and c is not None:
            out[i] = float(q == c)
    return out


@register("cache_hit_precision", FAMILY, kind="classification", value_range=(0.0, 1.0), higher_is_better=True)
def cache_hit_precision(same_page: Sequence, hit: Sequence) -> float:
    """docs/metrics.md, Tier UX: the share of cache hits that would serve the right answer,

        CacheHitPrecision = Σ_q 𝟙[hit(q) ∧ same_page(q)] / Σ_q 𝟙[hit(q) ∧ same_page(q) is known]

    ``same_page(q)`` (1 / 0 / NaN): the oracle's verdict on the query and its best cached question — the same
    page (:func:`same_page_flags`), or, where Tier UX knows both answers, the same answer
    (:func:`ragnb.metrics.ux_oracle.oracle_flags`); ``hit(q)`` (1 / 0 / NaN): its similarity is above τ. Hits whose query or match
    cites no page are left out of the denominator (and counted by the caller); NaN when no hit can be judged.
    """
    s = np.asarray(same_page, dtype=float).ravel()
    h = np.asarray(hit, dtype=float).ravel()
    if s.size != h.size:
        raise ValueError(f"same_page has {s.size} entries but hit {h.size}; give one of each per query")
    judged = (h == 1.0) & ~np.isnan(s)
    return float(s[judged].mean()) if judged.any() else math.nan


# --------------------------------------------------------------------------- sessions


def consecutive_cosines(turn_vectors) -> np.ndarray:
    """cos(e_{q_i}, e_{q_{i+1}}) for i = 1..|S|−1 of one session's turns in order: shape (|S|−1,).

    One turn → an empty array (no consecutive pair).
    """
    U = unit_rows(turn_vectors, "turn_vectors", one_vector_ok=False)
    if U.shape[0] < 2:
        return np.zeros(0)
    return np.clip(np.einsum("ij,ij->i", U[:-1], U[1:]), -1.0, 1.0)


@dataclass(frozen=True)
class SessionScores:
    """Result of :func:`context_preservation` / :func:`multi_turn_consistency`."""

    value: float  # mean over sessions of the per-session means (one-turn sessions excluded, counted as not applicable)
    per_session: pd.DataFrame  # index session_id: n_turns, n_pairs, mean_similarity (NaN: one turn), min_similarity
    pairs: pd.DataFrame  # one row per consecutive pair: session_id, turn (position of the later turn, 0-based), similarity
    n_not_applicable: int  # sessions with fewer than 2 turns: continuity is undefined by design, not a failure


def _session_items(sessions) -> list[tuple[str, object]]:
    if isinstance(sessions, Mapping):
        items = [(str(k), v) for k, v in sessions.items()]
    elif isinstance(sessions, Sequence) and not isinstance(sessions, (str, bytes)):
        items = [(str(i), v) for i, v in enumerate(sessions)]
    else:
        raise ValueError(f"sessions must map session id → (turns × D) matrix, got {type(sessions).__name__}")
    if not items:
        raise ValueError("sessions is empty; give at least one session of turn vectors")
    return items


@register("context_preservation", FAMILY, kind="session", value_range=(-1.0, 1.0), higher_is_better=True)
def context_preservation(sessions: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> SessionScores:
    """docs/metrics.md, Tier UX, per session S = [q_1 … q_n] (turns in order):

        ContextPreservation(S) = 1/(|S|−1) · Σ_{i=1}^{|S|−1} cos(e_{q_i}, e_{q_{i+1}})

    and overall = the mean over sessions of the per-session means ("averaged within the session, then
    over all sessions"): every session weighs the same, however many turns it has. A session with one turn
    has no pair: continuity does not apply to it, so its value is NaN, counted in ``n_not_applicable`` (never
    as failed) and left out of the overall mean (not dropped from ``per_session``).
    """
    rows, pairs = [], []
    dim = None
    for sid, vecs in _session_items(sessions):
        try:
            sims = consecutive_cosines(vecs)
        except ValueError as exc:
            raise ValueError(f"session {sid!r}: {exc}") from None
        d = np.asarray(vecs).shape[1]
        if dim is not None and d != dim:
            raise ValueError(f"session {sid!r} has dimension {d}, earlier sessions {dim}; embed all turns with one model")
        dim = d
        rows.append({"session_id": sid, "n_turns": sims.size + 1, "n_pairs": sims.size,
                     "mean_similarity": float(sims.mean()) if sims.size else math.nan,
                     "min_similarity": float(sims.min()) if sims.size else math.nan})
        pairs.extend({"session_id": sid, "turn": i + 1, "similarity": float(s)} for i, s in enumerate(sims))
    per_session = pd.DataFrame(rows).set_index("session_id")
    means = per_session["mean_similarity"].to_numpy()
    valid = means[~np.isnan(means)]
    pair_frame = pd.DataFrame(pairs, columns=["session_id", "turn", "similarity"])
    return SessionScores(float(valid.mean()) if valid.size else math.nan, per_session, pair_frame,
                         int(np.isnan(means).sum()))


@register("multi_turn_consistency", FAMILY, kind="session", value_range=(-1.0, 1.0), higher_is_better=True)
def multi_turn_consistency(sessions: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> SessionScores:
    """docs/metrics.md, Tier UX: a proxy for the consistency of intents across a dialogue. "In the current version"
    the original definition computes it with the same procedure as :func:`context_preservation` — mean cosine of
    consecutive turns, averaged per session, then over sessions — and logs it as a separate UX metric.
    ragnb does exactly that — MultiTurnConsistency(S) = 1/(|S|−1) · Σ_i cos(e_{q_i}, e_{q_{i+1}}) — so both
    values are always equal; it is kept as its own name so that run records
    stay comparable with the original definition and a later, different definition can replace it without renaming.
    """
    return context_preservation(sessions)
