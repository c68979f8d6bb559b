"""Restoring an agent to one of its versions: its definition, its tools' code and, if asked, its block values.

A write above agent services (it updates the agent through them) and above versions (it reads and records them).
"""

from django.db import transaction

from core.agents import versions
from core.agents.services import agent_update
from core.models import Agent, AgentVersion
from memory.models import Block
from memory.services import block_update
from tools import services as tool_services
from tools.models import Tool


@transaction.atomic
def version_restore(*, agent: Agent, number: int, restore_blocks: bool = False, message: str = "") -> AgentVersion:
    """Make the agent's definition equal to version `number` again, as a new version; block values change only
    if `restore_blocks`. Restores a changed tool's code (a new tool version, seen by every agent using it) and
    recreates a deleted custom tool."""
    version = versions.version_get(agent=agent, number=number)
    d = version.definition
    with versions.recording_paused():
        changes = {key: d[key] for key in versions.FIELDS if key in d}
        kept = {k: v for k, v in (agent.metadata or {}).items() if k in versions.METADATA_NOT_DEFINITION}
        changes["metadata"] = {**(d.get("metadata") or {}), **kept}
        changes["tags"] = d.get("tags", [])
        agent_update(agent=agent, changes=changes)
        changed_tools = _tools_restore(agent=agent, tools=d.get("tools", []))
        if d.get("agent_type") and agent.agent_type != d["agent_type"]:  # agent_update leaves the type as created
            agent.agent_type = d["agent_type"]
            agent.save(update_fields=["agent_type", "updated_at"])
        if restore_blocks:
            _blocks_restore(agent=agent, blocks=version.blocks)
    restored = versions.version_record(
        agent=agent, restored_from=number, message=message or f"Restored version {number}"
    )
    for tool in changed_tools:  # the other agents using a tool whose code went back
        versions.tool_changed(tool=tool, message=f"tool {tool.name} restored with agent {agent.name} v{number}")
    return restored


def _tools_restore(*, agent: Agent, tools: list[dict]) -> list:
    """Attach exactly the version's tools (their code as it was); returns the existing tools whose code changed."""
    owned = {t.name: t for t in Tool.objects.filter(owner=agent.owner)}
    builtins = None
    wanted, changed = [], []
    for spec in tools:
        tool = owned.get(spec["name"])
        if tool is None and spec.get("tool_type") != "custom":
            builtins = builtins or tool_services.builtin_tools_ensure(owner=agent.owner)
            tool = builtins.get(spec["name"])
        elif tool is None:
            tool = tool_services.tool_create(
                owner=agent.owner,
                source_code=spec["source_code"],
                json_schema=spec.get("json_schema") or None,
                pip_requirements=spec.get("pip_requirements"),
            )
        elif tool.tool_type == "custom" and any(
            getattr(tool, k) != spec.get(k) for k in ("source_code", "json_schema", "pip_requirements")
        ):
            tool = tool_services.tool_update(
                tool=tool,
                changes={
                    "source_code": spec["source_code"],
                    "json_schema": spec.get("json_schema") or None,
                    "pip_requirements": spec.get("pip_requirements"),
                },
            )
            changed.append(tool)
        if tool is not None:
            wanted.append(tool)
    agent.tools.set(wanted)
    return changed


def _blocks_restore(*, agent: Agent, blocks: list[dict]) -> None:
    by_label = {b.label: b for b in Block.objects.filter(agentblock__agent=agent)}
    for saved in blocks:
        block = by_label.get(saved["label"])
        if block is not None and block.value != saved["value"]:
            block_update(block=block, changes={"value": saved["value"]})
