"""A scriptable OpenAI-compatible ``/v1/embeddings`` server for tests and benchmarks (real HTTP on 127.0.0.1,
ephemeral port) — the chat server of ``tests/llm_server.py`` serving another path.

    def test_x(embeddings_server):
        embeddings_server.script(error_reply(429, "slow down", retry_after=0.1))   # then the default handler
        enc = EndpointEncoder("emb-small", settings=LLMSettings(base_url=embeddings_server.base_url, ...))

The default handler answers every model in ``models`` (others: 404 ``model_not_found``) with
:func:`expected_vector` of each input — a unit vector seeded by the text, so a test can compute what the
right answer is — honouring ``dimensions``; ``latency_s`` delays every default reply (for benchmarks).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_server import FakeLLMServer, Reply, error_reply

EMBEDDING_PATHS = ("/v1/embeddings", "/embeddings")


def expected_vector(text: str, dim: int) -> np.ndarray:
    """The unit vector the default handler returns for ``text`` (float32, as the client will hold it)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def embeddings_body(vectors: list[list[float]], *, model: str, prompt_tokens: int = 0) -> dict:
    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": list(map(float, v))} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}


def vectors_reply(vectors: list[Any], *, model: str = "emb-small", indexes: list[int] | None = None) -> Reply:
    """A 200 reply carrying ``vectors`` exactly as given — NaN, Infinity and None included (sent as the JSON
    literals ``NaN``, ``Infinity``, ``null``, as a broken provider sends them)."""
    indexes = list(range(len(vectors))) if indexes is None else indexes
    return Reply(200, {"object": "list", "model": model, "usage": {"prompt_tokens": 1, "total_tokens": 1},
                       "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(indexes, vectors)]})


def html_reply(title: str = "Sign in", *, content_type: str = "text/html; charset=utf-8") -> Reply:
    """What a single-sign-on proxy answers instead of the API: a login page, with status 200."""
    page = (f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body><form action='/login'>"
            "<input name='user'><input type='password' name='pw'></form></body></html>")
    return Reply(200, page, {"Content-Type": content_type})


FAULTS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "null": None, "huge": 1e39}


def bad_vector(fault: str, *, at: int = 0, element: int = 0, dim: int = 8) -> Any:
    """A handler answering each input with :func:`expected_vector`, except input ``at``: its vector holds
    ``FAULTS[fault]`` at ``element``, or is all zeros (``"zero"``) or one value short (``"short"``). A request
    with fewer inputs (an encoder's one-text dimension probe) is answered correctly."""

    def handle(body: Any) -> Reply:
        texts = body["input"]
        vectors: list[Any] = [expected_vector(t, dim).tolist() for t in texts]
        if at >= len(texts):
            pass
        elif fault == "zero":
            vectors[at] = [0.0] * dim
        elif fault == "short":
            vectors[at] = vectors[at][:-1]
        else:
            vectors[at][element] = FAULTS[fault]
        return vectors_reply(vectors, model=body["model"])

    return handle


class FakeEmbeddingsServer(FakeLLMServer):
    PATHS = EMBEDDING_PATHS

    def __init__(self, models: dict[str, int] | None = None, latency_s: float = 0.0) -> None:
        super().__init__()
        self.models = dict(models or {"emb-small": 8, "emb-large": 16})  # model id → native dimension
        self.latency_s = latency_s
        self._handler = self.answer

    def answer(self, body: Any) -> Reply:
        model = body.get("model")
        if model not in self.models:
            return error_reply(404, f"The model `{model}` does not exist", code="model_not_found")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not texts or any(not isinstance(t, str) or not t for t in texts):
            return error_reply(400, "input must be a non-empty string or array of non-empty strings")
        dim = int(body.get("dimensions") or self.models[model])
        vectors = [expected_vector(t, dim).tolist() for t in texts]
        tokens = sum(len(t.split()) for t in texts)
        return Reply(200, embeddings_body(vectors, model=model, prompt_tokens=tokens), delay_s=self.latency_s)

    @property
    def embedding_requests(self) -> list[Any]:
        return [r for r in self.requests if r.path in EMBEDDING_PATHS]


@pytest.fixture
def embeddings_server():
    with FakeEmbeddingsServer() as server:
        yield server


def isolate_provider_env(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """No embedding/LLM provider setting of the machine leaks into a test, and its disk cache is its own."""
    for name in list(os.environ):
        if name.startswith(("RAGNB_EMBEDDING_", "RAGNB_LLM_", "OPENAI_", "OPENROUTER_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGNB_EMBEDDING_CACHE", str(cache_dir))
