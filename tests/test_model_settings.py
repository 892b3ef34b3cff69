"""Like-for-like embedding models: per-model query/document settings (prompts, input_type, dimensions) given on
the command line, in a notebook's parameters or in RAGNB_EMBEDDING_MODEL_OPTIONS reach the real scripted
embeddings server as sent, are recorded with the vectors in the real embedded PostgreSQL, are compared before a
search (other settings: refused, naming what differs), and appear in the side-by-side table — where an input
limit ragnb cannot know is shown as unknown, never as "truncated 0%"."""

from __future__ import annotations

import json
import os
from itertools import count

import numpy as np
import pytest
from embeddings_server import expected_vector, isolate_provider_env
from click.testing import CliRunner

from ragnb.cli.main import build_cli

CHUNKS = [
    {"id": "vpn#0", "text": "Доступ к VPN настраивается в личном кабинете сотрудника.", "url": "https://wiki/vpn"},
    {"id": "vpn#1", "text": "Если VPN не подключается, перезапустите клиент и проверьте токен.", "url": "https://wiki/vpn"},
    {"id": "backup#0", "text": "A deleted table is restored from the nightly backup by the on-call engineer.",
     "url": "https://wiki/backup"},
]
QUESTIONS = [
    {"id": "q1", "question": "Как настроить VPN?", "url": "https://wiki/vpn", "session_id": "s1",
     "created_at": "2026-01-05T10:00:00"},
    {"id": "q2", "question": "А если не подключается?", "url": "https://wiki/vpn", "session_id": "s1",
     "created_at": "2026-01-05T10:01:00"},
    {"id": "q3", "question": "How do I restore a deleted table?", "url": "https://wiki/backup", "session_id": "s2",
     "created_at": "2026-01-06T09:00:00"},
]
E5_LIKE = {"query_prompt": "query: ", "document_prompt": "passage: ", "input_type": "search_query,search_document"}
_names = count()


@pytest.fixture(autouse=True)
def _clean_env(tmp_path, monkeypatch):
    isolate_provider_env(monkeypatch, tmp_path / "emb_cache")


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def wiki(tmp_path, monkeypatch, embeddings_server):
    """A new embedded database holding a small bilingual wiki and its question log; ``cli(...)`` runs ``ragnb``
    in-process on it, the process environment points at the same database and the scripted server."""
    name = f"model_settings_{os.getpid()}_{next(_names)}"
    env = {"RAGNB_EMBEDDED_DB": name, "RAGNB_EMBEDDING_CACHE": str(tmp_path / "emb_cache"),
           "RAGNB_EMBEDDING_BASE_URL": embeddings_server.base_url}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    runner = CliRunner()

    def cli(*args: str, **extra: str):
        return runner.invoke(build_cli(), list(args), env={**env, **extra}, catch_exceptions=False)

    assert cli("load", "chunks", str(_jsonl(tmp_path / "chunks.jsonl", CHUNKS))).exit_code == 0
    assert cli("load", "questions", str(_jsonl(tmp_path / "log.jsonl", QUESTIONS))).exit_code == 0
    return cli


def _sent(server, first: int = 0) -> list[tuple[list[str], object]]:
    """(input texts, input_type) of each embeddings request from the ``first``-th on."""
    return [(r.body["input"], r.body.get("input_type")) for r in server.embedding_requests[first:]]


