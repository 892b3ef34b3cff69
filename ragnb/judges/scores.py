"""The direct LLM judge scores for Tier 2/3 (see docs/metrics.md, LLM judge).

Each score is an :class:`~ragnb.judges.base.LLMMetric` like every other LLM-judged metric
(:data:`SCORES`: :class:`JudgeFaithfulness`, :class:`AnswerRelevance`, :class:`AnswerCorrectness`,
:class:`E2EScore`), on the same :class:`~ragnb.judges.sample.Sample`; :class:`Judge` binds a client and a
config for the tiers and adds the pairwise judge. Typical use::

    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.judges import JudgeConfig
    from ragnb.judges.agreement import agreement
    from ragnb.judges.scores import Judge, JudgeFaithfulness

    client = LLMClient(LLMSettings.from_env())
    config = JudgeConfig(models=["openai/gpt-4o-mini", "google/gemini-2.5-flash"], aggregate="mean",
                         mode="direct", language="ru")
    r = JudgeFaithfulness().evaluate_sync({"user_input": q, "response": a, "retrieved_contexts": [c]},
                                          client, config)
    items, summary = JudgeFaithfulness().evaluate_dataset(samples, client, config)  # frame + CIs
    judge = Judge(client, config)
    r = judge.sync.judge_faithfulness(question, answer, context)   # the same score, from its own arguments
    r = await judge.judge_faithfulness(question, answer, context)  # from async code
    r.score, r.explanation, [(m.model, m.score) for m in r.model_scores]
    results = judge.sync.evaluate_many("faithfulness", rows)    # rows: mappings with question/answer/context
    agreement(results)                                           # how much the judge models agree

Every method returns an :class:`~ragnb.llm.result.EvaluationResult` (``method="llm"``) with one
:class:`~ragnb.llm.result.ModelScore` per judge model. ``judge.sync.x(...)`` is ``run_sync(judge.x(...))``.

=========================  =====  =====================================  =============================
method                     scale  inputs                                 chat calls per sample
=========================  =====  =====================================  =============================
``judge_faithfulness``     0–1    question, answer, context              M
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

**Pairwise** (A/B/Tie, with the answers' positions swapped): rules in :mod:`ragnb.judges.pairwise`.

**Registry.** The four score objects are registered (kind "llm", family "judge",
:func:`~ragnb.judges.base.register_metric`) as ``judge_faithfulness`` — apart from the ragas-style
statement ratio ``faithfulness`` — ``answer_relevance``, ``answer_correctness`` and ``e2e_score``. Their
results keep the judged aspect as ``EvaluationResult.metric`` (``faithfulness``, …: the key of Tier 2/3
records and of the usage ledger's ``judge.<aspect>``).

**Per-call data.** ``ModelScore.calls`` = HTTP requests sent (re-asks and retries included, 0 when
answered from the cache); ``details["reasks"]`` = re-asks needed; ``details["calls"]`` = one entry per chat
call (latency, cached, attempts, tokens) — the input of :func:`ragnb.judges.reliability.judge_latency`.

**Agreement and Tier Judge**: :mod:`ragnb.judges.agreement` (how much the judge models agree,
Krippendorff's α) and :mod:`ragnb.judges.reliability` (consistency, error rate, latency).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ragnb.llm.client import LLMClient
from ragnb.judges.base import LLMMetric, register_metric, warn_deprecated
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.pairwise import VERDICTS, judge_pairwise
from ragnb.judges.reading import as_text, call_log, text_field
from ragnb.judges.sample import as_sample
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
# Prompts and results shared by the scores and the pairwise judge
# --------------------------------------------------------------------------------------------


def _snippet(name: str, config: JudgeConfig) -> str:
    return render(load_prompt(name, config.language)).strip()


def judge_messages(metric: str, config: JudgeConfig, **inputs: Any) -> list[dict[str, str]]:
    """The chat messages sent for ``metric`` (one of :data:`METRICS`). Inputs: those of :data:`_INPUTS`
    (strings; ``context`` already rendered); pairwise: question, answer_a, answer_b, reference (optional)."""
    lang = config.language
    needs = ("question", "answer_a", "answer_b") if metric == "pairwise" else _INPUTS.get(metric)
    if needs is None:
        raise ValueError(f"metric {metric!r}: use one of {METRICS}")
    missing = [k for k in needs if not isinstance(inputs.get(k), str)]
    if missing:
        raise ValueError(f"{metric} needs the strings {list(needs)}; missing or not a string: {missing}")
    system = {"role": "system", "content": _snippet("judge_system", config)}
    if metric == "pairwise":
        reference = inputs.get("reference")
        has_ref = isinstance(reference, str) and reference.strip() != ""
        user = render(
            load_prompt("judge_pairwise", lang),
            question=inputs["question"], answer_a=inputs["answer_a"], answer_b=inputs["answer_b"],
            reference_hint=_snippet("judge_pairwise_reference_hint", config) if has_ref else "",
            reference_block=("\n" + render(load_prompt("judge_pairwise_reference", lang),
                                           reference=reference).strip() + "\n") if has_ref else "",
            output_format=_snippet(f"judge_pairwise_format_{config.mode}", config),
        )
    else:
        values = {k: inputs[k] for k in _INPUTS[metric]}
        user = render(load_prompt(f"judge_{metric}", lang), **values,
                      output_format=_snippet(f"judge_format_{config.mode}", config))
    return [system, {"role": "user", "content": user}]


def result_details(metric: str, config: JudgeConfig) -> dict[str, Any]:
    """The settings a direct judge result carries in ``details``: mode, language, aggregate, scale."""
    scale = SCALES.get(metric)
    return {"mode": config.mode, "language": config.language,
            "aggregate": "majority (pairwise rule)" if metric == "pairwise" else config.aggregate,
            "scale": [scale.low, scale.high] if scale else list(VERDICTS)}


def undefined_result(metric: str, config: JudgeConfig, blank: list[str]) -> EvaluationResult:
    """A blank input: nothing to judge, no call (NaN, ``undefined``, the blank inputs named)."""
    return EvaluationResult(metric, math.nan, method="none", status="undefined",
                            reason=f"blank {', '.join(blank)}: nothing to judge", details=result_details(metric, config))


async def ask_judge(client: LLMClient, config: JudgeConfig, metric: str, messages: list[dict], model: str,
                    parse: Any) -> tuple[Any, list[ChatResult]]:
    """One judge model's chat call for ``metric`` (usage label ``judge.<metric>``), re-asked by the client."""
    return await client.chat_json(messages, model=model, parse=parse, metric=f"judge.{metric}",
                                  **config.call_params())


