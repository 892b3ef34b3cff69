"""Text metrics against rouge-score / sacrebleu on English, hand counts on Russian, hand-made vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu
from rouge_score import rouge_scorer

from ragnb.metrics import text as tm
from ragnb.metrics.registry import REGISTRY, names, parse_name

# Lower-case ASCII words: the default rouge-score tokenizer and ours see the same tokens.
EN_PAIRS = [
    ("the cat sat on the mat", "the cat was sitting on the mat"),
    ("paris is the capital of france", "the capital of france is paris"),
    ("a quick brown fox jumps over the lazy dog", "the quick brown dog jumps over a lazy fox"),
    ("the answer is 42, as the documentation says.", "according to the documentation the answer is 42"),
    ("retrieval augmented generation grounds answers in documents",
     "rag systems ground generated answers in retrieved documents"),
    ("nothing in common here", "completely different words"),
]
RU_PRED = "Москва — столица России"
RU_REF = "Столица России — город Москва"


class FakeEncoder:
    """Maps known texts to fixed vectors (dim 2)."""

    def __init__(self, table):
        self.table, self.dim, self.calls = table, 2, []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([self.table[t] for t in texts], dtype=np.float32)


# --------------------------------------------------------------------------- tokenizer


def test_tokenizer_keeps_every_script():
    tok = tm.UnicodeTokenizer()
    assert tok.tokenize("Café au LAIT, Ёлка и ёж_123!") == ["café", "au", "lait", "елка", "и", "еж", "123"]
    # decomposed "é" (e + U+0301) is NFC-composed first, so it is one token, equal to the composed form
    assert tok.tokenize("Cafe\u0301") == ["café"]
    assert tok.tokenize("Straße") == ["strasse"]  # casefold, not lower


@pytest.mark.parametrize("text", [p for pair in EN_PAIRS for p in pair])
def test_tokenizer_equals_default_on_ascii(text):
    from rouge_score import tokenizers

    assert tm.UnicodeTokenizer().tokenize(text) == tokenizers.DefaultTokenizer().tokenize(text)
    assert (tm.UnicodeTokenizer("en", use_stemmer=True).tokenize(text)
            == tokenizers.DefaultTokenizer(use_stemmer=True).tokenize(text))


def test_stemming_only_for_english():
    with pytest.raises(ValueError, match="language='en'"):
        tm.UnicodeTokenizer("ru", use_stemmer=True)
    with pytest.raises(ValueError, match="language must be one of"):
        tm.UnicodeTokenizer("de")


# --------------------------------------------------------------------------- ROUGE


@pytest.mark.parametrize("pred, ref", EN_PAIRS)
@pytest.mark.parametrize("stem", [False, True])
def test_rouge_equals_rouge_score_on_english(pred, ref, stem):
    peer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=stem).score(ref, pred)
    ours = tm.rouge(pred, ref, language="en" if stem else "auto", use_stemmer=stem)
    for t in ("rouge1", "rouge2", "rougeL"):
        assert ours[t] == pytest.approx(peer[t].fmeasure, abs=1e-12), t


def test_rouge_russian_hand_count_and_the_default_tokenizer_trap():
    # pred tokens: москва столица россии (3); ref tokens: столица россии город москва (4)
    # unigram overlap 3: P = 3/3, R = 3/4, F = 2·1·¾ / (1 + ¾) = 6/7
    # bigrams pred {москва столица, столица россии}, ref {столица россии, россии город, город москва}:
    #   overlap 1: P = 1/2, R = 1/3, F = 2·(1/6)/(5/6) = 2/5
    # LCS = "столица россии" = 2: P = 2/3, R = 2/4, F = 2·(1/3)/(7/6) = 4/7
    ours = tm.rouge(RU_PRED, RU_REF)
    assert ours["rouge1"] == pytest.approx(6 / 7, abs=1e-12)
    assert ours["rouge2"] == pytest.approx(2 / 5, abs=1e-12)
    assert ours["rougeL"] == pytest.approx(4 / 7, abs=1e-12)
    assert tm.rouge1(RU_PRED, RU_REF) == ours["rouge1"]
    assert tm.rouge2(RU_PRED, RU_REF) == ours["rouge2"]
    assert tm.rouge_l(RU_PRED, RU_REF) == ours["rougeL"]
    # the trap: rouge-score's default tokenizer drops Cyrillic, even identical text scores 0
    default = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    assert all(s.fmeasure == 0.0 for s in default.score(RU_REF, RU_PRED).values())
    assert all(s.fmeasure == 0.0 for s in default.score(RU_REF, RU_REF).values())
    assert tm.rouge(RU_REF, RU_REF) == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}


def test_rouge_empty_texts():
    assert tm.rouge("", "a reference") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    assert tm.rouge("— … !", "a reference") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    assert all(math.isnan(v) for v in tm.rouge("a prediction", "  ").values())
    assert all(math.isnan(v) for v in tm.rouge("", "").values())
    # one-word texts have no bigrams: ROUGE-2 is 0 even when identical, as in rouge-score
    assert tm.rouge("Париж", "Париж") == {"rouge1": 1.0, "rouge2": 0.0, "rougeL": 1.0}


def test_rouge_validation():
    with pytest.raises(ValueError, match="prediction must be a string"):
        tm.rouge(None, "x")
    with pytest.raises(ValueError, match="reference must be a string"):
        tm.rouge("x", 3)
    with pytest.raises(ValueError, match="language"):
        tm.rouge("x", "x", language="fr")


# --------------------------------------------------------------------------- BLEU


@pytest.mark.parametrize("pred, ref", EN_PAIRS + [("The Cat sat.", "the cat sat on the mat.")])
def test_sentence_bleu_equals_sacrebleu(pred, ref):
    assert tm.bleu(pred, ref) == pytest.approx(sacrebleu.sentence_bleu(pred, [ref]).score, abs=1e-12)
    assert tm.bleu(pred, ref, lowercase=True) == pytest.approx(
        sacrebleu.sentence_bleu(pred, [ref], lowercase=True).score, abs=1e-12)


def test_bleu_cyrillic_and_edge_cases():
    assert tm.bleu(RU_REF, RU_REF) == pytest.approx(100.0)
    assert tm.bleu("Москва", "москва") == pytest.approx(0.0)  # case-sensitive by default, as sacrebleu
    assert tm.bleu("Москва", "москва", lowercase=True) == pytest.approx(100.0)
    assert tm.bleu("", "a reference") == 0.0
    assert math.isnan(tm.bleu("a prediction", " "))
    with pytest.raises(ValueError, match="prediction"):
        tm.bleu(None, "x")


def test_corpus_bleu_with_no_reference_at_all_is_nan_in_a_fresh_scorer():
    """A dataset whose items have no reference answer (from-real-questions on a log without answers): NaN and
    counted, even before any corpus was scored (sacrebleu's signature needs one; the scorer is cached)."""
    tm._bleu.cache_clear()
    out = tm.corpus_bleu(["a b c", "d e"], ["", " "])
    assert math.isnan(out["score"]) and (out["n"], out["n_used"], out["n_blank_reference"]) == (2, 0, 2)
    assert out["signature"] is None
    frame, summary = tm.text_metrics(["a b c", "d e"], ["", ""], semantic=False)
    assert math.isnan(summary["corpus_bleu"]["score"]) and frame["bleu"].isna().all()


def test_corpus_bleu_equals_sacrebleu_and_differs_from_mean_sentence_bleu():
    preds = [p for p, _ in EN_PAIRS]
    refs = [r for _, r in EN_PAIRS]
    out = tm.corpus_bleu(preds, refs)
    assert out["score"] == pytest.approx(sacrebleu.corpus_bleu(preds, [refs]).score, abs=1e-12)
    assert out["n"] == out["n_used"] == len(preds) and out["n_blank_reference"] == 0
    assert "tok:13a" in out["signature"]
    mean_sentence = np.mean([tm.bleu(p, r) for p, r in zip(preds, refs)])
    assert out["score"] != pytest.approx(mean_sentence, abs=0.1)  # pooled counts ≠ mean of sentence scores
    # blank references are left out and counted
    out2 = tm.corpus_bleu(preds + ["extra"], refs + [""])
    assert out2["score"] == pytest.approx(out["score"]) and out2["n_blank_reference"] == 1 and out2["n"] == 7
    assert math.isnan(tm.corpus_bleu(["x"], [""])["score"])
    with pytest.raises(ValueError, match="same length"):
        tm.corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="predictions must hold strings"):
        tm.corpus_bleu(["a", None], ["a", "b"])


