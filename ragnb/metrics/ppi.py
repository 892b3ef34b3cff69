"""Prediction-powered inference (PPI, PPI++): the mean of a human-labelled quantity from a judge's scores on every
item and human labels on a few (docs/ppi.md; formulas in docs/metrics.md, Prediction-powered estimates).

Notation: ``Y`` the human labels of the n labelled items, ``Ŷ`` the judge's scores of those items, ``Ŷᵘ`` the
judge's scores of the ``Nᵤ`` items without a label (N = n + Nᵤ items in all), ``var₀`` the variance with divisor
n (numpy's default), z = Φ⁻¹(1 − α/2).

    PPI++    θ̂ = λ·mean(Ŷᵘ) + mean(Y − λŶ)
             se² = λ²·var₀(Ŷᵘ)/Nᵤ + var₀(Y − λŶ)/n,  CI = θ̂ ± z·se
             λ = clip( cov₀(Y, Ŷ) / ((1 + n/Nᵤ)·var₁(Ŷ ∪ Ŷᵘ)), 0, 1 )   (var₁: divisor N − 1)

λ = 1 is plain PPI, λ = 0 the classical human-only mean; the data choose λ (Angelopoulos, Duchi, Zrnic 2023),
so the interval is asymptotically never wider than the human-only one. These are the formulas of the authors'
package ``ppi-python`` (``ppi_mean_ci``, ``ppi_mean_pointestimate``, ``classical_mean_ci``), which the tests use
as the oracle. Where their code has no answer ragnb decides, and says so in ``note``:

* judge constant (var(Ŷ ∪ Ŷᵘ) = 0) → λ = 0: the judge carries no information (their code returns NaN);
* no unlabelled item (Nᵤ = 0) → λ = 0: nothing to impute, the estimate is the human mean;
* fewer than 2 labels → no interval (NaN), ``note`` says so; 0 labels → no estimate at all (``no_labels``);
* a failed judge verdict (NaN score) is never dropped: it is replaced by c = the mean of the judge's valid scores
  over all N items, on labelled and unlabelled items alike. PPI is valid for any prediction rule, and "the judge's
  score, or c where the judge failed" is one, so the estimate stays unbiased and the interval valid whatever the
  failures correlate with; the labelled failed items' rectifier Y − λc corrects c. ``n_failed`` counts them.

Effective sample size: n_eff = n · se²_classical / se²_PPI = var₀(Y) / se²_PPI — the number of human labels a
human-only interval would need to be as narrow as the PPI interval.

The interval ragnb quotes (``finite=True``, the default) is built for the 25–100 labels a team has, where the normal
interval above covers the truth only 0.89–0.93 of the time (BENCHMARKS §15). The point estimate and λ are the
authors' exactly; the interval differs in three ways that vanish as n grows:

    se² = λ²·var₁(Ŷᵘ)/Nᵤ + v/n,   v = ((n − 1)·var₁(Y − λŶ) + s²/2) / (n + 1),   CI = θ̂ ± t_{n−1, 1−α/2}·se

* t_{n−1} instead of z, and divisor n − 1 (var₁): the variance is estimated from n labels;
* for labels in a known range of width s (0/1 labels: s = 1), two pseudo-observations at r̄ ± s/2 are added to
  the rectifier r = Y − λŶ (the idea of Agresti–Coull's "add two successes and two failures"): a small sample that
  happens to look uniform, or all 25 labels equal, no longer yields a near-zero or zero width;
* the interval is clipped to the labels' range, and a human-only interval of 0/1 labels (λ = 0) is Wilson's score
  interval, which keeps its coverage near 95% at small n and is never of width 0.

``finite=False`` gives the authors' normal interval (the oracle the tests compare with). Below :data:`MIN_LABELS`
labels ``note`` says that no interval of so few labels can be trusted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from statistics import NormalDist

import numpy as np

from ragnb.metrics.registry import register

# Fewer labels than this: the interval is still computed, but its note says no interval of so few can be trusted.
MIN_LABELS = 10
BINARY = (0.0, 1.0)  # the range of 0/1 labels
PSEUDO = 4  # pseudo-observations, half at each side of the mean rectifier (Agresti–Coull's z² ≈ 4)

ArrayLike = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class PPIResult:
    """One estimate of a mean with its interval. ``value`` is the point estimate (the registry's headline)."""

    method: str  # "ppi++", "classical" (human only), "judge_only", "stratified_ppi++", "active_ppi++", ...
    estimate: float
    ci: tuple[float, float]
    se: float
    alpha: float
    n: int  # human labels used
    N: int  # items in all (labelled + unlabelled)
    lam: float  # λ of PPI++; NaN for estimates without one
    effective_n: float  # labels the estimate is worth (NaN where undefined)
    n_failed: int  # items whose judge verdict failed (counted, imputed: see the module docstring)
    note: str = ""  # why the estimate or interval is undefined or says nothing; "" when it is fine

    @property
    def value(self) -> float:
        return self.estimate

    @property
    def width(self) -> float:
        return self.ci[1] - self.ci[0]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci"] = [_json_float(x) for x in self.ci]
        return {k: _json_float(v) if isinstance(v, float) else v for k, v in d.items()}


def _json_float(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def z_value(alpha: float) -> float:
    """z = Φ⁻¹(1 − α/2), the two-sided normal quantile; ValueError unless 0 < α < 1."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1) (0.05 for a 95% interval), got {alpha!r}")
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)  # stdlib (Wichura's AS241, ~1e-16): no scipy at import


def interval(estimate: float, se: float, alpha: float, df: float | None = None,
             bounds: tuple[float, float] | None = None) -> tuple[float, float]:
    """estimate ± q·se with q = z (``df`` None) or Student's t with ``df`` degrees of freedom; clipped to
    ``bounds`` (the labels' range) when given."""
    q = z_value(alpha) if df is None else t_value(alpha, df)
    lo, hi = estimate - q * se, estimate + q * se
    if bounds is not None and math.isfinite(lo) and math.isfinite(hi):
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return (lo, hi)


def t_value(alpha: float, df: float) -> float:
    """t_{df, 1−α/2}, the two-sided Student quantile; z when df is infinite."""
    z_value(alpha)  # checks α
    if not df > 0:
        return math.nan
    from scipy.stats import t  # lazily: scipy is heavy and only intervals need it

    return float(t.ppf(1.0 - alpha / 2.0, df))


def span_of(bounds: tuple[float, float] | None) -> float | None:
    return None if bounds is None else float(bounds[1] - bounds[0])


def rectifier_variance(r: np.ndarray, span: float | None) -> float:
    """v = var₁(r), or with the labels' range width ``span`` known, ((n − 1)·var₁(r) + span²/2)/(n + 1): the
    variance once two pseudo-observations r̄ ± span/2 join the sample (module docstring)."""
    n = r.size
    v = float(np.var(r, ddof=1)) if n >= 2 else math.nan
    return v if span is None else ((n - 1) * v + PSEUDO * span ** 2 / 4.0) / (n - 1 + PSEUDO)


def wilson(y: np.ndarray, alpha: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """Wilson's score interval for the mean of labels that take only the two values of ``bounds``:
    (p̂ + z²/2n ± z·√(p̂(1 − p̂)/n + z²/4n²)) / (1 + z²/n), mapped back onto the bounds."""
    lo_b, hi_b = bounds
    n, z = y.size, z_value(alpha)
    p = float(np.mean((y - lo_b) / (hi_b - lo_b)))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (lo_b + (hi_b - lo_b) * max(centre - half, 0.0), lo_b + (hi_b - lo_b) * min(centre + half, 1.0))


def two_valued(y: np.ndarray, bounds: tuple[float, float] | None) -> bool:
    return bounds is not None and bool(np.all((y == bounds[0]) | (y == bounds[1])))


# --------------------------------------------------------------------------- input checks


def check_labels(human: ArrayLike, binary: bool, what: str = "human_labeled") -> np.ndarray:
    """Human labels as floats: finite, and 0/1 when ``binary``. ValueError naming the position and the fix."""
    y = np.asarray(human, dtype=float).ravel()
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise ValueError(f"{what}: label at position {bad[0]} is {y[bad[0]]}; every labelled item needs a number "
                         "(leave an item out of the labels instead of passing NaN)")
    if binary:
        bad = np.flatnonzero((y != 0.0) & (y != 1.0))
        if bad.size:
            raise ValueError(f"{what}: label {y[bad[0]]!r} at position {bad[0]} is not 0 or 1; a binary metric takes "
                             "labels 0/1 (or False/True) — pass binary=False for a continuous score")
    return y


def check_scores(judge: ArrayLike, binary: bool, what: str) -> np.ndarray:
    """Judge scores as floats (NaN = failed verdict); in [0, 1] when ``binary``; ±inf refused."""
    s = np.asarray(judge, dtype=float).ravel()
    if np.isinf(s).any():
        raise ValueError(f"{what}: a score is infinite at position {int(np.flatnonzero(np.isinf(s))[0])}; "
                         "a failed verdict is NaN, not inf")
    if binary and ((s < 0) | (s > 1)).any():
        pos = int(np.flatnonzero((s < 0) | (s > 1))[0])
        raise ValueError(f"{what}: score {s[pos]!r} at position {pos} is outside [0, 1]; a binary metric's judge "
                         "gives 0/1 verdicts or probabilities")
    return s


def fill_failed(all_scores: np.ndarray, *others: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """c = mean of the valid scores in ``all_scores``; every NaN of each array replaced by c (0.0 if none valid)."""
    valid = all_scores[~np.isnan(all_scores)]
    c = float(valid.mean()) if valid.size else 0.0
    return c, [np.where(np.isnan(a), c, a) for a in (all_scores, *others)]


# --------------------------------------------------------------------------- the estimators on arrays


def power_tuning(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> float:
    """λ̂ = clip(cov₀(Y, Ŷ) / ((1 + n/Nᵤ)·var₁(Ŷ ∪ Ŷᵘ)), 0, 1); 0 when Nᵤ = 0, n < 2 or the judge is constant."""
    n, n_u = y.size, yhat_unlabelled.size
    if n_u == 0 or n < 2:
        return 0.0
    var_all = float(np.var(np.concatenate([yhat, yhat_unlabelled]), ddof=1))
    if var_all <= 0.0:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    return float(np.clip(cov / ((1.0 + n / n_u) * var_all), 0.0, 1.0))


def ppi_arrays(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, alpha: float = 0.05,
               lam: float | None = None, n_failed: int = 0, *, bounds: tuple[float, float] | None = None,
               finite: bool = True) -> PPIResult:
    """PPI++ on disjoint labelled (``y``, ``yhat``) and unlabelled (``yhat_unlabelled``) parts, NaN-free (the
    authors' setting); ``lam`` fixes λ (1 = plain PPI, 0 = classical), None tunes it. ``bounds``: the labels'
    range ((0, 1) for 0/1 labels), for the finite-sample interval; ``finite=False``: the authors' normal one."""
    n, n_u = y.size, yhat_unlabelled.size
    if n == 0:
        return no_labels("ppi++", alpha, n_u, n_failed)
    lam = power_tuning(y, yhat, yhat_unlabelled) if lam is None else float(lam)
    imputed = lam * float(yhat_unlabelled.mean()) if n_u else 0.0
    rect = y - lam * yhat
    est = imputed + float(rect.mean())
    note = _note(n, y, yhat_unlabelled, yhat, finite)
    if not finite:
        se = math.sqrt((lam ** 2 * float(np.var(yhat_unlabelled)) / n_u if n_u else 0.0) + float(np.var(rect)) / n)
        ci = interval(est, se, alpha)
    else:
        judge_var = lam ** 2 * float(np.var(yhat_unlabelled, ddof=1)) / n_u if n_u >= 2 else 0.0
        se = math.sqrt(judge_var + rectifier_variance(rect, span_of(bounds)) / n) if n >= 2 else math.nan
        ci = (wilson(y, alpha, bounds) if lam == 0.0 and n >= 2 and two_valued(y, bounds)
              else interval(est, se, alpha, n - 1, bounds))
        if bounds is None and n >= 2 and _no_spread(rect, judge_var):
            # labels of unknown range that leave the rectifier constant (all 25 labels 1 with binary=False, or all
            # 0.4): nothing measures how far the mean may be, so no interval rather than a zero-width one
            ci = (math.nan, math.nan)
            note = "; ".join(x for x in (note, _UNDEFINED) if x)
    if n < 2:
        se, ci = math.nan, (math.nan, math.nan)
    return PPIResult("ppi++", est, ci, se, alpha, n, n + n_u, lam, _effective_n(float(np.var(y)), se, n), n_failed,
                     note)


_UNDEFINED = ("no interval: the labels leave no spread to measure and their range is unknown (pass binary=True for "
              "0/1 labels: Wilson's interval)")


def _no_spread(rect: np.ndarray, judge_var: float) -> bool:
    """The rectifier is constant and the judge's part adds no variance: se would be 0 (up to rounding)."""
    return judge_var == 0.0 and bool(np.all(rect == rect[0]))


def classical_arrays(y: np.ndarray, alpha: float = 0.05, N: int | None = None, n_failed: int = 0, *,
                     bounds: tuple[float, float] | None = None, finite: bool = True) -> PPIResult:
    """Human-only: Ȳ ± z·sd₀(Y)/√n (ppi-python's ``classical_mean_ci``, ``finite=False``); by default the
    finite-sample interval of the module docstring with λ = 0 (Wilson's for 0/1 labels); effective n = n."""
    n = y.size
    if n == 0:
        return no_labels("classical", alpha, N or 0, n_failed)
    r = ppi_arrays(y, y, np.empty(0), alpha, lam=0.0, n_failed=n_failed, bounds=bounds, finite=finite)
    note = _note(n, y, finite=finite)
    if _UNDEFINED in r.note:  # said by ppi_arrays; the human-only note is rebuilt without the judge's parts
        note = "; ".join(x for x in (note, _UNDEFINED) if x)
    return PPIResult("classical", r.estimate, r.ci, r.se, alpha, n, N if N is not None else n, math.nan, float(n),
                     n_failed, note)


def judge_only_arrays(scores: np.ndarray, alpha: float = 0.05, n_labelled: int = 0) -> PPIResult:
    """The judge's mean over its valid scores ± z·sd₀/√N_valid: an interval for the *judge's* mean, blind to its
    bias against the human labels (never an interval for the human quantity). Failed verdicts are counted."""
    valid = scores[~np.isnan(scores)]
    n_failed = int(scores.size - valid.size)
    if not valid.size:
        return PPIResult("judge_only", math.nan, (math.nan, math.nan), math.nan, alpha, n_labelled, int(scores.size),
                         math.nan, math.nan, n_failed, "no valid judge score")
    est = float(valid.mean())
    se = float(np.std(valid)) / math.sqrt(valid.size) if valid.size >= 2 else math.nan
    return PPIResult("judge_only", est, interval(est, se, alpha), se, alpha, n_labelled, int(scores.size), math.nan,
                     math.nan, n_failed, "the judge's own mean: its interval ignores the judge's bias")


def no_labels(method: str, alpha: float, N: int, n_failed: int) -> PPIResult:
    return PPIResult(method, math.nan, (math.nan, math.nan), math.nan, alpha, 0, N, math.nan, math.nan, n_failed,
                     "no labels: no human label yet, so no estimate of the human quantity (label items first: "
                     "ragnb dataset label-plan)")


def _note(n: int, y: np.ndarray, yhat_unlabelled: np.ndarray | None = None, yhat: np.ndarray | None = None,
          finite: bool = True) -> str:
    notes = []
    if n < 2:
        notes.append(f"only {n} label: no interval (needs at least 2)")
    elif np.all(y == y[0]):
        notes.append(f"all {n} labels are {y[0]:g}: " + (
            "the interval rests on the labels' range alone (two pseudo-labels, or Wilson's bound for 0/1 labels)"
            if finite else "the normal interval of the labels has zero width and says nothing about how far the "
                           "rate may be from it"))
    if 2 <= n < MIN_LABELS:
        notes.append(f"only {n} labels: too few for any interval to be trusted (label at least {MIN_LABELS}; "
                     "25 or more for the 95% to hold, BENCHMARKS §15)")
    if yhat is not None and yhat_unlabelled is not None:
        all_scores = np.concatenate([yhat, yhat_unlabelled])
        if all_scores.size and np.all(all_scores == all_scores[0]):
            notes.append("the judge gives every item the same score: λ = 0, the estimate is the human-only one")
        elif yhat_unlabelled.size == 0:
            notes.append("every item is labelled: λ = 0, the estimate is the human-only one")
    return "; ".join(notes)


def _effective_n(var_y: float, se: float, n: int) -> float:
    """n_eff = var₀(Y)/se² (= n·se²_classical/se²); NaN when either is 0 or undefined."""
    if n < 2 or not se > 0.0 or not var_y > 0.0:
        return math.nan
    return var_y / se ** 2


# --------------------------------------------------------------------------- public API


def remove_labelled(judge_all: np.ndarray, judge_labeled: np.ndarray) -> np.ndarray:
    """The scores of ``judge_all`` left once one occurrence of each labelled score is taken out (multiset
    difference): the unlabelled part. ValueError when a labelled score is not in ``judge_all``."""
    left = Counter(judge_all.tolist())
    for pos, v in enumerate(judge_labeled.tolist()):
        if left[v] <= 0:
            raise ValueError(f"judge_labeled[{pos}] = {v!r} is not among judge_all's scores: judge_all must hold the "
                             "judge's scores of every item, the labelled ones included")
        left[v] -= 1
    return np.fromiter(left.elements(), dtype=float)


@register("ppi_mean", "ppi", kind="estimator", value_range=(-math.inf, math.inf), higher_is_better=True)
def ppi_mean(judge_all: ArrayLike, judge_labeled: ArrayLike, human_labeled: ArrayLike, alpha: float = 0.05, *,
             binary: bool = False, lam: float | None = None, finite: bool = True) -> PPIResult:
    """Prediction-powered mean (PPI++): θ̂ = λ·mean(Ŷᵘ) + mean(Y − λŶ), se² = λ²var₀(Ŷᵘ)/Nᵤ + var₀(Y − λŶ)/n,
    CI = θ̂ ± z_{1−α/2}·se, λ = clip(cov₀(Y, Ŷ)/((1 + n/Nᵤ)·var₁(Ŷ ∪ Ŷᵘ)), 0, 1).

    ``judge_all``: the judge's score of every item, the labelled ones included (NaN = failed verdict);
    ``judge_labeled``, ``human_labeled``: the judge's score and the human label of each labelled item, aligned.
    The unlabelled part Ŷᵘ is ``judge_all`` less the labelled scores. ``binary``: labels must be 0/1 (and the
    interval uses that range). ``finite=False``: the authors' normal interval instead of the finite-sample one.
    """
    y = check_labels(human_labeled, binary)
    all_s = check_scores(judge_all, binary, "judge_all")
    lab_s = check_scores(judge_labeled, binary, "judge_labeled")
    if lab_s.size != y.size:
        raise ValueError(f"judge_labeled has {lab_s.size} scores but human_labeled {y.size} labels; they must be "
                         "aligned, one pair per labelled item")
    if lab_s.size > all_s.size:
        raise ValueError(f"{lab_s.size} labelled items but judge_all holds {all_s.size} scores; judge_all must hold "
                         "every item, the labelled ones included")
    n_failed = int(np.isnan(all_s).sum())
    if int(np.isnan(lab_s).sum()) > n_failed:
        raise ValueError("judge_labeled has more failed (NaN) scores than judge_all: judge_all must hold every item")
    _, (all_f, lab_f) = fill_failed(all_s, lab_s)
    return ppi_arrays(y, lab_f, remove_labelled(all_f, lab_f), alpha, lam=lam, n_failed=n_failed,
                      bounds=BINARY if binary else None, finite=finite)


def classical_mean(human_labeled: ArrayLike, alpha: float = 0.05, *, binary: bool = False,
                   finite: bool = True) -> PPIResult:
    """Human-only mean and its interval: Wilson's for 0/1 labels, else Ȳ ± t_{n−1}·sd₁(Y)/√n (``finite=False``:
    the normal Ȳ ± z·sd₀(Y)/√n)."""
    return classical_arrays(check_labels(human_labeled, binary), alpha, bounds=BINARY if binary else None,
                            finite=finite)


def judge_mean(judge_all: ArrayLike, alpha: float = 0.05) -> PPIResult:
    """The judge-only mean over its valid scores (failed ones counted in ``n_failed``)."""
    return judge_only_arrays(check_scores(judge_all, False, "judge_all"), alpha)
