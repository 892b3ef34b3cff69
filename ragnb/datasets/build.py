"""The dataset modes behind ``ragnb dataset …``: what they share (results, output files, the corpus).

Every mode returns a :class:`BuildResult` — a :class:`~ragnb.datasets.schema.Dataset` in the one schema
(``{"name", "type", "metadata", "items"}``, loadable with :func:`ragnb.datasets.schema.load_dataset` and by the tier
notebooks' ``dataset_path``) plus a report of counts — and :func:`write_result` writes it atomically as
``<prefix>_YYYYMMDD_HHMMSS.json``:

=============================  =========================================  ==============  ==============================
mode                           file prefix                                ``type``        items from
=============================  =========================================  ==============  ==============================
synthetic                      ``dataset_synthetic``                      synthetic       an LLM: question + answer per chunk
from-real-questions            ``dataset_from_real_questions``            real-users      the question log + top-k retrieval
from-real-questions-score-5    ``dataset_from_real_questions_score_5``    real-users      the same, user score = 5 only
export-annotation              ``dataset_export_annotation``              annotation      any dataset + empty review fields
import-annotation              ``dataset_import_annotation``              manual          a reviewed annotation file
judge-pipeline                 ``dataset_judge_pipeline``                 judge_pipeline  a (question, answer, show) file, or
                                                                                          a reviewed question-log annotation
=============================  =========================================  ==============  ==============================

The modes live in :mod:`ragnb.datasets.synthetic`, :mod:`ragnb.datasets.real_questions` (both
real-question modes), :mod:`ragnb.datasets.annotation` (export and import) and
:mod:`ragnb.datasets.judge_pipeline`. Bad input raises ``ValueError`` naming the file, the item (index and
id) or row, the field and the fix; nothing is written then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ragnb.datasets.schema import Dataset, dataset_json
from ragnb.io import atomic_write_text

MODES = ("synthetic", "from-real-questions", "from-real-questions-score-5", "export-annotation",
         "import-annotation", "judge-pipeline")
# The original calls them dataset_realq_*, dataset_realq5_* and annotation_*; ragnb names every mode alike:
# dataset_<mode>_YYYYMMDD_HHMMSS.json, one prefix per command (hyphens → underscores).
FILE_PREFIX = {
    "synthetic": "dataset_synthetic",
    "from-real-questions": "dataset_from_real_questions",
    "from-real-questions-score-5": "dataset_from_real_questions_score_5",
    "export-annotation": "dataset_export_annotation",
    "import-annotation": "dataset_import_annotation",
    "judge-pipeline": "dataset_judge_pipeline",
    "label-plan": "label_plan",
}
LANGUAGES = ("ru", "en")


@dataclass
class BuildResult:
    """A built dataset, the counts of how it was built (also in ``dataset.metadata``), and warnings."""

    dataset: Dataset
    prefix: str
    report: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Output files
# --------------------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _created_at(now: datetime | None = None) -> str:
    return (now or _now()).isoformat(timespec="seconds")


def timestamped_path(out_dir: str | Path, prefix: str, now: datetime | None = None, suffix: str = ".json") -> Path:
    """``<out_dir>/<prefix>_YYYYMMDD_HHMMSS.json`` (local time); ``_2``, ``_3`` … when that name is taken."""
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    base = Path(out_dir) / f"{prefix}_{stamp}{suffix}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{prefix}_{stamp}_{n}{suffix}")
    return path


def resolve_output(prefix: str, out_dir: str | Path | None = None, output: str | Path | None = None,
                   inputs: tuple[str | Path, ...] = (), suffix: str = ".json") -> Path:
    """Where a mode writes: ``output`` as given, else a timestamped name in ``out_dir`` (default
    ``<outputs>/datasets``). Refuses to overwrite one of the command's own input files. ``suffix``: ".csv" for
    an annotation exported as CSV."""
    from ragnb.config import outputs_dir

    if output is not None and out_dir is not None:
        raise ValueError("give either --output FILE or --out-dir DIR, not both")
    if output is not None:
        path = Path(output)
        if path.suffix.lower() != suffix:
            raise ValueError(f"--output {path}: this writes a {suffix[1:].upper()} file; name it *{suffix}")
        if path.is_dir():
            raise ValueError(f"--output {path} is a folder; use --out-dir for a folder")
    else:
        path = timestamped_path(Path(out_dir) if out_dir is not None else outputs_dir() / "datasets", prefix,
                                suffix=suffix)
    for src in inputs:
        if Path(src).resolve() == path.resolve():
            raise ValueError(f"--output {path} is the input file; write the result to another file")
    return path


def write_result(result: BuildResult, path: str | Path) -> Path:
    """Write ``result.dataset`` atomically; its ``name`` becomes the file's stem."""
    path = Path(path)
    ds = result.dataset.model_copy(update={"name": path.stem})
    text = dataset_json(ds)
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise ValueError(f"{path}: cannot write the dataset ({exc.strerror or exc}); choose another --output/--out-dir") from None


def mode_metadata(mode: str, **fields: Any) -> dict[str, Any]:
    return {"mode": mode, "created_at": _created_at(), **fields}


def check_language(language: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"--language {language!r}: use 'ru' or 'en'")
    return language


def check_count(value: Any, name: str, allow_zero: bool) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "0 for all or a positive number" if allow_zero else "a positive number"
        raise ValueError(f"{name} = {value!r}; use {what}")
    return value


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------


def _sql_ids(table: sa.Table) -> sa.ColumnElement:
    return sa.cast(table.c.id, sa.Text)


def embedded_chunk_urls(db) -> dict[str, str | None]:
    """id → url of every chunk that has a vector (what retrieval can return)."""
    from ragnb.store.models import has_default_vector
    from ragnb.store.schema import tables

    t = tables(db.schema).chunk
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(_sql_ids(t), t.c.url).where(has_default_vector(db, t))).all()
    return {r[0]: r[1] for r in rows}


def chunk_texts(db, ids: list[str]) -> dict[str, tuple[str | None, str]]:
    """id → (url, text) of the chunks ``ids``."""
    from ragnb.store.schema import tables

    if not ids:
        return {}
    t = tables(db.schema).chunk
    out: dict[str, tuple[str | None, str]] = {}
    with db.engine.connect() as conn:
        for start in range(0, len(ids), 5000):
            block = list(ids[start:start + 5000])
            stmt = sa.select(_sql_ids(t), t.c.url, t.c.text).where(_sql_ids(t).in_(block))
            out.update({r[0]: (r[1], r[2]) for r in conn.execute(stmt).all()})
    return out

