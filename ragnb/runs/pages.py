"""Executed notebooks and run index pages as offline HTML — the pages a run writes into its folder.

What notebooks display while they run is :mod:`ragnb.reports` (a layer below the notebooks); this module reads run
records, so it sits with the runner, above them.

Offline: the nbconvert template has its CDN scripts (require.js, MathJax, mermaid, widgets) removed,
plotly.js precedes the first figure (the outputs folder's shared copy, or inlined for a standalone page), and all
text from records is HTML-escaped.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from ragnb import spec
from ragnb.io import atomic_write_text
from ragnb.reports.report import PLOTLY_FIG_MARK, PLOTLY_LIB_MARK, PLOTLY_MIME, figure_html, plotlyjs_html
from ragnb.metrics.stats import degenerate_reason
from ragnb.runs.record import block_status, format_aggregate, git_text, iter_aggregates
from ragnb.runs.summary import is_metric


# --------------------------------------------------------------------------------------------
# Notebook → HTML
# --------------------------------------------------------------------------------------------

_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_css -%}
<style type="text/css">
/* printed notes wrap between words (the lab stylesheet breaks them mid-word); wide outputs scroll sideways */
.jp-OutputArea-output pre{word-break:normal;overflow-wrap:anywhere;white-space:pre-wrap}
.jp-OutputArea-output{max-width:100%;overflow-x:auto}
</style>
{%- endblock html_head_css -%}
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


PLOTLYJS_ASSET = "assets/plotly.min.js"  # relative to the assets root (a run's outputs folder): one copy for all


def shared_plotlyjs(assets_root: str | Path) -> Path:
    """``<assets_root>/assets/plotly.min.js``: plotly.js as installed, written once per assets root — the outputs
    folder, for every run in it — and again only when the installed version differs."""
    from plotly.offline import get_plotlyjs

    path = Path(assets_root) / PLOTLYJS_ASSET
    lib = get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(lib.encode("utf-8")):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, lib)
    return path


def _make_plotly_offline(nb: Any, src: str | None = None) -> None:
    """Every plotly output gets offline text/html, and plotly.js precedes the first one: inline, or with
    ``src`` a ``<script src>`` to a local copy (a figure that carries plotly.js inline already keeps it)."""
    first = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data") or {}
            if PLOTLY_MIME not in data:
                continue
            page = data.get("text/html")
            page = "".join(page) if isinstance(page, list) else (page or "")
            if PLOTLY_FIG_MARK not in page:  # e.g. fig.show() output: rebuild from the figure JSON
                page = figure_html(data[PLOTLY_MIME], include_plotlyjs=False)
            if first is None:
                first = data
                if PLOTLY_LIB_MARK not in page:
                    page = plotlyjs_html(src) + page
            data["text/html"] = page


def notebook_to_html(ipynb_path: str | Path, html_path: str | Path, hide_code: bool = True,
                     assets_root: str | Path | None = None) -> Path:
    """Render an executed notebook to offline HTML (nbconvert lab template, no CDN scripts).

    ``assets_root`` None: a self-contained page (plotly.js inlined, ~5 MB). Else the folder (the runner passes
    the outputs folder) whose ``assets/plotly.min.js`` (:func:`shared_plotlyjs`) the page loads by a relative
    ``<script src>``, so all reports of all runs share one copy. Code inputs and prompts are hidden by default; outputs (including
    tracebacks of a failed cell) stay. The page title is the notebook's first heading.
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
    src = None
    if assets_root is not None:
        lib = shared_plotlyjs(assets_root)
        src = Path(os.path.relpath(lib.resolve(), html_path.resolve().parent)).as_posix()
    _make_plotly_offline(nb, src)
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
    if assets_root is not None:
        body = _share_css(body, exporter, Path(assets_root), html_path)
    return atomic_write_text(html_path, body)


SHARED_CSS = ("static/index.css", "static/theme-light.css")  # JupyterLab's stylesheets, ~260 kB per page


def _share_css(body: str, exporter: Any, assets_root: Path, html_path: Path) -> str:
    """Replace the lab template's inlined stylesheets by links to one copy in ``<assets_root>/assets/``."""
    env = exporter.environment
    for name in SHARED_CSS:
        css = env.loader.get_source(env, name)[0]
        inline = '<style type="text/css">\n%s</style>' % css  # as nbconvert's resources.include_css writes it
        if inline not in body:
            continue
        path = assets_root / "assets" / f"lab-{Path(name).name}"
        if not path.is_file() or path.read_text(encoding="utf-8") != css:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, css)
        href = Path(os.path.relpath(path.resolve(), html_path.resolve().parent)).as_posix()
        body = body.replace(inline, f'<link rel="stylesheet" href="{escape(href)}">', 1)
    return body


