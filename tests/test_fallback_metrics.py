"""The offline groundedness chain (see docs/metrics.md, Faithfulness): sentence splitting, word overlap, embedding
faithfulness with the sigmoid, hallucination rate, context utilization — hand counts, the real encoder, and BEGIN human
labels."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from conftest import SHARED
from ragnb.metrics import fallback as fb
from ragnb.metrics import fallback_trust as fbt
from ragnb.metrics.registry import REGISTRY, names

BEGIN = SHARED / "begin_groundedness" / "begin_dev.jsonl.gz"
CONTEXT_EN = "The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris."
PARAPHRASE_EN = "Construction of the Eiffel Tower finished in 1889."
UNRELATED_EN = "Bananas are an excellent source of potassium."


# --------------------------------------------------------------------------- sentence splitting


@pytest.mark.parametrize("text, expected", [
    ("Это важно, т. е. нужно. Потом другое.", ["Это важно, т. е. нужно.", "Потом другое."]),
    ("Это т.е. правда. А это нет!", ["Это т.е. правда.", "А это нет!"]),
    ("Поэт А. С. Пушкин родился в Москве. Он писал стихи.",
     ["Поэт А. С. Пушкин родился в Москве.", "Он писал стихи."]),
    ("Мы купили хлеб, молоко и т. д. Потом ушли.", ["Мы купили хлеб, молоко и т. д.", "Потом ушли."]),
    ("Он живёт в г. Москва. Цена 3.5 руб. Дёшево!", ["Он живёт в г. Москва.", "Цена 3.5 руб.", "Дёшево!"]),
    ("Правда? Да! Ну… посмотрим. Конец", ["Правда?", "Да!", "Ну… посмотрим.", "Конец"]),
    ("Dr. Smith arrived at 3.14 p.m. He left.", ["Dr. Smith arrived at 3.14 p.m.", "He left."]),
    ("Use a tool, e.g. a hammer. Then stop.", ["Use a tool, e.g. a hammer.", "Then stop."]),
    ('He said "Hi." Then he left.', ['He said "Hi."', "Then he left."]),
    ("Wait... then it ended. Really?! Yes.", ["Wait... then it ended.", "Really?!", "Yes."]),
    ("- first item\n- second item\n\n—\n", ["- first item", "- second item"]),
    ("", []),
])
def test_split_sentences(text, expected):
    assert fb.split_sentences(text) == expected


def test_split_sentences_validation():
    with pytest.raises(ValueError, match="text must be a string"):
        fb.split_sentences(None)


# --------------------------------------------------------------------------- words and word overlap


def test_content_words_and_russian_stems():
    assert fb.content_words("The Eiffel Tower is in Paris and it is tall.") == ["eiffel", "tower", "pari", "tall"]
    assert [fb.stem_ru(w) for w in ("столица", "столицы", "столицей", "ёлка", "елки")] == \
        ["столиц", "столиц", "столиц", "елк", "елк"]
    assert fb.stem_ru("дом") == "дом"  # ≥ 3 letters of stem must remain
    assert fb.content_words("Это было в 1889 году", "ru") == ["1889", "год"]


def test_word_overlap_english_hand_count():
    # answer content words {eiffel, tower, pari(s), tall} (the, is, in, and, it = stop-words)
    # context content words {pari(s), eiffel, tower} → 3 of 4 found
    answer, ctx = "The Eiffel Tower is in Paris and it is tall.", ["Paris has the Eiffel Tower."]
    score = fb.word_overlap_faithfulness(answer, ctx)
    assert score == pytest.approx(3 / 4)


def test_word_overlap_russian_hand_count():
    # answer: {столиц(а), росс(ии), москв(а), больш(ой), город} ("это", "очень" = stop-words)
    # context: {москв(а), являе(тся), столиц(ей), росс(ии)} → столиц, росс, москв found: 3 of 5
    answer = "Столица России — Москва, это очень большой город."
    assert fb.word_overlap_faithfulness(answer, ["Москва является столицей России."]) == pytest.approx(3 / 5)
    assert fb.word_overlap_faithfulness(answer, ["Москва является столицей России."], "ru") == pytest.approx(3 / 5)


def test_word_overlap_edge_cases():
    assert math.isnan(fb.word_overlap_faithfulness("It is what it is.", ["anything"]))  # only stop-words
    assert fb.word_overlap_faithfulness("Paris", []) == 0.0
    assert fb.word_overlap_faithfulness("Paris paris PARIS", ["Paris"]) == 1.0  # a set: counted once
    with pytest.raises(ValueError, match="contexts must be a list of strings, got a single string"):
        fb.word_overlap_faithfulness("Paris", "Paris")
    with pytest.raises(ValueError, match="non-strings at positions \\[1\\]"):
        fb.word_overlap_faithfulness("Paris", ["Paris", None])
    with pytest.raises(ValueError, match="answer must be a string"):
        fb.word_overlap_faithfulness(None, ["Paris"])


# --------------------------------------------------------------------------- sigmoid and embedding faithfulness


def test_sigmoid_by_hand():
    assert fb.sigmoid(0.6) == pytest.approx(0.5)
    assert fb.sigmoid(0.8) == pytest.approx(1 / (1 + math.exp(-2.0)))  # slope 10 · (0.8 − 0.6) = 2
    assert fb.sigmoid(0.0) == pytest.approx(1 / (1 + math.exp(6.0)))
    assert fb.sigmoid(0.3, center=0.5, slope=4.0) == pytest.approx(1 / (1 + math.exp(0.8)))


def test_embedding_faithfulness_hand_vectors():
    # answer sentence 1 = [1,0] best-matches context [1,0] (cos 1); sentence 2 = [0,1] best-matches [1,1]
    # (cos 1/√2) → mean 0.853553; σ = 1/(1 + exp(−10·(0.853553 − 0.6)))
    answer = np.array([[1.0, 0.0], [0.0, 1.0]])
    context = np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
    np.testing.assert_allclose(fb.best_match_cosines(answer, context), [1.0, 1 / math.sqrt(2)])
    expected = 1 / (1 + math.exp(-10 * ((1 + 1 / math.sqrt(2)) / 2 - 0.6)))
    assert fb.embedding_faithfulness(answer, context) == pytest.approx(expected)
    with pytest.raises(ValueError, match="differ in dimension"):
        fb.embedding_faithfulness(np.ones((1, 2)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="zero vectors"):
        fb.embedding_faithfulness(np.zeros((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="non-empty"):
        fb.embedding_faithfulness(np.ones((1, 2)), np.ones((0, 2)))


def test_embedding_faithfulness_real_encoder(encoder):
    para = fb.faithfulness_fallback(PARAPHRASE_EN, [CONTEXT_EN], encoder=encoder, method="embedding")
    unrelated = fb.faithfulness_fallback(UNRELATED_EN, [CONTEXT_EN], encoder=encoder, method="embedding")
    assert para["method"] == unrelated["method"] == "embedding"
    assert "embedding" in para["reason"] and "LLM" in para["reason"] and "asked for" in para["reason"]
    # documented calibration: a paraphrase (cos ≈ 0.9) → well above 0.5, unrelated (cos ≈ 0) → near 0
    assert para["score"] > 0.9, para
    assert unrelated["score"] < 0.05, unrelated
    assert para["score"] > unrelated["score"]
    # a mixed answer (one supported, one unsupported sentence) lands in between
    mixed = fb.faithfulness_fallback(f"{PARAPHRASE_EN} {UNRELATED_EN}", [CONTEXT_EN], encoder=encoder,
                                     method="embedding")
    assert unrelated["score"] < mixed["score"] < para["score"]


# --------------------------------------------------------------------------- the chain


def test_faithfulness_chain_methods_and_reasons():
    answer, ctx = "The Eiffel Tower is in Paris and it is tall.", ["Paris has the Eiffel Tower."]
    llm = fb.faithfulness_fallback(answer, ctx, llm_score=0.9)
    assert llm == {"score": 0.9, "method": "llm", "reason": None}
    failed = fb.faithfulness_fallback(answer, ctx, llm_score=math.nan)
    assert failed["method"] == "word_overlap" and failed["score"] == pytest.approx(0.75)
    assert failed["reason"].startswith("LLM judgement failed")
    wo = fb.faithfulness_fallback(answer, ctx)
    assert wo["method"] == "word_overlap" and wo["score"] == pytest.approx(0.75)
    assert "agreement with human labels" in wo["reason"] and "on held-out answer grounding data (BEGIN dev" in wo["reason"]
    assert "claim support" not in wo["reason"]  # the kind these scores are, and no other
    asked = fb.faithfulness_fallback(answer, ctx, method="embedding")  # no encoder to do it with
    assert asked["method"] == "word_overlap" and "no encoder" in asked["reason"]
    with pytest.raises(ValueError, match="method must be one of"):
        fb.faithfulness_fallback(answer, ctx, method="llm")
    blank = fb.faithfulness_fallback("  \n", ctx)
    assert math.isnan(blank["score"]) and "blank answer" in blank["reason"]
    no_ctx = fb.faithfulness_fallback(answer, ["", "  "])
    assert no_ctx["score"] == 0.0 and "no context" in no_ctx["reason"]
    with pytest.raises(ValueError, match="llm_score must be in"):
        fb.faithfulness_fallback(answer, ctx, llm_score=1.5)
    with pytest.raises(ValueError, match="llm_score must be a number"):
        fb.faithfulness_fallback(answer, ctx, llm_score="high")
    with pytest.raises(ValueError, match="language"):
        fb.faithfulness_fallback(answer, ctx, language="xx")


def test_the_chain_uses_the_method_that_agrees_best_with_human_labels(encoder):
    # The stored held-out table (benchmarks/measure_fallback_agreement.py; tests/test_fallback_agreement.py checks
    # it against the data) and the choice agree, and the default chain uses it even with an encoder loaded.
    for kind in ("answer_grounding", "claim_support"):
        by = {r["method"]: r for r in fbt.agreement_rows(kind)}
        assert set(fb.OFFLINE_METHODS) <= set(by)
        assert all(0.5 < r["roc_auc"] <= 1 and 0 < r["balanced_accuracy"] <= 1 and r["n"] > 300 for r in by.values())
    out = fb.faithfulness_fallback(PARAPHRASE_EN, [CONTEXT_EN], encoder=encoder)
    assert out["method"] == fb.OFFLINE_METHOD
    assert out["score"] == fb.word_overlap_faithfulness(PARAPHRASE_EN, [CONTEXT_EN])


def test_hallucination_rate():
    assert fb.hallucination_rate(0.25) == 0.75
    assert fb.hallucination_rate(1) == 0.0
    assert math.isnan(fb.hallucination_rate(math.nan))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        fb.hallucination_rate(1.5)
    with pytest.raises(ValueError, match="must be a number"):
        fb.hallucination_rate(None)


# --------------------------------------------------------------------------- context utilization


def test_context_utilization_contains_hand_count():
    answer = "Paris is the capital of France. It is big. The Eiffel Tower is there."
    ctx = ["Paris is the capital of France. The Eiffel Tower is there, near the river."]
    # sentence 1 equals a context sentence; sentence 3 is a substring of "the eiffel tower is there, near the
    # river"; "it is big" occurs nowhere → 2 of 3
    assert fb.context_utilization(answer, ctx) == pytest.approx(2 / 3)
    # Russian: "москва — столица россии" ⊆ "известно, что москва — столица россии"; second sentence not → 1/2
    ru = fb.context_utilization("Москва — столица России. Там живёт много людей.",
                                ["Известно, что Москва — столица России."])
    assert ru == pytest.approx(1 / 2)


def test_context_utilization_contains_weakness_and_alternatives(encoder):
    # the original "contains" misses a faithful paraphrase entirely; the word-overlap and embedding methods see it
    answer, ctx = "France's capital is Paris.", ["Paris is the capital of France."]
    assert fb.context_utilization(answer, ctx, "contains") == 0.0
    assert fb.context_utilization(answer, ctx, "word_overlap") == 1.0
    assert fb.context_utilization(answer, ctx, "embedding", encoder=encoder) == 1.0
    assert fb.context_utilization(UNRELATED_EN, ctx, "embedding", encoder=encoder) == 0.0


def test_context_utilization_edge_cases():
    assert math.isnan(fb.context_utilization("", ["Paris."]))
    assert fb.context_utilization("Paris.", []) == 0.0
    with pytest.raises(ValueError, match="method must be one of"):
        fb.context_utilization("Paris.", ["Paris."], "jaccard")
    with pytest.raises(ValueError, match="needs an encoder"):
        fb.context_utilization("Paris.", ["Paris."], "embedding")


def test_registry_names():
    assert set(names("groundedness")) >= {"faithfulness_embedding", "faithfulness_word_overlap",
                                          "hallucination_rate", "context_utilization"}
    assert REGISTRY["hallucination_rate"].higher_is_better is False


# --------------------------------------------------------------------------- BEGIN human labels


class _CachedEncoder:
    """Embeds all texts once in one batch; then serves faithfulness_fallback's calls from the cache."""

    def __init__(self, encoder, texts):
        texts = sorted(set(texts))
        self.cache = dict(zip(texts, encoder.encode(texts, batch_size=32)))

    def encode(self, texts):
        return np.stack([self.cache[t] for t in texts])


