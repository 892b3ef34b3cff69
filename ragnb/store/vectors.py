"""Vectors in the database: which model made them, incremental embedding, and bulk reads.

One table holds vectors of one model only. The model name and dimension are recorded in
``ragnb_embedding_space``; asking for another model is an error (or, with ``replace``, a full re-embed),
never a silent mix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

import sqlalchemy as sa
from tqdm.auto import tqdm

import numpy as np

from ragnb.store.engine import Database
from ragnb.store.schema import Tables, column_dimension, ensure_schema, table_exists, tables


class Encoder(Protocol):
    """What the store needs of an encoder (ragnb.rag.embeddings.Encoder is one): the model name and dimension
    recorded with the vectors, and ``encode`` (texts → float32 rows)."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 32, progress: bool = False) -> np.ndarray: ...


@dataclass
class EmbedStats:
    """One embedding pass over a table: total rows, newly embedded, already embedded (skipped), failed."""

    table: str
    model: str
    dim: int
    total: int
    processed: int
    skipped: int
    errors: int

    def as_dict(self) -> dict:
        return asdict(self)


def _qualified(table: sa.Table) -> str:
    return f"{table.schema}.{table.name}" if table.schema else table.name


def _q(db: Database, name: str) -> str:
    return db.engine.dialect.identifier_preparer.quote(name)


def _qt(db: Database, table: sa.Table) -> str:
    return db.engine.dialect.identifier_preparer.format_table(table)


