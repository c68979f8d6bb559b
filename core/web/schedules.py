"""The workspace's scheduled-messages panel: the agent's schedules with their next time and cron expression, add one
(a cron expression, or a UTC time once), delete one. The dispatcher (core.runs.schedules) sends them when due."""

from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.runs import schedules
from core.web.common import agent_or_404


def _panel(request, agent, **extra):
    rows, more = schedules.scheduled_messages_list(agent=agent, limit=schedules.MAX_PER_AGENT)
    ctx = {"agent": agent, "scheduled": [(r, _preview(r)) for r in rows], "more": more, **extra}
    return TemplateResponse(request, "core/_schedule_panel.html", ctx)


def _preview(row) -> str:
    parts = []
    for m in row.messages:
        content = m.get("content", "")
        parts.append(content if isinstance(content, str) else " ".join(str(p.get("text", "")) for p in content))
    return " / ".join(parts)


def _schedule_of(post) -> dict:
    """The API's schedule from the form: a cron expression, else a one-time `at` (datetime-local, read as UTC)."""
    expression = post.get("cron_expression", "").strip()
    if expression:
        return {"type": "recurring", "cron_expression": expression}
    at = post.get("at", "").strip()
    try:
        moment = datetime.fromisoformat(at).replace(tzinfo=UTC)
    except ValueError:
        raise DomainError("give a cron expression, or a time (UTC) to send it once") from None
    return {"type": "one-time", "scheduled_at": int(moment.timestamp() * 1000)}


@login_required
def schedule_panel(request, agent_id: str):
    return _panel(request, agent_or_404(request, agent_id))


@login_required
@require_POST
def schedule_add(request, agent_id: str):
    """Schedule the message; a refused one comes back inline with what was typed, nothing stored."""
    agent = agent_or_404(request, agent_id)
    text = request.POST.get("text", "")[:20_000]
    try:
        schedules.scheduled_message_create(
            agent=agent, messages=[{"role": "user", "content": text}], schedule=_schedule_of(request.POST)
        )
    except DomainError as exc:
        return _panel(request, agent, error=exc.message, typed=request.POST)
    return _panel(request, agent, saved=True)


@login_required
@require_POST
def schedule_delete(request, agent_id: str, scheduled_message_id: str):
    """Delete one of the agent's scheduled messages (404 for one not the agent's)."""
    agent = agent_or_404(request, agent_id)
    try:
        schedules.scheduled_message_delete(agent=agent, scheduled_message_id=scheduled_message_id)
    except DomainError as exc:
        return _panel(request, agent, error=exc.message)
    return _panel(request, agent)
