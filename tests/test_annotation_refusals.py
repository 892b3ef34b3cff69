"""Nothing a reviewer wrote is dropped or misread on import-annotation: Excel's booleans in English and Russian
are read; a CSV whose review or baseline columns were renamed or deleted, a ragged row, a chunk id the corpus
does not have and a url that is no page address are refused with the file, the physical line, the column and
the fix. Files are exported, edited as a spreadsheet would save them, and imported, in temporary folders."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import team_wiki
from ragnb.cli.dataset import dataset_app
from ragnb.datasets.annotation import export_annotation, import_annotation
from ragnb.datasets.annotation_chunks import ChunkLookup
from ragnb.datasets.annotation_csv import write_annotation_csv
from ragnb.datasets.schema import Dataset, DatasetItem, save_dataset
from ragnb.io import parse_yes_no

SPELLINGS = "true/false, yes/no, 1/0, да/нет, истина/ложь (any case)"


@pytest.mark.parametrize("word, value", [
    ("TRUE", True), ("FALSE", False), ("ИСТИНА", True), ("ЛОЖЬ", False), ("истина", True), (" Ложь ", False),
    ("да", True), ("НЕТ", False), ("Да", True), ("1", True), ("0", False), ("yes", True), ("No", False),
    ("true", True), ("false", False), (1, True), (0.0, False), (True, True),
    ("Истинно", None), ("maybe", None), ("2", None), ("", None), (2, None), (None, None),
])
def test_parse_yes_no_reads_excel_booleans_in_english_and_russian(word, value):
    assert parse_yes_no(word) is value


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(dataset_app, list(args), env=env, catch_exceptions=False)


def _rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows: list[list[str]], delimiter: str = ",") -> Path:
    """Save rows as Excel does: UTF-8 with a byte-order mark, CRLF line ends."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    path.write_text("\ufeff" + out.getvalue(), encoding="utf-8", newline="")
    return path


def _edit(path: Path, edits: dict[str, dict[str, str]], delimiter: str = ",") -> Path:
    """Set cells (``{item id: {column: text}}``) of an exported CSV and save it."""
    rows = _rows(path)
    for row in rows[1:]:
        for column, text in edits.get(row[0], {}).items():
            row[rows[0].index(column)] = text
    return _write(path, rows, delimiter)


def _line_of(path: Path, item_id: str, delimiter: str = ",") -> int:
    """The physical line where the row of ``item_id`` starts, counted in the file's text (not by a CSV reader)."""
    text = path.read_text(encoding="utf-8-sig")
    return text.count("\n", 0, text.index(f"\n{item_id}{delimiter}")) + 2


# ------------------------------------------------------------------ Excel's booleans, English and Russian

CELLS = {"a1": "ИСТИНА", "a2": "ЛОЖЬ", "a3": "да", "a4": "Нет", "a5": "1", "a6": "0", "a7": "TRUE",
         "a8": "false", "a9": "Yes", "a10": "NO", "a11": "истина", "a12": ""}


def test_excel_booleans_round_trip_through_the_cli(tmp_path):
    """Export → a Russian Excel saves it (';', ИСТИНА/ЛОЖЬ…) → import: exactly the "no" spellings are rejected."""
    items = [DatasetItem(id=f"a{i}", question=f"Вопрос {i}, с запятой?", ground_truth_answer=f"Ответ\n{i}",
                         chunk_id=f"k{i}", chunk_text=f"Текст {i}.", relevant_chunk_ids=[f"k{i}", f"k{i}b"])
             for i in range(1, 13)]
    src = save_dataset(Dataset(name="src", type="synthetic", items=items), tmp_path / "src.json")
    ann = tmp_path / "review.csv"
    assert _cli("export-annotation", "--dataset", str(src), "--output", str(ann)).exit_code == 0
    _edit(ann, {k: {"is_question_ok": v} for k, v in CELLS.items()}, delimiter=";")
    assert ann.read_text(encoding="utf-8-sig").splitlines()[0].startswith("id;question;")

    res = _cli("import-annotation", "--annotation", str(ann), "--output", str(tmp_path / "out.json"))
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert [it["id"] for it in out["items"]] == ["a1", "a3", "a5", "a7", "a9", "a11", "a12"]
    assert [it["is_question_ok"] for it in out["items"]] == [True] * 6 + [None]
    report = out["metadata"]["counts"]
    assert report["dropped_items"] == [{"id": f"a{i}", "index": i - 1, "reasons": ["question_rejected"]}
                                       for i in (2, 4, 6, 8, 10)]
    assert report["status"] == {"accepted": 6, "unreviewed": 1} and report["fixed"] == {}


