"""REST endpoints for agent versions (core.agents.versions). Thin: parse, call a service or selector, present."""

from ninja import Router

from core.agents import restore, versions
from core.api.common import owner
from core.api.schemas import DiffOut, RestoreIn, VersionDetailOut, VersionOut
from core.models import AgentVersion
from core.selectors import agent_get

router = Router(tags=["agent versions"])


def _out(v: AgentVersion, detail: bool = False) -> dict:
    out = {
        "number": v.number,
        "content_hash": v.content_hash,
        "author_kind": v.author_kind,
        "author": v.author,
        "message": v.message,
        "restored_from": v.restored_from,
        "created_at": v.created_at.isoformat(),
    }
    return {**out, "definition": v.definition, "blocks": v.blocks} if detail else out


@router.get("/agents/{agent_id}/versions", response=list[VersionOut])
def versions_list(request, agent_id: str):
    return [_out(v) for v in versions.versions_list(agent=agent_get(owner=owner(request), agent_id=agent_id))]


@router.get("/agents/{agent_id}/versions/{number}", response=VersionDetailOut)
def version_retrieve(request, agent_id: str, number: int):
    return _out(versions.version_get(agent=agent_get(owner=owner(request), agent_id=agent_id), number=number), True)


@router.get("/agents/{agent_id}/versions/{number}/diff", response=DiffOut)
def version_diff(request, agent_id: str, number: int, against: int | None = None):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return versions.version_diff(agent=agent, number=number, against=against)


@router.post("/agents/{agent_id}/versions/{number}/restore", response=VersionDetailOut)
def version_restore(request, agent_id: str, number: int, body: RestoreIn | None = None):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    body = body or RestoreIn()
    version = restore.version_restore(
        agent=agent, number=number, restore_blocks=body.restore_blocks, message=body.message or ""
    )
    return _out(version, True)
