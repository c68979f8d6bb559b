"""Approvals in the workspace, in Chromium: a reply calling a tool that needs approval shows as a card in every open
tab (the call's arguments to edit, Approve / Deny, the expiry); bad JSON is refused inline; an approval with edited
arguments runs the edited call and the loop goes on; a denial with a reason reaches the model; a message sent
meanwhile gets the 409 text back in the composer; Cancel denies and ends the wait; a tab answering after another
is told so; the runs view says what a run waits for. Screenshots go to test-artifacts/screenshots/ (and /tmp/)."""

import re

from playwright.sync_api import expect

from core.models import Run
from memory.models import Passage
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)
APPROVE_INSERT = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
CARD = ".wait-calls"


def _open(context, agent_id: str):
    page = context.new_page()
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def _snap(page, name: str) -> None:
    shot(page, name)
    page.screenshot(path=f"/tmp/{name}.png")


def _careful(account, **extra):
    return make_agent(account.org, name="Careful", tool_rules=APPROVE_INSERT, **extra)


def _insert(content: str):
    return FakeLLM.tool(
        "archival_memory_insert", {"content": content}, heartbeat=True, thinking="I should save this for later."
    )


def _waiting_card(page):
    card = page.locator(f"{CARD}[data-state=waiting]")
    expect(card).to_be_visible(timeout=FIRST_CALL_S)
    return card


def test_approve_with_edited_arguments_runs_the_edited_call_in_every_tab(signed_in, account, fake_llm):
    agent = _careful(account)
    page, other = _open(signed_in, agent.id), _open(signed_in, agent.id)
    fake_llm.script(_insert("The launch code is 42"), FakeLLM.tool("send_message", {"message": "Saved the code."}))
    _send(page, "Remember the launch code: 42")

    card = _waiting_card(page)
    expect(card.locator(".approval-head")).to_contain_text("waiting for you")
    expect(card.locator(".approval-expiry")).to_contain_text(re.compile(r"expires .* · in 23\s+hours"))
    expect(card.locator(".approval-tool")).to_have_text("archival_memory_insert")
    args = card.locator("textarea.approval-args")
    expect(args).to_have_value(re.compile(r'"content": "The launch code is 42"'))
    expect(page.locator("#run-status")).to_contain_text("waiting for approval")
    expect(page.locator("#cancel-run")).to_be_visible()
    _waiting_card(other)  # the other tab shows it live too
    expect(other.locator("#run-status")).to_contain_text("waiting for approval")
    assert Passage.objects.filter(agent=agent).count() == 0  # nothing ran
    _snap(page, "60-approval-waiting")

    args.fill('{"content": "The launch code is 43", ')  # bad JSON: told inline, nothing sent
    card.locator("[data-answer=approve]").click()
    expect(card.locator(".approval-args-error")).to_contain_text("not valid JSON")
    expect(card).to_have_attribute("data-state", "waiting")
    _snap(page, "61-approval-bad-json")
    args.fill("[1, 2]")
    card.locator("[data-answer=approve]").click()
    expect(card.locator(".approval-args-error")).to_contain_text("must be a JSON object")

    args.fill('{\n  "content": "The launch code is 43",\n  "request_heartbeat": true\n}')
    expect(card.locator(".approval-args-error")).to_be_hidden()
    card.locator("[data-answer=approve]").click()

    done = page.locator(f"{CARD}[data-state=answered]")
    expect(done).to_be_visible(timeout=FIRST_CALL_S)
    expect(done.locator(".approval-verdict")).to_have_text("approved with edited arguments")
    expect(done.locator("pre.approval-edited")).to_contain_text("The launch code is 43")
    result = page.locator("#live .msg.tool_return_message", has_text="archival_memory_insert")
    expect(result).to_contain_text("success")
    expect(page.locator("#live .msg.approval_response_message")).to_contain_text("approved, edited")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Saved the code.", timeout=FIRST_CALL_S)
    expect(page.locator("#run-status")).to_contain_text("end_turn")
    assert list(Passage.objects.filter(agent=agent).values_list("text", flat=True)) == ["The launch code is 43"]
    _snap(page, "62-approval-approved-edited")

    # the other tab followed: its card says what was decided, the edited call's result and the reply are there
    other_done = other.locator(f"{CARD}[data-state=answered]")
    expect(other_done.locator(".approval-verdict")).to_have_text("approved with edited arguments")
    expect(other.locator("#live .msg.tool_return_message", has_text="archival_memory_insert")).to_have_count(1)
    expect(other.locator("#live .msg.assistant_message")).to_contain_text("Saved the code.")
    expect(other.locator("#run-status")).not_to_contain_text("waiting")

    page.reload()  # and after a reload, from what was stored
    stored = page.locator(f"#history {CARD}[data-state=answered]")
    expect(stored.locator(".approval-verdict")).to_have_text("approved with edited arguments")
    expect(stored.locator("pre.approval-edited")).to_contain_text("The launch code is 43")
    expect(page.locator("#history .msg.approval_response_message")).to_contain_text("archival_memory_insert")
    expect(page.locator("#run-status")).not_to_contain_text("waiting")