# ------------------------------------------------------------------ the wiki whose chunk urls are relative paths


def _wiki_item(item_id: str, rel: str) -> DatasetItem:
    """An item on a page of team_wiki.PAGES, with the ids ``load chunks DIR`` gives its chunks (``rel#n``)."""
    texts = team_wiki.page_chunks(rel)
    ids = [f"{rel}#{n}" for n in range(len(texts))]
    return DatasetItem.model_validate({
        "id": item_id, "question": f"Вопрос про {rel}, «в кавычках»?", "ground_truth_answer": "Ответ.",
        "chunk_id": ids[0], "chunk_text": "\n\n".join(texts), "confluence_url": rel, "relevant_chunk_ids": ids,
        "context_chunk_ids": ids, "relevance_unit": "page"})


def _export(tmp_path: Path, name: str = "review.csv",
            pages: tuple[str, ...] = ("ops/vpn.md", "hr/vacation.md", "dev/deploy.md")) -> Path:
    items = [_wiki_item(f"i{n}", rel) for n, rel in enumerate(pages, start=1)]
    ann = export_annotation(Dataset(name="s", type="real-users", items=items), "s.json").dataset
    return write_annotation_csv(ann, tmp_path / name)


@pytest.fixture
def rel_db(fresh_db, encoder, tmp_path):
    """team_wiki's pages loaded like `ragnb load chunks DIR` (url = the page's relative path) and embedded."""
    from ragnb.store.loaders import load_file
    from ragnb.store.vectors import embed_table

    load_file(fresh_db, "chunks", team_wiki.write_wiki(tmp_path / "wiki"), chunk_size=team_wiki.CHUNK_SIZE,
              overlap=team_wiki.OVERLAP)
    embed_table(fresh_db, "chunks", encoder, progress=False)
    return fresh_db


def test_edits_in_the_corpus_own_form_are_applied(rel_db, tmp_path):
    vpn = [f"ops/vpn.md#{n}" for n in range(len(team_wiki.page_chunks("ops/vpn.md")))]
    deploy = [f"dev/deploy.md#{n}" for n in range(len(team_wiki.page_chunks("dev/deploy.md")))]
    vacation = [f"hr/vacation.md#{n}" for n in range(len(team_wiki.page_chunks("hr/vacation.md")))]
    assert len(vpn) > 10  # ops/vpn.md#10 sorts after #9
    pages = ("ops/vpn.md", "hr/vacation.md", "ops/vpn.md")  # the deploy page is only in the corpus
    path = _export(tmp_path, pages=pages)
    _edit(path, {"i1": {"is_confluence_url_ok": "ЛОЖЬ", "confluence_url": "dev/deploy.md"},  # a wiki path
                 "i2": {"relevant_chunk_ids:list": "\n".join(vacation + [deploy[2]])},  # an id of the corpus only
                 "i3": {"relevant_chunk_ids:list": vpn[1], "is_chunk_ok": "ИСТИНА"}})  # ids removed only
    result = import_annotation(path, chunks=lambda: ChunkLookup.from_db(rel_db))
    out = {it.id: it for it in result.dataset.items}
    assert out["i1"].confluence_url == "dev/deploy.md" and out["i1"].relevant_chunk_ids == deploy
    assert out["i1"].chunk_text == "\n\n".join(team_wiki.page_chunks("dev/deploy.md"))
    assert out["i2"].relevant_chunk_ids == vacation + ["dev/deploy.md#2"]
    assert out["i3"].relevant_chunk_ids == ["ops/vpn.md#1"]
    assert [out[k].model_extra["review_status"] for k in ("i1", "i2", "i3")] == ["fixed"] * 3
    assert result.report["fixed"] == {"confluence_url": 1, "relevant_chunk_ids": 2}
    # Without the corpus: removing ids, or adding one the file exported (another item's chunk), is accepted;
    # an id the file does not name needs the corpus to be checked.
    path = _export(tmp_path, "no_corpus.csv", pages=pages)
    _edit(path, {"i2": {"relevant_chunk_ids:list": "\n".join(vacation[:1] + [vpn[10]])},
                 "i3": {"relevant_chunk_ids:list": vpn[0]}})
    out = {it.id: it.relevant_chunk_ids for it in import_annotation(path).dataset.items}
    assert out == {"i1": vpn, "i2": [vacation[0], "ops/vpn.md#10"], "i3": [vpn[0]]}
    _edit(path, {"i3": {"relevant_chunk_ids:list": deploy[0]}})
    with pytest.raises(ValueError) as err:
        import_annotation(path)
    assert str(err.value) == (f"{path}:{_line_of(path, 'i3')} (id 'i3'): checking the chunk id 'dev/deploy.md#0' "
                              "you wrote needs the corpus's chunks; pass the database that holds them (`ragnb "
                              "dataset import-annotation --corpus db|demo`)")


