"""Token streaming end to end through the real runner, litellm and the fake LLM: chunks reach open tabs and
`stream_tokens` SSE callers as they arrive; the stored step is the same as without streaming; providers that
cannot stream fall back; a stream that breaks midway fails the step and leaves the state as before it."""

import dataclasses
import json
import re

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agents_ide.routing import websocket_urlpatterns
from core.models import RUN_TERMINAL, Message, Run, Step
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)
REPLY = "Streaming, one small piece at a time."


def _paced(reply, chunk_s=0.02):
    return dataclasses.replace(reply, chunk_s=chunk_s)


# A streamed reply's first chunk comes after a model's usual latency: the caller's stream subscribes to the run's
# events as its response starts, and chunks sent before that are not replayed (stored messages are).
FIRST_CHUNK_S = 0.3


def _slow_start(reply):
    return dataclasses.replace(reply, latency=FIRST_CHUNK_S)


def _frames(response) -> list[dict]:
    raw = b"".join(response).decode()
    assert raw.endswith("data: [DONE]\n\n")
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


@pytest.fixture
def agent(account, fake_llm):
    fake_llm.stream_chunk_chars = 4
    return make_agent(account.org)


async def test_an_open_tab_sees_chunks_arrive_before_the_step_commits(account, agent, fake_llm):
    from asgiref.sync import sync_to_async

    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/agents/{agent.id}/")
    comm.scope["user"] = account.user
    assert (await comm.connect())[0]
    fake_llm.script(_paced(FakeLLM.tool("send_message", {"message": REPLY}, thinking="pick words")))
    await sync_to_async(ApiClient(account.token).post)(f"/v1/agents/{agent.id}/messages/async", {"input": "hi"})
    seen = []
    while not (seen and seen[-1].get("message_type") == "run_status" and seen[-1]["status"] == "completed"):
        seen.append(await comm.receive_json_from(timeout=30))
    await comm.disconnect()
    final = next(e for e in seen if e["message_type"] == "assistant_message" and not e.get("delta"))
    chunks = [e for e in seen[: seen.index(final)] if e.get("delta")]
    answer = [c["content"] for c in chunks if c["message_type"] == "assistant_message"]
    assert len(answer) >= 3 and "".join(answer) == REPLY == final["content"]
    assert "".join(c["reasoning"] for c in chunks if c["message_type"] == "reasoning_message") == "pick words"
    assert {c["id"] for c in chunks} == {final["id"]} and all(c["step_id"] == final["step_id"] for c in chunks)


def test_sse_with_stream_tokens_sends_chunks_then_whole_tool_returns(api, agent, fake_llm):
    fake_llm.script(  # paced: chunks that arrive together are sent merged (core.runs.emit)
        _slow_start(_paced(FakeLLM.tool("archival_memory_search", {"query": "cats"}, heartbeat=True), 0.04)),
        _paced(FakeLLM.tool("send_message", {"message": REPLY}), 0.04),
    )
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "stream_tokens": True}))
    kinds = [f["message_type"] for f in frames]
    assert kinds[-2:] == ["stop_reason", "usage_statistics"]
    calls = [f for f in frames if f["message_type"] == "tool_call_message"]
    assert len(calls) > 1 and all(f.get("delta") for f in calls)  # fragments, not one whole call
    assert json.loads("".join(f["tool_call"]["arguments"] or "" for f in calls))["query"] == "cats"
    returns = [f for f in frames if f["message_type"] == "tool_return_message"]
    # whole, as in step mode; send_message's own return is not sent (Letta hides it)
    assert len(returns) == 1 and not any(r.get("delta") for r in returns)
    answer = [f for f in frames if f["message_type"] == "assistant_message"]
    assert len(answer) > 1 and all(f.get("delta") for f in answer) and "".join(f["content"] for f in answer) == REPLY
    stored = Message.objects.get(role="assistant", tool_calls__0__name="send_message")
    assert {f["id"] for f in answer} == {stored.id}


def test_sse_without_stream_tokens_sends_whole_messages(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi"}))
    assert not any(f.get("delta") for f in frames)
    assert [f["content"] for f in frames if f["message_type"] == "assistant_message"] == [REPLY]


def _exchange(api, agent, fake_llm, streaming: bool):
    """The same exchange as a plain request, or followed token by token (a stream_tokens SSE caller)."""
    fake_llm.script(
        _slow_start(
            FakeLLM.tool(
                "core_memory_append", {"label": "human", "content": "Likes tea."}, thinking="note it", heartbeat=True
            )
        ),
        FakeLLM.tool("send_message", {"message": REPLY}),
    )
    if streaming:
        frames = _frames(
            api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "I like tea", "stream_tokens": True})
        )
        assert any(f.get("delta") for f in frames)
        run_id = frames[0]["run_id"]
    else:
        run_id = api.post(f"/v1/agents/{agent.id}/messages", {"input": "I like tea"}).json()["run_id"]
    return run_id, list(Step.objects.filter(run_id=run_id).order_by("index"))


