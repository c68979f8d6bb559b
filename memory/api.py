"""REST endpoints for memory blocks (global and per agent)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Query, Router, Schema
from pydantic import BaseModel

from core.agents.messages import messages_to_letta
from core.agents.presenters import agent_state, block_out
from core.agents.recall import passages_search as org_passages_search
from core.api.common import PageQuery, WholeListQuery, clamped, owner
from core.api.schemas import AgentStateOut, DeletedOut, LettaMessageOut
from core.pagination import page
from core.selectors import agent_get
from memory import selectors, services
from memory.archives import archive_get
from memory.embedders.selection import embedding_handle_for_agent
from memory.presenters import passage_out, passage_search_result
from memory.schemas import (
    ArchivalStatusOut,
    BlockAgentOut,
    BlockHistoryOut,
    BlockIn,
    BlockOut,
    BlockUpdateIn,
    PassageIn,
    PassageOut,
    PassageSearchOut,
    PassageTag,
)

router = Router(tags=["blocks"])


def _agent(request, agent_id: str):
    """The caller's agent, its owner set from the request (the organization the caller acts for, already read): the
    agent's embedder and model resolution read `agent.owner`, which would otherwise cost a query of its own."""
    org = owner(request)
    agent = agent_get(owner=org, agent_id=agent_id)
    agent.owner = org
    return agent


@router.post("/blocks/", response={201: BlockOut})
def block_create(request, body: BlockIn):
    block = services.block_create(
        owner=owner(request),
        label=body.label,
        value=body.value,
        limit=body.limit,
        description=body.description or "",
        read_only=body.read_only,
        metadata=body.metadata,
        standalone=True,
    )
    return 201, block_out(block)


class BlockListQuery(PageQuery):
    label: str | None = None
    label_search: str | None = None
    value_search: str | None = None
    description_search: str | None = None
    connected_to_agents_count_eq: list[int] | None = None
    connected_to_agents_count_gt: int | None = None
    connected_to_agents_count_lt: int | None = None
    limit: int = Field(50, description=clamped(1000))
    order: Literal["asc", "desc"] = "asc"


@router.get("/blocks/", response=list[BlockOut])
def blocks_list(request, q: Query[BlockListQuery]):
    blocks = selectors.blocks_page(
        owner=owner(request),
        after=q.after,
        before=q.before,
        limit=q.limit,
        order=q.order,
        label=q.label,
        label_search=q.label_search,
        value_search=q.value_search,
        description_search=q.description_search,
        agents_eq=q.connected_to_agents_count_eq,
        agents_gt=q.connected_to_agents_count_gt,
        agents_lt=q.connected_to_agents_count_lt,
    )
    return [block_out(b) for b in blocks]


@router.get("/blocks/{block_id}", response=BlockOut)
def block_retrieve(request, block_id: str):
    return block_out(selectors.block_get(owner=owner(request), block_id=block_id))


@router.patch("/blocks/{block_id}", response=BlockOut)
def block_modify(request, block_id: str, body: BlockUpdateIn):
    block = selectors.block_get(owner=owner(request), block_id=block_id)
    return block_out(
        services.block_update(block=block, changes=body.dict(exclude_unset=True), actor_user=request.principal.user)
    )


@router.delete("/blocks/{block_id}", response=DeletedOut)
def block_delete(request, block_id: str):
    services.block_delete(block=selectors.block_get(owner=owner(request), block_id=block_id))
    return {"deleted": block_id}


@router.get("/blocks/{block_id}/agents", response=list[BlockAgentOut])
def block_agents(request, block_id: str, q: Query[WholeListQuery]):
    block = selectors.block_get(owner=owner(request), block_id=block_id)
    agents = page(selectors.block_agents(block=block), after=q.after, before=q.before, limit=q.limit, order=q.order)
    return [{"id": a.id, "name": a.name} for a in agents]


@router.get("/blocks/{block_id}/history", response=list[BlockHistoryOut])
def block_history(request, block_id: str, limit: int = Query(100, description=clamped(1000))):
    block = selectors.block_get(owner=owner(request), block_id=block_id)
    return [
        {
            "id": h.id,
            "version": h.version,
            "old_value": h.old_value,
            "new_value": h.new_value,
            "changes": h.changes,
            "actor_type": h.actor_type,
            "actor": h.actor_user.username if h.actor_user else None,
            "agent_id": h.agent_id or None,
            "step_id": h.step_id or None,
            "tool_call_id": h.tool_call_id or None,
            "created_at": h.created_at,
            "diff": selectors.block_history_diff(h),
        }
        for h in selectors.block_history(block=block, limit=limit)
    ]


