"""Real-users benchmark (see docs/metrics.md, Real users): retrieval on real logged questions, scored against the page
whose URL the production system logged with each question (``question_answer.confluence_url``).

Ground truth is a proxy: the page the production system showed the user, not a full manual judgment.
A logged URL and a chunk URL name the same page when their :func:`ragnb.urls.page_id` is equal (scheme,
``www.``, trailing slash, anchors and Confluence ``pageId=`` / ``/pages/<id>/`` forms are normalised).

* relevant chunks (qrels) = every chunk whose URL has the logged page id, grade 1;
* chunk-level metrics score that chunk ranking (recall@k = share of the page's chunks retrieved);
* ``doc_*@k`` metrics map the top k retrieved chunks to their pages and deduplicate (docs/metrics.md, Retrieval) — the
natural
  level here, since the label is a page;
* questions without a logged URL and questions whose URL matches no chunk of the corpus are *excluded* from
  the metrics and *counted* (``no_url_share``, ``unmatched_url_share``): neither can be scored fairly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.metrics import retrieval as rm
from ragnb.metrics.registry import parse_name
from ragnb.metrics.stats import aggregate, format_mean_ci
from ragnb.rag.retrieval import RetrievalResult, Retriever
from ragnb.tiers.result import TierResult
from ragnb.urls import page_id, url_match, url_match_warning

DOC_METRICS = ("doc_hit_rate@1", "doc_hit_rate@3", "doc_hit_rate@5", "doc_hit_rate@10", "doc_mrr",
               "doc_recall@5", "doc_precision@5", "doc_ndcg@5", "doc_ndcg@10")
# Paired between embedding models (page level first: the label is a page).
COMPARED = ("doc_hit_rate@1", "doc_hit_rate@5", "doc_mrr", "hit_rate@1", "mrr")
EVALUATED, NO_URL, UNMATCHED = "evaluated", "no_url", "unmatched_url"
SCORES = (1, 2, 3, 4, 5)


@dataclass
class RealUsersResult(TierResult):
    """``per_item``: one row per selected question — status, page, metrics (NaN unless evaluated);
    ``summary``: canonical metric name → aggregate; no_url_share, unmatched_url_share, questions, …;
    ``hit_rates``: ``hit_rate`` and ``doc_hit_rate`` at k = 1..top_k over the evaluated questions
    (:func:`ragnb.metrics.retrieval.cutoff_curve`: the table's values at its cut-offs), None when none is."""

    retrieval: RetrievalResult | None = field(default=None, kw_only=True)
    hit_rates: pd.DataFrame | None = field(default=None, kw_only=True)


def page_of(url) -> str | None:
    """:func:`ragnb.urls.page_id` of a URL, None for anything that is not a string — pandas turns a missing
    URL into NaN (a float) in string columns, and ``page_id(nan)`` would read it as the text "nan"."""
    return page_id(url) if isinstance(url, str) else None


def chunk_pages(chunk_urls: Mapping[str, str | None]) -> dict[str, str]:
    """Chunk id → the page id of its URL. A chunk without a URL is a document of its own, ``"chunk:<id>"``
    (the prefix keeps it from colliding with a numeric Confluence page id)."""
    return {c: (page_of(u) or f"chunk:{c}") for c, u in chunk_urls.items()}


def page_qrels(
    question_urls: Mapping[str, str | None], chunk_urls: Mapping[str, str | None]
) -> tuple[dict[str, dict[str, int]], pd.DataFrame]:
    """Relevance by page id: ``qrels[q] = {c: 1 for every chunk c whose URL names the page logged for q}``.

    Returns (qrels of the evaluable questions only, a frame indexed by question id with ``page_id``,
    ``status`` — "evaluated", "no_url" (nothing logged) or "unmatched_url" (no chunk of the corpus is on
    that page) — and ``n_relevant_chunks``).
    """
    by_page: dict[str, list[str]] = {}
    for c, u in chunk_urls.items():
        p = page_of(u)
        if p is not None:
            by_page.setdefault(p, []).append(c)
    qrels: dict[str, dict[str, int]] = {}
    rows = []
    for q, url in question_urls.items():
        p = page_of(url)
        chunks = by_page.get(p, []) if p is not None else []
        status = NO_URL if p is None else (EVALUATED if chunks else UNMATCHED)
        if chunks:
            qrels[q] = {c: 1 for c in chunks}
        rows.append((q, p, status, len(chunks)))
    frame = pd.DataFrame(rows, columns=["question_id", "page_id", "status", "n_relevant_chunks"])
    return qrels, frame.set_index("question_id")


def usable_metrics(names: tuple[str, ...], top_k: int) -> tuple[list[str], list[str]]:
    """Split ``names`` into those whose cut-off fits in ``top_k`` and those that would silently be computed
    on fewer documents than their name says."""
    keep, dropped = [], []
    for name in names:
        _, k = parse_name(name)
        (dropped if k is not None and k > top_k else keep).append(name)
    return keep, dropped


def score_counts(scores: pd.Series) -> dict[str, int]:
    """``{"1": n1, …, "5": n5, "missing": n}`` of user scores; anything else is a ``ValueError``."""
    s = pd.Series(scores, dtype="object")
    missing = s.isna()
    bad = [(i, v) for i, v in s[~missing].items() if not (_is_int(v) and 1 <= int(v) <= 5)]
    if bad:
        i, v = bad[0]
        raise ValueError(f"question {i!r}: score {v!r} is not an integer 1–5; fix the log row or leave the score empty")
    values = s[~missing].astype(int)
    return {**{str(k): int((values == k).sum()) for k in SCORES}, "missing": int(missing.sum())}


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) or (isinstance(v, (float, np.floating)) and float(v).is_integer())


