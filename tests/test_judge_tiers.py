"""Tier Judge and Tier Judge Pipeline: scripted LLM judges over HTTP, hand-computed reliability and
calibration (checked against scikit-learn), production judges as Python objects, the offline baseline on
BEGIN human labels, dataset validation, resume, and both notebooks executed end to end."""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from llm_server import completion
from sklearn import metrics as skm

from conftest import REPO
from ragnb.llm import LLMClient, LLMSettings
from ragnb.tiers import judging
from ragnb.tiers.judging import JudgePipelineItem

ANSWER = re.compile(r"Answer:\n<<<\n(answer-\d+)\n>>>")


def make_items(labels: list[bool]) -> list[JudgePipelineItem]:
    return [JudgePipelineItem(id=f"q{i}", question=f"question-{i}?", answer=f"answer-{i}", context=f"context-{i}.",
                              ground_truth_show=show, label="grounded" if show else "not grounded")
            for i, show in enumerate(labels)]


def make_client(server, cache_dir=None) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.base_url, api_key="sk-test", cache_dir=cache_dir,
                                 backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5, max_concurrency=4))


def scripted(server, scores: dict[tuple[str, str], list[list[float | None]]]):
    """Reply by (model, mode): item i's k-th judgement gets scores[(model, mode)][k][i] (k = pass 0 or 1);
    None = an unparseable reply (the judge re-asks, then gives up). Every request is counted."""
    seen: dict[tuple, int] = defaultdict(int)
    lock = threading.Lock()

    def handler(req):
        user = next(m["content"] for m in req["messages"] if m["role"] == "user")  # re-asks append messages
        mode = "reasoned" if '"reasoning"' in user else "direct"
        item = int(ANSWER.search(user).group(1).split("-")[1])
        with lock:
            n = seen[(req["model"], mode, item)]
            seen[(req["model"], mode, item)] += 1
        table = scores[(req["model"], mode)]
        value = table[min(n, 1)][item]
        if value is None:
            return completion("I cannot decide.", model=req["model"])
        body = {"score": value, "explanation": f"pass {min(n, 1) + 1}"}
        if mode == "reasoned":
            body = {"reasoning": "checked each fact", **body}
        return completion(json.dumps(body), model=req["model"])

    server.set_handler(handler)


# --------------------------------------------------------------------------------------------
# Tier Judge with a scripted LLM
# --------------------------------------------------------------------------------------------

LABELS = [True, False, True, False, True, False]
DIRECT = [[1.0, 0.2, 0.8, 0.0, 0.3, 0.6], [0.9, 0.9, 0.2, 0.0, 0.3, None]]  # item 5 fails on the repeat
REASONED = [[0.7, 0.1, 1.0, 0.5, 0.9, 0.0], [0.7, 0.1, 1.0, 0.5, 0.2, 0.0]]


