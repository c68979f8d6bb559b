"""Unhappy paths in Chromium: whatever ends a run badly (a provider error, an unknown model, a context too small, a
cancel, a server that restarted mid-run), every tab ends idle with a usable composer, the undelivered message
marked with a Retry and the error said plainly; sending while a run is going says which run and offers to cancel it
or queue the message. Screenshots go to test-artifacts/screenshots/ (and /tmp/shots/ when it exists)."""

from playwright.sync_api import expect

from core.agents.services import BlockInput, agent_update
from core.models import Run
from core.runs.request import RunRequest
from tests.e2e.conftest import shot
from tests.e2e.test_debugger import FIRST_CALL_S, _group_send, _open, _send
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _usable(page) -> None:
    """Idle, nothing half-shown, the composer takes a message."""
    expect(page.locator("#cancel-run")).to_be_hidden()
    expect(page.locator("#send-btn")).to_have_text("Send")
    expect(page.locator("#busy-bar")).to_be_hidden()
    expect(page.locator("#live .msg.user_message.pending")).to_have_count(0)  # no ghost messages
    expect(page.locator("#live .msg.streaming")).to_have_count(0)
    expect(page.locator("#composer-input")).to_be_editable()
    assert "[object Object]" not in page.inner_text("body")


def test_a_provider_error_leaves_the_message_failed_with_retry_in_every_tab(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Flaky provider")
    page, other = _open(signed_in, agent.id), _open(signed_in, agent.id)
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    _send(page, "Hello <b>there</b>?")
    for p in (page, other):
        failed = p.locator("#live .msg.user_message.failed")
        expect(failed).to_contain_text("Hello <b>there</b>?", timeout=FIRST_CALL_S)
        expect(failed.locator("[data-retry]")).to_be_visible()
        expect(p.locator("#live .run-failed")).to_contain_text("upstream exploded")
        expect(p.locator("#run-status")).to_contain_text("failed")
        _usable(p)
        assert p.locator("#live b").count() == 0
    shot(page, "41-provider-error-retry")

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello again."}))
    page.locator("#live .msg.user_message.failed [data-retry]").click()
    for p in (page, other):
        expect(p.locator("#live .msg.assistant_message")).to_contain_text("Hello again.", timeout=FIRST_CALL_S)
        expect(p.locator("#live .msg.user_message.failed")).to_have_count(0)
        expect(p.locator("#live .msg.user_message").filter(has_text="Hello <b>there</b>?")).to_have_count(1)
        expect(p.locator("#run-status")).to_contain_text("completed")
        _usable(p)


def test_an_unknown_model_is_refused_when_sending_and_when_saving(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Wrong model")
    agent_update(agent=agent, changes={"model": "mystery/model-x"})  # e.g. set over the API, or imported
    page = _open(signed_in, agent.id)
    expect(page.locator("#model-warning")).to_be_visible()
    _send(page, "anyone there?")
    failed = page.locator("#live .msg.user_message.failed")
    expect(failed).to_contain_text("anyone there?")
    expect(failed.locator(".fail-reason")).to_contain_text("mystery/model-x")
    expect(page.locator("#run-status")).to_contain_text("not sent")
    _usable(page)
    failed.locator("[data-edit]").click()
    expect(page.locator("#composer-input")).to_have_value("anyone there?")  # nothing typed is lost
    shot(page, "42-unknown-model-not-sent")

    # saving a model no provider serves is refused, listing the ones served
    page.fill("#agent-settings input[name=model]", "openai/not-a-model")
    page.click("#save-settings")
    expect(page.locator("#agent-settings .error")).to_contain_text("openai/fake-model")
    expect(page.locator("#agent-settings .error")).to_contain_text("does not serve")
    shot(page, "43-model-refused-at-save")
    page.fill("#agent-settings input[name=model]", "openai/fake-model")
    page.click("#save-settings")
    expect(page.locator("#settings-saved")).to_be_visible()

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Now I can answer."}))
    failed.locator("[data-retry]").click()
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Now I can answer.", timeout=FIRST_CALL_S)
    expect(page.locator("#live .msg.user_message.failed")).to_have_count(0)


def test_rules_naming_a_missing_tool_are_refused_in_the_editor(signed_in, account):
    agent = make_agent(account.org, name="Ruled")
    page = _open(signed_in, agent.id)
    page.fill(
        "#rules textarea",
        '[{"type": "constrain_child_tools", "tool_name": "send_message", "children": ["web_search"]}]',
    )
    page.click("#rules button[type=submit]")
    expect(page.locator("#rules-error")).to_contain_text("'web_search'")
    expect(page.locator("#rules-error")).to_contain_text("does not have")
    page.locator("#rules").scroll_into_view_if_needed()
    shot(page, "44-rule-refused")


def test_a_context_too_small_fails_clearly_and_keeps_the_message(signed_in, account, fake_llm):
    agent = make_agent(
        account.org,
        name="Cramped",
        context_window_limit=1024,
        memory_blocks=[BlockInput(label="human", value="All about the human. " * 200, limit=5000)],
    )
    page = _open(signed_in, agent.id)
    _send(page, "Will this fit?")
    expect(page.locator("#live .run-failed")).to_contain_text("too small", timeout=FIRST_CALL_S)
    expect(page.locator("#live .msg.user_message.failed")).to_contain_text("Will this fit?")
    expect(page.locator("#run-status")).to_contain_text("failed")
    _usable(page)
    shot(page, "45-context-too-small")


def test_sending_while_a_run_is_going_offers_cancel_or_queue(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Busy")
    page = _open(signed_in, agent.id)
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "First answer."}, latency=4),
        FakeLLM.tool("send_message", {"message": "Second answer."}),
    )
    _send(page, "first")
    expect(page.locator("#live .msg.user_message[data-state=sent]")).to_have_count(
        1, timeout=FIRST_CALL_S
    )  # its run is known
    expect(page.locator("#run-status")).to_contain_text("running")
    expect(page.locator("#send-btn")).to_have_text("Send…")
    _send(page, "second, typed while busy")
    bar = page.locator("#busy-bar")
    expect(bar).to_be_visible()
    run = Run.objects.get(agent=agent)
    expect(bar).to_contain_text(f"busy with run …{run.id[-8:]}")
    expect(page.locator("#composer-input")).to_have_value("second, typed while busy")
    shot(page, "46-busy-cancel-or-queue")
    page.click("#busy-queue")
    queued = page.locator("#live .msg.user_message.pending[data-state=queued]")
    expect(queued).to_contain_text("second, typed while busy")
    expect(page.locator("#composer-input")).to_have_value("")
    shot(page, "47-queued")
    expect(page.locator("#live .msg.assistant_message").last).to_contain_text("Second answer.", timeout=FIRST_CALL_S)
    said = page.eval_on_selector_all("#live .msg.user_message .body", "els => els.map(e => e.textContent)")
    assert said == ["first", "second, typed while busy"], said
    expect(page.locator("#run-status")).to_contain_text("completed")
    _usable(page)


