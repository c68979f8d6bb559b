"""REST endpoints for runs (Letta v1 paths): list, read, their messages, steps and usage, and the resumption of a
background run's stream. Thin: parse, call, present."""

from typing import Literal

from ninja import Field, Query, Router, Schema

from core.agents import history, presenters
from core.agents.messages import messages_to_letta
from core.agents.steps import step_letta
from core.api.common import SSE_ONLY, PageQuery, clamped, owner
from core.api.schemas import ErrorOut, LettaMessageOut, RunOut, RunUsageOut
from core.api.steps import LettaStepOut
from core.runs.streaming import run_resumable, sse_resume
from core.sse import event_stream

router = Router(tags=["runs"])


class RunListQuery(PageQuery):
    agent_id: str | None = None
    agent_ids: list[str] | None = None
    active: bool = False
    statuses: list[str] | None = None
    background: bool | None = None
    stop_reason: str | None = None
    conversation_id: str | None = Field(None, description="`default`: runs in agents' own threads.")
    limit: int = Field(50, description=clamped(1000))
    ascending: bool | None = Field(None, description="Deprecated by Letta in favour of order.")


class RunPageQuery(PageQuery):
    """A run's messages or steps: all of them, oldest first, unless asked otherwise."""

    limit: int | None = Field(None, description="Page size (all rows when absent); clamped to 1..10000.")
    order: Literal["asc", "desc"] = "asc"


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
        conversation_id=q.conversation_id,
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
def run_messages(request, run_id: str, q: Query[RunPageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    rows = history.run_messages(
        run=run, after=q.after, before=q.before, limit=q.limit, order=q.order, hide_assistant_returns=True
    )
    # newest first, each message's parts last first too, as Letta's run_manager.get_run_messages lists them; only the
    # types the send asked for (its request_config), as there
    types = (run.request_config or {}).get("include_return_message_types")
    return messages_to_letta(rows, types=types, agent_type=run.agent.agent_type, reverse=q.order == "desc")


@router.get("/runs/{run_id}/steps", response=list[LettaStepOut])
def run_steps(request, run_id: str, q: Query[RunPageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    return [
        step_letta(s) for s in history.run_steps(run=run, after=q.after, before=q.before, limit=q.limit, order=q.order)
    ]


class RetrieveStreamIn(Schema):
    """Letta's RetrieveStreamRequest; poll_interval and batch_size are accepted and ignored (the record is read as
    it grows, whole), and so are run_id, otid and agent_id (the path names the run)."""

    starting_after: int = Field(0, ge=0, description="The last seq_id the caller saw: events after it are sent.")
    include_pings: bool = True
    poll_interval: float | None = None
    batch_size: int | None = None
    run_id: str | None = None
    otid: str | None = None
    agent_id: str | None = None


@router.post("/runs/{run_id}/stream", response={200: None, 410: ErrorOut}, openapi_extra=SSE_ONLY)
def run_stream(request, run_id: str, body: RetrieveStreamIn | None = None):
    """Resume a background run's stream: its events after `starting_after`, live until the run ends (400 for a run
    not sent in the background, 410 three hours after it was created)."""
    run = history.run_get(owner=owner(request), run_id=run_id)
    run_resumable(run)
    body = body or RetrieveStreamIn()
    return event_stream(sse_resume(run=run, starting_after=body.starting_after, include_pings=body.include_pings))


@router.get("/runs/{run_id}/usage", response=RunUsageOut)
def run_usage(request, run_id: str):
    usage = history.run_get(owner=owner(request), run_id=run_id).usage or {}
    return {
        "completion_tokens": usage.get("completion_tokens", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "step_count": usage.get("step_count", 0),
    }
