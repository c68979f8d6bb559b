"""Sleep-time companions: every N turns the companion runs in the background through the run executor, edits a
shared block (attributed to it in block history), the primary sees the edit in its next compiled context, and
the primary's turns never wait for it. Also the API's configuration, manual trigger and errors."""

import threading

import pytest

from core.models import Agent, Message, Run, SleeptimeCompanion
from core.runs import queue
from memory.models import BlockHistory
from memory.selectors import agent_block_by_label
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

SLEEPY = "openai/sleepy-model"


@pytest.fixture(autouse=True)
def _queue_stopped_after(transactional_db):
    yield
    queue.shutdown()


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _say(api, agent, text):
    resp = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}]})
    assert resp.status_code == 200, resp.content
    return resp.json()


def _enable(api, agent, frequency):
    resp = api.patch(f"/v1/agents/{agent.id}/sleeptime", {"enabled": True, "frequency": frequency})
    assert resp.status_code == 200, resp.content
    link = resp.json()
    # The companion answers on its own model name, so the fake LLM can hold and script it apart.
    assert api.patch(f"/v1/agents/{link['companion_id']}", {"model": SLEEPY}).status_code == 200
    return link


def _gate(fake_llm, gate: threading.Event):
    """Hold the companion's model calls until `gate` is set (the primary's are answered at once)."""
    original = fake_llm._next_reply

    def held(req):
        if req.get("model") == "sleepy-model":
            gate.wait(120)
        return original(req)

    fake_llm._next_reply = held


def test_enable_creates_a_companion_sharing_the_primarys_blocks(api, agent):
    link = _enable(api, agent, 3)
    companion = Agent.objects.get(id=link["companion_id"])
    assert companion.agent_type == "sleeptime_agent" and link["frequency"] == 3 and link["enabled"] is True
    primary_blocks = set(agent_blocks_ids(agent))
    assert primary_blocks and primary_blocks == set(agent_blocks_ids(companion))
    tools = {t["name"] for t in api.get(f"/v1/agents/{companion.id}/tools").json()}
    assert {"memory_replace", "memory_insert"} <= tools and "send_message" not in tools
    assert api.get(f"/v1/agents/{agent.id}/sleeptime").json()["companion_id"] == companion.id
    # Enabling again keeps the same companion and changes only the frequency.
    again = api.patch(f"/v1/agents/{agent.id}/sleeptime", {"frequency": 7}).json()
    assert again["companion_id"] == companion.id and again["frequency"] == 7
    assert SleeptimeCompanion.objects.count() == 1


def agent_blocks_ids(agent):
    from memory.selectors import agent_blocks

    return [b.id for b in agent_blocks(agent=agent)]


def test_after_n_turns_the_companion_edits_memory_in_the_background(api, agent, fake_llm):
    link = _enable(api, agent, 2)
    gate = threading.Event()
    _gate(fake_llm, gate)
    fake_llm.by_model["sleepy-model"] = FakeLLM.tool(
        "core_memory_append", {"label": "human", "content": "Drinks green tea."}, heartbeat=False
    )
    _say(api, agent, "turn one: I love green tea")
    assert not Run.objects.filter(agent_id=link["companion_id"]).exists()
    _say(api, agent, "turn two")
    companion_run = until(
        lambda: Run.objects.filter(agent_id=link["companion_id"]).first(), what="the companion's run to be queued"
    )
    # The companion is held at its model call; the primary's next turn completes meanwhile.
    until(lambda: Run.objects.get(pk=companion_run.pk).status == "running", what="the companion to start")
    _say(api, agent, "turn three")
    assert Run.objects.get(pk=companion_run.pk).status == "running" and not gate.is_set()
    gate.set()
    until(lambda: Run.objects.get(pk=companion_run.pk).status == "completed", what="the companion's run to end")
    human = agent_block_by_label(agent=agent, label="human")
    assert "Drinks green tea." in human.value
    edit = BlockHistory.objects.filter(block=human).order_by("-version").first()
    assert edit.agent_id == link["companion_id"] and "Drinks green tea." in edit.new_value
    # The companion was given the transcript since its last run (none before).
    given = Message.objects.filter(agent_id=link["companion_id"], role="user").first().text
    assert "turn one: I love green tea" in given and "turn two" in given
    # The primary's next compiled context carries the companion's edit.
    _say(api, agent, "turn four")
    primary_requests = [r for r in fake_llm.chat_requests if r["model"] == "fake-model"]
    assert "Drinks green tea." in primary_requests[-1]["messages"][0]["content"]
    assert "Drinks green tea." in str(api.get(f"/v1/agents/{agent.id}/context").json())
    # Turns three and four make the next two: a second background run, given only what came after the first.
    until(lambda: Run.objects.filter(agent_id=link["companion_id"]).count() == 2, what="the second companion run")
    # Its input is written when it starts executing.
    until(
        lambda: Message.objects.filter(agent_id=link["companion_id"], role="user").count() == 2,
        what="the second companion run's input",
    )
    second = Message.objects.filter(agent_id=link["companion_id"], role="user").order_by("seq").last().text
    assert "turn four" in second and "turn one" not in second


