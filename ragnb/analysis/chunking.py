"""Chunking strategies side by side (seed 004 "Build Speed" and "Index Size", plus Tier 1 quality).

For each (chunk size, overlap) of a grid, in words, the source articles are re-chunked with
:func:`ragnb.store.loaders.chunk_text`, embedded, loaded into their own pgvector table
``chunking_s<size>_o<overlap>`` with an HNSW index, and measured:

* **build speed** — seconds per stage (chunking, embedding, insert, index) and chunks per second;
* **index size** — ``pg_table_size``, ``pg_indexes_size`` (HNSW + primary key) and
  ``pg_total_relation_size`` of the table, in bytes, MB (10⁶ bytes) and bytes per chunk;
* **truncation** — the share of chunks longer than the encoder reads (all-MiniLM-L6-v2: 256 tokens);
* **retrieval quality** — hit_rate@1/5, MRR, nDCG@10, recall@5 with bootstrap CIs on the questions.

Relevance rule (a chunking has no gold chunk ids of its own): a chunk is relevant to a question iff it comes
from the gold paragraph's article, its character span overlaps the gold paragraph's span, and it contains the
reference answer (case-folded, whitespace collapsed). A question whose answer no chunk of a config contains
(e.g. cut by a chunk boundary) has no relevant chunk there: it scores 0 on every metric, so all configs are
compared on the same questions, and it is counted in ``n_no_relevant_chunk``. A question without a reference
answer is judged by span overlap alone (counted in ``n_questions_without_answer``).

Embeddings are cached in the workspace database, keyed by (model, sha1(text)): a text is never encoded twice
for the same model, across configs and across runs. Build speed stays honest: ``embedding_s_measured`` is the
time spent encoding the texts encoded *now* (``n_encoded`` of them), ``embedding_s_recorded`` the encoding time
recorded when the cached texts were first encoded (amortised per text within their batch), and
``embedding_s`` their sum = what embedding the whole config costs; ``embedding_timing`` says which
("measured", "cache" or "mixed").
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.rag.embeddings import Encoder
from ragnb.metrics.embedding import truncation_stats
from ragnb.metrics.retrieval import evaluate
from ragnb.store.engine import Database
from ragnb.store.loaders import chunk_text

CACHE_TABLE = "chunking_embedding_cache"
WORKSPACE_DATABASE = "ragnb_chunking"  # embedded database the build tables go to (never a team's server)
METRICS = ["hit_rate@1", "hit_rate@5", "mrr", "ndcg@10", "recall@5"]
NO_RELEVANT = "<no relevant chunk>"  # qrels placeholder: never retrieved, so the question scores 0
PARAGRAPH_SEPARATOR = "\n\n"


# --------------------------------------------------------------------------------------------
# Grid
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkConfig:
    chunk_size: int  # words per chunk
    overlap: int  # words shared by consecutive chunks

    @property
    def name(self) -> str:
        return f"s{self.chunk_size}_o{self.overlap}"

    @property
    def table(self) -> str:
        return f"chunking_{self.name}"


def _int_list(text: str, field_name: str, minimum: int) -> list[int]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{field_name} = {text!r}; give comma-separated whole numbers of words, e.g. '100,200'")
    out = []
    for part in text.split(","):
        part = part.strip()
        if not re.fullmatch(r"\d+", part) or int(part) < minimum:
            raise ValueError(f"{field_name}: {part!r} is not a whole number ≥ {minimum}; "
                             "give comma-separated numbers of words, e.g. '100,200'")
        out.append(int(part))
    return sorted(set(out))


def parse_grid(chunk_sizes: str, overlaps: str) -> list[ChunkConfig]:
    """Every (size, overlap) pair of ``"100,200"`` × ``"0,40"``, sizes ≥ 1, overlaps ≥ 0.

    Every overlap must be smaller than every size (the grid is all pairs; a chunk cannot repeat all of its
    predecessor); otherwise ``ValueError`` names the bad pairs.
    """
    sizes = _int_list(chunk_sizes, "chunk_sizes", 1)
    laps = _int_list(overlaps, "overlaps", 0)
    bad = [(s, o) for s in sizes for o in laps if o >= s]
    if bad:
        pairs = ", ".join(f"size {s} / overlap {o}" for s, o in bad)
        raise ValueError(f"overlap must be smaller than chunk size, but the grid has {pairs}; "
                         "drop those overlaps or sizes (every overlap is paired with every size)")
    return [ChunkConfig(s, o) for s in sizes for o in laps]


# --------------------------------------------------------------------------------------------
# Source articles and chunks with character offsets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Paragraph:
    id: str
    start: int  # character span [start, end) in the article text
    end: int


@dataclass
class Article:
    url: str
    text: str
    paragraphs: list[Paragraph]


@dataclass(frozen=True)
class Chunk:
    id: str
    url: str
    text: str
    start: int  # character span [start, end) of its words in the article text
    end: int


def natural_key(text: str) -> tuple:
    """Sort key that orders "p2" before "p10"."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def build_article(url: str, paragraphs: list[tuple[str, str]]) -> Article:
    """Join ``(paragraph id, text)`` pairs, in the order given, with a blank line; record each one's span."""
    parts, spans, pos = [], [], 0
    for i, (pid, text) in enumerate(paragraphs):
        if i:
            parts.append(PARAGRAPH_SEPARATOR)
            pos += len(PARAGRAPH_SEPARATOR)
        parts.append(text)
        spans.append(Paragraph(pid, pos, pos + len(text)))
        pos += len(text)
    return Article(url, "".join(parts), spans)


