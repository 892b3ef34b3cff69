"""PPI on items keyed by id: the judge's score per item, human labels for some; the three estimates side by side
(judge-only, human-only, PPI++) and which one to quote; the paired difference of two runs or systems
(formulas: :mod:`ragnb.metrics.ppi`, docs/metrics.md, Prediction-powered estimates)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ragnb.metrics.ppi import (BINARY, MIN_LABELS, PPIResult, check_labels, check_scores, classical_arrays,
                               fill_failed, judge_only_arrays, ppi_arrays)
from ragnb.metrics.registry import register

if TYPE_CHECKING:
    import pandas as pd

# A judged metric's PPI block in a metrics JSON / run record (``<metric>_ppi``, ragnb.tiers.human_labels) and the
# per-item column of its human labels (``<metric>_human_label``).
PPI_SUFFIX = "_ppi"
LABEL_SUFFIX = "_human_label"


@dataclass(frozen=True)
class Aligned:
    """Judge scores and labels split by id: labelled (``ids``, ``y``, ``yhat``) and unlabelled (``yhat_u``);
    failed verdicts already replaced (see :func:`ragnb.metrics.ppi.fill_failed`), ``n_failed`` counts them."""

    ids: list[str]
    y: np.ndarray
    yhat: np.ndarray
    unlabelled_ids: list[str]
    yhat_u: np.ndarray
    raw_scores: np.ndarray  # every item's score before filling (NaN = failed), labelled first
    n_failed: int


def unknown_ids(judge: Mapping[str, Any], human: Mapping[str, Any], what: str = "human labels") -> None:
    """ValueError when ``human`` has ids the judge never scored (a typo, another dataset)."""
    unknown = [i for i in human if i not in judge]
    if unknown:
        raise ValueError(f"{what}: {len(unknown)} labelled id(s) are not among the {len(judge)} judged items, e.g. "
                         f"{', '.join(map(repr, unknown[:5]))}; label only items of this run (check the id column)")


def align(judge: Mapping[str, float], human: Mapping[str, float], binary: bool = False) -> Aligned:
    """Split ``judge`` (id → score, NaN/None = failed) into the labelled ids of ``human`` (id → label) and the rest."""
    unknown_ids(judge, human)
    ids = list(human)
    rest = [i for i in judge if i not in human]
    y = check_labels([human[i] for i in ids], binary, "human labels")
    raw = check_scores([_num(judge[i]) for i in (*ids, *rest)], binary, "judge scores")
    n_failed = int(np.isnan(raw).sum())
    _, (filled,) = fill_failed(raw)
    return Aligned(ids, y, filled[:len(ids)], rest, filled[len(ids):], raw, n_failed)


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class Estimates:
    """Judge-only, human-only and PPI++ estimates of one quantity, and which one to quote."""

    judge_only: PPIResult
    human_only: PPIResult
    ppi: PPIResult

    @property
    def value(self) -> float:
        """The PPI++ point estimate (the registry's headline number)."""
        return self.ppi.estimate

    @property
    def quote(self) -> tuple[str, str]:
        """(method to quote, why). PPI whenever it has an interval; else the human-only one; else the judge's
        mean, flagged: with fewer than 2 labels nothing bounds the judge's bias."""
        if math.isfinite(self.ppi.se):
            worth = (f", worth {self.ppi.effective_n:.0f} human labels" if math.isfinite(self.ppi.effective_n)
                     else "")
            few = (f"; only {self.ppi.n} labels: too few for any interval to be trusted"
                   if self.ppi.n < MIN_LABELS else "")
            return self.ppi.method, (f"PPI: valid whatever the judge's bias, from {self.ppi.n} labels and {self.ppi.N} "
                             f"judged items{worth}{few}")
        if self.human_only.n:
            return self.human_only.method, "the human labels (too few for PPI's interval)"
        return self.judge_only.method, ("the judge's mean, unchecked: no human label bounds its bias (label items: "
                              "ragnb dataset label-plan)")

    def rows(self) -> list[dict[str, Any]]:
        quoted = self.quote[0]
        return [{"estimate": r.method, "value": r.estimate, "ci_low": r.ci[0], "ci_high": r.ci[1],
                 "width": r.width, "n_labels": r.n, "N_items": r.N, "lambda": r.lam, "effective_n": r.effective_n,
                 "n_failed": r.n_failed, "quote": r.method == quoted, "note": r.note}
                for r in (self.judge_only, self.human_only, self.ppi)]

    def frame(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame(self.rows())

    def to_dict(self) -> dict[str, Any]:
        return {"judge_only": self.judge_only.to_dict(), "human_only": self.human_only.to_dict(),
                "ppi": self.ppi.to_dict(), "quote": self.quote[0], "quote_reason": self.quote[1]}


def estimates(judge: Mapping[str, float], human: Mapping[str, float], alpha: float = 0.05, *,
              binary: bool = False, bounds: tuple[float, float] | None = None) -> Estimates:
    """The three estimates for items keyed by id: ``judge`` id → score over every item (NaN/None = failed),
    ``human`` id → label over the labelled ones (every id must be judged). ``bounds``: the labels' range for the
    finite-sample interval (default (0, 1) when ``binary``; see :mod:`ragnb.metrics.ppi`)."""
    a = align(judge, human, binary)
    N = len(a.raw_scores)
    bounds = BINARY if bounds is None and binary else bounds
    return Estimates(judge_only_arrays(a.raw_scores, alpha, n_labelled=len(a.ids)),
                     classical_arrays(a.y, alpha, N=N, n_failed=a.n_failed, bounds=bounds),
                     ppi_arrays(a.y, a.yhat, a.yhat_u, alpha, n_failed=a.n_failed, bounds=bounds))


@register("ppi_mean_difference", "ppi", kind="estimator", value_range=(-math.inf, math.inf), higher_is_better=True)
def ppi_paired_difference(judge_a: Mapping[str, float], judge_b: Mapping[str, float], human_a: Mapping[str, float],
                          human_b: Mapping[str, float], alpha: float = 0.05, *, binary: bool = False) -> Estimates:
    """Paired PPI++ of the difference B − A on the same items: per item d̂_i = Ŷ_B,i − Ŷ_A,i (judge) and
    d_i = Y_B,i − Y_A,i (human, on items labelled for both), then the PPI++ mean of d with d̂ as the prediction:
    θ̂ = λ·mean(d̂ᵘ) + mean(d − λd̂), se² = λ²var₀(d̂ᵘ)/Nᵤ + var₀(d − λd̂)/n (:func:`ragnb.metrics.ppi.ppi_mean`).
    A failed verdict of either system fails the item's d̂ (counted, imputed as for any failed verdict)."""
    if set(judge_a) != set(judge_b):
        only = sorted(set(judge_a) ^ set(judge_b))
        raise ValueError(f"judge_a and judge_b must score the same items; {len(only)} id(s) are in one only, e.g. "
                         f"{', '.join(map(repr, only[:5]))} (a paired difference compares items both runs answered)")
    if set(human_a) != set(human_b):
        only = sorted(set(human_a) ^ set(human_b))
        raise ValueError(f"human_a and human_b must label the same items; {len(only)} id(s) are labelled for one "
                         f"system only, e.g. {', '.join(map(repr, only[:5]))}: label both answers of each item")
    unknown_ids(judge_a, human_a)
    ya = dict(zip(human_a, check_labels(list(human_a.values()), binary, "human_a")))
    yb = dict(zip(human_b, check_labels(list(human_b.values()), binary, "human_b")))
    sa = dict(zip(judge_a, check_scores([_num(v) for v in judge_a.values()], binary, "judge_a")))
    sb = dict(zip(judge_b, check_scores([_num(v) for v in judge_b.values()], binary, "judge_b")))
    diff_judge = {i: sb[i] - sa[i] for i in judge_a}
    diff_human = {i: yb[i] - ya[i] for i in human_a}
    # the difference of two 0/1 labels lies in [−1, 1]
    return estimates(diff_judge, diff_human, alpha, binary=False, bounds=(-1.0, 1.0) if binary else None)


def estimates_from_frame(frame: "pd.DataFrame", score: str, label: str, *, id_column: str = "id",
                         alpha: float = 0.05, binary: bool = False) -> Estimates:
    """The three estimates from a per-item table: ``score`` the judge's score of every row (NaN = failed),
    ``label`` the human label where an item was labelled and empty (NaN/None) elsewhere — the shape a tier's
    per-item table takes once reviewed labels are merged in. ValueError naming a missing column."""
    missing = [c for c in (id_column, score, label) if c not in frame.columns]
    if missing:
        raise ValueError(f"per-item table: no column {', '.join(map(repr, missing))}; columns: "
                         f"{', '.join(map(str, frame.columns))}")
    ids = frame[id_column].astype(str)
    if ids.duplicated().any():
        raise ValueError(f"per-item table: item id {ids[ids.duplicated()].iloc[0]!r} appears twice; one row per item")
    judge = dict(zip(ids, frame[score].map(_num)))
    labelled = frame[label].notna()
    return estimates(judge, dict(zip(ids[labelled], frame[label][labelled])), alpha, binary=binary)
