"""Retrieval metrics equal to trec_eval (pytrec_eval) on tie-free rankings, computed with numpy.

Validate → per query → aggregate. A run and its qrels are turned once into a :class:`RankedGains`
table (arrays over the judged queries); every metric is a small vectorised function of that table.

Inputs
    qrels  ``{query_id: {doc_id: grade}}``, integer grades, ``grade > 0`` = relevant (as trec_eval's
           default ``relevance_level=1``). Negative grades count as 0 gain, as in trec_eval.
    run    ``{query_id: [doc_id, ...]}`` in rank order, or ``{query_id: {doc_id: score}}``. Scores are
           ranked as trec_eval ranks them: score descending, ties by doc id *descending* (byte order of
           the UTF-8 ids = Python's str order), e.g. docs "a" and "b" tied at 1.0 → "b" is rank 1.
           trec_eval holds scores as 32-bit floats, so scores are compared after rounding to float32:
           1.0 and 1.0 + 1e-9 tie (→ doc id order), as do scores beyond ±3.4e38. A ranked list keeps
           exactly the order given. trec_eval ignores the rank column of a run file; so do we.

Where ragnb differs from trec_eval, on purpose
    * A query in qrels but missing from the run scores 0 on every metric; trec_eval drops it, which
      silently raises the mean. ``_info["n_missing_from_run"]`` counts them.
    * A query whose qrels have no relevant doc (all grades ≤ 0) is undefined → NaN, excluded from the
      mean and counted in ``n_failed``; trec_eval scores it 0.
    * Queries in the run but not in qrels are not judged (as in trec_eval); ``_info`` counts them.
    * ``doc_*`` metrics (seed 004) first map chunks to documents and deduplicate the ranking;
      ``doc_precision@k`` divides by the number of unique documents in the top k, not by k.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, compress, repeat

import numpy as np
import pandas as pd

from ragnb.metrics.registry import canonical_name, parse_name, register
from ragnb.metrics.stats import aggregate

FAMILY = "retrieval"

DEFAULT_METRICS: list[str] = [
    "hit_rate@1", "hit_rate@5", "hit_rate@10", "mrr",
    "recall@1", "recall@3", "recall@5", "recall@10",
    "precision@1", "precision@3", "precision@5", "precision@10",
    "ndcg@5", "ndcg@10",
]  # fmt: skip

Run = Mapping[str, "list[str] | Mapping[str, float]"]
Qrels = Mapping[str, Mapping[str, int]]

# Bounds the (pairs × list length) comparison blocks to ~32 MB whatever the run's shape.
_BLOCK_CELLS = 1 << 22
# Ranked ids per batch in _ranked_positions (~a few MB of sets), and the number of relevant docs
# found in one list beyond which a doc → rank dict replaces repeated list.index scans.
_SET_CELLS = 1 << 13
_INDEX_SCANS = 16


@dataclass(frozen=True)
class RankedGains:
    """Everything the retrieval metrics need, one row per judged query (qrels order).

    ``gains`` and ``ideal`` are stored only to the largest cut-off asked for; slicing ``[:, :k]``
    past their width is harmless because the missing columns would be zeros.
    """

    query_ids: list[str]
    gains: np.ndarray  # (n, w) max(grade, 0) of the doc at rank i+1; 0 = non-relevant or unjudged
    ideal: np.ndarray  # (n, w') positive qrels grades sorted descending, zero-padded
    n_rel: np.ndarray  # (n,) docs with grade > 0 in qrels
    n_ret: np.ndarray  # (n,) length of the ranked list; 0 if the query is missing from the run
    first_rel: np.ndarray  # (n,) 1-based rank of the first relevant doc at any depth; 0 = none
    in_run: np.ndarray  # (n,) bool


# ---------------------------------------------------------------------------------------------
# Metrics. Each returns one float per query; NaN where the query has no relevant doc.


def _defined(t: RankedGains, values: np.ndarray) -> np.ndarray:
    # No relevant doc → recall/nDCG are 0/0; the other metrics are made NaN too so that every
    # metric averages over the same queries.
    return np.where(t.n_rel > 0, values, np.nan)


def _rel_in_top(t: RankedGains, k: int) -> np.ndarray:
    return (t.gains[:, :k] > 0).sum(axis=1)


def _dcg(g: np.ndarray, k: int) -> np.ndarray:
    g = g[:, :k]
    return (g / np.log2(np.arange(2, g.shape[1] + 2))).sum(axis=1)


@register("hit_rate", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True)
def hit_rate(t: RankedGains, k: int) -> np.ndarray:
    """Hit rate@k (trec_eval ``success_k``): 1 if a relevant doc is in the top k, else 0.

    hit_rate@k = 𝟙[ ∃ i ≤ k : rel_i > 0 ]
    """
    return _defined(t, (_rel_in_top(t, k) > 0).astype(float))


@register("mrr", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True)
def mrr(t: RankedGains, k: None = None) -> np.ndarray:
    """Reciprocal rank (trec_eval ``recip_rank``), no cut-off; its mean over queries is MRR.

    rr = 1 / r, r = rank of the first relevant doc (1-based); 0 if no relevant doc is retrieved.
    """
    rr = np.divide(1.0, t.first_rel, out=np.zeros(len(t.first_rel)), where=t.first_rel > 0)
    return _defined(t, rr)


@register("recall", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True)
def recall(t: RankedGains, k: int) -> np.ndarray:
    """Recall@k (trec_eval ``recall_k``).

    recall@k = |relevant ∩ top-k| / |relevant|, |relevant| = docs with grade > 0 in qrels
    (retrieved or not).
    """
    return _defined(t, _rel_in_top(t, k) / np.maximum(t.n_rel, 1))


@register("precision", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True)
def precision(t: RankedGains, k: int) -> np.ndarray:
    """Precision@k (trec_eval ``P_k``).

    precision@k = |relevant ∩ top-k| / k — the denominator is k even if fewer than k docs were
    retrieved (a short list is penalised, as in trec_eval).
    """
    return _defined(t, _rel_in_top(t, k) / k)


@register("ndcg", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True)
def ndcg(t: RankedGains, k: int) -> np.ndarray:
    """nDCG@k (trec_eval ``ndcg_cut_k``), graded gains.

    DCG@k = Σ_{i=1..k} g_i / log2(i + 1), g_i = max(grade of the doc at rank i, 0);
    IDCG@k = the same sum over the qrels' positive grades sorted descending, cut at k
    (including relevant docs that were not retrieved); nDCG@k = DCG@k / IDCG@k.
    """
    idcg = _dcg(t.ideal, k)
    return _defined(t, np.divide(_dcg(t.gains, k), idcg, out=np.zeros(len(idcg)), where=idcg > 0))


# Document-level variants (seed 004). ``per_query``/``evaluate`` build their table from the
# deduplicated document ranking (``to_doc_run``) and document qrels (``to_doc_qrels``).
_DOC_LEVEL: set[str] = set()


def _doc_level(name: str, *, needs_k: bool = False):
    def wrap(fn):
        _DOC_LEVEL.add(name)
        return register(name, FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=needs_k)(fn)

    return wrap


@_doc_level("doc_hit_rate", needs_k=True)
def doc_hit_rate(t: RankedGains, k: int) -> np.ndarray:
    """hit_rate@k over the deduplicated document ranking with document qrels (see ``to_doc_run``).

    Differs from trec_eval only in its input: chunks are mapped to documents and repeats dropped.
    """
    return hit_rate(t, k)


@_doc_level("doc_mrr")
def doc_mrr(t: RankedGains, k: None = None) -> np.ndarray:
    """Reciprocal rank of the first relevant *document* in the deduplicated document ranking.

    rr = 1 / r, r = rank after deduplication (seed 004: "找到第一个相关文档在去重后的排名").
    """
    return mrr(t)


@_doc_level("doc_recall", needs_k=True)
def doc_recall(t: RankedGains, k: int) -> np.ndarray:
    """recall@k over the deduplicated document ranking: relevant docs in top k / relevant docs."""
    return recall(t, k)


@_doc_level("doc_ndcg", needs_k=True)
def doc_ndcg(t: RankedGains, k: int) -> np.ndarray:
    """nDCG@k over the deduplicated document ranking; a document's grade = max of its chunks'."""
    return ndcg(t, k)


@_doc_level("doc_precision", needs_k=True)
def doc_precision(t: RankedGains, k: int) -> np.ndarray:
    """Seed-004 precision@k over the deduplicated document ranking — NOT trec_eval's P_k.

    doc_precision@k = |relevant docs ∩ top-k| / |unique docs in top-k| = hits / min(n_docs, k);
    0 if nothing was retrieved. A short list is not penalised (trec_eval divides by k).
    """
    shown = np.minimum(t.n_ret, k)
    return _defined(t, np.divide(_rel_in_top(t, k), shown, out=np.zeros(len(shown)), where=shown > 0))


# ---------------------------------------------------------------------------------------------
# Chunk → document conversion (seed 004).


def _as_float32(values) -> np.ndarray:
    """Scores as trec_eval holds them (C ``float``): rounded to float32; beyond ±3.4e38 → ±inf."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=float).astype(np.float32)


