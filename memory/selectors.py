"""Reads of memory: blocks and their history, archival passages (search) and recall messages (search)."""

import difflib
import logging
from datetime import UTC, date, datetime, time
from functools import cache

from django.db import connection, connections
from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from core import mapping
from core.engine.types import BlockSpec, MemoryStats
from core.errors import Invalid, NotFound
from core.models import Agent, Message, Organization
from core.pagination import clamp_limit, clamp_offset, cursor_unknown, queryset_page
from core.selectors import found_or_404, owned_get
from core.stamped import StampedCache
from memory.archives import agent_archive_ids, archive_nearest, archive_passages, tagged
from memory.embedders.base import EmbeddingError
from memory.embedders.selection import embedder_for_agent
from memory.models import AgentBlock, ArchiveAgent, Block, BlockHistory, Passage, PassageTag
from memory.search import fulltext, fusion, vectors
from memory.search.fulltext import fulltext_available, query_terms, ranked_ids

log = logging.getLogger(__name__)


def block_get(*, owner: Organization, block_id: str) -> Block:
    return owned_get(Block, owner=owner, id=block_id)


def blocks_list(*, owner: Organization, label: str | None = None, limit: int = 200) -> QuerySet[Block]:
    qs = Block.objects.filter(owner=owner).order_by("label", "created_at")
    if label:
        qs = qs.filter(label=label)
    return qs[: clamp_limit(limit, 1000)]


def blocks_page(
    *,
    owner: Organization,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    order: str = "asc",
    label: str | None = None,
    label_search: str | None = None,
    value_search: str | None = None,
    description_search: str | None = None,
    agents_eq: list[int] | None = None,
    agents_gt: int | None = None,
    agents_lt: int | None = None,
) -> list[Block]:
    """One page of the owner's blocks by creation time, with Letta's `GET /v1/blocks/` filters and id cursors."""
    scope = Block.objects.filter(owner=owner)
    qs = scope
    for value, lookup in (
        (label, "label"),
        (label_search, "label__icontains"),
        (value_search, "value__icontains"),
        (description_search, "description__icontains"),
    ):
        if value:
            qs = qs.filter(**{lookup: value})
    if agents_eq or agents_gt is not None or agents_lt is not None:
        qs = qs.annotate(_agents=Count("agentblock"))
        for value, lookup in ((agents_eq, "_agents__in"), (agents_gt, "_agents__gt"), (agents_lt, "_agents__lt")):
            if value is not None and value != []:
                qs = qs.filter(**{lookup: value})
    return queryset_page(qs, after=after, before=before, limit=limit, order=order, scope=scope)


def blocks_attachable(*, owner: Organization, agent: Agent, limit: int = 200) -> list[Block]:
    """The owner's blocks not attached to `agent`, each with `used_by`: the names of the agents it is attached to."""

    rows = (
        Block.objects.filter(owner=owner)
        .exclude(agentblock__agent=agent)
        .order_by("label", "created_at")
        .prefetch_related(
            Prefetch(
                "agentblock_set",
                queryset=AgentBlock.objects.select_related("agent").order_by("agent__name"),
                to_attr="links",
            )
        )[: clamp_limit(limit, 1000)]
    )
    out = list(rows)
    for block in out:
        block.used_by = [link.agent.name for link in block.links]
    return out


@cache
def _agent_blocks_sql() -> str:
    link = AgentBlock._meta
    return (
        f'SELECT b.* FROM "{Block._meta.db_table}" b JOIN "{link.db_table}" l '
        f'ON l."{link.get_field("block").column}" = b.id '
        f'WHERE l."{link.get_field("agent").column}" = %s ORDER BY l.position, l.id'
    )


def agent_blocks(*, agent: Agent) -> list[Block]:
    """The agent's blocks in their display order. Our own SQL through `Manager.raw()` (every step reads them: the
    queryset's compile cost four times the statement)."""
    return list(Block.objects.raw(_agent_blocks_sql(), [agent.pk]))


@cache
def _agent_block_stamps_sql() -> str:
    link = AgentBlock._meta
    return (
        f'SELECT b.id, b.updated_at FROM "{Block._meta.db_table}" b JOIN "{link.db_table}" l '
        f'ON l."{link.get_field("block").column}" = b.id '
        f'WHERE l."{link.get_field("agent").column}" = %s ORDER BY l.position, l.id'
    )


@cache
def _block_specs_sql(count: int) -> str:
    return (
        'SELECT id, updated_at, label, value, "limit", description, read_only '
        f'FROM "{Block._meta.db_table}" WHERE id IN ({", ".join(["%s"] * count)})'
    )


