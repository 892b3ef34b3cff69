"""``ragnb dataset label-plan`` and ``ragnb dataset ppi`` end to end: a real CSV sheet written, filled in as a
reviewer would (a spreadsheet's ``;`` and TRUE/FALSE included), read back into the estimate; values checked against
the estimators on arrays (themselves checked against ppi-python in tests/metrics/test_ppi.py)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ragnb.cli.main import build_cli
from ragnb.metrics.fallback import word_overlap_faithfulness
from ragnb.metrics.fallback_agreement import begin_set
from ragnb.metrics.ppi import fill_failed, ppi_mean
from ragnb.datasets.label_plan import ANSWER_HASH, answer_hash, learned_design, sheet_csv
from ragnb.metrics.ppi_active import active_arrays, inclusion_probabilities, uncertainty


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """300 BEGIN responses with the offline judge's score, their human labels kept aside (the reviewer's answers)."""
    d = begin_set()
    n = 300
    scores = [word_overlap_faithfulness(a, c) for a, c in zip(d.answers[:n], d.contexts[:n])]
    scores[3] = float("nan")  # a failed verdict
    frame = pd.DataFrame({"item_id": d.units[:n], "faithfulness": scores, "answer": d.answers[:n],
                          "contexts": [c[0] for c in d.contexts[:n]]})
    path = tmp_path_factory.mktemp("ppi") / "tier2.per_item.parquet"
    frame.to_parquet(path)
    return path, frame, dict(zip(d.units[:n], d.labels[:n].astype(float)))


def _cli(*args: str):
    return CliRunner().invoke(build_cli(), list(args), catch_exceptions=False)


def _fill(sheet, out, truth, delimiter=",", yes="yes", no="no", skip=()):
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    assert rows[0][:6] == ["id", "human_label", "notes", "judge_score", "inclusion_probability", "design"]
    for r in rows[1:]:
        r[1] = "" if r[0] in skip else (yes if truth[r[0]] else no)
    with open(out, "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f, delimiter=delimiter).writerows(rows)
    return [r[0] for r in rows[1:]]


def test_uniform_plan_round_trip(items, tmp_path):
    path, frame, truth = items
    sheet = tmp_path / "sheet.csv"
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "60",
             "--output", str(sheet))
    assert r.exit_code == 0, r.output
    report = json.loads(r.output.split("\n", 1)[1])
    assert report["rows"] == 60 and report["items"] == 300 and report["judge_failed"] == 1
    assert 0 < report["expected_ci_width_ppi"] <= report["expected_ci_width_human_only"]
    assert sheet.read_bytes().startswith("\ufeff".encode())
    ids = _fill(sheet, tmp_path / "filled.csv", truth, skip=())
    assert len(set(ids)) == 60
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "filled.csv"), "--binary", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    s = frame["faithfulness"].to_numpy()
    lab = frame["item_id"].isin(ids).to_numpy()
    expect = ppi_mean(s, s[lab], [truth[i] for i in frame["item_id"][lab]], binary=True)
    assert out["ppi"]["ci"] == pytest.approx(list(expect.ci)) and out["ppi"]["lam"] == pytest.approx(expect.lam)
    assert out["quote"] == "ppi++" and out["ppi"]["n_failed"] == 1 and out["labelled"] == 60
    # a second plan with the same seed picks the same items; the table output names the quoted estimate
    _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "60",
         "--output", str(tmp_path / "again.csv"))
    assert (tmp_path / "again.csv").read_text(encoding="utf-8") == sheet.read_text(encoding="utf-8")
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "filled.csv"), "--binary")
    assert "→ ppi++" in r.output and "quote: ppi++" in r.output and "classical" in r.output


def test_uniform_rows_left_empty_are_counted(items, tmp_path):
    path, frame, truth = items
    sheet = tmp_path / "sheet.csv"
    _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "20",
         "--output", str(sheet))
    ids = [r[0] for r in list(csv.reader(open(sheet, encoding="utf-8-sig")))[1:]]
    _fill(sheet, tmp_path / "filled.csv", truth, skip=ids[:5])
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "filled.csv"), "--binary", "--json")
    out = json.loads(r.output)
    assert out["labelled"] == 15 and out["left_empty"] == 5 and out["ppi"]["n"] == 15


def test_an_active_sheet_of_an_earlier_version_is_still_estimated(items, tmp_path):
    # label-plan no longer writes single-round active sheets (π ∝ √(s(1 − s)), wider than uniform for uncalibrated
    # judges, BENCHMARKS §15); one written before is still read and weighted by its own design
    path, frame, truth = items
    s = frame["faithfulness"].to_numpy()
    pi = inclusion_probabilities(uncertainty(s), 60)
    drawn = np.random.default_rng(3).uniform(size=s.size) < pi
    old = pd.DataFrame({"id": frame["item_id"], "human_label": "", "notes": "", "judge_score": s,
                        "inclusion_probability": pi, "design": "active budget=60 N=300 seed=3 mix=0.5",
                        "metric": "faithfulness", ANSWER_HASH: frame["answer"].map(answer_hash)})[drawn]
    (tmp_path / "sheet.csv").write_text(sheet_csv(old.reset_index(drop=True)), encoding="utf-8")
    ids = _fill(tmp_path / "sheet.csv", tmp_path / "filled.csv", truth, delimiter=";", yes="TRUE", no="FALSE")
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "filled.csv"), "--binary", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    y = np.array([truth[i] for i in frame["item_id"]])
    ppi, human = active_arrays(y, fill_failed(s)[1][0], pi, drawn, bounds=(0.0, 1.0))  # --binary: 0/1 labels
    assert out["ppi"]["method"] == "active_ppi++" and out["ppi"]["ci"] == pytest.approx(list(ppi.ci))
    assert out["human_only"]["estimate"] == pytest.approx(human.estimate) and len(ids) == drawn.sum()
    # an active sheet with a drawn row left empty cannot be weighted: an error naming the row
    _fill(tmp_path / "sheet.csv", tmp_path / "partial.csv", truth, skip=ids[:1])
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "partial.csv"), "--binary")
    assert r.exit_code == 2 and "every drawn row must be labelled" in r.output and ids[0] in r.output


def test_bad_sheets_and_tables_are_clear_errors(items, tmp_path):
    path, frame, truth = items
    sheet = tmp_path / "sheet.csv"
    _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "10",
         "--output", str(sheet))
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig")))
    rows[2][1] = "maybe"
    with open(tmp_path / "bad.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels", str(tmp_path / "bad.csv"),
             "--binary")
    assert r.exit_code == 2 and "bad.csv:3" in r.output and "'maybe' is not a yes/no label" in r.output
    rows[2][1], rows[1][0] = "yes", "not-an-item"
    with open(tmp_path / "unknown.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "unknown.csv"), "--binary")
    assert r.exit_code == 2 and "'not-an-item'" in r.output and "not among the 300 judged items" in r.output
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "nope", "--budget", "10",
             "--output", str(tmp_path / "x.csv"))
    assert r.exit_code == 2 and "no column 'nope'" in r.output and "faithfulness" in r.output
    assert not (tmp_path / "x.csv").exists()
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "301",
             "--output", str(tmp_path / "x.csv"))
    assert r.exit_code == 2 and "--budget 301" in r.output


def _ids_and_pi(sheet):
    rows = list(csv.reader(open(sheet, encoding="utf-8-sig", newline="")))
    head = rows[0]
    return ([r[0] for r in rows[1:]], [float(r[head.index("inclusion_probability")]) for r in rows[1:]],
            {r[head.index("design")] for r in rows[1:]})


def test_a_second_round_leaves_out_the_labelled_items(items, tmp_path):
    path, frame, truth = items
    _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "40",
         "--output", str(tmp_path / "r1.csv"))
    first = _fill(tmp_path / "r1.csv", tmp_path / "r1f.csv", truth, skip=())
    s = frame["faithfulness"].to_numpy()
    ids_all = frame["item_id"].to_numpy()

    # uniform again: 40 of the 260 items not labelled yet, π = 40/260 recorded; the union is one uniform sample
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "40",
             "--labelled", str(tmp_path / "r1f.csv"), "--seed", "1", "--output", str(tmp_path / "r2.csv"))
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.split("\n", 1)[1])["already_labelled"] == 40
    second, pi, designs = _ids_and_pi(tmp_path / "r2.csv")
    assert len(second) == 40 and not set(second) & set(first)
    assert pi == pytest.approx([40 / 260] * 40) and designs == {"uniform budget=40 N=300 seed=1 labelled=40"}
    _fill(tmp_path / "r2.csv", tmp_path / "r2f.csv", truth)
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "r2f.csv"), "--labels", str(tmp_path / "r1f.csv"), "--binary", "--json")
    out = json.loads(r.output)
    lab = np.isin(ids_all, first + second)
    expect = ppi_mean(s, s[lab], [truth[i] for i in ids_all[lab]], binary=True)
    assert out["labelled"] == 80 and out["ppi"]["estimate"] == pytest.approx(expect.estimate)
    assert out["ppi"]["ci"] == pytest.approx(list(expect.ci))
    # the second sheet alone: its plan left out 40 labelled items the estimate would not see
    r = _cli("dataset", "ppi", "--scores", str(path), "--score", "faithfulness", "--labels",
             str(tmp_path / "r2f.csv"), "--binary")
    assert r.exit_code == 2 and "left out 40 item(s)" in r.output

    # --active second round: learned from the 40 labels of round 1 (the offline judge, 300 items); this table's
    # labels expect it no narrower than uniform, so the round stays uniform and the report says why
    r = _cli("dataset", "label-plan", "--scores", str(path), "--score", "faithfulness", "--budget", "40",
             "--active", "--labelled", str(tmp_path / "r1f.csv"), "--seed", "2", "--output", str(tmp_path / "a2.csv"))
    assert r.exit_code == 0, r.output
    report = json.loads(r.output.split("\n", 1)[1])
    frame_ids = frame.rename(columns={"item_id": "id"})
    _, pick, ratio, _, _, _ = learned_design(frame_ids, "faithfulness", 40, {i: truth[i] for i in first})
    assert not pick and report["expected_width_learned_over_uniform"] == pytest.approx(ratio, abs=1e-4)
    assert "stays uniform" in report["design_note"] and report["design"].startswith("uniform budget=40")
    active_ids, pi, _ = _ids_and_pi(tmp_path / "a2.csv")
    assert not set(active_ids) & set(first) and pi == pytest.approx([40 / 260] * 40)