def vector_literal(v: np.ndarray) -> str:
    """pgvector's text form; float32 repr round-trips exactly."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"


def recorded_space(db: Database, t: Tables, table: sa.Table) -> tuple[str, int] | None:
    """(model, dim) recorded for ``table``, or None if ragnb never embedded it."""
    if not table_exists(db, t.meta):
        return None
    with db.engine.connect() as conn:
        row = conn.execute(
            sa.select(t.meta.c.model, t.meta.c.dim).where(t.meta.c.table_name == _qualified(table))
        ).first()
    return (row.model, int(row.dim)) if row else None


def check_space(db: Database, table: sa.Table, encoder: Encoder) -> dict:
    """Refuse to compare ``encoder``'s vectors with a table embedded by another model.

    Returns what was verified: ``{"model": ..., "dim": ..., "verified": bool}`` — ``verified`` is False
    for a table embedded outside ragnb, where only the dimension can be checked.
    """
    t = tables(db.schema)
    space = recorded_space(db, t, table)
    where = _qualified(table)
    if space:
        model, dim = space
        if model != encoder.name or dim != encoder.dim:
            raise ValueError(
                f"{where}.{table.c.embedding.name} holds vectors of model {model!r} (dim {dim}); the active "
                f"model is {encoder.name!r} (dim {encoder.dim}). Use the same model (--model {model!r} or "
                f"RAGNB_EMBEDDING_MODEL), or re-embed the table with `ragnb embed --replace`."
            )
        return {"model": model, "dim": dim, "verified": True}
    with db.engine.connect() as conn:
        dim = conn.execute(
            sa.text(f"SELECT vector_dims({_q(db, table.c.embedding.name)}) FROM {_qt(db, table)} "
                    f"WHERE {_q(db, table.c.embedding.name)} IS NOT NULL LIMIT 1")
        ).scalar()
    if dim is not None and int(dim) != encoder.dim:
        raise ValueError(
            f"{where} holds {dim}-dimensional vectors but model {encoder.name!r} makes {encoder.dim}-dimensional "
            "ones. Set RAGNB_EMBEDDING_MODEL to the model that made them."
        )
    return {"model": encoder.name, "dim": encoder.dim, "verified": False}


def embed_table(
    db: Database,
    which: str,
    encoder: Encoder,
    batch_size: int = 32,
    write_every: int = 256,
    replace: bool = False,
    progress: bool = True,
) -> EmbedStats:
    """Embed the rows of ``which`` ("chunks" or "questions") that have no vector yet.

    Vectors are written every ``write_every`` rows in their own transaction, so an interrupted run keeps
    what it finished and the next run continues where it stopped. Rows with empty text count as errors
    and stay NULL. ``replace`` clears the table's vectors first (to switch models).
    """
    if which not in ("chunks", "questions"):
        raise ValueError(f"which must be 'chunks' or 'questions', got {which!r}")
    t = ensure_schema(db)
    table = t.chunk if which == "chunks" else t.question
    text_col = table.c.text if which == "chunks" else table.c.question
    emb = table.c.embedding
    where = _qualified(table)

    if replace:
        with db.engine.begin() as conn:
            conn.execute(sa.update(table).values(embedding=None))
            conn.execute(sa.delete(t.meta).where(t.meta.c.table_name == where))
            conn.execute(sa.text(f"ALTER TABLE {_qt(db, table)} ALTER COLUMN {_q(db, emb.name)} TYPE vector"))
    else:
        check_space(db, table, encoder)

    with db.engine.connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        todo = conn.execute(
            sa.select(sa.cast(table.c.id, sa.Text), text_col).where(emb.is_(None)).order_by(table.c.id)
        ).all()
    # Longest texts first: each block then holds texts of similar length, so the encoder pads less.
    todo.sort(key=lambda row: len(row[1]) if isinstance(row[1], str) else 0, reverse=True)
    stats = EmbedStats(where, encoder.name, encoder.dim, int(total), 0, int(total) - len(todo), 0)
    if not todo:
        _record_space(db, t, table, encoder)
        return stats

    _fix_dimension(db, table, encoder.dim)
    _record_space(db, t, table, encoder)
    bar = tqdm(total=len(todo), desc=f"embedding {where}", unit="row", disable=not progress)
    for start in range(0, len(todo), write_every):
        block = todo[start:start + write_every]
        ok = [(rid, txt) for rid, txt in block if isinstance(txt, str) and txt.strip()]
        stats.errors += len(block) - len(ok)
        if ok:
            vecs = encoder.encode([txt for _, txt in ok], batch_size=batch_size)
            _write_vectors(db, table, [rid for rid, _ in ok], vecs)
            stats.processed += len(ok)
        bar.update(len(block))
    bar.close()
    return stats


def _fix_dimension(db: Database, table: sa.Table, dim: int) -> None:
    """Give an untyped ``vector`` column its dimension (HNSW indexes need one)."""
    if column_dimension(db, table) is None:
        with db.engine.begin() as conn:
            conn.execute(sa.text(
                f"ALTER TABLE {_qt(db, table)} ALTER COLUMN {_q(db, table.c.embedding.name)} TYPE vector({dim})"
            ))


def _record_space(db: Database, t: Tables, table: sa.Table, encoder: Encoder) -> None:
    from sqlalchemy.dialects.postgresql import insert

    stmt = insert(t.meta).values(table_name=_qualified(table), model=encoder.name, dim=encoder.dim)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.meta.c.table_name],
        set_={"model": stmt.excluded.model, "dim": stmt.excluded.dim, "updated_at": sa.func.now()},
    )
    with db.engine.begin() as conn:
        conn.execute(stmt)


def _write_vectors(db: Database, table: sa.Table, ids: list[str], vecs: np.ndarray) -> None:
    """COPY into a temp table shaped like the target, then one UPDATE … FROM (one transaction)."""
    id_col, emb_col = _q(db, table.c.id.name), _q(db, table.c.embedding.name)
    with db.engine.begin() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute(
                f"CREATE TEMP TABLE ragnb_tmp_vec ON COMMIT DROP AS "
                f"SELECT {id_col} AS id, {emb_col} AS emb FROM {_qt(db, table)} WITH NO DATA"
            )
            with cur.copy("COPY ragnb_tmp_vec (id, emb) FROM STDIN") as copy:
                for rid, vec in zip(ids, vecs):
                    copy.write_row((rid, vector_literal(vec)))
            cur.execute(
                f"UPDATE {_qt(db, table)} AS t SET {emb_col} = s.emb FROM ragnb_tmp_vec AS s WHERE t.{id_col} = s.id"
            )


def _binary_rows(db: Database, sql: str, params: tuple = ()) -> list[tuple]:
    from pgvector.psycopg import register_vector

    with db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        register_vector(raw)  # a pooled connection may predate the extension
        with raw.cursor(binary=True) as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        raw.rollback()
    return rows


def _as_matrix(vectors: list) -> np.ndarray:
    mat = np.stack([v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v) for v in vectors])
    return mat.astype(np.float32, copy=False)


def fetch_vectors(db: Database, which: str = "chunks") -> tuple[list[str], list[str | None], np.ndarray]:
    """All (id, url, vector) rows that have a vector, ordered by id, as a float32 matrix.

    Vectors travel in pgvector's binary format (4 bytes per value) straight into numpy; the text form
    (``real[]``) costs ~8× more time on 100k × 384 vectors.
    """
    t = tables(db.schema)
    table = t.chunk if which == "chunks" else t.question
    sql = (
        f"SELECT CAST({_q(db, table.c.id.name)} AS text), {_q(db, table.c.url.name)}, "
        f"{_q(db, table.c.embedding.name)} FROM {_qt(db, table)} "
        f"WHERE {_q(db, table.c.embedding.name)} IS NOT NULL ORDER BY 1"
    )
    rows = _binary_rows(db, sql)
    if not rows:
        return [], [], np.zeros((0, 0), dtype=np.float32)
    return [r[0] for r in rows], [r[1] for r in rows], _as_matrix([r[2] for r in rows])


def fetch_vectors_by_id(db: Database, which: str, ids: list[str]) -> np.ndarray:
    """The vectors of ``ids`` (in that order); a missing id or a row without a vector is a ``ValueError``."""
    t = tables(db.schema)
    table = t.chunk if which == "chunks" else t.question
    if not ids:
        return np.zeros((0, 0), dtype=np.float32)
    sql = (
        f"SELECT CAST({_q(db, table.c.id.name)} AS text), {_q(db, table.c.embedding.name)} FROM {_qt(db, table)} "
        f"WHERE CAST({_q(db, table.c.id.name)} AS text) = ANY(%s) AND {_q(db, table.c.embedding.name)} IS NOT NULL"
    )
    found = dict(_binary_rows(db, sql, (list(ids),)))
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValueError(f"{which}: {len(missing)} row(s) have no vector (first: {missing[0]!r}); "
                         f"run `ragnb embed --{which}` first")
    return _as_matrix([found[i] for i in ids])


def fetch_texts(db: Database, which: str = "chunks") -> dict[str, str]:
    """id → text (chunks) or question (questions), for reports that show what was retrieved."""
    t = tables(db.schema)
    table = t.chunk if which == "chunks" else t.question
    text_col = table.c.text if which == "chunks" else table.c.question
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.cast(table.c.id, sa.Text), text_col)).all()
    return {r[0]: r[1] for r in rows}
