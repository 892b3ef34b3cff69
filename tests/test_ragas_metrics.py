"""Ragas-style metrics (ragnb.judges.ragas) against the scripted OpenAI-compatible server (tests/llm_server.py).

Every score is checked against a value computed by hand from the scripted verdicts (arithmetic in the
comments). Replies are routed by the task heading of the prompt (first line), the text in the prompt and
the model; a re-ask is recognised by the extra messages the client appends.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from llm_server import Reply, completion

from ragnb.llm import LLMClient, LLMSettings
from ragnb.llm.result import EvaluationResult
from ragnb.judges import evaluate_dataset
from ragnb.judges import ragas as rg
from ragnb.judges.judge_config import JudgeConfig
from ragnb.metrics.registry import REGISTRY
from ragnb.metrics.stats import summary_frame

TASKS = {
    "# Statement extraction": "statements", "# Выделение утверждений": "statements",
    "# Statement verification": "nli", "# Проверка утверждений": "nli",
    "# Sentence attribution": "recall", "# Атрибуция предложений": "recall",
    "# Context usefulness": "precision", "# Полезность контекстов": "precision",
    "# Entity extraction": "entities", "# Извлечение сущностей": "entities",
    "# Statement-to-context attribution": "attribution", "# Атрибуция утверждений контекстам": "attribution",
    "# Question generation": "questions", "# Генерация вопросов": "questions",
}

QUESTION = "When was the first Super Bowl and where was it played?"
RESPONSE = ("The first Super Bowl was played on January 15, 1967. It took place in Los Angeles. "
            "The Green Bay Packers won it. Tickets cost 100 dollars.")
STATEMENTS = [
    "The first Super Bowl was played on January 15, 1967.",
    "The first Super Bowl took place in Los Angeles.",
    "The Green Bay Packers won the first Super Bowl.",
    "Tickets for the first Super Bowl cost 100 dollars.",
]
CONTEXTS = [
    "The First AFL-NFL World Championship Game was played on January 15, 1967, at the Los Angeles Memorial Coliseum.",
    "The Green Bay Packers defeated the Kansas City Chiefs 35-10.",
]
SAMPLE = rg.Sample(user_input=QUESTION, response=RESPONSE, retrieved_contexts=CONTEXTS)


def make_client(server, **overrides) -> LLMClient:
    values = dict(base_url=server.base_url, api_key="sk-test", cache_dir=None, backoff_initial_s=0.01)
    values.update(overrides)
    return LLMClient(LLMSettings(**values))


def js(obj) -> Reply:
    return completion(json.dumps(obj, ensure_ascii=False))


def task_of(body) -> str:
    return TASKS[body["messages"][0]["content"].splitlines()[0].strip()]


def prompt_of(body) -> str:
    return body["messages"][0]["content"]


def reasks(body) -> int:
    """0 for the first ask; the client appends (assistant reply, correction) per re-ask."""
    return (len(body["messages"]) - 1) // 2


def verdicts(values: dict[int, int]) -> dict:
    return {"verdicts": [{"id": i, "reason": f"reason {i}", "verdict": v} for i, v in values.items()]}


def bodies(server, task: str) -> list[dict]:
    return [r.body for r in server.chat_requests if task_of(r.body) == task]


def faithfulness_handler(verdicts_by_model: dict[str, dict[int, int]], statements=STATEMENTS):
    def handle(body):
        if task_of(body) == "statements":
            return js({"statements": statements})
        assert task_of(body) == "nli"
        return js(verdicts(verdicts_by_model[body["model"]]))
    return handle


CFG = JudgeConfig(models=["judge-a"])


# --------------------------------------------------------------------------------------------
# Faithfulness: ids, re-asks, failures
# --------------------------------------------------------------------------------------------


def test_faithfulness_hand_computed(llm_server):
    llm_server.set_handler(faithfulness_handler({"judge-a": {1: 1, 2: 1, 3: 0, 4: 1}}))
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)

    # supported / n_statements = (1 + 1 + 0 + 1) / 4 = 0.75
    assert isinstance(res, EvaluationResult)
    assert res.score == pytest.approx(0.75)
    assert (res.status, res.metric, res.method) == ("ok", "faithfulness", "llm")
    assert res.details["n_statements"] == 4
    counts = [res.details[k] for k in ("n_verdicts_missing", "n_verdicts_extra", "n_verdicts_reasked")]
    assert counts == [0, 0, 0]
    assert res.details["llm_requests"] == 2 and len(llm_server.chat_requests) == 2
    assert res.explanation.startswith("3 of 4 statements")
    assert "#3" in res.explanation and "reason 3" in res.explanation
    [ms] = res.model_scores
    assert (ms.model, ms.score, ms.calls) == ("judge-a", pytest.approx(0.75), 2)
    assert [r["verdict"] for r in ms.details["statements"]] == [1, 1, 0, 1]

    # The judge saw the statements as a JSON list with ids 1..4 and every context.
    [nli] = bodies(llm_server, "nli")
    sent = json.loads(re.search(r"STATEMENTS.*?\n(\[.*?\n\])", prompt_of(nli), re.S).group(1))
    assert sent == [{"id": i, "statement": s} for i, s in enumerate(STATEMENTS, start=1)]
    assert all(c in prompt_of(nli) for c in CONTEXTS)
    assert nli["model"] == "judge-a" and nli["temperature"] == 0.0


def test_missing_verdict_is_reasked_by_id_and_merged(llm_server):
    def handle(body):
        if task_of(body) == "statements":
            return js({"statements": STATEMENTS})
        if reasks(body) == 0:
            return js(verdicts({1: 1, 2: 1, 4: 1}))  # id 3 left out
        return js(verdicts({3: 0}))  # the re-ask answers only the missing id
    llm_server.set_handler(handle)
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)

    nli = bodies(llm_server, "nli")
    assert len(nli) == 2
    correction = nli[1]["messages"][-1]["content"]
    assert nli[1]["messages"][-1]["role"] == "user"
    assert "id(s) [3]" in correction  # the re-ask names exactly the missing id
    # merged verdicts 1, 1, 0, 1 over the 4 statements sent: 3 / 4 = 0.75 (not 3 / 3 over the first reply)
    assert res.status == "ok" and res.score == pytest.approx(0.75)
    assert (res.details["n_verdicts_missing"], res.details["n_verdicts_reasked"]) == (0, 1)
    assert res.details["llm_requests"] == 3


def test_extra_and_repeated_ids_are_ignored_and_counted(llm_server):
    def handle(body):
        if task_of(body) == "statements":
            return js({"statements": STATEMENTS})
        v = verdicts({1: 1, 2: 1, 3: 0, 4: 1})
        v["verdicts"] += [{"id": 9, "verdict": 1}, {"id": 2, "verdict": 0}, {"verdict": 1}]
        return js(v)
    llm_server.set_handler(handle)
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)

    # id 9 (unknown), the second id 2 (repeat) and the entry without id are ignored: still 3 / 4
    assert res.score == pytest.approx(0.75)
    assert res.details["n_verdicts_extra"] == 3 and res.details["n_verdicts_missing"] == 0
    assert len(llm_server.chat_requests) == 2  # nothing missing → no re-ask


def test_verdict_still_missing_after_reasks_fails_never_scores(llm_server):
    llm_server.set_handler(faithfulness_handler({"judge-a": {1: 1, 2: 1, 4: 1}}))  # id 3 never comes
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)

    assert res.status == "failed" and math.isnan(res.score)
    assert "[3]" in res.reason and "verdicts" in res.reason
    # reask_budget = 2 → 1 ask + 2 re-asks for the verdicts, all of them naming id 3
    nli = bodies(llm_server, "nli")
    assert len(nli) == 3 and all("id(s) [3]" in b["messages"][-1]["content"] for b in nli[1:])
    [ms] = res.model_scores
    assert ms.status == "failed" and ms.calls == 4
    assert (ms.details["n_statements"], ms.details["n_verdicts_missing"]) == (4, 1)


def test_invalid_verdict_value_counts_as_missing(llm_server):
    def handle(body):
        if task_of(body) == "statements":
            return js({"statements": STATEMENTS[:2]})
        if reasks(body) == 0:
            return js({"verdicts": [{"id": 1, "verdict": 1}, {"id": 2, "verdict": "maybe"}]})
        return js(verdicts({1: 1, 2: 0}))
    llm_server.set_handler(handle)
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)
    assert "'maybe' is not 0 or 1" in bodies(llm_server, "nli")[1]["messages"][-1]["content"]
    assert res.score == pytest.approx(0.5)  # (1 + 0) / 2


def test_unparseable_output_is_reasked_then_failed_not_zero(llm_server):
    llm_server.set_handler(lambda body: completion("I am sorry, I cannot help with that."))
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)
    assert res.status == "failed" and math.isnan(res.score)
    assert "statements of the response" in res.reason and "no JSON" in res.reason
    assert len(llm_server.chat_requests) == 3  # 1 ask + reask_budget 2; the verdict step never ran


def test_truncated_output_is_reasked(llm_server):
    def handle(body):
        if task_of(body) == "statements":
            if reasks(body) == 0:
                return completion('{"statements": ["The first Super Bowl', finish_reason="length")
            return js({"statements": STATEMENTS[:2]})
        return js(verdicts({1: 1, 2: 0}))
    llm_server.set_handler(handle)
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)
    assert "cut off" in bodies(llm_server, "statements")[1]["messages"][-1]["content"]
    assert res.status == "ok" and res.score == pytest.approx(0.5)  # (1 + 0) / 2


def test_zero_statements_is_undefined(llm_server):
    llm_server.set_handler(lambda body: js({"statements": []}))
    res = rg.Faithfulness().evaluate_sync(rg.Sample(user_input=QUESTION, response="Hmm, well.",
                                                    retrieved_contexts=CONTEXTS), make_client(llm_server), CFG)
    assert res.status == "undefined" and math.isnan(res.score)
    assert "no factual statement" in res.reason
    assert res.details["n_statements"] == 0
    assert len(llm_server.chat_requests) == 1  # nothing to verify → no verdict call


def test_russian_prompts_and_explanation(llm_server):
    llm_server.set_handler(faithfulness_handler({"judge-a": {1: 1, 2: 1, 3: 0, 4: 1}}))
    cfg = JudgeConfig(models=["judge-a"], language="ru")
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), cfg)
    assert res.score == pytest.approx(0.75)
    assert res.explanation.startswith("3 из 4 утверждений ответа подтверждаются")
    assert "№3" in res.explanation
    assert all(prompt_of(r.body).startswith("# ") and re.search("[а-я]", prompt_of(r.body).splitlines()[0])
               for r in llm_server.chat_requests)


# --------------------------------------------------------------------------------------------
# Several judge models
# --------------------------------------------------------------------------------------------


def test_two_models_are_averaged_and_a_failed_model_is_listed_not_averaged(llm_server):
    judged = {"judge-a": {1: 1, 2: 1, 3: 0, 4: 1}, "judge-b": {1: 1, 2: 0, 3: 0, 4: 1}}
    base = faithfulness_handler(judged)
    llm_server.set_handler(lambda body: completion("not json") if body["model"] == "judge-c" else base(body))
    client = make_client(llm_server)

    res = rg.Faithfulness().evaluate_sync(SAMPLE, client, JudgeConfig(models=["judge-a", "judge-b"]))
    # judge-a: 3/4 = 0.75; judge-b: 2/4 = 0.5; mean = (0.75 + 0.5) / 2 = 0.625
    assert res.score == pytest.approx(0.625)
    assert {m.model: m.score for m in res.model_scores} == {"judge-a": 0.75, "judge-b": 0.5}
    assert res.details["llm_requests"] == 4 and res.details["n_statements"] == 8  # counts summed over the 2 models
    assert set(res.details["per_model"]) == {"judge-a", "judge-b"}
    assert res.as_row()["score[judge-b]"] == pytest.approx(0.5)

    res = rg.Faithfulness().evaluate_sync(SAMPLE, client, {"models": ["judge-a", "judge-b", "judge-c"]})
    # judge-c fails (no JSON after the re-asks): mean over the two valid models = 0.625, failure reported
    assert res.status == "partial" and res.score == pytest.approx(0.625)
    assert "judge-c failed" in res.reason
    assert [m.status for m in res.model_scores] == ["ok", "ok", "failed"]


def test_aggregate_option_median(llm_server):
    judged = {"a": {1: 1, 2: 1, 3: 0, 4: 1}, "b": {1: 1, 2: 0, 3: 0, 4: 1}, "c": {1: 0, 2: 1, 3: 0, 4: 1}}
    llm_server.set_handler(faithfulness_handler(judged))
    client = make_client(llm_server)
    models = ["a", "b", "c"]
    # scores 0.75, 0.5, 0.5 → mean (0.75 + 0.5 + 0.5) / 3 = 0.5833; median 0.5
    assert rg.Faithfulness().score(SAMPLE, client, {"models": models}) == pytest.approx(1.75 / 3)
    assert rg.Faithfulness().score(SAMPLE, client, {"models": models, "aggregate": "median"}) == pytest.approx(0.5)


def test_endpoint_errors_fail_the_model_or_stop_the_run(llm_server):
    from llm_server import error_reply

    from ragnb.llm import LLMPermanentError

    def handle(body):
        if task_of(body) == "statements":
            return js({"statements": STATEMENTS})
        return error_reply(503, "overloaded", type_="server_error")
    llm_server.set_handler(handle)
    res = rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server, max_retries=1), CFG)
    assert res.status == "failed" and math.isnan(res.score)
    assert "verdicts: LLMTransientError" in res.reason
    assert res.details["llm_requests"] == 1 + 2  # statements + 2 tries of the verdict call

    llm_server.set_handler(lambda body: error_reply(401, "invalid api key", type_="auth_error"))
    with pytest.raises(LLMPermanentError):
        rg.Faithfulness().evaluate_sync(SAMPLE, make_client(llm_server), CFG)


# --------------------------------------------------------------------------------------------
# ContextPrecision
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("v, expected", [
    ([1, 0, 1], (1 / 1 + 2 / 3) / 2),        # 0.8333
    ([0, 1, 1], (1 / 2 + 2 / 3) / 2),        # 0.5833
    ([1, 1, 0], (1 / 1 + 2 / 2) / 2),        # 1.0
    ([0, 0, 1, 0], (1 / 3) / 1),             # 0.3333
    ([0, 0, 0], 0.0),                        # no useful context → 0 (see docs/metrics.md, Ragas-style suite)
    ([], math.nan),
])
def test_average_precision_formula(v, expected):
    got = rg.average_precision(v)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


P_SAMPLE = rg.Sample(
    user_input="What is photosynthesis?",
    response="Photosynthesis turns light into chemical energy.",
    reference="Photosynthesis is how plants use sunlight, CO2 and water to make glucose and oxygen.",
    retrieved_contexts=["Photosynthesis converts light energy.", "Food prices rose this year.",
                        "6CO2 + 6H2O + light → C6H12O6 + 6O2."],
)


def test_context_precision_one_call_by_id_and_strategies(llm_server):
    llm_server.set_handler(lambda body: js(verdicts({1: 1, 2: 0, 3: 1})))
    client = make_client(llm_server)
    metric = rg.ContextPrecision()

    res = metric.evaluate_sync(P_SAMPLE, client, JudgeConfig(models=["judge-a"]))
    # verdicts [1, 0, 1] → (1/1 + 2/3) / 2 = 0.8333
    assert res.score == pytest.approx(0.8333333)
    assert res.details["per_model"]["judge-a"]["strategy"] == "reference_based"  # auto: the reference exists
    [req] = llm_server.chat_requests  # K = 3 contexts, one call (ragas: 3)
    sent = prompt_of(req.body)
    assert P_SAMPLE.reference in sent and P_SAMPLE.response not in sent
    assert '"id": 3' in sent and "Food prices rose this year." in sent
    assert "ranks 1, 3 of 3" in res.explanation

    res = rg.ContextPrecision(strategy="RESPONSE_BASED").evaluate_sync(P_SAMPLE, client, {"models": ["judge-a"]})
    assert res.score == pytest.approx(0.8333333)
    assert P_SAMPLE.response in prompt_of(llm_server.chat_requests[-1].body)

    no_ref = rg.Sample(user_input=P_SAMPLE.user_input, response=P_SAMPLE.response,
                       retrieved_contexts=P_SAMPLE.retrieved_contexts)
    res = metric.evaluate_sync(no_ref, client, JudgeConfig(models=["judge-a"]))
    assert res.details["per_model"]["judge-a"]["strategy"] == "response_based"
    with pytest.raises(ValueError, match="reference"):
        rg.ContextPrecision(strategy="reference_based").evaluate_sync(no_ref, client, JudgeConfig(models=["judge-a"]))


def test_context_precision_sync_score(llm_server):
    llm_server.set_handler(lambda body: js(verdicts({1: 0, 2: 0, 3: 1})))
    # [0, 0, 1] → (1/3) / 1
    score = rg.ContextPrecision().score(P_SAMPLE, make_client(llm_server), {"models": ["judge-a"]})
    assert score == pytest.approx(1 / 3)


# --------------------------------------------------------------------------------------------
# ContextRecall
# --------------------------------------------------------------------------------------------


def test_context_recall_sentences_split_by_ragnb(llm_server):
    reference = ("Фотосинтез преобразует световую энергию в химическую. Он происходит в хлоропластах. "
                 "Процесс требует CO₂, воды и солнечного света. Кислород выделяется как побочный продукт.")
    sample = rg.Sample(user_input="Расскажите о фотосинтезе", reference=reference,
                       retrieved_contexts=["Хлоропласты — органеллы, где происходит фотосинтез.",
                                           "Во время фотосинтеза выделяется кислород."])
    llm_server.set_handler(lambda body: js(verdicts({1: 1, 2: 0, 3: 1, 4: 1, 7: 1})))
    res = rg.ContextRecall().evaluate_sync(sample, make_client(llm_server), JudgeConfig(models=["m"]))

    # 4 sentences, verdicts 1, 0, 1, 1 (id 7 is unknown → ignored) → 3 / 4 = 0.75
    assert res.score == pytest.approx(0.75)
    assert res.details["n_statements"] == 4 and res.details["n_verdicts_extra"] == 1
    [req] = llm_server.chat_requests
    sent = prompt_of(req.body)
    assert '"id": 4' in sent and '"sentence": "Кислород выделяется как побочный продукт."' in sent
    assert "Not attributable: #2" in res.explanation


# --------------------------------------------------------------------------------------------
# ContextEntityRecall
# --------------------------------------------------------------------------------------------


def test_normalize_entity_meets_russian_word_forms():
    n = rg.normalize_entity
    assert n("Москва") == n("Москвы") == n("москве") == ("москв",)
    assert n("Эйфелева башня") == n("Эйфелевой башни") == n("ЭЙФЕЛЕВУ БАШНЮ")
    assert n("Париж") == n("Париже") and n("Германия") == n("Германии")
    assert n("Ёлкин") == n("Елкина")
    assert n("21 196 километров") == n("21196 километров")
    assert n("Аполлон-11") == ("аполлон", "11")
    assert n("the Nobel Prizes") == n("Nobel Prize")
    assert n("Москва") != n("Минск")


def test_entity_recall_formula():
    # reference entities: Москва, Париж, 1889, Наполеон; covered: Москва (Москвы), 1889 (1889 году) → 2 / 4
    assert rg.entity_recall(["Москва", "Париж", "1889", "Наполеон", "москвы"],
                            ["Москвы", "1889 году", "Лондон"]) == pytest.approx(0.5)
    assert math.isnan(rg.entity_recall([], ["Москва"]))


def test_context_entity_recall_russian_forms(llm_server):
    reference = "Наполеон вошёл в Москву в 1812 году; Кремль и Эйфелева башня здесь ни при чём, а 1889 — год выставки."
    contexts = ["Французская армия заняла Москвы окрестности в 1812 году и разместилась у стен Кремля.",
                "Строительство Эйфелевой башни завершили к выставке 1889 года."]
    sample = rg.Sample(reference=reference, retrieved_contexts=contexts)

    def handle(body):
        if reference in prompt_of(body):
            return js({"entities": ["Наполеон", "Москва", "1812", "Кремль", "Эйфелева башня", "1889", "Москву"]})
        return js({"entities": ["Москвы", "1812 году", "Эйфелевой башни", "1889 года", "Французская армия"]})
    llm_server.set_handler(handle)
    client = make_client(llm_server)

    res = rg.ContextEntityRecall(match_context_text=False).evaluate_sync(
        sample, client, JudgeConfig(models=["m"]))
    # distinct reference entities: Наполеон, Москва (= Москву), 1812, Кремль, Эйфелева башня, 1889 → 6
    # covered by context entities: Москва←Москвы, 1812←"1812 году", Эйфелева башня←Эйфелевой башни,
    # 1889←"1889 года" → 4 / 6
    assert res.score == pytest.approx(4 / 6)
    details = res.details["per_model"]["m"]
    assert details["n_entities"] == 6
    by = {m["entity"]: m["by"] for m in details["matches"]}
    assert by["Москва"] == "Москвы" and by["Наполеон"] is None and by["Кремль"] is None
    assert len(llm_server.chat_requests) == 2

    res = rg.ContextEntityRecall().evaluate_sync(sample, client, JudgeConfig(models=["m"]))
    # + Кремль found in the contexts' text ("у стен Кремля") → 5 / 6; Наполеон is nowhere
    assert res.score == pytest.approx(5 / 6)
    assert "Наполеон" in res.explanation


def test_context_entity_recall_no_entities_is_undefined(llm_server):
    llm_server.set_handler(lambda body: js({"entities": []}))
    res = rg.ContextEntityRecall().evaluate_sync(rg.Sample(reference="ok.", retrieved_contexts=["x"]),
                                                 make_client(llm_server), {"models": ["m"]})
    assert res.status == "undefined" and math.isnan(res.score)  # ragas: 0 / (0 + ε) = 0


# --------------------------------------------------------------------------------------------
# NoiseSensitivity
# --------------------------------------------------------------------------------------------

NS_RESPONSE = "A1. A2. A3. A4. A5."
NS_REFERENCE = "G1. G2."
NS_SAMPLE = rg.Sample(user_input="q?", response=NS_RESPONSE, reference=NS_REFERENCE,
                      retrieved_contexts=["context one", "context two", "context three"])


def ns_handler(body):
    task = task_of(body)
    text = prompt_of(body)
    if task == "statements":
        if NS_RESPONSE in text:
            return js({"statements": ["a1", "a2", "a3", "a4", "a5"]})
        return js({"statements": ["g1", "g2"]})
    if task == "nli":  # response statements vs the reference: only a1 is correct
        assert NS_REFERENCE in text
        return js(verdicts({1: 1, 2: 0, 3: 0, 4: 0, 5: 0}))
    assert task == "attribution"
    # ids 1..5 = a1..a5, ids 6..7 = g1..g2 (one id space); context 8 does not exist
    return js({"verdicts": [
        {"id": 1, "contexts": [1]},
        {"id": 2, "contexts": [2]},
        {"id": 3, "contexts": [3]},
        {"id": 4, "contexts": []},
        {"id": 5, "contexts": [2, 3, 8]},
        {"id": 6, "contexts": [1]},
        {"id": 7, "contexts": [1, 2]},
    ]})


@pytest.mark.parametrize("mode, expected", [
    # relevant contexts = those supporting g1 or g2 = {1, 2}; context 3 is irrelevant.
    # incorrect = a2, a3, a4, a5 (a1 is supported by the reference).
    # relevant: incorrect and supported by a relevant context: a2 (ctx 2), a5 (ctx 2) → 2 / 5 = 0.4
    ("relevant", 2 / 5),
    # irrelevant: incorrect, supported by an irrelevant context and by no relevant one: a3 (ctx 3) → 1 / 5
    # (a5 is supported by ctx 3 but also by relevant ctx 2; a4 by none)
    ("irrelevant", 1 / 5),
])
def test_noise_sensitivity_both_modes(llm_server, mode, expected):
    llm_server.set_handler(ns_handler)
    res = rg.NoiseSensitivity(mode=mode).evaluate_sync(NS_SAMPLE, make_client(llm_server),
                                                       JudgeConfig(models=["m"]))
    assert res.score == pytest.approx(expected)
    assert res.metric == f"noise_sensitivity_{mode}"
    # 4 calls for K = 3 contexts; ragas: 2K + 3 = 9
    assert len(llm_server.chat_requests) == 4 and res.details["llm_requests"] == 4
    d = res.details["per_model"]["m"]
    assert d["relevant_contexts"] == [1, 2] and d["n_context_ids_unknown"] == 1
    assert [s["contexts"] for s in d["statements"]][4] == [2, 3]
    # the pure formula on the same matrices
    assert rg.noise_sensitivity_score([False, True, True, True, True], [[1], [2], [3], [], [2, 3]],
                                      [[1], [1, 2]], mode) == pytest.approx(expected)


def test_noise_sensitivity_missing_attribution_fails(llm_server):
    def handle(body):
        if task_of(body) == "attribution":
            return js({"verdicts": [{"id": i, "contexts": [1]} for i in range(1, 7)]})  # id 7 never comes
        return ns_handler(body)
    llm_server.set_handler(handle)
    res = rg.NoiseSensitivity().evaluate_sync(NS_SAMPLE, make_client(llm_server), {"models": ["m"]})
    assert res.status == "failed" and math.isnan(res.score) and "[7]" in res.reason
    assert res.details["n_verdicts_missing"] == 1


# --------------------------------------------------------------------------------------------
# ResponseRelevancy
# --------------------------------------------------------------------------------------------

RR_QUESTION = "Where is France and what is its capital?"
RR_SAMPLE = rg.Sample(user_input=RR_QUESTION, response="France is in Western Europe and its capital is Paris.")
RR_GENERATED = ["Where is France located?", "What is the capital of France?", "In which region of Europe is France?"]


def test_response_relevancy_one_call_real_encoder(llm_server, encoder):
    llm_server.set_handler(lambda body: js({"noncommittal": 0, "questions": RR_GENERATED}))
    res = rg.ResponseRelevancy(encoder=encoder).evaluate_sync(RR_SAMPLE, make_client(llm_server),
                                                              JudgeConfig(models=["m"]))
    # expected = mean_i cos(E(q), E(q_i)), computed here independently of ragnb
    q = encoder.model.encode([RR_QUESTION])[0].astype(np.float64)
    g = encoder.model.encode(RR_GENERATED).astype(np.float64)
    expected = float(np.mean([q @ gi / (np.linalg.norm(q) * np.linalg.norm(gi)) for gi in g]))
    assert 0.5 < expected < 1.0
    assert res.score == pytest.approx(expected, abs=1e-5)
    [req] = llm_server.chat_requests  # N = 3 questions in one call (ragas: 3 calls)
    assert "write 3 different questions" in prompt_of(req.body)
    assert RR_QUESTION not in prompt_of(req.body)  # the judge sees only the response
    d = res.details["per_model"]["m"]
    assert d["questions"] == RR_GENERATED and len(d["cosines"]) == 3 and d["max_pairwise_cosine"] < 1


def test_response_relevancy_duplicates_are_reasked_and_noncommittal_is_zero(llm_server, encoder):
    def handle(body):
        if reasks(body) == 0:
            return js({"noncommittal": 0, "questions": ["What is the capital of France?",
                                                         "what is the capital of France", RR_GENERATED[0]]})
        return js({"noncommittal": 0, "questions": RR_GENERATED})
    llm_server.set_handler(handle)
    cfg = JudgeConfig(models=["m"])
    res = rg.ResponseRelevancy(encoder=encoder).evaluate_sync(RR_SAMPLE, make_client(llm_server), cfg)
    correction = llm_server.chat_requests[1].body["messages"][-1]["content"]
    assert "expected 3 distinct questions, got 2 distinct (1 repeated)" in correction
    assert res.status == "ok" and res.details["per_model"]["m"]["questions"] == RR_GENERATED

    llm_server.set_handler(lambda body: js({"noncommittal": 1, "questions": ["What is the capital of France?"]}))
    res = rg.ResponseRelevancy().evaluate_sync(
        rg.Sample(user_input="What is the capital of France?", response="I don't know."), make_client(llm_server), cfg)
    # noncommittal → cos · 0 = 0 even though the generated question equals the original (cos = 1)
    assert res.status == "ok" and res.score == 0.0
    assert res.details["per_model"]["m"]["cosines"][0] == pytest.approx(1.0, abs=1e-5)


# --------------------------------------------------------------------------------------------
# Samples, configs, datasets, registry
# --------------------------------------------------------------------------------------------


def test_sample_validation_names_the_missing_fields(llm_server):
    client = make_client(llm_server)
    with pytest.raises(ValueError, match=r"faithfulness needs response, retrieved_contexts"):
        rg.Faithfulness().evaluate_sync(rg.Sample(user_input="q"), client, CFG)
    with pytest.raises(ValueError, match=r"noise_sensitivity_relevant needs reference"):
        rg.NoiseSensitivity().validate({"response": "r", "retrievedContexts": ["c"], "reference": "  "})
    with pytest.raises(ValueError, match="retrieved_contexts must be a list of strings"):
        rg.Sample(retrieved_contexts="one context")
    with pytest.raises(ValueError, match=r"retrieved_contexts\[1\] must be a string"):
        rg.Sample(retrieved_contexts=["a", 3])
    with pytest.raises(ValueError, match="context_recall needs retrieved_contexts"):
        rg.ContextRecall().validate(rg.Sample(user_input="q", reference="r", retrieved_contexts=[" "]))
    s = rg.Sample.from_dict({"userInput": "q", "answer": "a", "ground_truth": "g", "contexts": ("c1", "c2"), "id": 7})
    assert s == rg.Sample("q", "a", "g", ("c1", "c2"))
    with pytest.raises(ValueError, match="unknown option"):
        JudgeConfig.make({"models": ["m"], "strategy": "auto"})
    with pytest.raises(ValueError, match="mode 'sideways'"):
        rg.NoiseSensitivity(mode="sideways")
    with pytest.raises(ValueError, match="no judge model"):
        JudgeConfig().judge_models()
    assert llm_server.chat_requests == []


def test_evaluate_dataset_counts_failed_and_undefined(llm_server):
    def handle(body):
        text = prompt_of(body)
        if "BROKEN" in text:
            return completion("no json here")
        if task_of(body) == "statements":
            return js({"statements": [] if "EMPTY" in text else STATEMENTS})
        return js(verdicts({1: 1, 2: 1, 3: 0, 4: 1}))
    llm_server.set_handler(handle)
    rows = [
        {"id": "q1", "user_input": QUESTION, "response": RESPONSE, "retrieved_contexts": CONTEXTS},
        {"id": "q2", "user_input": QUESTION, "response": "EMPTY", "retrieved_contexts": CONTEXTS},
        {"id": "q3", "user_input": QUESTION, "response": "BROKEN", "retrieved_contexts": CONTEXTS},
    ]
    frame, summary = evaluate_dataset("faithfulness", rows, make_client(llm_server), CFG, concurrency=2)

    assert list(frame["sample"]) == [0, 1, 2] and list(frame["id"]) == ["q1", "q2", "q3"]
    assert list(frame["status"]) == ["ok", "undefined", "failed"]
    assert frame.loc[0, "score"] == pytest.approx(0.75) and frame["score"].isna().tolist() == [False, True, True]
    assert frame.loc[0, "score[judge-a]"] == pytest.approx(0.75) and frame.loc[0, "n_statements"] == 4
    # q1: 2 requests; q2: 1 (no statement, no verdict call); q3: 1 ask + 2 re-asks
    assert frame["llm_requests"].tolist() == [2, 1, 3]
    # mean over the one valid sample = 0.75; the other two are counted, not dropped
    agg = summary["faithfulness"]
    assert agg["mean"] == pytest.approx(0.75)
    assert (agg["n"], agg["n_valid"], agg["n_failed"]) == (3, 1, 2)
    assert summary["faithfulness[judge-a]"]["n_valid"] == 1
    assert summary["counts"]["status"] == {"ok": 1, "undefined": 1, "failed": 1}
    assert summary["counts"]["llm_requests"] == 6
    assert summary["config"]["models"] == ["judge-a"] and summary["judge_backend"] == "openai-compatible"
    table = summary_frame(summary)
    assert table["metric"].tolist() == ["faithfulness", "faithfulness[judge-a]"]

    before = len(llm_server.chat_requests)
    with pytest.raises(ValueError, match=r"2 of 3 samples cannot be scored by faithfulness:\n  sample 1: .*response"):
        evaluate_dataset(rg.Faithfulness(), [rows[0], {"user_input": "q"}, {"response": "r"}],
                            make_client(llm_server), CFG)
    assert len(llm_server.chat_requests) == before  # validated before any call


@pytest.mark.parametrize("concurrency", [1, 3])
def test_evaluate_dataset_bounds_samples_in_flight(llm_server, concurrency):
    def handle(body):
        return completion(json.dumps(verdicts({1: 1, 2: 1, 3: 1})), delay_s=0.1)
    llm_server.set_handler(handle)
    rows = [P_SAMPLE] * 3
    frame, _ = evaluate_dataset("context_precision", rows, make_client(llm_server), {"models": ["m"]},
                                   concurrency=concurrency)
    assert frame["score"].tolist() == [1.0, 1.0, 1.0]  # (1/1 + 2/2 + 3/3) / 3
    assert llm_server.max_in_flight == concurrency


def test_evaluate_dataset_accepts_a_dataframe(llm_server):
    import pandas as pd

    llm_server.set_handler(lambda body: js(verdicts({1: 1, 2: 0, 3: 1})))
    df = pd.DataFrame({"question": ["q1", "q2"], "ground_truth": ["ref one", "ref two"],
                       "contexts": [["a", "b", "c"], ["d", "e", "f"]]}, index=["x", "y"])
    frame, summary = evaluate_dataset("context_precision", df, make_client(llm_server), {"models": ["m"]})
    assert list(frame["sample"]) == ["x", "y"]
    assert frame["score"].tolist() == pytest.approx([5 / 6, 5 / 6])  # (1/1 + 2/3) / 2 each
    assert summary["context_precision"]["mean"] == pytest.approx(5 / 6)
    assert summary["context_precision"]["n_valid"] == 2


def test_registry_has_the_metrics_and_their_formulas():
    for name in ("faithfulness", "context_recall", "context_precision", "context_entity_recall",
                 "noise_sensitivity_relevant", "noise_sensitivity_irrelevant", "response_relevancy"):
        assert REGISTRY[name].family == "llm" and REGISTRY[name].doc
        assert REGISTRY[name].fn.result_name() == name  # the registered metric object itself
    assert REGISTRY["noise_sensitivity_relevant"].higher_is_better is False
    assert REGISTRY["noise_sensitivity_irrelevant"].fn.mode == "irrelevant"
    assert isinstance(REGISTRY["faithfulness"].fn, rg.Faithfulness)
    assert rg.faithfulness_score([1, 1, 0, 1]) == pytest.approx(0.75)
    assert math.isnan(rg.faithfulness_score([]))
    assert rg.response_relevancy_score([1, 0], [[1, 0], [0, 1]]) == pytest.approx(0.5)  # (1 + 0) / 2
    assert rg.response_relevancy_score([1, 0], [[1, 0]], noncommittal=True) == 0.0
