"""Async client for any OpenAI-compatible chat endpoint (OpenRouter, vLLM, Ollama, OpenAI, ...).

Endpoint and key come from environment variables only (see :meth:`LLMSettings.from_env`); model ids come
from parameters. The ``openai`` SDK does the HTTP; retries are ours (the SDK's are switched off) so that
the policy is the one the design asks for:

* at most ``max_concurrency`` requests in flight per client and event loop;
* 408, 409, 429, 5xx, timeouts, connection errors and malformed 200 replies are retried up to
  ``max_retries`` times (``RAGNB_LLM_MAX_RETRIES``) and within ``max_wait_s`` per call
  (``RAGNB_LLM_MAX_WAIT_S``, default 60 s, waits and requests together) with exponential backoff (``backoff_initial_s`` × ``backoff_multiplier``^n, capped
  at ``backoff_max_s``, ±``jitter`` fraction), then :class:`LLMTransientError`;
* a ``Retry-After`` (or ``retry-after-ms``) header replaces the computed wait: seconds or an HTTP date,
  capped at ``backoff_max_s`` so a provider asking for minutes cannot stall a notebook silently
  (the retry budget then decides);
* 400, 401, 403, 404, 422 (any other 4xx) and 429 with ``insufficient_quota`` fail at once with
  :class:`LLMPermanentError` carrying the provider's message (API key redacted);
* :meth:`LLMClient.chat_json` re-asks after unparseable, truncated or refused replies, within a separate
  small ``reask_budget``, then raises :class:`LLMOutputError`. It never returns a default score.

Every finished call is written to ``client.usage`` (a :class:`~ragnb.llm.usage.UsageLedger`) and, when a
cache directory is set and the reply is usable, to the disk cache (:mod:`ragnb.llm.cache`), so re-running a
finished evaluation sends zero HTTP requests while a failed one asks again. ``client.failures`` keeps the
running share of failed requests and warns once it passes ``failure_warn_rate``. Settings: :mod:`ragnb.llm.settings`; retry policy: :mod:`ragnb.llm.retry`; replies
and errors: :mod:`ragnb.llm.replies`; sync bridge: :mod:`ragnb.llm.sync`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import openai

from ragnb.config import redact_url
from ragnb.llm.cache import LLMCache, cache_key
from ragnb.llm.replies import (
    ChatResult,
    LLMOutputError,
    LLMPermanentError,
    LLMTransientError,
    extract_json,
    reask_message,
    reply_problem,
    strip_reasoning,
)
from ragnb.llm.retry import (
    TRANSIENT_STATUS,
    FailureMonitor,
    MalformedReply,
    backoff_delay,
    is_insufficient_quota,
    parse_retry_after,
    provider_message,
)
from ragnb.llm.settings import LLMSettings, is_number
from ragnb.llm.sync import LIVE_CLIENTS
from ragnb.llm.usage import CallRecord, UsageLedger

T = TypeVar("T")

# Sent to keyless local servers (vLLM, Ollama) because the SDK insists on a key; never recorded.
_PLACEHOLDER_KEY = "ragnb-no-key"

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
        self.failures = FailureMonitor(settings.failure_warn_rate)  # running share of failed requests
        self._lock = threading.Lock()
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, Any]] = (
            weakref.WeakKeyDictionary()
        )
        LIVE_CLIENTS.add(self)

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
        (e.g. ``top_p``) and are part of the cache key. The reply is returned as sent (reasoning included);
        it is cached only when :func:`~ragnb.llm.replies.reply_problem` finds nothing wrong with it."""
        result, keep = await self._complete(messages, model=model, temperature=temperature, max_tokens=max_tokens,
                                            seed=seed, metric=metric, cache=cache, response_format=response_format,
                                            extra_params=extra_params)
        if reply_problem(result.text, result.finish_reason, result.refusal) is None:
            keep()
        return result

    async def chat_text(self, messages: list[dict], *, model: str, temperature: float = 0.0, max_tokens: int = 1000,
                        seed: int | None = None, metric: str = "", cache: bool = True) -> ChatResult:
        """A generated answer: the reply's final text with any reasoning removed (``result.text``).

        A reply cut off at ``max_tokens`` is asked once more with ``settings.retry_max_tokens`` when that is
        set; a reply still truncated, refused or empty raises :class:`LLMOutputError` with the reason — it is
        never returned as a complete answer."""
        result = await self.chat(messages, model=model, temperature=temperature, max_tokens=max_tokens, seed=seed,
                                 metric=metric, cache=cache)
        results = [result]
        budget = self.settings.retry_max_tokens
        if result.finish_reason == "length" and budget is not None and budget > max_tokens:
            result = await self.chat(messages, model=model, temperature=temperature, max_tokens=budget, seed=seed,
                                     metric=metric, cache=cache)
            results.append(result)
        problem = reply_problem(result.text, result.finish_reason, result.refusal)
        if problem is not None:
            hint = "" if budget else "; set RAGNB_LLM_RETRY_MAX_TOKENS to ask again with a larger budget"
            raise LLMOutputError(
                f"model {model!r} gave no usable answer: {problem}"
                + (hint if result.finish_reason == "length" else ""),
                raw_text=result.text, reason=problem, results=results, model=model, metric=metric,
                attempts=sum(r.attempts for r in results))
        return replace(result, text=strip_reasoning(result.text))

    async def _complete(self, messages: list[dict], *, model: str, temperature: float, max_tokens: int,
                        seed: int | None, metric: str, cache: bool, response_format: dict | None,
                        extra_params: dict[str, Any] | None, in_chain: bool = False
                        ) -> tuple[ChatResult, Callable[[], None]]:
        """The reply (from the cache or over HTTP) and ``keep()``, which stores a fresh reply in the cache —
        called by the caller once it knows the reply is usable (a failure is never cached). ``in_chain``: a
        step of :meth:`chat_json`, whose replies are kept only when the whole call ends with a usable value."""
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
            # An unusable entry is a miss, unless it is a step of a JSON call that ended well (stored as
            # such by chat_json, so that replaying that call replays its re-asks).
            if hit is not None and ((in_chain and hit.get("chain_ok"))
                                    or reply_problem(hit["text"], hit.get("finish_reason"), hit.get("refusal")) is None):
                tin, tout = int(hit.get("tokens_in") or 0), int(hit.get("tokens_out") or 0)
                result = ChatResult(
                    text=self._redact(str(hit["text"])), finish_reason=hit.get("finish_reason"),
                    model=str(hit.get("model") or model), tokens_in=tin, tokens_out=tout,
                    latency_s=time.perf_counter() - t0,
                    cost_usd=self.settings.price_of(model, tin, tout) if hit.get("usage_reported", True) else None,
                    cached=True, attempts=0,
                )
                self._record(result, metric, model)
                return result, _nothing

        payload, attempts, latency = await self._request(messages, model, params, metric)
        tin, tout = payload["tokens_in"], payload["tokens_out"]
        result = ChatResult(
            text=self._redact(payload["text"]), finish_reason=payload["finish_reason"], model=payload["model"] or model,
            tokens_in=tin, tokens_out=tout, latency_s=latency,
            cost_usd=self.settings.price_of(model, tin, tout) if payload["usage_reported"] else None,
            cached=False, attempts=attempts, refusal=payload.get("refusal"),
        )
        self._record(result, metric, model)
        if key is None:
            return result, _nothing
        return result, lambda: self.cache.put(key, model, {**payload, "latency_s": latency, "chain_ok": in_chain})

    def _record(self, r: ChatResult, metric: str, model: str) -> None:
        self.usage.add(CallRecord(metric=metric, model=model, tokens_in=r.tokens_in, tokens_out=r.tokens_out,
                                  latency_s=r.latency_s, cost_usd=r.cost_usd, cached=r.cached, attempts=r.attempts))

    async def _request(self, messages: list[dict], model: str, params: dict[str, Any],
                       metric: str) -> tuple[dict[str, Any], int, float]:
        kwargs: dict[str, Any] = {"model": model, "messages": messages,
                                  "temperature": params["temperature"], "max_tokens": params["max_tokens"]}
        if params["seed"] is not None:
            kwargs["seed"] = params["seed"]
        if "response_format" in params:
            kwargs["response_format"] = params["response_format"]
        if "extra" in params:
            kwargs["extra_body"] = params["extra"]

        async def send(oai: openai.AsyncOpenAI) -> dict[str, Any]:
            return _payload(await oai.chat.completions.create(**kwargs))

        return await self.with_retries(send, model=model, metric=metric)

    async def with_retries(self, send: Callable[[openai.AsyncOpenAI], Any], *, model: str,
                           metric: str = "") -> tuple[Any, int, float]:
        """``(await send(sdk_client), attempts, latency of the successful request)`` under this client's
        concurrency bound and retry policy (module docstring). ``send`` raises :class:`MalformedReply` for a
        200 reply it cannot use (retried like a 5xx). Any endpoint (chat, embeddings) goes through here.

        The call's deadline, ``settings.max_wait_s``, starts with its first request: no request outlives it
        (its timeout is cut to what is left) and no retry is started that could not finish before it."""
        sem, oai = self._resources()
        where = redact_url(self.settings.resolved_base_url)
        attempts = 0
        started: float | None = None
        while True:
            attempts += 1
            retry_after: float | None = None
            async with sem:
                t0 = time.perf_counter()
                started = t0 if started is None else started
                left = self.settings.max_wait_s - (t0 - started)
                timeout = min(self.settings.timeout_s, max(left, 0.001))
                try:
                    payload = await send(oai if timeout >= self.settings.timeout_s else oai.with_options(timeout=timeout))
                    self._watch(False)
                    return payload, attempts, time.perf_counter() - t0
                except openai.APIStatusError as exc:
                    status = exc.status_code
                    provider_msg, code = provider_message(exc)
                    provider_msg = self._redact(provider_msg)
                    permanent = (400 <= status < 500 and status not in TRANSIENT_STATUS) or (
                        status == 429 and is_insufficient_quota(exc)
                    )
                    if permanent:
                        self._watch(True, f"HTTP {status}: {provider_msg}")
                        self._record_failure(metric, model, attempts)
                        label = f" ({code})" if code and code != str(status) else ""
                        raise LLMPermanentError(
                            f"HTTP {status}{label} from {where} for model {model!r}: {provider_msg}",
                            provider_message=provider_msg, code=code, model=model, metric=metric,
                            attempts=attempts, status=status,
                        ) from None
                    retry_after = parse_retry_after(exc.response.headers)
                    last = f"HTTP {status}: {provider_msg}"
                    last_status: int | None = status
                except openai.APITimeoutError:
                    last, last_status = f"timed out after {timeout:.3g} s", None
                    if timeout >= self.settings.timeout_s:  # the request's own limit, not the call's deadline
                        last += f" ({self.settings.variable('timeout_s')}={self.settings.timeout_s:g} raises it)"
                except openai.APIConnectionError as exc:
                    last, last_status = f"connection error: {self._redact(str(exc))}", None
                except (openai.APIError, MalformedReply, json.JSONDecodeError) as exc:  # 200 with a bad body
                    last, last_status = f"malformed reply: {self._redact(str(exc))[:300]}", None
            self._watch(True, last)
            wait = backoff_delay(attempts, self.settings, retry_after)
            spent = time.perf_counter() - started
            if attempts > self.settings.max_retries or spent + wait >= self.settings.max_wait_s:
                self._record_failure(metric, model, attempts)
                s = self.settings
                why = (f"the retry limit fired: max_retries={s.max_retries}; {s.variable('max_retries')} raises it"
                       if attempts > s.max_retries else
                       f"the time limit fired: max_wait_s={s.max_wait_s:g} would pass before another retry; "
                       f"{s.variable('max_wait_s')} raises it")
                raise LLMTransientError(
                    f"gave up on model {model!r} at {where} after {attempts} requests in {spent:.1f} s ({why}); "
                    f"last error: {last}",
                    model=model, metric=metric, attempts=attempts, status=last_status, limit=why,
                )
            # Waiting happens outside the semaphore so other calls can use the slot.
            self.retry_waits_s.append(wait)
            await asyncio.sleep(wait)

    def _watch(self, failed: bool, error: str = "") -> None:
        with self._lock:
            alert = self.failures.add(failed, error, redact_url(self.settings.resolved_base_url),
                                      self.settings.env_prefix)
        if alert is not None:
            warnings.warn(alert, RuntimeWarning, stacklevel=3)
            print(f"WARNING: {alert}", file=sys.stderr, flush=True)

    def failure_note(self) -> str | None:
        """The running failure-rate warning of this client, if it fired (for a report's notes)."""
        return self.failures.alert

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
        treated the same) when its structure is wrong. The JSON is read from the reply's final answer, never
        from reasoning (:func:`~ragnb.llm.replies.extract_json`). An empty, refused, truncated
        (finish_reason=length), reasoning-only or unparseable reply triggers a re-ask — the final answer and
        a correction are appended to the conversation — at most ``reask_budget`` times; then
        :class:`LLMOutputError`. Replies are cached only when the call ends with a value ``parse`` accepted
        (its re-asked steps with it, so a re-run replays them); a call that failed is not cached at all.
        """
        if not callable(parse):
            raise ValueError("parse must be a callable that turns the decoded JSON into your result")
        response_format = {"type": "json_object"} if self.settings.json_response_format else None
        conversation = list(messages)
        results: list[ChatResult] = []
        keeps: list[Callable[[], None]] = []
        reason = ""
        for _ in range(1 + self.settings.reask_budget):
            result, keep = await self._complete(conversation, model=model, temperature=temperature,
                                                max_tokens=max_tokens, seed=seed, metric=metric, cache=cache,
                                                response_format=response_format, extra_params=None, in_chain=True)
            results.append(result)
            keeps.append(keep)
            try:
                obj = extract_json(result.text, result.finish_reason, result.refusal)
            except ValueError as exc:
                reason = str(exc)
            else:
                try:
                    value = parse(obj)
                except ValueError as exc:
                    reason = f"the JSON does not have the expected structure: {exc}"
                except (TypeError, KeyError, IndexError) as exc:
                    reason = f"the JSON does not have the expected structure: {type(exc).__name__}: {exc}"
                else:
                    for keep in keeps:  # the re-asked replies too: a re-run replays the call with 0 requests
                        keep()
                    return value, results
            conversation = conversation + [
                # The reasoning is not sent back: it is long, and the correction is about the answer.
                {"role": "assistant", "content": strip_reasoning(result.text) or result.refusal
                 or "(a reply without a final answer)"},
                {"role": "user", "content": reask_message(reason)},
            ]
        last = results[-1].text
        raise LLMOutputError(
            f"model {model!r} gave no usable JSON in {len(results)} replies; last problem: {reason}; "
            f"last reply starts with {last[:200]!r}",
            raw_text=last, reason=reason, results=results, model=model, metric=metric,
            attempts=sum(r.attempts for r in results),
        )


def _nothing() -> None:
    """``keep()`` of a reply that is not to be stored (a cache hit, or the cache is off)."""


def _payload(resp: Any) -> dict[str, Any]:
    """What a 200 reply holds. An error object in it (OpenRouter relays upstream failures this way, with
    or without choices) or ``finish_reason="error"`` is a :class:`MalformedReply`: retried, never scored.
    ``reasoning`` / ``reasoning_content`` fields are the model's thoughts, not its answer: only their
    length is kept."""
    choices = getattr(resp, "choices", None)
    error = (getattr(resp, "model_extra", None) or {}).get("error")
    if not choices or error:
        raise MalformedReply(f"{'an error object' if error else 'no choices'} in the reply{f': {error}' if error else ''}")
    choice = choices[0]
    if getattr(choice, "finish_reason", None) == "error":
        raise MalformedReply(f"finish_reason=error in the reply: {(getattr(choice, 'model_extra', None) or {}).get('error')}")
    message = getattr(choice, "message", None)
    content = (getattr(message, "content", None) if message is not None else None) or ""
    refusal = getattr(message, "refusal", None) if message is not None else None
    extra = (getattr(message, "model_extra", None) or {}) if message is not None else {}
    reasoning = extra.get("reasoning") or extra.get("reasoning_content") or ""
    usage = getattr(resp, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
    return {
        "text": str(content),
        "refusal": str(refusal) if refusal else None,
        "reasoning_chars": len(str(reasoning)),
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
    if not is_number(temperature) or not 0 <= temperature <= 2:
        raise ValueError(f"temperature={temperature!r} must be a number in [0, 2]")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r} must be an integer >= 1")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ValueError(f"seed={seed!r} must be an integer or None")
    if extra_params is not None and not isinstance(extra_params, dict):
        raise ValueError("extra_params must be a dict of extra request fields, or None")

