"""Ragas-style LLM-judged RAG metrics (seed 002), with verdicts aligned by id.

Six metrics, one class each, formula in its docstring: :class:`ContextEntityRecall`,
:class:`ContextPrecision`, :class:`ContextRecall`, :class:`Faithfulness`, :class:`NoiseSensitivity`,
:class:`ResponseRelevancy`. Each has ``async evaluate(sample, client, config) -> EvaluationResult``,
``evaluate_sync`` and ``score`` (the float); :func:`evaluate_dataset` scores many samples with bounded
concurrency and returns ``(per-item DataFrame, summary)``. Every judge model in ``config.models`` runs the
whole pipeline of a metric on its own (its own statements, its own verdicts); the per-model scores are
combined by ``config.aggregate`` (mean / median / majority), and failed models are listed, not averaged in.

What ragnb does differently from ragas, on purpose
--------------------------------------------------
* **Ids, not positions.** Statements, sentences and contexts go to the judge as a JSON list with ids, and
  the verdicts are matched by id. The denominator is the number of items ragnb sent, never the length of
  the list the judge returned (ragas divides by ``len(verdicts)``, so a judge that drops a statement
  changes the score). A verdict for an unknown or repeated id is ignored and counted
  (``n_verdicts_extra``).
* **Missing verdicts are re-asked, then failed.** If a reply lacks a valid verdict for some ids, the parse
  step names those ids and the client re-asks (within ``LLMSettings.reask_budget``); the replies are merged
  (a later reply's verdict for an id replaces an earlier one). Ids still missing after the budget make
  that model's result ``failed`` (NaN, ``n_verdicts_missing`` > 0) — a missing verdict is never scored as
  "unsupported", and the score is never computed over the judged subset. ``n_verdicts_reasked`` counts the
  ids the first reply lacked.
* **Unusable output is re-asked, then failed**: unparseable, truncated (``finish_reason=length``) or
  refused replies are re-asked by :meth:`LLMClient.chat_json`; then the model's result is ``failed`` with
  the reason — never 0 and never dropped.
* **Nothing to judge is undefined, not 0**: a response or reference without statements, a reference
  without entities → NaN with ``status="undefined"`` and the reason (ragas returns 0 for entity recall
  through its ε denominator).
* **ContextRecall's sentences are split by ragnb** (deterministic, :func:`ragnb.metrics.fallback.split_sentences`),
  so the judge cannot decide how many sentences the reference has.
* **Entity matching normalises word forms** (:func:`normalize_entity`): casefold, ё→е, punctuation out,
  digit groups joined, crude Russian suffix stripping — "Москвы" meets "Москва", "Эйфелевой башни" meets
  "Эйфелева башня"; ragas compares strings exactly.
* **ResponseRelevancy asks for N distinct questions in one call** and re-asks if fewer than N distinct
  ones come back; ragas makes N identical calls, which at temperature 0 (or from a cache) return the same
  question N times, so its "mean over N" is one sample repeated.
* **Fewer calls where batching is safe**: all contexts in one call for ContextPrecision, all statements
  against all contexts in one call for NoiseSensitivity.

LLM calls per sample and judge model (K retrieved contexts, N = ``number_of_questions``), without re-asks
(each call may be re-asked up to ``reask_budget`` times when its reply is unusable):

====================== ======= ============ ==============================================================
metric                  ragnb   ragas        ragnb's calls
====================== ======= ============ ==============================================================
context_entity_recall   2       2            entities of the reference; entities of the contexts
context_precision       1       K            one verdict per context id, all contexts in one call
context_recall          1       1            one verdict per reference sentence id
faithfulness            2       2            statements of the response; verdict per statement id
noise_sensitivity       4       2K + 3       statements of response and of reference; response vs
                                             reference; every statement vs every context (ids) at once
response_relevancy      1       N            N distinct questions + the noncommittal flag in one call
====================== ======= ============ ==============================================================

Independent calls of one sample (e.g. the two decompositions) run concurrently.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from ragnb.llm.client import LLMClient, LLMOutputError, LLMTransientError, run_sync
from ragnb.llm.prompts import check_language, prompt
from ragnb.llm.result import AGGREGATIONS, EvaluationResult, ModelScore, evaluate_with_models
from ragnb.metrics.fallback import split_sentences, stem_ru
from ragnb.metrics.registry import register
from ragnb.metrics.stats import aggregate

FAMILY = "llm"
FIELDS = ("user_input", "response", "reference", "retrieved_contexts")
STRATEGIES = ("auto", "reference_based", "response_based")
MODES = ("relevant", "irrelevant")
JUDGE_MODELS_ENV = "RAGNB_JUDGE_MODELS"

# Seed 002 (camelCase), the project's dataset schema and common ragas-v1 column names.
_ALIASES = {
    "userInput": "user_input", "question": "user_input",
    "answer": "response",
    "ground_truth": "reference", "ground_truth_answer": "reference",
    "retrievedContexts": "retrieved_contexts", "contexts": "retrieved_contexts",
}


# --------------------------------------------------------------------------------------------
# Sample
# --------------------------------------------------------------------------------------------


def _is_missing_scalar(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Sample:
    """One single-turn RAG interaction (seed 002's Sample).

    ============================ ========================================================================
    field                        needed by
    ============================ ========================================================================
    ``user_input``               context_precision, context_recall, response_relevancy
                                 (faithfulness and noise_sensitivity use it when present)
    ``response``                 faithfulness, noise_sensitivity, response_relevancy,
                                 context_precision (response_based)
    ``reference``                context_entity_recall, context_recall, noise_sensitivity,
                                 context_precision (reference_based)
    ``retrieved_contexts``       every metric except response_relevancy — in rank order
    ============================ ========================================================================

    A blank string or an empty context list counts as missing; each metric's ``validate`` names the
    missing fields. :meth:`from_dict` also accepts seed 002's camelCase names and ``question`` /
    ``answer`` / ``ground_truth`` / ``contexts``.
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
                f"got {type(ctx).__name__}; wrap a single context as [text]"
            )
        items = tuple(ctx)
        for i, c in enumerate(items):
            if not isinstance(c, str):
                raise ValueError(f"retrieved_contexts[{i}] must be a string, got {type(c).__name__}: {c!r:.80}")
        object.__setattr__(self, "retrieved_contexts", items)

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


def as_sample(sample: Sample | Mapping[str, Any]) -> Sample:
    return sample if isinstance(sample, Sample) else Sample.from_dict(sample)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass
