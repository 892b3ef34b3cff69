"""A judge that the run's Tier Judge finds at chance on the team's labels marks the grades it produced in Tier 2/3
and the RAG metrics: not graded, with the reason in the run record, the executive summary and the index page."""

from __future__ import annotations

import numpy as np

from ragnb import spec
from ragnb.metrics.classification import binary_report
from ragnb.runs.judge_trust import mark_record
from ragnb.tiers.judging.verdict import judge_identity, judge_verdict
from ragnb.runs.pages import _metric_rows
from ragnb.runs.record import record_statuses
from ragnb.runs.build import build_record
from ragnb.tiers.judging.scoring import SHOW_LABELS

N = 120


def _labels() -> np.ndarray:
    return np.array([1] * 100 + [0] * 20)  # 100 of 120 should be shown: always "show" scores 0.833


def _judge_block(pred: np.ndarray, models: str = "judge-a,judge-b", backend: str = "openai-compatible",
                 labels: np.ndarray | None = None) -> dict:
    # the Tier Judge block as tier_judge writes it: the primary mode's calibration at the show threshold
    # (binary_report, with its baselines) and κ from it at the top level
    at = binary_report(_labels() if labels is None else labels, pred, n_boot=1000, seed=0, labels=SHOW_LABELS)
    return {"judge_backend": backend, "judge_model": models, "primary_mode": "direct",
            "cohen_kappa": at["metrics"]["cohen_kappa"], "consistency_score": {"mean": 0.99, "n": N},
            "by_mode": {"direct": {"calibration": {"at_threshold": at}}}}


def _at_chance() -> np.ndarray:
    # says "show" on 4 of every 5 items of either label: unrelated to the labels (κ = 0), accuracy below always "show"
    return np.array([0 if i % 5 == 0 else 1 for i in range(N)])


def _agreeing() -> np.ndarray:
    pred = _labels().copy()
    pred[:6] = 0  # 6 misses of 120: κ well above 0, accuracy 0.95 > 0.833
    return pred


def _faithfulness(mean: float = 0.95) -> dict:
    return {"mean": mean, "ci95": [mean - 0.02, mean + 0.02], "n": 200, "n_valid": 200, "n_failed": 0,
            "constant": False, "few_items": False}


def _record(judge: dict, tier2_models: str = "judge-b, judge-a") -> dict:
    tier2 = {"judge_backend": "openai-compatible", "judge_model": tier2_models, "judge_faithfulness": _faithfulness()}
    rag = {"judge_backend": "openai-compatible", "judge_model": tier2_models, "faithfulness": _faithfulness(0.9),
           "methods": {"fallback_faithfulness": {"word_overlap": 200}, "faithfulness": {"ok": 200}},
           "fallback_faithfulness": _faithfulness(0.7)}
    return build_record("20260101-000000-abcd", {"tier_2_metrics": tier2, "tier_judge_metrics": judge}, None, None,
                        None, {"other_metrics": {"rag_metrics": rag}})


def test_a_judge_at_chance_is_not_validated_and_says_why():
    block = _judge_block(_at_chance())
    kappa = block["cohen_kappa"]
    assert kappa["mean"] == 0.0 and kappa["ci95"][0] < 0 < kappa["ci95"][1]
    verdict = judge_verdict(block)
    assert verdict["judge"] == ("llm", frozenset({"judge-a", "judge-b"})) and verdict["validated"] is False
    # accuracy (80 shown of 100 "show" + 4 withheld of 20 "no-show")/120 = 0.700 against 100/120 = 0.833
    assert verdict["reason"].startswith("judge unvalidated: below always answering 'show' on your labels (Tier Judge: κ ")
    assert "accuracy 0.700 vs 0.833 always 'show', n = 120" in verdict["reason"]
    assert judge_verdict(_judge_block(_agreeing())) == {"judge": ("llm", frozenset({"judge-a", "judge-b"})),
                                                        "validated": True, "reason": ""}
    assert judge_verdict(None) is None and judge_verdict({"judge_model": "x"}) is None  # nothing to say
    # balanced labels, right on 66 of 120 (0.55 > 0.5 always one label): above the majority, yet κ's CI reaches 0
    labels, pred = np.array([1, 0] * 60), np.array([1, 0] * 33 + [0, 1] * 27)
    near = judge_verdict(_judge_block(pred, labels=labels))
    assert near["validated"] is False and near["reason"].startswith("judge unvalidated: at chance on your labels")
    assert "accuracy 0.550 vs 0.500" in near["reason"]


