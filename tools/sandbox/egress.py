"""The egress proxy: the only way out of a sandbox that may use the network.

A sandbox always gets its own network namespace. When it may use the network, `_relay.py` inside it forwards
127.0.0.1:`RELAY_PORT` to this proxy's Unix socket (mounted in), and the command finds the port in HTTP_PROXY,
HTTPS_PROXY and their kin. The proxy speaks HTTP proxying — `CONNECT host:port` (HTTPS and any TCP) and absolute
`http://` requests — and opens each connection through the egress guard (`core.egress.connect`): the public
internet only, loopback, private, link-local and the host's own addresses refused before any connection, unless
the operator allows them. A refusal is a 403 whose body says why.

One proxy per server process, started on first use; it holds no per-run state, so every sandbox shares it.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import tempfile
import threading
from urllib.parse import urlsplit

from core.egress import Allowance, EgressRefused, connect, parse_allowance

log = logging.getLogger(__name__)

SOCKET_IN_SANDBOX = "/run/agents-ide/egress.sock"
RELAY_PORT = 3128
_HEADER_LIMIT = 64 * 1024
_CHUNK = 65536
_MAX_CONNECTIONS = 256


def proxy_env(port: int = RELAY_PORT) -> dict[str, str]:
    """What a sandboxed command is told about its way out (Python, curl, npm and Node's clients read these).

    No NO_PROXY: the sandbox's 127.0.0.1 is its own, so the host's loopback (PUBLIC_BASE_URL, an address the
    operator allowed) is reached through the proxy like everything else."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    return {**dict.fromkeys(names, url), "npm_config_proxy": url, "npm_config_https_proxy": url}


class EgressProxy:
    """An HTTP proxy on a Unix socket whose every connection goes through the egress guard."""

    def __init__(self, socket_path: str, allowed: list[Allowance] | None = None):
        self.socket_path = socket_path
        self.allowed = allowed  # None: the deployment's settings (core.egress.allowances)
        self.refused = 0  # connections refused by the guard (tests and logs read it)
        self._slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        self._listener: socket.socket | None = None

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o666)  # sandboxes run as throwaway uids
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept_loop, name="egress-proxy", daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                _answer(client, 503, "too many connections through the egress proxy")
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), name="egress-conn", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            client.settimeout(30)
            head, rest = _read_head(client)
            if head is None:
                return
            method, target, lines = head
            host, port, first = _destination(method, target, lines, rest)
            if host is None:
                _answer(client, 400, "the egress proxy takes CONNECT host:port or an absolute http:// URL")
                return
            try:
                upstream = connect(host, port, timeout=10, allowed=self.allowed)
            except EgressRefused as exc:
                self.refused += 1
                log.info("egress refused for a sandbox: %s", exc)
                _answer(client, 403, f"egress refused: {exc}")
                return
            except OSError as exc:
                _answer(client, 502, f"could not connect to {host}:{port}: {exc}")
                return
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(first)
            client.settimeout(None)
            _shuttle(client, upstream)
        except OSError:
            pass
        finally:
            self._slots.release()
            client.close()
            if upstream is not None:
                upstream.close()


def _read_head(client: socket.socket):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(_CHUNK)
        if not chunk:
            return None, b""
        data += chunk
        if len(data) > _HEADER_LIMIT:
            _answer(client, 431, "request header too large")
            return None, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        _answer(client, 400, "malformed request line")
        return None, b""
    return (parts[0].upper(), parts[1], lines[1:]), rest


def _destination(method: str, target: str, lines: list[str], rest: bytes):
    """Where the client wants to go, and the bytes to send there first (a plain request, in origin form)."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not host or not port.isdigit():
            return None, 0, b""
        return host.strip("[]"), int(port), rest
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        return None, 0, b""
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [line for line in lines if not line.lower().startswith(("proxy-", "connection:", "keep-alive:"))]
    head = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close"]) + "\r\n\r\n"
    return parts.hostname, parts.port or 80, head.encode("latin-1") + rest


def _answer(client: socket.socket, status: int, text: str) -> None:
    # The reason is what clients put in their errors ("HTTP Error 403: …", "Tunnel connection failed: 403 …").
    reason = {400: "Bad Request", 403: "Blocked by the sandbox", 431: "Request Header Fields Too Large"}.get(
        status, "Bad Gateway"
    )
    body = (text + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        client.sendall(head.encode() + body)
    except OSError:
        pass


def _shuttle(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    with selectors.DefaultSelector() as selector:
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        while True:
            for key, _ in selector.select():
                data = key.fileobj.recv(_CHUNK)
                if not data:
                    return
                key.data.sendall(data)


_proxies: dict[tuple, EgressProxy] = {}
_proxy_lock = threading.Lock()


def egress_proxy(work_root: str | None = None, allow: tuple[str, ...] | None = None) -> EgressProxy:
    """The process's egress proxy for `allow` (None: the deployment's settings; else exactly these allowances),
    started on first use with its socket in a private directory under work_root."""
    key = (work_root, allow)
    with _proxy_lock:
        proxy = _proxies.get(key)
        if proxy is None or not os.path.exists(proxy.socket_path):
            directory = tempfile.mkdtemp(prefix="agents-ide-egress-", dir=work_root)
            os.chmod(directory, 0o755)
            allowed = None if allow is None else [parse_allowance(entry) for entry in allow]
            proxy = _proxies[key] = EgressProxy(os.path.join(directory, "egress.sock"), allowed)
            proxy.start()
        return proxy
