"""Load chunks and question logs from JSONL / CSV / Parquet files or a folder of Markdown/text files.

Everything is validated before anything is written; a bad row raises ``ValueError`` naming the file,
the line and the field. Nothing is guessed: dates are ISO 8601 (or follow an explicit ``date_format``),
scores are integers 1–5, ids are strings or integers of at most :data:`ragnb.store.schema.ID_MAX_CHARS`
characters (a float id — how pandas stores an integer column with gaps — is refused, never rounded), a url is
http(s) or has no scheme (:func:`ragnb.urls.check_url`), and a JSON ``NaN`` is an error, not a
missing value. A file is read, validated and COPYed into a staging table a batch of rows at a time
(:mod:`ragnb.store.readers`, :class:`FileRows`), so memory does not grow with the file, and merged in one
transaction once its last row has passed (:mod:`ragnb.store.upsert`): a bad row anywhere writes nothing. An id already
stored with the same text is skipped (loading the same file twice adds nothing) but takes the file's url, one
stored with a different text is an error unless ``update=True``. Rows without an id get a stable one derived from content.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass, field as dc_field
from itertools import chain, islice
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import sqlalchemy as sa

from ragnb.urls import check_url
from ragnb.store.engine import Database
from ragnb.store.markdown import FolderRows, chunk_text  # noqa: F401  (chunk_text is read from here too)
from ragnb.store.readers import read_records
from ragnb.store.schema import check_id_length, ensure_schema
from ragnb.store.upsert import BATCH_ROWS, merge_rows

# Accepted spellings of each field in input files (first match wins); --map overrides.
CHUNK_ALIASES = {
    "id": ("id", "chunk_id", "doc_id", "_id"),
    "text": ("text", "chunk_text", "content", "body"),
    "url": ("confluence_url", "url", "source_url", "source"),
}
QUESTION_ALIASES = {
    "id": ("id", "question_id", "query_id", "_id"),
    "question": ("question", "query", "text"),
    "answer": ("answer", "ground_truth_answer", "reference"),
    "url": ("confluence_url", "url", "source_url"),
    "score": ("score", "user_score", "rating"),
    "user_id": ("user_id", "user"),
    "session_id": ("session_id", "conversation_id", "dialog_id"),
    "created_at": ("created_at", "timestamp", "time"),
}
REQUIRED = {"chunks": ("text",), "questions": ("question",)}


@dataclass
class LoadStats:
    file: str
    kind: str
    rows: int
    inserted: int
    already_present: int
    updated: list[str] = dc_field(default_factory=list)  # "<file>:<line> id=…" of rows whose stored text changed
    warnings: list[str] = dc_field(default_factory=list)  # unused columns, unmatched URLs: printed to stderr
    urls_updated: int = 0  # rows already stored with the same text whose url the file changed (e.g. a new --url-template)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT


def check_columns(path: Path, kind: str, columns: list[str], mapping: dict[str, str]) -> list[str]:
    """Refuse a file without a column for a required field, or a ``--map`` naming an absent column, listing
    the columns found and the ``--map`` fix; return a warning about columns no field uses (else [])."""
    aliases = CHUNK_ALIASES if kind == "chunks" else QUESTION_ALIASES
    found = f"columns found: {columns}"
    for field, column in mapping.items():
        if column not in columns:
            raise ValueError(f"{path}: --map {field}={column}: the file has no column {column!r}; {found}")
    for field in REQUIRED[kind]:
        if field not in mapping and not any(a in columns for a in aliases[field]):
            hint = ("; the header looks like one column — is the delimiter something other than , ; tab or |?"
                    if len(columns) == 1 else "")
            raise ValueError(f"{path}: no column for the required field '{field}' (accepted names: "
                             f"{', '.join(aliases[field])}); {found}{hint}; name yours with --map "
                             f"{field}=COLUMN, e.g. --map {field}={columns[-1] if columns else 'COLUMN'}")
    used = set(mapping.values()) | {a for names in aliases.values() for a in names}
    unused = [c for c in columns if c not in used]
    if not unused:
        return []
    return [f"{path}: column(s) {unused} are not loaded (fields: {sorted(aliases)}); if one holds a field, "
            f"name it with --map FIELD=COLUMN, e.g. --map url={unused[0]}"]


def _pick(rec: dict, field: str, aliases: dict, mapping: dict) -> Any:
    if field in mapping:
        return rec.get(mapping[field])
    for name in aliases[field]:  # a float NaN is a value here: an id column of floats is refused, not skipped
        if name in rec and rec[name] is not None and rec[name] is not pd.NA and rec[name] is not pd.NaT:
            return rec[name]
    return None


def _as_text(value: Any) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _stable_id(*parts: Any) -> str:
    return hashlib.sha1("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()[:16]


def _check_required(value: Any, where: str, field: str, names: str) -> None:
    """A required text field: a string with something in it. A number (or any other JSON value) there is named
    as such — "missing or empty" would send the user looking for a value that is there."""
    if isinstance(value, str) and value.strip():
        return
    if isinstance(value, str) or _missing(value):
        raise ValueError(f"{where}: field '{field}' (column {names}) is missing or empty; every row needs it")
    what = ("true/false" if isinstance(value, bool) else "a number" if isinstance(value, numbers.Number)
            else f"a {type(value).__name__}")
    raise ValueError(f"{where}: field '{field}' (column {names}) holds {what} ({value!r}) where text is expected; "
                     "write it as text (in quotes, in JSON), or --map the field to the column that holds the text")


class FileRows:
    """The validated rows of one file, read and checked a row at a time as they are iterated (a load COPYs them a
    batch at a time, :func:`ragnb.store.upsert.merge_rows`): memory holds a batch, and per id read its line and a
    hash of its row, to refuse a repeated id with different content (an identical repeat is skipped) and to name
    a row after its batch is gone (:meth:`locate`). Iterating raises on the first bad row; whatever needs the
    whole file (the ``--map`` columns, unused columns in ``warnings``, "no rows") is checked when the last row has
    been read, before anything is committed. ``rows``: how many were yielded.

    ``date_format``: a strftime pattern for ``created_at`` (ISO 8601 only without it). A file without a column for
    a required field is refused listing its columns (checked on the first ``batch_rows`` records: if none of them
    has one, its first row is bad whatever follows)."""

    def __init__(self, path: Path, kind: str, mapping: dict[str, str] | None = None, date_format: str | None = None,
                 warnings: list[str] | None = None, batch_rows: int = BATCH_ROWS) -> None:
        # The original column name is accepted for the url field: --map confluence_url=link.
        self.mapping = {("url" if f == "confluence_url" else f): c for f, c in (mapping or {}).items()}
        self.aliases = CHUNK_ALIASES if kind == "chunks" else QUESTION_ALIASES
        unknown = sorted(set(self.mapping) - set(self.aliases))
        if unknown:
            raise ValueError(f"--map: unknown field(s) {unknown}; fields for {kind}: {sorted(self.aliases)}")
        self.path, self.kind, self.date_format, self.batch_rows = path, kind, date_format, batch_rows
        self.warnings = warnings if warnings is not None else []
        self.seen: dict[str, tuple[int, int]] = {}  # id → (line, hash of its row), in file order
        self.rows = 0

    def __iter__(self) -> Iterator[dict]:
        records = read_records(self.path, self.batch_rows)
        first = list(islice(records, self.batch_rows))
        if not first:
            raise ValueError(f"{self.path}: no rows found")
        columns: dict[str, None] = {}
        for _, rec in first:
            columns.update(dict.fromkeys(rec))
        required = {f: c for f, c in self.mapping.items() if f in REQUIRED[self.kind]}
        check_columns(self.path, self.kind, list(columns), required)
        head = iter(first)  # a list iterator lets go of its list once read: one batch held, not the first for good
        del first
        for where, rec in chain(head, records):
            columns.update(dict.fromkeys(rec))
            row = self._row(where, rec)
            if row is not None:
                self.rows += 1
                yield row
        self.warnings += check_columns(self.path, self.kind, list(columns), self.mapping)

    def _row(self, where: str, rec: dict) -> dict | None:
        """The table's fields of one record, validated; None for an identical repeat of an earlier row."""
        row = normalize_row(where, rec, self.kind, self.aliases, self.mapping, self.date_format)
        line = int(where.rpartition(":")[2])
        digest = hash(tuple(row.values()))  # 64 bits: a different row with the same id and hash would be skipped
        first = self.seen.setdefault(row["id"], (line, digest))
        if first[0] == line:
            return {**row, "_where": where}
        if first[1] != digest:
            raise ValueError(f"{where}: field 'id' = {row['id']!r} repeats line {first[0]} with different content; "
                             "ids must be unique")
        return None

    def locate(self, ids: set) -> list[tuple[str, str]]:
        """(where, id) of the rows read with these ids, in file order."""
        return [(f"{self.path}:{line}", i) for i, (line, _) in self.seen.items() if i in ids]


