"""Approvals and the agent websocket: a run that pauses reaches every open tab with what it waits for, an answer
posted from a tab's card resumes it (every tab sees the answer and what ran), a second answer is told the request was
already answered, a normal send meanwhile gets Letta's 409 text, and a cancel or an answer over the API resolves
the wait for every tab."""

import json
import re

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.routing import URLRouter

from agents_ide.routing import websocket_urlpatterns
from core.models import Message, Run
from memory.models import Passage
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import agent_socket, events_until, until_async

pytestmark = pytest.mark.django_db(transaction=True)
APP = URLRouter(websocket_urlpatterns)
APPROVE_INSERT = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]


async def _agent(account):
    return await database_sync_to_async(make_agent)(account.org, name="Careful", tool_rules=APPROVE_INSERT)


async def _pause(fake_llm, tab, *others):
    """A run from `tab` that pauses on archival_memory_insert; every tab's events up to its end."""
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "the code is 42"}, heartbeat=True))
    await tab.send_json_to({"type": "user_message", "text": "remember the code"})
    return [await events_until(t, "run_status") for t in (tab, *others)]


def _ask(seen):
    return next(e for e in seen if e["message_type"] == "approval_request_message" and not e.get("delta"))


def _post(user, agent, ask, fields: dict):
    """A tab's answer: the card's form, posted (core.web.waits); the response and its HTML."""
    from django.test import Client

    web = Client()
    web.force_login(user)
    r = web.post(f"/agents/{agent.id}/waits/calls/{ask['id']}/", fields)
    return r.status_code, r.content.decode()


def _answer_run(html: str) -> str:
    return re.search(r'data-answer-run="([^"]+)"', html).group(1)


def _approve(ask, **extra):
    call_id = ask["tool_calls"][0]["tool_call_id"]
    return {"type": "approval", "tool_call_id": call_id, "approve": True, "reason": None, **extra}


async def test_a_pause_reaches_every_tab_and_an_answer_from_one_resumes_it_for_all(account, fake_llm):
    agent = await _agent(account)
    a, b = await agent_socket(account.user, agent.id), await agent_socket(account.user, agent.id)
    seen_a, seen_b = await _pause(fake_llm, a, b)
    for seen in (seen_a, seen_b):
        end = seen[-1]
        assert end["status"] == "completed" and end["stop_reason"] == "requires_approval"
        assert end["waiting"]["kind"] == "approval" and end["waiting"]["expires_at"]
        assert [c["name"] for c in end["waiting"]["tool_calls"]] == ["archival_memory_insert"]
        assert end["waiting"]["message_id"] == _ask(seen)["id"]
    ask = _ask(seen_a)

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Saved it."}))
    edited = {"content": "the code is 43", "request_heartbeat": True}
    call_id = ask["tool_calls"][0]["tool_call_id"]
    fields = {f"choice:{call_id}": "approve", f"arguments:{call_id}": json.dumps(edited)}
    status, html = await sync_to_async(_post)(account.user, agent, ask, fields)
    assert status == 200 and re.search(r'data-state="(answering|answered)"', html)
    created = {"run_id": _answer_run(html)}
    for tab in (a, b):
        seen = await events_until(tab, "run_status", run_id=created["run_id"])
        answer = next(e for e in seen if e["message_type"] == "approval_response_message")
        assert answer["approvals"][0]["approve"] is True and answer["approvals"][0]["arguments"] == edited
        result = next(e for e in seen if e["message_type"] == "tool_return_message" and e["name"] != "send_message")
        assert result["tool_call_id"] == ask["tool_calls"][0]["tool_call_id"] and result["status"] == "success"
        assert any(e["message_type"] == "assistant_message" and e.get("content") == "Saved it." for e in seen)
        assert seen[-1]["stop_reason"] == "end_turn" and seen[-1]["waiting"] is None
    texts = await database_sync_to_async(lambda: list(Passage.objects.filter(agent=agent).values_list("text")))()
    assert texts == [("the code is 43",)]
    await a.disconnect()
    await b.disconnect()


