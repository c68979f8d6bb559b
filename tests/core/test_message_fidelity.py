"""Message fidelity against Letta's own behaviour (issue 38): what a letta_v1_agent sends when its model gave no
reasoning, where an initial message sequence sits, and what a run's message list carries."""

import json

import pytest

from core.agents.messages import messages_to_letta
from core.models import Message
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

V1 = "letta_v1_agent"


def _types(messages):
    return [m["message_type"] for m in messages]


def _frames(response) -> list[dict]:
    raw = b"".join(response).decode()
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


def _sent(api, agent, mode) -> list[dict]:
    """What the caller got, in order, one item per message part (token fragments of a part folded into one)."""
    body = {"messages": [{"role": "user", "content": "find tea"}]}
    if mode == "reply":
        return api.post(f"/v1/agents/{agent.id}/messages", body).json()["messages"]
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {**body, "stream_tokens": mode == "tokens"}))
    parts = [f for f in frames if f["message_type"] not in ("ping", "stop_reason", "usage_statistics")]
    key = lambda f: (f["id"], f["otid"], f["message_type"])  # noqa: E731
    return [f for i, f in enumerate(parts) if i == 0 or key(f) != key(parts[i - 1])]


# Letta's LettaAgentV3 shows only the model's native reasoning: letta_agent_v3.py _handle_ai_response passes the
# adapter's content as reasoning_content and pops a `thinking` argument, and the streaming interfaces skip empty
# reasoning deltas (letta/interfaces/openai_streaming_interface.py SimpleOpenAIStreamingInterface).
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "mode,stray_thinking",
    [
        ("reply", False),
        ("steps", False),
        ("tokens", False),
        ("reply", True),
        ("steps", True),
        ("tokens", True),
    ],
)
def test_v1_agent_without_model_reasoning_sends_no_reasoning_message(api, account, fake_llm, mode, stray_thinking):
    agent = make_agent(account.org, agent_type=V1)
    # A model without reasoning: a bare tool call, then plain text; or a call with a `thinking` argument that
    # letta_v1_agent's tools do not declare.
    thinking = {"thinking": "made up"} if stray_thinking else {}
    fake_llm.script(FakeLLM.tool("conversation_search", {"query": "tea"}, **thinking), FakeLLM.text("Nothing found."))
    sent = _sent(api, agent, mode)
    expected = ["tool_call_message", "tool_return_message", "assistant_message"]
    assert _types(sent) == expected
    # with no reasoning part, each message's first part is its part 0 (Letta's tests check the otid's last digit)
    assert sent[0]["otid"].endswith("0") and sent[2]["otid"].endswith("0")
    listed = api.get(f"/v1/agents/{agent.id}/messages?order=asc").json()
    assert _types(listed) == ["system_message", "user_message", *expected]
    run_listed = api.get(f"/v1/runs/{sent[0]['run_id']}/messages").json()
    assert "reasoning_message" not in _types(run_listed)


def test_v1_agent_shows_the_reasoning_its_model_sent(api, account, fake_llm):
    agent = make_agent(account.org, agent_type=V1)
    fake_llm.script(FakeLLM.reasoning("let me look", "conversation_search", {"query": "tea"}), FakeLLM.text("None."))
    sent = _sent(api, agent, "reply")
    assert _types(sent) == ["reasoning_message", "tool_call_message", "tool_return_message", "assistant_message"]
    assert sent[0]["reasoning"] == "let me look" and sent[0]["source"] == "reasoner_model"


# --------------------------------------------------------------------------- initial_message_sequence

SEQUENCE = [
    {"role": "assistant", "content": "Hello, how are you?"},
    {"role": "user", "content": "I'm good, and you?"},
    {"role": "system", "content": "The user is on a phone."},
]


