"""Rows whose vectors the disk cache holds are found by digests the server computes: those digests must be the
client's cache keys byte for byte, the server's "no text" must be the client's, and only the misses' texts are
read and encoded."""

from __future__ import annotations

import sqlite3

import unicodedata

import numpy as np
import pytest
import sqlalchemy as sa

from ragnb.embeddings.cache import text_key
from ragnb.embeddings.base import CachedEncoder
from ragnb.store.cached_rows import DIGEST_PARAMS, WHITESPACE, digest_sql
from ragnb.store.encode_pipeline import longest_first
from ragnb.store.loaders import insert_rows
from ragnb.store.schema import ensure_schema
from ragnb.store.models import quoted_table
from ragnb.store.vectors import _binary_rows, _rows_or_cached, embed_table, fetch_vectors

DIM = 8

TRICKY = {
    "nfc": unicodedata.normalize("NFC", "café crème brûlée"),
    "nfd": unicodedata.normalize("NFD", "café crème brûlée"),  # other bytes, another key: neither side normalises
    "cyrillic": "Поиск по векторам: качество ответа — ёмкость Ё",
    "emoji": "👩‍💻 retrieval 🇺🇦 ✔️ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 (four-byte characters, a ZWJ sequence, a flag)",
    "cjk": "检索增强生成 の評価 — 한국어",
    "bom": "\ufeffa text after a byte-order mark",
    "zero-width": "\u200b",  # not whitespace for Python: a text, not a blank row
    "padded": " \t leading and trailing whitespace kept in the key \u3000\n",
    "crlf": "line one\r\nline two\rline three\n",
    "controls": "bell\x07 escape\x1b delete\x7f next-line\x85",
    "private": "\ue000\U000f0000\U0010ffff",
    "long": "слово word 字 " * 20_000,
    # the server tests the first 64 characters, then the whole text: text after a long indent is not blank
    "late-text": " \u3000" * 40 + "текст после отступа",
    "late-text-long": "\u2003" * 64 + "x" + "слово " * 2_000,
}
BLANKS = {"empty": "", "space": " ", "unicode-spaces": "\u2028\u3000\xa0\t\x1c",
          "long-blank": " \u3000\n" * 3_000}


def _load(db, rows: dict[str, str]) -> None:
    """Chunks with these texts (blank ones written by SQL: the loader refuses them)."""
    t = ensure_schema(db)
    insert_rows(db, "chunks", [{"id": i, "url": "https://wiki.example/p", "text": x} for i, x in rows.items() if x.strip()])
    with db.engine.begin() as conn:
        for i, x in rows.items():
            if not x.strip():
                conn.execute(sa.insert(t.chunk).values(id=i, url="https://wiki.example/p", text=x))


def test_the_server_digest_is_the_client_cache_key_on_tricky_texts(fresh_db):
    _load(fresh_db, {**TRICKY, **BLANKS})
    t = ensure_schema(fresh_db)
    got = dict(_binary_rows(fresh_db, f"SELECT id, {digest_sql('text')} FROM {quoted_table(fresh_db, t.chunk)}",
                            DIGEST_PARAMS, vectors=False))
    assert got == {**{i: text_key(x) for i, x in TRICKY.items()}, **{i: None for i in BLANKS}}
    assert got["nfc"] != got["nfd"]
    # the texts come back from the database unchanged (what the client would hash)
    back = dict(_binary_rows(fresh_db, f"SELECT id, text FROM {quoted_table(fresh_db, t.chunk)}", vectors=False))
    assert back == {**TRICKY, **BLANKS}


