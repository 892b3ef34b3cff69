"""Top-k retrieval by cosine similarity: pgvector (exact or HNSW) and an exact in-memory index.

Both retrievers answer a batch of query vectors with the same result type, so a tier can switch
backends without changing anything else. Ties are broken by id so results are reproducible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragnb.config import search_memory_mb
from ragnb.progress import reporter
from ragnb.rag.index_build import hnsw_indexes
from ragnb.store.engine import Database
from ragnb.store.models import locate
from ragnb.store.copy import ensure_vector_type
from ragnb.store.vectors import fetch_vectors, vector_literal


@dataclass
class RetrievalResult:
    """Ranked ids and cosine similarities per query, plus per-query latency in milliseconds.

    For batched backends the latency of a query is its batch's wall time divided by the batch size
    (``latency_mode = "amortised"``); single-query calls measure each query (``"per-query"``).
    """

    ids: list[list[str]]
    scores: list[np.ndarray]
    latency_ms: np.ndarray
    backend: str
    latency_mode: str
    info: dict = field(default_factory=dict)

    def as_run(self, query_ids: list[str]) -> dict[str, list[str]]:
        return {q: ids for q, ids in zip(query_ids, self.ids)}


class Retriever(Protocol):
    backend: str

    def search(self, queries: np.ndarray, k: int, batch_size: int = 64) -> RetrievalResult: ...


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def _check_queries(queries: np.ndarray, dim: int, k: int) -> np.ndarray:
    q = np.asarray(queries, dtype=np.float32)
    if q.ndim == 1:
        q = q[None, :]
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"query vectors have shape {q.shape}; expected (n, {dim}) — embed queries with the corpus model")
    if k < 1:
        raise ValueError(f"k = {k}; ask for at least one result")
    return q


def _normalise_rows_in_place(m: np.ndarray, ids: np.ndarray) -> None:
    """Divide each row of the float32 matrix ``m`` by its norm (a zero row stays zero), a slice at a time so the
    norm's squares never cost a second matrix; every norm is checked before any row changes. Each row's result is
    bit-identical to ``_normalise``'s."""
    step = max(1, (32 << 20) // max(1, m.shape[1] * 4))
    norms = np.empty((len(m), 1), dtype=np.float32)
    for start in range(0, len(m), step):
        norms[start:start + step] = np.linalg.norm(m[start:start + step], axis=1, keepdims=True)
    bad = ~np.isfinite(norms[:, 0])
    if bad.any():
        raise ValueError(f"the vector of chunk {ids[int(np.argmax(bad))]!r} holds NaN or infinity; "
                         "re-embed that chunk (`ragnb embed --chunks`) before searching")
    norms[norms == 0] = 1.0
    for start in range(0, len(m), step):
        m[start:start + step] /= norms[start:start + step]


def search_reporter(backend: str, n_queries: int):
    """The progress callback of one search (:mod:`ragnb.progress`), having reported its start; None when nothing
    listens or the search is a single query (a latency probe)."""
    report = reporter(f"searching ({backend})", "queries") if n_queries > 1 else None
    if report is not None:
        report(0, n_queries)
    return report


class MemoryRetriever:
    """Exact cosine top-k over vectors held in memory: one matrix product per batch of queries.

    Memory: the matrix is the only copy of the vectors. A float32 C-contiguous ``vectors`` array is kept as it is
    and **normalised in place** (the caller's array becomes its unit-length rows, zero rows stay zero), unless
    ``copy=True``; any other dtype or layout is converted once (the caller's array is then left untouched).
    Rows (and ``ids``, ``urls``) stay in the caller's order; equal similarities rank by id (also across the k-th
    place: the lower ids enter the top k), through a rank array rather than a reordered copy of the matrix.
    A search holds one similarity block of ``batch × N`` float32, with the batch sized so that the block fits
    ``memory_mb`` (default ``RAGNB_SEARCH_MEMORY_MB``, 512): peak ≈ matrix + budget + one row's indices.
    """

    backend = "memory-exact"

    def __init__(self, ids: list[str], vectors: np.ndarray, urls: list[str | None] | None = None,
                 model: str | None = None, *, copy: bool = False, memory_mb: int | None = None):
        self.model = model  # whose vectors these are, when known (checked against the query encoder)
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
        if len(ids) == 0:
            raise ValueError("the corpus has no embedded chunks; run `ragnb embed --chunks` first")
        self.ids = np.asarray(ids, dtype=object)
        self.urls = None if urls is None else list(urls)
        matrix = (np.array(vectors, dtype=np.float32, order="C") if copy
                  else np.ascontiguousarray(vectors, dtype=np.float32))
        if matrix.ndim != 2:
            raise ValueError(f"vectors have shape {matrix.shape}; expected (n chunks, dimension)")
        _normalise_rows_in_place(matrix, self.ids)
        self.matrix = matrix
        self.dim = matrix.shape[1]
        order = np.argsort(self.ids, kind="stable")  # id order = tie-break order
        # rank[i] = place of row i in id order; None when the rows already are in id order (the usual case).
        self._rank = None if np.array_equal(order, np.arange(len(order))) else np.argsort(order, kind="stable")
        self.memory_mb = search_memory_mb() if memory_mb is None else int(memory_mb)
        if self.memory_mb < 1:
            raise ValueError(f"memory_mb = {memory_mb!r}; give the search's working memory in megabytes (e.g. 512)")

    @classmethod
    def from_db(cls, db: Database, model: str | None = None) -> "MemoryRetriever":
        """Over the chunk vectors of ``model`` (default: the default model's)."""
        ids, urls, vecs = fetch_vectors(db, "chunks", model=model)
        return cls(ids, vecs, urls, model=model)

    def batch_rows(self, batch_size: int = 256) -> int:
        """Queries per matrix product: at most ``batch_size``, and few enough that the ``batch × N`` float32
        similarity block fits the memory budget (at least one query)."""
        fit = (self.memory_mb << 20) // (4 * len(self.ids))
        return int(max(1, min(batch_size, fit)))

    def _top(self, row: np.ndarray, k: int) -> np.ndarray:
        """Positions of the ``k`` best of one similarity row, ordered by (-similarity, id)."""
        n = len(row)
        if k < n:
            # Two pivots: the k-th best and the one just below it tell whether the cut splits a tie.
            idx = np.argpartition(row, (n - k - 1, n - k))
            cand = idx[n - k:]
            cut = row[idx[n - k]]
            if row[idx[n - k - 1]] == cut:  # a tie across the cut: the lowest ids among the tied win
                above = cand[row[cand] > cut]
                tied = self._by_id(np.flatnonzero(row == cut))
                cand = np.concatenate([above, tied[:k - len(above)]])
        else:
            cand = np.arange(n)
        cand = self._by_id(cand)
        return cand[np.argsort(-row[cand], kind="stable")]

    def _by_id(self, positions: np.ndarray) -> np.ndarray:
        if self._rank is None:
            return np.sort(positions)
        return positions[np.argsort(self._rank[positions], kind="stable")]

    def search(self, queries: np.ndarray, k: int, batch_size: int = 256) -> RetrievalResult:
        """Top ``k`` per query; ``batch_size`` queries per matrix product at most (fewer when the memory budget
        asks for it, see :meth:`batch_rows`). One similarity buffer serves every batch."""
        q = _check_queries(queries, self.dim, k)
        if not np.isfinite(q).all():
            raise ValueError("a query vector holds NaN or infinity; check the encoder's output for those questions")
        q = _normalise(q)
        k = min(k, len(self.ids))
        rows = self.batch_rows(batch_size)
        sims = np.empty((min(rows, len(q)), len(self.ids)), dtype=np.float32)
        all_ids: list[list[str]] = []
        all_scores: list[np.ndarray] = []
        latency = np.empty(len(q))
        report = search_reporter(self.backend, len(q))
        for start in range(0, len(q), rows):
            t0 = time.perf_counter()
            block = q[start:start + rows]
            out = np.matmul(block, self.matrix.T, out=sims[:len(block)])
            for row in out:
                top = self._top(row, k)
                all_ids.append(self.ids[top].tolist())
                all_scores.append(row[top].astype(np.float64))
            latency[start:start + len(block)] = (time.perf_counter() - t0) * 1000.0 / len(block)
            if report is not None:
                report(start + len(block), len(q))
        return RetrievalResult(all_ids, all_scores, latency, self.backend, "amortised")


class PgVectorRetriever:
    """Top-k by pgvector's cosine distance ``<=>``.

    ``mode="exact"`` disables index scans (a sequential scan computes every distance); ``"hnsw"`` requires
    an HNSW index and uses it (approximate, ``ef_search`` candidates); ``"auto"`` uses HNSW when one exists.
    ``batch_size`` queries go to the server in one round trip (a LATERAL join over the query array);
    ``batch_size=1`` measures true per-query latency. ``model`` chooses whose vectors are searched (default:
    the default model's); another model's vector table is searched where it lives (the vector store).
    """

    def __init__(self, db: Database, mode: str = "auto", ef_search: int = 40, dim: int | None = None,
                 model: str | None = None):
        if mode not in ("auto", "exact", "hnsw"):
            raise ValueError(f"mode = {mode!r}; use 'auto', 'exact' or 'hnsw'")
        self.db = db
        loc = locate(db, "chunks", model)
        self.model = loc.model
        self._vectors_db = loc.db
        indexes = hnsw_indexes(db, model)
        if mode == "hnsw" and not indexes:
            flag = f" --model {model}" if model else ""
            raise ValueError(f"mode 'hnsw' needs an HNSW index; create one with `ragnb db index{flag}`")
        self.mode = "hnsw" if (mode == "hnsw" or (mode == "auto" and indexes)) else "exact"
        self.ef_search = int(ef_search)
        self.backend = f"pgvector-{self.mode}"
        self.dim = dim if dim is not None else loc.dim
        emb, tid, table = loc.emb_col, loc.id_col, loc.sql_table
        self._sql = (
            f"SELECT q.i, CAST(c.{tid} AS text), 1 - (c.{emb} <=> q.v) FROM "
            f"unnest(CAST(%(vecs)s AS vector[])) WITH ORDINALITY AS q(v, i) "
            f"CROSS JOIN LATERAL (SELECT {tid}, {emb} FROM {table} WHERE {emb} IS NOT NULL "
            f"ORDER BY {emb} <=> q.v, {tid} LIMIT %(k)s) AS c ORDER BY q.i"
        )
        if self.mode == "hnsw":
            # The index scan cannot break ties by id; the outer ORDER keeps the result deterministic.
            self._sql = (
                f"SELECT q.i, CAST(c.{tid} AS text), 1 - c.d FROM "
                f"unnest(CAST(%(vecs)s AS vector[])) WITH ORDINALITY AS q(v, i) "
                f"CROSS JOIN LATERAL (SELECT {tid}, {emb} <=> q.v AS d FROM {table} "
                f"ORDER BY {emb} <=> q.v LIMIT %(k)s) AS c ORDER BY q.i, c.d, c.{tid}"
            )

    def search(self, queries: np.ndarray, k: int, batch_size: int = 64) -> RetrievalResult:
        q = np.asarray(queries, dtype=np.float32)
        q = _check_queries(q, self.dim or q.shape[-1], k)
        ids: list[list[str]] = [[] for _ in range(len(q))]
        scores: list[list[float]] = [[] for _ in range(len(q))]
        latency = np.empty(len(q))
        with self._vectors_db.engine.connect() as conn:
            raw = conn.connection.driver_connection
            with raw.cursor() as cur:
                if self.mode == "exact":
                    cur.execute("SET enable_indexscan = off")
                else:
                    # this transaction only (a session setting is allowed on a read-only database too)
                    cur.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, k)}")
                report = search_reporter(self.backend, len(q))
                for start in range(0, len(q), batch_size):
                    if report is not None:
                        report(start, len(q))
                    block = q[start:start + batch_size]
                    vecs = [vector_literal(v) for v in block]
                    t0 = time.perf_counter()
                    cur.execute(self._sql, {"vecs": vecs, "k": int(k)})
                    rows = cur.fetchall()
                    elapsed = (time.perf_counter() - t0) * 1000.0
                    latency[start:start + len(block)] = elapsed / len(block)
                    for i, cid, sim in rows:
                        ids[start + i - 1].append(cid)
                        scores[start + i - 1].append(float(sim))
            raw.rollback()  # drop the SET before the connection returns to the pool
        if report is not None:
            report(len(q), len(q))
        mode = "per-query" if batch_size == 1 else "amortised"
        return RetrievalResult(ids, [np.asarray(s) for s in scores], latency, self.backend, mode,
                               {"ef_search": self.ef_search} if self.mode == "hnsw" else {})


