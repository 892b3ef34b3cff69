"""A small scriptable OpenAI-compatible chat server for tests (real HTTP on 127.0.0.1, ephemeral port).

    def test_x(llm_server):
        llm_server.script(error_reply(429, "slow down", retry_after=0.2), completion("ok"))
        client = LLMClient(LLMSettings(base_url=llm_server.base_url, api_key="k", cache_dir=None))
        ...
        assert len(llm_server.requests) == 2

Replies come from the scripted queue first (each item a :class:`Reply` or a callable
``request_json -> Reply``), then from the handler (``set_handler``; default: a completion saying "ok").
Every request is recorded (path, all headers with lower-cased names, parsed body, arrival time);
``max_in_flight`` is the largest number of requests being handled at once (from arrival until the
server starts sending the reply).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 stalls bursts of concurrent clients for ~1 s
    daemon_threads = True


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON; str/bytes sent as-is (for malformed bodies)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class RecordedRequest:
    index: int
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any
    raw: bytes
    t_received: float  # time.monotonic() when the body had been read

    @property
    def messages(self) -> list[dict]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []


def completion_body(content: str | None, *, finish_reason: str = "stop", prompt_tokens: int = 10,
                    completion_tokens: int = 5, model: str = "test-model", refusal: str | None = None,
                    usage: bool = True, reasoning: str | None = None, reasoning_field: str = "reasoning",
                    error: dict | None = None) -> dict:
    """A chat completion. ``reasoning`` goes in a separate message field (``reasoning`` as OpenRouter sends
    it, or ``reasoning_content`` as DeepSeek / vLLM do); ``error`` adds an error object to the 200 reply."""
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": refusal},
            "finish_reason": finish_reason,
        }],
    }
    if reasoning is not None:
        body["choices"][0]["message"][reasoning_field] = reasoning
    if error is not None:
        body["error"] = error
    if usage:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
    return body


def completion(content: str | None, *, delay_s: float = 0.0, **kw: Any) -> Reply:
    return Reply(200, completion_body(content, **kw), delay_s=delay_s)


def error_body(message: str, *, type_: str = "invalid_request_error", code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def error_reply(status: int, message: str, *, type_: str = "invalid_request_error", code: str | None = None,
                retry_after: float | str | None = None, headers: dict[str, str] | None = None,
                delay_s: float = 0.0) -> Reply:
    hdrs = dict(headers or {})
    if retry_after is not None:
        hdrs["Retry-After"] = str(retry_after)
    return Reply(status, error_body(message, type_=type_, code=code), hdrs, delay_s)


def think(draft: str, final: str) -> str:
    """A reasoning model's reply: a ``<think>`` block holding a draft, then the final answer."""
    return f"<think>\nLet me draft it first: {draft}\nHmm, that is not right; revise.\n</think>\n{final}"


def error_in_200(message: str = "Upstream provider error", *, code: int = 502, with_choices: bool = True) -> Reply:
    """HTTP 200 whose body carries an error object (how OpenRouter relays an upstream failure), with an
    empty choice (``finish_reason="error"``) or without choices."""
    error = {"message": message, "code": code}
    if not with_choices:
        return Reply(200, {"id": "gen-x", "object": "chat.completion", "error": error})
    return Reply(200, completion_body("", finish_reason="error", error=error))


def persistent_failures(share: float, fallback: Callable[[Any], Reply], status: int = 503) -> Callable[[Any], Reply]:
    """A handler failing the same requests every time (those whose content hashes into ``share``) with
    ``status``, and answering the others with ``fallback`` — a provider that is broken for some prompts."""
    import hashlib

    def handle(body: Any) -> Reply:
        digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
        if int.from_bytes(digest[:4], "big") / 2 ** 32 < share:
            return error_reply(status, "Service Unavailable", type_="server_error")
        return fallback(body)

    return handle


Handler = Callable[[Any], Reply]


class FakeLLMServer:
    PATHS: tuple[str, ...] = CHAT_PATHS  # other paths answer 404 (tests/embeddings_server.py serves embeddings)

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self.in_flight = 0
        self._queue: deque[Reply | Handler] = deque()
        self._handler: Handler = lambda request: completion("ok")
        self.models: list[str] | None = None  # ids served on GET /v1/models; None → that path answers 404
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), self._make_handler_class())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-llm", daemon=True)

    # -- scripting -------------------------------------------------------------------------

    def script(self, *replies: Reply | Handler) -> FakeLLMServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    def set_handler(self, handler: Handler) -> FakeLLMServer:
        self._handler = handler
        return self

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path in CHAT_PATHS]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- HTTP ------------------------------------------------------------------------------

    def _next_reply(self, body: Any) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else self._handler
        return item(body) if callable(item) else item

    def _make_handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.requests.append(RecordedRequest(
                        index=len(server.requests), method=self.command, path=self.path.split("?")[0],
                        headers={k.lower(): v for k, v in self.headers.items()}, body=body, raw=raw,
                        t_received=time.monotonic(),
                    ))
                counted = True
                try:
                    if server.models is not None and self.path.split("?")[0] in ("/v1/models", "/models"):
                        reply = Reply(200, {"object": "list", "data": [
                            {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in server.models]})
                    elif self.path.split("?")[0] not in server.PATHS:
                        reply = error_reply(404, f"unknown path {self.path}", type_="not_found")
                    else:
                        try:
                            reply = server._next_reply(body)
                        except Exception as exc:  # a broken test handler should be visible, not a hang
                            reply = error_reply(599, f"test handler raised {exc!r}", type_="test_error")
                    if reply.delay_s:
                        server._stopping.wait(reply.delay_s)
                    payload = reply.body
                    if isinstance(payload, (dict, list)):
                        data = json.dumps(payload).encode()
                    elif isinstance(payload, str):
                        data = payload.encode()
                    else:
                        data = payload or b""
                    # Leave the in-flight count before answering: once the client has the reply it may send
                    # the next request, which must not overlap this one in the count.
                    with server._lock:
                        server.in_flight -= 1
                        counted = False
                    self.send_response(reply.status)
                    if not any(k.lower() == "content-type" for k in reply.headers):
                        self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    if counted:
                        with server._lock:
                            server.in_flight -= 1

        return _Handler


@pytest.fixture
def llm_server():
    with FakeLLMServer() as server:
        yield server
