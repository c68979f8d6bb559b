"""Archival and recall memory as the base tools use them: thin adapters over the memory app's selectors
and services (hybrid/full-text archival search, FTS recall search), shaped as the agent reads them."""

from core.agents.messages import messages_to_letta
from core.models import Agent, Message
from memory.selectors import messages_search, passages_search
from memory.services import passage_insert, passages_embed


def archival_insert_prepare(*, agent: Agent, content: str, tags: list[str] | None = None):
    """Embed a passage the agent writes now (provider call, outside any transaction); returns the write that
    stores it, for the step's commit phase."""

    if not content.strip():
        raise ValueError("content must not be empty")
    embedded = passages_embed(agent=agent, texts=[content])
    return lambda: passage_insert(agent=agent, text=content, tags=list(tags or []), source="agent", embedded=embedded)


INSERTED = "Inserted into archival memory."


def archival_search(
    *,
    agent: Agent,
    query: str,
    tags: list[str] | None = None,
    tag_match_mode: str = "any",
    top_k: int | None = 10,
    start_datetime=None,
    end_datetime=None,
) -> list[dict]:
    """The agent's passages best matching the query, as {timestamp, content, tags} dicts."""

    hits = passages_search(
        agent=agent,
        query=query,
        top_k=top_k or 10,
        tags=tags or None,
        match_all_tags=tag_match_mode == "all",
        start=start_datetime,
        end=end_datetime,
    )
    return [{"timestamp": str(h.created_at), "content": h.text, "tags": h.tags} for h in hits]


def conversation_search(
    *, agent: Agent, query: str, roles: list[str] | None = None, limit: int | None = 10, start_date=None, end_date=None
) -> list[dict]:
    """Messages of the agent, in and out of the window, matching the query (best first)."""

    rows = messages_search(
        agent=agent, query=query, roles=roles or None, start=start_date, end=end_date, limit=limit or 10
    )
    return [
        {"timestamp": str(m.created_at), "role": m.role, "content": visible_text(m)}
        for m in rows
        if m.kind != "summary"
    ]


def visible_text(row: Message) -> str:
    """What a message says to a reader: its text, or for an assistant turn its send_message content."""
    if row.role != "assistant" or not row.tool_calls:
        return row.text

    parts = messages_to_letta([row], types=["assistant_message", "tool_call_message"])
    return " ".join(p.get("content") or f"{p['tool_call']['name']}({p['tool_call']['arguments']})" for p in parts)
