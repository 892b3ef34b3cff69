"""The dataset modes of seed 001 phase 2, behind ``ragnb dataset …``.

Every mode returns a :class:`BuildResult` — a :class:`~ragnb.datasets.schema.Dataset` in the one schema
(``{"name", "type", "metadata", "items"}``, loadable with :func:`ragnb.datasets.schema.load_dataset` and by the tier
notebooks' ``dataset_path``) plus a report of counts — and :func:`write_result` writes it atomically as
``<prefix>_YYYYMMDD_HHMMSS.json``:

=============================  =========================================  ==============  ==============================
mode                           file prefix                                ``type``        items from
=============================  =========================================  ==============  ==============================
synthetic                      ``dataset_synthetic``                      synthetic       an LLM: question + answer per chunk
from-real-questions            ``dataset_from_real_questions``            real-users      the question log + top-k retrieval
from-real-questions-score-5    ``dataset_from_real_questions_score_5``    real-users      the same, user score = 5 only
export-annotation              ``dataset_export_annotation``              annotation      any dataset + empty review fields
import-annotation              ``dataset_import_annotation``              manual          a reviewed annotation file
judge-pipeline                 ``dataset_judge_pipeline``                 judge_pipeline  a (question, answer, show) file, or
                                                                                          a reviewed question-log annotation
=============================  =========================================  ==============  ==============================

Bad input raises ``ValueError`` naming the file, the item (index and id) or row, the field and the fix;
nothing is written then.
"""

from __future__ import annotations

import asyncio
import csv
import io
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from pydantic import ValidationError

from ragnb.datasets.schema import Dataset, DatasetItem, dataset_json, parse_dataset, read_json_file
from ragnb.io import atomic_write_text
from ragnb.datasets.urls import page_id

MODES = ("synthetic", "from-real-questions", "from-real-questions-score-5", "export-annotation",
         "import-annotation", "judge-pipeline")
# Seed 001 calls them dataset_realq_*, dataset_realq5_* and annotation_*; ragnb names every mode alike:
# dataset_<mode>_YYYYMMDD_HHMMSS.json, one prefix per command (hyphens → underscores).
FILE_PREFIX = {
    "synthetic": "dataset_synthetic",
    "from-real-questions": "dataset_from_real_questions",
    "from-real-questions-score-5": "dataset_from_real_questions_score_5",
    "export-annotation": "dataset_export_annotation",
    "import-annotation": "dataset_import_annotation",
    "judge-pipeline": "dataset_judge_pipeline",
}
LANGUAGES = ("ru", "en")
SYNTHETIC_PROMPT = "dataset_synthetic"
GENERATION_MODEL_ENV = "RAGNB_GENERATION_MODEL"
JUDGE_MODELS_ENV = "RAGNB_JUDGE_MODELS"
LLM_ENV_HELP = ("set RAGNB_LLM_BASE_URL to an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1 for "
                "vLLM or http://127.0.0.1:11434/v1 for Ollama) and its key in RAGNB_LLM_API_KEY (or OPENAI_API_KEY / "
                "OPENROUTER_API_KEY; a keyless local server needs only the URL)")

REVIEW_FIELDS = ("is_question_ok", "is_answer_ok", "is_chunk_ok", "is_confluence_url_ok")
# Written into every annotation file, so a reviewer editing the JSON knows what each field does.
REVIEW_HELP = {
    "is_question_ok": "true: a sensible question a user could ask; false: the item is dropped",
    "is_answer_ok": "true: ground_truth_answer is right and complete; false: the item is dropped, unless you "
                    "correct ground_truth_answer in place (then it is kept as fixed)",
    "is_chunk_ok": "true: chunk_text answers the question; false: chunk_id leaves relevant_chunk_ids (the item "
                   "is dropped when none is left), unless you edit relevant_chunk_ids in place",
    "is_confluence_url_ok": "true: confluence_url is the right source page; false: the url is cleared, unless "
                            "you correct confluence_url in place",
    "notes": "free text for your remarks",
    "null": "a null review field means 'not reviewed yet'; an item with all four null counts as unreviewed",
}
_REVIEW_LIKE = re.compile(r"^is_[a-z0-9_]+_ok$")
_BASELINE_FIELDS = ("ground_truth_answer", "relevant_chunk_ids", "confluence_url", "chunk_id")


@dataclass
class BuildResult:
    """A built dataset, the counts of how it was built (also in ``dataset.metadata``), and warnings."""

    dataset: Dataset
    prefix: str
    report: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Output files
# --------------------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _created_at(now: datetime | None = None) -> str:
    return (now or _now()).isoformat(timespec="seconds")


