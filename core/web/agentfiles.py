"""Agent files in the IDE: upload with a preview of what will be created, confirm; download (export).

The file is posted (multipart) both times: the preview is swapped in beside the form that still holds the chosen
file, and "Import" submits that form again with `confirm`. Nothing is kept on the server between the two.
"""

import json

from django.contrib.auth.decorators import login_required
from django.db import DatabaseError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import ImportOptions, agentfile_import, agentfile_preview
from core.agents.agentfile.model import MAX_FILE_BYTES, AgentFileError
from core.agents.agentfile.parse import parse_agent_file
from core.errors import DomainError, Invalid
from core.web.common import agent_or_404, org


def _options(post):
    return ImportOptions(
        name=post.get("name") or None,
        model=post.get("model") or None,
        strip_messages=post.get("strip_messages") == "on",
        tool_policy="override" if post.get("tool_policy") == "override" else "reuse",
    )


def _parsed(upload):
    if upload is None:
        raise Invalid("Choose an agent file (.af) to import.")
    if upload.size is not None and upload.size > MAX_FILE_BYTES:
        raise AgentFileError("", f"the file is {upload.size} bytes; the limit is {MAX_FILE_BYTES} bytes")
    return parse_agent_file(upload.read(MAX_FILE_BYTES + 1))


@login_required
@require_POST
def agent_import(request):
    """POST the file with the options: without `confirm`, preview (nothing stored); with it, import atomically."""

    upload = request.FILES.get("file")
    options = _options(request.POST)
    ctx = {"filename": getattr(upload, "name", ""), "nav": "agents", "options": options, "max_bytes": MAX_FILE_BYTES}
    try:
        parsed = _parsed(upload)
        if request.POST.get("confirm") == "1":
            result = agentfile_import(owner=org(request), parsed=parsed, options=options)
            return redirect("workspace", agent_id=result.agent_ids[0])
        ctx["preview"] = agentfile_preview(owner=org(request), parsed=parsed, options=options)
    except DomainError as exc:
        ctx["error"] = str(exc)
    except DatabaseError:
        ctx["error"] = "The file's contents could not be stored (a value is too long or out of range)."
    if request.htmx:  # swapped in beside the form; htmx swaps only 2xx answers
        return TemplateResponse(request, "core/_import_preview.html", ctx)
    return TemplateResponse(request, "core/agent_import.html", ctx, status=400 if "error" in ctx else 200)


@login_required
def agent_export(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    data = agentfile_export(
        agent=agent,
        include_archival=request.GET.get("archival") == "1",
        include_history=request.GET.get("history") == "1",
    )
    response = HttpResponse(json.dumps(data, indent=2, default=str), content_type="application/json")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in agent.name)[:60] or "agent"
    response["Content-Disposition"] = f'attachment; filename="{safe}.af"'
    return response
