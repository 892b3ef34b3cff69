"""Source analytics: chunk utilization, topic coverage, domain analysis — hand-computed references on tiny
inputs, and the four notebooks executed on the demo with their JSON checked against independent computations."""

from __future__ import annotations

import html as html_lib
import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from ragnb.analysis.domain import domain_analysis, knowledge_gaps, page_hits, scores_by_topic
from ragnb.analysis.topics import cluster_questions, coverage_by_topic, topic_coverage
from ragnb.analysis.utilization import chunk_utilization, count_distribution, gini, unused_by_page

# ---------------------------------------------------------------------------------------------
# Utilization


def _gini_pairs(x) -> float:
    """Σ_i Σ_j |x_i − x_j| / (2 n² x̄): the textbook form, independent of the sorted-sum formula."""
    x = np.asarray(x, dtype=float)
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean()))


def test_gini_hand_values():
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)  # (n − 1)/n: all retrievals on one chunk
    assert gini([1, 1, 1, 1]) == 0.0
    assert gini([1, 2, 3, 4]) == pytest.approx(0.25)  # (−3·1 − 1·2 + 1·3 + 3·4) / (4 · 10)
    rng = np.random.default_rng(1)
    x = rng.integers(0, 20, size=57)
    assert gini(x) == pytest.approx(_gini_pairs(x))
    assert math.isnan(gini([0, 0])) and math.isnan(gini([]))
    with pytest.raises(ValueError, match="non-negative"):
        gini([1, -1])


URLS = {"a": "https://w.example/p1", "b": "http://w.example/p1/", "c": "https://w.example/p2",
        "d": "https://w.example/p2", "e": None}


def test_chunk_utilization_counts_rate_and_pages():
    per, s = chunk_utilization(list("abcde"), [["a", "b"], ["b", "c"], ["b", "a"]], URLS)
    assert per["retrieval_count"].to_dict() == {"a": 2, "b": 3, "c": 1, "d": 0, "e": 0}
    assert (s["total_chunks"], s["used_chunks"], s["unused_chunks"]) == (5, 3, 2)
    assert s["utilization_rate"] == pytest.approx(0.6)
    assert s["gini"] == pytest.approx(16 / 30)  # sorted 0,0,1,2,3: (0·−4 + 0·−2 + 1·0 + 2·2 + 3·4) / (5 · 6)
    assert s["n_queries"] == 3 and s["top_k"] == 2 and s["max_query_share"] == 1.0
    assert per["top1_count"].to_dict() == {"a": 1, "b": 2, "c": 0, "d": 0, "e": 0}
    assert per["best_rank"].tolist()[:3] == [1, 1, 2] and per["best_rank"][3:].isna().all()
    assert per.loc["a", "query_share"] == pytest.approx(2 / 3)
    pages = unused_by_page(per)
    # p1 (http/https, trailing slash: one page) fully used; p2 half; the url-less chunk never
    assert pages["unused_share"].to_dict() == {"(no url)": 1.0, "w.example/p2": 0.5, "w.example/p1": 0.0}
    assert pages.loc["w.example/p1", "retrievals"] == 5
    assert count_distribution(per).to_dict("list") == {"retrieval_count": [0, 1, 2, 3], "chunks": [2, 1, 1, 1]}
    _, cut = chunk_utilization(list("abcde"), [["a", "b"], ["b", "c"], ["b", "a"]], URLS, top_k=1)
    assert (cut["used_chunks"], cut["top_k"]) == (2, 1)


def test_chunk_utilization_rejects_bad_input():
    with pytest.raises(ValueError, match="not in chunk_ids"):
        chunk_utilization(["a", "b"], [["a", "z"]])
    with pytest.raises(ValueError, match="twice"):
        chunk_utilization(["a", "b"], [["a", "a"]])
    with pytest.raises(ValueError, match="empty"):
        chunk_utilization(["a"], [])
    with pytest.raises(ValueError, match="no embedded chunks"):
        chunk_utilization([], [["a"]])
    with pytest.raises(ValueError, match="listed twice"):
        chunk_utilization(["a", "a"], [["a"]])
    with pytest.raises(ValueError, match="top_k"):
        chunk_utilization(["a"], [["a"]], top_k=0)


