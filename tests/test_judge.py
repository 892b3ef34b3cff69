"""ragnb.judges (direct scores, pairwise, agreement, Tier Judge) through the real LLMClient over HTTP against the scripted server (tests/llm_server.py)."""

from __future__ import annotations

import json
import math
import re
import threading
from collections import deque

import numpy as np
import pytest
from llm_server import completion

from ragnb.llm import ChatResult, LLMClient, LLMSettings
from ragnb.judges.agreement import agreement, krippendorff_alpha
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.pairwise import majority_verdict, verdict_parser
from ragnb.judges.reliability import error_rate, judge_consistency, judge_latency, judge_reliability
from ragnb.judges.scores import SCALES, Judge, score_parser
from ragnb.llm.result import EvaluationResult, ModelScore

Q = "What is the capital of France?"
ANS = "Paris is the capital of France."
CTX = "Paris is the capital and largest city of France."
REF = "Paris."
CYRILLIC = re.compile("[А-Яа-яЁё]")


def make_judge(server, models, *, cache_dir=None, **config) -> Judge:
    settings = LLMSettings(base_url=server.base_url, api_key="sk-test", cache_dir=cache_dir,
                           backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5,
                           # The test server listens with a backlog of 5: more simultaneous connects stall ~1 s.
                           max_concurrency=4)
    return Judge(LLMClient(settings), JudgeConfig(models=models, **config))


def reply(score, explanation="because", **extra) -> str:
    return json.dumps({**extra, "score": score, "explanation": explanation})


def route(server, replies: dict[str, list[str] | str]):
    """Answer by request_json["model"]: each model's replies in order, its last reply repeating."""
    queues = {m: deque([v] if isinstance(v, str) else v) for m, v in replies.items()}
    lock = threading.Lock()

    def handler(req):
        with lock:
            q = queues[req["model"]]
            text = q.popleft() if len(q) > 1 else q[0]
        return completion(text, model=req["model"])

    server.set_handler(handler)


def requests_of(server, model):
    return [r for r in server.chat_requests if r.body["model"] == model]


# --------------------------------------------------------------------------------------------
# Scores, models, aggregation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how, expected", [("mean", 0.5), ("median", 0.5), ("majority", 0.0)])
def test_three_models_scores_and_aggregates(llm_server, how, expected):
    route(llm_server, {"m1": reply(0.5, "half"), "m2": reply(1.0, "all"), "m3": reply(0.0, "none")})
    judge = make_judge(llm_server, ["m1", "m2", "m3"], aggregate=how, max_tokens=321)
    r = judge.sync.judge_faithfulness(Q, ANS, CTX)

    # mean = (0.5 + 1 + 0) / 3 = 0.5; median of {0, 0.5, 1} = 0.5; majority: all values once → the smallest, 0.0
    assert r.score == pytest.approx(expected)
    assert (r.metric, r.method, r.status) == ("faithfulness", "llm", "ok")
    assert [(m.model, m.score, m.explanation, m.status) for m in r.model_scores] == [
        ("m1", 0.5, "half", "ok"), ("m2", 1.0, "all", "ok"), ("m3", 0.0, "none", "ok")]
    assert all(m.calls == 1 and m.details["reasks"] == 0 for m in r.model_scores)
    assert r.details["aggregate"] == how and r.details["scale"] == [0.0, 1.0]
    # The server saw each requested model id once, with the judge's settings and the sample in the prompt.
    assert sorted(req.body["model"] for req in llm_server.chat_requests) == ["m1", "m2", "m3"]
    body = llm_server.chat_requests[0].body
    assert (body["temperature"], body["max_tokens"]) == (0.0, 321)
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert Q in user["content"] and ANS in user["content"] and CTX in user["content"]
    assert '"score"' in user["content"] and "reasoning" not in user["content"]
    assert not CYRILLIC.search(system["content"] + user["content"])


def test_majority_of_two_equal_scores_wins(llm_server):
    route(llm_server, {"m1": reply(1), "m2": reply(0), "m3": reply(1.0)})
    r = make_judge(llm_server, ["m1", "m2", "m3"], aggregate="majority").sync.answer_relevance(Q, ANS)
    assert r.score == 1.0  # 1.0 twice, 0.0 once


