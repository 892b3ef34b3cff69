"""NVIDIA-style 0–2 metrics against a real OpenAI-compatible HTTP server with scripted judge replies
(tests/llm_server.py): hand-computed scores, shortcuts without calls, failures, several judge models."""

from __future__ import annotations

import asyncio
import json
import math
import re

import pandas as pd
import pytest
from llm_server import completion, error_reply

from ragnb.llm import LLMClient, LLMPermanentError, LLMSettings
from ragnb.judges import evaluate_dataset, nvidia
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.nvidia import (
    AnswerAccuracy,
    ContextRelevance,
    ResponseGroundedness,
    parse_rating,
)
from ragnb.metrics.registry import parse_name
from ragnb.metrics.stats import summary_frame


def make_client(server, **overrides) -> LLMClient:
    values = dict(base_url=server.base_url, api_key="sk-test", cache_dir=None, backoff_initial_s=0.01,
                  backoff_max_s=0.05, timeout_s=5)
    values.update(overrides)
    return LLMClient(LLMSettings(**values))


def reply(rating, explanation: str | None = None):
    return completion(json.dumps({"rating": rating, "explanation": explanation or f"rated {rating}"}))


def judge(rule):
    """Server handler: ``rule(model, prompt_text)`` → a rating (int) or a raw reply string."""

    def handler(body):
        out = rule(body["model"], body["messages"][0]["content"])
        return completion(out) if isinstance(out, str) else reply(out)

    return handler


def prompts(server) -> list[str]:
    return [r.messages[0]["content"] for r in server.chat_requests]


QUESTION = "What is photosynthesis?"
CONTEXTS = ["CTX-A: Photosynthesis converts light energy into chemical energy.",
            "CTX-B: Plants need water.",
            "CTX-C: The weather in Antarctica is cold."]


# --------------------------------------------------------------------------------------------
# ContextRelevance
# --------------------------------------------------------------------------------------------


def test_context_relevance_rates_every_context_and_averages(llm_server):
    ratings = {"CTX-A": 2, "CTX-B": 1, "CTX-C": 0}
    llm_server.set_handler(judge(lambda model, text: next(v for k, v in ratings.items() if k in text)))
    cfg = JudgeConfig(models=["judge-a"])
    r = ContextRelevance().evaluate_sync({"user_input": QUESTION, "retrieved_contexts": CONTEXTS},
                                         make_client(llm_server), cfg)

    assert r.score == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert (r.metric, r.method, r.status) == ("nv_context_relevance", "llm", "ok")
    assert len(llm_server.chat_requests) == 3  # M × C = 1 × 3
    [ms] = r.model_scores
    assert ms.details["ratings"] == [2, 1, 0] and ms.calls == 3
    assert r.details["llm_requests"] == 3 and r.details["n_contexts"] == 3
    assert "[1] 2/2: rated 2" in r.explanation
    for text, ctx in zip(sorted(prompts(llm_server)), CONTEXTS):
        assert QUESTION in text and ctx in text
    body = llm_server.chat_requests[0].body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-a", 0.1, 1000)


def test_context_relevance_without_contexts_is_zero_without_a_call(llm_server):
    cfg = JudgeConfig(models=["judge-a"])
    r = ContextRelevance().evaluate_sync({"user_input": QUESTION, "retrieved_contexts": []},
                                         make_client(llm_server), cfg)
    assert (r.score, r.method, r.status, r.details["shortcut"]) == (0.0, "heuristic", "ok", "no_contexts")
    blank = ContextRelevance().evaluate_sync({"user_input": "  ", "retrieved_contexts": CONTEXTS},
                                             make_client(llm_server), cfg)
    assert math.isnan(blank.score) and blank.status == "undefined" and "user_input" in blank.reason
    assert llm_server.request_count == 0


