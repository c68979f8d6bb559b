"""The MCP servers page: register a server (stdio, SSE, streamable HTTP), see its tools with their schemas,
refresh them, run one from its typed arguments form (tools.arg_form), delete the server. Writes go through
tools.mcp_services."""

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST
from django_htmx.http import retarget, trigger_client_event

from core.errors import DomainError
from core.web.common import org
from tools import arg_form, mcp_services, policy
from tools.models import McpServer


def _with_tools(server: McpServer) -> McpServer:
    """The server with `tool_list`, each tool carrying its parameters schema as indented JSON and its typed
    arguments form for the page."""
    server.tool_list = sorted(server.tools.all(), key=lambda t: t.name)
    for tool in server.tool_list:
        tool.schema_text = json.dumps((tool.json_schema or {}).get("parameters") or {}, indent=2, ensure_ascii=False)
        tool.fields = arg_form.form_fields(tool.json_schema)
    return server


def _servers(owner):
    return [
        _with_tools(s) for s in McpServer.objects.filter(owner=owner).prefetch_related("tools").order_by("server_name")
    ]


def _server_or_404(request, server_id: str) -> McpServer:
    server = McpServer.objects.filter(owner=org(request), pk=server_id).first()
    if server is None:
        raise Http404("MCP server not found")
    return server


def _form_context(owner, form: dict | None = None, errors: dict | None = None) -> dict:
    """What the add form needs: what was typed, its errors, and what the operator lets this account register
    (a stdio server, network for it), so the form offers only that and says why not."""
    stdio_refusal = policy.stdio_refusal(owner)
    form = form or {"mcp_server_type": "streamable_http" if stdio_refusal else "stdio"}
    return {
        "form": form,
        "errors": errors or {},
        "stdio_refusal": stdio_refusal,
        "network_permitted": policy.network_permitted(owner),
    }


@login_required
def mcp_page(request):
    owner = org(request)
    return TemplateResponse(
        request, "tools/mcp_servers.html", {"nav": "mcp", "servers": _servers(owner), **_form_context(owner)}
    )


def _lines_map(text: str, sep: str, field: str, errors: dict) -> dict[str, str]:
    out = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        if sep not in line:
            errors[field] = f"each line is NAME{sep}value"
            continue
        name, value = line.split(sep, 1)
        out[name.strip()] = value.strip() if sep == ":" else value
    return out


def _config_from_form(post) -> tuple[dict, dict]:
    errors: dict[str, str] = {}
    kind = post.get("mcp_server_type", "stdio")
    if kind == "stdio":
        config = {
            "mcp_server_type": "stdio",
            "command": post.get("command", "").strip(),
            "args": [a for a in post.get("args", "").splitlines() if a.strip()],
            "env": _lines_map(post.get("env", ""), "=", "env", errors),
            "allow_network": True if post.get("allow_network") else None,
        }
    else:
        config = {
            "mcp_server_type": kind,
            "server_url": post.get("server_url", "").strip(),
            "auth_header": post.get("auth_header", "").strip(),
            "auth_token": post.get("auth_token", ""),
            "custom_headers": _lines_map(post.get("custom_headers", ""), ":", "custom_headers", errors),
        }
    return config, errors


@login_required
@require_POST
def mcp_server_save(request):
    """Register a server from the form; errors come back inline on the form, with nothing saved."""
    owner = org(request)
    config, errors = _config_from_form(request.POST)
    form = {
        k: request.POST.get(k, "")
        for k in ("server_name", "mcp_server_type", "command", "args", "server_url", "auth_header")
    }
    if not errors:
        try:
            mcp_services.mcp_server_create(
                owner=owner, server_name=request.POST.get("server_name", "").strip(), config=config
            )
        except DomainError as exc:
            errors = exc.detail if isinstance(exc.detail, dict) else {"server_name": exc.message}
            errors.setdefault("form", exc.message)
    if errors:
        # 200 so htmx swaps the form with its errors back in; nothing was saved.
        return retarget(
            TemplateResponse(request, "tools/_mcp_form.html", _form_context(owner, form, errors)), "#mcp-form"
        )
    response = TemplateResponse(
        request, "tools/_mcp_list.html", {"servers": _servers(owner), "reset_form": True, **_form_context(owner)}
    )
    return trigger_client_event(response, "mcp-saved")


@login_required
def mcp_servers_starting(request):
    """What the add form shows while its request waits: the servers being started, an installing one's output."""
    return TemplateResponse(
        request, "tools/_mcp_starting.html", {"starting": mcp_services.mcp_servers_starting(owner=org(request))}
    )


@login_required
@require_POST
def mcp_server_delete(request, server_id: str):
    mcp_services.mcp_server_delete(server=_server_or_404(request, server_id))
    return TemplateResponse(request, "tools/_mcp_list.html", {"servers": _servers(org(request))})


@login_required
@require_POST
def mcp_server_refresh(request, server_id: str):
    server = _server_or_404(request, server_id)
    try:
        report = mcp_services.mcp_tools_refresh(server=server)
        notice = None
    except DomainError as exc:
        report, notice = None, exc.message
    server = _with_tools(_server_or_404(request, server_id))
    return TemplateResponse(request, "tools/_mcp_server.html", {"s": server, "report": report, "notice": notice})


@login_required
@require_POST
def mcp_tool_run(request, server_id: str, tool_id: str):
    """Run one of the server's tools with the typed form's arguments (checked first: each error comes back beside
    its field and nothing runs); the result (escaped) comes back."""
    server = _server_or_404(request, server_id)
    tool = server.tools.filter(pk=tool_id).first()
    if tool is None:
        raise Http404("tool not found")
    fields = arg_form.form_fields(tool.json_schema)
    args, errors = arg_form.form_arguments(request.POST, fields, tool.json_schema)
    ctx = {"fields": arg_form.with_errors(fields, errors), "form_key": tool.id}
    if errors:
        return TemplateResponse(request, "tools/_mcp_result.html", {**ctx, "arg_errors": arg_form.errors_text(errors)})
    try:
        run = mcp_services.mcp_tool_execute(tool=tool, args=args)
    except DomainError as exc:
        detail = "; ".join(f"{k}: {v}" for k, v in exc.detail.items()) if isinstance(exc.detail, dict) else ""
        return TemplateResponse(request, "tools/_mcp_result.html", {**ctx, "error": detail or exc.message})
    return TemplateResponse(request, "tools/_mcp_result.html", {**ctx, "run": run})
