"""Prediction-powered estimates (ragnb.metrics.ppi, ppi_items, ppi_strata, ppi_active): equal to the authors'
package ppi-python (the oracle, installed by the dev extra), hand-computed small cases, edge cases and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from ragnb.metrics import registry
from ragnb.metrics.ppi import classical_mean, judge_mean, ppi_arrays, ppi_mean
from ragnb.metrics.ppi_active import active_arrays, expected_widths, inclusion_probabilities, uncertainty
from ragnb.metrics.ppi_items import estimates, estimates_from_frame, ppi_paired_difference
from ragnb.metrics.ppi_strata import ppi_stratified

with warnings.catch_warnings():  # ppi_py calls warnings.simplefilter("ignore") at import; keep it local
    import ppi_py
    from ppi_py.ppi import _calc_lam_glm

Y = np.array([1.0, 0.0, 1.0, 1.0])
YHAT = np.array([0.9, 0.2, 0.6, 0.8])
YHAT_U = np.array([0.1, 0.5, 0.7, 0.9, 0.3])
ALL = np.concatenate([YHAT, YHAT_U])
Z95 = 1.959963984540054


def _draw(seed: int, N: int = 400, n: int = 50, binary: bool = True):
    rng = np.random.default_rng(seed)
    f = rng.uniform(size=N)
    y = (rng.uniform(size=N) < 0.15 + 0.7 * f).astype(float) if binary else f + rng.normal(0.1, 0.3, size=N)
    mask = np.zeros(N, dtype=bool)
    mask[rng.choice(N, n, replace=False)] = True
    return f, y, mask


def _oracle_lambda(y, yhat, yhat_u):
    theta = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=1)
    return _calc_lam_glm(y - theta, yhat - theta, yhat_u - theta, np.eye(1), clip=True)


@pytest.mark.parametrize("seed,binary", [(0, True), (1, True), (2, False), (3, False)])
def test_equal_to_ppi_python(seed, binary):
    f, y, mask = _draw(seed, binary=binary)
    for alpha in (0.05, 0.1):
        r = ppi_mean(f, f[mask], y[mask], alpha=alpha, binary=binary, finite=False)
        lo, hi = ppi_py.ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=alpha)
        assert r.ci == pytest.approx((lo[0], hi[0]), abs=1e-12)
        assert r.estimate == pytest.approx(ppi_py.ppi_mean_pointestimate(y[mask], f[mask], f[~mask])[0], abs=1e-12)
        assert r.lam == pytest.approx(_oracle_lambda(y[mask], f[mask], f[~mask]), abs=1e-12)
        assert 0.0 <= r.lam <= 1.0 and (r.n, r.N) == (50, 400)
        c = classical_mean(y[mask], alpha=alpha, finite=False)
        assert c.ci == pytest.approx(ppi_py.classical_mean_ci(y[mask], alpha=alpha), abs=1e-12)
        # fixed λ = 1 is plain PPI, as in the oracle
        lo1, hi1 = ppi_py.ppi_mean_ci(y[mask], f[mask], f[~mask], alpha=alpha, lam=1)
        assert ppi_mean(f, f[mask], y[mask], alpha=alpha, lam=1, finite=False).ci == pytest.approx((lo1[0], hi1[0]),
                                                                                    abs=1e-12)
        # the finite-sample interval (the default) keeps the authors' estimate and λ and is a little wider
        fin = ppi_mean(f, f[mask], y[mask], alpha=alpha, binary=binary)
        assert fin.estimate == r.estimate and fin.lam == r.lam and fin.width > r.width


def test_hand_computed_plain_ppi_and_lambda():
    # λ = 1: θ̂ = mean(Ŷᵘ) + mean(Y − Ŷ) = 0.5 + 0.125; se² = var₀(Ŷᵘ)/5 + var₀(Y − Ŷ)/4 = 0.08/5 + 0.046875/4
    r = ppi_mean(ALL, YHAT, Y, lam=1, finite=False)
    assert r.estimate == pytest.approx(0.625)
    assert r.se == pytest.approx(math.sqrt(0.016 + 0.01171875))
    assert r.ci == pytest.approx((0.625 - Z95 * r.se, 0.625 + Z95 * r.se))
    # tuned: cov₀(Y, Ŷ) = 0.425/4 = 0.10625; var₁ of the 9 scores = (3.5 − 25/9)/8; λ = 0.10625/(1.8·var₁) = 17/26
    tuned = ppi_mean(ALL, YHAT, Y, finite=False)
    assert tuned.lam == pytest.approx(17 / 26)
    lam = 17 / 26
    assert tuned.estimate == pytest.approx(lam * 0.5 + float(np.mean(Y - lam * YHAT)))
    # effective n = var₀(Y)/se² = 0.1875/se²
    assert tuned.effective_n == pytest.approx(0.1875 / tuned.se ** 2)


def test_labelled_scores_are_taken_out_of_judge_all_in_any_order():
    shuffled = np.random.default_rng(0).permutation(ALL)
    assert ppi_mean(shuffled, YHAT, Y).ci == pytest.approx(ppi_mean(ALL, YHAT, Y).ci)


def test_no_labels_is_an_undefined_estimate_not_an_error():
    r = ppi_mean(ALL, [], [])
    assert r.n == 0 and math.isnan(r.estimate) and all(math.isnan(x) for x in r.ci)
    assert "no labels" in r.note
    e = estimates({"a": 0.2, "b": 0.8}, {})
    assert e.quote[0] == "judge_only" and "unchecked" in e.quote[1] and e.judge_only.estimate == pytest.approx(0.5)


def test_all_labels_equal_gives_zero_width_only_in_the_normal_interval():
    r = ppi_mean(ALL, YHAT, [1, 1, 1, 1], binary=True, finite=False)
    assert r.lam == 0.0 and r.estimate == 1.0 and r.width == 0.0
    assert "all 4 labels are 1" in r.note and math.isnan(r.effective_n)
    # the quoted interval: Wilson's for 0/1 labels at λ = 0, never of width 0 (25 labels all 1: [0.867, 1])
    from statsmodels.stats.proportion import proportion_confint

    ones = classical_mean([1] * 25, binary=True)
    assert ones.ci == pytest.approx(proportion_confint(25, 25, method="wilson"), abs=1e-12)
    assert ones.ci[0] == pytest.approx(0.8668, abs=1e-4) and ones.ci[1] == 1.0
    assert ppi_mean(ALL, YHAT, [1, 1, 1, 1], binary=True).ci == pytest.approx(proportion_confint(4, 4, method="wilson"))
    assert "too few for any interval to be trusted" in ppi_mean(ALL, YHAT, [1, 1, 1, 1], binary=True).note


def test_wilson_for_mixed_binary_labels_equals_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    y = [1] * 17 + [0] * 8
    assert classical_mean(y, binary=True).ci == pytest.approx(proportion_confint(17, 25, method="wilson"), abs=1e-12)


def test_finite_sample_interval_hand_computed():
    # λ = 1 on 4 labels with 0/1 labels: rectifier r = Y − Ŷ = [0.1, −0.2, 0.4, 0.2], var₁(r) = 0.0625;
    # v = (3·0.0625 + 4·1/4)/(3 + 4) = 1.1875/7; se² = var₁(Ŷᵘ)/5 + v/4 = 0.1/5 + 1.1875/28; CI = θ̂ ± t₃·se ∩ [0, 1]
    from scipy.stats import t

    r = ppi_mean(ALL, YHAT, Y, lam=1, binary=True)
    se = math.sqrt(0.1 / 5 + 1.1875 / 28)
    assert r.estimate == pytest.approx(0.625) and r.se == pytest.approx(se)
    q = t.ppf(0.975, 3)
    assert r.ci == pytest.approx((max(0.625 - q * se, 0.0), min(0.625 + q * se, 1.0)))
    # without a known range: t₃ and var₁ only, no pseudo-labels, no clipping
    free = ppi_mean(ALL, YHAT, Y, lam=1)
    assert free.se == pytest.approx(math.sqrt(0.1 / 5 + 0.0625 / 4))
    assert free.ci == pytest.approx((0.625 - q * free.se, 0.625 + q * free.se))


@pytest.mark.parametrize("n", [25, 50])
def test_small_n_coverage_of_the_finite_interval(n):
    # A hard 0/1 judge that agrees with the label 85% of the time, true rate 0.3, N = 600 fresh items per draw:
    # the normal interval's coverage falls short here; the finite-sample one holds (400 draws: a binomial sd of
    # ~0.011, so the bound 0.925 is 2 sd under 0.95 and over the normal interval's measured ~0.90–0.92).
    rng = np.random.default_rng(n)
    covered, normal = 0, 0
    for _ in range(400):
        y = (rng.uniform(size=600) < 0.3).astype(float)
        f = np.where(rng.uniform(size=600) < 0.85, y, 1 - y)
        lab = rng.choice(600, n, replace=False)
        covered += _inside(ppi_mean(f, f[lab], y[lab], binary=True).ci, 0.3)
        normal += _inside(ppi_mean(f, f[lab], y[lab], binary=True, finite=False).ci, 0.3)
    assert covered / 400 >= 0.925 and covered > normal


def _inside(ci, x):
    return ci[0] <= x <= ci[1]


def test_constant_judge_falls_back_to_human_only():
    r = ppi_mean(np.full(9, 0.7), np.full(4, 0.7), Y)
    c = classical_mean(Y)
    assert r.lam == 0.0 and r.estimate == pytest.approx(0.75) and r.ci == pytest.approx(c.ci)
    assert "same score" in r.note


def test_every_item_labelled_is_the_human_mean():
    r = ppi_mean(YHAT, YHAT, Y)
    assert r.lam == 0.0 and r.ci == pytest.approx(classical_mean(Y).ci) and "every item is labelled" in r.note


def test_failed_verdicts_are_counted_and_imputed_by_the_valid_mean():
    judge_all = np.array([0.9, np.nan, 0.6, 0.8, 0.1, np.nan, 0.7, 0.9, 0.3])
    judge_lab = np.array([0.9, np.nan, 0.6, 0.8])
    r = ppi_mean(judge_all, judge_lab, Y, finite=False)
    c = float(np.nanmean(judge_all))  # 4.3/7
    filled = np.where(np.isnan(judge_all), c, judge_all)
    lo, hi = ppi_py.ppi_mean_ci(Y, filled[:4], filled[4:], alpha=0.05)
    assert r.n_failed == 2 and r.N == 9 and r.ci == pytest.approx((lo[0], hi[0]))
    j = judge_mean(judge_all)
    assert j.n_failed == 2 and j.estimate == pytest.approx(c) and j.N == 9


def test_bad_input_is_a_clear_value_error():
    with pytest.raises(ValueError, match="not 0 or 1"):
        ppi_mean(ALL, YHAT, [1, 0, 0.5, 1], binary=True)
    with pytest.raises(ValueError, match="aligned"):
        ppi_mean(ALL, YHAT, [1, 0, 1])
    with pytest.raises(ValueError, match="not among judge_all"):
        ppi_mean(YHAT_U, YHAT, Y)
    with pytest.raises(ValueError, match="label at position 1"):
        ppi_mean(ALL, YHAT, [1, math.nan, 1, 1])
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean(ALL, YHAT, Y, alpha=1.5)
    with pytest.raises(ValueError, match="not among the 3 judged items.*'zz'"):
        estimates({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 1, "zz": 0})
    with pytest.raises(ValueError, match="outside"):
        estimates({"a": 1.5, "b": 0.2}, {"a": 1}, binary=True)


def test_item_keyed_estimates_match_the_arrays_and_quote_ppi():
    f, y, mask = _draw(4, N=120, n=30)
    ids = [f"q{i}" for i in range(120)]
    judge = dict(zip(ids, f))
    human = {ids[i]: y[i] for i in np.flatnonzero(mask)}
    e = estimates(judge, human, binary=True)
    assert e.ppi.ci == pytest.approx(ppi_mean(f, f[mask], y[mask], binary=True).ci)
    assert e.human_only.ci == pytest.approx(classical_mean(y[mask], binary=True).ci)
    assert e.judge_only.estimate == pytest.approx(f.mean())
    assert e.quote[0] == "ppi++" and [r["quote"] for r in e.rows()] == [False, False, True]
    assert e.value == e.ppi.estimate and e.frame().shape[0] == 3


def test_paired_difference_is_ppi_of_the_differences():
    f, y, mask = _draw(5, N=100, n=40)
    g, x, _ = _draw(6, N=100, n=40)
    ids = [f"q{i}" for i in range(100)]
    lab = np.flatnonzero(mask)
    e = ppi_paired_difference(dict(zip(ids, f)), dict(zip(ids, g)), {ids[i]: y[i] for i in lab},
                              {ids[i]: x[i] for i in lab}, binary=True)
    d, dh = x - y, g - f
    assert e.ppi.estimate == pytest.approx(ppi_py.ppi_mean_pointestimate(d[mask], dh[mask], dh[~mask])[0])
    # the difference of two 0/1 labels lies in [−1, 1]: the finite-sample interval of that range
    assert e.ppi.ci == pytest.approx(ppi_arrays(d[mask], dh[mask], dh[~mask], bounds=(-1.0, 1.0)).ci)
    with pytest.raises(ValueError, match="label both answers"):
        ppi_paired_difference(dict(zip(ids, f)), dict(zip(ids, g)), {"q1": 1}, {"q2": 1})
    with pytest.raises(ValueError, match="same items"):
        ppi_paired_difference({"a": 0.1}, {"b": 0.1}, {}, {})


def test_stratified_is_the_weighted_sum_of_per_stratum_ppi():
    f, y, mask = _draw(7, N=200, n=60)
    ids = [f"q{i}" for i in range(200)]
    strata = {i: ("wow" if k < 80 else "tc") for k, i in enumerate(ids)}
    e = ppi_stratified(dict(zip(ids, f)), {ids[i]: y[i] for i in np.flatnonzero(mask)}, strata, binary=True)
    ests, ws, within = [], [], 0.0
    for part in (slice(0, 80), slice(80, 200)):
        m, ff, yy = mask[part], f[part], y[part]
        w = ff.size / 200
        k = ppi_arrays(yy[m], ff[m], ff[~m], bounds=(0.0, 1.0))
        assert k.estimate == pytest.approx(ppi_py.ppi_mean_pointestimate(yy[m], ff[m], ff[~m])[0])
        ests.append(k.estimate), ws.append(w)
        within += w ** 2 * k.se ** 2
    est = float(np.dot(ws, ests))
    # the strata's shares are a sample too: Σ w_k (θ̂_k − θ̂)²/N joins the within-strata variance
    between = sum(w * (t - est) ** 2 for w, t in zip(ws, ests)) / 200
    assert e.ppi.estimate == pytest.approx(est) and e.ppi.se == pytest.approx(math.sqrt(within + between))
    assert "λ per stratum: tc" in e.ppi.note
    few = ppi_stratified({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 1, "b": 0}, {"a": "x", "b": "x", "c": "y"})
    assert math.isnan(few.ppi.estimate) and "'y' (0 of 1 items labelled)" in few.ppi.note
    with pytest.raises(ValueError, match="no stratum"):
        ppi_stratified({"a": 0.1, "b": 0.2}, {"a": 1}, {"a": "x"})


def test_active_design_hand_computed():
    f = np.array([0.5, 0.9, 0.1, 0.5])
    pi = np.array([0.5, 0.25, 0.25, 1.0])
    drawn = np.array([True, False, True, True])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    r, h = active_arrays(y, f, pi, drawn, lam=1.0, finite=False)
    # T = f + (Y − f)ξ/π = [0.5 + 0.5/0.5, 0.9, 0.1 − 0.1/0.25, 0.5 + 0.5] = [1.5, 0.9, −0.3, 1.0]
    t = np.array([1.5, 0.9, -0.3, 1.0])
    assert r.estimate == pytest.approx(t.mean()) and r.se == pytest.approx(t.std() / 2)
    # human-only IPW: A = Yξ/π = [2, 0, 0, 1]
    assert h.estimate == pytest.approx(0.75) and h.se == pytest.approx(np.std([2, 0, 0, 1]) / 2)
    # finite: var₁(T)/N and t with n − 1 = 2 degrees of freedom; with 0/1 labels, 4 pseudo-labels weighted by
    # the mean 1/π of the drawn items (w̄ = (2 + 4 + 1)/3) add 4·w̄²/4 to the sum of squares
    from scipy.stats import t as student

    fin, _ = active_arrays(y, f, pi, drawn, lam=1.0)
    assert fin.se == pytest.approx(t.std(ddof=1) / 2)
    assert fin.ci == pytest.approx((t.mean() - student.ppf(0.975, 2) * fin.se, t.mean() + student.ppf(0.975, 2) * fin.se))
    ranged, _ = active_arrays(y, f, pi, drawn, lam=1.0, bounds=(0.0, 1.0))
    ss = ((t - t.mean()) ** 2).sum() + (7 / 3) ** 2
    assert ranged.se == pytest.approx(math.sqrt(ss / (3 + 4) / 4))
    tuned, _ = active_arrays(y, f, pi, drawn)
    assert 0.0 <= tuned.lam <= 1.0


def test_inclusion_probabilities_sum_to_the_budget_and_cap_at_one():
    u = uncertainty(np.array([0.5, 0.5, 0.9, 1.0, 0.0, np.nan]))
    assert u == pytest.approx([0.5, 0.5, 0.3, 0.0, 0.0, 0.5])
    pi = inclusion_probabilities(u, 3)
    assert pi.sum() == pytest.approx(3) and pi.max() <= 1.0 and pi.min() > 0
    assert inclusion_probabilities(np.zeros(4), 2) == pytest.approx([0.5] * 4)
    two = uncertainty(np.array([1.0, 1.0]), np.array([0.0, 1.0]))  # judges disagree on item 0 only
    assert two == pytest.approx([0.5, 0.0])
    w = expected_widths(np.full(100, 0.5), np.full(100, 0.5), 50)
    assert w["human_only"] == pytest.approx(2 * Z95 * math.sqrt(0.25 / 50))
    with pytest.raises(ValueError, match="budget"):
        inclusion_probabilities(u, 10)


def test_registered():
    for name in ("ppi_mean", "ppi_mean_difference", "ppi_stratified_mean"):
        m = registry.get(name)
        assert m.family == "ppi" and m.kind == "estimator" and "θ̂" in m.doc


def test_estimates_from_a_per_item_frame():
    import pandas as pd

    frame = pd.DataFrame({"id": list("abcdefghi"), "score": ALL, "label": [*Y, *[None] * 5]})
    e = estimates_from_frame(frame, "score", "label", binary=True)
    assert e.ppi.ci == pytest.approx(ppi_mean(ALL, YHAT, Y, binary=True).ci) and e.ppi.n == 4 and e.ppi.N == 9
    with pytest.raises(ValueError, match="no column 'human'"):
        estimates_from_frame(frame, "score", "human")


def test_public_name():
    import ragnb

    assert ragnb.ppi_mean is ppi_mean and ragnb.classical_mean is classical_mean and ragnb.judge_mean is judge_mean
