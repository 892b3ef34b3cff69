"""The learned active design (ragnb.metrics.ppi_learned; ``label-plan --active``): a hand-computed estimate, the
decision to stay uniform where the judge's score says nothing of its error, unbiasedness by simulation, and the
two rounds end to end through real CSV sheets."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ragnb.cli.main import build_cli
from ragnb.datasets.label_plan import learned_design, plan
from ragnb.metrics.ppi_learned import MARGIN, ErrorModel, fit_error, learned_arrays, learned_probabilities


def test_hand_computed_two_round_estimate():
    # N = 6; round 1 = items 0, 1; round 2 drew items 2 and 4 of the other four (π as given), budget n₂ = 2
    f = np.array([0.2, 0.8, 0.4, 0.6, 0.9, 0.1])
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    first = np.array([1, 1, 0, 0, 0, 0], dtype=bool)
    drawn = np.array([0, 0, 1, 0, 1, 0], dtype=bool)
    pi = np.array([1.0, 1.0, 0.5, 0.25, 0.75, 0.5])
    model = ErrorModel(0.5, 0.1, np.empty(0), np.ones(1), 1.0, f[first], np.ones(2))
    r = learned_arrays(y, f, first, drawn, pi, 2, model, finite=False)
    # a = 2/4; r = y − 0.5f: r₀ = −0.1, r₁ = 0.6, r₂ = 0.8, r₄ = 0.55; λ·mean(f) = 0.25, a·mean(r₀, r₁) = 0.125,
    # (1 − a)·(c + ((0.8 − 0.1)/0.5 + (0.55 − 0.1)/0.75)/4) = 0.5·(0.1 + 0.5) = 0.3
    assert r.estimate == pytest.approx(0.675, abs=1e-12)
    # se² = (λ²var₀(f) + 2λ·cov₀(f₁, r₁))/N + var₀(r₁)(a²/n₁ + (1 − a)²/|R|) + (1 − a)²Σd²(1 − π)/|R|²
    #     = (0.25·0.52/6 + 0.105)/6 + 0.1225·(0.125 + 0.0625) + 0.25·(1.96·0.5 + 0.36·0.25)/16
    assert r.se ** 2 == pytest.approx((0.25 * 0.52 / 6 + 0.105) / 6 + 0.1225 * 0.1875 + 0.25 * 1.07 / 16, abs=1e-12)
    assert r.n == 4 and r.method == "learned_ppi++" and "too few" in r.note


def _uninformative(n: int, seed: int) -> pd.DataFrame:
    """A judge whose score says nothing of its error: labels independent of the score."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": [f"i{k}" for k in range(n)], "s": rng.uniform(0, 1, n),
                         "y": (rng.uniform(size=n) < 0.3).astype(float)})


def _telling(n: int, seed: int) -> pd.DataFrame:
    """A judge right on every low score and a coin toss on the high ones: its error lies where it scores high."""
    rng = np.random.default_rng(seed)
    s = np.where(rng.uniform(size=n) < 0.6, rng.uniform(0.0, 0.2, n), rng.uniform(0.6, 1.0, n))
    y = np.where(s < 0.5, 0.0, (rng.uniform(size=n) < 0.5).astype(float))
    return pd.DataFrame({"id": [f"i{k}" for k in range(n)], "s": s, "y": y})


def test_plan_stays_uniform_where_the_score_says_nothing_of_the_error():
    frame = _uninformative(600, 1)
    first = frame.sample(100, random_state=0)
    out = plan(frame, "s", 100, active=True, labelled=dict(zip(first["id"], first["y"])), earlier=["uniform"])
    assert out.report["design"].startswith("uniform budget=100") and "stays uniform" in out.report["design_note"]
    assert out.report["expected_width_learned_over_uniform"] > 1 - MARGIN
    assert out.sheet["inclusion_probability"].to_numpy() == pytest.approx([100 / 500] * 100)
    # where the error is telling, the same budget is learned: fewer labels on the scores the judge gets right
    frame = _telling(600, 1)
    first = frame.sample(100, random_state=0)
    out = plan(frame, "s", 100, active=True, labelled=dict(zip(first["id"], first["y"])), earlier=["uniform"])
    assert out.report["design"].startswith("learned budget=100") and "is learned" in out.report["design_note"]
    assert out.report["expected_width_learned_over_uniform"] <= 1 - MARGIN
    pi, low = out.sheet["inclusion_probability"], out.sheet["judge_score"] < 0.5
    assert pi[low].mean() < 0.75 * pi[~low].mean()
    # no labels yet: a uniform first round, and the plan says what to do next
    out = plan(frame, "s", 50, active=True)
    assert out.report["design"] == "uniform budget=50 N=600 seed=0" and "first round is uniform" in \
        out.report["design_note"]


