"""letta-client (1.x) over real HTTP against the message-fidelity points of issue 38, with the fake LLM behind it."""

import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def _v1_agent(client, **kw):
    return client.agents.create(name="fidelity", model="openai/fake-model", context_window_limit=16000, **kw)


def test_v1_agent_without_model_reasoning_has_no_reasoning_message(client, fake_llm):
    agent = _v1_agent(client)
    assert agent.agent_type == "letta_v1_agent"
    replies = (FakeLLM.tool("conversation_search", {"query": "tea"}, thinking="made up"), FakeLLM.text("None."))
    expected = ["tool_call_message", "tool_return_message", "assistant_message"]
    fake_llm.script(*replies)
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "find tea"}])
    assert [m.message_type for m in response.messages] == expected
    fake_llm.script(*replies)
    chunks = list(client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "again"}]))
    assert [c.message_type for c in chunks if c.message_type != "ping"] == [
        *expected,
        "stop_reason",
        "usage_statistics",
    ]
    history = [m.message_type for m in client.agents.messages.list(agent.id, order="asc")]
    assert "reasoning_message" not in history and history.count("assistant_message") == 2


def test_initial_sequence(client, fake_llm):
    # Letta's tests/test_client.py test_initial_sequence, listing oldest first (a desc page here is newest first).
    agent = _v1_agent(
        client,
        initial_message_sequence=[
            {"role": "assistant", "content": "Hello, how are you?"},
            {"role": "user", "content": "I'm good, and you?"},
        ],
    )
    messages = list(client.agents.messages.list(agent.id, order="asc"))
    client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hello assistant!"}])
    assert [m.message_type for m in messages] == ["system_message", "assistant_message", "user_message"]
    assert [m.content for m in messages[1:]] == ["Hello, how are you?", "I'm good, and you?"]
    assert client.agents.retrieve(agent.id).message_ids[:3] == [m.id for m in messages]
