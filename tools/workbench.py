"""The IDE tools page's entry points (`tools.web_workbench` delegates here): save source, run source."""

from core.models import Organization
from core.selectors import agent_get
from tools import execution, selectors, services
from tools.models import Tool


def tool_run_source(
    *,
    owner: Organization,
    source_code: str,
    args: dict,
    env_vars: dict,
    tool_id: str | None = None,
    agent_id: str | None = None,
    allow_network: bool | None = None,
) -> dict:
    """Run (unsaved) source as the workbench does; records a ToolRun. Returns the sandbox result plus `sandbox`.

    With `agent_id` the run is given what the agent loop gives it: the agent's secrets, `agent_state` and a
    short-lived API token (AIDE_API_TOKEN/AIDE_BASE_URL/AIDE_AGENT_ID), revoked when the run ends.
    """

    tool = selectors.tool_get(owner=owner, tool_id=tool_id) if tool_id else None
    agent = agent_get(owner=owner, agent_id=agent_id) if agent_id else None
    # The editor may have renamed the function since the tool was saved: then the source's last function runs.
    name = tool.name if tool is not None and tool.name in services.source_function_names(source_code) else None
    run = execution.tool_execute(
        owner=owner,
        source_code=source_code,
        args=args,
        env_vars=env_vars,
        tool=tool if name else None,
        agent=agent,
        name=name,
        allow_network=allow_network,
    )
    return {**run.result.to_dict(), "sandbox": run.sandbox, "tool_run_id": run.id, "agent": agent}


def tool_save_source(
    *,
    owner: Organization,
    source_code: str,
    tool_id: str | None,
    env_vars: dict,
    sandbox: str = "",
    pip_requirements: list | None = None,
    allow_network: bool | None = None,
    default_requires_approval: bool | None = None,
) -> Tool:
    """Create a custom tool from source, or update the one with `tool_id` (409 on a name clash).

    `env_vars` are merged into the stored ones (a null value removes a variable), since the page never shows them.
    """
    changes = {
        "source_code": source_code,
        "sandbox": sandbox,
        "pip_requirements": pip_requirements or [],
        "allow_network": allow_network,
        "default_requires_approval": default_requires_approval,
    }
    if tool_id:
        tool = selectors.tool_get(owner=owner, tool_id=tool_id)
        merged = {**(tool.env_vars or {}), **env_vars}
        changes["env_vars"] = {k: v for k, v in merged.items() if v is not None}
        return services.tool_update(tool=tool, changes=changes)
    return services.tool_create(owner=owner, env_vars={k: v for k, v in env_vars.items() if v is not None}, **changes)
