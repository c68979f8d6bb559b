"""A step's commit phase holds its locks only for its own writes: embeddings, model calls and tool runs
happen before it, and a slow call inside a transaction raises (core.transactions)."""

import pytest
from django.db import transaction

from core.agents.services import agent_update
from core.models import Message
from core.runs.runner import run_agent
from core.transactions import IOInTransaction, outside_transaction
from memory.embedders.selection import embedder_for_agent
from memory.models import Block, Passage
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

EMBEDDING = "openai/text-embedding-3-small"


@pytest.fixture
def agent(account, fake_llm):
    return agent_update(agent=make_agent(account.org), changes={"embedding": EMBEDDING})


def _run(agent, text="go"):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def test_an_embedder_call_inside_a_durable_transaction_raises(agent, fake_llm):
    embedder = embedder_for_agent(agent)
    with pytest.raises(IOInTransaction, match="embedding"):
        with transaction.atomic(durable=True):
            embedder.embed(["inside the commit phase"])
    assert fake_llm.embedding_requests == []
    assert embedder.embed(["outside"]).shape == (1, fake_llm.embedding_dim)  # the same call outside is fine


def test_any_open_transaction_counts_but_the_tests_own_wrapper_does_not(db):
    outside_transaction("a call in a plain test")  # pytest-django's wrapping transaction is not ours
    with pytest.raises(IOInTransaction, match="the model call"):
        with transaction.atomic():
            outside_transaction("the model call")


def test_archival_insert_is_embedded_before_the_step_commits(agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "the dragon is red"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "noted"}),
    )
    result = _run(agent)
    assert result.status == "completed", result.error
    passage = Passage.objects.get(agent=agent)
    assert passage.embedding_model == EMBEDDING and passage.embedding_dim == fake_llm.embedding_dim
    assert len(fake_llm.embedding_requests) == 1


def test_calls_of_one_reply_run_in_order_and_see_earlier_edits(agent, fake_llm):
    fake_llm.script(
        FakeLLM.tools(
            ("core_memory_append", {"label": "human", "content": "Likes tea."}),
            ("core_memory_replace", {"label": "human", "old_content": "Likes tea.", "new_content": "Likes green tea."}),
            ("archival_memory_search", {"query": "tea"}),
        ),
        FakeLLM.tool("send_message", {"message": "ok"}),
    )
    result = _run(agent)
    assert result.status == "completed", result.error
    human = Block.objects.get(agentblock__agent=agent, label="human")
    assert human.value.endswith("Likes green tea.") and human.version == 3
    returns = [m["status"] for m in result.messages if m["message_type"] == "tool_return_message"]
    assert returns == ["success", "success", "success"]


def test_a_write_refused_at_commit_becomes_a_tool_error_and_nothing_else_changes(agent, fake_llm, monkeypatch):
    from memory import services

    real = services.block_update

    def made_read_only_meanwhile(*, block, **kwargs):
        Block.objects.filter(pk=block.pk).update(read_only=True)
        return real(block=block, **kwargs)

    monkeypatch.setattr(services, "block_update", made_read_only_meanwhile)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "ok"}),
    )
    result = _run(agent)
    assert result.status == "completed"
    ret = [m for m in result.messages if m["message_type"] == "tool_return_message"][0]
    assert ret["status"] == "error" and "read-only" in ret["tool_return"]
    assert Block.objects.get(agentblock__agent=agent, label="human").value == "The user's name is Alice."
    assert Message.objects.filter(agent=agent, role="tool").count() == 2  # the refused edit's, send_message's
