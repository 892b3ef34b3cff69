"""The system under test: what Tier 2/3 ask questions of.

A system implements :class:`SystemUnderTest` — ``retrieve(question, k)`` and ``answer(question, contexts)``,
and optionally ``judge(question, answer) -> bool`` (the production show/no-show judge). Three ways in:

* ``"baseline"`` — ragnb's own: top-k retrieval over the corpus (pgvector or in memory) and an answer from
  the configured LLM with the ``rag_answer`` prompt, or, offline, an *extractive* answer: the context
  sentences closest to the question (never presented as an LLM answer: ``answer_method = "extractive"``);
* ``"module:attribute"`` — a Python object (or a class / zero-argument factory producing one) with those
  methods, e.g. ``"my_rag.eval:system"``;
* ``"http:FILE.yaml"`` — a JSON-over-HTTP service described by a small YAML file (see :class:`HttpSystem`).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragnb.embeddings.base import encode_queries
from ragnb.config import read_yaml_mapping


@dataclass
class Context:
    """One retrieved passage."""

    text: str
    id: str | None = None
    url: str | None = None
    score: float | None = None


@runtime_checkable
class SystemUnderTest(Protocol):
    name: str

    def retrieve(self, question: str, k: int) -> list[Context]: ...

    def answer(self, question: str, contexts: list[Context]) -> str: ...


def as_contexts(raw: Any, where: str) -> list[Context]:
    """Accept a list of strings, of dicts (text/id/url/score) or of Context; anything else is an error."""
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"{where}: expected a list of contexts, got {type(raw).__name__}")
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, Context):
            out.append(item)
        elif isinstance(item, str):
            out.append(Context(item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            score = item.get("score")
            out.append(Context(item["text"], None if item.get("id") is None else str(item["id"]),
                               item.get("url") or item.get("confluence_url"),
                               None if score is None else float(score)))
        else:
            raise ValueError(f"{where}: context {i} must be a string or an object with a 'text' string, got {item!r:.80}")
    return out


# ------------------------------------------------------------------------------------ baseline


def extractive_answer(question_vec: np.ndarray, sentences: list[str], sentence_vecs: np.ndarray,
                      max_sentences: int = 2) -> str:
    """Offline answer: the ``max_sentences`` context sentences with the highest cosine similarity to the
    question, joined in their original order (so the answer reads like the source)."""
    if not sentences:
        return ""
    q = question_vec / (np.linalg.norm(question_vec) or 1.0)
    s = sentence_vecs / np.where(np.linalg.norm(sentence_vecs, axis=1, keepdims=True) == 0, 1.0,
                                 np.linalg.norm(sentence_vecs, axis=1, keepdims=True))
    best = np.argsort(-(s @ q), kind="stable")[:max_sentences]
    return " ".join(sentences[i] for i in sorted(best))


@dataclass
class BaselineSystem:
    """ragnb's reference RAG: retriever + (LLM | extractive) answer.

    ``retriever`` is a :class:`ragnb.rag.retrieval.MemoryRetriever` or ``PgVectorRetriever``; ``texts``/``urls``
    map chunk ids to their text and source. With ``client`` and ``model`` set, answers come from the LLM;
    otherwise they are extractive.
    """

    encoder: Any
    retriever: Any
    texts: dict[str, str]
    urls: dict[str, str | None] = field(default_factory=dict)
    client: Any = None
    model: str = ""
    language: str = "en"
    temperature: float = 0.0
    max_sentences: int = 2
    name: str = "baseline"

    @property
    def answer_method(self) -> str:
        return "llm" if self.client is not None and self.model else "extractive"

    def retrieve(self, question: str, k: int) -> list[Context]:
        return self.retrieve_many([question], k)[0]

    def retrieve_many(self, questions: list[str], k: int) -> list[list[Context]]:
        res = self.retriever.search(encode_queries(self.encoder, list(questions)), k)
        return [[Context(self.texts.get(cid, ""), cid, self.urls.get(cid), float(s)) for cid, s in zip(ids, sc)]
                for ids, sc in zip(res.ids, res.scores)]

    def answer(self, question: str, contexts: list[Context]) -> str:
        if self.answer_method == "llm":
            from ragnb.llm import run_sync

            return run_sync(self.aanswer(question, contexts))
        from ragnb.metrics.fallback import split_sentences

        sentences = [s for c in contexts for s in split_sentences(c.text)]
        if not sentences:
            return ""
        # The question as a query (e5's "query: "), as retrieval embedded it: an asymmetric model ranks passages
        # for a query, and the vector is already in the disk cache. Symmetric models encode both alike.
        return extractive_answer(encode_queries(self.encoder, [question])[0], sentences,
                                 self.encoder.encode(sentences), self.max_sentences)

    async def aanswer(self, question: str, contexts: list[Context], seed: int | None = None) -> str:
        # ``seed`` goes into the LLM request (and so the cache key): repeated runs for response consistency
        # pass different seeds, else the disk cache would replay the first answer.
        if self.answer_method != "llm":
            return await asyncio.to_thread(self.answer, question, contexts)
        from ragnb.llm.prompts import prompt

        numbered = "\n\n".join(f"[{i + 1}] {c.text}" for i, c in enumerate(contexts))
        messages = [{"role": "user", "content": prompt("rag_answer", self.language, question=question,
                                                       contexts=numbered)}]
        # chat_text: reasoning blocks removed; a truncated or refused reply raises instead of being an answer.
        result = await self.client.chat_text(messages, model=self.model, temperature=self.temperature,
                                             seed=seed, metric="generation")
        return result.text.strip()


# -------------------------------------------------------------------------------- python object


def load_python_system(spec: str, methods: tuple[str, ...] = ("retrieve", "answer")) -> SystemUnderTest:
    """``"package.module:attribute"`` → the object; a class or a factory (a callable without the first of
    ``methods``) is called first. ``methods``: what the caller needs — a production judge needs only
    ``("judge",)``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"system {spec!r}: write 'package.module:attribute', e.g. 'my_rag.eval:system'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"system {spec!r}: cannot import {module_name!r} ({exc}); is it on PYTHONPATH?") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"system {spec!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj) or (callable(obj) and not hasattr(obj, methods[0])):
        obj = obj()
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise ValueError(f"system {spec!r}: the object lacks {missing}; it needs "
                         + ", ".join(f"{m}(…)" for m in methods))
    if not isinstance(getattr(obj, "name", None), str):
        try:
            obj.name = spec
        except AttributeError:
            pass
    return obj


