"""Layout and theme in Chromium: every page at 390, 1024, 1280 and 1920 px wide, light and dark, has nothing cut off
or overlapping (element boxes inside the window or a scrolling pane, no horizontal scroll on the document) and its
text meets WCAG AA contrast against the background painted behind it (`layout_checks.js`). The workspace's
splitters remember their widths, the inspector is a drawer at tablet widths and the panes are tabs on a phone.
Screenshots of every page, size and theme go to test-artifacts/screenshots/layout/ (and /tmp/shots/ when it exists)."""

import json
from pathlib import Path

from playwright.sync_api import expect

from core.agents import agent_tests
from core.agents.agentfile.exporter import agentfile_export
from core.agents.services import BlockInput
from core.models import Agent, Step
from core.runs import timetravel
from core.runs.runner import run_agent
from memory import services as memory_services
from memory.files import services as file_services
from memory.files.ingest import file_ingest
from tests.e2e.conftest import SHOTS
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread
from tools import services as tool_services

CHECKS = (Path(__file__).parent / "layout_checks.js").read_text()
WIDTHS = (390, 1024, 1280, 1920)
HEIGHT = {390: 844, 1024: 768, 1280: 800, 1920: 1080}
LONG = "Customer-support-agent-for-the-northern-european-region-with-an-unbroken-name"
LONG_ID = "x" * 120
REPLAY_MODELS = ["openai/model-a", "openai/model-b", "openai/model-c"]
RUN_S = 90000  # ms: a test run copies the agent and runs it through the executor (litellm's first import is slow)


def _seed(account, fake_llm, tmp_path) -> dict:
    """Agents, blocks, tools, runs and tests with long unbroken names and values, through the real services."""
    agent = make_agent(
        account.org,
        name=LONG,
        include_multi_agent_tools=True,  # the longest built-in tool names (send_message_to_agent_and_wait_for_reply)
        tags=["production-eu-north-1-very-long-tag-name", "support"],
        memory_blocks=[
            BlockInput(label="persona", value="I am a helpful support agent. " * 8),
            BlockInput(label="customer_profile_with_a_long_label", value="Account " + LONG_ID),
        ],
    )
    make_agent(account.org, name="Ada")
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "See https://example.com/" + "very-long-path/" * 12 + " for details."})
    )
    in_thread(
        run_agent,
        agent_id=agent.id,
        owner=account.org,
        input_messages=[{"role": "user", "content": "Where is my order " + LONG_ID + "?"}],
    )
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Done."}))
    in_thread(run_agent, agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Thanks."}])
    step = Step.objects.filter(agent=agent).order_by("created_at").first()
    fake_llm.script(*[FakeLLM.tool("send_message", {"message": f"Answer {i}: {LONG_ID}"}) for i in range(3)])
    timetravel.step_replay(owner=account.org, step=step, models=REPLAY_MODELS)  # the replay page's three columns
    memory_services.passage_insert(
        agent=Agent.objects.get(pk=agent.id), text="Refund policy: " + LONG_ID, tags=["policy"]
    )
    agent_tests.test_save(
        agent=Agent.objects.get(pk=agent.id),
        test={
            "name": "answers-about-the-order-status-with-an-unbroken-test-name-" + "y" * 40,
            "turns": ["Where is my order?"],
            "expect": {"reply": {"contains": "order"}},
        },
    )
    tool = tool_services.tool_create(
        owner=account.org,
        source_code=(
            "def lookup_order_status_in_the_warehouse_system_v2(order_id: str) -> str:\n"
            '    """Look up an order.\n\n    Args:\n        order_id: The order id.\n    """\n    return order_id\n'
        ),
    )
    folder = file_services.folder_create(
        owner=account.org, name="handbooks-for-the-northern-european-region-" + "z" * 30
    )
    handbook, _ = file_services.file_upload(
        folder=folder,
        file_name="returns-and-refunds-handbook-" + LONG_ID + ".md",
        content_type="text/markdown",
        data=("# Returns\n\n" + "Refunds take five days. " * 40 + "\n\n" + LONG_ID + "\n").encode(),
    )
    assert file_ingest(file_id=handbook.id) == "completed"
    file_services.folder_attach(agent=Agent.objects.get(pk=agent.id), folder=folder)
    block = agent.blocks.get(label="customer_profile_with_a_long_label")
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(agentfile_export(agent=Agent.objects.get(pk=agent.id)), default=str))
    return {"agent": agent, "step": step, "tool": tool, "block": block, "af": path, "folder": folder, "file": handbook}


