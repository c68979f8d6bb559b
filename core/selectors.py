"""Reads, always filtered by owner: another owner's id is simply not found (404, never 403)."""

from django.db.models import Count, Q, QuerySet

from core.errors import NotFound
from core.models import Agent, Message, Organization, Run


def agent_get(*, owner: Organization, agent_id: str) -> Agent:
    """The owner's agent with this id, or NotFound."""
    agent = Agent.objects.filter(owner=owner, id=agent_id).first()
    if agent is None:
        raise NotFound(f"Agent '{agent_id}' not found")
    return agent


def agents_list(*, owner: Organization, name: str | None = None, tags: list[str] | None = None, match_all_tags: bool = False,
                query_text: str | None = None, before: str | None = None, after: str | None = None,
                limit: int = 50, ascending: bool = False) -> QuerySet[Agent]:
    """The owner's agents, filtered as Letta's `GET /v1/agents/` does (name, tags any/all, text, cursors)."""
    qs = Agent.objects.filter(owner=owner)
    if name:
        qs = qs.filter(name=name)
    if query_text:
        qs = qs.filter(Q(name__icontains=query_text) | Q(description__icontains=query_text))
    if tags:
        if match_all_tags:
            qs = qs.filter(tag_rows__tag__in=tags).annotate(_n=Count("tag_rows", filter=Q(tag_rows__tag__in=tags), distinct=True)).filter(_n=len(set(tags)))
        else:
            qs = qs.filter(tag_rows__tag__in=tags).distinct()
    order = ("created_at", "id") if ascending else ("-created_at", "-id")
    qs = qs.order_by(*order)
    for cursor, newer in ((after, ascending), (before, not ascending)):
        if cursor:
            ref = Agent.objects.filter(owner=owner, id=cursor).values_list("created_at", flat=True).first()
            if ref is not None:
                qs = qs.filter(created_at__gt=ref) if newer else qs.filter(created_at__lt=ref)
    return qs.prefetch_related("tag_rows")[: max(1, min(limit, 1000))]


def agent_tags(agent: Agent) -> list[str]:
    return sorted(row.tag for row in agent.tag_rows.all())


def agents_running_ids(*, owner: Organization) -> set[str]:
    """Ids of the owner's agents with a run in progress."""
    return set(Run.objects.filter(owner=owner, status__in=["created", "running"]).values_list("agent_id", flat=True))


def message_get(*, owner: Organization, message_id: str) -> Message:
    msg = Message.objects.filter(owner=owner, id=message_id).first()
    if msg is None:
        raise NotFound(f"Message '{message_id}' not found")
    return msg
