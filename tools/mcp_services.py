"""MCP servers as tool sources: register/update/delete a server, refresh its tools into the library, and run
one of its tools (recorded as a ToolRun like any tool call). Connections live in tools.mcp_client.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from core.egress import EgressRefused, Unresolvable, check_url
from core.errors import Conflict, Invalid, NotFound
from core.models import Agent, Organization
from core.updates import model_update
from tools import json_schema as tool_schema
from tools import policy
from tools.execution import sandbox_config_for
from tools.mcp_client import McpRefused, McpUnavailable, ServerSpec, manager
from tools.models import McpServer, Tool, ToolRun

SERVER_TYPES = ("stdio", "sse", "streamable_http")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")
TOOL_NAME_MAX = 48


def _clean_config(config: dict, *, current: McpServer | None = None) -> dict[str, Any]:
    """The model fields a Letta config dict sets (type inferred when omitted); raises Invalid per field."""
    if not isinstance(config, dict):
        raise Invalid("config must be an object", detail={"config": "expected an object"})
    kind = (
        config.get("mcp_server_type")
        or (current.server_type if current else None)
        or ("stdio" if config.get("command") else "streamable_http")
    )
    if kind not in SERVER_TYPES:
        raise Invalid(
            f"unknown mcp_server_type {kind!r}", detail={"mcp_server_type": f"one of {', '.join(SERVER_TYPES)}"}
        )
    fields: dict[str, Any] = {"server_type": kind}
    errors: dict[str, str] = {}
    if kind == "stdio":
        command = config.get("command", current.command if current else None)
        if not isinstance(command, str) or not command.strip() or "\n" in command or len(command) > 500:
            errors["command"] = "a command is required (one line, at most 500 characters)"
        args = config.get("args", current.args if current else [])
        if args is None:
            args = []
        if not isinstance(args, list) or len(args) > 200 or not all(isinstance(a, str) and len(a) < 4000 for a in args):
            errors["args"] = "expected a list of at most 200 strings"
        fields.update(
            command=(command or "").strip(), args=args, server_url="", auth_header="", auth_token="", custom_headers={}
        )
        if "env" in config:
            fields["env"] = _string_map(config.get("env"), _ENV_NAME, "env", errors)
        if "allow_network" in config:
            if config["allow_network"] is not None and not isinstance(config["allow_network"], bool):
                errors["allow_network"] = "true, false or null"
            fields["allow_network"] = config["allow_network"] if isinstance(config["allow_network"], bool) else None
    else:
        url = config.get("server_url", current.server_url if current else None)
        if error := _url_error(url):
            errors["server_url"] = error
        fields.update(server_url=url or "", command="", args=[], env={})
        if "auth_header" in config:
            header = config.get("auth_header") or ""
            if not isinstance(header, str) or (header and not _HEADER.match(header)):
                errors["auth_header"] = "not a valid header name"
            fields["auth_header"] = header
        if "auth_token" in config:
            token = config.get("auth_token") or ""
            if not isinstance(token, str) or "\n" in token:
                errors["auth_token"] = "expected a one-line string"
            fields["auth_token"] = token if isinstance(token, str) else ""
        if "custom_headers" in config:
            fields["custom_headers"] = _string_map(config.get("custom_headers"), _HEADER, "custom_headers", errors)
    if errors:
        raise Invalid("invalid MCP server config: " + "; ".join(f"{k}: {v}" for k, v in errors.items()), detail=errors)
    return fields


def _url_error(url) -> str | None:
    """Why a server URL cannot be used (None: it can): not http(s), malformed, or refused by the egress guard (an
    address on this host or its private network; a name that does not resolve now is kept, its error shown later)."""
    try:
        parsed = urlparse(url) if isinstance(url, str) else None
        parsed and parsed.port  # noqa: B018 — urlparse checks the brackets and the port only when asked
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname or len(url) > 2000:
        return "an http(s) URL is required"
    try:
        check_url(url)
    except Unresolvable:
        return None
    except EgressRefused as exc:
        return str(exc)
    return None


def _permitted(*, owner: Organization, fields: dict) -> None:
    """Raise Forbidden unless the operator lets this account run what the config asks for."""
    if fields["server_type"] == "stdio":
        policy.stdio_check(owner)
        policy.network_check(owner, fields.get("allow_network"))


def _string_map(value, pattern, field: str, errors: dict) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and pattern.match(k) and isinstance(v, str) for k, v in value.items()
    ):
        errors[field] = "expected an object of names to string values"
        return {}
    return dict(value)


def _name_valid(server_name) -> str:
    if not isinstance(server_name, str) or not _NAME.match(server_name):
        raise Invalid(
            "server_name must be 1-64 letters, digits, '_', '-' or '.'",
            detail={"server_name": "1-64 letters, digits, '_', '-' or '.'"},
        )
    return server_name


def _name_checked(*, owner: Organization, server_name: str, exclude_pk: str | None = None) -> str:
    _name_valid(server_name)
    if McpServer.objects.filter(owner=owner, server_name=server_name).exclude(pk=exclude_pk).exists():
        raise Conflict(f"an MCP server named '{server_name}' already exists")
    return server_name


def mcp_server_checked(*, owner: Organization, server_name: str, config: dict) -> dict[str, Any]:
    """The fields a registration of this server stores, once it passed every check a registration applies: its name
    and config (Invalid, per field; a URL the egress guard refuses) and what the operator lets this account run
    (Forbidden: stdio servers, network). Stores nothing; resolves the URL's name, so call it outside a transaction."""
    fields = _clean_config(config)
    _permitted(owner=owner, fields=fields)
    return {"server_name": _name_valid(server_name), **fields}


