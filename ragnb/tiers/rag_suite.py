"""The RAG metric suite over a dataset of (question, retrieved contexts, response, reference).

With an LLM endpoint: the ragas-style metrics (see docs/metrics.md, Ragas-style suite) and the NVIDIA-style metrics
(see docs/metrics.md, NVIDIA-style metrics), each item persisted as it finishes (an interrupted run resumes). Always,
also offline: the faithfulness fallback (see docs/metrics.md, Faithfulness; the method that agrees best with human
labels, method recorded), hallucination rate, context utilization, and the lexical (ROUGE, BLEU, exact match, token
F1, answer recall) and semantic comparison with the reference. LLM-only metrics
are never imitated offline: they are listed as not computed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragnb.io import check_unique, iter_json_records, read_text
from ragnb.metrics.fallback import OFFLINE_LABEL, agreement_note
from ragnb.metrics.fallback_trust import agreement_rows, mark_trust
from ragnb.tiers.itemlog import ItemLog, fingerprint, run_items
from ragnb.metrics.stats import aggregate
from ragnb.spec import by_stem
from ragnb.tiers.result import TierResult

RAGAS_METRICS = ("faithfulness", "context_precision", "context_recall", "context_entity_recall",
                 "noise_sensitivity", "response_relevancy")
NVIDIA_METRICS = ("nv_context_relevance", "nv_response_groundedness", "nv_answer_accuracy")
LLM_METRICS = RAGAS_METRICS + NVIDIA_METRICS

_FIELDS = {  # accepted spellings in a dataset file, first match wins
    "id": ("id", "sample_id", "query_id"),
    "user_input": ("user_input", "question", "userInput", "query"),
    "retrieved_contexts": ("retrieved_contexts", "contexts", "retrievedContexts"),
    "response": ("response", "answer"),
    "reference": ("reference", "ground_truth_answer", "ground_truth", "reference_answer"),
}


@dataclass
class SuiteResult(TierResult):
    """``per_item``: one row per sample, indexed by its id (written with an ``id`` column); ``summary``:
    every numeric column's aggregate and ``methods`` (how each score was produced)."""

    def item_table(self) -> pd.DataFrame:
        return self.per_item.reset_index(names="id")


def _pick(row: dict, name: str):
    for key in _FIELDS[name]:
        if key in row:
            return row[key]
    return None


