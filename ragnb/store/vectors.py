"""Vectors in the database: which model made them, incremental embedding, and bulk reads.

Each table holds the vectors of any number of models: the default (recorded in ``ragnb_embedding_space`` or
declared for a production database) in the table's own ``embedding`` column, or — ragnb's own chunk table — in
its default vector table (:mod:`ragnb.store.default_table`); every other model has a vector table in the vector
store (see :mod:`ragnb.store.models`). Embedding a model adds or completes that model's
vectors and never touches another model's; the same model name with another fingerprint or dimension is an
error (or, with ``replace``, a re-embed of that model only), never a silent mix.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

import numpy as np

from ragnb.embeddings.base import check_batch_size
from ragnb.store.copy import ensure_vector_type, stage_vectors
from ragnb.store.cached_rows import (CachedRows, role_cache, server_hashes_utf8, split_cached,
                                     without_cycle_collector)
from ragnb.store.encode_pipeline import encode_rows, rows_to_go
from ragnb.store.engine import Database
from ragnb.store.default_table import (deletion_mark, missing_default, prepare_default_table, replace_default,
                                      write_default)
from ragnb.store.models import (DEFAULT_TABLE, Encoder, ModelVectors, backend, catalogue_rows, catalogue_table,
                                check_fingerprint, check_space, column_vectors, fingerprint, locate, qualified, quote,
                                quoted_table, recorded_space, settings_json, source_table, table_vectors,
                                vector_table_name)
from ragnb.store.schema import (Tables, add_text_columns, column_dimension, ensure_schema, ensure_vector_extension,
                                table_exists, tables)
from ragnb.store.text_keys import digest_select

__all__ = ["Encoder", "EmbedStats", "check_space", "embed_table", "fetch_vectors", "fetch_vectors_by_id",
           "fetch_texts", "recorded_space", "vector_literal"]


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
    storage: str = "column"  # "column": the table's own embedding column; "default-table": the default model's
    # vector table beside the chunk table; "table": another model's vector table in the vector store

    def as_dict(self) -> dict:
        return asdict(self)


_qualified = qualified


def vector_literal(v: np.ndarray) -> str:
    """pgvector's text form, for vectors inside SQL text; float32 repr round-trips exactly. Stored vectors
    travel in binary instead (:mod:`ragnb.store.copy`)."""
    return "[" + ",".join(map(repr, np.asarray(v, dtype=np.float32).tolist())) + "]"


def _in_column(db: Database, table: sa.Table, encoder: Encoder) -> bool:
    """Whether ``encoder``'s vectors are the table's default (its column or default vector table): it is the default
    model, or the column
    is ragnb's to fill (writable, no model recorded or declared) — the first model a table gets, as always."""
    col = column_vectors(db, table)
    if col.model is not None:
        return col.model == encoder.name
    return db.writable and not catalogue_rows(db, table, encoder.name)


def embed_table(
    db: Database,
    which: str,
    encoder: Encoder,
    batch_size: int = 32,
    write_every: int = 256,
    replace: bool = False,
    progress: bool = True,
) -> EmbedStats:
    """Embed the rows of ``which`` ("chunks" or "questions") that have no vector of ``encoder``'s model yet.

    Chunks go through ``encode_documents``, questions through ``encode_queries`` (``encode`` when the encoder
    has neither). The model's vectors land where the default's are (the table's own column, or ragnb's chunk
    table's default vector table) when it is the default model (or the
    column is still empty and writable), else in the model's vector table in the vector store; other models'
    vectors are never touched. Rows are encoded ``write_every`` at a time while a writer thread saves the
    previous blocks (:mod:`ragnb.store.encode_pipeline`): to the disk cache, and to the database in
    transactions of their own once ``WRITE_ROWS`` rows or ``WRITE_SECONDS`` have piled up (and before an error
    propagates), so an interrupted run keeps what it finished. Rows with empty text count as errors and get no vector.
    ``replace`` re-embeds every row of this model (other prompts or dimensions): its old vectors are dropped in
    the transaction that stores the new ones, after every row is encoded, so they survive any failure.
    ``progress``: report ``embedding chunks (model): n/N rows`` through :mod:`ragnb.progress` (shown only
    where someone listens: ``ragnb``'s stderr, or the runner of the notebook).
    """
    batch_size = check_batch_size(batch_size)
    table = source_table(db, which)
    if db.writable:
        ensure_schema(db)
    elif not table_exists(db, table):
        raise ValueError(f"{db.display_url}: table {qualified(table)} does not exist (read-only database)")
    if _in_column(db, table, encoder):
        if not db.writable:
            raise ValueError(
                f"{db.display_url} is opened read-only and {qualified(table)}.{table.c.embedding.name} holds model "
                f"{encoder.name!r}: its vectors are the production's own. Pass --write to fill missing rows, or "
                "embed another model (it goes to the vector store).")
        return _embed_column(db, which, table, encoder, batch_size, write_every, replace, progress)
    return _embed_side(db, which, table, encoder, batch_size, write_every, replace, progress)


