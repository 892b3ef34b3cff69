"""Honest labelling plans and label sheets (docs/ppi.md): planned widths never below what the labels allow (hand
computed, and checked against simulated PPI++ intervals), labels outside the metric's range or of another metric
refused, a filled sheet never overwritten, a label of another answer refused in the RAG suite."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ragnb.cli.main import build_cli
from ragnb.datasets.label_plan import plan, planned_widths, write_sheet
from ragnb.metrics.ppi import ppi_arrays

Z = 1.959963984540054  # z of a 95% interval


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args))


def _report(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.output.split("\n", 1)[1])


def _table(tmp_path, scores, name="faithfulness"):
    ids = [f"q{k:03d}" for k in range(len(scores))]
    frame = pd.DataFrame({"item_id": ids, name: scores, "answer": [f"answer {k}" for k in range(len(scores))]})
    path = tmp_path / "per_item.parquet"
    frame.to_parquet(path)
    return path


def _fill(sheet, out, value):
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    for r in rows[1:]:
        r[1] = value(r[0]) if callable(value) else value
    with open(out, "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    return rows


def test_constant_judge_plans_the_worst_case_human_only_width(tmp_path):
    # measured: 0.0 for both widths. Now p is unknown → p(1 − p) = 0.25: 2·z·√(0.25/20) = 0.43826
    path = _table(tmp_path, [1.0] * 100)
    report = _report(_cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget",
                          "20", "--output", str(tmp_path / "s.csv")))
    assert report["expected_ci_width_human_only"] == 0.4383
    assert report["expected_ci_width_ppi"] == 0.4383
    assert "constant" in report["assumption"] and "0.25" in report["assumption"]
    # a 1–5 score (its registered range) constant at 5: the same in units of the range, ×4 (was clipped to 0 width)
    frame = pd.DataFrame({"id": [str(k) for k in range(100)], "answer_correctness": [5.0] * 100})
    report = plan(frame, "answer_correctness", 20).report
    assert report["expected_ci_width_human_only"] == pytest.approx(1.7530, abs=1e-4)
    assert "[1, 5]" in report["assumption"]


def test_hard_judge_width_is_the_label_variance_and_matches_simulation():
    # 70 of 100 verdicts are 1: p = 0.7, human-only width 2·z·√(0.7·0.3/25) = 0.35927; a hard judge's error rate
    # is unknown, so PPI is planned as no better (measured before: 0.033 at every budget)
    s = np.array([1.0] * 70 + [0.0] * 30)
    n, N = 25, s.size
    w = planned_widths(s, np.full(N, n / N), n, "hard_verdict")
    assert w["human_only"] == pytest.approx(0.359267, abs=1e-6) and w["ppi"] == w["human_only"]
    # reviewers who agree with the judge 85% of the time: the simulated PPI++ width is within ±25% of the plan
    rng = np.random.default_rng(7)
    widths = []
    for _ in range(400):
        y = np.where(rng.uniform(size=N) < 0.15, 1.0 - s, s)
        pick = np.zeros(N, dtype=bool)
        pick[rng.choice(N, n, replace=False)] = True
        widths.append(ppi_arrays(y[pick], s[pick], s[~pick]).width)
    assert abs(w["ppi"] / np.mean(widths) - 1) < 0.25


def test_soft_calibrated_judge_width_matches_simulation():
    rng = np.random.default_rng(3)
    s = rng.beta(2, 2, 400)
    n = 25
    w = planned_widths(s, np.full(s.size, n / s.size), n, "soft_judge")
    assert w["ppi"] < w["human_only"]
    widths = []
    for _ in range(400):
        y = (rng.uniform(size=s.size) < s).astype(float)  # calibrated: P(Y = 1 | s) = s
        pick = np.zeros(s.size, dtype=bool)
        pick[rng.choice(s.size, n, replace=False)] = True
        widths.append(ppi_arrays(y[pick], s[pick], s[~pick]).width)
    assert abs(w["ppi"] / np.mean(widths) - 1) < 0.25


@pytest.fixture()
def planned(tmp_path):
    rng = np.random.default_rng(0)
    path = _table(tmp_path, rng.uniform(size=40).round(3))
    sheet = tmp_path / "sheet.csv"
    _report(_cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "10",
                 "--output", str(sheet)))
    return path, sheet


def test_label_outside_the_registered_range_is_refused(planned, tmp_path):
    path, sheet = planned
    rows = _fill(sheet, tmp_path / "two.csv", lambda i: "1")
    rows[3][1] = "2"  # measured: accepted, the PPI block reported 0.55
    with open(tmp_path / "two.csv", "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels", str(tmp_path / "two.csv"))
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert (f"{tmp_path / 'two.csv'}:4 (id {rows[3][0]!r}) column 'human_label': 2 is outside 'faithfulness''s "
            "range; write a number from 0 to 1") in r.output


def test_non_binary_label_on_a_binary_metric_is_refused(planned, tmp_path):
    path, sheet = planned
    _fill(sheet, tmp_path / "half.csv", "0.5")
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--binary", "--labels",
             str(tmp_path / "half.csv"))
    assert r.exit_code == 2
    assert f"{tmp_path / 'half.csv'}:2" in r.output and "'0.5' is not a yes/no label" in r.output
    assert "true/false, yes/no or 1/0" in r.output


def test_sheet_of_another_metric_is_refused(planned, tmp_path):
    path, sheet = planned
    rows = _fill(sheet, tmp_path / "other.csv", "1")
    for r in rows[1:]:
        r[rows[0].index("metric")] = "context_precision"
    with open(tmp_path / "other.csv", "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "other.csv"))
    assert r.exit_code == 2
    assert "labels 'context_precision' (its 'metric' column) but the estimate is of 'faithfulness'" in r.output


def test_dataset_ppi_refuses_labels_of_another_answer(planned, tmp_path):
    path, sheet = planned
    rows = _fill(sheet, tmp_path / "filled.csv", "1")
    # a spreadsheet that reformats the answer's text leaves its fingerprint: accepted
    rows[3][rows[0].index("answer")] = "03.03.2025"
    with open(tmp_path / "filled.csv", "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f).writerows(rows)
    args = ("dataset", "ppi", "--score", "faithfulness", "--labels", str(tmp_path / "filled.csv"), "--scores")
    assert _cli(*args, str(path)).exit_code == 0
    # the run's answer to one labelled item changed: refused, with the count
    table = pd.read_parquet(path)
    table.loc[table["item_id"] == rows[2][0], "answer"] = "a different answer"
    table.to_parquet(tmp_path / "rerun.parquet")
    r = _cli(*args, str(tmp_path / "rerun.parquet"))
    assert r.exit_code == 2
    assert f"the answer of 1 of 10 labelled item(s) differs from the one the reviewer labelled, e.g. {rows[2][0]!r}" \
        in r.output


def test_filled_sheet_is_never_overwritten(planned, tmp_path):
    path, sheet = planned
    _fill(sheet, sheet, "1")
    before = sheet.read_bytes()
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "5",
             "--seed", "9", "--output", str(sheet))
    assert r.exit_code == 2 and "exists and holds human labels" in r.output and "choose another --output" in r.output
    assert sheet.read_bytes() == before
    # an unfilled sheet (a plan not yet labelled) may be replaced
    fresh = tmp_path / "fresh.csv"
    write_sheet(plan(pd.read_parquet(path).rename(columns={"item_id": "id"}), "faithfulness", 5), fresh)
    assert _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "5",
                "--output", str(fresh)).exit_code == 0


def test_rag_suite_refuses_labels_of_swapped_answers(encoder, tmp_path):
    from ragnb.tiers.human_labels import add_human_labels
    from ragnb.tiers.rag_suite import run_rag_suite

    samples = [{"id": f"s{k}", "user_input": f"Where is room {k}?", "response": f"Room {k} is on floor {k % 3}.",
                "retrieved_contexts": [f"Room {k} is on floor {k % 3} of the north wing."], "reference": None}
               for k in range(20)]
    first = run_rag_suite(samples, encoder, n_boot=50)
    sheet = write_sheet(plan(first.item_table(), "fallback_faithfulness", 10, seed=1), tmp_path / "labels.csv")
    rows = _fill(sheet, sheet, lambda i: "1" if int(i[1:]) % 2 else "0")
    labelled = [r[0] for r in rows[1:]]
    # 19 of 20 answers rotated: the sheet's labels are of other answers
    swapped = [{**s, "response": samples[(k + 1) % 19]["response"] if k < 19 else s["response"]}
               for k, s in enumerate(samples)]
    again = run_rag_suite(swapped, encoder, n_boot=50)
    changed = sum(i != "s19" for i in labelled)
    with pytest.raises(ValueError, match=f"the response of {changed} of {len(labelled)} labelled item"):
        add_human_labels(again, str(sheet))
    assert "fallback_faithfulness_ppi" not in again.summary
    # the same answers: accepted and quoted
    assert [m.metric for m in add_human_labels(first, str(sheet))] == ["fallback_faithfulness"]
