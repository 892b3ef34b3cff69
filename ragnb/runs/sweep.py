"""Planning a multi-model sweep: which notebook runs in which (judge × generation) combination.

A notebook runs once per combination *of the models it takes*: Tier 2/3 (judge and generation model) once per
pair, a judge-only notebook (Tier Judge, the Judge Pipeline) once per judge model, a generation-only one once
per generation model. A later combination that would repeat a run reuses the first one's report (same
metrics, no second bill). Model ids are checked against the endpoint's ``/v1/models`` before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragnb.io import comma_list

# Notebook parameters a multi-model sweep sets per combination.
SWEEP_PARAMS = ("judge_models", "generation_model")


@dataclass
class SweepStep:
    """One combination: the notebooks to execute there (with their model parameters) and, for the notebooks
    that depend on fewer models, the folder of the combination whose run they share."""

    judge: str | None
    generation: str | None
    folder: str
    run: list[tuple[Any, dict[str, str]]] = field(default_factory=list)
    reuse: dict[str, str] = field(default_factory=dict)  # notebook stem → folder it ran in


def combo_slug(judge: str | None, gen: str | None) -> str:
    text = f"{judge or 'default-judge'}__{gen or 'default-generation'}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:120]


def model_combos(judge_models: list[str] | None, generation_models: list[str] | None
                 ) -> list[tuple[str | None, str | None]]:
    """Every (judge model × generation model) pair of a multi-model sweep; [] when no sweep was asked for."""
    judges, gens = comma_list(judge_models, "judge_models"), comma_list(generation_models, "generation_models")
    for label, models in (("--judge-models", judges), ("--generation-models", gens)):
        if len(set(models)) != len(models):
            raise ValueError(f"{label} names a model twice: {models}")
    if not judges and not gens:
        return []
    return [(j, g) for j in (judges or [None]) for g in (gens or [None])]


def plan_sweep(combos: list[tuple[str | None, str | None]], swept: list[Any],
               declared: dict[str, Any]) -> list[SweepStep]:
    """One :class:`SweepStep` per combination; each notebook executes once per distinct value of the sweep
    parameters it declares (``declared[stem]``: its parameter names)."""
    first: dict[tuple[str, str | None, str | None], str] = {}
    steps = []
    for judge, gen in combos:
        step = SweepStep(judge, gen, f"models/{combo_slug(judge, gen)}")
        for nb in swept:
            extra = {}
            if judge and "judge_models" in declared[nb.stem]:
                extra["judge_models"] = judge
            if gen and "generation_model" in declared[nb.stem]:
                extra["generation_model"] = gen
            key = (nb.stem, extra.get("judge_models"), extra.get("generation_model"))
            if key in first:
                step.reuse[nb.stem] = first[key]
            else:
                first[key] = step.folder
                step.run.append((nb, extra))
        steps.append(step)
    return steps


def sweep_models(combos: list[tuple[str | None, str | None]]) -> list[str]:
    """Every model id a sweep names, in order, once."""
    return list(dict.fromkeys(m for pair in combos for m in pair if m))


def check_sweep(combos: list[tuple[str | None, str | None]], swept: list, nbs: list) -> None:
    """A sweep needs notebooks that take models and a configured endpoint that serves every named model."""
    from ragnb.llm import LLMSettings
    from ragnb.llm.model_check import check_models

    if not swept:
        raise ValueError(
            f"a model sweep needs notebooks that take judge_models or generation_model (tier2, tier3, judge, "
            f"rag_metrics…); this run has {[nb.name for nb in nbs]}"
        )
    settings = LLMSettings.from_env()
    if not settings.configured:
        raise ValueError(
            "a model sweep compares LLMs, so it needs an OpenAI-compatible endpoint: set RAGNB_LLM_BASE_URL "
            "and the key in RAGNB_LLM_API_KEY (or OPENAI_API_KEY / OPENROUTER_API_KEY)"
        )
    check_models(settings, sweep_models(combos), "--judge-models / --generation-models")
