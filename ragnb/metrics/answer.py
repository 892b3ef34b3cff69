"""Reference-based answer metrics that need no LLM (see docs/metrics.md, Text and answer metrics): exact match,
token-level F1 and answer recall, the standard scores of short-answer datasets (SQuAD v1.1's evaluation script).

Normalisation (:func:`normalize_answer`), applied to the response and the reference alike
    1. Unicode NFKC (full-width and compatibility forms → their plain letters/digits), then ``str.casefold``;
    2. ё → е (Russian text is written both ways; the two spellings are the same word);
    3. punctuation removed: the ASCII ``string.punctuation`` characters are deleted, as SQuAD does ("Levi's" →
       "levis", "state-of-the-art" → "stateoftheart"); every other character of Unicode category P* (« » — …
       ¿ „) becomes a space (Russian "Москва—столица" is two words);
    4. the English articles a / an / the removed as whole words (SQuAD) — for ``language="en"`` and
       ``"auto"``; Russian has no articles, so ``language="ru"`` removes nothing (Cyrillic «а» is a conjunction
       and is never touched);
    5. whitespace runs collapsed; tokens = the whitespace-separated pieces.
    On English ASCII text the tokens equal SQuAD v1.1's ``normalize_answer(...).split()`` (the tests check it).

Undefined input: a reference that is empty after normalisation (``""``, ``"The."``) → NaN for all three
(nothing to compare against; aggregates count it in ``n_failed``). An empty response with a non-empty
reference scores 0.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter

from ragnb.metrics.registry import register

FAMILY = "text"
LANGUAGES = ("auto", "en", "ru")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)


def _check(value, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}; pass '' for an empty text")
    return value


def normalize_answer(text: str, language: str = "auto") -> str:
    """The normalised answer string (module docstring, steps 1–5); tokens = ``.split()`` of it."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    s = unicodedata.normalize("NFKC", _check(text, "text")).casefold().replace("ё", "е")
    s = "".join("" if ch in _ASCII_PUNCT else " " if unicodedata.category(ch).startswith("P") else ch for ch in s)
    if language != "ru":
        s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _tokens(prediction: str, reference: str, language: str) -> tuple[list[str], list[str]]:
    return (normalize_answer(_check(prediction, "prediction"), language).split(),
            normalize_answer(_check(reference, "reference"), language).split())


@register("answer_exact_match", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def exact_match(prediction: str, reference: str, *, language: str = "auto") -> float:
    """EM = 1[tokens(norm(prediction)) = tokens(norm(reference))] (SQuAD v1.1 exact match; norm =
    :func:`normalize_answer`). Reference empty after normalisation → NaN."""
    p, r = _tokens(prediction, reference, language)
    if not r:
        return math.nan
    return float(p == r)


@register("answer_f1", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def token_f1(prediction: str, reference: str, *, language: str = "auto") -> float:
    """SQuAD v1.1 token F1: with c = |multiset(P) ∩ multiset(R)| (P, R = normalised tokens of prediction and
    reference), precision = c / |P|, recall = c / |R|, F1 = 2·precision·recall / (precision + recall); c = 0 → 0.
    Reference empty after normalisation → NaN."""
    p, r = _tokens(prediction, reference, language)
    if not r:
        return math.nan
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


@register("answer_recall", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def answer_recall(prediction: str, reference: str, *, language: str = "auto") -> float:
    """AR = 1[R occurs in P as a contiguous token sequence] (R, P = normalised tokens of reference and
    prediction): the reference answer is contained in the response, whatever else the response says.
    Reference empty after normalisation → NaN."""
    p, r = _tokens(prediction, reference, language)
    if not r:
        return math.nan
    return float(f" {' '.join(r)} " in f" {' '.join(p)} ")


ANSWER_METRICS = {"answer_exact_match": exact_match, "answer_f1": token_f1, "answer_recall": answer_recall}


def answer_scores(prediction: str, reference: str, language: str = "auto") -> dict[str, float]:
    """All three answer metrics of one (prediction, reference) pair."""
    return {name: fn(prediction, reference, language=language) for name, fn in ANSWER_METRICS.items()}
