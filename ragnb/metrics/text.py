"""Lexical and semantic answer metrics (see docs/metrics.md, Text and answer metrics): ROUGE, BLEU, embedding
similarity, and the repeat-run stability of a response (``consistency_runs``).

Tokenisation (ROUGE)
    rouge-score's default tokenizer keeps only ``[a-z0-9]`` after lower-casing: identical
    Russian sentences score 0, "Café" becomes "caf". :class:`UnicodeTokenizer` replaces it: NFC
    normalisation, ``str.casefold``, tokens = maximal runs of Unicode letters/digits (``[^\\W_]+``:
    Latin, Cyrillic, accented letters, digits; underscores and punctuation split), ё → е (Russian text
    is written both ways: "ёлка" and "елка" are one token). On lower-case ASCII
    text it produces exactly the default tokenizer's tokens, so scores equal rouge-score's there.
    Stemming: Porter only for ``language="en"`` with ``use_stemmer=True`` (as rouge-score, tokens longer
    than 3 characters). Russian gets no stemming: there is no stemmer among our dependencies, and a crude
    one would silently make ROUGE incomparable with published numbers. Word forms ("столица"/"столицы")
    therefore count as different tokens — the standard, conservative reading of ROUGE.

Empty texts (after tokenisation / stripping)
    * reference empty → NaN for ROUGE, BLEU and the embedding measures: there is nothing to compare
      against (a dataset problem); aggregates count it in ``n_failed``.
    * prediction empty, reference not → ROUGE 0, BLEU 0 (the system said nothing). The embedding
      measures give NaN: an empty string has no meaning to embed.
    * ROUGE-2 of a one-word reference is 0 even for an identical prediction (no bigrams), as in rouge-score.

BLEU is sacrebleu's (0–100, case-sensitive, ``13a`` tokenizer by default). ``bleu`` is *sentence* BLEU
(``effective_order=True``, exp smoothing — sacrebleu's sentence-level setting); the per-item mean of it is
what ``avg_bleu`` reports. ``corpus_bleu`` pools n-gram counts over the whole dataset (the number MT papers
report); the two differ and are reported under separate names.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragnb.metrics.answer import ANSWER_METRICS, answer_scores
from ragnb.metrics.registry import register
from ragnb.metrics.vector_rows import as_vector_rows
from ragnb.metrics.stats import aggregate

FAMILY = "text"
LANGUAGES = ("auto", "en", "ru")
MEASURES = ("cosine", "dot", "euclidean")
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


# --------------------------------------------------------------------------- validation


def _check_text(value, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}; pass '' for an empty text")
    return value


def _check_texts(values, field: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValueError(f"{field} must be a list of strings, got {type(values).__name__}")
    bad = [i for i, v in enumerate(values) if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{field} must hold strings only; non-strings at positions {bad[:20]} "
                         f"(e.g. {type(values[bad[0]]).__name__}); replace missing texts with ''")
    return list(values)


def _check_pairs(predictions, references) -> tuple[list[str], list[str]]:
    p, r = _check_texts(predictions, "predictions"), _check_texts(references, "references")
    if len(p) != len(r):
        raise ValueError(f"predictions and references must have the same length, got {len(p)} and {len(r)}")
    return p, r


def _check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return language


# --------------------------------------------------------------------------- tokenizer


class UnicodeTokenizer:
    """rouge-score tokenizer (``RougeScorer(..., tokenizer=UnicodeTokenizer())``) that keeps every script.

    tokens(text) = ``[^\\W_]+`` runs of casefold(NFC(text)) with ё → е; Porter-stemmed (tokens of > 3
    characters, as rouge-score) only when ``language="en"`` and ``use_stemmer=True``.
    """

    def __init__(self, language: str = "auto", use_stemmer: bool = False):
        self.language = _check_language(language)
        if use_stemmer and language != "en":
            raise ValueError("use_stemmer=True needs language='en' (Porter is an English stemmer); "
                             "Russian and auto-detected text are scored on unstemmed word forms")
        self.use_stemmer = bool(use_stemmer)
        self._stemmer = None
        if self.use_stemmer:
            from nltk.stem import porter

            self._stemmer = porter.PorterStemmer()

    def tokenize(self, text: str) -> list[str]:
        # ё → е: Russian text is written both ways, and the two spellings are one word.
        tokens = _WORD.findall(unicodedata.normalize("NFC", text).casefold().replace("ё", "е"))
        if self._stemmer is not None:
            tokens = [self._stemmer.stem(t) if len(t) > 3 else t for t in tokens]
        return tokens


@functools.lru_cache(maxsize=8)
def _scorer(language: str, use_stemmer: bool):
    from rouge_score import rouge_scorer

    tok = UnicodeTokenizer(language, use_stemmer)
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=tok), tok


# --------------------------------------------------------------------------- ROUGE


def rouge(prediction: str, reference: str, *, language: str = "auto", use_stemmer: bool = False) -> dict[str, float]:
    """ROUGE-1/2/L F-measures of ``prediction`` against ``reference`` (rouge-score, Unicode tokens).

    ROUGE-N: P = Σ_g min(c_H(g), c_R(g)) / Σ_g c_H(g), R = the same overlap / Σ_g c_R(g) over n-grams g;
    ROUGE-L: P = LCS(H, R)/|H|, R = LCS(H, R)/|R|; F = 2PR/(P + R) (0 when P + R = 0).
    Reference without tokens → NaN for all three; prediction without tokens → 0.
    """
    prediction, reference = _check_text(prediction, "prediction"), _check_text(reference, "reference")
    scorer, tokenizer = _scorer(_check_language(language), bool(use_stemmer))
    if not tokenizer.tokenize(reference):
        return {t: math.nan for t in ROUGE_TYPES}
    scores = scorer.score(reference, prediction)  # rouge-score's order: (target, prediction)
    return {t: float(scores[t].fmeasure) for t in ROUGE_TYPES}


@register("rouge1", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def rouge1(prediction: str, reference: str, *, language: str = "auto", use_stemmer: bool = False) -> float:
    """ROUGE-1 F over unigrams g: F = 2PR / (P + R), P = Σ_g min(c_H(g), c_R(g)) / Σ_g c_H(g),
    R = Σ_g min(c_H(g), c_R(g)) / Σ_g c_R(g) (see :func:`rouge`), 0–1."""
    return rouge(prediction, reference, language=language, use_stemmer=use_stemmer)["rouge1"]


@register("rouge2", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def rouge2(prediction: str, reference: str, *, language: str = "auto", use_stemmer: bool = False) -> float:
    """ROUGE-2 F: F = 2PR / (P + R) with P and R the clipped bigram overlap over the prediction's and the
    reference's bigrams (see :func:`rouge`), 0–1."""
    return rouge(prediction, reference, language=language, use_stemmer=use_stemmer)["rouge2"]


