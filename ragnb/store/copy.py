"""Bulk writes through PostgreSQL's COPY: rows go to a temporary staging table, then one statement merges them.

COPY costs the client a fraction of an ``INSERT … VALUES`` (no statement to compile, no parameters to bind), and
a staging table lets the merge (``INSERT … SELECT … ON CONFLICT``, ``UPDATE … FROM``) run in the server. The
staging table lives in the caller's transaction (``ON COMMIT DROP``): a rollback or a killed client leaves
nothing behind. It needs the ``TEMPORARY`` privilege on the database, which PostgreSQL grants to everyone by
default.

Two formats, each where it fits:
- rows of a loaded file (:func:`copy_rows_to_staging`): text COPY into a stage with the target's own column types,
  so a team's schema (integer ids, ``varchar``) parses each value exactly as an ``INSERT`` would;
- vectors (:func:`stage_vectors`): binary COPY, each float32 value's four bytes sent as they are, so what the
  database stores is bit-identical to the float32 array given and nothing is turned into text and parsed back.
  The payload is built by numpy for a whole block (:func:`vector_copy_payload`), not row by row through
  pgvector's psycopg adapter: the adapter's per-row Python calls cost more than the rest of the write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg import sql

STAGE_VECTORS = "ragnb_stage_vec"


def table_identifier(table: sa.Table) -> sql.Identifier:
    """``table`` quoted for psycopg's ``sql`` module, with its schema when it has one."""
    return sql.Identifier(table.schema, table.name) if table.schema else sql.Identifier(table.name)


def column_list(table: sa.Table, keys: Sequence[str]) -> sql.Composed:
    """The database names of ``table``'s columns ``keys`` (SQLAlchemy keys), quoted and comma-separated."""
    return sql.SQL(", ").join(sql.Identifier(table.c[k].name) for k in keys)


def copy_rows_to_staging(cursor: Any, table: sa.Table, keys: Sequence[str], rows: Iterable[Sequence[Any]],
                         staging: str, create: bool = True, analyze: bool = True) -> sql.Identifier:
    """Create the temporary table ``staging`` (dropped at commit) with the types of ``table``'s columns ``keys``
    and COPY ``rows`` (tuples in the order of ``keys``) into it; return its quoted name. A file loaded a batch at
    a time COPYs each batch with ``create=False`` (into the stage its first batch created) and ``analyze=False``,
    then calls :func:`analyze_stage` once.

    ``cursor``: a psycopg 3 cursor inside the caller's transaction. The staging columns take the target's types
    (``CREATE TABLE … AS SELECT … WITH NO DATA``: no constraints, no defaults), so a team's table with an integer
    id or a ``varchar`` column gets its values parsed exactly as an ``INSERT`` would parse them. Text format:
    psycopg escapes tabs, newlines and backslashes, and any Python value with a text form (str, int, datetime)
    fits any column type; a NUL character is refused by psycopg (PostgreSQL text cannot hold it)."""
    name = sql.Identifier(staging)
    columns = column_list(table, keys)
    if create:
        cursor.execute(sql.SQL("CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA")
                       .format(name, columns, table_identifier(table)))
    with cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(name, columns)) as copy:
        for row in rows:
            copy.write_row(row)
    if analyze:
        analyze_stage(cursor, name, sql.Identifier(table.c.id.name))  # every merge joins on the id
    return name


def analyze_stage(cursor: Any, name: sql.Identifier, key: sql.Identifier) -> None:
    """Give the planner the staging table's row count and its join key's statistics.

    Autovacuum never analyzes temporary tables, so without this the planner guesses the stage's size from its
    pages — 144,000 rows for a stage of 8,192 vectors — and merges with a hash join that reads the whole target
    table for every block written: quadratic in the table's size (embedding a 1M-chunk table with every text
    cached cost the server 246 s of CPU that way; analyzed, its merges take ~22 s: a nested loop over the
    primary key). Only the key column: the vectors' statistics would cost more than they tell."""
    cursor.execute(sql.SQL("ANALYZE {} ({})").format(name, key))


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


# PostgreSQL's binary COPY framing: signature, flags (int32), header extension length (int32) ... rows ... -1.
PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
PGCOPY_TRAILER = b"\xff\xff"


