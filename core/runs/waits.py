"""Runs that wait for a person or a client, stored: a run whose reply asked for an approval, a client-side tool or
hit a tool breakpoint ends `completed` with stop reason `requires_approval` (Letta's), and keeps what it waits for
in `Run.waiting` until `Run.waiting_until`. It holds no thread and no worker slot: the answer is a new run of the
same thread (core.runs.runner `_answer_calls`, `_answer_model_call`), on any worker, after any restart. One wait per
thread at a time; a normal send to a thread that waits gets Letta's 409 (PENDING_APPROVAL).

`waiting` = {"kind": "approval" | "client" | "breakpoint" (the first waiting call's reason), "message_id": the
reply's stored id, "step_id", "calls": [{tool_call_id, name, arguments, reason}] (the calls that wait),
"deferred": [tool_call_id…] (the reply's other calls, run with the answers), "since"}.
"""

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.agents.messages import messages_to_letta
from core.engine import loop
from core.engine.waits import DENIED_ON_CANCEL, DENIED_ON_EXPIRY
from core.models import Message, Run, Step
from core.runs import persistence
from core.runs.emit import Emitter

log = logging.getLogger(__name__)

EXPIRED = "expired"  # the stop reason of a wait nobody answered in time


def until() -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.RUN_WAIT_TTL_S)


def live(run: Run) -> Run | None:
    """The run if its wait is still on; a wait past its time is ended here first (the caller holds the agent's lock in
    its transaction), giving None."""
    if run.waiting_until is not None and run.waiting_until <= timezone.now():
        resolve(run=run, text=DENIED_ON_EXPIRY, stop_reason=EXPIRED, error=_expired_text())
        return None
    return run if run.waiting_until is not None else None


def _expired_text() -> str:
    hours = settings.RUN_WAIT_TTL_S / 3600
    return f"Nobody answered within {hours:g} h; the waiting tool calls were denied."


def pending_request(*, agent_id: str, agent_type: str, conversation_id: str | None = None) -> dict | None:
    """The approval_request_message the thread waits on (Letta's AgentState.pending_approval), or None."""
    run = (
        Run.objects.filter(agent_id=agent_id, conversation_id=conversation_id, waiting_until__gt=timezone.now())
        .order_by("-created_at")
        .first()
    )
    reply = Message.objects.filter(pk=(run.waiting or {}).get("message_id")).first() if run is not None else None
    if reply is None:
        return None
    parts = messages_to_letta([reply], agent_type=agent_type)
    return next((p for p in parts if p["message_type"] == "approval_request_message"), None)


def take(run_id: str) -> bool:
    """Mark the wait answered; False when it was answered, cancelled or expired meanwhile (the first answer wins)."""
    return bool(Run.objects.filter(pk=run_id, waiting_until__isnull=False).update(waiting=None, waiting_until=None))


def pending_detail(run: Run) -> dict:
    """Letta's 409 body fields for a send while `run` waits."""
    return {
        "code": "PENDING_APPROVAL",
        "pending_request_id": (run.waiting or {}).get("message_id"),
        "run_id": run.id,
        "tool_calls": [
            {"tool_call_id": c["tool_call_id"], "name": c["name"]} for c in (run.waiting or {}).get("calls", [])
        ],
    }


def resolve(*, run: Run, text: str, stop_reason: str, error: str = "") -> bool:
    """End a wait without an answer (cancel, expiry): every call of the waiting reply gets a denial the model will
    read (deferred calls too, as Letta's cancel_run), the run's stop reason says why. Caller holds the agent's lock
    inside a transaction; events go out after the commit. False if the wait was answered or ended meanwhile."""
    waiting = run.waiting or {}
    if not take(run.pk):
        return False
    agent = persistence.thread_view(persistence.agent_lock(run.agent_id), run.conversation_id)
    reply = Message.objects.filter(pk=waiting.get("message_id")).first()
    rows = [
        persistence.message_build(
            agent=agent,
            role="tool",
            text=loop.format_tool_result(ok=False, message=text),
            tool_call_id=call.get("id", ""),
            name=call.get("name", ""),
            tool_return={"status": "error", "stdout": "", "stderr": "", "denied": True},
        )
        for call in (reply.tool_calls if reply is not None else [])
    ]
    step = Step(pk=waiting["step_id"]) if waiting.get("step_id") else None
    persistence.messages_store(agent=agent, rows=rows, run=run, step=step)
    persistence.window_set(
        agent_id=agent.id, message_ids=list(agent.message_ids) + [r.id for r in rows], conversation_id=agent.thread
    )
    Run.objects.filter(pk=run.pk).update(stop_reason=stop_reason, error=error)
    run.waiting, run.waiting_until, run.stop_reason, run.error = None, None, stop_reason, error

    def announce():
        emitter = Emitter(run.agent_id, run.id, run.conversation_id)
        for event in messages_to_letta(rows, agent_type=agent.agent_type):
            emitter.emit(event, to_caller=False, flush=False)
        emitter.emit(
            {
                "message_type": "run_status",
                "run_id": run.id,
                "status": run.status,
                "stop_reason": stop_reason,
                "error": error or None,
                "waiting": None,
            },
            to_caller=False,
        )

    transaction.on_commit(announce)
    return True


def cancel(*, owner, agent_id: str, run_ids: list[str] | None = None) -> list[str]:
    """Cancel the agent's waiting runs (or the given ones): their calls are denied with Letta's cancel reason."""
    qs = Run.objects.filter(owner=owner, agent_id=agent_id, waiting_until__isnull=False)
    if run_ids:
        qs = qs.filter(id__in=run_ids)
    done = []
    for run in qs:
        with transaction.atomic():
            persistence.agent_lock(agent_id)
            run.refresh_from_db()
            if run.waiting_until is not None and resolve(run=run, text=DENIED_ON_CANCEL, stop_reason="cancelled"):
                done.append(run.id)
    return done


def expire_due() -> list[str]:
    """End every wait past its time (the lease thread calls this on each sweep); returns their run ids."""
    due = list(Run.objects.filter(waiting_until__lte=timezone.now()).values_list("id", "agent_id"))
    ended = []
    for run_id, agent_id in due:
        try:
            with transaction.atomic():
                persistence.agent_lock(agent_id)
                run = Run.objects.filter(pk=run_id, waiting_until__lte=timezone.now()).first()
                if run is not None and resolve(
                    run=run, text=DENIED_ON_EXPIRY, stop_reason=EXPIRED, error=_expired_text()
                ):
                    ended.append(run_id)
        except Exception:  # noqa: BLE001 - one bad row must not stop the sweep
            log.exception("could not expire the wait of run %s", run_id)
    return ended


def arguments_of(call: dict) -> dict:
    try:
        value = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
