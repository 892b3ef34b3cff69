"""ragnb — Jupyter-first benchmarking of Retrieval-Augmented-Generation systems.

The public Python API: the names a user needs outside a notebook (README, "From Python"). Each is imported on first
use (PEP 562), so ``import ragnb`` stays light: no pandas, torch, SQLAlchemy or openai until a name needs them.

Retrieval evaluation
    :func:`evaluate_retrieval` (a run and its qrels → per-query values and aggregates with 95% CIs),
    :func:`evaluate_trec_files` (the same from TREC run/qrels files), :func:`aggregate` (mean, CI, n, n_valid,
    n_failed of any per-item values).
The metric registry
    :func:`get_metric` (one metric's name, family, kind, direction, range, formula), :func:`metric_names`,
    :class:`Metric`.
Models
    :func:`get_encoder` (an embedding model by name), :class:`LLMClient` and :class:`LLMSettings` (an
    OpenAI-compatible endpoint, from the environment).
LLM-judged metrics (one API: ``evaluate`` / ``evaluate_dataset``, sync and async)
    :func:`get_llm_metric`, :func:`llm_metric_names`, :class:`LLMMetric`, :class:`Sample`, :class:`JudgeConfig`,
    :class:`EvaluationResult`.
Datasets, results and runs
    :func:`load_dataset`, :class:`TierResult`, :func:`run_notebooks` (what ``ragnb run`` does).
Few human labels
    :func:`ppi_mean` (prediction-powered estimate of a judged mean with a valid CI), :func:`classical_mean`
    (human labels only), :func:`judge_mean` (judge only), :class:`PPIResult`.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (type checkers read this spelling as the same flag)
TYPE_CHECKING = False

from ragnb import moved as _moved
from ragnb.version import __version__

_moved.install()  # old import paths of moved modules keep working for one release, with a warning

# Public name → (module, attribute). The one list behind __all__, __getattr__ and __dir__.
_PUBLIC: dict[str, tuple[str, str]] = {
    # retrieval evaluation
    "evaluate_retrieval": ("ragnb.metrics.retrieval", "evaluate"),
    "evaluate_trec_files": ("ragnb.datasets.trec", "evaluate_files"),
    "aggregate": ("ragnb.metrics.stats", "aggregate"),
    # the metric registry
    "Metric": ("ragnb.metrics.registry", "Metric"),
    "get_metric": ("ragnb.metrics.registry", "get"),
    "metric_names": ("ragnb.metrics.registry", "names"),
    # models
    "get_encoder": ("ragnb.embeddings.models", "get_encoder"),
    "LLMClient": ("ragnb.llm.client", "LLMClient"),
    "LLMSettings": ("ragnb.llm.settings", "LLMSettings"),
    # datasets, results and runs
    "load_dataset": ("ragnb.datasets.schema", "load_dataset"),
    "TierResult": ("ragnb.tiers.result", "TierResult"),
    "run_notebooks": ("ragnb.runs.runner", "run_notebooks"),
    # PPI: prediction-powered estimates of a judged mean (docs/ppi.md)
    "ppi_mean": ("ragnb.metrics.ppi", "ppi_mean"),
    "classical_mean": ("ragnb.metrics.ppi", "classical_mean"),
    "judge_mean": ("ragnb.metrics.ppi", "judge_mean"),
    "PPIResult": ("ragnb.metrics.ppi", "PPIResult"),
    # LLM metrics: one API for every LLM-judged metric (docs/llm-judges.md)
    "LLMMetric": ("ragnb.judges.base", "LLMMetric"),
    "Sample": ("ragnb.judges.sample", "Sample"),
    "JudgeConfig": ("ragnb.judges.judge_config", "JudgeConfig"),
    "EvaluationResult": ("ragnb.llm.result", "EvaluationResult"),
    "get_llm_metric": ("ragnb.judges.base", "get_llm_metric"),
    "llm_metric_names": ("ragnb.judges.base", "llm_metric_names"),
}

__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily
    from ragnb.datasets.schema import load_dataset
    from ragnb.datasets.trec import evaluate_files as evaluate_trec_files
    from ragnb.llm.client import LLMClient
    from ragnb.judges.base import LLMMetric, get_llm_metric, llm_metric_names
    from ragnb.judges.judge_config import JudgeConfig
    from ragnb.judges.sample import Sample
    from ragnb.llm.result import EvaluationResult
    from ragnb.llm.settings import LLMSettings
    from ragnb.metrics.registry import Metric
    from ragnb.metrics.registry import get as get_metric
    from ragnb.metrics.registry import names as metric_names
    from ragnb.metrics.retrieval import evaluate as evaluate_retrieval
    from ragnb.metrics.ppi import PPIResult, classical_mean, judge_mean, ppi_mean
    from ragnb.metrics.stats import aggregate
    from ragnb.embeddings.models import get_encoder
    from ragnb.runs.runner import run_notebooks
    from ragnb.tiers.result import TierResult


def __getattr__(name: str) -> object:
    """Import a public name on first use (PEP 562) and keep it in the module's namespace."""
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'ragnb' has no attribute {name!r}; public names: {', '.join(__all__)}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
