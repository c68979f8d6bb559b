"""Running an agent's tests (stored by core.agents.agent_tests): a run of them is an experiment of the agent's tests
dataset (core.evals.experiments), each test one of its cases run by core.evals.runner — a copy of the agent as it is
now (or a fork at a step), every turn through the run executor, what happened checked by its expectations grader —
one after another, each result told to the agent's open tabs as it comes; the copies are deleted unless kept.
"""

import logging

from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core.agents.agent_tests import agent_locked, run_status, test_result
from core.errors import Invalid, NotFound
from core.evals import experiments
from core.events import agent_group, send_event
from core.models import Agent, EvalCase, Experiment, Organization
from core.runs import executor

log = logging.getLogger(__name__)


def _selected(agent: Agent, test_ids: list[str] | None) -> list[EvalCase]:
    """The tests to run, in their order: all the agent's, or those named (NotFound names the unknown ones)."""
    cases = [
        c
        for c in EvalCase.objects.filter(dataset__tests_of=agent).order_by("position", "created_at")
        if any(isinstance(s, dict) and s.get("kind") == "expect" for s in c.graders or [])
    ]
    if test_ids:
        unknown = set(test_ids) - {c.id for c in cases}
        if unknown:
            raise NotFound(f"No test {', '.join(sorted(unknown))} on this agent")
        cases = [c for c in cases if c.id in test_ids]
    if not cases:
        raise Invalid("This agent has no tests to run.")
    return cases


def tests_start(
    *,
    owner: Organization,
    agent: Agent,
    test_ids: list[str] | None = None,
    model: str | None = None,
    keep: bool = False,
    queued: bool = True,
) -> Experiment:
    """Record a run of the agent's tests (all, or the given ids): an experiment of its tests dataset on the agent as
    it is, one test at a time, its copies kept only if `keep`; queue it as a background task (not `queued`: the
    caller runs tests_execute itself). Returns it. Locks the agent's row while it is recorded; NotFound if the agent
    is gone."""
    with transaction.atomic():
        agent = agent_locked(agent)
        cases = _selected(agent, test_ids)
        run = experiments.experiment_start(
            owner=owner,
            dataset=cases[0].dataset,
            agent=agent,
            model=model or "",
            concurrency=1,
            name=f"Tests · {agent.name}" + (f" · {model}" if model else ""),
            queued=False,
            cases=cases,
            keep_copies=keep,
        )
        if queued:
            executor.queue.woken_after_commit(agent_tests_task.enqueue(test_run_id=run.id))
    return run


def tests_execute(*, test_run_id: str) -> str:
    """Task body: run the tests of a test run one after another, storing each result as it comes and telling open
    tabs (agent_test_result, then agent_test_run at the end); returns its status as a test run's (passed, failed,
    cancelled)."""
    run = Experiment.objects.select_related("owner", "agent", "dataset").get(pk=test_run_id)
    if not Experiment.objects.filter(pk=run.pk, status="queued").update(status="running", started_at=timezone.now()):
        return run_status(run)  # cancelled before it started, or taken already
    group = agent_group(run.agent_id or run.dataset.tests_of_id)
    judges: dict = {}  # a rubric grader set on the tests dataset: its judge resolved once a run
    pending = list(run.results.filter(status="pending").select_related("case").order_by("position"))
    starts = experiments.starts_for(experiment=run, results=pending)  # tests starting alike: the state read once
    for result in pending:
        if experiments.case_execute(experiment=run, result=result, judges=judges, starts=starts):
            result.refresh_from_db()
            send_event(
                group, {"message_type": "agent_test_result", "test_run_id": run.id, "result": test_result(result)}
            )
    experiments.experiment_finish(experiment=run)
    run.refresh_from_db()
    status = run_status(run)
    send_event(group, {"message_type": "agent_test_run", "test_run_id": run.id, "status": status})
    return status


@task()
def agent_tests_task(*, test_run_id: str) -> str:
    """Task-queue entry point of tests_execute."""
    return tests_execute(test_run_id=test_run_id)