# ---------------------------------------------------------------------------------------------
# Topics: three unambiguous groups (around e1, e2, e3) of 4, 3 and 2 questions.

def _groups():
    rng = np.random.default_rng(7)
    centers = np.eye(8)[:3]
    sizes = [4, 3, 2]
    vectors = np.vstack([centers[g] + 0.05 * rng.standard_normal((n, 8)) for g, n in enumerate(sizes)])
    vectors[1] = centers[0] * 3.0  # exactly on the first group's axis: its most central question
    group = np.repeat([0, 1, 2], sizes)
    retrieved = [["c1", "c2"]] * 4 + [["c3", "c4"], ["c5", "c6"], ["c3", "c7"]] + [["c8", "c1"], ["c9", "c10"]]
    urls = {"c1": "https://kb.example/p1", "c2": "http://kb.example/p1/", "c3": "https://kb.example/p3",
            "c4": "https://kb.example/p3", "c5": "https://kb.example/p5", "c6": None, "c7": "https://kb.example/p7",
            "c8": "https://kb.example/p8", "c9": "https://kb.example/p9", "c10": "https://kb.example/p9"}
    return vectors.astype(np.float32), group, [list(r) for r in retrieved], urls


def test_cluster_questions_finds_the_groups_numbered_by_size():
    vectors, group, _, _ = _groups()
    cl = cluster_questions(vectors, 3, seed=0, n_init=5)
    assert cl.labels.tolist() == group.tolist()  # largest group = topic 0
    from sklearn.metrics import silhouette_score

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert cl.silhouette == pytest.approx(silhouette_score(unit, group, metric="cosine"))
    assert cl.silhouette > 0.8
    assert cl.similarity[1] == pytest.approx(float(unit[1] @ cl.centroids[0]))


def test_topic_coverage_unique_chunks_urls_and_flag():
    vectors, group, retrieved, urls = _groups()
    questions = [f"question {i}" for i in range(len(group))]
    per, s = topic_coverage([f"q{i}" for i in range(9)], questions, vectors, retrieved, urls, n_topics=3, n_init=5)
    topics = {t["topic_id"]: t for t in s["topic_coverage"]}
    # topic 0: c1 c2 (one page p1 in two URL forms); topic 1: c3..c7 (p3, p5, p7; c6 has no url); topic 2: c8 c1 c9 c10
    assert [(t["question_count"], t["unique_chunks"], t["unique_urls"]) for t in topics.values()] == \
        [(4, 2, 1), (3, 5, 3), (2, 4, 3)]
    assert s["n_topics"] == 3 and s["total_questions"] == 9
    assert s["avg_chunks_per_topic"] == pytest.approx((2 + 5 + 4) / 3)
    assert s["avg_urls_per_topic"] == pytest.approx((1 + 3 + 3) / 3)
    # median size 3, median chunks/question 5/3: topic 0 (4 questions, 0.5 < 0.5 · 5/3) is flagged; topic 2 is small
    assert s["low_coverage_topics"] == [0]
    assert topics[0]["representative_questions"][0] == "question 1" and len(topics[0]["representative_ids"]) == 3
    assert sorted(topics[2]["representative_ids"]) == ["q7", "q8"]  # a 2-question topic shows both
    assert per["topic_id"].tolist() == group.tolist() and per.loc["q1", "representative"]
    assert topics[0]["top_urls"] == ["https://kb.example/p1 (8)"]


def test_coverage_by_topic_on_given_labels():
    frame = coverage_by_topic([1, 0, 1], [["x", "y"], ["y"], ["y", "z"]], {"x": "u1", "y": "u2", "z": None})
    assert frame[["topic_id", "question_count", "unique_chunks", "unique_urls"]].values.tolist() == \
        [[0, 1, 1, 1], [1, 2, 3, 2]]


