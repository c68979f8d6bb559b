"""Create agents from a parsed agent file: one transaction, so a failure leaves nothing behind.

Tools: built-ins map to the owner's built-in rows; a custom tool whose name the owner already uses is
reused (default) or overridden in place (`tool_policy="override"`), never duplicated. Models: the file's
model is kept even when no configured provider serves it; the result then carries a warning.
Messages keep the file's order (`seq`), in-context window and timestamps (the import time when a file has none).
Folders and their files are created (or reused by name) and attached; the files are ingested again after commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC

from django.conf import settings
from django.db import transaction
from django.utils.dateparse import parse_datetime
from django.utils.timezone import is_naive, make_aware

from core.agents import agent_tests
from core.agents.agentfile.folders import folders_attach, folders_import
from core.agents.agentfile.mcp_servers import mcp_servers_check, mcp_servers_import, mcp_tool_import
from core.agents.agentfile.model import ParsedAgent, ParsedFile, ParsedMessage, ParsedTool
from core.agents.agentfile.preview import preview
from core.agents.services import AGENT_TYPES, DEFAULT_SYSTEM, DEFAULT_SYSTEM_V1, agent_create
from core.agents.versions import history_import
from core.engine import types as t
from core.engine.tokens import count_message
from core.engine.types import uses_heartbeats
from core.errors import Invalid
from core.ids import new_id
from core.mapping import search_text
from core.models import Agent, Message, Organization
from core.providers import model_is_configured
from core.updates import model_update
from memory.models import Folder, Passage, PassageTag
from memory.services import block_create
from tools.json_schema import SchemaError, derive_schema
from tools.models import Tool
from tools.services import builtin_tools_ensure

TOOL_POLICIES = ("reuse", "override")


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    name: str | None = None
    model: str | None = None
    embedding: str | None = None
    strip_messages: bool = False
    secrets: dict[str, str] | None = None
    tool_policy: str = "reuse"
    append_copy_suffix: bool = False
    agent_type: str | None = None  # overrides the file's (the IDE's new-agent form)


@dataclass(kw_only=True)
class ImportResult:
    agent_ids: list[str]
    warnings: list[str] = field(default_factory=list)
    tools_created: list[str] = field(default_factory=list)
    tools_reused: list[str] = field(default_factory=list)
    tools_overridden: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "agent_ids": self.agent_ids,
            "warnings": self.warnings,
            "tools_created": self.tools_created,
            "tools_reused": self.tools_reused,
            "tools_overridden": self.tools_overridden,
        }


def _check_options(options: ImportOptions) -> None:
    if options.tool_policy not in TOOL_POLICIES:
        raise Invalid(f"tool_policy must be one of {', '.join(TOOL_POLICIES)}, not {options.tool_policy!r}")
    if options.secrets is not None and not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str | None) for k, v in options.secrets.items()
    ):
        raise Invalid("secrets must map environment variable names to strings")


def agentfile_import(*, owner: Organization, parsed: ParsedFile, options: ImportOptions | None = None) -> ImportResult:
    """Create the file's agents with their blocks, tools, MCP servers, rules, messages and passages, atomically; the
    file's new MCP servers pass a registration's checks first, or nothing is stored (Invalid, Forbidden)."""

    options = options or ImportOptions()
    _check_options(options)
    servers = mcp_servers_check(owner=owner, servers=parsed.mcp_servers)  # before the transaction: it resolves URLs
    return _import(owner=owner, parsed=parsed, options=options, servers=servers)


@transaction.atomic
def _import(*, owner: Organization, parsed: ParsedFile, options: ImportOptions, servers: list[dict]) -> ImportResult:
    result = ImportResult(agent_ids=[], warnings=list(parsed.warnings))
    builtins = builtin_tools_ensure(owner=owner)

    mcp_servers_import(owner=owner, checked=servers, warnings=result.warnings)
    rows = {
        key: _tool_row(owner=owner, tool=t, builtins=builtins, policy=options.tool_policy, result=result)
        for key, t in parsed.tools.items()
    }
    tool_ids = {key: row.id for key, row in rows.items() if row is not None}
    block_ids = _blocks_create(owner=owner, parsed=parsed)
    folders = folders_import(owner=owner, parsed=parsed, warnings=result.warnings)
    for i, pa in enumerate(parsed.agents):
        # A name given for a file of several agents names the first; the others keep theirs after it.
        named = options if i == 0 or not options.name else replace(options, name=f"{options.name} · {pa.name}")
        agent = _agent_create(owner=owner, pa=pa, options=named, block_ids=block_ids, tool_ids=tool_ids, result=result)
        folders_attach(agent=agent, source_keys=pa.source_keys, views=pa.file_views, imported=folders)
        result.agent_ids.append(agent.id)
    result.warnings = list(dict.fromkeys(result.warnings))
    return result


def _tool_row(
    *, owner: Organization, tool: ParsedTool, builtins: dict[str, Tool], policy: str, result: ImportResult
) -> Tool:
    if tool.builtin:
        return builtins[tool.name]
    if tool.letta_type == "external_mcp":
        return mcp_tool_import(owner=owner, tool=tool, warnings=result.warnings)
    existing = Tool.objects.filter(owner=owner, name=tool.name).first()
    fields = _tool_fields(tool, result)
    if existing is None:
        result.tools_created.append(tool.name)
        return Tool.objects.create(owner=owner, name=tool.name, tool_type="custom", **fields)
    if existing.tool_type != "custom":
        return existing
    same = all(getattr(existing, k) == fields[k] for k in ("source_code", "json_schema", "default_requires_approval"))
    if policy == "reuse" or same:
        result.tools_reused.append(tool.name)
        if not same:
            result.warnings.append(
                f"Tool '{tool.name}' already exists and differs from the file's; your existing "
                "tool was kept (import with tool_policy=override to replace it)."
            )
        return existing
    model_update(existing, fields=list(fields), data=fields)
    result.tools_overridden.append(tool.name)
    result.warnings.append(
        f"Tool '{tool.name}' was overwritten with the file's version (other agents using it see the change)."
    )
    return existing


def _tool_fields(tool: ParsedTool, result: ImportResult) -> dict:
    schema = tool.json_schema
    if not schema and tool.source_code:
        try:
            schema = derive_schema(tool.source_code, tool.name)
        except SchemaError as exc:
            result.warnings.append(f"Tool '{tool.name}' has no schema and none could be derived from its code: {exc}")
    return {
        "description": tool.description or str(schema.get("description") or ""),
        "source_code": tool.source_code,
        "json_schema": schema,
        "tags": list(tool.tags),
        "return_char_limit": tool.return_char_limit,
        "pip_requirements": list(tool.pip_requirements),
        "default_requires_approval": tool.default_requires_approval,
    }


def _blocks_create(*, owner: Organization, parsed: ParsedFile) -> dict[str, str]:
    """One block row per file block that some agent uses (a block two agents share stays shared)."""

    used = dict.fromkeys(k for a in parsed.agents for k in a.block_keys)
    out = {}
    for key in used:
        b = parsed.blocks[key]
        out[key] = block_create(
            owner=owner,
            label=b.label,
            value=b.value,
            limit=b.limit,
            description=b.description,
            read_only=b.read_only,
            metadata=b.metadata,
        ).id
    return out


def _agent_create(
    *,
    owner: Organization,
    pa: ParsedAgent,
    options: ImportOptions,
    block_ids: dict[str, str],
    tool_ids: dict[str, str],
    result: ImportResult,
) -> Agent:
    model = options.model or pa.model or settings.DEFAULT_MODEL
    if not pa.model and not options.model:
        result.warnings.append(f"Agent '{pa.name}': the file names no model; {model} was used.")
    if not model_is_configured(owner=owner, handle=model):
        result.warnings.append(
            f"Agent '{pa.name}': model '{model}' is not served by a configured provider; it was kept. "
            "Configure the provider or pick another model before running the agent."
        )
    name = (options.name or pa.name) + ("_copy" if options.append_copy_suffix else "")
    agent_type = options.agent_type or pa.agent_type
    if agent_type not in AGENT_TYPES:
        result.warnings.append(f"Agent '{pa.name}': agent type '{agent_type}' is unknown; memgpt_v2_agent was used.")
        agent_type = "memgpt_v2_agent"
    secrets = dict(pa.secrets)
    secrets.update({k: v or "" for k, v in (options.secrets or {}).items()})
    tool_keys, rules = list(pa.tool_keys), list(pa.tool_rules)
    system = pa.system
    if options.agent_type and uses_heartbeats(agent_type) != uses_heartbeats(pa.agent_type):
        # the file's prompt was written for the other loop (send_message, or plain replies): the type's base prompt
        system = DEFAULT_SYSTEM if uses_heartbeats(agent_type) else DEFAULT_SYSTEM_V1
        result.warnings.append(
            f"Agent '{pa.name}': its system prompt was written for {pa.agent_type}; the {agent_type} base prompt "
            "was used instead."
        )
    if options.agent_type and not uses_heartbeats(agent_type) and uses_heartbeats(pa.agent_type):
        # made a letta_v1_agent from a MemGPT file: it replies in plain text, so send_message and its rules go
        names = dict(
            Tool.objects.filter(id__in=[tool_ids[k] for k in tool_keys if k in tool_ids]).values_list("id", "name")
        )
        tool_keys = [k for k in tool_keys if names.get(tool_ids.get(k)) != "send_message"]
        rules = [r for r in rules if r.get("tool_name") != "send_message"]
    agent = agent_create(
        owner=owner,
        name=name,
        model=model,
        system=system,
        description=pa.description,
        block_ids=[block_ids[k] for k in pa.block_keys],
        tool_ids=list(dict.fromkeys(tool_ids[k] for k in tool_keys if k in tool_ids)),
        include_base_tools=False,
        tool_rules=rules,
        context_window_limit=pa.context_window,
        tags=list(pa.tags),
        metadata={k: v for k, v in (pa.metadata or {}).items() if k != agent_tests.METADATA_KEY},
        secrets=secrets,
        embedding=options.embedding or pa.embedding,
        model_settings=pa.model_settings,
        agent_type=agent_type,
    )
    if pa.embedding_config:
        agent.embedding_config = pa.embedding_config
        agent.save(update_fields=["embedding_config"])
    if pa.history:
        history_import(agent=agent, history=list(pa.history))
    if agent_tests.METADATA_KEY in (pa.metadata or {}):
        unread = agent_tests.tests_adopt(agent=agent, tests=pa.metadata[agent_tests.METADATA_KEY])
        if unread:
            result.warnings.append(f"Agent '{pa.name}': {unread} of its tests could not be read and were left out.")
    if not options.strip_messages:
        _messages_replace(agent=agent, pa=pa)
    if pa.passages:
        _passages_create(agent=agent, pa=pa)
        result.warnings.append(
            f"Agent '{agent.name}': {len(pa.passages)} archival passage(s) were imported without "
            "embeddings (full-text search finds them; re-embed them for semantic search)."
        )
    return agent


def _messages_replace(*, agent: Agent, pa: ParsedAgent) -> None:
    """Swap the fresh agent's lone system message for the file's messages and window."""
    Message.objects.filter(agent=agent).delete()
    rows = [_message_row(agent, m, seq) for seq, m in enumerate(pa.messages)]
    Message.objects.bulk_create(rows, batch_size=500)
    # created_at is auto_now_add, which bulk_create overwrites; bulk_update writes the file's times back.
    dated = [row for m, row in zip(pa.messages, rows, strict=True) if _set_time(row, m.created_at)]
    if dated:
        Message.objects.bulk_update(dated, ["created_at"], batch_size=500)
    by_key = {m.key: row.id for m, row in zip(pa.messages, rows, strict=True)}
    agent.message_ids = [by_key[k] for k in pa.in_context]
    agent.save(update_fields=["message_ids"])


def _set_time(row: Message, stamp: str) -> bool:
    """Give the row the file's timestamp; False when the file has none (or none that parses)."""

    try:
        when = parse_datetime(stamp) if stamp else None
    except ValueError:
        when = None
    if when is None:
        return False
    row.created_at = make_aware(when, UTC) if is_naive(when) else when
    return True