# Registry names are lower-case (``registry._NAME``), hence "rougel"; the dict key stays rouge-score's "rougeL".
@register("rougel", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def rouge_l(prediction: str, reference: str, *, language: str = "auto", use_stemmer: bool = False) -> float:
    """ROUGE-L F: F = 2PR / (P + R), P = LCS(H, R) / |H|, R = LCS(H, R) / |R| (longest common subsequence of
    the token lists; see :func:`rouge`), 0–1."""
    return rouge(prediction, reference, language=language, use_stemmer=use_stemmer)["rougeL"]


# --------------------------------------------------------------------------- BLEU


@functools.lru_cache(maxsize=8)
def _bleu(sentence: bool, lowercase: bool, tokenize: str | None):
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=sentence, lowercase=lowercase, tokenize=tokenize)


@register("bleu", FAMILY, kind="text", value_range=(0.0, 100.0), higher_is_better=True)
def bleu(prediction: str, reference: str, *, lowercase: bool = False, tokenize: str | None = None) -> float:
    """Sentence BLEU, 0–100: sacrebleu ``BLEU(effective_order=True).sentence_score(prediction, [reference])``.

    BLEU = BP · exp(Σ_{n≤4} w_n log p_n), p_n = clipped n-gram precision (exp-smoothed), effective order
    (orders without hypothesis n-grams are left out), BP = 1 if c > r else exp(1 − r/c).
    Case-sensitive unless ``lowercase``; ``tokenize`` is a sacrebleu tokenizer name (default ``13a``).
    Blank reference → NaN; blank prediction → 0.
    """
    prediction, reference = _check_text(prediction, "prediction"), _check_text(reference, "reference")
    if not reference.strip():
        return math.nan
    return float(_bleu(True, bool(lowercase), tokenize).sentence_score(prediction, [reference]).score)


