"""pgvector HNSW indexes on a model's chunk vectors: which index is whose, creating one (with the settings it
was built with, :func:`hnsw_options`), dropping them.

Building follows pgvector's README: ``maintenance_work_mem`` large enough for the
graph (a graph that outgrows it is finished on disk, several times slower: the server then says
"hnsw graph no longer fits into maintenance_work_mem"), parallel workers, and progress while it builds.

The memory is sized to the index rather than set to one large constant: on a parallel build pgvector allocates
the whole ``maintenance_work_mem`` as shared memory up front, so a small table does not need gigabytes.
"""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa

from ragnb.config import index_memory_mb, index_workers
from ragnb.progress import reporter
from ragnb.store.engine import Database
from ragnb.store.models import ModelVectors, data_dimension, locate, quote
from ragnb.store.schema import tables
from ragnb.store.vectors import _fix_dimension

MIN_MEMORY_MB = 64  # PostgreSQL's own default maintenance_work_mem
POLL_S = 1.0  # how often the build's progress is read from pg_stat_progress_create_index


def graph_bytes_per_row(dim: int, m: int) -> int:
    """Upper estimate of one element of pgvector's in-memory HNSW graph: the vector (4·dim + 8 bytes of
    header), its neighbour lists (2·m candidates of 16 bytes on layer 0, m on each upper layer: on average
    1/(m−1) of them, counted as one more m) and the element's own bookkeeping (≈ 192 bytes)."""
    return 4 * dim + 8 + 16 * 3 * m + 192