def test_cli_settings_reach_the_server_and_are_recorded(wiki, embeddings_server):
    res = wiki("embed", "--chunks", "--questions", "--model", "endpoint:emb-small", "--query-prompt", "query: ",
               "--document-prompt", "passage: ", "--input-type", "search_query,search_document")
    assert res.exit_code == 0, res.output
    sent = _sent(embeddings_server)
    # the one-text request that asks the endpoint for its dimension is a document request like the others
    documents = [("passage: " + c["text"], "search_document") for c in CHUNKS] + [
        ("passage: dimension probe", "search_document")]
    queries = [("query: " + q["question"], "search_query") for q in QUESTIONS]
    assert sorted((t, kind) for texts, kind in sent for t in texts) == sorted(documents + queries)

    from ragnb.store.engine import connect
    from ragnb.store.vectors import fetch_vectors

    db = connect()
    ids, _, vectors = fetch_vectors(db, "chunks", model="emb-small")
    by_id = {c["id"]: c["text"] for c in CHUNKS}
    np.testing.assert_array_equal(vectors, np.stack([expected_vector("passage: " + by_id[i], 8) for i in ids]))
    status = json.loads(wiki("db", "status").stdout)
    recorded = {"query_prompt": "query: ", "document_prompt": "passage: ", "dimensions": None,
                "input_type": {"query": "search_query", "document": "search_document"}}
    for which in ("chunks", "questions"):
        (model,) = status[which]["models"]
        assert (model["model"], model["default"], model["settings"]) == ("emb-small", True, recorded)

    # a second model, other settings, goes beside the first: its own settings recorded in the catalogue
    res = wiki("embed", "--chunks", "--model", "endpoint:emb-large", "--dimensions", "4")
    assert res.exit_code == 0 and json.loads(res.stdout)["storage"] == "table"
    assert {r.body.get("dimensions") for r in embeddings_server.embedding_requests[-1:]} == {4}
    models = {m["model"]: m for m in json.loads(wiki("db", "status").stdout)["chunks"]["models"]}
    assert models["emb-large"]["settings"] == {"query_prompt": None, "document_prompt": None, "input_type": None,
                                               "dimensions": 4}
    assert models["emb-large"]["default"] is False and models["emb-large"]["dim"] == 4


def test_a_search_with_other_query_settings_is_refused_naming_them(wiki, embeddings_server, monkeypatch):
    from ragnb.datasets.corpus import open_corpora

    assert wiki("embed", "--chunks", "--model", "endpoint:emb-small", "--query-prompt", "query: ",
                "--document-prompt", "passage: ", "--input-type", "search_query,search_document").exit_code == 0
    with pytest.raises(ValueError) as err:
        open_corpora("db", embedding_model="endpoint:emb-small")
    assert str(err.value) == (
        "ragnb_vectors_chunk (the default vectors of chunk) holds vectors of model 'emb-small' made with other query/document settings than the "
        "active encoder's (query prompt 'query: ' → none; document prompt 'passage: ' → none; input type "
        "'search_query' / 'search_document' → not sent): its queries would search vectors encoded another way. "
        "Re-embed that model with `ragnb embed --model endpoint:emb-small --replace` (and the settings you want), or use the "
        "settings that made the stored vectors (--query-prompt 'query: ' --document-prompt 'passage: ' --input-type "
        "search_query,search_document, or the same in embedding_model_options / RAGNB_EMBEDDING_MODEL_OPTIONS).")
    # only the query prompt differs: only it is named
    with pytest.raises(ValueError, match=r"settings than the active encoder's \(query prompt 'query: ' → 'q: '\)"):
        open_corpora("db", embedding_model="endpoint:emb-small",
                     embedding_model_options={"endpoint:emb-small": {**E5_LIKE, "query_prompt": "q: "}})
    # the same settings from a notebook's parameter (JSON) or from the environment: searched like for like
    (ctx,) = open_corpora("db", embedding_model="endpoint:emb-small",
                          embedding_model_options=json.dumps({"endpoint:emb-small": E5_LIKE}))
    assert ctx.space["model"] == "emb-small"
    first = len(embeddings_server.embedding_requests)
    from ragnb.embeddings.base import encode_queries

    np.testing.assert_array_equal(encode_queries(ctx.encoder, ["Как настроить VPN?"]),
                                  expected_vector("query: Как настроить VPN?", 8)[None])
    assert _sent(embeddings_server, first) == [(["query: Как настроить VPN?"], "search_query")]
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL_OPTIONS", json.dumps({"endpoint:emb-small": E5_LIKE}))
    assert open_corpora("db", embedding_model="endpoint:emb-small")[0].encoder.prompts == {
        "query": "query: ", "document": "passage: "}


