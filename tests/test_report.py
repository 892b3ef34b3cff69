import json
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from ragnb.reports import report
from ragnb.runs.pages import index_html, notebook_to_html, write_index
from ragnb.reports.report import PLOTLY_MIME, header_html, plotly_mimebundle, table_html
from ragnb.tiers.payload import write_metrics
from ragnb.io import read_per_item

XSS = "<script>alert('x')</script>"


def _strict_load(path):
    def reject(token):
        raise AssertionError(f"non-strict JSON token {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def test_write_metrics_strict_json_and_per_item(tmp_path):
    per_item = pd.DataFrame({"q": ["где? <b>", "b"], "score": [0.5, np.nan]})
    path = write_metrics(
        tmp_path / "run", "tier1_retrieval",
        {"mrr": {"mean": np.float64(0.25), "ci95": [math.nan, np.float32(math.inf)], "n": np.int64(2)},
         "flags": np.array([True, False]), "note": "ok"},
        per_item=per_item,
    )
    assert path == tmp_path / "run" / "tier1_retrieval.metrics.json"
    data = _strict_load(path)
    assert data == {"mrr": {"mean": 0.25, "ci95": [None, None], "n": 2}, "flags": [True, False], "note": "ok"}
    back = read_per_item(tmp_path / "run" / "tier1_retrieval.per_item.csv")  # the one per-item file
    pd.testing.assert_frame_equal(back, per_item)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["tier1_retrieval.metrics.json",
                                                                    "tier1_retrieval.per_item.csv"]
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]


def test_the_per_item_csv_reads_back_every_float_exactly(tmp_path):
    # the CSV is the only per-item file: ragnb compare's paired tests read these values, so no digit may be lost
    x = np.random.default_rng(7).random(5_000) / 3
    x[::11], x[1], x[2] = np.nan, 1e-300, 0.1 + 0.2
    frame = pd.DataFrame({"score": x, "n": np.arange(len(x))}, index=pd.Index([f"q{i}" for i in range(len(x))]))
    write_metrics(tmp_path, "tier1_retrieval", {"mrr": 0.5}, per_item=frame)
    back = read_per_item(tmp_path / "tier1_retrieval.per_item.csv")
    assert back["item_id"].tolist() == frame.index.tolist() and back["n"].tolist() == list(range(len(x)))
    assert np.array_equal(back["score"].to_numpy(), x, equal_nan=True)  # bit for bit, NaN where NaN


# A key-shaped value assembled at run time: the detector must catch it; no key-like literal is committed.
FAKE_KEY = "sk-" + "abcdefghijklmnopqrstuvwxyz" + "012345"


