"""Significance of a difference between two runs: paired tests on per-item values, an unpaired fallback
on the aggregates, Holm's adjustment over the metrics of a comparison, and the verdict.

The paired test, Holm's adjustment and the verdict (formulas there) live in :mod:`ragnb.metrics.paired`,
shared with the model comparison of the tiers; they are re-exported here.

Unpaired fallback: ``delta = mean_b − mean_a``; each run's bootstrap CI gives a standard error
``se = (hi − lo) / (2 · 1.96)``, so ``delta ± 1.96 · √(se_a² + se_b²)`` and a two-sided z-test
(a normal approximation, said so in the ``test`` column).
"""

from __future__ import annotations

import math
from typing import Any

from ragnb.metrics.paired import (EXACT_MAX, holm, is_binary, mcnemar_exact, paired_test, sign_flip_test,  # noqa: F401
                                  verdict, wilcoxon_p)
from ragnb.runs.record import is_ppi, metric_value

Z95 = 1.959963984540054


def aggregate_ci(value: Any) -> tuple[float, float]:
    """The ``ci95`` bounds of an aggregate dict; NaN, NaN when it has none."""
    ci = value.get("ci95") if isinstance(value, dict) else None
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = metric_value(ci[0]), metric_value(ci[1])
        if lo is not None and hi is not None:
            return lo, hi
    return math.nan, math.nan


def unpaired_test(agg_a: Any, agg_b: Any) -> dict:
    """Difference of two aggregates: delta = mean_b − mean_a, CI and two-sided z-test from the standard
    errors implied by each run's 95% CI (normal approximation). No CI → delta only."""
    from scipy.stats import norm

    ma, mb = metric_value(agg_a), metric_value(agg_b)
    out: dict[str, Any] = {
        "mean_a": ma if ma is not None else math.nan, "mean_b": mb if mb is not None else math.nan,
        "delta": (mb - ma) if ma is not None and mb is not None else math.nan,
        "ci_lo": math.nan, "ci_hi": math.nan, "p_value": math.nan, "p_wilcoxon": math.nan,
        "p_permutation": math.nan,
        "n_a": agg_a.get("n_valid", agg_a.get("n")) if isinstance(agg_a, dict) else None,
        "n_b": agg_b.get("n_valid", agg_b.get("n")) if isinstance(agg_b, dict) else None,
    }
    (la, ha), (lb, hb) = aggregate_ci(agg_a), aggregate_ci(agg_b)
    if math.isnan(out["delta"]) or any(math.isnan(v) for v in (la, ha, lb, hb)):
        out["test"] = "not tested (no 95% CI in the record)"
        return out
    se = math.hypot((ha - la) / (2 * Z95), (hb - lb) / (2 * Z95))
    out["ci_lo"], out["ci_hi"] = out["delta"] - Z95 * se, out["delta"] + Z95 * se
    if se > 0:
        out["p_value"] = float(2 * norm.sf(abs(out["delta"]) / se))
    elif out["delta"] == 0:
        out["p_value"] = 1.0
    out["test"] = "unpaired z from the two 95% CIs (approximate)"
    return out


PPI_BOTH = "PPI++ estimates of both runs (the judge on every item, corrected by human labels on some)"


def estimates_compared(agg_a: Any, agg_b: Any) -> tuple[Any, Any, str]:
    """The two aggregates to compare and which estimate they are: both runs' PPI++ estimates when both have human
    labels for the metric (:func:`ragnb.runs.record.ppi_view`), else both judges' own aggregates ("" when neither
    had labels) — never one of each: the judge's bias would count as a change."""
    if is_ppi(agg_a) and is_ppi(agg_b):
        return agg_a, agg_b, PPI_BOTH
    if is_ppi(agg_a) or is_ppi(agg_b):
        side = "A" if is_ppi(agg_a) else "B"
        return (agg_a["judge_only"] if is_ppi(agg_a) else agg_a, agg_b["judge_only"] if is_ppi(agg_b) else agg_b,
                f"the judges' own means: only run {side} has human labels for it, so its PPI++ estimate is not used")
    return agg_a, agg_b, ""
