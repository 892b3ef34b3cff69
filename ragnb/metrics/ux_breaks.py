"""Tier UX's context breaks checked against the pages the turns cite (docs/metrics.md, Tier UX, Breaks).

A break flag says "this turn left the previous turn's topic". Where the log cites a page per turn, that has an
oracle: the turn cites another page than the previous turn of its session. Against it this module measures how
well low similarity separates page changes from same-page pairs (ROC-AUC with a bootstrap CI), chooses the cut
that agrees with the oracle most often, and says whether the flags beat always answering the commoner label
(the majority baseline, :mod:`ragnb.metrics.baselines`). Where they do not, a break rate says nothing here.

Why not a quantile of unrelated questions: with multilingual-e5-small consecutive turns and questions of different
sessions overlap almost entirely (medians 0.81 and 0.78 on a real bilingual log), so the 90% quantile flagged 12
of 17 turns — mostly short follow-ups on the same page — and agreed with the oracle on 4 (DESIGN.md §7).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.metrics.classification import binary_report, score_report
from ragnb.metrics.ux import _page

# Separable: the AUC's 95% CI lies above this, so low similarity finds page changes better than chance.
CHANCE_AUC = 0.5


def page_change_labels(pages: Sequence, session_ids: Sequence) -> np.ndarray:
    """The oracle per turn, turns in session order: 1.0 when the turn cites another page than the previous turn
    of its session, 0.0 when it cites the same, NaN for a session's first turn or when either turn cites no
    page (None/NaN/blank). Pages are compared as given: pass normalised page ids
    (:func:`ragnb.urls.page_id`)."""
    pages = [_page(p) for p in pages]
    sids = [str(s) for s in session_ids]
    if len(pages) != len(sids):
        raise ValueError(f"pages has {len(pages)} entries but session_ids {len(sids)}; give one of each per turn")
    out = np.full(len(pages), np.nan)
    for i in range(1, len(pages)):
        if sids[i] == sids[i - 1] and pages[i] is not None and pages[i - 1] is not None:
            out[i] = float(pages[i] != pages[i - 1])
    return out


def _labelled(similarity, is_break) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(similarity, dtype=float).ravel()
    y = np.asarray(is_break, dtype=float).ravel()
    if s.size != y.size:
        raise ValueError(f"similarity has {s.size} entries but is_break {y.size}; give one of each per turn")
    ok = ~np.isnan(s) & ~np.isnan(y)
    return s[ok], y[ok]


def break_threshold_curve(similarity, is_break) -> pd.DataFrame:
    """Agreement of the flags "similarity < t" with the oracle, for every t at which they change.

    Over the pairs with both a similarity and an oracle label (``is_break`` 1 / 0), candidates t are the
    distinct similarities (t = the smallest flags nothing) and one just above the largest (flags everything).
    Per candidate: n_flagged, tp, fp, fn, tn, agreement = (tp + tn) / n, precision = tp / (tp + fp),
    recall = tp / (tp + fn), f1 = 2tp / (2tp + fp + fn) (NaN where a denominator is 0).
    """
    s, y = _labelled(similarity, is_break)
    if not s.size:
        return pd.DataFrame(columns=["threshold", "n_flagged", "tp", "fp", "fn", "tn", "agreement", "precision",
                                     "recall", "f1"])
    cands = np.append(np.unique(s), np.nextafter(s.max(), np.inf))
    order = np.argsort(s, kind="stable")
    n_below = np.searchsorted(s[order], cands, side="left")  # pairs flagged at each candidate: s < t
    tp = np.concatenate([[0], np.cumsum(y[order] == 1)])[n_below]
    fp = n_below - tp
    fn = int((y == 1).sum()) - tp
    tn = int((y == 0).sum()) - fp
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = pd.DataFrame({"threshold": cands, "n_flagged": tp + fp, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
                              "agreement": (tp + tn) / s.size,
                              "precision": np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), np.nan),
                              "recall": np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), np.nan),
                              "f1": np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), np.nan)})
    return curve


def best_break_threshold(curve: pd.DataFrame) -> float | None:
    """The candidate of :func:`break_threshold_curve` that agrees with the oracle most often; ties go to the
    higher F1, then to the lower threshold (fewer flags). None for an empty curve."""
    if curve.empty:
        return None
    order = curve.assign(f1_key=curve["f1"].fillna(-1.0)).sort_values(
        ["agreement", "f1_key", "threshold"], ascending=[False, False, True], kind="stable")
    return float(order.iloc[0]["threshold"])


@dataclass(frozen=True)
class BreakValidation:
    """Result of :func:`validate_breaks`."""

    threshold: float  # the cut the flags were judged at (break: similarity < threshold)
    separable: bool | None  # None: undecided (no CI: n_boot = 0 or too few pairs)
    reason: str  # why the flags say nothing here ("" when separable)
    report: dict  # JSON-ready: n_pairs, n_page_changes, oracle_break_rate, roc_auc, at_threshold, …
    curve: pd.DataFrame = field(repr=False)


def validate_breaks(similarity, is_break, threshold: float | None = None, n_boot: int = 1000,
                    seed: int = 0, roc_auc: dict | None = None) -> BreakValidation:
    """Break flags "similarity < threshold" against the oracle ``is_break`` (1 page change / 0 same page / NaN
    unknown, :func:`page_change_labels`), over the pairs where both are known.

    - separability: ROC-AUC of 1 − similarity for page changes, percentile bootstrap 95% CI over pairs
      (:func:`ragnb.metrics.classification.score_report`);
    - the flags at ``threshold`` (None: :func:`best_break_threshold`, chosen on these pairs, so its agreement is
      optimistic): confusion counts, precision, recall, F1 of breaks, agreement (accuracy) with the paired
      comparison against the majority baseline (:func:`ragnb.metrics.classification.binary_report`).

    ``separable`` is True when the AUC's CI lies above 0.5 *and* the flags beat the majority baseline
    (``beats``); False otherwise, with the reason; None when there is no CI to decide with. ``roc_auc``: that
    AUC entry where the caller already computed it on the same inputs (its bootstrap is the costly part).
    """
    s, y = _labelled(similarity, is_break)
    curve = break_threshold_curve(s, y)
    chosen = threshold is None
    t = best_break_threshold(curve) if chosen else float(threshold)
    if t is None:
        return BreakValidation(math.nan, None, "no consecutive pair has an oracle label (both turns citing a page)",
                               {"n_pairs": 0, "n_page_changes": 0}, curve)
    auc = roc_auc if roc_auc is not None else pair_auc(s, y, n_boot, seed)
    at = binary_report(y, (s < t).astype(float), n_boot=n_boot, seed=seed, labels=("break", "no break"))
    m, base = at["metrics"], at["metrics"]["accuracy"]["baselines"]
    report = {
        "n_pairs": int(s.size), "n_page_changes": int(y.sum()), "oracle_break_rate": float(y.mean()),
        "roc_auc": auc, "threshold": t, "threshold_chosen_on_oracle": chosen, "in_sample": chosen,
        "at_threshold": {"confusion": at["confusion"], "n_flagged": int((s < t).sum()),
                         "flagged_rate": float((s < t).mean()),
                         **{k: m[k] for k in ("accuracy", "precision", "recall", "f1", "balanced_accuracy")}},
        "majority_baseline": base["majority_class"], "beats_majority": base["beats"],
    }
    separable, reason = _separable(auc, base)
    report.update(separable=separable, reason=reason)
    return BreakValidation(t, separable, reason, report, curve)


def pair_auc(similarity, is_break, n_boot: int = 1000, seed: int = 0) -> dict:
    """ROC-AUC of 1 − similarity for the pairs labelled 1 (page changes), with its bootstrap CI, over the pairs
    where both are known (:func:`ragnb.metrics.classification.score_report`'s entry)."""
    s, y = _labelled(similarity, is_break)
    return score_report(y, 1.0 - s, n_boot=n_boot, seed=seed)["roc_auc"]


def _separable(auc: dict, base: dict) -> tuple[bool | None, str]:
    lo, hi = auc["ci95"]
    if math.isnan(auc["mean"]):
        return None, f"ROC-AUC is undefined ({auc['reason']})"
    if math.isnan(lo) or base["beats"] is None:
        return None, "no confidence interval to decide with (n_boot = 0 or fewer than 2 pairs)"
    if lo <= CHANCE_AUC:
        return False, (f"same-page and page-change pairs are not separable by this similarity: ROC-AUC "
                       f"{auc['mean']:.3f}, 95% CI {lo:.3f}–{hi:.3f} includes {CHANCE_AUC:g}")
    if not base["beats"]:
        return False, f"the break flags do not beat the majority baseline: {base['reason']}"
    return True, ""