@router.post("/blocks/{block_id}/restore/{version}", response=BlockOut)
def block_restore(request, block_id: str, version: int):
    block = selectors.block_get(owner=owner(request), block_id=block_id)
    return block_out(services.block_restore(block=block, version=version, actor_user=request.principal.user))


# --- per agent: /v1/agents/{id}/core-memory/blocks ---


@router.get("/agents/{agent_id}/core-memory/blocks", response=list[BlockOut], tags=["agents"])
def agent_blocks(request, agent_id: str, q: Query[WholeListQuery]):
    agent = _agent(request, agent_id)
    blocks = page(selectors.agent_blocks(agent=agent), after=q.after, before=q.before, limit=q.limit, order=q.order)
    return [block_out(b) for b in blocks]


@router.get("/agents/{agent_id}/core-memory/blocks/{label}", response=BlockOut, tags=["agents"])
def agent_block_retrieve(request, agent_id: str, label: str):
    agent = _agent(request, agent_id)
    return block_out(selectors.agent_block_by_label(agent=agent, label=label))


@router.patch("/agents/{agent_id}/core-memory/blocks/{label}", response=BlockOut, tags=["agents"])
def agent_block_modify(request, agent_id: str, label: str, body: BlockUpdateIn):
    agent = _agent(request, agent_id)
    block = selectors.agent_block_by_label(agent=agent, label=label)
    return block_out(
        services.block_update(block=block, changes=body.dict(exclude_unset=True), actor_user=request.principal.user)
    )


@router.patch("/agents/{agent_id}/core-memory/blocks/attach/{block_id}", response=AgentStateOut, tags=["agents"])
def agent_block_attach(request, agent_id: str, block_id: str):
    agent = _agent(request, agent_id)
    services.block_attach_by_id(agent=agent, block_id=block_id)
    return agent_state(agent)


@router.patch("/agents/{agent_id}/core-memory/blocks/detach/{block_id}", response=AgentStateOut, tags=["agents"])
def agent_block_detach(request, agent_id: str, block_id: str):
    agent = _agent(request, agent_id)
    services.block_detach(agent=agent, block_id=block_id)
    return agent_state(agent)


# --- archival memory: /v1/agents/{id}/archival-memory (Letta 1.x SDK: client.agents.passages.*) ---
# Fixed paths are registered before `/{memory_id}` so they are matched first.


def _archival_agent(request, agent_id: str):
    """The caller's agent as archival insert and search use it, and its archives' ids: one statement."""
    return selectors.archival_agent(owner=owner(request), agent_id=agent_id)


@router.post("/agents/{agent_id}/archival-memory", response=list[PassageOut], tags=["archival-memory"])
def passage_create(request, agent_id: str, body: PassageIn):
    agent, archive_ids = _archival_agent(request, agent_id)
    token = getattr(request.principal, "token", None)
    source = "agent" if token is not None and token.agent_id == agent.id else "user"
    passage = services.passage_insert(
        agent=agent, text=body.text, tags=body.tags, source=source, created_at=body.created_at, archive_ids=archive_ids
    )
    return [passage_out(passage)]


class PassageListQuery(PageQuery):
    """Letta's parameters: `ascending` (its own; `order` says the same, and either asks for newest first)."""

    limit: int = Field(100, description=clamped(1000))
    order: Literal["asc", "desc"] = "asc"
    search: str | None = None
    ascending: bool = True
    source: str | None = None


@router.get("/agents/{agent_id}/archival-memory", response=list[PassageOut], tags=["archival-memory"])
def passages_list(request, agent_id: str, q: Query[PassageListQuery]):
    agent, archive_ids = _archival_agent(request, agent_id)
    rows = selectors.passages_list(
        agent=agent,
        archive_ids=archive_ids,
        search=q.search,
        after=q.after,
        before=q.before,
        limit=q.limit,
        ascending=q.ascending and q.order == "asc",
        source=q.source,
    )
    return [passage_out(p) for p in rows]


