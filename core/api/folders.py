"""Folder and file endpoints on Letta's routes (/v1/folders, /v1/agents/{id}/folders, /v1/agents/{id}/files).

An upload is stored as a pending file and its ingest queued on the run executor's task queue after commit, so the
request returns at once; clients poll the file until its `processing_status` is `completed` or `error`.
"""

from datetime import datetime
from typing import Any, Literal

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from ninja import File, Query, Router, Schema
from ninja.files import UploadedFile

from core.agents.presenters import agent_state
from core.api.agents import owner
from core.api.schemas import AgentStateOut
from core.pagination import page
from core.runs import queue
from core.selectors import agent_get
from memory.files import selectors, services
from memory.files.ingest import folder_embedding_handle
from memory.files.lines import cut, window
from memory.files.tasks import file_ingest_task
from memory.models import FileAgent, Folder, FolderFile
from tools import services as tool_services

router = Router(tags=["folders"])
_NULL = {"description": "null, as Letta answers", "content": {"application/json": {"schema": {"type": "null"}}}}


class FolderIn(Schema):
    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding: str | None = None
    embedding_chunk_size: int | None = None
    embedding_config: dict[str, Any] | None = None


class FolderUpdateIn(Schema):
    name: str | None = None
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_config: dict[str, Any] | None = None


class FolderOut(Schema):
    id: str
    name: str
    description: str | None
    instructions: str | None
    metadata: dict[str, Any]
    embedding_config: dict[str, Any]
    organization_id: str
    created_at: datetime
    updated_at: datetime


class FolderFileOut(Schema):
    id: str
    source_id: str
    folder_id: str
    file_name: str
    original_file_name: str
    file_path: str | None = None
    file_type: str
    file_size: int
    file_creation_date: str | None = None
    file_last_modified_date: str | None = None
    processing_status: Literal["pending", "parsing", "embedding", "completed", "error"]
    error_message: str | None
    total_chunks: int | None
    chunks_embedded: int | None
    content: str | None = None
    organization_id: str
    created_at: datetime
    updated_at: datetime


class AgentFileViewOut(Schema):
    id: str
    file_id: str
    file_name: str
    folder_id: str
    folder_name: str
    is_open: bool
    last_accessed_at: datetime | None
    visible_content: str | None
    start_line: int | None
    end_line: int | None


class AgentFilesPageOut(Schema):
    files: list[AgentFileViewOut]
    next_cursor: str | None
    has_more: bool


class FileClosedOut(Schema):
    message: str


class FolderPageQuery(Schema):
    before: str | None = None
    after: str | None = None
    limit: int = 50
    order: Literal["asc", "desc"] = "asc"
    name: str | None = None


def folder_out(folder: Folder) -> dict:
    """Letta's Folder; its embedding_config names the model files are embedded with ("" when full text only)."""
    handle = folder_embedding_handle(folder)
    provider, _, model = handle.partition("/")
    return {
        "id": folder.id,
        "name": folder.name,
        "description": folder.description or None,
        "instructions": folder.instructions or None,
        "metadata": folder.metadata or {},
        "embedding_config": {
            "embedding_endpoint_type": provider or "openai",
            "embedding_model": model or handle,
            "embedding_dim": 0,
            "embedding_chunk_size": folder.embedding_chunk_size,
            "handle": handle or None,
        },
        "organization_id": folder.owner_id,
        "created_at": folder.created_at,
        "updated_at": folder.updated_at,
    }


def file_out(file: FolderFile, *, folder_name: str | None = None, include_content: bool = False) -> dict:
    """Letta's FileMetadata; `folder_name` prefixes the name as Letta's upload response does."""
    return {
        "id": file.id,
        "source_id": file.folder_id,
        "folder_id": file.folder_id,
        "file_name": f"{folder_name}/{file.file_name}" if folder_name else file.file_name,
        "original_file_name": file.original_file_name,
        "file_type": file.mime_type,
        "file_size": file.file_size,
        "processing_status": file.status,
        "error_message": file.error_message or None,
        "total_chunks": file.total_chunks,
        "chunks_embedded": file.chunks_embedded,
        "content": file.content if include_content else None,
        "organization_id": file.owner_id,
        "created_at": file.created_at,
        "updated_at": file.updated_at,
    }


