"""Disk cache of LLM completions (stdlib sqlite3).

One sqlite file, ``<cache_dir>/llm_cache.sqlite3``, table ``llm_calls(key, created_at, model, payload)``.
The key is the sha256 of a canonical JSON of (format version, endpoint base URL, model, messages,
sampling parameters). The API key is not part of the key and is never stored: a team sharing a cache
directory shares answers, not credentials. The payload holds only what the endpoint returned (text,
finish reason, reported model, token counts, original latency); cost is recomputed from the price table
on read. The prompt itself is not stored.

Only usable replies are written: an HTTP error, an error object inside a 200 reply, a refusal, a reply cut
off at ``max_tokens``, one without a final answer, and (for JSON calls) one whose JSON could not be used are
never cached (:func:`ragnb.llm.replies.reply_problem`), so a later run asks again once the provider has
recovered. An entry that breaks this rule (an older cache) is read as a miss.
sqlite serialises writers across threads and processes (WAL mode, 30 s busy timeout), so parallel
notebooks can share one cache.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

CACHE_FORMAT = "ragnb-llm-cache/1"
CACHE_FILENAME = "llm_cache.sqlite3"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def cache_key(base_url: str, model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """sha256 over endpoint, model, messages and sampling parameters (never the API key)."""
    material = {
        "format": CACHE_FORMAT,
        "base_url": base_url.rstrip("/"),
        "model": model,
        "messages": messages,
        "params": params,
    }
    return hashlib.sha256(_canonical(material).encode("utf-8")).hexdigest()


class LLMCache:
    """Key → completion payload, persisted in sqlite."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.dir = Path(cache_dir).expanduser()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"cache_dir={str(self.dir)!r} cannot be created ({exc.strerror}); "
                "pass another cache_dir or cache_dir=None to disable the LLM cache"
            ) from None
        self.path = self.dir / CACHE_FILENAME
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS llm_calls ("
                " key TEXT PRIMARY KEY, created_at REAL NOT NULL, model TEXT NOT NULL, payload TEXT NOT NULL)"
            )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT payload FROM llm_calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            payload = json.loads(row[0])
        except ValueError:
            return None  # a damaged entry is a miss; the next success overwrites it
        return payload if isinstance(payload, dict) and "text" in payload else None

    def put(self, key: str, model: str, payload: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm_calls (key, created_at, model, payload) VALUES (?, ?, ?, ?)",
                (key, time.time(), model, _canonical(payload)),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM llm_calls")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"LLMCache({str(self.path)!r})"