def timestamped_path(out_dir: str | Path, prefix: str, now: datetime | None = None) -> Path:
    """``<out_dir>/<prefix>_YYYYMMDD_HHMMSS.json`` (local time); ``_2``, ``_3`` … when that name is taken."""
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    base = Path(out_dir) / f"{prefix}_{stamp}.json"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{prefix}_{stamp}_{n}.json")
    return path


def resolve_output(prefix: str, out_dir: str | Path | None = None, output: str | Path | None = None,
                   inputs: tuple[str | Path, ...] = ()) -> Path:
    """Where a mode writes: ``output`` as given, else a timestamped name in ``out_dir`` (default
    ``<outputs>/datasets``). Refuses to overwrite one of the command's own input files."""
    from ragnb.config import outputs_dir

    if output is not None and out_dir is not None:
        raise ValueError("give either --output FILE or --out-dir DIR, not both")
    if output is not None:
        path = Path(output)
        if path.suffix.lower() != ".json":
            raise ValueError(f"--output {path}: datasets are JSON files; name it *.json")
        if path.is_dir():
            raise ValueError(f"--output {path} is a folder; use --out-dir for a folder")
    else:
        path = timestamped_path(Path(out_dir) if out_dir is not None else outputs_dir() / "datasets", prefix)
    for src in inputs:
        if Path(src).resolve() == path.resolve():
            raise ValueError(f"--output {path} is the input file; write the result to another file")
    return path


def write_result(result: BuildResult, path: str | Path) -> Path:
    """Write ``result.dataset`` atomically; its ``name`` becomes the file's stem."""
    path = Path(path)
    ds = result.dataset.model_copy(update={"name": path.stem})
    text = dataset_json(ds)
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write the dataset ({exc.strerror or exc}); choose another --output/--out-dir") from None


def _metadata(mode: str, **fields: Any) -> dict[str, Any]:
    return {"mode": mode, "created_at": _created_at(), **fields}


def _check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"--language {language!r}: use 'ru' or 'en'")
    return language


def _check_count(value: Any, name: str, allow_zero: bool) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "0 for all or a positive number" if allow_zero else "a positive number"
        raise ValueError(f"{name} = {value!r}; use {what}")
    return value


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------


def open_dataset_corpus(corpus: str = "db", language: str = "ru", embedding_model: str = ""):
    """:func:`ragnb.tiers.common.open_corpus`, after checking that the configured database has embedded
    chunks (so an empty database gets a clear message instead of an SQL error)."""
    from ragnb.store.engine import connect
    from ragnb.store.loaders import count_rows
    from ragnb.tiers.common import CORPORA, open_corpus

    _check_language(language)
    if corpus not in CORPORA:
        raise ValueError(f"--corpus {corpus!r}: use 'db' (the configured database) or 'demo' (the bundled XQuAD)")
    if corpus == "db":
        db = connect()
        try:
            counts = count_rows(db, "chunks")
        finally:
            db.dispose()
        if counts["embedded"] == 0:
            raise ValueError(f"{db.display_url}: no embedded chunks ({counts['rows']} chunk rows); load them with "
                             "`ragnb load chunks FILE` and `ragnb embed --chunks`, or use --corpus demo")
    return open_corpus(corpus, language, embedding_model)


def _sql_ids(table: sa.Table) -> sa.ColumnElement:
    return sa.cast(table.c.id, sa.Text)


def embedded_chunk_urls(db) -> dict[str, str | None]:
    """id → url of every chunk that has a vector (what retrieval can return)."""
    from ragnb.store.schema import tables

    t = tables(db.schema).chunk
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(_sql_ids(t), t.c.url).where(t.c.embedding.is_not(None))).all()
    return {r[0]: r[1] for r in rows}


def chunk_texts(db, ids: list[str]) -> dict[str, tuple[str | None, str]]:
    """id → (url, text) of the chunks ``ids``."""
    from ragnb.store.schema import tables

    if not ids:
        return {}
    t = tables(db.schema).chunk
    out: dict[str, tuple[str | None, str]] = {}
    with db.engine.connect() as conn:
        for start in range(0, len(ids), 5000):
            block = list(ids[start:start + 5000])
            stmt = sa.select(_sql_ids(t), t.c.url, t.c.text).where(_sql_ids(t).in_(block))
            out.update({r[0]: (r[1], r[2]) for r in conn.execute(stmt).all()})
    return out


# --------------------------------------------------------------------------------------------
# Mode: synthetic
# --------------------------------------------------------------------------------------------


def resolve_generation_model(model: str = "") -> str:
    """``model``, else ``RAGNB_GENERATION_MODEL``, else the first of ``RAGNB_JUDGE_MODELS``."""
    import os

    if model and model.strip():
        return model.strip()
    env = (os.environ.get(GENERATION_MODEL_ENV) or "").strip()
    if env:
        return env
    judges = [m.strip() for m in (os.environ.get(JUDGE_MODELS_ENV) or "").split(",") if m.strip()]
    if judges:
        return judges[0]
    raise ValueError(f"no model named: pass --model MODEL_ID (e.g. openai/gpt-4o-mini) or set {GENERATION_MODEL_ENV}")


