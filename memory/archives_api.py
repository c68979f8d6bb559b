"""REST endpoints for shared archives (Letta's letta/server/rest_api/routers/v1/archives.py and the agents router's
`…/archives/attach|detach`; shapes from letta/schemas/archive.py): create, list, read, rename, delete; passages written
straight into one; attaching one to agents. Thin: parse, call, present."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Query, Router, Schema
from pydantic import BaseModel

from core.agents.presenters import agent_state, agents_state
from core.api.common import PageQuery, owner
from core.api.schemas import AgentStateOut
from core.selectors import agent_get
from memory import archives
from memory.models import Archive
from memory.presenters import passage_out
from memory.schemas import PassageOut, PassageTag

router = Router(tags=["archives"])


class EmbeddingConfigIn(Schema):
    """Letta's deprecated EmbeddingConfig: only its handle (or model) is read."""

    handle: str | None = None
    embedding_model: str | None = None
    embedding_endpoint_type: str | None = None


class ArchiveCreateIn(Schema):
    name: Annotated[str, Field(min_length=1, max_length=255)]
    description: str | None = None
    embedding: str | None = Field(None, max_length=200, description="Embedding model handle for the passages.")
    embedding_config: EmbeddingConfigIn | None = None


class ArchiveUpdateIn(Schema):
    name: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    description: str | None = None


class ArchiveOut(BaseModel):
    id: str
    name: str
    description: str | None
    organization_id: str
    vector_db_provider: Literal["native"] = "native"
    embedding_config: dict[str, Any] | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    created_by_id: str | None = None
    last_updated_by_id: str | None = None


class ArchiveListQuery(PageQuery):
    name: str | None = None
    agent_id: str | None = Field(None, description="Only archives attached to this agent.")


class ArchivePassageIn(Schema):
    """Letta's PassageCreateRequest."""

    text: Annotated[str, Field(min_length=1)]
    metadata: dict[str, Any] | None = None
    tags: list[PassageTag] | None = None
    created_at: datetime | None = None


class ArchivePassagesIn(Schema):
    passages: list[ArchivePassageIn] = Field(min_length=1, max_length=1000)


def archive_out(archive: Archive) -> dict:
    """Letta's Archive."""
    config = {"handle": archive.embedding, "embedding_model": archive.embedding} if archive.embedding else None
    return {
        "id": archive.id,
        "name": archive.name,
        "description": archive.description or None,
        "organization_id": archive.owner_id,
        "embedding_config": config,
        "metadata": archive.metadata or {},
        "created_at": archive.created_at,
        "updated_at": archive.updated_at,
    }


def _get(request, archive_id: str) -> Archive:
    return archives.archive_get(owner=owner(request), archive_id=archive_id)


@router.post("/archives/", response=ArchiveOut)
def archive_create(request, body: ArchiveCreateIn):
    config = body.embedding_config
    embedding = body.embedding or (config and (config.handle or config.embedding_model)) or ""
    made = archives.archive_create(
        owner=owner(request), name=body.name, description=body.description or "", embedding=embedding
    )
    return archive_out(made)


@router.get("/archives/", response=list[ArchiveOut])
def archives_list(request, q: Query[ArchiveListQuery]):
    agent = agent_get(owner=owner(request), agent_id=q.agent_id) if q.agent_id else None
    found = archives.archives_list(
        owner=owner(request), name=q.name, agent=agent, after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return [archive_out(a) for a in found]


@router.get("/archives/{archive_id}", response=ArchiveOut)
def archive_retrieve(request, archive_id: str):
    return archive_out(_get(request, archive_id))


@router.patch("/archives/{archive_id}", response=ArchiveOut)
def archive_modify(request, archive_id: str, body: ArchiveUpdateIn):
    return archive_out(archives.archive_update(archive=_get(request, archive_id), **body.dict(exclude_unset=True)))


@router.delete("/archives/{archive_id}", response={204: None})
def archive_delete(request, archive_id: str):
    """Delete the archive and its passages."""
    archives.archive_delete(archive=_get(request, archive_id))
    return 204, None


@router.get("/archives/{archive_id}/agents", response=list[AgentStateOut])
def archive_agents_list(request, archive_id: str, q: Query[PageQuery]):
    found = archives.archive_agents(
        archive=_get(request, archive_id), after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return agents_state(found)


@router.post("/archives/{archive_id}/passages", response=PassageOut)
def archive_passage_create(request, archive_id: str, body: ArchivePassageIn):
    """Store a passage in the archive (embedded with the archive's model): every attached agent finds it."""
    return passage_out(archives.archive_passages_insert(archive=_get(request, archive_id), items=[body.dict()])[0])


@router.post("/archives/{archive_id}/passages/batch", response=list[PassageOut])
def archive_passages_create(request, archive_id: str, body: ArchivePassagesIn):
    items = [p.dict() for p in body.passages]
    return [passage_out(p) for p in archives.archive_passages_insert(archive=_get(request, archive_id), items=items)]


@router.delete("/archives/{archive_id}/passages/{passage_id}", response={204: None})
def archive_passage_delete(request, archive_id: str, passage_id: str):
    archives.archive_passage_delete(archive=_get(request, archive_id), passage_id=passage_id)
    return 204, None


@router.patch("/agents/{agent_id}/archives/attach/{archive_id}", response=AgentStateOut, tags=["agents"])
def agent_archive_attach(request, agent_id: str, archive_id: str):
    """The agent searches the archive from now on, and stores its archival memories there if it is its first."""
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    archives.archive_agent_attach(archive=_get(request, archive_id), agent=agent)
    return agent_state(agent)


@router.patch("/agents/{agent_id}/archives/detach/{archive_id}", response=AgentStateOut, tags=["agents"])
def agent_archive_detach(request, agent_id: str, archive_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    archives.archive_agent_detach(archive=_get(request, archive_id), agent=agent)
    return agent_state(agent)
