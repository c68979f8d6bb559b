"""REST endpoints for scheduled messages (Letta Cloud's `/v1/agents/{agent_id}/schedule`, its SDK's
`agents.schedule`; Letta's open-source server has no such router, so the shapes are the SDK's:
letta_client/types/agents/schedule_*.py): create one-time (Unix ms) or recurring (cron, UTC), list, retrieve,
delete. Thin: parse, call, present; core.runs.schedules sends them through the run queue when due."""

from typing import Literal

from ninja import Field, Query, Router, Schema

from core.api.common import PageQuery, owner
from core.models import ScheduledMessage
from core.runs import schedules
from core.selectors import agent_get

router = Router(tags=["schedule"])

ReturnType = Literal[
    "system_message",
    "user_message",
    "assistant_message",
    "reasoning_message",
    "hidden_reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
]


class ScheduledInput(Schema):
    """A message as a send takes it (the claim checks role and text)."""

    content: str | list[dict]
    role: Literal["user", "assistant", "system"]
    name: str | None = Field(None, max_length=200)
    otid: str | None = Field(None, max_length=100)
    sender_id: str | None = Field(None, max_length=200)
    type: Literal["message"] | None = None


class OneTime(Schema):
    scheduled_at: float = Field(description="Unix time in milliseconds, in the future.")
    type: Literal["one-time"] = "one-time"


class Recurring(Schema):
    cron_expression: str = Field(max_length=200, description="5 fields, UTC: minute hour day month weekday.")
    type: Literal["recurring"]


class ScheduleCreateIn(Schema):
    messages: list[ScheduledInput] = Field(min_length=1, max_length=schedules.MAX_MESSAGES)
    schedule: Recurring | OneTime
    callback_url: str | None = Field(None, max_length=2000, description="Kept and listed back; not called here.")
    include_return_message_types: list[ReturnType] | None = None
    max_steps: int | None = Field(None, ge=1, le=1000)


class ScheduleCreateOut(Schema):
    id: str
    next_scheduled_at: str | None


class ScheduledBody(Schema):
    messages: list[dict]
    callback_url: str | None
    include_return_message_types: list[str] | None
    max_steps: int | None


class ScheduledMessageOut(Schema):
    id: str
    agent_id: str
    message: ScheduledBody
    next_scheduled_time: str | None
    schedule: dict


class ScheduleListOut(Schema):
    has_next_page: bool
    scheduled_messages: list[ScheduledMessageOut]


class ScheduleListQuery(PageQuery):
    limit: int = Field(50, ge=1, le=100)
    order: Literal["asc", "desc"] = "asc"


class SuccessOut(Schema):
    success: Literal[True] = True


def _when(row: ScheduledMessage) -> str | None:
    return row.next_run_at.isoformat().replace("+00:00", "Z") if row.next_run_at else None


def _out(row: ScheduledMessage) -> dict:
    if row.kind == ScheduledMessage.RECURRING:
        schedule = {"type": "recurring", "cron_expression": row.cron_expression}
    else:
        schedule = {"type": "one-time", "scheduled_at": row.scheduled_at}
    body = {
        "messages": row.messages,
        "callback_url": row.callback_url or None,
        "include_return_message_types": row.include_return_message_types,
        "max_steps": row.max_steps,
    }
    return {
        "id": row.id,
        "agent_id": row.agent_id,
        "message": body,
        "next_scheduled_time": _when(row),
        "schedule": schedule,
    }


@router.post("/agents/{agent_id}/schedule", response=ScheduleCreateOut)
def schedule_create(request, agent_id: str, body: ScheduleCreateIn):
    """Schedule messages to the agent at a time or on a cron expression; 400 for a past time or a bad expression."""
    row = schedules.scheduled_message_create(
        agent=agent_get(owner=owner(request), agent_id=agent_id),
        messages=[m.dict(exclude_none=True) for m in body.messages],
        schedule=body.schedule.dict(),
        callback_url=body.callback_url,
        include_return_message_types=body.include_return_message_types,
        max_steps=body.max_steps,
    )
    return {"id": row.id, "next_scheduled_at": _when(row)}


@router.get("/agents/{agent_id}/schedule", response=ScheduleListOut)
def schedule_list(request, agent_id: str, q: Query[ScheduleListQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    rows, more = schedules.scheduled_messages_list(
        agent=agent, after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return {"has_next_page": more, "scheduled_messages": [_out(r) for r in rows]}


@router.get("/agents/{agent_id}/schedule/{scheduled_message_id}", response=ScheduledMessageOut)
def schedule_retrieve(request, agent_id: str, scheduled_message_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return _out(schedules.scheduled_message_get(agent=agent, scheduled_message_id=scheduled_message_id))


@router.delete("/agents/{agent_id}/schedule/{scheduled_message_id}", response=SuccessOut)
def schedule_delete(request, agent_id: str, scheduled_message_id: str):
    """Delete it: it is not sent again."""
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    schedules.scheduled_message_delete(agent=agent, scheduled_message_id=scheduled_message_id)
    return {"success": True}
