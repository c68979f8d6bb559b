"""Tool rules enforced inside the loop: the tools offered, tool_choice, and violations fed back."""

import json

import pytest

from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

CS, AMS, AMI, SM = "conversation_search", "archival_memory_search", "archival_memory_insert", "send_message"


def _offered(req) -> list[str]:
    return [t["function"]["name"] for t in req.get("tools") or []]


def _run(account, rules, *replies, max_steps=None):
    agent = make_agent(account.org, tool_rules=rules)
    return agent, run_agent(
        agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}], max_steps=max_steps
    )


def _returns(result):
    """Each tool return as the model read it ({status, message}), from the listed message (its message unwrapped)."""
    return [
        {"status": "OK" if m["status"] == "success" else "Failed", "message": m["tool_return"]}
        for m in result.messages
        if m["message_type"] == "tool_return_message"
    ]


def test_run_first_offers_only_that_tool_and_forces_it(account, fake_llm):
    fake_llm.script(
        FakeLLM.tool(SM, {"message": "too early"}),
        FakeLLM.tool(CS, {"query": "x"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    agent, result = _run(account, [{"tool_name": CS, "type": "run_first"}])
    first = fake_llm.chat_requests[0]
    assert _offered(first) == [CS]
    assert first["tool_choice"] == {"type": "function", "function": {"name": CS}}
    assert "<tool_usage_rules>" in first["messages"][0]["content"]
    rets = _returns(result)
    assert rets[0]["status"] == "Failed" and "[ToolConstraintError] Cannot call send_message" in rets[0]["message"]
    assert len(_offered(fake_llm.chat_requests[1])) == 1  # still no valid call yet: still forced
    assert len(_offered(fake_llm.chat_requests[2])) > 1
    assert result.stop_reason == "end_turn"


def test_exit_loop_ends_the_run(account, fake_llm):
    fake_llm.script(FakeLLM.tool(CS, {"query": "x"}, heartbeat=True))
    _, result = _run(account, [{"tool_name": CS, "type": "exit_loop"}])
    assert result.stop_reason in ("end_turn", "tool_rule") and result.usage["step_count"] == 1
    assert "request_heartbeat" not in json.dumps(
        [t for t in fake_llm.chat_requests[0]["tools"] if t["function"]["name"] == CS]
    )


def test_continue_loop_keeps_going_without_heartbeat(account, fake_llm):
    fake_llm.script(FakeLLM.tool(CS, {"query": "x"}, heartbeat=False), FakeLLM.tool(SM, {"message": "done"}))
    _, result = _run(account, [{"tool_name": CS, "type": "continue_loop"}])
    assert result.usage["step_count"] == 2 and result.stop_reason == "end_turn"


def test_constrain_child_tools_narrows_the_next_step(account, fake_llm):
    fake_llm.script(FakeLLM.tool(CS, {"query": "x"}), FakeLLM.tool(SM, {"message": "done"}))
    _, result = _run(account, [{"tool_name": CS, "type": "constrain_child_tools", "children": [SM]}])
    second = fake_llm.chat_requests[1]
    assert _offered(second) == [SM]
    assert second["tool_choice"] == {"type": "function", "function": {"name": SM}}
    assert result.stop_reason == "end_turn"


def test_parent_last_tool_gates_children(account, fake_llm):
    fake_llm.script(
        FakeLLM.tool(CS, {"query": "x"}),
        FakeLLM.tool(AMS, {"query": "y"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    _, result = _run(account, [{"tool_name": CS, "type": "parent_last_tool", "children": [AMS]}])
    reqs = fake_llm.chat_requests
    assert AMS not in _offered(reqs[0]) and CS in _offered(reqs[0])
    assert _offered(reqs[1]) == [AMS]
    assert AMS not in _offered(reqs[2])
    assert result.stop_reason == "end_turn"


def test_conditional_picks_the_child_from_the_output(account, fake_llm):
    fake_llm.script(
        FakeLLM.tool(CS, {"query": "nothing-matches"}),
        FakeLLM.tool(AMI, {"content": "note"}),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    rule = {
        "tool_name": CS,
        "type": "conditional",
        "child_output_mapping": {"No results found.": AMI},
        "default_child": SM,
    }
    _, result = _run(account, [rule])
    assert _offered(fake_llm.chat_requests[1]) == [AMI]
    assert result.stop_reason in ("end_turn",)


def test_max_count_per_step_removes_the_tool_and_rejects_extra_calls(account, fake_llm):
    fake_llm.script(
        FakeLLM.tool(CS, {"query": "a"}, heartbeat=True),
        FakeLLM.tool(CS, {"query": "b"}, heartbeat=True),
        FakeLLM.tool(SM, {"message": "done"}),
    )
    _, result = _run(account, [{"tool_name": CS, "type": "max_count_per_step", "max_count_limit": 1}])
    assert CS in _offered(fake_llm.chat_requests[0])
    assert CS not in _offered(fake_llm.chat_requests[1])
    rets = _returns(result)
    assert rets[1]["status"] == "Failed" and "[ToolConstraintError]" in rets[1]["message"]
    assert result.stop_reason == "end_turn"


def test_required_before_exit_keeps_the_run_going(account, fake_llm):
    fake_llm.script(FakeLLM.tool(SM, {"message": "bye"}), FakeLLM.tool(AMI, {"content": "saved"}, heartbeat=False))
    _, result = _run(account, [{"tool_name": AMI, "type": "required_before_exit"}])
    second = fake_llm.chat_requests[1]
    assert "You must call archival_memory_insert" in second["messages"][-1]["content"]
    assert result.usage["step_count"] == 2 and result.stop_reason == "end_turn"


def test_rules_are_set_and_read_through_the_api(api, account):
    rules = [{"tool_name": CS, "type": "max_count_per_step", "max_count_limit": 2}]
    r = api.post("/v1/agents/", {"name": "ruled", "model": "openai/fake-model", "tool_rules": rules})
    assert r.status_code == 201 and r.json()["tool_rules"][0]["max_count_limit"] == 2
    bad = api.post(
        "/v1/agents/", {"name": "bad", "model": "openai/fake-model", "tool_rules": [{"type": "nope", "tool_name": "x"}]}
    )
    assert bad.status_code == 422


@pytest.mark.django_db(transaction=True)
def test_custom_tool_runs_in_sandbox_with_secrets_and_agent_env(account, fake_llm):
    from tools.models import ToolRun
    from tools.services import tool_attach, tool_create

    source = '''
import os

def whoami(greeting: str) -> str:
    """Say who runs this tool.

    Args:
        greeting: A word to start with.
    """
    return f"{greeting} {os.environ['AIDE_AGENT_ID']} {os.environ['MY_SECRET']} {bool(os.environ.get('AIDE_API_TOKEN'))}"
'''
    agent = make_agent(account.org, secrets={"MY_SECRET": "s3cret"})
    tool_attach(agent=agent, tool=tool_create(owner=account.org, source_code=source))
    fake_llm.script(FakeLLM.tool("whoami", {"greeting": "hi"}, heartbeat=True), FakeLLM.tool(SM, {"message": "done"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message"][0]
    assert ret["status"] == "success", ret
    assert ret["tool_return"] == f"hi {agent.id} s3cret True"
    run = ToolRun.objects.get(agent_id=agent.id)
    assert run.origin == "agent" and run.step_id == ret["step_id"] and run.sandbox
