"""The Anthropic path for real: litellm's anthropic provider against a fake Messages API server (tests/fake_anthropic.py),
through the engine, the runner and the API, for both agent types — tool use, streaming, and extended thinking whose
signed blocks must travel back unchanged (the fake, like the real API, refuses them otherwise)."""

import json

import pytest

from core.engine.types import Message, Role
from core.llm import client as llm
from core.models import Message as MessageRow
from core.runs.runner import run_agent
from memory.selectors import agent_block_by_label
from tests.factories import make_agent
from tests.fake_anthropic import FakeAnthropic, sign

MODEL = "anthropic/claude-sonnet-4-5"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]


@pytest.fixture
def fake_anthropic(monkeypatch):
    fake = FakeAnthropic().start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-anthropic-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    try:
        yield fake
    finally:
        fake.stop()


def _request(**extra):
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "tool_choice": "auto",
        **extra,
    }


def _frames(response) -> list[dict]:
    raw = b"".join(response).decode()
    assert raw.endswith("data: [DONE]\n\n")
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


# --------------------------------------------------------------------------- litellm against the fake


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_and_signed_thinking_come_back_normalised(fake_anthropic, stream):
    fake_anthropic.script(
        FakeAnthropic.reply(thinking="The user wants tea facts.", text="Looking.", tool=("lookup", {"q": "tea"}))
    )
    deltas = []
    result = llm.complete(
        _request(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=4096),
        api_base=fake_anthropic.base_url,
        api_key="k",
        stream=stream,
        on_delta=deltas.append,
    )
    assert result.content == "Looking." and result.reasoning == "The user wants tea facts."
    [call] = result.tool_calls
    assert call.name == "lookup" and json.loads(call.arguments) == {"q": "tea"} and call.id.startswith("toolu_")
    assert result.thinking_blocks == (
        {"type": "thinking", "thinking": "The user wants tea facts.", "signature": sign("The user wants tea facts.")},
    )
    assert result.finish_reason == "tool_calls" and result.usage.prompt_tokens > 0
    sent = fake_anthropic.message_requests[0]
    assert sent["system"][0]["text"] == "Be brief." and sent["tools"][0]["input_schema"]["required"] == ["q"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024} and bool(sent.get("stream")) is stream
    if stream:
        assert "".join(d.text for d in deltas if d.kind == "reasoning") == "The user wants tea facts."
        fragments = [d.text for d in deltas if d.kind == "tool_call"]
        assert len(fragments) > 1 and json.loads("".join(fragments)) == {"q": "tea"}


def test_a_streams_usage_matches_the_whole_calls(fake_anthropic):
    """Anthropic reports the prompt's tokens when the message starts and the reply's when it ends; the stream's usage
    counts both and equals the whole call's."""
    reply = FakeAnthropic.reply(thinking="The user wants tea facts.", text="Looking.", tool=("lookup", {"q": "tea"}))
    fake_anthropic.script(reply, reply)
    request = _request(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=4096)
    streamed = llm.complete(request, api_base=fake_anthropic.base_url, api_key="k", stream=True)
    whole = llm.complete(request, api_base=fake_anthropic.base_url, api_key="k")
    assert streamed.usage == whole.usage
    assert streamed.usage.prompt_tokens > 1 and streamed.usage.completion_tokens > 1 and streamed.usage.reasoning_tokens


