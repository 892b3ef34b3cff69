"""Real-users benchmark: page-id ground truth, exclusion counts, metrics against hand values and pytrec_eval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from ragnb.rag.retrieval import MemoryRetriever
from ragnb.tiers.real_users import EVALUATED, NO_URL, UNMATCHED, chunk_pages, page_qrels, run_real_users, score_counts

# Five chunks on four pages, in the URL forms a Confluence log mixes: pageId query vs /pages/<id>/ path,
# http vs https, www., trailing slash.
CHUNK_URLS = {
    "c1": "https://wiki.example.com/pages/viewpage.action?pageId=42",
    "c2": "http://wiki.example.com/spaces/DOC/pages/42/Intro",
    "c3": "https://docs.example.com/guide/",
    "c4": "https://docs.example.com/other",
    "c5": None,
}


def test_page_qrels_match_url_variants_and_count_missing_and_unmatched():
    urls = {
        "q1": "https://wiki.example.com/pages/42/Intro#section",  # same page as c1 (pageId=42) and c2
        "q2": "http://www.docs.example.com/guide",  # http, www., no trailing slash → c3
        "q3": None,
        "q4": "  ",
        "q5": "https://unknown.example.com/x",
        "q6": "HTTPS://WIKI.EXAMPLE.COM/pages/viewpage.action?pageId=42",
    }
    qrels, status = page_qrels(urls, CHUNK_URLS)
    assert qrels == {"q1": {"c1": 1, "c2": 1}, "q2": {"c3": 1}, "q6": {"c1": 1, "c2": 1}}
    assert status["status"].to_dict() == {"q1": EVALUATED, "q2": EVALUATED, "q3": NO_URL, "q4": NO_URL,
                                          "q5": UNMATCHED, "q6": EVALUATED}
    assert status.loc["q1", "page_id"] == "42" and status.loc["q2", "page_id"] == "docs.example.com/guide"
    assert status["n_relevant_chunks"].tolist() == [2, 1, 0, 0, 0, 2]


def test_chunk_pages_keeps_urlless_chunks_apart():
    pages = chunk_pages({"7": None, "c": "https://x.org/pages/7/T"})
    assert pages == {"7": "chunk:7", "c": "7"}  # a chunk id never collides with a page id


def _tiny():
    """Orthonormal chunk vectors: cos(q, c_i) = q_i / |q|, so the ranking is the order of q's components."""
    ids = list(CHUNK_URLS)
    retriever = MemoryRetriever(ids, np.eye(5, dtype=np.float32), [CHUNK_URLS[c] for c in ids])
    log = pd.DataFrame({
        "question": ["q one", "q two", "q three", "q four", "q five"],
        "url": ["https://wiki.example.com/pages/42/Intro", "https://docs.example.com/guide", None, "",
                "https://unknown.example.com/x"],
        "score": pd.array([5, 4, None, 5, 1], dtype="Int64"),
    }, index=pd.Index(["q1", "q2", "q3", "q4", "q5"], name="id"))
    vectors = np.array([
        [0.1, 0.5, 0.9, 0.3, 0.0],  # c3 c2 c4 c1 c5 → page 42 first at chunk rank 2, page rank 2
        [0.1, 0.2, 0.9, 0.0, 0.3],  # c3 c5 c2 c1 c4 → guide at rank 1
        [0.9, 0.1, 0.2, 0.3, 0.4],
        [0.5, 0.4, 0.3, 0.2, 0.1],
        [0.1, 0.2, 0.3, 0.4, 0.5],
    ], dtype=np.float32)
    return log, vectors, retriever


