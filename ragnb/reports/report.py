"""Report helpers used inside notebooks: figures, tables, the banner, and the metrics files.

Everything here renders offline: plotly.js is embedded once per page and all corpus/user text is
HTML-escaped. Rendering executed notebooks and the run's index page: :mod:`ragnb.runs.pages`.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import uuid
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from ragnb.config import redact_url
from ragnb.metrics.stats import fmt_number

PLOTLY_MIME = "application/vnd.plotly.v1+json"
PLOTLY_LIB_MARK = 'data-ragnb-plotlyjs="inline"'
PLOTLY_SHARED_MARK = 'data-ragnb-plotlyjs="shared"'
PLOTLY_FIG_MARK = "data-ragnb-plotly="
# "external" (set by the runner's kernel manager): figures never carry plotly.js; the HTML export adds it.
PLOTLYJS_ENV = "RAGNB_PLOTLYJS"

# --------------------------------------------------------------------------------------------
# Plotly
# --------------------------------------------------------------------------------------------

_plotlyjs_sent = False  # per kernel: the first figure carries plotly.js, later ones reuse window.Plotly


def _script_json(obj: Any) -> str:
    # JSON placed inside <script>: escape what could close the tag or start HTML (corpus text in hover labels).
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def plotlyjs_html(src: str | None = None) -> str:
    """plotly.js inline (or, with ``src``, a ``<script src>`` to a local copy), guarded so an AMD loader
    (require.js) on the page cannot swallow it."""
    if src is None:
        from plotly.offline import get_plotlyjs

        lib = f"<script {PLOTLY_LIB_MARK}>{get_plotlyjs()}</script>"
    else:
        lib = f'<script {PLOTLY_SHARED_MARK} src="{html.escape(src, quote=True)}"></script>'
    return (
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};"
        "window.__ragnbDefine = window.define; window.define = undefined;</script>"
        f"{lib}<script>window.define = window.__ragnbDefine;</script>"
    )


def figure_html(fig_json: dict, include_plotlyjs: bool) -> str:
    """HTML that draws ``fig_json`` (``{data, layout, config}``) with plotly.js, offline."""
    div_id = f"ragnb-{uuid.uuid4().hex}"
    layout = fig_json.get("layout") or {}
    height = layout.get("height") or 450
    config = {"responsive": True, "displaylogo": False, **(fig_json.get("config") or {})}
    # a run folder copied without its outputs folder lands here too: say where the shared copy is expected
    missing = ("<p style=\"color:#b00\">plotly.js is not loaded: open the notebook in JupyterLab (it draws the "
               "figure from its JSON), open the run's HTML report inside its outputs folder (reports load "
               "assets/plotly.min.js from there; `ragnb run --standalone` writes self-contained ones), or re-run "
               "the notebook from the top.</p>")
    return (
        f'<div class="ragnb-plotly" {PLOTLY_FIG_MARK}"{"lib" if include_plotlyjs else "ref"}">'
        + (plotlyjs_html() if include_plotlyjs else "")
        + f'<div id="{div_id}" class="plotly-graph-div" style="height:{int(height)}px; width:100%;"></div>'
        "<script>(function () {"
        f'var el = document.getElementById("{div_id}"); if (!el) return;'
        f"if (!window.Plotly) {{ el.innerHTML = {json.dumps(missing)}; return; }}"
        f"window.Plotly.newPlot(el, {_script_json(fig_json.get('data') or [])}, {_script_json(layout)}, "
        f"{_script_json(config)});"
        "})();</script></div>"
    )


def plotly_mimebundle(fig: Any, include_plotlyjs: bool) -> dict[str, Any]:
    """``{plotly JSON, text/html, text/plain}`` for a plotly Figure (or figure dict)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    if isinstance(fig, dict):
        fig = go.Figure(fig)
    if not isinstance(fig, go.Figure):
        raise ValueError(f"show() expects a plotly Figure, got {type(fig).__name__}; for tables use show_table()")
    # long category labels (page titles, topic names) push the plot area in rather than being cut off
    fig = go.Figure(fig).update_xaxes(automargin=True).update_yaxes(automargin=True)
    fig_json = json.loads(pio.to_json(fig, validate=False, remove_uids=False))
    title = ((fig_json.get("layout") or {}).get("title") or {})
    title_text = title.get("text") if isinstance(title, dict) else title
    return {
        PLOTLY_MIME: fig_json,
        "text/html": figure_html(fig_json, include_plotlyjs),
        "text/plain": f"<plotly figure{': ' + str(title_text) if title_text else ''}>",
    }


def path_html(path: str | PurePath) -> str:
    """A written file as a labelled link by its name (reports sit in the same folder as the files a notebook
    writes), never a bare filesystem path at the end of a report."""
    name = PurePath(path).name
    label = "metrics JSON" if name.endswith(".metrics.json") else "file written"
    return f'<p style="color:#57606a">{label}: <a href="{html.escape(quote(name))}">{html.escape(name)}</a></p>'


