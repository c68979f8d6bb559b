"""MCP servers as tool sources, against a real MCP server (the SDK's FastMCP/MCPServer) over stdio — in the
local sandbox — and over streamable HTTP: register, list, attach, call from the agent loop and the workbench,
restart after death, sandbox rules, and the API's validation and write-only secrets."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from core.models import Step
from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import free_port, until
from tools.mcp_client import manager
from tools.models import McpServer, Tool, ToolRun

DEMO = settings.MCP_DEMO_SERVER  # in a directory approved for MCP servers (tests/settings.py)
STDIO = {"mcp_server_type": "stdio", "command": settings.MCP_DEMO_PYTHON, "args": [DEMO, "stdio"]}


@pytest.fixture(autouse=True)
def _connections_closed():
    yield
    manager().close_all()


@pytest.fixture
def loopback_allowed(settings):
    """The operator lets requests made for users reach this host's loopback (the tests' servers live there)."""
    settings.EGRESS_ALLOW = ["127.0.0.1"]


@pytest.fixture
def http_server(loopback_allowed):
    """The demo server over streamable HTTP on a free loopback port; its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, DEMO, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    try:
        until(listening, timeout=60, what="the MCP HTTP server")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def _register(api, name="demo", config=STDIO):
    resp = api.post("/v1/mcp-servers/", {"server_name": name, "config": config})
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_stdio_server_registers_and_its_tools_join_the_library(api, account):
    server = _register(api)
    assert server["mcp_server_type"] == "stdio" and server["last_error"] is None
    tools = api.get(f"/v1/mcp-servers/{server['id']}/tools").json()
    names = sorted(t["name"] for t in tools)
    assert names == [
        "add",
        "connect",
        "die",
        "fail",
        "fetch",
        "grow",
        "identity",
        "paths_visible",
        "read_env",
        "read_file",
    ]
    add = next(t for t in tools if t["name"] == "add")
    assert add["tool_type"] == "external_mcp"
    assert add["json_schema"]["parameters"]["required"] == ["a", "b"]
    assert add["json_schema"]["parameters"]["properties"]["a"]["type"] == "integer"
    library = {t["name"]: t["tool_type"] for t in api.get("/v1/tools/").json()}
    assert library["add"] == "external_mcp"
    # MCP tools belong to their server: the tools API cannot edit or delete them.
    assert api.patch(f"/v1/tools/{add['id']}", {"description": "x"}).status_code == 403


def test_workbench_run_calls_the_tool_and_records_server_and_latency(api, account):
    server = _register(api)
    resp = api.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": 40, "b": 2}})
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert body["status"] == "success" and body["func_return"] == "42" and body["mcp_server"] == "demo"
    run = ToolRun.objects.get(id=body["tool_run_id"])
    assert run.mcp_server == "demo" and run.sandbox == "mcp" and run.duration_ms > 0 and run.origin == "workbench"
    failed = api.post(f"/v1/mcp-servers/{server['id']}/tools/fail/run", {"args": {"message": "boom"}}).json()
    assert failed["status"] == "error" and "fail" in failed["func_return"]
    bad = api.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": "x"}})
    assert bad.status_code == 422 and "a" in json.dumps(bad.json())
    assert ToolRun.objects.filter(tool_name="add").count() == 1


