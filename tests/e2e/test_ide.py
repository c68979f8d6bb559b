"""The IDE end to end in Chromium: create from a template, stream a run into two tabs, edit a block and see the
simulator change, drag the window slider, write and run a tool. Screenshots go to test-artifacts/screenshots/."""

import re

from playwright.sync_api import expect

from core.models import Agent
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

TOOL_SOURCE = '''def greet(name: str, times: int = 1) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        times: How many times.

    Returns:
        The greeting.
    """
    print("greeting", name)
    return " ".join(["hello " + name] * times)
'''


def _until(page, condition, attempts: int = 100) -> None:
    """Poll a condition read from the page (wait_for_function evaluates a string, which the CSP forbids)."""
    for _ in range(attempts):
        if condition():
            return
        page.wait_for_timeout(100)
    assert condition()


def _create_from_template(page) -> str:
    page.goto("/")
    shot(page, "01-agents-empty")
    page.fill("#create-agent input[name=name]", "Ada")
    page.select_option("#create-agent select[name=template]", "af:memgpt_chat")
    page.select_option(
        "#create-agent select[name=agent_type]", "memgpt_v2_agent"
    )  # the script below answers with send_message
    page.fill("#create-agent input[name=model]", "openai/fake-model")
    page.click("#create-agent button[type=submit]")
    page.wait_for_url(re.compile(r"/agents/agent-[^/]+/$"))
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def test_create_from_template_and_stream_a_run_into_two_tabs(signed_in, fake_llm):
    page = signed_in.new_page()
    agent_id = _create_from_template(page)
    assert sorted(Agent.objects.get(id=agent_id).blocks.values_list("label", flat=True)) == ["human", "persona"]
    second = signed_in.new_page()
    second.goto(f"/agents/{agent_id}/")
    for p in (page, second):
        expect(p.locator("body[data-ws=open]")).to_have_count(1)

    fake_llm.script(
        FakeLLM.reasoning(
            "Did we talk about <b>tea</b> before?", "conversation_search", {"query": "tea", "request_heartbeat": True}
        ),
        FakeLLM.reasoning("Greet her back.", "send_message", {"message": "Hello <i>Ada</i>, nice to meet you."}),
    )
    box = page.locator("#composer-input")
    box.fill("Hi, I'm Ada")
    box.press("Shift+Enter")
    box.type("I like tea")
    assert box.input_value() == "Hi, I'm Ada\nI like tea"  # Shift+Enter is a new line, not a send
    box.press("Enter")

    for p in (page, second):
        # the server's first model call imports litellm (several seconds on a small machine)
        expect(p.locator("#live .msg.assistant_message")).to_contain_text(
            "Hello <i>Ada</i>, nice to meet you.", timeout=60000
        )
        expect(p.locator("#live .msg.stop_reason")).to_have_count(1)
        kinds = p.eval_on_selector_all("#live .msg", "els => els.map(e => e.dataset.type || e.className.split(' ')[1])")
        order = [
            k
            for k in kinds
            if k
            in ("user_message", "reasoning_message", "tool_call_message", "tool_return_message", "assistant_message")
        ]
        assert order == [
            "user_message",
            "reasoning_message",
            "tool_call_message",
            "tool_return_message",
            "reasoning_message",
            "assistant_message",
        ], order
        # model output is text, never markup
        assert p.locator("#live i").count() == 0 and p.locator("#live b").count() == 0
        expect(p.locator("#live .tool_call_message pre")).to_contain_text('"query": "tea"')
    expect(page.locator("#run-status")).not_to_contain_text("running")
    shot(page, "02-workspace-after-run")

    # a past step's payload opens from its chip
    page.locator("#live .tool_call_message .step-chip").first.click()
    expect(page.locator("#step-detail pre.payload").first).to_contain_text('"messages"')
    expect(page.locator("#step-diff")).to_be_visible()
    shot(page, "03-step-payload")

    # a recorded tool call opens in the workbench with its arguments filled in
    page.locator("#live .tool_call_message a.open-workbench").first.click()
    expect(page.locator(".notice").first).to_contain_text("Arguments filled in from a tool call")
    expect(page.locator("input[name=arg_query]")).to_have_value("tea")
    # a built-in runs in the agent runtime: the typed form runs it as the agent that made the call
    expect(page.locator("#saved-tool-notice")).to_contain_text("built-in")
    expect(page.locator("#run-agent option:checked")).not_to_have_text("no agent")
    shot(page, "14-workbench-from-recorded-call")


