"""HNSW at a target recall (ragnb.rag.ann_tune): on a real pgvector index built weak on purpose (m 4,
ef_construction 8 over 3,000 clustered vectors), ef_search 40 returns well under 95% of the exact top 10 and a
larger setting reaches it; Tier 1 chooses that setting, reports it with the recall and its CI (checked against
numpy's brute force), and searches exactly — saying so — when no setting within the limits reaches the target."""

from __future__ import annotations

import numpy as np
import pytest

from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.rag.ann_tune import EF_SEARCH_STEPS, StreamedExactRetriever, choose_ef_search
from ragnb.rag.retrieval import PgVectorRetriever, ann_recall_label, recall_sample
from ragnb.rag.index_build import create_hnsw_index
from ragnb.store.engine import connect
from ragnb.tiers.tier1 import run_tier1
from test_scale_paths import _clustered, _fill

K = 10


class _Lookup:
    """The query encoder of the synthetic space: question ``q<i>`` is the i-th query vector."""

    name, dim = "synthetic-16", 16

    def __init__(self, queries: np.ndarray):
        self.queries = queries

    def encode_queries(self, texts, batch_size=None, progress=False):
        return self.queries[[int(t[1:]) for t in texts]]


@pytest.fixture
def weak_index(fresh_db, monkeypatch):
    monkeypatch.setenv("RAGNB_INDEX_WORKERS", "0")  # the leader alone: one build, the same graph each time
    ids, vecs = _fill(fresh_db, 3000)
    create_hnsw_index(fresh_db, m=4, ef_construction=8)
    queries = _clustered(300, seed=5)
    return fresh_db, ids, vecs, queries


def _truth(ids: list[str], vecs: np.ndarray, queries: np.ndarray) -> list[list[str]]:
    """Exact top 10 by float64 numpy, ties by id (ids are in row order)."""
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = q.astype(np.float64) @ unit.T.astype(np.float64)
    return [[ids[j] for j in np.argsort(-row, kind="stable")[:K]] for row in sims]


def _recall(found: list[list[str]], truth: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth)]))


def _dataset(n: int) -> Dataset:
    return Dataset(name="synthetic", items=[DatasetItem(id=f"q{i}", question=f"q{i}", relevant_chunk_ids=["c00000"])
                                            for i in range(n)])


def test_tier1_chooses_the_first_ef_search_that_reaches_the_target(weak_index):
    db, ids, vecs, queries = weak_index
    picked = recall_sample(len(queries))
    truth = _truth(ids, vecs, queries[picked])
    at_40 = _recall(PgVectorRetriever(db, mode="hnsw", ef_search=40).search(queries[picked], K).ids, truth)
    assert at_40 < 0.8  # the weak graph: ef_search 40 is clearly below the target
    result = run_tier1(_dataset(len(queries)), _Lookup(queries), PgVectorRetriever(db, mode="hnsw"), top_k=K,
                       latency_sample=0, n_boot=200)
    info = result.summary["info"]
    steps = info["ann_steps"]
    assert [s["ef_search"] for s in steps] == list(EF_SEARCH_STEPS[:len(steps)])
    assert steps[0]["recall"] == pytest.approx(at_40, abs=1e-12)
    assert all(s["recall"] < 0.95 for s in steps[:-1]) and steps[-1]["recall"] >= 0.95
    chosen = steps[-1]["ef_search"]
    assert chosen > 40 and info["ef_search"] == chosen and info["ann_target_recall"] == 0.95
    assert result.retrieval.backend == "pgvector-hnsw" and result.retrieval.info == {"ef_search": chosen}
    # the run's own recall on the sample, against numpy's exact top 10: what the report says, at ≥ the target
    run_recall = _recall([result.retrieval.ids[i] for i in picked], truth)
    assert info["ann_recall@10_vs_exact"] == pytest.approx(run_recall, abs=1e-12) and run_recall >= 0.95
    lo, hi = info["ann_recall_ci95"]
    assert lo <= run_recall <= hi and info["ann_recall_n"] == 200
    assert ann_recall_label(info) == (f"ANN recall@10 vs exact, n=200: {run_recall:.3f} (95% CI {lo:.3f}–{hi:.3f})")
    assert any(n.startswith(f"HNSW at ef_search {chosen}, the first setting whose recall reached the target 0.95 "
                            "on 200 sampled questions (by ef_search: 40: ") for n in result.notes)
    assert not any("returned only" in n for n in result.notes)  # no warning: the index now finds ≥ 95%


