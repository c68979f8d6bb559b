"""The context compiler: agent state in, ordered named sections and the exact chat-completions request out.

The IDE's token breakdown and `/context` overview read the sections directly; nobody re-parses a prompt.
Compile cost depends only on what is in the window: message tokens come from Message.token_count.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter, methodcaller
from typing import Any

from core.engine import tokens
from core.engine.rules import non_heartbeat_tools, render_rules
from core.engine.types import (
    AgentSpec,
    BlockSpec,
    CompiledContext,
    MemoryStats,
    Message,
    Section,
    ToolRule,
    ToolSpec,
)

SECTION_NAMES = (
    "system",
    "tool_rules",
    "core_memory",
    "files",
    "memory_metadata",
    "summary",
    "messages",
    "tools",
)
THINKING_DESCRIPTION = "Deep inner monologue private to you only."
HEARTBEAT_DESCRIPTION = (
    "Request an immediate heartbeat after function execution. Set to true if you want to send a follow-up "
    "message or run a follow-up tool."
)
_RESERVED_PARAMS = ("thinking", "request_heartbeat")
_WIRE = methodcaller("to_openai")
_TOKEN_COUNT = attrgetter("token_count")

# The sections the system message is made of (joined by blank lines); a stored step keeps their text, the other
# sections' text is in its request already.
SYSTEM_SECTIONS = ("system", "tool_rules", "core_memory", "files", "memory_metadata")


def render_memory_blocks(blocks: Sequence[BlockSpec]) -> str:
    """The `<memory_blocks>` section text."""
    parts = ["<memory_blocks>", "The following memory blocks are currently engaged in your core memory unit:", ""]
    for b in blocks:
        meta = ["- read_only=true"] if b.read_only else []
        meta += [f"- chars_current={len(b.value)}", f"- chars_limit={b.limit}"]
        parts += [
            f"<{b.label}>",
            "<description>",
            b.description or "",
            "</description>",
            "<metadata>",
            *meta,
            "</metadata>",
        ]
        parts += ["<value>", b.value, "</value>", f"</{b.label}>", ""]
    parts.append("</memory_blocks>")
    return "\n".join(parts)


def render_memory_metadata(stats: MemoryStats, now: datetime | None = None) -> str:
    """The `<memory_metadata>` section text (the "external memory summary")."""
    lines = ["<memory_metadata>"]
    if now is not None:
        lines.append(f"- The current system date is: {now.strftime('%B %d, %Y')}")
    if stats.last_memory_edit:
        lines.append(f"- Memory blocks were last modified: {stats.last_memory_edit}")
    lines.append(
        f"- {stats.recall_outside_window} previous messages between you and the user are stored in recall memory "
        f"(use tools to access them)"
    )
    lines.append(
        f"- {stats.archival_count} total memories you created are stored in archival memory (use tools to access them)"
    )
    lines.append("</memory_metadata>")
    return "\n".join(lines)


def tool_definition(spec: ToolSpec, *, thinking: bool, heartbeat: bool) -> dict[str, Any]:
    """The OpenAI tool definition for a spec, with `thinking` first and `request_heartbeat` last as configured."""
    params = dict(spec.json_schema.get("parameters") or {"type": "object", "properties": {}})
    props: dict[str, Any] = {}
    if thinking:
        props["thinking"] = {"type": "string", "description": THINKING_DESCRIPTION}
    props.update({k: v for k, v in (params.get("properties") or {}).items() if k not in _RESERVED_PARAMS})
    required = ["thinking"] if thinking else []
    required += [r for r in params.get("required") or [] if r not in _RESERVED_PARAMS]
    if heartbeat:
        props["request_heartbeat"] = {"type": "boolean", "description": HEARTBEAT_DESCRIPTION}
        required.append("request_heartbeat")
    params.update({"type": "object", "properties": props, "required": required})
    description = spec.json_schema.get("description") or spec.description
    return {"type": "function", "function": {"name": spec.name, "description": description, "parameters": params}}


def _message_tokens(model: str, message: Message) -> int:
    # A zero count means the runner forgot to store one; count it rather than under-report.
    return message.token_count or tokens.count_message(model, message)


# A tool definition's token count by the spec it is built from (and how: thinking, heartbeat, model). Specs are
# values kept per process while their row is unchanged (tools.selectors), so a step counts only the tools new to
# it instead of encoding and hashing every definition's JSON again. Keyed by the spec's identity, which the entry
# holds (so no other object can take its id while the entry lives); a changed tool is a new spec.
_TOOL_TOKENS_MAX = 4096
_tool_tokens: dict[tuple[int, bool, bool, str], tuple[ToolSpec, int]] = {}
_tool_tokens_lock = threading.Lock()


def _tool_tokens_of(model: str, spec: ToolSpec, definition: dict[str, Any], thinking: bool, heartbeat: bool) -> int:
    key = (id(spec), thinking, heartbeat, model)
    entry = _tool_tokens.get(key)
    if entry is not None and entry[0] is spec:
        return entry[1]
    n = tokens.count_tool(model, definition)
    with _tool_tokens_lock:
        if len(_tool_tokens) >= _TOOL_TOKENS_MAX:  # the oldest first (a dict keeps its insertion order)
            _tool_tokens.pop(next(iter(_tool_tokens)))
        _tool_tokens[key] = (spec, n)
    return n


def _tools_section(
    agent: AgentSpec, tools: Sequence[ToolSpec], rules: Sequence[ToolRule], allowed: Sequence[str] | None
):
    if allowed is None:
        offered = tools
    else:
        names = set(allowed)
        offered = [t for t in tools if t.name in names]
    no_heartbeat = non_heartbeat_tools(rules)
    thinking, heartbeats, model = agent.uses_thinking_arg, agent.heartbeats, agent.model
    defs, n = [], 0
    for spec in offered:
        heartbeat = heartbeats and spec.name not in no_heartbeat
        definition = tool_definition(spec, thinking=thinking, heartbeat=heartbeat)
        defs.append(definition)
        n += _tool_tokens_of(model, spec, definition, thinking, heartbeat)
    return defs, Section(name="tools", json_of=defs, tokens=n)  # compact JSON (displays indent it)


def _ask_for_thinking(request: dict[str, Any], budget: int) -> None:
    """Anthropic's extended thinking: a budget below max_tokens, temperature 1, and no forced tool choice
    (the API refuses the others with thinking on)."""
    budget = max(1024, budget)
    request["thinking"] = {"type": "enabled", "budget_tokens": budget}
    request["max_tokens"] = max(request.get("max_tokens") or 0, budget + 1024)
    request.pop("temperature", None)
    if request.get("tool_choice") not in (None, "auto", "none"):
        request["tool_choice"] = "auto"


def compile_context(
    agent: AgentSpec,
    blocks: Sequence[BlockSpec],
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    tool_rules: Sequence[ToolRule],
    stats: MemoryStats,
    *,
    allowed_tools: Sequence[str] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    summary: Message | None = None,
    now: datetime | None = None,
    files: str = "",
) -> CompiledContext:
    """Compile the agent's context window into named sections and the exact request (pure, no I/O).

    `messages` are the in-context messages after the system message, which is always rebuilt from `agent`,
    `blocks` and `stats` (a system-role message among them, such as another agent's, is kept). `summary` is the
    conversation-summary message, placed right after the system message. `allowed_tools` narrows the
    tools offered (from rules.allowed_tools); `tool_choice` defaults to "required" when tools are offered
    ("auto" for letta_v1_agent, whose turn ends with a reply that calls no tool).
    """
    model = agent.model
    texts = {  # the system message's parts, in order (SYSTEM_SECTIONS)
        "system": agent.system,
        "tool_rules": render_rules(tool_rules),
        "core_memory": render_memory_blocks(blocks),
        "files": files,  # the `<directories>` of the agent's attached folders, rendered by its caller ("" when none)
        "memory_metadata": render_memory_metadata(stats, now),
    }
    system_text = "\n\n".join(t for t in texts.values() if t)
    sections = [Section(name=k, text=v, tokens=tokens.count_text(model, v)) for k, v in texts.items()]
    sections[0] = Section(name="system", text=agent.system, tokens=sections[0].tokens + tokens.MESSAGE_OVERHEAD_TOKENS)

    chat: list[dict[str, Any]] = [{"role": "system", "content": system_text}]
    if summary is not None:
        chat.append({"role": "user", "content": summary.content})
        sections.append(Section(name="summary", text=summary.content, tokens=_message_tokens(model, summary)))
    else:
        sections.append(Section(name="summary", text="", tokens=0))
    # Each message's wire form is built once and kept on it (Message.to_openai): a step converts only new messages.
    if agent.extended_thinking:
        history = [m.to_openai(thinking_blocks=True) for m in messages]
    else:
        history = list(map(_WIRE, messages))
    chat += history
    counts = list(map(_TOKEN_COUNT, messages))
    if 0 in counts:  # a zero count means the runner forgot to store one; count it rather than under-report
        counts = [n or tokens.count_message(model, m) for n, m in zip(counts, messages, strict=True)]
    sections.append(Section(name="messages", json_of=history, tokens=sum(counts)))
    defs, tools_section = _tools_section(agent, tools, tool_rules, allowed_tools)
    sections.append(tools_section)

    request: dict[str, Any] = {"model": model, "messages": chat}
    if defs:
        request["tools"] = defs
        request["tool_choice"] = tool_choice or ("required" if agent.heartbeats else "auto")
    if agent.temperature is not None:
        request["temperature"] = agent.temperature
    if agent.max_tokens:
        request["max_tokens"] = agent.max_tokens
    if agent.extended_thinking:
        _ask_for_thinking(request, agent.thinking_budget)
    total = sum(s.tokens for s in sections) + tokens.REPLY_PRIMING_TOKENS
    return CompiledContext(
        sections=tuple(sections),
        request=request,
        total_tokens=total,
        context_window=tokens.context_window(model, agent.context_window_limit),
        tokenizer=tokens.get_tokenizer(model).name,
        allowed_tools=tuple(d["function"]["name"] for d in defs),
        num_messages=1 + (summary is not None) + len(messages),
        num_recall_memory=stats.recall_outside_window,
        num_archival_memory=stats.archival_count,
    )


def overview(ctx: CompiledContext) -> dict[str, Any]:
    """Letta's `GET /v1/agents/{id}/context` fields, plus our per-section list and tokenizer name."""
    s = {sec.name: sec for sec in ctx.sections}
    system_text = "\n\n".join(t for t in (s["system"].text, s["tool_rules"].text) if t)
    return {
        "context_window_size_max": ctx.context_window,
        "context_window_size_current": ctx.total_tokens,
        "num_messages": ctx.num_messages,
        "num_archival_memory": ctx.num_archival_memory,
        "num_recall_memory": ctx.num_recall_memory,
        "num_tokens_system": s["system"].tokens + s["tool_rules"].tokens,
        "system_prompt": system_text,
        "num_tokens_core_memory": s["core_memory"].tokens,
        "core_memory": s["core_memory"].text,
        "num_tokens_external_memory_summary": s["memory_metadata"].tokens,
        "external_memory_summary": s["memory_metadata"].text,
        "num_tokens_summary_memory": s["summary"].tokens,
        "summary_memory": s["summary"].text or None,
        "num_tokens_functions_definitions": s["tools"].tokens,
        "functions_definitions": ctx.request.get("tools", []),
        "num_tokens_messages": s["messages"].tokens,
        "messages": ctx.request["messages"],
        "tokenizer": ctx.tokenizer,
        "sections": [{"name": sec.name, "tokens": sec.tokens} for sec in ctx.sections],
    }


def diff(a: CompiledContext, b: CompiledContext) -> list[dict[str, Any]]:
    """Per-section token deltas from `a` to `b` (plus a final "total" row), for "what grew between steps"."""
    before = {s.name: s for s in a.sections}
    after = {s.name: s for s in b.sections}
    rows = []
    for name in dict.fromkeys([*before, *after]):
        x, y = before.get(name), after.get(name)
        rows.append(
            {
                "name": name,
                "before": x.tokens if x else 0,
                "after": y.tokens if y else 0,
                "delta": (y.tokens if y else 0) - (x.tokens if x else 0),
                "changed": (x.text if x else None) != (y.text if y else None),
            }
        )
    rows.append(
        {
            "name": "total",
            "before": a.total_tokens,
            "after": b.total_tokens,
            "delta": b.total_tokens - a.total_tokens,
            "changed": a.request != b.request,
        }
    )
    return rows
