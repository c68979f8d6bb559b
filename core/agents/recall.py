"""Reads across an owner's recall and archival memory, for Letta's organization-wide routes (`/v1/messages/`,
`/v1/messages/search`, `/v1/passages/search`) and the thread filter of an agent's message list.

A thread is Letta's `conversation_id` filter: "default" is the agent's own thread (messages written outside any
conversation), `conv-…` one conversation's messages (`Message.conversation_id`). Search is full text where the
database offers it (PostgreSQL; SQLite with FTS5), else every whitespace-separated term, case-insensitively.
"""

from django.db import connections
from django.db.models import Count, F, Q, QuerySet

from core.agents.messages import assistant_returns
from core.errors import NotFound
from core.models import Agent, Message, Organization
from core.pagination import clamp_limit, cursor_unknown, seq_page
from memory.archives import tagged
from memory.models import FileStatus, Passage, PassageTag
from memory.search.fulltext import fulltext_available, query_terms, ranked_ids
from memory.search.fusion import reciprocal_rank_fusion
from memory.selectors import parse_time_bound

DEFAULT_THREAD = "default"
LIST_MAX = 1000
SEARCH_MAX = 100


def _in_thread(qs: QuerySet, conversation_id: str | None) -> QuerySet:
    if not conversation_id:
        return qs
    if conversation_id == DEFAULT_THREAD:
        return qs.filter(conversation__isnull=True)
    return qs.filter(conversation_id=conversation_id)


def _in_range(qs: QuerySet, start, end) -> QuerySet:
    start, end = parse_time_bound(start), parse_time_bound(end, end=True)
    if start:
        qs = qs.filter(created_at__gte=start)
    if end:
        qs = qs.filter(created_at__lte=end)
    return qs


def _with_agent_type(qs: QuerySet) -> QuerySet:
    """Rows carrying their agent's type (how their text lists), without loading the agents."""
    return qs.annotate(agent_type=F("agent__agent_type"))


def thread_messages_list(
    *,
    agent: Agent,
    conversation_id: str,
    before: str | None = None,
    after: str | None = None,
    limit: int = 100,
    ascending: bool = False,
    hide_assistant_returns: bool = False,
) -> list[Message]:
    """One thread's messages of the agent, paged as its whole message list pages (cursors: any of its messages;
    NotFound for another)."""
    scope = Message.objects.filter(agent=agent)
    qs = _in_thread(scope, conversation_id)
    if hide_assistant_returns:
        qs = qs.exclude(assistant_returns())
    return seq_page(qs, scope=scope, after=after, before=before, limit=limit, ascending=ascending)


def _position(owner: Organization, name: str, cursor: str) -> tuple:
    found = Message.objects.filter(owner=owner, pk=cursor).values_list("created_at", "seq", "pk").first()
    if found is None:
        raise cursor_unknown(name, cursor)
    return found


def _beyond(position: tuple, op: str) -> Q:
    """Rows after (`gt`) or before (`lt`) a (created_at, seq, id) position: time first, then the agent's order."""
    at, seq, pk = position
    return (
        Q(**{f"created_at__{op}": at})
        | Q(created_at=at, **{f"seq__{op}": seq})
        | Q(created_at=at, seq=seq, **{f"pk__{op}": pk})
    )


def messages_list(
    *,
    owner: Organization,
    before: str | None = None,
    after: str | None = None,
    limit: int = 100,
    ascending: bool = False,
    conversation_id: str | None = None,
) -> list[Message]:
    """The owner's messages across all agents, as Letta's `GET /v1/messages/` lists them: `after` newer than that
    message, `before` older (whatever the order), the `limit` first in the order asked for, and a newest-first
    page handed back oldest first. send_message's returns are left out. NotFound for an unknown cursor."""
    qs = _in_thread(Message.objects.filter(owner=owner), conversation_id).exclude(assistant_returns())
    if after:
        qs = qs.filter(_beyond(_position(owner, "after", after), "gt"))
    if before:
        qs = qs.filter(_beyond(_position(owner, "before", before), "lt"))
    keys = ("created_at", "seq", "pk") if ascending else ("-created_at", "-seq", "-pk")
    rows = list(_with_agent_type(qs).order_by(*keys)[: clamp_limit(limit, LIST_MAX)])
    return rows if ascending else rows[::-1]


