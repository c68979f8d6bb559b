"""Agent files keep MCP tool references: export writes Letta's `mcp_servers` section (no secrets) and tools of type
external_mcp naming their server; import creates the servers to configure and attaches the tools, which run once
the server has its secrets."""

import json

import pytest
from django.conf import settings

from core.agents.agentfile.checks import AgentFileError
from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.errors import Forbidden
from tests.factories import ApiClient, make_agent
from tests.tools.test_mcp import DEMO
from tools import mcp_services
from tools.mcp_client import manager
from tools.models import McpServer, Tool
from tools.selectors import agent_tools


@pytest.fixture(autouse=True)
def _connections_closed():
    yield
    manager().close_all()


def test_export_then_import_into_another_account_keeps_the_mcp_tool(api, account, other_account):
    server = mcp_services.mcp_server_create(
        owner=account.org,
        server_name="demo",
        config={
            "mcp_server_type": "stdio",
            "command": settings.MCP_DEMO_PYTHON,
            "args": [DEMO, "stdio"],
            "env": {"GREETING": "s3cret"},
        },
    )
    agent = make_agent(account.org)
    add = Tool.objects.get(mcp_server=server, name="read_env")
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{add.id}")
    data = agentfile_export(agent=agent)
    assert "s3cret" not in json.dumps(data)
    [entry] = data["mcp_servers"]
    assert entry["server_name"] == "demo" and entry["stdio_config"]["env"] == {"GREETING": ""}
    exported = next(t for t in data["tools"] if t["name"] == "read_env")
    assert exported["tool_type"] == "external_mcp" and exported["metadata_"] == {"mcp": {"server_name": "demo"}}

    result = agentfile_import(
        owner=other_account.org, parsed=parse_agent_file(json.dumps(data).encode()), options=ImportOptions()
    )
    imported = McpServer.objects.get(owner=other_account.org, server_name="demo")
    assert imported.args == [DEMO, "stdio"] and imported.env == {"GREETING": ""}
    assert any("set its secrets" in w for w in result.warnings)
    tools = {t.name: t for t in agent_tools(agent=result_agent(result))}
    assert tools["read_env"].tool_type == "external_mcp" and tools["read_env"].mcp_server_id == imported.id
    # Configured with its secret, the server runs the imported tool.
    other = ApiClient(other_account.token)
    other.patch(f"/v1/mcp-servers/{imported.id}", {"config": {"env": {"GREETING": "theirs"}}})
    body = other.post(f"/v1/mcp-servers/{imported.id}/tools/read_env/run", {"args": {"name": "GREETING"}}).json()
    assert body["status"] == "success" and body["func_return"] == "theirs"


def result_agent(result):
    from core.models import Agent

    return Agent.objects.get(id=result.agent_ids[0])


def test_an_mcp_tool_whose_server_is_missing_is_left_out_with_a_warning(account):
    from tests.core.agentfile_docs import v2_doc

    doc = v2_doc()
    doc["tools"].append(
        {
            "id": "tool-mcp",
            "tool_type": "external_mcp",
            "name": "lookup",
            "json_schema": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
            "metadata_": {"mcp": {"server_name": "elsewhere"}},
        }
    )
    doc["agents"][0]["tool_ids"].append("tool-mcp")
    result = agentfile_import(
        owner=account.org, parsed=parse_agent_file(json.dumps(doc).encode()), options=ImportOptions()
    )
    assert any("'elsewhere'" in w for w in result.warnings)
    assert "lookup" not in {t.name for t in agent_tools(agent=result_agent(result))}
    bad = {**doc, "mcp_servers": [{"server_name": "x", "server_type": "carrier-pigeon"}]}
    with pytest.raises(AgentFileError):
        parse_agent_file(json.dumps(bad).encode())
    assert not McpServer.objects.exists()


def _with_servers(*servers) -> bytes:
    from tests.core.agentfile_docs import v2_doc

    return json.dumps({**v2_doc(), "mcp_servers": list(servers)}).encode()


def _nothing_stored(owner) -> bool:
    from core.models import Agent

    return not McpServer.objects.filter(owner=owner).exists() and not Agent.objects.filter(owner=owner).exists()


@pytest.mark.parametrize(
    ("server", "status", "why"),
    [
        # MCP_STDIO=staff: an ordinary account may not register a stdio server, nor bring one in a file
        (
            {"server_name": "shell", "server_type": "stdio", "stdio_config": {"command": "sh", "args": ["-c", "id"]}},
            403,
            "stdio MCP servers",
        ),
        # the egress guard refuses this host's addresses to a registration, and so to an import
        (
            {"server_name": "inside", "server_type": "streamable_http", "server_url": "http://127.0.0.1:9/mcp"},
            422,
            "server_url",
        ),
        ({"server_name": "blank", "server_type": "stdio", "stdio_config": {"args": []}}, 422, "a command is required"),
        (
            {"server_name": "bad name!", "server_type": "sse", "server_url": "https://example.com/sse"},
            422,
            "server_name",
        ),
    ],
)
def test_an_agent_files_mcp_server_passes_a_registrations_checks_or_nothing_is_imported(
    api, account, settings, server, status, why
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MCP_STDIO = "staff"
    data = _with_servers(server)
    registered = api.post("/v1/mcp-servers/", {"server_name": server["server_name"], "config": _config(server)})
    assert registered.status_code == status  # the same refusal as registering it
    for route in ("/v1/agents/import", "/v1/agents/import/preview"):
        r = api.client.post(route, {"file": SimpleUploadedFile("a.af", data)})
        assert r.status_code == status, r.content
        message = r.json()["detail"] if isinstance(r.json().get("detail"), str) else r.content.decode()
        assert f"MCP server '{server['server_name']}' in the agent file is refused" in message and why in message
    assert _nothing_stored(account.org)


def _config(server: dict) -> dict:
    if server["server_type"] == "stdio":
        return {"mcp_server_type": "stdio", **server["stdio_config"]}
    return {"mcp_server_type": server["server_type"], "server_url": server["server_url"]}


def test_a_server_the_account_has_already_is_kept_and_one_refused_stops_the_import_before_any_write(account, settings):
    settings.MCP_STDIO = "staff"
    ok = {"server_name": "public", "server_type": "sse", "server_url": "https://mcp.example.com/sse"}
    shell = {"server_name": "shell", "server_type": "stdio", "stdio_config": {"command": "sh"}}
    with pytest.raises(Forbidden, match="MCP server 'shell' in the agent file is refused"):  # after `public` passed
        agentfile_import(owner=account.org, parsed=parse_agent_file(_with_servers(ok, shell)))
    assert _nothing_stored(account.org)
    result = agentfile_import(owner=account.org, parsed=parse_agent_file(_with_servers(ok)))
    assert McpServer.objects.get(owner=account.org).server_url == "https://mcp.example.com/sse"
    assert any("'public' was added from the file" in w for w in result.warnings)
