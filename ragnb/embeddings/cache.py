"""Disk cache of text embeddings, so that no notebook of a run (or of a later run) encodes a text twice.

One sqlite file per encoder fingerprint and role under ``$RAGNB_EMBEDDING_CACHE`` (default
``$RAGNB_HOME/embedding_cache``; ``off`` disables it): :func:`open_encoder_cache` names the file after
``encoder.cache_id(role)`` — a digest of the encoder's fingerprint (backend, model content, prompts,
dimensions, normalisation) and of what the role adds to a text (query vs document prefix, ``input_type``),
so changing a prompt can never serve a stale vector, and a model without prompts shares one file for both
roles. Table ``vectors(key, vec)``: key = sha256 of the text, vec = the float32 vector as bytes; table
``meta(name, value)`` keeps the dimension (an endpoint encoder reads it from there instead of asking the
endpoint) and the encoder's description. The text itself is not stored. A vector read back is bit-identical
to the one the encoder returned when it was first computed. sqlite serialises writers across processes
(WAL mode, 30 s busy timeout).

A second table, ``encode_seconds(key, seconds)``, keeps how long a text took to encode when a caller timed it
(the chunking comparison reports build time from it when the vectors come from the cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragnb import config

_OFF = ("off", "none", "0", "false")
_QUERY_CHUNK = 900  # sqlite's default limit on bound parameters is 999
_MMAP_BYTES = 1 << 32  # sqlite caps it at its build's limit (2 GB by default)
READ_BLOCK = 8192  # vectors read per query by get_matrix (and embed_table's blocks): bounded memory


def cache_dir() -> Path | None:
    """The cache folder, or None when ``RAGNB_EMBEDDING_CACHE`` is ``off``."""
    value = os.environ.get("RAGNB_EMBEDDING_CACHE", "").strip()
    if value.lower() in _OFF and value:
        return None
    return Path(value).expanduser() if value else config.ragnb_home() / "embedding_cache"


def open_cache(model: Any, dim: int | None = None) -> EmbeddingCache | None:
    """The cache in :func:`cache_dir` (None when the cache is off). ``model`` is an encoder (its document
    cache, the one ``encoder.encode`` uses), or a model name with its dimension (a cache of that name alone,
    for callers that know no fingerprint)."""
    if hasattr(model, "cache_id"):
        return open_encoder_cache(model.name, model.cache_id("document"), model.dim)
    if hasattr(model, "name") and hasattr(model, "dim"):  # an encoder without a fingerprint
        model, dim = model.name, model.dim
    folder = cache_dir()
    if dim is None:
        raise ValueError("open_cache(name, dim) needs the dimension, or pass the encoder itself")
    return None if folder is None else EmbeddingCache(folder, model, dim)


def open_encoder_cache(name: str, cache_id: str, dim: int | None) -> EmbeddingCache | None:
    """The cache of one encoder role (``cache_id``); ``dim=None`` opens it to read a dimension stored by an
    earlier run (:meth:`EmbeddingCache.stored_dim`)."""
    folder = cache_dir()
    if folder is None:
        return None
    return EmbeddingCache(folder, name, dim, file_id=cache_id)


def read_stored_dim(name: str, cache_id: str) -> int | None:
    """The dimension an earlier run stored for this encoder role, without creating anything."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / _file_name(name, cache_id)
    if not path.exists():
        return None
    return EmbeddingCache(folder, name, None, file_id=cache_id).stored_dim()


def _file_name(name: str, file_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-80:]
    return f"{slug}-{file_id[:16]}.sqlite3"


# sqlite's words for a file that is not (or no longer) a whole database
_DAMAGED = re.compile(r"not a database|malformed|corrupt|disk image", re.I)


