"""Encoding rows for ``embed_table``: the model encodes, one writer thread saves, so the slowest stage sets the pace.

The main thread encodes blocks of rows (longest texts first, so each batch pads little). Each encoded block goes
through a bounded queue to one writer thread, which saves the newly computed vectors to the disk cache and
gathers blocks into database writes (``WRITE_ROWS`` rows or ``WRITE_SECONDS``, one transaction each). While the
writer saves a block, the model encodes the next one: torch releases the GIL while it computes, and the sqlite and
PostgreSQL calls release it while they wait. The queue holds at most ``QUEUE_BLOCKS`` blocks, so a slow database
holds the encoder back instead of piling vectors up in memory.

Failures: an error in the writer stops the encoding at the next block and is raised in the caller's thread; an
error (or an interruption) in the encoder first lets the writer write every block encoded before it, then
propagates — an interrupted run keeps what it finished. Each database write is one transaction and each cache
write one sqlite transaction: a killed process leaves nothing half-written in either.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from ragnb.progress import reporter
from ragnb.embeddings.base import LOCAL_MODEL_FIX, EmbeddingReplyError, check_vectors, nothing_to_save
from ragnb.store.cached_rows import CachedRows, role_of, without_cycle_collector

# A write is one transaction: COPY into a stage, one merge, a commit. Its cost is fixed (a few round trips and
# a WAL flush), so blocks are gathered until this many rows or seconds have piled up — a fast encoder (a GPU, the
# disk cache) writes few large blocks, a slow one still commits every block.
WRITE_ROWS = 8192
WRITE_SECONDS = 2.0
QUEUE_BLOCKS = 2  # encoded blocks waiting for the writer: enough to keep both busy, little memory

Write = Callable[[list[str], np.ndarray], None]
CACHE_FIX = ("the disk cache holds an unusable vector for it (a damaged file); delete that cache file (see "
             "RAGNB_EMBEDDING_CACHE) and embed again")


def block_encoder(encoder, which: str) -> Callable[[list[str], int | None], tuple[np.ndarray, Callable[[], None]]]:
    """``fn(texts, batch_size) -> (vectors, save)``: chunks as documents, questions as queries. ``save()`` writes
    the vectors the model computed to the encoder's disk cache (ragnb's encoders); any other encoder (only
    ``encode``, or its own caching) gets a ``save`` that does nothing."""
    role = role_of(which)
    split = getattr(encoder, "encode_then_save", None)
    if split is not None:
        return lambda texts, batch_size: split(texts, role, batch_size)
    from ragnb.store.models import encode_fn

    encode = encode_fn(encoder, which)
    return lambda texts, batch_size: (encode(texts, batch_size=batch_size), nothing_to_save)


class PendingWrites:
    """Encoded blocks waiting to be written: ``add`` them, ``flush`` when enough piled up (and at the end)."""

    def __init__(self, write: Write, stats) -> None:
        self.write, self.stats = write, stats
        self.ids: list[str] = []
        self.vecs: list[np.ndarray] = []
        self.since = time.monotonic()

    def add(self, ids: list[str], vecs: np.ndarray) -> None:
        self.ids += ids
        self.vecs.append(vecs)
        if len(self.ids) >= WRITE_ROWS or time.monotonic() - self.since >= WRITE_SECONDS:
            self.flush()

    def flush(self) -> None:
        ids, vecs = self.ids, self.vecs
        self.ids, self.vecs, self.since = [], [], time.monotonic()  # taken first: a failed write is not retried
        if ids:
            self.write(ids, vecs[0] if len(vecs) == 1 else np.concatenate(vecs))
            self.stats.processed += len(ids)


class _Writer:
    """The writer thread: ``put`` encoded blocks, ``close`` to write what is left and wait for it."""

    def __init__(self, pending: PendingWrites) -> None:
        self.pending = pending
        self.error: BaseException | None = None
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_BLOCKS)
        self.thread = threading.Thread(target=self._run, name="ragnb-embed-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.error is None:  # after a failure, only drain: the encoder must never block on a full queue
                self._guard(self._save, *item)
        if self.error is None:
            self._guard(self.pending.flush)

    def _save(self, ids: list[str], vecs: np.ndarray, save: Callable[[], None]) -> None:
        save()  # the disk cache first: a vector in the database is always in the cache too
        self.pending.add(ids, vecs)

    def _guard(self, fn, *args) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller's thread, raised there
            self.error = exc

    def put(self, ids: list[str], vecs: np.ndarray, save: Callable[[], None]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put((ids, vecs, save))

    def close(self) -> None:
        """Write every block put so far, then raise the writer's error if it had one."""
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def encode_rows(todo: list, encoder, which: str, batch_size: int | None, write_every: int, progress: bool,
                stats, write: Write, cached: CachedRows | None = None) -> None:
    """Encode ``(id, text)`` rows ``write_every`` at a time and ``write(ids, vectors)`` them from the writer
    thread (see the module). Rows without text (NULL, empty, blank) count in ``stats.errors`` and get no
    vector; ``stats.processed`` counts the rows written. ``cached``: rows whose vectors come from the disk cache
    without their texts (:class:`ragnb.store.cached_rows.CachedRows`), read and written first, ``WRITE_ROWS``
    at a time; an entry found unusable when read has its text read and is encoded with the others."""
    total = rows_to_go(todo, cached)
    report = reporter(f"embedding {which} ({stats.model})", "rows") if progress and total else None
    if report is not None:
        report(0, total)  # the step has begun: loading a model can take a while before the first block
    writer = _Writer(PendingWrites(write, stats))
    try:
        done, todo = _write_cached(cached, writer, encoder, stats, report, total, todo)
        ids, texts, skipped = longest_first(todo)
        stats.errors += skipped
        done += skipped
        encode = block_encoder(encoder, which)
        for start in range(0, len(texts), write_every):
            block_ids, block_texts = ids[start:start + write_every], texts[start:start + write_every]
            vecs, save = _encode_block(block_ids, block_texts, encode, encoder, batch_size, stats)
            writer.put(block_ids, vecs, save)
            if report is not None:
                report(min(start + len(block_ids) + done, total), total)
    except BaseException as exc:
        try:
            writer.close()  # the blocks encoded before the failure are written before it propagates
        except BaseException as also:  # noqa: BLE001
            if also is not exc:
                exc.add_note(f"writing the blocks encoded before it failed too: {also}")
        raise
    writer.close()
    if report is not None and not texts:
        report(total, total)


