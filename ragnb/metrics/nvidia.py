"""NVIDIA-style 0–2 judge metrics (seed 003): ContextRelevance, ResponseGroundedness, AnswerAccuracy.

Typical use::

    from ragnb.llm import LLMClient, LLMSettings
    from ragnb.metrics import nvidia

    client = LLMClient(LLMSettings.from_env())
    cfg = nvidia.AnswerAccuracyConfig(models=["openai/gpt-4o-mini", "google/gemini-2.5-flash"],
                                      use_dual_judge=True, language="ru")
    r = nvidia.answer_accuracy_sync({"user_input": q, "response": a, "reference": ref}, client, cfg)
    r.score, r.explanation, [(m.model, m.score) for m in r.model_scores]
    items, summary = nvidia.evaluate_dataset("nv_answer_accuracy", samples, client, cfg)

Every judge rating is an integer 0, 1 or 2, normalised to r / 2 ∈ {0, 0.5, 1}. Per judge model:

* **nv_context_relevance** (``user_input``, ``retrieved_contexts``): every context is rated on its own
  against the question; score = (1/C) Σ_i r_i / 2. No contexts → 0.0 without a call (seed: the average
  of nothing is 0).
* **nv_response_groundedness** (``response``, ``retrieved_contexts``): one rating of the response against
  the contexts joined with a blank line; score = r / 2. With ``use_heuristic_shortcuts`` (default, seed):
  blank response → 0.0; the response (stripped) occurs verbatim in a context → 1.0; beyond the seed (as in
  NVIDIA's original), no non-blank context → 0.0. Shortcuts make no LLM call and have
  ``method="heuristic"``.
* **nv_answer_accuracy** (``response``, ``reference``, optional ``user_input``): score = r / 2 from one
  template. With ``use_dual_judge`` and ``dual_judge_mode="swap_average"`` (default; NVIDIA's procedure):
  a second template shows the reference first and the response second, worded from the reference's side;
  score = (r₁/2 + r₂/2) / 2, e.g. ratings 2 and 1 → (1.0 + 0.5) / 2 = 0.75. ``dual_judge_mode="confirm"``
  is seed 003's literal variant: the second call sees the first rating and may correct it;
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

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragnb.llm.client import ChatResult, LLMClient, LLMOutputError, LLMTransientError, run_sync
from ragnb.llm.prompts import LANGUAGES, prompt
from ragnb.llm.result import AGGREGATIONS, EvaluationResult, ModelScore, evaluate_with_models
from ragnb.metrics.registry import register
from ragnb.metrics.stats import aggregate

FAMILY = "nvidia"
RATINGS = (0, 1, 2)
DUAL_JUDGE_MODES = ("swap_average", "confirm")
CONTEXT_RELEVANCE = "nv_context_relevance"
RESPONSE_GROUNDEDNESS = "nv_response_groundedness"
ANSWER_ACCURACY = "nv_answer_accuracy"

# Field names follow ragas; the seed's Java names are accepted too.
_ALIASES = {
    "user_input": ("user_input", "userInput"),
    "retrieved_contexts": ("retrieved_contexts", "retrievedContexts"),
    "response": ("response",),
    "reference": ("reference",),
}

_TEXT = {
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


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaConfig:
    """Settings shared by the three metrics.

    ``models``: judge model ids (several → per-model scores + aggregate); ``aggregate``: mean | median |
    majority over models; ``language``: en | ru — language of the prompts and explanations (the rating is
    a number); ``temperature`` (seed default 0.1), ``max_tokens``, ``seed``: sent with every call;
    ``cache``: use the client's disk cache (off for a consistency re-run).
    """

    models: Sequence[str]
    aggregate: str = "mean"
    language: str = "en"
    temperature: float = 0.1
    max_tokens: int = 1000
    seed: int | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        models = self.models
        if isinstance(models, str) or not isinstance(models, (list, tuple)) or not models:
            raise ValueError(f"models must be a non-empty list of judge model ids, e.g. ['openai/gpt-4o-mini']; "
                             f"got {models!r}")
        for i, m in enumerate(models):
            if not isinstance(m, str) or not m.strip():
                raise ValueError(f"models[{i}]={m!r} must be a non-empty model id string")
        dupes = sorted(m for m, c in Counter(models).items() if c > 1)
        if dupes:
            raise ValueError(f"models lists {dupes} more than once; each judge model must appear once")
        object.__setattr__(self, "models", tuple(models))
        if self.aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate={self.aggregate!r}: use one of {AGGREGATIONS}")
        if self.language not in LANGUAGES:
            raise ValueError(f"language={self.language!r}: explanations are available in {LANGUAGES}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2:
            raise ValueError(f"temperature={t!r} must be a number in [0, 2] (seed default 0.1)")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens!r} must be an integer >= 1")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"seed={self.seed!r} must be an integer or None")
        if not isinstance(self.cache, bool):
            raise ValueError(f"cache={self.cache!r} must be True or False")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["models"] = list(self.models)
        return d


@dataclass(frozen=True)
class ContextRelevanceConfig(NvidiaConfig):
    """Config of :func:`context_relevance` (only the shared settings)."""


@dataclass(frozen=True)
class ResponseGroundednessConfig(NvidiaConfig):
    """Config of :func:`response_groundedness`; ``use_heuristic_shortcuts`` (default True, as the seed)."""

    use_heuristic_shortcuts: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.use_heuristic_shortcuts, bool):
            raise ValueError(f"use_heuristic_shortcuts={self.use_heuristic_shortcuts!r} must be True or False")


@dataclass(frozen=True)
class AnswerAccuracyConfig(NvidiaConfig):
    """Config of :func:`answer_accuracy`; ``use_dual_judge`` (default False, as the seed) and
    ``dual_judge_mode``: "swap_average" (two templates, averaged) or "confirm" (seed's confirmation pass)."""

    use_dual_judge: bool = False
    dual_judge_mode: str = "swap_average"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.use_dual_judge, bool):
            raise ValueError(f"use_dual_judge={self.use_dual_judge!r} must be True or False")
        if self.dual_judge_mode not in DUAL_JUDGE_MODES:
            raise ValueError(f"dual_judge_mode={self.dual_judge_mode!r}: use one of {DUAL_JUDGE_MODES}")


