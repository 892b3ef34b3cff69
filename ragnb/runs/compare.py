"""Compare benchmark runs: run A vs. run B item by item (metric trends over runs: :mod:`ragnb.runs.trends`).

Two runs are compared notebook by notebook. When both runs left a per-item file
(``<outputs>/runs/<run_id>/<stem>.per_item.parquet`` or ``.csv``) with an item id column, each metric is
compared on the items both runs scored (a *paired* comparison: the item-to-item variation cancels out,
so small real changes become visible). Otherwise the two aggregates are compared (*unpaired*). The tests,
their formulas and Holm's adjustment over the metrics of a comparison: :mod:`ragnb.runs.significance`.

Only like is compared with like (:mod:`ragnb.runs.comparability`), per metric family: a notebook whose two runs
used different datasets, corpora or item ids is "not comparable" — its metrics are listed with both means, but
no test is run and no verdict is given; ``Comparison.comparable`` is False and ``reasons`` says why — except its
page-level metrics (``doc_*``), which stay comparable, paired on the question id, when both runs scored the same
questions against the same relevant pages (a re-chunking, another retriever or embedding model); ``scope`` says
so. ``differences`` lists every parameter, model, dataset and database that differs between the two runs, and
``one_sided`` every metric that only one run recorded (with why, e.g. "run B's top_k = 3 cannot report
hit_rate@5"), for the gate.

A judged metric with human labels for some items in both runs (a ``<metric>_ppi`` block, docs/ppi.md) is compared
on the two PPI++ estimates (unpaired z from their 95% CIs), not on the judge's per-item scores; with labels in one
run only, on the judges' own means. The row's ``estimate`` and ``test`` and a note say which (comparability
rules are the same either way).

Metrics are matched by their current key (:func:`ragnb.spec.current_key`), so the ``faithfulness`` of an old
record's Tier 2/3 block meets the ``judge_faithfulness`` (or ``fallback_faithfulness``) of a newer one.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ragnb.io import comma_list, to_jsonable
from ragnb.metrics.registry import direction, level
from ragnb.runs import comparability
from ragnb.runs.history import (  # noqa: F401  (latest_run, resolve_outputs: read here by the dashboard notebook)
    Alignment, align, blocks_of, check_per_item, find_run, floats, is_numeric, latest_run, paired_stems,
    per_item_path, read_per_item, resolve_outputs, sort_runs,
)
from ragnb.runs.record import (  # noqa: F401  (RUNS_FILE, load_runs: read here by the dashboard notebook and tests)
    RUNS_FILE, iter_aggregates, load_runs, metric_value,
)
from ragnb.runs.significance import PPI_BOTH, estimates_compared, holm, paired_test, unpaired_test, verdict
from ragnb.spec import canonical_metric, current_key, label_of


# --------------------------------------------------------------------------------------------
# Metric direction
# --------------------------------------------------------------------------------------------


def higher_is_better(metric: str, tier_key: str | None = None) -> bool | None:
    """Whether a larger value of ``metric`` is better, from the metric registry
    (:func:`ragnb.metrics.registry.direction`: ``hit_rate@1`` → hit_rate, ``doc_mrr``, ``avg_faithfulness`` →
    faithfulness, ``faithfulness[gpt-x]`` → faithfulness). None for settings and counts (``consistency_runs``,
    ``n_items``) and for keys that name no registered metric. Every graded metric is registered with a direction
    that matches its thresholds (tests/metrics/test_registry_lists.py)."""
    found = direction(canonical_metric(metric, tier_key))
    return None if found is None else found == "higher"


def _is_metric(name: str, value: Any) -> bool:
    # Aggregates ({mean, ...}) are metrics; a plain number only when its name is a known metric
    # (settings such as consistency_runs are plain numbers too).
    if isinstance(value, dict):
        return metric_value(value) is not None
    return metric_value(value) is not None and higher_is_better(name) is not None


def metric_entries(block: dict) -> dict[str, Any]:
    """The metrics of a block: aggregates, and plain numbers with a known metric name."""
    return {name: value for name, value in iter_aggregates(block) if _is_metric(name, value)}


def current_entries(key: str, block: dict) -> dict[str, tuple[str, Any]]:
    """``{current key: (key in the record, aggregate)}`` for the metrics of block ``key`` (see
    :func:`ragnb.spec.current_key`: old records' renamed keys get today's name)."""
    return {current_key(name, key, block): (name, value) for name, value in metric_entries(block).items()}


def matches(metric: str, patterns: Iterable[str] | None) -> bool:
    """True if ``patterns`` is empty/None or one of them (shell-style: ``hit_rate@*``) matches ``metric``."""
    pats = [p for p in (patterns or []) if p]
    return not pats or any(fnmatch.fnmatchcase(metric, p) for p in pats)


def parse_patterns(text: str) -> list[str]:
    """``"hit_rate@*, mrr"`` → ``["hit_rate@*", "mrr"]`` (the notebook's ``metrics`` parameter)."""
    if not isinstance(text, str):
        raise ValueError(f"metrics must be a comma-separated text such as 'hit_rate@*,mrr', got {text!r}")
    return comma_list(text, "metrics")


# --------------------------------------------------------------------------------------------
# Run A vs. run B
# --------------------------------------------------------------------------------------------


def choose_runs(
    runs: list[dict], outputs: str | Path, run_a: str = "", run_b: str = "",
) -> tuple[str | None, str | None]:
    """The pair to compare: ``run_b`` or the latest run; ``run_a`` or the most recent run before B that
    shares a notebook with per-item files in both runs (a paired comparison) — preferring one whose shared
    notebooks recorded the same dataset and corpus fingerprints as B's (:func:`same_data`) — else the most recent earlier
    run sharing any notebook, else the run just before B. Defaults consider only runs with benchmark
    metrics. ``(None, None)`` without such runs, ``(None, B)`` without an earlier one. Unknown ids or
    ``run_a == run_b`` → ValueError (the message lists the ids)."""
    ordered = sort_runs(runs)
    if run_a:
        find_run(ordered, run_a)
    if run_b:
        find_run(ordered, run_b)
    if run_a and run_b and run_a == run_b:
        raise ValueError(f"run_a and run_b are both {run_a!r}; choose two different runs")
    # Defaults skip records without benchmark metrics (a failed run, a dashboard-only run).
    usable = [r for r in ordered if blocks_of(r)]
    if not run_b:
        others = [r for r in usable if str(r.get("id")) != run_a]
        if not others:
            return run_a or None, None
        run_b = str(others[-1]["id"])
    if run_a:
        return run_a, run_b
    b = find_run(ordered, run_b)
    earlier = list(reversed([r for r in ordered[: ordered.index(b)] if blocks_of(r)]))
    if not earlier:
        return None, run_b
    paired = [c for c in earlier if paired_stems(outputs, c, b)]
    for candidate in paired:  # a baseline on the same data first: a demo's reference run is on other data
        if same_data(candidate, b):
            return str(candidate["id"]), run_b
    for candidate in paired:
        return str(candidate["id"]), run_b
    shared = set(blocks_of(b))
    for candidate in earlier:
        if shared & set(blocks_of(candidate)):
            return str(candidate["id"]), run_b
    return str(earlier[0]["id"]), run_b


def same_data(a: dict, b: dict) -> bool:
    """Every notebook the two run records share recorded the same dataset and corpus fingerprints."""
    blocks_a, blocks_b = blocks_of(a), blocks_of(b)
    shared = [k for k in blocks_a if k in blocks_b]
    return bool(shared) and all(comparability.block_comparability(k, blocks_a[k][1], blocks_b[k][1])[0] is True
                                for k in shared)


COMPARISON_COLUMNS = [
    "tier_key", "notebook", "metric", "comparable", "paired", "test", "n_a", "n_b", "n_pairs", "n_nan_pairs", "n_changed", "mean_a", "mean_b",
    "delta", "ci_lo", "ci_hi", "p_value", "p_holm", "p_wilcoxon", "p_permutation", "higher_is_better", "verdict",
]


@dataclass
class Comparison:
    """Run A vs. run B: one row per (tier block, metric) in ``table``; ``alignment`` has one row per
    notebook (paired or not, items in each run, items paired, items in only one run and why)."""

    run_a: str
    run_b: str
    alpha: float
    table: pd.DataFrame
    alignment: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    comparable: bool | None = None  # False: some notebook used other data (reasons); None: not verifiable
    reasons: list[str] = field(default_factory=list)
    differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    scope: list[str] = field(default_factory=list)  # what is still compared where a notebook is not (doc_*)
    one_sided: list[dict] = field(default_factory=list)  # {tier_key, notebook, metric, run (the one that has it), why}
    recorded: list[str] = field(default_factory=list)  # every metric either run recorded (before any filter)

    @property
    def partly(self) -> bool:
        """Some metrics are not comparable, others are (e.g. chunk-level vs. page-level after a re-chunking)."""
        if self.comparable is not False or not len(self.table):
            return False
        return bool(self.table["comparable"].map(lambda v: v is not False and v is not np.False_).any())

    def records(self) -> list[dict]:
        """The table as JSON-ready dicts (NaN → None)."""
        return to_jsonable(self.table.astype(object).where(self.table.notna(), None).to_dict(orient="records"))

    def verdict_block(self) -> dict:
        """``comparable`` (true / false / null = could not be checked), ``reasons`` and ``differences`` (every
        parameter, model, dataset and database that differs), for the metrics JSON."""
        diff = self.differences
        return {"comparable": self.comparable, "partly_comparable": self.partly, "reasons": list(self.reasons),
                "comparable_scope": list(self.scope),
                "differences": to_jsonable(diff.to_dict(orient="records")) if len(diff) else []}


def _check(alpha: float, n_boot: int, run_a: str, run_b: str) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be ≥ 1, got {n_boot}")
    if run_a == run_b:
        raise ValueError(f"run_a and run_b are both {run_a!r}; choose two different runs")


@dataclass
class _Side:
    """One run's view of a block: the block's metrics by current key, its per-item file and table."""

    entries: dict[str, tuple[str, Any]]
    path: Path | None
    frame: pd.DataFrame | None = None

    def column(self, name: str) -> pd.Series | None:
        """The per-item values of metric ``name`` (current key), when numeric."""
        recorded = self.entries[name][0]
        if self.frame is None or recorded not in self.frame.columns or not is_numeric(self.frame[recorded]):
            return None
        return self.frame[recorded]

    def table(self, names: list[str]) -> pd.DataFrame:
        """The per-item table with the metrics' columns under their current keys."""
        renamed = {self.entries[n][0]: n for n in names if self.entries[n][0] != n}
        return self.frame.drop(columns=[n for n in renamed.values() if n in self.frame.columns]).rename(columns=renamed)


def _pair(key: str, a: _Side, b: _Side, names: list[str]) -> tuple[Alignment | None, list[str], str]:
    """Align the per-item tables of one block on the item id: ``(alignment, paired metrics, why not)``. A
    missing file leaves the block unpaired (said in ``why``); a file that is unreadable, or whose metric column
    holds text or values outside the metric's range, is a ValueError naming it: a damaged file never turns
    silently into an unpaired test, nor into data."""
    if a.path is None or b.path is None:
        return None, [], "per-item file missing for " + " and ".join(
            r for r, side in (("run A", a), ("run B", b)) if side.path is None)
    for side in (a, b):
        try:
            side.frame = read_per_item(side.path)
        except ImportError as exc:  # this environment cannot read parquet (and there is no CSV twin)
            return None, [], str(exc)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{side.path}: the per-item file cannot be read ({exc}); restore it (or re-run that "
                             "notebook), or move it aside to compare that notebook unpaired") from None
        check_per_item(side.path, side.frame, {side.entries[n][0]: canonical_metric(n, key) for n in names})
    columns = [n for n in names if a.column(n) is not None and b.column(n) is not None]
    if not columns:
        return None, [], "no per-item column"
    try:
        return align(a.table(columns), b.table(columns), columns), columns, ""
    except ValueError as exc:
        return None, [], str(exc)


def _alignment_row(key: str, stem: str | None, alignment: Alignment | None, why: str) -> dict:
    return {
        "tier_key": key, "notebook": stem, "paired": alignment is not None,
        "key": ", ".join(alignment.key) if alignment else None,
        "n_a": alignment.n_a if alignment else None, "n_b": alignment.n_b if alignment else None,
        "n_paired": alignment.n_paired if alignment else None,
        "only_in_a": len(alignment.only_a) if alignment else None,
        "only_in_b": len(alignment.only_b) if alignment else None,
        "note": why or None,
    }


def _metric_row(key: str, stem: str | None, name: str, a: _Side, b: _Side, alignment: Alignment | None,
                columns: list[str], why: str, tests: dict) -> dict:
    row: dict[str, Any] = {"tier_key": key, "notebook": stem, "metric": name,
                           "higher_is_better": higher_is_better(name, key)}
    agg_a, agg_b, estimate = estimates_compared(a.entries[name][1], b.entries[name][1])
    row["estimate"] = estimate or None
    if estimate == PPI_BOTH:  # the per-item judge scores are not the quantity: the two estimates are compared
        res = unpaired_test(agg_a, agg_b)
        row.update(res, paired=False, n_pairs=None, n_nan_pairs=None, n_changed=None)
        row["test"] = f"{PPI_BOTH}: {res['test']}"
        return row
    if alignment is not None and name in columns:
        res = paired_test(floats(alignment.merged[f"{name}_a"]), floats(alignment.merged[f"{name}_b"]), **tests)
        # n_a / n_b: valid values in each run's whole per-item file (paired or not)
        row.update(res, paired=True, n_a=int(a.column(name).notna().sum()), n_b=int(b.column(name).notna().sum()))
    else:
        res = unpaired_test(agg_a, agg_b)
        row.update(res, paired=False, n_pairs=None, n_nan_pairs=None, n_changed=None)
        row["test"] = f"{res['test']}; not paired: {why or 'no per-item column'}"
    if estimate:
        row["test"] += f"; {estimate}"
    return row


def _not_comparable_row(key: str, stem: str | None, name: str, a: _Side, b: _Side) -> dict:
    """Both means and their difference, for reading only: no test, no CI of Δ, no verdict."""
    agg_a, agg_b, estimate = estimates_compared(a.entries[name][1], b.entries[name][1])
    ma, mb = metric_value(agg_a), metric_value(agg_b)
    return {"tier_key": key, "notebook": stem, "metric": name, "comparable": False, "paired": False,
            "estimate": estimate or None,
            "higher_is_better": higher_is_better(name, key), "mean_a": ma, "mean_b": mb,
            "delta": None if ma is None or mb is None else mb - ma,
            "test": "not tested: not comparable (reasons above)"}


@dataclass
class _Verdict:
    """Comparability of one block: the notebook's rule (``flag``, ``reasons``) and, for its page-level metrics,
    ``page_flag`` with ``scope`` (what they rest on) when that differs."""

    flag: bool | None
    reasons: list[str]
    page_flag: bool | None
    scope: str = ""

    def of(self, name: str) -> bool | None:
        return self.page_flag if level(name) == "page" else self.flag

    def flags(self, names: list[str]) -> list[bool | None]:
        return [f for f, used in ((self.flag, any(level(n) != "page" for n in names)),
                                  (self.page_flag, any(level(n) == "page" for n in names))) if used]


def _block_verdict(key: str, a: _Side, b: _Side, blocks: tuple[dict, dict], alignment: Alignment | None,
                   names: list[str]) -> _Verdict:
    only_a, only_b = (alignment.only_a, alignment.only_b) if alignment is not None else (None, None)
    flag, reasons = comparability.block_comparability(key, *blocks, only_a, only_b)
    if flag is True or alignment is None or not any(level(n) == "page" for n in names):
        return _Verdict(flag, reasons, flag)
    page_flag, text = comparability.page_comparability(key, a.frame, b.frame, alignment)
    if page_flag is None:
        return _Verdict(flag, reasons + ([text] if flag is False else []), flag)
    if page_flag is False:
        return _Verdict(flag, reasons + ([text] if text else []), False)
    label = label_of(key)  # the notebook's reasons now concern its other metrics only: one line that says so
    reasons = [f"{label}, every metric but the page-level ones: "
               + "; ".join(r.removeprefix(f"{label}: ") for r in reasons)] if reasons else []
    return _Verdict(flag, reasons, True, text)


def _compare_block(key: str, stem: str | None, a: _Side, b: _Side, blocks: tuple[dict, dict],
                   metrics: Iterable[str] | None, tests: dict) -> tuple[list[dict], dict | None, _Verdict | None]:
    """Rows of one block present in both runs, its alignment row, and its comparability (None when nothing
    is compared)."""
    names = [n for n in a.entries if n in b.entries and matches(n, metrics)]
    if not names:
        return [], None, None
    alignment, columns, why = _pair(key, a, b, names)
    verdict_ = _block_verdict(key, a, b, blocks, alignment, names)
    rows = [{**(_not_comparable_row(key, stem, n, a, b) if verdict_.of(n) is False
                else {**_metric_row(key, stem, n, a, b, alignment, columns, why, tests), "comparable": verdict_.of(n)}),
             **_item_counts(a.entries[n][1], b.entries[n][1])}
            for n in names]
    return rows, _alignment_row(key, stem, alignment, why), verdict_


def _item_counts(agg_a: Any, agg_b: Any) -> dict:
    """Each run's items and failed items of a metric, from its aggregate (``n``, ``n_failed``; None when the
    record has no counts): the gate fails a metric whose failed share is too high (:mod:`ragnb.runs.gate`)."""
    out = {}
    for side, agg in (("a", agg_a), ("b", agg_b)):
        counts = agg if isinstance(agg, dict) else {}
        out[f"n_items_{side}"], out[f"n_failed_{side}"] = counts.get("n"), counts.get("n_failed")
    return out


def _table(rows: list[dict], alpha: float) -> pd.DataFrame:
    """The comparison table with Holm-adjusted p-values and verdicts (module docstring of significance)."""
    table = pd.DataFrame(rows)
    for col in COMPARISON_COLUMNS:
        if col not in table:
            table[col] = None
    table = table[COMPARISON_COLUMNS + [c for c in table.columns if c not in COMPARISON_COLUMNS]]
    if not len(table):
        return table
    for col in ("n_a", "n_b", "n_pairs", "n_nan_pairs", "n_changed", "n01", "n10", "n_items_a", "n_failed_a",
                "n_items_b", "n_failed_b"):
        if col in table:
            table[col] = pd.to_numeric(table[col], errors="coerce").astype("Int64")
    p = table["p_value"].astype(float)
    unchanged = (table["n_changed"] == 0).fillna(False).to_numpy(dtype=bool)
    table["p_holm"] = holm(p.where(~unchanged))  # unchanged metrics cannot be rejected: not in m
    table.loc[unchanged, "p_holm"] = 1.0
    table["verdict"] = [
        "not comparable" if ok is False
        else verdict(d, p, alpha, h) + ("" if paired else " (unpaired)") if not (p is None or math.isnan(p))
        else "not tested"
        for d, p, h, paired, ok in zip(table["delta"].astype(float), table["p_holm"].astype(float),
                                       table["higher_is_better"], table["paired"], table["comparable"])
    ]
    table["paired"] = table["paired"].astype(bool)
    return table


def _alignment_frame(align_rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(align_rows, columns=["tier_key", "notebook", "paired", "key", "n_a", "n_b", "n_paired",
                                              "only_in_a", "only_in_b", "note"])
    for col in ("n_a", "n_b", "n_paired", "only_in_a", "only_in_b"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("Int64")
    return frame


def compare_runs(
    runs: list[dict], outputs: str | Path, run_a: str, run_b: str, alpha: float = 0.05, n_boot: int = 1000,
    metrics: Iterable[str] | None = None, seed: int = 0, n_perm: int = 10000,
) -> Comparison:
    """Compare every metric that both runs recorded, per notebook: paired on the per-item files when both
    exist and share an item id column, otherwise from the aggregates. See the module docstring."""
    _check(alpha, n_boot, run_a, run_b)
    a, b = find_run(runs, run_a), find_run(runs, run_b)
    blocks_a, blocks_b = blocks_of(a), blocks_of(b)
    outputs = Path(outputs)
    tests = {"n_boot": n_boot, "seed": seed, "n_perm": n_perm}
    rows: list[dict] = []
    align_rows: list[dict] = []
    flags: list[bool | None] = []
    reasons: list[str] = []
    scope: list[str] = []
    for key in [k for k in blocks_a if k in blocks_b]:
        (stem, block_a), (_, block_b) = blocks_a[key], blocks_b[key]
        side_a = _Side(current_entries(key, block_a), per_item_path(outputs, run_a, stem, a) if stem else None)
        side_b = _Side(current_entries(key, block_b), per_item_path(outputs, run_b, stem, b) if stem else None)
        block_rows, align_row, found = _compare_block(key, stem, side_a, side_b, (block_a, block_b), metrics, tests)
        rows += block_rows
        align_rows += [align_row] if align_row else []
        if found is not None:
            flags += found.flags([r["metric"] for r in block_rows])
            reasons += found.reasons
            scope += [found.scope] if found.scope else []
    one_sided = one_sided_metrics(a, b, metrics)
    notes = [f"{label_of(key)}: only run {group[0]['run']} has results (not compared)."
             if key not in blocks_a or key not in blocks_b
             else f"{label_of(key)}: only one run has {', '.join(r['metric'] for r in group)} (not compared)."
             for key, group in _by_tier(one_sided).items()]
    notes += [f"{label_of(r['tier_key'])} {r['metric']}: compared on {r['estimate']}." for r in rows
              if r.get("estimate")]
    table = _table(rows, alpha)
    if table.empty:
        notes.append("The two runs have no metric in common" + (" matching the metrics filter." if metrics else "."))
    comparable = comparability.overall(flags) if flags else None
    if comparable is None and flags:
        notes.append("Neither run recorded what data it used for some notebooks (older records): that the runs "
                     "compared like with like could not be checked.")
    recorded = sorted({n for run in (a, b) for k, (_, blk) in blocks_of(run).items() for n in current_entries(k, blk)})
    return Comparison(run_a, run_b, alpha, table, _alignment_frame(align_rows), notes, comparable, reasons,
                      comparability.differences(a, b, blocks_a, blocks_b), scope, one_sided, recorded)


def _by_tier(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["tier_key"], []).append(row)
    return out


def _top_k(run: dict, key: str, stem: str | None, block: dict) -> int | None:
    """The retrieval depth a run's notebook used: its ``info.top_k``, else the ``top_k`` parameter."""
    info = block.get("info") if isinstance(block.get("info"), dict) else {}
    params = run.get("params") or {}
    found = [info.get("top_k")] + [(params.get(n) or {}).get("top_k") for n in (stem, key) if n]
    return next((int(v) for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)), None)


def _why_missing(side: str, run: dict, key: str, stem: str | None, block: dict | None, metric: str) -> str:
    if block is None:
        return f"run {side} has no {label_of(key)} results, so no {metric}"
    cut = metric.rsplit("@", 1)[1] if "@" in metric else ""
    top_k = _top_k(run, key, stem, block)
    if cut.isdigit() and top_k is not None and top_k < int(cut):
        return f"run {side}'s top_k = {top_k} cannot report {metric}"
    return f"run {side} did not record {metric}"


def one_sided_metrics(a: dict, b: dict, metrics: Iterable[str] | None = None) -> list[dict]:
    """Every metric (matching ``metrics``) that one run recorded and the other did not, per notebook:
    ``{tier_key, notebook, metric, run: the run that has it, why: why the other has not}``."""
    blocks_a, blocks_b = blocks_of(a), blocks_of(b)
    out = []
    for key in list(blocks_a) + [k for k in blocks_b if k not in blocks_a]:
        stem = (blocks_a.get(key) or blocks_b.get(key))[0]
        block_a, block_b = (blocks_a.get(key) or (None, None))[1], (blocks_b.get(key) or (None, None))[1]
        names_a = set(current_entries(key, block_a)) if block_a is not None else set()
        names_b = set(current_entries(key, block_b)) if block_b is not None else set()
        for name in sorted((names_a ^ names_b), key=lambda n: (n.split("@")[0], len(n), n)):
            if matches(name, metrics):
                has, lacks, run, block = ("A", "B", b, block_b) if name in names_a else ("B", "A", a, block_a)
                out.append({"tier_key": key, "notebook": stem, "metric": name, "run": has,
                            "why": _why_missing(lacks, run, key, stem, block, name)})
    return out
