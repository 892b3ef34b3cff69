"""How far to trust the offline judge: the held-out agreement table equals a recomputation on the labelled data,
a method near chance is marked so, and its scores are never graded."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from ragnb import spec
from ragnb.metrics import fallback as fb
from ragnb.metrics import fallback_trust as fbt
from ragnb.metrics import fallback_agreement as fa
from ragnb.runs.record import ungraded_degenerate
from conftest import SHARED

LEXICAL = ("word_overlap", "sentence_overlap")
TABLE = fa.load_table()


def _stored(kind: str, method: str) -> dict:
    return next(r for r in TABLE["held_out"] if r["kind"] == kind and r["method"] == method)


def test_the_split_is_a_hash_of_the_unit():
    # sha256("dev02986") starts with 8 hex digits whose parity decides the part; computed independently here
    for unit in ("dev02986", "begin_dev_wow_00000", "begin_dev_cmu_00417", "Привет"):
        odd = int(hashlib.sha256(unit.encode("utf-8")).hexdigest()[:8], 16) % 2 == 1
        assert fa.part_of(unit) == ("held_out" if odd else "tuning")
    begin = fa.begin_set()
    held, tune = begin.part("held_out"), begin.part("tuning")
    assert not (held & tune).any() and (held | tune).all()
    split = TABLE["split"]["answer_grounding"]
    assert (split["tuning"]["rows"], split["held_out"]["rows"]) == (int(tune.sum()), int(held.sum())) == (563, 585)


def test_stored_answer_grounding_rows_equal_a_recomputation_on_the_bundled_begin_data():
    # The lexical methods, recomputed from ragnb/data/begin_groundedness under the protocol (the embedding rows
    # need all-MiniLM-L6-v2 over every sentence: benchmarks/measure_fallback_agreement.py recomputes them).
    begin = fa.begin_set()
    scores = fa.lexical_scores(begin)
    tuning = fa.tune(begin, scores)
    assert tuning == [r for r in TABLE["tuning"] if r["kind"] == "answer_grounding" and r["method"] in LEXICAL]
    rows = fa.held_out(begin, scores, {r["method"]: r["threshold"] for r in tuning})
    for row in rows:
        assert row == _stored("answer_grounding", row["method"])
    wo = _stored("answer_grounding", "word_overlap")
    # 585 held-out rows, 3 responses without content words (NaN, left out); the chain's cut is the tuned one
    assert (wo["n"], wo["positives"], wo["threshold"]) == (582, 161, fb.OFFLINE_THRESHOLD["word_overlap"])
    assert wo["informative"] is True and wo["roc_auc_ci95"][0] > 0.9 and wo["accuracy"] > wo["majority_class"]


@pytest.mark.skipif(not (SHARED / fa.WICE_FILE).is_file(), reason="../shared/data/wice_claim_support is absent "
                    "(WiCE is not bundled); the claim-support rows are checked where the shared data is")
def test_stored_claim_support_rows_equal_a_recomputation_on_the_shared_wice_data():
    wice = fa.labelled_sets(SHARED)["claim_support"]
    # a claim's ~3 rows (different chunks) never straddle the split
    by_unit: dict[str, set[str]] = {}
    for unit in wice.units:
        by_unit.setdefault(unit, set()).add(fa.part_of(unit))
    assert all(len(parts) == 1 for parts in by_unit.values())
    split = TABLE["split"]["claim_support"]
    assert (split["tuning"]["units"] + split["held_out"]["units"], len(wice.units)) == (349, 1043)
    scores = fa.lexical_scores(wice)
    assert fa.tune(wice, scores) == [r for r in TABLE["tuning"] if r["kind"] == "claim_support"
                                     and r["method"] in LEXICAL]
    # the product's cut (tuned on answer grounding) is what the held-out claim rows are measured at
    for row in fa.held_out(wice, scores, fb.OFFLINE_THRESHOLD):
        assert row == _stored("claim_support", row["method"])


def test_the_chain_uses_the_method_chosen_on_tuning_data():
    methods = {r["method"] for r in TABLE["tuning"]}
    mean_auc = {m: np.mean([r["roc_auc"] for r in TABLE["tuning"] if r["method"] == m]) for m in methods}
    assert TABLE["chosen_method"] == max(mean_auc, key=mean_auc.get) == fb.OFFLINE_METHOD == "word_overlap"
    assert fb.OFFLINE_THRESHOLD == {r["method"]: r["threshold"] for r in TABLE["tuning"]
                                    if r["kind"] == "answer_grounding"}
    for kind in ("answer_grounding", "claim_support"):
        rows = fbt.agreement_rows(kind)
        assert [r["chosen"] for r in rows].count(True) == 1
        assert {r["data (held-out)"] for r in rows} == {fa.KIND_LABEL[kind]}


def test_a_report_quotes_the_agreement_of_the_kind_of_score_it_shows_and_no_other(encoder):
    # The tiers' offline scores are answer-grounding scores: their table and notes quote that kind's held-out
    # row and never claim support's (whose ROC-AUC was once quoted beside every score).
    assert {fa.KIND_OF_METRIC[m] for m in ("fallback_faithfulness", "hallucination_rate")} == {fa.TIER_KIND}
    ag, cs = _stored("answer_grounding", "word_overlap"), _stored("claim_support", "word_overlap")
    ag_auc, cs_auc = f"ROC-AUC {ag['roc_auc']:.2f} (95% CI", f"ROC-AUC {cs['roc_auc']:.2f} (95% CI"
    from ragnb.tiers.rag_suite import run_rag_suite

    res = run_rag_suite([{"id": "a", "user_input": "Where is the tower?", "response": "The tower is in Paris.",
                          "retrieved_contexts": ["The tower stands in Paris."], "reference": "Paris."}], encoder,
                        n_boot=0)
    assert {r["data (held-out)"] for r in res.summary["fallback_agreement"]} == {"answer grounding"}
    notes = " ".join(res.notes)
    assert "on held-out answer grounding data (BEGIN dev" in notes and ag_auc in notes
    assert "claim support" not in notes and cs_auc not in notes
    # a kind with no held-out measurement is said to have none, with no figure
    note = fb.agreement_note("legal_citations")
    assert "no held-out measurement exists for legal citations data" in note and "ROC-AUC" not in note
    assert fbt.agreement_rows("legal_citations") == []


def test_every_held_out_row_names_its_data_split_baseline_and_kappa():
    for r in TABLE["held_out"]:
        assert r["data"].startswith(fa.SOURCES[r["kind"]]) and "held-out half of the dev split" in r["data"]
        assert r["n"] >= r["units"] > 150 and r["unit"] == fa.UNITS[r["kind"]]
        assert r["cohen_kappa_ci95"][0] <= r["cohen_kappa"] <= r["cohen_kappa_ci95"][1]
        assert r["accuracy_minus_majority"] == pytest.approx(r["accuracy"] - r["majority_class"], abs=2e-4)


def _row(auc: float, ci: list, diff: float, diff_ci: list) -> dict:
    return {"roc_auc": auc, "roc_auc_ci95": ci, "accuracy": 0.70 + diff, "majority_class": 0.70,
            "majority_label": "not supported", "accuracy_minus_majority": diff, "accuracy_minus_majority_ci95": diff_ci,
            "n": 300, "units": 100, "unit": "claim id"}


def test_a_verdict_near_chance_is_marked_as_such():
    assert fa.verdict(_row(0.58, [0.47, 0.69], 0.05, [0.01, 0.09])) == (
        False, "ROC-AUC 0.58 (95% CI from 0.47) does not exceed chance (0.5)")
    # the WiCE test figure of issue 26 (accuracy +0.024 over the majority class) with a CI reaching 0
    assert fa.verdict(_row(0.71, [0.66, 0.76], 0.024, [-0.02, 0.07])) == (
        False, "accuracy 0.724 does not beat always answering 'not supported' (0.700): difference +0.024, "
               "95% CI -0.020 to +0.070, n = 300 (100 claim ids)")
    assert fa.verdict(_row(0.71, [0.66, 0.76], -0.05, [-0.09, -0.01]))[1].startswith(
        "accuracy 0.650 is worse than always answering 'not supported'")
    assert fa.verdict(_row(0.94, [0.92, 0.95], 0.15, [0.10, 0.19])) == (True, "")
    assert fa.verdict(_row(0.9, [None, None], 0.1, [None, None])) == (
        False, "no confidence interval (too few items, or one class only)")


def test_the_bootstrap_draws_a_claims_rows_together():
    units = ["a", "a", "a", "b", "c", "c"]
    for idx in fa.unit_resamples(units, n_boot=50, seed=1):
        drawn = [units[i] for i in idx]
        # 3 units drawn with replacement, each with all its rows: a → 3 rows, b → 1, c → 2
        assert sum({"a": 1 / 3, "b": 1.0, "c": 1 / 2}[u] for u in drawn) == pytest.approx(3)
        assert all(drawn.count(u) % {"a": 3, "b": 1, "c": 2}[u] == 0 for u in set(drawn))


def test_held_out_marks_scores_unrelated_to_the_labels_as_near_chance():
    # 40 held-out items whose score says nothing about the label (the same score for every second pair)
    units = [u for u in (f"item{i}" for i in range(400)) if fa.part_of(u) == "held_out"][:40]
    labels = np.array([i % 2 for i in range(40)])
    data = fa.LabelledSet("claim_support", [""] * 40, [[""]] * 40, labels, units)
    scores = np.array([0.9 if (i // 2) % 2 else 0.3 for i in range(40)])  # each pair: one of each label
    (row,) = fa.held_out(data, {"word_overlap": scores}, {"word_overlap": 0.5})
    assert row["roc_auc"] == 0.5 and row["accuracy"] == 0.5 and row["majority_class"] == 0.5
    assert row["cohen_kappa"] == 0.0 and row["cohen_kappa_ci95"][0] < 0 < row["cohen_kappa_ci95"][1]
    assert row["informative"] is False and row["reason"].startswith("ROC-AUC 0.50 (95% CI from 0.")


def test_an_uninformative_offline_judge_gets_no_grade_and_a_plain_note():
    value = {"mean": 0.9, "ci95": [0.88, 0.92], "n": 200, "n_valid": 200, "n_failed": 0, "constant": False,
             "few_items": False}
    bounds = (0.85, 0.7)
    assert spec.grade_of(bounds, value).status == "excellent"
    summary = {"fallback_faithfulness": dict(value), "hallucination_rate": {**value, "mean": 0.1}}
    # a kind of data with no held-out measurement: not informative, so not graded
    note = fbt.mark_trust(summary, ("fallback_faithfulness", "hallucination_rate"), kind="legal_citations")
    assert note == ("The offline judge (word overlap) was not measured on held-out legal_citations data: its "
                    "scores are not graded.")
    grade = spec.grade_of(bounds, summary["fallback_faithfulness"])
    assert (grade.status, grade.rule) == (None, "uninformative")
    assert grade.reason == "offline judge near chance on held-out legal citations data: not measured on held-out data"
    block = {"judge_backend": spec.OFFLINE_BACKEND, **summary}
    assert ungraded_degenerate({"tier_2_metrics": block}, rule="uninformative") == [
        ("tier_2_metrics", "fallback_faithfulness", grade.reason), ("tier_2_metrics", "hallucination_rate", grade.reason)]
    from ragnb.runs.summary import summary_lines

    lines = summary_lines({"id": "r1", "tier_2_metrics": block})
    assert ("not graded: the offline judge is near chance on held-out data of this kind — Tier 2 (generation): "
            "fallback_faithfulness, hallucination_rate") in lines[-1]
    # on answer grounding (what the tiers score) it is informative: the aggregate keeps its grade
    assert fbt.mark_trust(summary, ("fallback_faithfulness",)) is None
    assert summary["fallback_faithfulness"]["offline_trust"] == {"kind": "answer_grounding", "method": "word_overlap",
                                                                 "informative": True, "reason": ""}
    assert spec.grade_of(bounds, summary["fallback_faithfulness"]).status == "excellent"


def test_a_measured_near_chance_row_gives_the_plain_note():
    row = {"kind": "claim_support", "method": "word_overlap", "n": 571, "threshold": 0.8, "roc_auc": 0.71,
           "roc_auc_ci95": [0.66, 0.76], "accuracy": 0.69, "majority_class": 0.68, "informative": False,
           "reason": "accuracy 0.690 does not beat always answering 'not supported' (0.680) beyond chance"}
    trust = fbt.offline_trust("claim_support", rows=(row,))
    assert trust["informative"] is False
    assert trust["note"] == (
        "On held-out claim support data the offline judge (word overlap) is near chance — accuracy 0.690 does not "
        "beat always answering 'not supported' (0.680) beyond chance (ROC-AUC 0.71 (95% CI 0.66–0.76), accuracy "
        "0.69 at ≥ 0.8 vs 0.68 for always answering the more common label, n = 571): its scores here are not "
        "graded; read them as an overlap or similarity, not as a verdict.")


def test_sentence_overlap_needs_each_sentence_in_one_context_sentence():
    ctx = ["Paris has the tower.", "The tower opened in 1889."]
    # {pari, tower} ⊆ sentence 1, {open, 1889} ⊆ sentence 2: every answer sentence is found whole
    assert fb.sentence_overlap_faithfulness("The tower is in Paris. It opened in 1889.", ctx) == 1.0
    # one sentence whose words {pari, open, tower, 1889} are spread over two: best is 3 of 4 (sentence 2)
    one = "Paris opened the tower in 1889."
    assert fb.sentence_overlap_faithfulness(one, ctx) == 0.75 and fb.word_overlap_faithfulness(one, ctx) == 1.0
    assert math.isnan(fb.sentence_overlap_faithfulness("It is what it is.", ctx))
    assert fb.sentence_overlap_faithfulness(one, []) == 0.0


def test_docs_and_benchmarks_quote_the_stored_figures():
    from conftest import REPO

    for doc in ("docs/metrics.md", "BENCHMARKS.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        for r in TABLE["held_out"]:
            lo, hi = r["roc_auc_ci95"]
            assert f"{r['roc_auc']:.3f} ({lo:.3f}–{hi:.3f})" in text, (doc, r["kind"], r["method"])
            assert f"{r['accuracy_ci95'][0]:.3f}–{r['accuracy_ci95'][1]:.3f})" in text, (doc, r["kind"], r["method"])
            kappa = f"{r['cohen_kappa']:.3f} ({r['cohen_kappa_ci95'][0]:.3f}–{r['cohen_kappa_ci95'][1]:.3f})"
            assert kappa in text, (doc, r["kind"], r["method"])
