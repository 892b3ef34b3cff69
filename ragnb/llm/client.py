"""Async client for any OpenAI-compatible chat endpoint (OpenRouter, vLLM, Ollama, OpenAI, ...).

Endpoint and key come from environment variables only (see :meth:`LLMSettings.from_env`); model ids come
from parameters. The ``openai`` SDK does the HTTP; retries are ours (the SDK's are switched off) so that
the policy is the one the design asks for:

* at most ``max_concurrency`` requests in flight per client and event loop;
* 408, 409, 429, 5xx, timeouts, connection errors and malformed 200 replies are retried up to
  ``max_retries`` times with exponential backoff (``backoff_initial_s`` × ``backoff_multiplier``^n, capped
  at ``backoff_max_s``, ±``jitter`` fraction), then :class:`LLMTransientError`;
* a ``Retry-After`` (or ``retry-after-ms``) header replaces the computed wait: seconds or an HTTP date,
  capped at ``backoff_max_s`` so a provider asking for minutes cannot stall a notebook silently
  (the retry budget then decides);
* 400, 401, 403, 404, 422 (any other 4xx) and 429 with ``insufficient_quota`` fail at once with
  :class:`LLMPermanentError` carrying the provider's message (API key redacted);
* :meth:`LLMClient.chat_json` re-asks after unparseable, truncated or refused replies, within a separate
  small ``reask_budget``, then raises :class:`LLMOutputError`. It never returns a default score.

Every finished call is written to ``client.usage`` (a :class:`~ragnb.llm.usage.UsageLedger`) and, when a
cache directory is set, to the disk cache (:mod:`ragnb.llm.cache`), so re-running a finished evaluation
sends zero HTTP requests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import os
import random
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import openai

from ragnb.config import ragnb_home, redact_url
from ragnb.llm.cache import LLMCache, cache_key
from ragnb.llm.usage import CallRecord, UsageLedger

T = TypeVar("T")

OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
# Sent to keyless local servers (vLLM, Ollama) because the SDK insists on a key; never recorded.
_PLACEHOLDER_KEY = "ragnb-no-key"
_TRANSIENT_STATUS = frozenset({408, 409, 429})
_PRICE_FIELDS = ("input_per_1m", "output_per_1m")


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _default_cache_dir() -> Path:
    return ragnb_home() / "llm_cache"


_TLS_LOCK = threading.Lock()
_TLS: dict[str, Any] = {}


def _tls_kwargs() -> dict[str, Any]:
    """``verify=<one shared TLS context>`` built by the SDK's own HTTP library (so the same CA bundle and
    ``SSL_CERT_FILE`` handling as its default). Building a context costs ~50 ms and every event loop gets
    its own HTTP client, so without sharing, each :func:`run_sync` would pay it. Empty if unavailable."""
    with _TLS_LOCK:
        if "verify" not in _TLS:
            _TLS["verify"] = None
            for cls in openai.DefaultAsyncHttpxClient.__mro__[1:]:
                factory = getattr(sys.modules.get(cls.__module__.split(".")[0]), "create_ssl_context", None)
                if callable(factory):
                    _TLS["verify"] = factory()
                    break
        return {"verify": _TLS["verify"]} if _TLS["verify"] is not None else {}


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


@dataclass
class LLMSettings:
    """Where and how to call the LLM. Build it with :meth:`from_env`; secrets never go in parameters files.

    ``prices`` maps a model id to ``{"input_per_1m": USD, "output_per_1m": USD}``; a model missing from it
    gets ``cost_usd=None`` (counted as ``unpriced_calls``), never a guessed price.
    ``cache_dir=None`` disables the disk cache. ``json_response_format=True`` makes :meth:`LLMClient.chat_json`
    also send ``response_format={"type": "json_object"}`` (off by default: not every compatible server
    accepts it).
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60
    max_concurrency: int = 16
    max_retries: int = 6
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 30.0
    backoff_multiplier: float = 2.0
    jitter: float = 0.2
    reask_budget: int = 2
    cache_dir: Path | None = field(default_factory=_default_cache_dir)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    json_response_format: bool = False

    def __post_init__(self) -> None:
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
        if not _is_number(self.backoff_multiplier) or self.backoff_multiplier < 1:
            raise ValueError(f"backoff_multiplier={self.backoff_multiplier!r} must be a number >= 1")
        if not _is_number(self.jitter) or not 0 <= self.jitter < 1:
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
                if not _is_number(price[k]) or price[k] < 0:
                    raise ValueError(f"prices[{model!r}][{k!r}]={price[k]!r} must be a number >= 0 (USD per 1M tokens)")

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMSettings:
        """Settings from the environment; keyword arguments override.

        Key: ``RAGNB_LLM_API_KEY``, else ``OPENAI_API_KEY``, else ``OPENROUTER_API_KEY``.
        Endpoint: ``RAGNB_LLM_BASE_URL``; without it, OpenRouter when the key came from
        ``OPENROUTER_API_KEY``, else ``OPENAI_BASE_URL`` or OpenAI's default when there is a key,
        else None (not configured → offline fallback). ``RAGNB_LLM_MAX_CONCURRENCY``,
        ``RAGNB_LLM_TIMEOUT_S`` and ``RAGNB_LLM_CACHE_DIR`` (``off`` disables) are honoured too.
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
        for env_name, fld, conv in (
            ("RAGNB_LLM_MAX_CONCURRENCY", "max_concurrency", int),
            ("RAGNB_LLM_TIMEOUT_S", "timeout_s", float),
        ):
            raw = _env(env_name)
            if raw is not None:
                try:
                    values[fld] = conv(raw)
                except ValueError:
                    raise ValueError(f"{env_name}={raw!r} is not a valid {conv.__name__}") from None
        cache_env = _env("RAGNB_LLM_CACHE_DIR")
        if cache_env is not None:
            values["cache_dir"] = None if cache_env.lower() in ("off", "none", "0", "false") else Path(cache_env)
        values.update(overrides)
        return cls(**values)

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
            f"backoff={self.backoff_initial_s}->{self.backoff_max_s}s x{self.backoff_multiplier}, "
            f"reask_budget={self.reask_budget}, cache_dir={str(self.cache_dir) if self.cache_dir else None!r}, "
            f"priced_models={sorted(self.prices)})"
        )

    __str__ = __repr__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _positive(value: Any, name: str) -> None:
    if not _is_number(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a number > 0")


def _int_at_least(value: Any, name: str, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}")


# --------------------------------------------------------------------------------------------
# Results and errors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatResult:
    """One completion. ``attempts`` = HTTP requests sent for it (0 on a cache hit). ``latency_s`` = duration
    of the successful request (~0 on a cache hit). ``cost_usd`` = price of its tokens (for a cache hit: what
    it cost originally, at today's prices; the ledger books it as cached, not as spent)."""

    text: str
    finish_reason: str | None
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float | None
    cached: bool
    attempts: int


class LLMError(RuntimeError):
    """Base class of the client's errors. Messages never contain the API key."""

    def __init__(self, message: str, *, model: str = "", metric: str = "", attempts: int = 0,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.model = model
        self.metric = metric
        self.attempts = attempts
        self.status = status


class LLMTransientError(LLMError):
    """429/5xx/timeouts persisted past ``max_retries``."""


class LLMPermanentError(LLMError):
    """The provider refused the request for a reason retrying will not fix (auth, bad request, quota)."""

    def __init__(self, message: str, *, provider_message: str = "", code: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.provider_message = provider_message
        self.code = code


class LLMOutputError(LLMError):
    """The model's reply stayed unusable (no JSON, truncated, refused, wrong structure) after the re-asks."""

    def __init__(self, message: str, *, raw_text: str, reason: str, results: list[ChatResult], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.raw_text = raw_text
        self.reason = reason
        self.results = results


# --------------------------------------------------------------------------------------------
# Retry helpers
# --------------------------------------------------------------------------------------------


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or HTTP date); None if absent."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = datetime.now(timezone.utc).timestamp() if now is None else now
    return max(when.timestamp() - current, 0.0)


def backoff_delay(retry_number: int, settings: LLMSettings, retry_after: float | None = None,
                  rand: Callable[[], float] = random.random) -> float:
    """Wait before retry ``retry_number`` (1-based): ``Retry-After`` if given, else exponential with jitter;
    both capped at ``backoff_max_s``."""
    if retry_after is not None:
        return min(retry_after, settings.backoff_max_s)
    base = settings.backoff_initial_s * settings.backoff_multiplier ** (retry_number - 1)
    base = min(base, settings.backoff_max_s)
    return min(base * (1.0 + settings.jitter * (2.0 * rand() - 1.0)), settings.backoff_max_s)


def _provider_message(exc: openai.APIError) -> tuple[str, str | None]:
    body = exc.body
    message, code = None, getattr(exc, "code", None)
    if isinstance(body, dict):
        message = body.get("message")
        code = code or body.get("code") or body.get("type")
        if not message and isinstance(body.get("error"), str):
            message = body["error"]
    elif isinstance(body, str) and body.strip():
        message = body.strip()[:500]
    return str(message or exc.message), (str(code) if code is not None else None)


def _is_insufficient_quota(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    marks = {str(getattr(exc, "code", "") or ""), str(getattr(exc, "type", "") or ""),
             str(body.get("code") or ""), str(body.get("type") or "")}
    return "insufficient_quota" in marks


# --------------------------------------------------------------------------------------------
# JSON extraction
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def extract_json(text: str, finish_reason: str | None = None) -> Any:
    """The JSON value in a model reply: the whole text, a ```json fence, or the first JSON object/array after
    leading prose. Raises ValueError saying why nothing usable was found (truncated, empty, no JSON)."""
    if finish_reason == "length":
        raise ValueError(
            "the reply was cut off at the max_tokens limit (finish_reason=length), so its JSON is incomplete"
        )
    stripped = (text or "").strip()
    if not stripped:
        raise ValueError(f"the reply was empty (finish_reason={finish_reason})")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    for candidate in candidates:
        for i, ch in enumerate(candidate):
            if ch in "{[":
                try:
                    value, _ = _DECODER.raw_decode(candidate, i)
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    return value
    if "{" in stripped or "[" in stripped:
        raise ValueError("the reply contains malformed or incomplete JSON")
    raise ValueError("the reply contains no JSON object (a refusal or prose answer)")


def _reask_message(reason: str) -> str:
    return (
        f"Your previous reply could not be used: {reason}. "
        "Answer again with one complete, valid JSON object in the format requested above, "
        "and nothing else: no explanations, no code fences. Keep it concise so it is not cut off."
    )


# --------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------


class LLMClient:
    """Async chat client with bounded concurrency, retries, disk cache and usage accounting.

    Concurrency is bounded per event loop (each loop gets its own semaphore and HTTP connection pool,
    so :func:`run_sync` from a notebook works repeatedly).
    """

    def __init__(self, settings: LLMSettings | None = None) -> None:
        settings = LLMSettings.from_env() if settings is None else settings
        if not isinstance(settings, LLMSettings):
            raise ValueError("settings must be an LLMSettings (use LLMSettings.from_env())")
        if not settings.configured:
            raise ValueError(
                "no LLM endpoint configured: set RAGNB_LLM_BASE_URL (and RAGNB_LLM_API_KEY if the server needs "
                "one), or OPENAI_API_KEY / OPENROUTER_API_KEY; without them use the offline fallback metrics"
            )
        self.settings = settings
        self.usage = UsageLedger()
        self.cache = LLMCache(settings.cache_dir) if settings.cache_dir is not None else None
        self.retry_waits_s: list[float] = []  # every wait before a retry, in order (Retry-After or backoff)
        self._lock = threading.Lock()
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, Any]] = (
            weakref.WeakKeyDictionary()
        )
        _LIVE_CLIENTS.add(self)

    # -- resources -------------------------------------------------------------------------

    def _resources(self) -> tuple[asyncio.Semaphore, openai.AsyncOpenAI]:
        loop = asyncio.get_running_loop()
        with self._lock:
            res = self._per_loop.get(loop)
            if res is None:
                oai = openai.AsyncOpenAI(
                    base_url=self.settings.resolved_base_url,
                    api_key=self.settings.api_key or _PLACEHOLDER_KEY,
                    max_retries=0,
                    timeout=self.settings.timeout_s,
                    # A plain httpx client: the SDK's default one closes itself from __del__ on whatever loop
                    # runs then, which fails for connections of an already closed loop.
                    http_client=openai.DefaultAsyncHttpxClient(timeout=self.settings.timeout_s, **_tls_kwargs()),
                )
                res = (asyncio.Semaphore(self.settings.max_concurrency), oai)
                self._per_loop[loop] = res
            return res

    async def aclose(self) -> None:
        """Close the HTTP connections opened on the current event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            res = self._per_loop.pop(loop, None)
        if res is not None:
            await res[1].close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"LLMClient(base_url={redact_url(self.settings.resolved_base_url)!r}, "
            f"backend={self.settings.backend_label()!r}, max_concurrency={self.settings.max_concurrency}, "
            f"cache={'on' if self.cache else 'off'}, calls={len(self.usage)})"
        )

    __str__ = __repr__

    def _redact(self, text: str) -> str:
        key = self.settings.api_key
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    # -- calls -----------------------------------------------------------------------------

    async def chat(
        self,
        messages: list[dict],
        *,
        model: str,
        temperature: float = 0.0,
        max_tokens: int = 1000,
        seed: int | None = None,
        metric: str = "",
        cache: bool = True,
        response_format: dict | None = None,
        extra_params: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion (non-streaming). ``extra_params`` go to the endpoint as extra body fields
        (e.g. ``top_p``) and are part of the cache key."""
        _validate_request(messages, model, temperature, max_tokens, seed, extra_params)
        params: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens), "seed": seed}
        if response_format is not None:
            params["response_format"] = response_format
        if extra_params:
            params["extra"] = extra_params
        key = None
        if cache and self.cache is not None:
            key = cache_key(self.settings.resolved_base_url, model, messages, params)
            t0 = time.perf_counter()
            hit = self.cache.get(key)
            if hit is not None:
                tin, tout = int(hit.get("tokens_in") or 0), int(hit.get("tokens_out") or 0)
                result = ChatResult(
                    text=str(hit["text"]), finish_reason=hit.get("finish_reason"), model=str(hit.get("model") or model),
                    tokens_in=tin, tokens_out=tout, latency_s=time.perf_counter() - t0,
                    cost_usd=self.settings.price_of(model, tin, tout) if hit.get("usage_reported", True) else None,
                    cached=True, attempts=0,
                )
                self._record(result, metric, model)
                return result

        payload, attempts, latency = await self._request(messages, model, params, metric)
        tin, tout = payload["tokens_in"], payload["tokens_out"]
        result = ChatResult(
            text=payload["text"], finish_reason=payload["finish_reason"], model=payload["model"] or model,
            tokens_in=tin, tokens_out=tout, latency_s=latency,
            cost_usd=self.settings.price_of(model, tin, tout) if payload["usage_reported"] else None,
            cached=False, attempts=attempts,
        )
        if key is not None:
            self.cache.put(key, model, {**payload, "latency_s": latency})
        self._record(result, metric, model)
        return result

    def _record(self, r: ChatResult, metric: str, model: str) -> None:
        self.usage.add(CallRecord(metric=metric, model=model, tokens_in=r.tokens_in, tokens_out=r.tokens_out,
                                  latency_s=r.latency_s, cost_usd=r.cost_usd, cached=r.cached, attempts=r.attempts))

    async def _request(self, messages: list[dict], model: str, params: dict[str, Any],
                       metric: str) -> tuple[dict[str, Any], int, float]:
        sem, oai = self._resources()
        kwargs: dict[str, Any] = {"model": model, "messages": messages,
                                  "temperature": params["temperature"], "max_tokens": params["max_tokens"]}
        if params["seed"] is not None:
            kwargs["seed"] = params["seed"]
        if "response_format" in params:
            kwargs["response_format"] = params["response_format"]
        if "extra" in params:
            kwargs["extra_body"] = params["extra"]
        where = redact_url(self.settings.resolved_base_url)
        attempts = 0
        while True:
            attempts += 1
            retry_after: float | None = None
            async with sem:
                t0 = time.perf_counter()
                try:
                    resp = await oai.chat.completions.create(**kwargs)
                    latency = time.perf_counter() - t0
                    payload = _payload(resp)
                    return payload, attempts, latency
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    provider_msg, code = _provider_message(exc)
                    provider_msg = self._redact(provider_msg)
                    permanent = (400 <= status < 500 and status not in _TRANSIENT_STATUS) or (
                        status == 429 and _is_insufficient_quota(exc)
                    )
                    if permanent:
                        self._record_failure(metric, model, attempts)
                        label = f" ({code})" if code else ""
                        raise LLMPermanentError(
                            f"HTTP {status}{label} from {where} for model {model!r}: {provider_msg}",
                            provider_message=provider_msg, code=code, model=model, metric=metric,
                            attempts=attempts, status=status,
                        ) from None
                    retry_after = parse_retry_after(exc.response.headers)
                    last = f"HTTP {status}: {provider_msg}"
                    last_status: int | None = status
                except openai.APITimeoutError:
                    last, last_status = f"timed out after {self.settings.timeout_s} s", None
                except openai.APIConnectionError as exc:
                    last, last_status = f"connection error: {self._redact(str(exc))}", None
                except (openai.APIError, _MalformedReply, json.JSONDecodeError) as exc:  # 200 with a bad body
                    last, last_status = f"malformed reply: {self._redact(str(exc))[:300]}", None
            if attempts > self.settings.max_retries:
                self._record_failure(metric, model, attempts)
                raise LLMTransientError(
                    f"gave up on model {model!r} at {where} after {attempts} requests; last error: {last}",
                    model=model, metric=metric, attempts=attempts, status=last_status,
                )
            # Waiting happens outside the semaphore so other calls can use the slot.
            wait = backoff_delay(attempts, self.settings, retry_after)
            self.retry_waits_s.append(wait)
            await asyncio.sleep(wait)

    def _record_failure(self, metric: str, model: str, attempts: int) -> None:
        self.usage.add(CallRecord(metric=metric, model=model, tokens_in=0, tokens_out=0, latency_s=0.0,
                                  cost_usd=None, cached=False, attempts=attempts, failed=True))

    async def chat_json(
        self,
        messages: list[dict],
        *,
        model: str,
        parse: Callable[[Any], T],
        metric: str = "",
        temperature: float = 0.0,
        max_tokens: int = 1000,
        seed: int | None = None,
        cache: bool = True,
    ) -> tuple[T, list[ChatResult]]:
        """Ask for JSON and return ``(parse(obj), results)``.

        ``parse`` validates the decoded JSON and raises ValueError (TypeError/KeyError/IndexError are
        treated the same) when its structure is wrong. An empty, refused, truncated (finish_reason=length)
        or unparseable reply triggers a re-ask — the reply and a correction are appended to the
        conversation — at most ``reask_budget`` times; then :class:`LLMOutputError`.
        """
        if not callable(parse):
            raise ValueError("parse must be a callable that turns the decoded JSON into your result")
        response_format = {"type": "json_object"} if self.settings.json_response_format else None
        conversation = list(messages)
        results: list[ChatResult] = []
        reason = ""
        for _ in range(1 + self.settings.reask_budget):
            result = await self.chat(conversation, model=model, temperature=temperature, max_tokens=max_tokens,
                                     seed=seed, metric=metric, cache=cache, response_format=response_format)
            results.append(result)
            try:
                obj = extract_json(result.text, result.finish_reason)
            except ValueError as exc:
                reason = str(exc)
            else:
                try:
                    return parse(obj), results
                except ValueError as exc:
                    reason = f"the JSON does not have the expected structure: {exc}"
                except (TypeError, KeyError, IndexError) as exc:
                    reason = f"the JSON does not have the expected structure: {type(exc).__name__}: {exc}"
            conversation = conversation + [
                {"role": "assistant", "content": result.text},
                {"role": "user", "content": _reask_message(reason)},
            ]
        last = results[-1].text
        raise LLMOutputError(
            f"model {model!r} gave no usable JSON in {len(results)} replies; last problem: {reason}; "
            f"last reply starts with {last[:200]!r}",
            raw_text=last, reason=reason, results=results, model=model, metric=metric,
            attempts=sum(r.attempts for r in results),
        )


