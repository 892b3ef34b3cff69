"""TREC interop: read and write run and qrels files, and score any run file against any qrels file.

Formats (whitespace-separated columns, one judgment or retrieved doc per line)
    run     ``qid Q0 docid rank score tag``   — trec_eval ranks by score (desc), ties by docid (desc),
            and ignores the rank column; so does ragnb. Text after the sixth column is ignored, as trec_eval
            ignores it (its own test file ``results.trunc`` has some); :func:`read_run` notes how many lines had it.
    qrels   ``qid iteration docid relevance``  — TREC; or BEIR's TSV ``query-id<TAB>corpus-id<TAB>score``
            with that header line. Relevance is an integer; ≥ the relevance level (default 1, trec_eval's
            ``-l``) is relevant.

ragnb's own rankings (``ragnb retrieve``) are written in the order ragnb evaluated them — ties broken by chunk id
ascending, as Tier 1 scores them — with scores that strictly decrease down the list (see :func:`strictly_decreasing`),
so trec_eval, ``ragnb metrics retrieval`` and Tier 1 all read the same ranking.

Ids cannot contain whitespace in these formats: writing one is an error, never a silently broken file.
Files are written atomically (a temp file, then a rename): a crash never leaves half a run file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ragnb.metrics.ranked_gains import check_relevance_level
from ragnb.metrics.retrieval import evaluate, trec_order
from ragnb.io import atomic_write_text

Run = Mapping[str, "list[str] | Mapping[str, float]"]
Qrels = Mapping[str, Mapping[str, int]]

_BEIR_HEADER = ("query-id", "corpus-id", "score")


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: file not found")
    with p.open(encoding="utf-8") as fh:
        try:
            for lineno, line in enumerate(fh, start=1):
                fields = line.split()
                if fields and not fields[0].startswith("#"):
                    yield lineno, fields
        except UnicodeDecodeError as exc:
            raise ValueError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def _int_grade(text: str, path, lineno: int, field: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():
        raise ValueError(f"{path}: line {lineno}, field '{field}': {text!r} is not an integer relevance grade "
                         "(use 0, 1, 2, …; > 0 = relevant)")
    return int(value)


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels (4 columns) or BEIR TSV qrels (3 columns with a ``query-id corpus-id score`` header).

    A (query, doc) pair judged twice with different grades is an error (which one is right?).
    """
    qrels: dict[str, dict[str, int]] = {}
    width = None
    for lineno, fields in _lines(path):
        if width is None and tuple(f.lower() for f in fields) == _BEIR_HEADER:
            width = 3
            continue
        if width is None:
            width = len(fields) if len(fields) in (3, 4) else 4
        if len(fields) != width:
            shape = "qid 0 docid relevance" if width == 4 else "query-id corpus-id score"
            raise ValueError(f"{path}: line {lineno}: expected {width} columns ({shape}), found {len(fields)}")
        qid, doc, grade_text = fields[0], fields[-2], fields[-1]
        grade = _int_grade(grade_text, path, lineno, "relevance" if width == 4 else "score")
        judged = qrels.setdefault(qid, {})
        if doc in judged and judged[doc] != grade:
            raise ValueError(f"{path}: line {lineno}, field 'docid': query {qid!r} judges {doc!r} twice with "
                             f"different grades ({judged[doc]} and {grade}); keep one line")
        judged[doc] = grade
    if not qrels:
        raise ValueError(f"{path}: no judgments found; expected lines 'qid 0 docid relevance'")
    return qrels


