"""agents_ide_websocket_connections counts the IDE's open websockets; a refused one is never counted."""

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from prometheus_client import REGISTRY

from tests.factories import make_agent
from tests.helpers import agent_socket

pytestmark = pytest.mark.django_db(transaction=True)


def _open() -> float:
    return REGISTRY.get_sample_value("agents_ide_websocket_connections")


async def test_open_websockets_are_counted(account, other_account):
    from channels.routing import URLRouter

    from agents_ide.routing import websocket_urlpatterns

    agent = await database_sync_to_async(make_agent)(account.org)
    before = _open()
    a, b = await agent_socket(account.user, agent.id), await agent_socket(account.user, agent.id)
    assert _open() - before == 2
    await a.disconnect()
    assert _open() - before == 1
    refused = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/agents/{agent.id}/")
    refused.scope["user"] = other_account.user  # another owner's agent: closed before it is accepted
    connected, _ = await refused.connect()
    assert not connected and _open() - before == 1
    await b.disconnect()
    assert _open() == before
