"""Judge-pipeline datasets: the item schema, the JSON/JSONL loader and the bundled BEGIN set.

A dataset is JSON (array, or ``{"name", "items": [...]}``) or JSONL, one item per object with ``question``,
``answer``, ``ground_truth_show`` and optional ``context`` (string or list of strings) and ``id``; see
:class:`JudgePipelineItem`. The bundled demo set is BEGIN's dev split (:func:`begin_pipeline_dataset`, human
attribution labels; see ``ragnb/data/begin_groundedness/README.md``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragnb.io import YES_NO_SPELLINGS, check_unique, is_json_lines, iter_json_records, parse_yes_no, read_text

BEGIN_DIR = Path(__file__).resolve().parent.parent / "data" / "begin_groundedness"
BEGIN_FILE = BEGIN_DIR / "begin_dev.jsonl.gz"
GENERIC_CHOICES = ("no_show", "drop")


class JudgePipelineItem(BaseModel):
    """One judged answer with its human label (the judge-pipeline dataset; see docs/datasets.md).

    ``ground_truth_show``: should the production system show this answer (True) or not (False)?
    ``context``: what the answer should be grounded in (string or list of passages) — needed by the
    faithfulness judge and by the baseline show/no-show judge, optional for a system's own judge.
    ``label``/``source``: optional finer human label and origin (BEGIN: attributable / not_attributable /
    generic; wow / cmu / tc). Unknown extra fields are kept.
    """

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str
    ground_truth_show: bool
    context: str | list[str] | None = None
    label: str | None = None
    source: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls_, v):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls_, v: str) -> str:
        if not v.strip():
            raise ValueError("the question is blank; the judge needs the question the answer replies to")
        return v

    @field_validator("ground_truth_show", mode="before")
    @classmethod
    def _show(cls_, v):
        show = parse_yes_no(v)
        if show is None:
            raise ValueError(f"{v!r} is not a show/no-show label; use {YES_NO_SPELLINGS} or show/no_show")
        return show

    def contexts(self) -> list[str]:
        """The context as a list of passages ([] when there is none)."""
        if self.context is None:
            return []
        return [self.context] if isinstance(self.context, str) else list(self.context)

    def digest(self) -> str:
        """Hash of what a judgement depends on: a changed question, answer or context is judged again."""
        text = json.dumps([self.question, self.answer, self.contexts()], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


class JudgePipelineDataset(BaseModel):
    name: str
    type: str = "judge_pipeline"
    items: list[JudgePipelineItem]

    def positive_rate(self) -> float:
        return float(np.mean([it.ground_truth_show for it in self.items])) if self.items else math.nan


def _field_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = [str(x) for x in first["loc"]]
    return f"field '{'.'.join(loc) or '(item)'}': {first['msg']}"


def _validate(obj: Any, where: str, default_id: str) -> JudgePipelineItem:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object with question, answer and ground_truth_show, "
                         f"got {type(obj).__name__}")
    obj = obj if "id" in obj else {**obj, "id": default_id}
    try:
        return JudgePipelineItem.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(f"{where} {_field_error(exc)}; fix the value or remove the item") from None


def load_judge_dataset(path: str | Path) -> JudgePipelineDataset:
    """A judge-pipeline dataset from JSON or JSONL (``.jsonl``/``.ndjson``, optionally ``.gz``).

    JSON: an array of items or ``{"name": ..., "items": [...]}``. JSONL: one item object per line (blank
    lines skipped). Errors name the file, the line (JSONL) or item index (JSON, from 0) and the field:
    ``data.jsonl:3 field 'ground_truth_show': ...``. Items without an ``id`` get ``item-<k>`` (k from
    1, in file order); ids must be unique.
    """
    p = Path(path)
    text = read_text(p, "judge-pipeline dataset file")
    items: list[JudgePipelineItem] = []
    where_of: dict[str, str] = {}
    for where, obj in iter_json_records(p, "judge-pipeline item", text=text):
        item = _validate(obj, where, f"item-{len(items) + 1}")
        check_unique(where_of, item.id, where)
        items.append(item)
    if not items:
        raise ValueError(f"{p}: the dataset has no items")
    return JudgePipelineDataset(name=_dataset_name(p, text), items=items)


def _dataset_name(p: Path, text: str) -> str:
    """The ``name`` of a JSON ``{"name", "items"}`` file, else the file name up to its first dot."""
    name = p.name.split(".")[0] or p.stem
    if not is_json_lines(p) and text.lstrip().startswith("{"):
        raw = json.loads(text)
        if isinstance(raw, dict) and raw.get("name"):
            return str(raw["name"])
    return name


def _sample(n: int, limit: int, seed: int) -> list[int]:
    """``limit`` row indices drawn without replacement (fixed seed), in file order; all when limit is 0."""
    if limit <= 0 or limit >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).permutation(n)[:limit].tolist())


def begin_pipeline_dataset(limit: int = 0, generic: str = "no_show", seed: int = 0,
                           path: str | Path | None = None) -> JudgePipelineDataset:
    """The bundled BEGIN dev set (human attribution labels) as judge-pipeline items.

    question = ``message`` (the previous user turn), answer = ``response``, context = ``knowledge``,
    ground_truth_show = ``grounded`` (True only for "Fully attributable"); ``label`` and ``source`` keep
    BEGIN's label and data source. ``generic``: "no_show" (default) keeps generic responses as no-show —
    they are not grounded, so a judge that shows grounded answers only should not show them; "drop" leaves
    them out. Rows with an empty message (2 of 1229) are skipped: the judge needs a question.
    ``limit`` > 0 keeps a fixed random sample (``seed``) of that many rows, in file order, so a small run
    still mixes the three sources.
    """
    if generic not in GENERIC_CHOICES:
        raise ValueError(f"generic = {generic!r}; use 'no_show' (generic responses count as not shown) or 'drop'")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit = {limit!r}; use 0 for all rows or a positive number")
    p = Path(path) if path is not None else BEGIN_FILE
    rows = [row for _, row in iter_json_records(p, "BEGIN row")]
    rows = [r for r in rows if r["message"].strip() and (generic == "no_show" or r["label"] != "generic")]
    items = [
        JudgePipelineItem(id=r["id"], question=r["message"], answer=r["response"], context=r["knowledge"],
                          ground_truth_show=bool(r["grounded"]), label=r["label"], source=r["data_source"],
                          generator_model=r["generator_model"], license=r["license"])
        for r in (rows[i] for i in _sample(len(rows), limit, seed))
    ]
    suffix = "" if generic == "no_show" else "_no_generic"
    return JudgePipelineDataset(name=f"begin_dev{suffix}" + (f"_{len(items)}" if limit else ""), items=items)


def open_judge_dataset(dataset_path: str = "", max_items: int = 0,
                       begin_generic: str = "no_show") -> JudgePipelineDataset:
    """What the judge notebooks read: a user's file (first ``max_items`` items) or, with an empty path, the
    bundled BEGIN set (a fixed sample of ``max_items``; 0 = all)."""
    if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 0:
        raise ValueError(f"max_items = {max_items!r}; use 0 for all items or a positive number")
    if not dataset_path:
        return begin_pipeline_dataset(max_items, begin_generic)
    ds = load_judge_dataset(dataset_path)
    if max_items:
        ds = ds.model_copy(update={"items": ds.items[:max_items]})
    return ds


def check_items(items: Any) -> list[JudgePipelineItem]:
    if isinstance(items, JudgePipelineDataset):
        items = items.items
    items = list(items)
    for i, it in enumerate(items):
        if not isinstance(it, JudgePipelineItem):
            raise ValueError(f"items[{i}] must be a JudgePipelineItem (see load_judge_dataset), "
                             f"got {type(it).__name__}")
    if not items:
        raise ValueError("no items to judge")
    ids = Counter(it.id for it in items)
    dupes = sorted(k for k, c in ids.items() if c > 1)
    if dupes:
        raise ValueError(f"item ids must be unique; repeated: {dupes[:10]}")
    return items


def split_by_context(items: list[JudgePipelineItem],
                     who: str) -> tuple[list[JudgePipelineItem], list[JudgePipelineItem]]:
    """(items with a context, items without one), each in item order. ``who`` judges faithfulness to the context, so
    an item without one is *not scored* — counted apart, neither failed nor wrong (``ragnb dataset judge-pipeline``
    writes such items with a warning: a system's own judge may not need a context). Only a dataset in which no item
    has a context is refused: there is nothing to score."""
    missing = {it.id for it in items if not any(c.strip() for c in it.contexts())}
    if len(missing) == len(items):
        raise ValueError(f"no item has a context (all {len(items)}); {who} scores faithfulness to the context — add "
                         "a 'context' field to the items, or judge them with a system's own judge")
    return [it for it in items if it.id not in missing], [it for it in items if it.id in missing]
