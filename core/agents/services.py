"""Writes to agents: create, modify (settings and rules checked against what the owner has), duplicate, delete.
Memory and tool writes live in their apps; creating from a template is in core.agents.agentfile.templates."""

import json
import secrets
import uuid
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import mapping, providers
from core.agents import versions
from core.engine import loop
from core.engine.tokens import count_message, model_info
from core.engine.types import tool_rule_from_dict, tool_rule_to_dict, uses_heartbeats
from core.errors import Invalid, NotConfigured
from core.ids import new_id
from core.models import Agent, AgentTag, Message, Organization
from core.selectors import agent_tags
from core.updates import model_update
from memory import services as memory_services
from memory.selectors import agent_blocks
from memory.services import blocks_orphaned_by_delete
from tools import services as tool_services
from tools.selectors import agent_tools

DEFAULT_SYSTEM = (
    "You are a helpful, stateful agent. You remember across conversations through your memory blocks, "
    "which you can edit with your memory tools, through archival memory (a searchable store you can "
    "insert into), and through recall memory (every past message, searchable). Think before you act; "
    "reply to the user with send_message."
)
# letta_v1_agent answers in plain text and has no send_message (Letta's letta_v1 prompt, in short).
DEFAULT_SYSTEM_V1 = (
    "You are a helpful, stateful agent. You remember across conversations through your memory blocks, "
    "which you can edit with your memory tools, through archival memory (a searchable store you can "
    "insert into), and through recall memory (every past message, searchable). Keep calling tools until "
    "the task is done; to reply and yield control to the user, end your response without a tool call."
)
MIN_CONTEXT_WINDOW = 1024
# No model has a window near this; a bound well inside the column's 2^31 keeps token arithmetic sane.
MAX_CONTEXT_WINDOW = 10_000_000
MAX_STEPS = 1000
# Letta's agent types (the API and agent files speak them); every one runs on this server's one loop.
AGENT_TYPES = (
    "memgpt_agent",
    "memgpt_v2_agent",
    "letta_v1_agent",
    "react_agent",
    "workflow_agent",
    "split_thread_agent",
    "sleeptime_agent",
    "voice_convo_agent",
    "voice_sleeptime_agent",
)
OVERFLOW_STRATEGIES = tuple(dict(Agent.OVERFLOW))


@dataclass
class BlockInput:
    label: str
    value: str = ""
    limit: int | None = None
    description: str = ""
    read_only: bool = False
    metadata: dict = field(default_factory=dict)


def _validate_agent_fields(
    *,
    name: str | None = None,
    model: str | None = None,
    context_window_limit: int | None = None,
    tags: list[str] | None = None,
    max_steps: int | None = None,
    agent_type: str | None = None,
    overflow_strategy: str | None = None,
    embedding: str | None = None,
) -> None:
    """Raise Invalid for a field the columns cannot hold or the engine cannot use (create and update alike)."""
    if name is not None and not name.strip():
        raise Invalid("Agent name must not be empty")
    if name is not None and len(name) > 200:
        raise Invalid("Agent name is longer than 200 characters")
    if model is not None and (not isinstance(model, str) or not model.strip() or len(model) > 200):
        raise Invalid("model must be a model handle such as 'openai/gpt-4o-mini'")
    if context_window_limit is not None and (
        not isinstance(context_window_limit, int)
        or isinstance(context_window_limit, bool)
        or not MIN_CONTEXT_WINDOW <= context_window_limit <= MAX_CONTEXT_WINDOW
    ):
        raise Invalid(f"context_window_limit must be between {MIN_CONTEXT_WINDOW} and {MAX_CONTEXT_WINDOW} tokens")
    if tags is not None and any((not isinstance(t, str)) or not t.strip() or len(t) > 100 for t in tags):
        raise Invalid("tags must be non-empty strings of at most 100 characters")
    if max_steps is not None and not 1 <= max_steps <= MAX_STEPS:
        raise Invalid(f"max_steps must be between 1 and {MAX_STEPS}")
    if agent_type is not None and agent_type not in AGENT_TYPES:
        raise Invalid(f"agent_type must be one of {', '.join(AGENT_TYPES)}")
    if overflow_strategy is not None and overflow_strategy not in OVERFLOW_STRATEGIES:
        raise Invalid(f"overflow_strategy must be one of {', '.join(OVERFLOW_STRATEGIES)}")
    if embedding is not None and len(embedding) > 200:
        raise Invalid("embedding must be a model handle of at most 200 characters")


def _set_tags(agent: Agent, tags: list[str]) -> None:
    AgentTag.objects.filter(agent=agent).delete()
    AgentTag.objects.bulk_create([AgentTag(agent=agent, tag=t.strip()) for t in dict.fromkeys(tags)])