def test_tier_judge_consistency_errors_and_calibration(llm_server, tmp_path):
    scripted(llm_server, {("m1", "direct"): DIRECT, ("m1", "reasoned"): REASONED})
    items = make_items(LABELS)
    log_path = tmp_path / "tier_judge.items.jsonl"
    # A disk cache is on: the second pass must still reach the endpoint (cache=False), or it would replay pass 1.
    client = make_client(llm_server, cache_dir=tmp_path / "cache")
    res = judging.run_tier_judge(items, client, ["m1"], modes=["direct", "reasoned"], delta=0.5,
                                 show_threshold=0.5, n_boot=200, log_path=log_path)

    # direct: |Δ| = 0.1, 0.7, 0.6, 0.0, 0.0, (failed) → consistent 1, 0, 0, 1, 1 → 3/5
    d = res.summary["by_mode"]["direct"]
    assert d["consistency_score"]["mean"] == pytest.approx(3 / 5)
    c = d["consistency_score"]
    assert (c["n"], c["n_valid"], c["n_failed"]) == (6, 5, 1)
    assert d["error_rate"] == pytest.approx(1 / 12)  # 1 failed judgement of 2 × 6
    assert d["errors"]["n_failed"] == 1
    assert d["avg_faithfulness"]["mean"] == pytest.approx(np.mean(DIRECT[0]))
    # reasoned: |Δ| = 0, 0, 0, 0, 0.7, 0 → 5/6; no errors
    r = res.summary["by_mode"]["reasoned"]
    assert r["consistency_score"]["mean"] == pytest.approx(5 / 6)
    assert r["error_rate"] == 0.0
    # headline = the first mode
    assert res.summary["consistency_score"] == d["consistency_score"]
    assert res.summary["primary_mode"] == "direct"

    # calibration of the first-pass scores against the human labels, by hand and with scikit-learn
    s = np.array(DIRECT[0])
    cal = d["calibration"]
    assert cal["roc_auc"]["mean"] == pytest.approx(skm.roc_auc_score(LABELS, s))
    # positives 1.0, 0.8, 0.3 vs negatives 0.2, 0.0, 0.6: 8 of 9 pairs ordered right (0.3 < 0.6) → AUC 8/9
    assert cal["roc_auc"]["mean"] == pytest.approx(8 / 9)
    pred = s >= 0.5  # T F T F F T → TP 2, FP 1, FN 1, TN 2
    at = cal["at_threshold"]
    assert at["confusion"] == {"tp": 2, "fp": 1, "fn": 1, "tn": 2}
    m = at["metrics"]
    assert m["accuracy"]["mean"] == pytest.approx(4 / 6) == pytest.approx(skm.accuracy_score(LABELS, pred))
    assert m["precision"]["mean"] == pytest.approx(2 / 3) == pytest.approx(skm.precision_score(LABELS, pred))
    assert m["recall"]["mean"] == pytest.approx(2 / 3) == pytest.approx(skm.recall_score(LABELS, pred))
    assert m["f1"]["mean"] == pytest.approx(2 / 3) == pytest.approx(skm.f1_score(LABELS, pred))
    assert m["cohen_kappa"]["mean"] == pytest.approx(skm.cohen_kappa_score(LABELS, pred))
    assert m["balanced_accuracy"]["mean"] == pytest.approx(skm.balanced_accuracy_score(LABELS, pred))
    assert res.summary["roc_auc"] == cal["roc_auc"]

    # modes compared item by item: |direct − reasoned| first pass = .3 .1 .2 .5 .6 .6 → 4 of 6 within δ
    agr = res.summary["mode_agreement"]["direct vs reasoned"]
    assert agr["share_within_delta"]["mean"] == pytest.approx(4 / 6)
    assert agr["mean_abs_diff"] == pytest.approx(np.mean([0.3, 0.1, 0.2, 0.5, 0.6, 0.6]))

    # requests: per mode 6 first + 6 repeats, and the failing repeat re-asked twice (reask budget 2)
    assert len(llm_server.chat_requests) == (6 + 5 + 3) + (6 + 6)
    per_item = res.per_item.set_index(["mode", "id"])
    assert per_item.loc[("direct", "q5"), "status_2"] == "failed"
    assert math.isnan(per_item.loc[("direct", "q5"), "consistent"])
    assert set(per_item["method"]) == {"llm"}
    assert res.summary["info"]["judge_backend"] == "llm"
    assert (per_item.loc["direct", "latency_ms_2"] > 0).all()  # every repeat went over HTTP

    # resume: the same log → only the failed judgement (q5's repeat) is asked again — 1 + 2 re-asks, still
    # unusable — and the numbers are the same
    before = len(llm_server.chat_requests)
    again = judging.run_tier_judge(items, make_client(llm_server, cache_dir=tmp_path / "cache"), ["m1"],
                                   modes=["direct", "reasoned"], delta=0.5, show_threshold=0.5, n_boot=200,
                                   log_path=log_path)
    assert len(llm_server.chat_requests) == before + 3
    assert _strict(_no_latency(again.summary)) == _strict(_no_latency(res.summary))
    lat = ["latency_ms_1", "latency_ms_2"]
    pd.testing.assert_frame_equal(again.per_item.drop(columns=lat), res.per_item.drop(columns=lat))


def _no_latency(obj):
    if isinstance(obj, dict):
        return {k: _no_latency(v) for k, v in obj.items() if "latency" not in k}
    return obj


def _strict(obj):
    from ragnb.io import dumps_strict

    return dumps_strict(obj)


def test_tier_judge_two_models_agreement(llm_server):
    m1 = [[1.0, 0.0, 0.5, 1.0]] * 2
    m2 = [[0.5, 0.0, 1.0, 0.0]] * 2
    scripted(llm_server, {("m1", "direct"): m1, ("m2", "direct"): m2})
    res = judging.run_tier_judge(make_items([True, False, True, False]), make_client(llm_server), ["m1", "m2"],
                                 modes=["direct"], n_boot=100)
    block = res.summary["by_mode"]["direct"]
    # |m1 − m2| = .5, 0, .5, 1 → 3 of 4 items within δ = 0.5; mean aggregate of the two models
    assert block["agreement"]["share_within_delta"] == pytest.approx(0.75)
    assert block["agreement"]["mean_abs_diff"] == pytest.approx(0.5)
    assert block["avg_faithfulness"]["mean"] == pytest.approx(np.mean([0.75, 0.0, 0.75, 0.5]))
    assert block["consistency_score"]["mean"] == 1.0  # each model repeats itself exactly
    assert set(block["consistency_by_model"]) == {"m1", "m2"}