def group_articles(rows: list[dict]) -> list[Article]:
    """Rows ``{id, url, text}`` → one article per URL, paragraphs in natural id order; a row without a URL is
    an article of its own (its neighbours are unknown). Articles are ordered by URL."""
    by_url: dict[str, list[dict]] = {}
    for row in rows:
        if not isinstance(row.get("text"), str) or not row["text"].strip():
            continue
        key = row.get("url") or f"(no url: {row['id']})"
        by_url.setdefault(key, []).append(row)
    return [build_article(url, [(r["id"], r["text"]) for r in sorted(group, key=lambda r: natural_key(str(r["id"])))])
            for url, group in sorted(by_url.items())]


def demo_articles(language: str = "ru") -> list[Article]:
    """The bundled XQuAD paragraphs grouped into their Wikipedia articles."""
    from ragnb.runs import demo

    return group_articles(demo.chunk_rows(language))


def db_articles(db: Database) -> list[Article]:
    """The configured chunk table's texts grouped by URL (each stored chunk counts as a paragraph)."""
    import sqlalchemy as sa

    from ragnb.store.schema import tables

    t = tables(db.schema).chunk
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.cast(t.c.id, sa.Text), t.c.url, t.c.text)).all()
    if not rows:
        raise ValueError(f"{db.display_url}: the chunk table is empty; load a corpus with `ragnb load chunks FILE`")
    return group_articles([{"id": r[0], "url": r[1], "text": r[2]} for r in rows])


def chunk_article(article: Article, cfg: ChunkConfig, prefix: str) -> list[Chunk]:
    """``chunk_text(article.text, size, overlap)`` with each chunk's character span in the article.

    chunk_text splits on whitespace and re-joins words with one space; chunk n holds words
    [n·(size − overlap), n·(size − overlap) + size). The span runs from its first word's first character to its
    last word's last character. Each chunk's text is checked against those words.
    """
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", article.text)]
    pieces = chunk_text(article.text, cfg.chunk_size, cfg.overlap)
    step = cfg.chunk_size - cfg.overlap
    out = []
    for n, piece in enumerate(pieces):
        first, last = n * step, min(n * step + cfg.chunk_size, len(words)) - 1
        expected = " ".join(article.text[s:e] for s, e in words[first:last + 1])
        if piece != expected:  # chunk_text and this word split disagree: offsets would be wrong
            raise RuntimeError(f"chunk {n} of {article.url}: chunk_text's words differ from the offset map")
        out.append(Chunk(f"{prefix}c{n:04d}", article.url, piece, words[first][0], words[last][1]))
    return out


def chunk_corpus(articles: list[Article], cfg: ChunkConfig) -> list[Chunk]:
    return [c for i, a in enumerate(articles) for c in chunk_article(a, cfg, f"{cfg.name}-a{i:05d}-")]


