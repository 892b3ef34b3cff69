"""Run records: ids, git info, status (thresholds from :mod:`ragnb.spec`), number format, atomic append.

A run record follows the ``benchmark_runs.json`` schema 2.0 (see README, Concepts; one JSON object per run in a
JSON array). ragnb adds a few fields of its own after the schema fields (``reports``, ``failures``,
``params``, ``other_metrics``, ``duration_s``, ``ragnb_version``, ``embedding_encoder`` — what made the
vectors: backend, model, prompts, dimension, fingerprint, device —, ``inputs`` — each notebook's own dataset, corpus and
model, :func:`ragnb.runs.summary.run_inputs`); readers of schema 2.0 ignore them.
"""

from __future__ import annotations

import datetime as _dt
import getpass
import json
import os
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock

from ragnb import spec
from ragnb.io import atomic_write_text, dumps_strict, read_text, to_jsonable
# metric_value and fmt_number live beside aggregate (below the tiers and the notebooks, which read them too);
# run-record readers keep importing them from here.
from ragnb.metrics.stats import degenerate_reason, fmt_number, metric_value
from ragnb.spec import THRESHOLDS, TIER_KEYS

RUNS_FILE = "benchmark_runs.json"  # every run's record, in the outputs folder

# --------------------------------------------------------------------------------------------
# Ids, git, author
# --------------------------------------------------------------------------------------------

_RUN_ID = re.compile(r"^(?P<ts>\d{8}-\d{6})(?:-[0-9a-z]+)?$")


