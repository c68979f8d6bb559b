"""The agent websocket: runs started from a tab or the API reach every open tab on the agent."""

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agents_ide.routing import websocket_urlpatterns
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import agent_socket, events_until, until_async

pytestmark = pytest.mark.django_db(transaction=True)
APP = URLRouter(websocket_urlpatterns)


def _agent(account):
    return make_agent(account.org)


async def test_two_tabs_both_receive_a_run_started_in_one(account, fake_llm):
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello tabs"}, thinking="hm"))
    a, b = await agent_socket(account.user, agent.id), await agent_socket(account.user, agent.id)
    await a.send_json_to({"type": "user_message", "text": "hi"})
    seen_a, seen_b = await events_until(a, "run_status"), await events_until(b, "run_status")
    for seen in (seen_a, seen_b):
        types = [e["message_type"] for e in seen]
        for t in (
            "user_message",
            "reasoning_message",
            "assistant_message",
            "tool_return_message",
            "context_update",
            "stop_reason",
            "usage_statistics",
        ):
            assert t in types, (t, types)
        assert seen[-1]["status"] == "completed" and seen[-1]["stop_reason"] == "end_turn"
        assistant = [e for e in seen if e["message_type"] == "assistant_message" and not e.get("delta")][0]
        assert assistant["content"] == "hello tabs" and assistant["run_id"] and assistant["step_id"]
    await a.disconnect()
    await b.disconnect()


async def test_run_started_over_rest_is_pushed_to_open_tabs(account, fake_llm):
    from asgiref.sync import sync_to_async
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    tab = await agent_socket(account.user, agent.id)

    def send():
        from django.db import connection

        try:
            return ApiClient(account.token).post(f"/v1/agents/{agent.id}/messages", {"input": "from rest"}).status_code
        finally:
            connection.close()

    status = await sync_to_async(send, thread_sensitive=False)()
    assert status == 200
    seen = await events_until(tab, "run_status")
    assert any(e["message_type"] == "user_message" and e["content"] == "from rest" for e in seen)
    assert any(e["message_type"] == "assistant_message" for e in seen)
    await tab.disconnect()


async def test_bad_input_and_busy_agent_get_error_messages(account, fake_llm):
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "slow"}, latency=1.0))
    tab = await agent_socket(account.user, agent.id)
    await tab.send_json_to({"type": "user_message", "text": "  "})
    err = await tab.receive_json_from(timeout=5)
    assert err["message_type"] == "error_message" and "empty" in err["message"]
    await tab.send_json_to({"type": "user_message", "text": "first"})
    while True:  # wait until the first run is claimed
        e = await tab.receive_json_from(timeout=5)
        if e["message_type"] == "run_status":
            break
    await tab.send_json_to({"type": "user_message", "text": "second"})
    events = await events_until(tab, "run_status")
    busy = [e for e in events if e["message_type"] == "error_message"]
    assert busy and "is currently being processed" in busy[0]["message"]
    await tab.send_json_to({"type": "ping"})
    assert (await tab.receive_json_from(timeout=5))["message_type"] == "pong"
    await tab.disconnect()


async def test_a_model_no_provider_serves_gets_an_error_message_and_claims_nothing(account, fake_llm):
    from channels.db import database_sync_to_async

    from core.models import Run

    agent = await database_sync_to_async(make_agent)(account.org, name="stray", model="nowhere/some-model")
    tab = await agent_socket(account.user, agent.id)
    await tab.send_json_to({"type": "user_message", "text": "hello"})
    err = await tab.receive_json_from(timeout=5)
    assert err["message_type"] == "error_message" and "not served by a configured provider" in err["message"], err
    assert not await database_sync_to_async(Run.objects.filter(agent_id=agent.id).exists)()
    await tab.disconnect()