BACKENDS = ("memory", "pgvector")


def check_backend(backend: str) -> str:
    """``backend`` when it names a retriever (:data:`BACKENDS`), else the one error that lists them."""
    if backend not in BACKENDS:
        raise ValueError(f"backend = {backend!r}; use 'memory' (exact, in-process) or 'pgvector' (in the database)")
    return backend


def build_retriever(backend: str, db: Database, *, dim: int | None = None, index_mode: str = "auto",
                    chunks: tuple[list[str], list[str | None], np.ndarray] | None = None,
                    model: str | None = None) -> Retriever:
    """The retriever a ``backend`` string names, over the chunks of ``db``.

    ``"memory"``: exact cosine in-process over ``chunks`` = ``(ids, urls, vectors)`` as
    :func:`ragnb.store.vectors.fetch_vectors` returns them (read from ``db`` when not given);
    ``"pgvector"``: search in the database with ``index_mode`` auto/exact/hnsw and query dimension ``dim``.
    ``model``: whose chunk vectors (default: the default model's; ``chunks`` must then be that model's).
    """
    check_backend(backend)
    if backend == "memory":
        if chunks is None:
            return MemoryRetriever.from_db(db, model=model)
        ids, urls, vectors = chunks
        return MemoryRetriever(ids, vectors, urls, model=model)
    return PgVectorRetriever(db, mode=index_mode, dim=dim, model=model)