def test_a_server_that_dies_is_started_again(api, account):
    server = _register(api)
    first = manager().starts.get(server["id"], 0)
    assert api.post(f"/v1/mcp-servers/{server['id']}/tools/die/run", {"args": {}}).json()["func_return"] == "bye"
    answers = []

    def call_until_restarted():
        # The process exits shortly after answering; calls keep succeeding, and one of them restarts it.
        answers.append(api.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": 1, "b": 1}}).json())
        return manager().starts[server["id"]] > first

    until(call_until_restarted, timeout=60, interval=0.1, what="the dead server to be started again")
    assert all(a["status"] == "success" and a["func_return"] == "2" for a in answers)


def test_stdio_server_cannot_reach_the_network_or_read_the_servers_environment_or_files(api, account, monkeypatch):
    monkeypatch.setenv("AIDE_TEST_SERVER_SECRET", "do-not-leak")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        server = _register(api, config={**STDIO, "env": {"GIVEN": "yes"}})
        run = lambda tool, args: api.post(f"/v1/mcp-servers/{server['id']}/tools/{tool}/run", {"args": args}).json()
        assert run("read_env", {"name": "AIDE_TEST_SERVER_SECRET"})["func_return"] == "MISSING"
        assert run("read_env", {"name": "GIVEN"})["func_return"] == "yes"
        assert run("connect", {"port": port})["func_return"].startswith("refused")
        settings_file = str(Path(__file__).parents[2] / "agents_ide" / "settings.py")
        assert open(settings_file).read(10)  # the server itself can read it
        assert run("read_file", {"path": settings_file})["func_return"].startswith("unreadable")
        assert run("read_file", {"path": DEMO})["func_return"].startswith('"""A real MCP server')
    finally:
        listener.close()


def test_secrets_are_write_only_and_bad_configs_are_refused(api, account, loopback_allowed):
    server = _register(api, config={**STDIO, "env": {"API_KEY": "s3cret"}})
    assert server["env"] == {"API_KEY": None}
    assert "s3cret" not in json.dumps(api.get(f"/v1/mcp-servers/{server['id']}").json())
    assert "s3cret" not in json.dumps(api.get("/v1/mcp-servers/").json())
    http = _register(
        api,
        "remote",
        {
            "mcp_server_type": "streamable_http",
            "server_url": "http://127.0.0.1:9/mcp",
            "auth_header": "Authorization",
            "auth_token": "Bearer zq-9-secret",
            "custom_headers": {"X-Key": "hdr-secret"},
        },
    )
    text = json.dumps(http)
    assert "zq-9-secret" not in text and "hdr-secret" not in text and http["auth_token_set"] is True
    assert http["last_error"]  # nothing listens there: kept, with the reason
    for config in (
        {"mcp_server_type": "stdio", "command": ""},
        {"mcp_server_type": "sse", "server_url": "ftp://x"},
        {"mcp_server_type": "nope"},
        {"mcp_server_type": "stdio", "command": "x", "env": {"1BAD": "v"}},
        {"mcp_server_type": "stdio", "command": "x", "allow_network": "yes"},
        {"mcp_server_type": "stdio", "command": "x", "args": "not a list"},
    ):
        before = McpServer.objects.count()
        resp = api.post("/v1/mcp-servers/", {"server_name": "bad", "config": config})
        assert resp.status_code == 422, config
        assert McpServer.objects.count() == before
    assert api.post("/v1/mcp-servers/", {"server_name": "demo", "config": STDIO}).status_code == 409
    assert api.post("/v1/mcp-servers/", {"server_name": "has space", "config": STDIO}).status_code == 422


def test_other_owners_servers_are_not_found(api, account, other_account):
    from tests.factories import ApiClient

    server = _register(api)
    other = ApiClient(other_account.token)
    assert other.get(f"/v1/mcp-servers/{server['id']}").status_code == 404
    assert other.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": 1, "b": 2}}).status_code == 404
    assert other.get("/v1/mcp-servers/").json() == []


def test_streamable_http_server_over_the_sdk_transport(api, account, http_server):
    server = _register(api, "remote", {"mcp_server_type": "streamable_http", "server_url": http_server})
    assert server["last_error"] is None
    names = {t["name"] for t in api.get(f"/v1/mcp-servers/{server['id']}/tools").json()}
    assert {"add", "read_env"} <= names
    body = api.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": 2, "b": 5}}).json()
    assert body["status"] == "success" and body["func_return"] == "7"


def test_the_agent_calls_an_mcp_tool_through_the_fake_model(api, account, fake_llm):
    server = _register(api)
    agent = make_agent(account.org)
    add = Tool.objects.get(mcp_server_id=server["id"], name="add")
    assert api.patch(f"/v1/agents/{agent.id}/tools/attach/{add.id}").status_code == 200
    fake_llm.script(
        FakeLLM.tool("add", {"a": 20, "b": 22}, heartbeat=True), FakeLLM.tool("send_message", {"message": "It is 42."})
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "20+22?"}])
    assert result.status == "completed"
    sent_tools = {t["function"]["name"] for t in fake_llm.chat_requests[0]["tools"]}
    assert "add" in sent_tools
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message" and m["name"] == "add"][0]
    assert ret["status"] == "success" and ret["tool_return"] == "42"
    run = ToolRun.objects.get(agent_id=agent.id, tool_name="add")
    assert run.origin == "agent" and run.mcp_server == "demo" and run.step_id
    assert Step.objects.filter(id=run.step_id, run_id=result.run_id).exists()


