"""The official letta-client SDK (1.x) driving our server over real HTTP, with the fake LLM behind it."""

import dataclasses

import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agent(client):
    return client.agents.create(
        name="sdk-agent",
        model="openai/fake-model",
        context_window_limit=16000,
        tags=["sdk"],
        agent_type="memgpt_v2_agent",
        memory_blocks=[{"label": "human", "value": "Name: Alice"}, {"label": "persona", "value": "Helpful."}],
    )


def test_agents_crud(client, agent):
    assert agent.id.startswith("agent-") and agent.name == "sdk-agent"
    assert {b.label for b in agent.memory.blocks} == {"human", "persona"}
    assert "send_message" in {t.name for t in agent.tools}
    got = client.agents.retrieve(agent.id)
    assert got.id == agent.id and got.message_ids and len(got.message_ids) == 1
    updated = client.agents.update(agent.id, name="renamed", tags=["sdk", "x"])
    assert updated.name == "renamed" and set(updated.tags) == {"sdk", "x"}
    listed = [a.id for a in client.agents.list(tags=["x"])]
    assert listed == [agent.id]
    client.agents.delete(agent.id)
    assert [a.id for a in client.agents.list()] == []


def test_messages_create_list_reset(client, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi from the fake"}, thinking="be nice"))
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hello"}])
    assert response.stop_reason.stop_reason == "end_turn"
    types = [m.message_type for m in response.messages]
    assert types[:2] == ["reasoning_message", "assistant_message"]
    assert response.messages[1].content == "Hi from the fake"
    assert response.usage.step_count == 1
    history = list(client.agents.messages.list(agent.id, order="asc", limit=100))
    assert [m.message_type for m in history][:2] == ["system_message", "user_message"]
    assert any(getattr(m, "content", None) == "Hi from the fake" for m in history)
    client.agents.messages.reset(agent.id)
    assert len(client.agents.retrieve(agent.id).message_ids) == 1


def test_messages_stream_and_streaming_flag(client, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "streamed reply"}))
    chunks = list(client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "hi"}]))
    types = [c.message_type for c in chunks]
    assert "assistant_message" in types and types[-2:] == ["stop_reason", "usage_statistics"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "again"}))
    chunks = list(client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}], streaming=True))
    assert [c.content for c in chunks if c.message_type == "assistant_message"] == ["again"]


def test_blocks_by_label(client, agent):
    block = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert block.value == "Name: Alice"
    updated = client.agents.blocks.update("human", agent_id=agent.id, value="Name: Bob")
    assert updated.value == "Name: Bob"
    assert client.agents.blocks.retrieve("human", agent_id=agent.id).value == "Name: Bob"
    # Auto-paging one block per page walks every block exactly once.
    labels = [b.label for b in client.agents.blocks.list(agent_id=agent.id, limit=1)]
    assert sorted(labels) == sorted(set(labels)) and "human" in labels and len(labels) >= 2


def test_tools_list_attach_detach(client, agent):
    # Auto-paging (3 per page) walks every attached tool exactly once.
    tools = list(client.agents.tools.list(agent.id, limit=3))
    assert len(tools) == len({t.id for t in tools}) >= 8
    search = next(t for t in tools if t.name == "conversation_search")
    client.agents.tools.detach(search.id, agent_id=agent.id)
    assert "conversation_search" not in {t.name for t in client.agents.tools.list(agent.id)}
    client.agents.tools.attach(search.id, agent_id=agent.id)
    assert "conversation_search" in {t.name for t in client.agents.tools.list(agent.id)}
    assert any(t.name == "send_message" for t in client.tools.list().items)


def test_passages(client, agent):
    client.agents.passages.create(agent.id, text="The launch code is 1234.")
    listed = list(client.agents.passages.list(agent.id))
    assert any("1234" in p.text for p in listed)


def test_context_over_raw_http(client, agent):
    import httpx

    ctx = client.get(f"/v1/agents/{agent.id}/context", cast_to=httpx.Response).json()
    assert ctx["context_window_size_max"] == 16000 and ctx["num_messages"] == 1
    assert ctx["num_tokens_core_memory"] > 0 and "Name: Alice" in ctx["core_memory"]


def test_messages_stream_with_stream_tokens_iterates_chunks(client, agent, fake_llm):
    fake_llm.stream_chunk_chars = 3
    # paced: chunks that arrive together go out merged (core.runs.emit)
    fake_llm.script(
        dataclasses.replace(FakeLLM.tool("send_message", {"message": "token by token"}, thinking="plan"), chunk_s=0.04)
    )
    chunks = list(
        client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "hi"}], stream_tokens=True)
    )
    answer = [c for c in chunks if c.message_type == "assistant_message"]
    assert len(answer) > 1 and "".join(c.content for c in answer) == "token by token"
    assert len({c.id for c in answer}) == 1
    assert "".join(c.reasoning for c in chunks if c.message_type == "reasoning_message") == "plan"
    assert [c.message_type for c in chunks][-2:] == ["stop_reason", "usage_statistics"]
