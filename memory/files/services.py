"""Writes to folders and files: create, update, delete folders; upload and delete files; attach folders to agents;
open and close an agent's files (least recently used closed first)."""

import os

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from core.errors import Conflict, DomainError, Invalid, NotFound
from core.models import Agent, Organization
from core.updates import model_update
from memory.files import types
from memory.files.limits import MB, setting, size_text
from memory.files.selectors import file_limits, file_lines
from memory.models import AgentFolder, FileAgent, FileStatus, Folder, FolderFile, Passage

DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024  # fits the request body limit for multipart uploads
DUPLICATE_HANDLING = ("suffix", "skip", "error", "replace")
DEFAULT_FILE_MAX_PASSAGES = 20_000
DEFAULT_ACCOUNT_MAX_PASSAGES = 200_000
DEFAULT_ACCOUNT_MAX_BYTES = 1024 * MB
DROP_BATCH = 500  # passages deleted per transaction: a big file's removal never holds SQLite's write lock for long


class UnsupportedType(DomainError):
    status = 415


class TooLarge(DomainError):
    status = 413


class QuotaExceeded(DomainError):
    """The account's folders hold as much as the operator lets one account store."""

    status = 413


def max_file_bytes() -> int:
    """FOLDER_FILE_MAX_BYTES, read when asked (never at import time)."""
    return int(getattr(settings, "FOLDER_FILE_MAX_BYTES", DEFAULT_MAX_FILE_BYTES))


def _passages(n: int) -> str:
    return f"{n:,} passage" + ("" if n == 1 else "s")


def passages_quota_check(*, owner_id: str, adding: int, file_id: str | None = None) -> None:
    """QuotaExceeded when `adding` passages (one file's) pass FOLDER_FILE_MAX_PASSAGES, or would bring the account's
    file passages (those of `file_id` not counted) past FOLDER_ACCOUNT_MAX_PASSAGES. One count query."""
    per_file = setting("FOLDER_FILE_MAX_PASSAGES", DEFAULT_FILE_MAX_PASSAGES)
    if adding > per_file:
        raise QuotaExceeded(f"The file makes {_passages(adding)}; a file may make at most {_passages(per_file)}")
    quota = setting("FOLDER_ACCOUNT_MAX_PASSAGES", DEFAULT_ACCOUNT_MAX_PASSAGES)
    stored = Passage.objects.filter(owner_id=owner_id, file__isnull=False).exclude(file_id=file_id).count()
    if stored + adding > quota:
        raise QuotaExceeded(
            f"The account's folders hold {_passages(stored)}; {adding:,} more would pass the account's limit of "
            f"{_passages(quota)}. Delete files to make room"
        )


def _passages_room_check(*, owner_id: str) -> None:
    quota = setting("FOLDER_ACCOUNT_MAX_PASSAGES", DEFAULT_ACCOUNT_MAX_PASSAGES)
    stored = Passage.objects.filter(owner_id=owner_id, file__isnull=False).count()
    if stored >= quota:
        raise QuotaExceeded(f"The account's folders hold {_passages(stored)}, its limit: delete files to upload more")


def _bytes_quota_check(*, owner_id: str, adding: int) -> None:
    quota = setting("FOLDER_ACCOUNT_MAX_BYTES", DEFAULT_ACCOUNT_MAX_BYTES)
    stored = (
        FolderFile.objects.filter(owner_id=owner_id)
        .exclude(status=FileStatus.ERROR)  # a failed file keeps no bytes
        .aggregate(total=Sum("file_size"))["total"]
        or 0
    )
    if stored + adding > quota:
        raise QuotaExceeded(
            f"The account's files take {size_text(stored)}; this file's {size_text(adding)} would pass the "
            f"account's limit of {size_text(quota)}. Delete files to make room"
        )


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 200 or "/" in name:
        raise Invalid("Folder name must be 1-200 characters without '/'")
    return name.strip()


def _check_chunk_size(size) -> int:
    if size is None:
        return 300
    if isinstance(size, bool) or not isinstance(size, int) or not 50 <= size <= 8000:
        raise Invalid("embedding_chunk_size must be between 50 and 8000 tokens")
    return size


def folder_create(
    *,
    owner: Organization,
    name: str,
    description: str = "",
    instructions: str = "",
    metadata: dict | None = None,
    embedding: str = "",
    embedding_chunk_size: int | None = None,
) -> Folder:
    """Create a folder; Conflict if the owner has one of that name. No embedding model: full-text search only."""
    name = _check_name(name)
    try:
        with transaction.atomic():
            return Folder.objects.create(
                owner=owner,
                name=name,
                description=description or "",
                instructions=instructions or "",
                metadata=metadata or {},
                embedding=embedding or "",
                embedding_chunk_size=_check_chunk_size(embedding_chunk_size),
            )
    except IntegrityError:
        raise Conflict(f"A folder named '{name}' already exists") from None