@pytest.mark.parametrize("agent_type", [V1, "memgpt_v2_agent"])
def test_initial_message_sequence_follows_the_system_message_as_letta_stores_it(api, fake_llm, agent_type):
    # Letta's _generate_initial_message_sequence_async (services/agent_manager.py): the system message, then the
    # sequence as package_initial_message_sequence (services/helpers/agent_manager_helper.py) stores it.
    body = {"name": "greeted", "model": "openai/fake-model", "agent_type": agent_type}
    agent = api.post("/v1/agents/", {**body, "initial_message_sequence": SEQUENCE}).json()
    memgpt = agent_type != V1
    rows = {m.id: m for m in Message.objects.filter(agent_id=agent["id"])}
    in_context = [rows[i] for i in agent["message_ids"]]
    assert [r.seq for r in in_context] == list(range(len(in_context)))
    roles = ["system", "assistant", "tool", "user", "system"] if memgpt else ["system", "assistant", "user", "system"]
    assert [r.role for r in in_context] == roles
    if memgpt:  # a send_message call and its return, as Letta's memgpt agents reply
        call = in_context[1].tool_calls[0]
        assert call["name"] == "send_message" and json.loads(call["arguments"]) == {"message": "Hello, how are you?"}
        assert in_context[2].tool_call_id == call["id"] and json.loads(in_context[2].text)["message"] == "None"
    user, alert = json.loads(in_context[-2].text), json.loads(in_context[-1].text)
    assert (user["type"], user["message"]) == ("user_message", "I'm good, and you?") and user["time"]
    assert (alert["type"], alert["message"]) == ("system_alert", "The user is on a phone.")

    listed = api.get(f"/v1/agents/{agent['id']}/messages?order=asc").json()
    assert [(m["message_type"], m["content"]) for m in listed[1:3]] == [
        ("assistant_message", "Hello, how are you?"),
        ("user_message", "I'm good, and you?"),
    ]
    assert listed[0]["message_type"] == "system_message" and listed[3]["message_type"] == "system_message"
    assert json.loads(listed[3]["content"])["type"] == "system_alert"  # Letta lists a system alert as stored
    assert len(listed) == 4  # send_message's return is not listed

    api.post(f"/v1/agents/{agent['id']}/messages", {"input": "hi"})
    sent = fake_llm.chat_requests[0]["messages"]
    assert [m["role"] for m in sent] == [*roles, "user"] and sent[-1]["content"] == "hi"
    assert json.loads(sent[len(roles) - 2]["content"])["message"] == "I'm good, and you?"


# --------------------------------------------------------------------------- a run's messages


def _chain(fake_llm, agent_type):
    if agent_type == V1:
        fake_llm.script(FakeLLM.reasoning("look first", "conversation_search", {"query": "tea"}), FakeLLM.text("None."))
        return ["reasoning_message", "tool_call_message", "tool_return_message", "assistant_message"]
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "tea"}, heartbeat=True, thinking="look first"),
        FakeLLM.tool("send_message", {"message": "None."}, thinking="answer"),
    )
    return [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "user_message",  # the heartbeat
        "reasoning_message",
        "assistant_message",  # send_message's return is not listed
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("agent_type", [V1, "memgpt_v2_agent"])
@pytest.mark.parametrize("send", ["sync", "async"])
def test_a_runs_messages_are_every_message_it_stored_from_its_input_on(api, account, fake_llm, agent_type, send):
    # Letta's list_messages_for_run (routers/v1/runs.py) → run_manager.get_run_messages: every message stored with
    # the run id (the input included), oldest first by default, through to_letta_messages_from_list with
    # use_assistant_message (send_message's return left out). Letta's own test_greeting drops the user_message
    # of an async run's list before comparing it with the reply.
    agent = make_agent(account.org, agent_type=agent_type)
    parts = _chain(fake_llm, agent_type)
    body = {"messages": [{"role": "user", "content": "find tea", "otid": "client-otid"}]}
    if send == "sync":
        reply = api.post(f"/v1/agents/{agent.id}/messages", body).json()
        run_id = reply["run_id"]
        assert _types(reply["messages"]) == [p for p in parts if p != "user_message"]
    else:
        run_id = api.post(f"/v1/agents/{agent.id}/messages/async", body).json()["id"]
        until(lambda: api.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the async run")
    listed = api.get(f"/v1/runs/{run_id}/messages").json()
    assert _types(listed) == ["user_message", *parts]
    assert (listed[0]["content"], listed[0]["otid"]) == ("find tea", "client-otid")
    assert {m["run_id"] for m in listed} == {run_id}
    history = api.get(f"/v1/agents/{agent.id}/messages?order=asc").json()
    assert listed == history[1:]  # the agent's whole history after its system message: nothing more, nothing less


def test_a_runs_messages_newest_first_put_each_messages_parts_last_first(api, account, fake_llm):
    agent = make_agent(account.org)
    _chain(fake_llm, "memgpt_v2_agent")
    run_id = api.post(f"/v1/agents/{agent.id}/messages", {"input": "find tea"}).json()["run_id"]
    oldest_first = api.get(f"/v1/runs/{run_id}/messages").json()
    assert api.get(f"/v1/runs/{run_id}/messages?order=desc").json() == oldest_first[::-1]


def test_a_newest_first_page_lists_each_messages_parts_last_first(api, account, fake_llm):
    agent = make_agent(account.org)
    _chain(fake_llm, "memgpt_v2_agent")
    run_id = api.post(f"/v1/agents/{agent.id}/messages", {"input": "find tea"}).json()["run_id"]
    rows = list(Message.objects.filter(run_id=run_id).order_by("seq"))
    forward = messages_to_letta(rows, hide_assistant_returns=True)
    assert messages_to_letta(rows[::-1], hide_assistant_returns=True, reverse=True) == forward[::-1]