# --------------------------------------------------------------------------- embedding similarity


def test_semantic_similarity_by_hand():
    a = np.array([[1.0, 0.0], [3.0, 4.0], [0.0, 0.0]])
    b = np.array([[1.0, 1.0], [4.0, 3.0], [1.0, 0.0]])
    cos = tm.semantic_similarity(a, b, "cosine")
    assert cos[0] == pytest.approx(1 / math.sqrt(2)) and cos[1] == pytest.approx(24 / 25)
    assert math.isnan(cos[2])  # zero vector: angle undefined
    np.testing.assert_allclose(tm.semantic_similarity(a, b, "dot"), [1.0, 24.0, 0.0])
    np.testing.assert_allclose(tm.semantic_similarity(a, b, "euclidean"), [1.0, math.sqrt(2), 1.0])
    assert tm.cosine_similarity([1, 0], [0, 1]) == 0.0
    assert tm.dot_similarity([1, 2], [3, 4]) == 11.0
    assert tm.euclidean_distance([0, 0], [3, 4]) == 5.0


def test_semantic_similarity_validation():
    with pytest.raises(ValueError, match="same shape"):
        tm.semantic_similarity(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="measure"):
        tm.semantic_similarity(np.ones((1, 2)), np.ones((1, 2)), "manhattan")
    with pytest.raises(ValueError, match="NaN"):
        tm.semantic_similarity([[np.nan, 1.0]], [[1.0, 1.0]])
    with pytest.raises(ValueError, match="numeric"):
        tm.semantic_similarity([["a", "b"]], [[1.0, 1.0]])


