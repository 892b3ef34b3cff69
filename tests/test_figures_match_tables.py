"""Every figure equals its table: a chart and a table of the same metric read the same computation.

Realistic data: the bilingual team wiki of ``team_wiki`` (Russian and English pages, front matter, URL template)
loaded into the real embedded database, and its question log of real page URLs — extended with more questions,
two of them without a URL and one citing a page the wiki does not have. Tier 1 and Real users run on it; each
figure function that plots a metric a table also shows is checked number by number against that table, and
every other figure function of the report modules says why it has none (so a new figure cannot slip by)."""

from __future__ import annotations

import importlib
import inspect
import json
import re

import numpy as np
import pandas as pd
import pytest

import team_wiki
from ragnb.analysis import source_charts
from ragnb.reports import charts
from ragnb.tiers import judging

FIGURE_MODULES = ("ragnb.reports.charts", "ragnb.tiers.ux_figures", "ragnb.tiers.judging.figures",
                  "ragnb.analysis.source_charts", "ragnb.analysis.chunking", "ragnb.analysis.vector_space")

# figure → the test (below, or in the file named) that asserts its data equals the table showing the same numbers
CHECKED = {
    "ragnb.reports.charts.hit_rate_curve": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.reports.charts.metric_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.question_status": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.score_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.lorenz_curve": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.count_histogram": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.unused_by_page_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.topic_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.topic_scatter": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.scores_by_topic_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.analysis.source_charts.mean_score_bars": "test_tier1_and_real_users_figures_equal_their_tables",
    "ragnb.tiers.judging.figures.confusion_figure": "test_judge_figures_equal_the_pipeline_table",
    "ragnb.tiers.judging.figures.roc_figure": "test_judge_figures_equal_the_pipeline_table",
    "ragnb.tiers.ux_figures.tau_curve_chart":
        "tests/test_ux.py::test_hits_are_checked_against_the_cited_pages_and_tau_is_calibrated",
}
# figure → why it plots no metric that a table shows (distributions of per-item values, build timings…)
NO_TABLE_METRIC = {
    "ragnb.reports.charts.histogram": "a distribution of per-item values; tables show their aggregates",
    "ragnb.reports.charts.explained_variance": "the cumulative variance curve of Tier 0; no table lists it by "
                                               "component",
    "ragnb.reports.charts.score_distribution": "top-1 similarities per question, split by whether the first hit "
                                              "is relevant; no aggregate",
    "ragnb.tiers.ux_figures.similarity_chart": "per-turn similarities of each session; no aggregate",
    "ragnb.tiers.ux_figures.similarity_by_flag_chart": "per-turn similarities by flag; no aggregate",
    "ragnb.tiers.ux_figures.break_signal_chart": "per-pair break-signal similarities by the cited-page oracle; "
                                                 "no aggregate",
    "ragnb.tiers.ux_figures.cache_similarity_histogram": "the distribution of nearest-question similarities "
                                                         "beside τ; no aggregate",
    "ragnb.tiers.judging.figures.score_by_label_figure": "judge scores per item, by human label; no aggregate",
    "ragnb.tiers.judging.figures.consistency_figure": "first vs second score per item; no aggregate",
    "ragnb.analysis.source_charts.topic_map": "questions on two principal components; no aggregate",
    "ragnb.analysis.source_charts.similarity_histogram": "top-1 similarity per question beside the gap "
                                                         "threshold; no aggregate",
    "ragnb.analysis.chunking.build_time_figure": "plots the chunking table's own timing columns as given",
    "ragnb.analysis.chunking.size_figure": "plots the chunking table's own size columns as given",
    "ragnb.analysis.chunking.tradeoff_figure": "plots the chunking table's metric and CI columns as given "
                                              "(the table is its only input)",
    "ragnb.analysis.chunking.metrics_figure": "plots the chunking table's metric and CI columns as given "
                                             "(the table is its only input)",
    "ragnb.analysis.vector_space.scatter": "a UMAP projection of the vectors; no aggregate",
}
_PLOTS = re.compile(r"\b(go\.(Figure|Scatter|Bar|Heatmap|Histogram|Box)|px\.\w+|make_subplots)\(")