def _check_log(log: pd.DataFrame, vectors: np.ndarray) -> None:
    if not isinstance(log, pd.DataFrame):
        raise ValueError(f"log must be the DataFrame of fetch_question_log, got {type(log).__name__}")
    missing = [c for c in ("question", "url", "score") if c not in log.columns]
    if missing:
        raise ValueError(f"log lacks column(s) {missing}; pass the frame returned by fetch_question_log")
    if log.empty:
        raise ValueError("no questions selected: lower min_score or load and embed a question log")
    if not log.index.is_unique:
        dup = log.index[log.index.duplicated()][0]
        raise ValueError(f"question id {dup!r} appears twice in the log; ids must be unique")
    if vectors is None or len(vectors) != len(log):
        n = "no" if vectors is None else len(vectors)
        raise ValueError(f"{n} vectors for {len(log)} questions; fetch the log with with_vectors=True")


def run_real_users(
    log: pd.DataFrame,
    vectors: np.ndarray,
    retriever: Retriever,
    chunk_urls: Mapping[str, str | None],
    top_k: int = 10,
    n_boot: int = 1000,
    seed: int = 0,
) -> RealUsersResult:
    """Retrieve top-k for each logged question (its *stored* vector) and score it against its logged page.

    ``log``: :func:`ragnb.store.questions.fetch_question_log` rows (indexed by question id; ``question``,
    ``url``, ``score``); ``vectors``: their embeddings in the same order; ``chunk_urls``: chunk id → URL of
    every searchable chunk.

    Summary keys: chunk metrics (``hit_rate@1`` … ``ndcg@10``) and ``doc_*`` metrics, each
    ``{mean, ci95, n, n_valid, n_failed}`` over the evaluated questions; ``no_url_share`` and
    ``unmatched_url_share`` as aggregates of a 0/1 indicator over all selected questions (mean = share,
    n = selected questions); ``questions`` (counts by status); ``score_distribution`` of the selected
    questions; ``metrics_by_score`` (per user score 1–5 and "missing": page- and chunk-level hit rates and MRR
    with CIs — the log is taken whole by default, so low-rated questions are not hidden); ``info``.
    """
    if top_k < 1:
        raise ValueError(f"top_k = {top_k}; retrieve at least one chunk per question")
    _check_log(log, vectors)
    qids = [str(i) for i in log.index]
    scores = score_counts(log["score"])
    notes: list[str] = []

    qrels, status = page_qrels(dict(zip(qids, log["url"].tolist())), chunk_urls)
    result = retriever.search(vectors, top_k)
    run = result.as_run(qids)
    pages = chunk_pages(chunk_urls)
    unknown = sorted({c for ids in result.ids for c in ids} - set(pages))
    if unknown:
        raise ValueError(f"the retriever returned chunk {unknown[0]!r}, which chunk_urls does not list; "
                         "pass the urls of every searchable chunk (fetch_vectors(db, 'chunks'))")

    metrics, dropped = usable_metrics(tuple(rm.default_metrics()) + DOC_METRICS, top_k)
    if dropped:
        notes.append(f"top_k = {top_k}: metrics with a larger cut-off were not computed ({', '.join(dropped)}).")
    evaluated = [q for q in qids if q in qrels]
    curve = None
    if evaluated:
        scored_run = {q: run[q] for q in evaluated}
        per_metric, summary = rm.evaluate(scored_run, qrels, metrics, chunk_to_doc=pages, n_boot=n_boot, seed=seed)
        summary.pop("_info", None)
        curve = rm.cutoff_curve(scored_run, qrels, ("hit_rate", "doc_hit_rate"), top_k, chunk_to_doc=pages)
    else:
        per_metric = pd.DataFrame(columns=metrics, dtype=float)
        summary = {m: aggregate(np.array([]), n_boot=n_boot) for m in metrics}
        notes.append("No selected question has a logged URL that matches a chunk of the corpus: nothing to score.")

    n = len(qids)
    no_url = (status["status"] == NO_URL).to_numpy(dtype=float)
    unmatched = (status["status"] == UNMATCHED).to_numpy(dtype=float)
    summary["no_url_share"] = aggregate(no_url, n_boot=n_boot, seed=seed)
    summary["unmatched_url_share"] = aggregate(unmatched, n_boot=n_boot, seed=seed)
    summary["questions"] = {"selected": n, "evaluated": len(evaluated), "no_url": int(no_url.sum()),
                            "unmatched_url": int(unmatched.sum())}
    summary["score_distribution"] = scores

    per_query = _per_question(log, qids, status, per_metric, run, qrels, pages, result)

    summary["metrics_by_score"] = _by_score(per_query, [m for m in BY_SCORE_METRICS if m in metrics],
                                            n_boot=n_boot, seed=seed)
    summary["info"] = {"backend": result.backend, "top_k": top_k, "ground_truth": "logged url, matched by page id",
                       "n_pages_in_corpus": len({p for p in pages.values() if not p.startswith("chunk:")})}
    if summary["questions"]["no_url"]:
        notes.append(f"{summary['questions']['no_url']} of {n} questions have no logged URL: excluded from the metrics.")
    if summary["questions"]["unmatched_url"]:
        notes.append(f"{summary['questions']['unmatched_url']} of {n} questions log a URL that no chunk of the corpus "
                     "has (page not indexed, or a URL form page_id does not recognise): excluded from the metrics.")
        # how many matched, an example of each side, and the fix (--url-template, front matter, --map)
        hint = url_match_warning(url_match(log["url"].tolist(), list(chunk_urls.values())))
        if hint:
            notes.append(hint)
    return RealUsersResult(per_query, summary, notes, lead={"tier": "real_users"}, retrieval=result,
                           tables={} if curve is None else {"hit_rate_curve": curve}, hit_rates=curve)