def new_run_id() -> str:
    """``YYYYMMDD-HHMMSS-xxxx`` in UTC; sorts by start time, the suffix separates runs started in the same second."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


RUNS_DIR = "runs"  # the outputs folder's folder of run folders: <outputs>/runs/<run_id>/
_RUN_ID_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_NEW_ID = "`ragnb run` without --run-id makes a new timestamped one"


def check_run_id(run_id: str) -> str:
    """``run_id`` if it can name a run folder: 1–100 ASCII letters, digits, ``-``, ``_`` and ``.``, starting with a
    letter or digit — so never empty, ``.``, ``..``, hidden, or holding a path separator. ValueError otherwise."""
    if isinstance(run_id, str) and not run_id.strip():
        raise ValueError(f"run id {run_id!r} is empty (an unset variable such as $RUN_ID?); give a run id such as "
                         f"'20250101-120000-ab12' (`ragnb runs list` lists them; {_NEW_ID})")
    if not isinstance(run_id, str) or not _RUN_ID_CHARS.fullmatch(run_id):
        raise ValueError(
            f"run id {run_id!r} is not usable as a folder name; use 1–100 letters, digits, '-', '_' or '.', "
            f"starting with a letter or digit (no '/', no '..'; {_NEW_ID})"
        )
    return run_id


def run_folder(outputs: str | Path, run_id: str) -> Path:
    """``<outputs>/runs/<run_id>``, after :func:`check_run_id` — the one way a run id becomes a path."""
    return Path(outputs) / RUNS_DIR / check_run_id(run_id)


def _git(cwd: Path, *args: str) -> str | None:
    # Read-only plumbing commands only: nothing here may take .git/index.lock.
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=cwd, capture_output=True, text=True, timeout=10,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None


def git_info(cwd: str | Path = ".") -> dict[str, str | None]:
    """``{"branch", "commit", "author"}`` of the repository at ``cwd``; None values outside a repo.

    The branch of a detached HEAD is ``"HEAD"``. The author comes from ``RAGNB_AUTHOR``, then
    ``git config user.name``, then the OS user. Never raises.
    """
    cwd = Path(cwd)
    if not cwd.is_dir():
        cwd = Path.cwd()
    commit = _git(cwd, "rev-parse", "--verify", "-q", "HEAD")
    branch = _git(cwd, "symbolic-ref", "--short", "-q", "HEAD") or ("HEAD" if commit else None)
    author = os.environ.get("RAGNB_AUTHOR") or _git(cwd, "config", "user.name")
    if not author:
        try:
            author = getpass.getuser()
        except Exception:  # no user name in some containers
            author = None
    return {"branch": branch, "commit": commit, "author": author}


def git_text(record: dict, width: int = 12) -> str | None:
    """What a page shows of a run's code version: ``main @ 0123456789ab`` (the commit cut to ``width``), the
    branch or the commit alone when only one is known, and None outside a git checkout — so a page leaves the line
    out instead of printing ``— @ —``."""
    branch, commit = record.get("git_branch"), record.get("git_commit_hash")
    commit = str(commit)[:width] if commit else None
    return " @ ".join(str(p) for p in (branch, commit) if p) or None


# --------------------------------------------------------------------------------------------
# Status (thresholds of ragnb.spec; see docs/metrics.md, Thresholds)
# --------------------------------------------------------------------------------------------

STATUS_ORDER = spec.STATUSES  # worst first


def _grade(bounds: tuple[float, float] | None, value: Any) -> str | None:
    # The rule (bands, never grading what says nothing here, the trivial baselines) is ragnb.spec.grade_of.
    return spec.grade_of(bounds, value).status


def status_of(metric: str, value: Any, tier_key: str | None = None) -> str | None:
    """``"excellent"`` if value > upper bound, ``"attention"`` if value < lower bound, else ``"good"``.

    None for metrics without a threshold, for missing/NaN values and for aggregates flagged ``constant`` or
    ``few_items`` (:func:`ragnb.metrics.stats.degenerate_reason`). ``value`` may be a number or an aggregate
    dict with ``mean``.
    """
    return _grade(THRESHOLDS.get(spec.canonical_metric(metric, tier_key)), value)


def iter_aggregates(block: Any) -> Iterator[tuple[str, Any]]:
    """(name, aggregate) pairs of a tier block: its top-level entries and those under ``metrics``; a judged
    metric with human labels for some items yields its PPI estimate (:func:`ppi_view`)."""
    if not isinstance(block, dict):
        return
    nested = block.get("metrics")
    for source in (block, nested if isinstance(nested, dict) else {}):
        for name, value in source.items():
            if name != "metrics" and metric_value(value) is not None:
                yield name, ppi_view(name, value, source)


def ppi_view(name: str, value: Any, block: dict) -> Any:
    """The aggregate the record grades and ``ragnb compare`` compares for metric ``name`` of ``block``: when the
    block has ``<name>_ppi`` with an interval (human labels for some items, :mod:`ragnb.tiers.human_labels`), its
    PPI++ estimate as ``{mean, ci95, n (items), n_valid, n_failed, n_labels, estimator, few_items, judge_only}`` —
    ``judge_only`` the judge's own aggregate it replaces; else ``value`` unchanged."""
    from ragnb.metrics.ppi_items import PPI_SUFFIX

    ppi = block.get(name + PPI_SUFFIX)
    if not isinstance(value, dict) or not isinstance(ppi, dict):
        return value
    if any(metric_value(ppi.get(k)) is None for k in ("estimate", "ci_low", "ci_high")):
        return value  # fewer than 2 labels: no interval, the judge's aggregate stays (the report says why)
    view = {"mean": ppi["estimate"], "ci95": [ppi["ci_low"], ppi["ci_high"]], "n": ppi.get("N"),
            "n_valid": value.get("n_valid"), "n_failed": ppi.get("n_failed"), "n_labels": ppi.get("n"),
            "estimator": ppi.get("method"), "judge_only": value}
    if "few_items" in value:  # too few items says nothing, whatever the estimator ("constant" is the judge's)
        view["few_items"] = value["few_items"]
    if ppi["ci_low"] == ppi["ci_high"]:  # a zero-width interval (an older record's all-equal labels) says nothing
        view["constant"] = True
    return view


def is_ppi(value: Any) -> bool:
    """Whether an aggregate of :func:`iter_aggregates` is a PPI estimate (:func:`ppi_view`)."""
    return isinstance(value, dict) and isinstance(value.get("judge_only"), dict) and "n_labels" in value


def block_status(name: str, value: Any, tier_key: str, block: Any) -> str | None:
    """:func:`status_of` for a metric inside a tier block — except that a metric whose threshold grades an
    LLM judge is not graded when the block was judged by the offline fallback (:func:`ragnb.spec.thresholds_of`)."""
    return _grade(spec.thresholds_of(name, tier_key, block), value)


