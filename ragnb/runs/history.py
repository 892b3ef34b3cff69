"""The run history and the per-item files behind it: blocks of a run record, runs in time order, the
outputs folder to read, and the per-item tables of two runs matched item by item.

A run's per-item file is ``<outputs>/runs/<run_id>/<stem>.per_item.csv`` (runs written before it was the only one
also have a ``.parquet`` twin, read first), written by
:func:`ragnb.tiers.payload.write_metrics`; its ``item_id`` (else ``id``) column identifies the items.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ragnb import config, spec
from ragnb.io import read_per_item
from ragnb.runs.record import RUNS_DIR, RUNS_FILE, run_folder

ID_COLUMNS = ("item_id", "id")  # per-item key column, in order of preference
EXTRA_KEYS = ("mode",)  # tier_judge has one row per (mode, item)


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def blocks_of(record: dict) -> dict[str, tuple[str | None, dict]]:
    """``tier_key → (notebook stem or None, block)`` for every metric block of a run record; blocks of
    notebooks without a schema tier (``other_metrics``) use the stem as key."""
    out: dict[str, tuple[str | None, dict]] = {}
    for tier in spec.TIERS:
        block = record.get(tier.record_key) if tier.record_key else None
        if isinstance(block, dict):
            out[tier.record_key] = (tier.stem, block)
    for stem, block in sorted((record.get("other_metrics") or {}).items()):
        tier = spec.by_stem(stem)
        if isinstance(block, dict) and not (tier and tier.post_record):  # the dashboard's own JSON is no benchmark
            out[stem] = (stem, block)
    return out


def sort_runs(runs: list[dict]) -> list[dict]:
    """Runs by start time (``timestamp``), file order breaking ties and standing in for a missing time."""
    stamps = pd.to_datetime([r.get("timestamp") for r in runs], utc=True, errors="coerce", format="ISO8601")
    last = pd.Timestamp.min.tz_localize("UTC")
    keyed = []
    for i, (run, ts) in enumerate(zip(runs, stamps)):
        last = ts if not pd.isna(ts) else last
        keyed.append((last, i, run))
    return [run for *_, run in sorted(keyed, key=lambda t: (t[0], t[1]))]


def latest_run(runs: list[dict]) -> dict | None:
    """The newest run with benchmark metrics (else the newest run; None without runs)."""
    ordered = sort_runs(runs)
    usable = [r for r in ordered if blocks_of(r)]
    return (usable or ordered or [None])[-1]


def find_run(runs: list[dict], run_id: str) -> dict:
    """The run with id ``run_id``; ValueError listing the known ids otherwise."""
    for run in runs:
        if str(run.get("id")) == run_id:
            return run
    ids = [str(r.get("id")) for r in runs]
    raise ValueError(f"unknown run id {run_id!r}; runs in benchmark_runs.json: {', '.join(ids) or '(none)'}")


def resolve_outputs(outputs: str, output_dir: str | Path | None = None) -> Path:
    """The outputs folder to read: ``outputs`` if given; else the one holding ``output_dir`` when that is a
    runner-made run folder (``<outputs>/runs/<run_id>``, so the dashboard of a run sees that run's
    history); else ``ragnb.config.outputs_dir()``."""
    if outputs:
        return Path(outputs).resolve()
    if output_dir:
        run_dir = Path(output_dir).resolve()
        if run_dir.parent.name == RUNS_DIR and (run_dir.parent.parent / RUNS_FILE).is_file():
            return run_dir.parent.parent
    return config.outputs_dir()


# --------------------------------------------------------------------------------------------
# Per-item files
# --------------------------------------------------------------------------------------------


def per_item_path(outputs: str | Path, run_id: str, stem: str, record: dict | None = None) -> Path | None:
    """``<outputs>/runs/<run_id>/<stem>.per_item.csv`` (an older run's ``.parquet`` first; exact floats both); for a
    multi-model sweep (``record["model_runs"]``), whose top-level blocks are the first combination's, that
    combination's folder. None if no file exists."""
    run_dir = run_folder(outputs, str(run_id))  # an id from benchmark_runs.json names no path outside runs/
    folders = [run_dir]
    model_runs = (record or {}).get("model_runs") or []
    if model_runs and isinstance(model_runs[0], dict) and model_runs[0].get("folder"):
        sub = Path(str(model_runs[0]["folder"]))  # models/<combination>, inside the run folder
        if not sub.is_absolute() and ".." not in sub.parts:
            folders.append(run_dir / sub)
    for folder in folders:
        for suffix in (".per_item.parquet", ".per_item.csv"):
            path = folder / f"{stem}{suffix}"
            if path.is_file():
                return path
    return None


def paired_stems(outputs: str | Path, a: dict, b: dict) -> list[str]:
    """Notebooks whose metrics are in both records and whose per-item files exist for both runs."""
    stems_a = {stem for stem, _ in blocks_of(a).values() if stem}
    stems_b = {stem for stem, _ in blocks_of(b).values() if stem}
    return sorted(s for s in stems_a & stems_b
                  if per_item_path(outputs, a["id"], s, a) and per_item_path(outputs, b["id"], s, b))


def _key_columns(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[str] | None, str]:
    id_col = next((c for c in ID_COLUMNS if c in a.columns and c in b.columns), None)
    if id_col is None:
        return None, f"no item id column ({' or '.join(ID_COLUMNS)}) in both per-item files"
    key = [id_col]
    for extra in EXTRA_KEYS:
        if not (a.duplicated(key).any() or b.duplicated(key).any()):
            break
        if extra in a.columns and extra in b.columns:
            key.append(extra)
    if a.duplicated(key).any() or b.duplicated(key).any():
        return None, f"item ids ({', '.join(key)}) repeat within a per-item file, so items cannot be paired"
    return key, ""


@dataclass
class Alignment:
    """Items of two per-item tables matched on their id (inner join)."""

    key: list[str]
    merged: pd.DataFrame  # key columns + "<col>_a", "<col>_b" for the compared columns
    n_a: int
    n_b: int
    only_a: list[str]
    only_b: list[str]

    @property
    def n_paired(self) -> int:
        return len(self.merged)


def align(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]) -> Alignment:
    """Pair the rows of ``a`` and ``b`` on the item id (``item_id``, else ``id``; plus ``mode`` when ids
    repeat per mode). Items in only one table are listed, not dropped silently. Raises ValueError when the
    tables have no usable key."""
    key, why = _key_columns(a, b)
    if key is None:
        raise ValueError(why)
    ka = a[key].astype(str)
    kb = b[key].astype(str)
    left = pd.concat([ka, a[columns].add_suffix("_a")], axis=1)
    right = pd.concat([kb, b[columns].add_suffix("_b")], axis=1)
    merged = left.merge(right, on=key, how="inner", validate="one_to_one")
    ids_a = set(map(tuple, ka.to_numpy()))
    ids_b = set(map(tuple, kb.to_numpy()))
    fmt = (lambda t: t[0]) if len(key) == 1 else (lambda t: "/".join(t))
    return Alignment(key, merged, len(a), len(b), sorted(fmt(t) for t in ids_a - ids_b),
                     sorted(fmt(t) for t in ids_b - ids_a))