def _audit(page) -> list[str]:
    page.evaluate("document.fonts.ready")
    return page.evaluate(CHECKS)


def _shot(page, name: str) -> None:
    out = SHOTS / "layout"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}.png"))
    if Path("/tmp/shots").is_dir():
        page.screenshot(path=f"/tmp/shots/{name}.png")


def _pages(data) -> list[tuple[str, str]]:
    a, s = data["agent"], data["step"]
    return [
        ("agents", "/"),
        ("workspace", f"/agents/{a.id}/"),
        ("blocks", "/blocks/"),
        ("block", f"/blocks/{data['block'].id}/"),
        ("tools", f"/tools/?tool={data['tool'].id}"),
        ("new-tool", "/tools/"),
        ("settings", "/settings/"),
        ("folders", "/folders/"),
        ("folder", f"/folders/{data['folder'].id}/"),
        ("file", f"/folders/{data['folder'].id}/files/{data['file'].id}/"),
        ("replay", f"/agents/{a.id}/steps/{s.id}/replay/"),
        ("delete", f"/agents/{a.id}/delete/"),
    ]


def _number(step) -> int:
    """The step's number in its agent's one thread (steps are numbered within the conversation)."""
    return Step.objects.filter(agent_id=step.agent_id, kind="agent", created_at__lte=step.created_at).count()


def _reveal_inspector(page, width: int) -> None:
    """Bring the inspector into view the way a person would at this width."""
    if width < 768:
        page.click('.ws-tabs [data-pane="inspector"]')
    elif width < 1280 and not page.locator("body.inspector-open").count():
        page.click("#inspector-toggle")
    expect(page.locator("#inspector .pill-nav")).to_be_visible()


def _workspace_states(page, width: int, data):
    """The workspace's other views, one after the other on the open page: yields each state's name once shown."""
    if width < 768:
        page.click('.ws-tabs [data-pane="settings"]')
        expect(page.locator("#settings-form")).to_be_visible()
        yield "workspace-agent"
    _reveal_inspector(page, width)
    page.locator(f'#steps-list .step-chip[data-step="{data["step"].id}"]').click()
    expect(page.locator("#step-detail .step-card")).to_be_visible()
    page.locator("#step-detail details.part").first.locator("summary").click()
    yield "workspace-step"
    page.click('.pill-nav [data-tab="tab-runs"]')
    page.locator("#runs-panel .run-main").first.click()
    expect(page.locator("#runs-panel .run-steps").first).to_be_visible()
    yield "workspace-runs"
    page.click('.pill-nav [data-tab="tab-memory"]')
    expect(page.locator("#blocks-panel .block-card").first).to_be_visible()
    yield "workspace-memory"
    page.click('.pill-nav [data-tab="tab-archival"]')
    expect(page.locator("#archival")).to_be_visible()
    yield "workspace-archival"
    page.click('.pill-nav [data-tab="tab-files"]')
    expect(page.locator("#agent-files .attached-folder")).to_be_visible()
    yield "workspace-files"
    page.click('.pill-nav [data-tab="tab-tests"]')
    page.click("#new-test")
    expect(page.locator("#test-editor form")).to_be_visible()
    yield "workspace-tests"
    page.click("#run-all-tests")  # the fake model never says "order": expected against actual, side by side
    expect(page.locator(".test-run").first).to_have_attribute("data-status", "failed", timeout=RUN_S)
    page.locator(".test-run .test-result").first.scroll_into_view_if_needed()
    yield "workspace-test-results"
    page.click('.pill-nav [data-tab="tab-context"]')  # the next page load opens on the usual tab


def _import_states(page, data):
    page.goto("/")
    page.set_input_files("#import-form input[type=file]", str(data["af"]))
    page.click("#preview-import")
    expect(page.locator("#import-preview")).to_be_visible()
    yield "import-preview"
    page.evaluate("document.getElementById('import-form').submit()")  # without htmx: the import page
    expect(page.locator("h1")).to_contain_text("Import agent file")
    yield "import"


