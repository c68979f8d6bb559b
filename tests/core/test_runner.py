"""The step loop through the real litellm path against the fake LLM."""

import json

import pytest

from core.models import Message, Run, Step
from core.runs.request import RunRequest
from core.runs.runner import run_agent
from memory.models import BlockHistory
from memory.selectors import agent_block_by_label
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _run(agent, text="hi", **kw):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}], **kw)


def _types(result):
    return [m["message_type"] for m in result.messages]


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def test_one_step_reply_is_reasoning_then_assistant_message(agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello Alice"}, thinking="greet her"))
    result = _run(agent)
    assert result.stop_reason == "end_turn" and result.status == "completed"
    # send_message's return is stored (the model needs it) but, as in Letta, not returned to the caller
    assert _types(result) == ["reasoning_message", "assistant_message"]
    assert result.messages[0]["reasoning"] == "greet her"
    assert result.messages[1]["content"] == "Hello Alice"
    agent.refresh_from_db()
    rows = list(Message.objects.filter(agent=agent).order_by("seq"))
    assert [r.role for r in rows] == ["system", "user", "assistant", "tool"]
    assert agent.message_ids == [r.id for r in rows]
    assert all(r.token_count > 0 for r in rows[1:])
    assert [r.seq for r in rows] == [0, 1, 2, 3]
    step = Step.objects.get(run_id=result.run_id)
    assert step.request["messages"][-1]["content"] == "hi"
    assert step.response["choices"][0]["message"]["tool_calls"]
    assert step.tokenizer and {s["name"] for s in step.context_sections} >= {
        "system",
        "core_memory",
        "messages",
        "tools",
    }
    assert step.model_ms > 0 and step.total_ms >= step.model_ms
    assert result.usage["step_count"] == 1 and result.usage["total_tokens"] > 0


def test_memory_edit_with_heartbeat_then_reply_shows_in_next_context(agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes cats."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted"}),
    )
    result = _run(agent, "I like cats")
    assert result.stop_reason == "end_turn"
    assert result.usage["step_count"] == 2
    assert "Likes cats." in agent_block_by_label(agent=agent, label="human").value
    second = fake_llm.chat_requests[1]
    assert "Likes cats." in second["messages"][0]["content"]
    heartbeat = json.loads(second["messages"][-1]["content"])
    assert heartbeat["type"] == "heartbeat"
    history = BlockHistory.objects.filter(block__label="human", actor_type="agent").get()
    steps = list(Step.objects.filter(run_id=result.run_id).order_by("index"))
    assert history.step_id == steps[0].id and history.agent_id == agent.id and history.tool_call_id


def test_memory_edit_over_limit_comes_back_as_error_and_loop_continues(account, fake_llm):
    from core.agents.services import BlockInput

    agent = make_agent(account.org, memory_blocks=[BlockInput(label="human", value="x", limit=20)])
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "y" * 50}, heartbeat=False),
        FakeLLM.tool("send_message", {"message": "sorry"}),
    )
    result = _run(agent)
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message"][0]
    assert ret["status"] == "error"
    assert "limit of 20" in ret["tool_return"]
    assert "archival" in ret["tool_return"]
    assert result.stop_reason == "end_turn" and result.usage["step_count"] == 2
    assert agent_block_by_label(agent=agent, label="human").value == "x"


def test_read_only_block_refuses_edit(account, fake_llm):
    from core.agents.services import BlockInput

    agent = make_agent(account.org, memory_blocks=[BlockInput(label="policy", value="fixed", read_only=True)])
    fake_llm.script(
        FakeLLM.tool("memory_replace", {"label": "policy", "old_string": "fixed", "new_string": "x"}),
        FakeLLM.tool("send_message", {"message": "cannot"}),
    )
    result = _run(agent)
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message"][0]
    assert ret["status"] == "error" and "read-only" in ret["tool_return"]
    assert agent_block_by_label(agent=agent, label="policy").value == "fixed"


