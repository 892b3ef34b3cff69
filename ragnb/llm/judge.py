"""LLM-as-a-judge for Tier 2/3 (seed 000 §5–6) and the Tier Judge computations (seed 000 §8).

Typical use::

    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.llm.judge import Judge, JudgeConfig, agreement

    judge = Judge(LLMClient(LLMSettings.from_env()),
                  JudgeConfig(models=["openai/gpt-4o-mini", "google/gemini-2.5-flash"], aggregate="mean",
                              mode="direct", language="ru"))
    r = judge.faithfulness_sync(question, answer, context)      # from a notebook or a script
    r = await judge.faithfulness(question, answer, context)     # from async code
    r.score, r.explanation, [(m.model, m.score) for m in r.model_scores]
    results = judge.evaluate_many_sync("faithfulness", rows)    # rows: mappings with question/answer/context
    agreement(results)                                           # how much the judge models agree

Every method returns an :class:`~ragnb.llm.result.EvaluationResult` (``method="llm"``) with one
:class:`~ragnb.llm.result.ModelScore` per judge model. Any other way to run them: ``run_sync(judge.x(...))``.

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
language-independent number: any number in [0, 1] for the 0–1 metrics (seed 000 anchors 0 / 0.5 / 1, values
in between allowed), an integer 1–5 for correctness (``4.0`` is accepted, ``4.5`` is not). A numeric string
(``"0.5"``) is accepted; booleans, null, NaN and anything out of range are not. An invalid verdict is
re-asked by the client; after the budget that model's ``ModelScore`` is ``failed`` (NaN + reason) — never
0 — and the aggregate uses the other models; when every model fails the result is NaN, status ``failed``.
``language`` ("en"/"ru") only sets the language of the prompt and of the explanations.

**Aggregation over models** (``JudgeConfig.aggregate``, via :func:`~ragnb.llm.result.combine`): mean;
median; majority = the most common value, ties between values → the smaller value (the conservative
verdict). E.g. three models answering 0.5, 1.0, 0.0 → mean 0.5, median 0.5, majority 0.0.

**Pairwise** (seed 000 §8: A/B/Tie, experimental there). Per model, with ``swap_positions`` (default) the
model is asked twice, once with (A=answer_a, B=answer_b) and once with the answers swapped; the swapped
verdict is mapped back (A↔B). Same verdict both times → that verdict; different → ``"Tie"`` (the model's
preference depends on position, so it has none). Over models: the verdict most models give; a tie between
verdicts → ``"Tie"``. ``config.aggregate`` does not apply. The numeric score encodes the preference for
answer A: A = 1.0, Tie = 0.5, B = 0.0; the verdict itself is in ``result.details["verdict"]``.

**Per-call data.** ``ModelScore.calls`` = HTTP requests sent (re-asks and retries included, 0 when
answered from the cache); ``details["reasks"]`` = re-asks needed; ``details["calls"]`` = one entry per chat
call (latency, cached, attempts, tokens) — the input of :func:`judge_latency`.

**Tier Judge** (pure functions): :func:`judge_consistency`, :func:`error_rate`, :func:`judge_latency` and
:func:`judge_reliability` (per-item DataFrame + summary). For a consistency run, evaluate the same items a
second time with ``JudgeConfig(cache=False)``; with the cache on, the second pass would replay the first.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragnb.llm.client import ChatResult, LLMClient, LLMOutputError, run_sync
from ragnb.llm.prompts import LANGUAGES, load_prompt, render
from ragnb.llm.result import AGGREGATIONS, EvaluationResult, ModelScore, evaluate_with_models

MODES = ("direct", "reasoned")
VERDICTS = ("A", "B", "Tie")
VERDICT_SCORE = {"A": 1.0, "Tie": 0.5, "B": 0.0}
_SWAP = {"A": "B", "B": "A", "Tie": "Tie"}
# Binary floating point makes 0.8 - 0.3 = 0.5000000000000001; a difference "equal to δ" must count as ≤ δ.
_EPS = 1e-9


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


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass
class JudgeConfig:
    """How to judge. ``models``: judge model ids (several → per-model scores + aggregate);
    ``aggregate``: mean | median | majority (see module doc); ``mode``: direct | reasoned;
    ``language``: en | ru — language of the prompt and the explanations only, the verdict is a number;
    ``temperature``, ``max_tokens``, ``seed``: sent with every call; ``swap_positions``: pairwise asks twice
    with A/B swapped; ``cache``: use the client's disk cache (turn off for a consistency re-run)."""

    models: list[str]
    aggregate: str = "mean"
    mode: str = "direct"
    language: str = "en"
    temperature: float = 0.0
    max_tokens: int = 1000
    swap_positions: bool = True
    seed: int | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.models, str) or not isinstance(self.models, (list, tuple)) or not self.models:
            raise ValueError(f"models must be a non-empty list of judge model ids, e.g. ['openai/gpt-4o-mini']; "
                             f"got {self.models!r}")
        for i, m in enumerate(self.models):
            if not isinstance(m, str) or not m.strip():
                raise ValueError(f"models[{i}]={m!r} must be a non-empty model id string")
        dupes = sorted(m for m, c in Counter(self.models).items() if c > 1)
        if dupes:
            raise ValueError(f"models lists {dupes} more than once; each judge model must appear once "
                             "(repeat a run with cache=False to measure consistency)")
        self.models = list(self.models)
        if self.aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate={self.aggregate!r}: use one of {AGGREGATIONS}")
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: use one of {MODES}")
        if self.language not in LANGUAGES:
            raise ValueError(f"language={self.language!r}: explanations are available in {LANGUAGES}")
        if (isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float))
                or not 0 <= self.temperature <= 2):
            raise ValueError(f"temperature={self.temperature!r} must be a number in [0, 2] (0 for judging)")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens!r} must be an integer >= 1 "
                             "(reasoned mode needs room for the reasoning, e.g. 1000)")
        if not isinstance(self.swap_positions, bool):
            raise ValueError(f"swap_positions={self.swap_positions!r} must be True or False")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"seed={self.seed!r} must be an integer or None")
        if not isinstance(self.cache, bool):
            raise ValueError(f"cache={self.cache!r} must be True or False")


