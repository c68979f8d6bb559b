"""Background runs: claim a run now, execute it later on the task queue (core.tasks → core.queue).

A background run is claimed at request time (so a busy agent answers 409 at once, as for any send),
stored as status `created`, and its task is enqueued in the same transaction; a queue thread flips it to
`running` under a lease when it starts.
"""

from django.db import transaction
from django.utils import timezone

from core import queue, runner
from core.models import Organization, Run


def run_claim_background(*, owner: Organization, agent_id: str, input_messages: list[dict], max_steps: int | None = None,
                         depth: int = 0, parent_run_id: str | None = None, kinds: dict[int, str] | None = None) -> Run:
    """Claim the agent for a queued run (status created); Conflict if busy. Call inside a transaction."""
    return runner.run_start(owner=owner, agent_id=agent_id, input_messages=input_messages, max_steps=max_steps,
                            background=True, depth=depth, parent_run_id=parent_run_id, kinds=kinds)


def run_enqueue(*, run: Run) -> None:
    """Queue the execution of a claimed run (committed with the caller's transaction; wakes the local pool)."""
    from core.tasks import run_execute_task

    queue.woken_after_commit(run_execute_task.enqueue(run_id=run.id).id)


@transaction.atomic
def run_async_start(*, owner: Organization, agent_id: str, input_messages: list[dict], max_steps: int | None = None,
                    depth: int = 0, parent_run_id: str | None = None, kinds: dict[int, str] | None = None) -> Run:
    """Claim the agent and queue the run; returns the run (status created). Conflict if the agent is busy."""
    run = run_claim_background(owner=owner, agent_id=agent_id, input_messages=input_messages, max_steps=max_steps,
                               depth=depth, parent_run_id=parent_run_id, kinds=kinds)
    run_enqueue(run=run)
    return run


def run_execute(*, run_id: str) -> str:
    """Execute a queued run to its end under this process's lease; returns its final status."""
    run = Run.objects.select_related("owner").filter(pk=run_id).first()
    if run is None or run.status not in runner.ACTIVE:
        return run.status if run else "missing"
    with queue.lease(run.id, status="running", started_at=timezone.now()):
        result = runner.run_agent(agent_id=run.agent_id, owner=run.owner, input_messages=[], run=run)
    return result.status
