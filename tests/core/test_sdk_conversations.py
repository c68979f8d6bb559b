"""letta-client (1.x) driving conversations over real HTTP, as Letta Code does: create one, send into it (streamed,
the SDK's only mode here) and into the agent's default thread, list, retrieve, page messages, fork, delete."""

import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agent(client):
    return client.agents.create(name="sdk-threads", model="openai/fake-model", agent_type="memgpt_v2_agent")


def _streamed(stream) -> list:
    return list(stream)


def test_conversations_through_the_sdk(client, agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "Thread reply."}),
        FakeLLM.tool("send_message", {"message": "Default reply."}),
    )
    conversation = client.conversations.create(agent_id=agent.id, extra_body={"isolated_block_labels": []})
    assert conversation.id.startswith("conv-") and conversation.agent_id == agent.id
    chunks = _streamed(
        client.conversations.messages.create(
            conversation.id, messages=[{"role": "user", "content": "hello thread"}], stream_tokens=False
        )
    )
    replies = [c for c in chunks if getattr(c, "message_type", "") == "assistant_message"]
    assert replies and replies[0].content == "Thread reply."
    assert any(getattr(c, "message_type", "") == "stop_reason" for c in chunks)
    chunks = _streamed(
        client.conversations.messages.create(
            "default", agent_id=agent.id, messages=[{"role": "user", "content": "hello agent"}]
        )
    )
    assert any(getattr(c, "content", None) == "Default reply." for c in chunks)

    got = client.conversations.retrieve(conversation.id)
    assert len(got.in_context_message_ids) > 1
    assert [c.id for c in client.conversations.list(agent_id=agent.id)] == [conversation.id]
    listed = client.conversations.messages.list(conversation.id)
    texts = [getattr(m, "content", None) for m in listed]
    assert "hello thread" in texts and "hello agent" not in texts
    default = client.conversations.messages.list("default", agent_id=agent.id)
    assert "hello agent" in [getattr(m, "content", None) for m in default]

    fork = client.conversations.fork(conversation.id)
    assert fork.id != conversation.id and fork.agent_id == agent.id
    client.conversations.update(conversation.id, summary="named")
    assert client.conversations.retrieve(conversation.id).summary == "named"
    client.conversations.delete(fork.id)
    assert [c.id for c in client.conversations.list(agent_id=agent.id)] == [conversation.id]
