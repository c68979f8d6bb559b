"""A file's ingest: parse → chunk → embed in batches → store its passages, in the background (memory/files/tasks.py).

Status goes pending → parsing → embedding → completed, or error with the reason. A document is parsed in a process of
its own under limits (memory.files.isolate), stopped as soon as the file is deleted. Each batch of chunks is embedded
and written with its progress (`chunks_embedded`) in one short transaction, so no other writer waits long for
SQLite's lock; readers only see the passages of `completed` files, and a file that fails or is deleted half-way has
what it wrote removed (services.file_fail, services.file_delete). A file passing a limit (its text, its passages, the
account's quota) ends `error` with the reason and is never retried.
While a process ingests a file, its lease thread renews the file's `updated_at` (`files_heartbeat`), so a file
whose process died is told apart from a slow one (memory.files.recovery).
"""

import logging
import threading
from contextlib import contextmanager

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.models import OwnerSettings
from core.transactions import connection_lend, outside_transaction
from memory.embedders.base import EmbeddingError
from memory.embedders.selection import embedder_for_handle
from memory.files.chunk import Chunk, chunk_lines
from memory.files.isolate import Cancelled, parse_isolated
from memory.files.limits import parse_limits
from memory.files.parse import PAGE_BREAK, Parsed, ParseError, text_bounded
from memory.files.selectors import file_lines
from memory.files.services import QuotaExceeded, file_fail, files_show, passages_drop, passages_quota_check
from memory.models import FILE_TERMINAL, FileStatus, Folder, FolderFile, Passage

log = logging.getLogger(__name__)
EMBED_BATCH = 64

_held: set[str] = set()
_held_lock = threading.Lock()


@contextmanager
def _holding(file_id: str):
    with _held_lock:
        _held.add(file_id)
    try:
        yield
    finally:
        with _held_lock:
            _held.discard(file_id)


def files_held() -> set[str]:
    """The ids of the files this process is ingesting now."""
    with _held_lock:
        return set(_held)


def files_heartbeat() -> int:
    """Renew `updated_at` of the files this process is ingesting (called by its lease thread); returns how many."""
    held = files_held()
    if held:
        FolderFile.objects.filter(pk__in=held).exclude(status__in=FILE_TERMINAL).update(updated_at=timezone.now())
    return len(held)


def folder_embedding_handle(folder: Folder) -> str:
    """The folder's embedding model, else the owner's, else EMBEDDING_MODEL; "" for full-text search only."""
    if folder.embedding:
        return folder.embedding
    owner_choice = (
        OwnerSettings.objects.filter(owner_id=folder.owner_id).values_list("embedding_model", flat=True).first()
    )
    return owner_choice or getattr(settings, "EMBEDDING_MODEL", "") or ""


class _Ended(Exception):
    """The file ended meanwhile (deleted, timed out, or completed by another ingest): stop without touching it."""


def _status(file_id: str, **fields) -> None:
    # Never moves a file out of a final status: a second ingest of it (a retry) must not undo the first's end.
    if (
        not FolderFile.objects.filter(pk=file_id)
        .exclude(status__in=FILE_TERMINAL)
        .update(updated_at=timezone.now(), **fields)
    ):
        raise _Ended


def file_ingest(*, file_id: str) -> str:
    """Parse, chunk and embed a pending file and store its passages; returns its final status. Embedding calls
    are made outside any transaction. A file already completed or failed is left alone."""
    file = FolderFile.objects.select_related("folder").filter(pk=file_id).first()
    if file is None or file.status in FILE_TERMINAL:
        return "gone" if file is None else file.status
    try:
        with _holding(file.id):
            return _ingest(file)
    except (_Ended, Cancelled):
        return FolderFile.objects.filter(pk=file.id).values_list("status", flat=True).first() or "gone"
    except (ParseError, EmbeddingError, QuotaExceeded) as exc:
        file_fail(file_id=file.id, reason=str(exc))
    except Exception as exc:  # an unexpected failure still ends the file's processing, with a reason
        log.exception("ingest of %s failed", file.id)
        file_fail(file_id=file.id, reason=f"Processing failed: {type(exc).__name__}: {exc}"[:500])
    return FileStatus.ERROR


