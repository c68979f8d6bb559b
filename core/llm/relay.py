"""The pinning relay: litellm reaches an owner's provider only at an address the egress guard checked.

litellm opens its own connections and resolves the provider's name itself, after our check (a DNS answer could change
in between: rebinding), and each of its providers takes a different client type, none of them part of its public API.
So a guarded call through litellm is given, as its documented `api_base`, a loopback URL of this relay instead of the
owner's; the relay sends each request on through the guarded client (core.egress: resolved once, checked, connected
to the checked address, every redirect hop too) and streams the answer back unchanged. The route lives for one call,
under a random token: nothing else that can reach this host's loopback can use it.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

from core.egress import EgressRefused, guarded_client

# Headers that belong to one hop (RFC 9110 7.6.1), and Host, which the guarded client sets from the owner's URL.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
_CHUNK = 64 * 1024


@dataclass
class Route:
    """One call's way out: `local_base` is what litellm is given; `failure`, what stopped a request on its way."""

    origin: str  # scheme://host[:port] of the owner's base URL
    local_base: str
    timeout: float
    failure: Exception | None = field(default=None, repr=False)


_routes: dict[str, Route] = {}
_lock = threading.Lock()
_server: ThreadingHTTPServer | None = None
_client = None


@contextmanager
def routed(base_url: str, *, timeout: float) -> Iterator[Route]:
    """A route to an owner's `base_url` for one call (starts the relay on first use); closed when the block ends."""
    parts = urlsplit(base_url)
    token = secrets.token_urlsafe(24)
    port = _started().server_address[1]
    route = Route(
        origin=f"{parts.scheme}://{parts.netloc}",
        local_base=f"http://127.0.0.1:{port}/{token}{parts.path.rstrip('/')}",
        timeout=timeout,
    )
    _routes[token] = route
    try:
        yield route
    finally:
        _routes.pop(token, None)


def _started() -> ThreadingHTTPServer:
    global _server, _client
    with _lock:
        if _server is None:
            _client = guarded_client(follow_redirects=False)
            _server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            _server.daemon_threads = True
            threading.Thread(target=_server.serve_forever, name="llm-relay", daemon=True).start()
    return _server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for litellm's pool, chunked answers for streams

    def do_POST(self):  # noqa: N802 - http.server's names
        self._relay()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815

    def _relay(self) -> None:
        token, _, rest = self.path.lstrip("/").partition("/")
        route = _routes.get(token)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if route is None:
            self._answer(404, b'{"error": {"message": "no such route"}}')
            return
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
        try:
            request = _client.build_request(
                self.command, f"{route.origin}/{rest}", headers=headers, content=body, timeout=route.timeout
            )
            response = _client.send(request, stream=True)
        except (EgressRefused, httpx.HTTPError) as exc:
            route.failure = exc
            self._answer(502, b'{"error": {"message": "the provider could not be reached"}}')
            return
        try:
            self._stream_back(response)
        finally:
            response.close()

    def _stream_back(self, response) -> None:
        self.send_response(response.status_code)
        for key, value in response.headers.multi_items():
            if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in response.iter_raw(_CHUNK):  # as received: any Content-Encoding stays the provider's
                if not chunk:
                    continue  # an empty chunk would end the answer
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, httpx.HTTPError):
            # litellm gave up (its timeout), or the provider broke off: litellm sees the answer end unfinished
            self.close_connection = True

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass
