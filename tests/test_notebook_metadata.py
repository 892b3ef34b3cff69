"""The package's notebooks are committed in one form, and opening or running them in JupyterLab is not a change.

The form is :mod:`scripts/clean_notebook.py`'s: outputs cleared and only the declared metadata. Git reads the
notebooks through that script (``.gitattributes``, registered by ``scripts/setup.sh``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess

import pytest

from conftest import REPO

spec = importlib.util.spec_from_file_location("clean_notebook", REPO / "scripts" / "clean_notebook.py")
clean_notebook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clean_notebook)

NOTEBOOKS = sorted((REPO / "ragnb" / "notebooks").glob("*.ipynb"))


def _as_jupyterlab_saves_it(nb: dict) -> dict:
    """What JupyterLab writes after opening the notebook and running its cells (JupyterLab 4, ipykernel)."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"]["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py", "mimetype": "text/x-python",
        "name": "python", "nbconvert_exporter": "python", "pygments_lexer": "ipython3", "version": "3.12.4"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    nb["metadata"]["kernelspec"] = {"display_name": ".venv", "language": "python", "name": "python3"}
    for i, cell in enumerate(nb["cells"]):
        cell["metadata"]["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00.000Z"}
        cell["metadata"]["scrolled"] = True
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}]
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_carry_only_the_declared_metadata(path):
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    assert set(nb["metadata"]) <= set(clean_notebook.NOTEBOOK_METADATA), sorted(nb["metadata"])
    assert set(nb["metadata"].get("jupytext", {})) <= set(clean_notebook.JUPYTEXT_KEYS)
    assert nb["metadata"]["kernelspec"] == clean_notebook.KERNELSPEC
    for cell in nb["cells"]:
        assert set(cell["metadata"]) <= set(clean_notebook.CELL_METADATA), (path.name, sorted(cell["metadata"]))
    assert clean_notebook.dumps(clean_notebook.clean(nb)) == text, f"{path.name}: run scripts/clean_notebook.py on it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_what_jupyterlab_adds_cleans_back_to_the_committed_file(path):
    text = path.read_text(encoding="utf-8")
    opened = _as_jupyterlab_saves_it(json.loads(text))
    assert clean_notebook.dumps(opened) != text
    assert clean_notebook.dumps(clean_notebook.clean(opened)) == text


def test_git_sees_no_change_after_jupyterlab_saved_a_notebook_but_sees_an_edit(tmp_path):
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    setup = (REPO / "scripts" / "setup.sh").read_text(encoding="utf-8")
    register = re.search(r"^\s*(git config filter\.ragnb-notebook\.clean .+)$", setup, re.M)
    assert register, "scripts/setup.sh no longer registers the notebook filter"
    (tmp_path / "scripts").mkdir()
    (tmp_path / "ragnb" / "notebooks").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "clean_notebook.py", tmp_path / "scripts")
    shutil.copy(REPO / ".gitattributes", tmp_path)
    nb_path = tmp_path / "ragnb" / "notebooks" / "dashboard.ipynb"
    shutil.copy(REPO / "ragnb" / "notebooks" / "dashboard.ipynb", nb_path)

    def run(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    run(git, "init", "-q")
    run("bash", "-c", register.group(1))
    run(git, "add", "-A")
    run(git, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "notebooks")
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    nb_path.write_text(clean_notebook.dumps(_as_jupyterlab_saves_it(nb)), encoding="utf-8")
    # No difference, and nothing to commit. (Before that ``git add``, ``git status`` may still list the file: git
    # takes a changed size for a change without reading the file; adding it refreshes the index.)
    assert run(git, "diff", "--stat") == ""
    run(git, "add", "-A")
    assert run(git, "status", "--porcelain") == ""
    nb["cells"][0]["source"] = ["# Edited\n"]
    nb_path.write_text(clean_notebook.dumps(nb), encoding="utf-8")
    assert "dashboard.ipynb" in run(git, "diff", "--stat")
