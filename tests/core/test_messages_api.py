"""Messages, runs, steps, reset and context over HTTP (Letta v1 shapes)."""

import json
import threading

import pytest

from core.models import Message
from core.runs.request import RunRequest
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

# Runs execute on the run pool's own threads and connections: the data they read must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _send(api, agent, text="hi", **extra):
    return api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}], **extra})


def test_send_returns_letta_response(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello!"}))
    r = _send(api, agent)
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["stop_reason"] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
    assert body["usage"]["message_type"] == "usage_statistics" and body["usage"]["step_count"] == 1
    assistant = [m for m in body["messages"] if m["message_type"] == "assistant_message"]
    assert assistant[0]["content"] == "Hello!"
    assert all(m["run_id"] == body["run_id"] and m["step_id"] and m["id"] and m["date"] for m in body["messages"])


def test_send_with_content_parts_and_input_sugar(api, agent, fake_llm):
    r = api.post(
        f"/v1/agents/{agent.id}/messages",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
    )
    assert r.status_code == 200
    r = api.post(f"/v1/agents/{agent.id}/messages", {"input": "sugar"})
    assert r.status_code == 200
    sent = [m["messages"][-1]["content"] for m in fake_llm.chat_requests]
    assert sent == ["parts", "sugar"]


def test_send_use_assistant_message_false_shows_tool_call(api, agent, fake_llm):
    body = _send(api, agent, use_assistant_message=False).json()
    types = [m["message_type"] for m in body["messages"]]
    assert "assistant_message" not in types and "tool_call_message" in types
    call = [m for m in body["messages"] if m["message_type"] == "tool_call_message"][0]["tool_call"]
    assert call["name"] == "send_message" and json.loads(call["arguments"])["message"] == "ok"


def test_empty_message_is_rejected(api, agent):
    r = _send(api, agent, "   ")
    assert r.status_code == 422 and "no text" in r.json()["detail"]


def test_no_provider_configured_gives_400_with_how_to(api, account, monkeypatch):
    agent = make_agent(account.org)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    r = _send(api, agent)
    assert r.status_code == 400 and "OPENAI_API_KEY" in r.json()["detail"]
    assert api.get(f"/v1/agents/{agent.id}").status_code == 200
    assert api.get(f"/v1/agents/{agent.id}/context").status_code == 200


def test_other_owner_gets_404(agent, other_account):
    other = ApiClient(other_account.token)
    assert _send(other, agent).status_code == 404
    assert other.get(f"/v1/agents/{agent.id}/messages").status_code == 404


def test_list_messages_pages_as_letta_does(api, agent, fake_llm):
    # letta/services/message_manager.py list_messages: `after` is newer and `before` older whatever the order; a
    # desc page holds the newest `limit` messages and comes back oldest first (server.py get_agent_recall_async)
    for i in range(3):
        _send(api, agent, f"m{i}")
    everything = api.get(f"/v1/agents/{agent.id}/messages?order=asc&limit=100").json()
    seqs = [m["seq_id"] for m in everything]
    assert everything[0]["message_type"] == "system_message" and seqs == sorted(seqs)
    newest = api.get(f"/v1/agents/{agent.id}/messages?limit=3").json()
    assert [m["id"] for m in newest] == [m["id"] for m in everything[-3:]]
    asc = api.get(f"/v1/agents/{agent.id}/messages?order=asc&limit=3").json()
    after = api.get(f"/v1/agents/{agent.id}/messages?order=asc&after={asc[-1]['id']}&limit=2").json()
    assert [m["id"] for m in after] == [m["id"] for m in everything[3:5]]
    cursor = everything[-4]
    newer = api.get(f"/v1/agents/{agent.id}/messages?after={cursor['id']}").json()
    assert [m["id"] for m in newer] == [m["id"] for m in everything[-3:]]
    older = api.get(f"/v1/agents/{agent.id}/messages?before={cursor['id']}&limit=2").json()
    assert [m["id"] for m in older] == [m["id"] for m in everything[-6:-4]]
    assert api.get(f"/v1/agents/{agent.id}/messages?after={everything[-1]['id']}").json() == []
    users = api.get(f"/v1/agents/{agent.id}/messages?include_return_message_types=user_message").json()
    assert {m["message_type"] for m in users} == {"user_message"} and len(users) == 3


def test_reset_keeps_rows_and_empties_window(api, agent, fake_llm):
    _send(api, agent)
    n = Message.objects.filter(agent=agent).count()
    api.patch(f"/v1/agents/{agent.id}", {"system": "You are terse now."})
    r = api.patch(f"/v1/agents/{agent.id}/reset-messages", {})
    assert r.status_code == 200 and len(r.json()["message_ids"]) == 1
    # Old rows stay (recall memory); a fresh system message from the current prompt marks the reset.
    assert Message.objects.filter(agent=agent).count() == n + 1
    fresh = Message.objects.get(pk=r.json()["message_ids"][0])
    assert fresh.role == "system" and fresh.text == "You are terse now."
    ctx = api.get(f"/v1/agents/{agent.id}/context").json()
    assert ctx["num_messages"] == 1 and ctx["num_recall_memory"] == n


def test_reset_refuses_while_a_run_is_active(api, agent, fake_llm):
    from core.runs import runner

    run = runner.run_start(
        RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
    )
    r = api.patch(f"/v1/agents/{agent.id}/reset-messages", {})
    assert r.status_code == 409 and run.id in r.json()["detail"]


def test_context_overview_matches_next_request(api, agent, fake_llm):
    _send(api, agent)
    ctx = api.get(f"/v1/agents/{agent.id}/context").json()
    for key in (
        "context_window_size_max",
        "context_window_size_current",
        "num_messages",
        "num_tokens_system",
        "system_prompt",
        "num_tokens_core_memory",
        "core_memory",
        "num_tokens_functions_definitions",
        "num_tokens_messages",
        "external_memory_summary",
        "tokenizer",
        "sections",
        "request",
    ):
        assert key in ctx
    assert ctx["context_window_size_max"] == 16000
    assert sum(s["tokens"] for s in ctx["sections"]) < ctx["context_window_size_current"]
    _send(api, agent, "next")
    sent = fake_llm.chat_requests[-1]

    def clean(msgs):  # litellm leaves out `content: null`
        return [{k: v for k, v in m.items() if v is not None} for m in msgs]

    assert clean(sent["messages"][:-1]) == clean(ctx["request"]["messages"])
    assert [t["function"]["name"] for t in sent["tools"]] == [t["function"]["name"] for t in ctx["request"]["tools"]]


def test_runs_and_steps_expose_the_exact_payload(api, agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    body = _send(api, agent).json()
    run = api.get(f"/v1/runs/{body['run_id']}").json()
    assert run["status"] == "completed" and run["stop_reason"] == "end_turn"
    steps = api.get(f"/v1/runs/{body['run_id']}/steps").json()
    assert len(steps) == 2
    clean = lambda msgs: [{k: v for k, v in m.items() if v is not None} for m in msgs]  # noqa: E731
    assert clean(steps[1]["request"]["messages"]) == clean(fake_llm.chat_requests[1]["messages"])
    assert steps[0]["model_ms"] > 0 and steps[0]["usage"]["total_tokens"] > 0
    one = api.get(f"/v1/steps/{steps[0]['id']}").json()
    assert one["id"] == steps[0]["id"] and one["tokenizer"]
    msgs = api.get(f"/v1/runs/{body['run_id']}/messages").json()
    # send_message's return is hidden, as in the agent's messages list
    assert msgs[0]["message_type"] == "user_message" and msgs[-1]["message_type"] == "assistant_message"


def test_llm_error_response(api, agent, fake_llm):
    fake_llm.script(FakeLLM.error(500, "provider exploded"))
    body = _send(api, agent).json()
    assert body["stop_reason"]["stop_reason"] == "llm_api_error"
    assert "provider exploded" in body["error"]


def test_cancel_endpoint_without_active_run(api, agent):
    r = api.post(f"/v1/agents/{agent.id}/messages/cancel", {})
    assert r.status_code == 200 and r.json() == {}


def _sse_events(response) -> list:
    raw = b"".join(response).decode()  # consumes the async stream (WSGI-style)
    frames = [f for f in raw.split("\n\n") if f.strip()]
    return frames


@pytest.mark.django_db(transaction=True)
def test_stream_endpoint_sends_sse_frames_then_done(account, fake_llm):
    agent = make_agent(account.org)
    api = ApiClient(account.token)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "streamed"}, thinking="hmm"))
    r = api.post(f"/v1/agents/{agent.id}/messages/stream", {"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/event-stream")
    frames = _sse_events(r)
    assert frames[-1] == "data: [DONE]"
    events = [json.loads(f[len("data: ") :]) for f in frames[:-1]]
    types = [e["message_type"] for e in events]
    assert types == [
        "reasoning_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
    ]  # send_message's return: hidden
    assert events[1]["content"] == "streamed"


@pytest.mark.django_db(transaction=True)
def test_a_stream_without_assistant_messages_sends_send_messages_call_and_return(account, fake_llm):
    # Letta streams send_message as a tool call and its return when use_assistant_message is false (its
    # integration_test_send_message.py test_step_streaming_greeting_without_assistant_message)
    agent = make_agent(account.org, agent_type="memgpt_v2_agent")
    api = ApiClient(account.token)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "streamed"}))
    body = {"messages": [{"role": "user", "content": "hi"}], "use_assistant_message": False}
    frames = _sse_events(api.post(f"/v1/agents/{agent.id}/messages/stream", body))
    events = [json.loads(f[len("data: ") :]) for f in frames[:-1]]
    assert [e["message_type"] for e in events] == [
        "tool_call_message",
        "tool_return_message",
        "stop_reason",
        "usage_statistics",
    ]
    call, ret = events[0], events[1]
    assert (
        call["tool_call"]["name"] == "send_message"
        and json.loads(call["tool_call"]["arguments"])["message"] == "streamed"
    )
    assert ret["tool_call_id"] == call["tool_call"]["tool_call_id"] and ret["status"] == "success"
    listed = api.get(f"/v1/agents/{agent.id}/messages?use_assistant_message=false&limit=2").json()
    assert [m["id"] for m in listed] == [call["id"], ret["id"]]  # what the stream sent is what is stored


