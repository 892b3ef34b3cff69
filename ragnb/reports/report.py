"""Report helpers used inside notebooks and by the runner.

Everything here renders offline: plotly.js is embedded once per page, the nbconvert template has its
CDN scripts (require.js, MathJax, mermaid, widgets) removed, and all corpus/user text is HTML-escaped.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from ragnb.config import redact_url
from ragnb.runs.record import TIER_KEYS, TIER_LABELS, format_aggregate, iter_aggregates, block_status
from ragnb.io import atomic_write_text, dumps_strict

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_LIB_MARK = 'data-ragnb-plotlyjs="inline"'
_FIG_MARK = "data-ragnb-plotly="

# --------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------

_SECRET_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("an API key (sk-…)", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("a URL with a password", re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:(?!\*+@)[^\s@/]+@")),
    ("a password or key assignment",
     re.compile(r"(?i)\b(password|passwd|api[_-]?key|access[_-]?token)\s*[=:]\s*(?!\*+\b)[^\s&,;'\"]{4,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}")),
    ("a GitHub token", re.compile(r"\b(ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}")),
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("an AWS access key", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
]
_SECRET_KEY = re.compile(r"(?i)^(.*[_-])?(password|passwd|api_?key|secret|secret_key|token|access_token|auth_token)$")


def find_secret(text: str) -> str | None:
    """What kind of secret ``text`` seems to contain (e.g. ``"an API key (sk-…)"``), or None."""
    for what, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return what
    return None


def check_no_secrets(obj: Any, where: str = "metrics") -> None:
    """Raise ValueError if any string in ``obj`` (or a secret-named key's value) looks like a secret."""
    if isinstance(obj, str):
        what = find_secret(obj)
        if what:
            raise ValueError(
                f"{where} looks like it contains {what}; ragnb never writes secrets to reports — "
                "keep keys and passwords in environment variables and redact URLs (ragnb.config.redact_url)"
            )
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, str) and value.strip("*") and _SECRET_KEY.match(str(key)):
                raise ValueError(
                    f"{where}[{key!r}] is named like a secret; ragnb never writes secrets to reports — "
                    "keep them in environment variables (store the variable's name, not its value)"
                )
            check_no_secrets(value, f"{where}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            check_no_secrets(value, f"{where}[{i}]")


# --------------------------------------------------------------------------------------------
# Plotly
# --------------------------------------------------------------------------------------------

_plotlyjs_sent = False  # per kernel: the first figure carries plotly.js, later ones reuse window.Plotly


def _script_json(obj: Any) -> str:
    # JSON placed inside <script>: escape what could close the tag or start HTML (corpus text in hover labels).
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def plotlyjs_html() -> str:
    """plotly.js inline, guarded so an AMD loader (require.js) on the page cannot swallow it."""
    from plotly.offline import get_plotlyjs

    return (
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};"
        "window.__ragnbDefine = window.define; window.define = undefined;</script>"
        f"<script {_LIB_MARK}>{get_plotlyjs()}</script>"
        "<script>window.define = window.__ragnbDefine;</script>"
    )


