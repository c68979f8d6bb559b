"""Reads of folders and files: an owner's folders and files, an agent's files and its open-file limits."""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from core.errors import NotFound
from core.models import Agent, Organization
from core.selectors import owned_get
from memory.files import types
from memory.files.lines import Line, numbered_lines
from memory.models import FILE_TERMINAL, FileAgent, FileStatus, Folder, FolderFile, Passage

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


@dataclass(frozen=True)
class NumberedText:
    """A file's numbered lines, and their texts joined by newlines in UTF-8 with where each starts (for one regex
    pass: RE2 searching a str would encode it again at every call)."""

    lines: list[Line]
    utf8: bytes
    starts: list[int]  # byte offsets in `utf8`


# A processed file's text never changes, and numbering it costs ~5 ms per 100,000 characters: every window drawn,
# grep and open of a step would pay it again. Kept per process, least recently used dropped past this many bytes.
LINES_CACHE_CHARS = 64_000_000
_numbered: OrderedDict[tuple[str, datetime], NumberedText] = OrderedDict()
_numbered_chars = 0
_numbered_lock = threading.Lock()


def file_numbered(file: FolderFile) -> NumberedText:
    """The file's numbered lines (code keeps its indentation); a processed file's are cached, so its text is read
    (a query, when the caller deferred it) only the first time."""
    global _numbered_chars
    key = (file.pk, file.updated_at) if file.status == FileStatus.COMPLETED else None
    with _numbered_lock:
        hit = _numbered.get(key) if key else None
        if hit is not None:
            _numbered.move_to_end(key)
            return hit
    lines = numbered_lines(file.content, keep_indent=types.is_code(file.mime_type))
    text = "\n".join(line.text for line in lines)
    # a lone surrogate (from a PDF's text layer) is one "?": each line's bytes are counted as they are encoded here
    utf8 = text.encode("utf-8", "replace")
    ascii_only = len(utf8) == len(text)
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += (len(line.text) if ascii_only else len(line.text.encode("utf-8", "replace"))) + 1
    made = NumberedText(lines=lines, utf8=utf8, starts=starts)
    if key:
        with _numbered_lock:
            if key not in _numbered:
                _numbered[key] = made
                _numbered_chars += len(made.utf8)
            while _numbered_chars > LINES_CACHE_CHARS and len(_numbered) > 1:
                _, dropped = _numbered.popitem(last=False)
                _numbered_chars -= len(dropped.utf8)
    return made


def file_lines(file: FolderFile) -> list[Line]:
    """The file's numbered lines (code keeps its indentation)."""
    return file_numbered(file).lines


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


def agent_file_states(*, agent: Agent, is_open: bool | None = None, content: bool = True) -> QuerySet[FileAgent]:
    """The agent's views of its attached files, with their file and folder (without the files' text unless
    `content`: file_numbered reads it when its lines are not cached)."""
    qs = FileAgent.objects.filter(agent=agent).select_related("folder", "file").defer("file__raw")
    if not content:
        qs = qs.defer("file__raw", "file__content")
    return qs if is_open is None else qs.filter(is_open=is_open)


def folder_agents(*, folder: Folder) -> QuerySet[Agent]:
    """The agents the folder is attached to (their ids and creation times only)."""
    return Agent.objects.filter(folders=folder).only("id", "created_at")


def agent_folders(*, agent: Agent) -> QuerySet[Folder]:
    return Folder.objects.filter(agentfolder__agent=agent).order_by("agentfolder__created_at")


def folders_count(*, owner: Organization) -> int:
    return Folder.objects.filter(owner=owner).count()


def folders_metadata(*, owner: Organization, detailed: bool = False) -> dict:
    """Letta's OrganizationSourcesStats: how many folders and files the owner has and their bytes; `detailed` adds
    each folder's files (two queries whatever the number of folders)."""
    totals = FolderFile.objects.filter(owner=owner).aggregate(files=Count("id"), size=Sum("file_size"))
    stats = {
        "total_sources": folders_count(owner=owner),
        "total_files": totals["files"],
        "total_size": totals["size"] or 0,
        "sources": [],
    }
    if not detailed:
        return stats
    files: dict[str, list[dict]] = {}
    for folder_id, file_id, name, size in (
        FolderFile.objects.filter(owner=owner)
        .order_by("created_at", "id")
        .values_list("folder_id", "id", "file_name", "file_size")
    ):
        files.setdefault(folder_id, []).append({"file_id": file_id, "file_name": name, "file_size": size})
    for folder_id, name in Folder.objects.filter(owner=owner).order_by("created_at", "id").values_list("id", "name"):
        mine = files.get(folder_id, [])
        stats["sources"].append(
            {
                "source_id": folder_id,
                "source_name": name,
                "file_count": len(mine),
                "total_size": sum(f["file_size"] for f in mine),
                "files": mine,
            }
        )
    return stats


def folder_passages(*, folder: Folder) -> QuerySet[Passage]:
    """The chunks of the folder's processed files, with their file's name (a file still processing has written some
    of its chunks already: they are not shown until it completes)."""
    return (
        Passage.objects.filter(folder=folder, file__status=FileStatus.COMPLETED)
        .select_related("file")
        .defer("embedding", "file__raw", "file__content")
    )