def _per_question(log: pd.DataFrame, qids: list[str], status: pd.DataFrame, per_metric: pd.DataFrame,
                  run: dict, qrels: dict, pages: dict, result: RetrievalResult) -> pd.DataFrame:
    """One row per selected question: its text, URL, score and status, the metrics, the first relevant chunk
    and page ranks, and what was retrieved."""
    per_query = pd.DataFrame(index=pd.Index(qids, name="question_id"))
    per_query["question"] = log["question"].astype(str).to_numpy()
    per_query["url"] = log["url"].to_numpy()
    per_query["score"] = pd.array(log["score"].tolist(), dtype="Int64")
    per_query = per_query.join(status)
    per_query = per_query.join(per_metric.rename_axis("question_id"))
    per_query["first_relevant_rank"] = _first_rank(run, qrels, qids)
    doc_run = rm.to_doc_run(run, pages)
    doc_qrels = rm.to_doc_qrels(qrels, pages)
    per_query["first_relevant_doc_rank"] = _first_rank(doc_run, doc_qrels, qids)
    per_query[rm.RELEVANT_PAGES] = rm.relevant_pages(qrels, pages, qids)  # page-level truth (ragnb.runs.comparability)
    per_query["top1_score"] = [float(s[0]) if len(s) else np.nan for s in result.scores]
    per_query["top1_page"] = [pages[ids[0]] if ids else None for ids in result.ids]
    per_query["retrieved"] = [" ".join(ids) for ids in result.ids]
    return per_query


