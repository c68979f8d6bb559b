"""The History tab of the agent workspace: the agent's versions, a diff between any two, and restore."""

from django.contrib.auth.decorators import login_required
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from core.agents import restore, versions
from core.errors import DomainError
from core.web.common import agent_or_404


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
        ctx["diff"] = versions.version_diff(agent=agent, number=number, against=against)
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
    # The timeline, settings and context panels reload on these events; the flash stays in the diff's place.
    response = TemplateResponse(request, "core/_version_flash.html", {"restored": version})
    for event in ("context-changed", "blocks-changed", "versions-changed"):
        response = trigger_client_event(response, event)
    return response