def check_same_model(encoder: Any, retriever: Any) -> None:
    """Queries of one model searched against another model's chunk vectors rank nonsense even when the
    dimensions agree (MiniLM and multilingual-e5-small are both 384-d): an error, never a silent mix."""
    model = getattr(retriever, "model", None)
    name = getattr(encoder, "name", None)
    if model is not None and name is not None and model != name:
        raise ValueError(f"the retriever searches the chunk vectors of model {model!r} but the questions are "
                         f"encoded with {name!r}; search each model's own vectors (build_retriever(..., model="
                         f"{name!r}), or open the corpus with embedding_model={model!r})")


def recall_vs_exact(approx: RetrievalResult, exact: RetrievalResult, k: int) -> float:
    """Mean over queries of |approx top-k ∩ exact top-k| / min(k, |exact top-k|) — how much an ANN index
    loses (a query with fewer than k exact results is judged on those it has)."""
    overlaps = recall_per_query(approx.ids, exact.ids, k)
    return float(np.mean(overlaps)) if len(overlaps) else float("nan")


def recall_per_query(approx: list[list[str]], exact: list[list[str]], k: int) -> np.ndarray:
    """Each query's |approx top-k ∩ exact top-k| / min(k, |exact top-k|): :func:`recall_vs_exact` before the mean
    (the items of its confidence interval)."""
    if len(approx) != len(exact):
        raise ValueError("both results must answer the same queries")
    return np.array([len(set(a[:k]) & set(e[:k])) / max(1, min(k, len(e))) for a, e in zip(approx, exact)])