@pytest.mark.parametrize(
    "metrics",
    [
        {"judge": {"note": "called with " + FAKE_KEY}},
        {"dsn": "postgresql://bench:hunter2@db.example/ragnb"},
        {"models": [{"api_key": "abc123"}]},
        {"log": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"},
        {"cfg": "password=hunter2"},
    ],
)
def test_write_metrics_refuses_secrets(tmp_path, metrics):
    with pytest.raises(ValueError, match="secret|environment"):
        write_metrics(tmp_path, "t", metrics)
    assert not list(tmp_path.iterdir())  # nothing written


def test_write_metrics_allows_redacted_and_lookalikes(tmp_path):
    ok = {"dsn": "postgresql://bench:***@db/ragnb", "text": "risk-averse users ask about task-management",
          "api_key_env": "OPENROUTER_API_KEY", "max_tokens": 512, "tokenizer": "unicode"}
    assert _strict_load(write_metrics(tmp_path, "t", ok)) == ok


def test_write_metrics_bad_input(tmp_path):
    with pytest.raises(ValueError, match="plain file stem"):
        write_metrics(tmp_path, "../x", {})
    with pytest.raises(ValueError, match="dict"):
        write_metrics(tmp_path, "x", [1, 2])
    with pytest.raises(ValueError, match="DataFrame"):
        write_metrics(tmp_path, "x", {}, per_item=[{"a": 1}])
    with pytest.raises(ValueError, match="cannot store"):
        write_metrics(tmp_path, "x", {"a": object()})


def test_table_html_escapes_everything():
    df = pd.DataFrame({XSS: [XSS, "a & b"], "n": [1, 2]}, index=pd.Index([XSS, "i"], name="idx"))
    out = table_html(df)
    assert "<script>alert" not in out and out.count("<script>") == 1  # the sort script only
    assert out.count("&lt;script&gt;") == 3  # column name, cell, index label
    assert "a &amp; b" in out


def test_table_html_limits_rows_and_text():
    df = pd.DataFrame({"t": ["x" * 1000] * 50})
    out = table_html(df, max_rows=5, max_chars=20)
    assert out.count("<tr") == 6 and "Showing 5 of 50 rows" in out
    assert "x" * 19 + "…" in out and "x" * 21 not in out
    with pytest.raises(ValueError, match="DataFrame"):
        table_html([1, 2])


def test_table_html_is_clean_sortable_and_links_the_full_file():
    df = pd.DataFrame({
        "score": [0.1437908496, 1.0, float("nan")], "n": pd.array([612, 3, None], dtype="Int64"),
        "path": [Path("/x/a.csv"), Path("b"), None], "methods": [{"word_overlap": 612}, {"a": [1, 2]}, None],
        "empty": [None, None, None], "judged": [True, False, None],
    })
    out = table_html(df, max_rows=2, full="/runs/r/tier1_retrieval.per_item.csv")
    assert ">0.144<" in out and ">0.1437" not in out and ">1.00<" in out
    assert ">612<" in out and ">612.0<" not in out
    assert "PosixPath" not in out and ">/x/a.csv<" in out
    assert "word_overlap: 612" in out and "{" not in out.split("<script>")[0].split("</style>")[1]
    assert "empty" not in out.split("<p>")[0] and "Not shown, no value in any row: empty." in out
    assert 'Showing 2 of 3 rows. Every item: <a href="tier1_retrieval.per_item.csv">' in out
    assert 'data-v="0.1437908496"' in out and "onclick" in out
    nan_row = table_html(df.iloc[[1, 2]])
    assert "n/a" in nan_row and "<NA>" not in nan_row and "nan" not in nan_row.split("<script>")[0].lower()


def test_fmt_number_significant_digits_and_counts():
    from ragnb.runs.record import fmt_number

    cases = {0.1437908: "0.144", 0.0123456: "0.0123", 3.98: "3.98", 46.4: "46.4", 2.646: "2.65", 1.0: "1.00",
             0.0: "0.00", 612.0: "612", 12345.6: "12,346", 120: "120", None: "n/a", float("nan"): "n/a"}
    for value, text in cases.items():
        assert fmt_number(value) == text, value
    assert fmt_number({"mean": 0.5, "ci95": [0.4, 0.6]}) == "0.500"


def test_plain_formats_nested_values_and_paths():
    assert report.plain({"fallback_faithfulness": {"word_overlap": 612}}) == "fallback_faithfulness: word_overlap: 612"
    assert report.plain({"2d": 5.882, "3d": 0.862}) == "2d: 5.88, 3d: 0.862"
    assert report.plain(Path("/a/b.json")) == "/a/b.json" and report.plain(None) == "n/a"


def test_long_chart_labels_wrap_and_figures_get_automargin():
    from ragnb.analysis.source_charts import unused_by_page_bars, wrap_label

    assert wrap_label("short") == "short"
    assert wrap_label("a" * 30, width=10, lines=2) == "a" * 10 + "<br>" + "a" * 9 + "…"
    pages = pd.DataFrame({"chunks": [3], "unused_chunks": [1]},
                         index=pd.Index(["https://ru.wikipedia.org/wiki/%D0%9A%D0%B0%D1%80%D0%BB"], name="page"))
    fig = unused_by_page_bars(pages)
    assert fig.data[0].x[0] == "https://ru.wikipedia.org<br>/wiki/Карл"
    assert fig.data[0].customdata[0].endswith("%D0%BB")  # the hover keeps the full URL
    bundle = plotly_mimebundle(fig, include_plotlyjs=False)
    layout = bundle[PLOTLY_MIME]["layout"]
    assert layout["xaxis"]["automargin"] is True and layout["yaxis"]["automargin"] is True


def test_header_escapes_and_redacts():
    out = header_html(f"Tier 1 {XSS}", {"run_id": "r1", "dataset": XSS, "judge_backend": "offline-fallback",
                                        "db": "postgresql://u:secret@h/db"})
    assert "<script>" not in out and "secret" not in out and "u:***@h/db" in out
    assert "offline fallback" in out and "timestamp" in out


def test_plotly_bundle_lib_once_and_script_safe():
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name=f"</script>{XSS}"))
    first = plotly_mimebundle(fig, include_plotlyjs=True)
    later = plotly_mimebundle(fig, include_plotlyjs=False)
    assert first[PLOTLY_MIME]["data"][0]["type"] == "bar"
    assert len(first["text/html"]) > 1_000_000 and "plotly.js v" in first["text/html"]
    assert len(later["text/html"]) < 50_000 and "window.Plotly" in later["text/html"]
    assert "</script><script>alert" not in later["text/html"]
    assert not re.search(r"<script[^>]+src=", first["text/html"])
    with pytest.raises(ValueError, match="plotly Figure"):
        plotly_mimebundle(pd.DataFrame(), include_plotlyjs=False)


