"""A snapshot's tools and blocks come from specs kept per process by each row's `updated_at` (tools.selectors and
memory.selectors): a change written through the services is seen by the next snapshot, the rows are read only when
a step asks for them, and a row deleted meanwhile is gone rather than served from memory."""

from core.agents.context import agent_snapshot
from core.agents.queries import agent_read
from memory.selectors import agent_block_specs
from memory.services import block_update
from tests.factories import make_agent
from tools.models import Tool


def _snap(agent):
    return agent_snapshot(agent=agent_read(agent_id=agent.id, counts=True))


def _tool_id(snap, name: str) -> str:
    return dict(zip([t.name for t in snap.tools], snap.tool_ids, strict=True))[name]


def test_a_tool_saved_anew_is_seen_by_the_next_snapshot(account):
    agent = make_agent(account.org)
    first = _snap(agent)
    tool = Tool.objects.get(pk=_tool_id(first, "send_message"))
    assert _snap(agent).tools == first.tools  # kept: the same specs again
    tool.description = "Says it, changed."
    tool.json_schema = {**tool.json_schema, "description": "Says it, changed."}
    tool.save()
    again = _snap(agent)
    spec = next(t for t in again.tools if t.name == "send_message")
    assert spec.description == "Says it, changed." and spec.json_schema["description"] == "Says it, changed."
    assert again.tool_row("send_message").pk == tool.pk and again.tool_row("no_such_tool") is None


def test_a_deleted_tool_is_not_offered_and_its_row_is_none(account):
    agent = make_agent(account.org)
    first = _snap(agent)
    Tool.objects.filter(pk=_tool_id(first, "conversation_search")).delete()
    assert "conversation_search" not in [t.name for t in _snap(agent).tools]
    assert first.tool_row("conversation_search") is None  # read after the delete: nothing to run


def test_a_block_edit_is_seen_by_the_next_snapshot_with_its_time(account):
    agent = make_agent(account.org)
    first = _snap(agent)
    human = next(b for b in first.blocks if b.label == "human")
    row = block_update(block=next(r for r in first.block_rows if r.pk == human.id), changes={"value": "Likes tea."})
    again = _snap(agent)
    assert next(b for b in again.blocks if b.label == "human").value == "Likes tea."
    assert [b.id for b in again.blocks] == [b.id for b in first.blocks]  # the display order kept
    _specs, edited = agent_block_specs(agent=agent)
    assert edited == row.updated_at
    assert again.stats.last_memory_edit == row.updated_at.strftime("%Y-%m-%d %I:%M:%S %p UTC")
