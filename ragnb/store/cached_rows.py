"""Rows whose vectors the disk cache holds already, found without reading their texts.

The disk cache keys a vector by ``sha256(text as UTF-8)`` (:func:`ragnb.embeddings.cache.text_key`; the
encoder's fingerprint and role name the cache file, not the key). PostgreSQL (≥ 11) computes the same digest with
``sha256(convert_to(text, 'UTF8'))``: in a UTF8 database ``convert_to`` hands the stored bytes over unchanged, and
psycopg decodes those same bytes into the Python ``str`` that ``text_key`` encodes again — so the server hashes
exactly the bytes the client would. ``embed_table`` then reads ids + digests (64 bytes a row instead of the whole
text: on 50,000 chunks of 60–200 words, 56 MB the client no longer reads, decodes and hashes), finds which digests
the cache holds (:meth:`~ragnb.embeddings.cache.EmbeddingCache.locate`), reads their vectors a block at a time
in the cache file's order while the previous block is written (:class:`CachedRows`: memory bounded by the block,
not the table — a whole 1M-row matrix cost 2.4 GB and page faults), and reads the texts of the misses only, which
are encoded as before. A database in another encoding, an older server, an
encoder without ragnb's disk cache or ``RAGNB_EMBEDDING_CACHE=off``: the texts are read and hashed on the client,
as before.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

# The characters for which Python's str.isspace() is true: a text made of these only is "blank", which
# embed_table skips and counts as an error. btrim() with this set in the server decides exactly as longest_first
# does on the client (a test compares both over every character).
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


@contextmanager
def without_cycle_collector() -> Iterator[None]:
    """Python's cycle collector off for a bulk read (re-enabled after, if it was on; cycles made meanwhile are
    collected then). Reading 1M ids + digests and their cached vectors allocates millions of row tuples, and the
    collector runs over and over on them although they hold no cycles: 14.0 s of client CPU with it, 8.9 s without
    (the same rows, the same results). Only the bulk steps of ``embed_table`` run under it, not the encoder."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def role_of(which: str) -> str:
    """The encoder role of a table: chunks are documents, questions are queries."""
    return "document" if which == "chunks" else "query"


def role_cache(encoder: Any, which: str) -> Any:
    """The disk cache ``embed_table`` would read for ``which`` through ``encoder.encode_then_save``, or None
    (an encoder without ragnb's cache, or the cache off)."""
    if not (hasattr(encoder, "encode_then_save") and hasattr(encoder, "cache_for")):
        return None
    return encoder.cache_for(role_of(which))


def server_hashes_utf8(cur) -> bool:
    """Whether the server can compute ``text_key``: PostgreSQL ≥ 11 (``sha256``) with a UTF8 database."""
    cur.execute("SELECT current_setting('server_version_num')::int >= 110000 "
                "AND current_setting('server_encoding') = 'UTF8'")
    return bool(cur.fetchone()[0])


def digest_sql(text_sql: str) -> str:
    """SQL for ``text_key(text)`` as hex, NULL for a row without text (NULL, empty, or only whitespace); takes
    :data:`DIGEST_PARAMS` as its parameters.

    A stored text over ~2 kB is compressed, and every function that reads it decompresses it again; ``btrim``
    also walks every character of a multibyte string. So the blank test looks at the first 64 characters first
    (``left`` decompresses only that slice) and walks the whole text only when those are all whitespace: on
    100,000 Russian chunks of ~2.6 kB the digest query cost the server 2.2 s of CPU instead of 3.3 s."""
    digest = f"encode(sha256(convert_to({text_sql}, 'UTF8')), 'hex')"
    return (f"CASE WHEN {text_sql} IS NULL THEN NULL WHEN ltrim(left({text_sql}, 64), %s) <> '' THEN {digest} "
            f"WHEN btrim({text_sql}, %s) = '' THEN NULL ELSE {digest} END")


DIGEST_PARAMS = (WHITESPACE, WHITESPACE)


@dataclass
class CachedRows:
    """Rows the disk cache holds vectors for, found by their digests, their texts not read: ``ids`` with their
    cache ``keys`` and ``handles`` (:meth:`~ragnb.embeddings.cache.EmbeddingCache.locate`, in the cache
    file's order), ``blank`` rows without text. ``read_texts(ids)`` reads ``(id, text)`` rows back, for
    entries that turn out unusable when read (replaced meanwhile, damaged): those rows are encoded instead."""

    cache: Any
    ids: list[str]
    keys: list[str]
    handles: np.ndarray
    version: tuple[int, int]
    blank: int
    read_texts: Callable[[list[str]], list[tuple]]

    def __len__(self) -> int:
        return len(self.ids)

    def blocks(self, size: int) -> Iterator[tuple[list[str], np.ndarray, list[str]]]:
        """``(ids, vectors, unusable ids)`` ``size`` rows at a time; one query a block."""
        for start in range(0, len(self.ids), size):
            ids = self.ids[start:start + size]
            vecs, ok = self.cache.read_located(self.handles[start:start + size], self.keys[start:start + size],
                                               self.version)
            if ok.all():
                yield ids, vecs, []
            else:
                yield ([i for i, good in zip(ids, ok) if good], vecs[ok],
                       [i for i, good in zip(ids, ok) if not good])


def split_cached(rows: list[tuple], cache: Any, read_texts: Callable[[list[str]], list[tuple]]
                 ) -> tuple[CachedRows, list[str]]:
    """``(id, digest or None)`` rows, ordered by digest (bytewise, NULLs last) → the rows ``cache`` holds
    (:class:`CachedRows`, rows without text counted there) and the ids to encode."""
    ids, keys = zip(*rows) if rows else ((), ())
    blank = keys.count(None)
    keys = keys[:len(keys) - blank]  # a NULL elsewhere (rows out of order) would be a miss: read, then counted blank
    where, handles, version = cache.locate(keys, ordered=True)
    found = np.zeros(len(keys), dtype=bool)
    found[where] = True
    hits = CachedRows(cache, [ids[i] for i in where], [keys[i] for i in where], handles, version, blank, read_texts)
    return hits, ([] if found.all() else [ids[i] for i in np.flatnonzero(~found)])
