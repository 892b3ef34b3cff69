"""NVIDIA-style 0–2 judge metrics: ContextRelevance, ResponseGroundedness, AnswerAccuracy.

Typical use::

    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.judges import JudgeConfig, nvidia

    client = LLMClient(LLMSettings.from_env())
    cfg = JudgeConfig(models=["openai/gpt-4o-mini", "google/gemini-2.5-flash"], language="ru")
    metric = nvidia.AnswerAccuracy(use_dual_judge=True)
    r = metric.evaluate_sync({"user_input": q, "response": a, "reference": ref}, client, cfg)
    r.score, r.explanation, [(m.model, m.score) for m in r.model_scores]
    items, summary = metric.evaluate_dataset(samples, client, cfg)   # (per-item DataFrame, summary)

Temperature 0.1 unless the JudgeConfig sets one (:class:`~ragnb.judges.nvidia.common.NvidiaMetric`).

Every judge rating is an integer 0, 1 or 2, normalised to r / 2 ∈ {0, 0.5, 1}. Per judge model:

* **nv_context_relevance** (``user_input``, ``retrieved_contexts``): every context is rated on its own
  against the question; score = (1/C) Σ_i r_i / 2. No contexts → 0.0 without a call (as originally defined: the average
  of nothing is 0).
* **nv_response_groundedness** (``response``, ``retrieved_contexts``): one rating of the response against
  the contexts joined with a blank line; score = r / 2. With ``use_heuristic_shortcuts`` (default):
  blank response → 0.0; the response (stripped) occurs verbatim in a context → 1.0; (as in
  NVIDIA's original), no non-blank context → 0.0. Shortcuts make no LLM call and have
  ``method="heuristic"``.
* **nv_answer_accuracy** (``response``, ``reference``, optional ``user_input``): score = r / 2 from one
  template. With ``use_dual_judge`` and ``dual_judge_mode="swap_average"`` (default; NVIDIA's procedure):
  a second template shows the reference first and the response second, worded from the reference's side;
  score = (r₁/2 + r₂/2) / 2, e.g. ratings 2 and 1 → (1.0 + 0.5) / 2 = 0.75. ``dual_judge_mode="confirm"``
  is the literal variant of the original description: the second call sees the first rating and may correct it;
  score = r_confirmed / 2.

Over judge models the per-model scores combine with ``aggregate`` = mean | median | majority
(:func:`ragnb.llm.result.combine`; failed models are listed, not averaged in).

LLM chat calls per sample (M = judge models, C = retrieved contexts):

==============================  ==========================================================
``nv_context_relevance``        M × C  (0 when C = 0 or the question is blank)
``nv_response_groundedness``    M      (0 when a heuristic shortcut applies)
``nv_answer_accuracy``          M; 2 × M with ``use_dual_judge`` (0 when the reference is blank)
==============================  ==========================================================

Each chat call may add up to ``LLMSettings.reask_budget`` re-asks (unparseable reply, rating not 0/1/2)
and HTTP retries on 429/5xx; a call answered from the disk cache sends no request. A rating that stays
unusable makes that model ``failed`` (NaN + reason) — never 0. A model's score needs *all* its ratings
(every context; both dual-judge templates): averaging the rest would let a failure change the denominator.
A blank required text (question for relevance, reference for accuracy) gives an ``undefined`` result
(NaN, ``method="none"``); a missing field or a wrong type is a ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ragnb.llm.client import LLMClient
from ragnb.judges import base
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.nvidia.common import (
    ANSWER_ACCURACY,
    CONTEXT_RELEVANCE,
    DUAL_JUDGE_MODES,
    RESPONSE_GROUNDEDNESS,
    TEXT,
    NvidiaMetric,
    Rater,
    Rating,
    model_score,
    parse_rating,
    rate_all,
    sample_fields,
    shortcut,
    undefined,
)
from ragnb.llm.result import EvaluationResult, ModelScore

# --------------------------------------------------------------------------------------------
# Formulas
# --------------------------------------------------------------------------------------------


def context_relevance_score(ratings: Sequence[int]) -> float:
    """ContextRelevance of one judge model = (1/C) Σ_i r_i / 2, r_i ∈ {0, 1, 2} the rating of context i
    against the question (0 irrelevant, 1 partially, 2 fully relevant). No contexts → 0.0."""
    return sum(r / 2 for r in ratings) / len(ratings) if ratings else 0.0


def response_groundedness_score(rating: int) -> float:
    """ResponseGroundedness of one judge model = r / 2, r ∈ {0, 1, 2} the rating of the response against
    the contexts (0 not grounded, 1 partially, 2 fully)."""
    return rating / 2


def answer_accuracy_score(rating: int, swapped_rating: int | None = None) -> float:
    """AnswerAccuracy of one judge model = r / 2 (0 wrong, 1 partially right, 2 fully right); with the
    swapped template's rating r₂ (dual judge): (r/2 + r₂/2) / 2, e.g. 2 and 1 → 0.75."""
    if swapped_rating is None:
        return rating / 2
    return (rating / 2 + swapped_rating / 2) / 2


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


