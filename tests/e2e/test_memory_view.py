"""Core memory in view, in Chromium: the blocks sit in their own column beside the conversation from 1200 px and stay
put while it scrolls, and are the inspector's Memory tab below; a block a tool call edits during a run is drawn
again live, flashes, shows what changed (escaped) and links to the call, which the link brings into view. Screenshots
at 390, 1280 and 1920 px, light and dark, go to test-artifacts/screenshots/."""

import re

from playwright.sync_api import expect

from core.runs.runner import run_agent
from memory.models import Block
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)
HEIGHT = {390: 844, 1024: 768, 1280: 800, 1920: 1080}


def _agent_with_a_long_conversation(account):
    agent = make_agent(account.org, name="Ada")
    for n in range(4):  # the default reply: send_message("ok")
        text = f"Turn {n}: " + "\n".join(f"line {i} of a long message" for i in range(12))
        in_thread(run_agent, agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])
    return agent


def _open(context, agent_id: str, width: int):
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": HEIGHT[width]})
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def _box(page, sel: str) -> dict:
    return page.locator(sel).first.bounding_box()


def test_blocks_sit_beside_the_conversation_when_wide_and_are_a_tab_when_narrow(signed_in, account, fake_llm):
    agent = _agent_with_a_long_conversation(account)
    page = _open(signed_in, agent.id, 1280)
    for width in (1280, 1920, 1200):
        page.set_viewport_size({"width": width, "height": 860})
        expect(page.locator("main.workspace")).to_have_attribute("data-memory", "column")
        column = page.locator("#memory-pane")
        expect(column.locator("#blocks-panel textarea[aria-label='human value']")).to_be_visible()
        conv, mem = _box(page, "#conversation-pane"), _box(page, "#memory-pane")
        assert abs(mem["x"] - (conv["x"] + conv["width"])) <= 1 and conv["width"] >= 360
        assert mem["x"] + mem["width"] <= width + 0.5
        if width >= 1280:
            assert _box(page, "#inspector")["x"] >= mem["x"] + mem["width"]
        # the conversation scrolls; the blocks stay where they are
        page.locator("#conversation").evaluate("c => c.scrollTop = 0")
        before = _box(page, "#memory-pane .block-card")
        page.locator("#conversation").evaluate("c => c.scrollTop = c.scrollHeight")
        assert page.locator("#conversation").evaluate("c => c.scrollHeight > c.clientHeight + 200")
        assert _box(page, "#memory-pane .block-card") == before
    # the Memory tab brings the column into view and leaves the inspector where it was
    page.set_viewport_size({"width": 1280, "height": 800})
    page.click('.pill-nav [data-tab="tab-memory"]')
    expect(page.locator("#tab-context")).to_be_visible()
    expect(page.locator("#blocks-panel")).to_have_class(re.compile(r"\bflash\b"))

    page.set_viewport_size({"width": 1024, "height": 768})  # a drawer: the blocks are its Memory tab
    expect(page.locator("main.workspace")).to_have_attribute("data-memory", "tab")
    expect(page.locator("#memory-pane")).to_be_hidden()
    page.click("#inspector-toggle")
    page.click('.pill-nav [data-tab="tab-memory"]')
    expect(page.locator("#tab-memory #blocks-panel textarea[aria-label='human value']")).to_be_visible()
    page.click("#inspector-close")

    page.set_viewport_size({"width": 390, "height": 844})  # a phone: one pane at a time, Memory a tab as before
    expect(page.locator("#memory-pane")).to_be_hidden()
    page.click('.ws-tabs [data-pane="inspector"]')
    expect(page.locator("#tab-memory #blocks-panel textarea[aria-label='human value']")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_dragged_side_panes_that_leave_no_room_put_the_blocks_back_in_the_tab(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    page = _open(signed_in, agent.id, 1280)
    expect(page.locator("main.workspace")).to_have_attribute("data-memory", "column")
    page.evaluate("document.querySelector('main.workspace').style.setProperty('--right-w', '560px')")
    expect(page.locator("main.workspace")).to_have_attribute("data-memory", "tab")
    assert _box(page, "#conversation-pane")["width"] >= 360
    page.click('.pill-nav [data-tab="tab-memory"]')
    expect(page.locator("#tab-memory #blocks-panel .block-card").first).to_be_visible()
    page.evaluate("document.querySelector('main.workspace').style.removeProperty('--right-w')")
    expect(page.locator("main.workspace")).to_have_attribute("data-memory", "column")
    expect(page.locator("#memory-pane #blocks-panel .block-card").first).to_be_visible()
    expect(page.locator("#tab-context")).to_be_visible()  # the tab whose panel left is not left open empty


def _edit_by_a_tool(page, fake_llm) -> None:
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes <i>oolong</i> tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    page.fill("#composer-input", "I like oolong tea")
    page.press("#composer-input", "Enter")


def test_a_block_a_tool_edits_flashes_shows_its_diff_and_links_to_the_call(signed_in, account, fake_llm):
    agent = _agent_with_a_long_conversation(account)
    human = Block.objects.get(agentblock__agent=agent, label="human")
    page = _open(signed_in, agent.id, 1280)
    _edit_by_a_tool(page, fake_llm)
    card = page.locator(f'#memory-pane .block-card[data-block-id="{human.id}"]')
    expect(card).to_have_class(re.compile(r"\bjust-changed\b"), timeout=FIRST_CALL_S)
    expect(card.locator("textarea")).to_have_value("The user's name is Alice.\nLikes <i>oolong</i> tea.")
    expect(card.locator(".version")).to_have_text("v2")
    expect(card.locator(".bc-line code")).to_have_text("core_memory_append")
    diff = card.locator(".bc-diff")
    expect(diff).to_be_visible()  # open when it just arrived
    expect(diff.locator("ins")).to_have_text("\nLikes <i>oolong</i> tea.")
    assert diff.locator("i").count() == 0  # what the model wrote is text, never markup
    expect(card.locator(".counter")).to_have_text(f"{len(human.value) + 25} / {human.limit} chars")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Noted.")
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        shot(page, f"memory-view-live-1280-{theme}")

    # the link brings the tool call that made the change into view, highlighted
    call = page.locator("#conversation .msg.tool_call_message", has_text="core_memory_append")
    page.locator("#conversation").evaluate("c => c.scrollTop = 0")
    expect(call).not_to_be_in_viewport()
    card.locator("a.bc-call").click()
    expect(call).to_have_class(re.compile(r"\bcall-highlight\b"))
    expect(call).to_be_in_viewport()
    call_id = card.locator("a.bc-call").get_attribute("data-call")
    assert call.locator("a.open-workbench").get_attribute("href").endswith(f"call={call_id}")

    # after a reload the change is still there (collapsed), and its link still finds the call
    page.reload()
    card = page.locator(f'#memory-pane .block-card[data-block-id="{human.id}"]')
    expect(card.locator(".bc-line code")).to_have_text("core_memory_append")
    expect(card).not_to_have_class(re.compile(r"\bjust-changed\b"))
    expect(card.locator(".bc-diff")).to_be_hidden()
    card.locator(".bc-details summary").click()
    expect(card.locator(".bc-diff ins")).to_have_text("\nLikes <i>oolong</i> tea.")
    page.locator("#conversation").evaluate("c => c.scrollTop = 0")
    card.locator("a.bc-call").click()
    call = page.locator("#history .msg.tool_call_message", has_text="core_memory_append")
    expect(call).to_have_class(re.compile(r"\bcall-highlight\b"))
    expect(call).to_be_in_viewport()
    # its step chip opens the step in the inspector
    card.locator(".step-chip").click()
    expect(page.locator("#step-detail .step-card")).to_be_visible()

    # a second edit by a tool, then a person's edit on the card drawn live (a working form): it says who made it
    fake_llm.script(
        FakeLLM.tool(
            "core_memory_replace", {"label": "human", "old_content": "Alice", "new_content": "Alice B."}, heartbeat=True
        ),
        FakeLLM.tool("send_message", {"message": "Noted again."}),
    )
    page.fill("#composer-input", "My surname starts with B")
    page.press("#composer-input", "Enter")
    expect(card.locator(".version")).to_have_text("v3")
    expect(card).to_have_class(re.compile(r"\bjust-changed\b"))
    expect(card.locator(".bc-diff ins")).to_have_text(re.compile(r"^\s?B\.$"))  # "Alice." became "Alice B.."
    expect(card.locator(".bc-diff del")).to_have_count(0)
    replace_call = card.locator("a.bc-call").get_attribute("data-call")
    assert replace_call != call_id
    expect(page.locator("#live .msg.assistant_message").last).to_contain_text("Noted again.")
    card.locator("textarea").fill("The user's name is Alice B. Likes tea.")
    card.locator("button[type=submit]").click()
    expect(card.locator(".ok-text")).to_have_text("Saved.")
    expect(card.locator(".bc-line")).to_contain_text("edited by alice")
    expect(card.locator(".version")).to_have_text("v4")

    # the block's history links the agent's last change to its call: the workspace shows it and its result in the step
    card.locator("a", has_text="history").click()
    page.locator("#history a.history-step").first.click()
    call = page.locator("#history .msg.tool_call_message", has_text="core_memory_replace")
    expect(call).to_have_class(re.compile(r"\bcall-highlight\b"))
    expect(page.locator(f'#step-detail .step-tool[data-call-id="{replace_call}"]')).to_have_class(
        re.compile(r"\bcall-highlight\b")
    )
    card = page.locator(f'#memory-pane .block-card[data-block-id="{human.id}"]')
    page.set_viewport_size({"width": 1920, "height": 1080})
    card.locator(".bc-details summary").click() if card.locator(".bc-diff").is_hidden() else None
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        shot(page, f"memory-view-reloaded-1920-{theme}")


def test_on_a_phone_the_change_marks_the_tab_and_the_link_returns_to_the_conversation(signed_in, account, fake_llm):
    agent = _agent_with_a_long_conversation(account)
    human = Block.objects.get(agentblock__agent=agent, label="human")
    page = _open(signed_in, agent.id, 390)
    _edit_by_a_tool(page, fake_llm)
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Noted.", timeout=FIRST_CALL_S)
    context_tab = page.locator('.ws-tabs [data-pane="inspector"]')
    expect(context_tab).to_have_attribute("data-memory-changed", "")  # the change happened out of sight
    context_tab.click()
    page.click('.pill-nav [data-tab="tab-memory"]')
    card = page.locator(f'#tab-memory .block-card[data-block-id="{human.id}"]')
    expect(card).to_have_class(re.compile(r"\bjust-changed\b"))
    expect(card.locator(".bc-diff ins")).to_have_text("\nLikes <i>oolong</i> tea.")
    expect(context_tab).not_to_have_attribute("data-memory-changed", "")
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        shot(page, f"memory-view-live-390-{theme}")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    card.locator("a.bc-call").click()
    expect(page.locator(".ws-tabs [data-pane='conversation']")).to_have_attribute("aria-selected", "true")
    call = page.locator("#conversation .msg.tool_call_message", has_text="core_memory_append")
    expect(call).to_have_class(re.compile(r"\bcall-highlight\b"))
    expect(call).to_be_in_viewport()


def test_a_call_the_page_does_not_hold_is_shown_in_its_step(signed_in, account, fake_llm):
    from core.agents.conversations import conversation_create

    agent = make_agent(account.org, name="Ada")
    fake_llm.script(
        FakeLLM.tool(
            "core_memory_replace", {"label": "human", "old_content": "Alice", "new_content": "Bea"}, heartbeat=True
        ),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    in_thread(run_agent, agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "I am Bea"}])
    other = conversation_create(agent=agent)  # another conversation: the same blocks, none of the agent's thread
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/?conversation={other.id}")
    card = page.locator("#memory-pane .block-card", has=page.locator("strong", has_text="human"))
    expect(card.locator(".bc-diff", has=page.locator("del", has_text="Alice"))).to_have_count(1)
    expect(card.locator(".bc-diff ins")).to_have_text("Bea")
    assert page.locator("#conversation .msg.tool_call_message").count() == 0
    call_id = card.locator("a.bc-call").get_attribute("data-call")
    card.locator("a.bc-call").click()
    step_call = page.locator(f'#step-detail .step-tool[data-call-id="{call_id}"]')
    expect(step_call).to_have_class(re.compile(r"\bcall-highlight\b"))
    expect(step_call).to_be_in_viewport()


def test_a_change_from_another_tab_never_replaces_an_edit_in_progress(signed_in, account):
    agent = make_agent(account.org, name="Ada")
    human = Block.objects.get(agentblock__agent=agent, label="human")
    mine, watcher, theirs = (_open(signed_in, agent.id, 1280) for _ in range(3))
    card = f'.block-card[data-block-id="{human.id}"]'
    mine.locator(f"{card} textarea[name=value]").fill("My own draft.")  # typed, not saved, the field focused
    expect(mine.locator(f"{card} .counter")).to_have_text(f"13 / {human.limit} chars")
    theirs.locator(f"{card} textarea[name=value]").fill("Saved in the other tab.")
    theirs.locator(f"{card} button[type=submit]").click()
    expect(theirs.locator(f"{card} .version")).to_have_text("v2")
    expect(mine.locator(f"{card} .remote-note")).to_have_text("Changed elsewhere (v2); saving will overwrite it.")
    expect(mine.locator(f"{card} textarea[name=value]")).to_have_value("My own draft.")
    # a tab where nobody typed draws the card again, with the new value
    expect(watcher.locator(f"{card} .version")).to_have_text("v2")
    expect(watcher.locator(f"{card} textarea[name=value]")).to_have_value("Saved in the other tab.")
