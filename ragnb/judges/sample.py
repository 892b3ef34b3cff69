"""The input of every LLM-judged metric: one single-turn RAG interaction (:class:`Sample`).

The direct judge scores, the ragas-style and the NVIDIA-style metrics all read these four fields; a metric's
``validate`` names the fields it needs and lacks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("user_input", "response", "reference", "retrieved_contexts")

# The original field names (camelCase), the project's dataset schema and common ragas-v1 column names.
# A direct judge's own argument names (question, answer, reference) are the same fields.
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
    """One single-turn RAG interaction, the sample of every LLM-judged metric.

    ============================ ========================================================================
    field                        needed by (ragas-style; direct judge; NVIDIA-style)
    ============================ ========================================================================
    ``user_input``               context_precision, context_recall, response_relevancy
                                 (faithfulness and noise_sensitivity use it when present);
                                 every direct judge score; nv_context_relevance
                                 (nv_answer_accuracy uses it when present)
    ``response``                 faithfulness, noise_sensitivity, response_relevancy,
                                 context_precision (response_based); every direct judge score;
                                 nv_response_groundedness, nv_answer_accuracy
    ``reference``                context_entity_recall, context_recall, noise_sensitivity,
                                 context_precision (reference_based); answer_correctness, e2e_score;
                                 nv_answer_accuracy
    ``retrieved_contexts``       every ragas-style metric except response_relevancy — in rank order;
                                 judge_faithfulness; nv_context_relevance, nv_response_groundedness
    ============================ ========================================================================

    What a missing or blank field means is the metric's rule: the ragas-style metrics refuse it
    (ValueError), the direct judge and NVIDIA-style metrics refuse a missing one and score a blank one
    ``undefined`` (or by their heuristic shortcut). :meth:`from_dict` also accepts camelCase names
    (``userInput``, …) and ``question`` / ``answer`` / ``ground_truth`` / ``contexts``; :func:`as_sample`
    also reads an object's attributes of those names.
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
                f"got {type(ctx).__name__}; wrap it: [text] for a single context"
            )
        items = tuple(ctx)  # a list, a tuple, or a numpy array from a DataFrame cell
        bad = [i for i, c in enumerate(items) if not isinstance(c, str)]
        if bad:
            c = items[bad[0]]
            raise ValueError(f"retrieved_contexts[{bad[0]}] must be a string, got {type(c).__name__}: {c!r:.80}; "
                             f"non-strings at positions {bad[:20]}")
        object.__setattr__(self, "retrieved_contexts", tuple(str(c) for c in items))

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


def as_sample(sample: Sample | Mapping[str, Any] | Any) -> Sample:
    """``sample`` as a :class:`Sample`: itself, from a mapping (:meth:`Sample.from_dict`), or from an object's
    attributes named like the fields or their aliases (a dataclass, a named tuple)."""
    if isinstance(sample, Sample):
        return sample
    if isinstance(sample, Mapping):
        return Sample.from_dict(sample)
    names = (*FIELDS, *_ALIASES)
    values = {n: getattr(sample, n) for n in names if hasattr(sample, n)}
    if not values:
        raise ValueError(f"a sample must be a Sample, a mapping or an object with the fields {FIELDS}, "
                         f"got {type(sample).__name__}")
    return Sample.from_dict(values)