def ungraded_degenerate(metrics_by_tier: dict[str, Any], rule: str = "says_nothing") -> list[tuple[str, str, str]]:
    """(tier_key, metric, reason) for every thresholded metric left ungraded by ``rule`` of
    :func:`ragnb.spec.grade_of`: "says_nothing" (constant, or too few items), "baselines" (no CI to compare
    it with its trivial baselines), "uninformative" (the offline judge near chance on held-out data of its kind)
    or "judge_unvalidated" (its judge at chance on the team's labels in Tier Judge)."""
    out = []
    for tier_key, block in (metrics_by_tier or {}).items():
        for name, value in iter_aggregates(block):
            grade = spec.grade_of(spec.thresholds_of(name, tier_key, block), value)
            if grade.status is None and grade.rule == rule:
                out.append((tier_key, name, grade.reason))
    return out


def tier_statuses(metrics_by_tier: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    """(tier_key, metric, aggregate, status) for every graded metric with a value."""
    out = []
    for tier_key, block in (metrics_by_tier or {}).items():
        for name, value in iter_aggregates(block):
            status = block_status(name, value, tier_key, block)
            if status is not None:
                out.append((tier_key, name, value, status))
    return out


def record_statuses(record: dict) -> list[tuple[str, str, Any, str]]:
    """:func:`tier_statuses` of every block of a run record (tiers and ``other_metrics``) — the grading its
    ``overall_status`` is computed from, for a CI gate to name what needs attention."""
    return tier_statuses(status_blocks(record))


def overall_status(metrics_by_tier: dict[str, Any]) -> str:
    """Worst status over all thresholded metrics of all tiers; ``"no-data"`` if none is present."""
    statuses = {s for *_, s in tier_statuses(metrics_by_tier)}
    for status in STATUS_ORDER:
        if status in statuses:
            return status
    return "no-data"


# --------------------------------------------------------------------------------------------
# Executive summary
# --------------------------------------------------------------------------------------------


def format_aggregate(value: Any) -> str:
    """``0.620 (95% CI 0.550–0.690, n=200)`` for an aggregate dict, ``0.620`` for a number; a flagged aggregate
    adds ``— says nothing here: <reason>`` (:func:`ragnb.metrics.stats.degenerate_reason`)."""
    text = fmt_number(value)
    if isinstance(value, dict):
        extras = []
        ci = value.get("ci95")
        if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(metric_value(c) is not None for c in ci):
            extras.append(f"95% CI {fmt_number(ci[0])}–{fmt_number(ci[1])}")
        if value.get("n") is not None:
            extras.append(f"n={value['n']}")
        if is_ppi(value):
            extras.append(f"PPI++ with {value['n_labels']} human labels")
        if value.get("n_failed"):
            extras.append(f"{value['n_failed']} failed")
        if extras:
            text += f" ({', '.join(extras)})"
        reason = degenerate_reason(value)
        if reason:
            text += f" — says nothing here: {reason}"
    return text


def status_blocks(record: dict) -> dict[str, Any]:
    """Tier blocks plus the blocks of notebooks without a schema tier (``other_metrics``, keyed ``other:<stem>``)."""
    blocks: dict[str, Any] = {k: record.get(k) for k in TIER_KEYS}
    blocks.update({f"other:{k}": v for k, v in (record.get("other_metrics") or {}).items()})
    return blocks


# --------------------------------------------------------------------------------------------
# benchmark_runs.json
# --------------------------------------------------------------------------------------------


def load_runs(path: str | Path) -> list[dict]:
    """All run records in ``path`` (a JSON array); ``[]`` if the file does not exist or is empty."""
    path = Path(path)
    if not path.exists():
        return []
    text = read_text(path, "run records file")
    if not text.strip():
        return []
    fix = f"move it aside (e.g. `mv {path} {path}.corrupt`) and run again; ragnb will not overwrite it"
    try:
        runs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); {fix}") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(f"{path} is not a JSON array of run records; {fix}")
    return runs


def append_run_record(path: str | Path, record: dict, timeout: float = 120.0) -> Path:
    """Append ``record`` to the JSON array in ``path`` atomically and safely under concurrent writers.

    Holds ``<path>.lock`` while it reads, appends, writes a temp file, fsyncs and ``os.replace``s.
    A record whose ``id`` is already present replaces that entry (a resumed run updates its record).
    A corrupt existing file is never overwritten: ValueError tells the user to move it aside.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = to_jsonable(record)
    with FileLock(str(path) + ".lock", timeout=timeout):
        runs = load_runs(path)
        same = [i for i, r in enumerate(runs) if clean.get("id") is not None and r.get("id") == clean.get("id")]
        if same:
            runs[same[0]] = clean
        else:
            runs.append(clean)
        atomic_write_text(path, dumps_strict(runs) + "\n")
    return path