# --------------------------------------------------------------------------------------------
# Inputs and parsing
# --------------------------------------------------------------------------------------------


def _field(sample: Any, name: str) -> Any:
    for key in _ALIASES[name]:
        if isinstance(sample, Mapping):
            if key in sample:
                return sample[key]
        elif hasattr(sample, key):
            return getattr(sample, key)
    raise ValueError(f"sample has no {name!r}; this metric needs the fields "
                     "user_input / retrieved_contexts / response / reference it names")


def _text(sample: Any, name: str, *, required: bool = True) -> str:
    try:
        value = _field(sample, name)
    except ValueError:
        if required:
            raise
        return ""
    if not required and (value is None or (isinstance(value, float) and math.isnan(value))):
        return ""  # an optional text left empty (None, or NaN from a DataFrame cell)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}; pass '' for an empty text")
    return value


def _contexts(sample: Any) -> list[str]:
    value = _field(sample, "retrieved_contexts")
    if isinstance(value, str):
        raise ValueError("retrieved_contexts must be a list of strings, got a single string; wrap it: [context]")
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()  # a numpy array from a DataFrame cell
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"retrieved_contexts must be a list of strings, got {type(value).__name__}")
    bad = [i for i, c in enumerate(value) if not isinstance(c, str)]
    if bad:
        raise ValueError(f"retrieved_contexts must hold strings only; non-strings at positions {bad[:20]}")
    return list(value)


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
class _Rating:
    rating: int
    explanation: str
    results: list[ChatResult]


async def _rate(client: LLMClient, cfg: NvidiaConfig, model: str, metric: str, template: str,
                **values: object) -> _Rating:
    messages = [{"role": "user", "content": prompt(template, cfg.language, **values)}]
    (rating, explanation), results = await client.chat_json(
        messages, model=model, parse=parse_rating, metric=metric, temperature=cfg.temperature,
        max_tokens=cfg.max_tokens, seed=cfg.seed, cache=cfg.cache)
    return _Rating(rating, explanation, results)


def _requests(results: Sequence[ChatResult]) -> int:
    return sum(r.attempts for r in results)


def _failure_requests(exc: BaseException) -> int:
    if isinstance(exc, LLMOutputError):
        return _requests(exc.results)
    return int(getattr(exc, "attempts", 0) or 0)


