"""The agent's state as the engine sees it, loaded from the database, and its compiled context.

This is the one compile path: the runner compiles through `context_compile`, and the `/context` endpoint
and IDE panels read `agent_context`. Loading costs a fixed number of queries whatever the history size:
message token counts are stored on the rows, and recall size comes from the indexed max(seq).
"""

from dataclasses import dataclass, replace
from typing import Sequence

from django.db.models import Max

from core import mapping
from core.engine import types as t
from core.engine.context import compile_context, overview
from core.models import Agent, Message


@dataclass
class AgentSnapshot:
    """Everything one step needs about an agent: rows (for writes) and their engine types (for the engine)."""

    agent: Agent
    spec: t.AgentSpec
    block_rows: list
    blocks: list[t.BlockSpec]
    tool_rows: list
    tools: list[t.ToolSpec]
    rules: list[t.ToolRule]
    system_row: Message | None
    summary_row: Message | None
    body_rows: list[Message]
    stats: t.MemoryStats
    max_seq: int

    @property
    def body(self) -> list[t.Message]:
        return [mapping.message(r) for r in self.body_rows]

    @property
    def summary(self) -> t.Message | None:
        return mapping.message(self.summary_row) if self.summary_row else None


def in_context_rows(*, agent: Agent) -> list[Message]:
    """The agent's in-context message rows in window order (system message first)."""
    ids = list(agent.message_ids or [])
    rows = {m.id: m for m in Message.objects.filter(agent_id=agent.id, id__in=ids)}
    return [rows[i] for i in ids if i in rows]


def _stats(agent: Agent, in_context: int, max_seq: int) -> t.MemoryStats:
    from memory.models import BlockHistory, Passage

    last_edit = (BlockHistory.objects.filter(block__agentblock__agent_id=agent.id, actor_type__in=["agent", "user"])
                 .aggregate(m=Max("created_at"))["m"])
    return t.MemoryStats(recall_outside_window=max(0, max_seq + 1 - in_context),
                         archival_count=Passage.objects.filter(agent_id=agent.id).count(),
                         last_memory_edit=last_edit.strftime("%Y-%m-%d %I:%M:%S %p UTC") if last_edit else None)


def agent_snapshot(*, agent: Agent) -> AgentSnapshot:
    """Load an agent's blocks, tools, rules, in-context messages and memory statistics (reads only)."""
    from memory.selectors import agent_blocks
    from tools.selectors import agent_tools

    block_rows = agent_blocks(agent=agent)
    tool_rows = agent_tools(agent=agent)
    rows = in_context_rows(agent=agent)
    system_row = rows[0] if rows and rows[0].role == "system" else None
    body = rows[1:] if system_row else rows
    summary_row = body[0] if body and body[0].kind == "summary" else None
    if summary_row:
        body = body[1:]
    max_seq = Message.objects.filter(agent_id=agent.id).aggregate(m=Max("seq"))["m"] or 0
    return AgentSnapshot(
        agent=agent, spec=mapping.agent_spec(agent), block_rows=block_rows,
        blocks=[mapping.block_spec(b) for b in block_rows], tool_rows=tool_rows,
        tools=[mapping.tool_spec(x) for x in tool_rows], rules=mapping.tool_rules(agent), system_row=system_row,
        summary_row=summary_row, body_rows=body, stats=_stats(agent, len(rows), max_seq), max_seq=max_seq,
    )


def context_compile(snap: AgentSnapshot, *, extra: Sequence[t.Message] = (), body: Sequence[t.Message] | None = None,
                    summary: t.Message | None = None, allowed_tools: Sequence[str] | None = None,
                    tool_choice=None, spec: t.AgentSpec | None = None) -> t.CompiledContext:
    """Compile the snapshot (plus not-yet-stored `extra` messages) into the exact next request (pure)."""
    messages = list(snap.body if body is None else body) + list(extra)
    return compile_context(spec or snap.spec, snap.blocks, messages, snap.tools, snap.rules, snap.stats,
                           allowed_tools=allowed_tools, tool_choice=tool_choice,
                           summary=summary if summary is not None else snap.summary)


def agent_context(*, agent: Agent, context_window_limit: int | None = None, model: str | None = None,
                  system: str | None = None) -> t.CompiledContext:
    """The agent's context as its next call would send it; the overrides preview unsaved settings."""
    snap = agent_snapshot(agent=agent)
    spec = snap.spec
    if context_window_limit or model or system is not None:
        spec = replace(spec, context_window_limit=context_window_limit or spec.context_window_limit,
                       model=model or spec.model, system=spec.system if system is None else system)
    return context_compile(snap, spec=spec)


def context_overview(*, agent: Agent) -> dict:
    """Letta's context-window overview fields, our sections with text, the tokenizer and the exact request."""
    ctx = agent_context(agent=agent)
    out = overview(ctx)
    out["sections"] = [{"name": s.name, "tokens": s.tokens, "text": s.text} for s in ctx.sections]
    out["request"] = ctx.request
    out["allowed_tools"] = list(ctx.allowed_tools)
    return out
