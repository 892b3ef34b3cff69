"""ContextPrecision: average precision of the retrieved contexts' usefulness, in rank order."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragnb.judges.ragas.common import TEXT, RagasJudge, RagasMetric, text_of
from ragnb.judges.ragas.parsing import IdParser, numbered, read_binary
from ragnb.judges.sample import Sample
from ragnb.judges.ragas.statements import binary
from ragnb.llm.result import ModelScore

STRATEGIES = ("auto", "reference_based", "response_based")


def average_precision(verdicts: Sequence[int]) -> float:
    """ContextPrecision = AP = Σ_k (precision@k · v_k) / Σ_k v_k, precision@k = (Σ_{i≤k} v_i) / k.

    ``verdicts``: v_k ∈ {0, 1}, usefulness of the context at rank k (1-based). No useful context → 0.0
    (ragas gives ≈0 through ε); no context at all → NaN. Example: [1, 0, 1] → (1/1 + 2/3) / 2.
    """
    v = binary(verdicts, "verdicts")
    if not v:
        return math.nan
    hits, total = 0, 0.0
    for k, rel in enumerate(v, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


class ContextPrecision(RagasMetric):
    """ContextPrecision = average precision of the retrieved contexts' usefulness, in rank order.

    AP = Σ_k (precision@k · v_k) / Σ_k v_k, precision@k = (Σ_{i≤k} v_i) / k, v_k ∈ {0, 1} the judge's
    verdict "context k was useful in arriving at the answer", where the answer is the reference
    (``strategy="reference_based"``) or the response (``"response_based"``); ``"auto"`` uses the
    reference when present. One call judges every context id. No useful context → 0.0. Higher is better.
    Needs ``user_input``, ``retrieved_contexts`` and the reference or the response.
    """

    name = "context_precision"

    def __init__(self, strategy: str = "auto") -> None:
        value = str(strategy).strip().lower().replace("-", "_")
        value = {"reference": "reference_based", "response": "response_based"}.get(value, value)
        if value not in STRATEGIES:
            raise ValueError(f"strategy {strategy!r}: use one of {STRATEGIES}")
        self.strategy = value

    def options(self) -> dict[str, str]:
        return {"strategy": self.strategy}

    def resolve_strategy(self, sample: Sample) -> str:
        if self.strategy != "auto":
            return self.strategy
        if not sample.missing(["reference"]):
            return "reference_based"
        if not sample.missing(["response"]):
            return "response_based"
        raise ValueError("context_precision (strategy auto) needs a reference or a response; the sample has neither: "
                         "set Sample(reference=...) or Sample(response=...)")

    def required_fields(self, sample: Sample) -> tuple[str, ...]:
        against = "reference" if self.resolve_strategy(sample) == "reference_based" else "response"
        return ("user_input", "retrieved_contexts", against)

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        strategy = self.resolve_strategy(sample)
        against = "reference" if strategy == "reference_based" else "response"
        contexts = sample.retrieved_contexts
        judge.details.update(strategy=strategy, n_contexts=len(contexts))
        ids = list(range(1, len(contexts) + 1))
        verdicts = await judge.ask("verdicts", "ragas_context_precision", IdParser(ids, read_binary, "context"),
                                   question=sample.user_input, answer=getattr(sample, against),
                                   contexts=numbered(contexts, "context"))
        parser = judge.parsers[-1]
        v = [verdicts[i] for i in ids]
        judge.details["verdicts"] = v
        judge.details["reasons"] = [parser.reasons.get(i, "") for i in ids]
        score = average_precision(v)
        lang = judge.config.language
        ranks = [i for i in ids if verdicts[i]]
        if ranks:
            text = text_of(lang, "context_precision", against=TEXT[lang][against],
                           ranks=", ".join(map(str, ranks)), n=len(ids), score=score)
        else:
            text = text_of(lang, "context_precision_none", against=TEXT[lang][against], n=len(ids))
        return judge.ok(score, text)
