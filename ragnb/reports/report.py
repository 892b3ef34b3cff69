"""Report helpers used inside notebooks: figures, tables, the banner, and the metrics files.

Everything here renders offline: plotly.js is embedded once per page and all corpus/user text is
HTML-escaped. Rendering executed notebooks and the run's index page: :mod:`ragnb.reports.html`.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from ragnb.config import redact_url

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
    missing = ("<p style=\"color:#b00\">plotly.js is not loaded: open the notebook in JupyterLab (it draws the "
               "figure from its JSON), open the run's HTML report, or re-run the notebook from the top.</p>")
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
    fig_json = json.loads(pio.to_json(fig, validate=False, remove_uids=False))
    title = ((fig_json.get("layout") or {}).get("title") or {})
    title_text = title.get("text") if isinstance(title, dict) else title
    return {
        PLOTLY_MIME: fig_json,
        "text/html": figure_html(fig_json, include_plotlyjs),
        "text/plain": f"<plotly figure{': ' + str(title_text) if title_text else ''}>",
    }


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
    started by ``ragnb run`` (``RAGNB_PLOTLYJS=external``) never: the executed notebook keeps each figure's
    JSON only, and its HTML report loads the run folder's shared copy."""
    global _plotlyjs_sent
    external = os.environ.get(PLOTLYJS_ENV) == "external"
    _display(plotly_mimebundle(fig, include_plotlyjs=not (_plotlyjs_sent or external)))
    _plotlyjs_sent = True


# --------------------------------------------------------------------------------------------
# Tables and header
# --------------------------------------------------------------------------------------------

_CSS_TABLE = (
    # The doubled class outranks JupyterLab's ":not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td" (right-aligned).
    "<style>table.ragnb-table{border-collapse:collapse;font-size:13px}"
    "table.ragnb-table.ragnb-table th,table.ragnb-table.ragnb-table td{border:1px solid #d0d7de;padding:3px 8px;"
    "text-align:left;vertical-align:top;max-width:40em;overflow-wrap:anywhere}"
    "table.ragnb-table.ragnb-table th{background:#f6f8fa}</style>"
)


def table_html(df: pd.DataFrame, max_rows: int = 20, max_chars: int | None = 300) -> str:
    """An escaped HTML table of the first ``max_rows`` rows; long text cells are cut to ``max_chars``."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"show_table() expects a pandas DataFrame, got {type(df).__name__}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be ≥ 1, got {max_rows}")
    shown = df.head(max_rows).copy()
    if max_chars:
        def cut(v: Any) -> Any:
            return v[: max_chars - 1] + "…" if isinstance(v, str) and len(v) > max_chars else v

        for col in shown.columns:
            if shown[col].dtype == object or pd.api.types.is_string_dtype(shown[col]):
                shown[col] = shown[col].map(cut)
    default_index = isinstance(df.index, pd.RangeIndex) and df.index.name is None
    body = shown.to_html(escape=True, index=not default_index, border=0, classes="ragnb-table",
                         na_rep="NaN", render_links=False)
    note = f"<p><em>Showing {len(shown)} of {len(df)} rows.</em></p>" if len(df) > len(shown) else ""
    return _CSS_TABLE + body + note


def show_table(df: pd.DataFrame, max_rows: int = 20, max_chars: int | None = 300) -> None:
    """Display ``df`` as an HTML table with all text escaped (see :func:`table_html`)."""
    _display({"text/html": table_html(df, max_rows, max_chars),
              "text/plain": df.head(max_rows).to_string(max_colwidth=80)})


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
    note = (
        '<p style="margin:8px 0 0;color:#9a6700">No LLM endpoint was configured: LLM-judge metrics use the '
        "offline fallback (embedding similarity → word overlap) and are not LLM judgments.</p>"
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
