"""REST endpoints for runs and their steps (Letta v1 paths): list, read, their messages, steps and usage. Thin:
parse, call, present."""

from typing import Literal

from ninja import Field, Query, Router, Schema

from core.agents import history, presenters
from core.agents.messages import messages_to_letta
from core.api.agents import owner
from core.api.schemas import LettaMessageOut, RunOut, RunUsageOut, StepOut

router = Router(tags=["runs"])


class RunListQuery(Schema):
    agent_id: str | None = None
    agent_ids: list[str] | None = None
    active: bool = False
    statuses: list[str] | None = None
    background: bool | None = None
    stop_reason: str | None = None
    after: str | None = None
    before: str | None = None
    limit: int = Field(50, description="Page size; values outside 1..1000 are clamped to it.")
    order: Literal["asc", "desc"] = "desc"
    order_by: Literal["created_at"] = "created_at"
    ascending: bool | None = Field(None, description="Deprecated by Letta in favour of order.")


class PageQuery(Schema):
    after: str | None = None
    before: str | None = None
    limit: int | None = Field(None, description="Page size (all rows when absent); clamped to 1..10000.")
    order: Literal["asc", "desc"] = "asc"
    order_by: Literal["created_at"] = "created_at"


@router.get("/runs/", response=list[RunOut])
def runs_list(request, q: Query[RunListQuery]):
    order = q.order if q.ascending is None else ("asc" if q.ascending else "desc")
    agent_ids = [*(q.agent_ids or []), *([q.agent_id] if q.agent_id else [])]
    runs = history.runs_list(
        owner=owner(request),
        agent_ids=agent_ids,
        active=q.active,
        statuses=q.statuses,
        background=q.background,
        stop_reason=q.stop_reason,
        after=q.after,
        before=q.before,
        limit=q.limit,
        order=order,
    )
    return [presenters.run_out(r) for r in runs]


@router.get("/runs/{run_id}", response=RunOut)
def run_retrieve(request, run_id: str):
    return presenters.run_out(history.run_get(owner=owner(request), run_id=run_id))


@router.get("/runs/{run_id}/messages", response=list[LettaMessageOut], exclude_unset=True)
def run_messages(request, run_id: str, q: Query[PageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    rows = history.run_messages(
        run=run, after=q.after, before=q.before, limit=q.limit, order=q.order, hide_assistant_returns=True
    )
    return messages_to_letta(rows, agent_type=run.agent.agent_type)


@router.get("/runs/{run_id}/steps", response=list[StepOut])
def run_steps(request, run_id: str, q: Query[PageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    return [
        presenters.step_out(s)
        for s in history.run_steps(run=run, after=q.after, before=q.before, limit=q.limit, order=q.order)
    ]


@router.get("/steps/{step_id}", response=StepOut)
def step_retrieve(request, step_id: str):
    return presenters.step_out(history.step_get(owner=owner(request), step_id=step_id))


@router.get("/runs/{run_id}/usage", response=RunUsageOut)
def run_usage(request, run_id: str):
    usage = history.run_get(owner=owner(request), run_id=run_id).usage or {}
    return {
        "completion_tokens": usage.get("completion_tokens", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "step_count": usage.get("step_count", 0),
    }
