"""A request log for the client tests: an ASGI wrapper that appends every HTTP exchange as one JSON line
(method, path, status, the start of both bodies), and the readers that turn the file into a report, so a failing
client run says exactly which endpoints answered what."""

import json
import threading
import time

HEAD = 1500  # bytes of a response kept from its start
TAIL = 600  # bytes of a response kept from its end (an SSE stream's error or stop reason comes last)
REQUEST_MAX = 1 << 20  # bytes of a request body read for the log (Letta Code's system prompt alone is ~20 KB)
LONG_STRING = 160  # a JSON string longer than this is logged as its start and its length

_write_lock = threading.Lock()


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _shorten(value):
    if isinstance(value, str) and len(value) > LONG_STRING:
        return f"{value[:80]}…[{len(value)} chars]"
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def condensed(body: bytes) -> str:
    """A request body for the log: JSON with its long strings cut (the fields stay visible), else its start."""
    try:
        return json.dumps(_shorten(json.loads(body)), ensure_ascii=False)
    except ValueError:
        return _text(body[:HEAD])


class RequestLog:
    """Wrap an ASGI app; log each HTTP exchange as its response's last part is sent (or when the app fails)."""

    def __init__(self, app, path: str):
        self.app = app
        self.path = path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        query = scope.get("query_string", b"").decode("latin-1")
        entry = {"method": scope["method"], "path": scope["path"] + (f"?{query}" if query else ""), "status": None}
        request_body = bytearray()
        head, tail = bytearray(), bytearray()
        started = time.monotonic()

        async def logged_receive():
            message = await receive()
            if message["type"] == "http.request" and len(request_body) < REQUEST_MAX:
                request_body.extend(message.get("body", b"")[: REQUEST_MAX - len(request_body)])
            return message

        async def logged_send(message):
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                room = HEAD - len(head)
                if room > 0:
                    head.extend(chunk[:room])
                    chunk = chunk[room:]
                tail.extend(chunk)
                del tail[:-TAIL]
                if not message.get("more_body"):
                    # written before the client can see the response end: a client that exits on reading it
                    # finds the exchange in the log
                    finish()
            await send(message)

        def finish():
            if "seconds" in entry:
                return
            entry["seconds"] = round(time.monotonic() - started, 3)
            entry["request_body"] = condensed(bytes(request_body)) if request_body else ""
            entry["response_body"] = _text(bytes(head)) + (f" … {_text(bytes(tail))}" if tail else "")
            self._write(entry)

        try:
            await self.app(scope, logged_receive, logged_send)
        except BaseException as exc:
            entry["exception"] = repr(exc)
            raise
        finally:
            finish()

    def _write(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with _write_lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)


def read_log(path) -> list[dict]:
    """The exchanges logged so far, in the order their responses ended."""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def failures(entries: list[dict]) -> list[dict]:
    """The exchanges answered with a 4xx/5xx (or never answered)."""
    return [e for e in entries if e["status"] is None or e["status"] >= 400]


def describe(entries: list[dict], *, bodies: int = 300) -> str:
    """One line per exchange: `METHOD path -> status  request body | response body` (bodies cut to `bodies`)."""

    def cut(s: str) -> str:
        s = " ".join(s.split())
        return s if len(s) <= bodies else s[:bodies] + "…"

    lines = []
    for e in entries:
        line = f"{e['method']} {e['path']} -> {e['status']}"
        if e.get("request_body"):
            line += f"  req: {cut(e['request_body'])}"
        if e["status"] is None or e["status"] >= 400:
            line += f"  resp: {cut(e['response_body'])}"
        if e.get("exception"):
            line += f"  exception: {e['exception']}"
        lines.append(line)
    return "\n".join(lines)