def test_the_retrieve_command_takes_the_settings_too(wiki, tmp_path):
    assert wiki("embed", "--chunks", "--model", "endpoint:emb-small", "--query-prompt", "query: ").exit_code == 0
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps({"name": "wiki", "type": "manual", "items": [
        {"id": "q1", "question": "Как настроить VPN?", "relevant_chunk_ids": ["vpn#0"]}]}, ensure_ascii=False),
        encoding="utf-8")
    res = wiki("retrieve", "--out", str(tmp_path / "run.trec"), "--dataset", str(dataset), "--backend", "memory",
               "--model", "endpoint:emb-small")
    assert res.exit_code == 2 and "(query prompt 'query: ' → none)" in res.stderr and res.stderr.count("\n") == 1
    res = wiki("retrieve", "--out", str(tmp_path / "run.trec"), "--dataset", str(dataset), "--backend", "memory",
               "--model", "endpoint:emb-small", "--query-prompt", "query: ")
    assert res.exit_code == 0, res.output
    chunk_vectors = {c["id"]: expected_vector(c["text"], 8) for c in CHUNKS}  # no document prompt given
    query = expected_vector("query: Как настроить VPN?", 8)
    best = max(chunk_vectors, key=lambda i: float(chunk_vectors[i] @ query))
    assert (tmp_path / "run.trec").read_text().splitlines()[0].split()[:3] == ["q1", "Q0", best]


def test_model_options_are_checked_where_they_are_given(monkeypatch):
    from ragnb.datasets.corpus import model_encoders
    from ragnb.embeddings.models import make_encoder, parse_model_options

    monkeypatch.setenv("RAGNB_EMBEDDING_BASE_URL", "http://127.0.0.1:9/v1")
    assert parse_model_options('{"e5": {}, "endpoint:x": {"dimensions": 4}}', "p") == {
        "multilingual-e5-small": {}, "endpoint:x": {"dimensions": 4}}
    with pytest.raises(ValueError, match=r"^p is not valid JSON \(Expecting ':' delimiter at character 14\); write"):
        parse_model_options('{"endpoint:x" {}}', "p")
    with pytest.raises(ValueError, match=r"p: model 'endpoint:x' has unknown setting\(s\) \['query'\]; allowed"):
        parse_model_options({"endpoint:x": {"query": "q: "}}, "p")
    with pytest.raises(ValueError, match=r"^p: model 'endpoint:x' has query_prompt=1, dimensions='4'; a prompt is text"):
        parse_model_options({"endpoint:x": {"query_prompt": 1, "dimensions": "4"}}, "p")
    with pytest.raises(ValueError, match="names model 'e5' twice"):
        parse_model_options({"multilingual-e5-small": {}, "e5": {}}, "p")
    with pytest.raises(ValueError, match=r"input_type must be true.*got 'query'"):
        make_encoder("endpoint:x", input_type="query")
    with pytest.raises(ValueError, match=r"embedding_model_options has settings for \['endpoint:y'\], which this run "
                                         r"does not use \(models: \['endpoint:x'\]\)"):
        model_encoders(["endpoint:x"], {"endpoint:y": {"dimensions": 4}})
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL_OPTIONS", json.dumps({"e5": {"query_prompt": "q: "},
                                                                   "endpoint:x": {"input_type": True}}))
    with pytest.raises(ValueError, match=r"adds the e5 prefixes.*\(from RAGNB_EMBEDDING_MODEL_OPTIONS\)"):
        make_encoder("multilingual-e5-small")
    enc = make_encoder("endpoint:x")  # another model's entry is not this one's business
    assert enc.input_types == {"query": "query", "document": "document"}
    # the single-model variables and the per-model one: the per-model entry wins for its model
    monkeypatch.setenv("RAGNB_EMBEDDING_QUERY_PROMPT", "question: ")
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL_OPTIONS", json.dumps({"endpoint:x": {"query_prompt": "query: "}}))
    assert make_encoder("endpoint:x").prompts["query"] == "query: "
    assert make_encoder("endpoint:x", query_prompt="").prompts["query"] is None  # an explicit "" = no prompt


