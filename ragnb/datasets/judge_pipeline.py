"""Mode ``judge-pipeline``: the show/no-show dataset of the Tier Judge Pipeline notebook, from a
(question, answer, ground_truth_show) file or from a reviewed question-log annotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragnb.datasets.annotation import load_annotation
from ragnb.datasets.annotation_csv import open_csv
from ragnb.datasets.judge_items import JudgePipelineDataset, JudgePipelineItem, load_judge_dataset
from ragnb.datasets.build import FILE_PREFIX, BuildResult, mode_metadata
from ragnb.datasets.schema import Dataset, DatasetItem
from ragnb.io import check_unique, is_json_lines

def _judge_item_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(row)"
    return f"field '{loc}': {first['msg']}"


def read_judge_csv(path: str | Path):
    """A judge-pipeline CSV (header: question, answer, ground_truth_show; optional id, context and any other
    columns; delimiter ``,`` ``;`` tab or ``|``, read as annotation CSVs are read:
    :func:`ragnb.datasets.annotation_csv.open_csv`) as a :class:`ragnb.datasets.judge_items.JudgePipelineDataset`;
    empty optional cells and blank lines are left out. Errors name the file, the row (1 = first data row) and its
    line, and the field."""
    p = Path(path)
    header, reader = open_csv(p, "judge-pipeline file", "it needs a header line (question, answer, "
                                                        "ground_truth_show) and one row per item")
    missing = [c for c in ("question", "answer", "ground_truth_show") if c not in header]
    if missing:
        raise ValueError(f"{p}: missing column(s) {missing}; the header must name question, answer, "
                         f"ground_truth_show (optional: id, context); found {header}")
    items, seen, k = [], {}, 0
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue  # a blank line (Excel leaves some at the end)
        k += 1
        where = f"{p}: row {k} (line {reader.line_num})"
        if len(cells) > len(header):
            raise ValueError(f"{where}: more values than header columns; quote values that contain the delimiter")
        data = {key: val for key, val in zip(header, cells)
                if val.strip() or key in ("question", "answer", "ground_truth_show")}
        data.setdefault("id", f"item-{k}")
        try:
            item = JudgePipelineItem.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{where} {_judge_item_error(exc)}; fix the value or remove the row") from None
        check_unique(seen, item.id, where)
        items.append(item)
    if not items:
        raise ValueError(f"{p}: the file has no data rows")
    return JudgePipelineDataset(name=p.stem, items=items)


def read_judge_file(path: str | Path):
    """(question, answer, ground_truth_show) rows from CSV, JSON or JSONL — the latter two read exactly as the
    Tier Judge Pipeline notebook reads them (:func:`ragnb.datasets.judge_items.load_judge_dataset`)."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".csv":
        return read_judge_csv(p)
    if is_json_lines(p) or ".json" in suffixes:
        return load_judge_dataset(p)
    raise ValueError(f"{p}: unknown file type; use .csv, .json or .jsonl (one object per line)")


def _judge_result(items: list[dict], source: str, extra_counts: dict, warnings: list[str], **meta: Any) -> BuildResult:
    ds_items = []
    for d in items:
        JudgePipelineItem.model_validate(d)  # the notebook's own check: what we write, it reads
        ds_items.append(DatasetItem.model_validate(d))
    shows = sum(1 for d in items if d["ground_truth_show"])
    no_context = sum(1 for d in items if not d.get("context"))
    counts = {"items": len(items), "show": shows, "no_show": len(items) - shows, "without_context": no_context,
              **extra_counts}
    if no_context:
        warnings.append(f"{no_context} item(s) have no context: the judge and judge_pipeline notebooks count them as "
                        "not scored (faithfulness needs a context to judge against); a system with its own judge "
                        "scores them")
    metadata = mode_metadata("judge-pipeline", source_file=source, counts=counts, **meta)
    return BuildResult(Dataset(name="judge_pipeline", type="judge_pipeline", items=ds_items, metadata=metadata),
                       FILE_PREFIX["judge-pipeline"], counts, warnings)


def judge_pipeline_from_file(path: str | Path) -> BuildResult:
    """The judge-pipeline dataset from a CSV/JSON/JSONL file of (question, answer, ground_truth_show)
    rows, optional ``id`` and ``context``. ``ground_truth_show``: a word of :func:`ragnb.io.parse_yes_no`
    (true/false, yes/no, 1/0, да/нет, истина/ложь, show/no_show; any case)."""
    jp = read_judge_file(path)
    items = [it.model_dump(exclude_none=True) for it in jp.items]
    return _judge_result(items, str(path), {}, [], source_kind="file")


def judge_pipeline_from_annotation(path: str | Path) -> BuildResult:
    """The judge-pipeline dataset from a reviewed question-log annotation: question, the logged answer (as
    exported — a reviewer's correction is not what production showed), ground_truth_show = ``is_answer_ok``,
    context = ``chunk_text``. Items with ``is_answer_ok`` null are skipped (``unreviewed``), items without an
    answer too (``without_answer``)."""
    ds, reviews, baseline, source = load_annotation(path)
    warnings: list[str] = []
    src_mode = (ds.metadata.get("source_metadata") or {}).get("mode") or ds.metadata.get("mode")
    if src_mode not in ("from-real-questions", "from-real-questions-score-5"):
        warnings.append(f"{source} was not made from the question log (mode {src_mode!r}): its answers are "
                        "reference answers, not what production showed")
    items, unreviewed, no_answer = [], 0, 0
    for it, rv in zip(ds.items, reviews):
        if rv["is_answer_ok"] is None:
            unreviewed += 1
            continue
        base = (baseline or {}).get(it.id) or {}
        answer = base.get("ground_truth_answer", it.ground_truth_answer) if baseline else it.ground_truth_answer
        if not (answer or "").strip():
            no_answer += 1
            continue
        d: dict[str, Any] = {"id": it.id, "question": it.question, "answer": answer,
                             "ground_truth_show": rv["is_answer_ok"]}
        if it.chunk_text:
            d["context"] = it.chunk_text
        for key in ("confluence_url", "question_answer_id", "user_score"):
            value = getattr(it, key, None) if key == "confluence_url" else (it.model_extra or {}).get(key)
            if value is not None:
                d[key] = value
        if rv["notes"]:
            d["notes"] = rv["notes"]
        items.append(d)
    if not items:
        raise ValueError(f"{source}: no item has is_answer_ok true or false ({unreviewed} unreviewed, {no_answer} "
                         "without an answer); review the file first")
    if unreviewed:
        warnings.append(f"{unreviewed} item(s) with is_answer_ok null were skipped (not reviewed)")
    return _judge_result(items, source, {"unreviewed_skipped": unreviewed, "without_answer_skipped": no_answer},
                         warnings, source_kind="annotation", source_mode=src_mode)
