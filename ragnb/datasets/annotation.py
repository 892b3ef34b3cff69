"""Modes ``export-annotation`` (a dataset + empty review fields) and ``import-annotation`` (apply a review)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ragnb.datasets.annotation_chunks import ChunkLookup, LazyLookup, check_edits, exported_ids, review_chunks
from ragnb.datasets.annotation_csv import REVIEW as REVIEW_FIELDS
from ragnb.datasets.annotation_csv import Place, parse_annotation_csv, pick_format
from ragnb.datasets.build import FILE_PREFIX, BuildResult, mode_metadata
from ragnb.datasets.schema import Dataset, DatasetItem, parse_dataset, read_json_file

# Written into every annotation file, so a reviewer editing the JSON knows what each field does.
REVIEW_HELP = {
    "is_question_ok": "true: a sensible question a user could ask; false: the item is dropped",
    "is_answer_ok": "true: ground_truth_answer is right and complete; false: the item is dropped, unless you "
                    "correct ground_truth_answer in place (then it is kept as fixed)",
    "is_chunk_ok": "true: chunk_text answers the question; false: chunk_id leaves relevant_chunk_ids and the "
                   "context (the item is dropped when none is left), unless you edit relevant_chunk_ids in place; "
                   "false together with is_confluence_url_ok false: every chunk of that page leaves",
    "is_confluence_url_ok": "true: confluence_url is the right source page; false: the url is cleared, unless "
                            "you correct confluence_url in place — then the relevant chunks become the chunks "
                            "of the corrected page",
    "notes": "free text for your remarks",
    "null": "a null review field means 'not reviewed yet'; an item with all four null counts as unreviewed",
}
_REVIEW_LIKE = re.compile(r"^is_[a-z0-9_]+_ok$")


def _where(source: str, index: int, item: DatasetItem) -> str:
    return f"{source}: item {index} (id {item.id!r})"


def check_review_fields(item: DatasetItem, index: int, source: str) -> dict[str, Any]:
    """The item's review values ``{field: True/False/None, "notes": str}`` (a missing field = None);
    wrong types and misspelt ``is_…_ok`` fields are errors naming file, item, field and the fix."""
    extra = item.model_extra or {}
    for key in extra:
        if _REVIEW_LIKE.match(key) and key not in REVIEW_FIELDS:
            raise ValueError(f"{_where(source, index, item)} field {key!r}: not a review field; use one of "
                             f"{list(REVIEW_FIELDS)}")
    out: dict[str, Any] = {}
    for key in REVIEW_FIELDS:
        value = extra.get(key)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{_where(source, index, item)} field {key!r}: got {value!r}; use true, false, or "
                             "null (not reviewed yet)")
        out[key] = value
    notes = extra.get("notes")
    if notes is not None and not isinstance(notes, str):
        raise ValueError(f"{_where(source, index, item)} field 'notes': got {notes!r}; write the notes as a "
                         "JSON string (\"\" for none)")
    out["notes"] = notes or ""
    return out


def _effective_ids(item: DatasetItem) -> list[str]:
    if "relevant_chunk_ids" in item.model_fields_set:
        return list(item.relevant_chunk_ids)
    return [item.chunk_id] if item.chunk_id else []


def _baseline_of(item: DatasetItem) -> dict[str, Any]:
    return {"ground_truth_answer": item.ground_truth_answer, "relevant_chunk_ids": _effective_ids(item),
            "confluence_url": item.confluence_url, "chunk_id": item.chunk_id}


def export_annotation(ds: Dataset, source: str | Path = "dataset") -> BuildResult:
    """Mode "export-annotation": a copy of ``ds`` with the review fields on every item
    (``is_question_ok``, ``is_answer_ok``, ``is_chunk_ok``, ``is_confluence_url_ok`` = null, ``notes`` = "").

    Items that already carry review values keep them (re-exporting a half-reviewed file loses nothing).
    ``relevant_chunk_ids`` is written out on every item so a reviewer can edit it. ``metadata.review_baseline``
    keeps each item's exported answer, relevant ids, url and chunk id: import tells a reviewer's correction
    from the original by comparing with it.
    """
    source = str(source)
    old_meta = dict(ds.metadata)
    baseline = dict(old_meta.get("review_baseline") or {}) if isinstance(old_meta.get("review_baseline"), dict) else {}
    items, reviewed = [], 0
    for i, it in enumerate(ds.items):
        review = check_review_fields(it, i, source)
        if any(review[f] is not None for f in REVIEW_FIELDS) or review["notes"]:
            reviewed += 1
        data = it.to_json_dict()
        data["relevant_chunk_ids"] = _effective_ids(it)
        data.update(review)
        items.append(DatasetItem.model_validate(data))
        baseline.setdefault(it.id, _baseline_of(it))
    baseline = {it.id: baseline[it.id] for it in items}
    if old_meta.get("mode") == "export-annotation":  # a re-export: keep pointing at the original dataset
        src_meta = old_meta.get("source_metadata", {})
        source_type = old_meta.get("source_type", ds.type)
        source_file = old_meta.get("source_dataset", source)
    else:
        src_meta, source_type, source_file = old_meta, ds.type, source
    counts = {"items": len(items), "already_reviewed": reviewed}
    meta = mode_metadata("export-annotation", source_dataset=source_file, source_type=source_type,
                         source_metadata=src_meta, review_fields=REVIEW_HELP, counts=counts, review_baseline=baseline)
    return BuildResult(Dataset(name="annotation", type="annotation", items=items, metadata=meta),
                       FILE_PREFIX["export-annotation"], counts)


def _load_baseline(ds: Dataset, source: str) -> dict[str, dict] | None:
    base = ds.metadata.get("review_baseline")
    if base is None:
        return None
    if not isinstance(base, dict) or not all(isinstance(v, dict) for v in base.values()):
        raise ValueError(f"{source}: metadata.review_baseline must map item id → exported values; it was changed "
                         "by hand — restore it from the exported file or delete the key")
    return base


def _changed_text(now: str | None, before: Any) -> bool:
    return (now or "").strip() != (before or "").strip() and bool((now or "").strip())


def read_annotation(path: str | Path, fmt: str | None = None) -> Dataset:
    """A dataset or annotation file as JSON or CSV (``fmt``, default by suffix; :mod:`.annotation_csv`)."""
    p = Path(path)
    csv_file = pick_format(p, fmt, "--format") == "csv"
    raw = parse_annotation_csv(p)[0] if csv_file else read_json_file(p, "annotation")
    return parse_dataset(raw, str(p), p.stem)


def _load_review(path: str | Path, fmt: str | None) -> tuple[Dataset, list[dict], dict | None, str, list[Place]]:
    """A reviewed annotation file: the dataset, each item's review values, the baseline, the file's name and
    where each item was read (a CSV must have every review column)."""
    p = Path(path)
    source = str(p)
    if pick_format(p, fmt, "--format") == "csv":
        raw, places = parse_annotation_csv(p, review=True)
        ds = parse_dataset(raw, source, p.stem)
    else:
        ds = parse_dataset(read_json_file(p, "annotation"), source, p.stem)
        places = [Place(_where(source, i, it)) for i, it in enumerate(ds.items)]
    reviews = [check_review_fields(it, i, source) for i, it in enumerate(ds.items)]
    if not any(set(REVIEW_FIELDS) & set(it.model_extra or {}) for it in ds.items):
        raise ValueError(f"{source}: no item has review fields ({', '.join(REVIEW_FIELDS)}); make an annotation "
                         "file with `ragnb dataset export-annotation --dataset FILE` and review it first")
    return ds, reviews, _load_baseline(ds, source), source, places


def load_annotation(path: str | Path, fmt: str | None = None) -> tuple[Dataset, list[dict], dict | None, str]:
    """A reviewed annotation file: the dataset, each item's review values, the baseline and the file's name."""
    return _load_review(path, fmt)[:4]


@dataclass
class _Review:
    """One item after its review: the item's new fields, why it is rejected, what the reviewer fixed and
    what the review removed."""

    data: dict[str, Any]
    reasons: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    adjusted: list[str] = field(default_factory=list)
    unreviewed: bool = False

    @property
    def status(self) -> str:
        if self.reasons:
            return "rejected"
        if self.fixed:
            return "fixed"
        if self.unreviewed:
            return "unreviewed"
        return "adjusted" if self.adjusted else "accepted"


def _review_item(it: DatasetItem, rv: dict, base: dict | None, drop_unreviewed: bool, chunks: LazyLookup,
                 place: Place, known: set[str]) -> _Review:
    """Apply one item's review values ``rv``; ``base``: its exported values (None: no baseline); ``known``: the
    chunk ids the file exported."""
    answer_fixed = base is not None and _changed_text(it.ground_truth_answer, base.get("ground_truth_answer"))
    ids_fixed = base is not None and "relevant_chunk_ids" in it.model_fields_set and \
        list(it.relevant_chunk_ids) != list(base.get("relevant_chunk_ids") or [])
    url_fixed = base is not None and _changed_text(it.confluence_url, base.get("confluence_url"))
    if base is not None:
        check_edits(it, base, {"relevant_chunk_ids": ids_fixed, "confluence_url": url_fixed}, known, place, chunks)
    where = str(place)
    out = _Review(it.to_json_dict())
    out.fixed = [name for name, flag in (("ground_truth_answer", answer_fixed), ("relevant_chunk_ids", ids_fixed),
                                         ("confluence_url", url_fixed)) if flag]
    if rv["is_question_ok"] is False:
        out.reasons.append("question_rejected")
    if rv["is_answer_ok"] is False and not answer_fixed:
        out.reasons.append("answer_rejected")
    review_chunks(it, rv, _effective_ids(it), {"relevant_chunk_ids": ids_fixed, "confluence_url": url_fixed}, base,
                  chunks, where, out.data, out.adjusted, out.reasons)
    if rv["is_confluence_url_ok"] is False and not url_fixed and it.confluence_url is not None:
        out.data["confluence_url"] = None
        out.adjusted.append("url_cleared")
    out.unreviewed = all(rv[f] is None for f in REVIEW_FIELDS)
    if out.unreviewed and drop_unreviewed:
        out.reasons.append("unreviewed")
    return out


@dataclass
class _Tally:
    """What import-annotation keeps and drops, and the counts of its report."""

    kept: list[DatasetItem] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)
    fixed: Counter = field(default_factory=Counter)
    adjusted: Counter = field(default_factory=Counter)
    status: Counter = field(default_factory=Counter)
    fixed_items: list[str] = field(default_factory=list)
    unreviewed: int = 0

    def add(self, index: int, it: DatasetItem, review: _Review, drop_rejected: bool) -> None:
        self.unreviewed += review.unreviewed
        if review.reasons and drop_rejected:
            self.dropped.append({"id": it.id, "index": index, "reasons": review.reasons})
            return
        if review.reasons:
            review.data["review_reasons"] = review.reasons
        review.data["review_status"] = review.status
        self.status[review.status] += 1
        self.fixed.update(review.fixed)
        self.adjusted.update(review.adjusted)
        if review.fixed:
            self.fixed_items.append(it.id)
        self.kept.append(DatasetItem.model_validate(review.data))

    def report(self, source: str, items_in: int, removed: list[str]) -> dict[str, Any]:
        reason_counts = Counter(r for d in self.dropped for r in d["reasons"])
        return {
            "annotation": source, "items_in": items_in, "kept": len(self.kept), "dropped": len(self.dropped),
            "dropped_by_reason": dict(sorted(reason_counts.items())), "dropped_items": self.dropped,
            "status": dict(sorted(self.status.items())), "fixed": dict(sorted(self.fixed.items())),
            "fixed_items": self.fixed_items, "adjusted": dict(sorted(self.adjusted.items())),
            "unreviewed": self.unreviewed, "removed_from_file": removed,
        }


def import_annotation(path: str | Path, drop_rejected: bool = True, drop_unreviewed: bool = False,
                      fmt: str | None = None, chunks: Callable[[], ChunkLookup] | None = None) -> BuildResult:
    """Mode "import-annotation": turn a reviewed annotation file into a dataset.

    Per item (a null review field means "not judged" and changes nothing):

    * ``is_question_ok`` false → dropped (``question_rejected``);
    * ``is_answer_ok`` false → dropped (``answer_rejected``) unless the reviewer corrected
      ``ground_truth_answer`` in place (kept, counted as fixed);
    * ``is_chunk_ok`` false → ``chunk_id`` leaves ``relevant_chunk_ids`` (and ``relevance``) and the fixed
      context: a multi-chunk context (``context_chunk_ids``) keeps its other chunks and ``chunk_text`` is
      rebuilt from them, a single-chunk one is cleared; ``chunk_id`` becomes the first remaining chunk; no
      relevant chunk left → dropped (``chunk_rejected``) — unless the reviewer edited ``relevant_chunk_ids``
      (used as given, fixed);
    * ``is_chunk_ok`` and ``is_confluence_url_ok`` both false → every relevant chunk on that page leaves;
    * ``is_confluence_url_ok`` false → the url is cleared, unless it was corrected (fixed): a corrected url
      makes the relevant chunks and the context the corrected page's chunks (:mod:`.annotation_chunks`).

    ``fmt``: json or csv (default: by the file's suffix; a CSV must have every review column and one cell per
    column in every row); ``chunks``: opens the corpus's chunks, called only when a review needs them (a
    corrected url, a rejected page, a chunk id the file did not export).

    Corrections are edits of those fields relative to ``metadata.review_baseline`` (written by
    :func:`export_annotation`); without a baseline no edit can be recognised and rejections drop the item.
    An edit that points nowhere is refused (:func:`.annotation_chunks.check_edits`): a chunk id neither the
    file nor the corpus has, a corrected url that is not http(s) nor in the corpus's own form.
    ``drop_rejected=False`` keeps rejected items with ``review_status = "rejected"``; ``drop_unreviewed`` drops
    items whose four review fields are all null. Every kept item gets ``review_status``: unreviewed,
    accepted, adjusted (a chunk or url removed per the review) or fixed.
    """
    ds, reviews, baseline, source, places = _load_review(path, fmt)
    lookup = LazyLookup(chunks)
    warnings: list[str] = []
    if baseline is None:
        warnings.append(f"{source} has no review baseline (metadata.review_baseline, or a CSV's baseline_… "
                        "columns: not made by export-annotation, or they were deleted): edited fields cannot be "
                        "recognised as corrections, so every rejection drops its item")
    tally, known = _Tally(), exported_ids(baseline or {})
    for i, (it, rv) in enumerate(zip(ds.items, reviews)):
        review = _review_item(it, rv, (baseline or {}).get(it.id), drop_unreviewed, lookup, places[i], known)
        tally.add(i, it, review, drop_rejected)
    removed = sorted(set(baseline or {}) - {it.id for it in ds.items})
    report = tally.report(source, len(ds.items), removed)
    if not tally.kept:
        reasons = dict(Counter(r for d in tally.dropped for r in d["reasons"]))
        raise ValueError(f"{source}: every item was dropped ({reasons}); nothing to write — "
                         "check the review fields, or use --keep-rejected")
    meta = mode_metadata("import-annotation", annotation=source, source_dataset=ds.metadata.get("source_dataset"),
                         source_type=ds.metadata.get("source_type"),
                         source_metadata=ds.metadata.get("source_metadata"),
                         drop_rejected=drop_rejected, drop_unreviewed=drop_unreviewed, counts=report)
    if tally.adjusted["corrected_url_not_in_corpus"]:
        warnings.append(f"{tally.adjusted['corrected_url_not_in_corpus']} corrected url(s) name a page with no "
                        "embedded chunk: those items have no relevant chunk (Tier 1 counts them as undefined)")
    if removed:
        warnings.append(f"{len(removed)} exported item(s) were deleted from the annotation file by hand")
    return BuildResult(Dataset(name="manual", type="manual", items=tally.kept, metadata=meta),
                       FILE_PREFIX["import-annotation"], report, warnings)