def figure_html(fig_json: dict, include_plotlyjs: bool) -> str:
    """HTML that draws ``fig_json`` (``{data, layout, config}``) with plotly.js, offline."""
    div_id = f"ragnb-{uuid.uuid4().hex}"
    layout = fig_json.get("layout") or {}
    height = layout.get("height") or 450
    config = {"responsive": True, "displaylogo": False, **(fig_json.get("config") or {})}
    missing = ("<p style=\"color:#b00\">plotly.js is not loaded: re-run the notebook from the top "
               "(ragnb.reports.report.show embeds it with the first chart).</p>")
    return (
        f'<div class="ragnb-plotly" {_FIG_MARK}"{"lib" if include_plotlyjs else "ref"}">'
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
    nbconvert HTML (text/html; plotly.js is inlined with the first figure of the kernel)."""
    global _plotlyjs_sent
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


# --------------------------------------------------------------------------------------------
# Metrics files
# --------------------------------------------------------------------------------------------

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _atomic_write_with(path: Path, writer) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_metrics(output_dir: str | Path, name: str, metrics: dict, per_item: pd.DataFrame | None = None) -> Path:
    """Write ``<output_dir>/<name>.metrics.json`` (strict JSON: NaN/inf → null) atomically, and with
    ``per_item`` also ``<name>.per_item.csv`` and ``.parquet``. The JSON is written last, so its
    presence means the notebook finished (the runner's resume relies on it). Returns the JSON path.

    Raises ValueError if a string in ``metrics`` looks like a secret (API key, URL with a password…).
    """
    if not isinstance(name, str) or not _NAME_OK.match(name):
        raise ValueError(f"metrics name {name!r} must be a plain file stem such as 'tier1_retrieval'")
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics must be a dict of name → value, got {type(metrics).__name__}")
    if per_item is not None and not isinstance(per_item, pd.DataFrame):
        raise ValueError(f"per_item must be a pandas DataFrame or None, got {type(per_item).__name__}")
    check_no_secrets(metrics)
    text = dumps_strict(metrics) + "\n"  # fails early, before any file is touched
    if per_item is not None:
        per_item = with_item_ids(per_item)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if per_item is not None:
        _atomic_write_with(out / f"{name}.per_item.csv", lambda p: per_item.to_csv(p, index=False))
        _atomic_write_with(out / f"{name}.per_item.parquet", lambda p: _to_parquet(per_item, p))
    return atomic_write_text(out / f"{name}.metrics.json", text)


def with_item_ids(df: pd.DataFrame) -> pd.DataFrame:
    """Keep a labelled index (question ids, item ids) as an ``item_id`` column, so that per-item files of two
    runs can be paired item by item; a plain 0..n-1 index carries no identity and is dropped."""
    if isinstance(df.index, pd.RangeIndex) or "item_id" in df.columns:
        return df
    return df.reset_index(names="item_id")


def _to_parquet(df: pd.DataFrame, path: str) -> None:
    try:
        df.to_parquet(path, index=False)
    except (TypeError, ValueError, ImportError) as exc:
        if isinstance(exc, ImportError):
            raise
        # Mixed-type object columns (e.g. str and list) cannot be typed by Arrow; keep them as text.
        mixed = [c for c in df.columns if df[c].dtype == object]
        warnings.warn(f"per-item columns {mixed} stored as text in parquet ({exc})", stacklevel=3)
        df.assign(**{str(c): df[c].map(lambda v: v if v is None else str(v)) for c in mixed}).to_parquet(
            path, index=False)


# --------------------------------------------------------------------------------------------
# Notebook → HTML
# --------------------------------------------------------------------------------------------

_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


def notebook_title(nb: Any, default: str) -> str:
    """The first Markdown heading, else the :func:`header` banner's title, else ``default``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", cell.source, flags=re.M)
            if m:
                return re.sub(r"[*_`]", "", m.group(1)).strip()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            m = re.search(r'data-ragnb-title="([^"]*)"', str(out.get("data", {}).get("text/html", "")))
            if m:
                return html.unescape(m.group(1))
    return default


def _make_plotly_offline(nb: Any) -> None:
    """Every plotly output gets offline text/html, and plotly.js precedes the first one."""
    first = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data") or {}
            if PLOTLY_MIME not in data:
                continue
            page = data.get("text/html")
            page = "".join(page) if isinstance(page, list) else (page or "")
            if _FIG_MARK not in page:  # e.g. fig.show() output: rebuild from the figure JSON
                page = figure_html(data[PLOTLY_MIME], include_plotlyjs=False)
            if first is None:
                first = data
                if _LIB_MARK not in page:
                    page = plotlyjs_html() + page
            data["text/html"] = page


def notebook_to_html(ipynb_path: str | Path, html_path: str | Path, hide_code: bool = True) -> Path:
    """Render an executed notebook to self-contained HTML (nbconvert lab template, no CDN scripts).

    Code inputs and prompts are hidden by default; outputs (including tracebacks of a failed cell) stay.
    The page title is the notebook's first heading.
    """
    import nbformat
    from jinja2 import DictLoader
    from nbconvert.exporters import HTMLExporter

    ipynb_path, html_path = Path(ipynb_path), Path(html_path)
    if not ipynb_path.is_file():
        raise ValueError(f"{ipynb_path}: notebook not found")
    nb = nbformat.read(ipynb_path, as_version=4)
    # The offline template has no widget manager: without saved widget state nbconvert renders each widget
    # output's text/html fallback instead of an empty widget view.
    nb.metadata.pop("widgets", None)
    _make_plotly_offline(nb)
    nb.metadata["title"] = notebook_title(nb, ipynb_path.stem)
    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"ragnb_offline.html.j2": _OFFLINE_TEMPLATE})],
        template_file="ragnb_offline.html.j2",
        exclude_input=hide_code,
        exclude_input_prompt=hide_code,
        exclude_output_prompt=hide_code,
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": ipynb_path.stem}})
    return atomic_write_text(html_path, body)


