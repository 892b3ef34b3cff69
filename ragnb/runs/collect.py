"""What a run's finished notebooks reported, gathered for its record: each notebook's metrics JSON, sorted into
tier blocks (:data:`ragnb.spec.TIERS`), other metrics and the record's descriptive fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragnb import spec
from ragnb.io import read_text

RECORD_FILE = "run_record.json"  # a run folder's own record (read back when the run is resumed)
# Record fields a notebook may report in its metrics JSON (or take as a parameter); first one wins.
RECORD_FIELDS = ("dataset_file", "dataset_type", "embedding_model", "judge_model", "generation_model",
                 "judge_eval_mode", "consistency_runs")


def read_metrics(path: Path) -> dict | None:
    if not path.exists():
        return None
    data = json.loads(read_text(path, "metrics JSON"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object of metrics")
    return data


def previous_record(run_dir: Path) -> dict:
    path = run_dir / RECORD_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(read_text(path, "run record"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def collect_reports(reports: dict[str, dict], run_dir: Path, all_params: dict) -> tuple[dict, dict, dict]:
    """Tier blocks, other metrics and record fields from the metrics JSON of finished reports."""
    tier_metrics: dict[str, dict] = {}
    other: dict[str, dict] = {}
    fields: dict[str, Any] = {}
    for key, report in reports.items():
        if report.get("status") == "failed":
            continue
        stem = report["stem"]
        tier = spec.by_stem(stem)
        if tier is not None and tier.post_record:  # reports about other runs (the dashboard): not this run's metrics
            continue
        try:
            metrics = read_metrics(run_dir / report.get("metrics", f"{stem}.metrics.json"))
        except (ValueError, OSError) as exc:
            report.update(status="failed", error=f"unreadable metrics JSON: {exc}")
            continue
        if metrics is None:
            continue
        if tier is not None and tier.record_key:
            tier_metrics[tier.record_key] = metrics
        else:
            other[stem] = metrics
        for name in RECORD_FIELDS:
            value = metrics.get(name, all_params.get(key, {}).get(name))
            if fields.get(name) is None and value is not None and not isinstance(value, (dict, list)):
                fields[name] = value
    return tier_metrics, other, fields
