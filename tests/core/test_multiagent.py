"""Multi-agent tools through the real runner and the fake LLM: async delivery, wait-for-reply, fan-out by
tags, the hop guard, owner isolation and detaching. Receiving runs execute on other threads (the queue pool
or a conversation thread), so these tests commit their data (transactional_db)."""

import json

import pytest

from core.models import Message, Run
from core.runs import queue
from core.runs.request import RunRequest
from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

WAIT = "send_message_to_agent_and_wait_for_reply"
ASYNC = "send_message_to_agent_async"
TAGS = "send_message_to_agents_matching_tags"


@pytest.fixture(autouse=True)
def _queue_stopped_after(transactional_db):
    yield
    queue.shutdown()


def _send(agent, text="hi"):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _returns(result) -> list[dict]:
    return [m for m in result.messages if m["message_type"] == "tool_return_message"]


def _incoming(agent) -> list[Message]:
    return list(Message.objects.filter(agent=agent, kind="agent_message").order_by("seq"))


def test_wait_for_reply_returns_the_other_agents_reply(account, fake_llm):
    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b")
    fake_llm.script(
        FakeLLM.tool(WAIT, {"message": "ping", "other_agent_id": b.id}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "pong"}),
        FakeLLM.tool("send_message", {"message": "b said pong"}),
    )
    result = _send(a)
    ret = _returns(result)[0]
    assert ret["status"] == "success" and "pong" in ret["tool_return"]
    [incoming] = _incoming(b)
    assert incoming.role == "system" and incoming.sender_agent_id == a.id
    assert incoming.text == f"[Incoming message from agent with ID '{a.id}'] ping"
    b_run = Run.objects.get(agent=b)
    assert b_run.status == "completed" and b_run.depth == 1 and b_run.parent_run_id == result.run_id
    assert incoming.run_id == b_run.id
    assert result.status == "completed" and result.messages[-1]["content"] == "b said pong"


def test_async_returns_a_receipt_and_the_receiver_runs_in_the_background(account, fake_llm):
    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b")
    fake_llm.script(FakeLLM.tool(ASYNC, {"message": "fyi", "other_agent_id": b.id}, heartbeat=False))
    result = _send(a)
    receipt = _returns(result)[0]["tool_return"]
    assert "delivered" in receipt and b.id in receipt
    b_run = until(lambda: Run.objects.filter(agent=b, status="completed").first())
    assert b_run.background and b_run.depth == 1 and b_run.parent_run_id == result.run_id
    assert b_run.worker == queue.WORKER_ID
    [incoming] = _incoming(b)
    assert incoming.sender_agent_id == a.id and "fyi" in incoming.text


def test_matching_tags_fans_out_to_matching_agents_only(account, fake_llm):
    a = make_agent(account.org, name="a", include_multi_agent_tools=True, tags=["worker"])
    b = make_agent(account.org, name="b", tags=["worker", "eu"])
    c = make_agent(account.org, name="c", tags=["worker"])
    d = make_agent(account.org, name="d", tags=["eu"])
    fake_llm.script(
        FakeLLM.tool(TAGS, {"message": "status?", "match_all": ["worker"], "match_some": []}, heartbeat=False)
    )
    result = _send(a)
    replies = json.loads(_returns(result)[0]["tool_return"])
    assert sorted(r["agent_id"] for r in replies) == sorted([b.id, c.id])
    assert all(r["replies"] == ["ok"] for r in replies)
    assert len(_incoming(b)) == len(_incoming(c)) == 1 and not _incoming(d) and not _incoming(a)


def test_match_some_needs_one_of_the_tags(account, fake_llm):
    from core.runs.multiagent import agents_matching_tags

    a = make_agent(account.org, name="a", tags=["x"])
    b = make_agent(account.org, name="b", tags=["x", "eu"])
    make_agent(account.org, name="c", tags=["x"])
    d = make_agent(account.org, name="d", tags=["us"])
    assert [t.id for t in agents_matching_tags(agent=a, match_all=["x"], match_some=["eu", "us"])] == [b.id]
    assert [t.id for t in agents_matching_tags(agent=a, match_all=[], match_some=["eu", "us"])] == [b.id, d.id]


