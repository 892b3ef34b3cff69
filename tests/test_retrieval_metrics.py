"""Retrieval metrics: equal to trec_eval (pytrec_eval) per query, the documented differences, hand
examples (graded nDCG, MRR, document-level metrics with chunk → doc dedup), aggregates, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytrec_eval = pytest.importorskip("pytrec_eval")

from ragnb.metrics.retrieval import (DEFAULT_METRICS, evaluate, per_query, to_doc_qrels, to_doc_run,  # noqa: E402
                                     trec_order)

KS = (1, 3, 5, 10)
# ragnb metric → pytrec_eval-terrier per-query key (measure families "success", "recip_rank",
# "recall", "P", "ndcg_cut" requested as e.g. "success.1,3,5,10"; results come back as "success_1").
MAPPING = {"mrr": "recip_rank"}
for _k in KS:
    MAPPING |= {f"hit_rate@{_k}": f"success_{_k}", f"recall@{_k}": f"recall_{_k}",
                f"precision@{_k}": f"P_{_k}", f"ndcg@{_k}": f"ndcg_cut_{_k}"}
METRICS = list(MAPPING)
KS_TEXT = ",".join(map(str, KS))
MEASURES = {f"success.{KS_TEXT}", "recip_rank", f"recall.{KS_TEXT}", f"P.{KS_TEXT}", f"ndcg_cut.{KS_TEXT}"}


def L2(x: float) -> float:
    return math.log2(x)


def pytrec(qrels, scored_run) -> dict:
    return pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(scored_run)


def test_pytrec_eval_measure_names_are_the_ones_we_map_to():
    res = pytrec({"q": {"a": 1}}, {"q": {"a": 1.0}})
    assert set(res["q"]) == set(MAPPING.values())


# ---------------------------------------------------------------------------------------------
# Generated runs vs pytrec_eval.


def _generate(seed: int, n_queries: int = 300, graded: bool = True, ties: str | None = None):
    """(score-dict run, qrels). Queries: lists of 0..24 docs (many shorter than 10, some empty),
    judged docs retrieved and not retrieved, 0-grade judgments, some queries without any relevant
    doc, some judged queries missing from the run, some run queries not judged."""
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for i in range(n_queries):
        q = f"q{i}"
        pool = [f"d{j}" for j in rng.permutation(60)[:40]]  # distinct ids, mixed lengths (d7, d42)
        n_ret = int(rng.choice([0, 1, 2, 3, 5, 9, 10, 11, 24], p=[.06, .06, .08, .1, .15, .15, .1, .1, .2]))
        retrieved, unretrieved = pool[:n_ret], pool[n_ret:]
        if ties == "exact":
            scores = rng.integers(0, 4, n_ret).astype(float)  # many ties
        elif ties == "float32":  # distinct doubles, but 1 + 3e-9 and 1 + 7e-9 are the same float32
            scores = rng.integers(1, 4, n_ret) + rng.permutation(1000)[:n_ret] * 1e-11
        else:
            scores = rng.permutation(1000)[:n_ret] / 7.0 - 50  # distinct
        judged = {}
        for d in retrieved:
            if rng.random() < 0.35:  # graded: -1 (gain 0, as in trec_eval) .. 3
                judged[d] = int(rng.integers(-1, 4)) if graded else int(rng.integers(0, 2))
        for d in unretrieved[: int(rng.integers(0, 4))]:  # relevant docs the run missed, and 0-grade ones
            judged[d] = int(rng.integers(0, 4)) if graded else int(rng.integers(0, 2))
        if judged or rng.random() < 0.5:
            qrels[q] = judged  # {} judged queries have no relevant doc too
        if rng.random() > 0.05:
            run[q] = dict(zip(retrieved, scores.tolist()))
    for i in range(10):  # run queries nobody judged
        run[f"x{i}"] = {"d1": 1.0}
    return run, qrels


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "binary"])
@pytest.mark.parametrize("form", ["ranked", "scores"])
def test_equals_pytrec_eval_on_tie_free_runs(graded, form):
    run, qrels = _generate(seed=1 + graded, graded=graded)
    ranked = {q: trec_order(s) for q, s in run.items()}
    frame, info = per_query(ranked if form == "ranked" else run, qrels, METRICS)
    ref = pytrec(qrels, run)

    has_rel = {q for q, j in qrels.items() if any(g > 0 for g in j.values())}
    compared = [q for q in qrels if q in has_rel and q in run]
    # The generator covers the cases it claims to (otherwise the comparison proves less).
    assert len(compared) > 150
    assert any(len(run[q]) == 0 for q in compared) and any(0 < len(run[q]) < 10 for q in compared)
    assert any(j and not any(g > 0 for g in j.values()) for j in qrels.values())
    assert any(g == 0 for j in qrels.values() for g in j.values())
    assert any(d not in run.get(q, {}) and g > 0 for q, j in qrels.items() for d, g in j.items())
    if graded:
        assert {g for j in qrels.values() for g in j.values()} == {-1, 0, 1, 2, 3}

    assert list(frame.index) == list(qrels)  # judged queries only, in qrels order
    worst = 0.0
    for name, measure in MAPPING.items():
        ours = frame.loc[compared, name].to_numpy()
        theirs = np.array([ref[q][measure] for q in compared])
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12, err_msg=name)
        worst = max(worst, float(np.abs(ours - theirs).max()))
        # and the values are not trivially all equal
        assert len(set(ours.round(12))) > 1, name
    assert worst <= 1e-12
    assert info["n_unjudged_run_queries"] == len(set(run) - set(qrels)) >= 10
    assert info["n_missing_from_run"] == len(set(qrels) - set(run)) > 0


def test_long_lists_with_many_relevant_docs_equal_pytrec_eval():
    # Up to 400 docs per list and up to 150 judged docs per query, so one list can hold dozens of
    # relevant docs (ranked-list form then finds ranks through a doc → rank map, not list.index).
    rng = np.random.default_rng(5)
    run, qrels = {}, {}
    for i in range(80):
        n = int(rng.integers(30, 400))
        docs = [f"doc-{j}" for j in rng.permutation(1000)[:n]]
        run[f"q{i}"] = dict(zip(docs, (rng.permutation(n) * 0.25).tolist()))
        judged = rng.permutation(1000)[: int(rng.integers(1, 150))]
        qrels[f"q{i}"] = {f"doc-{j}": int(rng.integers(0, 4)) for j in judged}
    found = [sum(g > 0 and d in run[q] for d, g in qrels[q].items()) for q in qrels]
    assert max(found) > 40 and min(found) < 16
    mapping = {"mrr": "recip_rank", "recall@100": "recall_100", "precision@200": "P_200",
               "ndcg@50": "ndcg_cut_50", "ndcg@1000": "ndcg_cut_1000", "hit_rate@1": "success_1"}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "recall.100", "P.200", "ndcg_cut.50,1000",
                                                 "success.1"}).evaluate(run)
    compared = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    for form in (run, {q: trec_order(s) for q, s in run.items()}):
        frame, _ = per_query(form, qrels, list(mapping))
        for name, measure in mapping.items():
            np.testing.assert_allclose(frame.loc[compared, name].to_numpy(), [ref[q][measure] for q in compared],
                                       rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("ties", ["exact", "float32"])
def test_ties_are_broken_like_trec_eval(ties):
    run, qrels = _generate(seed=7, ties=ties)
    frame, _ = per_query(run, qrels, METRICS)
    ref = pytrec(qrels, run)
    compared = [q for q in qrels if q in run and any(g > 0 for g in qrels[q].values())]
    n_tied = sum(len(set(np.float32(list(s.values())))) < len(s) for s in run.values())
    assert n_tied > 100  # the run really has ties (as trec_eval sees them)
    if ties == "float32":
        assert all(len(set(s.values())) == len(s) for s in run.values())  # but none in double precision
    for name, measure in MAPPING.items():
        np.testing.assert_allclose(frame.loc[compared, name].to_numpy(), [ref[q][measure] for q in compared],
                                   rtol=0, atol=1e-12, err_msg=name)
    # The ranked-list form of the same run, via trec_order, gives the same values.
    ranked, _ = per_query({q: trec_order(s) for q, s in run.items()}, qrels, METRICS)
    pd.testing.assert_frame_equal(ranked, frame)


@pytest.mark.parametrize("high, low, tied", [
    (1.0 + 1e-9, 1.0, True),  # the same float32
    (1.0 + 5e-8, 1.0, True),
    (1.0 + 2e-7, 1.0, False),  # float32 spacing at 1.0 is 1.19e-7
    (1e-50, 0.0, True),  # underflows to 0.0
    (1e-30, 0.0, False),
    (1e301, 1e300, True),  # both overflow to inf
    (-1.0, -1.0 - 1e-9, True),
])  # fmt: skip
def test_scores_are_compared_as_float32_like_trec_eval(high, low, tied):
    # "a" has the higher score; on a tie "b" (the larger doc id) comes first.
    scores = {"a": high, "b": low}
    qrels = {"q": {"a": 1}}
    expected = 0.5 if tied else 1.0
    assert pytrec(qrels, {"q": scores})["q"]["recip_rank"] == expected
    assert per_query({"q": scores}, qrels, ["mrr"])[0].loc["q", "mrr"] == expected
    assert trec_order(scores) == (["b", "a"] if tied else ["a", "b"])


def test_tie_order_is_doc_id_descending_including_non_ascii_ids():
    # Python str order = UTF-8 byte order = code point order: "ж" (U+0436) > "é" (U+00E9) > "z" > "Z".
    scores = {"Z": 1.0, "é": 1.0, "z": 1.0, "ж": 1.0, "top": 2.0}
    assert trec_order(scores) == ["top", "ж", "é", "z", "Z"]
    for rel, rank in [("ж", 2), ("é", 3), ("z", 4), ("Z", 5)]:
        qrels = {"q": {rel: 1}}
        frame, _ = per_query({"q": scores}, qrels, ["mrr"])
        assert frame.loc["q", "mrr"] == 1 / rank
        assert pytrec(qrels, {"q": scores})["q"]["recip_rank"] == 1 / rank


# ---------------------------------------------------------------------------------------------
# Documented differences from trec_eval.


def test_query_missing_from_run_scores_zero_and_is_counted():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": ["a"]}
    frame, summary = evaluate(run, qrels, ["mrr", "ndcg@3", "hit_rate@1"])
    assert frame.loc["q2"].tolist() == [0.0, 0.0, 0.0]
    assert summary["_info"]["n_missing_from_run"] == 1
    assert summary["mrr"]["mean"] == 0.5  # (1 + 0) / 2
    # trec_eval drops q2 and reports 1.0
    ref = pytrec(qrels, {"q1": {"a": 1.0}})
    assert set(ref) == {"q1"} and ref["q1"]["recip_rank"] == 1.0


def test_query_without_relevant_doc_is_nan_and_counted_as_failed():
    qrels = {"q1": {"a": 1}, "q2": {"b": 0, "c": -1}, "q3": {}}
    run = {"q1": ["x", "a"], "q2": ["b", "c"], "q3": ["b"]}
    frame, summary = evaluate(run, qrels, METRICS)
    assert frame.loc[["q2", "q3"]].isna().all().all()
    assert not frame.loc["q1"].isna().any()
    assert summary["_info"]["n_no_relevant"] == 2
    assert summary["mrr"] == {**summary["mrr"], "mean": 0.5, "n": 3, "n_valid": 1, "n_failed": 2}
    # trec_eval scores q2 0 instead, which would pull the mean to 0.25
    assert pytrec(qrels, {q: {d: -i for i, d in enumerate(r)} for q, r in run.items()})["q2"]["recip_rank"] == 0


def test_run_queries_not_in_qrels_are_counted_not_judged():
    qrels = {"q1": {"a": 1}}
    run = {"q1": ["a"], "extra1": ["a"], "extra2": []}
    frame, summary = evaluate(run, qrels, ["mrr"])
    assert list(frame.index) == ["q1"]
    assert summary["_info"] == {"n_queries": 1, "n_unjudged_run_queries": 2, "n_missing_from_run": 0,
                                "n_no_relevant": 0}
    assert summary["mrr"]["n"] == 1


# ---------------------------------------------------------------------------------------------
# Hand-computed examples.


def test_graded_ndcg_mrr_recall_precision_by_hand():
    qrels = {"q": {"a": 3, "b": 2, "c": 1, "z": 0}}
    run = {"q": ["x", "b", "a", "z"]}  # x unjudged (gain 0); c relevant but not retrieved
    frame, _ = per_query(run, qrels, ["ndcg@1", "ndcg@3", "ndcg@10", "mrr", "recall@3", "precision@3",
                                      "precision@10", "hit_rate@1", "hit_rate@3"])
    row = frame.loc["q"]
    # gains by rank: 0, 2, 3, 0 → DCG@3 = 0/log2(2) + 2/log2(3) + 3/log2(4) = 1.26186 + 1.5 = 2.76186
    dcg3 = 0 + 2 / L2(3) + 3 / L2(4)
    # ideal gains 3, 2, 1 (c counts though not retrieved) → IDCG@3 = 3 + 2/log2(3) + 1/log2(4) = 4.76186
    idcg3 = 3 + 2 / L2(3) + 1 / L2(4)
    assert row["ndcg@3"] == pytest.approx(dcg3 / idcg3, abs=1e-12)  # 2.7618595 / 4.7618595
    assert row["ndcg@3"] == pytest.approx(0.5799960, abs=1e-7)
    assert row["ndcg@10"] == pytest.approx(dcg3 / idcg3, abs=1e-12)  # z has gain 0, ideal has only 3 docs
    assert row["ndcg@1"] == 0.0  # x is not relevant: 0 / 3
    assert row["mrr"] == 0.5  # first relevant doc (b) at rank 2
    assert row["recall@3"] == pytest.approx(2 / 3)  # b, a of {a, b, c}
    assert row["precision@3"] == pytest.approx(2 / 3)
    assert row["precision@10"] == pytest.approx(2 / 10)  # short list: still divided by k
    assert (row["hit_rate@1"], row["hit_rate@3"]) == (0.0, 1.0)


def test_mrr_mean_by_hand():
    qrels = {"q1": {"a": 1}, "q2": {"b": 2, "c": 1}, "q3": {"d": 1}}
    run = {"q1": ["x", "a"],  # 1/2
           "q2": ["x", "y", "c", "b"],  # first relevant at rank 3 → 1/3
           "q3": ["x", "y"]}  # none retrieved → 0
    frame, summary = evaluate(run, qrels, ["mrr"])
    assert frame["mrr"].tolist() == [1 / 2, 1 / 3, 0.0]
    assert summary["mrr"]["mean"] == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)  # 0.27778


CHUNK_TO_DOC = {"c1": "A", "c2": "A", "c3": "B", "c4": "C", "c5": "B", "c6": "D"}


def test_doc_level_conversion_by_hand():
    run = {"q": ["c1", "c2", "c3", "c5", "c4", "c6"]}
    # documents by rank: A A B B C D → first occurrences A B C D
    assert to_doc_run(run, CHUNK_TO_DOC) == {"q": ["A", "B", "C", "D"]}
    # the first occurrence keeps its place: c1 (A), c3 (B), c2 (A) → A, B — not B, A
    assert to_doc_run({"q": ["c1", "c3", "c2"]}, CHUNK_TO_DOC) == {"q": ["A", "B"]}
    frame, _ = per_query({"q": ["c1", "c3", "c2"]}, {"q": {"c3": 1}}, ["doc_mrr", "mrr"], chunk_to_doc=CHUNK_TO_DOC)
    assert frame.loc["q"].tolist() == [0.5, 0.5]  # B is rank 2 both as a chunk and as a document
    # A = max(c2: 1) = 1 (c1 is unjudged), B = max(c3: 0, c5: 2) = 2, C = max(c4: 0) = 0
    qrels = {"q": {"c2": 1, "c3": 0, "c5": 2, "c4": 0}}
    assert to_doc_qrels(qrels, CHUNK_TO_DOC) == {"q": {"A": 1, "B": 2, "C": 0}}
    # score dicts are ranked first (trec order), then mapped: c9 > c8 > c7 → A, A, B → A, B
    assert to_doc_run({"q": {"c7": 1.0, "c8": 1.0, "c9": 2.0}}, {"c7": "B", "c8": "A", "c9": "A"}) == {"q": ["A", "B"]}


def test_doc_level_metrics_by_hand():
    run = {"q": ["c1", "c2", "c3", "c5", "c4", "c6"]}  # docs A A B B C D → A B C D
    qrels = {"q": {"c2": 1, "c3": 0, "c5": 2, "c4": 0}}  # docs A=1, B=2, C=0
    names = ["doc_mrr", "mrr", "doc_hit_rate@1", "doc_recall@1", "doc_recall@2", "doc_precision@3",
             "doc_precision@10", "precision@10", "doc_ndcg@2", "doc_ndcg@10", "ndcg@2",
             "docrank_recall@2", "docrank_precision@3", "docrank_ndcg@2"]
    frame, _ = per_query(run, qrels, names, chunk_to_doc=CHUNK_TO_DOC)
    row = frame.loc["q"]
    assert list(frame.columns) == names
    assert row["doc_mrr"] == 1.0  # A (via its judged chunk c2) is rank 1
    assert row["mrr"] == 0.5  # chunk level: c1 unjudged, c2 at rank 2
    assert row["doc_hit_rate@1"] == 1.0
    assert row["doc_recall@1"] == 0.5  # A of {A, B}
    # doc_*@k cut at k CHUNKS, then deduplicate. Changed from 1.0 (when the ranking was deduplicated first and
    # cut at 2 documents, A B): the top 2 chunks c1 c2 are both from A → A of {A, B}.
    assert row["doc_recall@2"] == 0.5
    assert row["docrank_recall@2"] == 1.0  # the old reading: A B = the first 2 distinct documents
    # doc_precision@k cuts at k DOCUMENTS and divides by k (was: top 3 chunks → A, B → 2 / 2 = 1.0, which the
    # chunk size alone could move): A B C, A and B relevant → 2 / 3.
    assert row["doc_precision@3"] == pytest.approx(2 / 3)
    assert row["docrank_precision@3"] == pytest.approx(2 / 3)
    assert row["doc_precision@10"] == pytest.approx(2 / 10)  # A B C D: 2 relevant / 10 pages requested (was / 4)
    assert row["precision@10"] == pytest.approx(2 / 10)  # chunk level: c2, c5 relevant, divided by k
    # Changed from (1 + 2/log2(3)) / IDCG@2: the top 2 chunks give documents [A] only, gains 1 → DCG@2 = 1;
    # IDCG@2 = 2 + 1/log2(3) = 2.63093 (best 2 document grades) → 0.38009.
    assert row["doc_ndcg@2"] == pytest.approx(1 / (2 + 1 / L2(3)), abs=1e-12)
    # docrank: doc gains by rank 1, 2, 0, 0; DCG@2 = 1 + 2/log2(3) = 2.26186 → 0.85968
    assert row["docrank_ndcg@2"] == pytest.approx((1 + 2 / L2(3)) / (2 + 1 / L2(3)), abs=1e-12)
    assert row["doc_ndcg@10"] == pytest.approx((1 + 2 / L2(3)) / (2 + 1 / L2(3)), abs=1e-12)  # all 6 chunks: same
    # chunk level: gains 0, 1, 0, 2, 0, 0; ideal 2, 1 → DCG@2 = 1/log2(3) = 0.63093 → 0.23981
    assert row["ndcg@2"] == pytest.approx((1 / L2(3)) / (2 + 1 / L2(3)), abs=1e-12)


def test_doc_level_cuts_chunks_then_deduplicates_by_hand():
    # Top 3 chunks from 2 documents: precision = relevant unique documents / 2, not / 3.
    c2d = {"a1": "A", "a2": "A", "b1": "B", "c1": "C", "d1": "D"}
    run = {"q": ["a1", "a2", "b1", "c1", "d1"]}  # documents A A B C D
    qrels = {"q": {"b1": 1, "d1": 1}}  # relevant documents B, D
    names = ["doc_precision@3", "docrank_precision@3", "doc_hit_rate@2", "docrank_hit_rate@2",
             "doc_recall@3", "docrank_recall@3", "doc_ndcg@3", "docrank_ndcg@3", "doc_mrr"]
    row = per_query(run, qrels, names, chunk_to_doc=c2d)[0].loc["q"]
    assert row["doc_precision@3"] == pytest.approx(1 / 3)  # first 3 documents A B C (not the top 3 chunks): 1 / 3
    assert row["docrank_precision@3"] == pytest.approx(1 / 3)  # first 3 documents A B C: 1 / 3
    assert row["doc_hit_rate@2"] == 0.0  # top 2 chunks are both A
    assert row["docrank_hit_rate@2"] == 1.0  # first 2 documents A, B
    assert row["doc_recall@3"] == 0.5  # B of {B, D}
    assert row["docrank_recall@3"] == 0.5  # A B C: B of {B, D}
    # doc: [A, B] gains 0, 1 → DCG = 1/log2(3); IDCG@3 = 1 + 1/log2(3)
    assert row["doc_ndcg@3"] == pytest.approx((1 / L2(3)) / (1 + 1 / L2(3)), abs=1e-12)
    assert row["docrank_ndcg@3"] == pytest.approx((1 / L2(3)) / (1 + 1 / L2(3)), abs=1e-12)  # A B C: same gains
    assert row["doc_mrr"] == 0.5  # no cut-off: B is document 2 of the whole deduplicated ranking A B C D
    # score dicts are ordered (trec order) before the cut: a2 > b1 > a1 → A B A → first 2 documents A, B
    scored = {"q": {"a1": 1.0, "a2": 3.0, "b1": 2.0}}
    assert per_query(scored, qrels, ["doc_precision@2"], chunk_to_doc=c2d)[0].loc["q"].tolist() == [0.5]
    assert to_doc_run(scored, c2d, top_chunks=1) == {"q": ["A"]}


def test_doc_precision_does_not_move_with_the_chunk_size():
    """The same four pages in the same page order, cut into one chunk each (A) or into seven chunks (B): the page
    ranking is P1 P2 P3 P4 either way, relevant pages P2 and P4, so doc_precision@k is the same number."""
    c2d_a = {"a1": "P1", "a2": "P2", "a3": "P3", "a4": "P4"}
    c2d_b = {"b1": "P1", "b2": "P1", "b3": "P2", "b4": "P1", "b5": "P2", "b6": "P3", "b7": "P4"}
    run_a, run_b = {"q": ["a1", "a2", "a3", "a4"]}, {"q": ["b1", "b2", "b3", "b4", "b5", "b6", "b7"]}
    qrels_a, qrels_b = {"q": {"a2": 1, "a4": 1}}, {"q": {"b3": 1, "b5": 1, "b7": 1}}
    names = ["doc_precision@1", "doc_precision@3", "doc_precision@5", "docrank_precision@3", "precision@3"]
    a = per_query(run_a, qrels_a, names, chunk_to_doc=c2d_a)[0].loc["q"]
    b = per_query(run_b, qrels_b, names, chunk_to_doc=c2d_b)[0].loc["q"]
    # P1 → 0/1; P1 P2 P3 → 1/3; P1 P2 P3 P4 (of 5 requested) → 2/5 — in both chunkings
    for row in (a, b):
        assert row["doc_precision@1"] == 0.0
        assert row["doc_precision@3"] == pytest.approx(1 / 3) == row["docrank_precision@3"]
        assert row["doc_precision@5"] == pytest.approx(2 / 5)
    # the old denominator (distinct pages of the top 3 chunks) gave A 1/3 (P1 P2 P3) but B 1/2 (P1 P1 P2): a
    # "better" B from re-chunking alone. Chunk-level precision@3 keeps trec_eval's reading (relevant chunks / 3).
    assert a["precision@3"] == pytest.approx(1 / 3) and b["precision@3"] == pytest.approx(1 / 3)


def test_doc_level_without_mapping_only_deduplicates_and_empty_list_precision_is_zero():
    run = {"q1": ["u1", "u1", "u2", "u3"], "q2": []}  # e.g. the source urls of the retrieved chunks
    qrels = {"q1": {"u2": 1}, "q2": {"u9": 1}}
    frame, _ = per_query(run, qrels, ["doc_mrr", "doc_precision@5", "doc_precision@1"])
    # u1 u2 u3: u2 at rank 2; 1 relevant of the 5 pages requested (3 exist: the missing two are not relevant)
    assert frame.loc["q1"].tolist() == [0.5, pytest.approx(1 / 5), 0.0]
    assert frame.loc["q2"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="twice"):  # the chunk-level metrics refuse the same repeats
        per_query(run, qrels, ["mrr"])


def test_doc_level_unmapped_chunk_is_an_error():
    with pytest.raises(ValueError, match="'c9'.*chunk_to_doc"):
        per_query({"q": ["c1", "c9"]}, {"q": {"c1": 1}}, ["doc_mrr"], chunk_to_doc=CHUNK_TO_DOC)


# ---------------------------------------------------------------------------------------------
# Aggregates.


def test_aggregates_mean_counts_and_ci():
    run, qrels = _generate(seed=11)
    frame, summary = evaluate(run, qrels, DEFAULT_METRICS, n_boot=500, seed=3)
    n_rel = {q: sum(g > 0 for g in j.values()) for q, j in qrels.items()}
    n_failed = sum(v == 0 for v in n_rel.values())
    assert n_failed > 0 and summary["_info"]["n_no_relevant"] == n_failed
    assert summary["_info"]["n_missing_from_run"] == sum(q not in run for q in qrels) > 0
    for name in DEFAULT_METRICS:
        s, col = summary[name], frame[name]
        assert s["n"] == len(qrels)
        assert s["n_failed"] == n_failed and s["n_valid"] == len(qrels) - n_failed
        assert s["mean"] == pytest.approx(float(np.nanmean(col.to_numpy())), abs=1e-12)
        lo, hi = s["ci95"]
        assert lo < s["mean"] < hi, name
        assert hi - lo < 0.3, name  # ~250 valid queries: a tight interval, not [0, 1]
    # deterministic for a seed
    _, again = evaluate(run, qrels, DEFAULT_METRICS, n_boot=500, seed=3)
    assert again["ndcg@10"]["ci95"] == summary["ndcg@10"]["ci95"]


def test_aggregate_by_hand():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 1}, "q4": {"a": 0}}
    run = {"q1": ["a"], "q2": ["b", "a"], "q3": ["b"], "q4": ["a"]}
    _, summary = evaluate(run, qrels, ["mrr"], n_boot=200)
    s = summary["mrr"]
    assert s["mean"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert (s["n"], s["n_valid"], s["n_failed"]) == (4, 3, 1)
    assert 0 <= s["ci95"][0] <= s["mean"] <= s["ci95"][1] <= 1


def test_metric_names_are_canonical_and_deduplicated():
    frame, summary = evaluate({"q": ["a"]}, {"q": {"a": 1}}, ["ndcg@10", "mrr", "ndcg@10"], n_boot=10)
    assert list(frame.columns) == ["ndcg@10", "mrr"]
    assert set(summary) == {"ndcg@10", "mrr", "_info"}


def test_numpy_integer_grades_and_tuple_lists_are_accepted():
    qrels = {"q": {"a": np.int64(2), "b": 1.0}}
    a, _ = per_query({"q": ("b", "a")}, qrels, ["ndcg@2"])
    b, _ = per_query({"q": ["b", "a"]}, {"q": {"a": 2, "b": 1}}, ["ndcg@2"])
    pd.testing.assert_frame_equal(a, b)
    # gains 1, 2; ideal 2, 1
    assert a.loc["q", "ndcg@2"] == pytest.approx((1 + 2 / L2(3)) / (2 + 1 / L2(3)))


# ---------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize("run, qrels, metrics, message", [
    ({"q": ["a", "b", "a"]}, {"q": {"a": 1}}, ["mrr"], r"run\['q'\] lists doc 'a' twice \(ranks 1 and 3\)"),
    ({"q": [1, 2]}, {"q": {"1": 1}}, ["mrr"], r"doc id 1 of type int; doc ids must be strings"),
    ({"q": {1: 1.0}}, {"q": {"1": 1}}, ["mrr"], r"doc id 1 of type int"),
    ({1: ["a"]}, {"1": {"a": 1}}, ["mrr"], r"run query id 1 is a int"),
    ({"q": ["a"]}, {1: {"a": 1}}, ["mrr"], r"qrels query id 1 is a int"),
    ({"q": ["a"]}, {"q": {1: 1}}, ["mrr"], r"doc id 1 is a int"),
    ({"q": ["a"]}, {"q": {"a": 1.5}}, ["mrr"], r"1.5 is not an integer relevance grade"),
    ({"q": {"a": float("nan")}}, {"q": {"a": 1}}, ["mrr"], r"score nan is not a finite number"),
    ({"q": {"a": 1.0, "b": float("nan")}}, {"q": {"a": 1}}, ["mrr"], r"run\['q'\]\['b'\] score nan"),
    ({"q": {"a": 1.0, "b": "high"}}, {"q": {"a": 1}}, ["mrr"], r"run\['q'\]\['b'\] score 'high'"),
    ({"q": ["a"], "r": {"a": 1.0}}, {"q": {"a": 1}}, ["mrr"], r"mixes ranked lists and score dicts"),
    ({"q": "a"}, {"q": {"a": 1}}, ["mrr"], r"run\['q'\] is a str"),
    ({"q": ["a"]}, {"q": {"a": 1}}, ["nope@3"], r"unknown metric 'nope@3'; known metrics: .*ndcg@k"),
    ({"q": ["a"]}, {"q": {"a": 1}}, ["ndcg"], r"'ndcg' needs a cut-off ≥ 1, e.g. 'ndcg@10'"),
    ({"q": ["a"]}, {"q": {"a": 1}}, ["ndcg@0"], r"needs a cut-off ≥ 1"),
    ({"q": ["a"]}, {"q": {"a": 1}}, ["ndcg@x"], r"cut-off must be a positive integer"),
    ({"q": ["a"]}, {"q": {"a": 1}}, ["mrr@5"], r"'mrr' takes no cut-off; write 'mrr'"),
    ({"q": ["a"]}, {"q": {"a": 1}}, [], r"no metrics given"),
    ({"q": ["a"]}, {}, ["mrr"], r"qrels is empty"),
    ({"q": ["a"]}, {"q": {"a": 1}}, "ndcg@10", r"metrics must be a list .* got the string 'ndcg@10'"),
    (["a"], {"q": {"a": 1}}, ["mrr"], r"run must be a dict"),
])  # fmt: skip
def test_bad_input_raises_a_useful_value_error(run, qrels, metrics, message):
    with pytest.raises(ValueError, match=message):
        evaluate(run, qrels, metrics, n_boot=10)


def test_repeat_deep_in_a_long_list_of_many_queries_is_found():
    run = {f"q{i}": [f"d{j}" for j in range(50)] for i in range(200)}
    run["q137"][41] = "d3"
    qrels = {q: {"d0": 1} for q in run}
    with pytest.raises(ValueError, match=r"run\['q137'\] lists doc 'd3' twice \(ranks 4 and 42\)"):
        per_query(run, qrels, ["mrr"])


@pytest.mark.parametrize("n_boot", [-1, 2.5, True])
def test_bad_n_boot(n_boot):
    # 0 is no interval (docs/metrics.md, Bootstrap CI), as in the notebooks' n_boot parameter
    with pytest.raises(ValueError, match=r"n_boot must be a whole number ≥ 0 of bootstrap resamples"):
        evaluate({"q": ["a"]}, {"q": {"a": 1}}, ["mrr"], n_boot=n_boot)
