"""Metrics ragnb reports but computes above ``ragnb.metrics``: declared here, once, by reference.

The tiers and the analyses compute these (the LLM-judged metrics themselves are metric objects registered
where they are defined, :func:`ragnb.judges.base.register_metric`); ``ragnb.metrics`` never imports
those layers, so each entry names its computing function by import path (checked by the common metric
test). Name, kind, range, direction and formula are the contract, as for every registered metric; the
definitions in words are in docs/metrics.md.
"""

from __future__ import annotations

from ragnb.metrics.registry import declare

_RELIABILITY = "ragnb.judges.reliability"

# --------------------------------------------------------------------------- Tier Judge

declare("judge_consistency", "judge", kind="llm", value_range=(0.0, 1.0), higher_is_better=True,
        computed_by=f"{_RELIABILITY}:judge_consistency", aliases=("consistency_score",), formula="""
consistency_score = mean_q c_q, c_q = 𝟙[|s_1(q) − s_2(q)| ≤ δ] (δ = 0.5 by default), s_1, s_2 two judgements
of item q; an item with a failed judgement is NaN (excluded, counted).""")

declare("error_rate", "judge", kind="llm", value_range=(0.0, 1.0), higher_is_better=False,
        computed_by=f"{_RELIABILITY}:error_rate", formula="""
error_rate = n_failed / n over the judgements (failed: no judge model gave a valid verdict); NaN when n = 0.
Undefined items (blank input, no call) are not errors.""")

declare("judge_pipeline_accuracy", "classification", kind="classification", value_range=(0.0, 1.0),
        higher_is_better=True, computed_by="ragnb.tiers.judging:run_tier_judge_pipeline", formula="""
The production show/no-show judge's accuracy (TP + TN) / n against ground_truth_show — the ``accuracy`` of the
Tier Judge Pipeline block, graded 0.95 / 0.85 and only good or excellent when it beats the trivial baselines on
the same items with its CI (docs/metrics.md, Baselines).""")

declare("majority_class_accuracy", "classification", kind="classification", value_range=(0.5, 1.0),
        higher_is_better=True, computed_by="ragnb.tiers.judging:run_tier_judge_pipeline", formula="""
Accuracy of always answering the more common label: max(p, 1 − p), p = share of positive labels in y_true.
The reference a show/no-show judge's accuracy must beat on skewed labels.""")

# --------------------------------------------------------------------------- retrieval and end-to-end

declare("retrieval_consistency", "retrieval", kind="ranking", value_range=(0.0, 1.0), higher_is_better=True,
        computed_by="ragnb.rag.retrieval:consistency", formula="""
Per query: (1/(R−1)) Σ_{r=2..R} 𝟙[top-k of run r = top-k of run 1], R = repeated retrievals
(``consistency_runs``); R < 2 → NaN.""")

declare("context_hit", "retrieval", kind="ranking", value_range=(0.0, 1.0), higher_is_better=True, needs_k=True,
        computed_by="ragnb.tiers.generation:run_tier3", formula="""
context_hit@k = 𝟙[∃ i ≤ k : the i-th retrieved chunk id is a relevant chunk id of the item]; NaN when
retrieval failed, the system gives no chunk ids or the item has no relevant chunk.""")

# --------------------------------------------------------------------------- UX and analyses

declare("context_break_rate", "ux", kind="session", value_range=(0.0, 1.0), higher_is_better=False,
        computed_by="ragnb.tiers.ux:run_tier_ux", formula="""
Share of consecutive turn pairs whose break signal s_i (cosine of the questions, or of the logged answers where
they separate page changes better) is below ``break_threshold`` θ: |{i : s_i < θ}| / |pairs| over all sessions'
pairs. Where the turns cite pages, θ is the cut agreeing most often with "the turn cites another page than the
previous turn", and the rate is NaN (says nothing here) unless page changes are separable (ROC-AUC 95% CI above
0.5) and the flags beat the majority baseline; without pages θ is the 90% quantile of the cosines of turns from
different sessions (else the model family's default), unvalidated.""")

declare("utilization_rate", "analysis", kind="ranking", value_range=(0.0, 1.0), higher_is_better=True,
        computed_by="ragnb.analysis.utilization:chunk_utilization", formula="""
utilization_rate = used_chunks / total_chunks, used = chunks retrieved in some query's top k.""")

declare("user_score", "analysis", kind="session", value_range=(1.0, 5.0), higher_is_better=True,
        computed_by="ragnb.analysis.domain:domain_analysis", aliases=("mean_score",), formula="""
Mean user rating: (1/n) Σ_i r_i over the n rated questions, r_i ∈ {1, …, 5}; NaN when none is rated.""")

declare("low_score_share", "analysis", kind="session", value_range=(0.0, 1.0), higher_is_better=False,
        computed_by="ragnb.analysis.domain:domain_analysis", formula="""
low_score_share = |{i : r_i ≤ 2}| / n over the n rated questions (r_i ∈ {1, …, 5}); NaN when none is rated.""")
