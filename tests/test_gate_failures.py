"""The gate and failed items (issue 26, item 11): a gated metric that failed on too many items of a run fails the
gate with the counts, in the message and in the Markdown; a gated name without a registered direction is refused.
Hand-made run records and per-item files whose counts are known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ragnb.cli.main import build_cli
from ragnb.metrics.stats import aggregate
from ragnb.runs.compare import compare_runs, higher_is_better, load_runs
from ragnb.runs.gate import gate, to_markdown
from ragnb.runs.record import append_run_record
from ragnb.runs.build import build_record
from ragnb.tiers import payload
from ragnb.tiers.rag_suite import LLM_METRICS

A, B = "20250101-000000-aaaa", "20250102-000000-bbbb"
N = 20


def _values(seed: int, failed: int) -> np.ndarray:
    v = np.random.default_rng(seed).uniform(0.6, 0.9, N)
    v[N - failed:] = np.nan  # the refused judge requests: NaN, counted as failed
    return v


def _runs(out, failed_b: dict[str, int], extra_b: dict[str, int] | None = None) -> None:
    """Run A scores all 20 items; run B (the same values) loses ``failed_b[metric]`` items to refusals."""
    ids = [f"q{k:02d}" for k in range(N)]
    for run_id, failed in ((A, {}), (B, failed_b)):
        df = pd.DataFrame({m: _values(i, failed.get(m, 0)) for i, m in
                           enumerate(("faithfulness", "noise_sensitivity", "context_recall"))},
                          index=pd.Index(ids, name="id"))
        metrics = {c: aggregate(df[c].to_numpy(), n_boot=50) for c in df.columns}
        payload.write_metrics(out / "runs" / run_id, "rag_metrics", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(
            run_id, {}, None, None, "mini", {"other_metrics": {"rag_metrics": metrics}}, cwd=out))


def _compare(out, patterns: list[str], **kw):
    runs = load_runs(out / "benchmark_runs.json")
    comparison = compare_runs(runs, out, A, B)
    return comparison, gate(comparison, patterns, **kw)


def test_a_quarter_of_judge_requests_refused_fails_the_gate_with_the_counts(tmp_path):
    out = tmp_path / "out"
    _runs(out, {"faithfulness": 7, "noise_sensitivity": 13})
    comparison, result = _compare(out, ["faithfulness", "noise_sensitivity", "context_recall"])
    assert result.outcome == "too many failed"
    assert result.failed == [
        "rag_metrics faithfulness: run B scored 13 of 20 items (7 failed, 35% > the 5% limit)",
        "rag_metrics noise_sensitivity: run B scored 7 of 20 items (13 failed, 65% > the 5% limit)"]
    md = to_markdown(comparison, result)
    assert "❌ **Gate: too many failed**" in md and "run B scored 13 of 20 items" in md
    row = next(line for line in md.splitlines() if "`faithfulness`" in line)
    assert row.endswith("| 20; 13 of 20 |")
    assert next(line for line in md.splitlines() if "`context_recall`" in line).endswith("| 20; 20 |")
    # the same values on the surviving items: without the limit the test alone would pass
    assert gate(comparison, ["faithfulness"], max_failed=0.5).outcome == "pass"
    # context_recall lost nothing: gated alone it passes
    assert gate(comparison, ["context_recall"]).outcome == "pass"


def test_the_limit_is_a_share_and_one_failure_in_twenty_is_within_5_percent(tmp_path):
    out = tmp_path / "out"
    _runs(out, {"faithfulness": 1})  # 1/20 = 5%: not more than the limit
    comparison, result = _compare(out, ["faithfulness"])
    assert result.outcome == "pass" and result.failed == []
    assert gate(comparison, ["faithfulness"], max_failed=0.04).failed == [
        "rag_metrics faithfulness: run B scored 19 of 20 items (1 failed, 5% > the 4% limit)"]
    with pytest.raises(ValueError, match=r"--max-failed 1\.5: give the share"):
        gate(comparison, ["faithfulness"], max_failed=1.5)


def test_cli_exits_1_with_the_counts_and_refuses_a_bad_limit(tmp_path):
    out = tmp_path / "out"
    _runs(out, {"faithfulness": 5})
    res = CliRunner().invoke(build_cli(), ["compare", A, B, "--outputs", str(out), "--fail-if-worse",
                                           "faithfulness", "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 1
    assert json.loads(res.stdout)["gate"]["too_many_failed"] == [
        "rag_metrics faithfulness: run B scored 15 of 20 items (5 failed, 25% > the 5% limit)"]
    res = CliRunner().invoke(build_cli(), ["compare", A, B, "--outputs", str(out), "--fail-if-worse",
                                           "faithfulness", "--max-failed", "0.3"], catch_exceptions=False)
    assert res.exit_code == 0 and "**Gate: pass**" in res.stdout
    res = CliRunner().invoke(build_cli(), ["compare", A, B, "--outputs", str(out), "--fail-if-worse",
                                           "faithfulness", "--max-failed", "-1"], catch_exceptions=False)
    assert res.exit_code == 2 and "--max-failed -1.0: give the share" in res.stderr


@pytest.mark.parametrize("name", LLM_METRICS)
def test_every_name_the_rag_suite_writes_has_a_direction(name):
    # noise_sensitivity is the suite's name for noise_sensitivity_relevant: lower is better
    assert higher_is_better(name, "rag_metrics") is (name != "noise_sensitivity")


def test_noise_sensitivity_is_gated_in_its_direction(tmp_path):
    out = tmp_path / "out"
    _runs(out, {})
    runs = load_runs(out / "benchmark_runs.json")
    comparison = compare_runs(runs, out, A, B)
    row = next(r for r in comparison.records() if r["metric"] == "noise_sensitivity")
    assert row["higher_is_better"] is False


def test_a_gated_metric_without_a_direction_is_refused(tmp_path):
    out = tmp_path / "out"
    ids = [f"q{k}" for k in range(N)]
    for run_id in (A, B):
        df = pd.DataFrame({"made_up_score": _values(3, 0)}, index=pd.Index(ids, name="id"))
        metrics = {"made_up_score": aggregate(df["made_up_score"].to_numpy(), n_boot=50)}
        payload.write_metrics(out / "runs" / run_id, "rag_metrics", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(
            run_id, {}, None, None, "mini", {"other_metrics": {"rag_metrics": metrics}}, cwd=out))
    res = CliRunner().invoke(build_cli(), ["compare", A, B, "--outputs", str(out), "--fail-if-worse",
                                           "made_up_score"], catch_exceptions=False)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "rag_metrics made_up_score has no registered direction" in res.stderr
    assert "so the gate could never find it worse" in res.stderr
