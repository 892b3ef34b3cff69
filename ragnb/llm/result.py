"""What every judged metric returns (:class:`EvaluationResult`), and how several judge models combine.

A metric run on one sample yields an :class:`EvaluationResult`: the score, an explanation, the score of each
judge model, how long it took, and how the score was produced (``method``), whether it
is defined (``status``), and the counts that make a statement-level score auditable (statements sent,
verdicts missing or extra). A failed or undefined result has ``score = NaN`` and a ``reason``; it is never 0.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

AGGREGATIONS = ("mean", "median", "majority")
METHODS = ("llm", "embedding", "word_overlap", "heuristic", "none")
# partial: a score from the judge models that answered while at least one other model failed on the item.
STATUSES = ("ok", "partial", "failed", "undefined")


@dataclass
class ModelScore:
    """One judge model's verdict on one sample."""

    model: str
    score: float  # NaN when this model failed or the value is undefined
    explanation: str = ""
    status: str = "ok"
    reason: str = ""
    calls: int = 0  # LLM calls made (including re-asks), 0 when answered from the cache only
    details: dict[str, Any] = field(default_factory=dict)  # e.g. per-statement verdicts


@dataclass
class EvaluationResult:
    """Score of one metric on one sample (score, explanation, per-model scores, duration)."""

    metric: str
    score: float
    explanation: str = ""
    model_scores: list[ModelScore] = field(default_factory=list)
    duration_s: float = 0.0
    method: str = "llm"
    status: str = "ok"
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r}: use one of {METHODS}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}: use one of {STATUSES}")
        if self.status in ("failed", "undefined") and not math.isnan(self.score):
            raise ValueError(f"a {self.status} result must have score NaN, got {self.score}")
        if self.status == "partial" and math.isnan(self.score):
            raise ValueError("a partial result has the score of the models that answered; use failed for NaN")

    @property
    def ok(self) -> bool:
        """Whether the result has a score (``ok``, or ``partial``: some judge models failed, the others scored)."""
        return self.status in ("ok", "partial")

    @property
    def n_models_ok(self) -> int:
        """Judge models that gave a verdict on this sample."""
        return sum(m.status == "ok" for m in self.model_scores)

    @property
    def n_models_failed(self) -> int:
        """Judge models that failed on this sample (counted even when the others saved the score)."""
        return sum(m.status == "failed" for m in self.model_scores)

    def as_row(self) -> dict[str, Any]:
        """Flat per-item row: score, method, status, reason, explanation, duration, the jury's counts
        (``n_models_ok``, ``n_models_failed``), one column per model."""
        row = {"metric": self.metric, "score": self.score, "method": self.method, "status": self.status,
               "reason": self.reason, "explanation": self.explanation, "duration_s": self.duration_s,
               "n_models_ok": self.n_models_ok, "n_models_failed": self.n_models_failed}
        for ms in self.model_scores:
            row[f"score[{ms.model}]"] = ms.score
        return row

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def jury_status(per_model: list[ModelScore]) -> str:
    """``partial`` when some judge model failed on a sample the others scored, else ``ok``."""
    return "partial" if any(m.status == "failed" for m in per_model) else "ok"


def combine(scores: list[float], how: str = "mean") -> float:
    """Aggregate the valid per-model scores of one sample.

    mean = Σ s_m / M; median = the middle value; majority = the most common value (ties → the smaller
    value, i.e. the more conservative verdict). NaN scores (failed models) are left out; all NaN → NaN.
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation {how!r}: use one of {AGGREGATIONS}")
    valid = [s for s in scores if not math.isnan(s)]
    if not valid:
        return math.nan
    if how == "mean":
        return sum(valid) / len(valid)
    if how == "median":
        return float(statistics.median(valid))
    counts = Counter(valid)
    top = max(counts.values())
    return float(min(v for v, c in counts.items() if c == top))


def merge_models(metric: str, per_model: list[ModelScore], how: str, duration_s: float,
                 method: str = "llm") -> EvaluationResult:
    """One EvaluationResult from several models' verdicts (failed models are listed, not averaged in; the
    result is ``partial`` when some failed and the others scored)."""
    score = combine([m.score for m in per_model], how)
    failed = [m for m in per_model if m.status == "failed"]
    if math.isnan(score):
        status = "failed" if failed and len(failed) == len(per_model) else "undefined"
        reasons = "; ".join(f"{m.model}: {m.reason}" for m in per_model if m.reason)
        return EvaluationResult(metric, math.nan, "", per_model, duration_s, method, status, reasons or "no score")
    explanation = next((m.explanation for m in per_model if m.status == "ok" and m.explanation), "")
    reason = "; ".join(f"{m.model} failed: {m.reason}" for m in failed)
    return EvaluationResult(metric, score, explanation, per_model, duration_s, method, jury_status(per_model), reason)


async def evaluate_with_models(metric: str, models: list[str], score_one, how: str = "mean",
                               method: str = "llm") -> EvaluationResult:
    """Run ``score_one(model) -> ModelScore`` for every judge model concurrently and merge the verdicts.

    A model whose output stays unparseable after the re-asks, or whose endpoint keeps failing, becomes a
    ``failed`` ModelScore (NaN, with the reason) — the other models still count. Permanent errors (bad key,
    no quota, unknown model) propagate: they would fail every sample, so the run stops at once.
    """
    import asyncio
    import time

    from ragnb.llm.replies import LLMOutputError, LLMTransientError

    if isinstance(models, str) or not models:
        raise ValueError(f"models must be a non-empty list of model ids, got {models!r}")
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation {how!r}: use one of {AGGREGATIONS}")

    async def safe(model: str) -> ModelScore:
        try:
            return await score_one(model)
        except (LLMOutputError, LLMTransientError) as exc:
            return ModelScore(model, math.nan, status="failed", reason=f"{type(exc).__name__}: {exc}",
                              calls=getattr(exc, "attempts", 0) or 0)

    t0 = time.perf_counter()
    per_model = list(await asyncio.gather(*(safe(m) for m in models)))
    return merge_models(metric, per_model, how, time.perf_counter() - t0, method)
