"""Run A vs. run B for a terminal or a pull-request comment, and the CI gate on it.

The statistics are :func:`ragnb.runs.compare.compare_runs` (the dashboard's); this module only decides and
formats. Gate (``ragnb compare --fail-if-worse m1,m2``): for the metrics matching the patterns,

* some row is not comparable (other dataset or corpus) → ``"not comparable"``: no winner is named and the gate
  cannot decide;
* some row's verdict is "B worse" (Holm-adjusted p < α, in the metric's bad direction) → ``"worse"``;
* otherwise → ``"pass"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ragnb.runs.compare import Comparison, matches
from ragnb.spec import label_of


@dataclass
class Gate:
    outcome: str  # "pass", "worse", "not comparable", "no gate"
    worse: list[dict] = field(default_factory=list)  # rows of gated metrics where B is significantly worse
    gated: list[str] = field(default_factory=list)  # metrics the gate looked at
    message: str = ""


def gate(comparison: Comparison, patterns: list[str]) -> Gate:
    """The gate's outcome for the metrics matching ``patterns`` (module docstring). ValueError when a pattern
    matches no metric both runs recorded (a typo must not pass the gate silently)."""
    if not patterns:
        return Gate("no gate")
    table = comparison.table
    names = sorted(set(table["metric"])) if len(table) else []
    missing = [p for p in patterns if not any(matches(n, [p]) for n in names)]
    if missing:
        raise ValueError(f"--fail-if-worse: no metric of both runs matches {', '.join(missing)}; "
                         f"metrics compared: {', '.join(names) or '(none)'}")
    rows = [r for r in comparison.records() if matches(r["metric"], patterns)]
    gated = sorted({r["metric"] for r in rows})
    if any(r.get("comparable") is False for r in rows):
        return Gate("not comparable", gated=gated, message=(
            "the runs are not comparable (" + "; ".join(comparison.reasons) + "), so no winner is named and "
            "the gate cannot decide: compare runs on the same dataset and corpus"))
    worse = [r for r in rows if str(r.get("verdict") or "").startswith("B worse")]
    if worse:
        return Gate("worse", worse, gated, "run B is significantly worse on " + ", ".join(
            f"{label_of(r['tier_key'])} {r['metric']} (Δ {_num(r.get('delta'))}, p_holm {_p(r.get('p_holm'))})"
            for r in worse))
    return Gate("pass", gated=gated, message=f"no gated metric is significantly worse ({', '.join(gated)})")


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


_ICONS = {"pass": "✅", "worse": "❌", "not comparable": "⚠️", "no gate": ""}


def comparability_line(comparison: Comparison) -> str:
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


def _rows_table(rows: list[dict]) -> list[str]:
    out = ["| notebook | metric | A | B | Δ (95% CI) | p (Holm) | verdict |", "|---|---|---:|---:|---|---:|---|"]
    for r in rows:
        out.append(f"| {label_of(r['tier_key'])} | `{r['metric']}` | {_num(r.get('mean_a'))} | "
                   f"{_num(r.get('mean_b'))} | {_delta(r)} | {_p(r.get('p_holm'))} | {r.get('verdict') or '—'} |")
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
                                                   "message": result.message},
            "metrics": comparison.records(), "notes": list(comparison.notes)}
