"""The task backend of the run queue: django-tasks' API (`@task`, `Task.enqueue`, `TaskResult`) over our own table,
core.models.QueuedTask, which core/runs/queue.py claims and ends with its own statements.

Written against django-tasks' public backend interface (`BaseTaskBackend.enqueue`), as its docs
describe a custom backend; the table, its index and its claim are ours, so no statement of ours reaches into another
library's table.
"""

from django_tasks import BaseTaskBackend, TaskResult, TaskResultStatus

from core.models import QueuedTask
from core.runs.persistence import rows_insert


class DatabaseBackend(BaseTaskBackend):
    """Tasks stored as QueuedTask rows in the project's database (SQLite or PostgreSQL)."""

    supports_defer = True  # a delivery retried later (core.runs.multiagent): `run_after`
    supports_priority = True

    def enqueue(self, task, args, kwargs) -> TaskResult:
        """Store the task READY (in the caller's transaction, if any) and return its result handle."""
        self.validate_task(task)
        row = QueuedTask(
            task_path=task.module_path,
            args=list(args),
            kwargs=dict(kwargs),
            priority=task.priority,
            run_after=task.run_after,
        )
        rows_insert([row])  # as QueuedTask.objects.create, without compiling the insert (every queued send does one)
        return task_result(row, task)


def task_result(row: QueuedTask, task) -> TaskResult:
    """django-tasks' view of a task just stored."""
    return TaskResult(
        task=task,
        id=row.id,
        status=TaskResultStatus(row.status),
        enqueued_at=row.enqueued_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_attempted_at=row.started_at,
        args=row.args,
        kwargs=row.kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=row.worker_ids,
    )
