"""Filled label sheets back into the estimate (docs/ppi.md): judge-only, human-only and PPI++ side by side, from a
per-item table of judge scores and one or more sheets of ``ragnb dataset label-plan``.

Several sheets are rounds of labelling: each later plan left out the items labelled before it (its design says
how many, ``labelled=K``, and that count is checked against the earlier sheets). The estimate then is

* every round uniform: the labelled items together are a simple random sample of the table (a uniform sample of
  the items not yet labelled, added to one, is one), so PPI++ on all the labels (:mod:`ragnb.metrics.ppi`);
* a round active: the last round's design conditional on the rounds before it — the items labelled earlier are
  known exactly (π = 1), the others were drawn with the last sheet's π — weighted by 1/π as in
  :func:`ragnb.metrics.ppi_active.active_arrays`; unbiased whatever chose the earlier items, because the last
  round's probabilities were computed after them. Every drawn row of that round must be labelled;
* the last round learned (``--active`` after uniform rounds): the two-round estimate of
  :mod:`ragnb.metrics.ppi_learned`, its design recomputed from the earlier rounds' labels and checked against the
  sheet's π.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragnb.datasets.label_plan import (ANSWER_COLUMNS, MIX, Sheet, answer_hash, check_sheet, design_probabilities,
                                      read_sheet, registered_range)
from ragnb.metrics.ppi import BINARY, check_labels, fill_failed, judge_only_arrays
from ragnb.metrics.ppi_active import active_arrays
from ragnb.metrics.ppi_items import Estimates, estimates, unknown_ids


def read_rounds(paths: Sequence[str | Path], binary: bool | None, N: int) -> tuple[list[Sheet], dict[str, float]]:
    """The sheets in the order they were planned (by ``labelled=K``) and all their labels by id; ValueError when
    a sheet was planned for another table, before other labels than the sheets given, or labels an item twice."""
    if not paths:
        raise ValueError("no label sheet given; write one with `ragnb dataset label-plan` and fill human_label")
    sheets = sorted((read_sheet(p, binary) for p in paths), key=lambda s: s.design["labelled"])
    labels: dict[str, float] = {}
    for sheet in sheets:
        if sheet.design["N"] != N:
            raise ValueError(f"{sheet.path}: the plan was made for {sheet.design['N']} items, the scores table has "
                             f"{N}; use the table the plan was made from")
        if sheet.design["labelled"] != len(labels):
            raise ValueError(f"{sheet.path}: this plan left out {sheet.design['labelled']} item(s) labelled before "
                             f"it, but the sheets before it label {len(labels)}; give every earlier sheet, filled as "
                             "it was when this plan was made")
        twice = [i for i in sheet.labels if i in labels]
        if twice:
            raise ValueError(f"{sheet.path}: item {twice[0]!r} is labelled in an earlier sheet too; one label per "
                             "item (a later plan must be made with --labelled giving the earlier sheets)")
        labels.update(sheet.labels)
    return sheets, labels


def estimate_from_sheets(frame: pd.DataFrame, score: str, sheet_paths: Sequence[str | Path], *,
                         binary: bool | None = False, alpha: float = 0.05, others: tuple[str, ...] = (),
                         strata: str | None = None) -> tuple[Estimates, dict[str, Any]]:
    """Judge-only, human-only and PPI++ estimates (:class:`ragnb.metrics.ppi_items.Estimates`) from the per-item
    table (``id`` and ``score`` columns) and the filled sheets, by their design (module docstring); plus a report
    of counts. ``binary``: True yes/no labels, False numbers, None either. Refuses a sheet of another metric, a
    label outside the score's registered range (:func:`ragnb.datasets.label_plan.check_sheet`) and labels of other
    answers than the table's (:func:`same_answers`)."""
    judge = dict(zip(frame["id"], frame[score].to_numpy(dtype=float)))
    sheets, labels = read_rounds(sheet_paths, binary, len(judge))
    for sheet in sheets:
        unknown_ids(judge, sheet.pi, sheet.path)
        check_sheet(sheet, score, binary)
    same_answers(sheets, frame)
    report = {"design": " + ".join(s.design["text"] for s in sheets), "sheets": len(sheets),
              "rows": sum(len(s.pi) for s in sheets), "labelled": len(labels),
              "left_empty": sum(len(s.empty) for s in sheets)}
    # the labels' range for the finite-sample interval: 0/1 (yes/no labels, or numbers that are all 0 or 1), else
    # the metric's registered range (every label was checked to lie in it), else unknown
    zero_one = bool(labels) and all(v in (0.0, 1.0) for v in labels.values())
    bounds = BINARY if binary or zero_one else registered_range(score)
    if sheets[-1].design["kind"] == "learned":
        return _learned(frame, score, sheets, labels, alpha, bool(binary), bounds), report
    if all(s.design["kind"] == "uniform" for s in sheets):
        if strata:
            from ragnb.metrics.ppi_strata import ppi_stratified

            return ppi_stratified(judge, labels, dict(zip(frame["id"], frame[strata].astype(str))), alpha,
                                  binary=bool(binary), bounds=bounds), report
        return estimates(judge, labels, alpha, binary=bool(binary), bounds=bounds), report
    return _weighted(frame, score, sheets, labels, alpha, others, bool(binary), bounds), report


