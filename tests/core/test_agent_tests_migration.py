"""The migration moving agent tests out of agent metadata, run for real: tests stored there before it (through the
historical models) are cases of the agent's tests dataset after `migrate`, listed and run as tests; what it could
not read stays in the metadata; migrating back puts the tests where they were."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.agents import agent_tests
from core.models import Agent

BEFORE = [("core", "0020_scheduled_messages")]
AFTER = [("core", "0022_agent_tests_as_cases")]
TEST = {
    "id": "test-legacy",
    "name": "greets",
    "turns": ["hi"],
    "expect": {"reply": {"contains": "hello"}},
    "start": {"step_id": None, "before": False},
}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_stored_tests_become_cases_and_come_back_when_migrated_back():
    executor = _migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        org = old.get_model("core", "Organization").objects.create(id="org-legacy", name="legacy")
        Old = old.get_model("core", "Agent")
        Old.objects.create(id="agent-a", owner=org, name="a", model="x/y", metadata={"agent_tests": [TEST, 5], "k": 1})
        Old.objects.create(id="agent-b", owner=org, name="b", model="x/y", metadata={"agent_tests": "junk"})

        _migrate(AFTER)
        a, b = Agent.objects.get(pk="agent-a"), Agent.objects.get(pk="agent-b")
        assert agent_tests.tests_list(agent=a) == [TEST]
        assert a.tests_dataset.cases.get().graders == [
            {"name": "expectations", "kind": "expect", "expect": TEST["expect"]}
        ]
        assert a.metadata == {"agent_tests": [5], "k": 1}  # the unreadable entry stays where it was
        assert agent_tests.tests_list(agent=b) == [] and b.metadata == {"agent_tests": "junk"}

        old = _migrate(BEFORE).loader.project_state(BEFORE).apps
        assert old.get_model("core", "Agent").objects.get(pk="agent-a").metadata == {"agent_tests": [5, TEST], "k": 1}
        assert not old.get_model("core", "Dataset").objects.exists()
    finally:
        _migrate(executor.loader.graph.leaf_nodes())
