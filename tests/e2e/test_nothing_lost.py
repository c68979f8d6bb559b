"""Nothing a person did is lost, in Chromium: a reload or a second tab mid-reply shows the question and the reply so
far (from its beginning, then the rest as it streams); every tab sees every tab's input at once; a failed send, an
unconfirmed one and the text being typed come back after a reload, with Retry and Edit."""

import dataclasses
import re
import time

from django.utils import timezone
from playwright.sync_api import expect

from core.agents.services import agent_update
from core.models import Message
from tests.e2e.conftest import shot
from tests.e2e.test_debugger import FIRST_CALL_S, _open, _send
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

REPLY = (
    "Here is the plan, step by step: first we gather the facts, then we weigh them, then we write it all down "
    "in one clear page that anyone can read."
)


def _streaming_body(page):
    return page.locator("#live .msg.assistant_message.streaming .body")


def test_a_reload_mid_reply_shows_the_question_and_the_reply_from_its_start(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Mid-reply")
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(
        dataclasses.replace(FakeLLM.reasoning("Plan in three parts.", "send_message", {"message": REPLY}), chunk_s=0.2)
    )
    page = _open(signed_in, agent.id)
    _send(page, "What is the plan?")
    expect(_streaming_body(page)).to_contain_text("step by step", timeout=FIRST_CALL_S)

    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    # the question, though the run stores it only with its first step
    expect(page.locator("#conversation .msg.user_message").filter(has_text="What is the plan?")).to_have_count(1)
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the reply as the page shows it, until it is stored whole
        # read in one evaluation: the streaming node is replaced by the stored one at any moment
        text = page.evaluate(
            "() => document.querySelector('#live .msg.assistant_message.streaming:not(.catching-up) .body')"
            "?.innerText ?? null"
        )
        if text is not None:
            seen.append(text)
        if page.locator("#live .msg.assistant_message:not(.streaming)").count():
            break
        time.sleep(0.05)
    assert seen, "the reply was stored before the page showed it streaming: the reload came too late"
    for text in seen:  # never from mid-word: each state is the reply's beginning
        assert REPLY.startswith(text.strip()), (text, seen)
    shot(page, "60-reload-mid-reply")
    order = page.eval_on_selector_all("#live .msg", "ns => ns.map((n) => n.dataset.type)")
    assert order.index("reasoning_message") < order.index("assistant_message"), order  # in the order they streamed
    expect(page.locator("#live .msg.assistant_message .body")).to_have_text(REPLY, timeout=FIRST_CALL_S)
    asked = page.locator("#conversation .msg.user_message").filter(has_text="What is the plan?")
    expect(asked).to_have_count(1)
    expect(page.locator("#conversation .msg.user_message.pending")).to_have_count(0)
    # stamped when it was sent (it read the reload's time, later than the reply), and no longer "sent · waiting"
    stored = Message.objects.get(agent=agent, role="user", text="What is the plan?")
    expect(asked.locator(".meta > span").last).to_have_text(timezone.localtime(stored.created_at).strftime("%H:%M:%S"))
    expect(asked).not_to_contain_text("waiting")
    shot(page, "60-reload-mid-reply-stored-1280")


def test_every_tab_sees_every_tabs_question_at_once(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Two tabs")
    page, other = _open(signed_in, agent.id), _open(signed_in, agent.id)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Answer for both tabs."}, latency=6))
    _send(page, "Question from the first tab")
    question = other.locator("#live .msg.user_message").filter(has_text="Question from the first tab")
    expect(question).to_have_count(1, timeout=FIRST_CALL_S)
    assert other.locator("#live .msg.assistant_message").count() == 0  # seen before the agent answered
    expect(question).to_contain_text("another tab")
    shot(other, "61-second-tab-sees-the-question")
    for p in (page, other):
        expect(p.locator("#live .msg.assistant_message")).to_contain_text("Answer for both tabs.", timeout=FIRST_CALL_S)
        expect(
            p.locator("#conversation .msg.user_message").filter(has_text="Question from the first tab")
        ).to_have_count(1)
        expect(p.locator("#conversation .msg.user_message.pending")).to_have_count(0)


def test_a_failed_send_comes_back_after_a_reload_with_retry(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Failing provider")
    page = _open(signed_in, agent.id)
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    _send(page, "Please <i>keep</i> this")
    expect(page.locator("#live .msg.user_message.failed")).to_contain_text(
        "Please <i>keep</i> this", timeout=FIRST_CALL_S
    )

    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    failed = page.locator("#live .msg.user_message.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("Please <i>keep</i> this")
    expect(page.locator("#live .run-failed")).to_contain_text("upstream exploded")
    assert page.locator("#live i").count() == 0  # escaped
    shot(page, "62-failed-send-after-reload")

    failed.locator("[data-edit]").click()
    expect(page.locator("#composer-input")).to_have_value("Please <i>keep</i> this")
    page.fill("#composer-input", "")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Kept and answered."}))
    failed.locator("[data-retry]").click()
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Kept and answered.", timeout=FIRST_CALL_S)
    page.reload()
    expect(page.locator("#conversation .msg.user_message.failed")).to_have_count(0)  # delivered: no notice any more
    expect(page.locator("#conversation .msg.user_message").filter(has_text="keep")).to_have_count(1)


def test_a_refused_send_and_the_draft_survive_a_reload(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Refused")
    agent_update(agent=agent, changes={"model": "mystery/model-x"})
    page = _open(signed_in, agent.id)
    _send(page, "did this arrive?")
    expect(page.locator("#live .msg.user_message.failed .fail-reason")).to_contain_text("mystery/model-x")
    page.fill("#composer-input", "a half-typed thought")

    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    failed = page.locator("#live .msg.user_message.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("did this arrive?")
    expect(failed.locator(".fail-reason")).to_contain_text("mystery/model-x")
    expect(failed.locator("[data-retry]")).to_be_visible()
    expect(page.locator("#composer-input")).to_have_value("a half-typed thought")
    shot(page, "63-refused-send-and-draft-after-reload")

    agent_update(agent=agent, changes={"model": "openai/fake-model"})
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Arrived now."}))
    failed.locator("[data-retry]").click()
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Arrived now.", timeout=FIRST_CALL_S)
    page.reload()
    expect(page.locator("#conversation .msg.user_message.failed")).to_have_count(0)  # delivered: forgotten
    expect(page.locator("#composer-input")).to_have_value("a half-typed thought")  # still being typed


def test_the_context_window_has_a_number_field_and_refuses_a_window_too_small(signed_in, account):
    agent = make_agent(account.org, name="Windowed")
    page = _open(signed_in, agent.id)
    page.click("[data-tab=tab-context]")
    expect(page.locator("#ctx")).to_be_attached()
    page.fill("#window-number", "6000")
    expect(page.locator("#window-slider")).to_have_value("6000")
    expect(page.locator("#ctx-limit")).to_have_text("6000")
    expect(page.locator("#window-fixed-warn")).to_be_hidden()
    page.locator("#window-slider").fill("1100")  # dragging below the fixed part warns at once
    expect(page.locator("#window-number")).to_have_value("1100")
    expect(page.locator("#window-fixed-warn")).to_contain_text("no room for a message")
    shot(page, "64-window-too-small-warning")
    page.click("#save-settings")
    expect(page.locator("#window-error")).to_contain_text("cannot hold this agent")
    agent.refresh_from_db()
    assert agent.context_window_limit != 1100  # refused: nothing written
    page.fill("#window-number", "6000")
    page.click("#save-settings")
    expect(page.locator("#settings-saved")).to_be_visible()
    agent.refresh_from_db()
    assert agent.context_window_limit == 6000


def test_arrow_keys_move_between_tabs_and_esc_closes_the_open_step(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Keyboard")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi."}))
    page = _open(signed_in, agent.id)
    _send(page, "hello")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Hi.", timeout=FIRST_CALL_S)
    first = page.locator(".pill-nav [data-tab=tab-context]")
    first.focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator(".pill-nav [data-tab=tab-runs]")).to_have_attribute("aria-selected", "true")
    expect(page.locator(".pill-nav [data-tab=tab-runs]")).to_be_focused()
    page.keyboard.press("Home")
    expect(first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowLeft")  # wraps to the last tab
    expect(page.locator(".pill-nav [role=tab]").last).to_have_attribute("aria-selected", "true")

    page.locator("#live .step-chip").first.click()
    expect(page.locator("#step-detail")).not_to_be_empty()
    page.keyboard.press("Escape")
    expect(page.locator("#step-detail")).to_be_empty()


def test_a_huge_message_shows_collapsed_with_its_size(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Long reader")
    huge = "A pasted document line that goes on. " * 600  # ~22,800 characters
    fake_llm.script(FakeLLM.tool("send_message", {"message": "That is long."}))
    page = _open(signed_in, agent.id)
    _send(page, huge)
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("That is long.", timeout=FIRST_CALL_S)
    for p in (page, _open(signed_in, agent.id)):  # live, and as the history renders it
        mine = p.locator("#conversation .msg.user_message").last
        more = mine.locator(".show-all")
        expect(more).to_have_text(re.compile(r"Show all · 22,\d{3} characters"))
        assert mine.bounding_box()["height"] < 400
        more.click()
        expect(more).to_have_text("Collapse")
        assert mine.bounding_box()["height"] > 600
    shot(p, "65-huge-message-expanded")


def test_a_later_send_keeps_an_earlier_undelivered_long_paste_with_retry_and_edit(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Long paste", context_window_limit=120_000)  # the paste fits: the model fails
    page = _open(signed_in, agent.id)
    page.set_viewport_size({"width": 1280, "height": 800})
    pasted = "".join(f"line {i}: " + "a pasted report, word after word. " * 5 + "\n" for i in range(1000)).strip()
    assert len(pasted.encode()) > 180_000
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    _send(page, pasted)
    expect(page.locator("#live .msg.user_message.failed")).to_have_count(1, timeout=FIRST_CALL_S)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "A short answer."}))
    _send(page, "a short question")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("A short answer.", timeout=FIRST_CALL_S)
    expect(page.locator("#run-status")).to_contain_text("completed")  # the last action is stored

    page.reload()  # the later run completed: the long message that never arrived is still offered, not dropped
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    failed = page.locator("#conversation .msg.user_message.failed")
    expect(failed).to_have_count(1)
    expect(failed.locator("[data-retry]")).to_be_visible()
    expect(page.locator("#conversation .msg.assistant_message")).to_contain_text("A short answer.")
    shot(page, "64-undelivered-long-paste-after-a-later-send-1280")
    failed.locator("[data-edit]").click()
    assert page.locator("#composer-input").input_value() == pasted  # every character of it, for Edit
