"""letta-client (1.x) over real HTTP through Letta's human-in-the-loop flows, with the SDK's own types both ways: a
requires_approval call is approved or denied (ApprovalCreateParam / ApprovalReturnParam), a client-side tool's call
is answered with the client's result (ToolReturnParam, or MessageToolReturnCreate), non-streaming, streamed step by
step and token by token, in a conversation and as async runs. Every message and chunk the SDK hands back must be
the SDK's class for its message_type and validate as that class (the SDK builds them without validating)."""

import json
from typing import Literal, Union, get_args, get_origin

import pytest
from letta_client import ConflictError, Letta
from letta_client.types import ToolReturnMessage
from letta_client.types.agents import (
    ApprovalCreateParam,
    ApprovalRequestMessage,
    ApprovalResponseMessage,
    ApprovalReturn,
    ApprovalReturnParam,
    AssistantMessage,
    LettaStreamingResponse,
    Message,
    TextContentParam,
    ToolReturn,
    ToolReturnParam,
)
from letta_client.types.agents.message_create_params import ClientTool, MessageToolReturnCreate

from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)

INSERT = "archival_memory_insert"
RULES = [{"type": "requires_approval", "tool_name": INSERT}]
DENIED_AS = "Error: request to call tool denied. User reason: {}"
NOTE_TOOL: ClientTool = {
    "name": "read_sticky_note",
    "description": "Read the sticky note of a color on the user's desk.",
    "parameters": {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
}


# --------------------------------------------------------------------------- the SDK's classes, validated


def _literals(annotation) -> tuple:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return tuple(v for arg in get_args(annotation) for v in _literals(arg))


def _classes(union) -> dict[str, type]:
    """message_type -> the SDK's class for it, from one of its Annotated unions."""
    inner = get_args(union)[0] if get_args(union) else union
    members = get_args(inner) if get_origin(inner) is Union else (inner,)
    return {kind: cls for cls in members for kind in _literals(cls.model_fields["message_type"].annotation)}


MESSAGE_CLASSES = _classes(Message)
STREAM_CLASSES = _classes(LettaStreamingResponse)


def strictly(items, classes=MESSAGE_CLASSES) -> list:
    """Each item is the SDK's class for its message_type and validates as it (what the server sent fits the
    SDK's schema, not only its lenient construction)."""
    items = list(items)
    for item in items:
        kind = getattr(item, "message_type", None)
        assert kind in classes, f"the SDK has no class for message_type {kind!r}: {item!r}"
        assert isinstance(item, classes[kind]), f"{kind} parsed as {type(item).__name__}"
        classes[kind].model_validate(item.to_dict(mode="json", warnings=False))
    return items


def streamed(stream) -> list:
    return strictly(stream, STREAM_CLASSES)


def kinds(items) -> list[str]:
    """The message types, without pings, the stream's closing events and reasoning (a memgpt_v2_agent's thinking)."""
    skip = ("ping", "stop_reason", "usage_statistics", "reasoning_message")
    return [m.message_type for m in items if m.message_type not in skip]


def stop_of(chunks) -> str | None:
    return next((c.stop_reason for c in chunks if c.message_type == "stop_reason"), None)


def the_ask(messages) -> ApprovalRequestMessage:
    (ask,) = [m for m in messages if isinstance(m, ApprovalRequestMessage)]
    return ask


def asked_ids(chunks) -> list[str]:
    """The waiting calls' ids from a stream's approval_request_message chunks (token chunks carry one delta)."""
    out = []
    for c in chunks:
        if isinstance(c, ApprovalRequestMessage):
            calls = c.tool_calls if isinstance(c.tool_calls, list) else [c.tool_call]
            out += [t.tool_call_id for t in calls if t.tool_call_id and t.tool_call_id not in out]
    return out


def seen_result(fake_llm, call_id: str) -> dict:
    """The result of call `call_id` as the fake model last read it."""
    for request in reversed(fake_llm.chat_requests):
        for m in request["messages"]:
            if m["role"] == "tool" and m.get("tool_call_id") == call_id:
                return json.loads(m["content"])
    raise AssertionError(f"the model never read a result for {call_id}")


def approve(call_id: str, ok: bool = True, reason: str | None = None) -> ApprovalCreateParam:
    answer: ApprovalReturnParam = {"type": "approval", "tool_call_id": call_id, "approve": ok}
    if reason is not None:
        answer["reason"] = reason
    return {"type": "approval", "approvals": [answer]}


def client_result(call_id: str, value, status="success", **extra) -> ApprovalCreateParam:
    result: ToolReturnParam = {"type": "tool", "tool_call_id": call_id, "status": status, "tool_return": value}
    return {"type": "approval", "approvals": [{**result, **extra}]}


def say(text: str) -> dict:
    return {"role": "user", "content": text}


def reply(agent_type: str, text: str):
    return FakeLLM.text(text) if agent_type == "letta_v1_agent" else FakeLLM.tool("send_message", {"message": text})


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def make(client, agent_type: str = "letta_v1_agent", **kw):
    return client.agents.create(
        name="sdk-approvals",
        agent_type=agent_type,
        model="openai/fake-model",
        context_window_limit=16000,
        tool_rules=RULES,
        **kw,
    )


# --------------------------------------------------------------------------- non-streaming


@pytest.mark.parametrize("agent_type", ["letta_v1_agent", "memgpt_v2_agent"])
def test_approve_and_deny_through_the_sdk(client, fake_llm, agent_type):
    agent = make(client, agent_type)
    assert [(r.type, r.tool_name) for r in agent.tool_rules if r.type == "requires_approval"] == [
        ("requires_approval", INSERT)
    ]

    fake_llm.script(FakeLLM.tool(INSERT, {"content": "the launch code is 42"}, heartbeat=True))
    first = client.agents.messages.create(agent.id, messages=[say("remember the launch code")])
    strictly(first.messages)
    assert first.stop_reason.stop_reason == "requires_approval"
    ask = the_ask(first.messages)
    assert isinstance(ask.tool_calls, list) and ask.tool_call == ask.tool_calls[0]
    assert ask.tool_call.name == INSERT and json.loads(ask.tool_call.arguments)["content"] == "the launch code is 42"
    assert client.agents.retrieve(agent.id).last_stop_reason == "requires_approval"
    assert client.agents.passages.list(agent.id) == []  # nothing ran

    with pytest.raises(ConflictError) as conflict:  # a normal send while it waits
        client.agents.messages.create(agent.id, messages=[say("hello?")])
    assert "waiting for approval" in str(conflict.value)

    fake_llm.script(reply(agent_type, "Saved."))
    done = client.agents.messages.create(agent.id, messages=[approve(ask.tool_call.tool_call_id)])
    strictly(done.messages)
    assert done.stop_reason.stop_reason == "end_turn"
    assert kinds(done.messages) == ["tool_return_message", "assistant_message"]
    ret = done.messages[0]
    assert isinstance(ret, ToolReturnMessage) and ret.tool_call_id == ask.tool_call.tool_call_id
    assert ret.status == "success"
    assert [m.content for m in done.messages if isinstance(m, AssistantMessage)] == ["Saved."]
    assert seen_result(fake_llm, ask.tool_call.tool_call_id)["status"] == "OK"
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["the launch code is 42"]

    fake_llm.script(FakeLLM.tool(INSERT, {"content": "the password is hunter2"}, heartbeat=True))
    again = the_ask(strictly(client.agents.messages.create(agent.id, messages=[say("and my password")]).messages))
    fake_llm.script(reply(agent_type, "Not saved."))
    denied = client.agents.messages.create(
        agent.id, messages=[approve(again.tool_call.tool_call_id, ok=False, reason="never store passwords")]
    )
    strictly(denied.messages)
    assert denied.stop_reason.stop_reason == "end_turn"
    seen = seen_result(fake_llm, again.tool_call.tool_call_id)
    assert seen["status"] == "Failed" and seen["message"] == DENIED_AS.format("never store passwords")
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["the launch code is 42"]

    history = strictly(client.agents.messages.list(agent.id, order="asc", limit=100))
    answers = [m for m in history if isinstance(m, ApprovalResponseMessage)]
    assert len(answers) == 2 and len([m for m in history if isinstance(m, ApprovalRequestMessage)]) == 2
    assert all(isinstance(a.approvals[0], ApprovalReturn) for a in answers)
    assert [(a.approvals[0].approve, a.approvals[0].reason) for a in answers] == [
        (True, None),
        (False, "never store passwords"),
    ]
    assert answers[1].approve is False and answers[1].approval_request_id == again.tool_call.tool_call_id


def test_a_client_tool_through_the_sdk(client, fake_llm):
    agent = make(client)
    fake_llm.script(FakeLLM.tool("read_sticky_note", {"color": "yellow"}))
    first = client.agents.messages.create(agent.id, messages=[say("the yellow note?")], client_tools=[NOTE_TOOL])
    strictly(first.messages)
    assert first.stop_reason.stop_reason == "requires_approval"
    offered = {t["function"]["name"]: t["function"] for t in fake_llm.chat_requests[-1]["tools"]}
    assert offered["read_sticky_note"]["parameters"]["required"] == ["color"]
    call_id = the_ask(first.messages).tool_call.tool_call_id

    fake_llm.script(FakeLLM.text("It says: buy oat milk."))
    done = client.agents.messages.create(
        agent.id,
        messages=[client_result(call_id, "Buy oat milk.", stdout=["read 1 note"], stderr=[])],
        client_tools=[NOTE_TOOL],
    )
    strictly(done.messages)
    assert done.stop_reason.stop_reason == "end_turn"
    assert kinds(done.messages) == ["tool_return_message", "assistant_message"]
    assert done.messages[0].tool_call_id == call_id and done.messages[0].stdout == ["read 1 note"]
    # the client's string as sent (Letta's integration_test_client_side_tools.py); the model reads it wrapped
    assert done.messages[0].tool_return == "Buy oat milk." and done.messages[0].tool_returns[0].tool_return == (
        "Buy oat milk."
    )
    seen = seen_result(fake_llm, call_id)
    assert seen["status"] == "OK" and seen["message"] == "Buy oat milk."

    # the result as content parts and as an error, in the tool_return message form (MessageToolReturnCreate)
    fake_llm.script(FakeLLM.tool("read_sticky_note", {"color": "blue"}))
    call_id = the_ask(
        client.agents.messages.create(agent.id, messages=[say("the blue one?")], client_tools=[NOTE_TOOL]).messages
    ).tool_call.tool_call_id
    parts: list[TextContentParam] = [{"type": "text", "text": "No blue note"}, {"type": "text", "text": "on the desk."}]
    as_return: MessageToolReturnCreate = {
        "type": "tool_return",
        "tool_returns": [{"type": "tool", "tool_call_id": call_id, "status": "error", "tool_return": parts}],
    }
    fake_llm.script(FakeLLM.text("There is no blue note."))
    done = client.agents.messages.create(agent.id, messages=[as_return], client_tools=[NOTE_TOOL])
    strictly(done.messages)
    assert done.stop_reason.stop_reason == "end_turn" and done.messages[0].status == "error"
    seen = seen_result(fake_llm, call_id)
    assert seen["status"] == "Failed" and seen["message"] == "No blue note\non the desk."

    history = strictly(client.agents.messages.list(agent.id, order="asc", limit=100))
    answers = [m for m in history if isinstance(m, ApprovalResponseMessage)]
    assert [type(a.approvals[0]) for a in answers] == [ToolReturn, ToolReturn]
    assert answers[0].approvals[0].tool_return == "Buy oat milk." and answers[0].approvals[0].status == "success"
    listed = [m.tool_return for m in history if m.message_type == "tool_return_message"]
    assert listed == ["Buy oat milk.", "No blue note\non the desk."]


def test_a_wait_answered_with_the_legacy_single_fields(client, fake_llm):
    agent = make(client)
    fake_llm.script(FakeLLM.tool(INSERT, {"content": "x"}))
    ask = the_ask(client.agents.messages.create(agent.id, messages=[say("save x")]).messages)
    legacy: ApprovalCreateParam = {"type": "approval", "approve": False, "approval_request_id": ask.id, "reason": "no"}
    fake_llm.script(FakeLLM.text("Fine."))
    done = client.agents.messages.create(agent.id, messages=[legacy])
    strictly(done.messages)
    assert done.stop_reason.stop_reason == "end_turn"
    assert seen_result(fake_llm, ask.tool_call.tool_call_id)["message"] == DENIED_AS.format("no")


def test_an_answer_with_wrong_ids_or_nothing_waiting_is_a_400_the_sdk_raises(client, fake_llm):
    from letta_client import BadRequestError

    agent = make(client)
    with pytest.raises(BadRequestError, match="No tool call is currently awaiting approval"):
        client.agents.messages.create(agent.id, messages=[approve("call_nope")])
    fake_llm.script(FakeLLM.tool(INSERT, {"content": "x"}))
    client.agents.messages.create(agent.id, messages=[say("save x")])
    with pytest.raises(BadRequestError, match="Invalid tool call IDs"):
        client.agents.messages.create(agent.id, messages=[approve("call_nope")])


# --------------------------------------------------------------------------- streamed


@pytest.mark.parametrize("stream_tokens", [False, True], ids=["steps", "tokens"])
def test_approve_deny_and_a_client_tool_streamed(client, fake_llm, stream_tokens):
    agent = make(client)

    fake_llm.script(FakeLLM.tool(INSERT, {"content": "streamed fact"}))
    chunks = streamed(client.agents.messages.stream(agent.id, messages=[say("save it")], stream_tokens=stream_tokens))
    assert stop_of(chunks) == "requires_approval" and "tool_call_message" not in kinds(chunks)
    (call_id,) = asked_ids(chunks)
    asks = [c for c in chunks if isinstance(c, ApprovalRequestMessage)]
    if stream_tokens:
        # Letta's token chunks: tool_call and tool_calls are the same single delta (the SDK types them apart). A step
        # stored before the stream began reading comes whole instead (the replay of the race below).
        deltas = [c for c in asks if not isinstance(c.tool_calls, list)]
        assert all(c.tool_calls.to_dict() == c.tool_call.to_dict() for c in deltas)
        assert not deltas or len(deltas) == len(asks), asks
        assert json.loads("".join(c.tool_call.arguments or "" for c in asks))["content"] == "streamed fact"
    else:
        assert len(asks) == 1 and json.loads(asks[0].tool_call.arguments)["content"] == "streamed fact"

    fake_llm.script(FakeLLM.text("Saved."))
    chunks = streamed(
        client.agents.messages.create(
            agent.id, messages=[approve(call_id)], streaming=True, stream_tokens=stream_tokens
        )
    )
    assert stop_of(chunks) == "end_turn"
    assert kinds(chunks)[0] == "tool_return_message"  # it ran here: the caller is shown its result
    assert "".join(c.content for c in chunks if isinstance(c, AssistantMessage)) == "Saved."

    fake_llm.script(FakeLLM.tool(INSERT, {"content": "secret"}))
    (call_id,) = asked_ids(
        streamed(client.agents.messages.stream(agent.id, messages=[say("save")], stream_tokens=stream_tokens))
    )
    fake_llm.script(FakeLLM.text("Not saved."))
    chunks = streamed(
        client.agents.messages.stream(
            agent.id, messages=[approve(call_id, ok=False, reason="no")], stream_tokens=stream_tokens
        )
    )
    assert stop_of(chunks) == "end_turn"
    assert "".join(c.content for c in chunks if isinstance(c, AssistantMessage)) == "Not saved."
    assert seen_result(fake_llm, call_id)["message"] == DENIED_AS.format("no")

    fake_llm.script(FakeLLM.tool("read_sticky_note", {"color": "red"}))
    chunks = streamed(
        client.agents.messages.stream(
            agent.id, messages=[say("red note?")], client_tools=[NOTE_TOOL], stream_tokens=stream_tokens
        )
    )
    assert stop_of(chunks) == "requires_approval"
    (call_id,) = asked_ids(chunks)
    fake_llm.script(FakeLLM.text("It says hi."))
    chunks = streamed(
        client.agents.messages.stream(
            agent.id, messages=[client_result(call_id, "hi")], client_tools=[NOTE_TOOL], stream_tokens=stream_tokens
        )
    )
    assert stop_of(chunks) == "end_turn"
    assert "".join(c.content for c in chunks if isinstance(c, AssistantMessage)) == "It says hi."
    assert seen_result(fake_llm, call_id)["message"] == "hi"
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["streamed fact"]


def test_a_client_tool_in_a_conversation_as_letta_code_sends_it(client, fake_llm):
    """Background, token-streamed, in a conversation (Letta Code's way): the wait and the answer; the answer's run
    can be streamed again from its start."""
    agent = make(client)
    conversation = client.conversations.create(agent_id=agent.id)
    fake_llm.script(FakeLLM.tool("read_sticky_note", {"color": "green"}))
    chunks = streamed(
        client.conversations.messages.create(
            conversation.id,
            messages=[say("green note?")],
            client_tools=[NOTE_TOOL],
            stream_tokens=True,
            background=True,
        )
    )
    assert stop_of(chunks) == "requires_approval"
    (call_id,) = asked_ids(chunks)
    assert all(c.seq_id for c in chunks if c.message_type != "ping" and hasattr(c, "seq_id")), "background seq_ids"
    with pytest.raises(ConflictError, match="waiting for approval"):  # a normal send while it waits
        client.conversations.messages.create(conversation.id, messages=[say("hello?")], streaming=False)
    fake_llm.script(FakeLLM.text("Green means go."))
    chunks = streamed(
        client.conversations.messages.create(
            conversation.id,
            messages=[client_result(call_id, "go")],
            client_tools=[NOTE_TOOL],
            stream_tokens=True,
            background=True,
        )
    )
    assert stop_of(chunks) == "end_turn"
    assert "".join(c.content for c in chunks if isinstance(c, AssistantMessage)) == "Green means go."
    run_id = next(c.run_id for c in chunks if isinstance(c, AssistantMessage))
    again = streamed(client.runs.messages.stream(run_id, starting_after=0))
    assert stop_of(again) == "end_turn"
    assert "".join(c.content for c in again if isinstance(c, AssistantMessage)) == "Green means go."
    listed = strictly(client.conversations.messages.list(conversation.id, order="asc"))
    assert [k for k in kinds(listed) if k.startswith("approval")] == [
        "approval_request_message",
        "approval_response_message",
    ]


# --------------------------------------------------------------------------- async runs


def test_an_async_run_waits_and_an_async_answer_resumes_it(client, fake_llm):
    agent = make(client)
    fake_llm.script(FakeLLM.tool(INSERT, {"content": "async fact"}))
    run = client.agents.messages.create_async(agent.id, messages=[say("save it")])
    done = until(lambda: (r := client.runs.retrieve(run.id)).status == "completed" and r, what="the async run")
    assert done.stop_reason == "requires_approval"
    call_id = the_ask(strictly(client.runs.messages.list(run.id))).tool_call.tool_call_id

    fake_llm.script(FakeLLM.text("Saved async."))
    answer = client.agents.messages.create_async(agent.id, messages=[approve(call_id)])
    done = until(lambda: (r := client.runs.retrieve(answer.id)).status == "completed" and r, what="the answer")
    assert done.stop_reason == "end_turn"
    listed = strictly(client.runs.messages.list(answer.id))
    assert "tool_return_message" in kinds(listed) and "assistant_message" in kinds(listed)
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["async fact"]


def test_the_agent_shows_its_pending_approval(client, fake_llm):
    agent = make(client)
    assert client.agents.retrieve(agent.id, include=["agent.pending_approval"]).pending_approval is None
    fake_llm.script(FakeLLM.tool(INSERT, {"content": "x"}))
    ask = the_ask(client.agents.messages.create(agent.id, messages=[say("save x")]).messages)
    got = client.agents.retrieve(agent.id, include=["agent.pending_approval"])
    assert isinstance(got.pending_approval, ApprovalRequestMessage)
    strictly([got.pending_approval])
    assert got.pending_approval.tool_call.tool_call_id == ask.tool_call.tool_call_id
    assert [a.id for a in client.agents.list(last_stop_reason="requires_approval")] == [agent.id]
    fake_llm.script(FakeLLM.text("ok"))
    client.agents.messages.create(agent.id, messages=[approve(ask.tool_call.tool_call_id, ok=False)])
    assert client.agents.retrieve(agent.id, include=["agent.pending_approval"]).pending_approval is None


# --------------------------------------------------------------------------- a token stream's answer step


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
def test_a_token_stream_answering_only_with_client_results_shows_no_tool_return(client, fake_llm, background):
    agent = make(client)
    shown = []
    for _ in range(8):  # the race goes either way; eight tries show it nearly always
        fake_llm.script(FakeLLM.tool("read_sticky_note", {"color": "red"}))
        ask = client.agents.messages.stream(
            agent.id, messages=[say("red?")], client_tools=[NOTE_TOOL], stream_tokens=True, background=background
        )
        (call_id,) = asked_ids(streamed(ask))
        fake_llm.script(FakeLLM.text("ok"))
        chunks = streamed(
            client.agents.messages.stream(
                agent.id,
                messages=[client_result(call_id, "hi")],
                client_tools=[NOTE_TOOL],
                stream_tokens=True,
                background=background,
            )
        )
        assert stop_of(chunks) == "end_turn"
        shown.append(kinds(chunks))
    assert all(k == ["assistant_message"] for k in shown), shown
