"""Core memory in view, server side: the blocks' column in the workspace, each card with its last change (who made
it, the step and tool call of an agent's edit, a compact escaped diff), the card drawn again for a live change, and
the word diff itself."""

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.models import Step
from core.runs.runner import run_agent
from memory import services as memory_services
from memory.models import Block, BlockHistory
from memory.presenters import DIFF_CONTEXT, DIFF_SHOWN, block_cards, text_diff
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _agent_edits_human(agent, fake_llm, content: str) -> BlockHistory:
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": content}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "remember this"}])
    return BlockHistory.objects.get(agent_id=agent.id, actor_type="agent")


def _memory_column(page: str) -> str:
    start = page.index('<aside class="pane memory-col" id="memory-pane"')
    return page[start : page.index("</aside>", start)]


def test_the_workspace_has_a_memory_column_whose_card_names_the_tool_call_that_changed_it(web, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    entry = _agent_edits_human(agent, fake_llm, "Likes <b>oolong</b> tea.")
    step = Step.objects.get(id=entry.step_id)
    column = _memory_column(web.get(f"/agents/{agent.id}/").content.decode())
    assert 'id="blocks-panel"' in column and 'aria-label="persona value"' in column
    card = column[column.index(f'data-block-id="{entry.block_id}"') :]
    card = card[: card.index("</form>")]
    assert 'data-version="2"' in card and "just-changed" not in card
    assert "by <code>core_memory_append</code>" in card
    assert f'<button type="button" class="step-chip" data-step="{step.id}"' in card and f"step {step.index}" in card
    assert f'class="bc-call" href="#call={entry.tool_call_id}" data-call="{entry.tool_call_id}"' in card
    assert f'data-call="{entry.tool_call_id}" data-open-step="{step.id}"' in card  # its step when the page lacks it
    # the step it opens then points at the call (highlighted, brought into view: data-reveal) and at no other
    shown = web.get(f"/agents/{agent.id}/steps/{step.id}/", {"call": entry.tool_call_id}).content.decode()
    li = re.search(rf'<li class="step-tool[^"]*"[^>]*data-call-id="{entry.tool_call_id}">', shown).group(0)
    assert 'class="step-tool call-highlight" data-reveal tabindex="-1"' in li
    plain = web.get(f"/agents/{agent.id}/steps/{step.id}/").content.decode()
    assert "call-highlight" not in plain and "data-reveal" not in plain
    # the diff shows what came, escaped; it is collapsed after a reload
    assert "<ins>\nLikes &lt;b&gt;oolong&lt;/b&gt; tea.</ins>" in card
    assert "<b>oolong" not in card
    assert '<details class="bc-details">' in card
    assert '<span class="bc-added">+25</span> <span class="bc-removed">−0</span></span>' in card
    # the Memory tab only says where the blocks are (the panel moves there on narrow screens)
    tab = web.get(f"/agents/{agent.id}/").content.decode().split('id="tab-memory"', 1)[1].split("</div>", 1)[0]
    assert "blocks-panel" not in tab and "beside the conversation" in tab


def test_the_card_is_drawn_again_for_a_live_change_open_and_flashing(web, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    entry = _agent_edits_human(agent, fake_llm, "Prefers mornings.")
    url = f"/agents/{agent.id}/blocks/{entry.block_id}/card/"
    live = web.get(url + "?live=1").content.decode()
    assert re.search(
        r'<form class="block-card just-changed" data-block-id="[^"]+" data-limit="\d+" data-version="2"', live
    )
    assert '<details class="bc-details" open>' in live
    assert f'data-card-url="{url}"' in live
    quiet = web.get(url).content.decode()
    assert "just-changed" not in quiet and '<details class="bc-details">' in quiet


def test_a_persons_edit_says_who_and_has_no_call_to_show(web, account):
    agent = make_agent(account.org, name="Ada")
    block = Block.objects.get(agentblock__agent=agent, label="human")
    saved = web.post(f"/agents/{agent.id}/blocks/{block.id}/save/", {"value": "The user's name is Bob.", "limit": 5000})
    card = saved.content.decode()
    assert "edited by alice" in card and "bc-call" not in card and "step-chip" not in card
    assert "<del>Alice</del><ins>Bob</ins>" in card
    assert "Saved." in card and 'data-version="2"' in card
    # a block never changed since it was made shows no change
    panel = web.get(f"/agents/{agent.id}/blocks/").content.decode()
    assert panel.count('class="block-change"') == 1 and panel.count("data-block-id=") == 2  # only the human block's


def test_another_owners_block_card_is_not_found(web, other_account):
    stranger = make_agent(other_account.org, name="Eve")
    block = Block.objects.get(agentblock__agent=stranger, label="human")
    assert web.get(f"/agents/{stranger.id}/blocks/{block.id}/card/").status_code == 404


def test_last_changes_of_many_blocks_cost_two_queries(account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    _agent_edits_human(agent, fake_llm, "Likes tea.")
    persona = Block.objects.get(agentblock__agent=agent, label="persona")
    memory_services.block_update(block=persona, changes={"value": "I am terse."}, actor_user=account.user)
    blocks = list(Block.objects.filter(agentblock__agent=agent))
    with CaptureQueriesContext(connection) as ctx:
        cards = block_cards(blocks)
    assert len(ctx.captured_queries) == 2  # the changes, then the tool calls' names and steps
    by_label = {b.label: b.last_change for b in cards}
    assert by_label["human"]["tool_name"] == "core_memory_append" and by_label["human"]["step_index"] is not None
    assert by_label["persona"]["actor"] == "user" and by_label["persona"]["tool_call_id"] == ""


def test_text_diff_keeps_a_little_context_around_each_change():
    runs, added, removed = text_diff("The user is Alice. She likes tea.", "The user is Alice. She likes green tea.")
    assert runs == [("same", "The user is Alice. She likes "), ("ins", "green "), ("same", "tea.")]
    assert (added, removed) == (6, 0)
    # words replaced side by side read as one change, not word by word
    runs, _, _ = text_diff("a quick brown fox", "a slow red fox")
    assert runs == [("same", "a "), ("del", "quick brown"), ("ins", "slow red"), ("same", " fox")]
    # long unchanged text is cut to the context either side
    head, tail = "x" * 500, "y" * 500
    runs, _, _ = text_diff(f"{head} old {tail}", f"{head} new {tail}")
    assert runs[0] == ("gap", "…") and len(runs[1][1]) == DIFF_CONTEXT and runs[-1] == ("gap", "…")
    assert ("del", "old") in runs and ("ins", "new") in runs


def test_text_diff_cuts_long_runs_and_compares_huge_texts_by_their_ends():
    runs, added, _ = text_diff("", "z" * (DIFF_SHOWN + 50))
    assert runs == [("ins", "z" * DIFF_SHOWN), ("gap", "… 50 more characters")] and added == DIFF_SHOWN + 50
    words = " ".join(f"w{i}" for i in range(3000))
    runs, added, removed = text_diff(words, words.replace("w1500 ", "CHANGED "))
    assert ("del", "w1500") in runs and ("ins", "CHANGED") in runs and (added, removed) == (7, 5)
    assert text_diff("same", "same") == ([("same", "same")], 0, 0)
    # spaces or line breaks alone are named, so the change shows
    runs, added, removed = text_diff("one two", "one\ntwo")
    assert runs == [("same", "one"), ("del", "␣"), ("ins", "↵\n"), ("same", "two")] and (added, removed) == (1, 1)
