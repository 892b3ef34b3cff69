"""What used to load without a word: a JSON NaN, float ids from pandas, ids no index can hold, folders without
text, URLs that are not page URLs, a URL template that gives pages one URL, repeated YAML keys. Each is an error
naming the file, line and field (nothing written), or — where the input is legal but suspicious — a warning."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import sqlalchemy as sa

import team_wiki
from db_env import cli_on_new_db
from ragnb.store.loaders import count_rows, load_file
from ragnb.store.schema import ID_MAX_CHARS, tables



@pytest.fixture
def cli():
    return cli_on_new_db("refusals")


def _refused(db, kind, path, message, **kw) -> None:
    """load_file raises exactly ``message`` and writes nothing."""
    with pytest.raises(ValueError) as err:
        load_file(db, kind, path, **kw)
    assert str(err.value) == message
    assert count_rows(db, kind)["rows"] == 0


def _ids(db, kind="chunks") -> dict[str, str | None]:
    t = tables(db.schema).chunk if kind == "chunks" else tables(db.schema).question
    with db.engine.connect() as conn:
        return dict(conn.execute(sa.select(t.c.id, t.c.url)).all())


# ---------------------------------------------------------------------------------------------- NaN in JSON

NOT_JSON = "which is not JSON (Python's json.dumps writes it for a float NaN); write null for a missing value, or a number"


def test_a_json_nan_score_is_an_error_not_a_missing_score(fresh_db, tmp_path, cli):
    f = tmp_path / "log.jsonl"
    # what json.dumps writes for a pandas row with a missing float score
    f.write_text('{"id": "q1", "question": "Как войти в VPN?", "score": 5}\n'
                 '{"id": "q2", "question": "Где логи?", "score": NaN}\n', encoding="utf-8")
    _refused(fresh_db, "questions", f, f"{f}:2: field 'score' is NaN, {NOT_JSON}")
    res = cli("load", "questions", str(f))
    assert res.exit_code == 2 and res.stderr == f"error: {f}:2: field 'score' is NaN, {NOT_JSON}\n"
    f.write_text('{"id": "q1", "question": "Где логи?", "score": null}\n', encoding="utf-8")  # null: missing
    assert load_file(fresh_db, "questions", f).inserted == 1


def test_infinity_anywhere_in_a_json_file_is_named_by_its_field(fresh_db, tmp_path):
    f = tmp_path / "chunks.json"  # a JSON array file: the place is the item and the field
    f.write_text('{"items": [{"id": "c1", "text": "VPN"}, {"id": "c2", "text": "x", "extra": {"w": [1, -Infinity]}}]}',
                 encoding="utf-8")
    with pytest.raises(ValueError, match=r"unsupported file type"):  # .json is not a chunk file type …
        load_file(fresh_db, "chunks", f)
    f = f.rename(tmp_path / "chunks.jsonl")  # … JSON Lines is
    f.write_text('{"id": "c1", "text": "VPN"}\n{"id": "c2", "text": "x", "extra": {"w": [1, -Infinity]}}\n')
    _refused(fresh_db, "chunks", f, f"{f}:2: field 'extra.w[1]' is -Infinity, {NOT_JSON}")


# --------------------------------------------------------------------------------------- float ids (pandas)

FLOAT_FIX = ("ids must be text or integers, and a float is not turned into one. pandas stores an integer column "
             "with gaps as floats (17 → 17.0, a gap → NaN): convert it before writing the file, e.g. df['{f}'] = "
             "df['{f}'].astype('Int64') (or .astype(str)), or give the ids as text")


def test_float_chunk_ids_from_parquet_are_refused_with_the_fix(fresh_db, tmp_path):
    f = tmp_path / "chunks.parquet"
    pd.DataFrame({"id": [1, None, 3], "text": ["a", "b", "c"]}).to_parquet(f)  # pandas makes it 1.0, NaN, 3.0
    _refused(fresh_db, "chunks", f, f"{f}:1: field 'id' = 1.0 is a float; " + FLOAT_FIX.format(f="id"))
    pd.DataFrame({"id": [float("nan")] * 2, "text": ["a", "b"]}).to_parquet(f)  # NaN was a generated hash
    _refused(fresh_db, "chunks", f, f"{f}:1: field 'id' = NaN is a float; " + FLOAT_FIX.format(f="id"))
    q = tmp_path / "log.parquet"
    pd.DataFrame({"id": ["q1", "q2"], "question": ["a?", "b?"], "user_id": [7, None]}).to_parquet(q)
    _refused(fresh_db, "questions", q, f"{q}:1: field 'user_id' = 7.0 is a float; " + FLOAT_FIX.format(f="user_id"))


def test_the_fixed_parquet_loads_with_the_integer_ids(fresh_db, tmp_path):
    f = tmp_path / "chunks.parquet"
    df = pd.DataFrame({"id": [1, None, 3], "text": ["a", "b", "c"], "url": ["https://w/1", None, "ops/c.md"]})
    df.assign(id=df["id"].astype("Int64")).to_parquet(f)  # the fix the message gives
    assert load_file(fresh_db, "chunks", f).inserted == 3
    ids = _ids(fresh_db)
    assert ids["1"] == "https://w/1" and ids["3"] == "ops/c.md"
    derived = [i for i in ids if i not in ("1", "3")]  # the gap: an id derived from the content, as documented
    assert len(derived) == 1 and len(derived[0]) == 16 and ids[derived[0]] is None
    s = tmp_path / "strings.parquet"  # a text id column with a gap: no float anywhere, a gap is missing
    pd.DataFrame({"id": ["x", None], "text": ["d", "e"]}).to_parquet(s)
    assert load_file(fresh_db, "chunks", s).inserted == 2 and "x" in _ids(fresh_db)


def test_a_float_id_in_json_is_refused_too(fresh_db, tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_text('{"id": 17, "question": "a?"}\n{"id": 1.0, "question": "b?"}\n', encoding="utf-8")
    _refused(fresh_db, "questions", f, f"{f}:2: field 'id' = 1.0 is a float; " + FLOAT_FIX.format(f="id"))


# ----------------------------------------------------------------------------------------------- long ids


def test_an_id_longer_than_the_limit_is_refused_with_the_limit(fresh_db, tmp_path):
    assert ID_MAX_CHARS == 512
    long_id = "я" * 10_000
    f = tmp_path / "chunks.csv"
    f.write_text(f"id,text\nc1,VPN\n{long_id},Отпуск\n", encoding="utf-8")
    _refused(fresh_db, "chunks", f,
             f"{f}:3: field 'id' is 10,000 characters long ({'я' * 40!r}…); ids may have at most 512 characters — is "
             "the id column really the text column? Use short ids, or leave the id out to have one derived from the "
             "content")
    q = tmp_path / "log.jsonl"
    q.write_text(json.dumps({"question": "a?", "session_id": "s" * 513}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{q}:1: field 'session_id' is 513 characters long .* at most 512"):
        load_file(fresh_db, "questions", q)
    # exactly 512 Cyrillic characters (1,024 bytes) is stored and read back whole
    f.write_text(f"id,text\n{'я' * 512},Отпуск\n", encoding="utf-8")
    assert load_file(fresh_db, "chunks", f).inserted == 1 and list(_ids(fresh_db)) == ["я" * 512]


def test_a_page_id_longer_than_the_limit_is_refused(fresh_db, tmp_path):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {"a.md": f"---\nid: {'p' * 511}\n---\nтекст страницы"})
    _refused(fresh_db, "chunks", wiki, f"{wiki / 'a.md'} chunk 0: field 'id' is 513 characters long ({'p' * 40!r}…); "
             "ids may have at most 512 characters — is the id column really the text column? Use short ids, or "
             "leave the id out to have one derived from the content")  # the chunk id: p×511 + "#0"
    (wiki / "a.md").write_text(f"---\nid: {'p' * 510}\n---\nтекст страницы", encoding="utf-8")
    assert load_file(fresh_db, "chunks", wiki).inserted == 1  # 512: at the limit


# -------------------------------------------------------------------------------------- folders without text


def test_empty_pages_are_skipped_with_a_warning_each(fresh_db, tmp_path, cli):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {
        "ops/vpn.md": "# VPN\n\nЗаявка на VPN через портал.",
        "ops/empty.md": "",
        "hr/stub.md": "---\ntitle: Отпуск\nurl: https://wiki.example.com/hr/vacation\n---\n\n  \n",
        "notes.txt": " \n\t\n",
    })
    warnings: list[str] = []
    from ragnb.store.markdown import FolderRows

    rows = list(FolderRows(wiki, warnings=warnings))
    assert [r["id"] for r in rows] == ["ops/vpn.md#0"]
    assert warnings == [f"{wiki / 'hr/stub.md'}: only front matter, no text; skipped",
                        f"{wiki / 'notes.txt'}: empty file; skipped",
                        f"{wiki / 'ops/empty.md'}: empty file; skipped"]
    res = cli("load", "chunks", str(wiki))
    assert res.exit_code == 0
    assert res.stderr.splitlines() == [f"warning: {w}" for w in warnings]
    assert json.loads(res.stdout)["inserted"] == 1


def test_a_folder_without_any_text_is_an_error(fresh_db, tmp_path, cli):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {"a.md": "", "b/c.md": "---\ntitle: x\n---\n"})
    message = (f"{wiki}: none of its 2 page file(s) has any text (e.g. {wiki / 'a.md'}: empty file); "
               "nothing to load — check that the files were exported with their content")
    _refused(fresh_db, "chunks", wiki, message)
    res = cli("load", "chunks", str(wiki))
    assert res.exit_code == 2 and res.stderr == f"error: {message}\n"


# ------------------------------------------------------------------------------------------------- URLs

BAD_SCHEME = ("a page URL must start with http:// or https://, or be a path relative to the corpus such as "
              "ops/vpn.md (a host with a port needs its scheme too: https://host:8080/…); fix it at its source")


@pytest.mark.parametrize("yaml_url, stored, scheme", [
    ("javascript:alert(document.cookie)", "javascript:alert(document.cookie)", "javascript"),
    ('"java\\tscript:alert(1)"', "java\tscript:alert(1)", "javascript"),  # a browser drops the tab
    ("data:text/html;base64,PHNjcmlwdD4=", "data:text/html;base64,PHNjcmlwdD4=", "data"),
    ("file:///etc/passwd", "file:///etc/passwd", "file"),
])  # fmt: skip
def test_front_matter_url_must_be_a_page_url(fresh_db, tmp_path, yaml_url, stored, scheme):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {"ok.md": "текст", "bad.md": f"---\nurl: {yaml_url}\n---\nтекст"})
    _refused(fresh_db, "chunks", wiki,
             f"{wiki / 'bad.md'}: front matter 'url' = {stored!r} is a '{scheme}:' URL; {BAD_SCHEME}")


def test_page_urls_that_are_accepted(fresh_db, tmp_path):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {
        "a.md": "---\nurl: HTTPS://Wiki.Example.com/display/OPS/VPN\n---\nтекст",
        "b.md": "---\nurl: http://intranet:8080/pages/12/Отпуск\n---\nтекст",
        "c.md": "---\nurl: wiki.example.com/dev/deploy\n---\nтекст",  # no scheme: compared after normalisation
        "d.md": "текст",  # no url: the relative path
    })
    load_file(fresh_db, "chunks", wiki)
    assert sorted(_ids(fresh_db).values()) == ["HTTPS://Wiki.Example.com/display/OPS/VPN", "d.md",
                                               "http://intranet:8080/pages/12/Отпуск", "wiki.example.com/dev/deploy"]


def test_url_columns_of_files_must_be_page_urls(fresh_db, tmp_path):
    f = tmp_path / "chunks.csv"
    f.write_text("id,text,url\nc1,VPN,https://wiki/vpn\nc2,Отпуск,vbscript:msgbox(1)\n", encoding="utf-8")
    _refused(fresh_db, "chunks", f, f"{f}:3: field 'url' = 'vbscript:msgbox(1)' is a 'vbscript:' URL; {BAD_SCHEME}")
    q = tmp_path / "log.jsonl"
    q.write_text(json.dumps({"question": "a?", "confluence_url": "javascript:alert(1)"}) + "\n", encoding="utf-8")
    _refused(fresh_db, "questions", q, f"{q}:1: field 'url' = 'javascript:alert(1)' is a 'javascript:' URL; {BAD_SCHEME}")


def test_a_template_that_gives_two_pages_one_url_is_an_error(fresh_db, tmp_path, cli):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {"ops/vpn.md": "VPN", "hr/vacation.md": "Отпуск"})
    template = "https://wiki.example.com/home"
    message = (f"{wiki / 'ops/vpn.md'}: --url-template {template!r} gives this page the URL {template!r}, as it does "
               f"{wiki / 'hr/vacation.md'}: it has no placeholder, so every page gets the same URL. Pages sharing a "
               "URL are one page to every URL-based metric; use a placeholder that differs per page, e.g. {path}, "
               "or put url: in the pages' front matter")
    _refused(fresh_db, "chunks", wiki, message, url_template=template)
    res = cli("load", "chunks", str(wiki), "--url-template", template)
    assert res.exit_code == 2 and res.stderr == f"error: {message}\n"
    # {stem} collides for two vpn.md in different folders
    team_wiki.write_wiki(wiki, {"dev/vpn.md": "VPN для разработчиков"})
    with pytest.raises(ValueError, match=r"ops/vpn.md: --url-template 'https://w/\{stem\}' gives this page the URL "
                                         r"'https://w/vpn', as it does .*dev/vpn.md: its placeholders do not tell"):
        load_file(fresh_db, "chunks", wiki, url_template="https://w/{stem}")


def test_a_template_without_placeholder_is_fine_where_pages_do_not_share_it(fresh_db, tmp_path):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {
        "ops/vpn.md": "---\nurl: https://wiki.example.com/vpn\n---\nVPN",  # front matter wins over the template
        "hr/vacation.md": "Отпуск",  # the only page that takes the template
    })
    assert load_file(fresh_db, "chunks", wiki, url_template="https://wiki.example.com/hr").inserted == 2
    assert _ids(fresh_db) == {"ops/vpn.md#0": "https://wiki.example.com/vpn", "hr/vacation.md#0": "https://wiki.example.com/hr"}


def test_a_template_with_another_scheme_is_refused_before_reading_pages(fresh_db, tmp_path):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {"a.md": "текст"})
    _refused(fresh_db, "chunks", wiki, f"--url-template = \"javascript:alert('{{path}}')\" is a 'javascript:' URL; "
             f"{BAD_SCHEME}", url_template="javascript:alert('{path}')")


# ------------------------------------------------------------------------------------------ repeated YAML keys


def test_a_repeated_key_in_a_params_file_is_an_error(tmp_path, cli):
    from ragnb.runs.runner import run_notebooks

    f = tmp_path / "params.yaml"
    f.write_text("dataset_file: data.jsonl\ntier1:\n  top_k: 5\n  n_boot: 100\n  top_k: 50\n", encoding="utf-8")
    message = (f"{f}:5: key 'top_k' is repeated (first at line 3); YAML would keep only the last value — remove one, "
               "or merge them")
    with pytest.raises(ValueError) as err:
        run_notebooks(["tier1"], {}, params_file=f, outputs=tmp_path / "out")
    assert str(err.value) == message and not (tmp_path / "out" / "runs").exists()
    res = cli("run", "tier1", "-f", str(f), "--outputs", str(tmp_path / "out"))
    assert res.exit_code == 2 and res.stderr.endswith(f"\nError: {message}\n") and "Traceback" not in res.output
    # the same key in two sections, and a YAML merge key overridden on purpose, are not repeats
    from ragnb.runs.params import load_params_file

    f.write_text("base: &b {top_k: 5}\ntier1: {<<: *b, top_k: 7}\ntier0:\n  top_k: 5\n", encoding="utf-8")
    assert load_params_file(f) == {"base": {"top_k": 5}, "tier1": {"top_k": 7}, "tier0": {"top_k": 5}}


def test_a_repeated_front_matter_key_names_the_file_and_line(fresh_db, tmp_path):
    wiki = team_wiki.write_wiki(tmp_path / "wiki", {
        "vpn.md": "---\nurl: https://wiki.example.com/old\ntitle: VPN\nurl: https://wiki.example.com/new\n---\nтекст"})
    _refused(fresh_db, "chunks", wiki, f"{wiki / 'vpn.md'}:4: key 'url' is repeated (first at line 2); YAML would "
             "keep only the last value — remove one, or merge them")


# ---------------------------------------------------------------------------- a number where text is expected


@pytest.mark.parametrize("value, says", [(42, "a number (42)"), (3.5, "a number (3.5)"), (True, "true/false (True)"),
                                         (["a", "b"], "a list (['a', 'b'])")])
def test_a_number_in_a_text_field_is_named_as_such_not_as_missing(fresh_db, tmp_path, value, says):
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"id": "c1", "text": "fine"}) + "\n" + json.dumps({"id": "c2", "text": value}) + "\n",
                    encoding="utf-8")
    _refused(fresh_db, "chunks", path,
             f"{path}:2: field 'text' (column text / chunk_text / content / body) holds {says} where text is "
             "expected; write it as text (in quotes, in JSON), or --map the field to the column that holds the text")


def test_a_numeric_question_column_in_parquet_is_named_with_its_row(fresh_db, tmp_path):
    path = tmp_path / "questions.parquet"
    pd.DataFrame({"id": ["q1", "q2"], "question": [17, 18]}).to_parquet(path)
    with pytest.raises(ValueError, match=r"questions\.parquet:1: field 'question' \(column .*\) holds a number \(17\) "
                                         r"where text is expected"):
        load_file(fresh_db, "questions", path)
    assert count_rows(fresh_db, "questions")["rows"] == 0


def test_an_empty_text_is_still_missing_or_empty(fresh_db, tmp_path):
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"id": "c1", "text": "  "}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"chunks\.jsonl:1: field 'text' .* is missing or empty; every row needs it"):
        load_file(fresh_db, "chunks", path)
