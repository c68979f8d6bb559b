"""What the tools page's views call to save and run a tool: the tools app's workbench service."""

from core.models import Organization
from tools.models import Tool


def run(*, owner: Organization, source_code: str, args: dict, env_vars: dict, tool_id: str | None = None,
        agent_id: str | None = None) -> dict:
    """Run source with args in the sandbox that applies (records a ToolRun); the result dict plus `sandbox`."""
    from tools.workbench import tool_run_source

    return tool_run_source(owner=owner, source_code=source_code, args=args, env_vars=env_vars, tool_id=tool_id,
                           agent_id=agent_id)


def save(*, owner: Organization, source_code: str, tool_id: str | None, env_vars: dict, sandbox: str = "") -> Tool:
    """Create a custom tool from source, or update the one with `tool_id`."""
    from tools.workbench import tool_save_source

    return tool_save_source(owner=owner, source_code=source_code, tool_id=tool_id, env_vars=env_vars, sandbox=sandbox)
