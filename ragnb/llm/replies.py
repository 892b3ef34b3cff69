"""What a chat call returns (:class:`ChatResult`), the client's errors, and reading JSON out of a reply."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ragnb.llm.usage import CallStats

@dataclass(frozen=True)
class ChatResult(CallStats):
    """One completion: the reply ``text`` and ``finish_reason`` plus its :class:`~ragnb.llm.usage.CallStats`.
    For a cache hit ``cost_usd`` is what it cost originally, at today's prices (the ledger books it as
    cached, not as spent)."""

    text: str = ""
    finish_reason: str | None = None
    refusal: str | None = None  # the provider's refusal message, when the model declined


class LLMError(RuntimeError):
    """Base class of the client's errors. Messages never contain the API key."""

    def __init__(self, message: str, *, model: str = "", metric: str = "", attempts: int = 0,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.model = model
        self.metric = metric
        self.attempts = attempts
        self.status = status


class LLMTransientError(LLMError):
    """429/5xx/timeouts persisted past ``max_retries`` or ``max_wait_s``; ``limit`` says which fired and the
    variable that raises it."""

    def __init__(self, message: str, *, limit: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        self.limit = limit


class LLMPermanentError(LLMError):
    """The provider refused the request for a reason retrying will not fix (auth, bad request, quota)."""

    def __init__(self, message: str, *, provider_message: str = "", code: str | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.provider_message = provider_message
        self.code = code


class LLMOutputError(LLMError):
    """The model's reply stayed unusable (no JSON, truncated, refused, wrong structure) after the re-asks."""

    def __init__(self, message: str, *, raw_text: str, reason: str, results: list[ChatResult], **kw: Any) -> None:
        super().__init__(message, **kw)
        self.raw_text = raw_text
        self.reason = reason
        self.results = results



# --------------------------------------------------------------------------------------------
# Reading a reply: reasoning, usability, JSON
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
# Reasoning models (DeepSeek-R1, Qwen3 thinking, many OpenRouter models) put their thoughts — drafts included —
# in such a block before the final answer.
_THINK_TAGS = ("think", "thinking", "reasoning", "reflection")
_THINK_BLOCK = re.compile(r"<(%s)>.*?</\1\s*>" % "|".join(_THINK_TAGS), re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(?:%s)>" % "|".join(_THINK_TAGS), re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:%s)\s*>" % "|".join(_THINK_TAGS), re.IGNORECASE)


def split_reasoning(text: str | None) -> tuple[str, str]:
    """``(final answer, reasoning)`` of a reply. Closed ``<think>…</think>`` blocks (also ``thinking``,
    ``reasoning``, ``reflection``) are reasoning; a closing tag without its opening one (chat templates that
    put ``<think>`` in the prompt) makes everything before it reasoning; an opening tag never closed (the
    model was cut off while thinking) makes everything after it reasoning."""
    text = text or ""
    reasoning: list[str] = []

    def keep(m: re.Match) -> str:
        reasoning.append(m.group(0))
        return ""

    answer = _THINK_BLOCK.sub(keep, text)
    closes = list(_THINK_CLOSE.finditer(answer))
    if closes:
        reasoning.append(answer[:closes[-1].end()])
        answer = answer[closes[-1].end():]
    opened = _THINK_OPEN.search(answer)
    if opened:
        reasoning.append(answer[opened.start():])
        answer = answer[:opened.start()]
    return answer.strip(), "\n".join(reasoning)


def strip_reasoning(text: str | None) -> str:
    """The final answer of a reply without any reasoning block (see :func:`split_reasoning`)."""
    return split_reasoning(text)[0]


def reply_problem(text: str | None, finish_reason: str | None, refusal: str | None = None) -> str | None:
    """Why a reply cannot be used as a complete answer, or None when it can.

    The one rule for "usable" and so for "cacheable": a reply cut off at ``max_tokens``
    (``finish_reason=length``), blocked by a content filter, refused (the ``refusal`` field), or without a
    final answer once reasoning is removed is neither scored nor cached."""
    if finish_reason == "length":
        return "the reply was cut off at the max_tokens limit (finish_reason=length), so it is incomplete"
    if finish_reason == "content_filter":
        return "the provider's content filter blocked the reply (finish_reason=content_filter)"
    if refusal:
        return f"the model refused: {str(refusal)[:200]}"
    answer, reasoning = split_reasoning(text)
    if not answer:
        if reasoning.strip():
            return "the reply holds only reasoning and no final answer"
        return f"the reply was empty (finish_reason={finish_reason})"
    return None


def _json_candidates(answer: str) -> list[str]:
    fences = [m.group(1).strip() for m in _FENCE.finditer(answer)]
    return [answer, *reversed(fences)]  # the last fence is the model's final word


def extract_json(text: str, finish_reason: str | None = None, refusal: str | None = None) -> Any:
    """The JSON value of a reply's *final answer*: reasoning blocks are removed first (a draft JSON inside
    ``<think>`` is never read), then the whole answer, a ```json fence (the last one), or the last JSON
    object/array in the prose. Raises ValueError saying why nothing usable was found (truncated, refused,
    empty, only reasoning, no JSON)."""
    problem = reply_problem(text, finish_reason, refusal)
    if problem is not None:
        raise ValueError(problem)
    candidates = _json_candidates(strip_reasoning(text))
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    for candidate in candidates:
        found = _last_json(candidate)
        if found is not None:
            return found
    if any("{" in c or "[" in c for c in candidates):
        raise ValueError("the reply contains malformed or incomplete JSON")
    raise ValueError("the reply contains no JSON object (a refusal or prose answer)")


def _last_json(text: str) -> Any:
    """The last complete top-level JSON object or array in ``text`` (None when there is none)."""
    found, i = None, 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            if isinstance(value, (dict, list)):
                found, i = value, end
                continue
        i += 1
    return found


def reask_message(reason: str) -> str:
    return (
        f"Your previous reply could not be used: {reason}. "
        "Answer again with one complete, valid JSON object in the format requested above, "
        "and nothing else: no explanations, no code fences. Keep it concise so it is not cut off."
    )
