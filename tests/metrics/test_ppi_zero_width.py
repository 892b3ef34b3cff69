"""No zero-width PPI interval is quoted or graded (issue 26, item 8): labels of unknown range that leave nothing to
measure get no interval and a note; a zero-width interval in a record is not graded."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from ragnb.metrics.ppi import classical_mean, ppi_mean

F = np.linspace(0.05, 0.95, 200)


@pytest.mark.parametrize("labels", [np.ones(25), np.full(12, 0.4)])
def test_constant_labels_of_unknown_range_have_no_interval(labels):
    n = labels.size
    for r in (ppi_mean(F, F[:n], labels), classical_mean(labels)):
        assert r.estimate == pytest.approx(labels[0]) and all(math.isnan(x) for x in r.ci)
        assert "no interval" in r.note and "binary=True" in r.note
    # the authors' normal interval keeps its zero width (the oracle's behaviour), flagged by its note
    assert ppi_mean(F, F[:n], labels, finite=False).width == pytest.approx(0.0, abs=1e-12)


def test_constant_binary_labels_are_wilson():
    r = ppi_mean(F, F[:25], np.ones(25), binary=True)
    assert r.ci == pytest.approx(proportion_confint(25, 25, method="wilson"), abs=1e-12)


def test_a_zero_width_ppi_interval_is_not_graded():
    from ragnb import spec
    from ragnb.runs.record import ppi_view

    judge = {"mean": 0.97, "ci95": [0.95, 0.99], "n": 200, "n_valid": 200, "n_failed": 0}
    old = {"estimate": 1.0, "ci_low": 1.0, "ci_high": 1.0, "n": 25, "N": 200, "method": "ppi++", "n_failed": 0}
    grade = spec.grade_of((0.9, 0.7), ppi_view("m", judge, {"m_ppi": old}))
    assert grade.status is None and grade.rule == "says_nothing"
    wilson = {**old, "ci_low": 0.8668}
    assert spec.grade_of((0.9, 0.7), ppi_view("m", judge, {"m_ppi": wilson})).status == "excellent"