# --------------------------------------------------------------------------------------------
# Parsing the judge's JSON
# --------------------------------------------------------------------------------------------


def _text_field(obj: dict, key: str, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f'the key "{key}" is missing; it must hold your text')
        return ""
    if not isinstance(value, str):
        raise ValueError(f'"{key}" must be a string, got {type(value).__name__}')
    if required and not value.strip():
        raise ValueError(f'"{key}" is empty')
    return value.strip()


def score_parser(scale: Scale, mode: str):
    """``parse`` callback for :meth:`LLMClient.chat_json`: JSON → (score, explanation, reasoning).
    Raises ValueError (→ re-ask) on a wrong type, a missing key or a value outside ``scale``."""

    def parse(obj: Any) -> tuple[float, str, str]:
        if not isinstance(obj, dict):
            raise ValueError('expected one JSON object with the keys "score" and "explanation"')
        if "score" not in obj:
            raise ValueError('the key "score" is missing')
        score = scale.check(obj["score"])
        explanation = _text_field(obj, "explanation", required=False)
        reasoning = _text_field(obj, "reasoning", required=mode == "reasoned")
        return score, explanation, reasoning

    return parse


def verdict_parser(mode: str):
    """``parse`` callback for pairwise replies: JSON → (verdict "A"|"B"|"Tie", explanation, reasoning).
    The verdict is matched case-insensitively ("tie", " b "); anything else raises ValueError."""

    def parse(obj: Any) -> tuple[str, str, str]:
        if not isinstance(obj, dict):
            raise ValueError('expected one JSON object with the keys "verdict" and "explanation"')
        raw = obj.get("verdict")
        if not isinstance(raw, str):
            raise ValueError(f'"verdict" must be the string "A", "B" or "Tie", got {raw!r}')
        verdict = {v.lower(): v for v in VERDICTS}.get(raw.strip().lower())
        if verdict is None:
            raise ValueError(f'"verdict" must be exactly "A", "B" or "Tie", got {raw!r}')
        explanation = _text_field(obj, "explanation", required=False)
        reasoning = _text_field(obj, "reasoning", required=mode == "reasoned")
        return verdict, explanation, reasoning

    return parse


