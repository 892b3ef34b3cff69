"""Tier Judge's verdict on the judge it measured: is its agreement with the team's labels clearly better than the
baseline? (docs/metrics.md, Tier Judge — what its verdict does to the run's other grades.)

The rule lives here, beside the tier that measures it; the run record reads it (:mod:`ragnb.runs.judge_trust`) to mark
the grades the same judge produced elsewhere in the run.
"""

from __future__ import annotations

from typing import Any

from ragnb import spec
from ragnb.metrics.stats import fmt_number, metric_value

MARK = "judge unvalidated"


def judge_identity(block: Any) -> tuple[str, frozenset[str]] | None:
    """Which judge scored a block: ``("offline", ∅)`` for the offline fallback, ``("llm", {model ids})`` for an
    LLM jury (the order of the models and the spaces after commas do not matter); None when the block names none."""
    if not isinstance(block, dict):
        return None
    if spec.is_offline(block):
        return ("offline", frozenset())
    models = frozenset(m.strip() for m in str(block.get("judge_model") or "").split(",") if m.strip())
    return ("llm", models) if models else None


def _accuracy_entry(block: dict) -> dict | None:
    """The primary mode's accuracy at the show threshold, with its ``baselines``, from a Tier Judge block."""
    mode = (block.get("by_mode") or {}).get(block.get("primary_mode"))
    try:
        return mode["calibration"]["at_threshold"]["metrics"]["accuracy"]
    except (KeyError, TypeError):
        return None


def judge_verdict(block: Any) -> dict | None:
    """Tier Judge's verdict on its judge: ``{"judge", "validated", "reason"}``, or None when the block lacks what
    it needs (no Tier Judge, no κ, no accuracy with baselines: nothing to say, so nothing is marked).

    validated ⇔ the lower bound of κ's 95% CI > 0 and accuracy beats the majority class beyond chance
    (``baselines.beats`` True). An undecided comparison (no CI) is not validated."""
    judge = judge_identity(block)
    kappa = block.get("cohen_kappa") if judge is not None else None
    acc = _accuracy_entry(block) if isinstance(kappa, dict) and metric_value(kappa) is not None else None
    base = acc.get("baselines") if isinstance(acc, dict) and metric_value(acc) is not None else None
    if not isinstance(base, dict):
        return None
    lo, hi = (list(kappa.get("ci95") or []) + [None, None])[:2]
    kappa_ok = metric_value(lo) is not None and float(lo) > 0
    if kappa_ok and base.get("beats") is True:
        return {"judge": judge, "validated": True, "reason": ""}
    label = f"'{base.get('majority_label')}'"
    always = f"always answering {label}"
    if metric_value(acc) < float(base.get("majority_class", 0.0)):
        how = f"below {always}"
    else:
        how = "at chance" if not kappa_ok else f"not better than {always}"
    figures = (f"κ {fmt_number(kappa.get('mean'))} (95% CI {fmt_number(lo)} to {fmt_number(hi)}), accuracy "
               f"{fmt_number(metric_value(acc))} vs {fmt_number(base.get('majority_class'))} always {label}, "
               f"n = {kappa.get('n_valid', kappa.get('n'))}")
    return {"judge": judge, "validated": False, "reason": f"{MARK}: {how} on your labels (Tier Judge: {figures})"}