def test_refresh_on_demand_and_when_the_server_says_tools_changed(api, account, transactional_db):
    server = _register(api)
    api.post(f"/v1/mcp-servers/{server['id']}/tools/grow/run", {"args": {}})
    until(
        lambda: Tool.objects.filter(mcp_server_id=server["id"], name="shout").exists(),
        timeout=30,
        what="the tools/list_changed refresh",
    )
    report = api.patch(f"/v1/mcp-servers/{server['id']}/refresh").json()
    assert report["added"] == [] and report["removed"] == []


def test_update_and_delete(api, account):
    server = _register(api)
    updated = api.patch(
        f"/v1/mcp-servers/{server['id']}", {"server_name": "renamed", "config": {**STDIO, "env": {"A": "1"}}}
    ).json()
    assert updated["server_name"] == "renamed" and updated["env"] == {"A": None}
    agent = make_agent(account.org)
    add = Tool.objects.get(mcp_server_id=server["id"], name="add")
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{add.id}")
    assert api.delete(f"/v1/mcp-servers/{server['id']}").status_code == 204
    assert not Tool.objects.filter(mcp_server_id=server["id"]).exists()
    assert api.get(f"/v1/agents/{agent.id}/tools").status_code == 200
    assert "add" not in [t["name"] for t in api.get(f"/v1/agents/{agent.id}/tools").json()]
    assert api.get(f"/v1/mcp-servers/{server['id']}").status_code == 404


def test_an_error_answer_is_a_failed_call_not_a_restart(api, account):
    from tools.mcp_services import server_spec

    server = McpServer.objects.get(id=_register(api)["id"])
    spec = server_spec(server)
    starts = manager().starts[server.id]
    assert manager().call_tool(spec, "no_such_tool", {}).is_error
    assert manager().call_tool(spec, "add", {"a": 1, "b": 2}).content[0].text == "3"
    assert manager().starts[server.id] == starts


def test_a_server_that_cannot_start_is_kept_with_its_stderr_as_the_error(api, account):
    crash = "import sys; sys.exit('boom: no configuration')"
    server = _register(api, "broken", {"mcp_server_type": "stdio", "command": "python3", "args": ["-c", crash]})
    assert "boom: no configuration" in server["last_error"]
    assert api.get(f"/v1/mcp-servers/{server['id']}/tools").json() == []
    refresh = api.patch(f"/v1/mcp-servers/{server['id']}/refresh")
    assert refresh.status_code == 422 and "boom: no configuration" in refresh.json()["detail"]
    missing = _register(api, "missing", {"mcp_server_type": "stdio", "command": "definitely-not-a-command"})
    assert "command not found: 'definitely-not-a-command'" in missing["last_error"]


def test_a_tool_name_another_tool_holds_is_an_error_the_person_sees(api, account):
    """A tool name is unique in an account: a second server offering `add` is refused (409 naming the holder,
    nothing kept) instead of being kept with its tools silently left out; a refresh that meets one says so on the
    server (`last_error`, shown by the API and the IDE) and in its report."""
    first = _register(api)
    resp = api.post("/v1/mcp-servers/", {"server_name": "twin", "config": STDIO})
    assert resp.status_code == 409, resp.content
    message = resp.json()["detail"]
    assert "'add' (a tool of MCP server 'demo')" in message and "twin" in message
    assert not McpServer.objects.filter(owner=account.org, server_name="twin").exists()
    assert Tool.objects.filter(owner=account.org, name="add").get().mcp_server_id == first["id"]
    # the library lost `add` (an older version let MCP rows go) and a custom tool took the name
    Tool.objects.filter(owner=account.org, name="add").delete()
    custom = 'def add(a: int, b: int) -> int:\n    """Add.\n\n    Args:\n        a: one\n        b: two\n    """\n'
    assert api.post("/v1/tools/", {"source_code": custom + "    return a + b\n"}).status_code == 201
    report = api.patch(f"/v1/mcp-servers/{first['id']}/refresh").json()
    assert report["skipped"] == [{"name": "add", "reason": "the name is taken by a custom tool"}]
    assert "'add' (a custom tool)" in api.get(f"/v1/mcp-servers/{first['id']}").json()["last_error"]
