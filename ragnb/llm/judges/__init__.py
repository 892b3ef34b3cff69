"""LLM-judged metrics behind one API: one :class:`~ragnb.llm.judges.judge_config.JudgeConfig`, one
:class:`~ragnb.llm.result.EvaluationResult`.

* :mod:`ragnb.llm.judges.scores` — the direct judge scores (faithfulness, answer relevance, correctness 1–5,
  end-to-end), :mod:`~ragnb.llm.judges.pairwise` (A/B with position swap), :mod:`~ragnb.llm.judges.agreement`
  (several judge models, Krippendorff's α) and :mod:`~ragnb.llm.judges.reliability` (Tier Judge);
* :mod:`ragnb.llm.judges.ragas` — ragas-style statement / context metrics;
* :mod:`ragnb.llm.judges.nvidia` — NVIDIA-style 0–2 ratings.

Importing a family registers its metrics in :mod:`ragnb.metrics.registry` with ``kind="llm"``.
"""

from ragnb.llm.judges.judge_config import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, MODES, JudgeConfig

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_TEMPERATURE", "MODES", "JudgeConfig"]
