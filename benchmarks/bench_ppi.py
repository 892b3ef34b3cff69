"""Prediction-powered estimates on real human labels: coverage and width of the 95% PPI++ interval, against the
human-only interval and the judge-only mean (BENCHMARKS.md §15, docs/ppi.md).

Data: the bundled BEGIN dev set (ragnb/data/begin_groundedness; attributable = 1, generic rows dropped), whose
every response has a human label; the truth is the mean human label over all of it. Judges:

* ``offline``: the offline judge the tiers use without an LLM (word-overlap faithfulness,
  ragnb.metrics.fallback), its score in [0, 1] as the prediction;
* ``fake_llm``: a simulated LLM judge of known bias, score = clip(0.35 + 0.5·Y + ε, 0, 1), ε ~ N(0, 0.15²)
  (drawn once, seed 0): generous to unsupported responses;
* ``fake_llm_verdict``: the same judge's hard 0/1 verdict (score ≥ 0.5);
* ``offline_calibrated``: the offline score mapped to P(Y = 1 | score) by an isotonic fit on all the labels — a
  calibrated judge, the case active selection is designed for (not a judge a team has: it saw every label).

Per judge and budget n ∈ {25, 50, 100, 200}: ``--draws`` draws (seeded) of n labelled items, uniformly without
replacement (the rest unlabelled): coverage of the truth by the 95% PPI++ and human-only intervals (ragnb's
finite-sample intervals, and the authors' normal ones on the same draws), their median widths, median λ and
effective n; stratified PPI++ over three bins of the judge's score (labels allocated in proportion); the learned
active design of ``label-plan --active`` (ragnb.metrics.ppi_learned: the uniform sample's first half is round 1,
its labels fit the judge's error and decide; when the decision is uniform, round 2 is the sample's second half,
so that draw's interval is the uniform one; else n/2 more items by Poisson sampling with the learned π); and at
equal expected budget the earlier single-round active design (ragnb.metrics.ppi_active: π from √(s(1 − s)),
Poisson sampling), kept for comparison. The judge-only mean's bias is exact (all labels known).

Usage: PYTHONPATH=$PWD python benchmarks/bench_ppi.py [--draws 2000] [--out benchmarks/results/ppi.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from ragnb.io import atomic_write_text
from ragnb.metrics.fallback import word_overlap_faithfulness
from ragnb.metrics.fallback_agreement import begin_set
from ragnb.metrics.ppi import BINARY, PPIResult, classical_arrays, fill_failed, judge_only_arrays, ppi_arrays
from ragnb.metrics.ppi_active import active_arrays, inclusion_probabilities, uncertainty
from ragnb.metrics.ppi_learned import choose, fit_error, learned_arrays
from ragnb.metrics.ppi_strata import ppi_stratified

BUDGETS = (25, 50, 100, 200)
OUT = Path(__file__).resolve().parent / "results" / "ppi.json"


def judges(seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    data = begin_set()
    y = data.labels.astype(float)
    rng = np.random.default_rng(seed)
    fake = np.clip(0.35 + 0.5 * y + rng.normal(0.0, 0.15, size=y.size), 0.0, 1.0)
    offline = np.array([word_overlap_faithfulness(a, c) for a, c in zip(data.answers, data.contexts)])
    from sklearn.isotonic import IsotonicRegression

    # A calibrated judge, P(Y = 1 | s) = s: the offline score mapped through an isotonic fit on all the labels —
    # the best case for active selection, whose probabilities assume E[(Y − s)² | s] = s(1 − s).
    ok = ~np.isnan(offline)
    calibrated = np.full(y.size, np.nan)
    calibrated[ok] = IsotonicRegression(out_of_bounds="clip").fit(offline[ok], y[ok]).predict(offline[ok])
    return y, {"offline": offline, "offline_calibrated": calibrated, "fake_llm": fake,
               "fake_llm_verdict": (fake >= 0.5).astype(float)}


def _covers(ci: tuple[float, float], truth: float) -> bool:
    return ci[0] <= truth <= ci[1]


def _strata(f: np.ndarray, k: int = 3) -> np.ndarray:
    """Strata by the judge's score: its k quantile bins (the stratification Fisch et al. propose), failed → own."""
    ok = ~np.isnan(f)
    cuts = np.unique(np.quantile(f[ok], np.linspace(0, 1, k + 1)[1:-1]))
    return np.where(ok, np.searchsorted(cuts, np.nan_to_num(f), side="right"), k)


