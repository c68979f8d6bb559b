"""The runs view of an agent (every run with its outcome, live), a run's steps, the notice a failed run leaves in
the conversation, and the context-window marks the conversation re-reads after the window changed."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.template.response import TemplateResponse

from core import selectors
from core.agents import run_graph, run_view
from core.agents.presenters import wait_out
from core.errors import NotFound
from core.models import RUN_ACTIVE, Conversation
from core.runs import timetravel
from core.web.common import agent_or_404, thread_or_404
from core.web.history import window_marks_json


def _run_row(run) -> dict:
    usage = run.usage or {}
    end = run.completed_at
    start = run.started_at or run.created_at
    return {
        "run": run,
        "tokens": usage.get("total_tokens"),
        "steps": run.step_count,
        **_cost(usage),
        "duration_s": (end - start).total_seconds() if end and start else None,
        "active": run.status in RUN_ACTIVE,
        "input": " / ".join(_input_text(m) for m in run.input_messages or [] if isinstance(m, dict)),
        "waiting": wait_out(run),
    }


def _input_text(message: dict) -> str:
    """A run's input as one line; an answer to a wait says what it decided."""
    if message.get("role") != "approval":
        return message.get("text", "")
    answers = [a for a in message.get("answers") or [] if isinstance(a, dict)]
    approved = sum(1 for a in answers if a.get("type") == "approval" and a.get("approve"))
    denied = sum(1 for a in answers if a.get("type") == "approval" and not a.get("approve"))
    returned = len(answers) - approved - denied
    parts = [f"{n} {what}" for n, what in ((approved, "approved"), (denied, "denied"), (returned, "returned")) if n]
    return "answer: " + ", ".join(parts)


def _cost(usage: dict) -> dict:
    """Cost for display: None unless some step had a known price, and how many steps had none."""
    steps = usage.get("steps", usage.get("step_count"))
    unpriced = usage.get("unpriced_steps") or 0
    priced = "cost_usd" in usage and (steps is None or steps > unpriced)
    return {"cost": usage["cost_usd"] if priced else None, "unpriced": unpriced}


@login_required
def runs_panel(request, agent_id: str):
    """Every recent run of the agent (or of one thread, `?thread=`) with its thread, status, stop reason, steps,
    duration, tokens and error."""
    agent = agent_or_404(request, agent_id)
    thread = request.GET.get("thread", "")
    if thread not in ("", "own") and not Conversation.objects.filter(pk=thread, agent=agent).exists():
        return HttpResponseBadRequest(f"No conversation '{thread}' of this agent to filter by.")
    rows = [_run_row(r) for r in run_view.runs_by_thread(agent=agent, thread=thread)]
    totals = timetravel.usage_totals(steps=agent.steps.all())
    context = {"agent": agent, "rows": rows, "totals": {**totals, **_cost(totals)}, "thread_filter": thread}
    return TemplateResponse(request, "core/_runs.html", context)


@login_required
def threads_waiting(request, agent_id: str):
    """The header's note that another thread of this agent waits for a person (empty when none does)."""
    agent = thread_or_404(request, agent_or_404(request, agent_id))
    waiting = run_view.threads_waiting(agent=agent, thread=agent.thread)
    return TemplateResponse(request, "core/_threads_waiting.html", {"agent": agent, "waiting": waiting})


@login_required
def steps_list(request, agent_id: str):
    """The past-steps chips of the inspector, numbered as the API numbers them (index within the run)."""
    agent = agent_or_404(request, agent_id)
    return TemplateResponse(
        request, "core/_steps.html", {"agent": agent, "steps": selectors.agent_steps_recent(agent=agent)}
    )


def _run_or_404(agent, run_id: str):
    try:
        return selectors.agent_run_get(agent=agent, run_id=run_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


@login_required
def run_detail(request, agent_id: str, run_id: str):
    """A run's steps (click one to open it), numbered within the conversation, its timeline and its graph."""
    agent = agent_or_404(request, agent_id)
    run = _run_or_404(agent, run_id)
    steps = selectors.run_steps_list(run=run)
    number = run_view.thread_steps_before(run=run, steps=steps)
    for step in steps:
        number += step.kind == "agent"
        step.number = number if step.kind == "agent" else None
    context = {"agent": agent, "run": run, "steps": steps}
    context.update(timeline=run_view.run_timeline(run=run), graph=run_graph.run_graph(run=run))
    return TemplateResponse(request, "core/_run.html", context)


def notice_context(run) -> dict:
    """What core/_run_notice.html draws of a run that did not complete (here, and live: core.web.live)."""
    return {
        "run": run,
        "delivered": selectors.run_inputs_delivered(run=run),
        # an answer to a wait is not a message to retry: the card it answered shows what became of it
        "inputs": [m for m in run.input_messages or [] if isinstance(m, dict) and m.get("role") != "approval"],
    }


@login_required
def window_marks(request, agent_id: str):
    """Which messages are in the context window now, and what evicted the others (JSON for the conversation)."""
    agent = thread_or_404(request, agent_or_404(request, agent_id))
    try:
        since = int(request.GET["since"]) if request.GET.get("since") else None
    except ValueError:
        raise Http404("bad cursor") from None
    return JsonResponse(window_marks_json(agent=agent, since_seq=since))