def test_the_grades_that_judge_produced_in_the_run_are_marked_not_excellent():
    bounds = spec.thresholds_of("judge_faithfulness", "tier_2_metrics", {"judge_backend": "openai-compatible"})
    assert spec.grade_of(bounds, _faithfulness()).status == "excellent"  # 0.95 > 0.9 on its own
    record = _record(_judge_block(_at_chance()))
    t2, rag = record["tier_2_metrics"], record["other_metrics"]["rag_metrics"]
    reason = judge_verdict(record["tier_judge_metrics"])["reason"]
    assert t2["judge_faithfulness"]["judge_trust"] == {"validated": False, "reason": reason} == t2["judge_trust"]
    assert rag["faithfulness"]["judge_trust"]["validated"] is False
    assert "judge_trust" not in rag["fallback_faithfulness"]  # the offline score is not that judge's
    grade = spec.grade_of(bounds, t2["judge_faithfulness"])
    assert (grade.status, grade.rule, grade.reason) == (None, "judge_unvalidated", reason)
    # the run record: no longer graded excellent on that judge's word; the summary and the index page say why
    # (only Tier Judge's own repeatability stays graded: a judge can be consistent and at chance)
    assert [(k, n) for k, n, _, _ in record_statuses(record)] == [("tier_judge_metrics", "consistency_score")]
    assert (f"not graded: {reason} — Tier 2 (generation): judge_faithfulness; rag_metrics: faithfulness"
            in record["executive_summary"])
    page = _metric_rows(record)
    row = next(r for r in page.split("<tr>") if "<code>judge_faithfulness</code>" in r)
    assert "judge unvalidated: below always answering" in row and "excellent" not in row.lower()


def test_a_validated_judge_or_another_judge_leaves_the_grades_alone():
    record = _record(_judge_block(_agreeing()))
    assert "judge_trust" not in record["tier_2_metrics"]["judge_faithfulness"]
    assert ("tier_2_metrics", "judge_faithfulness", "excellent") in [(k, n, s) for k, n, _, s in record_statuses(record)]
    # Tier Judge evaluated another model: Tier 2's judge was not measured there, nothing to mark
    other = _record(_judge_block(_at_chance(), models="judge-c"))
    assert "judge_trust" not in other["tier_2_metrics"]["judge_faithfulness"]
    assert "not graded: judge unvalidated" not in other["executive_summary"]


def test_the_offline_judge_at_chance_on_the_labels_marks_its_own_scores():
    judge = _judge_block(_at_chance(), models="offline-fallback", backend=spec.OFFLINE_BACKEND)
    tier2 = {"judge_backend": spec.OFFLINE_BACKEND, "judge_model": None, "fallback_faithfulness": _faithfulness(),
             "hallucination_rate": _faithfulness(0.05)}
    assert judge_identity(tier2) == judge_identity(judge) == ("offline", frozenset())
    record = {"tier_2_metrics": tier2, "tier_judge_metrics": judge}
    marked = mark_record(record)
    assert [(k, n) for k, n, _ in marked] == [("tier_2_metrics", "fallback_faithfulness"),
                                              ("tier_2_metrics", "hallucination_rate")]


def test_tier_judge_stores_its_verdict_and_the_run_record_reads_it():
    # The real Tier Judge, offline (word overlap): half the answers copy their context (F_wo = 1), half share no
    # word with it (0), and the labels are independent of that — the judge is at chance on these labels (κ = 0).
    from ragnb.tiers.judging import run_tier_judge
    from ragnb.datasets.judge_items import JudgePipelineItem

    items = [JudgePipelineItem(id=f"q{i}", question="What colour is the sky?",
                               answer="The sky is blue." if i % 2 == 0 else "Bananas grow in warm places.",
                               context="The sky is blue.", ground_truth_show=(i // 2) % 2 == 0,
                               label="grounded" if (i // 2) % 2 == 0 else "not grounded") for i in range(40)]
    res = run_tier_judge(items, None, n_boot=500)
    assert res.summary["cohen_kappa"]["mean"] == 0.0
    verdict = res.summary["info"]["judge_verdict"]
    assert verdict["validated"] is False and verdict["reason"].startswith("judge unvalidated: at chance on your labels")
    assert res.notes[0].startswith(verdict["reason"]) and "is not graded" in res.notes[0]
    tier2 = {"judge_backend": spec.OFFLINE_BACKEND, "judge_model": None, "fallback_faithfulness": _faithfulness()}
    record = {"tier_2_metrics": tier2, "tier_judge_metrics": res.metrics()}
    assert mark_record(record) == [("tier_2_metrics", "fallback_faithfulness", verdict["reason"])]