def require_llm(llm: Any) -> Any:
    """The client of ``ragnb.tiers.common.open_llm()``; without an endpoint, an error that says what to set."""
    if getattr(llm, "client", None) is None:
        raise ValueError(f"the synthetic mode needs an LLM and none is configured: {LLM_ENV_HELP}")
    return llm.client


def sample_positions(n: int, k: int, seed: int) -> list[int]:
    """Positions ``0..n-1`` to use: all when ``k >= n``, else ``k`` drawn without replacement with
    ``numpy.random.default_rng(seed)``, in ascending order."""
    if k >= n:
        return list(range(n))
    return sorted(int(i) for i in np.random.default_rng(seed).choice(n, size=k, replace=False))


def select_chunks(db, max_questions: int, seed: int = 0) -> tuple[list[dict], int]:
    """Embedded chunks for the synthetic mode: ids sorted (Python order, independent of the database's
    collation), a seeded sample of ``max_questions`` positions. Returns ([{id, url, text}], n_available)."""
    ids = sorted(embedded_chunk_urls(db))
    picked = [ids[i] for i in sample_positions(len(ids), max_questions, seed)]
    rows = chunk_texts(db, picked)
    return [{"id": cid, "url": rows[cid][0], "text": rows[cid][1]} for cid in picked], len(ids)


def parse_question_answer(obj: Any) -> tuple[str, str]:
    """``parse`` for :meth:`LLMClient.chat_json`: ``{"question": str, "answer": str}``, both non-blank."""
    if not isinstance(obj, dict):
        raise ValueError('expected a JSON object {"question": "...", "answer": "..."}')
    out = []
    for key in ("question", "answer"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f'"{key}" must be a non-empty string')
        out.append(value.strip())
    return out[0], out[1]


async def _generate_all(client: Any, model: str, chunks: list[dict], language: str, max_tokens: int,
                        progress: bool) -> list[dict]:
    from tqdm.auto import tqdm

    from ragnb.llm import LLMOutputError, LLMTransientError
    from ragnb.llm.prompts import prompt

    bar = tqdm(total=len(chunks), desc="synthetic questions", unit="chunk", disable=not progress)

    async def one(chunk: dict) -> dict:
        try:
            if not (chunk["text"] or "").strip():
                return {"ok": False, "reason": "the chunk text is blank"}
            messages = [{"role": "user", "content": prompt(SYNTHETIC_PROMPT, language, chunk=chunk["text"])}]
            try:
                (question, answer), results = await client.chat_json(
                    messages, model=model, parse=parse_question_answer, metric="dataset_synthetic",
                    temperature=0.0, max_tokens=max_tokens)
            except (LLMOutputError, LLMTransientError) as exc:
                return {"ok": False, "reason": exc.message}
            return {"ok": True, "question": question, "answer": answer, "reasks": len(results) - 1}
        finally:
            bar.update(1)

    try:
        return await asyncio.gather(*(one(c) for c in chunks))
    finally:
        bar.close()