def test_tier_judge_error_rate_counts_a_partial_jury(llm_server):
    """m2 fails on 1 of 4 items in both passes; m1 never fails: no item is lost, yet 2 of 16 judgements failed."""
    m1 = [[1.0, 0.0, 0.5, 1.0]] * 2
    m2 = [[0.5, 0.0, None, 0.0]] * 2
    scripted(llm_server, {("m1", "direct"): m1, ("m2", "direct"): m2})
    res = judging.run_tier_judge(make_items([True, False, True, False]), make_client(llm_server), ["m1", "m2"],
                                 modes=["direct"], n_boot=100)
    s = res.summary
    assert s["error_rate"] == pytest.approx(2 / 16)
    errors = s["by_mode"]["direct"]["errors"]
    assert (errors["n_partial"], errors["n_failed"], errors["item_error_rate"]) == (2, 0, 0.0)
    assert errors["by_model"]["m2"]["error_rate"] == pytest.approx(2 / 8)
    assert res.per_item["status_1"].tolist() == ["ok", "ok", "partial", "ok"]
    assert s["avg_faithfulness"]["mean"] == pytest.approx(np.mean([0.75, 0.0, 0.5, 0.5]))
    assert any("partial juries" in n and "2 of 16" in n for n in res.notes)


def test_tier_judge_rejects_bad_settings(llm_server):
    items = make_items([True, False])
    with pytest.raises(ValueError, match="modes"):
        judging.run_tier_judge(items, make_client(llm_server), ["m1"], modes=["careful"])
    with pytest.raises(ValueError, match="models is empty"):
        judging.run_tier_judge(items, make_client(llm_server), [])
    with pytest.raises(ValueError, match="delta"):
        judging.run_tier_judge(items, None, delta=-1)
    with pytest.raises(ValueError, match="show_threshold"):
        judging.run_tier_judge(items, None, show_threshold=2)
    no_context = [JudgePipelineItem(id="a", question="q?", answer="a", ground_truth_show=True)]
    with pytest.raises(ValueError, match="context"):
        judging.run_tier_judge(no_context, None)


# --------------------------------------------------------------------------------------------
# Tier Judge Pipeline
# --------------------------------------------------------------------------------------------


class ProductionJudge:
    """A production show/no-show judge as a Python object: verdicts by answer, one call fails."""

    name = "prod-judge"
    verdicts = {"answer-0": True, "answer-1": True, "answer-2": False, "answer-3": False, "answer-4": "Yes",
                "answer-5": "no", "answer-6": True, "answer-7": "maybe"}

    def __init__(self):
        self.calls = 0

    def judge(self, question: str, answer: str) -> bool:
        self.calls += 1
        if answer == "answer-8":
            raise RuntimeError("upstream timeout")
        return self.verdicts[answer]


PIPE_LABELS = [True, False, True, False, True, False, True, True, False]


def test_pipeline_with_a_system_judge(tmp_path):
    items = make_items(PIPE_LABELS)
    judge = ProductionJudge()
    res = judging.run_tier_judge_pipeline(items, judge, n_boot=200, log_path=tmp_path / "p.items.jsonl")
    s = res.summary
    # verdicts T T F F T F T ? ✗  vs labels T F T F T F T T F
    # q0 TP, q1 FP, q2 FN, q3 TN, q4 TP, q5 TN, q6 TP, q7 failed ("maybe"), q8 failed (raised)
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (3, 1, 1, 2)
    assert (s["n"], s["n_valid"], s["n_failed"]) == (9, 7, 2)
    assert s["accuracy"]["mean"] == pytest.approx(5 / 7)
    assert s["precision"]["mean"] == pytest.approx(3 / 4)
    assert s["recall"]["mean"] == pytest.approx(3 / 4)
    assert s["f1_score"]["mean"] == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
    lo, hi = s["accuracy"]["ci95"]
    assert lo <= 5 / 7 <= hi
    assert s["judge"] == "system: prod-judge" and s["info"]["judge_backend"] == "system"
    assert "roc_auc" not in s  # a system's verdicts have no score to rank by
    per = res.per_item.set_index("id")
    assert per.loc["q7", "outcome"] == "failed" and "maybe" in per.loc["q7", "error"]
    assert per.loc["q8", "outcome"] == "failed" and "upstream timeout" in per.loc["q8", "error"]
    assert list(per["outcome"][:7]) == ["TP", "FP", "FN", "TN", "TP", "TN", "TP"]
    assert per["latency_ms"].notna().all() and s["p95_latency_ms"] >= s["p50_latency_ms"] >= 0
    assert any("excluded from the metrics" in n for n in res.notes)

    # an interrupted run (only 4 items logged) resumes with the other 5
    partial_log = tmp_path / "partial.items.jsonl"
    judging.run_tier_judge_pipeline(items[:4], ProductionJudge(), n_boot=0, log_path=partial_log)
    resumed_judge = ProductionJudge()
    resumed = judging.run_tier_judge_pipeline(items, resumed_judge, n_boot=200, log_path=partial_log)
    assert resumed_judge.calls == 5
    assert (resumed.summary["tp"], resumed.summary["n_failed"]) == (3, 2)

    # resume: only the two failed items are asked again (they fail again); results identical but for latency
    again_judge = ProductionJudge()
    again = judging.run_tier_judge_pipeline(items, again_judge, n_boot=200, log_path=tmp_path / "p.items.jsonl")
    assert again_judge.calls == 2
    assert any("7 finished item(s) read back" in n and "2 item(s) that had failed were scored again — 0 of 2"
               in n for n in again.notes)
    assert _strict(_no_latency(again.summary)) == _strict(_no_latency(s))
    pd.testing.assert_frame_equal(again.per_item.drop(columns="latency_ms"), res.per_item.drop(columns="latency_ms"))

    # resume=False starts over: the old log is moved aside
    fresh = judging.item_log_path(tmp_path, "p", resume=False)
    assert not fresh.exists() and (tmp_path / "p.items.jsonl.old").exists()


