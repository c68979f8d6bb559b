"""The first-run redirect also works on the ASGI (async) path the server uses, and leaves the API alone."""

import asyncio

import pytest
from asgiref.testing import ApplicationCommunicator

from agents_ide.http import http_application

pytestmark = pytest.mark.django_db(transaction=True)


def _get(path: str) -> dict:
    async def go():
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1")],
            "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 1234),
        }
        comm = ApplicationCommunicator(http_application(), scope)
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(10)
        await comm.wait(10)
        return start

    return asyncio.run(go())


def test_pages_redirect_to_setup_until_an_account_exists():
    start = _get("/")
    assert start["status"] == 302 and dict(start["headers"])[b"Location"] == b"/setup/"
    assert _get("/v1/agents/")["status"] == 401  # the API answers for itself: no redirect


def test_pages_are_served_once_an_account_exists(account):
    assert dict(_get("/")["headers"]).get(b"Location") != b"/setup/"
