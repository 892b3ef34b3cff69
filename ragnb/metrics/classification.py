"""Judge calibration against human labels, and the Tier Judge Pipeline (show / no-show) metrics.

Wherever a judge runs on a dataset with human labels, these functions turn (label, verdict) pairs into the
report: accuracy, balanced accuracy, precision, recall, F1, Cohen's κ with bootstrap 95% CIs, and for
continuous judge scores ROC-AUC and the best threshold by Youden's J.

Conventions
    * Positive class = 1 (``True``, ``"yes"``, ``"show"``); labels may be bool, 0/1 (int or float) or the
      yes/no words of :func:`ragnb.io.parse_yes_no` (yes/no, true/false, y/n, 1/0, show/no_show, да/нет,
      истина/ложь; any case).
    * ``y_true`` (the human labels) must be complete. A missing *prediction* (None / NaN / pd.NA) is a
      failed judge call: it is **excluded** from every metric and counted in ``n_failed`` — never scored as
      a wrong answer and never dropped silently. If failures concentrate on hard items the metrics look
      better than the judge is, so read ``n_failed`` next to them.
    * An undefined value (precision with no positive predictions, AUC with one class, …) is NaN with a
      ``reason``, never 0 (scikit-learn's ``zero_division="warn"`` returns 0; ours matches
      ``zero_division=np.nan``).
    * CIs: percentile bootstrap over items (resample the valid items with replacement ``n_boot`` times,
      seeded, 2.5/97.5 percentiles of the resampled metric). Resamples where the metric is undefined are
      left out of the percentiles and ``n_boot_valid`` says how many remained.

Each metric entry has the shape of :func:`ragnb.metrics.stats.aggregate` (``mean`` is the point estimate
on all valid items), so :func:`ragnb.metrics.stats.summary_frame` renders ``report["metrics"]`` as a table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragnb.io import parse_yes_no
from ragnb.metrics.registry import register
from ragnb.metrics.stats import latency_summary

FAMILY = "classification"
BINARY_METRICS = ("accuracy", "balanced_accuracy", "precision", "recall", "f1", "cohen_kappa")
_BOOT_CHUNK_ELEMENTS = 4_000_000

_UNDEFINED = {
    "accuracy": "no valid predictions",
    "balanced_accuracy": "y_true has only one class among the valid items; balanced accuracy needs both",
    "precision": "no positive predictions (TP + FP = 0)",
    "recall": "no positive labels in y_true (TP + FN = 0)",
    "f1": "no positive labels and no positive predictions (2·TP + FP + FN = 0)",
    "cohen_kappa": "chance agreement p_e = 1: labels and predictions are all the same single class",
}


# --------------------------------------------------------------------------- validation


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return bool(np.isnan(v))
    return type(v).__name__ in ("NAType", "NaTType")


def _as_list(values: Any, name: str) -> list:
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be a sequence of labels (list, array, Series), got {type(values).__name__}")
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _binary(values: Any, name: str, *, allow_missing: bool) -> np.ndarray:
    """1.0 / 0.0 per item, NaN for a missing value (only where ``allow_missing``)."""
    items = _as_list(values, name)
    out = np.empty(len(items), dtype=float)
    for i, v in enumerate(items):
        if _is_missing(v):
            if not allow_missing:
                raise ValueError(f"{name}[{i}] is missing; human labels must be complete (drop or fix that row)")
            out[i] = math.nan
        else:
            verdict = parse_yes_no(v)
            if verdict is None:
                raise ValueError(f"{name}[{i}]={v!r} is not a binary label; use 0/1, True/False or 'yes'/'no'")
            out[i] = float(verdict)
    return out


def _scores(values: Any, name: str) -> np.ndarray:
    items = _as_list(values, name)
    out = np.empty(len(items), dtype=float)
    for i, v in enumerate(items):
        if _is_missing(v):
            out[i] = math.nan
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name}[{i}]={v!r} is not a number; scores must be numeric (None/NaN = failed)")
        elif math.isinf(v):
            raise ValueError(f"{name}[{i}] is infinite; scores must be finite numbers (None/NaN = failed)")
        else:
            out[i] = float(v)
    return out


def _pair(y_true: Any, y_pred: Any, pred_name: str = "y_pred", *, scores: bool = False) -> tuple[np.ndarray, np.ndarray]:
    t = _binary(y_true, "y_true", allow_missing=False)
    p = _scores(y_pred, pred_name) if scores else _binary(y_pred, pred_name, allow_missing=True)
    if t.size != p.size:
        raise ValueError(f"y_true has {t.size} items but {pred_name} has {p.size}; they must be aligned item by item")
    return t, p


def _check_boot(n_boot: int, seed: int) -> None:
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r} must be an integer >= 0 (0 = no confidence intervals)")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed={seed!r} must be an integer")


# --------------------------------------------------------------------------- confusion and metrics


def confusion(y_true: Sequence, y_pred: Sequence) -> dict[str, int]:
    """Confusion counts of binary verdicts against binary labels (positive class = 1).

    TP = #{ŷ=1, y=1}, FP = #{ŷ=1, y=0}, FN = #{ŷ=0, y=1}, TN = #{ŷ=0, y=0}, over the items with a
    prediction; failed predictions (None/NaN) are in none of the four cells (count them with
    :func:`binary_report`'s ``n_failed``). Returns ``{"tp", "fp", "fn", "tn"}`` as ints.
    """
    t, p = _pair(y_true, y_pred)
    ok = ~np.isnan(p)
    t, p = t[ok], p[ok]
    return {"tp": int(np.sum((p == 1) & (t == 1))), "fp": int(np.sum((p == 1) & (t == 0))),
            "fn": int(np.sum((p == 0) & (t == 1))), "tn": int(np.sum((p == 0) & (t == 0)))}


def metrics_from_counts(tp: Any, fp: Any, fn: Any, tn: Any) -> dict[str, np.ndarray]:
    """Binary metrics from confusion counts (scalars or arrays of equal shape; NaN where undefined).

    n = TP + FP + FN + TN
    accuracy          = (TP + TN) / n
    balanced_accuracy = (TPR + TNR) / 2,  TPR = TP / (TP + FN),  TNR = TN / (TN + FP)
    precision         = TP / (TP + FP)
    recall            = TPR
    f1                = 2·TP / (2·TP + FP + FN)   (= 2PR / (P + R) wherever P and R are defined and
                        P + R > 0; 0 when TP = 0 but FP + FN > 0, as scikit-learn's ``f1_score``)
    cohen_kappa       = (p_o − p_e) / (1 − p_e),  p_o = accuracy,
                        p_e = [(TP + FP)(TP + FN) + (FN + TN)(FP + TN)] / n²
    """
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = tp + fp + fn + tn
        acc = np.where(n > 0, (tp + tn) / n, np.nan)
        tpr = np.where(tp + fn > 0, tp / (tp + fn), np.nan)
        tnr = np.where(tn + fp > 0, tn / (tn + fp), np.nan)
        prec = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = np.where((n > 0) & (pe < 1), (acc - pe) / (1 - pe), np.nan)
    return {"accuracy": acc, "balanced_accuracy": (tpr + tnr) / 2, "precision": prec, "recall": tpr,
            "f1": f1, "cohen_kappa": kappa}


def _point(name: str, y_true: Sequence, y_pred: Sequence) -> float:
    return float(metrics_from_counts(**confusion(y_true, y_pred))[name])


_BINARY = {"kind": "classification", "value_range": (0.0, 1.0), "higher_is_better": True}


@register("accuracy", FAMILY, **_BINARY)
def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    """accuracy = (TP + TN) / n over the items with a prediction; NaN when there is none."""
    return _point("accuracy", y_true, y_pred)


@register("balanced_accuracy", FAMILY, **_BINARY)
def balanced_accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    """balanced_accuracy = (TPR + TNR) / 2, TPR = TP / (TP + FN), TNR = TN / (TN + FP); NaN unless y_true has
    both classes."""
    return _point("balanced_accuracy", y_true, y_pred)


@register("classification_precision", FAMILY, **_BINARY)
def precision(y_true: Sequence, y_pred: Sequence) -> float:
    """precision = TP / (TP + FP) of the positive class; NaN without positive predictions. Reported as
    ``precision`` inside judge blocks (the registry's ``precision@k`` is the retrieval one)."""
    return _point("precision", y_true, y_pred)


@register("classification_recall", FAMILY, **_BINARY)
def recall(y_true: Sequence, y_pred: Sequence) -> float:
    """recall = TPR = TP / (TP + FN) of the positive class; NaN without positive labels. Reported as ``recall``
    inside judge blocks (the registry's ``recall@k`` is the retrieval one)."""
    return _point("recall", y_true, y_pred)


@register("f1", FAMILY, **_BINARY, aliases=("f1_score",))
def f1(y_true: Sequence, y_pred: Sequence) -> float:
    """F1 = 2·TP / (2·TP + FP + FN) (= 2PR / (P + R)); 0 when TP = 0 < FP + FN; NaN when 2·TP + FP + FN = 0."""
    return _point("f1", y_true, y_pred)


@register("cohen_kappa", FAMILY, kind="classification", value_range=(-1.0, 1.0), higher_is_better=True)
def cohen_kappa(y_true: Sequence, y_pred: Sequence) -> float:
    """κ = (p_o − p_e) / (1 − p_e), p_o = accuracy, p_e = [(TP + FP)(TP + FN) + (FN + TN)(FP + TN)] / n²;
    NaN when p_e = 1 (everything is one class)."""
    return _point("cohen_kappa", y_true, y_pred)


def _percentile_ci(samples: np.ndarray) -> tuple[list[float], int]:
    valid = samples[~np.isnan(samples)]
    if valid.size < 2:
        return [math.nan, math.nan], int(valid.size)
    lo, hi = np.quantile(valid, [0.025, 0.975])
    return [float(lo), float(hi)], int(valid.size)


def _entry(value: float, reason: str, ci: list[float], n_boot_valid: int, n: int, n_valid: int) -> dict[str, Any]:
    return {"mean": value, "ci95": ci, "n": n, "n_valid": n_valid, "n_failed": n - n_valid,
            "reason": reason, "n_boot_valid": n_boot_valid}


def _binary_metrics(t: np.ndarray, p: np.ndarray, n_total: int, n_boot: int, seed: int) -> dict[str, dict]:
    """Metrics + bootstrap CIs over the valid pairs (t, p)."""
    cells = np.array([np.sum((p == 1) & (t == 1)), np.sum((p == 1) & (t == 0)),
                      np.sum((p == 0) & (t == 1)), np.sum((p == 0) & (t == 0))], dtype=np.int64)
    point = metrics_from_counts(*cells)
    n_valid = int(cells.sum())
    boot: dict[str, np.ndarray] = {}
    if n_boot and n_valid >= 2:
        # The metrics depend on the items only through the four cell counts, and the cell counts of an item
        # resample are Multinomial(n_valid, cell frequencies): the same bootstrap distribution as resampling
        # items, at O(n_boot) cost.
        draws = np.random.default_rng(seed).multinomial(n_valid, cells / n_valid, size=n_boot)
        boot = metrics_from_counts(draws[:, 0], draws[:, 1], draws[:, 2], draws[:, 3])
    out = {}
    for name in BINARY_METRICS:
        value = float(point[name])
        ci, nb = _percentile_ci(boot[name]) if boot else ([math.nan, math.nan], 0)
        out[name] = _entry(value, _UNDEFINED[name] if math.isnan(value) else "", ci, nb, n_total, n_valid)
    return out


def binary_report(y_true: Sequence, y_pred: Sequence, n_boot: int = 1000, seed: int = 0,
                  labels: tuple[str, str] = ("positive", "negative")) -> dict[str, Any]:
    """Calibration report of binary judge verdicts against human labels.

    Returns ``{"metrics": {name: {mean, ci95, n, n_valid, n_failed, reason, n_boot_valid}}, "confusion":
    {tp, fp, fn, tn}, "n", "n_valid", "n_failed", "positive_rate_true", "positive_rate_pred"}`` with the
    metrics of :func:`metrics_from_counts` (accuracy, balanced_accuracy, precision, recall, f1,
    cohen_kappa). Failed predictions (None/NaN) are excluded and counted in ``n_failed``; ``mean`` is the
    value on all valid items, ``ci95`` the percentile bootstrap over items (``n_boot`` resamples, ``seed``).
    ``metrics["accuracy"]["baselines"]`` compares accuracy with the trivial baselines on the same items
    (:func:`ragnb.metrics.baselines.accuracy_baselines`; ``labels`` name the positive and negative answers);
    the grade rule (:func:`ragnb.spec.grade_of`) reads it.
    """
    from ragnb.metrics.baselines import accuracy_baselines

    _check_boot(n_boot, seed)
    t, p = _pair(y_true, y_pred)
    ok = ~np.isnan(p)
    tv, pv = t[ok], p[ok]
    metrics = _binary_metrics(tv, pv, int(t.size), n_boot, seed)
    metrics["accuracy"]["baselines"] = accuracy_baselines(tv, pv, n_boot=n_boot, seed=seed, labels=labels,
                                                          accuracy_ci95=metrics["accuracy"]["ci95"])
    n_valid = int(ok.sum())
    return {
        "metrics": metrics,
        "confusion": {"tp": int(np.sum((pv == 1) & (tv == 1))), "fp": int(np.sum((pv == 1) & (tv == 0))),
                      "fn": int(np.sum((pv == 0) & (tv == 1))), "tn": int(np.sum((pv == 0) & (tv == 0)))},
        "n": int(t.size), "n_valid": n_valid, "n_failed": int(t.size) - n_valid,
        "positive_rate_true": float(tv.mean()) if n_valid else math.nan,
        "positive_rate_pred": float(pv.mean()) if n_valid else math.nan,
    }


# --------------------------------------------------------------------------- continuous scores


def _rank_average(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, ties sharing their average rank."""
    from scipy.stats import rankdata

    return rankdata(values, method="average", axis=-1)


@register("roc_auc", FAMILY, **_BINARY)
def roc_auc(y_true: Sequence, scores: Sequence) -> float:
    """ROC-AUC = P(s⁺ > s⁻) + ½·P(s⁺ = s⁻) over all (positive, negative) pairs (Mann–Whitney U / n⁺n⁻):

    AUC = (R⁺ − n⁺(n⁺ + 1)/2) / (n⁺ · n⁻), R⁺ = sum of the positives' ranks (ties get average ranks).

    Equals the area under scikit-learn's ``roc_curve`` (``roc_auc_score``). Items with a missing score are
    left out; NaN when the remaining labels hold one class only.
    """
    t, s = _pair(y_true, scores, "scores", scores=True)
    ok = ~np.isnan(s)
    return float(_auc(t[ok], s[ok]))


def _auc(t: np.ndarray, s: np.ndarray) -> np.ndarray:
    """AUC along the last axis (t, s of shape (..., n)); NaN where a row has one class."""
    n_pos = t.sum(axis=-1)
    n_neg = t.shape[-1] - n_pos
    r_pos = (_rank_average(s) * t).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), (r_pos - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg), np.nan)


def _bootstrap_auc(t: np.ndarray, s: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    step = max(1, min(n_boot, _BOOT_CHUNK_ELEMENTS // max(1, t.size)))
    parts = []
    for start in range(0, n_boot, step):
        idx = rng.integers(0, t.size, size=(min(step, n_boot - start), t.size))
        parts.append(_auc(t[idx], s[idx]))
    return np.concatenate(parts) if parts else np.array([])


def youden_threshold(y_true: Sequence, scores: Sequence) -> dict[str, float]:
    """Best decision threshold by Youden's J = TPR(t) − FPR(t), with the rule "positive iff score ≥ t".

    Candidates are the distinct scores (the finite thresholds of scikit-learn's
    ``roc_curve(drop_intermediate=False)``); ties in J go to the highest threshold (the most conservative
    "show" rule). Returns ``{"threshold", "youden_j", "tpr", "fpr", "degenerate"}``; NaN values when one class
    is absent; ``degenerate`` says why the threshold is no result (:func:`degenerate_threshold`), "" otherwise.
    """
    t, s = _pair(y_true, scores, "scores", scores=True)
    ok = ~np.isnan(s)
    return _youden(t[ok], s[ok])


def _youden(t: np.ndarray, s: np.ndarray) -> dict[str, float]:
    n_pos, n_neg = float(t.sum()), float(t.size - t.sum())
    if n_pos == 0 or n_neg == 0:
        return {"threshold": math.nan, "youden_j": math.nan, "tpr": math.nan, "fpr": math.nan,
                "degenerate": "undefined: the labels hold one class only"}
    order = np.argsort(-s, kind="stable")
    s_sorted, t_sorted = s[order], t[order]
    # last index of each run of equal scores: counts there are "score >= that value"
    last = np.r_[np.nonzero(np.diff(s_sorted))[0], s_sorted.size - 1]
    tps = np.cumsum(t_sorted)[last]
    fps = (last + 1) - tps
    tpr, fpr = tps / n_pos, fps / n_neg
    j = tpr - fpr
    best = int(np.argmax(j))  # first maximum = highest threshold among ties
    out = {"threshold": float(s_sorted[last[best]]), "youden_j": float(j[best]),
           "tpr": float(tpr[best]), "fpr": float(fpr[best])}
    return {**out, "degenerate": degenerate_threshold(out)}


def degenerate_threshold(best: dict[str, float]) -> str:
    """Why a best threshold is no result ("" when it is one): J ≤ 0 (no cut does better than chance), or a cut
    that answers positive for every item (TPR = FPR = 1) or for none (TPR = FPR = 0)."""
    j, tpr, fpr = best.get("youden_j", math.nan), best.get("tpr", math.nan), best.get("fpr", math.nan)
    if any(math.isnan(v) for v in (j, tpr, fpr)):
        return "undefined: the labels hold one class only"
    if tpr == fpr == 1.0:
        return f"the cut {best['threshold']:.3f} answers positive for every item (TPR = FPR = 1): no threshold separates the labels"
    if tpr == fpr == 0.0:
        return f"the cut {best['threshold']:.3f} answers positive for no item (TPR = FPR = 0)"
    if j <= 0:
        return f"Youden's J = {j:.3f} ≤ 0: no cut of these scores does better than chance"
    return ""


def score_report(y_true: Sequence, scores: Sequence, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Calibration report of continuous judge scores (higher = more likely positive) against human labels.

    Returns ``{"roc_auc": {mean, ci95, n, n_valid, n_failed, reason, n_boot_valid}, "best_threshold":
    {threshold, youden_j, tpr, fpr, degenerate}, "at_best_threshold": binary_report(...) of ``score ≥ threshold``
    (None when the threshold is degenerate),
    "n", "n_valid", "n_failed"}``. ROC-AUC as in :func:`roc_auc`, CI by bootstrap over items; threshold as
    in :func:`youden_threshold`. Missing scores (failed calls) are excluded and counted.

    The metrics at the best threshold are optimistic: the threshold was chosen on the same items. Pick it
    on one split and report :func:`binary_report` on another when the number matters.
    """
    _check_boot(n_boot, seed)
    t, s = _pair(y_true, scores, "scores", scores=True)
    ok = ~np.isnan(s)
    tv, sv = t[ok], s[ok]
    n, n_valid = int(t.size), int(ok.sum())
    auc = float(_auc(tv, sv)) if n_valid else math.nan
    ci, nb = [math.nan, math.nan], 0
    if n_boot and n_valid >= 2:
        ci, nb = _percentile_ci(_bootstrap_auc(tv, sv, n_boot, seed))
    reason = ""
    if math.isnan(auc):
        reason = "no valid scores" if n_valid == 0 else "y_true has only one class among the valid items; AUC needs both"
    best = _youden(tv, sv)
    at_best = None
    if not best["degenerate"]:  # a degenerate cut (everything positive, J ≤ 0) is no result to report
        pred = np.where(ok, s >= best["threshold"], np.nan)
        at_best = binary_report(t, pred, n_boot=n_boot, seed=seed)
    return {"roc_auc": _entry(auc, reason, ci, nb, n, n_valid), "best_threshold": best,
            "at_best_threshold": at_best, "n": n, "n_valid": n_valid, "n_failed": n - n_valid}


# --------------------------------------------------------------------------- Tier Judge Pipeline


def judge_pipeline_metrics(ground_truth_show: Sequence, predicted_show: Sequence,
                           latencies_ms: Sequence | None = None, n_boot: int = 1000,
                           seed: int = 0) -> dict[str, Any]:
    """docs/metrics.md, Tier Judge and Judge Pipeline: the production show/no-show judge against ``ground_truth_show``.

    accuracy = (TP + TN) / (TP + TN + FP + FN); precision = TP / (TP + FP) and recall = TP / (TP + FN)
    for the class "Yes" (show); f1_score = 2·P·R / (P + R) (computed as 2·TP / (2·TP + FP + FN)).
    Latency: mean, median (p50) and 95th percentile (linear interpolation) of ``latencies_ms`` over all
    calls with a latency, failed ones included (they cost time too).

    A failed judge call (``predicted_show`` None/NaN, e.g. an unparseable reply) is excluded from the
    confusion counts and the metrics and counted in ``n_failed``. Returns a flat dict: ``accuracy,
    precision, recall, f1_score, tp, fp, fn, tn, avg_latency_ms, p50_latency_ms, p95_latency_ms, n,
    n_valid, n_failed``, ``ci95`` (bootstrap CI per metric) and ``undefined`` (metric → reason, for the
    NaN ones).
    """
    report = binary_report(ground_truth_show, predicted_show, n_boot=n_boot, seed=seed)
    m = report["metrics"]
    names = {"accuracy": "accuracy", "precision": "precision", "recall": "recall", "f1_score": "f1"}
    out: dict[str, Any] = {k: m[v]["mean"] for k, v in names.items()}
    out.update(report["confusion"])
    lat = latency_summary([])
    if latencies_ms is not None:
        v = _scores(latencies_ms, "latencies_ms")
        if v.size != report["n"]:
            raise ValueError(f"latencies_ms has {v.size} items but ground_truth_show has {report['n']}; align them")
        if np.any(v < 0):
            raise ValueError("latencies_ms must be >= 0 (milliseconds per judge call)")
        lat = latency_summary(v)
    out.update({"avg_latency_ms": lat["mean"], "p50_latency_ms": lat["p50"], "p95_latency_ms": lat["p95"]})
    out.update({"n": report["n"], "n_valid": report["n_valid"], "n_failed": report["n_failed"]})
    out["ci95"] = {k: m[v]["ci95"] for k, v in names.items()}
    out["undefined"] = {k: m[v]["reason"] for k, v in names.items() if m[v]["reason"]}
    return out
