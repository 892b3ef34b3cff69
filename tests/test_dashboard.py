"""ragnb.runs.dashboard figures/HTML/widgets and the dashboard notebook on synthetic runs with known numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import REPO
from test_compare import HIT_A, ITEMS_A, LAT_A, LAT_B, RUN_IDS, expected_comparison, make_outputs

from ragnb.runs import compare, dashboard, trends


@pytest.fixture
def synthetic(tmp_path):
    out = make_outputs(tmp_path / "out")
    runs, frame = trends.load_runs_frame(out)
    return out, runs, frame


def test_threshold_bands():
    bands = dashboard.threshold_bands("hit_rate@1")
    assert [(b["name"], b["y0"], b["y1"]) for b in bands] == [("attention", 0.0, 0.5), ("good", 0.5, 0.8),
                                                              ("excellent", 0.8, 1.0)]
    judge = dashboard.threshold_bands("accuracy", "tier_judge_pipeline_metrics", y_max=1.3)
    assert [(b["y0"], b["y1"]) for b in judge] == [(0.0, 0.85), (0.85, 0.95), (0.95, 1.3)]
    assert dashboard.threshold_bands("latency_ms") == []


def test_trend_figure_per_tier(synthetic):
    _, _, frame = synthetic
    fig = dashboard.trend_figure(frame, "tier_1_metrics")
    assert [t.name for t in fig.data] == ["hit_rate@1", "mrr", "latency_ms"]  # thresholded first
    assert [t.visible for t in fig.data] == [True, False, False]
    hit = fig.data[0]
    assert list(hit.x) == [RUN_IDS[0], RUN_IDS[2]]  # run 2 has no Tier 1
    assert hit.y[0] == pytest.approx(np.mean(list(HIT_A.values())))
    row = frame[(frame.run_id == RUN_IDS[0]) & (frame.metric == "hit_rate@1")].iloc[0]
    assert hit.error_y.array[0] == pytest.approx(row.ci_hi - row["mean"])
    assert hit.error_y.arrayminus[0] == pytest.approx(row["mean"] - row.ci_lo)
    assert list(fig.layout.xaxis.categoryarray) == list(RUN_IDS)
    assert [s.name for s in fig.layout.shapes] == ["attention", "good", "excellent"]
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["hit_rate@1", "mrr", "latency_ms"]
    assert buttons[2].args[1]["shapes"] == [] and buttons[2].args[0]["visible"] == [False, False, True]
    lat = fig.data[2]
    assert lat.y[1] == pytest.approx(np.mean([LAT_B[q] for q in LAT_B]))
    assert dashboard.trend_figure(frame, "tier_3_metrics") is None
    assert len(dashboard.trend_figures(frame)) == 3  # tier 0, tier 1, tier judge pipeline


def test_status_html_escapes_and_runs_table(synthetic):
    _, runs, frame = synthetic
    html = dashboard.status_html({"id": "r<1>", "overall_status": "attention",
                                  "executive_summary": "<script>alert(1)</script> & more"})
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "r&lt;1&gt;" in html and "attention" in html
    table = dashboard.runs_table(runs)
    assert table["run_id"].tolist() == list(reversed(RUN_IDS))
    assert table.loc[0, "notebooks"] == "tier1_retrieval, tier_judge_pipeline"
    # run 1: hit_rate@1 = 0.5 good (bound included), mrr = 0.325 and judge accuracy 0.80 attention
    assert dashboard.status_counts(frame, RUN_IDS[0]) == {"attention": 2, "good": 1, "excellent": 0}


def test_comparison_table_and_forest(synthetic):
    out, runs, _ = synthetic
    comp = compare.compare_runs(runs, out, RUN_IDS[0], RUN_IDS[2], n_boot=200)
    shown = dashboard.comparison_display(comp, tested=True).set_index("metric")
    assert shown.loc["mrr", "verdict"] == "B better" and shown.loc["mrr", "Δ (B − A)"] == "+0.2500"
    assert shown.loc["latency_ms", "A"] == f"{np.mean([LAT_A[q] for q in ITEMS_A]):.4f}"
    assert dashboard.comparison_display(comp, tested=False).empty
    unit, other = dashboard.forest_figures(comp)
    assert sorted(y for t in unit.data for y in t.y) == sorted(
        ["tier1_retrieval · hit_rate@1", "tier1_retrieval · mrr", "tier_judge_pipeline · accuracy"])
    assert {t.name for t in unit.data} == {"B better", "not significant / not tested"}
    lat = comp.table.set_index("metric").loc["latency_ms"]
    assert other.data[0].x[0] == pytest.approx(lat.delta / abs(lat.mean_a) * 100)  # relative to run A, in %
    assert "B better on 3, worse on 0" in dashboard.comparison_summary(comp)


def test_comparison_picker_widgets(synthetic):
    out, runs, _ = synthetic
    box = dashboard.comparison_picker(runs, out, RUN_IDS[0], RUN_IDS[2], n_boot=100)
    (pick_a, pick_b) = box.children[0].children
    assert len(box.children) == 3  # pickers, hint, output
    assert [v for _, v in pick_a.options] == list(reversed(RUN_IDS))
    assert (pick_a.value, pick_b.value) == (RUN_IDS[0], RUN_IDS[2])
    pick_a.value = RUN_IDS[1]  # triggers a re-render; must not raise outside a kernel
    assert pick_a.value == RUN_IDS[1]


# --------------------------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------------------------


def _papermill(tmp_path, **params):
    import papermill as pm

    out_dir = tmp_path / "report"
    pm.execute_notebook(str(REPO / "notebooks" / "dashboard.ipynb"), str(tmp_path / "dashboard.ipynb"),
                        parameters={"output_dir": str(out_dir), "n_boot": 100, **params}, cwd=str(REPO),
                        progress_bar=False, log_output=False)
    metrics = json.loads((out_dir / "dashboard.metrics.json").read_text(encoding="utf-8"))
    text = (tmp_path / "dashboard.ipynb").read_text(encoding="utf-8")
    return metrics, text


@pytest.mark.slow
def test_notebook_in_a_run_matches_independent_computation(tmp_path):
    """As the runner runs it: after this run's record is appended, outputs = this run's outputs folder."""
    from ragnb.metrics.stats import bootstrap_ci
    from ragnb.runs.runner import run_notebooks

    out = make_outputs(tmp_path / "out")
    result = run_notebooks(["dashboard"], {"n_boot": "300"}, outputs=out, log=lambda *_: None)
    assert result.failures == []
    metrics = json.loads((result.run_dir / "dashboard.metrics.json").read_text(encoding="utf-8"))
    # rendering the dashboard alone adds no run to the history it reads (its record stays in its own folder)
    assert metrics["runs"] == 3 and (metrics["run_a"], metrics["run_b"]) == (RUN_IDS[0], RUN_IDS[2])
    assert [r["id"] for r in compare.load_runs(out / "benchmark_runs.json")] == list(RUN_IDS)
    assert (result.run_dir / "run_record.json").is_file()
    # synthetic records carry no fingerprints: compared, with the note that the data could not be checked
    assert metrics["comparable"] is None and metrics["reasons"] == []
    rows = {(r["tier_key"], r["metric"]): r for r in metrics["comparison"]}
    expected = expected_comparison()
    assert set(rows) == set(expected)
    for key, exp in expected.items():
        for col, value in exp.items():
            assert rows[key][col] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, col)
    lat = rows[("tier_1_metrics", "latency_ms")]
    d = np.array([LAT_B[q] - LAT_A[q] for q in ITEMS_A])
    assert [lat["ci_lo"], lat["ci_hi"]] == pytest.approx(list(bootstrap_ci(d, n_boot=300, seed=0)))
    assert lat["verdict"] == "B better" and lat["test"] == "sign-flip permutation (exact)"
    assert rows[("tier_judge_pipeline_metrics", "accuracy")]["verdict"] == "B better (unpaired)"
    assert rows[("tier_1_metrics", "hit_rate@1")]["test"] == "McNemar exact (binary)"
    html = (result.run_dir / "dashboard.html").read_text(encoding="utf-8")
    assert "Run B vs. run A" in html and "McNemar exact (binary)" in html and "bands: attention" in html


@pytest.mark.slow
@pytest.mark.parametrize("n_runs", [0, 1])
def test_notebook_with_zero_or_one_run(tmp_path, n_runs):
    out = make_outputs(tmp_path / "out", n_runs=n_runs)
    metrics, text = _papermill(tmp_path, outputs=str(out))
    assert metrics["runs"] == n_runs and metrics["comparison"] == [] and metrics["run_a"] is None
    assert metrics["run_b"] == (RUN_IDS[0] if n_runs else None)
    assert "two runs are needed" in text
    if n_runs == 0:
        assert "No runs are recorded" in text


@pytest.mark.slow
def test_notebook_unknown_run_id(tmp_path):
    from papermill.exceptions import PapermillExecutionError

    out = make_outputs(tmp_path / "out")
    with pytest.raises(PapermillExecutionError, match=r"unknown run id 'nope'.*20250101-100000-aaaa"):
        _papermill(tmp_path, outputs=str(out), run_a="nope", metrics="mrr, acc*")


@pytest.mark.slow
def test_demo_reference_run_is_not_comparable(tmp_path):
    """As `ragnb demo` does it: Tier 1 on the English text first (the reference run), then the Russian run with
    the dashboard. Different question texts and a different corpus: "not comparable", no winner, no p-value;
    one trend line per dataset + corpus."""
    from ragnb.runs.runner import run_notebooks

    out = tmp_path / "out"
    quiet = {"log": lambda *_: None, "outputs": out}
    ref = run_notebooks(["tier1"], {"language": "en", "max_questions": 40, "n_boot": 50}, **quiet)
    main = run_notebooks(["tier1", "dashboard"], {"language": "ru", "max_questions": 40, "n_boot": 50}, **quiet)
    assert ref.failures == [] and main.failures == []
    metrics = json.loads((main.run_dir / "dashboard.metrics.json").read_text(encoding="utf-8"))
    assert (metrics["run_a"], metrics["run_b"]) == (ref.run_id, main.run_id)
    assert metrics["comparable"] is False
    assert any("different datasets" in r for r in metrics["reasons"])
    assert any("different corpora" in r for r in metrics["reasons"])
    rows = metrics["comparison"]
    assert rows and all(r["verdict"] == "not comparable" and r["p_value"] is None and r["p_holm"] is None
                        for r in rows)
    kinds = {d["kind"] for d in metrics["differences"]}
    assert {"parameter", "dataset", "database"} <= kinds
    assert any(d["name"] == "tier1_retrieval.language" for d in metrics["differences"])
    html = (main.run_dir / "dashboard.html").read_text(encoding="utf-8")
    assert "Not comparable." in html and "different corpora" in html and "What differs between the two runs" in html
    assert "B better on" not in html  # no "B better on n, worse on m" summary (only the explanatory text names verdicts)
    # the trend chart draws the two runs as two lines (one per dataset + corpus), not one line with a "regression"
    runs, frame = trends.load_runs_frame(out)
    fig = dashboard.trend_figure(frame, "tier_1_metrics")
    visible = [t for t in fig.data if t.visible]
    assert len(visible) == 2 and all(len(t.x) == 1 for t in visible)
    # rendering the dashboard again adds no run
    again = run_notebooks(["dashboard"], {}, **quiet)
    assert again.failures == [] and len(compare.load_runs(out / "benchmark_runs.json")) == 2


def test_failed_and_empty_runs_are_listed_not_drawn(synthetic):
    from ragnb.runs.record import append_run_record
    from ragnb.runs.build import build_record

    out, _, _ = synthetic
    block = {"tier": "tier_1", "hit_rate@1": {"mean": 0.01, "ci95": [0.0, 0.03], "n": 12, "n_valid": 12, "n_failed": 0}}
    failed = build_record("20250104-100000-dddd", {"tier_1_metrics": block}, None, None, None,
                          {"failures": ["tier2"]}, cwd=out)
    empty = build_record("20250105-100000-eeee", {}, None, None, None, cwd=out)
    for record in (failed, empty):
        append_run_record(out / "benchmark_runs.json", record)
    runs, frame = trends.load_runs_frame(out)
    assert failed["overall_status"] == "failed" and len(dashboard.runs_table(runs)) == 5  # listed
    fig = dashboard.trend_figure(frame, "tier_1_metrics")
    assert list(fig.data[0].x) == [RUN_IDS[0], RUN_IDS[2]]  # the failed run's 0.01 is not a point
    assert "20250104-100000-dddd" not in list(fig.layout.xaxis.categoryarray)
    assert dashboard.not_drawn(runs, frame) == ["20250104-100000-dddd: failed (notebooks: tier2)",
                                                "20250105-100000-eeee: no metric values (no-data)"]