def corpus_bleu(predictions: Sequence[str], references: Sequence[str], *, lowercase: bool = False,
                tokenize: str | None = None) -> dict:
    """Corpus BLEU with its counts (the score is :func:`corpus_bleu_score`'s).

    Returns ``{score, n, n_used, n_blank_reference, signature}`` (signature = sacrebleu's, for
    reproducibility; None with no usable pair); pairs with a blank reference are left out and counted.
    """
    p, r = _check_pairs(predictions, references)
    keep = [i for i, ref in enumerate(r) if ref.strip()]
    scorer = _bleu(False, bool(lowercase), tokenize)
    if not keep:  # sacrebleu's signature needs a scored corpus: with no usable pair there is neither
        return {"score": math.nan, "n": len(p), "n_used": 0, "n_blank_reference": len(p), "signature": None}
    score = float(scorer.corpus_score([p[i] for i in keep], [[r[i] for i in keep]]).score)
    return {"score": score, "n": len(p), "n_used": len(keep), "n_blank_reference": len(p) - len(keep),
            "signature": str(scorer.get_signature())}


@register("corpus_bleu", FAMILY, kind="text", value_range=(0.0, 100.0), higher_is_better=True)
def corpus_bleu_score(predictions: Sequence[str], references: Sequence[str], *, lowercase: bool = False,
                      tokenize: str | None = None) -> float:
    """Corpus BLEU, 0–100: sacrebleu ``BLEU().corpus_score(predictions, [references])``.

    BLEU = BP · exp(Σ_{n≤4} ¼ log p_n) with p_n = Σ_pairs clipped n-gram matches / Σ_pairs hypothesis n-grams
    and BP = 1 if c > r else exp(1 − r/c), c and r the summed hypothesis and reference lengths: counts are
    pooled over the pairs first, so this is *not* the mean of sentence BLEU. Pairs with a blank reference
    are left out; NaN when no pair is usable.
    """
    return corpus_bleu(predictions, references, lowercase=lowercase, tokenize=tokenize)["score"]


# --------------------------------------------------------------------------- embedding similarity


def _cosine_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """cos(a_i, b_i); NaN where either vector is zero (the angle is undefined)."""
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.einsum("ij,ij->i", A, B) / (na * nb)
    c[(na == 0) | (nb == 0)] = math.nan
    return np.clip(c, -1.0, 1.0)