def test_run_real_users_hand_computed_metrics_and_shares():
    log, vectors, retriever = _tiny()
    res = run_real_users(log, vectors, retriever, CHUNK_URLS, top_k=5, n_boot=200)
    s, pq = res.summary, res.per_item
    l2 = math.log2
    ndcg_q1 = (1 / l2(3) + 1 / l2(5)) / (1 + 1 / l2(3))  # relevant c2 at 2, c1 at 4; ideal: two at 1, 2
    assert s["hit_rate@1"]["mean"] == pytest.approx(0.5) and s["hit_rate@1"]["n"] == 2
    assert s["hit_rate@5"]["mean"] == pytest.approx(1.0)
    assert s["mrr"]["mean"] == pytest.approx((1 / 2 + 1) / 2)
    assert s["recall@1"]["mean"] == pytest.approx((0 + 1) / 2)
    assert s["recall@3"]["mean"] == pytest.approx((1 / 2 + 1) / 2)
    assert s["precision@5"]["mean"] == pytest.approx((2 / 5 + 1 / 5) / 2)
    assert s["ndcg@5"]["mean"] == pytest.approx((ndcg_q1 + 1.0) / 2)
    # Page level: q1 ranks pages guide, 42, other, chunk:c5 (c1 repeats page 42); q2: guide, chunk:c5, 42, other.
    assert s["doc_hit_rate@1"]["mean"] == pytest.approx(0.5)
    assert s["doc_mrr"]["mean"] == pytest.approx(0.75)
    assert s["doc_precision@5"]["mean"] == pytest.approx(1 / 5)  # one relevant page of the 5 requested (4 exist)
    assert s["doc_ndcg@5"]["mean"] == pytest.approx((1 / l2(3) + 1) / 2)
    assert "hit_rate@10" not in s and any("hit_rate@10" in n for n in res.notes)  # cut-off > top_k: not computed
    # Exclusions counted over all 5 selected questions, not dropped.
    assert s["questions"] == {"selected": 5, "evaluated": 2, "no_url": 2, "unmatched_url": 1}
    assert any(n.startswith("2 of 3 logged question URLs match a chunk URL; e.g. logged") and "--url-template" in n
               for n in res.notes)  # the unmatched one, an example chunk URL and the fix
    assert s["no_url_share"]["mean"] == pytest.approx(2 / 5) and s["no_url_share"]["n"] == 5
    assert s["unmatched_url_share"]["mean"] == pytest.approx(1 / 5)
    assert s["score_distribution"] == {"1": 1, "2": 0, "3": 0, "4": 1, "5": 2, "missing": 1}
    by_score = {r["score"]: r for r in s["metrics_by_score"]}
    assert list(by_score) == [1, 2, 3, 4, 5, "missing"]
    assert by_score[5]["n"] == 1 and by_score[5]["n_selected"] == 2 and by_score[5]["hit_rate@1"] == 0.0  # q4: no url
    assert by_score[4]["n"] == 1 and by_score[4]["doc_mrr"] == 1.0 and by_score[4]["mrr"] == 1.0
    assert by_score[1]["n"] == 0 and by_score[1]["n_selected"] == 1 and math.isnan(by_score[1]["mrr"])
    assert by_score[2]["n_selected"] == 0 and math.isnan(by_score[2]["doc_hit_rate@5"])
    # the per-score values are the evaluated rows of that score, recomputed from the per-question table
    for sc, r in by_score.items():
        rows = pq[(pq["status"] == EVALUATED) & (pq["score"].astype("Int64").eq(sc).fillna(False).astype(bool)
                                                 if sc != "missing" else pq["score"].isna())]
        for m in ("doc_hit_rate@1", "doc_hit_rate@5", "doc_mrr", "hit_rate@1", "hit_rate@5", "mrr"):
            assert (math.isnan(r[m]) and rows.empty) or r[m] == pytest.approx(rows[m].mean()), (sc, m)
    assert sum(r["n_selected"] for r in by_score.values()) == 5
    assert pq["status"].tolist() == [EVALUATED, EVALUATED, NO_URL, NO_URL, UNMATCHED]
    assert pq["first_relevant_rank"].tolist()[:2] == [2.0, 1.0] and pq["first_relevant_rank"][2:].isna().all()
    assert pq["first_relevant_doc_rank"].tolist()[:2] == [2.0, 1.0]
    assert pq.loc["q1", "retrieved"] == "c3 c2 c4 c1 c5"
    assert pq.loc["q1", "top1_score"] == pytest.approx(0.9 / np.linalg.norm(vectors[0]), abs=1e-6)
    assert pq.loc["q3", ["hit_rate@1", "mrr"]].isna().all()
    # the page-level truth, by page id, that a comparison of two runs checks item by item (ragnb.runs.comparability)
    assert pq["relevant_pages"].tolist() == ["42", "docs.example.com/guide", "", "", ""]


