"""Benchmark datasets: one JSON schema for every mode (seed 001 phase 2), validated on load.

A dataset file is either a JSON array of items (the seed's layout) or an object
``{"name": ..., "type": ..., "items": [...]}``. Unknown extra fields (e.g. annotation fields) are kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragnb.runs import atomic_write_text


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
        return str(v) if isinstance(v, int) else v

    @field_validator("relevant_chunk_ids", mode="before")
    @classmethod
    def _ids_as_text(cls, v):
        return [str(x) for x in v] if isinstance(v, list) else v

    def grades(self) -> dict[str, int]:
        if self.relevance:
            return dict(self.relevance)
        ids = self.relevant_chunk_ids or ([self.chunk_id] if self.chunk_id else [])
        return {cid: 1 for cid in ids}


class Dataset(BaseModel):
    name: str
    type: str = "manual"
    items: list[DatasetItem]

    def qrels(self) -> dict[str, dict[str, int]]:
        return {it.id: it.grades() for it in self.items}


def _format_error(path: str, exc: ValidationError, offset: str = "") -> str:
    first = exc.errors()[0]
    loc = list(first["loc"])
    where = offset
    if loc and loc[0] == "items":
        loc = loc[1:]
    if loc and isinstance(loc[0], int):
        where += f"item {loc[0]} "
        loc = loc[1:]
    field = ".".join(str(x) for x in loc) or "(item)"
    return f"{path}: {where}field '{field}': {first['msg']}; fix the value or remove the item"


def load_dataset(path: str | Path) -> Dataset:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: dataset file not found")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if isinstance(raw, list):
        raw = {"name": p.stem, "items": raw}
    if not isinstance(raw, dict) or "items" not in raw:
        raise ValueError(f"{p}: expected a JSON array of items or an object with an 'items' array")
    raw.setdefault("name", p.stem)
    try:
        ds = Dataset.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_format_error(str(p), exc)) from None
    seen: set[str] = set()
    for i, it in enumerate(ds.items):
        if it.id in seen:
            raise ValueError(f"{p}: item {i} field 'id': {it.id!r} is repeated; ids must be unique")
        seen.add(it.id)
    if not ds.items:
        raise ValueError(f"{p}: the dataset has no items")
    return ds


def save_dataset(ds: Dataset, path: str | Path) -> Path:
    """Write ``ds`` as JSON atomically (temp file in the same folder, then rename)."""
    return atomic_write_text(path, json.dumps(ds.model_dump(exclude_none=True), ensure_ascii=False, indent=1))
