"""REST endpoints for time travel: replay a step, list its replays, fork an agent at a step, usage totals.
Thin: parse, call a service, present."""

from ninja import Field, Router, Schema

from core.agents import presenters
from core.api.common import owner
from core.api.schemas import AgentStateOut, AgentUsageOut, ReplayOut
from core.runs import timetravel
from core.selectors import agent_get

router = Router(tags=["time travel"])


class ReplayIn(Schema):
    models: list[str] | None = Field(
        None,
        max_length=timetravel.MAX_REPLAY_MODELS,
        description="model handles to send the step to (default: the agent's model)",
    )
    system: str | None = Field(None, description="replace the system prompt")
    blocks: dict[str, str] | None = Field(None, description="replace block values, by label")
    messages: list[str] | None = Field(None, description="ids of messages of the step's context to leave out")
    tools_add: list[str] | None = Field(None, description="names of tools from your library to offer too")
    tools_remove: list[str] | None = Field(None, description="names of offered tools to leave out")
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)


class ForkIn(Schema):
    step_id: str
    before: bool = Field(False, description="the state the step's request was compiled from, not the one after it")
    share_blocks: bool = Field(False, description="attach the original's blocks instead of copies")
    name: str | None = Field(None, max_length=200)


@router.post("/steps/{step_id}/replay", response=ReplayOut)
def step_replay(request, step_id: str, body: ReplayIn):
    """Send a recorded step again to one or more models, with overrides; the agent is not changed."""
    org = owner(request)
    step = timetravel.step_get(owner=org, step_id=step_id)
    replay = timetravel.step_replay(
        owner=org,
        step=step,
        models=body.models,
        system=body.system,
        blocks=body.blocks,
        drop_messages=body.messages,
        tools_add=body.tools_add,
        tools_remove=body.tools_remove,
        temperature=body.temperature,
        max_tokens=body.max_tokens,
    )
    return timetravel.replay_out(replay)


@router.get("/steps/{step_id}/replays", response=list[ReplayOut])
def step_replays(request, step_id: str):
    step = timetravel.step_get(owner=owner(request), step_id=step_id)
    return [timetravel.replay_out(r) for r in timetravel.replays_list(step=step)]


@router.post("/agents/{agent_id}/fork", response=AgentStateOut)
def agent_fork(request, agent_id: str, body: ForkIn):
    """A new agent with the original's state at a step (after it, or with `before` as the step saw it)."""

    org = owner(request)
    agent = agent_get(owner=org, agent_id=agent_id)
    step = timetravel.step_get(owner=org, step_id=body.step_id)
    fork = timetravel.agent_fork(
        agent=agent, step=step, before=body.before, share_blocks=body.share_blocks, name=body.name
    )
    return presenters.agent_state(fork)


@router.get("/agents/{agent_id}/usage", response=AgentUsageOut)
def agent_usage(request, agent_id: str):
    """Tokens and cost of all the agent's steps, and how far our token counts were from the provider's."""
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    totals = timetravel.usage_totals(steps=agent.steps.all())
    return {**totals, "calibration": timetravel.token_calibration(owner=agent.owner, model=agent.model)}