# ---------------------------------------------------------------------------------------- HTTP


@dataclass
class HttpSystem:
    """A RAG service over JSON HTTP, described by a YAML file::

        retrieve_url: http://rag.internal/retrieve   # POST {"question", "k"} → {"contexts": [...]}
        answer_url: http://rag.internal/answer       # POST {"question", "contexts": [text…]} → {"answer": "…"}
        judge_url: http://rag.internal/judge         # optional: POST {"question", "answer"} → {"show": true}
        headers_from_env: {Authorization: RAG_TOKEN} # header value read from an environment variable
        timeout_s: 60

    Contexts may be strings or objects with ``text`` (and ``id``, ``url``, ``score``). Response field
    names can be changed with ``contexts_field``, ``answer_field``, ``show_field``. Secrets stay in the
    environment: the file names variables, never values.
    """

    retrieve_url: str
    answer_url: str
    judge_url: str | None = None
    headers_from_env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0
    contexts_field: str = "contexts"
    answer_field: str = "answer"
    show_field: str = "show"
    name: str = "http"

    @classmethod
    def from_file(cls, path: str | Path) -> "HttpSystem":
        p = Path(path)
        raw = read_yaml_mapping(p, "HTTP system file", "a mapping with retrieve_url and answer_url")
        known = set(inspect.signature(cls).parameters) - {"name"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{p}: unknown key(s) {unknown}; known: {sorted(known)}")
        for key in ("retrieve_url", "answer_url"):
            if not isinstance(raw.get(key), str) or not raw[key].startswith(("http://", "https://")):
                raise ValueError(f"{p}: field '{key}' must be an http(s) URL")
        return cls(**raw, name=f"http:{p.name}")

    def _headers(self) -> dict[str, str]:
        headers = {}
        for header, var in self.headers_from_env.items():
            value = os.environ.get(var)
            if value is None:
                raise ValueError(f"HTTP system: header {header!r} reads environment variable {var}, which is not set")
            headers[header] = value
        return headers

    def _post(self, url: str, payload: dict) -> dict:
        import httpx

        try:
            resp = httpx.post(url, json=payload, headers=self._headers(), timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise RuntimeError(f"{url}: request failed ({type(exc).__name__})") from None
        if resp.status_code >= 400:
            raise RuntimeError(f"{url}: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            body = resp.json()
        except ValueError:
            raise RuntimeError(f"{url}: the response is not JSON: {resp.text[:200]!r}") from None
        if not isinstance(body, dict):
            raise RuntimeError(f"{url}: expected a JSON object, got {type(body).__name__}")
        return body

    def retrieve(self, question: str, k: int) -> list[Context]:
        body = self._post(self.retrieve_url, {"question": question, "k": k})
        if self.contexts_field not in body:
            raise RuntimeError(f"{self.retrieve_url}: the response has no '{self.contexts_field}' field")
        return as_contexts(body[self.contexts_field], self.retrieve_url)[:k]

    def answer(self, question: str, contexts: list[Context]) -> str:
        body = self._post(self.answer_url, {"question": question, "contexts": [c.text for c in contexts]})
        value = body.get(self.answer_field)
        if not isinstance(value, str):
            raise RuntimeError(f"{self.answer_url}: field '{self.answer_field}' must be a string, got {value!r:.80}")
        return value

    def judge(self, question: str, answer: str) -> bool:
        if not self.judge_url:
            raise ValueError("this HTTP system has no judge_url")
        value = self._post(self.judge_url, {"question": question, "answer": answer}).get(self.show_field)
        if not isinstance(value, bool):
            raise RuntimeError(f"{self.judge_url}: field '{self.show_field}' must be true or false, got {value!r:.80}")
        return value


# -------------------------------------------------------------------------------------- running


@dataclass
class SystemOutput:
    question: str
    contexts: list[Context]
    answer: str | None
    retrieve_ms: float
    answer_ms: float
    error: str | None = None


def parse_system_spec(spec: str) -> tuple[str, str]:
    """A system spec → (kind, target): ``"baseline"`` → ("baseline", ""), ``"http:FILE.yaml"`` →
    ("http", FILE.yaml), ``"package.module:attribute"`` → ("python", the spec). The one parser of specs."""
    if spec == "baseline":
        return "baseline", ""
    if spec.startswith("http:"):
        return "http", spec[len("http:"):]
    if ":" in spec:
        return "python", spec
    raise ValueError(f"system {spec!r}: use 'baseline', 'package.module:attribute' or 'http:FILE.yaml'")


def load_system(spec: str, **baseline: Any) -> SystemUnderTest:
    """``"baseline"`` (built from ``baseline`` keyword arguments), ``"module:attr"`` or ``"http:FILE"``."""
    kind, target = parse_system_spec(spec)
    if kind == "baseline":
        return BaselineSystem(**baseline)
    if kind == "http":
        return HttpSystem.from_file(target)
    return load_python_system(target)


def run_system(system: SystemUnderTest, questions: Sequence[str], k: int, concurrency: int = 4) -> list[SystemOutput]:
    """Retrieve then answer every question; an exception on one question is recorded, the others go on.

    Questions run ``concurrency`` at a time in threads (HTTP and LLM systems wait on the network); the
    baseline's retrieval is batched in one call.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency = {concurrency}; use 1 or more")
    questions = list(questions)
    batched: list[list[Context]] | None = None
    t_batch = 0.0
    if hasattr(system, "retrieve_many"):
        t0 = time.perf_counter()
        batched = system.retrieve_many(questions, k)
        t_batch = (time.perf_counter() - t0) * 1000 / max(1, len(questions))

    def one(i: int) -> SystemOutput:
        q = questions[i]
        try:
            t0 = time.perf_counter()
            ctx = batched[i] if batched is not None else as_contexts(system.retrieve(q, k), f"{system.name}.retrieve")
            t_ret = t_batch if batched is not None else (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            ans = system.answer(q, ctx)
            if not isinstance(ans, str):
                raise ValueError(f"{system.name}.answer returned {type(ans).__name__}, expected a string")
            return SystemOutput(q, ctx, ans, t_ret, (time.perf_counter() - t1) * 1000)
        except Exception as exc:  # noqa: BLE001 - one failing question must not stop the run
            return SystemOutput(q, batched[i] if batched is not None else [], None, float("nan"), float("nan"),
                                f"{type(exc).__name__}: {exc}")

    if concurrency == 1:
        return [one(i) for i in range(len(questions))]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, range(len(questions))))
