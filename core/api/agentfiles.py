"""Agent file endpoints (Letta-compatible): import a .af upload, preview one, export an agent as v2.

Registered before core.api.agents's router: `POST /agents/import` would otherwise match `/agents/{agent_id}`.
"""

import json
import re

from django.http import HttpRequest, HttpResponse
from ninja import File, Form, Router, Schema
from ninja.files import UploadedFile

from core import selectors
from core.agents.agentfile.exporter import agentfile_export, legacy_from_v2
from core.agents.agentfile.importer import ImportOptions, agentfile_import, agentfile_preview
from core.agents.agentfile.model import MAX_FILE_BYTES, AgentFileError
from core.agents.agentfile.parse import parse_agent_file
from core.api.schemas import AgentFileOut, ImportPreviewOut, ImportResultOut
from core.errors import Invalid
from core.text import json_input

router = Router(tags=["agents"])


class ImportForm(Schema):
    """The multipart fields letta-client's `agents.import_file` sends, plus `tool_policy`."""

    name: str | None = None
    override_name: str | None = None
    model: str | None = None
    override_model_handle: str | None = None
    embedding: str | None = None
    override_embedding_handle: str | None = None
    strip_messages: bool = False
    secrets: str | None = None
    env_vars_json: str | None = None
    override_existing_tools: bool | None = None
    tool_policy: str | None = None
    append_copy_suffix: bool = False
    project_id: str | None = None


def _secrets(raw: str | None, field: str) -> dict | None:
    if not raw:
        return None
    try:
        value = json_input(raw)
    except ValueError:  # not JSON, or nested too deep
        raise Invalid(f"{field} must be a JSON object of environment variable names to values") from None
    if not isinstance(value, dict):
        raise Invalid(f"{field} must be a JSON object of environment variable names to values")
    return {str(k): None if v is None else str(v) for k, v in value.items()}


def _options(form: ImportForm) -> ImportOptions:
    # Letta's import overwrites a same-named tool unless told not to (override_existing_tools defaults to true).
    policy = form.tool_policy or ("reuse" if form.override_existing_tools is False else "override")
    return ImportOptions(
        name=form.name or form.override_name,
        model=form.model or form.override_model_handle,
        embedding=form.embedding or form.override_embedding_handle,
        strip_messages=form.strip_messages,
        secrets=_secrets(form.secrets, "secrets") or _secrets(form.env_vars_json, "env_vars_json"),
        tool_policy=policy,
        append_copy_suffix=form.append_copy_suffix,
    )


def _parsed(file: UploadedFile):
    if file.size is not None and file.size > MAX_FILE_BYTES:
        raise AgentFileError("", f"the file is {file.size} bytes; the limit is {MAX_FILE_BYTES} bytes")
    return parse_agent_file(file.read(MAX_FILE_BYTES + 1))


@router.post("/agents/import", response={200: ImportResultOut})
def agent_import(request: HttpRequest, file: File[UploadedFile], form: Form[ImportForm]):
    options = _options(form)
    return agentfile_import(owner=request.principal.org, parsed=_parsed(file), options=options).as_dict()


@router.post("/agents/import/preview", response={200: ImportPreviewOut})
def agent_import_preview(request: HttpRequest, file: File[UploadedFile], form: Form[ImportForm]):
    options = _options(form)
    return agentfile_preview(owner=request.principal.org, parsed=_parsed(file), options=options)


@router.get("/agents/{agent_id}/export", response=AgentFileOut)
def agent_export(
    request: HttpRequest,
    agent_id: str,
    include_archival: bool = False,
    scrub_messages: bool = False,
    use_legacy_format: bool = False,
    include_history: bool = False,
):
    agent = selectors.agent_get(owner=request.principal.org, agent_id=agent_id)
    data = agentfile_export(
        agent=agent, include_archival=include_archival, scrub_messages=scrub_messages, include_history=include_history
    )
    if use_legacy_format:
        data = legacy_from_v2(data)
    filename = re.sub(r"[^A-Za-z0-9_.-]+", "_", agent.name).strip("_") or "agent"
    response = HttpResponse(json.dumps(data, indent=2, ensure_ascii=False), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{filename}.af"'
    return response
