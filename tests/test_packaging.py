"""The notebooks ship inside the package: every declared tier's notebook is matched by pyproject's package data,
and the runner finds them inside the installed package, not through the checkout's notebooks/ link."""

from __future__ import annotations

import fnmatch
import tomllib

from conftest import REPO


def test_every_tier_notebook_is_package_data():
    from ragnb.runs.runner import notebooks_dir
    from ragnb.spec import TIERS

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ragnb"]
    folder = notebooks_dir()
    assert folder == REPO / "ragnb" / "notebooks"
    for spec in TIERS:
        assert (folder / spec.notebook).is_file(), spec.notebook
        assert any(fnmatch.fnmatch(f"notebooks/{spec.notebook}", p) for p in patterns), spec.notebook
    assert (REPO / "notebooks").resolve() == folder  # the checkout's notebooks/ is the same folder
