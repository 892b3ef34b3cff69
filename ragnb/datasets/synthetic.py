"""Mode ``synthetic``: an LLM writes one question and its reference answer per sampled chunk."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np

from ragnb.datasets.build import (FILE_PREFIX, BuildResult, check_count, check_language, chunk_texts,
                                  embedded_chunk_urls, mode_metadata)
from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.io import comma_list

SYNTHETIC_PROMPT = "dataset_synthetic"
GENERATION_MODEL_ENV = "RAGNB_GENERATION_MODEL"
JUDGE_MODELS_ENV = "RAGNB_JUDGE_MODELS"
LLM_ENV_HELP = ("set RAGNB_LLM_BASE_URL to an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1 for "
                "vLLM or http://127.0.0.1:11434/v1 for Ollama) and its key in RAGNB_LLM_API_KEY (or OPENAI_API_KEY / "
                "OPENROUTER_API_KEY; a keyless local server needs only the URL)")



def resolve_generation_model(model: str = "") -> str:
    """``model``, else ``RAGNB_GENERATION_MODEL``, else the first of ``RAGNB_JUDGE_MODELS``."""
    if model and model.strip():
        return model.strip()
    env = (os.environ.get(GENERATION_MODEL_ENV) or "").strip()
    if env:
        return env
    judges = comma_list(os.environ.get(JUDGE_MODELS_ENV), JUDGE_MODELS_ENV)
    if judges:
        return judges[0]
    raise ValueError(f"no model named: pass --model MODEL_ID (e.g. openai/gpt-4o-mini) or set {GENERATION_MODEL_ENV}")


def require_llm(llm: Any) -> Any:
    """The client of ``ragnb.datasets.corpus.open_llm()``; without an endpoint, an error that says what to set."""
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
    from ragnb.llm import LLMOutputError, LLMTransientError
    from ragnb.llm.prompts import prompt
    from ragnb.llm.replies import strip_reasoning
    from ragnb.progress import reporter

    report = reporter("synthetic questions", "chunks") if progress else None
    finished = 0

    async def one(chunk: dict) -> dict:
        nonlocal finished
        try:
            if not (chunk["text"] or "").strip():
                return {"ok": False, "reason": "the chunk text is blank"}
            messages = [{"role": "user", "content": prompt(SYNTHETIC_PROMPT, language, chunk=chunk["text"])}]
            try:
                (question, answer), results = await client.chat_json(
                    messages, model=model, parse=parse_question_answer, metric="dataset_synthetic",
                    temperature=0.0, max_tokens=max_tokens)
            except LLMOutputError as exc:
                return {"ok": False, "reason": exc.message, "reasks": len(exc.results) - 1}
            except LLMTransientError as exc:
                return {"ok": False, "reason": exc.message, "reasks": 0}
            # The JSON came from the final answer; a reasoning tag inside its strings is removed too.
            return {"ok": True, "question": strip_reasoning(question), "answer": strip_reasoning(answer),
                    "reasks": len(results) - 1}
        finally:
            finished += 1
            if report is not None:
                report(finished, len(chunks))

    return await asyncio.gather(*(one(c) for c in chunks))


def generate_synthetic(corpus: Any, client: Any, model: str, max_questions: int, language: str = "ru",
                       seed: int = 0, endpoint: str | None = None, max_tokens: int = 600,
                       progress: bool = False) -> BuildResult:
    """Mode "synthetic": an LLM writes one question and its reference answer per chunk.

    ``corpus``: :class:`ragnb.datasets.corpus.Corpus`; ``client``: an :class:`~ragnb.llm.LLMClient`. Chunks: a
    seeded sample (:func:`select_chunks`) of the embedded ones. Each reply must be JSON
    ``{"question", "answer"}``; unusable replies are re-asked within the client's ``reask_budget``, then the
    chunk counts as failed and is listed in ``metadata.failures`` (never silently dropped). A refused request
    (bad key, unknown model) stops the whole mode. Item ids are ``syn-<chunk id>``.
    """
    from ragnb.llm import LLMPermanentError, run_sync

    check_language(language)
    check_count(max_questions, "max_questions", allow_zero=False)
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
        reasks += reply.get("reasks", 0)  # of failed chunks too: every re-ask was a request
        if not reply["ok"]:
            failures.append({"chunk_id": chunk["id"], "reason": reply["reason"]})
            continue
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
    meta = mode_metadata("synthetic", corpus=corpus.label, source_db=corpus.db.display_url,
                         embedding_model=corpus.encoder.name, generation_model=model, llm_endpoint=endpoint,
                         language=language, seed=seed, max_questions=max_questions, counts=counts,
                         failures=failures, llm_usage=usage)
    warnings = [f"{len(failures)} of {len(chunks)} chunks got no usable question (listed in metadata.failures)"] \
        if failures else []
    return BuildResult(Dataset(name="synthetic", type="synthetic", items=items, metadata=meta),
                       FILE_PREFIX["synthetic"], counts, warnings)

