"""Each text's cache key stored with its row, computed once: ``ragnb embed`` reads it instead of hashing every text.

The disk cache keys a vector by ``sha256(text as UTF-8)`` (:mod:`ragnb.store.cached_rows`). Computing that on
every ``ragnb embed`` made the server decompress and hash the whole table each time: 2.2 s of server CPU per
100,000 chunks of ~2.6 kB (BENCHMARKS §14), before a single vector was written. The tables ragnb writes
therefore carry a stored generated column :data:`KEY_COLUMN` = :func:`ragnb_text_key` of the text — the same
digest, NULL for a text without content — which PostgreSQL computes when a row is inserted or its text changes
(never when only its vector does), whoever writes it: ``ragnb load``, ``--update``, or plain SQL.

Which tables get it: every table ragnb creates, and on the embedded server (ragnb's own) every existing table
once (:func:`ensure_text_keys`: one ``ALTER TABLE`` that rewrites the table, reported as a progress step). A
table ragnb did not create in an external database — a team's production table, even opened with ``--write`` —
is never altered: its digests are computed at embed time, as before. So is any table on a server older than
PostgreSQL 12 (no generated columns) or in a database whose encoding is not UTF8.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from psycopg import sql

from ragnb.progress import reporter
from ragnb.store.cached_rows import DIGEST_PARAMS, WHITESPACE, digest_sql

KEY_COLUMN = "ragnb_text_key"
KEY_FUNCTION = "ragnb_text_key"
MIN_SERVER = 120000  # generated columns


def key_function_sql(schema: str | None) -> sql.Composed:
    """``CREATE OR REPLACE FUNCTION [schema.]ragnb_text_key(text) → bytea``: ``sha256`` of the UTF-8 bytes, NULL
    for NULL or a text of whitespace only (``str.isspace``), exactly as :func:`~ragnb.store.cached_rows.digest_sql`
    decides (and as cheaply: the first 64 characters first).

    Declared IMMUTABLE, which a generated column requires, although ``convert_to`` is only STABLE (an encoding
    conversion could in principle be redefined): it is created only in UTF8 databases, where converting to UTF8
    hands the stored bytes over unchanged, so its result depends on its argument alone."""
    name = sql.Identifier(schema, KEY_FUNCTION) if schema else sql.Identifier(KEY_FUNCTION)
    ws = sql.Literal(WHITESPACE)
    return sql.SQL(
        "CREATE OR REPLACE FUNCTION {name}(t text) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ "
        "SELECT CASE WHEN ltrim(left(t, 64), {ws}) <> '' THEN sha256(convert_to(t, 'UTF8')) "
        "WHEN btrim(t, {ws}) = '' THEN NULL ELSE sha256(convert_to(t, 'UTF8')) END $$").format(name=name, ws=ws)


def _can_store(cur: Any) -> bool:
    cur.execute("SELECT current_setting('server_version_num')::int >= %s "
                "AND current_setting('server_encoding') = 'UTF8'", (MIN_SERVER,))
    return bool(cur.fetchone()[0])


def has_key_column(cur: Any, table_sql: str, text_col: str | None = None) -> bool:
    """Whether the table (quoted, as SQL) stores :data:`KEY_COLUMN` — generated from ``text_col`` when that is
    given (a schema map that later names another text column must not read the keys of the first)."""
    cur.execute("SELECT k.attnum FROM pg_attribute AS k WHERE k.attrelid = CAST(%s AS regclass) AND k.attname = %s "
                "AND NOT k.attisdropped AND (CAST(%s AS text) IS NULL OR EXISTS (SELECT 1 FROM pg_depend AS d "
                "JOIN pg_attribute AS t ON t.attrelid = d.refobjid AND t.attnum = d.refobjsubid "
                "WHERE d.refobjid = k.attrelid AND t.attname = %s AND ("
                # the generation expression depends on the text column: recorded for its default (PostgreSQL 18)
                # or for the column itself (older servers)
                "(d.classid = 'pg_attrdef'::regclass AND d.objid = (SELECT a.oid FROM pg_attrdef AS a "
                "WHERE a.adrelid = k.attrelid AND a.adnum = k.attnum)) OR "
                "(d.classid = 'pg_class'::regclass AND d.objid = k.attrelid AND d.objsubid = k.attnum))))",
                (table_sql, KEY_COLUMN, text_col, text_col))
    return cur.fetchone() is not None


def ensure_text_keys(db: Any, targets: list[tuple[sa.Table, sa.Column, bool]]) -> None:
    """Give each ``(table, text column, created now)`` its :data:`KEY_COLUMN` where it belongs (module docstring).
    An existing table is rewritten once, under an exclusive lock, reported as ``adding text digests to <table>``."""
    prep = db.engine.dialect.identifier_preparer
    targets = [(table, col) for table, col, created in targets if created or db.embedded]
    if not targets:  # an external database's own tables: nothing to look at
        return
    with db.engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
        todo = [(table, col) for table, col in targets if not has_key_column(cur, prep.format_table(table))]
        if not todo or not _can_store(cur):
            return
        for table, col in todo:
            _add_key_column(cur, prep.format_table(table), table, col)


def _add_key_column(cur: Any, table_sql: str, table: sa.Table, col: sa.Column) -> None:
    """The ALTER TABLE itself, after the table is locked and the column found still missing (two processes
    migrating at once: the second waits for the lock, then finds the column)."""
    cur.execute(f"LOCK TABLE {table_sql} IN ACCESS EXCLUSIVE MODE")
    if has_key_column(cur, table_sql):
        return
    cur.execute(f"SELECT count(*) FROM {table_sql}")
    rows = int(cur.fetchone()[0])
    report = reporter(f"adding text digests to {table.fullname} (once)", "rows") if rows else None
    if report is not None:
        report(0, rows)
    cur.execute(key_function_sql(table.schema))
    fn = sql.Identifier(table.schema, KEY_FUNCTION) if table.schema else sql.Identifier(KEY_FUNCTION)
    cur.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN {k} bytea GENERATED ALWAYS AS ({fn}({text})) STORED").format(
        t=sql.SQL(table_sql), k=sql.Identifier(KEY_COLUMN), fn=fn, text=sql.Identifier(col.name)))
    if report is not None:
        report(rows, rows)


def digest_select(cur: Any, table_sql: str, text_col: str, text_sql: str) -> tuple[str, tuple]:
    """SQL for a row's cache key as hex (NULL: no text to embed) and its parameters: the stored column when the
    table has one made from ``text_col``, else computed from the text (:func:`~ragnb.store.cached_rows.digest_sql`)."""
    if has_key_column(cur, table_sql, text_col):
        return f"encode({KEY_COLUMN}, 'hex')", ()
    return digest_sql(text_sql), DIGEST_PARAMS