@pytest.mark.django_db(transaction=True)
def test_token_stream_without_assistant_messages_streams_send_messages_call_in_chunks(account, fake_llm):
    # Letta's test_token_streaming_greeting_without_assistant_message: with stream_tokens and use_assistant_message
    # false the reply comes as more than one tool_call_message chunk of send_message, then its return
    agent = make_agent(account.org, agent_type="memgpt_v2_agent")
    api = ApiClient(account.token)
    text = 'A longer reply about "teamwork", sent in pieces. ' * 6
    fake_llm.script(FakeLLM.tool("send_message", {"message": text}))
    body = {"messages": [{"role": "user", "content": "hi"}], "use_assistant_message": False, "stream_tokens": True}
    frames = _sse_events(api.post(f"/v1/agents/{agent.id}/messages/stream", body))
    events = [json.loads(f[len("data: ") :]) for f in frames[:-1]]
    kinds = [e["message_type"] for e in events]
    assert "assistant_message" not in kinds
    chunks = [e for e in events if e["message_type"] == "tool_call_message"]
    assert len(chunks) > 1 and all(c.get("delta") for c in chunks)
    assert all(c["tool_call"]["name"] == "send_message" and c["tool_calls"] == c["tool_call"] for c in chunks)
    assert json.loads("".join(c["tool_call"]["arguments"] for c in chunks)) == {"message": text}
    assert kinds.index("tool_return_message") > kinds.index("tool_call_message")
    assert kinds[-2:] == ["stop_reason", "usage_statistics"]


