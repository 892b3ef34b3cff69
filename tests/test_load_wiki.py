"""Loading a team's wiki and question log as they are: Markdown front matter, --url-template, logged URLs that
do (or do not) match the chunk URLs, semicolon CSVs from Excel, unknown column names, and broken front matter."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

import team_wiki
from db_env import cli_on_new_db
from ragnb.store.loaders import count_rows, insert_rows, load_file
from ragnb.store.readers import sniff_delimiter
from ragnb.store.schema import tables



@pytest.fixture
def cli():
    return cli_on_new_db("wiki")


def _last_json(output: str) -> dict:
    start = output.rindex("\n{") + 1 if "\n{" in output else output.index("{")
    return json.loads(output[start:])


def _stored(db) -> dict[str, tuple[str, str]]:
    t = tables(db.schema).chunk
    with db.engine.connect() as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute(sa.select(t.c.id, t.c.url, t.c.text)).all()}


def _expected_chunks() -> dict[str, tuple[str, str]]:
    """id → (url, text), chunked independently: WIKI_CHUNK_SIZE whitespace words, no overlap, body only."""
    out = {}
    for rel, (prefix, url) in team_wiki.WIKI_EXPECTED.items():
        words = team_wiki.wiki_body(rel).split()
        size = team_wiki.WIKI_CHUNK_SIZE
        for n, start in enumerate(range(0, len(words), size)):
            out[f"{prefix}#{n}"] = (url, " ".join(words[start:start + size]))
    return out


def test_front_matter_and_url_template_give_real_page_urls(fresh_db, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    stats = load_file(fresh_db, "chunks", wiki, chunk_size=team_wiki.WIKI_CHUNK_SIZE, overlap=0,
                      url_template=team_wiki.TEMPLATE)
    expected = _expected_chunks()
    assert stats.inserted == len(expected) == 12  # 21, 22, 25, 13 words → 3 + 3 + 4 + 2 chunks of 8
    assert _stored(fresh_db) == expected
    stored = _stored(fresh_db)
    assert not any("---" in text or "tags" in text or "owner" in text for _, text in stored.values())
    assert stored["ops-vpn#0"][0] == "https://wiki.example.com/display/OPS/VPN"  # front-matter url and id


def test_without_a_template_urls_stay_relative_paths(fresh_db, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    load_file(fresh_db, "chunks", wiki, chunk_size=team_wiki.WIKI_CHUNK_SIZE, overlap=0)
    urls = {cid.split("#")[0]: url for cid, (url, _) in _stored(fresh_db).items()}
    assert urls == {"ops-vpn": "https://wiki.example.com/display/OPS/VPN", "ru/hr/отпуск.md": "ru/hr/отпуск.md",
                    "en/dev/deploy.md": "en/dev/deploy.md", "en/dev/rollback.markdown": "en/dev/rollback.markdown"}


@pytest.mark.parametrize("template, url", [
    ("https://w.example/{stem}", "https://w.example/rollback"),
    ("https://w.example/{name}", "https://w.example/rollback.markdown"),
    ("https://w.example/{relpath}", "https://w.example/en/dev/rollback.markdown"),
    ("https://w.example/x/{title}", "https://w.example/x/Rollback"),  # the first heading
    ("https://w.example/{id}", "https://w.example/en/dev/rollback"),
])
def test_template_placeholders(fresh_db, tmp_path, template, url):
    wiki = tmp_path / "wiki"
    (wiki / "en" / "dev").mkdir(parents=True)
    (wiki / "en" / "dev" / "rollback.markdown").write_text(team_wiki.WIKI["en/dev/rollback.markdown"], encoding="utf-8")
    load_file(fresh_db, "chunks", wiki, url_template=template)
    assert {u for u, _ in _stored(fresh_db).values()} == {url}


def test_title_placeholder_takes_front_matter_then_heading(fresh_db, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    load_file(fresh_db, "chunks", wiki, url_template="https://w.example/{title}")
    urls = {cid.split("#")[0]: url for cid, (url, _) in _stored(fresh_db).items()}
    assert urls == {"ops-vpn": "https://wiki.example.com/display/OPS/VPN",  # its own url wins
                    "en/dev/deploy.md": "https://w.example/Deploying%20a%20service",  # front-matter title
                    "ru/hr/отпуск.md": "https://w.example/%D0%9E%D1%82%D0%BF%D1%83%D1%81%D0%BA",  # "# Отпуск"
                    "en/dev/rollback.markdown": "https://w.example/Rollback"}


def test_log_urls_match_after_url_template(cli, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    log = team_wiki.write_wiki_log(tmp_path / "log.jsonl")
    res = cli("load", "chunks", str(wiki), "--url-template", team_wiki.TEMPLATE, "--chunk-size", "8", "--overlap", "0")
    assert res.exit_code == 0, res.output
    assert _last_json(res.stdout)["inserted"] == 12 and "warning" not in res.stderr
    res = cli("load", "questions", str(log))
    assert res.exit_code == 0, res.output
    # w1–w4 name wiki pages (after normalisation: scheme, www., case, anchor, slash, Cyrillic); w5 does not;
    # w6 has no url.
    assert _last_json(res.stdout)["url_match"] == {"logged_urls": 5, "matched": 4}
    assert "4 of 5 logged question URLs match" in res.stderr
    assert "'https://wiki.example.com/ru/canteen'" in res.stderr


def test_unmatched_log_urls_warn_with_examples_and_the_fix(cli, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    (wiki / "ru" / "ops" / "vpn.md").write_text(team_wiki.wiki_body("ru/ops/vpn.md"), encoding="utf-8")
    cli("load", "chunks", str(wiki))  # no template, no front-matter url: relative paths
    res = cli("load", "questions", str(team_wiki.write_wiki_log(tmp_path / "log.jsonl")))
    assert res.exit_code == 0, res.output
    assert _last_json(res.stdout)["url_match"] == {"logged_urls": 5, "matched": 0}
    err = " ".join(res.stderr.split())
    assert "0 of 5 logged question URLs match a chunk URL" in err
    assert "'https://wiki.example.com/display/OPS/VPN#форма'" in err  # an example of each side
    assert "vs chunk 'en/dev/deploy.md'" in err
    assert "--url-template" in err and "front matter" in err and "ragnb/datasets/urls.py" in err
    # w2's path /ru/hr/отпуск ends with the chunk path ru/hr/отпуск(.md): the template that would match
    assert "look like the chunk paths under --url-template 'http://www.wiki.example.com/{path}'" in err

    # The fix: reload with the template. Same ids and texts, new urls (vectors stay valid: no --update needed).
    (wiki / "ru" / "ops" / "vpn.md").write_text(team_wiki.WIKI["ru/ops/vpn.md"], encoding="utf-8")
    res = cli("load", "chunks", str(wiki), "--url-template", team_wiki.TEMPLATE)
    assert res.exit_code == 0, res.output
    out = _last_json(res.stdout)
    # one chunk per page (default size): vpn.md now has front matter, so a new id ops-vpn#0 (the old row stays);
    # the other three pages keep their ids and texts and take the template urls
    assert (out["inserted"], out["already_present"], out["urls_updated"]) == (1, 3, 3)
    assert out["url_match"] == {"logged_urls": 5, "matched": 4}


def test_semicolon_csv_from_excel_is_read(fresh_db, tmp_path):
    f = tmp_path / "chunks.csv"
    f.write_bytes("\ufeffid;text;url\n"
                  "k1;\"Москва, столица; России\";https://w/1\n"
                  "k2;Paris is the capital of France.;https://w/2\n".encode("utf-8"))
    stats = load_file(fresh_db, "chunks", f)
    assert stats.inserted == 2 and stats.warnings == []
    assert _stored(fresh_db) == {"k1": ("https://w/1", "Москва, столица; России"),
                                 "k2": ("https://w/2", "Paris is the capital of France.")}


@pytest.mark.parametrize("logged, chunks, template", [
    (["https://wiki.example.com/display/X"], ["ops/vpn.md"], None),  # no logged path ends with a chunk path
    (["https://w.example/space/ops/vpn#a", "https://w.example/ops/x"], ["vpn.md", "ops/vpn.md"],
     "https://w.example/space/{path}"),  # the longest chunk path gives the prefix
    (["https://w.example/a/b/"], ["https://w.example/a/c", "b.txt"], "https://w.example/a/{path}"),
])
def test_suggested_template(logged, chunks, template):
    from ragnb.datasets.urls import suggest_template

    assert suggest_template(logged, chunks) == template


@pytest.mark.parametrize("header, delimiter", [
    ("id,text,url", ","), ("id;text;url", ";"), ("id\ttext\turl", "\t"), ("id|text|url", "|"),
    ("text", ","), ('"a;b",c', ","),
])
def test_sniff_delimiter(header, delimiter):
    assert sniff_delimiter(header) == delimiter


def test_unknown_headers_list_the_columns_and_point_to_map(cli, tmp_path):
    f = tmp_path / "export.csv"
    f.write_text("Заголовок;Содержание;Ссылка\nVPN;Заявку подают в сервис-деске.;https://w/vpn\n", encoding="utf-8")
    res = cli("load", "chunks", str(f))
    assert res.exit_code == 2
    err = " ".join(res.output.split())
    assert f"{f}: no column for the required field 'text'" in err
    assert "columns found: ['Заголовок', 'Содержание', 'Ссылка']" in err and "--map text=" in err
    res = cli("load", "chunks", str(f), "--map", "text=Содержание,url=Ссылка")
    assert res.exit_code == 0, res.output
    assert _last_json(res.stdout)["inserted"] == 1
    assert "column(s) ['Заголовок'] are not loaded" in " ".join(res.stderr.split())
    res = cli("load", "chunks", str(f), "--map", "text=Body")
    assert res.exit_code == 2 and "no column 'Body'" in res.output


def test_unused_column_warns_when_a_field_is_loaded(fresh_db, tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("id,text,link\nc1,Text one.,https://w/1\n", encoding="utf-8")
    stats = load_file(fresh_db, "chunks", f)
    assert stats.inserted == 1 and _stored(fresh_db) == {"c1": (None, "Text one.")}
    assert len(stats.warnings) == 1 and "['link']" in stats.warnings[0] and "--map url=link" in stats.warnings[0]


@pytest.mark.parametrize("text, needle", [
    ("---\nurl: https://w/x\ntitle: VPN: доступ\n---\nbody", ":3: front matter is not valid YAML"),
    ("---\ntitle: [unclosed\n---\nbody", ":3: front matter is not valid YAML"),
    ("---\nurl: https://w/x\nbody without an end", ":1: front matter opened with '---' is never closed"),
    ("---\n- a list\n---\nbody", ":2: front matter must be 'key: value' lines"),
    ("---\nurl: [a, b]\n---\nbody", "front matter 'url' = ['a', 'b'] must be one line of text"),
])
def test_bad_front_matter_names_file_and_line(fresh_db, tmp_path, text, needle):
    wiki = tmp_path / "wiki"
    (wiki / "ok").mkdir(parents=True)
    (wiki / "ok" / "a.md").write_text("fine page", encoding="utf-8")
    bad = wiki / "ok" / "b.md"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_file(fresh_db, "chunks", wiki)
    assert str(err.value).startswith(str(bad)) and needle in str(err.value), str(err.value)
    assert count_rows(fresh_db, "chunks")["rows"] == 0  # nothing written, a.md neither


def test_bad_options_for_folders_and_templates(fresh_db, tmp_path):
    wiki = team_wiki.write_bilingual_wiki(tmp_path / "wiki")
    (wiki / "en" / "copy.md").write_text("---\nid: ops-vpn\n---\ntext", encoding="utf-8")
    with pytest.raises(ValueError, match="vpn.md: front matter 'id' = 'ops-vpn' is also the id of .*copy.md; page ids must be unique"):
        load_file(fresh_db, "chunks", wiki)
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \['slug'\]; use \{path\}"):
        load_file(fresh_db, "chunks", wiki, url_template="https://w/{slug}")
    f = tmp_path / "c.csv"
    f.write_text("text\nx\n", encoding="utf-8")
    with pytest.raises(ValueError, match="--url-template applies to a folder"):
        load_file(fresh_db, "chunks", f, url_template="https://w/{path}")


def test_insert_rows_counts_what_it_skips(fresh_db):
    rows = [{"id": f"c{i}", "url": "u", "text": f"t{i}"} for i in range(3)]
    assert insert_rows(fresh_db, "chunks", rows).as_dict() == {"inserted": 3, "skipped": 0}
    more = rows + [{"id": "c3", "url": "u", "text": "t3"}]
    assert insert_rows(fresh_db, "chunks", more).as_dict() == {"inserted": 1, "skipped": 3}
    assert insert_rows(fresh_db, "chunks", more).as_dict() == {"inserted": 0, "skipped": 4}  # idempotent
    assert count_rows(fresh_db, "chunks")["rows"] == 4