# Each block as the engine sees it (its BlockSpec), kept in this process by block id under its `updated_at`
# (core.stamped), as the tools' specs are: every write of a block sets that stamp (memory.services.block_update, under
# the block's row lock; creation). Writes never use these: block_update reads the row again under its lock. Bounded by
# the bytes of the values kept (a block holds at most a few thousand characters, its limit).
BLOCK_CACHE_BYTES = 4 * 1024 * 1024


def _spec_bytes(spec: BlockSpec) -> int:
    return 300 + len(spec.value) + len(spec.description or "")


_blocks: StampedCache[BlockSpec] = StampedCache(BLOCK_CACHE_BYTES, cost=_spec_bytes)


def _block_spec(row: tuple) -> BlockSpec:
    block_id, _stamp, label, value, limit, description, read_only = row
    block = Block(id=block_id, label=label, value=value, limit=limit, description=description)
    block.read_only = bool(read_only)
    return mapping.block_spec(block)


def agent_block_specs(*, agent: Agent) -> tuple[list[BlockSpec], datetime | None]:
    """The agent's blocks in display order as the engine sees them, and when the latest of them was last edited:
    one statement of ids and stamps, and one more for the blocks changed (or not seen) since this process last read
    them. Their rows (for writes) are read by those who write (`blocks_by_ids`)."""
    ids, specs, stamps = _blocks.read(
        stamps_sql=_agent_block_stamps_sql(), params=[agent.pk], rows_sql=_block_specs_sql, build=_block_spec
    )
    edited = max((_aware(stamp) for _, stamp in stamps), default=None)  # a block read again: its newer stamp too
    return [specs[block_id] for block_id in ids], edited


def _aware(stamp) -> datetime:
    """A stamp as read by the cursor: SQLite's is naive (UTC, as Django stores it), PostgreSQL's aware."""
    value = parse_datetime(stamp) if isinstance(stamp, str) else stamp
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@cache
def _blocks_by_ids_sql(count: int) -> str:
    return f'SELECT * FROM "{Block._meta.db_table}" WHERE id IN ({", ".join(["%s"] * count)})'


def blocks_by_ids(*, ids: list[str]) -> list[Block]:
    """Block rows by id, in the order of `ids` (one deleted meanwhile is left out). Our own SQL through
    `Manager.raw()`: a step's memory edit reads its block's row so, where the queryset's compile cost more."""
    if not ids:
        return []
    found = {block.pk: block for block in Block.objects.raw(_blocks_by_ids_sql(len(ids)), list(ids))}
    return [found[i] for i in ids if i in found]


def agents_blocks(*, agent_ids: list[str]) -> dict[str, list[Block]]:
    """Each agent's blocks in display order, for many agents in one query (lists of agents)."""
    out: dict[str, list[Block]] = {agent_id: [] for agent_id in agent_ids}
    for link in AgentBlock.objects.filter(agent_id__in=agent_ids).select_related("block").order_by("position", "id"):
        out[link.agent_id].append(link.block)
    return out


def agent_block_by_label(*, agent: Agent, label: str) -> Block:
    block = Block.objects.filter(agentblock__agent=agent, label=label).first()
    if block is None:
        raise NotFound(f"Agent '{agent.id}' has no block labelled '{label}'")
    return block


def block_agents(*, block: Block) -> list[Agent]:
    return list(Agent.objects.filter(agentblock__block=block).order_by("name"))


def block_history(*, block: Block, limit: int = 100) -> list[BlockHistory]:
    return list(BlockHistory.objects.filter(block=block).select_related("actor_user")[: clamp_limit(limit, 1000)])


def block_history_diff(entry: BlockHistory) -> list[str]:
    """Unified diff lines (no trailing newlines) from the entry's old value to its new value."""
    return list(
        difflib.unified_diff(
            entry.old_value.splitlines(),
            entry.new_value.splitlines(),
            fromfile=f"v{max(entry.version - 1, 0)}",
            tofile=f"v{entry.version}",
            lineterm="",
        )
    )