def test_estimate_is_unbiased_by_simulation():
    """A fixed population of 400 items; round 1 (60 uniform), the error fit, round 2 (60 learned) drawn 4,000 times.
    For a fixed λ the estimate's mean is the population's mean label exactly; the tolerance is 4 standard errors
    of the simulation's mean (a false alarm about 1 in 16,000)."""
    pop = _telling(400, 7)
    f, y, truth = pop["s"].to_numpy(), pop["y"].to_numpy(), float(pop["y"].mean())
    rng = np.random.default_rng(11)
    est = []
    for _ in range(4000):
        first = np.zeros(400, dtype=bool)
        first[rng.choice(400, 60, replace=False)] = True
        model = fit_error(y[first], f[first], f[~first])
        model = replace(model, lam=0.7, c=float(np.mean(y[first] - 0.7 * f[first])))  # λ fixed, c from round 1
        pi_rest = learned_probabilities(model, f[~first], 60)  # always learned (the decision only picks this)
        pi = np.ones(400)
        pi[~first] = pi_rest
        drawn = np.zeros(400, dtype=bool)
        drawn[~first] = rng.uniform(size=340) < pi_rest
        est.append(learned_arrays(y, f, first, drawn, pi, 60, model, finite=False).estimate)
    est = np.array(est)
    assert abs(est.mean() - truth) < 4 * est.std(ddof=1) / math.sqrt(est.size)


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def _fill(sheet, out, truth, skip=()):
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    for r in rows[1:]:
        r[1] = "" if r[0] in skip else ("yes" if truth[r[0]] else "no")
    with open(out, "w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return [r[0] for r in rows[1:]]


def test_two_rounds_end_to_end(tmp_path):
    frame = _telling(500, 3)
    truth = dict(zip(frame["id"], frame["y"]))
    table = tmp_path / "scores.csv"
    frame[["id", "s"]].to_csv(table, index=False)
    r = _cli("dataset", "label-plan", "--scores", str(table), "--score", "s", "--budget", "80", "--active",
             "--output", str(tmp_path / "r1.csv"))
    assert r.exit_code == 0, r.output
    assert "first round is uniform" in json.loads(r.output.split("\n", 1)[1])["design_note"]
    first = _fill(tmp_path / "r1.csv", tmp_path / "r1f.csv", truth)
    r = _cli("dataset", "label-plan", "--scores", str(table), "--score", "s", "--budget", "80", "--active",
             "--labelled", str(tmp_path / "r1f.csv"), "--seed", "4", "--output", str(tmp_path / "r2.csv"))
    assert r.exit_code == 0, r.output
    labels = {i: truth[i] for i in first}
    model, pick, _, pi, f, was_first = learned_design(frame.rename(columns={}), "s", 80, labels)
    assert pick
    rows = list(csv.DictReader(open(tmp_path / "r2.csv", encoding="utf-8-sig")))
    pos = {i: k for k, i in enumerate(frame["id"])}
    assert [float(r_["inclusion_probability"]) for r_ in rows] == pytest.approx([pi[pos[r_["id"]]] for r_ in rows])
    assert {r_["design"] for r_ in rows} == {"learned budget=80 N=500 seed=4 mix=0.3 labelled=80"}
    second = _fill(tmp_path / "r2.csv", tmp_path / "r2f.csv", truth)
    r = _cli("dataset", "ppi", "--scores", str(table), "--score", "s", "--labels", str(tmp_path / "r1f.csv"),
             "--labels", str(tmp_path / "r2f.csv"), "--binary", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    y = frame["y"].to_numpy()
    expect = learned_arrays(y, f, was_first, frame["id"].isin(second).to_numpy(), pi, 80, model, bounds=(0.0, 1.0))
    assert out["ppi"]["method"] == "learned_ppi++" and out["ppi"]["estimate"] == pytest.approx(expect.estimate)
    assert out["ppi"]["ci"] == pytest.approx(list(expect.ci)) and out["labelled"] == 80 + len(second)
    # a drawn row left empty cannot be weighted; a learned sheet after a learned one is refused
    _fill(tmp_path / "r2.csv", tmp_path / "part.csv", truth, skip=second[:1])
    r = _cli("dataset", "ppi", "--scores", str(table), "--score", "s", "--labels", str(tmp_path / "r1f.csv"),
             "--labels", str(tmp_path / "part.csv"), "--binary")
    assert r.exit_code == 2 and "every drawn row must be labelled" in r.output and second[0] in r.output
    r = _cli("dataset", "label-plan", "--scores", str(table), "--score", "s", "--budget", "20", "--active",
             "--labelled", str(tmp_path / "r1f.csv"), "--labelled", str(tmp_path / "r2f.csv"),
             "--output", str(tmp_path / "r3.csv"))
    assert r.exit_code == 2 and "uniform rounds only" in r.output