def generate_synthetic(corpus: Any, client: Any, model: str, max_questions: int, language: str = "ru",
                       seed: int = 0, endpoint: str | None = None, max_tokens: int = 600,
                       progress: bool = False) -> BuildResult:
    """Seed 001 "synthetic": an LLM writes one question and its reference answer per chunk.

    ``corpus``: :class:`ragnb.tiers.common.Corpus`; ``client``: an :class:`~ragnb.llm.LLMClient`. Chunks: a
    seeded sample (:func:`select_chunks`) of the embedded ones. Each reply must be JSON
    ``{"question", "answer"}``; unusable replies are re-asked within the client's ``reask_budget``, then the
    chunk counts as failed and is listed in ``metadata.failures`` (never silently dropped). A refused request
    (bad key, unknown model) stops the whole mode. Item ids are ``syn-<chunk id>``.
    """
    from ragnb.llm import LLMPermanentError, run_sync

    _check_language(language)
    _check_count(max_questions, "max_questions", allow_zero=False)
    if not isinstance(model, str) or not model.strip():
        raise ValueError("model must be a model id, e.g. openai/gpt-4o-mini")
    chunks, available = select_chunks(corpus.db, max_questions, seed)
    if not chunks:
        raise ValueError(f"{corpus.db.display_url}: no embedded chunks; run `ragnb embed --chunks` first")
    try:
        replies = run_sync(_generate_all(client, model, chunks, language, max_tokens, progress))
    except LLMPermanentError as exc:
        raise ValueError(f"the LLM endpoint refused the request, nothing was written: {exc.message}") from None
    items, failures = [], []
    reasks = 0
    for chunk, reply in zip(chunks, replies):
        if not reply["ok"]:
            failures.append({"chunk_id": chunk["id"], "reason": reply["reason"]})
            continue
        reasks += reply["reasks"]
        items.append(DatasetItem(
            id=f"syn-{chunk['id']}", question=reply["question"], ground_truth_answer=reply["answer"],
            chunk_id=chunk["id"], chunk_text=chunk["text"], confluence_url=chunk["url"],
            relevant_chunk_ids=[chunk["id"]], source="synthetic", question_source="llm", generation_model=model))
    counts = {"chunks_with_embeddings": available, "chunks_selected": len(chunks), "items": len(items),
              "failed": len(failures), "reasks": reasks}
    if not items:
        first = failures[0]["reason"] if failures else "no chunk"
        raise ValueError(f"no question could be generated for any of the {len(chunks)} chunks (first problem: "
                         f"{first}); nothing was written")
    usage = client.usage.summary()["total"] if hasattr(client, "usage") else {}
    meta = _metadata("synthetic", corpus=corpus.label, source_db=corpus.db.display_url,
                     embedding_model=corpus.encoder.name, generation_model=model, llm_endpoint=endpoint,
                     language=language, seed=seed, max_questions=max_questions, counts=counts,
                     failures=failures, llm_usage=usage)
    warnings = [f"{len(failures)} of {len(chunks)} chunks got no usable question (listed in metadata.failures)"] \
        if failures else []
    return BuildResult(Dataset(name="synthetic", type="synthetic", items=items, metadata=meta),
                       FILE_PREFIX["synthetic"], counts, warnings)


# --------------------------------------------------------------------------------------------
# Modes: from-real-questions, from-real-questions-score-5
# --------------------------------------------------------------------------------------------


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


def generate_from_real_questions(corpus: Any, max_questions: int = 0, exact_score: int | None = None,
                                 top_k: int = 5, backend: str = "pgvector") -> BuildResult:
    """Seed 001 "from-real-questions" (``exact_score=5``: "from-real-questions-score-5").

    The first ``max_questions`` logged questions that have an embedding (ordered by id; 0 = all), each
    retrieved against the chunks (top ``top_k`` by cosine, ``backend`` "pgvector" exact search or "memory").
    Per item:

    * ``relevant_chunk_ids`` = every embedded chunk whose url names the same page as the logged url
      (:func:`ragnb.datasets.urls.page_id`), so Tier 1 can score it;
    * ``is_relevant_chunk_matched`` = one of the top-k chunks is on that page (None without a logged url);
    * ``chunk_id``/``chunk_text`` = the best-ranked retrieved relevant chunk, else the top-1 chunk;
    * ``ground_truth_answer`` = the logged answer; ``user_score``, ``question_answer_id``, ``confluence_url``
      (the logged url), ``retrieved_chunk_ids``, ``retrieved_similarities``, ``relevant_rank``.

    Rows without a url are kept with ``relevant_chunk_ids = []`` (Tier 1 counts them as undefined) and
    counted in ``without_url``; a url whose page has no chunk is counted in ``url_not_in_corpus``.
    """
    from ragnb.rag.retrieval import MemoryRetriever, PgVectorRetriever
    from ragnb.store.questions import fetch_question_log
    from ragnb.store.schema import tables
    from ragnb.store.vectors import check_space

    _check_count(max_questions, "max_questions", allow_zero=True)
    _check_count(top_k, "top_k", allow_zero=False)
    if backend not in ("pgvector", "memory"):
        raise ValueError(f"backend = {backend!r}; use 'pgvector' (exact search in the database) or 'memory'")
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
    pages: dict[str, list[str]] = {}
    for cid in sorted(urls):
        pid = page_id(urls[cid])
        if pid is not None:
            pages.setdefault(pid, []).append(cid)
    if backend == "memory":
        retriever = MemoryRetriever.from_db(db)
    else:
        retriever = PgVectorRetriever(db, mode="exact", dim=encoder.dim)
    res = retriever.search(qvecs, top_k)

    picks: list[dict] = []
    counts = Counter()
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
    texts = chunk_texts(db, sorted({p["chunk"] for p in picks if p["chunk"]}))
    items = [
        DatasetItem(
            id=f"rq-{p['qa_id']}", question=p["question"], ground_truth_answer=p["answer"], chunk_id=p["chunk"],
            chunk_text=texts[p["chunk"]][1] if p["chunk"] else None, confluence_url=p["url"],
            relevant_chunk_ids=p["relevant"], source="question_log", question_source="user",
            question_answer_id=p["qa_id"], user_score=p["score"], is_relevant_chunk_matched=p["matched"],
            relevant_rank=p["rank"], retrieved_chunk_ids=p["retrieved"], retrieved_similarities=p["sims"])
        for p in picks
    ]
    with_url = counts["matched"] + counts["not_matched"]
    report = {"items": len(items), "matched": counts["matched"], "not_matched": counts["not_matched"],
              "matched_rate": counts["matched"] / with_url if with_url else None,
              "without_url": counts["without_url"], "url_not_in_corpus": counts["url_not_in_corpus"],
              "without_answer": counts["without_answer"], "skipped_without_embedding": skipped,
              "chunks_with_embeddings": len(urls)}
    warnings = []
    if counts["without_url"]:
        warnings.append(f"{counts['without_url']} question(s) have no logged url: kept with relevant_chunk_ids = [] "
                        "(Tier 1 counts them as undefined)")
    if counts["url_not_in_corpus"]:
        warnings.append(f"{counts['url_not_in_corpus']} logged url(s) name a page with no chunk in the corpus")
    if skipped:
        warnings.append(f"{skipped} logged question(s){where} have no embedding and were left out; "
                        "run `ragnb embed --questions`")
    notes = ["user scores in the demo question log are simulated"] if corpus.label.startswith("demo") else []
    meta = _metadata(mode, corpus=corpus.label, source_db=db.display_url, embedding_model=encoder.name,
                     retrieval={"backend": res.backend, "top_k": top_k}, exact_score=exact_score,
                     max_questions=max_questions, counts=report, notes=notes)
    return BuildResult(Dataset(name=mode, type="real-users", items=items, metadata=meta), FILE_PREFIX[mode],
                       report, warnings)


