"""The offline groundedness chain (see docs/metrics.md, Faithfulness): faithfulness (LLM → the offline method that
agrees best with human labels), hallucination rate and context utilization, for Russian and English.

The LLM level lives with the judge (``ragnb.llm``); its caller passes the LLM score here when it has one.
Without it, :func:`faithfulness_fallback` uses :data:`OFFLINE_METHOD` — word overlap, chosen on the tuning parts of
two human-labelled sets and reported on their held-out parts (:data:`AGREEMENT`;
:func:`ragnb.metrics.fallback_trust.offline_trust`) — and every result names the ``method`` that produced it
("llm" | "embedding" | "word_overlap"): a fallback score is never an LLM judgement. Embedding similarity is used
only when asked for (``method="embedding"``) with an encoder.

Calibration of the embedding method (all-MiniLM-L6-v2, the default encoder; see :data:`SIGMOID_CENTER`)
    Cosines of English paraphrases are ~0.95, related-but-different facts ("Paris is the capital of
    France" / "Berlin … of Germany") ~0.35, unrelated sentences ~0. On BEGIN (dev split, 1148 non-generic
    rows) the mean best-match cosine is 0.72 for attributable responses and 0.39 for not-attributable ones.
    The default encoder is English-only: unrelated *Russian* sentences reach cosines of ~0.5.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from ragnb.metrics.fallback_table import KIND_LABEL, SOURCES, TIER_KIND, load_table
from ragnb.metrics.registry import register
from ragnb.metrics.vector_rows import unit_rows

FAMILY = "groundedness"
LANGUAGES = ("auto", "en", "ru")
METHODS = ("llm", "embedding", "word_overlap")
UTILIZATION_METHODS = ("contains", "word_overlap", "embedding")

# Sigmoid that maps the mean best-match cosine to 0–1: σ(x) = 1 / (1 + exp(−SLOPE · (x − CENTER))).
# CENTER = 0.6: between BEGIN's class means of the mean best-match cosine (not-attributable 0.39,
# attributable 0.72), the best balanced accuracy of the thresholds 0.5–0.7 there (0.76), and above
# "related but different fact" pairs (≈ 0.35), so σ = 0.5 is the natural "supported?" cut. A supported
# paraphrase (cos ≈ 0.95) → 0.97, an unrelated sentence (cos ≈ 0) → 0.002.
# SLOPE = 10 keeps the decision region graded (cos 0.4–0.8 → 0.12–0.88) instead of saturating it.
SIGMOID_CENTER = 0.6
SIGMOID_SLOPE = 10.0

# Agreement of the offline methods with human labels on *held-out* data of each kind (answer grounding: the held-out
# half of BEGIN dev; claim support: of WiCE dev — the test splits are not in this repository), measured by
# benchmarks/measure_fallback_agreement.py under the protocol of ragnb.metrics.fallback_agreement (a hash split: method and threshold chosen on the tuning parts, figures with
# bootstrap CIs on the held-out parts) and stored in ragnb/data/fallback_agreement.json; a test recomputes it.
_TABLE = load_table()
AGREEMENT: tuple[dict, ...] = tuple(_TABLE["held_out"])
OFFLINE_METHODS = ("embedding", "word_overlap")
# The method of the offline chain: the higher tuning ROC-AUC averaged over the kinds (test_fallback_agreement
# checks it against the stored table). Its threshold (answer-grounding tuning part, Youden) is the "supported?"
# cut the judge baselines use.
OFFLINE_METHOD = "word_overlap"
OFFLINE_THRESHOLD = {r["method"]: r["threshold"] for r in _TABLE["tuning"] if r["kind"] == TIER_KIND}
OFFLINE_LABEL = {"embedding": "embedding similarity", "word_overlap": "word overlap"}[OFFLINE_METHOD]

_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")

# --------------------------------------------------------------------------- stop-words (modest, closed-class)

STOPWORDS_EN = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having
he her here hers herself him himself his how i if in into is it its itself just let me more most my myself
no nor not now of off on once only or other our ours ourselves out over own same she should so some such
than that the their theirs them themselves then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your yours yourself
yourselves also s t don isn wasn weren won couldn shouldn wouldn doesn didn hasn haven hadn ll re ve d m
yes yeah oh well really
""".split())

