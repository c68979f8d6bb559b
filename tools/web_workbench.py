"""What the tools page's views call to run a tool in the workbench (saving is tools.workbench.tool_save_source)."""

import re

from core.models import Organization
from tools.execution import declares_agent_state
from tools.models import ToolRun
from tools.sandbox.cancel import cancel as sandbox_cancel
from tools.sandbox.cancel import cancellable
from tools.workbench import tool_run_source

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

    With a `run_key`, `cancel(owner=..., run_key=...)` from another request stops the run (`cancelled` in the result).
    """

    with cancellable(_cancel_key(owner, run_key)) as state:
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
