"""The HTTP/1.1 wire under daphne (Twisted's parser), adjusted where it answered without the application:

- a request line over Twisted's line limit (16 KiB) closed the connection with no answer, and request line plus
  headers over 16 KiB got a bare 400. The limits are raised (REQUEST_LINE_LIMIT, HEADERS_LIMIT, Twisted's documented
  `HTTPChannel.MAX_LENGTH` and `totalHeadersSize`) and `URLLengthLimit` answers a target (path and query) longer
  than MAX_URL_BYTES with a 414 that says so. A request line over REQUEST_LINE_LIMIT is still cut off: no server
  reads an unbounded line.
- Twisted parsed every form body itself before daphne handed it on (daphne never reads what it parsed), and answered
  a bare 400 with an empty body to multipart bodies it could not read, such as a browser's FormData with no field
  (`--boundary--`), which Django reads as an empty form. `FormsLeftToDjango` turns that parse off with Twisted's
  `parsePOSTFormSubmission` argument, so Django parses (and refuses, with its usual answers) every form once.

daphne has no options for either, so `daphne_configure` sets them before the server starts listening (asgi.py calls
it: daphne imports the application before it builds its HTTP factory).
"""

import json

from daphne import http_protocol
from twisted.web import http

MAX_URL_BYTES = 16 * 1024  # a longer request target (path and query string) is answered 414
REQUEST_LINE_LIMIT = 1024 * 1024  # read this much of a request line to answer 414; a body may be far larger anyway
HEADERS_LIMIT = REQUEST_LINE_LIMIT + 16 * 1024  # request line and headers together (Twisted's 16 KiB for headers)
API_PREFIX = b"/v1/"


class FormsLeftToDjango(http_protocol.WebRequest):
    """daphne's request without Twisted's own parse of form bodies (Django parses them)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)


def daphne_configure() -> None:
    """Raise Twisted's request line and header limits and leave form bodies to Django, for every daphne connection
    made after this call (changes process-wide class attributes of Twisted and daphne; idempotent)."""
    http.HTTPChannel.MAX_LENGTH = REQUEST_LINE_LIMIT
    http.HTTPChannel.totalHeadersSize = HEADERS_LIMIT
    # daphne's HTTP factory installs the request class it names here on each connection it builds.
    http_protocol.WebRequest = FormsLeftToDjango


def _url_bytes(scope) -> int:
    path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
    query = scope.get("query_string") or b""
    return len(path) + (len(query) + 1 if query else 0)


class URLLengthLimit:
    """ASGI: an HTTP request whose target is longer than MAX_URL_BYTES is answered 414 (JSON under /v1/, like the
    API's other errors; text elsewhere) without reaching Django."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _url_bytes(scope) <= MAX_URL_BYTES:
            await self.app(scope, receive, send)
            return
        message = f"The URL is longer than this server accepts ({MAX_URL_BYTES} bytes of path and query string)."
        path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
        if path.startswith(API_PREFIX):
            body, kind = json.dumps({"detail": message}).encode(), b"application/json"
        else:
            body, kind = message.encode(), b"text/plain; charset=utf-8"
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 414, "headers": headers})
        await send({"type": "http.response.body", "body": body})