def test_each_metric_prompt_scale_and_score(llm_server):
    seen = []

    def handler(req):
        user = req["messages"][1]["content"]
        seen.append(user)
        if "CORRECTNESS" in user:
            return completion(reply(4 if req["model"] == "m1" else 5))
        if "USEFULNESS" in user:
            return completion(reply(0.25))
        return completion(reply(0.75))

    llm_server.set_handler(handler)
    judge = make_judge(llm_server, ["m1", "m2"])
    rel = judge.sync.answer_relevance(Q, ANS)
    cor = judge.sync.answer_correctness(Q, ANS, REF)
    e2e = judge.sync.e2e_score(Q, ANS, REF)
    assert (rel.metric, rel.score) == ("answer_relevance", 0.75)
    assert (cor.metric, cor.score) == ("answer_correctness", 4.5)  # (4 + 5) / 2
    assert [m.score for m in cor.model_scores] == [4.0, 5.0]
    assert cor.details["scale"] == [1.0, 5.0]
    assert (e2e.metric, e2e.score) == ("e2e_score", 0.25)
    relevance_prompt = next(p for p in seen if "RELEVANCE" in p)
    assert CTX not in relevance_prompt and REF not in relevance_prompt
    assert all(REF in p for p in seen if "CORRECTNESS" in p or "USEFULNESS" in p)
    assert any("integer scale from 1 to 5" in p for p in seen)


def test_context_list_is_sent_as_numbered_passages(llm_server):
    route(llm_server, {"m1": reply(1.0)})
    make_judge(llm_server, ["m1"]).sync.judge_faithfulness(Q, ANS, ["Paris is in France.", "  ", "It is the capital."])
    user = llm_server.chat_requests[0].messages[1]["content"]
    assert "[1] Paris is in France.\n\n[2] It is the capital." in user


# --------------------------------------------------------------------------------------------
# Re-asks and failures
# --------------------------------------------------------------------------------------------


def test_out_of_range_then_valid_is_reasked_and_counted(llm_server):
    route(llm_server, {"m1": [reply(1.7), reply(0.8)], "m2": reply(0.6)})
    r = make_judge(llm_server, ["m1", "m2"]).sync.judge_faithfulness(Q, ANS, CTX)

    assert r.status == "ok" and r.score == pytest.approx(0.7)  # (0.8 + 0.6) / 2
    m1, m2 = r.model_scores
    assert (m1.score, m1.calls, m1.details["reasks"], len(m1.details["calls"])) == (0.8, 2, 1, 2)
    assert (m2.calls, m2.details["reasks"]) == (1, 0)
    first, second = requests_of(llm_server, "m1")
    assert len(second.messages) == 4  # system, user, the bad reply, the correction
    assert second.messages[2] == {"role": "assistant", "content": reply(1.7)}
    assert "outside the scale" in second.messages[3]["content"]
    errors = error_rate([r])
    assert (errors["n_reasked"], errors["n_failed"], errors["error_rate"]) == (1, 0, 0.0)


def test_correctness_rejects_fractions_and_accepts_integers(llm_server):
    route(llm_server, {"m1": [reply(3.5), reply(3)]})
    r = make_judge(llm_server, ["m1"]).sync.answer_correctness(Q, ANS, REF)
    assert r.score == 3.0 and r.model_scores[0].details["reasks"] == 1
    assert "integers 1, 2, 3, 4, 5" in requests_of(llm_server, "m1")[1].messages[3]["content"]