def normalize_row(where: str, rec: dict, kind: str, aliases: dict, mapping: dict, date_format: str | None) -> dict:
    """One record's fields for the chunk or question table, validated; ``id`` derived from the content when the
    record has none. ValueError naming ``where``, the field and the fix."""
    row = {f: _pick(rec, f, aliases, mapping) for f in aliases}
    for field in REQUIRED[kind]:
        _check_required(row[field], where, field, mapping.get(field) or " / ".join(aliases[field]))
    for name in ("id", "user_id", "session_id"):
        if name in row:
            _check_id(row[name], where, name)
    for name in ("id", "url", "answer", "user_id", "session_id"):
        if name in row:
            row[name] = _as_text(row[name])
    for name in ("id", "user_id", "session_id"):
        if row.get(name) is not None:
            check_id_length(row[name], where, name)
    if row["url"] is not None:
        check_url(row["url"], f"{where}: field 'url'")
    _check_no_nul(row, where)
    if kind == "questions":
        row["score"] = _parse_score(row["score"], where)
        row["created_at"] = _parse_time(row["created_at"], where, date_format)
    if row["id"] is None:
        basis = (row["url"], row["text"]) if kind == "chunks" else (
            row["question"], row["user_id"], row["session_id"], row["created_at"])
        row["id"] = _stable_id(*basis)
    return row


