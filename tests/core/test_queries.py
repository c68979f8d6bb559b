"""The hot statements in our own SQL (core.agents.queries) read and write what the ORM's querysets did, on SQLite
and PostgreSQL: the same rows, counts, converted values and updated rows."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.agents import queries
from core.agents.context import with_memory_counts
from core.agents.versions import with_current_version
from core.models import Agent, Organization, Run, RunStatus
from core.runs.executor import run_submit
from core.runs.request import RunRequest
from memory.selectors import agent_blocks
from tests.factories import make_account, make_agent
from tools.selectors import agent_tools

pytestmark = pytest.mark.django_db


def _send(agent, text="hi"):
    inputs = [{"role": "user", "content": text}]
    # no provider is configured here: the run is claimed all the same, as an agent's own message is
    return run_submit(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=inputs, refuse_unconfigured=False)
    )


def test_an_agent_read_matches_the_annotated_queryset(account):
    agent = make_agent(account.org, secrets={"TOKEN": "s3cret"}, tool_rules=[{"type": "exit_loop", "tool_name": "x"}])
    expected = with_current_version(with_memory_counts(Agent.objects.filter(pk=agent.pk))).get()
    got = queries.agent_read(agent_id=agent.id, owner_id=account.org.pk, counts=True, version=True)
    for name in ("message_ids", "secrets", "tool_rules", "model_settings", "created_at", "updated_at", "name"):
        assert getattr(got, name) == getattr(expected, name), name
    assert (got.snapshot_max_seq, got.snapshot_archival) == (expected.snapshot_max_seq, expected.snapshot_archival)
    assert got.snapshot_max_seq is not None  # the system message
    assert got.current_version_id == expected.current_version_id
    assert got.secrets == {"TOKEN": "s3cret"}  # decrypted, as the field's converter does


def test_an_agent_read_is_scoped_to_its_owner(account):
    agent = make_agent(account.org)
    other = make_account("someone-else")
    assert queries.agent_read(agent_id=agent.id, owner_id=other.org.pk) is None
    assert queries.agent_read(agent_id="agent-missing") is None
    assert queries.agent_read(agent_id=agent.id, owner_id=account.org.pk).pk == agent.pk


def test_an_agent_read_says_whether_the_run_was_cancelled(account):
    agent = make_agent(account.org)
    run = _send(agent)
    assert queries.agent_read(agent_id=agent.id, cancelled_run_id=run.id).cancelled is False
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    assert queries.agent_read(agent_id=agent.id, cancelled_run_id=run.id).cancelled is True


def test_blocks_and_tools_come_in_the_selectors_order(account):
    agent = make_agent(account.org)
    assert [b.pk for b in queries.agent_blocks_read(agent_id=agent.id)] == [b.pk for b in agent_blocks(agent=agent)]
    assert [t.pk for t in queries.agent_tools_read(agent_id=agent.id)] == [t.pk for t in agent_tools(agent=agent)]
    assert queries.agent_tools_read(agent_id=agent.id)  # the base tools: the comparison compared something


def test_open_runs_are_the_active_and_waiting_ones(account):
    agent = make_agent(account.org)
    run = _send(agent)
    assert [r.pk for r in queries.agent_runs_open(agent_id=agent.id)] == [run.pk]
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    assert queries.agent_runs_open(agent_id=agent.id) == []
    Run.objects.filter(pk=run.pk).update(waiting_until=timezone.now() + timedelta(minutes=5))
    assert [r.pk for r in queries.agent_runs_open(agent_id=agent.id)] == [run.pk]
    assert queries.run_read(run_id=run.id).input_messages == run.input_messages


def test_row_update_prepares_values_through_their_fields(account):
    agent = make_agent(account.org)
    run = _send(agent)
    now = timezone.now()
    where = {"id": run.pk, "status": [RunStatus.CREATED, RunStatus.RUNNING]}
    usage = {"total_tokens": 3, "run_ids": [run.pk], "text": 'é "quoted"'}
    assert queries.row_update(Run, where=where, status=RunStatus.COMPLETED, usage=usage, completed_at=now) == 1
    run.refresh_from_db()
    assert (run.status, run.usage, run.completed_at) == (RunStatus.COMPLETED, usage, now)
    assert queries.row_update(Run, where=where, status=RunStatus.FAILED) == 0  # no longer active: not updated
    assert queries.row_update(Run, where={"id": []}, status=RunStatus.FAILED) == 0
    assert queries.row_update(Agent, where={"id": agent.id}, message_ids=["a", "b"]) == 1
    assert Agent.objects.get(pk=agent.pk).message_ids == ["a", "b"]


def test_an_owner_by_its_id_filters_and_loads_on_demand(account):
    owner = queries.organization_ref(org_id=account.org.pk)
    assert list(Agent.objects.filter(owner=owner)) == list(Agent.objects.filter(owner=account.org))
    assert owner.name == Organization.objects.get(pk=account.org.pk).name
