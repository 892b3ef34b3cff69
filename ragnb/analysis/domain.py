"""Real-user domain analysis (see docs/metrics.md, Real users and Analytics): what real users ask
about, how satisfied they are per topic, and which questions the knowledge base does not serve.

* topics: the logged questions clustered with :func:`ragnb.analysis.topics.find_topics` — the same topics as the
  topic-coverage report (language-centred, so a bilingual log splits by subject rather than by language; the
  number of topics chosen by silhouette; each topic labelled with its top terms and the pages its questions cite,
  checked against those pages, and a log without topical structure said to have none);
* per topic: user scores 1–5 (counts, mean with bootstrap CI, share of scores ≤ 2);
* knowledge-gap candidates: the signals of :mod:`ragnb.analysis.gaps` (low user score, no cited page, cited page
  not in the corpus, low top-1 similarity against a threshold calibrated on the log where it can be), each
  reported, with the follow-up turns of a well-answered conversation not flagged on similarity alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ragnb.analysis.gaps import gap_signals, knowledge_gaps  # noqa: F401  (knowledge_gaps: re-exported)
from ragnb.analysis.topics import check_n_topics, find_topics, languages_text, representatives
from ragnb.metrics.stats import aggregate
from ragnb.tiers.real_users import SCORES, page_qrels, score_counts


def scores_by_topic(labels: Sequence[int], scores, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per topic: ``n``, counts of scores 1–5 (``score_1`` … ``score_5``) and ``score_missing``, ``mean_score``
    with its bootstrap 95% CI (``ci95_low``, ``ci95_high``; unscored questions excluded and counted) and
    ``low_score_share`` = (# score ≤ 2) / (# scored)."""
    labels = np.asarray(labels)
    s = pd.Series(list(scores), dtype="object")
    if len(s) != len(labels):
        raise ValueError(f"{len(labels)} topic labels for {len(s)} scores; give one score (or None) per question")
    score_counts(s)  # validates: integers 1–5 or missing
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    rows = []
    for t in sorted(set(labels.tolist())):
        v = values[labels == t]
        counts = {**{str(k): int((v == k).sum()) for k in SCORES}, "missing": int(np.isnan(v).sum())}
        agg = aggregate(v, n_boot=n_boot, seed=seed)
        scored = v[~np.isnan(v)]
        rows.append({"topic_id": int(t), "n": int(v.size), **{f"score_{k}": counts[str(k)] for k in SCORES},
                     "score_missing": counts["missing"], "mean_score": agg["mean"],
                     "ci95_low": agg["ci95"][0], "ci95_high": agg["ci95"][1],
                     "low_score_share": float((scored <= 2).mean()) if scored.size else float("nan")})
    return pd.DataFrame(rows).set_index("topic_id")


def page_hits(
    retrieved: Sequence[Sequence[str]],
    question_urls: Sequence[str | None],
    chunk_urls: Mapping[str, str | None],
    k: int,
) -> np.ndarray:
    """Per question: 1 if a chunk of the logged page (matched by page id) is in the top k, 0 if not, NaN when
    the question has no URL or its page is not in the corpus (as in the real-users benchmark)."""
    keys = [str(i) for i in range(len(question_urls))]
    qrels, _ = page_qrels(dict(zip(keys, question_urls)), chunk_urls)
    out = np.full(len(keys), np.nan)
    for i, q in enumerate(keys):
        if q in qrels:
            out[i] = float(any(c in qrels[q] for c in list(retrieved[i])[:k]))
    return out


def _check_inputs(ids: list[str], questions: Sequence[str], vectors: np.ndarray, score_list: list,
                  top1: np.ndarray, hits, n_topics: int, max_listed: int) -> np.ndarray:
    """ValueError unless there is one of each per question; returns the page hits (NaN when not given)."""
    n = len(ids)
    if not (n == len(questions) == len(vectors) == len(score_list) == len(top1)):
        raise ValueError(f"{n} ids, {len(questions)} questions, {len(vectors)} vectors, {len(score_list)} scores and "
                         f"{len(top1)} top-1 similarities: give one of each per question")
    if len(set(ids)) != n:
        raise ValueError("question ids must be unique")
    check_n_topics(n_topics, n)
    if max_listed < 0:
        raise ValueError(f"max_listed = {max_listed}; use 0 or a positive number of gap questions to list")
    hit = np.full(n, np.nan) if hits is None else np.asarray(hits, dtype=float).ravel()
    if hit.size != n:
        raise ValueError(f"{hit.size} page hits for {n} questions")
    return hit


