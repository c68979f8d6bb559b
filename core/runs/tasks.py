"""Task-queue entry points (django-tasks). Thin: each calls a service; arguments are JSON values."""

from django_tasks import task


@task()
def run_execute_task(*, run_id: str) -> str:
    """Execute a claimed run (see core.runs.executor.run_execute)."""
    from core.runs.executor import run_execute

    return run_execute(run_id=run_id)


@task()
def agent_message_deliver_task(
    *,
    owner_id: str,
    target_id: str,
    sender_id: str,
    message: str,
    depth: int,
    parent_run_id: str | None,
    attempt: int = 0,
) -> str:
    """Deliver an agent-to-agent message once the receiving agent is free (claims and queues its run)."""
    from core.runs.multiagent import agent_message_deliver

    return agent_message_deliver(
        owner_id=owner_id,
        target_id=target_id,
        sender_id=sender_id,
        message=message,
        depth=depth,
        parent_run_id=parent_run_id,
        attempt=attempt,
    )


@task()
def agent_tests_task(*, test_run_id: str) -> str:
    """Run an agent's tests (see core.runs.agent_tests.tests_execute)."""
    from core.runs.agent_tests import tests_execute

    return tests_execute(test_run_id=test_run_id)
