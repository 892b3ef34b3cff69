"""Active statistical inference (Zrnic & Candès, "Active Statistical Inference", ICML 2024): choose which items to
label by the judge's uncertainty, record each item's inclusion probability π_i, and weight by 1/π_i so the
estimate stays unbiased (docs/ppi.md; docs/metrics.md, Prediction-powered estimates).

Design: every item i is labelled independently with probability π_i (ξ_i = 1 when drawn; Σπ_i = the budget).

    π_i = min(1, c·((1 − τ)·u_i/Σu + τ/N)),  c such that Σπ_i = budget,  τ = 0.5 (share of the uniform design)
    u_i = √(s_i(1 − s_i)),  s_i the judge's score in [0, 1] (the mean of several judges' scores: two judges that
          disagree on a 0/1 verdict give s = 0.5, the largest u); a failed verdict → u = 0.5

u_i is the expected |Y − s| of a calibrated judge, the optimal π ∝ √E[(Y − s)² | item] of the authors; mixing
with the uniform design keeps every π_i away from 0 (no item weighs more than 1/(τ·budget/N)).

Estimate (power-tuned, for all N items, with f_i the judge's score, failed verdicts imputed as in PPI):

    T_i = λ f_i + (Y_i − λ f_i)·ξ_i/π_i,  θ̂ = mean(T),  se = sd₀(T)/√N,  CI = θ̂ ± z·se
    λ = clip(−cov(A, B)/var(B), 0, 1),  A_i = Y_i ξ_i/π_i,  B_i = f_i(1 − ξ_i/π_i)   (T = A + λB)

λ = 0 is the inverse-probability-weighted human-only mean (mean(A), the human-only counterpart reported beside
it). Effective sample size: σ̂²_Y / se², σ̂²_Y the 1/π-weighted variance of the labels.

Expected width before labelling (a planning figure, not a guarantee): assuming a calibrated judge
(E[(Y − s)² | item] = s(1 − s)), Var(T) ≈ σ²_Y + mean_i(s_i(1 − s_i)(1/π_i − 1)) with σ²_Y = var(s) + mean(s(1 − s));
width ≈ 2z·√(Var(T)/N); the human-only width of the same budget ≈ 2z·√(σ²_Y/budget).
"""

from __future__ import annotations

import math

import numpy as np

from ragnb.metrics.ppi import PSEUDO, PPIResult, interval, z_value

MIX = 0.5  # τ: the uniform design's share of every π_i


def uncertainty(scores: np.ndarray, *other_judges: np.ndarray) -> np.ndarray:
    """u_i = √(s̄_i(1 − s̄_i)), s̄_i the mean of the judges' valid scores of item i (clipped to [0, 1]); 0.5 when
    every judge failed on it."""
    stack = np.vstack([np.asarray(scores, dtype=float), *(np.asarray(o, dtype=float) for o in other_judges)])
    valid = ~np.isnan(stack)
    count = valid.sum(axis=0)
    mean = np.clip(np.where(valid, stack, 0.0).sum(axis=0) / np.maximum(count, 1), 0.0, 1.0)
    return np.where(count > 0, np.sqrt(mean * (1.0 - mean)), 0.5)


def inclusion_probabilities(u: np.ndarray, budget: float, mix: float = MIX) -> np.ndarray:
    """π_i = min(1, c·((1 − τ)u_i/Σu + τ/N)) with c chosen so Σπ_i = budget (items capped at 1 leave the rest to
    share what remains). All u = 0 (hard verdicts of one judge) → the uniform design π_i = budget/N."""
    u = np.asarray(u, dtype=float)
    N = u.size
    if not 0 < budget <= N:
        raise ValueError(f"budget must be between 1 and the number of items ({N}), got {budget}")
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must be in [0, 1] (the uniform share), got {mix}")
    shape = (1.0 - mix) * u / u.sum() + mix / N if u.sum() > 0 else np.full(N, 1.0 / N)
    pi = np.zeros(N)
    free = np.ones(N, dtype=bool)
    for _ in range(N):  # cap at 1 and re-share the rest; ends after at most N rounds
        pi[free] = (budget - (~free).sum()) * shape[free] / shape[free].sum()
        over = free & (pi >= 1.0)
        if not over.any():
            break
        pi[over], free[over] = 1.0, False
    return pi