async def _rate_all(calls: Sequence[Awaitable[_Rating]],
                    labels: Sequence[str]) -> tuple[list[_Rating | None], int, str]:
    """Run the calls concurrently; (ratings with None where a call failed, HTTP requests, failure reason).

    Output/transient failures become the reason; anything else (permanent errors, bugs) is raised after
    every call has finished, so no request is left running."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, (LLMOutputError, LLMTransientError)):
            raise o
    ratings = [o if isinstance(o, _Rating) else None for o in outcomes]
    requests = sum(_requests(o.results) if isinstance(o, _Rating) else _failure_requests(o) for o in outcomes)
    reason = "; ".join(f"{label}: {type(o).__name__}: {o}" for label, o in zip(labels, outcomes)
                       if isinstance(o, BaseException))
    return ratings, requests, reason


def _model_score(model: str, score: float, explanation: str, ratings: Sequence[_Rating | None], requests: int,
                 reason: str, **details: Any) -> ModelScore:
    info = {"ratings": [r.rating if r else None for r in ratings],
            "explanations": [r.explanation if r else None for r in ratings],
            "reasks": sum(len(r.results) - 1 for r in ratings if r), **details}
    if reason:
        return ModelScore(model, math.nan, "", status="failed", reason=reason, calls=requests, details=info)
    return ModelScore(model, score, explanation, calls=requests, details=info)


def _finish(result: EvaluationResult, **details: Any) -> EvaluationResult:
    result.details.update({"llm_requests": sum(m.calls for m in result.model_scores), **details})
    return result


def _shortcut(metric: str, score: float, key: str, cfg: NvidiaConfig, t0: float) -> EvaluationResult:
    return EvaluationResult(metric, score, _TEXT[cfg.language][key], [], time.perf_counter() - t0,
                            method="heuristic", details={"shortcut": key, "llm_requests": 0})


def _undefined(metric: str, field: str, t0: float) -> EvaluationResult:
    return EvaluationResult(metric, math.nan, "", [], time.perf_counter() - t0, method="none",
                            status="undefined", reason=f"{field} is blank: nothing to judge",
                            details={"llm_requests": 0})


def _check_config(config: Any, cls: type) -> None:
    if not isinstance(config, cls):
        raise ValueError(f"config must be a {cls.__name__}(models=[...], ...), got {type(config).__name__}")


# --------------------------------------------------------------------------------------------
# ContextRelevance
# --------------------------------------------------------------------------------------------


def _prepare_context_relevance(sample: Any) -> dict[str, Any]:
    return {"user_input": _text(sample, "user_input"), "contexts": _contexts(sample)}


async def _context_relevance(inp: dict[str, Any], client: LLMClient, cfg: ContextRelevanceConfig) -> EvaluationResult:
    t0 = time.perf_counter()
    if not inp["user_input"].strip():
        return _undefined(CONTEXT_RELEVANCE, "user_input", t0)
    contexts = inp["contexts"]
    if not contexts:
        return _shortcut(CONTEXT_RELEVANCE, 0.0, "no_contexts", cfg, t0)

    async def score_one(model: str) -> ModelScore:
        calls = [_rate(client, cfg, model, CONTEXT_RELEVANCE, "nvidia_context_relevance",
                       user_input=inp["user_input"], context=c) for c in contexts]
        ratings, requests, reason = await _rate_all(calls, [f"context {i + 1}" for i in range(len(contexts))])
        if reason:
            return _model_score(model, math.nan, "", ratings, requests, reason)
        score = sum(r.rating / 2 for r in ratings) / len(ratings)
        explanation = "\n".join(f"[{i + 1}] {r.rating}/2: {r.explanation}" for i, r in enumerate(ratings))
        return _model_score(model, score, explanation, ratings, requests, "")

    result = await evaluate_with_models(CONTEXT_RELEVANCE, list(cfg.models), score_one, cfg.aggregate)
    return _finish(result, n_contexts=len(contexts))


@register(CONTEXT_RELEVANCE, FAMILY)
async def context_relevance(sample: Any, client: LLMClient, config: ContextRelevanceConfig) -> EvaluationResult:
    """Relevance of the retrieved contexts to the question, 0–1 (seed 003 ContextRelevance).

    Per judge model m: every context c_i (i = 1..C) is rated r_i ∈ {0, 1, 2} against the question
    (0 irrelevant, 1 partially, 2 fully relevant); score_m = (1/C) Σ_i r_i / 2. No contexts → 0.0 (no call).
    Aggregate over models by ``config.aggregate``. Calls: M × C. ``sample``: mapping or object with
    ``user_input`` and ``retrieved_contexts``.
    """
    _check_config(config, ContextRelevanceConfig)
    return await _context_relevance(_prepare_context_relevance(sample), client, config)


def context_relevance_sync(sample: Any, client: LLMClient, config: ContextRelevanceConfig) -> EvaluationResult:
    """:func:`context_relevance` from synchronous code (notebooks included)."""
    return run_sync(context_relevance(sample, client, config))


# --------------------------------------------------------------------------------------------
# ResponseGroundedness
# --------------------------------------------------------------------------------------------


def _prepare_response_groundedness(sample: Any) -> dict[str, Any]:
    return {"response": _text(sample, "response"), "contexts": _contexts(sample)}


def contains_exact_response(contexts: Sequence[str], response: str) -> bool:
    """Seed's ``contextContainsExactResponse``: the stripped, non-blank response is a substring of a context."""
    needle = response.strip()
    return bool(needle) and any(needle in c for c in contexts)


