"""Retrieval metrics equal to trec_eval (pytrec_eval) on tie-free rankings, computed with numpy.

Validate → per query → aggregate. A run and its qrels are turned once into a :class:`RankedGains`
table (arrays over the judged queries); every metric is a small vectorised function of that table.

Inputs
    qrels  ``{query_id: {doc_id: grade}}``, integer grades, ``grade ≥ relevance_level`` = relevant (default
           1, i.e. ``grade > 0``; trec_eval's ``-l N``). nDCG's gains are the positive grades whatever the
           level, as in trec_eval. Negative grades count as 0 gain, as in trec_eval.
    run    ``{query_id: [doc_id, ...]}`` in rank order, or ``{query_id: {doc_id: score}}``. Scores are
           ranked as trec_eval ranks them: score descending, ties by doc id *descending* (byte order of
           the UTF-8 ids = Python's str order), e.g. docs "a" and "b" tied at 1.0 → "b" is rank 1.
           trec_eval holds scores as 32-bit floats, so scores are compared after rounding to float32:
           1.0 and 1.0 + 1e-9 tie (→ doc id order), as do scores beyond ±3.4e38. A ranked list keeps
           exactly the order given. trec_eval ignores the rank column of a run file; so do we.

Where ragnb differs from trec_eval, on purpose
    * A query in qrels but missing from the run scores 0 on every metric; trec_eval drops it, which
      silently raises the mean. ``_info["n_missing_from_run"]`` counts them.
    * A query whose qrels have no relevant doc (no grade ≥ the relevance level) is undefined → NaN on every
      metric, nDCG too, excluded from the mean and counted in ``n_failed``; trec_eval scores it 0 (and, with
      ``-l 2``, still gives its grade-1 docs nDCG gain).
    * Queries in the run but not in qrels are not judged (as in trec_eval); ``_info`` counts them.
    * ``doc_*@k`` metrics (see docs/metrics.md, Retrieval) take the top k chunks, map them to documents and
      deduplicate. ``doc_precision@k`` (= ``docrank_precision@k``) deduplicates the whole ranking, cuts at k
      documents and divides by k, so the chunk size alone cannot move it. ``docrank_*@k`` deduplicate the whole
      ranking first and cut at k documents.
"""
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ragnb.metrics.ranked_gains import (  # noqa: F401  (trec_order and rank_gains are public here too)
    Qrels, RankedGains, Run, check_mapping, rank_gains, trec_order,
)
from ragnb.metrics.registry import canonical_name, default_names, parse_name, register
from ragnb.metrics.stats import aggregate

FAMILY = "retrieval"



def default_metrics() -> list[str]:
    """The retrieval metrics reported by default (Tier 1, :func:`evaluate` without ``metrics``, the TREC
    helpers): those registered with ``default=`` — ``hit_rate@1, @5, @10, mrr, recall@1, @3, @5, @10,
    precision@1, @3, @5, @10, ndcg@5, @10`` — in registration order. Read at each call, so a metric registered
    later (CONTRIBUTING.md, Adding a metric) is reported too."""
    return default_names(FAMILY)


def __getattr__(name: str) -> list[str]:
    # DEFAULT_METRICS, the old constant, kept as a name: now the registry's list (default_metrics()).
    if name == "DEFAULT_METRICS":
        return default_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------
# Metrics. Each returns one float per query; NaN where the query has no relevant doc.


def _defined(t: RankedGains, values: np.ndarray) -> np.ndarray:
    # No relevant doc → recall/nDCG are 0/0; the other metrics are made NaN too so that every
    # metric averages over the same queries.
    return np.where(t.n_rel > 0, values, np.nan)


def _rel_in_top(t: RankedGains, k: int) -> np.ndarray:
    return t.relevant[:, :k].sum(axis=1)


def _dcg(g: np.ndarray, k: int) -> np.ndarray:
    g = g[:, :k]
    return (g / np.log2(np.arange(2, g.shape[1] + 2))).sum(axis=1)


@register("hit_rate", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True,
          default=(1, 5, 10))
def hit_rate(t: RankedGains, k: int) -> np.ndarray:
    """Hit rate@k (trec_eval ``success_k``): 1 if a relevant doc is in the top k, else 0.

    hit_rate@k = 𝟙[ ∃ i ≤ k : rel_i > 0 ]
    """
    return _defined(t, (_rel_in_top(t, k) > 0).astype(float))


