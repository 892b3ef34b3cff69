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