def _check(page, name: str, width: int, problems: list[str]) -> None:
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        found = _audit(page)
        problems += [f"{name} {width} {theme}: {p}" for p in found]
        _shot(page, f"layout-{name}-{width}-{theme}")


def test_every_page_fits_and_reads_at_each_width_in_both_themes(signed_in, account, fake_llm, tmp_path):
    data = in_thread(_seed, account, fake_llm, tmp_path)  # the runs send events: off the browser's event loop
    page = signed_in.new_page()
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        for name, url in _pages(data):
            page.goto(url)
            if name == "replay":  # the audit sees the replay with three models side by side
                expect(page.locator("#replay-columns .replay-col[data-model]")).to_have_count(len(REPLAY_MODELS))
            if name == "workspace":
                expect(page.locator("#attached-tools")).to_contain_text("send_message_to_agent_and_wait_for_reply")
            _check(page, name, width, problems)
            if name == "workspace":
                for state in _workspace_states(page, width, data):
                    _check(page, state, width, problems)
        for state in _import_states(page, data):
            _check(page, state, width, problems)
    assert problems == [], "\n".join(problems)


def test_login_page_fits_and_reads_at_each_width_in_both_themes(chromium, live_server_url, account):
    context = chromium.new_context(base_url=live_server_url)
    page = context.new_page()
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        page.goto("/login/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "wrong password")
        page.click("button[type=submit]")
        expect(page.locator("#login-error")).to_be_visible()
        _check(page, "login", width, problems)
    before = page.get_attribute("html", "data-theme")
    page.click("#theme-toggle")  # signed out too, the theme can be picked
    expect(page.locator("html")).not_to_have_attribute("data-theme", before)
    context.close()
    assert problems == [], "\n".join(problems)


def _one_turn(account, fake_llm) -> tuple[Agent, Step]:
    agent = make_agent(account.org, name="Layout")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello."}))
    in_thread(run_agent, agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Hi"}])
    return agent, Step.objects.get(agent=agent)


def _width(page, sel: str) -> float:
    return page.locator(sel).bounding_box()["width"]


def _drag(page, sel: str, dx: int) -> None:
    box = page.locator(sel).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx / 2, y)
    page.mouse.move(x + dx, y)
    page.mouse.up()


def test_splitters_resize_the_panes_and_the_widths_are_remembered(signed_in, account, fake_llm):
    agent, _ = _one_turn(account, fake_llm)
    page = signed_in.new_page()
    page.set_viewport_size({"width": 1600, "height": 900})
    page.goto(f"/agents/{agent.id}/")
    left, right = _width(page, "#settings-pane"), _width(page, "#inspector")
    _drag(page, ".splitter[data-split=left]", 80)
    _drag(page, ".splitter[data-split=right]", -120)
    assert abs(_width(page, "#settings-pane") - (left + 80)) <= 2
    assert abs(_width(page, "#inspector") - (right + 120)) <= 2
    stored = page.evaluate("JSON.parse(localStorage.getItem('aide-layout'))")
    assert abs(stored["left"] - (left + 80)) <= 2 and abs(stored["right"] - (right + 120)) <= 2

    page.reload()
    assert abs(_width(page, "#settings-pane") - (left + 80)) <= 2
    assert abs(_width(page, "#inspector") - (right + 120)) <= 2
    page.focus(".splitter[data-split=left]")
    page.keyboard.press("ArrowRight")  # the keyboard resizes too, 24 px a press
    assert abs(_width(page, "#settings-pane") - (left + 104)) <= 2
    _drag(page, ".splitter[data-split=left]", 2000)  # never past 30 % of the window: the conversation keeps its room
    assert _width(page, "#settings-pane") <= 1600 * 0.30 + 1
    assert _width(page, "#conversation-pane") >= 360
    page.dblclick(".splitter[data-split=right]")  # back to the default
    assert abs(_width(page, "#inspector") - right) <= 2
    page.reload()
    assert abs(_width(page, "#inspector") - right) <= 2
    assert page.evaluate("document.documentElement.scrollWidth") <= 1600


def test_inspector_is_a_drawer_between_768_and_1280(signed_in, account, fake_llm):
    agent, step = _one_turn(account, fake_llm)
    page = signed_in.new_page()
    page.set_viewport_size({"width": 1024, "height": 768})
    page.emulate_media(reduced_motion="reduce")  # no slide-in: the drawer's box is final when it shows
    page.goto(f"/agents/{agent.id}/")
    inspector, toggle = page.locator("#inspector"), page.locator("#inspector-toggle")
    expect(page.locator("#settings-pane")).to_be_visible()
    expect(page.locator("#conversation")).to_be_visible()
    expect(page.locator(".ws-tabs")).to_be_hidden()
    expect(inspector).to_be_hidden()
    assert (
        _width(page, "#settings-pane") + _width(page, "#conversation-pane") >= 1024 - 10
    )  # the two panes fill the window

    toggle.click()
    expect(inspector).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    box = inspector.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 1024 + 0.5 and box["width"] >= 400
    page.click("#inspector-close")
    expect(inspector).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")

    toggle.click()
    expect(inspector).to_be_visible()
    page.keyboard.press("Escape")
    expect(inspector).to_be_hidden()
    toggle.click()
    page.mouse.click(100, 400)  # outside the drawer, on the backdrop
    expect(inspector).to_be_hidden()
    expect(page.locator("#settings-pane")).to_be_visible()

    # a step chip in the conversation opens the drawer on that step
    page.locator(f'#conversation .step-chip[data-step="{step.id}"]').first.click()
    expect(inspector).to_be_visible()
    expect(page.locator("#step-detail .step-card strong").first).to_have_text(f"Step {_number(step)}")
    assert _audit(page) == []

    page.set_viewport_size({"width": 1400, "height": 800})  # wide again: three panes, no drawer left open
    expect(page.locator("body.inspector-open")).to_have_count(0)
    expect(toggle).to_be_hidden()
    expect(inspector).to_be_visible()
    assert inspector.bounding_box()["x"] > _width(page, "#settings-pane")


def test_one_pane_at_a_time_with_tabs_below_768(signed_in, account, fake_llm):
    agent, step = _one_turn(account, fake_llm)
    page = signed_in.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/agents/{agent.id}/")
    tabs = page.locator(".ws-tabs [role=tab]")
    expect(tabs).to_have_text(["Conversation", "Agent", "Context"])
    # every page's link is in view on a phone, none hidden behind the nav's own scroll (down to 360 px)
    for width in (390, 360):
        page.set_viewport_size({"width": width, "height": 844})
        nav = page.evaluate(
            "(() => { const n = document.querySelector('.topbar nav'); return [n.scrollWidth, n.clientWidth]; })()"
        )
        assert nav[0] <= nav[1], (width, nav)
    page.set_viewport_size({"width": 390, "height": 844})
    panes = {
        "conversation": page.locator("#conversation-pane"),
        "settings": page.locator("#settings-pane"),
        "inspector": page.locator("#inspector"),
    }

    def only(name: str) -> None:
        for key, pane in panes.items():
            expect(pane).to_be_visible() if key == name else expect(pane).to_be_hidden()
        expect(page.locator(f'.ws-tabs [data-pane="{name}"]')).to_have_attribute("aria-selected", "true")
        box = panes[name].bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 0.5

    only("conversation")
    expect(page.locator("#composer-input")).to_be_visible()
    expect(page.locator(".splitter").first).to_be_hidden()
    page.click('.ws-tabs [data-pane="settings"]')
    only("settings")
    expect(page.locator("#settings-form input[name=name]")).to_be_visible()
    page.click('.ws-tabs [data-pane="inspector"]')
    only("inspector")
    expect(page.locator("#context-panel .ctx-bar")).to_be_visible()
    page.click('.ws-tabs [data-pane="conversation"]')
    only("conversation")
    page.locator(f'#conversation .step-chip[data-step="{step.id}"]').first.click()  # opens the step in the Context tab
    only("inspector")
    expect(page.locator("#step-detail .step-card strong").first).to_have_text(f"Step {_number(step)}")
    assert _audit(page) == []


def _background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_theme_follows_the_system_until_picked_and_the_pick_is_remembered(chromium, live_server_url, account):
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(account.user)
    context = chromium.new_context(base_url=live_server_url, color_scheme="dark")
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server_url,
            }
        ]
    )
    page = context.new_page()
    page.goto("/tools/")
    root = page.locator("html")
    expect(root).to_have_attribute("data-theme", "dark")
    expect(root).to_have_attribute("data-theme-source", "system")
    dark_bg = _background(page)
    editor = page.evaluate("getComputedStyle(document.querySelector('.CodeMirror')).backgroundColor")
    assert editor == "rgb(26, 29, 36)"  # the code editor is dark too
    assert page.evaluate("getComputedStyle(document.documentElement).colorScheme") == "dark"  # native controls follow
    page.emulate_media(color_scheme="light")  # the system changes: the page follows at once
    expect(root).to_have_attribute("data-theme", "light")
    expect(page.locator("#theme-toggle")).to_have_attribute("title", "Switch to the dark theme")
    assert _background(page) != dark_bg
    assert (
        page.evaluate("getComputedStyle(document.querySelector('.CodeMirror')).backgroundColor") == "rgb(255, 255, 255)"
    )

    page.click("#theme-toggle")  # the person picks dark: the system no longer decides
    expect(root).to_have_attribute("data-theme", "dark")
    expect(root).to_have_attribute("data-theme-source", "picked")
    assert page.evaluate("localStorage.getItem('aide-theme')") == "dark"
    page.emulate_media(color_scheme="light")
    page.reload()
    expect(root).to_have_attribute("data-theme", "dark")
    assert _background(page) == dark_bg
    page.click("#theme-toggle")
    expect(root).to_have_attribute("data-theme", "light")
    page.goto("/settings/")  # remembered on every page
    expect(root).to_have_attribute("data-theme", "light")
    expect(page.locator("#theme-toggle")).to_have_attribute("title", "Switch to the dark theme")
    context.close()


