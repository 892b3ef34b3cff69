"""Store path: ``ragnb embed`` with every vector ready (encoder free) vs a bare binary COPY of the same vectors.

What ``ragnb embed --chunks`` costs besides the encoder: reading the rows to embed, staging each write of up to
8,192 vectors with binary COPY (the payload built by numpy in pgvector's binary format) and merging it with one
``UPDATE … FROM``, the model recorded with the first write. The encoder is a table of precomputed vectors (one dict lookup per text), so
nothing but the store path is timed.

Peers, on the same N × 384 float32 vectors (clustered, unit length) and the same chunk table (N rows of
realistic length, loaded once, not timed):

* **floor**: one binary COPY of ``(id text, vector)`` rows with ``copy.set_types(["text", "vector"])`` and
  ``write_row`` on a raw psycopg connection into a plain table, one transaction — what pgvector's own loading
  example does;
* **after**: ``embed_table(db, "chunks", encoder)`` as ``ragnb embed`` calls it (defaults: blocks of 256
  rows encoded, a write per 8,192 rows or 2 s from the writer thread), into the table's own column (vectors
  reset to NULL before each round, not timed);
* **after, vector table**: the same for a second model, stored in its own vector table (``INSERT … ON
  CONFLICT``; ``replace=True`` each round);
* **previous**: the same ``embed_table`` with the stage filled the previous way, a row at a time through
  pgvector's psycopg adapter (``set_types`` + ``write_row``; ``adapter_copy`` here);
* **disk cache, server hash**: ``embed_table`` with a ragnb encoder whose disk cache holds every text already
  (what "every text cached" means for ``ragnb embed``; the model is never called): the server computes each
  text's cache key (``sha256``), ragnb reads ids + digests, looks them up in the cache and writes the vectors;
  every client CPU second counts as the store path's, the cache reads included;
* **disk cache, client hash**: the same with the texts read and hashed on the client (the path before the
  server computed the digests);
* **before**: ``embed_table`` as it was first — pgvector's text form (``repr`` of each float) through a text
  COPY, kept here as ``text_write``, one write per block of 256 rows (``--no-before`` skips it).

Each figure is the median of ``--repeats`` rounds (peers alternate their order): client CPU
(``time.process_time()`` of this process; for ragnb also the part spent in the precomputed encoder and the rest,
the store path's own), server CPU (user + system of every process of the embedded
PostgreSQL, backends that exited meanwhile included, via psutil) and wall time. Target: ragnb's client CPU
(store path: without the encoder) ≤ 2 × the floor's. The stored vectors are checked bit for bit against the
input after every path.

Run (from the repository root, own server)::

    RAGNB_HOME=/tmp/ragnb_bench .venv/bin/python benchmarks/bench_store_vectors.py            # 10k and 50k
    RAGNB_HOME=/tmp/ragnb_bench .venv/bin/python benchmarks/bench_store_vectors.py --sizes 2000 --repeats 1 \\
        --out /tmp/store_small.json                                                           # quick check

Results: ``benchmarks/results/store_vectors.json``. Database ``bench_store_vectors`` on the embedded server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

RESULTS = HERE / "results"
WORDS = ("retrieval embedding vector index query document chunk answer model corpus search ranking recall "
         "precision server table column batch cache latency throughput memory wiki page section user session "
         "поиск вектор документ ответ модель запрос страница раздел").split()


class Precomputed:
    """An encoder whose vectors are known in advance: text → row of a matrix."""

    def __init__(self, name: str, texts: list[str], vecs: np.ndarray) -> None:
        self.name, self.dim, self.vecs = name, vecs.shape[1], vecs
        self.index = {t: i for i, t in enumerate(texts)}
        self.cpu_s = 0.0  # client CPU spent in here: the "encoder", not the store path

    def encode(self, texts, batch_size=32, progress=False):
        t0 = time.process_time()
        out = self.vecs[[self.index[t] for t in texts]]
        self.cpu_s += time.process_time() - t0
        return out


def disk_cached(texts: list[str], vecs: np.ndarray):
    """A ragnb encoder (``CachedEncoder``) whose disk cache holds every text's vector already (filled here, not
    timed); its model is never called. ``embed_table`` takes the cached path with it: the server hashes the
    texts and only ids + digests are read."""
    from ragnb.embeddings.cache import text_key
    from ragnb.embeddings.base import CachedEncoder

    class DiskCached(CachedEncoder):
        name, backend, fingerprint, dim = "bench-c", "bench", "b" * 64, vecs.shape[1]
        prompts = {"query": None, "document": None}
        cpu_s = 0.0  # no model ran: every client CPU second is the store path's (cache reads included)

        def _encode_role(self, texts, role, batch_size, progress):
            raise RuntimeError(f"{len(texts)} text(s) missing from the disk cache the benchmark filled")

    enc = DiskCached()
    cache = enc.cache_for("document")
    for start in range(0, len(texts), 10_000):
        cache.put_many([text_key(t) for t in texts[start:start + 10_000]], vecs[start:start + 10_000])
    return enc


def corpus(n: int, dim: int, seed: int = 0) -> tuple[list[str], list[str], np.ndarray]:
    """ids, texts of 60–200 words, clustered unit vectors (float32)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(60, 200, n)
    words = np.array(WORDS)[rng.integers(0, len(WORDS), int(lengths.sum()))]
    cuts = np.cumsum(lengths)[:-1]
    texts = [f"{i}: " + " ".join(part) for i, part in enumerate(np.split(words, cuts))]
    centres = rng.normal(size=(64, dim))
    vecs = centres[rng.integers(0, 64, n)] + 0.4 * rng.normal(size=(n, dim))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [f"wiki/page{i // 8}.md#{i % 8}" for i in range(n)], texts, vecs.astype(np.float32)