@transaction.atomic
def agent_create(
    *,
    owner: Organization,
    name: str,
    model: str | None = None,
    system: str | None = None,
    description: str = "",
    memory_blocks: list[BlockInput] = (),
    block_ids: list[str] = (),
    tools: list[str] = (),
    tool_ids: list[str] = (),
    include_base_tools: bool = True,
    include_multi_agent_tools: bool = False,
    tool_rules: list[dict] = (),
    context_window_limit: int | None = None,
    tags: list[str] = (),
    metadata: dict | None = None,
    secrets: dict | None = None,
    embedding: str = "",
    model_settings: dict | None = None,
    max_steps: int = 50,
    overflow_strategy: str = "summarize",
    agent_type: str = "memgpt_v2_agent",
    initial_messages: list[dict] = (),
    embedding_config: dict | None = None,
    approval_defaults: bool = True,
) -> Agent:
    """Create an agent with its blocks, tools, tags and system message, all in one transaction. `initial_messages`
    ({role, text}, Letta's `initial_message_sequence`) follow the system message in the context window. Each tool
    whose default_requires_approval is set adds a requires_approval rule for it unless one is given (Letta's
    create_agent_async), unless `approval_defaults` is off (a copy keeps its original's rules as they are)."""

    model = model or settings.DEFAULT_MODEL
    if system is None:
        system = DEFAULT_SYSTEM if uses_heartbeats(agent_type) else DEFAULT_SYSTEM_V1
    _validate_agent_fields(
        name=name,
        model=model,
        context_window_limit=context_window_limit,
        tags=list(tags),
        max_steps=max_steps,
        agent_type=agent_type,
        overflow_strategy=overflow_strategy,
        embedding=embedding,
    )
    rules = _parse_rules(tool_rules)
    # Resolved before the agent row exists: an unknown name or id is Letta's 400 and creates nothing.
    wanted_tools = tool_services.agent_tools_resolve(
        owner=owner,
        names=list(tools),
        ids=list(tool_ids),
        include_base=include_base_tools,
        include_multi_agent=include_multi_agent_tools,
        without=() if uses_heartbeats(agent_type) else ("send_message",),
    )
    if approval_defaults:
        for tool in wanted_tools:
            if tool.default_requires_approval:
                rules = tool_services.rules_with_approval(rules, tool.name, required=True)
    agent = Agent.objects.create(
        owner=owner,
        name=name.strip(),
        model=model,
        system=system if system is not None else DEFAULT_SYSTEM,
        description=description,
        context_window_limit=context_window_limit or _default_window(model),
        tool_rules=rules,
        metadata=metadata or {},
        secrets=_clean_secrets(secrets or {}),
        embedding=embedding,
        model_settings=model_settings or {},
        max_steps=max_steps,
        overflow_strategy=overflow_strategy,
        agent_type=agent_type,
        **({"embedding_config": embedding_config} if embedding_config else {}),
    )
    _set_tags(agent, list(tags))
    for position, spec in enumerate(memory_blocks):
        block = memory_services.block_create(
            owner=owner,
            label=spec.label,
            value=spec.value,
            limit=spec.limit,
            description=spec.description,
            read_only=spec.read_only,
            metadata=spec.metadata,
        )
        memory_services.block_attach(agent=agent, block=block, position=position)
    for block_id in block_ids:
        memory_services.block_attach_by_id(agent=agent, block_id=block_id)
    agent.tools.add(*wanted_tools)
    system_message = Message.objects.create(
        owner=owner,
        agent=agent,
        seq=0,
        role="system",
        content=[{"type": "text", "text": agent.system}],
        text=agent.system,
    )
    agent.message_ids = [system_message.id, *_initial_messages(agent, initial_messages)]
    agent.save(update_fields=["message_ids"])
    versions.version_record(agent=agent, message="created")
    return agent


def _initial_messages(agent: Agent, messages) -> list[str]:
    """Store Letta's `initial_message_sequence` right after the system message (seq 1, 2, … in the order given) and
    return their ids for the in-context list. Each is stored as Letta's package_initial_message_sequence
    (letta/services/helpers/agent_manager_helper.py) stores it: a user message packed as a `user_message` JSON with
    the time (lists show the text alone), a system message as a `system_alert` JSON, an assistant message as a
    send_message call with its return (lists show an assistant_message). A letta_v1_agent has no send_message (its
    replies are plain text), so its assistant message is that text: a call to a tool it lacks would teach the model
    to make one. Unsaved rows are validated first; nothing is written for a bad role."""
    moment = timezone.now()
    now = loop.format_time(moment)
    rows: list[Message] = []
    for index, m in enumerate(messages):
        role, text = m["role"], m["text"]
        if role == "user":
            rows.append(_initial_row(agent, "user", text=_packed("user_message", text, now, indent=2)))
        elif role == "system":
            rows.append(_initial_row(agent, "system", text=_packed("system_alert", text, now)))
        elif role == "assistant" and uses_heartbeats(agent.agent_type):
            call = {"id": str(uuid.uuid4()), "name": "send_message", "arguments": json.dumps({"message": text})}
            rows.append(_initial_row(agent, "assistant", tool_calls=[call]))
            rows.append(
                _initial_row(
                    agent,
                    "tool",
                    text=loop.format_tool_result(ok=True, message=None, now=moment),
                    tool_call_id=call["id"],
                    name="send_message",
                    tool_return={"status": "success"},
                )
            )
        elif role == "assistant":
            rows.append(_initial_row(agent, "assistant", text=text))
        else:
            raise Invalid(f"initial_message_sequence[{index}].role must be user, system or assistant, not {role!r}")
    for seq, row in enumerate(rows, start=1):
        row.seq = seq
        row.save(force_insert=True)  # one by one: each later created_at, for lists ordered by time
    return [row.id for row in rows]


