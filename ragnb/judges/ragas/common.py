"""What the ragas-style metrics share: explanations (en / ru), one judge model running one metric on one
sample (:class:`RagasJudge`), and the :class:`RagasMetric` base."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ragnb.llm.client import LLMClient
from ragnb.judges.base import LLMMetric
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.ragas.parsing import IdParser
from ragnb.judges.sample import Sample, as_sample
from ragnb.llm.prompts import prompt
from ragnb.llm.replies import LLMOutputError, LLMTransientError
from ragnb.llm.result import EvaluationResult, ModelScore, evaluate_with_models


TEXT = {
    "en": {
        "faithfulness": "{k} of {n} statements in the response are supported by the retrieved contexts.",
        "faithfulness_bad": " Not supported: {items}.",
        "context_recall": "{k} of {n} sentences of the reference can be attributed to the retrieved contexts.",
        "context_recall_bad": " Not attributable: {items}.",
        "context_precision": "Useful contexts (judged against the {against}) at ranks {ranks} of {n}; average precision {score:.3f}.",
        "context_precision_none": "None of the {n} retrieved contexts was judged useful (against the {against}).",
        "reference": "reference", "response": "response",
        "entities": "{k} of {n} entities of the reference are found in the retrieved contexts.",
        "entities_bad": " Missing: {items}.",
        "noise": "{k} of {n} statements in the response are incorrect (not supported by the reference) and come from {kind} contexts ({r} of {c} contexts are relevant).",
        "relevant": "relevant", "irrelevant": "irrelevant",
        "relevancy": "Mean cosine similarity between the question and {n} questions generated from the response: {score:.3f}.",
        "noncommittal": "The response is noncommittal (evasive), so the score is 0.",
    },
    "ru": {
        "faithfulness": "{k} из {n} утверждений ответа подтверждаются найденными контекстами.",
        "faithfulness_bad": " Не подтверждены: {items}.",
        "context_recall": "{k} из {n} предложений эталона можно атрибутировать найденным контекстам.",
        "context_recall_bad": " Не атрибутируются: {items}.",
        "context_precision": "Полезные контексты (по {against}) на позициях {ranks} из {n}; средняя точность {score:.3f}.",
        "context_precision_none": "Ни один из {n} найденных контекстов не признан полезным (по {against}).",
        "reference": "эталону", "response": "ответу",
        "entities": "{k} из {n} сущностей эталона найдены в контекстах.",
        "entities_bad": " Не найдены: {items}.",
        "noise": "{k} из {n} утверждений ответа неверны (не подтверждаются эталоном) и взяты из {kind} контекстов (релевантных контекстов: {r} из {c}).",
        "relevant": "релевантных", "irrelevant": "нерелевантных",
        "relevancy": "Среднее косинусное сходство вопроса и {n} вопросов, сгенерированных по ответу: {score:.3f}.",
        "noncommittal": "Ответ уклончивый, поэтому оценка 0.",
    },
}


def text_of(language: str, key: str, **values: Any) -> str:
    return TEXT[language][key].format(**values)


def quote_items(rows: Sequence[dict[str, Any]], language: str, limit: int = 5) -> str:
    open_q, close_q, mark = ("«", "»", "№") if language == "ru" else ("\u201c", "\u201d", "#")
    parts = []
    for r in rows[:limit]:
        text = r["statement"] if len(r["statement"]) <= 120 else r["statement"][:117] + "…"
        reason = f" ({r['reason']})" if r.get("reason") else ""
        parts.append(f"{mark}{r['id']} {open_q}{text}{close_q}{reason}")
    if len(rows) > limit:
        parts.append("…")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------
# One judge model running one metric on one sample
# --------------------------------------------------------------------------------------------


class RagasJudge:
    """One judge model running one metric on one sample: asks, counts HTTP requests, collects details."""

    def __init__(self, client: LLMClient, config: JudgeConfig, params: dict[str, Any], model: str,
                 metric: str) -> None:
        self.client, self.config, self.params, self.model, self.metric = client, config, params, model, metric
        self.requests = 0
        self.details: dict[str, Any] = {}
        self.parsers: list[IdParser] = []

    async def ask(self, stage: str, template: str, parse: Callable[[Any], Any], **values: Any) -> Any:
        if isinstance(parse, IdParser):
            self.parsers.append(parse)
        text = prompt(template, self.config.language, **values)
        try:
            parsed, results = await self.client.chat_json(
                [{"role": "user", "content": text}], model=self.model, parse=parse, metric=self.metric, **self.params)
        except LLMOutputError as exc:
            self.requests += sum(r.attempts for r in exc.results)
            exc.ragnb_stage = stage  # type: ignore[attr-defined]
            raise
        except LLMTransientError as exc:
            self.requests += int(exc.attempts or 0)
            exc.ragnb_stage = stage  # type: ignore[attr-defined]
            raise
        self.requests += sum(r.attempts for r in results)  # HTTP requests; 0 for cache hits
        return parsed

    def _finish(self) -> dict[str, Any]:
        if self.parsers:
            for key in ("n_verdicts_missing", "n_verdicts_extra", "n_verdicts_reasked"):
                self.details[key] = sum(p.counts()[key] for p in self.parsers)
        return self.details

    def ok(self, score: float, explanation: str) -> ModelScore:
        return ModelScore(self.model, float(score), explanation, "ok", "", self.requests, self._finish())

    def undefined(self, reason: str) -> ModelScore:
        return ModelScore(self.model, math.nan, "", "undefined", reason, self.requests, self._finish())

    def failed(self, exc: Exception) -> ModelScore:
        stage = getattr(exc, "ragnb_stage", "")
        what = exc.reason if isinstance(exc, LLMOutputError) else str(exc)
        reason = f"{stage + ': ' if stage else ''}{type(exc).__name__}: {what}"
        return ModelScore(self.model, math.nan, "", "failed", reason, self.requests, self._finish())


def _merge_details(per_model: Sequence[ModelScore]) -> dict[str, Any]:
    """``per_model`` details, plus every integer count (``n_*``) and the HTTP requests (``llm_requests``,
    cache hits excluded) summed over the models."""
    out: dict[str, Any] = {"llm_requests": sum(m.calls for m in per_model)}
    for m in per_model:
        for key, value in m.details.items():
            if key.startswith("n_") and isinstance(value, int) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    out["per_model"] = {m.model: m.details for m in per_model}
    return out


class RagasMetric(LLMMetric):
    """Base: validate the sample, run :meth:`_score` for every judge model, combine."""

    family = "llm"  # the registry family of the ragas-style metrics

    # Statement lists and per-id verdicts are long: the ragas-style metrics ask for up to 2048 tokens.
    max_tokens: ClassVar[int | None] = 2048
    required: ClassVar[tuple[str, ...]] = ()

    def required_fields(self, sample: Sample) -> tuple[str, ...]:
        return self.required

    def validate(self, sample: Sample | Any) -> Sample:
        """The sample as a :class:`Sample`; ValueError naming the fields this metric needs and lacks."""
        sample = as_sample(sample)
        sample.require(self.required_fields(sample), self.result_name())
        return sample

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        raise NotImplementedError

    async def run(self, sample: Sample, client: LLMClient, config: JudgeConfig) -> EvaluationResult:
        name = self.result_name()

        async def one(model: str) -> ModelScore:
            judge = RagasJudge(client, config, self.call_params(config), model, name)
            try:
                return await self._score(judge, sample)
            except (LLMOutputError, LLMTransientError) as exc:
                return judge.failed(exc)

        result = await evaluate_with_models(name, config.judge_models(), one, config.aggregate)
        result.details = _merge_details(result.model_scores)
        return result

    def item_details(self, result: EvaluationResult) -> dict[str, Any]:
        return {k: v for k, v in result.details.items() if k != "per_model"}
