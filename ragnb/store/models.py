"""Several embedding models per table: where each model's vectors live, and the checks that keep them apart.

Each table has a default model — the one ragnb recorded in ``ragnb_embedding_space`` when it embedded it, or the
one a production database's ``embedding`` column is *declared* to hold (``RAGNB_PRODUCTION_EMBEDDING_*`` or the
schema map's ``embedding_model``): everything that reads vectors without naming a model reads the default's.
Where they are (:func:`default_vectors`): a production or schema-mapped table's own ``embedding`` column, as
always; the chunk table ragnb created keeps them in a vector table beside it, ``ragnb_vectors_chunk`` (``row_id``,
``embedding``) in the same database and schema, written by binary COPY without rewriting the wide chunk rows
(:mod:`ragnb.store.default_table`; a database from before it reads its column until its next ``ragnb embed``
moves them there once).

Every other model gets a table of its own in the vector store (:meth:`Database.vector_store`): ``row_id`` (the
source row's id as text) and ``embedding vector(dim)`` — one fixed dimension per table, which pgvector's HNSW
index needs. The catalogue ``ragnb_embedding_model`` lists them: source database, source table, model, backend,
fingerprint, dimension, vector table, created. The same model name with another fingerprint or dimension is an
error, never a silent mix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import sqlalchemy as sa
from pgvector.sqlalchemy import Vector

from ragnb.embeddings.base import SETTING_KEYS, settings_diff, settings_of
from ragnb.store.engine import Database
from ragnb.store.schema import Tables, column_dimension, table_exists, tables

CATALOGUE_TABLE = "ragnb_embedding_model"
DEFAULT_TABLE = "default-table"  # the storage of the default model's vectors in ragnb_vectors_<chunk table>
DEFAULT_TABLE_PREFIX = "ragnb_vectors_"


class Encoder(Protocol):
    """What the store needs of an encoder: the model name and dimension recorded with the vectors and
    ``encode`` (texts → float32 rows). Optional (read with fallbacks): ``backend``, ``fingerprint`` (changes when
    anything that changes the vectors changes), ``encode_documents`` and ``encode_queries``."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 32, progress: bool = False) -> np.ndarray: ...


def fingerprint(encoder: Encoder) -> str | None:
    return getattr(encoder, "fingerprint", None)


def backend(encoder: Encoder) -> str | None:
    return getattr(encoder, "backend", None)


def encode_fn(encoder: Encoder, which: str):
    """Chunks are documents, logged questions are queries (models with prompts encode them differently)."""
    name = "encode_documents" if which == "chunks" else "encode_queries"
    return getattr(encoder, name, None) or encoder.encode


def source_table(db: Database, which: str) -> sa.Table:
    if which not in ("chunks", "questions"):
        raise ValueError(f"which must be 'chunks' or 'questions', got {which!r}")
    t = tables(db.schema)
    return t.chunk if which == "chunks" else t.question


def which_of(db: Database, table: sa.Table) -> str:
    return "chunks" if table.name == tables(db.schema).chunk.name and table.schema == tables(db.schema).chunk.schema \
        else "questions"


def qualified(table: sa.Table) -> str:
    return f"{table.schema}.{table.name}" if table.schema else table.name


def quote(db: Database, name: str) -> str:
    return db.engine.dialect.identifier_preparer.quote(name)


def quoted_table(db: Database, table: sa.Table) -> str:
    """``table`` as SQL text, schema-qualified and quoted where needed."""
    return db.engine.dialect.identifier_preparer.format_table(table)


