"""Store round trip on the real embedded PostgreSQL + pgvector: loading, idempotency, embeddings, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from ragnb.store.engine import connect, embedded_status
from ragnb.store.loaders import chunk_text, count_rows, load_file
from ragnb.store.schema import tables
from ragnb.store.vectors import check_space, embed_table, fetch_texts, fetch_vectors

CHUNKS = [
    {"id": "a1", "text": "Москва — столица России.", "confluence_url": "https://wiki/x?pageId=1"},
    {"id": "a2", "text": "Paris is the capital of France.", "confluence_url": "https://wiki/x?pageId=2"},
    {"id": "a3", "text": "The Nile is a river in Africa.", "confluence_url": "https://wiki/x?pageId=2"},
]


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_load_jsonl_twice_adds_nothing(fresh_db, tmp_path):
    f = _jsonl(tmp_path / "c.jsonl", CHUNKS)
    first = load_file(fresh_db, "chunks", f)
    second = load_file(fresh_db, "chunks", f)
    assert (first.rows, first.inserted, first.already_present) == (3, 3, 0)
    assert (second.inserted, second.already_present) == (0, 3)
    assert count_rows(fresh_db, "chunks") == {"rows": 3, "embedded": 0}
    assert fetch_texts(fresh_db)["a1"] == "Москва — столица России."


def test_load_csv_and_parquet_questions(fresh_db, tmp_path):
    df = pd.DataFrame({
        "question": ["Как настроить VPN?", "Where is Paris?"], "answer": ["Так.", "France"],
        "score": [5, None], "user_id": [7, 8], "session_id": ["s1", "s1"],
        "created_at": ["2024-05-01T10:00:00Z", "2024-05-01T10:01:00Z"],
    })
    df.to_csv(tmp_path / "q.csv", index=False)
    df.to_parquet(tmp_path / "q.parquet")
    a = load_file(fresh_db, "questions", tmp_path / "q.csv")
    b = load_file(fresh_db, "questions", tmp_path / "q.parquet")
    assert a.inserted == 2
    assert b.inserted == 0  # same content → same derived ids
    t = tables(fresh_db.schema).question
    with fresh_db.engine.connect() as c:
        rows = c.execute(sa.select(t.c.question, t.c.score, t.c.user_id).order_by(t.c.question)).all()
    assert {r.question: (r.score, r.user_id) for r in rows} == {"Как настроить VPN?": (5, "7"), "Where is Paris?": (None, "8")}


@pytest.mark.parametrize("content, needle", [
    ('{"id": "x", "text": "ok"}\n{"id": "y", "text": ""}\n', ":2: field 'text'"),
    ('{"id": "x", "text": "ok"}\nnot json\n', ":2: invalid JSON"),
    ('{"id": "x", "text": "ok"}\n{"id": "x", "text": "other"}\n', ":2: field 'id' = 'x' repeats line 1"),
])
def test_malformed_chunks_name_line_and_field_and_write_nothing(fresh_db, tmp_path, content, needle):
    f = tmp_path / "bad.jsonl"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f)
    assert str(f) in str(err.value) and needle in str(err.value)
    assert count_rows(fresh_db, "chunks")["rows"] == 0


def test_malformed_score_in_csv_names_line(fresh_db, tmp_path):
    f = tmp_path / "q.csv"
    f.write_text("question,score\nfine,5\nbad,7\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"q.csv:3: field 'score' = '7' is outside 1–5"):
        load_file(fresh_db, "questions", f)
    assert count_rows(fresh_db, "questions")["rows"] == 0


def test_folder_chunking(fresh_db, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(" ".join(f"w{i}" for i in range(25)), encoding="utf-8")
    (tmp_path / "docs" / "b.txt").write_text("short text", encoding="utf-8")
    stats = load_file(fresh_db, "chunks", tmp_path / "docs", chunk_size=10, overlap=3)
    # a.md: 25 words, windows start at 0, 7, 14 (step 7), the last covers w14..w23 → then 21.. → 4 windows.
    assert chunk_text(" ".join(f"w{i}" for i in range(25)), 10, 3) == [
        " ".join(f"w{i}" for i in range(0, 10)), " ".join(f"w{i}" for i in range(7, 17)),
        " ".join(f"w{i}" for i in range(14, 24)), " ".join(f"w{i}" for i in range(21, 25))]
    assert stats.inserted == 5
    assert set(fetch_texts(fresh_db)) == {"a.md#0", "a.md#1", "a.md#2", "a.md#3", "b.txt#0"}


def test_incremental_embedding_and_model_mismatch(fresh_db, tmp_path, encoder):
    load_file(fresh_db, "chunks", _jsonl(tmp_path / "c.jsonl", CHUNKS[:2]))
    s1 = embed_table(fresh_db, "chunks", encoder, progress=False)
    assert (s1.total, s1.processed, s1.skipped, s1.errors) == (2, 2, 0, 0)
    load_file(fresh_db, "chunks", _jsonl(tmp_path / "c2.jsonl", CHUNKS))
    s2 = embed_table(fresh_db, "chunks", encoder, progress=False)
    assert (s2.total, s2.processed, s2.skipped) == (3, 1, 2)
    ids, urls, vecs = fetch_vectors(fresh_db)
    assert ids == ["a1", "a2", "a3"] and vecs.shape == (3, 384)
    # Stored vectors equal a fresh encode (float32 round trip through pgvector's text form).
    np.testing.assert_allclose(vecs, encoder.encode([c["text"] for c in CHUNKS]), atol=1e-6)

    class Other:  # a differently named model of another dimension is refused as the table's model, not mixed in
        name, dim = "other-model", 8

    with pytest.raises(ValueError, match="holds vectors of model 'all-MiniLM-L6-v2'.*ragnb embed --chunks --model "
                                         "other-model"):
        check_space(fresh_db, tables(fresh_db.schema).chunk, Other())


def test_embedded_server_is_reused_by_a_second_process(fresh_db):
    import subprocess
    import sys

    pid = embedded_status()["pid"]
    out = subprocess.run([sys.executable, "-c",
                          "from ragnb.store.engine import connect, embedded_status; connect(); print(embedded_status()['pid'])"],
                         capture_output=True, text=True, check=True)
    assert int(out.stdout.strip().splitlines()[-1]) == pid


def test_external_url_is_read_only_unless_write(fresh_db, tmp_path):
    url = fresh_db.engine.url.render_as_string(hide_password=False)
    ro = connect(url=url)
    assert not ro.writable
    with pytest.raises(ValueError, match="read-only"):
        load_file(ro, "chunks", _jsonl(tmp_path / "c.jsonl", CHUNKS))
    rw = connect(url=url, write=True)
    assert load_file(rw, "chunks", tmp_path / "c.jsonl").inserted == 3


def test_a_connection_opened_before_pgvector_existed_is_replaced_once_and_the_pool_kept_after(fresh_db):
    from ragnb.store.engine import vector_unregistered
    from ragnb.store.schema import ensure_schema

    with fresh_db.engine.connect() as conn:  # a new database: no vector type yet, this pooled connection lacks it
        assert conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first() is None
    assert vector_unregistered(fresh_db.engine)
    ensure_schema(fresh_db)  # creates the extension and reopens the pool
    assert not vector_unregistered(fresh_db.engine)
    with fresh_db.engine.connect() as conn:
        vec = conn.connection.driver_connection.execute("SELECT '[1,2.5]'::vector").fetchone()[0]
        kept = conn.connection.driver_connection
    assert vec.to_list() == [1.0, 2.5]  # a pgvector value, not its text form
    ensure_schema(fresh_db)  # the extension exists, every connection knows it: the pool is kept (no reconnect)
    with fresh_db.engine.connect() as conn:
        assert conn.connection.driver_connection is kept
