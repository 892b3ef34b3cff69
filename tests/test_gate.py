"""CI gate and run management from the command line: ``ragnb compare``, ``ragnb run --fail-on attention``,
``ragnb runs list | show | delete`` — on synthetic runs whose verdicts are known in advance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from test_compare import CORPUS_200, DS_EN, DS_RU

from ragnb.cli.main import build_cli
from ragnb.runs.record import build_record, load_runs

A, B = "20250101-000000-aaaa", "20250102-000000-bbbb"
PROV = {"datasets": [DS_RU], "corpora": [CORPUS_200]}


def _runs(out, shift: float, prov_b: dict | None = PROV) -> None:
    """Two Tier 1 runs on 8 items; B's mrr is A's + ``shift`` on every item (exact sign-flip p = 2/2⁸)."""
    from ragnb.metrics.stats import aggregate
    from ragnb.runs.record import append_run_record
    from ragnb.tiers import payload

    ids = [f"i{k}" for k in range(8)]
    for run_id, s, prov in ((A, 0.0, PROV), (B, shift, prov_b)):
        df = pd.DataFrame({"mrr": np.linspace(0.4, 0.75, 8) + s, "hit_rate@1": [1.0, 0, 1, 0, 1, 1, 0, 1]},
                          index=pd.Index(ids))
        metrics = {c: aggregate(df[c].to_numpy(), n_boot=50) for c in df.columns}
        metrics["provenance"] = prov
        payload.write_metrics(out / "runs" / run_id, "tier1_retrieval", metrics, per_item=df)
        append_run_record(out / "benchmark_runs.json", build_record(run_id, {"tier_1_metrics": metrics}, None, None,
                                                                    "mini", {"duration_s": 12.0}, cwd=out))


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def test_compare_gate_passes_when_b_is_better_and_markdown_is_a_pr_comment(tmp_path):
    out = tmp_path / "out"
    _runs(out, +0.2)
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr,hit_rate@*")
    assert res.exit_code == 0, res.output
    md = res.output
    assert md.startswith(f"### ragnb: run `{B}` (B) vs. `{A}` (A)")
    assert "**Gate: pass**" in md and "Comparable: same dataset and corpus" in md
    row = next(line for line in md.splitlines() if "`mrr`" in line)
    # mean A = 0.575 (linspace 0.4…0.75), B = 0.775, Δ = +0.200 on every item; exact sign-flip p = 2/256
    assert "| 0.575 | 0.775 | +0.200" in row and "| 0.008 |" in row and "B better" in row


def test_compare_gate_fails_when_b_is_significantly_worse(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2)
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr", "--format", "json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["gate"]["outcome"] == "worse" and data["gate"]["metrics"] == ["mrr"]
    mrr = next(r for r in data["metrics"] if r["metric"] == "mrr")
    assert mrr["verdict"] == "B worse" and mrr["delta"] == pytest.approx(-0.2)
    assert mrr["p_holm"] == pytest.approx(2 / 256 * 1)  # hit_rate@1 unchanged on every item: left out of Holm's m
    assert "significantly worse on Tier 1 (retrieval) mrr" in res.stderr
    # without --fail-if-worse the same comparison only reports
    assert _cli("compare", A, B, "--outputs", str(out)).exit_code == 0
    # a gated metric that no run recorded is an error, not a silent pass
    typo = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mmr")
    assert typo.exit_code == 2 and typo.output == (
        "error: --fail-if-worse: unknown metric 'mmr' — no registered metric has that name and neither run recorded "
        "a metric matching it; these runs recorded: hit_rate@1, mrr (shell patterns such as 'hit_rate@*' work)\n")


def test_compare_not_comparable_names_no_winner_and_exits_4(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2, prov_b={"datasets": [DS_EN], "corpora": [CORPUS_200]})
    res = _cli("compare", A, B, "--outputs", str(out), "--fail-if-worse", "mrr")
    assert res.exit_code == 4
    assert "**Not comparable**" in res.stdout and "different datasets" in res.stdout
    assert "B worse" not in res.stdout and "B better" not in res.stdout
    assert "cannot decide" in res.stderr


def test_compare_defaults_to_latest_pair_and_metrics_filter(tmp_path):
    out = tmp_path / "out"
    _runs(out, -0.2)
    res = _cli("compare", "--outputs", str(out), "--metrics", "hit_rate@*", "--fail-if-worse", "mrr")
    assert res.exit_code == 1  # mrr is gated even though the table shows hit_rate@1 only
    table = [line for line in res.stdout.splitlines() if line.startswith("| Tier")]
    assert len(table) == 1 and "`hit_rate@1`" in table[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _cli("compare", "--outputs", str(empty))
    assert res.exit_code == 2 and "need two runs" in res.output


def test_runs_list_show_delete(tmp_path):
    out = tmp_path / "out"
    _runs(out, 0.1)
    listed = _cli("runs", "list", "--outputs", str(out), "--format", "json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [A, B]
    table = _cli("runs", "list", "--outputs", str(out)).stdout
    assert A in table and "12 s" in table and "2 run(s)" in table
    shown = _cli("runs", "show", A, "--outputs", str(out))
    assert shown.exit_code == 0 and f"run {A}" in shown.stdout
    assert _cli("runs", "show", "nope", "--outputs", str(out)).exit_code == 2
    # without a terminal and without --yes nothing is deleted
    refused = _cli("runs", "delete", A, "--outputs", str(out))
    assert refused.exit_code == 2 and "--yes" in refused.output and (out / "runs" / A).is_dir()
    done = _cli("runs", "delete", A, "--outputs", str(out), "--yes")
    assert done.exit_code == 0, done.output
    assert [r["id"] for r in load_runs(out / "benchmark_runs.json")] == [B]
    assert not (out / "runs" / A).exists() and (out / "runs" / B).is_dir()
    gone = _cli("runs", "delete", A, "--outputs", str(out), "--yes")
    assert gone.exit_code == 2 and "unknown run id" in gone.output


def test_fail_on_attention_uses_the_records_grading():
    from ragnb.cli.run import attention_lines
    from ragnb.metrics.stats import aggregate

    low = aggregate(np.array([0.0, 1.0] * 3 + [0.0] * 6), n_boot=50)  # hit_rate@1 = 0.25 < 0.5: attention
    const = aggregate(np.zeros(12), n_boot=50)  # mrr constant 0: ungraded, must not trip the gate
    record = build_record("20250101-000000-cccc", {"tier_1_metrics": {"hit_rate@1": low, "mrr": const}},
                          None, None, None)
    lines = attention_lines(record)
    assert record["overall_status"] == "attention"
    assert len(lines) == 1 and lines[0].startswith("Tier 1 (retrieval): hit_rate@1 = 0.25") and "< 0.5" in lines[0]
    good = build_record("20250101-000000-dddd", {"tier_1_metrics": {"mrr": const}}, None, None, None)
    assert attention_lines(good) == [] and good["overall_status"] == "no-data"


def test_markdown_keeps_gated_metrics_and_changes_in_view_when_there_are_many():
    from ragnb.runs.gate import SHOW_ALL_UP_TO, _split_rows

    rows = [{"metric": f"m{i}", "verdict": "no significant difference at α = 0.05"} for i in range(10)]
    rows[3]["verdict"], rows[7]["verdict"] = "B worse", "B better (unpaired)"
    shown, rest = _split_rows(rows, {"m0"})
    assert [r["metric"] for r in shown] == ["m0", "m3", "m7"] and len(rest) == 7
    few = rows[:SHOW_ALL_UP_TO]
    assert _split_rows(few, set()) == (few, [])
