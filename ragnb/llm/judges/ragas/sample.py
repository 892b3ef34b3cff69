"""The input of every ragas-style metric: one single-turn RAG interaction (:class:`Sample`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("user_input", "response", "reference", "retrieved_contexts")

# The original field names (camelCase), the project's dataset schema and common ragas-v1 column names.
_ALIASES = {
    "userInput": "user_input", "question": "user_input",
    "answer": "response",
    "ground_truth": "reference", "ground_truth_answer": "reference",
    "retrievedContexts": "retrieved_contexts", "contexts": "retrieved_contexts",
}


def _is_missing_scalar(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Sample:
    """One single-turn RAG interaction (the ragas-style Sample).

    ============================ ========================================================================
    field                        needed by
    ============================ ========================================================================
    ``user_input``               context_precision, context_recall, response_relevancy
                                 (faithfulness and noise_sensitivity use it when present)
    ``response``                 faithfulness, noise_sensitivity, response_relevancy,
                                 context_precision (response_based)
    ``reference``                context_entity_recall, context_recall, noise_sensitivity,
                                 context_precision (reference_based)
    ``retrieved_contexts``       every metric except response_relevancy — in rank order
    ============================ ========================================================================

    A blank string or an empty context list counts as missing; each metric's ``validate`` names the
    missing fields. :meth:`from_dict` also accepts camelCase names (``userInput``, …) and ``question`` /
    ``answer`` / ``ground_truth`` / ``contexts``.
    """

    user_input: str | None = None
    response: str | None = None
    reference: str | None = None
    retrieved_contexts: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("user_input", "response", "reference"):
            value = getattr(self, name)
            if _is_missing_scalar(value):
                object.__setattr__(self, name, None)
            elif not isinstance(value, str):
                raise ValueError(f"{name} must be a string or None, got {type(value).__name__}: {value!r:.80}")
        ctx = self.retrieved_contexts
        if _is_missing_scalar(ctx):
            object.__setattr__(self, "retrieved_contexts", None)
            return
        if isinstance(ctx, (str, bytes, Mapping)) or not isinstance(ctx, Iterable):
            raise ValueError(
                f"retrieved_contexts must be a list of strings (the retrieved chunks in rank order), "
                f"got {type(ctx).__name__}; wrap a single context as [text]"
            )
        items = tuple(ctx)
        for i, c in enumerate(items):
            if not isinstance(c, str):
                raise ValueError(f"retrieved_contexts[{i}] must be a string, got {type(c).__name__}: {c!r:.80}")
        object.__setattr__(self, "retrieved_contexts", items)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Sample:
        """A Sample from a dict / DataFrame row; other keys (``id``, …) are ignored."""
        if not isinstance(row, Mapping):
            raise ValueError(f"a sample must be a Sample or a mapping with keys {FIELDS}, got {type(row).__name__}")
        values: dict[str, Any] = {}
        for key, value in row.items():
            name = key if key in FIELDS else _ALIASES.get(key)
            if name is not None and (name not in values or key in FIELDS):
                values[name] = value
        return cls(**values)

    def missing(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` that are None, blank, or (contexts) empty / all blank."""
        out = []
        for name in names:
            value = getattr(self, name)
            if name == "retrieved_contexts":
                if not value or not any(c.strip() for c in value):
                    out.append(name)
            elif value is None or not value.strip():
                out.append(name)
        return out

    def require(self, names: Iterable[str], metric: str) -> None:
        """Raise ValueError naming every missing field that ``metric`` needs."""
        gone = self.missing(names)
        if gone:
            raise ValueError(
                f"{metric} needs {', '.join(gone)}, which the sample does not have (missing or blank); "
                f"set {' and '.join(f'Sample({g}=...)' for g in gone)} or choose a metric that does not need it"
            )


def as_sample(sample: Sample | Mapping[str, Any]) -> Sample:
    return sample if isinstance(sample, Sample) else Sample.from_dict(sample)
