"""REST endpoints for identities (Letta's letta/server/rest_api/routers/v1/identities.py and the agents router's
`…/identities/attach|detach`; shapes from letta/schemas/identity.py): CRUD, upsert by identifier key, properties,
the agents serving one, and attaching an agent to one. Thin: parse, call, present."""

from typing import Literal

from ninja import Field, Query, Router, Schema

from core.agents import presenters
from core.agents.identities import (
    identities_count,
    identities_list,
    identity_agent_attach,
    identity_agent_detach,
    identity_agents,
    identity_create,
    identity_delete,
    identity_get,
    identity_out,
    identity_update,
    identity_upsert,
)
from core.api.common import PageQuery, owner
from core.api.schemas import AgentStateOut, DeletedOut
from core.models import Identity
from core.selectors import agent_get
from memory.schemas import BlockOut

router = Router(tags=["identities"])

IdentityType = Literal["org", "user", "other"]


class IdentityProperty(Schema):
    key: str = Field(min_length=1, max_length=255)
    value: str | int | float | bool | dict
    type: Literal["string", "number", "boolean", "json"]


class IdentityCreateIn(Schema):
    """Letta's IdentityCreate / IdentityUpsert; `block_ids` is accepted and ignored (blocks are not linked here)."""

    identifier_key: str = Field(min_length=1, max_length=255)
    name: str = Field(min_length=1, max_length=255)
    identity_type: IdentityType
    project_id: str | None = Field(None, max_length=255)
    agent_ids: list[str] | None = None
    block_ids: list[str] | None = None
    properties: list[IdentityProperty] | None = None


class IdentityUpdateIn(Schema):
    identifier_key: str | None = Field(None, min_length=1, max_length=255)
    name: str | None = Field(None, min_length=1, max_length=255)
    identity_type: IdentityType | None = None
    agent_ids: list[str] | None = None
    block_ids: list[str] | None = None
    properties: list[IdentityProperty] | None = None


class IdentityOut(Schema):
    id: str
    identifier_key: str
    name: str
    identity_type: IdentityType
    project_id: str | None
    agent_ids: list[str]
    block_ids: list[str]
    organization_id: str | None
    properties: list[IdentityProperty]


class IdentityListQuery(PageQuery):
    name: str | None = None
    project_id: str | None = None
    identifier_key: str | None = None
    identity_type: IdentityType | None = None


def _get(request, identity_id: str) -> Identity:
    return identity_get(owner=owner(request), identity_id=identity_id)


@router.get("/identities/", response=list[IdentityOut])
def identities_list_all(request, q: Query[IdentityListQuery]):
    found = identities_list(
        owner=owner(request),
        name=q.name,
        identifier_key=q.identifier_key,
        identity_type=q.identity_type,
        project_id=q.project_id,
        after=q.after,
        before=q.before,
        limit=q.limit,
        order=q.order,
    )
    return [identity_out(i) for i in found]


@router.get("/identities/count", response=int)
def identities_count_all(request):
    return identities_count(owner=owner(request))


@router.post("/identities/", response=IdentityOut)
def identity_create_one(request, body: IdentityCreateIn):
    """A new identity (409 when its identifier key is taken in its project)."""
    return identity_out(identity_create(owner=owner(request), data=body.dict()))


@router.put("/identities/", response=IdentityOut)
def identity_upsert_one(request, body: IdentityCreateIn):
    """The identity with this identifier key (in its project), replaced; or a new one."""
    return identity_out(identity_upsert(owner=owner(request), data=body.dict()))


@router.get("/identities/{identity_id}", response=IdentityOut)
def identity_retrieve(request, identity_id: str):
    return identity_out(_get(request, identity_id))


@router.patch("/identities/{identity_id}", response=IdentityOut)
def identity_modify(request, identity_id: str, body: IdentityUpdateIn):
    """Change the given fields: properties merge by key, `agent_ids` are added."""
    return identity_out(identity_update(identity=_get(request, identity_id), data=body.dict(exclude_unset=True)))


@router.put("/identities/{identity_id}/properties", response=IdentityOut)
def identity_properties_upsert(request, identity_id: str, body: list[IdentityProperty]):
    """Replace the identity's properties."""
    data = {"properties": [p.dict() for p in body]}
    return identity_out(identity_update(identity=_get(request, identity_id), data=data, replace=True))


@router.delete("/identities/{identity_id}", response=DeletedOut)
def identity_remove(request, identity_id: str):
    """Delete the identity (its agents stay)."""
    identity_delete(identity=_get(request, identity_id))
    return {"deleted": identity_id}


@router.get("/identities/{identity_id}/agents", response=list[AgentStateOut])
def identity_agents_list(request, identity_id: str, q: Query[PageQuery]):
    agents = identity_agents(
        identity=_get(request, identity_id), after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return presenters.agents_state(agents)


@router.get("/identities/{identity_id}/blocks", response=list[BlockOut])
def identity_blocks_list(request, identity_id: str):
    """Blocks are not linked to identities here: always empty (404 for an unknown identity)."""
    _get(request, identity_id)
    return []


@router.patch("/agents/{agent_id}/identities/attach/{identity_id}", response=AgentStateOut, tags=["agents"])
def agent_identity_attach(request, agent_id: str, identity_id: str):
    """The agent serves the identity from now on."""
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    identity_agent_attach(identity=_get(request, identity_id), agent=agent)
    return presenters.agent_state(agent)


@router.patch("/agents/{agent_id}/identities/detach/{identity_id}", response=AgentStateOut, tags=["agents"])
def agent_identity_detach(request, agent_id: str, identity_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    identity_agent_detach(identity=_get(request, identity_id), agent=agent)
    return presenters.agent_state(agent)
