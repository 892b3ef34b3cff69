"""Tier UX: the calibrated cache τ validated on users it was not chosen on (docs/metrics.md, Tier UX, Thresholds).

A τ chosen as the smallest one whose precision on a log reaches the target is, on that same log, at the target by
construction; on new questions it falls short (on a held-out bilingual log: 0.873 over 20 user half-splits for a
0.9 target). So the verdict reads precision on questions of *other users*: split the users in two at random,
calibrate on one half, measure on the other, repeat with seeded splits.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from ragnb.metrics.ux_thresholds import _TOL, calibrate_tau, check_target_precision

N_SPLITS = 20  # user half-splits per validation


def split_units(user_ids: Sequence | None, session_ids: Sequence | None, n: int) -> tuple[list[str], str]:
    """Per question the unit that splits keep together, and its name: the user where known, else the session,
    else the question itself. Questions without a user (or session) are units of their own; question-level
    splits let one user's re-asks fall on both sides (optimistic), so the name says which was used."""
    for name, ids in (("user", user_ids), ("session", session_ids)):
        if ids is None:
            continue
        if len(ids) != n:
            raise ValueError(f"{name} ids: {len(ids)} for {n} questions; give one (or None) per question")
        known = [None if x is None or (isinstance(x, float) and math.isnan(x)) or not str(x).strip() else str(x)
                 for x in ids]
        if any(k is not None for k in known):
            return [f"{name}:{k}" if k is not None else f"question:{i}" for i, k in enumerate(known)], name
    return [f"question:{i}" for i in range(n)], "question"


def _held_out(sims: np.ndarray, correct: np.ndarray, tau: float) -> tuple[int, int, int]:
    hits = sims > tau
    judged = hits & ~np.isnan(correct)
    return int(hits.sum()), int(judged.sum()), int((correct[judged] == 1.0).sum())


def validate_tau(max_similarity, correct, units: Sequence[str], target_precision: float,
                 n_splits: int = N_SPLITS, seed: int = 0) -> tuple[dict, pd.DataFrame]:
    """Out-of-sample precision of the calibrated τ over ``n_splits`` seeded random halvings of the ``units``.

    Split s: a random ⌊U/2⌋ of the U units calibrate (:func:`calibrate_tau` on their questions' best-match
    similarity s_q and verdict ``correct`` 1 / 0 / NaN) → τ_s; on the other units' questions

        precision_s = |{q held out : s_q > τ_s, correct(q) = 1}| / |{q held out : s_q > τ_s, correct(q) known}|

    (NaN when τ_s does not exist or no held-out hit can be judged: counted in n_failed). Summary: ``precision``
    = mean over splits with ``ci95`` = the 2.5th–97.5th percentile of precision_s (numpy, linear) — the spread
    over which users calibrated —, ``in_sample`` the same over the calibration halves, and ``reaches_target``:
    mean precision_s ≥ target. Returns (summary, one row per split).
    """
    target = check_target_precision(target_precision)
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 1:
        raise ValueError(f"n_splits = {n_splits!r}; use a whole number ≥ 1 of user half-splits (e.g. 20)")
    sims, corr = np.asarray(max_similarity, dtype=float), np.asarray(correct, dtype=float)
    unit = np.asarray([str(u) for u in units])
    if not sims.size == corr.size == unit.size:
        raise ValueError(f"max_similarity ({sims.size}), correct ({corr.size}) and units ({unit.size}) need one "
                         "entry per question")
    names = np.unique(unit)
    if names.size < 2:
        return {"possible": False, "reason": f"{names.size} unit(s): two are needed to calibrate on one and measure "
                "on the other"}, pd.DataFrame()
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_splits):
        cal_units = set(rng.permutation(names)[: names.size // 2])
        in_cal = np.isin(unit, list(cal_units))
        cal = calibrate_tau(sims[in_cal], corr[in_cal], target)
        row = {"split": s, "n_units_calibration": len(cal_units), "tau": cal.tau, "in_sample_precision": math.nan,
               "n_hits": 0, "n_judged": 0, "n_correct": 0, "precision": math.nan,
               "calibration_units": " | ".join(sorted(cal_units))}
        if cal.tau is not None:
            row["in_sample_precision"] = cal.at(cal.tau)["precision"]
            row["n_hits"], row["n_judged"], row["n_correct"] = _held_out(sims[~in_cal], corr[~in_cal], cal.tau)
            row["precision"] = row["n_correct"] / row["n_judged"] if row["n_judged"] else math.nan
        rows.append(row)
    table = pd.DataFrame(rows)
    return _summary(table, target, int(names.size), n_splits, seed), table


def _spread(values: np.ndarray, n: int) -> dict:
    v = values[~np.isnan(values)]
    ci = [float(x) for x in np.percentile(v, [2.5, 97.5])] if v.size >= 2 else [math.nan, math.nan]
    return {"mean": float(v.mean()) if v.size else math.nan, "ci95": ci, "n": n, "n_valid": int(v.size),
            "n_failed": n - int(v.size)}


def _summary(table: pd.DataFrame, target: float, n_units: int, n_splits: int, seed: int) -> dict:
    out = _spread(table["precision"].to_numpy(dtype=float), n_splits)
    taus = table["tau"].dropna().to_numpy(dtype=float)
    return {"possible": True, "n_splits": n_splits, "seed": seed, "n_units": n_units, "target_precision": target,
            "precision": {**out, "interval": "2.5th–97.5th percentile over the user splits"},
            "in_sample": _spread(table["in_sample_precision"].to_numpy(dtype=float), n_splits),
            "tau": {"min": float(taus.min()) if taus.size else math.nan,
                    "median": float(np.median(taus)) if taus.size else math.nan,
                    "max": float(taus.max()) if taus.size else math.nan},
            "n_no_tau": int(table["tau"].isna().sum()),
            "n_held_out_judged": int(table["n_judged"].sum()),
            "reaches_target": bool(out["n_valid"]) and out["mean"] >= target - _TOL}
