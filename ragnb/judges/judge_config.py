"""How to judge: the one configuration of every LLM-judged metric (direct judge scores, ragas-style and
NVIDIA-style metrics).

``JudgeConfig`` holds what is shared — judge models, aggregation over models, language, direct/reasoned
mode, sampling parameters, cache. What is specific to one metric (ContextPrecision's strategy,
AnswerAccuracy's dual judge, …) is an argument of that metric's constructor, not a config field.

``temperature`` and ``max_tokens`` left at None take the metric's own declared value, else
:data:`DEFAULT_TEMPERATURE` / :data:`DEFAULT_MAX_TOKENS`. Two families declare their own (kept so that
requests, and with them the cache keys, stay what they were): ragas-style metrics ``max_tokens=2048``
(statement lists are long), NVIDIA-style metrics ``temperature=0.1`` (NVIDIA's value).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ragnb.io import comma_list
from ragnb.llm.prompts import LANGUAGES
from ragnb.llm.result import AGGREGATIONS

MODES = ("direct", "reasoned")
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 1000
JUDGE_MODELS_ENV = "RAGNB_JUDGE_MODELS"


def _check_models(models: Any) -> list[str] | None:
    if models is None:
        return None
    if isinstance(models, str) or not isinstance(models, (list, tuple)) or not models:
        raise ValueError(f"models must be a non-empty list of judge model ids, e.g. ['openai/gpt-4o-mini']; "
                         f"got {models!r}")
    for i, m in enumerate(models):
        if not isinstance(m, str) or not m.strip():
            raise ValueError(f"models[{i}]={m!r} must be a non-empty model id string")
    dupes = sorted(m for m, c in Counter(models).items() if c > 1)
    if dupes:
        raise ValueError(f"models lists {dupes} more than once; each judge model must appear once "
                         "(repeat a run with cache=False to measure consistency)")
    return list(models)


def _check_flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r} must be True or False")


@dataclass
class JudgeConfig:
    """How to judge.

    ``models``: judge model ids (several → per-model scores + aggregate; None → the comma-separated
    ``RAGNB_JUDGE_MODELS`` environment variable, read when the metric runs); ``aggregate``: mean | median |
    majority over models (:func:`ragnb.llm.result.combine`); ``mode``: direct | reasoned (the direct
    judge scores only: reasoned asks for the reasoning first); ``language``: en | ru — language of the
    prompts and explanations, the verdict is a number; ``temperature``, ``max_tokens``: None → the
    metric's own value (module docstring); ``seed``: sent with every call; ``swap_positions``: the pairwise
    judge asks twice with A/B swapped; ``cache``: use the client's disk cache (off for a consistency re-run).
    """

    models: list[str] | None = None
    aggregate: str = "mean"
    mode: str = "direct"
    language: str = "en"
    temperature: float | None = None
    max_tokens: int | None = None
    swap_positions: bool = True
    seed: int | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        self.models = _check_models(self.models)
        if self.aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate={self.aggregate!r}: use one of {AGGREGATIONS}")
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r}: use one of {MODES}")
        if self.language not in LANGUAGES:
            raise ValueError(f"language={self.language!r}: explanations are available in {LANGUAGES}")
        t = self.temperature
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2):
            raise ValueError(f"temperature={t!r} must be a number in [0, 2] (0 for judging), or None")
        n = self.max_tokens
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"max_tokens={n!r} must be an integer >= 1 "
                             "(reasoned mode needs room for the reasoning, e.g. 1000), or None")
        _check_flag(self.swap_positions, "swap_positions")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"seed={self.seed!r} must be an integer or None")
        _check_flag(self.cache, "cache")

    @classmethod
    def make(cls, config: JudgeConfig | dict[str, Any] | None) -> JudgeConfig:
        """A config from None (defaults), a dict of its fields (unknown keys are an error), or a config."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, dict):
            unknown = sorted(set(config) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValueError(f"unknown option(s) {unknown}; allowed: {list(cls.__dataclass_fields__)}")
            return cls(**config)
        raise ValueError(f"config must be a JudgeConfig(models=[...], ...) or a dict of its fields, "
                         f"got {type(config).__name__}")

    def judge_models(self) -> list[str]:
        """``models``, else the models named by ``RAGNB_JUDGE_MODELS``; ValueError when neither is set."""
        if self.models:
            return list(self.models)
        env = comma_list(os.environ.get(JUDGE_MODELS_ENV, ""), JUDGE_MODELS_ENV)
        if env:
            return _check_models(env)
        raise ValueError(f"no judge model: pass models=['openai/gpt-4o-mini', ...] in the JudgeConfig "
                         f"or set {JUDGE_MODELS_ENV}=model-a,model-b")

    def call_params(self, temperature: float | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """Keyword arguments of every chat call: this config's values, else the metric's declared
        ``temperature`` / ``max_tokens``, else the defaults."""
        return {
            "temperature": self.temperature if self.temperature is not None
            else DEFAULT_TEMPERATURE if temperature is None else temperature,
            "max_tokens": self.max_tokens if self.max_tokens is not None
            else DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
            "seed": self.seed,
            "cache": self.cache,
        }