def folder_update(*, folder: Folder, changes: dict) -> Folder:
    """Change a folder's name, description, instructions or metadata (the embedding model applies to files
    uploaded afterwards); Conflict on a taken name."""
    if changes.get("name") is not None:
        changes = {**changes, "name": _check_name(changes["name"])}
    try:
        with transaction.atomic():
            model_update(
                folder,
                fields=("name", "description", "instructions", "metadata", "embedding"),
                data={k: v for k, v in changes.items() if v is not None},
            )
    except IntegrityError:
        raise Conflict(f"A folder named '{changes['name']}' already exists") from None
    return folder


def folder_delete(*, folder: Folder) -> None:
    """Delete a folder with its files, their passages (in short batches first) and every agent's view of them; an
    ingest of one of its files stops at its next write."""
    passages_drop(folder_id=folder.id)
    with transaction.atomic():
        # Locked first: an ingest's batch waits for the delete, then finds its file gone, instead of adding
        # passages the delete did not see.
        list(FolderFile.objects.select_for_update().filter(folder=folder).values_list("pk", flat=True))
        folder.delete()


def passages_drop(*, file_id: str | None = None, folder_id: str | None = None) -> int:
    """Delete the passages of a file (or of a folder's files) in transactions of DROP_BATCH; returns how many."""
    rows = Passage.objects.filter(file_id=file_id) if file_id else Passage.objects.filter(folder_id=folder_id)
    dropped = 0
    while ids := list(rows.values_list("pk", flat=True)[:DROP_BATCH]):
        with transaction.atomic():
            dropped += len(ids)
            Passage.objects.filter(pk__in=ids).delete()
    return dropped


# --------------------------------------------------------------------------- files


def _free_name(folder: Folder, name: str) -> str:
    base, ext = os.path.splitext(name)
    taken = set(folder.files.filter(original_file_name=name).values_list("file_name", flat=True))
    taken |= set(folder.files.filter(file_name=name).values_list("file_name", flat=True))
    n = len(taken)
    while f"{base}_({n}){ext}" in taken or folder.files.filter(file_name=f"{base}_({n}){ext}").exists():
        n += 1
    return f"{base}_({n}){ext}"


def _clean_file_name(name: str | None) -> str:
    name = os.path.basename((name or "").replace("\\", "/")).strip()
    if not name or len(name) > 200:
        raise Invalid("The file needs a name of 1-200 characters")
    return name


def file_upload(
    *,
    folder: Folder,
    file_name: str | None,
    content_type: str | None,
    data: bytes,
    duplicate_handling: str = "suffix",
) -> tuple[FolderFile, bool]:
    """Store an upload as a pending file of the folder; returns (file, skipped). The caller queues its ingest after
    commit. UnsupportedType (415) for a type no parser reads, TooLarge (413) over FOLDER_FILE_MAX_BYTES; a name
    already in the folder is suffixed, skipped, refused (400) or replaced, as `duplicate_handling` says."""
    name = _clean_file_name(file_name)
    mime = types.mime_for(file_name=name, content_type=content_type)
    if mime is None:
        raise UnsupportedType(
            f"Unsupported file type: {content_type or 'unknown'} (filename: {name}). {types.SUPPORTED_TEXT}"
        )
    if len(data) > max_file_bytes():
        raise TooLarge(f"The file is {len(data)} bytes; files in folders may be at most {max_file_bytes()} bytes")
    if duplicate_handling not in DUPLICATE_HANDLING:
        raise Invalid(f"duplicate_handling must be one of {', '.join(DUPLICATE_HANDLING)}")
    _passages_room_check(owner_id=folder.owner_id)
    with transaction.atomic():
        existing = folder.files.filter(original_file_name=name).order_by("created_at").first()
        stored = name
        if existing is not None:
            if duplicate_handling == "skip":
                return existing, True
            if duplicate_handling == "error":
                raise DomainError(f"File '{name}' already exists in folder '{folder.name}'")
            if duplicate_handling == "replace":
                folder.files.filter(original_file_name=name).delete()
            else:
                stored = _free_name(folder, name)
        elif folder.files.filter(file_name=name).exists():
            stored = _free_name(folder, name)
        _bytes_quota_check(owner_id=folder.owner_id, adding=len(data))
        file = FolderFile.objects.create(
            owner_id=folder.owner_id,
            folder=folder,
            file_name=stored,
            original_file_name=name,
            mime_type=mime,
            file_size=len(data),
            raw=data,
        )
    return file, False


def file_delete(*, file: FolderFile) -> None:
    """Delete a file with its passages (in short batches first); agents that had it open no longer see it. Its
    ingest, here or in another process, stops within a fraction of a second (its parser is killed) or at its next
    write."""
    passages_drop(file_id=file.id)
    with transaction.atomic():
        # Locked first: an ingest's batch waits for the delete, then finds its file gone (see folder_delete).
        FolderFile.objects.select_for_update().filter(pk=file.pk).values_list("pk", flat=True).first()
        file.delete()


def file_fail(*, file_id: str, reason: str) -> None:
    """Mark a file's processing failed with the reason, drop its bytes and the passages it had written (a file
    completed meanwhile stays so)."""
    with transaction.atomic():
        failed = (
            FolderFile.objects.filter(pk=file_id)
            .exclude(status=FileStatus.COMPLETED)
            .update(status=FileStatus.ERROR, error_message=reason[:2000], raw=None, updated_at=timezone.now())
        )
    if failed:
        passages_drop(file_id=file_id)


