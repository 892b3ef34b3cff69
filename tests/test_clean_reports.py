"""A rendered report (executed notebook + HTML + the run's index page) holds no raw Python dumps: no
``PosixPath(…)``, ``<NA>``/``None`` cells, dict reprs, 6-decimal table cells, and no kernel transport warning."""

import html
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PATTERNS = {
    "a PosixPath repr": re.compile(r"PosixPath\("),
    "a pandas <NA>": re.compile(r"<NA>"),
    "the kernel's TCP warning": re.compile(r"TCP without encryption"),
    "a float with 7+ decimals": re.compile(r"(?<![\w.])-?\d+\.\d{7,}(?!\d)"),
    "a dict repr": re.compile(r"\{\s*['\"][^'\"]+['\"]\s*:\s"),
}
CELL_PATTERNS = {  # inside table cells only
    "a None cell": re.compile(r"^None$"),
    "a NaN cell": re.compile(r"^(nan|NaN|<NA>)$"),
    "a 6-decimal cell": re.compile(r"^-?\d+\.\d{6}$"),
}


def _visible(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return page


def report_problems(page: str) -> list[str]:
    """What a rendered HTML page (or an output's text/html) shows that a reader should not see."""
    visible = _visible(page)
    text = html.unescape(re.sub(r"<[^>]+>", " ", visible))
    found = [f"{what}: {m.group(0)!r} in …{text[max(0, m.start() - 60):m.end() + 20]!r}"
             for what, pat in PATTERNS.items() for m in [pat.search(text)] if m]
    for cell in re.findall(r"<td\b[^>]*>(.*?)</td>", visible, flags=re.S):
        value = html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
        found += [f"{what}: {value!r}" for what, pat in CELL_PATTERNS.items() if pat.match(value)]
    return found


def notebook_problems(path: Path) -> list[str]:
    """:func:`report_problems` over every output of an executed notebook (streams, text and HTML outputs)."""
    nb = json.loads(path.read_text())
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "application/vnd.plotly.v1+json" in data:
                continue
            parts = [out.get("text", ""), data.get("text/html", ""), out.get("traceback", "")]
            if "text/html" not in data:
                parts.append(html.escape("".join(data.get("text/plain", ""))))
            found += report_problems("".join("".join(p) if isinstance(p, list) else p for p in parts))
    return found


def test_scanner_finds_each_problem():
    bad = ("<p>PosixPath('/x')</p><p>{'a': 1}</p><td>None</td><td>0.123456</td><td>&lt;NA&gt;</td>"
           "<pre>Kernel is running over TCP without encryption.</pre><p>0.12345678</p>")
    assert len(report_problems(bad)) == 8  # <NA> counts as text and as a cell
    assert report_problems("<td>0.123</td><td>n/a</td><script>var x = {'a': 1}; 0.12345678</script>") == []


@pytest.mark.slow
def test_rendered_demo_reports_are_clean(tmp_path):
    from ragnb.runs.runner import run_notebooks

    result = run_notebooks(["tier0", "tier1"], {}, params_file=str(REPO / "params" / "smoke.yaml"), outputs=tmp_path)
    assert result.failures == []
    problems = {}
    for path in sorted(result.run_dir.glob("*.html")):
        problems[path.name] = report_problems(path.read_text())
    for path in sorted(result.run_dir.glob("*.ipynb")):
        problems[path.name] = notebook_problems(path)
    assert len(problems) == 5  # index + 2 reports + 2 notebooks
    assert {k: v for k, v in problems.items() if v} == {}
