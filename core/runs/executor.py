"""The one way to run an agent: claim and enqueue in one transaction, execute on the run pool under a lease.

Every run — a synchronous `POST …/messages`, an SSE stream, a websocket send, `…/messages/async`, an
agent-to-agent message — is claimed (`runner.run_start`, the agent's row lock; 409 if busy) and its task
enqueued in the same transaction, so a claimed run always has a task and a task always has its run. A pool
thread (this process's on the embedded default, a `run_worker` process's with RUNS_IN_WORKER) executes it
under a lease (core.runs.queue); callers only wait for the run (`run_wait`) or follow the agent's events
(core.runs.streaming). One rule finds dead runs: a lapsed lease.

A synchronous caller that would only block until its run ends (`run_call`) lends its own thread instead: when
this process's pool has a free slot, the run is claimed and leased in one transaction and executed in that slot
on the caller's thread, which saves the hand-offs to a pool thread and back and the task row's writes. It is
leased like any other run, so a crash heals the same way; with RUNS_IN_WORKER, or with every slot taken, the run
is queued as usual.
"""

import asyncio
import threading
import time
from contextlib import contextmanager

from channels.layers import get_channel_layer
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone
from django_tasks import task

from core.agents import history, queries
from core.agents.messages import in_reply, messages_to_letta
from core.channel_layer import LocalChannelLayer
from core.errors import DomainError, NotFound
from core.events import agent_group, sender_loop
from core.models import RUN_ACTIVE, RUN_TERMINAL, Organization, Run, RunStatus
from core.providers import model_resolve
from core.runs import persistence, queue, runner, waits

WAIT_POLL_S = 1.0

# Sent with run_id after every run ends, once its waiters are woken. Layers above the executor connect to it in
# CoreConfig.ready (sleep-time companions count turns), so it imports none of them.
run_ended = Signal()

_waiters: dict[str, set[threading.Event]] = {}
_waiters_lock = threading.Lock()


@transaction.atomic  # a savepoint when nested: callers (sleep-time, multi-agent tools) catch its Conflict
def run_submit(
    *,
    owner: Organization,
    agent_id: str,
    input_messages: list[dict],
    max_steps: int | None = None,
    background: bool = False,
    depth: int = 0,
    parent_run_id: str | None = None,
    kinds: dict[int, str] | None = None,
    stream_tokens: bool = False,
) -> Run:
    """Claim the agent and queue the run in one transaction; returns the run (status created).

    Raises Conflict if the agent is busy, Invalid for bad input. The task reaches a pool thread after commit.
    """
    return _queued(
        runner.run_start(
            owner=owner,
            agent_id=agent_id,
            input_messages=input_messages,
            max_steps=max_steps,
            background=background,
            depth=depth,
            parent_run_id=parent_run_id,
            kinds=kinds,
            stream_tokens=stream_tokens,
        )
    )


@transaction.atomic  # outermost from entry points (no savepoint then); nested in tests that run in a transaction
def run_send(
    *,
    owner: Organization,
    agent_id: str,
    input_messages: list[dict],
    max_steps: int | None = None,
    background: bool = False,
    stream_tokens: bool = False,
    conversation_id: str | None = None,
    client_tools: list[dict] | None = None,
) -> Run:
    """Queue a person's message to an agent (API, SSE, websocket), in its own thread or in its conversation
    `conversation_id`: run_submit, with the model resolved from the claim's row before the commit. Raises what
    run_start raises, and NotConfigured when no provider serves the model; nothing is claimed or queued then."""
    run = runner.run_start(
        owner=owner,
        agent_id=agent_id,
        input_messages=input_messages,
        max_steps=max_steps,
        background=background,
        stream_tokens=stream_tokens,
        conversation_id=conversation_id,
        client_tools=client_tools,
    )
    model_resolve(owner=owner, handle=run.agent.model)
    return _queued(run)


