"""HNSW at a target recall: the ``hnsw.ef_search`` that makes an index search return what exact search returns.

pgvector's HNSW scan keeps ``ef_search`` candidates (default 40, at most 1000); how many of the exact top k that
finds depends on the corpus (BENCHMARKS §14: 0.89 at 10k, 0.44 at 1M on the same kind of vectors). Before a
Tier 1 run through an index, :func:`choose_ef_search` searches a seeded sample of the questions
(:func:`ragnb.rag.retrieval.recall_sample`, 200) exactly once (one streamed pass over the stored vectors) and
through the index at ``ef_search`` 40, 80, 160, 320, 640, 1000 in turn, and keeps the first setting whose mean
recall@k on the sample — the point estimate; its bootstrap 95% CI is reported beside it — reaches the target
(default 0.95). Where none does (the ladder ends at pgvector's maximum, or the time budget for the searches is
spent) the run searches exactly instead (:class:`StreamedExactRetriever`), and the report says so.

pgvector ≥ 0.8's iterative index scans (``hnsw.iterative_scan``) are not a recall setting here: they continue a
scan whose candidates a WHERE filter removed, and Tier 1's search has no filter — every candidate is a result,
so only ``ef_search`` changes what the index finds.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np

from ragnb.config import search_memory_mb
from ragnb.metrics.stats import aggregate
from ragnb.rag.retrieval import (ANN_RECALL_SAMPLE, ANN_RECALL_SEED, ANN_RECALL_WARN, EXACT_BLOCK_ROWS,
                                 PgVectorRetriever, RetrievalResult, _check_queries, exact_pass, recall_per_query,
                                 recall_sample, search_reporter)

EF_SEARCH_MAX = 1000  # pgvector refuses a larger hnsw.ef_search
EF_SEARCH_STEPS = (40, 80, 160, 320, 640, EF_SEARCH_MAX)  # pgvector's default, doubled up to its maximum
TARGET_RECALL = ANN_RECALL_WARN  # the recall below which a report already warns that the index, not the model, speaks
ANN_TIME_BUDGET_S = 120.0  # seconds of index searches on the sample before the ladder gives up


class StreamedExactRetriever:
    """Exact cosine top-k in the database's stored vectors without an index: one pass over the table per group of
    queries (:func:`ragnb.rag.retrieval.exact_pass`), the group sized so that its similarity block fits
    ``RAGNB_SEARCH_MEMORY_MB``. pgvector's own exact search (``index_mode 'exact'``) scans the table once per
    question — at 1M chunks seconds each; this reads it once for thousands. Same ranking as exact search: equal
    similarities by id."""

    backend = "pgvector-exact-stream"
    mode = "exact"

    def __init__(self, retriever: PgVectorRetriever):
        self.db, self.model, self.dim = retriever.db, retriever.model, retriever.dim

    def search(self, queries: np.ndarray, k: int, batch_size: int = 64) -> RetrievalResult:
        q = np.asarray(queries, dtype=np.float32)
        q = _check_queries(q, self.dim or q.shape[-1], k)
        group = max(1, (search_memory_mb() << 20) // (EXACT_BLOCK_ROWS * 4))
        report = search_reporter(self.backend, len(q))
        best: list[list[tuple[float, str]]] = []
        t0 = time.perf_counter()
        for start in range(0, len(q), group):
            if report is not None:
                report(start, len(q))
            best += exact_pass(self.db, q[start:start + group], k, self.model)
        latency = np.full(len(q), (time.perf_counter() - t0) * 1000.0 / max(1, len(q)))
        if report is not None:
            report(len(q), len(q))
        return RetrievalResult([[rid for _, rid in b] for b in best], [np.array([-s for s, _ in b]) for b in best],
                               latency, self.backend, "amortised")


@dataclass
class AnnChoice:
    """What :func:`choose_ef_search` found. ``retriever``: the one to search with (the index at the chosen
    ``ef_search``, or :class:`StreamedExactRetriever` when ``ef_search`` is None); ``picked``: positions of the
    sampled questions, ``truth``: their exact top-k ids; ``info``: the report's keys (:func:`choice_info`)."""

    retriever: object
    ef_search: int | None
    picked: np.ndarray
    truth: list[list[str]]
    info: dict = field(default_factory=dict)


def _ladder(k: int, max_ef: int) -> list[int]:
    """The settings tried: :data:`EF_SEARCH_STEPS` up to ``max_ef``, none below ``k`` (the retriever would raise
    it to k anyway)."""
    return sorted({max(ef, k) for ef in EF_SEARCH_STEPS if ef <= max_ef} or {max(k, min(max_ef, EF_SEARCH_MAX))})


def check_target(target: float | None, time_budget_s: float) -> None:
    """ValueError naming the parameter and its range for a target recall outside (0, 1] or a negative budget."""
    if target is not None and not 0.0 < target <= 1.0:
        raise ValueError(f"target_recall = {target}; give a recall in (0, 1], e.g. 0.95 (0 in a notebook: no choice)")
    if not time_budget_s >= 0:
        raise ValueError(f"ann_time_budget_s = {time_budget_s}; give the seconds the setting search may take (≥ 0)")


