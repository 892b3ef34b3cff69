"""Tables: ``chunk`` and ``question_answer`` (see docs/databases.md), plus ragnb's record of which
model made the vectors of their ``embedding`` columns (other models' vectors: :mod:`ragnb.store.models`).

Table and column names come from :class:`ragnb.config.SchemaMap`, so the same code reads a team's
production schema. Ids are treated as text everywhere (an integer primary key is read as its text form).
The tables ragnb creates also carry a stored digest of their text, ``ragnb_text_key`` (:mod:`ragnb.store.text_keys`),
which these SQLAlchemy tables leave out on purpose: a production table has none, and nothing writes it but the
server.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from pgvector.sqlalchemy import Vector

from ragnb.config import ChunkColumns, QuestionColumns, SchemaMap
from ragnb.store.engine import Database, vector_unregistered

META_TABLE = "ragnb_embedding_space"

# The longest id (chunk, question, user and session ids) ragnb loads. Ids are btree primary keys, whose entries
# hold at most 2,704 bytes (a third of an 8 kB page): 512 characters of at most 4 UTF-8 bytes each always fit,
# and no page path, wiki page id or log id comes near it. A longer id is an error, never truncated.
ID_MAX_CHARS = 512


def check_id_length(value: str, where: str, name: str = "id") -> None:
    """Refuse an id longer than :data:`ID_MAX_CHARS` (a btree key has a size limit)."""
    if len(value) > ID_MAX_CHARS:
        raise ValueError(f"{where}: field '{name}' is {len(value):,} characters long ({value[:40]!r}…); ids may have "
                         f"at most {ID_MAX_CHARS} characters — is the id column really the text column? Use short "
                         "ids, or leave the id out to have one derived from the content")


def _split(qualified: str) -> tuple[str | None, str]:
    schema, _, name = qualified.rpartition(".")
    return (schema or None), name


def _table(cols: ChunkColumns | QuestionColumns, metadata: sa.MetaData | None,
           columns: list[tuple[str, Any, dict]]) -> sa.Table:
    """``cols.table`` with one column per (key, type, options); the database name of key ``k`` is ``cols.k``
    and SQLAlchemy's key is ``k``, so queries read the same whatever the mapping."""
    schema, name = _split(cols.table)
    made = [sa.Column(getattr(cols, key), type_, *options.pop("args", ()), key=key, **options)
            for key, type_, options in columns]
    return sa.Table(name, metadata or sa.MetaData(), *made, schema=schema)


def chunk_table(cols: ChunkColumns, metadata: sa.MetaData | None = None) -> sa.Table:
    return _table(cols, metadata, [("id", sa.Text, {"primary_key": True}), ("url", sa.Text, {}),
                                   ("text", sa.Text, {"nullable": False}), ("embedding", Vector(), {})])


def question_table(cols: QuestionColumns, metadata: sa.MetaData | None = None) -> sa.Table:
    score_range = sa.CheckConstraint(f"{cols.score} BETWEEN 1 AND 5")
    return _table(cols, metadata, [
        ("id", sa.Text, {"primary_key": True}), ("question", sa.Text, {"nullable": False}),
        ("answer", sa.Text, {}), ("url", sa.Text, {}), ("score", sa.SmallInteger, {"args": (score_range,)}),
        ("embedding", Vector(), {}), ("user_id", sa.Text, {}), ("session_id", sa.Text, {}),
        ("created_at", sa.DateTime(timezone=True), {}),
    ])


def meta_table(metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table(
        META_TABLE,
        metadata or sa.MetaData(),
        sa.Column("table_name", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
        sa.Column("backend", sa.Text),  # added with several models per table; older databases gain them on write
        sa.Column("fingerprint", sa.Text),
        sa.Column("settings", sa.Text),  # JSON: the query/document settings (prompts, input_type, dimensions)
    )


@dataclass(frozen=True)
class Tables:
    chunk: sa.Table
    question: sa.Table
    meta: sa.Table


def tables(schema: SchemaMap) -> Tables:
    """ragnb's tables under ``schema``'s names. Built once per mapping: building them costs ~4 ms, and one
    ``ragnb embed`` asked for them eight times (a third of its fixed cost on a 10k-row table)."""
    return _tables(schema.chunk, schema.question)


@functools.lru_cache(maxsize=32)
def _tables(chunk: ChunkColumns, question: QuestionColumns) -> Tables:
    md = sa.MetaData()
    return Tables(chunk_table(chunk, md), question_table(question, md), meta_table(md))


def ensure_schema(db: Database) -> Tables:
    """Create the pgvector extension and any missing table. Only for writing commands."""
    if not db.writable:
        raise ValueError(
            f"{db.display_url} is opened read-only; this command writes (creates tables). "
            "Pass --write to allow writing to an external database."
        )
    from ragnb.store.text_keys import ensure_text_keys

    t = tables(db.schema)
    ensure_vector_extension(db)
    prep = db.engine.dialect.identifier_preparer
    with db.engine.begin() as conn:
        for table in (t.chunk, t.question, t.meta):
            if table.schema:
                conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{table.schema}"'))
        existed = conn.execute(sa.text("SELECT to_regclass(:c) IS NOT NULL, to_regclass(:q) IS NOT NULL"),
                               {"c": prep.format_table(t.chunk), "q": prep.format_table(t.question)}).one()
        t.chunk.metadata.create_all(conn, checkfirst=True)
        add_text_columns(conn, t.meta, ("backend", "fingerprint", "settings"))
    ensure_text_keys(db, [(t.chunk, t.chunk.c.text, not existed[0]),
                          (t.question, t.question.c.question, not existed[1])])
    return t


def add_text_columns(conn: sa.Connection, table: sa.Table, names: tuple[str, ...]) -> None:
    """Add the ``text`` columns an older version of ``table`` lacks. Only when one is missing: ALTER TABLE needs the
    table's owner even when IF NOT EXISTS makes it change nothing, and a team's role granted INSERT and UPDATE
    (not ownership) loads and embeds too."""
    have = {c["name"] for c in sa.inspect(conn).get_columns(table.name, schema=table.schema)}
    missing = [n for n in names if n not in have]
    if missing:
        preparer = conn.dialect.identifier_preparer
        conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(table)} "
                             + ", ".join(f"ADD COLUMN IF NOT EXISTS {preparer.quote(n)} text" for n in missing)))


def ensure_vector_extension(db: Database) -> None:
    """Create pgvector in ``db`` if it is missing. The pool is reopened only when a pooled connection lacks the
    vector type (it was opened before the extension existed): reconnecting on every call would cost."""
    with db.engine.begin() as conn:
        missing = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first() is None
        if missing:
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    if missing or vector_unregistered(db.engine):
        db.engine.dispose()  # fresh connections register the vector type


def table_exists(db: Database, table: sa.Table) -> bool:
    return sa.inspect(db.engine).has_table(table.name, schema=table.schema)


def column_dimension(db: Database, table: sa.Table) -> int | None:
    """Declared dimension of the embedding column (``vector(384)`` → 384; untyped ``vector`` → None)."""
    col = table.c.embedding
    sql = sa.text(
        "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = CAST(:rel AS regclass) AND a.attname = :col"
    )
    rel = f'"{table.schema}"."{table.name}"' if table.schema else f'"{table.name}"'
    with db.engine.connect() as conn:
        typmod = conn.execute(sql, {"rel": rel, "col": col.name}).scalar()
    return int(typmod) if typmod is not None and typmod > 0 else None