def _trec_sorted(scores: Mapping[str, float]) -> list[str]:
    return [d for _, d in sorted(zip(_as_float32(list(scores.values())).tolist(), scores), reverse=True)]


def trec_order(scores: Mapping[str, float]) -> list[str]:
    """Doc ids of a ``{doc_id: score}`` dict in trec_eval's order: score desc (compared as float32,
    as trec_eval stores them), then doc id desc."""
    for doc, s in scores.items():
        if not _is_finite_number(s):
            raise ValueError(f"score {s!r} of doc {doc!r} is not a finite number; give it a real score or drop it")
    return _trec_sorted(scores)


def to_doc_run(run: Run, chunk_to_doc: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Map each query's chunk ranking to documents and drop repeats; the first occurrence keeps
    its place (seed 004: dedup by document before ranking). ``chunk_to_doc=None`` means the ids are
    already document ids (e.g. each retrieved chunk's source url), which are only deduplicated.
    """
    _check_mapping(run, "run", "{query_id: [doc_id, ...]} or {query_id: {doc_id: score}}")
    out: dict[str, list[str]] = {}
    for q, ranked in run.items():
        if isinstance(ranked, Mapping):
            try:
                ranked = trec_order(ranked)
            except ValueError as e:
                raise ValueError(f"run[{q!r}]: {e}") from None
        elif not isinstance(ranked, (list, tuple)):
            raise ValueError(f"run[{q!r}] must be a list of doc ids or a dict doc id → score, got {type(ranked).__name__}")
        if chunk_to_doc is not None:
            try:
                ranked = [chunk_to_doc[c] for c in ranked]
            except KeyError as e:
                raise ValueError(
                    f"run[{q!r}] retrieves chunk {e.args[0]!r}, which chunk_to_doc does not map to a document; "
                    "add it to the mapping"
                ) from None
        out[q] = list(dict.fromkeys(ranked))
    return out


def to_doc_qrels(qrels: Qrels, chunk_to_doc: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Chunk qrels → document qrels; a document's grade is the max grade of its judged chunks."""
    _check_mapping(qrels, "qrels", "{query_id: {doc_id: grade}}")
    out: dict[str, dict[str, int]] = {}
    for q, judged in qrels.items():
        _check_mapping(judged, f"qrels[{q!r}]", "{doc_id: grade}")
        docs: dict[str, int] = {}
        for chunk, grade in judged.items():
            if chunk_to_doc is None:
                doc = chunk
            elif chunk in chunk_to_doc:
                doc = chunk_to_doc[chunk]
            else:
                raise ValueError(
                    f"qrels[{q!r}] judges {chunk!r}, which chunk_to_doc does not map to a document; add it, or, "
                    "if these qrels are already document-level, score doc_* metrics on to_doc_run(run, chunk_to_doc) "
                    "without chunk_to_doc"
                )
            docs[doc] = max(docs[doc], grade) if doc in docs else grade
        out[q] = docs
    return out


# ---------------------------------------------------------------------------------------------
# Validation and the gains table.


def _check_mapping(obj, what: str, shape: str) -> None:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what} must be a dict {shape}, got {type(obj).__name__}")


def _is_finite_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _is_grade(x) -> bool:
    return isinstance(x, numbers.Integral) or (isinstance(x, float) and x.is_integer())


def _qrels_pairs(qrels: Qrels) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """Validate qrels; return (query ids, and for each relevant judgment: query row, doc id, grade)."""
    _check_mapping(qrels, "qrels", "{query_id: {doc_id: grade}}")
    if not qrels:
        raise ValueError("qrels is empty: there is nothing to evaluate; give at least one judged query")
    qids, judged = list(qrels), list(qrels.values())
    # Type checks run in C over whole columns; the slow loop only runs to name the culprit.
    plain = set(map(type, qids)) <= {str} and set(map(type, judged)) <= {dict}
    if plain:
        docs = list(chain.from_iterable(judged))
        values = list(chain.from_iterable(map(dict.values, judged)))
        plain = set(map(type, docs)) <= {str} and set(map(type, values)) <= {int, bool}
    if not plain:
        _explain_bad_qrels(qrels)  # raises on a real problem
        judged = [{d: int(g) for d, g in j.items()} for j in judged]  # numpy ints, 2.0, dict subclasses
        docs = list(chain.from_iterable(judged))
        values = list(chain.from_iterable(map(dict.values, judged)))
    grades = np.array(values, dtype=float)
    rows = np.repeat(np.arange(len(qids)), np.fromiter(map(len, judged), dtype=np.int64, count=len(judged)))
    rel = grades > 0
    rel_docs = list(compress(docs, rel.tolist()))
    return qids, rows[rel], rel_docs, grades[rel]


def _explain_bad_qrels(qrels: Qrels) -> None:
    for q, judged in qrels.items():
        if not isinstance(q, str):
            raise ValueError(f"qrels query id {q!r} is a {type(q).__name__}; query ids must be strings (use str())")
        _check_mapping(judged, f"qrels[{q!r}]", "{doc_id: grade}")
        for d, g in judged.items():
            if not isinstance(d, str):
                raise ValueError(f"qrels[{q!r}] doc id {d!r} is a {type(d).__name__}; doc ids must be strings")
            if not _is_grade(g):
                raise ValueError(
                    f"qrels[{q!r}][{d!r}] = {g!r} is not an integer relevance grade; "
                    "use integers such as 0, 1, 2 (> 0 = relevant)"
                )
    # Only exotic-but-valid types (numpy ints, integral floats, dict subclasses) get here.


def _run_rows(run: Run, qids: list[str]) -> tuple[list, np.ndarray, bool, int]:
    """Align the run to the qrels' queries: (lists or dicts, empty where the query is missing from
    the run; in_run; is_scored; n_unjudged_queries)."""
    _check_mapping(run, "run", "{query_id: [doc_id, ...]} or {query_id: {doc_id: score}}")
    if not set(map(type, run)) <= {str}:
        bad = next(q for q in run if not isinstance(q, str))
        raise ValueError(f"run query id {bad!r} is a {type(bad).__name__}; query ids must be strings (use str())")
    kinds = set(map(type, run.values()))
    scored = bool(kinds) and all(issubclass(k, Mapping) for k in kinds)
    if not scored and not all(issubclass(k, (list, tuple)) for k in kinds):
        bad = next(((q, v) for q, v in run.items() if not isinstance(v, (list, tuple, Mapping))), None)
        if bad is None:  # only lists and dicts, mixed
            q = next(q for q, v in run.items() if isinstance(v, Mapping))
            raise ValueError(f"run mixes ranked lists and score dicts (e.g. run[{q!r}]); use one form for all queries")
        q, v = bad
        raise ValueError(
            f"run[{q!r}] is a {type(v).__name__}; give a list of doc ids in rank order or a dict doc id → score"
            + (" (convert arrays with .tolist())" if isinstance(v, np.ndarray) else "")
        )
    in_run = np.fromiter(map(run.__contains__, qids), dtype=bool, count=len(qids))
    rows = list(map(run.get, qids, repeat({} if scored else [])))  # one shared, never-mutated empty
    if scored and not kinds <= {dict}:
        rows = [r if type(r) is dict else dict(r) for r in rows]
    elif not scored and not kinds <= {list}:
        rows = [r if type(r) is list else list(r) for r in rows]  # tuples → lists (list.index)
    n_unjudged = len(run) - int(in_run.sum())
    # Checking every id's type would cost a pass over all ids; the first one per query catches the
    # usual mistake (int ids in the run, str ids in qrels → silently all zeros). Checked in C; the
    # loop below only runs to name the culprit.
    filled = list(filter(None, rows))
    firsts = list(map(next, map(iter, filled)))
    first_scores = list(map(dict.__getitem__, filled, firsts)) if scored else []
    if not (set(map(type, firsts)) <= {str} and set(map(type, first_scores)) <= {float, int}):
        for q, r in zip(qids, rows):
            if r:
                first = next(iter(r))
                if not isinstance(first, str):
                    raise ValueError(
                        f"run[{q!r}] has doc id {first!r} of type {type(first).__name__}; doc ids must be strings"
                    )
                if scored and not _is_finite_number(r[first]):
                    raise ValueError(f"run[{q!r}][{first!r}] score {r[first]!r} is not a finite number")
    return rows, in_run, scored, n_unjudged


def _length_groups(lens: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Queries whose lists have the same length L form a dense (rows × L) block — no padding, so a
    few very long lists cannot blow up memory."""
    order = np.argsort(lens, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(lens[order])) + 1):
        if len(rows) and lens[rows[0]] > 0:
            yield int(lens[rows[0]]), rows


def _block(flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray, width: int) -> np.ndarray:
    if rows[-1] - rows[0] + 1 == len(rows) and np.all(np.diff(rows) == 1):  # contiguous → a view
        return flat[offsets[rows[0]] : offsets[rows[-1]] + width].reshape(len(rows), width)
    return flat[offsets[rows][:, None] + np.arange(width)]


def _pair_chunks(pairs: np.ndarray, width: int) -> Iterator[np.ndarray]:
    step = max(1, _BLOCK_CELLS // width)
    for i in range(0, len(pairs), step):
        yield pairs[i : i + step]


def _batches(lens: np.ndarray, cells: int) -> Iterator[tuple[int, int]]:
    """Consecutive query ranges [b0, b1) holding about ``cells`` ranked ids each (at least one query)."""
    cum = np.concatenate([[0], np.cumsum(lens)])
    b0, n = 0, len(lens)
    while b0 < n:
        b1 = min(n, max(b0 + 1, int(np.searchsorted(cum, cum[b0] + cells, side="right")) - 1))
        yield b0, b1
        b0 = b1


def _ranked_positions(rows: list, qids, lens, pair_q, pair_doc) -> np.ndarray:
    """0-based rank of each relevant doc in its query's list (−1 = not retrieved); rejects repeats.

    Per batch of queries, in C: ``set(list)`` finds repeats (the set is smaller than the list), set
    membership finds the retrieved relevant docs and ``list.index`` their rank — ids are compared as
    strings, never by hash alone. Small batches bound the sets' memory and keep the lists' strings
    in cache for ``index``. ``pair_q`` is sorted (qrels order)."""
    n = len(rows)
    start = np.searchsorted(pair_q, np.arange(n + 1)).tolist()
    pos = np.full(len(pair_q), -1, dtype=np.int64)
    for b0, b1 in _batches(lens, _SET_CELLS):
        batch = rows[b0:b1]
        try:
            sets = list(map(set, batch))
        except TypeError:
            for i, r in enumerate(batch):
                for j, d in enumerate(r):
                    if not isinstance(d, str):
                        raise ValueError(
                            f"run[{qids[b0 + i]!r}] rank {j + 1}: doc id {d!r} is a {type(d).__name__}; use strings"
                        ) from None
            raise
        repeated = np.flatnonzero(np.fromiter(map(len, sets), dtype=np.int64, count=b1 - b0) != lens[b0:b1])
        for i in repeated.tolist():
            _raise_if_repeated(qids[b0 + i], batch[i])
        p0, p1 = start[b0], start[b1]
        if p0 == p1:
            continue
        q_local = (pair_q[p0:p1] - b0).tolist()
        docs = pair_doc[p0:p1]
        found = np.fromiter(map(set.__contains__, map(sets.__getitem__, q_local), docs), dtype=bool, count=p1 - p0)
        hit = np.flatnonzero(found)
        if not len(hit):
            continue
        hit_q = np.asarray(q_local)[hit]
        # list.index scans from the top: fine for a few relevant docs per query; a query with many
        # found relevant docs gets a doc → rank dict instead, so the cost never turns quadratic.
        many = np.bincount(hit_q, minlength=b1 - b0) > _INDEX_SCANS
        if many.any():
            rank_of = {i: dict(zip(batch[i], range(len(batch[i])))) for i in np.flatnonzero(many).tolist()}
            for j, i in zip(hit.tolist(), hit_q.tolist()):
                if i in rank_of:
                    pos[p0 + j] = rank_of[i][docs[j]]
            hit = hit[~many[hit_q]]
            hit_q = hit_q[~many[hit_q]]
        hit_l = hit.tolist()
        pos[p0 + hit] = np.fromiter(
            map(list.index, map(batch.__getitem__, hit_q.tolist()), map(docs.__getitem__, hit_l)),
            dtype=np.int64, count=len(hit_l),
        )
    return pos


def _raise_if_repeated(q: str, ranked) -> None:
    seen: dict = {}
    for i, d in enumerate(ranked):
        if d in seen:
            raise ValueError(
                f"run[{q!r}] lists doc {d!r} twice (ranks {seen[d] + 1} and {i + 1}); a ranked list must not repeat "
                "a doc — deduplicate it, or use the doc_* metrics, which rank documents after deduplication"
            )
        seen[d] = i


def _scored_positions(rows: list, qids, lens, pair_q, pair_doc) -> np.ndarray:
    """0-based trec_eval rank of each relevant doc (−1 = not retrieved) without sorting the run:
    rank = #docs with a higher score, scores compared as float32 like trec_eval; a query where a
    relevant doc's score is tied is ranked in full (score desc, doc id desc)."""
    dicts = rows
    try:
        flat = np.fromiter(chain.from_iterable(map(dict.values, dicts)), dtype=float, count=int(lens.sum()))
    except (TypeError, ValueError):
        flat = np.array([np.nan])  # fall through to the explanation below
    if not np.isfinite(flat).all():
        for q, r in zip(qids, dicts):
            for d, s in r.items():
                if not _is_finite_number(s):
                    raise ValueError(f"run[{q!r}][{d!r}] score {s!r} is not a finite number; give a real score or drop the doc")
        raise ValueError("run scores could not be read as numbers; use int or float scores")
    flat = _as_float32(flat)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    # dict.get gives None for a doc the run did not retrieve, which numpy reads as NaN.
    score = np.array(list(map(dict.get, map(dicts.__getitem__, pair_q.tolist()), pair_doc)), dtype=float)
    score = _as_float32(score)
    pos = np.full(len(pair_q), -1, dtype=np.int64)
    retrieved = ~np.isnan(score)
    pairs_by_len = np.argsort(lens[pair_q], kind="stable")
    pairs_by_len = pairs_by_len[retrieved[pairs_by_len]]
    pair_lens = lens[pair_q][pairs_by_len]
    tied: list[int] = []
    for width, group in _length_groups(lens):
        block = _block(flat, offsets, group, width)
        row_in_block = np.empty(len(lens), dtype=np.int64)
        row_in_block[group] = np.arange(len(group))
        lo, hi = np.searchsorted(pair_lens, [width, width + 1])
        for chunk in _pair_chunks(pairs_by_len[lo:hi], width):
            b, s = block[row_in_block[pair_q[chunk]]], score[chunk, None]
            pos[chunk] = np.count_nonzero(b > s, axis=1)
            tied.extend(chunk[np.count_nonzero(b == s, axis=1) > 1].tolist())
    ranks: dict[int, dict[str, int]] = {}
    for j in tied:  # rare on real scores: trec_eval puts the larger doc id first
        q = int(pair_q[j])
        if q not in ranks:
            order = _trec_sorted(dicts[q])
            ranks[q] = dict(zip(order, range(len(order))))
        pos[j] = ranks[q][pair_doc[j]]
    return pos


def rank_gains(run: Run, qrels: Qrels, max_k: int | None) -> tuple[RankedGains, dict]:
    """Validate ``run`` and ``qrels`` and build the table every metric reads, keeping ranks up to
    ``max_k`` (``None``: only reciprocal rank is needed). Returns (table, info counts)."""
    if max_k is not None and (not isinstance(max_k, numbers.Integral) or max_k < 1):
        raise ValueError(f"max_k must be a positive integer or None, got {max_k!r}")
    qids, pair_q, pair_doc, grade = _qrels_pairs(qrels)
    rows, in_run, scored, n_unjudged = _run_rows(run, qids)
    n = len(qids)
    lens = np.fromiter(map(len, rows), dtype=np.int64, count=n)
    find = _scored_positions if scored else _ranked_positions
    pos = find(rows, qids, lens, pair_q, pair_doc)

    hit = pos >= 0
    first_rel = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first_rel, pair_q[hit], pos[hit] + 1)
    first_rel[first_rel == np.iinfo(np.int64).max] = 0
    n_rel = np.bincount(pair_q, minlength=n)

    depth = 0 if max_k is None else int(max_k)
    gains = np.zeros((n, min(depth, int(lens.max(initial=0)))))
    keep = hit & (pos < gains.shape[1])
    gains[pair_q[keep], pos[keep]] = grade[keep]

    ideal = np.zeros((n, min(depth, int(n_rel.max(initial=0)))))
    order = np.lexsort((-grade, pair_q))  # by query, grades descending
    slot = np.arange(len(order)) - np.repeat(np.cumsum(n_rel) - n_rel, n_rel)
    keep = slot < ideal.shape[1]
    ideal[pair_q[order][keep], slot[keep]] = grade[order][keep]

    table = RankedGains(qids, gains, ideal, n_rel, lens, first_rel, in_run)
    info = {
        "n_queries": n,
        "n_unjudged_run_queries": n_unjudged,
        "n_missing_from_run": int(n - in_run.sum()),
        "n_no_relevant": int((n_rel == 0).sum()),
    }
    return table, info


# ---------------------------------------------------------------------------------------------
# Entry points.

_CUTOFF = re.compile(r"@(.*)$")


def _parse(names: list[str]) -> list[tuple[str, object, int | None]]:
    if isinstance(names, str):
        raise ValueError(f"metrics must be a list of names such as ['ndcg@10', 'mrr'], got the string {names!r}")
    out, seen = [], set()
    for name in names:
        m = _CUTOFF.search(str(name))
        if m and not m.group(1).isdigit():
            raise ValueError(f"metric {name!r}: the cut-off must be a positive integer, e.g. '{name.split('@')[0]}@10'")
        metric, k = parse_name(str(name))
        if metric.family != FAMILY:
            raise ValueError(f"metric {name!r} is a {metric.family} metric, not a retrieval metric")
        canon = canonical_name(metric.name, k)
        if canon not in seen:
            seen.add(canon)
            out.append((canon, metric, k))
    if not out:
        raise ValueError("no metrics given; e.g. metrics=DEFAULT_METRICS")
    return out


def _max_k(parsed) -> int | None:
    ks = [k for _, _, k in parsed if k is not None]
    return max(ks) if ks else None


def per_query(
    run: Run,
    qrels: Qrels,
    metrics: list[str] = DEFAULT_METRICS,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Per-query values: (DataFrame indexed by query id with one column per metric, info counts).

    ``doc_*`` metrics are computed on ``to_doc_run(run, chunk_to_doc)`` and
    ``to_doc_qrels(qrels, chunk_to_doc)``; the others on ``run`` and ``qrels`` as given.
    """
    parsed = _parse(metrics)
    levels = {"chunk": [p for p in parsed if p[1].name not in _DOC_LEVEL], "doc": [p for p in parsed if p[1].name in _DOC_LEVEL]}
    columns: dict[str, np.ndarray] = {}
    info: dict = {}
    index = None
    for level, wanted in levels.items():
        if not wanted:
            continue
        r, q = (run, qrels) if level == "chunk" else (to_doc_run(run, chunk_to_doc), to_doc_qrels(qrels, chunk_to_doc))
        table, counts = rank_gains(r, q, _max_k(wanted))
        index = table.query_ids
        info = info or counts  # both levels judge the same queries, so their counts agree
        for canon, metric, k in wanted:
            columns[canon] = metric.fn(table, k)
    frame = pd.DataFrame({c: columns[c] for c, _, _ in parsed}, index=pd.Index(index, name="query_id"))
    return frame, info


def evaluate(
    run: Run,
    qrels: Qrels,
    metrics: list[str] = DEFAULT_METRICS,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Score ``run`` against ``qrels``: (per-query DataFrame, summary).

    summary = ``{metric: aggregate(values)}`` (mean, bootstrap ci95 with ``n_boot`` resamples, n,
    n_valid, n_failed) plus ``"_info"``: n_queries (judged), n_unjudged_run_queries (in the run but
    not in qrels: excluded), n_missing_from_run (scored 0), n_no_relevant (NaN).
    """
    if not isinstance(n_boot, numbers.Integral) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer (bootstrap resamples), got {n_boot!r}")
    frame, info = per_query(run, qrels, metrics, chunk_to_doc=chunk_to_doc)
    summary: dict = {c: aggregate(frame[c].to_numpy(), n_boot=n_boot, seed=seed) for c in frame.columns}
    summary["_info"] = info
    return frame, summary