def test_side_by_side_table_shows_the_settings_and_an_unknown_limit(wiki, embeddings_server):
    from ragnb.datasets.corpus import open_corpora
    from ragnb.store.vectors import fetch_texts
    from ragnb.tiers.model_comparison import models_table, run_models
    from ragnb.tiers.result import TierResult

    assert wiki("embed", "--chunks", "--model", "endpoint:emb-small", "--query-prompt", "query: ",
                "--document-prompt", "passage: ", "--input-type", "search_query,search_document").exit_code == 0
    assert wiki("embed", "--chunks", "--model", "endpoint:emb-large", "--dimensions", "4").exit_code == 0
    assert wiki("embed", "--chunks", "--model", "all-MiniLM-L6-v2").exit_code == 0
    corpora = open_corpora("db", embedding_models="endpoint:emb-small,endpoint:emb-large,all-MiniLM-L6-v2",
                           embedding_model_options={"endpoint:emb-small": E5_LIKE,
                                                    "endpoint:emb-large": {"dimensions": 4}})
    questions = {q["question"]: q["url"] for q in QUESTIONS}

    def hit_at_1(c):  # each model's own query encoder over its own stored vectors
        ids, urls, vectors = c.vectors("chunks")
        queries = c.encoder.encode_queries(list(questions))
        top = np.argmax(vectors @ queries.T, axis=0)
        hits = [float(urls[t] == url) for t, url in zip(top, questions.values())]
        frame = __import__("pandas").DataFrame({"hit_rate@1": hits}, index=list(questions))
        return TierResult(frame, {"hit_rate@1": {"mean": float(np.mean(hits)), "ci95": [0.0, 1.0], "n": 3}})

    texts = list(fetch_texts(corpora[0].db, "chunks").values())
    _, blocks = run_models(corpora, hit_at_1, ["hit_rate@1"], texts=texts, n_boot=50)
    table = models_table(blocks, ["hit_rate@1"]).set_index("model")
    assert table.loc["emb-small", ["query prompt", "document prompt", "input type", "dimensions"]].tolist() == [
        "'query: '", "'passage: '", "'search_query' / 'search_document'", "native"]
    assert table.loc["emb-large", ["query prompt", "document prompt", "input type", "dimensions", "dim"]].tolist() == [
        "none", "none", "not sent", "4", 4]
    assert table.loc["emb-small", "max input tokens"] == "unknown" and table.loc["emb-small", "truncated"] == "unknown"
    assert table.loc["all-MiniLM-L6-v2", "max input tokens"] == "256 tokens"
    assert table.loc["all-MiniLM-L6-v2", "truncated"] == "0%"  # every chunk here is far below 256 tokens
    assert table.loc["all-MiniLM-L6-v2", "query prompt"] == "none"
    small = blocks["models"]["emb-small"]
    assert small["truncation"]["share_truncated"] is None and "input limit unknown" in small["truncation"]["note"]
    assert small["encoder"]["input_type"] == {"query": "search_query", "document": "search_document"}


def test_unknown_and_absent_input_limits_are_told_apart(embeddings_server, encoder):
    from ragnb.llm.settings import LLMSettings
    from ragnb.embeddings.models import get_encoder
    from ragnb.embeddings.base import limit_text
    from ragnb.embeddings.endpoint import EndpointEncoder
    from ragnb.tiers.model_comparison import truncation_share
    from ragnb.tiers.tier0 import run_tier0

    settings = LLMSettings(base_url=embeddings_server.base_url)
    unknown = EndpointEncoder("emb-small", settings=settings)
    declared = EndpointEncoder("emb-small", max_input_tokens=512, settings=settings)
    e5 = get_encoder("multilingual-e5-small")
    assert [limit_text(e.describe()) for e in (unknown, declared, e5, encoder)] == [
        "unknown", "512 tokens", "none (long texts read whole)", "256 tokens"]
    texts = ["Доступ к VPN настраивается в личном кабинете сотрудника."] * 3
    assert truncation_share(unknown, texts)["share_truncated"] is None
    assert truncation_share(e5, texts)["share_truncated"] == 0.0
    # Tier 0 with an endpoint that declares a limit but has no tokenizer: no truncation block, no failure
    vectors = np.stack([expected_vector(f"t{i}", 8) for i in range(6)])
    result = run_tier0([f"c{i}" for i in range(6)], vectors, [f"t{i}" for i in range(6)], declared, k=2)
    assert "truncation" not in result.summary and "tokens" not in result.per_item
    from ragnb.tiers.tier0 import truncation_note

    assert truncation_note(declared, None) == ("emb-small reads at most 512 tokens: the rest of a longer text is cut "
                                               "before embedding. With no tokenizer to count with, how many chunks "
                                               "exceed it cannot be measured.")
    # the chunking analysis likewise: nothing counted for the endpoint, MiniLM's tokens counted
    from ragnb.analysis.chunk_build import _truncation
    from ragnb.analysis.chunk_corpus import Chunk

    chunk = Chunk("vpn#0", "https://wiki/vpn", texts[0], 0, len(texts[0]))
    assert _truncation(declared, [chunk]) is None and _truncation(unknown, [chunk]) is None
    assert _truncation(encoder, [chunk])["n_truncated"] == 0
    from ragnb.datasets.corpus import encoder_text

    assert "input limit unknown" in encoder_text(unknown.describe())
    assert "input_type 'query' / 'document'" in encoder_text(
        EndpointEncoder("emb-small", input_type=True, settings=settings).describe())


