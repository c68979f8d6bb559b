"""REST endpoints for MCP servers (`/v1/mcp-servers/…`, the routes of letta-client's `mcp_servers`)."""

from typing import Any

from ninja import Router, Schema
from pydantic import Field

from core.agents.presenters import tool_out
from core.api.common import owner
from core.errors import NotFound
from tools import mcp_services, presenters
from tools.models import McpServer, Tool
from tools.schemas import McpRefreshOut, McpServerOut, ToolExecutionResultOut, ToolOut

router = Router(tags=["mcp-servers"])


class McpServerIn(Schema):
    server_name: str = Field(max_length=64)
    config: dict[str, Any] = Field(
        description="Letta's stdio ({command, args, env}), sse or streamable_http "
        "({server_url, auth_header, auth_token, custom_headers}) config; "
        "stdio may add allow_network."
    )


class McpServerUpdateIn(Schema):
    server_name: str | None = Field(None, max_length=64)
    config: dict[str, Any] | None = None


class McpToolRunIn(Schema):
    args: dict[str, Any] = {}


def _server(request, mcp_server_id: str) -> McpServer:
    server = McpServer.objects.filter(owner=owner(request), pk=mcp_server_id).first()
    if server is None:
        raise NotFound(f"MCP server '{mcp_server_id}' not found")
    return server


def _tool(server: McpServer, tool_id: str) -> Tool:
    tool = server.tools.filter(pk=tool_id).first() or server.tools.filter(mcp_tool_name=tool_id).first()
    if tool is None:
        raise NotFound(f"MCP server '{server.server_name}' has no tool '{tool_id}'")
    return tool


@router.get("/mcp-servers/", response=list[McpServerOut], exclude_unset=True)
def mcp_servers_list(request):
    return [
        presenters.mcp_server_out(s) for s in McpServer.objects.filter(owner=owner(request)).order_by("server_name")
    ]


@router.post("/mcp-servers/", response=McpServerOut, exclude_unset=True)
def mcp_server_create(request, body: McpServerIn):
    server = mcp_services.mcp_server_create(owner=owner(request), server_name=body.server_name, config=body.config)
    return presenters.mcp_server_out(server)


@router.get("/mcp-servers/{mcp_server_id}", response=McpServerOut, exclude_unset=True)
def mcp_server_retrieve(request, mcp_server_id: str):
    return presenters.mcp_server_out(_server(request, mcp_server_id))


@router.patch("/mcp-servers/{mcp_server_id}", response=McpServerOut, exclude_unset=True)
def mcp_server_update(request, mcp_server_id: str, body: McpServerUpdateIn):
    server = mcp_services.mcp_server_update(
        server=_server(request, mcp_server_id), server_name=body.server_name, config=body.config
    )
    return presenters.mcp_server_out(server)


@router.delete("/mcp-servers/{mcp_server_id}", response={204: None})
def mcp_server_delete(request, mcp_server_id: str):
    mcp_services.mcp_server_delete(server=_server(request, mcp_server_id))
    return 204, None


@router.patch("/mcp-servers/{mcp_server_id}/refresh", response=McpRefreshOut)
def mcp_server_refresh(request, mcp_server_id: str, agent_id: str | None = None):
    report = mcp_services.mcp_tools_refresh(server=_server(request, mcp_server_id))
    return {"mcp_server_id": mcp_server_id, **report}


@router.get("/mcp-servers/{mcp_server_id}/tools", response=list[ToolOut])
def mcp_server_tools(request, mcp_server_id: str):
    return [tool_out(t) for t in _server(request, mcp_server_id).tools.order_by("name")]


@router.get("/mcp-servers/{mcp_server_id}/tools/{tool_id}", response=ToolOut)
def mcp_server_tool(request, mcp_server_id: str, tool_id: str):
    return tool_out(_tool(_server(request, mcp_server_id), tool_id))


@router.post("/mcp-servers/{mcp_server_id}/tools/{tool_id}/run", response=ToolExecutionResultOut)
def mcp_server_tool_run(request, mcp_server_id: str, tool_id: str, body: McpToolRunIn):
    run = mcp_services.mcp_tool_execute(tool=_tool(_server(request, mcp_server_id), tool_id), args=body.args)
    return presenters.tool_execution_result(run)