class RagasConfig:
    """Options shared by every metric.

    ``models``: judge model ids (None → the comma-separated ``RAGNB_JUDGE_MODELS`` environment variable);
    ``aggregate``: how per-model scores combine (mean | median | majority); ``language``: "en" or "ru",
    the language of the prompts, of the judge's reasons and of the explanation; ``temperature``,
    ``max_tokens``, ``seed``, ``cache``: passed to every LLM call.
    """

    models: list[str] | None = None
    aggregate: str = "mean"
    language: str = "en"
    temperature: float = 0.0
    max_tokens: int = 2048
    seed: int | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.models, str):
            self.models = [self.models]
        if self.models is not None:
            models = list(self.models)
            if not models or any(not isinstance(m, str) or not m.strip() for m in models):
                raise ValueError(
                    f"models must be a non-empty list of model ids, e.g. ['openai/gpt-4o-mini'], got {self.models!r}")
            self.models = models
        if self.aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate {self.aggregate!r}: use one of {AGGREGATIONS}")
        check_language(self.language)
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2:
            raise ValueError(f"temperature={self.temperature!r} must be a number in [0, 2]")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens!r} must be an integer >= 1")

    def as_dict(self) -> dict[str, Any]:
        """The options as plain values (an encoder object is recorded by its name)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "encoder" and value is not None:
                value = getattr(value, "name", type(value).__name__)
            out[f.name] = list(value) if isinstance(value, list) else value
        return out

    def judge_models(self) -> list[str]:
        if self.models:
            return list(self.models)
        env = [m.strip() for m in os.environ.get(JUDGE_MODELS_ENV, "").split(",") if m.strip()]
        if env:
            return env
        raise ValueError(
            f"no judge model: pass models=['openai/gpt-4o-mini', ...] in the metric config "
            f"or set {JUDGE_MODELS_ENV}=model-a,model-b"
        )


@dataclass
class FaithfulnessConfig(RagasConfig):
    """Faithfulness has only the shared options."""


@dataclass
class ContextRecallConfig(RagasConfig):
    """ContextRecall has only the shared options."""


@dataclass
class ContextEntityRecallConfig(RagasConfig):
    """``match_context_text``: a reference entity also counts as covered when its normalised words occur
    in a row in the contexts' text, even if the judge did not list it among the context entities
    (extraction from long contexts misses entities). False → entity-to-entity matching only (as ragas)."""

    match_context_text: bool = True


@dataclass
class ContextPrecisionConfig(RagasConfig):
    """``strategy``: "reference_based" (judge each context against the reference answer),
    "response_based" (against the response) or "auto" (reference when the sample has one, else response)."""

    strategy: str = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        value = str(self.strategy).strip().lower().replace("-", "_")
        value = {"reference": "reference_based", "response": "response_based"}.get(value, value)
        if value not in STRATEGIES:
            raise ValueError(f"strategy {self.strategy!r}: use one of {STRATEGIES}")
        self.strategy = value


@dataclass
class NoiseSensitivityConfig(RagasConfig):
    """``mode``: "relevant" (errors the response takes from relevant contexts) or "irrelevant"."""

    mode: str = "relevant"

    def __post_init__(self) -> None:
        super().__post_init__()
        value = str(self.mode).strip().lower()
        if value not in MODES:
            raise ValueError(f"mode {self.mode!r}: use one of {MODES}")
        self.mode = value


@dataclass
class ResponseRelevancyConfig(RagasConfig):
    """``number_of_questions``: N questions generated from the response (seed default 3);
    ``encoder``: anything with ``encode(list[str]) -> array`` (None → :func:`ragnb.rag.embeddings.get_encoder`)."""

    number_of_questions: int = 3
    encoder: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        n = self.number_of_questions
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number_of_questions={n!r} must be an integer >= 1 (3–5 is typical)")
        if self.encoder is not None and not callable(getattr(self.encoder, "encode", None)):
            raise ValueError("encoder must have an encode(list_of_texts) method, e.g. ragnb.rag.embeddings.get_encoder()")


# --------------------------------------------------------------------------------------------
# Pure formulas (registered; the LLM pipelines below feed them)
# --------------------------------------------------------------------------------------------


def _binary(verdicts: Sequence[Any], what: str) -> list[int]:
    out = []
    for i, v in enumerate(verdicts):
        if isinstance(v, (bool, np.bool_)) or v in (0, 1):
            out.append(int(v))
        else:
            raise ValueError(f"{what}[{i}]={v!r} must be 0 or 1")
    return out


@register("faithfulness", FAMILY)
def faithfulness_score(verdicts: Sequence[int]) -> float:
    """Faithfulness = |statements of the response supported by the contexts| / |statements|.

    ``verdicts``: one 0/1 per statement the response was decomposed into. No statement → NaN (undefined).
    """
    v = _binary(verdicts, "verdicts")
    return sum(v) / len(v) if v else math.nan


@register("context_recall", FAMILY)
def context_recall_score(verdicts: Sequence[int]) -> float:
    """ContextRecall = |sentences of the reference attributable to the contexts| / |sentences of the reference|.

    ``verdicts``: one 0/1 per reference sentence. No sentence → NaN (undefined).
    """
    v = _binary(verdicts, "verdicts")
    return sum(v) / len(v) if v else math.nan


@register("context_precision", FAMILY)
def average_precision(verdicts: Sequence[int]) -> float:
    """ContextPrecision = AP = Σ_k (precision@k · v_k) / Σ_k v_k, precision@k = (Σ_{i≤k} v_i) / k.

    ``verdicts``: v_k ∈ {0, 1}, usefulness of the context at rank k (1-based). No useful context → 0.0
    (seed 002; ragas gives ≈0 through ε); no context at all → NaN. Example: [1, 0, 1] → (1/1 + 2/3) / 2.
    """
    v = _binary(verdicts, "verdicts")
    if not v:
        return math.nan
    hits, total = 0, 0.0
    for k, rel in enumerate(v, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


_DIGIT_GROUP = re.compile(r"(?<=\d)[ \u00a0\u2009\u202f](?=\d{3}(?!\d))")
_TOKEN = re.compile(r"[^\W_]+")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_ENTITY_STOP = frozenset({"the", "a", "an"})


def _stem_token(tok: str) -> str:
    if tok.isdigit():
        return tok
    if _CYRILLIC.search(tok):
        return stem_ru(tok)
    if tok.endswith("'s"):
        tok = tok[:-2]
    if len(tok) > 4 and tok.endswith("ies"):
        return tok[:-3] + "y"
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
        return tok[:-1]
    return tok


def normalize_entity(text: str) -> tuple[str, ...]:
    """An entity (or any text) as a tuple of crude stems, for matching across word forms.

    NFKC, casefold, ё→е; digit groups joined ("21 196" → "21196"); punctuation and symbols split words
    ("Аполлон-11" → аполлон, 11); English articles dropped; Cyrillic words through
    :func:`ragnb.metrics.fallback.stem_ru` (longest inflectional ending off while ≥ 3 letters stay),
    Latin words lose a plural/possessive "s". Deterministic, no dictionary: "Москвы"/"Москва" → ("москв",),
    "Эйфелевой башни"/"Эйфелева башня" → ("эйфелев", "башн"); suppletive forms and stem alternations stay
    apart, and translations or abbreviations ("США" / "Соединённые Штаты") do not meet.
    """
    t = unicodedata.normalize("NFKC", str(text)).casefold().replace("ё", "е").replace("’", "'")
    t = _DIGIT_GROUP.sub("", t)
    toks = [m.group(0) for m in re.finditer(r"[^\W_]+(?:'s)?", t)]
    return tuple(_stem_token(tok) for tok in toks if tok not in _ENTITY_STOP)


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    if n == 0 or n > len(haystack):
        return False
    first = needle[0]
    return any(haystack[i] == first and tuple(haystack[i:i + n]) == tuple(needle) for i in range(len(haystack) - n + 1))


def match_entities(reference_entities: Sequence[str], context_entities: Sequence[str],
                   context_text: str | None = None) -> list[dict[str, Any]]:
    """For each distinct reference entity (distinct after :func:`normalize_entity`): is it covered?

    Covered when its normalised words equal, or occur in a row inside, a context entity's normalised words
    ("1889" is covered by "1889 году"; "Франция" by "Париж, Франция"), or — with ``context_text`` — inside
    the normalised context text. Returns ``[{"entity", "key", "covered", "by"}]`` with ``by`` = the matching
    context entity, ``"context text"`` or None.
    """
    ctx_keys = [(e, normalize_entity(e)) for e in context_entities]
    text_key = normalize_entity(context_text) if context_text else ()
    out, seen = [], set()
    for ent in reference_entities:
        key = normalize_entity(ent)
        if not key or key in seen:
            continue
        seen.add(key)
        by = next((e for e, k in ctx_keys if k == key), None) or next(
            (e for e, k in ctx_keys if _contains_run(k, key)), None)
        if by is None and _contains_run(text_key, key):
            by = "context text"
        out.append({"entity": ent, "key": " ".join(key), "covered": by is not None, "by": by})
    return out


@register("context_entity_recall", FAMILY)
def entity_recall(reference_entities: Sequence[str], context_entities: Sequence[str],
                  context_text: str | None = None) -> float:
    """ContextEntityRecall = |E_ref ∩ E_ctx| / |E_ref|, over entities normalised by :func:`normalize_entity`.

    E_ref: distinct entities of the reference; a reference entity is in the intersection when a context
    entity (or, with ``context_text``, the contexts' text) covers it — see :func:`match_entities`.
    No reference entity → NaN (undefined).
    """
    matches = match_entities(reference_entities, context_entities, context_text)
    return sum(m["covered"] for m in matches) / len(matches) if matches else math.nan


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


@register("noise_sensitivity_relevant", FAMILY, higher_is_better=False)
def noise_sensitivity_relevant(incorrect, response_support, reference_support) -> float:
    """NoiseSensitivity, relevant mode: |{a : incorrect(a) ∧ supported by a relevant context}| / n (lower is better)."""
    return noise_sensitivity_score(incorrect, response_support, reference_support, "relevant")


@register("noise_sensitivity_irrelevant", FAMILY, higher_is_better=False)
def noise_sensitivity_irrelevant(incorrect, response_support, reference_support) -> float:
    """NoiseSensitivity, irrelevant mode: |{a : incorrect(a) ∧ supported only by irrelevant contexts}| / n
    (lower is better)."""
    return noise_sensitivity_score(incorrect, response_support, reference_support, "irrelevant")


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


@register("response_relevancy", FAMILY)
def response_relevancy_score(question_vec, generated_vecs, noncommittal: bool = False) -> float:
    """ResponseRelevancy = (1/N) Σ_i cos(E(q), E(q_i)) · (1 − noncommittal).

    q: the user's question; q_1..q_N: questions the judge generated from the response; E: the sentence
    encoder. A noncommittal (evasive) response scores 0. No generated question → NaN.
    """
    cos = cosine_to(question_vec, generated_vecs)
    if noncommittal:
        return 0.0
    return float(cos.mean()) if cos.size else math.nan


# --------------------------------------------------------------------------------------------
# Parsing judge replies
# --------------------------------------------------------------------------------------------


def _as_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None


_TRUE = {"1", "yes", "true", "да"}
_FALSE = {"0", "no", "false", "нет"}


def _read_binary(item: Mapping[str, Any]) -> int:
    v = item.get("verdict")
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return int(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return int(v.strip().lower() in _TRUE)
    raise ValueError(f"verdict {v!r} is not 0 or 1")


class _ContextIds:
    """Reads ``{"contexts": [ids]}``; ids outside 1..K are dropped and counted."""

    def __init__(self, n_contexts: int) -> None:
        self.known = set(range(1, n_contexts + 1))
        self.n_unknown = 0

    def __call__(self, item: Mapping[str, Any]) -> frozenset[int]:
        raw = item.get("contexts")
        if not isinstance(raw, list):
            raise ValueError(f'"contexts" must be a list of context ids, got {raw!r:.60}')
        ids = {_as_id(x) for x in raw}
        unknown = {i for i in ids if i not in self.known}
        self.n_unknown += len(unknown)
        return frozenset(ids - unknown)


class _IdParser:
    """``parse`` for :meth:`LLMClient.chat_json`: ``{"verdicts": [{"id": i, ...}]}`` for a fixed list of ids.

    Keeps what earlier replies of the same conversation answered (a later reply replaces an earlier verdict
    for the same id). Entries with an unknown or repeated id are ignored and counted. If an id still lacks a
    valid value, raises ValueError naming it, which makes the client re-ask.
    """

    def __init__(self, ids: Sequence[int], read: Callable[[Mapping[str, Any]], Any], what: str = "statement") -> None:
        self.ids = list(ids)
        self.known = set(self.ids)
        self.read = read
        self.what = what
        self.values: dict[int, Any] = {}
        self.reasons: dict[int, str] = {}
        self.n_extra = 0
        self.first_missing: int | None = None

    def __call__(self, obj: Any) -> dict[int, Any]:
        items = obj.get("verdicts") if isinstance(obj, dict) else obj
        if not isinstance(items, list):
            raise ValueError(f'expected {{"verdicts": [...]}} with one entry per {self.what} id {self.ids}')
        seen: set[int] = set()
        invalid: dict[int, str] = {}
        for item in items:
            ident = _as_id(item.get("id")) if isinstance(item, dict) else None
            if ident is None or ident not in self.known or ident in seen:
                self.n_extra += 1
                continue
            seen.add(ident)
            try:
                value = self.read(item)
            except ValueError as exc:
                invalid[ident] = str(exc)
                continue
            self.values[ident] = value
            reason = item.get("reason")
            if isinstance(reason, str) and reason.strip():
                self.reasons[ident] = reason.strip()
        missing = self.missing
        if self.first_missing is None:
            self.first_missing = len(missing)
        if missing:
            why = "; ".join(f"id {i}: {msg}" for i, msg in invalid.items())
            raise ValueError(
                f"no valid verdict for {self.what} id(s) {missing}{f' ({why})' if why else ''}; "
                f"give exactly one entry for each of the ids {self.ids}"
            )
        return {i: self.values[i] for i in self.ids}

    @property
    def missing(self) -> list[int]:
        return [i for i in self.ids if i not in self.values]

    def counts(self) -> dict[str, int]:
        return {"n_verdicts_missing": len(self.missing), "n_verdicts_extra": self.n_extra,
                "n_verdicts_reasked": self.first_missing or 0}


def _norm_key(text: str) -> str:
    return " ".join(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


def _string_list(obj: Any, key: str) -> list[str]:
    items = obj.get(key) if isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise ValueError(f'expected {{"{key}": ["...", ...]}}')
    out, seen = [], set()
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise ValueError(f"{key}[{i}] must be a string, got {s!r:.60}")
        k = _norm_key(s)
        if k and k not in seen:  # blank or repeated items carry no information
            seen.add(k)
            out.append(s.strip())
    return out


def _parse_statements(obj: Any) -> list[str]:
    return _string_list(obj, "statements")


def _parse_entities(obj: Any) -> list[str]:
    return _string_list(obj, "entities")


class _QuestionsParser:
    """``{"noncommittal": 0|1, "questions": [...]}`` with at least N distinct questions (unless noncommittal)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.n_duplicates = 0

    def __call__(self, obj: Any) -> tuple[bool, list[str]]:
        if not isinstance(obj, dict):
            raise ValueError('expected {"noncommittal": 0 or 1, "questions": [...]}')
        try:
            flag = _read_binary({"verdict": obj.get("noncommittal")})
        except ValueError:
            raise ValueError(f'"noncommittal" must be 0 or 1, got {obj.get("noncommittal")!r:.40}') from None
        raw = obj.get("questions")
        if not isinstance(raw, list) or any(not isinstance(q, str) for q in raw):
            raise ValueError('"questions" must be a list of strings')
        questions = _string_list(raw, "questions")
        self.n_duplicates = sum(1 for q in raw if q.strip()) - len(questions)
        if len(questions) < self.n and not flag:
            raise ValueError(
                f"expected {self.n} distinct questions, got {len(questions)} distinct"
                f"{f' ({self.n_duplicates} repeated)' if self.n_duplicates else ''}; write {self.n} different questions"
            )
        return bool(flag), questions[: self.n]


def _numbered(items: Sequence[str], key: str) -> str:
    """A JSON list with one ``{"id": i, key: text}`` per line (ids from 1)."""
    lines = (json.dumps({"id": i, key: s}, ensure_ascii=False) for i, s in enumerate(items, start=1))
    return "[\n" + ",\n".join(lines) + "\n]"


def _joined_contexts(contexts: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {c.strip()}" for i, c in enumerate(contexts, start=1))


# --------------------------------------------------------------------------------------------
# Explanations (en / ru)
# --------------------------------------------------------------------------------------------

_TEXT = {
    "en": {
        "faithfulness": "{k} of {n} statements in the response are supported by the retrieved contexts.",
        "faithfulness_bad": " Not supported: {items}.",
        "context_recall": "{k} of {n} sentences of the reference can be attributed to the retrieved contexts.",
        "context_recall_bad": " Not attributable: {items}.",
        "context_precision": "Useful contexts (judged against the {against}) at ranks {ranks} of {n}; average precision {score:.3f}.",
        "context_precision_none": "None of the {n} retrieved contexts was judged useful (against the {against}).",
        "reference": "reference", "response": "response",
        "entities": "{k} of {n} entities of the reference are found in the retrieved contexts.",
        "entities_bad": " Missing: {items}.",
        "noise": "{k} of {n} statements in the response are incorrect (not supported by the reference) and come from {kind} contexts ({r} of {c} contexts are relevant).",
        "relevant": "relevant", "irrelevant": "irrelevant",
        "relevancy": "Mean cosine similarity between the question and {n} questions generated from the response: {score:.3f}.",
        "noncommittal": "The response is noncommittal (evasive), so the score is 0.",
    },
    "ru": {
        "faithfulness": "{k} из {n} утверждений ответа подтверждаются найденными контекстами.",
        "faithfulness_bad": " Не подтверждены: {items}.",
        "context_recall": "{k} из {n} предложений эталона можно атрибутировать найденным контекстам.",
        "context_recall_bad": " Не атрибутируются: {items}.",
        "context_precision": "Полезные контексты (по {against}) на позициях {ranks} из {n}; средняя точность {score:.3f}.",
        "context_precision_none": "Ни один из {n} найденных контекстов не признан полезным (по {against}).",
        "reference": "эталону", "response": "ответу",
        "entities": "{k} из {n} сущностей эталона найдены в контекстах.",
        "entities_bad": " Не найдены: {items}.",
        "noise": "{k} из {n} утверждений ответа неверны (не подтверждаются эталоном) и взяты из {kind} контекстов (релевантных контекстов: {r} из {c}).",
        "relevant": "релевантных", "irrelevant": "нерелевантных",
        "relevancy": "Среднее косинусное сходство вопроса и {n} вопросов, сгенерированных по ответу: {score:.3f}.",
        "noncommittal": "Ответ уклончивый, поэтому оценка 0.",
    },
}


def _text(language: str, key: str, **values: Any) -> str:
    return _TEXT[language][key].format(**values)


def _quote_items(rows: Sequence[dict[str, Any]], language: str, limit: int = 5) -> str:
    open_q, close_q, mark = ("«", "»", "№") if language == "ru" else ("\u201c", "\u201d", "#")
    parts = []
    for r in rows[:limit]:
        text = r["statement"] if len(r["statement"]) <= 120 else r["statement"][:117] + "…"
        reason = f" ({r['reason']})" if r.get("reason") else ""
        parts.append(f"{mark}{r['id']} {open_q}{text}{close_q}{reason}")
    if len(rows) > limit:
        parts.append("…")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------
# One judge model running one metric on one sample
# --------------------------------------------------------------------------------------------


async def _gather(*aws: Awaitable[Any]) -> list[Any]:
    """Like asyncio.gather, but waits for every call to finish (so all are counted) before raising."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return list(results)


class _Judge:
    def __init__(self, client: LLMClient, config: RagasConfig, model: str, metric: str) -> None:
        self.client, self.config, self.model, self.metric = client, config, model, metric
        self.requests = 0
        self.details: dict[str, Any] = {}
        self.parsers: list[_IdParser] = []

    async def ask(self, stage: str, template: str, parse: Callable[[Any], Any], **values: Any) -> Any:
        if isinstance(parse, _IdParser):
            self.parsers.append(parse)
        text = prompt(template, self.config.language, **values)
        try:
            parsed, results = await self.client.chat_json(
                [{"role": "user", "content": text}], model=self.model, parse=parse, metric=self.metric,
                temperature=self.config.temperature, max_tokens=self.config.max_tokens, seed=self.config.seed,
                cache=self.config.cache,
            )
        except LLMOutputError as exc:
            self.requests += sum(r.attempts for r in exc.results)
            exc.ragnb_stage = stage  # type: ignore[attr-defined]
            raise
        except LLMTransientError as exc:
            self.requests += int(exc.attempts or 0)
            exc.ragnb_stage = stage  # type: ignore[attr-defined]
            raise
        self.requests += sum(r.attempts for r in results)  # HTTP requests; 0 for cache hits
        return parsed

    def _finish(self) -> dict[str, Any]:
        if self.parsers:
            for key in ("n_verdicts_missing", "n_verdicts_extra", "n_verdicts_reasked"):
                self.details[key] = sum(p.counts()[key] for p in self.parsers)
        return self.details

    def ok(self, score: float, explanation: str) -> ModelScore:
        return ModelScore(self.model, float(score), explanation, "ok", "", self.requests, self._finish())

    def undefined(self, reason: str) -> ModelScore:
        return ModelScore(self.model, math.nan, "", "undefined", reason, self.requests, self._finish())

    def failed(self, exc: Exception) -> ModelScore:
        stage = getattr(exc, "ragnb_stage", "")
        what = exc.reason if isinstance(exc, LLMOutputError) else str(exc)
        reason = f"{stage + ': ' if stage else ''}{type(exc).__name__}: {what}"
        return ModelScore(self.model, math.nan, "", "failed", reason, self.requests, self._finish())


def _merge_details(per_model: Sequence[ModelScore]) -> dict[str, Any]:
    """``per_model`` details, plus every integer count (``n_*``) and the HTTP requests (``llm_requests``,
    cache hits excluded) summed over the models."""
    out: dict[str, Any] = {"llm_requests": sum(m.calls for m in per_model)}
    for m in per_model:
        for key, value in m.details.items():
            if key.startswith("n_") and isinstance(value, int) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    out["per_model"] = {m.model: m.details for m in per_model}
    return out


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


class RagasMetric:
    """Base: validate the sample, run :meth:`_score` for every judge model, combine."""

    name: ClassVar[str]
    config_class: ClassVar[type[RagasConfig]] = RagasConfig
    higher_is_better: ClassVar[bool] = True
    required: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def result_name(self, config: RagasConfig) -> str:
        return self.name

    def make_config(self, config: RagasConfig | Mapping[str, Any] | None = None) -> RagasConfig:
        """The metric's config from None (defaults), a dict of options, or a config object."""
        cls = self.config_class
        if config is None:
            return cls()
        if isinstance(config, Mapping):
            unknown = sorted(set(config) - {f.name for f in fields(cls)})
            if unknown:
                allowed = [f.name for f in fields(cls)]
                raise ValueError(f"unknown option(s) {unknown} for {self.name}; allowed: {allowed}")
            return cls(**config)
        if isinstance(config, cls):
            return config
        if isinstance(config, RagasConfig) and type(config) in (RagasConfig, FaithfulnessConfig, ContextRecallConfig):
            return cls(**{f.name: getattr(config, f.name) for f in fields(RagasConfig)})
        raise ValueError(f"{self.name} takes a {cls.__name__} (or a dict of its options), got {type(config).__name__}")

    def required_fields(self, sample: Sample, config: RagasConfig) -> tuple[str, ...]:
        return self.required

    def validate(self, sample: Sample | Mapping[str, Any],
                 config: RagasConfig | Mapping[str, Any] | None = None) -> Sample:
        """The sample as a :class:`Sample`; ValueError naming the fields this metric needs and lacks."""
        config = self.make_config(config)
        sample = as_sample(sample)
        sample.require(self.required_fields(sample, config), self.result_name(config))
        return sample

    async def _score(self, judge: _Judge, sample: Sample, config: Any) -> ModelScore:
        raise NotImplementedError

    async def evaluate(self, sample: Sample | Mapping[str, Any], client: LLMClient,
                       config: RagasConfig | Mapping[str, Any] | None = None) -> EvaluationResult:
        """Score one sample with every judge model of ``config`` and combine them (see the module table for
        the calls). A model whose output stays unusable or whose endpoint keeps failing is ``failed``; a
        permanent endpoint error (bad key, unknown model) raises."""
        config = self.make_config(config)
        sample = self.validate(sample, config)
        if not isinstance(client, LLMClient):
            raise ValueError("client must be a ragnb.llm.LLMClient, e.g. LLMClient(LLMSettings.from_env())")
        name = self.result_name(config)

        async def one(model: str) -> ModelScore:
            judge = _Judge(client, config, model, name)
            try:
                return await self._score(judge, sample, config)
            except (LLMOutputError, LLMTransientError) as exc:
                return judge.failed(exc)

        result = await evaluate_with_models(name, config.judge_models(), one, config.aggregate)
        result.details = _merge_details(result.model_scores)
        return result

    def evaluate_sync(self, sample: Sample | Mapping[str, Any], client: LLMClient,
                      config: RagasConfig | Mapping[str, Any] | None = None) -> EvaluationResult:
        """:meth:`evaluate` from synchronous code (works inside Jupyter's running loop too)."""
        return run_sync(self.evaluate(sample, client, config))

    def score(self, sample: Sample | Mapping[str, Any], client: LLMClient,
              config: RagasConfig | Mapping[str, Any] | None = None) -> float:
        """Just the score (seed 002's ``singleTurnScore``); NaN when failed or undefined."""
        return self.evaluate_sync(sample, client, config).score


class Faithfulness(RagasMetric):
    """Faithfulness = |statements of the response supported by the retrieved contexts| / |statements|.

    Call 1: the judge decomposes the response into standalone statements (ragnb numbers them 1..n).
    Call 2: a 0/1 verdict for every statement id against all contexts. Higher is better.
    0 statements → NaN, undefined. A statement id still without a verdict after the re-asks → failed.
    Needs ``response`` and ``retrieved_contexts`` (``user_input`` helps resolve references).
    """

    name = "faithfulness"
    config_class = FaithfulnessConfig
    required = ("response", "retrieved_contexts")

    async def _score(self, judge: _Judge, sample: Sample, config: RagasConfig) -> ModelScore:
        statements = await judge.ask("statements of the response", "ragas_statements", _parse_statements,
                                     question=sample.user_input or "-", text=sample.response)
        judge.details["n_statements"] = len(statements)
        if not statements:
            return judge.undefined("the response contains no factual statement to verify")
        ids = list(range(1, len(statements) + 1))
        verdicts = await judge.ask("verdicts", "ragas_nli", _IdParser(ids, _read_binary),
                                   context=_joined_contexts(sample.retrieved_contexts),
                                   statements=_numbered(statements, "statement"))
        parser = judge.parsers[-1]
        rows = [{"id": i, "statement": s, "verdict": verdicts[i], "reason": parser.reasons.get(i, "")}
                for i, s in zip(ids, statements)]
        judge.details["statements"] = rows
        score = faithfulness_score([r["verdict"] for r in rows])
        lang = config.language
        bad = [r for r in rows if not r["verdict"]]
        text = _text(lang, "faithfulness", k=len(rows) - len(bad), n=len(rows))
        if bad:
            text += _text(lang, "faithfulness_bad", items=_quote_items(bad, lang))
        return judge.ok(score, text)


class ContextRecall(RagasMetric):
    """ContextRecall = |sentences of the reference attributable to the retrieved contexts| / |sentences|.

    ragnb splits the reference into sentences itself (:func:`ragnb.metrics.fallback.split_sentences`) and
    numbers them; one call returns a 0/1 verdict per sentence id. Higher is better. A reference without a
    sentence → NaN, undefined. Needs ``user_input``, ``reference`` and ``retrieved_contexts``.
    """

    name = "context_recall"
    config_class = ContextRecallConfig
    required = ("user_input", "reference", "retrieved_contexts")

    async def _score(self, judge: _Judge, sample: Sample, config: RagasConfig) -> ModelScore:
        sentences = split_sentences(sample.reference)
        judge.details["n_statements"] = len(sentences)
        if not sentences:
            return judge.undefined("the reference contains no sentence")
        ids = list(range(1, len(sentences) + 1))
        verdicts = await judge.ask("verdicts", "ragas_context_recall", _IdParser(ids, _read_binary, "sentence"),
                                   question=sample.user_input, context=_joined_contexts(sample.retrieved_contexts),
                                   statements=_numbered(sentences, "sentence"))
        parser = judge.parsers[-1]
        rows = [{"id": i, "statement": s, "verdict": verdicts[i], "reason": parser.reasons.get(i, "")}
                for i, s in zip(ids, sentences)]
        judge.details["sentences"] = rows
        score = context_recall_score([r["verdict"] for r in rows])
        lang = config.language
        bad = [r for r in rows if not r["verdict"]]
        text = _text(lang, "context_recall", k=len(rows) - len(bad), n=len(rows))
        if bad:
            text += _text(lang, "context_recall_bad", items=_quote_items(bad, lang))
        return judge.ok(score, text)


class ContextPrecision(RagasMetric):
    """ContextPrecision = average precision of the retrieved contexts' usefulness, in rank order.

    AP = Σ_k (precision@k · v_k) / Σ_k v_k, precision@k = (Σ_{i≤k} v_i) / k, v_k ∈ {0, 1} the judge's
    verdict "context k was useful in arriving at the answer", where the answer is the reference
    (``strategy="reference_based"``) or the response (``"response_based"``); ``"auto"`` uses the
    reference when present. One call judges every context id. No useful context → 0.0. Higher is better.
    Needs ``user_input``, ``retrieved_contexts`` and the reference or the response.
    """

    name = "context_precision"
    config_class = ContextPrecisionConfig

    @staticmethod
    def resolve_strategy(sample: Sample, config: ContextPrecisionConfig) -> str:
        if config.strategy != "auto":
            return config.strategy
        if not sample.missing(["reference"]):
            return "reference_based"
        if not sample.missing(["response"]):
            return "response_based"
        raise ValueError("context_precision (strategy auto) needs a reference or a response; the sample has neither: "
                         "set Sample(reference=...) or Sample(response=...)")

    def required_fields(self, sample: Sample, config: ContextPrecisionConfig) -> tuple[str, ...]:
        against = "reference" if self.resolve_strategy(sample, config) == "reference_based" else "response"
        return ("user_input", "retrieved_contexts", against)

    async def _score(self, judge: _Judge, sample: Sample, config: ContextPrecisionConfig) -> ModelScore:
        strategy = self.resolve_strategy(sample, config)
        against = "reference" if strategy == "reference_based" else "response"
        contexts = sample.retrieved_contexts
        judge.details.update(strategy=strategy, n_contexts=len(contexts))
        ids = list(range(1, len(contexts) + 1))
        verdicts = await judge.ask("verdicts", "ragas_context_precision", _IdParser(ids, _read_binary, "context"),
                                   question=sample.user_input, answer=getattr(sample, against),
                                   contexts=_numbered(contexts, "context"))
        parser = judge.parsers[-1]
        v = [verdicts[i] for i in ids]
        judge.details["verdicts"] = v
        judge.details["reasons"] = [parser.reasons.get(i, "") for i in ids]
        score = average_precision(v)
        lang = config.language
        ranks = [i for i in ids if verdicts[i]]
        if ranks:
            text = _text(lang, "context_precision", against=_TEXT[lang][against],
                         ranks=", ".join(map(str, ranks)), n=len(ids), score=score)
        else:
            text = _text(lang, "context_precision_none", against=_TEXT[lang][against], n=len(ids))
        return judge.ok(score, text)


class ContextEntityRecall(RagasMetric):
    """ContextEntityRecall = |E_ref ∩ E_ctx| / |E_ref| (higher is better).

    E_ref: distinct entities the judge extracts from the reference (call 1); E_ctx: entities it extracts
    from the retrieved contexts (call 2). Entities are compared after :func:`normalize_entity` (case, ё,
    punctuation, Russian word forms) and a reference entity also counts as covered when it is part of a
    context entity or (``match_context_text``) occurs in the contexts' text — see :func:`match_entities`.
    No reference entity → NaN, undefined. Needs ``reference`` and ``retrieved_contexts``.
    """

    name = "context_entity_recall"
    config_class = ContextEntityRecallConfig
    required = ("reference", "retrieved_contexts")

    async def _score(self, judge: _Judge, sample: Sample, config: ContextEntityRecallConfig) -> ModelScore:
        context_text = "\n\n".join(sample.retrieved_contexts)
        ref_entities, ctx_entities = await _gather(
            judge.ask("entities of the reference", "ragas_entities", _parse_entities, text=sample.reference),
            judge.ask("entities of the contexts", "ragas_entities", _parse_entities, text=context_text),
        )
        matches = match_entities(ref_entities, ctx_entities, context_text if config.match_context_text else None)
        judge.details.update(reference_entities=ref_entities, context_entities=ctx_entities, matches=matches,
                             n_entities=len(matches))
        if not matches:
            return judge.undefined("the judge found no entity in the reference")
        covered = sum(m["covered"] for m in matches)
        score = covered / len(matches)
        lang = config.language
        text = _text(lang, "entities", k=covered, n=len(matches))
        missing = [m["entity"] for m in matches if not m["covered"]]
        if missing:
            text += _text(lang, "entities_bad", items=", ".join(missing[:10]) + (", …" if len(missing) > 10 else ""))
        return judge.ok(score, text)


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
    config_class = NoiseSensitivityConfig
    higher_is_better = False
    required = ("response", "reference", "retrieved_contexts")

    def result_name(self, config: NoiseSensitivityConfig) -> str:
        return f"noise_sensitivity_{config.mode}"

    async def _score(self, judge: _Judge, sample: Sample, config: NoiseSensitivityConfig) -> ModelScore:
        question = sample.user_input or "-"
        resp, ref = await _gather(
            judge.ask("statements of the response", "ragas_statements", _parse_statements,
                      question=question, text=sample.response),
            judge.ask("statements of the reference", "ragas_statements", _parse_statements,
                      question=question, text=sample.reference),
        )
        contexts = sample.retrieved_contexts
        n, m = len(resp), len(ref)
        judge.details.update(mode=config.mode, n_statements=n, n_reference_statements=m, n_contexts=len(contexts))
        if not n:
            return judge.undefined("the response contains no factual statement")
        if not m:
            return judge.undefined("the reference contains no factual statement, so no context can be relevant")
        ctx_reader = _ContextIds(len(contexts))
        try:
            correct, support = await _gather(
                judge.ask("response vs reference", "ragas_nli", _IdParser(range(1, n + 1), _read_binary),
                          context=sample.reference, statements=_numbered(resp, "statement")),
                judge.ask("statements vs contexts", "ragas_noise_attribution",
                          _IdParser(range(1, n + m + 1), ctx_reader),
                          contexts=_numbered(contexts, "context"), statements=_numbered(resp + ref, "statement")),
            )
        finally:
            judge.details["n_context_ids_unknown"] = ctx_reader.n_unknown
        incorrect = [not correct[i] for i in range(1, n + 1)]
        resp_support = [sorted(support[i]) for i in range(1, n + 1)]
        ref_support = [sorted(support[n + j]) for j in range(1, m + 1)]
        relevant, rel, irr = _noise_flags(incorrect, resp_support, ref_support)
        score = noise_sensitivity_score(incorrect, resp_support, ref_support, config.mode)
        judge.details.update(
            relevant_contexts=sorted(relevant),
            statements=[{"id": i, "statement": s, "incorrect": incorrect[i - 1], "contexts": resp_support[i - 1],
                         "relevant_faithful": rel[i - 1], "irrelevant_faithful": irr[i - 1]}
                        for i, s in enumerate(resp, start=1)],
            reference_statements=[{"id": n + j, "statement": s, "contexts": ref_support[j - 1]}
                                  for j, s in enumerate(ref, start=1)],
        )
        flags = rel if config.mode == "relevant" else irr
        k = sum(f and i for f, i in zip(flags, incorrect))
        lang = config.language
        text = _text(lang, "noise", k=k, n=n, kind=_TEXT[lang][config.mode], r=len(relevant), c=len(contexts))
        return judge.ok(score, text)


class ResponseRelevancy(RagasMetric):
    """ResponseRelevancy = (1/N) Σ_i cos(E(q), E(q_i)) · (1 − noncommittal)  (higher is better).

    One call: from the response alone the judge writes N distinct questions it answers (fewer than N
    distinct ones → re-ask) and flags a noncommittal (evasive) response; E is the sentence encoder
    (default all-MiniLM-L6-v2). Noncommittal → 0. Needs ``user_input`` and ``response``.
    """

    name = "response_relevancy"
    config_class = ResponseRelevancyConfig
    required = ("user_input", "response")

    async def _score(self, judge: _Judge, sample: Sample, config: ResponseRelevancyConfig) -> ModelScore:
        parser = _QuestionsParser(config.number_of_questions)
        noncommittal, questions = await judge.ask("questions", "ragas_response_questions", parser,
                                                  response=sample.response, n=config.number_of_questions)
        judge.details.update(noncommittal=noncommittal, questions=questions, n_questions=len(questions),
                             n_duplicates_dropped=parser.n_duplicates)
        lang = config.language
        if questions:
            encoder = config.encoder
            if encoder is None:
                from ragnb.rag.embeddings import get_encoder

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
            return judge.ok(score, _text(lang, "noncommittal"))
        return judge.ok(score, _text(lang, "relevancy", n=len(questions), score=score))


METRICS: dict[str, RagasMetric] = {
    m.name: m for m in (ContextEntityRecall(), ContextPrecision(), ContextRecall(), Faithfulness(),
                        NoiseSensitivity(), ResponseRelevancy())
}


def get_metric(metric: str | RagasMetric) -> RagasMetric:
    """A metric object from its name ("faithfulness", "context_precision", …) or the object itself."""
    if isinstance(metric, RagasMetric):
        return metric
    key = str(metric).strip().lower()
    if key in ("noise_sensitivity_relevant", "noise_sensitivity_irrelevant"):
        key = "noise_sensitivity"
    if key not in METRICS:
        raise ValueError(f"unknown ragas metric {metric!r}; known: {sorted(METRICS)}")
    return METRICS[key]


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------


def _rows(samples: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(index labels, samples, ids) from a DataFrame, a list of Samples/dicts, or one Sample."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(samples, pd.DataFrame):
        records = samples.to_dict(orient="records")
        return list(samples.index), records, [r.get("id") for r in records]
    if isinstance(samples, (Sample, Mapping, str)):
        raise ValueError("samples must be a list of Samples or dicts, or a DataFrame; wrap a single sample as [sample]")
    items = list(samples)
    return list(range(len(items))), items, [s.get("id") if isinstance(s, Mapping) else None for s in items]


async def aevaluate_dataset(metric: str | RagasMetric, samples: Any, client: LLMClient,
                            config: RagasConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                            n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Async :func:`evaluate_dataset`."""
    import pandas as pd

    metric = get_metric(metric)
    config = metric.make_config(config)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r} must be an integer >= 1 (samples scored at once)")
    name = metric.result_name(config)
    models = config.judge_models()
    index, items, ids = _rows(samples)
    if not items:
        raise ValueError("samples is empty: give at least one sample")
    checked, errors = [], []
    for label, item in zip(index, items):
        try:
            checked.append(metric.validate(item, config))
        except ValueError as exc:
            errors.append(f"sample {label!r}: {exc}")
    if errors:  # before any LLM call: nothing is spent on a dataset that cannot be scored
        shown = "\n  ".join(errors[:10])
        more = f"\n  … and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ValueError(f"{len(errors)} of {len(items)} samples cannot be scored by {name}:\n  {shown}{more}")
    sem = asyncio.Semaphore(concurrency)

    async def run(sample: Sample) -> EvaluationResult:
        async with sem:
            return await metric.evaluate(sample, client, config)

    results = await asyncio.gather(*(run(s) for s in checked))
    rows = []
    for label, ident, res in zip(index, ids, results):
        row: dict[str, Any] = {"sample": label}
        if ident is not None:
            row["id"] = ident
        base = res.as_row()
        base.pop("metric")
        row.update({k: v for k, v in base.items() if not k.startswith("score[")})
        row.update({k: v for k, v in res.details.items() if k != "per_model"})
        by_model = {m.model: m.score for m in res.model_scores}
        for model in models:
            row[f"score[{model}]"] = by_model.get(model, math.nan)
        rows.append(row)
    frame = pd.DataFrame(rows)

    summary: dict[str, Any] = {name: aggregate(frame["score"].to_numpy(dtype=float), n_boot=n_boot, seed=seed)}
    for model in models:
        summary[f"{name}[{model}]"] = aggregate(frame[f"score[{model}]"].to_numpy(dtype=float),
                                                n_boot=n_boot, seed=seed)
    summary["judge_backend"] = client.settings.backend_label()
    summary["higher_is_better"] = metric.higher_is_better
    summary["config"] = config.as_dict()
    summary["counts"] = {
        "status": {k: int(v) for k, v in frame["status"].value_counts().items()},
        "llm_requests": int(frame["llm_requests"].sum()),
        **{k: int(frame[k].sum()) for k in ("n_verdicts_missing", "n_verdicts_extra", "n_verdicts_reasked")
           if k in frame},
    }
    return frame, summary


def evaluate_dataset(metric: str | RagasMetric, samples: Any, client: LLMClient,
                     config: RagasConfig | Mapping[str, Any] | None = None, concurrency: int = 16,
                     n_boot: int = 1000, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """Score every sample of a dataset: ``(per-item DataFrame, summary)``.

    All samples are validated first: a ValueError lists every sample that lacks a needed field, before
    any LLM call. At most ``concurrency`` samples are in flight (the client also bounds HTTP requests).

    Per-item frame, one row per sample: ``sample`` (the DataFrame index label or the list position), ``id``
    (when the rows have one), ``score``, ``method``, ``status``, ``reason``, ``explanation``,
    ``duration_s``, the summed counts (``llm_requests``, ``n_statements``, ``n_verdicts_missing``,
    ``n_verdicts_extra``, ``n_verdicts_reasked``, …) and ``score[<model>]`` per judge model.

    Summary (same shape as :func:`ragnb.metrics.nvidia.evaluate_dataset`, so
    :func:`ragnb.metrics.stats.summary_frame` tabulates it): ``{<metric>: aggregate(score),
    "<metric>[<model>]": aggregate of that model's scores, "judge_backend", "higher_is_better", "config",
    "counts": {"status": {ok, failed, undefined}, "llm_requests", verdict counts}}``, aggregates from
    :func:`ragnb.metrics.stats.aggregate` (mean, ci95, n, n_valid, n_failed): failed and undefined samples
    are left out of the mean and counted in ``n_failed``, never dropped.
    """
    return run_sync(aevaluate_dataset(metric, samples, client, config, concurrency, n_boot=n_boot, seed=seed))


__all__ = [
    "METRICS", "ContextEntityRecall", "ContextEntityRecallConfig", "ContextPrecision", "ContextPrecisionConfig",
    "ContextRecall", "ContextRecallConfig", "Faithfulness", "FaithfulnessConfig", "RagasConfig", "NoiseSensitivity",
    "NoiseSensitivityConfig", "RagasMetric", "ResponseRelevancy", "ResponseRelevancyConfig", "Sample",
    "aevaluate_dataset", "as_sample", "average_precision", "context_recall_score", "cosine_to", "entity_recall",
    "evaluate_dataset", "faithfulness_score", "get_metric", "match_entities", "noise_sensitivity_score",
    "normalize_entity", "response_relevancy_score",
]
