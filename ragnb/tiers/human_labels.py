"""Human labels for some items of a judged metric, in a tier's report (docs/ppi.md, In the reports).

Every notebook with a judged metric takes one parameter, ``human_labels``: comma-separated paths of filled label
sheets (``ragnb dataset label-plan`` run on that notebook's per-item table; each sheet names its score column in
``metric``; several sheets of one metric are rounds, see :mod:`ragnb.datasets.label_estimate`). For each labelled
metric :func:`add_human_labels` puts into the notebook's result

* ``<metric>_ppi`` in the summary, so in the metrics JSON, right after ``<metric>``: the PPI++ estimate
  (``estimate, ci_low, ci_high, n, N, lambda, n_eff, n_failed, method``, ``note``), the judge-only and human-only
  estimates beside it, which to quote and why (:attr:`ragnb.metrics.ppi_items.Estimates.quote`), the design;
* ``<metric>_human_label`` in the per-item table (empty where an item has no label);
* a note saying which estimate to quote.

``<metric>`` itself stays the judge's own aggregate; the run record's grading and ``ragnb compare`` read the PPI
estimate in its place (:func:`ragnb.runs.record.ppi_view`). Without labels nothing changes. A label is of the
answer its reviewer read: a sheet whose answers differ from the table's ``answer``/``response`` column is refused
(:func:`ragnb.datasets.label_estimate.same_answers`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragnb.datasets.label_plan import ANSWER_COLUMNS
from ragnb.io import comma_list
from ragnb.metrics.ppi import PPIResult
from ragnb.metrics.ppi_items import LABEL_SUFFIX, PPI_SUFFIX, Estimates


@dataclass
class LabelledMetric:
    """One judged metric with human labels: its three estimates and the sheets' counts."""

    metric: str
    estimates: Estimates
    report: dict[str, Any]

    def block(self) -> dict[str, Any]:
        """The ``<metric>_ppi`` block of the metrics JSON (NaN → None)."""
        e = self.estimates
        method, why = e.quote
        return {**_flat(e.ppi), "alpha": e.ppi.alpha, "quote": method, "quote_reason": why,
                "judge_only": _flat(e.judge_only), "human_only": _flat(e.human_only), **self.report}

    def frame(self) -> pd.DataFrame:
        """Judge-only, human-only and PPI side by side (:meth:`ragnb.metrics.ppi_items.Estimates.frame`)."""
        return self.estimates.frame().assign(metric=self.metric)

    def sentence(self) -> str:
        method, why = self.estimates.quote
        return f"{self.metric}: quote {method} — {why}"


def _flat(r: PPIResult) -> dict[str, Any]:
    def num(x: float) -> float | None:
        return None if x is None or math.isnan(x) else float(x)

    return {"estimate": num(r.estimate), "ci_low": num(r.ci[0]), "ci_high": num(r.ci[1]), "n": r.n, "N": r.N,
            "lambda": num(r.lam), "n_eff": num(r.effective_n), "n_failed": r.n_failed, "method": r.method,
            "note": r.note}


def _sheets_by_metric(paths: list[str], table: pd.DataFrame) -> dict[str, list[str]]:
    from ragnb.datasets.label_plan import read_sheet

    groups: dict[str, list[str]] = {}
    for path in paths:
        if not Path(path).is_file():
            raise ValueError(f"human_labels: {path}: no such file; give filled sheets of `ragnb dataset label-plan`")
        metric = read_sheet(path, None).metric
        if not metric:
            raise ValueError(f"human_labels: {path} has no 'metric' column naming the judged score it labels; make "
                             "the sheet with `ragnb dataset label-plan --score <column>`")
        if metric not in table.columns:
            raise ValueError(f"human_labels: {path} labels {metric!r}, which this notebook's per-item table has not "
                             f"(it has {', '.join(c for c in table.columns if pd.api.types.is_float_dtype(table[c]))})"
                             "; give the sheets of this notebook's judged metrics")
        groups.setdefault(metric, []).append(path)
    return groups


def estimate_labelled(table: pd.DataFrame, human_labels: str, alpha: float = 0.05
                      ) -> list[tuple[LabelledMetric, dict[str, float]]]:
    """Each labelled metric of a per-item ``table`` (an ``id`` column and the metrics' columns) with its labels by
    id, from ``human_labels`` (comma-separated sheet paths; "" → [])."""
    from ragnb.datasets.label_estimate import estimate_from_sheets, read_rounds

    paths = comma_list(human_labels, "human_labels") if isinstance(human_labels, str) else None
    if paths is None:
        raise ValueError(f"human_labels must be a comma-separated text of sheet paths, got {human_labels!r}")
    if not paths:
        return []
    if "id" not in table.columns or table["id"].astype(str).duplicated().any():
        raise ValueError("human_labels: the per-item table needs one row per item with an 'id' column")
    out = []
    for metric, group in _sheets_by_metric(paths, table).items():
        frame = pd.DataFrame({"id": table["id"].astype(str).to_numpy(),
                              metric: pd.to_numeric(table[metric], errors="coerce").to_numpy(dtype=float)})
        shown = next((c for c in ANSWER_COLUMNS if c in table.columns), None)
        if shown is not None:  # the answers the labels must be of (checked by estimate_from_sheets)
            frame[shown] = table[shown].to_numpy()
        est, report = estimate_from_sheets(frame, metric, group, binary=None, alpha=alpha)
        labels = read_rounds(group, None, len(frame))[1]
        out.append((LabelledMetric(metric, est, {**report, "label_sheets": group}), labels))
    return out


def add_human_labels(result: Any, human_labels: str, alpha: float = 0.05) -> list[LabelledMetric]:
    """Put the estimates of every labelled metric into ``result`` (a :class:`ragnb.tiers.result.TierResult`; see
    the module docstring) and return them; ``human_labels`` "" → [] and ``result`` unchanged."""
    table = result.item_table()
    found = estimate_labelled(table, human_labels, alpha) if table is not None else []
    for labelled, labels in found:
        m = labelled.metric
        entries = list(result.summary.items())
        at = next((k + 1 for k, (key, _) in enumerate(entries) if key == m), len(entries))  # right after <metric>
        entries.insert(at, (m + PPI_SUFFIX, labelled.block()))
        result.summary.clear()
        result.summary.update(entries)
        result.per_item[m + LABEL_SUFFIX] = [labels.get(i) for i in table["id"].astype(str)]
        result.add_notes([labelled.sentence()], first=False)
    return [labelled for labelled, _ in found]
