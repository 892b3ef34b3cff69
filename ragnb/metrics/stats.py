"""Aggregation with honest uncertainty: mean, bootstrap 95% CI, and counts of what was left out."""

from __future__ import annotations

import math

import numpy as np


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (NaN-free).

    Resamples items with replacement ``n_boot`` times; the CI is the (α/2, 1−α/2) percentiles of
    the resampled means, α = 1 − level. Deterministic for a given ``seed``. Fewer than 2 values, or
    ``n_boot`` < 1 (no interval asked for) → (nan, nan).

    A resample's mean depends only on how many times each *distinct* value was drawn, and those counts
    are Multinomial(n, frequencies of the distinct values). Drawing the counts directly is the same
    bootstrap distribution at O(n_boot × distinct values) cost: ranking metrics (hit rate, MRR, P@k) take
    only a handful of distinct values, so 100k queries cost no more than 100.
    """
    v = np.asarray(values, dtype=float)
    if v.size < 2 or n_boot < 1:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    uniq, counts = np.unique(v, return_counts=True)
    if uniq.size <= 256:
        draws = rng.multinomial(v.size, counts / v.size, size=n_boot)
        means = draws @ uniq / v.size
    else:
        # Continuous values: plain index resampling, in slices that bound memory to ~4M indices.
        step = max(1, min(n_boot, 4_000_000 // v.size))
        means = np.concatenate([
            v[rng.integers(0, v.size, size=(min(step, n_boot - start), v.size))].mean(axis=1)
            for start in range(0, n_boot, step)
        ])
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def aggregate(values, n_boot: int = 1000, seed: int = 0) -> dict:
    """Summarise per-item values: ``{mean, ci95, n, n_valid, n_failed}``.

    mean = Σ v_i / n_valid over the non-NaN items; NaN items (undefined or failed) are excluded
    from the mean and counted in ``n_failed`` — never silently dropped.
    """
    v = np.asarray(values, dtype=float).ravel()
    valid = v[~np.isnan(v)]
    n, n_valid = int(v.size), int(valid.size)
    mean = float(valid.mean()) if n_valid else math.nan
    lo, hi = bootstrap_ci(valid, n_boot=n_boot, seed=seed)
    return {"mean": mean, "ci95": [lo, hi], "n": n, "n_valid": n_valid, "n_failed": n - n_valid}


def summary_frame(summary: dict) -> "pd.DataFrame":
    """One row per aggregated metric (``{mean, ci95, n, …}`` entries); other entries are skipped."""
    import pandas as pd

    rows = []
    for name, agg in summary.items():
        if isinstance(agg, dict) and "ci95" in agg:
            lo, hi = (agg.get("ci95") or [math.nan, math.nan])[:2]
            rows.append({"metric": name, "mean": agg["mean"], "ci95_low": lo, "ci95_high": hi,
                         "n": agg.get("n"), "n_valid": agg.get("n_valid"), "n_failed": agg.get("n_failed")})
        elif isinstance(agg, (int, float)) and not isinstance(agg, bool):
            rows.append({"metric": name, "mean": float(agg)})
    frame = pd.DataFrame(rows)
    for col in ("n", "n_valid", "n_failed"):
        if col in frame:
            frame[col] = frame[col].astype("Int64")  # counts stay integers even where a row has none
    return frame
