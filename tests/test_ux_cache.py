"""Tier UX cache: the cache holds only earlier questions, hits are judged by the strictest oracle the log has, and
the calibrated τ is judged on users it was not chosen on. Hand-made vectors, hand-computed values."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from ragnb.metrics.ux import cache_hit_rate
from ragnb.metrics.ux_oracle import answer_keys, oracle_flags
from ragnb.metrics.ux_tau_split import split_units, validate_tau
from ragnb.tiers.ux import run_tier_ux

# --------------------------------------------------------------------------------------------
# Earlier questions only
# --------------------------------------------------------------------------------------------

# cache c1 = (1, 0) asked 10:00, c2 = (0.6, 0.8) asked 10:05, c3 = (0.8, 0.6) undated
_C = np.array([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6]])
_C_TIMES = ["2026-03-01T10:00:00Z", datetime(2026, 3, 1, 10, 5, tzinfo=timezone.utc), None]
_Q = np.array([[0.8, 0.6], [0.6, 0.8], [0.6, 0.8], [1.0, 0.0]])
# qa 10:05 (c2 asked at the same instant: not before it), qb 10:06 written with a +01:00 offset, qc undated, qd
# 09:00 (before every cached question)
_Q_TIMES = ["2026-03-01T10:05:00Z", "2026-03-01T11:06:00+01:00", None, "2026-03-01T09:00:00Z"]


def test_cache_holds_only_questions_asked_before():
    r = cache_hit_rate(_Q, _C, tau=0.85, query_ids=["qa", "qb", "qc", "qd"], cache_ids=["c1", "c2", "c3"],
                       query_times=_Q_TIMES, cache_times=_C_TIMES)
    pq = r.per_query
    # qa: only c1 is earlier (c2 ties, c3 is undated) → cos 0.8, a miss; qb: c1 (0.6) and c2 (1.0) → c2, a hit
    assert pq["best_cache_id"].tolist()[:2] == ["c1", "c2"]
    assert pq["max_similarity"].tolist()[:2] == pytest.approx([0.8, 1.0])
    assert pq["n_compared"].tolist() == [1, 2, 0, 0]
    # qc is undated and qd has nothing earlier: nothing to compare → undefined, counted, not a miss
    np.testing.assert_array_equal(pq["hit"], [0.0, 1.0, np.nan, np.nan])
    assert r.rate == 0.5
    assert {k: v for k, v in r.time_order.items() if k != "rule"} == {
        "applied": True, "n_undated_queries": 1, "n_undated_cache": 1, "n_no_earlier": 1}
    assert "same instant is not before" in r.time_order["rule"] and "no cache entry asked before" in r.note
    # the whole cache, later and undated questions included, serves qa the undated c3 at 1.0: a hit it never had
    everything = cache_hit_rate(_Q, _C, tau=0.85, query_ids=["qa", "qb", "qc", "qd"], cache_ids=["c1", "c2", "c3"])
    assert everything.per_query["best_cache_id"].tolist() == ["c3", "c2", "c2", "c1"] and everything.rate == 1.0
    assert everything.time_order is None


def test_time_inputs_are_checked():
    with pytest.raises(ValueError, match="query_times.*ISO 8601"):
        cache_hit_rate(_Q, _C, query_times=["yesterday-ish"] * 4, cache_times=_C_TIMES)
    with pytest.raises(ValueError, match="both query_times and cache_times"):
        cache_hit_rate(_Q, _C, query_times=_Q_TIMES)
    with pytest.raises(ValueError, match="cache_times has 2 entries for 3 vectors"):
        cache_hit_rate(_Q, _C, query_times=_Q_TIMES, cache_times=_C_TIMES[:2])


def test_tier_ux_cache_is_time_ordered_only_where_both_sides_are_dated():
    queries = pd.DataFrame({"question": ["qa", "qb", "qc", "qd"], "created_at": _Q_TIMES}, index=["qa", "qb", "qc", "qd"])
    cache = pd.DataFrame({"question": ["c1", "c2", "c3"], "created_at": _C_TIMES}, index=["c1", "c2", "c3"])
    r = run_tier_ux(queries, _Q, cache, _C, None, tau=0.85, n_boot=0)
    rate, order = r.summary["cache_hit_rate"], r.summary["cache"]["time_order"]
    assert (rate["mean"], rate["n_valid"], rate["n_failed"]) == (0.5, 2, 2)
    assert order["applied"] is True and order["n_no_earlier"] == 1
    assert any(n.startswith("The simulated cache holds only questions asked before") for n in r.notes)
    undated = run_tier_ux(queries.drop(columns="created_at"), _Q, cache, _C, None, tau=0.85, n_boot=0).summary
    assert undated["cache_hit_rate"]["mean"] == 1.0
    assert undated["cache"]["time_order"]["applied"] is False
    assert "questions carry no time" in undated["cache"]["time_order"]["reason"]


# --------------------------------------------------------------------------------------------
# The oracle: the same answer where both are known, else the same page
# --------------------------------------------------------------------------------------------

_W = "https://wiki.example.com/"


def test_answer_keys_leave_out_placeholders_and_canned_replies():
    keys, left = answer_keys(["Open the VPN portal.", "  ", None, "…", "N/A", "See the wiki.", "see the wiki",
                              "Ask the desk"], ["a", "a", None, "a", "b", "a", "b", None])
    # "See the wiki." is logged for pages a and b: a stock reply, not an answer; "Ask the desk" has no page
    assert keys == ["open the vpn portal", None, None, None, None, None, None, "ask the desk"]
    # "…" is punctuation only, which normalisation strips: empty; "N/A" is a listed placeholder
    assert left == {"empty": 3, "placeholder": 1, "canned": 2}
    correct, oracle = oracle_flags(np.array([1.0, 0.0, np.nan, np.nan]), np.array([0.0, 1.0, 1.0, np.nan]))
    np.testing.assert_array_equal(correct, [1.0, 0.0, 1.0, np.nan])
    assert oracle == ["same answer", "same answer", "same page", ""]


def test_hit_precision_uses_the_strictest_oracle_per_hit():
    # cache c1 = (1, 0) page A "Open the VPN portal.", c2 = (0, 1) page B "See the wiki."
    cache = pd.DataFrame({"question": ["cached 1", "cached 2"], "url": [_W + "a", _W + "b"],
                          "answer": ["Open the VPN portal.", "See the wiki."]}, index=["c1", "c2"])
    qv = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0], [1.0, 0.0]])
    queries = pd.DataFrame({
        "question": [f"question {i}" for i in range(1, 6)],
        "url": [_W + "a", _W + "a", _W + "b", _W + "a", None],
        # q1 the same answer as c1; q2 another answer on the same page; q3 and q4 the stock reply (also logged for
        # page A and B, so not an answer); q5 no answer ("…") and no page
        "answer": ["open the VPN portal", "Ask the service desk.", "See the wiki.", "See the wiki.", "…"],
    }, index=[f"q{i}" for i in range(1, 6)])
    r = run_tier_ux(queries, qv, cache, np.eye(2), None, tau=0.5, n_boot=0)
    pq = r.per_query
    assert pq["best_cache_id"].tolist() == ["c1", "c1", "c2", "c2", "c1"] and pq["hit"].tolist() == [1] * 5
    np.testing.assert_array_equal(pq["same_page"], [1, 1, 1, 0, np.nan])
    np.testing.assert_array_equal(pq["same_answer"], [1, 0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(pq["correct"], [1, 0, 1, 0, np.nan])
    assert pq["oracle"].tolist() == ["same answer", "same answer", "same page", "same page", ""]
    prec = r.summary["cache_hit_precision"]
    # 2 of 4 judged hits are right; by the page alone it would be 3 of 4
    assert (prec["mean"], prec["n"], prec["n_valid"], prec["n_failed"]) == (0.5, 5, 4, 1)
    assert (prec["n_by_answer"], prec["n_by_page"]) == (2, 2)
    assert prec["oracle"] == "same answer where both answers are known (2 hits), else same page (2 hits)"
    info = r.summary["cache"]
    assert info["answers_not_known"] == {"empty": 1, "placeholder": 0, "canned": 3}  # "…"; the stock reply ×3
    assert (info["n_queries_with_answer"], info["n_cache_with_answer"]) == (2, 1)
    # no known answer on the cache side: every hit is judged by its page, and the report says so
    pages_only = run_tier_ux(queries, qv, cache.assign(answer=""), np.eye(2), None, tau=0.5, n_boot=0).summary
    assert pages_only["cache_hit_precision"]["mean"] == pytest.approx(3 / 4)
    assert pages_only["cache_hit_precision"]["oracle"] == "same page"


# --------------------------------------------------------------------------------------------
# τ out of sample: calibrated on half of the users, measured on the other half
# --------------------------------------------------------------------------------------------

# (user, best similarity, right?) — u1: 0.9 ✓, 0.8 ✗, 0.7 ✓; u2: 0.85 ✓, 0.75 ✗
_USERS = [("u1", 0.9, 1.0), ("u1", 0.8, 0.0), ("u1", 0.7, 1.0), ("u2", 0.85, 1.0), ("u2", 0.75, 0.0)]


def test_validate_tau_on_user_half_splits_by_hand():
    sims, correct = [s for _, s, _ in _USERS], [c for *_, c in _USERS]
    units, unit = split_units([u for u, *_ in _USERS], None, 5)
    assert unit == "user" and units[0] == "user:u1"
    summary, splits = validate_tau(sims, correct, units, 0.9, n_splits=20, seed=0)
    # Calibrated on u1 (0.9 ✓, 0.8 ✗, 0.7 ✓): above 0.7 → 1/2, above 0.8 → 1/1, so τ = 0.8; u2 above 0.8: 0.85 ✓ →
    # 1/1. Calibrated on u2: above 0.75 → 0.85 ✓, τ = 0.75; u1 above 0.75: 0.9 ✓, 0.8 ✗ → 1/2.
    by_u1 = splits["calibration_units"] == "user:u1"
    assert set(splits["calibration_units"]) == {"user:u1", "user:u2"}  # both halvings occur in 20 seeded splits
    assert splits.loc[by_u1, "tau"].tolist() == pytest.approx([0.8] * by_u1.sum())
    assert splits.loc[~by_u1, "tau"].tolist() == pytest.approx([0.75] * (~by_u1).sum())
    assert set(splits.loc[by_u1, "precision"]) == {1.0} and set(splits.loc[~by_u1, "precision"]) == {0.5}
    assert set(splits.loc[~by_u1, "n_judged"]) == {2} and set(splits["in_sample_precision"]) == {1.0}
    n1 = int(by_u1.sum())
    p = summary["precision"]
    assert p["mean"] == pytest.approx((n1 * 1.0 + (20 - n1) * 0.5) / 20)
    assert p["ci95"] == pytest.approx(list(np.percentile(splits["precision"], [2.5, 97.5])))
    assert (p["n"], p["n_valid"], p["n_failed"]) == (20, 20, 0)
    assert summary["in_sample"]["mean"] == 1.0 and summary["n_units"] == 2
    assert summary["reaches_target"] is (p["mean"] >= 0.9)
    # the same seed gives the same splits; one unit cannot be split
    assert validate_tau(sims, correct, units, 0.9, n_splits=20, seed=0)[1].equals(splits)
    alone, _ = validate_tau(sims, correct, ["user:u1"] * 5, 0.9)
    assert alone["possible"] is False and "two are needed" in alone["reason"]
    assert split_units(None, ["s1", None, "s1", "s2", "s2"], 5) == (
        ["session:s1", "question:1", "session:s1", "session:s2", "session:s2"], "session")
    assert split_units(None, None, 2) == (["question:0", "question:1"], "question")
    with pytest.raises(ValueError, match="n_splits"):
        validate_tau(sims, correct, units, 0.9, n_splits=0)


def test_tier_ux_verdict_reads_the_out_of_sample_precision():
    # cache c1 = e1 (page A), c2 = e2 (page B); each question a·e_target + b·e3, so its best similarity is a
    qv, urls = np.zeros((5, 3)), []
    for i, (_, s, right) in enumerate(_USERS):
        qv[i, 0 if right else 1], qv[i, 2] = s, math.sqrt(1 - s * s)
        urls.append(_W + "a")  # a right question matches c1 (page A), a wrong one c2 (page B)
    queries = pd.DataFrame({"question": [f"q{i}" for i in range(5)], "url": urls,
                            "user_id": [u for u, *_ in _USERS]}, index=[f"q{i}" for i in range(5)])
    cache = pd.DataFrame({"question": ["a", "b"], "url": [_W + "a", _W + "b"]}, index=["c1", "c2"])
    r = run_tier_ux(queries, qv, cache, np.eye(2, 3), None, n_boot=200)
    s = r.summary
    # all users: above 0.7 → 2/4, above 0.75 → 2/3, above 0.8 → 2/2: τ = 0.8, in-sample precision 1.0
    assert s["tau"] == pytest.approx(0.8) and s["tau_calibrated"] is True
    assert s["cache_hit_precision"]["mean"] == 1.0 and s["tau_calibration"]["in_sample"] is True
    val, v = s["tau_validation"], s["tau_verdict"]
    assert val["unit"] == "user" and val["n_splits"] == 20
    n1 = int((r.tau_splits["calibration_units"] == "user:u1").sum())
    assert v["precision"] == pytest.approx((n1 + (20 - n1) * 0.5) / 20) and v["precision"] < 0.9
    # the in-sample figure reaches the target by construction; the verdict reads the held-out users
    assert v["in_sample"]["mean"] == 1.0 and v["reaches_target"] is False and v["basis"].startswith("out of sample")
    assert any("does NOT reach the target precision 0.9" in n and "in-sample 1.000" in n for n in r.notes)
    assert "tau_splits" in r.tables
    from ragnb.tiers.ux_figures import summary_rows

    rows = summary_rows(s).set_index("metric")  # the report table shows both, side by side
    assert rows.loc["cache_hit_precision (out of sample)", "mean"] == v["precision"]
    assert rows.loc["cache_hit_precision (out of sample)", "n"] == 20 and rows.loc["cache_hit_precision", "mean"] == 1.0
    # a τ not chosen on this log is judged on its own measured precision (0.72: clear of the similarities, hits
    # 0.9 ✓, 0.85 ✓, 0.8 ✗, 0.75 ✗)
    given = run_tier_ux(queries, qv, cache, np.eye(2, 3), None, tau=0.72, n_boot=0).summary["tau_verdict"]
    assert given["reaches_target"] is False and given["precision"] == 0.5 and "not chosen" in given["basis"]
