"""Where and how to call the LLM: :class:`LLMSettings`, built from the environment (secrets never go in
parameters files)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnb.config import ragnb_home, redact_url

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
_PRICE_FIELDS = ("input_per_1m", "output_per_1m")


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _default_cache_dir() -> Path:
    return ragnb_home() / "llm_cache"


# The request limits read from the environment, once for both prefixes: ``RAGNB_LLM_<NAME>`` for chat calls and
# ``RAGNB_EMBEDDING_<NAME>`` for embedding requests (each falling back to the LLM's). NAME → (field, type).
LIMIT_VARIABLES: dict[str, tuple[str, type]] = {
    "MAX_CONCURRENCY": ("max_concurrency", int),
    "TIMEOUT_S": ("timeout_s", float),
    "MAX_RETRIES": ("max_retries", int),
    "MAX_WAIT_S": ("max_wait_s", float),
}
LLM_PREFIX = "RAGNB_LLM_"
EMBEDDING_PREFIX = "RAGNB_EMBEDDING_"


def env_limits(prefix: str) -> dict[str, Any]:
    """The :data:`LIMIT_VARIABLES` set under ``prefix`` as field values; a malformed one is a ValueError."""
    values: dict[str, Any] = {}
    for name, (fld, conv) in LIMIT_VARIABLES.items():
        raw = _env(prefix + name)
        if raw is not None:
            try:
                values[fld] = conv(raw)
            except ValueError:
                raise ValueError(f"{prefix}{name}={raw!r} is not a valid {conv.__name__}") from None
    return values


@dataclass
class LLMSettings:
    """Where and how to call the LLM. Build it with :meth:`from_env`; secrets never go in parameters files.

    ``prices`` maps a model id to ``{"input_per_1m": USD, "output_per_1m": USD}``; a model missing from it
    gets ``cost_usd=None`` (counted as ``unpriced_calls``), never a guessed price.
    Retry policy (:mod:`ragnb.llm.retry`): a failing request is retried at most ``max_retries`` times, and one
    call — its requests and the waits between them — never takes longer than ``max_wait_s`` (each request's
    timeout is cut to what is left). With the defaults (6 retries, 60 s) a call gives up within about a
    minute. ``retry_max_tokens``: a generated answer cut off at ``max_tokens`` is asked once more with this
    budget (None: it fails with the reason). ``failure_warn_rate``: the share of failed requests among the
    recent ones above which the client warns (at once, not when the run ends).
    ``env_prefix`` names the variables that raise these limits in error messages (``RAGNB_LLM_`` or, for
    embedding requests, ``RAGNB_EMBEDDING_``). ``cache_dir=None`` disables the disk cache. ``json_response_format=True`` makes :meth:`LLMClient.chat_json`
    also send ``response_format={"type": "json_object"}`` (off by default: not every compatible server
    accepts it).
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60
    max_concurrency: int = 16
    max_retries: int = 6
    max_wait_s: float = 60.0
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 30.0
    backoff_multiplier: float = 2.0
    jitter: float = 0.2
    reask_budget: int = 2
    retry_max_tokens: int | None = None
    failure_warn_rate: float = 0.1
    cache_dir: Path | None = field(default_factory=_default_cache_dir)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    json_response_format: bool = False
    env_prefix: str = LLM_PREFIX

    def __post_init__(self) -> None:
        if self.env_prefix not in (LLM_PREFIX, EMBEDDING_PREFIX):
            raise ValueError(f"env_prefix={self.env_prefix!r} must be {LLM_PREFIX!r} or {EMBEDDING_PREFIX!r}")
        if self.base_url is not None:
            if not isinstance(self.base_url, str) or not re.match(r"^https?://", self.base_url.strip()):
                raise ValueError(
                    "base_url must be an http(s) URL such as http://127.0.0.1:8000/v1 "
                    "(set RAGNB_LLM_BASE_URL), or None"
                )
            self.base_url = self.base_url.strip().rstrip("/")
        if self.api_key is not None and not isinstance(self.api_key, str):
            raise ValueError("api_key must be a string (set RAGNB_LLM_API_KEY), or None")
        if self.api_key == "":
            self.api_key = None
        _positive(self.timeout_s, "timeout_s")
        _positive(self.max_wait_s, "max_wait_s")
        if self.retry_max_tokens is not None:
            _int_at_least(self.retry_max_tokens, "retry_max_tokens", 1)
        if not is_number(self.failure_warn_rate) or not 0 < self.failure_warn_rate <= 1:
            raise ValueError(f"failure_warn_rate={self.failure_warn_rate!r} must be a fraction in (0, 1], e.g. 0.1")
        _int_at_least(self.max_concurrency, "max_concurrency", 1)
        _int_at_least(self.max_retries, "max_retries", 0)
        _int_at_least(self.reask_budget, "reask_budget", 0)
        _positive(self.backoff_initial_s, "backoff_initial_s")
        _positive(self.backoff_max_s, "backoff_max_s")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff_max_s={self.backoff_max_s} is below backoff_initial_s={self.backoff_initial_s}; "
                "raise backoff_max_s or lower backoff_initial_s"
            )
        if not is_number(self.backoff_multiplier) or self.backoff_multiplier < 1:
            raise ValueError(f"backoff_multiplier={self.backoff_multiplier!r} must be a number >= 1")
        if not is_number(self.jitter) or not 0 <= self.jitter < 1:
            raise ValueError(f"jitter={self.jitter!r} must be a fraction in [0, 1), e.g. 0.2 for ±20%")
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir).expanduser()
        if not isinstance(self.prices, dict):
            raise ValueError('prices must be a dict: {model: {"input_per_1m": USD, "output_per_1m": USD}}')
        for model, price in self.prices.items():
            if not isinstance(price, dict) or any(k not in price for k in _PRICE_FIELDS):
                raise ValueError(
                    f"prices[{model!r}] must be {{'input_per_1m': USD, 'output_per_1m': USD}}; got {price!r}"
                )
            for k in _PRICE_FIELDS:
                if not is_number(price[k]) or price[k] < 0:
                    raise ValueError(f"prices[{model!r}][{k!r}]={price[k]!r} must be a number >= 0 (USD per 1M tokens)")

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMSettings:
        """Settings from the environment; keyword arguments override.

        Key: ``RAGNB_LLM_API_KEY``, else ``OPENAI_API_KEY``, else ``OPENROUTER_API_KEY``.
        Endpoint: ``RAGNB_LLM_BASE_URL``; without it, OpenRouter when the key came from
        ``OPENROUTER_API_KEY``, else ``OPENAI_BASE_URL`` or OpenAI's default when there is a key,
        else None (not configured → offline fallback). ``RAGNB_LLM_MAX_CONCURRENCY``,
        ``RAGNB_LLM_TIMEOUT_S``, ``RAGNB_LLM_MAX_RETRIES``, ``RAGNB_LLM_MAX_WAIT_S``,
        ``RAGNB_LLM_RETRY_MAX_TOKENS`` and ``RAGNB_LLM_CACHE_DIR`` (``off`` disables) are honoured too.
        """
        unknown = sorted(set(overrides) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown LLM setting(s) {unknown}; allowed: {sorted(cls.__dataclass_fields__)}")
        values: dict[str, Any] = {}
        key_source = next((n for n in ("RAGNB_LLM_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY") if _env(n)), None)
        values["api_key"] = _env(key_source) if key_source else None
        base_url = _env("RAGNB_LLM_BASE_URL")
        if base_url is None and key_source == "OPENROUTER_API_KEY":
            base_url = OPENROUTER_BASE_URL
        elif base_url is None and key_source is not None:
            base_url = _env("OPENAI_BASE_URL") or OPENAI_BASE_URL
        values["base_url"] = base_url
        values.update(env_limits(LLM_PREFIX))
        raw = _env("RAGNB_LLM_RETRY_MAX_TOKENS")
        if raw is not None:
            try:
                values["retry_max_tokens"] = int(raw)
            except ValueError:
                raise ValueError(f"RAGNB_LLM_RETRY_MAX_TOKENS={raw!r} is not a valid int") from None
        cache_env = _env("RAGNB_LLM_CACHE_DIR")
        if cache_env is not None:
            values["cache_dir"] = None if cache_env.lower() in ("off", "none", "0", "false") else Path(cache_env)
        values.update(overrides)
        return cls(**values)

    def variable(self, fld: str) -> str:
        """The environment variable that sets limit ``fld`` (e.g. ``max_retries``) for these settings."""
        name = next(n for n, (f, _) in LIMIT_VARIABLES.items() if f == fld)
        return self.env_prefix + name

    @property
    def configured(self) -> bool:
        """True when an endpoint or a key is present (otherwise metrics use the offline fallback)."""
        return bool(self.base_url or self.api_key)

    @property
    def resolved_base_url(self) -> str:
        return self.base_url or OPENAI_BASE_URL

    def backend_label(self) -> str:
        """``"openai-compatible"`` or ``"offline-fallback"`` — the metrics JSON's ``judge_backend``."""
        return "openai-compatible" if self.configured else "offline-fallback"

    def price_of(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        price = self.prices.get(model)
        if price is None:
            return None
        return tokens_in * price["input_per_1m"] / 1e6 + tokens_out * price["output_per_1m"] / 1e6

    def __repr__(self) -> str:
        url = redact_url(self.base_url) if self.base_url else None
        return (
            f"LLMSettings(base_url={url!r}, api_key={'set' if self.api_key else 'unset'}, "
            f"timeout_s={self.timeout_s}, max_concurrency={self.max_concurrency}, max_retries={self.max_retries}, "
            f"max_wait_s={self.max_wait_s}, "
            f"backoff={self.backoff_initial_s}->{self.backoff_max_s}s x{self.backoff_multiplier}, "
            f"reask_budget={self.reask_budget}, cache_dir={str(self.cache_dir) if self.cache_dir else None!r}, "
            f"priced_models={sorted(self.prices)})"
        )

    __str__ = __repr__


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _positive(value: Any, name: str) -> None:
    if not is_number(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a number > 0")


def _int_at_least(value: Any, name: str, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}")

