"""Building a run record: a run's metric blocks, ids and git info into a schema-2.0 record with its status and
executive summary.

It sits above the record's readers (:mod:`ragnb.runs.record`) and the summary (:mod:`ragnb.runs.summary`), which
read records and never build them — so the modules that read records import nothing that builds one.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from ragnb.config import SCHEMA_VERSION
from ragnb.io import to_jsonable
from ragnb.runs.judge_trust import mark_record
from ragnb.runs.record import _RUN_ID, git_info, overall_status, status_blocks
from ragnb.runs.summary import executive_summary, run_inputs
from ragnb.spec import TIER_KEYS


def _encoder_of(record: dict) -> dict | None:
    """The ``encoder`` description (``describe()``) a notebook recorded for the run's embedding model; its
    ``device``: every device that ran the model in any of the run's notebooks (one that read all its vectors from
    the cache ran it nowhere), None when none did."""
    found = [enc for block in status_blocks(record).values()
             if isinstance(enc := block.get("encoder") if isinstance(block, dict) else None, dict)
             and enc.get("model") == record.get("embedding_model")]
    if not found:
        return None
    if "device" not in found[0]:  # an endpoint: no device of its own
        return found[0]
    devices = list(dict.fromkeys(enc["device"] for enc in found if enc.get("device")))
    return {**found[0], "device": ", ".join(devices) or None}



SCHEMA_FIELDS: tuple[str, ...] = (
    "id", "timestamp", "git_branch", "git_commit_hash", "run_author", "schema_version", "dataset_file",
    "dataset_type", "judge_model", "generation_model", "embedding_model", "judge_eval_mode",
    "consistency_runs", *TIER_KEYS, "model_runs", "executive_summary", "overall_status",
)

# Fields the caller may set through ``extra`` (schema fields ragnb cannot infer, plus ragnb's own).
EXTRA_FIELDS: tuple[str, ...] = (
    "judge_model", "generation_model", "judge_eval_mode", "consistency_runs", "model_runs", "timestamp",
    "git_branch", "git_commit_hash", "run_author",
    "reports", "failures", "params", "other_metrics", "duration_s", "ragnb_version",
)


def _timestamp_of(run_id: str) -> str:
    m = _RUN_ID.match(run_id)
    if m:
        start = _dt.datetime.strptime(m.group("ts"), "%Y%m%d-%H%M%S").replace(tzinfo=_dt.timezone.utc)
    else:
        start = _dt.datetime.now(_dt.timezone.utc)
    return start.isoformat(timespec="seconds")


def build_record(
    run_id: str,
    tier_metrics: dict[str, dict],
    dataset_file: str | None,
    dataset_type: str | None,
    embedding_model: str | None,
    extra: dict | None = None,
    cwd: str | Path = ".",
) -> dict:
    """A schema-2.0 run record. ``tier_metrics`` maps record keys (``tier_1_metrics``…) to metric blocks;
    tiers that did not run are null. ``timestamp`` is the run's start (from its id) in ISO-8601 UTC.
    ``executive_summary`` and ``overall_status`` are computed here; ``overall_status`` is
    :func:`overall_status` of the tier blocks (and ``other_metrics``), or ``"failed"`` when ``extra["failures"]`` is non-empty."""
    unknown = sorted(set(tier_metrics) - set(TIER_KEYS))
    if unknown:
        raise ValueError(f"unknown tier key(s) {unknown}; use one of {list(TIER_KEYS)}")
    extra = dict(extra or {})
    bad = sorted(set(extra) - set(EXTRA_FIELDS))
    if bad:
        raise ValueError(f"build_record: unknown extra field(s) {bad}; allowed: {list(EXTRA_FIELDS)}")
    git = git_info(cwd)
    record: dict[str, Any] = {
        "id": run_id,
        "timestamp": _timestamp_of(run_id),
        "git_branch": git["branch"],
        "git_commit_hash": git["commit"],
        "run_author": git["author"],
        "schema_version": SCHEMA_VERSION,
        "dataset_file": dataset_file,
        "dataset_type": dataset_type,
        "judge_model": None,
        "generation_model": None,
        "embedding_model": embedding_model,
        "judge_eval_mode": None,
        "consistency_runs": None,
        **{key: tier_metrics.get(key) for key in TIER_KEYS},
        "model_runs": [],
        "executive_summary": "",
        "overall_status": "no-data",
    }
    record.update({k: v for k, v in extra.items()})
    record["embedding_encoder"] = _encoder_of(record)
    record["inputs"] = run_inputs(record)  # each notebook's own dataset, corpus and model (not the run's first)
    if record["model_runs"] is None:
        record["model_runs"] = []
    record = to_jsonable(record)
    mark_record(record)  # a judge Tier Judge found at chance on the team's labels: its grades here are marked
    record["overall_status"] = overall_status(status_blocks(record))
    if record.get("failures"):
        # a failed notebook must not leave the run looking healthy
        record["overall_status"] = "failed"
    record["executive_summary"] = executive_summary(record)
    return record
