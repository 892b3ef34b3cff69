"""Tier UX, cache part (docs/metrics.md, Tier UX): each question's best match in the score-5 cache, whether it is a
hit at τ, whether that match cites the same page (the log's cited URLs are the oracle), and which τ was used —
given, calibrated on the cited pages for a target precision, or the model family's uncalibrated default."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragnb.datasets.urls import page_id
from ragnb.metrics.stats import aggregate
from ragnb.metrics.ux import cache_hit_rate, check_tau
from ragnb.metrics.ux_thresholds import TauCalibration, calibrate_tau, model_defaults, similarity_quantiles

PER_QUERY_COLUMNS = ["question", "max_similarity", "best_cache_id", "best_cache_question", "n_compared",
                     "n_excluded", "excluded_by", "hit", "same_page", "match"]
# what a hit's match is, by the pages the two questions cite (the ``match`` column; "" for a non-hit)
SAME, OTHER, NO_PAGE = "same page", "other page", "no cited page"


@dataclass(frozen=True)
class CachePart:
    per_query: pd.DataFrame  # PER_QUERY_COLUMNS, index = query id
    summary: dict  # cache_hit_rate, cache_hit_precision, tau…, tau_calibration, cache (info)
    calibration: TauCalibration | None  # None when no question and its match both cite a page
    notes: list[str]


def _texts(frame: pd.DataFrame | None, vectors, name: str) -> pd.DataFrame:
    if frame is None:
        raise ValueError(f"{name} is None")
    if "question" not in frame.columns:
        raise ValueError(f"{name} needs a 'question' column (index = ids)")
    if len(frame) != len(vectors):
        raise ValueError(f"{name} has {len(frame)} rows but {len(vectors)} vectors; give one vector per row, in order")
    return frame


def _pages(frame: pd.DataFrame) -> list[str | None] | None:
    return [page_id(u) for u in frame["url"]] if "url" in frame.columns else None


def _match_kind(hit: float, same: float) -> str:
    if hit != 1.0:
        return ""
    return NO_PAGE if math.isnan(same) else (SAME if same == 1.0 else OTHER)


def _choose_tau(tau: float | None, calibration: TauCalibration | None, model: str) -> tuple[float, str, bool]:
    """(τ used, where it came from, calibrated?)."""
    if tau is not None:
        return check_tau(tau), "given as a parameter, not calibrated", False
    if calibration is not None and calibration.tau is not None:
        target = calibration.target_precision
        return calibration.tau, f"calibrated on the cited pages for precision ≥ {target:g}", True
    d = model_defaults(model)
    return d.tau, f"default for the {d.family} model family ({d.basis}), uncalibrated", False


def cache_part(queries: pd.DataFrame | None, query_vectors, cache: pd.DataFrame | None, cache_vectors,
               tau: float | None, target_precision: float, model: str, exclude_same_id: bool, n_boot: int,
               seed: int) -> CachePart:
    """Hits, their precision against the cited pages and the τ decision. ``tau`` None: calibrated where the
    cited pages allow it, else the default of ``model``'s family; a given τ is used as is (and reported as
    uncalibrated, with the calibrated τ beside it)."""
    queries = _texts(queries, query_vectors, "queries")
    cache = _texts(cache, cache_vectors, "cache")
    q_pages, c_pages = _pages(queries), _pages(cache)
    oracle = bool(q_pages and c_pages and any(q_pages) and any(c_pages))

    def hits_at(t: float):
        return cache_hit_rate(query_vectors, cache_vectors, t, query_ids=list(queries.index),
                              cache_ids=list(cache.index), exclude_same_id=exclude_same_id,
                              query_source_ids=queries["source_id"].tolist() if "source_id" in queries else None,
                              query_texts=queries["question"].tolist(), cache_texts=cache["question"].tolist(),
                              query_pages=q_pages if oracle else None, cache_pages=c_pages if oracle else None)

    first = hits_at(tau if tau is not None else model_defaults(model).tau)
    same = first.per_query["same_page"].to_numpy() if oracle else np.full(len(queries), np.nan)
    calibration = (calibrate_tau(first.per_query["max_similarity"], same, target_precision) if oracle else None)
    tau_used, source, calibrated = _choose_tau(tau, calibration, model)
    hits = first if tau_used == first.tau else hits_at(tau_used)

    per_query = hits.per_query.copy()
    per_query.insert(0, "question", queries["question"].to_numpy())
    per_query["best_cache_question"] = per_query["best_cache_id"].map(cache["question"].groupby(level=0).first())
    per_query["same_page"] = same
    per_query["match"] = [_match_kind(h, s) for h, s in zip(per_query["hit"], same)]
    per_query = per_query[PER_QUERY_COLUMNS]
    summary = {"cache_hit_rate": aggregate(per_query["hit"].to_numpy(), n_boot=n_boot, seed=seed),
               "cache_hit_precision": _precision(per_query, n_boot, seed),
               "tau": tau_used, "tau_calibrated": calibrated, "tau_source": source,
               "target_precision": target_precision,
               "tau_calibration": _calibration_block(calibration),
               "cache": _info(per_query, queries, cache, q_pages, c_pages, hits.excluded, exclude_same_id)}
    notes = [f"cache_hit_rate: {hits.note}."] if hits.note else []
    notes += _notes(summary, calibration, model, oracle)
    return CachePart(per_query, summary, calibration, notes)


def _precision(per_query: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """Aggregate of same_page over the hits: mean = cache_hit_precision; n = hits, n_valid = judged hits, and
    ``n_no_page`` (= n_failed) the hits whose question or match cites no page — left out, counted."""
    hit = per_query["hit"].to_numpy() == 1.0
    agg = aggregate(per_query["same_page"].to_numpy()[hit], n_boot=n_boot, seed=seed)
    return {**agg, "n_no_page": agg["n_failed"]}


def _calibration_block(cal: TauCalibration | None) -> dict | None:
    if cal is None:
        return None
    at = cal.at(cal.tau) if cal.tau is not None else {}
    return {"target_precision": cal.target_precision, "tau": cal.tau, "reached": cal.tau is not None,
            "reason": cal.reason or None, "precision": at.get("precision"), "hit_rate": at.get("hit_rate"),
            "n_hits": at.get("n_hits"), "n_judged": at.get("n_judged"), "n_same_page": at.get("n_same_page"),
            "n_queries": cal.n_queries, "n_judged_queries": cal.n_judged, "n_candidates": int(len(cal.curve)),
            "in_sample": True}


def _info(per_query, queries, cache, q_pages, c_pages, excluded: dict, exclude_same_id: bool) -> dict:
    excluded = dict(excluded)
    kinds = per_query["match"].value_counts()
    spread = similarity_quantiles(per_query["max_similarity"])
    return {"n_queries": len(per_query), "n_cache": len(cache), "n_hits": int(np.nansum(per_query["hit"])),
            "n_hits_same_page": int(kinds.get(SAME, 0)), "n_hits_other_page": int(kinds.get(OTHER, 0)),
            "n_hits_no_page": int(kinds.get(NO_PAGE, 0)),
            "n_queries_with_page": sum(p is not None for p in q_pages) if q_pages else 0,
            "n_cache_with_page": sum(p is not None for p in c_pages) if c_pages else 0,
            "exclude_same_id": exclude_same_id,
            # queries that had at least one cache entry left out as themselves (kept for older readers)
            "n_self_in_cache": int(excluded.pop("queries")), "self_matches_excluded": excluded,
            # the model's nearest-neighbour similarities, beside τ (p50/p95 also flat, for older readers)
            "max_similarity": spread, "max_similarity_p50": spread["p50"], "max_similarity_p95": spread["p95"]}


def _notes(summary: dict, cal: TauCalibration | None, model: str, oracle: bool) -> list[str]:
    tau, info, prec = summary["tau"], summary["cache"], summary["cache_hit_precision"]
    q = info["max_similarity"]
    spread = (f"with {model or 'this model'} the best-match similarities lie between {q['p05']:.3f} and "
              f"{q['p95']:.3f} (5th–95th percentile, median {q['p50']:.3f})")
    out = []
    if not oracle:
        out.append(f"τ = {tau:g} is not calibrated: no question and cached question both cite a page, so whether a "
                   f"hit serves the right answer cannot be checked. The number depends on the model: {spread}; "
                   "a τ set for one model does not carry over to another.")
        return out
    out.append(f"Of {info['n_hits']} hits at τ = {tau:g}, {info['n_hits_same_page']} match a question citing the same "
               f"page, {info['n_hits_other_page']} another page (they would serve another page's answer) and "
               f"{info['n_hits_no_page']} cannot be judged (no cited page): precision {prec['mean']:.3f} over "
               f"{prec['n_valid']} judged hits. The same page is necessary, not sufficient, for the cached answer "
               "to fit, so this precision is an upper bound.")
    if cal.tau is not None:
        out.append(f"Calibrated τ = {cal.tau:.4f}: the smallest τ whose precision on this log reaches "
                   f"{cal.target_precision:g} ({summary['tau_calibration']['n_same_page']} of "
                   f"{summary['tau_calibration']['n_judged']} judged hits); measured on the log it was chosen on, "
                   "so optimistic for new questions.")
    else:
        out.append(f"No calibrated τ: {cal.reason}.")
    if not summary["tau_calibrated"]:
        out.append(f"τ = {tau:g} used here is {summary['tau_source']}; {spread}.")
    return out