def read_run(path: str | Path, notes: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Read a TREC run file into ``{qid: {docid: score}}`` (the metrics rank it as trec_eval does). Columns after
    the sixth (``tag``) are ignored, as trec_eval ignores them; a line about them goes to ``notes``."""
    run: dict[str, dict[str, float]] = {}
    extra: list[int] = []
    for lineno, fields in _lines(path):
        if len(fields) < 6:
            raise ValueError(f"{path}: line {lineno}: expected 6 columns (qid Q0 docid rank score tag), "
                             f"found {len(fields)}")
        if len(fields) > 6:
            extra.append(lineno)
        qid, _, doc, _, score_text, _ = fields[:6]
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise ValueError(f"{path}: line {lineno}, field 'score': {score_text!r} is not a finite number")
        ranked = run.setdefault(qid, {})
        if doc in ranked:
            raise ValueError(f"{path}: line {lineno}, field 'docid': query {qid!r} retrieves {doc!r} twice; "
                             "a run lists each doc once per query")
        ranked[doc] = score
    if not run:
        raise ValueError(f"{path}: no results found; expected lines 'qid Q0 docid rank score tag'")
    if extra and notes is not None:
        notes.append(f"{path}: {len(extra)} line(s) have text after the sixth column (first: line {extra[0]}); "
                     "it is ignored, as trec_eval ignores it")
    return run


def _check_token(value: str, what: str) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise ValueError(f"{what} {text!r} is empty or contains whitespace, which the TREC format cannot hold; "
                         "use ids without spaces")
    return text


def strictly_decreasing(scores: Iterable[float]) -> list[float]:
    """The scores of a ranked list made strictly decreasing *as float32* (trec_eval's and
    :func:`ragnb.metrics.ranked_gains.trec_order`'s precision), so a reader that sorts by score keeps the list's
    order: a score not below its predecessor becomes the next float32 below it (a tie of two chunks at 0.8125
    is written 0.8125, 0.81249994). Each score moves by at most a few float32 steps (~1e-7 per tie); a
    strictly decreasing list is written as its float32 values unchanged."""
    out: list[float] = []
    prev = None
    for s in scores:
        v = np.float32(s)
        if not np.isfinite(v):
            raise ValueError(f"score {s!r} is not a finite number; a ranking needs finite scores")
        if prev is not None and v >= prev:
            v = np.nextafter(prev, np.float32(-np.inf), dtype=np.float32)
        out.append(float(v))
        prev = v
    return out


def run_lines(run: Run, tag: str = "ragnb") -> list[str]:
    """TREC lines of ``run``. A ranked list keeps its order: a list of doc ids gets scores n, n−1, …, 1; a list
    of ``(doc, score)`` pairs keeps its scores made strictly decreasing (:func:`strictly_decreasing`), so
    trec_eval reads the same ranking even where the retriever's scores tie. A score dict is written in
    trec_eval's order."""
    tag = _check_token(tag, "run tag")
    out: list[str] = []
    for qid, ranked in run.items():
        q = _check_token(qid, "query id")
        if isinstance(ranked, Mapping):
            docs = trec_order(ranked)
            scores = [float(ranked[d]) for d in docs]
        elif isinstance(ranked, (list, tuple)):
            pairs = all(isinstance(x, (list, tuple)) and len(x) == 2 for x in ranked) and len(ranked) > 0
            docs = [x[0] for x in ranked] if pairs else list(ranked)
            if len(set(docs)) != len(docs):
                raise ValueError(f"run[{qid!r}] lists a doc twice; deduplicate the ranking before writing it")
            scores = (strictly_decreasing(float(x[1]) for x in ranked) if pairs
                      else [float(len(docs) - i) for i in range(len(docs))])
        else:
            raise ValueError(f"run[{qid!r}] must be a list of doc ids or a dict doc id → score, "
                             f"got {type(ranked).__name__}")
        for rank, (doc, score) in enumerate(zip(docs, scores), start=1):
            out.append(f"{q} Q0 {_check_token(doc, 'doc id')} {rank} {score!r} {tag}")
    return out


def write_run(run: Run, path: str | Path, tag: str = "ragnb") -> Path:
    """Write ``run`` as a TREC run file, atomically."""
    return atomic_write_text(path, "".join(line + "\n" for line in run_lines(run, tag)))


def write_qrels(qrels: Qrels, path: str | Path) -> Path:
    """Write ``qrels`` as TREC qrels (``qid 0 docid grade``), atomically."""
    lines = []
    for qid, judged in qrels.items():
        q = _check_token(qid, "query id")
        for doc, grade in judged.items():
            if isinstance(grade, bool) or not float(grade).is_integer():
                raise ValueError(f"qrels[{qid!r}][{doc!r}] = {grade!r} is not an integer grade")
            lines.append(f"{q} 0 {_check_token(doc, 'doc id')} {int(grade)}\n")
    return atomic_write_text(path, "".join(lines))


def evaluate_files(run_path: str | Path, qrels_path: str | Path, metrics: list[str] | None = None,
                   n_boot: int = 1000, seed: int = 0, relevance_level: int = 1) -> dict:
    """Score a TREC run file against a qrels file: ``{metric: {mean, ci95, n, n_valid, n_failed}, "_info": …}``.

    Keys are the canonical metric names (``ndcg@10``); see ``ragnb.metrics.retrieval`` for where
    the values differ from trec_eval (queries missing from the run count 0, queries without a
    relevant doc are NaN and counted in ``n_failed``). ``relevance_level`` is trec_eval's ``-l``: a grade below
    it is not relevant. Qrels without any relevant judgment are an error (every metric would be undefined).
    ``_info["notes"]`` lists what was read leniently (text after a run line's sixth column).
    """
    notes: list[str] = []
    run, qrels = read_run(run_path, notes), read_qrels(qrels_path)
    _check_some_relevant(qrels, qrels_path, check_relevance_level(relevance_level))
    _, summary = evaluate(run, qrels, metrics, n_boot=n_boot, seed=seed, relevance_level=relevance_level)
    summary["_info"] = {**summary["_info"], "run": str(run_path), "qrels": str(qrels_path),
                        "relevance_level": relevance_level, "notes": notes}
    return summary


def _check_some_relevant(qrels: Qrels, path: str | Path, level: int) -> None:
    """Refuse qrels where no judgment reaches the relevance level: every query would be undefined (NaN)."""
    grades = [g for judged in qrels.values() for g in judged.values()]
    if max(grades) >= level:
        return
    fix = ("lower --relevance-level" if level > 1 and max(grades) > 0
           else "check the grade column: relevant documents need a positive grade")
    raise ValueError(f"{path}: no relevance grade ≥ {level} in {len(grades)} judgment(s) (grades {min(grades)} to "
                     f"{max(grades)}), so no query has a relevant document and every metric is undefined; a grade "
                     f"≥ the relevance level ({level}, --relevance-level; trec_eval's -l) marks a relevant document "
                     f"— {fix}")
