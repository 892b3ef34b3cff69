"""Answer metrics (docs/metrics.md, Text and answer metrics): ``squad_*`` against SQuAD v1.1's official
evaluation script, on every language (hand cases with « » — ё and other Unicode punctuation, the bundled XQuAD
Russian and English answers, RuBQ's Russian answers), and the Unicode-aware ``answer_*_unicode`` set by hand."""

from __future__ import annotations

import gzip
import json
import math
import re
import string
from collections import Counter
from pathlib import Path

import pytest

import ragnb
from ragnb.metrics.answer import (answer_exact_match_unicode, answer_f1_unicode, answer_recall_unicode,
                                  normalize_answer_unicode, squad_exact_match, squad_f1, squad_normalize_answer)
from ragnb.metrics.registry import canonical_name, direction, parse_name
from ragnb.metrics.text import rouge, text_metrics
from conftest import SHARED

XQUAD = Path(ragnb.__file__).parent / "data" / "xquad_ru"
RUBQ = SHARED / "rubq_qa" / "rubq2_dev_questions.jsonl.gz"


# --- SQuAD v1.1 evaluate-v1.1.py: normalize_answer, f1_score, exact_match_score as the official script has them
# (checked against a public copy of the script); the oracle, not our code ---
def official_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def official_f1_score(prediction, ground_truth):
    prediction_tokens = official_normalize_answer(prediction).split()
    ground_truth_tokens = official_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def official_exact_match_score(prediction, ground_truth):
    return (official_normalize_answer(prediction) == official_normalize_answer(ground_truth))


def assert_equals_official(pairs: list[tuple[str, str]]) -> None:
    """squad_* equal the script on every pair whose reference keeps a token (NaN there by convention)."""
    for pred, ref in pairs:
        assert squad_normalize_answer(pred) == official_normalize_answer(pred), pred
        if not official_normalize_answer(ref):
            assert math.isnan(squad_f1(pred, ref)) and math.isnan(squad_exact_match(pred, ref))
            continue
        assert squad_f1(pred, ref) == official_f1_score(pred, ref), (pred, ref)
        assert squad_exact_match(pred, ref) == float(official_exact_match_score(pred, ref)), (pred, ref)


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
# Where the official normalisation and the Unicode-aware one part: guillemets, dashes, ё, Unicode punctuation,
# full-width forms, case mappings lower() and casefold() disagree on, articles next to non-Latin letters.
UNICODE_PAIRS = [
    ("«Москва»", "Москва"),
    ("Москва—столица", "москва столица"),
    ("Столица — Москва.", "Москва"),
    ("Ёлка, зелёная!", "елка зеленая"),
    ("Ответ: «Алёша Попович».", "Алеша Попович"),
    ("„Faust“ … ¿qué?", "faust qué"),
    ("ＰＡＲＩＳ　２０２４", "paris 2024"),
    ("Straße", "STRASSE"),
    ("İstanbul", "istanbul"),
    ("the дом a то", "дом то"),
    ("theдом", "дом"),
    ("а это дом", "это дом"),
    ("The.", "The."),
    ("", "«»"),
    ("–", "—"),
]


@pytest.mark.parametrize("pred,ref", EN_PAIRS + UNICODE_PAIRS)
def test_squad_metrics_equal_the_official_script(pred, ref):
    assert_equals_official([(pred, ref), (ref, pred)])


def test_squad_on_russian_is_the_script_not_a_reading_of_it():
    # hand-computed from the script's steps: only ASCII punctuation goes, so «москва» and москва are two tokens
    assert squad_normalize_answer("«Москва» — столица!") == "«москва» — столица"
    assert squad_exact_match("«Москва»", "Москва") == 0.0
    assert squad_f1("Москва—столица", "москва столица") == 0.0  # one token "москва—столица" against two
    # P = [столица, —, москва], R = [москва]: c = 1, precision 1/3, recall 1 → F1 = 2·(1/3)/(4/3) = 1/2
    assert squad_f1("Столица — Москва.", "Москва") == pytest.approx(0.5)
    assert squad_exact_match("ёлка", "елка") == 0.0
    # the Unicode-aware set reads these as the same answer
    assert answer_exact_match_unicode("«Москва»", "Москва") == 1.0
    assert answer_f1_unicode("Москва—столица", "москва столица") == 1.0
    assert answer_f1_unicode("Столица — Москва.", "Москва") == pytest.approx(2 * 0.5 * 1 / 1.5)


