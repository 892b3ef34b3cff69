"""Annotation files as CSV, for reviewing in Excel, LibreOffice or Google Sheets (docs/datasets.md).

One row per item, one column per field. The cell format is told by the column name:

* ``is_question_ok``, ``is_answer_ok``, ``is_chunk_ok``, ``is_confluence_url_ok``: ``true`` / ``false`` (also
  Excel's TRUE/FALSE and ИСТИНА/ЛОЖЬ, yes/no, да/нет, 1/0; any case); an empty cell = not reviewed yet. A
  review to import must have these four columns and ``notes``, under these names;
* ``NAME:list``: a list of ids, one per line inside the cell (Alt+Enter in Excel); an empty cell = no ids;
* ``NAME:json``: a JSON value (numbers, true/false, objects, lists of numbers); an empty cell = null;
* ``baseline_…``: what export-annotation wrote (answer, url, chunk id, relevant ids; and on every row the
  source dataset's file, type and mode) — leave these as they are: import tells a correction from the
  original by comparing with them;
* every other column is text (line breaks, commas and quotes allowed — the CSV quotes them); an empty cell =
  no value (``notes``: "").

Written as UTF-8 with a byte-order mark, comma-separated (what Excel opens as UTF-8). Read back with or without
the mark and with the delimiter sniffed from the header (``,`` ``;`` tab ``|``: Excel in a Russian or German
locale saves with ``;``). Every row must have one cell per column. The dataset's other metadata (counts,
models, notes) stays in the JSON file only.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragnb.datasets.schema import Dataset
from ragnb.io import YES_NO_SPELLINGS, parse_yes_no, read_text

REVIEW = ("is_question_ok", "is_answer_ok", "is_chunk_ok", "is_confluence_url_ok")
FIRST = ("id", "question", "ground_truth_answer", "confluence_url", "chunk_id", "chunk_text", "relevant_chunk_ids",
         *REVIEW, "notes")
TEXT_FIELDS = ("id", "question", "ground_truth_answer", "confluence_url", "chunk_id", "chunk_text", "source",
               "question_source", "notes")  # always text, whatever the values look like
BASELINE = "baseline_"
BASE_FIELDS = ("ground_truth_answer", "confluence_url", "chunk_id", "relevant_chunk_ids")
SOURCE_FIELDS = ("source_dataset", "source_type", "source_mode")  # the same on every row
FORMATS = ("json", "csv")
REVIEW_COLUMNS = (*REVIEW, "notes")  # what a reviewed CSV must have, under these exact names


@dataclass(frozen=True)
class Place:
    """Where an annotation item was read, for messages: a CSV row (``f.csv:7 (id 'x')``, cells under columns)
    or a JSON item (``f.json: item 3 (id 'x')``, fields)."""

    at: str
    columns: dict[str, str] | None = None  # CSV: field name → its header column (``relevant_chunk_ids:list``)

    def __str__(self) -> str:
        return self.at

    def of(self, name: str) -> str:
        """The place of one field: ``f.csv:7 (id 'x') column 'confluence_url'``."""
        if self.columns is None:
            return f"{self.at} field {name!r}"
        return f"{self.at} column {self.columns.get(name, name)!r}"


def pick_format(path: str | Path, given: str | None, option: str) -> str:
    """``given`` (json/csv) or the one the file's suffix names (``.csv``, ``.csv.gz`` → csv; else json)."""
    if given is not None:
        if given not in FORMATS:
            raise ValueError(f"{option} {given!r}: use json or csv")
        return given
    suffixes = "".join(Path(path).suffixes[-2:]).lower()
    return "csv" if suffixes.endswith((".csv", ".csv.gz")) else "json"


def _kind(name: str, values: list[Any]) -> str:
    """text, list (all values lists of strings) or json (anything else) for a column's values."""
    present = [v for v in values if v is not None]
    if name in TEXT_FIELDS or all(isinstance(v, str) for v in present):
        return "text"
    if len(present) == len(values) and all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                           for v in present):
        return "list"
    return "json"


