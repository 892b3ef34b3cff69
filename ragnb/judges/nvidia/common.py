"""What the NVIDIA-style metrics share: reading the sample (:func:`sample_fields`), the 0–2 rating reply, rating calls and
per-model results, and the :class:`NvidiaMetric` base (temperature 0.1)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ragnb.llm.client import LLMClient
from ragnb.judges.base import LLMMetric
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.sample import as_sample
from ragnb.llm.prompts import prompt
from ragnb.llm.replies import ChatResult, LLMOutputError, LLMTransientError
from ragnb.llm.result import EvaluationResult, ModelScore, evaluate_with_models

RATINGS = (0, 1, 2)
DUAL_JUDGE_MODES = ("swap_average", "confirm")
CONTEXT_RELEVANCE = "nv_context_relevance"
RESPONSE_GROUNDEDNESS = "nv_response_groundedness"
ANSWER_ACCURACY = "nv_answer_accuracy"

TEXT = {
    "en": {
        "no_contexts": "No retrieved contexts: relevance 0 without an LLM call.",
        "empty_response": "Empty response: groundedness 0 without an LLM call (heuristic shortcut).",
        "response_in_context": "The response occurs verbatim in a retrieved context: groundedness 1 without an "
                               "LLM call (heuristic shortcut).",
        "no_grounding": "No non-empty retrieved context can ground the response: groundedness 0 without an LLM "
                        "call (heuristic shortcut).",
        "no_question": "(no question given)",
        "no_explanation": "(no explanation)",
    },
    "ru": {
        "no_contexts": "Нет извлечённых контекстов: релевантность 0 без вызова LLM.",
        "empty_response": "Пустой ответ: обоснованность 0 без вызова LLM (эвристическое сокращение).",
        "response_in_context": "Ответ дословно содержится в извлечённом контексте: обоснованность 1 без вызова "
                               "LLM (эвристическое сокращение).",
        "no_grounding": "Нет непустого контекста, на который мог бы опираться ответ: обоснованность 0 без "
                        "вызова LLM (эвристическое сокращение).",
        "no_question": "(вопрос не задан)",
        "no_explanation": "(без объяснения)",
    },
}


def sample_fields(sample: Any, metric: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    """The texts (and the context list, ``"contexts"``) a metric reads from ``sample`` (a
    :class:`~ragnb.judges.sample.Sample`, a mapping or an object). A required field the sample lacks
    (missing, None, NaN) is a ValueError; a blank one is kept (the metric decides: undefined or shortcut);
    an optional one left out is ``""``."""
    s = as_sample(sample)
    out: dict[str, Any] = {}
    for name in (*required, *optional):
        value = getattr(s, name)
        if value is None and name in required:
            kind = "a list of strings" if name == "retrieved_contexts" else "a string"
            raise ValueError(f"{name} must be {kind}, but the sample has none ({metric} needs it); "
                             f"pass {'[]' if name == 'retrieved_contexts' else repr('')} for an empty one")
        if name == "retrieved_contexts":
            out["contexts"] = list(value or ())
        else:
            out[name] = value or ""
    return out


def parse_rating(obj: Any) -> tuple[int, str]:
    """``{"rating": 0|1|2, "explanation": "..."}`` → (rating, explanation).

    Accepts an integral number (``2``, ``2.0``) or a digit string (``"2"``); anything else — out of scale
    (3, -1), fractional (1.5), boolean, null, missing — raises ValueError, so the client re-asks.
    """
    if not isinstance(obj, dict):
        raise ValueError('expected a JSON object {"rating": 0, 1 or 2, "explanation": "..."}')
    if "rating" not in obj:
        raise ValueError('the JSON object has no "rating"')
    raw = obj["rating"]
    value: Any = raw
    if isinstance(raw, str) and raw.strip() in ("0", "1", "2"):
        value = int(raw.strip())
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    if isinstance(value, bool) or not isinstance(value, int) or value not in RATINGS:
        raise ValueError(f'"rating" must be 0, 1 or 2, got {raw!r}')
    explanation = obj.get("explanation")
    return value, "" if explanation is None else str(explanation).strip()


# --------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------


@dataclass
class Rating:
    """One 0–2 rating with the chat calls that produced it (re-asks included)."""

    rating: int
    explanation: str
    results: list[ChatResult]


@dataclass(frozen=True)
class Rater:
    """Asks one judge model for 0–2 ratings of one metric (prompt language and call parameters fixed)."""

    client: LLMClient
    language: str
    params: dict[str, Any]
    model: str
    metric: str

    async def __call__(self, template: str, **values: object) -> Rating:
        messages = [{"role": "user", "content": prompt(template, self.language, **values)}]
        (rating, explanation), results = await self.client.chat_json(
            messages, model=self.model, parse=parse_rating, metric=self.metric, **self.params)
        return Rating(rating, explanation, results)


def _requests(results: Sequence[ChatResult]) -> int:
    return sum(r.attempts for r in results)


def _failure_requests(exc: BaseException) -> int:
    if isinstance(exc, LLMOutputError):
        return _requests(exc.results)
    return int(getattr(exc, "attempts", 0) or 0)


async def rate_all(calls: Sequence[Awaitable[Rating]],
                   labels: Sequence[str]) -> tuple[list[Rating | None], int, str]:
    """Run the calls concurrently; (ratings with None where a call failed, HTTP requests, failure reason).

    Output/transient failures become the reason; anything else (permanent errors, bugs) is raised after
    every call has finished, so no request is left running."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, (LLMOutputError, LLMTransientError)):
            raise o
    ratings = [o if isinstance(o, Rating) else None for o in outcomes]
    requests = sum(_requests(o.results) if isinstance(o, Rating) else _failure_requests(o) for o in outcomes)
    reason = "; ".join(f"{label}: {type(o).__name__}: {o}" for label, o in zip(labels, outcomes)
                       if isinstance(o, BaseException))
    return ratings, requests, reason


