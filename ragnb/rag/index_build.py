"""Building a pgvector HNSW index the way pgvector's README advises: ``maintenance_work_mem`` large enough for the
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
