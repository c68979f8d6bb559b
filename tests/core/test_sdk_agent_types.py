"""letta-client 1.x against the live server: agent types (letta_v1_agent by default) and otid round trips."""

import dataclasses
import uuid

import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def _agent(client, **kw):
    return client.agents.create(
        name="typed",
        model="openai/fake-model",
        context_window_limit=16000,
        memory_blocks=[{"label": "human", "value": "Name: Alice"}],
        **kw,
    )


def test_default_agent_is_letta_v1_and_answers_with_the_assistant_message_alone(client, fake_llm):
    agent = _agent(client)
    assert agent.agent_type == "letta_v1_agent" and "send_message" not in {t.name for t in agent.tools}
    fake_llm.script(FakeLLM.text("Hello Alice"))
    otid = str(uuid.uuid4())
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi", "otid": otid}])
    assert [m.message_type for m in response.messages] == ["assistant_message"]
    assert response.messages[0].content == "Hello Alice" and response.messages[0].otid
    assert response.stop_reason.stop_reason == "end_turn"
    sent = fake_llm.chat_requests[0]
    assert sent["tool_choice"] == "auto"
    assert all("request_heartbeat" not in t["function"]["parameters"]["properties"] for t in sent["tools"])
    history = list(client.agents.messages.list(agent.id, order="asc"))
    [user] = [m for m in history if m.message_type == "user_message"]
    assert user.otid == otid and user.content == "hi"
    assert all(m.otid for m in history if m.message_type != "system_message")


def test_memgpt_v2_agent_hides_send_messages_return(client, fake_llm):
    agent = _agent(client, agent_type="memgpt_v2_agent")
    assert agent.agent_type == "memgpt_v2_agent" and "send_message" in {t.name for t in agent.tools}
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi Alice"}, thinking="greet"))
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
    assert [m.message_type for m in response.messages] == ["reasoning_message", "assistant_message"]
    reasoning, answer = response.messages
    assert reasoning.id == answer.id and reasoning.otid != answer.otid  # one stored message, one otid per part
    listed = [m.message_type for m in client.agents.messages.list(agent.id, order="asc")]
    assert "tool_return_message" not in listed and listed[-1] == "assistant_message"


def test_memgpt_v2_agent_on_a_non_reasoning_model_reasons_only_when_asked(client, fake_llm):
    """Letta's LLMConfig defaults put_inner_thoughts_in_kwargs to False for every model; `reasoning=True` turns the
    `thinking` argument on for the MemGPT types (apply_reasoning_setting_to_config)."""
    agent = client.agents.create(name="plain", model="openai/gpt-4o-mini", agent_type="memgpt_v2_agent")
    assert agent.llm_config.put_inner_thoughts_in_kwargs is False
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi Alice"}))
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
    assert [m.message_type for m in response.messages] == ["assistant_message"]
    assert all("thinking" not in t["function"]["parameters"]["properties"] for t in fake_llm.chat_requests[0]["tools"])
    agent = client.agents.update(agent.id, reasoning=True)
    assert agent.llm_config.put_inner_thoughts_in_kwargs is True
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi again"}, thinking="greet"))
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
    assert [m.message_type for m in response.messages] == ["reasoning_message", "assistant_message"]
    assert response.messages[0].source == "non_reasoner_model"
    assert all("thinking" in t["function"]["parameters"]["properties"] for t in fake_llm.chat_requests[1]["tools"])


def test_letta_v1_tool_then_text_and_token_stream(client, fake_llm):
    agent = _agent(client)
    fake_llm.script(FakeLLM.tool("conversation_search", {"query": "tea"}), FakeLLM.text("No tea talk yet."))
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "tea?"}])
    assert [m.message_type for m in response.messages] == [
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    assert response.usage.step_count == 2 and response.messages[1].status == "success"
    fake_llm.script(dataclasses.replace(FakeLLM.text("streamed in pieces"), chunk_s=0.04))  # paced: else sent merged
    chunks = list(
        client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "again"}], stream_tokens=True)
    )
    pieces = [c for c in chunks if c.message_type == "assistant_message"]
    assert len(pieces) > 1 and "".join(c.content for c in pieces) == "streamed in pieces"
    assert len({c.otid for c in pieces}) == 1 and len({c.id for c in pieces}) == 1
