"""Which model is a table's default — the one whose vectors everything that names no model reads — and how to
choose it.

The rule: the first model ragnb embeds into a table becomes its default (the Russian demo embeds
all-MiniLM-L6-v2 first); :func:`make_default` (``ragnb embed --model NAME --default``) makes another stored model
the default. Nothing is re-embedded: the new default's vectors move to where the default's are (the column, or
ragnb's chunk table's default vector table, :mod:`ragnb.store.default_table`) and the old default's into a
vector table of their own, each with the model, fingerprint and query/document settings recorded with it. A
production column's model is declared, never moved.
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from ragnb.store.default_table import prepare_default_table, replace_default
from ragnb.store.engine import Database
from ragnb.store.models import (catalogue_rows, catalogue_table, column_vectors, qualified, source_table,
                                table_vectors, vector_table_name)
from ragnb.store.schema import tables
from ragnb.store.vectors import _ensure_store, _insert_vectors, _write_vectors, fetch_vectors, record_space


def make_default(db: Database, which: str, model: str) -> dict:
    """Make ``model``'s stored vectors of ``which`` the table's default. Returns ``{"table", "default",
    "previous"}`` (``previous`` None when the column was empty or already held ``model``).

    Safe against interruption: the old default's vectors are copied to their vector table first, then the column
    is refilled, then the new default's vector table is dropped — a step that fails leaves a model stored twice
    (harmless: the column is read first), never lost."""
    table = source_table(db, which)
    if db.schema.column_model is not None:
        raise ValueError(f"{qualified(table)}.{table.c.embedding.name} is a production column declared to hold "
                         f"{db.schema.column_model.name!r}; its model is declared, not chosen — compare another model "
                         "by name (embedding_model / --model) instead")
    if not db.writable:
        raise ValueError(f"{db.display_url} is opened read-only; pass --write to change which model is the default")
    col = column_vectors(db, table)
    if col.model == model:
        return {"table": qualified(table), "default": model, "previous": None}
    rows = catalogue_rows(db, table, model)
    if not rows:
        raise ValueError(f"{qualified(table)} has no stored vectors of model {model!r} to make the default; embed "
                         f"them first: `ragnb embed --{which} --model {model}`")
    new = table_vectors(db, table, rows[0])
    ids, _, vectors = fetch_vectors(db, which, model)
    store = db.vector_store()
    _ensure_store(store)
    vt = prepare_default_table(db, which, table, int(new.dim))  # None: the default stays in the column
    if col.model is not None:
        _move_column_aside(db, which, table, col)
    t = tables(db.schema)
    emb = db.engine.dialect.identifier_preparer.quote(table.c.embedding.name)
    with db.engine.begin() as conn:
        if vt is not None:
            replace_default(db, table, vt, int(new.dim), ids, vectors, conn)
        else:
            conn.execute(sa.update(table).values(embedding=None))
            conn.execute(sa.text(f"ALTER TABLE {db.engine.dialect.identifier_preparer.format_table(table)} "
                                 f"ALTER COLUMN {emb} TYPE vector({int(new.dim)})"))
            _write_vectors(db, table, ids, vectors, conn)
        record_space(db, t, table, {"model": new.model, "dim": new.dim, "backend": new.backend,
                                    "fingerprint": new.fingerprint,
                                    "settings": None if new.settings is None else json.dumps(new.settings,
                                                                                             sort_keys=True)}, conn)
    cat = catalogue_table(store.store_schema)
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {new.sql_table}"))
        conn.execute(sa.delete(cat).where(cat.c.source == db.source_key, cat.c.source_table == qualified(table),
                                          cat.c.model == model))
    return {"table": qualified(table), "default": model, "previous": col.model}


def _move_column_aside(db: Database, which: str, table: sa.Table, col) -> None:
    """Copy the column's vectors into a vector table of their model, catalogued with what was recorded."""
    from sqlalchemy.dialects.postgresql import insert

    ids, _, vectors = fetch_vectors(db, which, None)
    store = db.vector_store()
    cat = catalogue_table(store.store_schema)
    name = vector_table_name(db.source_key, qualified(table), col.model)
    row = {"source": db.source_key, "source_table": qualified(table), "model": col.model, "backend": col.backend,
           "fingerprint": col.fingerprint, "dim": col.dim, "vector_table": name,
           "settings": None if col.settings is None else json.dumps(col.settings, sort_keys=True)}
    loc = table_vectors(db, table, {**row, "settings": col.settings})
    stmt = insert(cat).values(**row)
    stmt = stmt.on_conflict_do_update(index_elements=[cat.c.source, cat.c.source_table, cat.c.model],
                                      set_={k: stmt.excluded[k] for k in ("backend", "fingerprint", "dim",
                                                                          "vector_table", "settings")})
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {loc.sql_table}"))
        conn.execute(sa.text(f"CREATE TABLE {loc.sql_table} "
                             f"(row_id text PRIMARY KEY, embedding vector({int(col.dim)}) NOT NULL)"))
        conn.execute(stmt)
        if ids:
            _insert_vectors(store, loc.sql_table, ids, vectors, conn)