def _first_rank(run: Mapping[str, list[str]], qrels: Mapping[str, Mapping[str, int]], qids: list[str]) -> list[float]:
    """1-based rank of the first relevant item; NaN when the question is not evaluated or nothing relevant
    was retrieved."""
    out = []
    for q in qids:
        rel = qrels.get(q)
        ranked = run.get(q, [])
        out.append(float(next((i + 1 for i, d in enumerate(ranked) if rel and rel.get(d, 0) > 0), np.nan)))
    return out


BY_SCORE_METRICS = ("doc_hit_rate@1", "doc_hit_rate@5", "doc_mrr", "hit_rate@1", "hit_rate@5", "mrr")


def _by_score(per_query: pd.DataFrame, metrics: list[str], n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """Do users who rated an answer low also get worse retrieval? One row per user score 1–5, plus "missing"
    when some questions have none: ``n_selected`` questions with that score, ``n`` of them evaluated, and per
    metric the mean over the evaluated ones (``<metric>``) with its bootstrap 95% CI (``<metric>_ci95``) —
    NaN with n = 0, never a silent 0."""
    rows = []
    score = per_query["score"].astype("Int64")
    groups: list[tuple[object, pd.Series]] = [(s, score.eq(s).fillna(False).astype(bool)) for s in SCORES]
    if score.isna().any():
        groups.append(("missing", score.isna().to_numpy()))
    for s, mask in groups:
        part = per_query[np.asarray(mask)]
        ev = part[part["status"] == EVALUATED]
        row: dict = {"score": s, "n_selected": int(len(part)), "n": int(len(ev))}
        for m in metrics:
            agg = aggregate(ev[m].to_numpy(dtype=float), n_boot=n_boot, seed=seed)
            row[m] = agg["mean"]  # evaluated rows have no NaN; an empty group is NaN
            row[f"{m}_ci95"] = agg["ci95"]
        rows.append(row)
    return rows


def by_score_table(rows: list[dict], metrics: tuple[str, ...] = BY_SCORE_METRICS) -> pd.DataFrame:
    """``metrics_by_score`` as a table: score, n_selected, n, then ``mean [low, high]`` per metric."""
    out = []
    for r in rows:
        row = {"score": r["score"], "questions": r["n_selected"], "evaluated": r["n"]}
        for m in metrics:
            if m in r:
                row[m] = "—" if r["n"] == 0 else format_mean_ci(r[m], r.get(f"{m}_ci95"))
        out.append(row)
    return pd.DataFrame(out)


def metrics_table(summary: dict) -> pd.DataFrame:
    """The aggregated metrics of a summary as rows (metric, mean, ci95_low, ci95_high, n, n_valid, n_failed)."""
    from ragnb.metrics.stats import summary_frame

    return summary_frame({k: v for k, v in summary.items() if isinstance(v, dict) and "ci95" in v})
