"""Identities (Letta's identity_manager, letta/services/identity_manager.py): the parties an application serves, each
known by the application's `identifier_key` (unique per project), with typed properties and the agents that serve
it. Create refuses a key already taken (409); upsert replaces the one with that key; update merges properties and
adds agents, as Letta's `replace=False`."""

from django.db import IntegrityError, transaction

from core.errors import Conflict, Invalid, NotFound
from core.models import Agent, Identity, Organization
from core.pagination import queryset_page
from core.selectors import owned_get

TYPES = ("org", "user", "other")
PROPERTY_TYPES = {"string": str, "number": (int, float), "boolean": bool, "json": dict}


def identity_get(*, owner: Organization, identity_id: str) -> Identity:
    return owned_get(Identity, owner=owner, id=identity_id)


def identities_list(
    *,
    owner: Organization,
    name: str | None = None,
    identifier_key: str | None = None,
    identity_type: str | None = None,
    project_id: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = 50,
    order: str = "desc",
) -> list[Identity]:
    """One page of the owner's identities, filtered as Letta's list (name, key, type and project match exactly)."""
    scope = Identity.objects.filter(owner=owner)
    qs = scope
    if name:
        qs = qs.filter(name=name)
    if identifier_key:
        qs = qs.filter(identifier_key=identifier_key)
    if identity_type:
        qs = qs.filter(identity_type=identity_type)
    if project_id:
        qs = qs.filter(project_id=project_id)
    qs = qs.prefetch_related("agents")
    return queryset_page(qs, after=after, before=before, limit=limit, order=order, scope=scope)


def identities_count(*, owner: Organization) -> int:
    return Identity.objects.filter(owner=owner).count()


def _properties(properties: list[dict]) -> list[dict]:
    """Letta's IdentityProperty list, each value checked against its type (Invalid otherwise)."""
    out = []
    for prop in properties:
        kind = prop.get("type")
        expected = PROPERTY_TYPES.get(kind)
        value = prop.get("value")
        if expected is None or not isinstance(value, expected) or (kind == "number" and isinstance(value, bool)):
            raise Invalid(f"Property '{prop.get('key')}': a {kind} property cannot hold {value!r}.")
        out.append({"key": prop["key"], "value": value, "type": kind})
    return out


def _agents(owner: Organization, agent_ids: list[str]) -> list[Agent]:
    """The owner's agents with these ids; NotFound naming the first that is not one (Letta: allow_partial=False)."""
    agents = {a.id: a for a in Agent.objects.filter(owner=owner, id__in=agent_ids)}
    missing = [i for i in agent_ids if i not in agents]
    if missing:
        raise NotFound(f"Agent '{missing[0]}' not found")
    return list(agents.values())


def _apply(identity: Identity, data: dict, *, replace: bool) -> Identity:
    """Set the given fields of the identity and save it; properties and agents replace or merge (`replace`)."""
    for field in ("identifier_key", "name", "identity_type"):
        if data.get(field) is not None:
            setattr(identity, field, data[field])
    if data.get("properties") is not None:
        new = _properties(data["properties"])
        if replace:
            identity.properties = new
        else:
            merged = {p["key"]: p for p in identity.properties or []} | {p["key"]: p for p in new}
            identity.properties = list(merged.values())
    try:
        with transaction.atomic():
            identity.save()
    except IntegrityError as exc:
        raise Conflict(f"An identity with identifier_key '{identity.identifier_key}' already exists.") from exc
    if data.get("agent_ids") is not None:
        agents = _agents(identity.owner, data["agent_ids"])
        if replace:
            identity.agents.set(agents)
        else:
            identity.agents.add(*agents)
    return identity


@transaction.atomic
def identity_create(*, owner: Organization, data: dict) -> Identity:
    """A new identity (Conflict when its key is taken in its project; NotFound for an agent id not the owner's)."""
    identity = Identity(owner=owner, project_id=data.get("project_id") or "")
    return _apply(identity, data, replace=True)


@transaction.atomic
def identity_upsert(*, owner: Organization, data: dict) -> Identity:
    """The identity with this key (in its project) replaced by `data`, or a new one."""
    project = data.get("project_id") or ""
    existing = Identity.objects.select_for_update().filter(
        owner=owner, identifier_key=data["identifier_key"], project_id=project
    )
    identity = next(iter(existing), None) or Identity(owner=owner, project_id=project)
    return _apply(identity, data, replace=True)


@transaction.atomic
def identity_update(*, identity: Identity, data: dict, replace: bool = False) -> Identity:
    """The identity with the given fields changed: properties merged by key, agents added (`replace`: both set)."""
    return _apply(identity, data, replace=replace)


def identity_delete(*, identity: Identity) -> None:
    """Delete the identity; its agents stay."""
    identity.delete()


def identities_get(*, owner: Organization, identity_ids: list[str]) -> list[Identity]:
    """The owner's identities with these ids; NotFound naming the first that is not one."""
    found = {i.id: i for i in Identity.objects.filter(owner=owner, id__in=identity_ids)}
    if missing := [i for i in identity_ids if i not in found]:
        raise NotFound(f"Identity '{missing[0]}' not found")
    return list(found.values())


def identities_attach(*, agent: Agent, identities: list[Identity]) -> None:
    """The agent serves these identities (besides any it served)."""
    agent.identities.add(*identities)


def identity_agent_attach(*, identity: Identity, agent: Agent) -> None:
    identity.agents.add(agent)


def identity_agent_detach(*, identity: Identity, agent: Agent) -> None:
    identity.agents.remove(agent)


def identity_agents(
    *, identity: Identity, after: str | None = None, before: str | None = None, limit: int | None = 50, order="desc"
) -> list[Agent]:
    """One page of the agents that serve the identity."""
    scope = identity.agents.all()
    return queryset_page(scope, after=after, before=before, limit=limit, order=order, scope=scope)


def identity_out(identity: Identity) -> dict:
    """Letta's Identity shape."""
    return {
        "id": identity.id,
        "identifier_key": identity.identifier_key,
        "name": identity.name,
        "identity_type": identity.identity_type,
        "project_id": identity.project_id or None,
        "agent_ids": [a.id for a in identity.agents.all()],
        "block_ids": [],
        "organization_id": identity.owner_id,
        "properties": identity.properties or [],
    }
