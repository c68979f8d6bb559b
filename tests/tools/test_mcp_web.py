"""The MCP servers page through Django's client: add a stdio server from the form (its tools listed), inline
errors with nothing saved, run a tool (its output escaped), refresh, delete, and another owner's server is 404."""

import pytest
from django.conf import settings
from django.test import Client

from tests.tools.test_mcp import DEMO
from tools.mcp_client import manager
from tools.models import McpServer, Tool


@pytest.fixture(autouse=True)
def _connections_closed():
    yield
    manager().close_all()


def _add(web, name="demo"):
    return web.post(
        "/mcp-servers/new/",
        {
            "server_name": name,
            "mcp_server_type": "stdio",
            "command": settings.MCP_DEMO_PYTHON,
            "args": f"{DEMO}\nstdio",
            "env": "GREETING=<b>hi</b>",
        },
        HTTP_HX_REQUEST="true",
    )


def test_add_a_server_from_the_form_and_run_its_tool(web, account):
    resp = _add(web)
    assert resp.status_code == 200
    html = resp.content.decode()
    server = McpServer.objects.get(owner=account.org, server_name="demo")
    assert server.env == {"GREETING": "<b>hi</b>"} and server.args == [DEMO, "stdio"]
    assert 'data-tool="add"' in html and 'data-tool="read_env"' in html and "<b>hi</b>" not in html
    page = web.get("/mcp-servers/").content.decode()
    assert "demo" in page and "GREETING" in page and "&lt;b&gt;hi" not in page  # secret values never shown
    read_env = Tool.objects.get(mcp_server=server, name="read_env")
    assert f'id="{read_env.id}-arg-0" name="arg_name"' in page  # the typed form (tools.arg_form)
    out = web.post(f"/mcp-servers/{server.id}/tools/{read_env.id}/run/", {"arg_name": "GREETING"}).content.decode()
    assert "&lt;b&gt;hi&lt;/b&gt;" in out and "<b>hi</b>" not in out and "mcp-run-output" in out
    paths = Tool.objects.get(mcp_server=server, name="paths_visible")
    bad = web.post(f"/mcp-servers/{server.id}/tools/{paths.id}/run/", {"arg_paths": "[not json"}).content.decode()
    assert "not valid JSON" in bad
    missing = web.post(f"/mcp-servers/{server.id}/tools/{read_env.id}/run/", {"arg_name": ""}).content.decode()
    assert "name: required" in missing
    tools_page = web.get("/tools/")
    assert tools_page.status_code == 200 and "read_env" in tools_page.content.decode()
    assert f'href="?tool={read_env.id}"' in tools_page.content.decode()  # MCP tools open in the workbench too
    refreshed = web.post(f"/mcp-servers/{server.id}/refresh/").content.decode()
    assert "0 added" in refreshed
    assert web.post(f"/mcp-servers/{server.id}/delete/").status_code == 200
    assert not McpServer.objects.filter(pk=server.pk).exists()


def test_form_errors_come_back_inline_and_nothing_is_saved(web, account):
    resp = web.post(
        "/mcp-servers/new/", {"server_name": "x", "mcp_server_type": "stdio", "command": ""}, HTTP_HX_REQUEST="true"
    )
    assert resp.status_code == 200 and resp["HX-Retarget"] == "#mcp-form"
    assert "a command is required" in resp.content.decode()
    resp = web.post(
        "/mcp-servers/new/",
        {"server_name": "y", "mcp_server_type": "streamable_http", "server_url": "javascript:alert(1)"},
        HTTP_HX_REQUEST="true",
    )
    assert "an http(s) URL is required" in resp.content.decode()
    resp = web.post(
        "/mcp-servers/new/",
        {"server_name": "z", "mcp_server_type": "stdio", "command": "x", "env": "no equals sign"},
        HTTP_HX_REQUEST="true",
    )
    assert "NAME=value" in resp.content.decode()
    assert not McpServer.objects.exists()


def test_another_owners_server_is_not_found(web, account, other_account):
    _add(web)
    server = McpServer.objects.get()
    other = Client()
    other.force_login(other_account.user)
    assert other.post(f"/mcp-servers/{server.id}/refresh/").status_code == 404
    assert other.post(f"/mcp-servers/{server.id}/delete/").status_code == 404
    assert "demo" not in other.get("/mcp-servers/").content.decode()
    assert McpServer.objects.filter(pk=server.pk).exists()


def test_the_form_offers_only_what_the_operator_lets_this_account_register(web, account, settings):
    settings.MCP_STDIO, settings.TOOL_NETWORK = "all", "all"
    page = web.get("/mcp-servers/").content.decode()
    assert 'id="mcp-stdio-refusal"' not in page and 'id="mcp-network"' in page
    assert '<option value="stdio" selected>' in page  # stdio first when it may be used

    settings.MCP_STDIO, settings.TOOL_NETWORK = "staff", "off"  # the account has no staff user
    page = web.get("/mcp-servers/").content.decode()
    assert '<fieldset id="mcp-stdio" disabled>' in page and "only staff accounts may do here" in page
    assert '<option value="streamable_http" selected>' in page and 'id="mcp-network"' not in page
    assert 'id="mcp-network-off"' in page
    # a stdio server posted anyway is refused at the form, nothing saved, and the form keeps saying why
    resp = _add(web, name="sneaky")
    html = resp.content.decode()
    assert resp.status_code == 200 and "Not added" in html and 'id="mcp-stdio-refusal"' in html
    assert not McpServer.objects.filter(owner=account.org).exists()


def test_a_server_whose_tool_names_are_taken_is_refused_at_the_form(web, account):
    assert _add(web).status_code == 200
    resp = _add(web, name="twin")
    assert resp.status_code == 200 and resp["HX-Retarget"] == "#mcp-form"
    assert "offers tools whose names are taken" in resp.content.decode()
    assert not McpServer.objects.filter(owner=account.org, server_name="twin").exists()