@pytest.mark.django_db(transaction=True)
def test_streaming_flag_and_error_event(account, fake_llm):
    agent = make_agent(account.org)
    api = ApiClient(account.token)
    fake_llm.script(FakeLLM.error(500, "kaboom"))
    r = _send(api, agent, streaming=True)
    frames = _sse_events(r)
    error = [f for f in frames if f.startswith("event: error")]
    assert error and "kaboom" in error[0]
    assert '"stop_reason": "llm_api_error"' in frames[-3] and frames[-1] == "data: [DONE]"


@pytest.mark.django_db(transaction=True)
def test_concurrent_sends_one_gets_409_and_nothing_interleaves(account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "slow"}, latency=1.0))
    statuses = []

    def send(text):
        from django.db import connection

        try:
            statuses.append(_send(ApiClient(account.token), agent, text).status_code)
        finally:
            connection.close()

    first = threading.Thread(target=send, args=("first",))
    first.start()
    until(lambda: fake_llm.chat_requests, timeout=30, what="the first run's model call")
    second = _send(ApiClient(account.token), agent, "second")
    first.join()
    assert second.status_code == 409 and "is currently being processed" in second.json()["detail"]
    assert statuses == [200]
    agent.refresh_from_db()
    rows = [Message.objects.get(pk=i) for i in agent.message_ids]
    assert [r.role for r in rows] == ["system", "user", "assistant", "tool"]
    assert rows[1].text == "first"
    assert _send(ApiClient(account.token), agent, "third").status_code == 200