# --------------------------------------------------------------------------------------------
# Relevance
# --------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def relevant_chunk_ids(chunks: list[Chunk], url: str, start: int, end: int, answer: str | None) -> list[str]:
    """Ids of the chunks relevant to a question whose gold paragraph spans [start, end) of article ``url``:
    same article, overlapping span (chunk.start < end and start < chunk.end), and — when ``answer`` is not
    blank — the chunk's text contains the answer (both case-folded, whitespace collapsed)."""
    needle = _norm(answer) if answer and answer.strip() else None
    return [c.id for c in chunks
            if c.url == url and c.start < end and start < c.end and (needle is None or needle in _norm(c.text))]


@dataclass
class Question:
    id: str
    text: str
    answer: str | None
    url: str
    start: int
    end: int


def gold_questions(items, articles: list[Article]) -> tuple[list[Question], list[str]]:
    """Dataset items → questions with their gold paragraph's article and span, plus the ids of items whose gold
    paragraph (``chunk_id``, else the first relevant chunk id) is not in the articles (they cannot be judged)."""
    where = {p.id: (a.url, p.start, p.end) for a in articles for p in a.paragraphs}
    questions, unmapped = [], []
    for it in items:
        gold = it.chunk_id or next(iter(it.grades()), None)
        if gold not in where:
            unmapped.append(it.id)
            continue
        url, start, end = where[gold]
        questions.append(Question(it.id, it.question, it.ground_truth_answer, url, start, end))
    return questions, unmapped


# --------------------------------------------------------------------------------------------
# Embedding cache: (model, sha1(text)) → vector, and the seconds its encoding took
# --------------------------------------------------------------------------------------------


def text_sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


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


def ensure_cache(db: Database) -> None:
    import sqlalchemy as sa

    with db.engine.begin() as conn:
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        conn.execute(sa.text(
            f"CREATE TABLE IF NOT EXISTS {CACHE_TABLE} (model text NOT NULL, sha1 text NOT NULL, "
            "embedding vector NOT NULL, seconds double precision NOT NULL, "
            "created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (model, sha1))"))


def _raw(conn):
    from pgvector.psycopg import register_vector

    raw = conn.connection.driver_connection
    register_vector(raw)  # the extension may be newer than the pooled connection
    return raw


def embed_with_cache(db: Database, encoder: Encoder, texts: list[str],
                     batch_size: int = 32) -> tuple[np.ndarray, EmbedReport]:
    """Vectors of ``texts`` (input order): cached ones read from ``CACHE_TABLE``, the rest encoded (each
    distinct text once, timed) and stored with their amortised encoding seconds."""
    ensure_cache(db)
    keys = [text_sha1(t) for t in texts]
    unique = list(dict.fromkeys(keys))
    found: dict[str, tuple[np.ndarray, float]] = {}
    with db.engine.connect() as conn:
        raw = _raw(conn)
        with raw.cursor(binary=True) as cur:
            cur.execute(f"SELECT sha1, embedding, seconds FROM {CACHE_TABLE} WHERE model = %s AND sha1 = ANY(%s)",
                        (encoder.name, unique))
            for sha, vec, seconds in cur.fetchall():
                arr = vec.to_numpy() if hasattr(vec, "to_numpy") else np.asarray(vec)
                found[sha] = (arr.astype(np.float32, copy=False), float(seconds))
        raw.rollback()
    first_text = dict(zip(keys, texts))
    todo = [k for k in unique if k not in found]
    measured = 0.0
    if todo:
        start = time.perf_counter()
        # the model itself, not the encoder's disk cache: these seconds are reported as build time
        vecs = encoder.encode_uncached([first_text[k] for k in todo], batch_size=batch_size)
        measured = time.perf_counter() - start
        if vecs.shape[1] != encoder.dim:
            raise ValueError(f"encoder {encoder.name!r} returned {vecs.shape[1]}-d vectors, expected {encoder.dim}")
        each = measured / len(todo)
        _store(db, encoder.name, todo, vecs, each)
        for k, v in zip(todo, vecs):
            found[k] = (v, each)
    encoded_now = set(todo)
    cached = [k for k in unique if k not in encoded_now]
    matrix = np.stack([found[k][0] for k in keys]) if keys else np.zeros((0, encoder.dim), dtype=np.float32)
    if matrix.shape[1] != encoder.dim:
        raise ValueError(f"{CACHE_TABLE} holds {matrix.shape[1]}-d vectors for model {encoder.name!r}, which makes "
                         f"{encoder.dim}-d ones; drop the table to rebuild the cache")
    report = EmbedReport(len(texts), len(unique), len(todo), len(cached), measured,
                         float(sum(found[k][1] for k in cached)))
    return matrix, report


