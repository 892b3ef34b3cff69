"""Reading the judge's replies: verdicts matched by id (:class:`IdParser`), statement and entity lists,
generated questions; and numbering the items ragnb sends."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragnb.io import parse_yes_no

_TOKEN = re.compile(r"[^\W_]+")


def as_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None


def read_binary(item: Mapping[str, Any]) -> int:
    """The 0/1 ``"verdict"`` of one entry (bool, 0/1 or a yes/no word, see :func:`ragnb.io.parse_yes_no`)."""
    v = item.get("verdict")
    flag = parse_yes_no(v)
    if flag is None:
        raise ValueError(f"verdict {v!r} is not 0 or 1")
    return int(flag)


class ContextIds:
    """Reads ``{"contexts": [ids]}``; ids outside 1..K are dropped and counted."""

    def __init__(self, n_contexts: int) -> None:
        self.known = set(range(1, n_contexts + 1))
        self.n_unknown = 0

    def __call__(self, item: Mapping[str, Any]) -> frozenset[int]:
        raw = item.get("contexts")
        if not isinstance(raw, list):
            raise ValueError(f'"contexts" must be a list of context ids, got {raw!r:.60}')
        ids = {as_id(x) for x in raw}
        unknown = {i for i in ids if i not in self.known}
        self.n_unknown += len(unknown)
        return frozenset(ids - unknown)


class IdParser:
    """``parse`` for :meth:`LLMClient.chat_json`: ``{"verdicts": [{"id": i, ...}]}`` for a fixed list of ids.

    Keeps what earlier replies of the same conversation answered (a later reply replaces an earlier verdict
    for the same id). Entries with an unknown or repeated id are ignored and counted. If an id still lacks a
    valid value, raises ValueError naming it, which makes the client re-ask.
    """

    def __init__(self, ids: Sequence[int], read: Callable[[Mapping[str, Any]], Any], what: str = "statement") -> None:
        self.ids = list(ids)
        self.known = set(self.ids)
        self.read = read
        self.what = what
        self.values: dict[int, Any] = {}
        self.reasons: dict[int, str] = {}
        self.n_extra = 0
        self.first_missing: int | None = None

    def __call__(self, obj: Any) -> dict[int, Any]:
        items = obj.get("verdicts") if isinstance(obj, dict) else obj
        if not isinstance(items, list):
            raise ValueError(f'expected {{"verdicts": [...]}} with one entry per {self.what} id {self.ids}')
        seen: set[int] = set()
        invalid: dict[int, str] = {}
        for item in items:
            ident = as_id(item.get("id")) if isinstance(item, dict) else None
            if ident is None or ident not in self.known or ident in seen:
                self.n_extra += 1
                continue
            seen.add(ident)
            try:
                value = self.read(item)
            except ValueError as exc:
                invalid[ident] = str(exc)
                continue
            self.values[ident] = value
            reason = item.get("reason")
            if isinstance(reason, str) and reason.strip():
                self.reasons[ident] = reason.strip()
        missing = self.missing
        if self.first_missing is None:
            self.first_missing = len(missing)
        if missing:
            why = "; ".join(f"id {i}: {msg}" for i, msg in invalid.items())
            raise ValueError(
                f"no valid verdict for {self.what} id(s) {missing}{f' ({why})' if why else ''}; "
                f"give exactly one entry for each of the ids {self.ids}"
            )
        return {i: self.values[i] for i in self.ids}

    @property
    def missing(self) -> list[int]:
        return [i for i in self.ids if i not in self.values]

    def counts(self) -> dict[str, int]:
        return {"n_verdicts_missing": len(self.missing), "n_verdicts_extra": self.n_extra,
                "n_verdicts_reasked": self.first_missing or 0}


def _norm_key(text: str) -> str:
    return " ".join(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


def string_list(obj: Any, key: str) -> list[str]:
    items = obj.get(key) if isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise ValueError(f'expected {{"{key}": ["...", ...]}}')
    out, seen = [], set()
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise ValueError(f"{key}[{i}] must be a string, got {s!r:.60}")
        k = _norm_key(s)
        if k and k not in seen:  # blank or repeated items carry no information
            seen.add(k)
            out.append(s.strip())
    return out


def parse_statements(obj: Any) -> list[str]:
    return string_list(obj, "statements")


def parse_entities(obj: Any) -> list[str]:
    return string_list(obj, "entities")


class QuestionsParser:
    """``{"noncommittal": 0|1, "questions": [...]}`` with at least N distinct questions (unless noncommittal)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.n_duplicates = 0

    def __call__(self, obj: Any) -> tuple[bool, list[str]]:
        if not isinstance(obj, dict):
            raise ValueError('expected {"noncommittal": 0 or 1, "questions": [...]}')
        try:
            flag = read_binary({"verdict": obj.get("noncommittal")})
        except ValueError:
            raise ValueError(f'"noncommittal" must be 0 or 1, got {obj.get("noncommittal")!r:.40}') from None
        raw = obj.get("questions")
        if not isinstance(raw, list) or any(not isinstance(q, str) for q in raw):
            raise ValueError('"questions" must be a list of strings')
        questions = string_list(raw, "questions")
        self.n_duplicates = sum(1 for q in raw if q.strip()) - len(questions)
        if len(questions) < self.n and not flag:
            raise ValueError(
                f"expected {self.n} distinct questions, got {len(questions)} distinct"
                f"{f' ({self.n_duplicates} repeated)' if self.n_duplicates else ''}; write {self.n} different questions"
            )
        return bool(flag), questions[: self.n]


def numbered(items: Sequence[str], key: str) -> str:
    """A JSON list with one ``{"id": i, key: text}`` per line (ids from 1)."""
    lines = (json.dumps({"id": i, key: s}, ensure_ascii=False) for i, s in enumerate(items, start=1))
    return "[\n" + ",\n".join(lines) + "\n]"


def joined_contexts(contexts: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {c.strip()}" for i, c in enumerate(contexts, start=1))