def test_context_relevance_failed_context_fails_the_model_instead_of_shrinking_the_mean(llm_server):
    llm_server.set_handler(judge(lambda model, text: "I cannot rate this." if "CTX-B" in text else 2))
    cfg = JudgeConfig(models=["judge-a"])
    r = ContextRelevance().evaluate_sync({"user_input": QUESTION, "retrieved_contexts": CONTEXTS},
                                         make_client(llm_server), cfg)
    assert math.isnan(r.score) and r.status == "failed"  # not (1 + 1) / 2 = 1.0, and never 0
    [ms] = r.model_scores
    assert ms.status == "failed" and "context 2" in ms.reason and "LLMOutputError" in ms.reason
    assert ms.details["ratings"] == [2, None, 2]
    assert len(llm_server.chat_requests) == 2 + 3  # two good contexts + 1 ask and 2 re-asks for CTX-B
    assert ms.calls == 5


# --------------------------------------------------------------------------------------------
# ResponseGroundedness
# --------------------------------------------------------------------------------------------


def test_response_groundedness_one_call_on_the_joined_contexts(llm_server):
    llm_server.set_handler(judge(lambda model, text: 1))
    contexts = ["Paris is the capital of France.", "The Eiffel Tower is in Paris."]
    sample = {"response": "Paris is the capital of France and has 12 million people.", "retrieved_contexts": contexts}
    r = ResponseGroundedness().evaluate_sync(sample, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    assert r.score == 0.5 and r.method == "llm"
    [text] = prompts(llm_server)
    assert "Paris is the capital of France.\n\nThe Eiffel Tower is in Paris." in text
    assert sample["response"] in text


@pytest.mark.parametrize("response, contexts, score, shortcut", [
    ("", ["Paris is the capital of France."], 0.0, "empty_response"),
    ("   \n", [], 0.0, "empty_response"),
    ("capital of France", ["Paris is the capital of France."], 1.0, "response_in_context"),
    ("  Paris is the capital of France. ", ["x", "Paris is the capital of France."], 1.0, "response_in_context"),
    ("Paris is big.", [], 0.0, "no_grounding"),
    ("Paris is big.", ["", "  "], 0.0, "no_grounding"),
])
def test_groundedness_shortcuts_make_no_call(llm_server, response, contexts, score, shortcut):
    llm_server.set_handler(judge(lambda model, text: 1))
    sample = {"response": response, "retrieved_contexts": contexts}
    client = make_client(llm_server)
    r = ResponseGroundedness().evaluate_sync(sample, client, JudgeConfig(models=["judge-a", "judge-b"]))
    assert (r.score, r.method, r.status, r.details["shortcut"]) == (score, "heuristic", "ok", shortcut)
    assert r.model_scores == [] and r.explanation and r.details["llm_requests"] == 0
    assert llm_server.request_count == 0

    # without shortcuts the judge decides (rating 1 → 0.5), one call per model
    off = JudgeConfig(models=["judge-a", "judge-b"])
    r = ResponseGroundedness(use_heuristic_shortcuts=False).evaluate_sync(sample, client, off)
    assert (r.score, r.method) == (0.5, "llm")
    assert llm_server.request_count == 2


def test_case_or_word_changes_are_not_an_exact_match(llm_server):
    llm_server.set_handler(judge(lambda model, text: 2))
    sample = {"response": "paris is the capital of france", "retrieved_contexts": ["Paris is the capital of France."]}
    r = ResponseGroundedness().evaluate_sync(sample, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    assert (r.score, r.method) == (1.0, "llm") and llm_server.request_count == 1


# --------------------------------------------------------------------------------------------
# AnswerAccuracy
# --------------------------------------------------------------------------------------------

RESPONSE = "RESP: Water boils at 100 degrees Celsius."
REFERENCE = "REF: At 1 atm water boils at 100 °C (212 °F)."
AA_SAMPLE = {"user_input": "At what temperature does water boil?", "response": RESPONSE, "reference": REFERENCE}


def reference_first(text: str) -> bool:
    return text.index(REFERENCE) < text.index(RESPONSE)


@pytest.mark.parametrize("rating, score", [(0, 0.0), (1, 0.5), (2, 1.0)])
def test_answer_accuracy_single_judge(llm_server, rating, score):
    llm_server.set_handler(judge(lambda model, text: rating))
    r = AnswerAccuracy().evaluate_sync(AA_SAMPLE, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    assert r.score == score and r.details["mode"] == "single"
    [text] = prompts(llm_server)
    assert not reference_first(text) and AA_SAMPLE["user_input"] in text


@pytest.mark.parametrize("r1, r2", [(a, b) for a in range(3) for b in range(3)])
def test_answer_accuracy_dual_judge_averages_the_two_templates(llm_server, r1, r2):
    llm_server.set_handler(judge(lambda model, text: r2 if reference_first(text) else r1))
    cfg = JudgeConfig(models=["judge-a"])
    r = AnswerAccuracy(use_dual_judge=True).evaluate_sync(AA_SAMPLE, make_client(llm_server), cfg)
    assert r.score == pytest.approx((r1 / 2 + r2 / 2) / 2)  # e.g. 2 and 1 → (1.0 + 0.5) / 2 = 0.75
    texts = prompts(llm_server)
    assert len(texts) == 2 and sorted(reference_first(t) for t in texts) == [False, True]
    assert r.model_scores[0].details["ratings"] == [r1, r2]
    assert r.details == {"llm_requests": 2, "mode": "swap_average"}


def test_answer_accuracy_dual_judge_confirm_mode_takes_the_confirmed_rating(llm_server):
    def rule(model, text):
        if "first judge says it is complete" in text:  # the confirmation call sees the first verdict
            return 1
        return '{"rating": 2, "explanation": "first judge says it is complete"}'

    llm_server.set_handler(judge(rule))
    cfg = JudgeConfig(models=["judge-a"])
    r = AnswerAccuracy(use_dual_judge=True, dual_judge_mode="confirm").evaluate_sync(AA_SAMPLE, make_client(llm_server),
                                                                                  cfg)
    assert r.score == 0.5  # confirmed rating 1 / 2, not the average
    first, second = prompts(llm_server)
    assert "first judge says" not in first and "RATING: 2" in second
    details = r.model_scores[0].details
    assert details["ratings"] == [2, 1] and details["adjusted"] is True and details["mode"] == "confirm"


def test_answer_accuracy_blank_reference_is_undefined(llm_server):
    r = AnswerAccuracy().evaluate_sync({**AA_SAMPLE, "reference": " "}, make_client(llm_server),
                             JudgeConfig(models=["judge-a"]))
    assert math.isnan(r.score) and r.status == "undefined" and r.method == "none"
    assert llm_server.request_count == 0


def test_answer_accuracy_question_is_optional(llm_server):
    llm_server.set_handler(judge(lambda model, text: 2))
    sample = {"response": RESPONSE, "reference": REFERENCE}
    r = AnswerAccuracy().evaluate_sync(sample, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    assert r.score == 1.0 and "(no question given)" in prompts(llm_server)[0]


# --------------------------------------------------------------------------------------------
# Unusable ratings, failures
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("obj, expected", [
    ({"rating": 2, "explanation": "fine"}, (2, "fine")),
    ({"rating": 0}, (0, "")),
    ({"rating": "1", "explanation": "x"}, (1, "x")),
    ({"rating": 2.0, "explanation": None}, (2, "")),
])
def test_parse_rating_accepts(obj, expected):
    assert parse_rating(obj) == expected


@pytest.mark.parametrize("obj", [{"rating": 3}, {"rating": -1}, {"rating": 1.5}, {"rating": True}, {"rating": None},
                                 {"score": 2}, [2], "2", {"rating": "two"}])
def test_parse_rating_rejects(obj):
    with pytest.raises(ValueError):
        parse_rating(obj)


def test_out_of_scale_rating_is_reasked(llm_server):
    llm_server.script(completion('{"rating": 3, "explanation": "very good"}'), reply(2, "ok"))
    r = AnswerAccuracy().evaluate_sync(AA_SAMPLE, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    assert r.score == 1.0
    first, second = llm_server.chat_requests
    assert len(second.messages) == 3 and "0, 1 or 2" in second.messages[-1]["content"]
    assert r.model_scores[0].calls == 2 and r.model_scores[0].details["reasks"] == 1


@pytest.mark.parametrize("content", ["I'd say it is quite good.", '{"rating": 5}', '{"rating": 1.5}'])
def test_unusable_rating_after_the_budget_is_failed_never_zero(llm_server, content):
    llm_server.set_handler(judge(lambda model, text: content))
    client = make_client(llm_server, reask_budget=2)
    r = AnswerAccuracy().evaluate_sync(AA_SAMPLE, client, JudgeConfig(models=["judge-a"]))
    assert math.isnan(r.score) and r.status == "failed" and "LLMOutputError" in r.reason
    assert llm_server.request_count == 3  # 1 ask + 2 re-asks
    assert r.model_scores[0].status == "failed" and r.model_scores[0].calls == 3


def test_dual_judge_with_one_failed_template_fails_the_model(llm_server):
    llm_server.set_handler(judge(lambda model, text: "no idea" if reference_first(text) else 2))
    cfg = JudgeConfig(models=["judge-a"])
    r = AnswerAccuracy(use_dual_judge=True).evaluate_sync(AA_SAMPLE, make_client(llm_server), cfg)
    assert math.isnan(r.score) and "template 2" in r.reason


def test_transient_errors_past_the_retries_fail_the_model(llm_server):
    llm_server.set_handler(lambda body: error_reply(503, "overloaded", type_="server_error"))
    client = make_client(llm_server, max_retries=1)
    r = AnswerAccuracy().evaluate_sync(AA_SAMPLE, client, JudgeConfig(models=["judge-a"]))
    assert math.isnan(r.score) and r.status == "failed" and "LLMTransientError" in r.reason
    assert llm_server.request_count == 2


def test_permanent_error_stops_the_run(llm_server):
    llm_server.set_handler(lambda body: error_reply(401, "invalid api key", type_="auth_error"))
    with pytest.raises(LLMPermanentError):
        ContextRelevance().evaluate_sync({"user_input": QUESTION, "retrieved_contexts": CONTEXTS},
                                         make_client(llm_server),
                               JudgeConfig(models=["judge-a"]))


# --------------------------------------------------------------------------------------------
# Several judge models
# --------------------------------------------------------------------------------------------

MODEL_RATINGS = {"judge-a": 2, "judge-b": 1, "judge-c": 1}


@pytest.mark.parametrize("how, score", [("mean", (1.0 + 0.5 + 0.5) / 3), ("median", 0.5), ("majority", 0.5)])
def test_models_aggregate(llm_server, how, score):
    llm_server.set_handler(judge(lambda model, text: MODEL_RATINGS[model]))
    cfg = JudgeConfig(models=list(MODEL_RATINGS), aggregate=how)
    r = ResponseGroundedness().evaluate_sync({"response": "Paris is big.", "retrieved_contexts": ["Paris is a city."]},
                                   make_client(llm_server), cfg)
    assert r.score == pytest.approx(score)
    assert [(m.model, m.score) for m in r.model_scores] == [("judge-a", 1.0), ("judge-b", 0.5), ("judge-c", 0.5)]
    assert llm_server.request_count == 3


def test_models_times_contexts_and_dual_judge_call_counts(llm_server):
    llm_server.set_handler(judge(lambda model, text: MODEL_RATINGS[model]))
    client = make_client(llm_server)
    r = ContextRelevance().evaluate_sync({"user_input": QUESTION, "retrieved_contexts": CONTEXTS[:2]}, client,
                               JudgeConfig(models=["judge-a", "judge-b"]))
    assert llm_server.request_count == 2 * 2 and r.details["llm_requests"] == 4
    assert r.score == pytest.approx((1.0 + 0.5) / 2)
    AnswerAccuracy(use_dual_judge=True).evaluate_sync(AA_SAMPLE, client, JudgeConfig(models=list(MODEL_RATINGS)))
    assert llm_server.request_count == 4 + 2 * 3


def test_a_failing_model_is_listed_not_averaged(llm_server):
    llm_server.set_handler(judge(lambda model, text: "garbage" if model == "judge-bad" else 1))
    cfg = JudgeConfig(models=["judge-a", "judge-bad"])
    r = AnswerAccuracy().evaluate_sync(AA_SAMPLE, make_client(llm_server), cfg)
    assert r.score == 0.5 and r.status == "partial" and "judge-bad failed" in r.reason
    assert [m.status for m in r.model_scores] == ["ok", "failed"]


# --------------------------------------------------------------------------------------------
# Language, async, cache, registry, validation
# --------------------------------------------------------------------------------------------


def test_russian_prompts_and_explanations(llm_server):
    llm_server.set_handler(judge(lambda model, text: '{"rating": 2, "explanation": "Ответ полностью верен."}'))
    cfg = JudgeConfig(models=["judge-a"], language="ru")
    r = AnswerAccuracy().evaluate_sync({"user_input": "Столица Франции?", "response": "Париж.", "reference": "Париж — столица."},
                             make_client(llm_server), cfg)
    assert r.score == 1.0 and r.explanation == "Ответ полностью верен."
    text = prompts(llm_server)[0]
    assert "ЭТАЛОННЫЙ ОТВЕТ" in text and "по-русски" in text and "Столица Франции?" in text
    s = ResponseGroundedness().evaluate_sync({"response": "", "retrieved_contexts": ["x"]}, make_client(llm_server),
                                   JudgeConfig(models=["judge-a"], language="ru"))
    assert s.explanation.startswith("Пустой ответ")


def test_async_api(llm_server):
    llm_server.set_handler(judge(lambda model, text: 1))

    async def main():
        async with make_client(llm_server) as client:
            return await asyncio.gather(
                AnswerAccuracy().evaluate(AA_SAMPLE, client, JudgeConfig(models=["judge-a"])),
                ContextRelevance().evaluate({"user_input": QUESTION, "retrieved_contexts": CONTEXTS}, client,
                                            JudgeConfig(models=["judge-a"])))

    accuracy, relevance = asyncio.run(main())
    assert accuracy.score == 0.5 and relevance.score == 0.5 and llm_server.request_count == 4


def test_rerun_with_the_disk_cache_sends_no_request(llm_server, tmp_path):
    llm_server.set_handler(judge(lambda model, text: 2 if reference_first(text) else 1))
    cfg, metric = JudgeConfig(models=["judge-a"]), AnswerAccuracy(use_dual_judge=True)
    first = metric.evaluate_sync(AA_SAMPLE, make_client(llm_server, cache_dir=tmp_path), cfg)
    again = metric.evaluate_sync(AA_SAMPLE, make_client(llm_server, cache_dir=tmp_path), cfg)
    assert first.score == again.score == 0.75
    assert llm_server.request_count == 2 and again.model_scores[0].calls == 0


def test_metrics_are_registered():
    for name, cls in [("nv_context_relevance", nvidia.ContextRelevance),
                      ("nv_response_groundedness", nvidia.ResponseGroundedness),
                      ("nv_answer_accuracy", nvidia.AnswerAccuracy)]:
        metric, k = parse_name(name)
        assert metric.fn is nvidia.METRICS[name] and metric.family == "nvidia" and k is None
        assert isinstance(metric.fn, cls)


@pytest.mark.parametrize("make, fragment", [
    (lambda: JudgeConfig(models=[]), "models"),
    (lambda: JudgeConfig(models="judge-a"), "models"),
    (lambda: JudgeConfig(models=["a", "a"]), "more than once"),
    (lambda: JudgeConfig(models=["a"], aggregate="max"), "aggregate"),
    (lambda: JudgeConfig(models=["a"], language="de"), "language"),
    (lambda: AnswerAccuracy(dual_judge_mode="vote"), "dual_judge_mode"),
    (lambda: ResponseGroundedness(use_heuristic_shortcuts="yes"), "use_heuristic_shortcuts"),
    (lambda: JudgeConfig(models=["a"], temperature=3), "temperature"),
])
def test_bad_config_is_a_clear_error(make, fragment):
    with pytest.raises(ValueError, match=fragment):
        make()


@pytest.mark.parametrize("call, sample, fragment", [
    (ContextRelevance, {"retrieved_contexts": ["x"]}, "user_input"),
    (ContextRelevance, {"user_input": "q", "retrieved_contexts": "one string"}, "wrap it"),
    (ContextRelevance, {"user_input": "q", "retrieved_contexts": ["a", 3]}, "positions [1]"),
    (ResponseGroundedness, {"response": None, "retrieved_contexts": []}, "response must be a string"),
    (AnswerAccuracy, {"response": "a"}, "reference"),
])
def test_bad_sample_is_a_clear_error(llm_server, call, sample, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        call().evaluate_sync(sample, make_client(llm_server), JudgeConfig(models=["judge-a"]))
    with pytest.raises(ValueError, match="JudgeConfig"):
        AnswerAccuracy().evaluate_sync(AA_SAMPLE, make_client(llm_server), ["judge-a"])
    assert llm_server.request_count == 0


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------


def groundedness_dataset() -> list[dict]:
    ctx = ["Paris is the capital of France."]
    return [
        {"id": "q1", "response": "GOOD answer", "retrieved_contexts": ctx},
        {"id": "q2", "response": "", "retrieved_contexts": ctx},  # shortcut → 0.0
        {"id": "q3", "response": "BROKEN judge reply", "retrieved_contexts": ctx},  # failed → NaN
        {"id": "q4", "response": "PARTIAL answer", "retrieved_contexts": ctx},
    ]


def dataset_rule(model, text):
    if "BROKEN" in text:
        return "no json here"
    return 2 if "GOOD" in text else 1


def test_evaluate_dataset_items_and_summary(llm_server):
    llm_server.set_handler(judge(dataset_rule))
    cfg = JudgeConfig(models=["judge-a"])
    items, summary = evaluate_dataset("nv_response_groundedness", groundedness_dataset(), make_client(llm_server), cfg,
                                      n_boot=200)

    assert list(items["id"]) == ["q1", "q2", "q3", "q4"]
    assert items["score"].tolist()[:2] == [1.0, 0.0] and math.isnan(items["score"][2]) and items["score"][3] == 0.5
    assert items["method"].tolist() == ["llm", "heuristic", "llm", "llm"]
    assert items["status"].tolist() == ["ok", "ok", "failed", "ok"]
    assert items["llm_requests"].tolist() == [1, 0, 3, 1]
    assert math.isnan(items["score[judge-a]"][1])  # nobody judged the shortcut item

    overall = summary["nv_response_groundedness"]
    assert overall["mean"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert (overall["n"], overall["n_valid"], overall["n_failed"]) == (4, 3, 1)
    per_model = summary["nv_response_groundedness[judge-a]"]  # over the 3 LLM-judged items
    assert per_model["mean"] == pytest.approx(0.75) and (per_model["n"], per_model["n_failed"]) == (3, 1)
    assert summary["counts"] == {"methods": {"llm": 3, "heuristic": 1}, "status": {"ok": 3, "failed": 1},
                                 "llm_requests": 5}
    assert summary["judge_backend"] == "openai-compatible"
    assert summary["config"]["use_heuristic_shortcuts"] is True and summary["config"]["models"] == ["judge-a"]
    assert list(summary_frame(summary)["metric"]) == ["nv_response_groundedness", "nv_response_groundedness[judge-a]"]


def test_evaluate_dataset_accepts_a_dataframe_and_the_function(llm_server):
    llm_server.set_handler(judge(lambda model, text: MODEL_RATINGS[model]))
    frame = pd.DataFrame({"user_input": [QUESTION, QUESTION],
                          "retrieved_contexts": [CONTEXTS[:1], CONTEXTS[:2]]})
    cfg = JudgeConfig(models=["judge-a", "judge-b"], aggregate="median")
    items, summary = evaluate_dataset(ContextRelevance(), frame, make_client(llm_server), cfg, n_boot=50)
    assert items["score"].tolist() == [0.75, 0.75]  # median of 1.0 and 0.5 = 0.75 per item
    assert items["score[judge-a]"].tolist() == [1.0, 1.0] and items["score[judge-b]"].tolist() == [0.5, 0.5]
    assert summary["counts"]["llm_requests"] == 2 * (1 + 2)


def test_evaluate_dataset_validates_every_sample_before_calling(llm_server):
    samples = groundedness_dataset()
    samples[2] = {"id": "q3", "retrieved_contexts": ["x"]}  # no response
    with pytest.raises(ValueError, match="sample 2: .*response"):
        evaluate_dataset("nv_response_groundedness", samples, make_client(llm_server),
                         JudgeConfig(models=["judge-a"]))
    with pytest.raises(ValueError, match="nv_answer_accuracy"), pytest.deprecated_call():  # the old suite-level helper
        nvidia.evaluate_dataset("faithfulness", samples, make_client(llm_server), JudgeConfig(models=["a"]))
    assert llm_server.request_count == 0
