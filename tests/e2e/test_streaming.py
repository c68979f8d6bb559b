"""Token streaming in Chromium, end to end: the fake model streams its reply slowly through litellm, the runner
forwards chunks over the websocket, and the page shows the reply growing before the step commits."""

import dataclasses
import time

from playwright.sync_api import expect

from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm
REPLY = "Streaming into the page, one small piece at a time, so you can watch me think."


def test_the_reply_grows_in_the_page_before_the_step_ends(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Streamer")
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(
        dataclasses.replace(
            FakeLLM.tool("send_message", {"message": REPLY}, thinking="Pick friendly words."), chunk_s=0.08
        )
    )
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    page.fill("#composer-input", "Say something long")
    page.press("#composer-input", "Enter")

    answer = page.locator("#live .msg.assistant_message").first
    expect(answer).to_be_attached(timeout=FIRST_CALL_S)
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # sample the text while it streams
        text = answer.inner_text() if answer.count() else ""
        if not seen or text != seen[-1]:
            seen.append(text)
        if REPLY in text and page.locator("#live .msg.stop_reason").count():
            break
        time.sleep(0.05)
    partial = [s for s in seen if s.strip() and REPLY not in s]
    assert len(partial) >= 3, seen  # several states of a growing reply were on screen before the whole one
    assert all(len(a) <= len(b) for a, b in zip(partial, partial[1:], strict=False)), partial
    shot(page, "streaming-done")
    expect(page.locator("#live .msg.assistant_message")).to_have_count(1)  # chunks became the stored message
    expect(page.locator("#live .msg.reasoning_message").first).to_contain_text("Pick friendly words.")