def server_cpu() -> float:
    """CPU seconds (user + system) of the embedded server: the postmaster, its live processes and the ones that
    exited (reaped: counted in the postmaster's children times)."""
    import psutil

    from ragnb import config

    pid = int((config.pgdata_dir() / "postmaster.pid").read_text().split()[0])
    master = psutil.Process(pid)
    t = master.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in master.children():
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(fn, encoder: Precomputed | None = None) -> dict:
    """Client CPU, server CPU and wall of ``fn()``; with ``encoder``, also the client CPU spent encoding and the
    store path's own (the rest)."""
    if encoder is not None:
        encoder.cpu_s = 0.0
    s0, c0, w0 = server_cpu(), time.process_time(), time.perf_counter()
    fn()
    wall, client = time.perf_counter() - w0, time.process_time() - c0
    out = {"client_cpu_s": client, "server_cpu_s": server_cpu() - s0, "wall_s": wall}
    if encoder is not None:
        out.update(encoder_cpu_s=encoder.cpu_s, store_client_cpu_s=client - encoder.cpu_s)
    return out


def text_write(db, table, ids, vecs, conn=None) -> None:
    """The writer before binary COPY: pgvector's text form through a text COPY, then UPDATE … FROM."""
    from ragnb.store.models import quote, quoted_table
    from ragnb.store.vectors import _transaction, vector_literal

    id_col, emb_col = quote(db, table.c.id.name), quote(db, table.c.embedding.name)
    with _transaction(db, conn) as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute(f"CREATE TEMP TABLE ragnb_tmp_vec ON COMMIT DROP AS "
                        f"SELECT {id_col} AS id, {emb_col} AS emb FROM {quoted_table(db, table)} WITH NO DATA")
            with cur.copy("COPY ragnb_tmp_vec (id, emb) FROM STDIN") as copy:
                for rid, vec in zip(ids, vecs):
                    copy.write_row((rid, vector_literal(vec)))
            cur.execute(f"UPDATE {quoted_table(db, table)} AS t SET {emb_col} = s.emb FROM ragnb_tmp_vec AS s "
                        f"WHERE t.{id_col} = s.id")