# --------------------------------------------------------------------------------------------
# Run index page
# --------------------------------------------------------------------------------------------

STATUS_COLOURS: dict[str, tuple[str, str]] = {  # status → (text, background)
    "excellent": ("#116329", "#dafbe1"),
    "good": ("#0550ae", "#ddf4ff"),
    "attention": ("#a40e26", "#ffebe9"),
    "failed": ("#ffffff", "#cf222e"),
    "ok": ("#116329", "#dafbe1"),
    "skipped": ("#57606a", "#eaeef2"),
    "no-data": ("#57606a", "#eaeef2"),
}

_INDEX_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;padding:0 16px;color:#1f2328}
h1{font-size:1.7em;margin-bottom:4px} h2{font-size:1.25em;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;font-size:14px;margin:8px 0} th,td{border:1px solid #d0d7de;padding:4px 10px;
text-align:left;vertical-align:top} th{background:#f6f8fa} .meta td,.meta th{border:0;padding:2px 14px 2px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:13px}
.summary{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px}
pre{white-space:pre-wrap;font-size:12px;background:#fff8f8;border:1px solid #ffcecb;padding:6px;margin:4px 0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _badge(status: str | None) -> str:
    if not status:
        return "—"
    fg, bg = STATUS_COLOURS.get(status, ("#1f2328", "#eaeef2"))
    return f'<span class="badge" style="color:{fg};background:{bg}">{_e(status)}</span>'


def _link(run_dir: Path, target: Any, label: str) -> str:
    if not target:
        return "—"
    p = Path(str(target))
    if p.is_absolute():
        rel = os.path.relpath(p, run_dir)
        exists = p.exists()
    else:
        rel, exists = str(p), (run_dir / p).exists()
    if not exists:
        return f'<span style="color:#57606a">{_e(label)} (missing)</span>'
    return f'<a href="{_e(quote(Path(rel).as_posix()))}">{_e(label)}</a>'


def _metric_rows(record: dict) -> str:
    blocks = [(k, TIER_LABELS.get(k, k), record.get(k)) for k in TIER_KEYS]
    blocks += [(k, k, v) for k, v in sorted((record.get("other_metrics") or {}).items())]
    rows = []
    for key, label, block in blocks:
        for name, value in iter_aggregates(block):
            rows.append(
                f"<tr><td>{_e(label)}</td><td><code>{_e(name)}</code></td>"
                f'<td class="num">{_e(format_aggregate(value))}</td><td>{_badge(block_status(name, value, key, block))}</td></tr>'
            )
    if not rows:
        return "<p>No metrics were recorded.</p>"
    return ("<table><tr><th>tier</th><th>metric</th><th>value (95% CI, n)</th><th>status</th></tr>"
            + "".join(rows) + "</table>")


def model_run_table(record: dict, per_tier: int = 6) -> pd.DataFrame:
    """One row per (judge model × generation model) combination of a sweep, one column per headline metric
    (``<tier label>: <metric>``, the mean); empty when the run was not a sweep."""
    rows = []
    for mr in record.get("model_runs") or []:
        row: dict[str, Any] = {"judge model": mr.get("judge_model") or "default",
                               "generation model": mr.get("generation_model") or "default",
                               "status": mr.get("status")}
        for key in TIER_KEYS:
            block = mr.get(key)
            if not isinstance(block, dict):
                continue
            for name, value in list(iter_aggregates(block))[:per_tier]:
                row[f"{TIER_LABELS.get(key, key)}: {name}"] = value.get("mean") if isinstance(value, dict) else value
        rows.append(row)
    return pd.DataFrame(rows)


def _model_run_section(record: dict) -> str:
    table = model_run_table(record)
    if table.empty:
        return ""
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{_e(format_aggregate(v))}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{_badge(v) if c == 'status' else _e(v)}</td>" for c, v in row.items()
        ) + "</tr>"
        for row in table.to_dict("records")
    )
    return ("<h2>Model sweep</h2><p>Every judge × generation model combination on the same items; the top-level "
            "metrics above are the first combination's.</p>"
            f"<table><tr>{head}</tr>{body}</table>")