def test_items_without_context_are_not_scored_by_the_baseline_but_by_a_system_judge(llm_server):
    # q1 and q4 have no context: the faithfulness judges cannot score them; a production judge needs none.
    items = [it.model_copy(update={"context": None}) if it.id in ("q1", "q4") else it for it in make_items(LABELS)]
    scripted(llm_server, {("judge-a", "direct"): DIRECT, ("judge-a", "reasoned"): REASONED})
    client = make_client(llm_server)
    res = judging.run_tier_judge_pipeline(items, "baseline", client=client, models=["judge-a"], n_boot=0)
    s = res.summary
    # scored: q0 1.0 → TP, q2 0.8 → TP, q3 0.0 → TN, q5 0.6 (label no-show) → FP; threshold 0.5
    assert (s["tp"], s["fp"], s["fn"], s["tn"], s["n"], s["n_failed"], s["n_not_scored"]) == (2, 1, 0, 1, 4, 0, 2)
    assert s["not_scored"] == {"reason": "no context", "n": 2, "ids": ["q1", "q4"]}
    assert res.per_item["outcome"].tolist() == ["TP", "not scored", "TP", "TN", "not scored", "FP"]
    assert res.per_item["predicted_show"].tolist() == [True, None, True, False, None, True]
    sent = {a for r in llm_server.chat_requests for m in r.messages for a in ANSWER.findall(m["content"])}
    assert sent == {"answer-0", "answer-2", "answer-3", "answer-5"}  # items without a context never reach the judge
    scripted(llm_server, {("judge-a", "direct"): DIRECT, ("judge-a", "reasoned"): REASONED})  # passes count anew
    tj = judging.run_tier_judge(items, client, ["judge-a"], modes=["direct"], n_boot=0)
    assert tj.summary["n_not_scored"] == 2 and tj.summary["consistency_score"]["n"] == 4
    # pass 1 vs pass 2 of q0, q2, q3, q5: |1.0−0.9|, |0.8−0.2|, 0, q5 failed on the repeat → 2 of 3 consistent
    assert tj.summary["consistency_score"]["mean"] == pytest.approx(2 / 3)
    assert tj.per_item.set_index("id").loc[["q1", "q4"], "status_1"].tolist() == ["not scored"] * 2
    system = judging.run_tier_judge_pipeline(items[:5], ProductionJudge(), n_boot=0)
    assert system.summary["n_not_scored"] == 0 and system.summary["n"] == 5
    bare = [it.model_copy(update={"context": None}) for it in items]
    for run in (lambda: judging.run_tier_judge(bare, None), lambda: judging.run_tier_judge_pipeline(bare, "baseline")):
        with pytest.raises(ValueError, match=r"no item has a context \(all 6\)"):
            run()


