"""Writes to tools: the built-in tools, attach/detach. (Custom tool CRUD and runs: see tools.workbench.)"""

from django.db import transaction

from core.errors import NotFound
from core.models import Agent, Organization
from tools.models import Tool

from core.engine.base_tools import BASE_TOOL_NAMES, MULTI_AGENT_TOOL_NAMES


@transaction.atomic
def builtin_tools_ensure(*, owner: Organization) -> dict[str, Tool]:
    """Create or refresh the owner's rows for the built-in tools (base and multi-agent); returns them by name."""
    from core.engine.base_tools import BASE_TOOL_SCHEMAS, MULTI_AGENT_TOOL_SCHEMAS

    schemas = {**BASE_TOOL_SCHEMAS, **MULTI_AGENT_TOOL_SCHEMAS}
    existing = {t.name: t for t in Tool.objects.filter(owner=owner, name__in=list(schemas))}
    for name, schema in schemas.items():
        kind = "multi_agent" if name in MULTI_AGENT_TOOL_NAMES else "base"
        tool = existing.get(name)
        if tool is None:
            existing[name] = Tool.objects.create(owner=owner, name=name, tool_type=kind, json_schema=schema,
                                                 description=schema.get("description", ""), tags=[kind])
        elif tool.json_schema != schema:
            tool.json_schema, tool.description = schema, schema.get("description", "")
            tool.save(update_fields=["json_schema", "description", "updated_at"])
    return existing


def agent_tools_attach_initial(*, agent: Agent, names: list[str], ids: list[str], include_base: bool,
                               include_multi_agent: bool) -> None:
    """Attach the tools an agent is created with: built-ins as asked, then named and id'd tools."""
    wanted: list[Tool] = []
    if include_base or include_multi_agent or set(names) & set(BASE_TOOL_NAMES + MULTI_AGENT_TOOL_NAMES):
        builtins = builtin_tools_ensure(owner=agent.owner)
        if include_base:
            wanted += [builtins[n] for n in BASE_TOOL_NAMES]
        if include_multi_agent:
            wanted += [builtins[n] for n in MULTI_AGENT_TOOL_NAMES]
    by_name = {t.name: t for t in Tool.objects.filter(owner=agent.owner, name__in=names)}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise NotFound(f"Tool(s) not found: {', '.join(missing)}")
    by_id = {t.id: t for t in Tool.objects.filter(owner=agent.owner, id__in=ids)}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise NotFound(f"Tool(s) not found: {', '.join(missing)}")
    agent.tools.add(*wanted, *by_name.values(), *by_id.values())


def tool_attach(*, agent: Agent, tool: Tool) -> None:
    """Attach a tool to an agent (idempotent)."""
    if tool.owner_id != agent.owner_id:
        raise NotFound(f"Tool '{tool.id}' not found")
    agent.tools.add(tool)


def tool_detach(*, agent: Agent, tool: Tool) -> None:
    """Detach a tool; the agent can no longer call it (the next compiled context omits it)."""
    agent.tools.remove(tool)
