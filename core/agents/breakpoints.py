"""An agent's breakpoints (the IDE's debugger): where its runs stop for a person — before every model call, before a
call of named tools, after a tool changed a block or failed, or when the prompt passes N tokens. Stored on the agent
(`Agent.breakpoints`); the runner reads them at each step (core.runs.runner `_step`, `_wait_model_call`, `_wait_calls`)."""

import uuid

from django.db import transaction

from core.engine import breakpoints
from core.errors import Invalid, NotFound
from core.models import Agent


def breakpoints_list(*, agent: Agent) -> list[dict]:
    return [b.to_dict() for b in breakpoints.breakpoints_load(agent.breakpoints)]


@transaction.atomic
def breakpoint_set(*, agent: Agent, data: dict, breakpoint_id: str | None = None) -> dict:
    """Add a breakpoint, or replace the one with `breakpoint_id`; Invalid naming what is wrong."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    points = list(locked.breakpoints or [])
    if breakpoint_id is not None and not any(p.get("id") == breakpoint_id for p in points):
        raise NotFound(f"Breakpoint '{breakpoint_id}' not found")
    try:
        point = breakpoints.breakpoint_parse(data, id=breakpoint_id or f"bp-{uuid.uuid4()}")
    except breakpoints.BreakpointError as exc:
        raise Invalid(str(exc)) from None
    if breakpoint_id is None:
        if len(points) >= 50:
            raise Invalid("An agent holds at most 50 breakpoints")
        points.append(point.to_dict())
    else:
        points = [point.to_dict() if p.get("id") == breakpoint_id else p for p in points]
    Agent.objects.filter(pk=agent.pk).update(breakpoints=points)
    agent.breakpoints = points
    return point.to_dict()


@transaction.atomic
def breakpoint_clear(*, agent: Agent, breakpoint_id: str | None = None) -> list[dict]:
    """Remove one breakpoint (NotFound if absent) or, without an id, all of them; returns those left."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    points = list(locked.breakpoints or [])
    if breakpoint_id is not None:
        kept = [p for p in points if p.get("id") != breakpoint_id]
        if len(kept) == len(points):
            raise NotFound(f"Breakpoint '{breakpoint_id}' not found")
    else:
        kept = []
    Agent.objects.filter(pk=agent.pk).update(breakpoints=kept)
    agent.breakpoints = kept
    return kept