def test_a_thinking_block_sent_back_altered_is_refused(fake_anthropic):
    fake_anthropic.script(FakeAnthropic.reply(thinking="plan", tool=("lookup", {"q": "x"})))
    thinking = {"type": "enabled", "budget_tokens": 1024}
    first = llm.complete(_request(thinking=thinking, max_tokens=4096), api_base=fake_anthropic.base_url, api_key="k")
    reply = Message(
        id="m", role=Role.ASSISTANT, content="", tool_calls=first.tool_calls, thinking_blocks=first.thinking_blocks
    )
    result_msg = {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "found"}
    history = _request()["messages"]
    good = llm.complete(
        _request(
            thinking=thinking, max_tokens=4096, messages=history + [reply.to_openai(thinking_blocks=True), result_msg]
        ),
        api_base=fake_anthropic.base_url,
        api_key="k",
    )
    assert good.content == "ok"
    assert fake_anthropic.message_requests[1]["messages"][1]["content"][0] == first.thinking_blocks[0]
    tampered = dict(reply.to_openai(thinking_blocks=True))
    tampered["thinking_blocks"] = [{**first.thinking_blocks[0], "thinking": "edited plan"}]
    with pytest.raises(llm.LLMError) as bad:
        llm.complete(
            _request(thinking=thinking, max_tokens=4096, messages=history + [tampered, result_msg]),
            api_base=fake_anthropic.base_url,
            api_key="k",
        )
    assert bad.value.kind == "bad_request" and "signature" in bad.value.message
    with pytest.raises(llm.LLMError) as missing:  # thinking on, but the blocks were not sent back at all
        llm.complete(
            _request(thinking=thinking, max_tokens=4096, messages=history + [reply.to_openai(), result_msg]),
            api_base=fake_anthropic.base_url,
            api_key="k",
        )
    assert "thinking" in missing.value.message


# --------------------------------------------------------------------------- the whole loop


@pytest.mark.django_db(transaction=True)
def test_letta_v1_agent_with_extended_thinking_streams_and_sends_signed_blocks_back(api, account, fake_anthropic):
    agent = make_agent(
        account.org,
        model=MODEL,
        agent_type="letta_v1_agent",
        model_settings={"native_reasoning": True, "max_reasoning_tokens": 2048},
    )
    fake_anthropic.script(
        FakeAnthropic.reply(
            thinking="She likes tea; save it.",
            tool=("memory_insert", {"label": "human", "new_string": "Likes tea.", "insert_line": -1}),
            latency=0.3,  # a model's latency: the stream has subscribed to the run's events before its first chunk
        ),
        FakeAnthropic.reply(thinking="Now answer.", text="Noted, you like tea."),
    )
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "I like tea", "stream_tokens": True}))
    assert [f["message_type"] for f in frames][-2:] == ["stop_reason", "usage_statistics"]
    assert frames[-2]["stop_reason"] == "end_turn"
    reasoning = [f for f in frames if f["message_type"] == "reasoning_message"]
    assert "".join(f["reasoning"] for f in reasoning if f.get("delta")) == "She likes tea; save it.Now answer."
    answer = [f for f in frames if f["message_type"] == "assistant_message"]
    assert "".join(f["content"] for f in answer if f.get("delta")) == "Noted, you like tea."
    assert "Likes tea." in agent_block_by_label(agent=agent, label="human").value
    first, second = fake_anthropic.message_requests
    for sent in (first, second):
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048} and sent["max_tokens"] > 2048
        assert sent["tool_choice"] == {"type": "auto"} and "temperature" not in sent
        assert all("request_heartbeat" not in t["input_schema"]["properties"] for t in sent["tools"])
        assert "send_message" not in {t["name"] for t in sent["tools"]}
    replayed = second["messages"][-2]["content"]
    assert replayed[0] == {
        "type": "thinking",
        "thinking": "She likes tea; save it.",
        "signature": sign("She likes tea; save it."),
    }
    assert replayed[1]["type"] == "tool_use" and second["messages"][-1]["content"][0]["type"] == "tool_result"
    stored = MessageRow.objects.filter(agent=agent, role="assistant").order_by("seq")
    assert [r.thinking_blocks[0]["signature"] for r in stored] == [sign("She likes tea; save it."), sign("Now answer.")]
    listed = api.get(f"/v1/agents/{agent.id}/messages?order=asc").json()
    signed = [m for m in listed if m["message_type"] == "reasoning_message"]
    assert [m["signature"] for m in signed] == [sign("She likes tea; save it."), sign("Now answer.")]
    assert all(m["source"] == "reasoner_model" for m in signed)


