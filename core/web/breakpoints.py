"""The debugger in the workspace: the Breakpoints panel (list, enable or disable, remove, add one in words) and the
pause card of a run held by a breakpoint before a model call (Continue, Step, Stop, and once let go, what happened).
One template draws the card in the page, after a reload and live (the page fetches it when a run pauses there and
again when the pause may have ended); a Continue refused because another tab or the API went first is told apart
here. The approval card (core.web.approvals) serves the breakpoints before a tool call."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.agents.breakpoints import breakpoint_clear, breakpoint_set, breakpoints_list
from core.errors import Conflict, DomainError, NotFound
from core.models import Run
from core.runs import waits
from core.web.approvals import ALREADY_ANSWERED, answering_run
from core.web.common import agent_or_404
from tools.selectors import agent_tools

# the five kinds as the panel offers them (core.engine.approvals.BREAKPOINT_KINDS, in words for a person)
KINDS = [
    ("model_call", "Before every model call"),
    ("tool_call", "Before a tool call"),
    ("block_change", "After a block changed"),
    ("tokens_over", "When the prompt passes N tokens"),
    ("tool_error", "After a tool failed"),
]
KIND_HELP = {
    "model_call": "The run stops before each call to the model: you see the exact request, may edit a memory block, "
    "then Continue, Step or Stop.",
    "tool_call": "The run stops before a call of a ticked tool runs (none ticked: any tool): you may edit its "
    "arguments, run it, skip it, step or stop.",
    "block_change": "After a tool changed a memory block, the run stops before the next model call.",
    "tokens_over": "The run stops before a model call whose prompt is longer than this many tokens.",
    "tool_error": "After a tool failed, the run stops before the next model call, before the model reads the error.",
}
MAX_TOKENS = 10_000_000
_ENDED = {
    "cancelled": "Stopped: the run ended here without calling the model.",
    waits.EXPIRED: "Expired: nobody let it go on in time, so the run ended here.",
}


class BreakpointForm(forms.Form):
    """A new breakpoint as the panel asks for it: the kind, the tools of a tool_call one, the tokens of a tokens_over
    one (the fields of the other kinds are ignored)."""

    on = forms.ChoiceField(choices=KINDS, label="Stop")
    tools = forms.MultipleChoiceField(required=False)
    tokens = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TOKENS,
        error_messages={
            "invalid": "Give the number of tokens as a whole number, such as 4000.",
            "min_value": "The number of tokens must be at least 1.",
            "max_value": f"The number of tokens must be at most {MAX_TOKENS:,}.",
        },
    )

    def __init__(self, *args, tool_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = [(n, n) for n in tool_names]
        if self.is_bound:  # a field the chosen kind does not use (hidden on the page) is neither checked nor kept
            data, on = self.data.copy(), self.data.get("on")
            for field, kind in (("tools", "tool_call"), ("tokens", "tokens_over")):
                if on != kind and field in data:
                    del data[field]
            self.data = data

    def clean(self):
        data = super().clean()
        if data.get("on") == "tokens_over" and data.get("tokens") is None and "tokens" not in self.errors:
            self.add_error("tokens", "Give the number of tokens the prompt must pass, such as 4000.")
        return data

    def breakpoint_data(self) -> dict:
        """The service's input (core.agents.breakpoints.breakpoint_set)."""
        on = self.cleaned_data["on"]
        return {
            "on": on,
            "tools": list(self.cleaned_data.get("tools") or []) if on == "tool_call" else [],
            "tokens": self.cleaned_data.get("tokens") if on == "tokens_over" else None,
        }


def breakpoint_words(point: dict) -> str:
    """What a stored breakpoint does, in a sentence."""
    on = point.get("on")
    if on == "tool_call":
        tools = point.get("tools") or []
        return f"Before a call of {', '.join(tools)}" if tools else "Before any tool call"
    if on == "tokens_over":
        return f"Before a model call whose prompt passes {point.get('tokens')} tokens"
    if on == "block_change":
        return "Before the model call after a tool changed a memory block"
    if on == "tool_error":
        return "Before the model call after a tool failed"
    return "Before every model call"


def panel_ctx(*, agent, tool_names: list[str] | None = None, form: BreakpointForm | None = None, **extra) -> dict:
    """What the Breakpoints panel renders: the agent's breakpoints in words, the add form and the tools to tick."""
    names = tool_names if tool_names is not None else [t.name for t in agent_tools(agent=agent)]
    points = [{**p, "words": breakpoint_words(p)} for p in breakpoints_list(agent=agent)]
    return {
        "agent": agent,
        "points": points,
        "bp_form": form or BreakpointForm(tool_names=names, initial={"on": "tool_call"}),
        "bp_kinds": [(value, label, KIND_HELP[value]) for value, label in KINDS],
        "bp_tools": names,
        **extra,
    }


def _panel(request, agent, **ctx) -> TemplateResponse:
    return TemplateResponse(request, "core/_breakpoints.html", panel_ctx(agent=agent, **ctx))


@login_required
def breakpoints_panel(request, agent_id: str):
    """The panel as it stands (another tab or the API may have changed the breakpoints)."""
    return _panel(request, agent_or_404(request, agent_id))


@login_required
@require_POST
def breakpoint_add(request, agent_id: str):
    """Add the breakpoint the form describes; a bad field is told inline and nothing is stored."""
    agent = agent_or_404(request, agent_id)
    names = [t.name for t in agent_tools(agent=agent)]
    form = BreakpointForm(request.POST, tool_names=names)
    if not form.is_valid():
        return _panel(request, agent, tool_names=names, form=form)
    try:
        point = breakpoint_set(agent=agent, data=form.breakpoint_data())
    except DomainError as exc:
        form.add_error(None, exc.message)
        return _panel(request, agent, tool_names=names, form=form)
    return _panel(request, agent, tool_names=names, added=point["id"])