def test_model_failing_every_reask_is_failed_and_others_count(llm_server):
    route(llm_server, {"bad": reply(5), "good": reply(0.4, "partly")})
    r = make_judge(llm_server, ["bad", "good"]).sync.judge_faithfulness(Q, ANS, CTX)

    bad, good = r.model_scores
    assert bad.status == "failed" and math.isnan(bad.score)  # NaN, never 0
    assert "outside the scale" in bad.reason
    assert (bad.calls, bad.details["reasks"]) == (3, 2)  # 1 + reask_budget (2)
    assert len(requests_of(llm_server, "bad")) == 3
    assert r.status == "partial" and r.score == 0.4 and r.explanation == "partly"
    assert (r.n_models_ok, r.n_models_failed) == (1, 1) and r.ok
    assert "bad failed" in r.reason
    errors = error_rate([r])
    assert errors["error_rate"] == 0.5  # 1 of the 2 judgements failed, though the item has a score
    assert (errors["item_error_rate"], errors["n_partial"]) == (0.0, 1)
    assert errors["by_model"] == {"bad": {"n": 1, "n_failed": 1, "error_rate": 1.0},
                                  "good": {"n": 1, "n_failed": 0, "error_rate": 0.0}}


def test_all_models_failing_gives_nan_and_failed(llm_server):
    route(llm_server, {"m1": "I cannot judge this.", "m2": json.dumps({"verdict": "good"})})
    r = make_judge(llm_server, ["m1", "m2"], aggregate="median").sync.answer_relevance(Q, ANS)
    assert r.status == "failed" and math.isnan(r.score)
    assert all(m.status == "failed" and math.isnan(m.score) for m in r.model_scores)
    assert "m1" in r.reason and "m2" in r.reason
    assert len(llm_server.chat_requests) == 6
    assert error_rate([r])["error_rate"] == 1.0


def test_blank_input_is_undefined_without_a_call(llm_server):
    judge = make_judge(llm_server, ["m1"])
    r = judge.sync.judge_faithfulness(Q, "   ", CTX)
    assert (r.status, r.method) == ("undefined", "none") and math.isnan(r.score)
    assert "blank answer" in r.reason
    assert judge.sync.e2e_score(Q, ANS, "").reason == "blank reference: nothing to judge"
    assert llm_server.chat_requests == []
    with pytest.raises(ValueError, match="answer must be a string"):
        judge.sync.answer_relevance(Q, None)


# --------------------------------------------------------------------------------------------
# Modes and languages
# --------------------------------------------------------------------------------------------


def test_reasoned_mode_sends_another_prompt_and_keeps_the_reasoning(llm_server):
    route(llm_server, {"m1": [reply(0.5, "short"),  # no reasoning → re-ask in reasoned mode
                              reply(1.0, "Fully supported.", reasoning="Step 1: Paris is in the context.")]})
    judge = make_judge(llm_server, ["m1"], mode="reasoned")
    r = judge.sync.judge_faithfulness(Q, ANS, CTX)
    assert r.score == 1.0 and r.explanation == "Fully supported."
    assert r.model_scores[0].details["reasoning"] == "Step 1: Paris is in the context."
    assert r.model_scores[0].details["reasks"] == 1 and r.details["mode"] == "reasoned"
    reasoned_prompt = llm_server.chat_requests[0].messages[1]["content"]
    assert "think step by step" in reasoned_prompt and '{"reasoning"' in reasoned_prompt
    assert "reasoning" in requests_of(llm_server, "m1")[1].messages[3]["content"]

    direct_prompt = make_judge(llm_server, ["m1"]).messages("faithfulness", question=Q, answer=ANS, context=CTX)
    assert direct_prompt[1]["content"] != reasoned_prompt
    assert "step by step" not in direct_prompt[1]["content"]


