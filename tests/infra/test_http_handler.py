"""The ASGI handler lends each request a pooled thread: sequential requests reuse the thread and its
database connection (Django's own handler starts a thread, and opens a connection, per request), while
overlapping requests still get a thread each. With PostgreSQL's connection pool the pool keeps the connections
open instead: a request borrows one and opens none."""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler

from agents_ide.http import PooledASGIHandler

pytestmark = [pytest.mark.urls("tests.infra.threadinfo_urls"), pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _an_account_exists(account):
    """Past the first-run form (which would redirect every page to /setup)."""


async def _get(app, query: str = "") -> dict:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/whoami",
        "raw_path": b"/whoami",
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
    }
    comm = ApplicationCommunicator(app, scope)
    await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await comm.receive_output(10)
    assert start["status"] == 200
    body = await comm.receive_output(10)
    await comm.wait(10)
    return json.loads(body["body"])


def _sequential(app, n=3) -> list[dict]:
    async def go():
        return [await _get(app) for _ in range(n)]

    return asyncio.run(go())


def test_sequential_requests_reuse_one_thread_and_connection():
    from django.db import connection

    pool = getattr(connection, "pool", None)
    opened = pool.get_stats().get("connections_num", 0) if pool is not None else None
    served = _sequential(PooledASGIHandler())
    assert len({s["thread"] for s in served}) == 1
    if pool is None:  # the thread keeps its connection from request to request
        assert len({s["connection"] for s in served}) == 1
    else:  # PostgreSQL's pool: each request borrows one of the pool's open connections and gives it back
        assert pool.get_stats().get("connections_num", 0) == opened
        assert len({s["connection"] for s in served}) <= pool.get_stats()["pool_size"]


def test_djangos_own_handler_does_not_which_is_why_ours_exists():
    served = _sequential(ASGIHandler())
    assert len({s["thread"] for s in served}) == 3


def test_overlapping_requests_get_a_thread_each_and_extra_threads_are_not_kept():
    app = PooledASGIHandler(idle_threads=1)

    async def go():
        return await asyncio.gather(*[_get(app, "sleep=0.2") for _ in range(3)])

    served = asyncio.run(go())
    assert len({s["thread"] for s in served}) == 3
    assert len(app.executors.idle) == 1


class _CountingExecutor(ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=1)
        self.hops = 0

    def submit(self, *args, **kwargs):
        self.hops += 1
        return super().submit(*args, **kwargs)


def test_the_middleware_chain_and_the_view_take_one_hop_to_the_requests_thread():
    """Built for an async handler, Django's own middleware (sessions, CSRF, auth, messages, ...) would hand each
    hook to the request's thread and back; ours runs the chain synchronously with the view: one hop, plus the
    request_started signal's and the response's close."""
    app = PooledASGIHandler(idle_threads=1)
    counting = _CountingExecutor()
    app.executors.idle = [counting]
    served = _sequential(app, n=2)
    assert len({s["thread"] for s in served}) == 1
    assert counting.hops <= 2 * 3, counting.hops
    djangos = PooledASGIHandler(idle_threads=1)
    djangos.load_middleware(is_async=True)  # Django's async chain, for comparison
    djangos.get_response_async = ASGIHandler.get_response_async.__get__(djangos)
    counting = _CountingExecutor()
    djangos.executors.idle = [counting]
    _sequential(djangos, n=2)
    assert counting.hops >= 2 * 10, counting.hops
