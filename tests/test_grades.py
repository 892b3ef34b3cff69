"""Grades against trivial baselines (docs/metrics.md, Baselines): a judge that does not beat always answering the
commoner label is never graded good, whatever its accuracy band; one that beats it with its CI keeps its grade;
balanced accuracy and κ equal scikit-learn's; a degenerate best threshold is not reported as a result."""

from __future__ import annotations

import gzip
import json
import math

import pytest
from sklearn import metrics as skm

from conftest import SHARED
from ragnb import spec
from ragnb.io import dumps_strict
from ragnb.metrics import classification as cls
from ragnb.metrics import registry
from ragnb.runs.build import build_record
from ragnb.tiers import judging
from ragnb.tiers.judging import JudgePipelineItem


def pipeline_items(cells: dict[str, int]) -> tuple[list[JudgePipelineItem], dict[str, bool]]:
    """Items with human labels and the verdict a production judge gives each, from confusion counts."""
    items, verdicts = [], {}
    for cell, (label, verdict) in {"tp": (True, True), "fn": (True, False), "fp": (False, True),
                                   "tn": (False, False)}.items():
        for _ in range(cells[cell]):
            i = len(items)
            items.append(JudgePipelineItem(id=f"q{i}", question=f"question {i}?", answer=f"answer-{i}",
                                           context=f"context {i}.", ground_truth_show=label))
            verdicts[f"answer-{i}"] = verdict
    return items, verdicts


class LookupJudge:
    """A production show/no-show judge: a Python object whose verdicts are fixed per answer."""

    name = "lookup-judge"

    def __init__(self, verdicts: dict[str, bool]):
        self.verdicts = verdicts

    def judge(self, question: str, answer: str) -> bool:
        return self.verdicts[answer]