def test_russian_prompt_is_sent_and_the_score_stays_a_number(llm_server):
    route(llm_server, {"m1": reply(0.5, "Ответ частично подтверждается контекстом.")})
    judge = make_judge(llm_server, ["m1"], language="ru")
    r = judge.sync.judge_faithfulness("Какая столица Франции?", "Париж.",
                                      "Париж — столица Франции.")
    assert r.score == 0.5 and r.explanation == "Ответ частично подтверждается контекстом."
    assert r.details["language"] == "ru"
    system, user = llm_server.chat_requests[0].messages
    assert CYRILLIC.search(system["content"])
    assert "Оцени ФАКТИЧНОСТЬ" in user["content"]
    assert "на русском языке" in user["content"]
    assert '{"score": <score>, "explanation"' in user["content"]  # keys stay English


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("mode", ["direct", "reasoned"])
def test_every_prompt_renders_in_every_language_and_mode(llm_server, language, mode):
    judge = make_judge(llm_server, ["m1"], language=language, mode=mode)
    inputs = {"question": "Q1", "answer": "A1", "context": "C1", "reference": "R1"}
    for metric, needs in (("faithfulness", ("question", "answer", "context")),
                          ("answer_relevance", ("question", "answer")),
                          ("answer_correctness", ("question", "answer", "reference")),
                          ("e2e_score", ("question", "answer", "reference"))):
        text = judge.messages(metric, **{k: inputs[k] for k in needs})[1]["content"]
        assert all(inputs[k] in text for k in needs) and "{{" not in text
        assert bool(CYRILLIC.search(text)) == (language == "ru")
        assert ('"reasoning"' in text) == (mode == "reasoned")
    text = judge.messages("pairwise", question="Q1", answer_a="A1", answer_b="B1", reference="R1")[1]["content"]
    assert text.index("A1") < text.index("B1") and "R1" in text and "{{" not in text


# --------------------------------------------------------------------------------------------
# Pairwise
# --------------------------------------------------------------------------------------------

PARIS, LYON = "Paris is the capital.", "Lyon is the capital."


def pairwise_handler(prefers: dict[str, str]):
    """m → "Paris"/"Lyon" (a consistent preference) or "A" (always picks the first position)."""

    def handler(req):
        user = req["messages"][1]["content"]
        shown_a = re.search(r"Answer A:\n<<<\n(.*?)\n>>>", user).group(1)
        pref = prefers[req["model"]]
        if pref == "A":
            verdict = "A"
        else:
            verdict = "A" if pref in shown_a else "B"
        return completion(json.dumps({"verdict": verdict, "explanation": f"{pref} wins"}))

    return handler


def test_pairwise_with_swap_consistent_and_inconsistent_models(llm_server):
    llm_server.set_handler(pairwise_handler({"m1": "Paris", "m2": "A", "m3": "Paris"}))
    r = make_judge(llm_server, ["m1", "m2", "m3"]).sync.pairwise(Q, PARIS, LYON)

    m1, m2, m3 = r.model_scores
    # m1, m3: A in the original order, B with the answers swapped → mapped back to A both times → A.
    assert (m1.details["verdict_original"], m1.details["verdict_swapped"], m1.details["verdict"]) == ("A", "A", "A")
    # m2 always says "A": original A, swapped A → means answer_b → disagreement → Tie.
    assert (m2.details["verdict_original"], m2.details["verdict_swapped"], m2.details["verdict"]) == ("A", "B", "Tie")
    assert m2.details["position_consistent"] is False and m2.score == 0.5
    assert (m1.score, m1.calls) == (1.0, 2)
    assert r.details["verdict"] == "A" and r.score == 1.0  # A twice, Tie once
    assert r.details["verdict_counts"] == {"A": 2, "B": 0, "Tie": 1}
    assert r.explanation == "Paris wins"
    assert len(llm_server.chat_requests) == 6  # 2 orders × 3 models
    for model in ("m1", "m2", "m3"):
        shown = [re.search(r"Answer A:\n<<<\n(.*?)\n>>>", q.messages[1]["content"]).group(1)
                 for q in requests_of(llm_server, model)]
        assert sorted(shown) == sorted([PARIS, LYON])


def test_pairwise_without_swap_asks_once_and_models_tied_give_tie(llm_server):
    llm_server.set_handler(pairwise_handler({"m1": "Paris", "m2": "A", "m3": "Lyon"}))
    r = make_judge(llm_server, ["m1", "m2", "m3"], swap_positions=False).sync.pairwise(Q, PARIS, LYON)
    assert len(llm_server.chat_requests) == 3
    assert [m.details["verdict"] for m in r.model_scores] == ["A", "A", "B"]
    assert r.details["verdict"] == "A"

    llm_server.requests.clear()
    r = make_judge(llm_server, ["m1", "m3"]).sync.pairwise(Q, PARIS, LYON, reference="Paris")
    assert [m.details["verdict"] for m in r.model_scores] == ["A", "B"]
    assert r.details["verdict"] == "Tie" and r.score == 0.5  # one A, one B → Tie
    assert all("Reference answer" in q.messages[1]["content"] for q in llm_server.chat_requests)