def test_topic_inputs_are_checked():
    vectors, group, retrieved, urls = _groups()
    ids, qs = [f"q{i}" for i in range(9)], ["x"] * 9
    for n_topics, msg in ((1, "at least 2"), (10, "only 9 questions"), (0, "at least 2")):
        with pytest.raises(ValueError, match=msg):
            topic_coverage(ids, qs, vectors, retrieved, urls, n_topics=n_topics)
    with pytest.raises(ValueError, match="distinct"):
        cluster_questions(np.ones((5, 3)), 2)
    with pytest.raises(ValueError, match="one of each"):
        topic_coverage(ids[:8], qs, vectors, retrieved, urls, n_topics=3)
    with pytest.raises(ValueError, match="not in chunk_urls"):
        coverage_by_topic([0, 1], [["a"], ["zz"]], {"a": None})
    with pytest.raises(ValueError, match="NaN"):
        cluster_questions(np.array([[1.0, np.nan], [0.0, 1.0]]), 2)


# ---------------------------------------------------------------------------------------------
# Domain


def test_knowledge_gaps_absolute_and_quantile():
    mask, info = knowledge_gaps([0.2, 0.5, 0.3, 0.9], gap_threshold=0.35)
    assert mask.tolist() == [True, False, True, False]
    assert {k: info[k] for k in ("threshold", "method", "quantile", "calibrated", "n", "n_gaps", "gap_share")} == \
        {"threshold": 0.35, "method": "absolute", "quantile": None, "calibrated": False, "n": 4, "n_gaps": 2,
         "gap_share": 0.5}
    assert "this embedding model only" in info["description"]
    values = np.arange(1, 11) / 10  # 0.1 … 1.0; the 10% quantile interpolates to 0.1 + 0.9 · 0.1 = 0.19
    mask, info = knowledge_gaps(values, gap_quantile=0.1)
    assert info["threshold"] == pytest.approx(0.19) and mask.tolist() == [True] + [False] * 9
    assert info["method"] == "quantile" and not info["calibrated"] and "uncalibrated" in info["description"]
    # calibrated on the served questions (0.5 … 1.0, 6 of them): 0.5 + 0.5 · 0.1 = 0.55 flags 0.1 … 0.5
    mask, info = knowledge_gaps(values, gap_quantile=0.1, served=values >= 0.5, min_served=6)
    assert (info["method"], info["n_reference"]) == ("calibrated", 6) and info["threshold"] == pytest.approx(0.55)
    assert mask.tolist() == [True] * 5 + [False] * 5
    _, info = knowledge_gaps(values, gap_quantile=0.1, served=values >= 0.5, min_served=7)  # too few served
    assert info["method"] == "quantile" and info["threshold"] == pytest.approx(0.19)
    mask, _ = knowledge_gaps([0.4, np.nan, 0.8], gap_threshold=0.1)
    assert mask.tolist() == [False, True, False]  # no retrieval at all is a gap
    for kwargs in ({"gap_quantile": 0.0}, {"gap_quantile": 1.0}, {"gap_threshold": 1.5}):
        with pytest.raises(ValueError, match="gap_"):
            knowledge_gaps([0.1, 0.2], **kwargs)


def test_scores_by_topic_counts_mean_and_low_share():
    table = scores_by_topic([0, 0, 0, 1, 1], [5, 1, None, 2, 2], n_boot=100)
    assert table.loc[0, ["n", "score_1", "score_5", "score_missing"]].tolist() == [3, 1, 1, 1]
    assert table.loc[0, "mean_score"] == pytest.approx(3.0) and table.loc[0, "low_score_share"] == pytest.approx(0.5)
    assert table.loc[1, "score_2"] == 2 and table.loc[1, "low_score_share"] == 1.0
    assert (table.loc[1, "ci95_low"], table.loc[1, "ci95_high"]) == (2.0, 2.0)
    with pytest.raises(ValueError, match="integer 1–5"):
        scores_by_topic([0, 1], [3, 6])


def test_page_hits_by_page_id():
    hits = page_hits([["a", "c"], ["c", "d"], ["a"], ["d"]],
                     ["https://w.example/p1", "http://w.example/p1/", None, "https://other.example/x"], URLS, k=1)
    # q0: a is on p1 → 1; q1: top-1 c is on p2 → 0; q2 no url; q3 page not in the corpus
    assert hits[:2].tolist() == [1.0, 0.0] and np.isnan(hits[2:]).all()