def semantic_similarity(a_vecs, b_vecs, measure: str = "cosine") -> np.ndarray:
    """Row-wise similarity of two N × D embedding matrices (a 1-D vector counts as one row).

    cosine:    a·b / (‖a‖ ‖b‖) ∈ [−1, 1] (NaN if a vector is zero)
    dot:       a·b
    euclidean: ‖a − b‖₂ (a distance: lower = closer)
    On L2-normalised embeddings (the default all-MiniLM-L6-v2 normalises) dot = cosine and
    euclidean = √(2 − 2·cosine).
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    A, B = as_vector_rows(a_vecs, "a_vecs"), as_vector_rows(b_vecs, "b_vecs")
    if A.shape != B.shape:
        raise ValueError(f"a_vecs and b_vecs must have the same shape, got {A.shape} and {B.shape}")
    if measure == "cosine":
        return _cosine_rows(A, B)
    if measure == "dot":
        return np.einsum("ij,ij->i", A, B)
    return np.linalg.norm(A - B, axis=1)


@register("semantic_similarity", FAMILY, kind="vectors", value_range=(-1.0, 1.0), higher_is_better=True)
def cosine_similarity(a_vec, b_vec) -> float:
    """cos(e_sys, e_gt) = e_sys·e_gt / (‖e_sys‖ ‖e_gt‖), −1…1 (see docs/metrics.md, Text and answer metrics)."""
    return float(semantic_similarity(a_vec, b_vec, "cosine")[0])


@register("dot_similarity", FAMILY, kind="vectors", value_range=(-math.inf, math.inf), higher_is_better=True)
def dot_similarity(a_vec, b_vec) -> float:
    """e_sys · e_gt (equals cosine on normalised embeddings)."""
    return float(semantic_similarity(a_vec, b_vec, "dot")[0])


@register("euclidean_distance", FAMILY, kind="vectors", value_range=(0.0, math.inf), higher_is_better=False)
def euclidean_distance(a_vec, b_vec) -> float:
    """‖e_sys − e_gt‖₂; lower = closer."""
    return float(semantic_similarity(a_vec, b_vec, "euclidean")[0])


def embed_similarity(predictions: Sequence[str], references: Sequence[str], encoder=None,
                     measures: Sequence[str] = MEASURES) -> pd.DataFrame:
    """Embed both lists with ``encoder`` (e.g. :func:`ragnb.embeddings.models.get_encoder`) and score each pair.

    Returns one column per measure (``semantic_similarity``, ``dot_similarity``, ``euclidean_distance``).
    Pairs where either text is blank are NaN and are not embedded.
    """
    p, r = _check_pairs(predictions, references)
    bad = [m for m in measures if m not in MEASURES]
    if bad:
        raise ValueError(f"measures must be among {MEASURES}, got {bad}")
    if encoder is None:
        raise ValueError("embed_similarity needs an encoder (e.g. ragnb.embeddings.models.get_encoder()); "
                         "pass semantic=False to text_metrics to skip the embedding measures")
    ok = np.array([bool(a.strip()) and bool(b.strip()) for a, b in zip(p, r)], dtype=bool)
    idx = np.flatnonzero(ok)
    cols = {"cosine": "semantic_similarity", "dot": "dot_similarity", "euclidean": "euclidean_distance"}
    out = {cols[m]: np.full(len(p), math.nan) for m in measures}
    if idx.size:
        vecs = encoder.encode([p[i] for i in idx] + [r[i] for i in idx])
        A, B = vecs[: idx.size], vecs[idx.size:]
        for m in measures:
            out[cols[m]][idx] = semantic_similarity(A, B, m)
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- repeated generations


def normalize_response(text: str) -> str:
    """casefold(NFC(text)) with whitespace runs collapsed to one space and the ends stripped."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text).casefold()).strip()


