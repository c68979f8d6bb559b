"""The context simulator tells the exact truth under tool rules: for every rule type, the request it shows for the
next model call — the first step of a run, and a run's continuing step (paused there by a breakpoint) — is the
request that step then sends, tools and tool_choice included, and it says which rule removed which tool."""

import pytest

from core.models import Run
from core.runs.executor import run_wait
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

SEARCH = "conversation_search"
RULES = {
    "run_first": {"type": "run_first", "tool_name": SEARCH},
    "exit_loop": {"type": "exit_loop", "tool_name": "archival_memory_insert"},
    "continue_loop": {"type": "continue_loop", "tool_name": SEARCH},
    "constrain_child_tools": {"type": "constrain_child_tools", "tool_name": SEARCH, "children": ["send_message"]},
    "parent_last_tool": {"type": "parent_last_tool", "tool_name": SEARCH, "children": ["archival_memory_search"]},
    "conditional": {
        "type": "conditional",
        "tool_name": SEARCH,
        "child_output_mapping": {"No results found.": "send_message"},
        "default_child": "archival_memory_search",
    },
    "max_count_per_step": {"type": "max_count_per_step", "tool_name": SEARCH, "max_count_limit": 1},
    "required_before_exit": {"type": "required_before_exit", "tool_name": "archival_memory_search"},
    "requires_approval": {"type": "requires_approval", "tool_name": "archival_memory_insert"},
}
# what each rule takes out of the first step and of the step after a conversation_search call
REMOVED_FIRST = {"run_first": "all but conversation_search", "parent_last_tool": {"archival_memory_search"}}
REMOVED_NEXT = {
    "constrain_child_tools": "all but send_message",
    "parent_last_tool": "all but archival_memory_search",
    "conditional": "all but send_message",
    "max_count_per_step": {SEARCH},
}


def _exact(sim: dict, sent: dict) -> None:
    assert sent["messages"] == sim["messages"]
    assert [t["function"]["name"] for t in sent.get("tools", [])] == [t["function"]["name"] for t in sim["tools"]]
    assert sent.get("tools") == sim["tools"]
    assert sent.get("tool_choice") == sim["tool_choice"]


def _removed(expected, names: list[str], keep_note) -> set[str]:
    if isinstance(expected, str):
        kept = expected.removeprefix("all but ")
        return {n for n in names if n != kept}
    return set(expected)


def _continue(api, run_id, **body):
    r = api.post(f"/v1/runs/{run_id}/continue", body)
    assert r.status_code == 200, r.content
    return run_wait(run=Run.objects.get(pk=r.json()["id"]), timeout=30)


@pytest.mark.parametrize("kind", list(RULES))
def test_the_simulated_next_request_is_the_request_sent(api, account, fake_llm, kind):
    agent = make_agent(account.org, tool_rules=[RULES[kind]])
    api.post(f"/v1/agents/{agent.id}/breakpoints", {"on": "model_call"})
    names = [t["name"] for t in api.get(f"/v1/agents/{agent.id}/tools").json()]

    # the first step of a run: paused before its model call, the input already stored
    out = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "look it up"}]}).json()
    first = api.get(f"/v1/agents/{agent.id}/context").json()
    assert first["next_call"]["run_id"] == out["run_id"] and first["next_call"]["history"] == []
    gone = {t["name"] for t in first["removed_tools"]}
    assert gone == (_removed(REMOVED_FIRST[kind], names, None) if kind in REMOVED_FIRST else set())
    assert all(t["why"] and t["rule"]["type"] == kind for t in first["removed_tools"])
    fake_llm.script(FakeLLM.tool(SEARCH, {"query": "tea"}, heartbeat=True))
    paused = _continue(api, out["run_id"], step=True)  # the call goes out; its tool waits (stepping)
    _exact(first["request"], fake_llm.chat_requests[0])

    # a continuing step: after the search ran, paused before the next model call
    paused = _continue(api, paused.id, step=True)
    assert paused.waiting["before"] == "model_call"
    nxt = api.get(f"/v1/agents/{agent.id}/context").json()
    assert nxt["next_call"]["history"] == [SEARCH]
    gone = {t["name"] for t in nxt["removed_tools"]}
    assert gone == (_removed(REMOVED_NEXT[kind], names, None) if kind in REMOVED_NEXT else set())
    api.delete(f"/v1/agents/{agent.id}/breakpoints")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "done"}))
    _continue(api, paused.id)
    _exact(nxt["request"], fake_llm.chat_requests[1])