def _scrub(value):
    """The record without what differs between any two runs: tool-call ids the fake invents, clock times."""
    text = re.sub(r"call_[0-9a-f]+", "call_X", json.dumps(value, sort_keys=True))
    return json.loads(re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [AP]M", "TIME", text))


def _record(step) -> dict:
    message = step.response["choices"][0]["message"]
    return _scrub(
        {
            "request": step.request,
            "sections": [s["name"] for s in step.context_sections],
            "tokenizer": step.tokenizer,
            "message": {k: message.get(k) for k in ("role", "content", "tool_calls")},
            "finish": step.response["choices"][0]["finish_reason"],
            "model": step.response["model"],
            "usage": {k: step.usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        }
    )


def test_a_streamed_step_stores_the_same_record_as_a_plain_one(account, fake_llm):
    from core.runs.executor import run_reply

    api = ApiClient(account.token)
    records, replies = [], []
    for streaming in (False, True):
        agent = make_agent(account.org, name=f"s{streaming}")
        run_id, steps = _exchange(api, agent, fake_llm, streaming)
        replies.append([(m["message_type"], m.get("content")) for m in run_reply(run=Run.objects.get(pk=run_id))])
        records.append([_record(s) for s in steps])
    assert [bool(r.get("stream")) for r in fake_llm.chat_requests] == [False, False, True, True]
    assert records[0] == records[1] and len(records[0]) == 2
    assert _scrub(replies[0]) == _scrub(replies[1])
    assert [r.model_ms > 0 and r.total_ms > 0 for r in Step.objects.all()] == [True] * 4


def test_a_provider_that_cannot_stream_is_asked_again_without(api, agent, fake_llm):
    fake_llm.streaming = False
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "stream_tokens": True}))
    assert frames[-2] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
    assert [f["content"] for f in frames if f["message_type"] == "assistant_message"] == [REPLY]  # whole, no chunks
    assert [bool(r.get("stream")) for r in fake_llm.chat_requests] == [True, False]


def test_a_reply_nobody_follows_is_not_streamed(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    assert api.post(f"/v1/agents/{agent.id}/messages", {"input": "hi"}).status_code == 200
    assert [bool(r.get("stream")) for r in fake_llm.chat_requests] == [False]


def test_a_stream_that_breaks_midway_fails_the_step_and_changes_nothing(api, agent, fake_llm):
    before = list(Message.objects.filter(agent=agent).values_list("id", flat=True))
    fake_llm.script(_slow_start(dataclasses.replace(FakeLLM.tool("send_message", {"message": REPLY}), break_after=6)))
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "stream_tokens": True}))
    assert any(f.get("delta") for f in frames)  # chunks went out before the break
    [error] = [f for f in frames if f["message_type"] == "error_message"]
    assert "stream ended before the reply was complete" in error["message"]
    assert frames[-2] == {"message_type": "stop_reason", "stop_reason": "llm_api_error"}
    run = Run.objects.get(agent=agent)
    assert run.status == "failed" and "stream ended" in run.error
    # nothing but the accepted input, kept outside the window and linked to no step
    kept = Message.objects.filter(agent=agent).exclude(pk__in=before)
    assert [(m.role, m.text, m.run_id, m.step_id) for m in kept] == [("user", "hi", run.id, None)]
    agent.refresh_from_db()
    assert agent.message_ids == before
    [step] = Step.objects.filter(run=run)
    assert step.stop_reason == "llm_api_error" and step.error and not step.response


def test_a_stream_read_only_after_its_run_ended_still_gets_every_chunk(api, agent, fake_llm):
    """The caller follows the agent's events from before its run is submitted: chunks the run sent before the
    response started streaming wait for it (they used to be lost, and the reply came whole or without its start)."""
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    response = api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "stream_tokens": True})
    until(lambda: Run.objects.filter(agent=agent, status__in=RUN_TERMINAL).exists(), what="the run to end")
    frames = _frames(response)
    answer = [f for f in frames if f["message_type"] == "assistant_message"]
    assert answer and all(f.get("delta") for f in answer), answer  # chunks (merged when they came together)
    assert "".join(f["content"] for f in answer) == REPLY
    assert frames[-2] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