async def test_cancel_from_a_tab(account, fake_llm):
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    fake_llm.script(
        *[FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True, latency=0.3) for _ in range(10)]
    )
    tab = await agent_socket(account.user, agent.id)
    await tab.send_json_to({"type": "user_message", "text": "loop", "max_steps": 10})
    await until_async(lambda: fake_llm.chat_requests, timeout=30, what="the run's first model call")
    await tab.send_json_to({"type": "cancel"})
    events = await events_until(tab, "run_status")
    assert events[-1]["status"] == "cancelled" and events[-1]["stop_reason"] == "cancelled"
    assert len(fake_llm.chat_requests) < 10
    await tab.disconnect()


async def test_other_users_agent_is_refused(account, other_account):
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    comm = WebsocketCommunicator(APP, f"/ws/agents/{agent.id}/")
    comm.scope["user"] = other_account.user
    connected, _ = await comm.connect()
    assert not connected


async def test_the_reply_names_the_message_it_answers_and_events_carry_their_step(account, fake_llm):
    from asgiref.sync import sync_to_async
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    tab = await agent_socket(account.user, agent.id)
    await tab.send_json_to({"type": "user_message", "text": "hi", "otid": "otid-123"})
    seen = await events_until(tab, "run_status")
    reply, user = [e for e in seen if e.get("otid") == "otid-123"]
    assert reply["message_type"] == "run_status" and reply["status"] == "created"
    assert user["message_type"] == "user_message" and user["content"] == "hi"  # the tab's otid is kept on its message
    stored = [
        e for e in seen if e["message_type"] in ("tool_return_message", "assistant_message") and not e.get("delta")
    ]
    assert [e["step_index"] for e in stored] == [0, 1, 1]  # search's return; send_message's call and return

    def reset():
        from django.db import connection

        try:
            return ApiClient(account.token).patch(f"/v1/agents/{agent.id}/reset-messages", {}).status_code
        finally:
            connection.close()

    assert await sync_to_async(reset, thread_sensitive=False)() == 200
    update = await tab.receive_json_from(timeout=10)
    assert update == {"message_type": "context_update", "reason": "reset"}
    await tab.disconnect()


async def test_a_batched_socket_gets_the_same_events_in_fewer_frames(account, fake_llm):
    """`?batch=1` (the IDE's pages): every frame is a JSON array, a run's batches arrive one frame each, and the
    events are those an unbatched tab gets, in the same order, token chunks aside (merged in their batch)."""
    from channels.db import database_sync_to_async

    agent = await database_sync_to_async(_agent)(account)
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello batched tabs"}, thinking="let me see"))
    batched = WebsocketCommunicator(APP, f"/ws/agents/{agent.id}/?batch=1")
    batched.scope["user"] = account.user
    assert (await batched.connect())[0]
    plain = await agent_socket(account.user, agent.id)
    await batched.send_json_to({"type": "user_message", "text": "hi"})
    frames, last = [], {}
    while (last.get("message_type"), last.get("status")) != ("run_status", "completed"):
        frame = await batched.receive_json_from(timeout=20)
        assert isinstance(frame, list) and frame
        frames.append(frame)
        last = frame[-1]
    events = [e for frame in frames for e in frame]
    unbatched = await events_until(plain, "run_status")
    assert len(frames) < len(events)

    def whole(seen):  # the complete events, but the "created" reply only the sending socket gets
        return [
            (e["message_type"], e.get("id"), e.get("content"))
            for e in seen
            if not e.get("delta") and e.get("status") != "created"
        ]

    assert whole(events) == whole(unbatched)
    chunks = [e for e in events if e.get("delta")]
    assert "".join(e["content"] for e in chunks if e["message_type"] == "assistant_message") == "hello batched tabs"
    assert "".join(e["reasoning"] for e in chunks if e["message_type"] == "reasoning_message") == "let me see"
    await batched.send_json_to({"type": "ping"})
    assert await batched.receive_json_from(timeout=5) == [{"message_type": "pong"}]  # replies are arrays too
    await batched.disconnect()
    await plain.disconnect()