def _plain_paths() -> None:
    """In a kernel, a path left as a cell's last value (``result.write(...)`` returns one) shows as plain text,
    not ``PosixPath('…')``, and in HTML as a labelled link by its name (:func:`path_html`)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None and getattr(ip, "display_formatter", None) is not None:
        formatters = ip.display_formatter.formatters
        formatters["text/plain"].for_type(PurePath, lambda p, printer, cycle: printer.text(str(p)))
        formatters["text/html"].for_type(PurePath, path_html)


def _display(bundle: dict[str, Any]) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or get_ipython() is None:
        print(bundle.get("text/plain", "<ragnb output: open in Jupyter to see it>"))
        return
    display(bundle, raw=True)


def show(fig: Any) -> None:
    """Display a plotly figure: interactive in JupyterLab (plotly mime renderer) and drawn offline in
    nbconvert HTML (text/html). Interactively plotly.js is inlined with the kernel's first figure; in a kernel
    started by ``ragnb run`` (``RAGNB_PLOTLYJS=external``) the output is the figure's JSON only (no plotly.js,
    no second copy of the data in HTML): its HTML report draws it with the outputs folder's shared plotly.js."""
    global _plotlyjs_sent
    if os.environ.get(PLOTLYJS_ENV) == "external":
        # the figure's JSON once: the HTML export draws it from there (ragnb.runs.pages), JupyterLab too
        bundle = plotly_mimebundle(fig, include_plotlyjs=False)
        _display({k: v for k, v in bundle.items() if k != "text/html"})
        return
    _display(plotly_mimebundle(fig, include_plotlyjs=not _plotlyjs_sent))
    _plotlyjs_sent = True


# --------------------------------------------------------------------------------------------
# Tables and header
# --------------------------------------------------------------------------------------------