def _stratified_draw(strata: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n labels split over the strata in proportion to their size (at least 2 each), drawn without replacement."""
    mask = np.zeros(strata.size, dtype=bool)
    keys, counts = np.unique(strata, return_counts=True)
    alloc = np.maximum(2, np.floor(n * counts / strata.size).astype(int))
    for i in np.argsort(-(n * counts / strata.size - np.floor(n * counts / strata.size)))[:max(0, n - alloc.sum())]:
        alloc[i] += 1
    for key, m in zip(keys, alloc):
        members = np.flatnonzero(strata == key)
        mask[rng.choice(members, min(m, members.size), replace=False)] = True
    return mask


def simulate(y_pop: np.ndarray, f_pop: np.ndarray, n: int, draws: int, seed: int) -> dict:
    """Uniform, stratified and active designs at budget n over ``draws`` seeded draws. Each draw is a fresh sample
    of N items from the population (drawn with replacement from BEGIN, whose mean label is the truth): the iid
    setting the intervals are stated for. Failed (NaN) scores are imputed as the product does
    (ragnb.metrics.ppi.fill_failed). Every interval is ragnb's finite-sample one (labels 0/1); ``ppi_normal`` and
    ``human_normal`` are the authors' normal intervals on the same draws, for comparison."""
    truth, N = float(y_pop.mean()), y_pop.size
    rng = np.random.default_rng(seed)
    keys = ("ppi", "ppi_normal", "human", "human_normal", "judge_only", "stratified", "learned", "active",
            "active_human")
    rows = {k: [] for k in keys}
    picked, ratios = [], []
    for _ in range(draws):
        pick = rng.integers(0, N, size=N)
        y, (f,) = y_pop[pick], fill_failed(f_pop[pick])[1]
        pi = inclusion_probabilities(uncertainty(f_pop[pick]), n)
        order = rng.choice(N, n, replace=False)
        mask = np.zeros(N, dtype=bool)
        mask[order] = True
        rows["ppi"].append(ppi_arrays(y[mask], f[mask], f[~mask], bounds=BINARY))
        chose, ratio, learned = _learned(y, f, order, rng, rows["ppi"][-1])
        picked.append(chose)
        ratios.append(ratio)
        rows["learned"].append(learned)
        rows["ppi_normal"].append(ppi_arrays(y[mask], f[mask], f[~mask], finite=False))
        rows["human"].append(classical_arrays(y[mask], N=N, bounds=BINARY))
        rows["human_normal"].append(classical_arrays(y[mask], N=N, finite=False))
        rows["judge_only"].append(judge_only_arrays(f_pop[pick]))
        strata = _strata(f_pop[pick])
        smask = _stratified_draw(strata, n, rng)
        ids = [str(i) for i in range(N)]
        rows["stratified"].append(ppi_stratified(dict(zip(ids, f_pop[pick])),
                                                 {ids[i]: y[i] for i in np.flatnonzero(smask)},
                                                 dict(zip(ids, strata.astype(str))), binary=True).ppi)
        drawn = rng.uniform(size=N) < pi
        a, h = active_arrays(y, f, pi, drawn, bounds=BINARY)
        rows["active"].append(a)
        rows["active_human"].append(h)
    out = {}
    for k, rs in rows.items():
        ok = [r for r in rs if np.isfinite(r.se)]
        out[k] = {"coverage": float(np.mean([_covers(r.ci, truth) for r in ok])),
                  "median_width": float(np.median([r.width for r in ok])),
                  "median_lambda": (float(np.nanmedian([r.lam for r in ok]))
                                    if k in ("ppi", "stratified", "learned", "active") else None),
                  "median_effective_n": (float(np.nanmedian([r.effective_n for r in ok]))
                                         if np.isfinite([r.effective_n for r in ok]).any() else None),
                  "mean_labels": float(np.mean([r.n for r in ok])), "draws_with_interval": len(ok)}
    out["learned"]["share_learned"] = float(np.mean(picked))
    # the draws that went learned alone, beside uniform PPI++ on the same draws: a design chosen rarely must still
    # cover when it is chosen
    went = [(lr, u) for p, lr, u in zip(picked, rows["learned"], rows["ppi"]) if p]
    out["learned"]["when_learned"] = {
        "draws": len(went), "coverage": float(np.mean([_covers(lr.ci, truth) for lr, _ in went])) if went else None,
        "median_width": float(np.median([lr.width for lr, _ in went])) if went else None,
        "uniform_median_width": float(np.median([u.width for _, u in went])) if went else None}
    out["learned"]["median_expected_ratio"] = float(np.median(ratios))
    return out


def _learned(y: np.ndarray, f: np.ndarray, order: np.ndarray, rng: np.random.Generator,
             uniform: PPIResult) -> tuple[bool, float, PPIResult]:
    """The learned design on the same draw: round 1 = the first half of the uniform sample ``order``; when its
    labels keep round 2 uniform, round 2 = the sample's other half, so the interval is ``uniform`` itself."""
    N, n1 = f.size, order.size // 2
    n2 = order.size - n1
    first = np.zeros(N, dtype=bool)
    first[order[:n1]] = True
    model = fit_error(y[first], f[first], f[~first])
    pick, ratio, pi_rest = choose(model, f[~first], n1, n2)
    if not pick:
        return False, ratio, uniform
    pi = np.ones(N)
    pi[~first] = pi_rest
    drawn = np.zeros(N, dtype=bool)
    drawn[~first] = rng.uniform(size=N - n1) < pi_rest
    return True, ratio, learned_arrays(y, f, first, drawn, pi, n2, model, bounds=BINARY)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=2000)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    y, js = judges()
    result = {"data": "BEGIN dev (ragnb/data/begin_groundedness), generic rows dropped", "N": int(y.size),
              "truth": float(y.mean()), "draws": args.draws, "alpha": 0.05, "judges": {}}
    print(f"N = {y.size}, truth (mean human label) = {y.mean():.4f}, {args.draws} draws per cell")
    print("judge               n  bias    cover: PPI (normal)  human (normal)  strat  learned  active | width: PPI  "
          "human  strat  learned  active | learned share")
    for j, (name, f) in enumerate(js.items()):
        bias = float(np.nanmean(f) - y.mean())
        cells = {}
        for n in BUDGETS:
            c = cells[n] = simulate(y, f, n, args.draws, seed=1000 * j + n)
            cov = {k: c[k]["coverage"] for k in c}
            wid = {k: c[k]["median_width"] for k in c}
            print(f"{name:18} {n:4}  {bias:+.3f}  {cov['ppi']:.3f} ({cov['ppi_normal']:.3f})  {cov['human']:.3f} "
                  f"({cov['human_normal']:.3f})  {cov['stratified']:.3f}  {cov['learned']:.3f}  {cov['active']:.3f} | "
                  f"{wid['ppi']:.4f} {wid['human']:.4f} {wid['stratified']:.4f} {wid['learned']:.4f} "
                  f"{wid['active']:.4f} | {c['learned']['share_learned']:.2f}")
        result["judges"][name] = {"judge_mean": float(np.nanmean(f)), "judge_only_bias": bias,
                                  "n_failed": int(np.isnan(f).sum()),
                                  "budgets": {str(n): c for n, c in cells.items()}}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["machine"] = {"python": sys.version.split()[0], "platform": platform.platform()}
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(f"written: {args.out} ({result['seconds']} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
