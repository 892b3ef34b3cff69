"""Tables and figures of the two judge notebooks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ragnb.metrics import classification as cls

_HEADLINE = ("consistency_score", "error_rate", "avg_latency_ms", "avg_faithfulness")
_CAL = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "cohen_kappa")


def _row(metric: str, v: Any, **extra: Any) -> dict:
    if isinstance(v, dict):
        lo, hi = (v.get("ci95") or [math.nan, math.nan])[:2]
        return {**extra, "metric": metric, "value": v.get("mean"), "ci95_low": lo, "ci95_high": hi,
                "n": v.get("n"), "n_valid": v.get("n_valid"), "n_failed": v.get("n_failed")}
    return {**extra, "metric": metric, "value": v}


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for col in ("n", "n_valid", "n_failed"):
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def judge_table(summary: dict) -> pd.DataFrame:
    """Tier Judge: one row per (mode, metric) — the original four metrics, then the calibration against the
    human labels (ROC-AUC, and the binary metrics at the show threshold), with CIs and counts."""
    rows = []
    for mode, b in summary["by_mode"].items():
        for name in _HEADLINE:
            rows.append(_row(name, b[name], mode=mode))
        cal = b["calibration"]
        rows.append(_row("roc_auc", cal["roc_auc"], mode=mode))
        for name in _CAL:
            rows.append(_row(f"{name}@{cal['threshold']:g}", cal["at_threshold"]["metrics"][name], mode=mode))
        rows += baseline_rows(cal["at_threshold"]["metrics"]["accuracy"], mode=mode)
        if "agreement" in b:
            a = b["agreement"]
            rows.append(_row("models_share_within_delta", a["share_within_delta"], mode=mode))
            rows.append(_row("models_krippendorff_alpha", a["krippendorff_alpha"], mode=mode))
    if summary.get("n_not_scored"):
        rows.append(_row("n_not_scored (no context)", summary["n_not_scored"]))
    return _frame(rows)


def baseline_rows(accuracy: dict, **extra: Any) -> list[dict]:
    """Rows of the trivial baselines an accuracy is compared with (:mod:`ragnb.metrics.baselines`): each constant
    answer, random answers at the base rate, and the paired difference from the majority class with its CI."""
    b = accuracy.get("baselines") if isinstance(accuracy, dict) else None
    if not b or not b.get("n"):
        return []
    rows = [_row(f"baseline: always {label!r}", value, **extra) for label, value in b["constant"].items()]
    rows.append(_row("baseline: random at the base rate", b["random_at_base_rate"], **extra))
    rows.append(_row(f"accuracy − always {b['majority_label']!r} (paired)",
                     {"mean": b["difference"], "ci95": b["difference_ci95"], "n": b["n"], "n_valid": b["n"],
                      "n_failed": 0}, **extra))
    return rows


def pipeline_table(summary: dict) -> pd.DataFrame:
    """Tier Judge Pipeline: the original metrics with CIs, the trivial baselines of accuracy, counts, latency."""
    rows = [_row(n, summary[n]) for n in ("accuracy", "balanced_accuracy", "cohen_kappa", "precision", "recall",
                                            "f1_score", "roc_auc") if n in summary]
    rows += baseline_rows(summary["accuracy"])
    # majority_class_accuracy is the baseline row of the commoner label
    rows += [_row(n, summary[n]) for n in ("tp", "fp", "fn", "tn", "n", "n_valid", "n_failed", "avg_latency_ms",
                                            "p50_latency_ms", "p95_latency_ms")]
    if summary.get("n_not_scored"):
        rows.insert(-3, _row("n_not_scored (no context)", summary["n_not_scored"]))
    return _frame(rows)


def grade_line(summary: dict, record_key: str = "tier_judge_pipeline_metrics", metric: str = "accuracy") -> str:
    """The grade the run record gives ``metric`` of this block, and why (:func:`ragnb.spec.grade_of`)."""
    from ragnb import spec

    bounds = spec.thresholds_of(metric, record_key, summary)
    grade = spec.grade_of(bounds, summary.get(metric))
    if bounds is None:
        return f"{metric}: not graded (no threshold)."
    band = f"excellent > {bounds[0]:g}, attention < {bounds[1]:g}"
    if grade.status is None:
        return f"{metric}: not graded — {grade.reason or 'no value'} ({band})."
    return f"{metric}: {grade.status.upper()} ({band})" + (f" — {grade.reason}." if grade.reason else ".")


def best_threshold_line(best: dict, label: str = "") -> str:
    """The best threshold by Youden's J as a result, or why there is none (a degenerate cut is not shown as one)."""
    where = f" ({label})" if label else ""
    if best.get("degenerate"):
        return f"No useful threshold by Youden's J{where}: {best['degenerate']}."
    return (f"Best threshold by Youden's J{where}: {best['threshold']:.3f} — TPR {best['tpr']:.3f}, FPR "
            f"{best['fpr']:.3f}; chosen on these items, so optimistic — validate it on other data before using it.")


