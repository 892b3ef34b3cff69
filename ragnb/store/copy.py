"""Bulk writes through PostgreSQL's COPY: rows go to a temporary staging table, then one statement merges them.

COPY costs the client a fraction of an ``INSERT … VALUES`` (no statement to compile, no parameters to bind), and
a staging table lets the merge (``INSERT … SELECT … ON CONFLICT``, ``UPDATE … FROM``) run in the server. The
staging table lives in the caller's transaction (``ON COMMIT DROP``): a rollback or a killed client leaves
nothing behind. It needs the ``TEMPORARY`` privilege on the database, which PostgreSQL grants to everyone by
default.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import sqlalchemy as sa
from psycopg import sql


def table_identifier(table: sa.Table) -> sql.Identifier:
    """``table`` quoted for psycopg's ``sql`` module, with its schema when it has one."""
    return sql.Identifier(table.schema, table.name) if table.schema else sql.Identifier(table.name)


def column_list(table: sa.Table, keys: Sequence[str]) -> sql.Composed:
    """The database names of ``table``'s columns ``keys`` (SQLAlchemy keys), quoted and comma-separated."""
    return sql.SQL(", ").join(sql.Identifier(table.c[k].name) for k in keys)


def copy_rows_to_staging(cursor: Any, table: sa.Table, keys: Sequence[str], rows: Iterable[Sequence[Any]],
                         staging: str) -> sql.Identifier:
    """Create the temporary table ``staging`` (dropped at commit) with the types of ``table``'s columns ``keys``
    and COPY ``rows`` (tuples in the order of ``keys``) into it; return its quoted name.

    ``cursor``: a psycopg 3 cursor inside the caller's transaction. The staging columns take the target's types
    (``CREATE TABLE … AS SELECT … WITH NO DATA``: no constraints, no defaults), so a team's table with an integer
    id or a ``varchar`` column gets its values parsed exactly as an ``INSERT`` would parse them. Text format:
    psycopg escapes tabs, newlines and backslashes, and any Python value with a text form (str, int, datetime)
    fits any column type; a NUL character is refused by psycopg (PostgreSQL text cannot hold it)."""
    name = sql.Identifier(staging)
    columns = column_list(table, keys)
    cursor.execute(sql.SQL("CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA")
                   .format(name, columns, table_identifier(table)))
    with cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(name, columns)) as copy:
        for row in rows:
            copy.write_row(row)
    return name