def _call_log(results: Sequence[ChatResult]) -> list[dict[str, Any]]:
    return [{"latency_s": r.latency_s, "cached": r.cached, "attempts": r.attempts,
             "tokens_in": r.tokens_in, "tokens_out": r.tokens_out} for r in results]


def _as_text(value: Any, name: str, *, allow_list: bool = False) -> str:
    if isinstance(value, str):
        return value
    if allow_list and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        # Numbered passages, as the RAG prompt shows them; blank passages carry nothing to check against.
        passages = [v for v in value if v.strip()]
        return "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1))
    kinds = "a string or a list of strings" if allow_list else "a string"
    raise ValueError(f"{name} must be {kinds}, got {type(value).__name__}")


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

    def __repr__(self) -> str:
        c = self.config
        return (f"Judge(models={c.models}, aggregate={c.aggregate!r}, mode={c.mode!r}, language={c.language!r}, "
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

    def _details(self, metric: str) -> dict[str, Any]:
        scale = SCALES.get(metric)
        return {"mode": self.config.mode, "language": self.config.language,
                "aggregate": "majority (pairwise rule)" if metric == "pairwise" else self.config.aggregate,
                "scale": [scale.low, scale.high] if scale else list(VERDICTS)}

    def _undefined(self, metric: str, blank: list[str]) -> EvaluationResult:
        return EvaluationResult(metric, math.nan, method="none", status="undefined",
                                reason=f"blank {', '.join(blank)}: nothing to judge", details=self._details(metric))

    async def _ask(self, metric: str, messages: list[dict], model: str, parse) -> tuple[Any, list[ChatResult]]:
        c = self.config
        return await self.client.chat_json(messages, model=model, parse=parse, metric=f"judge.{metric}",
                                           temperature=c.temperature, max_tokens=c.max_tokens, seed=c.seed,
                                           cache=c.cache)

    # -- scored metrics --------------------------------------------------------------------

    async def _scored(self, metric: str, **raw: Any) -> EvaluationResult:
        values = {k: _as_text(v, k, allow_list=(k == "context")) for k, v in raw.items()}
        blank = [k for k, v in values.items() if not v.strip()]
        if blank:
            return self._undefined(metric, blank)
        messages = self.messages(metric, **values)
        parse = score_parser(SCALES[metric], self.config.mode)

        async def score_one(model: str) -> ModelScore:
            try:
                (score, explanation, reasoning), results = await self._ask(metric, messages, model, parse)
            except LLMOutputError as exc:
                return ModelScore(model, math.nan, status="failed",
                                  reason=f"no valid verdict in {len(exc.results)} replies: {exc.reason}",
                                  calls=sum(r.attempts for r in exc.results),
                                  details={"reasks": len(exc.results) - 1, "calls": _call_log(exc.results)})
            details: dict[str, Any] = {"reasks": len(results) - 1, "calls": _call_log(results)}
            if reasoning:
                details["reasoning"] = reasoning
            return ModelScore(model, score, explanation, calls=sum(r.attempts for r in results), details=details)

        result = await evaluate_with_models(metric, self.config.models, score_one, self.config.aggregate)
        result.details.update(self._details(metric))
        return result

    async def faithfulness(self, question: str, answer: str, context: str | Sequence[str]) -> EvaluationResult:
        """Faithfulness of ``answer`` to ``context`` (a string or a list of passages), 0–1 (seed 000 §5.5.1)."""
        return await self._scored("faithfulness", question=question, answer=answer, context=context)

    async def answer_relevance(self, question: str, answer: str) -> EvaluationResult:
        """How fully ``answer`` addresses ``question``, 0–1 (seed 000 §5.5.2)."""
        return await self._scored("answer_relevance", question=question, answer=answer)

    async def answer_correctness(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """Correctness of ``answer`` against the ``reference`` answer, integer 1–5 (seed 000 §5.3)."""
        return await self._scored("answer_correctness", question=question, answer=answer, reference=reference)

    async def e2e_score(self, question: str, answer: str, reference: str) -> EvaluationResult:
        """End-to-end usefulness of ``answer`` given the ``reference`` answer, 0–1 (seed 000 §6.4.1)."""
        return await self._scored("e2e_score", question=question, answer=answer, reference=reference)

    # -- pairwise --------------------------------------------------------------------------

    async def pairwise(self, question: str, answer_a: str, answer_b: str,
                       reference: str | None = None) -> EvaluationResult:
        """Which answer is better: verdict "A" | "B" | "Tie" (rules in the module docstring).
        ``result.details["verdict"]`` holds the verdict; ``score`` = 1.0 / 0.5 / 0.0 for A / Tie / B."""
        question, answer_a, answer_b = (_as_text(v, k) for k, v in
                                        (("question", question), ("answer_a", answer_a), ("answer_b", answer_b)))
        if reference is not None:
            reference = _as_text(reference, "reference")
        blank = [k for k, v in (("question", question), ("answer_a", answer_a), ("answer_b", answer_b))
                 if not v.strip()]
        if blank:
            return self._undefined("pairwise", blank)
        orders = [("original", answer_a, answer_b)]
        if self.config.swap_positions:
            orders.append(("swapped", answer_b, answer_a))
        prompts = [(name, self.messages("pairwise", question=question, answer_a=first, answer_b=second,
                                        reference=reference)) for name, first, second in orders]
        parse = verdict_parser(self.config.mode)

        async def score_one(model: str) -> ModelScore:
            outcomes = await asyncio.gather(*(self._ask("pairwise", msgs, model, parse) for _, msgs in prompts),
                                            return_exceptions=True)
            for o in outcomes:  # transient errors go to evaluate_with_models, permanent ones stop the run
                if isinstance(o, BaseException) and not isinstance(o, LLMOutputError):
                    raise o
            calls: list[ChatResult] = []
            for o in outcomes:
                calls.extend(o.results if isinstance(o, LLMOutputError) else o[1])
            details: dict[str, Any] = {"reasks": sum(len(o.results if isinstance(o, LLMOutputError) else o[1]) - 1
                                                     for o in outcomes),
                                       "calls": _call_log(calls)}
            failed = [(name, o) for (name, _), o in zip(prompts, outcomes) if isinstance(o, LLMOutputError)]
            if failed:
                reason = "; ".join(f"{name} order: no valid verdict in {len(o.results)} replies: {o.reason}"
                                   for name, o in failed)
                return ModelScore(model, math.nan, status="failed", reason=reason,
                                  calls=sum(r.attempts for r in calls), details=details)
            per_order = {name: o[0] for (name, _), o in zip(prompts, outcomes)}
            v_orig, expl, reasoning = per_order["original"]
            verdict = v_orig
            if "swapped" in per_order:
                v_swapped = _SWAP[per_order["swapped"][0]]  # back to the original labels
                verdict = v_orig if v_orig == v_swapped else "Tie"
                details.update(verdict_original=v_orig, verdict_swapped=v_swapped,
                               position_consistent=v_orig == v_swapped,
                               explanation_swapped=per_order["swapped"][1])
                if per_order["swapped"][2]:
                    details["reasoning_swapped"] = per_order["swapped"][2]
            details["verdict"] = verdict
            if reasoning:
                details["reasoning"] = reasoning
            return ModelScore(model, VERDICT_SCORE[verdict], expl, calls=sum(r.attempts for r in calls),
                              details=details)

        merged = await evaluate_with_models("pairwise", self.config.models, score_one, "majority")
        per_model = merged.model_scores
        details = self._details("pairwise")
        ok = [m for m in per_model if m.status == "ok"]
        if not ok:
            return EvaluationResult("pairwise", math.nan, "", per_model, merged.duration_s, "llm",
                                    merged.status, merged.reason, details)
        verdict, counts = majority_verdict([m.details["verdict"] for m in ok])
        details.update(verdict=verdict, verdict_counts=counts)
        explanation = next((m.explanation for m in ok if m.details["verdict"] == verdict and m.explanation),
                           next((m.explanation for m in ok if m.explanation), ""))
        reason = "; ".join(f"{m.model} failed: {m.reason}" for m in per_model if m.status == "failed")
        return EvaluationResult("pairwise", VERDICT_SCORE[verdict], explanation, per_model, merged.duration_s,
                                "llm", "ok", reason, details)

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

    def faithfulness_sync(self, question: str, answer: str, context: str | Sequence[str]) -> EvaluationResult:
        return run_sync(self.faithfulness(question, answer, context))

    def answer_relevance_sync(self, question: str, answer: str) -> EvaluationResult:
        return run_sync(self.answer_relevance(question, answer))

    def answer_correctness_sync(self, question: str, answer: str, reference: str) -> EvaluationResult:
        return run_sync(self.answer_correctness(question, answer, reference))

    def e2e_score_sync(self, question: str, answer: str, reference: str) -> EvaluationResult:
        return run_sync(self.e2e_score(question, answer, reference))

    def pairwise_sync(self, question: str, answer_a: str, answer_b: str,
                      reference: str | None = None) -> EvaluationResult:
        return run_sync(self.pairwise(question, answer_a, answer_b, reference))

    def evaluate_many_sync(self, metric: str, samples: Iterable[Mapping[str, Any]]) -> list[EvaluationResult]:
        return run_sync(self.evaluate_many(metric, samples))


def majority_verdict(verdicts: Sequence[str]) -> tuple[str, dict[str, int]]:
    """The verdict most models gave; a tie between verdicts → "Tie". Returns (verdict, counts)."""
    counts = {v: 0 for v in VERDICTS}
    for v in verdicts:
        if v not in counts:
            raise ValueError(f"verdict {v!r}: use one of {VERDICTS}")
        counts[v] += 1
    top = max(counts.values())
    leaders = [v for v, c in counts.items() if c == top]
    return (leaders[0] if len(leaders) == 1 and top > 0 else "Tie"), counts


# --------------------------------------------------------------------------------------------
# Agreement between judge models
# --------------------------------------------------------------------------------------------


def krippendorff_alpha(units: Sequence[Sequence[float]], level: str = "interval") -> float:
    """Krippendorff's α over ``units`` (one list of values per sample, NaN = missing).

    α = 1 − D_o / D_e. Only units with at least two values ("pairable") count; n = number of their values.
        D_o = (1/n) · Σ_u [ Σ_{i≠j ∈ u} δ(v_i, v_j) / (m_u − 1) ]       (observed disagreement)
        D_e = 1/(n(n−1)) · Σ_{i≠j over all n values} δ(v_i, v_j)         (expected disagreement)
    with ordered pairs, m_u = values in unit u, δ = (a − b)² for ``level="interval"`` and [a ≠ b] for
    ``"nominal"``. α = 1: perfect agreement; 0: agreement at chance level; < 0: systematic disagreement.
    NaN when there are no pairable units or all values are equal (D_e = 0).
    """
    if level not in ("interval", "nominal"):
        raise ValueError(f"level={level!r}: use 'interval' or 'nominal'")
    pairable = []
    for u in units:
        v = np.asarray(u, dtype=float).ravel()
        v = v[~np.isnan(v)]
        if v.size >= 2:
            pairable.append(v)
    if not pairable:
        return math.nan

    def disagreement(v: np.ndarray) -> float:  # Σ over ordered pairs i≠j of δ(v_i, v_j)
        if level == "interval":
            return float(2 * v.size * np.sum(v * v) - 2 * np.sum(v) ** 2)
        _, counts = np.unique(v, return_counts=True)
        return float(v.size ** 2 - np.sum(counts ** 2))

    all_values = np.concatenate(pairable)
    n = all_values.size
    d_o = sum(disagreement(v) / (v.size - 1) for v in pairable) / n
    d_e = disagreement(all_values) / (n * (n - 1))
    if d_e <= 0:
        return math.nan
    return float(1.0 - d_o / d_e)


def _check_results(results: Any, name: str) -> list[EvaluationResult]:
    if isinstance(results, EvaluationResult) or not isinstance(results, (list, tuple)):
        raise ValueError(f"{name} must be a list of EvaluationResult (one per sample)")
    for i, r in enumerate(results):
        if not isinstance(r, EvaluationResult):
            raise ValueError(f"{name}[{i}] must be an EvaluationResult, got {type(r).__name__}")
    metrics = sorted({r.metric for r in results})
    if len(metrics) > 1:
        raise ValueError(f"{name} mixes metrics {metrics}; pass the results of one metric")
    return list(results)


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta) or delta < 0:
        raise ValueError(f"delta={delta!r} must be a finite number >= 0")
    return float(delta)


def agreement(results: list[EvaluationResult], *, delta: float = 0.5, level: str | None = None) -> dict[str, Any]:
    """How much the judge models agree over a dataset (one EvaluationResult per sample, one metric).

    Only ``ok`` model scores count; a failed model leaves a hole (never a 0).
    * ``mean_abs_diff`` = mean of |s_i − s_j| over every (sample, model pair i<j) where both scored;
      ``pairwise_mean_abs_diff`` breaks it down per model pair.
    * ``share_within_delta`` = share of the samples with ≥ 2 scores whose max − min ≤ δ (all models agree
      within δ; default δ = 0.5 as in seed 000 §8).
    * ``krippendorff_alpha`` = :func:`krippendorff_alpha` with ``level`` "interval" for scores, "nominal"
      for pairwise verdicts (default chosen from the metric). α handles missing scores and any number of
      models, which Cohen's κ (two raters) and Fleiss' κ (complete data) do not.
    """
    results = _check_results(results, "results")
    delta = _check_delta(delta)
    metric = results[0].metric if results else ""
    if level is None:
        level = "nominal" if metric == "pairwise" else "interval"
    models: list[str] = []
    for r in results:
        for m in r.model_scores:
            if m.model not in models:
                models.append(m.model)
    table = np.full((len(results), len(models)), np.nan)
    for i, r in enumerate(results):
        for m in r.model_scores:
            if m.status == "ok" and math.isfinite(m.score):
                table[i, models.index(m.model)] = m.score
    diffs: list[float] = []
    per_pair: dict[str, float] = {}
    for a in range(len(models)):
        for b in range(a + 1, len(models)):
            both = ~np.isnan(table[:, a]) & ~np.isnan(table[:, b])
            d = np.abs(table[both, a] - table[both, b])
            diffs.extend(d.tolist())
            per_pair[f"{models[a]} vs {models[b]}"] = float(d.mean()) if d.size else math.nan
    comparable = [row[~np.isnan(row)] for row in table if np.count_nonzero(~np.isnan(row)) >= 2]
    within = [float(np.ptp(v) <= delta + _EPS) for v in comparable]
    return {
        "metric": metric,
        "models": models,
        "n_samples": len(results),
        "n_comparable": len(comparable),
        "mean_abs_diff": float(np.mean(diffs)) if diffs else math.nan,
        "pairwise_mean_abs_diff": per_pair,
        "delta": delta,
        "share_within_delta": float(np.mean(within)) if within else math.nan,
        "krippendorff_alpha": krippendorff_alpha(table.tolist(), level) if len(results) else math.nan,
        "alpha_level": level,
    }


# --------------------------------------------------------------------------------------------
# Tier Judge (seed 000 §8)
# --------------------------------------------------------------------------------------------


def _scores(values: Any, name: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of scores (floats or EvaluationResult)")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, EvaluationResult):
            out.append(v.score if v.ok else math.nan)
        elif v is None:
            out.append(math.nan)
        elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise ValueError(f"{name}[{i}]={v!r} must be a number, None/NaN (failed) or an EvaluationResult")
    return np.asarray(out, dtype=float)


def judge_consistency(first: Sequence[float], second: Sequence[float], delta: float = 0.5) -> np.ndarray:
    """Per-item consistency of two judgements of the same items (seed 000 §8.4.1):

        c_q = 𝟙[|s_1(q) − s_2(q)| ≤ δ],   consistency_score = mean_q c_q,   δ = 0.5 by default

    NaN where either score is NaN/None/failed (undefined, excluded from the mean and counted). Items may be
    floats or EvaluationResults. A 1e-9 tolerance absorbs floating-point error (0.8 − 0.3 ≤ 0.5 holds).
    """
    delta = _check_delta(delta)
    s1, s2 = _scores(first, "first"), _scores(second, "second")
    if s1.size != s2.size:
        raise ValueError(f"first has {s1.size} items and second has {s2.size}; pass the same items in the same order")
    out = (np.abs(s1 - s2) <= delta + _EPS).astype(float)
    out[np.isnan(s1) | np.isnan(s2)] = np.nan
    return out


def error_rate(results: Sequence[EvaluationResult]) -> dict[str, Any]:
    """Share of failed judgements (seed 000 §8.3 ``error_rate``), with the counts behind it.

    error_rate = n_failed / n over items (status ``failed``: every judge model failed). ``undefined`` items
    (blank input, no call made) are counted apart and are not errors. Per model: ``by_model[m]`` =
    failed verdicts of m / verdicts asked of m (a model can fail while the item is saved by the others).
    ``n_reasked`` = items where some model needed a re-ask to give a valid verdict.
    """
    results = _check_results(results, "results")
    n = len(results)
    n_failed = sum(r.status == "failed" for r in results)
    n_undefined = sum(r.status == "undefined" for r in results)
    by_model: dict[str, dict[str, Any]] = {}
    for r in results:
        for m in r.model_scores:
            b = by_model.setdefault(m.model, {"n": 0, "n_failed": 0})
            b["n"] += 1
            b["n_failed"] += m.status == "failed"
    for b in by_model.values():
        b["error_rate"] = b["n_failed"] / b["n"] if b["n"] else math.nan
    return {
        "error_rate": n_failed / n if n else math.nan,
        "n": n,
        "n_ok": sum(r.status == "ok" for r in results),
        "n_failed": n_failed,
        "n_undefined": n_undefined,
        "n_reasked": sum(any(m.details.get("reasks", 0) > 0 for m in r.model_scores) for r in results),
        "by_model": by_model,
    }


def _latency_stats(ms: list[float]) -> dict[str, Any]:
    if not ms:
        return {"mean_ms": math.nan, "p50_ms": math.nan, "p95_ms": math.nan, "n_calls": 0}
    a = np.asarray(ms, dtype=float)
    return {"mean_ms": float(a.mean()), "p50_ms": float(np.percentile(a, 50)),
            "p95_ms": float(np.percentile(a, 95)), "n_calls": int(a.size)}


def judge_latency(items: Iterable[EvaluationResult | ChatResult]) -> dict[str, Any]:
    """Latency of the judge's chat calls in ms: mean, p50, p95 (numpy's linear-interpolation percentiles).

    Input: EvaluationResults (their ``ModelScore.details["calls"]``) and/or ChatResults. Latency = duration of
    the successful HTTP request (backoff waits excluded). Cache hits are excluded — they measure the disk,
    not the judge — and counted in ``n_cached_excluded``. All NaN when no call reached the endpoint.
    """
    if isinstance(items, (EvaluationResult, ChatResult)) or not isinstance(items, Iterable):
        raise ValueError("items must be a list of EvaluationResult and/or ChatResult")
    calls: list[tuple[str, float, bool]] = []
    for i, item in enumerate(items):
        if isinstance(item, ChatResult):
            calls.append((item.model, item.latency_s, item.cached))
        elif isinstance(item, EvaluationResult):
            for m in item.model_scores:
                for c in m.details.get("calls", []):
                    calls.append((m.model, float(c["latency_s"]), bool(c["cached"])))
        else:
            raise ValueError(f"items[{i}] must be an EvaluationResult or a ChatResult, got {type(item).__name__}")
    timed = [(model, s * 1000.0) for model, s, cached in calls if not cached]
    out = _latency_stats([ms for _, ms in timed])
    out["n_cached_excluded"] = sum(cached for _, _, cached in calls)
    out["by_model"] = {model: _latency_stats([ms for m2, ms in timed if m2 == model])
                       for model in dict.fromkeys(m for m, _ in timed)}
    out["note"] = "per chat call; cache hits excluded"
    return out


def _fresh_latency_ms(r: EvaluationResult) -> float:
    calls = [c for m in r.model_scores for c in m.details.get("calls", []) if not c["cached"]]
    return sum(c["latency_s"] for c in calls) * 1000.0 if calls else math.nan


def judge_reliability(first: list[EvaluationResult], second: list[EvaluationResult],
                      delta: float = 0.5) -> tuple[Any, dict[str, Any]]:
    """Tier Judge over two judgements of the same items (same order): per-item DataFrame + summary.

    Per item: score_1, score_2, abs_diff, consistent (:func:`judge_consistency`), status_1/2, latency_ms_1/2
    (sum of the item's non-cached call latencies; NaN when all were cache hits) and ``consistent[<model>]``
    per judge model. Summary (seed 000 §8.3): ``consistency_score`` and ``avg_<metric>`` (first pass) as
    :func:`ragnb.metrics.stats.aggregate` dicts (mean, ci95, n, n_valid, n_failed); ``consistency_by_model``;
    ``error_rate`` (float) with ``errors`` (counts, :func:`error_rate`) and ``avg_latency_ms`` (float) with
    ``latency`` (:func:`judge_latency`), both over all 2·n judgements.
    """
    import pandas as pd

    from ragnb.metrics.stats import aggregate

    first, second = _check_results(first, "first"), _check_results(second, "second")
    if len(first) != len(second):
        raise ValueError(f"first has {len(first)} items and second has {len(second)}; judge the same items twice")
    if first and second and first[0].metric != second[0].metric:
        raise ValueError(f"first is {first[0].metric!r} and second is {second[0].metric!r}; compare one metric")
    metric = first[0].metric if first else "score"
    consistent = judge_consistency(first, second, delta)
    frame = pd.DataFrame({
        "item": range(len(first)),
        "score_1": [r.score for r in first],
        "score_2": [r.score for r in second],
    })
    frame["abs_diff"] = (frame["score_1"] - frame["score_2"]).abs()
    frame["consistent"] = consistent
    frame["status_1"] = [r.status for r in first]
    frame["status_2"] = [r.status for r in second]
    frame["latency_ms_1"] = [_fresh_latency_ms(r) for r in first]
    frame["latency_ms_2"] = [_fresh_latency_ms(r) for r in second]
    models = list(dict.fromkeys(m.model for r in first + second for m in r.model_scores))
    by_model = {}
    for model in models:
        def pick(r: EvaluationResult) -> float:
            m = next((m for m in r.model_scores if m.model == model), None)
            return m.score if m is not None and m.status == "ok" else math.nan

        col = judge_consistency([pick(r) for r in first], [pick(r) for r in second], delta)
        frame[f"consistent[{model}]"] = col
        by_model[model] = aggregate(col)
    errors = error_rate(list(first) + list(second))
    latency = judge_latency(list(first) + list(second))
    summary = {
        "consistency_score": aggregate(consistent),
        f"avg_{metric}": aggregate(frame["score_1"].to_numpy(dtype=float)),
        "error_rate": errors["error_rate"],
        "avg_latency_ms": latency["mean_ms"],
        "consistency_by_model": by_model,
        "errors": errors,
        "latency": latency,
        "delta": _check_delta(delta),
    }
    return frame, summary


__all__ = [
    "METRICS",
    "MODES",
    "SCALES",
    "VERDICTS",
    "VERDICT_SCORE",
    "Judge",
    "JudgeConfig",
    "Scale",
    "agreement",
    "error_rate",
    "judge_consistency",
    "judge_latency",
    "judge_reliability",
    "krippendorff_alpha",
    "majority_verdict",
    "score_parser",
    "verdict_parser",
]
