"""Scheduled messages (Letta's `agents.schedule`): messages sent to an agent at a time or on a cron expression, and
the dispatcher that sends the due ones through the run queue, like any other send.

The dispatcher runs on every process's lease sweep (core.runs.queue, at start and every RUN_LEASE_S/3), so a message
that came due while the server was down is sent when it starts. Each due row is taken in its own short transaction
that locks it (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so another process passes it by; SQLite's transactions are
IMMEDIATE, one writer at a time) and re-checks it is still due, queues the run (executor.run_submit: the agent's row
lock, the run and its task) and deletes the one-time row or moves the recurring one on, all in that transaction: the
message is sent exactly once, or not at all and still due. A busy agent (409) leaves it due for the next sweep.
"""

import logging
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, DomainError, NotFound
from core.models import Agent, ScheduledMessage
from core.pagination import queryset_page
from core.runs import cron, executor, runner
from core.runs.request import RunRequest

log = logging.getLogger(__name__)

MAX_PER_AGENT = 100
MAX_MESSAGES = 20
BATCH = 100  # due rows one sweep sends at most; the rest wait for the next sweep
_MAX_MS = 253402300799000  # 9999-12-31T23:59:59Z, the last moment a datetime holds


def _one_time_at(scheduled_at, now: datetime) -> datetime:
    if isinstance(scheduled_at, bool) or not isinstance(scheduled_at, int | float) or not 0 <= scheduled_at <= _MAX_MS:
        raise DomainError("schedule.scheduled_at must be a Unix time in milliseconds")
    at = datetime.fromtimestamp(scheduled_at / 1000, tz=UTC)
    if at <= now:
        raise DomainError(
            f"schedule.scheduled_at must be in the future (it is {at.isoformat()}, now {now.isoformat()})"
        )
    return at


def _next_of(row: ScheduledMessage, now: datetime) -> datetime:
    return cron.parse(row.cron_expression).next_after(now)


def scheduled_message_create(
    *,
    agent: Agent,
    messages: list[dict],
    schedule: dict,
    callback_url: str | None = None,
    include_return_message_types: list[str] | None = None,
    max_steps: int | None = None,
    now: datetime | None = None,
) -> ScheduledMessage:
    """Store messages to send to `agent` once at `schedule["scheduled_at"]` (Unix ms, in the future) or on
    `schedule["cron_expression"]` (5 fields, UTC); returns the row with its next time. The messages are checked as a
    send checks them (Invalid); a past time, a bad cron expression or too many schedules: DomainError (400)."""
    now = now or timezone.now()
    if not messages or len(messages) > MAX_MESSAGES:
        raise DomainError(f"messages must hold 1 to {MAX_MESSAGES} messages")
    runner.input_normalize(messages)
    row = ScheduledMessage(
        owner_id=agent.owner_id,
        agent=agent,
        messages=messages,
        callback_url=callback_url or "",
        include_return_message_types=include_return_message_types,
        max_steps=max_steps,
    )
    if schedule.get("type") == ScheduledMessage.RECURRING:
        row.kind, row.cron_expression = ScheduledMessage.RECURRING, str(schedule.get("cron_expression") or "")
        try:
            row.next_run_at = _next_of(row, now)
        except cron.CronError as exc:
            raise DomainError(f"schedule.cron_expression: {exc}") from None
    else:
        row.kind, row.scheduled_at = ScheduledMessage.ONE_TIME, schedule.get("scheduled_at")
        row.next_run_at = _one_time_at(row.scheduled_at, now)
        row.scheduled_at = int(row.scheduled_at)
    with transaction.atomic():
        list(Agent.objects.select_for_update().filter(pk=agent.pk).values_list("pk"))  # the count stays true
        if ScheduledMessage.objects.filter(agent=agent).count() >= MAX_PER_AGENT:
            raise DomainError(f"an agent has at most {MAX_PER_AGENT} scheduled messages; delete one first")
        row.save()
    return row