def test_domain_analysis_per_topic_scores_and_gaps():
    vectors, group, _, _ = _groups()
    scores = [5, 5, 1, None, 2, 4, 4, 3, 1]
    top1 = [0.9, 0.8, 0.2, 0.7, 0.6, 0.1, 0.9, 0.3, 0.5]
    hits = [1, 1, 0, np.nan, 1, 0, 1, np.nan, np.nan]
    per, s = domain_analysis([f"q{i}" for i in range(9)], [f"question {i}" for i in range(9)], vectors, scores, top1,
                             n_topics=3, hits=hits, gap_threshold=0.35, n_init=5, n_boot=100, max_listed=2)
    topics = {t["topic_id"]: t for t in s["topics"]}
    assert per["topic_id"].tolist() == group.tolist()
    assert topics[0]["score_counts"] == {"1": 1, "2": 0, "3": 0, "4": 0, "5": 2, "missing": 1}
    assert topics[0]["mean_score"]["mean"] == pytest.approx(11 / 3) and topics[0]["mean_score"]["n_failed"] == 1
    assert topics[0]["low_score_share"] == pytest.approx(1 / 3)
    assert topics[1]["score_counts"] == {"1": 0, "2": 1, "3": 0, "4": 2, "5": 0, "missing": 0}
    # low similarity (top-1 < 0.35): q2 (topic 0), q5 (topic 1), q7 (topic 2); low score (≤ 2): q2, q4 (topic 1),
    # q8 (topic 2); no log given, so no URL signals and no follow-ups
    assert per.loc[per["low_similarity"]].index.tolist() == ["q2", "q5", "q7"]
    assert per.loc[per["low_score"]].index.tolist() == ["q2", "q4", "q8"]
    assert not per["no_url"].any() and not per["url_not_in_corpus"].any()
    assert per.loc["q2", "signals"] == "low_score; low_similarity" and per.loc["q2", "n_signals"] == 2
    assert (topics[0]["gap_count"], topics[1]["gap_count"], topics[2]["gap_count"]) == (1, 2, 2)
    assert topics[0]["gap_share"] == pytest.approx(1 / 4) and topics[2]["gap_share"] == pytest.approx(2 / 2)
    assert topics[0]["page_hit_rate"] == pytest.approx(2 / 3) and topics[2]["n_page_labelled"] == 0
    # two signals first, then the lowest similarity; max_listed 2
    assert [g["question_id"] for g in s["knowledge_gaps"]] == ["q2", "q5"]
    assert s["gap"]["n_gaps"] == 3 and s["score_distribution"]["missing"] == 1
    sig = s["gap_signals"]
    assert (sig["low_score"]["n_flagged"], sig["low_score"]["n"]) == (3, 8)  # one question unscored
    assert (sig["no_url"]["n"], sig["any"]["n_flagged"], sig["any"]["n"]) == (0, 5, 9)
    assert s["mean_score"]["mean"] == pytest.approx(np.mean([5, 5, 1, 2, 4, 4, 3, 1]))
    assert s["low_score_share"] == pytest.approx(3 / 8)
    with pytest.raises(ValueError, match="at least 2"):
        domain_analysis(["a", "b"], ["x", "y"], vectors[:2], [1, 2], [0.1, 0.2], n_topics=1)
    with pytest.raises(ValueError, match="one of each"):
        domain_analysis(["a", "b"], ["x", "y"], vectors[:2], [1], [0.1, 0.2], n_topics=2)


# ---------------------------------------------------------------------------------------------
# Notebooks on the demo, one module-scoped run


STEMS = ["real_users", "utilization", "topic_coverage", "domain_analysis"]
RECORD_KEYS = {"real_users": "real_user_metrics", "utilization": "utilization_metrics",
               "topic_coverage": "topic_coverage_metrics", "domain_analysis": "domain_analysis_metrics"}