def figure_functions() -> set[str]:
    out = set()
    for name in FIGURE_MODULES:
        module = importlib.import_module(name)
        for attr, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == name and not attr.startswith("_") and _PLOTS.search(inspect.getsource(fn)):
                out.add(f"{name}.{attr}")
    return out


def test_every_figure_function_is_checked_or_says_why():
    found = figure_functions()
    assert not set(CHECKED) & set(NO_TABLE_METRIC)
    assert found - set(CHECKED) - set(NO_TABLE_METRIC) == set(), "a new figure: check it against its table here"
    assert set(CHECKED) | set(NO_TABLE_METRIC) <= found, "a figure listed here no longer exists"
    assert "ragnb.reports.charts.hit_rate_curve" in found and len(found) >= 25


# ----------------------------------------------------------------------------------------- the team's data

# More of the team's log: Russian and English, one more question without a URL, low scores on real pages.
MORE_LOG = [
    {"id": "w7", "question": "Кто одобряет заявку на VPN?", "url": "https://wiki.example.com/display/OPS/VPN",
     "score": 4},
    {"id": "w8", "question": "How many paid vacation days per year?", "url": "https://wiki.example.com/ru/hr/отпуск",
     "score": 3},
    {"id": "w9", "question": "What approval does a production deploy need?",
     "url": "https://wiki.example.com/en/dev/deploy", "score": 5},
    {"id": "w10", "question": "Which image tag do I roll back to?", "url": "https://wiki.example.com/en/dev/rollback",
     "score": 4},
    {"id": "w11", "question": "Где расписание корпоративного автобуса?", "url": None, "score": 2},
    {"id": "w12", "question": "How do I get remote access?", "url": "https://wiki.example.com/display/OPS/VPN",
     "score": 2},
]
LOG = team_wiki.WIKI_LOG + MORE_LOG
TOP_K = 5


@pytest.fixture
def wiki(fresh_db, encoder, tmp_path):
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    load_file(fresh_db, "chunks", team_wiki.write_bilingual_wiki(tmp_path / "wiki"),
              chunk_size=team_wiki.WIKI_CHUNK_SIZE, overlap=0, url_template=team_wiki.TEMPLATE)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in LOG), encoding="utf-8")
    load_file(fresh_db, "questions", log)
    embed_table(fresh_db, "chunks", encoder, progress=False)
    embed_table(fresh_db, "questions", encoder, progress=False)
    return fresh_db


def bars(fig, name=None):
    trace = next(t for t in fig.data if name is None or t.name == name)
    return list(trace.x), [float(v) for v in trace.y]


def check_metric_bars(summary: dict, names: list[str]) -> None:
    fig = charts.metric_bars(summary, names, "t")
    x, y = bars(fig)
    assert x == names and y == [summary[n]["mean"] for n in names]
    err = fig.data[0].error_y
    assert list(err.array) == pytest.approx([summary[n]["ci95"][1] - summary[n]["mean"] for n in names])
    assert list(err.arrayminus) == pytest.approx([summary[n]["mean"] - summary[n]["ci95"][0] for n in names])


def check_hit_rate_curve(result, names: dict[str, str]) -> None:
    """The curve's points at every cut-off the table has are the table's means, over the same questions."""
    fig = charts.hit_rate_curve(result.hit_rates)
    for trace_name, base in names.items():
        x, y = bars(fig, trace_name)
        assert x == list(range(1, TOP_K + 1))
        cutoffs = [k for k in x if f"{base}@{k}" in result.summary]
        assert len(cutoffs) >= 2
        for k in cutoffs:
            assert y[k - 1] == result.summary[f"{base}@{k}"]["mean"], (base, k)
    n_valid = result.summary["hit_rate@1"]["n_valid"]
    assert fig.layout.title.text == f"Hit rate @k (n = {n_valid} questions with a ground truth)"