def normalise_sample(row: Any, where: str) -> dict:
    """One dataset row → {id, user_input, retrieved_contexts, response, reference}; ValueError names the field."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object with question, retrieved_contexts, response, reference")
    out = {name: _pick(row, name) for name in _FIELDS}
    for name in ("user_input", "response"):
        if not isinstance(out[name], str) or not out[name].strip():
            raise ValueError(f"{where}: field '{name}' (or {', '.join(_FIELDS[name][1:])}) must be a non-empty string")
    ctx = out["retrieved_contexts"]
    if not isinstance(ctx, list) or not ctx or not all(isinstance(c, str) for c in ctx):
        raise ValueError(f"{where}: field 'retrieved_contexts' must be a non-empty list of strings")
    if out["reference"] is not None and not isinstance(out["reference"], str):
        raise ValueError(f"{where}: field 'reference' must be a string or absent")
    return out


def load_rag_dataset(path: str | Path) -> list[dict]:
    """A JSON array (or ``{"items": [...]}``) or JSONL(.gz) of samples; errors name the file, line/item and
    field; ids default to the position and must be unique."""
    p = Path(path)
    samples, seen = [], {}
    text = read_text(p, "RAG dataset file")
    for i, (where, row) in enumerate(iter_json_records(p, "sample", text=text)):
        s = normalise_sample(row, where)
        s["id"] = str(s["id"]) if s["id"] is not None else str(i)
        check_unique(seen, s["id"], where)
        samples.append(s)
    if not samples:
        raise ValueError(f"{p}: no samples")
    return samples


def answer_model(client: Any, generation_model: str = "") -> tuple[str, str | None]:
    """The model that writes the answers of samples built from the baseline (``generation_model``, else
    ``RAGNB_GENERATION_MODEL``) and, when there is none to use, the note saying why the answers are extractive."""
    import os

    from ragnb.datasets.synthetic import GENERATION_MODEL_ENV

    model = (generation_model or os.environ.get(GENERATION_MODEL_ENV, "")).strip()
    why = None
    if client is None:
        why = "no LLM endpoint is configured (RAGNB_LLM_BASE_URL or an API-key variable)"
    elif not model:
        why = f"an LLM endpoint is configured but no generation model was given (generation_model or {GENERATION_MODEL_ENV})"
    if why is None:
        return model, None
    return "", ("The samples' answers are extractive (the context sentences closest to the question), not "
                f"LLM-generated, because {why}; faithfulness and context utilization are high by construction.")


def samples_from_system(questions: Any, system: Any, top_k: int) -> tuple[list[dict], list[str]]:
    """Suite samples made by running a system under test on a dataset's questions (the demo's, or the database's
    question log — :func:`ragnb.datasets.corpus.open_questions`) as Tier 3 runs it
    (:func:`ragnb.rag.system.run_system`): its top-k contexts and its answer per item, the item's reference answer. Returns the samples and notes: log rows
    without a question, questions the system failed on (no sample: counted and named), and where the references are
    logged answers."""
    from ragnb.rag.system import run_system

    items = questions.items
    outs = run_system(system, [it.question for it in items], top_k)
    samples, failed = [], []
    for it, out in zip(items, outs):
        if out.error or not out.answer:
            failed.append((it.id, out.error or "an empty answer"))
            continue
        samples.append({"id": it.id, "user_input": it.question, "retrieved_contexts": [c.text for c in out.contexts],
                        "response": out.answer, "reference": it.ground_truth_answer})
    notes = []
    blank = (questions.metadata.get("counts") or {}).get("without_question")
    if blank:
        notes.append(f"{blank} logged row(s) have no question text and were left out.")
    if failed:
        notes.append(f"{len(failed)} of {len(items)} question(s) got no answer from the system and are not among the "
                     f"samples (e.g. {failed[0][0]!r}: {failed[0][1][:200]}).")
    logged = sum(getattr(it, "source", None) == "question_log" and bool(it.ground_truth_answer) for it in items)
    if logged:
        notes.append(f"The reference of {logged} question(s) is the answer logged in production, not a verified "
                     "reference: reference-based scores (ROUGE, BLEU, semantic similarity, context recall, answer "
                     "accuracy) measure agreement with what production answered.")
    return samples, notes


# ------------------------------------------------------------------------------------ offline part


def offline_metrics(samples: list[dict], encoder: Any, language: str = "auto") -> pd.DataFrame:
    """Per item: the faithfulness fallback (see docs/metrics.md, Faithfulness; method recorded), hallucination rate,
    context utilization (the original "contains"), and ROUGE/BLEU/exact match/token F1/answer recall/semantic
    similarity against the reference when present."""
    from ragnb.metrics.fallback import context_utilization, faithfulness_fallback, hallucination_rate
    from ragnb.metrics.text import text_metrics

    rows = []
    for s in samples:
        f = faithfulness_fallback(s["response"], s["retrieved_contexts"], encoder=encoder, language=language)
        # the question and response ride along so a label sheet shows what was judged and binds each human label
        # to this answer (ragnb.tiers.human_labels refuses a label of another answer)
        rows.append({"id": s["id"], "question": s["user_input"], "response": s["response"],
                     "fallback_faithfulness": f["score"], "fallback_faithfulness_method": f["method"],
                     "hallucination_rate": hallucination_rate(f["score"]),
                     "context_utilization": context_utilization(s["response"], s["retrieved_contexts"])})
    frame = pd.DataFrame(rows).set_index("id")
    with_ref = [s for s in samples if s.get("reference")]
    if with_ref:
        text, _ = text_metrics([s["response"] for s in with_ref], [s["reference"] for s in with_ref],
                               encoder=encoder, language=language)
        text.index = [s["id"] for s in with_ref]
        frame = frame.join(text[[c for c in text.columns if c not in frame.columns]])
    return frame


# ---------------------------------------------------------------------------------------- LLM part


def _llm_metric(name: str, models: list[str], aggregate_how: str, language: str, encoder: Any):
    """(async evaluate(sample, client) -> EvaluationResult, settings that the score depends on)."""
    from ragnb.judges import JudgeConfig, get_llm_metric

    config = JudgeConfig(models=list(models), aggregate=aggregate_how, language=language)
    # The suite's "noise_sensitivity" is the registered noise_sensitivity_relevant (ragas' default mode): the
    # tier's alias, which also gives the name its direction in comparisons and gates.
    registered = by_stem("rag_metrics").aliases.get(name, name)
    metric = get_llm_metric(registered, **({"encoder": encoder} if name == "response_relevancy" else {}))

    async def evaluate(sample: dict, client: Any):
        return await metric.evaluate(sample, client, config)

    return evaluate, {"metric": name, **metric.settings(config)}


def _needs_reference(name: str) -> bool:
    return name in ("context_recall", "context_entity_recall", "noise_sensitivity", "nv_answer_accuracy")


async def llm_metrics(samples: list[dict], client: Any, metrics: list[str], models: list[str], aggregate_how: str,
                      language: str, encoder: Any, log_dir: Path | None, concurrency: int,
                      notes: list[str] | None = None) -> pd.DataFrame:
    """Every LLM metric on every sample; each finished item is logged under ``log_dir`` (resumable: failed
    items are scored again, and ``notes`` gets what each log gave back)."""
    columns: dict[str, dict[str, Any]] = {}
    for name in metrics:
        evaluate, settings = _llm_metric(name, models, aggregate_how, language, encoder)
        usable = [s for s in samples if not _needs_reference(name) or s.get("reference")]
        by_id = {s["id"]: s for s in usable}
        log = ItemLog(log_dir / f"rag_metrics.{name}.items.jsonl", fingerprint(settings)) if log_dir else None

        async def score(key: str, evaluate=evaluate, by_id=by_id) -> dict:
            r = await evaluate(by_id[key], client)
            return {"score": r.score, "status": r.status, "method": r.method, "reason": r.reason,
                    "explanation": r.explanation, **{f"score[{m.model}]": m.score for m in r.model_scores}}

        records = await run_items(list(by_id), score, log, concurrency)
        if log is not None and log.resume_note() and notes is not None:
            notes.append(f"{name}: {log.resume_note()}")
        for key, rec in records.items():
            row = columns.setdefault(key, {})
            row[name] = rec["score"] if rec["score"] is not None else math.nan
            row[f"{name}_status"] = rec["status"]
            if rec.get("reason"):
                row[f"{name}_reason"] = rec["reason"]
    return pd.DataFrame.from_dict(columns, orient="index")


# ------------------------------------------------------------------------------------------ suite


def run_rag_suite(samples: list[dict], encoder: Any, *, client: Any = None, metrics: list[str] | None = None,
                  models: list[str] | None = None, aggregate_how: str = "mean", language: str = "en",
                  log_dir: Path | None = None, concurrency: int = 16, n_boot: int = 1000) -> SuiteResult:
    """Score ``samples``. Offline metrics always; the LLM metrics when ``client`` and ``models`` are given."""
    if not samples:
        raise ValueError("no samples to score")
    metrics = list(metrics) if metrics is not None else list(LLM_METRICS)
    unknown = sorted(set(metrics) - set(LLM_METRICS))
    if unknown:
        raise ValueError(f"unknown suite metric(s) {unknown}; known: {list(LLM_METRICS)}")
    notes: list[str] = []
    frame = offline_metrics(samples, encoder, "auto")
    if client is not None and models:
        from ragnb.llm import run_sync

        llm = run_sync(llm_metrics(samples, client, metrics, list(models), aggregate_how, language, encoder,
                                   log_dir, concurrency, notes))
        frame = frame.join(llm, how="left")
        if client.failure_note():
            notes.append(client.failure_note())
        missing_ref = sum(1 for s in samples if not s.get("reference"))
        if missing_ref and any(_needs_reference(m) for m in metrics):
            notes.append(f"{missing_ref} samples have no reference: reference-based metrics skip them (counted as failed).")
    else:
        notes.append("No LLM endpoint configured (or no judge_models): the LLM metrics "
                     f"{', '.join(metrics)} were not computed. Faithfulness is the offline fallback "
                     f"(fallback_faithfulness, {OFFLINE_LABEL}), never presented as an LLM judgement; the method "
                     f"was {agreement_note()} (summary['fallback_agreement']).")
    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
    summary: dict[str, Any] = {c: aggregate(frame[c].to_numpy(dtype=float), n_boot=n_boot) for c in numeric}
    summary["methods"] = {"fallback_faithfulness": dict(Counter(frame["fallback_faithfulness_method"]))}
    summary["fallback_agreement"] = agreement_rows()
    trust_note = mark_trust(summary, ("fallback_faithfulness", "hallucination_rate"))
    notes += [trust_note] if trust_note else []
    for name in metrics:
        if f"{name}_status" in frame:
            statuses = frame[f"{name}_status"].fillna("skipped")
            summary["methods"][name] = dict(Counter(statuses))
            if name in summary:  # items a partial jury scored (some judge models failed), counted in n_valid
                summary[name]["n_partial"] = int((statuses == "partial").sum())
    meta = {"judge_backend": "openai-compatible" if client is not None else "offline-fallback",
            "judge_model": ", ".join(models or []) or None, "embedding_model": encoder.name}
    return SuiteResult(frame, summary, notes, meta=meta)


def top_rows(frame: pd.DataFrame, samples: list[dict], column: str, n: int, ascending: bool = True) -> pd.DataFrame:
    """The ``n`` items with the lowest (or highest) ``column``, with their question, response and first context."""
    by_id = {s["id"]: s for s in samples}
    part = frame[[column]].dropna().sort_values(column, ascending=ascending).head(n).copy()
    part["question"] = [by_id[i]["user_input"] for i in part.index]
    part["response"] = [by_id[i]["response"] for i in part.index]
    part["context_1"] = [by_id[i]["retrieved_contexts"][0] for i in part.index]
    return part

