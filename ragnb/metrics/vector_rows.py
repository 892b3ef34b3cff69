"""Embedding rows as the metrics read them: validated N × D float64 matrices, and their unit-length rows."""

from __future__ import annotations

import numpy as np


def as_vector_rows(x, field: str) -> np.ndarray:
    """Embeddings as a finite float64 N × D matrix (one D-vector = one row); ValueError names ``field``."""
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{field} must be numeric vectors, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] < 1:
        raise ValueError(f"{field} must be N × D (or one D-vector), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{field} has NaN/inf in rows {np.flatnonzero(~np.isfinite(a).all(axis=1))[:20].tolist()}")
    return a


def unit_rows(x, field: str, allow_empty: bool = False, one_vector_ok: bool = True) -> np.ndarray:
    """Rows of an N × D embedding matrix scaled to unit length (float64), for cosine similarity.

    ValueError naming ``field`` for: non-numeric data, a shape that is not N × D (a single D-vector counts as
    one row when ``one_vector_ok``), no rows (unless ``allow_empty``), NaN/inf, and zero vectors (their angle
    is undefined).
    """
    a = np.asarray(x)
    if not one_vector_ok and a.ndim != 2 and a.size:
        raise ValueError(f"{field} must be 2-D (N × D), got shape {a.shape}; reshape a single vector with v[None, :]")
    if a.size == 0:
        if allow_empty:
            return np.zeros((0, a.shape[-1] if a.ndim == 2 else 0))
        raise ValueError(f"{field} must be a non-empty N × D matrix; it has no rows (shape {a.shape})")
    return divide_by_norms(as_vector_rows(a, field), field, "drop or re-embed those rows")


def divide_by_norms(a: np.ndarray, field: str, fix: str) -> np.ndarray:
    """u_i = a_i / ‖a_i‖₂ for the rows of a finite N × D matrix; ValueError naming ``field`` and the ``fix``
    when a row is a zero vector (its direction, and so any cosine with it, is undefined)."""
    norms = np.linalg.norm(a, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(f"{field} has zero vectors in rows {zero[:20].tolist()}: cosine is undefined; {fix}")
    return a / norms[:, None]
