"""Resumable per-item results: every finished item is appended to a JSONL log as soon as it completes.

A run that is interrupted (Ctrl-C, a killed process, a crash) keeps every line it wrote; started again on
the same log, it skips the items already there and scores only the rest — nothing is re-scored or
duplicated. Each line is ``{"key": ..., "fingerprint": ..., "record": {...}}``; the fingerprint hashes
what the score depends on (metric, models, parameters), so a log written with other settings is not
silently reused: its items are scored again.

A crash can leave a half-written last line; it is ignored on reading (and overwritten by the next append).

Failed items are scored again: a logged record that :func:`record_failed` calls failed (a transient provider
error, an unusable reply, a judge model that failed on it) does not count as done, so running the same run
again retries exactly those items and keeps every finished one. The new record is appended (the last line of a
key wins); :meth:`ItemLog.resume_note` counts the items read, retried and recovered. ``RAGNB_RETRY_FAILED=0``
keeps logged failures as they are.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from ragnb.io import to_jsonable
from ragnb.progress import reporter


def fingerprint(settings: dict[str, Any]) -> str:
    """Stable hash of the settings a score depends on (JSON with sorted keys)."""
    text = json.dumps(to_jsonable(settings), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


FAILED_STATUSES = ("failed", "partial")


def record_failed(record: Any) -> bool:
    """Whether a logged item failed, wholly or in part: a non-empty top-level ``error``, or a ``status`` of
    ``failed`` / ``partial`` anywhere in it (an item's metric, a judge model's verdict). ``undefined`` (nothing
    to judge) is not a failure: asking again would not change it."""
    if isinstance(record, dict):
        if record.get("error"):
            return True
        return record.get("status") in FAILED_STATUSES or any(record_failed(v) for v in record.values())
    if isinstance(record, list):
        return any(record_failed(v) for v in record)
    return False


def _retry_failed_default() -> bool:
    return os.environ.get("RAGNB_RETRY_FAILED", "1").strip().lower() not in ("0", "no", "false", "off")


def failed_logged_items(folder: str | Path, stem: str) -> int:
    """Items whose latest record in ``<folder>/<stem>[.*].items.jsonl`` failed — what a re-run of the run would
    retry (0 when ``RAGNB_RETRY_FAILED=0``). Lets the runner re-execute a finished notebook only then."""
    if not _retry_failed_default():
        return 0
    n = 0
    for path in sorted(Path(folder).glob(f"{stem}*.items.jsonl")):
        latest: dict[tuple[str, str], Any] = {}
        for line in path.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line)
                latest[(entry["fingerprint"], str(entry["key"]))] = entry["record"]
            except (ValueError, KeyError, TypeError):
                continue  # blank or torn line
        n += sum(record_failed(r) for r in latest.values())
    return n


class ItemLog:
    """Append-only JSONL of finished items for one (notebook, metric) of one run.

    ``retry_failed`` (default: on, ``RAGNB_RETRY_FAILED=0`` turns it off): logged items that ``failed``
    (default :func:`record_failed`) are not done — they are scored again and their new record appended."""

    def __init__(self, path: str | Path, fingerprint: str, *, retry_failed: bool | None = None,
                 failed: Callable[[dict], bool] = record_failed):
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._failed = failed
        self._done = self._read()
        retry = _retry_failed_default() if retry_failed is None else retry_failed
        # Logged failures to score again; what became of them is in resume_note().
        self.retried = {k for k, r in self._done.items() if failed(r)} if retry else set()
        for k in self.retried:
            del self._done[k]
        self.read_back = len(self._done)

    def _read(self) -> dict[str, dict]:
        done: dict[str, dict] = {}
        if not self.path.exists():
            return done
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        complete = lines if raw.endswith(b"\n") else lines[:-1]  # a torn last line is dropped
        for line in complete:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # torn line from an older crash
            if entry.get("fingerprint") == self.fingerprint:
                done[str(entry["key"])] = entry["record"]
        if not raw.endswith(b"\n") and raw:
            # Cut the torn tail so the next append starts on a fresh line.
            with self.path.open("r+b") as fh:
                fh.truncate(len(raw) - len(lines[-1]))
        return done

    @property
    def done(self) -> dict[str, dict]:
        return dict(self._done)

    def pending(self, keys: Iterable[str]) -> list[str]:
        return [k for k in keys if k not in self._done]

    @property
    def recovered(self) -> list[str]:
        """Retried keys whose new record no longer failed."""
        return sorted(k for k in self.retried if k in self._done and not self._failed(self._done[k]))

    def resume_note(self) -> str | None:
        """What a resumed run took from this log: items read back, failed items scored again, recovered."""
        if not self.read_back and not self.retried:
            return None
        text = f"Resumed from {self.path.name}: {self.read_back} finished item(s) read back, not scored again"
        if self.retried:
            done = sum(k in self._done for k in self.retried)
            text += (f"; {len(self.retried)} item(s) that had failed were scored again"
                     + (f" — {len(self.recovered)} of {done} recovered" if done else ""))
        return text + "."

    def append(self, key: str, record: dict) -> None:
        if key in self._done:
            return
        line = json.dumps({"key": key, "fingerprint": self.fingerprint, "record": to_jsonable(record)},
                          ensure_ascii=False, allow_nan=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._done[key] = record


async def run_items(keys: list[str], score: Callable[[str], Awaitable[dict]], log: ItemLog | None,
                    concurrency: int = 8, progress: Callable[[int, int], None] | None = None,
                    label: str = "items scored") -> dict[str, dict]:
    """Score every key not yet in ``log`` (``concurrency`` at a time), appending each result the moment it
    is ready; returns key → record for all keys (logged ones included), in ``keys`` order. Without
    ``progress``, ``(done, total)`` goes to the terminal of ``ragnb run`` as ``label`` (:mod:`ragnb.progress`).

    ``score`` must return a JSON-able dict and handle per-item failures itself (recording them as failed);
    an exception escaping it stops the run — everything finished so far is already in the log.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency = {concurrency}; use 1 or more")
    if progress is None:
        progress = reporter(label)
    done = log.done if log is not None else {}
    todo = [k for k in keys if k not in done]
    sem = asyncio.Semaphore(concurrency)
    finished = len(keys) - len(todo)

    async def one(key: str) -> None:
        nonlocal finished
        async with sem:
            record = await score(key)
        if log is not None:
            log.append(key, record)
        done[key] = record
        finished += 1
        if progress is not None:
            progress(finished, len(keys))

    tasks = [asyncio.ensure_future(one(k)) for k in todo]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
    return {k: done[k] for k in keys}