def test_pairwise_invalid_verdict_reasked_then_failed(llm_server):
    bad = json.dumps({"verdict": "Answer A", "explanation": "x"})
    route(llm_server, {"m1": [bad, json.dumps({"verdict": "tie", "explanation": "same"})], "m2": bad})
    r = make_judge(llm_server, ["m1", "m2"], swap_positions=False).sync.pairwise(Q, PARIS, LYON)
    m1, m2 = r.model_scores
    assert m1.details["verdict"] == "Tie" and m1.details["reasks"] == 1
    assert m2.status == "failed" and math.isnan(m2.score)
    assert r.details["verdict"] == "Tie" and r.status == "partial"


# --------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------


def test_score_parser_types_and_ranges():
    parse = score_parser(SCALES["faithfulness"], "direct")
    assert parse({"score": 0.5, "explanation": "x"}) == (0.5, "x", "")
    assert parse({"score": "0.25"}) == (0.25, "", "")  # numeric string accepted, explanation optional
    assert parse({"score": 1, "explanation": None}) == (1.0, "", "")
    for bad in ({"score": True}, {"score": None}, {"score": [1]}, {"score": "high"}, {"score": float("nan")},
                {"score": -0.1}, {"score": 1.01}, {"explanation": "x"}, [0.5], {"score": 0.5, "explanation": 3}):
        with pytest.raises(ValueError):
            parse(bad)
    correctness = score_parser(SCALES["answer_correctness"], "reasoned")
    assert correctness({"reasoning": "r", "score": 4.0, "explanation": "e"}) == (4.0, "e", "r")
    for bad in ({"reasoning": "r", "score": 0}, {"reasoning": "r", "score": 2.5}, {"score": 3},
                {"reasoning": " ", "score": 3}):
        with pytest.raises(ValueError):
            correctness(bad)
    pv = verdict_parser("direct")
    assert pv({"verdict": " b "}) == ("B", "", "") and pv({"verdict": "TIE"})[0] == "Tie"
    for bad in ({"verdict": "C"}, {"verdict": 1}, {}, "A"):
        with pytest.raises(ValueError):
            pv(bad)
    assert majority_verdict(["A", "B", "Tie"]) == ("Tie", {"A": 1, "B": 1, "Tie": 1})
    assert majority_verdict(["B", "B", "A"])[0] == "B"


# --------------------------------------------------------------------------------------------
# Agreement between models
# --------------------------------------------------------------------------------------------


def result_of(metric, scores: dict[str, float]) -> EvaluationResult:
    per_model = [ModelScore(m, s) if not math.isnan(s) else ModelScore(m, s, status="failed", reason="x")
                 for m, s in scores.items()]
    valid = [s for s in scores.values() if not math.isnan(s)]
    return EvaluationResult(metric, sum(valid) / len(valid), model_scores=per_model)


def test_agreement_hand_computed():
    results = [result_of("answer_correctness", {"a": 1, "b": 1}),
               result_of("answer_correctness", {"a": 5, "b": 5}),
               result_of("answer_correctness", {"a": 3, "b": 4})]
    ag = agreement(results)
    # |diffs| = 0, 0, 1 → mean 1/3; within δ=0.5: 2 of 3 samples.
    assert ag["mean_abs_diff"] == pytest.approx(1 / 3)
    assert ag["share_within_delta"] == pytest.approx(2 / 3)
    assert ag["pairwise_mean_abs_diff"] == {"a vs b": pytest.approx(1 / 3)}
    # α (interval): values 1,1,5,5,3,4; n = 6, Σv = 19, Σv² = 77.
    # D_o = (1/6)·[(3−4)² + (4−3)²]/1 = 1/3; Σ_{i≠j}(v_i − v_j)² = 2·6·77 − 2·19² = 202 → D_e = 202/30.
    # α = 1 − (1/3)/(202/30) = 1 − 10/202.
    assert ag["krippendorff_alpha"] == pytest.approx(1 - 10 / 202)
    assert ag["alpha_level"] == "interval" and ag["n_comparable"] == 3
    assert agreement(results, delta=1.0)["share_within_delta"] == 1.0


