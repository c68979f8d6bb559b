"""One renderer for the conversation, in Chromium: an item drawn live from the socket's server-rendered fragment is
the same element the history shows after a reload."""

import re

from playwright.sync_api import expect

from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm
ITEMS = "ns => ns.map((n) => [n.dataset.type, n.dataset.id, n.outerHTML])"


def test_an_item_looks_the_same_live_and_after_a_reload(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Twice")
    fake_llm.stream_chunk_chars = 4
    fake_llm.script(
        FakeLLM.reasoning(
            "Look <it> up.", "conversation_search", {"query": "<b>earlier</b>", "request_heartbeat": True}
        ),
        FakeLLM.reasoning("Say so.", "send_message", {"message": "Found <i>nothing</i>."}),
    )
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    page.fill("#composer-input", "Did we talk about <script>?")
    page.press("#composer-input", "Enter")
    expect(page.locator("#run-status[data-state^=completed]")).to_have_count(1, timeout=FIRST_CALL_S)
    expect(page.locator("#live .streaming, #live .pending")).to_have_count(0)
    # a live step chip takes its number within the conversation from the steps list the run's end refreshes
    expect(page.locator("#live .step-chip[data-step]", has_text=re.compile(r"^step$"))).to_have_count(0)
    live = page.eval_on_selector_all("#live [data-id]", ITEMS)
    types = [t for t, _, _ in live]
    for t in ("user_message", "reasoning_message", "tool_call_message", "tool_return_message", "assistant_message"):
        assert t in types, types
    assert page.locator("#live .msg.user_message .body").inner_text() == "Did we talk about <script>?"
    assert page.locator("#live .msg.assistant_message .body").inner_text() == "Found <i>nothing</i>."

    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    stored = page.eval_on_selector_all("#history [data-id]", ITEMS)
    assert stored[-len(live) :] == live