def _packed(kind: str, text: str, now: str, indent: int | None = None) -> str:
    """Letta's packing of a message with its type and time (letta/system.py package_user_message, with Letta's
    json_dumps, and package_system_message, which leaves an already packed system_alert as it is)."""
    if kind == "system_alert":
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("type") == kind:
            return text
    return json.dumps({"type": kind, "message": text, "time": now}, indent=indent, ensure_ascii=indent is None)


def _initial_row(agent: Agent, role: str, *, text: str = "", tool_calls=(), **fields) -> Message:
    row = Message(
        id=new_id("message"),
        owner=agent.owner,
        agent=agent,
        role=role,
        content=[{"type": "text", "text": text}] if text else [],
        text=mapping.search_text(text, tool_calls),
        tool_calls=list(tool_calls),
        **fields,
    )
    row.token_count = count_message(agent.model, mapping.message(row))
    return row


_ADJECTIVES = (
    "amber",
    "brisk",
    "calm",
    "deft",
    "eager",
    "fond",
    "keen",
    "lucid",
    "merry",
    "nimble",
    "quiet",
    "sly",
    "swift",
    "tidy",
    "vivid",
    "wise",
)
_NOUNS = (
    "badger",
    "comet",
    "falcon",
    "fern",
    "harbor",
    "heron",
    "lantern",
    "maple",
    "otter",
    "pebble",
    "quill",
    "raven",
    "sparrow",
    "thistle",
    "willow",
    "zephyr",
)


def agent_name_generate(*, owner: Organization) -> str:
    """A readable name no agent of the owner has yet (Letta names an agent created without one); reads only."""

    taken = set(Agent.objects.filter(owner=owner).values_list("name", flat=True))
    while True:
        name = f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}-{secrets.token_hex(2)}"
        if name not in taken:
            return name


def _parse_rules(rules) -> list[dict]:
    """Validate tool rules (Letta JSON shapes) and return them normalized."""

    out = []
    for i, raw in enumerate(rules or []):
        try:
            rule = tool_rule_to_dict(tool_rule_from_dict(dict(raw)))
        except (ValueError, TypeError, KeyError) as exc:
            raise Invalid(f"tool_rules[{i}] is invalid: {exc}") from exc
        if rule not in out:  # a repeated rule changes nothing; Letta keeps it once
            out.append(rule)
    return out


def _default_window(model: str) -> int:
    return min(model_info(model).context_window, 32000)


def _clean_secrets(secrets: dict) -> dict:
    if not all(isinstance(k, str) and k.isidentifier() for k in secrets):
        raise Invalid("secret names must be valid environment variable names")
    return {k: "" if v is None else str(v) for k, v in secrets.items()}


_SIMPLE_FIELDS = (
    "name",
    "description",
    "system",
    "model",
    "context_window_limit",
    "embedding",
    "metadata",
    "max_steps",
    "overflow_strategy",
    "model_settings",
)


@transaction.atomic
def agent_update(*, agent: Agent, changes: dict) -> Agent:
    """Modify an agent's settings; only the fields given change (the IDE never writes on read). `tool_ids`, as in
    Letta, replaces the agent's tools (ToolsNotFound, 400, for an id the owner has no tool for)."""
    _validate_agent_fields(
        name=changes.get("name"),
        model=changes.get("model"),
        context_window_limit=changes.get("context_window_limit"),
        tags=changes.get("tags"),
        max_steps=changes.get("max_steps"),
        agent_type=changes.get("agent_type"),
        overflow_strategy=changes.get("overflow_strategy"),
        embedding=changes.get("embedding"),
    )
    data = {key: value for key, value in changes.items() if value is not None}
    if "tool_ids" in data:  # Letta's update replaces the whole set; an unknown id is its 400
        tools = tool_services.agent_tools_resolve(owner=agent.owner, names=[], ids=list(data["tool_ids"]))
        tool_services.agent_tools_set(agent=agent, tools=tools)
    if "tool_rules" in data:
        data["tool_rules"] = _parse_rules(data["tool_rules"])
    if "secrets" in data:
        data["secrets"] = _clean_secrets(data["secrets"])
    model_update(agent, fields=(*_SIMPLE_FIELDS, "tool_rules", "secrets"), data=data)
    if changes.get("tags") is not None:
        _set_tags(agent, changes["tags"])
    versions.version_record(agent=agent, message=changes.get("version_message") or "")
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    """Delete an agent, its messages, runs and passages, and the blocks made with it that no other agent uses
    (blocks made on their own, as `POST /v1/blocks/` does, are only detached, as in Letta)."""

    orphaned = blocks_orphaned_by_delete(agent=agent)
    agent.delete()
    for block in orphaned:
        block.delete()


