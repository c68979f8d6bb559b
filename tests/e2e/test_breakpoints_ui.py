"""The debugger in the workspace, in Chromium: breakpoints set in the Breakpoints tab (a bad token count told inline);
a run paused before a tool call shows the call to edit, and the edited call is what ran (the step inspector says so);
a run paused before a model call shows a pause card in every tab with the prompt's tokens, the exact compiled request
and a block edited before Continue; Step stops again before the next call; Stop ends a pause; a tab acting on a pause
that already ended is told so. No CSP violation on the way. Screenshots: /tmp/7x-*.png (1280 and 390 px wide, light
and dark) and test-artifacts/screenshots/."""

import re

from playwright.sync_api import expect

from core.models import Run
from memory.models import Passage
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)
PAUSE = ".wait-model-call"
BP_CARD = ".wait-calls[data-breakpoint]"


def _open(context, agent_id: str, violations: list[str]):
    """The workspace in a new tab; Content-Security-Policy violations it reports go to `violations`."""
    page = context.new_page()
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
    )
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def tab_strip_in_view(page, target: str | None = None) -> None:
    """The inspector's tab strip is inside the inspector's visible box, and `target` (scrolled to) starts below it."""
    strip = page.locator("#inspector .pill-nav").bounding_box()
    pane = page.locator("#inspector").bounding_box()
    assert pane["y"] - 1 <= strip["y"] and strip["y"] + strip["height"] <= pane["y"] + pane["height"], (strip, pane)
    # nothing around the inspector was scrolled to get there (the page and the grid scroll no more by hand)
    shifted = "[document.scrollingElement.scrollTop, document.body.scrollTop, document.querySelector('main').scrollTop]"
    assert page.evaluate(shifted) == [0, 0, 0] and strip["y"] >= 0
    if target is not None:
        assert page.evaluate("document.getElementById('inspector').scrollTop") > 0  # the pane did scroll
        shown = page.locator(target).bounding_box()
        assert shown["y"] >= strip["y"] + strip["height"] - 1, (shown, strip)  # not hidden under the strip


def _snap(page, name: str) -> None:
    shot(page, f"7x-{name}")
    page.screenshot(path=f"/tmp/7x-{name}.png")


def _themes(page, name: str) -> None:
    """The same view light and dark."""
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        _snap(page, f"{name}-{theme}")
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def _breakpoints_tab(page):
    page.click('.pill-nav [data-tab="tab-breakpoints"]')
    panel = page.locator("#breakpoints-panel")
    expect(panel).to_be_visible()
    return panel


def _add(page, kind: str, tools=(), tokens: str | None = None) -> None:
    panel = page.locator("#breakpoints-panel")
    panel.locator("#bp-on").select_option(kind)
    for name in tools:
        panel.locator(f'input[name=tools][value="{name}"]').check()
    if tokens is not None:
        panel.locator("input[name=tokens]").fill(tokens)
    panel.locator("#bp-add-btn").click()


