"""What a topic is about, and whether topics follow language instead of subject (see docs/metrics.md, Analytics).

* :func:`topic_terms` labels each topic with its top terms by class-based TF-IDF (c-TF-IDF, as BERTopic): the
  questions of a topic are one document, so a term ranks high when it is frequent in that topic and rare in the
  others. Tokens are Unicode words (:class:`ragnb.metrics.text.UnicodeTokenizer`: Cyrillic and Latin alike) minus
  numbers and the label stop-words of :mod:`ragnb.analysis.topic_stopwords` (question words, auxiliaries, pronouns
  in Russian and English: the project's own lists); word forms meet on a crude stem
  (:func:`ragnb.metrics.fallback.content_words`: "пароль"/"пароля", "reset"/"resetting") and each stem is shown
  as its most frequent written form in the topic.
* :func:`language_mix` says how much the topics are languages: the share of questions that sit in their topic's
  majority language, beside the share of the largest language (the purity of topics that mix the languages in
  the log's proportions).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ragnb.analysis.topic_stopwords import is_label_word
from ragnb.metrics.fallback import content_words, script_language
from ragnb.metrics.text import UnicodeTokenizer


def question_languages(questions: Sequence[str]) -> list[str]:
    """:func:`ragnb.metrics.fallback.script_language` of each question ("ru", "en" or "other")."""
    return [script_language(str(q)) for q in questions]


def _terms(text: str, tokenizer: UnicodeTokenizer) -> list[tuple[str, str]]:
    """(stem, written form) of each content word of ``text``, in order; stop-words and tokens without a letter
    (numbers) dropped: "какие, 2, сколько" say nothing about a topic."""
    out = []
    for tok in tokenizer.tokenize(text):
        if not is_label_word(tok):
            continue
        stem = content_words(tok)  # [] for a metric stop-word, else [its stem]
        if stem:
            out.append((stem[0], tok))
    return out


def topic_terms(questions: Sequence[str], labels: Sequence[int], n_terms: int = 5) -> dict[int, list[str]]:
    """Per topic, its ``n_terms`` top terms by c-TF-IDF.

    w(t, c) = tf(t, c) / N_c · log(1 + A / f(t)), where tf(t, c) = occurrences of (the stem of) term t in the
    questions of topic c, N_c = content words in topic c, f(t) = occurrences of t in all topics, A = mean N_c
    over topics. Terms are ranked by w (ties: more occurrences first, then alphabetically); each is shown as its
    most frequent written form in the topic. A topic whose questions hold only stop-words gets [].
    """
    labels = np.asarray(labels)
    if len(labels) != len(questions):
        raise ValueError(f"{len(labels)} topic labels for {len(questions)} questions; give one label per question")
    if n_terms < 1:
        raise ValueError(f"n_terms = {n_terms}; label each topic with at least one term")
    tokenizer = UnicodeTokenizer()
    counts: dict[int, Counter[str]] = {}
    forms: dict[int, dict[str, Counter[str]]] = {}
    for q, t in zip(questions, labels.tolist()):
        c, f = counts.setdefault(int(t), Counter()), forms.setdefault(int(t), {})
        for stem, form in _terms(str(q), tokenizer):
            c[stem] += 1
            f.setdefault(stem, Counter())[form] += 1
    total: Counter[str] = Counter()
    for c in counts.values():
        total.update(c)
    mean_words = float(np.mean([sum(c.values()) for c in counts.values()])) if counts else 0.0
    out: dict[int, list[str]] = {}
    for t, c in sorted(counts.items()):
        n_c = sum(c.values())
        weight = {s: k / n_c * math.log(1 + mean_words / total[s]) for s, k in c.items()}
        top = sorted(c, key=lambda s: (-weight[s], -c[s], s))[:n_terms]
        out[t] = [min(forms[t][s], key=lambda w: (-forms[t][s][w], w)) for s in top]
    return out


def language_mix(languages: Sequence[str], labels: Sequence[int]) -> dict:
    """``{languages: {lang: n}, purity, baseline, per_topic: {topic: {lang: n}}}``.

    purity = (1/n) Σ_topics (questions of the topic's most frequent language); baseline = share of the most frequent
    language overall — the purity of topics that mix languages in the log's proportions. purity near 1 with a
    baseline near 0.5 means the topics are languages; purity near the baseline means language does not split them.
    NaN purity and baseline for a log in one language (nothing to tell).
    """
    labels = np.asarray(labels)
    langs = np.asarray(list(languages), dtype=object)
    if len(langs) != len(labels):
        raise ValueError(f"{len(labels)} topic labels for {len(langs)} languages; give one of each per question")
    overall = Counter(langs.tolist())
    per_topic = {int(t): dict(Counter(langs[labels == t].tolist()).most_common()) for t in sorted(set(labels.tolist()))}
    if len(overall) < 2:
        purity = baseline = float("nan")
    else:
        purity = sum(max(c.values()) for c in per_topic.values()) / len(langs)
        baseline = max(overall.values()) / len(langs)
    return {"languages": dict(overall.most_common()), "purity": purity, "baseline": baseline, "per_topic": per_topic}
