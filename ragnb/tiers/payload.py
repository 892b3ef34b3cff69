"""The one writer of a notebook's metrics JSON and per-item files (what :meth:`ragnb.tiers.result.TierResult.write`
calls): strict JSON, atomic files, the JSON last so that its presence marks a finished notebook, and no secrets."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ragnb.config import check_no_secrets
from ragnb.io import atomic_write, atomic_write_text, dumps_strict

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def write_metrics(output_dir: str | Path, name: str, metrics: dict, per_item: pd.DataFrame | None = None) -> Path:
    """Write ``<output_dir>/<name>.metrics.json`` (strict JSON: NaN/inf → null) atomically, and with
    ``per_item`` also ``<name>.per_item.csv``. The JSON is written last, so its presence means the notebook
    finished (the runner's resume relies on it). Returns the JSON path.

    The CSV is the one per-item file: reports link it, a spreadsheet opens it, and its floats are written in
    shortest round-trip form, so :func:`ragnb.io.read_per_item` (``ragnb compare``, the dashboard, label plans)
    reads back the exact values. A Parquet twin doubled a run folder's per-item bytes for no reader that needed
    it; ``pd.read_csv(path).to_parquet(...)`` makes one on demand.

    Raises ValueError if a string in ``metrics`` looks like a secret (API key, URL with a password…).
    """
    if not isinstance(name, str) or not _NAME_OK.match(name):
        raise ValueError(f"metrics name {name!r} must be a plain file stem such as 'tier1_retrieval'")
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics must be a dict of name → value, got {type(metrics).__name__}")
    if per_item is not None and not isinstance(per_item, pd.DataFrame):
        raise ValueError(f"per_item must be a pandas DataFrame or None, got {type(per_item).__name__}")
    check_no_secrets(metrics)
    text = dumps_strict(metrics) + "\n"  # fails early, before any file is touched
    if per_item is not None:
        per_item = with_item_ids(per_item)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if per_item is not None:
        atomic_write(out / f"{name}.per_item.csv", lambda p: per_item.to_csv(p, index=False))
    return atomic_write_text(out / f"{name}.metrics.json", text)


def with_item_ids(df: pd.DataFrame) -> pd.DataFrame:
    """Keep a labelled index (question ids, item ids) as an ``item_id`` column, so that per-item files of two
    runs can be paired item by item; a plain 0..n-1 index carries no identity and is dropped."""
    if isinstance(df.index, pd.RangeIndex) or "item_id" in df.columns:
        return df
    return df.reset_index(names="item_id")