NEVER = "not a page address; paste the page's address from the browser (https://…), or restore the exported url"
ELSEWHERE = "(the urls of {db} look like 'dev/deploy.md'); paste the page's address from the browser (https://…), " \
            "or write a page path of the corpus"
NO_ID = "is neither in the file's exported ids nor an embedded chunk of {db} (its ids look like 'dev/deploy.md#0'); " \
        "correct the id (the exported ones are in baseline_{field}), or load and embed that chunk first"


@pytest.mark.parametrize("column, text, message", [
    ("confluence_url", "javascript:alert(1)", "'javascript:alert(1)' is a javascript: url, " + NEVER),
    ("confluence_url", "data:text/html,<script>alert(1)</script>",
     "'data:text/html,<script>alert(1)</script>' is a data: url, " + NEVER),
    ("confluence_url", "JavaScript:alert(1)", "'JavaScript:alert(1)' is a javascript: url, " + NEVER),
    ("confluence_url", "file:///etc/passwd",
     "'file:///etc/passwd' is a file: url, a scheme the corpus's urls do not have " + ELSEWHERE),
    ("confluence_url", "not a url at all",
     "'not a url at all' is not an http(s) url and names no page of the corpus " + ELSEWHERE),
    ("confluence_url", "ops/nowhere.md",
     "'ops/nowhere.md' is not an http(s) url and names no page of the corpus " + ELSEWHERE),
    ("confluence_url", "https://", "'https://' has no host; paste the page's address from the browser (https://…)"),
    ("confluence_url", "https://wiki.example.com/ops/vpn access", "'https://wiki.example.com/ops/vpn access' "
     "has a space or line break; paste the page's address from the browser (https://…)"),
    ("confluence_url", "http://[wiki",
     "'http://[wiki' is not a valid url (Invalid IPv6 URL); paste the page's address from the browser (https://…)"),
    ("relevant_chunk_ids:list", "hr/vacation.md#0\nops/vpn.md#99",
     "chunk id 'ops/vpn.md#99' " + NO_ID.replace("{field}", "relevant_chunk_ids")),
    ("chunk_id", "hr/vacation.md#O", "chunk id 'hr/vacation.md#O' " + NO_ID.replace("{field}", "chunk_id")),
])
def test_edits_pointing_nowhere_are_refused(rel_db, tmp_path, column, text, message):
    path = _edit(_export(tmp_path), {"i2": {column: text, "is_confluence_url_ok": "нет"}})
    line = _line_of(path, "i2")
    assert line > 3  # the row of i1 above spans several lines (its lists and chunk text)
    with pytest.raises(ValueError) as err:
        import_annotation(path, chunks=lambda: ChunkLookup.from_db(rel_db))
    db = rel_db.display_url
    assert str(err.value) == f"{path}:{line} (id 'i2') column {column!r}: " + message.format(db=db)


