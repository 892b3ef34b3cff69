"""Knowledge-gap candidates of a question log (see docs/metrics.md, Analytics): the signals the log holds, each
reported on its own so a reader sees *why* a question was flagged.

* ``low_score`` — the user scored the answer ≤ 2;
* ``no_url`` — the answer cited no page;
* ``url_not_in_corpus`` — it cited a page that no chunk of the corpus is on (page ids compared, as the real-users
  benchmark does);
* ``low_similarity`` — the best retrieved chunk's cosine similarity is below a threshold (:func:`knowledge_gaps`).

A cosine threshold means nothing across models (multilingual-e5 puts almost any two texts of one wiki at
0.78–0.90, all-MiniLM-L6-v2 far lower), so it is *calibrated* on the log where it can be: the ``gap_quantile``
quantile of the top-1 similarities of the questions the corpus demonstrably served (cited page retrieved in the
top k, score not low). Without enough of those it falls back to the quantile over all questions, which is
relative to this model and this log and says so ("uncalibrated").

Follow-up turns. "And which client do I install?" leans on the previous turn: its vector alone is far from every
chunk, although the conversation was answered. A turn is a follow-up when it is not the first of its session
(turns ordered by ``created_at``, then id), has at most :data:`FOLLOW_UP_MAX_WORDS` words and opens with a
connector or holds an anaphoric pronoun (:data:`FOLLOW_UP_CUES`). A follow-up whose previous turn was scored
≥ :data:`GOOD_SCORE` is not flagged on low similarity alone; its other signals still count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ragnb.metrics.text import UnicodeTokenizer
from ragnb.tiers.real_users import NO_URL, UNMATCHED, page_qrels

SIGNALS = ("low_score", "no_url", "url_not_in_corpus", "low_similarity")
SIGNAL_TEXT = {"low_score": "user score ≤ 2", "no_url": "no cited page", "url_not_in_corpus": "cited page not in the "
               "corpus", "low_similarity": "low top-1 similarity"}
LOW_SCORE, GOOD_SCORE = 2, 4
MIN_SERVED = 10  # served questions needed to calibrate the similarity threshold on them
FOLLOW_UP_MAX_WORDS = 8
# Openers that continue a conversation, and pronouns that point back at it (English and Russian; ё written е).
FOLLOW_UP_OPENERS = frozenset("and but so also then or а и но тогда также еще или".split())
# Personal pronouns only: demonstratives are mostly determiners in a question ("this week", "на этой неделе").
FOLLOW_UP_PRONOUNS = frozenset("it its they them он она оно они его ее их ему ей им него нее них нем ней это".split())
FOLLOW_UP_CUES = FOLLOW_UP_OPENERS | FOLLOW_UP_PRONOUNS


def knowledge_gaps(top1_scores, gap_threshold: float | None = None, gap_quantile: float = 0.10,
                   served=None, min_served: int = MIN_SERVED) -> tuple[np.ndarray, dict]:
    """Questions whose top-1 cosine similarity is strictly below the threshold (no retrieval, NaN, is below).

    threshold = ``gap_threshold`` when given (method "absolute": set by the user, valid for one model only); else
    the ``gap_quantile`` quantile (numpy linear interpolation) of the top-1 similarities of the ``served``
    questions (boolean mask) when at least ``min_served`` are served (method "calibrated"); else of all questions
    (method "quantile": uncalibrated, always flags about that share). Returns (mask, ``{threshold, method,
    quantile, calibrated, n_reference, description, n, n_gaps, gap_share}``).
    """
    s = np.asarray(top1_scores, dtype=float).ravel()
    if s.size == 0:
        raise ValueError("no top-1 similarities given: retrieve for at least one question")
    if gap_threshold is not None:
        if not np.isfinite(gap_threshold) or not -1.0 <= gap_threshold <= 1.0:
            raise ValueError(f"gap_threshold = {gap_threshold}; a cosine similarity threshold lies in [-1, 1]")
        threshold, method, ref = float(gap_threshold), "absolute", s[:0]
        text = f"absolute cut-off {threshold:.3f} set by the user (valid for this embedding model only)"
    else:
        if not 0.0 < gap_quantile < 1.0:
            raise ValueError(f"gap_quantile = {gap_quantile}; use a share strictly between 0 and 1, e.g. 0.1")
        ok = np.isfinite(s)
        srv = np.zeros(s.size, bool) if served is None else np.asarray(served, dtype=bool).ravel()
        if srv.size != s.size:
            raise ValueError(f"{srv.size} served flags for {s.size} questions; give one per question")
        method = "calibrated" if int((srv & ok).sum()) >= min_served else "quantile"
        ref = s[srv & ok] if method == "calibrated" else s[ok]
        threshold = float(np.quantile(ref, gap_quantile)) if ref.size else float("nan")
        text = (f"{gap_quantile:g} quantile of the top-1 similarity of the {ref.size} questions whose cited page was "
                "retrieved (calibrated on this log and model)" if method == "calibrated" else
                f"{gap_quantile:g} quantile of the top-1 similarity of all {ref.size} questions — uncalibrated: relative "
                f"to this model and log, it flags about {gap_quantile:.0%} whatever the corpus (fewer than "
                f"{min_served} questions with a retrieved cited page to calibrate on)")
    mask = ~np.isfinite(s) | (s < threshold)
    info = {"threshold": threshold, "method": method, "quantile": None if method == "absolute" else gap_quantile,
            "calibrated": method == "calibrated", "n_reference": int(ref.size), "description": text,
            "n": int(s.size), "n_gaps": int(mask.sum()), "gap_share": float(mask.mean())}
    return mask, info


def _previous_turns(log: pd.DataFrame) -> np.ndarray:
    """The position of each row's previous turn in its session (−1 for a first turn or no session), turns
    ordered by ``created_at`` (missing last) then id, as Tier UX reads sessions."""
    frame = pd.DataFrame({"session_id": log["session_id"].to_numpy(dtype=object),
                          "created_at": pd.to_datetime(log["created_at"], utc=True, errors="coerce").to_numpy()
                          if "created_at" in log.columns else pd.NaT,
                          "id": [str(i) for i in log.index], "pos": np.arange(len(log))})
    frame = frame[frame["session_id"].notna()].sort_values(["session_id", "created_at", "id"], na_position="last")
    prev = np.full(len(log), -1)
    for _, turns in frame.groupby("session_id", sort=False):
        p = turns["pos"].to_numpy()
        prev[p[1:]] = p[:-1]
    return prev


def follow_ups(questions: Sequence[str], log: pd.DataFrame, scores) -> tuple[np.ndarray, np.ndarray]:
    """(is a follow-up turn, is a follow-up whose previous turn was scored ≥ GOOD_SCORE) per question; see the
    module docstring for the rule. ``log`` holds ``session_id`` (and ``created_at``) per question."""
    if "session_id" not in log.columns:
        return np.zeros(len(questions), bool), np.zeros(len(questions), bool)
    prev = _previous_turns(log)
    values = pd.to_numeric(pd.Series(list(scores), dtype="object"), errors="coerce").to_numpy(dtype=float)
    tok = UnicodeTokenizer()
    follow = np.zeros(len(questions), bool)
    for i, q in enumerate(questions):
        words = tok.tokenize(str(q))
        follow[i] = prev[i] >= 0 and 0 < len(words) <= FOLLOW_UP_MAX_WORDS and (
            words[0] in FOLLOW_UP_OPENERS or any(w in FOLLOW_UP_PRONOUNS for w in words))
    prev_good = np.array([p >= 0 and values[p] >= GOOD_SCORE for p in prev])
    return follow, follow & prev_good


def _signal_counts(frame: pd.DataFrame, applicable: Mapping[str, np.ndarray], sim_info: dict) -> dict:
    """Per signal: ``{n_flagged, n, share, rule}`` over the questions it applies to, plus the follow-ups exempted
    from low similarity and the questions flagged by any signal."""
    out: dict = {}
    for name in SIGNALS:
        ok = applicable[name]
        n, k = int(ok.sum()), int(frame.loc[ok, name].sum())
        out[name] = {"n_flagged": k, "n": n, "share": k / n if n else float("nan"), "rule": SIGNAL_TEXT[name]}
    out["low_similarity"]["rule"] = f"top-1 similarity < {sim_info['threshold']:.3f} ({sim_info['description']})"
    exempt = frame["low_similarity"] & frame["follow_up_exempt"] & (frame["n_signals"] == 0)
    out["follow_ups_not_flagged"] = int(exempt.sum())
    out["any"] = {"n_flagged": int(frame["is_gap"].sum()), "n": len(frame),
                  "share": float(frame["is_gap"].mean()) if len(frame) else float("nan")}
    return out


def _check_log(log: pd.DataFrame, n: int, chunk_urls) -> None:
    if not isinstance(log, pd.DataFrame) or "url" not in log.columns:
        raise ValueError("log must be the question-log frame (fetch_question_log) with a 'url' column")
    if len(log) != n:
        raise ValueError(f"log has {len(log)} rows for {n} questions; pass the log rows of the analysed questions, "
                         "in the same order")
    if chunk_urls is None:
        raise ValueError("the log's URL signals need chunk_urls (chunk id → url of every searchable chunk) to tell "
                         "which cited pages are in the corpus")


def gap_signals(questions: Sequence[str], scores, top1_scores, hits=None, log: pd.DataFrame | None = None,
                chunk_urls: Mapping[str, str | None] | None = None, gap_threshold: float | None = None,
                gap_quantile: float = 0.10, min_served: int = MIN_SERVED) -> tuple[pd.DataFrame, dict]:
    """Every signal per question (see the module docstring).

    ``scores``: user score 1–5 or None; ``top1_scores``: best retrieved chunk's cosine; ``hits``: page hit
    per question (1/0, NaN = no label; :func:`ragnb.analysis.domain.page_hits`); ``log``: the question-log rows
    (``url``, ``session_id``, ``created_at``) in the same order, with ``chunk_urls`` to tell cited pages in the
    corpus. Without ``log`` the URL signals and follow-ups are not available (they apply to no question).

    Returns (frame: one column per signal, ``follow_up``, ``follow_up_exempt``, ``n_signals``, ``signals`` — the
    names of the signals that flagged it — and ``is_gap``; summary: the similarity threshold info and the counts
    of :func:`_signal_counts`). A follow-up exempt on similarity keeps ``low_similarity`` True but is no gap
    unless another signal flags it.
    """
    n = len(questions)
    values = pd.to_numeric(pd.Series(list(scores), dtype="object"), errors="coerce").to_numpy(dtype=float)
    hit = np.full(n, np.nan) if hits is None else np.asarray(hits, dtype=float).ravel()
    served = (hit == 1) & ~(values <= LOW_SCORE)
    low_sim, sim_info = knowledge_gaps(top1_scores, gap_threshold, gap_quantile, served, min_served)
    has_log = log is not None
    if has_log:
        _check_log(log, n, chunk_urls)
    status = (page_qrels({str(i): u for i, u in enumerate(log["url"].tolist())}, chunk_urls)[1]["status"].to_numpy()
              if has_log else np.full(n, ""))
    follow, exempt = follow_ups(questions, log, values) if has_log else (np.zeros(n, bool), np.zeros(n, bool))
    frame = pd.DataFrame({"low_score": values <= LOW_SCORE, "no_url": status == NO_URL,
                          "url_not_in_corpus": status == UNMATCHED, "low_similarity": low_sim,
                          "follow_up": follow, "follow_up_exempt": exempt})
    others = frame[["low_score", "no_url", "url_not_in_corpus"]].sum(axis=1)
    counted = frame["low_similarity"] & ~frame["follow_up_exempt"]
    frame["n_signals"] = others + counted
    frame["signals"] = ["; ".join(s for s in SIGNALS if row[s] and (s != "low_similarity" or c))
                        for row, c in zip(frame.to_dict("records"), counted)]
    frame["is_gap"] = frame["n_signals"] > 0
    applicable = {"low_score": ~np.isnan(values), "no_url": np.full(n, has_log),
                  "url_not_in_corpus": status != NO_URL if has_log else np.zeros(n, bool),
                  "low_similarity": np.ones(n, bool)}
    counts = _signal_counts(frame, applicable, sim_info)
    return frame, {"similarity": sim_info, "signals": counts}
