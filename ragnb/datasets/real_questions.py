"""Modes ``from-real-questions`` and ``from-real-questions-score-5``: logged user questions + top-k retrieval."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pandas as pd
import sqlalchemy as sa

from ragnb.datasets.build import (FILE_PREFIX, BuildResult, check_count, chunk_texts, embedded_chunk_urls,
                                  mode_metadata)
from ragnb.datasets.demo import simulated_scores
from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.urls import page_id, url_match, url_match_warning
from ragnb.io import natural_key

CONTEXT_SEPARATOR = "\n\n"  # between the chunks of a fixed context


def _count_without_vectors(db, exact_score: int | None) -> int:
    from ragnb.store.schema import tables

    t = tables(db.schema).question
    stmt = sa.select(sa.func.count()).select_from(t).where(t.c.embedding.is_(None))
    if exact_score is not None:
        stmt = stmt.where(t.c.score == exact_score)
    with db.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def _text_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value)
    return text if text.strip() else None


def _chunks_by_page(urls: dict[str, str | None]) -> dict[str, list[str]]:
    """page id → the embedded chunks on that page, in natural id order (``page.md#2`` before ``#10``: the
    loaders number a page's chunks in reading order)."""
    pages: dict[str, list[str]] = {}
    for cid in sorted(urls, key=natural_key):
        pid = page_id(urls[cid])
        if pid is not None:
            pages.setdefault(pid, []).append(cid)
    return pages


def _pick_chunks(log: pd.DataFrame, res: Any, pages: dict[str, list[str]]) -> tuple[list[dict], Counter]:
    """Per logged question: its relevant chunks (same page as the logged url), whether one was retrieved and
    at which rank, and the chunk to show (best-ranked relevant, else top-1); plus the counts."""
    picks: list[dict] = []
    counts: Counter = Counter()
    for (qa_id, row), retrieved, sims in zip(log.iterrows(), res.ids, res.scores):
        url = _text_or_none(row["url"])
        relevant = pages.get(page_id(url), []) if url else []
        rel_set = set(relevant)
        rank = next((i + 1 for i, c in enumerate(retrieved) if c in rel_set), None)
        if url is None:
            matched = None
            counts["without_url"] += 1
        else:
            matched = rank is not None
            counts["matched" if matched else "not_matched"] += 1
            if not relevant:
                counts["url_not_in_corpus"] += 1
        if not relevant:
            counts["without_fixed_context"] += 1
        answer = _text_or_none(row["answer"])
        if answer is None:
            counts["without_answer"] += 1
        score = row["score"]
        picks.append({
            "qa_id": str(qa_id), "question": row["question"], "answer": answer, "url": url,
            "score": None if pd.isna(score) else int(score),
            "relevant": relevant, "matched": matched, "rank": rank,
            "chunk": retrieved[rank - 1] if rank else (retrieved[0] if retrieved else None),
            "retrieved": list(retrieved), "sims": [round(float(s), 6) for s in sims],
        })
    return picks, counts


def _items(db, picks: list[dict]) -> list[DatasetItem]:
    """One item per pick. The fixed context (``chunk_text``, Tier 2) is the logged page's chunks — the
    known-relevant context — joined in chunk order, never a retrieved chunk: retrieval is what Tier 1 and
    Tier 3 measure. An item without a relevant chunk has no fixed context (Tier 2 counts it as failed)."""
    texts = chunk_texts(db, sorted({c for p in picks for c in p["relevant"]}))
    return [
        DatasetItem(
            id=f"rq-{p['qa_id']}", question=p["question"], ground_truth_answer=p["answer"],
            chunk_id=p["relevant"][0] if p["relevant"] else None,
            chunk_text=CONTEXT_SEPARATOR.join(texts[c][1] for c in p["relevant"]) if p["relevant"] else None,
            context_chunk_ids=list(p["relevant"]), relevance_unit="page", confluence_url=p["url"],
            relevant_chunk_ids=p["relevant"], source="question_log", question_source="user",
            question_answer_id=p["qa_id"], user_score=p["score"], is_relevant_chunk_matched=p["matched"],
            relevant_rank=p["rank"], retrieved_chunk_ids=p["retrieved"], retrieved_similarities=p["sims"])
        for p in picks
    ]


def _no_context_note(n: int) -> str:
    return (f"{n} item(s) have no relevant chunk (no logged url, or its page is not in the corpus), hence no "
            "fixed context: Tier 2 counts them as failed at the context stage instead of using a retrieved chunk")


def _warnings(counts: Counter, skipped: int, where: str, url_warning: str | None = None) -> list[str]:
    warnings = []
    if counts["without_url"]:
        warnings.append(f"{counts['without_url']} question(s) have no logged url: kept with relevant_chunk_ids = [] "
                        "(Tier 1 counts them as undefined)")
    if counts["url_not_in_corpus"]:
        # how many matched, an example of each side and the fix (--url-template, front matter, --map)
        warnings.append(url_warning or f"{counts['url_not_in_corpus']} logged url(s) name a page with no chunk in "
                        "the corpus")
    if counts["without_fixed_context"]:
        warnings.append(_no_context_note(counts["without_fixed_context"]))
    if skipped:
        warnings.append(f"{skipped} logged question(s){where} have no embedding and were left out; "
                        "run `ragnb embed --questions`")
    return warnings


def generate_from_real_questions(corpus: Any, max_questions: int = 0, exact_score: int | None = None,
                                 top_k: int = 5, backend: str = "pgvector") -> BuildResult:
    """Mode "from-real-questions" (``exact_score=5``: "from-real-questions-score-5").

    The first ``max_questions`` logged questions that have an embedding (ordered by id; 0 = all), each
    retrieved against the chunks (top ``top_k`` by cosine, ``backend`` "pgvector" exact search or "memory").
    Per item:

    * ``relevant_chunk_ids`` = every embedded chunk whose url names the same page as the logged url
      (:func:`ragnb.urls.page_id`), so Tier 1 can score it;
    * ``is_relevant_chunk_matched`` = one of the top-k chunks is on that page (None without a logged url);
    * ``chunk_text`` (Tier 2's fixed context) = the texts of ``relevant_chunk_ids`` (the logged page's chunks,
      the known-relevant context) joined in chunk order by a blank line, ``context_chunk_ids`` = those ids,
      ``chunk_id`` = the first of them; no relevant chunk → no fixed context (counted in
      ``without_fixed_context``; Tier 2 fails such an item at the context stage, never using a retrieved one);
    * ``relevance_unit`` = "page": relevance is the logged page, not a gold paragraph;
    * ``ground_truth_answer`` = the logged answer; ``user_score``, ``question_answer_id``, ``confluence_url``
      (the logged url), ``retrieved_chunk_ids``, ``retrieved_similarities``, ``relevant_rank``.

    Rows without a url are kept with ``relevant_chunk_ids = []`` (Tier 1 counts them as undefined) and
    counted in ``without_url``; a url whose page has no chunk is counted in ``url_not_in_corpus``.
    """
    from ragnb.rag.retrieval import build_retriever, check_backend
    from ragnb.store.questions import fetch_question_log
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space

    check_count(max_questions, "max_questions", allow_zero=True)
    check_count(top_k, "top_k", allow_zero=False)
    check_backend(backend)
    mode = "from-real-questions" if exact_score is None else "from-real-questions-score-5"
    db, encoder = corpus.db, corpus.encoder
    log, qvecs = fetch_question_log(db, exact_score=exact_score, limit=max_questions, with_vectors=True)
    skipped = _count_without_vectors(db, exact_score)
    where = "" if exact_score is None else f" with score {exact_score}"
    if log.empty:
        raise ValueError(f"{db.display_url}: no logged question{where} has an embedding ({skipped} without one); "
                         "run `ragnb embed --questions` (or load a question log with `ragnb load questions FILE`)")
    check_space(db, tables(db.schema).question, encoder)  # question and chunk vectors must share a model

    urls = embedded_chunk_urls(db)
    # pgvector without an index scan: the dataset records the exact top-k, whatever index exists
    res = build_retriever(backend, db, dim=encoder.dim, index_mode="exact").search(qvecs, top_k)
    picks, counts = _pick_chunks(log, res, _chunks_by_page(urls))
    items = _items(db, picks)
    with_url = counts["matched"] + counts["not_matched"]
    report = {"items": len(items), "matched": counts["matched"], "not_matched": counts["not_matched"],
              "matched_rate": counts["matched"] / with_url if with_url else None,
              "without_url": counts["without_url"], "url_not_in_corpus": counts["url_not_in_corpus"],
              "without_fixed_context": counts["without_fixed_context"], "without_answer": counts["without_answer"], "skipped_without_embedding": skipped,
              "chunks_with_embeddings": len(urls)}
    notes = ["user scores in the bundled demo question log are simulated"] if simulated_scores(db) else []
    notes.append("fixed context (chunk_text, Tier 2) = the logged page's chunks in chunk order, not a retrieved chunk")
    if counts["without_fixed_context"]:
        notes.append(_no_context_note(counts["without_fixed_context"]))
    meta = mode_metadata(mode, corpus=corpus.label, source_db=db.display_url, embedding_model=encoder.name,
                         retrieval={"backend": res.backend, "top_k": top_k}, exact_score=exact_score,
                         max_questions=max_questions, counts=report, notes=notes)
    return BuildResult(Dataset(name=mode, type="real-users", items=items, metadata=meta), FILE_PREFIX[mode],
                       report, _warnings(counts, skipped, where,
                                         url_match_warning(url_match([p["url"] for p in picks], list(urls.values())))))


def question_log_dataset(db: Any, max_questions: int = 0) -> Dataset:
    """The database's logged questions as a dataset for a system under test to answer (``rag_metrics`` on
    ``corpus db``): the first ``max_questions`` rows by id (0 = all), no embedding needed — the system retrieves for
    itself. Per item, as :func:`generate_from_real_questions` names them: id ``rq-<log id>``, ``question``,
    ``ground_truth_answer`` = the logged answer (what production answered, not a verified reference),
    ``confluence_url``, ``user_score``, ``question_answer_id``. Rows with a blank question are left out and counted
    in ``metadata["counts"]["without_question"]``."""
    from ragnb.store.questions import fetch_question_log

    check_count(max_questions, "max_questions", allow_zero=True)
    log, _ = fetch_question_log(db, limit=max_questions)
    blank = log["question"].map(lambda q: _text_or_none(q) is None)
    items = [
        DatasetItem(id=f"rq-{qa_id}", question=row["question"], ground_truth_answer=_text_or_none(row["answer"]),
                    confluence_url=_text_or_none(row["url"]), source="question_log", question_source="user",
                    question_answer_id=str(qa_id), user_score=None if pd.isna(row["score"]) else int(row["score"]))
        for qa_id, row in log[~blank].iterrows()
    ]
    if not items:
        raise ValueError(f"{db.display_url}: the question log has no question{' with text' if len(log) else ''}; "
                         "load one with `ragnb load questions FILE`")
    counts = {"questions": len(items), "without_question": int(blank.sum()),
              "without_answer": sum(it.ground_truth_answer is None for it in items)}
    return Dataset(name="question_log", type="real-users", items=items,
                   metadata={"source_db": db.display_url, "counts": counts, "max_questions": max_questions})