def agent_file_out(state: FileAgent, char_limit: int) -> dict:
    visible = None
    if state.is_open:
        lines = selectors.file_lines(state.file)
        visible = cut(window(lines, start=state.start_line, end=state.end_line), char_limit)
    return {
        "id": state.id,
        "file_id": state.file_id,
        "file_name": services.context_name(state),
        "folder_id": state.folder_id,
        "folder_name": state.folder.name,
        "is_open": state.is_open,
        "last_accessed_at": state.last_accessed_at,
        "visible_content": visible,
        "start_line": state.start_line,
        "end_line": state.end_line,
    }


def _embedding(body: FolderIn) -> str:
    config = body.embedding_config or {}
    return body.embedding or config.get("handle") or config.get("embedding_model") or ""


@router.post("/folders/", response=FolderOut)
def folder_create(request: HttpRequest, body: FolderIn):
    folder = services.folder_create(
        owner=owner(request),
        name=body.name,
        description=body.description or "",
        instructions=body.instructions or "",
        metadata=body.metadata,
        embedding=_embedding(body),
        embedding_chunk_size=body.embedding_chunk_size or (body.embedding_config or {}).get("embedding_chunk_size"),
    )
    return folder_out(folder)


@router.get("/folders/", response=list[FolderOut])
def folders_list(request: HttpRequest, q: Query[FolderPageQuery]):
    folders = list(selectors.folders_of(owner=owner(request), name=q.name).order_by("created_at", "id"))
    return [folder_out(f) for f in page(folders, after=q.after, before=q.before, limit=q.limit, order=q.order)]


@router.get("/folders/{folder_id}", response=FolderOut)
def folder_retrieve(request: HttpRequest, folder_id: str):
    return folder_out(selectors.folder_get(owner=owner(request), folder_id=folder_id))


@router.patch("/folders/{folder_id}", response=FolderOut)
def folder_update(request: HttpRequest, folder_id: str, body: FolderUpdateIn):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    changes = body.dict(exclude_unset=True, exclude={"embedding_config"})
    if body.embedding_config and body.embedding_config.get("handle"):
        changes["embedding"] = body.embedding_config["handle"]
    return folder_out(services.folder_update(folder=folder, changes=changes))


@router.delete("/folders/{folder_id}", response={200: None}, openapi_extra={"responses": {200: _NULL}})
def folder_delete(request: HttpRequest, folder_id: str):
    services.folder_delete(folder=selectors.folder_get(owner=owner(request), folder_id=folder_id))
    return HttpResponse(b"null", content_type="application/json")  # Letta answers a JSON null


@router.post("/folders/{folder_id}/upload", response=FolderFileOut)
def file_upload(
    request: HttpRequest,
    response: HttpResponse,
    folder_id: str,
    file: File[UploadedFile],
    duplicate_handling: Literal["suffix", "skip", "error", "replace"] = "suffix",
    name: str | None = None,
):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    limit = services.max_file_bytes()
    if file.size is not None and file.size > limit:
        raise services.TooLarge(f"The file is {file.size} bytes; files in folders may be at most {limit} bytes")
    stored, skipped = services.file_upload(
        folder=folder,
        file_name=name or file.name,
        content_type=file.content_type,
        data=file.read(limit + 1),
        duplicate_handling=duplicate_handling,
    )
    if skipped:
        response["X-Upload-Result"] = "skipped"  # ninja copies the temporal response's headers onto its own
        return file_out(stored, folder_name=folder.name)
    queue.woken_after_commit(file_ingest_task.enqueue(file_id=stored.id))
    return file_out(stored, folder_name=folder.name)


@router.get("/folders/{folder_id}/files", response=list[FolderFileOut])
def files_list(
    request: HttpRequest,
    folder_id: str,
    before: str | None = None,
    after: str | None = None,
    limit: int = 1000,
    order: Literal["asc", "desc"] = "desc",
    include_content: bool = False,
):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    files = selectors.files_of(folder=folder).order_by("created_at", "id")
    if include_content:
        files = files.defer("raw")
    chosen = page(list(files), after=after, before=before, limit=limit, order=order)
    return [file_out(f, include_content=include_content) for f in selectors.files_timed_out(chosen)]


