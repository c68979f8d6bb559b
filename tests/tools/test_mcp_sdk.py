"""letta-client's `mcp_servers` against our /v1/mcp-servers, with a real stdio MCP server."""

import letta_client
import pytest
from django.conf import settings

from tests.tools.test_mcp import DEMO
from tests.tools.test_sdk import client  # noqa: F401  (the SDK client fixture)
from tools.mcp_client import manager


@pytest.fixture(autouse=True)
def _connections_closed():
    yield
    manager().close_all()


def test_sdk_mcp_servers_create_list_retrieve_tools_run_update_refresh_delete(client):  # noqa: F811
    created = client.mcp_servers.create(
        server_name="demo",
        config={
            "mcp_server_type": "stdio",
            "command": settings.MCP_DEMO_PYTHON,
            "args": [DEMO, "stdio"],
            "env": {"TOKEN": "hidden"},
        },
    )
    assert created.server_name == "demo" and created.mcp_server_type == "stdio" and created.id.startswith("mcp_server-")
    assert [s.id for s in client.mcp_servers.list()] == [created.id]
    got = client.mcp_servers.retrieve(created.id)
    assert got.command == settings.MCP_DEMO_PYTHON and got.env == {"TOKEN": None}
    tools = client.mcp_servers.tools.list(created.id)
    add = next(t for t in tools if t.name == "add")
    assert add.tool_type == "external_mcp" and add.json_schema["parameters"]["required"] == ["a", "b"]
    assert client.mcp_servers.tools.retrieve(add.id, mcp_server_id=created.id).name == "add"
    result = client.mcp_servers.tools.run(add.id, mcp_server_id=created.id, args={"a": 3, "b": 4})
    assert result.status == "success" and result.func_return == "7"
    updated = client.mcp_servers.update(
        created.id,
        server_name="demo2",
        config={"mcp_server_type": "stdio", "command": settings.MCP_DEMO_PYTHON, "args": [DEMO, "stdio"]},
    )
    assert updated.server_name == "demo2"
    client.mcp_servers.refresh(created.id)
    client.mcp_servers.delete(created.id)
    with pytest.raises(letta_client.NotFoundError):
        client.mcp_servers.retrieve(created.id)
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.mcp_servers.create(server_name="bad", config={"mcp_server_type": "stdio", "command": ""})
