"""conversation_search finds what the agent itself said (its send_message content), and the model still sees
exactly the assistant content it produced (the searchable words are not sent back)."""

import json

from core.runs.runner import run_agent
from memory.selectors import messages_search
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def test_agents_own_reply_is_found_and_not_echoed_into_the_payload(account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "The capital of Mongolia is Ulaanbaatar"}))
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "capital?"}])
    hits = messages_search(agent=agent, query="Ulaanbaatar")
    assert [h.role for h in hits] == ["assistant"]
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "Ulaanbaatar"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "found it"}),
    )
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "what did you say?"}])
    second = fake_llm.chat_requests[-1]["messages"]
    tool_result = json.loads(next(m for m in reversed(second) if m["role"] == "tool")["content"])
    assert "Ulaanbaatar" in tool_result["message"]
    assistant_turn = next(m for m in second if m["role"] == "assistant")
    assert not assistant_turn.get("content")  # the model's own (empty) content, not the search text
