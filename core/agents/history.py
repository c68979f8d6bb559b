"""Reads of an agent's messages, runs and steps (owner-filtered), and the reset of its context window."""

from django.db import transaction
from django.db.models import Max

from core import events
from core.agents.messages import assistant_returns
from core.errors import Busy
from core.models import RUN_ACTIVE, Agent, Message, Organization, Run, Step
from core.pagination import queryset_page, seq_page
from core.selectors import owned_get


def agent_messages_list(
    *,
    agent: Agent,
    before: str | None = None,
    after: str | None = None,
    limit: int = 100,
    ascending: bool = False,
    hide_assistant_returns: bool = False,
) -> list[Message]:
    """The agent's messages (all history, in and out of the window) by seq, optionally without send_message's
    returns (left out before paging, so pages stay full), paged as Letta pages them (core.pagination.seq_page:
    `after` newer, `before` older, a newest-first page handed back oldest first); NotFound for a cursor that is not
    one of its messages."""
    scope = Message.objects.filter(agent=agent)
    qs = scope.exclude(assistant_returns()) if hide_assistant_returns else scope
    return seq_page(qs, scope=scope, after=after, before=before, limit=limit, ascending=ascending)


def run_get(*, owner: Organization, run_id: str) -> Run:
    return owned_get(Run, owner=owner, id=run_id)


def runs_list(
    *,
    owner: Organization,
    agent_ids: list[str] | None = None,
    active: bool = False,
    statuses: list[str] | None = None,
    background: bool | None = None,
    stop_reason: str | None = None,
    conversation_id: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    order: str = "desc",
) -> list[Run]:
    """One page of the owner's runs by creation time, with Letta's `GET /v1/runs/` filters and id cursors
    (`conversation_id`: `default` for runs in agents' own threads, else that conversation's)."""
    scope = Run.objects.filter(owner=owner)
    qs = scope
    if agent_ids:
        qs = qs.filter(agent_id__in=agent_ids)
    if active:
        qs = qs.filter(status__in=RUN_ACTIVE)
    if statuses:
        qs = qs.filter(status__in=statuses)
    if background is not None:
        qs = qs.filter(background=background)
    if stop_reason:
        qs = qs.filter(stop_reason=stop_reason)
    if conversation_id == "default":
        qs = qs.filter(conversation__isnull=True)
    elif conversation_id:
        qs = qs.filter(conversation_id=conversation_id)
    return queryset_page(qs, after=after, before=before, limit=limit, order=order, scope=scope)


RUN_MESSAGES_MAX = 10_000


def run_messages(
    *,
    run: Run,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str = "asc",
    hide_assistant_returns: bool = False,
) -> list[Message]:
    """The run's messages by seq (all of them unless a limit or cursor is given), optionally without
    send_message's returns (left out before paging, so pages stay full)."""
    if after is before is limit is None and order == "asc" and not hide_assistant_returns:
        return list(Message.objects.filter(run_id=run.pk).order_by("seq", "pk")[:RUN_MESSAGES_MAX])
    scope = Message.objects.filter(run=run)
    return queryset_page(
        scope.exclude(assistant_returns()) if hide_assistant_returns else scope,
        after=after,
        before=before,
        limit=limit,
        order=order,
        field="seq",
        maximum=RUN_MESSAGES_MAX,
        scope=scope,
    )


def run_steps(
    *, run: Run, after: str | None = None, before: str | None = None, limit: int | None = None, order: str = "asc"
) -> list[Step]:
    """The run's steps in the order they were taken (all of them unless a limit or cursor is given)."""
    return queryset_page(
        Step.objects.filter(run=run),
        after=after,
        before=before,
        limit=limit,
        order=order,
        field="index",
        maximum=10_000,
    )


def step_get(*, owner: Organization, step_id: str) -> Step:
    return owned_get(Step, owner=owner, id=step_id)


@transaction.atomic
def agent_messages_reset(*, agent: Agent) -> Agent:
    """Empty the context window down to a fresh system message compiled from the agent's current system prompt
    (under the agent's lock; older messages stay in recall memory, and the new system row marks the reset).
    Conflict while a run of the agent is active. Open tabs get a context_update after commit."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    busy = Run.objects.filter(agent=agent, status__in=RUN_ACTIVE).values_list("id", flat=True).first()
    if busy is not None:
        raise Busy(
            f"The agent is busy with run '{busy}'; cancel it or wait for it before resetting its messages.", run_id=busy
        )
    seq = (Message.objects.filter(agent=agent).aggregate(m=Max("seq"))["m"] or 0) + 1
    system = Message.objects.create(
        owner=agent.owner,
        agent=agent,
        seq=seq,
        role="system",
        content=[{"type": "text", "text": agent.system}],
        text=agent.system,
    )
    agent.message_ids = [system.id]
    agent.save(update_fields=["message_ids", "updated_at"])
    transaction.on_commit(lambda: _announce_reset(agent.id))
    return agent


def _announce_reset(agent_id: str) -> None:
    events.send_event(events.agent_group(agent_id), {"message_type": "context_update", "reason": "reset"})
