"""Ragas-style LLM-judged RAG metrics, with verdicts aligned by id (see docs/metrics.md, Faithfulness).

Six metrics, one class each (one module per metric group), formula in its docstring:
:class:`ContextEntityRecall`, :class:`ContextPrecision`, :class:`ContextRecall`, :class:`Faithfulness`,
:class:`NoiseSensitivity`, :class:`ResponseRelevancy`. A metric's own options are constructor arguments
(``ContextPrecision(strategy="response_based")``, ``NoiseSensitivity(mode="irrelevant")``); how to judge
is one :class:`~ragnb.judges.judge_config.JudgeConfig`. Each is an :class:`~ragnb.judges.base.LLMMetric`:
``async evaluate(sample, client, config) -> EvaluationResult``, ``evaluate_sync``, ``score`` (the float),
``aevaluate_dataset`` / ``evaluate_dataset`` (many samples with bounded concurrency →
``(per-item DataFrame, summary)``); the sample is a :class:`~ragnb.judges.sample.Sample`. Every judge model in ``config.models`` runs the
whole pipeline of a metric on its own (its own statements, its own verdicts); the per-model scores are
combined by ``config.aggregate`` (mean / median / majority), and failed models are listed, not averaged in.

What ragnb does differently from ragas, on purpose
--------------------------------------------------
* **Ids, not positions.** Statements, sentences and contexts go to the judge as a JSON list with ids, and
  the verdicts are matched by id. The denominator is the number of items ragnb sent, never the length of
  the list the judge returned (ragas divides by ``len(verdicts)``, so a judge that drops a statement
  changes the score). A verdict for an unknown or repeated id is ignored and counted
  (``n_verdicts_extra``).
* **Missing verdicts are re-asked, then failed.** If a reply lacks a valid verdict for some ids, the parse
  step names those ids and the client re-asks (within ``LLMSettings.reask_budget``); the replies are merged
  (a later reply's verdict for an id replaces an earlier one). Ids still missing after the budget make
  that model's result ``failed`` (NaN, ``n_verdicts_missing`` > 0) — a missing verdict is never scored as
  "unsupported", and the score is never computed over the judged subset. ``n_verdicts_reasked`` counts the
  ids the first reply lacked.
* **Unusable output is re-asked, then failed**: unparseable, truncated (``finish_reason=length``) or
  refused replies are re-asked by :meth:`LLMClient.chat_json`; then the model's result is ``failed`` with
  the reason — never 0 and never dropped.
* **Nothing to judge is undefined, not 0**: a response or reference without statements, a reference
  without entities → NaN with ``status="undefined"`` and the reason (ragas returns 0 for entity recall
  through its ε denominator).
* **ContextRecall's sentences are split by ragnb** (deterministic, :func:`ragnb.metrics.fallback.split_sentences`),
  so the judge cannot decide how many sentences the reference has.
* **Entity matching normalises word forms** (:func:`normalize_entity`): casefold, ё→е, punctuation out,
  digit groups joined, crude Russian suffix stripping — "Москвы" meets "Москва", "Эйфелевой башни" meets
  "Эйфелева башня"; ragas compares strings exactly.
* **ResponseRelevancy asks for N distinct questions in one call** and re-asks if fewer than N distinct
  ones come back; ragas makes N identical calls, which at temperature 0 (or from a cache) return the same
  question N times, so its "mean over N" is one sample repeated.
* **Fewer calls where batching is safe**: all contexts in one call for ContextPrecision, all statements
  against all contexts in one call for NoiseSensitivity.

LLM calls per sample and judge model (K retrieved contexts, N = ``number_of_questions``), without re-asks
(each call may be re-asked up to ``reask_budget`` times when its reply is unusable):

====================== ======= ============ ==============================================================
metric                  ragnb   ragas        ragnb's calls
====================== ======= ============ ==============================================================
context_entity_recall   2       2            entities of the reference; entities of the contexts
context_precision       1       K            one verdict per context id, all contexts in one call
context_recall          1       1            one verdict per reference sentence id
faithfulness            2       2            statements of the response; verdict per statement id
noise_sensitivity       4       2K + 3       statements of response and of reference; response vs
                                             reference; every statement vs every context (ids) at once
response_relevancy      1       N            N distinct questions + the noncommittal flag in one call
====================== ======= ============ ==============================================================

Independent calls of one sample (e.g. the two decompositions) run concurrently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragnb.llm.client import LLMClient
from ragnb.judges import base
from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.ragas.common import RagasMetric
from ragnb.judges.ragas.entities import ContextEntityRecall, entity_recall, match_entities, normalize_entity
from ragnb.judges.ragas.noise import MODES, NoiseSensitivity, noise_sensitivity_score
from ragnb.judges.ragas.precision import STRATEGIES, ContextPrecision, average_precision
from ragnb.judges.ragas.relevancy import ResponseRelevancy, cosine_to, response_relevancy_score
from ragnb.judges.sample import FIELDS, Sample, as_sample
from ragnb.judges.ragas.statements import ContextRecall, Faithfulness, context_recall_score, faithfulness_score

METRICS: dict[str, RagasMetric] = {
    m.name: m for m in (ContextEntityRecall(), ContextPrecision(), ContextRecall(), Faithfulness(),
                        NoiseSensitivity(), ResponseRelevancy())
}
# Registered as objects (ragnb.judges.base.register_metric); NoiseSensitivity once per mode.
for _metric in (*METRICS.values(), NoiseSensitivity(mode="irrelevant")):
    base.register_metric(_metric)


def get_metric(metric: str | RagasMetric, **options: Any) -> RagasMetric:
    """Deprecated: :func:`ragnb.judges.get_llm_metric` (every LLM-judged metric by its registered name).

    A ragas-style metric object from its name and options, or the object itself (as before, for one release)."""
    base.warn_deprecated("ragnb.judges.ragas.get_metric", "ragnb.judges.get_llm_metric(name, **options)")
    return _pick(metric, **options)


def _pick(metric: str | RagasMetric, **options: Any) -> RagasMetric:
    if isinstance(metric, str):
        metric = metric.strip().lower()
        if metric in ("noise_sensitivity_relevant", "noise_sensitivity_irrelevant"):
            metric, options = "noise_sensitivity", {"mode": metric.rsplit("_", 1)[1], **options}
    return base.pick_metric(metric, METRICS, **options)


def evaluate_dataset(metric: str | RagasMetric, samples: Any, client: LLMClient,
                     config: JudgeConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                     n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Deprecated: :func:`ragnb.judges.evaluate_dataset` (or ``get_llm_metric(name).evaluate_dataset``),
    which this calls for a ragas-style metric given by name or object."""
    base.warn_deprecated("ragnb.judges.ragas.evaluate_dataset", "ragnb.judges.evaluate_dataset")
    return _pick(metric).evaluate_dataset(samples, client, config, concurrency, n_boot, seed)


__all__ = [
    "FIELDS", "METRICS", "MODES", "STRATEGIES", "ContextEntityRecall", "ContextPrecision", "ContextRecall",
    "Faithfulness", "NoiseSensitivity", "RagasMetric", "ResponseRelevancy", "Sample", "as_sample",
    "average_precision", "context_recall_score", "cosine_to", "entity_recall",
    "faithfulness_score", "match_entities", "noise_sensitivity_score", "normalize_entity",
    "response_relevancy_score",
]
