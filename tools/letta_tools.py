"""Letta's memory tools that change which blocks an agent has (`memory`, `memory_apply_patch`: create, delete and
rename blocks, change a description) and its voice sleep-time tools (`store_memories`, `rethink_user_memory`,
`finish_rethinking_memory`, `search_memory`), as they act on stored state.

`letta_tool_prepare` runs in a step's first phase, outside any transaction: it checks the call against the agent's
blocks as the step holds them (core.engine.memory_ops computes the changes), does the reads and the embedding
calls, and returns what the agent reads back with the write left as `effect`, applied in the step's commit phase
under the agent's lock (letta/services/tool_executor/core_tool_executor.py, letta/agents/voice_sleeptime_agent.py,
letta/agents/voice_agent.py).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from core.engine import memory_ops
from core.engine.types import BlockSpec
from core.errors import Invalid
from core.models import Agent, Message
from memory import services as memory_services
from memory.models import Block
from memory.selectors import agent_blocks, messages_search, passages_search

PLANNED_TOOLS = ("memory", "memory_apply_patch", "rethink_user_memory")
VOICE_TOOLS = ("store_memories", "finish_rethinking_memory", "search_memory")


@dataclass
class Prepared:
    """A call checked and computed: what the agent reads back, and the write to apply in the commit phase."""

    value: str
    effect: Callable[[], None] | None = None
    changes: tuple[memory_ops.BlockChange, ...] = ()


def letta_tool_prepare(
    *,
    name: str,
    args: dict[str, Any],
    agent: Agent,
    blocks: Sequence[BlockSpec],
    user_query: str = "",
    step_id: str = "",
    tool_call_id: str = "",
) -> Prepared:
    """Check and compute one call (raises MemoryEditError or Invalid for the agent to read)."""
    if name in PLANNED_TOOLS:
        plan = memory_ops.memory_plan(name, args, blocks)

        def write() -> None:
            block_changes_apply(agent=agent, changes=plan.changes, step_id=step_id, tool_call_id=tool_call_id)

        return Prepared(plan.result, write, plan.changes)
    if name == "finish_rethinking_memory":
        return Prepared("")
    if name == "store_memories":
        return _store_memories(agent, args.get("chunks"))
    if name == "search_memory":
        return Prepared(_search_memory(agent, user_query, args))
    raise Invalid(f"'{name}' is not one of Letta's memory tools")


def block_changes_apply(
    *, agent: Agent, changes: Sequence[memory_ops.BlockChange], step_id: str = "", tool_call_id: str = ""
) -> None:
    """Write a memory plan's changes in order (the caller's transaction): a value or description through the block
    service (its history names the step and the call), a new block created and attached, a deleted block detached
    (kept, as Letta detaches it), a renamed block relabelled."""
    rows = {b.label: b for b in agent_blocks(agent=agent)}
    edit = {"agent_id": agent.id, "step_id": step_id, "tool_call_id": tool_call_id, "enforce_read_only": True}
    for change in changes:
        if change.kind == "create":
            if change.label in rows:
                raise memory_ops.InvalidEditError(f"Error: Memory block '{change.label}' already exists")
            block = memory_services.block_create(
                owner=agent.owner, label=change.label, value=change.value, description=change.description
            )
            memory_services.block_attach(agent=agent, block=block)
            rows[change.label] = block
            continue
        block = rows.get(change.label)
        if block is None:
            raise memory_ops.InvalidEditError(f"Error: Memory block '{change.label}' does not exist")
        if change.kind == "update":
            rows[change.label] = memory_services.block_update(block=block, changes={"value": change.value}, **edit)
        elif change.kind == "describe":
            memory_services.block_update(block=block, changes={"description": change.description}, **edit)
        elif change.kind == "rename":
            renamed = memory_services.block_update(block=block, changes={"label": change.new_label}, **edit)
            rows[change.new_label] = renamed
            del rows[change.label]
        elif change.kind == "delete":
            if Block.objects.filter(pk=block.pk, read_only=True).exists():
                raise memory_ops.BlockReadOnlyError(change.label)
            memory_services.block_detach(agent=agent, block_id=block.id)
            del rows[change.label]


def _conversation_agent(agent: Agent) -> Agent:
    """Whose conversation a sleep-time agent works on: its primary's, else its own."""
    link = getattr(agent, "sleeptime_primary", None)
    return link.agent if link is not None else agent


def transcript_lines(agent: Agent) -> list[str]:
    """The conversation as numbered lines (`role: text`, oldest first), as Letta hands its voice sleep-time agent
    the transcript that store_memories' chunks index."""
    rows = Message.objects.filter(agent=agent, role__in=("user", "assistant")).order_by("seq")
    return [f"{m.role}: {m.body or m.text}" for m in rows if (m.body or m.text).strip()]


def _store_memories(agent: Agent, chunks: Any) -> Prepared:
    """Each chunk's lines of the transcript with its context, serialized as Letta's serialize_message_history
    (letta/agents/helpers.py), embedded now and stored in the conversation agent's archival memory at commit."""
    if not isinstance(chunks, list) or not chunks:
        raise Invalid("chunks must be a non-empty list of {start_index, end_index, context}")
    target = _conversation_agent(agent)
    lines = transcript_lines(target)
    texts = []
    for chunk in chunks:
        try:
            start, end, context = int(chunk["start_index"]), int(chunk["end_index"]), str(chunk["context"])
        except (KeyError, TypeError, ValueError):
            raise Invalid("each chunk needs start_index, end_index (integers) and context") from None
        if not 0 <= start <= end:
            raise Invalid(f"Failed to store memory given start_index {start} and end_index {end}")
        root = ET.Element("memory")
        messages = ET.SubElement(root, "messages")
        for line in lines[start : end + 1]:
            ET.SubElement(messages, "message").text = line
        ET.SubElement(root, "context").text = context
        texts.append(ET.tostring(root, encoding="unicode"))
    handle, vectors, error = memory_services.passages_embed(agent=target, texts=texts)

    def write() -> None:
        memory_services.passages_insert(
            agent=target,
            texts=texts,
            metadata={"embedding_error": error} if error else None,
            embeddings=vectors,
            embedding_model=handle,
            embedded=True,
        )

    return Prepared("", write)


def _search_memory(agent: Agent, user_query: str, args: dict[str, Any]) -> str:
    """Letta's voice agent's search: the user's last words against archival memory (5, within the minutes-ago
    window), and each keyword against the conversation (3 each)."""
    now = timezone.now()
    newer, older = args.get("start_minutes_ago"), args.get("end_minutes_ago")
    start = now - timedelta(minutes=int(older)) if older is not None else None
    end = now - timedelta(minutes=int(newer)) if newer is not None else None
    if start and end and start > end:
        start, end = end, start
    passages = passages_search(agent=agent, query=user_query, top_k=5, start=start, end=end) if user_query else []
    response: dict[str, Any] = {
        "archival_search_results": [{"timestamp": str(p.created_at), "content": p.text} for p in passages]
    }
    keywords = args.get("convo_keyword_queries")
    if keywords:
        found = {}
        for keyword in keywords:
            hits = messages_search(agent=agent, query=str(keyword), limit=3)
            if hits:
                found[str(keyword)] = [m.body or m.text for m in hits]
        response["convo_keyword_search_results"] = found
    return json.dumps(response, indent=2)
