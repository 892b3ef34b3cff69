"""From the logged per-item records to the per-item table and the summary of Tier 2 / Tier 3.

Faithfulness is reported under the name of what produced it (see docs/metrics.md, Faithfulness):
``judge_faithfulness`` when an LLM judged it (an item every judge model failed on is NaN, ``failed``, counted in
``n_failed``), ``fallback_faithfulness`` for the offline fallback — alone when no judge ran, else beside the
judge's score, never averaged into it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from ragnb.datasets.schema import DatasetItem
from ragnb.metrics.answer import ANSWER_METRICS
from ragnb.metrics.fallback import context_utilization, hallucination_rate
from ragnb.metrics.stats import aggregate
from ragnb.metrics.text import exact_match_rate, semantic_consistency, text_metrics
from ragnb.metrics.stats import latency_summary

# Metrics only an LLM judge can give; offline they are left out of the summary (never estimated).
LLM_ONLY = ("answer_relevance", "answer_correctness", "e2e_score")
JUDGED = ("faithfulness", *LLM_ONLY)
LEXICAL = ("rouge1", "rouge2", "rougel", "bleu", *ANSWER_METRICS,
           "semantic_similarity", "dot_similarity", "euclidean_distance")
CONSISTENCY = ("response_exact_match_rate", "response_semantic_consistency")


def faithfulness_key(judged: bool, judge_metrics: tuple[str, ...]) -> str:
    """``judge_faithfulness`` when an LLM judge scores faithfulness, else ``fallback_faithfulness``."""
    return "judge_faithfulness" if judged and "faithfulness" in judge_metrics else "fallback_faithfulness"


def _num(v: Any) -> float:
    """Logged values come back with NaN written as null."""
    return math.nan if v is None else float(v)


def _method_label(score: float, method: str | None, status: str | None) -> str:
    if not math.isnan(score):
        return "partial" if status == "partial" else method or "none"  # partial: some judge models failed
    return "failed" if status == "failed" else "undefined"


def per_item_frame(kind: Any, items: list[DatasetItem], records: list[dict], encoder: Any,
                   judge_metrics: tuple[str, ...], judged: bool, consistency_runs: int, top_k: int,
                   language: str) -> tuple[pd.DataFrame, dict]:
    """One row per item — texts, every metric, methods, reasons, latencies — and ``{"methods": metric →
    method → count, "corpus_bleu": ...}``."""
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
    _add_faithfulness(frame, records, faithfulness_key(judged, judge_metrics), methods)
    if judged:
        _add_judged(frame, records, judge_metrics, methods)
    for name, values in kind.hit_columns(items, records, top_k).items():
        frame[name] = values
    corpus_bleu = _add_lexical(frame, records, encoder, language)
    if consistency_runs >= 2:
        _add_consistency(frame, records, encoder, consistency_runs)
    for name, values in kind.timing_columns(records).items():
        frame[name] = values
    frame["answer_ms"] = [_num(r["answer_ms"]) for r in records]
    return frame, {"methods": {k: dict(sorted(v.items())) for k, v in methods.items()}, "corpus_bleu": corpus_bleu}


def _add_faithfulness(frame: pd.DataFrame, records: list[dict], key: str, methods: dict[str, Counter]) -> None:
    """Faithfulness (LLM or the offline fallback), hallucination rate = 1 − it, context utilization."""
    n = len(records)
    faith = np.full(n, math.nan)
    f_method, f_reason = [None] * n, [None] * n
    for i, r in enumerate(records):
        f = r.get("faithfulness")
        if f is None:
            f_method[i] = "item_failed"
            f_reason[i] = r["error"]
            continue
        faith[i] = _num(f["score"])
        f_method[i] = _method_label(faith[i], f["method"], f.get("status"))
        f_reason[i] = f.get("reason")
    frame[key] = faith
    frame[f"{key}_method"] = f_method
    frame[f"{key}_reason"] = f_reason
    methods[key] = Counter(f_method)
    if key != "fallback_faithfulness" and any(r.get("fallback_faithfulness") for r in records):
        # Beside the judge's score, under its own name: the offline fallback never stands in for it.
        fb = [r.get("fallback_faithfulness") for r in records]
        frame["fallback_faithfulness"] = [_num(f["score"]) if f else math.nan for f in fb]
        frame["fallback_faithfulness_method"] = [f["method"] if f else "item_failed" for f in fb]
    frame["hallucination_rate"] = [hallucination_rate(float(v)) for v in faith]
    frame["context_utilization"] = [
        context_utilization(r["answers"][0], [c["text"] for c in r["contexts"]]) if r["error"] is None else math.nan
        for r in records
    ]


def _add_judged(frame: pd.DataFrame, records: list[dict], judge_metrics: tuple[str, ...],
                methods: dict[str, Counter]) -> None:
    """The LLM-only judged metrics with method, reason, explanation and (several models) per-model scores."""
    ok = [r["error"] is None for r in records]
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


def _add_lexical(frame: pd.DataFrame, records: list[dict], encoder: Any, language: str) -> dict | None:
    """Lexical and embedding similarity of the (first) answer to the reference; returns corpus BLEU."""
    for col in LEXICAL:
        frame[col] = math.nan
    idx = [i for i, r in enumerate(records) if r["error"] is None]
    if not idx:
        return None
    lex, lex_summary = text_metrics([records[i]["answers"][0] for i in idx], [records[i]["reference"] for i in idx],
                                    encoder=encoder, language=language)
    lex = lex.rename(columns={"rougeL": "rougel"})
    for col in LEXICAL:
        frame.loc[idx, col] = lex[col].to_numpy()
    return lex_summary["corpus_bleu"]


def _add_consistency(frame: pd.DataFrame, records: list[dict], encoder: Any, consistency_runs: int) -> None:
    """Stability of the repeated answers: exact-match rate and semantic consistency per item."""
    n = len(records)
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


def summary_of(kind: Any, frame: pd.DataFrame, records: list[dict], corpus_bleu: dict | None,
               judge_metrics: tuple[str, ...], judged: bool, top_k: int, n_boot: int) -> dict:
    """Every metric column's aggregate (mean, CI, counts) in report order, corpus BLEU and the latencies."""
    order = [faithfulness_key(judged, judge_metrics), "hallucination_rate", "context_utilization"]
    if order[0] != "fallback_faithfulness":
        order.insert(1, "fallback_faithfulness")  # beside the judge's, when the frame has it
    order += [m for m in LLM_ONLY if judged and m in judge_metrics]
    order += kind.hit_names(top_k)
    order += [*LEXICAL, *CONSISTENCY]
    summary: dict[str, Any] = {name: aggregate(frame[name].to_numpy(dtype=float), n_boot=n_boot)
                               for name in order if name in frame}
    for name in (*order[:1], *LLM_ONLY):
        if judged and f"{name}_method" in frame:  # items a partial jury scored (some judge models failed)
            summary[name]["n_partial"] = int((frame[f"{name}_method"] == "partial").sum())
    summary["corpus_bleu"] = corpus_bleu["score"] if corpus_bleu else math.nan
    summary.update(kind.latency_blocks(frame, records))
    summary["latency_answer_ms"] = {**latency_summary(frame["answer_ms"]), "mode": "per-query"}
    return summary