def test_the_default_model_is_the_first_embedded_until_chosen(wiki, embeddings_server):
    from ragnb.datasets.sessions import read_sessions
    from ragnb.embeddings.models import get_encoder
    from ragnb.store.engine import connect
    from ragnb.store.vectors import fetch_vectors

    assert wiki("embed", "--questions", "--model", "endpoint:emb-small", "--query-prompt", "query: ").exit_code == 0
    assert wiki("embed", "--questions", "--model", "endpoint:emb-large").exit_code == 0
    defaults = {m["model"]: m["default"] for m in json.loads(wiki("db", "status").stdout)["questions"]["models"]}
    assert defaults == {"emb-small": True, "emb-large": False}  # the first model embedded
    db = connect()
    asked = [q["question"] for q in QUESTIONS]
    ids, _, vectors = fetch_vectors(db, "questions")  # naming no model: the default's
    np.testing.assert_array_equal(vectors, np.stack([expected_vector("query: " + asked[int(i[1]) - 1], 8) for i in ids]))
    # Tier UX's sessions read the encoder's own vectors, whichever model is the default
    log = read_sessions(db, encoder=get_encoder("endpoint:emb-large"), model="emb-large")
    assert log.notes == [] and list(log.turns.index) == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(log.vectors, np.stack([expected_vector(q, 16) for q in asked]))

    sent = len(embeddings_server.embedding_requests)
    res = wiki("embed", "--questions", "--model", "endpoint:emb-large", "--default")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["processed"], out["skipped"], out["storage"], out["previous_default"]) == (0, 3, "column", "emb-small")
    assert len(embeddings_server.embedding_requests) == sent  # nothing re-embedded: the vectors moved
    models = {m["model"]: m for m in json.loads(wiki("db", "status").stdout)["questions"]["models"]}
    assert {m: (v["default"], v["dim"], v["embedded"]) for m, v in models.items()} == {
        "emb-large": (True, 16, 3), "emb-small": (False, 8, 3)}
    assert models["emb-small"]["settings"]["query_prompt"] == "query: "  # its settings moved with it
    ids, _, vectors = fetch_vectors(db, "questions")
    np.testing.assert_array_equal(vectors, np.stack([expected_vector(q, 16) for q in asked]))
    ids, _, vectors = fetch_vectors(db, "questions", model="emb-small")
    np.testing.assert_array_equal(vectors, np.stack([expected_vector("query: " + q, 8) for q in asked]))
    # and back: the previous default's vectors return to the column, still checked against their settings
    assert json.loads(wiki("embed", "--questions", "--model", "endpoint:emb-small", "--query-prompt", "query: ",
                           "--default").stdout)["previous_default"] == "emb-large"
    res = wiki("embed", "--questions", "--model", "endpoint:emb-small")  # other settings than the stored ones
    assert res.exit_code == 2 and "(query prompt 'query: ' → none)" in res.stderr
    res = wiki("embed", "--chunks", "--model", "endpoint:emb-large", "--default")
    assert res.exit_code == 0 and json.loads(res.stdout)["previous_default"] is None  # an empty column: the first