_CSS_TABLE = (
    # The doubled class outranks JupyterLab's ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td" (right-aligned).
    "<style>table.ragnb-table{border-collapse:collapse;font-size:13px}"
    "table.ragnb-table.ragnb-table th,table.ragnb-table.ragnb-table td{border:1px solid #d0d7de;padding:3px 8px;"
    "text-align:left;vertical-align:top;max-width:40em;overflow-wrap:anywhere}"
    "table.ragnb-table.ragnb-table td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "table.ragnb-table.ragnb-table th{background:#f6f8fa;overflow-wrap:normal}</style>"  # column names not broken mid-word
)


_SORT_JS = (  # click a header to sort the shown rows; numbers by their value (data-v), text alphabetically
    "<script>(function(){var t=document.getElementById(%s);if(!t||!t.tBodies.length)return;"
    "Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){th.style.cursor='pointer';"
    "th.title='Click to sort';th.onclick=function(){var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),"
    "asc=th.getAttribute('data-asc')!=='1';th.setAttribute('data-asc',asc?'1':'0');rows.sort(function(x,y){"
    "var a=x.cells[i],c=y.cells[i],va=a.getAttribute('data-v'),vc=c.getAttribute('data-v');"
    "var r=(va!==null&&vc!==null)?parseFloat(va)-parseFloat(vc):a.textContent.localeCompare(c.textContent);"
    "return asc?r:-r;});rows.forEach(function(r){b.appendChild(r);});};});})();</script>"
)


def plain(value: Any) -> str:
    """A value as one readable line: mappings as ``key: value, …`` (nested with ``;``), sequences comma-separated,
    paths as plain text, numbers through :func:`ragnb.metrics.stats.fmt_number`, missing values as ``n/a``."""
    if isinstance(value, dict):
        sep = "; " if any(isinstance(v, (dict, list, tuple)) for v in value.values()) else ", "
        return sep.join(f"{k}: {plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return ", ".join(plain(v) for v in value)
    if isinstance(value, (PurePath, str)):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if value is None or (isinstance(value, (float, np.floating)) or value is pd.NA or value is pd.NaT) and pd.isna(value):
        return "n/a"
    if isinstance(value, (float, np.floating)):
        return fmt_number(float(value))
    return str(value)


def _cell(value: Any, max_chars: int | None) -> str:
    text = plain(value)
    if max_chars and len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if number and not pd.isna(value):
        return f'<td class="num" data-v="{float(value)!r}">{html.escape(text)}</td>'
    return f"<td>{html.escape(text)}</td>"


def table_html(df: pd.DataFrame, max_rows: int = 20, max_chars: int | None = 300,
               full: str | Path | None = None) -> str:
    """An escaped, sortable HTML table of the first ``max_rows`` rows.

    Numbers get 3 significant digits (counts stay integers), missing values read ``n/a``, paths and nested
    values are written out as text, long text cells are cut to ``max_chars``, and columns without a value in any
    row are left out (and named). ``full``: the file holding every item (the per-item CSV next to the report,
    e.g. ``"tier2_generation.per_item.csv"`` under a table of the worst items), linked by its name."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"show_table() expects a pandas DataFrame, got {type(df).__name__}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be ≥ 1, got {max_rows}")
    default_index = isinstance(df.index, pd.RangeIndex) and df.index.name is None
    frame = df if default_index else df.reset_index()
    empty = [c for c in frame.columns if len(frame) and frame[c].isna().all()]
    frame = frame.drop(columns=empty)
    shown = frame.head(max_rows)
    table_id = f"ragnb-t-{uuid.uuid4().hex[:12]}"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = "".join("<tr>" + "".join(_cell(v, max_chars) for v in row) + "</tr>"
                   for row in shown.itertuples(index=False, name=None))
    notes = []
    if len(frame) > len(shown):
        notes.append(f"Showing {len(shown)} of {len(frame)} rows.")
    if full:
        name = Path(full).name
        notes.append(f'Every item: <a href="{html.escape(quote(name))}">{html.escape(name)}</a>.')
    if empty:
        notes.append("Not shown, no value in any row: " + ", ".join(html.escape(str(c)) for c in empty) + ".")
    note = f"<p><em>{' '.join(notes)}</em></p>" if notes else ""
    # a table wider than the page scrolls sideways inside its own box instead of being cut at the page's edge
    return (_CSS_TABLE + '<div class="ragnb-scroll" style="overflow-x:auto;max-width:100%">'
            f'<table class="ragnb-table" id="{table_id}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>" + _SORT_JS % json.dumps(table_id) + note)


def show_table(df: pd.DataFrame, max_rows: int = 20, max_chars: int | None = 300,
               full: str | Path | None = None) -> None:
    """Display ``df`` as a sortable HTML table with all text escaped (see :func:`table_html`)."""
    _display({"text/html": table_html(df, max_rows, max_chars, full),
              "text/plain": df.head(max_rows).to_string(max_colwidth=80, na_rep="n/a")})


def latency_text(mean: Any, p50: Any = None, p95: Any = None, digits: int = 1) -> str:
    """``mean 12.3 ms, p50 11.0 ms, p95 20.1 ms`` — or ``— (no latency recorded)`` when nothing was timed
    (:func:`ragnb.metrics.stats.latency_summary` gives NaN then), never ``nan ms``."""
    def one(v: Any) -> str:
        return "—" if v is None or pd.isna(v) else f"{float(v):.{digits}f} ms"

    if mean is None or pd.isna(mean):
        return "— (no latency recorded)"
    parts = [f"mean {one(mean)}"] + [f"{k} {one(v)}" for k, v in (("p50", p50), ("p95", p95)) if v is not None]
    return ", ".join(parts)


def notes_html(notes: list[str]) -> str:
    """Notes as an escaped list whose lines wrap to the page (printed text is preformatted and runs off it)."""
    items = "".join(f"<li>{html.escape(str(n))}</li>" for n in notes)
    return f'<ul class="ragnb-notes" style="margin:4px 0 8px;padding-left:20px;line-height:1.45">{items}</ul>'


def notes(items: list[str]) -> None:
    """Display ``items`` as the report's notes (see :func:`notes_html`); nothing when there are none."""
    items = [str(n) for n in items if str(n).strip()]
    if items:
        _display({"text/html": notes_html(items), "text/plain": "\n".join(f"Note: {n}" for n in items)})


def run_id_of(output_dir: str | Path) -> str | None:
    """The run id of a runner-made ``output_dir`` (``…/runs/<run_id>``), or None for other folders."""
    p = Path(output_dir)
    return p.name if p.parent.name == "runs" else None


_HEADER_FIRST = ("run_id", "dataset", "dataset_file", "embedding_model", "judge_backend", "timestamp")


def header_html(title: str, info: dict[str, Any]) -> str:
    """The banner at the top of a report: title plus run id, dataset, models, backend, timestamp."""
    info = dict(info or {})
    info.setdefault("timestamp", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    keys = [k for k in _HEADER_FIRST if k in info] + [k for k in info if k not in _HEADER_FIRST]
    rows = "".join(
        f'<tr style="background:none"><th style="text-align:left;padding:2px 12px 2px 0;color:#57606a;font-weight:600">'
        f"{html.escape(str(k))}</th><td style=\"text-align:left;padding:2px 0;background:none\"><code>"
        f"{html.escape(redact_url(str(info[k])))}</code></td></tr>"
        for k in keys
    )
    fallback = any(str(v) == "offline-fallback" for v in info.values())
    from ragnb.metrics.fallback import OFFLINE_LABEL

    note = (
        '<p style="margin:8px 0 0;color:#9a6700">No LLM endpoint was configured: LLM-judge metrics use the '
        f"offline fallback ({OFFLINE_LABEL}) and are not LLM judgments.</p>"
        if fallback else ""
    )
    t = html.escape(str(title))
    return (
        f'<div class="ragnb-header" data-ragnb-title="{t}" style="border:1px solid #d0d7de;border-left:6px solid '
        f'#0969da;border-radius:6px;padding:12px 16px;margin:8px 0 16px;background:#f6f8fa">'
        f'<h1 style="margin:0 0 8px;font-size:1.6em">{t}</h1><table style="border:0">{rows}</table>{note}</div>'
    )


def header(title: str, info: dict[str, Any]) -> None:
    """Display the report banner (see :func:`header_html`); values are escaped and URLs redacted."""
    plain = title + "\n" + "\n".join(f"{k}: {redact_url(str(v))}" for k, v in (info or {}).items())
    _display({"text/html": header_html(title, info), "text/plain": plain})


_plain_paths()
