"""Exact match, token F1 and answer recall (docs/metrics.md, Text and answer metrics) against SQuAD v1.1's
official evaluation logic, re-implemented here verbatim, and on Russian text with ё/е."""

from __future__ import annotations

import math
import re
import string
from collections import Counter

import pytest

from ragnb.metrics.answer import answer_recall, exact_match, normalize_answer, token_f1
from ragnb.metrics.text import rouge, text_metrics


# --- SQuAD v1.1 evaluate-v1.1.py, the official functions (copied logic, not our code) ---
def squad_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_f1(prediction, ground_truth):
    p, g = squad_normalize(prediction).split(), squad_normalize(ground_truth).split()
    common = Counter(p) & Counter(g)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision, recall = num_same / len(p), num_same / len(g)
    return 2 * precision * recall / (precision + recall)


def squad_em(prediction, ground_truth):
    return squad_normalize(prediction) == squad_normalize(ground_truth)


# SQuAD-style English pairs (ASCII punctuation inside words, articles, repeated tokens, no overlap).
EN_PAIRS = [
    ("The Eiffel Tower", "Eiffel Tower"),
    ("Denver Broncos", "the Denver Broncos!"),
    ("in 1889, by Gustave Eiffel", "Gustave Eiffel"),
    ("Santa Clara, California", "Levi's Stadium in Santa Clara"),
    ("state-of-the-art model", "a state of the art model"),
    ("a river the Seine and a river", "the river Seine"),
    ("Paris", "London"),
    ("An apple a day", "apple"),
    ("  Paris ,  France. ", "paris france"),
]


@pytest.mark.parametrize("pred,ref", EN_PAIRS)
def test_english_matches_the_official_squad_script(pred, ref):
    assert normalize_answer(pred) == squad_normalize(pred)
    assert token_f1(pred, ref) == pytest.approx(squad_f1(pred, ref), abs=1e-15)
    assert exact_match(pred, ref) == float(squad_em(pred, ref))


def test_hand_computed_f1_and_recall():
    # P = [in, 1889, by, gustave, eiffel], R = [gustave, eiffel]: c = 2, precision 2/5, recall 1 → F1 = 4/7.
    assert token_f1("in 1889, by Gustave Eiffel", "Gustave Eiffel") == pytest.approx(4 / 7)
    assert answer_recall("in 1889, by Gustave Eiffel", "Gustave Eiffel") == 1.0
    assert answer_recall("Eiffel, Gustave", "Gustave Eiffel") == 0.0  # contiguous, in order
    assert answer_recall("Parisian cafes", "Paris") == 0.0  # whole tokens, not substrings
    # repeated tokens count as a multiset: P = [the→∅, paris, paris], R = [paris] → c = 1, F1 = 2·½·1/1.5
    assert token_f1("Paris Paris", "Paris") == pytest.approx(2 / 3)


def test_russian_yo_articles_and_unicode():
    assert exact_match("Ёлка, зелёная!", "елка зеленая") == 1.0
    assert exact_match("Москва—столица", "москва столица") == 1.0  # a non-ASCII dash separates words
    assert token_f1("Столица — Москва.", "Москва") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert answer_recall("Ответ: «Алёша Попович».", "Алеша Попович") == 1.0
    # Cyrillic «а» is a conjunction, never an article; Latin articles only outside language="ru".
    assert normalize_answer("а это дом", "ru") == "а это дом"
    assert normalize_answer("The Beatles", "ru") == "the beatles"
    assert normalize_answer("ＰＡＲＩＳ　２０２４") == "paris 2024"  # NFKC: full-width → ASCII


def test_undefined_and_empty():
    for fn in (exact_match, token_f1, answer_recall):
        assert math.isnan(fn("anything", "The."))  # reference empty after normalisation
        assert fn("", "Paris") == 0.0
    with pytest.raises(ValueError, match="reference must be a string"):
        token_f1("x", None)
    with pytest.raises(ValueError, match="language must be one of"):
        normalize_answer("x", "de")


def test_text_metrics_reports_them_next_to_rouge():
    frame, summary = text_metrics(["the Eiffel Tower", "Ёлка"], ["Eiffel Tower", "елка"], semantic=False)
    assert list(frame["answer_exact_match"]) == [1.0, 1.0]
    assert summary["answer_f1"]["mean"] == 1.0 and summary["answer_recall"]["n_valid"] == 2


def test_rouge_treats_yo_and_ye_as_one_letter():
    assert rouge("зелёная ёлка", "Зеленая елка")["rouge1"] == 1.0
    assert rouge("зелёная ёлка", "зеленая елка", language="ru")["rougeL"] == 1.0