def _cell(value: Any, kind: str, where: str) -> str:
    if value is None:
        return ""
    if kind == "list":
        bad = [x for x in value if "\n" in x or "\r" in x or not x.strip()]
        if bad:
            raise ValueError(f"{where}: id {bad[0]!r} is empty or has a line break; it cannot be written one per line")
        return "\n".join(value)
    if kind == "json":
        return json.dumps(value, ensure_ascii=False)
    return "true" if value is True else "false" if value is False else str(value)


def annotation_csv(ds: Dataset) -> str:
    """The CSV text (with a leading byte-order mark) of an annotation dataset: one row per item."""
    rows = [it.to_json_dict() for it in ds.items]
    baseline = ds.metadata.get("review_baseline") or {}
    names = list(dict.fromkeys([*FIRST, *(k for r in rows for k in r)]))
    kinds = {n: "text" if n in REVIEW else _kind(n, [r.get(n) for r in rows]) for n in names}
    header = [n if kinds[n] == "text" else f"{n}:{kinds[n]}" for n in names]
    meta = ds.metadata
    source = [meta.get("source_dataset"), meta.get("source_type"), (meta.get("source_metadata") or {}).get("mode")]
    if baseline:
        header += [BASELINE + n + (":list" if n == "relevant_chunk_ids" else "") for n in BASE_FIELDS]
        header += [BASELINE + n for n in SOURCE_FIELDS]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for i, r in enumerate(rows):
        where = f"item {i} (id {r['id']!r})"
        cells = [_cell(r.get(n), kinds[n], f"{where} field {n!r}") for n in names]
        if baseline:
            b = baseline.get(r["id"]) or {}
            cells += [_cell(b.get(n), "list" if n == "relevant_chunk_ids" else "text", f"{where} baseline {n!r}")
                      for n in BASE_FIELDS]
            cells += ["" if v is None else str(v) for v in source]
        writer.writerow(cells)
    return "\ufeff" + out.getvalue()


def _parse_cell(text: str, column: str, where: str) -> tuple[str, Any]:
    """(field name, value) of one cell under ``column``."""
    name, _, kind = column.partition(":")
    if name in REVIEW:
        if not text.strip():
            return name, None
        value = parse_yes_no(text)
        if value is None:
            raise ValueError(f"{where} column {column!r}: {text!r} is not true/false; write one of "
                             f"{YES_NO_SPELLINGS}, or leave the cell empty (not reviewed yet)")
        return name, value
    if kind == "list" or (name == "relevant_chunk_ids" and not kind):  # a hand-made sheet may omit ":list"
        return name, [x.strip() for x in text.splitlines() if x.strip()]
    if kind == "json":
        if not text.strip():
            return name, None
        try:
            return name, json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} column {column!r}: not JSON ({exc.msg}); write a JSON value (e.g. 3, "
                             "true, [0.5, 0.2]) or leave the cell empty") from None
    if name == "notes":
        return name, text
    return name, text if text.strip() else None


def _check_header(header: list[str], path: Path) -> None:
    if not header or "id" not in header or "question" not in header:
        raise ValueError(f"{path}: the CSV header needs the columns id and question; found {header}")
    for column in header:
        kind = column.partition(":")[2]
        if kind not in ("", "list", "json"):
            raise ValueError(f"{path}: column {column!r}: unknown cell format {kind!r}; use NAME, NAME:list or NAME:json")
    names = [c.partition(":")[0] for c in header]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{path}: column(s) {repeated} appear twice in the header; keep one of each")


def _check_review_header(header: list[str], path: Path) -> None:
    """A reviewed file needs every review column, and all baseline columns or none: a renamed review column
    would silently ignore its rejections, a renamed baseline column would turn every value into a correction."""
    names = [c.partition(":")[0] for c in header]
    groups = [(REVIEW_COLUMNS, "review columns")]
    if any(n.startswith(BASELINE) for n in names):
        groups.append((tuple(BASELINE + n for n in (*BASE_FIELDS, *SOURCE_FIELDS)), "baseline columns"))
    for expected, what in groups:
        missing = [n for n in expected if n not in names]
        if missing:
            respelt = {n: c for n in missing for c, m in zip(header, names)
                       if re.sub(r"[\s\-]+", "_", m.strip().lower()) == n}
            fixes = [f"rename {', '.join(f'{c!r} → {n}' for n, c in respelt.items())}"] if respelt else []
            if len(respelt) < len(missing):
                fixes.append("rename the column back to its exported name (or add it with empty cells)")
            fix = "; ".join(fixes)
            raise ValueError(f"{path}:1: the header lacks the {what} {', '.join(missing)} (an annotation CSV has "
                             f"{', '.join(expected)}); found the columns {', '.join(header)}. "
                             f"{fix[0].upper()}{fix[1:]}, then import again")