def test_chunk_metrics_equal_pytrec_eval():
    log, vectors, retriever = _tiny()
    res = run_real_users(log, vectors, retriever, CHUNK_URLS, top_k=5, n_boot=50)
    qrels, _ = page_qrels(dict(zip(log.index, log["url"])), CHUNK_URLS)
    run = {q: {c: float(10 - r) for r, c in enumerate(ids)} for q, ids in zip(log.index, res.retrieval.ids) if q in qrels}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success.1", "ndcg_cut.5", "P.3", "recall.5"}).evaluate(run)
    for ours, theirs in (("mrr", "recip_rank"), ("hit_rate@1", "success_1"), ("ndcg@5", "ndcg_cut_5"),
                         ("precision@3", "P_3"), ("recall@5", "recall_5")):
        assert res.per_item[ours].dropna().to_dict() == pytest.approx({q: v[theirs] for q, v in ev.items()}), ours


def test_no_scorable_question_gives_empty_aggregates_and_a_note():
    log, vectors, retriever = _tiny()
    log = log.assign(url=[None, None, None, "https://nowhere.example/x", None])
    res = run_real_users(log, vectors, retriever, CHUNK_URLS, top_k=3, n_boot=50)
    assert res.summary["hit_rate@1"]["n"] == 0 and math.isnan(res.summary["hit_rate@1"]["mean"])
    assert res.summary["questions"] == {"selected": 5, "evaluated": 0, "no_url": 4, "unmatched_url": 1}
    assert any("nothing to score" in n for n in res.notes)


def test_bad_inputs_raise_clear_errors():
    log, vectors, retriever = _tiny()
    with pytest.raises(ValueError, match="top_k"):
        run_real_users(log, vectors, retriever, CHUNK_URLS, top_k=0)
    with pytest.raises(ValueError, match="vectors for 5 questions"):
        run_real_users(log, vectors[:3], retriever, CHUNK_URLS)
    with pytest.raises(ValueError, match="no questions selected"):
        run_real_users(log.iloc[:0], vectors[:0], retriever, CHUNK_URLS)
    with pytest.raises(ValueError, match="'q2'.*integer 1–5"):
        run_real_users(log.assign(score=[5, 7, None, 5, 1]), vectors, retriever, CHUNK_URLS)
    with pytest.raises(ValueError, match="chunk_urls does not list"):
        run_real_users(log, vectors, retriever, {c: u for c, u in CHUNK_URLS.items() if c != "c3"})
    with pytest.raises(ValueError, match="lacks column"):
        run_real_users(log.drop(columns=["url"]), vectors, retriever, CHUNK_URLS)
    assert score_counts(pd.Series([5.0, None, 2])) == {"1": 0, "2": 1, "3": 0, "4": 0, "5": 1, "missing": 1}


def test_load_log_filters_limits_and_counts_unembedded(fresh_db, encoder):
    from ragnb.analysis.inputs import count_unembedded, load_log
    from ragnb.store.loaders import insert_rows
    from ragnb.store.vectors import embed_table
    from ragnb.datasets.corpus import Corpus

    rows = [{"id": f"q{i}", "question": f"question number {i}", "url": f"https://w.example/p{i}", "score": s}
            for i, s in enumerate([5, 3, 5, 1])]
    insert_rows(fresh_db, "questions", rows)
    embed_table(fresh_db, "questions", encoder, progress=False)
    insert_rows(fresh_db, "questions", [{"id": "q9", "question": "not embedded yet", "score": 5}])
    ctx = Corpus(fresh_db, encoder, "test", {})
    log, vectors = load_log(ctx, min_score=5)
    assert list(log.index) == ["q0", "q2"] and vectors.shape == (2, encoder.dim)  # q9 has no vector
    np.testing.assert_allclose(vectors[1], encoder.encode(["question number 2"])[0], atol=1e-5)  # the stored one
    log, _ = load_log(ctx, min_score=0, limit=3)
    assert list(log.index) == ["q0", "q1", "q2"]
    assert count_unembedded(ctx, 5) == 1 and count_unembedded(ctx, 0) == 1
    for kwargs, field in (({"min_score": 6}, "min_score"), ({"min_score": -1}, "min_score"), ({"limit": -2}, "limit")):
        with pytest.raises(ValueError, match=field):
            load_log(ctx, **kwargs)


def test_all_logged_questions_by_default():
    """The notebook and the demo parameters take every logged question (no score-5 filter hiding the failures)."""
    from pathlib import Path

    import ragnb
    from ragnb.runs.params import Notebook, declared_params, load_params_file

    root = Path(ragnb.__file__).resolve().parent
    nb = Notebook("real_users", "real_users", root / "notebooks" / "real_users.ipynb")
    assert declared_params(nb)["min_score"]["default"] == "0"
    demo = load_params_file(root.parent / "params" / "demo.yaml")
    assert demo["real_users"].get("min_score", 0) == 0
