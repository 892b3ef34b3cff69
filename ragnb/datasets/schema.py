"""Benchmark datasets: one JSON schema for every mode (see docs/datasets.md), validated on load.

A dataset file is either a JSON array of items (the original layout) or an object
``{"name": ..., "type": ..., "metadata": {...}, "items": [...]}``. Unknown extra item fields (annotation
fields, ``is_relevant_chunk_matched``, ``user_score`` …) are kept. The generation modes live in
:mod:`ragnb.datasets.build` and the modules it names (``ragnb dataset …``).

Relevance: ``relevant_chunk_ids`` (or graded ``relevance``) names the chunks that answer the question. When
an item has no ``relevant_chunk_ids`` key at all, its ``chunk_id`` is the relevant chunk (the original
layout); an explicit empty list means "no chunk is known to be relevant" — Tier 1 then counts the item as
undefined instead of scoring it (e.g. a logged question without a source url).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragnb.io import atomic_write_text, dumps_strict, read_text

# Declared optional item fields left out of the file when they are None (extra fields keep their nulls:
# an annotation's ``is_question_ok: null`` means "not reviewed yet" and must stay visible).
_DROP_IF_NONE = ("ground_truth_answer", "chunk_id", "chunk_text", "confluence_url", "relevance", "source",
                 "question_source")


class DatasetItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    question: str = Field(min_length=1)
    ground_truth_answer: str | None = None
    chunk_id: str | None = None
    chunk_text: str | None = None
    confluence_url: str | None = None
    relevant_chunk_ids: list[str] = Field(default_factory=list)
    # Graded relevance (chunk id → grade ≥ 1); when absent every relevant_chunk_id has grade 1.
    relevance: dict[str, int] | None = None
    source: str | None = None
    question_source: str | None = None

    @field_validator("id", "chunk_id", mode="before")
    @classmethod
    def _id_as_text(cls, v):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("relevant_chunk_ids", mode="before")
    @classmethod
    def _ids_as_text(cls, v):
        return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v] if isinstance(v, list) else v

    def grades(self) -> dict[str, int]:
        """Relevant chunk → grade. ``relevance`` wins; then ``relevant_chunk_ids``; an item that never set
        ``relevant_chunk_ids`` falls back to its ``chunk_id``; an explicit ``[]`` means none is known."""
        if self.relevance:
            return dict(self.relevance)
        if "relevant_chunk_ids" in self.model_fields_set:
            ids = self.relevant_chunk_ids
        else:
            ids = [self.chunk_id] if self.chunk_id else []
        return {cid: 1 for cid in ids}

    def to_json_dict(self) -> dict[str, Any]:
        """The item as written to a file: declared optional fields only when set, extra fields always."""
        out = self.model_dump()
        for key in _DROP_IF_NONE:
            if out.get(key) is None:
                out.pop(key, None)
        if "relevant_chunk_ids" not in self.model_fields_set:
            out.pop("relevant_chunk_ids", None)  # keep the chunk_id fallback after a round trip
        return out


class Dataset(BaseModel):
    name: str
    type: str = "manual"
    items: list[DatasetItem]
    # How the file was made: mode, created_at, source database (password hidden), models, counts.
    metadata: dict[str, Any] = Field(default_factory=dict)

    def qrels(self) -> dict[str, dict[str, int]]:
        return {it.id: it.grades() for it in self.items}

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.metadata:
            out["metadata"] = self.metadata
        out["items"] = [it.to_json_dict() for it in self.items]
        return out


def _format_error(path: str, exc: ValidationError, offset: str = "", items: list | None = None) -> str:
    first = exc.errors()[0]
    loc = list(first["loc"])
    where = offset
    if loc and loc[0] == "items":
        loc = loc[1:]
    if loc and isinstance(loc[0], int):
        where += f"item {loc[0]} "
        if items is not None and loc[0] < len(items) and isinstance(items[loc[0]], dict) and "id" in items[loc[0]]:
            where += f"(id {items[loc[0]]['id']!r}) "
        loc = loc[1:]
    field = ".".join(str(x) for x in loc) or "(item)"
    return f"{path}: {where}field '{field}': {first['msg']}; fix the value or remove the item"


def parse_dataset(raw: Any, source: str = "dataset", default_name: str = "dataset") -> Dataset:
    """Validate decoded JSON (an array of items or ``{"name", "type", "metadata", "items"}``); errors name
    ``source``, the item index (and id) and the field. Ids must be unique and there must be items."""
    if isinstance(raw, list):
        raw = {"name": default_name, "items": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        raise ValueError(f"{source}: expected a JSON array of items or an object with an 'items' array")
    raw = {**raw}
    raw.setdefault("name", default_name)
    if raw.get("metadata") is None:
        raw.pop("metadata", None)
    try:
        ds = Dataset.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_format_error(source, exc, items=raw["items"])) from None
    seen: set[str] = set()
    for i, it in enumerate(ds.items):
        if it.id in seen:
            raise ValueError(f"{source}: item {i} field 'id': {it.id!r} is repeated; ids must be unique")
        seen.add(it.id)
    if not ds.items:
        raise ValueError(f"{source}: the dataset has no items")
    return ds


def read_json_file(path: str | Path, what: str = "dataset") -> Any:
    """Decoded JSON of ``path`` (plain or ``.gz``) with file-naming errors (missing file, bad UTF-8, bad JSON)."""
    p = Path(path)
    text = read_text(p, f"{what} file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset JSON file (an array of items, or ``{"name", "type", "items"}``; docs/datasets.md):
    a :class:`Dataset` whose ``items`` are :class:`DatasetItem` and whose ``qrels()`` feed the retrieval metrics.
    Bad input is a ValueError naming the file, the item and the field."""
    p = Path(path)
    return parse_dataset(read_json_file(p), str(p), p.stem)


def dataset_json(ds: Dataset) -> str:
    """The file text of ``ds`` (strict JSON: NaN → null), checked to load back as the same schema."""
    text = dumps_strict(ds.to_json_dict(), indent=1)
    parse_dataset(json.loads(text), f"dataset {ds.name!r}")  # never write a file load_dataset would refuse
    return text + "\n"


def save_dataset(ds: Dataset, path: str | Path) -> Path:
    """Write ``ds`` as JSON atomically (temp file in the same folder, then rename)."""
    return atomic_write_text(path, dataset_json(ds))