class _MalformedReply(Exception):
    """A 200 reply without a usable completion (e.g. OpenRouter relaying an upstream error)."""


def _payload(resp: Any) -> dict[str, Any]:
    choices = getattr(resp, "choices", None)
    if not choices:
        error = (getattr(resp, "model_extra", None) or {}).get("error")
        raise _MalformedReply(f"no choices in the reply{f': {error}' if error else ''}")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None) if message is not None else None
    if content is None:
        content = getattr(message, "refusal", None) or ""
    usage = getattr(resp, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
    return {
        "text": str(content),
        "finish_reason": getattr(choice, "finish_reason", None),
        "model": getattr(resp, "model", None) or "",
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "usage_reported": usage is not None,
    }


def _validate_request(messages: Any, model: Any, temperature: Any, max_tokens: Any, seed: Any,
                      extra_params: Any) -> None:
    if not isinstance(model, str) or not model.strip():
        raise ValueError("model must be a non-empty model id string, e.g. 'openai/gpt-4o-mini'")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'; got {m!r:.100}")
    if not _is_number(temperature) or not 0 <= temperature <= 2:
        raise ValueError(f"temperature={temperature!r} must be a number in [0, 2]")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r} must be an integer >= 1")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ValueError(f"seed={seed!r} must be an integer or None")
    if extra_params is not None and not isinstance(extra_params, dict):
        raise ValueError("extra_params must be a dict of extra request fields, or None")


# --------------------------------------------------------------------------------------------
# Sync bridge for notebooks
# --------------------------------------------------------------------------------------------


_LIVE_CLIENTS: weakref.WeakSet[LLMClient] = weakref.WeakSet()


async def _run_and_release(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    finally:
        # The loop is about to close: close the HTTP connections clients opened on it.
        for client in list(_LIVE_CLIENTS):
            await client.aclose()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    In plain Python this is ``asyncio.run``. Inside a running event loop (Jupyter) it runs the coroutine
    on a fresh loop in a worker thread and blocks until it finishes, so notebooks can call it directly.
    Connections opened on that temporary loop are closed before it returns; clients stay reusable.
    """
    if not asyncio.iscoroutine(coro):
        raise ValueError("run_sync expects a coroutine, e.g. run_sync(client.chat(...))")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run_and_release(coro))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragnb-run-sync") as pool:
        return pool.submit(asyncio.run, _run_and_release(coro)).result()