def floats(series: pd.Series) -> np.ndarray:
    """A numeric or boolean column as float64 with NaN for missing values (nullable dtypes included)."""
    return pd.to_numeric(series, errors="coerce").astype("Float64").to_numpy(dtype=float, na_value=np.nan)


def is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


_RANGE_SLACK = 1e-9  # float noise at a range's end (a mean of 1.0 stored as 0.9999999999999999 and back)
_PER_ITEM_FIX = ("the file was damaged or edited after the run: restore it (or re-run that notebook), or move it "
                 "aside to compare that notebook unpaired on the recorded aggregates")


def check_per_item(path: Path, frame: pd.DataFrame, columns: dict[str, str]) -> None:
    """ValueError naming the file, row, column and fix for a metric column of a per-item table (``columns``:
    column → the metric's canonical name) that holds something other than a number, or a number outside the
    metric's registered range (a hit rate of −3): compared as data, it would decide a gate."""
    from ragnb.metrics.registry import resolve

    for column, metric in columns.items():
        if column not in frame.columns or pd.api.types.is_bool_dtype(frame[column]):
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        text = frame[column].notna() & values.isna()
        if text.any():
            at = int(np.flatnonzero(text.to_numpy())[0])
            raise ValueError(f"{path}: row {_row(path, at)}, column {column!r}: {frame[column].iloc[at]!r} is not a "
                             f"number ({int(text.sum())} such row(s)); {_PER_ITEM_FIX}")
        found = resolve(metric)
        if found is None:
            continue
        low, high = found.value_range
        out = (values < low - _RANGE_SLACK) | (values > high + _RANGE_SLACK)
        if out.any():
            at = int(np.flatnonzero(out.to_numpy())[0])
            raise ValueError(f"{path}: row {_row(path, at)}, column {column!r}: {float(values.iloc[at]):g} is outside "
                             f"{found.name}'s range [{low:g}, {high:g}] ({int(out.sum())} such row(s)); {_PER_ITEM_FIX}")


def _row(path: Path, position: int) -> str:
    """A data row as a person finds it: in a CSV, its line (the header is line 1); else its 1-based position."""
    return f"{position + 1} (line {position + 2})" if path.suffix == ".csv" else str(position + 1)
