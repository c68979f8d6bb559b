"""Runs that wait for a person or a client (Letta's human-in-the-loop approvals and client-side tools), through the
API with the fake model: the run stops `requires_approval` with an approval_request_message, a normal send gets
Letta's 409, the answer (approve, deny with a reason, a client's result) resumes the loop as a new run, and a wait
nobody answers ends by cancel or expiry with its calls denied."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import Agent, Message, Run
from core.runs import waits
from memory.models import Passage
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

APPROVE_INSERT = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]


def _send(api, agent, body):
    return api.post(f"/v1/agents/{agent.id}/messages", body)


def _say(api, agent, text, **extra):
    return _send(api, agent, {"messages": [{"role": "user", "content": text}], **extra})


def _answer(api, agent, approvals, **extra):
    return _send(api, agent, {"messages": [{"type": "approval", "approvals": approvals}], **extra})


def _types(messages):
    return [m["message_type"] for m in messages]


def _tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


@pytest.fixture
def v2(account, fake_llm):
    return make_agent(account.org, tool_rules=APPROVE_INSERT)


@pytest.fixture
def v1(account, fake_llm):
    return make_agent(account.org, agent_type="letta_v1_agent", tool_rules=APPROVE_INSERT)


def _pause(api, agent, fake_llm, content="the launch code is 42"):
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": content}, heartbeat=True))
    r = _say(api, agent, "remember the launch code")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["stop_reason"]["stop_reason"] == "requires_approval"
    asks = [m for m in body["messages"] if m["message_type"] == "approval_request_message"]
    assert len(asks) == 1
    return body, asks[0]


@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_an_approved_call_runs_and_the_loop_goes_on(api, request, fake_llm, kind):
    agent = request.getfixturevalue(kind)
    body, ask = _pause(api, agent, fake_llm)
    call = ask["tool_calls"][0]
    assert ask["tool_call"] == call and call["name"] == "archival_memory_insert"
    assert json.loads(call["arguments"])["content"] == "the launch code is 42"
    assert Passage.objects.filter(agent=agent).count() == 0  # nothing ran yet
    run = api.get(f"/v1/runs/{body['run_id']}").json()
    assert run["status"] == "completed" and run["stop_reason"] == "requires_approval"
    assert (
        run["waiting"]["kind"] == "approval" and run["waiting"]["tool_calls"][0]["tool_call_id"] == call["tool_call_id"]
    )
    assert Agent.objects.get(pk=agent.pk).last_stop_reason == "requires_approval"

    reply = FakeLLM.tool("send_message", {"message": "Saved."}) if kind == "v2" else FakeLLM.text("Saved.")
    fake_llm.script(reply)
    r = _answer(api, agent, [{"type": "approval", "tool_call_id": call["tool_call_id"], "approve": True}])
    assert r.status_code == 200, r.content
    out = r.json()
    assert out["run_id"] != body["run_id"] and out["stop_reason"]["stop_reason"] == "end_turn"
    assert _types(out["messages"])[0] == "tool_return_message"
    assert out["messages"][0]["tool_call_id"] == call["tool_call_id"] and out["messages"][0]["status"] == "success"
    assert [m["content"] for m in out["messages"] if m["message_type"] == "assistant_message"] == ["Saved."]
    assert Passage.objects.filter(agent=agent, text="the launch code is 42").count() == 1
    # the model then saw its call's result, as after any step
    sent = _tool_messages(fake_llm.chat_requests[-1])
    assert sent[-1]["tool_call_id"] == call["tool_call_id"] and '"status": "OK"' in sent[-1]["content"]
    assert api.get(f"/v1/runs/{body['run_id']}").json()["waiting"] is None
    # the history lists the request and the answer as Letta does
    listed = api.get(f"/v1/agents/{agent.id}/messages?order=asc&limit=50").json()
    kinds = _types(listed)
    assert kinds.index("approval_request_message") < kinds.index("approval_response_message")
    said = next(m for m in listed if m["message_type"] == "approval_response_message")
    assert said["approve"] is True and said["approval_request_id"] == call["tool_call_id"]
    assert said["approvals"][0]["type"] == "approval"


@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_a_denied_call_does_not_run_and_the_model_reads_the_reason(api, request, fake_llm, kind):
    agent = request.getfixturevalue(kind)
    _, ask = _pause(api, agent, fake_llm)
    call_id = ask["tool_calls"][0]["tool_call_id"]
    reply = FakeLLM.tool("send_message", {"message": "Understood."}) if kind == "v2" else FakeLLM.text("Understood.")
    fake_llm.script(reply)
    r = _answer(api, agent, [{"type": "approval", "tool_call_id": call_id, "approve": False, "reason": "not now"}])
    assert r.status_code == 200, r.content
    assert r.json()["stop_reason"]["stop_reason"] == "end_turn"
    assert Passage.objects.filter(agent=agent).count() == 0
    seen = json.loads(_tool_messages(fake_llm.chat_requests[-1])[-1]["content"])
    assert seen["status"] == "Failed"
    assert seen["message"] == "Error: request to call tool denied. User reason: not now"
    stored = Message.objects.get(agent=agent, role="tool", tool_call_id=call_id)
    assert stored.tool_return["status"] == "error"


def test_a_send_while_waiting_is_409_naming_the_wait_and_a_wrong_answer_is_refused(api, v2, fake_llm):
    body, ask = _pause(api, v2, fake_llm)
    r = _say(api, v2, "hello?")
    assert r.status_code == 409
    assert "waiting for approval" in r.json()["detail"]
    assert r.json()["errors"]["run_id"] == body["run_id"]
    assert r.json()["errors"]["code"] == "PENDING_APPROVAL"
    wrong = _answer(api, v2, [{"type": "approval", "tool_call_id": "toolu_nope", "approve": True}])
    assert wrong.status_code == 400 and "Invalid tool call IDs" in wrong.json()["detail"]
    empty = _send(api, v2, {"messages": [{"type": "approval", "approvals": []}]})
    assert empty.status_code == 400 and "does not contain any approvals" in empty.json()["detail"]
    # nothing was claimed or written by the refusals: the wait is still there
    assert Run.objects.get(pk=body["run_id"]).waiting_until is not None
    assert Run.objects.filter(agent=v2).count() == 1


def test_an_answer_with_nothing_waiting_is_refused(api, v2, fake_llm):
    r = _answer(api, v2, [{"type": "approval", "tool_call_id": "toolu_x", "approve": True}])
    assert r.status_code == 400
    assert "No tool call is currently awaiting approval" in r.json()["detail"]


def test_several_calls_in_one_step_every_waiting_one_answered_the_others_run_with_them(api, account, fake_llm):
    agent = make_agent(
        account.org,
        tool_rules=[
            {"type": "requires_approval", "tool_name": "archival_memory_insert"},
            {"type": "requires_approval", "tool_name": "core_memory_append"},
        ],
    )
    fake_llm.script(
        FakeLLM.tools(
            ("archival_memory_insert", {"content": "first", "request_heartbeat": True}),
            ("core_memory_append", {"label": "human", "content": "Likes tea.", "request_heartbeat": True}),
            ("conversation_search", {"query": "tea", "request_heartbeat": True}),
        )
    )
    first = _say(api, agent, "do three things").json()
    ask = next(m for m in first["messages"] if m["message_type"] == "approval_request_message")
    ids = [c["tool_call_id"] for c in ask["tool_calls"]]
    assert [c["name"] for c in ask["tool_calls"]] == ["archival_memory_insert", "core_memory_append"]
    deferred = [m for m in first["messages"] if m["message_type"] == "tool_call_message"]
    assert [m["tool_call"]["name"] for m in deferred] == ["conversation_search"]  # shown, not run yet
    half = _answer(api, agent, [{"type": "approval", "tool_call_id": ids[0], "approve": True}])
    assert half.status_code == 400 and "Invalid tool call IDs" in half.json()["detail"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Done."}))
    r = _answer(
        api,
        agent,
        [
            {"type": "approval", "tool_call_id": ids[1], "approve": False, "reason": "keep memory clean"},
            {"type": "approval", "tool_call_id": ids[0], "approve": True},
        ],
    )
    assert r.status_code == 200, r.content
    seen = {m["tool_call_id"]: json.loads(m["content"]) for m in _tool_messages(fake_llm.chat_requests[-1])}
    assert seen[ids[0]]["status"] == "OK"
    assert seen[ids[1]]["message"].endswith("User reason: keep memory clean")
    search_id = deferred[0]["tool_call"]["tool_call_id"]
    assert seen[search_id]["status"] == "OK"  # the deferred call ran with the answers
    assert "Likes tea." not in json.dumps(api.get(f"/v1/agents/{agent.id}/core-memory/blocks/human").json())


def test_a_client_tool_is_offered_its_call_waits_and_the_clients_result_goes_back(api, v1, fake_llm):
    bash = {
        "name": "Bash",
        "description": "Run a shell command on the user's machine.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }
    fake_llm.script(FakeLLM.tool("Bash", {"command": "ls"}))
    r = _say(api, v1, "list my files", client_tools=[bash])
    assert r.status_code == 200, r.content
    offered = {t["function"]["name"]: t["function"] for t in fake_llm.chat_requests[-1]["tools"]}
    assert offered["Bash"]["parameters"]["required"] == ["command"]
    ask = next(m for m in r.json()["messages"] if m["message_type"] == "approval_request_message")
    call_id = ask["tool_call"]["tool_call_id"]
    assert Run.objects.get(pk=r.json()["run_id"]).waiting["kind"] == "client"
    fake_llm.script(FakeLLM.text("You have a.txt and b.txt."))
    r2 = _send(
        api,
        v1,
        {
            "messages": [
                {
                    "type": "approval",
                    "approvals": [
                        {
                            "type": "tool",
                            "tool_call_id": call_id,
                            "status": "success",
                            "tool_return": "a.txt\nb.txt",
                            "stdout": ["a.txt\nb.txt"],
                            "stderr": [],
                        }
                    ],
                }
            ],
            "client_tools": [bash],
        },
    )
    assert r2.status_code == 200, r2.content
    out = r2.json()
    assert _types(out["messages"]) == ["tool_return_message", "assistant_message"]
    assert out["messages"][0]["tool_return"] == "a.txt\nb.txt"  # as the client sent it, as Letta lists it
    assert out["messages"][0]["stdout"] == ["a.txt\nb.txt"]
    seen = json.loads(_tool_messages(fake_llm.chat_requests[-1])[-1]["content"])
    assert seen == {"status": "OK", "message": "a.txt\nb.txt", "time": seen["time"]}
    stored = Message.objects.get(agent=v1, role="tool", tool_call_id=call_id)
    assert stored.tool_return["sandbox"] == "client" and stored.tool_return["stdout"] == "a.txt\nb.txt"


def test_a_client_tool_answered_by_approval_fails_for_the_model_instead_of_running(api, v1, fake_llm):
    fake_llm.script(FakeLLM.tool("Read", {"path": "x"}))
    r = _say(api, v1, "read x", client_tools=[{"name": "Read"}])
    call_id = next(m for m in r.json()["messages"] if m["message_type"] == "approval_request_message")["tool_call"][
        "tool_call_id"
    ]
    fake_llm.script(FakeLLM.text("ok"))
    r2 = _answer(api, v1, [{"type": "approval", "tool_call_id": call_id, "approve": True}])
    assert r2.status_code == 200
    seen = json.loads(_tool_messages(fake_llm.chat_requests[-1])[-1]["content"])
    assert seen["status"] == "Failed" and "client-side tool" in seen["message"]


def _sse(resp) -> list[dict]:
    text = b"".join(resp).decode()  # consumes the async stream (WSGI-style)
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_streamed_token_by_token_the_waiting_call_arrives_as_approval_request_chunks(api, v1, fake_llm):
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "streamed fact"}))
    r = api.post(
        f"/v1/agents/{v1.id}/messages/stream",
        {"messages": [{"role": "user", "content": "save it"}], "stream_tokens": True},
    )
    events = _sse(r)
    chunks = [e for e in events if e.get("message_type") == "approval_request_message"]
    assert chunks and all(isinstance(c["tool_calls"], dict) and c["tool_calls"] == c["tool_call"] for c in chunks)
    assert chunks[0]["tool_call"]["name"] == "archival_memory_insert"
    args = "".join(c["tool_call"].get("arguments") or "" for c in chunks)
    assert json.loads(args)["content"] == "streamed fact"
    assert not [e for e in events if e.get("message_type") == "tool_call_message"]
    assert {"message_type": "stop_reason", "stop_reason": "requires_approval"} in events


def test_streamed_step_by_step_the_answer_streams_the_rest_of_the_turn(api, v2, fake_llm):
    _, ask = _pause(api, v2, fake_llm)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Stored it."}))
    r = api.post(
        f"/v1/agents/{v2.id}/messages/stream",
        {
            "messages": [
                {
                    "type": "approval",
                    "approvals": [
                        {"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": True}
                    ],
                }
            ]
        },
    )
    events = _sse(r)
    kinds = [e["message_type"] for e in events]
    assert kinds[0] == "tool_return_message" and "assistant_message" in kinds
    assert {"message_type": "stop_reason", "stop_reason": "end_turn"} in events


def test_the_legacy_single_answer_and_tool_return_forms_are_taken(api, v1, fake_llm):
    body, ask = _pause(api, v1, fake_llm)
    fake_llm.script(FakeLLM.text("ok"))
    r = _send(
        api,
        v1,
        {"messages": [{"type": "approval", "approve": False, "approval_request_id": ask["id"], "reason": "legacy"}]},
    )
    assert r.status_code == 200, r.content
    assert json.loads(_tool_messages(fake_llm.chat_requests[-1])[-1]["content"])["message"].endswith("legacy")
    fake_llm.script(FakeLLM.tool("Grep", {"pattern": "x"}))
    r = _say(api, v1, "grep", client_tools=[{"name": "Grep"}])
    call_id = r.json()["messages"][-1]["tool_call"]["tool_call_id"]
    fake_llm.script(FakeLLM.text("none found"))
    r = _send(
        api,
        v1,
        {
            "messages": [
                {
                    "type": "tool_return",
                    "tool_returns": [{"tool_call_id": call_id, "status": "error", "tool_return": "grep: no match"}],
                }
            ]
        },
    )
    assert r.status_code == 200, r.content
    seen = json.loads(_tool_messages(fake_llm.chat_requests[-1])[-1]["content"])
    assert seen["status"] == "Failed" and seen["message"] == "grep: no match"


def test_cancelling_a_waiting_run_denies_its_calls_and_frees_the_agent(api, v2, fake_llm):
    body, ask = _pause(api, v2, fake_llm)
    r = api.post(f"/v1/agents/{v2.id}/messages/cancel", {})
    assert body["run_id"] in r.json()
    run = Run.objects.get(pk=body["run_id"])
    assert run.waiting_until is None and run.stop_reason == "cancelled"
    tool = Message.objects.get(agent=v2, role="tool", tool_call_id=ask["tool_call"]["tool_call_id"])
    assert "The user cancelled the request" in tool.text
    assert tool.id in Agent.objects.get(pk=v2.pk).message_ids
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi again."}))
    assert _say(api, v2, "hello").status_code == 200


def test_a_wait_nobody_answers_expires_with_a_clear_stop_reason(api, v2, fake_llm):
    body, ask = _pause(api, v2, fake_llm)
    Run.objects.filter(pk=body["run_id"]).update(waiting_until=timezone.now() - timedelta(seconds=1))
    assert waits.expire_due() == [body["run_id"]]
    run = api.get(f"/v1/runs/{body['run_id']}").json()
    assert run["stop_reason"] == "expired" and run["waiting"] is None and "Nobody answered" in run["error"]
    late = _answer(api, v2, [{"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": True}])
    assert late.status_code == 400 and "No tool call is currently awaiting approval" in late.json()["detail"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Back."}))
    assert _say(api, v2, "hello").status_code == 200
    seen = _tool_messages(fake_llm.chat_requests[-1])
    assert "Nobody answered the approval request in time" in seen[-1]["content"]


def test_an_expired_wait_is_ended_by_the_next_send_even_before_the_sweep(api, v2, fake_llm):
    body, _ = _pause(api, v2, fake_llm)
    Run.objects.filter(pk=body["run_id"]).update(waiting_until=timezone.now() - timedelta(seconds=1))
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Back."}))
    assert _say(api, v2, "hello").status_code == 200
    assert Run.objects.get(pk=body["run_id"]).stop_reason == "expired"


def test_the_wait_is_in_the_database_only_a_fresh_process_state_answers_it(api, v2, fake_llm):
    """Nothing of a waiting run lives in the process: with the message cache emptied (as after a restart), the
    answer still resumes from the stored run and reply."""
    from core.agents import context

    _, ask = _pause(api, v2, fake_llm)
    context._cache.clear()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Resumed."}))
    r = _answer(api, v2, [{"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": True}])
    assert r.status_code == 200 and r.json()["stop_reason"]["stop_reason"] == "end_turn"


def test_the_agent_shows_its_pending_approval_when_asked_and_lists_by_last_stop_reason(api, v2, fake_llm):
    assert api.get(f"/v1/agents/{v2.id}?include=agent.pending_approval").json()["pending_approval"] is None
    _, ask = _pause(api, v2, fake_llm)
    state = api.get(f"/v1/agents/{v2.id}?include=agent.pending_approval").json()
    assert state["pending_approval"]["message_type"] == "approval_request_message"
    assert state["pending_approval"]["tool_calls"] == ask["tool_calls"]
    assert api.get(f"/v1/agents/{v2.id}").json()["pending_approval"] is None  # only when asked, as Letta
    listed = api.get("/v1/agents/?last_stop_reason=requires_approval").json()
    assert [a["id"] for a in listed] == [v2.id]