def _report_rows(run_dir: Path, reports: list[dict]) -> str:
    rows = []
    for r in reports:
        error = f"<pre>{_e(r['error'])}</pre>" if r.get("error") else ""
        duration = f"{float(r['duration_s']):.1f} s" if r.get("duration_s") is not None else "—"
        rows.append(
            f"<tr><td><b>{_e(r.get('name') or r.get('stem'))}</b><br><code>{_e(r.get('stem'))}</code>{error}</td>"
            f"<td>{_badge(r.get('status'))}</td><td>{_link(run_dir, r.get('html'), 'report (HTML)')}</td>"
            f"<td>{_link(run_dir, r.get('ipynb'), 'notebook')}</td><td>{_link(run_dir, r.get('metrics'), 'metrics JSON')}</td>"
            f'<td class="num">{_e(duration)}</td></tr>'
        )
    return ("<table><tr><th>notebook</th><th>status</th><th>report</th><th>executed notebook</th>"
            "<th>metrics</th><th>time</th></tr>" + "".join(rows) + "</table>")


def index_html(run_dir: str | Path, run_record: dict, reports: list[dict]) -> str:
    """The run's index page as a string (see :func:`write_index`)."""
    run_dir = Path(run_dir)
    rec = run_record
    commit = rec.get("git_commit_hash")
    meta = [
        ("run id", rec.get("id")), ("timestamp", rec.get("timestamp")),
        ("git", f"{rec.get('git_branch') or '—'} @ {commit[:12] if commit else '—'}"),
        ("author", rec.get("run_author")), ("dataset", rec.get("dataset_file")),
        ("dataset type", rec.get("dataset_type")), ("embedding model", rec.get("embedding_model")),
        ("judge model", rec.get("judge_model")), ("generation model", rec.get("generation_model")),
    ]
    meta_rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in meta if v)
    params = rec.get("params") or {}
    params_html = ""
    if params:
        params_html = "<h2>Parameters</h2>" + "".join(
            f"<details><summary><code>{_e(nb)}</code></summary><pre style=\"background:#f6f8fa;border-color:#d0d7de\">"
            f"{_e(json.dumps(p, indent=2, ensure_ascii=False, default=str))}</pre></details>"
            for nb, p in params.items()
        )
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>ragnb run {_e(rec.get('id'))}</title><style>{_INDEX_CSS}</style></head><body>"
        f"<h1>ragnb run <code>{_e(rec.get('id'))}</code> {_badge(rec.get('overall_status'))}</h1>"
        f'<table class="meta">{meta_rows}</table>'
        f"<h2>Summary</h2><p class=\"summary\">{_e(rec.get('executive_summary'))}</p>"
        f"<h2>Reports</h2>{_report_rows(run_dir, reports)}"
        f"<h2>Key metrics</h2>{_metric_rows(rec)}{_model_run_section(rec)}{params_html}"
        f"<p style=\"color:#57606a;font-size:12px;margin-top:24px\">schema {_e(rec.get('schema_version'))} · "
        "thresholds from seed 000 §11.2: excellent above the upper bound, attention below the lower bound, "
        "good in between (bounds included).</p></body></html>\n"
    )


def write_index(run_dir: str | Path, run_record: dict, reports: list[dict]) -> Path:
    """Write ``<run_dir>/index.html``: run id, time, git, overall status, executive summary, links to
    each report's HTML / executed notebook / metrics JSON (relative), and the key metrics with status
    colours. ``reports`` items: ``name, stem, status, html, ipynb, metrics, error, duration_s``
    (paths absolute or relative to ``run_dir``). All text is escaped; no external resources."""
    run_dir = Path(run_dir)
    return atomic_write_text(run_dir / "index.html", index_html(run_dir, run_record, reports))
