"""Dashboard pieces: metric trends over runs, the latest run's status, and the run A vs. B comparison.

Pure figure/HTML builders (tested on their output) plus :func:`show_comparison` and
:func:`comparison_picker`, which display them in a notebook. Everything renders offline; text from run
records (summaries, ids, notes) is HTML-escaped.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ragnb.metrics.stats import FEW_ITEMS
from ragnb.reports import report
from ragnb.runs.pages import STATUS_COLOURS
from ragnb.runs.pages import escape as _e
from ragnb.runs.compare import Comparison, compare_runs
from ragnb.runs.record import STATUS_ORDER, git_text
from ragnb.spec import label_of, thresholds_of

# Background bands of the thresholds of ragnb.spec (colours of ragnb.runs.pages.STATUS_COLOURS, lighter).
BAND_COLOURS = {"attention": "#ffebe9", "good": "#ddf4ff", "excellent": "#dafbe1"}
VERDICT_COLOURS = {"better": "#1a7f37", "worse": "#cf222e", "other": "#57606a"}


def _html(markup: str, text: str) -> None:
    """Display HTML (escaped by the caller) with a plain-text twin; prints the text outside IPython."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    display({"text/html": markup, "text/plain": text}, raw=True)


# --------------------------------------------------------------------------------------------
# Trends
# --------------------------------------------------------------------------------------------


def threshold_bands(metric: str, tier_key: str | None = None, y_max: float = 1.0) -> list[dict]:
    """Plotly rectangle shapes (paper-wide, behind the data) for the metric's threshold bands (ragnb.spec):
    attention [0, lower), good [lower, upper], excellent (upper, max(1, y_max)]. ``[]`` without thresholds."""
    bounds = thresholds_of(metric, tier_key)
    if bounds is None:
        return []
    excellent_above, attention_below = bounds
    top = max(1.0, float(y_max))
    spans = [("attention", 0.0, attention_below), ("good", attention_below, excellent_above),
             ("excellent", excellent_above, top)]
    return [
        {"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": lo, "y1": hi,
         "fillcolor": BAND_COLOURS[status], "opacity": 0.8, "line": {"width": 0}, "layer": "below",
         "name": status}
        for status, lo, hi in spans
    ]


NOT_DRAWN_STATUSES = ("failed",)  # runs listed in the runs table but never drawn as points
SERIES_COLOURS = ("#0969da", "#bc4c00", "#8250df", "#1a7f37", "#cf222e", "#6e7781", "#bf3989", "#116329")