def _wanted(file_id: str) -> bool:
    wanted = FolderFile.objects.filter(pk=file_id).exclude(status__in=FILE_TERMINAL).exists()
    connection_lend()  # a parse may take minutes: the pooled connection goes back between checks
    return wanted


def _parsed(file: FolderFile) -> Parsed:
    limits = parse_limits()
    if file.raw is None and file.content:  # imported from an agent file: its text, already parsed
        text = text_bounded(file.content, limits=limits)
        return Parsed(text=text, pages=text.count(PAGE_BREAK) + 1)
    outside_transaction("parsing a document")
    return parse_isolated(
        data=bytes(file.raw or b""),
        mime=file.mime_type,
        file_name=file.original_file_name,
        limits=limits,
        wanted=lambda: _wanted(file.id),
        key=file.id,
    )


def _ingest(file: FolderFile) -> str:
    _status(file.id, status=FileStatus.PARSING, ingest_attempts=F("ingest_attempts") + 1)
    parsed = _parsed(file)
    file.content = parsed.text
    lines = file_lines(file)
    if not lines:
        raise ParseError("The file holds no text")
    chunks = chunk_lines(lines, chunk_tokens=file.folder.embedding_chunk_size)
    passages_quota_check(owner_id=file.owner_id, adding=len(chunks), file_id=file.id)
    _status(file.id, status=FileStatus.EMBEDDING, total_chunks=len(chunks), chunks_embedded=0)
    passages_drop(file_id=file.id)  # an earlier attempt's, stopped by a restart
    handle = folder_embedding_handle(file.folder)
    embedded = _store(file, handle, chunks)
    with transaction.atomic():
        locked = FolderFile.objects.select_for_update().filter(pk=file.id).values_list("status", flat=True).first()
        if locked is None or locked in FILE_TERMINAL:  # deleted, timed out or done meanwhile
            return locked or "gone"
        _status(
            file.id,
            status=FileStatus.COMPLETED,
            content=parsed.text,
            line_count=len(lines),
            page_count=parsed.pages,
            chunks_embedded=len(chunks),
            embedding_model=handle if embedded else "",
            error_message="",
            raw=None,
        )
        file.status = FileStatus.COMPLETED
        for agent in file.folder.agents.all():
            files_show(agent=agent, files=[file])
    return FileStatus.COMPLETED


def _store(file: FolderFile, handle: str, chunks: list[Chunk]) -> bool:
    """Embed the chunks a batch at a time (provider calls outside any transaction) and write each batch with its
    progress in one short transaction; returns whether they have vectors (False: no model, full text only).
    Raises _Ended when the file was deleted or ended meanwhile."""
    embedder = embedder_for_handle(owner=file.folder.owner, handle=handle)
    for start in range(0, len(chunks), EMBED_BATCH):
        batch = chunks[start : start + EMBED_BATCH]
        vectors = embedder.embed([c.text for c in batch]) if embedder is not None else None
        rows = [_passage(file, chunk, handle, vectors, i, start + i) for i, chunk in enumerate(batch)]
        with transaction.atomic():
            _status(file.id, chunks_embedded=start + len(batch))  # locks the file's row; raises _Ended when gone
            Passage.objects.bulk_create(rows)
    return embedder is not None


def _passage(file: FolderFile, chunk: Chunk, handle: str, vectors, at: int, index: int) -> Passage:
    vector = vectors[at] if vectors is not None else None
    return Passage(
        owner_id=file.owner_id,
        folder_id=file.folder_id,
        file_id=file.id,
        text=chunk.text,
        source="file",
        metadata={
            "file_name": file.file_name,
            "chunk": index,
            "start_line": chunk.start_line,
            "end_line": chunk.end_line,
            "start_page": chunk.start_page,
            "end_page": chunk.end_page,
        },
        embedding=vector,
        embedding_model=handle if vector is not None else "",
        embedding_dim=len(vector) if vector is not None else 0,
    )