def test_show_embeds_plotlyjs_only_first_time(monkeypatch):
    shown = []
    monkeypatch.setattr(report, "_display", shown.append)
    monkeypatch.setattr(report, "_plotlyjs_sent", False)
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    assert report.show(fig) is None
    report.show(fig)
    assert 'data-ragnb-plotlyjs="inline"' in shown[0]["text/html"]
    assert 'data-ragnb-plotlyjs="inline"' not in shown[1]["text/html"]


def test_show_in_a_runner_kernel_keeps_only_the_figure_json(monkeypatch):
    shown = []
    monkeypatch.setattr(report, "_display", shown.append)
    monkeypatch.setenv(report.PLOTLYJS_ENV, "external")
    report.show(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
    assert set(shown[0]) == {PLOTLY_MIME, "text/plain"}


def _nb_with_outputs(bundles):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Intro\n\n## My **report** title\n\ntext")]
    for b in bundles:
        cell = nbformat.v4.new_code_cell("show(fig)")
        cell.outputs = [nbformat.v4.new_output("display_data", data=b)]
        nb.cells.append(cell)
    return nb


def test_nbconvert_chooses_text_html_and_html_is_offline(tmp_path):
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    # outputs that lack plotly.js (e.g. a re-run cell, or fig.show()'s JSON only): the library is added
    later = plotly_mimebundle(fig, include_plotlyjs=False)
    json_only = {PLOTLY_MIME: later[PLOTLY_MIME], "text/plain": "<fig>"}
    nb = _nb_with_outputs([later, json_only])
    nbformat.write(nb, tmp_path / "r.ipynb")
    out = notebook_to_html(tmp_path / "r.ipynb", tmp_path / "r.html")
    page = out.read_text()
    assert "<title>My report title</title>" in page
    assert page.count('data-ragnb-plotlyjs="inline"') == 1
    assert page.count('class="plotly-graph-div"') == 2
    assert page.index('data-ragnb-plotlyjs="inline"') < page.index('class="plotly-graph-div"')
    assert not re.search(r"<script[^>]*\bsrc=[\"']?https?://", page)
    assert not re.search(r"<link[^>]*href=[\"']?https?://", page)
    assert "cdnjs" not in page and "require.min.js" not in page
    assert "show(fig)" not in page  # code hidden
    shown = notebook_to_html(tmp_path / "r.ipynb", tmp_path / "code.html", hide_code=False).read_text()
    assert "jp-InputArea" in shown and ">show<" in shown


def test_html_in_a_subfolder_loads_the_run_folders_shared_plotlyjs(tmp_path):
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    nbformat.write(_nb_with_outputs([plotly_mimebundle(fig, include_plotlyjs=False)]), tmp_path / "r.ipynb")
    sub = tmp_path / "models" / "judge__gen"  # a model sweep's combination folder
    page = notebook_to_html(tmp_path / "r.ipynb", sub / "r.html", assets_root=tmp_path).read_text()
    assert '<script data-ragnb-plotlyjs="shared" src="../../assets/plotly.min.js"></script>' in page
    lib = tmp_path / "assets" / "plotly.min.js"
    assert lib.is_file() and "plotly.js v" in lib.read_text()[:2000]
    before = lib.stat().st_mtime_ns
    notebook_to_html(tmp_path / "r.ipynb", tmp_path / "r.html", assets_root=tmp_path)
    assert lib.stat().st_mtime_ns == before  # written once per run folder
    top = (tmp_path / "r.html").read_text()
    assert 'src="assets/plotly.min.js"' in top
    # JupyterLab's stylesheets are shared too: linked, not inlined into every page
    assert '<link rel="stylesheet" href="../../assets/lab-index.css">' in page
    assert '<link rel="stylesheet" href="assets/lab-theme-light.css">' in top
    assert (tmp_path / "assets" / "lab-index.css").stat().st_size > 100_000 and len(top) < 100_000
    alone = notebook_to_html(tmp_path / "r.ipynb", tmp_path / "alone.html").read_text()
    assert "<link rel=\"stylesheet\"" not in alone and len(alone) > 4_000_000  # standalone: all inside


def _record(**over):
    rec = {"id": "20250101-000000-abcd", "timestamp": "2025-01-01T00:00:00+00:00", "git_branch": "main",
           "git_commit_hash": "0123456789abcdef", "run_author": "ada", "schema_version": "2.0",
           "dataset_file": f"data/{XSS}.jsonl", "embedding_model": "mini", "overall_status": "attention",
           "executive_summary": f"Summary {XSS}",
           "tier_1_metrics": {"hit_rate@1": {"mean": 0.4, "ci95": [0.3, 0.5], "n": 10}, "mrr": 0.85,
                              XSS: 0.1, "judge_backend": "offline-fallback"},
           "params": {"tier1_retrieval": {"label": XSS}}}
    rec.update(over)
    return rec


def test_index_escapes_and_links_relative(tmp_path):
    for name in ["tier1_retrieval.html", "tier1_retrieval.ipynb", "tier1_retrieval.metrics.json"]:
        (tmp_path / name).write_text("x")
    reports = [
        {"name": "tier1", "stem": "tier1_retrieval", "status": "ok", "html": str(tmp_path / "tier1_retrieval.html"),
         "ipynb": "tier1_retrieval.ipynb", "metrics": "tier1_retrieval.metrics.json", "duration_s": 1.5},
        {"name": XSS, "stem": "tier2", "status": "failed", "html": "tier2.html", "ipynb": None,
         "metrics": None, "error": f"RuntimeError: {XSS}"},
    ]
    path = write_index(tmp_path, _record(), reports)
    page = path.read_text()
    assert path == tmp_path / "index.html"
    assert "<script" not in page and "&lt;script&gt;" in page
    assert 'href="tier1_retrieval.html"' in page and 'href="tier1_retrieval.ipynb"' in page
    assert 'href="tier1_retrieval.metrics.json"' in page
    assert "tier2.html" not in page.split("failed", 1)[1].split("</tr>")[0] or "(missing)" in page
    assert not re.search(r"https?://", page)
    assert "0.400 (95% CI 0.300–0.500, n=10)" in page
    assert "#ffebe9" in page and "#dafbe1" in page  # attention and excellent colours
    assert "0123456789ab" in page and "main" in page


def test_index_without_metrics():
    page = index_html(".", {"id": "r", "overall_status": "no-data"}, [])
    assert "No metrics were recorded" in page


def test_run_id_of():
    assert report.run_id_of("/x/outputs/runs/20250101-000000-abcd") == "20250101-000000-abcd"
    assert report.run_id_of("outputs/tiny") is None
