"""Django's ASGI handler with pooled request threads (agents_ide.http): sequential requests reuse the thread and its
database connection (Django's handler alone starts a thread, and opens a connection, per request), while
overlapping requests still get a thread each. With PostgreSQL's connection pool the pool keeps the connections
open instead: a request borrows one and opens none. Disconnects, signals and streaming are Django's handler's."""

import asyncio
import json
import threading

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler

from agents_ide.http import RequestExecutor, http_application
from tests.infra import threadinfo_urls

pytestmark = [pytest.mark.urls("tests.infra.threadinfo_urls"), pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _an_account_exists(account):
    """Past the first-run form (which would redirect every page to /setup)."""


def _scope(path: str = "/whoami", query: str = "") -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
    }


async def _get(app, query: str = "") -> dict:
    comm = ApplicationCommunicator(app, _scope(query=query))
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
    served = _sequential(http_application())
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
    app = http_application(idle_threads=1)

    async def go():
        return await asyncio.gather(*[_get(app, "sleep=0.2") for _ in range(3)])

    served = asyncio.run(go())
    assert len({s["thread"] for s in served}) == 3
    assert len(app.executors.idle) == 1


class _CountingExecutor(RequestExecutor):
    def __init__(self):
        super().__init__()
        self.hops = 0

    def submit(self, *args, **kwargs):
        self.hops += 1
        return super().submit(*args, **kwargs)


def _hops(app, n=2) -> int:
    """Calls handed to the request's thread for `n` sequential requests."""
    counting = _CountingExecutor()
    app.executors.idle = [counting]
    served = _sequential(app, n=n)
    assert len({s["thread"] for s in served}) == 1
    return counting.hops


def test_the_middleware_chain_runs_on_the_requests_thread_in_one_pass(settings):
    """With a sync-only middleware last (agents_ide.middleware.SyncChain), Django runs the whole chain synchronously
    on the request's thread; only request_started's receivers and the response's close take a hop of their own. An
    async chain of Django's middleware (sessions, CSRF, auth, messages, ...) hands each hook to the thread and back."""
    assert _hops(http_application(idle_threads=1)) == 2 * 3
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "agents_ide.middleware.SyncChain"]
    assert _hops(http_application(idle_threads=1)) >= 2 * 10


@pytest.fixture
def signalled():
    """(signal name, thread) for each request_started and request_finished sent while the test runs."""
    from django.core import signals

    seen = []

    def started(**kwargs):
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs):
        seen.append(("finished", threading.get_ident()))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    yield seen
    signals.request_started.disconnect(started)
    signals.request_finished.disconnect(finished)


def test_a_requests_signals_are_sent_once_each_on_its_thread(signalled):
    _sequential(http_application(), n=2)
    assert [name for name, _ in signalled] == ["started", "finished", "started", "finished"]
    assert threading.get_ident() not in {thread for _, thread in signalled}  # not on the event loop's thread


def _streamed(app, query: str, leave_after: int | None = None):
    """A GET of the streamed view: the body parts received, and the view's own record of what it did."""
    threadinfo_urls.stream_events.clear()

    async def go():
        comm = ApplicationCommunicator(app, _scope("/stream", query))
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        assert (await comm.receive_output(10))["status"] == 200
        parts = []
        while True:
            message = await comm.receive_output(10)
            if message.get("body"):
                parts.append(message["body"].decode())
            if leave_after is not None and len(parts) == leave_after:
                await comm.send_input({"type": "http.disconnect"})
                break
            if not message.get("more_body"):
                break
        await comm.wait(10)
        return parts

    return asyncio.run(go()), list(threadinfo_urls.stream_events)


def test_a_streamed_response_is_sent_whole_then_closed(signalled):
    parts, events = _streamed(http_application(), "wait=0")
    assert "".join(parts) == "part 0;part 1;part 2;"
    assert events == ["part 0", "part 1", "part 2", "closed"]
    assert [name for name, _ in signalled] == ["started", "finished"]


def test_a_client_leaving_a_stream_stops_it_and_the_response_is_closed(signalled):
    parts, events = _streamed(http_application(), "wait=30", leave_after=2)
    assert parts == ["part 0;", "part 1;"]
    assert events == ["part 0", "part 1", "closed"]  # the third part never came: the generator was stopped
    assert [name for name, _ in signalled] == ["started", "finished"]


def test_a_request_django_cannot_read_is_answered_400_in_the_same_hop(signalled):
    """A query string that is not UTF-8: Django's request object refuses it; the error response is sent and
    closed."""
    scope = {**_scope(), "query_string": b"\xff"}

    async def go():
        comm = ApplicationCommunicator(http_application(), scope)
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(10)
        await comm.receive_output(10)
        await comm.wait(10)
        return start["status"]

    assert asyncio.run(go()) == 400
    assert [name for name, _ in signalled] == ["started", "finished"]
