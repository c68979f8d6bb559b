"""Layout and theme in Chromium: every page at 390, 1024, 1280 and 1920 px wide, light and dark, has nothing cut off
or overlapping (element boxes inside the window or a scrolling pane, no horizontal scroll on the document) and its
text meets WCAG AA contrast against the background painted behind it (`layout_checks.js`). The workspace's
splitters remember their widths, the inspector is a drawer at tablet widths and the panes are tabs on a phone.
Screenshots of every page, size and theme go to test-artifacts/screenshots/layout/ (and /tmp/shots/ when it exists)."""

import json
import re
from pathlib import Path

from playwright.sync_api import expect

from core import agent_tests
from core.agentfile.exporter import agentfile_export
from core.models import Agent, Step
from core.runner import run_agent
from core.services import BlockInput
from memory import services as memory_services
from tests.e2e.conftest import SHOTS
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tools import services as tool_services

CHECKS = (Path(__file__).parent / "layout_checks.js").read_text()
WIDTHS = (390, 1024, 1280, 1920)
HEIGHT = {390: 844, 1024: 768, 1280: 800, 1920: 1080}
LONG = "Customer-support-agent-for-the-northern-european-region-with-an-unbroken-name"
LONG_ID = "x" * 120


def _seed(account, fake_llm, tmp_path) -> dict:
    """Agents, blocks, tools, runs and tests with long unbroken names and values, through the real services."""
    agent = make_agent(account.org, name=LONG, tags=["production-eu-north-1-very-long-tag-name", "support"],
                       memory_blocks=[BlockInput(label="persona", value="I am a helpful support agent. " * 8),
                                      BlockInput(label="customer_profile_with_a_long_label", value="Account " + LONG_ID)])
    make_agent(account.org, name="Ada")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "See https://example.com/" + "very-long-path/" * 12 + " for details."}))
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Where is my order " + LONG_ID + "?"}])
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Done."}))
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Thanks."}])
    step = Step.objects.filter(agent=agent).order_by("created_at").first()
    memory_services.passage_insert(agent=Agent.objects.get(pk=agent.id), text="Refund policy: " + LONG_ID, tags=["policy"])
    agent_tests.test_save(agent=Agent.objects.get(pk=agent.id), test={
        "name": "answers-about-the-order-status-with-an-unbroken-test-name-" + "y" * 40, "turns": ["Where is my order?"],
        "expect": {"reply": {"contains": "order"}}})
    tool = tool_services.tool_create(owner=account.org, source_code=(
        "def lookup_order_status_in_the_warehouse_system_v2(order_id: str) -> str:\n"
        '    """Look up an order.\n\n    Args:\n        order_id: The order id.\n    """\n    return order_id\n'))
    block = agent.blocks.get(label="customer_profile_with_a_long_label")
    path = tmp_path / "agent.af"
    path.write_text(json.dumps(agentfile_export(agent=Agent.objects.get(pk=agent.id)), default=str))
    return {"agent": agent, "step": step, "tool": tool, "block": block, "af": path}


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
    return [("agents", "/"), ("workspace", f"/agents/{a.id}/"), ("blocks", "/blocks/"),
            ("block", f"/blocks/{data['block'].id}/"), ("tools", f"/tools/?tool={data['tool'].id}"), ("new-tool", "/tools/"),
            ("settings", "/settings/"), ("replay", f"/agents/{a.id}/steps/{s.id}/replay/"), ("delete", f"/agents/{a.id}/delete/")]


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
    page.click('.pill-nav [data-tab="tab-tests"]')
    page.click("#new-test")
    expect(page.locator("#test-editor form")).to_be_visible()
    yield "workspace-tests"
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
    data = _seed(account, fake_llm, tmp_path)
    page = signed_in.new_page()
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        for name, url in _pages(data):
            page.goto(url)
            _check(page, name, width, problems)
            if name == "workspace":
                for state in _workspace_states(page, width, data):
                    _check(page, state, width, problems)
        for state in _import_states(page, data):
            _check(page, state, width, problems)
    Path("/tmp/layout-problems.txt").write_text("\n".join(problems))
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
    context.close()
    assert problems == [], "\n".join(problems)
