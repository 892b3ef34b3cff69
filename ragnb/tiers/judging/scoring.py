"""Scoring one pass of judge-pipeline items — LLM judge or offline fallback, logged per item — and the small
helpers both judge tiers share."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ragnb.io import to_jsonable
from ragnb.metrics.fallback import OFFLINE_METHOD
from ragnb.metrics.stats import aggregate as _stats_aggregate
from ragnb.embeddings.models import MemoEncoder
from ragnb.tiers.itemlog import ItemLog, run_items
from ragnb.tiers.judging.choice import OFFLINE_BACKEND
from ragnb.datasets.judge_items import JudgePipelineDataset, JudgePipelineItem

# Faithfulness at or above this → show, for an LLM judge: the midpoint of its 0–1 scale (0.5 = "partially
# agrees"). The offline fallback's scores live on another scale, so offline the automatic threshold is its own
# calibrated cut (the tuning half of BEGIN dev, Youden: ragnb.metrics.fallback.OFFLINE_THRESHOLD — word overlap 0.8). The Tier Judge
# report shows the best threshold on labelled data to tune it.
DEFAULT_SHOW_THRESHOLD = 0.5
OFFLINE_MODE = "offline-fallback"
SHOW_LABELS = ("show", "no-show")  # names of the positive and negative verdict in baselines and reports
# The outcome of an item a faithfulness judge cannot score by design (it has no context): counted in
# ``n_not_scored``, left out of every metric — neither a failed judgement nor a wrong verdict.
NOT_SCORED = "not scored"
NO_CONTEXT = "no context"


def resolve_show_threshold(value: Any, offline: bool) -> float:
    """``None`` or 0 → automatic: 0.5 for an LLM judge, the fallback's calibrated cut offline; else ``value``
    checked to lie in [0, 1] (0 itself would show everything, so it is free to mean "automatic")."""
    from ragnb.metrics.fallback import OFFLINE_METHOD, OFFLINE_THRESHOLD

    if value is None or (not isinstance(value, bool) and value == 0):
        return float(OFFLINE_THRESHOLD[OFFLINE_METHOD]) if offline else DEFAULT_SHOW_THRESHOLD
    return check_threshold(value, "show_threshold")


def check_threshold(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} = {value!r}; use a number in [0, 1] (faithfulness scores are 0–1)")
    return float(value)


def _result_from_dict(d: dict):
    """Rebuild an EvaluationResult from its logged dict (None → NaN, as the log stores strict JSON)."""
    from ragnb.llm.result import EvaluationResult, ModelScore

    def num(v: Any) -> float:
        return math.nan if v is None else float(v)

    models = [ModelScore(**{**m, "score": num(m.get("score"))}) for m in d.get("model_scores", [])]
    return EvaluationResult(**{**d, "score": num(d.get("score")), "model_scores": models,
                               "duration_s": num(d.get("duration_s"))})


def _fallback_sentences(it: JudgePipelineItem) -> list[str]:
    from ragnb.metrics.fallback import split_sentences

    return split_sentences(it.answer) + [s for c in it.contexts() if c.strip() for s in split_sentences(c)]


def _fallback_result(it: JudgePipelineItem, encoder: Any, extra_s: float):
    """The fallback (see docs/metrics.md, Faithfulness) on one item, as an EvaluationResult whose single "model" is the
    fallback."""
    from ragnb.llm.result import EvaluationResult, ModelScore
    from ragnb.metrics.fallback import faithfulness_fallback

    t0 = time.perf_counter()
    out = faithfulness_fallback(it.answer, it.contexts(), encoder, "auto")
    seconds = time.perf_counter() - t0 + extra_s
    score, method = float(out["score"]), out["method"]
    ok = math.isfinite(score)
    name = f"{OFFLINE_BACKEND}:{method}"
    call = {"latency_s": seconds, "cached": False, "attempts": 0, "tokens_in": 0, "tokens_out": 0}
    model = ModelScore(name, score if ok else math.nan, out["reason"] or "", "ok" if ok else "undefined",
                       "" if ok else (out["reason"] or "undefined"), 0, {"calls": [call], "reasks": 0})
    return EvaluationResult("faithfulness", score if ok else math.nan, out["reason"] or "", [model], seconds,
                            method, "ok" if ok else "undefined", "" if ok else (out["reason"] or "undefined"),
                            {"mode": OFFLINE_MODE})


async def score_pass(items: list[JudgePipelineItem], stage: str, log: ItemLog | None, concurrency: int,
                      judge: Any = None, encoder: Any = None) -> list:
    """Judge every item once (LLM ``judge`` or, without one, the fallback with ``encoder``); items already in
    ``log`` are read back, the others are appended as they finish. Returns EvaluationResults in item order."""
    keys = [f"{stage}|{it.id}|{it.digest()}" for it in items]
    by_key = dict(zip(keys, items))
    done = log.done if log is not None else {}
    pending = [k for k in keys if k not in done]
    shares: dict[str, float] = {}
    fallback_encoder = encoder
    # Pre-embed in one batch only when the offline method embeds (word overlap needs no encoder: embedding
    # anyway would waste the time and book it as the items' latency).
    if judge is None and encoder is not None and pending and OFFLINE_METHOD == "embedding":
        sentences = {k: _fallback_sentences(by_key[k]) for k in pending}
        fallback_encoder = MemoEncoder(encoder, [s for ss in sentences.values() for s in ss])
        total = sum(len(ss) for ss in sentences.values()) or 1
        # the batch's time, shared out by each item's number of sentences
        shares = {k: fallback_encoder.seconds * len(ss) / total for k, ss in sentences.items()}

    async def score(key: str) -> dict:
        it = by_key[key]
        if judge is not None:
            result = await judge.judge_faithfulness(it.question, it.answer, it.contexts())
        else:
            result = _fallback_result(it, fallback_encoder, shares.get(key, 0.0))
        return to_jsonable({"id": it.id, "result": result.to_dict()})

    records = await run_items(keys, score, log, concurrency=concurrency if judge is not None else 1)
    return [_result_from_dict(records[k]["result"]) for k in keys]


def agg(values: Any, n_boot: int, seed: int) -> dict:
    """:func:`ragnb.metrics.stats.aggregate` with this tier's bootstrap settings."""
    return _stats_aggregate(np.asarray(values, dtype=float), n_boot=n_boot, seed=seed)


