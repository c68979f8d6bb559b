"""Archival and recall memory as the base tools use them.

These delegate to the memory app's services when it provides them (`passage_insert`, `passages_search`,
`messages_search`); until then, simple queries that work on both databases stand in.
"""

from datetime import datetime

from django.db.models import Q
from django.utils.dateparse import parse_date, parse_datetime

from core.models import Agent, Message


def _when(value) -> datetime | None:
    if not value:
        return None
    parsed = parse_datetime(str(value))
    if parsed is None and (d := parse_date(str(value))):
        parsed = datetime(d.year, d.month, d.day)
    if parsed is None:
        raise ValueError(f"{value!r} is not an ISO 8601 date or datetime")
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def archival_insert(*, agent: Agent, content: str, tags: list[str] | None = None) -> str:
    """Store a passage written by the agent; returns what the agent reads back."""
    from memory import services

    if hasattr(services, "passage_insert"):
        services.passage_insert(agent=agent, text=content, tags=list(tags or []), source="agent")
    else:
        from memory.models import Passage, PassageTag

        passage = Passage.objects.create(owner_id=agent.owner_id, agent=agent, text=content, tags=list(tags or []))
        PassageTag.objects.bulk_create([PassageTag(passage=passage, agent=agent, tag=t) for t in dict.fromkeys(tags or [])])
    return "Inserted into archival memory."


def archival_search(*, agent: Agent, query: str, tags: list[str] | None = None, tag_match_mode: str = "any",
                    top_k: int | None = 10, start_datetime=None, end_datetime=None) -> list[dict]:
    """The agent's passages best matching the query, as {timestamp, content, tags} dicts."""
    from memory import services

    top_k = max(1, min(int(top_k or 10), 100))
    if hasattr(services, "passages_search"):
        hits = services.passages_search(agent=agent, query=query, tags=tags, tag_match_mode=tag_match_mode, top_k=top_k,
                                        start_datetime=_when(start_datetime), end_datetime=_when(end_datetime))
        return [{"timestamp": str(h.created_at), "content": h.text, "tags": h.tags} for h in hits]
    from memory.models import Passage

    qs = Passage.objects.filter(agent=agent)
    for word in query.split():
        qs = qs.filter(text__icontains=word)
    if tags:
        qs = qs.filter(tag_rows__tag__in=tags).distinct()
    if start := _when(start_datetime):
        qs = qs.filter(created_at__gte=start)
    if end := _when(end_datetime):
        qs = qs.filter(created_at__lte=end)
    return [{"timestamp": str(p.created_at), "content": p.text, "tags": p.tags} for p in qs.order_by("-created_at")[:top_k]]


def conversation_search(*, agent: Agent, query: str, roles: list[str] | None = None, limit: int | None = 10,
                        start_date=None, end_date=None) -> list[dict]:
    """Messages of the agent (in and out of the window) matching the query, newest first."""
    limit = max(1, min(int(limit or 10), 100))
    from memory import services

    if hasattr(services, "messages_search"):
        rows = services.messages_search(agent=agent, query=query, roles=roles, limit=limit,
                                        start_date=_when(start_date), end_date=_when(end_date))
    else:
        qs = Message.objects.filter(agent=agent).exclude(role="system").exclude(kind__in=["heartbeat", "summary"])
        words = query.split()
        if words:
            cond = Q()
            for word in words:
                cond |= Q(text__icontains=word) | Q(role="assistant", tool_calls__icontains=word)
            qs = qs.filter(cond)
        if roles:
            qs = qs.filter(role__in=roles)
        if start := _when(start_date):
            qs = qs.filter(created_at__gte=start)
        if end := _when(end_date):
            qs = qs.filter(created_at__lte=end)
        rows = list(qs.order_by("-seq")[:limit])
    return [{"timestamp": str(m.created_at), "role": m.role, "content": visible_text(m)} for m in rows]


def visible_text(row: Message) -> str:
    """What a message says to a reader: its text, or for an assistant turn its send_message content."""
    if row.text or row.role != "assistant":
        return row.text
    from core.messages import messages_to_letta

    parts = messages_to_letta([row], types=["assistant_message", "tool_call_message"])
    return " ".join(p.get("content") or f"{p['tool_call']['name']}({p['tool_call']['arguments']})" for p in parts)
