"""Pairwise judging: which of two answers is better, "A" | "B" | "Tie".

Per model, with ``swap_positions`` (default) the model is asked twice, once with (A=answer_a, B=answer_b)
and once with the answers swapped; the swapped verdict is mapped back (A↔B). Same verdict both times →
that verdict; different → ``"Tie"`` (the model's preference depends on position, so it has none). Over
models: the verdict most models give; a tie between verdicts → ``"Tie"``. ``config.aggregate`` does not
apply. The numeric score encodes the preference for answer A: A = 1.0, Tie = 0.5, B = 0.0; the verdict
itself is in ``result.details["verdict"]``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any, Protocol

from ragnb.judges.judge_config import JudgeConfig
from ragnb.judges.reading import as_text, call_log, text_field
from ragnb.llm.replies import ChatResult, LLMOutputError
from ragnb.llm.result import EvaluationResult, ModelScore, evaluate_with_models, jury_status

VERDICTS = ("A", "B", "Tie")
VERDICT_SCORE = {"A": 1.0, "Tie": 0.5, "B": 0.0}
_SWAP = {"A": "B", "B": "A", "Tie": "Tie"}


class Judge(Protocol):
    """What pairwise judging uses of a judge (:class:`ragnb.judges.scores.Judge` is one): named here so this
    module, below the judge that calls it, needs nothing from above."""

    config: JudgeConfig
    models: list[str]

    def messages(self, metric: str, **inputs: Any) -> list[dict[str, str]]: ...

    def result_details(self, metric: str) -> dict[str, Any]: ...

    def undefined(self, metric: str, blank: list[str]) -> EvaluationResult: ...

    async def ask(self, metric: str, messages: list[dict], model: str, parse: Any) -> tuple[Any, list[ChatResult]]: ...


def verdict_parser(mode: str):
    """``parse`` callback for pairwise replies: JSON → (verdict "A"|"B"|"Tie", explanation, reasoning).
    The verdict is matched case-insensitively ("tie", " b "); anything else raises ValueError."""

    def parse(obj: Any) -> tuple[str, str, str]:
        if not isinstance(obj, dict):
            raise ValueError('expected one JSON object with the keys "verdict" and "explanation"')
        raw = obj.get("verdict")
        if not isinstance(raw, str):
            raise ValueError(f'"verdict" must be the string "A", "B" or "Tie", got {raw!r}')
        verdict = {v.lower(): v for v in VERDICTS}.get(raw.strip().lower())
        if verdict is None:
            raise ValueError(f'"verdict" must be exactly "A", "B" or "Tie", got {raw!r}')
        explanation = text_field(obj, "explanation", required=False)
        reasoning = text_field(obj, "reasoning", required=mode == "reasoned")
        return verdict, explanation, reasoning

    return parse


def majority_verdict(verdicts: Sequence[str]) -> tuple[str, dict[str, int]]:
    """The verdict most models gave; a tie between verdicts → "Tie". Returns (verdict, counts)."""
    counts = {v: 0 for v in VERDICTS}
    for v in verdicts:
        if v not in counts:
            raise ValueError(f"verdict {v!r}: use one of {VERDICTS}")
        counts[v] += 1
    top = max(counts.values())
    leaders = [v for v, c in counts.items() if c == top]
    return (leaders[0] if len(leaders) == 1 and top > 0 else "Tie"), counts


async def judge_pairwise(judge: Judge, question: str, answer_a: str, answer_b: str,
                         reference: str | None = None) -> EvaluationResult:
    """:meth:`Judge.pairwise <ragnb.judges.scores.Judge.pairwise>` (rules in the module docstring)."""
    question, answer_a, answer_b = (as_text(v, k) for k, v in
                                    (("question", question), ("answer_a", answer_a), ("answer_b", answer_b)))
    if reference is not None:
        reference = as_text(reference, "reference")
    blank = [k for k, v in (("question", question), ("answer_a", answer_a), ("answer_b", answer_b))
             if not v.strip()]
    if blank:
        return judge.undefined("pairwise", blank)
    orders = [("original", answer_a, answer_b)]
    if judge.config.swap_positions:
        orders.append(("swapped", answer_b, answer_a))
    prompts = [(name, judge.messages("pairwise", question=question, answer_a=first, answer_b=second,
                                    reference=reference)) for name, first, second in orders]
    parse = verdict_parser(judge.config.mode)

    merged = await evaluate_with_models("pairwise", judge.models,
                                        lambda model: _model_verdict(judge, model, prompts, parse), "majority")
    return _combine_verdicts(merged, judge.result_details("pairwise"))


def _combine_verdicts(merged: EvaluationResult, details: dict[str, Any]) -> EvaluationResult:
    """The verdict most models gave (ties → "Tie"), with the explanation of a model that gave it."""
    per_model = merged.model_scores
    ok = [m for m in per_model if m.status == "ok"]
    if not ok:
        return EvaluationResult("pairwise", math.nan, "", per_model, merged.duration_s, "llm",
                                merged.status, merged.reason, details)
    verdict, counts = majority_verdict([m.details["verdict"] for m in ok])
    details.update(verdict=verdict, verdict_counts=counts)
    explanation = next((m.explanation for m in ok if m.details["verdict"] == verdict and m.explanation),
                       next((m.explanation for m in ok if m.explanation), ""))
    reason = "; ".join(f"{m.model} failed: {m.reason}" for m in per_model if m.status == "failed")
    return EvaluationResult("pairwise", VERDICT_SCORE[verdict], explanation, per_model, merged.duration_s,
                            "llm", jury_status(per_model), reason, details)


async def _model_verdict(judge: Judge, model: str, prompts: list[tuple[str, list[dict]]], parse: Any) -> ModelScore:
    """One model's verdict over the orders in ``prompts`` (original, and swapped when asked)."""
    outcomes = await asyncio.gather(*(judge.ask("pairwise", msgs, model, parse) for _, msgs in prompts),
                                    return_exceptions=True)
    for o in outcomes:  # transient errors go to evaluate_with_models, permanent ones stop the run
        if isinstance(o, BaseException) and not isinstance(o, LLMOutputError):
            raise o
    calls: list[ChatResult] = []
    for o in outcomes:
        calls.extend(o.results if isinstance(o, LLMOutputError) else o[1])
    details: dict[str, Any] = {"reasks": sum(len(o.results if isinstance(o, LLMOutputError) else o[1]) - 1
                                             for o in outcomes),
                               "calls": call_log(calls)}
    failed = [(name, o) for (name, _), o in zip(prompts, outcomes) if isinstance(o, LLMOutputError)]
    if failed:
        reason = "; ".join(f"{name} order: no valid verdict in {len(o.results)} replies: {o.reason}"
                           for name, o in failed)
        return ModelScore(model, math.nan, status="failed", reason=reason,
                          calls=sum(r.attempts for r in calls), details=details)
    per_order = {name: o[0] for (name, _), o in zip(prompts, outcomes)}
    v_orig, expl, reasoning = per_order["original"]
    verdict = v_orig
    if "swapped" in per_order:
        v_swapped = _SWAP[per_order["swapped"][0]]  # back to the original labels
        verdict = v_orig if v_orig == v_swapped else "Tie"
        details.update(verdict_original=v_orig, verdict_swapped=v_swapped,
                       position_consistent=v_orig == v_swapped,
                       explanation_swapped=per_order["swapped"][1])
        if per_order["swapped"][2]:
            details["reasoning_swapped"] = per_order["swapped"][2]
    details["verdict"] = verdict
    if reasoning:
        details["reasoning"] = reasoning
    return ModelScore(model, VERDICT_SCORE[verdict], expl, calls=sum(r.attempts for r in calls),
                      details=details)

