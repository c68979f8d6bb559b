"""Running an agent's tests (stored by core.agents.agent_tests): each is the one-case run of core.evals.runner — a
copy of the agent as it is now (or a fork at a step), every turn through the run executor, what happened checked by
the pure expectations (core.engine.expectations); the copy is deleted unless kept.
"""

import logging
import time

from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core.agents import versions
from core.agents.agent_tests import agent_locked, case_fields, tests_list
from core.agents.services import agent_delete
from core.errors import Invalid, NotFound
from core.evals import runner
from core.events import agent_group, send_event
from core.models import Agent, AgentTestRun, EvalCase, Organization
from core.runs import executor

log = logging.getLogger(__name__)


def _selected(agent: Agent, test_ids: list[str] | None) -> list[dict]:
    tests = tests_list(agent=agent)
    if test_ids:
        unknown = set(test_ids) - {t["id"] for t in tests}
        if unknown:
            raise NotFound(f"No test {', '.join(sorted(unknown))} on this agent")
        tests = [t for t in tests if t["id"] in test_ids]
    if not tests:
        raise Invalid("This agent has no tests to run.")
    return tests


def tests_start(
    *,
    owner: Organization,
    agent: Agent,
    test_ids: list[str] | None = None,
    model: str | None = None,
    keep: bool = False,
) -> AgentTestRun:
    """Queue a run of the agent's tests (all, or the given ids) as a background task; returns the test run. Locks the
    agent's row while the run is recorded; NotFound if the agent is gone."""
    with transaction.atomic():
        agent = agent_locked(agent)
        tests = _selected(agent, test_ids)
        run = AgentTestRun.objects.create(
            owner=owner,
            agent=agent,
            test_ids=[t["id"] for t in tests],
            model=model or "",
            keep=keep,
            agent_version=versions.version_current(agent=agent),
        )
        executor.queue.woken_after_commit(agent_tests_task.enqueue(test_run_id=run.id))
    return run


# --------------------------------------------------------------------------- running


def test_execute(*, agent: Agent, test: dict, model: str = "", keep: bool = False) -> dict:
    """Run one test as the one-case run of core.evals.runner (a throwaway copy, every turn through the run executor,
    its expectations the grader) and check it; returns its result. The copy is deleted unless `keep`."""
    started = time.perf_counter()
    result = {
        "test_id": test["id"],
        "name": test["name"],
        "passed": False,
        "failures": [],
        "run_ids": [],
        "copy_agent_id": None,
        "error": None,
    }
    copies: list[Agent] = []
    case = EvalCase(id=test["id"], **case_fields(test))
    try:
        done = runner.case_run(
            owner=agent.owner,
            case=case,
            target=runner.Target(agent=agent, model=model),
            graders=[],
            marker={"agent_test_copy": {"agent_id": agent.id, "test_id": test["id"]}},
            label="test",
            on_copy=copies.append,
        )
        result["run_ids"] = [r.id for r in done.runs]
        [grade] = done.grades
        if grade["error"]:
            raise Invalid(grade["error"])
        result["failures"] = grade.get("failures") or []
        failed = done.failed_run
        if failed is not None and not result["failures"]:
            result["failures"] = [
                {
                    "expectation": "the run completes",
                    "expected": "completed",
                    "actual": f"{failed.status}: {failed.error or failed.stop_reason}",
                    "step_id": None,
                }
            ]
        result["passed"] = not result["failures"]
        result["cost_usd"] = done.observed["cost_usd"]
        result["steps"] = len(done.observed["steps"])
    except Exception as exc:  # noqa: BLE001 - a broken test is a failed test with its reason, never a crashed suite
        log.exception("agent test %s failed to run", test["id"])
        result["error"] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    finally:
        for copy in copies:
            if keep:
                result["copy_agent_id"] = copy.id
            else:
                agent_delete(agent=copy)  # its blocks are copies no one else uses: they go too
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def tests_execute(*, test_run_id: str) -> str:
    """Task body: run the tests of a test run one after another, recording each result as it comes (and telling
    open tabs); returns "passed" or "failed"."""
    run = AgentTestRun.objects.select_related("agent").get(pk=test_run_id)
    by_id = {t["id"]: t for t in tests_list(agent=run.agent)}
    AgentTestRun.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now())
    results = []
    for test_id in run.test_ids:
        test = by_id.get(test_id)
        if test is None:
            results.append({"test_id": test_id, "passed": False, "failures": [], "error": "the test was deleted"})
        else:
            results.append(test_execute(agent=run.agent, test=test, model=run.model, keep=run.keep))
        AgentTestRun.objects.filter(pk=run.pk).update(results=results)
        send_event(
            agent_group(run.agent_id),
            {"message_type": "agent_test_result", "test_run_id": run.id, "result": results[-1]},
        )
    status = "passed" if all(r["passed"] for r in results) else "failed"
    AgentTestRun.objects.filter(pk=run.pk).update(status=status, completed_at=timezone.now())
    send_event(agent_group(run.agent_id), {"message_type": "agent_test_run", "test_run_id": run.id, "status": status})
    return status


@task()
def agent_tests_task(*, test_run_id: str) -> str:
    """Task-queue entry point of tests_execute."""
    return tests_execute(test_run_id=test_run_id)