def test_a_database_from_before_settings_were_recorded_keeps_working(wiki, embeddings_server):
    import sqlalchemy as sa

    from ragnb.datasets.corpus import open_corpora
    from ragnb.store.engine import connect

    assert wiki("embed", "--chunks", "--model", "endpoint:emb-small").exit_code == 0
    assert wiki("embed", "--chunks", "--model", "endpoint:emb-large").exit_code == 0
    db = connect()
    with db.engine.begin() as conn:  # as an older ragnb left them
        conn.execute(sa.text("ALTER TABLE ragnb_embedding_model DROP COLUMN settings"))
        conn.execute(sa.text("ALTER TABLE ragnb_embedding_space DROP COLUMN settings"))
    db.dispose()
    models = json.loads(wiki("db", "status").stdout)["chunks"]["models"]
    assert [(m["model"], m["settings"]) for m in models] == [("emb-small", None), ("emb-large", None)]
    # nothing recorded to compare with: the fingerprint still refuses other settings, without a list of them
    with pytest.raises(ValueError, match=r"made with fingerprint '[0-9a-f]{64}'; the active encoder of that name "
                                         r"has fingerprint '[0-9a-f]{64}' \(other prompts, input_type"):
        open_corpora("db", embedding_model="endpoint:emb-large",
                     embedding_model_options={"endpoint:emb-large": {"query_prompt": "q: "}})
    assert open_corpora("db", embedding_model="endpoint:emb-large")[0].model == "emb-large"
    # the next embedding adds the column back and records the settings
    assert wiki("embed", "--chunks", "--model", "endpoint:emb-large").exit_code == 0
    models = {m["model"]: m for m in json.loads(wiki("db", "status").stdout)["chunks"]["models"]}
    assert models["emb-large"]["settings"] == {"query_prompt": None, "document_prompt": None, "input_type": None,
                                               "dimensions": None}


@pytest.mark.slow
def test_tier1_report_compares_endpoint_models_with_their_settings(wiki, embeddings_server, tmp_path):
    """The notebook end to end on a team's database: settings from the parameter, sent to the server, shown in the
    report's side-by-side table and kept in the metrics JSON."""
    from ragnb.runs.runner import run_notebooks

    assert wiki("embed", "--chunks", "--model", "endpoint:emb-small", "--query-prompt", "query: ",
                "--document-prompt", "passage: ", "--input-type", "search_query,search_document").exit_code == 0
    assert wiki("embed", "--chunks", "--model", "endpoint:emb-large").exit_code == 0
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps({"name": "wiki", "type": "manual", "items": [
        {"id": q["id"], "question": q["question"],
         "relevant_chunk_ids": [c["id"] for c in CHUNKS if c["url"] == q["url"]]} for q in QUESTIONS]},
        ensure_ascii=False), encoding="utf-8")
    sent = len(embeddings_server.embedding_requests)
    result = run_notebooks(["tier1"], {
        "corpus": "db", "dataset_path": str(dataset), "backend": "memory", "latency_sample": 0, "n_boot": 50,
        "embedding_models": "endpoint:emb-small,endpoint:emb-large",
        "embedding_model_options": json.dumps({"endpoint:emb-small": E5_LIKE})}, outputs=tmp_path / "out")
    assert result.failures == []
    queries = [(texts, kind) for texts, kind in _sent(embeddings_server, sent)]
    asked = {q["question"] for q in QUESTIONS}
    assert {(t, kind) for texts, kind in queries for t in texts if t.removeprefix("query: ") in asked} == {
        *(("query: " + q, "search_query") for q in asked), *((q, None) for q in asked)}
    metrics = json.loads((result.run_dir / "tier1_retrieval.metrics.json").read_text(encoding="utf-8"))
    small, large = metrics["models"]["emb-small"], metrics["models"]["emb-large"]
    assert small["encoder"]["query_prompt"] == "query: " and large["encoder"]["query_prompt"] is None
    assert small["truncation"]["share_truncated"] is None and large["truncation"]["limit"] is None
    html = (result.run_dir / "tier1_retrieval.html").read_text(encoding="utf-8")
    for shown in ("<th>query prompt</th><th>document prompt</th><th>input type</th><th>dimensions</th><th>dim</th>"
                  "<th>max input tokens</th><th>truncated</th>", "<td>'search_query' / 'search_document'</td>",
                  "<td>not sent</td>", "<td>unknown</td><td>unknown</td>"):
        assert shown in html, shown
    assert "truncated 0%" not in html
