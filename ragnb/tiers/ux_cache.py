"""Tier UX, cache part (docs/metrics.md, Tier UX): each question's best match among the score-5 questions asked
before it, whether it is a hit at τ, whether that match would serve the right answer (the strictest oracle the log
has: the same answer where both answers are known, else the same cited page) and which τ was used — given,
calibrated on the oracle for a target precision (and validated on held-out users), or the model family's default."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragnb.urls import page_id
from ragnb.metrics.stats import aggregate
from ragnb.metrics.ux import cache_hit_rate, check_tau
from ragnb.metrics.ux_oracle import ANSWER, PAGE, answer_keys, oracle_flags, oracle_name
from ragnb.metrics.ux_tau_split import N_SPLITS, split_units, validate_tau
from ragnb.metrics.ux_thresholds import TauCalibration, calibrate_tau, model_defaults, similarity_quantiles

PER_QUERY_COLUMNS = ["question", "max_similarity", "best_cache_id", "best_cache_question", "n_compared",
                     "n_excluded", "excluded_by", "hit", "same_page", "same_answer", "correct", "oracle", "match"]
# what a hit's match is, by the pages the two questions cite (the ``match`` column; "" for a non-hit)
SAME, OTHER, NO_PAGE = "same page", "other page", "no cited page"


@dataclass(frozen=True)
class CachePart:
    per_query: pd.DataFrame  # PER_QUERY_COLUMNS, index = query id
    summary: dict  # cache_hit_rate, cache_hit_precision, tau…, tau_calibration, tau_validation, tau_verdict, cache
    calibration: TauCalibration | None  # None when no question and its match can be judged
    notes: list[str]
    tau_splits: pd.DataFrame = None  # type: ignore[assignment]  # one row per user half-split (empty: none)


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


def _dated(frame: pd.DataFrame) -> bool:
    return "created_at" in frame.columns and bool(frame["created_at"].replace("", None).notna().any())


def _time_order(queries: pd.DataFrame, cache: pd.DataFrame) -> tuple[list | None, list | None, dict]:
    """The timestamps to simulate the cache with (both sides dated), or None, None and why not."""
    if _dated(queries) and _dated(cache):
        return queries["created_at"].tolist(), cache["created_at"].tolist(), {}
    side = "questions" if not _dated(queries) else "cached questions"
    return None, None, {"applied": False, "reason": f"the {side} carry no time (created_at), so every cached "
                        "question is compared, also those asked later: the hit rate is optimistic"}


def _answers(queries: pd.DataFrame, cache: pd.DataFrame, q_pages, c_pages) -> tuple[list | None, list | None, dict]:
    """Known answer keys of the questions and of the cache (placeholders and canned replies judged over both
    together), or None, None when either side has none."""
    if "answer" not in queries.columns or "answer" not in cache.columns:
        return None, None, {}
    pages = (q_pages or [None] * len(queries)) + (c_pages or [None] * len(cache))
    keys, left_out = answer_keys(queries["answer"].tolist() + cache["answer"].tolist(), pages)
    q_keys, c_keys = keys[:len(queries)], keys[len(queries):]
    info = {"n_queries_with_answer": sum(k is not None for k in q_keys),
            "n_cache_with_answer": sum(k is not None for k in c_keys), "answers_not_known": left_out}
    if not (info["n_queries_with_answer"] and info["n_cache_with_answer"]):
        return None, None, info
    return q_keys, c_keys, info


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
        return calibration.tau, f"calibrated on the oracle (same answer / same page) for precision ≥ {target:g}", True
    d = model_defaults(model)
    return d.tau, f"default for the {d.family} model family ({d.basis}), uncalibrated", False


def cache_part(queries: pd.DataFrame | None, query_vectors, cache: pd.DataFrame | None, cache_vectors,
               tau: float | None, target_precision: float, model: str, exclude_same_id: bool, n_boot: int,
               seed: int, tau_splits: int = N_SPLITS) -> CachePart:
    """Hits, their precision against the oracle and the τ decision. ``tau`` None: calibrated where the oracle
    allows it, else the default of ``model``'s family; a given τ is used as is (and reported as uncalibrated,
    with the calibrated τ beside it). ``tau_splits``: user half-splits validating the calibrated τ (0: none)."""
    queries = _texts(queries, query_vectors, "queries")
    cache = _texts(cache, cache_vectors, "cache")
    q_pages, c_pages = _pages(queries), _pages(cache)
    page_oracle = bool(q_pages and c_pages and any(q_pages) and any(c_pages))
    q_times, c_times, order = _time_order(queries, cache)
    q_answers, c_answers, answer_info = _answers(queries, cache, q_pages, c_pages)
    oracle = page_oracle or q_answers is not None

    def hits_at(t: float):
        return cache_hit_rate(query_vectors, cache_vectors, t, query_ids=list(queries.index),
                              cache_ids=list(cache.index), exclude_same_id=exclude_same_id,
                              query_source_ids=queries["source_id"].tolist() if "source_id" in queries else None,
                              query_texts=queries["question"].tolist(), cache_texts=cache["question"].tolist(),
                              query_pages=q_pages if page_oracle else None,
                              cache_pages=c_pages if page_oracle else None, query_times=q_times,
                              cache_times=c_times, query_answers=q_answers, cache_answers=c_answers)

    first = hits_at(tau if tau is not None else model_defaults(model).tau)
    nan = np.full(len(queries), np.nan)
    same = first.per_query["same_page"].to_numpy() if page_oracle else nan
    correct, judged_by = oracle_flags(first.per_query["same_answer"].to_numpy() if q_answers else nan, same)
    calibration = calibrate_tau(first.per_query["max_similarity"], correct, target_precision) if oracle else None
    tau_used, source, calibrated = _choose_tau(tau, calibration, model)
    hits = first if tau_used == first.tau else hits_at(tau_used)
    per_query = _per_query(hits.per_query, queries, cache, same, correct, judged_by)
    validation, splits = _validate(calibration, per_query, queries, target_precision, tau_splits, seed)
    summary = {"cache_hit_rate": aggregate(per_query["hit"].to_numpy(), n_boot=n_boot, seed=seed),
               "cache_hit_precision": _precision(per_query, n_boot, seed),
               "tau": tau_used, "tau_calibrated": calibrated, "tau_source": source,
               "target_precision": target_precision,
               "tau_calibration": _calibration_block(calibration), "tau_validation": validation,
               "cache": {**_info(per_query, queries, cache, q_pages, c_pages, hits.excluded, exclude_same_id),
                         **answer_info, "time_order": hits.time_order or order}}
    summary["tau_verdict"] = _verdict(summary)
    notes = [f"cache_hit_rate: {hits.note}."] if hits.note else []
    notes += _notes(summary, calibration, model, oracle)
    return CachePart(per_query, summary, calibration, notes, splits)


def _per_query(hits: pd.DataFrame, queries, cache, same, correct, judged_by) -> pd.DataFrame:
    per_query = hits.copy()
    per_query.insert(0, "question", queries["question"].to_numpy())
    per_query["best_cache_question"] = per_query["best_cache_id"].map(cache["question"].groupby(level=0).first())
    per_query["same_page"] = same
    if "same_answer" not in per_query:
        per_query["same_answer"] = np.nan
    per_query["correct"], per_query["oracle"] = correct, judged_by
    per_query["match"] = [_match_kind(h, s) for h, s in zip(per_query["hit"], same)]
    return per_query[PER_QUERY_COLUMNS]


def _validate(calibration, per_query, queries, target, n_splits, seed) -> tuple[dict | None, pd.DataFrame]:
    """The calibration repeated on random halves of the users and measured on the other halves."""
    if calibration is None or not n_splits:
        return None, pd.DataFrame()
    units, unit = split_units(queries["user_id"].tolist() if "user_id" in queries else None,
                              queries["session_id"].tolist() if "session_id" in queries else None, len(queries))
    out, table = validate_tau(per_query["max_similarity"], per_query["correct"], units, target, n_splits, seed)
    return {**out, "unit": unit}, table


def _verdict(summary: dict) -> dict:
    """Does the τ used reach the target precision? A calibrated τ is judged on held-out users (its in-sample
    precision meets the target by construction); a τ not chosen on this log, on its measured precision."""
    target, val, prec = summary["target_precision"], summary["tau_validation"], summary["cache_hit_precision"]
    out = {"target_precision": target, "in_sample": {"mean": prec["mean"], "ci95": prec["ci95"], "n": prec["n_valid"]}}
    if summary["tau_calibrated"]:
        if not val or not val.get("possible") or not val["precision"]["n_valid"]:
            why = val["reason"] if val and not val.get("possible") else "no held-out hit could be judged"
            return {**out, "reaches_target": None, "basis": f"not validated out of sample: {why}",
                    "precision": math.nan, "ci95": [math.nan, math.nan]}
        p = val["precision"]
        return {**out, "reaches_target": val["reaches_target"], "precision": p["mean"], "ci95": p["ci95"],
                "basis": f"out of sample: calibrated on half of the {val['unit']}s, measured on the other half, "
                         f"{val['n_splits']} seeded splits (interval: {p['interval']})"}
    if not prec["n_valid"]:
        return {**out, "reaches_target": None, "basis": "no hit can be judged", "precision": math.nan,
                "ci95": [math.nan, math.nan]}
    return {**out, "reaches_target": bool(prec["mean"] >= target - 1e-12), "precision": prec["mean"],
            "ci95": prec["ci95"], "basis": "measured at a τ not chosen on this log (bootstrap CI over the hits)"}


def _precision(per_query: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """Aggregate of the oracle's verdict (``correct``) over the hits: mean = cache_hit_precision; n = hits,
    n_valid = judged hits, ``n_no_page`` (= n_failed) the hits no oracle can judge (no known answer and no cited
    page on either side) — left out, counted; ``oracle`` says what judged them (``n_by_answer``, ``n_by_page``)."""
    hit = per_query["hit"].to_numpy() == 1.0
    agg = aggregate(per_query["correct"].to_numpy()[hit], n_boot=n_boot, seed=seed)
    by = per_query.loc[hit, "oracle"].value_counts()
    n_answer, n_page = int(by.get(ANSWER, 0)), int(by.get(PAGE, 0))
    return {**agg, "n_no_page": agg["n_failed"], "oracle": oracle_name(n_answer, n_page), "n_by_answer": n_answer,
            "n_by_page": n_page}


def _calibration_block(cal: TauCalibration | None) -> dict | None:
    if cal is None:
        return None
    at = cal.at(cal.tau) if cal.tau is not None else {}
    return {"target_precision": cal.target_precision, "tau": cal.tau, "reached": cal.tau is not None,
            "reason": cal.reason or None, "precision": at.get("precision"), "hit_rate": at.get("hit_rate"),
            # n_same_page: hits the oracle judged right (the same answer where known, else the same page)
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
    tau, info = summary["tau"], summary["cache"]
    q = info["max_similarity"]
    spread = (f"with {model or 'this model'} the best-match similarities lie between {q['p05']:.3f} and "
              f"{q['p95']:.3f} (5th–95th percentile, median {q['p50']:.3f})")
    order = info["time_order"]
    out = [f"The simulated cache holds only questions asked before each question: {order['rule']} "
           f"({order['n_no_earlier']} dated question(s) had no earlier cached question, "
           f"{order['n_undated_queries']} question(s) and {order['n_undated_cache']} cached question(s) are undated)."
           if order.get("applied") else f"Not time-ordered: {order['reason']}."]
    if not oracle:
        out.append(f"τ = {tau:g} is not calibrated: no question and cached question both cite a page or have a known "
                   f"answer, so whether a hit serves the right answer cannot be checked. The number depends on the "
                   f"model: {spread}; a τ set for one model does not carry over to another.")
        return out
    out += _oracle_notes(summary)
    if cal.tau is not None:
        out.append(f"Calibrated τ = {cal.tau:.4f}: the smallest τ whose precision on this log reaches "
                   f"{cal.target_precision:g} ({summary['tau_calibration']['n_same_page']} of "
                   f"{summary['tau_calibration']['n_judged']} judged hits); measured on the log it was chosen on, "
                   "so optimistic for new questions.")
    else:
        out.append(f"No calibrated τ: {cal.reason}.")
    out.append(_verdict_note(summary))
    if not summary["tau_calibrated"]:
        out.append(f"τ = {tau:g} used here is {summary['tau_source']}; {spread}.")
    return out


def _oracle_notes(summary: dict) -> list[str]:
    tau, info, prec = summary["tau"], summary["cache"], summary["cache_hit_precision"]
    pages = (f"Of {info['n_hits']} hits at τ = {tau:g}, {info['n_hits_same_page']} match a question citing the same "
             f"page, {info['n_hits_other_page']} another page (they would serve another page's answer) and "
             f"{info['n_hits_no_page']} cite no page. ")
    if prec["n_by_answer"]:
        return [pages + f"cache_hit_precision {prec['mean']:.3f} over {prec['n_valid']} judged hits, oracle: "
                f"{prec['oracle']}: the same answer (normalised text) is the strictest check the log allows; the same "
                "page is necessary, not sufficient, for a cached answer to fit, so page-judged hits are an upper bound."]
    left, why = info.get("answers_not_known"), ""
    if left:
        why = (f" (no hit and its match both have a known answer; not known: {left['empty']} empty, "
               f"{left['placeholder']} placeholder, {left['canned']} one reply logged for several pages)")
    return [pages + f"cache_hit_precision {prec['mean']:.3f} over {prec['n_valid']} judged hits, oracle: same "
            f"page{why}. The same page is necessary, not sufficient, for the cached answer to fit, so this precision "
            "is an upper bound."]


def _verdict_note(summary: dict) -> str:
    v, target = summary["tau_verdict"], summary["target_precision"]
    ins = v["in_sample"]
    head = {True: f"τ = {summary['tau']:.4g} reaches the target precision {target:g}",
            False: f"τ = {summary['tau']:.4g} does NOT reach the target precision {target:g}",
            None: f"Whether τ = {summary['tau']:.4g} reaches the target precision {target:g} is unknown"}[v["reaches_target"]]
    if math.isnan(v["precision"]):
        return f"{head}: {v['basis']} (in-sample precision {ins['mean']:.3f})."
    lo, hi = v["ci95"]
    return (f"{head}: {v['precision']:.3f} [{lo:.3f}, {hi:.3f}], {v['basis']}; in-sample {ins['mean']:.3f} "
            f"[{ins['ci95'][0]:.3f}, {ins['ci95'][1]:.3f}] over {ins['n']} judged hits.")
