"""letta-client (1.x) over real HTTP against the message-fidelity points of issue 38, with the fake LLM behind it."""

import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM
from tests.helpers import until

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


def test_async_run_messages_as_letta_test_greeting_reads_them(client, fake_llm):
    # Letta's tests/integration_test_send_message_v2.py test_greeting, send_type "async": the run's messages without
    # its user_message are what a synchronous send answers.
    agent = _v1_agent(client)
    fake_llm.script(FakeLLM.reasoning("think", content="Teamwork makes the dream work."))
    run = client.agents.messages.create_async(agent.id, messages=[{"role": "user", "content": "hi"}])
    until(lambda: client.runs.retrieve(run.id).status == "completed", what="the async run")
    listed = list(client.runs.messages.list(run.id))
    assert [m.message_type for m in listed] == ["user_message", "reasoning_message", "assistant_message"]
    assert listed[0].content == "hi" and listed[2].content == "Teamwork makes the dream work."
    assert listed[1].otid[-1] == "0" and listed[2].otid[-1] == "1"  # one stored reply, its parts 0 and 1
    fake_llm.script(FakeLLM.reasoning("think", content="Again."))
    reply = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
    assert [m.message_type for m in reply.messages] == [m.message_type for m in listed[1:]]
