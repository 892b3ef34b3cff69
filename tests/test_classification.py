"""Judge calibration metrics: exact agreement with scikit-learn, undefined cases, failed predictions, and a
run on real human labels (BEGIN, WiCE) with a trivial word-overlap "judge"."""

from __future__ import annotations

import gzip
import json
import math
import re
import warnings

import numpy as np
import pytest
from conftest import SHARED
from sklearn import metrics as skm

from ragnb.metrics.classification import (
    BINARY_METRICS,
    binary_report,
    confusion,
    judge_pipeline_metrics,
    metrics_from_counts,
    roc_auc,
    score_report,
    youden_threshold,
)
from ragnb.metrics.stats import summary_frame

EPS = 1e-12


def sklearn_binary(y, p) -> dict[str, float]:
    """scikit-learn's values, with zero_division=NaN so an undefined value is NaN as in ragnb."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = {
            "accuracy": skm.accuracy_score(y, p),
            "precision": skm.precision_score(y, p, zero_division=np.nan),
            "recall": skm.recall_score(y, p, zero_division=np.nan),
            "f1": skm.f1_score(y, p, zero_division=np.nan),
            "cohen_kappa": skm.cohen_kappa_score(y, p),
        }
        # sklearn's balanced accuracy quietly falls back to one class's recall when y_true has one class;
        # ragnb calls that undefined (tested separately).
        ref["balanced_accuracy"] = skm.balanced_accuracy_score(y, p) if len(set(y)) == 2 else math.nan
    return {k: float(v) for k, v in ref.items()}


def assert_same(ours: float, ref: float, what: str) -> None:
    if math.isnan(ref):
        assert math.isnan(ours), f"{what}: expected NaN, got {ours}"
    else:
        assert abs(ours - ref) <= EPS, f"{what}: {ours} != {ref}"


# --------------------------------------------------------------------------- against scikit-learn


@pytest.mark.parametrize("trial", range(60))
def test_binary_metrics_equal_sklearn_on_random_inputs(trial):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(1, 80))
    bias = rng.uniform(0.05, 0.95)
    y = (rng.random(n) < bias).astype(int)
    p = (rng.random(n) < rng.uniform(0.05, 0.95)).astype(int)
    report = binary_report(y, p, n_boot=50, seed=trial)
    ref = sklearn_binary(y, p)
    for name in BINARY_METRICS:
        assert_same(report["metrics"][name]["mean"], ref[name], f"{name} (n={n})")
    tn, fp, fn, tp = skm.confusion_matrix(y, p, labels=[0, 1]).ravel()
    assert confusion(y, p) == report["confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
    assert sum(report["confusion"].values()) == n


@pytest.mark.parametrize("trial", range(60))
def test_auc_and_youden_equal_sklearn_on_random_scores(trial):
    rng = np.random.default_rng(1000 + trial)
    n = int(rng.integers(2, 120))
    y = (rng.random(n) < rng.uniform(0.1, 0.9)).astype(int)
    if len(set(y)) < 2:
        y[0], y[-1] = 0, 1
    # rounding makes ties between and within classes, the hard case for AUC and for thresholds
    s = np.round(y * rng.uniform(0, 2) + rng.normal(size=n), int(rng.integers(0, 3)))
    assert abs(roc_auc(y, s) - skm.roc_auc_score(y, s)) <= EPS
    assert abs(score_report(y, s, n_boot=0)["roc_auc"]["mean"] - skm.roc_auc_score(y, s)) <= EPS

    fpr, tpr, thr = skm.roc_curve(y, s, drop_intermediate=False)
    fpr, tpr, thr = fpr[1:], tpr[1:], thr[1:]  # drop sklearn's "inf" threshold (nothing predicted positive)
    j = tpr - fpr
    best = int(np.argmax(j))  # first maximum = highest threshold, ragnb's tie rule
    ours = youden_threshold(y, s)
    assert ours["threshold"] == thr[best]
    assert ours["youden_j"] == pytest.approx(j[best], abs=EPS)
    assert (ours["tpr"], ours["fpr"]) == pytest.approx((tpr[best], fpr[best]), abs=EPS)
    at = score_report(y, s, n_boot=0)["at_best_threshold"]
    degenerate = j[best] <= EPS or (tpr[best] == fpr[best] and tpr[best] in (0.0, 1.0))
    assert bool(ours["degenerate"]) == degenerate
    if degenerate:  # no cut beats chance: no threshold is reported as a result
        assert at is None
        return
    ref = sklearn_binary(y, (s >= thr[best]).astype(int))
    for name in BINARY_METRICS:
        assert_same(at["metrics"][name]["mean"], ref[name], name)
    assert at["metrics"]["recall"]["mean"] == pytest.approx(tpr[best], abs=EPS)


def test_hand_made_example():
    # y: 1 1 1 1 0 0 0 0 0 0 ; p: 1 1 1 0 1 0 0 0 0 0  → TP 3, FN 1, FP 1, TN 5
    y = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    p = [1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    r = binary_report(y, p, n_boot=0)
    m = {k: v["mean"] for k, v in r["metrics"].items()}
    assert r["confusion"] == {"tp": 3, "fp": 1, "fn": 1, "tn": 5}
    assert m["accuracy"] == pytest.approx(0.8)
    assert m["precision"] == pytest.approx(0.75) and m["recall"] == pytest.approx(0.75)
    assert m["f1"] == pytest.approx(0.75)
    assert m["balanced_accuracy"] == pytest.approx((3 / 4 + 5 / 6) / 2)
    # p_e = (4·4 + 6·6) / 100 = 0.52 ; κ = (0.8 − 0.52) / 0.48
    assert m["cohen_kappa"] == pytest.approx(0.28 / 0.48)
    assert all(math.isnan(x) for x in r["metrics"]["f1"]["ci95"])  # n_boot=0 → no CI


def test_label_spellings_are_equivalent():
    y = [True, "yes", "No", 0, 1.0, "show", "no_show"]
    p = ["Yes", 1, False, "false", "1", "0", "n"]
    assert confusion(y, p) == confusion([1, 1, 0, 0, 1, 1, 0], [1, 1, 0, 0, 1, 0, 0])


# --------------------------------------------------------------------------- undefined values, failures


def test_undefined_metrics_are_nan_with_a_reason():
    # no positive predictions and one class in y_true
    r = binary_report([0, 0, 0], [0, 0, 0], n_boot=20)["metrics"]
    assert r["accuracy"]["mean"] == 1.0 and r["accuracy"]["reason"] == ""
    for name in ("precision", "recall", "f1", "balanced_accuracy", "cohen_kappa"):
        assert math.isnan(r[name]["mean"]), name
        assert r[name]["reason"], name
    assert "TP + FP = 0" in r["precision"]["reason"]
    # recall is defined, precision is not
    r = binary_report([1, 0, 1], [0, 0, 0], n_boot=0)["metrics"]
    assert r["recall"]["mean"] == 0.0 and math.isnan(r["precision"]["mean"])
    assert r["f1"]["mean"] == 0.0  # 2·0 / (0 + 0 + 2), as sklearn


def test_auc_with_one_class_is_nan_with_a_reason():
    rep = score_report([1, 1, 1], [0.2, 0.5, 0.9], n_boot=50)
    assert math.isnan(rep["roc_auc"]["mean"]) and "one class" in rep["roc_auc"]["reason"]
    assert math.isnan(rep["best_threshold"]["threshold"]) and rep["at_best_threshold"] is None
    assert math.isnan(roc_auc([0, 0], [0.1, 0.3]))


def test_failed_predictions_are_excluded_and_counted():
    y = [1, 1, 0, 0, 1, 0]
    p = [1, None, 0, float("nan"), 0, 1]
    r = binary_report(y, p, n_boot=0)
    assert (r["n"], r["n_valid"], r["n_failed"]) == (6, 4, 2)
    ref = sklearn_binary([1, 0, 1, 0], [1, 0, 0, 1])
    for name in BINARY_METRICS:
        assert_same(r["metrics"][name]["mean"], ref[name], name)
        assert (r["metrics"][name]["n"], r["metrics"][name]["n_failed"]) == (6, 2)
    assert sum(confusion(y, p).values()) == 4
    # missing scores behave the same way
    s = score_report([1, 0, 1, 0], [0.9, None, 0.4, 0.1], n_boot=0)
    assert (s["n"], s["n_valid"], s["n_failed"]) == (4, 3, 1)
    assert s["roc_auc"]["mean"] == 1.0


def test_all_predictions_failed():
    r = binary_report([1, 0], [None, None])
    assert r["n_valid"] == 0 and r["n_failed"] == 2
    assert all(math.isnan(v["mean"]) and v["reason"] for v in r["metrics"].values())


@pytest.mark.parametrize("y, p, fragment", [
    ([1, 0], [1], "aligned"),
    ([1, None], [1, 0], "y_true[1] is missing"),
    ([1, 2], [1, 0], "y_true[1]=2"),
    ([1, 0], ["maybe", 0], "y_pred[0]='maybe'"),
    ("10", [1, 0], "sequence"),
])
def test_bad_input_is_a_clear_error(y, p, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        binary_report(y, p)


def test_bad_scores_are_a_clear_error():
    with pytest.raises(ValueError, match=re.escape("scores[1]='high'")):
        score_report([1, 0], [0.3, "high"])
    with pytest.raises(ValueError, match="infinite"):
        roc_auc([1, 0], [float("inf"), 0.0])
    with pytest.raises(ValueError, match="n_boot"):
        binary_report([1, 0], [1, 0], n_boot=-1)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_and_brackets_the_estimate():
    rng = np.random.default_rng(7)
    y = (rng.random(400) < 0.4).astype(int)
    p = np.where(rng.random(400) < 0.8, y, 1 - y)  # 80% agreement
    a = binary_report(y, p, n_boot=500, seed=3)
    b = binary_report(y, p, n_boot=500, seed=3)
    assert a == b
    acc = a["metrics"]["accuracy"]
    lo, hi = acc["ci95"]
    assert lo < acc["mean"] < hi
    # accuracy is a proportion: bootstrap CI ≈ ±1.96·√(p(1−p)/n)
    half = 1.96 * math.sqrt(acc["mean"] * (1 - acc["mean"]) / 400)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.2)
    assert acc["n_boot_valid"] == 500
    # rare positives: some resamples have no positive prediction → precision undefined there, counted
    r = binary_report([1] + [0] * 30, [1] + [0] * 30, n_boot=300, seed=0)["metrics"]["precision"]
    assert r["mean"] == 1.0 and 0 < r["n_boot_valid"] < 300
    frame = summary_frame(a["metrics"])
    assert list(frame["metric"]) == list(BINARY_METRICS)


def test_auc_ci_brackets_the_estimate():
    rng = np.random.default_rng(11)
    y = (rng.random(300) < 0.5).astype(int)
    s = y + rng.normal(scale=1.2, size=300)
    r = score_report(y, s, n_boot=400, seed=1)["roc_auc"]
    assert r["ci95"][0] < r["mean"] < r["ci95"][1]
    assert r["ci95"][1] - r["ci95"][0] < 0.2


def test_metrics_from_counts_vectorised_matches_scalar():
    counts = np.array([[3, 1, 1, 5], [0, 0, 2, 4], [7, 2, 0, 0]])
    vec = metrics_from_counts(*counts.T)
    for row, c in enumerate(counts):
        scalar = metrics_from_counts(*c)
        for name in BINARY_METRICS:
            assert_same(float(vec[name][row]), float(scalar[name]), name)


# --------------------------------------------------------------------------- Tier Judge Pipeline


def test_judge_pipeline_metrics_hand_computed():
    gt = [True, True, True, False, False, True, False, False]
    pred = ["Yes", "Yes", "No", "Yes", "No", None, "No", "No"]  # item 5: unparseable judge reply
    lat = [100, 200, 300, 400, 500, 600, 700, 800]
    m = judge_pipeline_metrics(gt, pred, lat, n_boot=100)
    # valid: TP 2 (0,1), FN 1 (2), FP 1 (3), TN 3 (4,6,7)
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (2, 1, 1, 3)
    assert (m["n"], m["n_valid"], m["n_failed"]) == (8, 7, 1)
    assert m["accuracy"] == pytest.approx(5 / 7)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1_score"] == pytest.approx(2 / 3)
    assert m["avg_latency_ms"] == pytest.approx(450.0)
    assert m["p50_latency_ms"] == pytest.approx(450.0)
    assert m["p95_latency_ms"] == pytest.approx(800 - 0.35 * 100)  # linear: rank 0.95·7 = 6.65
    assert set(m["ci95"]) == {"accuracy", "precision", "recall", "f1_score"} and m["undefined"] == {}


def test_judge_pipeline_undefined_and_no_latency():
    m = judge_pipeline_metrics([False, False], [False, False], None, n_boot=0)
    assert m["accuracy"] == 1.0 and math.isnan(m["precision"]) and math.isnan(m["avg_latency_ms"])
    assert set(m["undefined"]) == {"precision", "recall", "f1_score"}
    with pytest.raises(ValueError, match="latencies_ms has 1 items"):
        judge_pipeline_metrics([True, False], [True, False], [10.0])


# --------------------------------------------------------------------------- real human labels

_WORD = re.compile(r"[^\W_]+")


def word_overlap(hypothesis: str, evidence: str) -> float:
    """Share of the hypothesis's distinct lower-cased words that occur in the evidence (test-only judge)."""
    h = {w.lower() for w in _WORD.findall(hypothesis)}
    e = {w.lower() for w in _WORD.findall(evidence)}
    return len(h & e) / len(h) if h else 0.0


