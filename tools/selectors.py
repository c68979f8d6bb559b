"""Reads of tools and tool runs, filtered by owner."""

from django.db.models import QuerySet

from core.errors import NotFound
from core.models import Agent, Organization
from tools.models import Tool, ToolRun


def tool_get(*, owner: Organization, tool_id: str) -> Tool:
    tool = Tool.objects.filter(owner=owner, id=tool_id).first()
    if tool is None:
        raise NotFound(f"Tool '{tool_id}' not found")
    return tool


def tool_get_by_name(*, owner: Organization, name: str) -> Tool:
    tool = Tool.objects.filter(owner=owner, name=name).first()
    if tool is None:
        raise NotFound(f"Tool '{name}' not found")
    return tool


def tools_list(*, owner: Organization, name: str | None = None, limit: int = 500) -> QuerySet[Tool]:
    qs = Tool.objects.filter(owner=owner).order_by("tool_type", "name")
    if name:
        qs = qs.filter(name=name)
    return qs[:limit]


def agent_tools(*, agent: Agent) -> list[Tool]:
    return list(agent.tools.all().order_by("name"))


def tool_runs(*, owner: Organization, tool_name: str, limit: int = 50) -> list[ToolRun]:
    return list(ToolRun.objects.filter(owner=owner, tool_name=tool_name).order_by("-created_at")[:limit])
