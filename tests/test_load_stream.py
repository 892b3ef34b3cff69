"""``ragnb load`` reads a file a batch at a time (ragnb.store.readers, FileRows/FolderRows, merge_rows' batches), on the
real embedded PostgreSQL: a file of many batches loads exactly as it does in one batch, whatever its format; a bad
row, a repeated id or a value the column refuses in a later batch is named by its own line and leaves the table as
it was; the readers really stream (a record is given before the end of the file is read)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from ragnb.io import iter_lines, read_text
from ragnb.store.loaders import load_file
from ragnb.store.readers import read_records
from ragnb.store.schema import ensure_schema

BATCH = 7  # rows a batch in these tests: files of 40–50 rows span 6–8 batches
ONE_BATCH = 10**6


def _chunk_rows(n: int = 45) -> list[dict]:
    """Chunks with what COPY and JSON escape; some without url; row 23 repeats row 2 exactly (skipped, once)."""
    rows = [{"id": f"wiki/p{i // 3}#{i % 3}", "text": f"Абзац {i}\tс табом\nи строкой «{i}» \\ конец",
             "url": None if i % 5 == 0 else f"https://wiki.example.com/p{i // 3}"} for i in range(n)]
    rows.insert(23, dict(rows[2]))
    return rows


def _write(path: Path, rows: list[dict]) -> Path:
    """``rows`` as JSONL, CSV or Parquet by the suffix (a missing cell stays missing in each)."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        pd.DataFrame(rows).to_parquet(path, row_group_size=10)  # row groups of 10 across batches of 7
    return path


def _table(db, kind: str = "chunks") -> list[tuple]:
    t = ensure_schema(db)
    table = t.chunk if kind == "chunks" else t.question
    cols = [c for c in table.columns if c.key != "embedding"]
    with db.engine.connect() as c:
        return [tuple(r) for r in c.execute(sa.select(*cols).order_by(table.c.id))]


def _stats(stats) -> tuple:
    return stats.rows, stats.inserted, stats.already_present, stats.updated, stats.warnings, stats.urls_updated


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_file_of_many_batches_loads_as_one_batch_does(fresh_db, tmp_path, suffix):
    rows = _chunk_rows()
    f = _write(tmp_path / f"c{suffix}", rows)
    many = load_file(fresh_db, "chunks", f, batch_rows=BATCH)
    streamed = _table(fresh_db)
    with fresh_db.engine.begin() as c:
        c.execute(sa.text("TRUNCATE chunk"))
    one = load_file(fresh_db, "chunks", f, batch_rows=ONE_BATCH)
    assert streamed == _table(fresh_db)
    assert _stats(many) == _stats(one) == (45, 45, 0, [], [], 0)  # the repeat of row 2 counted once
    expected = sorted((r["id"], r["text"], r["url"]) for r in rows[:23] + rows[24:])
    assert sorted((i, text, url) for i, url, text in streamed) == expected  # (id, url, text) in the table's order


def test_questions_of_many_batches_load_as_one_batch_does(fresh_db, tmp_path):
    rows = [{"question_id": f"q{i}", "question": f"Вопрос {i}?", "answer": None if i % 4 else f"Ответ {i}",
             "score": str(1 + i % 5), "created_at": f"2024-05-{1 + i % 28:02d}T12:00:00+03:00",
             "session_id": f"s{i // 6}", "channel": "web"} for i in range(40)]
    f = _write(tmp_path / "q.csv", rows)
    many = load_file(fresh_db, "questions", f, batch_rows=BATCH)
    streamed = _table(fresh_db, "questions")
    with fresh_db.engine.begin() as c:
        c.execute(sa.text("TRUNCATE question_answer"))
    one = load_file(fresh_db, "questions", f, batch_rows=ONE_BATCH)
    assert streamed == _table(fresh_db, "questions") and len(streamed) == 40
    # the unused column is found over the whole file and reported once
    assert _stats(many) == _stats(one) and many.warnings == [
        f"{f}: column(s) ['channel'] are not loaded (fields: ['answer', 'created_at', 'id', 'question', 'score', "
        "'session_id', 'url', 'user_id']); if one holds a field, name it with --map FIELD=COLUMN, e.g. --map url=channel"]


