"""The memory statistics a snapshot shows (archival passages, messages outside the window) are the same whether
the agent's row came with its counts (`queries.agent_read(counts=True)`, the hot paths) or they are counted separately."""

from core.agents import queries
from core.agents.context import agent_snapshot
from core.models import Agent
from core.runs.runner import run_agent
from memory.services import passage_insert
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def test_counts_read_with_the_agent_match_counting_them(account, fake_llm):
    agent = make_agent(account.org)
    other = make_agent(account.org, name="other")  # its passages and messages are not counted for `agent`
    for text in ["one", "two", "three"]:
        passage_insert(agent=agent, text=text)
    passage_insert(agent=other, text="elsewhere")
    for text in ["hi", "again"]:
        fake_llm.script(FakeLLM.tool("send_message", {"message": text}))
        run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])
    Agent.objects.filter(pk=agent.id).update(message_ids=Agent.objects.get(pk=agent.id).message_ids[:3])  # evict

    plain = agent_snapshot(agent=Agent.objects.get(pk=agent.id))
    counted = agent_snapshot(agent=queries.agent_read(agent_id=agent.id, counts=True))
    assert counted.stats == plain.stats and counted.max_seq == plain.max_seq
    assert plain.stats.archival_count == 3 and plain.stats.recall_outside_window > 0
    fresh = agent_snapshot(agent=queries.agent_read(agent_id=make_agent(account.org, name="new").id, counts=True))
    assert fresh.stats.archival_count == 0 and fresh.max_seq >= 0
