"""The latency block the tiers report: ``{mean, p50, p95, n, mode}`` in milliseconds.

One private version for the tiers; ``ragnb.metrics.stats`` is to hold the project-wide one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np


def latency_summary(values_ms: Iterable[Any], mode: str) -> dict:
    """Mean, median and 95th percentile of the timed calls (None/NaN — untimed or failed — left out), their
    number, and how they were timed (``mode``: "per-query", "amortised", …). No timed call → NaN, n = 0."""
    a = np.asarray([v for v in (math.nan if x is None else float(x) for x in values_ms) if not math.isnan(v)],
                   dtype=float)
    if not a.size:
        return {"mean": math.nan, "p50": math.nan, "p95": math.nan, "n": 0, "mode": mode}
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "n": int(a.size), "mode": mode}