def _embed_column(db: Database, which: str, table: sa.Table, encoder: Encoder, batch_size: int, write_every: int,
                  replace: bool, progress: bool) -> EmbedStats:
    t = tables(db.schema)
    text_col = table.c.text if which == "chunks" else table.c.question
    emb = table.c.embedding
    where = qualified(table)
    # the vector table first (made, and an older column's vectors moved, on first use; None: the column, as
    # before): the space is then checked on its declared dimension, not by a second scan of the whole column.
    # Made with the recorded dimension where there is one, so that a refused model does not type it.
    recorded = recorded_space(db, t, table)
    vt = prepare_default_table(db, which, table, int(recorded["dim"]) if recorded else encoder.dim)
    if not replace:
        check_space(db, table, encoder)

    with db.engine.connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    missing = "" if replace else (missing_default(db, table, vt) if vt is not None
                                  else f" WHERE {quote(db, emb.name)} IS NULL")  # replace: every row again
    mark = deletion_mark(db, vt) if vt is not None else None  # before the ids are read: see write_default
    todo, cached = _rows_or_cached(db, table, text_col, encoder, which, missing)
    stats = EmbedStats(where, encoder.name, encoder.dim, int(total), 0, int(total) - rows_to_go(todo, cached), 0,
                       storage="column" if vt is None else DEFAULT_TABLE)
    if not replace and not rows_to_go(todo, cached) and total:
        _record_space(db, t, table, encoder)

    def write(ids: list[str], vecs: np.ndarray) -> None:
        with db.engine.begin() as conn:
            if not stats.processed:  # the model is recorded with its first vectors: a failed embed records nothing
                if vt is None:
                    _fix_dimension(db, table, encoder.dim, conn)
                _record_space(db, t, table, encoder, conn)
            if vt is None:
                _write_vectors(db, table, ids, vecs, conn)
            else:
                write_default(db, table, vt, ids, vecs, conn, since=mark)

    if not replace:
        encode_rows(todo, encoder, which, batch_size, write_every, progress, stats, write, cached)
        return stats
    new = _Gathered()
    encode_rows(todo, encoder, which, batch_size, write_every, progress, stats, new, cached)
    with db.engine.begin() as conn:  # the old vectors go in the transaction that stores the new ones
        conn.execute(sa.delete(t.meta).where(t.meta.c.table_name == where))
        _record_space(db, t, table, encoder, conn)
        if vt is not None:
            replace_default(db, table, vt, encoder.dim, new.ids, new.matrix() if new.ids else None, conn,
                            since=mark)
            return stats
        conn.execute(sa.update(table).values(embedding=None))
        conn.execute(sa.text(f"ALTER TABLE {quoted_table(db, table)} ALTER COLUMN {quote(db, emb.name)} "
                             f"TYPE vector({int(encoder.dim)})"))
        if new.ids:
            _write_vectors(db, table, new.ids, new.matrix(), conn)
    return stats


