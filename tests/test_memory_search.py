"""The in-memory exact search with bounded memory returns exactly what the earlier implementation returned.

``OldMemoryRetriever`` (tests/memory_search_reference.py) is the previous implementation, kept as the reference.
Its only arbitrary choice — which of several chunks tied at the k-th score enters the top k — is what the
documented rule (ties go to the lower id) now decides; ``_spec`` is that rule computed by a full sort.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory_search_reference import OldMemoryRetriever, old_normalise
from ragnb.rag.retrieval import MemoryRetriever


def _spec(sorted_ids, sims, k):
    """Top k of each row by (-similarity, id), by a full sort."""
    return [sorted_ids[np.lexsort((np.arange(len(row)), -row))[:k]].tolist() for row in sims]


def _corpus(n=600, dim=24, seed=0):
    """Clustered vectors, unnormalised, with deliberate ties: exact duplicates (also scaled copies, equal after
    normalising), a zero vector, and ids in shuffled order so the matrix is not in id order."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, dim))
    vecs = (centres[rng.integers(0, 6, n)] + 0.25 * rng.normal(size=(n, dim))).astype(np.float32)
    vecs[100:140] = vecs[10]          # 40 copies of one vector: ties across any cut up to k = 41
    vecs[200:210] = vecs[20] * 3.0    # scaled copies: ties after normalising only if the division is exact
    vecs[300] = 0.0
    ids = [f"c{i:05d}" for i in rng.permutation(n)]
    queries = np.concatenate([vecs[[10, 20, 300, 5]], vecs[rng.integers(0, n, 40)] + 0.1 * rng.normal(size=(40, dim))])
    return ids, vecs, queries.astype(np.float32)


@pytest.mark.parametrize("k", [1, 5, 10, 41, 599, 600, 650])
@pytest.mark.parametrize("memory_mb_and_rows", [(512, 256), (1, 7), (1, 1)])
def test_same_results_as_the_previous_implementation(k, memory_mb_and_rows):
    ids, vecs, queries = _corpus()
    memory_mb, batch = memory_mb_and_rows
    # The same batch size for both: a one-query batch is a matrix-vector product, whose float32 sums may differ
    # from a matrix product's in the last bit (for the old code as much as for the new).
    old = OldMemoryRetriever(ids, vecs.copy())
    old_ids, old_scores, sims = old.search(queries, k, batch)
    sorted_ids = old.ids
    mem = MemoryRetriever(ids, vecs.copy(), memory_mb=memory_mb)
    res = mem.search(queries, k, batch_size=batch)
    assert mem.batch_rows(batch) == batch
    spec = _spec(sorted_ids, sims, min(k, len(ids)))
    assert res.ids == spec
    for i, (got, old) in enumerate(zip(res.ids, old_ids)):
        np.testing.assert_array_equal(res.scores[i], old_scores[i])  # same float32 values, bit for bit
        row = np.sort(sims[i])[::-1]
        if len(old) == len(ids) or row[len(old) - 1] != row[len(old)]:  # the old cut was not inside a tie
            assert got == old
        else:
            assert set(got) - set(old) <= set(sorted_ids[sims[i] == row[len(old) - 1]])


def test_ties_across_the_cut_go_to_the_lowest_ids():
    ids, vecs, _ = _corpus()
    res = MemoryRetriever(ids, vecs.copy()).search(vecs[[10]], 5)
    tied = sorted(ids[i] for i in [10, *range(100, 140)])
    assert res.ids == [tied[:5]]
    np.testing.assert_allclose(res.scores[0], 1.0, atol=1e-6)


def test_a_normalised_float32_matrix_is_searched_without_a_copy():
    ids, vecs, queries = _corpus()
    unit = old_normalise(vecs)
    mem = MemoryRetriever(ids, unit)
    assert mem.matrix is unit and np.shares_memory(mem.matrix, unit)
    raw = vecs.copy()
    mem = MemoryRetriever(ids, raw)  # float32 C-contiguous: normalised in place, as the docstring says
    assert np.shares_memory(mem.matrix, raw)
    np.testing.assert_array_equal(raw, old_normalise(vecs))
    kept = vecs.copy()
    mem = MemoryRetriever(ids, kept, copy=True)
    assert not np.shares_memory(mem.matrix, kept) and np.array_equal(kept, vecs)
    as64 = vecs.astype(np.float64)
    mem = MemoryRetriever(ids, as64)  # another dtype: converted once, the caller's array untouched
    assert np.array_equal(as64, vecs.astype(np.float64)) and mem.matrix.dtype == np.float32


@pytest.mark.parametrize("n,memory_mb,expected", [(1_000_000, 512, 134), (100_000, 512, 256), (10_000_000, 512, 13),
                                                  (1_000_000, 1, 1)])
def test_the_batch_fits_the_memory_budget(n, memory_mb, expected):
    mem = MemoryRetriever([f"c{i}" for i in range(n)], np.ones((n, 1), dtype=np.float32), memory_mb=memory_mb)
    rows = mem.batch_rows(256)
    assert rows == expected
    assert rows == 1 or rows * n * 4 <= memory_mb << 20


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("RAGNB_SEARCH_MEMORY_MB", "2")
    mem = MemoryRetriever([f"c{i}" for i in range(10_000)], np.ones((10_000, 2), dtype=np.float32))
    assert mem.memory_mb == 2 and mem.batch_rows(256) == 52  # 2 MiB / 40,000 bytes per query
    monkeypatch.setenv("RAGNB_SEARCH_MEMORY_MB", "lots")
    with pytest.raises(ValueError, match=r"RAGNB_SEARCH_MEMORY_MB='lots' must be a positive whole number"):
        MemoryRetriever(["a"], np.ones((1, 2), dtype=np.float32))


def test_non_finite_vectors_are_named():
    vecs = np.ones((3, 4), dtype=np.float32)
    vecs[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"the vector of chunk 'b' holds NaN or infinity; re-embed"):
        MemoryRetriever(["a", "b", "c"], vecs)
    mem = MemoryRetriever(["a", "b"], np.ones((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="a query vector holds NaN or infinity"):
        mem.search(np.array([[1, np.inf, 0, 0]], dtype=np.float32), 1)


def test_traced_allocations_stay_within_the_budget():
    """numpy reports its buffers to tracemalloc: the constructor allocates no second matrix (only its norm slices
    of at most 32 MiB), and a search no more than the budget plus one row's partition indices."""
    import tracemalloc

    n, dim, budget_mb = 60_000, 160, 2
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((n, dim), dtype=np.float32)  # 38.4 MB
    ids = [f"c{i:06d}" for i in rng.permutation(n)]
    queries = vecs[:40] + 0.1
    tracemalloc.start()
    try:
        mem = MemoryRetriever(ids, vecs, memory_mb=budget_mb)
        build_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        res = mem.search(queries, 10)
        search_peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert mem.batch_rows() == 8  # 2 MiB / (60,000 × 4 bytes)
    assert build_peak < (32 << 20) + (2 << 20) < vecs.nbytes
    assert search_peak < (budget_mb << 20) + 2 * 8 * n + (256 << 10)
    assert [row[0] for row in res.ids] == [ids[i] for i in range(40)]  # each query's own chunk comes first


def test_a_refused_matrix_is_left_as_it_was():
    vecs = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    vecs[3, 0] = np.inf
    before = vecs.copy()
    with pytest.raises(ValueError, match=r"chunk 'd' holds NaN or infinity"):
        MemoryRetriever(["a", "b", "c", "d"], vecs)
    np.testing.assert_array_equal(vecs, before)