STOPWORDS_RU = frozenset("""
а без более бы был была были было быть в вам вас весь во вот все всего всех вы где да даже для до его
ее её ей ему если есть еще ещё же за здесь и из или им их к как ко когда кто ли либо мне может мы на над
надо наш не него нее неё нет ни них но ну о об однако он она они оно от очень по под при про с со так
также такой там те тем то того тоже той только том ты у уже хотя чего чей чем что чтобы чье чья эта эти
это этого этой этом этот я ей ним нём нем ней себя себе свой своя свои своё свое мой моя мои твой вашей
который которая которое которые которого которой котором которых будет будут был бы ведь вдруг потом
тут сейчас тогда нибудь раз сам сама сами само зачем почему чтоб между через после перед около
""".split())

# Russian inflectional endings, longest first; stripped only while ≥ 3 letters of stem remain.
_RU_ENDINGS = tuple(sorted("""
иями ями ами ией ием иях ях ах ов ев ей ой ий ый ая яя ое ее ые ие ую юю ого его ому ему ыми ими ых их ом ем
ам ям ью ия ие ии ть ться тся ет ют ут ит ат ят ешь ишь ем им ете ите ал ала ало али ил ила ило или ся сь
а я о е ы и у ю ь й
""".split(), key=len, reverse=True))

# --------------------------------------------------------------------------- validation


def _check_text(value, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}; pass '' for an empty text")
    return value


def _check_contexts(contexts) -> list[str]:
    if isinstance(contexts, str):
        raise ValueError("contexts must be a list of strings, got a single string; wrap it: [context]")
    if not isinstance(contexts, Sequence):
        raise ValueError(f"contexts must be a list of strings, got {type(contexts).__name__}")
    bad = [i for i, c in enumerate(contexts) if not isinstance(c, str)]
    if bad:
        raise ValueError(f"contexts must hold strings only; non-strings at positions {bad[:20]}")
    return list(contexts)


def _check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return language


# --------------------------------------------------------------------------- sentence splitting

# Candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"(?:[.!?…]+)[\"'»”’)\]]*\s+")
_CJK_END = re.compile(r"(?<=[。！？])")
# Abbreviations that are normally followed by a capitalised word (titles, "г. Москва", "ул. Ленина").
_ABBREV = frozenset("""
mr mrs ms dr prof sr jr st mt vs e.g i.e cf al fig no nos vol approx dept est inc ltd co corp gen col lt sgt
т.е т.к т.н т.ч напр ул пр просп пл пер гг проф акад доц канд им стр рис табл обл см ср
""".split())
# Sentence-final abbreviations: these may end a sentence, so a capital after them does split.
_FINAL_ABBREV = re.compile(r"(?:\bт\.\s?[дп]|\betc|\bи\s+др|\bи\s+пр)\.$", re.IGNORECASE)


def _is_boundary(text: str, m: re.Match) -> bool:
    punct = m.group(0).rstrip()
    rest = text[m.end():]
    first = next((ch for ch in rest if ch.isalnum()), "")
    if first.islower():  # "т. е. это", "etc. and", "Wait... then"
        return False
    if any(c in punct for c in "!?…") or ".." in punct:
        return True
    before = text[:m.start() + 1]
    if _FINAL_ABBREV.search(before):
        return True
    word = before.rsplit(None, 1)[-1].rstrip(".").lstrip("(\"'«“‘").casefold()
    if len(word) == 1 and word.isalpha():  # initials "А. С. Пушкин", "т. е.", "г. Москва"
        return False
    return word not in _ABBREV


