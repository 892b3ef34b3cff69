"""Aggregation with honest uncertainty (mean, bootstrap 95% CI, counts of what was left out) and latency summaries."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ragnb.metrics.registry import register

if TYPE_CHECKING:
    import pandas as pd


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


# An aggregate of fewer valid items than this is flagged ``few_items``: its CI is too wide (or, below 2 items,
# absent) to tell one system from another, so it is never graded (docs/metrics.md, Conventions).
FEW_ITEMS = 10
# Valid values closer than this to the first one count as equal for ``constant`` (float noise of embeddings).
CONSTANT_ATOL = 1e-12


def aggregate(values, n_boot: int = 1000, seed: int = 0) -> dict:
    """Summarise per-item values: ``{mean, ci95, n, n_valid, n_failed, constant, few_items}``.

    mean = Σ v_i / n_valid over the non-NaN items; NaN items (undefined or failed) are excluded
    from the mean and counted in ``n_failed`` — never silently dropped.
    constant = n_valid ≥ 1 and every valid value equals the first (|v_i − v_1| ≤ 1e-12): the metric does not
    vary over this data (a zero-width CI), so it says nothing about it. few_items = n_valid < :data:`FEW_ITEMS`.
    Both are always present; :func:`degenerate_reason` turns them into the sentence reports show.
    """
    v = np.asarray(values, dtype=float).ravel()
    valid = v[~np.isnan(v)]
    n, n_valid = int(v.size), int(valid.size)
    mean = float(valid.mean()) if n_valid else math.nan
    lo, hi = bootstrap_ci(valid, n_boot=n_boot, seed=seed)
    constant = bool(n_valid) and bool(np.all(np.abs(valid - valid[0]) <= CONSTANT_ATOL))
    return {"mean": mean, "ci95": [lo, hi], "n": n, "n_valid": n_valid, "n_failed": n - n_valid,
            "constant": constant, "few_items": n_valid < FEW_ITEMS}


def degenerate_reason(agg: object) -> str | None:
    """Why an aggregate says nothing here, or None: ``"constant: all 612 valid items are 0.982"``,
    ``"only 7 valid items (fewer than 10)"`` (both joined with "; " when both apply). Plain numbers and
    aggregates without the flags (older records) → None."""
    if not isinstance(agg, dict):
        return None
    reasons = []
    if agg.get("constant") is True:
        mean = agg.get("mean")
        value = f"{mean:.4g}" if isinstance(mean, (int, float)) else "equal"
        reasons.append(f"constant: all {agg.get('n_valid')} valid items are {value}")
    if agg.get("few_items") is True:
        reasons.append(f"only {agg.get('n_valid')} valid items (fewer than {FEW_ITEMS})")
    return "; ".join(reasons) or None


def summary_frame(summary: dict) -> "pd.DataFrame":
    """One row per aggregated metric (``{mean, ci95, n, …}`` entries); other entries are skipped.

    ``says_nothing`` holds :func:`degenerate_reason` (constant, or fewer than 10 valid items), empty otherwise."""
    import pandas as pd

    rows = []
    for name, agg in summary.items():
        if isinstance(agg, dict) and "ci95" in agg:
            lo, hi = (agg.get("ci95") or [math.nan, math.nan])[:2]
            rows.append({"metric": name, "mean": agg["mean"], "ci95_low": lo, "ci95_high": hi,
                         "n": agg.get("n"), "n_valid": agg.get("n_valid"), "n_failed": agg.get("n_failed"),
                         "says_nothing": degenerate_reason(agg)})
        elif isinstance(agg, (int, float)) and not isinstance(agg, bool):
            rows.append({"metric": name, "mean": float(agg)})
    frame = pd.DataFrame(rows)
    for col in ("n", "n_valid", "n_failed"):
        if col in frame:
            frame[col] = frame[col].astype("Int64")  # counts stay integers even where a row has none
    return frame


# --------------------------------------------------------------------------- latency


def latency_summary(values_ms: Iterable[float | None]) -> dict[str, float | int]:
    """``{"mean", "p50", "p95", "n"}`` of durations in milliseconds; callers name the keys they report.

    mean = (1/n) Σ t_i; p50, p95 = numpy's percentiles with linear interpolation; n = durations used.
    A missing duration (None/NaN: a call that was never timed) is left out; none left → NaN values, n = 0.
    """
    v = np.asarray([math.nan if x is None else x for x in values_ms], dtype=float).ravel()
    if np.isinf(v).any() or (v < 0).any():
        raise ValueError("durations must be finite and >= 0 milliseconds; fix the timing that produced them")
    v = v[~np.isnan(v)]
    if not v.size:
        return {"mean": math.nan, "p50": math.nan, "p95": math.nan, "n": 0}
    return {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)), "p95": float(np.percentile(v, 95)),
            "n": int(v.size)}


_TIMING = {"kind": "timing", "value_range": (0.0, math.inf), "higher_is_better": False}


@register("latency_ms", "latency", **_TIMING, aliases=("latency_answer_ms", "latency_retrieve_ms"))
def mean_latency_ms(values_ms: Sequence[float]) -> float:
    """Mean latency: (1/n) Σ t_i over the n timed calls (ms); NaN when none was timed.

    Tier blocks report it per item stage (``latency_answer_ms``, ``latency_retrieve_ms``) and as
    ``avg_latency_ms``.
    """
    return latency_summary(values_ms)["mean"]


@register("p50_latency_ms", "latency", **_TIMING)
def p50_latency_ms(values_ms: Sequence[float]) -> float:
    """Median latency: p50 = the 50th percentile of the timed calls' t_i (ms), linear interpolation; NaN when
    none was timed."""
    return latency_summary(values_ms)["p50"]


@register("p95_latency_ms", "latency", **_TIMING)
def p95_latency_ms(values_ms: Sequence[float]) -> float:
    """p95 = the 95th percentile of the timed calls' t_i (ms), linear interpolation between order statistics;
    NaN when none was timed."""
    return latency_summary(values_ms)["p95"]


def format_mean_ci(mean: float | None, ci: Sequence[float] | None, signed: bool = False) -> str:
    """``0.904 [0.879, 0.928]`` (``+0.760 [0.725, 0.792]`` signed) — a mean and its 95% CI in tables; ``—`` for
    no mean, the mean alone when the interval is undefined."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    lo, hi = (ci or [math.nan, math.nan])[:2]
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return fmt.format(mean)
    return f"{fmt.format(mean)} [{lo:.3f}, {hi:.3f}]"


def metric_value(value: Any) -> float | None:
    """The number behind an aggregate: a plain number, or the ``mean`` of ``{mean, ci95, n, ...}``."""
    if isinstance(value, dict):
        value = value.get("mean")
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def fmt_number(x: Any) -> str:
    """The one number format of summaries and key-metric tables: whole numbers ≥ 2 (counts) as integers with
    thousands separators, values ≥ 100 rounded to integers, others to 3 significant digits (``0.144``, ``0.0123``,
    ``3.98``, ``1.00``); ``n/a`` for a missing value. Accepts an aggregate dict (its ``mean``)."""
    v = metric_value(x)
    if v is None:
        return "n/a"
    if (float(v).is_integer() and abs(v) >= 2) or abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:#.3g}"
