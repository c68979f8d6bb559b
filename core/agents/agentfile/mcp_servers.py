"""MCP servers in agent files (Letta's v2 `mcp_servers` section, and `external_mcp` tools naming their server in
`metadata_.mcp.server_name`): export without secrets; import as servers to configure, tools kept by reference."""

from __future__ import annotations

from typing import Any

from core.agents.agentfile import checks as c
from core.errors import DomainError
from tools.mcp_services import mcp_server_checked
from tools.models import McpServer, Tool

SERVER_FIELDS = frozenset(
    {
        "id",
        "server_type",
        "server_name",
        "server_url",
        "stdio_config",
        "metadata_",
        "organization_id",
        "created_at",
        "updated_at",
        "created_by_id",
        "last_updated_by_id",
        "token",
        "custom_headers",
    }
)
STDIO_FIELDS = frozenset({"server_name", "type", "command", "args", "env"})
MAX_SERVERS = 100


def mcp_servers_parse(raw: Any, warn: list[str]) -> tuple[dict[str, Any], ...]:
    """The file's servers as {server_name, server_type, command, args, env_names, server_url} (secrets dropped)."""
    out = []
    names = set()
    for i, s in enumerate(c.lst(raw, "mcp_servers", limit=MAX_SERVERS)):
        path = c.join("mcp_servers", i)
        d = c.obj(s, path, SERVER_FIELDS)
        name = c.string(d.get("server_name"), c.join(path, "server_name"), optional=False, limit=64)
        kind = c.string(d.get("server_type"), c.join(path, "server_type"), default="stdio", limit=32)
        if kind not in ("stdio", "sse", "streamable_http"):
            raise c.AgentFileError(c.join(path, "server_type"), f"unknown MCP server type {kind!r}")
        if name in names:
            raise c.AgentFileError(c.join(path, "server_name"), f"duplicate MCP server {name!r}")
        names.add(name)
        stdio = c.obj(d.get("stdio_config") or {}, c.join(path, "stdio_config"), STDIO_FIELDS)
        args = [
            c.string(a, c.join(c.join(path, "stdio_config.args"), j), limit=2000)
            for j, a in enumerate(c.lst(stdio.get("args"), c.join(path, "stdio_config.args"), limit=200))
        ]
        env = c.obj(stdio.get("env") or {}, c.join(path, "stdio_config.env"))
        if d.get("token") or d.get("custom_headers") or any(env.values()):
            warn.append(f"MCP server '{name}': secrets in the file (token, headers, env values) were not imported.")
        out.append(
            {
                "server_name": name,
                "server_type": kind,
                "command": c.string(stdio.get("command"), c.join(path, "stdio_config.command"), limit=500),
                "args": args,
                "env_names": sorted(str(k) for k in env),
                "server_url": c.string(d.get("server_url"), c.join(path, "server_url"), limit=2000),
            }
        )
    return tuple(out)


def mcp_tool_server(raw_tool: dict) -> str:
    """The server an `external_mcp` tool of the file names (metadata_.mcp.server_name), or ""."""
    meta = raw_tool.get("metadata_") if isinstance(raw_tool.get("metadata_"), dict) else {}
    mcp = meta.get("mcp") if isinstance(meta.get("mcp"), dict) else {}
    return mcp.get("server_name") if isinstance(mcp.get("server_name"), str) else ""


def mcp_servers_check(*, owner, servers) -> list[dict[str, Any]]:
    """The registrations of the file's servers the owner does not have (by name), each past the checks
    `POST /v1/mcp-servers` applies (tools.mcp_services.mcp_server_checked): one refused raises its error (Invalid,
    Forbidden) naming the server, before anything is stored. Resolves URLs: call it outside the import's
    transaction."""
    have = set(McpServer.objects.filter(owner=owner).values_list("server_name", flat=True))
    checked = []
    for s in servers:
        if s["server_name"] in have:
            continue
        if s["server_type"] == "stdio":
            env = dict.fromkeys(s["env_names"], "")
            config = {"mcp_server_type": "stdio", "command": s["command"], "args": s["args"], "env": env}
        else:
            config = {"mcp_server_type": s["server_type"], "server_url": s["server_url"]}
        try:
            checked.append(mcp_server_checked(owner=owner, server_name=s["server_name"], config=config))
        except DomainError as exc:
            raise type(exc)(
                f"MCP server '{s['server_name']}' in the agent file is refused: {exc.message}",
                detail={"mcp_servers": {s["server_name"]: exc.detail or exc.message}},
            ) from None
    return checked


def mcp_servers_import(*, owner, checked: list[dict[str, Any]], warnings: list[str]) -> None:
    """Create the servers mcp_servers_check passed that the owner still does not have, not started: secrets are set
    on the MCP page. Caller holds the import's transaction."""

    for fields in checked:
        if McpServer.objects.filter(owner=owner, server_name=fields["server_name"]).exists():
            continue
        McpServer.objects.create(
            owner=owner, **fields, last_error="imported from an agent file: set its secrets, then refresh its tools"
        )
        warnings.append(
            f"MCP server '{fields['server_name']}' was added from the file; set its secrets on the MCP page "
            "and refresh its tools."
        )


def mcp_tool_import(*, owner, tool, warnings: list[str]):
    """The Tool row for a file's MCP tool: the owner's tool of that name from that server, else a new reference
    (its schema from the file) that runs once the server is configured."""

    server = McpServer.objects.filter(owner=owner, server_name=tool.mcp_server).first()
    if server is None:
        warnings.append(
            f"MCP tool '{tool.name}' names server '{tool.mcp_server}', which is neither in the file nor "
            "yours; it was not attached."
        )
        return None
    existing = Tool.objects.filter(owner=owner, name=tool.name).first()
    if existing is not None:
        if existing.mcp_server_id != server.id:
            warnings.append(f"MCP tool '{tool.name}': the name is taken by another of your tools; it was not attached.")
            return None
        return existing
    schema = dict(tool.json_schema or {"name": tool.name, "parameters": {"type": "object", "properties": {}}})
    return Tool.objects.create(
        owner=owner,
        name=tool.name,
        tool_type="external_mcp",
        mcp_server=server,
        mcp_tool_name=tool.name,
        json_schema=schema,
        description=tool.description,
        tags=["mcp", f"mcp:{server.server_name}"],
    )


def mcp_servers_export(tools) -> list[dict[str, Any]]:
    """Letta's `mcp_servers` entries for the servers of these tools (env names only, no token or headers)."""
    servers = {t.mcp_server_id: t.mcp_server for t in tools if t.tool_type == "external_mcp" and t.mcp_server_id}
    out = []
    for i, s in enumerate(sorted(servers.values(), key=lambda s: s.server_name)):
        entry = {
            "id": f"mcp_server-{i}",
            "server_type": s.server_type,
            "server_name": s.server_name,
            "server_url": s.server_url or None,
            "stdio_config": None,
            "metadata_": {},
        }
        if s.server_type == "stdio":
            entry["stdio_config"] = {
                "server_name": s.server_name,
                "type": "stdio",
                "command": s.command,
                "args": list(s.args or []),
                "env": dict.fromkeys(s.env or {}, ""),
            }
        out.append(entry)
    return out