def _store(db: Database, model: str, keys: list[str], vecs: np.ndarray, seconds: float) -> None:
    """COPY into a temp table, then INSERT … ON CONFLICT DO NOTHING (another process may have stored them)."""
    with db.engine.begin() as conn:
        raw = _raw(conn)
        with raw.cursor() as cur:
            cur.execute(f"CREATE TEMP TABLE chunking_cache_new (LIKE {CACHE_TABLE} INCLUDING DEFAULTS) ON COMMIT DROP")
            with cur.copy("COPY chunking_cache_new (model, sha1, embedding, seconds) FROM STDIN WITH (FORMAT BINARY)") as cp:
                cp.set_types(["text", "text", "vector", "float8"])
                for k, v in zip(keys, vecs):
                    cp.write_row((model, k, np.asarray(v, dtype=np.float32), seconds))
            cur.execute(f"INSERT INTO {CACHE_TABLE} SELECT * FROM chunking_cache_new ON CONFLICT DO NOTHING")


# --------------------------------------------------------------------------------------------
# Build one config: table + COPY + HNSW, timed and measured
# --------------------------------------------------------------------------------------------


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
    dim = vectors.shape[1]
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
    """HNSW (cosine) on ``cfg.table``'s embeddings. A bigger maintenance_work_mem builds ~4× faster (DESIGN §7)."""
    import sqlalchemy as sa

    if not re.fullmatch(r"\d+\s*(kB|MB|GB)", maintenance_work_mem):
        raise ValueError(f"maintenance_work_mem = {maintenance_work_mem!r}; use e.g. '64MB' or '1GB'")
    name = f"{cfg.table}_hnsw"
    with db.engine.begin() as conn:
        conn.execute(sa.text(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'"))
        conn.execute(sa.text(f"CREATE INDEX {name} ON {cfg.table} USING hnsw (embedding vector_cosine_ops) "
                             f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"))
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
    vectors, embed = embed_with_cache(db, encoder, [c.text for c in chunks], batch_size)
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
    truncation = truncation_stats(encoder.token_counts([c.text for c in chunks]), encoder.max_seq_length)
    return Build(cfg, chunks, vectors, timings, table_size(db, cfg.table, index), truncation)


def drop_tables(db: Database, configs: list[ChunkConfig], cache: bool = False) -> None:
    """Remove the build tables (and with ``cache`` the embedding cache)."""
    import sqlalchemy as sa

    with db.engine.begin() as conn:
        for cfg in configs:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {cfg.table}"))
        if cache:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {CACHE_TABLE}"))


# --------------------------------------------------------------------------------------------
# Quality and the whole comparison
# --------------------------------------------------------------------------------------------


def qrels_for(build_chunks: list[Chunk], questions: list[Question]) -> dict[str, dict[str, int]]:
    """{question: {relevant chunk: 1}} by :func:`relevant_chunk_ids`; no relevant chunk → the placeholder
    :data:`NO_RELEVANT` (never retrieved, so every metric is 0 for that question)."""
    by_url: dict[str, list[Chunk]] = {}
    for c in build_chunks:
        by_url.setdefault(c.url, []).append(c)
    out = {}
    for q in questions:
        ids = relevant_chunk_ids(by_url.get(q.url, []), q.url, q.start, q.end, q.answer)
        out[q.id] = {cid: 1 for cid in ids} or {NO_RELEVANT: 1}
    return out


def evaluate_build(build: Build, questions: list[Question], question_vectors: np.ndarray, top_k: int = 10,
                   n_boot: int = 1000) -> tuple[pd.DataFrame, dict]:
    """Exact cosine top-k over the config's vectors (in memory, so quality differences come from the chunking,
    not from the approximate index) scored with :func:`ragnb.metrics.retrieval.evaluate`."""
    from ragnb.rag.retrieval import MemoryRetriever

    if top_k < 10:
        raise ValueError(f"top_k = {top_k}; ndcg@10 needs at least 10 retrieved chunks")
    retriever = MemoryRetriever([c.id for c in build.chunks], build.vectors, [c.url for c in build.chunks])
    result = retriever.search(question_vectors, min(top_k, len(build.chunks)))
    run = result.as_run([q.id for q in questions])
    qrels = qrels_for(build.chunks, questions)
    per_query, summary = evaluate(run, qrels, METRICS, n_boot=n_boot)
    per_query["n_relevant_chunks"] = [0 if NO_RELEVANT in qrels[q] else len(qrels[q]) for q in per_query.index]
    summary["n_no_relevant_chunk"] = int((per_query["n_relevant_chunks"] == 0).sum())
    return per_query, summary


@dataclass
class ChunkingResult:
    table: pd.DataFrame  # one row per config: sizes, timings, truncation, metric means
    per_query: pd.DataFrame  # one row per (config, question), index "<config>/<question id>"
    summary: dict
    notes: list[str] = field(default_factory=list)


def run_chunking(db: Database, encoder: Encoder, articles: list[Article], items, configs: list[ChunkConfig], *,
                 top_k: int = 10, batch_size: int = 32, hnsw_m: int = 16, hnsw_ef_construction: int = 64,
                 maintenance_work_mem: str = "1GB", n_boot: int = 1000) -> ChunkingResult:
    """Build every config into ``db`` (a workspace database ragnb owns) and compare them on ``items``."""
    if not configs:
        raise ValueError("no chunking configs; give chunk_sizes and overlaps")
    if not db.writable:
        raise ValueError(f"{db.display_url} is read-only; the chunking comparison writes its tables — use the embedded "
                         f"workspace database {WORKSPACE_DATABASE!r}")
    questions, unmapped = gold_questions(items, articles)
    if not questions:
        raise ValueError("no question's gold paragraph (chunk_id) is among the source texts; use a dataset built on "
                         "this corpus")
    notes = []
    if unmapped:
        notes.append(f"{len(unmapped)} question(s) have a gold paragraph outside the source articles and are left "
                     f"out (first: {unmapped[0]!r}).")
    q_vectors, q_embed = embed_with_cache(db, encoder, [q.text for q in questions], batch_size)

    rows, frames, per_config = [], [], {}
    for cfg in configs:
        build = build_config(db, encoder, articles, cfg, batch_size, hnsw_m, hnsw_ef_construction, maintenance_work_mem)
        per_query, metrics = evaluate_build(build, questions, q_vectors, top_k, n_boot)
        frames.append(per_query.assign(config=cfg.name).reset_index())
        per_config[cfg.name] = {"chunk_size": cfg.chunk_size, "overlap": cfg.overlap, "table": cfg.table,
                                "n_chunks": len(build.chunks), "timings": build.timings, "size": build.size,
                                "truncation": build.truncation, **metrics}
        rows.append({"config": cfg.name, "chunk_size": cfg.chunk_size, "overlap": cfg.overlap,
                     "n_chunks": len(build.chunks), **{k: v for k, v in build.timings.items()},
                     "table_bytes": build.size["table_bytes"], "index_bytes": build.size["index_bytes"],
                     "hnsw_bytes": build.size["hnsw_bytes"], "total_bytes": build.size["total_bytes"],
                     "total_mb": build.size["total_mb"], "bytes_per_chunk": build.size["bytes_per_chunk"],
                     "share_truncated": build.truncation["share_truncated"],
                     "mean_tokens": build.truncation["mean_tokens"],
                     "n_no_relevant_chunk": metrics["n_no_relevant_chunk"],
                     **{name: metrics[name]["mean"] for name in METRICS},
                     **{f"{name}_ci95": metrics[name]["ci95"] for name in METRICS}})
    table = pd.DataFrame(rows).set_index("config")
    encoded = int(table["n_encoded"].sum()) + q_embed.n_encoded
    seconds = float(table["embedding_s_measured"].sum()) + q_embed.seconds_measured
    chunk_encoded, chunk_seconds = int(table["n_encoded"].sum()), float(table["embedding_s_measured"].sum())
    summary = {
        "analysis": "chunking",
        "n_articles": len(articles), "n_paragraphs": sum(len(a.paragraphs) for a in articles),
        "n_questions": len(questions), "n_questions_unmapped": len(unmapped),
        "n_questions_without_answer": sum(1 for q in questions if not (q.answer and q.answer.strip())),
        "relevance_rule": "same article, overlapping the gold paragraph's span, containing the answer text",
        "embedding_model": encoder.name, "max_seq_length": encoder.max_seq_length,
        "retrieval": f"exact cosine top-{top_k} in memory", "metrics": METRICS,
        "hnsw": {"m": hnsw_m, "ef_construction": hnsw_ef_construction, "maintenance_work_mem": maintenance_work_mem},
        "texts_encoded_this_run": encoded,
        "encode_seconds_this_run": seconds,
        "chunk_encode_rate_this_run": chunk_encoded / chunk_seconds if chunk_encoded and chunk_seconds > 0 else None,
        "questions_embedding": q_embed.as_dict(),
        "configs": per_config,
    }
    per_query = pd.concat(frames, ignore_index=True)
    per_query.index = pd.Index(per_query["config"] + "/" + per_query["query_id"].astype(str), name="item_id")
    return ChunkingResult(table, per_query, summary, notes)


def select_articles(articles: list[Article], max_articles: int = 0) -> list[Article]:
    """The first ``max_articles`` articles (ordered by URL; 0: all) — a smaller, still whole-article corpus."""
    if max_articles < 0:
        raise ValueError(f"max_articles = {max_articles}; use 0 for all articles or a positive number")
    return articles[:max_articles] if max_articles else articles


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

STAGES = ("chunking_s", "embedding_s", "insert_s", "index_s")


def build_time_figure(table: pd.DataFrame):
    """Stacked build seconds per config and stage; the embedding bar says whether it was measured now or
    recorded when the texts were first encoded (cache)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for stage in STAGES:
        text = table["embedding_timing"] if stage == "embedding_s" else None
        fig.add_trace(go.Bar(x=table.index, y=table[stage], name=stage.removesuffix("_s"), text=text,
                             textposition="inside" if text is not None else None))
    fig.update_layout(barmode="stack", title="Build time per config (embedding: measured now / from cache / mixed)",
                      yaxis_title="seconds", height=400)
    return fig


def size_figure(table: pd.DataFrame):
    """Table (heap + TOAST) and index bytes per config, in MB, with bytes per chunk in the hover."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for col, name in (("table_bytes", "table"), ("index_bytes", "indexes (HNSW + primary key)")):
        fig.add_trace(go.Bar(x=table.index, y=table[col] / 1e6, name=name,
                             customdata=np.stack([table["n_chunks"], table["bytes_per_chunk"]], axis=1),
                             hovertemplate="%{y:.3f} MB<br>%{customdata[0]} chunks, %{customdata[1]:.0f} bytes/chunk"))
    fig.update_layout(barmode="stack", title="Index size per config (pg_total_relation_size)", yaxis_title="MB",
                      height=400)
    return fig


def tradeoff_figure(table: pd.DataFrame, metric: str = "mrr"):
    """Quality (``metric`` with its 95% CI) against build seconds; marker area ∝ total size."""
    import plotly.graph_objects as go

    lo = table[f"{metric}_ci95"].map(lambda c: c[0])
    hi = table[f"{metric}_ci95"].map(lambda c: c[1])
    size = 12 + 28 * np.sqrt(table["total_bytes"] / table["total_bytes"].max())
    fig = go.Figure(go.Scatter(
        x=table["build_s"], y=table[metric], mode="markers+text", text=table.index, textposition="top center",
        marker=dict(size=size, opacity=0.7),
        error_y=dict(type="data", symmetric=False, array=hi - table[metric], arrayminus=table[metric] - lo),
        customdata=np.stack([table["total_mb"], table["n_chunks"]], axis=1),
        hovertemplate="%{text}<br>" + metric + " %{y:.3f}<br>build %{x:.1f} s<br>%{customdata[0]:.2f} MB, "
                      "%{customdata[1]} chunks<extra></extra>"))
    fig.update_layout(title=f"{metric} vs build time (marker size: index size)", xaxis_title="build seconds",
                      yaxis_title=metric, height=440)
    return fig


def metrics_figure(table: pd.DataFrame):
    """Every quality metric per config with its 95% CI."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for cfg, row in table.iterrows():
        means = [row[m] for m in METRICS]
        fig.add_trace(go.Bar(x=METRICS, y=means, name=cfg, error_y=dict(
            type="data", symmetric=False, array=[row[f"{m}_ci95"][1] - row[m] for m in METRICS],
            arrayminus=[row[m] - row[f"{m}_ci95"][0] for m in METRICS])))
    fig.update_layout(barmode="group", title="Retrieval quality per config (95% CI)", yaxis_range=[0, 1.05], height=420)
    return fig
