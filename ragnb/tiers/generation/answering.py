"""Answering and judging one dataset item (Tier 2 / Tier 3), each finished item logged at once."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import math
import time
from typing import Any


from ragnb.datasets.schema import DatasetItem
from ragnb.io import to_jsonable
from ragnb.llm import LLMPermanentError
from ragnb.llm.replies import strip_reasoning
from ragnb.metrics.fallback import faithfulness_fallback
from ragnb.rag.system import BaselineSystem, Context, as_contexts


def item_key(item: DatasetItem) -> str:
    # The id alone could hide an edited question or context behind an old log line.
    content = "\x1f".join([item.question, item.chunk_text or "", item.ground_truth_answer or ""])
    return f"{item.id}#{hashlib.sha256(content.encode()).hexdigest()[:10]}"


def _context_dict(c: Context) -> dict:
    return {"id": c.id, "url": c.url, "score": c.score, "text": c.text}


def _judge_row(r: Any) -> dict:
    return {"score": r.score, "method": r.method, "status": r.status, "reason": r.reason,
            "explanation": r.explanation, "models": {m.model: m.score for m in r.model_scores},
            "n_models_ok": r.n_models_ok, "n_models_failed": r.n_models_failed}


def answer_method(system: Any) -> str:
    return getattr(system, "answer_method", None) or "external"


def generation_model(system: Any) -> str | None:
    return system.model if isinstance(system, BaselineSystem) and system.answer_method == "llm" else None


async def _answer(system: Any, question: str, contexts: list[Context], repeat: int) -> str:
    if isinstance(system, BaselineSystem):
        if system.answer_method == "llm":
            return await system.aanswer(question, contexts, seed=repeat or None)
        # Extractive: CPU work on the shared encoder, kept on this thread (a fast tokenizer must not be
        # used from several threads at once).
        return system.answer(question, contexts)
    aanswer = getattr(system, "aanswer", None)
    if inspect.iscoroutinefunction(aanswer):
        return await aanswer(question, contexts)
    return await asyncio.to_thread(system.answer, question, contexts)


async def retrieve_block(system: Any, questions: list[str], k: int,
                          concurrency: int) -> list[tuple[list[Context] | None, str | None, float, str]]:
    """(contexts or None, error, latency ms, latency mode) per question. The baseline retrieves the whole
    block in one batched call (latency amortised over it); other systems one question at a time, in threads."""
    where = f"{getattr(system, 'name', 'system')}.retrieve"
    if isinstance(system, BaselineSystem):
        t0 = time.perf_counter()
        try:
            raw = system.retrieve_many(questions, k)
        except Exception as exc:  # noqa: BLE001 - recorded on every item of the block
            return [(None, _error_text(exc), math.nan, "amortised")] * len(questions)
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(questions))
        return [(as_contexts(r, where)[:k], None, ms, "amortised") for r in raw]
    sem = asyncio.Semaphore(concurrency)

    async def one(question: str) -> tuple[list[Context] | None, str | None, float, str]:
        async with sem:
            t0 = time.perf_counter()
            try:
                contexts = as_contexts(await asyncio.to_thread(system.retrieve, question, k), where)[:k]
            except Exception as exc:  # noqa: BLE001 - one failing question must not stop the run
                return None, _error_text(exc), math.nan, "per-query"
            return contexts, None, (time.perf_counter() - t0) * 1000.0, "per-query"

    return list(await asyncio.gather(*(one(q) for q in questions)))


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:500] + "…"


def scorer(by_key: dict[str, DatasetItem], contexts_of: dict[str, dict], system: Any, encoder: Any, judge: Any,
           judge_metrics: tuple[str, ...], consistency_runs: int, language: str):
    """The per-item coroutine for :func:`ragnb.tiers.itemlog.run_items`: ``contexts_of[key]`` holds the item's
    contexts (or the stage and error that left it without any) and any retrieval timing to record."""
    async def score(key: str) -> dict:
        item = by_key[key]
        reference = item.ground_truth_answer or ""
        rec: dict[str, Any] = {"id": item.id, "question": item.question, "reference": reference,
                               "contexts": [], "answers": [], "answer_errors": [], "error": None, "stage": None,
                               "retrieve_ms": math.nan, "answer_ms": math.nan, "judge": {}, "faithfulness": None}
        entry = contexts_of[key]
        rec.update({k: v for k, v in entry.items() if k != "contexts"})
        contexts = entry.get("contexts")
        if contexts is None:
            return to_jsonable(rec)
        rec["contexts"] = [_context_dict(c) for c in contexts]

        removed: list[int] = []
        runs = await _answers(system, item.question, contexts, consistency_runs, removed)
        rec["reasoning_removed"] = len(removed)
        rec["answers"] = [a for a, _, _ in runs]
        rec["answer_errors"] = [e for _, e, _ in runs]
        rec["answer_ms"] = runs[0][2]
        answer = rec["answers"][0]
        if answer is None:
            rec.update(stage="generation", error=f"generation failed: {runs[0][1]}")
            return to_jsonable(rec)

        texts = [c.text for c in contexts]
        llm_faith = None
        if judge is not None:
            from ragnb.judges.sample import Sample
            from ragnb.judges.scores import SCORES

            # The direct judge scores through the one LLM-metric API (imported here: only a judged run loads
            # them); rec["judge"] is keyed by the judged aspect (faithfulness, e2e_score, …).
            sample = Sample(user_input=item.question, response=answer, reference=reference, retrieved_contexts=texts)
            calls = [SCORES[m].evaluate(sample, judge.client, judge.config) for m in judge_metrics]
            for metric, result in zip(judge_metrics, await asyncio.gather(*calls)):
                rec["judge"][metric] = _judge_row(result)
                if metric == "faithfulness":
                    llm_faith = result
        rec.update(_faithfulness(answer, texts, encoder, language, llm_faith))
        return to_jsonable(rec)

    return score


async def _answers(system: Any, question: str, contexts: list[Context], consistency_runs: int,
                   removed: list[int]) -> list[tuple[str | None, str | None, float]]:
    """(answer or None, error, ms) per repeat: the first alone (it is timed), the repeats together; the repeats
    whose reasoning block was removed are added to ``removed``."""
    async def one(repeat: int) -> tuple[str | None, str | None, float]:
        t0 = time.perf_counter()
        try:
            text = await _answer(system, question, contexts, repeat)
            if not isinstance(text, str):
                raise ValueError(f"answer() returned {type(text).__name__}, expected a string")
            # A reasoning block is not the answer: it is neither judged nor compared (the report counts them).
            clean = strip_reasoning(text)
            if clean != text.strip():
                removed.append(repeat)
            return clean, None, (time.perf_counter() - t0) * 1000.0
        except LLMPermanentError:
            raise  # a bad key or an unknown model would fail every item: stop the run
        except Exception as exc:  # noqa: BLE001
            return None, _error_text(exc), math.nan

    return [await one(0)] + list(await asyncio.gather(*(one(r) for r in range(1, consistency_runs))))


def _faithfulness(answer: str, texts: list[str], encoder: Any, language: str, llm_faith: Any) -> dict:
    """``{"faithfulness": the judge's verdict (score NaN, status failed when every judge model failed) — or,
    with no judge, the offline fallback; "fallback_faithfulness": the offline fallback when a judge ran}``.
    The fallback is never put in the judge's place: averaged into an LLM metric it would hide the failure."""
    fallback = faithfulness_fallback(answer, texts, encoder, language)
    if llm_faith is None:
        return {"faithfulness": fallback}
    judged = {"score": llm_faith.score if llm_faith.ok else math.nan, "method": "llm", "status": llm_faith.status,
              "reason": llm_faith.reason or None}
    return {"faithfulness": judged, "fallback_faithfulness": fallback}
