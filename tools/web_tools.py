"""The built-in web tools, Letta's `web_search` and `fetch_webpage` (tools/web_search.py, tools/web_fetch.py), run
in the server's process and recorded as tool runs.

Network. They exist to reach the web, so attaching one is the owner's choice of network for that agent: they run
whenever the operator lets the account have network at all (`TOOL_NETWORK`, tools/policy.py), unless the owner
turned network off for their tools on the Settings page (left to the deployment's default, they run: that default,
`SANDBOX_ALLOW_NETWORK`, is about code in the sandbox). Every URL an agent names, and an agent's own `SEARXNG_URL`,
is reached through the egress guard.
"""

from __future__ import annotations

import time

from core.engine.base_tools import WEB_TOOL_SCHEMAS
from core.errors import Forbidden, Invalid
from core.models import Agent, Organization, OwnerSettings
from tools import json_schema as tool_schema
from tools import policy
from tools.models import Tool, ToolRun
from tools.web_fetch import WebToolError, fetch_webpage
from tools.web_search import web_search


def web_tool_execute(
    *,
    owner: Organization,
    name: str,
    args: dict,
    tool: Tool | None = None,
    agent: Agent | None = None,
    origin: str = "agent",
    step_id: str = "",
    record: bool = True,
) -> ToolRun:
    """Run `web_search` or `fetch_webpage` (HTTP requests for up to WEB_TOOLS_TIMEOUT_S each) and record a ToolRun
    (`record=False` returns it unsaved). Invalid (422) for arguments that do not fit the schema; a refused or failed
    call is a run with status "error" and its `error_type` set."""
    try:
        args = tool_schema.validate_args(WEB_TOOL_SCHEMAS[name], args if args is not None else {})
    except tool_schema.ArgumentError as exc:
        raise Invalid(str(exc), detail=exc.errors) from exc
    started = time.perf_counter()
    owner_choice = OwnerSettings.objects.filter(owner=owner).values_list("sandbox_allow_network", flat=True).first()
    network = policy.network_permitted(owner) and owner_choice is not False
    try:
        if owner_choice is False:
            raise Forbidden("network is turned off for this account's tools (Settings); the web tools need it")
        if not network:
            policy.network_check(owner, True)
        if name == "fetch_webpage":
            text = fetch_webpage(url=args["url"])
        else:
            text = web_search(secrets=dict(agent.secrets or {}) if agent else {}, **args)
        ok, error_type = True, ""
    except Forbidden as exc:
        text, ok, error_type = exc.message, False, "PermissionError"
    except WebToolError as exc:
        text, ok, error_type = str(exc), False, exc.type_name
    run = ToolRun(
        owner=owner,
        tool=tool,
        tool_name=name,
        agent_id=agent.id if agent else "",
        step_id=step_id,
        origin=origin,
        args=args,
        status="success" if ok else "error",
        tool_return=text,
        stderr="" if ok else text,
        sandbox="in-process",
        network=network,
        duration_ms=(time.perf_counter() - started) * 1000,
    )
    run.error_type = error_type
    if record:
        run.save()
    return run
