"""``ragnb embed --replace`` with a damaged disk cache (issue 26, item 9): the command ends as one line naming the
cache file and the fix, and every old vector of the model is still there, bit for bit — the old vectors go only
in the transaction that stores their replacements. Real CLI processes, the embedded PostgreSQL, the embeddings
test server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import count
from pathlib import Path

import numpy as np
import pytest
from embeddings_server import expected_vector, isolate_provider_env

from ragnb.store.engine import connect
from ragnb.store.vectors import fetch_vectors

REPO = Path(__file__).resolve().parent.parent
CHUNKS = [{"id": f"c{i:02d}", "text": f"chunk number {i} says something of its own {'.' * i}",
           "confluence_url": f"https://wiki/p?pageId={i}"} for i in range(12)]
MODELS = ("endpoint:emb-small", "endpoint:emb-large")  # the table's own column, then a vector table
_names = count()


@pytest.fixture
def run(tmp_path, monkeypatch, embeddings_server):
    """``ragnb …`` as a process on a database of its own; returns (exit code, stdout, stderr)."""
    isolate_provider_env(monkeypatch, tmp_path / "cache")
    env = {**os.environ, "RAGNB_EMBEDDED_DB": f"damaged_cache_{os.getpid()}_{next(_names)}",
           "RAGNB_EMBEDDING_BASE_URL": embeddings_server.base_url, "PYTHONPATH": str(REPO)}

    def invoke(*args: str, **extra: str) -> tuple[int, str, str]:
        res = subprocess.run([sys.executable, "-m", "ragnb.cli.main", *args], capture_output=True, text=True,
                             env={**env, **extra}, cwd=tmp_path)
        return res.returncode, res.stdout, res.stderr

    invoke.db_name = env["RAGNB_EMBEDDED_DB"]
    return invoke


def _vectors(db_name: str) -> dict[str, dict[str, bytes]]:
    db = connect(database=db_name)
    try:
        out = {}
        for model in MODELS:
            ids, _, vecs = fetch_vectors(db, "chunks", model.split(":", 1)[1] if model != MODELS[0] else None)
            out[model] = {i: v.tobytes() for i, v in zip(ids, vecs)}
        return out
    finally:
        db.dispose()


def _garbage_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"this is no sqlite file!" * 5 + data[115:])


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3])


@pytest.mark.parametrize("damage", [_garbage_header, _truncated])
def test_replace_with_a_damaged_cache_names_the_file_and_keeps_every_old_vector(run, tmp_path, damage):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHUNKS), encoding="utf-8")
    assert run("load", "chunks", "c.jsonl")[0] == 0
    for model in MODELS:
        code, out, err = run("embed", "--chunks", "--model", model)
        assert code == 0 and json.loads(out)["processed"] == 12, err
    before = _vectors(run.db_name)
    want_small = np.stack([expected_vector(c["text"], 8) for c in CHUNKS])
    assert np.array_equal(np.stack([np.frombuffer(before[MODELS[0]][c["id"]], np.float32) for c in CHUNKS]),
                          want_small)
    assert [len(before[m]) for m in MODELS] == [12, 12]

    files = sorted((tmp_path / "cache").glob("*.sqlite3"))
    assert files
    for f in (tmp_path / "cache").iterdir():  # the write-ahead log would repair what we damage
        if f.suffix != ".sqlite3":
            f.unlink()
    for f in files:
        damage(f)
    for model in MODELS:
        code, out, err = run("embed", "--chunks", "--model", model, "--replace")
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("error: embedding cache ") and " is damaged (sqlite: " in err
        assert any(str(f) in err for f in files), err
        assert "move it aside" in err and "RAGNB_EMBEDDING_CACHE=off" in err
        assert _vectors(run.db_name) == before  # all 12 of each model, bit-identical

    # the way out the message names: without the cache, --replace re-embeds all 12 (same server, same vectors)
    code, out, err = run("embed", "--chunks", "--model", MODELS[0], "--replace", RAGNB_EMBEDDING_CACHE="off")
    assert code == 0 and json.loads(out)["processed"] == 12, err
    assert _vectors(run.db_name) == before