class _Gathered:
    """The ``write`` of a ``replace``: keeps every encoded block for one final transaction that drops the old
    vectors and stores the new ones, so a failure anywhere before it (a damaged cache, the model, the endpoint)
    leaves the model's old vectors as they were. The price: the new vectors are held in memory until then."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.blocks: list[np.ndarray] = []

    def __call__(self, ids: list[str], vecs: np.ndarray) -> None:
        self.ids += ids
        self.blocks.append(vecs)

    def matrix(self) -> np.ndarray:
        return self.blocks[0] if len(self.blocks) == 1 else np.concatenate(self.blocks)


def _rows_to_embed(db: Database, table: sa.Table, text_col: sa.Column, where: str = "", params: tuple = ()
                   ) -> list[tuple]:
    """(id as text, text) rows of ``table`` (``where``: an SQL condition with its leading WHERE), by id. Read by
    psycopg itself: on 50,000 rows SQLAlchemy's result rows cost as much again as reading the texts."""
    id_col = quote(db, table.c.id.name)
    return _binary_rows(db, f"SELECT CAST({id_col} AS text), {quote(db, text_col.name)} FROM {quoted_table(db, table)}{where} "
                            f"ORDER BY {id_col}", params, vectors=False)


@without_cycle_collector()
def _rows_or_cached(db: Database, table: sa.Table, text_col: sa.Column, encoder: Encoder, which: str, where: str = "",
                    params: tuple = ()) -> tuple[list[tuple], CachedRows | None]:
    """The rows to encode as ``(id, text)`` and, when the server can hash the texts as the disk cache keys them
    (:mod:`ragnb.store.cached_rows`), the rows the cache holds already — read as ids + digests, their texts never
    read. ``cached`` is None when every row's text was read (no cache, or a server that cannot hash)."""
    cache = role_cache(encoder, which)
    if cache is None:
        return _rows_to_embed(db, table, text_col, where, params), None
    id_col = quote(db, table.c.id.name)
    with db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor(binary=True) as cur:
            if not server_hashes_utf8(cur):
                raw.rollback()
                return _rows_to_embed(db, table, text_col, where, params), None
            # the digest stored with the row when the table has one (text_keys), else computed from the text;
            # by digest, bytewise (NULLs last): the order in which the cache's key index is probed
            digest, digest_params = digest_select(cur, quoted_table(db, table), text_col.name, quote(db, text_col.name))
            cur.execute(f"SELECT * FROM (SELECT CAST({id_col} AS text) AS id, {digest} AS digest "
                        f"FROM {quoted_table(db, table)}{where}) AS d ORDER BY digest COLLATE \"C\"", (*digest_params, *params))
            rows = cur.fetchall()
        raw.rollback()

    def read_texts(ids: list[str]) -> list[tuple]:
        return _rows_to_embed(db, table, text_col, f" WHERE CAST({id_col} AS text) = ANY(%s)", (ids,))

    hits, misses = split_cached(rows, cache, read_texts)
    return (read_texts(misses) if misses else []), hits


def _fix_dimension(db: Database, table: sa.Table, dim: int, conn: sa.Connection | None = None) -> None:
    """Give an untyped ``vector`` column its dimension (HNSW indexes need one); in ``conn``'s transaction if given."""
    if column_dimension(db, table) is None:
        with _transaction(db, conn) as conn:
            conn.execute(sa.text(
                f"ALTER TABLE {quoted_table(db, table)} ALTER COLUMN {quote(db, table.c.embedding.name)} TYPE vector({dim})"
            ))


def _transaction(db: Database, conn: sa.Connection | None) -> Any:
    """``conn`` (a transaction the caller owns), else a new one."""
    return nullcontext(conn) if conn is not None else db.engine.begin()


