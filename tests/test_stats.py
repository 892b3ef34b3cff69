"""aggregate / bootstrap_ci: NaN accounting, determinism and the actual coverage of the 95% CI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragnb.metrics.stats import aggregate, bootstrap_ci


def test_nan_is_counted_as_failed_and_excluded_from_the_mean():
    a = aggregate([1.0, float("nan"), 3.0, 0.0])
    assert a["mean"] == pytest.approx(4 / 3)  # (1 + 3 + 0) / 3, not / 4
    assert (a["n"], a["n_valid"], a["n_failed"]) == (4, 3, 1)


def test_all_nan():
    a = aggregate([float("nan")] * 3)
    assert math.isnan(a["mean"]) and all(math.isnan(x) for x in a["ci95"])
    assert (a["n"], a["n_valid"], a["n_failed"]) == (3, 0, 3)


@pytest.mark.parametrize("values", [[], [5.0], [float("nan"), 2.0]])
def test_fewer_than_two_valid_values_give_nan_ci(values):
    a = aggregate(values)
    assert all(math.isnan(x) for x in a["ci95"])
    if len([v for v in values if v == v]) == 1:
        assert a["mean"] == pytest.approx(values[-1])


def test_ci_contains_mean_and_has_the_normal_width():
    v = np.random.default_rng(5).normal(loc=2.0, scale=3.0, size=500)
    a = aggregate(v)
    lo, hi = a["ci95"]
    assert lo < a["mean"] < hi
    # percentile bootstrap ≈ mean ± 1.96·s/√n for a normal sample
    half = 1.96 * v.std(ddof=1) / math.sqrt(v.size)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.15)


def test_constant_values_give_a_degenerate_ci():
    assert bootstrap_ci(np.full(10, 0.7)) == pytest.approx((0.7, 0.7))


def test_deterministic_for_a_fixed_seed():
    v = np.random.default_rng(1).random(100)
    assert aggregate(v, seed=3) == aggregate(v, seed=3)
    assert aggregate(v, seed=3)["ci95"] != aggregate(v, seed=4)["ci95"]


def test_coverage_of_the_95_percent_ci():
    # 200 samples of 2,000 draws from Exp(1) (true mean 1, skewed): the CI should cover 1 about 95% of
    # the time. n_boot is lowered to keep the test quick; the interval stays a 95% percentile interval.
    rng = np.random.default_rng(2024)
    hits = 0
    for rep in range(200):
        lo, hi = aggregate(rng.exponential(1.0, size=2000), n_boot=200, seed=rep)["ci95"]
        hits += lo <= 1.0 <= hi
    assert 0.88 <= hits / 200 <= 0.99


def test_no_resamples_means_no_interval_but_the_mean_stays():
    import math

    from ragnb.metrics.stats import aggregate

    out = aggregate([0.1, 0.2, 0.6], n_boot=0)
    assert out["mean"] == pytest.approx(0.3) and out["n_valid"] == 3
    assert all(math.isnan(x) for x in out["ci95"])
