"""What the agent websocket does with a message from the browser.

Client → server: {"type": "user_message", "text": "...", "max_steps"?: N}, {"type": "approval", "approvals": [...],
"message_id": the approval request's message, "otid"?} (the answer to a run that waits: Letta's ApprovalCreate),
{"type": "wait_answer", "run_id": the waiting run, "step"?: bool, "stop"?: bool, "approvals"?: [...], "otid"?} (the
debugger's Continue / Step / Stop on a wait: core.runs.executor.wait_answer), {"type": "cancel"} (the run of the socket's thread; also ends its wait, denying its calls), {"type": "ping"}; a socket opened on one of the agent's
conversations sends into that conversation.
Server → client: Letta message dicts (as SSE sends them), run_status (with `waiting` when a run pauses),
context_update, block_update and error_message (an answer to a wait refused because another tab or the API
answered first has detail.code ALREADY_ANSWERED); a Stop is answered with the ended run's run_status; run events go to the agent's channel group, so every open tab receives them.
"""

from channels.db import database_sync_to_async
from django.db.models import Q

from core.accounts import Principal
from core.errors import DomainError
from core.models import RUN_ACTIVE, Run
from core.runs import executor
from core.runs.request import RunRequest
from core.runs.runner import run_cancel
from core.web.waits import answer_refused, answering_run, run_answer_refused


def _error(message: str, detail=None) -> dict:
    return {"message_type": "error_message", "message": message, "detail": detail}


def _submit(principal: Principal, agent_id: str, text: str, max_steps, otid: str | None = None, thread=None):
    inputs = [{"role": "user", "content": text, **({"otid": otid} if otid else {})}]
    request = RunRequest(
        owner=principal.org, agent_id=agent_id, input_messages=inputs, max_steps=max_steps, conversation_id=thread
    )
    return executor.run_submit(request)


def _cancel(principal: Principal, agent_id: str, thread: str | None) -> list[str]:
    """Cancel the run of the socket's thread, or end its wait; the agent's other threads go on."""
    active = Q(status__in=RUN_ACTIVE) | Q(waiting_until__isnull=False)
    runs = Run.objects.filter(active, owner=principal.org, agent_id=agent_id, conversation_id=thread)
    found = list(runs.values_list("id", flat=True))
    return run_cancel(owner=principal.org, agent_id=agent_id, run_ids=found) if found else []


async def _user_message(principal: Principal, agent_id: str, payload: dict, thread: str | None) -> dict | None:
    text = payload.get("text")
    max_steps = payload.get("max_steps")
    if not isinstance(text, str) or not text.strip():
        return _error("Type a message first: the text is empty.")
    if max_steps is not None and not isinstance(max_steps, int):
        return _error("max_steps must be a whole number.")
    try:
        otid = payload["otid"][:100] if isinstance(payload.get("otid"), str) else None  # stored on the message
        run = await database_sync_to_async(_submit)(principal, agent_id, text, max_steps, otid, thread)
    except DomainError as exc:
        reply = _error(exc.message, exc.detail)
    else:
        reply = {"message_type": "run_status", "run_id": run.id, "status": "created", "stop_reason": None}
    if isinstance(payload.get("otid"), str):
        reply["otid"] = payload["otid"][:100]  # lets the tab match this reply to the message it sent
    return reply


def _answer(principal: Principal, agent_id: str, payload: dict, otid: str | None, thread=None) -> dict:
    answer = {"type": "approval", "approvals": payload["approvals"], **({"otid": otid} if otid else {})}
    try:
        request = RunRequest(owner=principal.org, agent_id=agent_id, input_messages=[answer], conversation_id=thread)
        run = executor.run_submit(request)
    except DomainError as exc:
        message_id = payload.get("message_id") if isinstance(payload.get("message_id"), str) else None
        refused = answer_refused(agent_id=agent_id, thread=thread, message_id=message_id, exc=exc)
        return _error(refused.pop("message"), refused)
    return {"message_type": "run_status", "run_id": run.id, "status": "created", "stop_reason": None}


