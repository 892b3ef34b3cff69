"""Paired statistics of per-item values (two runs, or two embedding models on the same questions): the
paired test, Holm's adjustment and the verdict. One implementation, used by run comparison
(:mod:`ragnb.runs.significance`) and by the model comparison of the tiers (:mod:`ragnb.tiers.model_comparison`).

Paired comparison of one metric, over the pairs where both values are valid (not NaN):

* ``delta = mean(b_i − a_i)`` (= mean_b − mean_a over those pairs), with a percentile-bootstrap 95% CI
  (pairs resampled, seeded: :func:`ragnb.metrics.stats.bootstrap_ci` of the differences).
* Binary metrics (every value 0 or 1, e.g. ``hit_rate@1``): McNemar's exact test — under H0 the
  discordant pairs split 50/50, so with n01 = #(a=0, b=1) and n10 = #(a=1, b=0),
  ``p = min(1, 2 · P[Binomial(n01 + n10, ½) ≤ min(n01, n10)])``.
* Other metrics: the paired sign-flip permutation test of the mean difference — under H0 each difference
  is as likely to have either sign, so ``p = P[|Σ s_i d_i| ≥ |Σ d_i|]`` over random signs s_i = ±1; exact
  (all 2^m sign patterns of the m non-zero differences) when m ≤ 20, else Monte-Carlo with a fixed seed,
  ``p = (1 + #{|S*| ≥ |S_obs|}) / (n_perm + 1)``. The Wilcoxon signed-rank test (scipy,
  ``zero_method="wilcox"``: zero differences carry no sign and are dropped, the classic treatment) is
  reported next to it; the permutation test is the primary one because it tests the same mean
  difference that ``delta`` and its CI describe.

With several metrics, Holm's step-down adjustment controls the family-wise error over every tested metric
of the comparison: sorted p_(1) ≤ … ≤ p_(m), ``p_holm_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))``.
A paired metric that did not change on any item (every difference 0) has p = 1 under every test and can
never be rejected, so it is left out of m (Tarone 1990: a hypothesis whose smallest attainable p-value
exceeds the level costs nothing) — otherwise the many unchanged cut-offs of a retrieval run would dilute
the one that changed. Verdicts use the Holm-adjusted p-value and the metric's direction (higher or lower
is better).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Iterable

import numpy as np

from ragnb.metrics.stats import bootstrap_ci

EXACT_MAX = 20  # exact sign-flip enumeration up to 2^20 sign patterns


def _signed_sums(x: np.ndarray) -> np.ndarray:
    """Σ s_i x_i for all 2^len(x) sign patterns s ∈ {−1, +1}^len(x)."""
    k = len(x)
    bits = (np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1
    return (1 - 2 * bits) @ x


def sign_flip_test(d: np.ndarray, n_perm: int = 10000, seed: int = 0, exact_max: int = EXACT_MAX) -> tuple[float, bool]:
    """Two-sided paired sign-flip permutation test of mean(d) = 0: ``(p, exact)``.

    Zero differences do not change under a sign flip, so only the m non-zero ones are permuted. m ≤
    ``exact_max``: all 2^m patterns are enumerated (two halves summed against each other, so 2^20 costs one
    1024 × 1024 array). Otherwise ``n_perm`` random patterns from ``seed``; p = (1 + #extreme)/(n_perm + 1)
    so that a Monte-Carlo p is never 0.
    """
    d = np.asarray(d, dtype=float)
    if np.isnan(d).any():
        raise ValueError("sign_flip_test: differences contain NaN; drop incomplete pairs first")
    x = np.abs(d[d != 0])
    m = len(x)
    if m == 0:
        return 1.0, True
    observed = abs(d.sum())
    tol = 1e-9 * (1.0 + x.sum())  # equal sums computed in another order must count as "as extreme"
    if m <= exact_max:
        half = m // 2
        low, high = _signed_sums(x[:half]), _signed_sums(x[half:])
        total = np.abs(high[:, None] + low[None, :])
        return float(np.count_nonzero(total >= observed - tol) / total.size), True
    if n_perm < 1:
        raise ValueError(f"n_perm must be ≥ 1, got {n_perm}")
    rng = np.random.default_rng(seed)
    extreme, done = 0, 0
    step = max(1, 2_000_000 // m)
    total = x.sum()
    while done < n_perm:
        rows = min(step, n_perm - done)
        # signs = 1 − 2·b with b ∈ {0, 1}: Σ signs·x = Σx − 2·(b·x); one product of the 0/1 draws, ~5× faster
        # than building the ±1 matrix, same draws and the same count (ties are within tol)
        flipped = rng.integers(0, 2, size=(rows, m)) @ x
        extreme += int(np.count_nonzero(np.abs(total - 2.0 * flipped) >= observed - tol))
        done += rows
    return (1 + extreme) / (n_perm + 1), False


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> tuple[float, int, int]:
    """McNemar's exact test for paired 0/1 outcomes: ``(p, n01, n10)`` with n01 = #(a=0, b=1),
    n10 = #(a=1, b=0); p = two-sided binomial test of n01 out of n01 + n10 at ½ (1.0 without discordant pairs)."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n01 = int(np.count_nonzero((a == 0) & (b == 1)))
    n10 = int(np.count_nonzero((a == 1) & (b == 0)))
    if n01 + n10 == 0:
        return 1.0, n01, n10
    return float(binomtest(n01, n01 + n10, 0.5).pvalue), n01, n10


def wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p (scipy, ``zero_method="wilcox"``); 1.0 when every difference is 0."""
    from scipy.stats import wilcoxon

    d = np.asarray(d, dtype=float)
    if not np.any(d != 0):
        return 1.0
    with warnings.catch_warnings():  # small-sample / ties notes from scipy are expected here
        warnings.simplefilter("ignore")
        return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def holm(pvalues: Iterable[float | None]) -> list[float]:
    """Holm step-down adjusted p-values; None/NaN entries stay NaN and do not count in m."""
    p = np.array([math.nan if v is None else float(v) for v in pvalues], dtype=float)
    out = np.full(p.shape, math.nan)
    idx = np.flatnonzero(~np.isnan(p))
    m = len(idx)
    if m == 0:
        return out.tolist()
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def is_binary(*arrays: np.ndarray) -> bool:
    values = np.concatenate([np.asarray(x, dtype=float).ravel() for x in arrays])
    return values.size > 0 and bool(np.all((values == 0) | (values == 1)))


def paired_test(a: Any, b: Any, n_boot: int = 1000, seed: int = 0, n_perm: int = 10000) -> dict:
    """Paired comparison of per-item values ``a`` and ``b`` (same items, same order; NaN = no value).

    Returns ``n_pairs`` (both valid), ``n_nan_pairs``, ``mean_a``, ``mean_b`` (over the valid pairs),
    ``n_changed`` (pairs with b ≠ a), ``delta``, ``ci_lo``, ``ci_hi``, ``test``, ``p_value`` (the chosen
    test), ``p_wilcoxon``, ``p_permutation``, and for binary data ``n01``/``n10``. See the module docstring for the formulas.
    """
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_test: a has {a.size} values and b {b.size}; pass the aligned pairs")
    ok = ~(np.isnan(a) | np.isnan(b))
    av, bv = a[ok], b[ok]
    d = bv - av
    out: dict[str, Any] = {
        "n_pairs": int(ok.sum()), "n_nan_pairs": int((~ok).sum()), "n_changed": int(np.count_nonzero(d)),
        "mean_a": float(av.mean()) if av.size else math.nan, "mean_b": float(bv.mean()) if bv.size else math.nan,
        "delta": float(d.mean()) if d.size else math.nan, "ci_lo": math.nan, "ci_hi": math.nan,
        "test": None, "p_value": math.nan, "p_wilcoxon": math.nan, "p_permutation": math.nan,
    }
    if d.size < 2:
        out["test"] = "not tested (fewer than 2 complete pairs)"
        return out
    out["ci_lo"], out["ci_hi"] = bootstrap_ci(d, n_boot=n_boot, seed=seed)
    p_perm, exact = sign_flip_test(d, n_perm=n_perm, seed=seed)
    out["p_permutation"] = p_perm
    out["p_wilcoxon"] = wilcoxon_p(d)
    if is_binary(av, bv):
        out["p_value"], out["n01"], out["n10"] = mcnemar_exact(av, bv)
        out["test"] = "McNemar exact (binary)"
    else:
        out["p_value"] = p_perm
        out["test"] = "sign-flip permutation (" + ("exact" if exact else f"Monte-Carlo, {n_perm} draws") + ")"
    return out


def verdict(delta: float, p: float, alpha: float, better_high: bool | None) -> str:
    """``"B better"`` / ``"B worse"`` (or ``"B higher"`` / ``"B lower"`` when the direction is unknown) when
    ``p < alpha``; else ``"no significant difference at α = <alpha>"``; ``"not tested"`` without a p-value."""
    if p is None or math.isnan(p) or delta is None or math.isnan(delta):
        return "not tested"
    if p >= alpha or delta == 0:
        return f"no significant difference at α = {alpha:g}"
    if better_high is None:
        return "B higher (direction unknown)" if delta > 0 else "B lower (direction unknown)"
    return "B better" if (delta > 0) == better_high else "B worse"
