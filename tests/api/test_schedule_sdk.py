"""Scheduled messages (Letta's `/v1/agents/{agent_id}/schedule`, the SDK's `agents.schedule`) through the official
letta-client SDK over real HTTP: create one-time and recurring, list with pages, retrieve, delete; a past time or a
bad cron expression is a 400 saying why; another account's agent and schedule are 404s; a due message is sent
through the run queue and its run is in the agent's history."""

import time
from datetime import UTC, datetime

import letta_client
import pytest
from letta_client import Letta

from core.models import Run
from core.runs import executor
from core.runs.schedules import scheduled_messages_dispatch
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agent(client):
    return client.agents.create(name="scheduled", model="openai/fake-model", agent_type="memgpt_v2_agent")


def _in_an_hour_ms() -> int:
    return int(time.time() * 1000) + 3_600_000


def test_create_list_retrieve_and_delete(client, agent):
    at = _in_an_hour_ms()
    once = client.agents.schedule.create(
        agent.id,
        schedule={"type": "one-time", "scheduled_at": at},
        messages=[{"role": "user", "content": "Generate your daily summary report"}],
        max_steps=3,
    )
    expected = datetime.fromtimestamp(at / 1000, tz=UTC)
    assert once.id.startswith("scheduled_message-")
    assert datetime.fromisoformat(once.next_scheduled_at.replace("Z", "+00:00")) == expected
    daily = client.agents.schedule.create(
        agent.id,
        schedule={"type": "recurring", "cron_expression": "0 9 * * *"},
        messages=[{"role": "user", "content": [{"type": "text", "text": "Good morning! Review overnight alerts."}]}],
        include_return_message_types=["assistant_message"],
    )
    nine = datetime.fromisoformat(daily.next_scheduled_at.replace("Z", "+00:00"))
    assert (nine.hour, nine.minute) == (9, 0) and nine > datetime.now(UTC)

    listed = client.agents.schedule.list(agent.id)
    assert not listed.has_next_page and [s.id for s in listed.scheduled_messages] == [once.id, daily.id]
    first = listed.scheduled_messages[0]
    assert first.agent_id == agent.id and first.schedule.scheduled_at == at and first.schedule.type == "one-time"
    assert first.message.messages[0].content == "Generate your daily summary report" and first.message.max_steps == 3
    page = client.agents.schedule.list(agent.id, limit="1")
    assert page.has_next_page and [s.id for s in page.scheduled_messages] == [once.id]
    rest = client.agents.schedule.list(agent.id, after=once.id, limit="1")
    assert not rest.has_next_page and [s.id for s in rest.scheduled_messages] == [daily.id]

    got = client.agents.schedule.retrieve(daily.id, agent_id=agent.id)
    assert got.schedule.type == "recurring" and got.schedule.cron_expression == "0 9 * * *"
    assert got.message.include_return_message_types == ["assistant_message"]
    assert got.next_scheduled_time == daily.next_scheduled_at

    assert client.agents.schedule.delete(once.id, agent_id=agent.id).success is True
    assert [s.id for s in client.agents.schedule.list(agent.id).scheduled_messages] == [daily.id]
    with pytest.raises(letta_client.NotFoundError):
        client.agents.schedule.retrieve(once.id, agent_id=agent.id)
    with pytest.raises(letta_client.NotFoundError):
        client.agents.schedule.delete(once.id, agent_id=agent.id)


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ({"type": "one-time", "scheduled_at": 1704110400000}, "must be in the future"),
        ({"type": "recurring", "cron_expression": "0 25 * * *"}, "hour: 25 is outside 0-23"),
        ({"type": "recurring", "cron_expression": "0 0 30 2 *"}, "never fires"),
    ],
)
def test_bad_schedules_are_400s_saying_why(client, agent, schedule, says):
    with pytest.raises(letta_client.BadRequestError, match=says):
        client.agents.schedule.create(agent.id, schedule=schedule, messages=[{"role": "user", "content": "hi"}])
    assert client.agents.schedule.list(agent.id).scheduled_messages == []


def test_another_accounts_agent_and_schedules_are_not_found(client, agent, other_account, live_server):
    mine = client.agents.schedule.create(
        agent.id, schedule={"scheduled_at": _in_an_hour_ms()}, messages=[{"role": "user", "content": "mine"}]
    )
    theirs = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0, timeout=60)
    their_agent = make_agent(other_account.org)
    for call in (
        lambda: theirs.agents.schedule.list(agent.id),
        lambda: theirs.agents.schedule.retrieve(mine.id, agent_id=agent.id),
        lambda: theirs.agents.schedule.delete(mine.id, agent_id=agent.id),
        lambda: theirs.agents.schedule.create(
            agent.id, schedule={"scheduled_at": _in_an_hour_ms()}, messages=[{"role": "user", "content": "x"}]
        ),
        # their own agent's path does not reach my schedule either
        lambda: theirs.agents.schedule.retrieve(mine.id, agent_id=their_agent.id),
        lambda: theirs.agents.schedule.delete(mine.id, agent_id=their_agent.id),
    ):
        with pytest.raises(letta_client.NotFoundError):
            call()
    assert [s.id for s in client.agents.schedule.list(agent.id).scheduled_messages] == [mine.id]


def test_a_due_message_runs_and_is_in_the_history(client, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Summary: all quiet."}))
    made = client.agents.schedule.create(
        agent.id, schedule={"scheduled_at": _in_an_hour_ms()}, messages=[{"role": "user", "content": "Summarize"}]
    )
    [run_id] = scheduled_messages_dispatch(now=datetime.fromtimestamp(time.time() + 7200, tz=UTC))
    executor.run_wait(run=Run.objects.get(pk=run_id))
    run = client.runs.retrieve(run_id)
    assert run.status == "completed" and run.agent_id == agent.id and run.background
    texts = [(m.message_type, getattr(m, "content", None)) for m in client.agents.messages.list(agent.id)]
    assert ("user_message", "Summarize") in texts and ("assistant_message", "Summary: all quiet.") in texts
    with pytest.raises(letta_client.NotFoundError):  # a one-time message is removed once sent
        client.agents.schedule.retrieve(made.id, agent_id=agent.id)
