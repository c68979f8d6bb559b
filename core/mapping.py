"""The one place ORM rows become engine types (the engine must not import Django)."""

import json
from collections.abc import Sequence

from core.engine import types as t
from core.models import Agent, Message


def agent_spec(agent: Agent) -> t.AgentSpec:
    ms = agent.model_settings or {}
    return t.AgentSpec(
        id=agent.id,
        name=agent.name,
        system=agent.system,
        model=agent.model,
        temperature=ms.get("temperature", 0.7),
        max_tokens=ms.get("max_tokens"),
        context_window_limit=agent.context_window_limit,
        native_reasoning=bool(ms.get("native_reasoning", False)),
        put_inner_thoughts=bool(ms.get("put_inner_thoughts", False)),
        agent_type=agent.agent_type,
        thinking_budget=int(ms.get("max_reasoning_tokens") or 1024),
    )


def block_spec(block) -> t.BlockSpec:
    return t.BlockSpec(
        id=block.id,
        label=block.label,
        value=block.value,
        limit=block.limit,
        description=block.description or None,
        read_only=block.read_only,
    )


def tool_spec(tool) -> t.ToolSpec:
    return t.ToolSpec(
        name=tool.name,
        description=tool.description,
        json_schema=tool.json_schema,
        kind=tool.tool_type,
        return_char_limit=tool.return_char_limit,
    )


def message(row: Message) -> t.Message:
    return t.Message(
        id=row.id,
        role=t.Role(row.role),
        content=row.body if row.role == "assistant" else row.text,
        tool_calls=tuple(
            t.ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments", "{}")) for c in row.tool_calls or ()
        ),
        tool_call_id=row.tool_call_id or None,
        name=row.name or None,
        reasoning=row.reasoning or None,
        token_count=row.token_count,
        thinking_blocks=tuple(row.thinking_blocks or ()),
    )


def tool_rules(agent: Agent) -> list[t.ToolRule]:
    return [t.tool_rule_from_dict(r) for r in agent.tool_rules or ()]


def search_text(text: str, tool_calls: Sequence[dict] = ()) -> str:
    """The searchable text of a message: its content plus what the agent said through send_message."""
    said = []
    for call in tool_calls or ():
        if call.get("name") != "send_message":
            continue
        try:
            args = json.loads(call.get("arguments") or "{}")
        except ValueError:
            continue
        if isinstance(args, dict) and isinstance(args.get("message"), str):
            said.append(args["message"])
    return "\n".join(x for x in (text, *said) if x)
