"""Metric trends over runs: one long table of every run's recorded metrics, for the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from ragnb.runs import comparability
from ragnb.runs.compare import current_entries, matches
from ragnb.runs.history import blocks_of, sort_runs
from ragnb.runs.record import RUNS_FILE, block_status, load_runs, metric_value
from ragnb.runs.significance import aggregate_ci
from ragnb.spec import label_of


def runs_frame(runs: list[dict], metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per (run, tier block, metric): ``run_id, timestamp, order, tier_key, tier_label, notebook,
    metric, mean, ci_lo, ci_hi, n, n_failed, status, overall_status, series`` (``series``: the block's dataset
    and corpus, :func:`ragnb.runs.comparability.series_label` — one trend line each); runs in time order (``order`` 0, 1, …).
    ``status`` follows the thresholds of :mod:`ragnb.spec` (None where a metric has none); ``metric`` is the
    current key (:func:`current_entries`). ``metrics``: optional shell-style name patterns."""
    rows = []
    for order, run in enumerate(sort_runs(runs)):
        for key, (stem, block) in blocks_of(run).items():
            for name, (recorded, value) in current_entries(key, block).items():
                if not matches(name, metrics):
                    continue
                lo, hi = aggregate_ci(value)
                rows.append({
                    "run_id": str(run.get("id")), "timestamp": run.get("timestamp"), "order": order,
                    "tier_key": key, "tier_label": label_of(key), "notebook": stem, "metric": name,
                    "mean": metric_value(value), "ci_lo": lo, "ci_hi": hi,
                    "n": value.get("n") if isinstance(value, dict) else None,
                    "n_failed": value.get("n_failed") if isinstance(value, dict) else None,
                    "status": block_status(recorded, value, key, block),
                    "overall_status": run.get("overall_status"),
                    "series": comparability.series_label(block),
                })
    cols = ["run_id", "timestamp", "order", "tier_key", "tier_label", "notebook", "metric", "mean", "ci_lo",
            "ci_hi", "n", "n_failed", "status", "overall_status", "series"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce", format="ISO8601")
    for col in ("n", "n_failed"):
        frame[col] = frame[col].astype("Int64")
    return frame


def load_runs_frame(outputs: str | Path, metrics: Iterable[str] | None = None) -> tuple[list[dict], pd.DataFrame]:
    """``(runs in time order, runs_frame)`` from ``<outputs>/benchmark_runs.json`` (both empty if absent)."""
    runs = sort_runs(load_runs(Path(outputs) / RUNS_FILE))
    return runs, runs_frame(runs, metrics)
