"""Tier UX thresholds that know the model (docs/metrics.md, Tier UX, Thresholds): the cache τ calibrated against
the pages the logged questions cite, the break threshold's fallback where the turns cite no pages (the model's
similarity of unrelated questions: unvalidated; with pages, :mod:`ragnb.metrics.ux_breaks`), and the
per-model-family defaults used — and reported as uncalibrated — where the data cannot calibrate them.

Cosine similarities are not comparable across models: multilingual-e5-small puts almost any two questions of
one wiki at 0.78–0.90, all-MiniLM-L6-v2 at 0.1–0.6. A fixed number therefore means a different thing per model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ragnb.metrics.vector_rows import unit_rows

TARGET_PRECISION = 0.9  # default share of cache hits that must cite the same page as their match
# A turn breaks context when it is less similar to the previous turn than this share of question pairs from
# different sessions: no more related than 9 in 10 pairs of questions from different conversations. (The median
# would leave half of the truly unrelated turns unflagged; a higher quantile is pulled up by the near-duplicate
# questions different users ask.)
BREAK_QUANTILE = 0.9
_TOL = 1e-12  # 9/10 must count as reaching 0.9


@dataclass(frozen=True)
class ModelDefaults:
    """Starting values for one model family, never calibrated on the data at hand."""

    family: str
    tau: float
    break_threshold: float
    basis: str  # where the numbers come from, shown in reports


_SEED_BASIS = "the original benchmark's values, chosen for all-MiniLM-L6-v2"
# (substring of the lower-cased model name, defaults); first match wins.
_FAMILIES: tuple[tuple[str, ModelDefaults], ...] = (
    ("minilm", ModelDefaults("all-MiniLM", 0.85, 0.3, _SEED_BASIS)),
    # On the bilingual team wiki log of tests/team_wiki.py (UX_LOG_ROWS), e5-small puts a question's nearest
    # cached question about another page up to 0.93, and 90% of question pairs of different sessions below 0.88.
    ("e5", ModelDefaults("e5", 0.95, 0.88, "measured for multilingual-e5-small on a bilingual wiki log: questions "
                         "about other pages reach cosine 0.93; 90% of questions of different sessions lie below "
                         "0.88")),
)


def model_defaults(model: str) -> ModelDefaults:
    """The defaults of ``model``'s family (matched by name); an unknown model gets the original values with a
    basis that says they were chosen for another model."""
    name = (model or "").casefold()
    for key, defaults in _FAMILIES:
        if key in name:
            return defaults
    return ModelDefaults("unknown", 0.85, 0.3,
                         f"no default is known for {model or 'this model'}: {_SEED_BASIS}, likely wrong here")


def check_target_precision(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or not 0.0 < float(value) <= 1.0:
        raise ValueError(f"target_precision = {value!r} must be a number in (0, 1], e.g. 0.9 (9 of 10 cache hits "
                         "cite the same page as the question they match)")
    return float(value)


@dataclass(frozen=True)
class TauCalibration:
    """Result of :func:`calibrate_tau`."""

    target_precision: float
    tau: float | None  # the smallest candidate τ whose precision reaches the target; None when none does
    # one row per candidate τ (ascending): tau, n_hits, hit_rate, n_judged, n_same_page, precision
    curve: pd.DataFrame
    n_queries: int  # queries with a best-match similarity (the hit rate's denominator)
    n_judged: int  # of them, queries whose match can be judged (both cite a page)
    reason: str  # why no τ was chosen ("" when one was)

    similarities: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]  # the inputs, for at()
    same_page: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    def at(self, tau: float) -> dict:
        """Hit rate and precision at any τ (hits: similarity > τ), with their counts."""
        return {"tau": float(tau), **_point(self.similarities, self.same_page, float(tau), self.n_queries)}


def _point(sims: np.ndarray, same: np.ndarray, tau: float, n_queries: int) -> dict:
    hits = sims > tau
    judged = hits & ~np.isnan(same)
    n_judged = int(judged.sum())
    n_same = int((same[judged] == 1.0).sum())
    return {"n_hits": int(hits.sum()), "hit_rate": float(hits.sum() / n_queries) if n_queries else math.nan,
            "n_judged": n_judged, "n_same_page": n_same,
            "precision": n_same / n_judged if n_judged else math.nan}


def calibrate_tau(max_similarity, same_page, target_precision: float = TARGET_PRECISION) -> TauCalibration:
    """The smallest τ whose cache-hit precision on this log reaches ``target_precision``.

    Per query: its best-match similarity s_q (NaN: nothing to compare, left out) and ``same_page`` (1 / 0 /
    NaN, :func:`ragnb.metrics.ux.same_page_flags`). Hits at τ are the queries with s_q > τ (strict, as in
    ``cache_hit_rate``), so hit rate and precision change only at the observed similarities: the candidates
    are the distinct s_q in (0, 1), ascending, and at candidate t

        hit_rate(t) = |{q : s_q > t}| / |Q|,  precision(t) = |{q : s_q > t, same_page(q) = 1}| / |{q : s_q > t,
        same_page(q) known}|

    (NaN without a judged hit). The chosen τ is the smallest candidate with precision(t) ≥ target — the
    largest hit rate at that precision; None, with the reason, when no candidate reaches it. The precision is
    measured on the same log it was chosen on, so it is optimistic for new questions.
    """
    target = check_target_precision(target_precision)
    sims = np.asarray(max_similarity, dtype=float).ravel()
    same = np.asarray(same_page, dtype=float).ravel()
    if sims.size != same.size:
        raise ValueError(f"max_similarity has {sims.size} entries but same_page {same.size}; one of each per query")
    ok = ~np.isnan(sims)
    sims, same = sims[ok], same[ok]
    n = int(sims.size)
    cands = np.unique(sims[(sims > 0.0) & (sims < 1.0)])
    order = np.argsort(sims, kind="stable")
    s_sorted = sims[order]
    judged_sorted = (~np.isnan(same[order])).astype(np.int64)
    same_sorted = (same[order] == 1.0).astype(np.int64)
    # queries strictly above t = those after the last index with s ≤ t
    start = np.searchsorted(s_sorted, cands, side="right")
    tail = lambda x: np.concatenate([np.cumsum(x[::-1])[::-1], [0]])  # noqa: E731  (suffix sums)
    n_hits = n - start
    n_judged = tail(judged_sorted)[start]
    n_same = tail(same_sorted)[start]
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n_judged > 0, n_same / np.maximum(n_judged, 1), np.nan)
    curve = pd.DataFrame({"tau": cands, "n_hits": n_hits.astype(int), "hit_rate": n_hits / n if n else np.nan,
                          "n_judged": n_judged.astype(int), "n_same_page": n_same.astype(int), "precision": precision})
    reaching = curve[curve["precision"] >= target - _TOL]
    tau, reason = None, ""
    n_judged_all = int((~np.isnan(same)).sum())
    if n_judged_all == 0:
        reason = "no question and its best cached match both cite a page: nothing to calibrate against"
    elif reaching.empty:
        valid = curve[curve["precision"].notna()]
        if valid.empty:
            reason = "no similarity lies strictly between 0 and 1, so no τ makes a judged hit"
        else:
            best = valid.sort_values(["precision", "n_judged"], ascending=False, kind="stable").iloc[0]
            reason = (f"no τ reaches precision {target:g}: the best is {best['precision']:.3f} at τ = "
                      f"{best['tau']:.4f} ({int(best['n_same_page'])} of {int(best['n_judged'])} judged hits)")
    else:
        tau = float(reaching.iloc[0]["tau"])
    return TauCalibration(target, tau, curve, n, n_judged_all, reason, sims, same)


def similarity_quantiles(values) -> dict:
    """min, 5th, 50th, 90th, 95th percentile and max of the finite ``values`` (numpy's linear interpolation),
    with n."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    keys = ("p05", "p50", "p90", "p95")
    if not v.size:
        return {"n": 0, "min": math.nan, **{k: math.nan for k in keys}, "max": math.nan}
    q = np.percentile(v, [5, 50, 90, 95])
    return {"n": int(v.size), "min": float(v.min()), **{k: float(x) for k, x in zip(keys, q)}, "max": float(v.max())}


def unrelated_pair_similarities(vectors, session_ids, max_turns: int = 2000, seed: int = 0) -> np.ndarray:
    """Cosines of every pair of turns from *different* sessions — how similar this model finds two questions
    that are not one conversation. Above ``max_turns`` turns, a fixed random sample of that many turns is
    paired (the pairs grow with its square). Empty when fewer than two sessions."""
    U = unit_rows(vectors, "vectors", one_vector_ok=False)
    sid = np.asarray([str(s) for s in session_ids])
    if sid.size != U.shape[0]:
        raise ValueError(f"session_ids has {sid.size} entries for {U.shape[0]} vectors; give one per turn")
    if U.shape[0] > max_turns:
        keep = np.sort(np.random.default_rng(seed).choice(U.shape[0], size=max_turns, replace=False))
        U, sid = U[keep], sid[keep]
    sims = np.clip(U @ U.T, -1.0, 1.0)  # max_turns² floats (2000: 32 MB)
    upper = np.triu(np.ones(sims.shape, dtype=bool), k=1)
    return sims[upper & (sid[:, None] != sid[None, :])]
