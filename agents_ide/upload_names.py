"""A NUL character in an upload's file name is refused, not dropped.

Django's multipart parser removes every unprintable character from a file name, so `notes\\x00.txt` would be stored
as `notes.txt`, a name the client never sent. The name reaches no documented hook before that, so this ASGI
middleware reads the part headers of a multipart body as the body streams to Django (which reads it whole before it
makes the request), and refuses the request with a 400 naming the file when a `filename` (or RFC 2231 `filename*`)
holds a NUL: Django is told the client left, and the answer goes out from here.
"""

from __future__ import annotations

import json

from django.utils.http import parse_header_parameters

HEAD_LIMIT = 16 * 1024  # a part's headers read at most; Django refuses longer ones itself
SHOWN_NAME_CHARS = 120  # of a refused file name, quoted in the answer
API_PREFIX = "/v1/"


class PartHeaderScanner:
    """Fed a multipart body chunk by chunk, finds the first part whose file name holds a NUL (`refused`)."""

    def __init__(self, boundary: bytes):
        self.delimiter = b"\r\n--" + boundary + b"\r\n"
        self.buffer = b"\r\n"  # the body's first delimiter has no line break before it
        self.refused: str | None = None

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        while self.refused is None:
            start = self.buffer.find(self.delimiter)
            if start < 0:
                self.buffer = self.buffer[-(len(self.delimiter) - 1) :]  # what may begin a delimiter
                return
            head = start + len(self.delimiter)
            end = self.buffer.find(b"\r\n\r\n", head)
            if end < 0:
                if len(self.buffer) - head > HEAD_LIMIT:  # not a header Django accepts: look for the next part
                    self.buffer = self.buffer[head + HEAD_LIMIT :]
                    continue
                self.buffer = self.buffer[start:]
                return
            self.refused = _nul_file_name(self.buffer[head:end])
            self.buffer = self.buffer[end + 4 :]


def _nul_file_name(headers: bytes) -> str | None:
    for line in headers.decode("utf-8", "replace").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-disposition":
            _, params = parse_header_parameters(value)
            file_name = params.get("filename") or ""
            if "\x00" in file_name:
                return file_name
    return None


def _boundary(scope) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-type":
            media, params = parse_header_parameters(value.decode("latin-1"))
            if media == "multipart/form-data" and params.get("boundary"):
                return params["boundary"].encode("latin-1")
    return None


def refusal_message(file_name: str) -> str:
    shown = file_name if len(file_name) <= SHOWN_NAME_CHARS else file_name[:SHOWN_NAME_CHARS] + "…"
    return f"The multipart body cannot be read: the file name {shown!r} contains a NUL character."


class UploadNameGuard:
    """ASGI middleware around Django's handler: refuses (400) a multipart request whose file name holds a NUL."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        boundary = _boundary(scope) if scope["type"] == "http" and scope.get("method") == "POST" else None
        if boundary is None:
            return await self.app(scope, receive, send)
        scanner = PartHeaderScanner(boundary)

        async def scanned_receive():
            if scanner.refused is not None:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                scanner.feed(message.get("body", b""))
                if scanner.refused is not None:
                    return {"type": "http.disconnect"}  # Django stops reading and answers nothing
            return message

        await self.app(scope, scanned_receive, send)
        if scanner.refused is not None:
            await _answer(scope, send, refusal_message(scanner.refused))


async def _answer(scope, send, message: str) -> None:
    if scope.get("path", "").startswith(API_PREFIX):
        body, media = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, media = message.encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", media), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