def _check_id(value: Any, where: str, name: str) -> None:
    """Ids are text or integers; a list, object or boolean would be stored as its Python spelling, and a float is
    not turned into an id (1.0 → "1" would be a guess: it is how pandas stores an integer column with gaps)."""
    if value is None or value is pd.NA or isinstance(value, str):
        return
    if isinstance(value, float):
        shown = "NaN" if math.isnan(value) else repr(value)
        raise ValueError(f"{where}: field '{name}' = {shown} is a float; ids must be text or integers, and a float "
                         f"is not turned into one. pandas stores an integer column with gaps as floats (17 → 17.0, "
                         f"a gap → NaN): convert it before writing the file, e.g. df['{name}'] = "
                         f"df['{name}'].astype('Int64') (or .astype(str)), or give the ids as text")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{where}: field '{name}' = {value!r:.60} is a {type(value).__name__}; "
                         "ids must be text or integers")


def _check_no_nul(row: dict, where: str) -> None:
    for name, value in row.items():
        if isinstance(value, str) and "\x00" in value:
            raise ValueError(f"{where}: field '{name}' contains a NUL byte (\\x00); remove it from the source data")


_SCORE_TEXT = re.compile(r"\s*[+-]?\d+(\.0+)?\s*")  # "5.0": how pandas writes an int column with gaps


def _parse_score(value: Any, where: str) -> int | None:
    """An integer 1–5; an empty cell is missing. ``true``, ``NaN``, ``5/5`` or 4.5 are errors, never guessed."""
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    fix = "use an integer 1–5 or leave the cell empty"
    if isinstance(value, str):
        if not _SCORE_TEXT.fullmatch(value):
            raise ValueError(f"{where}: field 'score' = {value!r} is not an integer 1–5; {fix}")
        value = int(float(value))
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ValueError(f"{where}: field 'score' = {value!r} is not an integer 1–5; {fix}")
    if not 1 <= value <= 5:
        raise ValueError(f"{where}: field 'score' = {str(value)!r} is outside 1–5; {fix}")
    return int(value)


def _parse_time(value: Any, where: str, date_format: str | None = None) -> datetime | None:
    """ISO 8601 text (or a native timestamp from Parquet), or text in the explicit ``date_format``. Day/month
    order and epoch numbers are never guessed; a date without a zone is taken as UTC."""
    if _missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):  # pandas Timestamp is a datetime
        ts = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    elif not isinstance(value, str):
        raise ValueError(f"{where}: field 'created_at' = {value!r} is a {type(value).__name__}, not a date; "
                         "write dates as ISO 8601 text, e.g. 2024-05-01T12:00:00Z (epoch numbers are not guessed)")
    elif date_format:
        try:
            ts = datetime.strptime(value.strip(), date_format)
        except ValueError:
            raise ValueError(f"{where}: field 'created_at' = {value!r} does not match --date-format "
                             f"{date_format!r}; fix the row or the format") from None
    else:
        try:
            ts = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{where}: field 'created_at' = {value!r} is not ISO 8601 (e.g. 2024-05-01T12:00:00Z); "
                             "convert it, or give its pattern with --date-format, e.g. --date-format '%d.%m.%Y'") from None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class InsertCount:
    """What :func:`insert_rows` did: ``inserted`` new rows, ``skipped`` rows whose id was already stored (kept
    as stored; with ``refresh`` their listed columns were overwritten)."""

    inserted: int
    skipped: int

    def as_dict(self) -> dict:
        return {"inserted": self.inserted, "skipped": self.skipped}


