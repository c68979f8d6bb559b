"""Time travel through the real runner and the fake LLM: replay a recorded step on other models or with an
edited block, fork an agent at a step, and what every step cost."""

import re

import pytest

from core.agents.context import agent_context
from core.engine.tokens import step_cost
from core.models import Agent, Message, Replay, Run, Step
from core.runs.timetravel import state_compile
from memory.models import Block
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


def _turn(api, agent, fake_llm, text, *replies):
    fake_llm.script(*replies)
    body = api.post(f"/v1/agents/{agent.id}/messages", {"input": text}).json()
    assert body["stop_reason"]["stop_reason"] == "end_turn", body
    return body


def _without_model(request: dict) -> dict:
    return {k: v for k, v in request.items() if k != "model"}


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def test_a_recorded_state_compiles_to_the_request_that_was_sent(api, agent, fake_llm):
    _turn(
        api,
        agent,
        fake_llm,
        "remember tea",
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "ok"}),
    )
    steps = list(Step.objects.filter(agent=agent).order_by("created_at"))
    assert len(steps) == 2
    for step in steps:
        assert _without_model(state_compile(step.state).request) == _without_model(step.request)


def test_replay_on_two_models_returns_both_answers_and_leaves_the_agent_alone(api, agent, fake_llm):
    _turn(api, agent, fake_llm, "hello", FakeLLM.tool("send_message", {"message": "original"}))
    step = Step.objects.get(agent=agent)
    fake_llm.by_model = {
        "model-a": FakeLLM.tool("send_message", {"message": "from a"}),
        "model-b": FakeLLM.text("plain text from b"),
    }
    messages_before = list(Message.objects.filter(agent=agent).values_list("id", "text"))
    blocks_before = list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version"))
    r = api.post(f"/v1/steps/{step.id}/replay", {"models": ["openai/model-a", "openai/model-b"]})
    assert r.status_code == 200, r.content
    replay = r.json()
    by_model = {x["model"]: x for x in replay["results"]}
    assert set(by_model) == {"openai/model-a", "openai/model-b"}
    a, b = by_model["openai/model-a"], by_model["openai/model-b"]
    assert a["tool_calls"][0]["name"] == "send_message" and '"from a"' in a["tool_calls"][0]["arguments"]
    assert b["content"] == "plain text from b" and b["tool_calls"] == []
    for result, name in ((a, "model-a"), (b, "model-b")):
        assert result["error"] is None and result["request"]["model"] == f"openai/{name}"
        assert _without_model(result["request"]) == _without_model(step.request)
        assert result["usage"]["prompt_tokens"] > 0 and result["latency_ms"] > 0
        assert result["cost_usd"] is None  # fake models have no price, and say so
    assert '"original"' in replay["actual"]["tool_calls"][0]["arguments"]
    assert list(Message.objects.filter(agent=agent).values_list("id", "text")) == messages_before
    assert list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version")) == blocks_before
    assert Run.objects.filter(agent=agent).count() == 1
    listed = api.get(f"/v1/steps/{step.id}/replays").json()
    assert [x["id"] for x in listed] == [replay["id"]] and Replay.objects.count() == 1


def _block_region(system: str, label: str) -> tuple[str, str, str]:
    match = re.search(rf"<{label}>.*?</{label}>", system, re.S)
    return system[: match.start()], match.group(0), system[match.end() :]


def test_replay_with_an_edited_block_changes_exactly_that_block(api, agent, fake_llm):
    _turn(api, agent, fake_llm, "hello", FakeLLM.tool("send_message", {"message": "hi"}))
    step = Step.objects.get(agent=agent)
    replay = api.post(f"/v1/steps/{step.id}/replay", {"blocks": {"human": "The user's name is Bob."}}).json()
    sent = replay["results"][0]["request"]
    assert _without_model(sent) != _without_model(step.request)
    assert sent["messages"][1:] == step.request["messages"][1:] and sent["tools"] == step.request["tools"]
    before, old_block, after = _block_region(step.request["messages"][0]["content"], "human")
    new_before, new_block, new_after = _block_region(sent["messages"][0]["content"], "human")
    assert (new_before, new_after) == (before, after)
    assert "Alice" in old_block and "The user's name is Bob." in new_block and "Alice" not in new_block
    assert Block.objects.get(agentblock__agent=agent, label="human").value == "The user's name is Alice."