async def _response_groundedness(inp: dict[str, Any], client: LLMClient,
                                 cfg: ResponseGroundednessConfig) -> EvaluationResult:
    t0 = time.perf_counter()
    response, contexts = inp["response"], inp["contexts"]
    if cfg.use_heuristic_shortcuts:
        if not response.strip():
            return _shortcut(RESPONSE_GROUNDEDNESS, 0.0, "empty_response", cfg, t0)
        if contains_exact_response(contexts, response):
            return _shortcut(RESPONSE_GROUNDEDNESS, 1.0, "response_in_context", cfg, t0)
        if not any(c.strip() for c in contexts):
            return _shortcut(RESPONSE_GROUNDEDNESS, 0.0, "no_grounding", cfg, t0)
    context = "\n\n".join(contexts)

    async def score_one(model: str) -> ModelScore:
        call = _rate(client, cfg, model, RESPONSE_GROUNDEDNESS, "nvidia_response_groundedness",
                     response=response, context=context)
        [rating], requests, reason = await _rate_all([call], ["groundedness"])
        if reason:
            return _model_score(model, math.nan, "", [rating], requests, reason)
        return _model_score(model, rating.rating / 2, rating.explanation, [rating], requests, "")

    result = await evaluate_with_models(RESPONSE_GROUNDEDNESS, list(cfg.models), score_one, cfg.aggregate)
    return _finish(result, n_contexts=len(contexts))


@register(RESPONSE_GROUNDEDNESS, FAMILY)
async def response_groundedness(sample: Any, client: LLMClient,
                                config: ResponseGroundednessConfig) -> EvaluationResult:
    """Is the response supported by the retrieved contexts? 0–1 (seed 003 ResponseGroundedness).

    Per judge model: one rating r ∈ {0, 1, 2} of the response against the contexts joined by "\\n\\n"
    (0 not grounded, 1 partially, 2 fully); score = r / 2. With ``use_heuristic_shortcuts``: blank response
    → 0.0, response verbatim inside a context → 1.0, no non-blank context → 0.0, each without a call
    (``method="heuristic"``). Calls: M, or 0 on a shortcut.
    """
    _check_config(config, ResponseGroundednessConfig)
    return await _response_groundedness(_prepare_response_groundedness(sample), client, config)


def response_groundedness_sync(sample: Any, client: LLMClient,
                               config: ResponseGroundednessConfig) -> EvaluationResult:
    """:func:`response_groundedness` from synchronous code (notebooks included)."""
    return run_sync(response_groundedness(sample, client, config))


# --------------------------------------------------------------------------------------------
# AnswerAccuracy
# --------------------------------------------------------------------------------------------


def _prepare_answer_accuracy(sample: Any) -> dict[str, Any]:
    return {"response": _text(sample, "response"), "reference": _text(sample, "reference"),
            "user_input": _text(sample, "user_input", required=False)}


