"""Active labelling with the judge's error learned from labels: the two-round design Zrnic & Candès recommend
("Active Statistical Inference", ICML 2024) in place of an uncertainty assumed from the score (docs/ppi.md;
docs/metrics.md, Prediction-powered estimates).

Why: π ∝ √(s(1 − s)) (:mod:`ragnb.metrics.ppi_active`) is the optimum only for a judge whose scores are calibrated
probabilities; for the uncalibrated judges of BENCHMARKS §15 it was wider than uniform. Here the first round is a
uniform sample; its labels say where the judge errs, and the second round is drawn there — or uniformly, when the
learned error says active selection would not be narrower.

Round 1: a simple random sample S₁ of n₁ of the N items. From its labels:

    λ = PPI++'s power tuning on S₁ (:func:`ragnb.metrics.ppi.power_tuning`),  r_i = Y_i − λ f_i,  c = mean_{S₁}(r)
    e(s) = E[(r − c)² | s]: the mean of (r − c)² in K bins of the score (quantiles of S₁'s scores, K = ⌊n₁/10⌋ ≤ 5),
           each shrunk to the overall mean with SHRINK pseudo-items and floored at FLOOR × it

Round 2: each of the |R| = N − n₁ other items independently with π_i = min(1, c'·((1 − τ)√e_i/Σ√e + τ/|R|)),
Σπ_i = n₂ (:func:`ragnb.metrics.ppi_active.inclusion_probabilities`). Estimate, with a = n₁/(n₁ + n₂) fixed by the
plan:

    θ̂ = λ·mean_N(f) + a·mean_{S₁}(r) + (1 − a)·(c + Σ_{R, drawn} (r_i − c)/π_i / |R|)

Given round 1 (λ, c and π are then constants), the last term has expectation mean_R(r); S₁ is a simple random
sample, so mean_{S₁}(r) and mean_R(r) both have expectation E[r], and θ̂ is unbiased for E[Y] for a fixed λ — as
PPI++ is, λ being tuned on the labels. With π uniform (π = n₂/|R|) θ̂ weights every label by N/n: uniform PPI.
Its variance, items i.i.d.:

    se² = (λ²v_f + 2λ·cov(f, r))/N + v_r·(a²/n₁ + (1 − a)²/|R|) + (1 − a)²·Σ_{R, drawn} (r_i − c)²(1 − π_i)/π_i² / |R|²

(v_f over the N scores, cov and v_r over S₁; the last term the Horvitz–Thompson estimate of the round-2 sampling
variance). ``finite`` (the quoted interval) uses Kish's effective n of the labels' weights, n_K = (Σw)²/Σw² (n
for uniform weights, fewer the more they vary): the pseudo-labels of :func:`ragnb.metrics.ppi.rectifier_variance`
as if from n_K labels, se² ← ((n_K − 1)·se² + PSEUDO·s²/(4n_K))/(n_K − 1 + PSEUDO) — for uniform weights exactly
uniform PPI++'s — and Student's t with n_K − 1 degrees of freedom: 1/π weights skew the estimate's distribution,
and n_K is the number of equally weighted labels it is worth.

The decision (:func:`choose`): θ̂'s expected variance under the learned errors with the active round 2 against a
uniform one of the same n₂, cross-fitted; active only when expected at least MARGIN narrower in width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ragnb.metrics.ppi import PSEUDO, PPIResult, _note, interval, power_tuning, span_of
from ragnb.metrics.ppi_active import inclusion_probabilities

SHRINK = 5.0  # pseudo-items pulling each bin's mean error to the overall one (few labels per bin)
FLOOR = 0.25  # no bin's error below this share of the overall one: no item gets a near-zero π
MAX_BINS = 5
MIX = 0.3  # τ: the uniform share of round-2 π (the learned error is floored already)
MARGIN = 0.05  # active only when expected ≥ 5% narrower: predictions overstated the realized gain by up to 4% (§15)


@dataclass(frozen=True, eq=False)
class ErrorModel:
    """What round 1 learned: λ, the rectifier's mean c, the score bins' inner edges and each bin's E[(r − c)²]."""

    lam: float
    c: float
    edges: np.ndarray  # K − 1 inner edges of the score bins
    error: np.ndarray  # K fitted errors
    overall: float  # mean (r − c)² over round 1
    f1: np.ndarray  # round 1's scores and squared errors (r − c)², for the cross-fitted decision
    sq: np.ndarray

    def predict(self, f: np.ndarray) -> np.ndarray:
        return self.error[np.searchsorted(self.edges, f, side="right")]


def fit_error(y1: np.ndarray, f1: np.ndarray, f_rest: np.ndarray) -> ErrorModel:
    """The error model of round 1's labels ``y1`` with judge scores ``f1`` (NaN-free); ``f_rest`` the scores of the
    items without a label (for λ's tuning). See the module docstring."""
    n1 = y1.size
    if n1 < 2:
        raise ValueError(f"a learned design needs at least 2 labels from the first round, got {n1}")
    lam = power_tuning(y1, f1, f_rest)
    r = y1 - lam * f1
    c = float(r.mean())
    sq = (r - c) ** 2
    edges, error = _bins(f1, sq)
    return ErrorModel(lam, c, edges, error, float(sq.mean()), f1, sq)


