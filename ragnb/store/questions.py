"""Read the production question log (``question_answer``) with its filters: score, embedding, limit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import sqlalchemy as sa

from ragnb.config import url_database_name
from ragnb.store.engine import Database
from ragnb.store.schema import table_exists, tables

LOG_COLUMNS = ("id", "question", "answer", "url", "score", "user_id", "session_id", "created_at")


def question_log_label(db: Database, n_questions: int | None = None, min_score: int = 0) -> str:
    """How reports name a question log read from ``db`` — in headers, table scopes and chart legends:
    ``question log: 67 questions, database ragnb`` (``question log (score ≥ 4): …`` when filtered; no count when
    ``n_questions`` is None). Never the connection URL: a reader wants to know what the questions are, and
    host, user and port belong in the metrics JSON's ``provenance`` (the redacted URL), not in every row."""
    what = "question log" + (f" (score ≥ {min_score})" if min_score else "")
    count = "" if n_questions is None else f"{n_questions} question{'' if n_questions == 1 else 's'}, "
    return f"{what}: {count}database {url_database_name(db.display_url)}"


def fetch_question_log(
    db: Database,
    min_score: int = 0,
    exact_score: int | None = None,
    limit: int = 0,
    with_vectors: bool = False,
    model: str | None = None,
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Logged questions ordered by id, as a DataFrame indexed by id with :data:`LOG_COLUMNS`.

    ``min_score`` > 0 keeps rows with ``score >= min_score`` (unscored rows drop out); ``exact_score``
    keeps ``score == exact_score`` (the score-5 cache (see docs/datasets.md) and dataset); ``limit`` > 0 keeps the first
    ``limit`` rows after filtering. ``with_vectors`` keeps only rows that have an embedding and returns
    their float32 matrix in the same order (else ``None``); ``model``: whose vectors (default: the table's own
    column; another model's are read from its vector table).
    """
    if not 0 <= min_score <= 5:
        raise ValueError(f"min_score = {min_score}; user scores are 1–5 (0 = no filter)")
    if exact_score is not None and not 1 <= exact_score <= 5:
        raise ValueError(f"exact_score = {exact_score}; user scores are 1–5 (None = no filter)")
    if limit < 0:
        raise ValueError(f"limit = {limit}; use 0 for all rows or a positive number")
    t = tables(db.schema).question
    if not table_exists(db, t):
        raise ValueError(f"{db.display_url}: no question log table {t.fullname!r}; load one with "
                         "`ragnb load questions FILE` (or set RAGNB_SCHEMA_MAP for a production schema)")
    cols = [sa.cast(t.c.id, sa.Text).label("id")] + [t.c[name].label(name) for name in LOG_COLUMNS[1:]]
    stmt = sa.select(*cols).order_by(sa.cast(t.c.id, sa.Text))
    if min_score:
        stmt = stmt.where(t.c.score >= min_score)
    if exact_score is not None:
        stmt = stmt.where(t.c.score == exact_score)
    by_model = with_vectors and model is not None
    if with_vectors and not by_model:
        stmt = stmt.where(t.c.embedding.is_not(None))
    if limit and not by_model:
        stmt = stmt.limit(limit)
    with db.engine.connect() as conn:
        frame = pd.DataFrame(conn.execute(stmt).mappings().all(), columns=list(LOG_COLUMNS))
    frame = frame.set_index("id", drop=False)
    frame["score"] = frame["score"].astype("Int64")
    if not with_vectors:
        return frame, None
    from ragnb.store.vectors import fetch_vectors, fetch_vectors_by_id

    if by_model:  # rows with a vector of this model, wherever it is stored; then the limit
        ids, _, vecs = fetch_vectors(db, "questions", model=model)
        pos = {qid: k for k, qid in enumerate(ids)}
        frame = frame[frame.index.isin(list(pos))]
        frame = frame.head(limit) if limit else frame
        return frame, (vecs[[pos[q] for q in frame.index]] if len(frame) else np.zeros((0, 0), dtype=np.float32))
    if frame.empty:
        return frame, np.zeros((0, 0), dtype=np.float32)
    return frame, fetch_vectors_by_id(db, "questions", list(frame.index))
