"""Both agent types through the whole loop: letta_v1_agent (Letta 1.x's default: the reply is plain text, no
send_message, no heartbeats) beside memgpt_v2_agent (send_message ends the turn, heartbeats chain steps), with
otid round-tripped and send_message's return hidden from API callers but shown in the IDE."""

import dataclasses
import json
import uuid

import pytest

from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.engine import loop
from core.engine.context import compile_context
from core.engine.types import AgentSpec, LLMResult, MemoryStats, StopReason, ToolCall, ToolSpec
from core.models import Message, Step
from core.runs.runner import run_agent
from memory.selectors import agent_block_by_label
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM

V1, V2 = "letta_v1_agent", "memgpt_v2_agent"


def _run(agent, text="hi", **kw):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text, **kw}])


def _types(messages):
    return [m["message_type"] for m in messages]


def _frames(response) -> list[dict]:
    raw = b"".join(response).decode()
    assert raw.endswith("data: [DONE]\n\n")
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


# --------------------------------------------------------------------------- engine (no database)

_TOOL = ToolSpec(
    name="lookup",
    description="Look up",
    json_schema={
        "name": "lookup",
        "description": "Look up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
)


@pytest.mark.parametrize("agent_type,heartbeat,choice", [(V1, False, "auto"), (V2, True, "required")])
def test_the_compiler_offers_tools_as_each_type_expects(agent_type, heartbeat, choice):
    spec = AgentSpec(id="a", name="a", system="s", model="openai/gpt-4o-mini", agent_type=agent_type)
    ctx = compile_context(spec, [], [], [_TOOL], [], MemoryStats())
    props = ctx.request["tools"][0]["function"]["parameters"]["properties"]
    assert ("request_heartbeat" in props) is heartbeat and "thinking" not in props  # Letta: off unless asked
    asked = compile_context(dataclasses.replace(spec, put_inner_thoughts=True), [], [], [_TOOL], [], MemoryStats())
    assert ("thinking" in asked.request["tools"][0]["function"]["parameters"]["properties"]) is heartbeat
    assert ctx.request["tool_choice"] == choice


def test_extended_thinking_is_asked_of_anthropic_models_with_native_reasoning_only():
    from core.engine.types import Message as EngineMessage
    from core.engine.types import Role

    blocks = ({"type": "thinking", "thinking": "plan", "signature": "sig"},)
    history = [EngineMessage(id="m", role=Role.ASSISTANT, content="hi", thinking_blocks=blocks)]
    claude = AgentSpec(
        id="a",
        name="a",
        system="s",
        model="anthropic/claude-sonnet-4-5",
        native_reasoning=True,
        thinking_budget=2000,
        agent_type=V2,
    )
    req = compile_context(claude, [], history, [_TOOL], [], MemoryStats()).request
    assert req["thinking"] == {"type": "enabled", "budget_tokens": 2000} and req["max_tokens"] > 2000
    assert "temperature" not in req and req["tool_choice"] == "auto"  # the API refuses forced tools with thinking
    assert req["messages"][-1]["thinking_blocks"] == list(blocks)
    for spec in (
        AgentSpec(id="a", name="a", system="s", model="openai/gpt-4o", native_reasoning=True),
        AgentSpec(id="a", name="a", system="s", model="anthropic/claude-sonnet-4-5"),
    ):
        plain = compile_context(spec, [], history, [_TOOL], [], MemoryStats()).request
        assert "thinking" not in plain and "thinking_blocks" not in plain["messages"][-1]


def test_v1_loop_ends_on_text_and_continues_on_any_call_without_a_heartbeat():
    def decide(result, **kw):
        parsed = loop.parse_response(result, [_TOOL])
        return loop.decide_next(
            parsed=parsed,
            failed=[False] * len(parsed.calls),
            tool_rules=[],
            history=["lookup"],
            steps_taken=kw.get("steps", 1),
            max_steps=5,
            heartbeats=False,
            finish_reason=result.finish_reason,
        )

    assert decide(LLMResult(content="Hello")) == loop.Decision(False, StopReason.END_TURN)
    assert decide(LLMResult(content="Hel", finish_reason="length")).stop_reason == StopReason.MAX_TOKENS_EXCEEDED
    call = LLMResult(tool_calls=(ToolCall(id="c", name="lookup", arguments='{"q": "x"}'),))
    assert decide(call) == loop.Decision(True, None, None)
    assert decide(call, steps=5).stop_reason == StopReason.MAX_STEPS


# --------------------------------------------------------------------------- the runner


def test_v1_text_reply_is_the_assistant_message_alone(account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(FakeLLM.text("Hello Alice"))
    result = _run(agent, otid="client-otid-1")
    assert result.stop_reason == "end_turn" and result.usage["step_count"] == 1
    assert _types(result.messages) == ["assistant_message"] and result.messages[0]["content"] == "Hello Alice"
    request = fake_llm.chat_requests[0]
    names = {t["function"]["name"] for t in request["tools"]}
    assert "send_message" not in names and request["tool_choice"] == "auto"
    assert all("request_heartbeat" not in t["function"]["parameters"]["properties"] for t in request["tools"])
    user = Message.objects.get(agent=agent, role="user")
    assert user.otid == "client-otid-1"
    reply = Message.objects.get(agent=agent, role="assistant")
    assert result.messages[0]["otid"] == str(uuid.UUID(int=uuid.UUID(reply.id[-36:]).int & ~0x7F))


def test_v1_tool_call_continues_on_its_result_then_text_ends_the_turn(account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(
        FakeLLM.reasoning(
            "I should remember that", "memory_insert", {"label": "human", "new_string": "Likes tea.", "insert_line": -1}
        ),
        FakeLLM.text("Noted: you like tea."),
    )
    result = _run(agent, text="I like tea")
    assert result.stop_reason == "end_turn" and result.usage["step_count"] == 2
    assert _types(result.messages) == [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    assert result.messages[0]["source"] == "reasoner_model"
    second = fake_llm.chat_requests[1]["messages"]
    assert second[-1]["role"] == "tool"  # no heartbeat: the tool's result is the model's next input
    assert not Message.objects.filter(agent=agent, kind="heartbeat").exists()
    assert "Likes tea." in agent_block_by_label(agent=agent, label="human").value
    rows = Message.objects.filter(agent=agent).order_by("seq")
    assert [r.role for r in rows] == ["system", "user", "assistant", "tool", "assistant"]


def test_v1_text_beside_a_tool_call_is_shown_as_the_reply(account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(
        FakeLLM.reasoning("", "conversation_search", {"query": "tea"}, content="Let me check."),
        FakeLLM.text("Found nothing."),
    )
    result = _run(agent)
    assert _types(result.messages)[:2] == ["assistant_message", "tool_call_message"]
    assert result.messages[0]["content"] == "Let me check."
    otids = [m["otid"] for m in result.messages[:2]]
    assert len(set(otids)) == 2 and result.messages[0]["id"] == result.messages[1]["id"]


def test_v2_send_message_return_is_stored_but_hidden_from_the_caller(account, fake_llm):
    agent = make_agent(account.org, agent_type=V2)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi"}, thinking="greet"))
    result = _run(agent)
    assert _types(result.messages) == ["reasoning_message", "assistant_message"]
    assert Message.objects.filter(agent=agent, role="tool", name="send_message").count() == 1
    api = ApiClient(account.token)
    listed = api.get(f"/v1/agents/{agent.id}/messages?order=asc").json()
    assert "tool_return_message" not in _types(listed)
    assert _types(listed) == ["system_message", "user_message", "reasoning_message", "assistant_message"]
    assert all(m["otid"] for m in listed[1:])


def test_v2_text_without_a_tool_call_stops_with_no_tool_call(account, fake_llm):
    agent = make_agent(account.org, agent_type=V2)
    fake_llm.script(FakeLLM.text("just text"))
    assert _run(agent).stop_reason == "no_tool_call"


def test_the_ide_history_shows_send_message_returns_and_v1_replies(account, fake_llm):
    from core.web.history import history_page

    v2 = make_agent(account.org, name="v2", agent_type=V2)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi"}))
    _run(v2)
    items, _ = history_page(agent=v2)
    assert "tool_return_message" in _types(items)
    v1 = make_agent(account.org, name="v1", agent_type=V1)
    fake_llm.script(
        FakeLLM.reasoning("", "conversation_search", {"query": "x"}, content="Checking <b>now</b>"),
        FakeLLM.text("done"),
    )
    _run(v1)
    items, _ = history_page(agent=v1)
    shown = [(i["message_type"], i.get("content")) for i in items]
    assert ("assistant_message", "Checking <b>now</b>") in shown and ("assistant_message", "done") in shown


# --------------------------------------------------------------------------- API: defaults, otid, streaming


def test_api_creates_letta_v1_agents_by_default_and_memgpt_on_request(api, fake_llm):
    made = api.post("/v1/agents/", {"name": "d", "model": "openai/fake-model"}).json()
    assert made["agent_type"] == V1 and "send_message" not in {t["name"] for t in made["tools"]}
    old = api.post("/v1/agents/", {"name": "m", "model": "openai/fake-model", "agent_type": V2}).json()
    assert old["agent_type"] == V2 and "send_message" in {t["name"] for t in old["tools"]}
    assert "send_message" in old["system"] and "send_message" not in made["system"]


@pytest.mark.django_db(transaction=True)
def test_v1_token_stream_groups_fragments_by_otid(api, account, fake_llm):
    fake_llm.stream_chunk_chars = 3
    agent = make_agent(account.org, agent_type=V1)
    # paced: chunks that arrive together go out merged (core.runs.emit)
    fake_llm.script(dataclasses.replace(FakeLLM.reasoning("think it over", content="A streamed reply"), chunk_s=0.04))
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "stream_tokens": True}))
    reasoning = [f for f in frames if f["message_type"] == "reasoning_message"]
    answer = [f for f in frames if f["message_type"] == "assistant_message"]
    assert len(answer) > 1 and "".join(f["content"] for f in answer) == "A streamed reply"
    assert "".join(f["reasoning"] for f in reasoning) == "think it over"
    assert len({f["otid"] for f in answer}) == 1 and len({f["otid"] for f in reasoning}) == 1
    assert {f["otid"] for f in answer} != {f["otid"] for f in reasoning}
    assert [f["message_type"] for f in frames][-2:] == ["stop_reason", "usage_statistics"]
    assert "tool_return_message" not in _types(frames)


def test_context_overview_compiles_each_type(api, account):
    v1 = make_agent(account.org, name="v1", agent_type=V1)
    v2 = make_agent(account.org, name="v2", agent_type=V2)
    c1 = api.get(f"/v1/agents/{v1.id}/context").json()
    c2 = api.get(f"/v1/agents/{v2.id}/context").json()
    params = lambda c: [d["function"]["parameters"]["properties"] for d in c["functions_definitions"]]  # noqa: E731
    assert not any("request_heartbeat" in p for p in params(c1))
    assert any("request_heartbeat" in p for p in params(c2))
    assert c1["request"]["tool_choice"] == "auto" and c2["request"]["tool_choice"] == "required"


# --------------------------------------------------------------------------- replay, fork, agent files


def test_replay_of_a_v1_step_sends_the_v1_request(api, account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(FakeLLM.text("first"))
    _run(agent)
    step = Step.objects.get(agent=agent)
    fake_llm.script(FakeLLM.text("replayed"))
    out = api.post(
        f"/v1/steps/{step.id}/replay", {"models": ["openai/fake-model"], "tools_remove": ["conversation_search"]}
    )
    assert out.status_code == 200, out.content
    sent = fake_llm.chat_requests[-1]
    assert sent["tool_choice"] == "auto"
    assert all("request_heartbeat" not in t["function"]["parameters"]["properties"] for t in sent["tools"])
    assert "conversation_search" not in {t["function"]["name"] for t in sent["tools"]}


def test_agent_file_round_trip_keeps_the_type_otid_and_v1_replies(account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(FakeLLM.text("tea is good"))
    _run(agent, otid="otid-xyz")
    data = agentfile_export(agent=agent)
    assert data["agents"][0]["agent_type"] == V1
    assert any(m.get("otid") == "otid-xyz" for m in data["agents"][0]["messages"])
    result = agentfile_import(
        owner=account.org, parsed=parse_agent_file(json.dumps(data).encode()), options=ImportOptions(name="copy")
    )
    copy_id = result.agent_ids[0]
    from core.models import Agent

    copy = Agent.objects.get(id=copy_id)
    assert copy.agent_type == V1
    assert Message.objects.get(agent=copy, role="user").otid == "otid-xyz"
    listed = ApiClient(account.token).get(f"/v1/agents/{copy.id}/messages?order=asc").json()
    assert [(m["message_type"], m.get("content")) for m in listed][-2:] == [
        ("user_message", "hi"),
        ("assistant_message", "tea is good"),
    ]


def test_a_template_made_letta_v1_loses_send_message(account):
    from core.agents.agentfile.templates import agent_create_from_template

    agent = agent_create_from_template(
        owner=account.org, template="af:memgpt_chat", name="t", model="openai/fake-model", agent_type=V1
    )
    assert agent.agent_type == V1 and not agent.tools.filter(name="send_message").exists()
    kept = agent_create_from_template(owner=account.org, template="af:memgpt_chat", name="u", model="openai/fake-model")
    assert kept.agent_type == V2 and kept.tools.filter(name="send_message").exists()


def test_the_ide_context_simulator_and_settings_show_the_type(account):
    from django.test import Client

    web = Client()
    web.force_login(account.user)
    v1 = make_agent(account.org, name="v1", agent_type=V1)
    v2 = make_agent(account.org, name="v2", agent_type=V2)
    assert "request_heartbeat" not in web.get(f"/agents/{v1.id}/context/").content.decode()
    assert "request_heartbeat" in web.get(f"/agents/{v2.id}/context/").content.decode()
    assert "<code>letta_v1_agent</code>" in web.get(f"/agents/{v1.id}/").content.decode()
    assert "<code>memgpt_v2_agent</code>" in web.get(f"/agents/{v2.id}/").content.decode()


def test_the_new_agent_form_creates_the_chosen_type(account):
    from django.test import Client

    from core.models import Agent

    web = Client()
    web.force_login(account.user)
    page = web.get("/").content.decode()
    assert 'name="agent_type"' in page and '<option value="" selected>as the template says</option>' in page
    for chosen in (V1, V2):
        r = web.post(
            "/agents/new/",
            {
                "name": f"made-{chosen}",
                "template": "af:memgpt_chat",
                "model": "openai/fake-model",
                "agent_type": chosen,
            },
        )
        assert r.status_code == 302, r.content.decode()[:500]
        made = Agent.objects.get(name=f"made-{chosen}")
        assert made.agent_type == chosen
        assert made.tools.filter(name="send_message").exists() is (chosen == V2)
    bad = web.post(
        "/agents/new/",
        {"name": "x", "template": "af:memgpt_chat", "model": "openai/fake-model", "agent_type": "nonsense"},
    )
    assert bad.status_code == 400 and not Agent.objects.filter(name="x").exists()
