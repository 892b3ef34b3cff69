"""ResponseRelevancy: how well questions generated from the response match the user's question."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ragnb.judges.ragas.common import RagasJudge, RagasMetric, text_of
from ragnb.judges.ragas.parsing import QuestionsParser
from ragnb.judges.sample import Sample
from ragnb.llm.result import ModelScore


def cosine_to(question_vec, generated_vecs) -> np.ndarray:
    """cos(q, g_i) = q·g_i / (‖q‖ ‖g_i‖) for every row g_i."""
    q = np.asarray(question_vec, dtype=np.float64).ravel()
    g = np.atleast_2d(np.asarray(generated_vecs, dtype=np.float64))
    if g.size == 0:
        return np.zeros(0)
    if g.shape[1] != q.size:
        raise ValueError(f"vector dimensions differ: question {q.size}, generated questions {g.shape[1]}")
    norms = np.linalg.norm(g, axis=1) * np.linalg.norm(q)
    if np.any(norms == 0):
        raise ValueError("a zero vector has no cosine; check the encoder output")
    return g @ q / norms


def response_relevancy_score(question_vec, generated_vecs, noncommittal: bool = False) -> float:
    """ResponseRelevancy = (1/N) Σ_i cos(E(q), E(q_i)) · (1 − noncommittal).

    q: the user's question; q_1..q_N: questions the judge generated from the response; E: the sentence
    encoder. A noncommittal (evasive) response scores 0. No generated question → NaN.
    """
    cos = cosine_to(question_vec, generated_vecs)
    if noncommittal:
        return 0.0
    return float(cos.mean()) if cos.size else math.nan


class ResponseRelevancy(RagasMetric):
    """ResponseRelevancy = (1/N) Σ_i cos(E(q), E(q_i)) · (1 − noncommittal)  (higher is better).

    One call: from the response alone the judge writes N distinct questions it answers (fewer than N
    distinct ones → re-ask) and flags a noncommittal (evasive) response; E is the sentence encoder
    (default all-MiniLM-L6-v2). Noncommittal → 0. Needs ``user_input`` and ``response``.
    """

    name = "response_relevancy"
    value_range = (-1.0, 1.0)  # a mean of cosines
    required = ("user_input", "response")

    def __init__(self, number_of_questions: int = 3, encoder: Any = None) -> None:
        n = number_of_questions
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number_of_questions={n!r} must be an integer >= 1 (3–5 is typical)")
        if encoder is not None and not callable(getattr(encoder, "encode", None)):
            raise ValueError("encoder must have an encode(list_of_texts) method, e.g. ragnb.embeddings.models.get_encoder()")
        self.number_of_questions = n
        self.encoder = encoder

    def options(self) -> dict[str, Any]:
        """The encoder is recorded by its name."""
        enc = self.encoder
        return {"number_of_questions": self.number_of_questions,
                "encoder": None if enc is None else getattr(enc, "name", type(enc).__name__)}

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        parser = QuestionsParser(self.number_of_questions)
        noncommittal, questions = await judge.ask("questions", "ragas_response_questions", parser,
                                                  response=sample.response, n=self.number_of_questions)
        judge.details.update(noncommittal=noncommittal, questions=questions, n_questions=len(questions),
                             n_duplicates_dropped=parser.n_duplicates)
        lang = judge.config.language
        if questions:
            encoder = self.encoder
            if encoder is None:
                from ragnb.embeddings.models import get_encoder

                encoder = get_encoder()
            vecs = np.asarray(encoder.encode([sample.user_input, *questions]))
            cos = cosine_to(vecs[0], vecs[1:])
            judge.details["cosines"] = [float(c) for c in cos]
            if len(questions) > 1:  # how different the generated questions are from each other
                unit = vecs[1:] / np.linalg.norm(vecs[1:], axis=1, keepdims=True)
                sims = unit @ unit.T
                judge.details["max_pairwise_cosine"] = float(np.max(sims[np.triu_indices(len(questions), 1)]))
            score = response_relevancy_score(vecs[0], vecs[1:], noncommittal)
        else:  # only a noncommittal reply may come without questions
            score = 0.0
        if noncommittal:
            return judge.ok(score, text_of(lang, "noncommittal"))
        return judge.ok(score, text_of(lang, "relevancy", n=len(questions), score=score))