def active_arrays(y: np.ndarray, f: np.ndarray, pi: np.ndarray, drawn: np.ndarray, alpha: float = 0.05,
                  n_failed: int = 0, lam: float | None = None, *, bounds: tuple[float, float] | None = None,
                  finite: bool = True) -> tuple[PPIResult, PPIResult]:
    """(active PPI++, 1/π-weighted human-only) over all N items: ``f`` judge scores (NaN-free), ``pi`` inclusion
    probabilities, ``drawn`` ξ (bool), ``y`` labels (read where drawn; anything elsewhere). ``finite`` (default):
    se from var₁(T), Student's t with n − 1 degrees of freedom (n labels drawn) and, with ``bounds`` (the labels'
    range), two pseudo-labels as in :mod:`ragnb.metrics.ppi`; ``finite=False``: sd₀(T)/√N and z."""
    N, n = f.size, int(drawn.sum())
    if n == 0:
        from ragnb.metrics.ppi import no_labels

        return no_labels("active_ppi++", alpha, N, n_failed), no_labels("ipw_classical", alpha, N, n_failed)
    w = np.where(drawn, 1.0 / pi, 0.0)
    a = np.where(drawn, y, 0.0) * w
    b = f * (1.0 - w)
    if lam is None:
        var_b = float(np.var(b))
        lam = float(np.clip(-np.mean((a - a.mean()) * (b - b.mean())) / var_b, 0.0, 1.0)) if var_b > 0 else 0.0
    yw = np.where(drawn, y, 0.0)
    mean_y = float((w * yw).sum() / w.sum())
    var_y = float((w * (yw - mean_y) ** 2 * drawn).sum() / w.sum())
    out = []
    for method, t, lam_k in (("active_ppi++", a + lam * b, lam), ("ipw_classical", a, math.nan)):
        est = float(t.mean())
        if finite:
            # two pseudo-labels at ±span/2 from the mean rectifier, weighted as an average drawn item (1/π̄):
            # they add span²·w̄²/2 to the sum of squares of T (for the uniform design, the same as in ppi_arrays)
            k = 0 if bounds is None else PSEUDO
            extra = k * (0.0 if bounds is None else (bounds[1] - bounds[0])) ** 2 * float(np.mean(w[drawn])) ** 2 / 4.0
            ss = float(np.sum((t - est) ** 2))
            se = math.sqrt((ss + extra) / (N - 1 + k) / N) if n >= 2 else math.nan
            ci = interval(est, se, alpha, n - 1, bounds)
        else:
            se = float(np.std(t)) / math.sqrt(N) if n >= 2 else math.nan
            ci = interval(est, se, alpha)
        eff = var_y / se ** 2 if n >= 2 and se > 0 and var_y > 0 else math.nan
        note = "" if n >= 2 else f"only {n} label: no interval (needs at least 2)"
        out.append(PPIResult(method, est, ci, se, alpha, n, N, lam_k, eff, n_failed, note))
    return out[0], out[1]


def expected_widths(scores: np.ndarray, pi: np.ndarray, budget: float, alpha: float = 0.05) -> dict[str, float]:
    """Planning figures for a design (see the module docstring): ``{"ppi": width, "human_only": width}``, assuming
    a calibrated judge; failed verdicts count as s = 0.5."""
    s = np.clip(np.where(np.isnan(scores), 0.5, scores), 0.0, 1.0)
    z, N = z_value(alpha), s.size
    err = s * (1.0 - s)
    var_y = float(np.var(s) + err.mean())
    var_t = var_y + float(np.mean(err * (1.0 / pi - 1.0)))
    return {"ppi": 2 * z * math.sqrt(min(var_t, var_y * N / budget) / N),
            "human_only": 2 * z * math.sqrt(var_y / budget)}
