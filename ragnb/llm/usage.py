"""Token, latency and cost accounting for LLM calls.

Every call the client finishes (or gives up on) becomes one :class:`CallRecord` in a
:class:`UsageLedger`. :meth:`UsageLedger.summary` sums them per run, per metric and per model into a
JSON-able dict for the metrics JSON.

Cached calls: a reply served from the disk cache cost nothing *now*, but it did cost something when it
was first fetched. The summary therefore keeps the two apart: ``tokens_in``, ``tokens_out`` and
``cost_usd`` count only what this run sent over HTTP ("spent now"); ``cached_tokens_in``,
``cached_tokens_out`` and ``cached_cost_usd`` count what was answered from the cache (at today's prices).
Their sum is what the evaluation costs from a cold cache.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

_BUCKET_KEYS = (
    "calls",
    "cached_calls",
    "failed_calls",
    "http_requests",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "unpriced_calls",
    "cached_tokens_in",
    "cached_tokens_out",
    "cached_cost_usd",
    "latency_s_total",
    "latency_s_mean",
)


@dataclass(frozen=True)
class CallStats:
    """What one LLM call cost: tokens, latency, price, whether the cache answered, HTTP requests sent.

    ``attempts`` is the number of HTTP requests (0 for a cache hit). ``latency_s`` is the duration of the
    successful HTTP request (not the backoff waits); ~0 for cache hits. ``cost_usd`` is None when the model
    has no entry in the price table (or the endpoint reported no usage).
    """

    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float | None
    cached: bool
    attempts: int


@dataclass(frozen=True)
class CallRecord(CallStats):
    """One logical LLM call (one ``chat``) of ``metric``, successful or failed. A failed call
    (``failed=True``) has no tokens or cost but its HTTP requests are counted."""

    metric: str = ""
    failed: bool = False


class _Bucket:
    __slots__ = ("calls", "cached_calls", "failed_calls", "http_requests", "tokens_in", "tokens_out",
                 "cost_usd", "unpriced_calls", "cached_tokens_in", "cached_tokens_out", "cached_cost_usd",
                 "latency_s_total", "_timed_calls")

    def __init__(self) -> None:
        self.calls = self.cached_calls = self.failed_calls = self.http_requests = 0
        self.tokens_in = self.tokens_out = self.unpriced_calls = 0
        self.cached_tokens_in = self.cached_tokens_out = 0
        self.cost_usd = self.cached_cost_usd = self.latency_s_total = 0.0
        self._timed_calls = 0

    def add(self, r: CallRecord) -> None:
        self.http_requests += r.attempts
        if r.failed:
            self.failed_calls += 1
            return
        self.calls += 1
        if r.cost_usd is None:
            self.unpriced_calls += 1
        if r.cached:
            self.cached_calls += 1
            self.cached_tokens_in += r.tokens_in
            self.cached_tokens_out += r.tokens_out
            self.cached_cost_usd += r.cost_usd or 0.0
            return
        self.tokens_in += r.tokens_in
        self.tokens_out += r.tokens_out
        self.cost_usd += r.cost_usd or 0.0
        self.latency_s_total += r.latency_s
        self._timed_calls += 1

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in _BUCKET_KEYS if k != "latency_s_mean"}
        # Mean over calls that went over HTTP: cache hits (~0 s) would make the endpoint look faster.
        out["latency_s_mean"] = self.latency_s_total / self._timed_calls if self._timed_calls else None
        return {k: out[k] for k in _BUCKET_KEYS}


class UsageLedger:
    """Thread-safe list of :class:`CallRecord` with per-metric / per-model sums."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def reset(self) -> None:
        with self._lock:
            self._records.clear()

    def summary(self) -> dict[str, Any]:
        """``{"total": {...}, "by_metric": {metric: {...}}, "by_model": {model: {...}}}``.

        Each block has: calls, cached_calls, failed_calls, http_requests, tokens_in, tokens_out, cost_usd,
        unpriced_calls, cached_tokens_in, cached_tokens_out, cached_cost_usd, latency_s_total,
        latency_s_mean (None when no call went over HTTP). Calls without a metric name are grouped under "".
        """
        total = _Bucket()
        by_metric: dict[str, _Bucket] = {}
        by_model: dict[str, _Bucket] = {}
        for r in self.records:
            total.add(r)
            by_metric.setdefault(r.metric, _Bucket()).add(r)
            by_model.setdefault(r.model, _Bucket()).add(r)
        return {
            "total": total.to_dict(),
            "by_metric": {k: b.to_dict() for k, b in sorted(by_metric.items())},
            "by_model": {k: b.to_dict() for k, b in sorted(by_model.items())},
        }

    def to_records(self) -> list[dict[str, Any]]:
        """Per-call rows (e.g. for a DataFrame)."""
        return [asdict(r) for r in self.records]

    def __repr__(self) -> str:
        return f"UsageLedger(calls={len(self)})"
