"""A judge that Tier Judge finds at chance on the team's own labels marks the grades built on it in the same run
(docs/llm-judges.md, "A judge at chance marks its grades").

Tier Judge scores the team's human-labelled items with a judge (an LLM's model set, or the offline fallback) and
reports its agreement with the labels: Cohen's κ with a bootstrap CI and accuracy against the majority class
(:mod:`ragnb.metrics.baselines`). When that agreement is not clearly better than the baseline — κ's 95% CI reaches
0, or accuracy does not beat always giving the more common label (:func:`ragnb.tiers.judging.verdict.judge_verdict`)
— a faithfulness that judge scores in Tier 2/3 or the RAG metrics of the same run is that judge's opinion and
nothing more: an "excellent" there would be a verdict that misleads. :func:`mark_record` puts ``judge_trust`` on each such
aggregate (and on its block) in the run record; the grade rule (:func:`ragnb.spec.grade_of`) then leaves it
ungraded with the reason, which the executive summary and the index page show.

A PPI estimate (human labels on some items of the tier itself, :func:`ragnb.runs.record.ppi_view`) is not marked:
it is corrected by those labels, and its interval already widens with the judge's errors.
"""

from __future__ import annotations

from ragnb import spec
from ragnb.metrics.fallback_table import KIND_OF_METRIC
from ragnb.metrics.stats import metric_value
from ragnb.tiers.judging.verdict import judge_identity, judge_verdict

JUDGE_BLOCK = "tier_judge_metrics"


def judged_names(key: str, block: dict) -> list[str]:
    """The aggregates of a block that its judge produced: an LLM jury's thresholded metrics (the tier's
    ``llm_judged``) and the RAG metrics it scored (``methods`` other than the offline faithfulness); the offline
    fallback's scores (``fallback_faithfulness``, ``hallucination_rate``) when the block was judged offline."""
    if spec.is_offline(block):
        return [n for n in KIND_OF_METRIC if n in block]
    tier = spec.by_record_key(key)
    names = list(tier.llm_judged) if tier is not None else []
    names += [n for n in (block.get("methods") or {}) if n not in KIND_OF_METRIC]
    return [spec.current_key(n, key, block) for n in dict.fromkeys(names)]


def mark_record(record: dict) -> list[tuple[str, str, str]]:
    """Mark, in place, the aggregates that the judge Tier Judge found unvalidated produced elsewhere in this run
    (Tier 2, Tier 3, the RAG metrics): ``judge_trust`` = ``{"validated": False, "reason": …}`` on each and on its
    block. Returns (block key, metric, reason) for each marked aggregate."""
    from ragnb.runs.record import status_blocks

    verdict = judge_verdict(record.get(JUDGE_BLOCK))
    if verdict is None or verdict["validated"]:
        return []
    trust = {"validated": False, "reason": verdict["reason"]}
    marked = []
    for key, block in status_blocks(record).items():
        if key == JUDGE_BLOCK or judge_identity(block) != verdict["judge"]:
            continue
        nested = block.get("metrics") if isinstance(block.get("metrics"), dict) else {}
        for name in judged_names(key, block):
            value = block.get(name, nested.get(name))
            if isinstance(value, dict) and metric_value(value) is not None:
                value["judge_trust"] = dict(trust)
                marked.append((key, name, verdict["reason"]))
        if any(k == key for k, _, _ in marked):
            block["judge_trust"] = dict(trust)
    return marked
