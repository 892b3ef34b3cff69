"""Faithfulness and ContextRecall: the share of statements (response) or sentences (reference) that the
retrieved contexts support — see docs/metrics.md, Faithfulness."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragnb.judges.ragas.common import RagasJudge, RagasMetric, quote_items, text_of
from ragnb.judges.ragas.parsing import IdParser, joined_contexts, numbered, parse_statements, read_binary
from ragnb.judges.sample import Sample
from ragnb.llm.result import ModelScore
from ragnb.metrics.fallback import split_sentences


def binary(verdicts: Sequence[Any], what: str) -> list[int]:
    out = []
    for i, v in enumerate(verdicts):
        if isinstance(v, (bool, np.bool_)) or v in (0, 1):
            out.append(int(v))
        else:
            raise ValueError(f"{what}[{i}]={v!r} must be 0 or 1")
    return out


def faithfulness_score(verdicts: Sequence[int]) -> float:
    """Faithfulness = |statements of the response supported by the contexts| / |statements|.

    ``verdicts``: one 0/1 per statement the response was decomposed into. No statement → NaN (undefined).
    """
    return _share(verdicts)


def _share(verdicts: Sequence[int]) -> float:
    v = binary(verdicts, "verdicts")
    return sum(v) / len(v) if v else math.nan


def context_recall_score(verdicts: Sequence[int]) -> float:
    """ContextRecall = |sentences of the reference attributable to the contexts| / |sentences of the reference|.

    ``verdicts``: one 0/1 per reference sentence. No sentence → NaN (undefined).
    """
    return _share(verdicts)


class Faithfulness(RagasMetric):
    """Faithfulness = |statements of the response supported by the retrieved contexts| / |statements|.

    Call 1: the judge decomposes the response into standalone statements (ragnb numbers them 1..n).
    Call 2: a 0/1 verdict for every statement id against all contexts. Higher is better.
    0 statements → NaN, undefined. A statement id still without a verdict after the re-asks → failed.
    Needs ``response`` and ``retrieved_contexts`` (``user_input`` helps resolve references).
    """

    name = "faithfulness"
    required = ("response", "retrieved_contexts")

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        statements = await judge.ask("statements of the response", "ragas_statements", parse_statements,
                                     question=sample.user_input or "-", text=sample.response)
        judge.details["n_statements"] = len(statements)
        if not statements:
            return judge.undefined("the response contains no factual statement to verify")
        ids = list(range(1, len(statements) + 1))
        verdicts = await judge.ask("verdicts", "ragas_nli", IdParser(ids, read_binary),
                                   context=joined_contexts(sample.retrieved_contexts),
                                   statements=numbered(statements, "statement"))
        return _supported_share(judge, statements, verdicts, "statements", "faithfulness")


class ContextRecall(RagasMetric):
    """ContextRecall = |sentences of the reference attributable to the retrieved contexts| / |sentences|.

    ragnb splits the reference into sentences itself (:func:`ragnb.metrics.fallback.split_sentences`) and
    numbers them; one call returns a 0/1 verdict per sentence id. Higher is better. A reference without a
    sentence → NaN, undefined. Needs ``user_input``, ``reference`` and ``retrieved_contexts``.
    """

    name = "context_recall"
    required = ("user_input", "reference", "retrieved_contexts")

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        sentences = split_sentences(sample.reference)
        judge.details["n_statements"] = len(sentences)
        if not sentences:
            return judge.undefined("the reference contains no sentence")
        ids = list(range(1, len(sentences) + 1))
        verdicts = await judge.ask("verdicts", "ragas_context_recall", IdParser(ids, read_binary, "sentence"),
                                   question=sample.user_input, context=joined_contexts(sample.retrieved_contexts),
                                   statements=numbered(sentences, "sentence"))
        return _supported_share(judge, sentences, verdicts, "sentences", "context_recall")


def _supported_share(judge: RagasJudge, items: list[str], verdicts: dict[int, int], key: str,
                     text_key: str) -> ModelScore:
    """Score = supported items / items, with the per-item rows in ``details[key]`` and the unsupported
    items quoted in the explanation."""
    parser = judge.parsers[-1]
    rows = [{"id": i, "statement": s, "verdict": verdicts[i], "reason": parser.reasons.get(i, "")}
            for i, s in enumerate(items, start=1)]
    judge.details[key] = rows
    score = _share([r["verdict"] for r in rows])
    lang = judge.config.language
    bad = [r for r in rows if not r["verdict"]]
    text = text_of(lang, text_key, k=len(rows) - len(bad), n=len(rows))
    if bad:
        text += text_of(lang, f"{text_key}_bad", items=quote_items(bad, lang))
    return judge.ok(score, text)