class ContextRelevance(NvidiaMetric):
    """Relevance of the retrieved contexts to the question, 0–1.

    Per judge model m: every context c_i (i = 1..C) is rated r_i ∈ {0, 1, 2} against the question;
    score_m = :func:`context_relevance_score`. No contexts → 0.0 (no call). Aggregate over models by
    ``config.aggregate``. Calls: M × C. ``sample``: mapping or object with ``user_input`` and
    ``retrieved_contexts``.
    """

    name = CONTEXT_RELEVANCE

    def validate(self, sample: Any) -> dict[str, Any]:
        return sample_fields(sample, self.name, ("user_input", "retrieved_contexts"))

    def without_call(self, inp: dict[str, Any], config: JudgeConfig, t0: float) -> EvaluationResult | None:
        if not inp["user_input"].strip():
            return undefined(self.name, "user_input", t0)
        if not inp["contexts"]:
            return shortcut(self.name, 0.0, "no_contexts", config.language, t0)
        return None

    def result_details(self, inp: dict[str, Any]) -> dict[str, Any]:
        return {"n_contexts": len(inp["contexts"])}

    async def score_model(self, rate: Rater, inp: dict[str, Any], config: JudgeConfig) -> ModelScore:
        contexts = inp["contexts"]
        calls = [rate("nvidia_context_relevance", user_input=inp["user_input"], context=c) for c in contexts]
        ratings, requests, reason = await rate_all(calls, [f"context {i + 1}" for i in range(len(contexts))])
        if reason:
            return model_score(rate.model, math.nan, "", ratings, requests, reason)
        score = context_relevance_score([r.rating for r in ratings])
        explanation = "\n".join(f"[{i + 1}] {r.rating}/2: {r.explanation}" for i, r in enumerate(ratings))
        return model_score(rate.model, score, explanation, ratings, requests, "")


def contains_exact_response(contexts: Sequence[str], response: str) -> bool:
    """``contextContainsExactResponse``: the stripped, non-blank response is a substring of a context."""
    needle = response.strip()
    return bool(needle) and any(needle in c for c in contexts)


class ResponseGroundedness(NvidiaMetric):
    """Is the response supported by the retrieved contexts? 0–1.

    Per judge model: one rating r ∈ {0, 1, 2} of the response against the contexts joined by "\\n\\n";
    score = :func:`response_groundedness_score`. With ``use_heuristic_shortcuts`` (default): blank
    response → 0.0, response verbatim inside a context → 1.0, no non-blank context → 0.0, each without a
    call (``method="heuristic"``). Calls: M, or 0 on a shortcut.
    """

    name = RESPONSE_GROUNDEDNESS

    def __init__(self, use_heuristic_shortcuts: bool = True) -> None:
        if not isinstance(use_heuristic_shortcuts, bool):
            raise ValueError(f"use_heuristic_shortcuts={use_heuristic_shortcuts!r} must be True or False")
        self.use_heuristic_shortcuts = use_heuristic_shortcuts

    def options(self) -> dict[str, Any]:
        return {"use_heuristic_shortcuts": self.use_heuristic_shortcuts}

    def validate(self, sample: Any) -> dict[str, Any]:
        return sample_fields(sample, self.name, ("response", "retrieved_contexts"))

    def without_call(self, inp: dict[str, Any], config: JudgeConfig, t0: float) -> EvaluationResult | None:
        response, contexts = inp["response"], inp["contexts"]
        if not self.use_heuristic_shortcuts:
            return None
        if not response.strip():
            return shortcut(self.name, 0.0, "empty_response", config.language, t0)
        if contains_exact_response(contexts, response):
            return shortcut(self.name, 1.0, "response_in_context", config.language, t0)
        if not any(c.strip() for c in contexts):
            return shortcut(self.name, 0.0, "no_grounding", config.language, t0)
        return None

    def result_details(self, inp: dict[str, Any]) -> dict[str, Any]:
        return {"n_contexts": len(inp["contexts"])}

    async def score_model(self, rate: Rater, inp: dict[str, Any], config: JudgeConfig) -> ModelScore:
        call = rate("nvidia_response_groundedness", response=inp["response"], context="\n\n".join(inp["contexts"]))
        [rating], requests, reason = await rate_all([call], ["groundedness"])
        if reason:
            return model_score(rate.model, math.nan, "", [rating], requests, reason)
        return model_score(rate.model, response_groundedness_score(rating.rating), rating.explanation, [rating],
                           requests, "")


