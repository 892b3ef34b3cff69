"""Tier 1 — retrieval (see docs/metrics.md, Retrieval): ranking quality, consistency and latency of top-k search."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.rag.encoders.base import encode_queries
from ragnb.datasets.schema import Dataset
from ragnb.rag.embeddings import Encoder
from ragnb.metrics import retrieval as rm
from ragnb.metrics.registry import parse_name
from ragnb.metrics.stats import aggregate
from ragnb.rag.ann_tune import (ANN_TIME_BUDGET_S, TARGET_RECALL, check_target, checked_recall, choose_ef_search,
                                tuning_label)
from ragnb.rag.retrieval import (PgVectorRetriever, check_same_model, RetrievalResult, Retriever, ann_recall,
                                 ann_recall_note, consistency)
from ragnb.metrics.stats import latency_summary
from ragnb.tiers.result import TierResult, encoder_meta

COMPARED = ("hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr", "ndcg@10")  # paired between embedding models
# Every chunk-level hit_rate, mrr and ndcg@10 has its page-level version: a re-chunking is gated on these
# (ragnb.runs.gate).
DOC_METRICS = ("doc_hit_rate@1", "doc_hit_rate@5", "doc_hit_rate@10", "doc_mrr", "doc_recall@5", "doc_precision@5",
               "doc_ndcg@10")


@dataclass
class Tier1Result(TierResult):
    """``per_item``: one row per question (metric values, rank of the first relevant chunk, retrieved ids);
    ``summary``: canonical metric name → aggregate dict, plus ``info``; ``hit_rates``: ``hit_rate`` (and with
    chunk URLs ``doc_hit_rate``) at k = 1..top_k from :func:`ragnb.metrics.retrieval.cutoff_curve`, the numbers
    the table shows at k = 1, 5, 10 (also written as ``<stem>.hit_rate_curve.csv``)."""

    retrieval: RetrievalResult | None = field(default=None, kw_only=True)
    hit_rates: pd.DataFrame | None = field(default=None, kw_only=True)


def _usable(metrics: tuple[str, ...], top_k: int) -> tuple[list[str], list[str]]:
    """Metrics whose cut-off fits in top_k; the rest would silently be computed on fewer documents."""
    keep, dropped = [], []
    for name in metrics:
        _, k = parse_name(name)
        (dropped if k is not None and k > top_k else keep).append(name)
    return keep, dropped


def run_tier1(
    dataset: Dataset,
    encoder: Encoder,
    retriever: Retriever,
    top_k: int = 10,
    chunk_urls: dict[str, str | None] | None = None,
    consistency_runs: int = 1,
    batch_size: int = 64,
    latency_sample: int = 50,
    hnsw_check: bool = True,
    n_boot: int = 1000,
    target_recall: float | None = TARGET_RECALL,
    ann_time_budget_s: float = ANN_TIME_BUDGET_S,
) -> Tier1Result:
    """Embed the questions, retrieve top-k, score against the dataset's relevant chunk ids.

    - chunk-level metrics (equal to trec_eval on tie-free rankings) and, given ``chunk_urls``,
      the document-level variants (see docs/metrics.md, Retrieval; ``doc_*@k``: the top k chunks mapped to
      source URLs and deduplicated);
    - ``retrieval_consistency`` over ``consistency_runs`` repeated retrievals (see docs/metrics.md, Retrieval);
    - latency: pgvector queries timed one by one on the first ``latency_sample`` questions
      (batched timings are amortised and would understate a single user's wait);
    - with an HNSW index, recall@k of the index against exact search on a seeded sample of the questions
      (``ann_recall@k_vs_exact`` with its ``ann_recall_n`` in ``summary['info']``); with ``target_recall`` (default
      0.95) the run first chooses the ``ef_search`` that reaches it on that sample, or searches exactly when none
      does within ``ann_time_budget_s`` seconds of index searches (:mod:`ragnb.rag.ann_tune`; the setting, each
      one tried and the cost in ``summary['info']``, a note in ``notes``). None: the retriever's own ef_search.
    """
    if top_k < 1:
        raise ValueError(f"top_k = {top_k}; retrieve at least one chunk per question")
    check_same_model(encoder, retriever)
    check_target(target_recall, ann_time_budget_s)
    notes: list[str] = []
    qids = [it.id for it in dataset.items]
    vectors = encode_queries(encoder, [it.question for it in dataset.items], batch_size=64)
    hnsw = hnsw_check and isinstance(retriever, PgVectorRetriever) and retriever.mode == "hnsw"
    choice = None
    if hnsw and target_recall is not None:
        choice = choose_ef_search(retriever, vectors, top_k, target_recall, ann_time_budget_s, n_boot=n_boot)
        retriever = choice.retriever
        notes.append(tuning_label(choice.info))
    result = retriever.search(vectors, top_k, batch_size=batch_size)
    run = result.as_run(qids)
    qrels = dataset.qrels()

    # the chunk-level metrics: the registry's default retrieval list, read now (a newly registered one included)
    wanted = tuple(rm.default_metrics()) + (DOC_METRICS if chunk_urls is not None else ())
    metrics, dropped = _usable(wanted, top_k)
    # A chunk without a source URL is its own document.
    chunk_to_doc = None if chunk_urls is None else {c: (u or c) for c, u in chunk_urls.items()}
    per_query, summary = rm.evaluate(run, qrels, metrics, chunk_to_doc=chunk_to_doc, n_boot=n_boot)
    if dropped:
        notes.append(f"top_k = {top_k}: metrics with a larger cut-off were not computed ({', '.join(dropped)}).")

    if consistency_runs > 1:
        repeats = [result] + [retriever.search(vectors, top_k, batch_size=batch_size) for _ in range(consistency_runs - 1)]
        cons = consistency(repeats, top_k)
        per_query["retrieval_consistency"] = pd.Series(cons, index=qids)
        summary["retrieval_consistency"] = aggregate(cons, n_boot=n_boot)

    latency = result.latency_ms
    latency_mode = result.latency_mode
    if isinstance(retriever, PgVectorRetriever) and latency_sample > 0:
        timed = retriever.search(vectors[:latency_sample], top_k, batch_size=1)
        latency, latency_mode = timed.latency_ms, timed.latency_mode
    summary["latency_ms"] = {**latency_summary(latency), "mode": latency_mode}

    info = {"backend": result.backend, "top_k": top_k, "n_questions": len(qids),
            "index": "hnsw" if result.backend == "pgvector-hnsw" else "exact", **result.info}
    if choice is not None:
        info.update(choice.info)
        if choice.ef_search is not None:
            info.update(checked_recall(choice, result, top_k, n_boot))
    elif hnsw:
        info.update(ann_recall(retriever, vectors, result, top_k))
    if hnsw and (note := ann_recall_note(info)) is not None:
        notes.append(note)
    summary["info"] = {**summary.pop("_info", {}), **info}

    per_query.insert(0, "question", pd.Series([it.question for it in dataset.items], index=qids))
    per_query["first_relevant_rank"] = _first_relevant_rank(run, qrels).reindex(per_query.index)
    per_query["retrieved"] = pd.Series([" ".join(ids) for ids in result.ids], index=qids)
    per_query["top1_score"] = pd.Series([float(s[0]) if len(s) else np.nan for s in result.scores], index=qids)
    if chunk_to_doc is not None:  # the page-level truth, so runs on other chunkings can be compared on doc_*
        per_query[rm.RELEVANT_PAGES] = pd.Series(rm.relevant_pages(qrels, chunk_to_doc, qids), index=qids)
    curve = rm.cutoff_curve(run, qrels, ("hit_rate",) if chunk_urls is None else ("hit_rate", "doc_hit_rate"),
                            top_k, chunk_to_doc=chunk_to_doc)
    return Tier1Result(per_query, summary, notes, lead={"tier": "tier_1"},
                       meta={"dataset": dataset.name, "embedding_model": encoder.name, **encoder_meta(encoder)},
                       tables={"hit_rate_curve": curve}, retrieval=result, hit_rates=curve)


def _first_relevant_rank(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> pd.Series:
    ranks = {}
    for qid, rels in qrels.items():
        ranked = run.get(qid, [])
        ranks[qid] = next((i + 1 for i, d in enumerate(ranked) if rels.get(d, 0) > 0), np.nan)
    return pd.Series(ranks, dtype=float)