def judge_inputs(metric: str, **raw: Any) -> dict[str, str]:
    """The prompt inputs of ``metric`` from its raw values: strings (the context also a list of passages,
    numbered); ValueError naming an input of another type."""
    return {k: as_text(raw[k], k, allow_list=(k == "context")) for k in _INPUTS[metric]}


# --------------------------------------------------------------------------------------------
# The direct scores as LLM metrics
# --------------------------------------------------------------------------------------------

# The Sample field behind each prompt input.
_FIELD = {"question": "user_input", "answer": "response", "context": "retrieved_contexts", "reference": "reference"}


class JudgeScore(LLMMetric):
    """A direct judge score: each judge model gives one verdict ``s_m`` on ``scale``; s = agg_m s_m.
    Subclasses set ``name`` (registered), ``aspect`` (the prompt ``judge_<aspect>``, the result's ``metric``
    and the usage label ``judge.<aspect>``, as Tier 2/3 record it), ``value_range`` and the formula."""

    family = "judge"
    aspect: ClassVar[str]

    def validate(self, sample: Any) -> dict[str, str]:
        """The prompt inputs from a :class:`~ragnb.judges.sample.Sample` (mapping, object): the fields
        this score reads must be present (None is a ValueError); a blank one is judged ``undefined``."""
        s = as_sample(sample)
        fields = [_FIELD[k] for k in _INPUTS[self.aspect]]
        missing = [f for f in fields if getattr(s, f) is None]
        if missing:
            raise ValueError(f"{self.name} needs {', '.join(missing)}, which the sample does not have; set "
                             f"{' and '.join(f'Sample({f}=...)' for f in missing)}")
        contexts = s.retrieved_contexts
        return judge_inputs(self.aspect, question=s.user_input, answer=s.response, reference=s.reference,
                            context=list(contexts) if contexts is not None else None)

    async def run(self, inputs: dict[str, str], client: LLMClient, config: JudgeConfig) -> EvaluationResult:
        aspect = self.aspect
        blank = [k for k, v in inputs.items() if not v.strip()]
        if blank:
            return undefined_result(aspect, config, blank)
        messages = judge_messages(aspect, config, **inputs)
        parse = score_parser(SCALES[aspect], config.mode)

        async def score_one(model: str) -> ModelScore:
            try:
                (score, explanation, reasoning), results = await ask_judge(client, config, aspect, messages, model,
                                                                           parse)
            except LLMOutputError as exc:
                return ModelScore(model, math.nan, status="failed",
                                  reason=f"no valid verdict in {len(exc.results)} replies: {exc.reason}",
                                  calls=sum(r.attempts for r in exc.results),
                                  details={"reasks": len(exc.results) - 1, "calls": call_log(exc.results)})
            details: dict[str, Any] = {"reasks": len(results) - 1, "calls": call_log(results)}
            if reasoning:
                details["reasoning"] = reasoning
            return ModelScore(model, score, explanation, calls=sum(r.attempts for r in results), details=details)

        result = await evaluate_with_models(aspect, config.judge_models(), score_one, config.aggregate)
        result.details.update(result_details(aspect, config))
        return result

    def item_details(self, result: EvaluationResult) -> dict[str, Any]:
        return {"llm_requests": sum(m.calls for m in result.model_scores)}


