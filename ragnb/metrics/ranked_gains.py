"""The ranked-gains table of a run against its qrels: validation, trec_eval's ranking, and the arrays every
retrieval metric reads (:func:`rank_gains`). The metrics and the entry points are in :mod:`ragnb.metrics.retrieval`,
whose docstring states the input formats and where ragnb differs from trec_eval.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, compress, repeat

import numpy as np

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
    relevant: np.ndarray  # (n, w) bool: the doc at rank i+1 has grade ≥ the relevance level
    ideal: np.ndarray  # (n, w') positive qrels grades sorted descending, zero-padded
    n_rel: np.ndarray  # (n,) docs with grade ≥ the relevance level in qrels
    n_ret: np.ndarray  # (n,) length of the ranked list; 0 if the query is missing from the run
    first_rel: np.ndarray  # (n,) 1-based rank of the first relevant doc at any depth; 0 = none
    in_run: np.ndarray  # (n,) bool



# ---------------------------------------------------------------------------------------------
# trec_eval's order of scored docs.


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


# ---------------------------------------------------------------------------------------------
# Validation and the gains table.


def check_mapping(obj, what: str, shape: str) -> None:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what} must be a dict {shape}, got {type(obj).__name__}")


def _is_finite_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _is_grade(x) -> bool:
    return isinstance(x, numbers.Integral) or (isinstance(x, float) and x.is_integer())


def _qrels_pairs(qrels: Qrels) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """Validate qrels; return (query ids, and for each judgment with a positive grade: query row, doc id, grade)."""
    check_mapping(qrels, "qrels", "{query_id: {doc_id: grade}}")
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
        check_mapping(judged, f"qrels[{q!r}]", "{doc_id: grade}")
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
    check_mapping(run, "run", "{query_id: [doc_id, ...]} or {query_id: {doc_id: score}}")
    bad = None if set(map(type, run)) <= {str} else next((q for q in run if not isinstance(q, str)), None)
    if bad is not None:  # str subclasses (numpy.str_) are valid ids, as in qrels
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


def check_relevance_level(level: int) -> int:
    """``level`` if it is an integer ≥ 1 (trec_eval's ``-l``: a grade below it is not relevant)."""
    if isinstance(level, bool) or not isinstance(level, numbers.Integral) or level < 1:
        raise ValueError(f"relevance level {level!r}: give an integer ≥ 1 (a document is relevant when its grade is "
                         "≥ the level; 1, the default, makes every positive grade relevant)")
    return int(level)


def rank_gains(run: Run, qrels: Qrels, max_k: int | None, relevance_level: int = 1) -> tuple[RankedGains, dict]:
    """Validate ``run`` and ``qrels`` and build the table every metric reads, keeping ranks up to
    ``max_k`` (``None``: only reciprocal rank is needed). Returns (table, info counts).

    ``relevance_level`` (trec_eval's ``-l``): a doc is relevant — for hit rate, MRR, recall, precision and
    whether a query is defined at all — when its grade is ≥ the level. nDCG's gains stay the positive grades
    whatever the level, as in trec_eval."""
    if max_k is not None and (not isinstance(max_k, numbers.Integral) or max_k < 1):
        raise ValueError(f"max_k must be a positive integer or None, got {max_k!r}")
    level = check_relevance_level(relevance_level)
    qids, pair_q, pair_doc, grade = _qrels_pairs(qrels)
    rows, in_run, scored, n_unjudged = _run_rows(run, qids)
    n = len(qids)
    lens = np.fromiter(map(len, rows), dtype=np.int64, count=n)
    find = _scored_positions if scored else _ranked_positions
    pos = find(rows, qids, lens, pair_q, pair_doc)

    is_rel = grade >= level
    hit = pos >= 0
    first_rel = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first_rel, pair_q[hit & is_rel], pos[hit & is_rel] + 1)
    first_rel[first_rel == np.iinfo(np.int64).max] = 0
    n_rel = np.bincount(pair_q[is_rel], minlength=n)

    depth = 0 if max_k is None else int(max_k)
    gains = np.zeros((n, min(depth, int(lens.max(initial=0)))))
    relevant = np.zeros(gains.shape, dtype=bool)
    keep = hit & (pos < gains.shape[1])
    gains[pair_q[keep], pos[keep]] = grade[keep]
    relevant[pair_q[keep], pos[keep]] = is_rel[keep]

    n_pos = np.bincount(pair_q, minlength=n)  # the ideal ranking holds every positive grade
    ideal = np.zeros((n, min(depth, int(n_pos.max(initial=0)))))
    order = np.lexsort((-grade, pair_q))  # by query, grades descending
    slot = np.arange(len(order)) - np.repeat(np.cumsum(n_pos) - n_pos, n_pos)
    keep = slot < ideal.shape[1]
    ideal[pair_q[order][keep], slot[keep]] = grade[order][keep]

    table = RankedGains(qids, gains, relevant, ideal, n_rel, lens, first_rel, in_run)
    info = {
        "n_queries": n,
        "n_unjudged_run_queries": n_unjudged,
        "n_missing_from_run": int(n - in_run.sum()),
        "n_no_relevant": int((n_rel == 0).sum()),
    }
    return table, info