def test_the_server_s_blank_is_python_s_blank_for_every_character(fresh_db):
    # every code point PostgreSQL can hold (no NUL, no surrogates), alone: blank on the server iff str.isspace()
    blank = {r[0] for r in _binary_rows(
        fresh_db, "SELECT i FROM generate_series(1, 1114111) AS i WHERE i NOT BETWEEN 55296 AND 57343 "
                  "AND btrim(chr(i), %s) = ''", (WHITESPACE,), vectors=False)}
    assert blank == {i for i in range(1, 0x110000) if not 0xD800 <= i <= 0xDFFF and chr(i).isspace()}
    # and longest_first (the client's rule when it reads the texts) agrees on the rows above
    _, _, skipped = longest_first(list({**TRICKY, **BLANKS}.items()))
    assert skipped == len(BLANKS)


class _Recording(CachedEncoder):
    """Vectors from each text's sha256 (distinct per text); ``seen`` lists the texts the model was given."""

    name, backend, fingerprint, dim = "recording", "test", "r" * 64, DIM
    prompts = {"query": None, "document": None}

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def _encode_role(self, texts, role, batch_size, progress):
        self.seen += texts
        return np.stack([np.frombuffer(bytes.fromhex(text_key(t))[:DIM], dtype=np.uint8) + 1.0 for t in texts])


@pytest.mark.parametrize("side", [False, True], ids=["own column", "vector table"])
def test_embed_reads_only_the_misses_texts_and_stores_the_cached_vectors_bit_for_bit(fresh_db, tmp_path,
                                                                                      monkeypatch, side):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    _load(fresh_db, {**TRICKY, **BLANKS})
    enc = _Recording()
    if side:  # another model holds the column: this one goes to its vector table
        embed_table(fresh_db, "chunks", _other(), progress=False)
    cached_ids = ["nfc", "cyrillic", "emoji", "long", "padded"]
    # the cache holds vectors for some texts, written as encode() writes them, but different from what the
    # model would give now: what is stored must be the cache's
    planted = np.arange(len(cached_ids) * DIM, dtype=np.float32).reshape(-1, DIM) + 0.5
    enc.cache_for("document").put_many([text_key(TRICKY[i]) for i in cached_ids], planted)
    # the texts read are the misses' only; the hits come as ids + the cache's vectors, in the cache file's order
    t = ensure_schema(fresh_db)
    todo, hits = _rows_or_cached(fresh_db, t.chunk, t.chunk.c.text, enc, "chunks")
    assert dict(todo) == {i: x for i, x in TRICKY.items() if i not in cached_ids} and hits.blank == len(BLANKS)
    assert hits.ids == cached_ids
    blocks = list(hits.blocks(2))
    assert [b[0] for b in blocks] == [cached_ids[:2], cached_ids[2:4], cached_ids[4:]]
    assert np.array_equal(np.vstack([b[1] for b in blocks]), planted) and all(b[2] == [] for b in blocks)
    stats = embed_table(fresh_db, "chunks", enc, write_every=3, progress=False)
    misses = [i for i in TRICKY if i not in cached_ids]
    assert sorted(enc.seen) == sorted(TRICKY[i] for i in misses)  # the NFD text is a miss: another key
    assert (stats.processed, stats.errors, stats.skipped) == (len(TRICKY), len(BLANKS), 0)
    ids, _, stored = fetch_vectors(fresh_db, "chunks", "recording" if side else None)
    by_id = dict(zip(ids, stored))
    assert set(ids) == set(TRICKY)
    for i, vec in zip(cached_ids, planted):
        assert by_id[i].view(np.uint32).tolist() == vec.view(np.uint32).tolist()
    for i in misses:
        assert np.array_equal(by_id[i], enc._encode_role([TRICKY[i]], "document", 1, False)[0].astype(np.float32))
    # a second pass: everything has its vector, nothing is encoded
    enc.seen.clear()
    again = embed_table(fresh_db, "chunks", enc, progress=False)
    assert (again.processed, again.skipped, enc.seen) == (0, len(TRICKY), [])