def test_a_refused_edit_writes_nothing_through_the_cli(rel_db, tmp_path):
    path = _edit(_export(tmp_path), {"i3": {"confluence_url": "javascript:alert(1)"}})
    env = {"RAGNB_EMBEDDED_DB": rel_db.engine.url.database}
    res = _cli("import-annotation", "--annotation", str(path), "--output", str(tmp_path / "o.json"), env=env)
    assert res.exit_code == 2 and not (tmp_path / "o.json").exists()
    assert res.stderr.strip() == (f"error: {path}:{_line_of(path, 'i3')} (id 'i3') column 'confluence_url': "
                                  f"'javascript:alert(1)' is a javascript: url, {NEVER}")


def test_json_edits_are_checked_the_same_way(tmp_path):
    """In a JSON review the message names the item and the field; a dangerous url needs no corpus to refuse."""
    items = [_wiki_item("i1", "ops/vpn.md"), _wiki_item("i2", "hr/vacation.md")]
    ann = export_annotation(Dataset(name="s", type="real-users", items=items), "s.json").dataset
    raw = json.loads(save_dataset(ann, tmp_path / "a.json").read_text(encoding="utf-8"))
    raw["items"][1]["confluence_url"] = "javascript:alert(1)"
    (tmp_path / "a.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        import_annotation(tmp_path / "a.json")
    assert str(err.value) == (f"{tmp_path / 'a.json'}: item 1 (id 'i2') field 'confluence_url': "
                              f"'javascript:alert(1)' is a javascript: url, {NEVER}")
    raw["items"][1]["confluence_url"] = "hr/vacation.md"
    raw["items"][1]["relevant_chunk_ids"].append("ops/vpn.md#99")
    (tmp_path / "a.json").write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match=r"a.json: item 1 \(id 'i2'\): checking the chunk id 'ops/vpn.md#99' you "
                                         r"wrote needs the corpus's chunks; pass the database that holds them"):
        import_annotation(tmp_path / "a.json")


# ------------------------------------------------------------------ the file's shape: columns and rows


REVIEW_COLUMNS = "is_question_ok, is_answer_ok, is_chunk_ok, is_confluence_url_ok, notes"
BASELINE_COLUMNS = ("baseline_ground_truth_answer, baseline_confluence_url, baseline_chunk_id, "
                    "baseline_relevant_chunk_ids, baseline_source_dataset, baseline_source_type, baseline_source_mode")


def _rename(rows: list[list[str]], old: str, new: str | None) -> None:
    """Rename column ``old`` (None: delete it from every row)."""
    col = rows[0].index(old)
    if new is not None:
        rows[0][col] = new
    else:
        for row in rows:
            del row[col]


@pytest.mark.parametrize("renames, lacks, fix", [
    ({"is_answer_ok": "Ответ верен?"}, "review columns is_answer_ok", None),
    ({"is_chunk_ok": None}, "review columns is_chunk_ok", None),
    ({"is_question_ok": "Is question OK", "is_answer_ok": "Is answer OK", "is_chunk_ok": "Is chunk OK",
      "is_confluence_url_ok": "Is URL OK"},
     "review columns is_question_ok, is_answer_ok, is_chunk_ok, is_confluence_url_ok",
     "Rename 'Is question OK' → is_question_ok, 'Is answer OK' → is_answer_ok, 'Is chunk OK' → is_chunk_ok; rename "
     "the column back to its exported name (or add it with empty cells)"),
    ({"is_question_ok": "IS_QUESTION_OK", "is_chunk_ok": "Is chunk ok"}, "review columns is_question_ok, is_chunk_ok",
     "Rename 'IS_QUESTION_OK' → is_question_ok, 'Is chunk ok' → is_chunk_ok"),
    ({"notes": "Комментарий"}, "review columns notes", None),
    ({"baseline_ground_truth_answer": "baseline answer"}, "baseline columns baseline_ground_truth_answer", None),
    ({"baseline_ground_truth_answer": "Baseline ground-truth answer"}, "baseline columns baseline_ground_truth_answer",
     "Rename 'Baseline ground-truth answer' → baseline_ground_truth_answer"),
])
def test_renamed_or_missing_review_columns_are_refused(tmp_path, renames, lacks, fix):
    """Before: a renamed review column was an ordinary text column, so its rejections were ignored."""
    path = _export(tmp_path)
    rows = _rows(path)
    for old, new in renames.items():
        _rename(rows, old, new)
    _write(path, rows)
    res = _cli("import-annotation", "--annotation", str(path), "--output", str(tmp_path / "o.json"))
    assert res.exit_code == 2 and not (tmp_path / "o.json").exists()
    expected = REVIEW_COLUMNS if lacks.startswith("review") else BASELINE_COLUMNS
    fix = fix or "Rename the column back to its exported name (or add it with empty cells)"
    assert res.stderr == (f"error: {path}:1: the header lacks the {lacks} (an annotation CSV has {expected}); "
                          f"found the columns {', '.join(rows[0])}. {fix}, then import again\n")