def test_deny_with_a_reason_and_the_composer_while_a_reply_waits(signed_in, account, fake_llm):
    agent = _careful(account)
    page = _open(signed_in, agent.id)
    fake_llm.script(
        _insert("The launch code is 42"), FakeLLM.tool("send_message", {"message": "Alright, I won't save it."})
    )
    _send(page, "Remember the launch code: 42")
    card = _waiting_card(page)

    # a message sent meanwhile: the server's 409 text, and the message back in the box
    _send(page, "are you there?")
    bar = page.locator("#busy-bar")
    expect(bar).to_be_visible()
    expect(bar).to_contain_text("waiting for approval")
    expect(bar).to_contain_text("archival_memory_insert")
    expect(bar).to_contain_text("Your message is back in the box")
    expect(page.locator("#composer-input")).to_have_value("are you there?")
    expect(page.locator("#live .msg.user_message.pending, #live .msg.user_message.failed")).to_have_count(0)
    _snap(page, "63-approval-composer-409")
    page.click("#busy-show")
    expect(bar).to_be_hidden()

    # the runs view says what the run waits for
    page.click('.pill-nav [data-tab="tab-runs"]')
    row = page.locator("#runs-table .run-row[data-status=waiting]")
    expect(row).to_contain_text("waiting for approval")
    expect(row).to_contain_text("archival_memory_insert")
    expect(row).to_contain_text("expires")
    _snap(page, "64-approval-runs-view")

    card.locator(".approval-reason").fill("That is not the real code.")
    card.locator("[data-answer=deny]").click()
    done = page.locator(f"{CARD}[data-state=answered]")
    expect(done).to_be_visible(timeout=FIRST_CALL_S)
    expect(done.locator(".approval-verdict")).to_have_text("denied")
    expect(done.locator(".approval-reason-shown")).to_have_text("Reason: That is not the real code.")
    denied = page.locator("#live .msg.tool_return_message.error")
    expect(denied).to_contain_text("User reason: That is not the real code.")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Alright, I won't save it.")
    assert Passage.objects.filter(agent=agent).count() == 0
    _snap(page, "65-approval-denied")

    _send(page, "are you there?")  # the wait is over: sends go through again
    expect(page.locator("#live .msg.user_message", has_text="are you there?")).to_have_count(1)
    # stored, not only drawn: the test ends after the server's claim committed, so the run it started is seen and
    # waited for (a flush racing an uncommitted claim deadlocked on PostgreSQL)
    expect(page.locator("#live .msg.user_message:not(.pending)", has_text="are you there?")).to_have_count(1)


def test_cancel_denies_and_ends_the_wait(signed_in, account, fake_llm):
    agent = _careful(account)
    page = _open(signed_in, agent.id)
    fake_llm.script(_insert("The launch code is 42"))
    _send(page, "Remember the launch code: 42")
    _waiting_card(page)
    page.click("#cancel-run")
    ended = page.locator(f"{CARD}[data-state=cancelled]")
    expect(ended).to_be_visible()
    expect(ended.locator(".approval-verdict")).to_have_text("denied · cancelled")
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    expect(page.locator("#cancel-run")).to_be_hidden()
    run = Run.objects.get(agent=agent)
    assert run.waiting_until is None and run.stop_reason == "cancelled"
    _snap(page, "66-approval-cancelled")