def blocks_last_change(*, blocks: list[Block]) -> dict[str, BlockHistory]:
    """Each block's latest change since it was created, by block id; an agent's edit gets `tool_name` and `step_index`
    from the return message of the tool call that made it. Two queries at most."""
    wanted = Q()
    for block in blocks:
        if block.version > 1:
            wanted |= Q(block_id=block.id, version=block.version)
    if not wanted:
        return {}
    entries = {e.block_id: e for e in BlockHistory.objects.filter(wanted).select_related("actor_user")}
    calls = {e.tool_call_id: e.step_id for e in entries.values() if e.tool_call_id and e.step_id}
    found = {}
    if calls:
        rows = Message.objects.filter(step_id__in=set(calls.values()), role="tool", tool_call_id__in=list(calls))
        found = {call: (name, index) for call, name, index in rows.values_list("tool_call_id", "name", "step__index")}
    for entry in entries.values():
        entry.tool_name, entry.step_index = found.get(entry.tool_call_id, ("", None))
    return entries


def block_last_edit(*, agent: Agent) -> datetime | None:
    """When any of the agent's blocks last changed."""
    entry = BlockHistory.objects.filter(block__agentblock__agent=agent).order_by("-created_at").first()
    return entry.created_at if entry else None


# --- time bounds shared by archival and recall search ---


def parse_time_bound(value, *, end: bool = False) -> datetime | None:
    """A datetime from an ISO date or datetime (naive = UTC); a date-only `end` bound covers that whole day."""
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time.max if end else time.min)
    else:
        text = str(value).strip().replace("Z", "+00:00")
        try:
            day = parse_date(text)
            parsed = datetime.combine(day, time.max if end else time.min) if day else parse_datetime(text)
        except ValueError:
            parsed = None
        if parsed is None:
            raise Invalid(f"'{value}' is not an ISO 8601 date or datetime")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _in_range(qs: QuerySet, start, end) -> QuerySet:
    start, end = parse_time_bound(start), parse_time_bound(end, end=True)
    if start:
        qs = qs.filter(created_at__gte=start)
    if end:
        qs = qs.filter(created_at__lte=end)
    return qs


# --- archival memory ---


@cache
def _archival_agent_sql() -> str:
    agent, link = Agent._meta, ArchiveAgent._meta
    column = link.get_field
    return (
        f'SELECT a."{agent.get_field("embedding").column}", l."{column("archive").column}" FROM "{agent.db_table}" a '
        f'LEFT JOIN "{link.db_table}" l ON l."{column("agent").column}" = a.id '
        f'WHERE a.id = %s AND a."{agent.get_field("owner").column}" = %s ORDER BY l."{column("created_at").column}", l.id'
    )


_ARCHIVAL_AGENT_FIELDS = ("id", "owner_id", "embedding")


def archival_agent(*, owner: Organization, agent_id: str) -> tuple[Agent, list[str]]:
    """The owner's agent as archival insert and search use it, and the archives attached to it (the first attached
    first, as `agent_archive_ids`): one statement, where `agent_get` and `agent_archive_ids` take two and map every
    column of the agent (its message ids among them). The agent holds its id, owner and embedding handle; any other
    field is read from the database when first used. NotFound as `agent_get`."""
    with connection.cursor() as cursor:
        cursor.execute(_archival_agent_sql(), [agent_id, owner.pk])
        rows = cursor.fetchall()
    if not rows:
        found_or_404(None, Agent, agent_id)
    known = dict(zip(_ARCHIVAL_AGENT_FIELDS, (agent_id, owner.pk, rows[0][0]), strict=True))
    names = [f.attname for f in Agent._meta.concrete_fields if f.attname in known]
    agent = Agent.from_db(connection.alias, names, [known[name] for name in names])
    agent.owner = owner
    return agent, [archive_id for _, archive_id in rows if archive_id is not None]


def _archival(agent: Agent, archive_ids: list[str] | None = None) -> QuerySet:
    """The agent's archival memory: its own passages and those of the archives attached to it (`archive_ids`, when
    the caller read them)."""
    archive_ids = agent_archive_ids(agent) if archive_ids is None else archive_ids
    if not archive_ids:
        return Passage.objects.filter(agent=agent)
    return Passage.objects.filter(Q(agent=agent) | Q(archive_id__in=archive_ids))


def passage_get(*, agent: Agent, passage_id: str) -> Passage:
    passage = _archival(agent).filter(id=passage_id).first()
    if passage is None:
        raise NotFound(f"Passage '{passage_id}' not found in agent '{agent.id}' archival memory")
    return passage


def passages_count(*, agent: Agent) -> int:
    return _archival(agent).count()