def build_memory_mb(rows: int, dim: int, m: int, budget_mb: int | None = None) -> int:
    """``maintenance_work_mem`` in MB for an index over ``rows`` vectors: the graph's estimate
    (:func:`graph_bytes_per_row`) + 25 %, at least PostgreSQL's default 64 MB, at most ``budget_mb``
    (default ``RAGNB_INDEX_MEMORY_MB``)."""
    budget = index_memory_mb() if budget_mb is None else int(budget_mb)
    need = -(-int(1.25 * rows * graph_bytes_per_row(dim, m)) // (1 << 20))
    return int(max(MIN_MEMORY_MB, min(budget, need)))


def build_settings(rows: int, dim: int, m: int, budget_mb: int | None = None,
                   workers: int | None = None) -> dict[str, str]:
    """The session settings of one HNSW build (``SET LOCAL`` each)."""
    return {"maintenance_work_mem": f"{build_memory_mb(rows, dim, m, budget_mb)}MB",
            "max_parallel_maintenance_workers": str(index_workers() if workers is None else int(workers))}


def build_index(engine: sa.Engine, create_sql: str, rows: int, settings: dict[str, str], label: str) -> None:
    """Run ``create_sql`` (one CREATE INDEX) in a transaction of its own with ``settings``; while it runs, report
    ``label: done/rows rows`` (:mod:`ragnb.progress`) from the server's pg_stat_progress_create_index."""
    report = reporter(label, "rows")
    with engine.begin() as conn:
        for name, value in settings.items():
            conn.execute(sa.text(f"SET LOCAL {name} = '{value}'"))
        if report is None:
            conn.execute(sa.text(create_sql))
            return
        pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        report(0, rows)
        done = threading.Event()
        watcher = threading.Thread(target=_watch, args=(engine, pid, rows, report, done), daemon=True)
        watcher.start()
        try:
            conn.execute(sa.text(create_sql))
        finally:
            done.set()
            watcher.join()
    report(rows, rows)


def _watch(engine: sa.Engine, pid: int, rows: int, report: Any, done: threading.Event) -> None:
    """Report the build's tuples done until ``done`` is set; a failed read only stops the reports."""
    sql = sa.text("SELECT tuples_done FROM pg_stat_progress_create_index WHERE pid = :pid")
    try:
        with engine.connect() as conn:
            while not done.wait(POLL_S):
                value = conn.execute(sql, {"pid": pid}).scalar()
                conn.rollback()  # each read sees the current state, not a snapshot
                if value is not None and 0 < int(value) < rows:
                    report(int(value), rows)
    except sa.exc.SQLAlchemyError:  # progress is a courtesy: never fail the build over it
        return


def _index_target(db: Database, model: str | None) -> tuple[ModelVectors, str | None, str, str]:
    """(location, schema, table, index name) of ``model``'s chunk vectors: the chunk table's own column keeps
    its historical index name; a vector table's index is named after it."""
    loc = locate(db, "chunks", model)
    if loc.storage == "column":
        t = tables(db.schema).chunk
        return loc, t.schema, t.name, f"{t.name}_embedding_hnsw_idx"
    schema, _, name = loc.table.rpartition(".")
    return loc, schema or None, name, f"{name}_hnsw_idx"


def hnsw_indexes(db: Database, model: str | None = None) -> list[str]:
    """Names of HNSW indexes on ``model``'s chunk vectors (default: the default model's)."""
    loc, schema, name, _ = _index_target(db, model)
    sql = sa.text(
        "SELECT indexname FROM pg_indexes WHERE tablename = :t AND schemaname = COALESCE(CAST(:s AS text), current_schema()) "
        "AND indexdef ILIKE '%USING hnsw%'"
    )
    with loc.db.engine.connect() as conn:
        return [r[0] for r in conn.execute(sql, {"t": name, "s": schema})]


# From this many vectors an index is built with ef_construction 128 unless the caller says otherwise. Measured on the
# synthetic corpus of BENCHMARKS §14: at 100k vectors the graph built with pgvector's default 64 reached recall@10
# 0.98 (ef_search 320); at 1M it flattened at 0.905 (ef_search 1000) and Tier 1 fell back to exact search, while
# 128 reached 0.953 at ef_search 320 for 1.5× the build's CPU. 300k is the two sizes' geometric midpoint: no size
# between them was measured.
LARGE_INDEX_ROWS = 300_000


def default_ef_construction(rows: int) -> int:
    """The ``ef_construction`` an index of ``rows`` vectors is built with by default: 64, or 128 from
    :data:`LARGE_INDEX_ROWS`."""
    return 128 if rows >= LARGE_INDEX_ROWS else 64


def create_hnsw_index(db: Database, m: int = 16, ef_construction: int | None = None, model: str | None = None, *,
                      memory_mb: int | None = None, workers: int | None = None) -> str:
    """Build an HNSW index (cosine) on ``model``'s chunk vectors (default: the default model's), unless one is
    there already (its name is returned; see :func:`hnsw_options`). ``ef_construction``: default
    :func:`default_ef_construction` of the number of vectors. A vector table lives in the (writable) vector store.
    The build's ``maintenance_work_mem`` is sized to the graph and capped by ``memory_mb`` (default
    ``RAGNB_INDEX_MEMORY_MB``); ``workers`` parallel workers (default ``RAGNB_INDEX_WORKERS``); progress on stderr
    (:mod:`ragnb.rag.index_build`)."""
    loc, _, _, name = _index_target(db, model)
    if not loc.db.writable:
        raise ValueError(f"{db.display_url} is read-only; index creation writes — pass --write to allow it")
    dim = loc.dim
    if loc.storage == "column":
        t = tables(db.schema).chunk
        dim = data_dimension(db, t)
        if dim is None:
            raise ValueError("no chunk has an embedding yet; run `ragnb embed --chunks` before building an index")
        _fix_dimension(db, t, dim)
    if name in hnsw_indexes(db, model):
        return name
    with loc.db.engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT count(*) FROM {loc.sql_table} WHERE {loc.emb_col} IS NOT NULL")).scalar_one()
    if ef_construction is None:
        ef_construction = default_ef_construction(int(rows))
    build_index(loc.db.engine,
                f"CREATE INDEX IF NOT EXISTS {quote(loc.db, name)} ON {loc.sql_table} USING hnsw ({loc.emb_col} "
                f"vector_cosine_ops) WITH (m = {int(m)}, ef_construction = {int(ef_construction)})",
                int(rows), build_settings(int(rows), int(dim or 0), int(m), memory_mb, workers),
                f"building HNSW index {name}")
    return name


def hnsw_options(db: Database, model: str | None = None) -> dict[str, int] | None:
    """``m`` and ``ef_construction`` of the HNSW index on ``model``'s chunk vectors (pgvector's defaults, 16 and 64,
    where the index was built without them), or None when there is none."""
    loc, schema, _, name = _index_target(db, model)
    if name not in hnsw_indexes(db, model):
        return None
    qualified_name = (f"{quote(loc.db, schema)}." if schema else "") + quote(loc.db, name)
    with loc.db.engine.connect() as conn:
        options = conn.execute(sa.text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:i)"),
                               {"i": qualified_name}).scalar_one() or []
    found = dict(option.split("=", 1) for option in options)
    return {"m": int(found.get("m", 16)), "ef_construction": int(found.get("ef_construction", 64))}


def drop_hnsw_indexes(db: Database, model: str | None = None) -> list[str]:
    """Drop the HNSW indexes on ``model``'s chunk vectors; returns their names."""
    loc, schema, _, _ = _index_target(db, model)
    names = hnsw_indexes(db, model)
    with loc.db.engine.begin() as conn:
        for name in names:
            prefix = f"{quote(loc.db, schema)}." if schema else ""
            conn.execute(sa.text(f"DROP INDEX IF EXISTS {prefix}{quote(loc.db, name)}"))
    return names