def mcp_server_create(*, owner: Organization, server_name: str, config: dict) -> McpServer:
    """Register a server (validated; nothing is started), then list its tools into the library (best effort:
    an unreachable server is kept with its error in `last_error`). A server offering a tool whose name another tool
    of the account holds is not kept: Conflict (409) naming the tools and their holders."""
    fields = mcp_server_checked(owner=owner, server_name=server_name, config=config)
    with transaction.atomic():
        _name_checked(owner=owner, server_name=server_name)
        server = McpServer.objects.create(owner=owner, **fields)
    report = _refresh_quietly(server)
    clashes = [s for s in (report or {}).get("skipped", ()) if s.get("held_by")]
    if clashes:
        mcp_server_delete(server=server)
        raise Conflict(
            _clash_message(server_name, clashes), detail={"tools": {s["name"]: s["reason"] for s in clashes}}
        )
    return server


def mcp_servers_starting(*, owner: Organization) -> list[dict[str, Any]]:
    """The owner's servers this process is starting right now (registration or a refresh waits on them), each with
    its name, seconds so far, whether it may be installing its package (MCP_INSTALL_TIMEOUT_S applies then) and
    the end of what it printed; for the IDE's progress while it waits. Starts nothing."""
    names = dict(McpServer.objects.filter(owner=owner, server_type="stdio").values_list("id", "server_name"))
    starting = manager().starting(set(names)) if names else []
    limit = float(getattr(settings, "MCP_INSTALL_TIMEOUT_S", 300))
    return [{**s, "server_name": names[s["key"]], "limit_s": int(limit)} for s in starting]


def mcp_server_update(*, server: McpServer, server_name: str | None = None, config: dict | None = None) -> McpServer:
    """Change a server's name or config (secrets only when given); its connection restarts with the new config."""
    fields = _clean_config(config, current=server) if config else {}
    if fields:
        _permitted(owner=server.owner, fields=fields)
    if server_name is not None and server_name != server.server_name:
        fields["server_name"] = _name_checked(owner=server.owner, server_name=server_name, exclude_pk=server.pk)
    with transaction.atomic():
        model_update(server, fields=list(fields), data=fields)
    manager().close(server.id)
    if config:
        _refresh_quietly(server)
    return server


