"""Run A vs. run B for a terminal or a pull-request comment, and the CI gate on it.

The statistics are :func:`ragnb.runs.compare.compare_runs` (the dashboard's); this module only decides and
formats. Gate (``ragnb compare --fail-if-worse m1,m2``), for the metrics matching the patterns:

* every name or pattern must name a metric: one the registry knows (``hit_rate@5``, ``doc_mrr``) or one that
  matches a metric either run recorded; otherwise :func:`check_names` raises (a usage error, exit 2);
* **page-level stand-ins**: a gated chunk-level metric that is not comparable (the runs used other chunks: a
  re-chunking, another corpus build) is gated through its page-level version (``hit_rate@5`` →
  ``doc_hit_rate@5``, :func:`ragnb.metrics.registry.page_level_version`) when that version was recorded by both
  runs and is comparable (same question ids and relevant pages); the chunk-level row keeps its "not comparable"
  verdict and the gate's message names every substitution, so nobody reads a page-level result as a chunk-level
  one. Only metrics the pattern itself matched are substituted (``hit_rate@*`` never gates ``doc_hit_rate@3``
  unless ``hit_rate@3`` was recorded);
* a gated metric that one run recorded and the other did not (``hit_rate@5`` after top_k 10 → 3), or a gated
  name that neither run recorded → ``"missing"`` with the reason, unless ``allow_missing`` (then it is listed as
  not gated — but a gate left with nothing to decide on still fails);
* a gated metric with no registered direction (neither higher nor lower is better) cannot be gated: a
  ``ValueError`` (a usage error, exit 2) names it;
* some row's verdict is "B worse" (Holm-adjusted p < α, in the metric's bad direction) → ``"worse"``;
* a gated metric that failed on more than ``max_failed`` of its items in either run (``n_failed / n``: a judge
  that refused requests, an endpoint that gave up) → ``"too many failed"`` with the counts (``n_valid of n``):
  the surviving items are not the run's items, and a test on them would pass a broken run;
* a gated metric that is not comparable and has no comparable page-level version → ``"not comparable"``: no
  winner is named and the gate cannot decide;
* otherwise → ``"pass"``. "worse" wins over "too many failed", that over "missing", and all over
  "not comparable".
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any

from ragnb.metrics.registry import page_level_version, resolve
from ragnb.runs.compare import Comparison, matches
from ragnb.spec import label_of

_WILDCARDS = "*?["


@dataclass
class Gate:
    outcome: str  # "pass", "worse", "too many failed", "missing", "not comparable", "no gate"
    worse: list[dict] = field(default_factory=list)  # rows of gated metrics where B is significantly worse
    gated: list[str] = field(default_factory=list)  # metrics the gate decided on (page-level stand-ins included)
    message: str = ""
    substituted: list[dict] = field(default_factory=list)  # {tier_key, metric, page_level}: chunk-level → stand-in
    missing: list[str] = field(default_factory=list)  # why each gated metric missing from a run is missing
    not_comparable: list[str] = field(default_factory=list)  # gated metrics the gate cannot decide on
    failed: list[str] = field(default_factory=list)  # gated metrics with too many failed items, with the counts


MAX_FAILED = 0.05  # the share of failed items a gated metric may have in either run (--max-failed)


def check_names(patterns: list[str], comparison: Comparison, option: str) -> None:
    """ValueError (a usage error) for a name or pattern that names no metric: neither registered nor matching
    a metric either run recorded (module docstring)."""
    for pattern in patterns:
        if any(fnmatch.fnmatchcase(n, pattern) for n in comparison.recorded):
            continue
        if not any(c in pattern for c in _WILDCARDS) and resolve(pattern) is not None:
            continue
        raise ValueError(f"{option}: unknown metric {pattern!r} — no registered metric has that name and neither "
                         f"run recorded a metric matching it; these runs recorded: "
                         f"{', '.join(comparison.recorded) or '(none)'} (shell patterns such as 'hit_rate@*' work)")


def compared_patterns(shown: list[str], gated: list[str]) -> list[str] | None:
    """The metrics to compare for ``--metrics shown`` and ``--fail-if-worse gated``: None (all) without
    ``shown``, else both lists plus the page-level version of each gated pattern (its possible stand-ins)."""
    if not shown:
        return None
    return shown + gated + [f"doc_{p}" for p in gated if not p.startswith("doc")]


def _where(row: dict) -> str:
    return f"{label_of(row['tier_key'])} {row['metric']}"


def _stand_ins(rows: list[dict], comparison: Comparison) -> tuple[list[dict], list[dict], list[str]]:
    """``(rows to decide on, page-level stand-ins of chunk-level rows, gated metrics nobody can decide on)``."""
    by_key = {(r["tier_key"], r["metric"]): r for r in comparison.records()}
    decide: dict[tuple, dict] = {}
    substituted: list[dict] = []
    undecidable: list[str] = []
    for row in rows:
        if row.get("comparable") is not False:
            decide[(row["tier_key"], row["metric"])] = row
            continue
        alt = page_level_version(row["metric"])
        stand_in = by_key.get((row["tier_key"], alt)) if alt else None
        if stand_in is not None and stand_in.get("comparable") is not False:
            decide[(row["tier_key"], alt)] = stand_in
            substituted.append({"tier_key": row["tier_key"], "metric": row["metric"], "page_level": alt})
        else:
            undecidable.append(_where(row) + (f" (its page-level version {alt} is not comparable either)"
                                              if stand_in is not None else ""))
    return list(decide.values()), substituted, undecidable


def _missing(patterns: list[str], comparison: Comparison) -> list[str]:
    """Why each gated metric that only one run (or neither) recorded cannot be compared."""
    out = [f"{label_of(r['tier_key'])}: {r['why']} (run {r['run']} reports it)"
           for r in comparison.one_sided if matches(r["metric"], patterns)]
    in_a_run = set(comparison.recorded)
    out += [f"neither run recorded {p}" for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in in_a_run)]
    return out


def check_max_failed(max_failed: float) -> float:
    """``max_failed`` as a share in [0, 1), else a ValueError naming the fix."""
    if not (isinstance(max_failed, (int, float)) and 0 <= max_failed < 1):
        raise ValueError(f"--max-failed {max_failed!r}: give the share of failed items a gated metric may have, "
                         f"from 0 up to (not including) 1 — e.g. 0.05 for 5% (the default)")
    return float(max_failed)


def _check_directions(rows: list[dict]) -> None:
    """A gated metric must have a registered direction, else "worse" means nothing and the gate always passes."""
    blind = [_where(r) for r in rows if r.get("higher_is_better") is None]
    if blind:
        raise ValueError(f"--fail-if-worse: {', '.join(blind)} has no registered direction (the registry does not "
                         "say whether higher or lower is better), so the gate could never find it worse; gate on a "
                         "registered metric, or register it (CONTRIBUTING.md, Adding a metric)")


def _share(count: int, n: int) -> str:
    return f"{100 * count / n:.3g}%"


def too_many_failed(rows: list[dict], max_failed: float) -> list[str]:
    """``"<notebook> <metric>: run B scored 13 of 20 items (7 failed, 35% > 5%)"`` for each gated row whose
    failed share exceeds ``max_failed`` in either run."""
    out = []
    for r in rows:
        for side in ("a", "b"):
            n, failed = r.get(f"n_items_{side}"), r.get(f"n_failed_{side}")
            if n and failed is not None and failed / n > max_failed:
                out.append(f"{_where(r)}: run {side.upper()} scored {n - failed} of {n} items ({failed} failed, "
                           f"{_share(failed, n)} > the {100 * max_failed:g}% limit)")
    return out


def _substitution_notes(substituted: list[dict]) -> list[str]:
    """One sentence per notebook whose chunk-level gated metrics stand in through their page-level versions."""
    parts = []
    for key in dict.fromkeys(s["tier_key"] for s in substituted):
        mine = [s for s in substituted if s["tier_key"] == key]
        parts.append(f"{label_of(key)}: the chunk-level {', '.join(s['metric'] for s in mine)} are not comparable "
                     "between these runs (why: see the comparability line), so the gate decides on their page-level "
                     f"versions {', '.join(s['page_level'] for s in mine)} (same questions, same relevant pages)")
    return parts


def gate(comparison: Comparison, patterns: list[str], allow_missing: bool = False,
         max_failed: float = MAX_FAILED) -> Gate:
    """The gate's outcome for the metrics matching ``patterns`` (module docstring). Call :func:`check_names`
    first: an unknown name is a usage error, not a gate outcome."""
    if not patterns:
        return Gate("no gate")
    max_failed = check_max_failed(max_failed)
    rows = [r for r in comparison.records() if matches(r["metric"], patterns)]
    _check_directions(rows)
    decide, substituted, undecidable = _stand_ins(rows, comparison)
    missing = _missing(patterns, comparison)
    gated = sorted({r["metric"] for r in decide})
    worse = [r for r in decide if str(r.get("verdict") or "").startswith("B worse")]
    failed = too_many_failed(decide, max_failed)
    parts = _substitution_notes(substituted)
    if missing:
        parts.append(("not gated (--allow-missing): " if allow_missing else "missing from a run: ")
                     + "; ".join(missing))
    if undecidable:
        parts.append("not comparable (reasons below), so the gate cannot decide on " + ", ".join(undecidable))
    if worse:
        parts.append("run B is significantly worse on " + ", ".join(
            f"{_where(r)} (Δ {_num(r.get('delta'))}, p_holm {_p(r.get('p_holm'))})" for r in worse))
    if failed:
        parts.append("too many failed items to gate on (--max-failed): " + "; ".join(failed))
    if worse or failed:
        outcome = "worse" if worse else "too many failed"
    elif missing and not allow_missing:
        outcome = "missing"
        parts.append("a gated metric that a run cannot report fails the gate (--allow-missing gates the others)")
    elif missing and not decide and not undecidable:  # --allow-missing, but nothing is left: nothing was checked
        outcome = "missing"
        parts.append("no gated metric is left to decide on, so the gate fails")
    elif undecidable:
        outcome = "not comparable"
    else:
        outcome = "pass"
        parts.append(f"no gated metric is significantly worse ({', '.join(gated) or 'none left to gate'})")
    return Gate(outcome, worse, gated, "; ".join(parts), substituted, missing, undecidable, failed)


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    x = float(x)
    if x.is_integer() and abs(x) >= 2:
        return f"{int(x):,}"
    return f"{x:.3f}"


def _delta(row: dict) -> str:
    d = row.get("delta")
    if d is None or (isinstance(d, float) and math.isnan(d)):
        return "—"
    text = f"{float(d):+.3f}"
    lo, hi = row.get("ci_lo"), row.get("ci_hi")
    if lo is not None and hi is not None and not (math.isnan(float(lo)) or math.isnan(float(hi))):
        text += f" [{float(lo):+.3f}, {float(hi):+.3f}]"
    return text


def _p(p: Any) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    return "<0.001" if float(p) < 0.001 else f"{float(p):.3f}"


_ICONS = {"pass": "✅", "worse": "❌", "too many failed": "❌", "missing": "❌", "not comparable": "⚠️", "no gate": ""}


def comparability_line(comparison: Comparison) -> str:
    """What the comparison rests on; the reasons for what is not comparable, stated once."""
    if not len(comparison.table):
        return "Nothing compared: no metric that both runs recorded matches the filter."
    if comparison.partly:
        return ("**Partly comparable** — " + "; ".join(comparison.scope or ["some metrics are compared"])
                + ". **Not comparable**, so no winner is named for them: " + "; ".join(comparison.reasons))
    if comparison.comparable is False:
        return ("**Not comparable** — the runs used different data, so no winner is named: "
                + "; ".join(comparison.reasons))
    if comparison.comparable is None:
        return "Comparability not verified: the runs did not record which data they used."
    return "Comparable: same dataset and corpus in both runs."


SHOW_ALL_UP_TO = 8  # a comparison of at most this many metrics is shown whole
_CHANGED = ("B better", "B worse", "B higher", "B lower", "not comparable")


def _split_rows(rows: list[dict], gated: set[str]) -> tuple[list[dict], list[dict]]:
    """``(in view, collapsed)``: with many metrics, the gated ones and every significant change stay in view."""
    if len(rows) <= SHOW_ALL_UP_TO:
        return rows, []
    keep = [r["metric"] in gated or str(r.get("verdict") or "").startswith(_CHANGED) for r in rows]
    return [r for r, k in zip(rows, keep) if k], [r for r, k in zip(rows, keep) if not k]


def _scored(row: dict, side: str) -> str:
    """``"20"`` (every item scored), ``"13 of 20"`` (7 failed) or ``"—"`` (the record has no counts)."""
    n, failed = row.get(f"n_items_{side}"), row.get(f"n_failed_{side}")
    if n is None or failed is None:
        return "—"
    return f"{n}" if not failed else f"{n - failed} of {n}"


def _rows_table(rows: list[dict]) -> list[str]:
    out = ["| notebook | metric | A | B | Δ (95% CI) | p (Holm) | verdict | items scored A; B |",
           "|---|---|---:|---:|---|---:|---|---|"]
    for r in rows:
        out.append(f"| {label_of(r['tier_key'])} | `{r['metric']}` | {_num(r.get('mean_a'))} | "
                   f"{_num(r.get('mean_b'))} | {_delta(r)} | {_p(r.get('p_holm'))} | {r.get('verdict') or '—'} | "
                   f"{_scored(r, 'a')}; {_scored(r, 'b')} |")
    return out


def to_markdown(comparison: Comparison, result: Gate) -> str:
    """A Markdown report ready to post as a pull-request comment: verdict first, then the table, the
    differences between the runs in a collapsed section, and the notes."""
    out = [f"### ragnb: run `{comparison.run_b}` (B) vs. `{comparison.run_a}` (A)", ""]
    if result.outcome != "no gate":
        out += [f"{_ICONS[result.outcome]} **Gate: {result.outcome}** — {result.message}", ""]
    out += [comparability_line(comparison), ""]
    if len(comparison.table):
        shown, rest = _split_rows(comparison.records(), set(result.gated))
        out += _rows_table(shown) if shown else [f"No significant change on any of the {len(rest)} metrics."]
        if rest:
            out += ["", f"<details><summary>{'Other metrics' if shown else 'All metrics'} ({len(rest)})</summary>",
                    ""] + _rows_table(rest) + ["", "</details>"]
        out += ["", f"Paired tests on the items both runs scored where per-item files exist; Holm-adjusted over "
                    f"the metrics, α = {comparison.alpha:g}."]
    diff = comparison.differences
    if len(diff):
        out += ["", f"<details><summary>What differs between the runs ({len(diff)})</summary>", "",
                "| kind | name | run A | run B |", "|---|---|---|---|"]
        out += [f"| {row['kind']} | {row['name']} | {row['run A']} | {row['run B']} |" for _, row in diff.iterrows()]
        out += ["", "</details>"]
    if comparison.notes:
        out += [""] + [f"- {note}" for note in comparison.notes]
    return "\n".join(out) + "\n"


def to_json(comparison: Comparison, result: Gate) -> dict:
    return {"run_a": comparison.run_a, "run_b": comparison.run_b, "alpha": comparison.alpha,
            **comparison.verdict_block(), "gate": {"outcome": result.outcome, "metrics": result.gated,
                                                   "message": result.message, "page_level_for": result.substituted,
                                                   "missing": result.missing, "too_many_failed": result.failed,
                                                   "not_comparable": result.not_comparable},
            "one_sided": comparison.one_sided,
            "metrics": comparison.records(), "notes": list(comparison.notes)}
