"""Ingests a dead process left behind: found by their lapsed heartbeat and queued again, or failed with the reason.

A process ingesting a file renews the file's `updated_at` from its lease thread (memory.files.ingest). A file still
pending, parsing or embedding whose `updated_at` is older than the lease, and whose ingest is not waiting in the task
queue, was being ingested by a process that stopped (killed, crashed, restarted). Nothing of it is visible (readers
see passages of completed files only), and its bytes are kept until ingest ends, so it is queued again from the start
(the new ingest first removes the batches of passages the dead one wrote); after MAX_INGEST_ATTEMPTS starts it ends
`error` instead, saying why, with those passages removed, since a file whose ingest keeps killing its process must not
loop forever. A file that ended `error` is never picked up again. Every process's lease thread runs `files_sweep`
(the one in core.runs.queue), first when it starts.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from core.models import QueuedTask
from memory.files.ingest import files_heartbeat, files_held
from memory.files.services import passages_drop
from memory.files.tasks import file_ingest_task
from memory.models import FILE_TERMINAL, FileStatus, FolderFile

log = logging.getLogger(__name__)
MAX_INGEST_ATTEMPTS = 3
STOPPED = "the process ingesting this file stopped (restart or crash)"
GAVE_UP = f"Processing stopped {MAX_INGEST_ATTEMPTS} times: {STOPPED} each time; not retried."
TASK_PATH = file_ingest_task.module_path


def files_sweep(*, lease_s: float) -> list[str]:
    """Renew this process's ingests and recover those whose heartbeat lapsed for `lease_s`; returns their ids."""
    files_heartbeat()
    return files_recover(lease_s=lease_s)


def _task_file_ids(rows) -> set[str]:
    return {(kwargs or {}).get("file_id") for kwargs in rows}


def files_recover(*, lease_s: float) -> list[str]:
    """Queue again (or fail, past MAX_INGEST_ATTEMPTS) each unfinished file whose ingest's heartbeat lapsed and whose
    task is not waiting to run nor just claimed; fails the task rows of the ingests that died. Conditional updates: of several
    processes sweeping at once, one recovers a file."""
    limit = timezone.now() - timedelta(seconds=lease_s)
    stale = list(
        FolderFile.objects.filter(updated_at__lt=limit)
        .exclude(status__in=FILE_TERMINAL)
        .exclude(pk__in=files_held())
        .values_list("id", "ingest_attempts")
    )
    if not stale:
        return []
    # Read after the files: a task claimed meanwhile is still seen, as just started, before its ingest holds the file.
    tasks = QueuedTask.objects.filter(task_path=TASK_PATH)
    queued = _task_file_ids(tasks.filter(status=QueuedTask.READY).values_list("kwargs", flat=True))
    queued |= _task_file_ids(
        tasks.filter(status=QueuedTask.RUNNING, started_at__gte=limit).values_list("kwargs", flat=True)
    )
    recovered = [file_id for file_id, attempts in stale if file_id not in queued and _recover(file_id, attempts, limit)]
    if recovered:
        _tasks_fail(set(recovered))
        log.warning("recovered ingests of files whose process stopped: %s", recovered)
    return recovered


def _recover(file_id: str, attempts: int, limit) -> bool:
    lapsed = FolderFile.objects.filter(pk=file_id, updated_at__lt=limit).exclude(status__in=FILE_TERMINAL)
    if attempts >= MAX_INGEST_ATTEMPTS:
        gave_up = lapsed.update(status=FileStatus.ERROR, error_message=GAVE_UP, raw=None, updated_at=timezone.now())
        if gave_up:
            passages_drop(file_id=file_id)  # the batches its last attempt wrote
        return bool(gave_up)
    with transaction.atomic():
        taken = lapsed.update(
            status=FileStatus.PENDING, chunks_embedded=None, total_chunks=None, updated_at=timezone.now()
        )
        if taken:
            file_ingest_task.enqueue(file_id=file_id)  # the pools' dispatchers claim it on their next poll
    return bool(taken)


def _tasks_fail(file_ids: set[str]) -> None:
    QueuedTask.objects.filter(
        status=QueuedTask.RUNNING, task_path=TASK_PATH, kwargs__file_id__in=list(file_ids)
    ).update(status=QueuedTask.FAILED, finished_at=timezone.now(), error=f"RuntimeError\n{STOPPED}")