@router.get("/agents/{agent_id}/archival-memory/search", response=PassageSearchOut, tags=["archival-memory"])
def passages_search(
    request,
    agent_id: str,
    query: str,
    tags: list[str] | None = Query(None),
    top_k: int | None = None,
    tag_match_mode: Literal["any", "all"] = "any",
    start_datetime: str | None = None,
    end_datetime: str | None = None,
):
    agent, archive_ids = _archival_agent(request, agent_id)
    rows = selectors.passages_search(
        agent=agent,
        archive_ids=archive_ids,
        query=query,
        top_k=top_k or 10,
        tags=tags,
        match_all_tags=tag_match_mode == "all",
        start=start_datetime,
        end=end_datetime,
    )
    return {"results": [passage_search_result(p) for p in rows], "count": len(rows)}


@router.get("/agents/{agent_id}/archival-memory/status", response=ArchivalStatusOut, tags=["archival-memory"])
def archival_status(request, agent_id: str):
    """Which search archival memory uses for this agent (the IDE shows it), and how much is stored."""

    agent = _agent(request, agent_id)
    stats = selectors.memory_stats(agent=agent)
    return {
        "search_mode": selectors.archival_search_mode(agent),
        "embedding": embedding_handle_for_agent(agent) or None,
        "num_archival_memory": stats.archival_count,
        "num_recall_memory_outside_window": stats.recall_outside_window,
    }


@router.delete("/agents/{agent_id}/archival-memory/{memory_id}", response=DeletedOut, tags=["archival-memory"])
def passage_delete(request, agent_id: str, memory_id: str):
    agent = _agent(request, agent_id)
    services.passage_delete(agent=agent, passage_id=memory_id)
    return {"deleted": memory_id}


# --- recall memory: what conversation_search sees ---


@router.get(
    "/agents/{agent_id}/recall-memory/search", response=list[LettaMessageOut], tags=["agents"], exclude_unset=True
)
def messages_search(
    request,
    agent_id: str,
    query: str = "",
    roles: list[str] | None = Query(None),
    start_date: str | None = None,
    end_date: str | None = None,
    limit: int = Query(10, description=clamped(500)),
    offset: int = Query(0, description="Rows to skip; negative counts as 0."),
):
    agent = _agent(request, agent_id)
    rows = selectors.messages_search(
        agent=agent, query=query, roles=roles, start=start_date, end=end_date, limit=limit, offset=offset
    )
    return messages_to_letta(rows)


# --- archival search across agents: Letta's POST /v1/passages/search ---


class PassagesSearchIn(Schema):
    query: Annotated[str, Field(max_length=2000)] | None = None
    agent_id: str | None = Field(None, description="Search this agent's archival memory (wins over archive_id).")
    archive_id: str | None = Field(None, description="Search this shared archive's passages (by full text).")
    tags: list[PassageTag] | None = None
    tag_match_mode: Literal["any", "all"] = "any"
    limit: int = Field(50, ge=1, le=100)
    start_date: datetime | None = None
    end_date: datetime | None = None


class PassageScoredOut(BaseModel):
    passage: PassageOut
    score: float = Field(description="Fused rank score, higher is better (0 when listed without a query).")
    metadata: dict[str, Any]


@router.post("/passages/search", response=list[PassageScoredOut], tags=["archival-memory"])
def passages_search_all(request, body: PassagesSearchIn):
    """One agent's passages (vectors and full text, as its archival search) or, without an agent, all the caller's
    by full text; best first, or newest first without a query."""
    org = owner(request)
    filters = {
        "tags": body.tags,
        "match_all_tags": body.tag_match_mode == "all",
        "start": body.start_date,
        "end": body.end_date,
    }
    if body.agent_id:
        agent = agent_get(owner=org, agent_id=body.agent_id)
        if body.query and body.query.strip():
            rows = selectors.passages_search(agent=agent, query=body.query, top_k=body.limit, **filters)
        else:
            rows = org_passages_search(owner=org, agent_id=agent.id, limit=body.limit, **filters)
    elif body.archive_id:
        archive = archive_get(owner=org, archive_id=body.archive_id)
        rows = org_passages_search(owner=org, query=body.query, archive_id=archive.id, limit=body.limit, **filters)
    else:
        rows = org_passages_search(owner=org, query=body.query, limit=body.limit, **filters)
    return [{"passage": passage_out(p), "score": getattr(p, "score", 0.0), "metadata": {}} for p in rows]