PARAMS = {
    "corpus": "demo", "n_boot": 50,
    "real_users": {"min_score": 4, "limit": 60, "top_k": 5},
    "utilization": {"max_questions": 80, "top_k": 3},
    "topic_coverage": {"source": "log", "max_questions": 80, "n_topics": 4, "top_k": 3, "n_init": 3},
    "domain_analysis": {"max_questions": 100, "n_topics": 4, "top_k": 3, "n_init": 3},
}


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory):
    import yaml

    from ragnb.runs.runner import run_notebooks

    out = tmp_path_factory.mktemp("analytics")
    params_file = out / "params.yaml"
    params_file.write_text(yaml.safe_dump(PARAMS), encoding="utf-8")
    result = run_notebooks(STEMS, {}, params_file=str(params_file), outputs=out, log=lambda *_: None)
    metrics = {s: json.loads((result.run_dir / f"{s}.metrics.json").read_text(encoding="utf-8")) for s in STEMS}
    per_item = {s: pd.read_csv(result.run_dir / f"{s}.per_item.csv", dtype={"item_id": str}) for s in STEMS}
    return result, metrics, per_item


@pytest.fixture(scope="module")
def demo_data(notebook_run):
    """Stored demo vectors read straight from the database, and a brute-force cosine top-k."""
    from ragnb.datasets import demo
    from ragnb.store.engine import connect
    from ragnb.store.questions import fetch_question_log
    from ragnb.store.vectors import fetch_vectors

    db = connect(database=demo.database_name("ru"))
    ids, urls, mat = fetch_vectors(db, "chunks")
    unit = mat / np.linalg.norm(mat, axis=1, keepdims=True)

    def topk(q: np.ndarray, k: int) -> tuple[list[list[str]], np.ndarray]:
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        sims = q.astype(np.float64) @ unit.T.astype(np.float64)
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        return [[ids[j] for j in row] for row in order], np.take_along_axis(sims, order, axis=1)

    return {"db": db, "ids": ids, "urls": dict(zip(ids, urls)), "topk": topk, "log": fetch_question_log}


@pytest.mark.slow
def test_notebooks_run_and_land_in_the_run_record(notebook_run):
    result, metrics, _ = notebook_run
    assert result.failures == []
    for stem in STEMS:
        for suffix in (".ipynb", ".html", ".metrics.json", ".per_item.csv"):
            assert (result.run_dir / f"{stem}{suffix}").is_file(), stem + suffix
        block = result.record.get(RECORD_KEYS[stem]) or (result.record.get("other_metrics") or {}).get(stem)
        assert block == metrics[stem], stem
    html = (result.run_dir / "real_users.html").read_text(encoding="utf-8")
    assert "SIMULATED (bundled demo log)" in html  # the demo's own rows say so (ragnb.datasets.demo.simulated_scores)
    assert "The bundled demo question log has simulated user scores and about 8% of rows without a URL" in html
    domain = (result.run_dir / "domain_analysis.html").read_text(encoding="utf-8")
    assert "The bundled demo log's user scores are simulated" in html_lib.unescape(domain)
    assert "ragnb/demo.py" not in html + domain  # no such file: the note names ragnb/datasets/demo.py


@pytest.mark.slow
def test_real_users_notebook_matches_pytrec_eval(notebook_run, demo_data):
    import pytrec_eval

    _, metrics, _ = notebook_run
    m = metrics["real_users"]
    log, vecs = demo_data["log"](demo_data["db"], min_score=4, limit=60, with_vectors=True)
    ranked, _ = demo_data["topk"](vecs, 5)
    # The demo's URLs are all in one form, so plain string equality is an independent page match here.
    by_url: dict[str, list[str]] = {}
    for c, u in demo_data["urls"].items():
        by_url.setdefault(u, []).append(c)
    qrels = {q: {c: 1 for c in by_url[u]} for q, u in zip(log.index, log["url"]) if isinstance(u, str)}
    run = {q: {c: float(10 - r) for r, c in enumerate(ids)} for q, ids in zip(log.index, ranked) if q in qrels}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success.1", "ndcg_cut.5"}).evaluate(run)
    assert m["hit_rate@1"]["mean"] == pytest.approx(np.mean([v["success_1"] for v in ev.values()]), abs=1e-12)
    assert m["mrr"]["mean"] == pytest.approx(np.mean([v["recip_rank"] for v in ev.values()]), abs=1e-12)
    assert m["ndcg@5"]["mean"] == pytest.approx(np.mean([v["ndcg_cut_5"] for v in ev.values()]), abs=1e-12)
    page_rr = []
    for q in qrels:
        pages = list(dict.fromkeys(demo_data["urls"][c] for c in ranked[list(log.index).index(q)]))
        url = log.loc[q, "url"]  # every question in qrels has one
        page_rr.append(1 / (pages.index(url) + 1) if url in pages else 0.0)
    assert m["doc_mrr"]["mean"] == pytest.approx(np.mean(page_rr), abs=1e-12)
    n_no_url = int(log["url"].isna().sum())
    assert n_no_url > 0  # the simulated log has rows without a URL
    assert m["questions"] == {"selected": 60, "evaluated": 60 - n_no_url, "no_url": n_no_url, "unmatched_url": 0}
    assert m["no_url_share"]["mean"] == pytest.approx(n_no_url / 60) and m["no_url_share"]["n"] == 60
    assert m["hit_rate@1"]["n"] == 60 - n_no_url
    counts = Counter(int(s) for s in log["score"])
    assert m["score_distribution"] == {**{str(k): counts.get(k, 0) for k in range(1, 6)}, "missing": 0}
    assert counts.get(1, 0) == counts.get(2, 0) == counts.get(3, 0) == 0  # min_score = 4 applied
    assert m["scores_simulated"] is True


