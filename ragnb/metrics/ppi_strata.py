"""Stratified PPI++ (Fisch, Maynez, Hofer, Dhingra, Globerson, Cohen, "Stratified Prediction-Powered Inference for
Hybrid Language Model Evaluation", NeurIPS 2024): the items are split by any item column (tier, topic, language),
PPI++ runs inside each stratum with its own λ_k, and the strata are weighted by their share of the items.

    θ̂ = Σ_k w_k θ̂_k,  w_k = N_k / N,  se² = Σ_k w_k² se_k²,  CI = θ̂ ± z·se

with θ̂_k, se_k, λ_k the PPI++ estimate of stratum k (:func:`ragnb.metrics.ppi.ppi_arrays`). The human-only
counterpart is the stratified mean Σ_k w_k Ȳ_k with se² = Σ_k w_k² var₀(Y_k)/n_k, and the effective sample size
compares the two: n_eff = n · se²_human / se²_PPI. Stratifying helps when the judge's error differs between
strata (each λ_k fits its stratum); every stratum needs at least 2 labels, otherwise the estimate is undefined and
``note`` names the strata short of labels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ragnb.metrics.ppi import PPIResult, classical_arrays, interval, judge_only_arrays, ppi_arrays
from ragnb.metrics.ppi_items import Estimates, align, unknown_ids
from ragnb.metrics.registry import register



@register("ppi_stratified_mean", "ppi", kind="estimator", value_range=(-math.inf, math.inf), higher_is_better=True)
def ppi_stratified(judge: Mapping[str, float], human: Mapping[str, float], strata: Mapping[str, str],
                   alpha: float = 0.05, *, binary: bool = False) -> Estimates:
    """Stratified PPI++: θ̂ = Σ_k (N_k/N)·θ̂_k, se² = Σ_k (N_k/N)²·se_k², θ̂_k the PPI++ estimate within stratum k.

    ``judge`` id → score over every item (NaN/None = failed), ``human`` id → label, ``strata`` id → stratum of
    every judged item. Returns the judge-only mean, the stratified human-only and the stratified PPI++ estimates.
    """
    unknown_ids(judge, human)
    missing = [i for i in judge if i not in strata]
    if missing:
        raise ValueError(f"strata: {len(missing)} judged item(s) have no stratum, e.g. "
                         f"{', '.join(map(repr, missing[:5]))}; give every item a value of the stratifying column")
    a = align(judge, human, binary)  # checks and fills failed verdicts over all items at once
    judge_only = judge_only_arrays(a.raw_scores, alpha, n_labelled=len(a.ids))
    score = dict(zip([*a.ids, *a.unlabelled_ids], np.concatenate([a.yhat, a.yhat_u])))
    label = dict(zip(a.ids, a.y))
    N, n = len(score), len(label)
    parts, short = [], []
    for k in sorted({str(strata[i]) for i in judge}):
        members = [i for i in judge if str(strata[i]) == k]
        lab = [i for i in members if i in label]
        if len(lab) < 2:
            short.append(f"{k!r} ({len(lab)} of {len(members)} items labelled)")
            continue
        y = np.array([label[i] for i in lab])
        yhat = np.array([score[i] for i in lab])
        yhat_u = np.array([score[i] for i in members if i not in label])
        parts.append((len(members) / N, k, ppi_arrays(y, yhat, yhat_u, alpha), classical_arrays(y, alpha)))
    if short or not parts:
        note = ("stratified PPI needs at least 2 labels in every stratum; short: " + ", ".join(short)
                + " — label more there or merge strata")
        undefined = PPIResult("stratified_ppi++", math.nan, (math.nan, math.nan), math.nan, alpha, n, N, math.nan,
                              math.nan, a.n_failed, note)
        return Estimates(judge_only, replace(undefined, method="stratified_classical"), undefined)
    return Estimates(judge_only, _combine("stratified_classical", parts, 3, alpha, n, N, a.n_failed),
                     _combine("stratified_ppi++", parts, 2, alpha, n, N, a.n_failed))


def _combine(method: str, parts: list, which: int, alpha: float, n: int, N: int, n_failed: int) -> PPIResult:
    se2 = sum(q[0] ** 2 * q[which].se ** 2 for q in parts)
    est = sum(q[0] * q[which].estimate for q in parts)
    se2_human = sum(q[0] ** 2 * q[3].se ** 2 for q in parts)
    se = math.sqrt(se2)
    eff = n * se2_human / se2 if se2 > 0 and se2_human > 0 else math.nan
    lams = ", ".join(f"{q[1]} {q[2].lam:.2f}" for q in parts) if which == 2 else ""
    note = "; ".join(f"{q[which].note}" for q in parts if q[which].note)
    lam = float(sum(q[0] * q[2].lam for q in parts)) if which == 2 else math.nan  # item-weighted mean of λ_k
    if lams:
        note = f"λ per stratum: {lams}" + (f"; {note}" if note else "")
    return PPIResult(method, est, interval(est, se, alpha), se, alpha, n, N, lam, eff, n_failed, note)
