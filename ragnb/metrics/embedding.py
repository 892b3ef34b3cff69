"""Tier 0: intrinsic geometry of an embedding matrix E (N × D), no labels needed
(see docs/metrics.md, Embedding geometry).

``distance`` ("euclidean" or "cosine", cosine distance = 1 − cos) applies to the nearest-neighbour and
pairwise metrics. Spread and effective dimensionality are always computed on the raw vectors (L2 to the
centroid, covariance eigenvalues), as the original definition defines them.

Geometry has no universally better direction; ``higher_is_better`` follows the original interpretation
(docs/metrics.md, Embedding geometry: lower nn distance = more compact, higher density = denser, too low effective dimensionality =
collapse, max spread / max pairwise distance flag outliers) and, where the original definition is silent, the anisotropy
reading: tight neighbourhoods but a wide global spread are good, near-duplicates (tiny min pairwise
distance) are a data-health problem. Read these numbers as diagnostics, not as a leaderboard.

Pairwise and neighbour distances are computed in row blocks, so memory stays O(block × N), never N × N.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ragnb.metrics.registry import register
from ragnb.metrics.vector_rows import divide_by_norms

FAMILY = "embedding"

EPS = 1e-10
DISTANCES = ("euclidean", "cosine")
_BLOCK_ELEMS = 1 << 22  # ~32 MB of float64 per block
# Below this fraction of ‖a‖² + ‖b‖², the rounding error of ‖a‖² + ‖b‖² − 2a·b (~1e-16 of it) exceeds
# ~1e-10 of the result, so such squared distances are recomputed from a − b.
_CANCEL = 1e-6


# --------------------------------------------------------------------------- validation


def _as_matrix(E, name: str = "E") -> np.ndarray:
    a = np.asarray(E)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a numeric matrix (N × D), got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N × D), got shape {a.shape}; reshape a single vector with E[None, :]")
    if a.shape[0] < 2 or a.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a).all(axis=1))
    if bad.size:
        shown = ", ".join(map(str, bad[:20])) + (" …" if bad.size > 20 else "")
        raise ValueError(f"{name} has NaN/inf in {bad.size} row(s): {shown}; drop or re-embed those rows")
    return a


def _check_k(k: int, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if not 1 <= k <= n - 1:
        raise ValueError(f"k={k} needs 1 ≤ k ≤ N−1 = {n - 1} neighbours; lower k to at most N−1 or add samples")
    return int(k)


def _prepare(E: np.ndarray, distance: str) -> np.ndarray:
    """Rows X such that d(i, j) = f(‖x_i − x_j‖²): f = sqrt for euclidean, f = ½·(·) for cosine.

    Cosine: with u = e/‖e‖, 1 − cos(e_i, e_j) = ½‖u_i − u_j‖², which is exactly 0 for duplicates.
    Euclidean: centring changes no distance but shrinks norms, which limits cancellation in
    ‖a‖² + ‖b‖² − 2a·b.
    """
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    if distance == "euclidean":
        return E - E.mean(axis=0)
    return divide_by_norms(E, "E", "drop those rows or use distance='euclidean'")


def _finish(sq: np.ndarray, distance: str) -> np.ndarray:
    sq = np.maximum(sq, 0.0)  # rounding can make ‖a‖² + ‖b‖² − 2a·b slightly negative
    return np.sqrt(sq) if distance == "euclidean" else 0.5 * sq


def _exact_sq(X: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """‖x_i − x_j‖² from the differences, chunked to bound the (pairs × D) temporary."""
    out = np.empty(ii.size)
    step = max(1, _BLOCK_ELEMS // X.shape[1])
    for s in range(0, ii.size, step):
        diff = X[ii[s:s + step]] - X[jj[s:s + step]]
        out[s:s + step] = np.einsum("ij,ij->i", diff, diff)
    return out


def _block_rows(n: int, block_size: int | None) -> int:
    return max(1, int(block_size) if block_size else _BLOCK_ELEMS // n)


# --------------------------------------------------------------------------- building blocks


def nn_distances(E, k: int = 5, distance: str = "euclidean", *, block_size: int | None = None) -> np.ndarray:
    """Distances d_ij from each point i to its k nearest neighbours, shape (N, k), ascending per row.

    Point i is excluded by index, not by distance: an exact duplicate of i is a legitimate neighbour
    at distance 0. Neighbours are chosen blockwise via ‖a‖² + ‖b‖² − 2a·b; distances small enough for
    that formula to lose precision are recomputed from the differences.
    """
    E = _as_matrix(E)
    n = E.shape[0]
    k = _check_k(k, n)
    X = _prepare(E, distance)
    sqn = np.einsum("ij,ij->i", X, X)
    out = np.empty((n, k))
    step = _block_rows(n, block_size)
    for s in range(0, n, step):
        e = min(n, s + step)
        sq = sqn[s:e, None] + sqn[None, :] - 2.0 * (X[s:e] @ X.T)
        sq[np.arange(e - s), np.arange(s, e)] = np.inf
        idx = np.argpartition(sq, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(sq, idx, axis=1)
        rows = np.broadcast_to(np.arange(s, e)[:, None], idx.shape)
        fix = near <= _CANCEL * (sqn[rows] + sqn[idx])
        near[fix] = _exact_sq(X, rows[fix], idx[fix])
        out[s:e] = _finish(near, distance)
    out.sort(axis=1)
    return out


def centroid_distances(E) -> np.ndarray:
    """s_i = ‖e_i − μ‖₂ with μ = (1/N) Σ_i e_i, shape (N,)."""
    E = _as_matrix(E)
    return np.linalg.norm(E - E.mean(axis=0), axis=1)


def pairwise_stats(E, distance: str = "euclidean", *, block_size: int | None = None) -> dict:
    """Mean, population std (ddof=0), min and max of d(e_i, e_j) over the M = N(N−1)/2 pairs i < j.

    Streamed over row blocks; block means and sums of squared deviations are merged with Chan's
    parallel update, which avoids the cancellation of Σd² − M·mean². The minimum is recomputed
    exactly for the minimising pair, so exact duplicates give 0.
    """
    E = _as_matrix(E)
    n = E.shape[0]
    X = _prepare(E, distance)
    sqn = np.einsum("ij,ij->i", X, X)
    count, mean, m2 = 0, 0.0, 0.0
    lo, lo_pair, hi = math.inf, (0, 1), -math.inf
    step = _block_rows(n, block_size)
    for s in range(0, n - 1, step):  # the last row has no partner j > i
        e = min(n, s + step)
        d = _finish(sqn[s:e, None] + sqn[None, s:] - 2.0 * (X[s:e] @ X[s:].T), distance)
        # column c of this block is row s + c; keep j > i only
        mask = np.arange(n - s)[None, :] > np.arange(e - s)[:, None]
        v = d[mask]
        bm = float(v.mean())
        bm2 = float(((v - bm) ** 2).sum())
        delta, tot = bm - mean, count + v.size
        mean += delta * v.size / tot
        m2 += bm2 + delta * delta * count * v.size / tot
        count = tot
        hi = max(hi, float(v.max()))
        dm = np.where(mask, d, np.inf)
        a = int(np.argmin(dm))
        if dm.flat[a] < lo:
            lo, lo_pair = float(dm.flat[a]), (s + a // dm.shape[1], s + a % dm.shape[1])
    lo = float(_finish(_exact_sq(X, np.array(lo_pair[:1]), np.array(lo_pair[1:])), distance)[0])
    return {"avg_pairwise_distance": mean, "std_pairwise_distance": math.sqrt(m2 / count),
            "min_pairwise_distance": lo, "max_pairwise_distance": hi}


def _nn_summary(d: np.ndarray) -> dict:
    avg = float(d.mean())
    return {"avg_nn_distance": avg, "std_nn_distance": float(d.std()), "density_score": 1.0 / (avg + EPS)}


def _spread_summary(s: np.ndarray) -> dict:
    return {"avg_spread": float(s.mean()), "max_spread": float(s.max()), "spread_std": float(s.std())}


# --------------------------------------------------------------------------- registered scalar metrics


@register("total_samples", FAMILY, kind="vectors", value_range=(0.0, math.inf), higher_is_better=True)
def total_samples(E) -> int:
    """N = number of rows of E, the vectors analysed (more samples → tighter estimates)."""
    return int(_as_matrix(E).shape[0])


def _scalar(metric, name: str, higher_is_better: bool, formula: str):
    """Register ``metric`` — one entry of a summary dict, under the same name — with ``formula`` as its doc."""
    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = formula
    return register(name, FAMILY, kind="vectors", value_range=(0.0, math.inf),
                    higher_is_better=higher_is_better)(metric)


def _nn_metric(name: str, higher_is_better: bool, formula: str):
    def metric(E, k: int = 5, distance: str = "euclidean") -> float:
        return _nn_summary(nn_distances(E, k, distance))[name]

    return _scalar(metric, name, higher_is_better, formula)


def _spread_metric(name: str, higher_is_better: bool, formula: str):
    def metric(E) -> float:
        return _spread_summary(centroid_distances(E))[name]

    return _scalar(metric, name, higher_is_better, formula)


def _pairwise_metric(name: str, higher_is_better: bool, formula: str):
    def metric(E, distance: str = "euclidean") -> float:
        return pairwise_stats(E, distance)[name]

    return _scalar(metric, name, higher_is_better, formula)


avg_nn_distance = _nn_metric("avg_nn_distance", False, """\
(1/(N·k)) Σ_i Σ_{j≤k} d_ij, d_ij = distance from e_i to its j-th nearest neighbour (self excluded).
Lower → locally more compact.""")
std_nn_distance = _nn_metric("std_nn_distance", False, """\
Population std (ddof=0) of the N·k values d_ij. Higher → uneven density ("holes").""")
density_score = _nn_metric("density_score", True, """\
1 / (avg_nn_distance + ε), ε = 1e-10. Higher → denser space.""")
avg_spread = _spread_metric("avg_spread", True, """\
(1/N) Σ_i ‖e_i − μ‖₂, μ = centroid. Higher → less collapsed around the centroid.""")
max_spread = _spread_metric("max_spread", False, """\
max_i ‖e_i − μ‖₂. A value far above avg_spread flags outliers.""")
spread_std = _spread_metric("spread_std", False, """\
Population std (ddof=0) of ‖e_i − μ‖₂. Higher → uneven distance from the centroid.""")


@register("effective_dimensionality", FAMILY, kind="vectors", value_range=(0.0, math.inf), higher_is_better=True)
def effective_dimensionality(E, variance_threshold: float = 0.95) -> int:
    """min m such that Σ_{i≤m} λ_i / Σ_i λ_i ≥ variance_threshold, λ = covariance eigenvalues, descending.

    λ come from the singular values of the centred E (λ ∝ σ²; the scale cancels in the ratio).
    Too low → the space has collapsed onto few directions. 0 when all points coincide (no variance).
    """
    if not 0.0 < variance_threshold <= 1.0:
        raise ValueError(f"variance_threshold must be in (0, 1], got {variance_threshold!r}")
    E = _as_matrix(E)
    lam = np.linalg.svd(E - E.mean(axis=0), compute_uv=False) ** 2
    total = lam.sum()
    if total <= 0.0:
        return 0
    ratio = np.cumsum(lam) / total
    # a tolerance so that a ratio of exactly the threshold is not lost to rounding
    return int(np.searchsorted(ratio, variance_threshold - 1e-12) + 1)


avg_pairwise_distance = _pairwise_metric("avg_pairwise_distance", True, """\
2/(N(N−1)) Σ_{i<j} d(e_i, e_j). Low → anisotropic / collapsed space.""")
std_pairwise_distance = _pairwise_metric("std_pairwise_distance", False, """\
Population std (ddof=0) of d(e_i, e_j) over the pairs i < j.""")
min_pairwise_distance = _pairwise_metric("min_pairwise_distance", True, """\
min_{i<j} d(e_i, e_j). 0 or near 0 → (near-)duplicate vectors in the data.""")
max_pairwise_distance = _pairwise_metric("max_pairwise_distance", False, """\
max_{i<j} d(e_i, e_j). Helps spot outliers.""")


# --------------------------------------------------------------------------- summary


def tier0_metrics(E, k: int = 5, distance: str = "euclidean", sample_size: int | None = None, seed: int = 0,
                  variance_threshold: float = 0.95) -> tuple[pd.DataFrame, dict]:
    """All Tier 0 metrics on E, or on ``sample_size`` rows drawn without replacement (seeded).

    Returns a per-point DataFrame (``row`` = index into E, ``nn_distance_mean`` = mean distance to its k
    nearest neighbours, ``spread`` = ‖e_i − μ‖₂) and a dict of the registered scalar metrics.
    Rows are validated on the full E before sampling, so errors name rows of E.
    """
    E = _as_matrix(E)
    rows = np.arange(E.shape[0])
    if sample_size is not None:
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size < 2:
            raise ValueError(f"sample_size must be an integer ≥ 2 or None, got {sample_size!r}")
        if sample_size < E.shape[0]:
            rows = np.sort(np.random.default_rng(seed).choice(E.shape[0], size=int(sample_size), replace=False))
    S = E[rows]
    _check_k(k, S.shape[0])
    nn = nn_distances(S, k, distance)
    spread = centroid_distances(S)
    summary = {"total_samples": int(S.shape[0]), **_nn_summary(nn), **_spread_summary(spread),
               "effective_dimensionality": effective_dimensionality(S, variance_threshold),
               **pairwise_stats(S, distance)}
    per_point = pd.DataFrame({"row": rows, "nn_distance_mean": nn.mean(axis=1), "spread": spread})
    return per_point, summary


def truncation_stats(token_counts, max_seq_length: int) -> dict:
    """How many texts the embedding model silently cuts: a text is truncated iff its tokens > max_seq_length.

    ``token_counts`` must be counted the way the model counts, special tokens included (e.g.
    ``len(tokenizer(text)["input_ids"])`` without truncation; all-MiniLM-L6-v2 cuts at 256).
    Returns ``{n, n_truncated, share_truncated, mean_tokens, max_tokens}``; share/mean/max are NaN when n = 0.
    """
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, (int, np.integer)) or max_seq_length < 1:
        raise ValueError(f"max_seq_length must be a positive integer, got {max_seq_length!r}")
    c = np.asarray(token_counts, dtype=float).ravel()
    if c.size and (not np.isfinite(c).all() or (c < 0).any() or (c != np.round(c)).any()):
        bad = np.flatnonzero(~np.isfinite(c) | (c < 0) | (c != np.round(c)))
        raise ValueError(f"token_counts must be non-negative integers; bad entries at {bad[:20].tolist()}")
    n = int(c.size)
    n_trunc = int((c > max_seq_length).sum())
    return {"n": n, "n_truncated": n_trunc, "share_truncated": n_trunc / n if n else math.nan,
            "mean_tokens": float(c.mean()) if n else math.nan, "max_tokens": int(c.max()) if n else math.nan}
