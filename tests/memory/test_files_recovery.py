"""An ingest whose process died is recovered: the file is queued again and completes, or ends `error` saying why
after MAX_INGEST_ATTEMPTS starts; a live or queued ingest is left alone; nothing half-written is ever seen. The last
test kills the server with SIGKILL while it embeds a file and starts it again."""

import socket
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import QueuedTask
from memory.files import recovery, services
from memory.files.ingest import _holding, file_ingest, files_heartbeat
from memory.files.tasks import file_ingest_task
from memory.models import FileStatus, FolderFile, Passage
from tests.helpers import until
from tests.memory.test_folders import pdf_bytes

TEXT = "\n".join(f"Line {n}: the ferry to Oslo leaves at {n}:00." for n in range(1, 200)).encode()


def _left_by_a_dead_process(folder, name: str, *, status=FileStatus.EMBEDDING, attempts: int = 1) -> FolderFile:
    """An uploaded file whose ingest task a process claimed and then died: the task row RUNNING, the file part-way,
    its heartbeat a minute old."""
    file, _ = services.file_upload(folder=folder, file_name=name, content_type="text/plain", data=TEXT)
    task = file_ingest_task.enqueue(file_id=file.id)
    a_minute_ago = timezone.now() - timedelta(minutes=1)
    QueuedTask.objects.filter(pk=task.id).update(status=QueuedTask.RUNNING, started_at=a_minute_ago)
    FolderFile.objects.filter(pk=file.pk).update(
        status=status, ingest_attempts=attempts, total_chunks=9, chunks_embedded=3
    )
    FolderFile.objects.filter(pk=file.pk).update(updated_at=a_minute_ago)
    return file


@pytest.fixture
def folder(account):
    return services.folder_create(owner=account.org, name="ferries")


@pytest.mark.django_db
def test_a_dead_ingest_is_queued_again_and_completes(folder):
    file = _left_by_a_dead_process(folder, "ferries.txt")
    old_task = QueuedTask.objects.get(status=QueuedTask.RUNNING)

    assert recovery.files_sweep(lease_s=30) == [file.id]
    file.refresh_from_db()
    assert (file.status, file.chunks_embedded, file.total_chunks) == (FileStatus.PENDING, None, None)
    assert not Passage.objects.filter(file_id=file.id).exists()
    old_task.refresh_from_db()
    assert old_task.status == QueuedTask.FAILED
    queued = QueuedTask.objects.filter(status=QueuedTask.READY).get()
    assert queued.kwargs == {"file_id": file.id}
    assert recovery.files_sweep(lease_s=30) == []  # queued now: a second sweep leaves it to its task

    assert file_ingest(file_id=file.id) == FileStatus.COMPLETED
    file.refresh_from_db()
    assert file.ingest_attempts == 2 and file.chunks_embedded == file.total_chunks > 0
    assert Passage.objects.filter(file_id=file.id).count() == file.total_chunks
    assert file.raw is None


@pytest.mark.django_db
def test_a_file_that_keeps_stopping_its_process_ends_error_with_the_reason(folder):
    file = _left_by_a_dead_process(folder, "poison.txt", status=FileStatus.PARSING, attempts=3)
    assert recovery.files_sweep(lease_s=30) == [file.id]
    file.refresh_from_db()
    assert file.status == FileStatus.ERROR and file.raw is None
    assert file.error_message == (
        "Processing stopped 3 times: the process ingesting this file stopped (restart or crash) each time; not retried."
    )
    assert not QueuedTask.objects.filter(status=QueuedTask.READY).exists()
    assert not Passage.objects.filter(file_id=file.id).exists()


