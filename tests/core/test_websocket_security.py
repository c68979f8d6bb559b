"""The agent websocket checks the full origin (scheme, host and port) and lives only as long as its session."""

import pytest
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from agents_ide.routing import websocket_urlpatterns
from agents_ide.security import FullOriginValidator
from core.web.consumers import SESSION_ENDED
from tests.factories import make_agent

pytestmark = pytest.mark.django_db(transaction=True)
# The stack agents_ide/asgi.py serves websockets with.
APP = FullOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
HOST = "127.0.0.1:8000"


def _session(account) -> tuple[Client, str]:
    client = Client()
    client.force_login(account.user)
    return client, client.cookies[settings.SESSION_COOKIE_NAME].value


def _socket(agent_id: str, session_key: str, origin: str | None = f"http://{HOST}", host: str = HOST):
    headers = [(b"host", host.encode()), (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session_key}".encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return WebsocketCommunicator(APP, f"/ws/agents/{agent_id}/", headers=headers)


async def _setup(account):
    agent = await database_sync_to_async(make_agent)(account.org)
    client, key = await database_sync_to_async(_session)(account)
    return agent, client, key


def test_the_asgi_application_uses_the_full_origin_check():
    source = (settings.BASE_DIR / "agents_ide" / "asgi.py").read_text()
    assert "FullOriginValidator(AuthMiddlewareStack(" in source and "AllowedHostsOriginValidator(" not in source


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:9999",  # same host, another port: another site
        "http://127.0.0.1",  # same host, default port
        "https://127.0.0.1:8000",  # another scheme
        "http://evil.example:8000",  # another host
        "null",
        None,  # no Origin at all
        "http://127.0.0.1:8000/path",
    ],
)
async def test_other_origins_are_refused(account, origin):
    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key, origin=origin)
    connected, _ = await comm.connect()
    assert not connected


async def test_the_pages_own_origin_and_trusted_origins_are_accepted(account, settings):
    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key)
    connected, _ = await comm.connect()
    assert connected
    await comm.disconnect()
    settings.CSRF_TRUSTED_ORIGINS = ["https://ide.example.org"]
    comm = _socket(agent.id, key, origin="https://ide.example.org")
    connected, _ = await comm.connect()
    assert connected
    await comm.disconnect()


async def test_a_host_outside_allowed_hosts_is_refused_even_with_a_matching_origin(account):
    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key, origin="http://evil.example:8000", host="evil.example:8000")
    connected, _ = await comm.connect()
    assert not connected


async def test_tls_proxy_origin_is_accepted_only_when_the_proxy_header_is_trusted(account, settings):
    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key, origin=f"https://{HOST}")
    comm.scope["headers"].append((b"x-forwarded-proto", b"https"))
    connected, _ = await comm.connect()
    assert not connected
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    comm = _socket(agent.id, key, origin=f"https://{HOST}")
    comm.scope["headers"].append((b"x-forwarded-proto", b"https"))
    connected, _ = await comm.connect()
    assert connected
    await comm.disconnect()


async def test_without_a_session_the_socket_is_refused(account):
    agent, _, _ = await _setup(account)
    comm = _socket(agent.id, "not-a-session")
    connected, code = await comm.connect()
    assert not connected and code == 4404


async def test_logout_closes_open_sockets_of_that_session_only(account):
    agent, client, key = await _setup(account)
    _, other_key = await database_sync_to_async(_session)(account)  # the same user in another browser
    mine, theirs = _socket(agent.id, key), _socket(agent.id, other_key)
    assert (await mine.connect())[0] and (await theirs.connect())[0]
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    closed = await mine.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": SESSION_ENDED}
    assert await theirs.receive_nothing(timeout=0.3)
    await theirs.disconnect()


async def test_a_message_after_the_session_ended_is_refused(account):
    from django.contrib.sessions.models import Session

    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key)
    assert (await comm.connect())[0]
    await database_sync_to_async(Session.objects.filter(session_key=key).delete)()  # ended without a logout request
    await comm.send_json_to({"type": "user_message", "text": "hi"})
    closed = await comm.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": SESSION_ENDED}
    from core.models import Run

    assert not await database_sync_to_async(Run.objects.exists)()


async def test_unstorable_text_from_a_tab_is_an_error_message(account):
    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key)
    assert (await comm.connect())[0]
    await comm.send_to(text_data='{"type": "user_message", "text": "a\\u0000b"}')
    reply = await comm.receive_json_from(timeout=5)
    assert reply["message_type"] == "error_message" and "NUL" in reply["message"]
    await comm.send_to(text_data='{"type": "user_message", "text": "\\ud800"}')
    reply = await comm.receive_json_from(timeout=5)
    assert reply["message_type"] == "error_message" and "surrogate" in reply["message"]
    await comm.disconnect()