def test_a_tool_call_breakpoint_lets_you_edit_the_call_and_the_inspector_shows_what_ran(signed_in, account, fake_llm):
    violations: list[str] = []
    agent = make_agent(account.org, name="Stepper")
    page = _open(signed_in, agent.id, violations)
    panel = _breakpoints_tab(page)
    expect(panel.locator("#bp-none")).to_be_visible()
    expect(panel.locator(".bp-tools")).to_be_visible()  # tool_call is the kind offered first: its tools to tick
    expect(panel.locator(".bp-tokens")).to_be_hidden()

    # a bad token count is told inline, nothing is added
    panel.locator("#bp-on").select_option("tokens_over")
    expect(panel.locator(".bp-tools")).to_be_hidden()
    expect(panel.locator(".bp-tokens")).to_be_visible()
    panel.locator("input[name=tokens]").fill("0")
    panel.locator("#bp-add-btn").click()
    expect(panel.locator("#bp-tokens-error")).to_contain_text("at least 1")
    expect(panel.locator("#bp-none")).to_be_visible()
    _snap(page, "breakpoints-bad-tokens")

    _add(page, "tool_call", tools=["archival_memory_insert"])
    item = panel.locator(".bp-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("Before a call of archival_memory_insert")
    expect(page.locator("#bp-count")).to_have_text("1")
    _add(page, "tokens_over", tokens="100000")
    expect(panel.locator(".bp-item")).to_have_count(2)
    expect(panel.locator("#bp-tokens-error")).to_have_count(0)
    panel.locator(".bp-item", has_text="100000").locator(".bp-enabled").uncheck()  # kept, disabled
    expect(panel.locator(".bp-item.disabled")).to_contain_text("100000 tokens")
    _themes(page, "breakpoints-panel-1280")

    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "draft"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Stored the edited fact."}),
    )
    _send(page, "Remember this fact for later.")
    card = page.locator(f"{BP_CARD}[data-state=waiting]")
    expect(card).to_be_visible(timeout=FIRST_CALL_S)
    expect(card.locator(".approval-head")).to_contain_text("Paused before a call of archival_memory_insert")
    expect(card.locator(".meta")).to_contain_text("breakpoint")
    expect(card.locator("[data-bp=step]")).to_be_visible()
    expect(card.locator("[data-bp=stop]")).to_be_visible()
    expect(page.locator("#run-status")).to_contain_text("paused at a breakpoint")
    args = card.locator("textarea.approval-args")
    expect(args).to_have_value(re.compile(r'"content": "draft"'))
    assert Passage.objects.filter(agent=agent).count() == 0  # nothing ran
    card.scroll_into_view_if_needed()
    _themes(page, "tool-breakpoint-1280")

    args.fill('{\n  "content": "the edited fact",\n  "request_heartbeat": true\n}')
    card.locator("[data-answer=approve]").click()
    done = page.locator(".wait-calls[data-state=answered]")
    expect(done).to_be_visible(timeout=FIRST_CALL_S)
    expect(done.locator(".approval-verdict")).to_have_text("approved with edited arguments")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text(
        "Stored the edited fact.", timeout=FIRST_CALL_S
    )
    assert list(Passage.objects.filter(agent=agent).values_list("text", flat=True)) == ["the edited fact"]

    # the step inspector: the call this step made ran with the edited arguments
    page.click('.pill-nav [data-tab="tab-context"]')
    done.locator(".step-chip").click()
    tools = page.locator("#step-detail #step-tools")
    expect(tools).to_be_visible()
    edited = tools.locator(".step-tool.edited")
    expect(edited).to_contain_text("archival_memory_insert")
    expect(edited.locator(".step-edited")).to_have_text("ran with edited arguments")
    expect(edited.locator("pre.step-tool-args")).to_contain_text('"content": "the edited fact"')
    edited.scroll_into_view_if_needed()
    _themes(page, "inspector-edited-1280")
    assert violations == []


