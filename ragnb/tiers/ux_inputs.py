"""What the Tier UX notebook opens (:func:`load_inputs`): the questions to check, the score-5 cache of the
question log (both with the pages they cite) and the dialogue sessions, with their vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragnb.datasets.sessions import SESSION_CHOICES, SessionLog
from ragnb.embeddings.base import encode_queries

SIMULATED_NOTE = ("The demo question log's user scores are SIMULATED (a fixed random draw, see ragnb.datasets.demo): the "
                  "score-5 cache is a random ~half of the demo questions, so cache_hit_rate here shows how the "
                  "metric works, not how a real cache would perform.")

# What the cache part reads of the log: the oracle (url, answer) and the time order (created_at); the questions
# checked also carry who asked them (the units of the τ validation's user splits).
CACHE_COLUMNS = ("question", "url", "answer", "created_at")
QUERY_LOG_COLUMNS = ("question", "url", "answer", "created_at", "user_id", "session_id")

# --------------------------------------------------------------------------------------------
# Inputs: what the notebook opens
# --------------------------------------------------------------------------------------------


@dataclass
class UXInputs:
    queries: pd.DataFrame | None
    query_vectors: np.ndarray | None
    cache: pd.DataFrame | None
    cache_vectors: np.ndarray | None
    sessions: SessionLog | None
    annotations: pd.DataFrame | None
    info: dict  # for the report header (no secrets)
    notes: list[str]
    embedding_model: str


def load_inputs(
    corpus: str = "demo",
    language: str = "ru",
    sessions: str = "demo",
    embedding_model: str = "",
    dataset_path: str = "",
    max_questions: int = 0,
    max_sessions: int = 0,
    cache_score: int = 5,
) -> UXInputs:
    """Open everything Tier UX reads.

    Cache part — ``corpus="demo"``: the demo dataset questions (or ``dataset_path``) against the score-5
    rows of the demo question log (SIMULATED scores; a question never hits itself); ``"db"``: the questions
    of ``dataset_path``, or (empty path) every embedded logged question, against the configured log's
    score-``cache_score`` rows. Sessions — ``"demo"``: the bundled ruTiE + TREC CAsT sessions in their own
    database; ``"db"``: the configured log's rows that have a session id.
    """
    from ragnb.embeddings.models import get_encoder

    _check_input_options(corpus, sessions, max_questions, max_sessions, cache_score)
    encoder = get_encoder(embedding_model or None)
    notes: list[str] = []
    info: dict = {"embedding_model": encoder.name}
    log_db, queries, query_vectors, cache, cache_vectors = _cache_inputs(
        corpus, language, encoder, dataset_path, max_questions, cache_score, info, notes)
    session_log, annotations = _session_inputs(sessions, corpus, log_db, encoder, max_sessions, info, notes)
    return UXInputs(queries, query_vectors, cache[list(CACHE_COLUMNS)], cache_vectors, session_log, annotations, info,
                    notes, encoder.name)


def _check_input_options(corpus: str, sessions: str, max_questions: int, max_sessions: int, cache_score: int) -> None:
    if corpus not in ("demo", "db"):
        raise ValueError(f"corpus = {corpus!r}; use 'demo' (bundled XQuAD questions and log) or 'db' (the configured database)")
    if sessions not in SESSION_CHOICES:
        raise ValueError(f"sessions = {sessions!r}; use 'demo' (bundled ruTiE + TREC CAsT sessions) or 'db' "
                         "(sessions of the configured question log)")
    for name, value in (("max_questions", max_questions), ("max_sessions", max_sessions)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} = {value!r}; use 0 for all or a positive number")
    if isinstance(cache_score, bool) or not isinstance(cache_score, int) or not 1 <= cache_score <= 5:
        raise ValueError(f"cache_score = {cache_score!r}; user scores are integers 1–5 (seed: 5)")


def _cache_inputs(corpus: str, language: str, encoder: Any, dataset_path: str, max_questions: int, cache_score: int,
                  info: dict, notes: list[str]) -> tuple[Any, pd.DataFrame, np.ndarray, pd.DataFrame, np.ndarray]:
    """The question log's database, the questions to check and the score-``cache_score`` cache, with vectors."""
    from ragnb.datasets.schema import load_dataset
    from ragnb.datasets import demo
    from ragnb.datasets.fingerprint import note_corpus, note_dataset
    from ragnb.store.engine import connect
    from ragnb.store.questions import fetch_question_log, question_log_label
    from ragnb.datasets.corpus import stored_model
    from ragnb.store.schema import table_exists, tables
    from ragnb.store.vectors import check_space

    if corpus == "demo":
        log_db, _ = demo.ensure_demo(language, encoder)
        info["corpus"] = f"demo: XQuAD {language} question log (CC BY-SA 4.0), simulated user scores"
        notes.append(SIMULATED_NOTE)
    else:
        log_db = connect()
        info["corpus"] = "database"
    info["question_log"] = question_log_label(log_db)  # the URL only in the JSON's provenance (note_corpus)
    note_corpus(log_db)
    model = stored_model(log_db, encoder, "questions") if table_exists(log_db, tables(log_db.schema).question) else None
    cache, cache_vectors = fetch_question_log(log_db, exact_score=cache_score, with_vectors=True, model=model)
    # after the fetch: it names a missing table better
    check_space(log_db, tables(log_db.schema).question, encoder, model=model)
    if dataset_path or corpus == "demo":
        ds = load_dataset(dataset_path) if dataset_path else demo.dataset(language)
        items = ds.items[:max_questions] if max_questions else ds.items
        note_dataset(ds.model_copy(update={"items": items}))  # the run record says which questions were checked
        # source_id: the log row an item was built from (from-real-questions), so it never hits itself
        queries = pd.DataFrame({"question": [it.question for it in items],
                                "source_id": [_source_id(it) for it in items],
                                "url": [it.confluence_url for it in items]},
                               index=pd.Index([it.id for it in items]))
        queries = _with_log_fields(queries, log_db)
        query_vectors = encode_queries(encoder, queries["question"].tolist(), batch_size=64)
        info["questions"] = f"dataset {ds.name}"
    else:
        log, query_vectors = fetch_question_log(log_db, with_vectors=True, limit=max_questions, model=model)
        queries = log[list(QUERY_LOG_COLUMNS)]
        info["questions"] = "the logged questions (each compared with the cache without itself)"
        if queries.empty:
            raise ValueError(f"{log_db.display_url}: no logged question has an embedding; run `ragnb embed --questions`")
    info["cache"] = f"logged questions with score {cache_score} ({len(cache)})"
    return log_db, queries, query_vectors, cache, cache_vectors