@router.get("/folders/{folder_id}/files/{file_id}", response=FolderFileOut)
def file_retrieve(request: HttpRequest, folder_id: str, file_id: str, include_content: bool = False):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    return file_out(selectors.file_get(folder=folder, file_id=file_id), include_content=include_content)


# Before `/folders/{folder_id}/{file_id}`: Django matches the first pattern, which would answer 405.
@router.get("/folders/{folder_id}/agents", response=list[str])
def folder_agents(request: HttpRequest, folder_id: str):
    return selectors.folder_agent_ids(folder=selectors.folder_get(owner=owner(request), folder_id=folder_id))


@router.delete("/folders/{folder_id}/{file_id}", response={204: None})
def file_delete(request: HttpRequest, folder_id: str, file_id: str):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    services.file_delete(file=selectors.file_get(folder=folder, file_id=file_id))
    return HttpResponse(status=204)


@router.get("/agents/{agent_id}/folders", response=list[FolderOut], tags=["agents"])
def agent_folders(request: HttpRequest, agent_id: str, q: Query[FolderPageQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    folders = list(selectors.agent_folders(agent=agent))
    return [folder_out(f) for f in page(folders, after=q.after, before=q.before, limit=q.limit, order=q.order)]


@router.patch("/agents/{agent_id}/folders/attach/{folder_id}", response=AgentStateOut, tags=["agents"])
def agent_folder_attach(request: HttpRequest, agent_id: str, folder_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    with transaction.atomic():  # the folder's files in its context and the file tools to read them, together
        services.folder_attach(agent=agent, folder=folder)
        tool_services.file_tools_sync(agent=agent, attached=True)
    return agent_state(agent)


@router.patch("/agents/{agent_id}/folders/detach/{folder_id}", response=AgentStateOut, tags=["agents"])
def agent_folder_detach(request: HttpRequest, agent_id: str, folder_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    with transaction.atomic():  # the last folder takes the file tools with it
        services.folder_detach(agent=agent, folder_id=folder_id)
        if not selectors.agent_folders(agent=agent).exists():
            tool_services.file_tools_sync(agent=agent, attached=False)
    return agent_state(agent)


@router.get("/agents/{agent_id}/files", response=AgentFilesPageOut, tags=["agents"])
def agent_files(
    request: HttpRequest,
    agent_id: str,
    before: str | None = None,
    after: str | None = None,
    limit: int = 100,
    order: Literal["asc", "desc"] = "desc",
    is_open: bool | None = None,
):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    states = list(selectors.agent_file_states(agent=agent, is_open=is_open).order_by("created_at", "id"))
    chosen = page(states, after=after, before=before, limit=limit + 1, order=order)
    more = len(chosen) > limit
    chosen = chosen[:limit]
    char_limit = selectors.file_limits(agent).per_file_view_window_char_limit
    return {
        "files": [agent_file_out(s, char_limit) for s in chosen],
        "next_cursor": chosen[-1].id if more and chosen else None,
        "has_more": more,
    }


@router.patch("/agents/{agent_id}/files/close-all", response=list[str], tags=["agents"])
def agent_files_close_all(request: HttpRequest, agent_id: str):
    return services.files_close_all(agent=agent_get(owner=owner(request), agent_id=agent_id))


@router.patch("/agents/{agent_id}/files/{file_id}/open", response=list[str], tags=["agents"])
def agent_file_open(request: HttpRequest, agent_id: str, file_id: str):
    return services.file_open(agent=agent_get(owner=owner(request), agent_id=agent_id), file_id=file_id)


@router.patch("/agents/{agent_id}/files/{file_id}/close", response=FileClosedOut, tags=["agents"])
def agent_file_close(request: HttpRequest, agent_id: str, file_id: str):
    services.file_close(agent=agent_get(owner=owner(request), agent_id=agent_id), file_id=file_id)
    return {"message": f"File id={file_id} successfully closed"}
