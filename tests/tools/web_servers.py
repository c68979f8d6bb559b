"""Local stand-ins for the web the built-in web tools reach: a site of pages, Exa's search API and a SearXNG
instance, each a real HTTP server on 127.0.0.1 that records what it was asked."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.helpers import serve_in_thread

PAGE = b"""<!doctype html><html><head><title>Otters</title><script>var secret = "in-a-script";</script>
<style>.x { color: red }</style></head><body>
<nav>Home | Menu-item-in-nav</nav>
<main><h1>Otters</h1><p>Otters are <b>semi-aquatic</b> mammals; see <a href="/more.html">more</a>.</p>
<img src="data:image/png;base64,iVBORw0KGgo=" alt="an otter floating"><ul><li>sea otter</li><li>river otter</li></ul>
</main><footer>Footer-text</footer></body></html>"""

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@dataclass
class Seen:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


class FakeWeb:
    """One server: `routes` maps a path to a Route, or to a callable (Seen -> Route) for the search APIs."""

    def __init__(self):
        self.routes: dict[str, object] = {}
        self.seen: list[Seen] = []
        web = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                seen = Seen(
                    self.command, parts.path, parse_qs(parts.query), dict(self.headers), self.rfile.read(length)
                )
                web.seen.append(seen)
                route = web.routes.get(parts.path)
                route = route(seen) if callable(route) else route
                if route is None:
                    route = Route(404, b"no such page", "text/plain")
                if route.delay_s:
                    time.sleep(route.delay_s)
                self.send_response(route.status)
                if route.content_type:
                    self.send_header("Content-Type", route.content_type)
                for k, v in route.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                try:
                    self.wfile.write(route.body)
                except OSError:
                    pass  # the client gave up (a time limit being tested)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def site(self) -> FakeWeb:
        """A few pages of each kind the fetch tool meets."""
        self.routes.update(
            {
                "/otters.html": Route(body=PAGE),
                "/more.html": Route(body=b"<html><body><p>More about otters.</p></body></html>"),
                "/notes.txt": Route(body="Plain notes \u2014 unchanged.\n".encode(), content_type="text/plain"),
                "/data.json": Route(body=b'{"otters": 2}', content_type="application/json"),
                "/otter.png": Route(body=PNG, content_type="image/png"),
                "/untyped": Route(body=PAGE, content_type=None),
                "/untyped.bin": Route(body=PNG, content_type=None),
                "/moved": Route(302, b"", None, {"Location": "/otters.html"}),
                "/to-metadata": Route(302, b"", None, {"Location": "http://169.254.169.254/latest/meta-data/"}),
                "/big.html": Route(body=b"<html><body>" + b"<p>otter otter otter</p>" * 2000 + b"</body></html>"),
                "/slow.html": Route(body=PAGE, delay_s=3),
            }
        )
        return self

    def exa(self, key: str = "exa-key") -> FakeWeb:
        """Exa's POST /search: answers two results when the x-api-key is `key`, 401 otherwise."""

        def search(seen: Seen) -> Route:
            if seen.headers.get("x-api-key") != key:
                return Route(401, b'{"error": "bad key"}', "application/json")
            asked = json.loads(seen.body)
            results = [
                {
                    "id": "1",
                    "title": f"About {asked['query']}",
                    "url": "https://example.org/otters",
                    "publishedDate": "2025-01-02T00:00:00.000Z",
                    "author": "A. Otter",
                    "text": "Full text of the page.",
                    "highlights": ["Otters hold hands.", "They sleep floating."],
                    "highlightScores": [0.9, 0.8],
                    "summary": "Otters are social.",
                },
                {"id": "2", "title": "Second", "url": "https://example.com/2", "publishedDate": None, "author": None},
            ]
            return Route(
                body=json.dumps({"requestId": "r", "results": results}).encode(), content_type="application/json"
            )

        self.routes["/search"] = search
        return self

    def searxng(self) -> FakeWeb:
        """SearXNG's GET /search?format=json: three results on page 1, one more on page 2, none after."""

        def search(seen: Seen) -> Route:
            if seen.query.get("format") != ["json"]:
                return Route(403, b"Forbidden", "text/plain")
            page = int(seen.query.get("pageno", ["1"])[0])
            pages = {
                1: [
                    {"url": "https://news.example.org/a", "title": "A", "content": "snippet a", "engine": "x"},
                    {
                        "url": "https://blog.example.com/b",
                        "title": "B",
                        "content": "snippet b",
                        "publishedDate": "2020-05-01T00:00:00",
                    },
                    {"url": "https://example.org/c", "title": "C", "content": "", "author": "Cee"},
                ],
                2: [{"url": "https://other.net/d", "title": "D", "content": "snippet d"}],
            }
            body = {"query": seen.query["q"][0], "results": pages.get(page, [])}
            return Route(body=json.dumps(body).encode(), content_type="application/json")

        self.routes["/search"] = search
        return self
