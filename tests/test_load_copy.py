"""Loading through COPY into a staging table and one merge (ragnb.store.upsert), on the real embedded PostgreSQL:
awkward text stored exactly, NULL kept apart from '', exact inserted/skipped/changed counts, --update, a value the
column refuses named by file, line and field, and nothing written by a load that fails or is killed midway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from ragnb.store.loaders import count_rows, insert_rows, load_file
from ragnb.store.schema import ensure_schema

REPO = Path(__file__).resolve().parents[1]

# What COPY's text format escapes (tab, newlines, backslash, its NULL marker \N) and what JSON escapes.
AWKWARD = {
    "tabs": "Колонка 1\tколонка 2\tитог",
    "lines": "Строка 1\nстрока 2\r\nстрока 3\n\n",
    "backslashes": 'Путь C:\\Users\\админ\\ и "кавычки", \'апостроф\' и «ёлочки»',
    "null_marker": "\\N",
    "marker_inside": "до \\N после \\. и \\\\ конец",
    "separators": "Абзац\u2028новая строка\u2029абзац\x85NEL\x1cFS\x0bVT\x0cFF",  # JSON leaves them raw
    "long": "длинный текст про VPN и доступ " * 40_000,  # 1.2 M characters, ≈ 2 MB of UTF-8
}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _chunks(db) -> dict:
    t = ensure_schema(db).chunk
    with db.engine.connect() as c:
        return {r.id: (r.url, r.text, r.embedding is not None) for r in c.execute(sa.select(t))}


def _versions(db) -> dict:
    """id → xmin: a row written again gets a new one."""
    with db.engine.connect() as c:
        return dict(c.execute(sa.text("SELECT id, xmin::text FROM chunk")).all())


def test_awkward_text_and_null_vs_empty_are_stored_exactly(fresh_db, tmp_path):
    rows = [{"id": k, "text": v, "url": f"https://wiki.example.com/{k}"} for k, v in AWKWARD.items()]
    rows += [{"id": "no-url", "text": "без ссылки"}, {"id": "empty-url", "text": "пустая ссылка", "url": ""},
             {"id": "\\N", "text": "id is the NULL marker", "url": "\\N"}]
    stats = load_file(fresh_db, "chunks", _jsonl(tmp_path / "c.jsonl", rows))
    assert (stats.rows, stats.inserted, stats.already_present, stats.updated) == (10, 10, 0, [])
    expected = {r["id"]: (r.get("url"), r["text"], False) for r in rows}
    assert expected["no-url"] == (None, "без ссылки", False) and expected["empty-url"][0] == ""
    assert _chunks(fresh_db) == expected
    assert len(_chunks(fresh_db)["long"][1]) == 1_240_000


def test_question_metadata_columns_round_trip(fresh_db, tmp_path):
    f = _jsonl(tmp_path / "q.jsonl", [
        {"id": "q1", "question": "Как настроить VPN?\tвопрос", "answer": "", "confluence_url": "https://w/vpn",
         "score": 5, "user_id": 7, "session_id": "s\\1", "created_at": "2024-05-01T10:00:00+03:00"},
        {"id": 42, "question": "Где логи?", "answer": "В Kibana.\nСтрока 2", "score": None, "user_id": "u8",
         "created_at": "2024-05-02 09:30:00"},
    ])
    stats = load_file(fresh_db, "questions", f)
    assert (stats.inserted, stats.already_present) == (2, 0)
    t = ensure_schema(fresh_db).question
    with fresh_db.engine.connect() as c:
        got = {r.id: r[1:] for r in c.execute(sa.select(t.c.id, t.c.question, t.c.answer, t.c.url, t.c.score,
                                                         t.c.user_id, t.c.session_id, t.c.created_at))}
    assert got == {
        "q1": ("Как настроить VPN?\tвопрос", "", "https://w/vpn", 5, "7", "s\\1",
               datetime(2024, 5, 1, 7, 0, tzinfo=timezone.utc)),
        "42": ("Где логи?", "В Kibana.\nСтрока 2", None, None, "u8", None,
               datetime(2024, 5, 2, 9, 30, tzinfo=timezone.utc)),
    }


def test_counts_changed_rows_and_update(fresh_db, tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", [{"id": "same", "text": "Москва", "url": "https://w/1"},
                                      {"id": "moved", "text": "Париж", "url": "https://w/2"},
                                      {"id": "edited", "text": "Нил", "url": "https://w/3"}])
    assert load_file(fresh_db, "chunks", a).inserted == 3
    with fresh_db.engine.begin() as c:  # vectors on every row, to see which ones the update clears
        c.execute(sa.text("UPDATE chunk SET embedding = '[1,2,3]'"))
    before, versions = _chunks(fresh_db), _versions(fresh_db)
    b = _jsonl(tmp_path / "b.jsonl", [{"id": "same", "text": "Москва", "url": "https://w/1"},
                                      {"id": "new1", "text": "Новый\tабзац", "url": "https://w/4"},
                                      {"id": "moved", "text": "Париж", "url": "https://w/2-new"},
                                      {"id": "edited", "text": "Нил — река", "url": "https://w/3"},
                                      {"id": "new2", "text": "Ещё один", "url": None}])
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", b)
    assert str(err.value) == (f"{b}:4: field 'id' = 'edited' is already stored with a different text (1 such row(s)); "
                              "pass --update to overwrite them, or give new ids")
    assert _chunks(fresh_db) == before and _versions(fresh_db) == versions  # nothing written, url not moved

    stats = load_file(fresh_db, "chunks", b, update=True)
    assert (stats.rows, stats.inserted, stats.already_present, stats.updated, stats.urls_updated) == (
        5, 2, 2, [f"{b}:4 id=edited"], 1)
    assert _chunks(fresh_db) == {"same": ("https://w/1", "Москва", True), "moved": ("https://w/2-new", "Париж", True),
                                 "edited": ("https://w/3", "Нил — река", False),
                                 "new1": ("https://w/4", "Новый\tабзац", False), "new2": (None, "Ещё один", False)}
    assert _versions(fresh_db)["same"] == versions["same"]  # an identical row is not written again

    again = load_file(fresh_db, "chunks", b, update=True)  # loading the same file twice adds nothing
    assert (again.inserted, again.already_present, again.updated, again.urls_updated) == (0, 5, [], 0)


def test_insert_rows_refreshes_listed_columns_and_counts(fresh_db):
    rows = [{"id": "q1", "question": "а", "score": 3, "user_id": "u1"}, {"id": "q2", "question": "б", "score": 4}]
    assert insert_rows(fresh_db, "questions", rows, refresh=("score",)).as_dict() == {"inserted": 2, "skipped": 0}
    more = [{"id": "q1", "question": "другой текст", "score": 5, "user_id": "u9"}, {"id": "q3", "question": "в"}]
    assert insert_rows(fresh_db, "questions", more, refresh=("score",)).as_dict() == {"inserted": 1, "skipped": 1}
    with fresh_db.engine.connect() as c:
        got = dict((r[0], r[1:]) for r in c.execute(sa.text("SELECT id, question, score, user_id FROM question_answer")))
    # q1 keeps its text and user (the demo's rows are never overwritten) but takes the refreshed score
    assert got == {"q1": ("а", 5, "u1"), "q2": ("б", 4, None), "q3": ("в", None, None)}


def test_nul_is_refused_naming_the_line(fresh_db, tmp_path):
    f = _jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "ok"}, {"id": "b", "text": "bad\u0000byte"}])
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f)
    assert str(err.value) == f"{f}:2: field 'text' contains a NUL byte (\\x00); remove it from the source data"
    assert count_rows(fresh_db, "chunks")["rows"] == 0


def test_a_value_the_column_refuses_midway_names_it_and_writes_nothing(fresh_db, tmp_path):
    """A team's table whose url is a varchar(24): row 3's url does not fit; rows 1–2 are not written either."""
    load_file(fresh_db, "chunks", _jsonl(tmp_path / "a.jsonl", [{"id": "old", "text": "старый", "url": "https://w/0"}]))
    with fresh_db.engine.begin() as c:
        c.execute(sa.text("ALTER TABLE chunk ALTER COLUMN confluence_url TYPE varchar(24)"))
    before = _chunks(fresh_db)
    f = _jsonl(tmp_path / "b.jsonl", [{"id": "c1", "text": "один", "url": "https://w/1"},
                                      {"id": "c2", "text": "два", "url": "https://w/2"},
                                      {"id": "c3", "text": "три", "url": "https://wiki.example.com/a/very/long/page"}])
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f)
    assert str(err.value) == (f"{f}:3: field 'url' (id 'c3') cannot be stored in chunk: value too long for type "
                              "character varying(24); fix the value at its source")
    assert _chunks(fresh_db) == before


def _wait(what: str, check, proc: subprocess.Popen | None = None):
    """Poll ``check`` until it returns something truthy (a generous deadline only keeps a broken run from hanging)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"ragnb exited before {what}: {proc.communicate()}")
        time.sleep(0.05)
    pytest.fail(f"never saw {what}")