def test_agreement_skips_failed_models():
    nan = math.nan
    results = [result_of("faithfulness", {"a": 1.0, "b": 0.5, "c": nan}),
               result_of("faithfulness", {"a": 0.0, "b": nan, "c": nan}),
               result_of("faithfulness", {"a": 0.2, "b": 0.2, "c": 1.0})]
    ag = agreement(results)
    # pairs with both scores: s1 (a,b) 0.5; s3 (a,b) 0, (a,c) 0.8, (b,c) 0.8 → mean 2.1/4
    assert ag["mean_abs_diff"] == pytest.approx(2.1 / 4)
    assert ag["pairwise_mean_abs_diff"]["a vs b"] == pytest.approx(0.25)
    assert ag["pairwise_mean_abs_diff"]["a vs c"] == pytest.approx(0.8)
    # comparable samples: s1 (range 0.5 ≤ 0.5) and s3 (range 0.8) → 1/2
    assert ag["n_comparable"] == 2 and ag["share_within_delta"] == 0.5


def test_krippendorff_alpha_matches_the_published_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders, 12 units, missing data;
    # published α = 0.743 (nominal) and 0.849 (interval).
    nan = math.nan
    coders = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
              [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
              [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
              [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    units = [list(u) for u in zip(*coders)]
    assert krippendorff_alpha(units, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(units, "interval") == pytest.approx(0.849, abs=5e-4)
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1]]))  # no variation: undefined
    assert math.isnan(krippendorff_alpha([[1, nan], [2]]))  # nothing pairable


def test_pairwise_agreement_is_nominal():
    results = [result_of("pairwise", {"a": 1.0, "b": 1.0}), result_of("pairwise", {"a": 0.0, "b": 0.5})]
    ag = agreement(results)
    assert ag["alpha_level"] == "nominal"
    # values 1,1,0,0.5; D_o = (1/4)·2 = 0.5; D_e = (16 − (2² + 1 + 1))/(4·3) = 10/12 → α = 1 − 0.6 = 0.4
    assert ag["krippendorff_alpha"] == pytest.approx(0.4)


# --------------------------------------------------------------------------------------------
# Tier Judge
# --------------------------------------------------------------------------------------------


def test_judge_consistency_hand_example():
    c = judge_consistency([1.0, 0.5, 0.0, 0.8, math.nan, 0.3], [0.5, 0.0, 1.0, 0.3, 0.5, None], delta=0.5)
    # |Δ| = 0.5, 0.5, 1.0, 0.5 (float: 0.5000000000000001), NaN, NaN
    np.testing.assert_array_equal(c, [1.0, 1.0, 0.0, 1.0, np.nan, np.nan])
    np.testing.assert_array_equal(judge_consistency([2, 4], [2, 5], delta=0), [1.0, 0.0])
    with pytest.raises(ValueError, match="delta"):
        judge_consistency([1], [1], delta=-1)
    with pytest.raises(ValueError, match="same items"):
        judge_consistency([1, 2], [1])