def adapter_copy(cur, name: str, ids, vecs) -> None:
    """The previous way to fill the stage: pgvector's psycopg adapter, a row at a time."""
    from ragnb.store.copy import ensure_vector_type

    ensure_vector_type(cur.connection)
    with cur.copy(f"COPY {name} (id, emb) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["text", "vector"])
        for row in zip(ids, vecs):
            copy.write_row(row)


def floor_copy(db, ids: list[str], vecs: np.ndarray) -> dict:
    """pgvector's loading example: binary COPY with set_types and write_row, one transaction."""
    import psycopg
    from pgvector.psycopg import register_vector

    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute("TRUNCATE bench_floor")
        conn.commit()
        return measure(lambda: _floor_once(conn, ids, vecs))


def _floor_once(conn, ids, vecs) -> None:
    with conn.cursor() as cur, cur.copy("COPY bench_floor (id, emb) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "vector"])
        for rid, vec in zip(ids, vecs):
            copy.write_row((rid, vec))
    conn.commit()


def reset(db) -> None:
    """No vectors (in the column or the default vector table, which is dropped: the embed creates it as a first
    embed does), no recorded model; vacuumed so every round starts from the same table (not timed)."""
    import sqlalchemy as sa

    from ragnb.store.models import default_table, quoted_table
    from ragnb.store.schema import tables

    t = tables(db.schema)
    with db.engine.begin() as conn:
        conn.execute(sa.update(t.chunk).values(embedding=None).where(t.chunk.c.embedding.is_not(None)))
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {quoted_table(db, default_table(t.chunk))}"))
        conn.execute(sa.delete(t.meta))
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM ANALYZE {quoted_table(db, t.chunk)}"))


def check_stored(db, ids: list[str], vecs: np.ndarray, model: str | None = None) -> None:
    from ragnb.store.vectors import fetch_vectors

    got_ids, _, stored = fetch_vectors(db, "chunks", model)
    order = {rid: i for i, rid in enumerate(ids)}
    expected = vecs[[order[i] for i in got_ids]]
    if len(got_ids) != len(ids) or not np.array_equal(stored.view(np.uint32), expected.view(np.uint32)):
        raise SystemExit(f"stored vectors differ from the input ({model or 'column'})")


def run_size(db, n: int, dim: int, repeats: int, before: bool) -> dict:
    import sqlalchemy as sa

    from ragnb.store import copy, encode_pipeline, vectors
    from ragnb.store.loaders import insert_rows
    from ragnb.store.schema import ensure_schema
    from ragnb.store.models import quoted_table
    from ragnb.store.vectors import embed_table

    ids, texts, vecs = corpus(n, dim)
    t = ensure_schema(db)
    with db.engine.begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {quoted_table(db, t.chunk)}"))
        conn.execute(sa.text("DROP TABLE IF EXISTS bench_floor"))
        conn.execute(sa.text(f"CREATE TABLE bench_floor (id text, emb vector({dim}))"))
    insert_rows(db, "chunks", [{"id": i, "url": f"https://wiki.example/{i.split('#')[0]}", "text": x}
                               for i, x in zip(ids, texts)])
    enc_a, enc_b = Precomputed("bench-a", texts, vecs), Precomputed("bench-b", texts, vecs[::-1].copy())
    by_id_b = dict(zip(ids, enc_b.vecs))

    def ragnb(writer=None, stage_copy=None) -> dict:
        """``writer`` given: the path before — that writer, one write per block of 256 rows; ``stage_copy``:
        that way of filling the stage."""
        reset(db)
        orig = vectors._write_vectors, encode_pipeline.WRITE_ROWS, copy.copy_vectors
        if writer is not None:
            vectors._write_vectors, encode_pipeline.WRITE_ROWS = writer, 1
        if stage_copy is not None:
            copy.copy_vectors = stage_copy
        try:
            out = measure(lambda: embed_table(db, "chunks", enc_a, progress=False), enc_a)
        finally:
            vectors._write_vectors, encode_pipeline.WRITE_ROWS, copy.copy_vectors = orig
        check_stored(db, ids, vecs)
        return out

    enc_c = disk_cached(texts, vecs)

    def cached(server_hash: bool = True) -> dict:
        """Every text in the disk cache; ``server_hash=False``: the texts read and hashed on the client instead
        (the path before the server computed the digests)."""
        reset(db)
        orig = vectors.role_cache
        if not server_hash:
            vectors.role_cache = lambda encoder, which: None
        try:
            out = measure(lambda: embed_table(db, "chunks", enc_c, progress=False), enc_c)
        finally:
            vectors.role_cache = orig
        check_stored(db, ids, vecs)
        return out

    def side() -> dict:  # bench-a holds the column (the last round left it there)
        out = measure(lambda: embed_table(db, "chunks", enc_b, replace=True, progress=False), enc_b)
        check_stored(db, ids, np.stack([by_id_b[i] for i in ids]), "bench-b")
        return out

    peers = {"floor_binary_copy": lambda: floor_copy(db, ids, vecs), "ragnb_column": ragnb, "ragnb_vector_table": side,
             "previous_adapter_copy": lambda: ragnb(stage_copy=adapter_copy),
             "ragnb_disk_cache_server_hash": cached, "ragnb_disk_cache_client_hash": lambda: cached(False)}
    if before:
        peers["before_text_copy"] = lambda: ragnb(text_write)
    rounds: dict[str, list[dict]] = {k: [] for k in peers}
    for r in range(repeats):  # round 1 runs ragnb_column before ragnb_vector_table: bench-a holds the column
        for name in (list(peers) if r % 2 == 0 else list(reversed(peers))):
            rounds[name].append(peers[name]())
            print(f"n={n} round {r + 1}: {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in rounds[name][-1].items()),
                  file=sys.stderr, flush=True)
    return {"n": n, "dim": dim, "rounds": rounds, "median": summary(rounds, n)}


def summary(rounds: dict[str, list[dict]], n: int) -> dict:
    med = {name: {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]} for name, rs in rounds.items() if rs}
    floor = med["floor_binary_copy"]["client_cpu_s"]
    for name, m in med.items():
        m["client_cpu_vs_floor"] = round(m["client_cpu_s"] / floor, 2)
        if "store_client_cpu_s" in m:
            m["store_client_cpu_vs_floor"] = round(m["store_client_cpu_s"] / floor, 2)
        m["vectors_per_client_cpu_s"] = round(n / m["client_cpu_s"])
    return med


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-before", action="store_true", help="skip the previous (text COPY) writer")
    ap.add_argument("--out", type=Path, default=RESULTS / "store_vectors.json")
    args = ap.parse_args()

    import platform

    import pgvector
    import psycopg

    import os
    import tempfile

    from ragnb.store.engine import connect

    os.environ["RAGNB_EMBEDDING_CACHE"] = tempfile.mkdtemp(prefix="bench-store-cache-")  # a fresh disk cache
    db = connect(database="bench_store_vectors")
    result = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count(),
                          "psycopg": psycopg.__version__, "psycopg_impl": psycopg.pq.__impl__,
                          "pgvector_python": getattr(pgvector, "__version__", None)},
              "target_client_cpu_vs_floor": 2.0, "sizes": []}
    for n in args.sizes:
        result["sizes"].append(run_size(db, n, args.dim, args.repeats, not args.no_before))
        print(json.dumps(result["sizes"][-1]["median"], indent=1), file=sys.stderr, flush=True)
    db.dispose()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
