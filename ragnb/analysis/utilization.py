"""Chunk utilization (see docs/metrics.md, Analytics): which share of the corpus ever reaches a top-k result.

utilization_rate = |C_used| / |C_all|, C_all = chunks with an embedding (the searchable ones), C_used = chunks
that appear in the top-k of at least one question of the set.

A low rate can mean unreachable or junk chunks (or simply a question set that covers a few topics); a very
high rate together with poor retrieval quality can mean noise in the index. Extras: how often each chunk is
retrieved, the Gini coefficient of those counts (concentration), and never-retrieved chunks per page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ragnb.tiers.real_users import page_of


def gini(counts) -> float:
    """Gini coefficient of non-negative counts x_1..x_n (how unevenly retrievals are spread over chunks).

    G = Σ_{i=1..n} (2i − n − 1) · x_(i) / (n · Σ x),  x_(1) ≤ … ≤ x_(n) sorted ascending
    (equivalently Σ_i Σ_j |x_i − x_j| / (2 n² x̄)).

    0 = every chunk retrieved equally often; (n − 1)/n = all retrievals hit one chunk. NaN when there are no
    chunks or no retrievals at all (undefined). Example: [0, 0, 0, 4] → 0.75; [1, 1, 1, 1] → 0.
    """
    x = np.asarray(counts, dtype=float).ravel()
    if x.size and (np.isnan(x).any() or (x < 0).any()):
        raise ValueError("gini needs non-negative counts without NaN")
    total = x.sum()
    if x.size == 0 or total == 0:
        return float("nan")
    x = np.sort(x)
    i = np.arange(1, x.size + 1)
    return float(((2 * i - x.size - 1) * x).sum() / (x.size * total))


def _check_inputs(ids: list[str], retrieved: Sequence[Sequence[str]], top_k: int | None) -> None:
    if not ids:
        raise ValueError("chunk_ids is empty: the corpus has no embedded chunks; run `ragnb embed --chunks` first")
    if len(set(ids)) != len(ids):
        dup = next(c for c, n in Counter(ids).items() if n > 1)
        raise ValueError(f"chunk id {dup!r} is listed twice in chunk_ids; ids must be unique")
    if isinstance(retrieved, (str, bytes)) or not isinstance(retrieved, Sequence):
        raise ValueError("retrieved must be a list of ranked chunk-id lists, one per question")
    if not retrieved:
        raise ValueError("retrieved is empty: run at least one question")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k = {top_k}; use a positive cut-off or None (lists are already top-k)")


def _tally(retrieved: Sequence[Sequence[str]], known: set[str],
           top_k: int | None) -> tuple[Counter, Counter, dict[str, int], int]:
    """Per chunk: questions retrieving it, questions ranking it first, its best rank; and the deepest list."""
    count: Counter[str] = Counter()
    top1: Counter[str] = Counter()
    best: dict[str, int] = {}
    depth = 0
    for qi, ranked in enumerate(retrieved):
        if isinstance(ranked, (str, bytes)):
            raise ValueError(f"retrieved[{qi}] is a string; give a list of chunk ids")
        ranked = [str(c) for c in ranked][: top_k or None]
        if len(set(ranked)) != len(ranked):
            raise ValueError(f"retrieved[{qi}] lists a chunk twice; a top-k list must not repeat chunks")
        unknown = [c for c in ranked if c not in known]
        if unknown:
            raise ValueError(f"retrieved[{qi}] has chunk {unknown[0]!r}, which is not in chunk_ids; pass every "
                             "searchable chunk (fetch_vectors(db, 'chunks'))")
        depth = max(depth, len(ranked))
        count.update(ranked)
        if ranked:
            top1[ranked[0]] += 1
        for r, c in enumerate(ranked, start=1):
            best[c] = min(best.get(c, r), r)
    return count, top1, best, depth


def chunk_utilization(
    chunk_ids: Sequence[str],
    retrieved: Sequence[Sequence[str]],
    chunk_urls: Mapping[str, str | None] | None = None,
    top_k: int | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Count, for every searchable chunk, the questions whose top-k contains it.

    ``chunk_ids``: all chunks with an embedding (C_all); ``retrieved``: one ranked id list per question
    (already cut to top-k — or pass ``top_k`` to cut here); ``chunk_urls``: chunk id → URL (optional).

    Returns (per-chunk frame indexed by chunk id with ``url``, ``page_id``, ``retrieval_count`` = questions
    retrieving it, ``query_share`` = retrieval_count / questions, ``top1_count``, ``best_rank``, ``used``;
    summary with ``total_chunks``, ``used_chunks``, ``unused_chunks``, ``utilization_rate``, ``n_queries``,
    ``top_k``, ``gini``, ``retrieval_count`` stats and ``max_query_share``).
    """
    ids = [str(c) for c in chunk_ids]
    _check_inputs(ids, retrieved, top_k)
    count, top1, best, depth = _tally(retrieved, set(ids), top_k)

    n_q = len(retrieved)
    urls = chunk_urls or {}
    frame = pd.DataFrame(index=pd.Index(ids, name="chunk_id"))
    url_list = [u if isinstance(u, str) else None for u in (urls.get(c) for c in ids)]
    frame["url"] = pd.array(url_list, dtype=object)
    # page ids from the plain list: a pandas string column turns None into NaN, which is not a URL
    frame["page_id"] = pd.array([page_of(u) for u in url_list], dtype=object)
    frame["retrieval_count"] = np.array([count.get(c, 0) for c in ids], dtype=int)
    frame["query_share"] = frame["retrieval_count"] / n_q
    frame["top1_count"] = np.array([top1.get(c, 0) for c in ids], dtype=int)
    frame["best_rank"] = pd.array([best.get(c) for c in ids], dtype="Int64")
    frame["used"] = frame["retrieval_count"] > 0

    used = int(frame["used"].sum())
    counts = frame["retrieval_count"].to_numpy()
    summary = {
        "total_chunks": len(ids),
        "used_chunks": used,
        "unused_chunks": len(ids) - used,
        "utilization_rate": used / len(ids),
        "n_queries": n_q,
        "top_k": int(top_k) if top_k is not None else depth,
        "gini": gini(counts),
        "retrieval_count": {"mean": float(counts.mean()), "median": float(np.median(counts)),
                            "max": int(counts.max()), "p90": float(np.percentile(counts, 90))},
        "max_query_share": float(frame["query_share"].max()),
    }
    return frame, summary


def unused_by_page(per_chunk: pd.DataFrame) -> pd.DataFrame:
    """Per page (URL page id; chunks without URL grouped as "(no url)"): chunks, unused chunks and the unused
    share, sorted by unused share then size. Pages whose chunks are never retrieved stand out at the top."""
    key = per_chunk["page_id"].fillna("(no url)")
    g = per_chunk.assign(page=key, unused=~per_chunk["used"]).groupby("page", sort=False)
    out = pd.DataFrame({
        "url": g["url"].first(),
        "chunks": g.size(),
        "unused_chunks": g["unused"].sum().astype(int),
        "retrievals": g["retrieval_count"].sum().astype(int),
    })
    out["unused_share"] = out["unused_chunks"] / out["chunks"]
    return out.sort_values(["unused_share", "chunks"], ascending=[False, False])


def count_distribution(per_chunk: pd.DataFrame) -> pd.DataFrame:
    """How many chunks were retrieved 0, 1, 2, … times (``retrieval_count`` → ``chunks``)."""
    vc = per_chunk["retrieval_count"].value_counts().sort_index()
    return pd.DataFrame({"retrieval_count": vc.index.astype(int), "chunks": vc.to_numpy(dtype=int)})