def split_sentences(text: str) -> list[str]:
    """Sentences of a Russian or English text.

    Boundaries: every newline; 。！？; and ``. ! ? … ...`` (plus closing quotes/brackets) followed by
    whitespace, unless the next word starts with a lower-case letter ("т. е. это", "e.g. the"), or the
    period ends a single letter (initials "А. С. Пушкин", "т. е.", "г. Москва") or a known abbreviation
    ("Dr.", "ул.", "e.g."). "и т. д.", "и т. п.", "и др.", "etc." may end a sentence: a capital after them
    splits. Decimal points ("3.14") never split (no whitespace). Pieces without a letter or digit are dropped.
    Known limit: a sentence ending in a single capital letter ("Plan B. Then…") is not split.
    """
    text = _check_text(text, "text")
    out: list[str] = []
    for line in text.splitlines():
        for part in _CJK_END.split(line):
            start = 0
            for m in _BOUNDARY.finditer(part):
                if _is_boundary(part, m):
                    out.append(part[start:m.end()].strip())
                    start = m.end()
            out.append(part[start:].strip())
    return [s for s in out if any(ch.isalnum() for ch in s)]


# --------------------------------------------------------------------------- words


def script_language(text: str) -> str:
    """The language of a text by its script: "ru" if words with Cyrillic letters outnumber words of Latin letters,
    "en" if the Latin ones outnumber the Cyrillic ones, "other" when neither does (no such words, or as many of each).

    Words, not letters, so that a Russian question naming long Latin products stays Russian ("Как настроить VPN в
    GlobalConnect?": 3 Cyrillic words, 2 Latin). Enough to tell the languages of a Russian/English log apart; it
    does not tell English from other Latin-script languages."""
    words = _WORD.findall(text)
    cyr = sum(1 for w in words if _CYRILLIC.search(w))
    lat = sum(1 for w in words if not _CYRILLIC.search(w) and any("a" <= ch <= "z" for ch in w.casefold()))
    return "ru" if cyr > lat else "en" if lat > cyr else "other"


def stem_ru(word: str) -> str:
    """Crude Russian stem: ё → е, then strip the longest listed inflectional ending that leaves ≥ 3 letters.

    Enough for word forms to meet ("столица"/"столицы"/"столицу" → "столиц"); not a morphological analyser
    (suppletive forms and stem alternations stay apart).
    """
    w = word.replace("ё", "е")
    for end in _RU_ENDINGS:
        if w.endswith(end) and len(w) - len(end) >= 3:
            return w[: -len(end)]
    return w


@functools.lru_cache(maxsize=1)
def _porter():
    from nltk.stem import porter  # a dependency of rouge-score

    return porter.PorterStemmer()


def content_words(text: str, language: str = "auto") -> list[str]:
    """Casefolded ``[^\\W_]+`` tokens minus stop-words, reduced to a crude stem, in order.

    Stop-words: the English and Russian lists of this module ("auto": both — a Russian stop-word never
    occurs in English text, and mixed texts are common). Stems: Cyrillic tokens → :func:`stem_ru`, Latin
    tokens → Porter ("auto"); ``language="en"``/``"ru"`` use one list and one stemmer. Pure digit tokens
    are kept (numbers are facts).
    """
    language = _check_language(language)
    stops = {"en": STOPWORDS_EN, "ru": STOPWORDS_RU}.get(language, STOPWORDS_EN | STOPWORDS_RU)
    out = []
    for tok in _WORD.findall(unicodedata.normalize("NFC", text).casefold()):
        if tok in stops:
            continue
        lang = language if language != "auto" else ("ru" if _CYRILLIC.search(tok) else "en")
        if tok.isdigit():
            out.append(tok)
        elif lang == "ru":
            out.append(stem_ru(tok))
        else:
            out.append(_porter().stem(tok) if len(tok) > 3 else tok)
    return out


# --------------------------------------------------------------------------- faithfulness levels


def sigmoid(x, center: float = SIGMOID_CENTER, slope: float = SIGMOID_SLOPE):
    """σ(x) = 1 / (1 + exp(−slope · (x − center))); σ(center) = 0.5."""
    return 1.0 / (1.0 + np.exp(-slope * (np.asarray(x, dtype=float) - center)))


