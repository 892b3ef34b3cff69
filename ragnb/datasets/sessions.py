"""Multi-turn sessions for Tier UX: the bundled demo sessions and reading sessions from any question log.

Demo sessions (data/rutie_dialog, MIT; data/trec_cast_sessions, MIT — see their READMEs) are loaded as a
question log into their own embedded database ``ragnb_demo_sessions``, so they never mix with a team's
log or with the XQuAD demo:

- ``rutie``: one long Russian dialogue (MERA ruTiE), 215 turns in session ``rutie_0``;
- ``cast``: TREC CAsT 2019–2020, 75 English sessions / 695 turns; the raw ``utterance`` is the logged
  question. Its human ``manual_rewrite`` and the derived ``needs_context`` flag do not fit the question
  table's fixed columns; :func:`demo_turn_annotations` reads them from the bundled file.

Row ids are ``<session_id>:<turn_index>`` (0-based turn index: ``rutie_0:12``, ``cast2019_31:3``).
``created_at`` is **synthetic** — the bundled data has no timestamps — and only makes the turn order
explicit: ``2000-01-01T00:00Z + (session ordinal) days + (turn index) minutes``, so it increases with every
turn of a session and sessions follow each other in file order (rutie first). The demo log has no user
ratings (``score`` is NULL) and no answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from ragnb.embeddings.base import encode_queries
from ragnb.io import iter_json_records
from ragnb.embeddings.models import Encoder, get_encoder
from ragnb.store.engine import Database, connect
from ragnb.store.loaders import insert_rows
from ragnb.store.schema import table_exists, tables
from ragnb.store.vectors import embed_table, fetch_vectors, fetch_vectors_by_id

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEMO_SESSIONS_DATABASE = "ragnb_demo_sessions"
SOURCES: dict[str, dict[str, str]] = {
    "rutie": {"file": "rutie_dialog/rutie_turns_000_214.jsonl.gz", "language": "ru", "text": "question",
              "label": "ruTiE (MERA), Russian, MIT"},
    "cast": {"file": "trec_cast_sessions/cast_2019_2020_turns.jsonl.gz", "language": "en", "text": "utterance",
             "label": "TREC CAsT 2019-2020, English, MIT"},
}
SESSION_CHOICES = ("demo", "db")
_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)


@lru_cache(maxsize=None)
def _read(source: str) -> tuple[dict, ...]:
    return tuple(rec for _, rec in iter_json_records(DATA_DIR / SOURCES[source]["file"], "session data"))


def turn_id(session_id: str, turn_index: int) -> str:
    return f"{session_id}:{int(turn_index)}"


def demo_session_rows() -> list[dict]:
    """The demo turns as question-log rows (id, question, session_id, created_at, user_id), rutie then cast."""
    rows: list[dict] = []
    ordinal: dict[str, int] = {}
    for source, spec in SOURCES.items():
        for rec in _read(source):
            sid = rec["session_id"]
            day = ordinal.setdefault(sid, len(ordinal))
            rows.append({
                "id": turn_id(sid, rec["turn_index"]), "question": rec[spec["text"]], "answer": None, "url": None,
                "score": None, "user_id": f"demo-{source}", "session_id": sid,
                "created_at": _EPOCH + timedelta(days=day, minutes=int(rec["turn_index"])),
            })
    return rows


def demo_turn_annotations() -> pd.DataFrame:
    """Per demo turn (index = row id): source, language, session_id, turn_index, and for CAsT the TREC
    ``trec_turn_id``, ``manual_rewrite``, ``needs_context`` (utterance ≠ manual rewrite) and
    ``topic_title``; these are NaN/None for ruTiE, which has no such annotations."""
    rows = []
    for source, spec in SOURCES.items():
        for rec in _read(source):
            rows.append({
                "id": turn_id(rec["session_id"], rec["turn_index"]), "source": source, "language": spec["language"],
                "session_id": rec["session_id"], "turn_index": int(rec["turn_index"]),
                "trec_turn_id": rec.get("turn_id"), "manual_rewrite": rec.get("manual_rewrite"),
                "needs_context": rec.get("needs_context"), "topic_title": rec.get("topic_title"),
            })
    frame = pd.DataFrame(rows).set_index("id", drop=False)
    frame["needs_context"] = frame["needs_context"].astype("boolean")
    return frame


def ensure_demo_sessions(encoder: Encoder | None = None, progress: bool = True) -> tuple[Database, dict]:
    """Load and embed the demo sessions into ``ragnb_demo_sessions`` (idempotent, incremental). Returns (db, stats).
    ``progress``: embedding reports its rows where someone listens (:mod:`ragnb.progress`)."""
    db = connect(database=DEMO_SESSIONS_DATABASE)
    encoder = encoder or get_encoder()
    questions = insert_rows(db, "questions", demo_session_rows(), refresh=("session_id", "created_at", "user_id"))
    stats = {
        "questions_inserted": questions.inserted, "questions_skipped": questions.skipped,
        "embed_questions": embed_table(db, "questions", encoder, progress=progress).as_dict(),
    }
    return db, stats


# --------------------------------------------------------------------------------------------
# Reading sessions from a question log
# --------------------------------------------------------------------------------------------


@dataclass
class SessionLog:
    """Turns of multi-turn sessions in order, with one vector per turn."""

    turns: pd.DataFrame  # index id: id, session_id, turn (0-based position in its session), question, created_at
    vectors: np.ndarray  # float32 (len(turns) × D), row i = turns.iloc[i]
    notes: list[str]
    # Row i = turns.iloc[i]'s logged answer (its question where none was logged), embedded by the caller for Tier
    # UX's break signal (ragnb.tiers.ux_breaks); None when no turn has an answer.
    context_vectors: np.ndarray | None = None

    def by_session(self) -> dict[str, np.ndarray]:
        """session id → its turns' vectors in order (sessions in order of their first turn)."""
        out: dict[str, np.ndarray] = {}
        codes = self.turns["session_id"].to_numpy()
        for sid in pd.unique(codes):
            out[str(sid)] = self.vectors[codes == sid]
        return out