def _xquad() -> tuple[list[dict], dict[str, dict]]:
    with gzip.open(XQUAD / "queries.jsonl.gz", "rt", encoding="utf-8") as f:
        queries = [json.loads(line) for line in f]
    with gzip.open(XQUAD / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        corpus = {d["doc_id"]: d for d in map(json.loads, f)}
    return queries, corpus


def _window(text: str, start: int, end: int, width: int) -> str:
    """The answer with ``width`` characters of its paragraph either side: a long, punctuated prediction."""
    return text[max(0, start - width):end + width]


def test_squad_metrics_equal_the_official_script_on_xquad_russian_and_english():
    queries, corpus = _xquad()
    ru, en, differ = [], [], 0
    for q in queries:
        doc = corpus[q["relevant_doc_ids"][0]]
        for span in q["answer_spans"]:
            start, end = span["answer_start"], span["answer_start"] + len(span["text"])
            for ref in q["answers"]:
                preds = [span["text"], f"«{span['text']}»", _window(doc["text"], start, end, 30),
                         _window(doc["text"], start, end, 80)]
                ru += [(p, ref) for p in preds]
                differ += squad_f1(preds[2], ref) != answer_f1_unicode(preds[2], ref, language="ru")
        for ref in q["answers_en"]:
            at = doc["text_en"].find(ref)
            en += [(ref, ref), (f"the {ref}.", ref)]
            if at >= 0:
                en += [(_window(doc["text_en"], at, at + len(ref), w), ref) for w in (30, 80)]
    assert len(queries) == 612 and len(ru) == 4 * 612 and len(en) > 3 * 612
    assert_equals_official(ru)
    assert_equals_official(en)
    # the two normalisations part on Russian text: 50 of the 612 30-character windows score another F1
    assert differ == 50


@pytest.mark.skipif(not RUBQ.is_file(), reason="../shared/data/rubq_qa is absent (a checkout without shared data)")
def test_squad_metrics_equal_the_official_script_on_rubq_answers():
    with gzip.open(RUBQ, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    pairs = [(r["answer_text"], name) for r in rows for a in r["answers"]
             for name in [a.get("label") or "", *(a.get("wd_names_ru") or []), *(a.get("wp_names") or [])]]
    assert len(pairs) > 1000
    assert_equals_official(pairs)


def test_english_ascii_tokens_are_the_same_under_both_normalisations():
    for pred, ref in EN_PAIRS:
        assert normalize_answer_unicode(pred) == official_normalize_answer(pred)
        assert answer_f1_unicode(pred, ref) == pytest.approx(official_f1_score(pred, ref), abs=1e-15)
        assert answer_exact_match_unicode(pred, ref) == float(official_exact_match_score(pred, ref))


def test_hand_computed_f1_and_recall():
    # P = [in, 1889, by, gustave, eiffel], R = [gustave, eiffel]: c = 2, precision 2/5, recall 1 → F1 = 4/7.
    assert answer_f1_unicode("in 1889, by Gustave Eiffel", "Gustave Eiffel") == pytest.approx(4 / 7)
    assert squad_f1("in 1889, by Gustave Eiffel", "Gustave Eiffel") == pytest.approx(4 / 7)
    assert answer_recall_unicode("in 1889, by Gustave Eiffel", "Gustave Eiffel") == 1.0
    assert answer_recall_unicode("Eiffel, Gustave", "Gustave Eiffel") == 0.0  # contiguous, in order
    assert answer_recall_unicode("Parisian cafes", "Paris") == 0.0  # whole tokens, not substrings
    # repeated tokens count as a multiset: P = [paris, paris], R = [paris] → c = 1, F1 = 2·½·1/1.5
    assert answer_f1_unicode("Paris Paris", "Paris") == pytest.approx(2 / 3)


def test_unicode_set_on_russian_yo_articles_and_unicode():
    assert answer_exact_match_unicode("Ёлка, зелёная!", "елка зеленая") == 1.0
    assert answer_exact_match_unicode("Москва—столица", "москва столица") == 1.0  # a non-ASCII dash separates words
    assert answer_recall_unicode("Ответ: «Алёша Попович».", "Алеша Попович") == 1.0
    # Cyrillic «а» is a conjunction, never an article; Latin articles only outside language="ru".
    assert normalize_answer_unicode("а это дом", "ru") == "а это дом"
    assert normalize_answer_unicode("The Beatles", "ru") == "the beatles"
    assert normalize_answer_unicode("ＰＡＲＩＳ　２０２４") == "paris 2024"  # NFKC: full-width → ASCII


def test_undefined_and_empty():
    for fn in (answer_exact_match_unicode, answer_f1_unicode, answer_recall_unicode, squad_exact_match, squad_f1):
        assert math.isnan(fn("anything", "The."))  # reference empty after normalisation
        assert fn("", "Paris") == 0.0
    # SQuAD deletes the 32 ASCII punctuation characters only: "«" is a token there, and nothing for the Unicode set
    assert squad_f1("", "«") == 0.0 and math.isnan(answer_f1_unicode("", "«"))
    with pytest.raises(ValueError, match="reference must be a string"):
        answer_f1_unicode("x", None)
    with pytest.raises(ValueError, match="reference must be a string"):
        squad_f1("x", None)
    with pytest.raises(ValueError, match="language must be one of"):
        normalize_answer_unicode("x", "de")


def test_names_parse_back_and_say_their_direction():
    for name in ("squad_exact_match", "squad_f1", "answer_exact_match_unicode", "answer_f1_unicode",
                 "answer_recall_unicode"):
        metric, k = parse_name(name)
        assert (canonical_name(metric.name, k), direction(name), direction(f"avg_{name}")) == (name, "higher", "higher")
    for old in ("answer_exact_match", "answer_f1", "answer_recall"):
        assert direction(old) is None  # renamed: the old names are no metric any more


def test_text_metrics_reports_both_sets_next_to_rouge():
    frame, summary = text_metrics(["the Eiffel Tower", "Ёлка", "«Москва»"], ["Eiffel Tower", "елка", "Москва"],
                                  semantic=False)
    assert list(frame["answer_exact_match_unicode"]) == [1.0, 1.0, 1.0]
    assert list(frame["squad_exact_match"]) == [1.0, 0.0, 0.0]
    assert summary["answer_f1_unicode"]["mean"] == 1.0 and summary["answer_recall_unicode"]["n_valid"] == 3
    assert summary["squad_f1"]["mean"] == pytest.approx(1 / 3) and summary["squad_f1"]["n_valid"] == 3


def test_rouge_treats_yo_and_ye_as_one_letter():
    assert rouge("зелёная ёлка", "Зеленая елка")["rouge1"] == 1.0
    assert rouge("зелёная ёлка", "зеленая елка", language="ru")["rougeL"] == 1.0
