"""The official `openai` Python SDK against a live server's `/v1/chat/completions` (Letta's OpenAI-compatible route:
`model` is an agent id): a reply at once and streamed, the agent keeping the exchange, and errors in OpenAI's shape."""

import dataclasses

import openai
import pytest
from openai import OpenAI

from core.models import Message
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(daphne_server, account):
    return OpenAI(base_url=f"{daphne_server.url}/v1", api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="chat-agent")


def _history(agent) -> list[tuple[str, str]]:
    rows = Message.objects.filter(agent=agent).exclude(role="system").order_by("seq")
    return [(m.role, m.text) for m in rows]


def test_a_completion_is_the_agents_reply(client, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Ahoy from the agent"}, thinking="greet"))
    completion = client.chat.completions.create(
        model=agent.id,
        messages=[
            {"role": "system", "content": "ignored: the agent has its own"},
            {"role": "user", "content": "earlier, already known"},
            {"role": "assistant", "content": "old"},
            {"role": "user", "content": "Hello there"},
        ],
    )
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-run-")
    assert completion.model == "fake-model"
    choice = completion.choices[0]
    assert choice.message.role == "assistant" and choice.message.content == "Ahoy from the agent"
    assert choice.finish_reason == "stop"
    assert completion.usage.total_tokens > 0
    sent = fake_llm.chat_requests[-1]["messages"]
    assert sent[-1]["role"] == "user" and "Hello there" in str(sent[-1]["content"])
    assert "earlier, already known" not in str(sent)  # only the last user message is sent; the agent keeps the rest
    assert any(role == "user" and "Hello there" in text for role, text in _history(agent))


def test_a_streamed_completion(client, agent, fake_llm):
    fake_llm.stream_chunk_chars = 3
    # paced: chunks that arrive together go out merged (core.runs.emit)
    fake_llm.script(dataclasses.replace(FakeLLM.tool("send_message", {"message": "streamed in pieces"}), chunk_s=0.04))
    chunks = list(
        client.chat.completions.create(
            model=agent.id,
            messages=[{"role": "user", "content": [{"type": "text", "text": "Stream please"}]}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert {c.object for c in chunks} == {"chat.completion.chunk"} and len({c.id for c in chunks}) == 1
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) > 1 and "".join(texts) == "streamed in pieces"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0


def test_errors_come_in_openais_shape(client, agent, other_account):
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(
            model="agent-00000000-0000-0000-0000-000000000000", messages=[{"role": "user", "content": "hi"}]
        )
    assert missing.value.code == "model_not_found" and "not found" in missing.value.message
    foreign = make_agent(other_account.org, name="not yours")
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=foreign.id, messages=[{"role": "user", "content": "hi"}], stream=True)
    with pytest.raises(openai.BadRequestError) as not_agent:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert not_agent.value.param == "model" and "agent ID" in not_agent.value.message
    with pytest.raises(openai.BadRequestError) as no_user:
        client.chat.completions.create(model=agent.id, messages=[{"role": "system", "content": "hi"}])
    assert no_user.value.param == "messages"
    with pytest.raises(openai.UnprocessableEntityError) as invalid:
        client.chat.completions.create(model=agent.id, messages=[])
    assert invalid.value.type == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError) as unauthenticated:
        OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0).chat.completions.create(
            model=agent.id, messages=[{"role": "user", "content": "hi"}]
        )
    assert unauthenticated.value.code == "invalid_api_key"