def read_jsonl_gz(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def check_real_labels(y: list[bool], scores: list[float], auc_floor: float) -> dict:
    rep = score_report(y, scores, n_boot=200, seed=0)
    auc = rep["roc_auc"]
    assert abs(auc["mean"] - skm.roc_auc_score(y, scores)) <= EPS
    assert auc["mean"] >= auc_floor and auc["ci95"][0] < auc["mean"] < auc["ci95"][1]
    at = rep["at_best_threshold"]
    assert sum(at["confusion"].values()) == len(y) == at["n"] and at["n_failed"] == 0
    pred = [s >= rep["best_threshold"]["threshold"] for s in scores]
    ref = sklearn_binary([int(v) for v in y], [int(v) for v in pred])
    for name in BINARY_METRICS:
        assert_same(at["metrics"][name]["mean"], ref[name], name)
    m = judge_pipeline_metrics(y, pred, n_boot=0)
    assert m["tp"] + m["fp"] + m["fn"] + m["tn"] == len(y)
    return rep


def test_begin_human_labels_with_word_overlap_judge():
    path = SHARED / "begin_groundedness" / "begin_dev.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    rows = read_jsonl_gz(path)
    assert len(rows) == 1229
    # "show" = Fully attributable; generic responses count as no-show (README: decide per use)
    y = [bool(r["grounded"]) for r in rows]
    scores = [word_overlap(r["response"], r["knowledge"]) for r in rows]
    check_real_labels(y, scores, auc_floor=0.90)  # measured 0.948 (CI 0.934–0.960)
    assert sum(y) == 313


def test_wice_human_labels_with_word_overlap_judge():
    path = SHARED / "wice_claim_support" / "wice_oracle_dev.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} not available")
    rows = read_jsonl_gz(path)
    assert len(rows) == 1043
    # binary: supported vs (partially_ / not_) supported, as the README suggests
    y = [bool(r["supported"]) for r in rows]
    scores = [word_overlap(r["claim"], " ".join(r["evidence_sentences"])) for r in rows]
    check_real_labels(y, scores, auc_floor=0.70)  # measured 0.760 (CI 0.732–0.792)
    assert sum(y) == 342
