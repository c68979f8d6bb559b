"""What the tools page's views call to run a tool in the workbench (saving is tools.workbench.tool_save_source):
a Python tool's source (its output followed live by `output_events`), a saved MCP or built-in tool."""

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator

from django.conf import settings

from core.errors import Invalid
from core.models import Organization
from core.runs.tool_exec import agent_builtin_tool_run
from core.selectors import agent_get
from tools import selectors
from tools.execution import declares_agent_state
from tools.mcp_services import mcp_tool_execute
from tools.models import ToolRun
from tools.sandbox import live
from tools.sandbox.cancel import cancel as sandbox_cancel
from tools.sandbox.cancel import cancellable
from tools.workbench import tool_run_source

# How long the output of a run not started yet is waited for: the page asks for it as it sends the run.
UNSTARTED_WAIT_S = 15.0
# What a run inside the agent loop is given that a workbench run without an agent lacks.
_AGENT_ONLY_ENV = ("AIDE_API_TOKEN", "AIDE_BASE_URL", "AIDE_AGENT_ID")


def run(
    *,
    owner: Organization,
    source_code: str,
    args: dict,
    env_vars: dict,
    tool_id: str | None = None,
    agent_id: str | None = None,
    allow_network: bool | None = None,
    run_key: str = "",
) -> dict:
    """Run source with args in the sandbox that applies (records a ToolRun); the result dict plus `sandbox`.

    With a `run_key`, `cancel(owner=..., run_key=...)` from another request stops the run (`cancelled` in the result)
    and `output_events(owner=..., run_key=...)` follows what it prints.
    """

    key = _cancel_key(owner, run_key)
    with cancellable(key) as state, live.streaming(key):
        result = tool_run_source(
            owner=owner,
            source_code=source_code,
            args=args,
            env_vars=env_vars,
            tool_id=tool_id,
            agent_id=agent_id,
            allow_network=allow_network,
        )
    if not (run_key and state.cancelled):
        return {**result, "cancelled": False}
    # The sandbox saw a SIGKILL, which it reports as a limit; say what really happened, in the history too.
    said = "Cancelled: stopped from the workbench"
    ToolRun.objects.filter(pk=result["tool_run_id"]).update(tool_return=said)
    return {
        **result,
        "cancelled": True,
        "tool_return": said,
        "error_type": "Cancelled",
        "error_message": "stopped from the workbench",
        "traceback": None,
    }


def cancel(*, owner: Organization, run_key: str) -> bool:
    """Stop the owner's workbench run started with `run_key` (kills its sandbox processes); False if none runs."""

    return bool(run_key) and sandbox_cancel(_cancel_key(owner, run_key))


def _cancel_key(owner: Organization, run_key: str) -> str:
    # The owner is part of the key, so one owner's page can never stop another's run.
    return f"{owner.pk}:{run_key}" if run_key else f"{owner.pk}:-"


def missing_without_agent(source_code: str, schema: dict) -> list[str]:
    """What the source uses that only a run as an agent provides (the AIDE_* variables, `agent_state`)."""

    missing = [name for name in _AGENT_ONLY_ENV if re.search(rf"\b{name}\b", source_code)]
    if schema.get("name") and declares_agent_state(source_code, schema["name"]):
        missing.append("agent_state")
    return missing


def run_saved(*, owner: Organization, tool_id: str, args: dict, agent_id: str | None = None) -> dict:
    """Run a saved MCP tool (on its server; records a ToolRun) or built-in tool (in this process, on the agent's
    memory: a block edit or archival insert is made) with `args`; the result in the workbench's shape.

    Raises Invalid for a Python tool (it runs from its source), for a built-in without an agent, and for arguments
    the tool refuses; Conflict when the agent is busy with a run.
    """

    tool = selectors.tool_get(owner=owner, tool_id=tool_id)
    agent = agent_get(owner=owner, agent_id=agent_id) if agent_id else None
    if tool.tool_type == "custom":
        raise Invalid("A Python tool runs from its source: open it in the workbench's editor.")
    if tool.tool_type == "external_mcp":
        run = mcp_tool_execute(tool=tool, args=args, agent=agent, origin="workbench")
        return _shaped(
            status=run.status,
            tool_return=run.tool_return,
            stderr=run.stderr,
            duration_ms=run.duration_ms,
            sandbox=f"MCP server {run.mcp_server}",
            network=run.network,
            agent=agent,
        )
    if agent is None:
        raise Invalid(
            f"{tool.name} is a built-in tool: it runs on an agent's memory, so pick the agent under “Run as agent”."
        )
    started = time.perf_counter()
    out = agent_builtin_tool_run(agent=agent, name=tool.name, args=args)
    return _shaped(
        status=out["status"],
        tool_return=str(out["tool_return"]),
        duration_ms=(time.perf_counter() - started) * 1000,
        sandbox="in-process (built-in)",
        network=False,
        agent=agent,
    )


def _shaped(**fields) -> dict:
    return {"stdout": "", "stderr": "", "error_type": None, "traceback": None, "cancelled": False, **fields}


async def output_events(*, owner: Organization, run_key: str, since: int = 0) -> AsyncIterator[str]:
    """The SSE body following a workbench run's output: `stdout`/`stderr` events (each a JSON string, its id the
    position to resume after), then `end` once the run is over — or when no run with this key started here in time
    (it may have run in another server process, or not at all). Polls this process's record of the run."""

    key = _cancel_key(owner, run_key)
    deadline = time.monotonic() + float(settings.SANDBOX_TIMEOUT_S) + 120
    unknown_until = time.monotonic() + UNSTARTED_WAIT_S
    while True:
        parts, _, done, known = live.read(key, since)
        for stream, text in parts:
            since += 1
            yield f"id: {since}\nevent: {stream}\ndata: {json.dumps(text)}\n\n"
        now = time.monotonic()
        if done or now > deadline or (not known and now > unknown_until):
            yield "event: end\ndata: {}\n\n"
            return
        await asyncio.sleep(0.1)