# --------------------------------------------------------------------------------------------
# Annotation: export and import
# --------------------------------------------------------------------------------------------


def _where(source: str, index: int, item: DatasetItem) -> str:
    return f"{source}: item {index} (id {item.id!r})"


def check_review_fields(item: DatasetItem, index: int, source: str) -> dict[str, Any]:
    """The item's review values ``{field: True/False/None, "notes": str}`` (a missing field = None);
    wrong types and misspelt ``is_…_ok`` fields are errors naming file, item, field and the fix."""
    extra = item.model_extra or {}
    for key in extra:
        if _REVIEW_LIKE.match(key) and key not in REVIEW_FIELDS:
            raise ValueError(f"{_where(source, index, item)} field {key!r}: not a review field; use one of "
                             f"{list(REVIEW_FIELDS)}")
    out: dict[str, Any] = {}
    for key in REVIEW_FIELDS:
        value = extra.get(key)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{_where(source, index, item)} field {key!r}: got {value!r}; use true, false, or "
                             "null (not reviewed yet)")
        out[key] = value
    notes = extra.get("notes")
    if notes is not None and not isinstance(notes, str):
        raise ValueError(f"{_where(source, index, item)} field 'notes': got {notes!r}; write the notes as a "
                         "JSON string (\"\" for none)")
    out["notes"] = notes or ""
    return out


def _effective_ids(item: DatasetItem) -> list[str]:
    if "relevant_chunk_ids" in item.model_fields_set:
        return list(item.relevant_chunk_ids)
    return [item.chunk_id] if item.chunk_id else []


def _baseline_of(item: DatasetItem) -> dict[str, Any]:
    return {"ground_truth_answer": item.ground_truth_answer, "relevant_chunk_ids": _effective_ids(item),
            "confluence_url": item.confluence_url, "chunk_id": item.chunk_id}


def export_annotation(ds: Dataset, source: str | Path = "dataset") -> BuildResult:
    """Seed 001 "export-annotation": a copy of ``ds`` with the review fields on every item
    (``is_question_ok``, ``is_answer_ok``, ``is_chunk_ok``, ``is_confluence_url_ok`` = null, ``notes`` = "").

    Items that already carry review values keep them (re-exporting a half-reviewed file loses nothing).
    ``relevant_chunk_ids`` is written out on every item so a reviewer can edit it. ``metadata.review_baseline``
    keeps each item's exported answer, relevant ids, url and chunk id: import tells a reviewer's correction
    from the original by comparing with it.
    """
    source = str(source)
    old_meta = dict(ds.metadata)
    baseline = dict(old_meta.get("review_baseline") or {}) if isinstance(old_meta.get("review_baseline"), dict) else {}
    items, reviewed = [], 0
    for i, it in enumerate(ds.items):
        review = check_review_fields(it, i, source)
        if any(review[f] is not None for f in REVIEW_FIELDS) or review["notes"]:
            reviewed += 1
        data = it.to_json_dict()
        data["relevant_chunk_ids"] = _effective_ids(it)
        data.update(review)
        items.append(DatasetItem.model_validate(data))
        baseline.setdefault(it.id, _baseline_of(it))
    baseline = {it.id: baseline[it.id] for it in items}
    if old_meta.get("mode") == "export-annotation":  # a re-export: keep pointing at the original dataset
        src_meta = old_meta.get("source_metadata", {})
        source_type = old_meta.get("source_type", ds.type)
        source_file = old_meta.get("source_dataset", source)
    else:
        src_meta, source_type, source_file = old_meta, ds.type, source
    counts = {"items": len(items), "already_reviewed": reviewed}
    meta = _metadata("export-annotation", source_dataset=source_file, source_type=source_type,
                     source_metadata=src_meta, review_fields=REVIEW_HELP, counts=counts, review_baseline=baseline)
    return BuildResult(Dataset(name="annotation", type="annotation", items=items, metadata=meta),
                       FILE_PREFIX["export-annotation"], counts)


