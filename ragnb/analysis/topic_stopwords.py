"""Words that never label a topic: the project's own list (written for ragnb, no download), Russian and English.

The word-overlap metrics' lists (:data:`ragnb.metrics.fallback.STOPWORDS_EN` / ``STOPWORDS_RU``) are deliberately
modest — a metric must not lose words that carry an answer. A topic label needs more: a question log is full of
question words ("какие", "сколько", "how many"), auxiliaries and modal verbs ("нужно", "можно", "should"), and
pronoun forms that the metric lists leave in. Measured on a bilingual wiki log, 15 of 90 c-TF-IDF label terms were
such words or numbers ("году, какие, дней, code, freeze"). These extras are added to the metric lists here; the
metric lists themselves stay as they are (changing them would change metric values).

Tokens are compared casefolded with ё written as е; a token without a letter (a number, "2fa" keeps its letters)
never labels a topic either (:func:`is_label_word`).
"""

from __future__ import annotations

from ragnb.metrics.fallback import STOPWORDS_EN, STOPWORDS_RU

# Question words, auxiliaries, modals, quantifiers and generic verbs of asking that the metric list keeps.
_EXTRA_EN = """
how what which who whom whose when where why whether
can could may might must shall should will would ought need needs needed
do does did done doing get gets got getting go goes going make makes made
am is are was were be been being has have had having
i me my mine we us our you your he him his she her it its they them their
many much more most less least few several lot lots some any every each all both either neither none
one ones another other others else
please thanks thank hi hello anyone someone something anything everything nothing
there here this that these those
kind sort way ways thing things stuff
want wants like know tell find use used using able
ok okay also still yet already just only even ever never always often usually sometimes
per via within without across around among
""".split()

_EXTRA_RU = """
какой какая какое какие каких каким какими какую каком какому
сколько скольких скольким
когда где куда откуда почему зачем как кто что чем чего кого кому ком
который которая которое которые
можно нужно надо нельзя должен должна должно должны необходимо
могу может можем можете могут мочь хочу хочет хотим хотите хотят
есть будет будут был была были было быть является являются
мне меня мой моя моё мое мои моего моей моих мы нас нам наш наша наше наши
вы вас вам ваш ваша ваше ваши вашего вашей ты тебя тебе
он она оно они его её ее их ему ей им ними нему ней нём нем
это этот эта эти этого этой этих этом этому тот та те того той тех
весь вся всё все всего всей всех всем всеми
каждый каждая каждое каждые любой любая любое любые
много мало несколько больше меньше
ли же бы вот ну да нет не ни уже ещё еще тоже также только даже просто
пожалуйста спасибо здравствуйте привет подскажите скажите подскажи скажи
""".split()


def _norm(word: str) -> str:
    return word.casefold().replace("ё", "е")


LABEL_STOPWORDS_EN = frozenset(_norm(w) for w in (*STOPWORDS_EN, *_EXTRA_EN))
LABEL_STOPWORDS_RU = frozenset(_norm(w) for w in (*STOPWORDS_RU, *_EXTRA_RU))
LABEL_STOPWORDS = LABEL_STOPWORDS_EN | LABEL_STOPWORDS_RU


def is_label_word(token: str) -> bool:
    """Whether ``token`` may label a topic: it has a letter and is no stop-word of either list."""
    return any(ch.isalpha() for ch in token) and _norm(token) not in LABEL_STOPWORDS
