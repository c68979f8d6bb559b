"""Agent files in the IDE: upload with a preview of what will be created, confirm; download (export)."""

import base64
import json

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core.errors import DomainError
from core.web.common import agent_or_404, org

MAX_UPLOAD = 20 * 1024 * 1024


def _options(post):
    from core.agentfile.importer import ImportOptions

    return ImportOptions(name=post.get("name") or None, model=post.get("model") or None,
                         strip_messages=post.get("strip_messages") == "on",
                         tool_policy="override" if post.get("tool_policy") == "override" else "reuse")


@login_required
@require_POST
def agent_import(request):
    """First POST (a file): parse and preview, nothing stored. Second POST (confirm): import atomically."""
    from core.agentfile.importer import agentfile_import, agentfile_preview
    from core.agentfile.parse import parse_agent_file

    if request.FILES.get("file"):
        upload = request.FILES["file"]
        raw = upload.read(MAX_UPLOAD + 1)
        filename = upload.name
    else:
        raw = base64.b64decode(request.POST.get("payload", "").encode() or b"")
        filename = request.POST.get("filename", "")
    ctx = {"filename": filename, "nav": "agents"}
    try:
        parsed = parse_agent_file(raw)
        options = _options(request.POST)
        if request.POST.get("confirm") == "1":
            result = agentfile_import(owner=org(request), parsed=parsed, options=options)
            return redirect("workspace", agent_id=result.agent_ids[0])
        ctx.update(preview=agentfile_preview(owner=org(request), parsed=parsed, options=options),
                   payload=base64.b64encode(raw).decode(), options=options)
    except DomainError as exc:
        ctx["error"] = str(exc)
    return TemplateResponse(request, "core/agent_import.html", ctx, status=400 if "error" in ctx else 200)


@login_required
def agent_export(request, agent_id: str):
    from core.agentfile.exporter import agentfile_export

    agent = agent_or_404(request, agent_id)
    data = agentfile_export(agent=agent, include_archival=request.GET.get("archival") == "1")
    response = HttpResponse(json.dumps(data, indent=2, default=str), content_type="application/json")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in agent.name)[:60] or "agent"
    response["Content-Disposition"] = f'attachment; filename="{safe}.af"'
    return response
