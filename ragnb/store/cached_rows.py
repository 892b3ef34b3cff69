"""Rows whose vectors the disk cache holds already, found without reading their texts.

The disk cache keys a vector by ``sha256(text as UTF-8)`` (:func:`ragnb.rag.embedding_cache.text_key`; the
encoder's fingerprint and role name the cache file, not the key). PostgreSQL (≥ 11) computes the same digest with
``sha256(convert_to(text, 'UTF8'))``: in a UTF8 database ``convert_to`` hands the stored bytes over unchanged, and
psycopg decodes those same bytes into the Python ``str`` that ``text_key`` encodes again — so the server hashes
exactly the bytes the client would. ``embed_table`` then reads ids + digests (64 bytes a row instead of the whole
text: on 50,000 chunks of 60–200 words, 56 MB the client no longer reads, decodes and hashes), takes the cached vectors, and reads
the texts of the misses only, which are encoded as before. A database in another encoding, an older server, an
encoder without ragnb's disk cache or ``RAGNB_EMBEDDING_CACHE=off``: the texts are read and hashed on the client,
as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragnb.store.encode_pipeline import role_of

# The characters for which Python's str.isspace() is true: a text made of these only is "blank", which
# embed_table skips and counts as an error. btrim() with this set in the server decides exactly as longest_first
# does on the client (a test compares both over every character).
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


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
    """SQL for ``text_key(text)`` as hex, NULL for a row without text (NULL, empty, or only whitespace); takes the
    :data:`WHITESPACE` set as its one parameter."""
    return (f"CASE WHEN {text_sql} IS NULL OR btrim({text_sql}, %s) = '' THEN NULL "
            f"ELSE encode(sha256(convert_to({text_sql}, 'UTF8')), 'hex') END")


def split_cached(rows: list[tuple], cache: Any) -> tuple[list[str], np.ndarray | None, list[str], int]:
    """``(id, digest or None)`` rows → the ids found in ``cache`` with their vectors (float32, in row order), the
    ids to encode (in row order), and how many rows have no text."""
    keyed = [row for row in rows if row[1] is not None]
    if not keyed:
        return [], None, [], len(rows)
    ids, keys = zip(*keyed)
    vecs, found = cache.get_matrix(list(keys))
    if found.all():
        return list(ids), vecs, [], len(rows) - len(keyed)
    id_array = np.array(ids, dtype=object)
    return (id_array[found].tolist(), vecs[found] if found.any() else None, id_array[~found].tolist(),
            len(rows) - len(keyed))
