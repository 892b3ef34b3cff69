"""Light run folders: one plotly.js per outputs folder, one per-item file per notebook, executed notebooks without
plotly.js, --standalone, quiet kernels."""

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from ragnb.runs.pages import PLOTLYJS_ASSET
from ragnb.runs.runner import run_notebooks

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.slow
PLOTLYJS_MIN_SIZE = 1_000_000  # plotly.js is ~4.8 MB; a figure's JSON in the tiny report is a few kB
SHARED_SRC = "../../" + PLOTLYJS_ASSET  # from outputs/runs/<run_id>/ to outputs/assets/


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("outputs")
    shared = run_notebooks(["tiny_report"], {"n_points": 6}, outputs=out, notebooks_dir=FIXTURES,
                           run_id="shared", log=lambda m: None)
    alone = run_notebooks(["tiny_report"], {"n_points": 6}, outputs=out, notebooks_dir=FIXTURES,
                          run_id="alone", log=lambda m: None, standalone=True)
    return shared, alone


def test_reports_share_one_local_plotlyjs(two_runs, tmp_path):
    shared, _ = two_runs
    out = shared.run_dir.parent.parent
    page = (shared.run_dir / "tiny_report.html").read_text()
    srcs = re.findall(r'<script data-ragnb-plotlyjs="shared" src="([^"]+)"', page)
    assert srcs == [SHARED_SRC]  # relative: the outputs folder can be moved or zipped as a whole
    lib = (shared.run_dir / srcs[0]).resolve()
    assert lib == (out / PLOTLYJS_ASSET).resolve() and lib.stat().st_size > PLOTLYJS_MIN_SIZE
    assert "plotly.js v" not in page and len(page.encode()) < PLOTLYJS_MIN_SIZE
    assert not re.search(r"<script[^>]*\bsrc=[\"']?(https?:)?//", page, flags=re.I)  # no CDN
    css = re.findall(r'<link rel="stylesheet" href="([^"]+)">', page)
    assert css == ["../../assets/lab-index.css", "../../assets/lab-theme-light.css"]
    assert all((shared.run_dir / href).is_file() for href in css)
    # a second run in the same outputs folder loads the same copy and writes none of its own
    again = run_notebooks(["tiny_report"], {"n_points": 3}, outputs=out, notebooks_dir=FIXTURES,
                          run_id="again", log=lambda m: None)
    assert re.findall(r'data-ragnb-plotlyjs="shared" src="([^"]+)"',
                      (again.run_dir / "tiny_report.html").read_text()) == [SHARED_SRC]
    assert sorted(p.name for p in (out / "assets").iterdir()) == ["lab-index.css", "lab-theme-light.css",
                                                                  "plotly.min.js"]


def test_run_folder_holds_one_per_item_file_and_no_plotlyjs(two_runs):
    shared, _ = two_runs
    files = sorted(p.name for p in shared.run_dir.iterdir() if not p.name.startswith("."))
    assert files == ["index.html", "run_record.json", "tiny_report.html", "tiny_report.ipynb",
                     "tiny_report.metrics.json", "tiny_report.per_item.csv"]
    size = sum(p.stat().st_size for p in shared.run_dir.rglob("*") if p.is_file())
    assert size < PLOTLYJS_MIN_SIZE  # the ~5 MB library lives once in the outputs folder, not in each run


def test_executed_notebook_carries_figure_json_only(two_runs):
    shared, _ = two_runs
    path = shared.run_dir / "tiny_report.ipynb"
    assert path.stat().st_size < PLOTLYJS_MIN_SIZE
    nb = nbformat.read(path, as_version=4)
    figures = [o for c in nb.cells for o in c.get("outputs", [])
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 2  # JupyterLab draws them from their JSON
    assert all("text/html" not in o["data"] for o in figures)  # no plotly.js, no second copy of the data


def test_standalone_report_inlines_plotlyjs(two_runs):
    _, alone = two_runs
    page = (alone.run_dir / "tiny_report.html").read_text()
    assert page.count('data-ragnb-plotlyjs="inline"') == 1 and "plotly.js v" in page
    assert "<script data-ragnb-plotlyjs=\"shared\"" not in page
    assert not (alone.run_dir / "assets").exists()


def test_kernel_is_encrypted_and_quiet(tmp_path, capfd):
    run_notebooks(["tiny_report"], {"n_points": 6}, outputs=tmp_path, notebooks_dir=FIXTURES, log=lambda m: None)
    captured = capfd.readouterr()
    assert "without encryption" not in captured.out + captured.err


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (run scripts/install_chromium.sh)")
def test_shared_plotlyjs_draws_in_headless_chromium_without_network(two_runs, tmp_path):
    shared, _ = two_runs
    moved = tmp_path / "moved"  # a copied outputs folder still draws: the script path is relative
    shutil.copytree(shared.run_dir.parent.parent, moved)
    dom = _headless_dom(moved / "runs" / "shared" / "tiny_report.html", tmp_path)
    plots = re.findall(r'class="[^"]*js-plotly-plot[^"]*".*?class="main-svg"', dom, flags=re.S)
    assert len(plots) == 2, "both plotly charts should have drawn an SVG"
    assert "#b00\">plotly.js is not loaded" not in dom  # the fallback message was not rendered
    # the run folder alone, without the outputs folder's assets: no chart (what docs/reports.md warns about)
    alone = tmp_path / "run-only"
    shutil.copytree(shared.run_dir, alone)
    dom = _headless_dom(alone / "tiny_report.html", tmp_path)
    assert "main-svg" not in dom and dom.count('#b00">plotly.js is not loaded') == 2  # said where each chart was


def _headless_dom(page: Path, tmp_path: Path) -> str:
    """The page's DOM after headless Chromium ran its scripts, with every network request refused."""
    cmd = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
        f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9", "--virtual-time-budget=15000", "--dump-dom", page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