def test_hop_guard_refuses_and_emits_a_visible_event(account, fake_llm, settings, monkeypatch):
    settings.MULTI_AGENT_MAX_DEPTH = 1
    events = []
    monkeypatch.setattr("core.runs.multiagent.send_event", lambda group, event: events.append((group, event)))
    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b", include_multi_agent_tools=True)
    c = make_agent(account.org, name="c")
    fake_llm.script(
        FakeLLM.tool(WAIT, {"message": "ask c", "other_agent_id": b.id}, heartbeat=True),
        FakeLLM.tool(WAIT, {"message": "hello c", "other_agent_id": c.id}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "could not reach c"}),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    result = _send(a)
    assert result.status == "completed"
    b_returns = list(Message.objects.filter(agent=b, role="tool").order_by("seq"))  # the refused call, then its reply
    assert b_returns and b_returns[0].name == WAIT and b_returns[0].tool_return["status"] == "error"
    assert "loop guard" in b_returns[0].text and "MULTI_AGENT_MAX_DEPTH" in b_returns[0].text
    assert not Run.objects.filter(agent=c).exists() and not _incoming(c)
    [(group, event)] = events
    assert group == f"agent.{b.id}".replace("-", "_")
    assert event["message_type"] == "error_message" and event["error_type"] == "multi_agent_loop_guard"
    assert event["detail"] == {"depth": 2, "max_depth": 1}


def test_another_owners_agent_is_not_found(account, other_account, fake_llm):
    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    theirs = make_agent(other_account.org, name="theirs")
    fake_llm.script(FakeLLM.tool(WAIT, {"message": "hi", "other_agent_id": theirs.id}, heartbeat=False))
    ret = _returns(_send(a))[0]
    assert ret["status"] == "error" and f"Agent '{theirs.id}' not found" in ret["tool_return"]
    assert not Run.objects.filter(agent=theirs).exists() and not _incoming(theirs)


def test_detached_tool_can_no_longer_be_called(account, fake_llm):
    from tools.models import Tool
    from tools.services import tool_detach

    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b")
    tool_detach(agent=a, tool=Tool.objects.get(owner=account.org, name=ASYNC))
    fake_llm.script(
        FakeLLM.tool(ASYNC, {"message": "hi", "other_agent_id": b.id}, heartbeat=False),
        FakeLLM.tool("send_message", {"message": "ok then"}),
    )
    result = _send(a)
    assert _returns(result)[0]["status"] == "error"
    assert ASYNC not in [t["function"]["name"] for t in fake_llm.chat_requests[0]["tools"]]
    from core.models import QueuedTask

    # Nothing may arrive late either: a delivery would have been queued with the step that sent it.
    assert not QueuedTask.objects.filter(task_path__endswith="agent_message_deliver_task").exists()
    assert not Run.objects.filter(agent=b).exists() and not _incoming(b)


def test_async_to_a_busy_agent_is_delivered_when_it_is_free(account, fake_llm):
    from core.runs.executor import run_submit

    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b")
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "slow"}, latency=4.0),  # b stays busy while a runs, loaded machine too
        FakeLLM.tool(ASYNC, {"message": "later", "other_agent_id": b.id}, heartbeat=False),
    )
    first = run_submit(
        RunRequest(
            owner=account.org, agent_id=b.id, input_messages=[{"role": "user", "content": "work"}], background=True
        )
    )
    until(lambda: fake_llm.chat_requests)  # b is now mid-step
    receipt = _returns(_send(a))[0]["tool_return"]
    assert "queued" in receipt
    until(lambda: Run.objects.filter(agent=b, status="completed").count() == 2)
    later = Run.objects.filter(agent=b).exclude(pk=first.pk).get()
    assert later.depth == 1 and [m.text for m in _incoming(b)] == [
        f"[Incoming message from agent with ID '{a.id}'] later"
    ]
