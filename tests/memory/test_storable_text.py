"""What the model writes into memory is stored even when it holds text the databases refuse (NUL, lone
surrogates): the agent's memory tools and archival inserts commit, with U+FFFD in place of the bad characters."""

from core.models import Message
from core.runs.runner import run_agent
from memory.models import BlockHistory, Passage
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def test_memory_edits_and_archival_inserts_with_nul_commit(account, fake_llm):
    agent = make_agent(account.org, name="Mem")
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "likes\x00tea"}, heartbeat=True),
        FakeLLM.tool("archival_memory_insert", {"content": "note\x00one"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "saved\x00"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "remember"}])
    assert result.error in (None, ""), result.error
    human = agent.blocks.get(label="human")
    assert "likes\ufffdtea" in human.value and "\x00" not in human.value
    assert "likes\ufffdtea" in BlockHistory.objects.filter(block=human).order_by("-version").first().new_value
    assert Passage.objects.get(agent=agent).text == "note\ufffdone"
    rows = Message.objects.filter(agent=agent)
    assert rows.count() >= 7 and not any("\x00" in m.text + str(m.tool_calls) + str(m.content) for m in rows)


def test_a_model_reply_with_a_lone_surrogate_commits(account, fake_llm):
    agent = make_agent(account.org, name="Sur")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "half an emoji: \ud83d"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.error in (None, ""), result.error
    assert Message.objects.filter(agent=agent, role="assistant").exists()


def test_json_fields_store_clean_values_as_given_and_clean_the_rest(account, fake_llm):
    """A JSON field's value is encoded once when it is clean; a NUL or a lone surrogate anywhere (keys included) is
    replaced, while a valid pair (an emoji) and other non-ASCII text come back unchanged."""
    agent = make_agent(account.org, name="Json")
    values = [
        ({"a": [1, 2.5, None, True], "b": {"c": "plain"}}, {"a": [1, 2.5, None, True], "b": {"c": "plain"}}),
        ({"text": "caf\u00e9 \U0001f600 \ud55c"}, {"text": "caf\u00e9 \U0001f600 \ud55c"}),
        ({"nul\x00key": ["x\x00y"]}, {"nul\ufffdkey": ["x\ufffdy"]}),
        ([{"half": "\ud83d"}], [{"half": "\ufffd"}]),
    ]
    for i, (given, stored) in enumerate(values):
        row = Message.objects.create(
            id=f"message-json-{i}", owner=agent.owner, agent=agent, seq=1000 + i, role="tool", tool_calls=given
        )
        assert Message.objects.get(pk=row.pk).tool_calls == stored


def test_the_plain_json_fields_written_every_step_read_back_what_was_written(account, agent):
    """An agent's window, a run's inputs and usage are encoded by jsontext: non-ASCII text, emoji, floats, nesting
    and empty values come back as given, and a JSON lookup on the stored value still finds them."""
    from django.db import connection

    from core.models import Agent, Run

    window = ["message-a", "message-\u00e9", "message-\U0001f600"]
    usage = {"prompt_tokens": 12, "cost_usd": 0.00012, "run_ids": [], "note": "\ud55c\uae00", "nested": {"x": [None]}}
    Agent.objects.filter(pk=agent.pk).update(message_ids=window)
    run = Run.objects.create(owner=agent.owner, agent=agent, input_messages=[{"role": "user", "text": "h\u00e9"}])
    Run.objects.filter(pk=run.pk).update(usage=usage)
    assert Agent.objects.get(pk=agent.pk).message_ids == window
    stored = Run.objects.get(pk=run.pk)
    assert (stored.usage, stored.input_messages) == (usage, [{"role": "user", "text": "h\u00e9"}])
    assert Run.objects.filter(pk=run.pk, usage__note="\ud55c\uae00", usage__prompt_tokens=12).exists()
    if connection.vendor == "postgresql":  # SQLite has no JSON containment lookup
        assert Agent.objects.filter(pk=agent.pk, message_ids__contains=["message-\u00e9"]).exists()