def vector_copy_payload(ids: Sequence[bytes], vecs: np.ndarray) -> Iterator[memoryview]:
    """The binary COPY rows ``(id text, emb vector)`` of encoded ids and a float32 matrix, a block at a time
    (no header or trailer). Row order does not matter to a staging table, so rows are grouped by the byte
    length of their id: within a group every row has the same layout, one numpy record.

    Each row (PostgreSQL's binary tuple, all big-endian): int16 field count 2; int32 byte length of the id and
    its UTF-8 bytes (``text``'s binary form); int32 byte length ``4 + 4 * dim`` of the vector and pgvector's
    binary ``vector`` (``vector_send``: int16 dim, int16 unused = 0, then ``dim`` float4). The floats travel as
    their uint32 bit patterns, byte-swapped as integers: no arithmetic touches them, so -0.0, subnormals and
    every other value arrive bit for bit."""
    n, dim = vecs.shape
    bits = np.ascontiguousarray(vecs, dtype=np.float32).view(np.uint32)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=n)
    order = np.argsort(lengths, kind="stable")
    starts = np.flatnonzero(np.diff(lengths[order])) + 1
    as_fixed = np.array(ids, dtype=f"S{max(int(lengths.max(initial=0)), 1)}")
    for group in np.split(order, starts) if n else ():
        width = int(lengths[group[0]])
        fields = [("fields", ">i2"), ("id_len", ">i4")] + ([("id", f"S{width}")] if width else []) + \
            [("vec_len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("vec", ">u4", (dim,))]
        rec = np.empty(len(group), dtype=np.dtype(fields))
        rec["fields"], rec["id_len"], rec["vec_len"], rec["dim"], rec["unused"] = 2, width, 4 + 4 * dim, dim, 0
        whole = len(group) == n  # every id of one length: the rows in their own order, no gather
        if width:  # the ids of this group fill the width exactly: nothing is cut
            rec["id"] = as_fixed if whole else as_fixed[group]
        rec["vec"] = bits if whole else bits[group]
        yield memoryview(rec).cast("B")  # the record's own bytes, not a copy of them


def copy_vectors(cur: psycopg.Cursor, name: str | sql.Composable, ids: Sequence[str], vecs: np.ndarray,
                 columns: tuple[str, str] = ("id", "emb")) -> None:
    """Binary COPY of ``(id, vector)`` rows into table ``name``'s ``columns`` (``text``, ``vector``); ``name``: a
    table name, or an already quoted (schema-qualified) identifier."""
    codec = cur.connection.info.encoding  # text's binary form is in the connection's encoding (UTF-8 by default)
    # one encode of all ids joined by NUL (which PostgreSQL text cannot hold), not one call per id
    encoded = "\0".join(ids).encode(codec).split(b"\0") if ids else []
    if len(encoded) != len(ids):
        raise ValueError("a row id holds a NUL character, which PostgreSQL text cannot store; remove it from the id")
    payload = vector_copy_payload(encoded, vecs)
    target = sql.Identifier(name) if isinstance(name, str) else name
    with cur.copy(sql.SQL("COPY {} ({}, {}) FROM STDIN (FORMAT BINARY)").format(
            target, *map(sql.Identifier, columns))) as copy:
        copy.write(PGCOPY_HEADER)
        for block in payload:
            copy.write(block)
        copy.write(PGCOPY_TRAILER)


def stage_vectors(cur: psycopg.Cursor, ids: Sequence[str], vecs: np.ndarray) -> str:
    """Stage ``(id text, emb vector)`` rows — ``vecs`` a float32 matrix, one row per id — and return the stage's
    name. A repeated id is a ``ValueError`` (a merge would have to pick one of its vectors)."""
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        first = next(i for i in ids if i in seen or seen.add(i))
        raise ValueError(f"row id {first!r} is given twice in one block of vectors; each row gets one vector")
    if len(ids) != len(vecs):
        raise ValueError(f"{len(ids)} row ids but {len(vecs)} vectors; each row needs exactly one vector")
    create_stage(cur, STAGE_VECTORS, [("id", "text"), ("emb", "vector")])
    copy_vectors(cur, STAGE_VECTORS, ids, np.ascontiguousarray(vecs, dtype=np.float32))
    analyze_stage(cur, sql.Identifier(STAGE_VECTORS), sql.Identifier("id"))
    return STAGE_VECTORS
