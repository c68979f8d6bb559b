"""The hot statements in our own SQL (core.agents.queries, and the selectors written so) read and write what they
say, on SQLite and PostgreSQL: the rows, counts, converted values and updated rows the ORM holds."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.agents import queries
from core.models import Agent, AgentVersion, Message, Organization, Run, RunStatus
from core.runs.executor import run_submit
from core.runs.request import RunRequest
from memory.models import AgentBlock, Passage
from memory.selectors import agent_blocks
from memory.services import passage_insert
from tests.factories import make_account, make_agent
from tools.models import Tool
from tools.selectors import agent_tools

pytestmark = pytest.mark.django_db


def _send(agent, text="hi"):
    inputs = [{"role": "user", "content": text}]
    # no provider is configured here: the run is claimed all the same, as an agent's own message is
    return run_submit(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=inputs, refuse_unconfigured=False)
    )


def test_an_agent_read_brings_its_row_counts_and_version(account):
    agent = make_agent(account.org, secrets={"TOKEN": "s3cret"}, tool_rules=[{"type": "exit_loop", "tool_name": "x"}])
    for text in ("one", "two"):
        passage_insert(agent=agent, text=text)
    expected = Agent.objects.get(pk=agent.pk)
    got = queries.agent_read(agent_id=agent.id, owner_id=account.org.pk, counts=True, version=True)
    for name in ("message_ids", "secrets", "tool_rules", "model_settings", "created_at", "updated_at", "name"):
        assert getattr(got, name) == getattr(expected, name), name
    max_seq = Message.objects.filter(agent_id=agent.id).order_by("-seq").values_list("seq", flat=True).first()
    assert max_seq is not None  # the system message
    assert (got.snapshot_max_seq, got.snapshot_archival) == (max_seq, Passage.objects.filter(agent=agent).count())
    assert got.snapshot_archival == 2
    latest = AgentVersion.objects.filter(agent=agent).order_by("-number").values_list("id", flat=True).first()
    assert latest is not None and got.current_version_id == latest
    assert got.secrets == {"TOKEN": "s3cret"}  # decrypted, as the field's converter does
    fresh = queries.agent_read(agent_id=make_agent(account.org, name="fresh").id, counts=True)
    assert fresh.snapshot_archival == 0


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


def test_an_agents_blocks_come_in_display_order_and_its_tools_by_name(account):
    agent = make_agent(account.org, name="a")
    make_agent(account.org, name="b")  # another agent's blocks and tools are not read for `agent`
    links = AgentBlock.objects.filter(agent=agent).order_by("position", "id").values_list("block_id", flat=True)
    assert len(links) >= 2
    assert [b.pk for b in agent_blocks(agent=agent)] == list(links)
    names = sorted(Tool.objects.filter(agents=agent).values_list("name", flat=True))
    assert names  # the base tools: the comparison compares something
    assert [t.name for t in agent_tools(agent=agent)] == names


def test_open_runs_are_the_threads_active_and_waiting_ones(account):
    agent = make_agent(account.org)
    run = _send(agent)  # in the agent's own thread
    assert [r.pk for r in queries.thread_runs_open(agent_id=agent.id, conversation_id=None)] == [run.pk]
    assert queries.thread_runs_open(agent_id=agent.id, conversation_id="conv-other") == []  # another thread's
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    assert queries.thread_runs_open(agent_id=agent.id, conversation_id=None) == []
    Run.objects.filter(pk=run.pk).update(waiting_until=timezone.now() + timedelta(minutes=5))
    assert [r.pk for r in queries.thread_runs_open(agent_id=agent.id, conversation_id=None)] == [run.pk]
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
