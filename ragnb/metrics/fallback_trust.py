"""What the reports say of the offline judge's measured agreement with human labels (docs/metrics.md, Offline
fallback): the held-out figures of the kind of score a report shows (:data:`ragnb.metrics.fallback.AGREEMENT`),
and the grades they withhold where the offline judge is near chance there."""

from __future__ import annotations

from collections.abc import Sequence

from ragnb.metrics.fallback import AGREEMENT, OFFLINE_LABEL, OFFLINE_METHOD
from ragnb.metrics.fallback_table import KIND_LABEL, TIER_KIND


def agreement_rows(kind: str = TIER_KIND) -> list[dict]:
    """The held-out rows of :data:`AGREEMENT` for data of ``kind`` only (a report quotes the figures of the kind of
    score it shows — the tiers': answer grounding — never another kind's), as rows for the reports' table: kind
    of data, method, n, units, positives, the threshold, ROC-AUC, accuracy, balanced accuracy and κ with their 95%
    CIs, the majority-class accuracy, whether the method is informative there, and ``chosen`` (the chain's
    method). No row for a kind without a held-out measurement."""
    cols = ("method", "n", "units", "positives", "threshold", "roc_auc", "roc_auc_ci95", "accuracy", "accuracy_ci95",
            "majority_class", "balanced_accuracy", "balanced_accuracy_ci95", "cohen_kappa", "cohen_kappa_ci95",
            "informative", "reason")
    return [{"data (held-out)": KIND_LABEL[r["kind"]], **{c: r[c] for c in cols}, "chosen": r["method"] == OFFLINE_METHOD}
            for r in AGREEMENT if r["kind"] == kind]


def offline_trust(kind: str = TIER_KIND, method: str = OFFLINE_METHOD, rows: Sequence[dict] = AGREEMENT) -> dict:
    """How far to trust ``method`` on data of ``kind`` (``"answer_grounding"`` | ``"claim_support"``): its held-out
    row's ``informative`` verdict (:func:`ragnb.metrics.fallback_agreement.verdict`), ``reason`` and a plain
    ``note``. A kind without a held-out measurement is not informative ("not measured"). ``rows``: the held-out
    rows to read (the stored table)."""
    row = next((r for r in rows if r["kind"] == kind and r["method"] == method), None)
    label = {"embedding": "embedding similarity", "word_overlap": "word overlap"}.get(method, method)
    if row is None:
        return {"kind": kind, "method": method, "informative": False, "reason": "not measured on held-out data",
                "note": f"The offline judge ({label}) was not measured on held-out {KIND_LABEL.get(kind, kind)} "
                        "data: its scores are not graded."}
    fig = (f"ROC-AUC {row['roc_auc']:.2f} (95% CI {row['roc_auc_ci95'][0]:.2f}–{row['roc_auc_ci95'][1]:.2f}), "
           f"accuracy {row['accuracy']:.2f} at ≥ {row['threshold']:.3g} vs {row['majority_class']:.2f} for always "
           f"answering the more common label, n = {row['n']}")
    if row["informative"]:
        note = f"On held-out {KIND_LABEL[kind]} data the offline judge ({label}) agrees with human labels: {fig}."
    else:
        note = (f"On held-out {KIND_LABEL[kind]} data the offline judge ({label}) is near chance — {row['reason']} "
                f"({fig}): its scores here are not graded; read them as an overlap or similarity, not as a verdict.")
    return {"kind": kind, "method": method, "informative": bool(row["informative"]), "reason": row["reason"],
            "note": note}


def mark_trust(summary: dict, names: Sequence[str], kind: str = TIER_KIND) -> str | None:
    """Attach :func:`offline_trust` to the aggregates ``names`` of ``summary`` that come from the offline judge
    (the grade rule, :func:`ragnb.spec.grade_of`, leaves them ungraded when it is near chance); returns the
    plain note when it is."""
    trust = offline_trust(kind)
    for name in names:
        if isinstance(summary.get(name), dict):
            summary[name]["offline_trust"] = {k: trust[k] for k in ("kind", "method", "informative", "reason")}
    return None if trust["informative"] else trust["note"]