def _label_of(df: pd.DataFrame) -> pd.Series:
    if "label" in df and df["label"].notna().any():
        return df["label"].fillna(df["ground_truth_show"].map({True: "show", False: "no-show"}))
    return df["ground_truth_show"].map({True: "show", False: "no-show"})


def score_by_label_figure(per_item: pd.DataFrame, score_col: str = "score_1", threshold: float | None = None,
                          title: str = "Judge score by human label"):
    """Overlaid histograms of the judge's score for each human label."""
    import plotly.express as px

    df = per_item.assign(human_label=_label_of(per_item)).dropna(subset=[score_col])
    fig = px.histogram(df, x=score_col, color="human_label", barmode="overlay", nbins=40, opacity=0.65,
                       range_x=[0, 1], title=title, labels={score_col: "score"})
    if threshold is not None:
        fig.add_vline(x=threshold, line_dash="dash", annotation_text=f"show threshold {threshold:g}")
    fig.update_layout(height=380)
    return fig


def roc_figure(curves: dict[str, tuple[Sequence[bool], Sequence[float]]], threshold: float | None = None):
    """ROC curve per name → (labels, scores); NaN scores are left out. Marks the point of ``threshold``."""
    import plotly.graph_objects as go
    from sklearn.metrics import roc_curve

    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="grey"), name="chance"))
    for name, (y, s) in curves.items():
        y, s = np.asarray(y, dtype=bool), np.asarray(s, dtype=float)
        ok = ~np.isnan(s)
        if ok.sum() < 2 or y[ok].all() or not y[ok].any():
            continue
        fpr, tpr, _ = roc_curve(y[ok], s[ok])
        auc = cls.roc_auc(y[ok], s[ok])
        fig.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", name=f"{name} (AUC {auc:.3f})"))
        if threshold is not None:
            pred = s[ok] >= threshold
            tp_rate = float((pred & y[ok]).sum() / y[ok].sum())
            fp_rate = float((pred & ~y[ok]).sum() / (~y[ok]).sum())
            fig.add_trace(go.Scatter(x=[fp_rate], y=[tp_rate], mode="markers", marker=dict(size=10),
                                     name=f"{name} at {threshold:g}"))
    fig.update_layout(title="ROC curve of the judge score against the human labels", xaxis_title="false positive rate",
                      yaxis_title="true positive rate", xaxis_range=[0, 1], yaxis_range=[0, 1.02], height=420)
    return fig


def confusion_figure(confusion: dict, title: str = "Confusion matrix"):
    """2×2 heatmap: rows = human label (show / no-show), columns = judge verdict."""
    import plotly.graph_objects as go

    z = [[confusion["tp"], confusion["fn"]], [confusion["fp"], confusion["tn"]]]
    names = [["TP", "FN"], ["FP", "TN"]]
    text = [[f"{names[i][j]}<br>{z[i][j]}" for j in range(2)] for i in range(2)]
    fig = go.Figure(go.Heatmap(z=z, x=["judge: show", "judge: no-show"], y=["human: show", "human: no-show"],
                               text=text, texttemplate="%{text}", colorscale="Blues", showscale=False))
    fig.update_layout(title=title, yaxis_autorange="reversed", height=340, width=460)
    return fig


def consistency_figure(per_item: pd.DataFrame, delta: float, title: str = "First vs. second judgement of each item"):
    """Scatter of score_1 vs score_2 with the |s₁ − s₂| ≤ δ band; one colour per mode."""
    import plotly.express as px

    df = per_item.dropna(subset=["score_1", "score_2"])
    fig = px.scatter(df, x="score_1", y="score_2", color="mode" if df["mode"].nunique() > 1 else None,
                     opacity=0.6, hover_data=["id"], title=title,
                     labels={"score_1": "first pass", "score_2": "second pass"})
    for off in (-delta, delta):
        fig.add_shape(type="line", x0=0, y0=off, x1=1, y1=1 + off, line=dict(dash="dash", color="grey"))
    fig.update_layout(xaxis_range=[-0.02, 1.02], yaxis_range=[-0.02, 1.02], height=420, width=520)
    return fig