@pytest.mark.slow
def test_utilization_notebook_matches_brute_force(notebook_run, demo_data, encoder):
    from ragnb.datasets import demo

    _, metrics, per_item = notebook_run
    m = metrics["utilization"]
    questions = [it.question for it in demo.dataset("ru").items[:80]]
    ranked, _ = demo_data["topk"](encoder.encode(questions), 3)
    counts = Counter(c for r in ranked for c in r)
    all_counts = [counts.get(c, 0) for c in demo_data["ids"]]
    assert m["total_chunks"] == len(demo_data["ids"]) == 120
    assert m["used_chunks"] == len(counts) and m["unused_chunks"] == 120 - len(counts)
    assert m["utilization_rate"] == pytest.approx(len(counts) / 120)
    assert m["gini"] == pytest.approx(_gini_pairs(all_counts))
    assert m["n_queries"] == 80 and m["source"] == "dataset"
    table = per_item["utilization"].set_index("item_id")["retrieval_count"].to_dict()
    assert table == dict(zip(demo_data["ids"], all_counts))


@pytest.mark.slow
def test_topic_coverage_notebook_matches_kmeans_and_pooled_retrievals(notebook_run, demo_data):
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    _, metrics, per_item = notebook_run
    m = metrics["topic_coverage"]
    log, vecs = demo_data["log"](demo_data["db"], limit=80, with_vectors=True)
    unit = vecs.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    # every demo question is Russian (Cyrillic), so language centring subtracts the mean of all of them
    assert all(any("а" <= ch <= "я" for ch in q.lower()) for q in log["question"])
    centred = unit - unit.mean(axis=0)
    centred /= np.linalg.norm(centred, axis=1, keepdims=True)
    # n_topics 4 is an upper bound: 2, 3 and 4 topics are tried, and the fewest within SILHOUETTE_TIE of the best
    # silhouette kept (scikit-learn's KMeans and silhouette_score computed here)
    from sklearn.metrics import silhouette_score

    from ragnb.analysis.topics import SILHOUETTE_TIE

    refs = {k: KMeans(n_clusters=k, random_state=0, n_init=3).fit_predict(centred) for k in (2, 3, 4)}
    sil = {k: silhouette_score(centred, lab, metric="cosine") for k, lab in refs.items()}
    sel = m["topic_selection"]
    assert {int(k): v for k, v in sel["tried"].items()} == pytest.approx(sil, abs=1e-9)
    n = sel["chosen"]
    assert n == min(k for k, v in sil.items() if v >= max(sil.values()) - SILHOUETTE_TIE) == m["n_topics"]
    table = per_item["topic_coverage"].set_index("item_id").loc[list(log.index)]
    assert adjusted_rand_score(refs[n], table["topic_id"]) == pytest.approx(1.0)
    ranked, _ = demo_data["topk"](vecs, 3)
    expected = []
    for t in range(n):
        members = [i for i, lab in enumerate(table["topic_id"]) if lab == t]
        chunks = {c for i in members for c in ranked[i]}
        expected.append((len(members), len(chunks), len({demo_data["urls"][c] for c in chunks})))
    got = [(e["question_count"], e["unique_chunks"], e["unique_urls"]) for e in m["topic_coverage"]]
    assert got == expected
    assert [e["topic_id"] for e in m["topic_coverage"]] == list(range(n))
    assert m["total_questions"] == 80
    # the demo log cites pages: they name the topics and check them (NMI as scikit-learn computes it)
    from sklearn.metrics import normalized_mutual_info_score

    from ragnb.tiers.real_users import page_of

    cited = [(page_of(u), t) for u, t in zip(log["url"], table["topic_id"]) if page_of(u) is not None]
    agreement = m["page_agreement"]
    assert agreement["n_valid"] == len(cited) and agreement["n_failed"] == 80 - len(cited)
    assert agreement["nmi"]["value"] == pytest.approx(normalized_mutual_info_score(*zip(*cited)), abs=1e-12)
    assert all(e["top_pages"] for e in m["topic_coverage"])
    assert m["avg_chunks_per_topic"] == pytest.approx(np.mean([e[1] for e in expected]))
    assert sorted(e[0] for e in expected)[::-1] == [e[0] for e in expected]  # topic 0 = largest


