"""The one way to run an agent: claim and enqueue in one transaction, execute on the run pool under a lease.

Every run — a synchronous `POST …/messages`, an SSE stream, a websocket send, `…/messages/async`, an
agent-to-agent message — comes as one RunRequest (core.runs.request), built where it came in. It is claimed
(`runner.run_start`, the agent's row lock; 409 if busy; the model resolved) and its task enqueued in the same
transaction, so a claimed run always has a task and a task always has its run. A pool thread (this process's on the
embedded default, a `run_worker` process's with RUNS_IN_WORKER) executes it (`runner.run_steps`) under a lease
(core.runs.queue); callers only wait for the run (`run_wait`) or follow the agent's events
(core.runs.streaming). One rule finds dead runs: a lapsed lease.

A synchronous caller that would only block until its run ends (`run_call`) lends its own thread instead: when
this process's pool has a free slot, the run is claimed and leased in one transaction and executed in that slot
on the caller's thread, which saves the hand-offs to a pool thread and back and the task row's writes. It is
leased like any other run, so a crash heals the same way; with RUNS_IN_WORKER, or with every slot taken, the run
is queued as usual.
"""

import asyncio
import copy
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager

from channels.layers import get_channel_layer
from django.conf import settings
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
from core.runs import persistence, queue, runner, waits
from core.runs.request import RunRequest
from core.telemetry import hooks as telemetry
from core.telemetry import logs

WAIT_POLL_S = 1.0

# Sent with run_id after every run ends, once its waiters are woken. Layers above the executor connect to it in
# CoreConfig.ready (sleep-time companions count turns), so it imports none of them.
run_ended = Signal()

_waiters: dict[str, set[threading.Event]] = {}
_waiters_lock = threading.Lock()


@transaction.atomic  # outermost from entry points; a savepoint when nested (multi-agent and sleep-time catch Conflict)
def run_submit(request: RunRequest) -> Run:
    """Claim the agent for `request` and queue its run in one transaction; returns the run (status created). Raises
    what run_start raises (Conflict if the agent is busy, Invalid for bad input, NotConfigured for a person's send to
    a model no provider serves); nothing is claimed or queued then. The task reaches a pool thread after commit, with
    the request handed to it when this process executes it."""
    run = runner.run_start(request)
    if not settings.RUNS_IN_WORKER:  # this process's pool will most likely take the task: hand it the request
        handed = copy.copy(run)  # as stored: the caller answers from `run` while the pool thread changes its own
        transaction.on_commit(lambda: _hand_over(run.id, request, handed))
    queue.woken_after_commit(run_execute_task.enqueue(run_id=run.id, **telemetry.origin()))
    return run


def run_call(request: RunRequest) -> Run:
    """Run the agent for a caller that waits for the end; returns the ended run (status, stop reason, usage and
    error current). Executes on this thread in a free slot of the local pool (claimed already leased, in one
    transaction), else queues the run and waits. Raises what run_start raises; nothing is claimed then."""
    pool = queue.slot_take()
    if pool is None:
        return run_wait(run=run_submit(request))
    try:
        with transaction.atomic():
            run = runner.run_start(request, leased=True)
    except BaseException:
        queue.slot_give(pool)
        raise
    persistence.run_rows_keep(run, request.inputs or ())
    try:
        with queue.in_slot(pool), queue.lease_held(run.id):
            runner.run_steps(run, request, agent_fresh=True)
        run.messages_here = persistence.run_rows_kept(run)  # its reply needs no read back (run_reply)
    finally:
        _ended(run)
    return run


@transaction.atomic
def wait_answer(
    *, owner: Organization, run_id: str, approvals: list[dict] | None = None, step: bool = False, stop: bool = False
) -> Run:
    """Answer a run's wait (the IDE's Continue / Step / Stop, `POST /v1/runs/{id}/continue`): `stop` ends the wait
    (its calls denied, as a cancel); else a new run of the same thread goes on from it — with the answers given, or
    every waiting call approved as it stands; `step` stops it again before the next model call or tool call. Returns the
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
    return run_submit(
        RunRequest(
            owner=owner,
            agent_id=waited.agent_id,
            input_messages=[answer],
            conversation_id=waited.conversation_id,
            client_tools=waited.client_tools or None,
        )
    )


def run_execute(*, run_id: str) -> str:
    """Task body: execute a queued run to its end under this process's lease; returns its final status."""
    handed, run = _handed_take(run_id)
    # A run this process claimed comes as it was stored (no read): the lease below takes it only if it still waits
    run = run or queries.run_read(run_id=run_id)
    if run is None or run.status not in RUN_ACTIVE:
        return run.status if run else "missing"
    # The agent as its first step needs it (counts, and whether the run was cancelled), read with the run: a cancel
    # landing between this read and the first step is seen at the next step, as one landing during the first is.
    agent = queries.agent_read(agent_id=run.agent_id, counts=True, cancelled_run_id=run.pk, companion=True)
    if agent is not None:
        run.companion_enabled = agent.companion_enabled
    fresh = agent is not None and not agent.cancelled
    if fresh:
        run.agent = persistence.thread_view(agent, run.conversation_id)
    try:
        with queue.lease(run.id, status=RunStatus.RUNNING, started_at=timezone.now()) as taken:
            if not taken:  # cancelled, reaped or started elsewhere meanwhile
                return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
            run.status = RunStatus.RUNNING
            request = handed or RunRequest.of_run(run, queries.organization_ref(org_id=run.owner_id))
            result = runner.run_steps(run, request, agent_fresh=fresh)
        return result.status
    finally:
        _ended(run)


# Requests of runs this process queued, with the runs as stored, for its pool thread that executes them (the resolved
# model comes with them, so it is not resolved again, nor the run read back). A task another process claims leaves its
# entry behind: the oldest go past the cap.
_handed: OrderedDict[str, tuple[RunRequest, Run]] = OrderedDict()
_handed_lock = threading.Lock()
_HANDED_MAX = 1000


def _hand_over(run_id: str, request: RunRequest, run: Run) -> None:
    with _handed_lock:
        _handed[run_id] = (request, run)
        while len(_handed) > _HANDED_MAX:
            _handed.popitem(last=False)


def _handed_take(run_id: str) -> tuple[RunRequest | None, Run | None]:
    with _handed_lock:
        return _handed.pop(run_id, (None, None))


def _ended(run: Run) -> None:
    """Wake the run's waiters, then announce its end (the sleep-time hook listens); `run` is current, as the runner
    keeps it so."""
    _notify(run.id)
    run_ended.send(
        sender=Run,
        run_id=run.id,
        agent_id=run.agent_id,
        completed=run.status == RunStatus.COMPLETED,
        companion=getattr(run, "companion_enabled", None),  # read with the agent when the run began (None: not read)
        callback_url=(run.request_config or {}).get("callback_url"),
    )


@task()
def run_execute_task(*, run_id: str, request_id: str = "", user: str = "") -> str:
    """Task-queue entry point of run_execute (arguments are JSON values); `request_id` and `user` name the request
    that queued the run, in its logs and trace."""
    with logs.bound(request_id=request_id, user=user):
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

    stored = run.__dict__.get("messages_here")  # a run executed here, on this object (run_call): its rows as stored
    rows = stored if stored is not None else history.run_messages(run=run)
    rows = [m for m in rows if in_reply(m) and not _answered_by_caller(run, m)]
    return messages_to_letta(
        rows, use_assistant_message=use_assistant_message, agent_type=run.agent.agent_type, hide_assistant_returns=True
    )
