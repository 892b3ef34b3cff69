"""Writing the default model's chunk vectors into their vector table (``ragnb_vectors_chunk``, see
:func:`ragnb.store.models.default_vectors`).

Why a table of their own: storing a vector in the chunk row (``UPDATE chunk SET embedding = …``) rewrites the whole
wide row — its text, its stored digest — and pays that row's WAL again, then autovacuum; a narrow ``(row_id,
embedding)`` table takes the vectors by binary COPY at close to a bare COPY's cost (BENCHMARKS §14). The bits are
those the encoder made: binary COPY sends each float32 as it is (:mod:`ragnb.store.copy`).

A database from before this keeps its vectors in the chunk column and reads them there; the first ``ragnb embed``
(or ``--default``) of its default model that can create the table (the role owns the chunk table) moves them over
once, in one transaction, value for value, with a progress line. A role that does not own the chunk table keeps
writing the column, as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import sqlalchemy as sa
from psycopg import sql

from ragnb.progress import reporter
from ragnb.store.copy import copy_vectors, stage_vectors
from ragnb.store.engine import Database
from ragnb.store.models import (data_dimension, default_table, default_table_allowed, qualified, quote,
                                quoted_table)
from ragnb.store.schema import column_dimension

_HNSW_OPTIONS = re.compile(r"USING hnsw \((?:.*?)\)(?: WITH \((?P<opts>[^)]*)\))?", re.IGNORECASE)


def prepare_default_table(db: Database, which: str, table: sa.Table, dim: int) -> sa.Table | None:
    """The default vector table to write ``which``'s default vectors to — created, and the column's vectors moved
    into it, on first use — or None when they stay in the column (read-only, a production or mapped schema, a
    table ragnb did not create, a role that does not own the table and so cannot create one beside it)."""
    if not (db.writable and default_table_allowed(db, which)):
        return None
    vt = default_table(table)
    with db.engine.connect() as conn:
        there, owner = conn.execute(sa.text(
            "SELECT to_regclass(:vt) IS NOT NULL, pg_has_role(c.relowner, 'USAGE') FROM pg_class AS c "
            "WHERE c.oid = to_regclass(:t)"), {"vt": quoted_table(db, vt), "t": quoted_table(db, table)}).one()
    if there:
        return vt
    if not (owner and _created_by_ragnb(db, table)):
        return None
    move_column_to_table(db, table, vt, dim)
    return vt


def _created_by_ragnb(db: Database, table: sa.Table) -> bool:
    """A chunk table ragnb created carries its stored digests (:mod:`ragnb.store.text_keys`); a team's own table of
    the default names does not, and gets no table beside it (ragnb adds nothing to a schema it did not make)."""
    from ragnb.store.text_keys import has_key_column

    with db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            made = has_key_column(cur, quoted_table(db, table), table.c.text.name)
        raw.rollback()
    return made


def move_column_to_table(db: Database, table: sa.Table, vt: sa.Table, dim: int) -> int:
    """Create ``vt`` and move the chunk column's vectors into it (copied value for value, then cleared from the
    column), with the column's HNSW indexes rebuilt on ``vt`` under the same options — one transaction, so an
    interruption leaves the column as it was. Returns how many vectors moved.

    Two first embeds at once (two notebooks, two terminals): each takes a transaction lock on ``vt``'s name
    first, and the second finds the table made by the first and moves nothing (0), instead of failing on
    CREATE TABLE."""
    emb, tid = quote(db, table.c.embedding.name), quote(db, table.c.id.name)
    with db.engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": creation_lock_key(db, vt)})
        if conn.execute(sa.text("SELECT to_regclass(:vt) IS NOT NULL"), {"vt": quoted_table(db, vt)}).scalar_one():
            return 0
        n = conn.execute(sa.text(f"SELECT count(*) FROM {quoted_table(db, table)} WHERE {emb} IS NOT NULL")).scalar_one()
        size = (data_dimension(db, table) if n else None) or dim
        report = reporter(f"moving the vectors of {qualified(table)} to {qualified(vt)} (once)", "rows") if n else None
        if report is not None:
            report(0, n)
        indexes = conn.execute(sa.text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t AND "
            "schemaname = COALESCE(CAST(:s AS text), current_schema()) AND indexdef ILIKE '%USING hnsw%'"),
            {"t": table.name, "s": table.schema}).all()
        conn.execute(sa.text(f"CREATE TABLE {quoted_table(db, vt)} (row_id text PRIMARY KEY, "
                             f"embedding vector({int(size)}) NOT NULL)"))
        _forget_deleted_rows(db, conn, table, vt)
        if n:
            conn.execute(sa.text(f"INSERT INTO {quoted_table(db, vt)} (row_id, embedding) SELECT CAST({tid} AS text), {emb} "
                                 f"FROM {quoted_table(db, table)} WHERE {emb} IS NOT NULL"))
            conn.execute(sa.text(f"UPDATE {quoted_table(db, table)} SET {emb} = NULL WHERE {emb} IS NOT NULL"))
        for name, definition in indexes:
            prefix = f"{quote(db, table.schema)}." if table.schema else ""
            conn.execute(sa.text(f"DROP INDEX {prefix}{quote(db, name)}"))
            found = _HNSW_OPTIONS.search(definition)
            opts = f" WITH ({found.group('opts')})" if found and found.group("opts") else ""
            conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {quote(db, vt.name + '_hnsw_idx')} ON {quoted_table(db, vt)} "
                                 f"USING hnsw (embedding vector_cosine_ops){opts}"))
    if report is not None:
        report(n, n)
    return int(n)


def creation_lock_key(db: Database, vt: sa.Table) -> str:
    """The advisory lock (by ``hashtext``) held while ``vt`` is being created."""
    return f"ragnb create {quoted_table(db, vt)}"


def _forget_deleted_rows(db: Database, conn: Any, table: sa.Table, vt: sa.Table) -> None:
    """Triggers that take a deleted (or truncated) chunk row's vector with it, as the column did: a search must never
    return an id the chunk table no longer has. Statement-level, on deletes only: writing vectors costs nothing."""
    fn = (f"{quote(db, table.schema)}." if table.schema else "") + quote(db, vt.name + "_forget")
    seq = deletions_sequence(db, vt)
    conn.execute(sa.text(f"CREATE SEQUENCE IF NOT EXISTS {seq}"))
    # the counter first (nextval is seen by every session at once, committed or not); a role that may delete rows
    # but not use the sequence still deletes — its writes are then checked only by their own block's check
    conn.execute(sa.text(
        f"CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF to_regclass('{seq}') IS NOT NULL THEN BEGIN PERFORM nextval('{seq}'); "
        "EXCEPTION WHEN insufficient_privilege THEN NULL; END; END IF; "
        f"IF to_regclass('{quoted_table(db, vt)}') IS NULL THEN RETURN NULL; "  # dropped by hand: nothing to forget
        f"ELSIF TG_OP = 'TRUNCATE' THEN TRUNCATE {quoted_table(db, vt)}; "
        f"ELSE DELETE FROM {quoted_table(db, vt)} WHERE row_id IN (SELECT CAST({quote(db, table.c.id.name)} AS text) FROM gone); "
        "END IF; RETURN NULL; END $$"))
    for suffix in ("_deleted", "_truncated"):  # left by a default vector table dropped by hand
        conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {quote(db, vt.name + suffix)} ON {quoted_table(db, table)}"))
    conn.execute(sa.text(f"CREATE TRIGGER {quote(db, vt.name + '_deleted')} AFTER DELETE ON {quoted_table(db, table)} "
                         f"REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE PROCEDURE {fn}()"))
    conn.execute(sa.text(f"CREATE TRIGGER {quote(db, vt.name + '_truncated')} AFTER TRUNCATE ON {quoted_table(db, table)} "
                         f"FOR EACH STATEMENT EXECUTE PROCEDURE {fn}()"))


def write_default(db: Database, table: sa.Table, vt: sa.Table, ids: list[str], vecs: np.ndarray, conn: Any,
                  since: int | None = None) -> None:
    """Store the block in ``vt`` (in ``conn``'s transaction): a binary COPY straight into it — the rows ``ragnb
    embed`` writes have no vector there yet, and the COPY costs the server 0.18 s per 30k rows where a stage
    plus INSERT … SELECT costs 0.45 s — or, when some id has one already (another run wrote it meanwhile, a
    second write of the same rows), a stage and one INSERT … ON CONFLICT. An id that names no row of ``table``
    (deleted meanwhile) is a ``ValueError`` and nothing of the block is written (the transaction rolls back).

    ``since``: the table's :func:`deletion_mark` read before ``ids`` were read from it. While no delete
    statement has run on ``table`` since, every id still names a row and the check of each id against the
    table is skipped (it cost the server 0.17 s and the client 0.10 s per 100k rows)."""
    import psycopg

    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    if len(ids) != len(vecs):
        raise ValueError(f"{len(ids)} row ids but {len(vecs)} vectors; each row needs exactly one vector")
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:
        if since is None or _read_mark(cur, deletions_sequence(db, vt)) != since:
            _check_rows(db, table, cur, ids)
        try:
            with raw.transaction():  # a savepoint: a conflict undoes only the COPY
                copy_vectors(cur, sql.SQL(quoted_table(db, vt)), ids, vecs, columns=("row_id", "embedding"))
        except psycopg.errors.UniqueViolation:
            stage = stage_vectors(cur, ids, vecs)
            cur.execute(f"INSERT INTO {quoted_table(db, vt)} (row_id, embedding) SELECT id, emb FROM {stage} "
                        "ON CONFLICT (row_id) DO UPDATE SET embedding = EXCLUDED.embedding")


def deletions_sequence(db: Database, vt: sa.Table) -> str:
    """The quoted name of the counter that the delete trigger of ``vt``'s chunk table bumps once per delete or
    truncate statement (:func:`_forget_deleted_rows`)."""
    return (f"{quote(db, vt.schema)}." if vt.schema else "") + quote(db, vt.name + "_deletes")


def deletion_mark(db: Database, vt: sa.Table) -> int | None:
    """The deletion counter of ``vt``'s chunk table now, for :func:`write_default`'s ``since``; None when it cannot
    be read (a vector table from before the counter, or a role without the right to read it): every block is
    then checked."""
    with db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            mark = _read_mark(cur, deletions_sequence(db, vt))
        raw.rollback()
    return mark


def _read_mark(cur: Any, seq: str) -> int | None:
    cur.execute("SELECT CASE WHEN to_regclass(%(s)s) IS NULL OR NOT has_sequence_privilege(to_regclass(%(s)s), "
                "'SELECT') THEN NULL ELSE COALESCE(pg_sequence_last_value(to_regclass(%(s)s)), 0) END", {"s": seq})
    value = cur.fetchone()[0]
    return None if value is None else int(value)


def _check_rows(db: Database, table: sa.Table, cur: Any, ids: list[str]) -> None:
    """A ``ValueError`` naming the first ids of the block that name no row of ``table``."""
    # the ids as one JSON document: psycopg adapts a list of 8,192 strings element by element (0.14 s of client CPU
    # per 100k ids), json.dumps in C (0.01 s); the server unpacks either at the same cost
    cur.execute(f"SELECT i FROM json_array_elements_text(CAST(%s AS json)) AS i WHERE NOT EXISTS (SELECT 1 FROM "
                f"{quoted_table(db, table)} AS t WHERE CAST(t.{quote(db, table.c.id.name)} AS text) = i) ORDER BY 1",
                (json.dumps(list(ids)),))
    gone = [r[0] for r in cur.fetchall()]
    if gone:
        raise ValueError(f"{qualified(table)}: {len(gone)} row(s) to embed are no longer in the table "
                         f"(first: {gone[:3]}) — were rows deleted or reloaded while embedding? Nothing of this "
                         "block was written; run `ragnb embed` again.")


def replace_default(db: Database, table: sa.Table, vt: sa.Table, dim: int, ids: list[str], vecs: np.ndarray,
                    conn: Any, since: int | None = None) -> None:
    """Every default vector of ``table`` replaced by ``ids``/``vecs`` (in ``conn``'s transaction, so the old ones
    survive any failure before it commits). The same dimension keeps the table and its HNSW index (emptied);
    another dimension makes the table anew (an index must be built again: ``ragnb db index``). ``since``: as
    :func:`write_default`'s."""
    if column_dimension(db, vt) == int(dim):
        conn.execute(sa.text(f"TRUNCATE {quoted_table(db, vt)}"))
    else:
        conn.execute(sa.text(f"DROP TABLE {quoted_table(db, vt)}"))
        conn.execute(sa.text(f"CREATE TABLE {quoted_table(db, vt)} (row_id text PRIMARY KEY, "
                             f"embedding vector({int(dim)}) NOT NULL)"))
    if ids:
        write_default(db, table, vt, ids, vecs, conn, since=since)


def missing_default(db: Database, table: sa.Table, vt: sa.Table) -> str:
    """`` WHERE …``: the rows of ``table`` without a default vector in ``vt``."""
    return (f" WHERE NOT EXISTS (SELECT 1 FROM {quoted_table(db, vt)} AS v "
            f"WHERE v.row_id = CAST({quoted_table(db, table)}.{quote(db, table.c.id.name)} AS text))")