def insert_rows(db: Database, kind: str, rows: list[dict], refresh: tuple[str, ...] = ()) -> InsertCount:
    """Insert rows, skipping ids already present (so re-running the demo adds nothing) and counting them. One
    transaction. For rows the package itself made (the demo); files from users go through :func:`load_file`,
    which checks the text."""
    if _stored_as_given(db, kind, rows, refresh):  # every notebook of the demo checks its rows: read, not write
        return InsertCount(0, len(rows))
    inserted = merge_rows(db, kind, rows, refresh, on_changed="skip").inserted
    return InsertCount(inserted, len(rows) - inserted)


def _stored_as_given(db: Database, kind: str, rows: list[dict], refresh: tuple[str, ...]) -> bool:
    """Whether every row's id is stored and its ``refresh`` columns hold the given values (then
    :func:`insert_rows` has nothing to write)."""
    t = ensure_schema(db)
    table = t.chunk if kind == "chunks" else t.question
    if not rows or any(c not in table.c for c in refresh):
        return False
    ids = [r["id"] for r in rows]
    query = sa.select(table.c.id, *[table.c[c] for c in refresh]).where(table.c.id.in_(ids))
    with db.engine.connect() as conn:
        stored = {row[0]: tuple(row[1:]) for row in conn.execute(query)}
    return all(stored.get(r["id"]) == tuple(r.get(c) for c in refresh) for r in rows)


def load_file(db: Database, kind: str, path: str | Path, mapping: dict[str, str] | None = None,
              chunk_size: int = 200, overlap: int = 40, date_format: str | None = None,
              update: bool = False, url_template: str | None = None, batch_rows: int = BATCH_ROWS) -> LoadStats:
    """Validate then load ``path`` (file or, for chunks, a folder) into the chunk or question table, read,
    validated and COPYed ``batch_rows`` rows at a time (a folder: a page at a time) in one transaction.
    ``date_format``: strftime pattern of ``created_at`` (ISO 8601 otherwise); ``update``: overwrite rows
    whose id is stored with a different text (an error otherwise); ``url_template``: a folder's page URLs
    (:mod:`ragnb.store.markdown`, which chunks a folder and lists its pages without text in ``warnings``)."""
    if kind not in REQUIRED:
        raise ValueError(f"kind must be 'chunks' or 'questions', got {kind!r}")
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{p}: no such file or folder")
    if p.is_dir():
        if kind != "chunks":
            raise ValueError(f"{p}: a folder can only be loaded as chunks; questions need a JSONL/CSV/Parquet file")
        if mapping:
            raise ValueError(f"{p}: --map applies to files; a folder's pages take their url from front matter "
                             "or --url-template")
    elif url_template is not None:
        raise ValueError(f"--url-template applies to a folder of pages; {p} is a file — name its URL column "
                         "with --map url=COLUMN")
    warnings: list[str] = []
    if p.is_dir():
        rows: FileRows | FolderRows = FolderRows(p, chunk_size, overlap, url_template, warnings)
    else:
        rows = FileRows(p, kind, mapping, date_format, warnings, batch_rows)
    # A new url never invalidates a vector, so it is taken without --update (how a wiki reloaded with
    # --url-template gets its real page URLs); a new text still needs --update.
    done = merge_rows(db, kind, iter(rows), refresh=("url",), on_changed="update" if update else "error",
                      locate=rows.locate, batch_rows=batch_rows)
    return LoadStats(str(p), kind, rows.rows, done.inserted, rows.rows - done.inserted - len(done.changed),
                     done.changed, warnings, done.refreshed)


def count_rows(db: Database, kind: str) -> dict:
    from ragnb.store.models import has_default_vector
    from ragnb.store.schema import table_exists, tables

    t = tables(db.schema)
    table = t.chunk if kind == "chunks" else t.question
    if not table_exists(db, table):
        return {"rows": 0, "embedded": 0}
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        emb = conn.execute(sa.select(sa.func.count()).select_from(table).where(has_default_vector(db, table))
                           ).scalar_one()
    return {"rows": int(rows), "embedded": int(emb)}


def stored_urls(db: Database, kind: str) -> list[str | None]:
    """The url of every row of the chunk or question table (chunks: each distinct url once, sorted)."""
    from ragnb.store.schema import table_exists, tables

    t = tables(db.schema)
    table = t.chunk if kind == "chunks" else t.question
    if not table_exists(db, table):
        return []
    stmt = sa.select(table.c.url)
    if kind == "chunks":
        stmt = stmt.distinct().order_by(table.c.url)
    with db.engine.connect() as conn:
        return list(conn.execute(stmt).scalars())