def catalogue_table(schema: str | None, metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table(
        CATALOGUE_TABLE, metadata or sa.MetaData(),
        sa.Column("source", sa.Text, primary_key=True),  # '' = the store's own database, else host:port/database
        sa.Column("source_table", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("backend", sa.Text),
        sa.Column("fingerprint", sa.Text),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("vector_table", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
        sa.Column("settings", sa.Text),  # JSON: query/document prompts, input_type, dimensions (settings_of)
        schema=schema,
    )


@dataclass
class ModelVectors:
    """Where one model's vectors of one table are: the database, the SQL table and its id/vector columns."""

    model: str | None  # None: a column filled outside ragnb, model neither recorded nor declared
    dim: int | None
    backend: str | None
    fingerprint: str | None
    storage: str  # "column" (the table's own embedding column), DEFAULT_TABLE (the default's vector table beside
    # the chunk table) or "table" (another model's vector table in the vector store)
    db: Database  # the database that holds the vectors
    table: str  # qualified name, for messages
    sql_table: str  # quoted, for SQL
    id_col: str  # quoted
    emb_col: str  # quoted
    verified: bool  # model recorded by ragnb or declared; False: only the dimension could be checked
    where: str  # "chunk.embedding" / "vector table ragnb_vec_… of chunk" — for messages
    settings: dict | None = None  # the query/document settings the vectors were made with (None: not recorded)

    def describe(self) -> dict:
        return {"model": self.model, "backend": self.backend, "dim": self.dim, "fingerprint": self.fingerprint,
                "storage": self.storage, "table": self.table, "verified": self.verified, "settings": self.settings}


def settings_json(encoder: Encoder) -> str | None:
    """The encoder's query/document settings as recorded with its vectors (JSON), None for an encoder that
    cannot describe itself."""
    describe = getattr(encoder, "describe", None)
    return None if describe is None else json.dumps(settings_of(describe()), sort_keys=True, ensure_ascii=False)


def _settings(raw: Any) -> dict | None:
    return json.loads(raw) if raw else None


def data_dimension(db: Database, table: sa.Table) -> int | None:
    """Dimension of the column's vectors: declared (``vector(384)``), else the first stored vector's, else None."""
    dim = column_dimension(db, table)
    if dim is not None:
        return dim
    emb = quote(db, table.c.embedding.name)
    fmt = db.engine.dialect.identifier_preparer.format_table(table)
    with db.engine.connect() as conn:
        found = conn.execute(sa.text(f"SELECT vector_dims({emb}) FROM {fmt} WHERE {emb} IS NOT NULL LIMIT 1")).scalar()
    return None if found is None else int(found)


def recorded_space(db: Database, t: Tables, table: sa.Table) -> dict | None:
    """What ragnb recorded for ``table``'s own column (model, dim, backend, fingerprint), or None. Databases
    from before several models lack backend/fingerprint: they read as None."""
    if not table_exists(db, t.meta):
        return None
    fmt = db.engine.dialect.identifier_preparer.format_table(t.meta)
    with db.engine.connect() as conn:
        row = conn.execute(sa.text(f"SELECT * FROM {fmt} WHERE table_name = :t"), {"t": qualified(table)}).first()
    if row is None:
        return None
    m = row._mapping
    return {"model": m["model"], "dim": int(m["dim"]), "backend": m.get("backend"), "fingerprint": m.get("fingerprint"),
            "settings": _settings(m.get("settings"))}


def column_vectors(db: Database, table: sa.Table) -> ModelVectors:
    """The table's own column: its recorded or declared model (checked against each other and against the
    column's dimension), or an unverified location when neither names one."""
    t = tables(db.schema)
    rec = recorded_space(db, t, table) if table_exists(db, table) else None
    declared = db.schema.column_model
    where = f"{qualified(table)}.{table.c.embedding.name}"
    model = dim = be = fp = settings = None
    if declared is not None:
        if rec and rec["model"] != declared.name:
            raise ValueError(
                f"{where} is declared to hold vectors of model {declared.name!r}, but ragnb embedded it with "
                f"{rec['model']!r}. Fix the declaration (RAGNB_PRODUCTION_EMBEDDING_MODEL or the schema map's "
                f"embedding_model) or re-embed with `ragnb embed --model {declared.name} --replace --write`.")
        actual = data_dimension(db, table) if table_exists(db, table) else None
        if actual is not None and actual != declared.dim:
            raise ValueError(
                f"{where} holds {actual}-dimensional vectors, but its model {declared.name!r} is declared with "
                f"dim {declared.dim}. Fix RAGNB_PRODUCTION_EMBEDDING_DIM (or embedding_model.dim in the schema map) "
                f"to {actual}, or declare the model that made these vectors.")
        model, dim, be = declared.name, declared.dim, declared.backend or None
        fp, settings = (rec["fingerprint"], rec["settings"]) if rec else (None, None)
    elif rec:
        model, dim, be, fp, settings = rec["model"], rec["dim"], rec["backend"], rec["fingerprint"], rec["settings"]
    prep = db.engine.dialect.identifier_preparer
    return ModelVectors(model, dim, be, fp, "column", db, qualified(table), prep.format_table(table),
                        quote(db, table.c.id.name), quote(db, table.c.embedding.name), model is not None, where,
                        settings)


def default_table(table: sa.Table) -> sa.Table:
    """The vector table of ``table``'s default model: ``ragnb_vectors_<table>`` in the same schema, ``row_id`` (the
    row's id as text) and ``embedding vector(dim)``."""
    return sa.Table(DEFAULT_TABLE_PREFIX + table.name, sa.MetaData(), sa.Column("row_id", sa.Text, primary_key=True),
                    sa.Column("embedding", Vector()), schema=table.schema)


def default_table_allowed(db: Database, which: str) -> bool:
    """Whether ``which``'s default vectors may live in a vector table: chunks of ragnb's own schema. A production
    column (a declared model) or a mapped schema keeps its own column; questions are narrow rows and keep theirs."""
    return which == "chunks" and db.schema.column_model is None and db.schema.source == "defaults"


def located_default_table(db: Database, table: sa.Table) -> sa.Table | None:
    """The default's vector table when ``table``'s default vectors are there (it exists), else None (the column)."""
    if not default_table_allowed(db, which_of(db, table)):
        return None
    vt = default_table(table)
    with db.engine.connect() as conn:
        there = conn.execute(sa.text("SELECT to_regclass(:t) IS NOT NULL"),
                             {"t": db.engine.dialect.identifier_preparer.format_table(vt)}).scalar_one()
    return vt if there else None


def default_vectors(db: Database, table: sa.Table) -> ModelVectors:
    """Where ``table``'s default model's vectors are: its default vector table when it has one, else its own
    column (:func:`column_vectors`) — the model, dimension and settings are those recorded (or declared) either way."""
    col = column_vectors(db, table)
    vt = located_default_table(db, table)
    if vt is None:
        return col
    prep = db.engine.dialect.identifier_preparer
    return replace(col, storage=DEFAULT_TABLE, table=qualified(vt), sql_table=prep.format_table(vt),
                   id_col=quote(db, "row_id"), emb_col=quote(db, "embedding"),
                   where=f"{qualified(vt)} (the default vectors of {qualified(table)})")


def has_default_vector(db: Database, table: sa.Table) -> sa.ColumnElement:
    """An SQL condition on ``table``'s rows: the row has a vector of the default model (wherever they are)."""
    vt = located_default_table(db, table)
    if vt is None:
        return table.c.embedding.is_not(None)
    return sa.exists().where(vt.c.row_id == sa.cast(table.c.id, sa.Text))


def vector_table_name(source: str, table: str, model: str) -> str:
    """One table per (source database, source table, model); a hash keeps any model name a valid identifier."""
    digest = hashlib.sha1(f"{source}\x00{table}\x00{model}".encode()).hexdigest()[:16]
    return f"ragnb_vec_{digest}"


def catalogue_rows(db: Database, table: sa.Table, model: str | None = None) -> list[dict]:
    store = db.vector_store()
    cat = catalogue_table(store.store_schema)
    if not table_exists(store, cat):
        return []
    # SELECT *: a catalogue from before the settings column reads it as absent (it gains it on the next embed)
    where = "source = :source AND source_table = :table" + (" AND model = :model" if model is not None else "")
    sql = (f"SELECT * FROM {store.engine.dialect.identifier_preparer.format_table(cat)} WHERE {where} "
           "ORDER BY created_at, model")
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text(sql), {"source": db.source_key, "table": qualified(table), "model": model})
        return [{**r._mapping, "settings": _settings(r._mapping.get("settings"))} for r in rows]


def table_vectors(db: Database, table: sa.Table, row: dict) -> ModelVectors:
    store = db.vector_store()
    schema = store.store_schema
    sql_table = (f"{quote(store, schema)}." if schema else "") + quote(store, row["vector_table"])
    return ModelVectors(row["model"], int(row["dim"]), row["backend"], row["fingerprint"], "table", store,
                        (f"{schema}." if schema else "") + row["vector_table"], sql_table, "row_id", "embedding", True,
                        f"the vector table of model {row['model']!r} for {qualified(table)}", row.get("settings"))


def table_models(db: Database, which: str) -> list[ModelVectors]:
    """Every model with vectors for ``which``: the column's (when known or filled) first, then the others."""
    table = source_table(db, which)
    out = []
    col = default_vectors(db, table)
    if col.model is not None or (table_exists(db, table) and data_dimension(db, table) is not None):
        out.append(col)
    # Listing opens the vector store (for an external database: RAGNB_VECTOR_STORE_URL or the embedded server);
    # reading the default model (locate with model=None) never does.
    out += [table_vectors(db, table, r) for r in catalogue_rows(db, table) if r["model"] != col.model]
    return out


def locate(db: Database, which: str, model: str | None = None) -> ModelVectors:
    """Where ``model``'s vectors of ``which`` are; ``None``: the table's default (:func:`default_vectors`)."""
    table = source_table(db, which)
    col = default_vectors(db, table)
    if model is None or model == col.model:
        return col
    rows = catalogue_rows(db, table, model)
    if rows:
        return table_vectors(db, table, rows[0])
    stored = [m.model for m in table_models(db, which)]
    hint = ("" if col.model or col.dim is None else
            "; if the table's own column holds this model, declare it (RAGNB_PRODUCTION_EMBEDDING_MODEL)")
    raise ValueError(f"{qualified(table)} has no vectors of model {model!r} (stored: {stored}); embed them with "
                     f"`ragnb embed --{which} --model {model}`{hint}")


def check_space(db: Database, table: sa.Table, encoder: Encoder, model: str | None = None) -> dict:
    """Refuse to compare ``encoder``'s vectors with vectors another model made.

    ``model`` names the stored vectors the caller will read (default: the table's own column). Returns what
    was verified: model, dim, storage, and ``verified`` — False for a column filled outside ragnb with no
    declared model, where only the dimension can be checked.
    """
    which = which_of(db, table)
    loc = locate(db, which, model)
    if loc.model is None:
        dim = loc.dim if loc.dim is not None else _stored_dimension(db, table, loc)
        if dim is not None and dim != encoder.dim:
            raise ValueError(
                f"{loc.table} holds {dim}-dimensional vectors but model {encoder.name!r} makes {encoder.dim}-dimensional "
                "ones. Declare the model that made them (RAGNB_PRODUCTION_EMBEDDING_MODEL / _DIM) or set "
                "RAGNB_EMBEDDING_MODEL to it.")
        return {"model": encoder.name, "dim": encoder.dim, "storage": "column", "verified": False}
    if loc.model == encoder.name and loc.dim is not None and loc.dim != encoder.dim:
        raise ValueError(f"{loc.where} holds {loc.dim}-dimensional vectors of model {loc.model!r}; the active encoder "
                         f"of that name makes {encoder.dim}-dimensional ones. Re-embed that model with `ragnb embed "
                         f"--{which} --model {loc.model} --replace`, or use the settings that made the stored vectors.")
    if loc.model != encoder.name:
        others = [m.model for m in table_models(db, which) if m.model == encoder.name]
        beside = (f" Model {encoder.name!r} is stored beside it: read it by name (model={encoder.name!r})."
                  if others else f" To compare, embed {encoder.name!r} beside it with `ragnb embed --{which} "
                  f"--model {encoder.name}` (or re-embed that model with `--replace`).")
        raise ValueError(f"{loc.where} holds vectors of model {loc.model!r} (dim {loc.dim}); the active model is "
                         f"{encoder.name!r} (dim {encoder.dim}). Use the same model (--model {loc.model!r} or "
                         f"RAGNB_EMBEDDING_MODEL).{beside}")
    check_fingerprint(loc, encoder)
    return {"model": loc.model, "dim": loc.dim, "storage": loc.storage, "verified": loc.verified,
            "fingerprint": loc.fingerprint, "backend": loc.backend}


def _stored_dimension(db: Database, table: sa.Table, loc: ModelVectors) -> int | None:
    """The dimension of the vectors ``loc`` stores without a recorded model: the default vector table's declared
    one (its column is typed when it is made), else the column's (declared, or read from its first vector)."""
    if loc.storage == DEFAULT_TABLE:
        return column_dimension(db, default_table(table))
    return data_dimension(db, table) if table_exists(db, table) else None


def check_fingerprint(loc: ModelVectors, encoder: Encoder) -> None:
    """Same name, other prompts, ``input_type`` or dimensions → other vectors: an error naming the settings that
    differ, never a mix (queries encoded one way searching documents encoded another). A location recorded
    without a fingerprint (before fingerprints existed, or a declared column) accepts any."""
    fp = fingerprint(encoder)
    if not (loc.fingerprint and fp and loc.fingerprint != fp):
        return
    active = settings_of(encoder.describe()) if hasattr(encoder, "describe") else {}
    diff = settings_diff(loc.settings, active) if loc.settings is not None else []
    fix = (f"Re-embed that model with `ragnb embed --model {command_name(loc)} --replace` (and the settings you "
           "want), or use the settings that made the stored vectors")
    if diff:
        flags = " ".join(f"--{k.replace('_', '-')} {_flag_value(k, loc.settings[k])}" for k in SETTING_KEYS
                         if loc.settings.get(k) not in (None, ""))
        raise ValueError(
            f"{loc.where} holds vectors of model {loc.model!r} made with other query/document settings than the "
            f"active encoder's ({'; '.join(diff)}): its queries would search vectors encoded another way. {fix}"
            f"{f' ({flags}, or the same in embedding_model_options / RAGNB_EMBEDDING_MODEL_OPTIONS)' if flags else ''}.")
    raise ValueError(
        f"{loc.where} holds vectors of model {loc.model!r} made with fingerprint {loc.fingerprint!r}; the active "
        f"encoder of that name has fingerprint {fp!r} (other prompts, input_type, dimensions or model files). "
        f"{fix}.")


def command_name(loc: ModelVectors) -> str:
    """The name a command gives a stored model: an endpoint model's recorded id with its ``endpoint:`` prefix."""
    from ragnb.config import ENDPOINT_MODEL_PREFIX

    return f"{ENDPOINT_MODEL_PREFIX}{loc.model}" if loc.backend == "openai-compatible" else str(loc.model)


def _flag_value(key: str, value: Any) -> str:
    """A recorded setting as the ``ragnb embed`` option that gives it again."""
    if key == "input_type" and isinstance(value, dict):
        return f"{value.get('query')},{value.get('document')}"
    return repr(value) if isinstance(value, str) else str(value)


def model_status(db: Database, which: str) -> list[dict]:
    """Each model of ``which`` with its dimension, storage and how many rows have its vector (for ``db status``).
    A model without a single vector is left out (an embedding that failed before writing one, in a database from
    before such models were never recorded) — except a production column's declared model, shown with 0."""
    out = []
    for loc in table_models(db, which):
        where = f" WHERE {loc.emb_col} IS NOT NULL" if loc.storage == "column" else ""
        with loc.db.engine.connect() as conn:
            n = conn.execute(sa.text(f"SELECT count(*) FROM {loc.sql_table}{where}")).scalar_one()
        default = loc.storage != "table"
        if n or (loc.storage == "column" and db.schema.column_model is not None):
            out.append({**loc.describe(), "embedded": int(n), "default": default})
    return out
