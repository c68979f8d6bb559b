"""The starting templates shipped as agent files: each is offered on the new-agent page, creates its agent(s)
from there, and runs a turn against the fake LLM the way its instructions describe."""

import pytest

from core.agents.agentfile.templates import templates_list
from core.models import Agent, Run
from core.runs import queue
from core.runs.runner import run_agent
from memory.models import Block, Passage
from tests.fake_llm import FakeLLM

WAIT = "send_message_to_agent_and_wait_for_reply"


def _create(web, template: str, name: str) -> Agent:
    r = web.post("/agents/new/", {"name": name, "template": f"af:{template}", "model": "openai/gpt-4o-mini"})
    assert r.status_code == 302, r.content
    return Agent.objects.get(name=name)


def _turn(agent, text):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _returns(result) -> list[dict]:
    return [m for m in result.messages if m["message_type"] == "tool_return_message"]


def test_the_new_agent_page_offers_more_than_two_templates(web):
    names = {t["name"] for t in templates_list()}
    assert {"customer_support", "research", "supervisor_worker"} <= names
    page = web.get("/").content.decode()
    for key in ("customer_support", "research", "supervisor_worker", "memgpt_chat"):
        assert f'value="af:{key}"' in page
    assert "Supervisor + worker (two agents)" in page


def test_customer_support_answers_from_its_archival_knowledge_base(web, fake_llm):
    agent = _create(web, "customer_support", "Support")
    assert Passage.objects.filter(agent=agent).count() == 4
    assert {b.label for b in Block.objects.filter(agentblock__agent=agent)} == {"persona", "human", "ticket"}
    fake_llm.script(
        FakeLLM.tool("archival_memory_search", {"query": "refund"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Within 30 days of delivery, if unused."}),
    )
    result = _turn(agent, "Can I get a refund?")
    assert result.status == "completed"
    found = _returns(result)[0]
    assert found["status"] == "success" and "refunded within 30 days" in found["tool_return"]
    assert result.messages[-1]["content"] == "Within 30 days of delivery, if unused."  # send_message's return: hidden


def test_research_agent_follows_its_tool_rule_chain(web, fake_llm):
    agent = _create(web, "research", "Researcher")
    fake_llm.script(
        FakeLLM.tool("plan_research", {"question": "Who built it and when?"}, heartbeat=True),
        FakeLLM.tool("archival_memory_search", {"query": "built"}, heartbeat=True),
        FakeLLM.tool("record_finding", {"finding": "Nothing in memory yet."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "I found nothing yet."}),
    )
    result = _turn(agent, "Who built it and when?")
    assert result.status == "completed"
    plan, search, note = _returns(result)[:3]
    said = lambda r: r["tool_return"]  # noqa: E731 - what the tool returned, unwrapped as Letta lists it
    assert plan["status"] == "success" and said(plan) == "1. Who built it\n2. when?"  # ran in the sandbox
    assert search["status"] == "success" and said(note) == "Nothing in memory yet. [unsourced]"
    first, second = fake_llm.chat_requests[:2]
    offered = lambda req: {t["function"]["name"] for t in req.get("tools") or []}  # noqa: E731
    assert offered(first) == {"plan_research"}  # run_first
    assert offered(second) == {"archival_memory_search", "conversation_search"}  # plan_research's children


@pytest.mark.django_db(transaction=True)
def test_supervisor_delegates_to_its_worker(web, fake_llm):
    try:
        supervisor = _create(web, "supervisor_worker", "Team")
        worker = Agent.objects.get(name="Team · Worker")
        team = Block.objects.get(agentblock__agent=supervisor, label="team")
        assert Block.objects.filter(agentblock__agent=worker, label="team").get() == team  # shared
        assert f"- Team: {supervisor.id}" in team.value and f"- Team · Worker: {worker.id}" in team.value
        fake_llm.script(
            FakeLLM.tool(WAIT, {"message": "Summarise: tea is good.", "other_agent_id": worker.id}, heartbeat=True),
            FakeLLM.tool("send_message", {"message": "Tea is good."}),
            FakeLLM.tool("send_message", {"message": "My worker says: tea is good."}),
        )
        result = _turn(supervisor, "Please get this summarised.")
        assert result.status == "completed"
        reply = _returns(result)[0]
        assert reply["status"] == "success" and reply["tool_return"] == "Tea is good."
        assert Run.objects.get(agent=worker).status == "completed"
        assert result.messages[-1]["content"] == "My worker says: tea is good."
    finally:
        queue.shutdown()