def drawn(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a trend chart draws: not those of failed runs (their numbers are partial) and not rows without a
    value (a run with no data has no point). Such runs stay in :func:`runs_table` and :func:`not_drawn`."""
    ok = ~frame["overall_status"].isin(NOT_DRAWN_STATUSES) & frame["mean"].notna()
    return frame[ok]


def not_drawn(runs: list[dict], frame: pd.DataFrame) -> list[str]:
    """One line per run that the trend charts leave out, with why (failed, or no metric values)."""
    shown = set(drawn(frame)["run_id"])
    out = []
    for run in runs:
        rid = str(run.get("id"))
        if rid in shown:
            continue
        if run.get("overall_status") in NOT_DRAWN_STATUSES:
            failures = ", ".join(map(str, run.get("failures") or [])) or "—"
            out.append(f"{rid}: failed (notebooks: {failures})")
        else:
            out.append(f"{rid}: no metric values ({run.get('overall_status') or 'no-data'})")
    return out


def _says_nothing(m: pd.DataFrame) -> pd.Series:
    """Per trend point, why it says nothing (docs/metrics.md, Conventions), else None: a zero-width CI
    (constant over its items) or fewer than 10 valid items — the flags of the aggregate, read back from the
    frame's mean, CI and counts."""
    n_valid = m["n"].astype("Float64") - m["n_failed"].astype("Float64").fillna(0)
    constant = (m["ci_lo"] == m["ci_hi"]) & (m["ci_hi"] == m["mean"])
    few = n_valid < FEW_ITEMS
    return pd.Series([("constant over its items" if c else "") + ("; " if c and f else "")
                      + (f"fewer than {FEW_ITEMS} valid items" if f else "") or None
                      for c, f in zip(constant.fillna(False), few.fillna(False))], index=m.index, dtype=object)


def trend_figure(frame: pd.DataFrame, tier_key: str) -> go.Figure | None:
    """Every metric of one tier over the runs (x = run id in time order, y = mean with its 95% CI as error
    bars), one line per dataset + corpus (``series``: runs on other data are not joined into one line). With
    several metrics a dropdown picks one (plotly.js, so it works in the static HTML too); thresholded metrics
    come first and show their threshold bands (attention / good / excellent) behind the lines — unless every
    point of the metric says nothing (constant, or fewer than 10 valid items): then no band, and the title says
    why. Failed runs and values that are missing are not drawn (:func:`drawn`). None when the tier has nothing
    to draw."""
    frame = drawn(frame)
    rows = frame[frame["tier_key"] == tier_key]
    if rows.empty:
        return None
    if "series" not in rows:
        rows = rows.assign(series="")
    order = (frame.drop_duplicates("run_id").sort_values("order")["run_id"].tolist())
    first_seen = list(dict.fromkeys(rows["metric"]))
    names = sorted(first_seen, key=lambda n: (thresholds_of(n, tier_key) is None, first_seen.index(n)))
    series = list(dict.fromkeys(rows["series"]))
    fig = go.Figure()
    shapes, titles, owner = [], [], []
    for i, name in enumerate(names):
        y_max, why = 1.0, []
        for j, line in enumerate(series):
            m = rows[(rows["metric"] == name) & (rows["series"] == line)].set_index("run_id")
            m = m.reindex([r for r in order if r in m.index])
            if m.empty:
                continue
            reasons = _says_nothing(m)
            why.extend(reasons.tolist())
            fig.add_trace(_trend_trace(m, name, line, i == 0, SERIES_COLOURS[j % len(SERIES_COLOURS)],
                                       len(series) > 1, reasons))
            owner.append(i)
            top = np.nanmax(m[["mean", "ci_hi"]].to_numpy(dtype=float))
            y_max = max(y_max, float(top)) if math.isfinite(top) else y_max
        bounds = thresholds_of(name, tier_key)
        silent = bool(why) and all(w is not None for w in why)
        shapes.append([] if silent else threshold_bands(name, tier_key, y_max))
        titles.append(f"{label_of(tier_key)}: {html.escape(name)} over runs"
                      + (f"<br><sup>says nothing here ({html.escape(why[-1])}): not graded</sup>"
                         if silent else
                         f"<br><sup>bands: attention < {bounds[1]} ≤ good ≤ {bounds[0]} < excellent</sup>"
                         if bounds else ""))
    fig.update_layout(shapes=shapes[0], title=titles[0], height=380 + (30 * len(series) if len(series) > 1 else 0),
                      showlegend=len(series) > 1, legend=dict(orientation="h", y=-0.25, title="dataset · corpus"),
                      xaxis=dict(title="run (oldest → newest)", type="category", categoryorder="array",
                                 categoryarray=order),
                      yaxis=dict(title=names[0]), margin=dict(t=90))
    if len(names) > 1:
        buttons = [dict(label=name, method="update",
                        args=[{"visible": [o == i for o in owner]},
                              {"shapes": shapes[i], "title.text": titles[i], "yaxis.title.text": name}])
                   for i, name in enumerate(names)]
        fig.update_layout(updatemenus=[dict(buttons=buttons, direction="down", x=1, xanchor="right", y=1.02,
                                            yanchor="bottom", showactive=True)])
    return fig


def _trend_trace(m: pd.DataFrame, name: str, line: str, visible: bool, colour: str, named: bool,
                 says_nothing: pd.Series) -> go.Scatter:
    """One line: a metric's means over the runs of one dataset + corpus, with CI error bars and hover details
    (a point that says nothing shows why instead of a status)."""
    lo = (m["mean"] - m["ci_lo"]).clip(lower=0)
    hi = (m["ci_hi"] - m["mean"]).clip(lower=0)
    custom = np.column_stack([
        m["timestamp"].astype(str).to_numpy(), m["ci_lo"].to_numpy(), m["ci_hi"].to_numpy(),
        m["n"].astype("Float64").to_numpy(dtype=float, na_value=np.nan),
        np.array([f"says nothing here ({why})" if why else (st if isinstance(st, str) else "—")
                  for why, st in zip(says_nothing, m["status"])], dtype=object),
        np.full(len(m), html.escape(str(line))),
    ])
    return go.Scatter(
        x=m.index.tolist(), y=m["mean"].tolist(), mode="lines+markers", name=str(line) if named else name,
        visible=visible, line=dict(color=colour), marker=dict(color=colour), legendgroup=str(line),
        error_y=dict(type="data", symmetric=False, array=hi.fillna(0).tolist(), arrayminus=lo.fillna(0).tolist(),
                     visible=bool(m["ci_lo"].notna().any())),
        customdata=custom,
        hovertemplate=("run %{x}<br>%{customdata[0]}<br>" + html.escape(name) + " = %{y:.4f}"
                       "<br>95% CI %{customdata[1]:.4f}–%{customdata[2]:.4f}<br>n = %{customdata[3]}"
                       "<br>status: %{customdata[4]}<br>%{customdata[5]}<extra></extra>"),
    )


def trend_figures(frame: pd.DataFrame) -> list[go.Figure]:
    """:func:`trend_figure` for every tier that has metrics, in schema order."""
    figs = []
    for key in dict.fromkeys(frame["tier_key"]):
        fig = trend_figure(frame, key)
        if fig is not None:
            figs.append(fig)
    return figs


def runs_table(runs: list[dict]) -> pd.DataFrame:
    """One row per run (newest first): id, time, status, git, dataset, which notebooks ran, failures."""
    rows = []
    for run in reversed(runs):
        reports = run.get("reports") or []
        rows.append({
            "run_id": run.get("id"), "timestamp": run.get("timestamp"), "overall_status": run.get("overall_status"),
            "git": git_text(run, width=10),
            "dataset": run.get("dataset_file"),
            "notebooks": ", ".join(str(r.get("stem")) for r in reports if isinstance(r, dict)),
            "failures": ", ".join(map(str, run.get("failures") or [])) or None,
        })
    return pd.DataFrame(rows, columns=["run_id", "timestamp", "overall_status", "git", "dataset", "notebooks",
                                       "failures"])


def status_html(record: dict) -> str:
    """The latest run's overall status badge and executive summary, escaped."""
    status = record.get("overall_status") or "no-data"
    fg, bg = STATUS_COLOURS.get(status, ("#1f2328", "#eaeef2"))
    return (
        '<div style="border:1px solid #d0d7de;border-radius:6px;padding:10px 14px;margin:8px 0">'
        f'<div style="font-size:1.1em;margin-bottom:6px">Latest run <code>{_e(record.get("id"))}</code> '
        f'({_e(record.get("timestamp"))}): <span style="color:{fg};background:{bg};padding:1px 8px;'
        f'border-radius:10px;font-weight:600">{_e(status)}</span></div>'
        # one line per summary line (status, attention, change, not computed), as on the run's index page
        f'<div style="white-space:pre-line">{_e(record.get("executive_summary") or "No executive summary recorded.")}</div></div>'
    )


def show_status(record: dict) -> None:
    """Display :func:`status_html` (plain text outside Jupyter)."""
    _html(status_html(record), f"Latest run {record.get('id')}: {record.get('overall_status')}\n"
                               f"{record.get('executive_summary') or ''}")


def status_counts(frame: pd.DataFrame, run_id: str) -> dict[str, int]:
    """How many thresholded metrics of a run are attention / good / excellent."""
    rows = frame[(frame["run_id"] == run_id) & frame["status"].notna()]
    return {s: int((rows["status"] == s).sum()) for s in STATUS_ORDER}


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------


def comparison_display(comp: Comparison, tested: bool | None = None) -> pd.DataFrame:
    """The comparison table for reading: rounded numbers, CI as text, p-values in 3 significant digits.
    ``tested``: only rows with (True) or without (False) a p-value; None: all rows."""
    t = comp.table
    if tested is not None and len(t):
        t = t[t["p_value"].notna() == tested]
    if t.empty:
        return pd.DataFrame(columns=["notebook", "metric", "A", "B", "Δ (B − A)", "95% CI of Δ", "test", "p",
                                     "p (Holm)", "verdict"])

    def num(v: Any, digits: int = 4) -> str:
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.{digits}f}"

    def pval(v: Any) -> str:
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{float(v):.3g}"

    return pd.DataFrame({
        "notebook": t["notebook"].fillna(t["tier_key"]), "metric": t["metric"],
        "n pairs": t["n_pairs"], "A": t["mean_a"].map(num), "B": t["mean_b"].map(num),
        "Δ (B − A)": t["delta"].map(lambda v: ("+" if isinstance(v, float) and v > 0 else "") + num(v)),
        "95% CI of Δ": [f"[{num(lo)}, {num(hi)}]" if not (pd.isna(lo) or pd.isna(hi)) else "—"
                        for lo, hi in zip(t["ci_lo"], t["ci_hi"])],
        "test": t["test"], "p": t["p_value"].map(pval), "p (Holm)": t["p_holm"].map(pval),
        "wilcoxon p": t["p_wilcoxon"].map(pval), "verdict": t["verdict"],
    })