async def _approval(principal: Principal, agent_id: str, payload: dict, thread: str | None) -> dict:
    otid = payload["otid"][:100] if isinstance(payload.get("otid"), str) else None
    approvals = payload.get("approvals")
    if not isinstance(approvals, list) or not approvals or not all(isinstance(a, dict) for a in approvals):
        reply = _error("An answer needs one approval per waiting tool call.")
    else:
        reply = await database_sync_to_async(_answer)(principal, agent_id, payload, otid, thread)
    if otid:
        reply["otid"] = otid  # lets the tab match this reply to the card it answered
    return reply


def _go_on(principal: Principal, agent_id: str, run_id: str, payload: dict) -> dict:
    if not Run.objects.filter(pk=run_id, agent_id=agent_id, owner=principal.org).exists():
        return _error("No such run of this agent.", {"code": "NOT_FOUND", "run_id": None})
    if payload.get("stop") and answering_run(agent_id=agent_id, wait_run_id=run_id) is not None:
        # another tab's Continue is claimed and about to take the wait: it was first, the Stop is refused
        refused = run_answer_refused(agent_id=agent_id, run_id=run_id, exc=DomainError("Already answered"))
        return _error(refused.pop("message"), refused)
    try:
        run = executor.wait_answer(
            owner=principal.org,
            run_id=run_id,
            approvals=payload.get("approvals"),
            step=payload.get("step", False),
            stop=payload.get("stop", False),
        )
    except DomainError as exc:
        refused = run_answer_refused(agent_id=agent_id, run_id=run_id, exc=exc)
        return _error(refused.pop("message"), refused)
    if payload.get("stop"):  # the wait ended here: the run as it ended
        return {"message_type": "run_status", "run_id": run.id, "status": run.status, "stop_reason": run.stop_reason}
    return {"message_type": "run_status", "run_id": run.id, "status": "created", "stop_reason": None}


async def _wait_answer(principal: Principal, agent_id: str, payload: dict) -> dict:
    otid = payload["otid"][:100] if isinstance(payload.get("otid"), str) else None
    run_id, approvals = payload.get("run_id"), payload.get("approvals")
    if not isinstance(run_id, str) or not run_id:
        reply = _error("Say which waiting run to continue: run_id.")
    elif not all(isinstance(payload.get(k, False), bool) for k in ("step", "stop")):
        reply = _error("step and stop must be true or false.")
    elif approvals is not None and (
        not isinstance(approvals, list) or not approvals or not all(isinstance(a, dict) for a in approvals)
    ):
        reply = _error("approvals, when given, needs one answer per waiting tool call.")
    else:
        reply = await database_sync_to_async(_go_on)(principal, agent_id, run_id, payload)
    if otid:
        reply["otid"] = otid  # lets the tab match this reply to the card it came from
    return reply


async def handle_client_message(
    *, principal: Principal, agent_id: str, payload: dict, thread: str | None = None
) -> dict | None:
    """Dispatch one client message from a socket on the agent's thread `thread` (None: its own); returns a direct
    reply for this socket, or None."""
    kind = payload.get("type")
    if kind == "ping":
        return {"message_type": "pong"}
    if kind == "user_message":
        return await _user_message(principal, agent_id, payload, thread)
    if kind == "approval":
        return await _approval(principal, agent_id, payload, thread)
    if kind == "wait_answer":
        return await _wait_answer(principal, agent_id, payload)
    if kind == "cancel":
        ids = await database_sync_to_async(_cancel)(principal, agent_id, thread)
        if not ids:
            return _error("Nothing to cancel: no run of this conversation is running.")
        return {"message_type": "cancel_requested", "run_ids": ids}
    return _error(f"Unknown message type: {kind!r}")