@login_required
@require_POST
def breakpoint_toggle(request, agent_id: str, breakpoint_id: str):
    """Enable or disable one breakpoint (`enabled`: on or absent, as a checkbox posts it)."""
    agent = agent_or_404(request, agent_id)
    point = next((p for p in breakpoints_list(agent=agent) if p["id"] == breakpoint_id), None)
    if point is None:
        return _panel(request, agent, panel_error="That breakpoint is gone (removed in another tab or over the API).")
    data = {k: point[k] for k in ("on", "tools", "tokens")}
    breakpoint_set(
        agent=agent, data={**data, "enabled": request.POST.get("enabled") == "on"}, breakpoint_id=point["id"]
    )
    return _panel(request, agent)


@login_required
@require_POST
def breakpoint_remove(request, agent_id: str, breakpoint_id: str):
    agent = agent_or_404(request, agent_id)
    try:
        breakpoint_clear(agent=agent, breakpoint_id=breakpoint_id)
    except NotFound:
        return _panel(
            request, agent, panel_error="That breakpoint was already removed (in another tab or over the API)."
        )
    return _panel(request, agent)


# --------------------------------------------------------------------------- the pause before a model call


def held_run(*, agent) -> Run | None:
    """The run of the agent's thread (`thread_view`) that a breakpoint holds before a model call, if any."""
    run = (
        Run.objects.filter(
            agent_id=agent.id, conversation_id=getattr(agent, "thread", None), waiting_until__gt=timezone.now()
        )
        .order_by("-created_at")
        .first()
    )
    return run if run is not None and (run.waiting or {}).get("before") == "model_call" else None


def _resumed_by(run: Run) -> Run | None:
    """The run that let this one's pause go on (its first input resumes it)."""
    later = Run.objects.filter(
        agent_id=run.agent_id, conversation_id=run.conversation_id, created_at__gte=run.created_at
    ).exclude(pk=run.pk)
    for other in later.order_by("created_at").only("id", "input_messages", "status")[:20]:
        first = (other.input_messages or [{}])[0]
        if isinstance(first, dict) and first.get("resumes") == run.id:
            return other
    return None


def pause_card(*, run: Run) -> dict:
    """The pause card of a run held before a model call: waiting (why, the prompt's tokens, the breakpoint, until
    when), answering (a Continue or Step is being run), or — once let go — continued or stepped (by which run),
    stopped, expired. Reads the run and, once it no longer waits, the run that resumed it."""
    wait = run.waiting or {}
    card = {"run_id": run.id, "date": run.created_at}
    if run.waiting_until is not None:
        answering = answering_run(agent_id=run.agent_id, wait_run_id=run.id)
        point = wait.get("breakpoint") or {}
        card.update(
            state="answering" if answering else "waiting",
            answer_run_id=answering.id if answering else None,
            stepping=(answering.input_messages or [{}])[0].get("step") if answering else False,
            why=wait.get("why") or "",
            tokens=wait.get("tokens"),
            breakpoint=point,
            stepping_hold=point.get("id") == "step",
            since=wait.get("since"),
            expires_at=run.waiting_until,
        )
        return card
    if run.stop_reason in _ENDED:
        card.update(state="stopped" if run.stop_reason == "cancelled" else run.stop_reason)
        card["ended_text"] = _ENDED[run.stop_reason]
        return card
    resumed = _resumed_by(run)
    if resumed is not None:
        first = (resumed.input_messages or [{}])[0]
        card.update(state="stepped" if first.get("step") else "continued", answer_run_id=resumed.id)
    else:
        card.update(state="ended")
    return card


@login_required
def pause_card_view(request, agent_id: str, run_id: str):
    """One pause card as it stands now (the conversation fetches it when a run pauses before a model call and when
    the pause may have ended). 404 for a run that never paused there."""
    agent = agent_or_404(request, agent_id)
    run = Run.objects.filter(pk=run_id, agent=agent).first()
    if run is None or (run.waiting_until is not None and (run.waiting or {}).get("before") != "model_call"):
        raise Http404("no such pause")
    if run.waiting_until is None and run.stop_reason not in ("requires_approval", *_ENDED):
        raise Http404("no such pause")
    return TemplateResponse(request, "core/_pause.html", {"agent": agent, "card": pause_card(run=run)})


def continue_refused(*, agent_id: str, run_id: str, exc: DomainError) -> dict:
    """Why a Continue / Step / Stop sent from a card was refused, for that tab: the run no longer waits or its pause
    is being let go from elsewhere (another tab, the API) — code ALREADY_ANSWERED — else the refusal's own text."""
    run = Run.objects.filter(pk=run_id, agent_id=agent_id).only("id", "waiting_until").first()
    if run is None:
        return {"code": "NOT_FOUND", "message": exc.message, "run_id": None}
    answering = answering_run(agent_id=agent_id, wait_run_id=run.id)
    if answering is not None:
        text = (
            "Not sent: this pause was already let go from another tab (or over the API); "
            f"run …{answering.id[-8:]} is going on from it."
        )
        return {"code": ALREADY_ANSWERED, "message": text, "run_id": answering.id}
    if run.waiting_until is None:
        text = (
            "Not sent: this run no longer waits — it was continued or stopped from another tab (or over the API), or "
            "it expired. The card shows what happened."
        )
        return {"code": ALREADY_ANSWERED, "message": text, "run_id": None}
    detail = exc.detail if isinstance(exc.detail, dict) else {}
    code = "BUSY" if isinstance(exc, Conflict) else detail.get("code")
    return {"code": code, "message": exc.message, "run_id": detail.get("run_id")}
