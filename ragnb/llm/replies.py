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
    """429/5xx/timeouts persisted past ``max_retries``."""


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
# JSON extraction
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def extract_json(text: str, finish_reason: str | None = None) -> Any:
    """The JSON value in a model reply: the whole text, a ```json fence, or the first JSON object/array after
    leading prose. Raises ValueError saying why nothing usable was found (truncated, empty, no JSON)."""
    if finish_reason == "length":
        raise ValueError(
            "the reply was cut off at the max_tokens limit (finish_reason=length), so its JSON is incomplete"
        )
    stripped = (text or "").strip()
    if not stripped:
        raise ValueError(f"the reply was empty (finish_reason={finish_reason})")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    for candidate in candidates:
        for i, ch in enumerate(candidate):
            if ch in "{[":
                try:
                    value, _ = _DECODER.raw_decode(candidate, i)
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    return value
    if "{" in stripped or "[" in stripped:
        raise ValueError("the reply contains malformed or incomplete JSON")
    raise ValueError("the reply contains no JSON object (a refusal or prose answer)")


def reask_message(reason: str) -> str:
    return (
        f"Your previous reply could not be used: {reason}. "
        "Answer again with one complete, valid JSON object in the format requested above, "
        "and nothing else: no explanations, no code fences. Keep it concise so it is not cut off."
    )

