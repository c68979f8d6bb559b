"""The workspace's sleep-time panel: the primary and its companion, how often it runs, its runs and what it
changed in the shared blocks; enable it, change the frequency, trigger a run."""

from django.contrib.auth.decorators import login_required
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.runs import sleeptime
from core.web.common import agent_or_404
from memory.selectors import block_history_diff


def _panel(request, agent, **extra):
    link = sleeptime.sleeptime_get(agent=agent)
    edits = [(e, block_history_diff(e)) for e in sleeptime.sleeptime_edits(link=link)] if link else []
    ctx = {
        "agent": agent,
        "link": link,
        "edits": edits,
        "runs": sleeptime.sleeptime_runs(link=link) if link else [],
        **extra,
    }
    return TemplateResponse(request, "core/_sleeptime_panel.html", ctx)


@login_required
def sleeptime_panel(request, agent_id: str):
    return _panel(request, agent_or_404(request, agent_id))


@login_required
@require_POST
def sleeptime_save(request, agent_id: str):
    """Enable/disable the companion and set its frequency; a refused value comes back inline, nothing saved."""
    agent = agent_or_404(request, agent_id)
    raw = request.POST.get("frequency", "").strip()
    try:
        frequency = int(raw) if raw else None
    except ValueError:
        return _panel(request, agent, error="frequency must be a whole number of turns")
    try:
        sleeptime.sleeptime_configure(agent=agent, enabled=request.POST.get("enabled") == "on", frequency=frequency)
    except DomainError as exc:
        return _panel(request, agent, error=exc.message)
    return _panel(request, agent, saved=True)


@login_required
@require_POST
def sleeptime_run(request, agent_id: str):
    """Queue a companion run now on what is new in the conversation (it runs in the background)."""
    agent = agent_or_404(request, agent_id)
    link = sleeptime.sleeptime_get(agent=agent)
    if link is None:
        return _panel(request, agent, error="enable the sleep-time companion first")
    try:
        run = sleeptime.sleeptime_run_submit(link=link, manual=True)
    except DomainError as exc:
        return _panel(request, agent, error=exc.message)
    return _panel(request, agent, started=run)
