"""A scripted fake OpenAI-compatible model server for tests: a real local HTTP server, so litellm's real
code path runs and no provider can ever be reached.

    llm = FakeLLM(); llm.start()
    llm.script(FakeLLM.tool("core_memory_append", {"label": "human", "content": "likes cats"}, heartbeat=True),
               FakeLLM.tool("send_message", {"message": "Noted!"}))
    ... model "openai/fake-model", api_base=llm.base_url, api_key="fake" ...
    llm.chat_requests[-1]["tools"]; llm.stop()

Replies are consumed first in, first out, one per chat request. With the script empty the default policy
answers: call send_message("ok") if it is offered, else reply with plain text "ok".
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import serve_in_thread

DEFAULT_TEXT = "ok"
FILLER_THINKING = "Thinking about how to respond."


@dataclass
class Reply:
    """One scripted answer. `calls` holds (name, args dict or raw JSON string) pairs."""

    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    content: str | None = None
    reasoning: str | None = None
    status: int = 200
    error_body: dict[str, Any] | None = None
    latency: float | None = None
    fill: bool = True
    chunk_s: float = 0.0  # pause between streamed chunks
    break_after: int | None = None  # streamed: drop the connection after this many chunks
    drop: bool = False  # close the connection without answering (a keep-alive connection the server just closed)
    streamed_usage: bool = True  # streamed: send the usage chunk when the request asks for it (some providers never do)
    body: Any = None  # whole: answer 200 with this JSON instead of a chat completion (a proxy that is something else)
    stream_lines: list[str] | None = None  # streamed: send these SSE lines, each ending an event, as the whole stream


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


def _tool_schemas(req: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for t in req.get("tools") or []:
        fn = t.get("function") or {}
        if fn.get("name"):
            out[fn["name"]] = fn.get("parameters") or {}
    return out


def _fill_args(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Add `thinking`/`request_heartbeat` and other required args the schema asks for, in schema order."""
    props = schema.get("properties") or {}
    out = dict(args)
    if "thinking" in props and "thinking" not in out:
        out["thinking"] = FILLER_THINKING
    if "request_heartbeat" in props and "request_heartbeat" not in out:
        out["request_heartbeat"] = False
    for name in schema.get("required") or []:
        if name not in out:
            typ = (props.get(name) or {}).get("type", "string")
            out[name] = {"string": "x", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(
                typ, "x"
            )
    order = {k: i for i, k in enumerate(props)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def embedding_vector(text: str, dim: int) -> list[float]:
    """Deterministic unit vector: hashed bag of words, so texts sharing words come out similar."""
    v = [0.0] * dim
    words = [w for w in "".join(c.lower() if c.isalnum() else " " for c in text).split() if w]
    for w in words or [text or " "]:
        h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "little")
        v[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _text_tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


class FakeLLM:
    """The fake server. `latency` (seconds) delays every reply; `embedding_dim` sizes embeddings."""

    model_id = "fake-model"

    def __init__(
        self, *, latency: float = 0.0, embedding_dim: int = 384, stream_chunk_chars: int = 8, streaming: bool = True
    ):
        self._defaults = {
            "latency": latency,
            "embedding_dim": embedding_dim,
            "stream_chunk_chars": stream_chunk_chars,
            "streaming": streaming,
        }
        self.in_flight = 0  # requests being answered now
        self.streaming = streaming  # False: refuse `stream: true` with a 400, like a provider that cannot stream
        self.chunk_times: list[float] = []  # time.time() of each streamed chunk written, for latency measurements
        self.by_model: dict[str, Reply] = {}  # model name -> the reply it always gives (two models, one server)
        # request body -> its reply, or None for the usual answer: a model whose reply depends on what it is asked
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self.latency = latency
        self.embedding_dim = embedding_dim
        self.stream_chunk_chars = stream_chunk_chars
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._embedding_script: deque[Reply] = deque()  # answers for /embeddings (status, body, latency) before vectors
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeLLM:
        handler = type("BoundHandler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = serve_in_thread(self._server, "fake-llm")
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeLLM not started"
        return self._server.server_address[1]

    @property
    def connections(self) -> int:
        """How many TCP connections clients opened to this server so far."""
        assert self._server is not None, "FakeLLM not started"
        return self._server.accepted

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ script
    def script(self, *replies: Reply) -> FakeLLM:
        with self._lock:
            self._script.extend(replies)
        return self

    def script_embeddings(self, *replies: Reply) -> FakeLLM:
        """The next embedding requests get these answers (an error, a body, a delay) instead of vectors."""
        with self._lock:
            self._embedding_script.extend(replies)
        return self

    def clear(self) -> None:
        with self._lock:
            self._script.clear()
            self._embedding_script.clear()
            self.requests.clear()

    def reset(self) -> FakeLLM:
        """As it was started: no script, no requests, the constructor's settings (one server serves many tests)."""
        with self._lock:
            self._script.clear()
            self._embedding_script.clear()
            self.requests.clear()
            self.chunk_times.clear()
            self.by_model = {}
            self.responder = None
            for name, value in self._defaults.items():
                setattr(self, name, value)
        return self

    def _busy(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta

    @property
    def pending(self) -> int:
        return len(self._script)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/embeddings")]

    # ------------------------------------------------------------------ reply builders
    @staticmethod
    def tool(
        name: str,
        args: dict[str, Any] | None = None,
        *,
        heartbeat: bool | None = None,
        thinking: str | None = None,
        latency: float | None = None,
    ) -> Reply:
        a = dict(args or {})
        if heartbeat is not None:
            a["request_heartbeat"] = heartbeat
        if thinking is not None:
            a["thinking"] = thinking
        return Reply(calls=[(name, a)], latency=latency)

    @staticmethod
    def tools(*calls: tuple[str, dict[str, Any]], latency: float | None = None) -> Reply:
        """Several tool calls in one reply (parallel tool calls)."""
        return Reply(calls=[(n, dict(a)) for n, a in calls], latency=latency)

    @staticmethod
    def text(content: str = DEFAULT_TEXT, *, latency: float | None = None) -> Reply:
        return Reply(content=content, latency=latency)

    @staticmethod
    def reasoning(
        reasoning: str,
        name: str | None = None,
        args: dict[str, Any] | None = None,
        *,
        content: str | None = None,
        latency: float | None = None,
    ) -> Reply:
        """Native reasoning content (as reasoning models send it) plus a tool call or text."""
        calls = [(name, dict(args or {}))] if name else []
        return Reply(calls=calls, content=content, reasoning=reasoning, latency=latency)

    @staticmethod
    def malformed(
        name: str, raw_arguments: str = '{"message": "unterminated', *, latency: float | None = None
    ) -> Reply:
        return Reply(calls=[(name, raw_arguments)], latency=latency, fill=False)

    @staticmethod
    def error(
        status: int,
        message: str = "fake provider error",
        *,
        code: str | None = None,
        type_: str | None = None,
        latency: float | None = None,
    ) -> Reply:
        body = {"error": {"message": message, "type": type_ or "invalid_request_error", "param": None, "code": code}}
        return Reply(status=status, error_body=body, latency=latency)

    @staticmethod
    def context_length_error(tokens: int = 200_000, limit: int = 128_000) -> Reply:
        msg = (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        return FakeLLM.error(400, msg, code="context_length_exceeded")

    @staticmethod
    def rate_limit_error() -> Reply:
        return FakeLLM.error(429, "Rate limit reached for requests", code="rate_limit_exceeded", type_="requests")

    # ------------------------------------------------------------------ server side
    def _record(self, method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, headers))

    def _next_reply(self, req: dict[str, Any]) -> Reply:
        responder = self.responder
        answer = responder(req) if responder is not None else None
        if answer is not None:
            return answer
        with self._lock:
            if req.get("model") in self.by_model:
                return self.by_model[req["model"]]
            if self._script:
                return self._script.popleft()
        if "send_message" in _tool_schemas(req):
            return Reply(calls=[("send_message", {"message": DEFAULT_TEXT})])
        return Reply(content=DEFAULT_TEXT)

    def _materialize(self, req: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
        schemas = _tool_schemas(req)
        calls = []
        for name, args in reply.calls:
            if isinstance(args, str):
                arg_s = args
            else:
                filled = _fill_args(schemas[name], args) if reply.fill and name in schemas else args
                arg_s = json.dumps(filled, separators=(",", ":"))
            calls.append(
                {
                    "id": "call_" + uuid.uuid4().hex[:24],
                    "type": "function",
                    "function": {"name": name, "arguments": arg_s},
                }
            )
        return calls

    def _usage(self, req: dict[str, Any], reply: Reply, calls: list[dict[str, Any]]) -> dict[str, int]:
        prompt = _text_tokens(req.get("messages") or []) + (_text_tokens(req["tools"]) if req.get("tools") else 0)
        completion = max(
            1,
            (
                len(reply.content or "")
                + len(reply.reasoning or "")
                + sum(len(c["function"]["arguments"]) for c in calls)
            )
            // 4,
        )
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    accepted = 0  # TCP connections accepted: fewer than requests when clients reuse theirs

    def get_request(self):  # type: ignore[override]
        conn, addr = super().get_request()
        self.accepted += 1
        # Without TCP_NODELAY, small writes meet the client's delayed ACK: ~40 ms per response on loopback.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def handle_error(self, request, client_address) -> None:  # type: ignore[override]
        # Clients (litellm's pooled httpx) drop idle keep-alive connections; that is not a test failure.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeLLM

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence access logs
        pass

    def _send_json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _path(self) -> str:
        p = self.path.split("?", 1)[0].rstrip("/")
        return p if p.startswith("/v1") else "/v1" + p

    def do_GET(self) -> None:  # noqa: N802
        self.fake._record("GET", self._path(), {}, dict(self.headers.items()))
        if self._path() == "/v1/models":
            self._send_json(
                {
                    "object": "list",
                    "data": [
                        {
                            "id": FakeLLM.model_id,
                            "object": "model",
                            "created": 0,
                            "owned_by": "fake",
                            "context_length": 128000,
                        },
                        {"id": "fake-embedding", "object": "model", "created": 0, "owned_by": "fake"},
                    ],
                }
            )
            return
        self._send_json({"error": {"message": f"not found: {self.path}"}}, 404)

    def do_POST(self) -> None:  # noqa: N802
        self.fake._busy(1)
        try:
            self._post()
        finally:
            self.fake._busy(-1)

    def _post(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json({"error": {"message": f"bad json: {exc}"}}, 400)
            return
        path = self._path()
        self.fake._record("POST", path, body, dict(self.headers.items()))
        if path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/v1/embeddings":
            self._embeddings(body)
        else:
            self._send_json({"error": {"message": f"not found: {self.path}"}}, 404)

    def _embeddings(self, body: dict[str, Any]) -> None:
        with self.fake._lock:
            reply = self.fake._embedding_script.popleft() if self.fake._embedding_script else None
        if reply is not None:
            if reply.latency:
                time.sleep(reply.latency)
            if reply.status != 200 or reply.body is not None:
                self._send_json(reply.body if reply.status == 200 else reply.error_body or {"error": {}}, reply.status)
                return
        inp = body.get("input", "")
        items = inp if isinstance(inp, list) else [inp]
        dim = int(body.get("dimensions") or self.fake.embedding_dim)
        data = [
            {"object": "embedding", "index": i, "embedding": embedding_vector(str(t), dim)} for i, t in enumerate(items)
        ]
        n = sum(len(str(t)) for t in items) // 4 + 1
        self._send_json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embedding"),
                "usage": {"prompt_tokens": n, "total_tokens": n},
            }
        )

    def _chat(self, req: dict[str, Any]) -> None:
        fake = self.fake
        if req.get("stream") and not fake.streaming:
            self._send_json(
                {"error": {"message": "streaming is not supported by this server", "type": "invalid_request_error"}},
                400,
            )
            return
        reply = fake._next_reply(req)
        delay = reply.latency if reply.latency is not None else fake.latency
        if delay:
            time.sleep(delay)
        if reply.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.status != 200:
            self._send_json(reply.error_body or {"error": {"message": "error"}}, reply.status)
            return
        if reply.body is not None and not req.get("stream"):
            self._send_json(reply.body)
            return
        calls = fake._materialize(req, reply)
        usage = fake._usage(req, reply, calls)
        if req.get("stream"):
            self._stream(req, reply, calls, usage)
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        self._send_json(
            {
                "id": "chatcmpl-" + uuid.uuid4().hex,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.get("model", FakeLLM.model_id),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": "tool_calls" if calls else "stop",
                    }
                ],
                "usage": usage,
            }
        )

    def _stream(self, req: dict[str, Any], reply: Reply, calls: list[dict[str, Any]], usage: dict[str, int]) -> None:
        try:
            self._stream_chunks(req, reply, calls, usage)
        except ConnectionAbortedError:
            # A scripted break drops the connection mid-body, as a provider's failure does: no last chunk, so the
            # client cannot take the connection for a finished one and reuse it (a race the server then wins).
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream_chunks(
        self, req: dict[str, Any], reply: Reply, calls: list[dict[str, Any]], usage: dict[str, int]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.get("model", FakeLLM.model_id),
        }
        n = max(1, self.fake.stream_chunk_chars)
        if reply.stream_lines is not None:
            for line in reply.stream_lines:
                data = f"{line}\n\n".encode()
                self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return

        sent = [0]

        def emit(payload: str) -> None:
            if reply.break_after is not None and sent[0] >= reply.break_after:
                raise ConnectionAbortedError("scripted break")
            if reply.chunk_s and sent[0]:
                time.sleep(reply.chunk_s)
            data = f"data: {payload}\n\n".encode()
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            self.fake.chunk_times.append(time.time())
            sent[0] += 1

        def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            emit(
                json.dumps(
                    {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
                )
            )

        chunk({"role": "assistant", "content": ""})
        for i in range(0, len(reply.reasoning or ""), n):
            chunk({"reasoning_content": reply.reasoning[i : i + n]})  # type: ignore[index]
        for i in range(0, len(reply.content or ""), n):
            chunk({"content": reply.content[i : i + n]})  # type: ignore[index]
        for idx, call in enumerate(calls):
            fn = call["function"]
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": idx,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for i in range(0, len(fn["arguments"]), n):
                chunk({"tool_calls": [{"index": idx, "function": {"arguments": fn["arguments"][i : i + n]}}]})
        chunk({}, "tool_calls" if calls else "stop")
        if reply.streamed_usage and (req.get("stream_options") or {}).get("include_usage"):
            emit(json.dumps({**base, "choices": [], "usage": usage}))
        emit("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