def test_a_tab_answering_after_another_is_told_and_shows_what_was_decided(signed_in, account, fake_llm):
    agent = _careful(account)
    first, late = _open(signed_in, agent.id), _open(signed_in, agent.id)
    fake_llm.script(_insert("The launch code is 42"), FakeLLM.tool("send_message", {"message": "Saved."}))
    _send(first, "Remember the launch code: 42")
    _waiting_card(first)
    stale = _waiting_card(late)
    # the late tab misses the news (its card cannot be fetched again), as a tab whose socket was away would
    missed = []

    def miss(route):
        missed.append(route.request.url)
        route.abort()

    late.route(re.compile(r".*/waits/calls/.*"), miss)
    first.locator(f"{CARD} [data-answer=approve]").click()
    expect(first.locator("#live .msg.assistant_message")).to_contain_text("Saved.", timeout=FIRST_CALL_S)
    expect(late.locator("#live .msg.assistant_message")).to_contain_text("Saved.")
    # both of its fetches failed: on the answer's arrival and on the run's end (later, it would draw the answer)
    for _ in range(200):
        if len(missed) >= 2:
            break
        late.wait_for_timeout(50)  # lets Playwright deliver the route calls
    assert len(missed) == 2, missed
    expect(stale).to_have_attribute("data-state", "waiting")
    late.unroute(re.compile(r".*/waits/calls/.*"))

    stale.locator(".approval-reason").fill("no")
    stale.locator("[data-answer=deny]").click()
    told = late.locator(f"{CARD} .approval-error")
    expect(told).to_be_visible()
    expect(told).to_contain_text("already answered in another tab")
    card = late.locator(f"{CARD}[data-state=answered]")
    expect(card.locator(".approval-verdict")).to_have_text("approved")  # the first answer stands
    _snap(late, "67-approval-answered-elsewhere")
    assert Passage.objects.filter(agent=agent).count() == 1


def test_several_calls_are_answered_one_by_one_and_sent_together(signed_in, account, fake_llm):
    agent = make_agent(
        account.org,
        name="Careful",
        tool_rules=[*APPROVE_INSERT, {"type": "requires_approval", "tool_name": "core_memory_append"}],
    )
    page = _open(signed_in, agent.id)
    fake_llm.script(
        FakeLLM.tools(
            ("archival_memory_insert", {"content": "Alice likes tea.", "request_heartbeat": True}),
            ("core_memory_append", {"label": "human", "content": "Likes <b>tea</b>.", "request_heartbeat": True}),
            ("conversation_search", {"query": "tea", "request_heartbeat": True}),
        ),
        FakeLLM.tool("send_message", {"message": "Noted in archival memory only."}),
    )
    _send(page, "I like tea")
    card = _waiting_card(page)
    calls = card.locator(".approval-call")
    expect(calls).to_have_count(2)
    expect(card.locator(".approval-deferred")).to_contain_text("Will run with the answers: conversation_search")
    send = card.locator("[data-send-answers]")
    expect(send).to_be_disabled()
    assert page.locator(f"{CARD} b").count() == 0  # the model's markup is text
    calls.nth(0).locator("[data-answer=approve]").click()
    expect(card.locator(".approval-progress")).to_contain_text("1 of 2")
    expect(send).to_be_disabled()
    calls.nth(1).locator(".approval-reason").fill("Keep the core memory short.")
    # the card reads itself again when a wait may have ended (any run's end, an answer, the socket back): still
    # waiting, the server answers 204 and the card keeps the choices and what is typed
    with page.expect_response(re.compile(r".*/waits/calls/.*shown=waiting")) as read:
        page.evaluate("htmx.trigger(document.body, 'waits-changed')")
    assert read.value.status == 204
    expect(calls.nth(1).locator(".approval-reason")).to_have_value("Keep the core memory short.")
    expect(card.locator(".approval-progress")).to_contain_text("1 of 2")
    calls.nth(1).locator("[data-answer=deny]").click()
    expect(send).to_be_enabled()
    _snap(page, "68-approval-several-calls")
    send.click()
    done = page.locator(f"{CARD}[data-state=answered]")
    expect(done).to_be_visible(timeout=FIRST_CALL_S)
    expect(done.locator(".approval-verdict")).to_have_text(["approved", "denied"])
    expect(done.locator(".approval-deferred")).to_contain_text("Ran with the answers: conversation_search")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Noted in archival memory only.")
    _snap(page, "69-approval-several-answered")