def _weighted(frame: pd.DataFrame, score: str, sheets: list[Sheet], labels: dict[str, float], alpha: float,
              others: tuple[str, ...], binary: bool, bounds: tuple[float, float] | None) -> Estimates:
    """The last round's design, the earlier labels at π = 1 (module docstring)."""
    last = sheets[-1]
    if last.empty:
        raise ValueError(f"{len(last.empty)} drawn row(s) have no label, e.g. {last.empty[0]}; an active design "
                         "weights each label by 1/π, so every drawn row must be labelled (fill them in)")
    d = last.design
    earlier = frame["id"].isin(set(labels) - set(last.labels)).to_numpy()
    pi = design_probabilities(frame, score, d["budget"], active=d["kind"] == "active", others=others,
                              mix=d["mix"] if d["mix"] is not None else MIX, labelled=earlier)
    pos = {i: k for k, i in enumerate(frame["id"])}
    changed = [i for i, p in last.pi.items() if not math.isclose(p, pi[pos[i]], rel_tol=1e-9, abs_tol=1e-12)]
    if changed:
        raise ValueError(f"{last.path}: the inclusion probability of {changed[0]!r} differs from the one the scores "
                         "give now: the scores (or --other-score) changed since the plan; use the same table")
    scores = frame[score].to_numpy(dtype=float)
    drawn = frame["id"].isin(set(labels)).to_numpy()
    check_labels(list(labels.values()), binary, last.path)
    y = np.array([labels.get(i, 0.0) for i in frame["id"]])
    n_failed = int(np.isnan(scores).sum())
    ppi, human = active_arrays(y, fill_failed(scores)[1][0], np.where(earlier, 1.0, pi), drawn, alpha,
                               n_failed=n_failed, bounds=bounds)
    return Estimates(judge_only_arrays(scores, alpha, n_labelled=int(drawn.sum())), human, ppi)


def _learned(frame: pd.DataFrame, score: str, sheets: list[Sheet], labels: dict[str, float], alpha: float,
             binary: bool, bounds: tuple[float, float] | None) -> Estimates:
    """The learned last round after uniform ones (module docstring): its π recomputed from their labels."""
    from dataclasses import replace

    from ragnb.datasets.label_plan import learned_design
    from ragnb.metrics.ppi_learned import learned_arrays

    last, d = sheets[-1], sheets[-1].design
    if any(s.design["kind"] != "uniform" for s in sheets[:-1]):
        raise ValueError(f"{last.path}: a learned round follows uniform rounds only, but an earlier sheet is "
                         f"{next(s.design['kind'] for s in sheets[:-1] if s.design['kind'] != 'uniform')}")
    if last.empty:
        raise ValueError(f"{len(last.empty)} drawn row(s) have no label, e.g. {last.empty[0]}; the learned design "
                         "weights each label by 1/π, so every drawn row must be labelled (fill them in)")
    earlier = {i: v for i, v in labels.items() if i not in last.labels}
    model, _, _, pi, f, first = learned_design(frame, score, d["budget"], earlier, d["mix"])
    pos = {i: k for k, i in enumerate(frame["id"])}
    changed = [i for i, p in last.pi.items() if not math.isclose(p, pi[pos[i]], rel_tol=1e-9, abs_tol=1e-12)]
    if changed:
        raise ValueError(f"{last.path}: the inclusion probability of {changed[0]!r} differs from the one the scores "
                         "and the earlier labels give now: the scores or the earlier sheets changed since the plan; "
                         "use the same table and sheets")
    check_labels(list(labels.values()), binary, last.path)
    scores = frame[score].to_numpy(dtype=float)
    y = np.array([labels.get(i, 0.0) for i in frame["id"]])
    drawn = frame["id"].isin(set(last.labels)).to_numpy()
    kw = {"bounds": bounds, "n_failed": int(np.isnan(scores).sum())}
    ppi = learned_arrays(y, f, first, drawn, pi, d["budget"], model, alpha, **kw)
    # the human-only counterpart: the same design and weights with λ = 0 (c the first round's mean label)
    human = learned_arrays(y, f, first, drawn, pi, d["budget"],
                           replace(model, lam=0.0, c=float(y[first].mean())), alpha, **kw)
    human = replace(human, method="learned_classical", lam=math.nan)
    return Estimates(judge_only_arrays(scores, alpha, n_labelled=int(first.sum() + drawn.sum())), human, ppi)


def same_answers(sheets: list[Sheet], table: pd.DataFrame) -> None:
    """ValueError when a labelled item's answer in this run is not the one its reviewer labelled (a label of
    another answer says nothing about this one), or when only one of sheet and table shows the answer (then
    nothing could tell): every tier that takes labels keeps its answers in the per-item table."""
    column = next((c for c in ANSWER_COLUMNS if c in table.columns), None)
    for sheet in sheets:
        mine = list(sheet.labels)
        if column is None and sheet.answers:
            raise ValueError(f"{sheet.path} shows the answers its reviewer labelled, but this per-item "
                             f"table has no {' or '.join(ANSWER_COLUMNS)} column to check them against; give the "
                             "per-item table of the run the sheet was made from")
        if column is None:
            continue
        if not sheet.answers:
            raise ValueError(f"{sheet.path} does not show the answers its {len(mine)} label(s) are "
                             f"of, so nothing tells whether this run's {column}s are the same; make a new plan on "
                             "this run's per-item table (`ragnb dataset label-plan`) and label that sheet")
        now = dict(zip(table["id"].astype(str), table[column]))
        changed = [i for i in mine if sheet.answers.get(i) != answer_hash(now.get(i))]
        if changed:
            raise ValueError(f"{sheet.path}: the {column} of {len(changed)} of {len(mine)} labelled "
                             f"item(s) differs from the one the reviewer labelled, e.g. {changed[0]!r}; labels are of "
                             "one run's answers — make a new plan on this run's per-item table and label those")