@register("response_exact_match_rate", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def exact_match_rate(responses: Sequence[str], *, normalize: bool = True) -> float:
    """Share of repeat runs whose response equals the first run's, for one question.

    EM = (1/(R−1)) Σ_{r=2..R} 1[norm(y_r) = norm(y_1)], R = number of runs (``consistency_runs``); the same
    "agree with the first call" form as docs/metrics.md, Retrieval (retrieval_consistency), applied to the original
    ``response_exact_match_rate``.
    norm = :func:`normalize_response` (case and whitespace), or identity with ``normalize=False``.
    R < 2 → NaN (nothing to compare; :func:`response_consistency` gives the reason).
    """
    rs = _check_texts(responses, "responses")
    if len(rs) < 2:
        return math.nan
    f = normalize_response if normalize else (lambda s: s)
    first = f(rs[0])
    return sum(f(y) == first for y in rs[1:]) / (len(rs) - 1)


@register("response_semantic_consistency", FAMILY, kind="vectors", value_range=(-1.0, 1.0),
          higher_is_better=True)
def semantic_consistency(vectors) -> float:
    """Mean pairwise cosine of the R responses' embeddings: 2/(R(R−1)) Σ_{i<j} cos(e_i, e_j), −1…1.

    R < 2 → NaN. A zero vector makes its pairs undefined; those pairs are skipped (all undefined → NaN).
    """
    V = np.asarray(vectors)
    if V.ndim != 2:
        raise ValueError(f"vectors must be R × D (one row per run), got shape {V.shape}")
    if V.shape[0] < 2:
        return math.nan
    V = as_vector_rows(V, "vectors")
    norms = np.linalg.norm(V, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        U = V / norms[:, None]
    C = np.clip(U @ U.T, -1.0, 1.0)
    iu = np.triu_indices(V.shape[0], k=1)
    vals = C[iu]
    vals = vals[np.isfinite(vals)]
    return float(vals.mean()) if vals.size else math.nan


def response_consistency(responses: Sequence[str], encoder=None, *, normalize: bool = True) -> dict:
    """Both stability measures for one question's R repeated responses, with a reason when undefined.

    Returns ``{n_runs, response_exact_match_rate, response_semantic_consistency, reason}``; ``reason`` is
    None when both are defined. The semantic part embeds the responses with ``encoder`` (required);
    it is skipped (NaN) when ``encoder`` is False.
    """
    rs = _check_texts(responses, "responses")
    out = {"n_runs": len(rs), "response_exact_match_rate": exact_match_rate(rs, normalize=normalize),
           "response_semantic_consistency": math.nan, "reason": None}
    if len(rs) < 2:
        out["reason"] = f"{len(rs)} run(s): consistency needs at least 2 responses (set consistency_runs ≥ 2)"
        return out
    if encoder is False:
        out["reason"] = "semantic consistency not computed (encoder=False)"
        return out
    if encoder is None:
        raise ValueError("response_consistency needs an encoder (e.g. ragnb.embeddings.models.get_encoder()), or "
                         "encoder=False to skip the semantic part")
    out["response_semantic_consistency"] = semantic_consistency(encoder.encode(rs))
    return out


# --------------------------------------------------------------------------- dataset level


def text_metrics(predictions: Sequence[str], references: Sequence[str], *, encoder=None, language: str = "auto",
                 use_stemmer: bool = False, semantic: bool = True) -> tuple[pd.DataFrame, dict]:
    """Per-pair ROUGE-1/2/L F, sentence BLEU, the answer metrics (:mod:`ragnb.metrics.answer`: exact match, token
    F1 and answer recall on the Unicode-aware normalisation, exact match and token F1 as SQuAD v1.1's official
    script computes them) and (``semantic=True``) embedding similarity, plus aggregates.

    Returns (per-item DataFrame with columns ``rouge1, rouge2, rougeL, bleu, answer_exact_match_unicode,
    answer_f1_unicode, answer_recall_unicode, squad_exact_match, squad_f1`` [+ ``semantic_similarity,
    dot_similarity, euclidean_distance``], summary). The summary maps each column to ``aggregate(...)``
    (mean over non-NaN items, ci95, n, n_valid, n_failed) — ``bleu`` there is the mean *sentence* BLEU —
    and adds ``corpus_bleu`` (:func:`corpus_bleu`: pooled counts, a different number).
    """
    p, r = _check_pairs(predictions, references)
    rows = [rouge(a, b, language=language, use_stemmer=use_stemmer) | {"bleu": bleu(a, b)}
            | answer_scores(a, b, language) for a, b in zip(p, r)]
    frame = pd.DataFrame(rows, columns=[*ROUGE_TYPES, "bleu", *ANSWER_METRICS], dtype=float)
    if semantic:
        frame = pd.concat([frame, embed_similarity(p, r, encoder)], axis=1)
    summary = {c: aggregate(frame[c].to_numpy()) for c in frame.columns}
    summary["corpus_bleu"] = corpus_bleu(p, r)
    return frame, summary
