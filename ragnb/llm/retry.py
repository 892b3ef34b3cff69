"""When to retry a failed request and how long to wait: ``Retry-After`` headers, exponential backoff, and
telling a permanent refusal (bad key, no quota) from a transient one."""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import openai

from ragnb.llm.settings import LLMSettings

TRANSIENT_STATUS = frozenset({408, 409, 429})


class MalformedReply(Exception):
    """A 200 reply without a usable result (e.g. OpenRouter relaying an upstream error): retried like a 5xx."""


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


def provider_message(exc: openai.APIError) -> tuple[str, str | None]:
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


def is_insufficient_quota(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    marks = {str(getattr(exc, "code", "") or ""), str(getattr(exc, "type", "") or ""),
             str(body.get("code") or ""), str(body.get("type") or "")}
    return "insufficient_quota" in marks



class FailureMonitor:
    """Running share of failed requests over the last ``window`` requests of one client.

    A provider that fails a share of requests persistently (503 on every tenth call, say) costs each of
    those calls its whole retry budget; without a running rate that only shows when the run ends. Once at
    least ``min_requests`` requests were sent and more than ``warn_rate`` of the recent ones failed, the
    client warns — once, with the rate and the last error — and :attr:`alert` keeps the text for reports.
    """

    def __init__(self, warn_rate: float, window: int = 100, min_requests: int = 20) -> None:
        self.warn_rate = warn_rate
        self.window = window
        self.min_requests = min_requests
        self.requests = 0
        self.failed = 0
        self._recent: list[bool] = []
        self.alert: str | None = None

    def rate(self) -> float:
        return sum(self._recent) / len(self._recent) if self._recent else 0.0

    def add(self, failed: bool, error: str = "", where: str = "", prefix: str = "RAGNB_LLM_") -> str | None:
        """Record one request; returns the warning text the first time the rate crosses the threshold."""
        self.requests += 1
        self.failed += failed
        self._recent.append(failed)
        if len(self._recent) > self.window:
            del self._recent[0]
        if self.alert is not None or self.requests < self.min_requests or self.rate() <= self.warn_rate:
            return None
        n_bad = sum(self._recent)
        self.alert = (f"LLM endpoint {where}: {n_bad} of the last {len(self._recent)} requests failed "
                      f"({100 * n_bad / len(self._recent):.0f}%); last error: {error[:200]}. Failed calls are "
                      f"retried within {prefix}MAX_RETRIES / {prefix}MAX_WAIT_S and then counted as failed.")
        return self.alert
