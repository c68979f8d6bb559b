"""The ASGI handler lends each request a pooled thread: sequential requests reuse the thread and its
database connection (Django's own handler starts a thread, and opens a connection, per request), while
overlapping requests still get a thread each. With PostgreSQL's connection pool the pool keeps the connections
open instead: a request borrows one and opens none."""

import asyncio
import json

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