def _verdict_kind(text: str) -> str:
    if text.startswith("B better"):
        return "better"
    if text.startswith("B worse"):
        return "worse"
    return "other"


def forest_figure(table: pd.DataFrame, title: str, relative: bool = False) -> go.Figure | None:
    """Deltas (B − A) with their 95% CIs, one row per metric, a line at 0; green = B significantly better,
    red = worse, grey = no significant difference. ``relative``: Δ and CI divided by |mean_a| (in %), for
    metrics on different scales. Rows without a CI are left out; None when none is left."""
    t = table[table["delta"].notna() & table["ci_lo"].notna() & table["ci_hi"].notna()].copy()
    if relative:
        scale = t["mean_a"].abs()
        t = t[scale > 0]
        for col in ("delta", "ci_lo", "ci_hi"):
            t[col] = t[col] / t["mean_a"].abs() * 100
    if t.empty:
        return None
    t = t.iloc[::-1]  # first metric on top
    labels = [f"{nb or key} · {m}" for nb, key, m in zip(t["notebook"], t["tier_key"], t["metric"])]
    kinds = [_verdict_kind(str(v)) for v in t["verdict"]]
    fig = go.Figure()
    for kind in ("better", "worse", "other"):
        sel = [k == kind for k in kinds]
        if not any(sel):
            continue
        s = t[sel]
        fig.add_trace(go.Scatter(
            x=s["delta"], y=[lab for lab, k in zip(labels, sel) if k], mode="markers",
            marker=dict(color=VERDICT_COLOURS[kind], size=9),
            name={"better": "B better", "worse": "B worse", "other": "not significant / not tested"}[kind],
            error_x=dict(type="data", symmetric=False, array=(s["ci_hi"] - s["delta"]).fillna(0).clip(lower=0),
                         arrayminus=(s["delta"] - s["ci_lo"]).fillna(0).clip(lower=0), color=VERDICT_COLOURS[kind]),
            customdata=np.column_stack([s["verdict"].astype(str), s["p_holm"].astype(float)]),
            hovertemplate="%{y}<br>Δ = %{x:.4f}" + (" %" if relative else "")
                          + "<br>p (Holm) = %{customdata[1]:.3g}<br>%{customdata[0]}<extra></extra>",
        ))
    fig.add_vline(x=0, line_color="#57606a", line_dash="dash")
    fig.update_layout(title=title, height=max(260, 28 * len(t) + 120),
                      xaxis_title="Δ relative to run A (%)" if relative else "Δ = B − A (95% CI)",
                      yaxis=dict(type="category", automargin=True),
                      legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom"))
    return fig


def forest_figures(comp: Comparison) -> list[go.Figure]:
    """Two forest plots: metrics on a 0–1 scale (both means in [0, 1]) in absolute Δ, the others in Δ % of
    run A (latency in ms and scores in [0, 1] do not share an axis). Not-comparable notebooks are left out
    (they have no CI of Δ: a plotted difference would read as an effect)."""
    t = comp.table
    if len(t):
        t = t[t["comparable"].map(lambda v: v is not False and v is not np.False_)]
    if t.empty:
        return []
    unit = t["mean_a"].between(0, 1) & t["mean_b"].between(0, 1)
    figs = [forest_figure(t[unit], f"Run B − run A on 0–1 metrics ({comp.run_b} vs {comp.run_a})"),
            forest_figure(t[~unit], "Run B − run A on other metrics, relative to run A", relative=True)]
    return [f for f in figs if f is not None]


def comparison_summary(comp: Comparison) -> str:
    """One sentence: how many metrics got better / worse / showed no significant change — or, when the runs
    used different data, that they are not comparable and why (no winner is named); when only some metrics are
    (a re-chunking: the page-level ones stay comparable), what is compared, then the counts."""
    if comp.comparable is False and not comp.partly:
        return (f"Run B {comp.run_b} and run A {comp.run_a} are NOT COMPARABLE: {'; '.join(comp.reasons)}. "
                "No winner is named and no test is run on the notebooks concerned; both means are listed for reference only.")
    kinds = [_verdict_kind(str(v)) for v in comp.table["verdict"]] if len(comp.table) else []
    tested = int(comp.table["p_holm"].notna().sum()) if len(comp.table) else 0
    paired = int(comp.table["paired"].fillna(False).astype(bool).sum()) if len(comp.table) else 0
    partly = (f"PARTLY COMPARABLE — {'; '.join(comp.scope)}; not comparable (no test, no winner): "
              f"{'; '.join(comp.reasons)}. ") if comp.partly else ""
    return (f"{partly}Run B {comp.run_b} vs. run A {comp.run_a}: {len(comp.table)} metrics compared ({paired} paired "
            f"item by item), {tested} tested; B better on {kinds.count('better')}, worse on {kinds.count('worse')}, "
            f"no significant difference on the rest (Holm-adjusted, α = {comp.alpha:g}).")


def show_comparison(comp: Comparison) -> None:
    """Display a comparison: summary sentence (or "not comparable" with the reasons), what differs between
    the runs, per-notebook pairing, table, forest plots, notes."""
    summary = comparison_summary(comp)
    if comp.partly:
        items = "".join(f"<li>{_e(r)}</li>" for r in comp.reasons)
        _html('<div style="border:2px solid #9a6700;border-radius:6px;padding:8px 12px;margin:8px 0">'
              f"<b>Partly comparable.</b> {_e('; '.join(comp.scope))}. The other metrics are not comparable, so no "
              f"winner is named for them:<ul>{items}</ul></div>", summary)
    elif comp.comparable is False:
        items = "".join(f"<li>{_e(r)}</li>" for r in comp.reasons)
        _html('<div style="border:2px solid #cf222e;border-radius:6px;padding:8px 12px;margin:8px 0">'
              f"<b>Not comparable.</b> Run B <code>{_e(comp.run_b)}</code> and run A <code>{_e(comp.run_a)}</code> "
              f"did not measure the same thing, so no winner is named:<ul>{items}</ul></div>", summary)
    else:
        _html(f"<p><b>{_e(summary)}</b></p>", summary)
    if len(comp.differences):
        _html("<p>What differs between the two runs (parameters, models, datasets, databases):</p>",
              "What differs between the two runs:")
        report.show_table(comp.differences, max_rows=200)
    else:
        print("The two runs used the same parameters, models, datasets and databases.")
    if len(comp.alignment):
        report.show_table(comp.alignment, max_rows=50)
    tested = comparison_display(comp, tested=True)
    if len(tested):
        report.show_table(tested, max_rows=200)
    untested = comparison_display(comp, tested=False)
    if len(untested):
        _html("<p>Not tested (runs not comparable, no per-item values and no confidence interval in the record, "
              "or too few pairs):</p>", "Not tested:")
        report.show_table(untested[["notebook", "metric", "A", "B", "Δ (B − A)", "test"]], max_rows=200)
    for fig in forest_figures(comp):
        report.show(fig)
    for note in comp.notes:
        print("Note:", note)


def comparison_picker(
    runs: list[dict], outputs: str | Path, run_a: str | None, run_b: str | None, alpha: float = 0.05,
    n_boot: int = 1000, metrics: Iterable[str] | None = None,
) -> Any:
    """ipywidgets: two Dropdowns (run A, run B) and an Output that shows :func:`show_comparison` of the
    chosen pair whenever a dropdown changes. Needs a live Jupyter kernel; the static report shows the
    default comparison instead (see :func:`display_picker`)."""
    import ipywidgets as widgets

    options = [(f"{r.get('id')} · {r.get('overall_status') or '—'}", str(r.get("id"))) for r in reversed(runs)]
    ids = [v for _, v in options]
    pick_a = widgets.Dropdown(options=options, value=run_a if run_a in ids else None, description="run A")
    pick_b = widgets.Dropdown(options=options, value=run_b if run_b in ids else None, description="run B")
    out = widgets.Output()
    patterns = list(metrics or [])

    def render(_change: Any = None) -> None:
        out.clear_output()
        with out:
            if not pick_a.value or not pick_b.value:
                print("Choose run A and run B.")
            elif pick_a.value == pick_b.value:
                print("Run A and run B are the same run; choose two different runs.")
            else:
                try:
                    show_comparison(compare_runs(runs, outputs, pick_a.value, pick_b.value, alpha=alpha,
                                                 n_boot=n_boot, metrics=patterns))
                except ValueError as exc:  # shown to the user, the picker stays usable
                    print(f"Cannot compare: {exc}")

    pick_a.observe(render, names="value")
    pick_b.observe(render, names="value")
    hint = widgets.HTML("<i>Change run A or run B to compare another pair (the default pair is shown above).</i>")
    return widgets.VBox([widgets.HBox([pick_a, pick_b]), hint, out])


def display_picker(picker: Any) -> None:
    """Display the picker; in a static HTML report (no widget state) a short note stands in for it."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    bundle = picker._repr_mimebundle_() or {}
    data = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    data["text/html"] = ("<p><i>Interactive run picker (run A / run B dropdowns): open this notebook in Jupyter "
                         "to compare any two runs; the default comparison is shown above.</i></p>")
    data["text/plain"] = "Interactive run picker: open this notebook in Jupyter."
    display(data, raw=True)
