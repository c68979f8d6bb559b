"""REST endpoints of the debugger: an agent's breakpoints (list, set, replace, clear) and answering a run's wait
(continue with answers or edits, step, stop: core.runs.executor.wait_answer). Not in Letta's API: additions under
the agent's and the run's paths.
Thin: parse, call, present."""

from ninja import Field, Router, Schema

from core.agents import presenters
from core.agents.breakpoints import breakpoint_clear, breakpoint_set, breakpoints_list
from core.api.common import owner
from core.api.schemas import RunOut
from core.runs import executor
from core.selectors import agent_get

router = Router(tags=["breakpoints"])


class BreakpointIn(Schema):
    on: str = Field(
        description="model_call | tool_call | block_change | tokens_over | tool_error: where the run stops."
    )
    tools: list[str] = Field(default_factory=list, description="tool_call: the tools (none: any tool).")
    tokens: int | None = Field(None, description="tokens_over: stop before a model call whose prompt passes this.")
    enabled: bool = True


class BreakpointOut(Schema):
    id: str
    on: str
    tools: list[str]
    tokens: int | None
    enabled: bool


@router.get("/agents/{agent_id}/breakpoints", response=list[BreakpointOut])
def breakpoints_get(request, agent_id: str):
    return breakpoints_list(agent=agent_get(owner=owner(request), agent_id=agent_id))


@router.post("/agents/{agent_id}/breakpoints", response={201: BreakpointOut})
def breakpoint_add(request, agent_id: str, body: BreakpointIn):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return 201, breakpoint_set(agent=agent, data=body.dict())


@router.put("/agents/{agent_id}/breakpoints/{breakpoint_id}", response=BreakpointOut)
def breakpoint_replace(request, agent_id: str, breakpoint_id: str, body: BreakpointIn):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return breakpoint_set(agent=agent, data=body.dict(), breakpoint_id=breakpoint_id)


@router.delete("/agents/{agent_id}/breakpoints/{breakpoint_id}", response=list[BreakpointOut])
def breakpoint_delete(request, agent_id: str, breakpoint_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return breakpoint_clear(agent=agent, breakpoint_id=breakpoint_id)


@router.delete("/agents/{agent_id}/breakpoints", response=list[BreakpointOut])
def breakpoints_delete(request, agent_id: str):
    return breakpoint_clear(agent=agent_get(owner=owner(request), agent_id=agent_id))


class ContinueIn(Schema):
    approvals: list[dict] | None = Field(
        None,
        description="Answers to the waiting calls (Letta's approval items; an approval may carry edited `arguments`); "
        "none: every waiting call approved as it stands.",
    )
    step: bool = Field(False, description="Stop again before the next model call or tool call.")
    stop: bool = Field(False, description="End the wait instead: its calls are denied, as a cancel.")


@router.post("/runs/{run_id}/continue", response=RunOut)
def run_continue(request, run_id: str, body: ContinueIn):
    """Answer a run's wait: the new run that goes on from it (queued), or the ended run for `stop`."""
    run = executor.wait_answer(
        owner=owner(request), run_id=run_id, approvals=body.approvals, step=body.step, stop=body.stop
    )
    return presenters.run_out(run)
