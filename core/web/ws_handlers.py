"""What the agent websocket does with a message from the browser.

Client → server: {"type": "user_message", "text": "...", "max_steps"?: N, "otid"?}, {"type": "cancel"} (the run of
the socket's thread; also ends its wait, denying its calls), {"type": "ping"}; a socket opened on one of the agent's
conversations sends into that conversation. An answer to a wait is the card's form, posted (core.web.waits).
Server → client: Letta message dicts (as SSE sends them), run_status (with `waiting` when a run pauses),
context_update, block_update and error_message; run events go to the agent's channel group, so every open tab
receives them.
"""

from channels.db import database_sync_to_async
from django.db.models import Q

from core.accounts import Principal
from core.errors import DomainError
from core.models import RUN_ACTIVE, Run
from core.runs import executor
from core.runs.request import RunRequest
from core.runs.runner import run_cancel


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
    if kind == "cancel":
        ids = await database_sync_to_async(_cancel)(principal, agent_id, thread)
        if not ids:
            return _error("Nothing to cancel: no run of this conversation is running.")
        return {"message_type": "cancel_requested", "run_ids": ids}
    return _error(f"Unknown message type: {kind!r}")