def damaged_cache_error(path: Path, exc: BaseException) -> ValueError:
    """The error for a cache file sqlite cannot read: its path, sqlite's words, and the two ways on."""
    return ValueError(f"embedding cache {path} is damaged (sqlite: {exc}); move it aside (`mv '{path}' "
                      f"'{path}.damaged'`) and run again to encode its texts anew, or run without the cache "
                      "(RAGNB_EMBEDDING_CACHE=off)")


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Text → vector of one model, persisted in sqlite."""

    def __init__(self, folder: str | Path, model: str, dim: int | None, *, file_id: str | None = None) -> None:
        self.dim = None if dim is None else int(dim)
        folder = Path(folder).expanduser()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"RAGNB_EMBEDDING_CACHE={str(folder)!r} cannot be created ({exc.strerror}); "
                             "set it to a writable folder, or to 'off'") from None
        if file_id is not None:
            self.path = folder / _file_name(model, file_id)
        else:  # by name and dimension (callers without a fingerprint)
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)[-80:]
            self.path = folder / f"{slug}-{hashlib.sha256(model.encode()).hexdigest()[:8]}-{dim}.sqlite3"
        self._lock = threading.Lock()
        self._writes = 0  # put_many calls through this connection (see version)
        with self._locked():
            self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            # reads through a memory map, not a read() per page into sqlite's own 2 MB page cache: looking up
            # 50,000 vectors cost 0.27 s of CPU that way, 0.16 s mapped (a limit, not an allocation)
            self._conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
            self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS encode_seconds (key TEXT PRIMARY KEY, seconds REAL NOT NULL)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        stored = self.stored_dim()
        if self.dim is None:
            self.dim = stored
        elif stored is None:
            self.set_meta("dim", str(self.dim))
        elif stored != self.dim:
            raise ValueError(f"embedding cache {self.path} holds {stored}-d vectors of {model!r} but the encoder "
                             f"makes {self.dim}-d ones; delete that file (or set RAGNB_EMBEDDING_CACHE elsewhere)")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The connection's lock; a damaged file (sqlite: "not a database", "malformed") becomes a ValueError
        naming the file and the fix — not a ``sqlite3.DatabaseError`` from deep inside an embedding run."""
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and not _DAMAGED.search(str(exc)):
                    raise  # busy, locked, disk full: not the file's content
                raise damaged_cache_error(self.path, exc) from None

    def stored_dim(self) -> int | None:
        value = self.get_meta("dim")
        return None if value is None else int(value)

    def get_meta(self, name: str) -> str | None:
        with self._locked():
            row = self._conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        with self._locked():
            self._conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        """key → vector for the keys the cache holds (a damaged entry is a miss; the next encode overwrites it)."""
        mat, found = self.get_matrix(list(keys))
        return {key: mat[i] for i, key in enumerate(keys) if found[i]}

    def get_matrix(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of ``keys`` as one float32 ``(len(keys), dim)`` matrix and a bool mask of the keys found
        (a missing or damaged entry: a zero row, False): :meth:`locate`, then :meth:`read_located` a block at a
        time. Callers with many keys that can take the vectors block by block (``embed_table``) use those two
        directly and never hold every vector at once."""
        n, dim = len(keys), self.dim or 0
        out, found = np.zeros((n, dim), dtype=np.float32), np.zeros(n, dtype=bool)
        if not n or not dim:
            return out, found
        where, handles, version = self.locate(keys)
        for start in range(0, len(where), READ_BLOCK):
            part = where[start:start + READ_BLOCK]
            vecs, ok = self.read_located(handles[start:start + READ_BLOCK], [keys[i] for i in part], version)
            out[part[ok]], found[part[ok]] = vecs[ok], True
        return out, found

    def version(self) -> tuple[int, int]:
        """Changes whenever an entry may have changed: a commit by another connection (sqlite's
        ``data_version``, any process) or a write through this one."""
        with self._locked():
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0]), self._writes

    def locate(self, keys: Sequence[str], ordered: bool = False) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        """Which of ``keys`` the cache holds: their positions in ``keys`` and their entries' places in the file
        (sqlite rowids), both ordered by place, and the cache's :meth:`version` when they were found — for
        :meth:`read_located`. Nothing but the key index is read. ``ordered``: the keys come in ascending byte
        order already (the database sorted them).

        Why two steps and these orders: looking 1M random keys up with their vectors (a 2 GB file) cost 9.2 s of
        CPU, most of it cache misses of random reads; the keys probed in sorted order walk the key index
        front to back, and the vectors read in file order walk the table front to back — 3.5 s in all."""
        version = self.version()  # before the lookup: a change during it counts as a change
        if not keys or not self.dim:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64), version
        if ordered:
            probe, probed = None, keys
        else:
            try:
                probe = np.argsort(np.array(keys, dtype="S"), kind="stable")  # cache keys are hex digests: ASCII
            except UnicodeEncodeError:
                probe = np.argsort(np.array(keys, dtype=str), kind="stable")
            probed = [keys[i] for i in probe]
        with self._locked():
            rows = self._conn.execute("SELECT j.key, v.rowid FROM json_each(?) AS j JOIN vectors AS v "
                                      "ON v.key = j.value", (json.dumps(probed),)).fetchall()
        positions, places = zip(*rows) if rows else ((), ())  # zip and np.array: no Python loop per row
        where = np.array(positions, dtype=np.intp)
        where = where if probe is None else probe[where]
        handles = np.array(places, dtype=np.int64)
        order = np.argsort(handles, kind="stable")
        return where[order], handles[order], version

    def read_located(self, handles: np.ndarray, keys: list[str], version: tuple[int, int]
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of entries found by :meth:`locate` (``handles``, with the ``keys`` they were found for and
        the ``version`` it returned) as a float32 matrix, and a mask of those still usable: an entry replaced or
        deleted since (its place now empty or another key's) or damaged (a vector of the wrong length) is False,
        its row zeros. While the cache is unchanged since :meth:`locate`, only the vectors are read (reading each
        entry's key back to check it doubled the cost)."""
        n, dim = len(keys), self.dim or 0
        width, places = dim * 4, json.dumps(handles.tolist())
        if version == self.version():
            with self._locked():  # json_each drives the join: the rows come in the handles' order (checked)
                rows = self._conn.execute("SELECT j.key, v.vec FROM json_each(?) AS j JOIN vectors AS v "
                                          "ON v.rowid = j.value", (places,)).fetchall()
            positions, blobs = zip(*rows) if rows else ((), ())
            if (len(rows) == n and set(map(len, blobs)) <= {width}
                    and np.array_equal(np.array(positions, dtype=np.intp), np.arange(n))):
                return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, dim), np.ones(n, dtype=bool)
        with self._locked():
            rows = self._conn.execute("SELECT j.key, v.key, v.vec FROM json_each(?) AS j JOIN vectors AS v "
                                      "ON v.rowid = j.value", (places,)).fetchall()
        good = [(at, blob) for at, key, blob in rows if key == keys[at] and len(blob) == width]
        out, ok = np.zeros((n, dim), dtype=np.float32), np.zeros(n, dtype=bool)
        where = np.array([at for at, _ in good], dtype=np.intp)
        out[where] = np.frombuffer(b"".join(blob for _, blob in good), dtype=np.float32).reshape(len(good), dim)
        ok[where] = True
        return out, ok

    def put_many(self, keys: list[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.dim is None and len(vectors):
            self.dim = int(vectors.shape[1])
            self.set_meta("dim", str(self.dim))
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors)]
        with self._locked():
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)", rows)
            self._conn.execute("COMMIT")
            self._writes += 1

    def get_seconds(self, keys: list[str]) -> dict[str, float]:
        """key → the encoding seconds recorded for it (keys never timed are absent)."""
        out: dict[str, float] = {}
        with self._locked():
            for start in range(0, len(keys), _QUERY_CHUNK):
                part = keys[start:start + _QUERY_CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, seconds FROM encode_seconds WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                out.update((key, float(seconds)) for key, seconds in rows)
        return out

    def put_seconds(self, keys: list[str], seconds: float) -> None:
        """Record ``seconds`` of encoding per key; the first recording of a key stays (like its vector, it
        describes the first encoding)."""
        with self._locked():
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR IGNORE INTO encode_seconds (key, seconds) VALUES (?, ?)",
                                   [(k, float(seconds)) for k in keys])
            self._conn.execute("COMMIT")

    def __len__(self) -> int:
        with self._locked():
            return int(self._conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