@pytest.mark.parametrize("suffix, where", [(".jsonl", "44"), (".csv", "45"), (".parquet", "44")])
def test_a_bad_row_in_the_last_batch_names_its_line_and_writes_nothing(fresh_db, tmp_path, suffix, where):
    load_file(fresh_db, "chunks", _write(tmp_path / f"a{suffix}", [{"id": "old", "text": "было", "url": "https://w/0"}]))
    before = _table(fresh_db)
    rows = _chunk_rows(42)  # 43 rows with the repeat: row 44 (0-based 43) is alone in the last batch of 7
    rows.append({"id": "bad", "text": "", "url": "https://w/bad"})
    f = _write(tmp_path / f"b{suffix}", rows)
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f, batch_rows=BATCH)
    # JSONL: physical line 44; CSV: line 45 (the header is line 1); Parquet: row 44
    assert str(err.value) == (f"{f}:{where}: field 'text' (column text / chunk_text / content / body) is missing or "
                              "empty; every row needs it")
    assert _table(fresh_db) == before


def test_a_repeated_id_in_another_batch_is_refused_naming_both_lines(fresh_db, tmp_path):
    rows = _chunk_rows(30)
    rows.append({"id": rows[1]["id"], "text": "другой текст", "url": rows[1]["url"]})  # line 32 repeats line 2
    f = _write(tmp_path / "c.jsonl", rows)
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f, batch_rows=BATCH)
    assert str(err.value) == (f"{f}:32: field 'id' = 'wiki/p0#1' repeats line 2 with different content; "
                              "ids must be unique")
    assert _table(fresh_db) == []


def test_a_value_the_column_refuses_in_a_later_batch_is_named_by_its_line(fresh_db, tmp_path):
    """The server numbers the lines of each batch's COPY: line 4 of the third batch is the file's line 18."""
    load_file(fresh_db, "chunks", _write(tmp_path / "a.jsonl", [{"id": "old", "text": "было", "url": "https://w/0"}]))
    with fresh_db.engine.begin() as c:
        c.execute(sa.text("ALTER TABLE chunk ALTER COLUMN confluence_url TYPE varchar(40)"))
    before = _table(fresh_db)
    rows = [{"id": f"c{i}", "text": f"текст {i}", "url": f"https://w/{i}"} for i in range(25)]
    rows[17]["url"] = "https://wiki.example.com/a/very/long/page/name"
    f = _write(tmp_path / "b.jsonl", rows)
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f, batch_rows=BATCH)
    assert str(err.value) == (f"{f}:18: field 'url' (id 'c17') cannot be stored in chunk: value too long for type "
                              "character varying(40); fix the value at its source")
    assert _table(fresh_db) == before


def test_changed_rows_of_every_batch_are_named_in_file_order(fresh_db, tmp_path):
    rows = _chunk_rows(30)
    load_file(fresh_db, "chunks", _write(tmp_path / "a.jsonl", rows), batch_rows=BATCH)
    edited = [dict(r) for r in rows]
    for k in (25, 3, 16):  # lines 26, 4 and 17 (line k + 1), in three different batches
        edited[k]["text"] += " (правка)"
    f = _write(tmp_path / "b.jsonl", edited)
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", f, batch_rows=BATCH)
    assert str(err.value).startswith(f"{f}:4: field 'id' = 'wiki/p1#0' is already stored with a different text "
                                     "(3 such row(s))")
    stats = load_file(fresh_db, "chunks", f, batch_rows=BATCH, update=True)
    assert stats.updated == [f"{f}:4 id=wiki/p1#0", f"{f}:17 id=wiki/p5#1", f"{f}:26 id=wiki/p8#0"]
    assert (stats.rows, stats.inserted, stats.already_present) == (30, 0, 27)