def test_cancelling_leaves_a_usable_page(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Cancelled")
    page = _open(signed_in, agent.id)
    fake_llm.script(FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True, latency=3))
    _send(page, "take your time")
    expect(page.locator("#cancel-run")).to_be_visible()
    for _ in range(600):  # cancel while the model call is in flight
        if fake_llm.chat_requests:
            break
        page.wait_for_timeout(100)
    page.click("[data-tab=tab-runs]")  # cancelled from the runs view
    page.locator("#runs-table [data-cancel-run]").click()
    expect(page.locator("#run-status")).to_contain_text("cancelling")
    expect(page.locator("#live .run-failed")).to_contain_text("cancelled", timeout=FIRST_CALL_S)
    expect(page.locator("#runs-table .run-row").first).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    _usable(page)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Still here."}))
    _send(page, "are you there?")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Still here.", timeout=FIRST_CALL_S)
    shot(page, "48-after-cancel")


def test_a_run_lost_to_a_server_restart_ends_usable(redis_layer, signed_in, account, fake_llm):
    from core.events import agent_group
    from core.runs.runner import run_start

    agent = make_agent(account.org, name="Crashed")
    page = _open(signed_in, agent.id)
    run = run_start(
        RunRequest(
            owner=account.org, agent_id=agent.id, input_messages=[{"role": "user", "content": "lost in the crash"}]
        )
    )
    group = agent_group(agent.id)
    _group_send(group, [{"message_type": "run_status", "run_id": run.id, "status": "running", "stop_reason": None}])
    expect(page.locator("#run-status")).to_contain_text("running")
    expect(page.locator("#cancel-run")).to_be_visible()
    lost = "The server stopped while this run was in progress."
    Run.objects.filter(pk=run.pk).update(
        status="failed", stop_reason="error", error=lost
    )  # as core.runs.queue's reaper records it
    _group_send(
        group,
        [{"message_type": "run_status", "run_id": run.id, "status": "failed", "stop_reason": "error", "error": lost}],
    )
    expect(page.locator("#run-status")).to_contain_text("failed")
    expect(page.locator("#live .run-failed")).to_contain_text(lost)
    failed = page.locator("#live .msg.user_message.failed")
    expect(failed).to_contain_text("lost in the crash")
    _usable(page)
    shot(page, "49-run-lost")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    shot(page, "50-run-lost-dark")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Back again."}))
    failed.locator("[data-retry]").click()
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Back again.", timeout=FIRST_CALL_S)


def test_a_run_the_page_did_not_hear_of_makes_the_send_say_which_run_is_busy(signed_in, account, fake_llm):
    from core.runs.runner import run_start

    agent = make_agent(account.org, name="Claimed elsewhere")
    page = _open(signed_in, agent.id)
    expect(page.locator("#run-status")).to_contain_text("idle")
    run = run_start(
        RunRequest(owner=account.org, agent_id=agent.id, input_messages=[{"role": "user", "content": "elsewhere"}])
    )
    _send(page, "are you free?")  # the server answers that another run holds the agent
    bar = page.locator("#busy-bar")
    expect(bar).to_contain_text(f"busy with run …{run.id[-8:]}")
    expect(page.locator("#composer-input")).to_have_value("are you free?")  # the text comes back, nothing is lost
    expect(page.locator("#live .msg.user_message")).to_have_count(0)  # and no ghost message stays
    expect(page.locator("#run-status")).to_contain_text("running")
    assert "[object Object]" not in page.inner_text("body")
    shot(page, "52-busy-elsewhere")
    page.click("#busy-dismiss")
    expect(bar).to_be_hidden()