def passages_list(
    *,
    agent: Agent,
    search: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 100,
    ascending: bool = True,
    source: str | None = None,
    archive_ids: list[str] | None = None,
) -> list[Passage]:
    """A page of the agent's passages in time order (cursor `after`/`before` = passage ids); `search` ranks by text.
    `archive_ids`: the agent's archives, when the caller read them with the agent."""
    qs = _archival(agent, archive_ids).defer("embedding")
    if source:
        qs = qs.filter(source=source)
    for name, cursor_id, op in (("after", after, "gt"), ("before", before, "lt")):
        if cursor_id:
            pivot = qs.filter(id=cursor_id).first()
            if pivot is None:
                raise cursor_unknown(name, cursor_id)
            qs = qs.filter(
                Q(**{f"created_at__{op}": pivot.created_at}) | Q(created_at=pivot.created_at, **{f"id__{op}": pivot.id})
            )
    limit = max(1, min(limit, 1000))
    if search and search.strip():
        return _ordered(Passage, ranked_ids(queryset=qs, query=search, limit=limit))
    ordering = ("created_at", "id") if ascending else ("-created_at", "-id")
    return list(qs.order_by(*ordering)[:limit])


def _ordered(model, ids: list[str], extra: dict | None = None) -> list:
    rows = model.objects.in_bulk(ids)
    out = []
    for pid in ids:
        if pid in rows:
            for key, value in (extra or {}).get(pid, {}).items():
                setattr(rows[pid], key, value)
            out.append(rows[pid])
    return out


def _passages_filtered(agent: Agent, tags, match_all_tags: bool, start, end) -> QuerySet:
    qs = _in_range(Passage.objects.filter(agent=agent), start, end)
    tags = [t for t in (tags or []) if t]
    if tags:
        rows = PassageTag.objects.filter(agent=agent, tag__in=tags)
        if match_all_tags:
            rows = rows.values("passage_id").annotate(n=Count("tag", distinct=True)).filter(n=len(set(tags)))
        qs = qs.filter(id__in=rows.values("passage_id"))
    return qs


def _shared_filtered(archive_ids: list[str], tags, match_all_tags: bool, start, end) -> QuerySet:
    qs = _in_range(archive_passages(archive_ids), start, end)
    tags = [t for t in (tags or []) if t]
    return tagged(qs, tags, match_all_tags) if tags else qs


def archival_search_mode(agent: Agent, *, embedder=None) -> str:
    """How archival search runs for this agent: "hybrid" (vectors + full text), "vector" or "full_text"."""

    embedder = embedder or embedder_for_agent(agent)
    text = fulltext_available(connections[Passage.objects.db])
    if embedder is not None:
        return "hybrid" if text else "vector"
    return "full_text"


def passages_search(
    *,
    agent: Agent,
    query: str,
    top_k: int = 10,
    tags: list[str] | None = None,
    match_all_tags: bool = False,
    start=None,
    end=None,
    archive_ids: list[str] | None = None,
) -> list[Passage]:
    """The agent's passages best matching `query` (one embedding call when an embedder is configured), best first.
    Each result carries `.score` (fused) and `.matched_by` ("vector", "full_text" or both). `archive_ids`: the
    agent's archives, when the caller read them with the agent (`archival_agent`). Without tag or time filters
    the full-text ranking and the vectors on SQLite are read by our own statements, not compiled querysets."""

    top_k = max(1, min(int(top_k or 10), 100))
    plain = not any(tags or ()) and not start and not end
    qs = None if plain else _passages_filtered(agent, tags, match_all_tags, start, end)
    archive_ids = agent_archive_ids(agent) if archive_ids is None else archive_ids
    shared = _shared_filtered(archive_ids, tags, match_all_tags, start, end) if archive_ids else None
    embedder = embedder_for_agent(agent)
    mode = archival_search_mode(agent, embedder=embedder)
    pool = max(4 * top_k, 40)
    rankings: dict[str, list[str]] = {}
    if mode in ("hybrid", "vector") and (query or "").strip():
        try:
            vector = embedder.embed_one(query)
            nearest = _nearest(agent, qs, embedder.handle, vector, pool)
            if shared is not None:  # both are cosine distances: one ranking
                nearest = sorted(nearest + archive_nearest(shared, embedder.handle, vector, pool), key=lambda n: n[1])
            rankings["vector"] = [pid for pid, _ in nearest[:pool]]
        except EmbeddingError as exc:
            log.warning("archival search for %s fell back to full text: %s", agent.id, exc)
    if mode in ("hybrid", "full_text") or "vector" not in rankings:
        if plain:
            where = " OR ".join(["s.agent_id = %s"] + ["s.archive_id = %s"] * len(archive_ids))
            rankings["full_text"] = fulltext.ranked_ids_where(
                using=Passage.objects.db,
                table=Passage._meta.db_table,
                where=where,
                params=[agent.pk, *archive_ids],
                query=query,
                limit=pool,
            )
        else:
            either = (
                qs
                if shared is None
                else Passage.objects.filter(Q(id__in=qs.values("id")) | Q(id__in=shared.values("id")))
            )
            rankings["full_text"] = fulltext.ranked_ids(queryset=either, query=query, limit=pool)
    fused = fusion.reciprocal_rank_fusion(rankings)[:top_k]
    return _passages_by_ids(
        [pid for pid, _, _ in fused], {pid: {"score": score, "matched_by": by} for pid, score, by in fused}
    )


