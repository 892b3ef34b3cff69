"""Load chunks and question logs from JSONL / CSV / Parquet files or a folder of Markdown/text files.

Everything is validated before anything is written; a bad row raises ``ValueError`` naming the file,
the line and the field. Rows are inserted in one transaction with ``ON CONFLICT DO NOTHING`` on the id,
so loading the same file twice adds nothing. Rows without an id get a stable one derived from content.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import sqlalchemy as sa

from ragnb.io import is_json_lines, iter_json_records, read_text
from ragnb.store.engine import Database
from ragnb.store.schema import ensure_schema

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

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT


def read_records(path: Path) -> Iterator[tuple[str, dict]]:
    """Yield (where, record), ``where`` = ``"<path>:<n>"`` for messages. JSONL (``.jsonl``/``.ndjson``, optionally
    ``.gz``): physical line; CSV: line incl. header; Parquet: row+1."""
    suffixes = "".join(path.suffixes[-2:]).lower()
    if is_json_lines(path):
        for where, rec in iter_json_records(path, "record file"):
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            yield where, rec
    elif suffixes.endswith(".csv"):
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot parse CSV ({exc}); check quoting and that the file is UTF-8") from None
        for i, rec in enumerate(df.to_dict("records")):
            yield f"{path}:{i + 2}", rec
    elif suffixes.endswith(".parquet"):
        df = pd.read_parquet(path)
        for i, rec in enumerate(df.to_dict("records")):
            yield f"{path}:{i + 1}", rec
    else:
        raise ValueError(f"{path}: unsupported file type; use .jsonl, .jsonl.gz, .csv or .parquet (or a folder of .md/.txt)")


def _pick(rec: dict, field: str, aliases: dict, mapping: dict) -> Any:
    if field in mapping:
        return rec.get(mapping[field])
    for name in aliases[field]:
        if name in rec and not _missing(rec[name]):
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


def normalize_records(path: Path, kind: str, mapping: dict[str, str] | None = None) -> list[dict]:
    """Validate every row of ``path`` into the table's fields; raise on the first bad row."""
    # The original column name is accepted for the url field: --map confluence_url=link.
    mapping = {("url" if f == "confluence_url" else f): c for f, c in (mapping or {}).items()}
    aliases = CHUNK_ALIASES if kind == "chunks" else QUESTION_ALIASES
    unknown = sorted(set(mapping) - set(aliases))
    if unknown:
        raise ValueError(f"--map: unknown field(s) {unknown}; fields for {kind}: {sorted(aliases)}")
    rows: list[dict] = []
    seen: dict[str, tuple[str, dict]] = {}
    for where, rec in read_records(path):
        row = {f: _pick(rec, f, aliases, mapping) for f in aliases}
        for field in REQUIRED[kind]:
            if not isinstance(row[field], str) or not row[field].strip():
                names = mapping.get(field) or " / ".join(aliases[field])
                raise ValueError(f"{where}: field '{field}' (column {names}) is missing or empty; every row needs it")
        for field in ("id", "url", "answer", "user_id", "session_id"):
            if field in row:
                row[field] = _as_text(row[field])
        if kind == "questions":
            row["score"] = _parse_score(row["score"], where)
            row["created_at"] = _parse_time(row["created_at"], where)
        if row["id"] is None:
            basis = (row["url"], row["text"]) if kind == "chunks" else (
                row["question"], row["user_id"], row["session_id"], row["created_at"])
            row["id"] = _stable_id(*basis)
        if row["id"] in seen:
            first_line, first = seen[row["id"]]
            if first != row:
                raise ValueError(
                    f"{where}: field 'id' = {row['id']!r} repeats line {first_line} with different content; ids must be unique"
                )
            continue
        seen[row["id"]] = (where.rpartition(":")[2], row)  # its line number
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows found")
    return rows


def _parse_score(value: Any, where: str) -> int | None:
    if _missing(value) or value == "":
        return None
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field 'score' = {value!r} is not a number; use an integer 1–5 or leave it empty") from None
    if not score.is_integer() or not 1 <= score <= 5:
        raise ValueError(f"{where}: field 'score' = {value!r} is outside 1–5; use an integer 1–5 or leave it empty")
    return int(score)