@register("mrr", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, default=True)
def mrr(t: RankedGains, k: None = None) -> np.ndarray:
    """Reciprocal rank (trec_eval ``recip_rank``), no cut-off; its mean over queries is MRR.

    rr = 1 / r, r = rank of the first relevant doc (1-based); 0 if no relevant doc is retrieved.
    """
    rr = np.divide(1.0, t.first_rel, out=np.zeros(len(t.first_rel)), where=t.first_rel > 0)
    return _defined(t, rr)


@register("recall", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True,
          default=(1, 3, 5, 10))
def recall(t: RankedGains, k: int) -> np.ndarray:
    """Recall@k (trec_eval ``recall_k``).

    recall@k = |relevant ∩ top-k| / |relevant|, |relevant| = docs with grade > 0 in qrels
    (retrieved or not).
    """
    return _defined(t, _rel_in_top(t, k) / np.maximum(t.n_rel, 1))


@register("precision", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True,
          default=(1, 3, 5, 10))
def precision(t: RankedGains, k: int) -> np.ndarray:
    """Precision@k (trec_eval ``P_k``).

    precision@k = |relevant ∩ top-k| / k — the denominator is k even if fewer than k docs were
    retrieved (a short list is penalised, as in trec_eval).
    """
    return _defined(t, _rel_in_top(t, k) / k)


@register("ndcg", FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True,
          default=(5, 10))
def ndcg(t: RankedGains, k: int) -> np.ndarray:
    """nDCG@k (trec_eval ``ndcg_cut_k``), graded gains.

    DCG@k = Σ_{i=1..k} g_i / log2(i + 1), g_i = max(grade of the doc at rank i, 0);
    IDCG@k = the same sum over the qrels' positive grades sorted descending, cut at k
    (including relevant docs that were not retrieved); nDCG@k = DCG@k / IDCG@k.
    """
    idcg = _dcg(t.ideal, k)
    return _defined(t, np.divide(_dcg(t.gains, k), idcg, out=np.zeros(len(idcg)), where=idcg > 0))


# Document-level variants (see docs/metrics.md, Retrieval, "Document-level variants"). The functions only read
# their table; ``per_query`` builds it, and that is where the two families differ:
#   doc_*@k      the top k retrieved CHUNKS, mapped to documents and deduplicated (≤ k documents);
#   docrank_*@k  the whole chunk ranking mapped and deduplicated first, then cut at k DOCUMENTS;
#   doc_precision@k is read like docrank_ (k documents, divided by k): the chunk size must not move it.
# doc_mrr has no cut-off: rank of the first relevant document in the whole deduplicated ranking (the
# deduplication of a prefix is a prefix of the deduplication, so both readings agree on it).
_DOC_LEVEL: set[str] = set()  # doc_*: cut at k chunks, then deduplicate
_DOC_RANKING: set[str] = set()  # docrank_*: deduplicate, then cut at k documents


def _doc_level(name: str, *, needs_k: bool = False, ranking_variant: bool = True, page_cut: bool = False):
    # page_cut: the metric reads the whole deduplicated ranking and cuts at k documents itself (doc_precision)
    def wrap(fn):
        (_DOC_RANKING if page_cut else _DOC_LEVEL).add(name)
        out = register(name, FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=needs_k)(fn)
        if ranking_variant:
            alias = "docrank_" + name.removeprefix("doc_")
            _DOC_RANKING.add(alias)

            def variant(t: RankedGains, k: int) -> np.ndarray:
                return fn(t, k)

            variant.__doc__ = (fn.__doc__ or "") + (
                "\n\n    docrank_ variant: the table is the whole deduplicated document ranking, cut at k documents.")
            register(alias, FAMILY, kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=needs_k)(variant)
        return out

    return wrap


@_doc_level("doc_hit_rate", needs_k=True)
def doc_hit_rate(t: RankedGains, k: int) -> np.ndarray:
    """Hit rate on documents: 1 if a relevant document is among the documents of the top k chunks.

    doc_hit_rate@k = 𝟙[ ∃ d ∈ D_k : d relevant ], D_k = the distinct documents of the top-k chunks
    (docrank_: the first k distinct documents of the whole ranking).
    """
    return hit_rate(t, k)


@_doc_level("doc_mrr", ranking_variant=False)
def doc_mrr(t: RankedGains, k: None = None) -> np.ndarray:
    """Reciprocal rank of the first relevant *document* in the deduplicated document ranking.

    rr = 1 / r, r = rank after deduplication (see docs/metrics.md, Retrieval); no cut-off.
    """
    return mrr(t)


@_doc_level("doc_recall", needs_k=True)
def doc_recall(t: RankedGains, k: int) -> np.ndarray:
    """Recall on documents: |relevant docs ∩ D_k| / |relevant docs|.

    D_k = the distinct documents of the top-k chunks (docrank_: the first k distinct documents).
    """
    return recall(t, k)


