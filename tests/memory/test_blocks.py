"""Block history (timeline, diffs, restore) and shared blocks surviving an agent's deletion, on both databases."""

import pytest

from core.agents.services import BlockInput, agent_delete
from memory import selectors, services
from memory.models import Block
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def test_history_records_who_changed_what(agent, account):
    block = selectors.agent_block_by_label(agent=agent, label="human")
    services.block_update(
        block=block, changes={"value": "The user's name is Alice.\nShe likes tea."}, actor_user=account.user
    )
    services.block_update(
        block=block,
        changes={"value": "The user's name is Alice.\nShe likes coffee."},
        agent_id=agent.id,
        step_id="step-1",
        tool_call_id="call-1",
    )
    history = selectors.block_history(block=block)
    assert [h.version for h in history] == [3, 2, 1]
    assert history[0].actor_type == "agent" and history[0].step_id == "step-1" and history[0].tool_call_id == "call-1"
    assert history[1].actor_type == "user" and history[1].actor_user == account.user
    assert history[2].actor_type == "system" and history[2].old_value == ""


def test_an_edit_writes_only_its_fields_with_the_time_and_keeps_the_rest(agent, account):
    block = selectors.agent_block_by_label(agent=agent, label="human")
    before = Block.objects.get(pk=block.pk)
    Block.objects.filter(pk=block.pk).update(description="set elsewhere meanwhile")  # not this edit's field
    edited = services.block_update(block=block, changes={"value": "new", "limit": 900, "metadata": {"k": [1]}})
    row = Block.objects.get(pk=block.pk)
    assert (row.value, row.limit, row.metadata, row.version) == ("new", 900, {"k": [1]}, before.version + 1)
    assert row.description == "set elsewhere meanwhile" and row.label == before.label
    assert row.updated_at > before.updated_at and row.updated_at == edited.updated_at
    [change] = selectors.block_history(block=block)[:1]
    assert (change.old_value, change.new_value, change.changes) == (
        before.value,
        "new",
        {"limit": [before.limit, 900], "metadata": [{}, {"k": [1]}]},
    )
    with pytest.raises(Block.DoesNotExist):
        services.block_update(block=Block(pk="block-gone"), changes={"value": "x"})


def test_diff_lines(agent, account):
    block = selectors.agent_block_by_label(agent=agent, label="human")
    services.block_update(
        block=block, changes={"value": "The user's name is Alice.\nShe likes tea."}, actor_user=account.user
    )
    entry = selectors.block_history(block=block)[0]
    assert selectors.block_history_diff(entry) == [
        "--- v1",
        "+++ v2",
        "@@ -1 +1,2 @@",
        " The user's name is Alice.",
        "+She likes tea.",
    ]
    first = selectors.block_history(block=block)[-1]
    assert selectors.block_history_diff(first)[-1] == "+The user's name is Alice."


def test_restore_any_version_is_a_new_change(agent, account):
    block = selectors.agent_block_by_label(agent=agent, label="human")
    original = block.value
    services.block_update(block=block, changes={"value": "changed once"}, actor_user=account.user)
    services.block_update(block=block, changes={"value": "changed twice"}, actor_user=account.user)
    restored = services.block_restore(block=block, version=1, actor_user=account.user)
    assert restored.value == original and restored.version == 4
    latest = selectors.block_history(block=block)[0]
    assert (latest.old_value, latest.new_value, latest.actor_user) == ("changed twice", original, account.user)


def test_restore_unknown_version(agent, account):
    from core.errors import NotFound

    block = selectors.agent_block_by_label(agent=agent, label="human")
    with pytest.raises(NotFound):
        services.block_restore(block=block, version=99, actor_user=account.user)


def test_deleting_an_agent_keeps_blocks_attached_elsewhere(account):
    shared = services.block_create(owner=account.org, label="team", value="shared knowledge")
    first = make_agent(
        account.org,
        name="first",
        block_ids=[shared.id],
        include_base_tools=False,
        memory_blocks=[BlockInput(label="own", value="only mine")],
    )
    second = make_agent(account.org, name="second", block_ids=[shared.id], include_base_tools=False, memory_blocks=[])
    own = selectors.agent_block_by_label(agent=first, label="own")
    agent_delete(agent=first)
    assert Block.objects.filter(id=shared.id).exists()
    assert not Block.objects.filter(id=own.id).exists()
    assert [b.id for b in selectors.agent_blocks(agent=second)] == [shared.id]
    agent_delete(agent=second)
    assert not Block.objects.filter(id=shared.id).exists()  # the last agent took it with it


def test_shared_block_edit_is_seen_by_every_agent(account):
    shared = services.block_create(owner=account.org, label="team", value="v1")
    a = make_agent(account.org, name="a", block_ids=[shared.id], include_base_tools=False, memory_blocks=[])
    b = make_agent(account.org, name="b", block_ids=[shared.id], include_base_tools=False, memory_blocks=[])
    services.block_update(
        block=selectors.agent_block_by_label(agent=a, label="team"), changes={"value": "v2"}, agent_id=a.id
    )
    assert selectors.agent_block_by_label(agent=b, label="team").value == "v2"
    assert Block.objects.filter(label="team").count() == 1


def test_deleting_an_agent_deletes_its_passages_and_messages_from_search(agent, other_agent):
    from tests.memory.conftest import add_message

    services.passage_insert(agent=agent, text="doomed passage")
    add_message(agent, "user", "doomed message")
    agent_delete(agent=agent)
    from core.models import Message
    from memory.models import Passage

    assert not Passage.objects.filter(text="doomed passage").exists()
    assert not Message.objects.filter(text="doomed message").exists()
    assert selectors.passages_search(agent=other_agent, query="doomed") == []


def test_shared_block_edit_is_pushed_to_every_agents_group_after_commit(
    account, monkeypatch, django_capture_on_commit_callbacks
):
    from core import events

    sent = []
    monkeypatch.setattr(services, "send_event", lambda group, event: sent.append((group, event)))
    shared = services.block_create(owner=account.org, label="team", value="v1")
    a = make_agent(account.org, name="a", block_ids=[shared.id], include_base_tools=False, memory_blocks=[])
    b = make_agent(account.org, name="b", block_ids=[shared.id], include_base_tools=False, memory_blocks=[])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.block_update(block=shared, changes={"value": "v2"}, actor_user=account.user)
    assert sent == []  # nothing goes out before the commit
    for callback in callbacks:
        callback()
    assert sorted(group for group, _ in sent) == sorted([events.agent_group(a.id), events.agent_group(b.id)])
    assert all(event["block"]["value"] == "v2" and event["block"]["version"] == 2 for _, event in sent)
