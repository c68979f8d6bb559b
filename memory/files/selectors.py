"""Reads of folders and files: an owner's folders and files, an agent's files and its open-file limits."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from core.errors import NotFound
from core.models import Agent, Organization
from core.selectors import owned_get
from memory.files import types
from memory.files.lines import Line, numbered_lines
from memory.models import FILE_TERMINAL, FileAgent, FileStatus, Folder, FolderFile

DEFAULT_TIMEOUT_MINUTES = 30
TIMED_OUT = "File processing timed out after {} minutes. Please try again."


@dataclass(frozen=True)
class FileLimits:
    max_files_open: int
    per_file_view_window_char_limit: int


def file_limits(agent: Agent) -> FileLimits:
    """Letta's defaults from the context window: a bigger window holds more open files and longer windows."""
    window = agent.context_window_limit or 0
    for bound, files, chars in ((8_000, 3, 5_000), (32_000, 5, 15_000), (128_000, 10, 25_000), (200_000, 10, 40_000)):
        if window <= bound:
            return FileLimits(files, chars) if window else FileLimits(5, 50_000)
    return FileLimits(15, 40_000)


def file_lines(file: FolderFile) -> list[Line]:
    """The file's numbered lines (code keeps its indentation)."""
    return numbered_lines(file.content, keep_indent=types.is_code(file.mime_type))


def folder_get(*, owner: Organization, folder_id: str) -> Folder:
    """The owner's folder, or NotFound."""
    return owned_get(Folder, owner=owner, id=folder_id)


def folders_of(*, owner: Organization, name: str | None = None) -> QuerySet[Folder]:
    qs = Folder.objects.filter(owner=owner)
    return qs.filter(name=name) if name else qs


def file_get(*, folder: Folder, file_id: str) -> FolderFile:
    """A file of the folder (its bytes not read), or NotFound naming both."""
    file = folder.files.defer("raw").filter(pk=file_id).first()
    if file is None:
        raise NotFound(f"File with id={file_id} not found in folder {folder.id}")
    return files_timed_out([file])[0]


def files_of(*, folder: Folder) -> QuerySet[FolderFile]:
    return folder.files.defer("raw", "content")


def files_timed_out(files: list[FolderFile]) -> list[FolderFile]:
    """The files, those stuck processing past FILE_PROCESSING_TIMEOUT_MINUTES marked `error` (as Letta checks when a
    file is read: a worker that died mid-ingest leaves nothing else to finish it)."""
    minutes = int(getattr(settings, "FILE_PROCESSING_TIMEOUT_MINUTES", DEFAULT_TIMEOUT_MINUTES))
    limit = timezone.now() - timedelta(minutes=minutes)
    for file in files:
        if file.status not in FILE_TERMINAL and file.updated_at < limit:
            reason = TIMED_OUT.format(minutes)
            if (
                FolderFile.objects.filter(pk=file.pk, updated_at__lt=limit)
                .exclude(status__in=FILE_TERMINAL)
                .update(status=FileStatus.ERROR, error_message=reason, raw=None)
            ):
                file.status, file.error_message = FileStatus.ERROR, reason
    return files


def agent_file_states(*, agent: Agent, is_open: bool | None = None) -> QuerySet[FileAgent]:
    """The agent's views of its attached files, with their file and folder."""
    qs = FileAgent.objects.filter(agent=agent).select_related("folder", "file").defer("file__raw")
    return qs if is_open is None else qs.filter(is_open=is_open)


def folder_agent_ids(*, folder: Folder) -> list[str]:
    return list(folder.agentfolder_set.order_by("created_at", "id").values_list("agent_id", flat=True))


def agent_folders(*, agent: Agent) -> QuerySet[Folder]:
    return Folder.objects.filter(agentfolder__agent=agent).order_by("agentfolder__created_at")