def test_the_audit_reports_what_it_looks_for(chromium):
    """layout_checks.js on a page made wrong on purpose: each kind of problem is named, a sound page passes."""
    page = chromium.new_page(viewport={"width": 390, "height": 600})
    page.set_content("""<body style="margin:0;font:14px sans-serif;background:#fff;color:#111">
      <p id="fine">Readable text</p>
      <div id="wide" style="width:600px">Too wide for a phone</div>
      <p id="faint" style="color:#aaa">Faint grey text</p>
      <div style="position:relative;height:40px"><span id="a" style="position:absolute;left:0">First label</span>
        <span id="b" style="position:absolute;left:10px">Second label</span></div>
      <div style="display:flex;width:200px"><span style="flex:none;width:190px">x</span><input id="narrow" value="v" style="min-width:0"></div>
      <div style="overflow:hidden;width:80px"><span style="white-space:nowrap">clipped words that go on</span></div>
      <div style="overflow:hidden;text-overflow:ellipsis;white-space:nowrap;width:80px" title="an ellipsis, then a tooltip">
        <code>an ellipsis, then a tooltip</code></div>
      <div id="pane" style="overflow:auto;width:100px;height:40px"><div style="width:300px">pane content</div></div></body>""")
    found = "\n".join(page.evaluate(CHECKS))
    assert "horizontal scroll: document is 600px wide in 390px" in found
    assert 'cut off by the window (0..600 of 390): div#wide "Too wide for a phone"' in found
    assert 'p#faint "Faint grey text"' in found and "contrast 2.32 < 4.5" in found
    assert "overlap" in found and 'span#a "First label" / span#b "Second label"' in found
    assert "squeezed to" in found and "input#narrow" in found
    assert 'cut off by div "clipped words that go on": span "clipped words that go on"' in found
    assert "ellipsis" not in found  # truncated on purpose, with the full text in a tooltip
    assert "scrolls sideways (300px in 100px): div#pane" in found
    assert "p#fine" not in found

    # #e6e7eb at 40 % over #111318 is rgb(102, 104, 108): 3.32:1
    page.set_content(
        "<body style='margin:0;background:#111318;color:#e6e7eb'><p>Light on dark</p>"
        "<p style='opacity:.4'>Faded</p></body>"
    )
    assert page.evaluate(CHECKS) == [
        'contrast 3.32 < 4.5 (rgb(230, 231, 235) on rgb(17,19,24), opacity 0.4): p "Faded"'
    ]
    page.close()