def test_replay_overrides_are_checked(api, agent, fake_llm, other_account):
    _turn(api, agent, fake_llm, "hello", FakeLLM.tool("send_message", {"message": "hi"}))
    step = Step.objects.get(agent=agent)
    for body, says in (
        ({"blocks": {"nope": "x"}}, "No block labelled nope"),
        ({"messages": ["message-unknown"]}, "were not in this step's context"),
        ({"tools_add": ["no_such_tool"]}, "No tool named no_such_tool"),
        ({"temperature": 7}, "temperature"),
    ):
        r = api.post(f"/v1/steps/{step.id}/replay", body)
        assert r.status_code == 422 and says in r.content.decode(), (body, r.content)
    assert not Replay.objects.exists()
    from tests.factories import ApiClient

    assert ApiClient(other_account.token).post(f"/v1/steps/{step.id}/replay", {}).status_code == 404
    dropped = step.state["message_ids"][-1]
    replay = api.post(
        f"/v1/steps/{step.id}/replay", {"messages": [dropped], "tools_remove": ["conversation_search"]}
    ).json()
    sent = replay["results"][0]["request"]
    assert len(sent["messages"]) == len(step.request["messages"]) - 1
    assert "conversation_search" not in [x["function"]["name"] for x in sent["tools"]]


def test_fork_at_a_step_starts_from_exactly_what_the_model_saw_and_goes_its_own_way(api, agent, fake_llm):
    _turn(api, agent, fake_llm, "turn one", FakeLLM.tool("send_message", {"message": "one"}))
    _turn(
        api,
        agent,
        fake_llm,
        "turn two, remember tea",
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "two"}),
    )
    _turn(api, agent, fake_llm, "turn three", FakeLLM.tool("send_message", {"message": "three"}))
    edit_step = Step.objects.get(agent=agent, run__input_messages__0__text="turn two, remember tea", index=0)
    r = api.post(f"/v1/agents/{agent.id}/fork", {"step_id": edit_step.id, "before": True})
    assert r.status_code == 200, r.content
    fork = Agent.objects.get(pk=r.json()["id"])
    assert fork.metadata["forked_from"] == {
        "agent_id": agent.id,
        "step_id": edit_step.id,
        "step_index": 0,
        "before": True,
    }
    assert _without_model(agent_context(agent=fork).request) == _without_model(edit_step.request)

    after = Agent.objects.get(pk=api.post(f"/v1/agents/{agent.id}/fork", {"step_id": edit_step.id}).json()["id"])
    assert Block.objects.get(agentblock__agent=after, label="human").value.endswith("Likes tea.")
    assert Block.objects.get(agentblock__agent=fork, label="human").value == "The user's name is Alice."

    original = list(Message.objects.filter(agent=agent).values_list("id", flat=True))
    _turn(api, fork, fake_llm, "a different turn two", FakeLLM.tool("send_message", {"message": "forked"}))
    assert list(Message.objects.filter(agent=agent).values_list("id", flat=True)) == original
    assert Message.objects.filter(agent=fork, text__contains="a different turn two").exists()
    assert not Message.objects.filter(agent=fork, text__contains="turn three").exists()


def test_costs_add_up_from_steps_to_runs_to_the_agent(api, account, fake_llm):
    priced = make_agent(account.org, name="priced", model="openai/gpt-4o-mini")
    _turn(
        api,
        priced,
        fake_llm,
        "one",
        FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "a"}),
    )
    _turn(api, priced, fake_llm, "two", FakeLLM.tool("send_message", {"message": "b"}))
    steps = list(Step.objects.filter(agent=priced))
    assert len(steps) == 3
    for step in steps:
        assert step.usage["cost_usd"] == step_cost("openai/gpt-4o-mini", step.usage) > 0
        assert step.usage["estimated_prompt_tokens"] > 0
    for run in Run.objects.filter(agent=priced):
        assert run.usage["cost_usd"] == pytest.approx(sum(s.usage["cost_usd"] for s in steps if s.run_id == run.id))
    usage = api.get(f"/v1/agents/{priced.id}/usage").json()
    assert usage["cost_usd"] == pytest.approx(sum(s.usage["cost_usd"] for s in steps)) and usage["unpriced_steps"] == 0
    ratios = [s.usage["prompt_tokens"] / s.usage["estimated_prompt_tokens"] for s in steps]
    assert usage["calibration"]["steps"] == 3 and usage["calibration"]["ratio"] == pytest.approx(
        sum(ratios) / 3, abs=1e-4
    )

    unpriced = make_agent(account.org, name="unpriced")
    _turn(api, unpriced, fake_llm, "one", FakeLLM.tool("send_message", {"message": "a"}))
    assert Step.objects.get(agent=unpriced).usage["cost_usd"] is None
    totals = api.get(f"/v1/agents/{unpriced.id}/usage").json()
    assert totals["cost_usd"] == 0 and totals["unpriced_steps"] == 1