def choose_ef_search(retriever: PgVectorRetriever, queries: np.ndarray, k: int, target: float = TARGET_RECALL,
                     time_budget_s: float = ANN_TIME_BUDGET_S, max_ef: int = EF_SEARCH_MAX,
                     n: int = ANN_RECALL_SAMPLE, seed: int = ANN_RECALL_SEED, n_boot: int = 1000) -> AnnChoice:
    """The smallest ``ef_search`` of :data:`EF_SEARCH_STEPS` (≤ ``max_ef``) at which the index's mean recall@k
    against exact search on :func:`recall_sample` of ``queries`` reaches ``target``; exact search when none does
    before the index searches have taken ``time_budget_s`` seconds (checked before each setting: 0 tries none)."""
    check_target(target, time_budget_s)
    picked = recall_sample(len(queries), n, seed)
    sample = np.asarray(queries, dtype=np.float32)[picked]
    t0 = time.perf_counter()
    truth = [[rid for _, rid in b] for b in exact_pass(retriever.db, sample, k, retriever.model)]
    exact_s = time.perf_counter() - t0
    steps: list[dict] = []
    spent = 0.0
    for ef in _ladder(k, max_ef):
        if spent >= time_budget_s:
            break
        trial = copy.copy(retriever)
        trial.ef_search = ef
        t0 = time.perf_counter()
        found = trial.search(sample, k)
        spent += time.perf_counter() - t0
        agg = aggregate(recall_per_query(found.ids, truth, k), n_boot=n_boot)
        steps.append({"ef_search": ef, "recall": agg["mean"], "ci95": agg["ci95"],
                      "search_s": round(time.perf_counter() - t0, 4)})
        if agg["mean"] >= target:
            info = choice_info(steps, target, time_budget_s, len(picked), seed, k, exact_s, chosen=ef)
            return AnnChoice(trial, ef, picked, truth, info)
    info = choice_info(steps, target, time_budget_s, len(picked), seed, k, exact_s, chosen=None, max_ef=max_ef)
    return AnnChoice(StreamedExactRetriever(retriever), None, picked, truth, info)


def choice_info(steps: list[dict], target: float, budget_s: float, n: int, seed: int, k: int, exact_s: float, *,
                chosen: int | None, max_ef: int = EF_SEARCH_MAX) -> dict:
    """The report's keys: ``ann_target_recall``, ``ann_steps`` (each setting tried: recall, CI, seconds for the
    sample), ``ann_exact_s`` (the exact search of the same sample), ``ann_recall_n``/``_seed``; with a setting
    chosen ``ef_search``; without one ``ann_fallback``, the reason in words."""
    info: dict = {"ann_target_recall": target, "ann_time_budget_s": budget_s, "ann_steps": steps,
                  "ann_exact_s": round(exact_s, 4), "ann_recall_n": n, "ann_recall_seed": seed}
    if chosen is not None:
        return {**info, "ef_search": chosen}
    tried = steps[-1]["ef_search"] if steps else None
    if tried is not None and tried >= min(max_ef, EF_SEARCH_MAX):
        why = f"no ef_search up to {tried} reached recall@{k} {target:.2f}"
        if tried >= EF_SEARCH_MAX:  # the graph, not the search, is the limit (pgvector's advice)
            why += " — the graph is the limit: rebuild it with a larger --ef-construction or --m (`ragnb db index`)"
    else:
        why = (f"the time budget of {budget_s:g} s for the index searches was spent"
               + (f" after ef_search {tried}" if tried is not None else " before any setting was tried")
               + f" without reaching recall@{k} {target:.2f}")
    return {**info, "ann_fallback": why}


def checked_recall(choice: AnnChoice, result: RetrievalResult, k: int, n_boot: int = 1000) -> dict:
    """The run's own recall@k on the sampled questions against their exact top k (already known: no second exact
    search), with its bootstrap 95% CI: ``{"ann_recall@k_vs_exact", "ann_recall_ci95"}``."""
    agg = aggregate(recall_per_query([result.ids[i] for i in choice.picked], choice.truth, k), n_boot=n_boot)
    return {f"ann_recall@{k}_vs_exact": agg["mean"], "ann_recall_ci95": agg["ci95"]}


def tuning_label(info: dict) -> str | None:
    """One sentence on the setting chosen (or the fall-back to exact search) and its cost; None without tuning."""
    if "ann_target_recall" not in info:
        return None
    steps, n = info.get("ann_steps", []), info.get("ann_recall_n")
    tried = ", ".join(f"{s['ef_search']}: {s['recall']:.3f}" for s in steps) or "none"
    cost = f"exact search of the {n} sampled questions {info['ann_exact_s']:.2f} s"
    if info.get("ann_fallback"):
        return (f"Searched exactly (no index): {info['ann_fallback']} (recall by ef_search: {tried}); "
                f"{cost}.")
    chosen = steps[-1]
    return (f"HNSW at ef_search {chosen['ef_search']}, the first setting whose recall reached the target "
            f"{info['ann_target_recall']:.2f} on {n} sampled questions (by ef_search: {tried}); index search of "
            f"the sample {chosen['search_s']:.2f} s vs {cost}.")
