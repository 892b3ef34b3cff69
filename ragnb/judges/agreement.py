"""How much several judge models agree over a dataset: :func:`agreement` and :func:`krippendorff_alpha`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragnb.llm.result import EvaluationResult

# Binary floating point makes 0.8 - 0.3 = 0.5000000000000001; a difference "equal to δ" must count as ≤ δ.
EPS = 1e-9


def krippendorff_alpha(units: Sequence[Sequence[float]], level: str = "interval") -> float:
    """Krippendorff's α over ``units`` (one list of values per sample, NaN = missing).

    α = 1 − D_o / D_e. Only units with at least two values ("pairable") count; n = number of their values.
        D_o = (1/n) · Σ_u [ Σ_{i≠j ∈ u} δ(v_i, v_j) / (m_u − 1) ]       (observed disagreement)
        D_e = 1/(n(n−1)) · Σ_{i≠j over all n values} δ(v_i, v_j)         (expected disagreement)
    with ordered pairs, m_u = values in unit u, δ = (a − b)² for ``level="interval"`` and [a ≠ b] for
    ``"nominal"``. α = 1: perfect agreement; 0: agreement at chance level; < 0: systematic disagreement.
    NaN when there are no pairable units or all values are equal (D_e = 0).
    """
    if level not in ("interval", "nominal"):
        raise ValueError(f"level={level!r}: use 'interval' or 'nominal'")
    pairable = []
    for u in units:
        v = np.asarray(u, dtype=float).ravel()
        v = v[~np.isnan(v)]
        if v.size >= 2:
            pairable.append(v)
    if not pairable:
        return math.nan

    def disagreement(v: np.ndarray) -> float:  # Σ over ordered pairs i≠j of δ(v_i, v_j)
        if level == "interval":
            return float(2 * v.size * np.sum(v * v) - 2 * np.sum(v) ** 2)
        _, counts = np.unique(v, return_counts=True)
        return float(v.size ** 2 - np.sum(counts ** 2))

    all_values = np.concatenate(pairable)
    n = all_values.size
    d_o = sum(disagreement(v) / (v.size - 1) for v in pairable) / n
    d_e = disagreement(all_values) / (n * (n - 1))
    if d_e <= 0:
        return math.nan
    return float(1.0 - d_o / d_e)


def check_results(results: Any, name: str) -> list[EvaluationResult]:
    if isinstance(results, EvaluationResult) or not isinstance(results, (list, tuple)):
        raise ValueError(f"{name} must be a list of EvaluationResult (one per sample)")
    for i, r in enumerate(results):
        if not isinstance(r, EvaluationResult):
            raise ValueError(f"{name}[{i}] must be an EvaluationResult, got {type(r).__name__}")
    metrics = sorted({r.metric for r in results})
    if len(metrics) > 1:
        raise ValueError(f"{name} mixes metrics {metrics}; pass the results of one metric")
    return list(results)


def check_delta(delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta) or delta < 0:
        raise ValueError(f"delta={delta!r} must be a finite number >= 0")
    return float(delta)


def agreement(results: list[EvaluationResult], *, delta: float = 0.5, level: str | None = None) -> dict[str, Any]:
    """How much the judge models agree over a dataset (one EvaluationResult per sample, one metric).

    Only ``ok`` model scores count; a failed model leaves a hole (never a 0).
    * ``mean_abs_diff`` = mean of |s_i − s_j| over every (sample, model pair i<j) where both scored;
      ``pairwise_mean_abs_diff`` breaks it down per model pair.
    * ``share_within_delta`` = share of the samples with ≥ 2 scores whose max − min ≤ δ (all models agree
      within δ; default δ = 0.5, see docs/metrics.md, Tier Judge).
    * ``krippendorff_alpha`` = :func:`krippendorff_alpha` with ``level`` "interval" for scores, "nominal"
      for pairwise verdicts (default chosen from the metric). α handles missing scores and any number of
      models, which Cohen's κ (two raters) and Fleiss' κ (complete data) do not.
    """
    results = check_results(results, "results")
    delta = check_delta(delta)
    metric = results[0].metric if results else ""
    if level is None:
        level = "nominal" if metric == "pairwise" else "interval"
    models: list[str] = []
    for r in results:
        for m in r.model_scores:
            if m.model not in models:
                models.append(m.model)
    table = np.full((len(results), len(models)), np.nan)
    for i, r in enumerate(results):
        for m in r.model_scores:
            if m.status == "ok" and math.isfinite(m.score):
                table[i, models.index(m.model)] = m.score
    diffs: list[float] = []
    per_pair: dict[str, float] = {}
    for a in range(len(models)):
        for b in range(a + 1, len(models)):
            both = ~np.isnan(table[:, a]) & ~np.isnan(table[:, b])
            d = np.abs(table[both, a] - table[both, b])
            diffs.extend(d.tolist())
            per_pair[f"{models[a]} vs {models[b]}"] = float(d.mean()) if d.size else math.nan
    comparable = [row[~np.isnan(row)] for row in table if np.count_nonzero(~np.isnan(row)) >= 2]
    within = [float(np.ptp(v) <= delta + EPS) for v in comparable]
    return {
        "metric": metric,
        "models": models,
        "n_samples": len(results),
        "n_comparable": len(comparable),
        "mean_abs_diff": float(np.mean(diffs)) if diffs else math.nan,
        "pairwise_mean_abs_diff": per_pair,
        "delta": delta,
        "share_within_delta": float(np.mean(within)) if within else math.nan,
        "krippendorff_alpha": krippendorff_alpha(table.tolist(), level) if len(results) else math.nan,
        "alpha_level": level,
    }