def read_sessions(db: Database, max_sessions: int = 0, encoder: Encoder | None = None,
                  model: str | None = None) -> SessionLog:
    """Logged questions with a session id, as sessions: turns ordered by ``created_at`` then ``id``
    (rows without a timestamp come last in their session), sessions ordered by their first turn.

    ``max_sessions`` > 0 keeps the first N sessions in that order. Vectors are model ``model``'s (default: the
    table's own ``embedding`` column, its default model); rows without one are embedded in memory with
    ``encoder`` (nothing is written, and a note says how many), or raise ``ValueError`` when no encoder is given.
    """
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 0:
        raise ValueError(f"max_sessions = {max_sessions!r}; use 0 for all sessions or a positive number")
    t = tables(db.schema).question
    if not table_exists(db, t):
        raise ValueError(f"{db.display_url}: no question log table {t.fullname!r}; load one with "
                         "`ragnb load questions FILE` (with a session_id column)")
    tid = sa.cast(t.c.id, sa.Text)
    sid = sa.cast(t.c.session_id, sa.Text)
    has_session = t.c.session_id.is_not(None)
    first = (sa.select(sid.label("sid"), sa.func.min(t.c.created_at).label("first_at"))
             .where(has_session).group_by(sid)
             .order_by(sa.literal_column("first_at").asc().nulls_last(), sa.literal_column("sid")))
    if max_sessions:
        first = first.limit(max_sessions)
    first = first.subquery("first_turns")
    stmt = (sa.select(tid.label("id"), sid.label("session_id"), t.c.question, t.c.created_at,
                      t.c.answer.label("answer"), t.c.url.label("url"),  # labels: mapped column names differ
                      t.c.embedding.is_not(None).label("has_vector"))
            .join(first, first.c.sid == sid)
            .order_by(first.c.first_at.asc().nulls_last(), first.c.sid, t.c.created_at.asc().nulls_last(), tid))
    with db.engine.connect() as conn:
        turns = pd.DataFrame(conn.execute(stmt).mappings().all(),
                             columns=["id", "session_id", "question", "created_at", "answer", "url", "has_vector"])
    if turns.empty:
        raise ValueError(f"{db.display_url}: no logged question has a session_id, so there are no sessions to "
                         f"analyse; load a question log with a session_id column (and created_at for the order)")
    turns = turns.set_index("id", drop=False)
    turns.insert(2, "turn", turns.groupby("session_id", sort=False).cumcount())
    if model is not None:  # this model's vectors, wherever stored (the column, or its vector table)
        embedded = set(fetch_vectors(db, "questions", model=model)[0])
        turns["has_vector"] = turns.index.isin(list(embedded))
    notes: list[str] = []
    if turns["created_at"].isna().any():
        notes.append(f"{int(turns['created_at'].isna().sum())} turn(s) have no created_at: ordered by id after the "
                     "timestamped turns of their session")
    vectors = _turn_vectors(db, turns, encoder, notes, model)
    return SessionLog(turns.drop(columns="has_vector"), vectors, notes)


def _turn_vectors(db: Database, turns: pd.DataFrame, encoder: Encoder | None, notes: list[str],
                  model: str | None = None) -> np.ndarray:
    stored = turns.index[turns["has_vector"]].tolist()
    missing = turns.index[~turns["has_vector"]].tolist()
    if missing and encoder is None:
        raise ValueError(f"{len(missing)} session turn(s) have no embedding (first: {missing[0]!r}); run "
                         "`ragnb embed --questions` or pass an encoder to embed them in memory")
    parts: dict[str, np.ndarray] = {}
    if stored:
        parts.update(zip(stored, fetch_vectors_by_id(db, "questions", stored, model=model)))
    if missing:
        texts = turns.loc[missing, "question"].fillna("").astype(str).tolist()
        empty = [i for i, txt in zip(missing, texts) if not txt.strip()]
        if empty:
            raise ValueError(f"{len(empty)} session turn(s) have an empty question (first: {empty[0]!r}); "
                             "fix or delete those rows")
        parts.update(zip(missing, encode_queries(encoder, texts, batch_size=64)))
        notes.append(f"{len(missing)} turn(s) had no stored embedding: embedded in memory with {encoder.name} "
                     "(nothing written to the database)")
    return np.stack([parts[i] for i in turns.index]).astype(np.float32, copy=False)