def _record_space(db: Database, t: Tables, table: sa.Table, encoder: Encoder, conn: sa.Connection | None = None) -> None:
    """Record the column's model (name, dim, backend, fingerprint) in ``ragnb_embedding_space``."""
    from sqlalchemy.dialects.postgresql import insert

    record_space(db, t, table, {"model": encoder.name, "dim": encoder.dim, "backend": backend(encoder),
                                "fingerprint": fingerprint(encoder), "settings": settings_json(encoder)}, conn)


def record_space(db: Database, t: Tables, table: sa.Table, values: dict, conn: sa.Connection | None = None) -> None:
    """Record ``values`` (model, dim, backend, fingerprint, settings JSON) as the column's model."""
    from sqlalchemy.dialects.postgresql import insert

    stmt = insert(t.meta).values(table_name=_qualified(table), **values)
    stmt = stmt.on_conflict_do_update(index_elements=[t.meta.c.table_name], set_={**values, "updated_at": sa.func.now()})
    with _transaction(db, conn) as conn:
        conn.execute(stmt)


def _write_vectors(db: Database, table: sa.Table, ids: list[str], vecs: np.ndarray,
                   conn: sa.Connection | None = None) -> None:
    """Binary COPY into a staging table, then one UPDATE … FROM (one transaction). Every id must name a row of
    the table: a row deleted meanwhile is a ``ValueError`` and nothing of the block is written."""
    id_col, emb_col = quote(db, table.c.id.name), quote(db, table.c.embedding.name)
    with _transaction(db, conn) as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            # The stage holds ids as text (how embed_table reads them); cast to the id's own type so the
            # join uses the table's primary key index.
            cur.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                        "WHERE attrelid = CAST(%s AS regclass) AND attname = %s", (quoted_table(db, table), table.c.id.name))
            id_type = cur.fetchone()[0]
            stage = stage_vectors(cur, ids, _float32_rows(vecs))
            cur.execute(f"UPDATE {quoted_table(db, table)} AS t SET {emb_col} = s.emb FROM {stage} AS s "
                        f"WHERE t.{id_col} = CAST(s.id AS {id_type})")
            updated = cur.rowcount
            if updated != len(ids):
                cur.execute(f"SELECT s.id FROM {stage} AS s WHERE NOT EXISTS (SELECT 1 FROM {quoted_table(db, table)} AS t "
                            f"WHERE t.{id_col} = CAST(s.id AS {id_type})) ORDER BY 1 LIMIT 3")
                gone = [r[0] for r in cur.fetchall()]
                raise ValueError(f"{qualified(table)}: {len(ids) - updated} row(s) to embed are no longer in "
                                 f"the table (first: {gone[:3]}) — were rows deleted or reloaded while embedding? "
                                 "Nothing of this block was written; run `ragnb embed` again.")


def _float32_rows(vecs: np.ndarray) -> np.ndarray:
    """The vectors as a C-ordered float32 matrix: what pgvector's binary format stores, four bytes a value."""
    return np.ascontiguousarray(vecs, dtype=np.float32)


def _embed_side(db: Database, which: str, table: sa.Table, encoder: Encoder, batch_size: int, write_every: int,
                replace: bool, progress: bool) -> EmbedStats:
    """A model other than the column's: its own vector table in the vector store (never the source tables)."""
    store = db.vector_store()
    _ensure_store(store)
    loc, register, registered = _prepare_vector_table(db, table, encoder, replace)
    id_col = quote(db, table.c.id.name)
    all_ids = [r[0] for r in _binary_rows(db, f"SELECT CAST({id_col} AS text) FROM {quoted_table(db, table)}",
                                          vectors=False)]
    done = ({r[0] for r in _binary_rows(store, f"SELECT row_id FROM {loc.sql_table}", vectors=False)} if registered
            else set())
    missing = [i for i in all_ids if i not in done]
    text_col = table.c.text if which == "chunks" else table.c.question
    # one array parameter, not a statement with a bind parameter per id
    todo, cached = (_rows_or_cached(db, table, text_col, encoder, which, f" WHERE CAST({id_col} AS text) = ANY(%s)",
                                    (missing,)) if done else _rows_or_cached(db, table, text_col, encoder, which)
                    ) if missing else ([], None)
    stats = EmbedStats(qualified(table), encoder.name, encoder.dim, len(all_ids), 0, len(all_ids) - len(missing), 0,
                       storage="table")

    def write(ids: list[str], vecs: np.ndarray) -> None:
        with store.engine.begin() as conn:
            if not registered and not stats.processed:  # created and catalogued with its first vectors
                register(conn)
            _insert_vectors(store, loc.sql_table, ids, vecs, conn)

    if not replace:
        encode_rows(todo, encoder, which, batch_size, write_every, progress, stats, write, cached)
        return stats
    new = _Gathered()
    encode_rows(todo, encoder, which, batch_size, write_every, progress, stats, new, cached)
    with store.engine.begin() as conn:  # drop, recreate and fill in one transaction (see _Gathered)
        register(conn)
        if new.ids:
            _insert_vectors(store, loc.sql_table, new.ids, new.matrix(), conn)
    return stats


