"""Metric registry: canonical names such as ``ndcg@10`` parse back to (metric, params).

A metric is a small pure function registered under a base name; cut-off metrics take ``k``.
Dispatch goes through this table, never through an if/elif chain of strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_NAME = re.compile(r"^(?P<base>[a-z][a-z0-9_]*)(?:@(?P<k>[0-9]+))?$")


@dataclass(frozen=True)
class Metric:
    name: str  # base name, e.g. "ndcg"
    family: str  # "retrieval", "embedding", ...
    fn: Callable
    needs_k: bool
    higher_is_better: bool
    doc: str
    kind: str = ""  # "ranking", "vectors", "text", "classification", "session" or "llm"
    value_range: tuple[float, float] | None = None


REGISTRY: dict[str, Metric] = {}


def register(name: str, family: str, *, kind: str = "", value_range: tuple[float, float] | None = None,
             needs_k: bool = False, higher_is_better: bool = True):
    """Decorator: register ``fn`` under ``name`` (base name, without ``@k``); ``kind`` says what it scores
    (e.g. "llm" for LLM-judged per-sample scores), ``value_range`` its (low, high)."""

    def wrap(fn: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"metric {name!r} is registered twice")
        REGISTRY[name] = Metric(name, family, fn, needs_k, higher_is_better, (fn.__doc__ or "").strip(), kind,
                                value_range)
        return fn

    return wrap


def parse_name(name: str) -> tuple[Metric, int | None]:
    """``"ndcg@10"`` → (the ndcg Metric, 10). Raises ValueError naming the fix for unknown names."""
    m = _NAME.match(name.strip())
    if not m or m.group("base") not in REGISTRY:
        known = ", ".join(sorted(f"{n}@k" if r.needs_k else n for n, r in REGISTRY.items()))
        raise ValueError(f"unknown metric {name!r}; known metrics: {known}")
    metric = REGISTRY[m.group("base")]
    k = int(m.group("k")) if m.group("k") else None
    if metric.needs_k and (k is None or k < 1):
        raise ValueError(f"metric {name!r} needs a cut-off ≥ 1, e.g. '{metric.name}@10'")
    if not metric.needs_k and k is not None:
        raise ValueError(f"metric {metric.name!r} takes no cut-off; write '{metric.name}'")
    return metric, k


def canonical_name(base: str, k: int | None = None) -> str:
    return f"{base}@{k}" if k is not None else base


def names(family: str | None = None) -> list[str]:
    return sorted(n for n, m in REGISTRY.items() if family is None or m.family == family)