def message_get(*, owner: Organization, message_id: str) -> Message:
    """One of the owner's messages (with its agent's type), or NotFound."""
    row = _with_agent_type(Message.objects.filter(owner=owner, pk=message_id)).first()
    if row is None:
        raise NotFound(f"Message '{message_id}' not found")
    return row


def _matching_ids(qs: QuerySet, query: str, limit: int) -> list[str]:
    """Ids of rows matching the query, best first: ranked full text, else rows holding every term (newest first)."""
    if fulltext_available(connections[qs.db]):
        return ranked_ids(queryset=qs, query=query, limit=limit)
    for term in query.split():
        qs = qs.filter(text__icontains=term)
    return list(qs.order_by("-created_at", "-pk").values_list("pk", flat=True)[:limit])


def messages_search(
    *,
    owner: Organization,
    query: str,
    agent_id: str | None = None,
    conversation_id: str | None = None,
    start=None,
    end=None,
    limit: int = 50,
) -> list[Message]:
    """The owner's messages matching `query` (of one agent or thread when given), best match first; tool returns and
    heartbeats are left out (Letta's search results are system, user, reasoning and assistant messages)."""
    qs = Message.objects.filter(owner=owner).exclude(role="tool").exclude(kind="heartbeat")
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    qs = _in_range(_in_thread(qs, conversation_id), start, end)
    if not query_terms(query):
        return []
    ids = _matching_ids(qs, query, clamp_limit(limit, SEARCH_MAX))
    rows = _with_agent_type(Message.objects.filter(pk__in=ids)).in_bulk()
    return [rows[i] for i in ids if i in rows]


def _passages_filtered(
    owner: Organization, agent_id, tags: list[str] | None, match_all: bool, start, end, archive_id=None
) -> QuerySet:
    qs = _in_range(Passage.objects.filter(owner=owner).defer("embedding"), start, end)
    # A file still processing has written some of its chunks already: they show once it completes.
    qs = qs.filter(Q(file__isnull=True) | Q(file__status=FileStatus.COMPLETED))
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    wanted = {t for t in tags or () if t}
    if archive_id:  # a shared archive's passages carry their tags themselves (memory.archives.tagged)
        qs = qs.filter(archive_id=archive_id)
        return tagged(qs, sorted(wanted), match_all) if wanted else qs
    if wanted:
        rows = PassageTag.objects.filter(passage__owner=owner, tag__in=wanted)
        if match_all:
            rows = rows.values("passage_id").annotate(n=Count("tag", distinct=True)).filter(n=len(wanted))
        qs = qs.filter(pk__in=rows.values("passage_id"))
    return qs


def passages_search(
    *,
    owner: Organization,
    query: str | None = None,
    agent_id: str | None = None,
    tags: list[str] | None = None,
    match_all_tags: bool = False,
    start=None,
    end=None,
    limit: int = 50,
    archive_id: str | None = None,
) -> list[Passage]:
    """The owner's passages (all its agents', one's, or one shared archive's) matching `query` by full text (best
    first, each with a fused `.score`), or the newest when there is no query; filtered by tags and creation time.
    One agent's archival search, with vectors, is memory.selectors.passages_search."""
    qs = _passages_filtered(owner, agent_id, tags, match_all_tags, start, end, archive_id)
    limit = clamp_limit(limit, SEARCH_MAX)
    if not query_terms(query or ""):
        rows = list(qs.order_by("-created_at", "-pk")[:limit])
        for row in rows:
            row.score = 0.0
        return rows
    fused = reciprocal_rank_fusion({"full_text": _matching_ids(qs, query, limit)})
    rows = Passage.objects.defer("embedding").in_bulk([pid for pid, _, _ in fused])
    out = []
    for pid, score, _ in fused:
        if pid in rows:
            rows[pid].score = score
            out.append(rows[pid])
    return out
