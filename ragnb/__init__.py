"""ragnb — Jupyter-first benchmarking of Retrieval-Augmented-Generation systems."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public name → (module, attribute), imported on first use (PEP 562) so that ``import ragnb`` stays light.
_PUBLIC: dict[str, tuple[str, str]] = {
    # LLM metrics
    "LLMMetric": ("ragnb.llm.judges.base", "LLMMetric"),
    "Sample": ("ragnb.llm.judges.sample", "Sample"),
    "JudgeConfig": ("ragnb.llm.judges.config", "JudgeConfig"),
    "EvaluationResult": ("ragnb.llm.result", "EvaluationResult"),
    "get_llm_metric": ("ragnb.llm.judges.base", "get_llm_metric"),
    "llm_metric_names": ("ragnb.llm.judges.base", "llm_metric_names"),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'ragnb' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
