"""Retrieval backends agree: pgvector exact == in-memory exact; HNSW recall vs exact; consistency."""

from __future__ import annotations

import numpy as np
import pytest

from ragnb.rag.retrieval import MemoryRetriever, PgVectorRetriever, RetrievalResult, consistency, recall_vs_exact
from ragnb.rag.index_build import (create_hnsw_index, default_ef_construction, drop_hnsw_indexes, hnsw_indexes,
                                   hnsw_options)
from ragnb.store.loaders import insert_rows
from ragnb.store.schema import ensure_schema
from ragnb.store.vectors import _record_space, _write_vectors, fetch_vectors


class _Space:
    name, dim = "synthetic-16", 16


def _clustered(n: int, dim: int = 16, seed: int = 0, spread: float = 0.3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, dim))
    return (centres[rng.integers(0, 8, n)] + spread * rng.normal(size=(n, dim))).astype(np.float32)


@pytest.fixture
def vector_db(fresh_db):
    vecs = _clustered(400)
    ids = [f"c{i:04d}" for i in range(len(vecs))]
    insert_rows(fresh_db, "chunks", [{"id": i, "url": f"u{int(i[1:]) // 4}", "text": i} for i in ids])
    t = ensure_schema(fresh_db)
    _record_space(fresh_db, t, t.chunk, _Space())
    _write_vectors(fresh_db, t.chunk, ids, vecs)
    return fresh_db, ids, vecs


def _brute_force(vecs, queries, k):
    a = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = q.astype(np.float64) @ a.T.astype(np.float64)
    return [list(np.argsort(-row, kind="stable")[:k]) for row in sims], sims


def test_memory_and_pgvector_exact_agree_with_brute_force(vector_db):
    db, ids, vecs = vector_db
    queries = _clustered(30, seed=1)
    mem = MemoryRetriever(*fetch_vectors(db)[::2]).search(queries, 10)
    pg = PgVectorRetriever(db, mode="exact").search(queries, 10, batch_size=7)  # batches of uneven size
    ref, sims = _brute_force(vecs, queries, 10)
    assert mem.ids == [[ids[j] for j in row] for row in ref]
    assert pg.ids == mem.ids
    for i, row in enumerate(ref):
        np.testing.assert_allclose(mem.scores[i], sims[i, row], atol=1e-5)
        np.testing.assert_allclose(pg.scores[i], sims[i, row], atol=1e-5)
    assert pg.backend == "pgvector-exact" and pg.latency_mode == "amortised"


def test_ties_are_broken_by_id():
    vecs = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    res = MemoryRetriever(["b", "a", "c"], vecs).search(np.array([[1, 0]], dtype=np.float32), 3)
    assert res.ids == [["a", "b", "c"]]


def test_large_indexes_are_built_with_a_larger_candidate_list():
    assert [default_ef_construction(n) for n in (0, 100_000, 299_999, 300_000, 1_000_000)] == [64, 64, 64, 128, 128]


def test_hnsw_is_used_and_recall_measured(vector_db):
    db, _, _ = vector_db
    queries = _clustered(40, seed=2)
    name = create_hnsw_index(db, m=8, ef_construction=32)
    assert hnsw_options(db) == {"m": 8, "ef_construction": 32}
    assert hnsw_indexes(db) == [name]
    ann = PgVectorRetriever(db, mode="auto", ef_search=100)
    assert ann.backend == "pgvector-hnsw"
    exact = PgVectorRetriever(db, mode="exact").search(queries, 10)
    approx = ann.search(queries, 10)
    r = recall_vs_exact(approx, exact, 10)
    assert 0.9 <= r <= 1.0  # 400 clustered points, ef_search 100: nearly exact
    # With the index present, "exact" still scans everything: equals the in-memory result.
    mem = MemoryRetriever.from_db(db).search(queries, 10)
    assert exact.ids == mem.ids
    assert drop_hnsw_indexes(db) == [name] and hnsw_indexes(db) == [] and hnsw_options(db) is None
    with pytest.raises(ValueError, match="ragnb db index"):
        PgVectorRetriever(db, mode="hnsw")


def test_recall_vs_exact_and_consistency_by_hand():
    a = RetrievalResult([["x", "y", "z"], ["p", "q", "r"]], [np.zeros(3)] * 2, np.zeros(2), "t", "amortised")
    b = RetrievalResult([["x", "z", "w"], ["p", "q", "r"]], [np.zeros(3)] * 2, np.zeros(2), "t", "amortised")
    c = RetrievalResult([["x", "y", "z"], ["q", "p", "r"]], [np.zeros(3)] * 2, np.zeros(2), "t", "amortised")
    assert recall_vs_exact(b, a, 3) == pytest.approx((2 / 3 + 1) / 2)
    # query 0: run b differs, run c equal → 1/2; query 1: b equal, c differs (order) → 1/2
    np.testing.assert_allclose(consistency([a, b, c], 3), [0.5, 0.5])
    np.testing.assert_allclose(consistency([a, a], 2), [1.0, 1.0])


def test_query_dimension_mismatch_is_an_error(vector_db):
    db, ids, vecs = vector_db
    with pytest.raises(ValueError, match=r"expected \(n, 16\)"):
        MemoryRetriever(ids, vecs).search(np.ones((2, 8), dtype=np.float32), 5)
