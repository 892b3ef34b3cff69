"""Reading the judge's JSON fields and the inputs it is given; the per-call log kept with each verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragnb.llm.replies import ChatResult


def text_field(obj: dict, key: str, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f'the key "{key}" is missing; it must hold your text')
        return ""
    if not isinstance(value, str):
        raise ValueError(f'"{key}" must be a string, got {type(value).__name__}')
    if required and not value.strip():
        raise ValueError(f'"{key}" is empty')
    return value.strip()


def call_log(results: Sequence[ChatResult]) -> list[dict[str, Any]]:
    return [{"latency_s": r.latency_s, "cached": r.cached, "attempts": r.attempts,
             "tokens_in": r.tokens_in, "tokens_out": r.tokens_out} for r in results]


def as_text(value: Any, name: str, *, allow_list: bool = False) -> str:
    if isinstance(value, str):
        return value
    if allow_list and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        # Numbered passages, as the RAG prompt shows them; blank passages carry nothing to check against.
        passages = [v for v in value if v.strip()]
        return "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1))
    kinds = "a string or a list of strings" if allow_list else "a string"
    raise ValueError(f"{name} must be {kinds}, got {type(value).__name__}")