@transaction.atomic
def run_continue(
    *, owner: Organization, run_id: str, approvals: list[dict] | None = None, step: bool = False, stop: bool = False
) -> Run:
    """Let a waiting run go on (the IDE's Continue / Step / Stop, `POST /v1/runs/{id}/continue`): `stop` ends the wait
    (its calls denied, as a cancel); else a new run of the same thread resumes it — with the answers given, or every
    waiting call approved as it stands; `step` stops it again before the next model call or tool call. Returns the
    new run (queued), or the ended one for `stop`. NotFound for another owner's run; DomainError if it waits for
    nothing (answered meanwhile: the first answer wins)."""
    waited = Run.objects.filter(owner=owner, pk=run_id).first()
    if waited is None:
        raise NotFound(f"Run '{run_id}' not found")
    if waited.waiting_until is None:
        raise DomainError(f"Run '{run_id}' is not waiting: it was answered, cancelled or has expired.")
    if stop:
        if not waits.cancel(owner=owner, agent_id=waited.agent_id, run_ids=[run_id]):
            raise DomainError(f"Run '{run_id}' is not waiting: it was answered, cancelled or has expired.")
        waited.refresh_from_db()
        return waited
    calls = (waited.waiting or {}).get("calls") or []
    if not calls:
        answer = {"type": "continue", "step": step}
    else:
        given = approvals or [{"type": "approval", "tool_call_id": c["tool_call_id"], "approve": True} for c in calls]
        answer = {"type": "approval", "approvals": given, "step": step}
    return run_send(
        owner=owner,
        agent_id=waited.agent_id,
        input_messages=[answer],
        conversation_id=waited.conversation_id,
        client_tools=waited.client_tools or None,
    )


def _queued(run: Run) -> Run:
    """Enqueue the claimed run's task; a pool thread is woken when the transaction commits."""
    queue.woken_after_commit(run_execute_task.enqueue(run_id=run.id))
    return run


def run_call(
    *,
    owner: Organization,
    agent_id: str,
    input_messages: list[dict],
    max_steps: int | None = None,
    conversation_id: str | None = None,
    client_tools: list[dict] | None = None,
) -> Run:
    """Run the agent for a caller that waits for the end; returns the ended run (status, stop reason, usage and
    error current). Executes on this thread in a free slot of the local pool, else queues the run and waits.
    Raises what run_start raises, and NotConfigured when no provider serves the agent's model (nothing is
    claimed then): the model is resolved from the agent's row as the claim read it, not read again."""
    pool = queue.slot_take()
    if pool is None:
        return run_wait(
            run=run_send(
                owner=owner,
                agent_id=agent_id,
                input_messages=input_messages,
                max_steps=max_steps,
                conversation_id=conversation_id,
                client_tools=client_tools,
            )
        )
    try:
        with transaction.atomic():
            run = runner.run_start(
                owner=owner,
                agent_id=agent_id,
                input_messages=input_messages,
                max_steps=max_steps,
                leased=True,
                conversation_id=conversation_id,
                client_tools=client_tools,
            )
            resolved = model_resolve(owner=owner, handle=run.agent.model)
    except BaseException:
        queue.slot_give(pool)
        raise
    try:
        with queue.in_slot(pool), queue.lease_held(run.id):
            runner.run_agent(
                agent_id=run.agent_id, owner=owner, input_messages=[], run=run, resolved=resolved, agent_fresh=True
            )
    finally:
        _ended(run)
    return run


def run_execute(*, run_id: str) -> str:
    """Task body: execute a queued run to its end under this process's lease; returns its final status."""
    run = queries.run_read(run_id=run_id)
    if run is None or run.status not in RUN_ACTIVE:
        return run.status if run else "missing"
    # The agent as its first step needs it (counts, and whether the run was cancelled), read with the run: a cancel
    # landing between this read and the first step is seen at the next step, as one landing during the first is.
    agent = queries.agent_read(agent_id=run.agent_id, counts=True, cancelled_run_id=run.pk)
    fresh = agent is not None and not agent.cancelled
    if fresh:
        run.agent = persistence.thread_view(agent, run.conversation_id)
    try:
        with queue.lease(run.id, status=RunStatus.RUNNING, started_at=timezone.now()) as taken:
            if not taken:  # cancelled, reaped or started elsewhere meanwhile
                return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
            run.status = RunStatus.RUNNING
            owner = queries.organization_ref(org_id=run.owner_id)
            result = runner.run_agent(agent_id=run.agent_id, owner=owner, input_messages=[], run=run, agent_fresh=fresh)
        return result.status
    finally:
        _ended(run)