def _topic_entry(t: int, row: pd.Series, members: np.ndarray, gaps: np.ndarray, hit: np.ndarray, top1: np.ndarray,
                 representative_questions: list[str]) -> dict:
    """One topic of the summary: its score counts and mean (``row`` of :func:`scores_by_topic`), gaps, page
    hits and top-1 similarity over its ``members``."""
    h = hit[members]
    return {
        "topic_id": t, "question_count": int(row["n"]),
        "score_counts": {str(k): int(row[f"score_{k}"]) for k in SCORES} | {"missing": int(row["score_missing"])},
        "mean_score": {"mean": row["mean_score"], "ci95": [row["ci95_low"], row["ci95_high"]],
                       "n": int(row["n"]), "n_valid": int(row["n"] - row["score_missing"]),
                       "n_failed": int(row["score_missing"])},
        "low_score_share": row["low_score_share"],
        "gap_count": int(gaps[members].sum()), "gap_share": float(gaps[members].mean()),
        "page_hit_rate": float(np.nanmean(h)) if np.isfinite(h).any() else float("nan"),
        "n_page_labelled": int(np.isfinite(h).sum()),
        "mean_top1_score": float(np.nanmean(top1[members])) if np.isfinite(top1[members]).any() else float("nan"),
        "representative_questions": representative_questions,
    }


def _listed_gaps(per_q: pd.DataFrame, max_listed: int) -> list[dict]:
    """The ``max_listed`` gap questions, most signals first, then lowest top-1 similarity (none first)."""
    flagged = per_q[per_q["is_gap"]]
    order = np.lexsort((flagged["top1_score"].fillna(-np.inf).to_numpy(), -flagged["n_signals"].to_numpy()))
    listed = flagged.iloc[order].head(max_listed)
    return [{"question_id": i, "question": r["question"], "topic_id": int(r["topic_id"]), "signals": r["signals"],
             "top1_score": r["top1_score"], "score": None if pd.isna(r["score"]) else int(r["score"])}
            for i, r in listed.iterrows()]