@_doc_level("doc_ndcg", needs_k=True)
def doc_ndcg(t: RankedGains, k: int) -> np.ndarray:
    """nDCG on documents: DCG over D_k in first-occurrence order / IDCG@k; a document's grade = max of its chunks'.

    DCG = Σ_i g_i / log2(i + 1) over D_k (the distinct documents of the top-k chunks, ≤ k of them);
    IDCG@k = the best k document grades of the qrels, as in ndcg@k.
    """
    return ndcg(t, k)


@_doc_level("doc_precision", needs_k=True, page_cut=True)
def doc_precision(t: RankedGains, k: int) -> np.ndarray:
    """Precision on pages (documents) — trec_eval's P_k on the deduplicated document ranking.

    doc_precision@k = |relevant docs ∩ P_k| / k, P_k = the first k distinct documents of the whole chunk
    ranking mapped to documents and deduplicated (fewer than k when the ranking holds fewer; the missing ones
    count as not relevant). Unlike the other doc_*@k it does not cut at k chunks: the pages found in the top k
    chunks, and their number, change with the chunk size alone, so re-chunking the same pages under the same
    page ranking moved the old denominator |D_k| (distinct documents of the top k chunks). Cut at k pages and
    divided by k, it depends on the page ranking only. docrank_precision@k is the same number.
    """
    return _defined(t, _rel_in_top(t, k) / k)


# ---------------------------------------------------------------------------------------------
# Chunk → document conversion (see docs/metrics.md, Retrieval).


def to_doc_run(
    run: Run, chunk_to_doc: Mapping[str, str] | None = None, top_chunks: int | None = None,
) -> dict[str, list[str]]:
    """Map each query's chunk ranking to documents and drop repeats; the first occurrence keeps
    its place (see docs/metrics.md, Retrieval). ``top_chunks=k`` keeps only the top k chunks before mapping
    (the ``doc_*@k`` definition). ``chunk_to_doc=None`` means the ids are already document ids (e.g. each
    retrieved chunk's source url), which are only deduplicated.
    """
    check_mapping(run, "run", "{query_id: [doc_id, ...]} or {query_id: {doc_id: score}}")
    out: dict[str, list[str]] = {}
    for q, ranked in run.items():
        if isinstance(ranked, Mapping):
            try:
                ranked = trec_order(ranked)
            except ValueError as e:
                raise ValueError(f"run[{q!r}]: {e}") from None
        elif not isinstance(ranked, (list, tuple)):
            raise ValueError(f"run[{q!r}] must be a list of doc ids or a dict doc id → score, got {type(ranked).__name__}")
        if top_chunks is not None:
            ranked = ranked[:top_chunks]
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
    check_mapping(qrels, "qrels", "{query_id: {doc_id: grade}}")
    out: dict[str, dict[str, int]] = {}
    for q, judged in qrels.items():
        check_mapping(judged, f"qrels[{q!r}]", "{doc_id: grade}")
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


# The per-item column holding each question's page-level ground truth (what doc_* metrics were scored against):
# two runs that agree on it item by item measured their doc_* metrics on the same truth, whatever their chunks
# (ragnb.runs.comparability).
RELEVANT_PAGES = "relevant_pages"


def relevant_pages(qrels: Qrels, chunk_to_doc: Mapping[str, str] | None, query_ids: Sequence[str]) -> list[str]:
    """Per query id, its relevant documents under ``to_doc_qrels(qrels, chunk_to_doc)`` as one text: ids sorted
    and joined by `` | ``, a grade other than 1 written ``id (grade g)``; "" for a query with none (or none
    judged)."""
    docs = to_doc_qrels({q: qrels[q] for q in query_ids if q in qrels}, chunk_to_doc)
    return [" | ".join(d if g == 1 else f"{d} (grade {g})" for d, g in sorted(docs.get(q, {}).items()) if g > 0)
            for q in query_ids]


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
        raise ValueError("no metrics given; e.g. metrics=default_metrics(), or leave metrics out for those")
    return out


def _max_k(parsed) -> int | None:
    ks = [k for _, _, k in parsed if k is not None]
    return max(ks) if ks else None


def _levels(parsed) -> dict[tuple[str, int | None], list]:
    """Group metrics by the table they read: chunk level; doc_*@k per k (top k chunks → documents);
    docrank_* and doc_mrr on the whole deduplicated ranking (cut None)."""
    groups: dict[tuple[str, int | None], list] = {}
    for p in parsed:
        name, k = p[1].name, p[2]
        if name in _DOC_LEVEL:
            key = ("doc", k)
        elif name in _DOC_RANKING:
            key = ("doc", None)
        else:
            key = ("chunk", None)
        groups.setdefault(key, []).append(p)
    return groups


