"""Tier 0 embedding-geometry metrics against hand-computed values, scipy's pdist and a brute-force kNN."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

from ragnb.metrics import embedding as em
from ragnb.metrics.registry import REGISTRY, names, parse_name

SQRT2 = math.sqrt(2.0)
SQUARE = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
METRIC_NAMES = {
    "total_samples", "avg_nn_distance", "std_nn_distance", "density_score", "avg_spread", "max_spread",
    "spread_std", "effective_dimensionality", "avg_pairwise_distance", "std_pairwise_distance",
    "min_pairwise_distance", "max_pairwise_distance",
}


def test_unit_square_k1():
    # Every corner's nearest neighbour is an adjacent corner at distance 1.
    # Pairwise distances: 4 sides of 1 and 2 diagonals of √2.
    # Centroid (0.5, 0.5): every corner is √(0.25 + 0.25) = √0.5 away.
    # Covariance = diag(1/4, 1/4): two equal eigenvalues, the first holds 50% < 95% → 2 dimensions.
    per_point, m = em.tier0_metrics(SQUARE, k=1)
    assert m["total_samples"] == 4
    assert m["avg_nn_distance"] == pytest.approx(1.0)
    assert m["std_nn_distance"] == pytest.approx(0.0, abs=1e-12)
    assert m["density_score"] == pytest.approx(1.0 / (1.0 + 1e-10), rel=1e-15)
    assert m["avg_spread"] == pytest.approx(math.sqrt(0.5))
    assert m["max_spread"] == pytest.approx(math.sqrt(0.5))
    assert m["spread_std"] == pytest.approx(0.0, abs=1e-12)
    assert m["effective_dimensionality"] == 2
    # mean of {1,1,1,1,√2,√2} = (4 + 2√2)/6 = (2 + √2)/3
    assert m["avg_pairwise_distance"] == pytest.approx((2 + SQRT2) / 3)
    # var = E[d²] − mean² = (4 + 4)/6 − ((2+√2)/3)² = (6 − 4√2)/9 = ((2 − √2)/3)²
    assert m["std_pairwise_distance"] == pytest.approx((2 - SQRT2) / 3)
    assert m["min_pairwise_distance"] == pytest.approx(1.0)
    assert m["max_pairwise_distance"] == pytest.approx(SQRT2)
    assert list(per_point.columns) == ["row", "nn_distance_mean", "spread"]
    assert per_point["row"].tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(per_point["nn_distance_mean"], 1.0)
    np.testing.assert_allclose(per_point["spread"], math.sqrt(0.5))


def test_unit_square_k3_uses_the_diagonal():
    # k = 3: each corner sees {1, 1, √2}; population std (ddof=0) of that multiset is (2 − √2)/3.
    d = em.nn_distances(SQUARE, k=3)
    np.testing.assert_allclose(d, np.tile([1.0, 1.0, SQRT2], (4, 1)))
    _, m = em.tier0_metrics(SQUARE, k=3)
    assert m["avg_nn_distance"] == pytest.approx((2 + SQRT2) / 3)
    assert m["std_nn_distance"] == pytest.approx((2 - SQRT2) / 3)


def test_effective_dimensionality_threshold_is_inclusive():
    # The square's first component holds exactly 50%: "≥ 0.5" must stop at m = 1 despite rounding.
    assert em.effective_dimensionality(SQUARE, variance_threshold=0.5) == 1
    assert em.effective_dimensionality(SQUARE, variance_threshold=0.51) == 2
    # Axis variances ∝ 0.95·6 and (1 − 0.95)·6: the first axis holds 95% of the variance up to the
    # last bit, computed as 0.9499999999999998 — the default threshold must still give 1.
    a, b = math.sqrt(0.95 * 6), math.sqrt((1 - 0.95) * 6)
    assert em.effective_dimensionality(np.array([[a, 0], [-a, 0], [0, b], [0, -b]])) == 1
    with pytest.raises(ValueError, match="variance_threshold"):
        em.effective_dimensionality(SQUARE, variance_threshold=0.0)


def test_collinear_points():
    # e = t·(1, 2, 3) + offset for t = 0, 1, 2, 5; |(1,2,3)| = √14, so d(i, j) = |t_i − t_j|·√14.
    # Nearest neighbours: t=0→1, t=1→1 (t=0 or 2), t=2→1, t=5→3 → mean 6/4 · √14.
    t = np.array([0.0, 1.0, 2.0, 5.0])
    E = t[:, None] * np.array([1.0, 2.0, 3.0]) + np.array([10.0, -4.0, 7.0])
    _, m = em.tier0_metrics(E, k=1)
    s14 = math.sqrt(14.0)
    assert m["effective_dimensionality"] == 1
    assert m["avg_nn_distance"] == pytest.approx(1.5 * s14)
    # pairs |Δt|: 1, 2, 5, 1, 4, 3 → mean 16/6
    assert m["avg_pairwise_distance"] == pytest.approx(16 / 6 * s14)
    assert m["min_pairwise_distance"] == pytest.approx(s14)
    assert m["max_pairwise_distance"] == pytest.approx(5 * s14)
    # centroid at t = 2: spreads |t − 2|·√14 = 2, 1, 0, 3 → mean 1.5, max 3
    assert m["avg_spread"] == pytest.approx(1.5 * s14)
    assert m["max_spread"] == pytest.approx(3 * s14)


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_duplicate_is_a_neighbour_but_self_is_not(offset):
    # a = a' = (0, 0), b = (3, 4). Self is removed by index, so a's nearest neighbour is a' at exactly 0.
    # (Removing "distance 0" instead would give a and a' the neighbour b at 5.)
    # k=1: a→0, a'→0, b→5 ; k=2: a→{0,5}, a'→{0,5}, b→{5,5}.
    E = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 4.0]]) + offset
    np.testing.assert_array_equal(em.nn_distances(E, k=1)[:, 0], [0.0, 0.0, 5.0])
    np.testing.assert_allclose(em.nn_distances(E, k=2), [[0, 5], [0, 5], [5, 5]])
    _, m = em.tier0_metrics(E, k=2)
    assert m["avg_nn_distance"] == pytest.approx(20 / 6)
    assert m["min_pairwise_distance"] == 0.0  # exactly, despite the 1e6 offset
    assert m["max_pairwise_distance"] == pytest.approx(5.0)
    assert m["avg_pairwise_distance"] == pytest.approx(10 / 3)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_duplicates_are_exactly_zero_at_large_scale(distance):
    # ‖a‖² + ‖b‖² − 2a·b loses ~1e-16·‖a‖² to rounding: at scale 1e4 that is a distance of ~1e-4
    # between exact duplicates unless the chosen distances are recomputed from a − b.
    E = np.random.default_rng(1).normal(size=(20, 5)) * 1e4 + 5e4
    E[5] = E[3]
    d = em.nn_distances(E, k=1, distance=distance)[:, 0]
    assert d[3] == 0.0 and d[5] == 0.0
    assert em.pairwise_stats(E, distance)["min_pairwise_distance"] == 0.0


def test_all_points_identical():
    # Every distance is 0: density = 1/ε, and no direction carries variance → effective dimensionality 0.
    _, m = em.tier0_metrics(np.full((4, 3), 0.3), k=3)
    assert m["avg_nn_distance"] == 0.0
    assert m["density_score"] == pytest.approx(1e10)
    assert m["effective_dimensionality"] == 0
    assert m["min_pairwise_distance"] == m["max_pairwise_distance"] == 0.0


def test_cosine_three_vectors():
    # e1 = (1,0), e2 = (0,2), e3 = (1,1).
    # cos(e1,e2) = 0 → d = 1; cos(e1,e3) = cos(e2,e3) = 1/√2 → d = 1 − 1/√2 ≈ 0.2929.
    # Each point's nearest neighbour is at 1 − 1/√2; pairwise mean = (1 + 2(1 − 1/√2))/3 = (3 − √2)/3.
    E = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    near = 1 - 1 / SQRT2
    np.testing.assert_allclose(em.nn_distances(E, k=1, distance="cosine")[:, 0], [near, near, near])
    np.testing.assert_allclose(em.nn_distances(E, k=2, distance="cosine"), [[near, 1], [near, 1], [near, near]])
    _, m = em.tier0_metrics(E, k=1, distance="cosine")
    assert m["avg_nn_distance"] == pytest.approx(near)
    assert m["avg_pairwise_distance"] == pytest.approx((3 - SQRT2) / 3)
    assert m["min_pairwise_distance"] == pytest.approx(near)
    assert m["max_pairwise_distance"] == pytest.approx(1.0)
    # Spread stays L2 on the raw vectors: centroid (2/3, 1) → √10/3, √13/3, 1/3.
    assert m["avg_spread"] == pytest.approx((math.sqrt(10) + math.sqrt(13) + 1) / 9)


def test_cosine_rejects_zero_vectors():
    with pytest.raises(ValueError, match=r"zero vectors in rows \[1\].*euclidean"):
        em.tier0_metrics(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), k=1, distance="cosine")
    with pytest.raises(ValueError, match="distance must be one of"):
        em.tier0_metrics(SQUARE, k=1, distance="manhattan")


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
@pytest.mark.parametrize("block_size", [1, 7, 299, None])
def test_blocked_pairwise_matches_pdist(distance, block_size):
    E = np.random.default_rng(42).normal(size=(300, 16))
    ref = pdist(E, metric=distance)
    got = em.pairwise_stats(E, distance, block_size=block_size)
    assert got["avg_pairwise_distance"] == pytest.approx(ref.mean(), rel=1e-10)
    assert got["std_pairwise_distance"] == pytest.approx(ref.std(), rel=1e-9)
    assert got["min_pairwise_distance"] == pytest.approx(ref.min(), rel=1e-9)
    assert got["max_pairwise_distance"] == pytest.approx(ref.max(), rel=1e-10)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_blocked_nn_matches_brute_force(distance):
    E = np.random.default_rng(7).normal(size=(200, 10))
    full = cdist(E, E, metric=distance)
    np.fill_diagonal(full, np.inf)
    ref = np.sort(full, axis=1)[:, :6]
    np.testing.assert_allclose(em.nn_distances(E, k=6, distance=distance, block_size=13), ref, rtol=1e-9, atol=1e-12)


def test_pairwise_memory_is_blocked():
    # An N × N float64 matrix would be 3000² · 8 B = 72 MB; blocks of 100 rows need ~100 · 3000 · 8 B each.
    E = np.random.default_rng(0).normal(size=(3000, 8))
    tracemalloc.start()
    em.pairwise_stats(E, block_size=100)
    em.nn_distances(E, k=5, block_size=100)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 0.25 * 3000 * 3000 * 8


def test_sample_size_is_deterministic_and_indexes_E():
    E = np.random.default_rng(3).normal(size=(60, 5))
    p1, m1 = em.tier0_metrics(E, k=3, sample_size=20, seed=11)
    p2, m2 = em.tier0_metrics(E, k=3, sample_size=20, seed=11)
    p3, _ = em.tier0_metrics(E, k=3, sample_size=20, seed=12)
    assert m1 == m2 and p1.equals(p2)
    assert p1["row"].tolist() != p3["row"].tolist()
    rows = p1["row"].to_numpy()
    assert len(set(rows)) == 20 and m1["total_samples"] == 20
    # the sample's metrics are exactly the metrics of E[rows]
    _, direct = em.tier0_metrics(E[rows], k=3)
    assert direct == m1
    # sample_size ≥ N means "all rows"
    p_all, m_all = em.tier0_metrics(E, k=3, sample_size=500)
    assert p_all["row"].tolist() == list(range(60)) and m_all["total_samples"] == 60
    with pytest.raises(ValueError, match="sample_size"):
        em.tier0_metrics(E, k=1, sample_size=1)


def test_k_validation_says_the_fix():
    with pytest.raises(ValueError, match="lower k to at most N−1 or add samples"):
        em.tier0_metrics(SQUARE, k=4)
    with pytest.raises(ValueError, match="lower k to at most N−1 or add samples"):
        em.tier0_metrics(SQUARE, k=0)
    with pytest.raises(ValueError, match="integer"):
        em.tier0_metrics(SQUARE, k=2.0)
    # k is checked against the sample, not the full matrix
    with pytest.raises(ValueError, match=r"N−1 = 2"):
        em.tier0_metrics(np.random.default_rng(0).normal(size=(10, 2)), k=3, sample_size=3)
    em.tier0_metrics(SQUARE, k=3)  # N − 1 is allowed


def test_bad_matrices_name_the_problem():
    E = np.random.default_rng(0).normal(size=(8, 3))
    E[2, 1] = np.nan
    E[5, 0] = np.inf
    with pytest.raises(ValueError, match=r"2 row\(s\): 2, 5"):
        em.tier0_metrics(E, k=1)
    # rows are named in E's numbering even when sampling
    with pytest.raises(ValueError, match=r"2, 5"):
        em.tier0_metrics(E, k=1, sample_size=3)
    with pytest.raises(ValueError, match="2-D"):
        em.tier0_metrics(np.ones(5), k=1)
    with pytest.raises(ValueError, match="at least 2 rows"):
        em.tier0_metrics(np.ones((1, 4)), k=1)
    with pytest.raises(ValueError, match="numeric"):
        em.tier0_metrics(np.array([["a", "b"], ["c", "d"]]), k=1)


def test_registry_and_plain_types():
    assert set(names("embedding")) == METRIC_NAMES
    _, m = em.tier0_metrics(SQUARE, k=1)
    assert set(m) == METRIC_NAMES
    assert all(type(v) in (int, float) for v in m.values())
    for name in METRIC_NAMES:
        metric, k = parse_name(name)
        assert metric.family == "embedding" and k is None and metric.doc
        kwargs = {"k": 1} if "k" in metric.fn.__code__.co_varnames[: metric.fn.__code__.co_argcount] else {}
        assert metric.fn(SQUARE, **kwargs) == pytest.approx(m[name]), name
    assert REGISTRY["density_score"].higher_is_better and not REGISTRY["avg_nn_distance"].higher_is_better


def test_truncation_stats():
    # 257 and 300 exceed 256; 256 itself fits.
    s = em.truncation_stats([10, 256, 257, 300], max_seq_length=256)
    assert s == {"n": 4, "n_truncated": 2, "share_truncated": 0.5, "mean_tokens": 205.75, "max_tokens": 300}
    assert type(s["max_tokens"]) is int
    empty = em.truncation_stats([], 256)
    assert empty["n"] == 0 and empty["n_truncated"] == 0 and math.isnan(empty["share_truncated"])
    with pytest.raises(ValueError, match=r"bad entries at \[1\]"):
        em.truncation_stats([3, -1], 256)
    with pytest.raises(ValueError, match="max_seq_length"):
        em.truncation_stats([3], 0)
