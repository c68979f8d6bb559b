"""REST endpoints for an agent's sleep-time companion: read/configure it and trigger a background run."""

from ninja import Router, Schema
from pydantic import Field

from core.api.common import owner
from core.api.schemas import SleeptimeOut, SleeptimeRunOut
from core.errors import NotFound
from core.runs import sleeptime
from core.selectors import agent_get

router = Router(tags=["agents"])


class SleeptimeIn(Schema):
    enabled: bool | None = None
    frequency: int | None = Field(
        None,
        ge=1,
        le=sleeptime.MAX_FREQUENCY,
        description="Primary turns between two background runs of the companion.",
    )


def sleeptime_out(agent, link) -> dict:
    if link is None:
        return {"agent_id": agent.id, "enabled": False, "companion_id": None, "frequency": None}
    return {
        "agent_id": agent.id,
        "enabled": link.enabled,
        "companion_id": link.companion_id,
        "frequency": link.frequency,
        "turns_since": link.turns_since,
        "last_run_id": link.last_run_id or None,
    }


@router.get("/agents/{agent_id}/sleeptime", response=SleeptimeOut, exclude_unset=True)
def sleeptime_retrieve(request, agent_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return sleeptime_out(agent, sleeptime.sleeptime_get(agent=agent))


@router.patch("/agents/{agent_id}/sleeptime", response=SleeptimeOut, exclude_unset=True)
def sleeptime_update(request, agent_id: str, body: SleeptimeIn):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    link = sleeptime.sleeptime_configure(agent=agent, enabled=body.enabled, frequency=body.frequency)
    return sleeptime_out(agent, link)


@router.post("/agents/{agent_id}/sleeptime/run", response={202: SleeptimeRunOut})
def sleeptime_run(request, agent_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    link = sleeptime.sleeptime_get(agent=agent)
    if link is None:
        raise NotFound("this agent has no sleep-time companion")
    run = sleeptime.sleeptime_run_submit(link=link, manual=True)
    return 202, {"run_id": run.id, "agent_id": link.companion_id, "status": run.status}
