"""Tier Judge and Tier Judge Pipeline, calibrated against human labels (see docs/metrics.md, Tier Judge).

* :func:`run_tier_judge` — how far the *benchmark* judge can be trusted: every item's faithfulness is judged
  twice (the second pass with the LLM cache off, so it is a real repeat) per judge mode (direct / reasoned)
  → consistency_score (|s₁ − s₂| ≤ δ, δ = 0.5), error_rate, latency, avg_faithfulness, agreement between
  judge models, and — beyond the original definition — calibration of the scores against the human labels (ROC-AUC, best
  threshold, accuracy / balanced accuracy / precision / recall / F1 / Cohen's κ at ``show_threshold``).
* :func:`run_tier_judge_pipeline` — the *production* show/no-show judge against ``ground_truth_show``:
  the system under test's own ``judge(question, answer)`` when it has one, else ragnb's baseline judge
  (show ⇔ faithfulness ≥ ``show_threshold``) → accuracy, precision, recall, F1, TP/FP/FN/TN with bootstrap
  CIs, and latency mean/p50/p95.

Without an LLM endpoint (or with no judge model named) the judge is the offline fallback
(see docs/metrics.md, Faithfulness; embedding similarity → word overlap): ``judge_backend = "offline-fallback"`` and
every per-item score carries the ``method`` that produced it. The fallback is deterministic, so its consistency is 1.0
by construction; its latency and its calibration against the human labels are the meaningful offline numbers.

Judge-pipeline datasets: JSON (array, or ``{"name", "items": [...]}``) or JSONL, one item per
object with ``question``, ``answer``, ``ground_truth_show`` and optional ``context`` (string or list of
strings) and ``id``; see :class:`JudgePipelineItem`. The bundled demo set is BEGIN's dev split
(:func:`begin_pipeline_dataset`, human attribution labels; see ``ragnb/data/begin_groundedness/README.md``).

Every finished item is appended to an :class:`~ragnb.tiers.itemlog.ItemLog` (``<output_dir>/<stem>.items.jsonl``)
the moment it is judged, so an interrupted run resumes without judging anything twice.

Modules: :mod:`.data` (schema, loaders, BEGIN), :mod:`.choice` (LLM or fallback), :mod:`.scoring` (one logged
pass), :mod:`.tier_judge`, :mod:`.pipeline`, :mod:`.figures` (tables and charts); this package exports them.
"""

from ragnb.tiers.judging.choice import LLM_BACKEND, OFFLINE_BACKEND, JudgeChoice, choose_judge, item_log_path, parse_list
from ragnb.datasets.judge_items import (BEGIN_DIR, BEGIN_FILE, GENERIC_CHOICES, JudgePipelineDataset, JudgePipelineItem,
                                      begin_pipeline_dataset, load_judge_dataset, open_judge_dataset)
from ragnb.tiers.judging.figures import (best_threshold_line, confusion_figure, consistency_figure, grade_line,
                                         judge_table, pipeline_table, roc_figure, score_by_label_figure)
from ragnb.tiers.judging.pipeline import TierJudgePipelineResult, resolve_judge_system, run_tier_judge_pipeline
from ragnb.tiers.judging.scoring import DEFAULT_SHOW_THRESHOLD, NOT_SCORED, OFFLINE_MODE
from ragnb.tiers.judging.tier_judge import TierJudgeResult, run_tier_judge

__all__ = ["BEGIN_DIR", "BEGIN_FILE", "DEFAULT_SHOW_THRESHOLD", "GENERIC_CHOICES", "JudgeChoice",
           "JudgePipelineDataset", "JudgePipelineItem", "LLM_BACKEND", "NOT_SCORED", "OFFLINE_BACKEND",
           "OFFLINE_MODE", "TierJudgePipelineResult", "TierJudgeResult", "begin_pipeline_dataset", "best_threshold_line",
           "choose_judge", "confusion_figure", "consistency_figure", "grade_line", "item_log_path", "judge_table",
           "load_judge_dataset", "open_judge_dataset", "parse_list", "pipeline_table", "resolve_judge_system",
           "roc_figure", "run_tier_judge", "run_tier_judge_pipeline", "score_by_label_figure"]