def best_match_cosines(answer_sentence_vecs, context_vecs) -> np.ndarray:
    """m_i = max_j cos(a_i, c_j): each answer sentence's similarity to its best-matching context unit."""
    A, C = unit_rows(answer_sentence_vecs, "answer_sentence_vecs"), unit_rows(context_vecs, "context_vecs")
    if A.shape[1] != C.shape[1]:
        raise ValueError(f"answer and context vectors differ in dimension ({A.shape[1]} vs {C.shape[1]}); "
                         "embed both with the same model")
    return np.clip(A @ C.T, -1.0, 1.0).max(axis=1)


@register("faithfulness_embedding", FAMILY, kind="vectors", value_range=(0.0, 1.0), higher_is_better=True)
def embedding_faithfulness(answer_sentence_vecs, context_vecs, *, center: float = SIGMOID_CENTER,
                           slope: float = SIGMOID_SLOPE) -> float:
    """Fallback level 2 (docs/metrics.md, Faithfulness): F_emb = σ( (1/n) Σ_i max_j cos(a_i, c_j) ), σ =
    :func:`sigmoid`(center, slope).

    a_i = embedding of answer sentence i (n sentences), c_j = embedding of context unit j (ragnb embeds
    context *sentences*: a whole chunk's vector dilutes one supporting sentence and is truncated at 256
    tokens).
    """
    return float(sigmoid(best_match_cosines(answer_sentence_vecs, context_vecs).mean(), center, slope))