def _with_log_fields(queries: pd.DataFrame, log_db: Any) -> pd.DataFrame:
    """A dataset item built from a log row (``source_id``) is that logged question: its answer, time, user and
    session come from the row (None for an item built from no row, or when the log has no such table)."""
    from ragnb.store.questions import fetch_question_log

    if not queries["source_id"].notna().any():
        return queries
    log, _ = fetch_question_log(log_db)
    rows = log.reindex(queries["source_id"].astype(object).where(queries["source_id"].notna(), None))
    out = queries.copy()
    for col in QUERY_LOG_COLUMNS[2:]:
        out[col] = rows[col].to_numpy()
    return out


def _source_id(item: Any) -> str | None:
    """The log id a dataset item was built from (``question_answer_id``, an extra field), else None."""
    value = getattr(item, "question_answer_id", None)
    return None if value is None else str(value)


def _session_inputs(sessions: str, corpus: str, log_db: Any, encoder: Any, max_sessions: int, info: dict,
                    notes: list[str]) -> tuple[SessionLog, pd.DataFrame | None]:
    """The dialogue sessions (and, for the demo, the human needs-context flags of their turns)."""
    from ragnb.store.engine import connect
    from ragnb.store.schema import table_exists, tables
    from ragnb.datasets.corpus import stored_model
    from ragnb.datasets.sessions import demo_turn_annotations, ensure_demo_sessions, read_sessions
    from ragnb.store.questions import question_log_label
    from ragnb.store.vectors import check_space

    if sessions == "demo":
        s_db, _ = ensure_demo_sessions(encoder)
        annotations = demo_turn_annotations()
        info["sessions"] = "demo: ruTiE (ru, MIT) + TREC CAsT 2019-2020 (en, MIT)"
    else:
        s_db = log_db if corpus == "db" else connect()
        annotations = None
    # the encoder's own stored vectors, whichever model is the table's default (its column)
    model = stored_model(s_db, encoder, "questions") if table_exists(s_db, tables(s_db.schema).question) else None
    check_space(s_db, tables(s_db.schema).question, encoder, model=model)
    session_log = read_sessions(s_db, max_sessions=max_sessions, encoder=encoder, model=model)
    session_log.context_vectors = turn_context_vectors(session_log.turns, encoder, notes)
    if sessions != "demo":
        info["sessions"] = question_log_label(s_db, len(session_log.turns))
    if annotations is None:  # where the turns came from, for the per-source rows of the report
        annotations = pd.DataFrame({"source": "db", "language": None, "label": info["sessions"]},
                                   index=session_log.turns.index)
    if sessions == "demo":
        english_only = "minilm" in encoder.name.casefold()
        notes.append("Demo sessions: created_at is synthetic (one minute per turn) and only fixes the turn order"
                     + (f"; {encoder.name} is English-only, so Russian (ruTiE) similarities are less meaningful "
                        "than English (CAsT) ones." if english_only else "."))
    return session_log, annotations


def turn_texts(turns: pd.DataFrame) -> list[str] | None:
    """Each turn's logged answer, or its question where no answer was logged; None when no turn has an answer or
    no turn cites a page (then nothing could show that answers separate breaks better, see ragnb.tiers.ux_breaks)."""
    if "answer" not in turns or "url" not in turns or not turns["url"].map(lambda u: isinstance(u, str)).any():
        return None
    answers = [a.strip() if isinstance(a, str) else "" for a in turns["answer"]]
    if not any(answers):
        return None
    return [a or str(q) for q, a in zip(turns["question"], answers)]


def turn_context_vectors(turns: pd.DataFrame, encoder: Any, notes: list[str]) -> np.ndarray | None:
    """Tier UX's break signal: each turn's answer, embedded in memory (the encoder's disk cache keeps them for the
    next run). An elliptical follow-up ("А их можно перенести?") names nothing of its topic; its answer does
    (docs/metrics.md, Tier UX, Breaks)."""
    texts = turn_texts(turns)
    if texts is None:
        return None
    n_answered = sum(isinstance(a, str) and bool(a.strip()) for a in turns["answer"])
    notes.append(f"Break signal: each turn's logged answer ({n_answered} of {len(texts)} turns have one; the others "
                 f"stand in with their question), embedded with {encoder.name} in memory.")
    # answers are passages (e5's "passage: " prompt), not queries
    return encoder.encode_documents(texts, batch_size=64)
