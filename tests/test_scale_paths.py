"""The paths a large corpus takes: the HNSW build's settings (sized to the graph, parallel workers), recall of an
HNSW search against exact search on a seeded sample (checked against numpy's brute force on a real pgvector
index that loses some neighbours), and progress lines for loading, index building and searching."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ragnb.rag.index_build import build_memory_mb, build_settings, create_hnsw_index, graph_bytes_per_row
from ragnb.rag.retrieval import (ANN_RECALL_SAMPLE, MemoryRetriever, PgVectorRetriever, ann_recall, ann_recall_label,
                                 ann_recall_note, exact_top_k, recall_sample)
from ragnb.store.loaders import insert_rows
from ragnb.store.schema import ensure_schema
from ragnb.store.vectors import _record_space, _write_vectors
from test_progress import on_stderr  # noqa: F401 — the fixture: progress lines on stderr
from test_retrieval import _clustered as clustered, _Space


def _clustered(n: int, seed: int = 0) -> np.ndarray:
    return clustered(n, seed=seed, spread=0.6)  # wider clusters than test_retrieval's: a small index loses some


def _fill(db, n: int) -> tuple[list[str], np.ndarray]:
    vecs = _clustered(n)
    ids = [f"c{i:05d}" for i in range(n)]
    insert_rows(db, "chunks", [{"id": i, "url": f"u{int(i[1:]) // 4}", "text": i} for i in ids])
    t = ensure_schema(db)
    _record_space(db, t, t.chunk, _Space())
    _write_vectors(db, t.chunk, ids, vecs)
    return ids, vecs


def _steps(err: str, label: str, unit: str) -> list[tuple[int, int]]:
    pattern = re.compile(rf"^{re.escape(label)}: (\d+)/(\d+) {unit} \(\d+%\), [^,]+(, ~.+ left)?$")
    return [(int(m[1]), int(m[2])) for m in map(pattern.match, err.splitlines()) if m]


def test_build_memory_is_the_graph_estimate_within_postgres_default_and_the_budget(monkeypatch):
    # one element at dim 384, m 16: 4·384 + 8 + 16·3·16 + 192 = 2504 bytes
    assert graph_bytes_per_row(384, 16) == 2504
    # 1M rows: 1.25 · 2504e6 B = 2985.03 MiB → 2986 MB; 100k rows: 298.5 → 299 MB; 1,000 rows: below 64 → 64
    assert build_memory_mb(1_000_000, 384, 16, budget_mb=8192) == 2986
    assert build_memory_mb(100_000, 384, 16, budget_mb=8192) == 299
    assert build_memory_mb(1_000, 384, 16, budget_mb=8192) == 64
    assert build_memory_mb(1_000_000, 384, 16, budget_mb=1024) == 1024
    monkeypatch.setenv("RAGNB_INDEX_MEMORY_MB", "500")
    monkeypatch.setenv("RAGNB_INDEX_WORKERS", "3")
    assert build_settings(1_000_000, 384, 16) == {"maintenance_work_mem": "500MB",
                                                  "max_parallel_maintenance_workers": "3"}
    monkeypatch.setenv("RAGNB_INDEX_WORKERS", "0")  # 0: the leader builds alone
    assert build_settings(10, 384, 16)["max_parallel_maintenance_workers"] == "0"
    monkeypatch.setenv("RAGNB_INDEX_MEMORY_MB", "4GB")
    with pytest.raises(ValueError, match=r"RAGNB_INDEX_MEMORY_MB='4GB' must be a positive whole number"):
        build_settings(10, 384, 16)


def test_the_recall_sample_is_seeded_and_sorted():
    assert recall_sample(5).tolist() == [0, 1, 2, 3, 4]  # fewer queries than the sample: all of them
    picked = recall_sample(1000, 200, seed=3)
    assert len(set(picked.tolist())) == 200 and picked.tolist() == sorted(picked.tolist())
    assert picked.tolist() == recall_sample(1000, 200, seed=3).tolist()


def test_ann_recall_on_a_lossy_index_equals_numpy_brute_force(fresh_db, on_stderr, capsys):
    ids, vecs = _fill(fresh_db, 3000)
    name = create_hnsw_index(fresh_db, m=4, ef_construction=8)
    err = capsys.readouterr().err
    # the build reports its start and its end with the true row count (a log: nothing in between under 10 s)
    assert _steps(err, f"building HNSW index {name}", "rows")[0] == (0, 3000)
    assert _steps(err, f"building HNSW index {name}", "rows")[-1] == (3000, 3000)
    queries = _clustered(300, seed=5)
    ann = PgVectorRetriever(fresh_db, mode="hnsw", ef_search=10)
    approx = ann.search(queries, 10)
    got = ann_recall(ann, queries, approx, 10)
    # independently: the seeded sample of 200 of the 300 queries, exact top 10 by float64 numpy
    picked = np.sort(np.random.default_rng(0).choice(300, size=200, replace=False))
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    q = queries[picked] / np.linalg.norm(queries[picked], axis=1, keepdims=True)
    sims = q.astype(np.float64) @ unit.T.astype(np.float64)
    truth = [{ids[j] for j in np.argsort(-row, kind="stable")[:10]} for row in sims]
    # the exact side streams the table in blocks: 128 rows a block gives numpy's top 10, in order
    streamed = exact_top_k(fresh_db, queries[picked[:20]], 10, block_rows=128)
    assert streamed == [[ids[j] for j in np.argsort(-row, kind="stable")[:10]] for row in sims[:20]]
    expected = np.mean([len(set(approx.ids[i]) & t) / 10 for i, t in zip(picked, truth)])
    assert got == {"ann_recall@10_vs_exact": pytest.approx(expected, abs=1e-12), "ann_recall_n": ANN_RECALL_SAMPLE,
                   "ann_recall_seed": 0}
    assert 0.0 < expected < 1.0  # the index really loses neighbours (how many varies: a parallel build is not
    # deterministic), so the check can tell
    assert ann_recall_label(got) == f"ANN recall@10 vs exact, n=200: {expected:.3f}"
    assert ann_recall_label({"backend": "memory-exact"}) is None
    # a lossy index is said to be one in the report's notes; an index losing under 5% is not flagged
    note = ann_recall_note(got)
    assert (note is None) == (expected >= 0.95)
    assert ann_recall_note({**got, "ann_recall@10_vs_exact": 0.44}).startswith(
        "The HNSW index returned only 44% of the exact top-k on a sample of 200 questions")
    assert ann_recall_note({**got, "ann_recall@10_vs_exact": 0.95}) is None


def test_loading_and_searching_report_progress(fresh_db, on_stderr, capsys):
    ids, vecs = _fill(fresh_db, 2500)
    err = capsys.readouterr().err
    assert _steps(err, "loading chunks", "rows") == [(0, 2500), (2500, 2500)]
    mem = MemoryRetriever(ids, vecs, memory_mb=1)  # 1 MB: 104 queries per batch over 2,500 chunks
    mem.search(_clustered(300, seed=1), 5)
    pg = PgVectorRetriever(fresh_db, mode="exact")
    pg.search(_clustered(100, seed=2), 5, batch_size=40)
    pg.search(_clustered(1, seed=3), 5)  # one query (a latency probe): no step
    err = capsys.readouterr().err
    assert _steps(err, "searching (memory-exact)", "queries") == [(0, 300), (300, 300)]
    assert _steps(err, "searching (pgvector-exact)", "queries") == [(0, 100), (100, 100)]
    assert "\r" not in err and "/1 queries" not in err
