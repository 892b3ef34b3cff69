"""The one API of every LLM-judged metric (the direct judge scores, the ragas-style and the NVIDIA-style
metrics): :class:`LLMMetric` — ``evaluate`` / ``evaluate_sync`` on one :class:`~ragnb.judges.sample.Sample`
→ :class:`~ragnb.llm.result.EvaluationResult`, ``aevaluate_dataset`` / ``evaluate_dataset`` on many →
``(per-item DataFrame, summary)`` — its registration (:func:`register_metric`) and lookup by name
(:func:`get_llm_metric`)."""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import Awaitable, Mapping
from typing import Any, ClassVar

from ragnb.llm.client import LLMClient
from ragnb.judges.judge_config import JudgeConfig
from ragnb.llm.result import EvaluationResult
from ragnb.llm.sync import run_sync
from ragnb.metrics import registry
from ragnb.metrics.stats import aggregate


async def gather_all(*aws: Awaitable[Any]) -> list[Any]:
    """Like asyncio.gather, but waits for every call to finish (so all are counted) before raising."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return list(results)


class LLMMetric:
    """One LLM-judged metric. Subclasses set ``name``, ``family``, ``higher_is_better``, ``value_range`` and,
    when the metric needs other sampling values than :class:`JudgeConfig`'s defaults, ``temperature`` /
    ``max_tokens``; they implement :meth:`validate` (sample → checked inputs) and :meth:`run` (inputs →
    result, every judge model). The class docstring states the formula (it is the registry's definition)."""

    name: ClassVar[str]
    family: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    aliases: ClassVar[tuple[str, ...]] = ()  # other keys a report may use for it
    temperature: ClassVar[float | None] = None  # None → JudgeConfig's default
    max_tokens: ClassVar[int | None] = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({args})"

    def result_name(self) -> str:
        """The registered name of this object (``name``, or a mode-specific name such as
        ``noise_sensitivity_irrelevant``): the key of its summary."""
        return self.name

    def options(self) -> dict[str, Any]:
        """The metric's own settings (constructor arguments), recorded with the config."""
        return {}

    def call_params(self, config: JudgeConfig) -> dict[str, Any]:
        """temperature, max_tokens, seed, cache of this metric's chat calls."""
        return config.call_params(self.temperature, self.max_tokens)

    def settings(self, config: JudgeConfig) -> dict[str, Any]:
        """Everything the score depends on, as plain values (the summary's ``config``; item-log fingerprint)."""
        params = self.call_params(config)
        return {"models": None if config.models is None else list(config.models), "aggregate": config.aggregate,
                "language": config.language, **params, **self.options()}

    def validate(self, sample: Any) -> Any:
        """The sample's checked inputs; ValueError naming what is missing or malformed."""
        raise NotImplementedError

    async def run(self, inputs: Any, client: LLMClient, config: JudgeConfig) -> EvaluationResult:
        raise NotImplementedError

    def item_details(self, result: EvaluationResult) -> dict[str, Any]:
        """Extra per-item columns of :func:`evaluate_dataset`."""
        return {"llm_requests": int(result.details.get("llm_requests", 0))}

    async def evaluate(self, sample: Any, client: LLMClient,
                       config: JudgeConfig | Mapping[str, Any] | None = None) -> EvaluationResult:
        """Score one sample with every judge model of ``config`` and combine them. A model whose output stays
        unusable or whose endpoint keeps failing is ``failed``; a permanent endpoint error (bad key, unknown
        model) raises."""
        config = JudgeConfig.make(dict(config) if isinstance(config, Mapping) else config)
        inputs = self.validate(sample)
        if not isinstance(client, LLMClient):
            raise ValueError("client must be a ragnb.llm.LLMClient, e.g. LLMClient(LLMSettings.from_env())")
        return await self.run(inputs, client, config)

    def evaluate_sync(self, sample: Any, client: LLMClient,
                      config: JudgeConfig | Mapping[str, Any] | None = None) -> EvaluationResult:
        """:meth:`evaluate` from synchronous code (works inside Jupyter's running loop too)."""
        return run_sync(self.evaluate(sample, client, config))

    def score(self, sample: Any, client: LLMClient, config: JudgeConfig | Mapping[str, Any] | None = None) -> float:
        """Just the score (``singleTurnScore``); NaN when failed or undefined."""
        return self.evaluate_sync(sample, client, config).score

    async def aevaluate_dataset(self, samples: Any, client: LLMClient,
                                config: JudgeConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                                n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
        """Async :meth:`evaluate_dataset`."""
        return await aevaluate_dataset(self, samples, client, config, concurrency, n_boot, seed)

    def evaluate_dataset(self, samples: Any, client: LLMClient, config: JudgeConfig | Mapping[str, Any] | None = None,
                         concurrency: int = 16, n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
        """Score every sample: ``(per-item DataFrame, summary)`` (:func:`evaluate_dataset` says what they hold)."""
        return run_sync(aevaluate_dataset(self, samples, client, config, concurrency, n_boot, seed))


def register_metric(metric: LLMMetric) -> LLMMetric:
    """Register ``metric`` (an object) in :mod:`ragnb.metrics.registry` under its :meth:`~LLMMetric.result_name`,
    with kind ``llm``, its family, range, direction, aliases and the class docstring as its formula. Every
    LLM-judged metric is registered this way, once, where its class is defined."""
    return registry.register(metric.result_name(), metric.family, kind="llm", value_range=metric.value_range,
                             higher_is_better=metric.higher_is_better, aliases=metric.aliases)(metric)


def llm_metric_names() -> list[str]:
    """The registered names of every LLM-judged metric (the objects :func:`get_llm_metric` returns)."""
    return [n for n in registry.names(kind="llm") if isinstance(registry.get(n).fn, LLMMetric)]


def get_llm_metric(metric: str | LLMMetric, **options: Any) -> LLMMetric:
    """The registered LLM metric named ``metric`` (``"judge_faithfulness"``, ``"context_precision"``,
    ``"nv_answer_accuracy"``, ``"noise_sensitivity_irrelevant"``, an alias such as ``"faithfulness_llm"``),
    rebuilt with ``options`` (its constructor arguments, e.g. ``strategy="response_based"``) when given; or
    ``metric`` itself when it is a metric object already."""
    if isinstance(metric, LLMMetric):
        if options:
            raise ValueError(f"options {sorted(options)} apply to a metric name; {metric!r} is built already")
        return metric
    registry.load_all()
    found = registry.REGISTRY.get(registry.ALIASES.get(metric, metric)) if isinstance(metric, str) else None
    if found is None or not isinstance(found.fn, LLMMetric):
        raise ValueError(f"metric {metric!r} is not an LLM-judged metric; use one of {llm_metric_names()}")
    obj = found.fn
    return type(obj)(**{**obj.options(), **options}) if options else obj


def pick_metric(metric: str | LLMMetric, catalogue: Mapping[str, LLMMetric], **options: Any) -> LLMMetric:
    """``metric`` itself (an object of the catalogue's family), or a new object of the catalogue's metric
    named ``metric`` built with ``options`` (the shared default object when there are none)."""
    kinds = tuple({type(m) for m in catalogue.values()})
    if isinstance(metric, kinds):
        if options:
            raise ValueError(f"options {sorted(options)} apply to a metric name; {metric!r} is built already")
        return metric
    if not isinstance(metric, str) or metric not in catalogue:
        raise ValueError(f"metric {metric!r}: use one of {sorted(catalogue)} (or a metric object)")
    return type(catalogue[metric])(**options) if options else catalogue[metric]


def warn_deprecated(old: str, new: str) -> None:
    """The warning of a name kept for one release after the one LLM-metric API replaced it (its caller's caller is
    the user's line)."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning,
                  stacklevel=3)


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------


def _rows(samples: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(index labels, samples, ids) from a DataFrame or a list of samples (mappings or objects)."""
    import pandas as pd

    if isinstance(samples, pd.DataFrame):
        records = samples.to_dict(orient="records")
        return list(samples.index), records, [r.get("id") for r in records]
    if isinstance(samples, (Mapping, str, bytes)) or not hasattr(samples, "__iter__"):
        raise ValueError("samples must be a list of samples (dicts or objects) or a DataFrame; "
                         "wrap a single sample as [sample]")
    items = list(samples)
    ids = [s.get("id") if isinstance(s, Mapping) else getattr(s, "id", None) for s in items]
    return list(range(len(items))), items, ids


def _validate_all(metric: LLMMetric, index: list[Any], items: list[Any]) -> list[Any]:
    """Every sample's inputs, or one ValueError listing every sample that cannot be scored (before any call)."""
    checked, errors = [], []
    for label, item in zip(index, items):
        try:
            checked.append(metric.validate(item))
        except ValueError as exc:
            errors.append(f"sample {label!r}: {exc}")
    if errors:
        shown = "\n  ".join(errors[:10])
        more = f"\n  … and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ValueError(f"{len(errors)} of {len(items)} samples cannot be scored by {metric.result_name()}:"
                         f"\n  {shown}{more}")
    return checked


def _summary(metric: LLMMetric, frame: Any, models: list[str], client: LLMClient, config: JudgeConfig,
             n_boot: int, seed: int) -> dict[str, Any]:
    name = metric.result_name()
    summary: dict[str, Any] = {name: aggregate(frame["score"].to_numpy(dtype=float), n_boot=n_boot, seed=seed)}
    # Items scored by a partial jury (some judge models failed, the others answered) are counted.
    summary[name]["n_partial"] = int((frame["status"] == "partial").sum())
    judged = frame["method"] == "llm"  # heuristic shortcuts were judged by no model
    for model in models:
        summary[f"{name}[{model}]"] = aggregate(frame.loc[judged, f"score[{model}]"].to_numpy(dtype=float),
                                                n_boot=n_boot, seed=seed)
    summary["judge_backend"] = client.settings.backend_label()
    summary["higher_is_better"] = metric.higher_is_better
    summary["config"] = metric.settings(config)
    summary["counts"] = {
        "methods": {k: int(v) for k, v in frame["method"].value_counts().items()},
        "status": {k: int(v) for k, v in frame["status"].value_counts().items()},
        "llm_requests": int(frame["llm_requests"].sum()),
        **{k: int(frame[k].sum()) for k in ("n_verdicts_missing", "n_verdicts_extra", "n_verdicts_reasked")
           if k in frame},
    }
    return summary


async def aevaluate_dataset(metric: str | LLMMetric, samples: Any, client: LLMClient,
                            config: JudgeConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                            n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Async :func:`evaluate_dataset`."""
    import pandas as pd

    metric = get_llm_metric(metric)
    config = JudgeConfig.make(dict(config) if isinstance(config, Mapping) else config)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r} must be an integer >= 1 (samples scored at once)")
    models = config.judge_models()
    index, items, ids = _rows(samples)
    if not items:
        raise ValueError("samples is empty: give at least one sample")
    checked = _validate_all(metric, index, items)
    sem = asyncio.Semaphore(concurrency)

    async def one(inputs: Any) -> EvaluationResult:
        async with sem:
            return await metric.run(inputs, client, config)

    results = await asyncio.gather(*(one(x) for x in checked))
    rows = []
    for label, ident, res in zip(index, ids, results):
        row: dict[str, Any] = {"sample": label}
        if ident is not None:
            row["id"] = ident
        base = res.as_row()
        base.pop("metric")
        row.update({k: v for k, v in base.items() if not k.startswith("score[")})
        row.update(metric.item_details(res))
        by_model = {m.model: m.score for m in res.model_scores}
        row.update({f"score[{model}]": by_model.get(model, math.nan) for model in models})
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame, _summary(metric, frame, models, client, config, n_boot, seed)


def evaluate_dataset(metric: str | LLMMetric, samples: Any, client: LLMClient,
                     config: JudgeConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                     n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Score every sample of a dataset with ``metric`` (an object or a registered name, :func:`get_llm_metric`):
    ``(per-item DataFrame, summary)``; the same as ``metric.evaluate_dataset(samples, client, config)``.

    All samples are validated first: a ValueError lists every sample that cannot be scored, before any LLM
    call. At most ``concurrency`` samples are in flight (the client also bounds HTTP requests).

    Per-item frame, one row per sample: ``sample`` (the DataFrame index label or the list position), ``id``
    (when the rows have one), ``score``, ``method``, ``status``, ``reason``, ``explanation``,
    ``duration_s``, ``llm_requests`` and the metric's counts (:meth:`LLMMetric.item_details`), and
    ``score[<model>]`` per judge model.

    Summary (:func:`ragnb.metrics.stats.summary_frame` tabulates it): ``{<metric>: aggregate(score),
    "<metric>[<model>]": aggregate of that model's scores over the LLM-judged items, "judge_backend",
    "higher_is_better", "config", "counts": {"methods", "status", "llm_requests", verdict counts}}``,
    aggregates from :func:`ragnb.metrics.stats.aggregate` (mean, ci95, n, n_valid, n_failed), the metric's
    with ``n_partial`` (items a partial jury scored: some judge models failed, the others answered; they
    count in ``n_valid``): failed and undefined samples are left out of the mean and counted in
    ``n_failed``, never dropped. Heuristic
    shortcut items count in the metric's aggregate with their score, not in the per-model ones.
    """
    return run_sync(aevaluate_dataset(metric, samples, client, config, concurrency, n_boot=n_boot, seed=seed))