def scheduled_messages_list(
    *,
    agent: Agent,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    order: str = "asc",
) -> tuple[list[ScheduledMessage], bool]:
    """One page of the agent's scheduled messages by creation (Letta's cursor paging, core.pagination), and whether
    more follow it."""
    rows = ScheduledMessage.objects.filter(agent=agent)
    page = queryset_page(rows, after=after, before=before, limit=limit + 1, order=order, maximum=limit + 1)
    more = len(page) > limit
    if more:
        page = page[1:] if before and not after else page[:limit]
    return page, more


def scheduled_message_get(*, agent: Agent, scheduled_message_id: str) -> ScheduledMessage:
    """One of the agent's scheduled messages; NotFound otherwise (another agent's or another account's too)."""
    row = ScheduledMessage.objects.filter(agent=agent, pk=scheduled_message_id).first()
    if row is None:
        raise NotFound(f"Scheduled message '{scheduled_message_id}' not found")
    return row


def scheduled_message_delete(*, agent: Agent, scheduled_message_id: str) -> None:
    """Delete one of the agent's scheduled messages: it is not sent again (a send already queued goes on)."""
    if not ScheduledMessage.objects.filter(agent=agent, pk=scheduled_message_id).delete()[0]:
        raise NotFound(f"Scheduled message '{scheduled_message_id}' not found")


def scheduled_messages_dispatch(*, now: datetime | None = None) -> list[str]:
    """Send every scheduled message due at `now` (default: now) through the run queue, each exactly once across
    processes; returns the ids of the runs queued. Rows locked by another process are passed by; a busy agent's
    message stays due. Called by each process's lease sweep."""
    now = now or timezone.now()
    due = ScheduledMessage.objects.filter(next_run_at__lte=now).order_by("next_run_at", "id")
    sent = []
    for pk in list(due.values_list("pk", flat=True)[:BATCH]):
        run_id = _dispatch_one(pk, now)
        if run_id:
            sent.append(run_id)
    return sent


def on_lease_sweep(sender=None, **kwargs) -> None:
    """Receiver of queue.swept (connected in CoreConfig.ready): send what is due."""
    scheduled_messages_dispatch()


def _dispatch_one(pk: str, now: datetime) -> str | None:
    """Queue the run of one due row and move the row on, in one transaction; None if it was not sent now."""
    with transaction.atomic():
        row = ScheduledMessage.objects.select_for_update(skip_locked=True).filter(pk=pk, next_run_at__lte=now).first()
        if row is None:  # another process holds it, or sent it since we looked
            return None
        try:
            run = executor.run_submit(_request(row))
        except Conflict:
            log.info("scheduled message %s waits: agent %s is busy", row.pk, row.agent_id)
            return None
        except DomainError as exc:  # the agent cannot take it (its input no longer passes): say so, don't retry
            log.warning("scheduled message %s refused: %s", row.pk, exc.message)
            _moved_on(row, now, run_id="", error=exc.message)
            return None
        _moved_on(row, now, run_id=run.id, error="")
    log.info("scheduled message %s sent as run %s", pk, run.id)
    return run.id


def _request(row: ScheduledMessage) -> RunRequest:
    return RunRequest(
        owner=row.owner,
        agent_id=row.agent_id,
        input_messages=row.messages,
        max_steps=row.max_steps,
        background=True,
        refuse_unconfigured=False,  # no one waits to read a 400: the run ends with the how-to in the history
        request_config={
            "use_assistant_message": True,
            "assistant_message_tool_name": "send_message",
            "assistant_message_tool_kwarg": "message",
            "include_return_message_types": row.include_return_message_types,
        },
    )


def _moved_on(row: ScheduledMessage, now: datetime, *, run_id: str, error: str) -> None:
    """A one-time message that went is removed (Letta's semantics); one refused stays, with its error and no next
    time. A recurring one's next time is the first after now: a server down for several periods sends it once."""
    if row.kind == ScheduledMessage.ONE_TIME and not error:
        row.delete()
        return
    row.next_run_at = _next_of(row, now) if row.kind == ScheduledMessage.RECURRING else None
    row.last_run_id, row.last_error = run_id or row.last_run_id, error
    row.save(update_fields=["next_run_at", "last_run_id", "last_error"])