def test_embed_similarity_with_fake_encoder_skips_blank_texts():
    enc = FakeEncoder({"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [3.0, 4.0], "d": [4.0, 3.0]})
    frame = tm.embed_similarity(["a", "c", ""], ["b", "d", "a"], enc)
    assert list(frame.columns) == ["semantic_similarity", "dot_similarity", "euclidean_distance"]
    np.testing.assert_allclose(frame["semantic_similarity"][:2], [1 / math.sqrt(2), 24 / 25], rtol=1e-6)
    np.testing.assert_allclose(frame["dot_similarity"][:2], [1.0, 24.0], rtol=1e-6)
    np.testing.assert_allclose(frame["euclidean_distance"][:2], [1.0, math.sqrt(2)], rtol=1e-6)
    assert frame.iloc[2].isna().all()
    assert enc.calls == [["a", "c", "b", "d"]]  # one batch, blank pair not embedded


def test_embed_similarity_real_encoder(encoder):
    frame = tm.embed_similarity(
        ["Paris is the capital of France.", "Paris is the capital of France."],
        ["The capital of France is Paris.", "Bananas are rich in potassium."], encoder, measures=["cosine"])
    para, unrelated = frame["semantic_similarity"]
    assert para > 0.9 and unrelated < 0.2


# --------------------------------------------------------------------------- repeated generations


def test_exact_match_rate_by_hand():
    runs = ["Paris.", "paris.", "  Paris.\n", "Lyon."]
    # first = "paris."; runs 2 and 3 match after case/whitespace normalisation, run 4 does not → 2/3
    assert tm.exact_match_rate(runs) == pytest.approx(2 / 3)
    assert tm.exact_match_rate(runs, normalize=False) == 0.0
    assert tm.exact_match_rate(["Ответ  ДА", "ответ да"]) == 1.0
    assert math.isnan(tm.exact_match_rate(["only one"]))
    assert math.isnan(tm.exact_match_rate([]))
    with pytest.raises(ValueError, match="responses must be a list"):
        tm.exact_match_rate("Paris")
    with pytest.raises(ValueError, match="non-strings at positions \\[1\\]"):
        tm.exact_match_rate(["a", None])


def test_semantic_consistency_by_hand():
    # pairs: cos(e1,e2) = 0, cos(e1,e3) = 1/√2, cos(e2,e3) = 1/√2 → mean = √2/3
    assert tm.semantic_consistency([[1, 0], [0, 1], [1, 1]]) == pytest.approx(math.sqrt(2) / 3)
    assert tm.semantic_consistency([[1, 2], [2, 4]]) == pytest.approx(1.0)
    assert math.isnan(tm.semantic_consistency(np.ones((1, 3))))
    with pytest.raises(ValueError, match="R × D"):
        tm.semantic_consistency([1.0, 2.0])


def test_response_consistency_reasons():
    enc = FakeEncoder({"x": [1.0, 0.0], "X ": [1.0, 0.0], "y": [0.0, 1.0]})
    out = tm.response_consistency(["x", "X ", "y"], enc)
    assert out["n_runs"] == 3 and out["reason"] is None
    assert out["response_exact_match_rate"] == pytest.approx(0.5)
    assert out["response_semantic_consistency"] == pytest.approx(1 / 3)  # cos 1, 0, 0
    one = tm.response_consistency(["x"], enc)
    assert math.isnan(one["response_exact_match_rate"]) and "at least 2" in one["reason"]
    no_enc = tm.response_consistency(["x", "x"], encoder=False)
    assert no_enc["response_exact_match_rate"] == 1.0 and math.isnan(no_enc["response_semantic_consistency"])


# --------------------------------------------------------------------------- dataset level and registry


def test_text_metrics_frame_and_summary():
    enc = FakeEncoder({"the cat sat": [1.0, 0.0], "the cat sat down": [1.0, 1.0],
                       RU_PRED: [3.0, 4.0], RU_REF: [4.0, 3.0]})
    preds, refs = ["the cat sat", RU_PRED, ""], ["the cat sat down", RU_REF, "the cat sat"]
    frame, summary = tm.text_metrics(preds, refs, encoder=enc)
    assert list(frame.columns) == ["rouge1", "rouge2", "rougeL", "bleu", "answer_exact_match_unicode",
                                   "answer_f1_unicode", "answer_recall_unicode", "squad_exact_match", "squad_f1",
                                   "semantic_similarity", "dot_similarity", "euclidean_distance"]
    assert frame["rouge1"].tolist() == pytest.approx([6 / 7, 6 / 7, 0.0])  # "the cat sat"/"… down": 3/3, 3/4
    assert summary["rouge1"]["mean"] == pytest.approx(4 / 7) and summary["rouge1"]["n_failed"] == 0
    assert summary["semantic_similarity"]["n_valid"] == 2 and summary["semantic_similarity"]["n_failed"] == 1
    assert summary["bleu"]["mean"] == pytest.approx(np.mean([tm.bleu(p, r) for p, r in zip(preds, refs)]))
    assert summary["corpus_bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(preds, [refs]).score)
    frame2, summary2 = tm.text_metrics(["a"], ["a"], semantic=False)
    assert list(frame2.columns) == ["rouge1", "rouge2", "rougeL", "bleu", "answer_exact_match_unicode",
                                    "answer_f1_unicode", "answer_recall_unicode", "squad_exact_match", "squad_f1"]


def test_registry_names():
    assert set(names("text")) == {"rouge1", "rouge2", "rougel", "bleu", "semantic_similarity", "dot_similarity",
                                  "euclidean_distance", "response_exact_match_rate",
                                  "response_semantic_consistency", "corpus_bleu", "answer_exact_match_unicode",
                                  "answer_f1_unicode", "answer_recall_unicode", "squad_exact_match", "squad_f1"}
    metric, k = parse_name("rougel")
    assert metric.fn is tm.rouge_l and k is None
    assert REGISTRY["euclidean_distance"].higher_is_better is False
    assert "LCS" in REGISTRY["rouge1"].doc or "unigram" in REGISTRY["rouge1"].doc