def mcp_server_delete(*, server: McpServer) -> None:
    """Stop the server and delete it with its tools (detached from every agent; their run history stays)."""
    manager().close(server.id)
    server.delete()


def server_spec(server: McpServer) -> ServerSpec:
    """How to reach this server (network for a stdio server: its own choice, else the owner's sandbox default,
    and only if the operator permits it). McpUnavailable when the operator does not let its account run it."""

    headers = dict(server.custom_headers or {})
    if server.auth_token:
        headers[server.auth_header or "Authorization"] = server.auth_token
    stdio = server.server_type == "stdio"
    if stdio and (reason := policy.stdio_refusal(server.owner)):
        raise McpUnavailable(reason)
    allow = (
        server.allow_network
        if server.allow_network is not None
        else sandbox_config_for(owner=server.owner)["allow_network"]
    )
    return ServerSpec(
        key=server.id,
        server_type=server.server_type,
        command=server.command,
        args=tuple(server.args or ()),
        env=tuple(sorted((server.env or {}).items())),
        url=server.server_url,
        headers=tuple(sorted(headers.items())),
        allow_network=bool(allow) and stdio and policy.network_permitted(server.owner),
        weak_isolation=bool(settings.SANDBOX_LOCAL_WEAK_ISOLATION),
        paths=policy.mcp_stdio_paths() if stdio else (),
    )


def _tool_schema(mcp_tool) -> dict:
    params = dict(mcp_tool.input_schema or {"type": "object", "properties": {}})
    params.pop("title", None)
    params.setdefault("properties", {})
    return {"name": mcp_tool.name, "description": mcp_tool.description or "", "parameters": params}


def mcp_tools_refresh(*, server: McpServer) -> dict[str, list]:
    """Ask the server for its tools (starts it if needed) and make the library match: new tools added, changed
    schemas updated, vanished ones deleted. A name taken by another tool is skipped and reported."""
    try:
        listed = manager().list_tools(server_spec(server))
    except (McpUnavailable, McpRefused) as exc:
        McpServer.objects.filter(pk=server.pk).update(last_error=str(exc)[:4000])
        server.last_error = str(exc)[:4000]
        raise Invalid(
            f"could not list the tools of '{server.server_name}': {exc}", detail={"mcp_server": str(exc)}
        ) from exc
    return _tools_sync(server=server, listed=listed)


def _holder(tool: Tool) -> str:
    if tool.tool_type == "external_mcp" and tool.mcp_server_id:
        return f"a tool of MCP server '{tool.mcp_server.server_name}'"
    return f"a {tool.get_tool_type_display()} tool"


def _clash_message(server_name: str, clashes: list[dict]) -> str:
    names = ", ".join(f"'{s['name']}' ({s['held_by']})" for s in clashes)
    return (
        f"MCP server '{server_name}' offers tools whose names are taken: {names}. A tool name is unique in an "
        f"account, so these tools were not added; delete the other tool (or its server) and refresh this one."
    )


