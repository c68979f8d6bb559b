"""The debugger's breakpoints through the API with the fake model: a run stops before a model call (always, past N
tokens, after a block changed or a tool failed) or before a tool call, a person edits what is about to happen (a
block, the call's arguments), then continues, steps or stops it; the first answer wins."""

import json

import pytest

from core.models import Message, Run
from memory.models import Passage
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _bp(api, agent, **body):
    r = api.post(f"/v1/agents/{agent.id}/breakpoints", body)
    assert r.status_code == 201, r.content
    return r.json()


def _say(api, agent, text):
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.content
    return r.json()


def _continue(api, run_id, **body):
    return api.post(f"/v1/runs/{run_id}/continue", body)


def _ended(api, run_id):
    """The run the continue queued, once it ended (the pool executes it)."""
    from core.runs.executor import run_wait

    run_wait(run=Run.objects.get(pk=run_id), timeout=30)
    return api.get(f"/v1/runs/{run_id}").json()


def test_breakpoints_are_set_listed_replaced_and_cleared_with_clear_errors(api, agent):
    one = _bp(api, agent, on="model_call")
    two = _bp(api, agent, on="tool_call", tools=["archival_memory_insert"])
    assert one["id"].startswith("bp-") and two["tools"] == ["archival_memory_insert"]
    assert [b["id"] for b in api.get(f"/v1/agents/{agent.id}/breakpoints").json()] == [one["id"], two["id"]]
    r = api.put(f"/v1/agents/{agent.id}/breakpoints/{one['id']}", {"on": "tokens_over", "tokens": 500})
    assert r.status_code == 200 and r.json() == {**one, "on": "tokens_over", "tokens": 500}
    bad = api.post(f"/v1/agents/{agent.id}/breakpoints", {"on": "tokens_over"})
    assert bad.status_code == 422 and "tokens" in bad.json()["detail"]
    bad = api.post(f"/v1/agents/{agent.id}/breakpoints", {"on": "sometimes"})
    assert bad.status_code == 422 and "model_call" in bad.json()["detail"]
    bad = api.post(f"/v1/agents/{agent.id}/breakpoints", {"on": "model_call", "tools": ["x"]})
    assert bad.status_code == 422
    assert api.delete(f"/v1/agents/{agent.id}/breakpoints/bp-nope").status_code == 404
    left = api.delete(f"/v1/agents/{agent.id}/breakpoints/{one['id']}").json()
    assert [b["id"] for b in left] == [two["id"]]
    assert api.delete(f"/v1/agents/{agent.id}/breakpoints").json() == []


def test_a_model_call_breakpoint_stops_before_the_call_and_an_edited_block_is_what_the_model_then_gets(
    api, agent, fake_llm
):
    _bp(api, agent, on="model_call")
    out = _say(api, agent, "what is my name?")
    assert out["stop_reason"]["stop_reason"] == "requires_approval"
    assert fake_llm.chat_requests == []  # nothing was sent
    run = api.get(f"/v1/runs/{out['run_id']}").json()
    assert run["waiting"]["before"] == "model_call" and run["waiting"]["kind"] == "breakpoint"
    assert run["waiting"]["tokens"] > 0 and run["waiting"]["tool_calls"] == []
    # the input is stored: the person sees it, the context simulator compiles it
    assert Message.objects.filter(agent=agent, role="user", text="what is my name?").exists()
    busy = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "hello?"}]})
    assert busy.status_code == 409
    r = api.patch(f"/v1/agents/{agent.id}/core-memory/blocks/human", {"value": "The user's name is Bertrand."})
    assert r.status_code == 200, r.content
    api.delete(f"/v1/agents/{agent.id}/breakpoints")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "You are Bertrand."}))
    r = _continue(api, out["run_id"])
    assert r.status_code == 200, r.content
    resumed = _ended(api, r.json()["id"])
    assert resumed["status"] == "completed" and resumed["stop_reason"] == "end_turn"
    system = fake_llm.chat_requests[-1]["messages"][0]["content"]
    assert "Bertrand" in system and "Alice" not in system
    assert fake_llm.chat_requests[-1]["messages"][-1]["content"] == "what is my name?"


def test_a_tool_breakpoint_lets_a_person_edit_the_arguments_and_the_edited_call_runs(api, agent, fake_llm):
    _bp(api, agent, on="tool_call", tools=["archival_memory_insert"])
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "draft fact"}, heartbeat=True))
    out = _say(api, agent, "store a fact")
    run = api.get(f"/v1/runs/{out['run_id']}").json()
    call = run["waiting"]["tool_calls"][0]
    assert run["waiting"]["kind"] == "breakpoint" and call["name"] == "archival_memory_insert"
    assert json.loads(call["arguments"])["content"] == "draft fact"
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Stored."}))
    edited = {"content": "corrected fact", "request_heartbeat": True}
    r = _continue(
        api,
        out["run_id"],
        approvals=[{"type": "approval", "tool_call_id": call["tool_call_id"], "approve": True, "arguments": edited}],
    )
    assert r.status_code == 200, r.content
    assert _ended(api, r.json()["id"])["stop_reason"] == "end_turn"
    assert list(Passage.objects.filter(agent=agent).values_list("text", flat=True)) == ["corrected fact"]
    row = Message.objects.get(agent=agent, role="tool", tool_call_id=call["tool_call_id"])
    assert row.tool_return["arguments"] == {"content": "corrected fact"}  # the result says it ran as edited