def _message_row(agent: Agent, m: ParsedMessage, seq: int) -> Message:
    engine_msg = t.Message(
        id="",
        role=t.Role(m.role),
        content=m.text,
        name=m.name or None,
        tool_call_id=m.tool_call_id or None,
        tool_calls=tuple(t.ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in m.tool_calls),
    )
    return Message(
        id=new_id("message"),
        owner_id=agent.owner_id,
        agent=agent,
        seq=seq,
        role=m.role,
        content=m.content,
        text=search_text(m.text, m.tool_calls),
        reasoning=m.reasoning,
        reasoning_source=m.reasoning_source,
        tool_calls=[dict(c) for c in m.tool_calls],
        tool_call_id=m.tool_call_id,
        name=m.name,
        tool_return=dict(m.tool_return),
        kind=m.kind,
        otid=m.otid,
        thinking_blocks=[dict(b) for b in m.thinking_blocks],
        token_count=count_message(agent.model, engine_msg),
    )


def _passages_create(*, agent: Agent, pa: ParsedAgent) -> None:
    """Archival passages from our export extension, stored without embeddings (source "import"): embedding them
    here would put provider calls inside the import transaction."""

    for p in pa.passages:
        row = Passage.objects.create(
            owner_id=agent.owner_id, agent=agent, text=p.text, tags=list(p.tags), source="import"
        )
        PassageTag.objects.bulk_create([PassageTag(passage=row, agent=agent, tag=tag) for tag in dict.fromkeys(p.tags)])


def agentfile_preview(*, owner: Organization, parsed: ParsedFile, options: ImportOptions | None = None) -> dict:
    """preview() with the owner's configured models, existing tools and folders looked up (reads only); the file's
    new MCP servers are checked as the import checks them, so a refused one is told before the import."""

    options = options or ImportOptions()
    mcp_servers_check(owner=owner, servers=parsed.mcp_servers)
    names = [t.name for t in parsed.tools.values() if not t.builtin]
    existing = dict(
        Tool.objects.filter(owner=owner, name__in=names, tool_type="custom").values_list("name", "source_code")
    )
    folders = {parsed.sources[k].name for a in parsed.agents for k in a.source_keys}
    existing_folders = Folder.objects.filter(owner=owner, name__in=folders).values_list("name", flat=True)
    return preview(
        parsed,
        existing_folders=set(existing_folders) if folders else set(),
        model_configured=lambda handle: model_is_configured(owner=owner, handle=handle),
        existing_tools=existing,
        tool_policy=options.tool_policy,
        model_override=options.model,
        name_override=options.name,
        strip_messages=options.strip_messages,
    )