class JudgeFaithfulness(JudgeScore):
    """Direct judge faithfulness: s = agg_m s_m, s_m ∈ [0, 1] the score judge model m gives the answer
    (``response``) against the context (``retrieved_contexts``, numbered passages) for the question
    (``user_input``): 0 unsupported, 0.5 partly, 1 fully supported; agg = mean | median | majority over the
    models. Graded by the 0.9 / 0.7 thresholds (see docs/metrics.md, Faithfulness). Blank input → NaN (no
    call). Calls: M (judge models)."""

    name = "judge_faithfulness"
    aliases = ("faithfulness_llm",)
    aspect = "faithfulness"


class AnswerRelevance(JudgeScore):
    """Answer relevance: s = agg_m s_m, s_m ∈ [0, 1] how well judge model m finds the answer (``response``)
    addresses the question (``user_input``): 0 off-topic, 1 fully relevant. Blank input → NaN (no call).
    Calls: M."""

    name = aspect = "answer_relevance"


class AnswerCorrectness(JudgeScore):
    """Answer correctness: s = agg_m s_m, s_m ∈ {1, 2, 3, 4, 5} judge model m's grade of the answer
    (``response``) against the ``reference`` (1 wrong … 5 fully correct); the mean over models may fall
    between grades. Blank input → NaN (no call). Calls: M."""

    name = aspect = "answer_correctness"
    value_range = (1.0, 5.0)


class E2EScore(JudgeScore):
    """End-to-end score: s = agg_m s_m, s_m ∈ [0, 1] judge model m's overall verdict on the answer
    (``response``) to the question (``user_input``) given the ``reference``. Graded by the 0.8 / 0.6
    thresholds. Blank input → NaN (no call). Calls: M."""

    name = aspect = "e2e_score"


# aspect → the registered metric object
SCORES: dict[str, JudgeScore] = {m.aspect: m for m in (JudgeFaithfulness(), AnswerRelevance(), AnswerCorrectness(),
                                                      E2EScore())}
for _metric in SCORES.values():
    register_metric(_metric)


# --------------------------------------------------------------------------------------------
# The judge: a convenience over the score objects
# --------------------------------------------------------------------------------------------