# --------------------------------------------------------------------------------------------
# Run index page
# --------------------------------------------------------------------------------------------

SAYS_NOTHING = "says nothing here"
STATUS_COLOURS: dict[str, tuple[str, str]] = {  # status → (text, background)
    "excellent": ("#116329", "#dafbe1"),
    "good": ("#0550ae", "#ddf4ff"),
    "attention": ("#a40e26", "#ffebe9"),
    "failed": ("#ffffff", "#cf222e"),
    "ok": ("#116329", "#dafbe1"),
    "skipped": ("#57606a", "#eaeef2"),
    "no-data": ("#57606a", "#eaeef2"),
    SAYS_NOTHING: ("#57606a", "#eaeef2"),  # a constant or few-item aggregate: grey, never a band colour
}

_INDEX_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;padding:0 16px;color:#1f2328}
h1{font-size:1.7em;margin-bottom:4px} h2{font-size:1.25em;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;font-size:14px;margin:8px 0} th,td{border:1px solid #d0d7de;padding:4px 10px;
text-align:left;vertical-align:top} th{background:#f6f8fa} .meta td,.meta th{border:0;padding:2px 14px 2px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:13px}
.summary{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px 10px 32px;
line-height:1.5} .summary li:first-child{font-weight:600;list-style:none;margin-left:-16px}
pre{white-space:pre-wrap;font-size:12px;background:#fff8f8;border:1px solid #ffcecb;padding:6px;margin:4px 0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def escape(value: Any) -> str:
    """HTML-escaped text of a value; None → empty."""
    return html.escape("" if value is None else str(value))


def _badge(status: str | None) -> str:
    if not status:
        return "—"
    fg, bg = STATUS_COLOURS.get(status, ("#1f2328", "#eaeef2"))
    return f'<span class="badge" style="color:{fg};background:{bg}">{escape(status)}</span>'


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
        return f'<span style="color:#57606a">{escape(label)} (missing)</span>'
    return f'<a href="{escape(quote(Path(rel).as_posix()))}">{escape(label)}</a>'


def _metric_rows(record: dict) -> str:
    blocks = [(k, spec.label_of(k), record.get(k)) for k in spec.TIER_KEYS]
    blocks += [(k, k, v) for k, v in sorted((record.get("other_metrics") or {}).items())]
    rows = []
    for key, label, block in blocks:
        for name, value in iter_aggregates(block):
            if not is_metric(name, record.get("params")):  # a setting echoed into the metrics JSON (limit, tau…)
                continue
            # A flagged aggregate is never graded: a grey "says nothing here" badge instead of a status colour.
            status = SAYS_NOTHING if degenerate_reason(value) else block_status(name, value, key, block)
            grade = spec.grade_of(spec.thresholds_of(name, key, block), value)
            # e.g. worse than always "show", an offline judge near chance on this kind of data, or a judge at chance
            # on the team's labels in Tier Judge
            why = f" {escape(grade.reason)}" if grade.rule in ("baselines", "uninformative", "judge_unvalidated") else ""
            rows.append(
                f"<tr><td>{escape(label)}</td><td><code>{escape(name)}</code></td>"
                f'<td class="num">{escape(format_aggregate(value))}</td><td>{_badge(status)}{why}</td></tr>'
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
        for key in spec.TIER_KEYS:
            block = mr.get(key)
            if not isinstance(block, dict):
                continue
            for name, value in list(iter_aggregates(block))[:per_tier]:
                row[f"{spec.label_of(key)}: {name}"] = value.get("mean") if isinstance(value, dict) else value
        rows.append(row)
    return pd.DataFrame(rows)


def _model_run_section(record: dict) -> str:
    table = model_run_table(record)
    if table.empty:
        return ""
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{escape(format_aggregate(v))}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{_badge(v) if c == 'status' else escape(v)}</td>" for c, v in row.items()
        ) + "</tr>"
        for row in table.to_dict("records")
    )
    return ("<h2>Model sweep</h2><p>Every judge × generation model combination on the same items; the top-level "
            "metrics above are the first combination's.</p>"
            f"<table><tr>{head}</tr>{body}</table>")


def _report_rows(run_dir: Path, reports: list[dict]) -> str:
    rows = []
    for r in reports:
        error = f"<pre>{escape(r['error'])}</pre>" if r.get("error") else ""
        duration = f"{float(r['duration_s']):.1f} s" if r.get("duration_s") is not None else "—"
        rows.append(
            f"<tr><td><b>{escape(r.get('name') or r.get('stem'))}</b><br><code>{escape(r.get('stem'))}</code>{error}</td>"
            f"<td>{_badge(r.get('status'))}</td><td>{_link(run_dir, r.get('html'), 'report (HTML)')}</td>"
            f"<td>{_link(run_dir, r.get('ipynb'), 'notebook')}</td><td>{_link(run_dir, r.get('metrics'), 'metrics JSON')}</td>"
            f'<td class="num">{escape(duration)}</td></tr>'
        )
    return ("<table><tr><th>notebook</th><th>status</th><th>report</th><th>executed notebook</th>"
            "<th>metrics</th><th>time</th></tr>" + "".join(rows) + "</table>")


def summary_html(text: Any) -> str:
    """The executive summary's lines as a list (the first, the status, in bold); all text escaped."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    if not lines:
        return '<p class="summary">No summary was recorded.</p>'
    return '<ul class="summary">' + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>"


def _inputs_section(record: dict) -> str:
    """What each notebook ran on (:func:`ragnb.runs.summary.run_inputs`): one row per notebook, its own inputs."""
    from ragnb.runs.summary import block_label, run_inputs

    inputs = record.get("inputs") if isinstance(record.get("inputs"), dict) else run_inputs(record)
    if not inputs:
        return ""
    rows = "".join(
        f"<tr><td>{escape(block_label(k))}</td>"
        + "".join(f"<td>{escape(v.get(f)) if v.get(f) else '—'}</td>"
                  for f in ("dataset", "corpus", "embedding_model"))
        + "</tr>" for k, v in inputs.items() if isinstance(v, dict))
    return ("<h2>Inputs</h2><table><tr><th>notebook</th><th>dataset</th><th>corpus</th><th>embedding model</th></tr>"
            + rows + "</table>")


def _param_value(value: Any) -> str:
    # one readable line per value: lists comma-separated, nested settings as key=value, paths as plain text
    if isinstance(value, (list, tuple)):
        return ", ".join(_param_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}={_param_value(v)}" for k, v in value.items())
    return "" if value is None else str(value)


def _params_section(params: dict) -> str:
    """Each notebook's parameters as a name/value table inside a collapsed ``<details>``."""
    if not params:
        return ""
    return "<h2>Parameters</h2>" + "".join(
        f"<details><summary><code>{escape(nb)}</code></summary><table>"
        + "".join(f"<tr><th><code>{escape(k)}</code></th><td>{escape(_param_value(v))}</td></tr>"
                  for k, v in (p.items() if isinstance(p, dict) else []))
        + "</table></details>"
        for nb, p in params.items()
    )


def index_html(run_dir: str | Path, run_record: dict, reports: list[dict]) -> str:
    """The run's index page as a string (see :func:`write_index`)."""
    run_dir = Path(run_dir)
    rec = run_record
    meta = [
        ("run id", rec.get("id")), ("timestamp", rec.get("timestamp")),
        ("git", git_text(rec)),  # None outside a git checkout: no line
        ("author", rec.get("run_author")),
        ("judge model", rec.get("judge_model")), ("generation model", rec.get("generation_model")),
    ]  # datasets, corpora and embedding models are per notebook: the Inputs table
    meta_rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in meta if v)
    params_html = _params_section(rec.get("params") or {})
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>ragnb run {escape(rec.get('id'))}</title><style>{_INDEX_CSS}</style></head><body>"
        f"<h1>ragnb run <code>{escape(rec.get('id'))}</code> {_badge(rec.get('overall_status'))}</h1>"
        f'<table class="meta">{meta_rows}</table>'
        f"<h2>Summary</h2>{summary_html(rec.get('executive_summary'))}{_inputs_section(rec)}"
        f"<h2>Reports</h2>{_report_rows(run_dir, reports)}"
        f"<h2>Key metrics</h2>{_metric_rows(rec)}{_model_run_section(rec)}{params_html}"
        f"<p style=\"color:#57606a;font-size:12px;margin-top:24px\">schema {escape(rec.get('schema_version'))} · "
        "thresholds (docs/metrics.md, Conventions): excellent above the upper bound, attention below the lower bound, "
        "good in between (bounds included).</p></body></html>\n"
    )


def write_index(run_dir: str | Path, run_record: dict, reports: list[dict]) -> Path:
    """Write ``<run_dir>/index.html``: run id, time, git, overall status, executive summary, links to
    each report's HTML / executed notebook / metrics JSON (relative), and the key metrics with status
    colours. ``reports`` items: ``name, stem, status, html, ipynb, metrics, error, duration_s``
    (paths absolute or relative to ``run_dir``). All text is escaped; no external resources."""
    run_dir = Path(run_dir)
    return atomic_write_text(run_dir / "index.html", index_html(run_dir, run_record, reports))
