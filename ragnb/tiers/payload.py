"""The one writer of a notebook's metrics JSON and per-item files (what :meth:`ragnb.tiers.result.TierResult.write`
calls): strict JSON, atomic files, the JSON last so that its presence marks a finished notebook, and no secrets."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from ragnb.config import check_no_secrets
from ragnb.io import atomic_write, atomic_write_text, dumps_strict

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def write_metrics(output_dir: str | Path, name: str, metrics: dict, per_item: pd.DataFrame | None = None) -> Path:
    """Write ``<output_dir>/<name>.metrics.json`` (strict JSON: NaN/inf → null) atomically, and with
    ``per_item`` also ``<name>.per_item.csv`` and ``.parquet``. The JSON is written last, so its
    presence means the notebook finished (the runner's resume relies on it). Returns the JSON path.

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
        atomic_write(out / f"{name}.per_item.parquet", lambda p: _to_parquet(per_item, p))
    return atomic_write_text(out / f"{name}.metrics.json", text)


def with_item_ids(df: pd.DataFrame) -> pd.DataFrame:
    """Keep a labelled index (question ids, item ids) as an ``item_id`` column, so that per-item files of two
    runs can be paired item by item; a plain 0..n-1 index carries no identity and is dropped."""
    if isinstance(df.index, pd.RangeIndex) or "item_id" in df.columns:
        return df
    return df.reset_index(names="item_id")


def _to_parquet(df: pd.DataFrame, path: str | Path) -> None:
    try:
        df.to_parquet(path, index=False)
    except (TypeError, ValueError, ImportError) as exc:
        if isinstance(exc, ImportError):
            raise
        # Mixed-type object columns (e.g. str and list) cannot be typed by Arrow; keep them as text.
        mixed = [c for c in df.columns if df[c].dtype == object]
        warnings.warn(f"per-item columns {mixed} stored as text in parquet ({exc})", stacklevel=3)
        df.assign(**{str(c): df[c].map(lambda v: v if v is None else str(v)) for c in mixed}).to_parquet(
            path, index=False)