def _begin_rows():
    if not BEGIN.exists():
        pytest.skip(f"{BEGIN} not available")
    with gzip.open(BEGIN, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [r for r in rows if r["label"] != "generic"]  # generic = neither grounded nor hallucinated


def test_begin_fallback_auc_against_human_labels(encoder):
    from sklearn.metrics import roc_auc_score

    rows = _begin_rows()
    # word overlap is cheap: all non-generic dev rows
    y_all = np.array([r["grounded"] for r in rows])
    wo = np.array([fb.faithfulness_fallback(r["response"], [r["knowledge"]])["score"] for r in rows])
    ok = ~np.isnan(wo)
    auc_wo = roc_auc_score(y_all[ok], wo[ok])
    # embedding: whole knowledge groups (snippets that ≥ 2 generators answered, so context sentences are
    # shared), seeded, until ≥ 160 rows: ~160 rows need only ~400 distinct sentences embedded
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["knowledge"], []).append(r)
    keys = sorted(k for k, v in groups.items() if len(v) >= 2)
    sample: list[dict] = []
    for i in np.random.default_rng(2).permutation(len(keys)):
        sample += groups[keys[i]]
        if len(sample) >= 160:
            break
    y = np.array([r["grounded"] for r in sample])
    cached = _CachedEncoder(encoder, [s for r in sample for t in (r["response"], r["knowledge"])
                                      for s in fb.split_sentences(t)])
    results = [fb.faithfulness_fallback(r["response"], [r["knowledge"]], encoder=cached, method="embedding")
               for r in sample]
    assert {res["method"] for res in results} == {"embedding"}
    emb = np.array([res["score"] for res in results])
    auc_emb = roc_auc_score(y, emb)
    print(f"\nBEGIN dev AUC vs human 'grounded': embedding fallback {auc_emb:.3f} (n={len(sample)}, "
          f"{int(y.sum())} grounded); word overlap {auc_wo:.3f} (n={int(ok.sum())})")
    # measured: embedding 0.866 here (0.80–0.87 over other seeded samples; 0.857 on all 1148 rows),
    # word overlap 0.938; the floors leave room for sampling noise
    assert auc_emb > 0.7
    assert auc_wo > 0.85
    assert np.median(emb[~y]) < 0.5 and np.median(emb[y]) > np.median(emb[~y]) + 0.3