def test_no_setting_within_the_limits_falls_back_to_exact_search_and_says_so(weak_index):
    db, ids, vecs, queries = weak_index
    ann = PgVectorRetriever(db, mode="hnsw")
    capped = choose_ef_search(ann, queries, K, max_ef=40, n_boot=50)  # only ef_search 40: below the target
    assert capped.ef_search is None and isinstance(capped.retriever, StreamedExactRetriever)
    assert [s["ef_search"] for s in capped.info["ann_steps"]] == [40]
    assert capped.info["ann_fallback"] == "no ef_search up to 40 reached recall@10 0.95"
    result = run_tier1(_dataset(len(queries)), _Lookup(queries), ann, top_k=K, latency_sample=0, n_boot=50,
                       ann_time_budget_s=0)
    info = result.summary["info"]
    assert info["ann_steps"] == [] and "ef_search" not in info and "ann_recall@10_vs_exact" not in info
    assert info["ann_fallback"] == ("the time budget of 0 s for the index searches was spent before any setting "
                                    "was tried without reaching recall@10 0.95")
    assert info["backend"] == "pgvector-exact-stream" and info["index"] == "exact"
    assert result.retrieval.ids == _truth(ids, vecs, queries)  # every question: the exact top 10
    top1 = vecs[[ids.index(r[0]) for r in result.retrieval.ids]]
    cos = np.sum(top1 * queries, axis=1) / np.linalg.norm(top1, axis=1) / np.linalg.norm(queries, axis=1)
    np.testing.assert_allclose([s[0] for s in result.retrieval.scores], cos, atol=1e-5)
    assert any(n.startswith("Searched exactly (no index): the time budget of 0 s") for n in result.notes)


def test_the_setting_is_chosen_on_a_read_only_database(weak_index):
    db, ids, vecs, queries = weak_index
    ro = connect(url=db.engine.url.render_as_string(hide_password=False))
    assert not ro.writable
    choice = choose_ef_search(PgVectorRetriever(ro, mode="hnsw"), queries, K, n_boot=50)
    assert choice.ef_search is not None and choice.info["ann_steps"][-1]["recall"] >= 0.95
    ro.dispose()
    with pytest.raises(ValueError, match=r"target_recall = 1.5; give a recall in \(0, 1\]"):
        choose_ef_search(PgVectorRetriever(db, mode="hnsw"), queries, K, target=1.5)
    with pytest.raises(ValueError, match=r"ann_time_budget_s = -1"):
        choose_ef_search(PgVectorRetriever(db, mode="hnsw"), queries, K, time_budget_s=-1)
    with pytest.raises(ValueError, match=r"target_recall = 0.0; give a recall in \(0, 1\]"):  # before any search
        run_tier1(_dataset(3), _Lookup(queries), PgVectorRetriever(db, mode="exact"), top_k=K, target_recall=0.0)


def test_the_report_words_the_choice_and_the_fall_back():
    from ragnb.rag.ann_tune import choice_info, tuning_label

    steps = [{"ef_search": 40, "recall": 0.472, "ci95": [0.44, 0.50], "search_s": 1.5},
             {"ef_search": 1000, "recall": 0.905, "ci95": [0.88, 0.93], "search_s": 9.25}]
    gave_up = choice_info(steps, 0.95, 120, 200, 0, 10, 55.5, chosen=None)
    assert gave_up["ann_fallback"] == ("no ef_search up to 1000 reached recall@10 0.95 — the graph is the limit: "
                                       "rebuild it with a larger --ef-construction or --m (`ragnb db index`)")
    assert tuning_label(gave_up) == (f"Searched exactly (no index): {gave_up['ann_fallback']} (recall by ef_search: "
                                     "40: 0.472, 1000: 0.905); exact search of the 200 sampled questions 55.50 s.")
    chose = choice_info(steps, 0.9, 120, 200, 0, 10, 55.5, chosen=1000)
    assert chose["ef_search"] == 1000 and "ann_fallback" not in chose
    assert tuning_label(chose) == ("HNSW at ef_search 1000, the first setting whose recall reached the target 0.90 "
                                   "on 200 sampled questions (by ef_search: 40: 0.472, 1000: 0.905); index search of "
                                   "the sample 9.25 s vs exact search of the 200 sampled questions 55.50 s.")
    assert tuning_label({"backend": "memory-exact"}) is None
    from math import nan

    shown = {"ann_recall@10_vs_exact": 0.9525, "ann_recall_n": 200}
    assert ann_recall_label({**shown, "ann_recall_ci95": [nan, nan]}) == "ANN recall@10 vs exact, n=200: 0.953"  # n_boot 0
