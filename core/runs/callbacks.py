"""A run's completion callback: a send made with `callback_url` (Letta's LettaAsyncRequest) has its end POSTed there,
as Letta's run_manager does (letta/services/run_manager.py, _dispatch_callback_async): `run_id`, `status`,
`completed_at` and `metadata.result` (the run's messages as `runs.messages.list` lists them, its stop reason and
usage). Sent once the run ended (the executor's run_ended signal), through the egress guard, on a thread of its own;
the outcome is kept in the run's request_config (`callback_sent_at`, `callback_status_code`, `callback_error`)."""

from __future__ import annotations

import logging
import threading

from django.db import close_old_connections
from django.utils import timezone

from core.agents import history
from core.agents.messages import messages_to_letta, stop_reason_message, usage_statistics
from core.egress import guarded_client
from core.models import Run, RunStatus

log = logging.getLogger(__name__)

TERMINAL = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
TIMEOUT_S = 5.0  # as Letta's


def callback_payload(run: Run) -> dict:
    """Letta's callback body for an ended run."""
    config = run.request_config or {}
    rows = history.run_messages(run=run, hide_assistant_returns=True)  # as GET /v1/runs/{id}/messages lists them
    messages = messages_to_letta(
        rows, types=config.get("include_return_message_types"), agent_type=run.agent.agent_type
    )
    result = {
        "messages": messages,
        "stop_reason": stop_reason_message(run.stop_reason or "end_turn"),
        "usage": usage_statistics({**(run.usage or {}), "run_ids": [run.id]}),
    }
    completed = run.completed_at.isoformat() if run.completed_at else None
    return {"run_id": run.id, "status": str(run.status), "completed_at": completed, "metadata": {"result": result}}


def callback_send(*, run_id: str) -> None:
    """POST the ended run's payload to its callback_url (once: a run whose outcome is recorded is skipped) and record
    the answer's status or the error. Makes one HTTP request through the egress guard."""
    run = Run.objects.select_related("agent").filter(pk=run_id).first()
    config = (run.request_config or {}) if run else {}
    url = config.get("callback_url")
    if not run or not url or run.status not in TERMINAL or config.get("callback_sent_at"):
        return
    outcome: dict = {"callback_sent_at": timezone.now().isoformat()}
    try:
        with guarded_client(timeout=TIMEOUT_S) as client:
            outcome["callback_status_code"] = client.post(url, json=callback_payload(run)).status_code
    except Exception as exc:  # noqa: BLE001 - a callback that fails is recorded, never fails the run
        outcome["callback_error"] = f"Failed to dispatch callback for run {run_id} to {url}: {exc!r}"
        log.warning("run callback failed", extra={"run_id": run_id, "error": outcome["callback_error"]})
    Run.objects.filter(pk=run_id).update(request_config={**config, **outcome})


def on_run_ended(sender, *, run_id: str, callback_url: str | None = None, **kwargs) -> None:
    """The executor's run_ended receiver: send a callback asked for, on a thread of its own (the run's thread goes
    on with its next work). The run's own request_config says whether one was asked for (no read)."""
    if not callback_url:
        return

    def send() -> None:
        try:
            callback_send(run_id=run_id)
        finally:
            close_old_connections()

    threading.Thread(target=send, name=f"run-callback-{run_id[-8:]}", daemon=True).start()
