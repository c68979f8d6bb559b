"""The first-run redirect also works on the ASGI (async) path the server uses, and leaves the API alone; the setup
form asks for the one-time setup token when the server may be reached beyond loopback: its settings say so (HOST,
PUBLIC_BASE_URL) or a request arrives at an address other than loopback."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator

from agents_ide.http import http_application

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _get(path: str, server: tuple[str, int] = ("127.0.0.1", 80)) -> dict:
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
            "server": server,
            "client": ("127.0.0.1", 1234),
        }
        comm = ApplicationCommunicator(http_application(), scope)
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(10)
        body = b""
        while (part := await comm.receive_output(10)).get("more_body"):
            body += part.get("body", b"")
        await comm.wait(10)
        return {**start, "body": body + part.get("body", b"")}

    return asyncio.run(go())


def test_pages_redirect_to_setup_until_an_account_exists():
    start = _get("/")
    assert start["status"] == 302 and dict(start["headers"])[b"Location"] == b"/setup/"
    assert _get("/v1/agents/")["status"] == 401  # the API answers for itself: no redirect


def test_pages_are_served_once_an_account_exists(account):
    assert dict(_get("/")["headers"]).get(b"Location") != b"/setup/"


def test_a_request_arriving_beyond_loopback_is_asked_for_the_setup_token(settings, capfd):
    settings.SETUP_TOKEN_REQUIRED = False  # say, daphne -b 0.0.0.0 started by hand: no HOST to read
    assert b'name="setup_token"' not in _get("/setup/")["body"]
    assert b'name="setup_token"' in _get("/setup/", server=("10.0.0.7", 8000))["body"]
    from core.accounts import setup_token_get

    assert setup_token_get() in capfd.readouterr().err  # printed on the console when that page was asked for


def _required(**env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "PUBLIC_BASE_URL")}
    out = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.SETUP_TOKEN_REQUIRED)"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "tests.settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("env", "required"),
    [
        ({}, "False"),  # scripts/serve's default bind, 127.0.0.1
        ({"HOST": "127.0.0.1"}, "False"),
        ({"HOST": "::1", "PUBLIC_BASE_URL": "http://localhost:8000"}, "False"),
        ({"HOST": "0.0.0.0"}, "True"),  # the Docker image's bind
        ({"HOST": "::"}, "True"),
        ({"HOST": "10.1.2.3"}, "True"),
        ({"HOST": "127.0.0.1", "PUBLIC_BASE_URL": "https://ide.example.org"}, "True"),  # behind a reverse proxy
    ],
)
def test_the_setup_token_is_required_when_the_bind_or_public_url_is_beyond_loopback(env, required):
    assert _required(**env) == required
