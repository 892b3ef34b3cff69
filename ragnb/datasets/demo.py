"""The bundled demo: Russian XQuAD paragraphs and questions (CC BY-SA 4.0, see data/xquad_ru/README.md).

The demo lives in its own database on the embedded server (``ragnb_demo``, or ``ragnb_demo_en`` for the
parallel English text), so it never mixes with a team's own corpus and never writes to an external server.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from ragnb import config
from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.embeddings.models import Encoder, get_encoder
from ragnb.store.engine import Database, connect
from ragnb.store.loaders import insert_rows
from ragnb.store.vectors import embed_table

DEMO_DIR = Path(__file__).resolve().parent.parent / "data" / "xquad_ru"
LANGUAGES = ("ru", "en")


def _read(name: str) -> list[dict]:
    with gzip.open(DEMO_DIR / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language = {language!r}; the demo has 'ru' (original) and 'en' (parallel English)")


def article_url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"))


def chunk_rows(language: str = "ru") -> list[dict]:
    _check_language(language)
    field = "text" if language == "ru" else "text_en"
    return [{"id": d["doc_id"], "url": article_url(d["title"]), "text": d[field]} for d in _read("corpus.jsonl.gz")]


# The bundled data has no user ratings. The demo question log gets *simulated* ones (a fixed random draw,
# skewed towards 5 as production ratings are) and a share of rows without a logged URL, so that the
# score filters, the score-5 cache and the "no url" share have something to act on. Reports built on these
# fields say that they are simulated; retrieval metrics against the logged URL stay real.
SIMULATED_SCORE_P = (0.10, 0.08, 0.12, 0.22, 0.48)  # P(score = 1..5)
SIMULATED_NO_URL = 0.08
SIMULATED_USERS = 40


def _simulated_fields(ids: list[str]) -> dict[str, dict]:
    import numpy as np

    rng = np.random.default_rng(20240501)
    order = sorted(ids)
    scores = rng.choice(np.arange(1, 6), size=len(order), p=SIMULATED_SCORE_P)
    no_url = rng.random(len(order)) < SIMULATED_NO_URL
    users = rng.integers(1, SIMULATED_USERS + 1, size=len(order))
    return {qid: {"score": int(s), "no_url": bool(n), "user_id": f"demo-user-{u:02d}"}
            for qid, s, n, u in zip(order, scores, no_url, users)}


def simulated_scores(db: Database) -> bool:
    """Whether ``db``'s question log is the demo's: it holds every bundled demo question with the simulated score
    :func:`ensure_demo` gave it. Decided by the stored rows (SQuAD-style hash ids and their fixed draw), never by
    a label or a parameter, so a team's own log is never called simulated and the demo always is."""
    import sqlalchemy as sa

    from ragnb.store.schema import table_exists, tables

    t = tables(db.schema).question
    if not table_exists(db, t):
        return False
    drawn = _simulated_fields([q["query_id"] for q in _read("queries.jsonl.gz")])
    expected = {qid: f["score"] for qid, f in drawn.items()}
    stmt = sa.select(sa.cast(t.c.id, sa.Text), t.c.score).where(sa.cast(t.c.id, sa.Text).in_(list(expected)))
    with db.engine.connect() as conn:
        stored = {str(i): s for i, s in conn.execute(stmt)}
    return stored == expected


def question_rows(language: str = "ru") -> list[dict]:
    """The demo questions as a question log: real questions, answers and article URLs, with simulated user
    scores (1–5), users, and about 8% of rows without a logged URL (see ``SIMULATED_*``)."""
    _check_language(language)
    q_field, a_field = ("question", "answers") if language == "ru" else ("question_en", "answers_en")
    queries = _read("queries.jsonl.gz")
    sim = _simulated_fields([q["query_id"] for q in queries])
    rows = []
    for q in queries:
        extra = sim[q["query_id"]]
        rows.append({"id": q["query_id"], "question": q[q_field], "answer": q[a_field][0],
                     "url": None if extra["no_url"] else article_url(q["title"]),
                     "score": extra["score"], "user_id": extra["user_id"]})
    return rows


def dataset(language: str = "ru") -> Dataset:
    _check_language(language)
    corpus = {r["id"]: r for r in chunk_rows(language)}
    q_field, a_field = ("question", "answers") if language == "ru" else ("question_en", "answers_en")
    items = []
    for q in _read("queries.jsonl.gz"):
        gold = q["relevant_doc_ids"][0]
        items.append(DatasetItem(
            id=q["query_id"], question=q[q_field], ground_truth_answer=q[a_field][0], chunk_id=gold,
            chunk_text=corpus[gold]["text"], confluence_url=corpus[gold]["url"],
            relevant_chunk_ids=list(q["relevant_doc_ids"]), source="xquad_ru", question_source="human",
        ))
    return Dataset(name=f"xquad_{language}_demo", type="manual", items=items)


def database_name(language: str = "ru") -> str:
    _check_language(language)
    return "ragnb_demo" if language == "ru" else "ragnb_demo_en"


# The models ``ragnb demo`` embeds and compares: the primary (headline) first. On the Russian text the
# multilingual model is the one to report; the English-only all-MiniLM-L6-v2 is its comparison.
DEMO_MODELS = {"ru": ("multilingual-e5-small", "all-MiniLM-L6-v2"), "en": ("all-MiniLM-L6-v2",)}


def ensure_demo(language: str = "ru", encoder: Encoder | Sequence[Encoder] | None = None,
                progress: bool = True) -> tuple[Database, dict]:
    """Load and embed the demo corpus and questions with ``encoder`` — or each of several encoders, each into
    its own vectors — (idempotent, incremental). Returns (db, stats): ``embed_chunks``/``embed_questions`` of
    the first encoder, ``models`` = model name → both, for every encoder. ``progress``: embedding reports its
    rows where someone listens — ``ragnb``'s stderr, the runner of the notebook (:mod:`ragnb.progress`)."""
    db = connect(database=database_name(language))
    if encoder is None:
        encoders = [get_encoder()]
    elif isinstance(encoder, (list, tuple)):
        encoders = list(encoder)
    else:
        encoders = [encoder]
    chunks = insert_rows(db, "chunks", chunk_rows(language))
    questions = insert_rows(db, "questions", question_rows(language), refresh=("url", "score", "user_id"))
    stats: dict = {
        # skipped: already loaded by an earlier demo run (their stored rows are kept)
        "chunks_inserted": chunks.inserted, "chunks_skipped": chunks.skipped,
        "questions_inserted": questions.inserted, "questions_skipped": questions.skipped,
        "models": {},
    }
    # The default model first: on a fresh database it becomes the tables' default (the question column, the chunk
    # table's default vector table), so readers of the default (the UX session log) see the same model there.
    for enc in sorted(encoders, key=lambda e: e.name != config.DEFAULT_EMBEDDING_MODEL):
        stats["models"][enc.name] = {which: embed_table(db, which, enc, progress=progress).as_dict()
                                     for which in ("chunks", "questions")}
    first = stats["models"][encoders[0].name]
    stats.update(embed_chunks=first["chunks"], embed_questions=first["questions"])
    return db, stats