class Judge:
    """An :class:`~ragnb.llm.client.LLMClient` and a :class:`JudgeConfig` bound together: one method per
    direct score (``judge.judge_faithfulness(question, answer, context)`` = ``SCORES["faithfulness"]`` evaluated
    on those inputs), the pairwise judge, and :meth:`evaluate_many`; see the module docstring."""

    def __init__(self, client: LLMClient, config: JudgeConfig) -> None:
        if not isinstance(client, LLMClient):
            raise ValueError("client must be an LLMClient, e.g. LLMClient(LLMSettings.from_env())")
        if not isinstance(config, JudgeConfig):
            raise ValueError("config must be a JudgeConfig, e.g. JudgeConfig(models=['openai/gpt-4o-mini'])")
        self.client = client
        self.config = config
        self.models = config.judge_models()
        self.sync = SyncView(self)  # judge.sync.answer_relevance(...) = run_sync(judge.answer_relevance(...))

    def __repr__(self) -> str:
        c = self.config
        return (f"Judge(models={self.models}, aggregate={c.aggregate!r}, mode={c.mode!r}, language={c.language!r}, "
                f"client={self.client!r})")

    def messages(self, metric: str, **inputs: Any) -> list[dict[str, str]]:
        """:func:`judge_messages` with this judge's config, e.g. to show the prompt in a report."""
        return judge_messages(metric, self.config, **inputs)

    def result_details(self, metric: str) -> dict[str, Any]:
        return result_details(metric, self.config)

    def undefined(self, metric: str, blank: list[str]) -> EvaluationResult:
        return undefined_result(metric, self.config, blank)

    async def ask(self, metric: str, messages: list[dict], model: str, parse) -> tuple[Any, list[ChatResult]]:
        return await ask_judge(self.client, self.config, metric, messages, model, parse)

    async def _scored(self, aspect: str, **raw: Any) -> EvaluationResult:
        return await SCORES[aspect].run(judge_inputs(aspect, **raw), self.client, self.config)

    async def judge_faithfulness(self, question: str, answer: str, context: str | Sequence[str]) -> EvaluationResult:
        """Faithfulness of ``answer`` to ``context`` (a string or a list of passages) as the judge scores it
        directly, 0–1: the registered ``judge_faithfulness`` (``faithfulness`` is the ragas-style statement
        ratio)."""
        return await self._scored("faithfulness", question=question, answer=answer, context=context)

    async def faithfulness(self, question: str, answer: str, context: str | Sequence[str]) -> EvaluationResult:
        """Deprecated: :meth:`judge_faithfulness`. The metric named ``faithfulness`` is the ragas-style statement
        ratio (``get_llm_metric("faithfulness")``); this method always was the direct score ``judge_faithfulness``."""
        warn_deprecated("Judge.faithfulness", "Judge.judge_faithfulness (the direct score; the metric "
                                              "'faithfulness' is the ragas-style statement ratio)")
        return await self.judge_faithfulness(question, answer, context)

    async def answer_relevance(self, question: str, answer: str) -> EvaluationResult:
        """How fully ``answer`` addresses ``question``, 0–1."""
        return await self._scored("answer_relevance", question=question, answer=answer)

    async def answer_correctness(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """Correctness of ``answer`` against the ``reference`` answer, integer 1–5."""
        return await self._scored("answer_correctness", question=question, answer=answer, reference=reference)

    async def e2e_score(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """End-to-end usefulness of ``answer`` given the ``reference`` answer, 0–1."""
        return await self._scored("e2e_score", question=question, answer=answer, reference=reference)

    async def pairwise(self, question: str, answer_a: str, answer_b: str,
                       reference: str | None = None) -> EvaluationResult:
        """Which answer is better: verdict "A" | "B" | "Tie" (rules in :mod:`ragnb.judges.pairwise`).
        ``result.details["verdict"]`` holds the verdict; ``score`` = 1.0 / 0.5 / 0.0 for A / Tie / B."""
        return await judge_pairwise(self, question, answer_a, answer_b, reference)

    async def evaluate_many(self, metric: str, samples: Iterable[Mapping[str, Any]]) -> list[EvaluationResult]:
        """Judge every sample (a mapping holding the method's inputs; other keys are ignored) concurrently,
        within the client's ``max_concurrency``; results in the order of ``samples``. For a per-item frame
        and a summary with CIs use ``SCORES[metric].evaluate_dataset(samples, client, config)``."""
        if metric not in METRICS and metric != "judge_faithfulness":
            raise ValueError(f"metric {metric!r}: use one of {METRICS} (faithfulness also as judge_faithfulness)")
        # "faithfulness" here is the judged aspect (the key of the results and of Tier 2/3 records)
        method = getattr(self, "judge_faithfulness" if metric == "faithfulness" else metric)
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