def test_an_entry_unusable_when_read_is_encoded_from_its_text(fresh_db, tmp_path, monkeypatch):
    # found by locate, then replaced by another process or damaged (a vector of the wrong length) before its block
    # is read: the row is encoded from its text like a miss, never stored from a stale or short entry
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    texts = {f"r{i}": f"текст номер {i}" for i in range(6)}
    _load(fresh_db, texts)
    enc = _Recording()
    cache = enc.cache_for("document")
    planted = np.full((6, DIM), 0.25, dtype=np.float32)
    cache.put_many([text_key(x) for x in texts.values()], planted)
    t = ensure_schema(fresh_db)
    todo, hits = _rows_or_cached(fresh_db, t.chunk, t.chunk.c.text, enc, "chunks")
    assert todo == [] and sorted(hits.ids) == sorted(texts)
    with sqlite3.connect(cache.path) as conn:
        conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (b"\0" * 7, text_key(texts["r1"])))  # damaged
    cache.put_many([text_key(texts["r4"])], planted[:1] + 1)  # replaced: a new place in the file
    blocks = list(hits.blocks(4))
    assert sorted(i for b in blocks for i in b[2]) == ["r1", "r4"]
    assert sorted(i for b in blocks for i in b[0]) == ["r0", "r2", "r3", "r5"]
    # through embed_table: those two are encoded from their texts, the rest stored from the cache
    with sqlite3.connect(cache.path) as conn:
        conn.execute("UPDATE vectors SET vec = ? WHERE key = ?", (b"\0" * 7, text_key(texts["r2"])))
    cache.locate = _then(cache.locate, lambda: _delete(cache, text_key(texts["r5"])))  # gone once located
    stats = embed_table(fresh_db, "chunks", enc, write_every=2, progress=False)
    assert sorted(enc.seen) == sorted(texts[i] for i in ("r1", "r2", "r5")) and (stats.processed, stats.errors) == (6, 0)
    stored = dict(zip(*fetch_vectors(fresh_db)[::2]))
    for i in ("r0", "r3", "r4"):  # r4: the cache's entry as it was when read
        assert np.array_equal(stored[i], planted[0] + (1 if i == "r4" else 0))
    for i in ("r1", "r2", "r5"):
        assert np.array_equal(stored[i], enc._encode_role([texts[i]], "document", 1, False)[0].astype(np.float32))


def _delete(cache, key: str) -> None:
    with sqlite3.connect(cache.path) as conn:
        conn.execute("DELETE FROM vectors WHERE key = ?", (key,))


def _then(fn, after):
    """``fn``, then ``after()`` once it has returned (what another process could do in between)."""
    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        after()
        return out
    return wrapped


def _other() -> CachedEncoder:
    other = _Recording()
    other.name = "other"
    return other


def test_a_damaged_cached_vector_is_refused_naming_the_row_and_nothing_is_written(fresh_db, tmp_path, monkeypatch):
    from ragnb.embeddings.base import EmbeddingReplyError

    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    _load(fresh_db, {"a": "first text", "b": "second text"})
    enc = _Recording()
    bad = np.ones((2, DIM), dtype=np.float32)
    bad[1, 3] = np.nan
    enc.cache_for("document").put_many([text_key("first text"), text_key("second text")], bad)
    with pytest.raises(EmbeddingReplyError) as info:
        embed_table(fresh_db, "chunks", enc, progress=False)
    assert str(info.value) == (
        "embedding model 'recording' returned a vector holding NaN at element 3 for row id 'b' of chunk (from the disk "
        "cache); the disk cache holds an unusable vector for it (a damaged file); delete that cache file (see "
        "RAGNB_EMBEDDING_CACHE) and embed again")
    assert fetch_vectors(fresh_db)[0] == [] and enc.seen == []


def test_the_cycle_collector_is_off_only_inside_a_bulk_read_and_back_as_it_was():
    import gc

    from ragnb.store.cached_rows import without_cycle_collector

    assert gc.isenabled()
    with pytest.raises(KeyError):
        with without_cycle_collector():
            assert not gc.isenabled()
            raise KeyError("a failure inside")
    assert gc.isenabled()  # back on, whatever happened inside
    gc.disable()
    try:
        with without_cycle_collector():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
