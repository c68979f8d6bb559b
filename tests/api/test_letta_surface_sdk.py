"""The official letta-client SDK (1.x) over real HTTP on the rest of Letta's surface: message search, list and
retrieve, passage search, tags, steps, compaction settings, summarize, recompile, a resumed background stream,
the model list, and a route this server does not serve."""

import httpx
import letta_client
import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agent(client, fake_llm):
    """An agent that heard about the harbour, with an archival memory and a tag."""
    agent = client.agents.create(
        name="sdk-surface",
        model="openai/fake-model",
        agent_type="memgpt_v2_agent",
        tags=["sea"],
        compaction_settings={"mode": "all"},
        memory_blocks=[{"label": "human", "value": "Name: Alice"}],
    )
    fake_llm.script(FakeLLM.tool("send_message", {"message": "The harbour sounds lovely"}))
    client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "We sailed from the harbour"}])
    client.agents.passages.create(agent.id, text="The lighthouse keeper waves at boats", tags=["sea"])
    return agent


def test_messages_search_list_and_retrieve(client, agent):
    found = client.messages.search(query="harbour", agent_id=agent.id, search_mode="fts")
    assert {r.message_type for r in found} >= {"user_message", "assistant_message"}
    user = next(r for r in found if r.message_type == "user_message")
    assert user.content == "We sailed from the harbour" and user.agent_id == agent.id
    assert client.messages.search(query="harbour", conversation_id="default")
    listed = list(client.messages.list(limit=100))
    assert {m.message_type for m in listed} >= {"system_message", "user_message", "assistant_message"}
    parts = client.messages.retrieve(user.message_id)
    assert [p.message_type for p in parts] == ["user_message"] and parts[0].content == user.content


def test_passages_search(client, agent):
    hits = client.passages.search(query="boats", agent_id=agent.id)
    assert [h.passage.text for h in hits] == ["The lighthouse keeper waves at boats"]
    assert client.passages.search(query="boats", tags=["sea"], tag_match_mode="all")


def test_tags_and_steps(client, agent):
    assert "sea" in client.tags.list()
    steps = list(client.steps.list(agent_id=agent.id))
    assert len(steps) == 1 and steps[0].status == "success" and steps[0].agent_id == agent.id
    one = client.steps.retrieve(steps[0].id)
    assert one.id == steps[0].id and one.prompt_tokens and one.run_id


def test_compaction_settings_summarize_and_recompile(client, agent, fake_llm):
    assert agent.compaction_settings.mode == "all" and agent.compaction_settings.model == "openai/fake-model"
    updated = client.agents.update(agent.id, compaction_settings={"mode": "sliding_window", "model": None})
    assert updated.compaction_settings.mode == "sliding_window"
    fake_llm.script(FakeLLM.text("We spoke of the harbour."))
    compacted = client.agents.messages.compact(agent.id, compaction_settings={"mode": "all"})
    assert compacted.summary == "We spoke of the harbour."
    assert compacted.num_messages_after == 2 < compacted.num_messages_before
    prompt = client.agents.recompile(agent.id, dry_run=True)
    assert "Name: Alice" in prompt


def test_a_background_stream_resumes_through_the_sdk(client, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "in the background"}))
    chunks = list(
        client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "hi"}], background=True)
    )
    run_id = chunks[0].run_id
    assert all(c.seq_id for c in chunks)
    resumed = list(client.runs.messages.stream(run_id, starting_after=chunks[0].seq_id))
    assert [c.seq_id for c in resumed] == [c.seq_id for c in chunks[1:]]
    assert resumed[-1].message_type == "usage_statistics"


def test_models_and_an_unsupported_route(client, agent):
    assert all("embedding" not in m.handle for m in client.models.list())
    with pytest.raises(letta_client.NotFoundError, match="is not supported by this server"):
        client.environments.list()


def test_health_answers_with_and_without_the_trailing_slash(client, live_server):
    """Letta's routers/v1/health.py: {version, status: ok} on /v1/health/, and on /v1/health with no redirect."""
    assert client.health().status == "ok"
    for path in ("/v1/health/", "/v1/health"):
        r = httpx.get(live_server.url + path, follow_redirects=False)
        assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["version"], (path, r.status_code)