def record_of(summary_block: dict, tmp_path, monkeypatch) -> dict:
    """The run record of one Judge Pipeline block, as the runner builds it from the metrics JSON."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    block = json.loads(dumps_strict(summary_block))
    return build_record("20260101-000000-abcd", {"tier_judge_pipeline_metrics": block}, "log.jsonl",
                        "judge-pipeline", None, {}, cwd=tmp_path)


def test_a_judge_below_the_majority_class_is_never_graded_good(tmp_path, monkeypatch):
    # The case: 90% of the answers should be shown; the judge is right on 53 of 62 (0.855, the "good"
    # band 0.85–0.95) while always answering "show" is right on 56 (0.903).
    cells = {"tp": 51, "fn": 5, "fp": 4, "tn": 2}
    items, verdicts = pipeline_items(cells)
    res = judging.run_tier_judge_pipeline(items, LookupJudge(verdicts), n_boot=2000)
    acc = res.summary["accuracy"]
    assert acc["mean"] == pytest.approx(53 / 62)
    b = acc["baselines"]
    assert b["majority_label"] == "show" and b["n"] == 62
    assert b["majority_class"] == pytest.approx(56 / 62)
    assert b["constant"] == pytest.approx({"show": 56 / 62, "no-show": 6 / 62})
    assert b["random_at_base_rate"] == pytest.approx((56 / 62) ** 2 + (6 / 62) ** 2)
    # paired per item: +1 where the judge is right and "show" is wrong (TN), −1 the reverse (FN), else 0
    assert b["difference"] == pytest.approx((2 - 5) / 62)
    lo, hi = b["difference_ci95"]
    var = (2 + 5) / 62 - (3 / 62) ** 2  # the normal approximation the bootstrap must be close to
    half = 1.96 * math.sqrt(var / 62)
    assert lo == pytest.approx(-3 / 62 - half, abs=0.015) and hi == pytest.approx(-3 / 62 + half, abs=0.015)
    assert lo < 0 < hi and b["beats"] is False
    assert b["accuracy_ci95"] == acc["ci95"]  # the rule reads the interval the table shows
    assert b["reason"].startswith("accuracy 0.855 does not beat always answering 'show' (0.903) beyond chance: "
                                  "paired difference -0.048, 95% CI ")

    # balanced accuracy and κ beside it, equal to scikit-learn's
    y = [it.ground_truth_show for it in items]
    pred = [verdicts[it.answer] for it in items]
    assert res.summary["balanced_accuracy"]["mean"] == pytest.approx(skm.balanced_accuracy_score(y, pred), abs=1e-12)
    assert res.summary["cohen_kappa"]["mean"] == pytest.approx(skm.cohen_kappa_score(y, pred), abs=1e-12)
    assert any(n.startswith("Not graded good: accuracy 0.855 does not beat") for n in res.notes)

    # the one grade rule: in the good band by value, attention by its baselines
    grade = spec.grade_of(spec.thresholds_of("accuracy", "tier_judge_pipeline_metrics"), acc)
    assert (grade.status, grade.rule) == ("attention", "baselines") and grade.reason == b["reason"]
    assert spec.grade_of((0.95, 0.85), {k: v for k, v in acc.items() if k != "baselines"}).status == "good"
    assert judging.grade_line(res.summary).startswith("accuracy: ATTENTION (excellent > 0.95, attention < 0.85) — "
                                                      "accuracy 0.855 does not beat always answering 'show'")

    # the run record and its executive summary read the same rule, and say why
    rec = record_of(res.metrics(), tmp_path, monkeypatch)
    assert rec["overall_status"] == "attention"
    lines = rec["executive_summary"].splitlines()
    assert lines[0].startswith("Status: ATTENTION — 1 of 1 graded metrics not better than a trivial baseline;")
    assert lines[1].startswith("Needs attention — Tier Judge Pipeline: accuracy = 0.855 (95% CI ")
    assert "— accuracy 0.855 does not beat always answering 'show' (0.903) beyond chance" in lines[1]
    assert "GOOD" not in rec["executive_summary"]

    table = judging.pipeline_table(res.summary).set_index("metric")
    assert table.loc["baseline: always 'show'", "value"] == pytest.approx(56 / 62)
    assert table.loc["baseline: always 'no-show'", "value"] == pytest.approx(6 / 62)
    assert table.loc["accuracy − always 'show' (paired)", "value"] == pytest.approx(-3 / 62)


def test_a_judge_that_beats_the_baseline_with_its_ci_keeps_its_grade(tmp_path, monkeypatch):
    # 400 items, 90% show; right on 378 (0.945, "good"): TN 30 vs FN 12 → paired difference +18/400
    cells = {"tp": 348, "fn": 12, "fp": 10, "tn": 30}
    items, verdicts = pipeline_items(cells)
    res = judging.run_tier_judge_pipeline(items, LookupJudge(verdicts), n_boot=2000)
    acc = res.summary["accuracy"]
    b = acc["baselines"]
    assert acc["mean"] == pytest.approx(378 / 400) and b["difference"] == pytest.approx(18 / 400)
    assert b["difference_ci95"][0] > 0 and b["beats"] is True and b["reason"] == ""
    assert spec.grade_of((0.95, 0.85), acc) == spec.Grade("good")
    assert not any("Not graded good" in n for n in res.notes)
    rec = record_of(res.metrics(), tmp_path, monkeypatch)
    assert rec["overall_status"] == "good"
    assert rec["executive_summary"].startswith("Status: GOOD — every graded metric (1) is good or excellent")

    # Without a CI (n_boot = 0) nothing says it beats the baseline: not graded, and the summary says why.
    res0 = judging.run_tier_judge_pipeline(items, LookupJudge(verdicts), n_boot=0)
    assert res0.summary["accuracy"]["baselines"]["beats"] is None
    grade = spec.grade_of((0.95, 0.85), res0.summary["accuracy"])
    assert grade.status is None and grade.rule == "baselines" and "no confidence interval" in grade.reason
    rec0 = record_of(res0.metrics(), tmp_path, monkeypatch)
    assert rec0["overall_status"] == "no-data"
    assert rec0["executive_summary"].splitlines()[-1] == (
        "Not computed: not graded: no CI to compare with its trivial baselines — Tier Judge Pipeline: accuracy.")


def _wice():
    path = SHARED / "wice_claim_support" / "wice_oracle_dev.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_baselines_kappa_and_balanced_accuracy_on_human_labels():
    """WiCE dev (human claim-support labels, 342 of 1043 supported): the offline word-overlap judge at its cut."""
    from ragnb.metrics import fallback as fb

    rows = _wice()
    y = [bool(r["supported"]) for r in rows]
    cut = fb.OFFLINE_THRESHOLD["word_overlap"]
    pred = [fb.word_overlap_faithfulness(r["claim"], [" ".join(r["evidence_sentences"])]) >= cut for r in rows]
    rep = cls.binary_report(y, pred, n_boot=1000, labels=("supported", "not supported"))
    m = rep["metrics"]
    assert m["balanced_accuracy"]["mean"] == pytest.approx(skm.balanced_accuracy_score(y, pred), abs=1e-12)
    assert m["cohen_kappa"]["mean"] == pytest.approx(skm.cohen_kappa_score(y, pred), abs=1e-12)
    c = rep["confusion"]
    b = m["accuracy"]["baselines"]
    assert b["majority_label"] == "not supported" and b["majority_class"] == pytest.approx(701 / 1043)
    # majority "not supported": the judge gains on its true positives and loses on its false positives
    assert b["difference"] == pytest.approx((c["tp"] - c["fp"]) / 1043)
    assert m["accuracy"]["mean"] - b["majority_class"] == pytest.approx(b["difference"])
    assert b["beats"] is (b["difference_ci95"][0] > 0 and b["accuracy_ci95"][0] > b["random_at_base_rate"])
    # every trivial answer has balanced accuracy 0.5 and κ 0: a constant judge on the same labels
    always = cls.binary_report(y, [False] * len(y), n_boot=200)["metrics"]
    assert always["balanced_accuracy"]["mean"] == 0.5 and always["cohen_kappa"]["mean"] == 0.0
    assert always["accuracy"]["baselines"]["difference"] == 0.0 and always["accuracy"]["baselines"]["beats"] is False


def test_a_degenerate_best_threshold_is_not_reported():
    # scores that rank the labels backwards: the best J is 0, at the cut that shows everything (TPR = FPR = 1)
    y, s = [True, True, False, False], [0.2, 0.1, 0.9, 0.8]
    rep = cls.score_report(y, s, n_boot=0)
    best = rep["best_threshold"]
    assert (best["threshold"], best["tpr"], best["fpr"], best["youden_j"]) == (0.1, 1.0, 1.0, 0.0)
    assert "answers positive for every item" in best["degenerate"] and rep["at_best_threshold"] is None
    line = judging.best_threshold_line(best, "direct")
    assert line.startswith("No useful threshold by Youden's J (direct): the cut 0.100 answers positive for every")
    assert "TPR 1.000" not in line
    assert cls.degenerate_threshold({"threshold": 0.5, "youden_j": -0.2, "tpr": 0.3, "fpr": 0.5}).startswith(
        "Youden's J = -0.200 ≤ 0")
    # a threshold that separates the labels is still a result
    good = cls.score_report([True, True, False, False], [0.9, 0.8, 0.2, 0.1], n_boot=0)
    assert good["best_threshold"]["degenerate"] == "" and good["at_best_threshold"] is not None
    assert judging.best_threshold_line(good["best_threshold"]).startswith(
        "Best threshold by Youden's J: 0.800 — TPR 1.000, FPR 0.000")


def test_judge_pipeline_accuracy_is_a_registered_metric():
    assert registry.direction("judge_pipeline_accuracy") == "higher"
    assert registry.get("judge_pipeline_accuracy").value_range == (0.0, 1.0)
    assert spec.canonical_metric("accuracy", "tier_judge_pipeline_metrics") == "judge_pipeline_accuracy"


def test_run_pages_and_the_ci_gate_name_the_baseline_not_beaten(tmp_path, monkeypatch):
    from ragnb.cli.run import attention_lines
    from ragnb.runs.pages import _metric_rows

    items, verdicts = pipeline_items({"tp": 51, "fn": 5, "fp": 4, "tn": 2})
    res = judging.run_tier_judge_pipeline(items, LookupJudge(verdicts), n_boot=2000)
    rec = record_of(res.metrics(), tmp_path, monkeypatch)
    reason = res.summary["accuracy"]["baselines"]["reason"]
    [line] = attention_lines(rec)  # what `ragnb run --fail-on attention` prints before exiting 3
    assert line.startswith("Tier Judge Pipeline: accuracy = 0.855 (95% CI ") and line.endswith(f" — {reason}")
    page = _metric_rows(rec)
    assert "does not beat always answering &#x27;show&#x27; (0.903) beyond chance" in page


def test_tier_judge_shows_baselines_and_no_degenerate_threshold():
    # The offline judge (word overlap) scores answers that copy their context high — here humans marked those as
    # not grounded and the paraphrases as grounded, so no cut of the scores beats chance.
    copies = [f"The office in city {i} opens at {i} o'clock." for i in range(6)]
    items = [JudgePipelineItem(id=f"c{i}", question="When does it open?", answer=text, context=text,
                               ground_truth_show=False) for i, text in enumerate(copies)]
    items += [JudgePipelineItem(id=f"p{i}", question="When does it open?", answer=f"Mornings, roughly {i}.",
                                context=text, ground_truth_show=True) for i, text in enumerate(copies)]
    res = judging.run_tier_judge(items, None, n_boot=200)
    cal = res.summary["by_mode"][res.summary["primary_mode"]]["calibration"]
    best = cal["best_threshold"]
    assert best["degenerate"] and cal["at_best_threshold"] is None
    assert judging.best_threshold_line(best).startswith("No useful threshold by Youden's J: ")
    rows = judging.judge_table(res.summary).set_index("metric")["value"]
    assert rows["baseline: always 'show'"] == pytest.approx(0.5) and rows["baseline: always 'no-show'"] == 0.5
    acc = cal["at_threshold"]["metrics"]["accuracy"]
    assert rows[f"accuracy − always {acc['baselines']['majority_label']!r} (paired)"] == pytest.approx(
        acc["mean"] - 0.5)