async def _answer_accuracy(inp: dict[str, Any], client: LLMClient, cfg: AnswerAccuracyConfig) -> EvaluationResult:
    t0 = time.perf_counter()
    if not inp["reference"].strip():
        return _undefined(ANSWER_ACCURACY, "reference", t0)
    values = {"user_input": inp["user_input"] if inp["user_input"].strip() else _TEXT[cfg.language]["no_question"],
              "response": inp["response"], "reference": inp["reference"]}
    mode = cfg.dual_judge_mode if cfg.use_dual_judge else "single"

    async def score_one(model: str) -> ModelScore:
        def ask(template: str, **extra: object) -> Awaitable[_Rating]:
            return _rate(client, cfg, model, ANSWER_ACCURACY, template, **values, **extra)

        if mode == "single":
            [r], requests, reason = await _rate_all([ask("nvidia_answer_accuracy")], ["template 1"])
            score = math.nan if reason else r.rating / 2
            return _model_score(model, score, "" if reason else r.explanation, [r], requests, reason, mode=mode)
        if mode == "swap_average":
            ratings, requests, reason = await _rate_all(
                [ask("nvidia_answer_accuracy"), ask("nvidia_answer_accuracy_swapped")],
                ["template 1", "template 2 (swapped)"])
            if reason:
                return _model_score(model, math.nan, "", ratings, requests, reason, mode=mode)
            r1, r2 = ratings
            score = (r1.rating / 2 + r2.rating / 2) / 2
            explanation = f"[1] {r1.rating}/2: {r1.explanation}\n[2] {r2.rating}/2: {r2.explanation}"
            return _model_score(model, score, explanation, ratings, requests, "", mode=mode)
        # confirm: the second judge sees the first rating and may correct it
        [first], requests, reason = await _rate_all([ask("nvidia_answer_accuracy")], ["first rating"])
        if reason:
            return _model_score(model, math.nan, "", [first, None], requests, reason, mode=mode)
        [second], more, reason = await _rate_all(
            [ask("nvidia_answer_accuracy_confirm", initial_rating=first.rating,
                 initial_explanation=first.explanation or _TEXT[cfg.language]["no_explanation"])],
            ["confirmation"])
        requests += more
        if reason:
            return _model_score(model, math.nan, "", [first, second], requests, reason, mode=mode)
        return _model_score(model, second.rating / 2, second.explanation, [first, second], requests, "",
                            mode=mode, adjusted=second.rating != first.rating)

    result = await evaluate_with_models(ANSWER_ACCURACY, list(cfg.models), score_one, cfg.aggregate)
    return _finish(result, mode=mode)


@register(ANSWER_ACCURACY, FAMILY)
async def answer_accuracy(sample: Any, client: LLMClient, config: AnswerAccuracyConfig) -> EvaluationResult:
    """Does the response match the reference answer? 0–1 (seed 003 AnswerAccuracy).

    Per judge model: r ∈ {0, 1, 2} (0 wrong, 1 partially right, 2 fully right); score = r / 2.
    ``use_dual_judge`` + "swap_average": score = (r₁/2 + r₂/2) / 2, r₂ from the template with the reference
    shown first; + "confirm": score = r₂/2, r₂ = a second call's confirmed or corrected rating of r₁.
    Calls: M, or 2 × M with the dual judge. ``user_input`` is optional (shown to the judge when given).
    """
    _check_config(config, AnswerAccuracyConfig)
    return await _answer_accuracy(_prepare_answer_accuracy(sample), client, config)


def answer_accuracy_sync(sample: Any, client: LLMClient, config: AnswerAccuracyConfig) -> EvaluationResult:
    """:func:`answer_accuracy` from synchronous code (notebooks included)."""
    return run_sync(answer_accuracy(sample, client, config))


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------

_METRICS: dict[str, tuple[Callable[[Any], dict], Callable[..., Awaitable[EvaluationResult]], type]] = {
    CONTEXT_RELEVANCE: (_prepare_context_relevance, _context_relevance, ContextRelevanceConfig),
    RESPONSE_GROUNDEDNESS: (_prepare_response_groundedness, _response_groundedness, ResponseGroundednessConfig),
    ANSWER_ACCURACY: (_prepare_answer_accuracy, _answer_accuracy, AnswerAccuracyConfig),
}
_BY_FUNCTION = {context_relevance: CONTEXT_RELEVANCE, response_groundedness: RESPONSE_GROUNDEDNESS,
                answer_accuracy: ANSWER_ACCURACY}