def _parse_time(value: Any, where: str) -> datetime | None:
    if _missing(value) or value == "":
        return None
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field 'created_at' = {value!r} is not a date-time; use ISO 8601, e.g. 2024-05-01T12:00:00Z") from None
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return ts.to_pydatetime()


def chunk_text(text: str, chunk_size: int, overlap: int) -> list[str]:
    """Split ``text`` into windows of ``chunk_size`` words that overlap by ``overlap`` words."""
    if chunk_size < 1 or not 0 <= overlap < chunk_size:
        raise ValueError(f"chunk size {chunk_size} / overlap {overlap}: need size ≥ 1 and 0 ≤ overlap < size")
    words = text.split()
    step = chunk_size - overlap
    out = []
    for start in range(0, max(len(words), 1), step):
        piece = words[start:start + chunk_size]
        if piece:
            out.append(" ".join(piece))
        if start + chunk_size >= len(words):
            break
    return out


def folder_records(folder: Path, chunk_size: int = 200, overlap: int = 40) -> list[dict]:
    """Chunk every .md/.txt file under ``folder``; id = ``relative/path#n``, url = the relative path."""
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".md", ".markdown", ".txt") and p.is_file())
    if not files:
        raise ValueError(f"{folder}: no .md or .txt files found")
    rows = []
    for f in files:
        rel = f.relative_to(folder).as_posix()
        for n, piece in enumerate(chunk_text(read_text(f, "text file"), chunk_size, overlap)):
            rows.append({"id": f"{rel}#{n}", "url": rel, "text": piece})
    return rows


def insert_rows(db: Database, kind: str, rows: list[dict], refresh: tuple[str, ...] = ()) -> int:
    """Insert rows, skipping ids already present; returns how many were new. One transaction.

    ``refresh``: columns (never the text or the embedding) whose stored value is overwritten on rows that
    already exist — how the bundled demo updates its simulated scores without re-embedding anything.
    """
    from sqlalchemy.dialects.postgresql import insert

    t = ensure_schema(db)
    table = t.chunk if kind == "chunks" else t.question
    cols = [c.key for c in table.columns if c.key != "embedding"]
    bad = [c for c in refresh if c not in cols or c in ("id", "text", "question")]
    if bad:
        raise ValueError(f"refresh={bad}: only metadata columns can be refreshed ({[c for c in cols if c not in ('id', 'text', 'question')]})")
    inserted = 0
    with db.engine.begin() as conn:
        for start in range(0, len(rows), 5000):
            batch = [{c: r.get(c) for c in cols} for r in rows[start:start + 5000]]
            stmt = insert(table).values(batch)
            if refresh:
                stmt = stmt.on_conflict_do_update(index_elements=[table.c.id],
                                                  set_={c: stmt.excluded[c] for c in refresh})
                # xmax = 0 only on freshly inserted rows: count those, not the refreshed ones
                inserted += sum(conn.execute(stmt.returning(sa.literal_column("xmax") == 0)).scalars())
            else:
                stmt = stmt.on_conflict_do_nothing(index_elements=[table.c.id]).returning(table.c.id)
                inserted += len(conn.execute(stmt).all())
    return inserted


def load_file(db: Database, kind: str, path: str | Path, mapping: dict[str, str] | None = None,
              chunk_size: int = 200, overlap: int = 40) -> LoadStats:
    """Validate then load ``path`` (file or, for chunks, a folder) into the chunk or question table."""
    if kind not in REQUIRED:
        raise ValueError(f"kind must be 'chunks' or 'questions', got {kind!r}")
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{p}: no such file or folder")
    if p.is_dir():
        if kind != "chunks":
            raise ValueError(f"{p}: a folder can only be loaded as chunks; questions need a JSONL/CSV/Parquet file")
        rows = folder_records(p, chunk_size, overlap)
    else:
        rows = normalize_records(p, kind, mapping)
    inserted = insert_rows(db, kind, rows)
    return LoadStats(str(p), kind, len(rows), inserted, len(rows) - inserted)


def count_rows(db: Database, kind: str) -> dict:
    from ragnb.store.schema import table_exists, tables

    t = tables(db.schema)
    table = t.chunk if kind == "chunks" else t.question
    if not table_exists(db, table):
        return {"rows": 0, "embedded": 0}
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        emb = conn.execute(sa.select(sa.func.count()).select_from(table).where(table.c.embedding.is_not(None))).scalar_one()
    return {"rows": int(rows), "embedded": int(emb)}