@register("faithfulness_word_overlap", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def word_overlap_faithfulness(answer: str, contexts: Sequence[str], language: str = "auto") -> float:
    """Fallback level 3 (docs/metrics.md, Faithfulness): F_wo = |W(answer) ∩ W(contexts)| / |W(answer)|.

    W(·) = the *set* of content words (:func:`content_words`: stop-words removed, casefolded, crude stems),
    so a repeated word counts once. Answer without content words → NaN; no context words → 0.
    """
    answer = _check_text(answer, "answer")
    ctx = _check_contexts(contexts)
    a = set(content_words(answer, language))
    if not a:
        return math.nan
    c = set(content_words("\n".join(ctx), language))
    return len(a & c) / len(a)


def sentence_overlap_faithfulness(answer: str, contexts: Sequence[str], language: str = "auto") -> float:
    """A candidate offline method, measured beside word overlap (docs/metrics.md, Faithfulness):
    F_so = (1/n) Σ_i max_j |W(a_i) ∩ W(c_j)| / |W(a_i)| over the answer's sentences a_i with content words and
    the contexts' sentences c_j — each answer sentence must be found in *one* context sentence.

    Answer without content words → NaN; no context sentence → 0.
    """
    answer = _check_text(answer, "answer")
    ctx = [set(content_words(s, language)) for c in _check_contexts(contexts) for s in split_sentences(c)]
    shares = []
    for sentence in split_sentences(answer):
        a = set(content_words(sentence, language))
        if a:
            shares.append(max((len(a & c) / len(a) for c in ctx), default=0.0))
    return float(np.mean(shares)) if shares else math.nan


def faithfulness_fallback(answer: str, contexts: Sequence[str], encoder=None, language: str = "auto", *,
                          llm_score: float | None = None, method: str | None = None,
                          center: float = SIGMOID_CENTER, slope: float = SIGMOID_SLOPE) -> dict:
    """The 3-level chain (see docs/metrics.md, Faithfulness) for one answer → ``{"score", "method", "reason"}``.

    1. ``llm_score`` given and finite → that score, method "llm" (the judge computed it elsewhere);
    2. else the offline ``method``: None = :data:`OFFLINE_METHOD`, the method that agrees best with human labels
       (chosen on tuning data; held-out figures in :data:`AGREEMENT`) — word overlap (:func:`word_overlap_faithfulness`, method
       "word_overlap"); ``"embedding"`` with an ``encoder`` → :func:`embedding_faithfulness` over the answer's and
       contexts' sentences (:func:`split_sentences`), method "embedding"; ``"embedding"`` without an encoder →
       word overlap, and the reason says so.
    Blank answer → NaN ("nothing to judge"); no non-blank context → 0.0 (nothing supports the answer).
    ``reason`` says why a lower level was used, which one, and why the score is NaN/0.
    """
    answer = _check_text(answer, "answer")
    ctx = [c for c in _check_contexts(contexts) if c.strip()]
    _check_language(language)
    if method is not None and method not in OFFLINE_METHODS:
        raise ValueError(f"method must be one of {OFFLINE_METHODS} or None (the measured best), got {method!r}")
    if llm_score is not None:
        if isinstance(llm_score, bool) or not isinstance(llm_score, (int, float, np.floating, np.integer)):
            raise ValueError(f"llm_score must be a number in [0, 1] or None, got {llm_score!r}")
        if math.isfinite(llm_score):
            if not 0.0 <= llm_score <= 1.0:
                raise ValueError(f"llm_score must be in [0, 1], got {llm_score}")
            return {"score": float(llm_score), "method": "llm", "reason": None}
        why = "LLM judgement failed (NaN); "
    else:
        why = "no LLM judgement; "
    method, why = _offline_method(method, encoder, why)
    sentences = split_sentences(answer)
    if not sentences:
        return {"score": math.nan, "method": method, "reason": why + "; blank answer: nothing to judge"}
    if not ctx:
        return {"score": 0.0, "method": method, "reason": why + "; no context: nothing supports the answer"}
    if method == "word_overlap":
        score = word_overlap_faithfulness(answer, ctx, language)
        if math.isnan(score):
            why += "; the answer has no content words (only stop-words)"
        return {"score": score, "method": method, "reason": why}
    ctx_sentences = [s for c in ctx for s in split_sentences(c)]
    if not ctx_sentences:
        return {"score": 0.0, "method": method, "reason": why + "; the context has no words"}
    vecs = encoder.encode(sentences + ctx_sentences)
    score = embedding_faithfulness(vecs[: len(sentences)], vecs[len(sentences):], center=center, slope=slope)
    return {"score": score, "method": method, "reason": why}


def _offline_method(method: str | None, encoder, why: str) -> tuple[str, str]:
    """(the offline method used, the reason so far) for a requested ``method`` (None = :data:`OFFLINE_METHOD`)."""
    chosen = OFFLINE_METHOD if method is None else method
    if chosen == "embedding" and encoder is None:
        return "word_overlap", why + "word-overlap fallback (embedding similarity asked for, but no encoder)"
    label = {"embedding": "embedding similarity", "word_overlap": "word-overlap"}[chosen]
    if method is None:
        return chosen, why + f"{label} fallback ({agreement_note()})"
    return chosen, why + f"{label} fallback (asked for)"


@register("fallback_faithfulness", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True,
          aliases=("faithfulness_fallback",))
def fallback_faithfulness(answer: str, contexts: Sequence[str], *, encoder=None, language: str = "auto") -> float:
    """The offline faithfulness chain without an LLM (see docs/metrics.md, Faithfulness):

    F = F_emb = σ((1/n) Σ_i max_j cos(a_i, c_j)) when an ``encoder`` is given (:func:`embedding_faithfulness`),
    else F = F_wo = |W(answer) ∩ W(contexts)| / |W(answer)| (:func:`word_overlap_faithfulness`).
    Blank answer → NaN; no non-blank context → 0. Never graded by an LLM threshold; the ``method`` that
    produced a value is in :func:`faithfulness_fallback`'s result.
    """
    return faithfulness_fallback(answer, contexts, encoder, language)["score"]


def agreement_note(kind: str = TIER_KIND) -> str:
    """One sentence: which offline method is used, why, and its held-out agreement on data of ``kind`` — the kind of
    score the caller shows; another kind's figure is never quoted, and a kind without a held-out measurement is
    said to have none."""
    cut = f"threshold {OFFLINE_THRESHOLD[OFFLINE_METHOD]:.3g} tuned on answer-grounding data (Youden)"
    row = next((r for r in AGREEMENT if r["kind"] == kind and r["method"] == OFFLINE_METHOD), None)
    label = KIND_LABEL.get(kind, kind.replace("_", " "))
    if row is None:
        return f"chosen on tuning data; no held-out measurement exists for {label} data; {cut}"
    verdict = "" if row["informative"] else " — near chance"
    source = SOURCES[kind].split(" (")[0]
    return (f"chosen on tuning data for its agreement with human labels; on held-out {label} data ({source}, the "
            f"half no choice was made on) ROC-AUC {row['roc_auc']:.2f} (95% CI {row['roc_auc_ci95'][0]:.2f}–"
            f"{row['roc_auc_ci95'][1]:.2f}), κ {row['cohen_kappa']:.2f} ({row['cohen_kappa_ci95'][0]:.2f}–"
            f"{row['cohen_kappa_ci95'][1]:.2f}), accuracy {row['accuracy']:.2f} vs {row['majority_class']:.2f} "
            f"always '{row['majority_label']}', n = {row['n']}{verdict}; {cut}")


@register("hallucination_rate", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=False)
def hallucination_rate(faithfulness: float) -> float:
    """docs/metrics.md, Hallucination rate and context utilization: H = 1 − F (F = faithfulness from any level); NaN
    stays NaN."""
    if isinstance(faithfulness, bool) or not isinstance(faithfulness, (int, float, np.floating, np.integer)):
        raise ValueError(f"faithfulness must be a number in [0, 1] (or NaN), got {faithfulness!r}")
    f = float(faithfulness)
    if math.isnan(f):
        return math.nan
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"faithfulness must be in [0, 1], got {f}")
    return 1.0 - f


