"""Annotation reviewers can use: CSV as well as JSON (round trips with Russian text, commas, quotes and line
breaks; Excel's byte-order mark, semicolons and TRUE/FALSE), a corrected url recomputes the relevant chunks,
and rejecting a chunk removes that chunk — or with its url, that page — not the whole context."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import team_wiki
from ragnb.cli.dataset import dataset_app
from ragnb.datasets.annotation import export_annotation, import_annotation, read_annotation
from ragnb.datasets.annotation_chunks import ChunkLookup
from ragnb.datasets.annotation_csv import annotation_csv, read_annotation_csv, write_annotation_csv
from ragnb.datasets.schema import Dataset, DatasetItem, parse_dataset, save_dataset

NASTY = 'Он сказал: "да, конечно",\nа потом — «нет»; 50% , запятые'


def _source() -> Dataset:
    items = [
        DatasetItem(id="r1", question="Как получить доступ к VPN, если я в отпуске?", ground_truth_answer=NASTY,
                    chunk_id="p#0", chunk_text="Первый абзац.\n\nВторой, с запятой.", confluence_url="https://w/p?x=1,2",
                    relevant_chunk_ids=["p#0", "p#1"], context_chunk_ids=["p#0", "p#1"], relevance_unit="page",
                    user_score=5, is_relevant_chunk_matched=None, retrieved_similarities=[0.5, 0.25],
                    retrieved_chunk_ids=["p#1", "q#0"]),
        DatasetItem(id="r2", question='What does "deploy" mean, exactly?', ground_truth_answer=None, chunk_id="q#0",
                    chunk_text='Line one\r\nline "two"', relevant_chunk_ids=[], context_chunk_ids=[],
                    relevance_unit="page", user_score=None, is_relevant_chunk_matched=True,
                    retrieved_similarities=[0.75], retrieved_chunk_ids=[]),
    ]
    return Dataset(name="src", type="real-users", items=items, metadata={"mode": "from-real-questions"})


def _items(ds: Dataset) -> list[dict]:
    return [it.to_json_dict() for it in ds.items]


def test_csv_round_trip_keeps_every_value(tmp_path):
    ann = export_annotation(_source(), "src.json").dataset
    ann.items[0] = DatasetItem.model_validate({**ann.items[0].to_json_dict(), "is_question_ok": True,
                                               "is_chunk_ok": False, "notes": 'см. "VPN", стр. 2\nи ещё'})
    path = write_annotation_csv(ann, tmp_path / "a.csv")
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # the byte-order mark Excel needs to read UTF-8
    back = parse_dataset(read_annotation_csv(path), str(path))
    assert _items(back) == _items(ann)
    assert back.metadata["review_baseline"] == ann.metadata["review_baseline"]
    assert (back.metadata["source_dataset"], back.metadata["source_type"], back.metadata["source_metadata"]) == (
        "src.json", "real-users", {"mode": "from-real-questions"})  # what judge-pipeline --from-annotation checks
    # JSON → CSV → JSON → CSV: the same bytes
    assert annotation_csv(back) == annotation_csv(ann)

    rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline="")))
    header, first = rows[0], dict(zip(rows[0], rows[1]))
    assert header[:12] == ["id", "question", "ground_truth_answer", "confluence_url", "chunk_id", "chunk_text",
                           "relevant_chunk_ids:list", "is_question_ok", "is_answer_ok", "is_chunk_ok",
                           "is_confluence_url_ok", "notes"]
    assert first["relevant_chunk_ids:list"] == "p#0\np#1" and first["ground_truth_answer"] == NASTY
    assert (first["is_question_ok"], first["is_answer_ok"], first["is_chunk_ok"]) == ("true", "", "false")
    assert first["user_score:json"] == "5" and first["retrieved_similarities:json"] == "[0.5, 0.25]"
    assert first["relevance_unit"] == "page" and first["baseline_relevant_chunk_ids:list"] == "p#0\np#1"
    assert len(rows) == 3


def test_csv_saved_by_excel_reads_the_same(tmp_path):
    """Excel in a Russian locale: ';' delimiter, TRUE/FALSE, maybe no byte-order mark, a blank last line."""
    ann = export_annotation(_source(), "src.json").dataset
    text = annotation_csv(ann).lstrip("\ufeff")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    col = rows[0].index("is_answer_ok")
    rows[1][col], rows[2][col] = "TRUE", "нет"
    out = io.StringIO()
    csv.writer(out, delimiter=";", lineterminator="\r\n").writerows(rows + [[""] * len(rows[0])])
    path = tmp_path / "excel.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    back = read_annotation(path)
    assert [it.model_extra["is_answer_ok"] for it in back.items] == [True, False]
    expected = _items(ann)
    expected[0]["is_answer_ok"], expected[1]["is_answer_ok"] = True, False
    assert _items(back) == expected


@pytest.mark.parametrize("edit, needle", [
    (("is_question_ok", "maybe"), ":2 column 'is_question_ok': 'maybe' is not true/false"),
    (("user_score:json", "five"), ":2 column 'user_score:json': not JSON"),
])
def test_bad_csv_cells_name_file_line_and_column(tmp_path, edit, needle):
    ann = export_annotation(_source(), "src.json").dataset
    rows = list(csv.reader(io.StringIO(annotation_csv(ann).lstrip("\ufeff"), newline="")))
    rows[1][rows[0].index(edit[0])] = edit[1]
    path = tmp_path / "bad.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(ValueError) as err:
        import_annotation(path)
    assert str(err.value).startswith(str(path)) and needle in str(err.value)


def test_hand_made_sheet_without_cell_formats(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text('id;question;relevant_chunk_ids;is_question_ok\nq1;"Где VPN; где?";"c1\nc2";да\n',
                    encoding="utf-8")
    ds = read_annotation(path)
    assert ds.items[0].question == "Где VPN; где?" and ds.items[0].relevant_chunk_ids == ["c1", "c2"]
    assert ds.items[0].model_extra["is_question_ok"] is True and ds.metadata == {}


def test_csv_header_without_id_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("question,is_question_ok\nQ?,true\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"x.csv: the CSV header needs the columns id and question; found \['question'"):
        import_annotation(path)


# ------------------------------------------------------------------ the CLI: JSON and CSV give the same dataset


REVIEW = {"a1": {"is_question_ok": False}, "a2": {"is_answer_ok": False},
          "a3": {"is_answer_ok": False, "ground_truth_answer": "Исправленный ответ, с запятой."},
          "a4": {"is_chunk_ok": False}, "a5": {"is_question_ok": True, "is_answer_ok": True, "notes": "ок"}}


def _cli(*args: str):
    return CliRunner().invoke(dataset_app, list(args), catch_exceptions=False)


def _edit_csv(path: Path) -> None:
    text = path.read_text(encoding="utf-8-sig")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    for row in rows[1:]:
        for key, value in REVIEW.get(row[0], {}).items():
            row[rows[0].index(key)] = {True: "TRUE", False: "FALSE"}.get(value, value)
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        csv.writer(fh).writerows(rows)


def test_export_and_import_as_csv_match_json(tmp_path):
    items = [DatasetItem(id=f"a{i}", question=f"Вопрос {i}, с запятой?", ground_truth_answer=f'Ответ "{i}"',
                         chunk_id=f"k{i}", chunk_text=f"Текст {i}.", relevant_chunk_ids=[f"k{i}", f"k{i}b"])
             for i in range(1, 6)]
    src = save_dataset(Dataset(name="src", type="synthetic", items=items), tmp_path / "src.json")
    res = _cli("export-annotation", "--dataset", str(src), "--format", "csv", "--out-dir", str(tmp_path / "ann"))
    assert res.exit_code == 0, res.output
    csv_path = Path(res.stdout.splitlines()[0].removeprefix("wrote "))
    assert csv_path.suffix == ".csv" and csv_path.name.startswith("dataset_export_annotation_")
    res = _cli("export-annotation", "--dataset", str(src), "--output", str(tmp_path / "ann.json"))
    assert res.exit_code == 0, res.output
    _edit_csv(csv_path)
    raw = json.loads((tmp_path / "ann.json").read_text(encoding="utf-8"))
    for it in raw["items"]:
        it.update(REVIEW.get(it["id"], {}))
    (tmp_path / "ann.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")

    outs = {}
    for name, ann in (("csv", csv_path), ("json", tmp_path / "ann.json")):
        res = _cli("import-annotation", "--annotation", str(ann), "--output", str(tmp_path / f"out_{name}.json"))
        assert res.exit_code == 0, res.output
        outs[name] = json.loads((tmp_path / f"out_{name}.json").read_text(encoding="utf-8"))
    assert outs["csv"]["items"] == outs["json"]["items"]
    kept = {it["id"]: it for it in outs["csv"]["items"]}
    assert list(kept) == ["a3", "a4", "a5"]  # a1 question rejected, a2 answer rejected
    assert kept["a3"]["ground_truth_answer"] == "Исправленный ответ, с запятой." and kept["a3"]["review_status"] == "fixed"
    assert kept["a4"]["relevant_chunk_ids"] == ["k4b"] and "chunk_text" not in kept["a4"]
    assert kept["a5"]["notes"] == "ок" and kept["a5"]["review_status"] == "accepted"

    res = _cli("export-annotation", "--dataset", str(src), "--output", str(tmp_path / "x.txt"))
    assert res.exit_code == 2 and "--format" not in res.stderr and "name it *.json" in res.stderr
    res = _cli("export-annotation", "--dataset", str(src), "--format", "xlsx", "--out-dir", str(tmp_path))
    assert res.exit_code == 2 and "--format 'xlsx': use json or csv" in res.stderr


# ------------------------------------------------------------------ corrected urls and rejected chunks/pages


@pytest.fixture
def wiki_db(fresh_db, encoder, tmp_path):
    """The bilingual team wiki (real page urls via --url-template), embedded."""
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    load_file(fresh_db, "chunks", team_wiki.write_bilingual_wiki(tmp_path / "wiki"),
              chunk_size=team_wiki.WIKI_CHUNK_SIZE, overlap=0, url_template=team_wiki.TEMPLATE)
    embed_table(fresh_db, "chunks", encoder, progress=False)
    return fresh_db


def _page(rel: str) -> tuple[list[str], list[str]]:
    """(chunk ids, chunk texts) of a wiki page, chunked by hand."""
    prefix = team_wiki.WIKI_EXPECTED[rel][0]
    words = team_wiki.wiki_body(rel).split()
    size = team_wiki.WIKI_CHUNK_SIZE
    texts = [" ".join(words[i:i + size]) for i in range(0, len(words), size)]
    return [f"{prefix}#{n}" for n in range(len(texts))], texts


def _page_item(item_id: str, rel: str, **kw) -> DatasetItem:
    ids, texts = _page(rel)
    url = team_wiki.WIKI_EXPECTED[rel][1]
    return DatasetItem.model_validate({
        "id": item_id, "question": f"Вопрос про {rel}?", "ground_truth_answer": "Ответ.", "chunk_id": ids[0],
        "chunk_text": "\n\n".join(texts), "confluence_url": url, "relevant_chunk_ids": ids,
        "context_chunk_ids": ids, "relevance_unit": "page", **kw})


def test_review_recomputes_and_narrows_relevant_chunks(wiki_db, tmp_path):
    vpn, vpn_t = _page("ru/ops/vpn.md")
    deploy, deploy_t = _page("en/dev/deploy.md")
    rollback, _ = _page("en/dev/rollback.markdown")
    vacation, vacation_t = _page("ru/hr/отпуск.md")
    mixed = _page_item("i5", "en/dev/rollback.markdown", relevant_chunk_ids=rollback + [deploy[0]])
    items = [_page_item("i1", "ru/ops/vpn.md"), _page_item("i2", "ru/hr/отпуск.md"),
             _page_item("i3", "en/dev/deploy.md"), _page_item("i4", "en/dev/deploy.md"), mixed,
             _page_item("i6", "en/dev/deploy.md")]
    ann = export_annotation(Dataset(name="s", type="real-users", items=items), "s.json").dataset
    edits = {
        "i1": {"is_chunk_ok": False},  # only ops-vpn#0 goes; the other two stay in the context
        # the reviewer pastes the browser's url: http, www., Cyrillic, trailing slash
        "i2": {"is_confluence_url_ok": False, "confluence_url": "http://www.wiki.example.com/en/dev/deploy/"},
        "i3": {"is_chunk_ok": False, "is_confluence_url_ok": False},  # the whole page goes → rejected
        "i4": {"is_confluence_url_ok": False, "confluence_url": "https://wiki.example.com/ru/hr/отпуск"},
        "i5": {"is_chunk_ok": False, "is_confluence_url_ok": False},  # rollback's chunks go, deploy#0 stays
        "i6": {"is_confluence_url_ok": False, "confluence_url": "https://wiki.example.com/nowhere"},
    }
    ann = Dataset(name="a", type="annotation", metadata=ann.metadata, items=[
        DatasetItem.model_validate({**it.to_json_dict(), **edits[it.id]}) for it in ann.items])
    path = write_annotation_csv(ann, tmp_path / "review.csv")  # reviewed in a spreadsheet
    result = import_annotation(path, chunks=lambda: ChunkLookup.from_db(wiki_db))
    out = {it.id: it for it in result.dataset.items}

    assert out["i1"].relevant_chunk_ids == vpn[1:] == out["i1"].model_extra["context_chunk_ids"]
    assert out["i1"].chunk_id == "ops-vpn#1" and out["i1"].chunk_text == "\n\n".join(vpn_t[1:])
    assert out["i2"].relevant_chunk_ids == deploy == ["en/dev/deploy.md#0", "en/dev/deploy.md#1",
                                                      "en/dev/deploy.md#2", "en/dev/deploy.md#3"]
    assert out["i2"].chunk_text == "\n\n".join(deploy_t) and out["i2"].model_extra["review_status"] == "fixed"
    assert "i3" not in out and result.report["dropped_items"] == [{"id": "i3", "index": 2,
                                                                   "reasons": ["chunk_rejected"]}]
    assert out["i4"].relevant_chunk_ids == vacation and out["i4"].chunk_text == "\n\n".join(vacation_t)
    assert out["i5"].relevant_chunk_ids == [deploy[0]] and out["i5"].chunk_id == deploy[0]
    assert "chunk_text" not in out["i5"].to_json_dict() and out["i5"].confluence_url is None
    assert out["i6"].relevant_chunk_ids == [] and out["i6"].chunk_text is None
    assert result.report["adjusted"] == {"chunk_removed": 1, "chunk_text_cleared": 1, "context_reduced": 1,
                                         "corrected_url_not_in_corpus": 1, "page_removed": 1,
                                         "relevant_recomputed": 2, "url_cleared": 1}
    assert any("1 corrected url(s) name a page with no embedded chunk" in w for w in result.warnings)
    assert result.dataset.qrels()["i4"] == {c: 1 for c in vacation}


def test_a_corrected_url_without_the_corpus_says_how_to_give_it(tmp_path):
    ann = export_annotation(Dataset(name="s", type="real-users", items=[_page_item("i1", "ru/ops/vpn.md")]),
                            "s.json").dataset
    ann.items[0] = DatasetItem.model_validate({**ann.items[0].to_json_dict(), "confluence_url": "https://w/x"})
    path = save_dataset(ann, tmp_path / "a.json")
    with pytest.raises(ValueError, match=r"a.json: item 0 \(id 'i1'\): the corrected confluence_url 'https://w/x' "
                                         r"needs the corpus's chunks.*--corpus db\|demo"):
        import_annotation(path)


def test_cli_import_opens_the_corpus_for_a_corrected_url(wiki_db, tmp_path):
    ann = export_annotation(Dataset(name="s", type="real-users", items=[_page_item("i1", "ru/ops/vpn.md")]),
                            "s.json").dataset
    ann.items[0] = DatasetItem.model_validate({**ann.items[0].to_json_dict(), "is_confluence_url_ok": False,
                                               "confluence_url": "https://wiki.example.com/en/dev/rollback#steps"})
    path = write_annotation_csv(ann, tmp_path / "a.csv")
    env = {"RAGNB_EMBEDDED_DB": wiki_db.engine.url.database}
    res = CliRunner().invoke(dataset_app, ["import-annotation", "--annotation", str(path), "--output",
                                           str(tmp_path / "o.json")], env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    item = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))["items"][0]
    assert item["relevant_chunk_ids"] == ["en/dev/rollback.markdown#0", "en/dev/rollback.markdown#1"]
    assert item["review_status"] == "fixed"
    res = CliRunner().invoke(dataset_app, ["import-annotation", "--annotation", str(path), "--corpus", "files",
                                           "--output", str(tmp_path / "p.json")], env=env, catch_exceptions=False)
    assert res.exit_code == 2 and "--corpus 'files': use 'db'" in res.stderr
