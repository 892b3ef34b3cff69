"""Reference-based answer metrics that need no LLM (see docs/metrics.md, Text and answer metrics): exact match
and token F1 under two normalisations, each under its own name, and answer recall.

``squad_exact_match``, ``squad_f1`` — SQuAD v1.1's official ``evaluate-v1.1.py``, whatever the language
    :func:`squad_normalize_answer` is the script's ``normalize_answer``: ``str.lower``; every character of
    Python's ``string.punctuation`` (ASCII only) deleted; ``\\b(a|an|the)\\b`` replaced by a space (Python 3's
    Unicode ``\\b``); whitespace runs collapsed. Nothing else: on Russian text «Москва» keeps its guillemets
    (one token ``«москва»``, which does not match ``москва``), "Москва—столица" is one token, ё and е differ.
    These are the numbers published SQuAD-style scores (XQuAD, SberQuAD…) are comparable with (× 100).

``answer_exact_match_unicode``, ``answer_f1_unicode``, ``answer_recall_unicode`` — the same formulas on a
Unicode-aware normalisation (:func:`normalize_answer_unicode`), the meaningful reading on Russian text
    1. Unicode NFKC (full-width and compatibility forms → their plain letters/digits), then ``str.casefold``;
    2. ё → е (Russian text is written both ways; the two spellings are the same word);
    3. punctuation removed: the ASCII ``string.punctuation`` characters are deleted, as SQuAD does ("Levi's" →
       "levis", "state-of-the-art" → "stateoftheart"); every other character of Unicode category P* (« » — …
       ¿ „) becomes a space (Russian "Москва—столица" is two words);
    4. the English articles a / an / the removed as whole words (SQuAD) — for ``language="en"`` and
       ``"auto"``; Russian has no articles, so ``language="ru"`` removes nothing (Cyrillic «а» is a conjunction
       and is never touched);
    5. whitespace runs collapsed; tokens = the whitespace-separated pieces.
    On English ASCII text the tokens equal SQuAD v1.1's (the tests check it), so the two sets differ only where
    the text has non-ASCII letters or punctuation.

Undefined input (both sets): a reference that is empty after normalisation (``""``, ``"The."``) → NaN (nothing
to compare against; aggregates count it in ``n_failed``). There the official script scores F1 0 and EM
1[prediction also empty]; this is the only case where ``squad_*`` differ from it. An empty response with a
non-empty reference scores 0.
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


def squad_normalize_answer(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: white_space_fix(remove_articles(remove_punc(lower(text)))) — lower-case,
    ``string.punctuation`` deleted, ``\\b(a|an|the)\\b`` → space, whitespace collapsed; tokens = ``.split()``."""
    s = "".join(ch for ch in _check(text, "text").lower() if ch not in _ASCII_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def normalize_answer_unicode(text: str, language: str = "auto") -> str:
    """The Unicode-aware normalised answer (module docstring, steps 1–5); tokens = ``.split()`` of it."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    s = unicodedata.normalize("NFKC", _check(text, "text")).casefold().replace("ё", "е")
    s = "".join("" if ch in _ASCII_PUNCT else " " if unicodedata.category(ch).startswith("P") else ch for ch in s)
    if language != "ru":
        s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _squad_tokens(prediction: str, reference: str) -> tuple[list[str], list[str]]:
    return (squad_normalize_answer(_check(prediction, "prediction")).split(),
            squad_normalize_answer(_check(reference, "reference")).split())


def _unicode_tokens(prediction: str, reference: str, language: str) -> tuple[list[str], list[str]]:
    return (normalize_answer_unicode(_check(prediction, "prediction"), language).split(),
            normalize_answer_unicode(_check(reference, "reference"), language).split())


def _exact(p: list[str], r: list[str]) -> float:
    """1[P = R] on normalised tokens; NaN when the reference has none."""
    return math.nan if not r else float(p == r)


def _f1(p: list[str], r: list[str]) -> float:
    """Token F1 of the multisets P and R (SQuAD's ``f1_score``); NaN when the reference has no token."""
    if not r:
        return math.nan
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


@register("squad_exact_match", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def squad_exact_match(prediction: str, reference: str) -> float:
    """SQuAD v1.1 exact match, the official script's: EM = 1[squad_norm(prediction) = squad_norm(reference)]
    (squad_norm = :func:`squad_normalize_answer`, the same on every language). Reference empty after
    normalisation → NaN."""
    return _exact(*_squad_tokens(prediction, reference))


@register("squad_f1", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def squad_f1(prediction: str, reference: str) -> float:
    """SQuAD v1.1 token F1, the official script's: with P, R = the tokens of squad_norm(prediction) and
    squad_norm(reference) (:func:`squad_normalize_answer`) and c = |multiset(P) ∩ multiset(R)|, precision = c / |P|,
    recall = c / |R|, F1 = 2·precision·recall / (precision + recall); c = 0 → 0. Reference empty after
    normalisation → NaN."""
    return _f1(*_squad_tokens(prediction, reference))


@register("answer_exact_match_unicode", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def answer_exact_match_unicode(prediction: str, reference: str, *, language: str = "auto") -> float:
    """EM = 1[tokens(norm(prediction)) = tokens(norm(reference))], norm = :func:`normalize_answer_unicode` (NFKC,
    casefold, ё → е, Unicode punctuation, articles by language). Reference empty after normalisation → NaN."""
    return _exact(*_unicode_tokens(prediction, reference, language))


@register("answer_f1_unicode", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def answer_f1_unicode(prediction: str, reference: str, *, language: str = "auto") -> float:
    """Token F1 on the Unicode-aware normalisation: with c = |multiset(P) ∩ multiset(R)| (P, R = the tokens of
    :func:`normalize_answer_unicode` of prediction and reference), precision = c / |P|, recall = c / |R|,
    F1 = 2·precision·recall / (precision + recall); c = 0 → 0. Reference empty after normalisation → NaN."""
    return _f1(*_unicode_tokens(prediction, reference, language))


@register("answer_recall_unicode", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def answer_recall_unicode(prediction: str, reference: str, *, language: str = "auto") -> float:
    """AR = 1[R occurs in P as a contiguous token sequence] (R, P = the tokens of :func:`normalize_answer_unicode`
    of reference and prediction): the reference answer is contained in the response, whatever else the response
    says. Reference empty after normalisation → NaN."""
    p, r = _unicode_tokens(prediction, reference, language)
    if not r:
        return math.nan
    return float(f" {' '.join(r)} " in f" {' '.join(p)} ")


# Column order of the per-item tables: the Unicode-aware set first (the meaningful one on Russian text), then
# the official SQuAD pair (comparable with published SQuAD-style numbers).
UNICODE_METRICS = {"answer_exact_match_unicode": answer_exact_match_unicode, "answer_f1_unicode": answer_f1_unicode,
                   "answer_recall_unicode": answer_recall_unicode}
SQUAD_METRICS = {"squad_exact_match": squad_exact_match, "squad_f1": squad_f1}
ANSWER_METRICS = {**UNICODE_METRICS, **SQUAD_METRICS}


def answer_scores(prediction: str, reference: str, language: str = "auto") -> dict[str, float]:
    """Every answer metric of one (prediction, reference) pair; ``language`` applies to the Unicode-aware set
    only (the official SQuAD normalisation has no language)."""
    return ({name: fn(prediction, reference, language=language) for name, fn in UNICODE_METRICS.items()}
            | {name: fn(prediction, reference) for name, fn in SQUAD_METRICS.items()})