def rows_to_go(todo: list, cached: CachedRows | None) -> int:
    """Rows :func:`encode_rows` goes through: those read with their text, and those found by digest."""
    return len(todo) + (0 if cached is None else len(cached) + cached.blank)


@without_cycle_collector()
def _write_cached(cached: CachedRows | None, writer: _Writer, encoder, stats, report, total: int,
                  todo: list) -> tuple[int, list]:
    """Hand the cached rows' vectors to the writer, a block at a time (read while the previous block is
    written); returns the rows gone through and ``todo`` with the rows whose entries were unusable."""
    if cached is None:
        return 0, todo
    stats.errors += cached.blank
    done, unusable = cached.blank, []
    for block_ids, vecs, bad in cached.blocks(WRITE_ROWS):
        unusable += bad
        if block_ids:
            _check_cached(block_ids, vecs, encoder, stats)
            writer.put(block_ids, vecs, nothing_to_save)
        done += len(block_ids)
        if report is not None and done < total:  # the last report comes from encode_rows
            report(done, total)
    return done, (todo + cached.read_texts(unusable) if unusable else todo)


def longest_first(rows: list) -> tuple[list[str], list[str], int]:
    """The ids and texts of ``(id, text)`` rows that have a text, longest first (ties in the given order), and
    how many have none (NULL, not a string, empty or blank). Longest first: each block then holds texts of
    similar length, so the encoder pads little. Done with ``map`` and numpy, not a Python loop per row: on
    50,000 rows the loop cost half a binary COPY of their vectors."""
    if not rows:
        return [], [], 0
    ids, texts = zip(*rows)
    if set(map(type, texts)) != {str}:  # NULLs (or a non-text column): no text, counted as errors
        texts = tuple(t if isinstance(t, str) else "" for t in texts)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    blank = (lengths == 0) | np.fromiter(map(str.isspace, texts), dtype=bool, count=len(texts))
    lengths[blank] = -1
    order = np.argsort(-lengths, kind="stable")[:len(texts) - int(blank.sum())]
    return (np.array(ids, dtype=object)[order].tolist(), np.array(texts, dtype=object)[order].tolist(),
            int(blank.sum()))


def _check_cached(ids: list[str], vecs: np.ndarray, encoder, stats) -> None:
    """Vectors read from the disk cache are checked like encoded ones: nothing unusable is stored."""
    try:
        check_vectors(vecs, [None] * len(ids), encoder.name, CACHE_FIX)
    except EmbeddingReplyError as exc:
        exc.where = f"for row id {ids[exc.position]!r} of {stats.table} (from the disk cache)"
        raise


def _encode_block(ids: list[str], texts: list[str], encode, encoder, batch_size: int | None,
                  stats) -> tuple[np.ndarray, Callable[[], None]]:
    """The checked float32 vectors of one block of rows, and the ``save`` of their new cache entries."""
    try:
        vecs, save = encode(texts, batch_size)
        vecs = np.asarray(vecs, dtype=np.float32)
        check_vectors(vecs, texts, encoder.name, LOCAL_MODEL_FIX)  # any encoder: nothing unusable is stored
    except EmbeddingReplyError as exc:
        if exc.position is not None:
            exc.where = f"for row id {ids[exc.position]!r} of {stats.table}"
        raise
    if vecs.shape != (len(ids), encoder.dim):
        raise ValueError(f"model {encoder.name!r} returned vectors of shape {vecs.shape} for {len(ids)} texts "
                         f"of {stats.table}; expected ({len(ids)}, {encoder.dim})")
    return vecs, save
