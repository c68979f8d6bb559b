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
from core.api.common import PageQuery, owner
from core.api.schemas import AgentStateOut
from core.errors import NotFound
from core.pagination import page, queryset_page
from core.runs import queue
from core.selectors import agent_get
from memory.files import selectors, services
from memory.files.presenters import agent_file_out, file_out, folder_out, folder_passage_out
from memory.files.tasks import file_ingest_task
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


class FolderPassageOut(Schema):
    id: str
    text: str
    tags: list[str]
    metadata: dict[str, Any]
    source_id: str
    file_id: str
    file_name: str
    agent_id: str | None
    archive_id: str | None
    organization_id: str
    embedding: list[float] | None
    embedding_config: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    is_deleted: bool


class FileStatsOut(Schema):
    file_id: str
    file_name: str
    file_size: int | None


class FolderStatsOut(Schema):
    source_id: str
    source_name: str
    file_count: int
    total_size: int
    files: list[FileStatsOut]


class FoldersMetadataOut(Schema):
    total_sources: int
    total_files: int
    total_size: int
    sources: list[FolderStatsOut]


class FolderItemsQuery(PageQuery):
    """A folder's agents or passages."""

    limit: int = 100


class FolderListQuery(PageQuery):
    """Folders, the owner's or an agent's: oldest first."""

    limit: int = 50
    order: Literal["asc", "desc"] = "asc"
    name: str | None = None


class FileListQuery(PageQuery):
    limit: int = 1000
    include_content: bool = False


class AgentFilesQuery(PageQuery):
    limit: int = 100
    is_open: bool | None = None


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
def folders_list(request: HttpRequest, q: Query[FolderListQuery]):
    folders = list(selectors.folders_of(owner=owner(request), name=q.name).order_by("created_at", "id"))
    return [folder_out(f) for f in page(folders, after=q.after, before=q.before, limit=q.limit, order=q.order)]


# Before `/folders/{folder_id}`, which would take "count" or "metadata" for an id.
@router.get("/folders/count", response=int)
def folders_count(request: HttpRequest):
    return selectors.folders_count(owner=owner(request))


@router.get("/folders/metadata", response=FoldersMetadataOut)
def folders_metadata(request: HttpRequest, include_detailed_per_source_metadata: bool = False):
    return selectors.folders_metadata(owner=owner(request), detailed=include_detailed_per_source_metadata)


@router.get("/folders/name/{folder_name}", response=str)
def folder_id_by_name(request: HttpRequest, folder_name: str):
    """Letta's deprecated lookup of a folder's id by its name."""
    found = selectors.folders_of(owner=owner(request), name=folder_name).values_list("id", flat=True).first()
    if found is None:
        raise NotFound(f"Folder with name={folder_name} not found")
    return found


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
def files_list(request: HttpRequest, folder_id: str, q: Query[FileListQuery]):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    files = selectors.files_of(folder=folder)
    if q.include_content:
        files = folder.files.defer("raw")
    chosen = queryset_page(files, after=q.after, before=q.before, limit=q.limit, order=q.order)
    return [file_out(f, include_content=q.include_content) for f in selectors.files_timed_out(chosen)]


@router.get("/folders/{folder_id}/files/{file_id}", response=FolderFileOut)
def file_retrieve(request: HttpRequest, folder_id: str, file_id: str, include_content: bool = False):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    return file_out(selectors.file_get(folder=folder, file_id=file_id), include_content=include_content)


# Before `/folders/{folder_id}/{file_id}`: Django matches the first pattern, which would answer 405.
@router.get("/folders/{folder_id}/agents", response=list[str])
def folder_agents(request: HttpRequest, folder_id: str, q: Query[FolderItemsQuery]):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    agents = queryset_page(
        selectors.folder_agents(folder=folder), after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return [a.id for a in agents]


@router.get("/folders/{folder_id}/passages", response=list[FolderPassageOut])
def folder_passages(request: HttpRequest, folder_id: str, q: Query[FolderItemsQuery]):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    passages = queryset_page(
        selectors.folder_passages(folder=folder), after=q.after, before=q.before, limit=q.limit, order=q.order
    )
    return [folder_passage_out(p) for p in passages]


@router.delete("/folders/{folder_id}/{file_id}", response={204: None})
def file_delete(request: HttpRequest, folder_id: str, file_id: str):
    folder = selectors.folder_get(owner=owner(request), folder_id=folder_id)
    services.file_delete(file=selectors.file_get(folder=folder, file_id=file_id))
    return HttpResponse(status=204)


@router.get("/agents/{agent_id}/folders", response=list[FolderOut], tags=["agents"])
def agent_folders(request: HttpRequest, agent_id: str, q: Query[FolderListQuery]):
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
def agent_files(request: HttpRequest, agent_id: str, q: Query[AgentFilesQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    states = list(selectors.agent_file_states(agent=agent, is_open=q.is_open).order_by("created_at", "id"))
    chosen = page(states, after=q.after, before=q.before, limit=q.limit + 1, order=q.order)
    more = len(chosen) > q.limit
    chosen = chosen[: q.limit]
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