def test_step_goes_model_call_then_tool_call_then_model_call(api, agent, fake_llm):
    bp = _bp(api, agent, on="model_call")
    out = _say(api, agent, "remember tea")
    api.delete(f"/v1/agents/{agent.id}/breakpoints/{bp['id']}")
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    r = _continue(api, out["run_id"], step=True)
    first = _ended(api, r.json()["id"])
    assert (
        first["waiting"]["before"] == "tool_call" and first["waiting"]["tool_calls"][0]["name"] == "core_memory_append"
    )
    assert len(fake_llm.chat_requests) == 1  # the model call was made; its tool waits
    r = _continue(api, first["id"], step=True)
    second = _ended(api, r.json()["id"])
    assert second["waiting"]["before"] == "model_call" and len(fake_llm.chat_requests) == 1
    assert "Likes tea." in api.get(f"/v1/agents/{agent.id}/core-memory/blocks/human").json()["value"]
    r = _continue(api, second["id"])
    third = _ended(api, r.json()["id"])
    assert third["stop_reason"] == "end_turn" and third["waiting"] is None and len(fake_llm.chat_requests) == 2


def test_condition_breakpoints_block_change_tool_error_and_tokens(api, agent, fake_llm):
    _bp(api, agent, on="block_change")
    fake_llm.script(FakeLLM.tool("core_memory_append", {"label": "human", "content": "Has a cat."}, heartbeat=True))
    out = _say(api, agent, "I have a cat")
    run = api.get(f"/v1/runs/{out['run_id']}").json()
    assert run["waiting"]["before"] == "model_call" and "changed a memory block" in run["waiting"]["why"]
    assert len(fake_llm.chat_requests) == 1
    assert _continue(api, out["run_id"], stop=True).json()["stop_reason"] == "cancelled"
    api.delete(f"/v1/agents/{agent.id}/breakpoints")

    _bp(api, agent, on="tool_error")
    fake_llm.script(
        FakeLLM.tool(
            "core_memory_replace", {"label": "human", "old_content": "not there", "new_content": "x"}, heartbeat=True
        )
    )
    out = _say(api, agent, "fix my name")
    run = api.get(f"/v1/runs/{out['run_id']}").json()
    assert run["waiting"] is not None and "a tool failed" in run["waiting"]["why"]
    _continue(api, out["run_id"], stop=True)
    api.delete(f"/v1/agents/{agent.id}/breakpoints")

    _bp(api, agent, on="tokens_over", tokens=10**7)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "small"}))
    assert _say(api, agent, "hi")["stop_reason"]["stop_reason"] == "end_turn"  # far under: no stop
    api.delete(f"/v1/agents/{agent.id}/breakpoints")
    _bp(api, agent, on="tokens_over", tokens=10)
    out = _say(api, agent, "hi again")
    assert api.get(f"/v1/runs/{out['run_id']}").json()["waiting"]["tokens"] > 10


def test_disabled_breakpoints_do_not_stop(api, agent, fake_llm):
    _bp(api, agent, on="model_call", enabled=False)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "through"}))
    assert _say(api, agent, "go")["stop_reason"]["stop_reason"] == "end_turn"


def test_the_first_answer_wins_and_the_second_is_told(api, agent, fake_llm):
    _bp(api, agent, on="model_call")
    out = _say(api, agent, "go")
    api.delete(f"/v1/agents/{agent.id}/breakpoints")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "done"}, latency=0.5))
    first = _continue(api, out["run_id"])
    second = _continue(api, out["run_id"])
    assert first.status_code == 200
    assert second.status_code in (400, 409)
    assert "not waiting" in second.json()["detail"] or "being processed" in second.json()["detail"]
    assert _ended(api, first.json()["id"])["stop_reason"] == "end_turn"


def test_continue_refuses_another_owners_run_and_a_run_that_waits_for_nothing(api, agent, fake_llm, other_account):
    from tests.factories import ApiClient

    fake_llm.script(FakeLLM.tool("send_message", {"message": "plain"}))
    out = _say(api, agent, "hi")
    r = _continue(api, out["run_id"])
    assert r.status_code == 400 and "not waiting" in r.json()["detail"]
    _bp(api, agent, on="model_call")
    out = _say(api, agent, "again")
    assert _continue(ApiClient(other_account.token), out["run_id"]).status_code == 404