def test_a_step_keeps_the_text_of_each_context_section(api, agent, fake_llm):
    body = _send(api, agent).json()
    [step] = api.get(f"/v1/runs/{body['run_id']}/steps").json()
    sections = {s["name"]: s for s in step["context_sections"]}
    assert sections["system"]["text"] == agent.system and sections["system"]["tokens"] > 0
    assert "The user's name is Alice." in sections["core_memory"]["text"]


@pytest.mark.parametrize(
    ("path", "extra", "free_slot"),
    [
        ("messages", {}, True),
        ("messages", {}, False),  # every slot of the pool taken: the run would be queued
        ("messages", {"streaming": True}, False),
        ("messages/async", {}, False),
    ],
    ids=["sync", "sync-queued", "stream", "async"],
)
def test_a_model_no_provider_serves_is_refused_and_nothing_is_claimed(
    api, account, agent, fake_llm, monkeypatch, path, extra, free_slot
):
    from core.models import QueuedTask, Run
    from core.runs import executor

    stray = make_agent(account.org, name="stray", model="nowhere/some-model")
    pool, taken, given = object(), [], []  # a stand-in run pool: which slots a send takes and gives back
    monkeypatch.setattr(executor.queue, "slot_take", lambda: (taken.append(pool) or pool) if free_slot else None)
    monkeypatch.setattr(executor.queue, "slot_give", given.append)
    tasks = QueuedTask.objects.count()
    r = api.post(f"/v1/agents/{stray.id}/{path}", {"messages": [{"role": "user", "content": "hi"}], **extra})
    assert r.status_code == 400 and "not served by a configured provider" in r.json()["detail"], r.content
    assert not Run.objects.filter(agent=stray).exists() and QueuedTask.objects.count() == tasks
    assert not Message.objects.filter(agent=stray).exclude(role="system").exists()
    assert taken == given == ([pool] if free_slot else [])  # the synchronous send's slot went back


def test_a_stored_shape_no_presenter_knows_never_fails_the_list_or_the_page(api, web, agent, fake_llm):
    """Rows written by another version (an older agent-file import kept stdout as Letta's list; a tool call list no
    version wrote) list as they can, or as a marker naming the message: never a 500, on the API or the IDE page."""
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "tea"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Nothing about tea."}),
    )
    assert _send(api, agent).status_code == 200
    ret = Message.objects.get(agent=agent, role="tool", name="conversation_search")
    call = Message.objects.filter(agent=agent, role="assistant").order_by("seq").first()
    # raw writes on purpose: these are shapes no write function of this version produces
    Message.objects.filter(pk=ret.pk).update(tool_return={"status": "success", "stdout": ["one\n", "two"]})
    Message.objects.filter(pk=call.pk).update(tool_calls=["not a call"])
    for query in ("", "?order=desc", "?limit=1", "?use_assistant_message=false"):
        r = api.get(f"/v1/agents/{agent.id}/messages{query}")
        assert r.status_code == 200, (query, r.content[:300])
    listed = api.get(f"/v1/agents/{agent.id}/messages?order=asc").json()
    assert next(m for m in listed if m["id"] == ret.id)["stdout"] == ["one\n", "two"]
    marker = [m for m in listed if m["id"] == call.id]
    assert [(m["message_type"], m["kind"]) for m in marker] == [("system_message", "unrenderable")]
    assert call.id in marker[0]["content"] and "could not be shown" in marker[0]["content"]
    page = web.get(f"/agents/{agent.id}/")
    assert page.status_code == 200 and f"({call.id}) could not be shown" in page.content.decode()