ANN_RECALL_SAMPLE = 200  # queries whose approximate top-k is checked against exact search
ANN_RECALL_SEED = 0
# Below this, an HNSW run's retrieval metrics describe the index's losses as much as the model: the report says so.
ANN_RECALL_WARN = 0.95


def recall_sample(n_queries: int, n: int = ANN_RECALL_SAMPLE, seed: int = ANN_RECALL_SEED) -> np.ndarray:
    """Positions of the queries checked: all of them when there are at most ``n``, else ``n`` drawn without
    replacement by ``numpy.random.default_rng(seed)``, in ascending order."""
    if n_queries <= n:
        return np.arange(n_queries)
    return np.sort(np.random.default_rng(seed).choice(n_queries, size=n, replace=False))


def ann_recall(retriever: "PgVectorRetriever", queries: np.ndarray, approx: RetrievalResult, k: int,
               n: int = ANN_RECALL_SAMPLE, seed: int = ANN_RECALL_SEED) -> dict:
    """What an HNSW search lost: :func:`recall_vs_exact` at ``k`` of ``approx`` (the index's answer to
    ``queries``) against the exact top ``k`` of the same stored vectors (:func:`exact_top_k`), on
    :func:`recall_sample` of the queries. Returns ``{"ann_recall@k_vs_exact": value, "ann_recall_n": n checked,
    "ann_recall_seed": seed}``; :func:`ann_recall_label` words it."""
    picked = recall_sample(len(queries), n, seed)
    truth = exact_top_k(retriever.db, np.asarray(queries, dtype=np.float32)[picked], k, retriever.model)
    mine = RetrievalResult([approx.ids[i] for i in picked], [approx.scores[i] for i in picked],
                           approx.latency_ms[picked], approx.backend, approx.latency_mode)
    exact = RetrievalResult(truth, [np.zeros(len(t)) for t in truth], np.zeros(len(truth)), "exact", "amortised")
    return {f"ann_recall@{k}_vs_exact": recall_vs_exact(mine, exact, k), "ann_recall_n": int(len(picked)),
            "ann_recall_seed": int(seed)}


