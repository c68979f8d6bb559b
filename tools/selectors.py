"""Reads of tools and tool runs, filtered by owner."""

import re
from functools import cache

from django.db import connection
from django.db.models import Q, QuerySet

from core import mapping
from core.engine import types as t
from core.engine.base_tools import LETTA_TYPE_OF_BASE
from core.models import Agent, Organization
from core.pagination import clamp_limit, queryset_page
from core.selectors import owned_get
from core.stamped import StampedCache
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


def _types_q(letta_types: list[str] | None) -> Q:
    """Tools of the given types, Letta's names or ours (comma-separated items too); the web tools are base rows
    that Letta calls letta_builtin."""
    wanted = {t.strip() for item in letta_types or [] for t in item.split(",") if t.strip()}
    q = Q(pk__in=[])
    for ours, theirs in LETTA_TOOL_TYPES.items():
        if ours in wanted:
            q |= Q(tool_type=ours)
        elif theirs in wanted:
            q |= Q(tool_type=ours) & ~Q(name__in=list(LETTA_TYPE_OF_BASE)) if ours == "base" else Q(tool_type=ours)
    for kind in wanted & set(LETTA_TYPE_OF_BASE.values()):
        q |= Q(tool_type="base", name__in=[name for name, k in LETTA_TYPE_OF_BASE.items() if k == kind])
    return q


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
        qs = qs.filter(_types_q(tool_types))
    if exclude_tool_types:
        qs = qs.exclude(_types_q(exclude_tool_types))
    return queryset_page(qs, after=after, before=before, limit=limit, order="asc" if ascending else "desc", scope=scope)


def tools_search(
    *,
    owner: Organization,
    query: str | None,
    tool_types: list[str] | None = None,
    tags: list[str] | None = None,
    limit: int = 50,
) -> list[tuple[Tool, int, float]]:
    """The owner's tools matching the query's words, best first, as (tool, rank from 1, score): a word in the name
    counts 3, in a tag 2, in the description or a parameter's name or description 1 (the text Letta indexes a tool
    by: letta/helpers/tpuf_client.py, _extract_tool_text). No words: every tool (filtered), by name, with score 0."""
    qs = Tool.objects.filter(owner=owner)
    if tool_types:
        qs = qs.filter(_types_q(tool_types))
    wanted_tags = set(tags or [])
    words = [w for w in re.findall(r"\w+", (query or "").lower()) if w]
    scored = []
    for tool in qs.order_by("name"):
        if wanted_tags and not wanted_tags & set(tool.tags or []):
            continue
        name, description = tool.name.lower(), f"{tool.description or ''} {_parameters_text(tool)}".lower()
        tag_text = " ".join(tool.tags or []).lower()
        score = sum(3 * (w in name) + 2 * (w in tag_text) + (w in description) for w in words)
        if score or not words:
            scored.append((tool, float(score)))
    scored.sort(key=lambda pair: -pair[1])  # stable: ties stay by name
    return [(tool, rank, score) for rank, (tool, score) in enumerate(scored[: clamp_limit(limit, 100)], start=1)]


def _parameters_text(tool: Tool) -> str:
    properties = ((tool.json_schema or {}).get("parameters") or {}).get("properties") or {}
    if not isinstance(properties, dict):
        return ""
    return " ".join(f"{k} {v.get('description', '')}" for k, v in properties.items() if isinstance(v, dict))


@cache
def _agent_tools_sql(columns: str = "t.*") -> str:
    """The agent's tools by name, these `columns` of them (a row, or its id and stamp)."""
    link = Tool.agents.through._meta
    return (
        f'SELECT {columns} FROM "{Tool._meta.db_table}" t JOIN "{link.db_table}" l '
        f'ON l."{link.get_field("tool").column}" = t.id '
        f'WHERE l."{link.get_field("agent").column}" = %s ORDER BY t.name'
    )


def agent_tools(*, agent: Agent) -> list[Tool]:
    """The agent's tools by name. Our own SQL through `Manager.raw()` (every step reads them: the queryset's compile
    cost as much as the statement)."""
    return list(Tool.objects.raw(_agent_tools_sql(), [agent.pk]))


# The engine form of each tool (its ToolSpec, the schema parsed), kept in this process by tool id under the tool's
# `updated_at` (core.stamped): every write of a tool goes through `save()` (auto_now sets the stamp). Bounded by the
# count of tools (a schema is a few KB).
SPECS_MAX = 2000
_specs: StampedCache[t.ToolSpec] = StampedCache(SPECS_MAX)


@cache
def _tool_specs_sql(count: int) -> str:
    return (
        "SELECT id, updated_at, name, tool_type, description, json_schema, return_char_limit "
        f'FROM "{Tool._meta.db_table}" WHERE id IN ({", ".join(["%s"] * count)})'
    )


def _tool_spec(row: tuple) -> t.ToolSpec:
    _id, _stamp, name, kind, description, json_schema, limit = row
    json_schema = Tool._meta.get_field("json_schema").from_db_value(json_schema, None, connection)
    return mapping.tool_spec(
        Tool(name=name, tool_type=kind, description=description, json_schema=json_schema, return_char_limit=limit)
    )


def agent_tool_specs(*, agent: Agent) -> tuple[list[str], list[t.ToolSpec]]:
    """The agent's tools by name as the engine sees them, with their ids: one statement of ids and stamps, and one
    more for the tools changed (or not seen) since this process last read them. A step offers the specs and reads
    the full rows (`tools_by_ids`) only when it runs a tool that needs one."""
    ids, specs, _stamps = _specs.read(
        stamps_sql=_agent_tools_sql("t.id, t.updated_at"), params=[agent.pk], rows_sql=_tool_specs_sql, build=_tool_spec
    )
    return ids, [specs[tool_id] for tool_id in ids]


@cache
def _tools_by_ids_sql(count: int) -> str:
    return f'SELECT * FROM "{Tool._meta.db_table}" WHERE id IN ({", ".join(["%s"] * count)})'


def tools_by_ids(*, ids: list[str]) -> list[Tool]:
    """Tool rows by id, in the order of `ids` (one deleted meanwhile is left out). Our own SQL through
    `Manager.raw()`: a step that runs a tool needing its row reads it so, where the queryset's compile cost more."""
    if not ids:
        return []
    found = {tool.pk: tool for tool in Tool.objects.raw(_tools_by_ids_sql(len(ids)), list(ids))}
    return [found[i] for i in ids if i in found]


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
