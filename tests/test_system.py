"""The system under test: baseline (extractive offline, LLM over HTTP), Python-object and HTTP adapters."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from llm_server import completion
from ragnb.llm import LLMClient, LLMSettings
from ragnb.rag.retrieval import MemoryRetriever
from ragnb.rag.system import (BaselineSystem, Context, HttpSystem, as_contexts, extractive_answer, load_system,
                          run_system)

CHUNKS = {
    "c1": "Москва — столица России. В Москве живёт более двенадцати миллионов человек.",
    "c2": "The Nile is the longest river in Africa. It flows north into the Mediterranean Sea.",
    "c3": "Photosynthesis converts light into chemical energy. It happens in chloroplasts.",
}


@pytest.fixture(scope="module")
def baseline_parts(encoder):
    ids = list(CHUNKS)
    vecs = encoder.encode([CHUNKS[i] for i in ids])
    return encoder, MemoryRetriever(ids, vecs)


def test_extractive_answer_picks_the_closest_sentences_in_source_order():
    sentences = ["alpha", "beta", "gamma"]
    vecs = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
    # cosines to q = (1, 0.2)/|.|: alpha 0.98, beta 0.20, gamma 0.83 → best two: alpha, gamma (source order)
    assert extractive_answer(np.array([1.0, 0.2]), sentences, vecs, max_sentences=2) == "alpha gamma"
    assert extractive_answer(np.array([1.0, 0.2]), [], np.zeros((0, 2))) == ""


def test_baseline_offline_retrieves_and_answers_extractively(baseline_parts):
    encoder, retriever = baseline_parts
    system = BaselineSystem(encoder, retriever, CHUNKS, max_sentences=1)
    assert system.answer_method == "extractive"
    ctx = system.retrieve("Which river is the longest in Africa?", 2)
    assert ctx[0].id == "c2" and ctx[0].text == CHUNKS["c2"] and len(ctx) == 2
    assert system.answer("Which river is the longest in Africa?", ctx[:1]) == "The Nile is the longest river in Africa."
    outs = run_system(system, ["Where does photosynthesis happen?", "Какая столица России?"], k=1)
    assert [o.contexts[0].id for o in outs] == ["c3", "c1"]
    # Independent reference: the c3 sentence with the highest cosine to the question, by hand.
    sents = ["Photosynthesis converts light into chemical energy.", "It happens in chloroplasts."]
    v = encoder.encode(["Where does photosynthesis happen?"] + sents)
    cos = [float(v[0] @ v[i] / np.linalg.norm(v[0]) / np.linalg.norm(v[i])) for i in (1, 2)]
    assert outs[0].answer == sents[int(np.argmax(cos))]
    assert all(o.error is None for o in outs)


def test_baseline_with_llm_sends_contexts_and_returns_the_reply(baseline_parts, llm_server, tmp_path):
    encoder, retriever = baseline_parts
    llm_server.script(completion("  Двенадцать миллионов.  "))
    client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="sk-test-SECRET", cache_dir=None))
    system = BaselineSystem(encoder, retriever, CHUNKS, client=client, model="gen-model", language="ru")
    assert system.answer_method == "llm"
    ctx = system.retrieve("Сколько людей живёт в Москве?", 1)
    assert system.answer("Сколько людей живёт в Москве?", ctx) == "Двенадцать миллионов."
    sent = llm_server.requests[0].body
    assert sent["model"] == "gen-model"
    prompt_text = sent["messages"][0]["content"]
    assert "[1] " + CHUNKS["c1"] in prompt_text and "Вопрос: Сколько людей живёт в Москве?" in prompt_text


class _Toy:
    name = "toy"

    def retrieve(self, question, k):
        return ["first passage", {"text": "second", "id": 7, "url": "u"}][:k]

    def answer(self, question, contexts):
        if question == "boom":
            raise RuntimeError("model crashed")
        return f"{question} / {len(contexts)} / {contexts[-1].text}"


def test_python_adapter_and_errors_per_question(tmp_path, monkeypatch):
    module = tmp_path / "toy_rag.py"
    module.write_text("from test_system import _Toy\nsystem = _Toy()\nfactory = _Toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    for spec in ("toy_rag:system", "toy_rag:factory"):
        system = load_system(spec)
        outs = run_system(system, ["q1", "boom"], k=2, concurrency=2)
        assert outs[0].answer == "q1 / 2 / second"
        assert outs[0].contexts[1] == Context("second", "7", "u", None)
        assert outs[1].answer is None and "model crashed" in outs[1].error
    with pytest.raises(ValueError, match="cannot import"):
        load_system("no_such_module_xyz:system")
    with pytest.raises(ValueError, match="has no attribute"):
        load_system("toy_rag:missing")
    with pytest.raises(ValueError, match="'baseline'"):
        load_system("nonsense")


def test_as_contexts_rejects_bad_shapes():
    with pytest.raises(ValueError, match="context 1"):
        as_contexts(["ok", 3], "svc")
    with pytest.raises(ValueError, match="expected a list"):
        as_contexts("text", "svc")


@pytest.fixture
def rag_service():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, dict(self.headers), body))
            if self.path == "/retrieve":
                reply = {"docs": [{"text": f"ctx for {body['question']}", "id": "d1", "score": 0.9}, "plain"]}
            elif self.path == "/answer":
                reply = {"answer": " | ".join(body["contexts"])}
            elif self.path == "/judge":
                reply = {"show": body["answer"] != ""}
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_http_adapter(rag_service, tmp_path, monkeypatch):
    base, seen = rag_service
    spec = tmp_path / "svc.yaml"
    spec.write_text(f"retrieve_url: {base}/retrieve\nanswer_url: {base}/answer\njudge_url: {base}/judge\n"
                    "contexts_field: docs\nheaders_from_env: {X-Token: RAG_TEST_TOKEN}\n")
    monkeypatch.setenv("RAG_TEST_TOKEN", "tok-123")
    system = load_system(f"http:{spec}")
    ctx = system.retrieve("why?", 5)
    assert ctx == [Context("ctx for why?", "d1", None, 0.9), Context("plain")]
    assert system.answer("why?", ctx) == "ctx for why? | plain"
    assert system.judge("why?", "yes") is True and system.judge("why?", "") is False
    assert seen[0][1]["X-Token"] == "tok-123" and seen[0][2] == {"question": "why?", "k": 5}
    assert "tok-123" not in spec.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"retrieve_url: {base}/retrieve\nanswer_url: ftp://x\n")
    with pytest.raises(ValueError, match="answer_url"):
        HttpSystem.from_file(bad)
    bad.write_text(f"retrieve_url: {base}/retrieve\nanswer_url: {base}/answer\napi_key: abc\n")
    with pytest.raises(ValueError, match="unknown key"):
        HttpSystem.from_file(bad)
    monkeypatch.delenv("RAG_TEST_TOKEN")
    with pytest.raises(ValueError, match="RAG_TEST_TOKEN"):
        system.retrieve("why?", 1)
    broken = HttpSystem(f"{base}/nowhere", f"{base}/answer")
    outs = run_system(broken, ["q"], k=1)
    assert outs[0].answer is None and "404" in outs[0].error


def test_extractive_answer_asks_an_asymmetric_model_with_the_question_as_a_query(baseline_parts):
    """e5 ranks passages for a *query*: the question is embedded with "query: " (the vector retrieval made,
    from the disk cache), the context sentences with "passage: " — directly and through Tier 2/3's memo."""
    from ragnb.metrics.fallback import split_sentences
    from ragnb.embeddings.models import MemoEncoder, get_encoder

    _, retriever = baseline_parts
    e5 = get_encoder("multilingual-e5-small")
    question, contexts = "Где живёт больше двенадцати миллионов человек?", [Context(CHUNKS["c1"], "c1")]
    sentences = split_sentences(CHUNKS["c1"])
    q_vec, s_vecs = e5.encode_queries([question])[0], e5.encode(sentences)
    expected = sentences[int(np.argmax(s_vecs @ q_vec / np.linalg.norm(s_vecs, axis=1) / np.linalg.norm(q_vec)))]
    memo = MemoEncoder(e5)
    for encoder in (e5, memo):
        assert BaselineSystem(encoder, retriever, CHUNKS, max_sentences=1).answer(question, contexts) == expected
    np.testing.assert_allclose(memo.encode_queries([question])[0], q_vec, rtol=1e-6)
    assert not np.allclose(memo.encode([question])[0], q_vec)  # the memo keeps the two roles apart