def _load_baseline(ds: Dataset, source: str) -> dict[str, dict] | None:
    base = ds.metadata.get("review_baseline")
    if base is None:
        return None
    if not isinstance(base, dict) or not all(isinstance(v, dict) for v in base.values()):
        raise ValueError(f"{source}: metadata.review_baseline must map item id → exported values; it was changed "
                         "by hand — restore it from the exported file or delete the key")
    return base


def _changed_text(now: str | None, before: Any) -> bool:
    return (now or "").strip() != (before or "").strip() and bool((now or "").strip())


def _load_annotation(path: str | Path) -> tuple[Dataset, list[dict], dict | None, str]:
    p = Path(path)
    source = str(p)
    ds = parse_dataset(read_json_file(p, "annotation"), source, p.stem)
    reviews = [check_review_fields(it, i, source) for i, it in enumerate(ds.items)]
    if not any(set(REVIEW_FIELDS) & set(it.model_extra or {}) for it in ds.items):
        raise ValueError(f"{source}: no item has review fields ({', '.join(REVIEW_FIELDS)}); make an annotation "
                         "file with `ragnb dataset export-annotation --dataset FILE` and review it first")
    return ds, reviews, _load_baseline(ds, source), source


def import_annotation(path: str | Path, drop_rejected: bool = True, drop_unreviewed: bool = False) -> BuildResult:
    """Seed 001 "manual": turn a reviewed annotation file into a dataset.

    Per item (a null review field means "not judged" and changes nothing):

    * ``is_question_ok`` false → dropped (``question_rejected``);
    * ``is_answer_ok`` false → dropped (``answer_rejected``) unless the reviewer corrected
      ``ground_truth_answer`` in place (kept, counted as fixed);
    * ``is_chunk_ok`` false → ``chunk_id`` leaves ``relevant_chunk_ids`` (and ``relevance``), ``chunk_text`` is
      cleared and ``chunk_id`` becomes the first remaining relevant chunk; no chunk left → dropped
      (``chunk_rejected``) — unless the reviewer edited ``relevant_chunk_ids`` (used as given, fixed);
    * ``is_confluence_url_ok`` false → the url is cleared, unless it was corrected (fixed).

    Corrections are edits of those fields relative to ``metadata.review_baseline`` (written by
    :func:`export_annotation`); without a baseline no edit can be recognised and rejections drop the item.
    ``drop_rejected=False`` keeps rejected items with ``review_status = "rejected"``; ``drop_unreviewed`` drops
    items whose four review fields are all null. Every kept item gets ``review_status``: unreviewed,
    accepted, adjusted (a chunk or url removed per the review) or fixed.
    """
    ds, reviews, baseline, source = _load_annotation(path)
    warnings: list[str] = []
    if baseline is None:
        warnings.append(f"{source} has no metadata.review_baseline (not made by export-annotation): edited fields "
                        "cannot be recognised as corrections, so every rejection drops its item")
    kept: list[DatasetItem] = []
    dropped: list[dict] = []
    fixed: Counter = Counter()
    adjusted: Counter = Counter()
    fixed_items: list[str] = []
    status_counts: Counter = Counter()
    unreviewed = 0
    for i, (it, rv) in enumerate(zip(ds.items, reviews)):
        base = (baseline or {}).get(it.id)
        data = it.to_json_dict()
        ids = _effective_ids(it)
        answer_fixed = base is not None and _changed_text(it.ground_truth_answer, base.get("ground_truth_answer"))
        ids_fixed = base is not None and "relevant_chunk_ids" in it.model_fields_set and \
            list(it.relevant_chunk_ids) != list(base.get("relevant_chunk_ids") or [])
        url_fixed = base is not None and _changed_text(it.confluence_url, base.get("confluence_url"))
        item_fixed = [name for name, flag in (("ground_truth_answer", answer_fixed), ("relevant_chunk_ids", ids_fixed),
                                              ("confluence_url", url_fixed)) if flag]
        item_adjusted: list[str] = []
        reasons: list[str] = []
        if rv["is_question_ok"] is False:
            reasons.append("question_rejected")
        if rv["is_answer_ok"] is False and not answer_fixed:
            reasons.append("answer_rejected")
        if rv["is_chunk_ok"] is False and not ids_fixed:
            remaining = [c for c in ids if c != it.chunk_id]
            if remaining != ids:
                item_adjusted.append("chunk_removed")
            data["relevant_chunk_ids"] = remaining
            if isinstance(data.get("relevance"), dict):
                data["relevance"] = {c: g for c, g in data["relevance"].items() if c != it.chunk_id} or None
            if not remaining:
                reasons.append("chunk_rejected")
        new_ids = data.get("relevant_chunk_ids", ids)
        if (rv["is_chunk_ok"] is False or ids_fixed) and data.get("chunk_id") not in new_ids:
            # The item's chunk is no longer one of its relevant chunks: its text must not serve as context.
            data["chunk_id"] = new_ids[0] if new_ids else None
            if data.pop("chunk_text", None) is not None:
                item_adjusted.append("chunk_text_cleared")
        if rv["is_confluence_url_ok"] is False and not url_fixed and it.confluence_url is not None:
            data["confluence_url"] = None
            item_adjusted.append("url_cleared")
        is_unreviewed = all(rv[f] is None for f in REVIEW_FIELDS)
        unreviewed += is_unreviewed
        if is_unreviewed and drop_unreviewed:
            reasons.append("unreviewed")
        if reasons and drop_rejected:
            dropped.append({"id": it.id, "index": i, "reasons": reasons})
            continue
        if reasons:
            status = "rejected"
            data["review_reasons"] = reasons
        elif item_fixed:
            status = "fixed"
        elif is_unreviewed:
            status = "unreviewed"
        elif item_adjusted:
            status = "adjusted"
        else:
            status = "accepted"
        data["review_status"] = status
        status_counts[status] += 1
        fixed.update(item_fixed)
        adjusted.update(item_adjusted)
        if item_fixed:
            fixed_items.append(it.id)
        kept.append(DatasetItem.model_validate(data))
    reason_counts = Counter(r for d in dropped for r in d["reasons"])
    removed = sorted(set(baseline or {}) - {it.id for it in ds.items})
    report = {
        "annotation": source, "items_in": len(ds.items), "kept": len(kept), "dropped": len(dropped),
        "dropped_by_reason": dict(sorted(reason_counts.items())), "dropped_items": dropped,
        "status": dict(sorted(status_counts.items())), "fixed": dict(sorted(fixed.items())),
        "fixed_items": fixed_items, "adjusted": dict(sorted(adjusted.items())), "unreviewed": unreviewed,
        "removed_from_file": removed,
    }
    if not kept:
        raise ValueError(f"{source}: every item was dropped ({dict(reason_counts)}); nothing to write — "
                         "check the review fields, or use --keep-rejected")
    meta = _metadata("import-annotation", annotation=source, source_dataset=ds.metadata.get("source_dataset"),
                     source_type=ds.metadata.get("source_type"), source_metadata=ds.metadata.get("source_metadata"),
                     drop_rejected=drop_rejected, drop_unreviewed=drop_unreviewed, counts=report)
    if removed:
        warnings.append(f"{len(removed)} exported item(s) were deleted from the annotation file by hand")
    return BuildResult(Dataset(name="manual", type="manual", items=kept, metadata=meta),
                       FILE_PREFIX["import-annotation"], report, warnings)