def _ensure_store(store: Database) -> None:
    """pgvector and the catalogue in the vector store (created on first use)."""
    ensure_vector_extension(store)
    with store.engine.begin() as conn:
        if store.store_schema:
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {quote(store, store.store_schema)}"))
        cat = catalogue_table(store.store_schema)
        cat.create(conn, checkfirst=True)
        add_text_columns(conn, cat, ("settings",))


def _prepare_vector_table(db: Database, table: sa.Table, encoder: Encoder, replace: bool
                          ) -> tuple[ModelVectors, Any, bool]:
    """``(location, register, registered)`` of the model's vector table. ``register(conn)`` (re)creates the table
    and catalogues it; it has run already (``registered``) for a model with vectors, and is left to the first
    write otherwise (a new model, or ``replace``: its one final write) — so an embedding that fails before any
    vector is written leaves no model behind, and ``replace`` keeps the old vectors until new ones arrive. An existing table made
    with another dimension or fingerprint is an error naming the fix."""
    from sqlalchemy.dialects.postgresql import insert

    store = db.vector_store()
    cat = catalogue_table(store.store_schema)
    rows = catalogue_rows(db, table, encoder.name)
    if rows and not replace:
        loc = table_vectors(db, table, rows[0])
        if loc.dim != encoder.dim:
            raise ValueError(
                f"{loc.where} holds {loc.dim}-dimensional vectors; the active encoder {encoder.name!r} makes "
                f"{encoder.dim}-dimensional ones. Re-embed that model with `ragnb embed --model {encoder.name} "
                "--replace`, or use the encoder settings that made the stored vectors.")
        check_fingerprint(loc, encoder)
    name = rows[0]["vector_table"] if rows else vector_table_name(db.source_key, qualified(table), encoder.name)
    row = {"source": db.source_key, "source_table": qualified(table), "model": encoder.name, "backend": backend(encoder),
           "fingerprint": fingerprint(encoder) or (rows[0]["fingerprint"] if rows and not replace else None), "dim": encoder.dim,
           "vector_table": name, "settings": settings_json(encoder)}
    loc = table_vectors(db, table, row)
    stmt = insert(cat).values(**row)
    stmt = stmt.on_conflict_do_update(index_elements=[cat.c.source, cat.c.source_table, cat.c.model],
                                      set_={k: stmt.excluded[k] for k in ("backend", "fingerprint", "dim", "settings")})

    def register(conn: sa.Connection) -> None:
        if replace:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {loc.sql_table}"))
        conn.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {loc.sql_table} "
                             f"(row_id text PRIMARY KEY, embedding vector({int(encoder.dim)}) NOT NULL)"))
        conn.execute(stmt)

    registered = bool(rows) and not replace
    if registered:
        with store.engine.begin() as conn:
            register(conn)
    return loc, register, registered