# --------------------------------------------------------------------------- context utilization


def _norm_sentence(s: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFC", s).casefold()).strip().rstrip(".!?…。！？").strip()


def _contains_related(sentence: str, ctx_sentences: list[str]) -> bool:
    s = _norm_sentence(sentence)
    return bool(s) and any(s in c or (c and c in s) for c in map(_norm_sentence, ctx_sentences))


@register("context_utilization", FAMILY, kind="text", value_range=(0.0, 1.0), higher_is_better=True)
def context_utilization(answer: str, contexts: Sequence[str], method: str = "contains", *, encoder=None,
                        threshold: float | None = None, language: str = "auto") -> float:
    """docs/metrics.md, Hallucination rate and context utilization: U = |{answer sentences related to some context
    sentence}| / |answer sentences|.

    Relatedness of answer sentence s to context sentence c (both from :func:`split_sentences`):
    * ``"contains"`` — the original definition: norm(s) ⊆ norm(c) or norm(c) ⊆ norm(s) as substrings
      (norm = casefold, collapsed whitespace, trailing . ! ? … removed). Weakness: only verbatim copying
      counts — a faithful paraphrase or a changed word form scores 0, and a very short context sentence
      ("Да.") is "contained" in many answer sentences.
    * ``"word_overlap"`` — ≥ ``threshold`` (default 0.5) of s's content words occur in c.
    * ``"embedding"`` — cos(s, c) ≥ ``threshold`` (default :data:`SIGMOID_CENTER`); needs ``encoder``.
    No answer sentences → NaN; no context sentences → 0.
    """
    answer = _check_text(answer, "answer")
    ctx = _check_contexts(contexts)
    if method not in UTILIZATION_METHODS:
        raise ValueError(f"method must be one of {UTILIZATION_METHODS}, got {method!r}")
    if method == "embedding" and encoder is None:
        raise ValueError("method='embedding' needs an encoder (e.g. ragnb.embeddings.models.get_encoder())")
    sentences = split_sentences(answer)
    if not sentences:
        return math.nan
    ctx_sentences = [s for c in ctx for s in split_sentences(c)]
    if not ctx_sentences:
        return 0.0
    if method == "contains":
        related = [_contains_related(s, ctx_sentences) for s in sentences]
    elif method == "word_overlap":
        t = 0.5 if threshold is None else float(threshold)
        ctx_words = [set(content_words(c, language)) for c in ctx_sentences]
        related = []
        for s in sentences:
            w = set(content_words(s, language))
            related.append(bool(w) and any(len(w & c) / len(w) >= t for c in ctx_words))
    else:
        t = SIGMOID_CENTER if threshold is None else float(threshold)
        vecs = encoder.encode(sentences + ctx_sentences)
        related = list(best_match_cosines(vecs[: len(sentences)], vecs[len(sentences):]) >= t)
    return sum(map(bool, related)) / len(sentences)
