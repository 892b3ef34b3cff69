"""ContextEntityRecall: the share of the reference's entities found in the retrieved contexts, with entity
matching across word forms (:func:`normalize_entity`)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from ragnb.judges.base import gather_all
from ragnb.judges.ragas.common import RagasJudge, RagasMetric, text_of
from ragnb.judges.ragas.parsing import parse_entities
from ragnb.judges.sample import Sample
from ragnb.llm.result import ModelScore
from ragnb.metrics.fallback import stem_ru

_DIGIT_GROUP = re.compile(r"(?<=\d)[ \u00a0\u2009\u202f](?=\d{3}(?!\d))")

_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_ENTITY_STOP = frozenset({"the", "a", "an"})


def _stem_token(tok: str) -> str:
    if tok.isdigit():
        return tok
    if _CYRILLIC.search(tok):
        return stem_ru(tok)
    if tok.endswith("'s"):
        tok = tok[:-2]
    if len(tok) > 4 and tok.endswith("ies"):
        return tok[:-3] + "y"
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
        return tok[:-1]
    return tok


def normalize_entity(text: str) -> tuple[str, ...]:
    """An entity (or any text) as a tuple of crude stems, for matching across word forms.

    NFKC, casefold, ё→е; digit groups joined ("21 196" → "21196"); punctuation and symbols split words
    ("Аполлон-11" → аполлон, 11); English articles dropped; Cyrillic words through
    :func:`ragnb.metrics.fallback.stem_ru` (longest inflectional ending off while ≥ 3 letters stay),
    Latin words lose a plural/possessive "s". Deterministic, no dictionary: "Москвы"/"Москва" → ("москв",),
    "Эйфелевой башни"/"Эйфелева башня" → ("эйфелев", "башн"); suppletive forms and stem alternations stay
    apart, and translations or abbreviations ("США" / "Соединённые Штаты") do not meet.
    """
    t = unicodedata.normalize("NFKC", str(text)).casefold().replace("ё", "е").replace("’", "'")
    t = _DIGIT_GROUP.sub("", t)
    toks = [m.group(0) for m in re.finditer(r"[^\W_]+(?:'s)?", t)]
    return tuple(_stem_token(tok) for tok in toks if tok not in _ENTITY_STOP)


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    if n == 0 or n > len(haystack):
        return False
    first = needle[0]
    return any(haystack[i] == first and tuple(haystack[i:i + n]) == tuple(needle) for i in range(len(haystack) - n + 1))


def match_entities(reference_entities: Sequence[str], context_entities: Sequence[str],
                   context_text: str | None = None) -> list[dict[str, Any]]:
    """For each distinct reference entity (distinct after :func:`normalize_entity`): is it covered?

    Covered when its normalised words equal, or occur in a row inside, a context entity's normalised words
    ("1889" is covered by "1889 году"; "Франция" by "Париж, Франция"), or — with ``context_text`` — inside
    the normalised context text. Returns ``[{"entity", "key", "covered", "by"}]`` with ``by`` = the matching
    context entity, ``"context text"`` or None.
    """
    ctx_keys = [(e, normalize_entity(e)) for e in context_entities]
    text_key = normalize_entity(context_text) if context_text else ()
    out, seen = [], set()
    for ent in reference_entities:
        key = normalize_entity(ent)
        if not key or key in seen:
            continue
        seen.add(key)
        by = next((e for e, k in ctx_keys if k == key), None) or next(
            (e for e, k in ctx_keys if _contains_run(k, key)), None)
        if by is None and _contains_run(text_key, key):
            by = "context text"
        out.append({"entity": ent, "key": " ".join(key), "covered": by is not None, "by": by})
    return out


def entity_recall(reference_entities: Sequence[str], context_entities: Sequence[str],
                  context_text: str | None = None) -> float:
    """ContextEntityRecall = |E_ref ∩ E_ctx| / |E_ref|, over entities normalised by :func:`normalize_entity`.

    E_ref: distinct entities of the reference; a reference entity is in the intersection when a context
    entity (or, with ``context_text``, the contexts' text) covers it — see :func:`match_entities`.
    No reference entity → NaN (undefined).
    """
    matches = match_entities(reference_entities, context_entities, context_text)
    return sum(m["covered"] for m in matches) / len(matches) if matches else math.nan


class ContextEntityRecall(RagasMetric):
    """ContextEntityRecall = |E_ref ∩ E_ctx| / |E_ref| (higher is better).

    E_ref: distinct entities the judge extracts from the reference (call 1); E_ctx: entities it extracts
    from the retrieved contexts (call 2). Entities are compared after :func:`normalize_entity` (case, ё,
    punctuation, Russian word forms) and a reference entity also counts as covered when it is part of a
    context entity or (``match_context_text``) occurs in the contexts' text — see :func:`match_entities`.
    No reference entity → NaN, undefined. Needs ``reference`` and ``retrieved_contexts``.
    """

    name = "context_entity_recall"
    required = ("reference", "retrieved_contexts")

    def __init__(self, match_context_text: bool = True) -> None:
        if not isinstance(match_context_text, bool):
            raise ValueError(f"match_context_text={match_context_text!r} must be True or False")
        self.match_context_text = match_context_text

    def options(self) -> dict[str, bool]:
        return {"match_context_text": self.match_context_text}

    async def _score(self, judge: RagasJudge, sample: Sample) -> ModelScore:
        context_text = "\n\n".join(sample.retrieved_contexts)
        ref_entities, ctx_entities = await gather_all(
            judge.ask("entities of the reference", "ragas_entities", parse_entities, text=sample.reference),
            judge.ask("entities of the contexts", "ragas_entities", parse_entities, text=context_text),
        )
        matches = match_entities(ref_entities, ctx_entities, context_text if self.match_context_text else None)
        judge.details.update(reference_entities=ref_entities, context_entities=ctx_entities, matches=matches,
                             n_entities=len(matches))
        if not matches:
            return judge.undefined("the judge found no entity in the reference")
        covered = sum(m["covered"] for m in matches)
        score = covered / len(matches)
        lang = judge.config.language
        text = text_of(lang, "entities", k=covered, n=len(matches))
        missing = [m["entity"] for m in matches if not m["covered"]]
        if missing:
            text += text_of(lang, "entities_bad", items=", ".join(missing[:10]) + (", …" if len(missing) > 10 else ""))
        return judge.ok(score, text)