def test_edit_block_updates_context_simulator_and_slider_rescales_without_writing(signed_in, account):
    agent = make_agent(account.org, name="Memo", context_window_limit=16000)
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    expect(page.locator("#simulator")).to_contain_text("The user's name is Alice.")

    page.click("[data-tab=tab-memory]")
    card = page.locator(".block-card", has=page.locator("strong", has_text="human"))
    area = card.locator("textarea[name=value]")
    area.fill("x" * 100_001)
    expect(card.locator(".counter")).to_have_text("100001 / 100000 chars")
    expect(card.locator(".limit-error")).to_be_visible()
    expect(card.locator("button[type=submit]")).to_be_disabled()
    area.fill("The user's name is Bob and he likes tea.")
    expect(card.locator(".counter")).to_have_text("40 / 100000 chars")
    card.locator("button[type=submit]").click()
    expect(page.locator(".block-card .ok-text")).to_have_text("Saved.")
    shot(page, "04-memory-tab")
    page.click("[data-tab=tab-context]")
    expect(page.locator("#simulator")).to_contain_text("The user's name is Bob and he likes tea.")

    before = Agent.objects.filter(id=agent.id).values().get()
    # The context panel re-renders after the save (and its bar widths animate): measure once it has settled.
    width_js = "sel => { const e = document.querySelector(sel); return e ? e.getBoundingClientRect().width : 0; }"
    bar = "#ctx-bar span[data-section=core_memory]"
    _until(page, lambda: page.evaluate(width_js, bar) > 0)
    page.wait_for_timeout(500)
    width_before = page.evaluate(width_js, bar)
    page.locator("#window-slider").fill("4096")
    expect(page.locator("#ctx-limit")).to_have_text("4096")
    expect(page.locator("#window-value")).to_have_text("4096")
    _until(page, lambda: page.evaluate(width_js, bar) > width_before * 3)
    expect(page.locator("#unsaved-note")).to_be_visible()
    shot(page, "05-context-slider")
    assert Agent.objects.filter(id=agent.id).values().get() == before  # dragging never writes
    page.click("#save-settings")
    expect(page.locator("#settings-saved")).to_be_visible()
    assert Agent.objects.get(id=agent.id).context_window_limit == 4096


def test_write_a_tool_see_its_schema_and_run_it(signed_in):
    page = signed_in.new_page()
    page.goto("/tools/")
    page.evaluate("src => window.AIDE_EDITOR.setValue(src)", "def broken(x):\n    return x\n")
    expect(page.locator("#schema-error")).to_contain_text("no docstring")
    page.evaluate("src => window.AIDE_EDITOR.setValue(src)", TOOL_SOURCE)
    expect(page.locator("#schema-json")).to_contain_text('"name": "greet"')
    expect(page.locator("#schema-json")).to_contain_text('"required"')
    page.fill("input[name=arg_name]", "Ada")
    page.fill("input[name=arg_times]", "2")
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("hello Ada hello Ada")
    expect(page.locator("#run-stdout")).to_contain_text("greeting Ada")
    expect(page.locator("#run-output")).to_contain_text("sandbox: local")
    shot(page, "06-tools-workbench")
    page.click("#save-tool")
    page.wait_for_url(re.compile(r"/tools/\?tool="))
    expect(page.locator("#tool-library")).to_contain_text("greet")


def test_every_page_renders_for_screenshots(signed_in, account):
    agent = make_agent(account.org, name="Shown", tags=["demo"])
    page = signed_in.new_page()
    for name, url in [
        ("07-agents", "/"),
        ("08-blocks", "/blocks/"),
        ("09-settings", "/settings/"),
        ("10-delete-confirm", f"/agents/{agent.id}/delete/"),
    ]:
        page.goto(url)
        expect(page.locator("main")).to_be_visible()
        shot(page, name)
    block_id = agent.blocks.first().id
    page.goto(f"/blocks/{block_id}/")
    shot(page, "11-block-detail")
    page.goto(f"/agents/{agent.id}/")
    page.click("[data-tab=tab-archival]")
    expect(page.locator("#search-mode")).to_contain_text("full text")
    page.fill("#archival textarea[name=text]", "Ada's favourite tea is oolong.") if page.locator(
        "#archival details"
    ).first.evaluate("d => (d.open = true)") else None
    page.click("#archival details button[type=submit]")
    expect(page.locator("#passages")).to_contain_text("oolong")
    shot(page, "12-archival")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    page.click("[data-tab=tab-context]")
    shot(page, "13-workspace-dark")
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.reload()
    page.wait_for_timeout(300)
    assert errors == []