def domain_analysis(
    question_ids: Sequence[str],
    questions: Sequence[str],
    vectors: np.ndarray,
    scores,
    top1_scores,
    n_topics: int = 8,
    hits=None,
    gap_threshold: float | None = None,
    gap_quantile: float = 0.10,
    seed: int = 0,
    n_init: int = 10,
    n_boot: int = 1000,
    n_representatives: int = 3,
    max_listed: int = 50,
    log: pd.DataFrame | None = None,
    chunk_urls: Mapping[str, str | None] | None = None,
    centre_languages: bool = True,
    n_terms: int = 5,
    n_topics_rule: str = "silhouette",
    titles: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Topics of the real questions with their user scores and knowledge-gap candidates.

    ``scores``: user score per question (1–5 or None); ``top1_scores``: cosine similarity of each question's
    best retrieved chunk; ``hits`` (optional): per-question page hit from :func:`page_hits` (NaN = no label);
    ``log`` (optional): the question-log rows in the same order (``url``, ``session_id``, ``created_at``) and
    ``chunk_urls`` — they give the URL signals and the follow-up rule (:func:`ragnb.analysis.gaps.gap_signals`);
    ``titles`` (optional): page id → title naming the topics' pages (:func:`ragnb.analysis.topic_pages.top_pages`).

    Returns (per-question frame indexed by id: ``question``, ``language``, ``topic_id``, ``score``,
    ``top1_score``, ``page_hit``, one column per gap signal, ``follow_up``, ``follow_up_exempt``, ``n_signals``,
    ``signals``, ``is_gap``; summary: ``n_topics``, ``total_questions``, ``score_distribution``, ``mean_score``
    (aggregate), ``low_score_share``, ``gap`` (similarity threshold info), ``gap_signals`` (counts per signal
    with n), ``topics`` (per topic: top terms, top pages (cited in ``log["url"]``), languages, counts of scores,
    mean score with CI, low-score share, gap count and share, page hit rate, representative questions), ``knowledge_gaps`` (the ``max_listed``
    candidates with most signals), ``silhouette``, ``clustering``, and ``topic_selection``, ``page_agreement``,
    ``topical_structure`` (:meth:`ragnb.analysis.topics.Topics.summary_info`). ``n_topics`` is an upper bound
    under ``n_topics_rule`` "silhouette", the count under "fixed"; the summary's ``n_topics`` is the one used.
    """
    ids = [str(q) for q in question_ids]
    n = len(ids)
    top1 = np.asarray(top1_scores, dtype=float).ravel()
    score_list = list(scores)
    hit = _check_inputs(ids, questions, vectors, score_list, top1, hits, n_topics, max_listed)

    # a log of the wrong length is refused by gap_signals, with its fix; the topics then go without pages
    urls = log["url"].tolist() if log is not None and "url" in log and len(log) == n else None
    found = find_topics(questions, vectors, n_topics, seed, n_init, centre_languages, n_terms, urls=urls,
                        n_topics_rule=n_topics_rule, n_boot=n_boot, page_source="cited (the log's url)",
                        titles=titles)
    cl = found.clustering
    signals, gap_summary = gap_signals(questions, score_list, top1, hit, log, chunk_urls, gap_threshold,
                                       gap_quantile)
    gaps = signals["is_gap"].to_numpy()
    by_topic = scores_by_topic(cl.labels, score_list, n_boot=n_boot, seed=seed)
    reps = representatives(cl, n_representatives)
    values = pd.to_numeric(pd.Series(score_list, dtype="object"), errors="coerce").to_numpy(dtype=float)

    per_q = pd.DataFrame({
        "question": list(questions), "language": found.languages, "topic_id": cl.labels.astype(int),
        "score": pd.array([None if np.isnan(v) else int(v) for v in values], dtype="Int64"),
        "top1_score": top1, "page_hit": hit, "centroid_similarity": cl.similarity,
    }, index=pd.Index(ids, name="question_id"))
    per_q = pd.concat([per_q, signals.set_index(per_q.index)], axis=1)
    topics = [{"top_terms": found.terms.get(int(t), []), "top_pages": found.pages.get(int(t), []),
               "languages": found.mix["per_topic"].get(int(t), {}),
               **_topic_entry(int(t), row, cl.labels == t, gaps, hit, top1,
                              [str(questions[i]) for i in reps[int(t)]])}
              for t, row in by_topic.iterrows()]
    scored = values[~np.isnan(values)]
    summary = {
        "n_topics": found.selection["chosen"],
        "total_questions": n,
        "score_distribution": score_counts(pd.Series(score_list, dtype="object")),
        "mean_score": aggregate(values, n_boot=n_boot, seed=seed),
        "low_score_share": float((scored <= 2).mean()) if scored.size else float("nan"),
        "gap": gap_summary["similarity"],
        "gap_signals": gap_summary["signals"],
        "topics": topics,
        "knowledge_gaps": _listed_gaps(per_q, max_listed),
        "silhouette": cl.silhouette,
        "clustering": found.clustering_info(seed, n_init),
        **found.summary_info(),
    }
    return per_q, summary


def topic_table(summary: dict) -> pd.DataFrame:
    """The summary's per-topic entries as a flat table for reports."""
    rows = []
    for e in summary["topics"]:
        rows.append({"topic_id": e["topic_id"], "top_terms": ", ".join(e["top_terms"]),
                     "top_pages": ", ".join(e.get("top_pages", [])),
                     "languages": languages_text(e["languages"]), "questions": e["question_count"],
                     **{f"score_{k}": v for k, v in e["score_counts"].items()},
                     "mean_score": e["mean_score"]["mean"], "ci95_low": e["mean_score"]["ci95"][0],
                     "ci95_high": e["mean_score"]["ci95"][1], "low_score_share": e["low_score_share"],
                     "gap_share": e["gap_share"], "page_hit_rate": e["page_hit_rate"],
                     "representative_questions": " | ".join(e["representative_questions"])})
    return pd.DataFrame(rows).set_index("topic_id")


def signal_table(summary: dict) -> pd.DataFrame:
    """Counts per gap signal (``summary["gap_signals"]``) as a table: flagged, applicable n, share, rule."""
    rows = [{"signal": name, "flagged": c["n_flagged"], "n": c["n"], "share": c["share"], "rule": c.get("rule", "")}
            for name, c in summary["gap_signals"].items() if isinstance(c, dict)]
    return pd.DataFrame(rows).set_index("signal")
