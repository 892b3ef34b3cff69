"""Chunking comparison: grid validation, character offsets, the relevance rule, the embedding cache, table and
index sizes, and the notebook end to end with its numbers recomputed independently."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragnb.analysis import chunk_build as cb
from ragnb.analysis import chunk_corpus as cc
from ragnb.analysis import chunking as ch
from ragnb.store.loaders import chunk_text


class CountingEncoder:
    """The real encoder, counting the texts it is asked to encode (the cache must spare it)."""

    def __init__(self, encoder):
        self.inner = encoder
        self.name, self.dim, self.max_seq_length = encoder.name, encoder.dim, encoder.max_seq_length
        self.encoded = 0

    def encode(self, texts, batch_size: int = 32, progress: bool = False):
        self.encoded += len(texts)
        return self.inner.encode(texts, batch_size=batch_size)

    def encode_uncached(self, texts, batch_size: int = 32, progress: bool = False):
        self.encoded += len(texts)
        return self.inner.encode_uncached(texts, batch_size=batch_size)

    def token_counts(self, texts):
        return self.inner.token_counts(texts)


# --------------------------------------------------------------------------------------------
# Grid
# --------------------------------------------------------------------------------------------


def test_grid_is_all_pairs_sorted():
    grid = ch.parse_grid("200, 100", "40,0")
    assert [c.name for c in grid] == ["s100_o0", "s100_o40", "s200_o0", "s200_o40"]
    assert grid[3].table == "chunking_s200_o40"


@pytest.mark.parametrize("sizes, overlaps, match", [
    ("50,200", "0,100", r"size 50 / overlap 100"),
    ("100", "100", r"size 100 / overlap 100"),
    ("100,abc", "0", r"chunk_sizes: 'abc'"),
    ("0", "0", r"chunk_sizes: '0' is not a whole number ≥ 1"),
    ("100", "-5", r"overlaps: '-5'"),
    ("", "0", r"chunk_sizes = ''"),
    ("100", " ", r"overlaps = ' '"),
])
def test_grid_errors_name_the_problem(sizes, overlaps, match):
    with pytest.raises(ValueError, match=match):
        ch.parse_grid(sizes, overlaps)


# --------------------------------------------------------------------------------------------
# Offsets and the relevance rule on a hand-made article
# --------------------------------------------------------------------------------------------

P1 = "Alpha beta gamma delta epsilon"
P2 = "Zeta eta theta iota kappa"


def hand_article() -> cc.Article:
    return cc.build_article("https://w.org/greek", [("p1", P1), ("p2", P2)])


def test_article_offsets():
    art = hand_article()
    assert art.text == P1 + "\n\n" + P2
    assert [(p.id, p.start, p.end) for p in art.paragraphs] == [("p1", 0, 30), ("p2", 32, 57)]
    assert art.text[32:57] == P2


def test_chunks_have_the_spans_of_their_words():
    chunks = cc.chunk_article(hand_article(), cc.ChunkConfig(4, 1), "t-")
    # size 4, overlap 1 → windows of words [0:4], [3:7], [6:10]
    assert [c.text for c in chunks] == ["Alpha beta gamma delta", "delta epsilon Zeta eta", "eta theta iota kappa"]
    assert [c.text for c in chunks] == chunk_text(hand_article().text, 4, 1)
    # Alpha 0–5 … delta 17–22, epsilon 23–30, "\n\n", Zeta 32–36, eta 37–40 … kappa 52–57
    assert [(c.start, c.end) for c in chunks] == [(0, 22), (17, 40), (37, 57)]
    assert [c.id for c in chunks] == ["t-c0000", "t-c0001", "t-c0002"]


@pytest.mark.parametrize("answer, gold, expected", [
    ("eta theta", "p2", ["t-c0002"]),  # only the last chunk holds the answer
    ("ETA", "p2", ["t-c0001", "t-c0002"]),  # case-folded; both chunks overlapping p2 contain "eta"
    ("Zeta  eta", "p2", ["t-c0001"]),  # spacing collapsed
    ("epsilon", "p2", ["t-c0001"]),  # the rule: overlaps p2 and contains the answer (which sits in p1)
    ("Alpha", "p2", []),  # the chunk with the answer does not overlap p2
    ("gamma delta", "p1", ["t-c0000"]),
    ("delta", "p1", ["t-c0000", "t-c0001"]),
    ("", "p1", ["t-c0000", "t-c0001"]),  # no answer: span overlap alone
])
def test_relevance_rule(answer, gold, expected):
    art = hand_article()
    chunks = cc.chunk_article(art, cc.ChunkConfig(4, 1), "t-")
    span = next(p for p in art.paragraphs if p.id == gold)
    assert cc.relevant_chunk_ids(chunks, art.url, span.start, span.end, answer) == expected
    assert cc.relevant_chunk_ids(chunks, "https://other.org", span.start, span.end, answer) == []


def test_qrels_mark_questions_without_a_relevant_chunk():
    from ragnb.datasets.schema import DatasetItem

    art = hand_article()
    chunks = cc.chunk_article(art, cc.ChunkConfig(4, 1), "t-")
    items = [DatasetItem(id="q1", question="?", ground_truth_answer="eta theta", chunk_id="p2"),
             DatasetItem(id="q2", question="?", ground_truth_answer="Alpha", chunk_id="p2"),
             DatasetItem(id="q3", question="?", ground_truth_answer="x", chunk_id="elsewhere")]
    questions, unmapped = cc.gold_questions(items, [art])
    assert [q.id for q in questions] == ["q1", "q2"] and unmapped == ["q3"]
    assert cc.qrels_for(chunks, questions) == {"q1": {"t-c0002": 1}, "q2": {cc.NO_RELEVANT: 1}}


def test_grouping_orders_paragraphs_naturally():
    rows = [{"id": "d10", "url": "u", "text": "ten"}, {"id": "d2", "url": "u", "text": "two"},
            {"id": "x", "url": None, "text": "alone"}, {"id": "e", "url": "u", "text": "  "}]
    arts = cc.group_articles(rows)
    assert [(a.url, a.text) for a in arts] == [("(no url: x)", "alone"), ("u", "two\n\nten")]
    assert ch.select_articles(arts, 1) == arts[:1] and ch.select_articles(arts, 0) == arts
    with pytest.raises(ValueError, match="max_articles"):
        ch.select_articles(arts, -1)


def test_demo_articles_keep_every_paragraph_at_its_offsets():
    from ragnb.datasets import demo

    rows = {r["id"]: r for r in demo.chunk_rows("ru")}
    arts = ch.demo_articles("ru")
    assert len(arts) == 24 and sum(len(a.paragraphs) for a in arts) == 120
    for art in arts:
        for p in art.paragraphs:
            assert art.text[p.start:p.end] == rows[p.id]["text"] and rows[p.id]["url"] == art.url


def test_db_articles_group_the_chunk_table(fresh_db):
    from ragnb.store.loaders import insert_rows

    insert_rows(fresh_db, "chunks", [{"id": "b1", "url": "https://s/x", "text": "one"},
                                     {"id": "b0", "url": "https://s/x", "text": "zero"},
                                     {"id": "c", "url": "https://s/y", "text": "why"}])
    arts = ch.db_articles(fresh_db)
    assert [(a.url, a.text, [p.id for p in a.paragraphs]) for a in arts] == [
        ("https://s/x", "zero\n\none", ["b0", "b1"]), ("https://s/y", "why", ["c"])]


# --------------------------------------------------------------------------------------------
# Embedding cache, build, sizes
# --------------------------------------------------------------------------------------------


def test_cache_encodes_each_text_once_per_model(encoder):
    counting = CountingEncoder(encoder)
    texts = ["первый текст", "second text", "первый текст", "third"]
    vecs, rep = cb.embed_with_cache(counting, texts)
    assert (rep.n_texts, rep.n_unique, rep.n_encoded, rep.n_from_cache, counting.encoded) == (4, 3, 3, 0, 3)
    assert rep.timing == "measured" and rep.seconds_recorded == 0
    np.testing.assert_allclose(vecs, encoder.encode(texts), atol=1e-6)
    again, rep2 = cb.embed_with_cache(counting, texts + ["fourth"])
    assert (rep2.n_encoded, rep2.n_from_cache, counting.encoded) == (1, 3, 4)
    assert rep2.timing == "mixed" and rep2.seconds_recorded == pytest.approx(rep.seconds_measured)
    np.testing.assert_array_equal(again[:4], vecs)


def test_second_build_encodes_nothing_and_sizes_add_up(fresh_db, encoder):
    counting = CountingEncoder(encoder)
    articles = ch.demo_articles("en")[:1]
    words = len(articles[0].text.split())
    small, large = cc.ChunkConfig(60, 0), cc.ChunkConfig(60, 30)
    first = cb.build_config(fresh_db, counting, articles, large)
    n_large = len(first.chunks)
    assert n_large == len(chunk_text(articles[0].text, 60, 30)) == -(-(words - 30) // 30)
    assert counting.encoded == n_large and first.timings["embedding_timing"] == "measured"
    again = cb.build_config(fresh_db, counting, articles, large)
    assert counting.encoded == n_large  # nothing encoded the second time
    assert again.timings["n_encoded"] == 0 and again.timings["n_from_cache"] == n_large
    assert again.timings["embedding_timing"] == "cache" and again.timings["embedding_s_measured"] == 0
    np.testing.assert_array_equal(again.vectors, first.vectors)

    other = cb.build_config(fresh_db, counting, articles, small)
    assert len(other.chunks) < n_large
    for b in (again, other):
        size = b.size
        assert size["rows"] == len(b.chunks)
        assert size["table_bytes"] > 0 and size["hnsw_bytes"] > 0 and size["index_bytes"] > size["hnsw_bytes"]
        assert size["total_bytes"] == size["table_bytes"] + size["index_bytes"]
        assert size["bytes_per_chunk"] == pytest.approx(size["total_bytes"] / len(b.chunks))
    assert again.size["total_bytes"] > other.size["total_bytes"]  # more chunks → bigger
    tokens = encoder.token_counts([c.text for c in other.chunks])
    assert other.truncation["share_truncated"] == pytest.approx(np.mean(tokens > encoder.max_seq_length))
    cb.drop_tables(fresh_db, [small, large], cache=True)


# --------------------------------------------------------------------------------------------
# Notebook end to end
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_numbers_and_a_second_run_from_cache(tmp_path, encoder):
    from ragnb.datasets import demo
    from ragnb.runs.runner import run_notebooks
    from ragnb.store.engine import connect

    params = {"corpus": "demo", "language": "ru", "max_articles": 2, "chunk_sizes": "40,80", "overlaps": "0,20",
              "n_boot": 50}
    first = run_notebooks(["chunking"], params, outputs=tmp_path / "a", log=lambda *_: None)
    assert first.failures == [], first.reports
    m = json.loads((first.run_dir / "chunking.metrics.json").read_text(encoding="utf-8"))
    assert first.record["other_metrics"]["chunking"]["n_articles"] == 2

    # independent rebuild of the corpus: the first two articles by URL, paragraphs in id order
    rows = sorted(demo.chunk_rows("ru"), key=lambda r: (r["url"], r["id"]))
    urls = sorted({r["url"] for r in rows})[:2]
    texts = {u: "\n\n".join(r["text"] for r in rows if r["url"] == u) for u in urls}
    paragraphs = {r["id"]: r for r in rows if r["url"] in urls}
    items = [it for it in demo.dataset("ru").items if it.chunk_id in paragraphs]
    assert m["n_questions"] == len(items)
    assert m["n_questions_unmapped"] == len(demo.dataset("ru").items) - len(items)

    db = connect(database=ch.WORKSPACE_DATABASE)
    Q = encoder.encode([it.question for it in items])
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    for name, cfg in m["configs"].items():
        size, overlap = cfg["chunk_size"], cfg["overlap"]
        assert cfg["n_chunks"] == sum(len(chunk_text(t, size, overlap)) for t in texts.values())
        table = pd.read_sql(f"SELECT id, url, start_char, end_char, text, CAST(embedding AS text) AS e "
                            f"FROM {cfg['table']} ORDER BY id", db.engine)
        assert len(table) == cfg["n_chunks"] == cfg["size"]["rows"]
        C = np.array([json.loads(e) for e in table["e"]], dtype=float)
        C /= np.linalg.norm(C, axis=1, keepdims=True)
        top1 = np.argmax(Q @ C.T, axis=1)
        hits = []
        for it, j in zip(items, top1):
            para = paragraphs[it.chunk_id]
            start = texts[para["url"]].index(para["text"])
            row = table.iloc[j]
            hits.append(row["url"] == para["url"] and row["start_char"] < start + len(para["text"])
                        and start < row["end_char"]
                        and " ".join(it.ground_truth_answer.split()).casefold() in row["text"].casefold())
        assert cfg["hit_rate@1"]["mean"] == pytest.approx(np.mean(hits)), name
        assert cfg["hit_rate@1"]["n"] == len(items)
    assert m["texts_encoded_this_run"] > 0

    second = run_notebooks(["chunking"], params, outputs=tmp_path / "b", log=lambda *_: None)
    assert second.failures == [], second.reports
    m2 = json.loads((second.run_dir / "chunking.metrics.json").read_text(encoding="utf-8"))
    assert m2["texts_encoded_this_run"] == 0
    assert all(c["timings"]["embedding_timing"] == "cache" for c in m2["configs"].values())
    for name in m["configs"]:
        assert m2["configs"][name]["mrr"]["mean"] == m["configs"][name]["mrr"]["mean"]


def test_real_questions_are_judged_by_their_logged_page(fresh_db, encoder, tmp_path):
    """A Markdown wiki + question log, a dataset built by the real from-real-questions mode: each config judges
    a question by its logged page (its free-text answer is in no chunk), falls back to answer containment only
    without a logged url, and counts the questions without a relevant chunk. MRR is recomputed with numpy."""
    import team_wiki

    from ragnb.datasets.corpus import Corpus
    from ragnb.datasets.real_questions import generate_from_real_questions
    from ragnb.datasets.schema import DatasetItem
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space

    team_wiki.load_wiki(fresh_db, tmp_path, encoder)
    corpus = Corpus(fresh_db, encoder, "database", check_space(fresh_db, tables(fresh_db.schema).chunk, encoder))
    items = generate_from_real_questions(corpus, top_k=3).dataset.items
    # A url-less question whose answer is wiki text: judged by answer containment.
    items.append(DatasetItem(id="rq-extra", question="Which VPN client should I install?",
                             ground_truth_answer="GlobalConnect", source="question_log", relevant_chunk_ids=[]))
    articles = ch.db_articles(fresh_db)
    assert sorted(a.url for a in articles) == sorted(team_wiki.PAGES)
    configs = [cc.ChunkConfig(8, 0), cc.ChunkConfig(20, 5)]
    result = ch.run_chunking(fresh_db, encoder, articles, items, configs, n_boot=50)

    s = result.summary
    assert s["n_questions"] == 6 and s["n_questions_unmapped"] == 1  # it/wifi.md is not in the wiki
    assert s["n_questions_by_rule"] == {"page": 4, "answer": 2} and set(s["relevance_rules"]) == {"page", "answer"}
    by_page = {"rq-s1-1": "ops/vpn.md", "rq-s1-2": "ops/vpn.md", "rq-s2-1": "dev/deploy.md",
               "rq-s2-2": "hr/vacation.md"}
    questions = {it.id: it.question for it in items}
    for cfg in configs:
        entry = s["configs"][cfg.name]
        assert entry["n_no_relevant_chunk"] == 1  # "I could not find that." is in no chunk
        assert any(n.startswith(f"{cfg.name}: 1 of 6 question(s) have no relevant chunk") for n in result.notes)
        chunks = cc.chunk_corpus(articles, cfg)
        vecs = encoder.encode([c.text for c in chunks])
        vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        per = result.per_query[result.per_query["config"] == cfg.name].set_index("query_id")
        for qid, page in {**by_page, "rq-extra": None, "rq-s3-1": None}.items():
            q = encoder.encode([questions[qid]])[0]
            order = np.argsort(-(vecs @ (q / np.linalg.norm(q))), kind="stable")
            if page is None:
                rel = [i for i, c in enumerate(chunks) if qid == "rq-extra" and "globalconnect" in c.text.lower()]
            else:
                rel = [i for i, c in enumerate(chunks) if c.url == page]
            ranks = [r + 1 for r, i in enumerate(order[:10]) if i in rel]
            assert per.loc[qid, "mrr"] == pytest.approx(1 / ranks[0] if ranks else 0.0, abs=1e-9), (cfg.name, qid)
            assert per.loc[qid, "n_relevant_chunks"] == len(rel)
