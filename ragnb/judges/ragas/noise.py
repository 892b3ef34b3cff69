"""NoiseSensitivity: the share of response statements that are incorrect and come from relevant (or only
from irrelevant) retrieved contexts; lower is better."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ragnb.judges.base import gather_all
from ragnb.judges.ragas.common import TEXT, RagasJudge, RagasMetric, text_of
from ragnb.judges.ragas.parsing import ContextIds, IdParser, numbered, parse_statements, read_binary
from ragnb.judges.sample import Sample
from ragnb.llm.result import ModelScore

MODES = ("relevant", "irrelevant")


def _noise_flags(incorrect: Sequence[bool], response_support: Sequence[Iterable[int]],
                 reference_support: Sequence[Iterable[int]]) -> tuple[set[int], list[bool], list[bool]]:
    relevant = set().union(*map(set, reference_support)) if reference_support else set()
    rel_faithful = [bool(set(s) & relevant) for s in response_support]
    irr_faithful = [bool(set(s) - relevant) and not rf for s, rf in zip(response_support, rel_faithful)]
    return relevant, rel_faithful, irr_faithful


def noise_sensitivity_score(incorrect: Sequence[bool], response_support: Sequence[Iterable[int]],
                            reference_support: Sequence[Iterable[int]], mode: str = "relevant") -> float:
    """NoiseSensitivity (lower is better), as ragas defines it.

    For response statements a = 1..n: ``incorrect[a]`` = the reference does not support a;
    ``response_support[a]`` = ids of the contexts that support a. ``reference_support[g]`` = ids of the
    contexts that support reference statement g. A context is *relevant* when it supports at least one
    reference statement.

    relevant mode:   NS = |{a : incorrect(a) ∧ a is supported by a relevant context}| / n
    irrelevant mode: NS = |{a : incorrect(a) ∧ a is supported by an irrelevant context
                               ∧ by no relevant context}| / n
    No response statement → NaN.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: use one of {MODES}")
    if len(incorrect) != len(response_support):
        raise ValueError(f"incorrect has {len(incorrect)} entries but response_support {len(response_support)}; "
                         "give one of each per response statement")
    if not incorrect:
        return math.nan
    _, rel, irr = _noise_flags(incorrect, response_support, reference_support)
    flags = rel if mode == "relevant" else irr
    return sum(bool(f) and bool(i) for f, i in zip(flags, incorrect)) / len(incorrect)


class NoiseSensitivity(RagasMetric):
    """NoiseSensitivity (lower is better): the share of response statements that are incorrect and come from
    relevant (``mode="relevant"``) or only from irrelevant (``mode="irrelevant"``) retrieved contexts.

    relevant:   NS = |{a : ¬ref⊨a ∧ ∃ relevant c: c⊨a}| / n
    irrelevant: NS = |{a : ¬ref⊨a ∧ ∃ irrelevant c: c⊨a ∧ ∄ relevant c: c⊨a}| / n
    where a ranges over the n statements of the response and a context is relevant when it supports at
    least one statement of the reference (:func:`noise_sensitivity_score`, ragas' definition).

    Calls: statements of the response and of the reference (concurrently); then, concurrently, a verdict
    per response statement against the reference, and for every statement (response and reference, one id
    space) the ids of the contexts supporting it — 4 calls whatever K (ragas: 2K + 3). No response or no
    reference statement → NaN, undefined. Needs ``response``, ``reference`` and ``retrieved_contexts``.
    """

    name = "noise_sensitivity"
    higher_is_better = False
    required = ("response", "reference", "retrieved_contexts")

    def __init__(self, mode: str = "relevant") -> None:
        value = str(mode).strip().lower()
        if value not in MODES:
            raise ValueError(f"mode {mode!r}: use one of {MODES}")
        self.mode = value

    def options(self) -> dict[str, str]:
        return {"mode": self.mode}

    def result_name(self) -> str:
        return f"noise_sensitivity_{self.mode}"

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        question = sample.user_input or "-"
        resp, ref = await gather_all(
            judge.ask("statements of the response", "ragas_statements", parse_statements,
                      question=question, text=sample.response),
            judge.ask("statements of the reference", "ragas_statements", parse_statements,
                      question=question, text=sample.reference),
        )
        contexts = sample.retrieved_contexts
        n, m = len(resp), len(ref)
        judge.details.update(mode=self.mode, n_statements=n, n_reference_statements=m, n_contexts=len(contexts))
        if not n:
            return judge.undefined("the response contains no factual statement")
        if not m:
            return judge.undefined("the reference contains no factual statement, so no context can be relevant")
        ctx_reader = ContextIds(len(contexts))
        try:
            correct, support = await gather_all(
                judge.ask("response vs reference", "ragas_nli", IdParser(range(1, n + 1), read_binary),
                          context=sample.reference, statements=numbered(resp, "statement")),
                judge.ask("statements vs contexts", "ragas_noise_attribution",
                          IdParser(range(1, n + m + 1), ctx_reader),
                          contexts=numbered(contexts, "context"), statements=numbered(resp + ref, "statement")),
            )
        finally:
            judge.details["n_context_ids_unknown"] = ctx_reader.n_unknown
        incorrect = [not correct[i] for i in range(1, n + 1)]
        resp_support = [sorted(support[i]) for i in range(1, n + 1)]
        ref_support = [sorted(support[n + j]) for j in range(1, m + 1)]
        relevant, rel, irr = _noise_flags(incorrect, resp_support, ref_support)
        score = noise_sensitivity_score(incorrect, resp_support, ref_support, self.mode)
        judge.details.update(
            relevant_contexts=sorted(relevant),
            statements=[{"id": i, "statement": s, "incorrect": incorrect[i - 1], "contexts": resp_support[i - 1],
                         "relevant_faithful": rel[i - 1], "irrelevant_faithful": irr[i - 1]}
                        for i, s in enumerate(resp, start=1)],
            reference_statements=[{"id": n + j, "statement": s, "contexts": ref_support[j - 1]}
                                  for j, s in enumerate(ref, start=1)],
        )
        flags = rel if self.mode == "relevant" else irr
        k = sum(f and i for f, i in zip(flags, incorrect))
        lang = judge.config.language
        text = text_of(lang, "noise", k=k, n=n, kind=TEXT[lang][self.mode], r=len(relevant), c=len(contexts))
        return judge.ok(score, text)