def outcomes(y_true: Sequence[bool], predicted: Sequence[bool | None]) -> list[str]:
    out = []
    for t, p in zip(y_true, predicted):
        if p is None:
            out.append("failed")
        else:
            out.append(("TP" if t else "FP") if p else ("FN" if t else "TN"))
    return out


def dataset_meta(items: Any, encoder: Any) -> dict:
    """What the metrics JSON says about the data and the fallback's embedding model."""
    return {"dataset": items.name if isinstance(items, JudgePipelineDataset) else None,
            "embedding_model": getattr(encoder, "name", None) if encoder is not None else None}


def not_scored(items: list[JudgePipelineItem], without: list[JudgePipelineItem], who: str) -> tuple[dict, str | None]:
    """The summary entries of the items left unscored for want of a context (``n_not_scored``, ``not_scored``
    with the reason and ids) and the note that says so (None when every item was scored)."""
    block = {"n_not_scored": len(without),
             "not_scored": {"reason": NO_CONTEXT, "n": len(without), "ids": [it.id for it in without]}}
    if not without:
        return block, None
    ids = ", ".join(repr(it.id) for it in without[:5]) + (", …" if len(without) > 5 else "")
    return block, (f"{len(without)} of {len(items)} items have no context and were not scored ({ids}): {who} needs "
                   f"one to judge faithfulness against. They are counted in n_not_scored, not as failed or wrong; "
                   f"every metric is over the {len(items) - len(without)} scored items.")


def with_not_scored(frame: pd.DataFrame, items: list[JudgePipelineItem], without: list[JudgePipelineItem],
                    **values: Any) -> pd.DataFrame:
    """``frame`` (one row per scored item) and one row per item of ``without``, in item order: the item's own
    fields, ``outcome`` "not scored", ``values``, and NaN in the score columns."""
    if not without:
        return frame
    rows = [{"id": it.id, "ground_truth_show": it.ground_truth_show, "label": it.label, "source": it.source,
             "question": it.question, "answer": it.answer, "outcome": NOT_SCORED, **values} for it in without]
    extra = pd.DataFrame(rows).reindex(columns=frame.columns)
    order = {it.id: i for i, it in enumerate(items)}
    both = pd.concat([frame, extra], ignore_index=True)
    return both.sort_values("id", key=lambda ids: ids.map(order), kind="stable").reset_index(drop=True)