def _metric_name(metric: Any) -> str:
    if isinstance(metric, str) and metric in _METRICS:
        return metric
    if callable(metric) and metric in _BY_FUNCTION:
        return _BY_FUNCTION[metric]
    raise ValueError(f"metric {metric!r}: use one of {sorted(_METRICS)} (or the function itself)")


def _as_samples(samples: Any) -> list[Any]:
    if hasattr(samples, "to_dict") and hasattr(samples, "columns"):  # a DataFrame
        return samples.to_dict("records")
    if isinstance(samples, (str, bytes, Mapping)) or not hasattr(samples, "__iter__"):
        raise ValueError("samples must be a list of mappings/objects or a DataFrame, one row per sample")
    return list(samples)


async def aevaluate_dataset(metric: str | Callable, samples: Any, client: LLMClient, config: NvidiaConfig,
                            n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Score every sample (concurrently; the client bounds the requests in flight) → (items, summary).

    Every sample is validated before the first call, so bad input fails fast and costs nothing.
    ``items``: one row per sample — ``sample`` (position), ``id`` (when samples have one), ``score``,
    ``method``, ``status``, ``reason``, ``explanation``, ``duration_s``, ``llm_requests``, ``score[<model>]``.
    ``summary``: ``{metric: aggregate(score), "<metric>[<model>]": aggregate over the LLM-judged items,
    "judge_backend", "config", "counts": {methods, status, llm_requests}}`` (aggregates from
    :func:`ragnb.metrics.stats.aggregate`: mean, ci95, n, n_valid, n_failed). Shortcut items count in the
    metric's aggregate with their heuristic score, and not in the per-model ones (no model judged them).
    """
    import pandas as pd

    name = _metric_name(metric)
    prepare, run, cfg_cls = _METRICS[name]
    _check_config(config, cfg_cls)
    rows_in = _as_samples(samples)
    prepared = []
    for i, sample in enumerate(rows_in):
        try:
            prepared.append(prepare(sample))
        except ValueError as exc:
            raise ValueError(f"sample {i}: {exc}") from None
    results = await asyncio.gather(*(run(inp, client, config) for inp in prepared))

    rows = []
    for i, (sample, res) in enumerate(zip(rows_in, results)):
        row: dict[str, Any] = {"sample": i}
        sid = sample.get("id") if isinstance(sample, Mapping) else getattr(sample, "id", None)
        if sid is not None:
            row["id"] = sid
        base = res.as_row()
        base.pop("metric")
        row.update({k: v for k, v in base.items() if not k.startswith("score[")})
        row["llm_requests"] = int(res.details.get("llm_requests", 0))
        by_model = {m.model: m.score for m in res.model_scores}
        for model in config.models:
            row[f"score[{model}]"] = by_model.get(model, math.nan)
        rows.append(row)
    items = pd.DataFrame(rows)
    if items.empty:
        items = pd.DataFrame(columns=["sample", "score", "method", "status", "reason", "explanation", "duration_s",
                                      "llm_requests", *(f"score[{m}]" for m in config.models)])

    summary: dict[str, Any] = {name: aggregate(items["score"].to_numpy(dtype=float), n_boot=n_boot, seed=seed)}
    judged = items["method"] == "llm"
    for model in config.models:
        summary[f"{name}[{model}]"] = aggregate(items.loc[judged, f"score[{model}]"].to_numpy(dtype=float),
                                                n_boot=n_boot, seed=seed)
    summary["judge_backend"] = client.settings.backend_label()
    summary["config"] = config.as_dict()
    summary["counts"] = {
        "methods": {k: int(v) for k, v in items["method"].value_counts().items()},
        "status": {k: int(v) for k, v in items["status"].value_counts().items()},
        "llm_requests": int(items["llm_requests"].sum()),
    }
    return items, summary


def evaluate_dataset(metric: str | Callable, samples: Any, client: LLMClient, config: NvidiaConfig,
                     n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """:func:`aevaluate_dataset` from synchronous code (notebooks included)."""
    return run_sync(aevaluate_dataset(metric, samples, client, config, n_boot=n_boot, seed=seed))
