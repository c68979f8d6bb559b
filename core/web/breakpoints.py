"""The debugger's Breakpoints panel in the workspace: list, enable or disable, remove, add one in words. A run a
breakpoint stops waits for a person; its card is core.web.waits'."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.agents.breakpoints import breakpoint_clear, breakpoint_set, breakpoints_list
from core.errors import DomainError, NotFound
from core.web.common import agent_or_404
from tools.selectors import agent_tools

# the five kinds as the panel offers them (core.engine.breakpoints.BREAKPOINT_KINDS, in words for a person)
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