@transaction.atomic
def _tools_sync(*, server: McpServer, listed: list) -> dict[str, list]:
    """Caller listed the tools outside any transaction; this writes the library rows in one. A tool whose name
    another tool holds is skipped and the server's `last_error` says which and why (the IDE and API show it)."""
    current = {t.mcp_tool_name: t for t in Tool.objects.select_for_update().filter(mcp_server=server)}
    report: dict[str, list] = {"added": [], "updated": [], "removed": [], "skipped": []}
    seen = set()
    for mcp_tool in listed:
        seen.add(mcp_tool.name)
        schema = _tool_schema(mcp_tool)
        tool = current.get(mcp_tool.name)
        if tool is not None:
            if tool.json_schema != schema:
                tool.json_schema, tool.description = schema, schema["description"]
                tool.save(update_fields=["json_schema", "description", "updated_at"])
                report["updated"].append(tool.name)
            continue
        name = mcp_tool.name
        if len(name) > TOOL_NAME_MAX:
            report["skipped"].append({"name": name, "reason": f"the name is longer than {TOOL_NAME_MAX} characters"})
            continue
        holder = Tool.objects.filter(owner=server.owner, name=name).select_related("mcp_server").first()
        if holder is not None:
            held_by = _holder(holder)
            report["skipped"].append({"name": name, "reason": f"the name is taken by {held_by}", "held_by": held_by})
            continue
        Tool.objects.create(
            owner=server.owner,
            name=name,
            tool_type="external_mcp",
            mcp_server=server,
            mcp_tool_name=name,
            json_schema=schema,
            description=schema["description"],
            tags=["mcp", f"mcp:{server.server_name}"],
        )
        report["added"].append(name)
    for name, tool in current.items():
        if name not in seen:
            report["removed"].append(tool.name)
            tool.delete()
    clashes = [s for s in report["skipped"] if s.get("held_by")]
    server.last_error = _clash_message(server.server_name, clashes) if clashes else ""
    McpServer.objects.filter(pk=server.pk).update(last_error=server.last_error, refreshed_at=timezone.now())
    return report


def _refresh_quietly(server: McpServer) -> dict[str, list] | None:
    try:
        return mcp_tools_refresh(server=server)
    except Invalid:
        return None  # kept on the server as last_error; the IDE and API show it


def mcp_tools_changed(server_id: str) -> None:
    """A server said its tools changed (runs in a worker thread of the connection loop): refresh them."""

    try:
        server = McpServer.objects.filter(pk=server_id).first()
        if server is not None:
            _refresh_quietly(server)
    finally:
        connections.close_all()  # this worker thread's own connections


def _result_text(result) -> str:
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else json.dumps(item.model_dump(mode="json"), ensure_ascii=False))
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def mcp_tool_execute(
    *,
    tool: Tool,
    args: dict,
    agent: Agent | None = None,
    origin: str = "workbench",
    step_id: str = "",
    record: bool = True,
) -> ToolRun:
    """Call an MCP tool on its server (starts or restarts it; seconds) and record a ToolRun whose `sandbox`
    names the server. Raises Invalid (422) for arguments that do not fit the schema; a failing call or an
    unreachable server is a run with status "error". `record=False` returns the run unsaved."""
    if tool.mcp_server_id is None:
        raise NotFound(f"'{tool.name}' is not an MCP tool")
    try:
        args = tool_schema.validate_args(tool.json_schema, args if args is not None else {})
    except tool_schema.ArgumentError as exc:
        raise Invalid(str(exc), detail=exc.errors) from exc
    server = tool.mcp_server
    spec = None
    started = time.perf_counter()
    error_type = ""
    try:
        spec = server_spec(server)
        result = manager().call_tool(spec, tool.mcp_tool_name, args, timeout_s=float(settings.SANDBOX_TIMEOUT_S))
        text, ok = _result_text(result), not result.is_error
        error_type = "" if ok else "ToolError"
    except McpUnavailable as exc:
        text, ok, error_type = str(exc), False, "McpServerUnavailable"
    except McpRefused as exc:
        text, ok, error_type = str(exc), False, "McpError"
    run = ToolRun(
        owner=tool.owner,
        tool=tool,
        tool_name=tool.name,
        agent_id=agent.id if agent else "",
        step_id=step_id,
        origin=origin,
        args=args,
        status="success" if ok else "error",
        tool_return=text,
        stderr="" if ok else text,
        sandbox="mcp",
        mcp_server=server.server_name,
        network=server.server_type != "stdio" or bool(spec and spec.allow_network),
        duration_ms=(time.perf_counter() - started) * 1000,
    )
    run.error_type = error_type
    if record:
        run.save()
    return run