_SEARCHED_FIELDS = [f for f in Passage._meta.concrete_fields if f.name != "embedding"]


@cache
def _passages_by_ids_sql(count: int) -> str:
    columns = ", ".join(f'"{f.column}"' for f in _SEARCHED_FIELDS)
    return f'SELECT {columns} FROM "{Passage._meta.db_table}" WHERE id IN ({", ".join(["%s"] * count)})'


def _passages_by_ids(ids: list[str], extra: dict) -> list[Passage]:
    """Passages by id in the order of `ids` (at most a search's 100), with `extra` attributes set on each: one
    statement of ours, each row's values converted by its field (the queryset's compile, or `Manager.raw()`'s set-up,
    cost more than the read); their vectors are left unread (loaded if used)."""
    if not ids:
        return []
    db = connections[Passage.objects.db]
    with db.cursor() as cursor:
        cursor.execute(_passages_by_ids_sql(len(ids)), ids)
        fetched = cursor.fetchall()
    names = [f.attname for f in _SEARCHED_FIELDS]
    converters = [(i, f) for i, f in enumerate(_SEARCHED_FIELDS) if hasattr(f, "from_db_value")]
    rows = {}
    for values in fetched:
        values = list(values)
        for i, field in converters:
            values[i] = field.from_db_value(values[i], None, db)
        passage = Passage.from_db(db.alias, names, values)
        passage.created_at = _aware(passage.created_at)
        rows[passage.pk] = passage
    out = []
    for pid in ids:
        if pid in rows:
            for key, value in extra.get(pid, {}).items():
                setattr(rows[pid], key, value)
            out.append(rows[pid])
    return out


def _nearest(agent: Agent, qs: QuerySet | None, handle: str, vector, limit: int) -> list[tuple[str, float]]:
    """The agent's passages nearest the vector among `qs` (None: all of its own, unfiltered)."""
    using = Passage.objects.db if qs is None else qs.db
    if connections[using].vendor == "postgresql":
        qs = (Passage.objects.filter(agent=agent) if qs is None else qs).filter(embedding_model=handle)
        return vectors.pg_nearest(queryset=qs, vector=vector, limit=limit)
    allowed = None if qs is None else set(qs.filter(embedding_model=handle).values_list("id", flat=True))
    return vectors.matrix_nearest(
        using=using, agent_id=agent.id, model=handle, vector=vector, limit=limit, allowed_ids=allowed
    )


# --- recall memory ---


def messages_search(
    *, agent: Agent, query: str, roles: list[str] | None = None, start=None, end=None, limit: int = 10, offset: int = 0
) -> list[Message]:
    """Every message of the agent (in the window or evicted) matching `query`, best match first, newest first among
    equals; an empty query lists the newest. Without `roles`, system messages and heartbeats are left out."""

    qs = _in_range(Message.objects.filter(agent=agent), start, end)
    if roles:
        unknown = set(roles) - set(dict(Message.ROLES))
        if unknown:
            raise Invalid(f"Unknown role(s): {', '.join(sorted(unknown))}")
        qs = qs.filter(role__in=roles)
    else:
        qs = qs.exclude(role="system")
    qs = qs.exclude(kind="heartbeat")
    limit, offset = clamp_limit(limit or 10, 500), clamp_offset(offset)
    if not query_terms(query):
        return list(qs.order_by("-seq")[offset : offset + limit])
    return _ordered(Message, ranked_ids(queryset=qs, query=query, limit=limit, offset=offset, newest_first_by="seq"))


def memory_stats(*, agent: Agent):
    """Counts for the agent's `<memory_metadata>` and context overview (engine MemoryStats)."""

    total = Message.objects.filter(agent=agent).count()
    edited = block_last_edit(agent=agent)
    return MemoryStats(
        recall_outside_window=max(0, total - len(agent.message_ids or [])),
        archival_count=passages_count(agent=agent),
        last_memory_edit=edited.strftime("%Y-%m-%d %I:%M:%S %p UTC%z") if edited else None,
    )
