"""Task-queue entry point of a file's ingest (django-tasks' database backend, run by the run executor's pool)."""

from django_tasks import task

from memory.files.ingest import file_ingest


@task()
def file_ingest_task(*, file_id: str) -> str:
    """Ingest one uploaded file (memory.files.ingest.file_ingest)."""
    return file_ingest(file_id=file_id)
