"""Tier UX, whether a cache hit would serve the right answer (docs/metrics.md, Tier UX, Oracle): the strictest
check the log allows, per hit — the same answer where both questions' answers are known, else the same cited page.

The same page is necessary, not sufficient: on a held-out bilingual log 0.90 of hits cited their match's page but
only ~0.18 had the same answer. Where the log holds real answers, they are the oracle.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Sequence

import numpy as np


def normalise_question(text: object) -> str:
    """The text key two questions must share to be "the same question" (docs/metrics.md, Tier UX): Unicode NFKC,
    casefold, runs of whitespace → one space, punctuation stripped at both ends ("How do I log in?" and
    " how do  I log in " are the same). None/NaN → "" (never equal to anything, see
    :func:`ragnb.metrics.ux.self_matches`). Here, below the metrics that use it, and read from :mod:`ragnb.metrics.ux`
    too."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    t = " ".join(unicodedata.normalize("NFKC", str(text)).casefold().split())
    start, end = 0, len(t)
    while start < end and (t[start] == " " or unicodedata.category(t[start]).startswith("P")):
        start += 1
    while end > start and (t[end - 1] == " " or unicodedata.category(t[end - 1]).startswith("P")):
        end -= 1
    return t[start:end]


ANSWER, PAGE = "same answer", "same page"  # the oracle that judged a hit (the ``oracle`` column; "" = none)
# Replies that stand for "no answer" (compared after normalise_question, so case and end punctuation do not matter).
PLACEHOLDER_ANSWERS = frozenset(normalise_question(x) for x in (
    "n/a", "na", "none", "null", "nan", "todo", "tbd", "no answer", "not answered", "нет ответа", "нет данных",
    "暂无", "无"))


def _has_word(text: str) -> bool:
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def answer_keys(answers: Sequence, pages: Sequence | None = None) -> tuple[list[str | None], dict]:
    """Per row its answer as a comparable key (:func:`normalise_question`) where the answer is
    known, else None, and how many rows were left out per reason:

    * ``empty`` — None, NaN or blank;
    * ``placeholder`` — no letter or digit ("…", "-") or one of :data:`PLACEHOLDER_ANSWERS`;
    * ``canned`` — the same text logged for questions citing two or more different pages (``pages``: one page
      key or None per row, as for ``same_page``): a stock reply such as "See the wiki." or "I do not know.",
      not an answer to this question. Without pages this rule cannot apply.
    """
    keys = [normalise_question(a) for a in answers]
    counts = {"empty": 0, "placeholder": 0, "canned": 0}
    if pages is not None and len(pages) != len(keys):
        raise ValueError(f"pages has {len(pages)} entries for {len(keys)} answers; give one page (or None) per row")
    seen: dict[str, set] = {}
    for key, page in zip(keys, pages if pages is not None else [None] * len(keys)):
        if key and page is not None and not (isinstance(page, float) and math.isnan(page)) and str(page).strip():
            seen.setdefault(key, set()).add(str(page).strip())
    out: list[str | None] = []
    for key in keys:
        why = ("empty" if not key else "placeholder" if key in PLACEHOLDER_ANSWERS or not _has_word(key)
               else "canned" if len(seen.get(key, ())) > 1 else None)
        if why:
            counts[why] += 1
        out.append(None if why else key)
    return out, counts


def same_answer_flags(best_idx: Sequence[int], query_keys: Sequence, cache_keys: Sequence) -> np.ndarray:
    """Per query: 1.0 when it and its best cache match (row ``best_idx[i]``, −1 = none) have the same known
    answer key (:func:`answer_keys`), 0.0 when both are known and differ, NaN otherwise. A translation of the
    answer is another text, so this oracle is strict: a lower bound on the useful hits where the same page is
    an upper bound."""
    out = np.full(len(best_idx), np.nan)
    for i, j in enumerate(best_idx):
        if j >= 0 and query_keys[i] is not None and cache_keys[j] is not None:
            out[i] = float(query_keys[i] == cache_keys[j])
    return out


def oracle_flags(same_answer: np.ndarray, same_page: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The verdict per query and which oracle gave it: ``same_answer`` where known, else ``same_page`` where
    known (1 / 0), else NaN with oracle ""."""
    a = np.asarray(same_answer, dtype=float)
    p = np.asarray(same_page, dtype=float)
    by_answer, by_page = ~np.isnan(a), np.isnan(a) & ~np.isnan(p)
    correct = np.where(by_answer, a, np.where(by_page, p, np.nan))
    oracle = [ANSWER if x else PAGE if y else "" for x, y in zip(by_answer, by_page)]
    return correct, oracle


def oracle_name(n_by_answer: int, n_by_page: int) -> str | None:
    """How the judged hits were judged, in words: one oracle, both (with counts), or None (nothing judged)."""
    if n_by_answer and n_by_page:
        return f"{ANSWER} where both answers are known ({n_by_answer} hits), else {PAGE} ({n_by_page} hits)"
    return ANSWER if n_by_answer else PAGE if n_by_page else None
