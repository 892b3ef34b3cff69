"""LLM-judged metrics behind one API: one :class:`~ragnb.judges.base.LLMMetric` kind of object, one
:class:`~ragnb.judges.sample.Sample`, one :class:`~ragnb.judges.judge_config.JudgeConfig`, one
:class:`~ragnb.llm.result.EvaluationResult` (docs/llm-judges.md, "The LLM-metric API").

Every metric — ``get_llm_metric(name)`` for any of :func:`llm_metric_names` — has ``evaluate`` (async) /
``evaluate_sync`` on one sample and ``aevaluate_dataset`` / ``evaluate_dataset`` on many
(``(per-item DataFrame, summary)``). The families:

* :mod:`ragnb.judges.scores` — the direct judge scores (judge_faithfulness, answer_relevance,
  answer_correctness 1–5, e2e_score) and :class:`~ragnb.judges.scores.Judge`, their convenience for the
  tiers with :mod:`~ragnb.judges.pairwise` (A/B with position swap); :mod:`~ragnb.judges.agreement`
  (several judge models, Krippendorff's α) and :mod:`~ragnb.judges.reliability` (Tier Judge);
* :mod:`ragnb.judges.ragas` — ragas-style statement / context metrics;
* :mod:`ragnb.judges.nvidia` — NVIDIA-style 0–2 ratings.

Importing a family registers its metric objects in :mod:`ragnb.metrics.registry` with ``kind="llm"``
(:func:`~ragnb.judges.base.register_metric`).
"""

from ragnb.judges.base import (
    LLMMetric,
    aevaluate_dataset,
    evaluate_dataset,
    get_llm_metric,
    llm_metric_names,
    register_metric,
)
from ragnb.judges.judge_config import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, MODES, JudgeConfig
from ragnb.judges.sample import FIELDS, Sample, as_sample

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_TEMPERATURE", "FIELDS", "MODES", "JudgeConfig", "LLMMetric", "Sample",
           "aevaluate_dataset", "as_sample", "evaluate_dataset", "get_llm_metric", "llm_metric_names",
           "register_metric"]
