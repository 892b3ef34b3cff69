"""Loading never guesses: dates, scores, ids and broken files are errors naming file, line and field, and
nothing is written to the database when a file is refused."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
import sqlalchemy as sa

from ragnb.store.loaders import count_rows, load_file
from ragnb.store.schema import tables

HEADER = "id,question,answer,score,user_id,session_id,created_at\n"
GOOD = [
    "q1,Как настроить VPN?,Через портал.,5,u7,s1,2024-05-01T10:00:00Z\n",
    "q2,А на Mac?,Так же.,4,u7,s1,2024-05-01T10:01:30+03:00\n",
]


def _csv(tmp_path, *bad_rows, name="log.csv"):
    f = tmp_path / name
    f.write_text(HEADER + "".join(GOOD) + "".join(bad_rows), encoding="utf-8")
    return f


def _jsonl(tmp_path, rows, name="log.jsonl"):
    f = tmp_path / name
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return f


def _refused(db, path, *needles, **kw):
    with pytest.raises(ValueError) as err:
        load_file(db, "questions", path, **kw)
    msg = str(err.value)
    assert str(path) in msg
    for n in needles:
        assert n in msg, msg
    assert count_rows(db, "questions")["rows"] == 0  # nothing written
    return msg


@pytest.mark.parametrize("created_at, needle", [
    ("01/02/2024", "is not ISO 8601"),  # 1 Feb or 2 Jan? never guessed
    ("05.06.2024 14:30", "--date-format"),  # Russian order without a format
    ("1714557600", "is not ISO 8601"),  # epoch seconds as text
])
def test_ambiguous_dates_in_csv_are_refused(fresh_db, tmp_path, created_at, needle):
    f = _csv(tmp_path, f"q3,Где логи?,В Kibana.,5,u8,s2,{created_at}\n")
    _refused(fresh_db, f, ":4: field 'created_at'", needle)


def test_epoch_integer_in_jsonl_is_refused(fresh_db, tmp_path):
    f = _jsonl(tmp_path, [{"id": "q1", "question": "Где логи?", "created_at": "2024-05-01"},
                          {"id": "q2", "question": "Как войти?", "created_at": 1714557600}])
    _refused(fresh_db, f, ":2: field 'created_at'", "epoch")


def test_explicit_date_format_parses_russian_dates(fresh_db, tmp_path):
    f = tmp_path / "ru.csv"
    f.write_text("question,created_at\nГде логи?,05.06.2024 14:30\nКак войти?,\n", encoding="utf-8")
    stats = load_file(fresh_db, "questions", f, date_format="%d.%m.%Y %H:%M")
    assert stats.inserted == 2
    t = tables(fresh_db.schema).question
    with fresh_db.engine.connect() as c:
        got = dict(c.execute(sa.select(t.c.question, t.c.created_at)).all())
    assert got["Где логи?"].isoformat() == "2024-06-05T14:30:00+00:00"  # 5 June, as the format says
    assert got["Как войти?"] is None
    bad = tmp_path / "mixed.csv"
    bad.write_text("question,created_at\nГде логи?,2024-06-05\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"mixed.csv:2: field 'created_at' = '2024-06-05' does not match --date-format"):
        load_file(fresh_db, "questions", bad, date_format="%d.%m.%Y")


@pytest.mark.parametrize("score", ["true", "NaN", "5/5", "4.5", "0", "five"])
def test_scores_that_are_not_integers_1_to_5_are_refused_in_csv(fresh_db, tmp_path, score):
    f = _csv(tmp_path, f"q3,Где логи?,В Kibana.,{score},u8,s2,2024-05-02T09:00:00Z\n")
    _refused(fresh_db, f, ":4: field 'score'", repr(score))


@pytest.mark.parametrize("score", [True, 4.5, "5/5", None])
def test_scores_in_jsonl(fresh_db, tmp_path, score):
    f = _jsonl(tmp_path, [{"id": "q1", "question": "Где логи?", "score": 5},
                          {"id": "q2", "question": "Как войти?", "score": score}])
    if score is None:  # an empty cell stays missing
        assert load_file(fresh_db, "questions", f).inserted == 2
    else:
        _refused(fresh_db, f, ":2: field 'score'")


@pytest.mark.parametrize("bad_id", [["a"], {"x": 1}, True, 1.5])
def test_ids_must_be_text_or_integers(fresh_db, tmp_path, bad_id):
    f = _jsonl(tmp_path, [{"id": 17, "question": "Где логи?"}, {"id": bad_id, "question": "Как войти?"}])
    _refused(fresh_db, f, ":2: field 'id'", "ids must be text or integers")


def test_changed_text_under_a_stored_id_needs_update(fresh_db, tmp_path):
    first = _jsonl(tmp_path, [{"id": "q1", "question": "Где логи?"}, {"id": "q2", "question": "Как войти?"}], "a.jsonl")
    assert load_file(fresh_db, "questions", first).inserted == 2
    second = _jsonl(tmp_path, [{"id": "q1", "question": "Где логи?"}, {"id": "q2", "question": "Как войти в VPN?"},
                               {"id": "q3", "question": "Новый вопрос"}], "b.jsonl")
    with pytest.raises(ValueError, match=r"b.jsonl:2: field 'id' = 'q2' is already stored with a different question.*--update"):
        load_file(fresh_db, "questions", second)
    assert count_rows(fresh_db, "questions")["rows"] == 2  # q3 not written either
    stats = load_file(fresh_db, "questions", second, update=True)
    assert (stats.inserted, stats.already_present, stats.updated) == (1, 1, [f"{second}:2 id=q2"])
    t = tables(fresh_db.schema).question
    with fresh_db.engine.connect() as c:
        assert c.execute(sa.select(t.c.question).where(t.c.id == "q2")).scalar_one() == "Как войти в VPN?"


def test_truncated_gzip_is_refused(fresh_db, tmp_path):
    rows = [{"id": f"q{i}", "question": f"Вопрос номер {i}?", "score": 5} for i in range(300)]
    payload = gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())
    f = tmp_path / "log.jsonl.gz"
    f.write_bytes(payload[: len(payload) // 2])
    _refused(fresh_db, f, "corrupt or truncated")
    f.write_bytes(b"not gzip at all\n")
    _refused(fresh_db, f, "corrupt or truncated")


def test_nul_byte_invalid_utf8_and_surrogates_name_the_line(fresh_db, tmp_path):
    f = tmp_path / "nul.csv"
    f.write_bytes((HEADER + "".join(GOOD)).encode() + b"q3,Bad\x00row,x,5,u,s,2024-05-01\n")
    _refused(fresh_db, f, f"{f}:4:", "NUL byte")
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(b'{"question": "ok"}\n' + '{"question": "Caf\u00e9"}\n'.encode("latin-1"))
    _refused(fresh_db, f, f"{f}:2:", "not UTF-8")
    f = tmp_path / "surrogate.jsonl"
    f.write_text('{"question": "ok"}\n{"question": "broken \\ud800 emoji"}\n', encoding="utf-8")
    _refused(fresh_db, f, f"{f}:2:", "lone surrogate")
    f = tmp_path / "nul.parquet"
    pd.DataFrame({"question": ["ok", "bad\x00"]}).to_parquet(f)
    _refused(fresh_db, f, f"{f}:2: field 'question'", "NUL byte")


def test_empty_and_corrupt_files_are_refused(fresh_db, tmp_path):
    f = tmp_path / "empty.csv"
    f.write_text("", encoding="utf-8")
    _refused(fresh_db, f, "CSV file is empty")
    f = tmp_path / "broken.parquet"
    f.write_bytes(b"PAR1garbage")
    _refused(fresh_db, f, "cannot read the Parquet file")


def test_cli_refuses_then_updates_with_flag(tmp_path):
    import os

    from click.testing import CliRunner

    from ragnb.cli.main import build_cli

    env = {"RAGNB_EMBEDDED_DB": f"strict_{os.getpid()}"}

    def invoke(*args):
        return CliRunner().invoke(build_cli(), list(args), env=env, catch_exceptions=False)

    f = _csv(tmp_path, "q3,Где логи?,В Kibana.,5,u8,s2,05.06.2024\n")
    res = invoke("load", "questions", str(f))
    assert res.exit_code == 2
    assert f"{f}:4: field 'created_at'" in res.output and "Traceback" not in res.output and "Aborted" not in res.output
    res = invoke("load", "questions", str(f), "--date-format", "%d.%m.%Y")
    assert res.exit_code == 2 and f"{f}:2: field 'created_at' = '2024-05-01T10:00:00Z' does not match" in res.output
    ok = _csv(tmp_path, name="ok.csv")
    assert json.loads(invoke("load", "questions", str(ok)).output)["inserted"] == 2
    changed = tmp_path / "changed.csv"
    changed.write_text(HEADER + GOOD[0].replace("VPN", "прокси"), encoding="utf-8")
    res = invoke("load", "questions", str(changed))
    assert res.exit_code == 2 and "--update" in res.output
    out = json.loads(invoke("load", "questions", str(changed), "--update").output)
    assert out["updated"] == [f"{changed}:2 id=q1"] and out["inserted"] == 0
