"""A scripted fake of Anthropic's Messages API for tests: a real local HTTP server, so litellm's real
anthropic provider path runs (request transformation, SSE parsing, thinking blocks) and no provider is reached.

    fake = FakeAnthropic().start()
    fake.script(FakeAnthropic.reply(thinking="Let me look.", tool=("memory_insert", {"label": "human", ...})),
                FakeAnthropic.reply(text="Done."))
    ... model "anthropic/claude-sonnet-4-5", ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY=... ...
    fake.requests[-1].body["messages"]; fake.stop()

Like the real API, it refuses (400) a request whose history carries a thinking block it did not sign exactly
as it signed it, so a test passes only if signed blocks travel back unchanged. With the script empty it
answers with the text "ok".
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import serve_in_thread

DEFAULT_TEXT = "ok"


def sign(thinking: str) -> str:
    """The signature this fake gives a thinking block (the real API's is opaque; this one is checkable)."""
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


@dataclass
class AnthropicReply:
    """One scripted answer: optional thinking (signed), optional redacted thinking, text, tool uses."""

    text: str | None = None
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    thinking: str | None = None
    redacted: str | None = None
    stop_reason: str | None = None
    status: int = 200
    error: dict[str, Any] | None = None
    latency: float = 0.0  # seconds before the answer starts, as a model takes


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class FakeAnthropic:
    """The fake server; `chunk_chars` sizes streamed text, thinking and JSON fragments."""

    def __init__(self, *, chunk_chars: int = 6):
        self.chunk_chars = chunk_chars
        self.requests: list[Recorded] = []
        self.trusted: dict[str, str] = {}  # signature -> thinking: blocks signed elsewhere (a real agent file's)
        self._script: deque[AnthropicReply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeAnthropic:
        handler = type("BoundHandler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        serve_in_thread(self._server, "fake-anthropic")
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "FakeAnthropic not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(self, *replies: AnthropicReply) -> FakeAnthropic:
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def pending(self) -> int:
        return len(self._script)

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/v1/messages"]

    @staticmethod
    def reply(
        *,
        text: str | None = None,
        tool: tuple[str, dict[str, Any]] | None = None,
        tools: list[tuple[str, dict[str, Any]]] | None = None,
        thinking: str | None = None,
        redacted: str | None = None,
        stop_reason: str | None = None,
        latency: float = 0.0,
    ) -> AnthropicReply:
        calls = list(tools or []) + ([tool] if tool else [])
        return AnthropicReply(
            text=text, tools=calls, thinking=thinking, redacted=redacted, stop_reason=stop_reason, latency=latency
        )

    @staticmethod
    def error(status: int, message: str, type_: str = "invalid_request_error") -> AnthropicReply:
        return AnthropicReply(status=status, error={"type": "error", "error": {"type": type_, "message": message}})

    # ------------------------------------------------------------------ server side
    def _next(self) -> AnthropicReply:
        with self._lock:
            return self._script.popleft() if self._script else AnthropicReply(text=DEFAULT_TEXT)

    def content_blocks(self, reply: AnthropicReply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.thinking is not None:
            blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": sign(reply.thinking)})
        if reply.redacted is not None:
            blocks.append({"type": "redacted_thinking", "data": reply.redacted})
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for name, args in reply.tools:
            blocks.append({"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:22], "name": name, "input": args})
        return blocks


def history_problem(body: dict[str, Any], trusted: dict[str, str] | None = None) -> str | None:
    """What the real API would refuse in a request's messages: a thinking block altered or unsigned, a tool_use
    without its tool_result, or a tool name the request does not define."""
    names = {t.get("name") for t in body.get("tools") or []}
    messages = body.get("messages") or []
    thinking_on = (body.get("thinking") or {}).get("type") == "enabled"
    if thinking_on and (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    if thinking_on and body.get("temperature") not in (None, 1):
        return "`temperature` may only be set to 1 when thinking is enabled."
    if thinking_on and body["thinking"].get("budget_tokens", 0) >= body.get("max_tokens", 0):
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m.get("content"), list) else []
        for block in content:
            kind = block.get("type")
            signature, thought = block.get("signature"), block.get("thinking", "")
            if kind == "thinking" and signature != sign(thought) and (trusted or {}).get(signature) != thought:
                return f"messages.{i}: Invalid `signature` in `thinking` block"
            # the API insists on it for the assistant turn whose tool results end the request (the open tool loop)
            open_loop = i == len(messages) - 2 and m.get("role") == "assistant"
            if (
                kind == "tool_use"
                and thinking_on
                and open_loop
                and content[0].get("type") not in ("thinking", "redacted_thinking")
            ):
                return (
                    f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{content[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                    "with a thinking block."
                )
            if kind == "tool_use":
                if names and block.get("name") not in names:
                    return f"messages.{i}: tool_use names an undefined tool {block.get('name')!r}"
                following = messages[i + 1].get("content") if i + 1 < len(messages) else None
                results = [
                    b.get("tool_use_id")
                    for b in following or []
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
                if block.get("id") not in results:
                    return f"messages.{i}: tool_use ids were found without tool_result blocks immediately after"
    return None


def _usage(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "input_tokens": max(1, len(json.dumps(body.get("messages") or [])) // 4),
        "output_tokens": max(1, len(json.dumps(blocks)) // 4),
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):  # type: ignore[override]
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def handle_error(self, request, client_address) -> None:  # type: ignore[override]
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeAnthropic

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._json({"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}, 400)
            return
        with self.fake._lock:
            self.fake.requests.append(Recorded(path, body, dict(self.headers.items())))
        if path != "/v1/messages":
            self._json({"type": "error", "error": {"type": "not_found_error", "message": path}}, 404)
            return
        if not self.headers.get("x-api-key") or not self.headers.get("anthropic-version"):
            self._json({"type": "error", "error": {"type": "authentication_error", "message": "x-api-key"}}, 401)
            return
        problem = history_problem(body, self.fake.trusted)
        if problem:
            self._json({"type": "error", "error": {"type": "invalid_request_error", "message": problem}}, 400)
            return
        reply = self.fake._next()
        if reply.latency:
            time.sleep(reply.latency)
        if reply.status != 200:
            self._json(reply.error, reply.status)
            return
        blocks = self.fake.content_blocks(reply)
        stop = reply.stop_reason or ("tool_use" if reply.tools else "end_turn")
        message = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "stop_reason": stop,
            "stop_sequence": None,
        }
        if body.get("stream"):
            self._stream(message, blocks, _usage(body, blocks))
        else:
            self._json({**message, "content": blocks, "usage": _usage(body, blocks)})

    def _stream(self, message: dict[str, Any], blocks: list[dict[str, Any]], usage: dict[str, int]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = max(1, self.fake.chunk_chars)

        def event(kind: str, payload: dict[str, Any]) -> None:
            data = f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
        }
        event("message_start", {"message": start})
        event("ping", {})
        for index, block in enumerate(blocks):
            kind = block["type"]
            if kind == "thinking":
                event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                )
                for i in range(0, len(block["thinking"]), n):
                    event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "thinking_delta", "thinking": block["thinking"][i : i + n]}},
                    )
                event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}},
                )
            elif kind == "redacted_thinking":
                event("content_block_start", {"index": index, "content_block": block})
            elif kind == "text":
                event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                for i in range(0, len(block["text"]), n):
                    event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "text_delta", "text": block["text"][i : i + n]}},
                    )
            else:
                event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
                args = json.dumps(block["input"])
                for i in range(0, len(args), n):
                    event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "input_json_delta", "partial_json": args[i : i + n]}},
                    )
            event("content_block_stop", {"index": index})
        event(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        event("message_stop", {})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