def _insert_vectors(store: Database, sql_table: str, ids: list[str], vecs: np.ndarray,
                    conn: sa.Connection | None = None) -> None:
    """Binary COPY into a staging table, then one INSERT … ON CONFLICT (one transaction; a re-run overwrites)."""
    with _transaction(store, conn) as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            stage = stage_vectors(cur, ids, _float32_rows(vecs))
            cur.execute(f"INSERT INTO {sql_table} (row_id, embedding) SELECT id, emb FROM {stage} "
                        "ON CONFLICT (row_id) DO UPDATE SET embedding = EXCLUDED.embedding")


def _binary_rows(db: Database, sql: str, params: tuple = (), vectors: bool = True) -> list[tuple]:
    """The rows of ``sql`` through a binary cursor; ``vectors``: the query returns pgvector values."""
    with db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        if vectors:
            ensure_vector_type(raw)  # a pooled connection may predate the extension
        with raw.cursor(binary=True) as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        raw.rollback()
    return rows


def _as_matrix(vectors: list) -> np.ndarray:
    mat = np.stack([v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v) for v in vectors])
    return mat.astype(np.float32, copy=False)


def _source_urls(db: Database, table: sa.Table) -> dict[str, str | None]:
    with db.engine.connect() as conn:
        return {r[0]: r[1] for r in conn.execute(sa.select(sa.cast(table.c.id, sa.Text), table.c.url))}


def fetch_vectors(db: Database, which: str = "chunks", model: str | None = None
                  ) -> tuple[list[str], list[str | None], np.ndarray]:
    """All (id, url, vector) rows with a vector of ``model`` (default: the table's default model), ordered by id,
    as a float32 matrix. A vector table's rows whose source row is gone are left out.

    Vectors travel in pgvector's binary format (4 bytes per value) straight into numpy; the text form
    (``real[]``) costs ~8× more time on 100k × 384 vectors.
    """
    loc = locate(db, which, model)
    if loc.storage == "column":
        table = source_table(db, which)
        sql = (f"SELECT CAST({loc.id_col} AS text), {quote(db, table.c.url.name)}, {loc.emb_col} FROM {loc.sql_table} "
               f"WHERE {loc.emb_col} IS NOT NULL ORDER BY 1")
        rows = _binary_rows(db, sql)
    else:
        urls = _source_urls(db, source_table(db, which))
        rows = [(rid, urls[rid], vec) for rid, vec in
                _binary_rows(loc.db, f"SELECT row_id, embedding FROM {loc.sql_table} ORDER BY 1") if rid in urls]
    if not rows:
        return [], [], np.zeros((0, 0), dtype=np.float32)
    return [r[0] for r in rows], [r[1] for r in rows], _as_matrix([r[2] for r in rows])


def fetch_vectors_by_id(db: Database, which: str, ids: list[str], model: str | None = None) -> np.ndarray:
    """The vectors of ``ids`` (in that order) of ``model`` (default: the table's default model); a missing id or a
    row without a vector is a ``ValueError``."""
    if not ids:
        return np.zeros((0, 0), dtype=np.float32)
    loc = locate(db, which, model)
    sql = (f"SELECT CAST({loc.id_col} AS text), {loc.emb_col} FROM {loc.sql_table} "
           f"WHERE CAST({loc.id_col} AS text) = ANY(%s) AND {loc.emb_col} IS NOT NULL")
    found = dict(_binary_rows(loc.db, sql, (list(ids),)))
    missing = [i for i in ids if i not in found]
    if missing:
        flag = f" --model {loc.model}" if model else ""
        raise ValueError(f"{which}: {len(missing)} row(s) have no vector of model {loc.model!r} (first: "
                         f"{missing[0]!r}); run `ragnb embed --{which}{flag}` first")
    return _as_matrix([found[i] for i in ids])


def fetch_texts(db: Database, which: str = "chunks") -> dict[str, str]:
    """id → text (chunks) or question (questions), for reports that show what was retrieved."""
    t = tables(db.schema)
    table = t.chunk if which == "chunks" else t.question
    text_col = table.c.text if which == "chunks" else table.c.question
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.cast(table.c.id, sa.Text), text_col)).all()
    return {r[0]: r[1] for r in rows}