# --------------------------------------------------------------------------------------------
# Mode: judge-pipeline
# --------------------------------------------------------------------------------------------


def _judge_item_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(row)"
    return f"field '{loc}': {first['msg']}"


def read_judge_csv(path: str | Path):
    """A judge-pipeline CSV (header: question, answer, ground_truth_show; optional id, context and any other
    columns) as a :class:`ragnb.tiers.judging.JudgePipelineDataset`; empty optional cells are left out.
    Errors name the file, the row (1 = first data row) and its line, and the field."""
    from ragnb.tiers.judging import JudgePipelineDataset, JudgePipelineItem

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: judge-pipeline file not found")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in ("question", "answer", "ground_truth_show") if c not in header]
    if missing:
        raise ValueError(f"{p}: missing column(s) {missing}; the header must name question, answer, "
                         f"ground_truth_show (optional: id, context); found {header}")
    reader.fieldnames = header
    items, seen = [], {}
    for k, row in enumerate(reader, 1):
        where = f"{p}: row {k} (line {reader.line_num})"
        if None in row:
            raise ValueError(f"{where}: more values than header columns; quote values that contain commas")
        data = {key: val for key, val in row.items() if val is not None and (val.strip() or key in
                                                                             ("question", "answer", "ground_truth_show"))}
        data.setdefault("id", f"item-{k}")
        try:
            item = JudgePipelineItem.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{where} {_judge_item_error(exc)}; fix the value or remove the row") from None
        if item.id in seen:
            raise ValueError(f"{where} field 'id': {item.id!r} is repeated (first in row {seen[item.id]}); "
                             "ids must be unique")
        seen[item.id] = k
        items.append(item)
    if not items:
        raise ValueError(f"{p}: the file has no data rows")
    return JudgePipelineDataset(name=p.stem, items=items)


