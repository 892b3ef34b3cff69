"""What the source-analytics notebooks share: the question set to analyse and a retriever over the chunks.

Questions come either from a benchmark dataset (encoded with the corpus model) or from the production
question log (``question_answer``), whose *stored* embeddings are used as they are — re-encoding would
analyse vectors the production system never searched with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragnb.embeddings.base import encode_queries
from ragnb.rag.retrieval import Retriever, check_backend
from ragnb.store.questions import fetch_question_log, question_log_label
from ragnb.store.schema import tables
from ragnb.store.vectors import check_space
from ragnb.datasets.corpus import Corpus, open_dataset

SOURCES = ("auto", "dataset", "log")


@dataclass
class QuestionSet:
    """Questions in a fixed order with one vector each; ``log`` holds the question-log rows (source "log")."""

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray  # (n, dim) float32, row i = ids[i]
    source: str  # "dataset" | "log"
    label: str  # dataset name, or the log's question_log_label ("question log: 67 questions, database ragnb")
    log: pd.DataFrame | None = None  # fetch_question_log rows (url, score, user_id, …), indexed like ids

    @property
    def described(self) -> str:
        """The questions as a report header names them: "50 from xquad_ru_demo", or the log's label (its count
        is in it)."""
        return self.label if self.source == "log" else f"{len(self.ids)} from {self.label}"


def resolve_source(source: str, corpus: str, dataset_path: str) -> str:
    """``"auto"``: the dataset when one is given or the corpus is the demo, else the question log."""
    if source not in SOURCES:
        raise ValueError(f"source = {source!r}; use 'dataset' (benchmark questions), 'log' (the production "
                         "question log with its stored embeddings) or 'auto'")
    if source == "auto":
        return "dataset" if (dataset_path or corpus == "demo") else "log"
    return source


def load_log(ctx: Corpus, min_score: int = 0, limit: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Question-log rows that have an embedding (score ≥ ``min_score``, first ``limit``) and their stored
    vectors, after checking that the vectors were made by the corpus's model."""
    if not 0 <= min_score <= 5:
        raise ValueError(f"min_score = {min_score}; user scores are 1–5 (0 = all questions)")
    if limit < 0:
        raise ValueError(f"limit = {limit}; use 0 for all questions or a positive number")
    model = ctx.model_for("questions")
    check_space(ctx.db, tables(ctx.db.schema).question, ctx.encoder, model=model)
    log, vectors = fetch_question_log(ctx.db, min_score=min_score, limit=limit, with_vectors=True, model=model)
    if log.empty:
        raise ValueError(f"the question log has no embedded questions with score ≥ {min_score}; lower min_score, "
                         "load questions (`ragnb load questions FILE`) and embed them (`ragnb embed --questions`)")
    return log, vectors


def count_unembedded(ctx: Corpus, min_score: int = 0) -> int:
    """Logged questions passing the score filter that have no embedding (of the corpus's model): they cannot be
    analysed, so reports count them instead of dropping them silently."""
    import sqlalchemy as sa

    model = ctx.model_for("questions")
    t = tables(ctx.db.schema).question
    stmt = sa.select(sa.func.count()).select_from(t)
    if model is None:
        stmt = stmt.where(t.c.embedding.is_(None))
    if min_score:
        stmt = stmt.where(t.c.score >= min_score)
    with ctx.db.engine.connect() as conn:
        n = int(conn.execute(stmt).scalar_one())
    if model is None:
        return n
    log, _ = fetch_question_log(ctx.db, min_score=min_score, with_vectors=True, model=model)
    return n - len(log)


def load_questions(
    ctx: Corpus,
    source: str,
    corpus: str,
    language: str = "ru",
    dataset_path: str = "",
    min_score: int = 0,
    max_questions: int = 0,
) -> QuestionSet:
    """The question set of an analysis notebook (see :func:`resolve_source`)."""
    if max_questions < 0:
        raise ValueError(f"max_questions = {max_questions}; use 0 for all or a positive number")
    source = resolve_source(source, corpus, dataset_path)
    if source == "dataset":
        ds = open_dataset(dataset_path, corpus, language, max_questions)
        if not ds.items:
            raise ValueError(f"dataset {ds.name!r} has no questions")
        texts = [it.question for it in ds.items]
        return QuestionSet([it.id for it in ds.items], texts, encode_queries(ctx.encoder, texts, batch_size=64),
                           "dataset", ds.name)
    log, vectors = load_log(ctx, min_score, max_questions)
    label = question_log_label(ctx.db, len(log), min_score)
    return QuestionSet([str(i) for i in log.index], log["question"].astype(str).tolist(), vectors, "log", label, log)


@dataclass
class ChunkIndex:
    """The embedded chunks (read once) and the retriever that searches them."""

    ids: list[str]
    urls: dict[str, str | None]  # chunk id → source url
    retriever: Retriever


def open_chunks(ctx: Corpus, backend: str = "memory", index_mode: str = "auto") -> ChunkIndex:
    """Chunk ids and urls via one :func:`fetch_vectors`; ``backend="memory"`` searches that matrix exactly
    in-process, ``"pgvector"`` searches in the database (``index_mode`` auto/exact/hnsw)."""
    check_backend(backend)
    ids, urls, vectors = ctx.vectors("chunks")
    if not ids:
        raise ValueError("the corpus has no embedded chunks; run `ragnb embed --chunks` first")
    retriever = ctx.retriever(backend, index_mode, (ids, urls, vectors))
    return ChunkIndex(list(ids), dict(zip(ids, urls)), retriever)
