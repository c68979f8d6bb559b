"""Reads of tools and tool runs, filtered by owner."""

from django.db.models import QuerySet

from core.models import Agent, Organization
from core.pagination import clamp_limit, queryset_page
from core.prepared import Prepared
from core.selectors import owned_get
from tools.models import Tool, ToolRun


def tool_get(*, owner: Organization, tool_id: str) -> Tool:
    return owned_get(Tool, owner=owner, id=tool_id)


def tools_list(*, owner: Organization, name: str | None = None, limit: int = 500) -> QuerySet[Tool]:
    qs = Tool.objects.filter(owner=owner).order_by("tool_type", "name")
    if name:
        qs = qs.filter(name=name)
    return qs[:limit]


# Letta's tool_type names for ours (the API speaks Letta's).
LETTA_TOOL_TYPES = {
    "base": "letta_core",
    "multi_agent": "letta_multi_agent_core",
    "custom": "custom",
    "external_mcp": "external_mcp",
}


def _our_types(letta_types: list[str] | None) -> list[str]:
    wanted = {t.strip() for item in letta_types or [] for t in item.split(",") if t.strip()}
    return [ours for ours, theirs in LETTA_TOOL_TYPES.items() if theirs in wanted or ours in wanted]


def tools_page(
    *,
    owner: Organization,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    ascending: bool = False,
    name: str | None = None,
    names: list[str] | None = None,
    ids: list[str] | None = None,
    letta_only: bool = False,
    search: str | None = None,
    tool_types: list[str] | None = None,
    exclude_tool_types: list[str] | None = None,
) -> list[Tool]:
    """One page of the owner's tools by creation time, with Letta's `GET /v1/tools/` filters and id cursors."""
    scope = Tool.objects.filter(owner=owner)
    qs = scope
    if name:
        qs = qs.filter(name=name)
    if names:
        qs = qs.filter(name__in=names)
    if ids:
        qs = qs.filter(id__in=ids)
    if letta_only:
        qs = qs.exclude(tool_type__in=("custom", "external_mcp"))
    if search:
        qs = qs.filter(name__icontains=search)
    if tool_types:
        qs = qs.filter(tool_type__in=_our_types(tool_types))
    if exclude_tool_types:
        qs = qs.exclude(tool_type__in=_our_types(exclude_tool_types))
    return queryset_page(qs, after=after, before=before, limit=limit, order="asc" if ascending else "desc", scope=scope)


_AGENT_TOOLS = Prepared(lambda p: Tool.objects.filter(agents__id=p.agent_id).order_by("name"))


def agent_tools(*, agent: Agent) -> list[Tool]:
    """The agent's tools by name (every step reads them: compiled once)."""
    return _AGENT_TOOLS(agent_id=agent.pk)


def agents_tools(*, agent_ids: list[str]) -> dict[str, list[Tool]]:
    """Each agent's tools by name, for many agents in one query (lists of agents)."""
    out: dict[str, list[Tool]] = {agent_id: [] for agent_id in agent_ids}
    links = Tool.agents.through.objects.filter(agent_id__in=agent_ids).select_related("tool").order_by("tool__name")
    for link in links:
        out[link.agent_id].append(link.tool)
    return out


def tool_runs(*, owner: Organization, tool_name: str, limit: int = 50) -> list[ToolRun]:
    return list(
        ToolRun.objects.filter(owner=owner, tool_name=tool_name).order_by("-created_at")[: clamp_limit(limit, 500)]
    )