class AnswerAccuracy(NvidiaMetric):
    """Does the response match the reference answer? 0–1.

    Per judge model: r ∈ {0, 1, 2}; score = :func:`answer_accuracy_score`. ``use_dual_judge`` +
    "swap_average": score = (r₁/2 + r₂/2) / 2, r₂ from the template with the reference shown first;
    + "confirm": score = r₂/2, r₂ = a second call's confirmed or corrected rating of r₁. Calls: M, or 2 × M
    with the dual judge. ``user_input`` is optional (shown to the judge when given).
    """

    name = ANSWER_ACCURACY

    def __init__(self, use_dual_judge: bool = False, dual_judge_mode: str = "swap_average") -> None:
        if not isinstance(use_dual_judge, bool):
            raise ValueError(f"use_dual_judge={use_dual_judge!r} must be True or False")
        if dual_judge_mode not in DUAL_JUDGE_MODES:
            raise ValueError(f"dual_judge_mode={dual_judge_mode!r}: use one of {DUAL_JUDGE_MODES}")
        self.use_dual_judge, self.dual_judge_mode = use_dual_judge, dual_judge_mode

    def options(self) -> dict[str, Any]:
        return {"use_dual_judge": self.use_dual_judge, "dual_judge_mode": self.dual_judge_mode}

    @property
    def mode(self) -> str:
        return self.dual_judge_mode if self.use_dual_judge else "single"

    def validate(self, sample: Any) -> dict[str, Any]:
        return sample_fields(sample, self.name, ("response", "reference"), optional=("user_input",))

    def without_call(self, inp: dict[str, Any], config: JudgeConfig, t0: float) -> EvaluationResult | None:
        return undefined(self.name, "reference", t0) if not inp["reference"].strip() else None

    def result_details(self, inp: dict[str, Any]) -> dict[str, Any]:
        return {"mode": self.mode}

    async def score_model(self, rate: Rater, inp: dict[str, Any], config: JudgeConfig) -> ModelScore:
        question = inp["user_input"] if inp["user_input"].strip() else TEXT[config.language]["no_question"]
        values = {"user_input": question, "response": inp["response"], "reference": inp["reference"]}
        mode, model = self.mode, rate.model

        def ask(template: str, **extra: object) -> Awaitable[Rating]:
            return rate(template, **values, **extra)

        if mode == "single":
            [r], requests, reason = await rate_all([ask("nvidia_answer_accuracy")], ["template 1"])
            score = math.nan if reason else answer_accuracy_score(r.rating)
            return model_score(model, score, "" if reason else r.explanation, [r], requests, reason, mode=mode)
        if mode == "swap_average":
            ratings, requests, reason = await rate_all(
                [ask("nvidia_answer_accuracy"), ask("nvidia_answer_accuracy_swapped")],
                ["template 1", "template 2 (swapped)"])
            if reason:
                return model_score(model, math.nan, "", ratings, requests, reason, mode=mode)
            r1, r2 = ratings
            explanation = f"[1] {r1.rating}/2: {r1.explanation}\n[2] {r2.rating}/2: {r2.explanation}"
            return model_score(model, answer_accuracy_score(r1.rating, r2.rating), explanation, ratings, requests,
                               "", mode=mode)
        # confirm: the second judge sees the first rating and may correct it
        [first], requests, reason = await rate_all([ask("nvidia_answer_accuracy")], ["first rating"])
        if reason:
            return model_score(model, math.nan, "", [first, None], requests, reason, mode=mode)
        [second], more, reason = await rate_all(
            [ask("nvidia_answer_accuracy_confirm", initial_rating=first.rating,
                 initial_explanation=first.explanation or TEXT[config.language]["no_explanation"])],
            ["confirmation"])
        requests += more
        if reason:
            return model_score(model, math.nan, "", [first, second], requests, reason, mode=mode)
        return model_score(model, answer_accuracy_score(second.rating), second.explanation, [first, second],
                           requests, "", mode=mode, adjusted=second.rating != first.rating)


METRICS: dict[str, NvidiaMetric] = {m.name: m for m in (ContextRelevance(), ResponseGroundedness(), AnswerAccuracy())}
for _metric in METRICS.values():
    base.register_metric(_metric)


def get_metric(metric: str | NvidiaMetric, **options: Any) -> NvidiaMetric:
    """Deprecated: :func:`ragnb.judges.get_llm_metric` (every LLM-judged metric by its registered name).

    An NVIDIA-style metric object from its name and options, or the object itself (as before, for one release)."""
    base.warn_deprecated("ragnb.judges.nvidia.get_metric", "ragnb.judges.get_llm_metric(name, **options)")
    return base.pick_metric(metric, METRICS, **options)


def evaluate_dataset(metric: str | NvidiaMetric, samples: Any, client: LLMClient,
                     config: JudgeConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                     n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Deprecated: :func:`ragnb.judges.evaluate_dataset` (or ``get_llm_metric(name).evaluate_dataset``),
    which this calls for an NVIDIA-style metric given by name or object."""
    base.warn_deprecated("ragnb.judges.nvidia.evaluate_dataset", "ragnb.judges.evaluate_dataset")
    return base.pick_metric(metric, METRICS).evaluate_dataset(samples, client, config, concurrency, n_boot, seed)


__all__ = [
    "ANSWER_ACCURACY", "CONTEXT_RELEVANCE", "METRICS", "RESPONSE_GROUNDEDNESS", "AnswerAccuracy", "ContextRelevance",
    "NvidiaMetric", "ResponseGroundedness", "answer_accuracy_score", "contains_exact_response",
    "context_relevance_score", "parse_rating", "response_groundedness_score",
]