@pytest.mark.django_db
def test_live_queued_and_finished_ingests_are_left_alone(folder):
    live = _left_by_a_dead_process(folder, "live.txt")
    queued, _ = services.file_upload(folder=folder, file_name="queued.txt", content_type="text/plain", data=TEXT)
    file_ingest_task.enqueue(file_id=queued.id)
    done, _ = services.file_upload(folder=folder, file_name="done.txt", content_type="text/plain", data=TEXT)
    file_ingest(file_id=done.id)
    claimed, _ = services.file_upload(folder=folder, file_name="claimed.txt", content_type="text/plain", data=TEXT)
    task = file_ingest_task.enqueue(file_id=claimed.id)  # a pool claimed it just now; its ingest is about to start
    QueuedTask.objects.filter(pk=task.id).update(status=QueuedTask.RUNNING, started_at=timezone.now())
    stale = [queued.pk, done.pk, claimed.pk]
    FolderFile.objects.filter(pk__in=stale).update(updated_at=timezone.now() - timedelta(hours=1))

    with _holding(live.id):  # this process is ingesting it: the lease thread's heartbeat renews it
        assert files_heartbeat() == 1
        assert recovery.files_sweep(lease_s=30) == []
    live.refresh_from_db()
    assert live.status == FileStatus.EMBEDDING and live.updated_at > timezone.now() - timedelta(seconds=30)
    assert FolderFile.objects.get(pk=queued.pk).status == FileStatus.PENDING
    assert FolderFile.objects.get(pk=claimed.pk).status == FileStatus.PENDING
    assert QueuedTask.objects.get(pk=task.id).status == QueuedTask.RUNNING
    assert FolderFile.objects.get(pk=done.pk).status == FileStatus.COMPLETED


@pytest.mark.django_db
def test_a_retry_never_undoes_a_finished_ingest(folder):
    file, _ = services.file_upload(folder=folder, file_name="twice.txt", content_type="text/plain", data=TEXT)
    assert file_ingest(file_id=file.id) == FileStatus.COMPLETED
    passages = set(Passage.objects.filter(file_id=file.id).values_list("id", flat=True))
    services.file_fail(file_id=file.id, reason="late failure of another attempt")
    assert file_ingest(file_id=file.id) == FileStatus.COMPLETED
    file.refresh_from_db()
    assert file.status == FileStatus.COMPLETED and file.error_message == ""
    assert set(Passage.objects.filter(file_id=file.id).values_list("id", flat=True)) == passages


class _Silent:
    """An embeddings endpoint that accepts connections and never answers: an ingest waits in `embedding`."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def close(self):
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.mark.django_db(transaction=True)
def test_a_server_killed_mid_ingest_finishes_the_file_after_its_restart(account, fake_llm):
    from tests.scale.test_crash import Server

    folder = services.folder_create(owner=account.org, name="manuals", embedding="openai/text-embedding-3-small")
    file, _ = services.file_upload(
        folder=folder, file_name="manual.pdf", content_type="application/pdf", data=pdf_bytes(12)
    )
    file_ingest_task.enqueue(file_id=file.id)  # queued with the upload, as the upload route does
    silent, server = _Silent(), Server()
    try:
        server.env["RUN_LEASE_S"] = "2"  # a dead ingest is found by its lapsed heartbeat: a short lease
        server.env["OPENAI_BASE_URL"] = silent.url
        server.start()  # its pool claims the task from the database
        until(lambda: FolderFile.objects.get(pk=file.pk).status == FileStatus.EMBEDDING, what="the ingest to embed")
        server.kill()
        stuck = FolderFile.objects.get(pk=file.pk)
        assert stuck.status == FileStatus.EMBEDDING and not Passage.objects.filter(file_id=file.id).exists()

        server.env["OPENAI_BASE_URL"] = fake_llm.base_url
        server.start()
        done = until(
            lambda: (f := FolderFile.objects.get(pk=file.pk)).status in (FileStatus.COMPLETED, FileStatus.ERROR) and f,
            what="the file to be ingested again",
        )
    finally:
        server.stop()
        silent.close()
    assert done.status == FileStatus.COMPLETED, done.error_message
    assert done.ingest_attempts == 2 and done.page_count == 12
    assert Passage.objects.filter(file_id=file.id).count() == done.total_chunks
    assert QueuedTask.objects.filter(status=QueuedTask.FAILED).count() == 1