def test_tier1_and_real_users_figures_equal_their_tables(wiki, encoder):
    from ragnb.analysis.domain import scores_by_topic
    from ragnb.analysis.topics import topic_coverage, topics_frame
    from ragnb.analysis.utilization import chunk_utilization, count_distribution, gini, unused_by_page
    from ragnb.datasets.corpus import Corpus
    from ragnb.datasets.real_questions import generate_from_real_questions
    from ragnb.rag.retrieval import MemoryRetriever
    from ragnb.store.questions import fetch_question_log
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space, fetch_vectors
    from ragnb.tiers.real_users import by_score_table, run_real_users
    from ragnb.tiers.tier1 import run_tier1

    ids, urls, vectors = fetch_vectors(wiki, "chunks")
    retriever = MemoryRetriever(ids, vectors, urls)
    chunk_urls = dict(zip(ids, urls))

    # Tier 1 on the dataset built from the log: w5 (a page the wiki lacks), w6 and w11 (no URL) have no
    # relevant chunk, so their hit rate is undefined — the table leaves them out, and so must the chart.
    corpus = Corpus(wiki, encoder, "database", check_space(wiki, tables(wiki.schema).chunk, encoder))
    dataset = generate_from_real_questions(corpus, top_k=TOP_K).dataset
    t1 = run_tier1(dataset, encoder, retriever, top_k=TOP_K, chunk_urls=chunk_urls, latency_sample=0,
                   hnsw_check=False, n_boot=200)
    with_truth = [it.id for it in dataset.items if it.relevant_chunk_ids]
    assert len(dataset.items) == 12 and len(with_truth) == 9
    assert t1.summary["hit_rate@1"]["n_valid"] == 9 and t1.summary["hit_rate@1"]["n"] == 12
    check_hit_rate_curve(t1, {"chunk": "hit_rate", "document": "doc_hit_rate"})
    # by hand, from the rank of each question's first relevant chunk, over the questions with a ground truth
    ranks = t1.per_item.loc[with_truth, "first_relevant_rank"]
    curve = t1.hit_rates.set_index("k")["hit_rate"]
    for k in range(1, TOP_K + 1):
        assert curve[k] == pytest.approx((ranks <= k).sum() / 9)
        hits_all = (t1.per_item["first_relevant_rank"] <= k).sum()
        assert curve[k] != pytest.approx(hits_all / 12) or hits_all == 0  # the old reading: misses for no URL
    check_metric_bars(t1.summary, ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@5"])
    check_metric_bars(t1.summary, ["doc_hit_rate@1", "doc_hit_rate@5", "doc_mrr"])

    # Real users on the log itself: same rule, and the status and score charts equal the counts tables.
    log, qvec = fetch_question_log(wiki, with_vectors=True)
    ru = run_real_users(log, qvec, retriever, chunk_urls, top_k=TOP_K, n_boot=200)
    q = ru.summary["questions"]
    assert (q["selected"], q["evaluated"], q["no_url"], q["unmatched_url"]) == (12, 9, 2, 1)
    check_hit_rate_curve(ru, {"chunk": "hit_rate", "document": "doc_hit_rate"})
    assert ru.hit_rates["n_valid"].iloc[0] == ru.summary["doc_hit_rate@1"]["n_valid"] == 9
    check_metric_bars(ru.summary, ["doc_hit_rate@1", "doc_hit_rate@3", "doc_hit_rate@5", "doc_mrr"])
    _, y = bars(source_charts.question_status(q))
    assert y == [9, 2, 1]
    x, y = bars(source_charts.score_bars(ru.summary["score_distribution"]))
    table = by_score_table(ru.summary["metrics_by_score"]).set_index("score")
    assert x == ["1", "2", "3", "4", "5", "missing"]
    assert y[:5] == [float(table.loc[s, "questions"]) for s in (1, 2, 3, 4, 5)] and "missing" not in table.index
    assert y == [2, 2, 2, 3, 3, 0]  # by hand from LOG: every question has a score

    # Chunk utilization: the Lorenz curve's area is the table's Gini; the count bars are the table's counts.
    retrieved = retriever.search(qvec, TOP_K).ids
    per_chunk, util = chunk_utilization(ids, retrieved, chunk_urls, top_k=TOP_K)
    lx, ly = bars(source_charts.lorenz_curve(per_chunk["retrieval_count"], util["gini"]))
    area = sum((lx[i] - lx[i - 1]) * (ly[i] + ly[i - 1]) / 2 for i in range(1, len(lx)))
    assert 1 - 2 * area == pytest.approx(util["gini"]) == pytest.approx(gini(per_chunk["retrieval_count"]))
    x, y = bars(source_charts.count_histogram(count_distribution(per_chunk)))
    assert dict(zip(x, y)).get(0, 0) == util["unused_chunks"] and sum(y) == util["total_chunks"] == len(ids)
    pages = unused_by_page(per_chunk)
    fig = source_charts.unused_by_page_bars(pages)
    _, used = bars(fig, "retrieved at least once")
    _, unused = bars(fig, "never retrieved")
    assert [u + n for u, n in zip(used, unused)] == pages["chunks"].tolist()
    assert sum(unused) == util["unused_chunks"]

    # Topics and scores by topic: the bars are the topic tables' columns.
    per_q, topics = topic_coverage(list(log.index), log["question"].tolist(), qvec, retrieved, chunk_urls,
                                   n_topics=3)
    frame = topics_frame(topics)
    fig = source_charts.topic_bars(frame)
    for trace, col in zip(fig.data, ("question_count", "unique_chunks", "unique_urls")):
        assert [float(v) for v in trace.y] == frame[col].tolist()
    assert sum(frame["question_count"]) == 12
    sc = source_charts.topic_scatter(frame)
    points = {int(t): (x, y) for tr in sc.data for t, x, y in zip(tr.text, tr.x, tr.y)}
    assert points == {t: (r["question_count"], r["unique_chunks"]) for t, r in frame.iterrows()}
    by_topic = scores_by_topic(per_q["topic_id"].to_numpy(), log["score"].tolist(), n_boot=200)
    fig = source_charts.scores_by_topic_bars(by_topic)
    stacked = np.sum([np.asarray(t.y, dtype=float) for t in fig.data], axis=0)
    assert stacked.tolist() == by_topic["n"].tolist()
    fig = source_charts.mean_score_bars(by_topic)
    assert [float(v) for v in fig.data[0].y] == by_topic["mean_score"].tolist()
    assert list(fig.data[0].error_y.array) == pytest.approx((by_topic["ci95_high"] - by_topic["mean_score"]).tolist())


def test_judge_figures_equal_the_pipeline_table():
    """The offline baseline judge on 80 BEGIN items (human labels): the confusion heatmap, and the ROC curve's AUC
    and its point at the show threshold, are the pipeline table's numbers."""
    ds = judging.open_judge_dataset("", 80)
    res = judging.run_tier_judge_pipeline(ds, "baseline", n_boot=200)
    s = res.summary
    table = judging.pipeline_table(s).set_index("metric")["value"]
    z = judging.confusion_figure(s).data[0].z
    assert [list(r) for r in z] == [[table["tp"], table["fn"]], [table["fp"], table["tn"]]]
    assert sum(map(sum, z)) == table["n_valid"]
    per = res.per_item
    threshold = s["info"]["show_threshold"]
    fig = judging.roc_figure({"faithfulness": (per["ground_truth_show"], per["score"])}, threshold=threshold)
    curve = next(t for t in fig.data if t.name.startswith("faithfulness (AUC"))
    assert curve.name == f"faithfulness (AUC {table['roc_auc']:.3f})"
    point = next(t for t in fig.data if t.name == f"faithfulness at {threshold:g}")
    assert point.y[0] == pytest.approx(table["recall"])  # TPR at the threshold
    assert point.x[0] == pytest.approx(table["fp"] / (table["fp"] + table["tn"]))  # FPR at the threshold
    assert pd.notna(table["roc_auc"])
