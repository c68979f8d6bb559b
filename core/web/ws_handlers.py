"""What a browser's send or cancel does: posted by the workspace (`message_send`, `run_cancel_view`), or sent over the
agent websocket by another client (`handle_client_message`).

Posted: `text` (and `otid`, stored on the message, so the events of its run name the send they belong to) to
`agents/<id>/send/`, or nothing to `agents/<id>/cancel/`, each with `?conversation=` for one of the agent's threads;
the answer is the event the socket would reply with, as the page draws it (core.web.live: a run_status's `label`, an
error's `reason` and `busy_text`). The run's own events then arrive over the socket like every other run's.

Client → server over the socket: {"type": "user_message", "text": "...", "max_steps"?: N, "otid"?}, {"type":
"cancel"} (the run of the socket's thread; also ends its wait, denying its calls), {"type": "ping"}; a socket opened
on one of the agent's conversations sends into that conversation. An answer to a wait is the card's form, posted
(core.web.waits). Server → client: Letta message dicts (as SSE sends them), run_status (with `waiting` when a run
pauses), context_update, block_update and error_message; run events go to the agent's channel group, so every open
tab receives them.
"""

from channels.db import database_sync_to_async
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.models import RUN_ACTIVE, Run
from core.runs import executor
from core.runs.request import RunRequest
from core.runs.runner import run_cancel
from core.text import first_bad_string
from core.web.common import agent_or_404, org, thread_or_404
from core.web.live import LiveRenderer


def _error(message: str, detail=None) -> dict:
    return {"message_type": "error_message", "message": message, "detail": detail}


def user_message(owner, agent_id: str, payload: dict, thread: str | None) -> dict:
    """Start a run with the person's message; the reply names its run, or says why it did not start."""
    text = payload.get("text")
    max_steps = payload.get("max_steps")
    otid = payload["otid"][:100] if isinstance(payload.get("otid"), str) else None  # stored on the message
    if not isinstance(text, str) or not text.strip():
        reply = _error("Type a message first: the text is empty.")
    elif max_steps is not None and not isinstance(max_steps, int):
        reply = _error("max_steps must be a whole number.")
    else:
        inputs = [{"role": "user", "content": text, **({"otid": otid} if otid else {})}]
        request = RunRequest(
            owner=owner, agent_id=agent_id, input_messages=inputs, max_steps=max_steps, conversation_id=thread
        )
        try:
            run = executor.run_submit(request)
        except DomainError as exc:
            reply = _error(exc.message, exc.detail)
        else:
            reply = {"message_type": "run_status", "run_id": run.id, "status": "created", "stop_reason": None}
    if otid:
        reply["otid"] = otid  # lets the tab match this reply to the message it sent
    return reply


def cancel(owner, agent_id: str, thread: str | None) -> dict:
    """Cancel the run of the thread, or end its wait; the agent's other threads go on."""
    active = Q(status__in=RUN_ACTIVE) | Q(waiting_until__isnull=False)
    runs = Run.objects.filter(active, owner=owner, agent_id=agent_id, conversation_id=thread)
    found = list(runs.values_list("id", flat=True))
    ids = run_cancel(owner=owner, agent_id=agent_id, run_ids=found) if found else []
    if not ids:
        return _error("Nothing to cancel: no run of this conversation is running.")
    return {"message_type": "cancel_requested", "run_ids": ids}


def _where(request, agent_id: str) -> tuple:
    """The owner, the agent and the thread (`?conversation=`) a post is about."""
    agent = agent_or_404(request, agent_id)
    return org(request), agent.id, thread_or_404(request, agent).thread


def _answer(agent_id: str, event: dict) -> JsonResponse:
    return JsonResponse(LiveRenderer(agent_id).event(event))  # with the texts the page tells


@login_required
@require_POST
def message_send(request, agent_id: str):
    """The composer's send (the workspace's form, posted): the run's events then come over the socket."""
    owner, agent_id, thread = _where(request, agent_id)
    payload = {"text": request.POST.get("text", ""), "otid": request.POST.get("otid") or None}
    if found := first_bad_string(payload):
        return _answer(agent_id, _error(f"The message contains {found[1]}, which cannot be stored."))
    return _answer(agent_id, user_message(owner, agent_id, payload, thread))


@login_required
@require_POST
def run_cancel_view(request, agent_id: str):
    """Cancel: the run of the thread shown, or its wait."""
    owner, agent_id, thread = _where(request, agent_id)
    return _answer(agent_id, cancel(owner, agent_id, thread))


async def handle_client_message(*, owner, agent_id: str, payload: dict, thread: str | None = None) -> dict | None:
    """Dispatch one client message from a socket on the agent's thread `thread` (None: its own); returns a direct
    reply for this socket, or None."""
    kind = payload.get("type")
    if kind == "ping":
        return {"message_type": "pong"}
    if kind == "user_message":
        return await database_sync_to_async(user_message)(owner, agent_id, payload, thread)
    if kind == "cancel":
        return await database_sync_to_async(cancel)(owner, agent_id, thread)
    return _error(f"Unknown message type: {kind!r}")