def test_memgpt_v2_agent_on_anthropic_forces_a_tool_and_replies_through_send_message(account, fake_anthropic):
    ms = {"put_inner_thoughts": True}  # the model reasons in a `thinking` argument (Letta's reasoning=True)
    agent = make_agent(account.org, model=MODEL, agent_type="memgpt_v2_agent", model_settings=ms)
    fake_anthropic.script(
        FakeAnthropic.reply(
            tool=("conversation_search", {"query": "tea", "request_heartbeat": True, "thinking": "check history"})
        ),
        FakeAnthropic.reply(tool=("send_message", {"message": "Nothing about tea yet.", "thinking": "reply"})),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "tea?"}])
    assert result.stop_reason == "end_turn" and result.usage["step_count"] == 2
    assert [m["message_type"] for m in result.messages] == [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "reasoning_message",
        "assistant_message",
    ]  # the heartbeat between the steps is stored and listed, but not returned to the caller (Letta's reply)
    assert MessageRow.objects.filter(run_id=result.run_id, kind="heartbeat").count() == 1
    assert result.messages[-1]["content"] == "Nothing about tea yet."
    first, second = fake_anthropic.message_requests
    assert first["tool_choice"] == {"type": "any"} and "thinking" not in first
    search = next(t for t in first["tools"] if t["name"] == "conversation_search")
    assert {"thinking", "request_heartbeat"} <= set(search["input_schema"]["properties"])
    heartbeat = second["messages"][-1]["content"]
    assert any(b["type"] == "tool_result" for b in heartbeat)
    assert any(b["type"] == "text" and '"type": "heartbeat"' in b["text"] for b in heartbeat)


def test_anthropic_errors_become_llm_api_errors_and_change_nothing(account, fake_anthropic):
    agent = make_agent(account.org, model=MODEL, agent_type="letta_v1_agent")
    fake_anthropic.script(FakeAnthropic.error(529, "Overloaded", "overloaded_error"))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.status == "failed" and result.stop_reason == "llm_api_error" and "Overloaded" in result.error
    # the person's message is kept (the claim stored it), unlinked to any step and outside the window; nothing else
    kept = MessageRow.objects.filter(agent=agent).exclude(role="system")
    assert [(m.role, m.run_id, m.step_id) for m in kept] == [("user", result.run_id, None)]
    agent.refresh_from_db()
    assert kept[0].id not in agent.message_ids


def test_a_real_letta_v1_agent_file_keeps_its_signed_thinking_and_continues_on_anthropic(account, fake_anthropic):
    from pathlib import Path

    from core.agents.agentfile.exporter import agentfile_export
    from core.agents.agentfile.importer import ImportOptions, agentfile_import
    from core.agents.agentfile.parse import parse_agent_file
    from core.models import Agent

    raw = Path("/work/shared/fixtures/agent-files/test_agent.af").read_bytes()
    doc = json.loads(raw)
    signed = {
        p["signature"]: p["reasoning"]
        for m in doc["agents"][0]["messages"]
        for p in m.get("content") or []
        if p.get("type") == "reasoning" and p.get("signature")
    }
    result = agentfile_import(owner=account.org, parsed=parse_agent_file(raw), options=ImportOptions(model=MODEL))
    agent = Agent.objects.get(id=result.agent_ids[0])
    assert agent.agent_type == "letta_v1_agent" and agent.model_settings.get("native_reasoning")
    stored = [b for r in MessageRow.objects.filter(agent=agent, role="assistant") for b in r.thinking_blocks]
    assert stored and {b["signature"]: b["thinking"] for b in stored}.items() <= signed.items()
    fake_anthropic.trusted.update(signed)  # the provider signed these; any change to them is refused
    # the file ends on a tool call still awaiting approval; leave it out of the window so the turn can go on
    from core.runs.persistence import window_set

    window_set(agent_id=agent.id, message_ids=list(agent.message_ids)[:-1])
    agent.refresh_from_db()
    fake_anthropic.script(FakeAnthropic.reply(thinking="A greeting.", text="Hello again."))
    out = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hello"}])
    assert out.stop_reason == "end_turn", out.error
    assert [m["message_type"] for m in out.messages] == ["reasoning_message", "assistant_message"]
    sent = fake_anthropic.message_requests[0]
    sent_blocks = [
        b for m in sent["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"
    ]
    in_window = {
        b["signature"]
        for r in MessageRow.objects.filter(id__in=agent.message_ids, role="assistant")
        for b in r.thinking_blocks
    }
    assert in_window and {b["signature"] for b in sent_blocks} >= in_window
    again = agentfile_export(agent=Agent.objects.get(id=agent.id))
    exported = {p["signature"] for m in again["agents"][0]["messages"] for p in m["content"] if p.get("signature")}
    assert {b["signature"] for b in stored} <= exported