def read_judge_file(path: str | Path):
    """(question, answer, ground_truth_show) rows from CSV, JSON or JSONL — the latter two read exactly as the
    Tier Judge Pipeline notebook reads them (:func:`ragnb.tiers.judging.load_judge_dataset`)."""
    from ragnb.tiers.judging import load_judge_dataset

    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".csv":
        return read_judge_csv(p)
    if any(s in (".json", ".jsonl", ".ndjson") for s in suffixes):
        return load_judge_dataset(p)
    raise ValueError(f"{p}: unknown file type; use .csv, .json or .jsonl (one object per line)")


def _judge_result(items: list[dict], source: str, extra_counts: dict, warnings: list[str], **meta: Any) -> BuildResult:
    from ragnb.tiers.judging import JudgePipelineItem

    ds_items = []
    for d in items:
        JudgePipelineItem.model_validate(d)  # the notebook's own check: what we write, it reads
        ds_items.append(DatasetItem.model_validate(d))
    shows = sum(1 for d in items if d["ground_truth_show"])
    no_context = sum(1 for d in items if not d.get("context"))
    counts = {"items": len(items), "show": shows, "no_show": len(items) - shows, "without_context": no_context,
              **extra_counts}
    if no_context:
        warnings.append(f"{no_context} item(s) have no context: the baseline show/no-show judge (faithfulness to "
                        "the context) needs one; a system with its own judge does not")
    metadata = _metadata("judge-pipeline", source_file=source, counts=counts, **meta)
    return BuildResult(Dataset(name="judge_pipeline", type="judge_pipeline", items=ds_items, metadata=metadata),
                       FILE_PREFIX["judge-pipeline"], counts, warnings)


def judge_pipeline_from_file(path: str | Path) -> BuildResult:
    """Seed 001's judge-pipeline dataset from a CSV/JSON/JSONL file of (question, answer, ground_truth_show)
    rows, optional ``id`` and ``context``. ``ground_truth_show``: true/false, yes/no, 1/0 (any case)."""
    jp = read_judge_file(path)
    items = [it.model_dump(exclude_none=True) for it in jp.items]
    return _judge_result(items, str(path), {}, [], source_kind="file")


def judge_pipeline_from_annotation(path: str | Path) -> BuildResult:
    """The judge-pipeline dataset from a reviewed question-log annotation: question, the logged answer (as
    exported — a reviewer's correction is not what production showed), ground_truth_show = ``is_answer_ok``,
    context = ``chunk_text``. Items with ``is_answer_ok`` null are skipped (``unreviewed``), items without an
    answer too (``without_answer``)."""
    ds, reviews, baseline, source = _load_annotation(path)
    warnings: list[str] = []
    src_mode = (ds.metadata.get("source_metadata") or {}).get("mode") or ds.metadata.get("mode")
    if src_mode not in ("from-real-questions", "from-real-questions-score-5"):
        warnings.append(f"{source} was not made from the question log (mode {src_mode!r}): its answers are "
                        "reference answers, not what production showed")
    items, unreviewed, no_answer = [], 0, 0
    for it, rv in zip(ds.items, reviews):
        if rv["is_answer_ok"] is None:
            unreviewed += 1
            continue
        base = (baseline or {}).get(it.id) or {}
        answer = base.get("ground_truth_answer", it.ground_truth_answer) if baseline else it.ground_truth_answer
        if not (answer or "").strip():
            no_answer += 1
            continue
        d: dict[str, Any] = {"id": it.id, "question": it.question, "answer": answer,
                             "ground_truth_show": rv["is_answer_ok"]}
        if it.chunk_text:
            d["context"] = it.chunk_text
        for key in ("confluence_url", "question_answer_id", "user_score"):
            value = getattr(it, key, None) if key == "confluence_url" else (it.model_extra or {}).get(key)
            if value is not None:
                d[key] = value
        if rv["notes"]:
            d["notes"] = rv["notes"]
        items.append(d)
    if not items:
        raise ValueError(f"{source}: no item has is_answer_ok true or false ({unreviewed} unreviewed, {no_answer} "
                         "without an answer); review the file first")
    if unreviewed:
        warnings.append(f"{unreviewed} item(s) with is_answer_ok null were skipped (not reviewed)")
    return _judge_result(items, source, {"unreviewed_skipped": unreviewed, "without_answer_skipped": no_answer},
                         warnings, source_kind="annotation", source_mode=src_mode)
