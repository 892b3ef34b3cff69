"""Binary COPY into a temporary staging table, for merges that write many rows in one statement.

The fast way to move rows into PostgreSQL is COPY in binary format: no value is turned into text on the client
nor parsed back on the server. Rows go into a temporary table (dropped at commit) and the caller merges them
into the real table with one ``UPDATE … FROM`` or ``INSERT … ON CONFLICT``, in the caller's transaction, so a
failure or a kill leaves nothing half-written.

Vectors use pgvector's psycopg adapter (``copy.set_types([..., "vector"])``): it sends each float32 value's
four bytes as they are, so what the database stores is bit-identical to the float32 array given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psycopg
from psycopg import sql

STAGE_VECTORS = "ragnb_stage_vec"


def ensure_vector_type(raw: psycopg.Connection) -> None:
    """Teach ``raw`` pgvector's types if it does not know them yet (a pooled connection may predate the extension:
    binary COPY needs the ``vector`` type's oid)."""
    if raw.adapters.types.get("vector") is None:
        from pgvector.psycopg import register_vector

        register_vector(raw)


def create_stage(cur: psycopg.Cursor, name: str, columns: Sequence[tuple[str, str]]) -> None:
    """A temporary table ``name`` of ``(column, SQL type)`` pairs, dropped when the transaction ends. A stage left
    by an earlier call in the same transaction is emptied rather than recreated."""
    cols = sql.SQL(", ").join(sql.SQL("{} {} NOT NULL").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns)
    cur.execute(sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {name} ({cols}) ON COMMIT DROP; TRUNCATE {name}").format(
        name=sql.Identifier(name), cols=cols))  # one round trip


def copy_binary(cur: psycopg.Cursor, name: str, columns: Sequence[tuple[str, str]], rows: Iterable[Sequence]) -> None:
    """Binary COPY of ``rows`` into table ``name``'s ``(column, type name)`` columns; the type names are those
    psycopg knows (``text``, ``int8``, ``vector`` once registered)."""
    stmt = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(name), sql.SQL(", ").join(sql.Identifier(c) for c, _ in columns))
    with cur.copy(stmt) as copy:
        copy.set_types([t for _, t in columns])
        for row in rows:
            copy.write_row(row)


def stage_vectors(cur: psycopg.Cursor, ids: Sequence[str], vecs) -> str:
    """Stage ``(id text, emb vector)`` rows — ``vecs`` a float32 matrix, one row per id — and return the stage's
    name. A repeated id is a ``ValueError`` (a merge would have to pick one of its vectors)."""
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        first = next(i for i in ids if i in seen or seen.add(i))
        raise ValueError(f"row id {first!r} is given twice in one block of vectors; each row gets one vector")
    if len(ids) != len(vecs):
        raise ValueError(f"{len(ids)} row ids but {len(vecs)} vectors; each row needs exactly one vector")
    ensure_vector_type(cur.connection)
    create_stage(cur, STAGE_VECTORS, [("id", "text"), ("emb", "vector")])
    copy_binary(cur, STAGE_VECTORS, [("id", "text"), ("emb", "vector")], zip(ids, vecs))
    return STAGE_VECTORS