def test_pipeline_system_from_module_spec_needs_only_judge(tmp_path, monkeypatch):
    (tmp_path / "prod_judge_mod.py").write_text(
        "class Judge:\n"
        "    async def judge(self, question, answer, context=None):\n"
        "        return 'Yes' if context and answer.split('-')[1] in context else 'No'\n"
        "judge_only = Judge()\n"
        "class NoJudge:\n"
        "    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    items = make_items([True, False])
    items[1] = items[1].model_copy(update={"context": "unrelated"})
    res = judging.run_tier_judge_pipeline(items, "prod_judge_mod:judge_only", n_boot=0)
    assert res.per_item["predicted_show"].tolist() == [True, False]
    assert res.summary["accuracy"]["mean"] == 1.0
    with pytest.raises(ValueError, match="has no judge"):
        judging.run_tier_judge_pipeline(items, "prod_judge_mod:NoJudge")
    with pytest.raises(ValueError, match="cannot import"):
        judging.run_tier_judge_pipeline(items, "no_such_module_xyz:judge")
    sys.modules.pop("prod_judge_mod", None)


def test_pipeline_baseline_with_llm_scores(llm_server):
    scores = [0.9, 0.4, 0.5, 0.1, None]
    scripted(llm_server, {("m1", "direct"): [scores, scores]})
    items = make_items([True, False, False, True, True])
    res = judging.run_tier_judge_pipeline(items, "baseline", client=make_client(llm_server), models=["m1"],
                                          show_threshold=0.5, n_boot=100)
    # show ⇔ score ≥ 0.5: T F T F, item 4 failed → TP 1, FP 1, FN 1, TN 1
    assert res.per_item["predicted_show"].tolist() == [True, False, True, False, None]
    s = res.summary
    assert (s["tp"], s["fp"], s["fn"], s["tn"], s["n_failed"]) == (1, 1, 1, 1, 1)
    assert s["accuracy"]["mean"] == pytest.approx(0.5)
    assert s["roc_auc"]["mean"] == pytest.approx(skm.roc_auc_score([True, False, False, True], [0.9, 0.4, 0.5, 0.1]))
    assert s["info"]["judge_backend"] == "llm" and set(res.per_item["method"]) == {"llm"}
    assert len(llm_server.chat_requests) == 4 + 3  # the unparseable item: 1 call + 2 re-asks


# --------------------------------------------------------------------------------------------
# Offline: the fallback (see docs/metrics.md, Faithfulness) on BEGIN human labels
# --------------------------------------------------------------------------------------------


def test_offline_baseline_equals_fallback_thresholded(encoder):
    from ragnb.metrics.fallback import faithfulness_fallback

    ds = judging.begin_pipeline_dataset(10)
    res = judging.run_tier_judge_pipeline(ds, "baseline", encoder=encoder, show_threshold=0.5, n_boot=100)
    direct = np.array([faithfulness_fallback(it.answer, [it.context], encoder)["score"] for it in ds.items])
    np.testing.assert_allclose(res.per_item["score"].to_numpy(dtype=float), direct, atol=1e-5)
    assert res.per_item["predicted_show"].tolist() == [bool(v >= 0.5) for v in direct]
    assert set(res.per_item["method"]) == {"word_overlap"}
    y = [it.ground_truth_show for it in ds.items]
    pred = direct >= 0.5
    assert res.summary["accuracy"]["mean"] == pytest.approx(skm.accuracy_score(y, pred))
    assert res.summary["roc_auc"]["mean"] == pytest.approx(skm.roc_auc_score(y, direct))
    assert res.summary["info"]["judge_backend"] == "offline-fallback"

    tj = judging.run_tier_judge(ds, None, encoder=encoder, n_boot=100)
    assert tj.summary["consistency_score"]["mean"] == 1.0 and tj.summary["error_rate"] == 0.0
    assert any("deterministic" in n and "1.0 by construction" in n for n in tj.notes)
    np.testing.assert_allclose(tj.per_item["score_1"].to_numpy(dtype=float), direct, atol=1e-5)
    assert tj.summary["roc_auc"]["mean"] == pytest.approx(skm.roc_auc_score(y, tj.per_item["score_1"]))
    assert tj.summary["avg_latency_ms"] > 0


def test_offline_automatic_threshold_is_the_fallbacks_calibrated_cut(encoder):
    # The fallback's word-overlap scores are not on the LLM judge's scale: offline, "automatic" (None or 0)
    # thresholds them at their own cut tuned on BEGIN dev's tuning half (Youden), not at the LLM scale's midpoint.
    from ragnb.metrics.fallback import AGREEMENT

    cut = next(r["threshold"] for r in AGREEMENT if r["kind"] == "answer_grounding" and r["method"] == "word_overlap")
    ds = judging.begin_pipeline_dataset(40)
    for auto in (None, 0):
        res = judging.run_tier_judge_pipeline(ds, "baseline", encoder=encoder, show_threshold=auto, n_boot=50)
        assert res.summary["info"]["show_threshold"] == cut == 0.8
        scores = res.per_item["score"].to_numpy(dtype=float)
        valid = ~np.isnan(scores)
        y = np.array([it.ground_truth_show for it in ds.items])[valid]
        assert res.summary["accuracy"]["mean"] == pytest.approx(skm.accuracy_score(y, scores[valid] >= cut))
        assert any("in-sample" in n for n in res.notes)  # calibrated on BEGIN dev, measured on it: said so
    explicit = judging.run_tier_judge_pipeline(ds, "baseline", encoder=encoder, show_threshold=0.7, n_boot=50)
    assert explicit.summary["info"]["show_threshold"] == 0.7 and not any("in-sample" in n for n in explicit.notes)
    assert judging.run_tier_judge(ds, None, encoder=encoder, n_boot=50).summary["info"]["show_threshold"] == 0.8
    with pytest.raises(ValueError, match="show_threshold"):
        judging.run_tier_judge_pipeline(ds, "baseline", encoder=encoder, show_threshold=1.5)


def test_word_overlap_without_encoder():
    from ragnb.metrics.fallback import faithfulness_fallback

    items = make_items([True, False])
    items[0] = items[0].model_copy(update={"answer": "Paris is the capital",
                                           "context": "Paris is the capital of France."})
    items[1] = items[1].model_copy(update={"answer": "Berlin has a zoo", "context": "Paris is the capital of France."})
    res = judging.run_tier_judge_pipeline(items, "baseline", n_boot=0)
    assert set(res.per_item["method"]) == {"word_overlap"}
    assert res.per_item["score"].tolist() == [faithfulness_fallback(it.answer, [it.context])["score"] for it in items]
    assert res.per_item["predicted_show"].tolist() == [True, False]


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------


def test_begin_dataset_bundled():
    full = judging.begin_pipeline_dataset()
    assert len(full.items) == 1227  # 1229 rows, 2 with an empty message skipped
    assert sum(it.ground_truth_show for it in full.items) == 313
    assert sum(it.label == "generic" for it in full.items) == 80  # 81 generic rows, one has an empty message
    assert all(not it.ground_truth_show for it in full.items if it.label == "generic")
    first = full.items[0]
    assert (first.id, first.source, first.label) == ("begin_dev_wow_00000", "wow", "attributable")
    assert first.answer.startswith("crayola shifted its focus") and first.context.startswith("originally an industrial")
    dropped = judging.begin_pipeline_dataset(generic="drop")
    assert len(dropped.items) == 1227 - 80
    assert all(it.label != "generic" for it in dropped.items)
    a, b = judging.begin_pipeline_dataset(40), judging.begin_pipeline_dataset(40)
    assert [it.id for it in a.items] == [it.id for it in b.items] and len(a.items) == 40
    assert {it.source for it in a.items} == {"wow", "cmu", "tc"}
    order = {it.id: i for i, it in enumerate(full.items)}
    assert [order[it.id] for it in a.items] == sorted(order[it.id] for it in a.items)  # file order
    with pytest.raises(ValueError, match="generic"):
        judging.begin_pipeline_dataset(generic="keep")
    assert (REPO / "ragnb" / "data" / "begin_groundedness" / "LICENSE").is_file()


def test_open_judge_dataset_from_file(tmp_path):
    path = tmp_path / "judge.jsonl"
    rows = [{"question": "q1?", "answer": "a1", "ground_truth_show": "show", "context": ["c1", "c2"]},
            {"id": 7, "question": "q2?", "answer": "a2", "ground_truth_show": "No"},
            {"question": "q3?", "answer": "", "ground_truth_show": 1, "team": "x"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    ds = judging.open_judge_dataset(str(path), max_items=0)
    assert [it.id for it in ds.items] == ["item-1", "7", "item-3"]
    assert [it.ground_truth_show for it in ds.items] == [True, False, True]
    assert ds.items[0].contexts() == ["c1", "c2"] and ds.items[1].contexts() == []
    assert ds.items[2].model_extra == {"team": "x"}
    assert len(judging.open_judge_dataset(str(path), max_items=2).items) == 2
    as_json = tmp_path / "judge.json"
    as_json.write_text(json.dumps({"name": "prod-sample", "items": rows}), encoding="utf-8")
    assert judging.load_judge_dataset(as_json).name == "prod-sample"


@pytest.mark.parametrize("name, content, where, field", [
    ("bad.jsonl", '{"question": "q", "answer": "a", "ground_truth_show": true}\n'
                  '{"question": "q", "answer": "a", "ground_truth_show": false}\n'
                  '{"question": "q", "answer": "a"}\n', "bad.jsonl:3", "ground_truth_show"),
    ("bad.jsonl", '{"question": "q", "answer": "a", "ground_truth_show": "maybe"}\n', "bad.jsonl:1", "ground_truth_show"),
    ("bad.jsonl", '{"question": "q", "answer": "a", "ground_truth_show": true}\n{"question": "q",\n',
     "bad.jsonl:2", "invalid JSON"),
    ("bad.jsonl", '{"question": "  ", "answer": "a", "ground_truth_show": true}\n', "bad.jsonl:1", "question"),
    ("bad.jsonl", '{"question": "q", "answer": 5, "ground_truth_show": true}\n', "bad.jsonl:1", "answer"),
    ("bad.jsonl", '{"id": "x", "question": "q", "answer": "a", "ground_truth_show": true}\n'
                  '{"id": "x", "question": "q", "answer": "b", "ground_truth_show": true}\n', "bad.jsonl:2", "'id'"),
    ("bad.jsonl", '["q", "a", true]\n', "bad.jsonl:1", "JSON object"),
    ("bad.json", '[{"question": "q", "answer": "a", "ground_truth_show": true},'
                 ' {"question": "q", "answer": "a", "ground_truth_show": true, "context": 3}]', "item 1", "context"),
    ("bad.json", '{"items": "nope"}', "bad.json", "array"),
    ("bad.json", "", "bad.json", "invalid JSON"),
    ("empty.jsonl", "\n\n", "empty.jsonl", "no items"),
])
def test_malformed_pipeline_dataset(tmp_path, name, content, where, field):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        judging.load_judge_dataset(path)
    message = str(info.value)
    assert str(path) in message and where in message and field in message, message


def test_missing_dataset_file(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        judging.open_judge_dataset(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match="max_items"):
        judging.open_judge_dataset("", max_items=-1)


# --------------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebooks_offline(tmp_path):
    from ragnb.runs.runner import run_notebooks

    result = run_notebooks(["tier_judge", "tier_judge_pipeline"], {"max_items": 40, "n_boot": 100},
                           outputs=tmp_path, log=lambda *_: None)
    assert result.failures == []
    run_dir = result.run_dir
    for stem in ("tier_judge", "tier_judge_pipeline"):
        for suffix in (".ipynb", ".html", ".metrics.json", ".per_item.csv", ".items.jsonl"):
            assert (run_dir / f"{stem}{suffix}").is_file(), f"{stem}{suffix} missing"
    tj = json.loads((run_dir / "tier_judge.metrics.json").read_text(encoding="utf-8"))
    assert tj["tier"] == "tier_judge" and tj["judge_backend"] == "offline-fallback"
    assert tj["judge_model"] == "offline-fallback" and tj["judge_eval_mode"] == "offline-fallback"
    assert tj["consistency_score"]["mean"] == 1.0 and tj["consistency_score"]["n"] == 40
    assert any("deterministic" in n for n in tj["notes"])
    assert 0.5 < tj["roc_auc"]["mean"] <= 1.0 and tj["roc_auc"]["n"] == 40
    assert tj["llm_usage"] == {}
    tp = json.loads((run_dir / "tier_judge_pipeline.metrics.json").read_text(encoding="utf-8"))
    assert tp["tier"] == "tier_judge_pipeline" and tp["judge_backend"] == "offline-fallback"
    assert tp["tp"] + tp["fp"] + tp["fn"] + tp["tn"] == 40 and 0 <= tp["accuracy"]["mean"] <= 1
    per_item = pd.read_csv(run_dir / "tier_judge_pipeline.per_item.csv")
    assert len(per_item) == 40 and set(per_item["method"]) == {"word_overlap"}
    # the same items, the same fallback: the pipeline's scores are Tier Judge's first-pass scores
    tj_items = pd.read_csv(run_dir / "tier_judge.per_item.csv")
    np.testing.assert_allclose(per_item["score"], tj_items["score_1"], atol=1e-6)
    html = (run_dir / "tier_judge.html").read_text(encoding="utf-8")
    assert "offline-fallback" in html and not re.search(r"<script[^>]*\bsrc=[\"']?https?://", html)


# A judge-pipeline sheet as a Russian Excel saves it: UTF-8 with a byte-order mark, ';' between cells, ИСТИНА/ЛОЖЬ,
# a cell holding ';' quoted; two rows without a context (a system's own judge needs none, the baseline cannot score them).
EXCEL_ROWS = [
    ("Как получить доступ к VPN?", "Заявку на VPN подают через портал сервис-деска.", "ИСТИНА",
     "Заявку на VPN подают через портал сервис-деска; форма «Удалённый доступ»."),
    ("Сколько дней отпуска?", "Сорок дней в году.", "ЛОЖЬ",
     "У каждого сотрудника двадцать восемь дней оплачиваемого отпуска в год."),
    ("Кто одобряет заявку?", "Руководитель команды.", "ИСТИНА", ""),
    ("How do I deploy?", "Merge to the main branch.", "TRUE",
     "Merge to the main branch and the pipeline builds a container image."),
    ("How do I roll back?", "Call the support hotline.", "FALSE",
     "Roll back with the previous image tag if health checks fail."),
    ("Where is the canteen menu?", "On the intranet.", "FALSE", ""),
    ("Who approves production?", "Someone signs it off in chat.", "TRUE",  # right, but in other words: a false no-show
     "Production needs a manual approval in the release channel."),
]


def _excel_csv(path):
    def cell(text):
        return f'"{text}"' if ";" in text else text

    lines = ["question;answer;ground_truth_show;context"] + [";".join(cell(c) for c in row) for row in EXCEL_ROWS]
    path.write_text("\r\n".join(lines) + "\r\n\r\n", encoding="utf-8-sig")
    return path


@pytest.mark.slow
def test_notebooks_score_what_ragnb_dataset_writes_and_skip_items_without_context(tmp_path):
    from click.testing import CliRunner

    from ragnb.cli.main import build_cli
    from ragnb.metrics.fallback import OFFLINE_THRESHOLD, faithfulness_fallback
    from ragnb.runs.runner import run_notebooks

    out = tmp_path / "judge_set.json"
    res = CliRunner().invoke(build_cli(), ["dataset", "judge-pipeline", "--from", str(_excel_csv(tmp_path / "s.csv")),
                                           "--output", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "2 item(s) have no context" in res.stderr
    written = json.loads(out.read_text(encoding="utf-8"))["items"]
    assert [it["ground_truth_show"] for it in written] == [True, False, True, True, False, False, True]
    assert written[0]["context"] == EXCEL_ROWS[0][3] and "context" not in written[2]  # the quoted ';' kept

    result = run_notebooks(["tier_judge", "tier_judge_pipeline"], {"dataset_path": str(out), "n_boot": 50},
                           outputs=tmp_path / "runs", log=lambda *_: None)
    assert result.failures == [], result.reports
    run_dir = result.run_dir
    scored = [i for i, row in enumerate(EXCEL_ROWS) if row[3]]
    y = [EXCEL_ROWS[i][2] in ("ИСТИНА", "TRUE") for i in scored]
    scores = [faithfulness_fallback(EXCEL_ROWS[i][1], [EXCEL_ROWS[i][3]])["score"] for i in scored]
    cut = OFFLINE_THRESHOLD["word_overlap"]
    pred = [s >= cut for s in scores]
    assert pred == [True, False, True, False, False]  # one false no-show: accuracy 0.8, not a trivial 1.0

    tp = json.loads((run_dir / "tier_judge_pipeline.metrics.json").read_text(encoding="utf-8"))
    assert tp["n_not_scored"] == 2 and tp["not_scored"] == {"reason": "no context", "n": 2, "ids": ["item-3", "item-6"]}
    assert (tp["n"], tp["n_valid"], tp["n_failed"]) == (5, 5, 0)
    assert tp["tp"] + tp["fp"] + tp["fn"] + tp["tn"] == 5
    assert tp["accuracy"]["mean"] == pytest.approx(skm.accuracy_score(y, pred))
    assert (tp["tp"], tp["fn"]) == (sum(p and t for p, t in zip(pred, y)), sum(t and not p for p, t in zip(pred, y)))
    assert tp["info"]["n_items"] == 7 and tp["info"]["n_scored"] == 5
    assert any("2 of 7 items have no context and were not scored" in n for n in tp["notes"])
    items = pd.read_csv(run_dir / "tier_judge_pipeline.per_item.csv")
    assert items["id"].tolist() == [f"item-{k}" for k in range(1, 8)]
    assert items.set_index("id").loc[["item-3", "item-6"], "outcome"].tolist() == ["not scored"] * 2
    np.testing.assert_allclose(items.set_index("id").loc[[f"item-{i + 1}" for i in scored], "score"], scores)

    tj = json.loads((run_dir / "tier_judge.metrics.json").read_text(encoding="utf-8"))
    assert tj["n_not_scored"] == 2 and tj["not_scored"]["ids"] == ["item-3", "item-6"]
    assert (tj["consistency_score"]["n"], tj["consistency_score"]["n_failed"]) == (5, 0)
    assert tj["avg_faithfulness"]["mean"] == pytest.approx(np.mean(scores))
    assert tj["roc_auc"]["mean"] == pytest.approx(skm.roc_auc_score(y, scores)) and tj["roc_auc"]["n"] == 5
    assert tj["error_rate"] == 0.0
    for stem in ("tier_judge", "tier_judge_pipeline"):
        html = (run_dir / f"{stem}.html").read_text(encoding="utf-8")
        assert "not_scored (no context)" in html and "n_not_scored (no context)" in html, stem