def test_error_rate_hand_example():
    ok = result_of("faithfulness", {"m1": 1.0, "m2": 0.5})
    partly = result_of("faithfulness", {"m1": math.nan, "m2": 0.5})
    failed = EvaluationResult("faithfulness", math.nan, status="failed", reason="x",
                              model_scores=[ModelScore("m1", math.nan, status="failed"),
                                            ModelScore("m2", math.nan, status="failed")])
    undefined = EvaluationResult("faithfulness", math.nan, method="none", status="undefined", reason="blank answer")
    e = error_rate([ok, partly, failed, undefined])
    # judgements: ok 2 of 2 fine, partly 1 of 2 failed, failed 2 of 2 failed, undefined none asked → 3 / 6
    assert (e["error_rate"], e["n"], e["n_ok"], e["n_failed"], e["n_undefined"]) == (0.5, 4, 2, 1, 1)
    assert (e["item_error_rate"], e["n_judgements"], e["n_failed_judgements"]) == (0.25, 6, 3)
    assert e["by_model"]["m1"] == {"n": 3, "n_failed": 2, "error_rate": pytest.approx(2 / 3)}
    assert e["by_model"]["m2"] == {"n": 3, "n_failed": 1, "error_rate": pytest.approx(1 / 3)}


def chat_result(latency_s, cached=False, model="m1"):
    return ChatResult(text="{}", finish_reason="stop", model=model, tokens_in=1, tokens_out=1,
                      latency_s=latency_s, cost_usd=None, cached=cached, attempts=0 if cached else 1)


def test_judge_latency_hand_example_excludes_cache_hits():
    calls = [chat_result(0.1), chat_result(0.2), chat_result(0.3), chat_result(0.4, model="m2"),
             chat_result(0.0001, cached=True)]
    lat = judge_latency(calls)
    # 100, 200, 300, 400 ms: mean 250; p50 = 250; p95 = 100 + 0.95·3·100 = 385 (linear interpolation)
    assert lat["mean_ms"] == pytest.approx(250) and lat["p50_ms"] == pytest.approx(250)
    assert lat["p95_ms"] == pytest.approx(385)
    assert (lat["n_calls"], lat["n_cached_excluded"]) == (4, 1)
    assert lat["by_model"]["m2"]["mean_ms"] == pytest.approx(400)
    assert "cache hits excluded" in lat["note"]
    assert math.isnan(judge_latency([chat_result(0.1, cached=True)])["mean_ms"])


def test_cache_hits_send_nothing_and_are_left_out_of_latency(llm_server, tmp_path):
    route(llm_server, {"m1": reply(0.9)})
    judge = make_judge(llm_server, ["m1"], cache_dir=tmp_path)
    first = judge.sync.judge_faithfulness(Q, ANS, CTX)
    second = judge.sync.judge_faithfulness(Q, ANS, CTX)
    assert len(llm_server.chat_requests) == 1
    assert second.score == 0.9 and second.model_scores[0].calls == 0
    lat = judge_latency([first, second])
    assert (lat["n_calls"], lat["n_cached_excluded"]) == (1, 1)
    assert lat["mean_ms"] == pytest.approx(first.model_scores[0].details["calls"][0]["latency_s"] * 1000)


