"""Time travel in the IDE: the replay comparison of a step (overrides on the left, one column per model, each
diffed against what the agent actually did), past replays, and "Fork here". Thin: parse, call core.runs.timetravel,
render."""

import difflib
import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import providers, selectors
from core.agents import run_view
from core.engine import tokens
from core.errors import DomainError, NotFound
from core.models import Message
from core.runs import timetravel
from core.web.common import agent_or_404, org
from tools.selectors import tools_list

MAX_DIFF_LINES = 400


def _step_or_404(agent, step_id: str):
    try:
        return selectors.agent_step_get(agent=agent, step_id=step_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def _outcome_text(content, tool_calls) -> str:
    """A reply as comparable lines: its text, then each tool call with its arguments pretty-printed."""
    lines = (content or "").splitlines()
    for call in tool_calls or []:
        lines += [f"→ {call.get('name')}"] + _pretty(call.get("arguments"), sort=True).splitlines()
    return "\n".join(lines)


def _pretty(args, *, sort: bool = False) -> str:
    try:
        return json.dumps(
            json.loads(args) if isinstance(args, str) else args, indent=2, ensure_ascii=False, sort_keys=sort
        )
    except ValueError:
        return str(args)


def _diff(actual: str, replayed: str) -> list[tuple[str, str]]:
    """Line diff of what the agent did against a replayed answer ('-' only the agent's, '+' only the replay's)."""
    out = []
    for line in difflib.ndiff(actual.splitlines(), replayed.splitlines()):
        if line.startswith("? "):
            continue
        out.append((line[0] if line[0] in "+-" else " ", line[2:]))
    return out[:MAX_DIFF_LINES]


def _calls_view(tool_calls) -> list[dict]:
    out = []
    for call in tool_calls or []:
        out.append({"name": call.get("name") or "", "arguments": _pretty(call.get("arguments"))})
    return out


def _result_view(result: dict, actual_text: str) -> dict:
    usage = result.get("usage") or {}
    mine = _outcome_text(result.get("content"), result.get("tool_calls"))
    return {
        **result,
        "usage": usage,
        "calls": _calls_view(result.get("tool_calls")),
        "request_json": json.dumps(result["request"], indent=2, ensure_ascii=False) if result.get("request") else "",
        "diff": None if result.get("error") else _diff(actual_text, mine),
        "same": not result.get("error") and mine == actual_text,
    }


def _form_state(step, replay) -> dict:
    """What the override form shows: the step's own state, with the reopened replay's overrides on top."""
    state = step.state or {}
    o = (replay.overrides if replay else None) or {}
    blocks = [
        {
            "label": b["label"],
            "original": b["value"],
            "value": (o.get("blocks") or {}).get(b["label"], b["value"]),
            "edited": b["label"] in (o.get("blocks") or {}),
        }
        for b in state.get("blocks", [])
    ]
    system = (state.get("spec") or {}).get("system", "")
    dropped = set(o.get("drop_messages") or [])
    rows = {m.id: m for m in Message.objects.filter(id__in=state.get("message_ids", []))}
    messages = [
        {
            "id": i,
            "role": rows[i].role,
            "name": rows[i].name,
            "text": rows[i].text or _calls_label(rows[i]),
            "dropped": i in dropped,
        }
        for i in state.get("message_ids", [])
        if i in rows
    ]
    removed = set(o.get("tools_remove") or [])
    tools = [{"name": x["name"], "removed": x["name"] in removed} for x in state.get("tools", [])]
    return {
        "recordable": bool(state),
        "system": o.get("system") if o.get("system") is not None else system,
        "system_original": system,
        "system_edited": o.get("system") is not None,
        "blocks": blocks,
        "messages": messages,
        "tools": tools,
        "added": set(o.get("tools_add") or []),
        "models": o.get("models") or [step.model],
        "temperature": o.get("temperature"),
        "max_tokens": o.get("max_tokens"),
    }


def _calls_label(message) -> str:
    return ", ".join(f"{c.get('name')}(…)" for c in message.tool_calls or []) or message.kind or ""


def _embedding_model(handle: str) -> bool:
    """An embedding model cannot answer a chat request: not a replay target."""
    return tokens.model_info(handle).mode == "embedding" or "embed" in handle.rsplit("/", 1)[-1].lower()


def _page(request, agent, step, *, replay=None, error: str = "", status: int = 200):
    owner = org(request)
    replays = timetravel.replays_list(step=step)
    if replay is None and replays and not error:
        replay = replays[0]
    form = _form_state(step, replay)
    offered = {t["name"] for t in form["tools"]}
    handles = [m["handle"] for m in providers.models_list(owner=owner) if not _embedding_model(m["handle"])]
    extra = [m for m in form["models"] if m not in handles]
    ctx = {
        "agent": agent,
        "step": step,
        "number": run_view.step_numbers_of(step_ids={step.id}).get(step.id, step.index),
        "nav": "agents",
        "form": form,
        "replays": replays,
        "replay": replay,
        "error": error,
        "models": [{"handle": h, "checked": h in form["models"]} for h in handles],
        "extra_models": ", ".join(extra),
        "sent": step.request or {},
        "library": [
            {"name": t.name, "checked": t.name in form["added"]}
            for t in tools_list(owner=owner)
            if t.name not in offered
        ],
    }
    if replay is not None:
        actual = replay.actual or {}
        actual_text = _outcome_text(actual.get("content"), actual.get("tool_calls"))
        ctx.update(
            actual={**actual, "calls": _calls_view(actual.get("tool_calls")), "usage": actual.get("usage") or {}},
            results=[_result_view(r, actual_text) for r in replay.results or []],
        )
    return TemplateResponse(request, "core/replay.html", ctx, status=status)


@login_required
def replay_page(request, agent_id: str, step_id: str):
    """The comparison view of a step: overrides, and the newest replay (or `?replay=<id>`) side by side."""
    agent = agent_or_404(request, agent_id)
    step = _step_or_404(agent, step_id)
    replay = None
    if request.GET.get("replay"):
        replay = next((r for r in timetravel.replays_list(step=step) if r.id == request.GET["replay"]), None)
        if replay is None:
            raise Http404("replay not found")
    return _page(request, agent, step, replay=replay)


def _overrides(post, step) -> dict:
    """The form's fields as step_replay's overrides; an override equal to what the step had is no override."""
    state = step.state or {}
    models = post.getlist("models") + [m.strip() for m in post.get("extra_models", "").split(",") if m.strip()]
    out = {"models": list(dict.fromkeys(models)) or None}
    system = post.get("system")
    if system is not None and state and system.replace("\r\n", "\n") != state["spec"]["system"]:
        out["system"] = system.replace("\r\n", "\n")
    blocks = {}
    for b in state.get("blocks", []):
        value = post.get(f"block:{b['label']}")
        if value is not None and value.replace("\r\n", "\n") != b["value"]:
            blocks[b["label"]] = value.replace("\r\n", "\n")
    out.update(
        blocks=blocks or None,
        drop_messages=post.getlist("drop") or None,
        tools_remove=post.getlist("tools_remove") or None,
        tools_add=post.getlist("tools_add") or None,
    )
    for key, cast in (("temperature", float), ("max_tokens", int)):
        raw = post.get(key, "").strip()
        if raw:
            try:
                out[key] = cast(raw)
            except ValueError:
                raise DomainError(f"{key.replace('_', ' ')} must be a number") from None
    if out.get("temperature") is not None and not 0 <= out["temperature"] <= 2:
        raise DomainError("temperature must be between 0 and 2")
    if out.get("max_tokens") is not None and not 1 <= out["max_tokens"] <= 1_000_000:
        raise DomainError("max tokens must be between 1 and 1000000")
    return out


@login_required
@require_POST
def replay_run(request, agent_id: str, step_id: str):
    """Replay the step with the form's overrides (calls each chosen model), then show the comparison."""
    agent = agent_or_404(request, agent_id)
    step = _step_or_404(agent, step_id)
    try:
        replay = timetravel.step_replay(owner=org(request), step=step, **_overrides(request.POST, step))
    except DomainError as exc:
        return _page(request, agent, step, error=exc.message, status=422)
    return redirect(reverse("agent_replay", args=[agent.id, step.id]) + f"?replay={replay.id}")


@login_required
@require_POST
def fork_create(request, agent_id: str, step_id: str):
    """Fork the agent at the step (after it, or before it with `before`), then open the fork's workspace."""
    agent = agent_or_404(request, agent_id)
    step = _step_or_404(agent, step_id)
    try:
        fork = timetravel.agent_fork(agent=agent, step=step, before=request.POST.get("before") == "1")
    except DomainError as exc:
        return HttpResponse(exc.message, status=422, content_type="text/plain; charset=utf-8")
    return redirect("workspace", agent_id=fork.id)
