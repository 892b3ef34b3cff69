"""The direct LLM judge scores for Tier 2/3 (see docs/metrics.md, LLM judge).

Typical use::

    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.llm.judges import JudgeConfig
    from ragnb.llm.judges.agreement import agreement
    from ragnb.llm.judges.scores import Judge

    judge = Judge(LLMClient(LLMSettings.from_env()),
                  JudgeConfig(models=["openai/gpt-4o-mini", "google/gemini-2.5-flash"], aggregate="mean",
                              mode="direct", language="ru"))
    r = judge.sync.faithfulness(question, answer, context)      # from a notebook or a script
    r = await judge.faithfulness(question, answer, context)     # from async code
    r.score, r.explanation, [(m.model, m.score) for m in r.model_scores]
    results = judge.sync.evaluate_many("faithfulness", rows)    # rows: mappings with question/answer/context
    agreement(results)                                           # how much the judge models agree

Every method returns an :class:`~ragnb.llm.result.EvaluationResult` (``method="llm"``) with one
:class:`~ragnb.llm.result.ModelScore` per judge model. ``judge.sync.x(...)`` is ``run_sync(judge.x(...))``.

=========================  =====  =====================================  =============================
method                     scale  inputs                                 chat calls per sample
=========================  =====  =====================================  =============================
``faithfulness``           0–1    question, answer, context              M
``answer_relevance``       0–1    question, answer                       M
``answer_correctness``     1–5    question, answer, reference            M
``e2e_score``              0–1    question, answer, reference            M
``pairwise``               A/B/T  question, answer_a, answer_b[, ref.]   2·M (swap_positions) or M
=========================  =====  =====================================  =============================

M = number of judge models. Each chat call may add up to ``LLMSettings.reask_budget`` re-asks (default 2)
when the reply is not valid JSON or the verdict is out of range, and each request up to
``LLMSettings.max_retries`` HTTP retries on 429/5xx/timeouts; a call answered from the disk cache sends
no HTTP request. A sample with a blank required input makes no call at all: its result is ``undefined``
(NaN, ``method="none"``) with the reason — there is nothing to judge.

**Verdict format.** The model is asked for JSON: ``{"score": s, "explanation": "..."}`` in ``direct`` mode,
``{"reasoning": "...", "score": s, "explanation": "..."}`` in ``reasoned`` mode (think step by step first,
then the strict short result; the reasoning is kept in ``ModelScore.details["reasoning"]``). The score is a
language-independent number: any number in [0, 1] for the 0–1 metrics (anchors 0 / 0.5 / 1, values in between
allowed), an integer 1–5 for correctness (``4.0`` is accepted, ``4.5`` is not). A numeric string
(``"0.5"``) is accepted; booleans, null, NaN and anything out of range are not. An invalid verdict is
re-asked by the client; after the budget that model's ``ModelScore`` is ``failed`` (NaN + reason) — never
0 — and the aggregate uses the other models; when every model fails the result is NaN, status ``failed``.
``language`` ("en"/"ru") only sets the language of the prompt and of the explanations.

**Aggregation over models** (``JudgeConfig.aggregate``, via :func:`~ragnb.llm.result.combine`): mean;
median; majority = the most common value, ties between values → the smaller value (the conservative
verdict). E.g. three models answering 0.5, 1.0, 0.0 → mean 0.5, median 0.5, majority 0.0.

**Pairwise** (A/B/Tie, with the answers' positions swapped): rules in :mod:`ragnb.llm.judges.pairwise`.

**Registry.** The four scores are declared (kind "llm", family "judge") in :mod:`ragnb.metrics.declared` as
``judge_faithfulness`` — apart from the ragas-style statement ratio ``faithfulness`` — ``answer_relevance``,
``answer_correctness`` and ``e2e_score``, each pointing at its method here.

**Per-call data.** ``ModelScore.calls`` = HTTP requests sent (re-asks and retries included, 0 when
answered from the cache); ``details["reasks"]`` = re-asks needed; ``details["calls"]`` = one entry per chat
call (latency, cached, attempts, tokens) — the input of :func:`ragnb.llm.judges.reliability.judge_latency`.

**Agreement and Tier Judge**: :mod:`ragnb.llm.judges.agreement` (how much the judge models agree,
Krippendorff's α) and :mod:`ragnb.llm.judges.reliability` (consistency, error rate, latency).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragnb.llm.client import LLMClient
from ragnb.llm.judges.judge_config import JudgeConfig
from ragnb.llm.judges.pairwise import VERDICTS, judge_pairwise
from ragnb.llm.judges.reading import as_text, call_log, text_field
from ragnb.llm.prompts import load_prompt, render
from ragnb.llm.replies import ChatResult, LLMOutputError
from ragnb.llm.result import EvaluationResult, ModelScore, evaluate_with_models
from ragnb.llm.sync import SyncView


@dataclass(frozen=True)
class Scale:
    """Allowed verdict values: ``low ≤ score ≤ high``, integers only when ``integer``."""

    low: float
    high: float
    integer: bool = False

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or value is None or not isinstance(value, (int, float, str)):
            raise ValueError(f'"score" must be a JSON number, got {value!r}')
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise ValueError(f'"score" must be a JSON number, got the string {value!r}') from None
        else:
            number = float(value)
        if not math.isfinite(number):
            raise ValueError(f'"score" must be a finite number, got {value!r}')
        if not self.low <= number <= self.high:
            raise ValueError(f'"score" {number:g} is outside the scale {self.describe()}')
        if self.integer and number != int(number):
            raise ValueError(f'"score" {number:g} is not allowed: the scale is {self.describe()}')
        return number

    def describe(self) -> str:
        if self.integer:
            return "integers " + ", ".join(str(v) for v in range(int(self.low), int(self.high) + 1))
        return f"any number from {self.low:g} to {self.high:g}"


SCALES: dict[str, Scale] = {
    "faithfulness": Scale(0.0, 1.0),
    "answer_relevance": Scale(0.0, 1.0),
    "answer_correctness": Scale(1.0, 5.0, integer=True),
    "e2e_score": Scale(0.0, 1.0),
}
# Inputs of each judged metric, in the order of the method's arguments.
_INPUTS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("question", "answer", "context"),
    "answer_relevance": ("question", "answer"),
    "answer_correctness": ("question", "answer", "reference"),
    "e2e_score": ("question", "answer", "reference"),
}
METRICS = (*SCALES, "pairwise")
def score_parser(scale: Scale, mode: str):
    """``parse`` callback for :meth:`LLMClient.chat_json`: JSON → (score, explanation, reasoning).
    Raises ValueError (→ re-ask) on a wrong type, a missing key or a value outside ``scale``."""

    def parse(obj: Any) -> tuple[float, str, str]:
        if not isinstance(obj, dict):
            raise ValueError('expected one JSON object with the keys "score" and "explanation"')
        if "score" not in obj:
            raise ValueError('the key "score" is missing')
        score = scale.check(obj["score"])
        explanation = text_field(obj, "explanation", required=False)
        reasoning = text_field(obj, "reasoning", required=mode == "reasoned")
        return score, explanation, reasoning

    return parse


# --------------------------------------------------------------------------------------------
# The judge
# --------------------------------------------------------------------------------------------


class Judge:
    """LLM judge over an :class:`~ragnb.llm.client.LLMClient`; see the module docstring for the rules."""

    def __init__(self, client: LLMClient, config: JudgeConfig) -> None:
        if not isinstance(client, LLMClient):
            raise ValueError("client must be an LLMClient, e.g. LLMClient(LLMSettings.from_env())")
        if not isinstance(config, JudgeConfig):
            raise ValueError("config must be a JudgeConfig, e.g. JudgeConfig(models=['openai/gpt-4o-mini'])")
        self.client = client
        self.config = config
        self.models = config.judge_models()
        self.sync = SyncView(self)  # judge.sync.faithfulness(...) = run_sync(judge.faithfulness(...))

    def __repr__(self) -> str:
        c = self.config
        return (f"Judge(models={self.models}, aggregate={c.aggregate!r}, mode={c.mode!r}, language={c.language!r}, "
                f"client={self.client!r})")

    # -- prompts ---------------------------------------------------------------------------

    def _snippet(self, name: str) -> str:
        return render(load_prompt(name, self.config.language)).strip()

    def messages(self, metric: str, **inputs: Any) -> list[dict[str, str]]:
        """The chat messages sent for ``metric`` (one of :data:`METRICS`), e.g. to show the prompt in a
        report. Pairwise inputs: question, answer_a, answer_b, reference (optional)."""
        lang = self.config.language
        needs = ("question", "answer_a", "answer_b") if metric == "pairwise" else _INPUTS.get(metric)
        if needs is None:
            raise ValueError(f"metric {metric!r}: use one of {METRICS}")
        missing = [k for k in needs if not isinstance(inputs.get(k), str)]
        if missing:
            raise ValueError(f"{metric} needs the strings {list(needs)}; missing or not a string: {missing}")
        system = {"role": "system", "content": self._snippet("judge_system")}
        if metric == "pairwise":
            reference = inputs.get("reference")
            has_ref = isinstance(reference, str) and reference.strip() != ""
            user = render(
                load_prompt("judge_pairwise", lang),
                question=inputs["question"], answer_a=inputs["answer_a"], answer_b=inputs["answer_b"],
                reference_hint=self._snippet("judge_pairwise_reference_hint") if has_ref else "",
                reference_block=("\n" + render(load_prompt("judge_pairwise_reference", lang),
                                               reference=reference).strip() + "\n") if has_ref else "",
                output_format=self._snippet(f"judge_pairwise_format_{self.config.mode}"),
            )
        else:
            values = {k: inputs[k] for k in _INPUTS[metric]}
            user = render(load_prompt(f"judge_{metric}", lang), **values,
                          output_format=self._snippet(f"judge_format_{self.config.mode}"))
        return [system, {"role": "user", "content": user}]

    def result_details(self, metric: str) -> dict[str, Any]:
        scale = SCALES.get(metric)
        return {"mode": self.config.mode, "language": self.config.language,
                "aggregate": "majority (pairwise rule)" if metric == "pairwise" else self.config.aggregate,
                "scale": [scale.low, scale.high] if scale else list(VERDICTS)}

    def undefined(self, metric: str, blank: list[str]) -> EvaluationResult:
        return EvaluationResult(metric, math.nan, method="none", status="undefined",
                                reason=f"blank {', '.join(blank)}: nothing to judge", details=self.result_details(metric))

    async def ask(self, metric: str, messages: list[dict], model: str, parse) -> tuple[Any, list[ChatResult]]:
        return await self.client.chat_json(messages, model=model, parse=parse, metric=f"judge.{metric}",
                                           **self.config.call_params())

    # -- scored metrics --------------------------------------------------------------------

    async def _scored(self, metric: str, **raw: Any) -> EvaluationResult:
        values = {k: as_text(v, k, allow_list=(k == "context")) for k, v in raw.items()}
        blank = [k for k, v in values.items() if not v.strip()]
        if blank:
            return self.undefined(metric, blank)
        messages = self.messages(metric, **values)
        parse = score_parser(SCALES[metric], self.config.mode)

        async def score_one(model: str) -> ModelScore:
            try:
                (score, explanation, reasoning), results = await self.ask(metric, messages, model, parse)
            except LLMOutputError as exc:
                return ModelScore(model, math.nan, status="failed",
                                  reason=f"no valid verdict in {len(exc.results)} replies: {exc.reason}",
                                  calls=sum(r.attempts for r in exc.results),
                                  details={"reasks": len(exc.results) - 1, "calls": call_log(exc.results)})
            details: dict[str, Any] = {"reasks": len(results) - 1, "calls": call_log(results)}
            if reasoning:
                details["reasoning"] = reasoning
            return ModelScore(model, score, explanation, calls=sum(r.attempts for r in results), details=details)

        result = await evaluate_with_models(metric, self.models, score_one, self.config.aggregate)
        result.details.update(self.result_details(metric))
        return result

    async def faithfulness(self, question: str, answer: str, context: str | Sequence[str]) -> EvaluationResult:
        """Faithfulness of ``answer`` to ``context`` (a string or a list of passages), 0–1."""
        return await self._scored("faithfulness", question=question, answer=answer, context=context)

    async def answer_relevance(self, question: str, answer: str) -> EvaluationResult:
        """How fully ``answer`` addresses ``question``, 0–1."""
        return await self._scored("answer_relevance", question=question, answer=answer)

    async def answer_correctness(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """Correctness of ``answer`` against the ``reference`` answer, integer 1–5."""
        return await self._scored("answer_correctness", question=question, answer=answer, reference=reference)

    async def e2e_score(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """End-to-end usefulness of ``answer`` given the ``reference`` answer, 0–1."""
        return await self._scored("e2e_score", question=question, answer=answer, reference=reference)

    # -- pairwise --------------------------------------------------------------------------

    async def pairwise(self, question: str, answer_a: str, answer_b: str,
                       reference: str | None = None) -> EvaluationResult:
        """Which answer is better: verdict "A" | "B" | "Tie" (rules in :mod:`ragnb.llm.judges.pairwise`).
        ``result.details["verdict"]`` holds the verdict; ``score`` = 1.0 / 0.5 / 0.0 for A / Tie / B."""
        return await judge_pairwise(self, question, answer_a, answer_b, reference)

    # -- datasets and sync twins -----------------------------------------------------------

    async def evaluate_many(self, metric: str, samples: Iterable[Mapping[str, Any]]) -> list[EvaluationResult]:
        """Judge every sample (a mapping holding the method's inputs; other keys are ignored) concurrently,
        within the client's ``max_concurrency``. Results keep the order of ``samples``."""
        if metric not in METRICS:
            raise ValueError(f"metric {metric!r}: use one of {METRICS}")
        method = getattr(self, metric)
        params = inspect.signature(method).parameters
        calls = []
        for i, sample in enumerate(samples):
            if not isinstance(sample, Mapping):
                raise ValueError(f"samples[{i}] must be a mapping with {list(params)}, got {type(sample).__name__}")
            missing = [p for p, spec in params.items() if spec.default is inspect.Parameter.empty and p not in sample]
            if missing:
                raise ValueError(f"samples[{i}] has no {missing}; {metric} needs {list(params)}")
            calls.append(method(**{p: sample[p] for p in params if p in sample}))
        return list(await asyncio.gather(*calls))