def _bins(f1: np.ndarray, sq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inner edges of K quantile bins of ``f1`` and each bin's mean of ``sq``, shrunk and floored (docstring)."""
    overall = float(sq.mean())
    k = max(1, min(MAX_BINS, sq.size // 10))
    edges = np.unique(np.quantile(f1, np.linspace(0, 1, k + 1)[1:-1])) if k > 1 else np.empty(0)
    bins = np.searchsorted(edges, f1, side="right")
    error = np.array([(sq[bins == b].sum() + SHRINK * overall) / ((bins == b).sum() + SHRINK)
                      for b in range(edges.size + 1)])
    return edges, (np.maximum(error, FLOOR * overall) if overall > 0 else np.ones_like(error))


def learned_probabilities(model: ErrorModel, f_rest: np.ndarray, budget: float, mix: float = MIX) -> np.ndarray:
    """Round 2's π over the items not labelled in round 1: ∝ √e(f), mixed with the uniform design."""
    return inclusion_probabilities(np.sqrt(model.predict(f_rest)), budget, mix)


def choose(model: ErrorModel, f_rest: np.ndarray, n1: int, budget: float,
           mix: float = MIX) -> tuple[bool, float, np.ndarray]:
    """(active?, expected width of θ̂ with the active round 2 over θ̂ with a uniform one, π): active when the
    estimate's expected width is at least MARGIN narrower than uniform's at the same budget; π is then the active
    one, else the uniform budget/|R|. The expectation is cross-fitted: round 1's labels in two folds (alternate
    ranks of the score), the errors binned on one fold weigh the other fold's squared errors by 1/π − 1 — judged
    on labels the fit did not see, a noisy fit's imagined gain does not pick the active design."""
    m, a = f_rest.size, n1 / (n1 + budget)
    uniform = np.full(m, budget / m)
    fold = np.argsort(np.argsort(model.f1, kind="stable")) % 2 == 0
    act = uni = 0.0
    for train in (fold, ~fold):
        if train.sum() < 2 or (~train).sum() < 1:
            return False, 1.0, uniform
        edges, error = _bins(model.f1[train], model.sq[train])
        pi = inclusion_probabilities(np.sqrt(error[np.searchsorted(edges, f_rest, side="right")]), budget, mix)
        # each held-out item's π: that of the rest's items in its bin (all share one, capped or not)
        of_bin = np.full(error.size, budget / m)  # a bin no other item falls in: as uniform
        of_bin[np.searchsorted(edges, f_rest, side="right")] = pi
        held = np.searchsorted(edges, model.f1[~train], side="right")
        act += float(np.sum(model.sq[~train] * (1.0 / of_bin[held] - 1.0)))
        uni += float(np.sum(model.sq[~train] * (m / budget - 1.0)))
    common = model.overall * (a ** 2 / n1 + (1 - a) ** 2 / m)  # round 1's part, the same for both
    scale = (1 - a) ** 2 / (model.sq.size * m)
    ratio = math.sqrt((common + scale * act) / (common + scale * uni)) if common + scale * uni > 0 else 1.0
    pick = ratio <= 1.0 - MARGIN
    return pick, ratio, learned_probabilities(model, f_rest, budget, mix) if pick else uniform


def learned_arrays(y: np.ndarray, f: np.ndarray, first: np.ndarray, drawn: np.ndarray, pi: np.ndarray,
                   n2: float, model: ErrorModel, alpha: float = 0.05, *, bounds: tuple[float, float] | None = None,
                   finite: bool = True, n_failed: int = 0) -> PPIResult:
    """The two-round estimate over all N items (module docstring): ``f`` judge scores (NaN-free), ``first`` the
    round-1 items (bool), ``drawn`` the round-2 items (bool, disjoint from ``first``), ``pi`` round 2's π (read
    outside ``first``), ``n2`` its planned budget, ``model`` the round-1 fit, ``y`` labels (read where labelled)."""
    N, n1, rest = f.size, int(first.sum()), ~first
    m, a = rest.sum(), n1 / (n1 + n2)
    lam, c = model.lam, model.c
    r = y - lam * f
    d = np.where(drawn & rest, (r - c) / np.where(rest, pi, 1.0), 0.0)
    est = float(lam * f.mean()) + a * float(r[first].mean()) + (1 - a) * (c + float(d.sum()) / m)
    r1 = r[first]
    ddof = 1 if finite else 0
    v_r, v_f = float(np.var(r1, ddof=ddof)), float(np.var(f, ddof=ddof))
    cov = float(np.mean((r1 - r1.mean()) * (f[first] - f[first].mean())))
    picked = drawn & rest
    v_d = float(np.sum(np.where(picked, d ** 2 * (1.0 - np.where(rest, pi, 0.0)), 0.0))) / m ** 2
    var = (lam ** 2 * v_f + 2 * lam * cov) / N + v_r * (a ** 2 / n1 + (1 - a) ** 2 / m) + (1 - a) ** 2 * v_d
    n = n1 + int(picked.sum())
    if finite:
        # Kish's n of the labels' weights (N·a/n₁ each in round 1, N(1 − a)/(|R|π) in round 2): n for uniform
        # weights, fewer the more they vary
        w = np.concatenate([np.full(n1, a / n1 * N), (1 - a) * N / m / pi[picked]])
        kish = float(w.sum() ** 2 / (w ** 2).sum())
        span = span_of(bounds)
        if span is not None:  # the pseudo-labels of ppi.rectifier_variance, on Kish's n (= the uniform case's n)
            var = ((kish - 1) * var + PSEUDO * span ** 2 / 4.0 / kish) / (kish - 1 + PSEUDO)
        se = math.sqrt(max(var, 0.0))
        ci = interval(est, se, alpha, max(kish - 1.0, 1.0), bounds)
    else:
        se = math.sqrt(max(var, 0.0))
        ci = interval(est, se, alpha)
    var_y = float(np.var(y[first]))
    eff = var_y / se ** 2 if se > 0 and var_y > 0 else math.nan
    note = _note(n, y[first | picked], finite=finite)
    return PPIResult("learned_ppi++", est, ci, se, alpha, n, N, lam, eff, n_failed, note)