def test_manual_trigger_runs_on_what_is_new_and_refuses_when_nothing_is(api, agent, fake_llm):
    link = _enable(api, agent, 100)
    fake_llm.by_model["sleepy-model"] = FakeLLM.tool(
        "memory_insert", {"label": "human", "new_string": "Has a cat."}, heartbeat=False
    )
    _say(api, agent, "my cat is called Miso")
    resp = api.post(f"/v1/agents/{agent.id}/sleeptime/run")
    assert resp.status_code == 202, resp.content
    run_id = resp.json()["run_id"]
    until(lambda: Run.objects.get(pk=run_id).status == "completed", what="the manual companion run")
    assert "Has a cat." in agent_block_by_label(agent=agent, label="human").value
    nothing = api.post(f"/v1/agents/{agent.id}/sleeptime/run")
    assert nothing.status_code == 422 and "nothing new" in nothing.json()["detail"]
    assert Run.objects.filter(agent_id=link["companion_id"]).count() == 1


def test_disabled_companion_does_not_run_and_bad_settings_are_refused(api, agent, fake_llm):
    link = _enable(api, agent, 1)
    assert api.patch(f"/v1/agents/{agent.id}/sleeptime", {"enabled": False}).json()["enabled"] is False
    _say(api, agent, "hello")
    _say(api, agent, "again")
    assert not Run.objects.filter(agent_id=link["companion_id"]).exists()
    for body in ({"frequency": 0}, {"frequency": "often"}, {"frequency": 10_000}):
        assert api.patch(f"/v1/agents/{agent.id}/sleeptime", body).status_code == 422
    assert SleeptimeCompanion.objects.get(agent=agent).frequency == 1
    assert api.patch(f"/v1/agents/{link['companion_id']}/sleeptime", {"enabled": True}).status_code == 422
    other = make_agent(agent.owner, name="solo")
    assert api.post(f"/v1/agents/{other.id}/sleeptime/run").status_code == 404
    assert api.get(f"/v1/agents/{other.id}/sleeptime").json()["enabled"] is False
    assert api.patch("/v1/agents/agent-nope/sleeptime", {"enabled": True}).status_code == 404


def test_sdk_enable_sleeptime_on_create_and_update(account, fake_llm):
    import httpx
    import letta_client
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        http = httpx.Client(transport=httpx.WSGITransport(app=get_wsgi_application()), base_url="http://testserver")
        client = letta_client.Letta(api_key=account.token, base_url="http://testserver", http_client=http)
        created = client.agents.create(name="with-companion", model="openai/fake-model", enable_sleeptime=True)
        link = SleeptimeCompanion.objects.get(agent_id=created.id)
        assert link.enabled and Agent.objects.get(id=link.companion_id).agent_type == "sleeptime_agent"
        client.agents.update(created.id, enable_sleeptime=False)
        assert SleeptimeCompanion.objects.get(agent_id=created.id).enabled is False
        plain = client.agents.create(name="plain", model="openai/fake-model")
        client.agents.update(plain.id, enable_sleeptime=False)  # nothing to turn off: no companion is made
        assert not SleeptimeCompanion.objects.filter(agent_id=plain.id).exists()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_a_companion_enabled_between_sends_counts_the_next_turn_sync_or_queued(api, agent, fake_llm):
    """Whether an agent has a companion is read with the agent when its run begins, not asked again at its end: one
    enabled between two sends counts the very next turn, whether that run executes on the request's thread or is
    queued to the pool."""
    _say(api, agent, "before any companion")
    link = _enable(api, agent, 1)
    _say(api, agent, "the first turn it sees")
    until(lambda: Run.objects.filter(agent_id=link["companion_id"]).exists(), what="the companion's run")
    assert api.patch(f"/v1/agents/{agent.id}/sleeptime", {"frequency": 100}).status_code == 200
    resp = api.post(f"/v1/agents/{agent.id}/messages/async", {"messages": [{"role": "user", "content": "queued"}]})
    assert resp.status_code == 200, resp.content
    until(lambda: SleeptimeCompanion.objects.get(agent=agent).turns_since == 1, what="the queued turn counted")