def test_judge_reliability_two_passes_over_http(llm_server):
    # Item i's prompt carries "item-i"; pass 1 and pass 2 (cache off) get different scripted scores.
    first_pass = {"m1": [1.0, 0.5, 0.0, "bad"], "m2": [1.0, 0.5, 0.0, "bad"]}
    second_pass = {"m1": [0.5, 1.0, 1.0, 0.5], "m2": [1.0, 0.5, 1.0, "bad"]}
    seen: dict[tuple[str, int], int] = {}
    lock = threading.Lock()

    def handler(req):
        item = int(re.search(r"item-(\d)", req["messages"][1]["content"]).group(1))
        model = req["model"]
        with lock:
            pass_no = seen.get((model, item), 0)
            if len(req["messages"]) == 2:  # a first ask, not a re-ask
                seen[(model, item)] = pass_no + 1
            else:
                pass_no -= 1
        value = (first_pass if pass_no == 0 else second_pass)[model][item]
        return completion("no json" if value == "bad" else reply(value))

    llm_server.set_handler(handler)
    judge = make_judge(llm_server, ["m1", "m2"], cache=False)
    samples = [{"id": i, "question": f"item-{i}", "answer": ANS, "context": CTX} for i in range(4)]
    first = judge.sync.evaluate_many("faithfulness", samples)
    second = judge.sync.evaluate_many("faithfulness", samples)

    # pass 1 (mean of m1, m2): 1.0, 0.5, 0.0, failed; pass 2: 0.75, 0.75, 1.0, 0.5 (m2 failed)
    assert [r.score for r in first[:3]] == [1.0, 0.5, 0.0] and first[3].status == "failed"
    assert [r.score for r in second] == [0.75, 0.75, 1.0, 0.5]
    frame, summary = judge_reliability(first, second, delta=0.5)
    np.testing.assert_array_equal(frame["consistent"], [1.0, 1.0, 0.0, np.nan])
    np.testing.assert_allclose(frame["abs_diff"][:3], [0.25, 0.25, 1.0])
    assert list(frame["status_1"]) == ["ok", "ok", "ok", "failed"]
    np.testing.assert_array_equal(frame["consistent[m1]"], [1.0, 1.0, 0.0, np.nan])
    np.testing.assert_array_equal(frame["consistent[m2]"], [1.0, 1.0, 0.0, np.nan])
    assert (frame[["latency_ms_1", "latency_ms_2"]] > 0).all().all()

    cons = summary["consistency_score"]
    assert cons["mean"] == pytest.approx(2 / 3)
    assert (cons["n"], cons["n_valid"], cons["n_failed"]) == (4, 3, 1)
    assert set(cons) == {"mean", "ci95", "n", "n_valid", "n_failed", "constant", "few_items"}
    assert cons["few_items"] and not cons["constant"]  # 3 valid items: flagged, never graded
    assert summary["avg_faithfulness"]["mean"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3
    # every failed model judgement counts, the partial jury of pass 2 too: (2 + 1) of 2 models × 4 items × 2 passes
    assert summary["error_rate"] == pytest.approx(3 / 16)
    assert summary["errors"]["item_error_rate"] == pytest.approx(1 / 8)  # items every model failed on
    assert (summary["errors"]["n_partial"], frame["status_2"][3]) == (1, "partial")
    assert summary["errors"]["by_model"]["m2"]["n_failed"] == 2
    # calls: 2 models × 4 items × 2 passes = 16 first asks; "bad" replies add 2 re-asks each (3 of them)
    assert summary["latency"]["n_calls"] == 16 + 3 * 2 == len(llm_server.chat_requests)
    assert summary["avg_latency_ms"] == summary["latency"]["mean_ms"] > 0


def test_evaluate_many_keeps_order_and_checks_samples(llm_server):
    llm_server.set_handler(lambda req: completion(reply(0.1 * int(re.search(
        r"q(\d)", req["messages"][1]["content"]).group(1)))))
    judge = make_judge(llm_server, ["m1"])
    rs = judge.sync.evaluate_many("answer_relevance", [{"question": f"q{i}", "answer": "a", "extra": 1}
                                                        for i in range(5)])
    assert [r.score for r in rs] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match=r"no \['answer'\]"):
        judge.sync.evaluate_many("answer_relevance", [{"question": "q"}])
    with pytest.raises(ValueError, match="metric"):
        judge.sync.evaluate_many("rouge", [])


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, field", [
    ({"models": []}, "models"),
    ({"models": "m1"}, "models"),
    ({"models": ["m1", ""]}, r"models\[1\]"),
    ({"models": ["m1", "m1"]}, "more than once"),
    ({"aggregate": "max"}, "aggregate"),
    ({"mode": "cot"}, "mode"),
    ({"language": "de"}, "language"),
    ({"temperature": 3}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"swap_positions": "yes"}, "swap_positions"),
    ({"seed": 1.5}, "seed"),
])
def test_config_validation_names_the_field(kwargs, field):
    values = {"models": ["m1"], **kwargs}
    with pytest.raises(ValueError, match=field):
        JudgeConfig(**values)


def test_judge_requires_client_and_config(llm_server):
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="k", cache_dir=None))
    with pytest.raises(ValueError, match="client"):
        Judge(object(), JudgeConfig(models=["m1"]))
    with pytest.raises(ValueError, match="config"):
        Judge(client, {"models": ["m1"]})
    with pytest.raises(ValueError, match="metric"):
        Judge(client, JudgeConfig(models=["m1"])).messages("bleu")
