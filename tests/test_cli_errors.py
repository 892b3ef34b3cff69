"""Every ``ragnb`` command with bad input, as a user would type it (a subprocess): a message, never a traceback.

Usage errors exit 2 with the command's usage; ``--help`` / ``-h`` exit 0. A database that is down, a libpq
``key=value`` connection string and a write to a read-only database get a clear message too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from conftest import REPO
from ragnb.cli.main import build_cli

DOWN = "postgresql://reader:s3cretpw@127.0.0.1:1/nothing"  # port 1: nothing listens there
DOWN_KV = "host=127.0.0.1 port=1 dbname=nothing user=reader password=s3cretpw"

# (arguments, extra environment, expected exit code, text the message must contain)
CASES = [
    (["run", "--help"], {}, 0, "Usage: ragnb run"),
    (["run", "-h"], {}, 0, "--fail-on"),
    (["runs", "delete", "-h"], {}, 0, "--yes"),
    (["-h"], {}, 0, "compare"),
    (["run"], {}, 2, "name the notebooks to run"),
    (["run", "tier1", "-p", "top_k"], {}, 2, "Option '-p' requires 2 arguments"),
    (["run", "tier1", "-f", "missing.yaml"], {}, 2, "'missing.yaml' does not exist"),
    (["run", "tier1", "--bogus"], {}, 2, "No such option '--bogus'"),
    (["run", "tier9"], {}, 2, "unknown notebook 'tier9'"),
    (["run", "tier1", "-p", "top_k", "ten"], {}, 2, "must be int"),
    (["run", "tier1", "-p", "dataset_path", "no/such.json"], {}, 2, "dataset_path"),
    (["run", "tier1", "--fail-on", "sometimes"], {}, 2, "Invalid value for '--fail-on'"),
    (["compare"], {}, 2, "need two runs"),
    (["compare", "a", "b", "--format", "xml"], {}, 2, "use md or json"),
    (["runs", "show", "nope"], {}, 2, "unknown run id 'nope'"),
    (["runs", "delete", "nope", "--yes"], {}, 2, "unknown run id 'nope'"),
    (["runs", "delete", "", "--yes"], {}, 2, "run id '' is empty (an unset variable such as $RUN_ID?)"),
    (["runs", "delete", "..", "--yes"], {}, 2, "run id '..' is not usable as a folder name"),
    (["runs", "delete", "--yes"], {}, 2, "or pass --all to delete every run"),
    (["run", "tier1", "--run-id", ""], {}, 2, "run id '' is empty"),
    (["run", "tier1", "--run-id", "../x"], {}, 2, "run id '../x' is not usable as a folder name"),
    (["demo", "--run-id", ""], {}, 2, "run id '' is empty"),
    (["runs", "list", "--format", "xml"], {}, 2, "use table or json"),
    (["runs", "frobnicate"], {}, 2, "No such command"),
    (["load", "chunks", "missing.jsonl"], {}, 2, "missing.jsonl"),
    (["metrics", "retrieval", "--run", "missing.run", "--qrels", "missing.qrels"], {}, 2, "missing"),
    (["db", "status"], {"RAGNB_DATABASE_URL": DOWN}, 0, "Connection refused"),
    (["db", "index"], {"RAGNB_DATABASE_URL": DOWN}, 2, "cannot reach the database"),
    (["db", "index"], {"RAGNB_DATABASE_URL": DOWN_KV}, 2, "cannot reach the database"),
    (["db", "url"], {"RAGNB_DATABASE_URL": "host='unterminated"}, 2, "libpq 'key=value'"),
    (["load", "chunks", str(REPO / "ragnb" / "data"), "--write"], {"RAGNB_DATABASE_URL": DOWN}, 2, "cannot reach"),
    (["load", "chunks", str(REPO / "ragnb" / "data")], {"RAGNB_DATABASE_URL": DOWN}, 2, "Pass --write"),
    (["db", "reset", "--yes"], {"RAGNB_DATABASE_URL": DOWN}, 2, "never deletes data in an external database"),
    # checked once before the first notebook, instead of failing every notebook that reads it
    (["run", "tier1", "tier0", "-p", "corpus", "db"], {"RAGNB_DATABASE_URL": DOWN_KV}, 2,
     "tier1_retrieval, tier0_embeddings read the configured database (corpus: db), but cannot reach the database"),
]


def _ragnb(args: list[str], env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run([sys.executable, "-m", "ragnb.cli.main", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=None)


def test_bad_input_gives_a_message_never_a_traceback(tmp_path):
    env = {"RAGNB_OUTPUTS": str(tmp_path / "outputs")}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: _ragnb(case[0], {**env, **case[1]}, tmp_path), CASES))
    for (args, _, code, text), res in zip(CASES, results):
        shown = f"ragnb {' '.join(args)}\nstdout: {res.stdout[-800:]}\nstderr: {res.stderr[-1500:]}"
        assert "Traceback" not in res.stderr + res.stdout, shown
        assert res.returncode == code, shown
        assert text in res.stdout + res.stderr, shown
        assert "s3cretpw" not in res.stdout + res.stderr, shown  # the password never appears
        if code == 2 and args[0] == "run":
            assert "Usage: ragnb run" in res.stderr, shown


def test_run_list_shows_parameters_with_types_defaults_and_help(tmp_path):
    res = _ragnb(["run", "--list"], {}, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "tier1  (tier1.ipynb) — Tier 1 (retrieval)" in res.stdout
    assert '    top_k: int = 10  # chunks retrieved per question' in res.stdout
    assert "    output_dir:" not in res.stdout  # the runner's, not the user's


@pytest.mark.slow
def test_write_to_a_read_only_database_is_a_message(tmp_path):
    """``db index --drop`` on an external database opened read-only (ragnb's default for RAGNB_DATABASE_URL)."""
    from ragnb.store.engine import embedded_url

    name = f"cli_ro_{os.getpid()}"
    cli = CliRunner()
    rows = [{"id": f"c{i}", "text": f"text number {i}", "confluence_url": f"https://w/{i}"} for i in range(3)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for args in (["load", "chunks", str(path)], ["embed", "--chunks"], ["db", "index"]):
        res = cli.invoke(build_cli(), args, env={"RAGNB_EMBEDDED_DB": name}, catch_exceptions=False)
        assert res.exit_code == 0, res.output
    url = embedded_url(name)
    # the same database as a libpq key=value string is accepted as RAGNB_DATABASE_URL
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    kv = make_conninfo(**conninfo_to_dict(url.replace("postgresql+psycopg://", "postgresql://")))
    assert "://" not in kv
    status = _ragnb(["db", "status"], {"RAGNB_DATABASE_URL": kv}, tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["chunks"]["rows"] == 3, status.stdout + status.stderr
    res = _ragnb(["db", "index", "--drop"], {"RAGNB_DATABASE_URL": url}, tmp_path)
    assert "Traceback" not in res.stderr and res.returncode == 2, res.stderr
    assert "read-only" in res.stderr and "--write" in res.stderr
    ok = _ragnb(["db", "index", "--drop", "--write"], {"RAGNB_DATABASE_URL": url}, tmp_path)
    assert ok.returncode == 0 and "dropped" in ok.stdout, ok.stderr