# --------------------------------------------------------------------------- agents


def folder_attach(*, agent: Agent, folder: Folder) -> None:
    """Attach a folder to an agent and show its processed files in the agent's context: the oldest open first, up to
    the agent's open-file limit, the rest closed. Already attached: nothing changes."""
    if folder.owner_id != agent.owner_id:
        raise NotFound(f"Folder '{folder.id}' not found")
    with transaction.atomic():
        _, created = AgentFolder.objects.get_or_create(agent=agent, folder=folder)
        if created:
            files_show(agent=agent, files=list(folder.files.filter(status=FileStatus.COMPLETED).order_by("created_at")))


def folder_detach(*, agent: Agent, folder_id: str) -> None:
    """Detach a folder: its files leave the agent's context."""
    with transaction.atomic():
        deleted, _ = AgentFolder.objects.filter(agent=agent, folder_id=folder_id).delete()
        if not deleted:
            raise NotFound(f"Folder '{folder_id}' is not attached to agent '{agent.id}'")
        FileAgent.objects.filter(agent=agent, folder_id=folder_id).delete()


def files_show(*, agent: Agent, files: list[FolderFile]) -> None:
    """Give the agent a view of each file it does not have yet, opening as many as its open-file limit leaves room
    for (files opened here count as just accessed)."""
    have = set(FileAgent.objects.filter(agent=agent, file__in=files).values_list("file_id", flat=True))
    new = [f for f in files if f.id not in have]
    if not new:
        return
    room = max(0, file_limits(agent).max_files_open - FileAgent.objects.filter(agent=agent, is_open=True).count())
    now = timezone.now()
    FileAgent.objects.bulk_create(
        [
            FileAgent(agent=agent, file=f, folder_id=f.folder_id, is_open=i < room, last_accessed_at=now)
            for i, f in enumerate(new)
        ]
    )


def _state(agent: Agent, file_id: str) -> FileAgent:
    state = FileAgent.objects.select_related("file", "folder").filter(agent=agent, file_id=file_id).first()
    if state is None:
        raise NotFound(f"File '{file_id}' is not attached to agent '{agent.id}'")
    return state


def file_open(
    *, agent: Agent, file_id: str, start: int | None = None, end: int | None = None, keep: tuple[str, ...] = ()
) -> list[str]:
    """Open an attached file (lines `start`..`end`, 1-based inclusive; None: whole), marked just accessed; closes
    the least recently used open files past the agent's limit (never those in `keep`) and returns their names."""
    state = _state(agent, file_id)
    total = len(file_lines(state.file))
    if start is not None and (start < 1 or (total and start > total)):
        raise Invalid(
            f"File {context_name(state)} has only {total} lines, but requested offset {start - 1} is out of range"
        )
    if end is not None and start is not None and end < start:
        raise Invalid("The last line must not come before the first")
    state.is_open, state.start_line, state.end_line = True, start, end
    state.last_accessed_at = timezone.now()
    state.save(update_fields=["is_open", "start_line", "end_line", "last_accessed_at"])
    return _evict(agent=agent, keep={file_id, *keep})


def _evict(*, agent: Agent, keep: set[str]) -> list[str]:
    limit = file_limits(agent).max_files_open
    open_states = list(
        FileAgent.objects.select_related("folder", "file")
        .filter(agent=agent, is_open=True)
        .order_by("last_accessed_at", "file__created_at", "id")
    )
    excess = len(open_states) - limit
    closed = [s for s in open_states if s.file_id not in keep][: max(0, excess)]
    FileAgent.objects.filter(pk__in=[s.pk for s in closed]).update(is_open=False, start_line=None, end_line=None)
    return [context_name(s) for s in closed]


def file_close(*, agent: Agent, file_id: str) -> None:
    """Close an attached file (it stays attached, listed as closed)."""
    state = _state(agent, file_id)
    FileAgent.objects.filter(pk=state.pk).update(is_open=False, start_line=None, end_line=None)


def files_close_all(*, agent: Agent, keep: tuple[str, ...] = ()) -> list[str]:
    """Close every open file of the agent but those in `keep`; returns the names closed."""
    states = list(
        FileAgent.objects.select_related("folder", "file").filter(agent=agent, is_open=True).exclude(file_id__in=keep)
    )
    FileAgent.objects.filter(pk__in=[s.pk for s in states]).update(is_open=False, start_line=None, end_line=None)
    return [context_name(s) for s in states]


def files_touch(*, agent: Agent, file_ids: set[str]) -> None:
    """Mark files as just used (a grep or search hit), so they are closed last."""
    if file_ids:
        FileAgent.objects.filter(agent=agent, file_id__in=file_ids).update(last_accessed_at=timezone.now())


def context_name(state: FileAgent) -> str:
    """The name an agent knows a file by: "<folder>/<file>"."""
    return f"{state.folder.name}/{state.file.file_name}"