@pytest.mark.slow
def test_domain_analysis_notebook_matches_independent_gaps_and_scores(notebook_run, demo_data):
    _, metrics, per_item = notebook_run
    m = metrics["domain_analysis"]
    log, vecs = demo_data["log"](demo_data["db"], limit=100, with_vectors=True)
    ranked, sims = demo_data["topk"](vecs, 3)
    top1 = sims[:, 0]
    urls = log["url"].tolist()
    # served: the logged page (demo URLs are in one form) among the top-3 chunks' pages, score not ≤ 2
    served = np.array([isinstance(u, str) and u in {demo_data["urls"][c] for c in r} and s > 2
                       for u, r, s in zip(urls, ranked, log["score"])])
    threshold = np.quantile(top1[served], 0.1)
    assert m["gap"]["method"] == "calibrated" and m["gap"]["n_reference"] == int(served.sum())
    assert m["gap"]["threshold"] == pytest.approx(threshold, abs=1e-6)
    table = per_item["domain_analysis"].set_index("item_id").loc[list(log.index)]
    low_sim = table["low_similarity"].astype(bool).to_numpy()
    # ragnb's similarities and this float64 brute force may round a question within float noise of the cut to either
    # side (and another processor's embedding may put one there): compare only the questions clear of it.
    clear = np.abs(top1 - threshold) > 1e-4
    assert clear.sum() >= len(top1) - 2
    assert (low_sim[clear] == (top1 < threshold)[clear]).all()
    assert m["gap"]["n_gaps"] == int(low_sim.sum())
    pages = set(demo_data["urls"].values())
    no_url = np.array([not isinstance(u, str) for u in urls])
    unmatched = np.array([isinstance(u, str) and u not in pages for u in urls])
    low = (log["score"] <= 2).to_numpy()
    assert table["no_url"].tolist() == no_url.tolist() and table["low_score"].tolist() == low.tolist()
    assert not table["follow_up"].any()  # the demo log has no sessions
    assert table["is_gap"].tolist() == (low | no_url | unmatched | low_sim).tolist()
    assert m["gap_signals"]["no_url"] == {**m["gap_signals"]["no_url"], "n_flagged": int(no_url.sum()), "n": 100}
    counts = Counter(int(s) for s in log["score"])
    assert m["score_distribution"] == {**{str(k): counts.get(k, 0) for k in range(1, 6)}, "missing": 0}
    for entry in m["topics"]:
        members = table["topic_id"] == entry["topic_id"]
        scores = log["score"][members.to_numpy()].astype(int)
        assert entry["question_count"] == int(members.sum())
        assert entry["score_counts"] == {**{str(k): int((scores == k).sum()) for k in range(1, 6)}, "missing": 0}
        assert entry["mean_score"]["mean"] == pytest.approx(scores.mean())
        assert entry["low_score_share"] == pytest.approx((scores <= 2).mean())
        assert entry["gap_share"] == pytest.approx(table.loc[members, "is_gap"].mean())
    assert m["scores_simulated"] is True and m["total_questions"] == 100