def model_score(model: str, score: float, explanation: str, ratings: Sequence[Rating | None], requests: int,
                reason: str, **details: Any) -> ModelScore:
    info = {"ratings": [r.rating if r else None for r in ratings],
            "explanations": [r.explanation if r else None for r in ratings],
            "reasks": sum(len(r.results) - 1 for r in ratings if r), **details}
    if reason:
        return ModelScore(model, math.nan, "", status="failed", reason=reason, calls=requests, details=info)
    return ModelScore(model, score, explanation, calls=requests, details=info)


def finish(result: EvaluationResult, **details: Any) -> EvaluationResult:
    result.details.update({"llm_requests": sum(m.calls for m in result.model_scores), **details})
    return result


def shortcut(metric: str, score: float, key: str, language: str, t0: float) -> EvaluationResult:
    return EvaluationResult(metric, score, TEXT[language][key], [], time.perf_counter() - t0,
                            method="heuristic", details={"shortcut": key, "llm_requests": 0})


def undefined(metric: str, field: str, t0: float) -> EvaluationResult:
    return EvaluationResult(metric, math.nan, "", [], time.perf_counter() - t0, method="none",
                            status="undefined", reason=f"{field} is blank: nothing to judge",
                            details={"llm_requests": 0})


class NvidiaMetric(LLMMetric):
    """Base: one 0–2 rating pipeline per judge model (:meth:`score_model`), combined over models; a metric may
    answer without any call (:meth:`without_call`: heuristic shortcut or undefined input)."""

    family = "nvidia"
    # NVIDIA's judge temperature; the other LLM metrics judge at 0.
    temperature: ClassVar[float | None] = 0.1

    def without_call(self, inputs: dict[str, Any], config: JudgeConfig, t0: float) -> EvaluationResult | None:
        return None

    async def score_model(self, rate: Rater, inputs: dict[str, Any], config: JudgeConfig) -> ModelScore:
        raise NotImplementedError

    def result_details(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def run(self, inputs: dict[str, Any], client: LLMClient, config: JudgeConfig) -> EvaluationResult:
        t0 = time.perf_counter()
        early = self.without_call(inputs, config, t0)
        if early is not None:
            return early
        params = self.call_params(config)

        async def one(model: str) -> ModelScore:
            return await self.score_model(Rater(client, config.language, params, model, self.name), inputs, config)

        result = await evaluate_with_models(self.name, config.judge_models(), one, config.aggregate)
        return finish(result, **self.result_details(inputs))