def test_unknown_tool_and_malformed_json_are_fed_back(agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("no_such_tool", {"a": 1}),
        FakeLLM.malformed("send_message"),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    result = _run(agent)
    assert result.stop_reason == "end_turn"
    returns = [m for m in result.messages if m["message_type"] == "tool_return_message"]
    assert "does not exist" in returns[0]["tool_return"]
    assert "not valid JSON" in returns[1]["tool_return"]
    assert len(returns) == 2  # the successful send_message's return is stored, not returned (Letta hides it)
    assert Message.objects.filter(agent=agent, role="tool", name="send_message", tool_return__status="success").exists()
    tool_msgs = [m for m in fake_llm.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert "does not exist" in tool_msgs[-1]["content"]


def test_no_tool_call_stops(agent, fake_llm):
    fake_llm.script(FakeLLM.text("plain words"))
    result = _run(agent)
    assert result.stop_reason == "no_tool_call"
    assert result.messages[-1] == {**result.messages[-1], "message_type": "assistant_message", "content": "plain words"}


def test_max_steps_bounds_a_run(agent, fake_llm):
    fake_llm.script(*[FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True) for _ in range(5)])
    result = _run(agent, max_steps=3)
    assert result.stop_reason == "max_steps" and result.usage["step_count"] == 3


def test_native_reasoning_is_shown(agent, fake_llm):
    fake_llm.script(FakeLLM.reasoning("native thoughts", "send_message", {"message": "hi"}))
    result = _run(agent)
    first = result.messages[0]
    assert first["message_type"] == "reasoning_message" and first["reasoning"].startswith("native thoughts")
    assert first["source"] == "reasoner_model"


def test_tool_output_truncated_with_note(agent, fake_llm):
    from memory.services import passage_insert

    passage_insert(agent=agent, text="cats " * 20000)
    fake_llm.script(
        FakeLLM.tool("archival_memory_search", {"query": "cats"}, heartbeat=False),
        FakeLLM.tool("send_message", {"message": "ok"}),
    )
    result = _run(agent)
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message"][0]
    message = ret["tool_return"]
    assert "... [NOTE: function output was truncated since it exceeded the character limit (" in message
    assert message.endswith(" > 50000)]")


@pytest.mark.parametrize(
    "reply", [FakeLLM.error(500, "boom"), FakeLLM.rate_limit_error(), FakeLLM.error(401, "bad key")]
)
def test_provider_error_stops_and_leaves_state_untouched(agent, fake_llm, reply):
    _run(agent)  # one good exchange first
    agent.refresh_from_db()
    before_ids, before_count = list(agent.message_ids), Message.objects.filter(agent=agent).count()
    fake_llm.script(reply)
    result = _run(agent, "second")
    assert result.stop_reason == "llm_api_error" and result.status == "failed"
    assert result.error and "fake" not in result.error.lower() or "boom" in result.error or result.error
    agent.refresh_from_db()
    assert agent.message_ids == before_ids
    # the accepted input is kept in the history, outside the window and linked to no step (none took it)
    assert Message.objects.filter(agent=agent).count() == before_count + 1
    kept = Message.objects.get(run_id=result.run_id)
    assert (kept.role, kept.text, kept.step_id, kept.id in agent.message_ids) == ("user", "second", None, False)
    step = Step.objects.get(run_id=result.run_id)
    assert step.error and step.stop_reason == "llm_api_error"
    assert Run.objects.get(pk=result.run_id).input_messages[0]["text"] == "second"


def test_provider_error_after_heartbeat_keeps_first_step(agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "A."}, heartbeat=True),
        FakeLLM.error(503, "overloaded"),
    )
    result = _run(agent)
    assert result.stop_reason == "llm_api_error"
    assert "overloaded" in result.error
    agent.refresh_from_db()
    roles = [Message.objects.get(pk=i).role for i in agent.message_ids]
    assert roles == ["system", "user", "assistant", "tool"]


def test_cancel_requested_stops_at_step_boundary(agent, fake_llm):
    from core.runs.runner import run_cancel, run_start, run_steps

    request = RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hi"}])
    run = run_start(request)
    assert run_cancel(owner=agent.owner, agent_id=agent.id) == [run.id]
    result = run_steps(run, request)
    assert result.stop_reason == "cancelled" and result.status == "cancelled"
    assert fake_llm.chat_requests == []


def test_second_claim_conflicts(agent):
    from core.errors import Conflict
    from core.runs.runner import run_start

    run_start(RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "a"}]))
    with pytest.raises(Conflict):
        run_start(RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "b"}]))


def test_events_reach_the_agent_group_in_order_with_the_callers_marked(account, fake_llm, monkeypatch):
    from core.events import agent_group
    from core.runs import emit

    agent = make_agent(account.org, model_settings={"put_inner_thoughts": True})  # the model reasons in `thinking`
    sent = []
    monkeypatch.setattr(emit, "send_events", lambda group, events, **extra: sent.append((group, events, extra)))
    monkeypatch.setattr("core.runs.runner.group_listened", lambda group: True)  # a tab follows the agent
    result = _run(agent)
    assert {group for group, _, _ in sent} == {agent_group(agent.id)}
    assert all(extra["run_id"] == result.run_id for _, _, extra in sent)
    every = [(e, caller) for _, events, extra in sent for e, caller in zip(events, extra["caller"], strict=False)]
    chunks = [(e, caller) for e, caller in every if e.get("delta")]
    assert chunks and all(caller for _, caller in chunks)  # token chunks, streamed before the step commits
    flat = [(e["message_type"], caller) for e, caller in every if not e.get("delta")]
    assert [t for t, caller in flat if caller] == [
        "reasoning_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
    ]
    # send_message's return is the tabs' only (Letta's callers never see it), like the caller's own input
    assert [t for t, caller in flat if not caller] == [
        "run_status",
        "user_message",
        "tool_return_message",
        "context_update",
        "run_status",
    ]


def test_the_last_steps_transaction_stores_the_runs_end_and_a_later_failure_still_fails_it(
    agent, fake_llm, monkeypatch
):
    from core.models import Agent
    from core.runs import runner

    fake_llm.script(FakeLLM.tool("send_message", {"message": "done"}))
    result = _run(agent)
    run = Run.objects.get(pk=result.run_id)
    assert (run.status, run.stop_reason, run.usage["step_count"]) == ("completed", "end_turn", 1)
    assert Agent.objects.get(pk=agent.id).last_stop_reason == "end_turn"

    def broken(*args, **kwargs):  # the step committed; what comes after it breaks
        raise RuntimeError("events broke")

    monkeypatch.setattr(runner, "_emit_step", broken)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "again"}))
    result = _run(agent)
    run = Run.objects.get(pk=result.run_id)
    assert (run.status, run.stop_reason) == ("failed", "error") and "events broke" in run.error
    assert Step.objects.filter(run=run).count() == 1  # the step itself stays committed
    assert Agent.objects.get(pk=agent.id).last_stop_reason == "error"
