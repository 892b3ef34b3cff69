"""The trivial baselines a binary judge's accuracy must beat on the same items (docs/metrics.md, Baselines).

On skewed labels accuracy flatters: with 90% "show" labels, always answering "show" scores 0.90, so a judge at
0.855 is worse than no judge at all. Before an accuracy is graded it is compared, item by item, with

* the majority class — always answering the more common label: accuracy max(p, 1 − p), p = share of positive
  labels among the items with a verdict (the better of the two constant answers);
* each constant answer — always positive: p; always negative: 1 − p;
* random answers at the base rate — positive with probability p, independently of the item: expected
  accuracy p² + (1 − p)² (never above the majority class).

Every trivial baseline has balanced accuracy 0.5 and Cohen's κ 0 (a constant answer: exactly; random answers:
in expectation), so those two, reported beside accuracy, say how far the judge is above chance.

The comparison that decides is paired: per item d_i = 𝟙[judge right on i] − 𝟙[majority class right on i], and
the percentile bootstrap 95% CI of mean(d) over the items (:func:`ragnb.metrics.stats.bootstrap_ci`). The judge
*beats the baselines* when that CI lies above 0 and its accuracy's own CI lies above the random baseline's
expected accuracy. Without a CI (``n_boot`` = 0, fewer than 2 items) it is undecided (``beats`` = None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragnb.metrics.stats import bootstrap_ci


def accuracy_baselines(t: np.ndarray, p: np.ndarray, n_boot: int = 1000, seed: int = 0,
                       labels: tuple[str, str] = ("positive", "negative"),
                       accuracy_ci95: Sequence[float] | None = None) -> dict[str, Any]:
    """Baselines of binary verdicts ``p`` against labels ``t`` (1.0 / 0.0 arrays of the *valid* items, aligned).

    Returns ``{"majority_label", "majority_class", "constant": {label: accuracy}, "random_at_base_rate",
    "difference", "difference_ci95", "accuracy_ci95", "beats", "reason", "n"}``: ``difference`` = judge
    accuracy − majority-class accuracy on the same items with its paired bootstrap CI; ``beats`` True / False /
    None (undecided: no CI); ``reason`` a sentence saying why it does not beat them ("" when it does).
    ``labels``: the names of the positive and negative answers (``("show", "no-show")``); ``accuracy_ci95``: the
    CI the report shows for accuracy (so the rule reads the same interval), else bootstrapped here.
    """
    t, p = np.asarray(t, dtype=float), np.asarray(p, dtype=float)
    if t.shape != p.shape or np.isnan(t).any() or np.isnan(p).any():
        raise ValueError("accuracy_baselines needs aligned 0/1 labels and verdicts without missing values; "
                         "drop the failed verdicts first")
    n = int(t.size)
    if n == 0:
        return {"majority_label": None, "majority_class": math.nan, "constant": {}, "random_at_base_rate": math.nan,
                "difference": math.nan, "difference_ci95": [math.nan, math.nan],
                "accuracy_ci95": [math.nan, math.nan], "beats": None, "reason": "no item with a verdict", "n": 0}
    rate = float(t.mean())
    majority = 1.0 if rate >= 0.5 else 0.0  # a tie: either constant scores 0.5
    correct = (p == t).astype(float)
    diff = correct - (t == majority).astype(float)
    diff_ci = list(bootstrap_ci(diff, n_boot=n_boot, seed=seed))
    acc_ci = list(accuracy_ci95) if accuracy_ci95 is not None else list(bootstrap_ci(correct, n_boot=n_boot, seed=seed))
    random = rate ** 2 + (1 - rate) ** 2
    out = {"majority_label": labels[0] if majority else labels[1], "majority_class": max(rate, 1 - rate),
           "constant": {labels[0]: rate, labels[1]: 1 - rate}, "random_at_base_rate": random,
           "difference": float(diff.mean()), "difference_ci95": diff_ci, "accuracy_ci95": acc_ci, "n": n}
    out["beats"], out["reason"] = _verdict(out, float(correct.mean()))
    return out


def _verdict(b: dict[str, Any], accuracy: float) -> tuple[bool | None, str]:
    (d_lo, d_hi), (a_lo, _) = b["difference_ci95"], b["accuracy_ci95"]
    always = f"always answering {b['majority_label']!r} ({b['majority_class']:.3f})"
    if math.isnan(d_lo) or math.isnan(a_lo):
        return None, f"no confidence interval to compare it with {always} (n_boot = 0 or fewer than 2 items)"
    diff = f"paired difference {b['difference']:+.3f}, 95% CI {d_lo:+.3f} to {d_hi:+.3f}, n = {b['n']}"
    if d_hi < 0:
        return False, f"accuracy {accuracy:.3f} is worse than {always}: {diff}"
    if d_lo <= 0:
        return False, f"accuracy {accuracy:.3f} does not beat {always} beyond chance: {diff}"
    if a_lo <= b["random_at_base_rate"]:
        return False, (f"accuracy {accuracy:.3f} (95% CI lower bound {a_lo:.3f}) does not beat random answers at the "
                       f"base rate ({b['random_at_base_rate']:.3f})")
    return True, ""