def open_csv(path: Path, what: str, fix: str) -> tuple[list[str], Any]:
    """(header, ``csv.reader`` over the rows after it) of a CSV a spreadsheet saved: UTF-8 with or without a
    byte-order mark, the delimiter sniffed from the header line (``,`` ``;`` tab ``|``: Excel in a Russian or
    German locale saves with ``;``). An empty file is refused with ``fix``. The one reader of review and
    judge-pipeline CSVs; ``reader.line_num`` counts physical lines, so messages can name them."""
    from ragnb.store.readers import sniff_delimiter

    text = read_text(path, what).lstrip("\ufeff")
    if not text.strip():
        raise ValueError(f"{path}: the CSV file is empty; {fix}")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sniff_delimiter(text.splitlines()[0]))
    return [h.strip() for h in next(reader)], reader


def parse_annotation_csv(path: str | Path, review: bool = False) -> tuple[dict[str, Any], list[Place]]:
    """The decoded dataset (``{"name", "type", "metadata": {"review_baseline"}, "items"}``) of an annotation CSV
    and where each item was read (its row's first physical line; messages name the column). ``review``: the
    file is a review to apply, so every review column must be there. Errors name the file, the line and the
    column."""
    p = Path(path)
    header, reader = open_csv(p, "annotation CSV", "export one with `ragnb dataset export-annotation --format csv`")
    _check_header(header, p)
    if review:
        _check_review_header(header, p)
    columns = {c.partition(":")[0]: c for c in header}
    items, places, baseline, sources, line = [], [], {}, {}, reader.line_num
    for cells in reader:
        # line_num counts physical lines read so far, so a quoted multi-line cell above does not shift this
        where, line = f"{p}:{line + 1}", reader.line_num
        if not any(c.strip() for c in cells):
            continue  # a blank line (Excel leaves some at the end)
        if len(cells) != len(header):
            raise ValueError(f"{where}: {len(cells)} cells but the header has {len(header)} columns; a cell or a "
                             "delimiter was lost (or a quote left open). Give every row one cell per column (empty "
                             "cells are fine), or export the file again")
        item, base = {}, {}
        for column, cell in zip(header, cells):
            name, value = _parse_cell(cell, column, where)
            if name.startswith(BASELINE):
                base[name[len(BASELINE):]] = value
            else:
                item[name] = value
        items.append({k: v for k, v in item.items() if not (v is None and k in TEXT_FIELDS and k != "id")})
        places.append(Place(f"{where} (id {item.get('id')!r})", columns))
        for name in SOURCE_FIELDS:
            value = base.pop(name, None)
            if value is not None:
                sources.setdefault(name, value)
        if base:
            baseline[str(item.get("id"))] = base
    meta: dict[str, Any] = {}
    if baseline:
        meta = {"mode": "export-annotation", "source_dataset": sources.get("source_dataset"),
                "source_type": sources.get("source_type"), "source_metadata": {"mode": sources.get("source_mode")},
                "review_baseline": baseline}
    return {"name": p.stem, "type": "annotation", "metadata": meta, "items": items}, places


def read_annotation_csv(path: str | Path) -> dict[str, Any]:
    """The decoded dataset of an annotation CSV (:func:`parse_annotation_csv`)."""
    return parse_annotation_csv(path)[0]


def write_annotation_csv(ds: Dataset, path: str | Path) -> Path:
    """Write ``ds`` as an annotation CSV atomically."""
    from ragnb.io import atomic_write_text

    text = annotation_csv(ds)
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write the CSV ({exc.strerror or exc}); choose another --output/--out-dir") from None
