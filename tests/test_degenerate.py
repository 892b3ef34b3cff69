"""Degenerate aggregates (docs/metrics.md, Conventions): a constant metric, or one of fewer than 10 valid items,
is flagged, never graded, never decides the overall status, and every report says why."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ragnb.metrics.stats import FEW_ITEMS, aggregate, degenerate_reason, summary_frame
from ragnb.runs.pages import index_html
from ragnb.runs.dashboard import trend_figure
from ragnb.runs.record import block_status, overall_status
from ragnb.runs.summary import executive_summary


def test_constant_input_is_flagged():
    agg = aggregate(np.full(612, 0.982014))
    assert agg["constant"] is True and agg["few_items"] is False
    assert agg["ci95"] == [0.982014, 0.982014]  # the zero-width CI the flag explains
    assert degenerate_reason(agg) == "constant: all 612 valid items are 0.982"
    # NaN items do not break constancy: 0.5 on every valid item, 3 failed
    assert aggregate([0.5] * 20 + [math.nan] * 3)["constant"] is True
    # one differing item → not constant
    assert aggregate([1.0] * 99 + [0.0])["constant"] is False


def test_few_valid_items_are_flagged():
    assert FEW_ITEMS == 10
    nine = aggregate([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, math.nan, math.nan])
    assert (nine["n"], nine["n_valid"], nine["few_items"], nine["constant"]) == (11, 9, True, False)
    assert degenerate_reason(nine) == "only 9 valid items (fewer than 10)"
    ten = aggregate(np.linspace(0, 1, 10))
    assert ten["few_items"] is False and degenerate_reason(ten) is None
    empty = aggregate([math.nan, math.nan])
    assert empty["few_items"] is True and empty["constant"] is False
    both = aggregate([1.0, 1.0, 1.0])
    assert degenerate_reason(both) == "constant: all 3 valid items are 1; only 3 valid items (fewer than 10)"
    assert degenerate_reason(0.5) is None and degenerate_reason({"mean": 0.5}) is None  # older records


def test_summary_frame_says_why():
    frame = summary_frame({"a": aggregate(np.full(50, 1.0)), "b": aggregate(np.linspace(0, 1, 50))})
    says = frame.set_index("metric")["says_nothing"]
    assert says["a"] == "constant: all 50 valid items are 1" and pd.isna(says["b"])


def _record() -> dict:
    varied = aggregate(np.linspace(0.0, 0.6, 200))  # mean 0.3: attention on its own
    return {"id": "r1", "overall_status": None, "dataset_file": "d.jsonl",
            "tier_1_metrics": {"hit_rate@1": aggregate(np.full(200, 1.0)), "mrr": aggregate(np.linspace(0.7, 1.0, 200))},
            "tier_3_metrics": {"e2e_score": aggregate([0.95] * 5), "judge_faithfulness": varied,
                               "judge_backend": "openai-compatible"}}


def test_constant_graded_metric_has_no_status_and_the_summary_says_why():
    rec = _record()
    block = rec["tier_1_metrics"]
    assert block_status("hit_rate@1", block["hit_rate@1"], "tier_1_metrics", block) is None
    assert block_status("mrr", block["mrr"], "tier_1_metrics", block) == "excellent"
    t3 = rec["tier_3_metrics"]
    assert block_status("e2e_score", t3["e2e_score"], "tier_3_metrics", t3) is None  # 5 items only
    # hit_rate@1 = 1.000 everywhere would be "excellent"; it decides nothing: the worst graded is faithfulness
    assert overall_status({"tier_1_metrics": block}) == "excellent"
    only_constant = {"tier_1_metrics": {"hit_rate@1": block["hit_rate@1"]}}
    assert overall_status(only_constant) == "no-data"
    text = executive_summary(rec)
    assert ("Not computed: says nothing here (constant, or fewer than 10 items) — Tier 1 (retrieval): hit_rate@1; "
            "Tier 3 (end-to-end): e2e_score.") in text
    assert "Needs attention — Tier 3 (end-to-end): judge_faithfulness = 0.300" in text and "< 0.700" in text


def test_index_page_shows_no_band_for_a_degenerate_metric():
    page = index_html(".", _record(), [])
    row = next(r for r in page.split("<tr>") if "<code>hit_rate@1</code>" in r)
    assert "says nothing here" in row and "constant: all 200 valid items are 1" in row
    for band in ("excellent", "good", "attention"):
        assert f">{band}</span>" not in row
    assert "#dafbe1" not in row and "#ddf4ff" not in row and "#ffebe9" not in row  # no band colour
    mrr = next(r for r in page.split("<tr>") if "<code>mrr</code>" in r)
    assert ">excellent</span>" in mrr


def test_dashboard_trend_draws_no_band_when_the_metric_says_nothing():
    rows = []
    for i, run in enumerate(("r1", "r2")):
        rows.append({"run_id": run, "timestamp": f"2025-01-0{i + 1}", "order": i, "tier_key": "tier_1_metrics",
                     "tier_label": "Tier 1 (retrieval)", "notebook": "tier1_retrieval", "metric": "hit_rate@1",
                     "mean": 1.0, "ci_lo": 1.0, "ci_hi": 1.0, "n": 200, "n_failed": 0, "status": None,
                     "overall_status": "no-data"})
        rows.append({**rows[-1], "metric": "mrr", "mean": 0.85, "ci_lo": 0.8, "ci_hi": 0.9, "status": "excellent"})
    fig = trend_figure(pd.DataFrame(rows), "tier_1_metrics")
    by_name = {b["label"]: b["args"][1] for b in fig.layout.updatemenus[0].buttons}
    assert by_name["mrr"]["shapes"] and not by_name["hit_rate@1"]["shapes"]
    assert "says nothing here" in by_name["hit_rate@1"]["title.text"]
