"""The committed form of a report notebook: outputs cleared, only the metadata the project declares.

Opening a notebook in JupyterLab and running it adds what the project does not keep: ``language_info`` (the
kernel's Python version, which differs per machine), widget state, outputs and execution counts, per-cell
``execution`` timings and view state (``collapsed``, ``scrolled``). This filter drops all of it, so that git sees
no change in ``ragnb/notebooks/*.ipynb`` after a notebook was only opened or run (``.gitattributes`` names the
filter; ``scripts/setup.sh`` registers it in the clone's git config).

    python scripts/clean_notebook.py < nb.ipynb > clean.ipynb    # the git "clean" filter
    python scripts/clean_notebook.py ragnb/notebooks/*.ipynb     # rewrite files in place

Standard library only: git runs it on every ``git status`` of a touched notebook.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# What a committed notebook keeps. Notebook level: jupytext's pairing and the kernel every notebook runs on.
NOTEBOOK_METADATA = ("jupytext", "kernelspec")
JUPYTEXT_KEYS = ("formats",)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# Cell level: papermill's ``parameters`` tag, and jupytext's blank lines between cells of the paired .py.
CELL_METADATA = ("tags", "lines_to_next_cell")


def clean(nb: dict[str, Any]) -> dict[str, Any]:
    """``nb`` (a notebook's JSON) in its committed form; ``nb`` itself is not changed."""
    nb = json.loads(json.dumps(nb))
    meta = nb.get("metadata", {})
    nb["metadata"] = {k: meta[k] for k in NOTEBOOK_METADATA if k in meta}
    if "jupytext" in nb["metadata"]:
        nb["metadata"]["jupytext"] = {k: v for k, v in nb["metadata"]["jupytext"].items() if k in JUPYTEXT_KEYS}
    nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.get("cells", []):
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in CELL_METADATA}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def dumps(nb: dict[str, Any]) -> str:
    """The notebook as Jupyter writes it (nbformat: one-space indent, sorted keys, UTF-8 text, final newline)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(paths: list[str]) -> int:
    if not paths:
        sys.stdout.write(dumps(clean(json.loads(sys.stdin.read()))))
        return 0
    for path in map(Path, paths):
        text = path.read_text(encoding="utf-8")
        cleaned = dumps(clean(json.loads(text)))
        if cleaned != text:
            path.write_text(cleaned, encoding="utf-8")
            print(f"cleaned {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