def test_a_folder_loads_page_by_page_as_in_one_batch_and_names_changed_chunks(fresh_db, tmp_path):
    wiki = tmp_path / "wiki"
    pages = {f"s{k % 3}/page{k}.md": " ".join(f"слово{k}_{w}" for w in range(23)) for k in range(12)}
    pages["s0/front.md"] = "---\nid: fm\nurl: https://wiki.example.com/fm\n---\n" + "один два три четыре пять"
    for name, text in pages.items():
        (wiki / name).parent.mkdir(parents=True, exist_ok=True)
        (wiki / name).write_text(text, encoding="utf-8")
    many = load_file(fresh_db, "chunks", wiki, chunk_size=4, overlap=1, batch_rows=BATCH)
    streamed = _table(fresh_db)
    with fresh_db.engine.begin() as c:
        c.execute(sa.text("TRUNCATE chunk"))
    one = load_file(fresh_db, "chunks", wiki, chunk_size=4, overlap=1, batch_rows=ONE_BATCH)
    assert streamed == _table(fresh_db) and _stats(many) == _stats(one)
    assert many.rows == 12 * 8 + 2  # 23 words in windows of 4 every 3: 8 chunks a page; the front-matter page 2
    (wiki / "s2/page8.md").write_text("новый текст страницы", encoding="utf-8")  # chunk 0 changes, 1–7 vanish
    (wiki / "s0/front.md").write_text("---\nid: fm\n---\nдругой текст", encoding="utf-8")
    stats = load_file(fresh_db, "chunks", wiki, chunk_size=4, overlap=1, batch_rows=BATCH, update=True)
    # the folder's order: s0/front.md before s2/page8.md
    assert stats.updated == [f"{wiki / 's0/front.md'} chunk 0 id=fm#0", f"{wiki / 's2/page8.md'} chunk 0 id=s2/page8.md#0"]


def test_the_readers_stream(tmp_path):
    """Each reader gives its first records before it reaches the end of the file: a broken last line is only
    found when it is read."""
    lines = [json.dumps({"id": i, "text": f"t{i}"}) for i in range(30)]
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n".join(lines) + "\n{broken\n", encoding="utf-8")
    records = read_records(jsonl, BATCH)
    assert [next(records)[0] for _ in range(3)] == [f"{jsonl}:1", f"{jsonl}:2", f"{jsonl}:3"]
    with pytest.raises(ValueError, match=rf"^{jsonl}:31: invalid JSON at column 2"):
        list(records)
    csv = tmp_path / "c.csv"
    # pandas parses a CSV 256 kB of text at a time: 20,000 lines of 50 bytes are four such blocks; the bad byte
    # follows the 8-byte header, 1,000,000 bytes of rows and "x,"
    csv.write_bytes(b"id,text\n" + b"".join(f"{i:05d},{'t' * 43}\n".encode() for i in range(20_000)) + b"x,\xff\n")
    records = read_records(csv, BATCH)
    assert next(records) == (f"{csv}:2", {"id": "00000", "text": "t" * 43})
    with pytest.raises(ValueError, match=rf"^{csv}:20002: not UTF-8 text \(byte 1000010: "):
        list(records)


def test_iter_lines_says_what_read_text_says(tmp_path):
    """The line reader's checks are read_text's, with the same line (and byte) in the message."""
    cases = {"latin1.txt": "строка 1\nстрока 2\n".encode() + b"caf\xe9\n", "nul.txt": b"a\nb\nc\x00d\n"}
    gz = gzip.compress(("строка\n" * 5000).encode())
    cases["cut.jsonl.gz"] = gz[: len(gz) // 2]
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError) as whole:
            read_text(tmp_path / name, "test file")
        with pytest.raises(ValueError) as streamed:
            list(iter_lines(tmp_path / name, "test file"))
        assert str(streamed.value) == str(whole.value)
    ok = tmp_path / "ok.txt"
    ok.write_bytes("а\r\nб\u2028в\n\nг".encode())
    assert list(iter_lines(ok)) == [(1, "а\r\n"), (2, "б\u2028в\n"), (3, "\n"), (4, "г")]
    assert "".join(line for _, line in iter_lines(ok)) == read_text(ok)