def per_query(
    run: Run,
    qrels: Qrels,
    metrics: Sequence[str] | None = None,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
    relevance_level: int = 1,
) -> tuple[pd.DataFrame, dict]:
    """Per-query values: (DataFrame indexed by query id with one column per metric, info counts).

    ``doc_*@k`` metrics are computed on ``to_doc_run(run, chunk_to_doc, top_chunks=k)``, ``doc_mrr`` and
    ``docrank_*@k`` on ``to_doc_run(run, chunk_to_doc)``, all with ``to_doc_qrels(qrels, chunk_to_doc)``;
    the others on ``run`` and ``qrels`` as given. ``relevance_level``: the lowest grade that is relevant
    (trec_eval's ``-l``; see :func:`ragnb.metrics.ranked_gains.rank_gains`).
    """
    parsed = _parse(default_metrics() if metrics is None else metrics)  # None: the registry's defaults
    columns: dict[str, np.ndarray] = {}
    info: dict = {}
    index = None
    doc_qrels = None
    for (level, cut), wanted in _levels(parsed).items():
        if level == "chunk":
            r, q = run, qrels
        else:
            doc_qrels = doc_qrels if doc_qrels is not None else to_doc_qrels(qrels, chunk_to_doc)
            r, q = to_doc_run(run, chunk_to_doc, top_chunks=cut), doc_qrels
        table, counts = rank_gains(r, q, _max_k(wanted), relevance_level)
        index = table.query_ids
        info = info or counts  # every level judges the same queries, so their counts agree
        for canon, metric, k in wanted:
            columns[canon] = metric.fn(table, k)
    frame = pd.DataFrame({c: columns[c] for c, _, _ in parsed}, index=pd.Index(index, name="query_id"))
    return frame, info


def evaluate(
    run: Run,
    qrels: Qrels,
    metrics: Sequence[str] | None = None,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    relevance_level: int = 1,
) -> tuple[pd.DataFrame, dict]:
    """Score ``run`` against ``qrels``: (per-query DataFrame, summary).

    summary = ``{metric: aggregate(values)}`` (mean, bootstrap ci95 with ``n_boot`` resamples — none with 0, n,
    n_valid, n_failed) plus ``"_info"``: n_queries (judged), n_unjudged_run_queries (in the run but
    not in qrels: excluded), n_missing_from_run (scored 0), n_no_relevant (NaN). ``relevance_level``: the
    lowest relevant grade (trec_eval's ``-l``, default 1).
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number ≥ 0 of bootstrap resamples (0: no CIs), got {n_boot!r}")
    frame, info = per_query(run, qrels, metrics, chunk_to_doc=chunk_to_doc, relevance_level=relevance_level)
    summary: dict = {c: aggregate(frame[c].to_numpy(), n_boot=n_boot, seed=seed) for c in frame.columns}
    summary["_info"] = info
    return frame, summary


def cutoff_curve(
    run: Run,
    qrels: Qrels,
    bases: tuple[str, ...] = ("hit_rate",),
    top_k: int = 10,
    *,
    chunk_to_doc: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The registered cut-off metrics ``base@k`` for k = 1..top_k, as a table reports them: one row per k, one
    column per base (the mean over the valid queries, as :func:`evaluate`'s ``mean``) and ``n_valid``.

    A chart of ``hit_rate`` against k reads this, so its points at k = 1, 5, 10 are the table's ``hit_rate@1``,
    ``@5``, ``@10``: the same per-query values (:func:`per_query`), the same queries (a query without a relevant
    doc is undefined, excluded and not drawn as a miss).
    """
    if not isinstance(top_k, numbers.Integral) or top_k < 1:
        raise ValueError(f"top_k = {top_k!r}; a curve needs a cut-off ≥ 1")
    names = [canonical_name(parse_name(f"{b}@{k}")[0].name, k) for b in bases for k in range(1, top_k + 1)]
    frame, _ = per_query(run, qrels, names, chunk_to_doc=chunk_to_doc)
    out = pd.DataFrame({"k": np.arange(1, top_k + 1)})
    for base in bases:
        out[base] = [aggregate(frame[f"{base}@{k}"].to_numpy(), n_boot=0)["mean"] for k in out["k"]]
    out["n_valid"] = int(frame[names[0]].notna().sum()) if len(frame) else 0
    return out