EXACT_BLOCK_ROWS = 16384  # stored vectors per block of the streamed exact search (25 MB at 384 dims)


def exact_top_k(db: Database, queries: np.ndarray, k: int, model: str | None = None,
                block_rows: int = EXACT_BLOCK_ROWS) -> list[list[str]]:
    """Exact cosine top ``k`` ids of each query over ``model``'s stored chunk vectors, in one pass over the table
    (a server-side cursor, ``block_rows`` vectors at a time; memory: one block and k candidates per query) —
    for a few hundred queries far cheaper than one sequential scan per query. Equal similarities rank by id;
    a tie across the k-th place inside one block may keep any of the tied ids (recall counts them the same)."""
    return [[rid for _, rid in b] for b in exact_pass(db, queries, k, model, block_rows)]


def exact_pass(db: Database, queries: np.ndarray, k: int, model: str | None = None,
               block_rows: int = EXACT_BLOCK_ROWS) -> list[list[tuple[float, str]]]:
    """:func:`exact_top_k` with each id's negated cosine similarity: ``(−similarity, id)`` pairs, best first."""
    loc = locate(db, "chunks", model)
    q = _normalise(queries)
    best: list[list[tuple[float, str]]] = [[] for _ in range(len(q))]
    sql = f"SELECT CAST({loc.id_col} AS text), {loc.emb_col} FROM {loc.sql_table} WHERE {loc.emb_col} IS NOT NULL"
    with loc.db.engine.connect() as conn:
        raw = conn.connection.driver_connection
        ensure_vector_type(raw)
        with raw.cursor(name="ragnb_exact_top_k", binary=True) as cur:
            cur.itersize = block_rows
            cur.execute(sql)
            while rows := cur.fetchmany(block_rows):
                ids = [r[0] for r in rows]
                block = _normalise(np.stack([r[1].to_numpy() for r in rows]))
                sims = q @ block.T
                top = min(k, len(ids))
                cand = np.argpartition(-sims, top - 1, axis=1)[:, :top]
                for i, row in enumerate(cand):
                    merged = best[i] + [(-float(sims[i, j]), ids[j]) for j in row]
                    best[i] = sorted(merged)[:k]
        raw.rollback()
    return best


def ann_recall_label(info: dict) -> str | None:
    """``ANN recall@10 vs exact, n=200: 0.987`` from the keys :func:`ann_recall` returns; None without them."""
    for key, value in info.items():
        if key.startswith("ann_recall@") and key.endswith("_vs_exact"):
            k = key[len("ann_recall@"):-len("_vs_exact")]
            ci = info.get("ann_recall_ci95")
            return (f"ANN recall@{k} vs exact, n={info.get('ann_recall_n')}: {value:.3f}"
                    + (f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci and np.isfinite(ci).all() else ""))  # n_boot 0: none
    return None


def ann_recall_note(info: dict) -> str | None:
    """A warning when the ANN recall in ``info`` is below :data:`ANN_RECALL_WARN` (None otherwise)."""
    for key, value in info.items():
        if key.startswith("ann_recall@") and key.endswith("_vs_exact") and value < ANN_RECALL_WARN:
            return (f"The HNSW index returned only {value:.0%} of the exact top-k on a sample of "
                    f"{info.get('ann_recall_n')} questions: these retrieval metrics measure the index's losses as much "
                    "as the model. Before comparing models, search exactly (index_mode 'exact', or the memory backend) or "
                    "with a larger candidate list (ef_search; docs/large-corpora.md).")
    return None


def consistency(runs: list[RetrievalResult], k: int) -> np.ndarray:
    """docs/metrics.md, Retrieval, per query: (1/(R−1)) Σ_{r=2..R} 1[top-k of run r = top-k of run 1]."""
    if len(runs) < 2:
        return np.full(len(runs[0].ids) if runs else 0, np.nan)
    first = runs[0].ids
    same = np.array([[r.ids[i][:k] == first[i][:k] for i in range(len(first))] for r in runs[1:]], dtype=float)
    return same.mean(axis=0)