@transaction.atomic
def agent_duplicate(*, agent: Agent, name: str | None = None) -> Agent:
    """Copy an agent's settings, tools, rules, tags and (unshared copies of) its blocks; no messages."""

    blocks = [
        BlockInput(
            label=b.label,
            value=b.value,
            limit=b.limit,
            description=b.description,
            read_only=b.read_only,
            metadata=dict(b.metadata or {}),
        )
        for b in agent_blocks(agent=agent)
    ]
    return agent_create(
        owner=agent.owner,
        name=name or f"{agent.name} (copy)",
        model=agent.model,
        system=agent.system,
        description=agent.description,
        memory_blocks=blocks,
        tool_ids=[t.id for t in agent_tools(agent=agent)],
        include_base_tools=False,
        tool_rules=list(agent.tool_rules or []),
        context_window_limit=agent.context_window_limit,
        tags=agent_tags(agent),
        metadata=dict(agent.metadata or {}),
        secrets=dict(agent.secrets or {}),
        embedding=agent.embedding,
        model_settings=dict(agent.model_settings or {}),
        max_steps=agent.max_steps,
        overflow_strategy=agent.overflow_strategy,
        agent_type=agent.agent_type,
        approval_defaults=False,
    )


def model_served_check(*, owner: Organization, handle: str) -> None:
    """Invalid, listing the models that are served, unless a configured provider serves this handle.

    A provider that lists its models (a server's /models, or the names given in Settings) serves only those;
    one without a listing (a hosted API with a key) serves any model under its prefix.
    """
    listed = providers.models_list(owner=owner)
    handles = sorted({m["handle"] for m in listed})
    available = f" Available: {', '.join(handles)}." if handles else " No provider is configured: add one in Settings."
    try:
        resolved = providers.model_resolve(owner=owner, handle=handle)
    except NotConfigured:
        raise Invalid(
            f"No configured provider serves the model '{handle}'.{available}", detail={"available": handles}
        ) from None
    provider = next((p for p in providers.providers_list(owner=owner) if p.name == resolved.provider), None)
    own = [m["handle"] for m in listed if m["provider_name"] == resolved.provider]
    if provider is not None and (provider.models or provider.base_url) and own and handle not in own:
        raise Invalid(
            f"The provider '{provider.name}' does not serve '{handle}'.{available}", detail={"available": handles}
        )


def _rule_tool_names(rule: dict) -> list[str]:
    names = [rule.get("tool_name"), *(rule.get("children") or ())]
    names += list((rule.get("child_output_mapping") or {}).values()) + [rule.get("default_child")]
    return [n for n in names if isinstance(n, str) and n]


def agent_settings_update(*, agent: Agent, changes: dict) -> Agent:
    """Save settings edited in the IDE; a new model must be served by a configured provider (Invalid otherwise)."""
    if changes.get("model") and changes["model"] != agent.model:
        model_served_check(owner=agent.owner, handle=changes["model"])
    return agent_update(agent=agent, changes=changes)


def agent_rules_update(*, agent: Agent, rules: list) -> Agent:
    """Save tool rules edited in the IDE; a rule naming a tool the agent does not have is refused (Invalid), but for
    requires_approval, which may name any tool (as the API's approval toggle, and Letta's, does not check it)."""

    try:
        parsed = [tool_rule_from_dict(dict(r)).to_dict() for r in rules]
    except (ValueError, TypeError, KeyError):
        parsed = []  # agent_update names the malformed rule
    have = {t.name for t in agent_tools(agent=agent)}
    for i, rule in enumerate(parsed):
        if rule["type"] == "requires_approval":
            continue
        missing = [n for n in _rule_tool_names(rule) if n not in have]
        if missing:
            raise Invalid(
                f"Rule {i + 1} names {', '.join(repr(n) for n in dict.fromkeys(missing))}, which this agent "
                f"does not have. Attach the tool first, or use one of: {', '.join(sorted(have)) or 'no tools attached'}."
            )
    return agent_update(agent=agent, changes={"tool_rules": rules})
