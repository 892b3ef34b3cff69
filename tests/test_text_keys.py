"""Each text's cache key is stored with its row (``ragnb_text_key``), computed when the row is written or its text
changes, never when only its vector does; ``ragnb embed`` reads it instead of hashing every text; an old database
gains it once, its vectors untouched; a table ragnb did not create in an external database is never altered."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import sqlalchemy as sa

from ragnb.embeddings.cache import text_key
from ragnb.store.schema import ensure_schema
from ragnb.store.text_keys import KEY_COLUMN, KEY_FUNCTION, has_key_column
from ragnb.store.upsert import merge_rows
from ragnb.store.vectors import _binary_rows, _rows_or_cached, embed_table, fetch_vectors

from test_cached_rows import BLANKS, TRICKY, _load, _Recording


def _keys(db, table: str = "chunk", id_col: str = "id") -> dict[str, str | None]:
    return dict(_binary_rows(db, f"SELECT {id_col}, encode({KEY_COLUMN}, 'hex') FROM {table}", vectors=False))


def _columns(db, table: str = "chunk") -> set[str]:
    return {r[0] for r in _binary_rows(db, "SELECT attname FROM pg_attribute WHERE attrelid = CAST(%s AS regclass) "
                                           "AND attnum > 0 AND NOT attisdropped", (table,), vectors=False)}


def _old_layout(db) -> None:
    """The tables as ragnb created them before the stored key: no key column, no key function."""
    ensure_schema(db)
    with db.engine.begin() as conn:
        for table in ("chunk", "question_answer"):
            conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {KEY_COLUMN}"))
        conn.execute(sa.text(f"DROP FUNCTION {KEY_FUNCTION}(text)"))


def test_the_stored_key_is_the_client_cache_key_and_null_for_blank_texts(fresh_db):
    _load(fresh_db, {**TRICKY, **BLANKS})
    assert KEY_COLUMN in _columns(fresh_db) and KEY_COLUMN in _columns(fresh_db, "question_answer")
    assert _keys(fresh_db) == {**{i: text_key(x) for i, x in TRICKY.items()}, **{i: None for i in BLANKS}}
    merge_rows(fresh_db, "questions", [{"id": "q1", "question": "Где ёлка?"}])
    assert _keys(fresh_db, "question_answer") == {"q1": text_key("Где ёлка?")}
    # embed reads the stored keys only for the text column they were made from (a schema map naming another
    # column of the same table gets digests of that column, computed at embed time)
    with fresh_db.engine.connect() as conn, conn.connection.driver_connection.cursor() as cur:
        assert [has_key_column(cur, table, col) for table, col in (
            ("chunk", "text"), ("chunk", None), ("chunk", "id"), ("question_answer", "question"),
            ("question_answer", "answer"))] == [True, True, False, True, False]


def test_a_changed_text_gets_a_new_key_and_a_new_vector_the_others_keep_theirs(fresh_db, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    _load(fresh_db, {"a": "первый текст", "b": "second text"})
    enc = _Recording()
    embed_table(fresh_db, "chunks", enc, progress=False)
    before = dict(zip(*fetch_vectors(fresh_db)[::2]))
    merge_rows(fresh_db, "chunks", [{"id": "a", "url": "https://wiki.example/p", "text": "изменённый текст"},
                                    {"id": "b", "url": "https://wiki.example/p", "text": "second text"}],
               on_changed="update")
    assert _keys(fresh_db) == {"a": text_key("изменённый текст"), "b": text_key("second text")}
    enc.seen.clear()
    stats = embed_table(fresh_db, "chunks", enc, progress=False)
    assert (stats.processed, stats.skipped, enc.seen) == (1, 1, ["изменённый текст"])
    after = dict(zip(*fetch_vectors(fresh_db)[::2]))
    assert np.array_equal(after["a"], enc._encode_role(["изменённый текст"], "document", 1, False)[0])
    assert after["b"].view(np.uint32).tolist() == before["b"].view(np.uint32).tolist()


def test_embed_reads_the_stored_key_and_vector_writes_never_recompute_it(fresh_db, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    texts = {"a": "alpha text", "b": "бета текст", "c": "gamma text"}
    _load(fresh_db, texts)
    # From now on the key function gives a wrong digest: any key computed after this point is recognisably wrong.
    with fresh_db.engine.begin() as conn:
        conn.execute(sa.text(f"CREATE OR REPLACE FUNCTION {KEY_FUNCTION}(t text) RETURNS bytea LANGUAGE sql "
                             "IMMUTABLE STRICT AS $$ SELECT sha256(convert_to('wrong:' || t, 'UTF8')) $$"))
    enc = _Recording()
    planted = np.full((3, 8), 0.5, dtype=np.float32)
    enc.cache_for("document").put_many([text_key(x) for x in texts.values()], planted)
    stats = embed_table(fresh_db, "chunks", enc, progress=False)
    # every vector came from the cache under the keys stored at load time, none was encoded ...
    assert (stats.processed, enc.seen) == (3, [])
    # ... and writing the vectors, reloading the same texts, refreshing a column left every key as it was
    merge_rows(fresh_db, "chunks", [{"id": i, "url": "https://wiki.example/new", "text": x} for i, x in texts.items()],
               refresh=("url",))
    assert _keys(fresh_db) == {i: text_key(x) for i, x in texts.items()}
    # a text changed now takes the (wrong) function's key, and embed looks that key up, not a fresh hash: though
    # the cache holds the new text's vector, the row is a miss whose text is read (the encoder's own cache serves it)
    merge_rows(fresh_db, "chunks", [{"id": "c", "url": "https://wiki.example/p", "text": "alpha text"}],
               on_changed="update")
    assert _keys(fresh_db)["c"] == text_key("wrong:alpha text")
    t = ensure_schema(fresh_db)
    todo, hits = _rows_or_cached(fresh_db, t.chunk, t.chunk.c.text, enc, "chunks",
                                 f" WHERE {KEY_COLUMN} IS NOT NULL")
    assert (todo, sorted(hits.ids)) == ([("c", "alpha text")], ["a", "b"])


def test_an_old_database_gains_the_keys_once_with_progress_and_its_vectors_unchanged(fresh_db, tmp_path,
                                                                                    monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    _old_layout(fresh_db)
    old = dataclasses.replace(fresh_db, embedded=False)  # filled as the ragnb before the stored key did
    texts = {**TRICKY, **BLANKS, **{f"r{i}": f"строка {i}" for i in range(40)}}
    _load(old, texts)
    enc = _Recording()
    half = dict(list(texts.items())[:20])
    enc.cache_for("document").put_many([text_key(x) for x in half.values() if x.strip()],
                                       np.full((sum(1 for x in half.values() if x.strip()), 8), 0.25, np.float32))
    embed_table(old, "chunks", enc, progress=False)  # the old layout: the server hashes the texts
    ids, _, before = fetch_vectors(fresh_db)
    assert KEY_COLUMN not in _columns(fresh_db)
    progress = tmp_path / "progress.jsonl"
    monkeypatch.setenv("RAGNB_PROGRESS_FILE", str(progress))
    ensure_schema(fresh_db)
    n = len(texts)
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [(r["label"], r["done"], r["total"]) for r in lines] == [
        ("adding text digests to chunk (once)", 0, n), ("adding text digests to chunk (once)", n, n)]
    assert _keys(fresh_db) == {i: (text_key(x) if x.strip() else None) for i, x in texts.items()}
    ids2, _, after = fetch_vectors(fresh_db)
    assert ids2 == ids and after.view(np.uint32).tolist() == before.view(np.uint32).tolist()
    progress.unlink()
    ensure_schema(fresh_db)  # once: nothing to do the second time
    assert not progress.exists()
    stats = embed_table(fresh_db, "chunks", enc, progress=False)
    assert (stats.processed, stats.skipped) == (0, len(TRICKY) + 40)


def test_an_external_table_ragnb_did_not_create_is_never_altered_and_still_embeds(fresh_db, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    _old_layout(fresh_db)
    external = dataclasses.replace(fresh_db, embedded=False)  # what a --write production database looks like
    texts = {"a": "alpha text", "b": "бета текст", "blank": " \u3000"}
    _load(external, texts)
    assert KEY_COLUMN not in _columns(fresh_db)
    enc = _Recording()
    planted = np.array([[0.5] * 8, [1.5] * 8], dtype=np.float32)
    enc.cache_for("document").put_many([text_key("alpha text"), text_key("бета текст")], planted)
    stats = embed_table(external, "chunks", enc, progress=False)  # digests computed from the texts, as before
    assert (stats.processed, stats.errors, enc.seen) == (2, 1, [])
    ids, _, stored = fetch_vectors(external)
    assert ids == ["a", "b"] and stored.view(np.uint32).tolist() == planted.view(np.uint32).tolist()
    assert KEY_COLUMN not in _columns(fresh_db)


def test_a_table_ragnb_creates_in_an_external_database_gets_the_keys(fresh_db):
    external = dataclasses.replace(fresh_db, embedded=False)
    ensure_schema(external)
    assert KEY_COLUMN in _columns(fresh_db) and KEY_COLUMN in _columns(fresh_db, "question_answer")


def test_mapped_tables_in_their_own_schema_get_keys_of_their_text_column(tmp_path, monkeypatch):
    from ragnb.store.engine import connect

    (tmp_path / "schema.yaml").write_text("chunk: {table: kb.chunks, id: chunk_id, text: content}\n"
                                          "question: {table: kb.qa_log, question: asked}\n", encoding="utf-8")
    monkeypatch.setenv("RAGNB_SCHEMA_MAP", str(tmp_path / "schema.yaml"))
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "cache"))
    db = connect(database=f"tk_mapped_{tmp_path.name[-12:].replace('-', '_')}")
    try:
        merge_rows(db, "chunks", [{"id": "a", "url": "https://wiki.example/p", "text": "текст в схеме kb"}])
        assert _keys(db, "kb.chunks", "chunk_id") == {"a": text_key("текст в схеме kb")}
        with db.engine.connect() as conn, conn.connection.driver_connection.cursor() as cur:
            assert has_key_column(cur, "kb.chunks", "content") and has_key_column(cur, "kb.qa_log", "asked")
        enc = _Recording()
        enc.cache_for("document").put_many([text_key("текст в схеме kb")], np.full((1, 8), 0.75, np.float32))
        stats = embed_table(db, "chunks", enc, progress=False)
        assert (stats.processed, enc.seen) == (1, [])
        assert fetch_vectors(db)[2].tolist() == [[0.75] * 8]
    finally:
        db.dispose()