def test_a_model_call_pause_continue_step_and_stop_in_every_tab(signed_in, account, fake_llm):
    violations: list[str] = []
    agent = make_agent(account.org, name="Stepper")
    page, other = _open(signed_in, agent.id, violations), _open(signed_in, agent.id, violations)
    _breakpoints_tab(page)
    _add(page, "model_call")
    expect(page.locator("#breakpoints-panel .bp-item")).to_contain_text("Before every model call")

    _send(page, "What is my name?")
    pause = page.locator(f"{PAUSE}[data-state=waiting]")
    expect(pause).to_be_visible(timeout=FIRST_CALL_S)
    run = Run.objects.get(agent=agent)
    tokens = run.waiting["tokens"]
    expect(pause.locator(".pause-head")).to_contain_text(
        f"Paused before the model call — before every model call · {tokens} tokens"
    )
    expect(pause).to_contain_text("Edit a block, then Continue: the call is compiled from the state then.")
    expect(page.locator("#run-status")).to_contain_text("paused at a breakpoint")
    expect(other.locator(f"{PAUSE}[data-state=waiting]")).to_be_visible()  # live in the other tab too
    expect(other.locator("#run-status")).to_contain_text("paused at a breakpoint")
    assert fake_llm.chat_requests == []  # nothing was sent
    _themes(page, "wait-model-call-1280")

    # the message box while paused: the server's refusal, the text kept
    _send(page, "hello?")
    expect(page.locator("#busy-bar")).to_contain_text("paused at a breakpoint before a model call")
    expect(page.locator("#composer-input")).to_have_value("hello?")
    page.click("#busy-dismiss")
    page.fill("#composer-input", "")

    # the exact compiled request, then a block edited before the call is made
    pause.locator("[data-open-tab=tab-context]").click()
    expect(page.locator("#tab-context")).to_be_visible()
    tab_strip_in_view(page, "#next-request")  # the jump scrolled the tab strip out of view at 1280 px
    expect(page.locator("#held-note")).to_contain_text(run.id[-8:])
    expect(page.locator("#next-request")).to_contain_text("What is my name?")
    expect(page.locator("#next-request")).to_contain_text("The user's name is Alice.")
    _snap(page, "compiled-request-1280")
    pause.locator("[data-open-tab=tab-memory]").click()
    human = page.locator('#blocks-panel .block-card:has(textarea[aria-label="human value"])')
    human.locator("textarea[name=value]").fill("The user's name is Bertrand, a baker from Lyon who loves long walks.")
    human.locator("button[type=submit]").click()
    expect(page.locator("#blocks-panel")).to_contain_text("Saved.")
    expect(page.locator("#next-request")).to_contain_text("The user's name is Bertrand")  # compiled again
    # the card counts the call Continue would send now, not the one it paused with (it stayed stale)
    now = int(page.locator("#held-note").get_attribute("data-tokens"))
    assert now > tokens
    expect(pause.locator(".pause-tokens")).to_have_text(f"{now} tokens")
    _snap(page, "wait-model-call-after-block-edit-1280")

    # Step: the model call goes out (with the edit), and the run stops again before the tool call it made
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Your name is Bertrand."}))
    pause.locator("[data-pause=step]").click()
    stepped = page.locator(f"{PAUSE}[data-state=stepped]")
    expect(stepped).to_be_visible(timeout=FIRST_CALL_S)
    expect(stepped.locator(".pause-was")).to_contain_text(f"{now} tokens")
    card = page.locator(f"{BP_CARD}[data-state=waiting]")
    expect(card).to_be_visible(timeout=FIRST_CALL_S)
    expect(card).to_contain_text("Paused before a call of send_message")
    assert "Bertrand" in fake_llm.chat_requests[-1]["messages"][0]["content"]
    expect(other.locator(f"{PAUSE}[data-state=stepped]")).to_be_visible()
    expect(other.locator(f"{BP_CARD}[data-state=waiting]")).to_be_visible()
    card.scroll_into_view_if_needed()
    _snap(page, "stepped-1280")

    # Continue: the call runs as it stands, the reply arrives
    card.locator("[data-answer=approve]").click()
    said = ".wait-calls[data-state=answered] .approval-said"  # the reply was the call it stopped before
    expect(page.locator(said)).to_contain_text("Your name is Bertrand.", timeout=FIRST_CALL_S)
    expect(other.locator(said)).to_contain_text("Your name is Bertrand.")
    expect(page.locator("#run-status")).to_contain_text("end_turn")
    _snap(page, "continued-1280")

    # Stop ends a pause; a tab that missed the news and acts on it is told
    _send(page, "And what is my job?")
    pause = page.locator(f"{PAUSE}[data-state=waiting]")
    expect(pause).to_be_visible(timeout=FIRST_CALL_S)
    stale = other.locator(f"{PAUSE}[data-state=waiting]")
    expect(stale).to_be_visible()
    missed: list[str] = []  # the other tab's card cannot be fetched again, as for a tab whose socket was away
    other.route(re.compile(r".*/waits/model-call/.*"), lambda route: (missed.append(route.request.url), route.abort()))
    asked = len(fake_llm.chat_requests)
    pause.locator("[data-pause=stop]").click()
    expect(page.locator(f"{PAUSE}[data-state=stopped]")).to_contain_text("without calling the model")
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    expect(page.locator("#cancel-run")).to_be_hidden()
    for _ in range(100):  # the other tab heard the pause end and tried to fetch its card
        if missed:
            break
        other.wait_for_timeout(100)
    assert missed
    expect(stale).to_have_attribute("data-state", "waiting")
    other.unroute(re.compile(r".*/waits/model-call/.*"))
    stale.locator("[data-pause=continue]").click()
    told = other.locator(f"{PAUSE} .approval-error:not([hidden])")
    expect(told).to_be_visible()
    expect(told).to_contain_text("no longer waits")
    expect(other.locator(f"{PAUSE}[data-state=stopped]")).to_have_count(1)
    _snap(other, "told-elsewhere-1280")
    assert len(fake_llm.chat_requests) == asked  # no model call after the stop

    # after a reload, a pause that waits is drawn from the store; 390 px wide, light and dark
    _send(page, "One more question.")
    expect(page.locator(f"{PAUSE}[data-state=waiting]")).to_be_visible(timeout=FIRST_CALL_S)
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    held = page.locator(f"#live {PAUSE}[data-state=waiting]")
    expect(held).to_be_visible()
    expect(page.locator("#run-status")).to_contain_text("paused at a breakpoint")
    held.scroll_into_view_if_needed()
    _themes(page, "wait-model-call-390")
    held.locator("[data-open-tab=tab-context]").click()
    expect(page.locator("#held-note")).to_be_visible()
    _snap(page, "compiled-request-390")
    page.click('.pill-nav [data-tab="tab-breakpoints"]')
    _themes(page, "breakpoints-panel-390")
    page.click('.ws-tabs [data-pane="conversation"]')
    held.locator("[data-pause=stop]").click()
    expect(page.locator(f"#live {PAUSE}[data-state=stopped]")).to_have_count(1)  # (drawn since the reload)
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    assert violations == []