async def test_a_second_answer_is_told_another_tab_answered_first_and_nothing_is_taken_twice(account, fake_llm):
    agent = await _agent(account)
    a, b = await agent_socket(account.user, agent.id), await agent_socket(account.user, agent.id)
    seen_a, _ = await _pause(fake_llm, a, b)
    ask = _ask(seen_a)
    asked = len(fake_llm.chat_requests)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Saved."}, latency=1.5))
    call_id = ask["tool_calls"][0]["tool_call_id"]
    status, html = await sync_to_async(_post)(account.user, agent, ask, {f"choice:{call_id}": "approve"})
    assert status == 200
    created = {"run_id": _answer_run(html)}
    await until_async(lambda: len(fake_llm.chat_requests) > asked, timeout=20, what="the answer's model call")

    # while the first answer runs: the second tab is told on its card, and its answer is not taken
    deny = {f"choice:{call_id}": "deny", f"reason:{call_id}": "no"}
    status, html = await sync_to_async(_post)(account.user, agent, ask, deny)
    assert status == 422 and "already answered in another tab" in html
    assert re.search(r'data-state="(answering|answered)"', html) and "data-answer" not in html.replace(
        "data-answer-run", ""
    )

    await events_until(a, "run_status", run_id=created["run_id"])
    # after it ended: still told, now that nothing waits, and the card shows what was decided
    status, html = await sync_to_async(_post)(account.user, agent, ask, deny)
    assert status == 422 and "already answered in another tab" in html and 'data-state="answered"' in html

    def stored():
        answers = Message.objects.filter(agent=agent, kind="approval_response")
        return [json.loads(m.text)[0]["approve"] for m in answers], Passage.objects.filter(agent=agent).count()

    assert await database_sync_to_async(stored)() == ([True], 1)
    await a.disconnect()
    await b.disconnect()


async def test_a_message_sent_while_a_reply_waits_gets_the_409_text(account, fake_llm):
    agent = await _agent(account)
    tab = await agent_socket(account.user, agent.id)
    seen, *_ = await _pause(fake_llm, tab)
    await tab.send_json_to({"type": "user_message", "text": "hello?", "otid": "m-1"})
    err = await tab.receive_json_from(timeout=10)
    assert err["message_type"] == "error_message" and err["otid"] == "m-1"
    assert "waiting for approval" in err["message"]
    assert err["detail"]["code"] == "PENDING_APPROVAL" and err["detail"]["run_id"] == seen[-1]["run_id"]
    assert [c["name"] for c in err["detail"]["tool_calls"]] == ["archival_memory_insert"]
    await tab.disconnect()


async def test_cancel_from_a_tab_denies_the_calls_and_every_tab_hears_the_wait_end(account, fake_llm):
    agent = await _agent(account)
    a, b = await agent_socket(account.user, agent.id), await agent_socket(account.user, agent.id)
    seen, _ = await _pause(fake_llm, a, b)
    run_id, ask = seen[-1]["run_id"], _ask(seen)
    await a.send_json_to({"type": "cancel"})
    for tab in (a, b):
        events = await events_until(tab, "run_status", run_id=run_id)
        denied = next(e for e in events if e["message_type"] == "tool_return_message")
        assert denied["status"] == "error" and denied["tool_call_id"] == ask["tool_calls"][0]["tool_call_id"]
        assert "The user cancelled the request" in denied["tool_return"]
        assert events[-1]["stop_reason"] == "cancelled" and events[-1]["waiting"] is None
        if tab is a:  # the tab that asked is answered too (before or after the broadcast)
            told = [e for e in events if e["message_type"] == "cancel_requested"]
            told = told or [await a.receive_json_from(timeout=5)]
            assert told[0]["message_type"] == "cancel_requested" and told[0]["run_ids"] == [run_id]
    run = await database_sync_to_async(Run.objects.get)(pk=run_id)
    assert run.waiting_until is None and run.stop_reason == "cancelled"
    await a.disconnect()
    await b.disconnect()


async def test_an_answer_over_the_api_resolves_the_wait_in_open_tabs(account, fake_llm):
    agent = await _agent(account)
    tab = await agent_socket(account.user, agent.id)
    seen, *_ = await _pause(fake_llm, tab)
    ask = _ask(seen)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Not saved."}))

    def answer():
        from django.db import connection

        deny = {**_approve(ask), "approve": False, "reason": "keep it secret"}
        body = {"messages": [{"type": "approval", "approvals": [deny]}]}
        try:
            return ApiClient(account.token).post(f"/v1/agents/{agent.id}/messages", body).status_code
        finally:
            connection.close()

    assert await sync_to_async(answer, thread_sensitive=False)() == 200
    events = await events_until(tab, "run_status", stop_reason="end_turn")
    answer_event = next(e for e in events if e["message_type"] == "approval_response_message")
    assert (
        answer_event["approvals"][0]["approve"] is False and answer_event["approvals"][0]["reason"] == "keep it secret"
    )
    assert any(e["message_type"] == "assistant_message" and e.get("content") == "Not saved." for e in events)
    await tab.disconnect()


async def test_a_malformed_answer_is_refused_before_reaching_the_run(account, fake_llm):
    agent = await _agent(account)
    tab = await agent_socket(account.user, agent.id)
    ask = _ask((await _pause(fake_llm, tab))[0])
    status, html = await sync_to_async(_post)(account.user, agent, ask, {"choice:call_x": "approve"})
    assert status == 422 and "Choose Approve or Deny" in html and 'data-state="waiting"' in html
    # the request this card showed is no longer there
    status, _ = await sync_to_async(_post)(account.user, agent, {**ask, "id": "message-gone"}, {})
    assert status == 404
    await tab.disconnect()
