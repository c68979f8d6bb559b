"""Wire shapes of tools, their runs (Letta's `tool_return_message` and `ToolExecutionResult`, plus our extras) and
MCP servers."""

from core.engine.base_tools import LETTA_TYPE_OF_BASE
from tools.models import ToolRun


def letta_tool_type(tool) -> str:
    """Letta's tool_type for one of ours (the web tools, say, are stored as base rows; Letta calls them
    letta_builtin)."""
    if tool.tool_type == "base" and tool.name in LETTA_TYPE_OF_BASE:
        return LETTA_TYPE_OF_BASE[tool.name]
    return {"base": "letta_core", "multi_agent": "letta_multi_agent_core", "external_mcp": "external_mcp"}.get(
        tool.tool_type, "custom"
    )


def tool_out(tool) -> dict:
    return {
        "id": tool.id,
        "name": tool.name,
        "tool_type": letta_tool_type(tool),
        "description": tool.description,
        "source_code": tool.source_code,
        "source_type": "python",
        "json_schema": tool.json_schema,
        "tags": tool.tags,
        "return_char_limit": tool.return_char_limit,
        "pip_requirements": tool.pip_requirements,
        "sandbox": tool.sandbox or None,
        "default_requires_approval": tool.default_requires_approval,
        "created_at": tool.created_at,
        "updated_at": tool.updated_at,
    }


def _lines(text: str) -> list[str]:
    return [text] if text else []


def _extras(run: ToolRun) -> dict:
    result = getattr(run, "result", None)
    return {
        "duration_ms": run.duration_ms,
        "sandbox": run.sandbox,
        "network": run.network,
        "tool_run_id": run.id,
        "mcp_server": run.mcp_server or None,
        "error_type": getattr(result, "error_type", None),
        "error_message": getattr(result, "error_message", None),
    }


def tool_return_message(run: ToolRun) -> dict:
    """A workbench run as Letta's tool_return_message, plus duration, which sandbox ran it (with or without
    network) and the run id."""
    return {
        "id": f"message-{run.id}",
        "date": run.created_at,
        "message_type": "tool_return_message",
        "name": run.tool_name,
        "status": run.status,
        "tool_return": run.tool_return,
        "stdout": _lines(run.stdout),
        "stderr": _lines(run.stderr),
        "tool_call_id": f"call-{run.id}",
        **_extras(run),
    }


def tool_execution_result(run: ToolRun) -> dict:
    """An agent's tool run as Letta's ToolExecutionResult (`func_return`), plus the same extras."""
    return {
        "status": run.status,
        "func_return": run.tool_return,
        "tool_return": run.tool_return,
        "stdout": _lines(run.stdout),
        "stderr": _lines(run.stderr),
        "agent_state": None,
        "sandbox_config_fingerprint": None,
        **_extras(run),
    }


def tool_run_out(run: ToolRun) -> dict:
    """One recorded run for the history list (arguments included, so a call can be replayed)."""
    return {
        "id": run.id,
        "tool_id": run.tool_id,
        "tool_name": run.tool_name,
        "agent_id": run.agent_id or None,
        "step_id": run.step_id or None,
        "origin": run.origin,
        "args": run.args,
        "status": run.status,
        "tool_return": run.tool_return,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "sandbox": run.sandbox,
        "network": run.network,
        "duration_ms": run.duration_ms,
        "mcp_server": run.mcp_server or None,
        "created_at": run.created_at,
    }


def mcp_server_out(server) -> dict:
    """Letta's McpServer shape; secrets are write-only: env and header names come back, their values never."""
    out = {
        "id": server.id,
        "server_name": server.server_name,
        "mcp_server_type": server.server_type,
        "last_error": server.last_error or None,
        "refreshed_at": server.refreshed_at,
    }
    if server.server_type == "stdio":
        out.update(
            command=server.command,
            args=server.args,
            env=dict.fromkeys(server.env or {}),
            allow_network=server.allow_network,
        )
    else:
        out.update(
            server_url=server.server_url,
            auth_header=server.auth_header or None,
            auth_token=None,
            auth_token_set=bool(server.auth_token),
            custom_headers=dict.fromkeys(server.custom_headers or {}) or None,
        )
    return out
