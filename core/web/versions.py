"""The History tab of the agent workspace: the agent's versions, a diff between any two, and restore."""

import difflib
import json

from django.contrib.auth.decorators import login_required
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from core.agents import restore, versions
from core.errors import DomainError
from core.web.common import agent_or_404
from core.web.workspace import definition_ctx

# What the IDE calls each field of a definition (the API keeps the field names).
LABELS = {
    "name": "Name",
    "description": "Description",
    "agent_type": "Agent type",
    "system": "System prompt",
    "model": "Model",
    "model_settings": "Model settings",
    "context_window_limit": "Context window",
    "embedding": "Embedding model",
    "tool_rules": "Tool rules",
    "max_steps": "Max steps",
    "overflow_strategy": "Overflow strategy",
    "metadata": "Metadata",
    "tags": "Tags",
    "secret_names": "Secret names",
}
_LISTED = ("tags", "secret_names")  # short lists of names: shown inline, not as a diff


def _shown(value) -> str:
    if value is None or value == "":
        return "—"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _lines(diff: list[str]) -> list[tuple[str, str]]:
    """Unified-diff lines with their kind (the file headers and hunk markers are context, not changes)."""
    out = []
    for line in diff:
        kind = "hunk" if line.startswith(("---", "+++", "@@")) else {"+": "add", "-": "del"}.get(line[:1], "same")
        out.append((kind, line))
    return out


def _json_diff(before, after) -> list[tuple[str, str]]:
    text = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True, indent=2).splitlines() if v else []  # noqa: E731
    lines = _lines(list(difflib.unified_diff(text(before), text(after), lineterm="", n=2))[2:])
    # a value set or cleared entirely is one hunk: its "@@ -0,0 +1,n @@" marker says nothing
    return [(kind, line) for kind, line in lines if kind != "hunk"] if not before or not after else lines


def change_view(change: dict) -> dict:
    """One change of a diff as the tab shows it: a label, what happened, and text diff lines or before → after."""
    field = change["field"]
    view = {"field": field, "label": LABELS.get(field, field), "lines": [], "before": None, "after": None}
    if field.startswith("tools."):
        name, kind = field.split(".", 1)[1], change["change"]
        view["label"] = f"Tool {name}"
        if kind == "code":
            view["note"] = f"code v{change['before']} → v{change['after']} ({', '.join(change['fields'])})"
        else:
            version = change["after"] if kind == "attached" else change["before"]
            view["note"] = f"{kind} (code v{version})" if version else kind
        view["lines"] = _lines(change.get("diff") or [])
    elif change.get("diff") is not None:
        view["lines"] = _lines(change["diff"])
    elif field in _LISTED:
        view["before"], view["after"] = (
            ", ".join(change["before"] or []) or "—",
            ", ".join(change["after"] or []) or "—",
        )
    elif isinstance(change["before"], dict | list) or isinstance(change["after"], dict | list):
        view["lines"] = _json_diff(change["before"], change["after"])
    else:
        view["before"], view["after"] = _shown(change["before"]), _shown(change["after"])
    return view


@login_required
@require_GET
def history_panel(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    timeline = versions.versions_with_tests(agent=agent)
    return TemplateResponse(request, "core/_versions.html", {"agent": agent, "timeline": timeline})


@login_required
@require_GET
def history_diff(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    ctx = {"agent": agent}
    try:
        number = int(request.GET.get("number", ""))
        against = int(request.GET.get("against", "")) if request.GET.get("against") else None
        diff = versions.version_diff(agent=agent, number=number, against=against)
        ctx["diff"] = {**diff, "changes": [change_view(c) for c in diff["changes"]]}
    except ValueError:
        ctx["error"] = "Pick two versions to compare."
    except DomainError as exc:
        ctx["error"] = exc.message
    return TemplateResponse(request, "core/_version_diff.html", ctx)  # an error is shown inline, in the diff's place


@login_required
@require_POST
def history_restore(request, agent_id: str, number: int):
    agent = agent_or_404(request, agent_id)
    try:
        version = restore.version_restore(
            agent=agent,
            number=number,
            restore_blocks=request.POST.get("restore_blocks") == "on",
            message=request.POST.get("message", "").strip()[: versions.MAX_MESSAGE],
        )
    except DomainError as exc:
        return TemplateResponse(request, "core/_version_flash.html", {"error": exc.message})
    # The timeline, context and memory panels reload on these events; the settings, tools and rules sections come
    # along out of band (left as they were, a later "Save settings" would undo the restore); the flash stays in
    # the diff's place.
    ctx = {"restored": version, "agent": agent_or_404(request, agent_id), "saved": False}
    response = TemplateResponse(request, "core/_version_flash.html", {**ctx, **definition_ctx(request, ctx["agent"])})
    for event in ("context-changed", "blocks-changed", "versions-changed"):
        response = trigger_client_event(response, event)
    return response
