"""The migration making runs of agent tests experiments, run for real: test runs stored before it (through the
historical models) are experiments of the agent's tests dataset after `migrate`, read back in the test run's shape
(API, IDE, history tab); an experiment's results learn their case's id; migrating back restores the test runs."""

import datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.agents import agent_tests, versions
from core.models import Agent, CaseResult

BEFORE = [("core", "0023_queued_tasks")]
AFTER = [("core", "0025_agent_test_runs_as_experiments")]
AT = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.UTC)
FAILURE = {"expectation": "reply contains", "expected": "hello", "actual": "bye", "step_id": "step-9"}
PASSED = {
    "test_id": "case-a",
    "name": "greets",
    "passed": True,
    "failures": [],
    "run_ids": ["run-1"],
    "error": None,
    "copy_agent_id": None,
    "cost_usd": 0.001,
    "steps": 2,
    "duration_ms": 120.0,
}
FAILED = {
    **PASSED,
    "test_id": "case-b",
    "name": "says bye",
    "passed": False,
    "failures": [FAILURE],
    "run_ids": ["run-2"],
    "copy_agent_id": "agent-kept",
    "duration_ms": 80.0,
}
BROKEN = {"test_id": "case-gone", "passed": False, "failures": [], "error": "the test was deleted"}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def _stored_before(old) -> None:
    get = old.get_model
    org = get("core", "Organization").objects.create(id="org-legacy", name="legacy")
    agent = get("core", "Agent").objects.create(id="agent-a", owner=org, name="a", model="x/y")
    v2 = get("core", "AgentVersion").objects.create(agent=agent, number=2, content_hash="h", created_at=AT)
    dataset = get("core", "Dataset").objects.create(
        id="dataset-t", owner=org, name="Tests · a", agent=agent, tests_of=agent
    )
    expect = [{"name": "expectations", "kind": "expect", "expect": {"reply": {"contains": "hello"}}}]
    for i, (case_id, name) in enumerate((("case-a", "greets"), ("case-b", "says bye"))):
        get("core", "EvalCase").objects.create(
            id=case_id, dataset=dataset, position=i, name=name, turns=["hi"], graders=expect
        )
    Run = get("core", "AgentTestRun")
    Run.objects.create(
        id="testrun-done",
        owner=org,
        agent=agent,
        status="failed",
        model="openai/m",
        keep=True,
        test_ids=["case-a", "case-b", "case-gone"],
        results=[PASSED, FAILED, BROKEN],
        agent_version=v2,
        started_at=AT,
        completed_at=AT,
    )
    Run.objects.create(
        id="testrun-going", owner=org, agent=agent, status="running", test_ids=["case-a", "case-b"], results=[PASSED]
    )
    Run.objects.filter(pk="testrun-done").update(created_at=AT)
    other = get("core", "Dataset").objects.create(id="dataset-o", owner=org, name="other", agent=agent)
    case = get("core", "EvalCase").objects.create(id="case-o", dataset=other, turns=["hi"])
    experiment = get("core", "Experiment").objects.create(id="exp-o", owner=org, dataset=other, agent=agent)
    get("core", "CaseResult").objects.create(experiment=experiment, case=case, position=0)


@pytest.mark.django_db(transaction=True)
def test_test_runs_become_experiments_read_as_test_runs_and_come_back_when_migrated_back():
    executor = _migrate(BEFORE)
    try:
        _stored_before(executor.loader.project_state(BEFORE).apps)

        _migrate(AFTER)
        agent = Agent.objects.get(pk="agent-a")
        done = agent_tests.test_run_get(agent=agent, run_id="testrun-done")
        assert (done.dataset_id, done.version_at_start, done.keep_copies, done.created_at) == ("dataset-t", 2, True, AT)
        out = agent_tests.test_run_out(done)
        assert (out["status"], out["model"], out["test_ids"]) == (
            "failed",
            "openai/m",
            ["case-a", "case-b", "case-gone"],
        )
        assert (out["passed"], out["failed"]) == (1, 2)
        assert out["results"][0] == PASSED and out["results"][1] == FAILED
        assert out["results"][2] | {"name": None} == {
            **BROKEN,
            "name": None,
            "run_ids": [],
            "copy_agent_id": None,
            "cost_usd": None,
            "steps": None,
            "duration_ms": None,
        }
        assert done.aggregates["passed"] == 1 and done.aggregates["graders"]["expectations"]["n"] == 2
        going = agent_tests.test_run_out(agent_tests.test_run_get(agent=agent, run_id="testrun-going"))
        assert going["status"] == "running" and going["results"] == [PASSED]
        assert CaseResult.objects.get(experiment_id="testrun-going", position=1).status == "pending"
        [timeline_v2] = [v for v in versions.versions_with_tests(agent=agent) if v["version"].number == 2]
        assert [(r["id"], r["status"], r["failures"]) for r in timeline_v2["test_runs"]] == [
            ("testrun-done", "failed", ["says bye", "case-gone"])
        ]
        assert CaseResult.objects.get(experiment_id="exp-o").case_key == "case-o"

        old = _migrate(BEFORE).loader.project_state(BEFORE).apps
        back = old.get_model("core", "AgentTestRun").objects.get(pk="testrun-done")
        assert (back.status, back.model, back.keep, back.agent_version.number, back.created_at) == (
            "failed",
            "openai/m",
            True,
            2,
            AT,
        )
        assert back.test_ids == ["case-a", "case-b", "case-gone"] and back.results[:2] == [PASSED, FAILED]
        assert old.get_model("core", "AgentTestRun").objects.get(pk="testrun-going").status == "running"
        assert list(old.get_model("core", "Experiment").objects.values_list("id", flat=True)) == ["exp-o"]
    finally:
        _migrate(executor.loader.graph.leaf_nodes())
