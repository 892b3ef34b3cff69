"""Writing validated chunk and question rows: COPY into a temporary staging table, then one merge.

:func:`merge_rows` is what ``ragnb load`` and the bundled demo write with. The rows are COPYed
(:mod:`ragnb.store.copy`) and merged by the server in the same transaction: ids already stored with the same
text are skipped and counted, a changed text is refused (or, asked to, overwritten with its vector cleared),
and the listed metadata columns are refreshed (a changed text's default vector is dropped, in the column or the
default vector table). Nothing is compiled per row, so the client's cost stays near a
bare COPY's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable, Iterable, Iterator

import psycopg
import sqlalchemy as sa
from psycopg import sql

from ragnb.progress import reporter
from ragnb.store.copy import analyze_stage, column_list, copy_rows_to_staging, table_identifier
from ragnb.store.engine import Database
from ragnb.store.schema import ensure_schema

STAGING = "ragnb_load_staging"
PROGRESS_EVERY = 1000  # rows between two looks at the progress clock (a look per row would cost more than COPY)
# Rows held at once by a load: a file is read, validated and COPYed this many rows at a time, so the memory of
# `ragnb load` does not grow with the file — about 35 MB above the process for chunks of 200 words (70 MB at
# 10,000; pgloader's batches are of a similar size, 20 MB). A COPY statement a batch costs nothing measurable.
BATCH_ROWS = 5_000
Locate = Callable[[set], list]  # ids → [(where, id)] of the rows read with those ids, in the file's order


@dataclass(frozen=True)
class Merged:
    """What :func:`merge_rows` did: new rows, rows whose text changed (as ``"<where> id=…"``), rows of the same
    text whose ``refresh`` columns changed."""

    inserted: int
    changed: list[str]
    refreshed: int


def merge_rows(db: Database, kind: str, rows: Iterable[dict], refresh: tuple[str, ...] = (),
               on_changed: str = "error", locate: Locate | None = None, batch_rows: int = BATCH_ROWS) -> Merged:
    """Insert rows, skipping ids already stored with the same text. One transaction: on any error (or a killed
    client) nothing is written. The rows are COPYed into a temporary staging table and merged from there.

    ``rows``: a list, or an iterator (a file being read and validated): COPYed ``batch_rows`` at a time, each
    batch its own COPY, so that only one batch is held and a value the server refuses is named while its batch is;
    an error raised by the iterator (a bad row in the last batch) rolls everything back. ``locate`` names the
    rows of an iterator after their batch is gone (ids → ``[(where, id)]`` in file order); without it the rows
    are read into a list first.

    An id stored with a different text: ``on_changed="error"`` raises naming the row, ``"update"`` overwrites
    the row and clears its embedding (re-embedded by the next ``ragnb embed``), ``"skip"`` keeps the stored row.
    ``refresh``: columns (never the text or the embedding) whose stored value is overwritten on rows that
    already exist — how a reloaded wiki takes new page URLs and the bundled demo updates its simulated scores
    without re-embedding anything.
    """
    t = ensure_schema(db)
    table, text_col = (t.chunk, "text") if kind == "chunks" else (t.question, "question")
    cols = [c.key for c in table.columns if c.key != "embedding"]
    bad = [c for c in refresh if c not in cols or c in ("id", "text", "question")]
    if bad:
        raise ValueError(f"refresh={bad}: only metadata columns can be refreshed "
                         f"({[c for c in cols if c not in ('id', 'text', 'question')]})")
    if locate is None:
        rows = rows if isinstance(rows, list) else list(rows)
        locate = lambda ids: [(r.get("_where", "row"), r["id"]) for r in rows if str(r["id"]) in ids]  # noqa: E731
    with db.engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
        staged = _stage(cur, table, cols, rows, f"loading {kind}", batch_rows)
        changed = [] if on_changed == "skip" else _changed(cur, table, text_col, staged, locate)
        if changed and on_changed != "update":
            where, rid = changed[0]
            raise ValueError(f"{where}: field 'id' = {rid!r} is already stored with a different "
                             f"{text_col} ({len(changed)} such row(s)); pass --update to overwrite them, or give new ids")
        if changed:
            _overwrite(cur, table, text_col, staged, [c for c in cols if c != "id"])
            _drop_default_vectors(db, kind, table, cur, [str(rid) for _, rid in changed])
        cur.execute(sql.SQL("INSERT INTO {t} ({cols}) SELECT {cols} FROM {s} ON CONFLICT ({id}) DO NOTHING").format(
            t=table_identifier(table), cols=column_list(table, cols), s=staged, id=sql.Identifier(table.c.id.name)))
        inserted = cur.rowcount
        refreshed = _refresh(cur, table, staged, refresh) if refresh else 0
    return Merged(inserted, [f"{where} id={rid}" for where, rid in changed], refreshed)


def _stage(cur: Any, table: sa.Table, cols: list[str], rows: Iterable[dict], label: str,
           batch_rows: int = BATCH_ROWS) -> sql.Identifier:
    """COPY the rows into the staging table ``batch_rows`` at a time, reporting ``label: done/N rows``
    (:mod:`ragnb.progress`; ``done rows`` while an iterator's length is unknown)."""
    total = len(rows) if isinstance(rows, list) else 0
    report = reporter(label, "rows")
    source, done, staged = iter(rows), 0, None
    while True:
        batch = list(islice(source, batch_rows))
        if staged is not None and not batch:
            break
        staged = _copy_batch(cur, table, cols, batch, create=staged is None, progress=(report, done, total))
        done += len(batch)
        del batch  # before the next one is read: one batch held at a time, not two
    if report is not None:
        report(done, done)
    analyze_stage(cur, staged, sql.Identifier(table.c.id.name))  # every merge joins on the id
    return staged


def _copy_batch(cur: Any, table: sa.Table, cols: list[str], batch: list[dict], create: bool,
                progress: tuple) -> sql.Identifier:
    """One COPY of ``batch`` into the staging table (``create``: the first); a value the column's type refuses
    is a ValueError naming its row — the server names its line in this COPY, so the batch is enough."""
    report, done, total = progress
    at = [0]  # the row being written, for a value psycopg itself refuses

    def values() -> Iterator[tuple]:
        for at[0], r in enumerate(batch):
            if report is not None and (done + at[0]) % PROGRESS_EVERY == 0:
                report(done + at[0], total)
            yield tuple(r.get(c) for c in cols)

    try:
        return copy_rows_to_staging(cur, table, cols, values(), STAGING, create=create, analyze=False)
    except psycopg.DataError as exc:  # too long for a varchar(n), not an integer for an integer id, NUL …
        raise ValueError(_refused_value(exc, batch, at[0], table)) from None


def _differs(table: sa.Table, staged: sql.Identifier, keys: list[str] | tuple[str, ...]) -> sql.Composed:
    """``staged WHERE`` the stored row (alias t) has the staged row's id and other values in ``keys``."""
    def values(prefix: sql.Composable) -> sql.Composed:
        return sql.SQL(", ").join(sql.SQL("{}.{}").format(prefix, sql.Identifier(table.c[k].name)) for k in keys)

    return sql.SQL("{s} WHERE t.{id} = {s}.{id} AND ROW({old}) IS DISTINCT FROM ROW({new})").format(
        s=staged, id=sql.Identifier(table.c.id.name), old=values(sql.Identifier("t")), new=values(staged))


def _changed(cur: Any, table: sa.Table, text_col: str, staged: sql.Identifier, locate: Locate) -> list[tuple]:
    """(where, id) of the rows whose id is stored with another text, in file order (the first one is named in
    the error)."""
    cur.execute(sql.SQL("SELECT {s}.{id}::text FROM {t} AS t, ").format(
        s=staged, id=sql.Identifier(table.c.id.name), t=table_identifier(table)) + _differs(table, staged, [text_col]))
    ids = {i for (i,) in cur}
    return locate(ids) if ids else []


def _overwrite(cur: Any, table: sa.Table, text_col: str, staged: sql.Identifier, keys: list[str]) -> None:
    """Every column of the rows stored with another text takes the staged value; their vector is cleared."""
    new = sql.SQL(", ").join(sql.SQL("{}.{}").format(staged, sql.Identifier(table.c[k].name)) for k in keys)
    cur.execute(sql.SQL("UPDATE {t} AS t SET ({cols}, {emb}) = ROW({new}, NULL) FROM ").format(
        t=table_identifier(table), cols=column_list(table, keys), emb=sql.Identifier(table.c.embedding.name), new=new)
        + _differs(table, staged, [text_col]))


def _drop_default_vectors(db: Database, kind: str, table: sa.Table, cur: Any, ids: list[str]) -> None:
    """A changed text loses its default vector where that lives in a vector table (the column's is cleared by
    :func:`_overwrite`): the next ``ragnb embed`` embeds the new text."""
    from ragnb.store.models import located_default_table

    vt = located_default_table(db, table) if kind == "chunks" else None
    if vt is not None:
        cur.execute(sql.SQL("DELETE FROM {} WHERE row_id = ANY(%s)").format(table_identifier(vt)), (ids,))


def _refresh(cur: Any, table: sa.Table, staged: sql.Identifier, refresh: tuple[str, ...]) -> int:
    """Overwrite the ``refresh`` columns of the stored rows whose values differ from the staged ones (rows
    just inserted or updated already hold them); return how many rows changed."""
    new = sql.SQL(", ").join(sql.SQL("{}.{}").format(staged, sql.Identifier(table.c[k].name)) for k in refresh)
    cur.execute(sql.SQL("UPDATE {t} AS t SET ({cols}) = ROW({new}) FROM ").format(
        t=table_identifier(table), cols=column_list(table, refresh), new=new) + _differs(table, staged, refresh))
    return cur.rowcount


def _refused_value(exc: Exception, rows: list[dict], at: int, table: sa.Table) -> str:
    """The row and field of a value COPY refused: the server names the staging line and column in the error's
    context; a value psycopg refuses before sending it is the row being written."""
    diag = getattr(exc, "diag", None)
    found = re.search(r"COPY \S+, line (\d+)(?:, column (\w+))?", (diag and diag.context) or "")
    row = rows[int(found.group(1)) - 1] if found else rows[at]
    names = {c.name: c.key for c in table.columns}
    field = f" field '{names.get(found.group(2), found.group(2))}'" if found and found.group(2) else ""
    reason = ((diag and diag.message_primary) or str(exc)).strip().splitlines()[0]
    return (f"{row.get('_where', f'row {at + 1}')}:{field} (id {row.get('id')!r}) cannot be stored in "
            f"{table.fullname}: {reason}; fix the value at its source")
