"""Tier 2 — generation on a fixed context (seed 000 §5) and Tier 3 — end to end through the system under
test (seed 000 §6), with seed 004's faithfulness fallback, hallucination rate and context utilization.

Per item (a dataset question):

1. context — Tier 2: the dataset's ``chunk_text`` (an item without one fails, with the reason);
   Tier 3: ``system.retrieve(question, top_k)`` (top-1 by default, as the seed's production path), timed;
2. answer — ``system.answer(question, contexts)``, ``consistency_runs`` times (timed on the first run);
   the baseline's LLM repeats carry seed r (r = 1, 2, …) so the disk cache cannot replay the first answer;
3. judged metrics on the first answer, when an LLM judge is given — Tier 2: faithfulness, answer_relevance,
   answer_correctness (1–5); Tier 3: faithfulness, e2e_score. Without a judge, answer_relevance,
   answer_correctness and e2e_score are *not computed* (never estimated); faithfulness always has a value:
   the LLM's, else (judge failed, or no judge) seed 004's embedding-similarity fallback, with the method
   recorded per item;
4. every item's record (contexts, answers, judge verdicts, faithfulness and its method, errors) is appended
   to an :class:`~ragnb.runs.itemlog.ItemLog` the moment it is finished: a killed run, started again on the
   same log, scores only the rest.

Deterministic metrics are computed afterwards on all records: ROUGE-1/2/L F, sentence BLEU (and corpus
BLEU), embedding cosine / dot / euclidean between answer and reference, hallucination_rate = 1 − F,
context_utilization (seed 004, "contains"), response_exact_match_rate and response_semantic_consistency
over the repeated answers, and (Tier 3) ``context_hit@k`` = 1 if a retrieved chunk id is among the item's
relevant chunk ids. An undefined or failed value is NaN, excluded from the mean and counted in
``n_failed`` — never 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.runs.itemlog import ItemLog, fingerprint, run_items
from ragnb.llm import LLMPermanentError, run_sync
from ragnb.metrics.fallback import context_utilization, faithfulness_fallback, hallucination_rate, split_sentences
from ragnb.metrics.stats import aggregate
from ragnb.metrics.text import exact_match_rate, semantic_consistency, text_metrics
from ragnb.io import to_jsonable
from ragnb.rag.embeddings import MemoEncoder
from ragnb.rag.system import BaselineSystem, Context, as_contexts

TIER2_JUDGED = ("faithfulness", "answer_relevance", "answer_correctness")
TIER3_JUDGED = ("faithfulness", "e2e_score")
# Metrics only an LLM judge can give; offline they are left out of the summary (never estimated).
LLM_ONLY = ("answer_relevance", "answer_correctness", "e2e_score")
JUDGED = ("faithfulness", *LLM_ONLY)
_LOG_VERSION = 1  # bump when the record layout changes: old logs are then scored again
_BLOCK = 256  # items retrieved, embedded and scored together (bounds the embedding memo's memory)


@dataclass
class GenerationResult:
    per_item: pd.DataFrame  # one row per dataset item: texts, every metric, methods, reasons, latencies
    summary: dict  # canonical metric name → {mean, ci95, n, n_valid, n_failed}; latency blocks; "info"
    records: dict[str, dict] = field(default_factory=dict)  # the logged per-item records, by log key
    notes: list[str] = field(default_factory=list)  # what was not computed, and why

    @property
    def info(self) -> dict:
        return self.summary["info"]


# --------------------------------------------------------------------------------------------
# Setup helpers for the notebooks
# --------------------------------------------------------------------------------------------


def parse_models(text: str) -> list[str]:
    """``"a, b"`` → ``["a", "b"]`` (blank entries dropped)."""
    if not isinstance(text, str):
        raise ValueError(f"model ids must be given as a comma-separated string, got {type(text).__name__}")
    return [m.strip() for m in text.split(",") if m.strip()]


def make_judge(client: Any, judge_models: str, aggregate: str = "mean", mode: str = "direct",
               language: str = "en") -> tuple[Any, list[str]]:
    """The LLM judge for a tier notebook, or ``None`` with the reason in the returned notes.

    ``client``: :attr:`ragnb.tiers.common.LLMSetup.client` (None offline); ``judge_models``: comma-separated
    model ids. The configuration is validated even when no judge can be built, so a typo fails early.
    """
    from ragnb.llm.judges import JudgeConfig
    from ragnb.llm.judges.scores import Judge

    models = parse_models(judge_models)
    if models:
        config = JudgeConfig(models=models, aggregate=aggregate, mode=mode, language=language)
    if client is None:
        why = "no LLM endpoint is configured (set RAGNB_LLM_BASE_URL or an API-key variable)"
        return None, [f"LLM judge off: {why}." + (f" judge_models {models} were not used." if models else "")]
    if not models:
        return None, ["LLM judge off: judge_models is empty; give one or more model ids to judge with the LLM."]
    return Judge(client, config), []


# --------------------------------------------------------------------------------------------
# Per-item scoring (logged)
# --------------------------------------------------------------------------------------------


def _item_key(item: DatasetItem) -> str:
    # The id alone could hide an edited question or context behind an old log line.
    content = "\x1f".join([item.question, item.chunk_text or "", item.ground_truth_answer or ""])
    return f"{item.id}#{hashlib.sha256(content.encode()).hexdigest()[:10]}"


def _context_dict(c: Context) -> dict:
    return {"id": c.id, "url": c.url, "score": c.score, "text": c.text}


def _judge_row(r: Any) -> dict:
    return {"score": r.score, "method": r.method, "status": r.status, "reason": r.reason,
            "explanation": r.explanation, "models": {m.model: m.score for m in r.model_scores}}


def _answer_method(system: Any) -> str:
    return getattr(system, "answer_method", None) or "external"


def _generation_model(system: Any) -> str | None:
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


async def _retrieve_block(system: Any, questions: list[str], k: int,
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


def _scorer(tier: str, by_key: dict[str, DatasetItem], system: Any, encoder: Any, judge: Any,
            judge_metrics: tuple[str, ...], consistency_runs: int, language: str, retrieved: dict[str, tuple]):
    async def score(key: str) -> dict:
        item = by_key[key]
        reference = item.ground_truth_answer or ""
        rec: dict[str, Any] = {"id": item.id, "question": item.question, "reference": reference,
                               "contexts": [], "answers": [], "answer_errors": [], "error": None, "stage": None,
                               "retrieve_ms": math.nan, "answer_ms": math.nan, "judge": {}, "faithfulness": None}
        if tier == "tier_2":
            if not (item.chunk_text or "").strip():
                rec.update(stage="context", error="the dataset item has no chunk_text: Tier 2 needs the fixed "
                                                  "context (use a dataset with chunk_text, or Tier 3)")
                return to_jsonable(rec)
            contexts = [Context(item.chunk_text, item.chunk_id, item.confluence_url)]
        else:
            contexts, error, rec["retrieve_ms"], rec["retrieve_mode"] = retrieved[key]
            if contexts is None:
                rec.update(stage="retrieval", error=f"retrieval failed: {error}")
                return to_jsonable(rec)
        rec["contexts"] = [_context_dict(c) for c in contexts]

        async def one(repeat: int) -> tuple[str | None, str | None, float]:
            t0 = time.perf_counter()
            try:
                text = await _answer(system, item.question, contexts, repeat)
                if not isinstance(text, str):
                    raise ValueError(f"answer() returned {type(text).__name__}, expected a string")
                return text, None, (time.perf_counter() - t0) * 1000.0
            except LLMPermanentError:
                raise  # a bad key or an unknown model would fail every item: stop the run
            except Exception as exc:  # noqa: BLE001
                return None, _error_text(exc), math.nan

        runs = [await one(0)] + list(await asyncio.gather(*(one(r) for r in range(1, consistency_runs))))
        rec["answers"] = [a for a, _, _ in runs]
        rec["answer_errors"] = [e for _, e, _ in runs]
        rec["answer_ms"] = runs[0][2]
        answer = rec["answers"][0]
        if answer is None:
            rec.update(stage="generation", error=f"generation failed: {runs[0][1]}")
            return to_jsonable(rec)

        texts = [c.text for c in contexts]
        inputs = {"question": item.question, "answer": answer, "context": texts, "reference": reference}
        llm_faith = None
        if judge is not None:
            methods = {m: getattr(judge, m) for m in judge_metrics}
            calls = [fn(**{p: inputs[p] for p in inspect.signature(fn).parameters}) for fn in methods.values()]
            for metric, result in zip(methods, await asyncio.gather(*calls)):
                rec["judge"][metric] = _judge_row(result)
                if metric == "faithfulness":
                    llm_faith = result
        llm_score = None
        if llm_faith is not None:
            llm_score = llm_faith.score if llm_faith.ok else math.nan
        faith = faithfulness_fallback(answer, texts, encoder, language, llm_score=llm_score)
        if llm_faith is not None and not llm_faith.ok and llm_faith.reason:
            faith["reason"] = f"{faith['reason']} (judge: {llm_faith.reason})"
        rec["faithfulness"] = faith
        return to_jsonable(rec)

    return score


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


def _num(v: Any) -> float:
    """Logged values come back with NaN written as null."""
    return math.nan if v is None else float(v)


def _latency(values: Sequence[float], mode: str) -> dict:
    a = np.asarray([v for v in map(_num, values) if not math.isnan(v)], dtype=float)
    if not a.size:
        return {"mean": math.nan, "p50": math.nan, "p95": math.nan, "n": 0, "mode": mode}
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "n": int(a.size), "mode": mode}


def _method_label(score: float, method: str | None, status: str | None) -> str:
    if not math.isnan(score):
        return method or "none"
    return "failed" if status == "failed" else "undefined"


def _per_item(tier: str, items: list[DatasetItem], records: list[dict], encoder: Any, judge_metrics: tuple[str, ...],
              judged: bool, consistency_runs: int, top_k: int, language: str) -> tuple[pd.DataFrame, dict]:
    n = len(records)
    ok = [r["error"] is None for r in records]
    frame = pd.DataFrame({
        "id": [r["id"] for r in records],
        "question": [r["question"] for r in records],
        "reference": [r["reference"] for r in records],
        "answer": [(r["answers"] or [None])[0] for r in records],
        "context": ["\n\n".join(c["text"] for c in r["contexts"]) for r in records],
        "context_ids": [" ".join(str(c["id"]) for c in r["contexts"] if c["id"] is not None) for r in records],
        "error": [r["error"] for r in records],
    })
    methods: dict[str, Counter] = {}

    # Faithfulness (LLM or seed 004 fallback), hallucination rate, context utilization.
    faith = np.full(n, math.nan)
    f_method, f_reason = [None] * n, [None] * n
    for i, r in enumerate(records):
        f = r.get("faithfulness")
        if f is None:
            f_method[i] = "item_failed"
            f_reason[i] = r["error"]
            continue
        faith[i] = _num(f["score"])
        f_method[i] = _method_label(faith[i], f["method"], None)
        f_reason[i] = f.get("reason")
    frame["faithfulness"] = faith
    frame["faithfulness_method"] = f_method
    frame["faithfulness_reason"] = f_reason
    methods["faithfulness"] = Counter(f_method)
    frame["hallucination_rate"] = [hallucination_rate(float(v)) for v in faith]
    frame["context_utilization"] = [
        context_utilization(r["answers"][0], [c["text"] for c in r["contexts"]]) if good else math.nan
        for r, good in zip(records, ok)
    ]

    # LLM-only judged metrics (present only when a judge ran).
    if judged:
        for metric in judge_metrics:
            if metric == "faithfulness":
                continue
            rows = [r["judge"].get(metric) if good else None for r, good in zip(records, ok)]
            scores = np.array([_num(j["score"]) if j else math.nan for j in rows])
            labels = [_method_label(s, j["method"], j["status"]) if j else "item_failed" for s, j in zip(scores, rows)]
            frame[metric] = scores
            frame[f"{metric}_method"] = labels
            frame[f"{metric}_reason"] = [(j["reason"] or None) if j else r["error"] for j, r in zip(rows, records)]
            frame[f"{metric}_explanation"] = [j["explanation"] if j else None for j in rows]
            models = list(dict.fromkeys(m for j in rows if j for m in j["models"]))
            if len(models) > 1:
                for m in models:
                    frame[f"{metric}[{m}]"] = [_num(j["models"].get(m)) if j else math.nan for j in rows]
            methods[metric] = Counter(labels)
        llm_f = [r["judge"].get("faithfulness") if good else None for r, good in zip(records, ok)]
        if any(llm_f):
            frame["faithfulness_llm"] = [_num(j["score"]) if j else math.nan for j in llm_f]

    # Tier 3: did the retrieved context contain a relevant chunk?
    if tier == "tier_3":
        hits = np.full(n, math.nan)
        for i, (item, r) in enumerate(zip(items, records)):
            relevant = {cid for cid, g in item.grades().items() if g > 0}
            ids = [c["id"] for c in r["contexts"]]
            if r["stage"] == "retrieval" or not relevant or not ids or any(c is None for c in ids):
                continue  # undefined: retrieval failed, nothing is relevant, or the system gives no chunk ids
            hits[i] = float(any(c in relevant for c in ids[:top_k]))
        frame[f"context_hit@{top_k}"] = hits

    # Lexical and embedding similarity of the (first) answer to the reference.
    lex_cols = ("rouge1", "rouge2", "rougel", "bleu", "semantic_similarity", "dot_similarity", "euclidean_distance")
    for col in lex_cols:
        frame[col] = math.nan
    idx = [i for i, good in enumerate(ok) if good]
    corpus_bleu = None
    if idx:
        lex, lex_summary = text_metrics([records[i]["answers"][0] for i in idx], [records[i]["reference"] for i in idx],
                                        encoder=encoder, language=language)
        lex = lex.rename(columns={"rougeL": "rougel"})
        for col in lex_cols:
            frame.loc[idx, col] = lex[col].to_numpy()
        corpus_bleu = lex_summary["corpus_bleu"]

    # Stability of repeated answers.
    if consistency_runs >= 2:
        em = np.full(n, math.nan)
        sc = np.full(n, math.nan)
        reasons: list[str | None] = [None] * n
        full = []
        for i, r in enumerate(records):
            if r["error"] is not None:
                reasons[i] = r["error"]
            elif any(a is None for a in r["answers"]):
                reasons[i] = "a repeated answer failed: " + "; ".join(e for e in r["answer_errors"] if e)
            else:
                full.append(i)
                em[i] = exact_match_rate(r["answers"])
        if full:
            vecs = encoder.encode([a for i in full for a in records[i]["answers"]])
            for j, i in enumerate(full):
                sc[i] = semantic_consistency(vecs[j * consistency_runs:(j + 1) * consistency_runs])
        frame["response_exact_match_rate"] = em
        frame["response_semantic_consistency"] = sc
        frame["consistency_reason"] = reasons
        frame["answers"] = [" ⏎ ".join(a if a is not None else "<failed>" for a in r["answers"]) for r in records]

    if tier == "tier_3":
        frame["retrieve_ms"] = [_num(r["retrieve_ms"]) for r in records]
    frame["answer_ms"] = [_num(r["answer_ms"]) for r in records]
    return frame, {"methods": {k: dict(sorted(v.items())) for k, v in methods.items()}, "corpus_bleu": corpus_bleu,
                   "records": records}


def _summary(tier: str, frame: pd.DataFrame, extra: dict, judge_metrics: tuple[str, ...], judged: bool,
             top_k: int, n_boot: int) -> dict:
    order = ["faithfulness", "hallucination_rate", "context_utilization"]
    order += [m for m in JUDGED[1:] if judged and m in judge_metrics]
    if tier == "tier_3":
        order.append(f"context_hit@{top_k}")
    order += ["rouge1", "rouge2", "rougel", "bleu", "semantic_similarity", "dot_similarity", "euclidean_distance",
              "response_exact_match_rate", "response_semantic_consistency"]
    summary: dict[str, Any] = {name: aggregate(frame[name].to_numpy(dtype=float), n_boot=n_boot)
                               for name in order if name in frame}
    cb = extra.get("corpus_bleu")
    summary["corpus_bleu"] = cb["score"] if cb else math.nan
    if tier == "tier_3":
        modes = Counter(r.get("retrieve_mode") for r in extra["records"] if r.get("retrieve_mode"))
        summary["latency_retrieve_ms"] = _latency(frame["retrieve_ms"], modes.most_common(1)[0][0] if modes else "n/a")
    summary["latency_answer_ms"] = _latency(frame["answer_ms"], "per-query")
    return summary


# --------------------------------------------------------------------------------------------
# The tiers
# --------------------------------------------------------------------------------------------


def _run(tier: str, dataset: Dataset, system: Any, encoder: Any, *, judge: Any, judge_metrics: Sequence[str],
         consistency_runs: int, top_k: int, language: str, concurrency: int, n_boot: int,
         log_path: str | Path | None, progress: Callable[[int, int], None] | None) -> GenerationResult:
    from ragnb.llm.judges.scores import SCALES

    if not isinstance(dataset, Dataset) or not dataset.items:
        raise ValueError("dataset must be a ragnb Dataset with at least one item (see ragnb.tiers.common.open_dataset)")
    if isinstance(consistency_runs, bool) or not isinstance(consistency_runs, int) or consistency_runs < 1:
        raise ValueError(f"consistency_runs = {consistency_runs!r}; use 1 (no repeats) or more")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k = {top_k!r}; retrieve at least one chunk per question")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency = {concurrency!r}; use 1 or more")
    if language not in ("auto", "en", "ru"):
        raise ValueError(f"language = {language!r}; use 'ru', 'en' or 'auto'")
    judge_metrics = tuple(judge_metrics)
    unknown = [m for m in judge_metrics if m not in SCALES]
    if unknown:
        raise ValueError(f"judge_metrics {unknown} are not judged metrics; use some of {list(SCALES)}")
    if not callable(getattr(system, "answer", None)) or (tier == "tier_3" and not callable(getattr(system, "retrieve", None))):
        raise ValueError("system must have answer(question, contexts)" + (" and retrieve(question, k)" if tier == "tier_3" else "")
                         + "; build it with ragnb.rag.system.load_system")

    answer_method = _answer_method(system)
    judged = judge is not None
    settings = {
        "version": _LOG_VERSION, "tier": tier, "system": getattr(system, "name", type(system).__name__),
        "answer_method": answer_method, "generation_model": _generation_model(system),
        "temperature": getattr(system, "temperature", None), "max_sentences": getattr(system, "max_sentences", None),
        "judge": None if not judged else {k: getattr(judge.config, k) for k in
                                          ("models", "aggregate", "mode", "language", "temperature", "seed")},
        "judge_metrics": list(judge_metrics) if judged else [], "consistency_runs": consistency_runs,
        "top_k": top_k if tier == "tier_3" else None, "encoder": encoder.name, "language": language,
    }
    log = ItemLog(log_path, fingerprint(settings)) if log_path is not None else None
    keys = [_item_key(it) for it in dataset.items]
    by_key = dict(zip(keys, dataset.items))
    done: dict[str, dict] = {k: r for k, r in (log.done if log is not None else {}).items() if k in by_key}
    pending = [k for k in keys if k not in done]
    resumed = len(keys) - len(pending)

    # The extractive baseline and the faithfulness fallback embed the same questions and context sentences
    # again and again; one memo, primed per block in large batches, serves both.
    memo = MemoEncoder(encoder)
    if isinstance(system, BaselineSystem):
        system = dataclasses.replace(system, encoder=memo if system.encoder is encoder else MemoEncoder(system.encoder))
    for start in range(0, len(pending), _BLOCK):
        block = pending[start:start + _BLOCK]
        questions = [by_key[k].question for k in block]
        retrieved: dict[str, tuple] = {}
        if tier == "tier_3":
            retrieved = dict(zip(block, run_sync(_retrieve_block(system, questions, top_k, concurrency))))
            texts = [c.text for r in retrieved.values() if r[0] for c in r[0]]
        else:
            texts = [by_key[k].chunk_text or "" for k in block]
        memo.prime(questions + [sent for t in texts for sent in split_sentences(t)])
        score = _scorer(tier, by_key, system, memo, judge, judge_metrics if judged else (), consistency_runs,
                        language, retrieved)
        step = None if progress is None else (lambda n, _t, before=resumed + start: progress(before + n, len(keys)))
        done.update(run_sync(run_items(block, score, log, concurrency=concurrency, progress=step)))
        memo.clear()
    records = [done[k] for k in keys]

    # Through the memo: repeated answers, and answers shared by the similarity and consistency metrics,
    # are embedded once.
    frame, extra = _per_item(tier, dataset.items, records, memo, judge_metrics, judged, consistency_runs, top_k,
                             language)
    memo.clear()
    summary = _summary(tier, frame, extra, judge_metrics, judged, top_k, n_boot)

    notes: list[str] = []
    missing = [m for m in (judge_metrics if judged else (TIER2_JUDGED if tier == "tier_2" else TIER3_JUDGED))
               if m in LLM_ONLY]
    if not judged and missing:
        they = "they need" if len(missing) > 1 else "it needs"
        notes.append(f"Not computed: {', '.join(missing)} — {they} an LLM judge, and none was used; omitted, "
                     "not estimated.")
    if not judged:
        notes.append("faithfulness is seed 004's offline fallback (embedding similarity of answer and context "
                     "sentences, sigmoid-mapped), not an LLM judgement; hallucination_rate = 1 − that score.")
    n_fallback = extra["methods"]["faithfulness"].get("embedding", 0)
    if judged and "faithfulness" in judge_metrics and n_fallback:
        notes.append(f"faithfulness: the LLM judge failed on {n_fallback} item(s); they use the embedding fallback "
                     "(method 'embedding' in the per-item table).")
    if consistency_runs < 2:
        notes.append("consistency_runs = 1: response_exact_match_rate and response_semantic_consistency need at "
                     "least 2 answers per question and were not computed.")
    elif answer_method == "extractive":
        notes.append("The extractive baseline is deterministic, so its repeated answers agree by construction.")
    if answer_method == "extractive":
        notes.append("Answers are extractive (the context sentences closest to the question), not LLM-generated, "
                     "so faithfulness and context utilization are high by construction, and the answer latency "
                     "leaves out the embedding (done in batches beforehand): set generation_model and an LLM "
                     "endpoint to evaluate a generator.")
    hit = f"context_hit@{top_k}"
    if tier == "tier_3" and summary[hit]["n_valid"] == 0:
        notes.append(f"{hit} is undefined for every item: the system returned contexts without chunk ids, or the "
                     "dataset items list no relevant_chunk_ids.")
    if answer_method == "llm":
        notes.append("Answer latency includes disk-cache hits (≈ 0 ms) for requests made before; set "
                     "RAGNB_LLM_CACHE_DIR=off to time the endpoint.")
    errors = Counter(r["stage"] for r in records if r["error"] is not None)
    if errors:
        notes.append(f"{sum(errors.values())} of {len(records)} item(s) failed ("
                     + ", ".join(f"{stage}: {c}" for stage, c in sorted(errors.items()))
                     + "); their metrics are NaN and counted in n_failed (see the 'error' column).")
    if resumed:
        notes.append(f"Resumed: {resumed} item(s) were read from {Path(log_path).name}, not scored again.")

    summary["info"] = {
        "judge_backend": "openai-compatible" if judged else "offline-fallback",
        "methods": extra["methods"],
        "answer_method": answer_method,
        "generation_model": _generation_model(system),
        "judge_models": list(judge.config.models) if judged else [],
        "judge_aggregate": judge.config.aggregate if judged else None,
        "judge_mode": judge.config.mode if judged else None,
        "judge_metrics": list(judge_metrics) if judged else ["faithfulness (embedding fallback)"],
        "system": getattr(system, "name", type(system).__name__),
        "embedding_model": encoder.name,
        "consistency_runs": consistency_runs,
        "n_items": len(records),
        "n_failed_items": int(sum(errors.values())),
        "failed_by_stage": dict(sorted(errors.items())),
        "resumed_items": resumed,
        "context": "dataset chunk_text (fixed)" if tier == "tier_2" else f"retrieved top-{top_k}",
        **({"top_k": top_k} if tier == "tier_3" else {}),
    }
    return GenerationResult(frame, summary, dict(zip(keys, records)), notes)


def run_tier2(dataset: Dataset, system: Any, encoder: Any, *, judge: Any = None,
              judge_metrics: Sequence[str] = TIER2_JUDGED, consistency_runs: int = 1, language: str = "auto",
              concurrency: int = 4, n_boot: int = 1000, log_path: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None) -> GenerationResult:
    """Tier 2 (seed 000 §5): answer every question on the dataset's fixed context (``chunk_text``) and score it.

    ``system``: anything with ``answer(question, contexts)`` (:func:`ragnb.rag.system.load_system`); ``encoder``:
    the embedding model for the faithfulness fallback and the similarity metrics; ``judge``: a
    :class:`ragnb.llm.judges.scores.Judge` or None (offline: see the module docstring); ``log_path``: the
    :class:`~ragnb.runs.itemlog.ItemLog` JSONL that makes the run resumable. Summary keys: ``faithfulness``,
    ``hallucination_rate``, ``context_utilization``, [``answer_relevance``, ``answer_correctness`` (1–5) with a
    judge], ``rouge1``, ``rouge2``, ``rougel``, ``bleu`` (mean sentence BLEU, 0–100), ``corpus_bleu``,
    ``semantic_similarity``, ``dot_similarity``, ``euclidean_distance``, [``response_exact_match_rate``,
    ``response_semantic_consistency`` when ``consistency_runs`` ≥ 2], ``latency_answer_ms``, ``info``.
    """
    return _run("tier_2", dataset, system, encoder, judge=judge, judge_metrics=judge_metrics,
                consistency_runs=consistency_runs, top_k=1, language=language, concurrency=concurrency,
                n_boot=n_boot, log_path=log_path, progress=progress)


def run_tier3(dataset: Dataset, system: Any, encoder: Any, *, top_k: int = 1, judge: Any = None,
              judge_metrics: Sequence[str] = TIER3_JUDGED, consistency_runs: int = 1, language: str = "auto",
              concurrency: int = 4, n_boot: int = 1000, log_path: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None) -> GenerationResult:
    """Tier 3 (seed 000 §6): retrieve ``top_k`` contexts (default 1, the seed's production path) through the
    system under test, answer, and score the answer against the reference.

    As :func:`run_tier2`, plus ``context_hit@k`` (1 if a retrieved chunk id is among the item's relevant
    chunk ids; NaN when the system gives no ids or the item has no relevant ids), ``e2e_score`` (0–1, with a
    judge) and ``latency_retrieve_ms``. Faithfulness is judged against the *retrieved* context.
    """
    return _run("tier_3", dataset, system, encoder, judge=judge, judge_metrics=judge_metrics,
                consistency_runs=consistency_runs, top_k=top_k, language=language, concurrency=concurrency,
                n_boot=n_boot, log_path=log_path, progress=progress)


def worst_items(per_item: pd.DataFrame, by: str, n: int = 10, ascending: bool = True) -> pd.DataFrame:
    """The ``n`` items with the lowest ``by`` (failed items first), with the texts needed to read them."""
    if by not in per_item:
        raise ValueError(f"per_item has no column {by!r}; columns: {list(per_item.columns)}")
    cols = [c for c in ("id", by, f"{by}_method", "question", "answer", "reference", "context", "error")
            if c in per_item]
    return per_item.sort_values(by, ascending=ascending, na_position="first").head(n)[cols]


__all__ = ["GenerationResult", "JUDGED", "LLM_ONLY", "TIER2_JUDGED", "TIER3_JUDGED", "make_judge", "parse_models",
           "run_tier2", "run_tier3", "worst_items"]