def test_hand_made_sheet_needs_every_review_column(tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_text('id;question;is_question_ok\nq1;"Где VPN; где?";да\nq2;Кто одобряет?;ложь\n', encoding="utf-8")
    with pytest.raises(ValueError) as err:
        import_annotation(path)
    assert str(err.value).startswith(f"{path}:1: the header lacks the review columns is_answer_ok, is_chunk_ok, "
                                     "is_confluence_url_ok, notes (an annotation CSV has")
    path.write_text('id;question;is_question_ok;is_answer_ok;is_chunk_ok;is_confluence_url_ok;notes\n'
                    'q1;"Где VPN; где?";да;;;;\nq2;Кто одобряет?;ложь;;;;\n', encoding="utf-8")
    result = import_annotation(path)
    assert [it.id for it in result.dataset.items] == ["q1"]
    assert result.report["dropped_items"] == [{"id": "q2", "index": 1, "reasons": ["question_rejected"]}]


@pytest.mark.parametrize("cut", [5, "+1"])
def test_ragged_rows_are_refused_at_their_physical_line(tmp_path, cut):
    """Before: a row of 5 cells was padded with empty cells, and an empty baseline read as a correction."""
    path = _export(tmp_path)
    rows = _rows(path)
    width = len(rows[0])
    rows[2] = rows[2][:cut] if cut == 5 else rows[2] + ["лишняя ячейка"]
    _write(path, rows, delimiter=";")
    line = _line_of(path, "i2", delimiter=";")
    assert line == 3 + sum(c.count("\n") for c in rows[1]) > 10  # i1 starts at line 2 and spans its line breaks
    with pytest.raises(ValueError) as err:
        import_annotation(path)
    cells = 5 if cut == 5 else width + 1
    assert str(err.value) == (f"{path}:{line}: {cells} cells but the header has {width} columns; a cell or a "
                              "delimiter was lost (or a quote left open). Give every row one cell per column "
                              "(empty cells are fine), or export the file again")


def test_unrecognised_boolean_names_the_cell(tmp_path):
    path = _edit(_export(tmp_path), {"i3": {"is_chunk_ok": "Истинно"}})
    with pytest.raises(ValueError) as err:
        import_annotation(path)
    assert str(err.value) == (f"{path}:{_line_of(path, 'i3')} column 'is_chunk_ok': 'Истинно' is not true/false; "
                              f"write one of {SPELLINGS}, or leave the cell empty (not reviewed yet)")


def test_other_readers_of_yes_no_take_the_same_spellings(tmp_path):
    """parse_yes_no is the one parser: a judge-pipeline file saved by a Russian Excel reads ИСТИНА/ЛОЖЬ too."""
    from ragnb.datasets.judge_pipeline import judge_pipeline_from_file

    src = tmp_path / "pairs.csv"
    src.write_text("question,answer,ground_truth_show\nГде VPN?,В портале.,ИСТИНА\nКто одобряет?,Никто.,ЛОЖЬ\n"
                   "Сколько дней?,28.,да\n", encoding="utf-8-sig")
    result = judge_pipeline_from_file(src)
    assert [it.model_extra["ground_truth_show"] for it in result.dataset.items] == [True, False, True]
    src.write_text("question,answer,ground_truth_show\nГде VPN?,В портале.,Истинно\n", encoding="utf-8")
    with pytest.raises(ValueError) as err:
        judge_pipeline_from_file(src)
    assert f"'Истинно' is not a show/no-show label; use {SPELLINGS} or show/no_show" in str(err.value)