def test_a_killed_load_leaves_the_table_as_it_was(fresh_db, tmp_path):
    """The client is killed while its merge waits on a lock: the staged rows never reach the table."""
    a = _jsonl(tmp_path / "a.jsonl", [{"id": "keep", "text": "Москва", "url": "https://w/1"}])
    load_file(fresh_db, "chunks", a)
    before = _chunks(fresh_db)
    b = _jsonl(tmp_path / "b.jsonl", [{"id": "keep", "text": "Москва", "url": "https://w/moved"}]
               + [{"id": f"n{i}", "text": f"новый абзац {i}\tс табом"} for i in range(2000)])
    url = fresh_db.engine.url.render_as_string(hide_password=False)
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAGNB_DATABASE_URL": url}
    with psycopg.connect(plain) as lock, psycopg.connect(plain, autocommit=True) as watch:
        lock.execute("LOCK TABLE chunk IN SHARE MODE")  # reads go on; the merge's INSERT waits
        proc = subprocess.Popen([sys.executable, "-m", "ragnb.cli.main", "load", "chunks", str(b), "--write"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = _wait("the merge waiting on the lock", lambda: watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND query LIKE 'INSERT INTO%ragnb_load_staging%'").fetchone(), proc)[0]
        proc.kill()
        proc.wait()
        lock.rollback()  # the merge runs on, finds its client gone and rolls back
        _wait("the killed client's session to end", lambda: watch.execute(
            "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0])
    assert _chunks(fresh_db) == before
    with fresh_db.engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM pg_class WHERE relname = 'ragnb_load_staging'")).scalar() == 0
