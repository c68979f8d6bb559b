"""The agent workspace: settings, conversation history, context window and simulator (three panes)."""

import json
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from core import providers, selectors
from core.agents import services, versions
from core.agents.context import agent_context
from core.agents.conversations import conversation_branch_at, conversation_create, conversations_list
from core.agents.history import agent_messages_reset
from core.engine import tokens
from core.errors import DomainError
from core.runs import timetravel
from core.selectors import agent_tags
from core.text import json_input
from core.web.breakpoints import panel_ctx
from core.web.common import agent_or_404, org, thread_or_404
from core.web.history import history_after, history_page, in_flight, undelivered
from core.web.inspector import context_view_model
from core.web.waits import model_call_card, model_call_wait
from memory.presenters import block_cards
from memory.selectors import agent_blocks, blocks_attachable
from tools import selectors as tool_selectors
from tools import services as tool_services
from tools.selectors import agent_tools, tools_list


class AgentSettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    model = forms.CharField(max_length=200)
    system = forms.CharField(
        widget=forms.Textarea, required=False, strip=False
    )  # spaces and line ends are the prompt's
    temperature = forms.FloatField(min_value=0, max_value=2)
    max_steps = forms.IntegerField(min_value=1, max_value=1000)
    context_window_limit = forms.IntegerField(
        min_value=services.MIN_CONTEXT_WINDOW, max_value=services.MAX_CONTEXT_WINDOW
    )
    tags = forms.CharField(required=False, help_text="comma-separated")
    version_message = forms.CharField(required=False, max_length=versions.MAX_MESSAGE)

    def clean_system(self) -> str:
        return self.cleaned_data["system"].replace("\r\n", "\n")  # a browser sends a textarea's lines with CRLF


def _settings_initial(agent) -> dict:
    return {
        "name": agent.name,
        "model": agent.model,
        "system": agent.system,
        "temperature": (agent.model_settings or {}).get("temperature", 0.7),
        "max_steps": agent.max_steps,
        "context_window_limit": agent.context_window_limit,
        "tags": ", ".join(agent_tags(agent)),
    }


def _tools_ctx(request, agent) -> dict:
    """What the tools and rules sections render: attached tools (those whose calls need approval by name), the rest
    of the library, the rules as JSON."""
    attached = agent_tools(agent=agent)
    attached_ids = {t.id for t in attached}
    return {
        "agent": agent,
        "tools": attached,
        "library": [t for t in tools_list(owner=org(request)) if t.id not in attached_ids],
        "needs_approval": {r.get("tool_name") for r in agent.tool_rules or [] if r.get("type") == "requires_approval"},
        "rules_json": json.dumps(agent.tool_rules or [], indent=2),
    }


def definition_ctx(request, agent) -> dict:
    """What the settings, tools and rules sections render, from the agent as stored."""
    return {
        "settings_form": AgentSettingsForm(initial=_settings_initial(agent)),
        "system_tokens": tokens.count_text(agent.model, agent.system),
        "models": providers.models_list(owner=org(request)),
        "window_max": max(tokens.model_info(agent.model).context_window, agent.context_window_limit),
        **_tools_ctx(request, agent),
    }


def _workspace_ctx(request, agent, settings_form=None) -> dict:
    owner = org(request)
    thread = thread_or_404(request, agent)  # the conversation shown (its messages and window), else the agent's own
    ctx = agent_context(agent=thread)
    items, older = history_page(agent=thread)
    blocks = block_cards(agent_blocks(agent=agent))  # each with its last change, for the memory column
    definition = definition_ctx(request, agent)
    held = model_call_wait(agent=thread)  # a run of this thread that waits before a model call: its card
    context = context_view_model(
        ctx, blocks=blocks, calibration=timetravel.token_calibration(owner=agent.owner, model=agent.model)
    )
    wait_card = model_call_card(run=held) if held is not None else None
    if wait_card is not None and wait_card["state"] == "waiting":  # the call Continue sends now, as the Context tab
        wait_card["tokens"] = context["raw_total"]
    return {
        "agent": agent,
        "nav": "agents",
        "items": items,
        "older": older,
        "context": context,
        **definition,
        "settings_form": settings_form or definition["settings_form"],
        "model_configured": providers.model_is_configured(owner=owner, handle=agent.model),
        "blocks": blocks,
        "other_blocks": blocks_attachable(owner=owner, agent=agent),  # "Attach existing" from the first load
        "steps": selectors.agent_steps_recent(agent=agent),
        "fork_origin": selectors.agent_fork_origin(agent=agent),
        "forks": selectors.agent_forks(agent=agent),
        "ide_config": _ide_config(agent, thread.thread),
        "in_flight": in_flight(agent=thread),  # the person's messages the thread's run holds, shown as sent
        "thread": thread.thread,
        "conversations": conversations_list(owner=owner, agent_id=agent.id, limit=200),
        # items the page draws before the server stores them: the person's message being sent, a note
        "local_items": {
            "bubble": {"message_type": "user_message", "pending": True},
            "note": {"message_type": "error_message", "message": " "},
        },
        "model_call_wait": wait_card,
        "held_run_id": held.id if held is not None else None,
        "undelivered": undelivered(agent=thread),
        **panel_ctx(agent=agent, tool_names=[t.name for t in definition["tools"]]),
    }


