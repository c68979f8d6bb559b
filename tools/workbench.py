"""The IDE tools page's entry points (`tools.web_workbench` delegates here): save source, run source."""

from core.models import Organization
from tools import execution, selectors, services
from tools.models import Tool


def tool_run_source(*, owner: Organization, source_code: str, args: dict, env_vars: dict, tool_id: str | None = None,
                    agent_id: str | None = None) -> dict:
    """Run (unsaved) source as the workbench does; records a ToolRun. Returns the sandbox result plus `sandbox`."""
    from core.selectors import agent_get

    tool = selectors.tool_get(owner=owner, tool_id=tool_id) if tool_id else None
    agent = agent_get(owner=owner, agent_id=agent_id) if agent_id else None
    # The editor may have renamed the function since the tool was saved: then the source's last function runs.
    name = tool.name if tool is not None and tool.name in services.source_function_names(source_code) else None
    run = execution.tool_execute(owner=owner, source_code=source_code, args=args, env_vars=env_vars,
                                 tool=tool if name else None, agent=agent, name=name)
    return {**run.result.to_dict(), "sandbox": run.sandbox, "tool_run_id": run.id}


def tool_save_source(*, owner: Organization, source_code: str, tool_id: str | None, env_vars: dict,
                     sandbox: str = "") -> Tool:
    """Create a custom tool from source, or update the one with `tool_id` (409 on a name clash)."""
    if tool_id:
        tool = selectors.tool_get(owner=owner, tool_id=tool_id)
        return services.tool_update(tool=tool, changes={"source_code": source_code, "env_vars": env_vars,
                                                        "sandbox": sandbox})
    return services.tool_create(owner=owner, source_code=source_code, env_vars=env_vars, sandbox=sandbox)