def _ended(run: Run) -> None:
    """Wake the run's waiters, then announce its end (the sleep-time hook listens); `run` is current, as the runner
    keeps it so."""
    _notify(run.id)
    run_ended.send(sender=Run, run_id=run.id, agent_id=run.agent_id, completed=run.status == RunStatus.COMPLETED)


@task()
def run_execute_task(*, run_id: str) -> str:
    """Task-queue entry point of run_execute (arguments are JSON values)."""
    return run_execute(run_id=run_id)


# --------------------------------------------------------------------------- waiting for a run


def _notify(run_id: str) -> None:
    with _waiters_lock:
        events = list(_waiters.get(run_id, ()))
    for event in events:
        event.set()


@contextmanager
def _watch_local(run_id: str, event: threading.Event):
    with _waiters_lock:
        _waiters.setdefault(run_id, set()).add(event)
    try:
        yield
    finally:
        with _waiters_lock:
            waiting = _waiters.get(run_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del _waiters[run_id]


@contextmanager
def _watch_remote(run: Run, event: threading.Event):
    """Wake `event` when another process announces the run's end on the agent's channel group (a shared layer:
    a worker, or another web process's pool, may execute it)."""

    layer = get_channel_layer()
    if layer is None or isinstance(layer, LocalChannelLayer):
        yield  # one process: runs execute here, and the local notification is enough
        return
    group = agent_group(run.agent_id)

    async def watch():
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            while True:
                message = await layer.receive(channel)
                if any(
                    e.get("message_type") == "run_status"
                    and e.get("run_id") == run.id
                    and e.get("status") in RUN_TERMINAL
                    for e in message.get("events") or [message.get("event") or {}]
                ):
                    event.set()
                    return
        finally:
            await layer.group_discard(group, channel)

    future = asyncio.run_coroutine_threadsafe(watch(), sender_loop())
    try:
        yield
    finally:
        future.cancel()


def run_wait(*, run: Run, timeout: float | None = None) -> Run:
    """Block until the run ends (or `timeout` seconds pass); returns `run`, refreshed from the database.

    Woken at once when this process executed it, or by its announcement from another process; the database
    is read again every WAIT_POLL_S as a backstop (a reaped run, a lost event).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    done = threading.Event()
    with _watch_local(run.id, done), _watch_remote(run, done):
        if not Run.objects.filter(pk=run.pk, status__in=RUN_TERMINAL).exists():
            while True:
                left = WAIT_POLL_S if deadline is None else min(WAIT_POLL_S, deadline - time.monotonic())
                if left <= 0:
                    break
                with queue.waiting():
                    done.wait(left)
                done.clear()  # before the read: a notification after it is the next loop's
                _refresh(run)
                if run.status in RUN_TERMINAL:
                    return run
    _refresh(run)
    return run


def _refresh(run: Run) -> None:
    """Re-read the run's own columns; its agent and owner, already loaded, stay (a full refresh drops them)."""
    run.refresh_from_db(fields=[f.attname for f in Run._meta.concrete_fields if not f.is_relation])


def _answered_by_caller(run: Run, row) -> bool:
    """A tool row the caller itself gave (its client tool's result, its denial) is not sent back to a token-streaming
    caller, as Letta's stream sends nothing for such a step."""
    ret = row.tool_return or {}
    return run.stream_tokens and row.role == "tool" and (ret.get("sandbox") == "client" or bool(ret.get("denied")))


def run_reply(*, run: Run, use_assistant_message: bool = True) -> list[dict]:
    """What the run's caller receives: its committed messages as Letta messages, without the user-role ones (its
    input, heartbeats, warnings) and summaries, as Letta answers; GET /v1/runs/{id}/messages lists those too."""

    rows = [m for m in history.run_messages(run=run) if in_reply(m) and not _answered_by_caller(run, m)]
    return messages_to_letta(
        rows, use_assistant_message=use_assistant_message, agent_type=run.agent.agent_type, hide_assistant_returns=True
    )