def _ide_config(agent, thread: str | None = None) -> dict:
    """What the workspace's scripts need: ids and URLs (a JSON island: pages run no inline script); the URLs that
    read a thread's messages or window name the conversation shown."""
    url = lambda name, *args: reverse(name, args=[agent.id, *args])  # noqa: E731
    in_thread = lambda name: url(name) + (f"?conversation={thread}" if thread else "")  # noqa: E731
    return {
        "agentId": agent.id,
        "conversationId": thread or "",
        "activeRunId": selectors.agent_active_run_id(agent=agent, thread=thread) or "",
        "sendUrl": in_thread("agent_send"),
        "cancelUrl": in_thread("agent_cancel"),
        "stepUrl": url("agent_step", "STEP"),
        "windowUrl": in_thread("agent_window"),
        "historyUrl": in_thread("agent_history"),
    }


@login_required
def workspace(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    if request.htmx:  # the conversation picker (htmx): the page opens the chosen thread (without script, its form)
        thread = request.GET.get("conversation")
        return HttpResponseClientRedirect(request.path + (f"?{urlencode({'conversation': thread})}" if thread else ""))
    return TemplateResponse(request, "core/workspace.html", _workspace_ctx(request, agent))


@login_required
@require_POST
def settings_save(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    form = AgentSettingsForm(request.POST)
    saved = False
    if form.is_valid():
        data = form.cleaned_data
        changes = {k: data[k] for k in ("name", "model", "system", "max_steps", "context_window_limit")}
        if data["temperature"] != _settings_initial(agent)["temperature"]:  # else the version records no change
            changes["model_settings"] = {**(agent.model_settings or {}), "temperature": data["temperature"]}
        changes["tags"] = [t.strip() for t in data["tags"].split(",") if t.strip()]
        changes["version_message"] = data["version_message"]
        room = _window_room(agent, data)
        if room is not None:
            form.add_error("context_window_limit", room)
    if form.is_valid():
        try:
            agent = services.agent_settings_update(agent=agent, changes=changes)
            saved = True
        except DomainError as exc:
            form.add_error("model" if isinstance(exc.detail, dict) and "available" in exc.detail else None, exc.message)
    ctx = {
        "agent": agent,
        "settings_form": form,
        "saved": saved,
        "models": providers.models_list(owner=org(request)),
        "system_tokens": tokens.count_text(agent.model, form.data.get("system", "")),
        "window_max": max(tokens.model_info(agent.model).context_window, agent.context_window_limit),
    }
    response = TemplateResponse(request, "core/_settings_form.html", ctx)
    return trigger_client_event(response, "context-changed") if saved else response


# Tokens a window must hold beyond its fixed part for a turn to be possible: a short message and the reply's start.
WINDOW_ROOM = 256


def _window_room(agent, data: dict) -> str | None:
    """Why a window is unusable (the system prompt, memory blocks and tool definitions, as they would be with the
    form's prompt and model, leave no room for a message), or None."""
    try:
        ctx = agent_context(agent=agent, model=data["model"], system=data["system"])
    except DomainError:
        return None  # the save says what is wrong with the model
    fixed = ctx.total_tokens - sum(s.tokens for s in ctx.sections if s.name in ("messages", "summary"))
    if data["context_window_limit"] >= fixed + WINDOW_ROOM:
        return None
    return (
        f"A {data['context_window_limit']}-token window cannot hold this agent: the system prompt, memory blocks "
        f"and tool definitions alone take {fixed} tokens, leaving no room for a message. Use at least "
        f"{fixed + WINDOW_ROOM} tokens, or shorten memory blocks or detach tools."
    )


@login_required
@require_POST
def token_count(request, agent_id: str):
    """Tokens of an unsaved system prompt (a read: nothing is stored)."""
    agent = agent_or_404(request, agent_id)
    n = tokens.count_text(request.POST.get("model") or agent.model, request.POST.get("system", ""))
    return TemplateResponse(
        request, "core/_token_count.html", {"system_tokens": n, "tokenizer": tokens.get_tokenizer(agent.model).name}
    )


@login_required
def history_older(request, agent_id: str):
    """A page of older messages (`before`: a seq), or what came after `after` (a tab whose socket was away)."""
    agent = thread_or_404(request, agent_or_404(request, agent_id))
    after = "after" in request.GET
    try:
        cursor = int(request.GET.get("after" if after else "before", ""))
        if not 0 <= cursor < 2**63:
            raise ValueError
    except ValueError:
        raise Http404("bad cursor") from None
    if after:
        items, older = history_after(agent=agent, after_seq=cursor), None
    else:
        items, older = history_page(agent=agent, before_seq=cursor)
    context = {"agent": agent, "items": items, "older": older, "thread": agent.thread, "newer": after}
    return TemplateResponse(request, "core/_history.html", context)


@login_required
@require_POST
def conversation_new(request, agent_id: str):
    """Start another conversation with the agent and show it."""
    agent = agent_or_404(request, agent_id)
    created = conversation_create(agent=agent)
    return redirect(reverse("workspace", args=[agent.id]) + f"?conversation={created.id}")


@login_required
@require_POST
def conversation_branch(request, agent_id: str):
    """Branch here: a new thread of the agent holding its thread's context up to one message, shown next."""
    agent = agent_or_404(request, agent_id)
    try:
        created = conversation_branch_at(agent=agent, message_id=request.POST.get("message_id", ""))
    except DomainError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    url = reverse("workspace", args=[agent.id]) + f"?conversation={created.id}"
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@login_required
@require_POST
def messages_reset(request, agent_id: str):
    try:
        agent = agent_messages_reset(agent=agent_or_404(request, agent_id))
    except DomainError as exc:
        return HttpResponse(exc.message, status=409, content_type="text/plain")
    response = TemplateResponse(
        request, "core/_history.html", {"agent": agent, "items": history_page(agent=agent)[0], "older": None}
    )
    return trigger_client_event(response, "context-changed")


def _tool_or_404(request, tool_id: str):
    try:
        return tool_selectors.tool_get(owner=org(request), tool_id=tool_id)
    except DomainError as exc:
        raise Http404(str(exc)) from exc


def _tools_changed(request, agent, *, rules_before: list) -> TemplateResponse:
    """The tools section again, and the rules section too (out of band) when the write changed the rules."""
    ctx = {**_tools_ctx(request, agent), "rules_changed": agent.tool_rules != rules_before}
    response = TemplateResponse(request, "core/_tools_changed.html", ctx)
    return trigger_client_event(response, "context-changed")


@login_required
@require_POST
def tool_attach_toggle(request, agent_id: str, tool_id: str, action: str):
    agent = agent_or_404(request, agent_id)
    tool, rules_before = _tool_or_404(request, tool_id), list(agent.tool_rules or [])
    with versions.noted(request.POST.get("version_message")):
        (tool_services.tool_attach if action == "attach" else tool_services.tool_detach)(agent=agent, tool=tool)
    return _tools_changed(request, agent, rules_before=rules_before)


@login_required
@require_POST
def tool_attach(request, agent_id: str):
    """The tools list's Attach: attaches the tool chosen in its list (`tool_id`)."""
    return tool_attach_toggle(request, agent_id, request.POST.get("tool_id", ""), "attach")


@login_required
@require_POST
def tool_approval_toggle(request, agent_id: str, tool_id: str):
    """The attached tool's "needs approval" box: adds or removes the agent's requires_approval rule for it."""
    agent = agent_or_404(request, agent_id)
    tool, rules_before = _tool_or_404(request, tool_id), list(agent.tool_rules or [])
    with versions.noted(request.POST.get("version_message")):
        tool_services.agent_tool_approval_set(
            agent=agent, tool_name=tool.name, requires_approval=request.POST.get("requires_approval") == "on"
        )
    return _tools_changed(request, agent, rules_before=rules_before)


@login_required
def rules_save(request, agent_id: str):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    agent = agent_or_404(request, agent_id)
    text, note = request.POST.get("tool_rules", ""), request.POST.get("version_message", "")
    error, saved = "", False
    try:
        rules = json_input(text or "[]")
        if not isinstance(rules, list):
            raise ValueError("tool rules must be a JSON list of rule objects")
        with versions.noted(note):
            agent = services.agent_rules_update(agent=agent, rules=rules)
        text, saved = json.dumps(agent.tool_rules, indent=2), True
    except json.JSONDecodeError as exc:
        error = f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
    except (ValueError, DomainError) as exc:
        error = str(exc)
    ctx = {"agent": agent, "rules_json": text, "rules_error": error, "saved": saved, "version_note": note}
    response = TemplateResponse(request, "core/_rules.html", ctx)
    return trigger_client_event(response, "context-changed") if saved else response
