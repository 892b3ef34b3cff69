"""Disk cache of text embeddings, so that no notebook of a run (or of a later run) encodes a text twice.

One sqlite file per model and dimension under ``$RAGNB_EMBEDDING_CACHE`` (default
``$RAGNB_HOME/embedding_cache``; ``off`` disables it), table ``vectors(key, vec)``: key = sha256 of the
text, vec = the float32 vector as bytes. The text itself is not stored. A vector read back is bit-identical
to the one the encoder returned when it was first computed. sqlite serialises writers across processes
(WAL mode, 30 s busy timeout).

A second table, ``encode_seconds(key, seconds)``, keeps how long a text took to encode when a caller timed it
(the chunking comparison reports build time from it when the vectors come from the cache).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from pathlib import Path

import numpy as np

from ragnb import config

_OFF = ("off", "none", "0", "false")
_QUERY_CHUNK = 900  # sqlite's default limit on bound parameters is 999


def cache_dir() -> Path | None:
    """The cache folder, or None when ``RAGNB_EMBEDDING_CACHE`` is ``off``."""
    value = os.environ.get("RAGNB_EMBEDDING_CACHE", "").strip()
    if value.lower() in _OFF and value:
        return None
    return Path(value).expanduser() if value else config.ragnb_home() / "embedding_cache"


def open_cache(model: str, dim: int) -> "EmbeddingCache | None":
    """The cache of ``model`` (``dim``-d vectors) in :func:`cache_dir`, or None when the cache is off."""
    folder = cache_dir()
    return None if folder is None else EmbeddingCache(folder, model, dim)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Text → vector of one model, persisted in sqlite."""

    def __init__(self, folder: str | Path, model: str, dim: int) -> None:
        self.dim = int(dim)
        folder = Path(folder).expanduser()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"RAGNB_EMBEDDING_CACHE={str(folder)!r} cannot be created ({exc.strerror}); "
                             "set it to a writable folder, or to 'off'") from None
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)[-80:]
        self.path = folder / f"{slug}-{hashlib.sha256(model.encode()).hexdigest()[:8]}-{self.dim}.sqlite3"
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS encode_seconds (key TEXT PRIMARY KEY, seconds REAL NOT NULL)")

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        width = self.dim * 4
        with self._lock:
            for start in range(0, len(keys), _QUERY_CHUNK):
                part = keys[start:start + _QUERY_CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                for key, blob in rows:
                    if len(blob) == width:  # a damaged entry is a miss; the next encode overwrites it
                        out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, keys: list[str], vectors: np.ndarray) -> None:
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors)]
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)", rows)
            self._conn.execute("COMMIT")

    def get_seconds(self, keys: list[str]) -> dict[str, float]:
        """key → the encoding seconds recorded for it (keys never timed are absent)."""
        out: dict[str, float] = {}
        with self._lock:
            for start in range(0, len(keys), _QUERY_CHUNK):
                part = keys[start:start + _QUERY_CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, seconds FROM encode_seconds WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                out.update((key, float(seconds)) for key, seconds in rows)
        return out

    def put_seconds(self, keys: list[str], seconds: float) -> None:
        """Record ``seconds`` of encoding per key; the first recording of a key stays (like its vector, it
        describes the first encoding)."""
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR IGNORE INTO encode_seconds (key, seconds) VALUES (?, ?)",
                                   [(k, float(seconds)) for k in keys])
            self._conn.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
